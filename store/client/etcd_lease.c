/*
 * The etcd store client: the lease its writes go under (FCCL_STORE_LEASE,
 * FCCL_STORE_LEASE_TTL): granted, joined (the job's) or taken over (the
 * launcher's), and kept alive by a thread while the handle lives.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "etcd_int.h"
#include "log.h"

#define KEEPALIVE_MIN_MS 500

int ec_lease_call(struct ecall *k, const char *path, int64_t id,
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
    int rc = ec_lease_call(k, "/v3/lease/grant", 0, ttl, &rep);
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
        if (ec_lease_call(k, "/v3/lease/revoke", mine, 0, &x) == FCCL_OK)
            json_object_put(x);
    }
    return FCCL_OK;
}

static int lease_alive(struct ecall *k, int64_t id)
{
    json_object *rep = NULL;
    int rc = ec_lease_call(k, "/v3/lease/timetolive", id, 0, &rep);
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
        struct timespec ts = fccl_realtime_after_ms(every);
        pthread_cond_timedwait(&b->ka_cv, &b->mu, &ts);
        if (b->stopping)
            break;
        pthread_mutex_unlock(&b->mu);
        struct ecall k;
        json_object *rep = NULL;
        if (ec_begin(&k, s, "LEASE_KEEPALIVE", NULL, every) == FCCL_OK &&
            ec_lease_call(&k, "/v3/lease/keepalive", b->lease, 0, &rep) ==
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

int ec_lease_setup(fccl_store_t *s, const fccl_store_opts_t *o)
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
