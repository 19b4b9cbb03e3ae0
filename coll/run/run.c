/*
 * The primitives algorithms are written against: tagged point-to-point
 * operations on a rank view, waits bounded by the call's deadline and the
 * group's abort flag, scratch memory cached per group, and the error
 * reports that name the operation, the group and the ranks involved.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"
#include "run.h"
#include "tag.h"

#define SCRATCH_ALIGN 4096
#define CHUNK_DEFAULT (512u * 1024u)

/* "all_reduce[ring] seq 7 on fccl_world_group (rank 1)" */
static void run_where(const struct coll_run *run, char *buf, size_t len)
{
    snprintf(buf, len, "%s[%s] seq %u on %s (rank %d)",
             run->a ? run->a->opname : "?", run->algo ? run->algo : "?",
             run->seq, run->g->name, run->g->rank);
}

static int post_check(struct coll_run *run, uint32_t step, int vpeer,
                      const struct coll_view *v)
{
    if (run->step0 + step >= COLL_STEP_MAX || step >= run->nsteps ||
        vpeer < 0 || vpeer >= v->n) {
        char where[160];
        run_where(run, where, sizeof(where));
        return fccl_err(FCCL_ERR_STATE,
                        "%s: internal: step %u (base %u, span %u) or peer %d "
                        "out of range",
                        where, step, run->step0, run->nsteps, vpeer);
    }
    return FCCL_OK;
}

static int post_fail(struct coll_run *run, int rc, const char *what, int grank)
{
    char where[160];
    run_where(run, where, sizeof(where));
    return fccl_err_wrap(rc, "%s: %s rank %d (world %d)", where, what, grank,
                         run->g->world[grank]);
}

/* Zero-length operations never touch the wire: both ends know the length,
 * so neither posts anything and the request counts as done. */
static void complete_locally(struct tp_req *req, int peer, int is_send)
{
    tp_req_complete_empty(req, peer, is_send);
}

/* cr_isend and cr_irecv mirror each other; one function with a direction
 * flag would add a branch to every message every algorithm posts. */
int cr_isend(struct coll_run *run, const struct coll_view *v, int vpeer,
             uint32_t step, const void *buf, size_t len, struct tp_req *req)
{
    int rc = post_check(run, step, vpeer, v);
    if (rc < 0)
        return rc;
    int gr = view_grank(v, vpeer);
    if (len == 0) {
        complete_locally(req, run->g->world[gr], 1);
        return FCCL_OK;
    }
    rc = tp_isend(run->g->tp, run->g->world[gr], run->tag | (run->step0 + step),
                  buf, len, req);
    return rc < 0 ? post_fail(run, rc, "send to", gr) : FCCL_OK;
}

int cr_irecv(struct coll_run *run, const struct coll_view *v, int vpeer,
             uint32_t step, void *buf, size_t len, struct tp_req *req)
{
    int rc = post_check(run, step, vpeer, v);
    if (rc < 0)
        return rc;
    int gr = view_grank(v, vpeer);
    if (len == 0) {
        complete_locally(req, run->g->world[gr], 0);
        return FCCL_OK;
    }
    rc = tp_irecv(run->g->tp, run->g->world[gr], run->tag | (run->step0 + step),
                  buf, len, req);
    return rc < 0 ? post_fail(run, rc, "receive from", gr) : FCCL_OK;
}

/* Name (up to four of) the ranks whose requests did not finish. */
static int wait_fail(struct coll_run *run, int rc, struct tp_req *reqs,
                     size_t n)
{
    char where[160], who[200] = "";
    size_t off = 0;
    int named = 0;
    run_where(run, where, sizeof(where));
    for (size_t i = 0; i < n && named < 4; i++) {
        if (atomic_load(&reqs[i].state) == TP_REQ_DONE)
            continue;
        int gr = group_rank_of_world(run->g, reqs[i].peer);
        int w = snprintf(who + off, sizeof(who) - off, "%srank %d (world %d, %s)",
                         named ? ", " : "", gr, reqs[i].peer,
                         reqs[i].is_send ? "send" : "recv");
        if (w < 0 || (size_t)w >= sizeof(who) - off)
            break;
        off += (size_t)w;
        named++;
    }
    if (rc == FCCL_ERR_ABORTED)
        return fccl_err(rc, "%s: group aborted while waiting%s%s", where,
                        named ? " for " : "", who);
    return fccl_err_wrap(rc, "%s: waiting for %s", where,
                         named ? who : "peers");
}

#define CR_REDUCE_PIECE (64u << 10) /* bytes reduced between progress calls */

void cr_reduce(struct coll_run *run, void *dst, const void *a, const void *b,
               size_t count, fccl_dtype_t dt, fccl_redop_t op)
{
    size_t es = fccl_dtype_size(dt), per = CR_REDUCE_PIECE / es;
    unsigned char *d = dst;
    const unsigned char *x = a, *y = b;
    for (size_t off = 0; off < count; off += per) {
        size_t k = count - off < per ? count - off : per;
        if (off)
            tp_poke(run->g->tp);
        coll_reduce(d + off * es, x + off * es, y + off * es, k, dt, op);
    }
}

#define CR_COPY_PIECE (256u << 10) /* bytes copied between progress calls */

void cr_copy(struct coll_run *run, void *dst, const void *src, size_t len)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    uintptr_t di = (uintptr_t)dst, si = (uintptr_t)src; /* unrelated objects */
    if (di < si + len && si < di + len) { /* overlapping: one piece */
        memmove(d, s, len);
        return;
    }
    for (size_t off = 0; off < len; off += CR_COPY_PIECE) {
        if (off)
            tp_poke(run->g->tp);
        memcpy(d + off, s + off,
               len - off < CR_COPY_PIECE ? len - off : CR_COPY_PIECE);
    }
}

int cr_wait(struct coll_run *run, struct tp_req *reqs, size_t n)
{
    if (n == 0)
        return FCCL_OK;
    int rc = tp_waitall_watch(run->g->tp, reqs, n, run->deadline,
                              &run->g->stop, run->g->world,
                              (size_t)run->g->size);
    return rc < 0 ? wait_fail(run, rc, reqs, n) : FCCL_OK;
}

int cr_sendrecv(struct coll_run *run, const struct coll_view *v, int to,
                const void *sbuf, size_t slen, int from, void *rbuf,
                size_t rlen, uint32_t step)
{
    struct tp_req r[2];
    int rc = cr_irecv(run, v, from, step, rbuf, rlen, &r[0]);
    if (rc < 0)
        return rc;
    rc = cr_isend(run, v, to, step, sbuf, slen, &r[1]);
    if (rc < 0) {
        if (tp_req_pending(&r[0]))
            tp_cancel(run->g->tp, &r[0]);
        return rc;
    }
    rc = cr_wait(run, r, 2);
    return rc < 0 ? rc : cr_check_len(run, &r[0], rlen);
}

int cr_check_len(struct coll_run *run, const struct tp_req *req, size_t want)
{
    if (want == 0 || req->len == want)
        return FCCL_OK;
    char where[160];
    run_where(run, where, sizeof(where));
    int gr = group_rank_of_world(run->g, req->peer);
    return fccl_err(FCCL_ERR_PROTOCOL,
                    "%s: rank %d (world %d) sent %zu bytes where %zu were "
                    "expected (counts differ between ranks?)",
                    where, gr, req->peer, req->len, want);
}

void *cr_scratch(struct coll_run *run, size_t bytes)
{
    struct coll_state *st = run->st;
    if (bytes <= st->scratch_cap && st->scratch)
        return st->scratch;
    if (bytes < 65536)
        bytes = 65536; /* never NULL, even for empty requests */
    size_t cap = (bytes + 65535) & ~(size_t)65535;
    void *p = NULL;
    if (posix_memalign(&p, SCRATCH_ALIGN, cap) != 0) {
        fccl_err(FCCL_ERR_NOMEM, "%s: no memory for %zu bytes of scratch",
                 run->g->name, cap);
        return NULL;
    }
    free(st->scratch);
    st->scratch = p;
    st->scratch_cap = cap;
    return p;
}

struct tp_req *cr_reqs(struct coll_run *run, size_t n)
{
    struct coll_state *st = run->st;
    if (n > st->reqs_cap || !st->reqs) {
        size_t cap = n < 64 ? 64 : n;
        void *p = NULL;
        if (posix_memalign(&p, 64, cap * sizeof(struct tp_req)) != 0) {
            fccl_err(FCCL_ERR_NOMEM, "%s: no memory for %zu requests",
                     run->g->name, n);
            return NULL;
        }
        free(st->reqs);
        st->reqs = p;
        st->reqs_cap = cap;
    }
    memset(st->reqs, 0, n * sizeof(struct tp_req));
    run->reqs = st->reqs;
    run->nreqs = n;
    return st->reqs;
}

void cr_cancel_pending(struct coll_run *run)
{
    for (size_t i = 0; i < run->nreqs; i++)
        if (tp_req_pending(&run->reqs[i]))
            tp_cancel(run->g->tp, &run->reqs[i]);
    run->nreqs = 0;
}

size_t cr_chunk(const struct coll_run *run, const struct coll_view *v,
                size_t esize, size_t total, size_t max_chunks)
{
    size_t c = run->st->chunk ? run->st->chunk : CHUNK_DEFAULT;
    if (!run->st->chunk && v->n == 2 &&
        tp_peer_is_local(run->g->tp,
                         run->g->world[view_grank(v, 1 - v->me)]))
        c = total > esize ? total : esize;
    size_t el = c / esize, total_el = total / esize;
    if (el == 0)
        el = 1;
    if (max_chunks == 0)
        max_chunks = 1;
    if ((total_el + el - 1) / el > max_chunks)
        el = (total_el + max_chunks - 1) / max_chunks;
    return el * esize;
}
