/*
 * fccl.torch's queue: the point-to-point protocols on top of it.
 *
 * Receive from any source (torch's recv_anysource): fccl matches a
 * receive to one peer, so it is an irecv from every other rank into
 * scratch buffers; the first to arrive wins, the rest are cancelled, and a
 * message that arrived meanwhile is kept aside (per peer and tag, in
 * arrival order) for the next receive of that peer or of any, so none is
 * lost and each peer's messages stay in order.
 *
 * The monitored barrier (Gloo's): every rank but 0 sends rank 0 one byte
 * and waits for its answer; rank 0 receives from each within the timeout,
 * names those that did not arrive (the first, or all with wait_all) and
 * answers the others.  It runs with the queue drained and its lock held,
 * so nothing of the group interleaves; its messages use a tag of their
 * own (MB_TAG).
 */
#include "torchq.h"

#include <stdlib.h>
#include <string.h>

/* ---- receive from any source ---- */

stash *tq_stash_take(tq *q, int peer, int tag)
{
    for (stash **pp = &q->stash; *pp; pp = &(*pp)->next)
        if ((peer < 0 || (*pp)->peer == peer) && (*pp)->tag == tag) {
            stash *s = *pp;
            *pp = s->next;
            return s;
        }
    return NULL;
}

static void stash_put(tq *q, int peer, int tag, void *data, size_t len)
{
    stash *s = malloc(sizeof *s);
    if (!s) {
        free(data);
        return;
    }
    *s = (stash){NULL, peer, tag, len, data};
    stash **pp = &q->stash; /* at the end: per peer, in arrival order */
    while (*pp)
        pp = &(*pp)->next;
    *pp = s;
}

/* Test the receives of an any-source item.  Returns 1 when finished
 * (*rc, *src set), 0 while none arrived.  Under the lock. */
int tq_any_test(tq *q, item *it, int *rc, int *src)
{
    int winner = -1;
    for (int i = 0; i < it->nany; i++) {
        int done = 0, st = fccl_test(it->any[i], &done);
        if (!done)
            continue;
        it->any[i] = NULL;
        if (st < 0) {
            *rc = st;
            winner = -2;
            break;
        }
        if (winner < 0) {
            winner = i;
            continue;
        }
        /* a second message arrived before the others were cancelled */
        stash_put(q, it->anypeer[i], it->tag, it->anybuf[i], it->len);
        it->anybuf[i] = NULL;
    }
    if (winner == -1)
        return 0;
    for (int i = 0; i < it->nany; i++)
        if (it->any[i]) {
            int done = 0;
            fccl_test(it->any[i], &done);
            if (done && winner >= 0 && it->anybuf[i]) {
                stash_put(q, it->anypeer[i], it->tag, it->anybuf[i], it->len);
                it->anybuf[i] = NULL;
            } else if (!done) {
                fccl_cancel(it->any[i]);
            }
            it->any[i] = NULL;
        }
    if (winner >= 0) {
        memcpy(it->dst, it->anybuf[winner], it->len);
        *src = it->anypeer[winner];
        *rc = FCCL_OK;
    }
    return 1;
}

void tq_any_cancel(item *it)
{
    for (int i = 0; i < it->nany; i++)
        if (it->any[i]) {
            fccl_cancel(it->any[i]);
            it->any[i] = NULL;
        }
}

void tq_stash_free_all(tq *q)
{
    while (q->stash) {
        stash *s = q->stash;
        q->stash = s->next;
        free(s->data);
        free(s);
    }
}

/* ---- monitored barrier ---- */

/* Wait until nothing is queued (each operation ends by its deadline). */
static void drain(tq *q)
{
    while (q->head) {
        struct timespec ts = tq_abs_in(POLL_MAX_NS);
        pthread_cond_timedwait(&q->cv, &q->lock, &ts);
    }
}

/* Rank 0: receive one byte from every other rank within the deadline.
 * Fills missing[] (group ranks) and returns how many; <0 on error. */
static int mb_collect(tq *q, uint64_t deadline, int wait_all, int *missing)
{
    int n = q->size, nmiss = 0, rc = FCCL_OK;
    fccl_request_t **r = calloc((size_t)n, sizeof *r);
    unsigned char *b = calloc((size_t)n, 1);
    if (!r || !b) {
        free(r);
        free(b);
        return fccl_set_error(FCCL_ERR_NOMEM, "no memory");
    }
    for (int p = 1; p < n && rc == FCCL_OK; p++)
        rc = fccl_irecv(&b[p], 1, FCCL_UINT8, p, MB_TAG, q->g, &r[p]);
    int left = n - 1;
    while (rc == FCCL_OK && left > 0 && tq_now_ns() < deadline) {
        for (int p = 1; p < n; p++) {
            int done = 0;
            if (r[p] && (rc = fccl_test(r[p], &done)) == FCCL_OK && done) {
                r[p] = NULL;
                left--;
            }
            if (rc < 0) {
                r[p] = NULL;
                break;
            }
        }
        if (left > 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    for (int p = 1; p < n; p++)
        if (r[p]) {
            fccl_cancel(r[p]);
            if (wait_all || nmiss == 0)
                missing[nmiss++] = p;
        }
    free(r);
    free(b);
    return rc < 0 ? rc : nmiss;
}

/* A p2p wait bounded by deadline, by tests (so a timeout keeps nothing
 * pending).  Returns the status, FCCL_ERR_TIMEOUT if it passed. */
static int mb_wait(fccl_request_t *r, uint64_t deadline)
{
    for (;;) {
        int done = 0, rc = fccl_test(r, &done);
        if (done || rc < 0)
            return rc;
        if (tq_now_ns() >= deadline) {
            fccl_cancel(r);
            return FCCL_ERR_TIMEOUT;
        }
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
}

/* monitored_barrier(timeout_ms, wait_all) -> None; raises RuntimeError
 * naming the ranks that did not arrive (rank 0) or that rank 0 did not
 * answer (the others). */
PyObject *tq_monitored_barrier(tq *q, PyObject *args)
{
    long long timeout_ms;
    int wait_all;
    if (!PyArg_ParseTuple(args, "Lp", &timeout_ms, &wait_all))
        return NULL;
    int *missing = PyMem_Malloc((size_t)q->size * sizeof *missing);
    if (!missing)
        return PyErr_NoMemory();
    int rc = FCCL_OK, nmiss = 0;
    unsigned char one = 1;
    Py_BEGIN_ALLOW_THREADS
    pthread_mutex_lock(&q->lock);
    drain(q);
    uint64_t deadline = tq_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    fccl_request_t *r = NULL;
    if (q->rank == 0) {
        nmiss = rc = mb_collect(q, deadline, wait_all, missing);
        for (int p = 1; rc == 0 && p < q->size; p++)
            if ((rc = fccl_isend(&one, 1, FCCL_UINT8, p, MB_TAG, q->g, &r)) == 0)
                rc = mb_wait(r, deadline + 1000000000ull);
    } else if ((rc = fccl_isend(&one, 1, FCCL_UINT8, 0, MB_TAG, q->g, &r)) == 0 &&
               (rc = mb_wait(r, deadline)) == 0 &&
               (rc = fccl_irecv(&one, 1, FCCL_UINT8, 0, MB_TAG, q->g, &r)) == 0) {
        rc = mb_wait(r, deadline + 1000000000ull);
    }
    pthread_mutex_unlock(&q->lock);
    Py_END_ALLOW_THREADS
    if (rc > 0) {
        char m[1400];
        int k = snprintf(m, sizeof m, "fccl: monitored_barrier on %s: Rank%s",
                         q->name, nmiss > 1 ? "s" : "");
        for (int i = 0; i < nmiss && k < (int)sizeof m - 16; i++)
            k += snprintf(m + k, sizeof m - (size_t)k, "%s %d", i ? "," : "",
                          missing[i]);
        snprintf(m + k, sizeof m - (size_t)k, " failed to pass "
                 "monitoredBarrier in %lld ms", timeout_ms);
        PyMem_Free(missing);
        PyErr_SetString(PyExc_RuntimeError, m);
        return NULL;
    }
    PyMem_Free(missing);
    if (rc == FCCL_ERR_TIMEOUT) {
        PyErr_Format(PyExc_RuntimeError, "fccl: monitored_barrier on %s: "
                     "rank 0 did not answer within %lld ms", q->name,
                     timeout_ms);
        return NULL;
    }
    if (rc < 0)
        return fpy_raise(rc, "monitored_barrier");
    Py_RETURN_NONE;
}
