/*
 * Dead hosts found in seconds: heartbeats between ring neighbours.
 *
 * A peer on another host that dies, loses its link or is stopped breaks
 * nothing we could poll (no pidfd across hosts; a TCP connection without
 * traffic stays "up" when a link goes down), so a collective would wait
 * for its 300 s deadline.  Each process therefore runs one small thread
 * with one UDP socket (published in the name blob as an "hb" entry):
 *
 * - Every FCCL_PEER_TIMEOUT/5 it sends a 24-byte heartbeat to its world
 *   ring predecessor and successor, and it watches only those two (O(1)
 *   per rank, whatever the world size).  The thread, not the application,
 *   beats, so a rank busy outside fccl for hours stays alive; a stopped
 *   process (SIGSTOP) or a cut link stops its beats.
 * - A watched neighbour silent for FCCL_PEER_TIMEOUT seconds (default 10;
 *   0: no beats, the socket carries notices) is declared dead:
 *   tp->dead_rank and dead_why are set once, and a DEAD(rank) datagram
 *   goes to every rank, three times one period apart (UDP; sent to all
 *   only on a failure; see failed.c for ranks a shrink left out).  A rank
 *   that receives DEAD takes the first such news as its own (a rank told
 *   that it is itself dead, e.g. resumed after SIGSTOP, fails too).
 * - A wait (wait.c) that has been idle 200 ms while a death is known fails
 *   with FCCL_ERR_PEER naming the dead rank, whatever it waits for: one
 *   dead rank fails the whole job's pending and next collectives (there is
 *   no fault-tolerant continuation), and every rank names the same culprit
 *   instead of a live neighbour that merely stopped answering because it
 *   failed first.  A wait failing on a broken connection or an exited
 *   local process reports that peer here too (tp_hb_suspect), so the news
 *   of a killed rank reaches everyone within milliseconds.
 * - The dead rank is told too: a rank that was stopped (SIGSTOP) and
 *   resumes finds the verdict queued on its socket, fails at once naming
 *   the rank that declared it dead and why (tp_news reads the socket
 *   right away when a wait wakes from such a gap), and removes its own
 *   libfabric files from /dev/shm (no survivor may be left to do it).
 * - Group failure notices (tp_group_notify): a rank whose group failed
 *   (a timeout, a size mismatch) tells the group's members, one datagram
 *   each now and two more one period apart; a member's waits on that
 *   group (which watch a stop word registered by tp_group_watch) end at
 *   once, and the notice is kept for the group to report (who, what op,
 *   which sequence number).  Group context ids are never reused within
 *   a job, so a notice cannot reach a later group.
 * - tp_close says goodbye (BYE) to the two watchers, so a rank that
 *   finalized is not declared dead by a slower neighbour, and to every
 *   rank on this host, whose waits watch it by its pidfd (wait.c): its
 *   exit after a goodbye is no failure.
 * - A thread not scheduled for half the timeout (stopped, starved)
 *   forgives its neighbours' silence once: the gap was ours.
 * - It removes exited local peers' shm files (<pid>:..., fccl-<pid>-<n>);
 *   readmit.c rewrites a peer taken back in under tp_hb_hold.
 * Datagrams carry the sender's rank and pid (checked against its blob);
 * local peers are reached on loopback, others at their network address.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "tp_int.h"

#define HB_MAGIC 0x31424846u /* "FHB1" little-endian */
#define HB_MSG 24
#define HB_ENV "FCCL_PEER_TIMEOUT"
#define HB_DEFAULT_S 10.0
#define HB_ANNOUNCE 3 /* DEAD broadcasts, one period apart */
/* A group failure notice: the 24-byte header (subject: the context id),
 * then origin, status, seq, has_seq, ms (2 x 32 bits), op, text. */
#define HB_G_OFF 24
#define HB_G_OP (HB_G_OFF + 24)
#define HB_G_TEXT (HB_G_OP + TP_NOTICE_OP)
#define HB_GMSG (HB_G_TEXT + TP_NOTICE_TEXT)
#define HB_NOTES_MAX 256 /* notices kept (one per failed group) */
#define HB_NOTICE_ONLY_NS 200000000ull /* repeats without heartbeats */

enum { HB_BEAT = 1, HB_DEAD = 2, HB_BYE = 3, HB_GFAIL = 4 };

struct hb_gwatch { /* a group's stop word, by context id */
    uint32_t ctx;
    _Atomic int *stop;
};

struct hb_out { /* a notice still to be repeated */
    unsigned char msg[HB_GMSG];
    int *to;
    size_t nto;
    int left;
};

struct tp_hb {
    int fd, family;
    int wake[2];               /* pipe: stop or announce now */
    pthread_t th;
    int running;
    _Atomic int stop, announce;
    uint64_t timeout_ns, period_ns;
    int watch[2], nwatch;
    /* the thread's rounds and tp_news: one reader of the socket at a
     * time (and of the fields receive() writes) */
    pthread_mutex_t rxlock;
    /* glock: the notices received, the groups watching, the notices to
     * repeat (taken after rxlock, never before it) */
    pthread_mutex_t glock;
    struct tp_notice *notes;
    size_t nnotes;
    struct hb_gwatch *gw;
    size_t ngw, capgw;
    struct hb_out *out;
    size_t nout, capout;
};

static double env_timeout(void)
{
    const char *s = getenv(HB_ENV);
    if (!s || !*s)
        return HB_DEFAULT_S;
    char *end;
    double v = strtod(s, &end);
    if (*end || v < 0 || v > 86400) {
        LOG_WARN("FABRIC", "%s=%s is not a number of seconds; using %.0f",
                 HB_ENV, s, HB_DEFAULT_S);
        return HB_DEFAULT_S;
    }
    return v;
}

/* The IP our network endpoint listens on (its name is a sockaddr for the
 * socket providers), else loopback: then every peer is on this host. */
static void self_ip(const struct fccl_tp *tp, unsigned char ip[16])
{
    static const unsigned char v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0,
                                            0, 0, 0xff, 0xff};
    memcpy(ip, v4map, 12);
    ip[12] = 127, ip[13] = 0, ip[14] = 0, ip[15] = 1;
    for (int i = 0; i < tp->nep; i++) {
        const struct tp_ep *e = &tp->eps[i];
        if (e->kind != TP_EP_NET)
            continue;
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, e->addr, e->addrlen < sizeof(ss) ? e->addrlen
                                                     : sizeof(ss));
        if (ss.ss_family == AF_INET &&
            e->addrlen >= sizeof(struct sockaddr_in)) {
            const struct sockaddr_in *a = (const void *)&ss;
            if (a->sin_addr.s_addr != htonl(INADDR_ANY))
                memcpy(ip + 12, &a->sin_addr, 4);
        } else if (ss.ss_family == AF_INET6 &&
                   e->addrlen >= sizeof(struct sockaddr_in6)) {
            const struct sockaddr_in6 *a = (const void *)&ss;
            if (!IN6_IS_ADDR_UNSPECIFIED(&a->sin6_addr))
                memcpy(ip, &a->sin6_addr, 16);
        }
    }
}

static int bind_socket(int family)
{
    int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t sl;
    if (family == AF_INET6) {
        int off = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        struct sockaddr_in6 *a = (void *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        sl = sizeof(*a);
    } else {
        struct sockaddr_in *a = (void *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        sl = sizeof(*a);
    }
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

void tp_hb_open(struct fccl_tp *tp)
{
    double s = env_timeout();
    struct tp_hb *hb = calloc(1, sizeof(*hb));
    if (!hb)
        return;
    hb->wake[0] = hb->wake[1] = -1;
    hb->family = AF_INET6;
    hb->fd = bind_socket(AF_INET6);
    if (hb->fd < 0) {
        hb->family = AF_INET;
        hb->fd = bind_socket(AF_INET);
    }
    uint16_t port = hb->fd >= 0 ? bound_port(hb->fd) : 0;
    if (port == 0 || pipe2(hb->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        LOG_WARN("FABRIC", "no heartbeat socket (%s): a dead host is found "
                 "only by the deadline", strerror(errno));
        if (hb->fd >= 0)
            close(hb->fd);
        free(hb);
        return;
    }
    /* FCCL_PEER_TIMEOUT=0: no heartbeats, but the socket still carries
     * group notices (a revoke must arrive whatever the timeout) */
    hb->timeout_ns = s > 0 ? (uint64_t)(s * 1e9) : 0;
    hb->period_ns = s > 0 ? hb->timeout_ns / 5 : HB_NOTICE_ONLY_NS;
    pthread_mutex_init(&hb->rxlock, NULL);
    pthread_mutex_init(&hb->glock, NULL);
    tp->hb = hb;
    self_ip(tp, tp->hb_self);
    tp->hb_self[16] = (unsigned char)(port & 0xff);
    tp->hb_self[17] = (unsigned char)(port >> 8);
    tp->hb_self_ok = 1;
}

void tp_hb_add(struct fccl_tp *tp, struct tp_peer *p, const void *blob,
               size_t len, int local)
{
    const unsigned char *a;
    size_t al = 0;
    uint64_t ns = 0;
    p->has_hb = 0;
    if (!tp->hb || tp_blob_proc(blob, len, &p->hb_pid, &ns) != FCCL_OK ||
        tp_blob_find(blob, len, TP_EP_HB, NULL, &a, &al) != FCCL_OK ||
        al != TP_HB_ADDR_LEN)
        return;
    memcpy(p->hb_ip, a, 16);
    p->hb_local = local;
    if (local) { /* same host: loopback works even with the link down */
        static const unsigned char lo[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                             0xff, 0xff, 127, 0, 0, 1};
        memcpy(p->hb_ip, lo, 16);
    }
    p->hb_port = (uint16_t)(a[16] | a[17] << 8);
    p->has_hb = p->hb_port != 0;
}

/* ------------------------------------------------------------------ */

static void put32(unsigned char *b, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        b[k] = (unsigned char)(v >> (8 * k));
}

static uint32_t get32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
           (uint32_t)b[3] << 24;
}

/* Rank r's heartbeat address: filled in at start for my ring neighbours
 * (peers.c), else parsed now from its record into *tmp (a death being
 * announced to everyone, or news from a rank I do not watch: rare, so
 * nobody pays O(n) at start).  NULL if it has none. */
static const struct tp_peer *hb_peer(const struct fccl_tp *tp, int r,
                                     struct tp_peer *tmp)
{
    const void *blob = NULL;
    size_t len = 0;
    int local = 0;
    if (tp->peers[r].has_hb)
        return &tp->peers[r];
    memset(tmp, 0, sizeof(*tmp));
    if (!tp->lookup || tp->lookup(tp->lookup_arg, r, &blob, &len, &local) < 0)
        return NULL;
    tp_hb_add((struct fccl_tp *)tp, tmp, blob, len, local);
    return tmp->has_hb ? tmp : NULL;
}

static void header(const struct fccl_tp *tp, unsigned char *m, int type,
                   uint32_t subject, uint32_t silent_ms)
{
    put32(m, HB_MAGIC);
    put32(m + 4, (uint32_t)type);
    put32(m + 8, (uint32_t)tp->my_rank);
    put32(m + 12, (uint32_t)tp->pid);
    put32(m + 16, subject);
    put32(m + 20, silent_ms);
}

static void send_raw(const struct fccl_tp *tp, int r, const unsigned char *m,
                     size_t len)
{
    struct tp_peer tmp;
    const struct tp_peer *p = hb_peer(tp, r, &tmp);
    if (!p)
        return;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t sl;
    static const unsigned char v4map[12] = {0, 0, 0, 0, 0, 0, 0, 0,
                                            0, 0, 0xff, 0xff};
    if (tp->hb->family == AF_INET6) {
        struct sockaddr_in6 *a = (void *)&ss;
        a->sin6_family = AF_INET6;
        memcpy(&a->sin6_addr, p->hb_ip, 16);
        a->sin6_port = htons(p->hb_port);
        sl = sizeof(*a);
    } else {
        if (memcmp(p->hb_ip, v4map, 12) != 0)
            return; /* an IPv6 peer and no IPv6 here */
        struct sockaddr_in *a = (void *)&ss;
        a->sin_family = AF_INET;
        memcpy(&a->sin_addr, p->hb_ip + 12, 4);
        a->sin_port = htons(p->hb_port);
        sl = sizeof(*a);
    }
    /* Failures (unreachable network, full buffer) are what we detect by
     * silence; nothing to do here. */
    (void)sendto(tp->hb->fd, m, len, MSG_DONTWAIT, (struct sockaddr *)&ss,
                 sl);
}

static void send_to(const struct fccl_tp *tp, int r, int type, int subject,
                    uint32_t silent_ms)
{
    unsigned char m[HB_MSG];
    header(tp, m, type, (uint32_t)subject, silent_ms);
    send_raw(tp, r, m, sizeof(m));
}

/* Set the job's dead rank once.  The CAS to -2 makes the writer of
 * dead_why unique; readers see dead_rank >= 0 only after it is written. */
static int declare(struct fccl_tp *tp, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int declare(struct fccl_tp *tp, int rank, const char *fmt, ...)
{
    int none = -1;
    if (rank >= 0 && rank < tp->nranks) {
        atomic_store(&tp->peers[rank].declared, 1);
        if (atomic_load(&tp->peers[rank].excluded)) /* failed.c */
            return 0;
    }
    if (!atomic_compare_exchange_strong(&tp->dead_rank, &none, -2))
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tp->dead_why, sizeof(tp->dead_why), fmt, ap);
    va_end(ap);
    atomic_store_explicit(&tp->dead_rank, rank, memory_order_release);
    LOG_WARN("FABRIC", "%s", tp->dead_why);
    return 1;
}

static void announce(struct fccl_tp *tp)
{
    struct tp_hb *hb = tp->hb;
    atomic_store(&hb->announce, HB_ANNOUNCE);
    char c = 1;
    (void)!write(hb->wake[1], &c, 1);
}

void tp_hb_suspect(struct fccl_tp *tp, int rank, const char *why)
{
    if (!tp || !tp->peers || rank < 0 || rank >= tp->nranks ||
        rank == tp->my_rank)
        return;
    if (declare(tp, rank, "rank %d failed: %s", rank, why) && tp->hb &&
        tp->hb->running)
        announce(tp);
}

int tp_hb_dead(const struct fccl_tp *tp)
{
    int r;
    /* -2: another thread is declaring (a few us): wait for its verdict, or
     * a rank that lost the race to declare would name no culprit */
    while ((r = atomic_load_explicit(&((struct fccl_tp *)tp)->dead_rank,
                                     memory_order_acquire)) == -2)
        sched_yield();
    return r >= 0 ? r : -1;
}

/* ---- group failure notices ---- */

static void encode_notice(const struct fccl_tp *tp, const struct tp_notice *n,
                          unsigned char *m)
{
    memset(m, 0, HB_GMSG);
    header(tp, m, HB_GFAIL, n->ctx, 0);
    uint64_t ms = n->ms > 0 ? (uint64_t)n->ms : 0;
    put32(m + HB_G_OFF, (uint32_t)n->origin);
    put32(m + HB_G_OFF + 4, (uint32_t)n->status);
    put32(m + HB_G_OFF + 8, n->seq);
    put32(m + HB_G_OFF + 12, (uint32_t)(n->has_seq != 0));
    put32(m + HB_G_OFF + 16, (uint32_t)ms);
    put32(m + HB_G_OFF + 20, (uint32_t)(ms >> 32));
    snprintf((char *)m + HB_G_OP, TP_NOTICE_OP, "%s", n->op);
    snprintf((char *)m + HB_G_TEXT, TP_NOTICE_TEXT, "%s", n->text);
}

static void decode_notice(const unsigned char *m, struct tp_notice *n)
{
    memset(n, 0, sizeof(*n));
    n->ctx = get32(m + 16);
    n->origin = (int)get32(m + HB_G_OFF);
    n->status = (int)get32(m + HB_G_OFF + 4);
    n->seq = get32(m + HB_G_OFF + 8);
    n->has_seq = get32(m + HB_G_OFF + 12) != 0;
    n->ms = (int64_t)((uint64_t)get32(m + HB_G_OFF + 16) |
                      (uint64_t)get32(m + HB_G_OFF + 20) << 32);
    memcpy(n->op, m + HB_G_OP, TP_NOTICE_OP - 1);
    memcpy(n->text, m + HB_G_TEXT, TP_NOTICE_TEXT - 1);
}

static int stop_bits(const struct tp_notice *n)
{
    return TP_STOP_NOTICE |
           (n->status == FCCL_ERR_REVOKED ? TP_STOP_REVOKE : 0);
}

/* Keep the first notice of each group (a revoke replaces a failure: its
 * code is what every later call returns) and stop its waits (under
 * glock). */
static void note_locked(struct tp_hb *hb, const struct tp_notice *n)
{
    for (size_t i = 0; i < hb->nnotes; i++) {
        if (hb->notes[i].ctx != n->ctx)
            continue;
        if (n->status != FCCL_ERR_REVOKED ||
            hb->notes[i].status == FCCL_ERR_REVOKED)
            return;
        hb->notes[i] = *n;
        goto stop;
    }
    if (!hb->notes)
        hb->notes = calloc(HB_NOTES_MAX, sizeof(*hb->notes));
    if (hb->notes && hb->nnotes < HB_NOTES_MAX)
        hb->notes[hb->nnotes++] = *n;
stop:
    for (size_t i = 0; i < hb->ngw; i++)
        if (hb->gw[i].ctx == n->ctx)
            atomic_fetch_or(hb->gw[i].stop, stop_bits(n));
}

static void got_notice(struct fccl_tp *tp, const unsigned char *m, int from)
{
    struct tp_notice n;
    decode_notice(m, &n);
    if (n.origin < 0 || n.origin >= tp->nranks)
        n.origin = from;
    LOG_INFO("FABRIC", "group ctx %u failed on rank %d (told by rank %d): "
             "%s", n.ctx, n.origin, from, n.text);
    pthread_mutex_lock(&tp->hb->glock);
    note_locked(tp->hb, &n);
    pthread_mutex_unlock(&tp->hb->glock);
}

void tp_group_notify(struct fccl_tp *tp, const struct tp_notice *n,
                     const int *members, size_t nmembers)
{
    struct tp_hb *hb = tp ? tp->hb : NULL;
    if (!hb || !tp->peers || nmembers == 0)
        return;
    struct hb_out o = {.left = HB_ANNOUNCE - 1};
    encode_notice(tp, n, o.msg);
    for (size_t i = 0; i < nmembers; i++)
        if (members[i] != tp->my_rank && members[i] >= 0 &&
            members[i] < tp->nranks)
            send_raw(tp, members[i], o.msg, HB_GMSG);
    /* The repeats go from the heartbeat thread (UDP may drop one). */
    o.to = malloc(nmembers * sizeof(int));
    if (!o.to || !hb->running)
        goto drop;
    memcpy(o.to, members, nmembers * sizeof(int));
    o.nto = nmembers;
    pthread_mutex_lock(&hb->glock);
    if (hb->nout == hb->capout) {
        size_t cap = hb->capout ? 2 * hb->capout : 4;
        void *q = realloc(hb->out, cap * sizeof(*hb->out));
        if (!q) {
            pthread_mutex_unlock(&hb->glock);
            goto drop;
        }
        hb->out = q;
        hb->capout = cap;
    }
    hb->out[hb->nout++] = o;
    pthread_mutex_unlock(&hb->glock);
    return;
drop:
    free(o.to);
}

/* One repeat of every notice still owed (heartbeat thread). */
static void repeat_notices(struct fccl_tp *tp)
{
    struct tp_hb *hb = tp->hb;
    pthread_mutex_lock(&hb->glock);
    for (size_t i = 0; i < hb->nout;) {
        struct hb_out *o = &hb->out[i];
        for (size_t k = 0; k < o->nto; k++)
            if (o->to[k] != tp->my_rank && o->to[k] >= 0 &&
                o->to[k] < tp->nranks)
                send_raw(tp, o->to[k], o->msg, HB_GMSG);
        if (--o->left > 0) {
            i++;
            continue;
        }
        free(o->to);
        hb->out[i] = hb->out[--hb->nout];
    }
    pthread_mutex_unlock(&hb->glock);
}

void tp_group_watch(struct fccl_tp *tp, uint32_t ctx, _Atomic int *stop)
{
    struct tp_hb *hb = tp ? tp->hb : NULL;
    if (!hb)
        return;
    pthread_mutex_lock(&hb->glock);
    if (hb->ngw == hb->capgw) {
        size_t cap = hb->capgw ? 2 * hb->capgw : 8;
        void *q = realloc(hb->gw, cap * sizeof(*hb->gw));
        if (!q) { /* unwatched: its waits end by their deadlines */
            pthread_mutex_unlock(&hb->glock);
            return;
        }
        hb->gw = q;
        hb->capgw = cap;
    }
    hb->gw[hb->ngw++] = (struct hb_gwatch){ctx, stop};
    for (size_t i = 0; i < hb->nnotes; i++) /* it came first */
        if (hb->notes[i].ctx == ctx)
            atomic_fetch_or(stop, stop_bits(&hb->notes[i]));
    pthread_mutex_unlock(&hb->glock);
}

void tp_group_unwatch(struct fccl_tp *tp, uint32_t ctx, _Atomic int *stop)
{
    struct tp_hb *hb = tp ? tp->hb : NULL;
    if (!hb)
        return;
    pthread_mutex_lock(&hb->glock);
    for (size_t i = 0; i < hb->ngw; i++)
        if (hb->gw[i].ctx == ctx && hb->gw[i].stop == stop) {
            hb->gw[i] = hb->gw[--hb->ngw];
            break;
        }
    pthread_mutex_unlock(&hb->glock);
}

int tp_group_notice(struct fccl_tp *tp, uint32_t ctx, struct tp_notice *out)
{
    struct tp_hb *hb = tp ? tp->hb : NULL;
    int found = 0;
    if (!hb)
        return 0;
    pthread_mutex_lock(&hb->glock);
    for (size_t i = 0; i < hb->nnotes && !found; i++)
        if (hb->notes[i].ctx == ctx) {
            *out = hb->notes[i];
            found = 1;
        }
    pthread_mutex_unlock(&hb->glock);
    return found;
}

/* This rank was declared dead: its libfabric files in /dev/shm
 * (<pid>:...) go now, while it still runs; peers that mapped them keep
 * their mappings, and no new peer may join a failed job.  Killed later,
 * nothing of it is left behind even when no survivor remains. */
static void remove_own_shm(const struct fccl_tp *tp)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    char prefix[24];
    int pl = snprintf(prefix, sizeof(prefix), "%d:", tp->pid);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strncmp(de->d_name, prefix, (size_t)pl) == 0 &&
            unlinkat(dirfd(d), de->d_name, 0) == 0)
            LOG_DEBUG("FABRIC", "removed my /dev/shm/%s", de->d_name);
    closedir(d);
}

static void receive(struct fccl_tp *tp, uint64_t now)
{
    unsigned char m[HB_GMSG + 8];
    for (;;) {
        ssize_t n = recv(tp->hb->fd, m, sizeof(m), MSG_DONTWAIT);
        if (n < 0)
            return;
        if (n < HB_MSG || get32(m) != HB_MAGIC)
            continue;
        int type = (int)get32(m + 4), from = (int)get32(m + 8);
        if ((type == HB_GFAIL) != (n == HB_GMSG) ||
            (type != HB_GFAIL && n != HB_MSG))
            continue;
        int pid = (int)get32(m + 12), subject = (int)get32(m + 16);
        uint32_t ms = get32(m + 20);
        struct tp_peer tmp;
        const struct tp_peer *fp = from < 0 || from >= tp->nranks ||
                                           from == tp->my_rank
                                       ? NULL
                                       : hb_peer(tp, from, &tmp);
        if (!fp || pid != fp->hb_pid || (type != HB_BEAT && type != HB_BYE &&
                                         atomic_load(&tp->peers[from].excluded)))
            continue; /* not from this job, or verdicts of one left out */
        struct tp_peer *p = &tp->peers[from];
        if (type == HB_BEAT)
            p->hb_heard = now;
        else if (type == HB_BYE)
            p->hb_bye = 1;
        else if (type == HB_GFAIL)
            got_notice(tp, m, from);
        else if (type == HB_DEAD && subject == tp->my_rank &&
                 declare(tp, subject, "this rank (%d) was declared dead by "
                         "rank %d: it did not answer for %.1f s (stopped, "
                         "or its link was down; %s)", subject, from,
                         ms / 1e3, HB_ENV))
            remove_own_shm(tp);
        else if (type == HB_DEAD && subject >= 0 && subject < tp->nranks)
            declare(tp, subject, "rank %d is dead: rank %d heard nothing "
                    "from it for %.1f s (%s)", subject, from, ms / 1e3,
                    HB_ENV);
    }
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Remove the shm files of local peers whose process has exited without
 * closing its endpoint (libfabric's <pid>:...) or while setting up a
 * group's segment (fccl-<pid>-<n>, coll/shm/seg.c).  One pass over the
 * directory for all of them: at finalize many peers exit at once, and a
 * scan per peer made it O(n^2) per rank (n files in /dev/shm). */
static void clean_exited(struct fccl_tp *tp)
{
    int *gone = NULL, ngone = 0, cap = 0;
    for (int r = 0; r < tp->nranks; r++) {
        struct tp_peer *p = &tp->peers[r];
        if (p->pidfd < 0 || p->shm_cleaned)
            continue;
        struct pollfd pf = {.fd = p->pidfd, .events = POLLIN};
        if (poll(&pf, 1, 0) <= 0)
            continue;
        if (ngone == cap) {
            int *g = realloc(gone, sizeof(int) * (size_t)(cap = cap * 2 + 8));
            if (!g)
                break;
            gone = g;
        }
        p->shm_cleaned = 1;
        gone[ngone++] = p->live_pid;
    }
    DIR *d = ngone ? opendir("/dev/shm") : NULL;
    if (d) {
        qsort(gone, (size_t)ngone, sizeof(int), cmp_int);
        struct dirent *de;
        char *end;
        while ((de = readdir(d))) {
            char *nm = de->d_name, *at = nm + (strncmp(nm, "fccl-", 5) ? 0 : 5);
            long pid = strtol(at, &end, 10);
            int key = (int)pid;
            if (end == at || *end != (at != nm ? '-' : ':') || pid <= 0 ||
                pid > INT_MAX ||
                !bsearch(&key, gone, (size_t)ngone, sizeof(int), cmp_int))
                continue;
            if (unlinkat(dirfd(d), nm, 0) == 0)
                LOG_DEBUG("FABRIC", "removed /dev/shm/%s (exited)", nm);
        }
        closedir(d);
    }
    free(gone);
}

static void beat(struct fccl_tp *tp, uint64_t now)
{
    struct tp_hb *hb = tp->hb;
    for (int i = 0; i < hb->nwatch; i++)
        send_to(tp, hb->watch[i], HB_BEAT, -1, 0);
    int dead = tp_hb_dead(tp);
    if (dead >= 0 && atomic_load(&hb->announce) > 0) {
        atomic_fetch_sub(&hb->announce, 1);
        uint64_t silent = dead < tp->nranks && tp->peers[dead].hb_heard &&
                                  now > tp->peers[dead].hb_heard
                              ? now - tp->peers[dead].hb_heard
                              : 0;
        /* the dead rank too: stopped, it reads the verdict on resuming */
        for (int r = 0; r < tp->nranks; r++)
            if (r != tp->my_rank)
                send_to(tp, r, HB_DEAD, dead, (uint32_t)(silent / 1000000));
    }
}

/* A silent neighbour: declare it and tell everyone at once (before this
 * rank's own failure makes it exit, which its local peers would see
 * first). */
static void check(struct fccl_tp *tp, uint64_t now)
{
    struct tp_hb *hb = tp->hb;
    for (int i = 0; i < hb->nwatch; i++) {
        struct tp_peer *p = &tp->peers[hb->watch[i]];
        if (p->hb_bye || now - p->hb_heard <= hb->timeout_ns)
            continue;
        if (declare(tp, hb->watch[i], "rank %d is dead: no heartbeat from "
                    "it for %.1f s (%s=%.1f; its host is down, its link "
                    "is cut, or it is stopped)", hb->watch[i],
                    (double)(now - p->hb_heard) / 1e9, HB_ENV,
                    (double)hb->timeout_ns / 1e9)) {
            atomic_store(&hb->announce, HB_ANNOUNCE);
            beat(tp, now);
        }
    }
}

static void *hb_main(void *arg)
{
    struct fccl_tp *tp = arg;
    struct tp_hb *hb = tp->hb;
    uint64_t last = fccl_now_ns(), sent = 0;
    while (!atomic_load(&hb->stop)) {
        pthread_mutex_lock(&hb->rxlock);
        uint64_t now = fccl_now_ns();
        if (now - last > hb->timeout_ns / 2) /* we were stopped/starved */
            for (int i = 0; i < hb->nwatch; i++)
                tp->peers[hb->watch[i]].hb_heard = now;
        last = now;
        if (now - sent >= hb->period_ns || atomic_load(&hb->announce) ==
                                               HB_ANNOUNCE) {
            beat(tp, now);
            repeat_notices(tp);
            clean_exited(tp);
            sent = now;
        }
        if (tp_hb_dead(tp) < 0)
            check(tp, now);
        pthread_mutex_unlock(&hb->rxlock);
        struct pollfd pf[2] = {{.fd = hb->fd, .events = POLLIN},
                               {.fd = hb->wake[0], .events = POLLIN}};
        int ms = (int)(hb->period_ns / 2000000);
        if (poll(pf, 2, ms > 0 ? ms : 1) > 0) {
            char buf[16];
            while (read(hb->wake[0], buf, sizeof(buf)) > 0)
                ;
            pthread_mutex_lock(&hb->rxlock);
            receive(tp, fccl_now_ns());
            pthread_mutex_unlock(&hb->rxlock);
        }
    }
    return NULL;
}

int tp_news(struct fccl_tp *tp)
{
    struct tp_hb *hb = tp ? tp->hb : NULL;
    if (hb && tp->peers) {
        pthread_mutex_lock(&hb->rxlock);
        receive(tp, fccl_now_ns());
        pthread_mutex_unlock(&hb->rxlock);
    }
    return tp ? tp_hb_dead(tp) : -1;
}

void tp_hb_start(struct fccl_tp *tp)
{
    struct tp_hb *hb = tp->hb;
    if (!hb || hb->running || tp->nranks < 2)
        return;
    int me = tp->my_rank, n = tp->nranks;
    int cand[2] = {(me + n - 1) % n, (me + 1) % n};
    uint64_t now = fccl_now_ns();
    for (int i = 0; i < 2 && hb->timeout_ns; i++) {
        if (!tp->peers[cand[i]].has_hb ||
            (i == 1 && hb->nwatch && hb->watch[0] == cand[1]))
            continue;
        hb->watch[hb->nwatch++] = cand[i];
    }
    for (int r = 0; r < n; r++)
        tp->peers[r].hb_heard = now;
    if (pthread_create(&hb->th, NULL, hb_main, tp) != 0) {
        LOG_WARN("FABRIC", "no heartbeat thread: a dead host is found only "
                 "by the deadline");
        return;
    }
    hb->running = 1;
    LOG_DEBUG("FABRIC", "heartbeats every %.1f s; watching %d neighbour(s)",
              (double)hb->period_ns / 1e9, hb->nwatch);
}

/* Nearest rank from me in direction dir (+1, -1) that is not excluded
 * and has a heartbeat address, or -1. */
static int ring_next(struct fccl_tp *tp, int dir)
{
    int n = tp->nranks;
    for (int k = 1; k < n; k++) {
        int r = ((tp->my_rank + dir * k) % n + n) % n;
        if (atomic_load(&tp->peers[r].excluded))
            continue;
        const void *blob = NULL;
        size_t len = 0;
        int local = 0;
        if (!tp->peers[r].has_hb && tp->lookup &&
            tp->lookup(tp->lookup_arg, r, &blob, &len, &local) >= 0)
            tp_hb_add(tp, &tp->peers[r], blob, len, local);
        if (tp->peers[r].has_hb)
            return r;
    }
    return -1;
}

void tp_hb_rewatch(struct fccl_tp *tp)
{
    struct tp_hb *hb = tp ? tp->hb : NULL;
    if (!hb || !hb->running || !hb->timeout_ns)
        return;
    pthread_mutex_lock(&hb->rxlock);
    int cand[2] = {ring_next(tp, -1), ring_next(tp, +1)};
    uint64_t now = fccl_now_ns();
    hb->nwatch = 0;
    for (int i = 0; i < 2; i++) {
        if (cand[i] < 0 || (i == 1 && hb->nwatch && hb->watch[0] == cand[1]))
            continue;
        tp->peers[cand[i]].hb_heard = now;
        hb->watch[hb->nwatch++] = cand[i];
    }
    pthread_mutex_unlock(&hb->rxlock);
}

void tp_hb_hold(struct fccl_tp *tp, int hold)
{
    if (tp->hb)
        (hold ? pthread_mutex_lock : pthread_mutex_unlock)(&tp->hb->rxlock);
}

/* Goodbye to the other ranks on this host (loopback: not lost). */
static void bye_locals(struct fccl_tp *tp)
{
    for (int r = 0; r < tp->nranks; r++) {
        struct tp_peer tmp;
        const struct tp_peer *p = r == tp->my_rank ? NULL
                                                   : hb_peer(tp, r, &tmp);
        if (p && p->hb_local)
            send_to(tp, r, HB_BYE, -1, 0);
    }
}

void tp_hb_stop(struct fccl_tp *tp)
{
    struct tp_hb *hb = tp->hb;
    if (!hb)
        return;
    if (hb->running) {
        atomic_store(&hb->stop, 1);
        char c = 1;
        (void)!write(hb->wake[1], &c, 1);
        pthread_join(hb->th, NULL);
        if (atomic_load(&hb->announce) > 0) /* news not yet sent in full */
            beat(tp, fccl_now_ns());
        clean_exited(tp);
        for (int k = 0; k < 2; k++) /* twice: UDP */
            for (int i = 0; i < hb->nwatch; i++)
                send_to(tp, hb->watch[i], HB_BYE, -1, 0);
        bye_locals(tp);
    }
    close(hb->fd);
    close(hb->wake[0]);
    close(hb->wake[1]);
    for (size_t i = 0; i < hb->nout; i++)
        free(hb->out[i].to);
    free(hb->out);
    free(hb->notes);
    free(hb->gw);
    pthread_mutex_destroy(&hb->rxlock);
    pthread_mutex_destroy(&hb->glock);
    free(hb);
    tp->hb = NULL;
}
