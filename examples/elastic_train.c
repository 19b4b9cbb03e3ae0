/*
 * elastic_train: data-parallel training that survives losing a rank and
 * takes its replacement back in, with final parameters bitwise equal to a
 * run without the failure.
 *
 *   fccl-run --respawn 1 -n 4 build/examples/elastic_train STEPS KILL_STEP
 *
 * The model is a linear regression (8 weights and a bias) trained by
 * plain gradient descent on samples made from their index alone.  Every
 * step's global batch is cut into SHARDS fixed shards of SHARD_N samples;
 * shard s of a step is always the same samples, and its gradient is
 * summed in sample order, so it is the same bits whichever rank computes
 * it.  The members share the shards out (shard s to member s mod n),
 * all_gather every member's shard gradients, and each adds the shards in
 * shard order 0..SHARDS-1 and applies the update the same way: the
 * reduction order is fixed by the shards, not by who is alive or by the
 * collective's algorithm (an all_reduce's order follows its algorithm and
 * member count, so it would not be bitwise stable across member sets).
 *
 * Rank 1 (KILL_STEP >= 0) SIGKILLs itself at the start of step KILL_STEP;
 * the others' all_gather fails, they shrink their group and redo the step
 * without it, go on for REGROW_AFTER steps, then grow the group by one.
 * fccl-run --respawn 1 has meanwhile started rank 1 again with
 * FCCL_REJOIN=1: its fccl_init returns the grown group, and the grown
 * group's rank 0 broadcasts the step and the parameters to it.  At the end
 * every rank prints the parameters' bits: "R<rank> FINAL <hex>...".  A
 * run with KILL_STEP -1 is the reference.
 */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fccl/fccl.h"

#define NW 8             /* weights; the bias is parameter NW */
#define NP (NW + 1)
#define SHARDS 8
#define SHARD_N 16       /* samples per shard */
#define REGROW_AFTER 3   /* steps the survivors run before the grow */
#define VICTIM 1
#define LR 0.05f

/* A number in [-1, 1) from (index, salt) alone (a 64-bit mix). */
static float unit(uint64_t i, uint64_t salt)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + salt * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (float)(z >> 40) / (float)(1ull << 23) - 1.0f;
}

/* Sample i: x[NW] and y = a fixed linear function of x plus noise. */
static void sample(uint64_t i, float *x, float *y)
{
    float t = 0.3f;
    for (int k = 0; k < NW; k++) {
        x[k] = unit(i, (uint64_t)k + 1);
        t += (float)(k + 1) * 0.1f * x[k];
    }
    *y = t + 0.01f * unit(i, 99);
}

/* Shard s of step t: the gradient of the squared error, summed in
 * sample order. */
static void shard_grad(const float *p, int t, int s, float *g)
{
    memset(g, 0, NP * sizeof(float));
    for (int j = 0; j < SHARD_N; j++) {
        uint64_t i = ((uint64_t)t * SHARDS + (uint64_t)s) * SHARD_N +
                     (uint64_t)j;
        float x[NW], y, pred = p[NW];
        sample(i, x, &y);
        for (int k = 0; k < NW; k++)
            pred += p[k] * x[k];
        float e = pred - y;
        for (int k = 0; k < NW; k++)
            g[k] += e * x[k];
        g[NW] += e;
    }
}

/* One step on g: 0, or the collective's error (p unchanged). */
static int step(fccl_group_t *g, float *p, int t)
{
    int n = fccl_group_size(g), me = fccl_group_rank(g);
    float mine[SHARDS * NP], *all = malloc((size_t)n * sizeof(mine));
    if (!all)
        return FCCL_ERR_NOMEM;
    memset(mine, 0, sizeof(mine));
    for (int s = me; s < SHARDS; s += n)
        shard_grad(p, t, s, mine + s * NP);
    int rc = fccl_all_gather(mine, all, SHARDS * NP, FCCL_FLOAT32, g, NULL);
    if (rc == 0) {
        float sum[NP] = {0};
        for (int s = 0; s < SHARDS; s++) { /* shard order: fixed */
            const float *gs = all + (size_t)(s % n) * SHARDS * NP + s * NP;
            for (int k = 0; k < NP; k++)
                sum[k] += gs[k];
        }
        for (int k = 0; k < NP; k++)
            p[k] -= LR * sum[k] / (float)(SHARDS * SHARD_N);
    }
    free(all);
    return rc;
}

/* The grown group's rank 0 hands the step and the parameters over. */
static int hand_over(fccl_group_t *g, int *t, float *p)
{
    float buf[NP + 1];
    memcpy(buf, p, sizeof(float) * NP);
    buf[NP] = (float)*t; /* exact: steps stay far below 2^24 */
    int rc = fccl_broadcast(buf, NP + 1, FCCL_FLOAT32, 0, g, NULL);
    if (rc == 0) {
        memcpy(p, buf, sizeof(float) * NP);
        *t = (int)buf[NP];
    }
    return rc;
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "elastic_train: rank %d: %s: %s (%s)\n", fccl_get_rank(),
            what, fccl_strerror(rc), fccl_last_error());
    return 1;
}

static int train(fccl_group_t *g, float *p, int t, int steps, int kill_step,
                 int joined)
{
    int me = fccl_get_rank(), lost_at = -1, rc;
    if (joined && (rc = hand_over(g, &t, p)) < 0)
        return fail("hand-over", rc);
    while (t < steps) {
        if (me == VICTIM && t == kill_step && !joined) {
            printf("R%d dying at step %d\n", me, t);
            fflush(stdout);
            raise(SIGKILL);
        }
        if (lost_at >= 0 && t == lost_at + REGROW_AFTER) {
            fccl_group_t *g2;
            if ((rc = fccl_group_grow(g, 1, &g2)) < 0)
                return fail("grow", rc);
            g = g2;
            lost_at = -1;
            printf("R%d grew to %d ranks at step %d\n", me,
                   fccl_group_size(g), t);
            if ((rc = hand_over(g, &t, p)) < 0)
                return fail("hand-over", rc);
        }
        if ((rc = step(g, p, t)) == 0) {
            t++;
            continue;
        }
        fccl_group_t *g2; /* a member died: go on without it */
        if (fccl_group_shrink(g, NULL, 0, &g2) < 0)
            return fail("step, then shrink", rc);
        g = g2;
        /* A survivor may have finished the step the others failed: all
         * take the shrunk group's rank 0's step and parameters. */
        if ((rc = hand_over(g, &t, p)) < 0)
            return fail("hand-over after the shrink", rc);
        printf("R%d lost a rank at step %d: %d go on\n", me, t,
               fccl_group_size(g));
        lost_at = t;
    }
    printf("R%d FINAL", me);
    for (int k = 0; k < NP; k++) {
        uint32_t b;
        memcpy(&b, &p[k], 4);
        printf(" %08" PRIx32, b);
    }
    printf("\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3) {
        fprintf(stderr, "usage: elastic_train STEPS KILL_STEP (-1: none)\n");
        return 2;
    }
    int steps = atoi(argv[1]), kill_step = atoi(argv[2]);
    const char *rj = getenv("FCCL_REJOIN");
    int joined = rj && *rj && strcmp(rj, "0") != 0;
    fccl_group_t *g;
    int rc = fccl_init(NULL, &g);
    if (rc < 0)
        return fail("init", rc);
    float p[NP] = {0};
    rc = train(g, p, 0, steps, kill_step, joined);
    fccl_finalize();
    return rc;
}
