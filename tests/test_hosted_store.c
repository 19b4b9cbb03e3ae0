/*
 * Hosted stores take tcpstore-server's security and durability settings:
 * fccl-run's own store with --store-tls-cert/--store-tls-key/
 * --store-token-file (and the same from FCCL_STORE_SERVER_TLS_* and
 * FCCL_STORE_TOKEN_FILE) reached by its own ranks (fccl-demo's checked
 * collectives), a journal (--store-journal) that holds the job's keys,
 * rank 0's store under mpirun's variables; a hosted store beyond loopback
 * without TLS or token warns as tcpstore-server does; and the failures:
 * client TLS
 * settings the hosted store cannot meet, a certificate that does not
 * load, a token file others can read, a port in use, all named before any
 * rank waits.  Certificates are made with the openssl program.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/proc.h"
#include "lib/srv.h"

static char dir[64];
static char cert[128], key[128], tok[128];

static void write_file(const char *p, const char *text, int mode)
{
    cr_assert_eq(th_write_file(p, text, mode), 0, "%s: %s", p,
                 strerror(errno));
}

static void setup(void)
{
    srv_need_openssl();
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-hosted"), 0);
    srv_make_cert_in(dir, "srv", cert, key, sizeof(cert), "store");
    snprintf(tok, sizeof(tok), "%s/token", dir);
    write_file(tok, "hosted-store-token-0123456789\n", 0600);
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(hosted, .init = setup, .fini = teardown, .timeout = 180);

/* argv under env (NULL-terminated lists), stdout and stderr together. */
static struct th_result run(const char *const *argv, const char *const *env,
                            double timeout_s)
{
    struct th_result r;
    struct th_cmd c = {.argv = argv, .env = env, .timeout_s = timeout_s,
                       .merge = 1};
    cr_assert_eq(th_run(&c, &r), 0, "cannot run %s", argv[0]);
    return r;
}

/* The variables every job here runs with: shm between the ranks, a short
 * timeout, info logs (so the store says what it enforces), and none of
 * the store variables of the test's own environment. */
#define BASE_ENV "FCCL_PROVIDER=shm", "FCCL_TIMEOUT=30", \
    "FCCL_LOG_LEVEL=info", "-FCCL_STORE_TLS_CA", "-FCCL_STORE_TLS_CERT", \
    "-FCCL_STORE_TLS_KEY", "-FCCL_STORE_TOKEN_FILE", \
    "-FCCL_STORE_SERVER_TLS_CERT", "-FCCL_STORE_SERVER_TLS_KEY", \
    "-FCCL_STORE_SERVER_TLS_CA", "-FCCL_STORE_SERVER_JOURNAL"

static void expect_secure_job(struct th_result *r)
{
    cr_assert_eq(r->status, 0, "exit %d:\n%s", r->status, r->out);
    cr_assert(strstr(r->out, "TLS enabled (server only, plaintext refused)"),
              "the hosted store did not serve TLS only:\n%s", r->out);
    cr_assert(strstr(r->out, "token authentication enabled (one token, "
                             "required)"), "no required token:\n%s", r->out);
    cr_assert_null(strstr(r->out, "reachable from other hosts"), "%s",
                   r->out);
}

Test(hosted, fccl_run_hosts_a_tls_and_token_store_its_ranks_reach)
{
    char run_bin[256], demo[256];
    th_bin("fccl-run", run_bin, sizeof(run_bin));
    th_bin("fccl-demo", demo, sizeof(demo));
    struct th_result r = run(
        (const char *[]){run_bin, "-n", "2", "--store-tls-cert", cert,
                         "--store-tls-key", key, "--store-token-file", tok,
                         demo, NULL},
        (const char *[]){BASE_ENV, NULL}, 120);
    expect_secure_job(&r);
    th_result_free(&r);
}

Test(hosted, the_same_from_the_environment)
{
    char run_bin[256], demo[256], e1[200], e2[200], e3[200], e4[200];
    th_bin("fccl-run", run_bin, sizeof(run_bin));
    th_bin("fccl-demo", demo, sizeof(demo));
    snprintf(e1, sizeof(e1), "FCCL_STORE_SERVER_TLS_CERT=%s", cert);
    snprintf(e2, sizeof(e2), "FCCL_STORE_SERVER_TLS_KEY=%s", key);
    snprintf(e3, sizeof(e3), "FCCL_STORE_TOKEN_FILE=%s", tok);
    snprintf(e4, sizeof(e4), "FCCL_STORE_TLS_CA=%s", cert);
    struct th_result r = run((const char *[]){run_bin, "-n", "2", demo, NULL},
                             (const char *[]){BASE_ENV, e1, e2, e3, e4, NULL},
                             120);
    expect_secure_job(&r);
    th_result_free(&r);
    /* The case: a token alone (the ranks failed init before). */
    r = run((const char *[]){run_bin, "-n", "2", demo, NULL},
            (const char *[]){BASE_ENV, e3, NULL}, 120);
    cr_assert_eq(r.status, 0, "exit %d:\n%s", r.status, r.out);
    cr_assert(strstr(r.out, "token authentication enabled (one token, "
                            "required)"), "%s", r.out);
    th_result_free(&r);
}

Test(hosted, the_journal_keeps_the_jobs_keys)
{
    char run_bin[256], jrn[128], script[512];
    th_bin("fccl-run", run_bin, sizeof(run_bin));
    snprintf(jrn, sizeof(jrn), "%s/job.journal", dir);
    snprintf(script, sizeof(script),
             "%s/tcpstore --addr \"$TCPSTORE_ADDR\" --token-file "
             "%s --tls-ca %s set rank$RANK here", th_bin_dir(), tok, cert);
    struct th_result r = run(
        (const char *[]){run_bin, "-n", "2", "--store-journal", jrn,
                         "--store-token-file", tok, "--store-tls-cert", cert,
                         "--store-tls-key", key, "/bin/sh", "-c", script,
                         NULL},
        (const char *[]){BASE_ENV, NULL}, 60);
    cr_assert_eq(r.status, 0, "exit %d:\n%s", r.status, r.out);
    th_result_free(&r);
    /* The journal replays into a tcpstore-server: both keys are there. */
    struct srv s = {0};
    srv_start_local(&s, (const char *[]){"--journal", jrn, NULL});
    fccl_store_t *st = srv_store_open(s.port, 0);
    srv_expect_cstr(st, "rank0", "here");
    srv_expect_cstr(st, "rank1", "here");
    fccl_store_close(st);
    srv_finish(&s);
}

Test(hosted, rank0_hosts_under_mpirun_with_the_same_settings)
{
    char demo[256], port[32], e[6][200];
    th_bin("fccl-demo", demo, sizeof(demo));
    snprintf(port, sizeof(port), "MASTER_PORT=%d", th_free_port());
    snprintf(e[0], sizeof(e[0]), "FCCL_STORE_SERVER_TLS_CERT=%s", cert);
    snprintf(e[1], sizeof(e[1]), "FCCL_STORE_SERVER_TLS_KEY=%s", key);
    snprintf(e[2], sizeof(e[2]), "FCCL_STORE_TOKEN_FILE=%s", tok);
    snprintf(e[3], sizeof(e[3]), "FCCL_STORE_TLS_CA=%s", cert);
    char script[2048];
    /* Two processes with Open MPI's variables, as mpirun starts them. */
    snprintf(script, sizeof(script),
             "export OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=2; "
             "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_LOCAL_RANK=0 %s > "
             "%s/out0 2>&1 & a=$!; "
             "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_LOCAL_RANK=1 %s > "
             "%s/out1 2>&1 & b=$!; "
             "wait $a; ra=$?; wait $b; rb=$?; cat %s/out0 %s/out1; "
             "echo \"rc $ra $rb\"", demo, dir, demo, dir, dir, dir);
    struct th_result r = run(
        (const char *[]){"/bin/sh", "-c", script, NULL},
        (const char *[]){BASE_ENV, "MASTER_ADDR=127.0.0.1", port, e[0], e[1],
                         e[2], e[3], "-RANK", "-WORLD_SIZE", "-LOCAL_RANK",
                         "-LOCAL_WORLD_SIZE", NULL},
        120);
    cr_assert(strstr(r.out, "rc 0 0"), "%s", r.out);
    cr_assert(strstr(r.out, "TLS enabled (server only, plaintext refused)"),
              "%s", r.out);
    cr_assert(strstr(r.out, "rank 0 hosts the store"), "%s", r.out);
    th_result_free(&r);

    /* A certificate that does not load fails rank 0's init at once,
     * naming it, instead of a wait for a store that never comes. */
    char bad[128];
    snprintf(bad, sizeof(bad), "%s/garbage.crt", dir);
    write_file(bad, "no certificate here\n", 0644);
    snprintf(e[0], sizeof(e[0]), "FCCL_STORE_SERVER_TLS_CERT=%s", bad);
    double t0 = th_now();
    r = run((const char *[]){demo, NULL},
            (const char *[]){BASE_ENV, "MASTER_ADDR=127.0.0.1", port, e[0],
                             e[1], e[2], e[3], "OMPI_COMM_WORLD_RANK=0",
                             "OMPI_COMM_WORLD_SIZE=2",
                             "OMPI_COMM_WORLD_LOCAL_RANK=0",
                             "OMPI_COMM_WORLD_LOCAL_SIZE=2", "-RANK",
                             "-WORLD_SIZE", NULL},
            60);
    cr_assert_neq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, "garbage.crt"), "%s", r.out);
    cr_assert(strstr(r.out, "cannot host the store"), "%s", r.out);
    cr_assert_lt(th_now() - t0, 10, "rank 0 waited instead of failing");
    th_result_free(&r);
}

/* fccl-run with argv and env must fail (exit `want`) naming `needle`,
 * before any rank runs. */
static void refused(const char *const *args, const char *const *env,
                    int want, const char *needle)
{
    char run_bin[256], demo[256];
    th_bin("fccl-run", run_bin, sizeof(run_bin));
    th_bin("fccl-demo", demo, sizeof(demo));
    const char *argv[24] = {run_bin, "-n", "2"};
    int n = 3;
    for (; args && *args; args++)
        argv[n++] = *args;
    argv[n++] = demo;
    argv[n] = NULL;
    const char *envv[24] = {BASE_ENV};
    int m = 11;
    for (; env && *env; env++)
        envv[m++] = *env;
    envv[m] = NULL;
    double t0 = th_now();
    struct th_result r = run(argv, envv, 60);
    cr_assert_eq(r.status, want, "exit %d, want %d:\n%s", r.status, want,
                 r.out);
    cr_assert(strstr(r.out, needle), "'%s' not in:\n%s", needle, r.out);
    cr_assert_null(strstr(r.out, "[0] "), "a rank ran:\n%s", r.out);
    cr_assert_lt(th_now() - t0, 10);
    th_result_free(&r);
}

Test(hosted, failures_are_named_up_front)
{
    char e[200], bad[128], open_tok[128];
    /* Ranks told to use TLS, a store without a certificate. */
    snprintf(e, sizeof(e), "FCCL_STORE_TLS_CA=%s", cert);
    refused(NULL, (const char *[]){e, NULL}, 1, "FCCL_STORE_SERVER_TLS_CERT");
    /* Mutual TLS without client certificates for the ranks. */
    refused((const char *[]){"--store-tls-cert", cert, "--store-tls-key", key,
                             "--store-tls-ca", cert, NULL},
            NULL, 1, "FCCL_STORE_TLS_CERT");
    /* A certificate that does not load. */
    snprintf(bad, sizeof(bad), "%s/garbage.crt", dir);
    write_file(bad, "no certificate here\n", 0644);
    refused((const char *[]){"--store-tls-cert", bad, "--store-tls-key", key,
                             NULL},
            NULL, 1, "garbage.crt");
    /* A key without its certificate. */
    refused((const char *[]){"--store-tls-key", key, NULL}, NULL, 1,
            "tls-cert and tls-key go together");
    /* A token file others can read. */
    snprintf(open_tok, sizeof(open_tok), "%s/open-token", dir);
    write_file(open_tok, "hosted-store-token-0123456789\n", 0644);
    refused((const char *[]){"--store-token-file", open_tok, NULL}, NULL, 1,
            "chmod");
    /* --store-* options for a store fccl-run does not host. */
    refused((const char *[]){"--store", "127.0.0.1:1", "--store-token-file",
                             tok, NULL},
            NULL, 2, "--host-store");
    /* A port in use. */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fd, 1), 0);
    socklen_t sl = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &sl);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", ntohs(a.sin_port));
    refused((const char *[]){"--store", addr, "--host-store", NULL}, NULL, 1,
            "in use");
    close(fd);
}

Test(hosted, beyond_loopback_in_plaintext_it_warns_like_the_server)
{
    char run_bin[256], addr[64];
    th_bin("fccl-run", run_bin, sizeof(run_bin));
    snprintf(addr, sizeof(addr), "0.0.0.0:%d", th_free_port());
    const char *warning = "reachable from other hosts";
    struct th_result r = run(
        (const char *[]){run_bin, "-n", "1", "--store", addr, "--host-store",
                         "/bin/true", NULL},
        (const char *[]){BASE_ENV, NULL}, 60);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert(strstr(r.out, warning), "no warning:\n%s", r.out);
    th_result_free(&r);
    /* A required token ends the warning. */
    snprintf(addr, sizeof(addr), "0.0.0.0:%d", th_free_port());
    r = run((const char *[]){run_bin, "-n", "1", "--store", addr,
                             "--host-store", "--store-token-file", tok,
                             "/bin/true", NULL},
            (const char *[]){BASE_ENV, NULL}, 60);
    cr_assert_eq(r.status, 0, "%s", r.out);
    cr_assert_null(strstr(r.out, warning), "%s", r.out);
    th_result_free(&r);
}
