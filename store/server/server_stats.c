/*
 * The counters the loop keeps that take more than an increment (the
 * longest loop turn, the fdatasync latency histogram), and the STATS
 * reply (fccl extension 0x84, docs/PROTOCOL-fccl.md): the server's state
 * and counters as "name value" text lines, one per figure, easy to read
 * from a shell (`tcpstore stats | grep keys`) and to extend.  /metrics
 * and /status.json are server_metrics.c's.
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "clock.h"
#include "conn_type.h"
#include "server_int.h"

uint64_t store_turn_begin(void) { return fccl_now_ns(); }

void store_turn_end(struct store_server *s, uint64_t t0)
{
    uint64_t us = (fccl_now_ns() - t0) / 1000u;
    if (us > s->st.turn_max_us)
        s->st.turn_max_us = us;
    if (us > 20000)
        s->st.turn_slow++;
}

const uint64_t store_jsync_bounds_us[STORE_JSYNC_BUCKETS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000};

void store_stats_sync(struct store_server *s, uint64_t ns)
{
    uint64_t us = ns / 1000u;
    int i = 0;
    while (i < STORE_JSYNC_BUCKETS && us > store_jsync_bounds_us[i])
        i++;
    s->st.jsync_hist[i]++;
    s->st.jsync_ns += ns;
}

static void line(struct codec_buf *b, const char *name, uint64_t v)
{
    char tmp[128];
    int n = snprintf(tmp, sizeof(tmp), "%s %llu\n", name,
                     (unsigned long long)v);
    if (n > 0 && (size_t)n < sizeof(tmp))
        codec_put_bytes(b, tmp, (size_t)n);
}

static void per_type(struct store_server *s, struct codec_buf *b)
{
    for (int op = 0; op < OP__COUNT; op++) {
        if (!s->st.reqs[op])
            continue;
        char name[64];
        snprintf(name, sizeof(name), "requests_%s",
                 codec_op_name((enum store_op)op));
        line(b, name, s->st.reqs[op]);
        snprintf(name, sizeof(name), "request_bytes_%s",
                 codec_op_name((enum store_op)op));
        line(b, name, s->st.bytes[op]);
    }
}

void store_stats_text(struct store_server *s, struct codec_buf *b)
{
    uint64_t waiting = 0, paused = 0, tls = 0, kept = 0;
    for (struct store_conn *c = s->conns; c; c = c->next) {
        waiting += c->wait != NULL;
        paused += c->paused;
        tls += (uint64_t)c->ct->encrypted;
        kept += c->companion;
    }
/* one line per counter, in the order the STATS reply documents */
    line(b, "connections", s->nconns);
    line(b, "connections_max", s->cfg.max_conns);
    line(b, "connections_tls", tls);
    line(b, "connections_paused", paused);
    line(b, "connections_total", s->st.conns_total);
    line(b, "connections_refused", s->st.conns_refused);
    line(b, "connections_evicted", s->st.conns_evicted);
    line(b, "connections_timed_out", s->st.conns_timed_out);
    line(b, "connections_per_addr_max", s->per_addr_cap);
    line(b, "connections_told_why", s->st.conns_told);
    line(b, "connections_no_handshake", s->st.conns_no_handshake);
    line(b, "connections_silent_kept", kept);
    line(b, "auth_proofs_refused", s->st.auth_refused);
    line(b, "auth_proofs_delayed", s->st.auth_deferred);
    line(b, "keys", s->kv.nkeys);
    line(b, "entries", s->kv.nentries);
    line(b, "bytes_stored", s->kv.bytes);
    line(b, "bytes_held_requests", s->held);
    line(b, "bytes_queued_replies", s->out_held);
    line(b, "bytes_limit", s->cfg.max_total_bytes);
    line(b, "waiters", waiting);
    line(b, "wait_key_bytes", s->ws.bytes);
    line(b, "writes_refused", s->st.refused_writes);
    line(b, "replies_refused", s->st.refused_replies);
    line(b, "loop_turn_max_us", s->st.turn_max_us);
    line(b, "loop_turns_over_20ms", s->st.turn_slow);
    if (s->has_journal) {
        line(b, "journal_bytes", s->jrn.size);
        line(b, "journal_syncs", s->jrn.syncs);
        line(b, "journal_compactions", s->jrn.compactions);
        line(b, "journal_failed", (uint64_t)s->jrn.failed);
        line(b, "journal_compacting", (uint64_t)(s->jrn.child > 0));
    }
    per_type(s, b);
}
