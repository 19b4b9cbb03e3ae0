/*
 * The engine's per-group state: created when the bootstrap hands over a
 * group (coll_group_init), freed with it (coll_group_fini).  What it holds
 * is described in run/state.h.
 */
#include <stdlib.h>

#include "clock.h"
#include "coll_group.h"
#include "env.h"
#include "err.h"
#include "request.h"
#include "select.h"
#include "shm.h"
#include "state.h"
#include "tp.h"

#define CHUNK_ENV "FCCL_CHUNK_BYTES"

/* FCCL_CHUNK_BYTES: 64 B .. 1 GiB, with an optional k/m suffix; else 0
 * (the algorithms' default). */
static size_t env_chunk(void)
{
    uint64_t v = 0;
    if (fccl_env_bytes(CHUNK_ENV, &v) != 1)
        return 0;
    return v >= 64 && v <= (1ull << 30) ? (size_t)v : 0;
}

int coll_group_init(struct fccl_group *g)
{
    if (!g || g->size < 1 || g->rank < 0 || g->rank >= g->size || !g->world)
        return fccl_err(FCCL_ERR_INVALID, "coll: malformed group");
    struct coll_state *st = calloc(1, sizeof(*st));
    if (!st)
        return fccl_err(FCCL_ERR_NOMEM, "coll: no memory for group %s",
                        g->name);
    st->g = g;
    st->chunk = env_chunk();
    coll_algo_env(st);
    if (coll_worker_init(&st->worker) < 0) {
        free(st);
        return fccl_err(FCCL_ERR_NOMEM, "coll: cannot create locks");
    }
    pthread_mutex_init(&g->lock, NULL);
    g->seq = 0;
    atomic_store(&g->err, 0);
    atomic_store(&g->stop, 0);
    g->errmsg[0] = '\0';
    g->failed_rank = -1;
    g->revoked_by = -1;
    g->next_timeout_ms = 0;
    if (g->timeout_ms <= 0)
        g->timeout_ms = fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS);
    g->state = st;
    /* a member's failure notice stops this group's waits (sticky.c) */
    tp_group_watch(g->tp, g->ctx, &g->stop);
    return FCCL_OK;
}

void coll_group_fini(struct fccl_group *g)
{
    if (!g || !g->state)
        return;
    struct coll_state *st = g->state;
    coll_worker_stop(&st->worker);
    tp_group_unwatch(g->tp, g->ctx, &g->stop);
    coll_seg_free(st->seg);
    coll_seg_free(st->hseg);
    free(st->scratch);
    free(st->reqs);
    free(st->idx);
    free(st);
    g->state = NULL;
    pthread_mutex_destroy(&g->lock);
}
