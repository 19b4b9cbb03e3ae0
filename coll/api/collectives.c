/*
 * Public collective entry points.
 *
 * Each call checks its arguments on the calling rank before anything is
 * sent (a mistake returns FCCL_ERR_INVALID here and never reaches the
 * wire), returns the group's sticky error or abort at once, and hands a
 * normalised `struct coll_args` to coll_submit (request.c), which runs it
 * inline or queues it; coll_execute (execute.c) then runs it.
 */
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "request.h"
#include "select.h"

/* ---- argument checks ---- */

static int bad(const char *op, const char *what)
{
    return fccl_err(FCCL_ERR_INVALID, "%s: %s", op, what);
}

static int check_group(const struct fccl_group *g, const char *op)
{
    if (!g || !g->state)
        return bad(op, "group is NULL or not set up");
    return FCCL_OK;
}

static int check_dtype(fccl_dtype_t dt, const char *op)
{
    if (fccl_dtype_size(dt) == 0)
        return fccl_err(FCCL_ERR_INVALID, "%s: unknown dtype %d", op, (int)dt);
    return FCCL_OK;
}

static int check_redop(fccl_dtype_t dt, fccl_redop_t rop, const char *op)
{
    int rc = coll_reduce_check(dt, rop);
    return rc < 0 ? fccl_err_wrap(rc, "%s", op) : FCCL_OK;
}

static int check_root(const struct fccl_group *g, int root, const char *op)
{
    if (root < 0 || root >= g->size)
        return fccl_err(FCCL_ERR_INVALID,
                        "%s: root %d out of range for group %s of %d ranks",
                        op, root, g->name, g->size);
    return FCCL_OK;
}

/* count elements times `blocks` must fit in size_t bytes. */
static int check_count(size_t count, size_t blocks, fccl_dtype_t dt,
                       const char *op)
{
    size_t es = fccl_dtype_size(dt);
    if (blocks && count > SIZE_MAX / es / blocks)
        return fccl_err(FCCL_ERR_INVALID, "%s: count %zu overflows", op, count);
    return FCCL_OK;
}

static int check_buf(const void *buf, size_t count, const char *op,
                     const char *name)
{
    if (!buf && count > 0)
        return fccl_err(FCCL_ERR_INVALID, "%s: %s is NULL", op, name);
    return FCCL_OK;
}

/* Prefix sums of n counts into out; FCCL_ERR_INVALID on overflow. */
static int prefix(const size_t *counts, int n, fccl_dtype_t dt, size_t *out,
                  size_t *total, const char *op)
{
    size_t t = 0, lim = SIZE_MAX / fccl_dtype_size(dt);
    for (int i = 0; i < n; i++) {
        if (counts[i] > lim - t)
            return fccl_err(FCCL_ERR_INVALID,
                            "%s: counts overflow at rank %d", op, i);
        out[i] = t;
        t += counts[i];
    }
    *total = t;
    return FCCL_OK;
}

/* Scratch for displacement arrays of this call (k arrays of n). */
static size_t *idx_arrays(struct fccl_group *g, int k)
{
    struct coll_state *st = g->state;
    size_t need = (size_t)k * (size_t)g->size;
    if (need > st->idx_cap) {
        size_t *p = realloc(st->idx, need * sizeof(size_t));
        if (!p)
            return NULL;
        st->idx = p;
        st->idx_cap = need;
    }
    return st->idx;
}

/* Last local checks (a bad FCCL_ALGO_<OP> is refused before the call
 * takes a sequence number), then run or queue. */
static int start(struct fccl_group *g, const struct coll_args *a,
                 fccl_request_t **req)
{
    if (g->state->forced[a->kind] == -2) {
        struct coll_run probe = {.g = g, .st = g->state, .a = a};
        int rc;
        coll_select(&probe, &rc);
        return rc;
    }
    int rc = coll_group_check(g);
    return rc < 0 ? rc : coll_submit(g, a, req);
}

/* Common preamble: the group, then the dtype. */
#define PRE(op, dt)                                                            \
    do {                                                                       \
        int rc_ = check_group(g, op);                                          \
        if (rc_ == FCCL_OK)                                                    \
            rc_ = check_dtype(dt, op);                                         \
        if (rc_ < 0)                                                           \
            return rc_;                                                        \
    } while (0)

#define TRY(expr)                                                              \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ < 0)                                                           \
            return rc_;                                                        \
    } while (0)

/* ---- collectives ----
 *
 * Each entry point spells out its own checks, in the order coll.h names
 * them for that call.  They read alike on purpose: a helper per family
 * (rooted, blocked, v) would hide which checks a call makes, and the
 * message must name the buffer and the side (root or not) it is about. */

int fccl_barrier(fccl_group_t *g, fccl_request_t **req)
{
    TRY(check_group(g, "barrier"));
    struct coll_args a = {.kind = COLL_BARRIER, .opname = "barrier",
                          .dtype = FCCL_UINT8};
    return start(g, &a, req);
}

int fccl_broadcast(void *buf, size_t count, fccl_dtype_t dtype, int root,
                   fccl_group_t *g, fccl_request_t **req)
{
    const char *op = "broadcast";
    PRE(op, dtype);
    TRY(check_root(g, root, op));
    TRY(check_count(count, 1, dtype, op));
    TRY(check_buf(buf, count, op, "buffer"));
    struct coll_args a = {.kind = COLL_BCAST, .opname = op, .sendbuf = buf,
                          .recvbuf = buf, .count = count, .dtype = dtype,
                          .root = root};
    return start(g, &a, req);
}

int fccl_reduce(const void *sendbuf, void *recvbuf, size_t count,
                fccl_dtype_t dtype, fccl_redop_t op, int root,
                fccl_group_t *g, fccl_request_t **req)
{
    const char *name = "reduce";
    PRE(name, dtype);
    TRY(check_redop(dtype, op, name));
    TRY(check_root(g, root, name));
    TRY(check_count(count, 1, dtype, name));
    TRY(check_buf(sendbuf, count, name, "sendbuf"));
    if (g->rank == root)
        TRY(check_buf(recvbuf, count, name, "recvbuf (on the root)"));
    struct coll_args a = {.kind = COLL_REDUCE, .opname = name,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .count = count, .dtype = dtype, .op = op,
                          .root = root};
    return start(g, &a, req);
}

int fccl_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                    fccl_dtype_t dtype, fccl_redop_t op, fccl_group_t *g,
                    fccl_request_t **req)
{
    const char *name = "all_reduce";
    PRE(name, dtype);
    TRY(check_redop(dtype, op, name));
    TRY(check_count(count, 1, dtype, name));
    TRY(check_buf(sendbuf, count, name, "sendbuf"));
    TRY(check_buf(recvbuf, count, name, "recvbuf"));
    struct coll_args a = {.kind = COLL_ALLREDUCE, .opname = name,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .count = count, .dtype = dtype, .op = op};
    return start(g, &a, req);
}

int fccl_all_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                    fccl_dtype_t dtype, fccl_group_t *g, fccl_request_t **req)
{
    const char *op = "all_gather";
    PRE(op, dtype);
    TRY(check_count(sendcount, (size_t)g->size, dtype, op));
    TRY(check_buf(sendbuf, sendcount, op, "sendbuf"));
    TRY(check_buf(recvbuf, sendcount, op, "recvbuf"));
    struct coll_args a = {.kind = COLL_ALLGATHER, .opname = op,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .count = sendcount, .dtype = dtype};
    return start(g, &a, req);
}

int fccl_all_gather_v(const void *sendbuf, size_t sendcount, void *recvbuf,
                      const size_t *recvcounts, fccl_dtype_t dtype,
                      fccl_group_t *g, fccl_request_t **req)
{
    const char *op = "all_gather_v";
    PRE(op, dtype);
    if (!recvcounts)
        return bad(op, "recvcounts is NULL");
    if (recvcounts[g->rank] != sendcount)
        return fccl_err(FCCL_ERR_INVALID,
                        "%s: sendcount %zu differs from recvcounts[%d] = %zu",
                        op, sendcount, g->rank, recvcounts[g->rank]);
    size_t *displs = idx_arrays(g, 1), total;
    if (!displs)
        return fccl_err(FCCL_ERR_NOMEM, "%s: no memory", op);
    TRY(prefix(recvcounts, g->size, dtype, displs, &total, op));
    TRY(check_buf(sendbuf, sendcount, op, "sendbuf"));
    TRY(check_buf(recvbuf, total, op, "recvbuf"));
    struct coll_args a = {.kind = COLL_ALLGATHER, .opname = op,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .counts = recvcounts, .displs = displs,
                          .dtype = dtype};
    return start(g, &a, req);
}

int fccl_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                        fccl_dtype_t dtype, fccl_redop_t op, fccl_group_t *g,
                        fccl_request_t **req)
{
    const char *name = "reduce_scatter";
    PRE(name, dtype);
    TRY(check_redop(dtype, op, name));
    TRY(check_count(recvcount, (size_t)g->size, dtype, name));
    TRY(check_buf(sendbuf, recvcount, name, "sendbuf"));
    TRY(check_buf(recvbuf, recvcount, name, "recvbuf"));
    struct coll_args a = {.kind = COLL_REDUCESCATTER, .opname = name,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .count = recvcount, .dtype = dtype, .op = op};
    return start(g, &a, req);
}

int fccl_reduce_scatter_v(const void *sendbuf, void *recvbuf,
                          const size_t *recvcounts, fccl_dtype_t dtype,
                          fccl_redop_t op, fccl_group_t *g,
                          fccl_request_t **req)
{
    const char *name = "reduce_scatter_v";
    PRE(name, dtype);
    TRY(check_redop(dtype, op, name));
    if (!recvcounts)
        return bad(name, "recvcounts is NULL");
    size_t *displs = idx_arrays(g, 1), total;
    if (!displs)
        return fccl_err(FCCL_ERR_NOMEM, "%s: no memory", name);
    TRY(prefix(recvcounts, g->size, dtype, displs, &total, name));
    TRY(check_buf(sendbuf, total, name, "sendbuf"));
    TRY(check_buf(recvbuf, recvcounts[g->rank], name, "recvbuf"));
    struct coll_args a = {.kind = COLL_REDUCESCATTER, .opname = name,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .counts = recvcounts, .displs = displs,
                          .dtype = dtype, .op = op};
    return start(g, &a, req);
}

int fccl_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                fccl_dtype_t dtype, int root, fccl_group_t *g,
                fccl_request_t **req)
{
    const char *op = "gather";
    PRE(op, dtype);
    TRY(check_root(g, root, op));
    TRY(check_count(sendcount, (size_t)g->size, dtype, op));
    TRY(check_buf(sendbuf, sendcount, op, "sendbuf"));
    if (g->rank == root)
        TRY(check_buf(recvbuf, sendcount, op, "recvbuf (on the root)"));
    struct coll_args a = {.kind = COLL_GATHER, .opname = op,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .count = sendcount, .dtype = dtype, .root = root};
    return start(g, &a, req);
}

int fccl_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                 fccl_dtype_t dtype, int root, fccl_group_t *g,
                 fccl_request_t **req)
{
    const char *op = "scatter";
    PRE(op, dtype);
    TRY(check_root(g, root, op));
    TRY(check_count(recvcount, (size_t)g->size, dtype, op));
    TRY(check_buf(recvbuf, recvcount, op, "recvbuf"));
    if (g->rank == root)
        TRY(check_buf(sendbuf, recvcount, op, "sendbuf (on the root)"));
    struct coll_args a = {.kind = COLL_SCATTER, .opname = op,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .count = recvcount, .dtype = dtype, .root = root};
    return start(g, &a, req);
}

int fccl_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                    fccl_dtype_t dtype, fccl_group_t *g, fccl_request_t **req)
{
    const char *op = "all_to_all";
    PRE(op, dtype);
    TRY(check_count(count, (size_t)g->size, dtype, op));
    TRY(check_buf(sendbuf, count, op, "sendbuf"));
    TRY(check_buf(recvbuf, count, op, "recvbuf"));
    struct coll_args a = {.kind = COLL_ALLTOALL, .opname = op,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .count = count, .dtype = dtype};
    return start(g, &a, req);
}

/* all_to_all_v and _v_c once the per-peer counts are known. */
static int a2a_v(const char *op, const void *sendbuf, const size_t *sc,
                 void *recvbuf, const size_t *rc, fccl_dtype_t dtype,
                 fccl_group_t *g, fccl_request_t **req, size_t *idx)
{
    size_t stot, rtot;
    TRY(prefix(sc, g->size, dtype, idx, &stot, op));
    TRY(prefix(rc, g->size, dtype, idx + g->size, &rtot, op));
    TRY(check_buf(sendbuf, stot, op, "sendbuf"));
    TRY(check_buf(recvbuf, rtot, op, "recvbuf"));
    struct coll_args a = {.kind = COLL_ALLTOALL, .opname = op,
                          .sendbuf = sendbuf, .recvbuf = recvbuf,
                          .scounts = sc, .sdispls = idx, .rcounts = rc,
                          .rdispls = idx + g->size, .dtype = dtype};
    return start(g, &a, req);
}

int fccl_all_to_all_v(const void *sendbuf, const size_t *sendcounts,
                      void *recvbuf, const size_t *recvcounts,
                      fccl_dtype_t dtype, fccl_group_t *g,
                      fccl_request_t **req)
{
    const char *op = "all_to_all_v";
    PRE(op, dtype);
    if (!sendcounts || !recvcounts)
        return bad(op, "sendcounts or recvcounts is NULL");
    if (sendcounts[g->rank] != recvcounts[g->rank])
        return fccl_err(FCCL_ERR_INVALID,
                        "%s: sendcounts[%d] = %zu but recvcounts[%d] = %zu "
                        "(what I send myself is what I receive)",
                        op, g->rank, sendcounts[g->rank], g->rank,
                        recvcounts[g->rank]);
    size_t *idx = idx_arrays(g, 2);
    if (!idx)
        return fccl_err(FCCL_ERR_NOMEM, "%s: no memory", op);
    return a2a_v(op, sendbuf, sendcounts, recvbuf, recvcounts, dtype, g, req,
                 idx);
}

int fccl_all_to_all_v_c(const void *sendbuf, void *recvbuf,
                        const size_t *send_count_matrix, fccl_dtype_t dtype,
                        fccl_group_t *g, fccl_request_t **req)
{
    const char *op = "all_to_all_v_c";
    PRE(op, dtype);
    if (!send_count_matrix)
        return bad(op, "send_count_matrix is NULL");
    size_t n = (size_t)g->size, me = (size_t)g->rank;
    size_t *idx = idx_arrays(g, 3);
    if (!idx)
        return fccl_err(FCCL_ERR_NOMEM, "%s: no memory", op);
    /* row me: what I send; column me: what I receive */
    size_t *rc = idx + 2 * n;
    for (size_t p = 0; p < n; p++)
        rc[p] = send_count_matrix[p * n + me];
    return a2a_v(op, sendbuf, send_count_matrix + me * n, recvbuf, rc, dtype,
                 g, req, idx);
}

/* Peers in range, each at most once; a send to myself needs a receive
 * from myself of the same size. */
static int check_peers(const fccl_group_t *g, const int *peers,
                       const size_t *counts, const void *const *bufs,
                       size_t k, fccl_dtype_t dt, const char *list)
{
    const char *op = "neighbor_exchange";
    if (k > 0 && (!peers || !counts || !bufs))
        return fccl_err(FCCL_ERR_INVALID, "%s: %s peers, counts or buffers "
                        "are NULL", op, list);
    for (size_t i = 0; i < k; i++) {
        if (peers[i] < 0 || peers[i] >= g->size)
            return fccl_err(FCCL_ERR_INVALID,
                            "%s: %s peer %d out of range for %d ranks", op,
                            list, peers[i], g->size);
        if (!bufs[i] && counts[i] > 0)
            return fccl_err(FCCL_ERR_INVALID, "%s: %s buffer %zu is NULL", op,
                            list, i);
        TRY(check_count(counts[i], 1, dt, op));
        for (size_t j = 0; j < i; j++)
            if (peers[j] == peers[i])
                return fccl_err(FCCL_ERR_INVALID,
                                "%s: %s peer %d listed twice", op, list,
                                peers[i]);
    }
    return FCCL_OK;
}

static long find_peer(const int *peers, size_t k, int p)
{
    for (size_t i = 0; i < k; i++)
        if (peers[i] == p)
            return (long)i;
    return -1;
}

int fccl_neighbor_exchange(const int *send_peers, const void *const *send_bufs,
                           const size_t *send_counts, size_t nsend,
                           const int *recv_peers, void *const *recv_bufs,
                           const size_t *recv_counts, size_t nrecv,
                           fccl_dtype_t dtype, fccl_group_t *g,
                           fccl_request_t **req)
{
    const char *op = "neighbor_exchange";
    PRE(op, dtype);
    TRY(check_peers(g, send_peers, send_counts, send_bufs, nsend, dtype,
                    "send"));
    TRY(check_peers(g, recv_peers, recv_counts, (const void *const *)recv_bufs,
                    nrecv, dtype, "recv"));
    long si = find_peer(send_peers, nsend, g->rank);
    long ri = find_peer(recv_peers, nrecv, g->rank);
    if ((si >= 0) != (ri >= 0) ||
        (si >= 0 && send_counts[si] != recv_counts[ri]))
        return bad(op, "a send to myself needs a receive from myself of the "
                       "same count");
    struct coll_args a = {.kind = COLL_NEIGHBOR, .opname = op,
                          .dtype = dtype, .send_peers = send_peers,
                          .send_bufs = send_bufs, .send_counts = send_counts,
                          .nsend = nsend, .recv_peers = recv_peers,
                          .recv_bufs = recv_bufs, .recv_counts = recv_counts,
                          .nrecv = nrecv};
    return start(g, &a, req);
}
