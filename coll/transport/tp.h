/*
 * The libfabric transport: the only file family in fccl that calls fi_*.
 *
 * One transport per process.  It may open several endpoints (shm for peers
 * on this host, a network provider for the others; or the one provider that
 * FCCL_PROVIDER / FI_PROVIDER forces) and drives them all from one progress
 * engine.  Peers are world ranks.  Messages are tagged: a receive posted for
 * (peer, tag) matches only a message that `peer` sent with exactly `tag`;
 * messages that arrive before their receive is posted wait inside the
 * provider (unexpected queue), so algorithms may post in any order.
 *
 * Requests are caller-owned structs that must not move or be reused while
 * pending.  Module map (tp_int.h has the private state):
 *   open.c      tp_open / tp_close, stats
 *   bye.c       goodbyes before closing (net loses unread messages when a
 *               connection is reset)
 *   peers.c     tp_add_peers: where each peer is reached
 *   readmit.c   tp_readmit: a rank left out by a shrink, taken back in
 *   wait.c      posting, testing, waiting, cancelling (the calls below)
 *   progress.c  reading completion queues; hands each to rndv.c
 *   rndv.c      a request's state machine: clear-to-send, single copy
 *               (CMA) and FIN, held sends, retry of refused posts
 *   eager.c     net: messages up to 32 KiB into bounce receives
 *   post.c      putting data and control messages on the wire
 *   resolve.c   a peer's address into the AV (network: on first use)
 *   failed.c    the job's failed ranks, and those a shrink excluded
 *   ep.c, mr.c, cma.c, live.c, hb.c, names.c: endpoints, registration
 *               cache, process_vm_readv, local peer liveness (pidfds),
 *               heartbeats between ring neighbours (dead hosts within
 *               FCCL_PEER_TIMEOUT), name blobs
 * Each file calls only files below it in this list (wait -> progress ->
 * rndv -> post), never back up; what several of them ask of the shared
 * state alone sits in tp_int.h, below them all.  The build checks the
 * order on the objects (scripts/check-calls.sh reads this list), so a new
 * file needs its line here.
 *
 * All calls are thread-safe: several threads may post and wait at once
 * (completions found by any thread are credited to their owners).
 * Waits yield the CPU when nothing completes (oversubscribed hosts, or
 * namespaces of one machine sharing its CPUs: tp_set_machine).
 *
 * Details (the files above have the reasons):
 * - Matching uses directed receive (FI_DIRECTED_RECV, granted by shm,
 *   tcp;ofi_rxm, udp;ofi_rxd, sockets) with exact tags; a provider without
 *   it carries the source rank in the tag bits above TP_TAG_BITS (then at
 *   most 16 ranks, no chunking).  Two messages with the same (peer, tag)
 *   match receives in send order (FI_ORDER_SAS is requested; a provider
 *   without it is logged).
 * - A receive may be longer than its message (req->len tells the size),
 *   except: above the provider's max_msg_size (or opts.max_chunk) both
 *   sides split into chunks, so the lengths must match (a message ending
 *   in a partial chunk also works), and a chunked message must be alone
 *   in flight on its (peer, tag); on shm, a receive above 4 KiB for a
 *   message of at most 4 KiB leaves a stray clear-to-send behind (harmless
 *   but kept until tp_close).  A message longer than its receive fails it
 *   with FCCL_ERR_PROTOCOL (on shm above 4 KiB: the send times out).
 * - shm sends above 4 KiB wait for the receiver's clear-to-send (one small
 *   message), because shm completes large sends in post order and one
 *   unmatched send would otherwise hold back unrelated ones (deadlock
 *   between groups driven from different threads).  Then, if the peer may
 *   read our memory, it copies the payload itself with process_vm_readv
 *   (one copy, outside shm's locks) and says FIN; FCCL_CMA=0 leaves every
 *   copy to shm.
 * - isend/irecv never block: a post the provider refuses for lack of queue
 *   entries (-FI_EAGAIN, or shm's -FI_ENOMEM) is queued and retried, in
 *   order, by whichever thread drives progress.
 * - Waiting polls tightly after the last completion for a spin budget
 *   learned from how this process's waits ended (5 us to 1 ms: long
 *   while other work keeps the cores busy, 5 us on an idle machine and
 *   after a late peer; not at all when this host has more ranks than
 *   CPUs; FCCL_SPIN_US fixes it), then sched_yield()s, then (after 1 ms
 *   idle) sleeps 20-500 us per round.
 * - Environment: FCCL_PROVIDER / FI_PROVIDER force a provider ("tcp" also
 *   selects "tcp;ofi_rxm"; "auto" or a FI_PROVIDER list means auto),
 *   FCCL_NET_IFACE restricts network providers to one interface/domain,
 *   FCCL_NET_PROVIDER picks the network provider in auto mode.
 *   tp_env_defaults() sets FI_OFI_RXM_MSG_RX_SIZE=256 (cheap rxm endpoint
 *   open), FI_OFI_RXM_ENABLE_DYN_RBUF=0 (a truncated receive must not
 *   break the tcp connection, libfabric 1.17 bug),
 *   FI_OFI_RXM_SAR_LIMIT=65536 (rendezvous, not copied segments, above 64
 *   KiB) and FI_NET_MAX_SAVED=64 (net keeps more small early messages)
 *   unless already set.
 */
#ifndef FCCL_COLL_TP_H
#define FCCL_COLL_TP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct fccl_tp;

enum tp_req_state { TP_REQ_IDLE = 0, TP_REQ_PENDING, TP_REQ_DONE, TP_REQ_ERROR };

/* Room for the transport's bookkeeping inside each request. */
#define TP_REQ_PRIV_BYTES 192

/* Caller-owned request.  The caller may read peer, is_send and (once it
 * completed) len; everything else is the transport's: state and status
 * are read through tp_test/tp_waitall, priv is opaque (tp_int.h). */
struct tp_req {
    int peer;        /* world rank of the other side */
    int is_send;
    size_t len;      /* bytes received (recv), once complete */
    _Atomic int state;
    int status;      /* FCCL status when state == TP_REQ_ERROR */
    _Alignas(16) unsigned char priv[TP_REQ_PRIV_BYTES];
};

/* Mark req complete without any message: a zero-length operation both
 * sides know about (the callers' shortcut). */
void tp_req_complete_empty(struct tp_req *req, int peer, int is_send);
/* 1 while req is posted and not yet complete. */
int tp_req_pending(const struct tp_req *req);
/* Index of the endpoint that carried req (tests: which provider). */
int tp_req_endpoint(const struct tp_req *req);

struct tp_opts {
    const char *provider; /* force one provider for all peers; NULL = auto
                             (FCCL_PROVIDER, else FI_PROVIDER, else shm for
                             local peers plus the best network provider) */
    int need_network;     /* open a network endpoint even if all peers are
                             local (auto mode only) */
    /* Added: */
    const char *net_iface; /* network providers use only this domain
                              (interface, e.g. "lo"); NULL = env
                              FCCL_NET_IFACE, else the provider's choice */
    size_t max_chunk;      /* cap on one wire message (0 = the provider's
                              max_msg_size); tests use it to exercise
                              chunking */
    int always_register;   /* register every buffer through the MR cache
                              even if the provider does not need it */
};

/* Counters for tests and logs (tp_get_stats). */
struct tp_stats {
    uint64_t mr_hits, mr_misses, mr_entries; /* registration cache */
    uint64_t eagain;       /* posts refused for now (-FI_EAGAIN/-FI_ENOMEM) */
    uint64_t chunks;       /* wire messages posted for chunked requests */
    uint64_t completions;  /* CQ entries read */
    uint64_t cma;          /* messages received by CMA (single copy) */
};

/* Set libfabric's variables that fccl changes (FI_OFI_RXM_MSG_RX_SIZE=256,
 * FI_OFI_RXM_ENABLE_DYN_RBUF=0, FI_OFI_RXM_SAR_LIMIT=65536,
 * FI_NET_MAX_SAVED=64), each only if
 * unset.  Call once before the
 * process first uses libfabric, while no other thread may read the
 * environment (fccl_init does). */
void tp_env_defaults(void);

/* Open the endpoints (fabric, domain, endpoint, CQ, AV).  Can run before the
 * peers are known, e.g. in parallel with the store rendezvous.  Errors:
 * FCCL_ERR_UNSUPPORTED (provider not available), FCCL_ERR_FABRIC. */
int tp_open(const struct tp_opts *opts, struct fccl_tp **out);

/* This process's endpoint names, serialized into one blob to publish.  Call
 * with buf NULL to learn *len. */
int tp_local_name(struct fccl_tp *tp, void *buf, size_t *len);

/* Names of the providers in use ("shm", "tcp;ofi_rxm") for logs/tests. */
const char *tp_provider_desc(const struct fccl_tp *tp);

/* Where rank `rank`'s name blob is: *name (valid until tp_close, or as
 * long as the caller's table lives), *len, and *local = 1 if it runs on
 * this host (shm in auto mode).  Called under the transport's lock, at
 * most once per peer that is actually used; must not call the transport.
 * Returns FCCL_OK or a negative status (the post to that rank fails). */
typedef int (*tp_lookup_fn)(void *arg, int rank, const void **name,
                            size_t *len, int *local);

/* Know the world: nranks ranks, I am my_rank, local_ranks of them run on
 * this host (how waiters spin; <= 0: unknown, assume not oversubscribed).
 * Nothing is inserted into the address vectors here: a network peer is
 * resolved (lookup, fi_av_insert, liveness handle) when first posted to,
 * so a rank pays only for the peers it talks to (shm peers: see
 * tp_set_local).  A peer that cannot be resolved
 * fails that post, and later ones, with an error naming it
 * (FCCL_ERR_UNSUPPORTED, FCCL_ERR_FABRIC, or lookup's status).  Not
 * thread-safe against posts; call once before any.  Errors:
 * FCCL_ERR_INVALID, FCCL_ERR_STATE (already called), FCCL_ERR_NOMEM,
 * FCCL_ERR_UNSUPPORTED (provider without directed receive, too many
 * ranks), FCCL_ERR_FABRIC. */
int tp_set_peers(struct fccl_tp *tp, int nranks, int my_rank, int local_ranks,
                 tp_lookup_fn lookup, void *lookup_arg);

/* The ranks on this host, once the topology is known: sets how waiters
 * spin (n ranks here), starts the heartbeats (my ring neighbours) and
 * resolves every one of `ranks` reached through shm, because shm matches
 * a message from a sender it does not know yet to any receive with its
 * tag.  So every rank must call it before any local rank sends it a
 * message that shares a tag with a message from another peer (fccl_init
 * calls it before its first barrier; all collectives come after).
 * Beyond shm's 256 peers it logs a warning and resolves lazily.
 * Local ranks' liveness handles (pidfds, see tp_dead_peer) are opened on
 * the first liveness check that asks about them.  O(n) work; `ranks` may
 * be NULL (nothing resolved). */
void tp_set_local(struct fccl_tp *tp, const int *ranks, int n);

/* How many ranks of the job share this machine's CPUs (hosts simulated by
 * network namespaces share one kernel).  Call before tp_set_local: waiters
 * spin only while these ranks, not just this host's, fit the CPUs. */
void tp_set_machine(struct fccl_tp *tp, int ranks);

/* tp_set_peers from arrays: every rank's name blob (copied, and checked
 * now so that junk fails here, FCCL_ERR_PROTOCOL) and node_of[r], rank
 * r's host index (ranks on my node use shm in auto mode; NULL: all on
 * mine).  Collective in the sense that all ranks call it, but it does not
 * communicate: it resolves the local shm peers (tp_set_local), so the
 * caller must have every rank return from it before the first message
 * that shares a tag with another peer's (a barrier of its own). */
int tp_add_peers(struct fccl_tp *tp, int nranks, int my_rank,
                 const void *const *names, const size_t *lens,
                 const int *node_of);

/* Peers resolved so far (inserted into an address vector): tests. */
int tp_resolved_count(struct fccl_tp *tp);

int tp_isend(struct fccl_tp *tp, int peer, uint64_t tag, const void *buf,
             size_t len, struct tp_req *req);
int tp_irecv(struct fccl_tp *tp, int peer, uint64_t tag, void *buf,
             size_t len, struct tp_req *req);

/* Drive progress once (read the completion queues, move pending
 * protocol steps) unless another thread is doing it; returns how many
 * completions were read.  Long computations between waits call it so that
 * the sockets keep moving (progress is manual). */
int tp_poke(struct fccl_tp *tp);

/* Drive progress once; 1 if req is complete (then its status is returned
 * if it failed), 0 if pending. */
int tp_test(struct fccl_tp *tp, struct tp_req *req);

/* Wait for all n requests until `deadline` (fccl_deadline_ms) or *abort
 * becomes non-zero.  Returns FCCL_OK, FCCL_ERR_TIMEOUT (message names the
 * peers still pending), FCCL_ERR_ABORTED, or the first request's error
 * (FCCL_ERR_PEER naming the peer).  On failure, pending requests are
 * cancelled before return so their buffers are free again. */
int tp_waitall(struct fccl_tp *tp, struct tp_req *reqs, size_t n,
               uint64_t deadline, const _Atomic int *abort);

/* 1 if messages to peer go through the shared-memory endpoint (the peer
 * is on this host), 0 otherwise.  The same answer on both sides. */
int tp_peer_is_local(const struct fccl_tp *tp, int peer);

/* tp_waitall, and also fail (FCCL_ERR_PEER) once a local rank among
 * watch[0..nwatch) has exited: a group passes its members, so a rank that
 * waits on a live peer still learns that the job lost one.  tp_waitall
 * watches only the peers of its pending requests.  Checked when nothing
 * has completed for 200 ms; ranks on other hosts rely on the provider's
 * connection errors and the deadline. */
int tp_waitall_watch(struct fccl_tp *tp, struct tp_req *reqs, size_t n,
                     uint64_t deadline, const _Atomic int *abort,
                     const int *watch, size_t nwatch);

/* For waits outside the transport (a shared-memory barrier): back off as
 * tp_waitall does after idle_ns without progress, and report the
 * rank the heartbeats (hb.c) declared dead anywhere in the job, else the
 * first of ranks[0..n) on this host whose process has exited (-1 if
 * none). */
void tp_idle(const struct fccl_tp *tp, uint64_t idle_ns);
/* Such a wait found `rank` (from tp_dead_peer) dead: unless the heartbeats
 * already named it, declare it and tell every rank of the job at once, as
 * the transport's own waits do; else the ranks of other hosts learn it
 * only when its heartbeats stop (FCCL_PEER_TIMEOUT). */
void tp_report_dead(struct fccl_tp *tp, int rank);
/* Such a wait, begun at t0 (fccl_now_ns), got what it waited for: the
 * spin budget learns from its length (wait.c).  Call it only for waits
 * that did wait (the condition was false at the first look). */
void tp_wait_done(struct fccl_tp *tp, uint64_t t0);
/* The learning rule alone, for tests: the spin budget after a wait that
 * had `budget` ns of spinning and ended after waited_ns. */
uint64_t tp_spin_next(uint64_t budget, uint64_t waited_ns);
/* 1 if waiters yield the CPU at once (more ranks on this machine than
 * CPUs, or FCCL_SPIN_US=0): a rank waited for may then be off its core. */
int tp_yields_at_once(const struct fccl_tp *tp);
int tp_dead_peer(const struct fccl_tp *tp, const int *ranks, size_t n);
/* Why tp_dead_peer's answer `rank` is dead (static or transport-owned
 * text, valid until tp_close). */
const char *tp_dead_why(const struct fccl_tp *tp, int rank);

/* ---- group failure notices and news of the heartbeats (hb.c) ---- */

/* A group failed on one of its members (a timeout, a protocol error):
 * the member tells the others over the heartbeat sockets, so that their
 * waits on that group end at once instead of by their own deadlines
 * (NCCL's abort model: the group fails everywhere).  Fields travel as
 * they are; texts are NUL-terminated (truncated). */
#define TP_NOTICE_OP 32
#define TP_NOTICE_TEXT 360
struct tp_notice {
    uint32_t ctx;       /* the group's context id */
    int origin;         /* world rank where it failed */
    int status;         /* its FCCL status there */
    uint32_t seq;       /* the operation's sequence number ... */
    int has_seq;        /* ... if it has one (collectives) */
    int64_t ms;         /* the timeout that ran out (0: not a timeout) */
    char op[TP_NOTICE_OP];     /* "all_reduce", "recv", ... */
    char text[TP_NOTICE_TEXT]; /* the origin's message */
};

/* The value a notice ORs into a watched stop word. */
#define TP_STOP_NOTICE 2
/* ... and a revoke's, in addition. */
#define TP_STOP_REVOKE 4

/* Tell members[0..n) (world ranks; this rank is skipped) that the group
 * n->ctx failed here: one datagram each now and two more one heartbeat
 * period apart (UDP).  With FCCL_PEER_TIMEOUT=0 the socket stays open
 * for notices alone (no heartbeats), repeated 200 ms apart.  A notice
 * whose status is FCCL_ERR_REVOKED (a revoke) replaces an earlier one of
 * its group and ORs TP_STOP_REVOKE into the stop words as well.
 * Never blocks for long; thread-safe. */
void tp_group_notify(struct fccl_tp *tp, const struct tp_notice *n,
                     const int *members, size_t nmembers);
/* Watch group ctx: a notice for it (received now or before) ORs
 * TP_STOP_NOTICE into *stop, which the group's waits watch.  unwatch
 * before *stop is freed.  Thread-safe; the heartbeat thread writes *stop. */
void tp_group_watch(struct fccl_tp *tp, uint32_t ctx, _Atomic int *stop);
void tp_group_unwatch(struct fccl_tp *tp, uint32_t ctx, _Atomic int *stop);
/* 1 and *out if a notice for ctx has arrived, else 0.  Thread-safe. */
int tp_group_notice(struct fccl_tp *tp, uint32_t ctx, struct tp_notice *out);
/* The rank the job knows to be dead (a heartbeat verdict, an exited
 * local process or a broken connection that was reported), or -1. */
int tp_dead_rank(const struct fccl_tp *tp);
/* Read the heartbeat socket now (the news of a death, also of this
 * rank's own, queued while this process was stopped) instead of waiting
 * for the heartbeat thread; returns tp_dead_rank().  For waits that wake
 * from a gap in time (SIGSTOP/SIGCONT) or are about to time out, so the
 * verdict comes before a timeout of their own.  Thread-safe. */
int tp_news(struct fccl_tp *tp);
/* ---- failed and excluded ranks (failed.c) ---- */

/* 1 if world rank `rank` is known to have failed: declared dead (its
 * heartbeats stopped, a connection to it broke, a wait saw its process
 * exit) or, on this host, its process has exited now (also after a
 * goodbye: for a shrink, gone is gone).  Never blocks.  Thread-safe. */
int tp_rank_failed(struct fccl_tp *tp, int rank);
/* Take ranks[0..n) (world ranks) out of the job's failure model: their
 * death (known now or later) no longer fails waits, no goodbye is
 * awaited from them, and the heartbeats watch the nearest ring
 * neighbours that remain.  A death of another rank known before is
 * reported again (tp_dead_rank).  For a shrink whose survivors agreed
 * to go on without them; cannot be undone.  Thread-safe. */
void tp_exclude(struct fccl_tp *tp, const int *ranks, size_t n);
/* 1 if rank was excluded by tp_exclude. */
int tp_rank_excluded(const struct fccl_tp *tp, int rank);
/* ---- a rank taken back in (readmit.c) ---- */

/* World rank `rank`, excluded by tp_exclude, is now held by a new process
 * (a grow): forget the old one (address, liveness handle, heartbeat
 * address, failure marks), call update(arg) (may be NULL) while no
 * lookup can run, so the caller can swap the rank's record for the new
 * one, then count the rank in again (its death fails waits again, the
 * heartbeat ring takes it back) and, if it is reached through shm,
 * insert its new address now (see tp_set_local).  Returns FCCL_OK;
 * FCCL_ERR_INVALID (not another rank of the job), FCCL_ERR_STATE (the
 * rank was not excluded: a live rank cannot be replaced), or the error
 * of resolving it.  Thread-safe; blocks only for the locks. */
int tp_readmit(struct fccl_tp *tp, int rank, void (*update)(void *arg),
               void *arg);

/* Which endpoint reaches world rank peer, without inserting it into an
 * address vector: its index, or -1 if it cannot be reached (or peer is
 * this rank).  Thread-safe once tp_set_peers ran. */
int tp_peer_endpoint(const struct fccl_tp *tp, int peer);
/* The provider of endpoint i ("shm", "tcp;ofi_rxm"), or NULL past the
 * last; endpoints are numbered in the order they were opened.  The string
 * is the transport's, valid until tp_close. */
const char *tp_endpoint_provider(const struct fccl_tp *tp, int i);

/* Cancel a pending request (used after timeouts and aborts).  Blocks up to
 * ~200 ms for the provider to hand it back; if it cannot (a send already
 * on its way), the request is marked failed (FCCL_ERR_ABORTED) and a later
 * completion is ignored, but the provider may still read its buffer. */
void tp_cancel(struct fccl_tp *tp, struct tp_req *req);

/* Say goodbye to the peers we exchanged messages with over net and wait
 * (up to 10 s, not at all after a failure) for theirs, so none loses a
 * message it has not received yet (bye.c); cancel and drain pending
 * operations (bounded), close every endpoint and free the registration
 * cache.  tp may be NULL. */
void tp_close(struct fccl_tp *tp);

/* The eager limit this process uses on net (FCCL_EAGER_BYTES, default
 * 32 KiB, 0: off; eager.c).  Every rank must use the same. */
size_t tp_eager_limit(void);

/* Copy the counters (thread-safe, never blocks for long). */
void tp_get_stats(struct fccl_tp *tp, struct tp_stats *st);

/* Largest tag bits available to callers (the transport may reserve some). */
#define TP_TAG_BITS 60

#endif
