/*
 * Connection slots of the store server: who may hold a connection, for how
 * long a new connection may take to introduce itself, and for how long a
 * connection may hold an unfinished request.
 *
 * Idle connections of real clients are legitimate (ranks wait minutes
 * between barriers, jobs leave store connections idle for hours), so a
 * connection that has made a request is never timed out for being quiet.
 * A connection that has not is another matter: a flood of silent
 * connections used to lock its own address out.  Each connection has a
 * tier (server_int.h): NEW until it has sent VALIDATE (a legacy one: its
 * first request; with --auth-required: until it has proven a token),
 * GREETED after a lone VALIDATE, ACTIVE once it has made a request.  What
 * is bounded:
 *  - a NEW connection is closed handshake_timeout (10 s) after accept,
 *    unless it may be a PyTorch 1.13 client's silent second connection
 *    (below), which is kept as a "companion";
 *  - connections per client IP (max_conns_per_addr, default all of
 *    max_conns but a sixteenth kept for other addresses, and at least
 *    1024: a 16,384-rank job behind one NAT address gets in on a
 *    machine whose file limit is 20,000, and on a server of more than
 *    1024 connections one address cannot take every slot).  At the cap
 *    a newcomer takes the slot of that address's oldest NEW connection,
 *    else its oldest GREETED one, else its oldest companion, else it is
 *    refused;
 *  - when every slot is taken (max_conns), a newcomer takes the slot of
 *    the oldest NEW (else GREETED) connection of the address holding the
 *    most of them, else the oldest companion of the address holding the
 *    most companions; failing that, of the longest-idle ACTIVE connection of
 *    the address that holds the most, provided that address holds more
 *    than the newcomer's own (no churn between equals) and that
 *    connection has no request or WAIT in progress;
 *  - a refused newcomer is kept for STORE_REFUSED_LINGER_MS (at most
 *    STORE_REFUSED_MAX of them) so that an fccl client, which says the
 *    fccl hello after VALIDATE, is told why before the close;
 *  - an unfinished request (or TLS handshake) that gets no byte for
 *    request_timeout, or that after request_timeout advances slower than
 *    SLOW_BYTES_PER_S, is closed (slowloris);
 *  - max_conns itself is capped to what RLIMIT_NOFILE allows, after raising
 *    the soft limit to the hard one.
 * Each address keeps a FIFO of its NEW, one of its GREETED and one of
 * its companion connections, so finding whom to close is O(1) for the own
 * address and O(addresses) for the busiest.
 *
 * Companions.  PyTorch 1.13's TCPStore client opens a second connection
 * (for WATCH_KEY callbacks) on which it never sends a byte, and its
 * callback thread spins on that socket once we close it (poll + recv
 * returning 0, a whole core per rank).  It cannot be told from a flood by
 * its bytes, only by its company: such a client's main connection speaks
 * the legacy dialect and makes requests (with a world size, ADD(init/) at
 * once), where fccl's and PyTorch 2.x's clients open with VALIDATE and
 * keep no silent connection.  So an address may keep, past
 * handshake_timeout, as many silent connections as it holds legacy
 * connections that made requests, plus COMPANION_SPARE for one client
 * that has not made its first request yet (no world size).  A flood of
 * silent connections keeps at most that many, and at a cap companions go
 * after every NEW and GREETED connection, before any that made a
 * request.
 * With --auth-required no PyTorch client can take part, so nothing is
 * kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "dlist.h"
#include "clock.h"
#include "err.h"
#include "log.h"
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "server_int.h"

#define FD_RESERVE 64            /* fds kept for listeners, logs, pipes */
#define SLOW_BYTES_PER_S 1024    /* least average rate past the timeout */
#define SLOTS_MIN_BUCKETS 256
#define OTHERS_SHARE 16          /* auto per-address cap: max_conns less
                                    a sixteenth for other addresses ... */
#define PER_ADDR_FLOOR 1024      /* ... but at least this many */
#define COMPANION_SPARE 2        /* silent connections an address keeps
                                    beyond its requesting ones */

/* Connections of one tier of an address, oldest first. */
struct tier_queue {
    struct store_conn *head, *tail;
    uint64_t n;
};

/* The queues of an address's connections that made no request. */
enum { Q_NEW = CONN_TIER_NEW, Q_GREETED = CONN_TIER_GREETED, Q_COMPANION,
       Q__COUNT };

struct addr_slot {
    struct addr_slot *next; /* hash chain */
    struct store_conn *conns;
    uint64_t n;
    uint64_t nlegacy; /* of them, ACTIVE ones of the legacy dialect */
    uint64_t hash;
    struct tier_queue q[Q__COUNT];
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
    HASH_DOUBLE(struct addr_slot, t->b, t->mask, next, hash);
}

/* The per-address cap.  auto: max-connections (after capping it to the
 * file limit) less a sixteenth kept for other addresses, but at least
 * PER_ADDR_FLOOR (all of them when fewer: a small server keeps its old
 * cap).  Jobs behind one address (NAT, or one big host) are the common
 * case; what matters is that they cannot lock every other address out.
 * Half used to be kept: a 16,384-rank job from one address stopped at
 * 9,968 on a file limit of 20,000. */
static uint64_t auto_per_addr(uint64_t max_conns)
{
    uint64_t v = max_conns - max_conns / OTHERS_SHARE;
    if (v >= PER_ADDR_FLOOR)
        return v;
    return max_conns < PER_ADDR_FLOOR ? max_conns : PER_ADDR_FLOOR;
}

static void resolve_per_addr(struct store_server *s)
{
    uint64_t v = s->cfg.max_conns_per_addr;
    if (v == STORE_SERVER_PER_ADDR_AUTO)
        v = auto_per_addr(s->cfg.max_conns);
    s->per_addr_cap = v;
}

int store_slots_init(struct store_server *s)
{
    raise_nofile(s);
    resolve_per_addr(s);
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
    store_quiet_flush(s, 1);
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

/* ---- tier queues ---- */

static void q_push(struct tier_queue *q, struct store_conn *c)
{
    DLIST_APPEND(q->head, q->tail, c, qprev, qnext);
    q->n++;
}

static void q_unlink(struct tier_queue *q, struct store_conn *c)
{
    DLIST_UNLINK_TAIL(q->head, q->tail, c, qprev, qnext);
    c->qprev = c->qnext = NULL;
    q->n--;
}

/* The queue of a connection below ACTIVE. */
static struct tier_queue *queue_of(struct addr_slot *a,
                                   const struct store_conn *c)
{
    return &a->q[c->companion ? Q_COMPANION : c->tier];
}

/* Move c to tier t (only ever up). */
static void set_tier(struct store_conn *c, enum conn_tier t)
{
    struct addr_slot *a = c->slot;
    if (t <= c->tier)
        return;
    if (a && c->tier < CONN_TIER_ACTIVE)
        q_unlink(queue_of(a, c), c);
    c->companion = 0;
    c->tier = (uint8_t)t;
    if (a && t < CONN_TIER_ACTIVE)
        q_push(&a->q[t], c);
    if (a && t == CONN_TIER_ACTIVE && c->dialect == DIALECT_LEGACY)
        a->nlegacy++;
}

void store_slots_progress(struct store_server *s, struct store_conn *c,
                          enum store_op op)
{
    /* With --auth-required only a proof introduces a connection. */
    if (s->auth && s->cfg.auth_required && !c->auth)
        return;
    if (op == OP_VALIDATE)
        set_tier(c, CONN_TIER_GREETED);
    else
        set_tier(c, CONN_TIER_ACTIVE);
}

int store_slots_attach(struct store_server *s, struct store_conn *c,
                       const char *addr)
{
    char ip[48];
    store_ip_of(addr, ip, sizeof(ip));
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
    DLIST_PUSH(a->conns, c, sprev, snext);
    a->n++;
    if (c->tier < CONN_TIER_ACTIVE)
        q_push(queue_of(a, c), c);
    else if (c->dialect == DIALECT_LEGACY)
        a->nlegacy++;
    return FCCL_OK;
}

void store_slots_detach(struct store_server *s, struct store_conn *c)
{
    struct addr_slot *a = c->slot;
    if (c->refused) {
        s->nrefused--;
        c->refused = 0;
    }
    if (!a)
        return;
    if (c->tier < CONN_TIER_ACTIVE)
        q_unlink(queue_of(a, c), c);
    else if (c->dialect == DIALECT_LEGACY)
        a->nlegacy--;
    DLIST_UNLINK(a->conns, c, sprev, snext);
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

/* The address holding the most connections that made no request: NEW
 * and GREETED ones, or when no address has any, companions. */
static struct addr_slot *most_unproven(const struct store_server *s)
{
    struct addr_slot *best = NULL;
    uint64_t most = 0;
    for (int companions = 0; companions < 2 && !best; companions++)
        for (uint64_t i = 0; i <= s->slots->mask; i++)
            for (struct addr_slot *a = s->slots->b[i]; a; a = a->next) {
                uint64_t n = companions ? a->q[Q_COMPANION].n
                                        : a->q[Q_NEW].n + a->q[Q_GREETED].n;
                if (n > most) {
                    most = n;
                    best = a;
                }
            }
    return best;
}

/* a's oldest connection that made no request: NEW before GREETED before
 * a companion (whose PyTorch client spins once it is closed). */
static struct store_conn *oldest_unproven(const struct addr_slot *a)
{
    if (!a)
        return NULL;
    for (int q = 0; q < Q__COUNT; q++)
        if (a->q[q].head)
            return a->q[q].head;
    return NULL;
}

/* The longest-idle ACTIVE connection of a that is doing nothing: no
 * unfinished request, no WAIT, no replies queued. */
static struct store_conn *idlest(const struct addr_slot *a)
{
    struct store_conn *best = NULL;
    for (struct store_conn *c = a->conns; c; c = c->snext) {
        if (c->part_ms || c->wait || c->bar || c->state == CONN_CLOSING ||
            c->state == CONN_HANDSHAKE || c->close_after ||
            evbuffer_get_length(bufferevent_get_output(c->bev)))
            continue;
        if (!best || c->last_ms < best->last_ms)
            best = c;
    }
    return best;
}

static const char *tier_name(const struct store_conn *c)
{
    return c->companion ? "silent, kept as a PyTorch client's second "
                          "connection"
           : c->tier == CONN_TIER_NEW ? "no VALIDATE (or proof) yet"
           : c->tier == CONN_TIER_GREETED ? "VALIDATE only"
                                          : "idle";
}

static void evict(struct store_server *s, struct store_conn *v,
                  const char *addr, const char *cap)
{
    char ip[48];
    store_ip_of(v->addr, ip, sizeof(ip));
    if (v->tier == CONN_TIER_ACTIVE)
        store_quiet_warn(s, QUIET_EVICTED, ip, "closing idle client %s "
                         "(idle %.1f s; %s holds the most connections) to "
                         "admit %s (%s)", v->addr,
                         (double)(now_ms() - v->last_ms) / 1000.0, ip, addr,
                         cap);
    else
        store_quiet_warn(s, QUIET_EVICTED, ip, "closing client %s (%s, "
                         "%.1f s old) to admit %s (%s)", v->addr,
                         tier_name(v),
                         (double)(now_ms() - v->born_ms) / 1000.0, addr,
                         cap);
    s->st.conns_evicted++;
    s->life->free(v);
}

/* Refuse the newcomer: told why when there is room for that. */
static int refuse(struct store_server *s, const char *addr, const char *ip,
                  const char *why)
{
    store_quiet_warn(s, QUIET_REFUSED, ip, "refusing client %s: %s", addr,
                     why);
    if (s->nrefused >= STORE_REFUSED_MAX)
        return 0;
    s->admit.pending = 1;
    s->admit.code = SYNC_LIMIT;
    snprintf(s->admit.msg, sizeof(s->admit.msg), "tcpstore-server refused "
             "the connection: %s", why);
    s->st.conns_refused++;
    return STORE_ADMIT_TELL;
}

static uint64_t active_conns(const struct store_server *s)
{
    return s->nconns - s->nrefused;
}

int store_slots_admit(struct store_server *s, const char *addr)
{
    char ip[48], why[200];
    store_ip_of(addr, ip, sizeof(ip));
    struct addr_slot *mine = slot_find(s, ip, ip_hash(s, ip));
    uint64_t have = mine ? mine->n : 0, cap = s->per_addr_cap;
    s->admit.pending = 0;
    /* (a cap of max-connections or more is max-connections' business) */
    if (cap && cap < s->cfg.max_conns && have >= cap) {
        struct store_conn *v = oldest_unproven(mine);
        if (!v) {
            snprintf(why, sizeof(why), "%llu connections from %s, the "
                     "most one address may hold, each of which has made "
                     "requests (max-connections-per-addr)",
                     (unsigned long long)have, ip);
            return refuse(s, addr, ip, why);
        }
        evict(s, v, addr, "max-connections-per-addr");
        have--;
    }
    if (active_conns(s) < s->cfg.max_conns)
        return 1;
    struct store_conn *v = oldest_unproven(most_unproven(s));
    if (!v) {
        struct addr_slot *top = busiest(s);
        v = top && top->n > have + 1 ? idlest(top) : NULL;
    }
    if (!v) {
        snprintf(why, sizeof(why), "%llu connections open (max-connections) "
                 "and none idle to close", (unsigned long long)s->nconns);
        return refuse(s, addr, ip, why);
    }
    evict(s, v, addr, "max-connections");
    return 1;
}

int store_slots_refuse(struct store_server *s, struct store_conn *c,
                       uint8_t code, const char *msg)
{
    if (s->nrefused >= STORE_REFUSED_MAX)
        return 0;
    char *m = strdup(msg);
    if (!m)
        return 0;
    store_slots_detach(s, c); /* it holds no slot any more */
    free(c->refuse_msg);
    c->refuse_msg = m;
    c->refuse_code = code;
    c->refused = 1;
    s->nrefused++;
    s->st.conns_refused++;
    return 1;
}

/* ---- stalled requests ---- */

static const char *stalled(const struct store_server *s,
                           const struct store_conn *c, uint64_t now)
{
    uint64_t t = (uint64_t)s->cfg.request_timeout_ms;
    /* Paused (its replies are not read) or listing: we stopped reading,
     * so its silence is not its fault. */
    if (!c->part_ms || c->state == CONN_CLOSING || c->paused || c->list ||
        c->deferred)
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

/* May c, silent past handshake_timeout, stay as a companion? */
static int keep_companion(const struct store_server *s,
                          const struct store_conn *c)
{
    const struct addr_slot *a = c->slot;
    if (!a || (s->auth && s->cfg.auth_required))
        return 0;
    return a->q[Q_COMPANION].n < a->nlegacy + COMPANION_SPARE;
}

static void make_companion(struct store_conn *c)
{
    q_unlink(&c->slot->q[Q_NEW], c);
    c->companion = 1;
    q_push(&c->slot->q[Q_COMPANION], c);
    LOG_DEBUG("STORE", "client %s: silent for the handshake timeout; kept "
              "as a PyTorch client's second connection", c->addr);
}

/* Is c's time up?  1 (c freed), else 0. */
static int overdue(struct store_server *s, struct store_conn *c, uint64_t now)
{
    char ip[48];
    uint64_t hs = (uint64_t)s->cfg.handshake_timeout_ms;
    if (c->refused || c->draining) {
        uint64_t t0 = c->draining ? c->closing_ms : c->born_ms;
        if (now - t0 <= STORE_REFUSED_LINGER_MS)
            return 0;
        LOG_DEBUG("STORE", "client %s: closing (refused, or told why)",
                  c->addr);
        s->life->free(c);
        return 1;
    }
    if (s->cfg.handshake_timeout_ms > 0 && c->tier == CONN_TIER_NEW &&
        !c->companion && c->state != CONN_CLOSING && now - c->born_ms > hs) {
        if (keep_companion(s, c)) {
            make_companion(c);
            return 0;
        }
        store_ip_of(c->addr, ip, sizeof(ip));
        store_quiet_warn(s, QUIET_HANDSHAKE, ip, "closing client %s: no "
                         "%s within %.1f s of connecting "
                         "(handshake-timeout)", c->addr,
                         s->auth && s->cfg.auth_required && c->validated
                             ? "token proof (auth-required)"
                             : "VALIDATE or first request",
                         (double)hs / 1000.0);
        s->st.conns_no_handshake++;
        s->life->free(c);
        return 1;
    }
    const char *why = s->cfg.request_timeout_ms > 0 ? stalled(s, c, now)
                                                    : NULL;
    if (!why)
        return 0;
    uint64_t since = c->state == CONN_HANDSHAKE ? c->part_ms : c->last_ms;
    LOG_WARN("STORE", "closing client %s: %s for %.1f s (request-timeout)",
             c->addr, why, (double)(now - since) / 1000.0);
    s->st.conns_timed_out++;
    s->life->free(c);
    return 1;
}

void store_slots_sweep(struct store_server *s)
{
    uint64_t now = now_ms();
    struct store_conn *c = s->conns, *next;
    for (; c; c = next) {
        next = c->next;
        overdue(s, c, now);
    }
    store_quiet_flush(s, 0);
}
