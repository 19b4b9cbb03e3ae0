/*
 * A shared-memory segment for the ranks of a group that all live on one
 * host, and a barrier in it.  Used by the *_shm.c algorithms.
 *
 * Why.  Between processes the kernel's single copy (process_vm_readv) runs
 * at about half of memcpy's speed here (5-6 against 12-13 GB/s: it pins
 * and maps every page).  Two plain memcpys through a mapping both sides
 * share cost about the same as one such copy, and a reduction can read
 * every rank's data in place.
 *
 * A multi-host group may also map one segment per host for its members
 * there (coll_seg_host: all_reduce[hier]'s stages inside a host); the
 * setup is the same over that host's view of the group.
 *
 * Setup, on the group's first use, all members at once: rank 0 creates a
 * segment under a fresh name (its pid and a counter, O_EXCL) and sends the
 * name to the others (or "none"); each maps it and answers; rank 0 removes
 * the name and tells everyone whether all succeeded.  So nothing is left
 * in /dev/shm even if a rank dies later, and every member takes the same
 * decision; if any failed, the group never tries again.
 *
 * Layout (seg_int.h has the head line by line): one 64-byte line per
 * rank holding its barrier count, then per rank two sets of
 * COLL_SHM_TINY_LINES "tiny" lines (below), the lines of the single
 * copies (cma.c) and of the one-way broadcast (oneway.c), then one slot
 * per rank (8 MiB in all, at most 2 MiB a slot), allocated at creation.  The barrier: a rank publishes its
 * count (release) and waits until every count has reached it (acquire),
 * backing off like the transport's waits and checking the deadline, the
 * group's abort flag and whether a member's process has exited.
 *
 * Tiny calls (up to COLL_SHM_TINY bytes a rank) carry their data in the
 * lines that signal it: each 64-byte line holds 56 bytes of payload and
 * the call's number, stored (release) after the payload.  A reader that
 * sees the number (acquire) has the payload in the same line, so a peer's
 * contribution costs one cache-line transfer instead of two (the barrier
 * line, then the slot), which is most of an 8-byte all_reduce here.  The
 * sets alternate from tiny call to tiny call, and every member waits for
 * all lines of a call, so a set is written again only after everyone has
 * read it (as the slot halves of coll_seg_small).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "seg_int.h"
#include "shm.h"

#define SEG_NAME_MAX 64
#define SEG_STEP_NAME 0 /* message steps of the setup */
#define SEG_STEP_ACK 1
#define SEG_STEP_GO 2
#define SEG_CHECK_NS 200000000ull /* liveness check while waiting */
#define SEG_MOVE_NS 10000000ull /* at most one move_off per thread this often */
#define SEG_CROWD_NS 50000ull /* a crowded CPU looked for at most this often */
#define SEG_GAP_NS 1000000000ull /* clock readings this far apart: we were
                                    stopped (SIGSTOP) or starved */

_Static_assert(COLL_SHM_TINY == COLL_SHM_TINY_LINES * TINY_PAYLOAD,
               "COLL_SHM_TINY is the payload of a set");

static size_t slot_bytes(int n)
{
    size_t s = ((size_t)8 << 20) / (size_t)n; /* 8 MiB in all */
    if (s > ((size_t)2 << 20))
        s = (size_t)2 << 20;
    if (s < ((size_t)256 << 10))
        s = (size_t)256 << 10;
    return s & ~(size_t)4095;
}

/* The head's lines (seg_int.h), rounded to whole pages. */
static size_t head_len(int n)
{
    return (seg_head_bytes(n) + 4095) & ~(size_t)4095;
}

static size_t seg_len(int n, size_t slot)
{
    return head_len(n) + (size_t)n * slot;
}

static struct coll_seg *seg_map(const char *name, int n, int me, int create)
{
    size_t slot = slot_bytes(n), len = seg_len(n, slot);
    int fd = create ? shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600)
                    : shm_open(name, O_RDWR, 0);
    if (fd < 0)
        return NULL;
    /* allocated now, so that a full /dev/shm fails here rather than
     * with SIGBUS at the first write */
    if (create && posix_fallocate(fd, 0, (off_t)len) != 0) {
        close(fd);
        shm_unlink(name);
        return NULL;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    struct coll_seg *s = p == MAP_FAILED ? NULL : calloc(1, sizeof(*s));
    if (!s) {
        if (p != MAP_FAILED)
            munmap(p, len);
        if (create)
            shm_unlink(name);
        return NULL;
    }
    *s = (struct coll_seg){.base = p, .len = len, .slot = slot, .n = n,
                           .me = me, .cma = -1};
    return s;
}

void coll_seg_free(struct coll_seg *s)
{
    if (!s)
        return;
    munmap(s->base, s->len);
    free(s->probe);
    free(s);
}

size_t coll_seg_slot_bytes(const struct coll_seg *s) { return s->slot; }

size_t coll_seg_round(const struct coll_seg *s)
{
    return s->slot < COLL_SHM_ROUND ? s->slot : COLL_SHM_ROUND;
}

size_t coll_seg_small(struct coll_seg *s)
{
    s->last_small = 1;
    return (s->small++ % 2) * (s->slot / 2);
}

int coll_seg_large(struct coll_run *run, struct coll_seg *s)
{
    int was = s->last_small;
    s->last_small = 0;
    return was ? coll_seg_barrier(run, s) : FCCL_OK;
}

unsigned char *coll_seg_slot(const struct coll_seg *s, int q)
{
    return s->base + head_len(s->n) + (size_t)q * s->slot;
}

static _Atomic uint64_t *arrive(const struct coll_seg *s, int q)
{
    return seg_word(seg_line(s, 0, q), 0);
}

/* Word 1 of a member's barrier line: 1 + the CPU it last waited on (0:
 * unknown), so a waiter can tell that the member it waits for shares its
 * CPU (seg_wait). */
static _Atomic uint64_t *cpu_word(const struct coll_seg *s, int q)
{
    return seg_word(seg_line(s, 0, q), 1);
}

/* Line i of member q's tiny set for call number t. */
static unsigned char *tiny_line(const struct coll_seg *s, int q, uint64_t t,
                                size_t i)
{
    size_t set = (size_t)q * 2 + (size_t)(t & 1);
    return s->base + seg_off_tiny(s->n) + set * TINY_SET_BYTES +
           i * SEG_LINE;
}

/* ---- setup ---- */

static int root_setup(struct coll_run *run, const struct coll_view *v,
                      struct coll_seg **out)
{
    static _Atomic unsigned counter;
    char name[SEG_NAME_MAX];
    snprintf(name, sizeof(name), "/fccl-%d-%u", (int)getpid(),
             atomic_fetch_add(&counter, 1));
    /* FCCL_SHM_SEGMENT=0: no segments (the transport fallbacks, tests) */
    const char *env = getenv("FCCL_SHM_SEGMENT");
    int off = env && strcmp(env, "0") == 0;
    struct coll_seg *s = off ? NULL : seg_map(name, v->n, 0, 1);
    if (!s && !off && errno == EEXIST) {
        /* our pid in the name: left by a dead process that had it */
        shm_unlink(name);
        s = seg_map(name, v->n, 0, 1);
    }
    if (!s) {
        LOG_INFO("COLL", "%s: no shared segment (%s); all_reduce uses the "
                 "transport", run->g->name, name);
        name[0] = '\0';
    }
    int rc = FCCL_OK, ok = s != NULL;
    struct tp_req r;
    for (int q = 1; q < v->n && rc >= 0; q++) {
        rc = cr_isend(run, v, q, SEG_STEP_NAME, name, sizeof(name), &r);
        if (rc >= 0)
            rc = cr_wait(run, &r, 1);
    }
    for (int q = 1; q < v->n && rc >= 0 && name[0]; q++) {
        int got = 0;
        rc = cr_irecv(run, v, q, SEG_STEP_ACK, &got, sizeof(got), &r);
        if (rc >= 0)
            rc = cr_wait(run, &r, 1);
        ok &= got == 1;
    }
    if (name[0])
        shm_unlink(name);
    for (int q = 1; q < v->n && rc >= 0 && name[0]; q++) {
        rc = cr_isend(run, v, q, SEG_STEP_GO, &ok, sizeof(ok), &r);
        if (rc >= 0)
            rc = cr_wait(run, &r, 1);
    }
    if (rc < 0 || !ok) {
        coll_seg_free(s);
        s = NULL;
    }
    *out = s;
    return rc;
}

static int member_setup(struct coll_run *run, const struct coll_view *v,
                        struct coll_seg **out)
{
    char name[SEG_NAME_MAX];
    struct tp_req r;
    *out = NULL;
    int rc = cr_irecv(run, v, 0, SEG_STEP_NAME, name, sizeof(name), &r);
    if (rc >= 0)
        rc = cr_wait(run, &r, 1);
    if (rc < 0 || !memchr(name, '\0', sizeof(name)) || !name[0])
        return rc < 0 ? rc : FCCL_OK;
    struct coll_seg *s = seg_map(name, v->n, v->me, 0);
    int got = s != NULL, ok = 0;
    rc = cr_isend(run, v, 0, SEG_STEP_ACK, &got, sizeof(got), &r);
    if (rc >= 0)
        rc = cr_wait(run, &r, 1);
    if (rc >= 0)
        rc = cr_irecv(run, v, 0, SEG_STEP_GO, &ok, sizeof(ok), &r);
    if (rc >= 0)
        rc = cr_wait(run, &r, 1);
    if (rc < 0 || ok != 1) {
        coll_seg_free(s);
        return rc;
    }
    *out = s;
    return FCCL_OK;
}

int coll_seg_get(struct coll_run *run, struct coll_seg **out)
{
    struct coll_state *st = run->st;
    *out = st->seg;
    if (st->seg || st->seg_failed || run->g->nnodes != 1 || run->g->size < 2)
        return FCCL_OK;
    struct coll_view v = view_of_group(run->g);
    int rc = v.me == 0 ? root_setup(run, &v, &st->seg)
                       : member_setup(run, &v, &st->seg);
    st->seg_failed = rc >= 0 && !st->seg;
    *out = st->seg;
    return rc;
}

int coll_seg_host(struct coll_run *run, const struct coll_view *v,
                  struct coll_seg **out)
{
    struct coll_state *st = run->st;
    *out = st->hseg;
    if (st->hseg || st->hseg_failed || v->n < 2)
        return FCCL_OK;
    int rc = v->me == 0 ? root_setup(run, v, &st->hseg)
                        : member_setup(run, v, &st->hseg);
    st->hseg_failed = rc >= 0 && !st->hseg;
    *out = st->hseg;
    return rc;
}

int coll_seg_size(const struct coll_seg *s) { return s->n; }
int coll_seg_rank(const struct coll_seg *s) { return s->me; }

/* ---- waits, the barrier and tiny calls ---- */

static int barrier_late(const struct coll_seg *s, int q, uint64_t target)
{
    return atomic_load_explicit(arrive(s, q), memory_order_acquire) < target;
}

/* Some line of q's set of tiny call t is not stamped yet. */
static int tiny_late(const struct coll_seg *s, int q, uint64_t t)
{
    for (size_t i = 0; i < s->tiny_lines; i++)
        if (atomic_load_explicit(seg_stamp(tiny_line(s, q, t, i)),
                                 memory_order_acquire) < t)
            return 1;
    return 0;
}

static int none_late(const struct coll_seg *s, seg_late_fn late,
                     uint64_t target)
{
    for (int q = 0; q < s->n; q++)
        if (late(s, q, target))
            return 0;
    return 1;
}

/* "rank 3 (world 3)" etc.: the members still late, up to four.  Members
 * of a host segment are the view's, so only their segment index is
 * certain: world ranks are named for a whole-group segment. */
static const char *seg_laggards(const struct coll_seg *s,
                                const struct fccl_group *g, seg_late_fn late,
                                uint64_t target)
{
    static _Thread_local char buf[160];
    size_t off = 0;
    int named = 0;
    buf[0] = '\0';
    for (int q = 0; q < s->n && named < 4; q++) {
        if (!late(s, q, target))
            continue;
        int w = s->n == g->size
                    ? snprintf(buf + off, sizeof(buf) - off, "%srank %d "
                               "(world %d)", named ? ", " : "", q, g->world[q])
                    : snprintf(buf + off, sizeof(buf) - off, "%smember %d "
                               "of this host", named ? ", " : "", q);
        if (w < 0 || (size_t)w >= sizeof(buf) - off)
            break;
        off += (size_t)w;
        named++;
    }
    return named ? buf : "peers";
}

static int seg_dead(struct fccl_group *g, int dead, const char *what)
{
    return fccl_err(FCCL_ERR_PEER, "%s: world rank %d: %s (shared-memory %s)",
                    g->name, dead, tp_dead_why(g->tp, dead), what);
}

/* Say which CPU I wait on and return it (+ 1; 0 unknown).  Written only
 * when it changed: the others poll this line. */
static uint64_t publish_cpu(const struct coll_seg *s)
{
    int c = sched_getcpu();
    uint64_t v = c >= 0 ? (uint64_t)c + 1 : 0;
    if (atomic_load_explicit(cpu_word(s, s->me), memory_order_relaxed) != v)
        atomic_store_explicit(cpu_word(s, s->me), v, memory_order_relaxed);
    return v;
}

/* The member I wait for that shares my CPU (as of its last wait), or -1.
 * Then my spinning only keeps it off the CPU: with other work keeping
 * every core busy the scheduler sometimes puts two ranks on one core
 * (about one run in three, two busy loops on the 2 cores), and each wait
 * then lasted the waiter's whole spin budget, or a 4 ms tick (2 ranks,
 * 8-byte all_reduce: 0.3 us, or 0.5-4 ms in those runs). */
static int shares_cpu(const struct coll_seg *s, seg_late_fn late,
                      uint64_t target, uint64_t mine)
{
    for (int q = 0; mine && q < s->n; q++)
        if (q != s->me && late(s, q, target) &&
            atomic_load_explicit(cpu_word(s, q), memory_order_relaxed) ==
                mine)
            return q;
    return -1;
}

/* Members whose last wait was on CPU `cpu` (+ 1). */
static int members_on(const struct coll_seg *s, uint64_t cpu)
{
    int k = 0;
    for (int q = 0; q < s->n; q++)
        k += atomic_load_explicit(cpu_word(s, q), memory_order_relaxed) ==
             cpu;
    return k;
}

/* Leave CPU `cpu` (+ 1), which I share with a member I wait for.
 * Yielding alone only takes turns on it (5-20 us an 8-byte all_reduce,
 * half the core's speed for large ones), and the kernel does not
 * separate us: the cores are balanced by count, two tasks each.
 * Excluding the CPU from this thread's mask for a moment moves it now;
 * the mask is restored at once (the thread stays where it was moved, and
 * the balancer then evens the counts with the other work).  Of two
 * members sharing, only the higher moves, and at most every SEG_MOVE_NS,
 * so a stale CPU word costs little.  With more members than CPUs
 * (`over`) some must share: one moves only off a CPU holding more than
 * its share of them.  As a job starts its ranks sit where the kernel put
 * them; with moves the first hundred 8-byte all_reduces of 4 ranks
 * on 2 busy cores took 19-24 us each instead of 28-34; moving off an
 * even share too made 1 MiB and 64 MiB calls 0.8x as fast
 * (bench/RESULTS.md, "Four ranks on two busy cores"). */
static void move_off(const struct coll_seg *s, uint64_t now, uint64_t cpu,
                     int over)
{
    static _Thread_local uint64_t last, looked;
    cpu_set_t mine, others;
    int c = (int)cpu - 1;
    if ((last && now - last < SEG_MOVE_NS) ||
        (over && looked && now - looked < SEG_CROWD_NS))
        return;
    looked = now; /* with many members, counting them costs */
    if (sched_getaffinity(0, sizeof(mine), &mine) != 0 ||
        !CPU_ISSET(c, &mine) || CPU_COUNT(&mine) < 2)
        return;
    int cpus = CPU_COUNT(&mine);
    if (over && members_on(s, cpu) * cpus <= s->n + cpus - 1)
        return; /* at most its share, rounded up */
    last = now;
    others = mine;
    CPU_CLR(c, &others);
    if (sched_setaffinity(0, sizeof(others), &others) == 0)
        sched_setaffinity(0, sizeof(mine), &mine);
}

/* A rank resumed after a stop, or at its deadline, first reads the
 * heartbeats' news (tp_news): declared dead meanwhile, it says so and by
 * whom, rather than that it timed out.  An abort (or a failure of the
 * group elsewhere: api/ says which) ends the wait at once. */
int seg_wait(struct coll_run *run, const struct coll_seg *s,
             seg_late_fn late, uint64_t target, const char *what)
{
    if (none_late(s, late, target))
        return FCCL_OK;
    struct fccl_group *g = run->g;
    /* the clock is first read at the 16th poll: most waits of an 8-byte
     * call end before it; where waiters yield at once, at every poll (the
     * yield costs far more, and a move should not wait 16 yields) */
    uint64_t t0 = 0, checked = 0, prev = 0, cpu;
    int shared = 0, ever = 0, with, over = tp_yields_at_once(g->tp);
    for (unsigned polls = 1;; polls++) {
        if (none_late(s, late, target)) {
            /* the transport's spin budget learns (wait.c) from waits
             * that lasted; the short ones (most of an 8-byte call's)
             * teach nothing and are left without a clock reading */
            if (!ever && polls > 16)
                tp_wait_done(g->tp, t0);
            return FCCL_OK;
        }
        if (polls % 16 && !over) {
            /* with a member we wait for on our CPU this yields at once;
             * else it returns, and the clock read below decides with the
             * transport's rule when to stop spinning */
            if (shared)
                sched_yield();
            else
                tp_idle(g->tp, 0);
            continue;
        }
        uint64_t now = fccl_now_ns();
        if (!t0)
            t0 = checked = prev = now;
        /* With more ranks here than CPUs every waiter yields at once
         * anyway, but a crowded CPU is still worth leaving (move_off) */
        cpu = publish_cpu(s);
        with = shares_cpu(s, late, target, cpu);
        shared = with >= 0;
        ever |= shared; /* such a wait's length teaches nothing */
        if (shared && s->me > with)
            move_off(s, now, cpu, over);
        int gap = now - prev >= SEG_GAP_NS, dead;
        prev = now;
        if (atomic_load(&g->stop))
            return fccl_err(FCCL_ERR_ABORTED, "%s: group aborted in a "
                            "shared-memory %s", g->name, what);
        if ((gap || now >= run->deadline) && (dead = tp_news(g->tp)) >= 0)
            return seg_dead(g, dead, what);
        if (now >= run->deadline)
            return fccl_err(FCCL_ERR_TIMEOUT, "%s: timed out in a "
                            "shared-memory %s waiting for %s", g->name, what,
                            seg_laggards(s, g, late, target));
        /* once idle, a death announced meanwhile counts at once (one
         * atomic load), as in the transport's waits: the survivors fail
         * within ms of one another, not up to a check period apart */
        if (now - t0 >= SEG_CHECK_NS && (dead = tp_dead_rank(g->tp)) >= 0)
            return seg_dead(g, dead, what);
        if (now - checked >= SEG_CHECK_NS) {
            checked = now;
            dead = tp_dead_peer(g->tp, g->world, (size_t)g->size);
            if (dead >= 0) { /* the other hosts' ranks learn it now too */
                tp_report_dead(g->tp, dead);
                return seg_dead(g, dead, what);
            }
        }
        if (shared && !over)
            sched_yield();
        tp_idle(g->tp, now - t0);
    }
}

int coll_seg_barrier(struct coll_run *run, struct coll_seg *s)
{
    uint64_t target = ++s->count;
    atomic_store_explicit(arrive(s, s->me), target, memory_order_release);
    return seg_wait(run, s, barrier_late, target, "barrier");
}

/* The led barrier's waits: member 0 waits for the others; the others wait
 * for member 0, which arrives only once they all have (a member that has
 * not arrived either is named too, for a timeout's message). */
static int others_late(const struct coll_seg *s, int q, uint64_t target)
{
    return q != 0 && barrier_late(s, q, target);
}

static int leader_late(const struct coll_seg *s, int q, uint64_t target)
{
    return barrier_late(s, 0, target) && (q == 0 || barrier_late(s, q, target));
}

int coll_seg_barrier_led(struct coll_run *run, struct coll_seg *s)
{
    uint64_t target = ++s->count;
    if (s->me != 0) {
        atomic_store_explicit(arrive(s, s->me), target, memory_order_release);
        return seg_wait(run, s, leader_late, target, "barrier");
    }
    int rc = seg_wait(run, s, others_late, target, "barrier");
    if (rc >= 0)
        atomic_store_explicit(arrive(s, 0), target, memory_order_release);
    return rc;
}

void seg_lines_put(unsigned char *line, const void *src, size_t bytes,
                   size_t lines, uint64_t t)
{
    const unsigned char *in = src;
    for (size_t i = 0; i < lines; i++, line += SEG_LINE) {
        size_t k = bytes > i * TINY_PAYLOAD ? bytes - i * TINY_PAYLOAD : 0;
        memcpy(line, in + i * TINY_PAYLOAD, k < TINY_PAYLOAD ? k : TINY_PAYLOAD);
        atomic_store_explicit(seg_stamp(line), t, memory_order_release);
    }
}

void seg_lines_get(const unsigned char *line, size_t off, void *dst,
                   size_t bytes)
{
    unsigned char *out = dst;
    line += off / TINY_PAYLOAD * SEG_LINE;
    off %= TINY_PAYLOAD;
    for (size_t done = 0; done < bytes; line += SEG_LINE, off = 0) {
        size_t k = TINY_PAYLOAD - off < bytes - done ? TINY_PAYLOAD - off
                                                     : bytes - done;
        memcpy(out + done, line + off, k);
        done += k;
    }
}

void coll_seg_tiny_put(struct coll_seg *s, const void *src, size_t bytes,
                       size_t span)
{
    uint64_t t = ++s->tiny;
    s->tiny_lines = seg_lines_for(span);
    seg_lines_put(tiny_line(s, s->me, t, 0), src, bytes, s->tiny_lines, t);
}

int coll_seg_tiny_wait(struct coll_run *run, struct coll_seg *s)
{
    return seg_wait(run, s, tiny_late, s->tiny, "exchange");
}

void coll_seg_tiny_get(const struct coll_seg *s, int q, size_t off,
                       void *dst, size_t bytes)
{
    seg_lines_get(tiny_line(s, q, s->tiny, 0), off, dst, bytes);
}

struct coll_seg *coll_seg_for_small(struct coll_run *run, size_t bytes,
                                    size_t *half, int *rc)
{
    struct fccl_group *g = run->g;
    struct coll_seg *s = NULL;
    *rc = FCCL_OK;
    if (bytes == 0 || bytes > COLL_SHM_SMALL)
        return NULL;
    if ((*rc = coll_seg_get(run, &s)) < 0 || !s ||
        bytes * (size_t)g->size > coll_seg_slot_bytes(s) / 2)
        return NULL;
    *half = coll_seg_small(s);
    return s;
}

