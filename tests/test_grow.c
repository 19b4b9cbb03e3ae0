/*
 * Grow: a SIGKILLed rank respawned by `fccl-run --respawn 1` is taken back
 * in by the survivors' fccl_group_grow (tests/grow_check.c), on shm and
 * tcp;ofi_rxm: every member, the newcomer too, gets the same group, named
 * by sha1sum of the whole member list (computed here), the survivors keep
 * their ranks and the newcomer follows, and the checked all_reduce and
 * broadcast on it are right (each rank checks against sums it computes
 * alone).  A survivor SIGKILLed as the grow begins fails the others' grow
 * and the newcomer's fccl_init with FCCL_ERR_PEER naming a dead rank, not a
 * hang, and the survivors shrink again and go on.  Times are printed,
 * not asserted (bench/ft.sh measures them).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/ftlines.h"
#include "lib/proc.h"

#define TCP "tcp;ofi_rxm"
#define N 6

static int job(const char *prov, const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=30 FCCL_PEER_TIMEOUT=3 "
             "FCCL_PROVIDER='%s' %s/fccl-run --respawn 1 -n %d "
             "%s/grow_check %s", prov, th_bin_dir(), N, th_testbin_dir(),
             args);
    return th_sh(cmd, 120, out);
}

/* The grown group's member list: the survivors in order, then `victim`. */
static void grown_members(int victim, char *out, size_t len)
{
    size_t off = 0;
    for (int r = 0; r < N; r++)
        if (r != victim)
            off += (size_t)snprintf(out + off, len - off, "%s%d",
                                    off ? "," : "", r);
    snprintf(out + off, len - off, ",%d", victim);
}

static void respawn_job(const char *prov, int victim, int rounds)
{
    char *out = NULL, args[48], name[96], members[64], line[600], want[300];
    snprintf(args, sizeof(args), "respawn %d %d", victim, rounds);
    int st = job(prov, args, &out);
    cr_expect_eq(st, 0, "a respawned failure is not the job's: exit %d:\n%s",
                 st, out);
    cr_expect(strstr(out, "respawning it (1 of 1, FCCL_REJOIN=1)"), "%s",
              out);
    int all[N];
    for (int r = 0; r < N; r++)
        all[r] = r;
    th_group_name(all, N, name, sizeof(name));
    grown_members(victim, members, sizeof(members));
    long long last_call = 0, last_ret = 0;
    for (int r = 0; r < N; r++) {
        int grank = r == victim ? N - 1 : r - (r > victim);
        th_rank_line(out, r, "GROWN rank", line, sizeof(line));
        snprintf(want, sizeof(want), "GROWN rank %d size %d name %s members "
                 "[%s]", grank, N, name, members);
        cr_expect(strstr(line, want), "rank %d: want \"%s\" in \"%s\":\n%s",
                  r, want, line, out);
        th_rank_line(out, r, "GROWN ok", line, sizeof(line));
        cr_expect(line[0], "rank %d: the grown group's checks:\n%s", r, out);
        th_rank_line(out, r, "FINALIZE ", line, sizeof(line));
        cr_expect(line[0], "rank %d did not return from finalize", r);
        th_rank_line(out, r, r == victim ? "REJOIN " : "GROW call ", line,
                sizeof(line));
        cr_expect(strstr(line, "rc success"), "rank %d: \"%s\"\n%s", r, line,
                  out);
        if (r == victim)
            cr_expect(strstr(line, "rejoin 1 world 6"), "\"%s\"", line);
        long long c = th_num_after(line, "call "), t = th_num_after(line, "ret ");
        last_call = c > last_call ? c : last_call;
        last_ret = t > last_ret ? t : last_ret;
    }
    fprintf(stderr, "grow on %s (rank %d respawned): %.2f ms from the last "
            "call (grow or the newcomer's fccl_init) to the last return\n",
            prov, victim, (last_ret - last_call) / 1e3);
    th_expect_shm_clean(out);
    free(out);
}

Test(grow, respawn_shm, .timeout = 180) { respawn_job("shm", 3, 1); }
Test(grow, respawn_tcp, .timeout = 180) { respawn_job(TCP, 1, 1); }
Test(grow, respawn_first_rank_many_rounds_shm, .timeout = 180)
{
    TH_LONG_CASE("a second victim, 200 rounds on the grown group");
    respawn_job("shm", 0, 200);
}

/* Survivor `killer` dies as the grow begins: nobody hangs, the errors
 * name a dead rank, the other survivors shrink again and go on. */
static void grow_kill_job(const char *prov, int victim, int killer)
{
    char *out = NULL, args[48], line[900], name[96];
    snprintf(args, sizeof(args), "growkill %d %d", victim, killer);
    int st = job(prov, args, &out);
    cr_expect_eq(st, 1, "the newcomer's failed init is the job's failure "
                 "(exit 1), got %d:\n%s", st, out);
    char dead_k[32], dead_v[32];
    snprintf(dead_k, sizeof(dead_k), "rank %d ", killer);
    snprintf(dead_v, sizeof(dead_v), "rank %d ", victim);
    th_rank_line(out, victim, "REJOIN ", line, sizeof(line));
    cr_expect(strstr(line, "rc peer failed"), "newcomer: \"%s\"\n%s", line,
              out);
    th_rank_line(out, victim, "REJOINFAIL ", line, sizeof(line));
    cr_expect(strstr(line, dead_k), "the newcomer names rank %d: \"%s\"",
              killer, line);
    /* the survivors' grow: failed, naming the killed rank or the newcomer
     * (which exits once its own init failed) */
    int group[N], n = 0;
    for (int r = 0; r < N; r++)
        if (r != victim && r != killer)
            group[n++] = r;
    for (int i = 0; i < n; i++) {
        int r = group[i];
        th_rank_line(out, r, "GROW call ", line, sizeof(line));
        cr_expect(strstr(line, "rc peer failed"), "rank %d: \"%s\"\n%s", r,
                  line, out);
        th_rank_line(out, r, "GROWFAIL ", line, sizeof(line));
        cr_expect(strstr(line, dead_k) || strstr(line, dead_v),
                  "rank %d names no dead rank: \"%s\"", r, line);
        th_rank_line(out, r, "RESHRUNK ", line, sizeof(line));
        char want[400], lst[64] = "";
        size_t off = 0;
        for (int j = 0; j < n; j++)
            off += (size_t)snprintf(lst + off, sizeof(lst) - off, "%s%d",
                                    j ? "," : "", group[j]);
        th_group_name(group, n, name, sizeof(name));
        snprintf(want, sizeof(want), "RESHRUNK rank %d size %d name %s "
                 "members [%s]", i, n, name, lst);
        cr_expect(strstr(line, want), "rank %d: want \"%s\" in \"%s\"\n%s",
                  r, want, line, out);
    }
    th_expect_shm_clean(out);
    free(out);
}

/* Two deaths, each respawned and grown back in: rank `k1` dies, then
 * `k2` in the grown group (the same rank again when k1 == k2: its second
 * respawn).  The second grown group keeps the first's order without k2,
 * then k2; a process respawned by the first grow is a member of the
 * second. */
static void twice_job(const char *prov, int k1, int k2)
{
    char *out = NULL, cmd[1024], line[600], want[300], name[96], lst[64];
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=30 FCCL_PEER_TIMEOUT=3 "
             "FCCL_PROVIDER='%s' %s/fccl-run --respawn %d -n %d "
             "%s/grow_check twice %d %d", prov, th_bin_dir(),
             k1 == k2 ? 2 : 1, N, th_testbin_dir(), k1, k2);
    int st = th_sh(cmd, 120, &out);
    cr_expect_eq(st, 0, "exit %d:\n%s", st, out);
    int all[N], order[N], n = 0;
    for (int r = 0; r < N; r++)
        all[r] = r;
    th_group_name(all, N, name, sizeof(name));
    for (int r = 0; r < N; r++) /* the first grow's order, without k2 */
        if (r != k1 && r != k2)
            order[n++] = r;
    if (k1 != k2)
        order[n++] = k1;
    order[n++] = k2;
    size_t off = 0;
    for (int i = 0; i < N; i++)
        off += (size_t)snprintf(lst + off, sizeof(lst) - off, "%s%d",
                                i ? "," : "", order[i]);
    for (int i = 0; i < N; i++) {
        int r = order[i];
        th_rank_line(out, r, "GROWN2 ", line, sizeof(line));
        snprintf(want, sizeof(want), "GROWN2 rank %d size %d name %s "
                 "members [%s]", i, N, name, lst);
        cr_expect(strstr(line, want), "rank %d: want \"%s\" in \"%s\"\n%s",
                  r, want, line, out);
        th_rank_line(out, r, "FINALIZE ", line, sizeof(line));
        cr_expect(line[0], "rank %d did not finalize:\n%s", r, out);
    }
    cr_expect(!strstr(out, "WRONG"), "%s", out);
    th_expect_shm_clean(out);
    free(out);
}

Test(grow, twice_shm, .timeout = 180) { twice_job("shm", 1, 3); }
Test(grow, same_rank_twice_shm, .timeout = 180) { twice_job("shm", 2, 2); }
Test(grow, twice_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    twice_job(TCP, 4, 0);
}

/* Ranks 1 and 4 die together; the survivors grow by two.  Every rank
 * has the same member list: the survivors in order, then 1 and 4 in the
 * order they reached the store (either), and its rank is its place. */
static void pair_job(const char *prov)
{
    char *out = NULL, cmd[1024], line[600], first[200] = "", name[96];
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=30 FCCL_PEER_TIMEOUT=3 "
             "FCCL_PROVIDER='%s' %s/fccl-run --respawn 1 -n %d "
             "%s/grow_check pair 1 4", prov, th_bin_dir(), N,
             th_testbin_dir());
    int st = th_sh(cmd, 120, &out);
    cr_expect_eq(st, 0, "exit %d:\n%s", st, out);
    int all[N];
    for (int r = 0; r < N; r++)
        all[r] = r;
    th_group_name(all, N, name, sizeof(name));
    for (int r = 0; r < N; r++) {
        th_rank_line(out, r, "GROWN rank", line, sizeof(line));
        const char *m = strstr(line, "members [");
        cr_assert(m && strstr(line, name), "rank %d: \"%s\"\n%s", r, line,
                  out);
        if (!first[0])
            snprintf(first, sizeof(first), "%s", m);
        cr_expect_str_eq(m, first, "rank %d's member list differs", r);
        int a = -1, b = -1, order[N];
        cr_assert_eq(sscanf(m, "members [0,2,3,5,%d,%d]", &a, &b), 2, "%s", m);
        cr_expect((a == 1 && b == 4) || (a == 4 && b == 1), "%s", m);
        int base[N] = {0, 2, 3, 5, a, b};
        memcpy(order, base, sizeof(order));
        int place = -1;
        for (int i = 0; i < N; i++)
            if (order[i] == r)
                place = i;
        cr_expect_eq(th_num_after(line, "GROWN rank "), place, "rank %d: \"%s\"",
                     r, line);
        th_rank_line(out, r, "GROWN ok", line, sizeof(line));
        cr_expect(line[0], "rank %d: the grown group's checks:\n%s", r, out);
    }
    th_expect_shm_clean(out);
    free(out);
}

Test(grow, two_newcomers_shm, .timeout = 180) { pair_job("shm"); }
Test(grow, two_newcomers_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    pair_job(TCP);
}

/* The survivors grow but nobody was respawned (--no-kill): their grow
 * fails after the group's timeout (3 s here) naming the newcomer that
 * never came, and they shrink again and go on. */
Test(grow, newcomer_never_comes, .timeout = 180)
{
    char *out = NULL, cmd[1024], line[900];
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=3 FCCL_PEER_TIMEOUT=3 "
             "FCCL_PROVIDER=shm %s/fccl-run --no-kill -n 4 %s/grow_check "
             "lonely 2", th_bin_dir(), th_testbin_dir());
    int st = th_sh(cmd, 120, &out);
    cr_expect_eq(st, 137, "exit %d:\n%s", st, out);
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            continue;
        th_rank_line(out, r, "GROW call ", line, sizeof(line));
        long long ms = (th_num_after(line, "ret ") - th_num_after(line, "call "))
                       / 1000;
        cr_expect(strstr(line, "rc timed out") && ms >= 2900 && ms < 20000,
                  "rank %d: a timeout after ~3 s: \"%s\" (%lld ms)\n%s", r,
                  line, ms, out);
        th_rank_line(out, r, "GROWFAIL ", line, sizeof(line));
        cr_expect(strstr(line, "newcomer 1 of 1 (number 1) did not come"),
                  "rank %d: \"%s\"", r, line);
        th_rank_line(out, r, "RESHRUNK ", line, sizeof(line));
        cr_expect(strstr(line, "size 3"), "rank %d: \"%s\"\n%s", r, line,
                  out);
    }
    free(out);
}

/* A respawned rank nobody grows for: its fccl_init fails after its
 * timeout (3 s) saying so, and the job ends. */
Test(grow, rejoin_without_grow, .timeout = 180)
{
    char *out = NULL, cmd[1024], line[900];
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=3 FCCL_PEER_TIMEOUT=3 "
             "FCCL_PROVIDER=shm %s/fccl-run --respawn 1 -n 4 %s/grow_check "
             "nogrow 1", th_bin_dir(), th_testbin_dir());
    int st = th_sh(cmd, 120, &out);
    cr_expect_eq(st, 1, "the respawn's failed init: exit %d:\n%s", st, out);
    th_rank_line(out, 1, "REJOIN ", line, sizeof(line));
    long long ms = (th_num_after(line, "ret ") - th_num_after(line, "call ")) / 1000;
    cr_expect(strstr(line, "rc timed out") && ms >= 2900 && ms < 20000,
              "\"%s\" (%lld ms)\n%s", line, ms, out);
    th_rank_line(out, 1, "REJOINFAIL ", line, sizeof(line));
    cr_expect(strstr(line, "was not taken in") &&
                  strstr(line, "no member called fccl_group_grow"),
              "\"%s\"", line);
    for (int r = 0; r < 4; r++) {
        th_rank_line(out, r, "NOGROW done", line, sizeof(line));
        cr_expect(r == 1 || line[0], "rank %d:\n%s", r, out);
    }
    th_expect_shm_clean(out);
    free(out);
}

Test(grow, kill_during_grow_shm, .timeout = 180) { grow_kill_job("shm", 1, 4); }
Test(grow, kill_during_grow_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    grow_kill_job(TCP, 2, 0);
}
