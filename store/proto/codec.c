/*
 * The TCPStore wire codec: op tables of both dialects, the incremental
 * request parser and the byte-buffer encoders (see codec.h, PROTOCOL.md).
 *
 * The parser is a pure function of (dialect, limits, bytes).  It walks the
 * request with a cursor; each read says how many bytes must at least follow
 * the field it reads (`tail`), so NEED_MORE reports a total that is a true
 * lower bound for the whole request.  That keeps the number of re-parses of
 * a large multi-key request small: every retry is made with at least the
 * bytes the previous attempt proved necessary.
 */
#include "codec.h"

#include <stdlib.h>
#include <string.h>

/* ---- op tables ---- */

/* Wire byte -> op, per dialect; -1 marks holes. */
static const int8_t modern_ops[] = {
    OP_VALIDATE,   OP_SET,        OP_COMPARE_SET, OP_GET,        OP_ADD,
    OP_CHECK,      OP_WAIT,       OP_GETNUMKEYS,  OP_DELETE_KEY, OP_APPEND,
    OP_MULTI_GET,  OP_MULTI_SET,  OP_CANCEL_WAIT, OP_PING,       OP_QUEUE_PUSH,
    OP_QUEUE_POP,  OP_QUEUE_LEN,  OP_LIST_ALL,    OP_BARRIER,
};

static const int8_t legacy_ops[] = {
    OP_SET,        OP_COMPARE_SET, OP_GET,      OP_ADD,
    OP_CHECK,      OP_WAIT,        OP_GETNUMKEYS, OP_WATCH_KEY,
    OP_DELETE_KEY, OP_APPEND,      OP_MULTI_GET,  OP_MULTI_SET,
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

int codec_wire_to_op(enum store_dialect dialect, uint8_t type)
{
    if (dialect == DIALECT_MODERN) {
        if (type < NELEM(modern_ops))
            return modern_ops[type];
        switch (type) {
        case STORE_EXT_LIST_KEYS: return OP_LIST_KEYS;
        case STORE_EXT_SYNC: return OP_SYNC;
        case STORE_EXT_STATS: return OP_STATS;
        case STORE_EXT_AUTH_HELLO: return OP_AUTH_HELLO;
        case STORE_EXT_AUTH_PROOF: return OP_AUTH_PROOF;
        }
        return -1;
    }
    if (dialect == DIALECT_LEGACY && type < NELEM(legacy_ops))
        return legacy_ops[type];
    return -1;
}

int codec_op_to_wire(enum store_dialect dialect, enum store_op op)
{
    if (dialect == DIALECT_MODERN) {
        switch (op) {
        case OP_LIST_KEYS: return STORE_EXT_LIST_KEYS;
        case OP_SYNC: return STORE_EXT_SYNC;
        case OP_STATS: return STORE_EXT_STATS;
        case OP_AUTH_HELLO: return STORE_EXT_AUTH_HELLO;
        case OP_AUTH_PROOF: return STORE_EXT_AUTH_PROOF;
        default: break;
        }
    }
    const int8_t *t = dialect == DIALECT_MODERN   ? modern_ops
                      : dialect == DIALECT_LEGACY ? legacy_ops
                                                  : NULL;
    size_t n = dialect == DIALECT_MODERN ? NELEM(modern_ops)
                                         : NELEM(legacy_ops);
    for (size_t i = 0; t && i < n; i++)
        if (t[i] == (int)op)
            return (int)i;
    return -1;
}

const char *codec_op_name(enum store_op op)
{
    static const char *const names[OP__COUNT] = {
        [OP_VALIDATE] = "VALIDATE",     [OP_SET] = "SET",
        [OP_COMPARE_SET] = "COMPARE_SET", [OP_GET] = "GET",
        [OP_ADD] = "ADD",               [OP_CHECK] = "CHECK",
        [OP_WAIT] = "WAIT",             [OP_GETNUMKEYS] = "GETNUMKEYS",
        [OP_WATCH_KEY] = "WATCH_KEY",   [OP_DELETE_KEY] = "DELETE_KEY",
        [OP_APPEND] = "APPEND",         [OP_MULTI_GET] = "MULTI_GET",
        [OP_MULTI_SET] = "MULTI_SET",   [OP_CANCEL_WAIT] = "CANCEL_WAIT",
        [OP_PING] = "PING",             [OP_QUEUE_PUSH] = "QUEUE_PUSH",
        [OP_QUEUE_POP] = "QUEUE_POP",   [OP_QUEUE_LEN] = "QUEUE_LEN",
        [OP_LIST_KEYS] = "LIST_KEYS",   [OP_SYNC] = "SYNC",
        [OP_STATS] = "STATS", [OP_AUTH_HELLO] = "AUTH_HELLO",
        [OP_LIST_ALL] = "LIST_ALL", [OP_BARRIER] = "BARRIER",
        [OP_AUTH_PROOF] = "AUTH_PROOF",
    };
    if ((unsigned)op >= OP__COUNT || !names[op])
        return "UNKNOWN";
    return names[op];
}

void codec_limits_default(struct codec_limits *l)
{
    l->max_key = 8u << 10;
    l->max_value = 64u << 20;
    l->max_keys = 131072;
    l->max_request = 2 * l->max_value + 2 * l->max_key + 4096;
}

const char *codec_result_str(int r)
{
    switch (r) {
    case CODEC_OK: return "ok";
    case CODEC_NEED_MORE: return "need more bytes";
    case CODEC_E_BAD_TYPE: return "unknown query type";
    case CODEC_E_KEY_LONG: return "key over the key-length limit";
    case CODEC_E_VAL_LONG: return "value over the value-length limit";
    case CODEC_E_TOO_MANY: return "too many keys in one request";
    case CODEC_E_BAD_MAGIC: return "VALIDATE with a wrong magic";
    case CODEC_E_REFUSED: return "query type refused";
    case CODEC_E_REQ_LONG: return "request over the request-size limit";
    }
    return "unknown codec result";
}

/* ---- dialect sniffing ---- */

enum store_dialect codec_sniff_dialect(const uint8_t *buf, size_t len)
{
    static const uint8_t hello[5] = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
    size_t n = len < sizeof(hello) ? len : sizeof(hello);
    if (memcmp(buf, hello, n) != 0)
        return DIALECT_LEGACY;
    return n == sizeof(hello) ? DIALECT_MODERN : DIALECT_UNKNOWN;
}

/* ---- little-endian loads ---- */

uint32_t codec_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

uint64_t codec_get_u64(const uint8_t *p)
{
    return (uint64_t)codec_get_u32(p) | (uint64_t)codec_get_u32(p + 4) << 32;
}

void codec_set_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void codec_set_u64(uint8_t *p, uint64_t v)
{
    codec_set_u32(p, (uint32_t)v);
    codec_set_u32(p + 4, (uint32_t)(v >> 32));
}

/* ---- the parser ---- */

struct cursor {
    const uint8_t *buf;
    size_t len;   /* bytes available */
    uint64_t off; /* next unread byte */
    uint64_t need; /* set on NEED_MORE: total bytes needed */
    const struct codec_limits *lim;
};

/* off + a + b, saturating so that a hostile length can never wrap. */
static uint64_t add3(uint64_t off, uint64_t a, uint64_t b)
{
    uint64_t s = off + a;
    if (s < off)
        return UINT64_MAX;
    uint64_t t = s + b;
    return t < s ? UINT64_MAX : t;
}

/* Can `size` bytes be read at the cursor?  `tail` is the least number of
 * bytes the request still has after them: it only sharpens the reported
 * `need` (and the request-size check), it never delays reading a length
 * field that is already here. */
static int have(struct cursor *c, uint64_t size, uint64_t tail)
{
    uint64_t total = add3(c->off, size, tail);
    if (c->lim->max_request && total > c->lim->max_request)
        return CODEC_E_REQ_LONG;
    if (add3(c->off, size, 0) > c->len) {
        c->need = total;
        return CODEC_NEED_MORE;
    }
    return CODEC_OK;
}

/* Read a fixed-size integer of `size` bytes; `tail` bytes must follow. */
static int rd_fixed(struct cursor *c, unsigned size, uint64_t tail,
                    const uint8_t **p)
{
    int rc = have(c, size, tail);
    if (rc != CODEC_OK)
        return rc;
    *p = c->buf + c->off;
    c->off += size;
    return CODEC_OK;
}

static int rd_u64(struct cursor *c, uint64_t tail, uint64_t *v)
{
    const uint8_t *p;
    int rc = rd_fixed(c, 8, tail, &p);
    if (rc == CODEC_OK)
        *v = codec_get_u64(p);
    return rc;
}

/* A length-prefixed string of at most `max` bytes (else `too_long`),
 * refused from its length field alone. */
static int rd_str(struct cursor *c, uint64_t max, int too_long, uint64_t tail,
                  struct codec_slice *out)
{
    uint64_t n;
    int rc = rd_u64(c, tail, &n);
    if (rc != CODEC_OK)
        return rc;
    if (n > max)
        return too_long;
    rc = have(c, n, tail);
    if (rc != CODEC_OK)
        return rc;
    out->p = c->buf + c->off;
    out->len = n;
    c->off += n;
    return CODEC_OK;
}

static int rd_key(struct cursor *c, uint64_t tail, struct codec_slice *out)
{
    return rd_str(c, c->lim->max_key, CODEC_E_KEY_LONG, tail, out);
}

static int rd_val(struct cursor *c, uint64_t tail, struct codec_slice *out)
{
    return rd_str(c, c->lim->max_value, CODEC_E_VAL_LONG, tail, out);
}

/* u64 n, then n keys (or n key/value pairs): the args of CHECK, WAIT,
 * MULTI_GET and MULTI_SET. */
static int rd_list(struct cursor *c, int pairs, struct codec_req *r)
{
    uint64_t n;
    int rc = rd_u64(c, 0, &n);
    if (rc != CODEC_OK)
        return rc;
    if (n > c->lim->max_keys || n > UINT64_MAX / 64)
        return CODEC_E_TOO_MANY;
    uint64_t per = pairs ? 16 : 8; /* least bytes of one more item */
    uint64_t start = c->off;
    struct codec_slice s;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t rest = (n - i - 1) * per;
        rc = rd_key(c, pairs ? rest + 8 : rest, &s);
        if (rc == CODEC_OK && pairs)
            rc = rd_val(c, rest, &s);
        if (rc != CODEC_OK)
            return rc;
    }
    r->nkeys = n;
    r->args.p = c->buf + start;
    r->args.len = c->off - start;
    return CODEC_OK;
}

static int parse_args(struct cursor *c, struct codec_req *r)
{
    const uint8_t *p;
    int rc;
    switch (r->op) {
    case OP_VALIDATE:
    case OP_PING:
        rc = rd_fixed(c, 4, 0, &p);
        if (rc != CODEC_OK)
            return rc;
        r->u32 = codec_get_u32(p);
        if (r->op == OP_VALIDATE && r->u32 != STORE_VALIDATE_MAGIC)
            return CODEC_E_BAD_MAGIC;
        return CODEC_OK;
    case OP_SET:
    case OP_APPEND:
    case OP_QUEUE_PUSH:
        rc = rd_key(c, 8, &r->key);
        return rc != CODEC_OK ? rc : rd_val(c, 0, &r->val);
    case OP_COMPARE_SET:
        rc = rd_key(c, 16, &r->key);
        if (rc == CODEC_OK)
            rc = rd_val(c, 8, &r->val);
        return rc != CODEC_OK ? rc : rd_val(c, 0, &r->val2);
    case OP_ADD:
    case OP_BARRIER:
        rc = rd_key(c, 8, &r->key);
        if (rc != CODEC_OK)
            return rc;
        rc = rd_fixed(c, 8, 0, &p);
        if (rc == CODEC_OK)
            r->num = (int64_t)codec_get_u64(p);
        return rc;
    case OP_GET:
    case OP_DELETE_KEY:
    case OP_QUEUE_POP:
    case OP_QUEUE_LEN:
    case OP_LIST_KEYS:
        return rd_key(c, 0, &r->key);
    case OP_CHECK:
    case OP_WAIT:
    case OP_MULTI_GET:
        return rd_list(c, 0, r);
    case OP_MULTI_SET:
        return rd_list(c, 1, r);
    case OP_GETNUMKEYS:
    case OP_CANCEL_WAIT:
    case OP_SYNC:
    case OP_STATS:
    case OP_AUTH_HELLO:
    case OP_LIST_ALL:
        return CODEC_OK;
    case OP_AUTH_PROOF:
        rc = rd_fixed(c, AUTH_NONCE_LEN + AUTH_MAC_LEN, 0, &p);
        if (rc == CODEC_OK) {
            r->val.p = p;
            r->val.len = AUTH_NONCE_LEN + AUTH_MAC_LEN;
        }
        return rc;
    case OP_WATCH_KEY:
    case OP__COUNT:
        break;
    }
    return CODEC_E_REFUSED;
}

int codec_parse_request(enum store_dialect dialect,
                        const struct codec_limits *lim, const uint8_t *buf,
                        size_t len, struct codec_req *req, size_t *consumed)
{
    if (len == 0) {
        *consumed = 1;
        return CODEC_NEED_MORE;
    }
    uint8_t type = buf[0];
    int op = codec_wire_to_op(dialect, type);
    if (op < 0) {
        /* fccl's own types are known but only spoken on modern links. */
        if (dialect == DIALECT_LEGACY && type >= STORE_EXT_FIRST &&
            codec_wire_to_op(DIALECT_MODERN, type) >= 0)
            return CODEC_E_REFUSED;
        return CODEC_E_BAD_TYPE;
    }
    if (op == OP_WATCH_KEY)
        return CODEC_E_REFUSED;
    memset(req, 0, sizeof(*req));
    req->op = (enum store_op)op;
    struct cursor c = {.buf = buf, .len = len, .off = 1, .lim = lim};
    int rc = parse_args(&c, req);
    if (rc == CODEC_NEED_MORE)
        *consumed = c.need > SIZE_MAX ? SIZE_MAX : (size_t)c.need;
    else if (rc == CODEC_OK)
        *consumed = (size_t)c.off;
    return rc;
}

int codec_parse_value_head(enum store_dialect dialect,
                           const struct codec_limits *lim, const uint8_t *buf,
                           size_t len, struct codec_req *req, uint64_t *vlen,
                           size_t *head)
{
    if (len == 0) {
        *head = 1;
        return CODEC_NEED_MORE;
    }
    int op = codec_wire_to_op(dialect, buf[0]);
    if (op != OP_SET && op != OP_APPEND && op != OP_QUEUE_PUSH)
        return CODEC_E_REFUSED;
    memset(req, 0, sizeof(*req));
    req->op = (enum store_op)op;
    struct cursor c = {.buf = buf, .len = len, .off = 1, .lim = lim};
    uint64_t n;
    int rc = rd_key(&c, 8, &req->key);
    if (rc == CODEC_OK)
        rc = rd_u64(&c, 0, &n);
    if (rc == CODEC_NEED_MORE)
        *head = c.need > SIZE_MAX ? SIZE_MAX : (size_t)c.need;
    if (rc != CODEC_OK)
        return rc;
    if (n > lim->max_value)
        return CODEC_E_VAL_LONG;
    if (lim->max_request && add3(c.off, n, 0) > lim->max_request)
        return CODEC_E_REQ_LONG;
    *vlen = n;
    *head = (size_t)c.off;
    return CODEC_OK;
}

int codec_next_slice(struct codec_slice *cursor, struct codec_slice *out)
{
    if (cursor->len < 8)
        return 0;
    uint64_t n = codec_get_u64(cursor->p);
    if (n > cursor->len - 8)
        return 0; /* not a validated slice; stop rather than overrun */
    out->p = cursor->p + 8;
    out->len = n;
    cursor->p += 8 + n;
    cursor->len -= 8 + n;
    return 1;
}

/* ---- encoders ---- */

void codec_buf_init(struct codec_buf *b) { memset(b, 0, sizeof(*b)); }

void codec_buf_free(struct codec_buf *b)
{
    free(b->p);
    codec_buf_init(b);
}

void codec_buf_reset(struct codec_buf *b)
{
    b->len = 0;
    b->oom = 0;
}

/* Make room for n more bytes; on failure the buffer turns sticky-oom. */
static int reserve(struct codec_buf *b, size_t n)
{
    if (b->oom)
        return -1;
    if (n <= b->cap - b->len)
        return 0;
    if (n > SIZE_MAX / 2 - b->len) {
        b->oom = 1;
        return -1;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->len < n)
        cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
        b->oom = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

void codec_put_bytes(struct codec_buf *b, const void *p, size_t len)
{
    if (len == 0 || reserve(b, len) < 0)
        return;
    memcpy(b->p + b->len, p, len);
    b->len += len;
}

void codec_put_u8(struct codec_buf *b, uint8_t v) { codec_put_bytes(b, &v, 1); }

void codec_put_u32(struct codec_buf *b, uint32_t v)
{
    uint8_t x[4];
    codec_set_u32(x, v);
    codec_put_bytes(b, x, sizeof(x));
}

void codec_put_u64(struct codec_buf *b, uint64_t v)
{
    uint8_t x[8];
    codec_set_u64(x, v);
    codec_put_bytes(b, x, sizeof(x));
}

void codec_put_i64(struct codec_buf *b, int64_t v)
{
    codec_put_u64(b, (uint64_t)v);
}

void codec_put_str(struct codec_buf *b, const void *p, size_t len)
{
    codec_put_u64(b, len);
    codec_put_bytes(b, p, len);
}

int codec_put_type(struct codec_buf *b, enum store_dialect dialect,
                   enum store_op op)
{
    int t = codec_op_to_wire(dialect, op);
    if (t >= 0)
        codec_put_u8(b, (uint8_t)t);
    return t;
}

int codec_parse_i64(const uint8_t *p, size_t n, int64_t *out)
{
    size_t i = 0;
    uint64_t acc = 0;
    int neg = 0;
    if (n && (p[0] == '-' || p[0] == '+'))
        neg = p[i++] == '-';
    if (i == n)
        return -1;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        uint64_t d = (uint64_t)(p[i] - '0');
        if (acc > (UINT64_MAX - d) / 10)
            return -1;
        acc = acc * 10 + d;
    }
    if (acc > (uint64_t)INT64_MAX + (uint64_t)neg)
        return -1;
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return 0;
}
