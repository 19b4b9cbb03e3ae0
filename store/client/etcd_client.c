/*
 * The etcd store client: one call (struct ecall) and its requests: the
 * pool of easy handles, one request with failover between members, the
 * auth token, the keys and receipts of a call (etcd_int.h).  Connecting
 * and the handles are in etcd_store.c, the lease in etcd_lease.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "clock.h"
#include "err.h"
#include "etcd_int.h"
#include "log.h"

#define BACKOFF_FIRST_MS 20
#define BACKOFF_CAP_MS 500
#define KEEPALIVE_MIN_MS 500

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- calls ---- */

static struct etcd_slot *slot_take(struct etcd_be *b)
{
    pthread_mutex_lock(&b->mu);
    struct etcd_slot *sl = b->free_slots;
    if (sl) {
        b->free_slots = sl->next;
    } else if ((sl = calloc(1, sizeof(*sl)))) {
        sl->idx = b->nslots++;
    }
    pthread_mutex_unlock(&b->mu);
    return sl;
}

static void slot_give(struct etcd_be *b, struct etcd_slot *sl)
{
    etcd_http_reset(&sl->h);
    sl->h.reply.stream = NULL;
    sl->h.reply.arg = NULL;
    pthread_mutex_lock(&b->mu);
    sl->next = b->free_slots;
    b->free_slots = sl;
    pthread_mutex_unlock(&b->mu);
}

int ec_begin(struct ecall *k, fccl_store_t *s, const char *op,
             const char *key, int64_t timeout_ms)
{
    memset(k, 0, sizeof(*k));
    k->s = s;
    k->b = s->be;
    k->op = op;
    if (key)
        snprintf(k->what, sizeof(k->what), "'%.*s%.100s'",
                 (int)(s->kprelen > 60 ? 60 : s->kprelen), s->kpre, key);
    k->deadline = fccl_deadline_ms(timeout_ms < 0 ? s->timeout_ms
                                                  : timeout_ms);
    k->io_deadline = fccl_deadline_ms(s->timeout_ms);
    if (k->io_deadline < k->deadline)
        k->io_deadline = k->deadline;
    k->sl = slot_take(k->b);
    if (!k->sl)
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    return FCCL_OK;
}

int ec_begin_multi(struct ecall *k, fccl_store_t *s, const char *op,
                   const char *const *keys, const void *vals,
                   const size_t *lens, const char *what, int64_t timeout_ms)
{
    if (vals && lens)
        return ec_begin(k, s, op, keys[0], timeout_ms);
    memset(k, 0, sizeof(*k));
    return fccl_err(FCCL_ERR_INVALID, "store %s: %s: NULL %s", s->name, op,
                    what);
}

void ec_end(struct ecall *k)
{
    if (k->sl)
        slot_give(k->b, k->sl);
    k->sl = NULL;
}

int ec_fail(struct ecall *k, int rc)
{
    return fccl_err_wrap(rc, "store %s: %s%s%s", k->b->conf.name, k->op,
                         k->what[0] ? " " : "", k->what);
}

int ec_soft(struct ecall *k, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fccl_verr(rc, fmt, ap);
    va_end(ap);
    return ec_fail(k, rc);
}

static int member_now(struct etcd_be *b)
{
    pthread_mutex_lock(&b->mu);
    int m = b->cur;
    pthread_mutex_unlock(&b->mu);
    return m;
}

/* Member m failed us: the next call starts at the one after it (unless
 * another call moved on already). */
static void member_next(struct etcd_be *b, int m)
{
    pthread_mutex_lock(&b->mu);
    if (b->cur == m)
        b->cur = (m + 1) % b->conf.t.n;
    pthread_mutex_unlock(&b->mu);
    atomic_fetch_add(&b->nfail_over, 1);
}

static char *token_copy(struct etcd_be *b)
{
    pthread_mutex_lock(&b->mu);
    char *t = b->token ? strdup(b->token) : NULL;
    pthread_mutex_unlock(&b->mu);
    return t;
}


/* One attempt on member m: perform, judge. */
static enum etcd_outcome attempt(struct ecall *k, int m, const char *path,
                                 const char *text, size_t len, int noauth,
                                 json_object **out, int *code)
{
    struct etcd_be *b = k->b;
    int64_t left = fccl_ms_left(k->slice_ms > 0 ? k->deadline
                                                : k->io_deadline);
    int64_t lim = k->slice_ms > 0 ? k->slice_ms : ETCD_ATTEMPT_MS;
    if (lim > left)
        lim = left;
    char *body = malloc(len + 1);
    char *tok = noauth ? NULL : token_copy(b);
    if (!body) {
        free(tok);
        *code = FCCL_ERR_NOMEM;
        fccl_err(FCCL_ERR_NOMEM, "out of memory");
        return ETCD_FAILED;
    }
    memcpy(body, text, len + 1);
    int rc = etcd_http_setup(&k->sl->h, &b->conf, m, path, body, len, tok,
                             lim);
    free(tok);
    if (rc < 0) {
        *code = rc;
        return ETCD_FAILED;
    }
    atomic_fetch_add(&b->nreq, 1);
    CURLcode cc = curl_easy_perform(k->sl->h.easy);
    if (cc == CURLE_WRITE_ERROR && k->sl->h.reply.stopped) {
        *out = NULL; /* a watch found what it waited for */
        return ETCD_DONE;
    }
    return etcd_http_judge(&k->sl->h, &b->conf, m, cc, out, code);
}

static int request_text(struct ecall *k, const char *path, const char *text,
                        size_t len, int repeatable, int noauth,
                        json_object **out)
{
    struct etcd_be *b = k->b;
    int64_t backoff = BACKOFF_FIRST_MS;
    int tried = 0, reauth = 0, saw_uncertain = 0;
    for (;;) {
        if (fccl_ms_left(k->slice_ms > 0 ? k->deadline : k->io_deadline) <=
            0) {
            int rc = saw_uncertain ? FCCL_ERR_TIMEOUT : FCCL_ERR_CONNECT;
            return ec_fail(k, fccl_err_wrap(rc, "no etcd member of %d "
                           "answered in time; last", b->conf.t.n));
        }
        int m = member_now(b), code = 0;
        enum etcd_outcome o = attempt(k, m, path, text, len, noauth, out,
                                      &code);
        switch (o) {
        case ETCD_DONE:
            return FCCL_OK;
        case ETCD_FAILED:
            return ec_fail(k, code);
        case ETCD_REAUTH:
            if (noauth || !b->conf.user || reauth++ >= 2)
                return ec_fail(k, FCCL_ERR_AUTH);
            if ((code = ec_authenticate(k)) < 0)
                return code;
            continue;
        case ETCD_UNCERTAIN:
            if (k->slice_ms > 0 && fccl_ms_left(k->deadline) > 0 &&
                strstr(fccl_last_error(), "imed out"))
                return FCCL_ERR_TIMEOUT; /* a watch's slice ran out */
            saw_uncertain = 1;
            atomic_fetch_add(&b->nuncertain, 1);
            member_next(b, m);
            if (!repeatable) {
                fccl_err_wrap(FCCL_ERR_IO, "reply lost, the request may "
                              "have been applied");
                return EC_UNCERTAIN;
            }
            LOG_INFO("STORE", "store %s: %s: %s; trying the next member",
                     b->conf.name, k->op, fccl_last_error());
            break;
        case ETCD_NOT_SENT:
            member_next(b, m);
            LOG_DEBUG("STORE", "store %s: %s: %s", b->conf.name, k->op,
                      fccl_last_error());
            break;
        }
        /* Each member once without a pause; then back off, jittered. */
        if (++tried >= b->conf.t.n) {
            tried = 0;
            int64_t left = fccl_ms_left(k->io_deadline);
            int64_t ms = backoff / 2 + rand() % (backoff + 1);
            sleep_ms(ms < left ? ms : left);
            backoff = backoff * 2 > BACKOFF_CAP_MS ? BACKOFF_CAP_MS
                                                   : backoff * 2;
        }
    }
}

static int request(struct ecall *k, const char *path, json_object *req,
                   int repeatable, int noauth, json_object **out)
{
    size_t len = 0;
    char *text = req ? etcd_text(req, &len) : NULL;
    json_object_put(req);
    *out = NULL;
    if (!text)
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory building a "
                       "request");
    int rc = request_text(k, path, text, len, repeatable, noauth, out);
    free(text);
    return rc;
}

int ec_request(struct ecall *k, const char *path, json_object *req,
               int repeatable, json_object **out)
{
    return request(k, path, req, repeatable, 0, out);
}

/* ---- authentication ---- */

int ec_authenticate(struct ecall *k)
{
    struct etcd_be *b = k->b;
    json_object *req = json_object_new_object(), *rep = NULL;
    if (req && (json_object_object_add(req, "name", json_object_new_string(
                                                  b->conf.user)) < 0 ||
                json_object_object_add(req, "password",
                                       json_object_new_string(
                                           b->conf.password)) < 0)) {
        json_object_put(req);
        req = NULL;
    }
    int rc = request(k, "/v3/auth/authenticate", req, 1, 1, &rep);
    if (rc != FCCL_OK)
        return rc < 0 ? rc : ec_fail(k, FCCL_ERR_IO);
    json_object *t = NULL;
    const char *tok = json_object_object_get_ex(rep, "token", &t)
                          ? json_object_get_string(t) : NULL;
    char *copy = tok && *tok ? strdup(tok) : NULL;
    json_object_put(rep);
    if (!copy)
        return ec_soft(k, FCCL_ERR_AUTH, "etcd gave no auth token for user "
                       "'%s' (is authentication enabled?)", b->conf.user);
    pthread_mutex_lock(&b->mu);
    free(b->token);
    b->token = copy;
    pthread_mutex_unlock(&b->mu);
    return FCCL_OK;
}

/* ---- keys and receipts ---- */

struct ek_key ec_key(const struct ecall *k, const char *key)
{
    const struct etcd_conf *c = &k->b->conf;
    return ek_cat(c->t.prefix, c->t.prefixlen, k->s->kpre, k->s->kprelen,
                  key, strlen(key), NULL, 0);
}

struct ek_key ec_receipt_key(const struct ecall *k)
{
    char tail[64];
    int n = snprintf(tail, sizeof(tail), "%s/%d", k->b->id, k->sl->idx);
    const struct etcd_conf *c = &k->b->conf;
    return ek_cat(c->t.prefix, c->t.prefixlen, "\0r", 2, tail, (size_t)n,
                  NULL, 0);
}

uint64_t ec_next_seq(struct ecall *k)
{
    pthread_mutex_lock(&k->b->mu);
    uint64_t v = ++k->b->seq;
    pthread_mutex_unlock(&k->b->mu);
    return v;
}

int64_t ec_lease(const struct ecall *k)
{
    return k->b->lease;
}

/* ---- handles ---- */
