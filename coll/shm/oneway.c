/*
 * One-way broadcast of a few bytes through the segment: the root does not
 * wait for anyone.
 *
 * Why.  A broadcast through a barrier (coll_seg_bcast's small path) makes
 * the root wait until every member has arrived, and the members wait for
 * the root's arrival too: at 4 ranks on 2 cores that is a trip through
 * the scheduler for everyone, about 2 us per 8-byte call against Open
 * MPI's 0.3 (its root's eager message is already there when the others
 * look; bench/RESULTS.md, issue 28).  Here the root writes and returns,
 * and a member waits only for the root's lines.
 *
 * How.  The data travels in stamped lines (56 bytes of payload and the
 * call's number each, seg_int.h), in one of SEG_BC_SETS sets shared by
 * every root: call b uses set b mod SEG_BC_SETS.  Every member counts the
 * calls (they are collective, so all agree on b) and, once done with call
 * b, stores b + 1 in its consumed line.  Flow control instead of a
 * barrier: before it writes call b, the root makes sure every member has
 * consumed call b - SEG_BC_SETS, the last user of that set; it remembers
 * the least count it saw, so in the common case (members keep up) it
 * reads the others' lines once every few calls.  A root may thus run up
 * to SEG_BC_SETS - 1 calls ahead of the slowest member.
 *
 * A call of at most SEG_BC_WORD_MAX (8) bytes goes in a record of 16
 * bytes instead (its stamp, then its payload), four to a line, record b
 * mod SEG_BC_WORDS (1024), with the same flow control.  A root well ahead
 * has filled a line's four records before its reader fetches it: the
 * reader takes one line every fourth call, not one a call (8-byte
 * broadcasts back to back, medians of 5 rounds: 0.23 us a call against
 * 0.43 in sets at 2 ranks, 0.28 against 4.1 at 4; bench/RESULTS.md).
 * A reader counts records in its consumed line only every SEG_BC_ACK (8)
 * calls: a root that has filled the ring polls that line, and a reader
 * that stored to it every call paid a line transfer a call (2 ranks back
 * to back under load, 5 paired rounds: 0.30-0.33 us a call against
 * 0.32-0.52, medians 0.30 and 0.49; idle level, 0.21 and 0.22).  The count
 * then lags by at most 7 calls, fewer than either ring holds, so a root
 * waiting for room never waits for a reader that waits for it.
 *
 * A member's wait fails like every segment wait (deadline, abort, a dead
 * member); the root's only wait is the flow control's.  Each member gets
 * the root's bytes as they were, so all hold the same bits.
 */
#include <string.h>

#include "seg_int.h"
#include "shm.h"

static unsigned char *bc_set(const struct coll_seg *s, uint64_t b)
{
    return s->base + seg_off_bc(s->n) +
           (size_t)(b % SEG_BC_SETS) * TINY_SET_BYTES;
}

/* The record of word call b (bc_lines 0): its stamp, then its payload. */
static unsigned char *bc_word(const struct coll_seg *s, uint64_t b)
{
    return s->base + seg_off_bcw(s->n) +
           (size_t)(b % SEG_BC_WORDS) * SEG_BC_WORD;
}

static _Atomic uint64_t *consumed(const struct coll_seg *s, int q)
{
    return seg_word(seg_line(s, seg_off_consumed(s->n), q), 0);
}

/* Flow control: q has not yet finished call target - 1. */
static int consumer_late(const struct coll_seg *s, int q, uint64_t target)
{
    return q != s->me &&
           atomic_load_explicit(consumed(s, q), memory_order_acquire) < target;
}

/* The root's lines of the current call (stamp target) are not all there. */
static int root_late(const struct coll_seg *s, int q, uint64_t target)
{
    if (q != s->peer)
        return 0;
    if (!s->bc_lines)
        return atomic_load_explicit(seg_word(bc_word(s, target - 1), 0),
                                    memory_order_acquire) < target;
    const unsigned char *line = bc_set(s, target - 1);
    for (size_t i = 0; i < s->bc_lines; i++, line += SEG_LINE)
        if (atomic_load_explicit(seg_stamp((unsigned char *)line),
                                 memory_order_acquire) < target)
            return 1;
    return 0;
}

/* Least consumed count over the other members. */
static uint64_t least_consumed(const struct coll_seg *s)
{
    uint64_t m = UINT64_MAX;
    for (int q = 0; q < s->n; q++) {
        uint64_t c = q == s->me ? s->bc
                                : atomic_load_explicit(consumed(s, q),
                                                       memory_order_acquire);
        m = c < m ? c : m;
    }
    return m;
}

/* Root of call b: may its set (or record), last used by call b - depth,
 * be written? */
static int make_room(struct coll_run *run, struct coll_seg *s, uint64_t b,
                     uint64_t depth)
{
    if (b < depth)
        return FCCL_OK;
    uint64_t need = b - depth + 1;
    if (s->bc_done >= need)
        return FCCL_OK;
    s->bc_done = least_consumed(s);
    if (s->bc_done >= need)
        return FCCL_OK;
    int rc = seg_wait(run, s, consumer_late, need, "broadcast");
    if (rc >= 0)
        s->bc_done = least_consumed(s);
    return rc;
}

int coll_seg_bcast_oneway(struct coll_run *run, struct coll_seg *s, int root,
                          void *buf, size_t bytes)
{
    uint64_t b = s->bc++, stamp = b + 1;
    int word = bytes <= SEG_BC_WORD_MAX;
    s->peer = root;
    s->bc_lines = word ? 0 : seg_lines_for(bytes);
    unsigned char *rec = bc_word(s, b);
    if (s->me == root) {
        int rc = make_room(run, s, b, word ? SEG_BC_WORDS : SEG_BC_SETS);
        if (rc < 0)
            return rc;
        if (word) {
            memcpy(rec + sizeof(uint64_t), buf, bytes);
            atomic_store_explicit(seg_word(rec, 0), stamp,
                                  memory_order_release);
        } else {
            seg_lines_put(bc_set(s, b), buf, bytes, s->bc_lines, stamp);
        }
        atomic_store_explicit(consumed(s, s->me), stamp, memory_order_release);
        return FCCL_OK;
    }
    int rc = seg_wait(run, s, root_late, stamp, "broadcast");
    if (rc < 0)
        return rc;
    if (word)
        memcpy(buf, rec + sizeof(uint64_t), bytes);
    else
        seg_lines_get(bc_set(s, b), 0, buf, bytes);
    /* release: the reads above are done before the root may reuse the set */
    if (!word || stamp % SEG_BC_ACK == 0)
        atomic_store_explicit(consumed(s, s->me), stamp, memory_order_release);
    return FCCL_OK;
}
