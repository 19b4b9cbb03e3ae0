/*
 * boot_check: one rank of a bootstrap test job (run by test_bootstrap.c,
 * usually under fccl-run).  Modes (argv[1]):
 *   env | tcp | store   init through env://, tcp://MASTER_ADDR:MASTER_PORT
 *                       or an explicit store handle; then print topology,
 *                       group names, translation and split results as
 *                       "R<rank> key value" lines for the test to check
 *   host                init with host_store = 1 (rank 0 serves the store)
 *   args                argument errors, single process, no store needed
 *   exit CODE RANK      rank RANK exits with CODE after init
 *   suicide MS RANK     rank RANK SIGKILLs itself MS ms after start
 *   hold MS             init, print "R<rank> pid <pid> ready", stay up MS
 *                       ms (for a test to kill it), barrier, finalize
 *   churn STOPFILE      init, then rounds of group creation until STOPFILE
 *                       exists (rank 0 looks, the world agrees): each round
 *                       fccl_group_new of two halves and a split, an
 *                       all_reduce checked in each; rank 0 prints
 *                       "R0 churning" after the first round, every rank
 *                       "R<rank> churn rounds <k> bad <b>" at the end (for
 *                       a test that restarts the store meanwhile)
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
#include "lib/rank.h"

static int die(const char *what, int rc)
{
    return th_rank_fail("boot_check", what, rc);
}

static void *suicide_main(void *arg)
{
    th_sleep_ms((int)(intptr_t)arg);
    raise(SIGKILL);
    return NULL;
}

static int init_mode(const char *mode)
{
    fccl_init_opts_t o;
    fccl_init_opts_init(&o);
    char method[300];
    fccl_store_t *store = NULL;
    if (strcmp(mode, "tcp") == 0) {
        snprintf(method, sizeof(method), "tcp://%s", th_job_store_addr());
        o.init_method = method;
        o.world_size = atoi(getenv("WORLD_SIZE"));
        o.rank = atoi(getenv("RANK"));
    } else if (strcmp(mode, "store") == 0) {
        fccl_store_opts_t so;
        fccl_store_opts_init(&so);
        snprintf(method, sizeof(method), "%s", th_job_store_addr());
        so.addr = method;
        int rc = fccl_store_connect(&so, &store);
        if (rc < 0)
            return die("store connect", rc);
        o.store = store;
    } else if (strcmp(mode, "host") == 0) {
        o.host_store = 1;
    }
    fccl_group_t *w;
    int rc = fccl_init(&o, &w);
    if (rc < 0)
        return die("fccl_init", rc);
    int r = fccl_get_rank(), n = fccl_get_world_size();
    fccl_topology_t t;
    fccl_get_topology(&t);
    printf("R%d size %d\n", r, n);
    printf("R%d world %s %d %d\n", r, fccl_group_name(w), fccl_group_rank(w),
           fccl_group_size(w));
    printf("R%d topo %d %d %d %d\n", r, t.node_count, t.node_rank,
           t.local_rank, t.local_size);
    /* every rank with an even world rank and rank n-1 */
    int members[64], m = 0;
    for (int i = 0; i < n && m < 63; i += 2)
        members[m++] = i;
    if ((n - 1) % 2)
        members[m++] = n - 1;
    /* reversed, to check sorting */
    for (int i = 0; i < m / 2; i++) {
        int x = members[i];
        members[i] = members[m - 1 - i];
        members[m - 1 - i] = x;
    }
    int member = r % 2 == 0 || r == n - 1;
    if (member) {
        fccl_group_t *g;
        /* create, destroy and create again: a fresh context each time */
        for (int round = 0; round < 2; round++) {
            if ((rc = fccl_group_new(members, (size_t)m, &g)) < 0)
                return die("group_new", rc);
            int64_t v = r, s = 0;
            if ((rc = fccl_all_reduce(&v, &s, 1, FCCL_INT64, FCCL_SUM, g,
                                      NULL)) < 0)
                return die("all_reduce on group", rc);
            int w0, back;
            fccl_group_to_world(g, fccl_group_rank(g), &w0);
            fccl_group_from_world(g, r, &back);
            printf("R%d group %s size %d rank %d world %d back %d sum %lld\n",
                   r, fccl_group_name(g), fccl_group_size(g),
                   fccl_group_rank(g), w0, back, (long long)s);
            fccl_group_destroy(g);
        }
    } else {
        fccl_group_t *g = NULL;
        rc = fccl_group_new(members, (size_t)m, &g);
        printf("R%d nonmember %d %s\n", r, rc, fccl_last_error());
    }
    /* split: color = rank % 3, key = -rank (reverse order) */
    fccl_group_t *sp;
    if ((rc = fccl_group_split(w, r % 3, -r, &sp)) < 0)
        return die("split", rc);
    int members_sp[64] = {0};
    fccl_group_members(sp, members_sp, 64);
    printf("R%d split %s rank %d size %d first %d\n", r, fccl_group_name(sp),
           fccl_group_rank(sp), fccl_group_size(sp), members_sp[0]);
    int64_t v = 1, s = 0;
    if ((rc = fccl_all_reduce(&v, &s, 1, FCCL_INT64, FCCL_SUM, sp, NULL)) < 0)
        return die("all_reduce on split", rc);
    printf("R%d splitsum %lld\n", r, (long long)s);
    fccl_group_destroy(sp);
    if ((rc = fccl_finalize()) < 0)
        return die("finalize", rc);
    fccl_store_close(store);
    printf("R%d done %d\n", r, fccl_is_initialized());
    return 0;
}

/* all_reduce of (world rank + 1) on g; 0 if it equals the sum over its
 * members computed here, else 1 (with a line saying so). */
static int check_sum(fccl_group_t *g, const char *what, int round)
{
    int r = fccl_get_rank(), n = fccl_group_size(g), members[64];
    if (n > 64 || fccl_group_members(g, members, 64) < 0)
        return die("members", FCCL_ERR_INVALID);
    int64_t want = 0, v = r + 1, s = 0;
    for (int i = 0; i < n; i++)
        want += members[i] + 1;
    int rc = fccl_all_reduce(&v, &s, 1, FCCL_INT64, FCCL_SUM, g, NULL);
    if (rc < 0)
        return die(what, rc) + 1;
    if (s == want)
        return 0;
    printf("R%d round %d %s: sum %lld, want %lld\n", r, round, what,
           (long long)s, (long long)want);
    return 1;
}

/* One round: the world's ranks of parity (r + round) % 2 as one group
 * (reversed list: fccl_group_new sorts), the others as another; then a
 * split by (r + round) % 3.  Each group checked and destroyed. */
static int churn_round(fccl_group_t *w, int round)
{
    int r = fccl_get_rank(), n = fccl_get_world_size(), mine[64], m = 0;
    for (int i = n - 1; i >= 0 && m < 64; i--)
        if ((i + round) % 2 == (r + round) % 2)
            mine[m++] = i;
    fccl_group_t *g = NULL;
    int rc = fccl_group_new(mine, (size_t)m, &g), bad = 0;
    if (rc < 0)
        return die("group_new", rc) + 1;
    bad += check_sum(g, "group_new", round);
    fccl_group_destroy(g);
    if ((rc = fccl_group_split(w, (r + round) % 3, r, &g)) < 0)
        return die("group_split", rc) + 1;
    bad += check_sum(g, "group_split", round);
    fccl_group_destroy(g);
    return bad;
}

static int churn_mode(const char *stopfile)
{
    fccl_group_t *w;
    int rc = fccl_init(NULL, &w), r, rounds = 0, bad = 0;
    if (rc < 0)
        return die("fccl_init", rc);
    r = fccl_get_rank();
    for (;;) {
        int64_t go = r != 0 || access(stopfile, F_OK) != 0;
        if ((rc = fccl_broadcast(&go, 1, FCCL_INT64, 0, w, NULL)) < 0)
            return die("broadcast", rc);
        if (!go)
            break;
        bad += churn_round(w, rounds);
        if (bad > 1)
            break; /* a failed call: the others fail by timeout */
        if (++rounds == 1 && r == 0)
            printf("R0 churning\n");
    }
    printf("R%d churn rounds %d bad %d\n", r, rounds, bad);
    if (bad > 1)
        return 1;
    if ((rc = fccl_finalize()) < 0)
        return die("finalize", rc);
    return bad ? 1 : 0;
}

static int expect(int got, int want, const char *what)
{
    if (got == want) {
        printf("ok %s: %s\n", what, fccl_last_error());
        return 0;
    }
    printf("FAIL %s: got %d want %d (%s)\n", what, got, want,
           fccl_last_error());
    return 1;
}

static int args_mode(void)
{
    int bad = 0;
    fccl_init_opts_t o;
    fccl_store_t *fake = (fccl_store_t *)&o; /* never dereferenced */
    fccl_init_opts_init(&o);
    o.world_size = 0;
    o.rank = 0;
    bad += expect(fccl_init(&o, NULL), FCCL_ERR_INVALID, "world size 0");
    o.world_size = 2;
    o.rank = 2;
    bad += expect(fccl_init(&o, NULL), FCCL_ERR_INVALID, "rank out of range");
    o.rank = -5;
    bad += expect(fccl_init(&o, NULL), FCCL_ERR_INVALID, "negative rank");
    o.rank = 0;
    o.store = fake;
    o.init_method = "env://";
    bad += expect(fccl_init(&o, NULL), FCCL_ERR_INVALID, "store and method");
    o.store = NULL;
    o.init_method = "udp://x";
    bad += expect(fccl_init(&o, NULL), FCCL_ERR_INVALID, "bad init method");
    int dup[] = {1, 0, 1}, neg[] = {0, -1};
    char name[80];
    bad += expect(fccl_group_name_for(dup, 3, name, sizeof(name)),
                  FCCL_ERR_INVALID, "duplicate ranks");
    bad += expect(fccl_group_name_for(neg, 2, name, sizeof(name)),
                  FCCL_ERR_INVALID, "negative member");
    bad += expect(fccl_group_name_for(dup, 0, name, sizeof(name)),
                  FCCL_ERR_INVALID, "empty list");
    bad += expect(fccl_group_new(dup, 2, NULL), FCCL_ERR_STATE,
                  "group before init");
    int r40[] = {4, 0};
    bad += expect(fccl_group_name_for(r40, 2, name, sizeof(name)), FCCL_OK,
                  "name of [4,0]");
    printf("name40 %s\n", name);
    bad += expect(fccl_is_initialized(), 0, "not initialized");
    bad += expect(fccl_finalize(), FCCL_OK, "finalize when not initialized");
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: boot_check env|tcp|store|host|args|exit|suicide\n");
        return 2;
    }
    const char *mode = argv[1];
    int rank = getenv("RANK") ? atoi(getenv("RANK")) : 0;
    if (strcmp(mode, "args") == 0)
        return args_mode();
    if (strcmp(mode, "suicide") == 0 && argc >= 4 && rank == atoi(argv[3])) {
        pthread_t th;
        pthread_create(&th, NULL, suicide_main, (void *)(intptr_t)atoi(argv[2]));
    }
    if (strcmp(mode, "exit") == 0 && argc >= 4) {
        fccl_group_t *w;
        int rc = fccl_init(NULL, &w);
        if (rc < 0)
            return die("fccl_init", rc);
        if (rank == atoi(argv[3]))
            return atoi(argv[2]);
        /* the others wait in a collective the dead rank never joins */
        rc = fccl_barrier(w, NULL);
        fprintf(stderr, "boot_check: barrier returned %d\n", rc);
        fccl_finalize();
        return rc < 0 ? 1 : 0;
    }
    if (strcmp(mode, "hold") == 0 && argc >= 3) {
        fccl_group_t *w;
        int rc = fccl_init(NULL, &w);
        if (rc < 0)
            return die("fccl_init", rc);
        printf("R%d pid %d ready\n", fccl_get_rank(), (int)getpid());
        fflush(stdout);
        th_sleep_ms(atoi(argv[2]));
        if ((rc = fccl_barrier(w, NULL)) < 0)
            return die("barrier", rc);
        fccl_finalize();
        return 0;
    }
    if (strcmp(mode, "churn") == 0 && argc >= 3)
        return churn_mode(argv[2]);
    if (strcmp(mode, "suicide") == 0)
        mode = "env";
    return init_mode(mode);
}
