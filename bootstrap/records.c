/*
 * Process-group init, its records: each rank's (version, host identity,
 * endpoint names), published to its ring neighbours through the store and
 * gathered from them over the fabric in log2(n) window-doubling rounds
 * (boot_ring_gather); then the world group built from them (host ids into
 * nodes, the local ranks told to the transport).  pg.c, the init itself,
 * has the whole sequence.
 */
#include <inttypes.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include "boot.h"
#include "clock.h"
#include "err.h"
#include "etcd_addr.h"
#include "launcher_env.h"
#include "log.h"
#include "net.h"
#include "topology.h"
#include "tp.h"

/* ---- records: u32 magic, u32 version len, version, u32 hostid len,
 * hostid, u32 name len, name.  The version leads so that ranks of
 * different fccl installs can still read each other's and say so. ---- */
#define REC_MAGIC 0x31564346u /* "FCV1" */
#define REC_WIRE 3            /* rank-to-rank protocol: records, tags,
                                 control messages (2: clear-to-send tag bit
                                 61 and the receive size; 3: eager messages
                                 on net, and their limit must agree) */
#define REC_VER_MAX 64
#define REC_MAX 4096          /* a record, at most (ring receive buffer) */
/* Record gather tags: above every group's context id that can be live
 * during init (ids count up from 1; the world's is 0). */
#define BOOT_RING_TAG (1ull << 59)

/* "fccl 0.1.0 wire 3 eager 32768"; FCCL_FAKE_VERSION (testing) pretends
 * another version.  The eager limit (FCCL_EAGER_BYTES) is part of the
 * protocol: two ranks that disagree on it would wait for each other. */
static void my_version(char *out, size_t len)
{
    const char *fake = getenv("FCCL_FAKE_VERSION");
    snprintf(out, len, "fccl %s wire %d eager %zu",
             fake && *fake ? fake : FCCL_VERSION_STRING, REC_WIRE,
             tp_eager_limit());
}

int boot_make_record(struct fccl_tp *tp, void **out, size_t *outlen)
{
    char ver[REC_VER_MAX];
    const char *hostid = boot.hostid;
    my_version(ver, sizeof(ver));
    size_t nlen = 0;
    int rc = tp_local_name(tp, NULL, &nlen);
    if (rc < 0)
        return rc;
    uint32_t magic = REC_MAGIC, vl = (uint32_t)strlen(ver);
    uint32_t hl = (uint32_t)strlen(hostid), nl = (uint32_t)nlen;
    size_t total = 16 + vl + hl + nl;
    uint8_t *p = malloc(total), *q = p;
    if (!p)
        return fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
    memcpy(q, &magic, 4);
    memcpy(q + 4, &vl, 4);
    memcpy(q + 8, ver, vl);
    q += 8 + vl;
    memcpy(q, &hl, 4);
    memcpy(q + 4, hostid, hl);
    memcpy(q + 4 + hl, &nl, 4);
    rc = tp_local_name(tp, q + 8 + hl, &nlen);
    if (rc < 0) {
        free(p);
        return rc;
    }
    *out = p;
    *outlen = total;
    return FCCL_OK;
}

/* The version field of a record ("" for a record without one: an fccl
 * from before versions were published). */
static size_t record_version(const uint8_t *p, size_t len, char *ver)
{
    uint32_t magic, vl;
    ver[0] = '\0';
    if (len < 8)
        return 0;
    memcpy(&magic, p, 4);
    memcpy(&vl, p + 4, 4);
    if (magic != REC_MAGIC || vl >= REC_VER_MAX || 8 + (size_t)vl > len)
        return 0;
    memcpy(ver, p + 8, vl);
    ver[vl] = '\0';
    return 8 + vl;
}

/* Every rank must run the fccl of rank 0: name the first that does not. */
static int check_versions(void *const *vals, const size_t *lens)
{
    char v0[REC_VER_MAX], vr[REC_VER_MAX];
    record_version(vals[0], lens[0], v0);
    for (int r = 1; r < boot.size; r++) {
        record_version(vals[r], lens[r], vr);
        if (strcmp(v0, vr) == 0)
            continue;
        return fccl_err(FCCL_ERR_PROTOCOL,
                        "init: mixed fccl installs: rank 0 runs %s, rank %d "
                        "runs %s; every rank must use the same fccl version "
                        "(and FCCL_EAGER_BYTES)",
                        v0[0] ? v0 : "an fccl older than 0.1.0", r,
                        vr[0] ? vr : "an fccl older than 0.1.0");
    }
    return FCCL_OK;
}

static int parse_record(const uint8_t *p, size_t len, int rank, char *hostid,
                        const void **name, size_t *namelen)
{
    char ver[REC_VER_MAX];
    size_t skip = record_version(p, len, ver), total = len;
    uint32_t hl, nl;
    p += skip;
    len -= skip;
    if (!skip || len < 8)
        goto bad;
    memcpy(&hl, p, 4);
    if (hl >= HOSTID_MAX || 8 + (size_t)hl > len)
        goto bad;
    memcpy(&nl, p + 4 + hl, 4);
    if (8 + (size_t)hl + nl != len)
        goto bad;
    memcpy(hostid, p + 4, hl);
    hostid[hl] = '\0';
    *name = p + 8 + hl;
    *namelen = nl;
    return FCCL_OK;
bad:
    return fccl_err(FCCL_ERR_PROTOCOL,
                    "init: malformed record of rank %d (%zu bytes); is "
                    "another job using job id '%s'?",
                    rank, total, boot.job);
}

void boot_addr_key(char *out, size_t len, int rank)
{
    snprintf(out, len, "addr/%d", rank);
}

static int left_of(int r) { return (r + boot.size - 1) % boot.size; }
static int right_of(int r) { return (r + 1) % boot.size; }

/* Ranks (not me) whose record is not in the store, from one LIST_KEYS
 * reply: up to 8 named in out, *count of them in all.  Fails (< 0) on a
 * server without LIST_KEYS (PyTorch's). */
static int list_missing(char *out, size_t len, int *count)
{
    char **keys = NULL;
    size_t nk = 0;
    int rc = fccl_store_list_keys(boot.store, "addr/", &keys, &nk);
    if (rc < 0)
        return rc;
    unsigned char *seen = calloc((size_t)boot.size, 1);
    if (!seen) {
        fccl_store_free_keys(keys, nk);
        return FCCL_ERR_NOMEM;
    }
    for (size_t i = 0; i < nk; i++) {
        char *end;
        long r = strtol(keys[i] + 5, &end, 10); /* after "addr/" */
        if (strlen(keys[i]) > 5 && *end == '\0' && r >= 0 && r < boot.size)
            seen[r] = 1;
    }
    fccl_store_free_keys(keys, nk);
    size_t off = 0;
    *count = 0;
    out[0] = '\0';
    for (int r = 0; r < boot.size; r++) {
        if (seen[r] || r == boot.rank)
            continue;
        if (*count < 8 && off < len) {
            int w = snprintf(out + off, len - off, "%s%d",
                             *count ? ", " : "", r);
            off += w > 0 ? (size_t)w : 0;
        }
        (*count)++;
    }
    free(seen);
    return FCCL_OK;
}

/* Init failed while waiting for other ranks (their records from the store,
 * or the gather over the fabric, where the failure in hand may name a live
 * rank that gave up first): if some ranks never published a record, name
 * them, so that every rank's error points at the ranks that never arrived
 * and not only their ring neighbours'.  One store request, on failure
 * only.  Returns rc. */
int boot_name_missing(int rc)
{
    char cause[768], list[128];
    int missing = 0;
    snprintf(cause, sizeof(cause), "%s", fccl_last_error());
    if (list_missing(list, sizeof(list), &missing) < 0 || missing == 0)
        return fccl_err(rc, "%s", cause);
    const char *s = missing > 1 ? "s" : "";
    char more[32] = "";
    if (missing > 8)
        snprintf(more, sizeof(more), " and %d more", missing - 8);
    if (rc == FCCL_ERR_TIMEOUT)
        return fccl_err(rc, "init: rank %d timed out after %" PRId64 " ms: "
                        "rank%s %s%s (of %d) never arrived (no record in "
                        "the store); here: %s", boot.rank, boot.timeout_ms,
                        s, list, more, boot.size, cause);
    return fccl_err(rc, "init: rank %d failed: rank%s %s%s (of %d) never "
                    "arrived (no record in the store); here: %s", boot.rank,
                    s, list, more, boot.size, cause);
}

static int keep_record(int r, const void *p, size_t len)
{
    if (boot.recs[r])
        return FCCL_OK; /* the same record, by another path */
    if (len > REC_MAX)
        return fccl_err(FCCL_ERR_PROTOCOL, "init: record of rank %d is %zu "
                        "B (at most %d)", r, len, REC_MAX);
    boot.recs[r] = malloc(len ? len : 1);
    if (!boot.recs[r])
        return fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
    memcpy(boot.recs[r], p, len);
    boot.rec_lens[r] = len;
    return FCCL_OK;
}

/* Publish my record; fetch my two ring neighbours' (O(1) per rank). */
int boot_exchange_records(void *rec, size_t reclen)
{
    char key[32], kl[32], kr[32];
    boot_addr_key(key, sizeof(key), boot.rank);
    int rc = fccl_store_set(boot.store, key, rec, reclen);
    if (rc < 0 || (rc = keep_record(boot.rank, rec, reclen)) < 0 ||
        boot.size == 1)
        return rc;
    int nb[2] = {left_of(boot.rank), right_of(boot.rank)};
    size_t n = nb[0] == nb[1] ? 1 : 2;
    boot_addr_key(kl, sizeof(kl), nb[0]);
    boot_addr_key(kr, sizeof(kr), nb[1]);
    const char *keys[2] = {kl, kr};
    void *vals[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    int left = fccl_ms_left(boot.deadline);
    rc = fccl_store_multi_get(boot.store, keys, n, vals, lens,
                              left > 0 ? left : 1);
    for (size_t i = 0; i < n && rc >= 0; i++)
        rc = keep_record(nb[i], vals[i], lens[i]);
    free(vals[0]);
    free(vals[1]);
    return rc;
}

/* The transport's view of the record table (tp_lookup_fn): rank r's
 * endpoint names, and whether it shares my host. */
int boot_record_lookup(void *arg, int r, const void **name, size_t *len,
                       int *local)
{
    (void)arg;
    char hostid[HOSTID_MAX];
    if (r < 0 || r >= boot.size || !boot.recs[r])
        return fccl_err(FCCL_ERR_STATE, "init: no record of rank %d yet", r);
    int rc = parse_record(boot.recs[r], boot.rec_lens[r], r, hostid, name,
                          len);
    if (rc < 0)
        return rc;
    *local = strcmp(hostid, boot.hostid) == 0;
    return FCCL_OK;
}

static int wrap(int x) { return ((x % boot.size) + boot.size) % boot.size; }

/* cnt records from rank `from` on (mod n), as (u32 len, bytes)... */
static int pack(int from, int cnt, unsigned char **out, uint64_t *len)
{
    uint64_t total = 0;
    for (int i = 0; i < cnt; i++)
        total += 4 + boot.rec_lens[wrap(from + i)];
    unsigned char *p = malloc(total ? total : 1), *q = p;
    if (!p)
        return fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
    for (int i = 0; i < cnt; i++) {
        int r = wrap(from + i);
        uint32_t l = (uint32_t)boot.rec_lens[r];
        memcpy(q, &l, 4);
        memcpy(q + 4, boot.recs[r], l);
        q += 4 + l;
    }
    *out = p;
    *len = total;
    return FCCL_OK;
}

static int unpack(int from, int cnt, const unsigned char *p, uint64_t len,
                  int peer)
{
    for (int i = 0; i < cnt; i++) {
        uint32_t l;
        if (len < 4 || (memcpy(&l, p, 4), len - 4 < l))
            return fccl_err(FCCL_ERR_PROTOCOL, "init: rank %d sent a "
                            "truncated record list", peer);
        int rc = keep_record(wrap(from + i), p + 4, l);
        if (rc < 0)
            return rc;
        p += 4 + l;
        len -= 4 + l;
    }
    return FCCL_OK;
}

static void cancel_all(struct tp_req *req, int n)
{
    for (int i = 0; i < n; i++)
        if (tp_req_pending(&req[i]))
            tp_cancel(boot.tp, &req[i]);
}

/* One round with window half-width a: I hold [me - a, me + a].  I get
 * nl records left of that from rank me - a and nr right of it from rank
 * me + a, and give them theirs: each message is a size, then the packed
 * records (sizes differ: host names, providers). */
static int window_round(int a, int nl, int nr, uint64_t deadline, int round)
{
    int me = boot.rank, L = wrap(me - a), R = wrap(me + a), rc;
    uint64_t tag = BOOT_RING_TAG | (uint64_t)round << 2;
    uint64_t in_len[2] = {0, 0}, out_len[2] = {0, 0};
    unsigned char *out[2] = {NULL, NULL}, *in[2] = {NULL, NULL};
    struct tp_req req[8];
    memset(req, 0, sizeof(req));
    /* to R: the nl records left of me; to L: the nr right of me.  Tag bit
     * 1: the message travels rightwards (1) or leftwards (0). */
    if ((rc = pack(me - nl, nl, &out[0], &out_len[0])) < 0 ||
        (rc = pack(me + 1, nr, &out[1], &out_len[1])) < 0)
        goto out;
    CHECK_GOTO(tp_irecv(boot.tp, L, tag | 2, &in_len[0], 8, &req[0]), rc, out);
    CHECK_GOTO(tp_irecv(boot.tp, R, tag, &in_len[1], 8, &req[1]), rc, fail);
    CHECK_GOTO(tp_isend(boot.tp, R, tag | 2, &out_len[0], 8, &req[2]), rc, fail);
    CHECK_GOTO(tp_isend(boot.tp, L, tag, &out_len[1], 8, &req[3]), rc, fail);
    CHECK_GOTO(tp_isend(boot.tp, R, tag | 3, out[0], out_len[0], &req[4]), rc,
               fail);
    CHECK_GOTO(tp_isend(boot.tp, L, tag | 1, out[1], out_len[1], &req[5]), rc,
               fail);
    CHECK_GOTO(tp_waitall(boot.tp, req, 2, deadline, NULL), rc, fail);
    for (int i = 0; i < 2; i++) {
        if (in_len[i] > (uint64_t)a * (4 + REC_MAX)) {
            rc = fccl_err(FCCL_ERR_PROTOCOL, "init: rank %d announced %llu B "
                          "of records", i ? R : L,
                          (unsigned long long)in_len[i]);
            goto fail;
        }
        if (!(in[i] = malloc(in_len[i] ? in_len[i] : 1))) {
            rc = fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
            goto fail;
        }
    }
    CHECK_GOTO(tp_irecv(boot.tp, L, tag | 3, in[0], in_len[0], &req[6]), rc,
               fail);
    CHECK_GOTO(tp_irecv(boot.tp, R, tag | 1, in[1], in_len[1], &req[7]), rc,
               fail);
    CHECK_GOTO(tp_waitall(boot.tp, req + 2, 6, deadline, NULL), rc, fail);
    if ((rc = unpack(me - a - nl, nl, in[0], req[6].len, L)) >= 0)
        rc = unpack(me + a + 1, nr, in[1], req[7].len, R);
    goto out;
fail:
    cancel_all(req, 8);
    /* A cancel the provider could not honour leaves it owning the
     * buffers: leak them (a failing init, bounded) rather than free. */
    out[0] = out[1] = in[0] = in[1] = NULL;
out:
    for (int i = 0; i < 2; i++) {
        free(out[i]);
        free(in[i]);
    }
    return rc;
}

/* Everyone's record, over the fabric, in log2(n) rounds.  Each rank
 * starts with its two neighbours' records (from the store) and keeps a
 * window [me - a, me + a] of consecutive ranks; in each round it trades
 * with the ranks at the window's ends (whose records it holds, so it can
 * reach them), which double the window.  Every record reaches every rank
 * once (n records received per rank in all, like a ring all_gather, but
 * in log2(n) rounds instead of n).  Bounded by the init timeout. */
int boot_ring_gather(void)
{
    int n = boot.size, a = 1, rc = FCCL_OK;
    uint64_t deadline = boot.deadline;
    for (int round = 0; 2 * a + 1 < n && rc >= 0; round++, a *= 2) {
        int missing = n - (2 * a + 1);
        int nl = (missing + 1) / 2 < a ? (missing + 1) / 2 : a;
        int nr = missing - nl < a ? missing - nl : a;
        rc = window_round(a, nl, nr, deadline, round);
    }
    if (rc < 0)
        return fccl_err_wrap(rc, "init: rank %d: gathering the records over "
                             "the fabric", boot.rank);
    return rc;
}

/* Tell the transport which ranks share my host (liveness, spinning). */
static int watch_local(void)
{
    int *local = malloc(sizeof(int) * (size_t)boot.local_size), k = 0;
    if (!local)
        return fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
    for (int r = 0; r < boot.size; r++)
        if (boot.node_of[r] == boot.node_of[boot.rank])
            local[k++] = r;
    tp_set_local(boot.tp, local, k);
    free(local);
    return FCCL_OK;
}

int boot_build_world(void)
{
    int n = boot.size, rc = FCCL_OK;
    char (*hostids)[HOSTID_MAX] = calloc((size_t)n, HOSTID_MAX);
    const char **hp = calloc((size_t)n, sizeof(char *));
    boot.node_of = calloc((size_t)n, sizeof(int));
    if (!hostids || !hp || !boot.node_of) {
        rc = fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
        goto out;
    }
    for (int r = 0; r < n; r++)
        if (!boot.recs[r]) {
            rc = fccl_err(FCCL_ERR_PROTOCOL, "init: rank %d's record never "
                          "reached rank %d", r, boot.rank);
            goto out;
        }
    CHECK_GOTO(check_versions(boot.recs, boot.rec_lens), rc, out);
    for (int r = 0; r < n; r++) {
        const void *name;
        size_t nlen;
        CHECK_GOTO(parse_record(boot.recs[r], boot.rec_lens[r], r,
                                hostids[r], &name, &nlen),
                   rc, out);
        hp[r] = hostids[r];
    }
    CHECK_GOTO(topo_assign_nodes(hp, n, boot.node_of, &boot.nnodes), rc, out);
    topo_local(boot.node_of, n, boot.rank, &boot.local_rank, &boot.local_size);
    tp_set_machine(boot.tp, topo_machine_size(hp, n, boot.rank));
    CHECK_GOTO(watch_local(), rc, out);
    struct fccl_group *w = boot_group_alloc(n);
    if (!w) {
        rc = fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
        goto out;
    }
    snprintf(w->name, sizeof(w->name), "%s", FCCL_WORLD_GROUP);
    for (int r = 0; r < n; r++)
        w->world[r] = r;
    w->rank = boot.rank;
    w->ctx = 0; /* group creations count up from 1 */
    CHECK_GOTO(boot_group_finish(w), rc, out);
    boot.world = w;
out:
    free(hostids);
    free(hp);
    return rc;
}

int boot_keep_own_record(const void *rec, size_t len)
{
    return keep_record(boot.rank, rec, len);
}

int boot_record_hostid(const void *rec, size_t len, char *hostid)
{
    const void *name;
    size_t nlen;
    return parse_record(rec, len, -1, hostid, &name, &nlen);
}

void boot_free_records(void)
{
    for (int r = 0; boot.recs && r < boot.size; r++)
        free(boot.recs[r]);
    for (size_t i = 0; i < boot.nretired; i++)
        free(boot.retired[i]);
    free(boot.retired);
    free(boot.recs);
    free(boot.rec_lens);
}
