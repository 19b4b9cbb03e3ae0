/*
 * tcpstore-server --backend etcd://: the curl multi handle on libevent,
 * one etcd request ("transfer") with failover between members, the auth
 * token, and the order of each connection's replies (backend_etcd.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <openssl/rand.h>

#include "dlist.h"
#include "backend_etcd.h"
#include "clock.h"
#include "err.h"
#include "etcd_watch.h"
#include "log.h"
#include "server_int.h"

#define BACKOFF_FIRST_MS 20
#define BACKOFF_CAP_MS 500
#define OPS_PER_CONN_MAX 4096 /* requests in flight on one connection */
#define OPEN_MS 10000         /* reaching a member at start */

struct be_state {
    struct etcd_conf conf;
    CURLM *multi;
    struct event *timer;
    int cur;
    char *token;
    char id[40];
    uint64_t seq;
    uint64_t nreq, nfailover, nlost, nops, nops_now;
};

struct be_sock {
    struct event *ev;
};

struct be_xfer {
    struct etcd_http h;
    struct be_op *op;
    int slot, member, repeatable, stream, tries, reauth, authing;
    const char *path;
    char *text;
    size_t len;
    be_next next;
    struct event *retry;
    int64_t backoff;
};

static struct be_state *st(struct store_server *s) { return s->be; }

const struct etcd_conf *be_conf(struct store_server *s)
{
    return &st(s)->conf;
}

struct ek_key be_key(struct store_server *s, const void *p, size_t n)
{
    const struct etcd_conf *c = be_conf(s);
    return ek_cat(c->t.prefix, c->t.prefixlen, p, n, NULL, 0, NULL, 0);
}

struct ek_key be_receipt_key(struct store_server *s)
{
    const struct etcd_conf *c = be_conf(s);
    return ek_cat(c->t.prefix, c->t.prefixlen, "\0r", 2, st(s)->id,
                  strlen(st(s)->id), NULL, 0);
}

uint64_t be_next_seq(struct store_server *s) { return ++st(s)->seq; }

/* ---- curl on libevent ---- */

static void check_done(struct store_server *s);

static void on_sock_event(evutil_socket_t fd, short what, void *arg)
{
    struct store_server *s = arg;
    int flags = ((what & EV_READ) ? CURL_CSELECT_IN : 0) |
                ((what & EV_WRITE) ? CURL_CSELECT_OUT : 0);
    int running = 0;
    uint64_t t0 = store_turn_begin();
    curl_multi_socket_action(st(s)->multi, fd, flags, &running);
    check_done(s);
    store_turn_end(s, t0);
}

static int on_socket(CURL *e, curl_socket_t fd, int what, void *userp,
                     void *sockp)
{
    (void)e;
    struct store_server *s = userp;
    struct be_sock *bs = sockp;
    if (what == CURL_POLL_REMOVE) {
        if (bs) {
            event_free(bs->ev);
            free(bs);
            curl_multi_assign(st(s)->multi, fd, NULL);
        }
        return 0;
    }
    if (!bs) {
        bs = calloc(1, sizeof(*bs));
        if (!bs)
            return -1;
        curl_multi_assign(st(s)->multi, fd, bs);
    } else {
        event_free(bs->ev);
    }
    short ev = (short)(EV_PERSIST | ((what & CURL_POLL_IN) ? EV_READ : 0) |
                       ((what & CURL_POLL_OUT) ? EV_WRITE : 0));
    bs->ev = event_new(s->base, fd, ev, on_sock_event, s);
    if (!bs->ev || event_add(bs->ev, NULL) < 0)
        return -1;
    return 0;
}

static void on_timeout(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct store_server *s = arg;
    int running = 0;
    curl_multi_socket_action(st(s)->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(s);
}

static int on_timer(CURLM *m, long ms, void *userp)
{
    (void)m;
    struct store_server *s = userp;
    if (ms < 0) {
        evtimer_del(st(s)->timer);
        return 0;
    }
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return evtimer_add(st(s)->timer, &tv);
}

/* ---- transfers ---- */

static void xfer_free(struct be_xfer *x)
{
    if (!x)
        return;
    if (x->retry)
        event_free(x->retry);
    etcd_http_free(&x->h);
    free(x->text);
    free(x);
}

static int xfer_start(struct be_xfer *x);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct be_xfer *x = arg;
    if (xfer_start(x) < 0) {
        struct be_op *op = x->op;
        op->x[x->slot] = NULL;
        be_next next = x->next;
        xfer_free(x);
        next(op, fccl_err(FCCL_ERR_NOMEM, "starting an etcd request"), NULL);
    }
}

/* Try again after a pause (all members were tried once). */
static int xfer_later(struct be_xfer *x)
{
    struct store_server *s = x->op->s;
    if (!x->retry && !(x->retry = evtimer_new(s->base, on_retry, x)))
        return FCCL_ERR_NOMEM;
    int64_t ms = x->backoff / 2 + rand() % (x->backoff + 1);
    x->backoff = x->backoff * 2 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS
                                                 : x->backoff * 2;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};
    return evtimer_add(x->retry, &tv) < 0 ? FCCL_ERR_NOMEM : FCCL_OK;
}

static int xfer_start(struct be_xfer *x)
{
    struct be_op *op = x->op;
    struct be_state *b = st(op->s);
    x->member = b->cur;
    int64_t left = fccl_ms_left(op->deadline);
    int64_t lim = x->stream ? BE_WATCH_SLICE_MS : ETCD_ATTEMPT_MS;
    if (!x->stream && lim > left)
        lim = left > 0 ? left : 1;
    const char *path = x->authing ? "/v3/auth/authenticate" : x->path;
    char *body = NULL;
    size_t blen = 0;
    if (x->authing) {
        json_object *a = json_object_new_object();
        if (a) {
            json_object_object_add(a, "name",
                                   json_object_new_string(b->conf.user));
            json_object_object_add(a, "password",
                                   json_object_new_string(b->conf.password));
            body = etcd_text(a, &blen);
            json_object_put(a);
        }
    } else if ((body = malloc(x->len + 1))) {
        memcpy(body, x->text, x->len + 1);
        blen = x->len;
    }
    if (!body)
        return FCCL_ERR_NOMEM;
    if (etcd_http_setup(&x->h, &b->conf, x->member, path, body, blen,
                        x->authing ? NULL : b->token, lim) < 0)
        return FCCL_ERR_NOMEM;
    if (x->stream) {
        x->h.reply.stream = etcd_watch_feed;
        x->h.reply.arg = &op->w[x->slot];
    }
    curl_easy_setopt(x->h.easy, CURLOPT_PRIVATE, x);
    b->nreq++;
    return curl_multi_add_handle(b->multi, x->h.easy) == CURLM_OK
               ? FCCL_OK : FCCL_ERR_NOMEM;
}

static void member_next(struct be_state *b, int m)
{
    if (b->cur == m)
        b->cur = (m + 1) % b->conf.t.n;
    b->nfailover++;
}

/* Hand x's outcome to its op (x is freed first). */
static void xfer_end(struct be_xfer *x, int rc, json_object *rep)
{
    struct be_op *op = x->op;
    be_next next = x->next;
    op->x[x->slot] = NULL;
    xfer_free(x);
    next(op, rc, rep);
    json_object_put(rep);
}

static void took_token(struct be_xfer *x, json_object *rep)
{
    struct be_state *b = st(x->op->s);
    json_object *t = NULL;
    const char *tok = json_object_object_get_ex(rep, "token", &t)
                          ? json_object_get_string(t) : NULL;
    free(b->token);
    b->token = tok ? strdup(tok) : NULL;
    json_object_put(rep);
}

static void xfer_finished(struct be_xfer *x, CURLcode cc)
{
    struct be_op *op = x->op;
    struct be_state *b = st(op->s);
    if (cc == CURLE_WRITE_ERROR && x->h.reply.stopped) {
        xfer_end(x, FCCL_OK, NULL); /* a watch saw what it waited for */
        return;
    }
    json_object *rep = NULL;
    int code = 0;
    enum etcd_outcome o = etcd_http_judge(&x->h, &b->conf, x->member, cc,
                                          &rep, &code);
    if (o == ETCD_DONE && x->authing) {
        took_token(x, rep);
        x->authing = 0;
        o = xfer_start(x) == FCCL_OK ? ETCD_DONE : ETCD_FAILED;
        if (o == ETCD_DONE)
            return;
        code = FCCL_ERR_NOMEM;
    }
    if (x->stream && cc == CURLE_OPERATION_TIMEDOUT) {
        xfer_end(x, FCCL_ERR_TIMEOUT, NULL); /* the slice is over */
        return;
    }
    switch (o) {
    case ETCD_DONE:
        xfer_end(x, FCCL_OK, rep);
        return;
    case ETCD_FAILED:
        xfer_end(x, code, NULL);
        return;
    case ETCD_REAUTH:
        if (!b->conf.user || x->reauth++ >= 2) {
            xfer_end(x, FCCL_ERR_AUTH, NULL);
            return;
        }
        x->authing = 1;
        if (xfer_start(x) < 0)
            xfer_end(x, FCCL_ERR_NOMEM, NULL);
        return;
    case ETCD_UNCERTAIN:
        member_next(b, x->member);
        if (!x->repeatable) {
            b->nlost++;
            xfer_end(x, BE_UNCERTAIN, NULL);
            return;
        }
        break;
    case ETCD_NOT_SENT:
        member_next(b, x->member);
        break;
    }
    if (fccl_ms_left(op->deadline) <= 0 && !x->stream) {
        xfer_end(x, fccl_err_wrap(FCCL_ERR_CONNECT, "no etcd member of %d "
                                  "answered in time; last",
                                  b->conf.t.n), NULL);
        return;
    }
    int rc = ++x->tries % b->conf.t.n == 0 ? xfer_later(x) : xfer_start(x);
    if (rc < 0)
        xfer_end(x, FCCL_ERR_NOMEM, NULL);
}

static void check_done(struct store_server *s)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(st(s)->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        struct be_xfer *x = NULL;
        CURL *e = m->easy_handle;
        CURLcode cc = m->data.result;
        curl_easy_getinfo(e, CURLINFO_PRIVATE, (char **)&x);
        curl_multi_remove_handle(st(s)->multi, e);
        if (x)
            xfer_finished(x, cc);
    }
}

void be_send(struct be_op *op, int slot, const char *path, json_object *req,
             int repeatable, int stream, be_next next)
{
    struct be_xfer *x = calloc(1, sizeof(*x));
    size_t len = 0;
    char *text = req ? etcd_text(req, &len) : NULL;
    json_object_put(req);
    if (!x || !text) {
        free(x);
        free(text);
        next(op, fccl_err(FCCL_ERR_NOMEM, "building an etcd request"), NULL);
        return;
    }
    *x = (struct be_xfer){.op = op, .slot = slot, .repeatable = repeatable,
                          .stream = stream, .path = path, .text = text,
                          .len = len, .next = next,
                          .backoff = BACKOFF_FIRST_MS};
    if (stream) {
        ej_kv_free(&op->w[slot].kv);
        memset(&op->w[slot], 0, sizeof(op->w[slot]));
    }
    op->x[slot] = x;
    if (xfer_start(x) < 0)
        xfer_end(x, fccl_err(FCCL_ERR_NOMEM, "starting an etcd request"),
                 NULL);
}

void be_cancel(struct be_op *op, int slot)
{
    struct be_xfer *x = op->x[slot];
    if (!x)
        return;
    if (x->h.easy)
        curl_multi_remove_handle(st(op->s)->multi, x->h.easy);
    op->x[slot] = NULL;
    xfer_free(x);
}

/* ---- ops and the order of replies ---- */

static void op_free(struct be_op *op)
{
    be_cancel(op, 0);
    be_cancel(op, 1);
    codec_buf_free(&op->out);
    ek_free(&op->key);
    free(op->val);
    free(op->val2);
    for (size_t i = 0; op->keys && i < op->nkeys; i++)
        ek_free(&op->keys[i]);
    for (size_t i = 0; op->vals && i < op->nkeys; i++)
        free(op->vals[i]);
    free(op->keys);
    free(op->vals);
    free(op->vlens);
    ermw_out_free(&op->rout);
    ej_kv_free(&op->cur);
    ej_kv_free(&op->w[0].kv);
    ej_kv_free(&op->w[1].kv);
    st(op->s)->nops_now--;
    free(op);
}

/* SYNC answers for the writes before it: its reply is made when it is
 * next in line. */
static void sync_reply(struct be_op *op)
{
    struct store_conn *c = op->c;
    if (!c->sync_code) {
        codec_put_u8(&op->out, SYNC_OK);
    } else {
        const char *m = c->sync_msg ? c->sync_msg : "write refused";
        codec_put_u8(&op->out, (uint8_t)c->sync_code);
        codec_put_str(&op->out, m, strlen(m));
        free(c->sync_msg);
        c->sync_msg = NULL;
        c->sync_code = 0;
    }
    op->done = 1;
}

/* Pop the finished ops at the head, sending their replies, then start
 * the new head.  Ops run one at a time, in arrival order, as the server's
 * own table runs them: a WAIT and the GET behind it (the fccl client
 * pipelines them), or a SET and a DELETE, must reach etcd in that order.
 * Reentrant calls (an op finishing inside its run) only ask for one more
 * round, so the stack stays flat. */
void be_flush(struct store_conn *c)
{
    if (c->be_flushing) {
        c->be_again = 1;
        return;
    }
    c->be_flushing = 1;
    do {
        c->be_again = 0;
        struct be_op *h;
        while ((h = c->be_head)) {
            if (h->kind == OP_SYNC && !h->done)
                sync_reply(h);
            if (!h->done)
                break;
            c->be_head = h->next;
            if (!c->be_head)
                c->be_tail = NULL;
            c->be_n--;
            if (h->fatal) {
                char why[300];
                snprintf(why, sizeof(why), "%s",
                         h->out.len ? (char *)h->out.p : "etcd failed");
                op_free(h);
                store_be_conn_gone(c);
                store_conn_abort(c, why); /* may free c */
                return;
            }
            if (h->out.len)
                store_conn_reply(c, h->out.p, h->out.len);
            op_free(h);
        }
        if (h && !h->started) {
            h->started = 1;
            h->run(h);
        }
    } while (c->be_again);
    c->be_flushing = 0;
}

void be_op_done(struct be_op *op)
{
    op->done = 1;
    be_flush(op->c);
}

void be_op_fail(struct be_op *op, int rc)
{
    struct store_conn *c = op->c;
    const char *msg = fccl_last_error();
    LOG_INFO("STORE", "client %s: %s: %s", c->addr, codec_op_name(op->kind),
             msg);
    codec_buf_reset(&op->out);
    if (op->quiet && c->sync_aware &&
        (rc == FCCL_ERR_LIMIT || rc == FCCL_ERR_NOMEM || rc == FCCL_ERR_AUTH ||
         rc == FCCL_ERR_CONNECT || rc == FCCL_ERR_TIMEOUT)) {
        c->s->st.refused_writes++;
        if (!c->sync_code) {
            c->sync_code = rc == FCCL_ERR_LIMIT   ? SYNC_LIMIT
                           : rc == FCCL_ERR_NOMEM ? SYNC_NOMEM
                           : rc == FCCL_ERR_AUTH  ? SYNC_DENIED
                                                  : SYNC_OTHER;
            c->sync_msg = strndup(msg, SYNC_MSG_MAX);
        }
        be_op_done(op);
        return;
    }
    op->fatal = 1;
    char why[300];
    int n = snprintf(why, sizeof(why), "%s on etcd: %s",
                     codec_op_name(op->kind), msg);
    codec_put_bytes(&op->out, why, (size_t)(n < (int)sizeof(why) ? n + 1
                                                  : (int)sizeof(why)));
    be_op_done(op);
}

void store_be_conn_gone(struct store_conn *c)
{
    struct be_op *op = c->be_head;
    c->be_head = c->be_tail = NULL;
    c->be_n = 0;
    while (op) {
        struct be_op *n = op->next;
        op_free(op);
        op = n;
    }
}

/* Copy what the request names: the parsed slices point into the input
 * buffer, which is drained when dispatch returns. */
static int copy_bytes(uint8_t **dst, size_t *n, struct codec_slice v)
{
    *dst = malloc(v.len + 1);
    if (!*dst)
        return FCCL_ERR_NOMEM;
    if (v.len)
        memcpy(*dst, v.p, v.len);
    (*dst)[v.len] = '\0';
    *n = v.len;
    return FCCL_OK;
}

static int copy_args(struct be_op *op, const struct codec_req *r)
{
    int pairs = r->op == OP_MULTI_SET;
    size_t n = r->nkeys;
    op->keys = calloc(n ? n : 1, sizeof(*op->keys));
    op->vals = pairs ? calloc(n ? n : 1, sizeof(*op->vals)) : NULL;
    op->vlens = pairs ? calloc(n ? n : 1, sizeof(*op->vlens)) : NULL;
    if (!op->keys || (pairs && (!op->vals || !op->vlens)))
        return FCCL_ERR_NOMEM;
    op->nkeys = n;
    struct codec_slice args = r->args, k, v;
    for (size_t i = 0; i < n && codec_next_slice(&args, &k); i++) {
        op->keys[i] = be_key(op->s, k.p, k.len);
        if (!op->keys[i].p)
            return FCCL_ERR_NOMEM;
        if (pairs && (!codec_next_slice(&args, &v) ||
                      copy_bytes(&op->vals[i], &op->vlens[i], v) < 0))
            return FCCL_ERR_NOMEM;
    }
    return FCCL_OK;
}

static struct be_op *op_new(struct store_server *s, struct store_conn *c,
                            const struct codec_req *r)
{
    struct be_op *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    op->s = s;
    op->c = c;
    op->kind = r->op;
    op->num = r->op == OP_PING ? (int64_t)r->u32 : r->num;
    op->deadline = fccl_deadline_ms(BE_OP_MS);
    codec_buf_init(&op->out);
    st(s)->nops++;
    st(s)->nops_now++;
    int rc = FCCL_OK;
    if (r->key.p || r->op == OP_LIST_KEYS || r->op == OP_LIST_ALL) {
        op->key = be_key(s, r->key.p, r->op == OP_LIST_ALL ? 0 : r->key.len);
        rc = op->key.p ? FCCL_OK : FCCL_ERR_NOMEM;
    }
    if (rc == FCCL_OK && r->val.p)
        rc = copy_bytes(&op->val, &op->vlen, r->val);
    if (rc == FCCL_OK && r->val2.p)
        rc = copy_bytes(&op->val2, &op->v2len, r->val2);
    if (rc == FCCL_OK && (r->op == OP_CHECK || r->op == OP_WAIT ||
                          r->op == OP_MULTI_GET || r->op == OP_MULTI_SET))
        rc = copy_args(op, r);
    if (rc < 0) {
        op_free(op);
        return NULL;
    }
    return op;
}

int be_queue(struct store_server *s, struct store_conn *c,
             const struct codec_req *r, void (*run)(struct be_op *op))
{
    if (c->be_n >= OPS_PER_CONN_MAX)
        return fccl_err(FCCL_ERR_LIMIT, "over %d requests in flight",
                        OPS_PER_CONN_MAX);
    if (r->op == OP_SYNC)
        c->sync_aware = 1;
    struct be_op *op = op_new(s, c, r);
    if (!op)
        return fccl_err(FCCL_ERR_NOMEM, "%s on etcd", codec_op_name(r->op));
    op->run = run;
    QUEUE_APPEND(c->be_head, c->be_tail, op, next);
    c->be_n++;
    if (op->kind == OP_CANCEL_WAIT) { /* acts on the WAIT in flight */
        op->started = 1;
        op->run(op);
    } else {
        be_flush(c);
    }
    return FCCL_OK;
}

/* ---- setup ---- */

/* Before the loop runs: log in and see that a member answers, blocking
 * (nothing is being served yet). */
static int first_contact(struct store_server *s)
{
    struct be_state *b = st(s);
    struct etcd_http h;
    memset(&h, 0, sizeof(h));
    uint64_t dl = fccl_deadline_ms(OPEN_MS);
    int rc = FCCL_ERR_CONNECT, authed = !b->conf.user;
    while (fccl_ms_left(dl) > 0) {
        json_object *req = json_object_new_object(), *rep = NULL;
        if (!authed && req) {
            json_object_object_add(req, "name",
                                   json_object_new_string(b->conf.user));
            json_object_object_add(req, "password",
                                   json_object_new_string(b->conf.password));
        }
        size_t len = 0;
        char *body = req ? etcd_text(req, &len) : NULL;
        json_object_put(req);
        if (!body || etcd_http_setup(&h, &b->conf, b->cur,
                                     authed ? "/v3/maintenance/status"
                                            : "/v3/auth/authenticate",
                                     body, len, b->token, 3000) < 0) {
            rc = fccl_err(FCCL_ERR_NOMEM, "backend %s", b->conf.name);
            break;
        }
        int code = 0;
        enum etcd_outcome o = etcd_http_judge(&h, &b->conf, b->cur,
                                              curl_easy_perform(h.easy),
                                              &rep, &code);
        if (o == ETCD_DONE && !authed) {
            json_object *t = NULL;
            const char *tok = json_object_object_get_ex(rep, "token", &t)
                                  ? json_object_get_string(t) : NULL;
            b->token = tok ? strdup(tok) : NULL;
            authed = 1;
            json_object_put(rep);
            continue;
        }
        json_object_put(rep);
        if (o == ETCD_DONE) {
            rc = FCCL_OK;
            break;
        }
        if (o == ETCD_FAILED || o == ETCD_REAUTH) {
            rc = code ? code : FCCL_ERR_AUTH;
            break;
        }
        b->cur = (b->cur + 1) % b->conf.t.n;
        usleep(100000);
    }
    etcd_http_free(&h);
    return rc < 0 ? fccl_err_wrap(rc, "backend %s", b->conf.name) : rc;
}

int store_be_open(struct store_server *s)
{
    const struct store_server_config *cfg = &s->cfg;
    if (!cfg->backend[0])
        return FCCL_OK;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
        return fccl_err(FCCL_ERR_NOMEM, "curl_global_init");
    struct be_state *b = calloc(1, sizeof(*b));
    if (!b)
        return fccl_err(FCCL_ERR_NOMEM, "backend");
    s->be = b;
    char *pw = NULL;
    int rc = FCCL_OK;
    if (cfg->backend_user[0] &&
        (rc = etcd_read_password(cfg->backend_password_file, &pw)) < 0)
        return fccl_err_wrap(rc, "--backend-password-file");
    rc = etcd_conf_init(&b->conf, cfg->backend, cfg->backend_tls_ca,
                        cfg->backend_tls_cert, cfg->backend_tls_key, NULL,
                        cfg->backend_user, pw);
    free(pw);
    if (rc < 0)
        return fccl_err_wrap(rc, "--backend");
    unsigned char rnd[8];
    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        return fccl_err(FCCL_ERR_NOMEM, "backend: no randomness");
    for (int i = 0; i < 8; i++)
        snprintf(b->id + 2 * i, 3, "%02x", rnd[i]);
    b->multi = curl_multi_init();
    b->timer = evtimer_new(s->base, on_timeout, s);
    if (!b->multi || !b->timer)
        return fccl_err(FCCL_ERR_NOMEM, "backend: curl multi");
    curl_multi_setopt(b->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(b->multi, CURLMOPT_SOCKETDATA, s);
    curl_multi_setopt(b->multi, CURLMOPT_TIMERFUNCTION, on_timer);
    curl_multi_setopt(b->multi, CURLMOPT_TIMERDATA, s);
    rc = first_contact(s);
    if (rc == FCCL_OK)
        LOG_INFO("STORE", "state in etcd at %s (%d member%s)", b->conf.name,
                 b->conf.t.n, b->conf.t.n > 1 ? "s" : "");
    return rc;
}

/* The loop is over: drop this server's receipt (a second at most). */
static void drop_receipt(struct store_server *s)
{
    struct be_state *b = st(s);
    struct ek_key rk = be_receipt_key(s);
    json_object *req = rk.p ? ej_delete(rk.p, rk.n, NULL, 0) : NULL;
    size_t len = 0;
    char *body = req ? etcd_text(req, &len) : NULL;
    json_object_put(req);
    ek_free(&rk);
    struct etcd_http h;
    memset(&h, 0, sizeof(h));
    /* setup takes body, also when it fails */
    if (body && etcd_http_setup(&h, &b->conf, b->cur, "/v3/kv/deleterange",
                                body, len, b->token, 1000) == FCCL_OK)
        curl_easy_perform(h.easy);
    etcd_http_free(&h);
}

void store_be_close(struct store_server *s)
{
    struct be_state *b = st(s);
    if (!b)
        return;
    if (b->seq)
        drop_receipt(s);
    if (b->multi)
        curl_multi_cleanup(b->multi);
    if (b->timer)
        event_free(b->timer);
    etcd_conf_free(&b->conf);
    free(b->token);
    free(b);
    s->be = NULL;
}

void store_be_stats(struct store_server *s, struct codec_buf *b)
{
    struct be_state *e = st(s);
    char t[600];
    int n = snprintf(t, sizeof(t),
                     "backend etcd\nbackend_members %d\nbackend_member_now %s\n"
                     "backend_requests %" PRIu64 "\nbackend_failovers %" PRIu64
                     "\nbackend_lost_replies %" PRIu64 "\nbackend_ops %" PRIu64
                     "\nbackend_ops_pending %" PRIu64 "\n",
                     e->conf.t.n, e->conf.t.ep[e->cur].base, e->nreq,
                     e->nfailover, e->nlost, e->nops, e->nops_now);
    codec_put_bytes(b, t, (size_t)n);
}
