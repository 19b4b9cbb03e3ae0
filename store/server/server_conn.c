/*
 * One client connection of the store server, its life: read -> parse ->
 * dispatch -> reply, with back-pressure, then closing.  The bytes come and
 * go through the connection's transport (conn_type.h: conn_plain.c or
 * conn_tls.c); what is here is the same for both.  The replies themselves
 * are conn_reply.c's, the output buffer under them conn_out.c's; a
 * connection is made when it is accepted (store_conn_new, server.c).
 *
 * Parsing: when nothing is buffered for the connection, requests are
 * parsed straight from the bytes just read and only an incomplete tail is
 * copied into the connection's input evbuffer.  From there a request is
 * parsed again only once `need` bytes (the codec's lower bound for it) are
 * buffered, so a large value is not re-parsed per TCP segment; while a
 * large request is incomplete the transport reads straight into the
 * evbuffer in big chunks.  Pipelined requests are answered in order.
 *
 * Writing: the bufferevent owns the socket (closed when it is freed), the
 * output buffer, the write event, its watermark and timeout.  The replies
 * of one batch are sent together when the batch ends (store_conn_flush).
 * A client whose unsent replies pass OUT_HIGH is not read until they
 * drain to OUT_LOW.
 *
 * Fairness: a connection reads at most STORE_SLICE (1 MiB) directly per
 * loop turn.  A SET / APPEND / QUEUE_PUSH whose value is big_value_min
 * (1 MiB) or more is read into a buffer of its own (struct big_req), a
 * slice per turn, and a SET's buffer becomes the stored value.
 *
 * Accounting: every byte held for an unfinished request (hold_update)
 * counts against the store's byte limit with what is stored and what is
 * queued (store_would_overflow, conn_out.c).
 *
 * The files below this one in the module map (server_int.h) close a
 * connection (an eviction) or resume it (a deferred proof, a listing's
 * end) through s->life (store_conn_life, set by server.c), never by
 * calling up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "dlist.h"
#include "clock.h"
#include "conn_type.h"
#include "err.h"
#include "log.h"
#include "backend_etcd.h"
#include "server_int.h"

#define OUT_HIGH (4u << 20)         /* stop reading a client above this */
#define OUT_LOW (1u << 20)          /* and resume below this */
#define DIRECT_READ_MIN (16u << 10) /* read into the evbuffer when this much
                                       of a request is still due */
#define CLOSE_FLUSH_SEC 10     /* EOF'd client: time to take its replies */

/* What stopped a connection's requests: more bytes needed, replies piled
 * up, a listing in progress (server_list.c), the connection must go, a
 * request that must wait (STORE_DEFER), or the connection must go once its
 * replies are sent (close_after: a refusal told in-band). */
enum drive { D_NEED, D_FULL, D_LIST, D_CLOSE, D_DEFER, D_AFTER };

static struct evbuffer *conn_out(const struct store_conn *c)
{
    return bufferevent_get_output(c->bev);
}

static void reads_on(struct store_conn *c) { c->ct->reads(c, 1); }

static void reads_off(struct store_conn *c) { c->ct->reads(c, 0); }

static void conn_pause(struct store_conn *c);
static void conn_drive(struct store_conn *c, const uint8_t *fresh, size_t n);

void store_conn_list_done(struct store_conn *c)
{
    if (c->state == CONN_BROKEN || c->state == CONN_CLOSING)
        return;
    if (evbuffer_get_length(conn_out(c)) > OUT_HIGH) {
        conn_pause(c); /* on_write resumes reads and requests */
        return;
    }
    c->last_ms = fccl_now_ns() / 1000000u; /* its timeout starts now */
    reads_on(c);
    conn_drive(c, NULL, 0); /* requests that came behind the listing */
}

static size_t pending_out(const struct store_conn *c)
{
    size_t n = evbuffer_get_length(conn_out(c));
    return c == c->s->cur ? n + c->s->out.len : n;
}

/* ---- parsing ---- */

/* Every byte held for an unfinished request counts against the store's
 * byte limit, so many clients cannot make us buffer more than the store may
 * hold: what is buffered, or what the parser proved is due, whichever is
 * more (a large value: its whole buffer). */
static uint64_t hold_wanted(const struct store_conn *c)
{
    size_t buffered = evbuffer_get_length(c->in);
    if (c->big)
        return c->big->vlen + c->big->klen + buffered;
    if (buffered == 0)
        return 0;
    return c->need > buffered ? c->need : buffered;
}

static void release_held(struct store_conn *c)
{
    c->s->held -= c->held;
    c->held = 0;
}

/* Update c's share of s->held; FCCL_ERR_LIMIT if it would pass the limit
 * (only growth is refused). */
static int hold_update(struct store_conn *c)
{
    struct store_server *s = c->s;
    uint64_t want = hold_wanted(c);
    if (want > c->held && store_would_overflow(s, want - c->held))
        return fccl_err(FCCL_ERR_LIMIT,
                        "unfinished request of %llu bytes would pass the "
                        "store's %llu-byte limit (stored, held and queued "
                        "bytes count)",
                        (unsigned long long)want,
                        (unsigned long long)s->cfg.max_total_bytes);
    s->held = s->held - c->held + want;
    c->held = want;
    if (want == 0)
        c->part_ms = 0;
    else if (!c->part_ms)
        c->part_ms = c->last_ms ? c->last_ms : fccl_now_ns() / 1000000u;
    return FCCL_OK;
}

static void log_close(const struct store_conn *c, const char *why)
{
    if (c->refused) /* its refusal was logged when it was decided */
        LOG_DEBUG("STORE", "closing refused client %s: %s", c->addr, why);
    else
        LOG_WARN("STORE", "closing client %s: %s", c->addr, why);
}

/* Decide the dialect from the first bytes; a TLS hello is refused (with
 * TLS configured it never gets here: conn_tls_sniff took it). */
static int sniff_dialect(struct store_conn *c, const uint8_t *p, size_t avail)
{
    if (p[0] == 0x16)
        return fccl_err(FCCL_ERR_UNSUPPORTED,
                        "TLS handshake, but this server has no TLS");
    c->dialect = codec_sniff_dialect(p, avail < 5 ? avail : 5);
    if (c->dialect == DIALECT_UNKNOWN)
        c->need = 5;
    else
        LOG_DEBUG("STORE", "client %s speaks the %s dialect", c->addr,
                  c->dialect == DIALECT_MODERN ? "modern" : "legacy");
    return FCCL_OK;
}

/* ---- large values ---- */

static void big_free(struct store_conn *c)
{
    if (!c->big)
        return;
    free(c->big->key);
    free(c->big->val);
    free(c->big);
    c->big = NULL;
}

/* p[0..len) starts a request of at least big_value_min bytes.  If it is a
 * SET / APPEND / QUEUE_PUSH whose head is here, switch c to reading its
 * value into a buffer of its own and copy in the value bytes already here.
 * Returns 1 if switched (all of p is used), 0 if not. */
static int big_start(struct store_conn *c, const uint8_t *p, size_t len)
{
    struct codec_req req;
    uint64_t vlen;
    size_t head;
    if (codec_parse_value_head(c->dialect, &c->s->lim, p, len, &req, &vlen,
                               &head) != CODEC_OK ||
        vlen < c->s->big_value_min)
        return 0;
    struct big_req *b = calloc(1, sizeof(*b));
    uint8_t *key = malloc(req.key.len ? req.key.len : 1);
    uint8_t *val = malloc(vlen);
    if (!b || !key || !val) {
        free(b), free(key), free(val);
        return 0; /* buffered the ordinary way; fails there if it must */
    }
    memcpy(key, req.key.p, req.key.len);
    b->op = req.op;
    b->key = key;
    b->klen = req.key.len;
    b->val = val;
    b->vlen = vlen;
    b->got = len - head; /* < vlen: else the request was complete */
    memcpy(val, p + head, b->got);
    c->big = b;
    c->need = 1;
    c->s->st.bytes[b->op] += head;
    return 1;
}

/* Move buffered value bytes into the big buffer. */
static void big_fill(struct store_conn *c)
{
    struct big_req *b = c->big;
    size_t have = evbuffer_get_length(c->in);
    uint64_t due = b->vlen - b->got;
    size_t m = have < due ? have : (size_t)due;
    if (m && evbuffer_remove(c->in, b->val + b->got, m) == (int)m)
        b->got += m;
}

/* The value is complete: run the request. */
static int big_finish(struct store_server *s, struct store_conn *c)
{
    struct big_req *b = c->big;
    struct codec_req req = {.op = b->op,
                            .key = {b->key, b->klen},
                            .val = {b->val, b->vlen}};
    int rc = store_dispatch_owned(s, c, &req, &b->val);
    s->st.reqs[b->op]++;
    s->st.bytes[b->op] += b->vlen;
    big_free(c);
    return rc;
}

/* Parse and run the complete requests at the start of p[0..len).  *used
 * gets the bytes consumed; c->need what the next request needs. */
static enum drive run_region(struct store_server *s, struct store_conn *c,
                             const uint8_t *p, size_t len, size_t *used)
{
    size_t off = 0;
    enum drive d = D_NEED;
    while (c->state != CONN_BROKEN && len - off >= c->need) {
        if (c->dialect == DIALECT_UNKNOWN) {
            if (sniff_dialect(c, p + off, len - off) < 0) {
                log_close(c, fccl_last_error());
                d = D_CLOSE;
                break;
            }
            continue;
        }
        struct codec_req req;
        size_t n;
        int rc = codec_parse_request(c->dialect, &s->lim, p + off, len - off,
                                     &req, &n);
        if (rc == CODEC_NEED_MORE) {
            c->need = n;
            if (n >= s->big_value_min &&
                big_start(c, p + off, len - off) == 1)
                off = len; /* the rest of the region is the value's */
            break;
        }
        if (rc < 0) {
            LOG_WARN("STORE", "closing client %s: %s (type byte %d)",
                     c->addr, codec_result_str(rc), (int)p[off]);
            d = D_CLOSE;
            break;
        }
        rc = store_dispatch(s, c, &req);
        if (rc == STORE_DEFER) {
            d = D_DEFER; /* the request stays unread */
            break;
        }
        s->st.reqs[req.op]++;
        s->st.bytes[req.op] += n;
        off += n;
        c->need = 1;
        if (rc < 0) {
            log_close(c, fccl_last_error());
            d = D_CLOSE;
            break;
        }
        if (c->close_after) {
            d = D_AFTER;
            break;
        }
        if (c->list) {
            d = D_LIST;
            break;
        }
        if (pending_out(c) > OUT_HIGH) {
            d = D_FULL;
            break;
        }
    }
    *used = off;
    return d;
}

/* Run what is complete in the connection's input buffer. */
static enum drive run_buffered(struct store_server *s, struct store_conn *c)
{
    struct evbuffer *in = c->in;
    for (;;) {
        if (c->list)
            return D_LIST;
        if (c->big) {
            big_fill(c);
            if (c->big->got < c->big->vlen)
                return D_NEED;
            if (big_finish(s, c) < 0) {
                log_close(c, fccl_last_error());
                return D_CLOSE;
            }
            if (pending_out(c) > OUT_HIGH)
                return D_FULL;
            continue;
        }
        size_t avail = evbuffer_get_length(in);
        if (avail == 0 || avail < c->need || c->state == CONN_BROKEN)
            return D_NEED;
        size_t n = evbuffer_get_contiguous_space(in);
        n = n < c->need ? c->need : n;
        n = n > avail ? avail : n;
        const uint8_t *p = evbuffer_pullup(in, (ev_ssize_t)n);
        if (!p) {
            log_close(c, "out of memory buffering a request");
            return D_CLOSE;
        }
        size_t used;
        enum drive d = run_region(s, c, p, n, &used);
        evbuffer_drain(in, used);
        if (d != D_NEED)
            return d;
        if (c->big)
            continue;
        if (used == 0 && c->need <= n)
            return D_NEED; /* no progress possible (defensive) */
    }
}

static void conn_linger(struct store_conn *c);

/* A refusal was queued (close_after): send it, then half-close and wait
 * for the peer's EOF (the sweep gives up after STORE_REFUSED_LINGER_MS)
 * rather than close at once: closing a socket with unread input resets
 * the connection, and the reset may destroy the reply before the client
 * has read it. */
static void conn_close_after(struct store_conn *c)
{
    c->closing_ms = fccl_now_ns() / 1000000u;
    c->draining = 1;
    conn_linger(c);
    if (c->state != CONN_CLOSING)
        return; /* withheld by the journal: c is broken */
    reads_on(c); /* what it still sends is read and dropped; EOF frees it */
    if (evbuffer_get_length(conn_out(c)) == 0)
        shutdown(c->fd, SHUT_WR);
}

void store_conn_resume(struct store_conn *c)
{
    if (c->state == CONN_BROKEN || c->state == CONN_CLOSING)
        return;
    reads_on(c);
    conn_drive(c, NULL, 0);
}

static void conn_pause(struct store_conn *c)
{
    c->paused = 1;
    reads_off(c);
    bufferevent_setwatermark(c->bev, EV_WRITE, OUT_LOW, 0);
    LOG_DEBUG("STORE", "client %s is not reading its replies; pausing it",
              c->addr);
}

/* Take `n` fresh bytes (may be 0): run what is complete, keep the rest,
 * read big requests directly, send the replies.  May free c. */
static void conn_drive(struct store_conn *c, const uint8_t *fresh, size_t n)
{
    struct store_server *s = c->s;
    enum drive d = D_NEED;
    size_t budget = STORE_SLICE; /* bytes read directly in this turn */
    s->cur = c;
    if (n && !c->big && !c->list && evbuffer_get_length(c->in) == 0) {
        size_t used;
        d = run_region(s, c, fresh, n, &used);
        fresh += used;
        n -= used;
    }
    if (d != D_CLOSE && n && evbuffer_add(c->in, fresh, n) < 0) {
        log_close(c, "out of memory buffering a request");
        d = D_CLOSE;
    }
    for (;;) {
        if (d == D_NEED)
            d = run_buffered(s, c);
        s->cur = NULL;
        if (d != D_CLOSE && hold_update(c) < 0) {
            log_close(c, fccl_last_error());
            d = D_CLOSE;
        }
        if (d == D_CLOSE && c->fccl && c->state == CONN_OPEN &&
            (s->out.len || evbuffer_get_length(conn_out(c)))) {
            /* An fccl client gets the replies of the requests before the
             * one that closes it: its hello's ack may explain the close
             * (a token is needed). */
            store_conn_flush(s, c);
            if (c->state != CONN_BROKEN) {
                conn_close_after(c);
                return;
            }
        }
        if (d == D_CLOSE) {
            codec_buf_reset(&s->out);
            store_conn_free(c);
            return;
        }
        store_conn_flush(s, c);
        if (d == D_LIST || d == D_DEFER) {
            reads_off(c); /* until the listing's reply is queued, or the
                             deferred request's time has come */
            return;
        }
        if (d == D_AFTER) {
            conn_close_after(c);
            return;
        }
        if (d == D_FULL && evbuffer_get_length(conn_out(c)) > OUT_HIGH) {
            conn_pause(c);
            return;
        }
        if (d == D_NEED) {
            /* A large request is read straight into the evbuffer, at most
             * STORE_SLICE per turn; the rest waits for the next turn.  EOF
             * and errors show up on the transport's read path. */
            size_t avail = evbuffer_get_length(c->in);
            if (c->state == CONN_BROKEN || c->big ||
                budget < DIRECT_READ_MIN || c->need < avail + DIRECT_READ_MIN)
                return;
            size_t want = c->need - avail;
            ssize_t r = c->ct->read_more(c, want < budget ? want : budget);
            if (r <= 0)
                return;
            budget -= (size_t)r;
        }
        d = D_NEED;
        s->cur = c;
    }
}

/* EOF with replies still queued: flush them (bounded), then free. */
static void conn_linger(struct store_conn *c)
{
    struct timeval tv = {CLOSE_FLUSH_SEC, 0};
    waiters_cancel(&c->s->ws, &c->wait);
    store_barrier_drop(c->s, c);
    store_be_conn_gone(c);
    big_free(c);
    store_list_free(c);
    release_held(c);
    c->part_ms = 0;
    c->state = CONN_CLOSING;
    reads_off(c);
    if (store_jrn_closing(c) < 0)
        return; /* closed without the replies held for the journal */
    bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
    bufferevent_set_timeouts(c->bev, NULL, &tv);
    bufferevent_enable(c->bev, EV_WRITE);
}

void store_conn_input(struct store_conn *c, const uint8_t *fresh, size_t n)
{
    if (c->state == CONN_CLOSING) {
        evbuffer_drain(c->in, evbuffer_get_length(c->in));
        return; /* told why and closing: what it sends is dropped */
    }
    conn_drive(c, fresh, n);
}

void store_conn_eof(struct store_conn *c)
{
    if (c->state != CONN_BROKEN && evbuffer_get_length(conn_out(c)) &&
        !c->draining)
        conn_linger(c);
    else
        store_conn_free(c);
}

void store_conn_set_transport(struct store_conn *c,
                              const struct conn_type *ct,
                              struct bufferevent *bev, struct evbuffer *in)
{
    store_conn_unwatch_out(c);
    c->ct->release(c, 1);
    c->ct = ct;
    c->bev = bev;
    c->in = in;
    if (store_conn_watch_out(c) < 0)
        LOG_WARN("STORE", "client %s: queued %s replies go uncounted",
                 c->addr, ct->name);
}

/* ---- bufferevent callbacks (output side) ---- */

static void writable(struct bufferevent *bev, struct store_conn *c)
{
    size_t left = evbuffer_get_length(bufferevent_get_output(bev));
    if (c->state == CONN_CLOSING && left == 0 && c->draining) {
        bufferevent_disable(bev, EV_WRITE);
        shutdown(c->fd, SHUT_WR); /* then its EOF frees it */
        return;
    }
    if (c->state == CONN_CLOSING && left == 0) {
        store_conn_free(c);
        return;
    }
    if (left == 0)
        c->ct->drained(c);
    if (c->paused && left <= OUT_LOW && c->state != CONN_CLOSING) {
        c->paused = 0;
        c->last_ms = fccl_now_ns() / 1000000u; /* its timeout starts now */
        bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
        reads_on(c);
        conn_drive(c, NULL, 0); /* requests may be waiting in c->in */
    }
}

void store_conn_on_write(struct bufferevent *bev, void *arg)
{
    struct store_conn *c = arg;
    struct store_server *s = c->s;
    uint64_t t0 = store_turn_begin();
    writable(bev, c);
    store_turn_end(s, t0);
}

/* Write errors and flush timeouts of any connection; for transports that
 * read through their bufferevent (TLS) also the handshake's end and EOF. */
void store_conn_on_event(struct bufferevent *bev, short what, void *arg)
{
    struct store_conn *c = arg;
    const char *why;
    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        LOG_DEBUG("STORE", "client %s: %s handshake done", c->addr,
                  c->ct->name);
        if (c->state == CONN_HANDSHAKE)
            c->state = CONN_OPEN;
        c->part_ms = 0;
        return;
    }
    if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) &&
        c->state != CONN_BROKEN && c->state != CONN_CLOSING &&
        evbuffer_get_length(conn_out(c))) {
        conn_linger(c);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT)
        LOG_WARN("STORE", "client %s: gave up flushing replies after "
                 "it closed", c->addr);
    else if ((what & BEV_EVENT_ERROR) && c->state != CONN_BROKEN &&
             (why = c->ct->error(c)))
        LOG_WARN("STORE", "closing client %s: %s: %s", c->addr, c->ct->name,
                 why);
    else
        LOG_DEBUG("STORE", "client %s: connection ended", c->addr);
    store_conn_free(c);
}

/* ---- lifecycle ---- */

void store_conn_free(struct store_conn *c)
{
    struct store_server *s = c->s;
    LOG_DEBUG("STORE", "client %s disconnected", c->addr);
    waiters_cancel(&s->ws, &c->wait);
    store_barrier_drop(s, c);
    store_be_conn_gone(c);
    big_free(c);
    store_list_free(c);
    release_held(c);
    store_jrn_forget(c);
    store_conn_unwatch_out(c);
    store_slots_detach(s, c);
    store_auth_conn_free(c);
    free(c->sync_msg);
    free(c->refuse_msg);
    DLIST_UNLINK(s->conns, c, prev, next);
    s->nconns--;
    c->ct->release(c, 0); /* closes the socket */
    free(c);
}

const struct store_conn_life store_conn_life = {
    .free = store_conn_free,
    .resume = store_conn_resume,
    .list_done = store_conn_list_done,
};
