/*
 * fccl-run's torchrun/msrun options, with real processes on loopback:
 * --log-dir (each rank's bytes in its own files, the console still
 * prefixed), --max-restarts (a program failing twice then succeeding, one
 * always failing, one killed by a signal, ^C never restarted, two nodes
 * restarting together through the store and leaving no key, an fccl job
 * whose restart gets a fresh job id), --bind-to core (read back from
 * /proc/self/status in the ranks), a session per rank with a terminal's
 * ^C passed on, msrun's variables set for the ranks and
 * read by env:// in a 2-rank job started without fccl-run.
 */
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/proc.h"
#include "lib/srv.h"

#define ENVS "FCCL_PROVIDER=shm FCCL_TIMEOUT=30 "

static char bin_dir[512], test_dir[512];

static void setup(void)
{
    const char *b = getenv("FCCL_BIN"), *t = getenv("FCCL_TESTBIN");
    snprintf(bin_dir, sizeof(bin_dir), "%s", b && *b ? b : "build/bin");
    snprintf(test_dir, sizeof(test_dir), "%s", t && *t ? t : "build/tests");
}

TestSuite(fccl_run, .init = setup, .timeout = 120);

/* Run a shell script, stdout and stderr captured apart; hard timeout. */
static struct th_result run_sh(const char *script, double timeout_s)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    struct th_result r;
    struct th_cmd tc = {.argv = (const char *const *)argv,
                         .env = NULL, .in = NULL, .inlen = 0,
                         .timeout_s = timeout_s};
    cr_assert_eq(th_run(&tc, &r), 0,
                 "cannot run sh");
    return r;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    size_t k;
    while ((k = fread(b + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (cap - n < 2)
            b = realloc(b, cap *= 2);
    }
    b[n] = '\0';
    fclose(f);
    if (len)
        *len = n;
    return b;
}

static void expect_file(const char *dir, const char *name, const char *want)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    size_t n;
    char *got = read_file(path, &n);
    cr_assert(got, "%s missing", path);
    cr_expect(n == strlen(want) && memcmp(got, want, n) == 0,
              "%s holds '%s', want '%s'", path, got, want);
    free(got);
}

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void make_tmp(char *dir, size_t len)
{
    snprintf(dir, len, "/tmp/fccl-launcher.XXXXXX");
    cr_assert(mkdtemp(dir), "mkdtemp");
}

static void remove_tree(const char *dir)
{
    char cmd[1100];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    cr_expect_eq(system(cmd), 0);
}

/* ---- --log-dir ---- */

Test(fccl_run, log_dir_files_hold_each_rank_output)
{
    char tmp[64], script[4096];
    make_tmp(tmp, sizeof(tmp));
    /* DIR and its parent do not exist yet. */
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --log-dir %s/a/logs sh -c "
             "'echo out-$RANK; echo err-$RANK >&2; echo more-$RANK; "
             "printf partial-$RANK'",
             bin_dir, tmp);
    struct th_result r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    /* The console still has every line, prefixed. */
    cr_expect(strstr(r.out, "[0] out-0\n") && strstr(r.out, "[1] more-1\n") &&
                  strstr(r.out, "[1] partial-1\n"),
              "%s", r.out);
    cr_expect(strstr(r.err, "[0] err-0\n") && strstr(r.err, "[1] err-1\n"),
              "%s", r.err);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/a/logs/attempt_0", tmp);
    /* The files: the rank's own bytes, no prefix, nothing added. */
    expect_file(dir, "rank0.stdout", "out-0\nmore-0\npartial-0");
    expect_file(dir, "rank1.stdout", "out-1\nmore-1\npartial-1");
    expect_file(dir, "rank0.stderr", "err-0\n");
    expect_file(dir, "rank1.stderr", "err-1\n");
    th_result_free(&r);
    remove_tree(tmp);
}

/* One folder per attempt; a DIR that is a file is an error (exit 1). */
Test(fccl_run, log_dir_per_attempt_and_errors)
{
    char tmp[64], script[4096];
    make_tmp(tmp, sizeof(tmp));
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --max-restarts 1 --log-dir %s sh -c "
             "'echo try-$RESTART_COUNT-$RANK; "
             "[ $RESTART_COUNT = 0 ] && [ $RANK = 1 ] && exit 4; exit 0'",
             bin_dir, tmp);
    struct th_result r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    th_result_free(&r);
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/attempt_0", tmp);
    expect_file(dir, "rank1.stdout", "try-0-1\n");
    snprintf(dir, sizeof(dir), "%s/attempt_1", tmp);
    expect_file(dir, "rank0.stdout", "try-1-0\n");
    expect_file(dir, "rank1.stdout", "try-1-1\n");
    expect_file(dir, "rank1.stderr", "");
    snprintf(script, sizeof(script),
             "touch %s/file && %s/fccl-run -n 1 --log-dir %s/file/x true",
             tmp, bin_dir, tmp);
    r = run_sh(script, 30);
    cr_expect_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "--log-dir"), "%s", r.err);
    th_result_free(&r);
    snprintf(script, sizeof(script), "%s/fccl-run -n 1 --log-dir '' true",
             bin_dir);
    r = run_sh(script, 30);
    cr_expect_eq(r.status, 2, "exit %d: %s", r.status, r.err);
    th_result_free(&r);
    remove_tree(tmp);
}

/* ---- --max-restarts ---- */

Test(fccl_run, restarts_until_success)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --max-restarts 2 sh -c "
             "'echo seen-$RANK-$RESTART_COUNT-$TORCHELASTIC_RESTART_COUNT; "
             "echo job-$RESTART_COUNT-$FCCL_JOB_ID; "
             "[ $RANK = 1 ] && [ $RESTART_COUNT -lt 2 ] && { sleep 0.3; exit 3; }; "
             "exit 0'",
             bin_dir);
    struct th_result r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "exit %d: %s\n%s", r.status, r.out, r.err);
    for (int a = 0; a < 3; a++)
        for (int k = 0; k < 2; k++) {
            char line[64];
            snprintf(line, sizeof(line), "[%d] seen-%d-%d-%d\n", k, k, a, a);
            cr_expect_eq(count(r.out, line), 1, "'%s' in:\n%s", line, r.out);
        }
    cr_expect(!strstr(r.out, "seen-0-3"), "a fourth attempt:\n%s", r.out);
    cr_expect(strstr(r.err, "restart 1 of 2") && strstr(r.err, "restart 2 of 2"),
              "%s", r.err);
    /* A job id per attempt, the same for both ranks of one attempt. */
    char ids[3][160];
    for (int a = 0; a < 3; a++) {
        char pre[32];
        snprintf(pre, sizeof(pre), "[0] job-%d-", a);
        const char *p = strstr(r.out, pre);
        cr_assert(p, "%s", r.out);
        cr_assert_eq(sscanf(p + strlen(pre), "%159s", ids[a]), 1);
        char other[512];
        snprintf(other, sizeof(other), "[1] job-%d-%s\n", a, ids[a]);
        cr_expect(strstr(r.out, other), "rank 1's id in attempt %d:\n%s", a,
                  r.out);
    }
    cr_expect_str_neq(ids[0], ids[1]);
    cr_expect_str_neq(ids[1], ids[2]);
    cr_expect_str_neq(ids[0], ids[2]);
    th_result_free(&r);
}

Test(fccl_run, always_failing_stops_after_the_restarts)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --max-restarts 2 sh -c "
             "'echo seen-$RANK-$RESTART_COUNT; "
             "[ $RANK = 0 ] && { sleep 0.3; exit 5; }; "
             "exec sleep 20'",
             bin_dir);
    double t0 = th_now();
    struct th_result r = run_sh(script, 90);
    double took = th_now() - t0;
    cr_assert_eq(r.status, 5, "exit %d: %s\n%s", r.status, r.out, r.err);
    cr_expect(strstr(r.out, "[1] seen-1-2\n") && !strstr(r.out, "seen-1-3"),
              "%s", r.out);
    cr_expect_eq(count(r.err, "rank 0 exited with status 5"), 3, "%s", r.err);
    /* The sleeping rank is stopped at once each time, not waited for. */
    cr_expect(took < 30, "took %.1f s", took);
    th_result_free(&r);
    /* A rank killed by a signal: 128 + N after the last attempt. */
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 1 --max-restarts 1 sh -c "
             "'echo seen-$RESTART_COUNT; kill -9 $$'",
             bin_dir);
    r = run_sh(script, 60);
    cr_expect_eq(r.status, 137, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "[0] seen-1\n"), "%s", r.out);
    th_result_free(&r);
}

Test(fccl_run, no_restart_by_default)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 sh -c 'echo seen-$RANK-$RESTART_COUNT; "
             "sleep 0.3; exit 6'",
             bin_dir);
    struct th_result r = run_sh(script, 60);
    cr_expect_eq(r.status, 6, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "seen-0-0") && !strstr(r.out, "seen-0-1"), "%s",
              r.out);
    cr_expect(!strstr(r.err, "restart"), "%s", r.err);
    th_result_free(&r);
}

/* A rank killed outright leaves its files in /dev/shm: libfabric's
 * ("<pid>:...") and, killed while setting up a group's segment, fccl's
 * ("fccl-<pid>-<n>").  fccl-run removes both once the rank is gone. */
Test(fccl_run, killed_rank_files_in_dev_shm_are_removed)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 1 sh -c 'touch /dev/shm/fccl-$$-7 "
             "/dev/shm/$$:test; echo pid $$; kill -9 $$'",
             bin_dir);
    struct th_result r = run_sh(script, 60);
    cr_expect_eq(r.status, 137, "exit %d: %s", r.status, r.err);
    int pid = 0;
    const char *at = strstr(r.out, "pid ");
    cr_assert(at && sscanf(at, "pid %d", &pid) == 1, "%s", r.out);
    char a[64], b[64];
    snprintf(a, sizeof(a), "/dev/shm/fccl-%d-7", pid);
    snprintf(b, sizeof(b), "/dev/shm/%d:test", pid);
    struct stat st;
    int left_a = stat(a, &st) == 0, left_b = stat(b, &st) == 0;
    unlink(a);
    unlink(b);
    cr_expect(!left_a, "%s left behind", a);
    cr_expect(!left_b, "%s left behind", b);
    th_result_free(&r);
}

/* ^C stops the job for good, restarts or not. */
Test(fccl_run, interrupt_is_not_restarted)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --max-restarts 3 sh -c "
             "'echo seen-$RANK-$RESTART_COUNT; exec sleep 30' & p=$!; "
             "sleep 1; kill -INT $p; wait $p",
             bin_dir);
    struct th_result r = run_sh(script, 60);
    cr_expect_eq(r.status, 130, "exit %d: %s", r.status, r.err);
    cr_expect(!strstr(r.out, "seen-0-1"), "%s", r.out);
    th_result_free(&r);
}

/* Run `n` ranks under "setsid fccl-run", each printing its pid and
 * session; then a ^C to the terminal's process group (the launcher's).
 * Fills pid[] and sid[] and returns the launcher's exit status. */
static int sessions_of_ranks(int n, const char *opts, int first, long *pid,
                             long *sid, long *launcher)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "setsid %s/fccl-run -n %d %s sh -c "
             "'echo sid-$RANK-$$-$(cut -d\" \" -f6 /proc/$$/stat); "
             "exec sleep 30' & p=$!; echo launcher-$p; "
             "sleep 1.5; kill -INT -$p; wait $p",
             bin_dir, n, opts);
    struct th_result r = run_sh(script, 60);
    const char *at = strstr(r.out, "launcher-");
    cr_assert(at && sscanf(at + 9, "%ld", launcher) == 1, "%s", r.out);
    for (int rank = 0; rank < n; rank++) {
        char key[32];
        snprintf(key, sizeof(key), "sid-%d-", first + rank);
        at = strstr(r.out, key);
        cr_assert(at && sscanf(at + strlen(key), "%ld-%ld", &pid[rank],
                               &sid[rank]) == 2,
                  "rank %d printed no session: %s", rank, r.out);
    }
    int status = r.status;
    th_result_free(&r);
    return status;
}

/* Ranks that fit the CPUs each lead a session of their own (the CPU share
 * autogroup scheduling gives a session; bind.c), so a ^C to the terminal's
 * process group reaches only fccl-run, which passes it on: the ranks end
 * by SIGINT and the launcher exits 130.  One rank more than the CPUs: all
 * stay in the launcher's session.  So do the ranks of one node of several
 * (other nodes' ranks may share the machine): node 1 of 2, its one rank
 * started at once under a given job id, no other node needed. */
Test(fccl_run, ranks_lead_their_own_sessions_where_they_fit_the_cpus)
{
    long pid[64], sid[64], launcher;
    cpu_set_t set;
    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    int cpus = CPU_COUNT(&set);
    int fit = cpus < 2 ? 1 : 2, over = cpus + 1;
    cr_expect_eq(sessions_of_ranks(fit, "", 0, pid, sid, &launcher), 130);
    for (int r = 0; r < fit; r++)
        cr_expect_eq(pid[r], sid[r], "rank %d (pid %ld) is in session %ld",
                     r, pid[r], sid[r]);
    struct srv srv;
    srv_start_local(&srv, NULL);
    char node[384];
    snprintf(node, sizeof(node), "--nnodes 2 --node-rank 1 --store %s "
             "--job-id sessions", srv.addr);
    cr_expect_eq(sessions_of_ranks(1, node, 1, pid, sid, &launcher), 130);
    cr_expect_eq(sid[0], launcher, "node 1's rank is in session %ld, the "
                 "launcher's is %ld", sid[0], launcher);
    srv_stop(&srv);
    if (over > 64)
        return; /* a machine this large: the rest costs too many ranks */
    cr_expect_eq(sessions_of_ranks(over, "", 0, pid, sid, &launcher), 130);
    for (int r = 0; r < over; r++)
        cr_expect_eq(sid[r], launcher, "rank %d of %d is in session %ld, "
                     "the launcher's is %ld", r, over, sid[r], launcher);
}

/* Two launchers of one 2-node job on loopback, a plain server between
 * them: rank 3 (node 1) fails in attempts 0 and 1, node 0's ranks succeed
 * at once each time and wait for the others; both nodes restart together
 * with the same job id per attempt and leave no key behind.  Then a job
 * that always fails on node 1: both nodes exit with its status. */
Test(fccl_run, two_nodes_restart_together, .timeout = 180)
{
    struct srv srv;
    srv_start_local(&srv, NULL);
    char script[8192];
    const char *prog =
        "echo seen-$RANK-$RESTART_COUNT-$FCCL_JOB_ID; "
        "[ $RANK = 3 ] && [ $RESTART_COUNT -lt 2 ] && { sleep 0.3; exit 3; }; "
        "exit 0";
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --nnodes 2 --node-rank 0 --store %s "
             "--max-restarts 2 sh -c '%s' > /dev/null & a=$!; "
             "%s/fccl-run -n 2 --nnodes 2 --node-rank 1 --store %s "
             "--max-restarts 2 sh -c '%s' & b=$!; "
             "wait $a; ra=$?; wait $b; rb=$?; echo \"rc $ra $rb\"",
             bin_dir, srv.addr, prog, bin_dir, srv.addr, prog);
    struct th_result r = run_sh(script, 150);
    cr_assert(strstr(r.out, "rc 0 0\n"), "%s\n%s", r.out, r.err);
    for (int a = 0; a < 3; a++) {
        char pre[64], id[160], other[256];
        snprintf(pre, sizeof(pre), "[2] seen-2-%d-", a);
        const char *p = strstr(r.out, pre);
        cr_assert(p, "attempt %d missing:\n%s", a, r.out);
        cr_assert_eq(sscanf(p + strlen(pre), "%159s", id), 1);
        snprintf(other, sizeof(other), "[3] seen-3-%d-%s\n", a, id);
        cr_expect(strstr(r.out, other), "%s", r.out);
    }
    th_result_free(&r);
    const char *fails = "echo seen-$RANK-$RESTART_COUNT; "
                        "[ $RANK = 1 ] && exit 5; sleep 0.2";
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 1 --nnodes 2 --node-rank 0 --store %s "
             "--max-restarts 2 sh -c '%s' & a=$!; "
             "%s/fccl-run -n 1 --nnodes 2 --node-rank 1 --store %s "
             "--max-restarts 2 sh -c '%s' & b=$!; "
             "wait $a; ra=$?; wait $b; rb=$?; echo \"rc $ra $rb\"",
             bin_dir, srv.addr, fails, bin_dir, srv.addr, fails);
    r = run_sh(script, 150);
    cr_assert(strstr(r.out, "rc 5 5\n"), "%s\n%s", r.out, r.err);
    cr_expect(strstr(r.out, "[0] seen-0-2\n") && strstr(r.out, "[1] seen-1-2\n") &&
                  !strstr(r.out, "seen-0-3"),
              "%s", r.out);
    th_result_free(&r);
    /* Neither job left a launcher key. */
    snprintf(script, sizeof(script), "%s/tcpstore --addr %s --raw-keys keys ''",
             bin_dir, srv.addr);
    r = run_sh(script, 30);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_eq(r.outlen, 0, "keys left:\n%s", r.out);
    th_result_free(&r);
    srv_stop(&srv);
}

/* The launchers' own store connection takes the ranks' TLS and token
 * (FCCL_STORE_TLS_CA, FCCL_STORE_TOKEN_FILE), so two nodes meet (and
 * restart) at a store that requires both. */
Test(fccl_run, two_nodes_at_a_tls_and_token_store, .timeout = 120)
{
    if (system("openssl version >/dev/null 2>&1") != 0)
        cr_skip_test("no openssl program to make a certificate");
    char tmp[64], cmd[2048];
    make_tmp(tmp, sizeof(tmp));
    snprintf(cmd, sizeof(cmd),
             "cd %s && openssl req -x509 " TH_NEWKEY " -nodes -days 1 "
             "-keyout srv.key -out srv.pem -subj /CN=localhost "
             "-addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 && "
             "head -c 32 /dev/urandom | base64 > tok && chmod 600 srv.key tok",
             tmp);
    cr_assert_eq(system(cmd), 0, "cannot make a certificate");
    char bin[512], cert[128], key[128], tok[128];
    snprintf(cert, sizeof(cert), "%s/srv.pem", tmp);
    snprintf(key, sizeof(key), "%s/srv.key", tmp);
    snprintf(tok, sizeof(tok), "%s/tok", tmp);
    char *argv[] = {(char *)th_bin("tcpstore-server", bin, sizeof(bin)),
                    "--host", "127.0.0.1", "--port", "0", "--tls-cert", cert,
                    "--tls-key", key, "--tls-required", "--token-file", tok,
                    "--auth-required", NULL};
    struct srv srv;
    srv_start_argv(&srv, (const char *const *)argv, 20);
    char script[8192];
    snprintf(script, sizeof(script),
             "export FCCL_STORE_TLS_CA=%s FCCL_STORE_TOKEN_FILE=%s; "
             "%s/fccl-run -n 1 --nnodes 2 --node-rank 0 --store %s "
             "--max-restarts 1 sh -c 'echo n0-$RESTART_COUNT' & a=$!; "
             "%s/fccl-run -n 1 --nnodes 2 --node-rank 1 --store %s "
             "--max-restarts 1 sh -c 'echo n1-$RESTART_COUNT; "
             "[ $RESTART_COUNT = 0 ] && { sleep 0.3; exit 3; }; exit 0' & b=$!; "
             "wait $a; ra=$?; wait $b; rb=$?; echo \"rc $ra $rb\"",
             cert, tok, bin_dir, srv.addr, bin_dir, srv.addr);
    struct th_result r = run_sh(script, 100);
    cr_expect(strstr(r.out, "rc 0 0\n"), "%s\n%s", r.out, r.err);
    cr_expect(strstr(r.out, "[0] n0-1\n") && strstr(r.out, "[1] n1-1\n"),
              "%s", r.out);
    th_result_free(&r);
    srv_stop(&srv);
    remove_tree(tmp);
}

/* An fccl job: rank 1 fails before init in attempt 0 while rank 0 waits
 * in init; the restarted job (a fresh job id on the same in-process
 * store) runs boot_check's collectives to the end. */
Test(fccl_run, restarted_fccl_job_gets_a_fresh_job_id)
{
    char script[4096];
    snprintf(script, sizeof(script),
             ENVS "%s/fccl-run -n 2 --max-restarts 1 sh -c "
             "'[ $RESTART_COUNT = 0 ] && [ $RANK = 1 ] && exit 9; "
             "exec %s/boot_check env'",
             bin_dir, test_dir);
    struct th_result r = run_sh(script, 100);
    cr_assert_eq(r.status, 0, "exit %d: %s\n%s", r.status, r.out, r.err);
    cr_expect(strstr(r.out, "[0] R0 done 0\n") && strstr(r.out, "[1] R1 done 0\n"),
              "%s", r.out);
    cr_expect(strstr(r.err, "rank 1 exited with status 9"), "%s", r.err);
    th_result_free(&r);
}

Test(fccl_run, bad_option_values_exit_2)
{
    static const char *bad[] = {"--max-restarts -1", "--max-restarts x",
                                "--bind-to socket", "--bind-to"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char script[1024];
        snprintf(script, sizeof(script), "%s/fccl-run -n 1 %s true", bin_dir,
                 bad[i]);
        struct th_result r = run_sh(script, 30);
        cr_expect_eq(r.status, 2, "%s: exit %d: %s", bad[i], r.status, r.err);
        cr_expect(strstr(r.err, "fccl-run"), "%s: %s", bad[i], r.err);
        th_result_free(&r);
    }
}

/* ---- --bind-to ---- */

/* The CPUs this process may use, as "0-3,8" (Cpus_allowed_list). */
static void own_cpus_list(char *out, size_t len)
{
    size_t n;
    char *st = read_file("/proc/self/status", &n);
    cr_assert(st);
    const char *p = strstr(st, "Cpus_allowed_list:");
    cr_assert(p);
    p += strlen("Cpus_allowed_list:");
    while (*p == ' ' || *p == '\t')
        p++;
    size_t k = strcspn(p, "\n");
    snprintf(out, len, "%.*s", (int)k, p);
    free(st);
}

/* Cores among our CPUs: distinct first hardware-thread siblings. */
static int own_cores(int *first_cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    cr_assert_eq(sched_getaffinity(0, sizeof(set), &set), 0);
    int keys[CPU_SETSIZE], n = 0;
    *first_cpu = -1;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &set))
            continue;
        if (*first_cpu < 0)
            *first_cpu = c;
        char path[128];
        snprintf(path, sizeof(path),
                 "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
                 c);
        int k = c;
        FILE *f = fopen(path, "r");
        if (f) {
            if (fscanf(f, "%d", &k) != 1)
                k = c;
            fclose(f);
        }
        int seen = 0;
        for (int i = 0; i < n; i++)
            seen |= keys[i] == k;
        if (!seen)
            keys[n++] = k;
    }
    return n;
}

/* rank r's "Cpus_allowed_list:\t..." value from `[r] Cpus_allowed_list:` */
static void rank_cpus(const char *out, int r, char *val, size_t len)
{
    char pre[64];
    snprintf(pre, sizeof(pre), "[%d] Cpus_allowed_list:", r);
    const char *p = strstr(out, pre);
    cr_assert(p, "rank %d's line missing:\n%s", r, out);
    p += strlen(pre);
    while (*p == ' ' || *p == '\t')
        p++;
    snprintf(val, len, "%.*s", (int)strcspn(p, "\n"), p);
}

static int lists_overlap(const char *a, const char *b)
{
    /* expand "0-3,8" lists into flags */
    char flags[2][4096] = {{0}};
    const char *l[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        const char *p = l[i];
        while (*p) {
            char *end;
            long lo = strtol(p, &end, 10), hi = lo;
            if (*end == '-')
                hi = strtol(end + 1, &end, 10);
            for (long c = lo; c <= hi && c < 4096; c++)
                flags[i][c] = 1;
            p = *end == ',' ? end + 1 : end + strlen(end);
        }
    }
    for (int c = 0; c < 4096; c++)
        if (flags[0][c] && flags[1][c])
            return 1;
    return 0;
}

Test(fccl_run, bind_to_core)
{
    char mine[512], script[4096], a[512], b[512];
    own_cpus_list(mine, sizeof(mine));
    int first = -1, cores = own_cores(&first);
    /* none (the default): every rank keeps the launcher's CPUs */
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --bind-to none sh -c "
             "'grep Cpus_allowed_list /proc/self/status'",
             bin_dir);
    struct th_result r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "%s", r.err);
    rank_cpus(r.out, 0, a, sizeof(a));
    rank_cpus(r.out, 1, b, sizeof(b));
    cr_expect_str_eq(a, mine);
    cr_expect_str_eq(b, mine);
    cr_expect(!strstr(r.err, "bound to"), "%s", r.err);
    th_result_free(&r);
    /* core: each rank its own share, as reported at start */
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --bind-to core sh -c "
             "'grep Cpus_allowed_list /proc/self/status'",
             bin_dir);
    r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "%s", r.err);
    rank_cpus(r.out, 0, a, sizeof(a));
    rank_cpus(r.out, 1, b, sizeof(b));
    char line[600];
    snprintf(line, sizeof(line), "fccl-run: rank 0 bound to CPUs %s\n", a);
    cr_expect(strstr(r.err, line), "'%s' not in:\n%s", line, r.err);
    snprintf(line, sizeof(line), "fccl-run: rank 1 bound to CPUs %s\n", b);
    cr_expect(strstr(r.err, line), "'%s' not in:\n%s", line, r.err);
    cr_expect(a[0] && b[0]);
    if (cores >= 2)
        cr_expect(!lists_overlap(a, b), "ranks share CPUs: %s and %s", a, b);
    cr_expect(strcmp(a, mine) != 0 || cores < 2);
    th_result_free(&r);
    /* More ranks than cores wrap around: on one CPU, all ranks share it. */
    snprintf(script, sizeof(script),
             "taskset -c %d %s/fccl-run -n 3 --bind-to core sh -c "
             "'grep Cpus_allowed_list /proc/self/status'",
             first, bin_dir);
    r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "%s", r.err);
    char want[16];
    snprintf(want, sizeof(want), "%d", first);
    for (int k = 0; k < 3; k++) {
        rank_cpus(r.out, k, a, sizeof(a));
        cr_expect_str_eq(a, want, "rank %d", k);
    }
    th_result_free(&r);
    /* cores + 1 ranks: the last one shares rank 0's core */
    snprintf(script, sizeof(script),
             "%s/fccl-run -n %d --bind-to core sh -c "
             "'grep Cpus_allowed_list /proc/self/status'",
             bin_dir, cores + 1);
    r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "%s", r.err);
    rank_cpus(r.out, 0, a, sizeof(a));
    rank_cpus(r.out, cores, b, sizeof(b));
    cr_expect_str_eq(a, b, "rank %d should wrap to rank 0's core", cores);
    th_result_free(&r);
}

/* ---- msrun's variables ---- */

/* fccl-run gives its ranks msrun's names for the job too (no MS_ROLE);
 * the scheduler is fccl-run's store (TCPSTORE_ADDR; one node's
 * MASTER_PORT is torch's, served by rank 0). */
Test(fccl_run, ranks_get_msrun_variables)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 sh -c 'echo ms-$MS_WORKER_NUM-$RANK_SIZE-"
             "$MS_NODE_ID-$RANK_ID-$RANK-${MS_ROLE:-none}; "
             "[ \"$MS_SCHED_HOST:$MS_SCHED_PORT\" = "
             "\"$TCPSTORE_ADDR\" ] && echo sched-same'",
             bin_dir);
    struct th_result r = run_sh(script, 60);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "[0] ms-2-2-0-0-0-none\n"), "%s", r.out);
    cr_expect(strstr(r.out, "[1] ms-2-2-1-1-1-none\n"), "%s", r.out);
    cr_expect_eq(count(r.out, "sched-same"), 2, "%s", r.out);
    th_result_free(&r);
}

/* torchrun's variables, on each of two nodes: the node's and the role's
 * ranks and sizes, the run id, the agent store (torch's env:// then
 * connects to the launcher's store instead of binding MASTER_PORT). */
Test(fccl_run, ranks_get_torchrun_variables_on_two_nodes, .timeout = 120)
{
    struct srv srv;
    srv_start_local(&srv, NULL);
    char script[8192];
    const char *prog =
        "echo tr-$RANK-$LOCAL_RANK-$GROUP_RANK-$ROLE_RANK-$WORLD_SIZE-"
        "$LOCAL_WORLD_SIZE-$GROUP_WORLD_SIZE-$ROLE_WORLD_SIZE-$ROLE_NAME-"
        "$TORCHELASTIC_RUN_ID-$TORCHELASTIC_RESTART_COUNT-"
        "$TORCHELASTIC_MAX_RESTARTS-$TORCHELASTIC_USE_AGENT_STORE";
    snprintf(script, sizeof(script),
             "%s/fccl-run -n 2 --nnodes 2 --node-rank 0 --store %s "
             "--job-id trj sh -c '%s' & a=$!; "
             "%s/fccl-run -n 2 --nnodes 2 --node-rank 1 --store %s "
             "--job-id trj sh -c '%s' & b=$!; "
             "wait $a; ra=$?; wait $b; rb=$?; echo \"rc $ra $rb\"",
             bin_dir, srv.addr, prog, bin_dir, srv.addr, prog);
    struct th_result r = run_sh(script, 100);
    cr_assert(strstr(r.out, "rc 0 0\n"), "%s\n%s", r.out, r.err);
    for (int g = 0; g < 4; g++) {
        char want[160];
        snprintf(want, sizeof(want),
                 "[%d] tr-%d-%d-%d-%d-4-2-2-4-default-trj-0-0-True\n", g, g,
                 g % 2, g / 2, g);
        cr_expect(strstr(r.out, want), "no %s in:\n%s", want, r.out);
    }
    th_result_free(&r);
    srv_stop(&srv);
}

/* A 2-rank job started by hand with msrun's variables only (as msrun
 * --worker_num 2 --local_worker_num 1 --node_rank K gives them: RANK is
 * msrun's local index, 0 on both); rank 0 serves the store at
 * MS_SCHED_HOST:MS_SCHED_PORT. */
Test(fccl_run, msrun_variables_through_env)
{
    char script[8192];
    int port = th_free_port();
    snprintf(script, sizeof(script),
             "unset MASTER_ADDR MASTER_PORT WORLD_SIZE LOCAL_WORLD_SIZE "
             "RANK_TABLE_FILE FCCL_JOB_ID TORCHELASTIC_RUN_ID; "
             "for r in 0 1; do "
             "FCCL_PROVIDER=shm FCCL_TIMEOUT=30 MS_WORKER_NUM=2 "
             "MS_SCHED_HOST=127.0.0.1 MS_SCHED_PORT=%d MS_ROLE=MS_WORKER "
             "MS_NODE_ID=$r RANK_ID=$r RANK_SIZE=2 RANK=0 LOCAL_RANK=0 "
             "DEVICE_ID=0 %s/boot_check env > /tmp/fccl-msrun-$$-$r.log 2>&1 & "
             "done; wait; cat /tmp/fccl-msrun-$$-0.log /tmp/fccl-msrun-$$-1.log; "
             "rm -f /tmp/fccl-msrun-$$-*.log",
             port, test_dir);
    struct th_result r = run_sh(script, 100);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_expect(strstr(r.out, "R0 size 2\n") && strstr(r.out, "R1 size 2\n"),
              "%s", r.out);
    cr_expect(strstr(r.out, "R0 done 0\n") && strstr(r.out, "R1 done 0\n"),
              "%s", r.out);
    th_result_free(&r);
}
