/*
 * Endpoint setup for the transport: pick a provider, then the flat checked
 * sequence hints -> fabric -> domain -> CQ -> AV -> endpoint -> bind ->
 * enable -> getname.  (The name blob that ranks publish is names.c.)
 *
 * Hints ask for tagged RDM messaging with directed receive (a receive names
 * its source) and send-after-send ordering (two messages with the same
 * source and tag match receives in the order they were sent).  When a
 * provider cannot give one of these we retry without it: without directed
 * receive the source rank travels in the tag's top bits (peers.c); a
 * provider without FI_ORDER_SAS is logged, since same-tag messages between
 * one pair could then overtake each other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "tp_int.h"

#define TP_FI_VERSION FI_VERSION(1, 17)

/* libfabric defaults we change, only where the user has not set them.
 * Providers read them at libfabric's first use, so fccl_init sets them
 * before its first fi_getinfo, while it still runs on one thread of its
 * own (setenv is not safe against a concurrent getenv); nothing is set at
 * load time, so a program that merely links libfccl is untouched.
 * - rxm over tcp posts FI_OFI_RXM_MSG_RX_SIZE bounce buffers of 16 KiB on
 *   a shared receive context, 4096 by default: 64 MiB touched in fi_enable
 *   (~37 ms and ~50 MB of RSS per process).  256 keeps unexpected eager
 *   messages flowing (TCP back-pressures the rest); the open takes ~2 ms.
 * - With rxm's dynamic receive buffers (tcp reads eager data straight into
 *   the user's buffer), a truncated receive leaves the rest of the message
 *   in the TCP stream and every later message from that peer is lost
 *   (libfabric 1.17; ofiwg/libfabric#8274).  Without them rxm truncates
 *   from its bounce buffer and the connection stays usable, for ~10% of
 *   eager (<= 16 KiB) bandwidth on tcp.
 * - rxm sends messages up to FI_OFI_RXM_SAR_LIMIT (128 KiB) as 16 KiB
 *   segments through bounce buffers, copied on both sides; above it by
 *   rendezvous, which the tcp provider reads straight into the receive
 *   buffer.  The copies cost more than the rendezvous's extra round trip
 *   from 64 KiB on: between two namespace hosts, a 128 KiB exchange takes
 *   166 us instead of 230-243 and a 256 KiB all_gather 164-183 instead of
 *   250-290 (bench/RESULTS.md, issue 11).
 * - net reads a message straight into its posted receive.  It keeps up to
 *   FI_NET_MAX_SAVED (4) messages of at most 128 B per connection that
 *   arrived before their receive; the next early one stops the connection
 *   until a receive matches it (see streams_into_recv).  64 lets the small
 *   messages of many-peer exchanges and barriers through. */
void tp_env_defaults(void)
{
    setenv("FI_OFI_RXM_MSG_RX_SIZE", "256", 0);
    setenv("FI_OFI_RXM_ENABLE_DYN_RBUF", "0", 0);
    setenv("FI_OFI_RXM_SAR_LIMIT", "65536", 0);
    setenv("FI_NET_MAX_SAVED", "64", 0);
}

/* ------------------------------------------------------------------ */
/* Hints and provider choice                                          */
/* ------------------------------------------------------------------ */

enum { HINT_DIRECTED = 1, HINT_SAS = 2 };

static struct fi_info *make_hints(const char *prov, const char *iface,
                                  int want)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV;
    if (want & HINT_DIRECTED)
        h->caps |= FI_DIRECTED_RECV;
    /* The context space lives in struct tp_req.fi_ctx (64 bytes). */
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                              FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                              FI_MR_ENDPOINT;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->av_type = FI_AV_TABLE;
    if (want & HINT_SAS) {
        h->tx_attr->msg_order = FI_ORDER_SAS;
        h->rx_attr->msg_order = FI_ORDER_SAS;
    }
    if (prov && !(h->fabric_attr->prov_name = strdup(prov)))
        goto oom;
    if (iface && *iface && !(h->domain_attr->name = strdup(iface)))
        goto oom;
    return h;
oom:
    fi_freeinfo(h);
    return NULL;
}

/* Util-only layers ("ofi_rxm" alone, hooks) cannot carry traffic. */
static int util_only(const char *name)
{
    return strncmp(name, "ofi_", 4) == 0 && !strchr(name, ';');
}

/* Network provider preference: real NICs, then TCP, then the slow ones.
 * Over TCP the native RDM provider (net; tcp from libfabric 1.18) before
 * tcp;ofi_rxm, which copies messages through bounce buffers and moves
 * large ones by a read round trip (bench/RESULTS.md, issue 11; see
 * streams_into_recv for what net needs from us). */
static int net_score(const char *name)
{
    static const struct { const char *key; int score; } tab[] = {
        {"cxi", 90},  {"efa", 90},  {"verbs", 80},       {"psm3", 70},
        {"opx", 70},  {"psm2", 60}, {"tcp;ofi_rxm", 50}, {"net", 55},
        {"tcp", 55},  {"udp", 20},  {"sockets", 10},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strstr(name, tab[i].key))
            return tab[i].score;
    return 1;
}

/* "tcp" also names "tcp;ofi_rxm": the core provider under a utility
 * layer, as FI_PROVIDER=tcp means to libfabric itself. */
static int core_is(const char *name, const char *prov)
{
    size_t n = strlen(prov);
    return strncmp(name, prov, n) == 0 && name[n] == ';';
}

/* Pick from fi_getinfo's list: forced = that provider (exact name first,
 * else layered over that core); shm = the shm provider; net = best scored
 * non-shm, non-util provider. */
static struct fi_info *choose(struct fi_info *list, int kind,
                              const char *prov)
{
    struct fi_info *best = NULL;
    int best_score = 0;
    for (struct fi_info *i = list; prov && i; i = i->next) {
        const char *name = i->fabric_attr->prov_name;
        if (name && strcmp(name, prov) == 0)
            return i;
        if (name && !best && core_is(name, prov))
            best = i;
    }
    if (prov)
        return best;
    for (struct fi_info *i = list; i; i = i->next) {
        const char *name = i->fabric_attr->prov_name;
        if (!name)
            continue;
        if (kind == TP_EP_SHM) {
            if (strcmp(name, "shm") == 0)
                return i;
            continue;
        }
        if (strcmp(name, "shm") == 0 || util_only(name))
            continue;
        int s = net_score(name);
        if (s > best_score) {
            best = i;
            best_score = s;
        }
    }
    return best;
}

/* fi_getinfo with fewer wishes until one is granted. */
static int get_info(int kind, const char *prov, const char *iface,
                    struct fi_info **out, int *granted)
{
    static const int tries[] = {HINT_DIRECTED | HINT_SAS, HINT_SAS,
                                HINT_DIRECTED, 0};
    const char *want = prov ? prov : kind == TP_EP_SHM ? "shm" : NULL;
    int last = -FI_ENODATA;
    for (size_t t = 0; t < sizeof(tries) / sizeof(tries[0]); t++) {
        struct fi_info *hints = make_hints(want, iface, tries[t]);
        if (!hints)
            return fccl_err(FCCL_ERR_NOMEM, "transport: fi_allocinfo failed");
        struct fi_info *list = NULL;
        last = fi_getinfo(TP_FI_VERSION, NULL, NULL, 0, hints, &list);
        fi_freeinfo(hints);
        if (last != 0)
            continue;
        struct fi_info *pick = choose(list, kind, prov);
        if (pick) {
            *out = fi_dupinfo(pick);
            fi_freeinfo(list);
            if (!*out)
                return fccl_err(FCCL_ERR_NOMEM, "transport: fi_dupinfo");
            *granted = tries[t];
            return FCCL_OK;
        }
        fi_freeinfo(list);
        last = -FI_ENODATA;
    }
    return fccl_err(FCCL_ERR_UNSUPPORTED,
                    "transport: provider %s%s%s not available for tagged "
                    "RDM messaging: fi_getinfo: %s",
                    want ? want : "(any network)", iface ? " on " : "",
                    iface ? iface : "", tp_fi_strerror(last));
}

/* ------------------------------------------------------------------ */
/* Endpoint open/close                                                */
/* ------------------------------------------------------------------ */

#define FI_CHECK(call, what)                                                   \
    do {                                                                       \
        int fi_rc_ = (call);                                                   \
        if (fi_rc_ != 0) {                                                     \
            fccl_err(FCCL_ERR_FABRIC, "transport: %s: %s: %s", e->prov,        \
                     what, tp_fi_strerror(fi_rc_));                            \
            goto fail;                                                         \
        }                                                                      \
    } while (0)

/* Providers with a native RDM endpoint over TCP sockets (net in libfabric
 * 1.17, named tcp from 1.18) read a message straight into its posted
 * receive.  One above the inject size (128 B) that arrives before its
 * receive stops the connection until it is matched, so every later
 * message from that peer waits behind it: two groups driven from two
 * threads deadlocked (coll_check -m groups).  One longer than its receive
 * makes the provider drop the connection.  So above the inject size a
 * send waits for the receiver's clear-to-send, as on shm, which also
 * carries the receive's size (rndv.c).  Cost: about one one-way latency
 * when sender and receiver post at the same moment (2 namespace hosts:
 * 512 B all_gather 14 -> 29 us), so messages up to 32 KiB go eagerly
 * into bounce receives instead (eager.c).  And a reset connection loses
 * the messages net has not matched yet, so tp_close waits for goodbyes
 * (bye.c). */
static int streams_into_recv(const char *prov)
{
    return strcmp(prov, "net") == 0 || strcmp(prov, "tcp") == 0;
}

static void note_info(struct tp_ep *e, int granted)
{
    struct fi_info *i = e->info;
    e->directed = (granted & HINT_DIRECTED) != 0;
    e->mr_local = (i->domain_attr->mr_mode & FI_MR_LOCAL) != 0;
    e->mr_endpoint = (i->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
    e->max_msg = i->ep_attr->max_msg_size ? i->ep_attr->max_msg_size
                                          : (size_t)1 << 30;
    e->inject_size = i->tx_attr->inject_size;
    e->is_shm = strcmp(e->prov, "shm") == 0;
    e->rndv = e->is_shm || streams_into_recv(e->prov);
    if (!(granted & HINT_SAS))
        LOG_WARN("FABRIC", "%s: no send-after-send ordering: messages with "
                 "the same peer and tag may be matched out of order", e->prov);
    LOG_DEBUG("FABRIC", "%s: domain %s, directed recv %s, mr_mode 0x%x, "
              "max_msg %zu, inject %zu", e->prov, i->domain_attr->name,
              e->directed ? "yes" : "no (source in tag)",
              (unsigned)i->domain_attr->mr_mode, e->max_msg, e->inject_size);
}

/* shm names its segment /dev/shm/<pid>:<ep>:<domain> after this process,
 * and fi_enable fails with EBUSY if that file exists.  A file with our pid
 * can only be left by a dead process that had the same pid and exited
 * without closing its endpoint (names within one process are unique), so
 * it is stale: remove it. */
static void clear_stale_shm(struct tp_ep *e)
{
    char name[TP_ADDR_MAX + 1], path[TP_ADDR_MAX + 16];
    size_t len = TP_ADDR_MAX;
    if (strcmp(e->prov, "shm") != 0 || fi_getname(&e->ep->fid, name, &len))
        return;
    name[len < TP_ADDR_MAX ? len : TP_ADDR_MAX] = '\0';
    const char *p = strstr(name, "://");
    p = p ? p + 3 : name;
    char *end;
    long pid = strtol(p, &end, 10);
    if (pid != (long)getpid() || *end != ':' || strchr(p, '/'))
        return;
    snprintf(path, sizeof(path), "/dev/shm/%s", p);
    if (unlink(path) == 0)
        LOG_INFO("FABRIC", "removed stale shm segment %s", path);
}

static int open_objects(struct tp_ep *e)
{
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED,
                             .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 64};
    FI_CHECK(fi_fabric(e->info->fabric_attr, &e->fabric, NULL), "fi_fabric");
    FI_CHECK(fi_domain(e->fabric, e->info, &e->domain, NULL), "fi_domain");
    FI_CHECK(fi_cq_open(e->domain, &cqa, &e->cq, NULL), "fi_cq_open");
    FI_CHECK(fi_av_open(e->domain, &ava, &e->av, NULL), "fi_av_open");
    FI_CHECK(fi_endpoint(e->domain, e->info, &e->ep, NULL), "fi_endpoint");
    FI_CHECK(fi_ep_bind(e->ep, &e->av->fid, 0), "fi_ep_bind(av)");
    FI_CHECK(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV),
             "fi_ep_bind(cq)");
    clear_stale_shm(e);
    FI_CHECK(fi_enable(e->ep), "fi_enable");
    e->addrlen = sizeof(e->addr);
    FI_CHECK(fi_getname(&e->ep->fid, e->addr, &e->addrlen), "fi_getname");
    return FCCL_OK;
fail:
    return FCCL_ERR_FABRIC;
}

int tp_ep_open(struct tp_ep *e, int kind, const char *prov,
               const char *iface, int forced)
{
    memset(e, 0, sizeof(*e));
    e->kind = kind;
    uint64_t t0 = fccl_now_ns();
    int granted = 0;
    /* shm has one domain named "shm": an interface filter would hide it. */
    const char *dom = (prov && strcmp(prov, "shm") == 0) ||
                              (!prov && kind == TP_EP_SHM)
                          ? NULL
                          : iface;
    int rc = get_info(kind, forced ? prov : NULL, dom, &e->info, &granted);
    if (rc < 0)
        return rc;
    snprintf(e->prov, sizeof(e->prov), "%s", e->info->fabric_attr->prov_name);
    note_info(e, granted);
    if ((rc = open_objects(e)) < 0) {
        tp_ep_close(e);
        return rc;
    }
    LOG_INFO("FABRIC", "%s endpoint open on %s in %.1f ms", e->prov,
             e->info->domain_attr->name,
             (double)(fccl_now_ns() - t0) / 1e6);
    return FCCL_OK;
}

static void close_fid(struct fid *f, const char *prov, const char *what)
{
    if (!f)
        return;
    int rc = fi_close(f);
    if (rc)
        LOG_WARN("FABRIC", "%s: fi_close(%s): %s", prov, what,
                 tp_fi_strerror(rc));
}

void tp_ep_close(struct tp_ep *e)
{
    /* Reverse order of setup: the endpoint before what it is bound to. */
    tp_mr_cache_free(e);
    close_fid(e->ep ? &e->ep->fid : NULL, e->prov, "ep");
    close_fid(e->av ? &e->av->fid : NULL, e->prov, "av");
    close_fid(e->cq ? &e->cq->fid : NULL, e->prov, "cq");
    close_fid(e->domain ? &e->domain->fid : NULL, e->prov, "domain");
    close_fid(e->fabric ? &e->fabric->fid : NULL, e->prov, "fabric");
    if (e->info)
        fi_freeinfo(e->info);
    e->ep = NULL;
    e->av = NULL;
    e->cq = NULL;
    e->domain = NULL;
    e->fabric = NULL;
    e->info = NULL;
}
