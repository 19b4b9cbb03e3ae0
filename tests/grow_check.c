/*
 * grow_check: one rank of a grow job (tests/test_grow.c), started by
 * `fccl-run --respawn 1`.  Modes (argv[1]):
 *   respawn K      after a barrier rank K SIGKILLs itself; the others run
 *                  a checked all_reduce until one fails, shrink the world
 *                  (exclude NULL), check the shrunk group, then
 *                  fccl_group_grow(shrunk, 1) takes in the respawned K
 *                  (its fccl_init, with FCCL_REJOIN, returns the same
 *                  group); everyone checks an all_reduce and a broadcast
 *                  on the grown group, then all_reduces ROUNDS times
 *                  (argv[3], default 1) and finalizes.
 *   lonely K       as respawn K under --no-kill (no respawn): the grow
 *                  fails after the group's timeout naming the newcomer
 *                  that never came; the survivors shrink again and go on.
 *   nogrow K       as respawn K, but the survivors only shrink and finish:
 *                  the respawned K's fccl_init fails after its timeout,
 *                  saying no grow took it in.
 *   pair K K2      K and K2 both die after the barrier; the survivors
 *                  shrink without both and grow by two (the newcomers in
 *                  the order they reached the store).
 *   twice K K2     as respawn K; then rank K2 (K2 may be K: launch with
 *                  --respawn 2) dies in the grown group, the others
 *                  shrink it and grow again: "GROWN2 ..." lines.
 *   growkill K V   as respawn K, but survivor V SIGKILLs itself just
 *                  before the grow (its respawn leaves at once): the
 *                  others' grow and the newcomer's init must fail naming
 *                  V, not hang; the survivors then shrink their group
 *                  again (without V) and check it.
 * Lines: "R<world rank> <WHAT> ...", times in wall-clock microseconds.
 * Results are checked against values each rank computes alone; a wrong
 * one exits 4.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fccl/fccl.h"
#include "lib/proc.h"

static int me;
static int second = -1; /* twice: the rank that dies in the grown group */
static int pair2 = -1;  /* pair: the other rank that dies with the victim */

static long long epoch_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void die_wrong(const char *what, long long got, long long want)
{
    printf("R%d WRONG %s: got %lld, want %lld\n", me, what, got, want);
    exit(4);
}

/* all_reduce(SUM) of (world rank + 1) * (i + k + 1); the expected sum
 * from the member list. */
static int checked_all_reduce(fccl_group_t *g, int i)
{
    int n = fccl_group_size(g), members[64];
    long long sum = 0;
    if (n > 64 || fccl_group_members(g, members, 64) < 0)
        return FCCL_ERR_INVALID;
    for (int r = 0; r < n; r++)
        sum += members[r] + 1;
    int64_t in[7], out[7];
    for (int k = 0; k < 7; k++)
        in[k] = (int64_t)(me + 1) * (i + k + 1);
    int rc = fccl_all_reduce(in, out, 7, FCCL_INT64, FCCL_SUM, g, NULL);
    for (int k = 0; rc == 0 && k < 7; k++)
        if (out[k] != sum * (i + k + 1))
            die_wrong("all_reduce", out[k], sum * (i + k + 1));
    return rc;
}

/* broadcast from the group's last rank (a newcomer after a grow). */
static int checked_broadcast(fccl_group_t *g)
{
    int root = fccl_group_size(g) - 1, wroot = -1;
    fccl_group_to_world(g, root, &wroot);
    int32_t buf[11];
    for (int k = 0; k < 11; k++)
        buf[k] = fccl_group_rank(g) == root ? me * 13 + k : -1;
    int rc = fccl_broadcast(buf, 11, FCCL_INT32, root, g, NULL);
    for (int k = 0; rc == 0 && k < 11; k++)
        if (buf[k] != wroot * 13 + k)
            die_wrong("broadcast", buf[k], wroot * 13 + k);
    return rc;
}

static void print_members(const char *what, fccl_group_t *g)
{
    int m[64], n = fccl_group_size(g);
    char list[400] = "";
    size_t off = 0;
    if (n > 64 || fccl_group_members(g, m, 64) < 0)
        n = 0;
    for (int i = 0; i < n && off < sizeof(list) - 12; i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d",
                                i ? "," : "", m[i]);
    printf("R%d %s rank %d size %d name %s members [%s]\n", me, what,
           fccl_group_rank(g), n, fccl_group_name(g), list);
}

static int use_grown(fccl_group_t *g, int rounds);

/* twice: rank `second` dies in the grown group g; the others shrink it
 * and grow its respawn back in. */
static int again(fccl_group_t *g, int rounds)
{
    if (fccl_barrier(g, NULL) < 0)
        return 1;
    if (me == second) {
        printf("R%d dying again\n", me);
        fflush(stdout);
        raise(SIGKILL);
    }
    fccl_group_t *s = NULL, *g2 = NULL;
    int rc = 0;
    for (int i = 0; i < 100000 && rc == 0; i++)
        rc = checked_all_reduce(g, 1000 + i);
    rc = fccl_group_shrink(g, NULL, 0, &s);
    if (rc >= 0)
        rc = fccl_group_grow(s, 1, &g2);
    if (rc < 0) {
        printf("R%d GROW2FAIL %s: %s\n", me, fccl_strerror(rc),
               fccl_last_error());
        return 1;
    }
    second = -1;
    print_members("GROWN2", g2);
    return use_grown(g2, rounds);
}

/* The grown group's checks, the rounds, finalize. */
static int use_grown(fccl_group_t *g, int rounds)
{
    int rc = checked_all_reduce(g, 5);
    if (rc >= 0)
        rc = checked_broadcast(g);
    for (int i = 0; rc >= 0 && i < rounds; i++)
        rc = checked_all_reduce(g, 100 + i);
    if (rc < 0) {
        printf("R%d GROWN FAILED %s: %s\n", me, fccl_strerror(rc),
               fccl_last_error());
        return 1;
    }
    printf("R%d GROWN ok\n", me);
    if (second >= 0)
        return again(g, rounds);
    long long f0 = epoch_us();
    fccl_finalize();
    printf("R%d FINALIZE %lld us\n", me, epoch_us() - f0);
    return 0;
}

/* The survivors: fail, shrink, check; *out the shrunk group. */
static int survive(fccl_group_t *w, fccl_group_t **out)
{
    int rc = 0;
    for (int i = 0; i < 100000 && rc == 0; i++)
        rc = checked_all_reduce(w, i);
    printf("R%d FAILED %s\n", me, fccl_strerror(rc));
    rc = fccl_group_shrink(w, NULL, 0, out);
    if (rc >= 0)
        rc = checked_all_reduce(*out, 3);
    if (rc < 0) {
        printf("R%d SHRINKFAIL %s: %s\n", me, fccl_strerror(rc),
               fccl_last_error());
        return 1;
    }
    print_members("SHRUNK", *out);
    return 0;
}

static int grow_mode(fccl_group_t *w, int victim, int killer, int rounds,
                     int no_grow)
{
    if (fccl_barrier(w, NULL) < 0)
        return 1;
    if (me == victim || me == pair2) {
        printf("R%d dying\n", me);
        fflush(stdout);
        raise(SIGKILL);
    }
    fccl_group_t *g = NULL, *g2 = NULL;
    if (survive(w, &g))
        return 1;
    if (me == killer) {
        printf("R%d dying during the grow\n", me);
        fflush(stdout);
        raise(SIGKILL);
    }
    if (no_grow) {
        printf("R%d NOGROW done\n", me);
        fccl_finalize();
        return 0;
    }
    long long t0 = epoch_us();
    int rc = fccl_group_grow(g, pair2 >= 0 ? 2 : 1, &g2);
    long long t1 = epoch_us();
    printf("R%d GROW call %lld ret %lld rc %s\n", me, t0, t1,
           fccl_strerror(rc));
    if (rc < 0) {
        printf("R%d GROWFAIL %s\n", me, fccl_last_error());
        fccl_group_t *g3 = NULL;
        rc = fccl_group_shrink(g, NULL, 0, &g3);
        if (rc >= 0)
            rc = checked_all_reduce(g3, 9);
        printf("R%d AFTER %s\n", me, fccl_strerror(rc));
        if (rc >= 0)
            print_members("RESHRUNK", g3);
        fccl_finalize();
        return rc < 0;
    }
    print_members("GROWN", g2);
    return use_grown(g2, rounds);
}

/* A respawned rank: fccl_init takes it in through the others' grow. */
static int rejoin(int killer, int rounds, int first)
{
    if (me == killer) { /* the rank killed during the grow: stays out */
        printf("R%d respawned victim leaves\n", me);
        return 0;
    }
    long long t0 = epoch_us();
    fccl_group_t *g = NULL;
    int rc = fccl_init(NULL, &g);
    printf("R%d REJOIN call %lld ret %lld rc %s rejoin %s world %d\n", me,
           t0, epoch_us(), fccl_strerror(rc), getenv("FCCL_REJOIN"),
           fccl_get_world_size());
    if (rc < 0) {
        printf("R%d REJOINFAIL %s\n", me, fccl_last_error());
        return 1;
    }
    printf("R%d pid %d\n", me, (int)getpid());
    /* twice: the second death's respawn joins the second grow */
    if (me == second && (first != second || atoi(getenv("FCCL_REJOIN")) > 1)) {
        second = -1;
        print_members("GROWN2", g);
    } else {
        print_members("GROWN", g);
    }
    return use_grown(g, rounds);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int growkill = argc > 3 && strcmp(argv[1], "growkill") == 0;
    int no_grow = argc > 2 && strcmp(argv[1], "nogrow") == 0;
    int twice = argc > 3 && strcmp(argv[1], "twice") == 0;
    int pair = argc > 3 && strcmp(argv[1], "pair") == 0;
    if (pair)
        pair2 = atoi(argv[3]);
    if (argc < 3 || (!growkill && !no_grow && !twice && !pair &&
                     strcmp(argv[1], "respawn") && strcmp(argv[1], "lonely"))) {
        fprintf(stderr, "usage: grow_check respawn K [ROUNDS] | lonely K | "
                "nogrow K | pair K K2 | twice K K2 | growkill K V\n");
        return 2;
    }
    if (twice)
        second = atoi(argv[3]);
    int victim = atoi(argv[2]), killer = growkill ? atoi(argv[3]) : -1;
    int rounds = !growkill && !twice && !pair && argc > 3 ? atoi(argv[3]) : 1;
    const char *rj = getenv("FCCL_REJOIN");
    me = atoi(getenv("RANK") ? getenv("RANK") : "-1");
    if (rj && *rj && strcmp(rj, "0") != 0)
        return rejoin(killer, rounds, victim);
    fccl_group_t *w;
    int rc = fccl_init(NULL, &w);
    if (rc < 0) {
        fprintf(stderr, "grow_check: init: %s (%s)\n", fccl_strerror(rc),
                fccl_last_error());
        return 1;
    }
    me = fccl_get_rank();
    printf("R%d pid %d\n", me, (int)getpid());
    return grow_mode(w, victim, killer, rounds, no_grow);
}
