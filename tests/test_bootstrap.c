/*
 * Bootstrap tests: real processes on loopback, launched by fccl-run (or by
 * hand where the launcher itself is not under test), provider shm.  Every
 * expected value (group names via sha1sum, memberships, split order) is
 * computed here independently of the library.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc.h"
#include "lib/rank.h"
#include "lib/srv.h"

#define ENVS "FCCL_PROVIDER=shm FCCL_TIMEOUT=60 "

/* Lowercase hex SHA-1 of s via the sha1sum program (independent of the
 * code under test). */
static void sha1_hex(const char *s, char hex[41])
{
    char cmd[1200], *out = NULL;
    snprintf(cmd, sizeof(cmd), "printf %%s \"%s\" | sha1sum", s);
    th_sh(cmd, 10, &out);
    memset(hex, 0, 41);
    if (strlen(out) >= 40)
        memcpy(hex, out, 40);
    free(out);
}

static void expect_line(const char *out, const char *line)
{
    cr_expect(strstr(out, line) != NULL, "missing line \"%s\" in:\n%s", line,
              out);
}

/* fccl_<n>_<sha1 of sorted ranks joined by _> */
static void group_name(const int *sorted, int n, char *out, size_t len)
{
    char joined[1024] = "", hex[41];
    size_t off = 0;
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(joined + off, sizeof(joined) - off,
                                i ? "_%d" : "%d", sorted[i]);
    sha1_hex(joined, hex);
    snprintf(out, len, "fccl_%d_%s", n, hex);
}

static void check_job_output(const char *out, int n)
{
    char line[512], name[128];
    int members[64], m = 0;
    for (int i = 0; i < n; i += 2)
        members[m++] = i;
    if ((n - 1) % 2)
        members[m++] = n - 1;
    group_name(members, m, name, sizeof(name));
    int msum = 0;
    for (int i = 0; i < m; i++)
        msum += members[i];
    for (int r = 0; r < n; r++) {
        snprintf(line, sizeof(line), "[%d] R%d size %d\n", r, r, n);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d world fccl_world_group %d %d\n",
                 r, r, r, n);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d topo 1 0 %d %d\n", r, r, r, n);
        expect_line(out, line);
        int idx = -1;
        for (int i = 0; i < m; i++)
            if (members[i] == r)
                idx = i;
        if (idx >= 0) {
            snprintf(line, sizeof(line),
                     "[%d] R%d group %s size %d rank %d world %d back %d sum %d\n",
                     r, r, name, m, idx, r, idx, msum);
            cr_expect_eq(th_count(out, line), 2, "want twice: %s in\n%s", line,
                         out);
        } else {
            snprintf(line, sizeof(line), "[%d] R%d nonmember -1 ", r, r);
            expect_line(out, line);
        }
        /* split: color r % 3, key -r: members of my color, highest first */
        int sm[64], k = 0, pos = 0;
        for (int q = 0; q < n; q++)
            if (q % 3 == r % 3)
                sm[k++] = q;
        for (int i = 0; i < k; i++)
            if (sm[i] > r)
                pos++;
        char sname[128];
        group_name(sm, k, sname, sizeof(sname));
        snprintf(line, sizeof(line), "[%d] R%d split %s rank %d size %d first %d\n",
                 r, r, sname, pos, k, sm[k - 1]);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d splitsum %d\n", r, r, k);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d done 0\n", r, r);
        expect_line(out, line);
    }
    cr_expect(strstr(out, "not a member") != NULL || m == n,
              "non-members must get a clear error:\n%s", out);
}

static void run_job(int n, const char *mode)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof(cmd), ENVS "%s/fccl-run -n %d %s/boot_check %s",
             th_bin_dir(), n, th_testbin_dir(), mode);
    int st = th_sh(cmd, 120, &out);
    cr_assert_eq(st, 0, "%s exited %d:\n%s", cmd, st, out);
    check_job_output(out, n);
    free(out);
}

/* A start-up mode's cases: 1 to 4 ranks, and 8 in the long tier. */
#define JOB_CASES(name, mode)                                                  \
    Test(bootstrap, name##_1, .timeout = 120) { run_job(1, mode); }            \
    Test(bootstrap, name##_2, .timeout = 120) { run_job(2, mode); }            \
    Test(bootstrap, name##_3, .timeout = 120) { run_job(3, mode); }            \
    Test(bootstrap, name##_4, .timeout = 120) { run_job(4, mode); }            \
    Test(bootstrap, name##_8, .timeout = 180)                                  \
    {                                                                          \
        TH_LONG_CASE("8 ranks");                                               \
        run_job(8, mode);                                                      \
    }

JOB_CASES(env, "env")
JOB_CASES(tcp, "tcp")
JOB_CASES(store_handle, "store")

/* Nobody serves the address: rank 0 hosts the store in-process. */
Test(bootstrap, rank0_hosts_store, .timeout = 120)
{
    char *out = NULL;
    int st = th_job_on_store(3, th_free_port(), "boot_check host", 120, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    check_job_output(out, 3);
    free(out);
}

/* Two jobs on one server at once, then the server holds no keys. */
Test(bootstrap, two_jobs_share_a_store, .timeout = 180)
{
    struct srv srv;
    srv_start_local(&srv, NULL);
    int port = srv.port;
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             ENVS "%s/fccl-run -n 3 --store 127.0.0.1:%d %s/boot_check env > /tmp/fccl-job-a.$$ 2>&1 & pa=$!; "
                  ENVS "%s/fccl-run -n 4 --store 127.0.0.1:%d %s/boot_check env > /tmp/fccl-job-b.$$ 2>&1 & pb=$!; "
                  "wait $pa; a=$?; wait $pb; b=$?; cat /tmp/fccl-job-a.$$; echo ====; "
                  "cat /tmp/fccl-job-b.$$; rm -f /tmp/fccl-job-[ab].$$; exit $((a + b))",
             th_bin_dir(), port, th_testbin_dir(), th_bin_dir(), port,
             th_testbin_dir());
    int st = th_sh(cmd, 150, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    char *sep = strstr(out, "====");
    cr_assert(sep);
    *sep = '\0';
    check_job_output(out, 3);
    check_job_output(sep + 4, 4);
    free(out);
    /* Only "init/" stays, as PyTorch jobs leave it: each of the 7 ranks
     * joined once. */
    st = srv_tcpstore(port, ".", "", "num-keys", &out);
    cr_expect_eq(st, 0);
    cr_expect_str_eq(out, "1\n", "keys left behind: %s", out);
    free(out);
    st = srv_tcpstore(port, ".", "", "--raw-keys get init/", &out);
    cr_expect_eq(st, 0);
    cr_expect_str_eq(out, "7", "init/ count: %s", out);
    free(out);
    cr_expect_eq(srv_stop(&srv), 0);
    srv_cleanup(&srv);
}

/* Ranks started by hand (no launcher) against a fresh store server, in a
 * world of `world`: ranks[i] is rank i's command ("[VAR=value ...]
 * $T/boot_check args", $T the test binaries).  Returns their output,
 * which ends in "codes" and each one's exit status; *secs: how long they
 * took together. */
static char *by_hand(int world, int timeout_s, const char *job,
                     const char *const *ranks, int n, double *secs)
{
    struct srv srv;
    srv_start_local(&srv, NULL);
    int port = srv.port;
    char cmd[2048], *out = NULL;
    size_t off = (size_t)snprintf(
        cmd, sizeof(cmd),
        "export FCCL_PROVIDER=shm FCCL_TIMEOUT=%d MASTER_ADDR=127.0.0.1 "
        "MASTER_PORT=%d WORLD_SIZE=%d FCCL_JOB_ID=%s T=%s; ",
        timeout_s, port, world, job, th_testbin_dir());
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off,
                                "RANK=%d %s & p%d=$!; ", i, ranks[i], i);
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off,
                                "wait $p%d; c%d=$?; ", i, i);
    off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, "echo codes");
    for (int i = 0; i < n; i++)
        off += (size_t)snprintf(cmd + off, sizeof(cmd) - off, " $c%d", i);
    cr_assert(off < sizeof(cmd));
    double t0 = th_now();
    th_sh(cmd, 90, &out);
    *secs = th_now() - t0;
    srv_finish(&srv);
    return out;
}

/* Ranks 0 and 1 of 3 start; rank 2 never does. */
Test(bootstrap, missing_rank_times_out_naming_it, .timeout = 120)
{
    const char *ranks[] = {"$T/boot_check env", "$T/boot_check env"};
    double secs;
    char *out = by_hand(3, 3, "missing", ranks, 2, &secs);
    cr_expect(strstr(out, "codes 1 1") != NULL, "both must fail:\n%s", out);
    cr_expect_eq(th_count(out, "rank 2"), 2, "both must name rank 2:\n%s", out);
    cr_expect(strstr(out, "timed out") != NULL, "%s", out);
    cr_expect(secs < 30, "took %.1f s with a 3 s timeout", secs);
    free(out);
}

/* The eager limit is part of the wire protocol: ranks that disagree on it
 * would wait for each other's messages, so init fails on every rank,
 * naming both settings. */
Test(bootstrap, eager_limits_must_agree, .timeout = 120)
{
    const char *ranks[] = {"$T/boot_check env",
                           "FCCL_EAGER_BYTES=4096 $T/boot_check env"};
    double secs;
    char *out = by_hand(2, 20, "eager", ranks, 2, &secs);
    cr_expect(strstr(out, "codes 1 1") != NULL, "both must fail:\n%s", out);
    cr_expect_eq(th_count(out, "rank 0 runs fccl"), 2, "%s", out);
    cr_expect(strstr(out, "eager 32768, rank 1 runs") &&
                  strstr(out, "eager 4096; every rank") &&
                  strstr(out, "FCCL_EAGER_BYTES"),
              "the error must name both limits:\n%s", out);
    free(out);
}

/* Rank 2 of 3 is SIGKILLed while the job starts: the others fail, in
 * bounded time, instead of hanging. */
Test(bootstrap, rank_killed_during_init, .timeout = 120)
{
    const char *k = "$T/boot_check suicide 1 2";
    const char *ranks[] = {k, k, k};
    double secs;
    char *out = by_hand(3, 4, "killed", ranks, 3, &secs);
    cr_expect(strstr(out, "codes 1 1 137") != NULL, "%s", out);
    cr_expect(secs < 40, "took %.1f s with a 4 s timeout", secs);
    free(out);
}

/* A rank stopped (SIGSTOP) longer than FCCL_PEER_TIMEOUT, on one host
 * over shm: the others' pending and next all_reduce fail with
 * FCCL_ERR_PEER naming it (heartbeats, coll/transport/hb.c), within 15 s
 * (measured from the stop to each one's failure); once it is killed, the
 * survivors (still up) remove its libfabric file from /dev/shm. */
Test(bootstrap, stopped_rank_named, .timeout = 120)
{
    struct srv srv;
    srv_start_local(&srv, NULL);
    int port = srv.port;
    char dir[64];
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-stop"), 0);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "export FCCL_PROVIDER=shm " TH_HAND_JOB_ENV "LOCAL_WORLD_SIZE=3 "
             "FCCL_JOB_ID=stopped FAULT_LINGER_MS=3000; d=%s; for r in 0 1 2; "
             "do RANK=$r LOCAL_RANK=$r %s/fault_check loop 40 > $d/r$r.log "
             "2>&1 & eval p$r=$!; done; " TH_HAND_JOB_READY
             "t0=$(date +%%s%%3N); kill -STOP $p1; "
             "for i in $(seq 300); do [ $(cat $d/r0.log $d/r2.log | "
             "grep -c \"^R. NEXT\") -eq 2 ] && break; sleep 0.1; done; "
             "kill -9 $p1; wait $p1; wait $p0; a=$?; wait $p2; c=$?; "
             "echo codes $a $c; cat $d/r0.log $d/r2.log; "
             "for r in 0 2; do at=$(sed -n \"s/^R. FAILED .* at \\([0-9]*\\):.*/\\1/p\" "
             "$d/r$r.log); echo ms$r $((${at:-999999999999999} - t0)); done; "
             "echo left $(ls /dev/shm | grep -c \"^$p1:\"); rm -f /dev/shm/$p1:*; "
             "rm -rf $d",
             port, dir, th_testbin_dir());
    th_sh(cmd, 100, &out);
    cr_expect(strstr(out, "codes 3 3") != NULL, "%s", out);
    for (int r = 0; r <= 2; r += 2) {
        char want[64], *p;
        snprintf(want, sizeof(want), "R%d FAILED peer failed", r);
        cr_expect(strstr(out, want) != NULL, "%s", out);
        snprintf(want, sizeof(want), "R%d NEXT peer failed", r);
        cr_expect(strstr(out, want) != NULL, "%s", out);
        snprintf(want, sizeof(want), "ms%d ", r);
        long ms = (p = strstr(out, want)) ? atol(p + strlen(want)) : -1;
        cr_expect(ms >= 0 && ms < 15000, "rank %d failed %ld ms after the "
                  "stop:\n%s", r, ms, out);
        fprintf(stderr, "stopped rank: rank %d failed after %ld ms\n", r, ms);
    }
    cr_expect(strstr(out, "rank 1 is dead") != NULL, "%s", out);
    cr_expect(strstr(out, "left 0") != NULL, "%s", out);
    free(out);
    srv_finish(&srv);
}

Test(bootstrap, argument_errors_and_names, .timeout = 60)
{
    char cmd[512], *out = NULL, hex[41], want[128];
    snprintf(cmd, sizeof(cmd), "%s/boot_check args", th_testbin_dir());
    int st = th_sh(cmd, 30, &out);
    cr_expect_eq(st, 0, "%s", out);
    cr_expect(strstr(out, "FAIL") == NULL, "%s", out);
    sha1_hex("0_4", hex);
    snprintf(want, sizeof(want), "name40 fccl_2_%s\n", hex);
    expect_line(out, want);
    free(out);
}

Test(launcher, propagates_exit_status, .timeout = 120)
{
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             ENVS "FCCL_TIMEOUT=20 %s/fccl-run -n 3 %s/boot_check exit 7 1",
             th_bin_dir(), th_testbin_dir());
    double t0 = th_now();
    int st = th_sh(cmd, 60, &out);
    cr_expect_eq(st, 7, "exit %d:\n%s", st, out);
    cr_expect(strstr(out, "rank 1 exited with status 7") != NULL, "%s", out);
    cr_expect(th_now() - t0 < 15, "the others were not stopped promptly");
    free(out);
}

Test(launcher, propagates_signal_as_128_plus_n, .timeout = 120)
{
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             ENVS "%s/fccl-run -n 2 %s/boot_check suicide 1 1", th_bin_dir(),
             th_testbin_dir());
    int st = th_sh(cmd, 60, &out);
    cr_expect_eq(st, 137, "exit %d:\n%s", st, out);
    cr_expect(strstr(out, "rank 1 killed by signal 9") != NULL, "%s", out);
    free(out);
}

Test(launcher, usage_and_prefix, .timeout = 60)
{
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof(cmd), "%s/fccl-run echo hi", th_bin_dir());
    cr_expect_eq(th_sh(cmd, 10, &out), 2, "%s", out);
    free(out);
    snprintf(cmd, sizeof(cmd),
             "%s/fccl-run -n 2 sh -c \"echo out-\\$RANK-\\$WORLD_SIZE-\\$LOCAL_RANK; "
             "echo err-\\$RANK >&2; printf partial\"",
             th_bin_dir());
    cr_expect_eq(th_sh(cmd, 30, &out), 0, "%s", out);
    expect_line(out, "[0] out-0-2-0\n");
    expect_line(out, "[1] out-1-2-1\n");
    expect_line(out, "[1] err-1\n");
    expect_line(out, "[0] partial\n");
    free(out);
    snprintf(cmd, sizeof(cmd), "%s/fccl-run --help", th_bin_dir());
    cr_expect_eq(th_sh(cmd, 10, &out), 0);
    cr_expect(strstr(out, "--store") != NULL);
    free(out);
}

/* Two "nodes" of one job on loopback (tests/multihost runs them on
 * separate network namespaces): global ranks, sizes, one job id agreed
 * through the store, boot_check's collectives across both launchers. */
Test(launcher, two_nodes_on_loopback, .timeout = 120)
{
    char cmd[2048], *out = NULL;
    int port = th_free_port();
    const char *prog = "sh -c \"echo id-\\$RANK-\\$WORLD_SIZE-\\$LOCAL_RANK-"
                       "\\$LOCAL_WORLD_SIZE-\\$GROUP_RANK-\\$FCCL_JOB_ID; "
                       "exec \\\"\\$0\\\" \\\"\\$@\\\"\"";
    snprintf(cmd, sizeof(cmd),
             ENVS "%s/fccl-run -n 2 --nnodes 2 --node-rank 0 --store "
             "127.0.0.1:%d --host-store %s %s/boot_check env & a=$!; "
             ENVS "%s/fccl-run -n 2 --nnodes 2 --node-rank 1 --store "
             "127.0.0.1:%d %s %s/boot_check env & b=$!; "
             "wait $a; ra=$?; wait $b; rb=$?; [ $ra = 0 ] && [ $rb = 0 ]",
             th_bin_dir(), port, prog, th_testbin_dir(), th_bin_dir(), port,
             prog, th_testbin_dir());
    int st = th_sh(cmd, 100, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    check_job_output(out, 4);
    const char *p = strstr(out, "[0] id-0-4-0-2-0-");
    cr_assert(p, "%s", out);
    char job[128] = "", line[256];
    sscanf(p + strlen("[0] id-0-4-0-2-0-"), "%127s", job);
    cr_assert(job[0], "no job id:\n%s", out);
    for (int r = 1; r < 4; r++) {
        snprintf(line, sizeof(line), "[%d] id-%d-4-%d-2-%d-%s\n", r, r, r % 2,
                 r / 2, job);
        expect_line(out, line);
    }
    free(out);
}

Test(launcher, node_usage_errors, .timeout = 60)
{
    static const char *bad[] = {
        "--nnodes 2 --node-rank 0",              /* no store */
        "--nnodes 2 --node-rank 2 --store 127.0.0.1:1", /* rank out of range */
        "--host-store",                          /* host what? */
        "--nnodes 0 --store 127.0.0.1:1",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char cmd[512], *out = NULL;
        snprintf(cmd, sizeof(cmd), "%s/fccl-run -n 1 %s true", th_bin_dir(),
                 bad[i]);
        cr_expect_eq(th_sh(cmd, 10, &out), 2, "%s:\n%s", cmd, out);
        cr_expect(strstr(out, "fccl-run: ") != NULL, "%s: no message:\n%s",
                  cmd, out);
        free(out);
    }
}
