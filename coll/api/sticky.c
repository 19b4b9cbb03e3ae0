/*
 * A group's failure.  The first fatal error of a group sticks, with its
 * message and the world rank it came from, and every later call on the
 * group returns it at once (as does an abort), so no rank waits for a
 * peer that has already failed.  A failure that started here (a timeout,
 * sizes that disagree, a fabric error) is also told to the group's other
 * members over the heartbeat sockets (tp_group_notify): their waits on
 * the group end at once (the notice sets GROUP_STOP_FAILED in the stop
 * word they watch) and they fail with FCCL_ERR_PEER naming this rank,
 * the operation and its sequence number: NCCL's abort model, where one
 * member's timeout fails the group everywhere.  A dead peer is not told
 * again (the heartbeats already announce deaths to every rank), nor an
 * abort (fccl_group_abort is local, as documented in pg.h).
 *
 * The floors below only return errors; the API floor, where an operation
 * takes its place in the group's order, decides that one sticks.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "request.h"

_Static_assert(GROUP_STOP_FAILED == TP_STOP_NOTICE,
               "a notice's stop bit is the group's failed bit");
_Static_assert(GROUP_STOP_REVOKED == TP_STOP_REVOKE,
               "a revoke's stop bit is the group's revoked bit");

/* snprintf that truncates quietly: messages are cut at their buffers. */
static void text(char *dst, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void text(char *dst, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, len, fmt, ap);
    va_end(ap);
}

/* " seq 17" or "" */
static void seq_text(char *buf, size_t len, int has_seq, uint32_t seq)
{
    if (has_seq)
        snprintf(buf, len, " seq %u", seq);
    else
        buf[0] = '\0';
}

/* The world rank a failure of this code came from: this rank's own, the
 * dead rank the transport knows of for FCCL_ERR_PEER, none for an abort. */
static int origin_of(const struct fccl_group *g, int code)
{
    if (code == FCCL_ERR_ABORTED)
        return -1;
    if (code == FCCL_ERR_REVOKED)
        return g->revoked_by;
    if (code == FCCL_ERR_PEER)
        return tp_dead_rank(g->tp);
    return g->world_rank;
}

/* Under g->lock: keep the failure; fill *n if the members are to be told. */
static int stick_locked(struct fccl_group *g, int code,
                        const struct coll_opinfo *op, const char *detail,
                        struct tp_notice *n)
{
    char seq[24] = "";
    if (op)
        seq_text(seq, sizeof(seq), op->has_seq, op->seq);
    if (op && code == FCCL_ERR_TIMEOUT)
        text(g->errmsg, sizeof(g->errmsg), "rank %d (world %d) timed out "
                 "after %lld ms in %s%s on %s: %s", g->rank, g->world_rank,
                 (long long)op->ms, op->op, seq, g->name, detail);
    else
        text(g->errmsg, sizeof(g->errmsg), "%s", detail);
    g->failed_rank = origin_of(g, code);
    atomic_store(&g->err, code);
    LOG_WARN("COLL", "group %s failed: %s", g->name, g->errmsg);
    if (code == FCCL_ERR_PEER || code == FCCL_ERR_ABORTED ||
        code == FCCL_ERR_REVOKED) /* a revoke told everyone already */
        return 0;
    memset(n, 0, sizeof(*n));
    n->ctx = g->ctx;
    n->origin = g->world_rank;
    n->status = code;
    n->seq = op ? op->seq : 0;
    n->has_seq = op && op->has_seq;
    n->ms = op && code == FCCL_ERR_TIMEOUT ? op->ms : 0;
    snprintf(n->op, sizeof(n->op), "%s", op && op->op ? op->op : "?");
    text(n->text, sizeof(n->text), "%s", g->errmsg);
    return 1;
}

int coll_fail_op(struct fccl_group *g, int code, const struct coll_opinfo *op)
{
    if (code >= 0)
        return code;
    char detail[512], earlier[sizeof(g->errmsg)] = "";
    struct tp_notice n;
    int first = 0, tell = 0;
    snprintf(detail, sizeof(detail), "%s", fccl_last_error());
    pthread_mutex_lock(&g->lock);
    if (atomic_load(&g->err) == 0) {
        first = 1;
        tell = stick_locked(g, code, op, detail, &n);
        text(detail, sizeof(detail), "%s", g->errmsg);
    } else {
        text(earlier, sizeof(earlier), "%s", g->errmsg);
    }
    pthread_mutex_unlock(&g->lock);
    if (tell)
        tp_group_notify(g->tp, &n, g->world, (size_t)g->size);
    if (first)
        return fccl_err(code, "%s", detail);
    /* Failing second (a wait that ran out as a member's notice came in):
     * the group's first failure is the cause the caller must see. */
    if (earlier[0] && !strstr(detail, earlier))
        return fccl_err(code, "%s; the group had already failed: %s", detail,
                        earlier);
    return code;
}

int coll_fail(struct fccl_group *g, int code)
{
    return coll_fail_op(g, code, NULL);
}

/* A member's notice stopped our waits: make it this group's failure
 * (FCCL_ERR_PEER, from its origin), without touching the thread's
 * message.  1 if the group has failed (now or before). */
static int adopt_notice(struct fccl_group *g)
{
    if (atomic_load(&g->err) != 0)
        return 1;
    if (!(atomic_load(&g->stop) & GROUP_STOP_FAILED))
        return 0;
    struct tp_notice n;
    int have = tp_group_notice(g->tp, g->ctx, &n);
    pthread_mutex_lock(&g->lock);
    if (atomic_load(&g->err) == 0) {
        if (have) {
            text(g->errmsg, sizeof(g->errmsg), "failed on another member: %s",
                 n.text);
            g->failed_rank = n.origin;
        } else { /* cannot happen: the bit is set with a cause */
            snprintf(g->errmsg, sizeof(g->errmsg), "internal: stopped "
                     "without a recorded cause");
            g->failed_rank = -1;
        }
        atomic_store(&g->err, have ? FCCL_ERR_PEER : FCCL_ERR_STATE);
        LOG_WARN("COLL", "group %s failed: %s", g->name, g->errmsg);
    }
    pthread_mutex_unlock(&g->lock);
    return 1;
}

int coll_group_check(struct fccl_group *g)
{
    if (atomic_load(&g->stop) & GROUP_STOP_REVOKED)
        return coll_revoked(g);
    if (atomic_load(&g->stop) & GROUP_STOP_ABORT)
        return fccl_err(FCCL_ERR_ABORTED, "group %s (rank %d): aborted",
                        g->name, g->rank);
    if (!adopt_notice(g))
        return FCCL_OK;
    pthread_mutex_lock(&g->lock);
    int e = atomic_load(&g->err);
    fccl_err(e, "group %s (rank %d) failed earlier: %s", g->name, g->rank,
             g->errmsg);
    pthread_mutex_unlock(&g->lock);
    return e;
}

int coll_stopped(struct fccl_group *g, int rc)
{
    int stop = atomic_load(&g->stop);
    if (stop & GROUP_STOP_REVOKED)
        return coll_revoked(g);
    if (rc != FCCL_ERR_ABORTED || (stop & GROUP_STOP_ABORT) ||
        !(stop & GROUP_STOP_FAILED))
        return rc;
    adopt_notice(g);
    pthread_mutex_lock(&g->lock);
    int e = atomic_load(&g->err);
    fccl_err(e, "%s", g->errmsg);
    pthread_mutex_unlock(&g->lock);
    return e;
}

int fccl_group_failed_rank(const fccl_group_t *cg)
{
    struct fccl_group *g = (struct fccl_group *)cg;
    if (!g || !g->state || !adopt_notice(g))
        return -1;
    pthread_mutex_lock(&g->lock);
    int r = g->failed_rank;
    pthread_mutex_unlock(&g->lock);
    return r;
}
