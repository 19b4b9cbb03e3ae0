/*
 * tcpstore-server --backend etcd://: the TCPStore protocol with its state
 * in etcd.  Every request type through a front-end (modern and legacy
 * dialects, SYNC and STATS), the key space shared with the etcd:// client
 * and etcdctl, two front-ends serving one store, PyTorch 1.13's TCPStore
 * client, and an fccl job that goes on through the second front-end when
 * the first is killed mid-job.
 */
#include <criterion/criterion.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fccl/store.h"
#include "lib/etcd.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/store_suite.h"

#define PYTHON "/usr/bin/python3"

static struct etcd_cluster cl;
static struct srv fe[2];
static char backend[400];

static void start_fe(struct srv *s)
{
    srv_start_local(s, (const char *const[]){"--backend", backend, NULL});
}

static void up(void)
{
    cr_assert_eq(etcd_cluster_start(&cl, 1, NULL), 0, "etcd did not start");
    snprintf(backend, sizeof(backend), "%s/fe", cl.addr);
    start_fe(&fe[0]);
}

static void down(void)
{
    for (int i = 0; i < 2; i++) {
        srv_stop(&fe[i]);
        srv_cleanup(&fe[i]);
    }
    etcd_cluster_stop(&cl);
}

TestSuite(frontend, .init = up, .fini = down, .timeout = 90);

static fccl_store_t *client(const struct srv *s, fccl_dialect_t d)
{
    return srv_store_open_as(s->port, 0, d, 10000);
}

static int present(fccl_store_t *s, const char *key)
{
    int all = -1;
    cr_assert_eq(fccl_store_check(s, &key, 1, &all), FCCL_OK, "%s",
                 fccl_last_error());
    return all;
}

static void cas(fccl_store_t *s, const char *k, const char *exp,
                const char *des, const char *want)
{
    void *cur = NULL;
    size_t n = 0;
    cr_assert_eq(fccl_store_compare_set(s, k, exp, strlen(exp), des,
                                        strlen(des), &cur, &n),
                 FCCL_OK, "%s", fccl_last_error());
    cr_assert(n == strlen(want) && memcmp(cur, want, n) == 0,
              "cas %s: '%.*s', want '%s'", k, (int)n, (char *)cur, want);
    free(cur);
}

Test(frontend, every_call_on_the_modern_dialect)
{
    fccl_store_t *s = client(&fe[0], FCCL_DIALECT_MODERN);
    uint8_t bin[256];
    for (int i = 0; i < 256; i++)
        bin[i] = (uint8_t)i;
    cr_assert_eq(fccl_store_set(s, "bin", bin, sizeof(bin)), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_value(s, "bin", bin, sizeof(bin));
    cr_assert_eq(fccl_store_set(s, "empty", "", 0), FCCL_OK);
    srv_expect_value(s, "empty", "", 0);
    int64_t v = 0;
    cr_assert_eq(fccl_store_add(s, "n", 5, &v), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_add(s, "n", -7, &v), FCCL_OK);
    cr_assert_eq(v, -2);
    srv_expect_cstr(s, "n", "-2");
    cas(s, "c", "", "first", "first");
    cas(s, "c", "first", "second", "second");
    cas(s, "c", "nope", "third", "second");
    cas(s, "m", "exp", "des", "exp");
    cr_assert_eq(present(s, "m"), 0);
    ss_append_multi(s);
    cr_assert_eq(fccl_store_queue_push(s, "q", "i0", 2), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_queue_push(s, "q", "i1", 2), FCCL_OK);
    int64_t n = 0;
    cr_assert_eq(fccl_store_queue_len(s, "q", &n), FCCL_OK);
    cr_assert_eq(n, 2);
    void *item = NULL;
    size_t il = 0;
    cr_assert_eq(fccl_store_queue_pop(s, "q", 0, &item, &il, 1000), FCCL_OK,
                 "%s", fccl_last_error());
    cr_assert(il == 2 && memcmp(item, "i0", 2) == 0, "FIFO");
    free(item);
    /* keys: bin empty n c ap k0 k1 k2 (queues are not keys) */
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 8);
    char **list = NULL;
    size_t ln = 0;
    cr_assert_eq(fccl_store_list_keys(s, "k", &list, &ln), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert(ln == 3 && strcmp(list[0], "k0") == 0 &&
              strcmp(list[2], "k2") == 0);
    fccl_store_free_keys(list, ln);
    int del = -1;
    cr_assert_eq(fccl_store_delete(s, "k0", &del), FCCL_OK);
    cr_assert_eq(del, 1);
    cr_assert_eq(fccl_store_delete(s, "k0", &del), FCCL_OK);
    cr_assert_eq(del, 0);
    double rtt = 0;
    cr_assert_eq(fccl_store_ping(s, &rtt), FCCL_OK);
    char *text = NULL;
    cr_assert_eq(fccl_store_stats(s, &text, NULL), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert(strstr(text, "backend etcd") && strstr(text,
                                                     "backend_requests"),
              "%s", text);
    free(text);
    fccl_store_close(s);
}

struct later {
    const struct srv *at;
    const char *key;
    int ms, queue, barrier;
};

static void *do_later(void *arg)
{
    struct later *l = arg;
    fccl_store_t *s = client(l->at, FCCL_DIALECT_MODERN);
    th_sleep_ms(l->ms);
    if (l->barrier)
        cr_assert_eq(fccl_store_barrier(s, l->key, 2, 10000), FCCL_OK, "%s",
                     fccl_last_error());
    else if (l->queue)
        fccl_store_queue_push(s, l->key, "x", 1);
    else
        fccl_store_set(s, l->key, "x", 1);
    fccl_store_close(s);
    return NULL;
}

Test(frontend, waits_timeouts_and_barriers)
{
    fccl_store_t *s = client(&fe[0], FCCL_DIALECT_MODERN);
    void *v = NULL;
    double t0 = th_now();
    cr_assert_eq(fccl_store_get(s, "never", &v, NULL, 400), FCCL_ERR_TIMEOUT);
    cr_assert(th_now() - t0 < 3);
    cr_assert_eq(fccl_store_set(s, "after", "1", 1), FCCL_OK,
                 "usable after a cancelled wait: %s", fccl_last_error());
    pthread_t t;
    struct later l = {&fe[0], "late", 300, 0, 0};
    pthread_create(&t, NULL, do_later, &l);
    cr_assert_eq(fccl_store_get(s, "late", &v, NULL, 10000), FCCL_OK, "%s",
                 fccl_last_error());
    free(v);
    pthread_join(t, NULL);
    struct later lq = {&fe[0], "lq", 300, 1, 0};
    pthread_create(&t, NULL, do_later, &lq);
    size_t n = 0;
    cr_assert_eq(fccl_store_queue_pop(s, "lq", 1, &v, &n, 10000), FCCL_OK,
                 "a blocking pop woken by a push: %s", fccl_last_error());
    free(v);
    pthread_join(t, NULL);
    struct later lb = {&fe[0], "bar", 200, 0, 1};
    pthread_create(&t, NULL, do_later, &lb);
    cr_assert_eq(fccl_store_barrier(s, "bar", 2, 10000), FCCL_OK, "%s",
                 fccl_last_error());
    pthread_join(t, NULL);
    cr_assert_eq(fccl_store_barrier(s, "bar2", 2, 300), FCCL_ERR_TIMEOUT);
    cr_assert_eq(fccl_store_ping(s, NULL), FCCL_OK, "usable after");
    fccl_store_close(s);
}

Test(frontend, legacy_dialect_and_a_word_added_to)
{
    fccl_store_t *s = client(&fe[0], FCCL_DIALECT_LEGACY);
    cr_assert_eq(fccl_store_set(s, "a", "x", 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(s, "a", "x");
    int64_t v = 0;
    cr_assert_eq(fccl_store_add(s, "n", 3, &v), FCCL_OK);
    cr_assert_eq(v, 3);
    cr_assert_eq(present(s, "a"), 1);
    int64_t n = 0;
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 2);
    fccl_store_close(s);
    s = client(&fe[0], FCCL_DIALECT_MODERN);
    int rc = fccl_store_add(s, "a", 1, &v);
    cr_assert_eq(rc, FCCL_ERR_CLOSED, "ADD on 'x' closes, as PyTorch: %d",
                 rc);
    fccl_store_close(s);
    cr_assert(srv_log_wait(&fe[0], "not a decimal integer", TH_IO_MS));
}

Test(frontend, one_key_space_with_the_etcd_client_and_etcdctl)
{
    fccl_store_t *t = client(&fe[0], FCCL_DIALECT_MODERN), *e = NULL;
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = backend;
    o.timeout_ms = 5000;
    cr_assert_eq(fccl_store_connect(&o, &e), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(t, "via-tcp", "1", 1), FCCL_OK);
    srv_expect_cstr(e, "via-tcp", "1");
    cr_assert_eq(fccl_store_set(e, "via-etcd", "2", 1), FCCL_OK);
    srv_expect_cstr(t, "via-etcd", "2");
    int64_t v = 0;
    cr_assert_eq(fccl_store_add(t, "cnt", 2, NULL), FCCL_OK);
    cr_assert_eq(fccl_store_add(e, "cnt", 3, &v), FCCL_OK);
    cr_assert_eq(v, 5, "counters are one decimal text");
    char *out = NULL;
    etcd_cluster_ctl(&cl, "get --print-value-only /fe/via-tcp", &out);
    cr_assert(out && strstr(out, "1"), "%s", out);
    free(out);
    fccl_store_close(e);
    fccl_store_close(t);
}

Test(frontend, two_front_ends_serve_one_store)
{
    start_fe(&fe[1]);
    fccl_store_t *a = client(&fe[0], FCCL_DIALECT_MODERN);
    fccl_store_t *b = client(&fe[1], FCCL_DIALECT_MODERN);
    cr_assert_eq(fccl_store_set(a, "k", "v", 1), FCCL_OK);
    srv_expect_cstr(b, "k", "v");
    pthread_t t;
    struct later l = {&fe[0], "from-a", 300, 0, 0};
    pthread_create(&t, NULL, do_later, &l);
    const char *key = "from-a";
    cr_assert_eq(fccl_store_wait(b, &key, 1, 10000), FCCL_OK,
                 "a WAIT on B released by a SET on A: %s", fccl_last_error());
    pthread_join(t, NULL);
    for (int i = 0; i < 10; i++) {
        cr_assert_eq(fccl_store_add(a, "both", 1, NULL), FCCL_OK);
        cr_assert_eq(fccl_store_add(b, "both", 1, NULL), FCCL_OK);
    }
    srv_expect_cstr(a, "both", "20");
    fccl_store_close(a);
    fccl_store_close(b);
}

static int have_torch(void)
{
    char *out = NULL;
    int rc = th_sh(PYTHON " -c 'import torch' 2>&1", 60, &out);
    free(out);
    return rc == 0;
}

Test(frontend, pytorch_client_through_a_front_end, .timeout = 150)
{
    if (!have_torch())
        cr_skip("/usr/bin/python3 cannot import torch");
    fccl_store_t *s = client(&fe[0], FCCL_DIALECT_MODERN);
    cr_assert_eq(fccl_store_set(s, "from_c", "C\0side", 6), FCCL_OK);
    char cmd[800], *out = NULL;
    snprintf(cmd, sizeof(cmd), PYTHON " %s/../../tests/py/pt_client.py %s "
             "ops 2>&1", th_testbin_dir(), fe[0].addr);
    int rc = th_sh(cmd, 120, &out);
    cr_assert(rc == 0 && strstr(out, "OK"), "pt_client: %d: %s", rc, out);
    free(out);
    srv_expect_cstr(s, "a", "alpha");
    fccl_store_close(s);
}

Test(frontend, a_job_goes_on_when_its_front_end_is_killed, .timeout = 150)
{
    start_fe(&fe[1]);
    char list[600], prog[512], stop[200], line[512];
    snprintf(list, sizeof(list), "%s,%s", fe[0].addr, fe[1].addr);
    snprintf(prog, sizeof(prog), "%s/boot_check", th_testbin_dir());
    snprintf(stop, sizeof(stop), "%s/stop", cl.dir);
    setenv("FCCL_TIMEOUT", "30", 1);
    const char *argv[] = {"fccl-run", "-n", "4", "--store", list, prog,
                          "churn", stop, NULL};
    struct srv run = {0};
    int outfd;
    srv_spawn(&run, argv, &outfd);
    unsetenv("FCCL_TIMEOUT");
    int churning = 0;
    while (!churning && srv_read_line(outfd, line, sizeof(line), 60000) >= 0)
        churning = strstr(line, "R0 churning") != NULL;
    cr_assert(churning, "the job never started churning");
    th_sleep_ms(300);
    srv_kill_hard(&fe[0]); /* the front-end every rank is on */
    th_sleep_ms(1500);     /* rounds through the other one */
    FILE *f = fopen(stop, "w");
    cr_assert_not_null(f);
    fclose(f);
    int st = srv_wait(&run, 100000);
    char rest[8192] = "";
    ssize_t k;
    size_t used = 0;
    while (used + 1 < sizeof(rest) &&
           (k = read(outfd, rest + used, sizeof(rest) - 1 - used)) > 0)
        used += (size_t)k;
    rest[used] = '\0';
    close(outfd);
    char *log = srv_log(&run);
    cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "job status %d: %s\n%s", st, rest, log);
    cr_assert_eq(th_count(rest, "bad 0"), 4, "%s", rest);
    free(log);
    srv_cleanup(&run);
}

Test(frontend, a_front_end_with_a_wrong_etcd_password_does_not_start)
{
    cr_assert_eq(etcd_cluster_ctl(&cl, "user add root:rootpw >/dev/null",
                                  NULL), 0);
    cr_assert_eq(etcd_cluster_ctl(&cl, "auth enable >/dev/null", NULL), 0);
    char bad[200], good[200], *out = NULL;
    snprintf(bad, sizeof(bad), "%s/bad.pw", cl.dir);
    snprintf(good, sizeof(good), "%s/good.pw", cl.dir);
    FILE *f = fopen(bad, "w");
    fputs("wrong\n", f);
    fclose(f);
    f = fopen(good, "w");
    fputs("rootpw\n", f);
    fclose(f);
    chmod(bad, 0600);
    chmod(good, 0600);
    const char *argv[] = {"tcpstore-server", "--host", "127.0.0.1", "--port",
                          "0", "--backend", backend, "--backend-user",
                          "root", "--backend-password-file", bad, NULL};
    int rc = srv_run(argv, 20000, &out);
    cr_assert_eq(rc, 1, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "authentication failed"), "%s", out);
    free(out);
    struct srv ok = {0};
    srv_start_local(&ok, (const char *const[]){"--backend", backend,
                                              "--backend-user", "root",
                                              "--backend-password-file",
                                              good, NULL});
    fccl_store_t *s = client(&ok, FCCL_DIALECT_MODERN);
    cr_assert_eq(fccl_store_set(s, "k", "v", 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(s, "k", "v");
    fccl_store_close(s);
    srv_finish(&ok);
}
