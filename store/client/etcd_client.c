/*
 * The etcd store client, part 1: connecting, the handles, the pool of
 * easy handles, one request with failover between members, the auth
 * token, the lease and its keep-alive, the receipts (etcd_int.h).
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

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_setup(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

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
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return fccl_err(rc, "store %s: %s%s%s: %s", k->b->conf.name, k->op,
                    k->what[0] ? " " : "", k->what, msg);
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

static int authenticate(struct ecall *k);

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
            if ((code = authenticate(k)) < 0)
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

static int authenticate(struct ecall *k)
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

int ec_receipt_says(struct ecall *k, uint64_t seq, char **rest)
{
    struct ek_key rk = ec_receipt_key(k);
    if (!rk.p)
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    json_object *rep = NULL;
    int rc = ec_range(k, &rk, NULL, 0, 0, &rep);
    ek_free(&rk);
    if (rc < 0)
        return rc;
    struct ej_kv kv;
    int yes = 0;
    if (ej_nkvs(rep) && (rc = ej_kv_at(rep, 0, &kv)) == FCCL_OK) {
        char *end = NULL;
        yes = strtoull((const char *)kv.val, &end, 10) == seq;
        if (yes && rest)
            *rest = *end == ' ' ? strdup(end + 1) : NULL;
        ej_kv_free(&kv);
    }
    json_object_put(rep);
    if (rc < 0)
        return ec_fail(k, rc);
    LOG_INFO("STORE", "store %s: %s %s: reply lost; the receipt says it %s",
             k->b->conf.name, k->op, k->what, yes ? "was applied"
                                                  : "was not applied");
    return yes;
}

int64_t ec_lease(const struct ecall *k)
{
    return k->b->lease;
}

/* ---- the lease ---- */

static int lease_call(struct ecall *k, const char *path, int64_t id,
                      int64_t ttl, json_object **out)
{
    json_object *req = json_object_new_object();
    if (req && ((id && ej_set_i64(req, "ID", id) < 0) ||
                (ttl && ej_set_i64(req, "TTL", ttl) < 0))) {
        json_object_put(req);
        req = NULL;
    }
    return ec_request(k, path, req, 1, out);
}

static int lease_grant(struct ecall *k, int64_t ttl, int64_t *id)
{
    json_object *rep = NULL;
    int rc = lease_call(k, "/v3/lease/grant", 0, ttl, &rep);
    if (rc < 0)
        return rc;
    *id = ej_i64(rep, "ID");
    json_object_put(rep);
    if (*id == 0)
        return ec_soft(k, FCCL_ERR_PROTOCOL, "lease grant gave no ID");
    return FCCL_OK;
}

/* Join the job's shared lease at PREFIX "\0lease", or make ours it. */
static int lease_join(struct ecall *k, int64_t mine, int64_t *id)
{
    const struct etcd_conf *c = &k->b->conf;
    struct ek_key lk = ek_cat(c->t.prefix, c->t.prefixlen, "\0lease", 6,
                              NULL, 0, NULL, 0);
    char num[24];
    int n = snprintf(num, sizeof(num), "%" PRId64, mine);
    json_object *txn = ej_txn(), *rep = NULL;
    int rc = !lk.p || !txn ? FCCL_ERR_NOMEM : FCCL_OK;
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "compare", NULL,
                        ej_cmp(lk.p, lk.n, EJ_VERSION, 0, NULL, 0));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "success", "put",
                        ej_put(lk.p, lk.n, num, (size_t)n, mine));
    if (rc == FCCL_OK)
        rc = ej_txn_add(txn, "failure", "range",
                        ej_range(lk.p, lk.n, NULL, 0, 0, 0));
    ek_free(&lk);
    if (rc < 0) {
        json_object_put(txn);
        return ec_soft(k, FCCL_ERR_NOMEM, "out of memory");
    }
    /* Repeating is harmless: a second try finds our own id there. */
    rc = ec_request(k, "/v3/kv/txn", txn, 1, &rep);
    if (rc < 0)
        return rc;
    *id = mine;
    if (!ej_bool(rep, "succeeded")) {
        struct ej_kv kv;
        json_object *r = ej_txn_resp(rep, 0);
        if (ej_nkvs(r) && ej_kv_at(r, 0, &kv) == FCCL_OK) {
            *id = strtoll((const char *)kv.val, NULL, 10);
            ej_kv_free(&kv);
        }
    }
    json_object_put(rep);
    if (*id != mine) {
        json_object *x = NULL;
        if (lease_call(k, "/v3/lease/revoke", mine, 0, &x) == FCCL_OK)
            json_object_put(x);
    }
    return FCCL_OK;
}

static int lease_alive(struct ecall *k, int64_t id)
{
    json_object *rep = NULL;
    int rc = lease_call(k, "/v3/lease/timetolive", id, 0, &rep);
    if (rc < 0)
        return rc;
    int64_t ttl = ej_i64(rep, "TTL");
    json_object_put(rep);
    if (ttl <= 0)
        return ec_soft(k, FCCL_ERR_NOTFOUND, "lease %" PRId64 " (from the "
                       "environment: FCCL_STORE_LEASE) has expired or never "
                       "existed: its launcher is gone", id);
    return FCCL_OK;
}

static void *keepalive_main(void *arg)
{
    fccl_store_t *s = arg;
    struct etcd_be *b = s->be;
    int64_t every = b->lease_ttl_s * 1000 / 3;
    if (every < KEEPALIVE_MIN_MS)
        every = KEEPALIVE_MIN_MS;
    pthread_mutex_lock(&b->mu);
    while (!b->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += every / 1000;
        ts.tv_nsec += (every % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&b->ka_cv, &b->mu, &ts);
        if (b->stopping)
            break;
        pthread_mutex_unlock(&b->mu);
        struct ecall k;
        json_object *rep = NULL;
        if (ec_begin(&k, s, "LEASE_KEEPALIVE", NULL, every) == FCCL_OK &&
            lease_call(&k, "/v3/lease/keepalive", b->lease, 0, &rep) ==
                FCCL_OK) {
            json_object *res = NULL;
            json_object_object_get_ex(rep, "result", &res);
            if (ej_i64(res, "TTL") <= 0)
                LOG_WARN("STORE", "store %s: lease %" PRId64 " expired: "
                         "this job's keys are gone", b->conf.name, b->lease);
        } else {
            LOG_WARN("STORE", "store %s: %s", b->conf.name,
                     fccl_last_error());
        }
        json_object_put(rep);
        ec_end(&k);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static int lease_setup(fccl_store_t *s, const fccl_store_opts_t *o)
{
    struct etcd_be *b = s->be;
    struct ecall k;
    int rc = ec_begin(&k, s, "LEASE", NULL, -1);
    if (rc < 0)
        return rc;
    if (o->lease_id > 0) {
        rc = lease_alive(&k, o->lease_id);
        b->lease = o->lease_id; /* the launcher's: it keeps it alive */
    } else {
        int64_t mine = 0;
        b->lease_ttl_s = o->lease_ttl_s;
        rc = lease_grant(&k, o->lease_ttl_s, &mine);
        if (rc == FCCL_OK && o->lease_revoke) {
            b->lease = mine;
            b->lease_revoke = 1;
        } else if (rc == FCCL_OK) {
            rc = lease_join(&k, mine, &b->lease);
        }
        b->lease_keep = rc == FCCL_OK;
    }
    ec_end(&k);
    if (rc == FCCL_OK && b->lease_keep) {
        rc = store_handle_new(s->vt, b, b->conf.name, b->timeout_ms, "", 0,
                              &b->ka_handle);
        if (rc < 0)
            return rc;
        if (pthread_create(&b->ka, NULL, keepalive_main, b->ka_handle) != 0)
            return fccl_err(FCCL_ERR_NOMEM, "store %s: cannot start the "
                            "lease keep-alive thread", b->conf.name);
        b->ka_started = 1;
    }
    if (rc == FCCL_OK)
        LOG_DEBUG("STORE", "store %s: writing under lease %" PRId64
                  " (%s)", b->conf.name, b->lease,
                  o->lease_id > 0 ? "the launcher's"
                  : b->lease_revoke ? "ours" : "the job's");
    return rc;
}

/* ---- handles ---- */

static void be_free(struct etcd_be *b)
{
    while (b->free_slots) {
        struct etcd_slot *sl = b->free_slots;
        b->free_slots = sl->next;
        etcd_http_free(&sl->h);
        free(sl);
    }
    etcd_conf_free(&b->conf);
    free(b->token);
    pthread_cond_destroy(&b->ka_cv);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

/* The last handle goes: stop the keep-alive, drop the receipts, revoke
 * our own lease (which deletes what was written under it). */
static void be_shutdown(fccl_store_t *s)
{
    struct etcd_be *b = s->be;
    if (b->ka_started) {
        pthread_mutex_lock(&b->mu);
        b->stopping = 1;
        pthread_cond_signal(&b->ka_cv);
        pthread_mutex_unlock(&b->mu);
        pthread_join(b->ka, NULL);
        b->ka_started = 0;
    }
    store_handle_free(b->ka_handle);
    b->ka_handle = NULL;
    struct ecall k;
    json_object *rep = NULL;
    int64_t ms = b->timeout_ms < 2000 ? b->timeout_ms : 2000;
    if (b->seq && ec_begin(&k, s, "CLOSE", NULL, ms) == FCCL_OK) {
        const struct etcd_conf *c = &b->conf;
        struct ek_key lo = ek_cat(c->t.prefix, c->t.prefixlen, "\0r", 2,
                                  b->id, strlen(b->id), "/", 1);
        struct ek_key hi = lo;
        hi.p = lo.p ? malloc(lo.n) : NULL;
        if (hi.p) {
            hi.n = ek_prefix_end(lo.p, lo.n, hi.p);
            if (ec_request(&k, "/v3/kv/deleterange",
                           ej_delete(lo.p, lo.n, hi.p, hi.n), 1, &rep) ==
                FCCL_OK)
                json_object_put(rep);
        }
        ek_free(&lo);
        ek_free(&hi);
        ec_end(&k);
    }
    if (b->lease_revoke && ec_begin(&k, s, "LEASE_REVOKE", NULL, ms) ==
                               FCCL_OK) {
        if (lease_call(&k, "/v3/lease/revoke", b->lease, 0, &rep) == FCCL_OK)
            json_object_put(rep);
        ec_end(&k);
    }
    LOG_DEBUG("STORE", "store %s: closed after %llu etcd requests",
              b->conf.name, (unsigned long long)atomic_load(&b->nreq));
}

static void etcd_close(fccl_store_t *s)
{
    struct etcd_be *b = s->be;
    pthread_mutex_lock(&b->mu);
    int last = --b->refs == 0;
    pthread_mutex_unlock(&b->mu);
    if (last) {
        be_shutdown(s);
        be_free(b);
    }
    store_handle_free(s);
}

static int etcd_prefixed(fccl_store_t *parent, const char *prefix,
                         fccl_store_t **out)
{
    struct etcd_be *b = parent->be;
    size_t pl = strlen(prefix), n = parent->kprelen + pl;
    char *buf = malloc(n + 1);
    if (!buf)
        return fccl_err(FCCL_ERR_NOMEM, "store prefixed: out of memory");
    memcpy(buf, parent->kpre, parent->kprelen);
    memcpy(buf + parent->kprelen, prefix, pl + 1);
    int rc = store_handle_new(parent->vt, b, b->conf.name, parent->timeout_ms,
                              buf, n, out);
    free(buf);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&b->mu);
    b->refs++;
    pthread_mutex_unlock(&b->mu);
    return FCCL_OK;
}

static int64_t default_timeout(int64_t opt_ms)
{
    if (opt_ms > 0)
        return opt_ms;
    int64_t ms = fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS);
    return ms > 0 ? ms : FCCL_DEFAULT_TIMEOUT_MS;
}

static int be_new(const fccl_store_opts_t *o, struct etcd_be **out)
{
    char *password = NULL;
    if (o->etcd_user && *o->etcd_user) {
        if (!o->etcd_password_file || !*o->etcd_password_file)
            return fccl_err(FCCL_ERR_INVALID, "store %s: etcd user '%s' "
                            "given without a password file", o->addr,
                            o->etcd_user);
        int rc = etcd_read_password(o->etcd_password_file, &password);
        if (rc < 0)
            return fccl_err_wrap(rc, "store %s", o->addr);
    }
    struct etcd_be *b = calloc(1, sizeof(*b));
    if (!b) {
        free(password);
        return fccl_err(FCCL_ERR_NOMEM, "store %s: out of memory", o->addr);
    }
    int rc = etcd_conf_init(&b->conf, o->addr, o->tls_ca, o->tls_cert,
                            o->tls_key, o->tls_server_name, o->etcd_user,
                            password);
    if (password) {
        memset(password, 0, strlen(password));
        free(password);
    }
    if (rc < 0) {
        free(b);
        return rc;
    }
    if (!b->conf.t.tls && (o->tls || o->tls_ca || o->tls_cert)) {
        etcd_conf_free(&b->conf);
        free(b);
        return fccl_err(FCCL_ERR_INVALID, "store %s: TLS options given for "
                        "an etcd:// address (use etcds:// for TLS)", o->addr);
    }
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->ka_cv, NULL);
    b->refs = 1;
    b->timeout_ms = default_timeout(o->timeout_ms);
    unsigned char rnd[8];
    if (RAND_bytes(rnd, sizeof(rnd)) != 1)
        memcpy(rnd, &(uint64_t){fccl_now_ns() ^ (uint64_t)getpid()}, 8);
    for (int i = 0; i < 8; i++)
        snprintf(b->id + 2 * i, 3, "%02x", rnd[i]);
    *out = b;
    return FCCL_OK;
}

/* Reach a member (and log in): the first request of the handle. */
static int first_contact(fccl_store_t *s)
{
    struct etcd_be *b = s->be;
    struct ecall k;
    int rc = ec_begin(&k, s, "CONNECT", NULL, -1);
    if (rc < 0)
        return rc;
    if (b->conf.user)
        rc = authenticate(&k);
    json_object *rep = NULL;
    if (rc == FCCL_OK)
        rc = ec_request(&k, "/v3/maintenance/status",
                        json_object_new_object(), 1, &rep);
    json_object_put(rep);
    ec_end(&k);
    if (rc == FCCL_ERR_TIMEOUT)
        rc = fccl_err_wrap(FCCL_ERR_CONNECT, "cannot connect");
    return rc;
}

int etcd_store_connect(const fccl_store_opts_t *o, fccl_store_t **out)
{
    pthread_once(&curl_once, curl_setup);
    if (!curl_ok)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: curl_global_init failed",
                        o->addr);
    struct etcd_be *b = NULL;
    int rc = be_new(o, &b);
    if (rc < 0)
        return rc;
    rc = store_handle_new(&etcd_store_vt, b, b->conf.name, b->timeout_ms,
                          "/", o->raw_keys ? 0 : 1, out);
    if (rc < 0) {
        be_free(b);
        return rc;
    }
    rc = first_contact(*out);
    if (rc == FCCL_OK && (o->lease_id > 0 || o->lease_ttl_s > 0))
        rc = lease_setup(*out, o);
    if (rc < 0) {
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", fccl_last_error());
        b->seq = 0; /* nothing to clean up */
        b->lease_revoke = b->lease_revoke && b->lease;
        etcd_close(*out);
        *out = NULL;
        return fccl_err(rc, "%s", msg);
    }
    return FCCL_OK;
}

int64_t etcd_handle_lease(const fccl_store_t *s)
{
    return ((const struct etcd_be *)s->be)->lease;
}

/* The view vt's lifecycle entries; the calls are in etcd_ops.c. */
int etcd_vt_prefixed(fccl_store_t *parent, const char *prefix,
                     fccl_store_t **out)
{
    return etcd_prefixed(parent, prefix, out);
}

void etcd_vt_close(fccl_store_t *s)
{
    etcd_close(s);
}
