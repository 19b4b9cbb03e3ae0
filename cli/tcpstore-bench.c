/*
 * tcpstore-bench: load for any TCPStore server, either dialect.
 *
 * Throughput mode: K clients (threads, one connection each) run each op of
 * the list in turn (set, get, add, check) for a request count or a time,
 * and the aggregate ops/s and per-request latency percentiles are printed.
 * SET has no reply in the protocol, but fccl's client confirms each one
 * (SYNC on tcpstore-server, PING on a PyTorch server: docs/PROTOCOL-fccl.md),
 * so its latency is a round trip; each client still ends its SET run with
 * a round trip so the rate counts requests
 * the server has processed.
 *
 * Rendezvous mode: N simulated ranks, each on its own connection, publish
 * a 64-byte address, ADD a join counter and fetch every rank's address,
 * with N single-key gets (--plain: all a legacy server offers) or one
 * MULTI_GET.  Ranks are spread over a few threads; a thread first connects
 * and publishes all of its ranks, then fetches for each of them, so no
 * rank waits on one that its own thread has not run yet.  The time is from
 * the first connect to the last rank done.
 *
 * Output: a readable table, then one "csv," line per result.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "fccl/store.h"
#include "net.h"

enum op { B_SET, B_GET, B_ADD, B_CHECK, B_WAIT, B_NOPS };
static const char *const op_names[B_NOPS] = {"set", "get", "add", "check",
                                             "wait"};

struct cfg {
    const char *addr;
    char addrbuf[FCCL_HOST_MAX + 16];
    fccl_dialect_t dialect;
    int clients;
    int ops[B_NOPS];
    int nops;
    size_t value_bytes;
    uint64_t requests;   /* per op, over all clients; 0 with seconds */
    double seconds;
    int keys;            /* distinct keys per client */
    int64_t timeout_ms;
    int rendezvous;      /* ranks, 0 = throughput mode */
    int plain;
    int fccl_pattern;    /* --pattern fccl: fccl_init's requests */
    int server_pid;      /* --server-pid: report its CPU and RSS */
    int threads;
    const char *label;
};

/* ---- throughput mode ---- */

struct client {
    const struct cfg *cfg;
    int id;
    fccl_store_t *s;
    pthread_barrier_t *start;
    enum op op;
    uint64_t quota;     /* requests for this client, 0 = until `until` */
    uint64_t until_ns;
    uint64_t *lat;      /* latencies of this op, ns */
    size_t nlat, cap;
    uint64_t t_end;
    int err;
    char errmsg[512];
};

static int record(struct client *c, uint64_t ns)
{
    if (c->nlat == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 4096;
        uint64_t *p = realloc(c->lat, cap * sizeof(*p));
        if (!p)
            return -1;
        c->lat = p;
        c->cap = cap;
    }
    c->lat[c->nlat++] = ns;
    return 0;
}

static int one_op(struct client *c, const char *key, const char *val)
{
    const struct cfg *g = c->cfg;
    switch (c->op) {
    case B_SET:
        return fccl_store_set(c->s, key, val, g->value_bytes);
    case B_GET: {
        void *v;
        size_t len;
        int rc = fccl_store_get(c->s, key, &v, &len, -1);
        if (rc == FCCL_OK)
            free(v);
        return rc;
    }
    case B_ADD:
        return fccl_store_add(c->s, key, 1, NULL);
    case B_WAIT: { /* of a present key: the cost of the wait itself */
        const char *keys[1] = {key};
        return fccl_store_wait(c->s, keys, 1, -1);
    }
    default: {
        int all;
        const char *keys[1] = {key};
        return fccl_store_check(c->s, keys, 1, &all);
    }
    }
}

static void key_name(char *out, size_t len, const struct client *c,
                     uint64_t i)
{
    if (c->op == B_ADD)
        snprintf(out, len, "bench/%d/ctr%" PRIu64, c->id,
                 i % (uint64_t)c->cfg->keys);
    else
        snprintf(out, len, "bench/%d/k%" PRIu64, c->id,
                 i % (uint64_t)c->cfg->keys);
}

static void *client_run(void *arg)
{
    struct client *c = arg;
    char *val = malloc(c->cfg->value_bytes + 1);
    if (!val) {
        c->err = FCCL_ERR_NOMEM;
        snprintf(c->errmsg, sizeof(c->errmsg), "out of memory");
    } else {
        memset(val, 'v', c->cfg->value_bytes);
    }
    pthread_barrier_wait(c->start);
    for (uint64_t i = 0; val && !c->err; i++) {
        if (c->quota ? i >= c->quota : fccl_now_ns() >= c->until_ns)
            break;
        char key[64];
        key_name(key, sizeof(key), c, i);
        uint64_t t0 = fccl_now_ns();
        int rc = one_op(c, key, val);
        uint64_t t1 = fccl_now_ns();
        if (rc < 0) {
            c->err = rc;
            snprintf(c->errmsg, sizeof(c->errmsg), "%s", fccl_last_error());
        } else if (record(c, t1 - t0) < 0) {
            c->err = FCCL_ERR_NOMEM;
        }
    }
    /* SET has no reply: one round trip proves the server processed them
     * all, so set throughput counts completed requests, not sends. */
    if (c->op == B_SET && !c->err && fccl_store_num_keys(c->s, NULL) < 0) {
        c->err = FCCL_ERR_IO;
        snprintf(c->errmsg, sizeof(c->errmsg), "%s", fccl_last_error());
    }
    c->t_end = fccl_now_ns();
    free(val);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(const uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
    return (double)v[i] / 1e3;
}

static const char *dialect_name(fccl_dialect_t d)
{
    return d == FCCL_DIALECT_LEGACY ? "legacy" : "modern";
}

static int open_client(const struct cfg *g, fccl_store_t **s)
{
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = g->addr;
    o.dialect = g->dialect;
    o.timeout_ms = g->timeout_ms;
    fccl_store_opts_env(&o, "TCPSTORE"); /* TCPSTORE_TLS_* */
    int rc = fccl_store_connect(&o, s);
    if (rc < 0)
        fprintf(stderr, "tcpstore-bench: %s\n", fccl_last_error());
    return rc;
}

/* Keys that gets and checks find: one set per key before the timed run. */
static int prefill(struct client *c)
{
    char *val = calloc(1, c->cfg->value_bytes + 1);
    int rc = val ? FCCL_OK : FCCL_ERR_NOMEM;
    for (int i = 0; rc == FCCL_OK && i < c->cfg->keys; i++) {
        char key[64];
        snprintf(key, sizeof(key), "bench/%d/k%d", c->id, i);
        rc = fccl_store_set(c->s, key, val, c->cfg->value_bytes);
    }
    free(val);
    if (rc < 0)
        fprintf(stderr, "tcpstore-bench: prefill: %s\n", fccl_last_error());
    return rc;
}

/* Run one op on every client; print its row. */
static int run_op(const struct cfg *g, struct client *cl, enum op op)
{
    int k = g->clients;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)k + 1);
    pthread_t *th = calloc((size_t)k, sizeof(*th));
    uint64_t per = g->requests / (uint64_t)k, extra = g->requests % (uint64_t)k;
    for (int i = 0; i < k; i++) {
        cl[i].op = op;
        cl[i].start = &start;
        cl[i].nlat = 0;
        cl[i].quota = g->requests ? per + ((uint64_t)i < extra) : 0;
        pthread_create(&th[i], NULL, client_run, &cl[i]);
    }
    uint64_t t0 = fccl_now_ns();
    for (int i = 0; i < k; i++)
        cl[i].until_ns = t0 + (uint64_t)(g->seconds * 1e9);
    pthread_barrier_wait(&start);
    t0 = fccl_now_ns();
    uint64_t t_end = t0;
    size_t total = 0;
    int err = 0;
    for (int i = 0; i < k; i++) {
        pthread_join(th[i], NULL);
        t_end = cl[i].t_end > t_end ? cl[i].t_end : t_end;
        total += cl[i].nlat;
        if (cl[i].err && !err) {
            err = cl[i].err;
            fprintf(stderr, "tcpstore-bench: %s: client %d: %s\n",
                    op_names[op], i, cl[i].errmsg);
        }
    }
    free(th);
    pthread_barrier_destroy(&start);
    uint64_t *all = malloc((total ? total : 1) * sizeof(*all));
    if (!all)
        return FCCL_ERR_NOMEM;
    size_t n = 0;
    for (int i = 0; i < k; i++) {
        memcpy(all + n, cl[i].lat, cl[i].nlat * sizeof(*all));
        n += cl[i].nlat;
    }
    qsort(all, n, sizeof(*all), cmp_u64);
    double secs = (double)(t_end - t0) / 1e9;
    double ops = secs > 0 ? (double)n / secs : 0;
    double p50 = pct(all, n, 50), p99 = pct(all, n, 99);
    printf("%-6s %10zu %9.3f %12.0f %9.1f %9.1f\n", op_names[op], n, secs,
           ops, p50, p99);
    printf("csv,%s,%s,%s,%d,%zu,%s,%zu,%.4f,%.0f,%.1f,%.1f\n", g->label,
           g->addr, dialect_name(g->dialect), k, g->value_bytes, op_names[op],
           n, secs, ops, p50, p99);
    fflush(stdout);
    free(all);
    return err;
}

static int throughput(const struct cfg *g)
{
    int k = g->clients, rc = FCCL_OK;
    struct client *cl = calloc((size_t)k, sizeof(*cl));
    if (!cl)
        return FCCL_ERR_NOMEM;
    for (int i = 0; i < k && rc == FCCL_OK; i++) {
        cl[i].cfg = g;
        cl[i].id = i;
        rc = open_client(g, &cl[i].s);
        if (rc == FCCL_OK)
            rc = prefill(&cl[i]);
    }
    if (rc == FCCL_OK) {
        printf("tcpstore-bench: %s (%s), %d clients, %zu-byte values, ",
               g->addr, dialect_name(g->dialect), k, g->value_bytes);
        if (g->requests)
            printf("%" PRIu64 " requests per op\n", g->requests);
        else
            printf("%.1f s per op\n", g->seconds);
        printf("%-6s %10s %9s %12s %9s %9s\n", "op", "requests", "seconds",
               "ops/s", "p50_us", "p99_us");
        printf("csv,label,addr,dialect,clients,bytes,op,requests,seconds,"
               "ops_per_s,p50_us,p99_us\n");
    }
    for (int i = 0; i < g->nops && rc == FCCL_OK; i++)
        rc = run_op(g, cl, (enum op)g->ops[i]);
    for (int i = 0; i < k; i++) {
        fccl_store_close(cl[i].s);
        free(cl[i].lat);
    }
    free(cl);
    return rc;
}

/* ---- rendezvous mode ---- */

/* What a rendezvous worker thread leaves: its finish time and first
 * error. */
struct wres {
    uint64_t t_done;
    int err;
    char errmsg[512];
};

/* A worker's end: the time now and, if rc < 0, the error (`wrong`, when
 * the server answered with the wrong data). */
static void wres_done(struct wres *r, int rc, const char *wrong)
{
    if (rc < 0) {
        r->err = rc;
        snprintf(r->errmsg, sizeof(r->errmsg), "%s",
                 rc == FCCL_ERR_PROTOCOL ? wrong : fccl_last_error());
    }
    r->t_done = fccl_now_ns();
}

/* Join the t threads th of the workers w (t elements of `size` bytes,
 * each starting with its struct wres): the latest finish into *t_end (no
 * earlier than its value), and the first error, printed, or 0. */
static int join_workers(pthread_t *th, const void *w, size_t size, int t,
                        uint64_t *t_end)
{
    int err = 0;
    for (int i = 0; i < t; i++) {
        pthread_join(th[i], NULL);
        const struct wres *r =
            (const struct wres *)((const char *)w + (size_t)i * size);
        if (r->t_done > *t_end)
            *t_end = r->t_done;
        if (r->err && !err) {
            err = r->err;
            fprintf(stderr, "tcpstore-bench: rendezvous: %s\n", r->errmsg);
        }
    }
    return err;
}

struct rdzv {
    struct wres res; /* first: join_workers reads it */
    const struct cfg *g;
    int first, count;   /* ranks [first, first+count) */
    fccl_store_t **s;
};

static void rank_key(char *out, size_t len, int r)
{
    snprintf(out, len, "rdzv/addr/%d", r);
}

static int rank_publish(struct rdzv *w, int r)
{
    const struct cfg *g = w->g;
    fccl_store_t **s = &w->s[r - w->first];
    int rc = open_client(g, s);
    if (rc < 0)
        return rc;
    char key[48], addr[64];
    memset(addr, 0, sizeof(addr));
    snprintf(addr, sizeof(addr), "rank %d at 10.0.%d.%d:%d", r, r / 250,
             r % 250, 20000 + r);
    rank_key(key, sizeof(key), r);
    if ((rc = fccl_store_set(*s, key, addr, sizeof(addr))) < 0)
        return rc;
    return fccl_store_add(*s, "rdzv/joined", 1, NULL);
}

static int check_addr(int r, const void *v, size_t len)
{
    char want[64];
    memset(want, 0, sizeof(want));
    snprintf(want, sizeof(want), "rank %d at 10.0.%d.%d:%d", r, r / 250,
             r % 250, 20000 + r);
    return len == sizeof(want) && memcmp(v, want, len) == 0 ? 0 : -1;
}

static int rank_fetch_plain(fccl_store_t *s, int n)
{
    for (int j = 0; j < n; j++) {
        char key[48];
        void *v;
        size_t len;
        rank_key(key, sizeof(key), j);
        int rc = fccl_store_get(s, key, &v, &len, -1);
        if (rc < 0)
            return rc;
        int bad = check_addr(j, v, len);
        free(v);
        if (bad)
            return FCCL_ERR_PROTOCOL;
    }
    return FCCL_OK;
}

static int rank_fetch_multi(fccl_store_t *s, int n, char **keys, void **vals,
                            size_t *lens)
{
    int rc = fccl_store_multi_get(s, (const char *const *)keys, (size_t)n,
                                  vals, lens, -1);
    for (int j = 0; j < n; j++) {
        if (rc == FCCL_OK && check_addr(j, vals[j], lens[j]) < 0)
            rc = FCCL_ERR_PROTOCOL;
        free(vals[j]);
    }
    return rc;
}

static void *rdzv_run(void *arg)
{
    struct rdzv *w = arg;
    const struct cfg *g = w->g;
    int n = g->rendezvous, rc = FCCL_OK;
    char **keys = calloc((size_t)n, sizeof(*keys));
    void **vals = calloc((size_t)n, sizeof(*vals));
    size_t *lens = calloc((size_t)n, sizeof(*lens));
    for (int j = 0; keys && j < n; j++) {
        keys[j] = malloc(48);
        if (keys[j])
            rank_key(keys[j], 48, j);
    }
    for (int r = w->first; rc == FCCL_OK && r < w->first + w->count; r++)
        rc = rank_publish(w, r);
    for (int i = 0; rc == FCCL_OK && i < w->count; i++)
        rc = g->plain ? rank_fetch_plain(w->s[i], n)
                      : rank_fetch_multi(w->s[i], n, keys, vals, lens);
    wres_done(&w->res, rc, "wrong address value fetched");
    for (int j = 0; keys && j < n; j++)
        free(keys[j]);
    free(keys);
    free(vals);
    free(lens);
    return NULL;
}

static int rendezvous(const struct cfg *g)
{
    int n = g->rendezvous, t = g->threads > n ? n : g->threads;
    struct rdzv *w = calloc((size_t)t, sizeof(*w));
    fccl_store_t **conns = calloc((size_t)n, sizeof(*conns));
    pthread_t *th = calloc((size_t)t, sizeof(*th));
    if (!w || !conns || !th)
        return FCCL_ERR_NOMEM;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    uint64_t t0 = fccl_now_ns();
    for (int i = 0, r = 0; i < t; i++) {
        w[i].g = g;
        w[i].first = r;
        w[i].count = n / t + (i < n % t);
        w[i].s = conns + r;
        r += w[i].count;
        pthread_create(&th[i], &attr, rdzv_run, &w[i]);
    }
    uint64_t t_end = t0;
    int err = join_workers(th, w, sizeof(*w), t, &t_end);
    double secs = (double)(t_end - t0) / 1e9;
    const char *mode = g->plain ? "plain" : "multi_get";
    uint64_t reqs = (uint64_t)n * (g->plain ? (uint64_t)n + 2 : 3);
    if (!err) {
        printf("tcpstore-bench: rendezvous of %d ranks (%s, %d threads) on "
               "%s (%s): %.3f s\n",
               n, mode, t, g->addr, dialect_name(g->dialect), secs);
        printf("csv,label,addr,dialect,ranks,mode,threads,seconds,calls\n");
        printf("csv,%s,%s,%s,%d,%s,%d,%.4f,%" PRIu64 "\n", g->label, g->addr,
               dialect_name(g->dialect), n, mode, t, secs, reqs);
    }
    for (int i = 0; i < n; i++)
        fccl_store_close(conns[i]);
    pthread_attr_destroy(&attr);
    free(th);
    free(conns);
    free(w);
    return err;
}

/* ---- rendezvous, pattern fccl: exactly fccl_init's store requests ----
 *
 * Each simulated rank: SET fccl/<job>/addr/<r> (a 256-byte record, the
 * size of a real one), MULTI_GET of its two ring neighbours' records
 * (blocking until both exist), then, after a barrier of all ranks (the
 * first world barrier, which in fccl runs over the fabric), DELETE of its
 * own record.  O(1) requests and bytes per rank.  Connections: one per
 * rank while the open-file limit allows, else ranks share them (each
 * connection belongs to one thread, used by one rank at a time). */

#define FP_REC 256

struct fpw {
    struct wres res; /* first: join_workers reads it */
    const struct cfg *g;
    int first, count, nconn;
    fccl_store_t **s;
    pthread_barrier_t *bar;
};

static void fp_key(char *out, size_t len, int r)
{
    snprintf(out, len, "fccl/bench/addr/%d", r);
}

static void fp_rec(unsigned char *rec, int r)
{
    for (int i = 0; i < FP_REC; i++)
        rec[i] = (unsigned char)(r * 31 + i);
}

static int fp_fetch(fccl_store_t *s, int r, int n)
{
    int nb[2] = {(r + n - 1) % n, (r + 1) % n};
    size_t k = nb[0] == nb[1] ? 1 : 2;
    char kb[2][48];
    const char *keys[2] = {kb[0], kb[1]};
    void *vals[2] = {NULL, NULL};
    size_t lens[2] = {0, 0};
    fp_key(kb[0], sizeof(kb[0]), nb[0]);
    fp_key(kb[1], sizeof(kb[1]), nb[1]);
    int rc = fccl_store_multi_get(s, keys, k, vals, lens, -1);
    for (size_t i = 0; i < k && rc == FCCL_OK; i++) {
        unsigned char want[FP_REC];
        fp_rec(want, nb[i]);
        if (lens[i] != FP_REC || memcmp(vals[i], want, FP_REC) != 0)
            rc = FCCL_ERR_PROTOCOL;
    }
    free(vals[0]);
    free(vals[1]);
    return rc;
}

static void *fp_run(void *arg)
{
    struct fpw *w = arg;
    int n = w->g->rendezvous, rc = FCCL_OK;
    unsigned char rec[FP_REC];
    char key[48];
    for (int i = 0; i < w->nconn && rc == FCCL_OK; i++)
        rc = open_client(w->g, &w->s[i]);
    for (int i = 0; i < w->count && rc == FCCL_OK; i++) {
        int r = w->first + i;
        fp_rec(rec, r);
        fp_key(key, sizeof(key), r);
        rc = fccl_store_set(w->s[i % w->nconn], key, rec, FP_REC);
    }
    for (int i = 0; i < w->count && rc == FCCL_OK; i++)
        rc = fp_fetch(w->s[i % w->nconn], w->first + i, n);
    pthread_barrier_wait(w->bar); /* everyone has read its neighbours */
    for (int i = 0; i < w->count && rc == FCCL_OK; i++) {
        fp_key(key, sizeof(key), w->first + i);
        rc = fccl_store_delete(w->s[i % w->nconn], key, NULL);
    }
    wres_done(&w->res, rc, "wrong record fetched");
    return NULL;
}

/* CPU seconds (user + system) and RSS/peak RSS (KiB) of a process. */
static int proc_usage(int pid, double *cpu, long *rss, long *hwm)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[1024];
    size_t k = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[k] = '\0';
    const char *p = strrchr(buf, ')'); /* comm may hold spaces */
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
                            "%lu %lu", &ut, &st) != 2)
        return -1;
    *cpu = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (!(f = fopen(path, "r")))
        return -1;
    while (fgets(line, sizeof(line), f)) {
        sscanf(line, "VmRSS: %ld", rss);
        sscanf(line, "VmHWM: %ld", hwm);
    }
    fclose(f);
    return 0;
}

static int rendezvous_fccl(const struct cfg *g)
{
    int n = g->rendezvous, t = g->threads > n ? n : g->threads;
    struct rlimit rl = {0, 0};
    getrlimit(RLIMIT_NOFILE, &rl);
    long budget = (long)rl.rlim_cur - 64; /* stdio, the runtime */
    if (budget < t)
        budget = t;
    struct fpw *w = calloc((size_t)t, sizeof(*w));
    fccl_store_t **conns = calloc((size_t)n, sizeof(*conns));
    pthread_t *th = calloc((size_t)t, sizeof(*th));
    pthread_barrier_t bar;
    if (!w || !conns || !th || pthread_barrier_init(&bar, NULL, (unsigned)t))
        return FCCL_ERR_NOMEM;
    double cpu0 = 0, cpu1 = 0;
    long rss = 0, hwm = 0;
    if (g->server_pid && proc_usage(g->server_pid, &cpu0, &rss, &hwm) < 0)
        fprintf(stderr, "tcpstore-bench: cannot read /proc/%d\n",
                g->server_pid);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    uint64_t t0 = fccl_now_ns();
    int total_conns = 0;
    for (int i = 0, r = 0; i < t; i++) {
        w[i].g = g;
        w[i].first = r;
        w[i].count = n / t + (i < n % t);
        long per = budget / t;
        w[i].nconn = w[i].count < per ? w[i].count : (int)(per > 0 ? per : 1);
        w[i].s = conns + r;
        w[i].bar = &bar;
        total_conns += w[i].nconn;
        r += w[i].count;
        pthread_create(&th[i], &attr, fp_run, &w[i]);
    }
    uint64_t t_end = t0;
    int err = join_workers(th, w, sizeof(*w), t, &t_end);
    double secs = (double)(t_end - t0) / 1e9;
    if (g->server_pid)
        proc_usage(g->server_pid, &cpu1, &rss, &hwm);
    uint64_t reqs = (uint64_t)n * 3;
    if (!err) {
        printf("tcpstore-bench: rendezvous of %d ranks (fccl: set, "
               "multi_get of 2, delete; %d connections, %d threads) on %s: "
               "%.3f s",
               n, total_conns, t, g->addr, secs);
        if (g->server_pid)
            printf("; server %.2f CPU s, RSS %ld KiB (peak %ld)",
                   cpu1 - cpu0, rss, hwm);
        printf("\ncsv,label,addr,dialect,ranks,mode,threads,seconds,calls,"
               "connections,server_cpu_s,server_rss_kib,server_peak_kib\n");
        printf("csv,%s,%s,%s,%d,fccl,%d,%.4f,%" PRIu64 ",%d,%.2f,%ld,%ld\n",
               g->label, g->addr, dialect_name(g->dialect), n, t, secs, reqs,
               total_conns, cpu1 - cpu0, rss, hwm);
    }
    for (int i = 0; i < t; i++)
        for (int c = 0; c < w[i].nconn; c++)
            fccl_store_close(w[i].s[c]);
    pthread_attr_destroy(&attr);
    pthread_barrier_destroy(&bar);
    free(th);
    free(conns);
    free(w);
    return err;
}

/* ---- options ---- */

static void usage(FILE *f)
{
    fputs(
        "usage: tcpstore-bench [OPTIONS]\n"
        "  --addr HOST:PORT   server (default TCPSTORE_ADDR, else "
        "MASTER_ADDR:MASTER_PORT,\n"
        "                     else 127.0.0.1:29500)\n"
        "  --dialect D        modern (default) or legacy (PyTorch <= 2.0 "
        "servers)\n"
        "  -c K               clients, one connection each (default 1)\n"
        "  -t OPS             comma list of set,get,add,check,wait (default "
        "set,get)\n"
        "  -d BYTES           value size (default 100)\n"
        "  -n N               requests per op over all clients (default "
        "100000)\n"
        "  -s SEC             run each op for SEC seconds instead of -n\n"
        "  -r KEYS            distinct keys per client (default 1)\n"
        "  --timeout SEC      per-call timeout (default 300)\n"
        "  --rendezvous N     simulate N ranks: set a 64-byte address, ADD a "
        "counter,\n"
        "                     fetch every rank's address; time first connect "
        "to last done\n"
        "  --plain            fetch with N single-key gets (legacy servers) "
        "instead of\n"
        "                     one MULTI_GET\n"
        "  --pattern P        rendezvous pattern: all (default: every rank "
        "fetches\n"
        "                     every address) or fccl (fccl_init's: set, "
        "multi_get of\n"
        "                     the 2 ring neighbours, barrier, delete)\n"
        "  --server-pid PID   report the server's CPU seconds and RSS "
        "(from /proc)\n"
        "  --threads T        threads driving the ranks (default 32)\n"
        "  --label NAME       first field of the csv lines\n"
        "  -h, --help         this text\n"
        "  --version          print the version and exit\n"
        "Prints a table and one 'csv,...' line per result.\n",
        f);
}

static int parse_ops(struct cfg *g, const char *list)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", list);
    g->nops = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        int found = -1;
        for (int i = 0; i < B_NOPS; i++)
            if (!strcmp(t, op_names[i]))
                found = i;
        if (found < 0 || g->nops == B_NOPS) {
            fprintf(stderr, "tcpstore-bench: unknown op '%s'\n", t);
            return -1;
        }
        g->ops[g->nops++] = found;
    }
    return g->nops ? 0 : -1;
}

static void default_addr(struct cfg *g)
{
    const char *a = getenv("TCPSTORE_ADDR"), *ma = getenv("MASTER_ADDR"),
               *mp = getenv("MASTER_PORT");
    if (a && *a) {
        g->addr = a;
    } else if (ma && *ma) {
        fccl_addr_format(g->addrbuf, sizeof(g->addrbuf), ma,
                         mp && *mp ? atoi(mp) : 29500);
        g->addr = g->addrbuf;
    } else {
        g->addr = "127.0.0.1:29500";
    }
}

static int parse(struct cfg *g, int argc, char **argv)
{
    static const struct option lo[] = {
        {"addr", required_argument, 0, 'A'},
        {"dialect", required_argument, 0, 'D'},
        {"timeout", required_argument, 0, 'T'},
        {"rendezvous", required_argument, 0, 'R'},
        {"plain", no_argument, 0, 'P'},
        {"threads", required_argument, 0, 'H'},
        {"pattern", required_argument, 0, 'p'},
        {"server-pid", required_argument, 0, 'S'},
        {"label", required_argument, 0, 'L'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "c:t:d:n:s:r:h", lo, NULL)) != -1) {
        switch (o) {
        case 'A': g->addr = optarg; break;
        case 'D':
            if (strcmp(optarg, "modern") && strcmp(optarg, "legacy"))
                return -1;
            g->dialect = strcmp(optarg, "legacy") ? FCCL_DIALECT_MODERN
                                                  : FCCL_DIALECT_LEGACY;
            break;
        case 'T': g->timeout_ms = fccl_parse_seconds_ms(optarg); break;
        case 'R': g->rendezvous = atoi(optarg); break;
        case 'P': g->plain = 1; break;
        case 'H': g->threads = atoi(optarg); break;
        case 'p':
            if (strcmp(optarg, "fccl") && strcmp(optarg, "all"))
                return -1;
            g->fccl_pattern = strcmp(optarg, "fccl") == 0;
            break;
        case 'S': g->server_pid = atoi(optarg); break;
        case 'L': g->label = optarg; break;
        case 'c': g->clients = atoi(optarg); break;
        case 't':
            if (parse_ops(g, optarg) < 0)
                return -1;
            break;
        case 'd': g->value_bytes = (size_t)strtoull(optarg, NULL, 10); break;
        case 'n': g->requests = strtoull(optarg, NULL, 10); break;
        case 's':
            g->seconds = atof(optarg);
            g->requests = 0;
            break;
        case 'r': g->keys = atoi(optarg); break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("tcpstore-bench (fccl) %s\n", fccl_version()); exit(0);
        default: return -1;
        }
    }
    if (optind != argc || g->clients < 1 || g->keys < 1 ||
        g->timeout_ms <= 0 || g->rendezvous < 0 || g->threads < 1 ||
        (!g->requests && g->seconds <= 0))
        return -1;
    return 0;
}

int main(int argc, char **argv)
{
    struct cfg g = {.clients = 1, .ops = {B_SET, B_GET}, .nops = 2,
                    .value_bytes = 100, .requests = 100000, .keys = 1,
                    .timeout_ms = FCCL_DEFAULT_TIMEOUT_MS, .threads = 32,
                    .label = "run", .dialect = FCCL_DIALECT_MODERN};
    default_addr(&g);
    if (parse(&g, argc, argv) < 0) {
        fputs("tcpstore-bench: bad arguments\n", stderr);
        usage(stderr);
        return 2;
    }
    if (g.rendezvous && !g.plain && g.dialect == FCCL_DIALECT_LEGACY) {
        fputs("tcpstore-bench: MULTI_GET needs the modern dialect; use "
              "--plain for legacy servers\n",
              stderr);
        return 2;
    }
    /* One socket per simulated rank or client. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    int rc = !g.rendezvous ? throughput(&g)
             : g.fccl_pattern ? rendezvous_fccl(&g)
                              : rendezvous(&g);
    return rc < 0 ? 1 : 0;
}
