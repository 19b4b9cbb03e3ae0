/*
 * Fault tolerance: revoke, failed ranks and shrink in real 6-rank jobs
 * under `fccl-run --no-kill` (tests/ft_check.c), on shm and tcp;ofi_rxm.
 * A rank SIGKILLed after a barrier: the survivors agree on it, shrink,
 * and the new group's all_reduce and broadcast are right; a live rank
 * excluded by the others exits without a call; a revoke releases a
 * receive nobody sends and a barrier; the revoked group shrinks; a
 * second rank killed inside the shrink (shrunk again until right); the
 * kill and shrink again with the store outside fccl-run, a
 * tcpstore-server and an etcd member the test starts.  The
 * expected names (sha1sum of the member list), sums and member sets are
 * computed here or by each rank alone, not asked of the library.  Times
 * are printed, not asserted (bench/ft.sh measures them), except the 1 s
 * a revoke has to reach every member.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/etcd.h"
#include "lib/ftlines.h"
#include "lib/proc.h"
#include "lib/srv.h"

#define TCP "tcp;ofi_rxm"
#define N 6

/* Run the job on the store at `store` (NULL: one fccl-run starts);
 * returns fccl-run's exit status, *out its output. */
static int job_on(const char *store, const char *prov, const char *peer_s,
                  const char *args, char **out)
{
    char cmd[1536];
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=30 FCCL_PEER_TIMEOUT=%s "
             "FCCL_PROVIDER='%s' %s/fccl-run --no-kill -n %d %s%s%s "
             "%s/ft_check %s", peer_s, prov, th_bin_dir(), N,
             store ? "--store '" : "", store ? store : "", store ? "'" : "",
             th_testbin_dir(), args);
    return th_sh(cmd, 120, out);
}

static int job(const char *prov, const char *peer_s, const char *args,
               char **out)
{
    return job_on(NULL, prov, peer_s, args, out);
}

/* No /dev/shm file of any rank is left, and every rank printed its pid. */
static void expect_shm_clean(const char *out)
{
    cr_assert(th_expect_shm_clean(out) >= N, "not every rank printed its "
              "pid:\n%s", out);
}

/* fccl_<n>_<sha1 of "a_b_c">, computed by sha1sum, of 0..N-1 without
 * `gone` and `gone2` (-1: none). */
static void expected_name(int gone, int gone2, char *name, size_t len)
{
    int ranks[N], n = 0;
    for (int r = 0; r < N; r++)
        if (r != gone && r != gone2)
            ranks[n++] = r;
    th_group_name(ranks, n, name, len);
}

/* Every rank but `gone` and `gone2` (-1: none) shrank to the same group
 * of the others, agreed on `failed` ("[3]", "[3,4]" or "[]"), ran the
 * checked collectives on it, and finalize returned.  Prints the shrink
 * time: from the last call to the last return. */
static void expect_shrunk(const char *out, int gone, int gone2,
                          const char *failed, const char *what)
{
    char name[96], line[600], want[160];
    expected_name(gone, gone2, name, sizeof(name));
    long long last_call = 0, last_ret = 0;
    int size = N - (gone >= 0) - (gone2 >= 0);
    for (int r = 0; r < N; r++) {
        if (r == gone || r == gone2)
            continue;
        th_rank_line(out, r, "SHRINK ", line, sizeof(line));
        snprintf(want, sizeof(want), "rc success size %d name %s", size,
                 name);
        cr_expect(strstr(line, want), "rank %d: want \"%s\" in \"%s\":\n%s",
                  r, want, line, out);
        long long c = th_num_after(line, "call "), t = th_num_after(line, "ret ");
        last_call = c > last_call ? c : last_call;
        last_ret = t > last_ret ? t : last_ret;
        th_rank_line(out, r, "AGREED ", line, sizeof(line));
        snprintf(want, sizeof(want), "AGREED %d %s", N - size, failed);
        cr_expect(strstr(line, want), "rank %d: want \"%s\", got \"%s\"", r,
                  want, line);
        th_rank_line(out, r, "NEWGROUP ok rank ", line, sizeof(line));
        cr_expect(th_num_after(line, "rank ") ==
                      r - (gone >= 0 && r > gone) - (gone2 >= 0 && r > gone2),
                  "rank %d: the survivors keep their order: \"%s\"\n%s", r,
                  line, out);
        th_rank_line(out, r, "FINALIZE ", line, sizeof(line));
        cr_expect(line[0], "rank %d did not return from finalize:\n%s", r,
                  out);
    }
    fprintf(stderr, "%s: shrink took %.2f ms from the last survivor's call "
            "to the last return\n", what, (last_ret - last_call) / 1e3);
}

static void kill_job_on(const char *store, const char *store_what,
                        const char *prov, int victim)
{
    char *out = NULL, args[32];
    snprintf(args, sizeof(args), "kill %d", victim);
    int st = job_on(store, prov, "3", args, &out);
    cr_expect_eq(st, 137, "fccl-run must exit with the killed rank's status "
                 "(137), got %d:\n%s", st, out);
    char failed[16], what[128];
    snprintf(failed, sizeof(failed), "[%d]", victim);
    snprintf(what, sizeof(what), "kill %d on %s, %s", victim, prov,
             store_what);
    expect_shrunk(out, victim, -1, failed, what);
    expect_shm_clean(out);
    free(out);
}

static void kill_job(const char *prov, int victim)
{
    kill_job_on(NULL, "fccl-run's store", prov, victim);
}

Test(ft, kill_shrink_shm, .timeout = 180) { kill_job("shm", 3); }
Test(ft, kill_shrink_tcp, .timeout = 180) { kill_job(TCP, 0); }

/* A second rank dies as the others begin to shrink (it saw the first
 * failure, then SIGKILLs itself): the agreement leaves out both; the
 * survivors then wait past the heartbeat timeout on the new group (its
 * ring must have closed over the dead) and run one more all_reduce. */
static void kill_two_job(const char *prov)
{
    char *out = NULL, cmd[1024];
    snprintf(cmd, sizeof(cmd), "FT_LINGER_MS=4500 FCCL_TIMEOUT=30 "
             "FCCL_PEER_TIMEOUT=2 FCCL_PROVIDER='%s' %s/fccl-run --no-kill "
             "-n %d %s/ft_check kill 3 4", prov, th_bin_dir(), N,
             th_testbin_dir());
    int st = th_sh(cmd, 120, &out);
    cr_expect_eq(st, 137, "exit %d:\n%s", st, out);
    expect_shrunk(out, 3, 4, "[3,4]", "two killed");
    expect_shm_clean(out);
    free(out);
}

Test(ft, kill_two_shrink_shm, .timeout = 180) { kill_two_job("shm"); }
Test(ft, kill_two_shrink_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider, 5 s of waiting");
    kill_two_job(TCP);
}

/* A second rank dies inside the shrink, FT_IN_SHRINK_MS after its call
 * (before or after it posted): the survivors shrink again while the new
 * group fails, and end in the group of the other four, the same on each. */
static void kill_in_shrink_job(const char *prov, int v1, int v2, int ms)
{
    char *out = NULL, cmd[1024], line[600], want[160], name[96];
    snprintf(cmd, sizeof(cmd), "FT_IN_SHRINK_MS=%d FCCL_TIMEOUT=30 "
             "FCCL_PEER_TIMEOUT=2 FCCL_PROVIDER='%s' %s/fccl-run --no-kill "
             "-n %d %s/ft_check kill %d %d", ms, prov, th_bin_dir(), N,
             th_testbin_dir(), v1, v2);
    int st = th_sh(cmd, 120, &out);
    cr_expect_eq(st, 137, "exit %d:\n%s", st, out);
    expected_name(v1, v2, name, sizeof(name));
    for (int r = 0; r < N; r++) {
        if (r == v1 || r == v2)
            continue;
        th_rank_line(out, r, "FINAL ", line, sizeof(line));
        snprintf(want, sizeof(want), "FINAL size %d name %s rank %d", N - 2,
                 name, r - (r > v1) - (r > v2));
        cr_expect(strstr(line, want), "rank %d: want \"%s\", got \"%s\":\n%s",
                  r, want, line, out);
        th_rank_line(out, r, "GONE ", line, sizeof(line));
        snprintf(want, sizeof(want), "GONE [%d,%d]", v1 < v2 ? v1 : v2,
                 v1 < v2 ? v2 : v1);
        cr_expect(strstr(line, want), "rank %d: want \"%s\", got \"%s\"", r,
                  want, line);
        th_rank_line(out, r, "FINALIZE ", line, sizeof(line));
        cr_expect(line[0], "rank %d did not return from finalize:\n%s", r,
                  out);
    }
    expect_shm_clean(out);
    free(out);
}

Test(ft, kill_in_shrink_shm, .timeout = 180)
{
    kill_in_shrink_job("shm", 2, 5, 3);
}
Test(ft, kill_in_shrink_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    kill_in_shrink_job(TCP, 1, 4, 3);
}

static void exclude_job(const char *prov, int out_rank)
{
    char *out = NULL, args[32], what[64];
    snprintf(args, sizeof(args), "exclude %d", out_rank);
    int st = job(prov, "3", args, &out);
    cr_expect_eq(st, 0, "exit %d:\n%s", st, out);
    snprintf(what, sizeof(what), "exclude %d on %s", out_rank, prov);
    /* the excluded rank exited: it is also a failure the others know of */
    char failed[16];
    snprintf(failed, sizeof(failed), "[%d]", out_rank);
    expect_shrunk(out, out_rank, -1, failed, what);
    expect_shm_clean(out);
    free(out);
}

Test(ft, exclude_live_rank_shm, .timeout = 180) { exclude_job("shm", 2); }
Test(ft, exclude_live_rank_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    exclude_job(TCP, 5);
}

/* Heartbeats off (FCCL_PEER_TIMEOUT=0): the revoke must still arrive. */
static void revoke_job(const char *prov)
{
    char *out = NULL, line[600];
    int st = job(prov, "0", "revoke", &out);
    cr_expect_eq(st, 0, "exit %d:\n%s", st, out);
    th_rank_line(out, 0, "REVOKED at ", line, sizeof(line));
    long long t0 = th_num_after(line, "at ");
    cr_assert(t0 > 0 && strstr(line, "rc 0"), "%s", out);
    for (int r = 1; r < N; r++) {
        th_rank_line(out, r, "RELEASED ", line, sizeof(line));
        cr_expect(strstr(line, r == 1 ? "RELEASED recv" : "RELEASED barrier")
                      && strstr(line, "status group revoked") &&
                      strstr(line, "revoked by rank 0 (world 0)"),
                  "rank %d: \"%s\"\n%s", r, line, out);
        long long dt = th_num_after(line, "at ") - t0;
        cr_expect(dt >= 0 && dt < 1000000, "rank %d released %lld us after "
                  "the revoke (bound 1 s)", r, dt);
        fprintf(stderr, "revoke on %s: rank %d released after %.2f ms\n",
                prov, r, dt / 1e3);
    }
    for (int r = 0; r < N; r++) {
        th_rank_line(out, r, "NEXT ", line, sizeof(line));
        cr_expect(strstr(line, "NEXT group revoked") &&
                      strstr(line, "revoked by"),
                  "rank %d's next call: \"%s\"", r, line);
    }
    expect_shrunk(out, -1, -1, "[]", "shrink of a revoked group");
    expect_shm_clean(out);
    free(out);
}

Test(ft, revoke_recv_barrier_shm, .timeout = 180) { revoke_job("shm"); }
Test(ft, revoke_recv_barrier_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    revoke_job(TCP);
}

/* The store outside fccl-run: a tcpstore-server this test started, which
 * must still serve (and stop cleanly) after the job; the agreement's keys
 * are on it. */
static void server_store_job(const char *prov, int victim)
{
    struct srv s = {0};
    srv_start_local(&s, NULL);
    kill_job_on(s.addr, "tcpstore-server store", prov, victim);
    char *keys = NULL, cmd[512];
    snprintf(cmd, sizeof(cmd), "%s/tcpstore --timeout 5 --addr %s keys \"\"",
             th_bin_dir(), s.addr);
    cr_expect_eq(th_sh(cmd, 30, &keys), 0, "%s", keys);
    cr_expect(strstr(keys, "ft/") && strstr(keys, "/dec"),
              "no decision key on the server: %s",
              keys);
    free(keys);
    srv_finish(&s);
}

Test(ft, kill_shrink_server_store_shm, .timeout = 180)
{
    server_store_job("shm", 1);
}
Test(ft, kill_shrink_server_store_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    server_store_job(TCP, 4);
}

/* etcd's revision: one more per write it committed (-1: no answer). */
static long long etcd_revision(const struct etcd_cluster *cl)
{
    char *out = NULL;
    long long rev = -1;
    if (etcd_cluster_ctl(cl, "endpoint status -w json", &out) == 0)
        rev = th_num_after(out, "\"revision\":");
    free(out);
    return rev;
}

/* An etcd store (each write a raft commit): the same job and checks.
 * fccl-run ties the job's keys to its lease, so they are gone after it;
 * the revision shows the job wrote there.  etcd_cluster_stop removes its
 * data. */
static void etcd_store_job(const char *prov, int victim)
{
    struct etcd_cluster cl;
    cr_assert_eq(etcd_cluster_start(&cl, 1, NULL), 0, "etcd did not start");
    char addr[400];
    snprintf(addr, sizeof(addr), "%s/ft", cl.addr);
    long long rev0 = etcd_revision(&cl);
    kill_job_on(addr, "etcd store", prov, victim);
    long long rev1 = etcd_revision(&cl);
    /* at least the init keys and one shrink entry per survivor */
    cr_expect(rev0 >= 0 && rev1 >= rev0 + 2 * N, "etcd revision %lld before "
              "the job, %lld after", rev0, rev1);
    etcd_cluster_stop(&cl);
}

Test(ft, kill_shrink_etcd_store_shm, .timeout = 180)
{
    etcd_store_job("shm", 2);
}
Test(ft, kill_shrink_etcd_store_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    etcd_store_job(TCP, 5);
}
