/*
 * group_check: one rank of a test job for named groups, per-call timeouts
 * and group failure (run by test_groups.c, under fccl-run or by hand).
 * Every line it prints starts with "R<rank> " for the test to check;
 * expected values are computed by the test, not here.  Modes (argv[1]):
 *   named          the world by fccl_group_new(NULL, 0), name checks, a
 *                  named group of every rank ("all") and one of the even
 *                  ranks ("evens"), lookups, providers, per-group
 *                  topology, a checked all_reduce on each, destroy and
 *                  create "all" again
 *   timeout MS S   a group of every rank; every rank but S runs an
 *                  all_reduce on it with fccl_set_next_timeout(MS); S
 *                  never does, and polls fccl_group_failed_rank() instead.
 *                  Each prints when it failed or learned of the failure
 *                  (ms after a common start), then a later call (which
 *                  must fail at once), then the group is destroyed, made
 *                  again and a checked all_reduce runs on it
 *   wait MS S      the same with an asynchronous all_reduce ended by
 *                  fccl_wait(req, MS) and a second one queued behind it
 *                  ended by fccl_wait(req2, 0) ("SECOND"); then a
 *                  point-to-point case on a new group of ranks 0 and 1:
 *                  rank 0 waits MS for a message rank 1 never sends,
 *                  rank 1 polls
 * Lines: "R<r> FAILED <status> after <ms> failed_rank <w>: <message>",
 * "R<r> LEARNED after <ms> failed_rank <w>", "R<r> NEXT <status> in <ms>:
 * <message>", "R<r> RECREATED ok|bad".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fccl/fccl.h"
#include "lib/proc.h"
#include "lib/rank.h"

static int me, nranks;

static long long epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int die(const char *what, int rc)
{
    printf("R%d DIE %s: %s (%s)\n", me, what, fccl_strerror(rc),
           fccl_last_error());
    return 1;
}

/* all_reduce(SUM) of (world rank + 1) over g: the sum of its members'. */
static int checked_sum(fccl_group_t *g)
{
    int n = fccl_group_size(g), members[64], want = 0, in = me + 1, out = -1;
    fccl_group_members(g, members, 64);
    for (int i = 0; i < n; i++)
        want += members[i] + 1;
    int rc = fccl_all_reduce(&in, &out, 1, FCCL_INT32, FCCL_SUM, g, NULL);
    if (rc < 0)
        return rc;
    return out == want ? 0 : FCCL_ERR_STATE;
}

static void expect_invalid(const char *what, int rc)
{
    printf("R%d %s %s\n", me, what,
           rc == FCCL_ERR_INVALID ? "refused" : fccl_strerror(rc));
}

static void show_group(const char *tag, fccl_group_t *g)
{
    char prov[64] = "?";
    fccl_topology_t t = {-1, -1, -1, -1};
    fccl_group_providers(g, prov, sizeof(prov));
    fccl_group_topology(g, &t);
    printf("R%d %s name %s size %d rank %d\n", me, tag, fccl_group_name(g),
           fccl_group_size(g), fccl_group_rank(g));
    printf("R%d %s prov %s\n", me, tag, prov);
    printf("R%d %s topo %d %d %d %d\n", me, tag, t.node_count, t.node_rank,
           t.local_rank, t.local_size);
    printf("R%d %s sum %s\n", me, tag, checked_sum(g) == 0 ? "ok" : "bad");
}

static int all_ranks(int *r)
{
    for (int i = 0; i < nranks; i++)
        r[i] = i;
    return nranks;
}

static int named_mode(fccl_group_t *w)
{
    int ranks[64], n = all_ranks(ranks), rc;
    fccl_group_t *g = NULL, *ev = NULL, *h = NULL;
    rc = fccl_group_new(NULL, 0, &g);
    printf("R%d none-is-world %d\n", me, rc == 0 && g == w);
    expect_invalid("destroy-world", fccl_group_destroy(g));
    expect_invalid("check-reserved", fccl_group_name_check("fccl_mine"));
    expect_invalid("check-slash", fccl_group_name_check("a/b"));
    expect_invalid("check-empty", fccl_group_name_check(""));
    printf("R%d check-good %d\n", me, fccl_group_name_check("tp-0.a:b_1"));
    expect_invalid("new-reserved",
                   fccl_group_new_named(FCCL_WORLD_GROUP, ranks, 1, &g));
    if ((rc = fccl_group_new_named("all", ranks, (size_t)n, &g)) < 0)
        return die("new_named all", rc);
    expect_invalid("new-duplicate",
                   fccl_group_new_named("all", ranks, (size_t)n, &h));
    int evens[64], ne = 0;
    for (int i = 0; i < nranks; i += 2)
        evens[ne++] = i;
    if (me % 2 == 0 &&
        (rc = fccl_group_new_named("evens", evens, (size_t)ne, &ev)) < 0)
        return die("new_named evens", rc);
    if ((rc = fccl_group_new(ranks, (size_t)n, &h)) < 0)
        return die("new hashed", rc);
    printf("R%d find all %d world %d hashed %d evens %d none %d\n", me,
           fccl_group_find("all") == g, fccl_group_find(FCCL_WORLD_GROUP) == w,
           fccl_group_find(fccl_group_name(h)) == h,
           fccl_group_find("evens") == ev, fccl_group_find("nope") == NULL);
    show_group("world", w);
    show_group("all", g);
    if (ev)
        show_group("evens", ev);
    fccl_group_destroy(h);
    if ((rc = fccl_group_destroy(g)) < 0)
        return die("destroy all", rc);
    printf("R%d find-destroyed %d\n", me, fccl_group_find("all") == NULL);
    if ((rc = fccl_group_new_named("all", ranks, (size_t)n, &g)) < 0)
        return die("new_named all again", rc);
    printf("R%d again sum %s\n", me, checked_sum(g) == 0 ? "ok" : "bad");
    fccl_group_destroy(ev);
    return 0;
}

/* The skipping rank: poll until the group is known to have failed. */
static void learn(fccl_group_t *g, long long t0, long limit_ms)
{
    int fr = -1;
    while ((fr = fccl_group_failed_rank(g)) < 0 && epoch_ms() - t0 < limit_ms)
        th_sleep_ms(5);
    printf("R%d LEARNED after %lld failed_rank %d\n", me, epoch_ms() - t0, fr);
}

static void report(fccl_group_t *g, int rc, long long t0)
{
    printf("R%d FAILED %s after %lld failed_rank %d: %s\n", me,
           fccl_strerror(rc), epoch_ms() - t0, fccl_group_failed_rank(g),
           rc < 0 ? fccl_last_error() : "(it did not fail)");
}

static void next_call(fccl_group_t *g)
{
    long long t = epoch_ms();
    int rc = checked_sum(g);
    printf("R%d NEXT %s in %lld: %s\n", me, fccl_strerror(rc), epoch_ms() - t,
           rc < 0 ? fccl_last_error() : "");
}

/* Destroy g (failed) and make the group of the same ranks again. */
static void recreate(fccl_group_t *w, fccl_group_t **g)
{
    int members[64], n = fccl_group_size(*g);
    fccl_group_members(*g, members, 64);
    fccl_group_destroy(*g);
    *g = NULL;
    fccl_barrier(w, NULL);
    int rc = fccl_group_new(members, (size_t)n, g);
    printf("R%d RECREATED %s\n", me,
           rc == 0 && checked_sum(*g) == 0 ? "ok" : "bad");
}

static int fail_mode(fccl_group_t *w, int async_, long ms, int skip)
{
    int ranks[64], n = all_ranks(ranks), rc;
    fccl_group_t *g;
    if ((rc = fccl_group_new(ranks, (size_t)n, &g)) < 0)
        return die("new", rc);
    if ((rc = fccl_barrier(w, NULL)) < 0)
        return die("barrier", rc);
    long long t0 = epoch_ms();
    if (me == skip) {
        learn(g, t0, ms + 20000);
    } else if (!async_) {
        int in = 1, out;
        fccl_set_next_timeout(g, ms);
        rc = fccl_all_reduce(&in, &out, 1, FCCL_INT32, FCCL_SUM, g, NULL);
        report(g, rc, t0);
    } else {
        int in = 1, out, in2 = 1, out2;
        fccl_request_t *req, *req2;
        if ((rc = fccl_all_reduce(&in, &out, 1, FCCL_INT32, FCCL_SUM, g,
                                  &req)) < 0 ||
            (rc = fccl_all_reduce(&in2, &out2, 1, FCCL_INT32, FCCL_SUM, g,
                                  &req2)) < 0)
            return die("all_reduce async", rc);
        rc = fccl_wait(req, ms);
        report(g, rc, t0);
        /* queued behind it: given up on at once (done or not), it must
         * still name the group's first failure */
        rc = fccl_wait(req2, 0);
        printf("R%d SECOND %s: %s\n", me, fccl_strerror(rc),
               rc < 0 ? fccl_last_error() : "(it did not fail)");
    }
    next_call(g);
    recreate(w, &g);
    fccl_group_destroy(g);
    return 0;
}

/* Rank 0 waits ms for a message from rank 1, which never sends. */
static int p2p_mode(fccl_group_t *w, long ms)
{
    int pair[2] = {0, 1}, rc, buf = 0;
    fccl_group_t *g = NULL;
    if (me <= 1 && (rc = fccl_group_new(pair, 2, &g)) < 0)
        return die("new pair", rc);
    if ((rc = fccl_barrier(w, NULL)) < 0)
        return die("barrier", rc);
    long long t0 = epoch_ms();
    if (me == 0) {
        fccl_request_t *req;
        if ((rc = fccl_irecv(&buf, 1, FCCL_INT32, 1, 7, g, &req)) < 0)
            return die("irecv", rc);
        rc = fccl_wait(req, ms);
        printf("R%d P2P ", me);
        report(g, rc, t0);
    } else if (me == 1) {
        printf("R%d P2P ", me);
        learn(g, t0, ms + 20000);
    }
    if (g) {
        long long t = epoch_ms();
        rc = fccl_send(&buf, 1, FCCL_INT32, 1 - me, 8, g);
        printf("R%d P2P NEXT %s in %lld: %s\n", me, fccl_strerror(rc),
               epoch_ms() - t, rc < 0 ? fccl_last_error() : "");
        fccl_group_destroy(g);
    }
    return 0;
}

int main(int argc, char **argv)
{
    fccl_group_t *w;
    int rc = th_rank_start("group_check", argc >= 2 &&
                           (strcmp(argv[1], "named") == 0 || argc >= 4),
                           "named | timeout MS SKIP | wait MS SKIP", &w);
    if (rc)
        return rc;
    me = fccl_get_rank();
    nranks = fccl_get_world_size();
    if (nranks > 64)
        return die("world", FCCL_ERR_LIMIT);
    if (strcmp(argv[1], "named") == 0)
        rc = named_mode(w);
    else if (strcmp(argv[1], "timeout") == 0)
        rc = fail_mode(w, 0, atol(argv[2]), atoi(argv[3]));
    else
        rc = fail_mode(w, 1, atol(argv[2]), atoi(argv[3])) ||
             (nranks > 1 && p2p_mode(w, atol(argv[2])));
    printf("R%d done %d\n", me, rc);
    fccl_finalize();
    return rc;
}
