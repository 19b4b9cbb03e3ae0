/*
 * The plain transport of a server connection (conn_type.h).
 *
 * We read the socket ourselves from a read event, 64 KiB at a time into
 * the server's scratch buffer, instead of letting the bufferevent read:
 * libevent 2.1 caps each of its reads at 4 KiB and asks FIONREAD first,
 * one more system call per request.  A large value being read (struct
 * big_req) goes straight into its own buffer, a slice per loop turn, and
 * the rest of a large request straight into c->in.
 *
 * The bufferevent owns the socket (closed when it is freed) and sends only
 * what send() could not take at once: EV_WRITE is enabled just while
 * something is queued.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "clock.h"
#include "conn_type.h"
#include "err.h"
#include "log.h"
#include "server_int.h"

#define DIRECT_READ_MAX (4u << 20) /* most bytes one read_more takes */

static void note_read(struct store_conn *c, ssize_t r)
{
    c->last_ms = fccl_now_ns() / 1000000u;
    c->part_bytes += (uint64_t)r;
}

static void plain_reads(struct store_conn *c, int on)
{
    if (on)
        event_add(c->rev, NULL);
    else
        event_del(c->rev);
}

static ssize_t plain_write_now(struct store_conn *c, const uint8_t *p,
                               size_t n)
{
    ssize_t k;
    do
        k = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (k < 0 && errno == EINTR);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    return k;
}

/* One readv of up to `want` bytes into the free space of c->in.  Like
 * readv: bytes read, 0 at EOF, -1 with errno (ENOMEM if no space). */
static ssize_t plain_read_more(struct store_conn *c, size_t want)
{
    struct evbuffer_iovec v[2];
    if (want > DIRECT_READ_MAX)
        want = DIRECT_READ_MAX;
    int nv = evbuffer_reserve_space(c->in, (ev_ssize_t)want, v, 2);
    if (nv <= 0) {
        errno = ENOMEM;
        return -1;
    }
    struct iovec iov[2];
    for (int i = 0; i < nv; i++) {
        iov[i].iov_base = v[i].iov_base;
        iov[i].iov_len = v[i].iov_len;
    }
    ssize_t r;
    do
        r = readv(c->fd, iov, nv);
    while (r < 0 && errno == EINTR);
    size_t left = r > 0 ? (size_t)r : 0;
    int used = 0;
    for (; used < nv && left; used++) {
        if (v[used].iov_len > left)
            v[used].iov_len = left;
        left -= v[used].iov_len;
    }
    evbuffer_commit_space(c->in, v, used);
    if (r > 0)
        note_read(c, r);
    return r;
}

/* Nothing but our own EV_WRITE moves queued bytes to the socket. */
static int plain_hold(struct store_conn *c)
{
    bufferevent_disable(c->bev, EV_WRITE);
    return 1;
}

/* Replies go out by send() again until one is refused. */
static void plain_drained(struct store_conn *c)
{
    bufferevent_disable(c->bev, EV_WRITE);
}

static const char *plain_error(struct store_conn *c)
{
    (void)c;
    return NULL; /* a reset or EOF: the debug line says enough */
}

static void plain_release(struct store_conn *c, int keep_socket)
{
    if (c->rev)
        event_free(c->rev);
    c->rev = NULL;
    evbuffer_free(c->in);
    c->in = NULL;
    if (keep_socket)
        bufferevent_setfd(c->bev, -1);
    bufferevent_free(c->bev); /* else closes fd (BEV_OPT_CLOSE_ON_FREE) */
    c->bev = NULL;
}

/* One table per connection kind, the same slots as conn_tls.c's. */
static const struct conn_type conn_plain = {
    .name = "plain",
    .encrypted = 0,
    .reads = plain_reads,
    .write_now = plain_write_now,
    .read_more = plain_read_more,
    .hold = plain_hold,
    .drained = plain_drained,
    .error = plain_error,
    .release = plain_release,
};

/* ---- the read event ---- */

/* A large value arrives: read it straight into its buffer, one slice per
 * turn; once complete, run it.  Returns 0 at EOF, < 0 on errors (errno). */
static ssize_t big_read(struct store_conn *c)
{
    struct big_req *b = c->big;
    uint64_t due = b->vlen - b->got;
    size_t want = due < STORE_SLICE ? (size_t)due : STORE_SLICE;
    ssize_t r;
    do
        r = read(c->fd, b->val + b->got, want);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return r;
    b->got += (uint64_t)r;
    note_read(c, r);
    if (b->got == b->vlen)
        store_conn_input(c, NULL, 0);
    return r;
}

static void readable(struct store_conn *c, int fd)
{
    struct store_server *s = c->s;
    /* With TLS configured the first byte decides, before any is read. */
    if (c->state == CONN_SNIFF && conn_tls_sniff(c))
        return;
    ssize_t r;
    if (c->big && c->state != CONN_BROKEN) {
        r = big_read(c);
    } else {
        do
            r = read(fd, s->rbuf, sizeof(s->rbuf));
        while (r < 0 && errno == EINTR);
        if (r > 0) {
            note_read(c, r);
            if (c->state != CONN_BROKEN)
                store_conn_input(c, s->rbuf, (size_t)r);
            return;
        }
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return;
    if (r < 0) {
        LOG_DEBUG("STORE", "client %s: %s", c->addr, strerror(errno));
        store_conn_free(c);
    } else if (r == 0) {
        store_conn_eof(c);
    }
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    struct store_conn *c = arg;
    struct store_server *s = c->s;
    uint64_t t0 = store_turn_begin();
    (void)what;
    readable(c, fd);
    store_turn_end(s, t0);
}

int conn_plain_open(struct store_conn *c, int fd)
{
    struct store_server *s = c->s;
    c->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->in = evbuffer_new();
    c->rev = event_new(s->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    if (!c->bev || !c->in || !c->rev || event_add(c->rev, NULL) < 0) {
        if (c->rev)
            event_free(c->rev);
        if (c->in)
            evbuffer_free(c->in);
        if (c->bev)
            bufferevent_free(c->bev);
        else
            close(fd);
        return fccl_err(FCCL_ERR_NOMEM, "connection buffers");
    }
    c->ct = &conn_plain;
    c->fd = fd;
    bufferevent_setcb(c->bev, NULL, store_conn_on_write, store_conn_on_event,
                      c);
    bufferevent_disable(c->bev, EV_READ | EV_WRITE);
    return FCCL_OK;
}
