/*
 * The store API on etcd: the calls of tests/test_client.c against an
 * etcd:// handle on a one-member cluster started for each test (every
 * call, waits and timeouts, wrong types, limits, the key space seen by
 * etcdctl), then members failing under a three-member cluster, etcd's
 * user/password authentication and TLS to etcd.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fccl/store.h"
#include "lib/etcd.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/store_suite.h"

static struct etcd_cluster cl;
static char addr[400];

static void up(int n, const char *const *extra, const char *prefix)
{
    cr_assert_eq(etcd_cluster_start(&cl, n, extra), 0, "etcd did not start");
    snprintf(addr, sizeof(addr), "%s%s", cl.addr, prefix ? prefix : "");
}

static void start1(void) { up(1, NULL, "/t"); }
static char tls_dir[128]; /* the TLS test's certificates */

static void stop(void)
{
    etcd_cluster_stop(&cl);
    if (tls_dir[0])
        th_rmtree(tls_dir);
    tls_dir[0] = '\0';
}

TestSuite(etcd, .init = start1, .fini = stop, .timeout = 60);
TestSuite(etcd_own, .fini = stop, .timeout = 90);

static fccl_store_t *open_at(const char *a, int raw, int64_t timeout_ms)
{
    return srv_connect_to(a, FCCL_DIALECT_MODERN, raw, timeout_ms);
}

static fccl_store_t *store(void) { return open_at(addr, 0, 10000); }

Test(etcd, set_get_overwrite_empty)
{
    fccl_store_t *s = store();
    ss_set_get_overwrite_empty(s);
    cr_assert_str_eq(fccl_store_addr(s), addr);
    fccl_store_close(s);
}

/* 1 MiB: under etcd's 1.5 MiB limit. */
SS_TEST_WITH(etcd, binary_and_large_values, store, 1u << 20)

Test(etcd, value_over_the_request_limit_names_it)
{
    fccl_store_t *s = store();
    size_t big = 2u << 20;
    char *b = calloc(1, big);
    int rc = fccl_store_set(s, "huge", b, big);
    cr_assert_eq(rc, FCCL_ERR_LIMIT, "rc %d: %s", rc, fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "max-request-bytes"), "%s",
              fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "'/huge'"), "%s", fccl_last_error());
    free(b);
    cr_assert_eq(fccl_store_set(s, "after", "1", 1), FCCL_OK,
                 "the handle stays usable");
    fccl_store_close(s);
}

Test(etcd, add_counts_in_decimal_and_refuses_other_values)
{
    fccl_store_t *s = store();
    ss_add_counts_in_decimal(s);
    int64_t v = 0;
    cr_assert_eq(fccl_store_set(s, "word", "abc", 3), FCCL_OK);
    int rc = fccl_store_add(s, "word", 1, &v);
    cr_assert_eq(rc, FCCL_ERR_INVALID, "rc %d", rc);
    cr_assert(strstr(fccl_last_error(), "'/word'") &&
              strstr(fccl_last_error(), "not a decimal integer"), "%s",
              fccl_last_error());
    srv_expect_cstr(s, "word", "abc");
    cr_assert_eq(fccl_store_add(s, "n", 2, &v), FCCL_OK, "still usable");
    /* ss_add_counts_in_decimal left 2^40 - 2. */
    cr_assert_eq(v, (int64_t)1 << 40);
    fccl_store_close(s);
}

struct adder {
    int n;
};

static void *add_many(void *arg)
{
    struct adder *a = arg;
    fccl_store_t *s = store();
    for (int i = 0; i < a->n; i++)
        cr_assert_eq(fccl_store_add(s, "race", 1, NULL), FCCL_OK, "%s",
                     fccl_last_error());
    fccl_store_close(s);
    return NULL;
}

Test(etcd, concurrent_adds_all_count)
{
    pthread_t t[4];
    struct adder a = {25};
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, add_many, &a);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    fccl_store_t *s = store();
    srv_expect_cstr(s, "race", "100");
    fccl_store_close(s);
}

SS_TEST(etcd, compare_set_all_cases, store)

Test(etcd, check_delete_num_keys)
{
    fccl_store_t *s = store();
    /* Queues are not keys: none of the counts below sees this one. */
    cr_assert_eq(fccl_store_queue_push(s, "q", "i", 1), FCCL_OK);
    ss_check_delete_num_keys(s);
    fccl_store_close(s);
}

Test(etcd, append_multi_ping_stats)
{
    fccl_store_t *s = store();
    ss_append_multi_ping(s, 1e7);
    char *text = NULL;
    cr_assert_eq(fccl_store_stats(s, &text, NULL), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert(strstr(text, "backend etcd\n") &&
              strstr(text, "client_requests "), "%s", text);
    free(text);
    fccl_store_close(s);
}

Test(etcd, multi_set_and_get_past_one_transaction)
{
    fccl_store_t *s = store();
    enum { N = 300 }; /* three transactions of etcd's 128 operations */
    static char kb[N][16], vb[N][16];
    const char *keys[N];
    const void *vals[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        snprintf(kb[i], sizeof(kb[i]), "m%03d", i);
        lens[i] = (size_t)snprintf(vb[i], sizeof(vb[i]), "v%d", i * 7);
        keys[i] = kb[i];
        vals[i] = vb[i];
    }
    cr_assert_eq(fccl_store_multi_set(s, keys, vals, lens, N), FCCL_OK, "%s",
                 fccl_last_error());
    void *got[N];
    size_t glen[N];
    cr_assert_eq(fccl_store_multi_get(s, keys, N, got, glen, 5000), FCCL_OK,
                 "%s", fccl_last_error());
    for (int i = 0; i < N; i++) {
        cr_assert(glen[i] == lens[i] && memcmp(got[i], vb[i], lens[i]) == 0,
                  "key %d", i);
        free(got[i]);
    }
    int64_t n = 0;
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, N);
    fccl_store_close(s);
}

SS_TEST(etcd, list_keys_sorted_and_through_views, store)

SS_TEST_WITH(etcd, queues_fifo_and_blocking_pop, store, store)

SS_TEST_WITH(etcd, wait_and_get_block_until_set, store, store)

Test(etcd, timeouts_name_the_keys_and_the_handle_stays_usable)
{
    fccl_store_t *s = store();
    void *v = NULL;
    double t0 = th_now();
    int rc = fccl_store_get(s, "never", &v, NULL, 500);
    double dt = th_now() - t0;
    cr_assert_eq(rc, FCCL_ERR_TIMEOUT, "rc %d", rc);
    cr_assert(dt > 0.4 && dt < 3, "%.3f s", dt);
    cr_assert(strstr(fccl_last_error(), "'/never'") &&
              strstr(fccl_last_error(), addr), "%s", fccl_last_error());
    fccl_store_set(s, "here", "1", 1);
    const char *keys[2] = {"here", "gone"};
    rc = fccl_store_wait(s, keys, 2, 300);
    cr_assert_eq(rc, FCCL_ERR_TIMEOUT);
    cr_assert(strstr(fccl_last_error(), "'/gone'") &&
              !strstr(fccl_last_error(), "'/here'"), "%s",
              fccl_last_error());
    cr_assert_eq(fccl_store_set(s, "after", "x", 1), FCCL_OK);
    srv_expect_cstr(s, "after", "x");
    /* zero timeouts on present keys succeed */
    cr_assert_eq(fccl_store_get(s, "here", &v, NULL, 0), FCCL_OK);
    free(v);
    cr_assert_eq(fccl_store_wait(s, keys, 1, 0), FCCL_OK);
    fccl_store_close(s);
}

Test(etcd, barrier_releases_at_world_size)
{
    fccl_store_t *s = store();
    cr_assert_eq(fccl_store_barrier(s, "bar", 2, 300), FCCL_ERR_TIMEOUT);
    cr_assert(strstr(fccl_last_error(), "this one counted"), "%s",
              fccl_last_error());
    srv_expect_cstr(s, "bar", "1");
    double t0 = th_now();
    cr_assert_eq(fccl_store_barrier(s, "bar", 2, 5000), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert(th_now() - t0 < 2);
    fccl_store_close(s);
}

static void *barrier_arrive(void *arg)
{
    (void)arg;
    fccl_store_t *s = store();
    th_sleep_ms(300);
    cr_assert_eq(fccl_store_barrier(s, "b3", 3, 10000), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(s);
    return NULL;
}

Test(etcd, barrier_waits_for_the_others)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, barrier_arrive, NULL);
    fccl_store_t *s = store();
    double t0 = th_now();
    cr_assert_eq(fccl_store_barrier(s, "b3", 3, 10000), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert(th_now() - t0 > 0.25);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    srv_expect_cstr(s, "b3", "3");
    fccl_store_close(s);
}

Test(etcd, one_key_space_with_etcdctl_and_raw_keys)
{
    fccl_store_t *s = store(), *raw = NULL;
    cr_assert_eq(fccl_store_set(s, "job/x", "from-fccl", 9), FCCL_OK);
    char *out = NULL;
    cr_assert_eq(etcd_cluster_ctl(&cl, "get --print-value-only /t/job/x",
                                  &out), 0, "%s", out);
    cr_assert(strstr(out, "from-fccl"), "etcdctl sees '%s'", out);
    free(out);
    cr_assert_eq(etcd_cluster_ctl(&cl, "put /t/job/y from-etcdctl", NULL), 0);
    srv_expect_cstr(s, "job/y", "from-etcdctl");
    raw = open_at(addr, 1, 5000);
    srv_expect_cstr(raw, "/job/x", "from-fccl");
    cr_assert_eq(fccl_store_set(raw, "noslash", "r", 1), FCCL_OK);
    cr_assert_eq(etcd_cluster_ctl(&cl, "get --print-value-only /tnoslash",
                                  &out), 0);
    cr_assert(strstr(out, "r"), "%s", out);
    free(out);
    fccl_store_close(raw);
    fccl_store_close(s);
}

SS_TEST_WITH(etcd, threads_share_one_handle, store, 20)

Test(etcd, bad_arguments)
{
    fccl_store_t *s = store();
    void *v;
    cr_assert_eq(fccl_store_set(s, NULL, "x", 1), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_store_get(s, "k", NULL, NULL, 0), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_store_get(s, NULL, &v, NULL, 0), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_store_barrier(s, "b", 0, 10), FCCL_ERR_INVALID);
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    fccl_store_t *x = NULL;
    const char *bad[] = {"etcd://", "etcd://host", "etcd://h:1,", "etcd://:0"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        o.addr = bad[i];
        cr_assert_eq(fccl_store_connect(&o, &x), FCCL_ERR_INVALID, "%s",
                     bad[i]);
        cr_assert_null(x);
    }
    cr_assert_eq(fccl_store_lease_id(s), 0);
    fccl_store_close(s);
}

Test(etcd_own, connect_gives_up_at_the_timeout)
{
    char a[64];
    double dt;
    int rc = srv_connect_nowhere("etcd://", 600, a, sizeof(a), &dt);
    cr_assert_eq(rc, FCCL_ERR_CONNECT, "rc %d: %s", rc, fccl_last_error());
    cr_assert(dt < 3);
    cr_assert(strstr(fccl_last_error(), a), "%s", fccl_last_error());
}

Test(etcd_own, lower_max_txn_ops_is_followed)
{
    up(1, (const char *const[]){"--max-txn-ops", "16", NULL}, "/small");
    fccl_store_t *s = store();
    enum { N = 50 };
    static char kb[N][16];
    const char *keys[N];
    const void *vals[N];
    size_t lens[N];
    for (int i = 0; i < N; i++) {
        snprintf(kb[i], sizeof(kb[i]), "k%d", i);
        keys[i] = kb[i];
        vals[i] = kb[i];
        lens[i] = strlen(kb[i]);
    }
    cr_assert_eq(fccl_store_multi_set(s, keys, vals, lens, N), FCCL_OK, "%s",
                 fccl_last_error());
    int64_t n = 0;
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, N);
    fccl_store_close(s);
}

/* ---- members failing ---- */

static void *late_setter(void *arg)
{
    (void)arg;
    fccl_store_t *s = store();
    th_sleep_ms(1500);
    cr_assert_eq(fccl_store_set(s, "after-kill", "yes", 3), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(s);
    return NULL;
}

Test(etcd_own, calls_go_on_when_the_leader_is_killed)
{
    TH_LONG_CASE("a 3-member cluster and its leader killed, about 7 s");
    up(3, NULL, "/ha");
    fccl_store_t *s = store();
    int64_t v = 0;
    for (int i = 0; i < 10; i++)
        cr_assert_eq(fccl_store_add(s, "n", 1, &v), FCCL_OK, "%s",
                     fccl_last_error());
    pthread_t t;
    pthread_create(&t, NULL, late_setter, NULL);
    int lead = etcd_cluster_leader(&cl);
    cr_assert_geq(lead, 0, "no leader");
    etcd_cluster_kill(&cl, lead);
    for (int i = 0; i < 10; i++)
        cr_assert_eq(fccl_store_add(s, "n", 1, &v), FCCL_OK, "%s",
                     fccl_last_error());
    cr_assert_eq(v, 20, "every add counted once");
    void *got = NULL;
    cr_assert_eq(fccl_store_get(s, "after-kill", &got, NULL, 20000), FCCL_OK,
                 "a wait rides out the loss: %s", fccl_last_error());
    free(got);
    pthread_join(t, NULL);
    fccl_store_close(s);
}

/* ---- authentication and TLS ---- */

static void write_file(const char *path, const char *text, int mode)
{
    cr_assert_eq(th_write_file(path, text, mode), 0, "%s: %s", path,
                 strerror(errno));
}

/* Options for the suite's cluster (addr), a 5 s timeout. */
static void opts_5s(fccl_store_opts_t *o)
{
    fccl_store_opts_init(o);
    o->addr = addr;
    o->timeout_ms = 5000;
}

static int connect_as(const char *user, const char *pwfile, fccl_store_t **s)
{
    fccl_store_opts_t o;
    opts_5s(&o);
    o.etcd_user = user;
    o.etcd_password_file = pwfile;
    return fccl_store_connect(&o, s);
}

Test(etcd_own, user_and_password)
{
    up(1, NULL, "/auth");
    cr_assert_eq(etcd_cluster_ctl(&cl, "user add root:rootpw >/dev/null",
                                  NULL), 0);
    cr_assert_eq(etcd_cluster_ctl(&cl, "auth enable >/dev/null", NULL), 0);
    char good[200], bad[200], open_[200];
    snprintf(good, sizeof(good), "%s/good.pw", cl.dir);
    snprintf(bad, sizeof(bad), "%s/bad.pw", cl.dir);
    snprintf(open_, sizeof(open_), "%s/open.pw", cl.dir);
    write_file(good, "rootpw\n", 0600);
    write_file(bad, "wrong\n", 0600);
    write_file(open_, "rootpw\n", 0644);
    fccl_store_t *s = NULL;
    int rc = connect_as("root", bad, &s);
    cr_assert_eq(rc, FCCL_ERR_AUTH, "rc %d: %s", rc, fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "authentication failed"), "%s",
              fccl_last_error());
    rc = connect_as("root", open_, &s);
    cr_assert_eq(rc, FCCL_ERR_AUTH, "a password others can read: %s",
                 fccl_last_error());
    rc = connect_as(NULL, NULL, &s);
    if (rc == FCCL_OK) { /* status is open to all; writes are not */
        rc = fccl_store_set(s, "k", "v", 1);
        cr_assert_eq(rc, FCCL_ERR_AUTH, "rc %d: %s", rc, fccl_last_error());
        fccl_store_close(s);
    }
    cr_assert_eq(connect_as("root", good, &s), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(s, "k", "v", 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(s, "k", "v");
    fccl_store_close(s);
    /* the tcpstore tool: exit 4 naming the cause */
    char cmd[800], *out = NULL;
    snprintf(cmd, sizeof(cmd), "TCPSTORE_ETCD_USER=root "
             "TCPSTORE_ETCD_PASSWORD_FILE=%s %s/tcpstore --timeout 5 "
             "--addr %s get k", bad, th_bin_dir(), addr);
    rc = th_sh(cmd, 20, &out);
    cr_assert_eq(rc, 4, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "authentication failed"), "%s", out);
    free(out);
}

/* A client of the TLS member trusting `ca`, with a client certificate
 * (NULL: none). */
static int connect_tls(const char *ca, const char *crt, const char *key,
                       fccl_store_t **s)
{
    fccl_store_opts_t o;
    opts_5s(&o);
    o.tls_ca = ca;
    o.tls_cert = crt;
    o.tls_key = key;
    return fccl_store_connect(&o, s);
}

static void sh_ok(const char *dir, const char *cmd)
{
    char full[1500], *out = NULL;
    snprintf(full, sizeof(full), "cd %s && %s", dir, cmd);
    int rc = th_sh(full, 60, &out);
    cr_assert_eq(rc, 0, "%s: %s", cmd, out);
    free(out);
}

Test(etcd_own, tls_with_client_certificates_and_a_wrong_ca)
{
    char *dir = tls_dir; /* removed by the suite's fini, also on failure */
    cr_assert_eq(th_mkdtemp(tls_dir, sizeof(tls_dir), "fccl-etcd-tls"), 0);
    sh_ok(dir, "printf 'subjectAltName=IP:127.0.0.1\\n' > san.ext && "
          "openssl req -x509 " TH_NEWKEY " -nodes -days 1 -subj /CN=ca "
          "-keyout ca.key -out ca.crt 2>/dev/null && "
          "openssl req -x509 " TH_NEWKEY " -nodes -days 1 -subj /CN=other "
          "-keyout other.key -out other.crt 2>/dev/null && "
          "openssl req " TH_NEWKEY " -nodes -subj /CN=etcd "
          "-keyout srv.key -out srv.csr 2>/dev/null && "
          "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key "
          "-CAcreateserial -days 1 -extfile san.ext -out srv.crt "
          "2>/dev/null && "
          "openssl req " TH_NEWKEY " -nodes -subj /CN=client "
          "-keyout cli.key -out cli.csr 2>/dev/null && "
          "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key "
          "-CAcreateserial -days 1 -out cli.crt 2>/dev/null && "
          "chmod 600 *.key");
    char crt[200], key[200], ca[200], cli_crt[200], cli_key[200], other[200];
    snprintf(crt, sizeof(crt), "%s/srv.crt", dir);
    snprintf(key, sizeof(key), "%s/srv.key", dir);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    snprintf(cli_crt, sizeof(cli_crt), "%s/cli.crt", dir);
    snprintf(cli_key, sizeof(cli_key), "%s/cli.key", dir);
    snprintf(other, sizeof(other), "%s/other.crt", dir);
    struct etcd_tls tls = {crt, key, ca};
    cr_assert_eq(etcd_cluster_start_tls(&cl, 1, NULL, &tls), 0);
    snprintf(addr, sizeof(addr), "%s/tls", cl.addr);
    fccl_store_t *s = NULL;
    cr_assert_eq(connect_tls(ca, cli_crt, cli_key, &s), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(s, "k", "v", 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(s, "k", "v");
    fccl_store_close(s);
    /* a CA that did not sign the member's certificate */
    int rc = connect_tls(other, cli_crt, cli_key, &s);
    cr_assert_eq(rc, FCCL_ERR_AUTH, "rc %d: %s", rc, fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "not trusted"), "%s",
              fccl_last_error());
    /* no client certificate: the member refuses the handshake */
    rc = connect_tls(ca, NULL, NULL, &s);
    cr_assert_eq(rc, FCCL_ERR_AUTH, "rc %d: %s", rc, fccl_last_error());
    /* the tool: exit 4 */
    char cmd[1200], *out = NULL;
    snprintf(cmd, sizeof(cmd), "TCPSTORE_TLS_CA=%s TCPSTORE_TLS_CERT=%s "
             "TCPSTORE_TLS_KEY=%s %s/tcpstore --timeout 5 --addr %s get k",
             other, cli_crt, cli_key, th_bin_dir(), addr);
    rc = th_sh(cmd, 20, &out);
    cr_assert_eq(rc, 4, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "TLS"), "%s", out);
    free(out);
}

/* ---- jobs on etcd (fccl-run --store etcd://...) ---- */

#include <signal.h>
#include <sys/wait.h>

/* `sh -c cmd` in a process group of its own, output into log. */
static pid_t spawn_sh(const char *cmd, const char *log)
{
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    return th_spawn_logged(argv, log, 1);
}

static char *slurp(const char *path)
{
    char cmd[600], *out = NULL;
    snprintf(cmd, sizeof(cmd), "cat %s", path);
    th_sh(cmd, 10, &out);
    return out;
}

/* Run an 8-rank fccl-demo through the cluster; kill member `victim`
 * (-1: the leader) after delay_ms; the job must finish. */
static void job_survives(int victim, int delay_ms)
{
    up(3, NULL, "/job");
    char log[200], cmd[1200];
    snprintf(log, sizeof(log), "%s/job.log", cl.dir);
    snprintf(cmd, sizeof(cmd), "FCCL_PROVIDER=tcp FCCL_TIMEOUT=60 "
             "exec %s/fccl-run -n 8 --store %s %s/fccl-demo", th_bin_dir(),
             addr, th_bin_dir());
    pid_t pid = spawn_sh(cmd, log);
    th_sleep_ms(delay_ms);
    int who = victim >= 0 ? victim : etcd_cluster_leader(&cl);
    cr_assert_geq(who, 0, "no leader found");
    etcd_cluster_kill(&cl, who);
    int st = th_reap(pid, 80000);
    char *out = slurp(log);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "job status %d after killing member %d: %s", st, who, out);
    cr_assert(strstr(out, "all results correct"), "%s", out);
    free(out);
}

Test(etcd_own, job_bootstraps_while_the_leader_is_killed, .timeout = 120)
{
    job_survives(-1, 150);
}

Test(etcd_own, job_loses_a_member_during_group_creation, .timeout = 120)
{
    job_survives(2, 900);
}

Test(etcd_own, a_killed_launcher_leaves_no_keys_after_the_lease, .timeout = 60)
{
    TH_LONG_CASE("waits out a lease");
    up(1, NULL, "/lease");
    char log[200], cmd[1500];
    snprintf(log, sizeof(log), "%s/launcher.log", cl.dir);
    /* Ranks that write a key under the launcher's lease, then linger. */
    snprintf(cmd, sizeof(cmd), "FCCL_STORE_LEASE_TTL=2 exec %s/fccl-run -n 2 "
             "--store %s sh -c 'TCPSTORE_LEASE=$FCCL_STORE_LEASE "
             "%s/tcpstore --addr $FCCL_STORE_ADDRS set rank$RANK up && "
             "sleep 30'", th_bin_dir(), addr, th_bin_dir());
    pid_t pid = spawn_sh(cmd, log);
    char *out = NULL;
    int n = 0;
    for (double end = th_now() + 15; th_now() < end && n < 2;) {
        th_sleep_ms(100);
        free(out);
        out = NULL;
        etcd_cluster_ctl(&cl, "get --prefix /lease/rank --keys-only", &out);
        n = th_count(out ? out : "", "/lease/rank");
    }
    cr_assert_eq(n, 2, "the ranks' keys: %s", out);
    free(out);
    kill(pid, SIGKILL); /* the launcher alone; its ranks linger */
    th_reap(pid, 5000);
    th_sleep_ms(4500); /* TTL 2 s, and etcd's expiry sweep */
    etcd_cluster_ctl(&cl, "get --prefix /lease --keys-only", &out);
    cr_assert_eq(th_count(out ? out : "", "/lease"), 0,
                 "keys left after the lease: %s", out);
    free(out);
    kill(-pid, SIGKILL);
    /* A finished launcher revokes its lease at once. */
    snprintf(cmd, sizeof(cmd), "FCCL_STORE_LEASE_TTL=60 %s/fccl-run -n 2 "
             "--store %s sh -c 'TCPSTORE_LEASE=$FCCL_STORE_LEASE "
             "%s/tcpstore --addr $FCCL_STORE_ADDRS set done$RANK y'",
             th_bin_dir(), addr, th_bin_dir());
    cr_assert_eq(th_sh(cmd, 30, &out), 0, "%s", out);
    free(out);
    etcd_cluster_ctl(&cl, "get --prefix /lease --keys-only", &out);
    cr_assert_eq(th_count(out ? out : "", "/lease"), 0,
                 "keys left after the job: %s", out);
    free(out);
}

Test(etcd_own, ranks_without_a_launcher_share_the_jobs_lease, .timeout = 90)
{
    TH_LONG_CASE("waits out a lease");
    up(1, NULL, "/nolaunch");
    char cmd[2000], log[2][200];
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        snprintf(log[r], sizeof(log[r]), "%s/rank%d.log", cl.dir, r);
        snprintf(cmd, sizeof(cmd), "FCCL_STORE_ADDRS=%s FCCL_STORE_LEASE_TTL=2 "
                 "FCCL_PROVIDER=tcp FCCL_NET_IFACE=lo RANK=%d LOCAL_RANK=%d "
                 "WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 exec %s/fccl-demo", addr, r,
                 r, th_bin_dir());
        pid[r] = spawn_sh(cmd, log[r]);
    }
    for (int r = 0; r < 2; r++) {
        int st = th_reap(pid[r], 60000);
        char *out = slurp(log[r]);
        cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "rank %d: %d: %s", r, st, out);
        free(out);
    }
    char *out = NULL;
    etcd_cluster_ctl(&cl, "get --prefix /nolaunch --keys-only", &out);
    /* etcdctl prints the key "/nolaunch" NUL "lease": the text stops at
     * the NUL */
    cr_assert(out && th_count(out, "/nolaunch") >= 1, "the job's lease key: "
              "%s", out);
    free(out);
    th_sleep_ms(4500); /* TTL 2 s after the last rank closed */
    etcd_cluster_ctl(&cl, "get --prefix /nolaunch --keys-only", &out);
    cr_assert_eq(th_count(out ? out : "", "/nolaunch"), 0, "left: %s", out);
    free(out);
}
