/*
 * Process-group init: from a store address to the world group.
 *
 * Store traffic per rank is O(1) requests and bytes, whatever the world
 * size (NCCL's bootstrap does the same): one SET of this rank's record
 * (host identity + endpoint names), one MULTI_GET of its two ring
 * neighbours' records (the server answers once both exist), and one
 * DELETE of its own record after the first barrier proves the neighbours
 * have read it.  Every other record travels over the fabric, in log2(n)
 * rounds of a window-doubling gather between ranks (boot_ring_gather), so the
 * store serves O(n) bytes per job instead of O(n^2).  The transport
 * resolves a network peer (fi_av_insert) only when it is first used, from
 * the record table kept here until finalize; the ranks on this host it
 * resolves in boot_build_world, before the first barrier (shm needs to know a
 * sender before its messages come: tp_set_local).  The libfabric start-up (the
 * slow part: ~0.2 s in fi_getinfo and fi_enable) runs in a thread in
 * parallel with connecting to the store.
 *
 * One deadline bounds init's waits for the others.  A rank that never
 * arrives makes its ring neighbours' store fetch time out and the others'
 * gather fail or time out; each then asks the store once which records
 * exist and names the ranks that never published theirs (boot_name_missing).
 *
 * The records, their ring gather and the world built from them are in
 * records.c; this file is the sequence, the store and the public calls.
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

/* A process taking the place of a rank the others left out (fccl-run
 * --respawn sets FCCL_REJOIN): it joins through their fccl_group_grow. */
static int wants_rejoin(const fccl_init_opts_t *o)
{
    const char *e = getenv("FCCL_REJOIN");
    return o->rejoin > 0 || (e && *e && strcmp(e, "0") != 0);
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
    boot_free_records(); /* after tp_close: the transport's lookups read them */
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
        rc = boot_make_record(boot.tp, &rec, &reclen);
    /* One deadline for every wait for the others (the neighbours' records,
     * then the gather), from the moment this rank is ready: a slow local
     * start (loaded machine, sanitizers) does not eat into it, and every
     * rank waiting for one that never comes gives up timeout_ms after it
     * began to wait. */
    boot.deadline = fccl_deadline_ms(boot.timeout_ms);
    int rejoin = wants_rejoin(opts);
    if (rc >= 0 && rejoin)
        rc = boot_rejoin(rec, reclen); /* grow.c: the members take us in */
    else if (rc >= 0 && (rc = boot_exchange_records(rec, reclen)) < 0)
        rc = boot_name_missing(rc);
    free(rec);
    t_xchg = fccl_now_ns();
    c_xchg = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    if (rc >= 0 && !rejoin)
        rc = tp_set_peers(boot.tp, size, rank, 0, boot_record_lookup, NULL);
    if (rc >= 0 && !rejoin && (rc = boot_ring_gather()) < 0)
        rc = boot_name_missing(rc);
    t_ring = fccl_now_ns();
    c_ring = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
    if (rc >= 0 && !rejoin)
        rc = boot_build_world();
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
    boot_addr_key(key, sizeof(key), rank);
    if (!rejoin)
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
     * already failed, was revoked, or lost ranks to a shrink skips it:
     * its peers may be gone. */
    int excluded = 0; /* a shrink left ranks out: they may be gone */
    for (int r = 0; r < boot.size && !excluded; r++)
        excluded = tp_rank_excluded(boot.tp, r);
    if (!atomic_load(&boot.world->err) && !atomic_load(&boot.world->stop) &&
        !excluded && !boot.regrown)
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
