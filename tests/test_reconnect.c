/*
 * Reconnecting clients (opts.reconnect): the real tcpstore-server with a
 * journal is SIGKILLed and restarted on the same port; a reconnecting
 * handle keeps working, a pending WAIT completes, an ADD whose reply was
 * lost is reported (not repeated), and without reconnect the handle
 * reports CLOSED as before.
 */
#include <pthread.h>

#include "fccl/store.h"
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/wire.h"

static char jdir[64], jpath[128];

/* A fresh directory for the journal; removed with all in it. */
static void make_dir(void)
{
    cr_assert_eq(th_mkdtemp(jdir, sizeof(jdir), "fccl-rc"), 0);
    snprintf(jpath, sizeof(jpath), "%s/store.journal", jdir);
}

static void remove_dir(void) { th_rmtree(jdir); }

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

static void restart(struct srv *s)
{
    int port = s->port;
    srv_kill_hard(s);
    srv_cleanup(s);
    start_on(s, port);
}

/* A fresh journal folder and a server on it (start_on, any port). */
static void start_fresh(struct srv *srv)
{
    make_dir();
    start_on(srv, 0);
}

Test(reconnect, survives_restart_between_calls, .timeout = 60)
{
    struct srv srv = {0};
    start_fresh(&srv);
    fccl_store_t *s = srv_store_open(srv.port, 1), *view = NULL;
    cr_assert_eq(fccl_store_prefixed(s, "job", &view), FCCL_OK);
    cr_assert_eq(fccl_store_set(s, "a", "1", 1), FCCL_OK);
    cr_assert_eq(fccl_store_set(view, "b", "2", 1), FCCL_OK);
    int64_t n = 0;
    cr_assert_eq(fccl_store_add(s, "ctr", 5, &n), FCCL_OK);
    restart(&srv);
    /* Journal kept the keys; the handle and its view reconnect. */
    srv_expect_cstr(s, "a", "1");
    srv_expect_cstr(view, "b", "2");
    cr_assert_eq(fccl_store_set(s, "c", "3", 1), FCCL_OK);
    srv_expect_cstr(s, "c", "3");
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

/* Poll the server's STATS until it holds `n` parked waiters: a client's
 * WAIT has reached it (a fixed sleep lost that race on a loaded machine). */
static void await_waiters(int port, long n)
{
    fccl_store_t *s = srv_store_open(port, 0);
    long have = -1;
    for (int i = 0; i < 1000 && have < n; i++) {
        char *text = NULL;
        size_t len = 0;
        cr_assert_eq(fccl_store_stats(s, &text, &len), FCCL_OK, "%s",
                     fccl_last_error());
        const char *w = strstr(text, "\nwaiters ");
        have = w ? atol(w + 9) : -1;
        free(text);
        if (have < n)
            th_sleep_ms(10);
    }
    fccl_store_close(s);
    cr_assert(have >= n, "the server holds %ld waiters, not %ld", have, n);
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
    struct srv srv = {0};
    start_fresh(&srv);
    struct waiter w = {.s = srv_store_open(srv.port, 1), .rc = 99};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
    await_waiters(srv.port, 1);
    restart(&srv);
    th_sleep_ms(300);
    fccl_store_t *other = srv_store_open(srv.port, 0);
    cr_assert_eq(fccl_store_set(other, "late", "v", 1), FCCL_OK);
    pthread_join(t, NULL);
    cr_assert_eq(w.rc, FCCL_OK, "WAIT: %s", w.msg);
    srv_expect_cstr(w.s, "late", "v");
    fccl_store_close(other);
    fccl_store_close(w.s);
    srv_cleanup(&srv);
    remove_dir();
}

#define TCP_ESTABLISHED_ST 0x01u
#define TCP_LISTEN_ST 0x0Au

/* The rx_queue column of /proc/net/tcp summed over the IPv4 sockets of
 * local port `port` in TCP state `st`, or -1 when it cannot be read: for
 * the listener (TCP_LISTEN_ST) the connections waiting to be accepted,
 * for the server's ends of its connections (TCP_ESTABLISHED_ST) the
 * request bytes it has not read. */
static int tcp_rx_queue(int port, unsigned st)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        unsigned lport = 0, state = 0, txq = 0, rxq = 0;
        if (sscanf(line, " %*d: %*8x:%x %*8x:%*x %x %x:%x", &lport, &state,
                   &txq, &rxq) == 4 &&
            (int)lport == port && state == st)
            n += (int)rxq;
    }
    fclose(f);
    return n;
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
    struct srv srv = {0};
    start_fresh(&srv);
    struct adder a = {.s = srv_store_open(srv.port, 1), .rc = 99};
    int64_t v = 0;
    cr_assert_eq(fccl_store_add(a.s, "ctr", 10, &v), FCCL_OK);
    /* A stopped server takes the ADD into its socket buffer and never
     * answers; then it dies: the reply is lost. */
    kill(srv.pid, SIGSTOP);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, add_thread, &a), 0);
    /* The ADD must be in the stopped server's socket before it dies (a
     * fixed sleep can lose that race on a loaded machine: an ADD sent after
     * the restart is simply applied). */
    int queued = 0;
    for (int i = 0; i < 1000 && queued <= 0; i++) {
        queued = tcp_rx_queue(srv.port, TCP_ESTABLISHED_ST);
        if (queued <= 0)
            th_sleep_ms(10);
    }
    cr_assert(queued > 0, "the ADD never reached the stopped server");
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
    struct srv srv = {0};
    start_fresh(&srv);
    fccl_store_t *s = srv_store_open(srv.port, 0);
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

/* Read what is left in fd into out (NUL-terminated). */
static void read_rest(int fd, char *out, size_t cap)
{
    size_t got = strlen(out);
    ssize_t r;
    while (got + 1 < cap && (r = read(fd, out + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    out[got] = '\0';
}

/* Run 4 fccl-demo ranks (started directly: fccl-run --store would itself
 * wait for the stopped store before starting them) against the store at
 * srv->port, stopped now; kill and restart the store while the ranks are
 * in fccl_init.  0 when every rank exited 0 and rank 0 checked its
 * results, else non-zero. */
static int demo_across_restart(struct srv *srv, const char *reconnect)
{
    char port[16], demo[512], job[64], rank[16];
    snprintf(port, sizeof(port), "%d", srv->port);
    snprintf(demo, sizeof(demo), "%s/fccl-demo", th_bin_dir());
    snprintf(job, sizeof(job), "rc-init-%s-%d", reconnect, (int)getpid());
    const char *vars[][2] = {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port},
                             {"WORLD_SIZE", "4"}, {"LOCAL_WORLD_SIZE", "4"},
                             {"FCCL_JOB_ID", job}, {"FCCL_TIMEOUT", "30"},
                             {"FCCL_STORE_RECONNECT", reconnect}};
    const size_t nvars = sizeof(vars) / sizeof(vars[0]);
    for (size_t i = 0; i < nvars; i++)
        setenv(vars[i][0], vars[i][1], 1);
    /* A stopped server still accepts connections (the backlog): every rank
     * sends VALIDATE and its init/ ADD, and none gets a reply. */
    kill(srv->pid, SIGSTOP);
    struct srv ranks[4] = {{0}};
    int outfd[4];
    for (int r = 0; r < 4; r++) {
        snprintf(rank, sizeof(rank), "%d", r);
        setenv("RANK", rank, 1);
        setenv("LOCAL_RANK", rank, 1);
        const char *argv[] = {demo, NULL};
        srv_spawn(&ranks[r], argv, &outfd[r]);
    }
    for (size_t i = 0; i < nvars; i++)
        unsetenv(vars[i][0]);
    unsetenv("RANK");
    unsetenv("LOCAL_RANK");
    /* Every rank is connected and has sent its requests (a rank started
     * slowly would otherwise meet only the restarted server). */
    int queued = 0;
    for (int i = 0; i < 600 && queued < 4; i++) {
        queued = tcp_rx_queue(srv->port, TCP_LISTEN_ST);
        if (queued < 4)
            th_sleep_ms(50);
    }
    cr_log_info("reconnect=%s: %d connections queued at the stopped store",
                reconnect, queued);
    th_sleep_ms(200);
    restart(srv);
    int bad = queued < 4; /* the restart did not land in init */
    char out[65536];
    for (int r = 0; r < 4; r++) {
        int st = srv_wait(&ranks[r], 60000);
        out[0] = '\0';
        read_rest(outfd[r], out, sizeof(out));
        close(outfd[r]);
        int ok = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0 &&
                 (r != 0 || strstr(out, "all results correct"));
        if (!ok) {
            char *log = srv_log(&ranks[r]);
            cr_log_info("rank %d (reconnect=%s) failed; stdout:\n%s\nstderr:"
                        "\n%s", r, reconnect, out, log);
            free(log);
            bad++;
        }
        srv_cleanup(&ranks[r]);
    }
    return bad;
}

Test(reconnect, fccl_init_rides_out_a_store_restart, .timeout = 90)
{
    struct srv srv = {0};
    start_fresh(&srv);
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
    srv_need_openssl();
    make_dir();
    char crt[160], key[160], tok[160];
    snprintf(crt, sizeof(crt), "%s/server.crt", jdir);
    snprintf(key, sizeof(key), "%s/server.key", jdir);
    snprintf(tok, sizeof(tok), "%s/token", jdir);
    srv_make_cert(crt, key, "store");
    FILE *tf = fopen(tok, "w");
    cr_assert(tf, "%s: %s", tok, strerror(errno));
    fputs("reconnect-test-token-0123456789", tf);
    cr_assert_eq(fclose(tf), 0);
    cr_assert_eq(chmod(tok, 0600), 0);
    const char *args[] = {"--tls-cert", crt, "--tls-key", key,
                          "--tls-required", "--token-file", tok,
                          "--auth-required", NULL};
    memcpy(more_args, args, sizeof(args));
    struct srv srv = {0};
    start_on(&srv, 0);
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, srv.port, 10000);
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
    th_sleep_ms(300);
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
    srv_expect_cstr(s, "t", "tls");
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
    fccl_store_t *s = srv_store_open(srv.port, 1); /* timeout 10 s */
    static char big[4096];
    double t0 = th_now();
    int rc = fccl_store_set(s, "big", big, sizeof(big));
    double secs = th_now() - t0;
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO || rc == FCCL_ERR_LIMIT,
              "SET over the limit returned %d", rc);
    cr_assert(secs < 5.0, "the refused SET took %.1f s", secs);
    /* The handle still works for what the server accepts. */
    cr_assert_eq(fccl_store_set(s, "small", "x", 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(s, "small", "x");
    fccl_store_close(s);
    srv_cleanup(&srv);
    memset(more_args, 0, sizeof(more_args));
    remove_dir();
}

/* ---- group creation across store restarts ---- */

struct churn {
    int status;     /* fccl-run's exit code, -1 killed or timed out */
    int reconnects; /* "reconnecting" lines in the ranks' logs */
    char out[8192]; /* the ranks' stdout */
    char why[2048]; /* the ranks' "boot_check: ..." failure lines */
};

/* The lines of `log` naming a rank's failed call, for an assertion's
 * message (Criterion hides info logs, and a CI log keeps its tail). */
static void failure_lines(const char *log, char *why, size_t cap)
{
    size_t off = 0;
    why[0] = '\0';
    for (const char *at = log; at && (at = strstr(at, "boot_check: "));) {
        const char *end = strchr(at, '\n');
        int len = end ? (int)(end - at) : (int)strlen(at);
        int w = snprintf(why + off, cap - off, "%.*s\n", len, at);
        if (w < 0 || (size_t)w >= cap - off)
            break;
        off += (size_t)w;
        at += len;
    }
}

/* Stop the store (a stopped server takes requests into its socket buffer
 * and never answers: the ranks' pending SET, CHECK, GET, ADD and DELETE
 * requests are lost), then SIGKILL it and start it again on its port
 * with its journal. */
static void stop_and_restart(struct srv *s, int stopped_ms)
{
    kill(s->pid, SIGSTOP);
    th_sleep_ms(stopped_ms);
    restart(s);
}

/* A 4-rank boot_check churn job (group creation in a loop) against the
 * store; once it churns, `restarts` times: wait a little, stop the store,
 * kill and restart it.  Then let it run on the last server, stop it. */
static void churn_across_restarts(struct srv *srv, const char *reconnect,
                                  int restarts, struct churn *c)
{
    char store[32], prog[512], stop[160], line[512];
    snprintf(store, sizeof(store), "127.0.0.1:%d", srv->port);
    snprintf(prog, sizeof(prog), "%s/boot_check", th_testbin_dir());
    snprintf(stop, sizeof(stop), "%s/stop", jdir);
    unlink(stop);
    setenv("FCCL_STORE_RECONNECT", reconnect, 1);
    setenv("FCCL_LOG_LEVEL", "info", 1); /* the reconnect lines */
    setenv("FCCL_TIMEOUT", "30", 1);
    const char *argv[] = {"fccl-run", "-n",  "4",    "--store", store,
                          prog,       "churn", stop, NULL};
    struct srv run = {0};
    int outfd;
    srv_spawn(&run, argv, &outfd);
    unsetenv("FCCL_STORE_RECONNECT");
    unsetenv("FCCL_LOG_LEVEL");
    unsetenv("FCCL_TIMEOUT");
    int churning = 0;
    while (!churning && srv_read_line(outfd, line, sizeof(line), 60000) >= 0)
        churning = strstr(line, "R0 churning") != NULL;
    unsigned seed = (unsigned)getpid();
    for (int i = 0; churning && i < restarts; i++) {
        int before = 20 + (int)(rand_r(&seed) % 200);
        int stopped = 50 + (int)(rand_r(&seed) % 250);
        cr_log_info("restart %d: after %d ms, stopped for %d ms", i, before,
                    stopped);
        th_sleep_ms(before);
        stop_and_restart(srv, stopped);
    }
    th_sleep_ms(500); /* rounds against the last server */
    FILE *f = fopen(stop, "w");
    cr_assert(f, "creating %s", stop);
    fclose(f);
    int st = srv_wait(&run, 120000);
    c->out[0] = '\0';
    read_rest(outfd, c->out, sizeof(c->out));
    close(outfd);
    char *log = srv_log(&run);
    c->reconnects = th_count(log, "reconnecting");
    failure_lines(log, c->why, sizeof(c->why));
    c->status = st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (!churning || c->status != 0)
        cr_log_info("churn (reconnect=%s): %s, exit %d; stdout:\n%s\n"
                    "stderr:\n%s",
                    reconnect, churning ? "churned" : "never churned",
                    c->status, c->out, log);
    free(log);
    srv_cleanup(&run);
    unlink(stop);
}

/* Keys of the bootstrap's group creation left on the store. */
static int group_keys_left(int port)
{
    fccl_store_t *s = srv_store_open(port, 0);
    char **keys = NULL;
    size_t n = 0;
    cr_assert_eq(fccl_store_list_keys(s, "", &keys, &n), FCCL_OK, "%s",
                 fccl_last_error());
    int left = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(keys[i]);
        if (strstr(keys[i], "/grp/") ||
            (len >= 4 && strcmp(keys[i] + len - 4, "/ctx") == 0)) {
            cr_log_error("left behind: %s", keys[i]);
            left++;
        }
    }
    fccl_store_free_keys(keys, n);
    fccl_store_close(s);
    return left;
}

Test(reconnect, group_creation_rides_out_store_restarts, .timeout = 240)
{
    struct srv srv = {0};
    start_fresh(&srv);
    struct churn c;
    churn_across_restarts(&srv, "1", 3, &c);
    cr_assert_eq(c.status, 0, "4-rank group churn failed across 3 store "
                 "restarts:\n%s%s", c.out, c.why);
    for (int r = 0; r < 4; r++) {
        char want[32];
        snprintf(want, sizeof(want), "R%d churn rounds ", r);
        const char *at = strstr(c.out, want);
        cr_assert(at, "rank %d did not report:\n%s", r, c.out);
        int rounds = -1, bad = -1;
        cr_assert_eq(sscanf(at + strlen(want), "%d bad %d", &rounds, &bad), 2);
        cr_expect_eq(bad, 0, "rank %d: %d wrong sums", r, bad);
        cr_expect(rounds > 1, "rank %d: %d rounds", r, rounds);
    }
    /* The restarts hit the ranks' store calls. */
    cr_expect(c.reconnects >= 1, "no rank reconnected: the restarts missed");
    cr_expect_eq(group_keys_left(srv.port), 0, "group keys left behind");
    /* Without reconnect the same job fails: the test can tell. */
    churn_across_restarts(&srv, "0", 1, &c);
    cr_assert_neq(c.status, 0, "without reconnect the job survived: the "
                  "restart missed group creation");
    srv_cleanup(&srv);
    remove_dir();
}

/* ---- tcpstore --reconnect ---- */

/* `tcpstore [flag] get late` (flag may be NULL) waiting while the store is
 * restarted; "late" is set after the restart.  Returns the exit code,
 * -1 if killed; its stdout in out. */
static int cli_get_across_restart(struct srv *srv, const char *flag,
                                  char *out, size_t cap)
{
    char addr[32], cli[512];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", srv->port);
    snprintf(cli, sizeof(cli), "%s/tcpstore", th_bin_dir());
    const char *argv[10] = {cli, "--addr", addr, "--timeout", "20"};
    int n = 5;
    if (flag)
        argv[n++] = flag;
    argv[n++] = "get";
    argv[n++] = "late";
    argv[n] = NULL;
    struct srv run = {0};
    int outfd;
    srv_spawn(&run, argv, &outfd);
    await_waiters(srv->port, 1);
    restart(srv);
    th_sleep_ms(300);
    fccl_store_t *other = srv_store_open(srv->port, 0);
    cr_assert_eq(fccl_store_set(other, "late", "v1", 2), FCCL_OK);
    int st = srv_wait(&run, 30000);
    out[0] = '\0';
    read_rest(outfd, out, cap);
    close(outfd);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char *log = srv_log(&run);
        cr_log_info("tcpstore %s: stderr: %s", flag ? flag : "", log);
        free(log);
    }
    /* the next case waits for the key again */
    cr_assert_eq(fccl_store_delete(other, "late", NULL), FCCL_OK);
    fccl_store_close(other);
    srv_cleanup(&run);
    return st != -1 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(reconnect, cli_flag_and_env, .timeout = 120)
{
    struct srv srv = {0};
    start_fresh(&srv);
    char out[256];
    cr_expect_eq(cli_get_across_restart(&srv, "--reconnect", out, sizeof(out)),
                 0, "tcpstore --reconnect get did not ride out a restart");
    cr_expect_str_eq(out, "v1");
    setenv("TCPSTORE_RECONNECT", "1", 1);
    int ex = cli_get_across_restart(&srv, NULL, out, sizeof(out));
    unsetenv("TCPSTORE_RECONNECT");
    cr_expect_eq(ex, 0, "TCPSTORE_RECONNECT=1 get did not ride it out");
    cr_expect_str_eq(out, "v1");
    /* Without either: the dropped connection is exit 4. */
    cr_expect_eq(cli_get_across_restart(&srv, NULL, out, sizeof(out)), 4);
    cr_expect_str_eq(out, "");
    srv_cleanup(&srv);
    remove_dir();
}
