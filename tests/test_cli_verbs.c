/*
 * The `tcpstore` verbs for queues and multi-get (push, pop, qlen, mget),
 * the -0/--null separator, and `--version` of every program, against the
 * real tcpstore-server on a free port: outputs byte for byte, every exit
 * code (wrong argument counts 2, an empty queue or a missing key timing
 * out 3, no server 4), the legacy dialect refusing the queue verbs.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fccl/core.h"
#include "lib/expect.h"
#include "lib/proc.h"
#include "lib/srv.h"

static struct srv srv;

static void start_server(void)
{
    srv_start_local(&srv, NULL);
}

static void stop_server(void) { srv_stop(&srv); }

TestSuite(verbs, .init = start_server, .fini = stop_server, .timeout = 60);

#define MAX_ARGS 16

/* Run argv (program name first, looked up in FCCL_BIN) with stdin `in`
 * and no TCPSTORE_* / MASTER_* variables. */
static struct th_result run_argv(const char *prog, const void *in,
                                 size_t inlen, const char *const *args)
{
    char bin[512];
    char *argv[MAX_ARGS + 2];
    int n = 0;
    argv[n++] = (char *)th_bin(prog, bin, sizeof(bin));
    for (; args && *args && n < MAX_ARGS; args++)
        argv[n++] = (char *)*args;
    argv[n] = NULL;
    static const char *const env[] = {
        "-TCPSTORE_ADDR", "-TCPSTORE_TIMEOUT", "-TCPSTORE_DIALECT",
        "-MASTER_ADDR",   "-MASTER_PORT",      "-FCCL_TIMEOUT", NULL};
    struct th_result r;
    struct th_cmd tc = {.argv = (const char *const *)argv,
                         .env = env, .in = in, .inlen = inlen,
                         .timeout_s = 30};
    cr_assert_eq(th_run(&tc, &r), 0, "cannot run %s",
                 argv[0]);
    return r;
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
/* tcpstore --addr <server> ARGS */
#define TS(...)                                                                \
    run_argv("tcpstore", NULL, 0, ARGS("--addr", srv.addr, __VA_ARGS__))
#define TS_IN(in, len, ...)                                                    \
    run_argv("tcpstore", in, len, ARGS("--addr", srv.addr, __VA_ARGS__))

static void expect(struct th_result r, int status, const char *out)
{
    th_expect_out(r, status, out, out ? strlen(out) : 0);
}

Test(verbs, push_pop_in_order_and_qlen)
{
    expect(TS("qlen", "q"), 0, "0\n"); /* no such queue: empty */
    expect(TS("push", "q", "first"), 0, "");
    expect(TS("push", "q", ""), 0, "");
    expect(TS("push", "q", "third item"), 0, "");
    expect(TS("qlen", "q"), 0, "3\n");
    expect(TS("pop", "q"), 0, "first");
    expect(TS("qlen", "q"), 0, "2\n");
    expect(TS("pop", "q"), 0, "");
    expect(TS("pop", "q"), 0, "third item");
    expect(TS("qlen", "q"), 0, "0\n");
}

Test(verbs, push_reads_stdin_and_pop_writes_raw_bytes)
{
    const char bin[] = "a\0b\n\xff\x00z";
    size_t blen = sizeof(bin);
    expect(TS_IN(bin, blen, "push", "bq", "-"), 0, "");
    expect(TS_IN(NULL, 0, "push", "bq", "-"), 0, ""); /* empty stdin */
    th_expect_out(TS("pop", "bq"), 0, bin, blen);
    expect(TS("pop", "bq"), 0, "");
    /* "-" after the key is the value "from stdin", a key "-" is a key. */
    expect(TS("push", "-", "dash"), 0, "");
    expect(TS("pop", "-"), 0, "dash");
}

Test(verbs, pop_on_empty_queue_times_out_with_3)
{
    double t0 = th_now();
    struct th_result r = run_argv(
        "tcpstore", NULL, 0,
        ARGS("--addr", srv.addr, "--timeout", "0.5", "pop", "empty"));
    double took = th_now() - t0;
    th_expect_err(r, 3, "timed out");
    cr_assert(took >= 0.45 && took < 10, "pop took %.2f s for 0.5 s", took);
    /* The queue is still usable after the cancelled wait. */
    expect(TS("push", "empty", "now"), 0, "");
    expect(TS("pop", "empty"), 0, "now");
}

/* pop waits on the server for an item pushed later. */
Test(verbs, pop_waits_for_a_later_push)
{
    char bin[512], cmd[4096];
    th_bin("tcpstore", bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd),
             "(sleep 0.4; %s --addr %s push late hello) & "
             "%s --addr %s --timeout 20 pop late; rc=$?; wait; exit $rc",
             bin, srv.addr, bin, srv.addr);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct th_result r;
    double t0 = th_now();
    struct th_cmd tc = {.argv = (const char *const *)argv,
                         .env = NULL, .in = NULL, .inlen = 0,
                         .timeout_s = 30};
    cr_assert_eq(th_run(&tc, &r), 0);
    double took = th_now() - t0;
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "hello");
    cr_assert(took >= 0.35 && took < 15, "took %.2f s", took);
    th_result_free(&r);
}

Test(verbs, mget_prints_values_in_order)
{
    expect(TS("set", "m1", "one"), 0, "");
    expect(TS("set", "m2", ""), 0, "");
    expect(TS("set", "m3", "three"), 0, "");
    expect(TS("mget", "m3", "m1", "m2", "m1"), 0, "three\none\n\none\n");
    expect(TS("mget", "m1"), 0, "one\n");
    /* -0 / --null: each value ended by a NUL byte. */
    th_expect_out(run_argv("tcpstore", NULL, 0,
                           ARGS("--addr", srv.addr, "-0", "mget", "m1", "m2",
                                "m3")),
                  0, "one\0\0three\0", 11);
    th_expect_out(run_argv("tcpstore", NULL, 0,
                           ARGS("--null", "--addr", srv.addr, "mget", "m3")),
                  0, "three\0", 6);
    /* A value with a newline is printed as it is (the separator is the
     * caller's choice; NUL bytes need get). */
    expect(TS("set", "nl", "a\nb"), 0, "");
    th_expect_out(run_argv("tcpstore", NULL, 0,
                           ARGS("--addr", srv.addr, "-0", "mget", "nl", "m1")),
                  0, "a\nb\0one\0", 8);
}

Test(verbs, mget_of_missing_key_times_out_with_3)
{
    expect(TS("set", "here", "1"), 0, "");
    double t0 = th_now();
    struct th_result r = run_argv(
        "tcpstore", NULL, 0,
        ARGS("--addr", srv.addr, "--timeout", "0.5", "mget", "here",
             "absent"));
    double took = th_now() - t0;
    /* Nothing printed: not the values that were there. */
    th_expect_err(r, 3, "absent");
    cr_assert(took >= 0.45 && took < 10, "mget took %.2f s", took);
}

Test(verbs, mget_waits_for_a_later_set)
{
    char bin[512], cmd[4096];
    th_bin("tcpstore", bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd),
             "%s --addr %s set early e && "
             "(sleep 0.4; %s --addr %s set later l) & "
             "%s --addr %s --timeout 20 mget early later; rc=$?; wait; "
             "exit $rc",
             bin, srv.addr, bin, srv.addr, bin, srv.addr);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct th_result r;
    struct th_cmd tc = {.argv = (const char *const *)argv,
                         .env = NULL, .in = NULL, .inlen = 0,
                         .timeout_s = 30};
    cr_assert_eq(th_run(&tc, &r), 0);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "e\nl\n");
    th_result_free(&r);
}

Test(verbs, keys_with_null_separator)
{
    expect(TS("set", "k/a", "1"), 0, "");
    expect(TS("set", "k/b", "2"), 0, "");
    struct th_result r = run_argv(
        "tcpstore", NULL, 0, ARGS("--addr", srv.addr, "-0", "keys", "k/"));
    cr_assert_eq(r.status, 0, "%s", r.err);
    /* Order is the server's: check both items and the two NULs. */
    cr_assert_eq(r.outlen, 8, "got %zu bytes", r.outlen);
    cr_assert(r.out[3] == '\0' && r.out[7] == '\0');
    cr_assert((!memcmp(r.out, "k/a\0k/b\0", 8)) ||
              (!memcmp(r.out, "k/b\0k/a\0", 8)));
    th_result_free(&r);
}

Test(verbs, wrong_argument_counts_exit_2)
{
    th_expect_err(TS("push", "q"), 2, "push KEY VALUE");
    th_expect_err(TS("push", "q", "a", "b"), 2, "push KEY VALUE");
    th_expect_err(TS("push"), 2, "push KEY VALUE");
    th_expect_err(TS("pop"), 2, "pop KEY");
    th_expect_err(TS("pop", "a", "b"), 2, "pop KEY");
    th_expect_err(TS("qlen"), 2, "qlen KEY");
    th_expect_err(TS("qlen", "a", "b"), 2, "qlen KEY");
    th_expect_err(TS("mget"), 2, "mget KEY...");
    /* -0 after the verb is an argument, not the option. */
    th_expect_err(TS("qlen", "-0", "x"), 2, "qlen KEY");
}

Test(verbs, legacy_dialect_lacks_queues_but_has_mget)
{
    const char *verbs[][3] = {{"push", "q", "v"}, {"pop", "q", NULL},
                              {"qlen", "q", NULL}};
    for (size_t i = 0; i < 3; i++) {
        /* Refused before connecting: no address needed. */
        struct th_result r = run_argv(
            "tcpstore", NULL, 0,
            ARGS("--dialect", "legacy", verbs[i][0], verbs[i][1],
                 verbs[i][2]));
        th_expect_err(r, 2, "legacy dialect");
    }
    /* mget is WAIT + GETs there (our server speaks both dialects). */
    expect(TS("set", "lg", "old"), 0, "");
    expect(run_argv("tcpstore", NULL, 0,
                    ARGS("--addr", srv.addr, "--dialect", "legacy", "mget",
                         "lg", "lg")),
           0, "old\nold\n");
}

Test(verbs, no_server_exits_4)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", th_free_port());
    const char *verbs[][3] = {{"push", "q", "v"}, {"pop", "q", NULL},
                              {"qlen", "q", NULL}, {"mget", "a", "b"}};
    for (size_t i = 0; i < 4; i++) {
        struct th_result r = run_argv(
            "tcpstore", NULL, 0,
            ARGS("--addr", addr, "--timeout", "0.3", verbs[i][0],
                 verbs[i][1], verbs[i][2]));
        cr_assert_eq(r.status, 4, "%s: exit %d: %s", verbs[i][0], r.status,
                     r.err);
        th_result_free(&r);
    }
}

/* Every program: `NAME --version` prints "NAME (fccl) VERSION", exit 0. */
Test(version, every_program, .timeout = 60)
{
    static const char *const progs[] = {
        "tcpstore",   "tcpstore-server", "fccl-run",  "fccl-bench",
        "tcpstore-bench", "fccl-moe-bench", "fccl-demo"};
    for (size_t i = 0; i < sizeof(progs) / sizeof(progs[0]); i++) {
        char want[128];
        snprintf(want, sizeof(want), "%s (fccl) %s\n", progs[i],
                 fccl_version());
        struct th_result r = run_argv(progs[i], NULL, 0, ARGS("--version"));
        cr_expect_eq(r.status, 0, "%s --version: exit %d: %s", progs[i],
                     r.status, r.err);
        cr_expect_str_eq(r.out, want, "%s --version", progs[i]);
        th_result_free(&r);
    }
}

/* fccl-demo --help prints its usage without joining a job (no MASTER_ADDR
 * is set, so a demo that ran would fail); a stray argument is exit 2. */
Test(version, demo_help_does_not_run_the_demo, .timeout = 60)
{
    struct th_result r = run_argv("fccl-demo", NULL, 0, ARGS("--help"));
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.out, "usage: fccl-run -n N fccl-demo"), "%s", r.out);
    cr_assert(!strstr(r.out, "all results correct"));
    th_result_free(&r);
    r = run_argv("fccl-demo", NULL, 0, ARGS("-h"));
    cr_assert_eq(r.status, 0);
    th_result_free(&r);
    r = run_argv("fccl-demo", NULL, 0, ARGS("--bogus"));
    cr_assert_eq(r.status, 2, "exit %d", r.status);
    cr_assert(strstr(r.err, "--bogus"), "%s", r.err);
    th_result_free(&r);
}
