/*
 * The server's side of its journal (journal.c is the file itself: records,
 * replay, compaction).  Three jobs:
 *  - each mutation is recorded before it is applied (the handlers in
 *    server_ops.c and server_barrier.c say which record), and the record
 *    is taken back when the mutation then fails;
 *  - while the journal is failed (a write, undo or fdatasync went wrong)
 *    every write is refused until the file has been rewritten, as Redis
 *    refuses writes after a failed AOF write: the connection is closed with
 *    one log line, or SYNC reports the refusal;
 *  - with --fsync always, group commit: a reply queued while records are
 *    not yet on disk waits in its connection's output; one fdatasync at
 *    the end of the loop turn (commit_ev, activated by the first held
 *    reply) releases all of them, and when it fails those connections are
 *    closed without their replies, which would acknowledge writes that
 *    may be lost.
 * And the journal's setup: replay at start, its fdatasync events.
 */
#include <time.h>

#include <event2/event.h>

#include "clock.h"
#include "err.h"
#include "server_int.h"

/* journal_sync, timed for /metrics when there was something to sync. */
static int timed_sync(struct store_server *s)
{
    if (!s->jrn.dirty)
        return journal_sync(&s->jrn);
    uint64_t t0 = fccl_now_ns();
    int rc = journal_sync(&s->jrn);
    store_stats_sync(s, fccl_now_ns() - t0);
    return rc;
}

/* ---- setup ---- */

static void on_fsync_timer(evutil_socket_t fd, short what, void *arg)
{
    struct store_server *s = arg;
    (void)fd;
    (void)what;
    timed_sync(s);
}

static void on_commit(evutil_socket_t fd, short what, void *arg);

int store_jrn_open(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    if (!c->journal[0])
        return FCCL_OK;
    int rc = journal_open(&s->jrn, c->journal,
                          (enum journal_fsync)c->fsync_mode,
                          c->journal_recover, &s->kv);
    if (rc < 0)
        return rc;
    s->has_journal = 1;
    store_joined_from_table(s);
    if (c->fsync_mode == JOURNAL_FSYNC_ALWAYS) {
        s->commit_ev = event_new(s->base, -1, 0, on_commit, s);
        return s->commit_ev ? FCCL_OK
                            : fccl_err(FCCL_ERR_NOMEM, "journal commit event");
    }
    if (c->fsync_mode != JOURNAL_FSYNC_INTERVAL)
        return FCCL_OK;
    s->fsync_timer = event_new(s->base, -1, EV_PERSIST, on_fsync_timer, s);
    struct timeval tv = {(time_t)(c->fsync_interval_ms / 1000),
                         (suseconds_t)(c->fsync_interval_ms % 1000) * 1000};
    if (!s->fsync_timer || event_add(s->fsync_timer, &tv) < 0)
        return fccl_err(FCCL_ERR_NOMEM, "journal fsync timer");
    return FCCL_OK;
}

void store_jrn_close(struct store_server *s)
{
    if (s->fsync_timer)
        event_free(s->fsync_timer);
    if (s->commit_ev)
        event_free(s->commit_ev);
    s->fsync_timer = s->commit_ev = NULL;
    if (s->has_journal)
        journal_close(&s->jrn);
    s->has_journal = 0;
}

void store_jrn_poll(struct store_server *s)
{
    if (s->has_journal)
        journal_compact_poll(&s->jrn);
}

/* ---- records ---- */

int store_jrn_record(struct store_server *s, enum journal_rec type,
                     struct codec_slice k, const uint8_t *v, uint64_t vlen)
{
    if (!s->has_journal)
        return FCCL_OK;
    int rc = journal_writable(&s->jrn, &s->kv);
    if (rc < 0)
        return rc;
    journal_maybe_compact(&s->jrn, &s->kv);
    return journal_append(&s->jrn, type, k.p, k.len, v, vlen);
}

int store_jrn_add(struct store_server *s, struct codec_slice k, int64_t d)
{
    uint8_t v[8];
    codec_set_u64(v, (uint64_t)d);
    return store_jrn_record(s, JREC_ADD, k, v, sizeof(v));
}

void store_jrn_undo(struct store_server *s)
{
    if (s->has_journal)
        journal_undo(&s->jrn);
}

/* ---- group commit (--fsync always) ---- */

/* The fdatasync failed: c's replies would acknowledge writes that may not
 * be on disk, so c is closed without them. */
static void withhold(struct store_conn *c)
{
    if (c->state != CONN_BROKEN)
        store_conn_abort(c, "journal fdatasync failed: replies withheld");
}

static void unlink_held(struct store_conn *c)
{
    struct store_conn **pp = &c->s->jheld;
    if (!c->jheld)
        return;
    while (*pp && *pp != c)
        pp = &(*pp)->jnext;
    if (*pp)
        *pp = c->jnext;
    c->jheld = 0;
    c->jnext = NULL;
}

/* A closing connection, or one whose transport writes on its own (TLS),
 * syncs at once instead of waiting for the end of the turn. */
int store_jrn_hold(struct store_conn *c)
{
    struct store_server *s = c->s;
    if (!s->has_journal || s->jrn.mode != JOURNAL_FSYNC_ALWAYS)
        return 0;
    if (c->jheld)
        return 1; /* keep the order of what is already held */
    if (!s->jrn.dirty)
        return 0;
    if (c->state == CONN_CLOSING || !s->commit_ev || !store_conn_hold(c)) {
        if (timed_sync(s) < 0) {
            withhold(c);
            return 1; /* nothing more goes out on c */
        }
        return 0;
    }
    c->jheld = 1;
    c->jnext = s->jheld;
    s->jheld = c;
    event_active(s->commit_ev, EV_TIMEOUT, 1);
    return 1;
}

static void on_commit(evutil_socket_t fd, short what, void *arg)
{
    struct store_server *s = arg;
    uint64_t t0 = store_turn_begin();
    (void)fd;
    (void)what;
    int synced = timed_sync(s) == FCCL_OK;
    struct store_conn *c = s->jheld, *next;
    s->jheld = NULL;
    for (; c; c = next) {
        next = c->jnext;
        c->jheld = 0;
        c->jnext = NULL;
        if (!synced)
            withhold(c);
        store_conn_release(c);
    }
    store_turn_end(s, t0);
}

int store_jrn_closing(struct store_conn *c)
{
    if (!c->jheld)
        return FCCL_OK;
    int synced = timed_sync(c->s) == FCCL_OK;
    unlink_held(c);
    if (synced)
        return FCCL_OK;
    withhold(c);
    return FCCL_ERR_IO;
}

void store_jrn_forget(struct store_conn *c) { unlink_held(c); }
