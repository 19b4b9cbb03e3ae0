/*
 * The etcd kind of store: its table of operations (etcd_ops.c and
 * etcd_wait.c have them), connecting, and its handles: a back end (the
 * pool of HTTP handles, the lease) shared by a handle and its prefixed
 * views, shut down with the last of them.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "clock.h"
#include "err.h"
#include "etcd_int.h"
#include "log.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static int curl_ok;

static void curl_setup(void)
{
    curl_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

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
        if (ec_lease_call(&k, "/v3/lease/revoke", b->lease, 0, &rep) == FCCL_OK)
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
    return store_handle_view(parent, prefix, &b->mu, &b->refs, out);
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
        rc = ec_authenticate(&k);
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
        rc = ec_lease_setup(*out, o);
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

/* Every back-end fills the same table (store_vt.h): the rows repeat. */
const struct store_vt etcd_store_vt = {
    .kind = "etcd",
    .prefixed = etcd_prefixed,
    .close = etcd_close,
    .set = etcd_set,
    .get = etcd_get,
    .add = etcd_add,
    .compare_set = etcd_compare_set,
    .check = etcd_check,
    .wait = etcd_wait,
    .delete_key = etcd_delete,
    .num_keys = etcd_num_keys,
    .append = etcd_append,
    .multi_get = etcd_multi_get,
    .multi_set = etcd_multi_set,
    .ping = etcd_ping,
    .list_keys = etcd_list_keys,
    .stats = etcd_stats,
    .barrier = etcd_barrier,
    .queue_push = etcd_queue_push,
    .queue_pop = etcd_queue_pop,
    .queue_len = etcd_queue_len,
};
