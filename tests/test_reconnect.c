/*
 * Reconnecting clients (opts.reconnect): the real tcpstore-server with a
 * journal is SIGKILLed and restarted on the same port; a reconnecting
 * handle keeps working, a pending WAIT completes, an ADD whose reply was
 * lost is reported (not repeated), and without reconnect the handle
 * reports CLOSED as before.
 */
#include <pthread.h>

#include "fccl/store.h"
#include "server_harness.h"

static char jdir[64], jpath[128];

static void make_dir(void) { journal_dir_make(jdir, jpath, "fccl-rc"); }
static void remove_dir(void) { journal_dir_remove(jdir, jpath); }

/* More server arguments (TLS, token) for every start, NULL-terminated. */
static const char *more_args[12];

/* Start on `port` (0: any), journal on, fsync always. */
static void start_on(struct srv *s, int port)
{
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    const char *extra[24] = {"--host", "127.0.0.1", "--port", ps,
                             "--journal", jpath, "--fsync", "always"};
    for (int i = 0; more_args[i] && i < 12; i++)
        extra[8 + i] = more_args[i];
    srv_start(s, extra);
    if (port)
        cr_assert_eq(s->port, port);
}

static void kill_server(struct srv *s) { srv_kill_hard(s); }

static void restart(struct srv *s)
{
    int port = s->port;
    kill_server(s);
    srv_cleanup(s);
    start_on(s, port);
}

static fccl_store_t *open_at(int port, int reconnect)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = addr;
    o.timeout_ms = 10000;
    o.reconnect = reconnect;
    fccl_store_t *s = NULL;
    cr_assert_eq(fccl_store_connect(&o, &s), FCCL_OK, "%s",
                 fccl_last_error());
    return s;
}

static void expect_value(fccl_store_t *s, const char *key, const char *want)
{
    void *v = NULL;
    size_t len = 0;
    int rc = fccl_store_get(s, key, &v, &len, 5000);
    cr_assert_eq(rc, FCCL_OK, "GET %s: %s", key, fccl_last_error());
    cr_assert_eq(len, strlen(want));
    cr_assert(memcmp(v, want, len) == 0);
    free(v);
}

Test(reconnect, survives_restart_between_calls, .timeout = 60)
{
    make_dir();
    struct srv srv = {0};
    start_on(&srv, 0);
    fccl_store_t *s = open_at(srv.port, 1), *view = NULL;
    cr_assert_eq(fccl_store_prefixed(s, "job", &view), FCCL_OK);
    cr_assert_eq(fccl_store_set(s, "a", "1", 1), FCCL_OK);
    cr_assert_eq(fccl_store_set(view, "b", "2", 1), FCCL_OK);
    int64_t n = 0;
    cr_assert_eq(fccl_store_add(s, "ctr", 5, &n), FCCL_OK);
    restart(&srv);
    /* Journal kept the keys; the handle and its view reconnect. */
    expect_value(s, "a", "1");
    expect_value(view, "b", "2");
    cr_assert_eq(fccl_store_set(s, "c", "3", 1), FCCL_OK);
    expect_value(s, "c", "3");
    restart(&srv);
    /* Seen closed before it was sent: an ADD may go out once, exactly. */
    cr_assert_eq(fccl_store_add(view, "x", 1, &n), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_add(s, "ctr", 1, &n), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(n, 6);
    fccl_store_close(view);
    fccl_store_close(s);
    srv_cleanup(&srv);
    remove_dir();
}

struct waiter {
    fccl_store_t *s;
    int rc;
    char msg[512];
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    const char *keys[] = {"late"};
    w->rc = fccl_store_wait(w->s, keys, 1, 20000);
    snprintf(w->msg, sizeof(w->msg), "%s", fccl_last_error());
    return NULL;
}

Test(reconnect, pending_wait_reissued, .timeout = 60)
{
    make_dir();
    struct srv srv = {0};
    start_on(&srv, 0);
    struct waiter w = {.s = open_at(srv.port, 1), .rc = 99};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    h_sleep_ms(300); /* the WAIT is at the server */
    restart(&srv);
    h_sleep_ms(300);
    fccl_store_t *other = open_at(srv.port, 0);
    cr_assert_eq(fccl_store_set(other, "late", "v", 1), FCCL_OK);
    pthread_join(t, NULL);
    cr_assert_eq(w.rc, FCCL_OK, "WAIT: %s", w.msg);
    expect_value(w.s, "late", "v");
    fccl_store_close(other);
    fccl_store_close(w.s);
    srv_cleanup(&srv);
    remove_dir();
}

struct adder {
    fccl_store_t *s;
    int rc;
    int64_t v;
};

static void *add_thread(void *arg)
{
    struct adder *a = arg;
    a->rc = fccl_store_add(a->s, "ctr", 1, &a->v);
    return NULL;
}

Test(reconnect, lost_add_reply_is_an_error_not_repeated, .timeout = 60)
{
    make_dir();
    struct srv srv = {0};
    start_on(&srv, 0);
    struct adder a = {.s = open_at(srv.port, 1), .rc = 99};
    int64_t v = 0;
    cr_assert_eq(fccl_store_add(a.s, "ctr", 10, &v), FCCL_OK);
    /* A stopped server takes the ADD into its socket buffer and never
     * answers; then it dies: the reply is lost. */
    kill(srv.pid, SIGSTOP);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, add_thread, &a), 0);
    h_sleep_ms(300);
    restart(&srv);
    pthread_join(t, NULL);
    cr_assert(a.rc == FCCL_ERR_CLOSED || a.rc == FCCL_ERR_IO,
              "ADD with a lost reply returned %d", a.rc);
    /* Not repeated (the stopped server never applied it either), and the
     * handle is usable again. */
    cr_assert_eq(fccl_store_add(a.s, "ctr", 0, &v), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(v, 10);
    fccl_store_close(a.s);
    srv_cleanup(&srv);
    remove_dir();
}

Test(reconnect, off_keeps_closed, .timeout = 60)
{
    make_dir();
    struct srv srv = {0};
    start_on(&srv, 0);
    fccl_store_t *s = open_at(srv.port, 0);
    cr_assert_eq(fccl_store_set(s, "a", "1", 1), FCCL_OK);
    restart(&srv);
    void *v = NULL;
    size_t len = 0;
    int rc = fccl_store_get(s, "a", &v, &len, 2000);
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO, "got %d", rc);
    /* Sticky: later calls fail at once. */
    rc = fccl_store_get(s, "a", &v, &len, 2000);
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO, "got %d", rc);
    free(v);
    fccl_store_close(s);
    srv_cleanup(&srv);
    remove_dir();
}

/* Run a 4-rank fccl-demo against the store at `port` (stopped now), kill
 * and restart the store while the ranks are in fccl_init; exit status. */
static int demo_across_restart(struct srv *srv, const char *reconnect)
{
    char store[32], demo[512];
    snprintf(store, sizeof(store), "127.0.0.1:%d", srv->port);
    snprintf(demo, sizeof(demo), "%s/fccl-demo", h_bin_dir());
    setenv("FCCL_STORE_RECONNECT", reconnect, 1);
    const char *argv[] = {"fccl-run", "-n", "4", "--store", store, demo, NULL};
    struct srv run = {0};
    int outfd;
    /* A stopped server still accepts connections (the backlog): every rank
     * sends VALIDATE and its init/ ADD, and none gets a reply. */
    kill(srv->pid, SIGSTOP);
    h_spawn(&run, argv, &outfd);
    unsetenv("FCCL_STORE_RECONNECT");
    h_sleep_ms(500);
    restart(srv);
    int st = h_reap(run.pid, 60000);
    run.pid = 0;
    /* Rank 0's report (a few KB, well under a pipe's capacity). */
    char out[65536];
    size_t got = 0;
    ssize_t r;
    while (got + 1 < sizeof(out) &&
           (r = read(outfd, out + got, sizeof(out) - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
    close(outfd);
    if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        cr_assert(strstr(out, "all results correct"), "output: %s", out);
    char *log = srv_log(&run);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        cr_log_info("fccl-run (reconnect=%s) failed; stderr: %s", reconnect,
                    log);
    free(log);
    srv_cleanup(&run);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(reconnect, fccl_init_rides_out_a_store_restart, .timeout = 90)
{
    make_dir();
    struct srv srv = {0};
    start_on(&srv, 0);
    cr_assert_eq(demo_across_restart(&srv, "1"), 0,
                 "4-rank fccl-demo did not finish across a store restart");
    /* Without reconnect the same job fails: the test can tell. */
    cr_assert_neq(demo_across_restart(&srv, "0"), 0,
                  "without reconnect the job survived: the restart missed init");
    srv_cleanup(&srv);
    remove_dir();
}

/* TLS and token are set up again on the new connection (handshake,
 * VALIDATE, AUTH) against a server that requires both. */
Test(reconnect, tls_and_token_redone, .timeout = 60)
{
    if (system("openssl version >/dev/null 2>&1") != 0)
        cr_skip_test("no openssl program to make certificates");
    make_dir();
    char cmd[1024], crt[160], key[160], tok[160];
    snprintf(crt, sizeof(crt), "%s/server.crt", jdir);
    snprintf(key, sizeof(key), "%s/server.key", jdir);
    snprintf(tok, sizeof(tok), "%s/token", jdir);
    snprintf(cmd, sizeof(cmd),
             "{ openssl req -x509 -newkey rsa:2048 -nodes -days 1 -keyout %s "
             "-out %s -subj /CN=store -addext subjectAltName=IP:127.0.0.1 && "
             "printf 'reconnect-test-token-0123456789' > %s && "
             "chmod 600 %s %s; } >/dev/null 2>&1",
             key, crt, tok, key, tok);
    cr_assert_eq(system(cmd), 0, "making the certificate failed");
    const char *args[] = {"--tls-cert", crt, "--tls-key", key,
                          "--tls-required", "--token-file", tok,
                          "--auth-required", NULL};
    memcpy(more_args, args, sizeof(args));
    struct srv srv = {0};
    start_on(&srv, 0);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", srv.port);
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = addr;
    o.timeout_ms = 10000;
    o.tls_ca = crt;
    o.token_file = tok;
    o.reconnect = 1;
    fccl_store_t *s = NULL;
    cr_assert_eq(fccl_store_connect(&o, &s), FCCL_OK, "%s", fccl_last_error());
    cr_assert_eq(fccl_store_set(s, "t", "tls", 3), FCCL_OK, "%s",
                 fccl_last_error());
    struct waiter w = {.s = s, .rc = 99};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    h_sleep_ms(300);
    restart(&srv);
    fccl_store_opts_t o2 = o;
    o2.reconnect = 0;
    fccl_store_t *other = NULL;
    cr_assert_eq(fccl_store_connect(&o2, &other), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(other, "late", "v", 1), FCCL_OK);
    pthread_join(t, NULL);
    if (w.rc != FCCL_OK) {
        char *log = srv_log(&srv);
        cr_log_error("server log after the restart: %s", log);
        free(log);
    }
    cr_assert_eq(w.rc, FCCL_OK, "WAIT over TLS: %s", w.msg);
    expect_value(s, "t", "tls");
    fccl_store_close(other);
    fccl_store_close(s);
    srv_cleanup(&srv);
    memset(more_args, 0, sizeof(more_args));
    unlink(crt);
    unlink(key);
    unlink(tok);
    remove_dir();
}

/* A server that closes on the request itself (a value over its limit) is
 * not asked again and again until the timeout: the retries are capped. */
Test(reconnect, refused_request_not_retried_forever, .timeout = 60)
{
    make_dir();
    const char *args[] = {"--max-value-bytes", "1024", NULL};
    memcpy(more_args, args, sizeof(args));
    struct srv srv = {0};
    start_on(&srv, 0);
    fccl_store_t *s = open_at(srv.port, 1); /* timeout 10 s */
    static char big[4096];
    uint64_t t0 = fccl_now_ns();
    int rc = fccl_store_set(s, "big", big, sizeof(big));
    double secs = (double)(fccl_now_ns() - t0) / 1e9;
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO || rc == FCCL_ERR_LIMIT,
              "SET over the limit returned %d", rc);
    cr_assert(secs < 5.0, "the refused SET took %.1f s", secs);
    /* The handle still works for what the server accepts. */
    cr_assert_eq(fccl_store_set(s, "small", "x", 1), FCCL_OK, "%s",
                 fccl_last_error());
    expect_value(s, "small", "x");
    fccl_store_close(s);
    srv_cleanup(&srv);
    memset(more_args, 0, sizeof(more_args));
    remove_dir();
}
