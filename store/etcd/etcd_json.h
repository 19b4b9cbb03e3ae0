/*
 * etcd v3's JSON gateway, as values: request objects built with json-c
 * (keys and values base64, as the gateway wants them) and the fields of
 * its replies read back.  No I/O here: etcd_http.c sends the text.
 *
 * Builders return a new json_object (the caller puts it into a request or
 * frees it with json_object_put) or NULL when out of memory; ej_txn_add
 * takes the op it is given, also on failure.  Readers never fail on a
 * missing field: they return 0 / NULL, as etcd leaves out fields whose
 * value is the default (a false "succeeded", a PUT event's "type").
 */
#ifndef FCCL_STORE_ETCD_JSON_H
#define FCCL_STORE_ETCD_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

enum ej_range_flags {
    EJ_COUNT_ONLY = 1,
    EJ_KEYS_ONLY = 2,
    EJ_SORT_CREATE = 4, /* ascending by create revision (queues) */
};

enum ej_target { EJ_VERSION, EJ_CREATE, EJ_MOD, EJ_VALUE };

/* ---- requests ---- */

json_object *ej_put(const void *k, size_t kl, const void *v, size_t vl,
                    int64_t lease);
/* end NULL: the key alone; el 0 with end non-NULL: "\0", every key from
 * k on. */
json_object *ej_range(const void *k, size_t kl, const void *end, size_t el,
                      unsigned flags, int64_t limit);
json_object *ej_delete(const void *k, size_t kl, const void *end,
                       size_t el);
/* Compare target of k EQUAL to num (revisions, version) or v (value). */
json_object *ej_cmp(const void *k, size_t kl, enum ej_target t, int64_t num,
                    const void *v, size_t vl);
/* {"compare":[], "success":[], "failure":[]} */
json_object *ej_txn(void);
/* Append to txn's list `which` ("compare", "success", "failure"): a
 * compare as it is, a put/range/delete wrapped as request_put,
 * request_range or request_delete_range (kind "put", "range",
 * "delete_range").  FCCL_OK or FCCL_ERR_NOMEM. */
int ej_txn_add(json_object *txn, const char *which, const char *kind,
               json_object *op);
/* A watch's create_request on [k, end) from revision start. */
json_object *ej_watch(const void *k, size_t kl, const void *end, size_t el,
                      int64_t start);
/* "key": base64 of p[0..n) into o.  FCCL_OK or FCCL_ERR_NOMEM. */
int ej_set_bytes(json_object *o, const char *field, const void *p,
                 size_t n);
/* An int64 field, as the decimal string the gateway reads. */
int ej_set_i64(json_object *o, const char *field, int64_t v);

/* ---- replies ---- */

struct ej_kv {
    uint8_t *key, *val; /* malloc'd, NUL after the last byte */
    size_t klen, vlen;
    int64_t create_rev, mod_rev, version, lease;
};

/* Parse the text of a reply: FCCL_OK or FCCL_ERR_PROTOCOL (not JSON). */
int ej_parse(const char *text, size_t len, json_object **out);
/* An error reply ({"error": ..., "code": N}): 1 with *code and *msg set
 * (msg owned by o), else 0. */
int ej_error(json_object *o, int *code, const char **msg);
/* An integer field (etcd writes int64 as strings); 0 if missing. */
int64_t ej_i64(json_object *o, const char *field);
int64_t ej_header_rev(json_object *o);
int ej_bool(json_object *o, const char *field);
/* The kvs of a range reply (or the kv of a watch event). */
size_t ej_nkvs(json_object *range);
/* Decode kv i of range into *kv (its value too when want_val).
 * FCCL_OK, FCCL_ERR_NOMEM, FCCL_ERR_PROTOCOL (bad base64). */
int ej_kv_at(json_object *range, size_t i, struct ej_kv *kv);
int ej_kv_of(json_object *kvobj, struct ej_kv *kv);
void ej_kv_free(struct ej_kv *kv);
/* Response i of a txn reply, unwrapped from its response_KIND; NULL if
 * absent. */
json_object *ej_txn_resp(json_object *txn, size_t i);
/* base64 of p[0..n) (malloc'd, NUL-terminated) and back; decode gives
 * NULL on bad input or no memory. */
char *ej_b64(const void *p, size_t n);
uint8_t *ej_unb64(const char *s, size_t slen, size_t *n);

#endif
