/*
 * Replies to a connection, queued in the order of its requests.  The
 * replies of one batch (the requests of one read, server_conn.c) are
 * gathered in s->out and handed to the transport at once; a reply to
 * another connection (a wake-up) or a large one goes out by itself.  Only
 * what the socket refuses goes to the bufferevent's output, and EV_WRITE
 * is enabled just then.  Large replies are queued by reference
 * (store_conn_reply_ref), not copied.  With --fsync always the journal
 * may hold them back until its fdatasync (server_journal.c).
 */
#include <errno.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "conn_type.h"
#include "server_int.h"

#define BIG_REPLY (64u << 10) /* replies this large bypass s->out */
#define OUT_KEEP (1u << 20)   /* s->out capacity kept between batches */

static struct evbuffer *conn_out(const struct store_conn *c)
{
    return bufferevent_get_output(c->bev);
}

/* Nothing queued: the bytes of p[0..n) the transport takes at once (0 if
 * it took none, or c broke). */
static size_t send_now(struct store_conn *c, const uint8_t *p, size_t n)
{
    if (evbuffer_get_length(conn_out(c)) > 0)
        return 0; /* behind what is queued */
    ssize_t k = c->ct->write_now(c, p, n);
    if (k < 0) {
        store_conn_break(c, errno);
        return 0;
    }
    return (size_t)k;
}

/* Send now what the socket takes; buffer the rest behind EV_WRITE. */
static void conn_send(struct store_conn *c, const uint8_t *p, size_t n)
{
    struct evbuffer *out = conn_out(c);
    if (c->state == CONN_BROKEN || n == 0)
        return;
    if (store_jrn_hold(c)) {
        if (c->state != CONN_BROKEN && evbuffer_add(out, p, n) < 0)
            store_conn_break(c, ENOMEM);
        return;
    }
    size_t k = send_now(c, p, n);
    p += k;
    n -= k;
    if (c->state == CONN_BROKEN || n == 0)
        return;
    if (evbuffer_add(out, p, n) < 0) {
        store_conn_break(c, ENOMEM);
        return;
    }
    bufferevent_enable(c->bev, EV_WRITE);
}

void store_conn_flush(struct store_server *s, struct store_conn *c)
{
    if (s->out.len)
        conn_send(c, s->out.p, s->out.len);
    codec_buf_reset(&s->out);
    if (s->out.cap > OUT_KEEP)
        codec_buf_free(&s->out);
}

void store_conn_reply(struct store_conn *c, const void *p, size_t n)
{
    struct store_server *s = c->s;
    if (c->state == CONN_BROKEN)
        return;
    s->st.bytes_out += n;
    if (c != s->cur) {
        conn_send(c, p, n); /* a wake-up of another client */
        return;
    }
    if (n >= BIG_REPLY) {
        store_conn_flush(s, c); /* keep order, skip the copy into s->out */
        conn_send(c, p, n);
        return;
    }
    codec_put_bytes(&s->out, p, n);
    if (s->out.oom) {
        codec_buf_reset(&s->out);
        store_conn_break(c, ENOMEM);
    }
}

void store_conn_reply_ref(struct store_conn *c, const void *p, size_t n,
                          void (*cleanup)(const void *, size_t, void *),
                          void *arg)
{
    struct store_server *s = c->s;
    struct evbuffer *out = conn_out(c);
    const uint8_t *b = p;
    s->st.bytes_out += n;
    if (c == s->cur)
        store_conn_flush(s, c);
    if (c->state != CONN_BROKEN && store_jrn_hold(c)) {
        if (c->state == CONN_BROKEN ||
            evbuffer_add_reference(out, b, n, cleanup, arg) < 0) {
            cleanup(p, n, arg);
            store_conn_break(c, ENOMEM);
        }
        return;
    }
    if (c->state != CONN_BROKEN) {
        size_t k = send_now(c, b, n);
        b += k;
        n -= k;
    }
    if (c->state == CONN_BROKEN || n == 0) {
        cleanup(p, n, arg);
        return;
    }
    if (evbuffer_add_reference(out, b, n, cleanup, arg) < 0) {
        cleanup(p, n, arg);
        store_conn_break(c, ENOMEM);
        return;
    }
    bufferevent_enable(c->bev, EV_WRITE);
}
