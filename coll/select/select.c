/*
 * Algorithm tables and the selector.
 *
 * Each operation has a table {id, name, description, fn}; FCCL_ALGO_<OP>
 * (e.g. FCCL_ALGO_ALL_REDUCE=ring) or fccl_set_algo() forces an entry by
 * name, otherwise the selector picks one from the message size, the rank
 * count and the topology.  The thresholds come from fccl-bench runs on shm
 * with 2 and 4 ranks on a 2-core host (oversubscription makes every extra
 * round expensive, which favours recursive doubling up to ~1 MiB); every
 * rank computes the same choice from the same arguments, which the
 * algorithms rely on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "algos.h"
#include "select.h"

static const struct coll_algo allreduce_algos[] = {
    {0, "rd", "recursive doubling; log(n) steps, full vector each", coll_allreduce_rd},
    {1, "ring", "ring reduce-scatter + ring all-gather, pipelined", coll_allreduce_ring},
    {2, "rabenseifner", "recursive halving reduce-scatter + doubling all-gather",
     coll_allreduce_rabenseifner},
    {3, "hier", "two levels: hier_leaders for small vectors, hier2d for "
     "large ones on hosts of equal rank counts", coll_allreduce_hier},
    {4, "shm", "through a segment shared by a one-host group", coll_allreduce_shm},
    {5, "hier2d", "host reduce-scatter, slices all-reduced across hosts, host "
     "all-gather (hier_leaders if hosts differ in rank count)", coll_allreduce_hier},
    {6, "hier_leaders", "reduce to host leaders, leaders all-reduce, host "
     "broadcast", coll_allreduce_hier_leaders},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo bcast_algos[] = {
    {0, "binomial", "pipelined binomial tree", coll_bcast_binomial},
    {1, "scatter_ag", "binomial scatter + ring all-gather", coll_bcast_scatter_ag},
    {2, "shm", "through a segment shared by a one-host group", coll_bcast_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo reduce_algos[] = {
    {0, "binomial", "pipelined binomial tree", coll_reduce_binomial},
    {1, "shm", "through a segment shared by a one-host group", coll_reduce_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo allgather_algos[] = {
    {0, "ring", "pipelined ring", coll_allgather_ring},
    {1, "bruck", "Bruck: ceil(log n) rounds", coll_allgather_bruck},
    {2, "shm", "through a segment shared by a one-host group", coll_allgather_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo reducescatter_algos[] = {
    {0, "ring", "pipelined ring", coll_reducescatter_ring},
    {1, "shm", "through a segment shared by a one-host group",
     coll_reducescatter_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo alltoall_algos[] = {
    {0, "pairwise", "n-1 rounds of one exchange", coll_alltoall_pairwise},
    {1, "linear", "all sends and receives at once", coll_alltoall_linear},
    {2, "shm", "small even blocks through a one-host group's segment",
     coll_alltoall_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo barrier_algos[] = {
    {0, "dissemination", "ceil(log n) rounds of tokens", coll_barrier_dissemination},
    {1, "shm", "counters in a segment shared by a one-host group", coll_barrier_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo gather_algos[] = {
    {0, "linear", "all ranks send to the root at once", coll_gather_linear},
    {1, "shm", "small blocks through a one-host group's segment", coll_gather_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo scatter_algos[] = {
    {0, "linear", "the root sends to all ranks at once", coll_scatter_linear},
    {1, "shm", "small blocks through a one-host group's segment", coll_scatter_shm},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo neighbor_algos[] = {
    {0, "direct", "all sends and receives at once", coll_neighbor_exchange},
    {0, NULL, NULL, NULL},
};

static const struct coll_algo neighbor_v2_algos[] = {
    {0, "direct", "pack the blocks, all sends and receives at once, unpack",
     coll_neighbor_exchange_v2},
    {0, NULL, NULL, NULL},
};

/* all_to_all's algorithms, with the packing of the shaped layout around
 * them (alltoall_dims.c); picked as for all_to_all */
static const struct coll_algo alltoall_dims_algos[] = {
    {0, "pairwise", "pack, n-1 rounds of one exchange, unpack",
     coll_alltoall_dims_pairwise},
    {1, "linear", "pack, all sends and receives at once, unpack",
     coll_alltoall_dims_linear},
    {2, "shm", "pack, small blocks through a one-host group's segment, "
     "unpack", coll_alltoall_dims_shm},
    {0, NULL, NULL, NULL},
};

static const struct {
    const char *name, *env;
    const struct coll_algo *algos;
} kinds[COLL_NUM_KINDS] = {
    [COLL_BARRIER] = {"barrier", "BARRIER", barrier_algos},
    [COLL_BCAST] = {"broadcast", "BROADCAST", bcast_algos},
    [COLL_REDUCE] = {"reduce", "REDUCE", reduce_algos},
    [COLL_ALLREDUCE] = {"all_reduce", "ALL_REDUCE", allreduce_algos},
    [COLL_ALLGATHER] = {"all_gather", "ALL_GATHER", allgather_algos},
    [COLL_REDUCESCATTER] = {"reduce_scatter", "REDUCE_SCATTER",
                            reducescatter_algos},
    [COLL_GATHER] = {"gather", "GATHER", gather_algos},
    [COLL_SCATTER] = {"scatter", "SCATTER", scatter_algos},
    [COLL_ALLTOALL] = {"all_to_all", "ALL_TO_ALL", alltoall_algos},
    [COLL_NEIGHBOR] = {"neighbor_exchange", "NEIGHBOR_EXCHANGE", neighbor_algos},
    [COLL_NEIGHBOR_V2] = {"neighbor_exchange_v2", "NEIGHBOR_EXCHANGE_V2",
                          neighbor_v2_algos},
    [COLL_ALLTOALL_DIMS] = {"all_to_all_dims", "ALL_TO_ALL_DIMS",
                            alltoall_dims_algos},
};

const char *coll_kind_env(enum coll_kind k) { return kinds[k].env; }
const char *coll_kind_name(enum coll_kind k) { return kinds[k].name; }
const struct coll_algo *coll_algos(enum coll_kind k) { return kinds[k].algos; }

/* "all_reduce", "allreduce", "ALL_REDUCE" all name the same kind. */
static int name_eq(const char *a, const char *b)
{
    for (;; a++, b++) {
        while (*a == '_' || *a == '-')
            a++;
        while (*b == '_' || *b == '-')
            b++;
        if ((*a | 0x20) != (*b | 0x20))
            return 0;
        if (!*a)
            return 1;
    }
}

int coll_kind_parse(const char *name)
{
    if (!name)
        return -1;
    for (int k = 0; k < COLL_NUM_KINDS; k++)
        if (name_eq(name, kinds[k].name))
            return k;
    if (name_eq(name, "bcast"))
        return COLL_BCAST;
    if (name_eq(name, "alltoall"))
        return COLL_ALLTOALL;
    return -1;
}

int coll_algo_find(enum coll_kind k, const char *name)
{
    const struct coll_algo *t = kinds[k].algos;
    for (int i = 0; name && t[i].name; i++)
        if (strcasecmp(t[i].name, name) == 0)
            return i;
    return -1;
}

void coll_algo_list(enum coll_kind k, char *buf, size_t len)
{
    const struct coll_algo *t = kinds[k].algos;
    size_t off = 0;
    buf[0] = '\0';
    for (int i = 0; t[i].name && off < len; i++) {
        int w = snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
                         t[i].name);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

/* Value of forced[]: an index, -1 for automatic, -2 for a bad name. */
static int parse_choice(enum coll_kind k, const char *name)
{
    if (!name || !*name || strcasecmp(name, "auto") == 0)
        return -1;
    int i = coll_algo_find(k, name);
    return i >= 0 ? i : -2;
}

void coll_algo_env(struct coll_state *st)
{
    for (int k = 0; k < COLL_NUM_KINDS; k++) {
        char var[64];
        snprintf(var, sizeof(var), "FCCL_ALGO_%s", kinds[k].env);
        const char *val = getenv(var);
        st->forced[k] = parse_choice((enum coll_kind)k, val);
        snprintf(st->forced_bad[k], sizeof(st->forced_bad[k]), "%s",
                 st->forced[k] == -2 ? val : "");
    }
}

int fccl_set_algo(fccl_group_t *g, const char *op, const char *algo)
{
    if (!g || !g->state)
        return fccl_err(FCCL_ERR_INVALID, "set_algo: group is NULL");
    int k = coll_kind_parse(op);
    if (k < 0)
        return fccl_err(FCCL_ERR_INVALID, "set_algo: unknown operation '%s'",
                        op ? op : "(null)");
    int i = parse_choice((enum coll_kind)k, algo);
    if (i == -2) {
        char list[256];
        coll_algo_list((enum coll_kind)k, list, sizeof(list));
        return fccl_err(FCCL_ERR_INVALID,
                        "set_algo: unknown %s algorithm '%s' (choices: auto, %s)",
                        kinds[k].name, algo, list);
    }
    g->state->forced[k] = i;
    g->state->forced_bad[k][0] = '\0';
    return FCCL_OK;
}

/* ---- automatic choice ---- */

static size_t total_bytes(const struct coll_args *a, int n)
{
    size_t es = fccl_dtype_size(a->dtype);
    if (!a->counts)
        return a->count * es * (size_t)n;
    size_t t = 0;
    for (int i = 0; i < n; i++)
        t += a->counts[i];
    return t * es;
}

/* Several hosts with more than one rank on some: worth going through the
 * leaders. */
static int multi_host(const struct fccl_group *g)
{
    return g->nnodes > 1 && g->nnodes < g->size;
}

/* All members on this host, reached through shared memory (a network
 * provider the user forced is honoured). */
static int one_host_shm(const struct fccl_group *g)
{
    if (g->nnodes != 1 || g->size < 2)
        return 0;
    for (int q = 0; q < g->size; q++)
        if (q != g->rank && !tp_peer_is_local(g->tp, g->world[q]))
            return 0;
    return 1;
}

/* The choice among the algorithms that go through the transport. */
static int transport_allreduce(const struct coll_run *run)
{
    const struct fccl_group *g = run->g;
    size_t bytes = run->a->count * fccl_dtype_size(run->a->dtype);
    int n = g->size;
    /* hier: only leaders cross hosts, and each host's stages go through
     * its shared segment.  Namespace hosts on 2 cores (fccl-bench medians,
     * us): 2x3 ranks, hier against rd 8 B 195-235 vs 282-294, 4 KiB
     * 159-171 vs 187-308, 64 KiB 363-438 vs 628-939 (ring 1166, Rab.
     * 1040), 1 MiB 2246 vs 7272 (ring 5821, Rab. 3294); 2x2 ranks, 8 B-2
     * KiB 664-785 vs 820-939.  (Without a host segment its stages are
     * binomial trees over the transport; whether a host has one is not
     * known on the other hosts, and every rank must choose alike, so it
     * is hier regardless.) */
    if (multi_host(g))
        return 3;
    /* Thresholds measured on shm, 2 cores (bench/RESULTS.md): with 4 or
     * more ranks, Rabenseifner beats recursive doubling from 256 KiB and
     * ring up to 4 MiB (n = 4) or 2 MiB (n = 8).  Two ranks on two hosts:
     * the ring's two half-size exchanges beat one whole one from 512 KiB
     * (namespace hosts, fccl-bench, 5 launches, median us: 512 KiB 250-276
     * vs 419-484, 1 MiB 743-749 vs 786-988; 256 KiB level). */
    size_t rd_max = n == 2 ? (g->nnodes == 2 ? 256 << 10 : (size_t)1 << 20)
                  : n <= 4 ? 128 << 10 : 256 << 10;
    if (n == 1 || bytes <= rd_max)
        return 0; /* rd */
    if (n > 2 && bytes <= (n <= 4 ? (size_t)4 << 20 : (size_t)2 << 20))
        return 2; /* rabenseifner */
    return 1;     /* ring */
}

/* On one host the shared segment, at every size and rank count.  From 3
 * ranks between 512 KiB and 4 MiB an earlier machine had Rabenseifner's
 * pairwise steps through the transport 1.2-2x faster; measured again on
 * another (2 cores, fccl-bench, us, interleaved launches) they were
 * 1.9-5.5x slower idle (4 ranks 1 MiB 870-1,220 against 230-430, 4 MiB
 * 3,080-4,050 against 1,160-1,850; 3 ranks 1 MiB 670-1,100 against
 * 310-320; 8 ranks 1 MiB 5x) and 1.8-28x slower with busy loops (4 ranks
 * 1 MiB 3,180-4,600 against 450-510), where the segment also beat Open
 * MPI by 1.8-3.1x idle and 8-11x under load.  At 2 ranks, since the
 * segment moves at most 512 KiB a round (coll_seg_round), it is ahead of
 * recursive doubling's single copy at 1-4 MiB too (1 MiB 95 against
 * 121-134 us, 4 MiB 402-410 against 616-663); in whole-slot rounds it had
 * been ahead or 2x behind as the machine's phase changed.
 * bench/RESULTS.md, "the one-host all_reduce keeps the segment" and "the
 * segment's rounds". */
static int auto_allreduce(const struct coll_run *run)
{
    if (!one_host_shm(run->g))
        return transport_allreduce(run);
    return 4;
}

const struct coll_algo *coll_select_fallback(struct coll_run *run, int *rc)
{
    *rc = FCCL_OK;
    if (run->a->kind == COLL_ALLREDUCE)
        return &allreduce_algos[transport_allreduce(run)];
    *rc = fccl_err(FCCL_ERR_STATE, "%s[%s] on %s: internal: no fallback for "
                   "this operation", run->a->opname,
                   run->algo ? run->algo : "?", run->g->name);
    return NULL;
}

static int auto_choice(const struct coll_run *run)
{
    const struct coll_args *a = run->a;
    int n = run->g->size;
    size_t bytes = a->count * fccl_dtype_size(a->dtype);
    switch (a->kind) {
    case COLL_ALLREDUCE: return auto_allreduce(run);
    case COLL_BCAST:
        /* shm, on the same grounds as all_gather; two ranks beyond the
         * one-barrier size: its split single copy (CMA), else binomial,
         * whose single copy beats the segment's two memcpys there */
        if (one_host_shm(run->g))
            return 2;
        return n > 2 && bytes >= 512 * 1024 ? 1 : 0;
    case COLL_BARRIER:
        /* the segment, once another operation has made one or from the
         * group's second barrier on: the first alone (fccl_init's) is
         * not worth setting it up, a program's barriers are (2 ranks, a
         * loop of barriers: 0.44-0.51 us each against the tokens'
         * 1.29-1.34) */
        return (run->st->seg || run->st->barriers > 0) &&
               one_host_shm(run->g) ? 1 : 0;
    case COLL_ALLGATHER:
        /* shm: one barrier for small blocks; with 3+ ranks it beat the
         * ring at every size measured; blocks up to 512 KiB take its
         * single copy through the segment (CMA; at two ranks the ring
         * where CMA is not allowed), larger ones its 512 KiB rounds
         * (bench/RESULTS.md, issue 28 and "Large all_gather and
         * all_to_all through the slots") */
        if (one_host_shm(run->g))
            return 2;
        /* With one rank per host, Bruck's log n rounds beat the ring's
         * n - 1 up to 1 MiB (4 namespace hosts on 2 cores, fccl-bench, 3
         * launches each, us: 256 KiB 286-364 vs 406-561, 1 MiB 1113-1544
         * vs 1320-1918; the ring from 2 MiB: 4 MiB 5011-6780 vs
         * 6370-7094).  With several ranks per host the ring, whose
         * neighbours are mostly on the same host, kept up (2x2, bench/
         * RESULTS.md). */
        size_t bruck_max = run->g->nnodes == n ? (size_t)1 << 20 : 64 << 10;
        /* Two ranks: both make the same single exchange, but Bruck also
         * copies through scratch (2 hosts, 8 B-64 KiB medians: ring 16-43
         * us, Bruck 17-51) */
        return n > 2 && total_bytes(a, n) <= bruck_max ? 1 : 0;
    case COLL_REDUCE:
        /* shm copies everyone's vector in; the tree moves n-1 of them:
         * 4 ranks, shm 5.8 us at 8 B and 0.32 ms at 512 KiB against the
         * tree's 12.1 and 0.73, but 5.5 ms at 8 MiB against 3.8 */
        return one_host_shm(run->g) &&
               (bytes <= COLL_SHM_SMALL || (n > 2 && bytes <= 1u << 20));
    case COLL_GATHER:
    case COLL_SCATTER:
        return one_host_shm(run->g) && bytes <= COLL_SHM_SMALL;
    case COLL_REDUCESCATTER: /* as all_gather */
        return one_host_shm(run->g) &&
               (n > 2 || total_bytes(a, n) <= (size_t)n * (COLL_SHM_SMALL));
    case COLL_ALLTOALL:
    case COLL_ALLTOALL_DIMS: /* the same table order; count is the slice */
        if (one_host_shm(run->g) && !a->scounts && !a->rcounts &&
            !a->sdispls && !a->rdispls &&
            (bytes <= COLL_SHM_SMALL || a->kind == COLL_ALLTOALL))
            return 2; /* shm: small even blocks through the segment,
                       * up to 512 KiB by its single copy (or as below
                       * without CMA), larger ones in its rounds */
        return coll_a2a_linear_fits(n, bytes) ? 1 : 0;
    default: return 0;
    }
}

const char *coll_algo_for(struct fccl_group *g, const char *op, size_t count,
                          fccl_dtype_t dtype, int root)
{
    /* all_to_all_v shares all_to_all's choice, made for per-peer counts */
    int v = op && name_eq(op, "all_to_all_v");
    int k = v ? COLL_ALLTOALL : coll_kind_parse(op);
    if (!g || !g->state || k < 0)
        return "-";
    struct coll_args a = {.kind = (enum coll_kind)k, .opname = op,
                          .count = v ? 0 : count, .dtype = dtype,
                          .root = root};
    if (v)
        a.scounts = a.rcounts = &count;
    struct coll_run probe = {.g = g, .st = g->state, .a = &a};
    int rc;
    const struct coll_algo *al = coll_select(&probe, &rc);
    return al ? al->name : "?";
}

const struct coll_algo *coll_select(struct coll_run *run, int *rc)
{
    enum coll_kind k = run->a->kind;
    int f = run->st->forced[k];
    if (f == -2) {
        char list[256];
        coll_algo_list(k, list, sizeof(list));
        *rc = fccl_err(FCCL_ERR_INVALID,
                       "FCCL_ALGO_%s=%s: unknown algorithm (choices: auto, %s)",
                       kinds[k].env, run->st->forced_bad[k], list);
        return NULL;
    }
    *rc = FCCL_OK;
    return &kinds[k].algos[f >= 0 ? f : auto_choice(run)];
}
