/*
 * libFuzzer target: the store's request parser (store/proto/codec.c), both
 * dialects.  Input: byte 0 picks the dialect (and small limits) and a
 * split point; the rest is a stream of requests.  Checked on every input:
 *  - OK consumes 1..len bytes, and the slices it returns lie inside the
 *    input; multi-key args walk to exactly nkeys (2 x for MULTI_SET) items;
 *  - NEED_MORE asks for more than it was given, and a prefix of a request
 *    that parses OK is NEED_MORE (never OK with other bytes, never an error);
 *  - the value-head parser agrees with the full parser;
 *  - nothing reads outside the buffer (ASan) or overflows (UBSan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fuzz.h"

static int inside(const uint8_t *buf, size_t len, struct codec_slice s)
{
    return s.len == 0 || (s.p >= buf && s.p + s.len <= buf + len);
}

static void check_args(const struct codec_req *r, const uint8_t *buf,
                       size_t len)
{
    ASSERT(inside(buf, len, r->key) && inside(buf, len, r->val) &&
           inside(buf, len, r->val2) && inside(buf, len, r->args));
    if (r->op != OP_CHECK && r->op != OP_WAIT && r->op != OP_MULTI_GET &&
        r->op != OP_MULTI_SET)
        return;
    struct codec_slice cur = r->args, one;
    uint64_t items = 0;
    while (codec_next_slice(&cur, &one)) {
        ASSERT(inside(buf, len, one));
        items++;
    }
    ASSERT(cur.len == 0);
    ASSERT(items == (r->op == OP_MULTI_SET ? 2 * r->nkeys : r->nkeys));
}

/* Every prefix of a complete request is NEED_MORE with a need beyond it. */
static void check_prefix(enum store_dialect d, const struct codec_limits *l,
                         const uint8_t *buf, size_t used, size_t cut)
{
    struct codec_req r;
    size_t need = 0;
    cut %= used;
    if (cut == 0)
        return;
    int rc = codec_parse_request(d, l, buf, cut, &r, &need);
    ASSERT(rc == CODEC_NEED_MORE);
    ASSERT(need > cut && need <= used);
}

static void check_head(enum store_dialect d, const struct codec_limits *l,
                       const uint8_t *buf, size_t len, int full_rc,
                       size_t used)
{
    struct codec_req r;
    uint64_t vlen = 0;
    size_t head = 0;
    int rc = codec_parse_value_head(d, l, buf, len, &r, &vlen, &head);
    if (rc == CODEC_OK) {
        ASSERT(head <= len);
        ASSERT(inside(buf, len, r.key));
        ASSERT(vlen <= l->max_value);
        if (full_rc == CODEC_OK)
            ASSERT(used == head + vlen);
        else
            ASSERT(full_rc == CODEC_NEED_MORE);
    } else if (rc == CODEC_NEED_MORE) {
        ASSERT(head > len);
        ASSERT(full_rc == CODEC_NEED_MORE);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    enum store_dialect d = data[0] & 1 ? DIALECT_LEGACY : DIALECT_MODERN;
    struct codec_limits l;
    codec_limits_default(&l);
    if (data[0] & 2) { /* small limits reach every limit check */
        l.max_key = 16;
        l.max_value = 64;
        l.max_keys = 4;
        l.max_request = 2 * l.max_value + 2 * l.max_key + 64;
    }
    size_t cut = data[1];
    const uint8_t *p = data + 2;
    size_t len = size - 2;
    for (int n = 0; len > 0 && n < 64; n++) {
        struct codec_req r;
        size_t used = 0;
        int rc = codec_parse_request(d, &l, p, len, &r, &used);
        check_head(d, &l, p, len, rc, used);
        if (rc == CODEC_NEED_MORE) {
            ASSERT(used > len);
            return 0;
        }
        if (rc != CODEC_OK)
            return 0;
        ASSERT(used >= 1 && used <= len);
        check_args(&r, p, len);
        check_prefix(d, &l, p, used, cut + (size_t)n);
        p += used;
        len -= used;
    }
    return 0;
}
