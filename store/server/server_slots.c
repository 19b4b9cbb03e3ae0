/*
 * Connection slots of the store server: who may hold a connection, and for
 * how long a connection may hold an unfinished request.
 *
 * Idle connections are legitimate (a PyTorch 1.13 client keeps an idle
 * callback connection, jobs leave store connections idle for hours), so
 * nothing here times out a connection that is merely quiet.  What is
 * bounded instead:
 *  - connections per client IP (max_conns_per_addr);
 *  - when every slot is taken (max_conns), a newcomer takes the slot of the
 *    longest-idle connection of the address that holds the most, provided
 *    that address holds more than the newcomer's own (no churn between
 *    equals), and that connection has no request or WAIT in progress;
 *  - an unfinished request (or TLS handshake) that gets no byte for
 *    request_timeout, or that after request_timeout advances slower than
 *    SLOW_BYTES_PER_S, is closed (slowloris);
 *  - max_conns itself is capped to what RLIMIT_NOFILE allows, after raising
 *    the soft limit to the hard one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "server_int.h"

#define FD_RESERVE 64            /* fds kept for listeners, logs, pipes */
#define SLOW_BYTES_PER_S 1024    /* least average rate past the timeout */
#define SLOTS_MIN_BUCKETS 256

struct addr_slot {
    struct addr_slot *next; /* hash chain */
    struct store_conn *conns;
    uint64_t n;
    uint64_t hash;
    char ip[48];
};

struct slot_table {
    struct addr_slot **b;
    uint64_t mask, n;
};

static uint64_t now_ms(void) { return fccl_now_ns() / 1000000u; }

/* ---- the file limit ---- */

static void raise_nofile(struct store_server *s)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return;
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit want = rl;
        want.rlim_cur = rl.rlim_max == RLIM_INFINITY ? (1u << 20) : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl = want;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur <= FD_RESERVE)
        return;
    uint64_t fit = (uint64_t)rl.rlim_cur - FD_RESERVE;
    if (s->cfg.max_conns > fit) {
        LOG_INFO("STORE", "max-connections %llu lowered to %llu: the file "
                 "limit (RLIMIT_NOFILE) is %llu",
                 (unsigned long long)s->cfg.max_conns,
                 (unsigned long long)fit, (unsigned long long)rl.rlim_cur);
        s->cfg.max_conns = fit;
    }
}

/* ---- the address table ---- */

static uint64_t ip_hash(const struct store_server *s, const char *ip)
{
    return kv_hash(&s->kv, (const uint8_t *)ip, strlen(ip));
}

static struct addr_slot *slot_find(const struct store_server *s,
                                   const char *ip, uint64_t h)
{
    struct addr_slot *a = s->slots->b[h & s->slots->mask];
    while (a && (a->hash != h || strcmp(a->ip, ip) != 0))
        a = a->next;
    return a;
}

static void slots_grow(struct slot_table *t)
{
    uint64_t nb = (t->mask + 1) * 2;
    struct addr_slot **b = calloc(nb, sizeof(*b));
    if (!b)
        return; /* longer chains, still correct */
    for (uint64_t i = 0; i <= t->mask; i++) {
        struct addr_slot *a = t->b[i], *next;
        for (; a; a = next) {
            next = a->next;
            a->next = b[a->hash & (nb - 1)];
            b[a->hash & (nb - 1)] = a;
        }
    }
    free(t->b);
    t->b = b;
    t->mask = nb - 1;
}

int store_slots_init(struct store_server *s)
{
    raise_nofile(s);
    s->slots = calloc(1, sizeof(*s->slots));
    if (!s->slots)
        return fccl_err(FCCL_ERR_NOMEM, "slot table");
    s->slots->b = calloc(SLOTS_MIN_BUCKETS, sizeof(*s->slots->b));
    if (!s->slots->b)
        return fccl_err(FCCL_ERR_NOMEM, "slot table");
    s->slots->mask = SLOTS_MIN_BUCKETS - 1;
    return FCCL_OK;
}

void store_slots_free(struct store_server *s)
{
    if (!s->slots)
        return;
    for (uint64_t i = 0; s->slots->b && i <= s->slots->mask; i++) {
        struct addr_slot *a = s->slots->b[i], *next;
        for (; a; a = next) {
            next = a->next;
            free(a);
        }
    }
    free(s->slots->b);
    free(s->slots);
    s->slots = NULL;
}

/* "1.2.3.4:5678" / "[::1]:5678" -> the IP part. */
static void ip_of(const char *addr, char *ip, size_t n)
{
    const char *colon = strrchr(addr, ':');
    size_t len = colon ? (size_t)(colon - addr) : strlen(addr);
    if (len >= n)
        len = n - 1;
    memcpy(ip, addr, len);
    ip[len] = '\0';
}

int store_slots_attach(struct store_server *s, struct store_conn *c,
                       const char *addr)
{
    char ip[48];
    ip_of(addr, ip, sizeof(ip));
    uint64_t h = ip_hash(s, ip);
    struct addr_slot *a = slot_find(s, ip, h);
    if (!a) {
        a = calloc(1, sizeof(*a));
        if (!a)
            return fccl_err(FCCL_ERR_NOMEM, "connection slot");
        a->hash = h;
        snprintf(a->ip, sizeof(a->ip), "%s", ip);
        struct addr_slot **head = &s->slots->b[h & s->slots->mask];
        a->next = *head;
        *head = a;
        if (++s->slots->n > 2 * (s->slots->mask + 1))
            slots_grow(s->slots);
    }
    c->slot = a;
    c->sprev = NULL;
    c->snext = a->conns;
    if (a->conns)
        a->conns->sprev = c;
    a->conns = c;
    a->n++;
    return FCCL_OK;
}

void store_slots_detach(struct store_server *s, struct store_conn *c)
{
    struct addr_slot *a = c->slot;
    if (!a)
        return;
    if (c->sprev)
        c->sprev->snext = c->snext;
    else
        a->conns = c->snext;
    if (c->snext)
        c->snext->sprev = c->sprev;
    c->slot = NULL;
    if (--a->n > 0)
        return;
    struct addr_slot **pp = &s->slots->b[a->hash & s->slots->mask];
    while (*pp != a)
        pp = &(*pp)->next;
    *pp = a->next;
    s->slots->n--;
    free(a);
}

/* ---- admission ---- */

static struct addr_slot *busiest(const struct store_server *s)
{
    struct addr_slot *best = NULL;
    for (uint64_t i = 0; i <= s->slots->mask; i++)
        for (struct addr_slot *a = s->slots->b[i]; a; a = a->next)
            if (!best || a->n > best->n)
                best = a;
    return best;
}

/* The longest-idle connection of a that is doing nothing: no unfinished
 * request, no WAIT, no replies queued. */
static struct store_conn *idlest(const struct addr_slot *a)
{
    struct store_conn *best = NULL;
    for (struct store_conn *c = a->conns; c; c = c->snext) {
        if (c->part_ms || c->wait || c->state == CONN_CLOSING ||
            c->state == CONN_HANDSHAKE ||
            evbuffer_get_length(bufferevent_get_output(c->bev)))
            continue;
        if (!best || c->last_ms < best->last_ms)
            best = c;
    }
    return best;
}

int store_slots_admit(struct store_server *s, const char *addr)
{
    char ip[48];
    ip_of(addr, ip, sizeof(ip));
    struct addr_slot *mine = slot_find(s, ip, ip_hash(s, ip));
    uint64_t have = mine ? mine->n : 0;
    uint64_t cap = s->cfg.max_conns_per_addr;
    if (cap && have >= cap) {
        LOG_WARN("STORE", "refusing client %s: %llu connections from %s "
                 "(max-connections-per-addr)", addr,
                 (unsigned long long)have, ip);
        return 0;
    }
    if (s->nconns < s->cfg.max_conns)
        return 1;
    struct addr_slot *top = busiest(s);
    struct store_conn *victim = top && top->n > have + 1 ? idlest(top) : NULL;
    if (!victim) {
        LOG_WARN("STORE", "refusing client %s: %llu connections open "
                 "(max-connections) and none idle to close", addr,
                 (unsigned long long)s->nconns);
        return 0;
    }
    LOG_WARN("STORE", "closing idle client %s (idle %.1f s; %s holds %llu "
             "connections) to admit %s (max-connections)", victim->addr,
             (double)(now_ms() - victim->last_ms) / 1000.0, top->ip,
             (unsigned long long)top->n, addr);
    s->st.conns_evicted++;
    store_conn_free(victim);
    return 1;
}

/* ---- stalled requests ---- */

static const char *stalled(const struct store_server *s,
                           const struct store_conn *c, uint64_t now)
{
    uint64_t t = (uint64_t)s->cfg.request_timeout_ms;
    /* Paused (its replies are not read) or listing: we stopped reading,
     * so its silence is not its fault. */
    if (!c->part_ms || c->state == CONN_CLOSING || c->paused || c->list)
        return NULL;
    if (c->state == CONN_HANDSHAKE)
        return now - c->part_ms > t ? "TLS handshake not finished" : NULL;
    if (now - c->last_ms > t)
        return "no progress on its unfinished request";
    uint64_t age = now - c->part_ms;
    if (age > t && c->part_bytes < (age - t) / 1000 * SLOW_BYTES_PER_S)
        return "unfinished request arriving too slowly";
    return NULL;
}

void store_slots_sweep(struct store_server *s)
{
    if (s->cfg.request_timeout_ms <= 0)
        return;
    uint64_t now = now_ms();
    struct store_conn *c = s->conns, *next;
    for (; c; c = next) {
        next = c->next;
        const char *why = stalled(s, c, now);
        if (!why)
            continue;
        uint64_t since =
            c->state == CONN_HANDSHAKE ? c->part_ms : c->last_ms;
        LOG_WARN("STORE", "closing client %s: %s for %.1f s "
                 "(request-timeout)", c->addr, why,
                 (double)(now - since) / 1000.0);
        s->st.conns_timed_out++;
        store_conn_free(c);
    }
}
