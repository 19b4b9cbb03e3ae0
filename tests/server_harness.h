/*
 * Test harness for the store server tests: start the real tcpstore-server
 * binary on a free port, talk to it over raw sockets with frames built by
 * the codec encoders, and check replies byte for byte.  Header-only
 * (static functions) so each Criterion test binary includes its own copy.
 *
 * Every read has a deadline; the server child gets PR_SET_PDEATHSIG so a
 * failed (killed) test never leaves a server behind.
 */
#ifndef FCCL_TESTS_SERVER_HARNESS_H
#define FCCL_TESTS_SERVER_HARNESS_H

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "clock.h"
#include "codec.h"
#include "net.h"

#define IO_MS 5000 /* deadline of one expected reply */

struct srv {
    pid_t pid;
    int port;
    char errpath[64];
};

static inline const char *h_bin_dir(void)
{
    const char *b = getenv("FCCL_BIN");
    return b && *b ? b : "build/bin";
}

static inline void h_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Read one line from fd before the deadline (the "listening on" line). */
static inline int h_read_line(int fd, char *buf, size_t n, int ms)
{
    uint64_t dl = fccl_deadline_ms(ms);
    size_t len = 0;
    while (len + 1 < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, fccl_ms_left(dl)) <= 0)
            return -1;
        ssize_t r = read(fd, buf + len, 1);
        if (r <= 0)
            return -1;
        if (buf[len] == '\n')
            break;
        len++;
    }
    buf[len] = '\0';
    return (int)len;
}

/* Start `prog` (a program of FCCL_BIN) with argv (NULL-terminated, argv[0]
 * included); stdout is a pipe returned in *outfd, stderr goes to s->errpath. */
static inline void h_spawn(struct srv *s, const char *const *argv, int *outfd)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    snprintf(s->errpath, sizeof(s->errpath), "/tmp/fccl-srv-XXXXXX");
    int efd = mkstemp(s->errpath);
    cr_assert(efd >= 0, "mkstemp: %s", strerror(errno));
    char path[512];
    if (strchr(argv[0], '/'))
        snprintf(path, sizeof(path), "%s", argv[0]);
    else
        snprintf(path, sizeof(path), "%s/%s", h_bin_dir(), argv[0]);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        dup2(efd, 2);
        close(p[0]);
        close(p[1]);
        close(efd);
        execv(path, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(p[1]);
    close(efd);
    s->pid = pid;
    *outfd = p[0];
}

/* Start [prefix...] tcpstore-server --port 0 [extra...] (both lists
 * NULL-terminated or NULL; with a prefix, e.g. valgrind, the server is
 * named by its full path) and wait for its "listening on HOST:PORT" line. */
static inline void srv_start_prog(struct srv *s, const char *const *prefix,
                                  const char *const *extra)
{
    const char *argv[64];
    char server[512];
    int n = 0;
    for (int i = 0; prefix && prefix[i] && n < 40; i++)
        argv[n++] = prefix[i];
    snprintf(server, sizeof(server), "%s/tcpstore-server", h_bin_dir());
    argv[n++] = prefix ? server : "tcpstore-server";
    argv[n++] = "--port";
    argv[n++] = "0";
    for (int i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    int outfd;
    h_spawn(s, argv, &outfd);
    char line[256];
    int len = h_read_line(outfd, line, sizeof(line), 30000);
    close(outfd);
    cr_assert(len > 0, "server printed no 'listening on' line");
    cr_assert(strncmp(line, "listening on ", 13) == 0, "got '%s'", line);
    const char *colon = strrchr(line, ':');
    cr_assert(colon, "no port in '%s'", line);
    s->port = atoi(colon + 1);
    cr_assert(s->port > 0 && s->port < 65536, "bad port in '%s'", line);
}

static inline void srv_start(struct srv *s, const char *const *extra)
{
    srv_start_prog(s, NULL, extra);
}

/* Wait for the child up to ms; returns its wait status, or -1 (killed). */
static inline int h_reap(pid_t pid, int ms)
{
    uint64_t dl = fccl_deadline_ms(ms);
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (fccl_ms_left(dl) == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        h_sleep_ms(5);
    }
}

/* SIGTERM the server and return its exit code (-1 if it hung or died by a
 * signal). */
static inline int srv_stop_ms(struct srv *s, int ms)
{
    kill(s->pid, SIGTERM);
    int st = h_reap(s->pid, ms);
    s->pid = 0;
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static inline int srv_stop(struct srv *s) { return srv_stop_ms(s, 10000); }

/* SIGKILL the server and reap it (crash tests: nothing is flushed). */
static inline void srv_kill_hard(struct srv *s)
{
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

/* A fresh directory for a journal: dir (>= 64 B) gets "/tmp/<tag>-XXXXXX",
 * path (>= 128 B) the journal file in it.  journal_dir_remove deletes the
 * journal, its compaction file and the directory. */
static inline void journal_dir_make(char *dir, char *path, const char *tag)
{
    snprintf(dir, 64, "/tmp/%s-XXXXXX", tag);
    cr_assert(mkdtemp(dir));
    snprintf(path, 128, "%s/store.journal", dir);
}

static inline void journal_dir_remove(const char *dir, const char *path)
{
    char p[200];
    unlink(path);
    snprintf(p, sizeof(p), "%s.tmp", path);
    unlink(p);
    rmdir(dir);
}

/* A client of the server on 127.0.0.1:port (10 s timeout, reconnecting
 * if asked); the test fails if it cannot connect. */
static inline fccl_store_t *h_store_open(int port, int reconnect)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = addr;
    o.timeout_ms = 10000;
    o.reconnect = reconnect;
    fccl_store_t *st = NULL;
    cr_assert_eq(fccl_store_connect(&o, &st), FCCL_OK, "connect to %s: %s",
                 addr, fccl_last_error());
    return st;
}

static inline char *srv_log(const struct srv *s)
{
    FILE *f = fopen(s->errpath, "r");
    cr_assert(f);
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Poll the server's log until `needle` shows up (or ms pass). */
static inline int srv_log_wait(const struct srv *s, const char *needle, int ms)
{
    uint64_t dl = fccl_deadline_ms(ms);
    for (;;) {
        char *log = srv_log(s);
        int found = strstr(log, needle) != NULL;
        free(log);
        if (found)
            return 1;
        if (fccl_ms_left(dl) == 0)
            return 0;
        h_sleep_ms(10);
    }
}

static inline void srv_cleanup(struct srv *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    unlink(s->errpath);
}

/* ---- raw clients ---- */

static inline int cli_connect(int port)
{
    int fd = fccl_tcp_connect("127.0.0.1", port, fccl_deadline_ms(IO_MS));
    cr_assert(fd >= 0, "connect to port %d failed", port);
    return fd;
}

static inline void cli_send_raw(int fd, const void *p, size_t n)
{
    int rc = fccl_write_full(fd, p, n, fccl_deadline_ms(IO_MS));
    cr_assert_eq(rc, 0, "send of %zu bytes failed", n);
}

/* Send the frame(s) in b and empty b. */
static inline void cli_send(int fd, struct codec_buf *b)
{
    cr_assert(!b->oom);
    cli_send_raw(fd, b->p, b->len);
    codec_buf_reset(b);
}

/* A modern connection: connect and VALIDATE. */
static inline int cli_modern(int port)
{
    int fd = cli_connect(port);
    struct codec_buf b;
    codec_buf_init(&b);
    codec_put_type(&b, DIALECT_MODERN, OP_VALIDATE);
    codec_put_u32(&b, STORE_VALIDATE_MAGIC);
    cli_send(fd, &b);
    codec_buf_free(&b);
    return fd;
}

static inline void cli_read(int fd, void *buf, size_t n)
{
    int rc = fccl_read_full(fd, buf, n, fccl_deadline_ms(IO_MS));
    cr_assert_eq(rc, 0, "expected %zu reply bytes: %s", n,
                 fccl_last_error());
}

static inline void cli_expect(int fd, const void *want, size_t n)
{
    uint8_t *got = malloc(n ? n : 1);
    cli_read(fd, got, n);
    cr_assert(memcmp(got, want, n) == 0, "reply bytes differ (%zu bytes)", n);
    free(got);
}

static inline void cli_expect_u8(int fd, uint8_t v) { cli_expect(fd, &v, 1); }

static inline void cli_expect_i64(int fd, int64_t v)
{
    uint8_t b[8];
    cli_read(fd, b, 8);
    int64_t got = (int64_t)codec_get_u64(b);
    cr_assert_eq(got, v, "expected i64 %lld, got %lld", (long long)v,
                 (long long)got);
}

static inline void cli_expect_u32(int fd, uint32_t v)
{
    uint8_t b[4];
    cli_read(fd, b, 4);
    cr_assert_eq(codec_get_u32(b), v);
}

/* A byte-string reply: u64 length + bytes. */
static inline void cli_expect_str(int fd, const void *v, size_t n)
{
    uint8_t h[8];
    cli_read(fd, h, 8);
    cr_assert_eq(codec_get_u64(h), (uint64_t)n, "expected a %zu-byte string, "
                 "got length %llu", n, (unsigned long long)codec_get_u64(h));
    cli_expect(fd, v, n);
}

static inline void cli_expect_cstr(int fd, const char *s)
{
    cli_expect_str(fd, s, strlen(s));
}

/* Nothing arrives for ms milliseconds. */
static inline void cli_expect_silence(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, ms);
    cr_assert_eq(r, 0, "unexpected bytes (or close) within %d ms", ms);
}

/* The server closes the connection within ms (any bytes before are
 * discarded). */
static inline void cli_expect_closed(int fd, int ms)
{
    uint64_t dl = fccl_deadline_ms(ms);
    char buf[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, fccl_ms_left(dl));
        cr_assert(r > 0, "connection still open after %d ms", ms);
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return;
    }
}

/* The local "127.0.0.1:PORT" of fd, as the server names it in logs. */
static inline void cli_name(int fd, char *out, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(out, n, "127.0.0.1:%d", port);
}

/* ---- frame builders (dialect-aware) ---- */

static inline void put_op(struct codec_buf *b, enum store_dialect d,
                          enum store_op op)
{
    cr_assert(codec_put_type(b, d, op) >= 0, "%s missing in dialect %d",
              codec_op_name(op), (int)d);
}

static inline void put_key(struct codec_buf *b, const char *k)
{
    codec_put_str(b, k, strlen(k));
}

/* OP key */
static inline void f_key(struct codec_buf *b, enum store_dialect d,
                         enum store_op op, const char *k)
{
    put_op(b, d, op);
    put_key(b, k);
}

/* OP key value (SET, APPEND, QUEUE_PUSH) */
static inline void f_kv(struct codec_buf *b, enum store_dialect d,
                        enum store_op op, const char *k, const void *v,
                        size_t n)
{
    put_op(b, d, op);
    put_key(b, k);
    codec_put_str(b, v, n);
}

static inline void f_set(struct codec_buf *b, enum store_dialect d,
                         const char *k, const char *v)
{
    f_kv(b, d, OP_SET, k, v, strlen(v));
}

static inline void f_add(struct codec_buf *b, enum store_dialect d,
                         const char *k, int64_t delta)
{
    f_key(b, d, OP_ADD, k);
    codec_put_i64(b, delta);
}

static inline void f_cas(struct codec_buf *b, enum store_dialect d,
                         const char *k, const char *exp, const char *des)
{
    f_key(b, d, OP_COMPARE_SET, k);
    put_key(b, exp);
    put_key(b, des);
}

/* OP n keys... (CHECK, WAIT, MULTI_GET) */
static inline void f_keys(struct codec_buf *b, enum store_dialect d,
                          enum store_op op, int n, const char *const *keys)
{
    put_op(b, d, op);
    codec_put_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++)
        put_key(b, keys[i]);
}

static inline void f_wait1(struct codec_buf *b, enum store_dialect d,
                           const char *k)
{
    f_keys(b, d, OP_WAIT, 1, &k);
}

/* Round trip a GETNUMKEYS: proves the connection is alive and served. */
static inline int64_t cli_numkeys(int fd, enum store_dialect d)
{
    struct codec_buf b;
    codec_buf_init(&b);
    put_op(&b, d, OP_GETNUMKEYS);
    cli_send(fd, &b);
    codec_buf_free(&b);
    uint8_t r[8];
    cli_read(fd, r, 8);
    return (int64_t)codec_get_u64(r);
}

#endif
