/*
 * The `tcpstore` program against the real tcpstore-server: every verb and
 * every exit code, binary values through stdin and stdout (NUL bytes,
 * empty values), `add KEY -7`, and where the address, timeout and dialect
 * come from (options over TCPSTORE_* over MASTER_ADDR/MASTER_PORT).
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/expect.h"
#include "lib/proc.h"
#include "lib/srv.h"

static struct srv srv;

static void start_server(void) { srv_start_local(&srv, NULL); }

static void stop_server(void)
{
    srv_finish(&srv);
}

TestSuite(cli, .init = start_server, .fini = stop_server, .timeout = 60);

#define MAX_ARGS 16
#define MAX_ENV 12

/* Run tcpstore with env (NULL-terminated list of NAME=VALUE) on top of a
 * clean environment (no TCPSTORE_* or MASTER_*), args NULL-terminated. */
static struct th_result run_env(const void *in, size_t inlen,
                                const char *const *env, ...)
{
    char bin[512];
    const char *argv[MAX_ARGS + 2];
    int n = 0;
    argv[n++] = th_bin("tcpstore", bin, sizeof(bin));
    va_list ap;
    va_start(ap, env);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < MAX_ARGS)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    const char *full[MAX_ENV + 8] = {
        "-TCPSTORE_ADDR", "-TCPSTORE_TIMEOUT", "-TCPSTORE_DIALECT",
        "-MASTER_ADDR",   "-MASTER_PORT",      "-FCCL_TIMEOUT"};
    int m = 6;
    for (; env && *env && m < MAX_ENV + 6; env++)
        full[m++] = *env;
    full[m] = NULL;
    struct th_cmd c = {.argv = argv,
                       .env = full,
                       .in = in,
                       .inlen = inlen,
                       .timeout_s = 30};
    struct th_result r;
    cr_assert_eq(th_run(&c, &r), 0, "cannot run %s", argv[0]);
    return r;
}

/* tcpstore --addr <server> ARGS */
#define TS(...) run_env(NULL, 0, NULL, "--addr", srv.addr, __VA_ARGS__, NULL)
#define TS_IN(in, len, ...)                                                    \
    run_env(in, len, NULL, "--addr", srv.addr, __VA_ARGS__, NULL)

static void expect(struct th_result r, int status, const char *out)
{
    th_expect_out(r, status, out, out ? strlen(out) : 0);
}

Test(cli, set_get_prints_raw_value)
{
    expect(TS("set", "a", "hello"), 0, "");
    expect(TS("get", "a"), 0, "hello");
    expect(TS("set", "a", ""), 0, "");
    expect(TS("get", "a"), 0, "");
    expect(TS("set", "-k", "dash"), 0, ""); /* after the verb: a key */
    expect(TS("get", "-k"), 0, "dash");
}

Test(cli, binary_values_through_stdin_and_stdout)
{
    const char bin[] = "a\0b\n\xff\x00z";
    size_t blen = sizeof(bin); /* includes the trailing NUL */
    expect(TS_IN(bin, blen, "set", "b", "-"), 0, "");
    struct th_result r = TS("get", "b");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_eq(r.outlen, blen);
    cr_assert(memcmp(r.out, bin, blen) == 0, "bytes changed on the way");
    th_result_free(&r);
    /* Empty stdin is an empty value. */
    expect(TS_IN(NULL, 0, "set", "e", "-"), 0, "");
    expect(TS("check", "e"), 0, "");
    expect(TS("get", "e"), 0, "");
    /* A value bigger than any pipe buffer. */
    size_t big = 1u << 20;
    char *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        b[i] = (char)(i * 7 + (i >> 9));
    expect(TS_IN(b, big, "set", "big", "-"), 0, "");
    r = TS("get", "big");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(r.outlen == big && memcmp(r.out, b, big) == 0);
    th_result_free(&r);
    free(b);
}

Test(cli, add_prints_new_value_and_takes_negative_numbers)
{
    expect(TS("add", "n", "5"), 0, "5\n");
    expect(TS("add", "n", "-7"), 0, "-2\n");
    expect(TS("get", "n"), 0, "-2");
    th_expect_err(TS("add", "n", "seven"), 2, "seven");
    th_expect_err(TS("add", "n", "1x"), 2, "1x");
    th_expect_err(TS("add", "n"), 2, "add KEY N");
    expect(TS("set", "text", "abc"), 0, "");
    /* The server closes a client that ADDs to text: a protocol failure. */
    struct th_result r = TS("add", "text", "1");
    cr_assert_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    th_result_free(&r);
}

Test(cli, cas_exit_codes)
{
    expect(TS("cas", "c", "", "first"), 0, ""); /* created */
    expect(TS("cas", "c", "first", "second"), 0, "");
    expect(TS("cas", "c", "wrong", "third"), 1, "");
    expect(TS("get", "c"), 0, "second");
    expect(TS("cas", "missing", "exp", "des"), 1, "");
    expect(TS("check", "missing"), 1, "");
    expect(TS("cas", "c", "second", "second"), 0, "");
}

Test(cli, check_wait_delete_num_keys)
{
    expect(TS("num-keys"), 0, "0\n");
    expect(TS("set", "x", "1"), 0, "");
    expect(TS("set", "y", "2"), 0, "");
    expect(TS("check", "x", "y"), 0, "");
    expect(TS("check", "x", "z"), 1, "");
    expect(TS("wait", "x", "y"), 0, "");
    expect(TS("num-keys"), 0, "2\n");
    expect(TS("delete", "x"), 0, "");
    expect(TS("delete", "x"), 1, "");
    expect(TS("num-keys"), 0, "1\n");
}

Test(cli, timeouts_exit_3_naming_key_and_address)
{
    double t0 = th_now();
    struct th_result r = run_env(NULL, 0, NULL, "--addr", srv.addr, "--timeout", "0.3",
                "wait", "nokey", NULL);
    double dt = th_now() - t0;
    cr_assert_eq(r.status, 3, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.err, "nokey") && strstr(r.err, srv.addr), "%s", r.err);
    th_result_free(&r);
    th_expect_err(run_env(NULL, 0, NULL, "--addr", srv.addr, "--timeout", "0.3",
                          "get", "nokey", NULL),
                  3, "nokey");
    cr_assert(dt < 20, "took %.1f s", dt);
    /* Options after the verb are arguments: these are three keys. */
    th_expect_err(run_env(NULL, 0, NULL, "--addr", srv.addr, "--timeout", "0.2",
                          "wait", "--timeout", "0.3", "nokey", NULL),
                  3, "'/--timeout'");
}

Test(cli, ping_append_keys)
{
    struct th_result r = TS("ping");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strncmp(r.out, "rtt ", 4) == 0, "%s", r.out);
    th_result_free(&r);
    expect(TS("append", "ap", "x"), 0, "");
    expect(TS("append", "ap", "yz"), 0, "");
    expect(TS_IN("\0!", 2, "append", "ap", "-"), 0, "");
    r = TS("get", "ap");
    cr_assert(r.outlen == 5 && memcmp(r.out, "xyz\0!", 5) == 0);
    th_result_free(&r);
    expect(TS("set", "job/b", "1"), 0, "");
    expect(TS("set", "job/a", "1"), 0, "");
    expect(TS("keys"), 0, "ap\njob/a\njob/b\n");
    expect(TS("keys", "job/"), 0, "job/a\njob/b\n");
    expect(TS("keys", "none"), 0, "");
    expect(run_env(NULL, 0, NULL, "--addr", srv.addr, "--raw-keys", "keys",
                   "/job/", NULL),
           0, "/job/a\n/job/b\n");
}

Test(cli, legacy_dialect_lacks_some_verbs)
{
    th_expect_err(TS("--dialect", "legacy", "ping"), 2, "legacy");
    const char *env[] = {"TCPSTORE_DIALECT=legacy", NULL};
    th_expect_err(run_env(NULL, 0, env, "--addr", srv.addr, "append", "k", "v",
                          NULL),
                  2, "legacy");
    th_expect_err(run_env(NULL, 0, env, "--addr", srv.addr, "keys", NULL), 2,
                  "legacy");
    /* The option beats the variable. */
    expect(run_env(NULL, 0, env, "--addr", srv.addr, "--dialect", "modern",
                   "append", "k", "v", NULL),
           0, "");
    /* The verbs legacy has work against our server in that dialect. */
    expect(run_env(NULL, 0, env, "--addr", srv.addr, "set", "L", "lv", NULL),
           0, "");
    expect(run_env(NULL, 0, env, "--addr", srv.addr, "get", "L", NULL), 0,
           "lv");
    expect(run_env(NULL, 0, env, "--addr", srv.addr, "add", "LN", "-3", NULL),
           0, "-3\n");
    expect(run_env(NULL, 0, env, "--addr", srv.addr, "num-keys", NULL), 0,
           "3\n");
}

Test(cli, usage_errors_exit_2)
{
    th_expect_err(TS("frobnicate"), 2, "frobnicate");
    th_expect_err(run_env(NULL, 0, NULL, "--addr", srv.addr, NULL), 2, "verb");
    th_expect_err(run_env(NULL, 0, NULL, "--bogus", "get", "k", NULL), 2,
                  "--bogus");
    th_expect_err(run_env(NULL, 0, NULL, "--timeout", "abc", "--addr", srv.addr,
                          "get", "k", NULL),
                  2, "abc");
    th_expect_err(TS("--timeout", "0", "get", "k"), 2, "'0'");
    th_expect_err(run_env(NULL, 0, NULL, "--dialect", "ancient", "--addr",
                          srv.addr, "get", "k", NULL),
                  2, "ancient");
    th_expect_err(TS("get"), 2, "get KEY");
    th_expect_err(TS("get", "a", "b"), 2, "get KEY");
    th_expect_err(TS("cas", "a", "b"), 2, "cas KEY EXPECTED NEW");
    th_expect_err(TS("num-keys", "x"), 2, "num-keys");
    th_expect_err(run_env(NULL, 0, NULL, "get", "k", NULL), 2, "no address");
    th_expect_err(run_env(NULL, 0, NULL, "--addr", "nocolon", "get", "k", NULL),
                  2, "nocolon");
    const char *env[] = {"TCPSTORE_TIMEOUT=soon", NULL};
    th_expect_err(run_env(NULL, 0, env, "--addr", srv.addr, "get", "k", NULL),
                  2, "soon");
}

Test(cli, help_lists_options_verbs_env_and_exit_codes)
{
    struct th_result r = run_env(NULL, 0, NULL, "--help", NULL);
    cr_assert_eq(r.status, 0);
    const char *need[] = {"--addr", "--timeout", "--dialect", "--raw-keys",
                          "set KEY VALUE", "get KEY", "add KEY N",
                          "cas KEY EXPECTED NEW", "check KEY", "wait KEY",
                          "delete KEY", "num-keys", "ping", "append KEY",
                          "keys [PREFIX]", "TCPSTORE_ADDR", "MASTER_ADDR",
                          "MASTER_PORT", "TCPSTORE_TIMEOUT",
                          "TCPSTORE_DIALECT", "Exit status", "3 timed out"};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        cr_assert(strstr(r.out, need[i]), "--help lacks '%s'", need[i]);
    th_result_free(&r);
}

Test(cli, cannot_connect_exits_4)
{
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", th_free_port());
    double t0 = th_now();
    th_expect_err(run_env(NULL, 0, NULL, "--addr", addr, "--timeout", "0.3",
                          "get", "k", NULL),
                  4, addr);
    cr_assert(th_now() - t0 < 10);
    th_expect_err(run_env(NULL, 0, NULL, "--addr", addr, "--timeout", "0.2",
                          "set", "k", "v", NULL),
                  4, "connect");
}

Test(cli, address_precedence)
{
    char bad[64], mport[16], host[300];
    snprintf(bad, sizeof(bad), "127.0.0.1:%d", th_free_port());
    snprintf(host, sizeof(host), "%.*s", (int)(strrchr(srv.addr, ':') - srv.addr),
             srv.addr);
    snprintf(mport, sizeof(mport), "%d", srv.port);
    expect(TS("set", "where", "here"), 0, "");

    /* --addr over TCPSTORE_ADDR */
    char e1[100];
    snprintf(e1, sizeof(e1), "TCPSTORE_ADDR=%s", bad);
    const char *env1[] = {e1, NULL};
    expect(run_env(NULL, 0, env1, "--addr", srv.addr, "get", "where", NULL),
           0, "here");
    th_expect_err(run_env(NULL, 0, env1, "--timeout", "0.2", "get", "where",
                          NULL),
                  4, bad);

    /* TCPSTORE_ADDR over MASTER_ADDR:MASTER_PORT */
    char e2[400], e3[100], e4[100];
    snprintf(e2, sizeof(e2), "TCPSTORE_ADDR=%s", srv.addr);
    snprintf(e3, sizeof(e3), "MASTER_ADDR=%s", "127.0.0.1");
    snprintf(e4, sizeof(e4), "MASTER_PORT=%d", atoi(strrchr(bad, ':') + 1));
    const char *env2[] = {e2, e3, e4, NULL};
    expect(run_env(NULL, 0, env2, "get", "where", NULL), 0, "here");

    /* MASTER_ADDR:MASTER_PORT alone */
    char e5[400], e6[100];
    snprintf(e5, sizeof(e5), "MASTER_ADDR=%s", host);
    snprintf(e6, sizeof(e6), "MASTER_PORT=%s", mport);
    const char *env3[] = {e5, e6, NULL};
    expect(run_env(NULL, 0, env3, "get", "where", NULL), 0, "here");
}

Test(cli, timeout_precedence)
{
    /* TCPSTORE_TIMEOUT applies ... */
    const char *env[] = {"TCPSTORE_TIMEOUT=0.2", NULL};
    double t0 = th_now();
    th_expect_err(run_env(NULL, 0, env, "--addr", srv.addr, "wait", "never",
                          NULL),
                  3, "never");
    double dt = th_now() - t0;
    cr_assert(dt >= 0.19 && dt < 5, "took %.2f s", dt);
    /* ... and --timeout beats it. */
    const char *env2[] = {"TCPSTORE_TIMEOUT=100", NULL};
    t0 = th_now();
    th_expect_err(run_env(NULL, 0, env2, "--addr", srv.addr, "--timeout", "0.3",
                          "wait", "never", NULL),
                  3, "never");
    dt = th_now() - t0;
    cr_assert(dt >= 0.29 && dt < 5, "took %.2f s", dt);
}

Test(cli, raw_keys_option)
{
    expect(run_env(NULL, 0, NULL, "--addr", srv.addr, "--raw-keys", "set",
                   "plain", "p", NULL),
           0, "");
    expect(TS("check", "plain"), 1, ""); /* that would be "/plain" */
    expect(run_env(NULL, 0, NULL, "--addr", srv.addr, "--raw-keys", "get",
                   "plain", NULL),
           0, "p");
    expect(TS("set", "x", "slashed"), 0, "");
    expect(run_env(NULL, 0, NULL, "--addr", srv.addr, "--raw-keys", "get",
                   "/x", NULL),
           0, "slashed");
}

/* Issue 9: a refused SET used to exit 0 with the key missing.  Now the
 * write is confirmed (SYNC) and a refusal exits 4 naming the cause. */
Test(cli, refused_set_exits_4_naming_the_cause)
{
    struct srv small;
    srv_start_local(&small, (const char *[]){"--max-total-bytes", "64", NULL});
    char big[200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    struct th_result r = run_env(NULL, 0, NULL, "--addr", small.addr, "set",
                                 "k", big, NULL);
    cr_assert_eq(r.status, 4, "exit %d; stderr: %s", r.status, r.err);
    cr_assert(strstr(r.err, "refused by the server") &&
                  strstr(r.err, "64-byte limit"),
              "stderr: %s", r.err);
    th_result_free(&r);
    r = run_env(NULL, 0, NULL, "--addr", small.addr, "check", "k", NULL);
    cr_assert_eq(r.status, 1, "the refused key exists: %s", r.err);
    th_result_free(&r);
    /* A write that fits still succeeds on the same server. */
    r = run_env(NULL, 0, NULL, "--addr", small.addr, "set", "k", "v", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    th_result_free(&r);
    srv_finish(&small);
}

Test(cli, stats_prints_name_value_lines)
{
    expect(TS("set", "st1", "abc"), 0, "");
    struct th_result r = TS("stats");
    cr_assert_eq(r.status, 0, "%s", r.err);
    static const char *const names[] = {
        "connections ", "keys ", "bytes_stored ", "bytes_held_requests ",
        "waiters ", "loop_turn_max_us ", "requests_SET ",
        "request_bytes_SET "};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        cr_assert(strstr(r.out, names[i]), "stats lack '%s':\n%s", names[i],
                  r.out);
    /* Every line is "name number". */
    char *save, *line = strtok_r(r.out, "\n", &save);
    for (; line; line = strtok_r(NULL, "\n", &save)) {
        char name[80];
        unsigned long long v;
        cr_assert_eq(sscanf(line, "%79s %llu", name, &v), 2, "line '%s'",
                     line);
    }
    th_result_free(&r);
    th_expect_err(run_env(NULL, 0, NULL, "--addr", srv.addr, "--dialect",
                          "legacy", "stats", NULL),
                  2, "stats");
}
