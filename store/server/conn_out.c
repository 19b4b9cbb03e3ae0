/*
 * A connection's output buffer, under everything that queues replies
 * (conn_reply.c) and the journal's group commit (server_journal.c): its
 * bytes counted against the store's byte limit, holding it back and
 * releasing it, and breaking it when the peer is gone.
 *
 * Every reply byte queued in an output buffer (out_count) counts against
 * the store's byte limit with what is stored and what unfinished requests
 * hold (store_would_overflow).
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "conn_type.h"
#include "log.h"
#include "server_int.h"

static struct evbuffer *conn_out(const struct store_conn *c)
{
    return bufferevent_get_output(c->bev);
}

/* Never free c here: we may be inside another connection's request.  The
 * shut socket makes the read event report EOF, which frees it. */
void store_conn_break(struct store_conn *c, int err)
{
    if (c->state == CONN_BROKEN)
        return;
    LOG_DEBUG("STORE", "client %s: send failed: %s", c->addr, strerror(err));
    c->state = CONN_BROKEN;
    shutdown(c->fd, SHUT_RDWR);
    struct evbuffer *out = conn_out(c);
    evbuffer_drain(out, evbuffer_get_length(out));
    bufferevent_disable(c->bev, EV_WRITE);
    c->ct->reads(c, 1);
}

void store_conn_abort(struct store_conn *c, const char *why)
{
    LOG_WARN("STORE", "closing client %s: %s", c->addr, why);
    store_conn_break(c, ENOMEM);
}

int store_conn_hold(struct store_conn *c) { return c->ct->hold(c); }

void store_conn_release(struct store_conn *c)
{
    if (c->state != CONN_BROKEN && evbuffer_get_length(conn_out(c)) > 0)
        bufferevent_enable(c->bev, EV_WRITE);
}

/* ---- accounting ---- */

static void out_count(struct evbuffer *b, const struct evbuffer_cb_info *i,
                      void *arg)
{
    struct store_server *s = arg;
    (void)b;
    s->out_held += i->n_added;
    s->out_held -= i->n_deleted;
}

int store_conn_watch_out(struct store_conn *c)
{
    c->out_cb = evbuffer_add_cb(conn_out(c), out_count, c->s);
    return c->out_cb ? FCCL_OK : FCCL_ERR_NOMEM;
}

void store_conn_unwatch_out(struct store_conn *c)
{
    if (!c->out_cb)
        return;
    evbuffer_remove_cb_entry(conn_out(c), c->out_cb);
    c->out_cb = NULL;
    c->s->out_held -= evbuffer_get_length(conn_out(c));
}

int store_would_overflow(const struct store_server *s, uint64_t more)
{
    uint64_t cap = s->cfg.max_total_bytes;
    return cap && s->kv.bytes + s->held + s->out_held + more > cap;
}
