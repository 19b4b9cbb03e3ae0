/*
 * Halo exchange of an NCHW tensor with up to eight neighbours
 * (neighbor_exchange_v2, MindSpore's NeighborExchangeV2).
 *
 * Algorithm: pack each send block (a box of the input: rows x columns of
 * every (n, c) plane) into scratch, post every receive into scratch and
 * every send, copy the input into the centre of the output while they
 * fly (and a block to myself, slot to slot), wait, then unpack each
 * received block into its box of the output frame.  Every rank is at
 * most once in each list (the seed's rule, checked by the API), so one
 * tag per call tells the messages apart, as in neighbor_direct.c.
 *
 * Cost: alpha + max(bytes in, bytes out) beta when the links absorb the
 * concurrent transfers, plus one pass over each block to pack or unpack
 * (blocks of side columns are strided: W / 4 of a row each) and one over
 * the input for the centre.  Zero-length blocks send nothing; any rank
 * count; a rank may be its own neighbour.
 */
#include <string.h>

#include "algos.h"

/* Which rows (0 top, 1 all, 2 bottom) and columns (0 left, 1 all, 2
 * right) each direction's block covers, clockwise from the top. */
static const int rows_of[8] = {0, 0, 1, 2, 2, 2, 1, 0};
static const int cols_of[8] = {1, 2, 2, 2, 1, 0, 0, 0};

struct box {
    size_t lo[4], ext[4];
};

/* One axis of a block: the near band, the whole middle (`full`, the
 * input's extent), or the far band.  On the receiving side the output
 * has the near band before the middle, which shifts what follows it. */
static void axis(int which, size_t full, size_t near, size_t far, int recv,
                 size_t *lo, size_t *ext)
{
    if (which == 0) {
        *lo = 0;
        *ext = near;
    } else if (which == 1) {
        *lo = recv ? near : 0;
        *ext = full;
    } else {
        *lo = recv ? near + full : full - far;
        *ext = far;
    }
}

/* The block of direction d: in the input (recv = 0) or the output. */
static void block_of(const struct coll_shape *s, int d, int recv,
                     struct box *b)
{
    const size_t *len = recv ? s->recv_lens : s->send_lens;
    b->lo[0] = b->lo[1] = 0;
    b->ext[0] = s->dims[0];
    b->ext[1] = s->dims[1];
    axis(rows_of[d], s->dims[2], len[FCCL_NBR_LEN_TOP],
         len[FCCL_NBR_LEN_BOTTOM], recv, &b->lo[2], &b->ext[2]);
    axis(cols_of[d], s->dims[3], len[FCCL_NBR_LEN_LEFT],
         len[FCCL_NBR_LEN_RIGHT], recv, &b->lo[3], &b->ext[3]);
}

static size_t box_elems(const struct box *b)
{
    return b->ext[0] * b->ext[1] * b->ext[2] * b->ext[3];
}

void coll_nbr_v2_out_dims(const struct coll_shape *s, size_t out[4])
{
    out[0] = s->dims[0];
    out[1] = s->dims[1];
    out[2] = s->recv_lens[FCCL_NBR_LEN_TOP] + s->dims[2] +
             s->recv_lens[FCCL_NBR_LEN_BOTTOM];
    out[3] = s->recv_lens[FCCL_NBR_LEN_LEFT] + s->dims[3] +
             s->recv_lens[FCCL_NBR_LEN_RIGHT];
}

/* The layout of one call: each direction's block and its scratch slot
 * (byte offset), sends first, then receives. */
struct halo {
    struct box sb[8], rb[8];
    size_t soff[8], roff[8], sbytes[8], rbytes[8];
    size_t total, odims[4];
};

static void plan(const struct coll_shape *s, size_t es, struct halo *h)
{
    size_t off = 0;
    for (int d = 0; d < 8; d++) {
        block_of(s, d, 0, &h->sb[d]);
        h->sbytes[d] = s->send_ids[d] >= 0 ? box_elems(&h->sb[d]) * es : 0;
        h->soff[d] = off;
        off += h->sbytes[d];
    }
    for (int d = 0; d < 8; d++) {
        block_of(s, d, 1, &h->rb[d]);
        h->rbytes[d] = s->recv_ids[d] >= 0 ? box_elems(&h->rb[d]) * es : 0;
        h->roff[d] = off;
        off += h->rbytes[d];
    }
    h->total = off;
    coll_nbr_v2_out_dims(s, h->odims);
}

/* The input into the centre of the output. */
static void centre(const struct coll_args *a, const struct halo *h,
                   size_t es)
{
    const struct coll_shape *s = &a->shape;
    size_t lo[4] = {0, 0, s->recv_lens[FCCL_NBR_LEN_TOP],
                    s->recv_lens[FCCL_NBR_LEN_LEFT]};
    coll_box_copy(a->recvbuf, h->odims, 4, lo, s->dims, es,
                  (unsigned char *)a->sendbuf, 0);
}

/* Post every receive and send of the plan; a block to myself is copied
 * from its send slot to its receive slot.  *k gets the requests posted. */
static int post(struct coll_run *run, const struct halo *h,
                unsigned char *scr, struct tp_req *reqs, size_t *k)
{
    const struct coll_shape *s = &run->a->shape;
    struct coll_view v = view_of_group(run->g);
    int rc = FCCL_OK;
    *k = 0;
    for (int d = 0; d < 8 && rc >= 0; d++)
        if (s->recv_ids[d] >= 0 && s->recv_ids[d] != v.me)
            rc = cr_irecv(run, &v, s->recv_ids[d], 0, scr + h->roff[d],
                          h->rbytes[d], &reqs[(*k)++]);
    for (int d = 0; d < 8 && rc >= 0; d++)
        if (s->send_ids[d] >= 0 && s->send_ids[d] != v.me)
            rc = cr_isend(run, &v, s->send_ids[d], 0, scr + h->soff[d],
                          h->sbytes[d], &reqs[(*k)++]);
    for (int i = 0; i < 8 && rc >= 0; i++)
        for (int j = 0; j < 8; j++)
            if (s->send_ids[i] == v.me && s->recv_ids[j] == v.me)
                memcpy(scr + h->roff[j], scr + h->soff[i], h->rbytes[j]);
    return rc;
}

int coll_neighbor_exchange_v2(struct coll_run *run)
{
    const struct coll_args *a = run->a;
    const struct coll_shape *s = &a->shape;
    size_t es = fccl_dtype_size(a->dtype);
    struct halo h;
    plan(s, es, &h);
    unsigned char *scr = cr_scratch(run, h.total);
    struct tp_req *reqs = cr_reqs(run, 16);
    if (!scr || !reqs)
        return FCCL_ERR_NOMEM;
    for (int d = 0; d < 8; d++)
        if (h.sbytes[d])
            coll_box_copy((unsigned char *)a->sendbuf, s->dims, 4,
                          h.sb[d].lo, h.sb[d].ext, es, scr + h.soff[d], 1);
    size_t k;
    int rc = post(run, &h, scr, reqs, &k);
    if (rc < 0)
        return rc;
    centre(a, &h, es);
    if ((rc = cr_wait(run, reqs, k)) < 0)
        return rc;
    size_t i = 0;
    for (int d = 0; d < 8; d++) {
        if (s->recv_ids[d] < 0)
            continue;
        if (s->recv_ids[d] != run->g->rank &&
            (rc = cr_check_len(run, &reqs[i++], h.rbytes[d])) < 0)
            return rc;
        if (h.rbytes[d])
            coll_box_copy(a->recvbuf, h.odims, 4, h.rb[d].lo, h.rb[d].ext,
                          es, scr + h.roff[d], 0);
    }
    return FCCL_OK;
}
