/*
 * ADD, APPEND and COMPARE_SET as functions of the value read (etcd_rmw.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "err.h"
#include "etcd_rmw.h"

static int put_copy(struct ermw_out *o, const uint8_t *a, size_t an,
                    const uint8_t *b, size_t bn)
{
    o->nv = malloc(an + bn + 1);
    if (!o->nv)
        return fccl_err(FCCL_ERR_NOMEM, "out of memory for a value of %zu "
                        "bytes", an + bn);
    if (an)
        memcpy(o->nv, a, an);
    if (bn)
        memcpy(o->nv + an, b, bn);
    o->nv[an + bn] = '\0';
    o->nvlen = an + bn;
    o->write = 1;
    return FCCL_OK;
}

static int do_add(const struct ermw_in *in, int present, const uint8_t *cur,
                  size_t clen, struct ermw_out *o)
{
    int64_t v = 0;
    if (present && codec_parse_i64(cur, clen, &v) < 0)
        return fccl_err(FCCL_ERR_INVALID, "ADD: the value is not a decimal "
                        "integer ('%.*s'%s)", (int)(clen > 40 ? 40 : clen),
                        (const char *)cur, clen > 40 ? "..." : "");
    /* Wraps like tcpstore-server's counters, without UB. */
    o->num = (int64_t)((uint64_t)v + (uint64_t)in->delta);
    char txt[24];
    int n = snprintf(txt, sizeof(txt), "%" PRId64, o->num);
    return put_copy(o, (const uint8_t *)txt, (size_t)n, NULL, 0);
}

static int do_cas(const struct ermw_in *in, int present, const uint8_t *cur,
                  size_t clen, struct ermw_out *o)
{
    if (!present) {
        /* PyTorch: created only when expected is empty; else the reply
         * is expected and nothing is stored. */
        if (in->vlen != 0) {
            o->reply = in->val;
            o->rlen = in->vlen;
            return FCCL_OK;
        }
    } else if (clen != in->vlen ||
               (clen && memcmp(cur, in->val, clen) != 0)) {
        o->reply = cur;
        o->rlen = clen;
        return FCCL_OK;
    }
    int rc = put_copy(o, in->desired, in->dlen, NULL, 0);
    o->reply = o->nv;
    o->rlen = o->nvlen;
    return rc;
}

int ermw_apply(const struct ermw_in *in, int present, const uint8_t *cur,
               size_t clen, struct ermw_out *out)
{
    memset(out, 0, sizeof(*out));
    switch (in->kind) {
    case ERMW_ADD: return do_add(in, present, cur, clen, out);
    case ERMW_APPEND:
        return put_copy(out, present ? cur : NULL, present ? clen : 0,
                        in->val, in->vlen);
    case ERMW_CAS: return do_cas(in, present, cur, clen, out);
    }
    return fccl_err(FCCL_ERR_INVALID, "unknown read-modify-write");
}

void ermw_out_free(struct ermw_out *o)
{
    free(o->nv);
    o->nv = NULL;
}
