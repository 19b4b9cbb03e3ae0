/*
 * Internal to coll/shm: the segment's struct and the layout of its head,
 * shared by seg.c (setup, barrier, tiny calls), oneway.c (the one-way
 * broadcast) and cma.c (single copies between members).  Nothing above
 * this floor sees it; they use shm.h.
 *
 * Head, one 64-byte line per entry, every line written by one member
 * only (except a member's grant word, see cma.c):
 *   n barrier lines (the member's barrier count; then the CPU it last
 *   waited on, which seg_wait compares with its own)
 *   n x 2 tiny sets of COLL_SHM_TINY_LINES lines (the member's tiny data)
 *   n id lines (pid, pid namespace, CMA probe word and verdict)
 *   n exposure lines (the buffer a member offers for this CMA call)
 *   n consumed lines (one-way broadcasts the member has finished; for
 *   records, as of its last multiple of SEG_BC_ACK)
 *   SEG_BC_SETS sets of COLL_SHM_TINY_LINES lines (one-way broadcast
 *   data, written by each call's root)
 *   SEG_BC_WORDS records of SEG_BC_WORD bytes, four to a line (one-way
 *   broadcasts of at most SEG_BC_WORD_MAX bytes; a line is written by
 *   the roots of four successive calls)
 * then, page-aligned, one slot per member.
 */
#ifndef FCCL_COLL_SEG_INT_H
#define FCCL_COLL_SEG_INT_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "shm.h"

#define SEG_LINE 64
#define TINY_PAYLOAD (SEG_LINE - sizeof(uint64_t))
#define TINY_SET_BYTES (COLL_SHM_TINY_LINES * SEG_LINE)
/* One-way broadcasts in sets in flight: a root may run this many calls
 * ahead of the slowest reader before it waits (oneway.c).  4 held 8-byte
 * broadcasts (in sets then) back to back at 2 ranks to 0.33 us a call;
 * 16 (8 KiB of head) made it 0.18-0.20, 64 no faster (MODE=loop
 * bench/pair.sh). */
#define SEG_BC_SETS 16
/* One-way broadcasts of at most 8 bytes go in records of 16 bytes (stamp,
 * payload), four to a line, SEG_BC_WORDS of them in a ring: a reader
 * fetches a line every fourth call, and a root may run that many calls
 * ahead (oneway.c). */
#define SEG_BC_WORD 16
#define SEG_BC_WORD_MAX 8
#define SEG_BC_WORDS 1024
/* A reader of records stores its consumed count every SEG_BC_ACK calls,
 * not every call (oneway.c): it lags by at most SEG_BC_ACK - 1, fewer
 * calls than either ring holds, so it never holds up a root whose
 * readers wait for it. */
#define SEG_BC_ACK 8
_Static_assert(SEG_BC_ACK <= SEG_BC_SETS && SEG_BC_ACK <= SEG_BC_WORDS,
               "a reader's count may lag by less than a ring holds");

struct coll_seg {
    unsigned char *base;
    size_t len, slot;
    int n, me;
    uint64_t count; /* barriers I have entered */
    uint64_t tiny;  /* tiny calls so far (coll_seg_tiny_put) */
    size_t tiny_lines; /* lines of the current tiny call */
    uint64_t small; /* one-barrier calls so far (coll_seg_small) */
    int last_small; /* was the last call one of them */
    /* one-way broadcasts (oneway.c) */
    uint64_t bc;       /* calls so far */
    uint64_t bc_done;  /* every member has consumed at least this many */
    size_t bc_lines;   /* lines of the current call */
    int peer;          /* the member a one-member wait is for (its
                          seg_late_fn reads it: a broadcast's root, a
                          single copy's owner or writer) */
    /* single copies (cma.c) */
    int cma;           /* -1 not agreed yet, 0 off, 1 on for every member */
    uint64_t xcall;    /* CMA calls so far */
    int granted;       /* my exposure of this call may be written */
    uint64_t *probe;   /* a word of mine the others read to test CMA */
};

/* Byte offsets of the head's regions. */
static inline size_t seg_off_tiny(int n) { return (size_t)n * SEG_LINE; }
static inline size_t seg_off_id(int n)
{
    return seg_off_tiny(n) + (size_t)n * 2 * TINY_SET_BYTES;
}
static inline size_t seg_off_expo(int n)
{
    return seg_off_id(n) + (size_t)n * SEG_LINE;
}
static inline size_t seg_off_consumed(int n)
{
    return seg_off_expo(n) + (size_t)n * SEG_LINE;
}
static inline size_t seg_off_bc(int n)
{
    return seg_off_consumed(n) + (size_t)n * SEG_LINE;
}
static inline size_t seg_off_bcw(int n)
{
    return seg_off_bc(n) + SEG_BC_SETS * TINY_SET_BYTES;
}
static inline size_t seg_head_bytes(int n)
{
    return seg_off_bcw(n) + SEG_BC_WORDS * SEG_BC_WORD;
}

/* Line q of the region at byte offset `off`. */
static inline unsigned char *seg_line(const struct coll_seg *s, size_t off,
                                      int q)
{
    return s->base + off + (size_t)q * SEG_LINE;
}

/* Word i of a line, as an atomic. */
static inline _Atomic uint64_t *seg_word(unsigned char *line, int i)
{
    return (_Atomic uint64_t *)(void *)(line + (size_t)i * sizeof(uint64_t));
}

/* The stamp of a data line (tiny and one-way sets): after the payload. */
static inline _Atomic uint64_t *seg_stamp(unsigned char *line)
{
    return (_Atomic uint64_t *)(void *)(line + TINY_PAYLOAD);
}

/* Copy `bytes` into stamped lines starting at `line` and stamp each with
 * t (release, after its payload); `lines` of them. */
void seg_lines_put(unsigned char *line, const void *src, size_t bytes,
                   size_t lines, uint64_t t);
/* Copy `bytes` of payload out of stamped lines starting at `line`, from
 * payload offset `off` on (the lines' payloads read as one array). */
void seg_lines_get(const unsigned char *line, size_t off, void *dst,
                   size_t bytes);
/* Lines a payload of `bytes` takes (at least one, to carry the stamp). */
static inline size_t seg_lines_for(size_t bytes)
{
    return bytes ? (bytes + TINY_PAYLOAD - 1) / TINY_PAYLOAD : 1;
}

/* Is member q still short of `target` in the wait at hand? */
typedef int (*seg_late_fn)(const struct coll_seg *s, int q, uint64_t target);

/* Poll until no member is late: backs off by the transport's rule
 * (tp_idle: spinning for the budget it learns, which this wait's length
 * teaches too; yielding at once when this host has more ranks than CPUs;
 * sleeping after 1 ms), yields at once to a late member on its CPU (and
 * may move off that CPU), and fails on the call's deadline (naming the late
 * members), an abort, or a member that has exited.  `what` names the
 * wait in messages ("barrier", "broadcast", ...). */
int seg_wait(struct coll_run *run, const struct coll_seg *s,
             seg_late_fn late, uint64_t target, const char *what);

#endif
