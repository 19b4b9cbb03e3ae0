/*
 * fccl_moe_new's check between TP partners, built so that partners who
 * disagree about the TP group fail fast instead of waiting for each other
 * until the group timeout.
 *
 * The problem.  Comparing options across a TP pair needs the two to
 * exchange something, and a collective on the TP group only ends when
 * both enter it: if one rank passes no TP group, or one of another size,
 * or one that does not pair it with the rank that names it, its partner
 * waits for a message that never comes.
 *
 * The exchange.  After the EP check (moe_config.c), every rank of an EP
 * group where any rank has TP (the EP check told all of them) runs:
 *   hello:  a rank with a TP group of 2 sends its options, its world rank
 *           and the world rank it takes as its partner to that partner
 *           over the world group (so two different group objects for the
 *           same pair still meet), and posts the receive of the
 *           partner's;
 *   status: each rank sends every other rank of its EP group one word,
 *           bad or good, as soon as it knows: at once when it has no
 *           usable TP group or failed the EP check, else when the
 *           partner's hello arrived and compared equal or not;
 *           and it waits for every other rank's word.
 * Each hello carries the sender's count of fccl_moe_new calls: a hello
 * that a failed check left queued at the partner is older than the
 * partner's count and dropped there (partners create their configs in the
 * same order; a newer count is an error saying so).
 * A rank whose partner never answers still learns of the failure: the
 * disagreement is seen by the partner's EP group (a TP group missing on
 * one of its ranks, of the wrong size) and crosses to this EP group
 * through a pair that agrees, whose member here sends "bad"; the rank then
 * cancels its hello receive and fails.  What stays undetected: a whole EP
 * group without TP while the other has it (nothing links the two), and a
 * pair that disagrees while everything else agrees; those still end at the
 * group timeout, with a message naming the silent partner.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "fccl/pg.h"
#include "moe_int.h"

/* A status word: good, bad, or bad naming the EP rank of the other EP
 * group whose own checks failed (ST_CULPRIT + that rank), so that every
 * rank's error can name it. */
enum { ST_PENDING = -1, ST_GOOD = 0, ST_BAD = 1, ST_CULPRIT = 2 };

struct tpc {
    struct fccl_moe *m;
    moe_tp_judge_fn judge;
    char why[512];            /* the TP disagreement found here */
    char vwhy[512];           /* the EP check's own error */
    fccl_p2p_op_t *ops;       /* ep_size status sends */
    int partner;              /* world rank, -1: no usable TP group */
    int64_t *mine, *theirs;   /* hello: nv values, world rank, partner,
                                 epoch */
    size_t nv;
    fccl_request_t *hrecv, *hsend, *ssend;
    fccl_request_t **srecv;   /* ep_size status receives */
    int64_t *st;              /* ep_size received words */
    int64_t my_st;            /* the word sent */
    int sent, bad_seen;
    int culprit;              /* from a word received, or -1 */
};

/* The partner's world rank, or -1 when this rank has no usable TP group
 * (none, or not of 2, or a partner inside its own EP group: the local
 * checks or the EP check have already failed it then). */
static int partner_of(const struct fccl_moe *m)
{
    int w = -1;
    if (!m->tp || fccl_group_size(m->tp) != 2 ||
        fccl_group_to_world(m->tp, 1 - fccl_group_rank(m->tp), &w) < 0)
        return -1;
    return moe_in_group(m->ep, w) ? -1 : w;
}

static int send_status(struct tpc *c, int bad)
{
    struct fccl_moe *m = c->m;
    int who = c->m->tp_culprit >= 0 ? c->m->tp_culprit : c->culprit;
    c->my_st = !bad ? ST_GOOD : who >= 0 ? ST_CULPRIT + who : ST_BAD;
    c->sent = 1;
    size_t n = 0;
    for (int r = 0; r < m->ep_size; r++)
        if (r != m->ep_rank)
            c->ops[n++] = (fccl_p2p_op_t){1, &c->my_st, 1, FCCL_INT64, r,
                                          MOE_TAG_TP_STATUS};
    return n ? fccl_batch_isend_irecv(c->ops, n, m->ep, &c->ssend)
             : FCCL_OK;
}

/* One pass over a pending request: 1 done (freed), 0 pending, < 0 failed. */
static int step(fccl_request_t **req)
{
    int done = 0;
    if (!*req)
        return 1;
    int rc = fccl_test(*req, &done);
    if (done)
        *req = NULL;
    return rc < 0 ? rc : done;
}

/* The partner's hello against ours (who it pairs with, then the options
 * through the caller's judge): FCCL_OK or FCCL_ERR_INVALID, the message
 * kept in c->why. */
static int judge_hello(struct tpc *c, int64_t *vmax)
{
    struct fccl_moe *m = c->m;
    int64_t pw = c->theirs[c->nv], pp = c->theirs[c->nv + 1];
    int64_t pe = c->theirs[c->nv + 2], me = c->mine[c->nv + 2];
    int rc;
    if (pe != me) {
        rc = fccl_err(FCCL_ERR_INVALID, "moe_new: the TP partner (world "
                      "rank %d) is at its check number %lld with this rank, "
                      "this rank at %lld: the ranks do not create their "
                      "MoE configs in the same order", c->partner,
                      (long long)pe, (long long)me);
    } else if (pw != c->partner || pp != m->tp_world_me) {
        rc = fccl_err(FCCL_ERR_INVALID, "moe_new: the TP partner (world "
                      "rank %d) pairs itself with world rank %lld, not "
                      "with this rank (%d): the two pass different TP "
                      "groups", c->partner, (long long)pp, m->tp_world_me);
    } else {
        for (size_t i = 0; i < c->nv; i++)
            vmax[i] = c->mine[i] > c->theirs[i] ? c->mine[i] : c->theirs[i];
        rc = c->judge(m, vmax);
    }
    if (rc < 0)
        snprintf(c->why, sizeof(c->why), "%s", fccl_last_error());
    return rc;
}

static void note_status(struct tpc *c, int64_t st)
{
    if (st < ST_BAD)
        return;
    c->bad_seen = 1;
    if (st >= ST_CULPRIT && c->culprit < 0)
        c->culprit = (int)(st - ST_CULPRIT);
}

static int poll_statuses(struct tpc *c)
{
    struct fccl_moe *m = c->m;
    int all = 1;
    for (int r = 0; r < m->ep_size; r++) {
        if (r == m->ep_rank || !c->srecv[r]) {
            if (r != m->ep_rank)
                note_status(c, c->st[r]);
            continue;
        }
        int d = step(&c->srecv[r]);
        if (d < 0)
            return d;
        if (d)
            note_status(c, c->st[r]);
        all &= d;
    }
    return all;
}

static void nap(uint64_t idle_ns)
{
    if (idle_ns < 200000) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, idle_ns < 5000000 ? 50000 : 500000};
    nanosleep(&ts, NULL);
}

static int post_hello_recv(struct tpc *c)
{
    return fccl_irecv(c->theirs, c->nv + 3, FCCL_INT64, c->partner,
                      MOE_TAG_TP_HELLO, fccl_world(), &c->hrecv);
}

/* The loop: until our word is sent, every word received and the hello
 * answered or given up. */
static int run(struct tpc *c, int verdict, int64_t *vmax, int *tpv)
{
    struct fccl_moe *m = c->m;
    uint64_t t0 = fccl_now_ns(), last = t0;
    int64_t timeout_ms = fccl_group_timeout(m->ep);
    uint64_t limit = (uint64_t)(timeout_ms > 0 ? timeout_ms : 300000) *
                     1000000ull;
    for (;;) {
        int progress = 0, rc;
        if (c->hrecv) {
            if ((rc = step(&c->hrecv)) < 0)
                return rc;
            if (rc == 1 && c->theirs[c->nv + 2] < c->mine[c->nv + 2]) {
                /* a stale hello of an earlier, failed check: again */
                progress = 1;
                if ((rc = post_hello_recv(c)) < 0)
                    return rc;
            } else if (rc == 1) {
                progress = 1;
                *tpv = judge_hello(c, vmax);
            }
        }
        if ((rc = poll_statuses(c)) < 0)
            return rc;
        int all = rc;
        if (c->bad_seen && c->hrecv) { /* the partner may never answer */
            fccl_cancel(c->hrecv);
            c->hrecv = NULL;
        }
        if (!c->sent && (!c->hrecv || c->bad_seen)) {
            int bad = verdict < 0 || *tpv < 0 || c->bad_seen ||
                      c->partner < 0;
            if ((rc = send_status(c, bad)) < 0)
                return rc;
            progress = 1;
        }
        if (c->hsend && (rc = step(&c->hsend)) < 0)
            return rc;
        if (c->ssend && (rc = step(&c->ssend)) < 0)
            return rc;
        if (c->sent && all && !c->hrecv && !c->ssend &&
            (!c->hsend || c->my_st == ST_BAD)) /* cleanup cancels it */
            return FCCL_OK;
        uint64_t now = fccl_now_ns();
        if (progress)
            last = now;
        if (now - t0 > limit)
            return fccl_err(FCCL_ERR_TIMEOUT, "moe_new: no answer from %s "
                            "after %lld ms (do both TP partners pass the "
                            "same TP group of 2, or neither?)",
                            c->hrecv ? "the TP partner" : "the EP group",
                            (long long)timeout_ms);
        nap(now - last);
    }
}

static void cleanup(struct tpc *c)
{
    struct fccl_moe *m = c->m;
    if (c->hrecv)
        fccl_cancel(c->hrecv);
    if (c->hsend)
        fccl_cancel(c->hsend);
    if (c->ssend)
        fccl_cancel(c->ssend);
    for (int r = 0; c->srecv && r < m->ep_size; r++)
        if (c->srecv[r])
            fccl_cancel(c->srecv[r]);
    free(c->srecv);
    free(c->ops);
    free(c->st);
    free(c->mine);
    free(c->theirs);
}

int moe_tp_check(struct fccl_moe *m, const int64_t *hello, size_t nv,
                 int verdict, int64_t *vmax, moe_tp_judge_fn judge)
{
    struct tpc c;
    memset(&c, 0, sizeof(c));
    c.m = m;
    c.judge = judge;
    c.culprit = -1;
    m->tp_culprit = -1;
    if (verdict < 0)
        snprintf(c.vwhy, sizeof(c.vwhy), "%s", fccl_last_error());
    c.ops = calloc((size_t)m->ep_size, sizeof(*c.ops));
    c.nv = nv;
    c.partner = partner_of(m);
    m->tp_world_me = fccl_get_rank();
    c.srecv = calloc((size_t)m->ep_size, sizeof(*c.srecv));
    c.st = calloc((size_t)m->ep_size, sizeof(*c.st));
    c.mine = calloc(nv + 3, sizeof(int64_t));
    c.theirs = calloc(nv + 3, sizeof(int64_t));
    int rc = FCCL_OK, tpv = FCCL_OK;
    if (!c.srecv || !c.st || !c.mine || !c.theirs || !c.ops) {
        cleanup(&c);
        return fccl_err(FCCL_ERR_NOMEM, "moe_new: no memory");
    }
    memcpy(c.mine, hello, nv * sizeof(int64_t));
    c.mine[nv] = m->tp_world_me;
    c.mine[nv + 1] = c.partner;
    c.mine[nv + 2] = m->new_epoch;
    for (size_t i = 0; i < nv; i++)
        vmax[i] = hello[i];
    fccl_group_t *world = fccl_world();
    for (int r = 0; r < m->ep_size && rc == FCCL_OK; r++)
        if (r != m->ep_rank)
            rc = fccl_irecv(&c.st[r], 1, FCCL_INT64, r, MOE_TAG_TP_STATUS,
                            m->ep, &c.srecv[r]);
    if (rc == FCCL_OK && c.partner >= 0 && world) {
        rc = post_hello_recv(&c);
        if (rc == FCCL_OK)
            rc = fccl_isend(c.mine, nv + 3, FCCL_INT64, c.partner,
                            MOE_TAG_TP_HELLO, world, &c.hsend);
    }
    if (rc == FCCL_OK)
        rc = run(&c, verdict, vmax, &tpv);
    cleanup(&c);
    if (rc < 0)
        return rc;
    if (verdict < 0) /* its message, not the TP exchange's */
        return fccl_err(verdict, "%s", c.vwhy);
    if (tpv < 0)
        return fccl_err(FCCL_ERR_INVALID, "%s", c.why);
    if (c.bad_seen && c.culprit >= 0)
        return fccl_err(FCCL_ERR_INVALID, "moe_new: EP rank %d of the other "
                        "EP group failed its checks (its own error says "
                        "why; a TP partner in this EP group heard of it)",
                        c.culprit);
    if (c.partner < 0 || c.bad_seen)
        return fccl_err(FCCL_ERR_INVALID, "moe_new: a TP partner of this "
                        "EP group disagrees with it (a TP group missing, "
                        "of another size or pairing other ranks, or other "
                        "options; the ranks concerned say which)");
    return FCCL_OK;
}
