/*
 * Warnings that a flood would repeat thousands of times (refused and
 * evicted connections, connections closed without a handshake, refused
 * token proofs) are summarised per kind and client address: the first
 * one of a 10 s window is logged as it is, the others are counted, and
 * when the window is over one line says
 *     "N more refused proofs from ADDR in the last 10 s".
 * The table has QUIET_SLOTS entries; a new (kind, address) takes a free
 * one or the one whose window began first, whose count is logged then.
 * Summaries come from the server's 1 s sweep (store_quiet_flush).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "server_int.h"

/* A name per enum value, as server_metrics.c's table: tables repeat. */
static const char *const what[QUIET__COUNT] = {
    [QUIET_REFUSED] = "refused connections",
    [QUIET_EVICTED] = "connections closed to make room",
    [QUIET_HANDSHAKE] = "connections closed without a handshake",
    [QUIET_PROOF] = "refused proofs",
    [QUIET_AUTH_CLOSED] = "connections closed for failed proofs",
};

static uint64_t now_ms(void) { return fccl_now_ns() / 1000000u; }

static void summary(struct quiet_entry *e)
{
    if (e->more)
        LOG_WARN("STORE", "%llu more %s from %s in the last %d s",
                 (unsigned long long)e->more, what[e->kind], e->ip,
                 QUIET_WINDOW_MS / 1000);
    e->more = 0;
}

/* The entry of (k, ip), or a fresh one in place of the oldest. */
static struct quiet_entry *entry(struct store_server *s,
                                 enum store_quiet_kind k, const char *ip)
{
    struct quiet_entry *old = NULL;
    for (int i = 0; i < QUIET_SLOTS; i++) {
        struct quiet_entry *e = &s->quiet[i];
        if (!e->used) {
            if (!old || old->used)
                old = e; /* the first free one */
            continue;
        }
        if (e->kind == k && !strcmp(e->ip, ip))
            return e;
        if (!old || (old->used && e->since_ms < old->since_ms))
            old = e;
    }
    if (old->used)
        summary(old);
    memset(old, 0, sizeof(*old));
    old->kind = k;
    snprintf(old->ip, sizeof(old->ip), "%s", ip);
    return old;
}

void store_quiet_warn(struct store_server *s, enum store_quiet_kind k,
                      const char *ip, const char *fmt, ...)
{
    if (!FCCL_LOG_ON(FCCL_LOG_WARN))
        return;
    uint64_t now = now_ms();
    struct quiet_entry *e = entry(s, k, ip);
    if (e->used && now - e->since_ms < QUIET_WINDOW_MS) {
        e->more++;
        return;
    }
    summary(e);
    e->used = 1;
    e->since_ms = now;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    LOG_WARN("STORE", "%s", msg);
}

void store_quiet_flush(struct store_server *s, int all)
{
    uint64_t now = now_ms();
    for (int i = 0; i < QUIET_SLOTS; i++) {
        struct quiet_entry *e = &s->quiet[i];
        if (!e->used || (!all && now - e->since_ms < QUIET_WINDOW_MS))
            continue;
        summary(e);
        e->used = 0; /* the next one of its kind is logged again */
    }
}

/* "1.2.3.4:5678" / "[::1]:5678" -> the IP part. */
void store_ip_of(const char *addr, char *ip, size_t n)
{
    const char *colon = strrchr(addr, ':');
    size_t len = colon ? (size_t)(colon - addr) : strlen(addr);
    if (len >= n)
        len = n - 1;
    memcpy(ip, addr, len);
    ip[len] = '\0';
}
