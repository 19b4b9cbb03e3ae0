/*
 * Groups by name, per-call timeouts, the group failure every member
 * learns of, and a resumed rank that fails at once: real 4-rank jobs
 * (tests/group_check.c, tests/fault_check.c) on shm and tcp;ofi_rxm.
 * Expected names, memberships, sums, hosts and bounds are computed here
 * from the job's shape, not asked of the library.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc.h"
#include "lib/rank.h"
#include "lib/srv.h"

#define TCP "tcp;ofi_rxm"

static void expect_line(const char *out, const char *line)
{
    cr_expect(strstr(out, line) != NULL, "missing \"%s\" in:\n%s", line, out);
}

/* The value after "R<r> <key> " on rank r's line, as a long (-1 if
 * missing); *rest points after it. */
static long value_of(const char *out, int r, const char *key,
                     const char **rest)
{
    char want[96];
    snprintf(want, sizeof(want), "R%d %s ", r, key);
    const char *p = strstr(out, want);
    if (!p)
        return -1;
    char *end;
    long v = strtol(p + strlen(want), &end, 10);
    if (rest)
        *rest = end;
    return v;
}

/* The rest of rank r's line that starts with "R<r> <key>". */
static void line_of(const char *out, int r, const char *key, char *buf,
                    size_t len)
{
    char want[96];
    snprintf(want, sizeof(want), "R%d %s", r, key);
    th_line_at(out, want, 0, buf, len);
}

static char *job(const char *env, int n, const char *args, int limit_s)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=30 %s %s/fccl-run -n %d "
             "%s/group_check %s", env, th_bin_dir(), n, th_testbin_dir(), args);
    int st = th_sh(cmd, limit_s, &out);
    cr_expect_eq(st, 0, "%s exited %d:\n%s", cmd, st, out);
    return out;
}

/* ---- named groups ---- */

/* 4 ranks on FCCL_FAKE_NODES=2 hosts: ranks 0, 1 on host 0, 2, 3 on 1.
 * prov_all, prov_evens: the providers each rank must report. */
static void check_named(const char *out, const char *prov_world,
                        const char *prov_evens)
{
    char line[256];
    for (int r = 0; r < 4; r++) {
        int host = r / 2, local = r % 2;
        static const char *refused[] = {"destroy-world", "check-reserved",
                                        "check-slash", "check-empty",
                                        "new-reserved", "new-duplicate"};
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
            snprintf(line, sizeof(line), "[%d] R%d %s refused\n", r, r,
                     refused[i]);
            expect_line(out, line);
        }
        snprintf(line, sizeof(line), "[%d] R%d none-is-world 1\n", r, r);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d check-good 0\n", r, r);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d find all 1 world 1 hashed 1 "
                 "evens 1 none 1\n", r, r);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d all name all size 4 rank %d\n",
                 r, r, r);
        expect_line(out, line);
        for (int k = 0; k < 2; k++) {
            const char *tag = k ? "all" : "world";
            snprintf(line, sizeof(line), "[%d] R%d %s prov %s\n", r, r, tag,
                     prov_world);
            expect_line(out, line);
            snprintf(line, sizeof(line), "[%d] R%d %s topo 2 %d %d 2\n", r, r,
                     tag, host, local);
            expect_line(out, line);
            snprintf(line, sizeof(line), "[%d] R%d %s sum ok\n", r, r, tag);
            expect_line(out, line);
        }
        if (r % 2 == 0) { /* evens: ranks 0 and 2, one on each host */
            snprintf(line, sizeof(line), "[%d] R%d evens name evens size 2 "
                     "rank %d\n", r, r, r / 2);
            expect_line(out, line);
            snprintf(line, sizeof(line), "[%d] R%d evens prov %s\n", r, r,
                     prov_evens);
            expect_line(out, line);
            snprintf(line, sizeof(line), "[%d] R%d evens topo 2 %d 0 1\n", r,
                     r, host);
            expect_line(out, line);
        } else {
            snprintf(line, sizeof(line), "R%d evens", r);
            cr_expect(strstr(out, line) == NULL, "rank %d is no even:\n%s", r,
                      out);
        }
        snprintf(line, sizeof(line), "[%d] R%d find-destroyed 1\n", r, r);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d again sum ok\n", r, r);
        expect_line(out, line);
        snprintf(line, sizeof(line), "[%d] R%d done 0\n", r, r);
        expect_line(out, line);
    }
}

Test(groups, named_shm, .timeout = 120)
{
    char *out = job("FCCL_PROVIDER=shm FCCL_FAKE_NODES=2", 4, "named", 90);
    check_named(out, "shm", "shm");
    free(out);
}

Test(groups, named_tcp, .timeout = 120)
{
    char *out = job("FCCL_PROVIDER='" TCP "' FCCL_FAKE_NODES=2", 4, "named",
                    90);
    check_named(out, TCP, TCP);
    free(out);
}

/* Auto providers: shm to the rank on my (fake) host, the network
 * provider to the other host's; the evens span both hosts, so the
 * network provider alone. */
Test(groups, named_auto_mixes_providers, .timeout = 120)
{
    char *out = job("env -u FCCL_PROVIDER -u FI_PROVIDER FCCL_FAKE_NODES=2", 4,
                    "named", 90);
    char line[256], net[64] = "";
    line_of(out, 2, "evens prov ", line, sizeof(line));
    sscanf(line + strlen("R2 evens prov "), "%63s", net);
    cr_assert(net[0] && strstr(net, "shm") == NULL && !strchr(net, ','),
              "evens must use one network provider: '%s'\n%s", line, out);
    char world[96];
    snprintf(world, sizeof(world), "shm,%s", net);
    check_named(out, world, net);
    free(out);
}

/* ---- per-call timeouts and the group's failure ---- */

#define PEER_S 2 /* FCCL_PEER_TIMEOUT of these jobs */

/* Rank `skip` never calls; the others' own timeout is `ms`.  Each rank's
 * failure (or, for skip, the moment it knew) must come within the timeout
 * plus the peer timeout (plus 1.5 s of scheduling on 2 loaded cores);
 * every rank's message names the rank that timed out and the operation;
 * a later call fails at once; a group made again works. */
static void check_failure(const char *out, int ms, int skip, const char *op,
                          const char *prefix)
{
    long bound = ms + PEER_S * 1000 + 1500;
    char want[160], line[1200];
    snprintf(want, sizeof(want), "timed out after %d ms in %s", ms, op);
    for (int r = 0; r < 4; r++) {
        char key[64];
        const char *rest = NULL;
        snprintf(key, sizeof(key), "%s%s", prefix,
                 r == skip ? "LEARNED after" : "FAILED");
        long t;
        if (r == skip) {
            t = value_of(out, r, key, &rest);
        } else {
            line_of(out, r, key, line, sizeof(line));
            const char *a = strstr(line, " after ");
            t = a ? atol(a + 7) : -1;
            rest = a;
            cr_expect(strstr(line, want) != NULL, "rank %d's failure must "
                      "say \"%s\": %s", r, want, line);
            cr_expect(strstr(line, "timed out after") ||
                          strstr(line, "peer failed"), "%s", line);
        }
        cr_expect(t >= 0 && t <= bound, "rank %d took %ld ms (bound %ld):\n%s",
                  r, t, bound, out);
        cr_expect(r == skip || t >= ms - 300, "rank %d failed after %ld ms, "
                  "before its %d ms timeout:\n%s", r, t, ms, out);
        long fr = rest && strstr(rest, "failed_rank ")
                      ? atol(strstr(rest, "failed_rank ") + 12) : -1;
        cr_expect(fr >= 0 && fr < 4 && fr != skip, "rank %d: failed_rank %ld "
                  "must name a rank that timed out:\n%s", r, fr, out);
        fprintf(stderr, "%s%s: rank %d %s after %ld ms (timeout %d ms, "
                "bound %ld ms), failed_rank %ld\n", prefix, op, r,
                r == skip ? "learned of it" : "failed", t, ms, bound, fr);
        snprintf(key, sizeof(key), "%sNEXT", prefix);
        line_of(out, r, key, line, sizeof(line));
        const char *in = strstr(line, " in ");
        cr_expect(in && atol(in + 4) < 200 && strstr(line, want),
                  "rank %d's next call must fail at once, naming it: %s", r,
                  line);
    }
}

/* A 4-rank group_check `kind MS SEQ` job on prov whose all_reduce must
 * fail on every rank (check_failure); its output, for more checks. */
static char *failing_job(const char *prov, const char *kind, int ms, int seq)
{
    char env[160], args[64];
    snprintf(env, sizeof(env), "FCCL_PROVIDER='%s' FCCL_PEER_TIMEOUT=%d",
             prov, PEER_S);
    snprintf(args, sizeof(args), "%s %d %d", kind, ms, seq);
    char *out = job(env, 4, args, 90);
    check_failure(out, ms, seq, "all_reduce seq 1 on fccl_4_", "");
    return out;
}

static void timeout_job(const char *prov)
{
    char *out = failing_job(prov, "timeout", 2000, 3);
    for (int r = 0; r < 4; r++) {
        char line[64];
        snprintf(line, sizeof(line), "[%d] R%d RECREATED ok\n", r, r);
        expect_line(out, line);
    }
    free(out);
}

Test(groups, next_timeout_fails_group_shm, .timeout = 120) { timeout_job("shm"); }
Test(groups, next_timeout_fails_group_tcp, .timeout = 120) { timeout_job(TCP); }

static void wait_job(const char *prov)
{
    const int skip = 2; /* the rank that never calls */
    char *out = failing_job(prov, "wait", 1500, skip);
    /* the call queued behind the failed one names the first failure too */
    for (int r = 0; r < 4; r++) {
        char line[1200];
        if (r == skip)
            continue;
        line_of(out, r, "SECOND", line, sizeof(line));
        cr_expect(strstr(line, "timed out after 1500 ms in all_reduce seq 1 "
                         "on fccl_4_"), "rank %d's queued call must name the "
                  "group's first failure: %s\n%s", r, line, out);
    }
    /* point to point: rank 0 gives up on rank 1, which learns of it */
    long bound = 1500 + PEER_S * 1000 + 1500;
    char line[1200];
    line_of(out, 0, "P2P R0 FAILED", line, sizeof(line));
    cr_expect(strstr(line, "timed out after 1500 ms in irecv on fccl_2_") &&
                  strstr(line, "failed_rank 0") && strstr(line, "rank 1"),
              "%s\n%s", line, out);
    long t = value_of(out, 1, "P2P R1 LEARNED after", NULL);
    cr_expect(t >= 0 && t <= bound, "rank 1 learned after %ld ms:\n%s", t,
              out);
    fprintf(stderr, "p2p wait: rank 1 learned of rank 0's timeout after %ld "
            "ms\n", t);
    for (int r = 0; r < 2; r++) {
        char key[32];
        snprintf(key, sizeof(key), "P2P NEXT");
        line_of(out, r, key, line, sizeof(line));
        cr_expect(strstr(line, "timed out after 1500 ms in irecv"), "%s",
                  line);
    }
    free(out);
}

Test(groups, wait_timeout_fails_group_shm, .timeout = 120) { wait_job("shm"); }
Test(groups, wait_timeout_fails_group_tcp, .timeout = 120) { wait_job(TCP); }

/* ---- a resumed rank fails at once ---- */

/* Ranks started by hand (no launcher: MASTER_ADDR, RANK, WORLD_SIZE, as
 * srun or mpirun would), one host.  Rank 1 is stopped until ranks 0 and 2
 * have declared it dead, failed and exited (no survivor is left to clean
 * up after it); resumed, it must fail within 1 s naming the rank that
 * declared it dead and why, and, killed then, leave no file in /dev/shm. */
static void resumed_job(const char *prov)
{
    struct srv srv;
    srv_start_local(&srv, NULL);
    char dir[64];
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-resume"), 0);
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "export FCCL_PROVIDER='%s' " TH_HAND_JOB_ENV
             "FCCL_JOB_ID=resumed; d=%s; T=%s; "
             "for r in 0 2; do RANK=$r FAULT_LINGER_MS=0 $T/fault_check loop "
             "60 > $d/r$r.log 2>&1 & eval p$r=$!; done; "
             "RANK=1 FAULT_LINGER_MS=20000 $T/fault_check loop 60 > $d/r1.log "
             "2>&1 & p1=$!; " TH_HAND_JOB_READY "kill -STOP $p1; "
             "wait $p0; a=$?; wait $p2; c=$?; "
             "t0=$(date +%%s%%3N); kill -CONT $p1; "
             "for i in $(seq 100); do grep -q '^R1 FAILED' $d/r1.log && break; "
             "sleep 0.1; done; sleep 0.3; kill -9 $p1; wait $p1; "
             "echo codes $a $c; cat $d/r0.log $d/r1.log $d/r2.log; "
             "at=$(sed -n 's/^R1 FAILED .* at \\([0-9]*\\):.*/\\1/p' $d/r1.log); "
             "echo resumed_ms $((${at:-999999999999999} - t0)); "
             "echo left $(ls /dev/shm | grep -c \"^$p1:\"); "
             "rm -f /dev/shm/$p1:*; rm -rf $d",
             prov, srv.port, dir, th_testbin_dir());
    th_sh(cmd, 100, &out);
    cr_expect(strstr(out, "codes 3 3") != NULL, "ranks 0 and 2 fail:\n%s", out);
    cr_expect(strstr(out, "rank 1 is dead") != NULL, "%s", out);
    char line[1200];
    line_of(out, 1, "FAILED", line, sizeof(line));
    cr_expect(strstr(line, "this rank (1) was declared dead by rank ") &&
                  strstr(line, "did not answer for"),
              "the resumed rank must say who declared it dead and why: "
              "%s\n%s", line, out);
    cr_expect(strstr(line, "after 0 ms") == NULL, "%s", line);
    const char *p = strstr(out, "resumed_ms ");
    long ms = p ? atol(p + 11) : -1;
    cr_expect(ms >= 0 && ms < 1000, "rank 1 failed %ld ms after resuming:\n%s",
              ms, out);
    fprintf(stderr, "resumed rank (%s): failed %ld ms after SIGCONT\n", prov,
            ms);
    cr_expect(strstr(out, "left 0") != NULL, "its /dev/shm files stay:\n%s",
              out);
    free(out);
    srv_finish(&srv);
}

Test(groups, resumed_rank_fails_at_once_shm, .timeout = 120) { resumed_job("shm"); }
Test(groups, resumed_rank_fails_at_once_tcp, .timeout = 120) { resumed_job(TCP); }
