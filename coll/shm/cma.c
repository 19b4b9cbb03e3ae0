/*
 * Single copies between the members of a segment: a member exposes a
 * buffer of its own in its exposure line, the others read it with
 * process_vm_readv (or, where the owner granted it, write it with
 * process_vm_writev), and the handshake is a cache line, not a message.
 *
 * Why.  The transport's single copy (rndv.c) costs a descriptor message
 * and a FIN through libfabric's shm queues around every copy, and only the
 * receiver works.  Through the segment the signal is one line each way
 * (about 0.3 us for a round trip here), a member may copy from every peer
 * that has exposed, in whatever order they arrive, and both sides of a
 * two-rank broadcast can copy at once (bench/RESULTS.md, issue 28: 1 MiB
 * between two processes, one readv 69 us, a readv and a writev of half
 * each at once 21 us).
 *
 * Agreement.  Whether CMA works is decided once per segment, by every
 * member at the same call (the first that asks, coll_seg_cma): each
 * publishes its pid, pid namespace and the address and value of a random
 * word of its own; barrier; each reads every peer's word and publishes
 * whether all matched (FCCL_CMA=0: no); barrier; CMA is on if every
 * member said yes.  So all members take the same decision, and the
 * algorithms that depend on it choose alike.
 *
 * A call.  Every member calls coll_seg_expose once (the call's number is
 * the count of such calls, the same everywhere); the exposure line holds
 * the address, the length and a grant word, stored before the number
 * (release), so a reader that sees the number (acquire) sees the rest.
 * Members then copy, and end with coll_seg_barrier: nobody leaves while
 * someone may still read its buffer, and a member rewrites its exposure
 * only after that barrier, when nobody reads the line any more.
 *
 * Writes.  A member that exposes with write permission grants it for
 * this call only; the writer claims the grant (compare-and-swap) before it
 * writes and marks it done (or failed) after.  The owner, before it
 * leaves the call, waits for done; if it must leave early (timeout,
 * abort, a dead peer) it revokes the grant with the same compare-and-swap,
 * and if the writer had claimed it already, it waits for the write to end
 * (the writer is inside one system call, which a stop signal does not
 * interrupt) or for the writer's death.  So no write reaches a buffer
 * whose owner has left the call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "seg_int.h"
#include "shm.h"

/* id line words */
enum { ID_PID, ID_PIDNS, ID_ADDR, ID_VALUE, ID_VERDICT };
/* exposure line words */
enum { EX_SEQ, EX_ADDR, EX_LEN, EX_GRANT };
/* verdicts (0: not given yet) */
enum { VERDICT_NO = 1, VERDICT_YES = 2 };
/* grant word: state in the top byte, the call's number below */
#define GRANT_SHIFT 56
#define GRANT_SEQ(w) ((w) & ((1ull << GRANT_SHIFT) - 1))
enum { G_NONE, G_OPEN, G_CLAIMED, G_DONE, G_FAILED, G_REVOKED };
/* After a revocation came too late: how long the owner waits for a
 * claimed write to end before it gives up on it (a write is one system
 * call of at most a few ms; its writer, even stopped, has finished it). */
#define SETTLE_NS 1000000000ull

static uint64_t grant(int state, uint64_t seq)
{
    return ((uint64_t)state << GRANT_SHIFT) | GRANT_SEQ(seq);
}

static unsigned char *id_line(const struct coll_seg *s, int q)
{
    return seg_line(s, seg_off_id(s->n), q);
}

static unsigned char *expo_line(const struct coll_seg *s, int q)
{
    return seg_line(s, seg_off_expo(s->n), q);
}

static uint64_t word(const unsigned char *line, int i)
{
    return atomic_load_explicit(seg_word((unsigned char *)line, i),
                                memory_order_acquire);
}

static void put_word(unsigned char *line, int i, uint64_t v)
{
    atomic_store_explicit(seg_word(line, i), v, memory_order_release);
}

static uint64_t pidns_inode(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* process_vm_readv/writev of len bytes, resuming after partial copies:
 * 0 or a positive errno. */
static int vm_copy(int pid, int write, void *local, uint64_t remote,
                   size_t len)
{
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)local + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(remote + done), len - done};
        ssize_t k = write ? process_vm_writev(pid, &l, 1, &r, 1, 0)
                          : process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EFAULT;
        done += (size_t)k;
    }
    return 0;
}

/* ---- agreement ---- */

static int publish_id(struct coll_seg *s)
{
    if (!s->probe && !(s->probe = malloc(sizeof(*s->probe))))
        return fccl_err(FCCL_ERR_NOMEM, "shared segment: out of memory");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *s->probe = ((uint64_t)ts.tv_nsec << 24) ^ (uint64_t)ts.tv_sec ^
                ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)s;
    unsigned char *l = id_line(s, s->me);
    put_word(l, ID_VERDICT, 0);
    put_word(l, ID_PID, (uint64_t)getpid());
    put_word(l, ID_PIDNS, pidns_inode());
    put_word(l, ID_ADDR, (uint64_t)(uintptr_t)s->probe);
    put_word(l, ID_VALUE, *s->probe);
    return FCCL_OK;
}

/* May I read every peer's memory? */
static int can_read_all(const struct coll_seg *s)
{
    const char *env = getenv("FCCL_CMA");
    if (env && strcmp(env, "0") == 0)
        return 0;
    uint64_t ns = pidns_inode();
    for (int q = 0; q < s->n; q++) {
        const unsigned char *l = id_line(s, q);
        uint64_t v = 0;
        if (q == s->me)
            continue;
        if (!ns || word(l, ID_PIDNS) != ns ||
            vm_copy((int)word(l, ID_PID), 0, &v, word(l, ID_ADDR),
                    sizeof(v)) != 0 ||
            v != word(l, ID_VALUE))
            return 0;
    }
    return 1;
}

int coll_seg_cma(struct coll_run *run, struct coll_seg *s)
{
    if (s->cma >= 0)
        return s->cma;
    int rc = publish_id(s);
    if (rc >= 0)
        rc = coll_seg_barrier(run, s);
    if (rc < 0)
        return rc;
    put_word(id_line(s, s->me), ID_VERDICT,
             can_read_all(s) ? VERDICT_YES : VERDICT_NO);
    if ((rc = coll_seg_barrier(run, s)) < 0)
        return rc;
    int all = 1;
    for (int q = 0; q < s->n; q++)
        all &= word(id_line(s, q), ID_VERDICT) == VERDICT_YES;
    s->cma = all;
    return all;
}

/* ---- one call ---- */

void coll_seg_expose(struct coll_seg *s, const void *buf, size_t len,
                     int writable)
{
    uint64_t c = ++s->xcall;
    unsigned char *l = expo_line(s, s->me);
    s->granted = writable;
    put_word(l, EX_ADDR, (uint64_t)(uintptr_t)buf);
    put_word(l, EX_LEN, len);
    put_word(l, EX_GRANT, grant(writable ? G_OPEN : G_NONE, c));
    put_word(l, EX_SEQ, c);
}

static int expo_late(const struct coll_seg *s, int q, uint64_t target)
{
    return q == s->peer && word(expo_line(s, q), EX_SEQ) < target;
}

int coll_seg_exposed(const struct coll_seg *s, int q)
{
    return word(expo_line(s, q), EX_SEQ) >= s->xcall;
}

int coll_seg_wait_exposed(struct coll_run *run, struct coll_seg *s, int q)
{
    if (coll_seg_exposed(s, q))
        return FCCL_OK;
    s->peer = q;
    return seg_wait(run, s, expo_late, s->xcall, "single copy");
}

/* q's exposure covers [off, off + len)?  Else the members disagree on the
 * call (sizes, or the call itself). */
static int check_range(struct coll_run *run, const struct coll_seg *s, int q,
                       size_t off, size_t len, uint64_t *addr)
{
    const unsigned char *l = expo_line(s, q);
    uint64_t have = word(l, EX_LEN);
    *addr = word(l, EX_ADDR);
    if (off <= have && len <= have - off)
        return FCCL_OK;
    return fccl_err(FCCL_ERR_PROTOCOL, "%s: %s: member %d of the segment "
                    "offers %llu B, this rank needs bytes %zu-%zu (do all "
                    "ranks make the same call with the same sizes?)",
                    run->g->name, run->a->opname, q,
                    (unsigned long long)have, off, off + len);
}

static int copy_failed(struct coll_run *run, int q, int err, const char *what)
{
    return fccl_err(err == ESRCH ? FCCL_ERR_PEER : FCCL_ERR_FABRIC,
                    "%s: %s: single copy %s member %d of the segment: %s",
                    run->g->name, run->a->opname, what, q, strerror(err));
}

int coll_seg_pull(struct coll_run *run, struct coll_seg *s, int q,
                  size_t off, void *dst, size_t len)
{
    uint64_t addr;
    int rc = check_range(run, s, q, off, len, &addr);
    if (rc < 0 || len == 0)
        return rc;
    int err = vm_copy((int)word(id_line(s, q), ID_PID), 0, dst, addr + off,
                      len);
    return err ? copy_failed(run, q, err, "from") : FCCL_OK;
}

int coll_seg_push(struct coll_run *run, struct coll_seg *s, int q,
                  size_t off, const void *src, size_t len)
{
    uint64_t addr, c = s->xcall;
    int rc = check_range(run, s, q, off, len, &addr);
    if (rc < 0)
        return rc;
    _Atomic uint64_t *g = seg_word(expo_line(s, q), EX_GRANT);
    uint64_t want = grant(G_OPEN, c);
    if (!atomic_compare_exchange_strong(g, &want, grant(G_CLAIMED, c)))
        return fccl_err(FCCL_ERR_PEER, "%s: %s: member %d of the segment "
                        "withdrew its buffer (it failed in this call)",
                        run->g->name, run->a->opname, q);
    int err = vm_copy((int)word(id_line(s, q), ID_PID), 1, (void *)src,
                      addr + off, len);
    atomic_store_explicit(g, grant(err ? G_FAILED : G_DONE, c),
                          memory_order_release);
    return err ? copy_failed(run, q, err, "into") : FCCL_OK;
}

static int grant_state(const struct coll_seg *s)
{
    return (int)(word(expo_line(s, s->me), EX_GRANT) >> GRANT_SHIFT);
}

/* Wait while my grant is claimed: the write ends within one system call,
 * unless its writer has died (tp_dead_peer) or SETTLE_NS pass. */
static void drain_claim(struct coll_run *run, struct coll_seg *s)
{
    uint64_t t0 = fccl_now_ns();
    while (grant_state(s) == G_CLAIMED && fccl_now_ns() - t0 < SETTLE_NS &&
           tp_dead_peer(run->g->tp, run->g->world, (size_t)run->g->size) < 0)
        tp_idle(run->g->tp, fccl_now_ns() - t0);
}

static int grant_late(const struct coll_seg *s, int q, uint64_t target)
{
    (void)target;
    int st = grant_state(s);
    return q == s->peer && (st == G_OPEN || st == G_CLAIMED);
}

int coll_seg_settle(struct coll_run *run, struct coll_seg *s, int writer,
                    int rc)
{
    if (!s->granted)
        return rc;
    s->granted = 0;
    if (rc >= 0) {
        s->peer = writer;
        rc = seg_wait(run, s, grant_late, s->xcall, "single copy");
    }
    if (rc < 0) {
        _Atomic uint64_t *g = seg_word(expo_line(s, s->me), EX_GRANT);
        uint64_t want = grant(G_OPEN, s->xcall);
        if (!atomic_compare_exchange_strong(g, &want,
                                            grant(G_REVOKED, s->xcall)))
            drain_claim(run, s);
        return rc;
    }
    if (grant_state(s) == G_FAILED)
        return fccl_err(FCCL_ERR_PEER, "%s: %s: member %d of the segment "
                        "could not write its part into this rank's buffer",
                        run->g->name, run->a->opname, writer);
    return FCCL_OK;
}
