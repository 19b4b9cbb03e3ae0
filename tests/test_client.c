/*
 * The store client library against the real tcpstore-server, started as a
 * subprocess on a free port for every test: every operation with its
 * results checked, timeouts (a cancelled WAIT leaves the handle usable),
 * prefix views, connecting before the server starts, threads sharing a
 * handle, sticky failures, the legacy dialect, and error messages that
 * name the address and the key.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/store_suite.h"
#include "net.h"

static struct srv srv;

static void start_server(void) { srv_start_local(&srv, NULL); }

static void stop_server(void)
{
    srv_finish(&srv);
}

TestSuite(client, .init = start_server, .fini = stop_server, .timeout = 30);
TestSuite(client_conn, .fini = stop_server, .timeout = 30);

static fccl_store_t *open_store(const char *addr, fccl_dialect_t d, int raw,
                                int64_t timeout_ms)
{
    return srv_connect_to(addr, d, raw, timeout_ms);
}

static fccl_store_t *modern(void)
{
    return open_store(srv.addr, FCCL_DIALECT_MODERN, 0, 10000);
}

SS_TEST(client, set_get_overwrite_empty, modern)

/* Bigger than the client's read buffer: exercises the direct path. */
SS_TEST_WITH(client, binary_and_large_values, modern, 3u << 20)

SS_TEST(client, add_counts_in_decimal, modern)

SS_TEST(client, compare_set_all_cases, modern)

SS_TEST(client, check_delete_num_keys, modern)

SS_TEST_WITH(client, append_multi_ping, modern, 1e6)

SS_TEST(client, list_keys_sorted_and_through_views, modern)

SS_TEST_WITH(client, queues_fifo_and_blocking_pop, modern, modern)

struct consumer {
    const char *addr;
    char got[16];
    int rc;
};

static void *consume(void *arg)
{
    struct consumer *c = arg;
    fccl_store_t *s = open_store(c->addr, FCCL_DIALECT_MODERN, 0, 10000);
    void *v = NULL;
    size_t len = 0;
    c->rc = fccl_store_queue_pop(s, "jobs", 1, &v, &len, 5000);
    if (c->rc == FCCL_OK)
        snprintf(c->got, sizeof(c->got), "%.*s", (int)len, (char *)v);
    free(v);
    fccl_store_close(s);
    return NULL;
}

Test(client, competing_consumers_and_key_named_like_a_queue)
{
    struct consumer c[2] = {{srv.addr, "", -1}, {srv.addr, "", -1}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, consume, &c[i]);
    th_sleep_ms(150);
    fccl_store_t *s = modern();
    cr_assert_eq(fccl_store_queue_push(s, "jobs", "j1", 2), FCCL_OK);
    th_sleep_ms(100);
    cr_assert_eq(fccl_store_queue_push(s, "jobs", "j2", 2), FCCL_OK);
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(c[i].rc, FCCL_OK, "consumer %d: %d", i, c[i].rc);
    }
    cr_assert(strcmp(c[0].got, c[1].got) != 0, "both got %s", c[0].got);
    cr_assert(!strcmp(c[0].got, "j1") || !strcmp(c[0].got, "j2"));
    cr_assert(!strcmp(c[1].got, "j1") || !strcmp(c[1].got, "j2"));
    /* A plain key of the queue's name satisfies every WAIT at once: the
     * blocking pop must still end at its deadline, not spin forever. */
    fccl_store_set(s, "jobs", "plain", 5);
    void *v = NULL;
    size_t len;
    double t0 = th_now();
    cr_assert_eq(fccl_store_queue_pop(s, "jobs", 1, &v, &len, 200),
                 FCCL_ERR_TIMEOUT, "%s", fccl_last_error());
    cr_assert(th_now() - t0 < 3, "took %.2f s", th_now() - t0);
    srv_expect_value(s, "jobs", "plain", 5);
    fccl_store_close(s);
}

SS_TEST_WITH(client, wait_and_get_block_until_set, modern, modern)

Test(client, get_timeout_is_cancelled_and_handle_stays_usable)
{
    fccl_store_t *s = modern(), *other = modern();
    for (int round = 0; round < 3; round++) {
        void *v = (void *)1;
        size_t len;
        double t0 = th_now();
        int rc = fccl_store_get(s, "missing", &v, &len, 200);
        double dt = th_now() - t0;
        cr_assert_eq(rc, FCCL_ERR_TIMEOUT, "rc %d: %s", rc,
                     fccl_last_error());
        cr_assert(v == NULL);
        cr_assert(dt >= 0.19 && dt < 3, "took %.3f s", dt);
        const char *msg = fccl_last_error();
        cr_assert(strstr(msg, srv.addr), "no address in '%s'", msg);
        cr_assert(strstr(msg, "/missing"), "no key in '%s'", msg);
        /* The next calls on the same connection get their own replies. */
        fccl_store_set(s, "k", "v1", 2);
        srv_expect_value(s, "k", "v1", 2);
        int64_t n;
        cr_assert_eq(fccl_store_add(s, "ctr", 1, &n), FCCL_OK);
        cr_assert_eq(n, round + 1);
    }
    cr_assert_eq(fccl_store_set(other, "missing", "here", 4), FCCL_OK);
    srv_expect_value(s, "missing", "here", 4);
    fccl_store_close(other);
    fccl_store_close(s);
}

Test(client, wait_timeout_names_missing_keys)
{
    fccl_store_t *s = modern();
    fccl_store_set(s, "have", "1", 1);
    const char *keys[3] = {"have", "lost1", "lost2"};
    int rc = fccl_store_wait(s, keys, 3, 150);
    cr_assert_eq(rc, FCCL_ERR_TIMEOUT);
    const char *msg = fccl_last_error();
    const char *m = strstr(msg, "missing:");
    cr_assert(m, "no missing list in '%s'", msg);
    cr_assert(strstr(m, "/lost1") && strstr(m, "/lost2"), "'%s'", msg);
    cr_assert(!strstr(m, "/have"), "present key named missing: '%s'", msg);
    void *vals[3];
    size_t lens[3];
    rc = fccl_store_multi_get(s, keys, 3, vals, lens, 150);
    cr_assert_eq(rc, FCCL_ERR_TIMEOUT, "%s", fccl_last_error());
    cr_assert(vals[0] == NULL && vals[1] == NULL);
    fccl_store_set(s, "lost1", "L1", 2);
    fccl_store_set(s, "lost2", "", 0);
    cr_assert_eq(fccl_store_multi_get(s, keys, 3, vals, lens, 2000), FCCL_OK,
                 "%s", fccl_last_error());
    cr_assert(lens[0] == 1 && lens[1] == 2 && lens[2] == 0);
    cr_assert(memcmp(vals[1], "L1", 2) == 0);
    for (int i = 0; i < 3; i++)
        free(vals[i]);
    int64_t n;
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 3);
    fccl_store_close(s);
}

Test(client, zero_timeout_calls_on_present_keys_succeed)
{
    fccl_store_t *s = modern();
    fccl_store_set(s, "now", "x", 1);
    void *v;
    size_t len;
    cr_assert_eq(fccl_store_get(s, "now", &v, &len, 0), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert(len == 1 && ((char *)v)[0] == 'x');
    free(v);
    /* The deadline passes before the reply can arrive, so the WAIT is
     * cancelled; the STOP_WAITING that races the cancel says the key is
     * there.  Repeat to make the race go both ways. */
    const char *keys[1] = {"now"}, *absent[1] = {"absent"};
    for (int i = 0; i < 20; i++)
        cr_assert_eq(fccl_store_wait(s, keys, 1, 0), FCCL_OK, "%s",
                     fccl_last_error());
    cr_assert_eq(fccl_store_get(s, "absent", &v, &len, 0), FCCL_ERR_TIMEOUT);
    cr_assert_eq(fccl_store_wait(s, absent, 1, 0), FCCL_ERR_TIMEOUT);
    srv_expect_value(s, "now", "x", 1);
    fccl_store_close(s);
}

Test(client, prefix_views_share_the_connection)
{
    fccl_store_t *root = modern(), *v1, *v2;
    fccl_store_t *raw = open_store(srv.addr, FCCL_DIALECT_MODERN, 1, 5000);
    cr_assert_eq(fccl_store_prefixed(root, "job/", &v1), FCCL_OK);
    cr_assert_eq(fccl_store_prefixed(v1, "sub/", &v2), FCCL_OK);
    cr_assert_str_eq(fccl_store_addr(v2), srv.addr);
    cr_assert_eq(fccl_store_set(v2, "k", "deep", 4), FCCL_OK);
    srv_expect_value(root, "job/sub/k", "deep", 4);
    srv_expect_value(v1, "sub/k", "deep", 4);
    srv_expect_value(raw, "/job/sub/k", "deep", 4);
    int64_t n;
    cr_assert_eq(fccl_store_add(v1, "cnt", 3, &n), FCCL_OK);
    srv_expect_value(raw, "/job/cnt", "3", 1);
    /* The connection lives until its last handle is closed. */
    fccl_store_close(root);
    fccl_store_close(v1);
    srv_expect_value(v2, "k", "deep", 4);
    fccl_store_close(v2);
    fccl_store_close(raw);
}

Test(client, raw_keys_are_sent_as_given)
{
    fccl_store_t *s = modern();
    fccl_store_t *raw = open_store(srv.addr, FCCL_DIALECT_MODERN, 1, 5000);
    fccl_store_set(raw, "plain", "p", 1);
    cr_assert_eq(ss_present(s, "plain"), 0, "'plain' must not be '/plain'");
    cr_assert_eq(ss_present(raw, "plain"), 1);
    fccl_store_set(s, "slash", "s", 1);
    srv_expect_value(raw, "/slash", "s", 1);
    fccl_store_close(raw);
    fccl_store_close(s);
}

SS_TEST_WITH(client, threads_share_one_handle, modern, 300)

Test(client, broken_connection_fails_fast_with_first_error)
{
    fccl_store_t *s = modern();
    cr_assert_eq(fccl_store_set(s, "a", "1", 1), FCCL_OK);
    srv_stop(&srv);
    void *v;
    size_t len;
    int rc = fccl_store_get(s, "a", &v, &len, 2000);
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO, "rc %d: %s", rc,
              fccl_last_error());
    cr_assert(strstr(fccl_last_error(), srv.addr), "%s", fccl_last_error());
    double t0 = th_now();
    int rc2 = fccl_store_add(s, "b", 1, NULL);
    cr_assert_eq(rc2, rc, "later call: %d, first error %d", rc2, rc);
    cr_assert(th_now() - t0 < 0.05, "later call did not fail fast");
    cr_assert(strstr(fccl_last_error(), "earlier"), "%s", fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "'/b'"), "%s", fccl_last_error());
    fccl_store_close(s);
}

Test(client, legacy_dialect_against_our_server)
{
    fccl_store_t *s = open_store(srv.addr, FCCL_DIALECT_LEGACY, 0, 5000);
    cr_assert_eq(fccl_store_set(s, "a", "A", 1), FCCL_OK);
    srv_expect_value(s, "a", "A", 1);
    int64_t n;
    cr_assert_eq(fccl_store_add(s, "n", 4, &n), FCCL_OK);
    cr_assert_eq(n, 4);
    ss_cas(s, "a", "A", "B", "B");
    cr_assert_eq(ss_present(s, "a"), 1);
    const char *keys[2] = {"a", "n"};
    cr_assert_eq(fccl_store_wait(s, keys, 2, 1000), FCCL_OK);
    void *vals[2];
    size_t lens[2];
    cr_assert_eq(fccl_store_multi_get(s, keys, 2, vals, lens, 1000), FCCL_OK,
                 "%s", fccl_last_error());
    cr_assert(lens[0] == 1 && memcmp(vals[0], "B", 1) == 0);
    cr_assert(lens[1] == 1 && memcmp(vals[1], "4", 1) == 0);
    free(vals[0]);
    free(vals[1]);
    const char *mk[2] = {"m1", "m2"};
    const void *mv[2] = {"x", "yy"};
    size_t ml[2] = {1, 2};
    cr_assert_eq(fccl_store_multi_set(s, mk, mv, ml, 2), FCCL_OK);
    srv_expect_value(s, "m2", "yy", 2);
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 4);
    int del;
    cr_assert_eq(fccl_store_delete(s, "m1", &del), FCCL_OK);
    cr_assert_eq(del, 1);
    /* What 1.13 lacks is refused by the client, with a message. */
    cr_assert_eq(fccl_store_append(s, "a", "x", 1), FCCL_ERR_UNSUPPORTED);
    cr_assert(strstr(fccl_last_error(), "legacy"), "%s", fccl_last_error());
    cr_assert_eq(fccl_store_ping(s, NULL), FCCL_ERR_UNSUPPORTED);
    char **kl;
    size_t kn;
    cr_assert_eq(fccl_store_list_keys(s, "", &kl, &kn), FCCL_ERR_UNSUPPORTED);
    cr_assert_eq(fccl_store_queue_push(s, "q", "x", 1), FCCL_ERR_UNSUPPORTED);
    /* A timeout closes the connection; the next call reconnects. */
    void *v;
    size_t len;
    cr_assert_eq(fccl_store_get(s, "never", &v, &len, 150), FCCL_ERR_TIMEOUT);
    cr_assert(strstr(fccl_last_error(), "/never"), "%s", fccl_last_error());
    srv_expect_value(s, "a", "B", 1);
    fccl_store_close(s);
}

Test(client, default_timeout_from_env)
{
    setenv("FCCL_TIMEOUT", "0.25", 1);
    fccl_store_t *s = open_store(srv.addr, FCCL_DIALECT_MODERN, 0, 0);
    cr_assert_eq(fccl_store_timeout_ms(s), 250);
    void *v;
    size_t len;
    double t0 = th_now();
    cr_assert_eq(fccl_store_get(s, "nope", &v, &len, -1), FCCL_ERR_TIMEOUT);
    double dt = th_now() - t0;
    cr_assert(dt >= 0.24 && dt < 3, "default timeout took %.3f s", dt);
    fccl_store_close(s);
    unsetenv("FCCL_TIMEOUT");
    s = open_store(srv.addr, FCCL_DIALECT_MODERN, 0, 0);
    cr_assert_eq(fccl_store_timeout_ms(s), 300000);
    fccl_store_close(s);
}

Test(client, bad_arguments)
{
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    fccl_store_t *s = (fccl_store_t *)1;
    o.addr = "no-port-here";
    cr_assert_eq(fccl_store_connect(&o, &s), FCCL_ERR_INVALID);
    cr_assert(s == NULL);
    cr_assert(strstr(fccl_last_error(), "no-port-here"), "%s",
              fccl_last_error());
    o.addr = NULL;
    cr_assert_eq(fccl_store_connect(&o, &s), FCCL_ERR_INVALID);
    s = modern();
    cr_assert_eq(fccl_store_set(s, NULL, "x", 1), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_store_set(NULL, "k", "x", 1), FCCL_ERR_INVALID);
    const char *holed[2] = {"k", NULL};
    void *vs[2];
    size_t ls[2];
    cr_assert_eq(fccl_store_wait(s, NULL, 1, 0), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_store_multi_get(s, holed, 2, vs, ls, 0),
                 FCCL_ERR_INVALID);
    cr_assert(strstr(fccl_last_error(), "MULTI_GET: key 1 is NULL"), "%s",
              fccl_last_error());
    cr_assert_eq(fccl_store_set(s, "k", "x", 1), FCCL_OK, "still usable");
    fccl_store_close(s);
    fccl_store_close(NULL);
}

struct early_client {
    char addr[64];
    fccl_store_t *s;
    int rc;
    double connected_at;
};

static void *connect_early(void *arg)
{
    struct early_client *e = arg;
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = e->addr;
    o.timeout_ms = 15000;
    e->rc = fccl_store_connect(&o, &e->s);
    e->connected_at = th_now();
    return NULL;
}

Test(client_conn, connect_before_the_server_starts)
{
    int port = th_free_port();
    cr_assert_gt(port, 0);
    struct early_client e = {.rc = 1};
    snprintf(e.addr, sizeof(e.addr), "127.0.0.1:%d", port);
    pthread_t th;
    double t0 = th_now();
    pthread_create(&th, NULL, connect_early, &e);
    th_sleep_ms(400);
    /* The server starts from this (main) thread: see srv.h. */
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    const char *argv[] = {"tcpstore-server", "--host", "127.0.0.1", "--port",
                          ps, NULL};
    srv_start_argv(&srv, argv, 20);
    cr_assert_eq(srv.port, port, "server did not start on port %d", port);
    double listening_at = th_now();
    pthread_join(th, NULL);
    cr_assert_eq(e.rc, FCCL_OK, "%s", fccl_last_error());
    cr_assert(e.connected_at - t0 >= 0.35,
              "connected before the server started");
    /* Backoff is capped at 250 ms (+50 % jitter): PyTorch's 1 s retry would
     * miss this. */
    cr_assert(e.connected_at - listening_at < 0.6,
              "connected %.3f s after the server was up",
              e.connected_at - listening_at);
    cr_assert_eq(fccl_store_set(e.s, "k", "v", 1), FCCL_OK);
    srv_expect_value(e.s, "k", "v", 1);
    fccl_store_close(e.s);
}

Test(client_conn, connect_gives_up_at_the_timeout)
{
    char addr[TH_ADDR_LEN];
    double dt;
    int rc = srv_connect_nowhere("", 300, addr, sizeof(addr), &dt);
    cr_assert_eq(rc, FCCL_ERR_CONNECT, "rc %d", rc);
    cr_assert(dt >= 0.29 && dt < 2, "gave up after %.3f s", dt);
    cr_assert(strstr(fccl_last_error(), addr), "%s", fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "attempts"), "%s", fccl_last_error());
}

/* ---- refused writes (issue 9) ---- */

/* A SET the server refuses (store full) used to return OK with the key
 * missing.  Now it is confirmed with SYNC and the refusal comes back as
 * FCCL_ERR_LIMIT naming the cause; the connection stays usable. */
Test(client_conn, refused_writes_are_reported)
{
    srv_start_local(&srv, (const char *[]){"--max-total-bytes", "100", NULL});
    fccl_store_t *s = modern();
    char big[300];
    memset(big, 'b', sizeof(big));
    cr_assert_eq(fccl_store_set(s, "ok", "v", 1), FCCL_OK, "%s",
                 fccl_last_error());
    int rc = fccl_store_set(s, "big", big, sizeof(big));
    cr_assert_eq(rc, FCCL_ERR_LIMIT, "rc %d: %s", rc, fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "100-byte limit") &&
                  strstr(fccl_last_error(), "/big"),
              "%s", fccl_last_error());
    cr_assert_eq(ss_present(s, "big"), 0);
    cr_assert_eq(fccl_store_append(s, "ok", big, sizeof(big)),
                 FCCL_ERR_LIMIT);
    cr_assert_eq(fccl_store_queue_push(s, "q", big, sizeof(big)),
                 FCCL_ERR_LIMIT);
    const char *keys[2] = {"m1", "m2"};
    const void *vals[2] = {"1", big};
    size_t lens[2] = {1, sizeof(big)};
    cr_assert_eq(fccl_store_multi_set(s, keys, vals, lens, 2),
                 FCCL_ERR_LIMIT);
    /* Same connection, still fine. */
    cr_assert_eq(fccl_store_set(s, "ok2", "w", 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_value(s, "ok2", "w", 1);
    srv_expect_value(s, "ok", "v", 1);
    fccl_store_close(s);
}

/* A server without SYNC (PyTorch >= 2.1's closes on unknown types): the
 * first write's lone SYNC probe is closed on, the client reconnects and
 * fences its writes with PING; a connection closed after a write (the
 * server refused it) is an error, not success. */
struct nosync {
    int lfd, port;
    char error[256];
};

static int read_n(int fd, void *p, size_t n)
{
    return fccl_read_full(fd, p, n, fccl_deadline_ms(5000));
}

static void *nosync_run(void *arg)
{
    struct nosync *f = arg;
    uint8_t b[64];
    /* 1: VALIDATE and the hello PING: echoed, as PyTorch >= 2.1 echoes
     * any PING; then SYNC: close, as PyTorch does. */
    int fd = accept(f->lfd, NULL, NULL);
    if (read_n(fd, b, 10) || b[5] != 13 || write(fd, b + 6, 4) != 4 ||
        read_n(fd, b, 1) || b[0] != 0x81) {
        snprintf(f->error, sizeof(f->error), "no hello + SYNC probe");
        close(fd);
        return NULL;
    }
    close(fd);
    /* 2: VALIDATE + hello (echoed), SET "/k"="v" (20 bytes), PING: echo;
     * then SET, PING: close without a reply (a refused write). */
    fd = accept(f->lfd, NULL, NULL);
    if (read_n(fd, b, 10) || write(fd, b + 6, 4) != 4 ||
        read_n(fd, b, 20) || b[0] != 1 || read_n(fd, b, 5) || b[0] != 13) {
        snprintf(f->error, sizeof(f->error), "no SET + PING");
        close(fd);
        return NULL;
    }
    if (write(fd, b + 1, 4) != 4)
        snprintf(f->error, sizeof(f->error), "echo failed");
    if (read_n(fd, b, 20) || b[0] != 1 || read_n(fd, b, 5) || b[0] != 13)
        snprintf(f->error, sizeof(f->error), "no second SET + PING");
    close(fd);
    return NULL;
}

Test(client_conn, server_without_sync_is_fenced_with_ping)
{
    struct nosync f = {.lfd = socket(AF_INET, SOCK_STREAM, 0)};
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    cr_assert(bind(f.lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
    cr_assert(listen(f.lfd, 4) == 0);
    getsockname(f.lfd, (struct sockaddr *)&a, &l);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(a.sin_port));
    pthread_t th;
    pthread_create(&th, NULL, nosync_run, &f);
    fccl_store_t *s = open_store(addr, FCCL_DIALECT_MODERN, 0, 5000);
    cr_assert_eq(fccl_store_set(s, "k", "v", 1), FCCL_OK, "%s",
                 fccl_last_error());
    int rc = fccl_store_set(s, "k", "v", 1);
    cr_assert_eq(rc, FCCL_ERR_CLOSED, "rc %d: %s", rc, fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "instead of confirming the write"),
              "%s", fccl_last_error());
    fccl_store_close(s);
    pthread_join(th, NULL);
    close(f.lfd);
    cr_assert(!f.error[0], "%s", f.error);
}

/* A failure before any reply says the likely cause. */
Test(client_conn, first_reply_hints_name_the_cause)
{
    char addr[TH_ADDR_LEN];
    double dt;
    cr_assert_eq(srv_connect_nowhere("", 300, addr, sizeof(addr), &dt),
                 FCCL_ERR_CONNECT);
    cr_assert(strstr(fccl_last_error(), "no server is listening"), "%s",
              fccl_last_error());
    cr_assert(!strstr(fccl_last_error(), "PyTorch"), "%s",
              fccl_last_error());
}
