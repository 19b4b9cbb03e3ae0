/*
 * The name blob each rank publishes: how to reach each of its endpoints,
 * and who it is (pid and pid namespace, for live.c and CMA).
 *
 *   "FTP1" | u8 count | count x (u8 kind | u8 plen | prov | u16le alen |
 *   addr): the endpoints, then a "proc" entry (kind TP_EP_PROC: u32le pid,
 *   u64le pid-namespace inode), then, when this process has a heartbeat
 *   socket, an "hb" entry (kind TP_EP_HB: 16-byte IPv6 address, IPv4
 *   mapped, and u16le port; live.c).  Readers skip kinds they do not know.
 */
#include <string.h>

#include "err.h"
#include "tp_int.h"

#define BLOB_MAGIC "FTP1"

int tp_blob_encode(const struct fccl_tp *tp, void *buf, size_t *len)
{
    size_t need = 5 + 4 + strlen(TP_PROC_NAME) + TP_LIVE_ADDR_LEN;
    if (tp->hb_self_ok)
        need += 4 + strlen(TP_HB_NAME) + TP_HB_ADDR_LEN;
    for (int i = 0; i < tp->nep; i++)
        need += 4 + strlen(tp->eps[i].prov) + tp->eps[i].addrlen;
    if (!buf) {
        *len = need;
        return FCCL_OK;
    }
    if (*len < need)
        return fccl_err(FCCL_ERR_INVALID,
                        "transport: name buffer %zu B, need %zu B", *len, need);
    unsigned char *p = buf;
    memcpy(p, BLOB_MAGIC, 4);
    p[4] = (unsigned char)(tp->nep + 1 + (tp->hb_self_ok != 0));
    p += 5;
    for (int i = 0; i < tp->nep; i++) {
        const struct tp_ep *e = &tp->eps[i];
        size_t pl = strlen(e->prov);
        *p++ = (unsigned char)e->kind;
        *p++ = (unsigned char)pl;
        memcpy(p, e->prov, pl);
        p += pl;
        *p++ = (unsigned char)(e->addrlen & 0xff);
        *p++ = (unsigned char)(e->addrlen >> 8);
        memcpy(p, e->addr, e->addrlen);
        p += e->addrlen;
    }
    size_t pl = strlen(TP_PROC_NAME);
    *p++ = TP_EP_PROC;
    *p++ = (unsigned char)pl;
    memcpy(p, TP_PROC_NAME, pl);
    p += pl;
    *p++ = TP_LIVE_ADDR_LEN;
    *p++ = 0;
    uint64_t v[2] = {(uint64_t)tp->pid, tp->pidns};
    for (int k = 0; k < 4; k++)
        p[k] = (unsigned char)(v[0] >> (8 * k));
    for (int k = 0; k < 8; k++)
        p[4 + k] = (unsigned char)(v[1] >> (8 * k));
    p += TP_LIVE_ADDR_LEN;
    if (tp->hb_self_ok) {
        pl = strlen(TP_HB_NAME);
        *p++ = TP_EP_HB;
        *p++ = (unsigned char)pl;
        memcpy(p, TP_HB_NAME, pl);
        p += pl;
        *p++ = TP_HB_ADDR_LEN;
        *p++ = 0;
        memcpy(p, tp->hb_self, TP_HB_ADDR_LEN);
    }
    *len = need;
    return FCCL_OK;
}

/* Find the endpoint in a peer's blob: by provider name when `prov` is set,
 * else by kind.  FCCL_ERR_NOTFOUND if absent, PROTOCOL if malformed. */
int tp_blob_find(const void *blob, size_t len, int kind, const char *prov,
                 const unsigned char **addr, size_t *addrlen)
{
    const unsigned char *p = blob, *end = p + len;
    if (!blob || len < 5 || memcmp(p, BLOB_MAGIC, 4) != 0)
        return fccl_err(FCCL_ERR_PROTOCOL, "bad transport name blob "
                        "(%zu B, no magic)", len);
    int n = p[4];
    p += 5;
    for (int i = 0; i < n; i++) {
        if (end - p < 2 || end - p < 2 + p[1] + 2)
            goto bad;
        int k = p[0];
        size_t pl = p[1];
        const char *pn = (const char *)p + 2;
        p += 2 + pl;
        size_t al = (size_t)p[0] | (size_t)p[1] << 8;
        p += 2;
        if ((size_t)(end - p) < al || al > TP_ADDR_MAX)
            goto bad;
        int match = prov ? strlen(prov) == pl && memcmp(prov, pn, pl) == 0
                         : k == kind;
        if (match) {
            *addr = p;
            *addrlen = al;
            return FCCL_OK;
        }
        p += al;
    }
    return FCCL_ERR_NOTFOUND;
bad:
    return fccl_err(FCCL_ERR_PROTOCOL, "truncated transport name blob "
                    "(%zu B)", len);
}

int tp_blob_proc(const void *blob, size_t len, int *pid, uint64_t *pidns)
{
    const unsigned char *a;
    size_t al = 0;
    if (tp_blob_find(blob, len, TP_EP_PROC, NULL, &a, &al) != FCCL_OK ||
        al != TP_LIVE_ADDR_LEN)
        return FCCL_ERR_NOTFOUND;
    uint64_t p = 0, ns = 0;
    for (int k = 0; k < 4; k++)
        p |= (uint64_t)a[k] << (8 * k);
    for (int k = 0; k < 8; k++)
        ns |= (uint64_t)a[4 + k] << (8 * k);
    *pid = (int)p;
    *pidns = ns;
    return FCCL_OK;
}
