/*
 * etcd v3 gateway JSON: request builders and reply readers (etcd_json.h).
 * Base64 is OpenSSL's (EVP_EncodeBlock / EVP_DecodeBlock), JSON json-c's.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "err.h"
#include "etcd_json.h"

char *ej_b64(const void *p, size_t n)
{
    if (n > (SIZE_MAX / 4) * 3 - 4 || n > INT32_MAX / 2)
        return NULL;
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    if (!out)
        return NULL;
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return out;
}

uint8_t *ej_unb64(const char *s, size_t slen, size_t *n)
{
    if (slen % 4 || slen > INT32_MAX)
        return NULL;
    uint8_t *out = malloc(slen / 4 * 3 + 1);
    if (!out)
        return NULL;
    int got = slen ? EVP_DecodeBlock(out, (const unsigned char *)s, (int)slen)
                   : 0;
    if (got < 0) {
        free(out);
        return NULL;
    }
    /* DecodeBlock counts the padding as zero bytes. */
    size_t len = (size_t)got;
    for (size_t i = slen; i > 0 && s[i - 1] == '=' && len > 0; i--)
        len--;
    out[len] = '\0';
    *n = len;
    return out;
}

int ej_set_bytes(json_object *o, const char *field, const void *p, size_t n)
{
    char *b = ej_b64(p, n);
    json_object *v = b ? json_object_new_string(b) : NULL;
    free(b);
    if (!v || json_object_object_add(o, field, v) < 0) {
        json_object_put(v);
        return FCCL_ERR_NOMEM;
    }
    return FCCL_OK;
}

int ej_set_i64(json_object *o, const char *field, int64_t v)
{
    char num[24];
    snprintf(num, sizeof(num), "%" PRId64, v);
    json_object *s = json_object_new_string(num);
    if (!s || json_object_object_add(o, field, s) < 0) {
        json_object_put(s);
        return FCCL_ERR_NOMEM;
    }
    return FCCL_OK;
}

static int set_bool(json_object *o, const char *field)
{
    json_object *b = json_object_new_boolean(1);
    if (!b || json_object_object_add(o, field, b) < 0) {
        json_object_put(b);
        return FCCL_ERR_NOMEM;
    }
    return FCCL_OK;
}

static int set_str(json_object *o, const char *field, const char *s)
{
    json_object *v = json_object_new_string(s);
    if (!v || json_object_object_add(o, field, v) < 0) {
        json_object_put(v);
        return FCCL_ERR_NOMEM;
    }
    return FCCL_OK;
}

/* Fail the build of o: free it, NULL. */
static json_object *drop(json_object *o)
{
    json_object_put(o);
    return NULL;
}

/* {"key": k, "range_end": end} */
static json_object *keyed(const void *k, size_t kl, const void *end,
                          size_t el)
{
    json_object *o = json_object_new_object();
    if (!o || ej_set_bytes(o, "key", k, kl) < 0)
        return drop(o);
    if (end && ej_set_bytes(o, "range_end", el ? end : "", el ? el : 1) < 0)
        return drop(o);
    return o;
}

json_object *ej_put(const void *k, size_t kl, const void *v, size_t vl,
                    int64_t lease)
{
    json_object *o = keyed(k, kl, NULL, 0);
    if (!o || ej_set_bytes(o, "value", v, vl) < 0 ||
        (lease && ej_set_i64(o, "lease", lease) < 0))
        return drop(o);
    return o;
}

json_object *ej_range(const void *k, size_t kl, const void *end, size_t el,
                      unsigned flags, int64_t limit)
{
    json_object *o = keyed(k, kl, end, el);
    if (!o)
        return NULL;
    if (((flags & EJ_COUNT_ONLY) && set_bool(o, "count_only") < 0) ||
        ((flags & EJ_KEYS_ONLY) && set_bool(o, "keys_only") < 0) ||
        (limit > 0 && ej_set_i64(o, "limit", limit) < 0) ||
        ((flags & EJ_SORT_CREATE) &&
         (set_str(o, "sort_order", "ASCEND") < 0 ||
          set_str(o, "sort_target", "CREATE") < 0)))
        return drop(o);
    return o;
}

json_object *ej_delete(const void *k, size_t kl, const void *end, size_t el)
{
    return keyed(k, kl, end, el);
}

json_object *ej_cmp(const void *k, size_t kl, enum ej_target t, int64_t num,
                    const void *v, size_t vl)
{
    static const char *const target[] = {"VERSION", "CREATE", "MOD",
                                         "VALUE"};
    static const char *const field[] = {"version", "create_revision",
                                        "mod_revision", "value"};
    json_object *o = keyed(k, kl, NULL, 0);
    if (!o || set_str(o, "target", target[t]) < 0 ||
        set_str(o, "result", "EQUAL") < 0)
        return drop(o);
    int rc = t == EJ_VALUE ? ej_set_bytes(o, field[t], v, vl)
                           : ej_set_i64(o, field[t], num);
    return rc < 0 ? drop(o) : o;
}

json_object *ej_txn(void)
{
    json_object *o = json_object_new_object();
    const char *lists[] = {"compare", "success", "failure"};
    for (int i = 0; o && i < 3; i++) {
        json_object *a = json_object_new_array();
        if (!a || json_object_object_add(o, lists[i], a) < 0) {
            json_object_put(a);
            return drop(o);
        }
    }
    return o;
}

int ej_txn_add(json_object *txn, const char *which, const char *kind,
               json_object *op)
{
    json_object *list = NULL;
    if (!op || !json_object_object_get_ex(txn, which, &list)) {
        json_object_put(op);
        return FCCL_ERR_NOMEM;
    }
    json_object *item = op;
    if (kind) {
        char name[32];
        snprintf(name, sizeof(name), "request_%s", kind);
        item = json_object_new_object();
        if (!item || json_object_object_add(item, name, op) < 0) {
            json_object_put(op);
            json_object_put(item);
            return FCCL_ERR_NOMEM;
        }
    }
    if (json_object_array_add(list, item) < 0) {
        json_object_put(item);
        return FCCL_ERR_NOMEM;
    }
    return FCCL_OK;
}

json_object *ej_watch(const void *k, size_t kl, const void *end, size_t el,
                      int64_t start)
{
    json_object *c = keyed(k, kl, end, el);
    if (!c || (start > 0 && ej_set_i64(c, "start_revision", start) < 0))
        return drop(c);
    json_object *o = json_object_new_object();
    if (!o || json_object_object_add(o, "create_request", c) < 0) {
        json_object_put(c);
        return drop(o);
    }
    return o;
}

/* ---- replies ---- */

int ej_parse(const char *text, size_t len, json_object **out)
{
    struct json_tokener *t = json_tokener_new();
    if (!t)
        return fccl_err(FCCL_ERR_NOMEM, "out of memory parsing a reply");
    if (len > INT32_MAX) {
        json_tokener_free(t);
        return fccl_err(FCCL_ERR_LIMIT, "reply of %zu bytes", len);
    }
    json_object *o = json_tokener_parse_ex(t, text, (int)len);
    enum json_tokener_error e = json_tokener_get_error(t);
    json_tokener_free(t);
    if (!o || e != json_tokener_success) {
        json_object_put(o);
        return fccl_err(FCCL_ERR_PROTOCOL, "reply is not JSON (%s): '%.80s'",
                        json_tokener_error_desc(e), text);
    }
    if (!json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        return fccl_err(FCCL_ERR_PROTOCOL, "reply is not a JSON object: "
                        "'%.80s'", text);
    }
    *out = o;
    return FCCL_OK;
}

int ej_error(json_object *o, int *code, const char **msg)
{
    json_object *e = NULL, *c = NULL;
    if (!o || (!json_object_object_get_ex(o, "error", &e) &&
               !json_object_object_get_ex(o, "message", &e)))
        return 0;
    *code = json_object_object_get_ex(o, "code", &c) ? json_object_get_int(c)
                                                      : 2;
    *msg = json_object_get_string(e);
    if (!*msg)
        *msg = "(no message)";
    return 1;
}

int64_t ej_i64(json_object *o, const char *field)
{
    json_object *v = NULL;
    if (!o || !json_object_object_get_ex(o, field, &v))
        return 0;
    if (json_object_is_type(v, json_type_string))
        return strtoll(json_object_get_string(v), NULL, 10);
    return json_object_get_int64(v);
}

int ej_bool(json_object *o, const char *field)
{
    json_object *v = NULL;
    return o && json_object_object_get_ex(o, field, &v) &&
           json_object_get_boolean(v);
}

int64_t ej_header_rev(json_object *o)
{
    json_object *h = NULL;
    if (!o || !json_object_object_get_ex(o, "header", &h))
        return 0;
    return ej_i64(h, "revision");
}

size_t ej_nkvs(json_object *range)
{
    json_object *a = NULL;
    if (!range || !json_object_object_get_ex(range, "kvs", &a) ||
        !json_object_is_type(a, json_type_array))
        return 0;
    return json_object_array_length(a);
}

static int field_bytes(json_object *o, const char *field, uint8_t **p,
                       size_t *n)
{
    json_object *v = NULL;
    *n = 0;
    if (!json_object_object_get_ex(o, field, &v)) {
        *p = malloc(1); /* absent: empty (proto3 leaves out "") */
        if (!*p)
            return fccl_err(FCCL_ERR_NOMEM, "out of memory");
        **p = '\0';
        return FCCL_OK;
    }
    const char *s = json_object_get_string(v);
    *p = ej_unb64(s, (size_t)json_object_get_string_len(v), n);
    if (!*p)
        return fccl_err(FCCL_ERR_PROTOCOL, "%s is not base64: '%.40s'",
                        field, s);
    return FCCL_OK;
}

int ej_kv_of(json_object *o, struct ej_kv *kv)
{
    memset(kv, 0, sizeof(*kv));
    int rc = field_bytes(o, "key", &kv->key, &kv->klen);
    if (rc == FCCL_OK)
        rc = field_bytes(o, "value", &kv->val, &kv->vlen);
    if (rc < 0) {
        ej_kv_free(kv);
        return rc;
    }
    kv->create_rev = ej_i64(o, "create_revision");
    kv->mod_rev = ej_i64(o, "mod_revision");
    kv->version = ej_i64(o, "version");
    kv->lease = ej_i64(o, "lease");
    return FCCL_OK;
}

int ej_kv_at(json_object *range, size_t i, struct ej_kv *kv)
{
    json_object *a = NULL;
    if (!json_object_object_get_ex(range, "kvs", &a) ||
        i >= json_object_array_length(a))
        return fccl_err(FCCL_ERR_PROTOCOL, "range reply has no kv %zu", i);
    return ej_kv_of(json_object_array_get_idx(a, i), kv);
}

void ej_kv_free(struct ej_kv *kv)
{
    free(kv->key);
    free(kv->val);
    kv->key = kv->val = NULL;
}

json_object *ej_txn_resp(json_object *txn, size_t i)
{
    json_object *a = NULL;
    if (!txn || !json_object_object_get_ex(txn, "responses", &a) ||
        i >= json_object_array_length(a))
        return NULL;
    json_object *r = json_object_array_get_idx(a, i), *in = NULL;
    json_object_object_foreach(r, name, val)
    {
        (void)name;
        in = val; /* the one response_KIND member */
    }
    return in;
}
