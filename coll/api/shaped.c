/*
 * Public collectives on shaped tensors: neighbor_exchange_v2 (MindSpore's
 * NeighborExchangeV2) and all_to_all_dims (AlltoAll with split_count,
 * split_dim and concat_dim), and their shape helpers.
 *
 * The checks are the seed's (mindspore/ops/operations/comm_ops.py and
 * the C++ infer of NeighborExchangeV2: ids >= -1 and not repeated, lens
 * >= 0, the corner rule, send lens within the input, NCHW only;
 * split_count equal to the group size, the split dimension divisible by
 * it), in that order, each an FCCL_ERR_INVALID naming the argument, all
 * made before the call takes its place in the group's order.  The
 * checked, normalised shape travels by value in coll_args to the
 * algorithms (algo/neighbor_halo.c, algo/alltoall_dims.c).
 */
#include <stdint.h>
#include <stdio.h>

#include "algos.h"
#include "request.h"
#include "select.h"

#define NBR "neighbor_exchange_v2"
#define A2A "all_to_all_dims"

static const char *const dir_name[8] = {
    "top", "top_right", "right", "bottom_right",
    "bottom", "bottom_left", "left", "top_left"};
static const char *const side_name[4] = {"top", "bottom", "left", "right"};

/* ---- shared ---- */

/* Elements of a shape; FCCL_ERR_INVALID when the bytes overflow. */
static int elems_of(const size_t *dims, int nd, size_t es, size_t *out,
                    const char *op, const char *what)
{
    size_t n = 1;
    for (int i = 0; i < nd; i++) {
        if (dims[i] && n > SIZE_MAX / es / dims[i])
            return fccl_err(FCCL_ERR_INVALID, "%s: the %s's size overflows "
                            "(dims[%d] = %zu)", op, what, i, dims[i]);
        n *= dims[i];
    }
    *out = n;
    return FCCL_OK;
}

/* Group and dtype first, as the other collectives. */
static int pre(const struct fccl_group *g, fccl_dtype_t dt, const char *op)
{
    if (!g || !g->state)
        return fccl_err(FCCL_ERR_INVALID, "%s: group is NULL or not set up",
                        op);
    if (fccl_dtype_size(dt) == 0)
        return fccl_err(FCCL_ERR_INVALID, "%s: unknown dtype %d", op, (int)dt);
    return FCCL_OK;
}

/* A bad FCCL_ALGO_<OP> is refused before the call takes a sequence
 * number (as collectives.c's start), then run or queue. */
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

#define TRY(expr)                                                              \
    do {                                                                       \
        int rc_ = (expr);                                                      \
        if (rc_ < 0)                                                           \
            return rc_;                                                        \
    } while (0)

/* ---- neighbor_exchange_v2 ---- */

/* The seed's CheckIdsValue (and, with a group, its Python range check):
 * each id -1 or a rank, none twice. */
static int check_ids(const int *ids, const char *list, int size)
{
    if (!ids)
        return fccl_err(FCCL_ERR_INVALID, NBR ": %s is NULL", list);
    for (int d = 0; d < 8; d++) {
        if (ids[d] < -1)
            return fccl_err(FCCL_ERR_INVALID,
                            NBR ": %s[%d] (%s) = %d: all the rank ids must "
                            "be >= 0 or -1 for no neighbour", list, d,
                            dir_name[d], ids[d]);
        if (size > 0 && ids[d] >= size)
            return fccl_err(FCCL_ERR_INVALID,
                            NBR ": %s[%d] (%s) = %d out of range for a group "
                            "of %d ranks (0..%d, or -1 for no neighbour)",
                            list, d, dir_name[d], ids[d], size, size - 1);
        for (int e = 0; e < d; e++)
            if (ids[d] != -1 && ids[e] == ids[d])
                return fccl_err(FCCL_ERR_INVALID,
                                NBR ": %s can not repeat a rank, but rank %d "
                                "is in [%d] (%s) and [%d] (%s)", list, ids[d],
                                e, dir_name[e], d, dir_name[d]);
    }
    return FCCL_OK;
}

static int check_lens(const int64_t *lens, const char *list)
{
    if (!lens)
        return fccl_err(FCCL_ERR_INVALID, NBR ": %s is NULL", list);
    for (int i = 0; i < 4; i++)
        if (lens[i] < 0)
            return fccl_err(FCCL_ERR_INVALID,
                            NBR ": %s[%d] (%s) = %lld: lengths must be >= 0",
                            list, i, side_name[i], (long long)lens[i]);
    return FCCL_OK;
}

/* The seed's CheckRecvCorner: a corner has a rank exactly when both of
 * its sides have one. */
static int check_corners(const int *r)
{
    static const int corner[4][3] = {{FCCL_NBR_TOP, FCCL_NBR_RIGHT,
                                      FCCL_NBR_TOP_RIGHT},
                                     {FCCL_NBR_RIGHT, FCCL_NBR_BOTTOM,
                                      FCCL_NBR_BOTTOM_RIGHT},
                                     {FCCL_NBR_BOTTOM, FCCL_NBR_LEFT,
                                      FCCL_NBR_BOTTOM_LEFT},
                                     {FCCL_NBR_LEFT, FCCL_NBR_TOP,
                                      FCCL_NBR_TOP_LEFT}};
    for (int i = 0; i < 4; i++) {
        int a = corner[i][0], b = corner[i][1], c = corner[i][2];
        int sides = r[a] != -1 && r[b] != -1;
        if (sides != (r[c] != -1))
            return fccl_err(FCCL_ERR_INVALID,
                            NBR ": recv_rank_ids[%d] (%s) = %d but "
                            "recv_rank_ids[%d] (%s) = %d and [%d] (%s) = %d: "
                            "a corner has a rank exactly when both of its "
                            "sides have one",
                            c, dir_name[c], r[c], a, dir_name[a], r[a], b,
                            dir_name[b], r[b]);
    }
    return FCCL_OK;
}

/* Everything that needs no group; fills s (normalised receive lengths). */
static int nbr_shape(const size_t *dims, size_t ndim, const int *sid,
                     const int64_t *slen, const int *rid, const int64_t *rlen,
                     int size, struct coll_shape *s)
{
    TRY(sid ? check_ids(sid, "send_rank_ids", size) : FCCL_OK);
    TRY(check_ids(rid, "recv_rank_ids", size));
    TRY(sid ? check_lens(slen, "send_lens") : FCCL_OK);
    TRY(check_lens(rlen, "recv_lens"));
    TRY(check_corners(rid));
    if (!dims || ndim != 4)
        return fccl_err(FCCL_ERR_INVALID,
                        NBR ": the input must be 4-D (data_format NCHW, the "
                        "only one), but got %s%zu dims",
                        dims ? "" : "dims NULL, ", ndim);
    for (int i = 0; sid && i < 4; i++)
        if ((uint64_t)slen[i] > dims[i < 2 ? 2 : 3])
            return fccl_err(FCCL_ERR_INVALID,
                            NBR ": send_lens[%d] (%s) = %lld is more than "
                            "the input's %s (%zu)", i, side_name[i],
                            (long long)slen[i], i < 2 ? "H" : "W",
                            dims[i < 2 ? 2 : 3]);
    static const int side_dir[4] = {FCCL_NBR_TOP, FCCL_NBR_BOTTOM,
                                    FCCL_NBR_LEFT, FCCL_NBR_RIGHT};
    s->ndim = 4;
    for (int i = 0; i < 4; i++) {
        s->dims[i] = dims[i];
        if ((uint64_t)rlen[i] > SIZE_MAX / 4)
            return fccl_err(FCCL_ERR_INVALID, NBR ": recv_lens[%d] = %lld "
                            "overflows", i, (long long)rlen[i]);
        s->recv_lens[i] = rid[side_dir[i]] == -1 ? 0 : (size_t)rlen[i];
        s->send_lens[i] = sid ? (size_t)slen[i] : 0;
    }
    for (int d = 0; d < 8; d++) {
        s->send_ids[d] = sid ? sid[d] : -1;
        s->recv_ids[d] = rid[d];
    }
    if (dims[2] > SIZE_MAX / 4 || dims[3] > SIZE_MAX / 4)
        return fccl_err(FCCL_ERR_INVALID, NBR ": the input's H or W "
                        "overflows");
    return FCCL_OK;
}

int fccl_neighbor_exchange_v2_shape(const size_t *dims, size_t ndim,
                                    const int *send_rank_ids,
                                    const int64_t *send_lens,
                                    const int *recv_rank_ids,
                                    const int64_t *recv_lens,
                                    size_t *out_dims)
{
    struct coll_shape s;
    if (!out_dims)
        return fccl_err(FCCL_ERR_INVALID, NBR "_shape: out_dims is NULL");
    TRY(nbr_shape(dims, ndim, send_rank_ids, send_lens, recv_rank_ids,
                  recv_lens, 0, &s));
    coll_nbr_v2_out_dims(&s, out_dims);
    return FCCL_OK;
}

/* Elements of the block of direction d (sent: recv = 0). */
static size_t nbr_block(const struct coll_shape *s, int d, int recv)
{
    static const int rows[8] = {0, 0, 1, 2, 2, 2, 1, 0};
    static const int cols[8] = {1, 2, 2, 2, 1, 0, 0, 0};
    const size_t *l = recv ? s->recv_lens : s->send_lens;
    size_t h = rows[d] == 1 ? s->dims[2] : l[rows[d] == 0 ? 0 : 1];
    size_t w = cols[d] == 1 ? s->dims[3] : l[cols[d] == 0 ? 2 : 3];
    return s->dims[0] * s->dims[1] * h * w;
}

/* A send to myself needs a receive from myself of the same count. */
static int check_self(const struct coll_shape *s, int me)
{
    int si = -1, ri = -1;
    for (int d = 0; d < 8; d++) {
        si = s->send_ids[d] == me ? d : si;
        ri = s->recv_ids[d] == me ? d : ri;
    }
    if ((si < 0) != (ri < 0))
        return fccl_err(FCCL_ERR_INVALID,
                        NBR ": rank %d is its own neighbour in %s[%d] but "
                        "not in %s_rank_ids (a send to myself needs a "
                        "receive from myself)", me,
                        si >= 0 ? "send_rank_ids" : "recv_rank_ids",
                        si >= 0 ? si : ri, si >= 0 ? "recv" : "send");
    if (si >= 0 && nbr_block(s, si, 0) != nbr_block(s, ri, 1))
        return fccl_err(FCCL_ERR_INVALID,
                        NBR ": rank %d sends itself %zu elements (%s) but "
                        "receives %zu (%s)", me, nbr_block(s, si, 0),
                        dir_name[si], nbr_block(s, ri, 1), dir_name[ri]);
    return FCCL_OK;
}

static int overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen && blen && x < y + blen && y < x + alen;
}

int fccl_neighbor_exchange_v2(const void *sendbuf, const size_t *dims,
                              size_t ndim, void *recvbuf,
                              const int *send_rank_ids,
                              const int64_t *send_lens,
                              const int *recv_rank_ids,
                              const int64_t *recv_lens, fccl_dtype_t dtype,
                              fccl_group_t *g, fccl_request_t **req)
{
    TRY(pre(g, dtype, NBR));
    struct coll_args a = {.kind = COLL_NEIGHBOR_V2, .opname = NBR,
                          .dtype = dtype};
    if (!send_rank_ids)
        return fccl_err(FCCL_ERR_INVALID, NBR ": send_rank_ids is NULL");
    TRY(nbr_shape(dims, ndim, send_rank_ids, send_lens, recv_rank_ids,
                  recv_lens, g->size, &a.shape));
    size_t es = fccl_dtype_size(dtype), in = 0, out = 0, od[4];
    coll_nbr_v2_out_dims(&a.shape, od);
    TRY(elems_of(a.shape.dims, 4, es, &in, NBR, "input"));
    TRY(elems_of(od, 4, es, &out, NBR, "output"));
    if ((!sendbuf && in) || (!recvbuf && out))
        return fccl_err(FCCL_ERR_INVALID, NBR ": %s is NULL",
                        !sendbuf && in ? "sendbuf" : "recvbuf");
    if (overlap(sendbuf, in * es, recvbuf, out * es))
        return fccl_err(FCCL_ERR_INVALID, NBR ": recvbuf overlaps sendbuf "
                        "(the output is larger: no in-place form)");
    TRY(check_self(&a.shape, g->rank));
    a.sendbuf = sendbuf;
    a.recvbuf = recvbuf;
    a.count = in;
    return start(g, &a, req);
}

/* ---- all_to_all_dims ---- */

/* Everything that needs no group; split_count only >= 1 (size 0) or the
 * group size. */
static int a2a_shape(const size_t *dims, size_t ndim, int split_count,
                     int split_dim, int concat_dim, int size,
                     struct coll_shape *s)
{
    if (!dims || ndim < 1 || ndim > COLL_MAX_DIMS)
        return fccl_err(FCCL_ERR_INVALID,
                        A2A ": %s (ndim %zu: 1..%d dims)",
                        dims ? "bad ndim" : "dims is NULL", ndim,
                        COLL_MAX_DIMS);
    if (size == 0 && split_count < 1)
        return fccl_err(FCCL_ERR_INVALID, A2A ": split_count %d: must be "
                        "the group size (>= 1)", split_count);
    if (size > 0 && split_count != size)
        return fccl_err(FCCL_ERR_INVALID,
                        A2A ": the 'split_count' must be equal to "
                        "'rank_size', but got 'split_count': %d, "
                        "'rank_size': %d", split_count, size);
    int nd = (int)ndim;
    if (split_dim < -nd || split_dim >= nd)
        return fccl_err(FCCL_ERR_INVALID, A2A ": split_dim %d out of range "
                        "for %d dims (-%d..%d)", split_dim, nd, nd, nd - 1);
    if (concat_dim < -nd || concat_dim >= nd)
        return fccl_err(FCCL_ERR_INVALID, A2A ": concat_dim %d out of range "
                        "for %d dims (-%d..%d)", concat_dim, nd, nd, nd - 1);
    s->ndim = nd;
    s->split_dim = split_dim < 0 ? split_dim + nd : split_dim;
    s->concat_dim = concat_dim < 0 ? concat_dim + nd : concat_dim;
    for (int i = 0; i < nd; i++)
        s->dims[i] = dims[i];
    size_t n = (size_t)split_count;
    if (dims[s->split_dim] % n != 0)
        return fccl_err(FCCL_ERR_INVALID,
                        A2A ": the 'x_shape[split_dim]' must be divisible "
                        "by 'split_count', but got x_shape[%d] %zu, "
                        "'split_count' %d", s->split_dim, dims[s->split_dim],
                        split_count);
    if (s->split_dim != s->concat_dim && dims[s->concat_dim] > SIZE_MAX / n)
        return fccl_err(FCCL_ERR_INVALID, A2A ": the output's dims[%d] "
                        "overflows (%zu x %d)", s->concat_dim,
                        dims[s->concat_dim], split_count);
    return FCCL_OK;
}

static void a2a_out(const struct coll_shape *s, size_t n, size_t *out)
{
    for (int i = 0; i < s->ndim; i++)
        out[i] = s->dims[i];
    out[s->split_dim] /= n;
    out[s->concat_dim] *= n;
}

int fccl_all_to_all_dims_shape(const size_t *dims, size_t ndim,
                               int split_count, int split_dim, int concat_dim,
                               size_t *out_dims)
{
    struct coll_shape s;
    if (!out_dims)
        return fccl_err(FCCL_ERR_INVALID, A2A "_shape: out_dims is NULL");
    TRY(a2a_shape(dims, ndim, split_count, split_dim, concat_dim, 0, &s));
    size_t e = 0;
    TRY(elems_of(s.dims, s.ndim, 1, &e, A2A, "input"));
    a2a_out(&s, (size_t)split_count, out_dims);
    return FCCL_OK;
}

int fccl_all_to_all_dims(const void *sendbuf, void *recvbuf,
                         const size_t *dims, size_t ndim, int split_count,
                         int split_dim, int concat_dim, fccl_dtype_t dtype,
                         fccl_group_t *g, fccl_request_t **req)
{
    TRY(pre(g, dtype, A2A));
    struct coll_args a = {.kind = COLL_ALLTOALL_DIMS, .opname = A2A,
                          .dtype = dtype};
    TRY(a2a_shape(dims, ndim, split_count, split_dim, concat_dim, g->size,
                  &a.shape));
    size_t total = 0, es = fccl_dtype_size(dtype);
    TRY(elems_of(a.shape.dims, a.shape.ndim, es, &total, A2A, "input"));
    if (total && (!sendbuf || !recvbuf))
        return fccl_err(FCCL_ERR_INVALID, A2A ": %s is NULL",
                        !sendbuf ? "sendbuf" : "recvbuf");
    a.sendbuf = sendbuf;
    a.recvbuf = recvbuf;
    a.count = total / (size_t)g->size; /* one slice per rank */
    return start(g, &a, req);
}
