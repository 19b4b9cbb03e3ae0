/*
 * Compatibility with PyTorch's TCPStore and with PROTOCOL.md, byte for
 * byte:
 *  - PyTorch 1.13's Python client (legacy dialect) against tcpstore-server,
 *    and our library and CLI seeing the keys it wrote;
 *  - our client in the legacy dialect against PyTorch 1.13's own server;
 *  - our client's requests, both dialects, captured by a scripted fake
 *    server and compared with the bytes PROTOCOL.md prescribes;
 *  - raw modern-dialect requests to tcpstore-server and its exact replies.
 * The expected bytes are built here by a small encoder written from
 * PROTOCOL.md, not by the codec under test.  Tests that need torch skip
 * with a message when `/usr/bin/python3 -c 'import torch'` fails.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fccl/store.h"
#include "lib/expect.h"
#include "lib/proc.h"
#include "lib/srv.h"

#define PYTHON "/usr/bin/python3"

/* The server of the running test, stopped by the suite even when an
 * assertion ends the test early. */
static struct srv srv;

static void stop_server(void)
{
    srv_finish(&srv);
}

/* tests/py/<script> under $FCCL_SRCDIR (default: the current directory,
 * the source tree). */
static const char *py_script(const char *script, char *buf, size_t len)
{
    const char *d = getenv("FCCL_SRCDIR");
    snprintf(buf, len, "%s/tests/py/%s", d && *d ? d : ".", script);
    return buf;
}

static int have_torch(void)
{
    static int have = -1;
    if (have < 0)
        have = system(PYTHON " -c 'import torch' >/dev/null 2>&1") == 0;
    return have;
}

/* torch 1.x: its server speaks the legacy dialect; 2.x's (the classic
 * one, Debian 13's 2.6) the modern one, which our legacy client is not
 * for. */
static int torch_is_1x(void)
{
    static int one = -1;
    if (one < 0)
        one = system(PYTHON " -c 'import sys, torch; sys.exit(torch."
                            "__version__.startswith(\"1.\") == 0)' "
                            ">/dev/null 2>&1") == 0;
    return one;
}

/* PyTorch's own TCPStore server (legacy dialect on 1.13). */
static void start_pytorch(struct srv *s)
{
    char py[512];
    const char *argv[] = {PYTHON, py_script("pt_server.py", py, sizeof(py)),
                          NULL};
    srv_start_argv(s, argv, 60);
}

/* One suite: Criterion 2.4's runner leaks a little under ASan when two
 * suites run in parallel jobs. */
TestSuite(compat, .fini = stop_server, .timeout = 120);

/* ---- a byte builder from PROTOCOL.md: little-endian, u64-length strings */

struct bb {
    uint8_t b[8192];
    size_t n;
};

static void bb_u8(struct bb *b, uint8_t v) { b->b[b->n++] = v; }

static void bb_le(struct bb *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        bb_u8(b, (uint8_t)(v >> (8 * i)));
}

static void bb_u64(struct bb *b, uint64_t v) { bb_le(b, v, 8); }

static void bb_strn(struct bb *b, const void *p, size_t n)
{
    bb_u64(b, n);
    memcpy(b->b + b->n, p, n);
    b->n += n;
}

static void bb_str(struct bb *b, const char *s) { bb_strn(b, s, strlen(s)); }

/* "u64 n, n keys" */
static void bb_keys(struct bb *b, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    bb_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++)
        bb_str(b, va_arg(ap, const char *));
    va_end(ap);
}

static void hex(const uint8_t *p, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < outlen; i++)
        o += (size_t)snprintf(out + o, outlen - o, "%02x ", p[i]);
    out[o] = '\0';
}

/* ---- a scripted fake server: expects exact request bytes per step ---- */

#define MAX_STEPS 40

struct step {
    struct bb req, rep;
    int wild_from, wild_len; /* request bytes not compared (PING nonce) */
    int echo;                /* reply = the wild bytes */
};

struct fake {
    int lfd, port;
    struct step steps[MAX_STEPS];
    int nsteps;
    int done;        /* steps that matched */
    char error[2048];
};

static struct step *fake_step(struct fake *f)
{
    struct step *s = &f->steps[f->nsteps++];
    memset(s, 0, sizeof(*s));
    return s;
}

static int read_exact(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 5000) <= 0)
            return -1;
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void *fake_run(void *arg)
{
    struct fake *f = arg;
    struct pollfd pf = {.fd = f->lfd, .events = POLLIN};
    if (poll(&pf, 1, 10000) <= 0) {
        snprintf(f->error, sizeof(f->error), "no connection");
        return NULL;
    }
    int fd = accept(f->lfd, NULL, NULL);
    for (int i = 0; i < f->nsteps; i++) {
        struct step *s = &f->steps[i];
        uint8_t got[8192];
        if (read_exact(fd, got, s->req.n) < 0) {
            snprintf(f->error, sizeof(f->error),
                     "step %d: fewer than %zu request bytes", i, s->req.n);
            break;
        }
        if (s->wild_len)
            memcpy(s->req.b + s->wild_from, got + s->wild_from,
                   (size_t)s->wild_len);
        if (memcmp(got, s->req.b, s->req.n) != 0) {
            char g[1000], w[1000];
            hex(got, s->req.n, g, sizeof(g));
            hex(s->req.b, s->req.n, w, sizeof(w));
            snprintf(f->error, sizeof(f->error),
                     "step %d:\n got  %s\n want %s", i, g, w);
            break;
        }
        if (s->echo)
            memcpy(s->rep.b, got + s->wild_from, (size_t)s->wild_len);
        if (s->rep.n && write(fd, s->rep.b, s->rep.n) != (ssize_t)s->rep.n)
            break;
        f->done = i + 1;
    }
    /* Nothing more may arrive: the client sent exactly what was due. */
    uint8_t extra;
    struct pollfd pe = {.fd = fd, .events = POLLIN};
    if (!f->error[0] && poll(&pe, 1, 50) > 0 && read(fd, &extra, 1) == 1)
        snprintf(f->error, sizeof(f->error), "unexpected extra byte %02x",
                 extra);
    close(fd);
    return NULL;
}

static void fake_listen(struct fake *f)
{
    memset(f, 0, sizeof(*f));
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    cr_assert(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
    cr_assert(listen(f->lfd, 4) == 0);
    getsockname(f->lfd, (struct sockaddr *)&a, &l);
    f->port = ntohs(a.sin_port);
}

static fccl_store_t *fake_connect(struct fake *f, pthread_t *th,
                                  fccl_dialect_t d)
{
    pthread_create(th, NULL, fake_run, f);
    return srv_store_open_as(f->port, 0, d, 5000);
}

static void fake_finish(struct fake *f, pthread_t th, fccl_store_t *s)
{
    fccl_store_close(s);
    pthread_join(th, NULL);
    close(f->lfd);
    cr_assert(!f->error[0], "%s", f->error);
    cr_assert_eq(f->done, f->nsteps, "%d of %d steps", f->done, f->nsteps);
}

static void want_bytes(int rc, void *v, size_t len, const void *want,
                       size_t wlen)
{
    cr_assert_eq(rc, FCCL_OK, "%s", fccl_last_error());
    cr_assert(len == wlen && memcmp(v, want, len) == 0,
              "got '%.*s' (%zu bytes), want %zu bytes", (int)len, (char *)v,
              len, wlen);
    free(v);
}

static void want_val(int rc, void *v, size_t len, const char *want)
{
    want_bytes(rc, v, len, want, strlen(want));
}

/* get `key` from st: it must hold the wlen bytes of want */
#define GET_IS(st, key, want, wlen)                                            \
    do {                                                                       \
        void *v_ = NULL;                                                       \
        size_t l_ = 0;                                                         \
        int rc_ = fccl_store_get(st, key, &v_, &l_, 2000);                     \
        want_bytes(rc_, v_, l_, want, wlen);                                   \
    } while (0)

Test(compat, wire_modern_client_sends_protocol_bytes)
{
    struct fake f;
    fake_listen(&f);
    struct step *s;
    /* VALIDATE: 00 CE F7 85 3C, no reply; in the same send the fccl
     * hello, PING 0D with nonce FCC10000, which tcpstore-server
     * acknowledges with FCC18000 (docs/PROTOCOL-fccl.md) */
    s = fake_step(&f);
    const uint8_t validate[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C,
                                0x0D, 0x00, 0x00, 0xC1, 0xFC};
    memcpy(s->req.b, validate, sizeof(validate));
    s->req.n = sizeof(validate);
    bb_le(&s->rep, 0xFCC18000u, 4);
    /* The first reply-less write of a connection: the acknowledged hello
     * said the server has SYNC, so no lone SYNC probes it.
     * SET "/k" = "v": 01, 02 00.. "/k", 01 00.. "v", then SYNC -> 00 */
    s = fake_step(&f);
    const uint8_t set[] = {0x01, 2, 0, 0, 0, 0, 0, 0, 0, '/', 'k',
                           1,    0, 0, 0, 0, 0, 0, 0, 'v'};
    memcpy(s->req.b, set, sizeof(set));
    s->req.n = sizeof(set);
    bb_u8(&s->req, 0x81);
    bb_u8(&s->rep, 0);
    /* get of a present key: CHECK + GET in one send */
    s = fake_step(&f);
    bb_u8(&s->req, 5), bb_keys(&s->req, 1, "/k");
    bb_u8(&s->req, 3), bb_str(&s->req, "/k");
    bb_u8(&s->rep, 0), bb_str(&s->rep, "val");
    /* get of a missing key: CHECK+GET (NOT_READY, empty), WAIT, GET */
    s = fake_step(&f);
    bb_u8(&s->req, 5), bb_keys(&s->req, 1, "/w");
    bb_u8(&s->req, 3), bb_str(&s->req, "/w");
    bb_u8(&s->rep, 1), bb_str(&s->rep, "");
    s = fake_step(&f);
    bb_u8(&s->req, 6), bb_keys(&s->req, 1, "/w");
    bb_u8(&s->rep, 0);
    s = fake_step(&f);
    bb_u8(&s->req, 3), bb_str(&s->req, "/w");
    bb_str(&s->rep, "late");
    /* ADD "/n" -7 -> i64 */
    s = fake_step(&f);
    bb_u8(&s->req, 4), bb_str(&s->req, "/n"), bb_u64(&s->req, (uint64_t)-7);
    bb_u64(&s->rep, (uint64_t)-7);
    /* COMPARE_SET */
    s = fake_step(&f);
    bb_u8(&s->req, 2), bb_str(&s->req, "/c"), bb_str(&s->req, "e");
    bb_str(&s->req, "d");
    bb_str(&s->rep, "d");
    /* CHECK two keys */
    s = fake_step(&f);
    bb_u8(&s->req, 5), bb_keys(&s->req, 2, "/k", "/n");
    bb_u8(&s->rep, 0);
    /* DELETE_KEY, GETNUMKEYS, APPEND */
    s = fake_step(&f);
    bb_u8(&s->req, 8), bb_str(&s->req, "/k");
    bb_u64(&s->rep, 1);
    s = fake_step(&f);
    bb_u8(&s->req, 7);
    bb_u64(&s->rep, 42);
    s = fake_step(&f);
    bb_u8(&s->req, 9), bb_str(&s->req, "/ap"), bb_str(&s->req, "x");
    bb_u8(&s->req, 0x81), bb_u8(&s->rep, 0);
    /* MULTI_SET, then multi_get = CHECK + MULTI_GET */
    s = fake_step(&f);
    bb_u8(&s->req, 11), bb_u64(&s->req, 2);
    bb_str(&s->req, "/m1"), bb_str(&s->req, "a");
    bb_str(&s->req, "/m2"), bb_str(&s->req, "");
    bb_u8(&s->req, 0x81), bb_u8(&s->rep, 0);
    s = fake_step(&f);
    bb_u8(&s->req, 5), bb_keys(&s->req, 2, "/m1", "/m2");
    bb_u8(&s->req, 10), bb_keys(&s->req, 2, "/m1", "/m2");
    bb_u8(&s->rep, 0), bb_str(&s->rep, "a"), bb_str(&s->rep, "");
    /* PING: 0D + u32 nonce, echoed */
    s = fake_step(&f);
    bb_u8(&s->req, 13), bb_le(&s->req, 0, 4);
    s->wild_from = 1, s->wild_len = 4, s->echo = 1;
    s->rep.n = 4;
    /* A WAIT that times out: CANCEL_WAIT (0C) -> 01, then CHECK per key */
    s = fake_step(&f);
    bb_u8(&s->req, 6), bb_keys(&s->req, 1, "/z");
    s = fake_step(&f);
    bb_u8(&s->req, 12);
    bb_u8(&s->rep, 1);
    s = fake_step(&f);
    bb_u8(&s->req, 5), bb_keys(&s->req, 1, "/z");
    bb_u8(&s->rep, 1);
    /* queues: push, len, pop */
    s = fake_step(&f);
    bb_u8(&s->req, 14), bb_str(&s->req, "/q"), bb_str(&s->req, "x");
    bb_u8(&s->req, 0x81), bb_u8(&s->rep, 0);
    s = fake_step(&f);
    bb_u8(&s->req, 16), bb_str(&s->req, "/q");
    bb_u64(&s->rep, 1);
    s = fake_step(&f);
    bb_u8(&s->req, 15), bb_str(&s->req, "/q");
    bb_u64(&s->rep, 1), bb_str(&s->rep, "x");
    /* LIST_KEYS 0x80 prefix -> u64 n, n keys */
    s = fake_step(&f);
    bb_u8(&s->req, 0x80), bb_str(&s->req, "/p");
    bb_u64(&s->rep, 2), bb_str(&s->rep, "/pa"), bb_str(&s->rep, "/pb");

    pthread_t th;
    fccl_store_t *st = fake_connect(&f, &th, FCCL_DIALECT_MODERN);
    void *v;
    size_t len;
    int64_t n;
    int all;
    cr_assert_eq(fccl_store_set(st, "k", "v", 1), FCCL_OK);
    GET_IS(st, "k", "val", strlen("val"));
    GET_IS(st, "w", "late", strlen("late"));
    cr_assert_eq(fccl_store_add(st, "n", -7, &n), FCCL_OK);
    cr_assert_eq(n, -7);
    cr_assert_eq(fccl_store_compare_set(st, "c", "e", 1, "d", 1, &v, &len),
                 FCCL_OK);
    want_val(FCCL_OK, v, len, "d");
    const char *kn[2] = {"k", "n"};
    cr_assert_eq(fccl_store_check(st, kn, 2, &all), FCCL_OK);
    cr_assert_eq(all, 1);
    int del;
    cr_assert_eq(fccl_store_delete(st, "k", &del), FCCL_OK);
    cr_assert_eq(del, 1);
    cr_assert_eq(fccl_store_num_keys(st, &n), FCCL_OK);
    cr_assert_eq(n, 42);
    cr_assert_eq(fccl_store_append(st, "ap", "x", 1), FCCL_OK);
    const char *mk[2] = {"m1", "m2"};
    const void *mv[2] = {"a", ""};
    size_t ml[2] = {1, 0};
    cr_assert_eq(fccl_store_multi_set(st, mk, mv, ml, 2), FCCL_OK);
    void *vals[2];
    size_t lens[2];
    cr_assert_eq(fccl_store_multi_get(st, mk, 2, vals, lens, 1000), FCCL_OK);
    want_val(FCCL_OK, vals[0], lens[0], "a");
    want_val(FCCL_OK, vals[1], lens[1], "");
    cr_assert_eq(fccl_store_ping(st, NULL), FCCL_OK, "%s", fccl_last_error());
    const char *z[1] = {"z"};
    cr_assert_eq(fccl_store_wait(st, z, 1, 100), FCCL_ERR_TIMEOUT);
    cr_assert(strstr(fccl_last_error(), "missing: '/z'"), "%s",
              fccl_last_error());
    cr_assert_eq(fccl_store_queue_push(st, "q", "x", 1), FCCL_OK);
    cr_assert_eq(fccl_store_queue_len(st, "q", &n), FCCL_OK);
    cr_assert_eq(n, 1);
    cr_assert_eq(fccl_store_queue_pop(st, "q", 0, &v, &len, -1), FCCL_OK);
    want_val(FCCL_OK, v, len, "x");
    char **keys;
    size_t nk;
    cr_assert_eq(fccl_store_list_keys(st, "p", &keys, &nk), FCCL_OK);
    cr_assert(nk == 2 && !strcmp(keys[0], "pa") && !strcmp(keys[1], "pb"));
    fccl_store_free_keys(keys, nk);
    fake_finish(&f, th, st);
}

Test(compat, wire_legacy_client_sends_protocol_bytes)
{
    struct fake f;
    fake_listen(&f);
    struct step *s;
    /* no VALIDATE; SET is type 0, confirmed by a GETNUMKEYS (6) round trip
     * (the legacy dialect has no SYNC) */
    s = fake_step(&f);
    bb_u8(&s->req, 0), bb_str(&s->req, "/k"), bb_str(&s->req, "v");
    bb_u8(&s->req, 6), bb_u64(&s->rep, 1);
    /* get: WAIT (5) then GET (2), two round trips as PyTorch 1.13 does */
    s = fake_step(&f);
    bb_u8(&s->req, 5), bb_keys(&s->req, 1, "/k");
    bb_u8(&s->rep, 0);
    s = fake_step(&f);
    bb_u8(&s->req, 2), bb_str(&s->req, "/k");
    bb_str(&s->rep, "v");
    /* ADD 3, COMPARE_SET 1, CHECK 4, GETNUMKEYS 6, DELETE_KEY 8 */
    s = fake_step(&f);
    bb_u8(&s->req, 3), bb_str(&s->req, "/n"), bb_u64(&s->req, 2);
    bb_u64(&s->rep, 2);
    s = fake_step(&f);
    bb_u8(&s->req, 1), bb_str(&s->req, "/c"), bb_str(&s->req, "");
    bb_str(&s->req, "new");
    bb_str(&s->rep, "new");
    s = fake_step(&f);
    bb_u8(&s->req, 4), bb_keys(&s->req, 1, "/c");
    bb_u8(&s->rep, 1);
    s = fake_step(&f);
    bb_u8(&s->req, 6);
    bb_u64(&s->rep, 3);
    s = fake_step(&f);
    bb_u8(&s->req, 8), bb_str(&s->req, "/c");
    bb_u64(&s->rep, 0);
    /* multi_get: one WAIT for all, then the GETs in one send */
    s = fake_step(&f);
    bb_u8(&s->req, 5), bb_keys(&s->req, 2, "/a", "/b");
    bb_u8(&s->rep, 0);
    s = fake_step(&f);
    bb_u8(&s->req, 2), bb_str(&s->req, "/a");
    bb_u8(&s->req, 2), bb_str(&s->req, "/b");
    bb_str(&s->rep, "A"), bb_str(&s->rep, "BB");
    /* multi_set: SETs in one send */
    s = fake_step(&f);
    bb_u8(&s->req, 0), bb_str(&s->req, "/a"), bb_str(&s->req, "1");
    bb_u8(&s->req, 0), bb_str(&s->req, "/b"), bb_str(&s->req, "2");
    bb_u8(&s->req, 6), bb_u64(&s->rep, 3);

    pthread_t th;
    fccl_store_t *st = fake_connect(&f, &th, FCCL_DIALECT_LEGACY);
    void *v;
    size_t len;
    int64_t n;
    int all, del;
    cr_assert_eq(fccl_store_set(st, "k", "v", 1), FCCL_OK);
    GET_IS(st, "k", "v", strlen("v"));
    cr_assert_eq(fccl_store_add(st, "n", 2, &n), FCCL_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(fccl_store_compare_set(st, "c", "", 0, "new", 3, &v, &len),
                 FCCL_OK);
    want_val(FCCL_OK, v, len, "new");
    const char *c[1] = {"c"};
    cr_assert_eq(fccl_store_check(st, c, 1, &all), FCCL_OK);
    cr_assert_eq(all, 0);
    cr_assert_eq(fccl_store_num_keys(st, &n), FCCL_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(fccl_store_delete(st, "c", &del), FCCL_OK);
    cr_assert_eq(del, 0);
    const char *ab[2] = {"a", "b"};
    void *vals[2];
    size_t lens[2];
    cr_assert_eq(fccl_store_multi_get(st, ab, 2, vals, lens, 1000), FCCL_OK);
    want_val(FCCL_OK, vals[0], lens[0], "A");
    want_val(FCCL_OK, vals[1], lens[1], "BB");
    const void *mv[2] = {"1", "2"};
    size_t ml[2] = {1, 1};
    cr_assert_eq(fccl_store_multi_set(st, ab, mv, ml, 2), FCCL_OK);
    /* Not in 1.13: refused locally, nothing sent. */
    cr_assert_eq(fccl_store_append(st, "a", "x", 1), FCCL_ERR_UNSUPPORTED);
    cr_assert_eq(fccl_store_ping(st, NULL), FCCL_ERR_UNSUPPORTED);
    fake_finish(&f, th, st);
}

/* ---- raw modern bytes to tcpstore-server, exact replies ---- */

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    return fd;
}

/* Send req; the reply must be exactly rep (and nothing more yet). */
static void exchange(int fd, const struct bb *req, const struct bb *rep,
                     const char *what)
{
    cr_assert(write(fd, req->b, req->n) == (ssize_t)req->n);
    uint8_t got[8192];
    if (rep->n)
        cr_assert(read_exact(fd, got, rep->n) == 0, "%s: no reply", what);
    if (memcmp(got, rep->b, rep->n) != 0) {
        char g[1000], w[1000];
        hex(got, rep->n, g, sizeof(g));
        hex(rep->b, rep->n, w, sizeof(w));
        cr_assert_fail("%s:\n got  %s\n want %s", what, g, w);
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 20), 0, "%s: more bytes than due", what);
}

#define EX(fd, what, REQ, REP)                                                 \
    do {                                                                       \
        struct bb q_ = {.n = 0}, r_ = {.n = 0};                                \
        struct bb *q = &q_, *r = &r_;                                          \
        (void)r;                                                               \
        REQ;                                                                   \
        REP;                                                                   \
        exchange(fd, q, r, what);                                              \
    } while (0)

Test(compat, wire_server_replies_match_protocol_md)
{
    srv_start_local(&srv, NULL);
    int fd = raw_connect(srv.port);
    EX(fd, "VALIDATE", (bb_u8(q, 0), bb_le(q, 0x3C85F7CE, 4)), (void)0);
    EX(fd, "SET", (bb_u8(q, 1), bb_str(q, "/k"), bb_str(q, "v")), (void)0);
    EX(fd, "GET", (bb_u8(q, 3), bb_str(q, "/k")), bb_str(r, "v"));
    EX(fd, "ADD", (bb_u8(q, 4), bb_str(q, "/n"), bb_u64(q, 5)),
       bb_u64(r, 5));
    EX(fd, "ADD neg", (bb_u8(q, 4), bb_str(q, "/n"), bb_u64(q, (uint64_t)-7)),
       bb_u64(r, (uint64_t)-2));
    EX(fd, "GET after ADD", (bb_u8(q, 3), bb_str(q, "/n")), bb_str(r, "-2"));
    EX(fd, "CHECK ready", (bb_u8(q, 5), bb_keys(q, 2, "/k", "/n")),
       bb_u8(r, 0));
    EX(fd, "CHECK not ready", (bb_u8(q, 5), bb_keys(q, 2, "/k", "/x")),
       bb_u8(r, 1));
    EX(fd, "GETNUMKEYS", bb_u8(q, 7), bb_u64(r, 2));
    EX(fd, "COMPARE_SET swap",
       (bb_u8(q, 2), bb_str(q, "/k"), bb_str(q, "v"), bb_str(q, "w")),
       bb_str(r, "w"));
    EX(fd, "COMPARE_SET mismatch",
       (bb_u8(q, 2), bb_str(q, "/k"), bb_str(q, "v"), bb_str(q, "z")),
       bb_str(r, "w"));
    EX(fd, "COMPARE_SET missing+expected",
       (bb_u8(q, 2), bb_str(q, "/m"), bb_str(q, "x"), bb_str(q, "y")),
       bb_str(r, "x"));
    EX(fd, "COMPARE_SET missing+empty",
       (bb_u8(q, 2), bb_str(q, "/m"), bb_str(q, ""), bb_str(q, "y")),
       bb_str(r, "y"));
    EX(fd, "DELETE_KEY", (bb_u8(q, 8), bb_str(q, "/m")), bb_u64(r, 1));
    EX(fd, "DELETE_KEY again", (bb_u8(q, 8), bb_str(q, "/m")), bb_u64(r, 0));
    EX(fd, "APPEND", (bb_u8(q, 9), bb_str(q, "/a"), bb_str(q, "x")), (void)0);
    EX(fd, "APPEND more", (bb_u8(q, 9), bb_str(q, "/a"), bb_strn(q, "\0y", 2)),
       (void)0);
    EX(fd, "MULTI_GET", (bb_u8(q, 10), bb_keys(q, 3, "/a", "/n", "/k")),
       (bb_strn(r, "x\0y", 3), bb_str(r, "-2"), bb_str(r, "w")));
    EX(fd, "MULTI_SET",
       (bb_u8(q, 11), bb_u64(q, 2), bb_str(q, "/s1"), bb_str(q, "1"),
        bb_str(q, "/s2"), bb_str(q, "")),
       (void)0);
    EX(fd, "GET empty", (bb_u8(q, 3), bb_str(q, "/s2")), bb_str(r, ""));
    EX(fd, "PING", (bb_u8(q, 13), bb_le(q, 0xDEADBEEF, 4)),
       bb_le(r, 0xDEADBEEF, 4));
    EX(fd, "WAIT present", (bb_u8(q, 6), bb_keys(q, 1, "/s1")), bb_u8(r, 0));
    EX(fd, "WAIT missing", (bb_u8(q, 6), bb_keys(q, 1, "/none")), (void)0);
    EX(fd, "CANCEL_WAIT", bb_u8(q, 12), bb_u8(r, 1));
    EX(fd, "QUEUE_PUSH", (bb_u8(q, 14), bb_str(q, "/q"), bb_str(q, "e1")),
       (void)0);
    EX(fd, "QUEUE_LEN", (bb_u8(q, 16), bb_str(q, "/q")), bb_u64(r, 1));
    EX(fd, "QUEUE_POP", (bb_u8(q, 15), bb_str(q, "/q")),
       (bb_u64(r, 1), bb_str(r, "e1")));
    EX(fd, "QUEUE_POP empty", (bb_u8(q, 15), bb_str(q, "/q")), bb_u64(r, 0));
    EX(fd, "LIST_KEYS", (bb_u8(q, 0x80), bb_str(q, "/s")),
       (bb_u64(r, 2), bb_str(r, "/s1"), bb_str(r, "/s2")));
    /* Pipelined in one write, answered in order. */
    EX(fd, "pipelined",
       (bb_u8(q, 1), bb_str(q, "/p"), bb_str(q, "1"), bb_u8(q, 4),
        bb_str(q, "/p"), bb_u64(q, 1), bb_u8(q, 3), bb_str(q, "/p"),
        bb_u8(q, 5), bb_keys(q, 1, "/p")),
       (bb_u64(r, 2), bb_str(r, "2"), bb_u8(r, 0)));
    close(fd);
    srv_stop(&srv);
}

/* ---- PyTorch 1.13 ---- */

#define NEED_TORCH()                                                           \
    do {                                                                       \
        if (!have_torch())                                                  \
            cr_skip("/usr/bin/python3 cannot import torch: skipping the "     \
                    "PyTorch compatibility test");                             \
    } while (0)

static struct th_result run(const char *const *argv, double timeout_s)
{
    struct th_cmd c = {.argv = argv, .timeout_s = timeout_s};
    struct th_result r;
    cr_assert_eq(th_run(&c, &r), 0, "cannot run %s", argv[0]);
    return r;
}

static struct th_result py(const char *addr, const char *a, const char *b,
                           const char *c)
{
    char script[512];
    const char *argv[] = {PYTHON,
                          py_script("pt_client.py", script, sizeof(script)),
                          addr, a, b, c, NULL};
    return run(argv, 90);
}

static struct th_result cli(const char *addr, const char *dialect,
                            const char *a, const char *b, const char *c)
{
    char bin[512];
    const char *argv[] = {th_bin("tcpstore", bin, sizeof(bin)),
                          "--addr", addr, "--dialect", dialect,
                          "--timeout", "5", a, b, c, NULL};
    return run(argv, 30);
}

/* A PyTorch 1.13 store keeps a second connection that never sends a
 * byte; --handshake-timeout closes it (issue 25), and the client does not
 * notice: its main connection, which joined with ADD, goes on. */
/* PyTorch 1.13's client never sends a byte on its second connection and
 * spins on it once the server closes it (issue 33): past the handshake
 * timeout that connection is kept, and the client stays idle. */
/* A store handle on srv (10 s timeout) in `dialect`. */
static fccl_store_t *connect_srv(fccl_dialect_t dialect)
{
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = srv.addr;
    o.timeout_ms = 10000;
    o.dialect = dialect;
    fccl_store_t *s = NULL;
    cr_assert_eq(fccl_store_connect(&o, &s), FCCL_OK, "%s",
                 fccl_last_error());
    return s;
}

Test(compat, pytorch_client_keeps_its_silent_connection)
{
    TH_LONG_CASE("an idle torch client for seconds");
    NEED_TORCH();
    srv_start_local(&srv, (const char *[]){"--handshake-timeout", "1",
                                           NULL});
    struct th_result r = py(srv.addr, "idle", "3", NULL);
    cr_assert_eq(r.status, 0, "torch client: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "OK"), "%s", r.out);
    const char *cpu = strstr(r.out, "cpu ");
    cr_assert(cpu, "%s", r.out);
    cr_assert_leq(atof(cpu + 4), 0.2, "the idle client used %s", cpu);
    th_result_free(&r);
    cr_assert_eq(srv_log_count(&srv, "(handshake-timeout)"), 0,
                 "the silent connection was closed");
    srv_finish(&srv);
}

Test(compat, pytorch_torch_client_against_our_server)
{
    NEED_TORCH();
    srv_start_local(&srv, NULL);
    fccl_store_t *s = connect_srv(FCCL_DIALECT_MODERN);
    cr_assert_eq(fccl_store_set(s, "from_c", "C\0side", 6), FCCL_OK);

    struct th_result r = py(srv.addr, "ops", NULL, NULL);
    cr_assert_eq(r.status, 0, "torch client: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "OK"), "%s", r.out);
    th_result_free(&r);

    /* What torch wrote, read back by our library (modern dialect) ... */
    void *v;
    size_t len;
    GET_IS(s, "a", "alpha", strlen("alpha"));
    GET_IS(s, "cnt", "-2", strlen("-2"));
    GET_IS(s, "cs", "v2", strlen("v2"));
    GET_IS(s, "empty", "", strlen(""));
    cr_assert_eq(fccl_store_get(s, "bin", &v, &len, 1000), FCCL_OK);
    cr_assert_eq(len, 256);
    for (int i = 0; i < 256; i++)
        cr_assert_eq(((uint8_t *)v)[i], i);
    free(v);
    const char *gone[2] = {"gone", "nokey"};
    for (int i = 0; i < 2; i++) {
        int all;
        cr_assert_eq(fccl_store_check(s, &gone[i], 1, &all), FCCL_OK);
        cr_assert_eq(all, 0, "%s exists", gone[i]);
    }
    int64_t n;
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 7, "6 keys + init/");
    fccl_store_close(s);

    /* ... and by the CLI, in both dialects. */
    th_expect_out(cli(srv.addr, "modern", "get", "cnt", NULL), 0, "-2", 2);
    th_expect_out(cli(srv.addr, "legacy", "get", "a", NULL), 0, "alpha", 5);
    th_expect_out(cli(srv.addr, "modern", "get", "from_c", NULL), 0, "C\0side",
                  6);
    th_expect_out(cli(srv.addr, "modern", "check", "a", "cs"), 0, "", 0);
    th_expect_out(cli(srv.addr, "modern", "keys", "c", NULL), 0, "cnt\ncs\n",
                  7);
    char bin[512];
    const char *argv[] = {th_bin("tcpstore", bin, sizeof(bin)), "--addr",
                          srv.addr, "--raw-keys", "get", "init/", NULL};
    th_expect_out(run(argv, 30), 0, "1", 1);
    srv_stop(&srv);
}

Test(compat, pytorch_our_legacy_client_against_pytorch_server)
{
    NEED_TORCH();
    if (!torch_is_1x())
        cr_skip("torch 2.x's server speaks the modern dialect only");
    start_pytorch(&srv);
    fccl_store_t *s = connect_srv(FCCL_DIALECT_LEGACY);
    void *v;
    size_t len;
    int64_t n;
    int all, del;
    cr_assert_eq(fccl_store_set(s, "from_c", "C\0side", 6), FCCL_OK);
    GET_IS(s, "from_c", "C\0side", 6);
    cr_assert_eq(fccl_store_set(s, "e", "", 0), FCCL_OK);
    GET_IS(s, "e", "", strlen(""));
    cr_assert_eq(fccl_store_add(s, "n", 5, &n), FCCL_OK);
    cr_assert_eq(n, 5);
    cr_assert_eq(fccl_store_add(s, "n", -7, &n), FCCL_OK);
    cr_assert_eq(n, -2);
    GET_IS(s, "n", "-2", strlen("-2"));
    cr_assert_eq(fccl_store_compare_set(s, "c", "", 0, "v1", 2, &v, &len),
                 FCCL_OK);
    want_val(FCCL_OK, v, len, "v1");
    cr_assert_eq(fccl_store_compare_set(s, "c", "no", 2, "v3", 2, &v, &len),
                 FCCL_OK);
    want_val(FCCL_OK, v, len, "v1");
    cr_assert_eq(fccl_store_compare_set(s, "x", "exp", 3, "d", 1, &v, &len),
                 FCCL_OK);
    want_val(FCCL_OK, v, len, "exp");
    const char *cn[2] = {"c", "n"}, *cx[2] = {"c", "x"};
    cr_assert_eq(fccl_store_check(s, cn, 2, &all), FCCL_OK);
    cr_assert_eq(all, 1);
    cr_assert_eq(fccl_store_check(s, cx, 2, &all), FCCL_OK);
    cr_assert_eq(all, 0);
    cr_assert_eq(fccl_store_wait(s, cn, 2, 1000), FCCL_OK);
    void *vals[2];
    size_t lens[2];
    cr_assert_eq(fccl_store_multi_get(s, cn, 2, vals, lens, 1000), FCCL_OK,
                 "%s", fccl_last_error());
    want_val(FCCL_OK, vals[0], lens[0], "v1");
    want_val(FCCL_OK, vals[1], lens[1], "-2");
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 4);
    cr_assert_eq(fccl_store_delete(s, "e", &del), FCCL_OK);
    cr_assert_eq(del, 1);
    cr_assert_eq(fccl_store_delete(s, "e", &del), FCCL_OK);
    cr_assert_eq(del, 0);
    /* Timeout: PyTorch's server cannot cancel; we reconnect and go on. */
    double t0 = th_now();
    cr_assert_eq(fccl_store_get(s, "never", &v, &len, 200), FCCL_ERR_TIMEOUT);
    cr_assert(th_now() - t0 < 3);
    cr_assert(strstr(fccl_last_error(), "/never") &&
                  strstr(fccl_last_error(), srv.addr),
              "%s", fccl_last_error());
    GET_IS(s, "c", "v1", strlen("v1"));
    cr_assert_eq(fccl_store_append(s, "c", "x", 1), FCCL_ERR_UNSUPPORTED);
    fccl_store_close(s);

    /* torch reads what we wrote; the CLI in legacy mode works too. */
    struct th_result r = py(srv.addr, "get", "from_c", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.out, "430073696465\n", "torch read %s", r.out);
    th_result_free(&r);
    r = py(srv.addr, "set", "from_py", "00ff41");
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_result_free(&r);
    th_expect_out(cli(srv.addr, "legacy", "get", "from_py", NULL), 0,
                  "\0\xff" "A", 3);
    th_expect_out(cli(srv.addr, "legacy", "add", "n", "-7"), 0, "-9\n", 3);
    th_expect_out(cli(srv.addr, "legacy", "cas", "c", "v1"), 2, NULL, 0);
    th_expect_out(cli(srv.addr, "legacy", "delete", "zz", NULL), 1, "", 0);
    th_expect_out(cli(srv.addr, "legacy", "check", "n", "zz"), 1, "", 0);
    th_expect_out(cli(srv.addr, "legacy", "wait", "n", "c"), 0, "", 0);
    /* from_c n c from_py */
    th_expect_out(cli(srv.addr, "legacy", "num-keys", NULL, NULL), 0, "4\n", 2);
    th_expect_out(cli(srv.addr, "legacy", "ping", NULL, NULL), 2, "", 0);
    /* The modern dialect fails against 1.13, saying what to do. */
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = srv.addr;
    o.timeout_ms = 2000;
    cr_assert_eq(fccl_store_connect(&o, &s), FCCL_OK);
    int rc = fccl_store_get(s, "n", &v, &len, 1000);
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_TIMEOUT, "rc %d", rc);
    cr_assert(strstr(fccl_last_error(), "legacy dialect"), "%s",
              fccl_last_error());
    fccl_store_close(s);
    srv_stop(&srv);
}

/* Sets "late1".."late3", 300 ms apart, on its own handle. */
static void *set_late(void *arg)
{
    fccl_store_t *w = arg;
    const char *k[3] = {"late1", "late2", "late3"};
    for (int i = 0; i < 3; i++) {
        usleep(300 * 1000);
        if (fccl_store_set(w, k[i], "v", 1) < 0)
            return (void *)1;
    }
    return NULL;
}

/* torch 2.x's classic server (Debian 13's, no libuv) closes the
 * connection on a GET or MULTI_GET of a missing key: our modern client
 * must WAIT first there (sc_fetch_pipelined), or a blocking get of a key
 * not yet set fails with "server closed the connection". */
Test(compat, pytorch_our_modern_client_waits_on_pytorch_server)
{
    NEED_TORCH();
    if (torch_is_1x())
        cr_skip("torch 1.x's server speaks the legacy dialect only");
    start_pytorch(&srv);
    fccl_store_t *s = connect_srv(FCCL_DIALECT_MODERN);
    fccl_store_t *w = connect_srv(FCCL_DIALECT_MODERN);
    void *v;
    size_t len;
    cr_assert_eq(fccl_store_get(s, "never", &v, &len, 200), FCCL_ERR_TIMEOUT,
                 "%s", fccl_last_error());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, set_late, w), 0);
    cr_assert_eq(fccl_store_get(s, "late1", &v, &len, 5000), FCCL_OK, "%s",
                 fccl_last_error());
    want_val(FCCL_OK, v, len, "v");
    const char *k[2] = {"late2", "late3"};
    void *vals[2];
    size_t lens[2];
    cr_assert_eq(fccl_store_multi_get(s, k, 2, vals, lens, 5000), FCCL_OK,
                 "%s", fccl_last_error());
    want_val(FCCL_OK, vals[0], lens[0], "v");
    want_val(FCCL_OK, vals[1], lens[1], "v");
    void *ret;
    pthread_join(t, &ret);
    cr_assert_null(ret);
    fccl_store_close(w);
    fccl_store_close(s);
}
