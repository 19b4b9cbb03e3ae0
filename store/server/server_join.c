/*
 * Workers joining: the "init/" counter a joining client adds 1 to (as
 * PyTorch's TCPStore clients do), its value as s->joined (after a
 * journal's replay too), the log lines as it climbs to world_size, and
 * fccl_server_wait_workers sleeping until it gets there.  The join timeout
 * (--wait-for-workers) is server.c's, on the loop's timers.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "server_int.h"

#define JOIN_KEY "init/"

/* The mutex and condition fccl_server_wait_workers sleeps on (its clock
 * is the monotonic one, as every deadline of fccl). */
int store_join_init(struct store_server *s)
{
    pthread_condattr_t a;
    if (pthread_condattr_init(&a) != 0)
        return fccl_err(FCCL_ERR_NOMEM, "condattr");
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    int e = pthread_cond_init(&s->join_cv, &a);
    pthread_condattr_destroy(&a);
    if (e)
        return fccl_err_sys(FCCL_ERR_NOMEM, e, "pthread_cond_init");
    if ((e = pthread_mutex_init(&s->join_mu, NULL)) != 0) {
        pthread_cond_destroy(&s->join_cv);
        return fccl_err_sys(FCCL_ERR_NOMEM, e, "pthread_mutex_init");
    }
    s->join_sync = 1;
    return FCCL_OK;
}

int64_t fccl_server_joined(const struct store_server *s)
{
    return s ? atomic_load(&s->joined) : 0;
}

static void timespec_at(struct timespec *ts, uint64_t ns)
{
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

int fccl_server_wait_workers(struct store_server *s, int n,
                             int64_t timeout_ms)
{
    if (!s || n < 0 || timeout_ms < 0)
        return fccl_err(FCCL_ERR_INVALID, "fccl_server_wait_workers: %s",
                        !s ? "server is NULL" : "n and timeout must be >= 0");
    uint64_t deadline = fccl_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    struct timespec ts;
    timespec_at(&ts, deadline);
    pthread_mutex_lock(&s->join_mu);
    while (atomic_load(&s->joined) < n && !atomic_load(&s->ended) &&
           fccl_now_ns() < deadline)
        if (pthread_cond_timedwait(&s->join_cv, &s->join_mu, &ts) == ETIMEDOUT)
            break;
    int64_t j = atomic_load(&s->joined);
    int ended = atomic_load(&s->ended);
    pthread_mutex_unlock(&s->join_mu);
    if (j >= n)
        return FCCL_OK;
    if (ended)
        return fccl_err(FCCL_ERR_STATE, "store %s stopped with %lld of %d "
                        "workers joined", s->address, (long long)j, n);
    return fccl_err(FCCL_ERR_TIMEOUT, "store %s: %lld of %d workers joined "
                    "within %lld ms", s->address, (long long)j, n,
                    (long long)timeout_ms);
}

static void join_notify(struct store_server *s)
{
    pthread_mutex_lock(&s->join_mu);
    pthread_cond_broadcast(&s->join_cv);
    pthread_mutex_unlock(&s->join_mu);
}

void store_join_counted(struct store_server *s, struct codec_slice key,
                        int64_t v)
{
    if (key.len != strlen(JOIN_KEY) || memcmp(key.p, JOIN_KEY, key.len) != 0)
        return;
    struct store_server_config *cfg = &s->cfg;
    int64_t before = s->joined;
    s->joined = v;
    if (v != before)
        join_notify(s);
    if (!cfg->wait_for_workers || v <= before || before >= cfg->world_size)
        return;
    if (v >= cfg->world_size) {
        LOG_INFO("STORE", "all %d workers joined", cfg->world_size);
        if (s->join_timer)
            event_del(s->join_timer);
        return;
    }
    LOG_INFO("STORE", "%lld/%d workers joined", (long long)v,
             cfg->world_size);
}

/* After a journal replay: the join counter's value is what workers joined
 * before the restart. */
void store_joined_from_table(struct store_server *s)
{
    struct kv_entry *e = kv_find(&s->kv, (const uint8_t *)JOIN_KEY,
                                 strlen(JOIN_KEY));
    char num[32];
    if (!e || !e->has_val || e->vlen == 0 || e->vlen >= sizeof(num))
        return;
    memcpy(num, e->val, e->vlen);
    num[e->vlen] = '\0';
    s->joined = strtoll(num, NULL, 10);
}
