/*
 * Process-group init: from a store address to the world group.
 *
 * Store traffic per rank is O(1) requests and bytes, whatever the world
 * size (NCCL's bootstrap does the same): one SET of this rank's record
 * (host identity + endpoint names), one MULTI_GET of its two ring
 * neighbours' records (the server answers once both exist), and one
 * DELETE of its own record after the first barrier proves the neighbours
 * have read it.  Every other record travels over the fabric, in log2(n)
 * rounds of a window-doubling gather between ranks (ring_gather), so the
 * store serves O(n) bytes per job instead of O(n^2).  The transport
 * resolves a network peer (fi_av_insert) only when it is first used, from
 * the record table kept here until finalize; the ranks on this host it
 * resolves in build_world, before the first barrier (shm needs to know a
 * sender before its messages come: tp_set_local).  The libfabric start-up (the
 * slow part: ~0.2 s in fi_getinfo and fi_enable) runs in a thread in
 * parallel with connecting to the store.
 *
 * One deadline bounds init's waits for the others.  A rank that never
 * arrives makes its ring neighbours' store fetch time out and the others'
 * gather fail or time out; each then asks the store once which records
 * exist and names the ranks that never published theirs (name_missing).
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

/* FCCL_STORE_LEASE_TTL's default: a job on etcd without a launcher's
 * lease writes under one of this TTL (seconds). */
#define BOOT_LEASE_TTL_S 60

struct boot_state boot;

void fccl_init_opts_init(fccl_init_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->world_size = -1;
    o->rank = -1;
}

static int env_int(const char *name, int *out)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return FCCL_ERR_NOTFOUND;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < -1 || v > 1 << 24)
        return fccl_err(FCCL_ERR_INVALID, "%s='%s' is not a valid integer",
                        name, s);
    *out = (int)v;
    return FCCL_OK;
}

/* The rank/size/timeout/job checks of the seeds: each a clear error. */
static int resolve_args(const fccl_init_opts_t *o, int *rank, int *size)
{
    int rc;
    if (o->store && o->init_method)
        return fccl_err(FCCL_ERR_INVALID,
                        "init: give either a store or an init_method, not both");
    *size = o->world_size;
    if (*size == -1 && (rc = env_int("WORLD_SIZE", size)) < 0)
        return rc == FCCL_ERR_NOTFOUND
                   ? fccl_err(FCCL_ERR_INVALID,
                              "init: world size not given and WORLD_SIZE unset")
                   : rc;
    if (*size <= 0)
        return fccl_err(FCCL_ERR_INVALID,
                        "init: world size must be positive, got %d", *size);
    *rank = o->rank;
    if (*rank == -1 && (rc = env_int("RANK", rank)) < 0)
        return rc == FCCL_ERR_NOTFOUND
                   ? fccl_err(FCCL_ERR_INVALID,
                              "init: rank not given and RANK unset")
                   : rc;
    if (*rank < 0 || *rank >= *size)
        return fccl_err(FCCL_ERR_INVALID,
                        "init: rank %d out of range for world size %d", *rank,
                        *size);
    return FCCL_OK;
}

/* "tcp://H:P" or "env://" (FCCL_STORE_ADDRS, else MASTER_ADDR and
 * MASTER_PORT) -> the store address ("H:P", or "etcd://..."). */
static int resolve_addr(const char *method, char *addr, size_t len)
{
    const char *list = getenv("FCCL_STORE_ADDRS");
    if ((!method || strcmp(method, "env://") == 0) && list && *list) {
        if (strlen(list) >= len)
            return fccl_err(FCCL_ERR_INVALID, "init: FCCL_STORE_ADDRS is "
                            "over %zu bytes", len - 1);
        snprintf(addr, len, "%s", list);
        return FCCL_OK;
    }
    if (!method || strcmp(method, "env://") == 0) {
        const char *h = getenv("MASTER_ADDR"), *p = getenv("MASTER_PORT");
        if (!h || !*h || !p || !*p)
            return fccl_err(FCCL_ERR_INVALID,
                            "init env://: MASTER_ADDR and MASTER_PORT must be set");
        if (strchr(h, ':') && h[0] != '[')
            snprintf(addr, len, "[%s]:%s", h, p);
        else
            snprintf(addr, len, "%s:%s", h, p);
        return FCCL_OK;
    }
    if (strncmp(method, "etcd://", 7) == 0 ||
        strncmp(method, "etcds://", 8) == 0) {
        snprintf(addr, len, "%s", method);
        return FCCL_OK;
    }
    if (strncmp(method, "tcp://", 6) == 0) {
        snprintf(addr, len, "%s", method + 6);
        return FCCL_OK;
    }
    return fccl_err(FCCL_ERR_INVALID,
                    "init: unknown init_method '%s' (use env:// or tcp://HOST:PORT)",
                    method);
}

/* Can this process bind host:port?  No: the address is another host's,
 * or a server listens there already (the caller connects to it then). */
static int can_bind(const char *host, int port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0)
        return 0;
    int ok = 0, one = 1;
    for (struct addrinfo *ai = res; ai && !ok; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        ok = bind(fd, ai->ai_addr, ai->ai_addrlen) == 0;
        close(fd);
    }
    freeaddrinfo(res);
    return ok;
}

/* PyTorch's is_master: rank 0 serves the store in-process when asked,
 * with the security and durability a tcpstore-server would be given
 * (fccl_server_opts_env: FCCL_STORE_SERVER_TLS_CERT/KEY/CA,
 * FCCL_STORE_SERVER_JOURNAL, and FCCL_STORE_TOKEN_FILE, which this rank's
 * own client proves too).  An address this process cannot bind means a
 * server is already there (or on another host), which is fine; any other
 * failure (a certificate that does not load, an unreadable token) fails
 * init with its reason rather than waiting for a store that never comes. */
static int maybe_host_store(const char *addr)
{
    char host[FCCL_HOST_MAX];
    int port, rc;
    if (fccl_addr_parse(addr, host, sizeof(host), &port) < 0)
        return FCCL_OK; /* the connect names the bad address */
    if (!can_bind(host, port)) {
        LOG_INFO("BOOT", "not hosting the store on %s (taken, or not this "
                 "host's address); connecting to it", addr);
        return FCCL_OK;
    }
    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    if ((rc = fccl_server_opts_env(&o, "FCCL_STORE")) < 0)
        return rc;
    snprintf(o.host, sizeof(o.host), "%s", host);
    o.port = port;
    fccl_server_t *srv = NULL;
    if ((rc = fccl_server_create(&o, &srv)) < 0)
        return fccl_err_wrap(rc, "rank 0 cannot host the store on %s", addr);
    if ((rc = fccl_server_start(srv)) < 0) {
        fccl_server_free(srv);
        return rc;
    }
    boot.server = srv;
    LOG_INFO("BOOT", "rank 0 hosts the store on %s", addr);
    return FCCL_OK;
}

static void job_id(const fccl_init_opts_t *o, char *out, size_t len)
{
    const char *j = o->job_id;
    if (!j || !*j)
        j = getenv("FCCL_JOB_ID");
    if (!j || !*j)
        j = getenv("TORCHELASTIC_RUN_ID");
    snprintf(out, len, "%s", j && *j ? j : "fccl");
}

static int open_store(const fccl_init_opts_t *o)
{
    int rc;
    char addr[FCCL_HOST_MAX * 4], prefix[160];
    fccl_store_t *parent = o->store;
    if (!parent) {
        CHECK_GOTO(resolve_addr(o->init_method, addr, sizeof(addr)), rc, out);
        if (o->host_store && boot.rank == 0)
            CHECK_GOTO(maybe_host_store(addr), rc, out);
        fccl_store_opts_t so;
        fccl_store_opts_init(&so);
        so.addr = addr;
        so.timeout_ms = boot.timeout_ms;
        fccl_store_opts_env(&so, "FCCL_STORE"); /* FCCL_STORE_TLS_* */
        /* On etcd a job's keys live under a lease (its launcher's when
         * FCCL_STORE_LEASE is set), so a dead job leaves none behind. */
        if (etcd_is_addr(addr) && so.lease_ttl_s <= 0 && so.lease_id <= 0)
            so.lease_ttl_s = BOOT_LEASE_TTL_S;
        so.raw_keys = 1; /* for "init/"; the view below adds the "/" */
        CHECK_GOTO(fccl_store_connect(&so, &boot.base), rc, out);
        /* Join as PyTorch's clients do, so --wait-for-workers counts us.
         * Not on etcd: no server counts joins there, and N ranks adding
         * to one key at once is N optimistic transactions in a row (etcd
         * has no atomic add), which would make init O(N) per rank. */
        rc = etcd_is_addr(addr) ? FCCL_OK
                                : fccl_store_add(boot.base, "init/", 1, NULL);
        /* A reconnecting handle reports a lost ADD reply (not repeated):
         * the join may or may not be counted; init goes on. */
        if (so.reconnect && (rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO))
            rc = FCCL_OK;
        CHECK_GOTO(rc, rc, out);
        parent = boot.base;
    }
    snprintf(prefix, sizeof(prefix), "%sfccl/%s/", parent == boot.base ? "/" : "",
             boot.job);
    rc = fccl_store_prefixed(parent, prefix, &boot.store);
out:
    return rc < 0 ? fccl_err_wrap(rc, "init: store") : rc;
}

/* CPU time of the process or of this thread, for the init statistics. */
static uint64_t cpu_ns(clockid_t which)
{
    struct timespec ts;
    if (clock_gettime(which, &ts) < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct boot_init_stats last_stats;

const struct boot_init_stats *boot_last_init_stats(void)
{
    return &last_stats;
}

/* Phase boundaries t[0..BOOT_PH_N] (wall) and c[] (process CPU), in ns. */
static void keep_stats(const uint64_t *t, const uint64_t *c,
                       uint64_t fabric_cpu)
{
    for (int i = 0; i < BOOT_PH_N; i++) {
        last_stats.wall_ms[i] = (double)(t[i + 1] - t[i]) / 1e6;
        last_stats.cpu_ms[i] = (double)(c[i + 1] - c[i]) / 1e6;
    }
    last_stats.fabric_cpu_ms = (double)fabric_cpu / 1e6;
}

/* ---- transport start-up in a thread ---- */
struct tp_start {
    struct tp_opts opts;
    struct fccl_tp *tp;
    int rc;
    uint64_t cpu_ns; /* this thread's CPU time */
    char msg[512];
};

static void *tp_start_main(void *arg)
{
    struct tp_start *t = arg;
    uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    t->rc = tp_open(&t->opts, &t->tp);
    t->cpu_ns = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    if (t->rc < 0)
        snprintf(t->msg, sizeof(t->msg), "%s", fccl_last_error());
    return NULL;
}

/* Local peers only?  torchrun and fccl-run say so with LOCAL_WORLD_SIZE;
 * without it we must be ready for remote peers. */
static int need_network(void)
{
    int lws = -1;
    if (getenv("FCCL_FAKE_NODES"))
        return 1;
    if (env_int("LOCAL_WORLD_SIZE", &lws) < 0 || lws < boot.size)
        return 1;
    return 0;
}

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

static int make_record(struct fccl_tp *tp, void **out, size_t *outlen)
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

static void addr_key(char *out, size_t len, int rank)
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
static int name_missing(int rc)
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
static int exchange_records(void *rec, size_t reclen)
{
    char key[32], kl[32], kr[32];
    addr_key(key, sizeof(key), boot.rank);
    int rc = fccl_store_set(boot.store, key, rec, reclen);
    if (rc < 0 || (rc = keep_record(boot.rank, rec, reclen)) < 0 ||
        boot.size == 1)
        return rc;
    int nb[2] = {left_of(boot.rank), right_of(boot.rank)};
    size_t n = nb[0] == nb[1] ? 1 : 2;
    addr_key(kl, sizeof(kl), nb[0]);
    addr_key(kr, sizeof(kr), nb[1]);
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
static int record_lookup(void *arg, int r, const void **name, size_t *len,
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
static int ring_gather(void)
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

static int build_world(void)
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

static void free_records(void)
{
    for (int r = 0; boot.recs && r < boot.size; r++)
        free(boot.recs[r]);
    free(boot.recs);
    free(boot.rec_lens);
}

static void teardown(void)
{
    boot_groups_destroy_all();
    if (boot.world) {
        coll_group_fini(boot.world);
        boot_group_free(boot.world);
    }
    if (boot.tp)
        tp_close(boot.tp);
    fccl_store_close(boot.store);
    fccl_store_close(boot.base);
    fccl_server_free(boot.server); /* stops it first */
    free(boot.node_of);
    free_records(); /* after tp_close: the transport's lookups read them */
    memset(&boot, 0, sizeof(boot));
}

int fccl_init(const fccl_init_opts_t *opts, fccl_group_t **world)
{
    fccl_init_opts_t defaults;
    if (!opts) {
        fccl_init_opts_init(&defaults);
        opts = &defaults;
    }
    if (boot.initialized)
        return fccl_err(FCCL_ERR_STATE, "init: already initialized "
                                        "(call fccl_finalize first)");
    int rank, size, rc, lhost = 0;
    /* srun / mpirun: fill in the torchrun variables they imply. */
    if (!opts->store &&
        (rc = launcher_env_apply(!opts->init_method ||
                                     strcmp(opts->init_method, "env://") == 0,
                                 &lhost)) < 0)
        return rc;
    fccl_init_opts_t with_launcher = *opts;
    with_launcher.host_store |= lhost;
    opts = &with_launcher;
    if ((rc = resolve_args(opts, &rank, &size)) < 0)
        return rc;
    memset(&boot, 0, sizeof(boot));
    boot.rank = rank;
    boot.size = size;
    boot.timeout_ms = opts->timeout_ms > 0
                          ? opts->timeout_ms
                          : fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS);
    job_id(opts, boot.job, sizeof(boot.job));

    uint64_t t0 = fccl_now_ns(), t_store, t_tp, t_xchg = 0, t_ring, t_world;
    uint64_t c0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID), c_tp, c_xchg, c_ring,
             c_world;
    struct tp_start ts = {.opts = {.provider = opts->provider,
                                   .need_network = need_network()}};
    tp_env_defaults(); /* before the thread: setenv races with getenv */
    pthread_t th;
    int threaded = pthread_create(&th, NULL, tp_start_main, &ts) == 0;
    if (!threaded)
        tp_start_main(&ts);
    int src = open_store(opts);
    t_store = fccl_now_ns();
    if (threaded)
        pthread_join(th, NULL);
    t_tp = fccl_now_ns();
    c_tp = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    boot.tp = ts.tp;
    if (ts.rc < 0) {
        rc = fccl_err(ts.rc, "init: rank %d: transport: %s", rank, ts.msg);
        goto fail;
    }
    if ((rc = src) < 0)
        goto fail;

    void *rec = NULL;
    size_t reclen = 0;
    boot.recs = calloc((size_t)size, sizeof(void *));
    boot.rec_lens = calloc((size_t)size, sizeof(size_t));
    if (!boot.recs || !boot.rec_lens)
        rc = fccl_err(FCCL_ERR_NOMEM, "init: out of memory");
    topo_host_id(boot.hostid, sizeof(boot.hostid), rank, size);
    if (rc >= 0)
        rc = make_record(boot.tp, &rec, &reclen);
    /* One deadline for every wait for the others (the neighbours' records,
     * then the gather), from the moment this rank is ready: a slow local
     * start (loaded machine, sanitizers) does not eat into it, and every
     * rank waiting for one that never comes gives up timeout_ms after it
     * began to wait. */
    boot.deadline = fccl_deadline_ms(boot.timeout_ms);
    if (rc >= 0 && (rc = exchange_records(rec, reclen)) < 0)
        rc = name_missing(rc);
    free(rec);
    t_xchg = fccl_now_ns();
    c_xchg = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    if (rc >= 0)
        rc = tp_set_peers(boot.tp, size, rank, 0, record_lookup, NULL);
    if (rc >= 0 && (rc = ring_gather()) < 0)
        rc = name_missing(rc);
    t_ring = fccl_now_ns();
    c_ring = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    if (rc >= 0)
        rc = build_world();
    t_world = fccl_now_ns();
    c_world = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    if (rc < 0)
        goto fail;

    /* My neighbours have read my record once this returns. */
    if ((rc = fccl_barrier(boot.world, NULL)) < 0) {
        rc = fccl_err_wrap(rc, "init: first barrier");
        goto fail;
    }
    char key[32];
    addr_key(key, sizeof(key), rank);
    fccl_store_delete(boot.store, key, NULL);
    boot.initialized = 1;
    uint64_t t_end = fccl_now_ns(), c_end = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    keep_stats((uint64_t[]){t0, t_tp, t_xchg, t_ring, t_world, t_end},
               (uint64_t[]){c0, c_tp, c_xchg, c_ring, c_world, c_end},
               ts.cpu_ns);
    LOG_INFO("BOOT",
             "rank %d/%d up: %d node(s), local %d/%d, %s; ms: store %.1f, "
             "fabric %.1f (parallel), neighbours %.1f, ring %.1f, world %.1f, "
             "barrier %.1f; cpu ms: store+fabric %.2f (fabric thread %.2f), "
             "neighbours %.2f, ring %.2f, world %.2f, barrier %.2f",
             rank, size, boot.nnodes, boot.local_rank, boot.local_size,
             tp_provider_desc(boot.tp), (double)(t_store - t0) / 1e6,
             (double)(t_tp - t0) / 1e6, (double)(t_xchg - t_tp) / 1e6,
             (double)(t_ring - t_xchg) / 1e6, (double)(t_world - t_ring) / 1e6,
             (double)(t_end - t_world) / 1e6, (double)(c_tp - c0) / 1e6,
             (double)ts.cpu_ns / 1e6,
             (double)(c_xchg - c_tp) / 1e6, (double)(c_ring - c_xchg) / 1e6,
             (double)(c_world - c_ring) / 1e6, (double)(c_end - c_world) / 1e6);
    if (world)
        *world = boot.world;
    return FCCL_OK;
fail:
    LOG_DEBUG("BOOT", "init failed: %s", fccl_last_error());
    {
        /* Teardown may overwrite the message; keep the cause. */
        char msg[1024];
        snprintf(msg, sizeof(msg), "%s", fccl_last_error());
        teardown();
        return fccl_err(rc, "%s", msg);
    }
}

int fccl_finalize(void)
{
    if (!boot.initialized)
        return FCCL_OK;
    /* The last barrier keeps rank 0's in-process store (and everyone's
     * endpoints) up until every rank is done with them.  A world that
     * already failed skips it: its peers may be gone. */
    if (!atomic_load(&boot.world->err) && !atomic_load(&boot.world->stop))
        fccl_barrier(boot.world, NULL);
    if (boot.rank == 0)
        fccl_store_delete(boot.store, "ctx", NULL);
    teardown();
    return FCCL_OK;
}

int fccl_is_initialized(void) { return boot.initialized; }
fccl_group_t *fccl_world(void) { return boot.initialized ? boot.world : NULL; }
int fccl_get_rank(void) { return boot.initialized ? boot.rank : -1; }
int fccl_get_world_size(void) { return boot.initialized ? boot.size : -1; }

int fccl_get_topology(fccl_topology_t *out)
{
    if (!boot.initialized)
        return fccl_err(FCCL_ERR_STATE, "topology: not initialized");
    if (!out)
        return fccl_err(FCCL_ERR_INVALID, "topology: out is NULL");
    out->node_count = boot.nnodes;
    out->node_rank = boot.node_of[boot.rank];
    out->local_rank = boot.local_rank;
    out->local_size = boot.local_size;
    return FCCL_OK;
}

int fccl_node_of(int world_rank)
{
    if (!boot.initialized || world_rank < 0 || world_rank >= boot.size)
        return -1;
    return boot.node_of[world_rank];
}
