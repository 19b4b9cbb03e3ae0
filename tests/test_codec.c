/*
 * The TCPStore codec on byte arrays: op numbering of both dialects against
 * PROTOCOL.md's table (written out again here), every request type
 * round-tripping encoders -> parser -> encoders, every truncation of every
 * frame giving NEED_MORE with a sound `need` (each prefix is copied into an
 * exactly-sized heap block, so an over-read trips ASan), pipelining, and
 * every refusal: oversize key/value/count/request (decided from the length
 * field alone, before the bytes it names), bad type, bad magic, WATCH_KEY,
 * and fccl's extension type on a legacy connection.
 */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "codec.h"

/* PROTOCOL.md's table, independently of codec.c. */
struct wire { enum store_op op; int modern, legacy; };
static const struct wire table[] = {
    {OP_VALIDATE, 0, -1},    {OP_SET, 1, 0},         {OP_COMPARE_SET, 2, 1},
    {OP_GET, 3, 2},          {OP_ADD, 4, 3},         {OP_CHECK, 5, 4},
    {OP_WAIT, 6, 5},         {OP_GETNUMKEYS, 7, 6},  {OP_WATCH_KEY, -1, 7},
    {OP_DELETE_KEY, 8, 8},   {OP_APPEND, 9, 9},      {OP_MULTI_GET, 10, 10},
    {OP_MULTI_SET, 11, 11},  {OP_CANCEL_WAIT, 12, -1}, {OP_PING, 13, -1},
    {OP_QUEUE_PUSH, 14, -1}, {OP_QUEUE_POP, 15, -1}, {OP_QUEUE_LEN, 16, -1},
    {OP_LIST_ALL, 17, -1},   {OP_BARRIER, 18, -1},
    {OP_LIST_KEYS, 0x80, -1}, {OP_SYNC, 0x81, -1},  {OP_STATS, 0x84, -1},
    {OP_AUTH_HELLO, 0x82, -1}, {OP_AUTH_PROOF, 0x83, -1},
};
#define NTABLE (sizeof(table) / sizeof(table[0]))

static struct codec_limits lim;

static void setup(void) { codec_limits_default(&lim); }

TestSuite(codec, .init = setup, .timeout = 60);

Test(codec, op_tables_match_protocol)
{
    cr_assert_eq(NTABLE, OP__COUNT);
    for (size_t i = 0; i < NTABLE; i++) {
        const struct wire *w = &table[i];
        cr_assert_eq(codec_op_to_wire(DIALECT_MODERN, w->op), w->modern,
                     "%s modern", codec_op_name(w->op));
        cr_assert_eq(codec_op_to_wire(DIALECT_LEGACY, w->op), w->legacy,
                     "%s legacy", codec_op_name(w->op));
        if (w->modern >= 0)
            cr_assert_eq(codec_wire_to_op(DIALECT_MODERN, (uint8_t)w->modern),
                         (int)w->op);
        if (w->legacy >= 0)
            cr_assert_eq(codec_wire_to_op(DIALECT_LEGACY, (uint8_t)w->legacy),
                         (int)w->op);
    }
    /* Holes: nothing else maps. */
    int modern = 0, legacy = 0;
    for (int t = 0; t < 256; t++) {
        modern += codec_wire_to_op(DIALECT_MODERN, (uint8_t)t) >= 0;
        legacy += codec_wire_to_op(DIALECT_LEGACY, (uint8_t)t) >= 0;
    }
    cr_assert_eq(modern, 24);
    cr_assert_eq(legacy, 12);
    cr_assert_str_eq(codec_op_name(OP_COMPARE_SET), "COMPARE_SET");
    cr_assert_str_eq(codec_op_name(OP__COUNT), "UNKNOWN");
}

Test(codec, default_limits)
{
    cr_assert_eq(lim.max_key, 8192);
    cr_assert_eq(lim.max_value, 64u << 20);
    cr_assert_eq(lim.max_keys, 131072);
    cr_assert_geq(lim.max_request, 2 * lim.max_value + 2 * lim.max_key);
    cr_assert_lt(lim.max_key, 0x3C85F7CEull);
}

Test(codec, little_endian_encoders)
{
    struct codec_buf b;
    codec_buf_init(&b);
    codec_put_u8(&b, 0xAB);
    codec_put_u32(&b, 0x01020304);
    codec_put_u64(&b, 0x1122334455667788ull);
    codec_put_i64(&b, -2);
    codec_put_str(&b, "hi", 2);
    static const uint8_t want[] = {
        0xAB, 4, 3, 2, 1, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 2, 0, 0, 0, 0, 0, 0, 0,
        'h', 'i'};
    cr_assert_eq(b.len, sizeof(want));
    cr_assert(memcmp(b.p, want, sizeof(want)) == 0);
    cr_assert_eq(codec_get_u32(want + 1), 0x01020304u);
    cr_assert_eq(codec_get_u64(want + 5), 0x1122334455667788ull);
    cr_assert_eq(codec_put_type(&b, DIALECT_LEGACY, OP_PING), -1);
    cr_assert_eq(b.len, sizeof(want), "no byte for a missing op");
    codec_buf_reset(&b);
    cr_assert_eq(b.len, 0);
    codec_buf_free(&b);
}

Test(codec, sniff_dialect)
{
    static const uint8_t hello[] = {0x00, 0xCE, 0xF7, 0x85, 0x3C, 0x99};
    for (size_t n = 0; n < 5; n++)
        cr_assert_eq(codec_sniff_dialect(hello, n), DIALECT_UNKNOWN, "n=%zu",
                     n);
    cr_assert_eq(codec_sniff_dialect(hello, 5), DIALECT_MODERN);
    cr_assert_eq(codec_sniff_dialect(hello, 6), DIALECT_MODERN);
    static const uint8_t near[] = {0x00, 0xCE, 0xF7, 0x85, 0x3D};
    cr_assert_eq(codec_sniff_dialect(near, 5), DIALECT_LEGACY);
    static const uint8_t set_legacy[] = {0x00, 0x02, 0x00};
    cr_assert_eq(codec_sniff_dialect(set_legacy, 2), DIALECT_LEGACY);
    static const uint8_t numkeys[] = {0x06};
    cr_assert_eq(codec_sniff_dialect(numkeys, 1), DIALECT_LEGACY);
}

/* ---- frames of every request type ---- */

struct frame {
    enum store_op op;
    int variant;
    struct codec_buf b;
};

static void put_s(struct codec_buf *b, const char *s)
{
    codec_put_str(b, s, strlen(s));
}

/* Encode a request of `op` (with a few shapes per op) with the codec's
 * encoders.  Returns 0 if the op/variant does not exist. */
static int build(struct codec_buf *b, enum store_dialect d, enum store_op op,
                 int v)
{
    static const char bin[] = {'v', 0, 'x', (char)0xFF};
    if (codec_put_type(b, d, op) < 0 || op == OP_WATCH_KEY)
        return 0;
    switch (op) {
    case OP_VALIDATE: codec_put_u32(b, STORE_VALIDATE_MAGIC); return v == 0;
    case OP_PING: codec_put_u32(b, 0xDEADBEEFu); return v == 0;
    case OP_SET:
    case OP_APPEND:
    case OP_QUEUE_PUSH:
        put_s(b, "/key");
        codec_put_str(b, bin, v == 0 ? sizeof(bin) : 0);
        return v < 2;
    case OP_COMPARE_SET:
        put_s(b, "/k");
        put_s(b, v == 0 ? "old" : "");
        put_s(b, "new");
        return v < 2;
    case OP_ADD:
    case OP_BARRIER:
        put_s(b, "/cnt");
        codec_put_i64(b, v == 0 ? -7 : INT64_MAX);
        return v < 2;
    case OP_GET:
    case OP_DELETE_KEY:
    case OP_QUEUE_POP:
    case OP_QUEUE_LEN:
    case OP_LIST_KEYS:
        put_s(b, v == 0 ? "/some/key" : "");
        return v < 2;
    case OP_CHECK:
    case OP_WAIT:
    case OP_MULTI_GET: {
        static const char *const keys[] = {"/a", "", "/ccc"};
        int n = v == 0 ? 3 : 0;
        codec_put_u64(b, (uint64_t)n);
        for (int i = 0; i < n; i++)
            put_s(b, keys[i]);
        return v < 2;
    }
    case OP_MULTI_SET:
        codec_put_u64(b, v == 0 ? 2 : 0);
        if (v == 0) {
            put_s(b, "/x");
            put_s(b, "1");
            put_s(b, "/y");
            put_s(b, "");
        }
        return v < 2;
    case OP_GETNUMKEYS:
    case OP_CANCEL_WAIT:
    case OP_SYNC:
    case OP_STATS:
    case OP_AUTH_HELLO:
    case OP_LIST_ALL: return v == 0;
    case OP_AUTH_PROOF: {
        uint8_t z[AUTH_NONCE_LEN + AUTH_MAC_LEN];
        for (size_t i = 0; i < sizeof(z); i++)
            z[i] = (uint8_t)(i * 3);
        codec_put_bytes(b, z, sizeof(z));
        return v == 0;
    }
    case OP_WATCH_KEY:
    case OP__COUNT: break;
    }
    return 0;
}

/* Every frame of a dialect.  Returns the count; caller frees. */
static size_t all_frames(enum store_dialect d, struct frame *out, size_t max)
{
    size_t n = 0;
    for (int op = 0; op < OP__COUNT; op++) {
        for (int v = 0; v < 3 && n < max; v++) {
            codec_buf_init(&out[n].b);
            if (!build(&out[n].b, d, (enum store_op)op, v)) {
                codec_buf_free(&out[n].b);
                break;
            }
            out[n].op = (enum store_op)op;
            out[n].variant = v;
            n++;
        }
    }
    return n;
}

static void free_frames(struct frame *f, size_t n)
{
    for (size_t i = 0; i < n; i++)
        codec_buf_free(&f[i].b);
}

/* Encode a parsed request again, walking multi-key args with
 * codec_next_slice: must reproduce the frame exactly. */
static void reencode(struct codec_buf *b, enum store_dialect d,
                     const struct codec_req *r)
{
    codec_put_type(b, d, r->op);
    struct codec_slice args = r->args, s;
    switch (r->op) {
    case OP_VALIDATE:
    case OP_PING: codec_put_u32(b, r->u32); break;
    case OP_SET:
    case OP_APPEND:
    case OP_QUEUE_PUSH:
        codec_put_str(b, r->key.p, r->key.len);
        codec_put_str(b, r->val.p, r->val.len);
        break;
    case OP_COMPARE_SET:
        codec_put_str(b, r->key.p, r->key.len);
        codec_put_str(b, r->val.p, r->val.len);
        codec_put_str(b, r->val2.p, r->val2.len);
        break;
    case OP_ADD:
    case OP_BARRIER:
        codec_put_str(b, r->key.p, r->key.len);
        codec_put_i64(b, r->num);
        break;
    case OP_CHECK:
    case OP_WAIT:
    case OP_MULTI_GET:
    case OP_MULTI_SET: {
        codec_put_u64(b, r->nkeys);
        uint64_t items = 0;
        while (codec_next_slice(&args, &s)) {
            codec_put_str(b, s.p, s.len);
            items++;
        }
        cr_assert_eq(items, r->op == OP_MULTI_SET ? 2 * r->nkeys : r->nkeys);
        break;
    }
    case OP_GETNUMKEYS:
    case OP_CANCEL_WAIT:
    case OP_SYNC:
    case OP_STATS:
    case OP_AUTH_HELLO:
    case OP_LIST_ALL: break;
    case OP_AUTH_PROOF: codec_put_bytes(b, r->val.p, r->val.len); break;
    default: codec_put_str(b, r->key.p, r->key.len); break;
    }
}

static void roundtrip(enum store_dialect d)
{
    struct frame f[64];
    size_t n = all_frames(d, f, 64);
    cr_assert_geq(n, d == DIALECT_MODERN ? 30u : 18u);
    for (size_t i = 0; i < n; i++) {
        struct codec_req r;
        size_t used = 0;
        int rc = codec_parse_request(d, &lim, f[i].b.p, f[i].b.len, &r, &used);
        cr_assert_eq(rc, CODEC_OK, "%s/%d: %s", codec_op_name(f[i].op),
                     f[i].variant, codec_result_str(rc));
        cr_assert_eq(used, f[i].b.len);
        cr_assert_eq(r.op, f[i].op);
        struct codec_buf again;
        codec_buf_init(&again);
        reencode(&again, d, &r);
        cr_assert_eq(again.len, f[i].b.len, "%s", codec_op_name(r.op));
        cr_assert(memcmp(again.p, f[i].b.p, again.len) == 0, "%s",
                  codec_op_name(r.op));
        codec_buf_free(&again);
    }
    free_frames(f, n);
}

Test(codec, roundtrip_modern) { roundtrip(DIALECT_MODERN); }
Test(codec, roundtrip_legacy) { roundtrip(DIALECT_LEGACY); }

Test(codec, parsed_fields)
{
    struct codec_buf b;
    codec_buf_init(&b);
    build(&b, DIALECT_MODERN, OP_SET, 0);
    struct codec_req r;
    size_t used;
    cr_assert_eq(codec_parse_request(DIALECT_MODERN, &lim, b.p, b.len, &r,
                                     &used), CODEC_OK);
    cr_assert_eq(r.key.len, 4);
    cr_assert(memcmp(r.key.p, "/key", 4) == 0);
    cr_assert_eq(r.val.len, 4);
    cr_assert(memcmp(r.val.p, "v\0x\xFF", 4) == 0);
    codec_buf_reset(&b);
    build(&b, DIALECT_LEGACY, OP_ADD, 0);
    cr_assert_eq(b.p[0], 3);
    cr_assert_eq(codec_parse_request(DIALECT_LEGACY, &lim, b.p, b.len, &r,
                                     &used), CODEC_OK);
    cr_assert_eq(r.op, OP_ADD);
    cr_assert_eq(r.num, -7);
    codec_buf_reset(&b);
    build(&b, DIALECT_MODERN, OP_PING, 0);
    cr_assert_eq(codec_parse_request(DIALECT_MODERN, &lim, b.p, b.len, &r,
                                     &used), CODEC_OK);
    cr_assert_eq(r.u32, 0xDEADBEEFu);
    codec_buf_free(&b);
}

/* Parse a copy of the first k bytes in a block of exactly k bytes. */
static int parse_prefix(enum store_dialect d, const struct codec_limits *l,
                        const uint8_t *p, size_t k, size_t *need)
{
    uint8_t *copy = malloc(k ? k : 1);
    cr_assert(copy);
    memcpy(copy, p, k);
    struct codec_req r;
    int rc = codec_parse_request(d, l, copy, k, &r, need);
    free(copy);
    return rc;
}

static void truncation(enum store_dialect d)
{
    struct frame f[64];
    size_t n = all_frames(d, f, 64);
    for (size_t i = 0; i < n; i++) {
        size_t len = f[i].b.len;
        for (size_t k = 0; k < len; k++) {
            size_t need = 0;
            int rc = parse_prefix(d, &lim, f[i].b.p, k, &need);
            cr_assert_eq(rc, CODEC_NEED_MORE, "%s cut at %zu/%zu: %s",
                         codec_op_name(f[i].op), k, len, codec_result_str(rc));
            cr_assert(need > k && need <= len,
                      "%s cut at %zu: need %zu not in (%zu, %zu]",
                      codec_op_name(f[i].op), k, need, k, len);
        }
        /* Feeding exactly `need` each time reaches the whole frame. */
        size_t have = 0, steps = 0, need = 0;
        while (parse_prefix(d, &lim, f[i].b.p, have, &need) ==
               CODEC_NEED_MORE) {
            have = need;
            cr_assert(++steps <= len);
        }
        cr_assert_eq(have, len);
    }
    free_frames(f, n);
}

Test(codec, truncation_modern) { truncation(DIALECT_MODERN); }
Test(codec, truncation_legacy) { truncation(DIALECT_LEGACY); }

Test(codec, pipelined_frames)
{
    struct frame f[64];
    size_t n = all_frames(DIALECT_MODERN, f, 64);
    struct codec_buf all;
    codec_buf_init(&all);
    for (size_t i = 0; i < n; i++)
        codec_put_bytes(&all, f[i].b.p, f[i].b.len);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        struct codec_req r;
        size_t used;
        int rc = codec_parse_request(DIALECT_MODERN, &lim, all.p + off,
                                     all.len - off, &r, &used);
        cr_assert_eq(rc, CODEC_OK);
        cr_assert_eq(r.op, f[i].op);
        cr_assert_eq(used, f[i].b.len);
        off += used;
    }
    cr_assert_eq(off, all.len);
    codec_buf_free(&all);
    free_frames(f, n);
}

Test(codec, need_is_a_lower_bound_for_key_lists)
{
    struct codec_buf b;
    codec_buf_init(&b);
    codec_put_type(&b, DIALECT_MODERN, OP_WAIT);
    codec_put_u64(&b, 1000);
    for (int i = 0; i < 1000; i++)
        put_s(&b, "/rank/123456");
    size_t need;
    cr_assert_eq(parse_prefix(DIALECT_MODERN, &lim, b.p, 9, &need),
                 CODEC_NEED_MORE);
    cr_assert_geq(need, 9 + 8 * 1000, "need %zu", need);
    cr_assert_leq(need, b.len);
    /* Fed in 4 KiB reads (as the server reads) but parsed only once `need`
     * bytes are there, a 1000-key list is parsed a handful of times. */
    size_t got = 0, attempts = 0;
    need = 1;
    for (;;) {
        got = got + 4096 > b.len ? b.len : got + 4096;
        if (got < need)
            continue;
        attempts++;
        if (parse_prefix(DIALECT_MODERN, &lim, b.p, got, &need) == CODEC_OK)
            break;
        cr_assert_leq(need, b.len);
    }
    cr_assert_eq(got, b.len);
    cr_assert_leq(attempts, 2 + b.len / 4096 / 2, "%zu attempts", attempts);
    codec_buf_free(&b);
}

/* ---- refusals ---- */

/* Parse only the given header bytes (the named payload never follows):
 * the verdict must come from the length field alone. */
static int parse_hdr(enum store_dialect d, const struct codec_limits *l,
                     struct codec_buf *b)
{
    size_t need = 0;
    int rc = parse_prefix(d, l, b->p, b->len, &need);
    codec_buf_reset(b);
    return rc;
}

Test(codec, oversize_key_refused_from_length)
{
    struct codec_buf b;
    codec_buf_init(&b);
    uint64_t lens[] = {lim.max_key + 1, 1ull << 40, UINT64_MAX,
                       0x3C85F7CEull};
    enum store_op ops[] = {OP_SET, OP_GET, OP_ADD, OP_DELETE_KEY};
    for (size_t i = 0; i < 4; i++) {
        for (size_t j = 0; j < 4; j++) {
            codec_put_type(&b, DIALECT_LEGACY, ops[j]);
            codec_put_u64(&b, lens[i]);
            cr_assert_eq(parse_hdr(DIALECT_LEGACY, &lim, &b),
                         CODEC_E_KEY_LONG);
        }
    }
    /* A key of exactly max_key is fine. */
    codec_put_type(&b, DIALECT_MODERN, OP_GET);
    codec_put_u64(&b, lim.max_key);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &lim, &b), CODEC_NEED_MORE);
    /* A key in a list too. */
    codec_put_type(&b, DIALECT_MODERN, OP_MULTI_GET);
    codec_put_u64(&b, 2);
    put_s(&b, "/ok");
    codec_put_u64(&b, lim.max_key + 1);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &lim, &b), CODEC_E_KEY_LONG);
    codec_buf_free(&b);
}

Test(codec, oversize_value_refused_from_length)
{
    struct codec_buf b;
    codec_buf_init(&b);
    enum store_op ops[] = {OP_SET, OP_APPEND, OP_QUEUE_PUSH};
    for (size_t j = 0; j < 3; j++) {
        codec_put_type(&b, DIALECT_MODERN, ops[j]);
        put_s(&b, "/k");
        codec_put_u64(&b, lim.max_value + 1);
        cr_assert_eq(parse_hdr(DIALECT_MODERN, &lim, &b), CODEC_E_VAL_LONG);
    }
    /* COMPARE_SET: expected, then desired. */
    codec_put_type(&b, DIALECT_MODERN, OP_COMPARE_SET);
    put_s(&b, "/k");
    codec_put_u64(&b, UINT64_MAX);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &lim, &b), CODEC_E_VAL_LONG);
    codec_put_type(&b, DIALECT_MODERN, OP_COMPARE_SET);
    put_s(&b, "/k");
    put_s(&b, "");
    codec_put_u64(&b, lim.max_value + 1);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &lim, &b), CODEC_E_VAL_LONG);
    /* MULTI_SET's second value. */
    codec_put_type(&b, DIALECT_LEGACY, OP_MULTI_SET);
    codec_put_u64(&b, 2);
    put_s(&b, "/a");
    put_s(&b, "1");
    put_s(&b, "/b");
    codec_put_u64(&b, lim.max_value + 1);
    cr_assert_eq(parse_hdr(DIALECT_LEGACY, &lim, &b), CODEC_E_VAL_LONG);
    codec_buf_free(&b);
}

Test(codec, too_many_keys_refused_from_count)
{
    struct codec_buf b;
    codec_buf_init(&b);
    enum store_op ops[] = {OP_CHECK, OP_WAIT, OP_MULTI_GET, OP_MULTI_SET};
    uint64_t counts[] = {lim.max_keys + 1, UINT64_MAX, 1ull << 62};
    for (size_t j = 0; j < 4; j++) {
        for (size_t i = 0; i < 3; i++) {
            codec_put_type(&b, DIALECT_MODERN, ops[j]);
            codec_put_u64(&b, counts[i]);
            cr_assert_eq(parse_hdr(DIALECT_MODERN, &lim, &b),
                         CODEC_E_TOO_MANY);
        }
    }
    codec_put_type(&b, DIALECT_MODERN, OP_WAIT);
    codec_put_u64(&b, lim.max_keys);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &lim, &b), CODEC_NEED_MORE);
    codec_buf_free(&b);
}

Test(codec, whole_request_limit)
{
    struct codec_limits small = lim;
    small.max_request = 100;
    struct codec_buf b;
    codec_buf_init(&b);
    /* Each string is within its own limit, the request is not. */
    codec_put_type(&b, DIALECT_MODERN, OP_SET);
    put_s(&b, "/k");
    codec_put_u64(&b, 200);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &small, &b), CODEC_E_REQ_LONG);
    /* A key list whose minimum size already passes the limit. */
    codec_put_type(&b, DIALECT_MODERN, OP_WAIT);
    codec_put_u64(&b, 50);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &small, &b), CODEC_E_REQ_LONG);
    /* 0 means no whole-request limit. */
    small.max_request = 0;
    codec_put_type(&b, DIALECT_MODERN, OP_SET);
    put_s(&b, "/k");
    codec_put_u64(&b, 200);
    cr_assert_eq(parse_hdr(DIALECT_MODERN, &small, &b), CODEC_NEED_MORE);
    codec_buf_free(&b);
}

Test(codec, bad_types)
{
    uint8_t buf[16] = {0};
    struct codec_req r;
    size_t used;
    for (int t = 0; t < 256; t++) {
        buf[0] = (uint8_t)t;
        int m = codec_parse_request(DIALECT_MODERN, &lim, buf, 1, &r, &used);
        int l = codec_parse_request(DIALECT_LEGACY, &lim, buf, 1, &r, &used);
        int ext = (t >= 0x80 && t <= 0x84);
        if (t > 18 && !ext)
            cr_assert_eq(m, CODEC_E_BAD_TYPE, "modern type %d", t);
        else
            cr_assert_neq(m, CODEC_E_BAD_TYPE, "modern type %d", t);
        if (t == 7 || ext)
            cr_assert_eq(l, CODEC_E_REFUSED, "legacy type %d", t);
        else if (t > 11)
            cr_assert_eq(l, CODEC_E_BAD_TYPE, "legacy type %d", t);
        else
            cr_assert(l == CODEC_NEED_MORE || l == CODEC_OK,
                      "legacy type %d: %d", t, l);
    }
}

Test(codec, bad_magic)
{
    struct codec_buf b;
    codec_buf_init(&b);
    codec_put_type(&b, DIALECT_MODERN, OP_VALIDATE);
    codec_put_u32(&b, STORE_VALIDATE_MAGIC ^ 1);
    struct codec_req r;
    size_t used;
    cr_assert_eq(codec_parse_request(DIALECT_MODERN, &lim, b.p, b.len, &r,
                                     &used), CODEC_E_BAD_MAGIC);
    codec_buf_free(&b);
    for (int e = CODEC_E_REQ_LONG; e <= CODEC_NEED_MORE; e++)
        cr_assert_str_neq(codec_result_str(e), "unknown codec result");
}

Test(codec, next_slice_stops_on_bad_input)
{
    /* A length past the end must stop iteration, never run over. */
    uint8_t raw[12] = {100, 0, 0, 0, 0, 0, 0, 0, 'a', 'b', 'c', 'd'};
    uint8_t *p = malloc(sizeof(raw));
    memcpy(p, raw, sizeof(raw));
    struct codec_slice cur = {p, sizeof(raw)}, s;
    cr_assert_eq(codec_next_slice(&cur, &s), 0);
    struct codec_slice shortc = {p, 5};
    cr_assert_eq(codec_next_slice(&shortc, &s), 0);
    free(p);
}
