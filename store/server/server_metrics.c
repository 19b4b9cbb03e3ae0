/*
 * What the status port says about the server (server_http.c serves it):
 *   /metrics      the Prometheus text exposition (format 0.0.4) of the
 *                 counters the loop keeps (plain increments on the hot
 *                 path) and of gauges computed here;
 *   /status.json  what the status page shows a person: workers joined
 *                 against the world size, clients by address, keys by
 *                 prefix with their sizes, parked barriers.
 * Both are made on the loop's thread when asked for, so they see one
 * consistent moment.  The walks (connections, the table for prefixes)
 * cost O(connections + keys) per request; the prefix summary is kept for
 * a second so that a page refreshing every second costs one walk a second.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "clock.h"
#include "conn_type.h"
#include "server_int.h"

static void putf(struct codec_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void putf(struct codec_buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        codec_put_bytes(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n
                                                        : sizeof(tmp) - 1);
}

/* ---- figures both outputs need ---- */

struct conn_sums {
    uint64_t waiting, paused, tls, companions;
};

static struct conn_sums conn_sums(const struct store_server *s)
{
    struct conn_sums t = {0, 0, 0, 0};
    for (const struct store_conn *c = s->conns; c; c = c->next) {
        t.waiting += c->wait != NULL;
        t.paused += c->paused;
        t.tls += (uint64_t)c->ct->encrypted;
        t.companions += c->companion;
    }
    return t;
}

static uint64_t parked_barriers(const struct store_server *s)
{
    uint64_t n = 0;
    for (const struct store_conn *c = s->conns; c; c = c->next)
        n += c->bar != NULL;
    return n;
}

static uint64_t bytes_in(const struct store_server *s)
{
    uint64_t n = 0;
    for (int op = 0; op < OP__COUNT; op++)
        n += s->st.bytes[op];
    return n;
}

/* A name per enum value, as server_quiet.c's table: tables repeat. */
static const char *const REFUSE_NAMES[STORE_REFUSE__COUNT] = {
    [STORE_REFUSE_LIMIT] = "limit",
    [STORE_REFUSE_NOMEM] = "nomem",
    [STORE_REFUSE_READ_ONLY] = "read_only",
    [STORE_REFUSE_AUTH] = "auth",
    [STORE_REFUSE_JOURNAL] = "journal",
};

/* ---- /metrics ---- */

static void head(struct codec_buf *b, const char *name, const char *type,
                 const char *help)
{
    putf(b, "# HELP fccl_store_%s %s\n# TYPE fccl_store_%s %s\n", name, help,
         name, type);
}

static void metric(struct codec_buf *b, const char *name, const char *type,
                   const char *help, uint64_t v)
{
    head(b, name, type, help);
    putf(b, "fccl_store_%s %llu\n", name, (unsigned long long)v);
}

#define GAUGE(b, n, h, v) metric(b, n, "gauge", h, (uint64_t)(v))
#define COUNTER(b, n, h, v) metric(b, n, "counter", h, (uint64_t)(v))

static void per_type(struct store_server *s, struct codec_buf *b)
{
    head(b, "requests_total", "counter", "Requests served, by type.");
    for (int op = 0; op < OP__COUNT; op++)
        putf(b, "fccl_store_requests_total{type=\"%s\"} %llu\n",
             codec_op_name((enum store_op)op),
             (unsigned long long)s->st.reqs[op]);
    head(b, "request_bytes_total", "counter",
         "Bytes of requests received, by type.");
    for (int op = 0; op < OP__COUNT; op++)
        putf(b, "fccl_store_request_bytes_total{type=\"%s\"} %llu\n",
             codec_op_name((enum store_op)op),
             (unsigned long long)s->st.bytes[op]);
}

static void connections(struct store_server *s, struct codec_buf *b)
{
    struct conn_sums t = conn_sums(s);
    GAUGE(b, "connections", "Open client connections.", s->nconns);
    GAUGE(b, "connections_tls", "Open connections over TLS.", t.tls);
    GAUGE(b, "connections_paused",
          "Connections not read because their replies pile up.", t.paused);
    GAUGE(b, "connections_silent_kept",
          "Silent connections kept past the handshake timeout as a "
          "PyTorch client's second connection.", t.companions);
    GAUGE(b, "connections_max", "The connection limit.", s->cfg.max_conns);
    COUNTER(b, "connections_accepted_total", "Connections accepted.",
            s->st.conns_total);
    COUNTER(b, "connections_refused_total",
            "Connections refused at accept (limits).", s->st.conns_refused);
    COUNTER(b, "connections_evicted_total",
            "Idle connections closed to make room.", s->st.conns_evicted);
    COUNTER(b, "connections_timed_out_total",
            "Connections closed for a stalled request or TLS handshake.",
            s->st.conns_timed_out);
    GAUGE(b, "waiters", "Connections with a WAIT parked.", t.waiting);
    GAUGE(b, "barriers_parked", "Connections with a BARRIER parked.",
          parked_barriers(s));
}

static void table(struct store_server *s, struct codec_buf *b)
{
    GAUGE(b, "keys", "Keys with a value.", s->kv.nkeys);
    GAUGE(b, "entries", "Table entries (keys, queues, waited-for names).",
          s->kv.nentries);
    GAUGE(b, "stored_bytes", "Bytes of stored keys, values and queue items.",
          s->kv.bytes);
    GAUGE(b, "held_request_bytes", "Bytes held for unfinished requests.",
          s->held);
    GAUGE(b, "queued_reply_bytes", "Bytes of replies not yet sent.",
          s->out_held);
    GAUGE(b, "bytes_limit", "The limit on stored, held and queued bytes.",
          s->cfg.max_total_bytes);
    COUNTER(b, "received_bytes_total", "Bytes of requests received.",
            bytes_in(s));
    COUNTER(b, "sent_bytes_total", "Bytes of replies sent or queued.",
            s->st.bytes_out);
    head(b, "writes_refused_total", "counter",
         "Writes refused, by reason (limit, nomem, read_only, auth, "
         "journal).");
    for (int r = 0; r < STORE_REFUSE__COUNT; r++)
        putf(b, "fccl_store_writes_refused_total{reason=\"%s\"} %llu\n",
             REFUSE_NAMES[r], (unsigned long long)s->st.refused[r]);
    COUNTER(b, "replies_refused_total",
            "MULTI_GET and key-list replies over the reply budget.",
            s->st.refused_replies);
}

static void journal(struct store_server *s, struct codec_buf *b)
{
    int on = s->has_journal;
    GAUGE(b, "journal_enabled", "1 when the server keeps a journal.", on);
    GAUGE(b, "journal_failed",
          "1 while the journal refuses writes (a write or fdatasync "
          "failed).", on && s->jrn.failed);
    GAUGE(b, "journal_compacting", "1 while a compaction runs.",
          on && s->jrn.child > 0);
    GAUGE(b, "journal_bytes", "Bytes in the journal file.",
          on ? s->jrn.size : 0);
    COUNTER(b, "journal_syncs_total", "fdatasync calls on the journal.",
            on ? s->jrn.syncs : 0);
    COUNTER(b, "journal_compactions_total", "Journal rewrites.",
            on ? s->jrn.compactions : 0);
    head(b, "journal_sync_seconds", "histogram",
         "Time of the fdatasync calls that acknowledge writes.");
    uint64_t cum = 0;
    for (int i = 0; i < STORE_JSYNC_BUCKETS; i++) {
        cum += s->st.jsync_hist[i];
        putf(b, "fccl_store_journal_sync_seconds_bucket{le=\"%g\"} %llu\n",
             (double)store_jsync_bounds_us[i] / 1e6, (unsigned long long)cum);
    }
    cum += s->st.jsync_hist[STORE_JSYNC_BUCKETS];
    putf(b, "fccl_store_journal_sync_seconds_bucket{le=\"+Inf\"} %llu\n",
         (unsigned long long)cum);
    putf(b, "fccl_store_journal_sync_seconds_sum %.9f\n",
         (double)s->st.jsync_ns / 1e9);
    putf(b, "fccl_store_journal_sync_seconds_count %llu\n",
         (unsigned long long)cum);
}

void store_metrics_text(struct store_server *s, struct codec_buf *b)
{
    GAUGE(b, "workers_joined", "Workers joined (the init/ counter).",
          s->joined > 0 ? s->joined : 0);
    GAUGE(b, "world_size", "Workers expected (world-size; 0: not set).",
          s->cfg.world_size);
    GAUGE(b, "uptime_seconds", "Seconds since the server was made.",
          (fccl_now_ns() - s->started_ns) / 1000000000u);
    per_type(s, b);
    connections(s, b);
    table(s, b);
    journal(s, b);
    head(b, "loop_turn_max_seconds", "gauge",
         "The longest single callback of the event loop.");
    putf(b, "fccl_store_loop_turn_max_seconds %.6f\n",
         (double)s->st.turn_max_us / 1e6);
    COUNTER(b, "loop_turns_slow_total", "Callbacks that took over 20 ms.",
            s->st.turn_slow);
    COUNTER(b, "reloads_total", "Reloads of TLS files and tokens.",
            s->st.reloads);
    COUNTER(b, "reload_failures_total",
            "Reloads where a file did not load (the old one was kept).",
            s->st.reload_failures);
}

/* ---- /status.json ---- */

/* A JSON string of arbitrary bytes: quotes, backslashes, controls and
 * every byte >= 0x80 escaped, so any key makes valid JSON. */
static void json_str(struct codec_buf *b, const uint8_t *p, size_t n)
{
    codec_put_bytes(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        uint8_t ch = p[i];
        if (ch == '"' || ch == '\\') {
            uint8_t e[2] = {'\\', ch};
            codec_put_bytes(b, e, 2);
        } else if (ch < 0x20 || ch >= 0x7f) {
            putf(b, "\\u%04x", ch);
        } else {
            codec_put_bytes(b, &ch, 1);
        }
    }
    codec_put_bytes(b, "\"", 1);
}

static void json_cstr(struct codec_buf *b, const char *s)
{
    json_str(b, (const uint8_t *)s, strlen(s));
}

/* Clients grouped by address (the host part of "HOST:PORT"). */
#define MAX_ADDRS 256

struct addr_row {
    char ip[64];
    uint64_t conns, tls, waiting, queued;
};

static size_t host_len(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    return colon ? (size_t)(colon - addr) : strlen(addr);
}

static void clients(struct store_server *s, struct codec_buf *b)
{
    struct addr_row *rows = calloc(MAX_ADDRS, sizeof(*rows));
    size_t n = 0, other = 0;
    if (!rows) {
        b->oom = 1;
        return;
    }
    for (const struct store_conn *c = s->conns; c; c = c->next) {
        size_t hl = host_len(c->addr), i = 0;
        for (; i < n; i++)
            if (strlen(rows[i].ip) == hl && !memcmp(rows[i].ip, c->addr, hl))
                break;
        if (i == n) {
            if (n == MAX_ADDRS) {
                other++;
                continue;
            }
            memset(&rows[n], 0, sizeof(rows[n]));
            memcpy(rows[n].ip, c->addr, hl < 63 ? hl : 63);
            n++;
        }
        rows[i].conns++;
        rows[i].tls += (uint64_t)c->ct->encrypted;
        rows[i].waiting += c->wait != NULL || c->bar != NULL;
        rows[i].queued += c->bev ? evbuffer_get_length(
                                       bufferevent_get_output(c->bev))
                                 : 0;
    }
    putf(b, "\"clients\":[");
    for (size_t i = 0; i < n; i++) {
        putf(b, "%s{\"addr\":", i ? "," : "");
        json_cstr(b, rows[i].ip);
        putf(b, ",\"connections\":%llu,\"tls\":%llu,\"waiting\":%llu,"
             "\"queued_bytes\":%llu}", (unsigned long long)rows[i].conns,
             (unsigned long long)rows[i].tls,
             (unsigned long long)rows[i].waiting,
             (unsigned long long)rows[i].queued);
    }
    putf(b, "],\"clients_not_listed\":%zu", other);
    free(rows);
}

/* Keys by prefix: a key's prefix is its bytes up to and including its
 * third '/' (or its last one, when it has fewer): "/fccl/JOB/" for fccl's
 * job keys, "/" for a PyTorch program's. */
#define MAX_PREFIXES 64
#define PREFIX_SLASHES 3
#define PREFIX_MAX 128
#define PREFIX_CACHE_NS 1000000000ull

struct prefix_row {
    uint8_t p[PREFIX_MAX];
    size_t len;
    uint64_t keys, bytes;
};

struct prefix_sum {
    struct prefix_row rows[MAX_PREFIXES];
    size_t n;
    uint64_t other_keys, other_bytes;
    uint64_t made_ns;
};

static size_t prefix_of(const uint8_t *k, size_t n)
{
    size_t end = 0;
    int slashes = 0;
    for (size_t i = 0; i < n && slashes < PREFIX_SLASHES; i++)
        if (k[i] == '/') {
            slashes++;
            end = i + 1;
        }
    return end < PREFIX_MAX ? end : PREFIX_MAX;
}

static void count_key(void *arg, const struct kv_entry *e)
{
    struct prefix_sum *ps = arg;
    size_t pl = prefix_of(e->key, e->klen), i = 0;
    uint64_t bytes = e->klen + e->vlen;
    for (; i < ps->n; i++)
        if (ps->rows[i].len == pl && !memcmp(ps->rows[i].p, e->key, pl))
            break;
    if (i == ps->n) {
        if (ps->n == MAX_PREFIXES) {
            ps->other_keys++;
            ps->other_bytes += bytes;
            return;
        }
        memcpy(ps->rows[i].p, e->key, pl);
        ps->rows[i].len = pl;
        ps->rows[i].keys = ps->rows[i].bytes = 0;
        ps->n++;
    }
    ps->rows[i].keys++;
    ps->rows[i].bytes += bytes;
}

static int by_bytes(const void *a, const void *b)
{
    const struct prefix_row *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* The summary, made again when it is a second old (kept in the server:
 * each server's loop has its own). */
static const struct prefix_sum *prefixes_now(struct store_server *s)
{
    uint64_t now = fccl_now_ns();
    struct prefix_sum *ps = s->prefixes;
    if (ps && now - ps->made_ns < PREFIX_CACHE_NS)
        return ps;
    if (!ps && !(ps = s->prefixes = malloc(sizeof(*ps))))
        return NULL;
    memset(ps, 0, sizeof(*ps));
    kv_scan(&s->kv, 0, UINT64_MAX, NULL, 0, count_key, ps);
    qsort(ps->rows, ps->n, sizeof(ps->rows[0]), by_bytes);
    ps->made_ns = now;
    return ps;
}

void store_metrics_free(struct store_server *s)
{
    free(s->prefixes);
    s->prefixes = NULL;
}

static void prefixes(struct store_server *s, struct codec_buf *b)
{
    const struct prefix_sum *ps = prefixes_now(s);
    if (!ps) {
        b->oom = 1;
        return;
    }
    putf(b, "\"prefixes\":[");
    for (size_t i = 0; i < ps->n; i++) {
        putf(b, "%s{\"prefix\":", i ? "," : "");
        json_str(b, ps->rows[i].p, ps->rows[i].len);
        putf(b, ",\"keys\":%llu,\"bytes\":%llu}",
             (unsigned long long)ps->rows[i].keys,
             (unsigned long long)ps->rows[i].bytes);
    }
    putf(b, "],\"other_prefixes\":{\"keys\":%llu,\"bytes\":%llu}",
         (unsigned long long)ps->other_keys,
         (unsigned long long)ps->other_bytes);
}

/* Parked barriers grouped by key: how many wait, the target, and the
 * counter's value now. */
#define MAX_BARRIERS 64

struct bar_row {
    uint8_t key[PREFIX_MAX];
    size_t klen;
    int64_t target;
    uint64_t parked;
};

struct bar_sum {
    struct bar_row rows[MAX_BARRIERS];
    size_t n;
};

static void count_barrier(void *arg, const uint8_t *key, size_t klen,
                          int64_t target)
{
    struct bar_sum *bs = arg;
    size_t kl = klen < PREFIX_MAX ? klen : PREFIX_MAX, i = 0;
    for (; i < bs->n; i++)
        if (bs->rows[i].klen == kl && !memcmp(bs->rows[i].key, key, kl) &&
            bs->rows[i].target == target)
            break;
    if (i == bs->n) {
        if (bs->n == MAX_BARRIERS)
            return;
        memcpy(bs->rows[i].key, key, kl);
        bs->rows[i].klen = kl;
        bs->rows[i].target = target;
        bs->rows[i].parked = 0;
        bs->n++;
    }
    bs->rows[i].parked++;
}

static long long counter_at(struct store_server *s, const uint8_t *k,
                            size_t n)
{
    struct kv_entry *e = kv_find(&s->kv, k, n);
    char num[32];
    if (!e || !e->has_val || e->vlen == 0 || e->vlen >= sizeof(num))
        return 0;
    memcpy(num, e->val, e->vlen);
    num[e->vlen] = '\0';
    return strtoll(num, NULL, 10);
}

static void barriers(struct store_server *s, struct codec_buf *b)
{
    struct bar_sum *bs = calloc(1, sizeof(*bs));
    if (!bs) {
        b->oom = 1;
        return;
    }
    store_barrier_each(s, count_barrier, bs);
    putf(b, "\"barriers\":[");
    for (size_t i = 0; i < bs->n; i++) {
        const struct bar_row *r = &bs->rows[i];
        putf(b, "%s{\"key\":", i ? "," : "");
        json_str(b, r->key, r->klen);
        putf(b, ",\"arrived\":%lld,\"target\":%lld,\"waiting\":%llu}",
             counter_at(s, r->key, r->klen), (long long)r->target,
             (unsigned long long)r->parked);
    }
    putf(b, "]");
    free(bs);
}

static void totals(struct store_server *s, struct codec_buf *b)
{
    struct conn_sums t = conn_sums(s);
    uint64_t refused = 0;
    for (int r = 0; r < STORE_REFUSE__COUNT; r++)
        refused += s->st.refused[r];
    putf(b, "\"connections\":%llu,\"keys\":%llu,\"bytes_stored\":%llu,"
         "\"waiters\":%llu,\"barriers_parked\":%llu,\"bytes_in\":%llu,"
         "\"bytes_out\":%llu,\"writes_refused\":%llu,\"requests\":{",
         (unsigned long long)s->nconns, (unsigned long long)s->kv.nkeys,
         (unsigned long long)s->kv.bytes, (unsigned long long)t.waiting,
         (unsigned long long)parked_barriers(s),
         (unsigned long long)bytes_in(s),
         (unsigned long long)s->st.bytes_out, (unsigned long long)refused);
    int first = 1;
    for (int op = 0; op < OP__COUNT; op++) {
        if (!s->st.reqs[op])
            continue;
        putf(b, "%s\"%s\":%llu", first ? "" : ",",
             codec_op_name((enum store_op)op),
             (unsigned long long)s->st.reqs[op]);
        first = 0;
    }
    putf(b, "},\"journal\":{\"enabled\":%s,\"failed\":%s,\"bytes\":%llu}",
         s->has_journal ? "true" : "false",
         s->has_journal && s->jrn.failed ? "true" : "false",
         (unsigned long long)(s->has_journal ? s->jrn.size : 0));
}

void store_status_json(struct store_server *s, struct codec_buf *b)
{
    putf(b, "{\"address\":");
    json_cstr(b, s->address);
    putf(b, ",\"version\":");
    json_cstr(b, fccl_version());
    putf(b, ",\"uptime_s\":%.1f,\"world_size\":%d,\"joined\":%lld,",
         (double)(fccl_now_ns() - s->started_ns) / 1e9, s->cfg.world_size,
         (long long)s->joined);
    totals(s, b);
    putf(b, ",");
    clients(s, b);
    putf(b, ",");
    prefixes(s, b);
    putf(b, ",");
    barriers(s, b);
    putf(b, "}\n");
}
