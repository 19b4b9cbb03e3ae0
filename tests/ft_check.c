/*
 * ft_check: one rank of a fault-tolerance job (tests/test_ft.c), started
 * by `fccl-run --no-kill`.  Modes (argv[1]):
 *   kill K [K2] after a barrier rank K SIGKILLs itself; the others run a
 *               checked all_reduce until one fails, then
 *               fccl_group_shrink(world, NULL, 0), print the failed set
 *               and the times around the shrink, run a checked all_reduce
 *               and broadcast on the new group, and finalize (timed).
 *               Rank K2 SIGKILLs itself too, once it has seen the first
 *               failure, as the others begin to shrink.  FT_LINGER_MS:
 *               the survivors wait that long on the new group (the
 *               heartbeat ring must have closed over the dead) and run
 *               one more checked all_reduce.
 *               FT_IN_SHRINK_MS: rank K2 instead calls the shrink with the
 *               others and SIGKILLs itself (a timer thread) that many ms
 *               after the call, in the middle of the agreement or just
 *               after it; the survivors shrink again while the new group
 *               fails (at most 3 rounds), then print "FINAL size <n> name
 *               <name> rank <r>" and "GONE [<world ranks left out>]".
 *   exclude K   rank K exits after the first barrier, calling nothing
 *               more; the others shrink the world with K in the exclude
 *               list and check the new group the same way.
 *   revoke      rank 0 revokes the world 500 ms after a barrier while rank
 *               1 waits in a receive from rank 2 that nobody sends and the
 *               others wait in a barrier; each prints its status, how long
 *               after the revoke it was released and its message; a later
 *               call must fail at once; then all shrink the revoked world
 *               (exclude NULL: nobody failed) and check the new group.
 * Lines: "R<rank> <WHAT> ..."; times are wall-clock microseconds (the
 * harness compares them between processes).  Results are checked against
 * values every rank computes alone; a wrong one exits 4.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fccl/fccl.h"
#include "lib/proc.h"

static long long epoch_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int me;

static void die_wrong(const char *what, long long got, long long want)
{
    printf("R%d WRONG %s: got %lld, want %lld\n", me, what, got, want);
    exit(4);
}

/* all_reduce(SUM) of (world rank + 1) * (i + k + 1) over the members. */
static int checked_all_reduce(fccl_group_t *g, int i)
{
    int n = fccl_group_size(g), members[64], sum = 0;
    if (n > 64 || fccl_group_members(g, members, 64) < 0)
        return FCCL_ERR_INVALID;
    for (int r = 0; r < n; r++)
        sum += members[r] + 1;
    int64_t in[5], out[5];
    for (int k = 0; k < 5; k++)
        in[k] = (int64_t)(me + 1) * (i + k + 1);
    int rc = fccl_all_reduce(in, out, 5, FCCL_INT64, FCCL_SUM, g, NULL);
    for (int k = 0; rc == 0 && k < 5; k++)
        if (out[k] != (int64_t)sum * (i + k + 1))
            die_wrong("all_reduce", out[k], (long long)sum * (i + k + 1));
    return rc;
}

/* broadcast from the new group's last rank of its world rank * 7 + k. */
static int checked_broadcast(fccl_group_t *g)
{
    int root = fccl_group_size(g) - 1, wroot;
    fccl_group_to_world(g, root, &wroot);
    int32_t buf[9];
    for (int k = 0; k < 9; k++)
        buf[k] = fccl_group_rank(g) == root ? me * 7 + k : -1;
    int rc = fccl_broadcast(buf, 9, FCCL_INT32, root, g, NULL);
    for (int k = 0; rc == 0 && k < 9; k++)
        if (buf[k] != wroot * 7 + k)
            die_wrong("broadcast", buf[k], wroot * 7 + k);
    return rc;
}

static void print_failed(const char *what, fccl_group_t *g)
{
    int f[64], n = fccl_group_failed_ranks(g, f, 64);
    char list[400] = "";
    size_t off = 0;
    for (int i = 0; i < n && i < 64 && off < sizeof(list) - 12; i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d",
                                i ? "," : "", f[i]);
    printf("R%d %s %d [%s]\n", me, what, n, n ? list : "");
}

/* Shrink, check the new group, finalize; 0 or 1. */
static int shrink_and_go_on(fccl_group_t *w, const int *exclude, int nex)
{
    fccl_group_t *g = NULL;
    long long t0 = epoch_us();
    int rc = fccl_group_shrink(w, exclude, nex, &g);
    long long t1 = epoch_us();
    printf("R%d SHRINK call %lld ret %lld rc %s size %d name %s\n", me, t0,
           t1, fccl_strerror(rc), g ? fccl_group_size(g) : -1,
           g ? fccl_group_name(g) : "-");
    if (rc < 0) {
        printf("R%d SHRINKFAIL %s\n", me, fccl_last_error());
        return 1;
    }
    print_failed("AGREED", w);
    if ((rc = checked_all_reduce(g, 3)) < 0 ||
        (rc = checked_broadcast(g)) < 0 || (rc = fccl_barrier(g, NULL)) < 0) {
        printf("R%d NEWGROUP FAILED %s: %s\n", me, fccl_strerror(rc),
               fccl_last_error());
        return 1;
    }
    const char *linger = getenv("FT_LINGER_MS");
    if (linger) {
        th_sleep_ms(atoi(linger));
        if ((rc = checked_all_reduce(g, 4)) < 0) {
            printf("R%d LATER FAILED %s: %s\n", me, fccl_strerror(rc),
                   fccl_last_error());
            return 1;
        }
    }
    printf("R%d NEWGROUP ok rank %d\n", me, fccl_group_rank(g));
    long long f0 = epoch_us();
    fccl_finalize();
    printf("R%d FINALIZE %lld us\n", me, epoch_us() - f0);
    return 0;
}

static void *die_later(void *arg)
{
    th_sleep_ms(*(const int *)arg);
    printf("R%d dying in the shrink\n", me);
    fflush(stdout);
    raise(SIGKILL);
    return NULL;
}

/* The world ranks not in g, as "[a,b]". */
static void print_gone(fccl_group_t *w, fccl_group_t *g)
{
    char list[400] = "";
    size_t off = 0;
    for (int r = 0; r < fccl_group_size(w) && off < sizeof(list) - 12; r++) {
        int gr;
        if (fccl_group_from_world(g, r, &gr) == 0 && gr >= 0)
            continue;
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d",
                                off ? "," : "", r);
    }
    printf("R%d GONE [%s]\n", me, list);
}

/* Shrink until the new group's checked collectives pass (a member that
 * died after an agreement fails them): at most 3 rounds; 0 or 1. */
static int shrink_until_right(fccl_group_t *w)
{
    fccl_group_t *g = w;
    int rc = -1;
    for (int round = 0; round < 3 && rc < 0; round++) {
        fccl_group_t *next = NULL;
        if ((rc = fccl_group_shrink(g, NULL, 0, &next)) < 0) {
            printf("R%d SHRINKFAIL %s\n", me, fccl_last_error());
            return 1;
        }
        g = next;
        if ((rc = checked_all_reduce(g, 3 + round)) >= 0)
            rc = checked_broadcast(g);
        if (rc >= 0)
            rc = fccl_barrier(g, NULL);
        printf("R%d ROUND %d size %d: %s\n", me, round, fccl_group_size(g),
               rc < 0 ? fccl_last_error() : "ok");
    }
    if (rc < 0)
        return 1;
    printf("R%d FINAL size %d name %s rank %d\n", me, fccl_group_size(g),
           fccl_group_name(g), fccl_group_rank(g));
    print_gone(w, g);
    long long f0 = epoch_us();
    fccl_finalize();
    printf("R%d FINALIZE %lld us\n", me, epoch_us() - f0);
    return 0;
}

static int kill_mode(fccl_group_t *w, int victim, int second)
{
    if (fccl_barrier(w, NULL) < 0)
        return 1;
    if (me == victim) {
        printf("R%d dying\n", me);
        fflush(stdout);
        raise(SIGKILL);
    }
    int rc = 0;
    for (int i = 0; i < 100000 && rc == 0; i++)
        rc = checked_all_reduce(w, i);
    printf("R%d FAILED %s at %lld: %s\n", me, fccl_strerror(rc), epoch_us(),
           fccl_last_error());
    const char *in_shrink = getenv("FT_IN_SHRINK_MS");
    if (in_shrink) {
        static int ms;
        pthread_t t;
        ms = atoi(in_shrink);
        if (me == second && pthread_create(&t, NULL, die_later, &ms) != 0)
            raise(SIGKILL);
        return shrink_until_right(w);
    }
    if (me == second) {
        printf("R%d dying too\n", me);
        fflush(stdout);
        raise(SIGKILL);
    }
    return shrink_and_go_on(w, NULL, 0);
}

static int exclude_mode(fccl_group_t *w, int out)
{
    if (fccl_barrier(w, NULL) < 0)
        return 1;
    if (me == out) {
        printf("R%d leaving\n", me);
        fflush(stdout);
        _exit(0); /* calls nothing more, not even fccl_finalize */
    }
    int grank;
    fccl_group_from_world(w, out, &grank);
    return shrink_and_go_on(w, &grank, 1);
}

static int revoke_mode(fccl_group_t *w)
{
    if (fccl_barrier(w, NULL) < 0)
        return 1;
    int rc;
    long long t;
    if (me == 0) {
        th_sleep_ms(500);
        t = epoch_us();
        rc = fccl_group_revoke(w);
        printf("R0 REVOKED at %lld rc %d\n", t, rc);
        fccl_group_revoke(w); /* idempotent */
    } else if (me == 1) {
        char buf[8];
        rc = fccl_recv(buf, sizeof(buf), FCCL_UINT8, 2, 7, w);
        t = epoch_us();
        printf("R1 RELEASED recv at %lld status %s: %s\n", t,
               fccl_strerror(rc), fccl_last_error());
    } else {
        rc = fccl_barrier(w, NULL);
        t = epoch_us();
        printf("R%d RELEASED barrier at %lld status %s: %s\n", me, t,
               fccl_strerror(rc), fccl_last_error());
    }
    long long a = epoch_us();
    rc = checked_all_reduce(w, 0);
    printf("R%d NEXT %s in %lld us: %s\n", me, fccl_strerror(rc),
           epoch_us() - a, fccl_last_error());
    return shrink_and_go_on(w, NULL, 0);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || (strcmp(argv[1], "revoke") != 0 && argc < 3)) {
        fprintf(stderr, "usage: ft_check kill K | exclude K | revoke\n");
        return 2;
    }
    fccl_group_t *w;
    int rc = fccl_init(NULL, &w);
    if (rc < 0) {
        fprintf(stderr, "ft_check: init: %s (%s)\n", fccl_strerror(rc),
                fccl_last_error());
        return 1;
    }
    me = fccl_get_rank();
    printf("R%d pid %d\n", me, (int)getpid());
    if (strcmp(argv[1], "kill") == 0)
        return kill_mode(w, atoi(argv[2]), argc > 3 ? atoi(argv[3]) : -1);
    if (strcmp(argv[1], "exclude") == 0)
        return exclude_mode(w, atoi(argv[2]));
    return revoke_mode(w);
}
