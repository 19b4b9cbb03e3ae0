/*
 * fccl-demo: the README's main job.  Run under fccl-run:
 *
 *   fccl-run -n 4 build/bin/fccl-demo
 *
 * Every rank joins through env://, runs a set of collectives on the world
 * and on subgroups, and checks each result against a value it computes on
 * its own.  Rank 0 prints one line per check; any mismatch exits 1.
 * `fccl-demo --help` prints the usage instead of joining a job.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "fccl/fccl.h"

static int rank, size, failures;

static void report(const char *what, int ok, uint64_t t0)
{
    double us = (double)(fccl_now_ns() - t0) / 1000.0;
    if (!ok) {
        failures++;
        fprintf(stderr, "rank %d: %s: WRONG RESULT\n", rank, what);
    } else if (rank == 0) {
        printf("  %-46s ok  %9.1f us\n", what, us);
    }
}

static int check(int rc, const char *what)
{
    if (rc < 0) {
        fprintf(stderr, "rank %d: %s failed: %s (%s)\n", rank, what,
                fccl_strerror(rc), fccl_last_error());
        exit(1);
    }
    return rc;
}

/* Elements are small integers, so float sums are exact in any order. */
static void all_reduce_f32(fccl_group_t *w)
{
    size_t n = (1u << 20) + 3;
    float *buf = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        buf[i] = (float)((i % 97) + (size_t)rank);
    uint64_t t0 = fccl_now_ns();
    check(fccl_all_reduce(buf, buf, n, FCCL_FLOAT32, FCCL_SUM, w, NULL),
          "all_reduce");
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++)
        ok = buf[i] == (float)((i % 97) * (size_t)size +
                               (size_t)size * (size_t)(size - 1) / 2);
    report("all_reduce float32 sum, 1 Mi+3 elements", ok, t0);
    free(buf);
}

static void all_reduce_max_async(fccl_group_t *w)
{
    int64_t v[7], r[7];
    for (int i = 0; i < 7; i++)
        v[i] = (int64_t)((rank * 7919 + i * 104729) % 1000) - 500;
    fccl_request_t *req;
    uint64_t t0 = fccl_now_ns();
    check(fccl_all_reduce(v, r, 7, FCCL_INT64, FCCL_MAX, w, &req),
          "all_reduce (async)");
    check(fccl_wait(req, -1), "wait");
    int ok = 1;
    for (int i = 0; i < 7; i++) {
        int64_t m = INT64_MIN;
        for (int q = 0; q < size; q++) {
            int64_t x = (int64_t)((q * 7919 + i * 104729) % 1000) - 500;
            m = x > m ? x : m;
        }
        ok &= r[i] == m;
    }
    report("all_reduce int64 max, async handle", ok, t0);
}

static void broadcast_from_last(fccl_group_t *w)
{
    char msg[64] = "";
    if (rank == size - 1)
        snprintf(msg, sizeof(msg), "hello from rank %d", size - 1);
    uint64_t t0 = fccl_now_ns();
    check(fccl_broadcast(msg, sizeof(msg), FCCL_UINT8, size - 1, w, NULL),
          "broadcast");
    char want[64];
    snprintf(want, sizeof(want), "hello from rank %d", size - 1);
    report("broadcast 64 B from the last rank", strcmp(msg, want) == 0, t0);
}

/* Rank r contributes r+1 elements of value r. */
static void all_gather_uneven(fccl_group_t *w)
{
    size_t *counts = malloc((size_t)size * sizeof(size_t)), total = 0;
    for (int r = 0; r < size; r++)
        total += counts[r] = (size_t)r + 1;
    int32_t *mine = malloc(((size_t)rank + 1) * sizeof(int32_t));
    int32_t *all = malloc(total * sizeof(int32_t));
    for (int i = 0; i <= rank; i++)
        mine[i] = rank;
    uint64_t t0 = fccl_now_ns();
    check(fccl_all_gather_v(mine, (size_t)rank + 1, all, counts, FCCL_INT32, w,
                            NULL),
          "all_gather_v");
    int ok = 1;
    size_t k = 0;
    for (int r = 0; r < size; r++)
        for (int i = 0; i <= r; i++)
            ok &= all[k++] == r;
    report("all_gather_v, uneven (rank r sends r+1)", ok, t0);
    free(counts);
    free(mine);
    free(all);
}

static void reduce_scatter_f64(fccl_group_t *w)
{
    size_t per = 1000;
    double *in = malloc(per * (size_t)size * sizeof(double));
    double *out = malloc(per * sizeof(double));
    for (size_t i = 0; i < per * (size_t)size; i++)
        in[i] = (double)(i + (size_t)rank);
    uint64_t t0 = fccl_now_ns();
    check(fccl_reduce_scatter(in, out, per, FCCL_FLOAT64, FCCL_SUM, w, NULL),
          "reduce_scatter");
    int ok = 1;
    for (size_t i = 0; i < per; i++) {
        size_t g = (size_t)rank * per + i;
        ok &= out[i] == (double)(g * (size_t)size) +
                            (double)size * (size - 1) / 2.0;
    }
    report("reduce_scatter float64 sum", ok, t0);
    free(in);
    free(out);
}

/* Rank r sends (r + p) % 3 elements to rank p. */
static void all_to_all_v(fccl_group_t *w)
{
    size_t *sc = calloc((size_t)size, sizeof(size_t));
    size_t *rc = calloc((size_t)size, sizeof(size_t)), st = 0, rt = 0;
    for (int p = 0; p < size; p++) {
        st += sc[p] = (size_t)((rank + p) % 3);
        rt += rc[p] = (size_t)((p + rank) % 3);
    }
    int32_t *s = malloc((st + 1) * sizeof(int32_t));
    int32_t *r = malloc((rt + 1) * sizeof(int32_t));
    size_t k = 0;
    for (int p = 0; p < size; p++)
        for (size_t i = 0; i < sc[p]; i++)
            s[k++] = rank * 1000 + p;
    uint64_t t0 = fccl_now_ns();
    check(fccl_all_to_all_v(s, sc, r, rc, FCCL_INT32, w, NULL), "all_to_all_v");
    int ok = 1;
    k = 0;
    for (int p = 0; p < size; p++)
        for (size_t i = 0; i < rc[p]; i++)
            ok &= r[k++] == p * 1000 + rank;
    report("all_to_all_v, per-peer counts", ok, t0);
    free(sc);
    free(rc);
    free(s);
    free(r);
}

/* Even ranks form a group by list; everyone splits by parity. */
static void subgroups(fccl_group_t *w)
{
    int *evens = malloc((size_t)size * sizeof(int)), ne = 0;
    for (int r = 0; r < size; r += 2)
        evens[ne++] = r;
    uint64_t t0 = fccl_now_ns();
    if (rank % 2 == 0) {
        fccl_group_t *g;
        check(fccl_group_new(evens, (size_t)ne, &g), "group_new");
        int64_t v = rank, sum;
        check(fccl_all_reduce(&v, &sum, 1, FCCL_INT64, FCCL_SUM, g, NULL),
              "all_reduce on group");
        int64_t want = 0;
        for (int i = 0; i < ne; i++)
            want += evens[i];
        report(fccl_group_name(g), sum == want, t0);
        fccl_group_destroy(g);
    }
    fccl_group_t *half;
    t0 = fccl_now_ns();
    check(fccl_group_split(w, rank % 2, -rank, &half), "split");
    int w0 = -1;
    fccl_group_to_world(half, 0, &w0);
    /* key = -rank puts the highest world rank of my parity first */
    int top = (size - 1) - ((size - 1 - rank) % 2 == 0 ? 0 : 1);
    check(fccl_barrier(half, NULL), "barrier on split group");
    report("split by parity, key = -rank, barrier", w0 == top, t0);
    fccl_group_destroy(half);
    free(evens);
}

static void usage(FILE *f)
{
    fputs("usage: fccl-run -n N fccl-demo\n"
          "Joins the job through env:// (MASTER_ADDR, MASTER_PORT, RANK, "
          "WORLD_SIZE, ...),\n"
          "runs all_reduce (sync and async), broadcast, uneven all_gather,\n"
          "reduce_scatter, all_to_all_v, a group made by rank list and one "
          "made by\n"
          "split, and checks every result; rank 0 prints one line per check.\n"
          "  -h, --help   this text\n"
          "  --version    print the version and exit\n"
          "Exit status: 0 when every result is right, 1 on a wrong result or "
          "a failed\n"
          "call, 2 on usage errors.\n",
          f);
}

/* Only --help and --version: anything else would be a mistake, since the
 * demo takes its whole job from the environment. */
static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(argv[i], "--version")) {
            printf("fccl-demo (fccl) %s\n", fccl_version());
            exit(0);
        }
        fprintf(stderr, "fccl-demo: unexpected argument '%s'\n", argv[i]);
        usage(stderr);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    fccl_group_t *world;
    fccl_init_opts_t o;
    fccl_init_opts_init(&o);
    uint64_t t0 = fccl_now_ns();
    check(fccl_init(&o, &world), "fccl_init");
    rank = fccl_get_rank();
    size = fccl_get_world_size();
    fccl_topology_t topo;
    fccl_get_topology(&topo);
    if (rank == 0)
        printf("fccl-demo: %d ranks on %d node(s), init %.1f ms\n", size,
               topo.node_count, (double)(fccl_now_ns() - t0) / 1e6);
    all_reduce_f32(world);
    all_reduce_max_async(world);
    broadcast_from_last(world);
    all_gather_uneven(world);
    reduce_scatter_f64(world);
    all_to_all_v(world);
    subgroups(world);
    uint64_t t1 = fccl_now_ns();
    check(fccl_barrier(world, NULL), "barrier");
    report("barrier", 1, t1);
    fccl_finalize();
    if (rank == 0)
        printf("fccl-demo: %s\n", failures ? "FAILED" : "all results correct");
    return failures ? 1 : 0;
}
