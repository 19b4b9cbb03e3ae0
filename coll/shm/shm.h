/*
 * Internal: the one-host segment.  A group whose members share a host maps
 * one segment (seg.c) and the *_shm algorithms (algo/<op>_shm.c) run its
 * collectives through it, bypassing the transport.  This floor holds the
 * segment alone: its setup (messages over the run's primitives), its
 * slots, its barrier and its tiny calls; the algorithms sit above it.
 */
#ifndef FCCL_COLL_SHM_H
#define FCCL_COLL_SHM_H

#include <stddef.h>

#include "run.h"

struct coll_seg;
/* The group's segment, set up with all members on first use: *out is NULL
 * for a group of one rank or spread over hosts, and (for good) when it
 * cannot be made.  Errors are those of the setup messages. */
int coll_seg_get(struct coll_run *run, struct coll_seg **out);
/* The segment of the members of a multi-host group on this host: `v` is
 * this host's view of the group (v->me 0 creates it); every member of v
 * calls it at the same point of a collective (it exchanges setup messages
 * on steps 0-2 of the run).  *out NULL when v has one rank or the setup
 * failed (for good); same errors as coll_seg_get. */
int coll_seg_host(struct coll_run *run, const struct coll_view *v,
                  struct coll_seg **out);
/* Members of the segment, and my index among them. */
int coll_seg_size(const struct coll_seg *s);
int coll_seg_rank(const struct coll_seg *s);
size_t coll_seg_slot_bytes(const struct coll_seg *s);
/* The most a member writes into its slot between two barriers in the
 * chunked (large) paths: the slot, but at most COLL_SHM_ROUND.  Rounds of
 * a whole 2 MiB slot fell out of the caches: 2 ranks, 1 MiB all_reduce
 * 207-244 us against 99-111 in rounds of 512 KiB (256 KiB: 110-118,
 * 128 KiB: 117-133), 4 ranks' 1 MiB broadcast 241-315 against 139-181
 * (bench/RESULTS.md, "The segment's rounds"). */
#define COLL_SHM_ROUND (512u << 10)
size_t coll_seg_round(const struct coll_seg *s);
unsigned char *coll_seg_slot(const struct coll_seg *s, int rank);
/* Wait until every member has entered as many barriers as I have: fails
 * on the call's deadline, an abort, or a member that has exited. */
int coll_seg_barrier(struct coll_run *run, struct coll_seg *s);
/* The same barrier (it counts alike, and may alternate with the one
 * above), but member 0 leaves first: it arrives last, once everyone else
 * has, and the others leave when they see it.  fccl_barrier uses it: what
 * follows a barrier is often a broadcast from rank 0, whose data is then
 * written before the receivers leave (4 ranks on 2 cores: the receivers
 * otherwise waited for the root to be scheduled again).  Errors as above. */
int coll_seg_barrier_led(struct coll_run *run, struct coll_seg *s);
/* Every *_shm.c algorithm is one of two kinds (see allreduce_shm.c for why
 * this is safe).  A one-barrier call (up to COLL_SHM_SMALL) uses half of
 * each slot, alternating from call to call: coll_seg_small returns the
 * byte offset of this call's half.  A call that fills whole slots starts
 * with coll_seg_large, which waits in a barrier if the call before was a
 * one-barrier one (its halves may still be read); errors as the barrier. */
#define COLL_SHM_SMALL (16u << 10)
size_t coll_seg_small(struct coll_seg *s);
int coll_seg_large(struct coll_run *run, struct coll_seg *s);
void coll_seg_free(struct coll_seg *s);
/* Tiny calls (seg.c): up to COLL_SHM_TINY bytes a member, carried in the
 * lines that signal them.  Every member calls coll_seg_tiny_put with its
 * bytes and the call's span (the most any member puts: the same on all,
 * at most COLL_SHM_TINY), then coll_seg_tiny_wait (until all have put
 * theirs: errors as the barrier), then reads any member's bytes with
 * coll_seg_tiny_get (from offset `off` of what it put), before its next
 * tiny call. */
#define COLL_SHM_TINY_LINES 8
#define COLL_SHM_TINY (COLL_SHM_TINY_LINES * 56u)
void coll_seg_tiny_put(struct coll_seg *s, const void *src, size_t bytes,
                       size_t span);
int coll_seg_tiny_wait(struct coll_run *run, struct coll_seg *s);
void coll_seg_tiny_get(const struct coll_seg *s, int q, size_t off,
                       void *dst, size_t bytes);
/* One-way broadcast of up to COLL_SHM_TINY bytes from member `root`
 * (oneway.c): the root stamps its bytes into lines (up to 8 bytes: a
 * record, four to a line) and returns without waiting for anyone (unless
 * it is SEG_BC_SETS calls ahead of a member, SEG_BC_WORDS for records);
 * the others wait only for the root's stamp.  Errors as the barrier. */
int coll_seg_bcast_oneway(struct coll_run *run, struct coll_seg *s, int root,
                          void *buf, size_t bytes);
/* Single copies between members (cma.c).  coll_seg_cma: 1 if every member
 * may read and write every other's memory (process_vm_readv/writev), 0 if
 * not; agreed by all members at the first call (two barriers), then
 * remembered; < 0 on the barriers' errors.  A CMA call: every member
 * calls coll_seg_expose once with the buffer others may read (writable:
 * they may also write it, coll_seg_push), then copies with coll_seg_pull
 * / coll_seg_push from members that have exposed (coll_seg_exposed tests,
 * coll_seg_wait_exposed waits: errors as the barrier); a member that
 * exposed a writable buffer then calls coll_seg_settle (waits for the
 * writer, or withdraws the grant when rc < 0; returns the call's status);
 * everyone ends with coll_seg_barrier.  pull/push copy [off, off + len)
 * of member q's exposed buffer; FCCL_ERR_PROTOCOL if q exposed less,
 * FCCL_ERR_PEER if q has exited or withdrew its grant, FCCL_ERR_FABRIC
 * for other copy errors, each naming the member. */
int coll_seg_cma(struct coll_run *run, struct coll_seg *s);
void coll_seg_expose(struct coll_seg *s, const void *buf, size_t len,
                     int writable);
int coll_seg_exposed(const struct coll_seg *s, int q);
int coll_seg_wait_exposed(struct coll_run *run, struct coll_seg *s, int q);
int coll_seg_pull(struct coll_run *run, struct coll_seg *s, int q,
                  size_t off, void *dst, size_t len);
int coll_seg_push(struct coll_run *run, struct coll_seg *s, int q,
                  size_t off, const void *src, size_t len);
int coll_seg_settle(struct coll_run *run, struct coll_seg *s, int writer,
                    int rc);
/* The segment and the offset of this call's half for a one-barrier call
 * in which each rank puts `per_rank` bytes into a slot (and the root up
 * to n of them): NULL (with *rc FCCL_OK) when the segment is missing or
 * the call is too large for one barrier; the caller then runs another
 * algorithm.  *rc < 0 on a setup error. */
struct coll_seg *coll_seg_for_small(struct coll_run *run, size_t per_rank,
                                    size_t *half, int *rc);

#endif
