/** @file fccl/pg.h
 *
 * fccl process groups: from "here is the store" to a world group with a
 * known topology, and subgroups of it.
 *
 * fccl_init() is collective over the world: every rank calls it with the
 * same world size and its own rank.  Each rank opens its libfabric
 * endpoints, publishes their names and its host identity through the store
 * (O(1) store operations and bytes per rank), learns everyone else's over
 * the fabric, and returns the
 * world group "fccl_world_group".  One world per process at a time.
 *
 * Groups: fccl_group_new(ranks) is called by the member ranks only (every
 * member with the same ranks, in the same order relative to the member's
 * other group creations).  The name is "fccl_<count>_<sha1>" where sha1 is
 * the lowercase hex SHA-1 of the sorted world ranks joined by "_".  Each
 * creation gets a fresh context id, so a group destroyed and created again
 * never takes the old one's messages.  fccl_group_split() is the MPI way:
 * collective over a parent group, members chosen by color.
 * fccl_group_new_named() gives a group a name of the user's choosing
 * (MindSpore's create_group); fccl_group_find() looks a group up by name;
 * fccl_group_new(NULL, 0) gives the world (new_group(None)).
 *
 * Lifetime: the library owns every group.  A group made by
 * fccl_group_new() or fccl_group_split() lives until fccl_group_destroy()
 * or fccl_finalize(); the world until fccl_finalize().  Group names and
 * the world pointer are valid exactly as long.
 *
 * Timeouts: fccl_init's timeout_ms (else FCCL_TIMEOUT seconds, else 300 s)
 * bounds each waiting phase of init and of fccl_group_new(), and is the
 * initial timeout of every group (see fccl/coll.h), which
 * fccl_group_set_timeout() changes per group.
 *
 * Every call returns FCCL_OK or a negative FCCL_ERR_* with a message
 * (fccl_last_error()), unless its comment says it returns a plain value.
 * Not thread-safe against itself: create and destroy groups from one
 * thread.  The queries (rank, size, topology, names, rank translation)
 * only read state that is fixed once a call returned, so any thread may
 * use them while no init, finalize or destroy runs.
 */
#ifndef FCCL_PG_H
#define FCCL_PG_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/coll.h"
#include "fccl/core.h"
#include "fccl/store.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The name of the world group, as fccl_group_name() returns it. */
#define FCCL_WORLD_GROUP "fccl_world_group"

/** Options of fccl_init().  Fill with fccl_init_opts_init() first, then
 * set what you need: the defaults follow torchrun's environment. */
typedef struct fccl_init_opts {
    const char *init_method; /**< "env://" (MASTER_ADDR, MASTER_PORT) or
                                "tcp://HOST:PORT"; NULL with a store
                                given, else "env://" */
    fccl_store_t *store;     /**< explicit store (not with init_method);
                                the caller keeps ownership (the library
                                uses its own view of it, so the caller may
                                close its handle at any time) */
    int world_size;          /**< > 0, or -1: WORLD_SIZE */
    int rank;                /**< 0..world_size-1, or -1: RANK */
    int64_t timeout_ms;      /**< <= 0: FCCL_TIMEOUT, else 300 s */
    int host_store;          /**< rank 0 starts an in-process store
                                server on the init address unless that
                                address is taken (a server is then
                                assumed there); it runs until
                                fccl_finalize.  Ignored with a store */
    const char *provider;    /**< libfabric provider for every peer ("shm",
                                "tcp;ofi_rxm", ...); NULL: FCCL_PROVIDER,
                                FI_PROVIDER, or auto (shm for peers on this
                                host, a network provider for the others) */
    const char *job_id;      /**< key namespace on the store; NULL:
                                FCCL_JOB_ID, else TORCHELASTIC_RUN_ID, else
                                "fccl" */
    int rejoin;              /**< > 0: this process takes the place of a
                                rank the others left out in a shrink and
                                joins through their fccl_group_grow()
                                (see there); 0: FCCL_REJOIN set and not
                                "0" means the same */
} fccl_init_opts_t;

/**
 * Fill opts with the defaults: everything NULL or 0, world_size and rank
 * -1 (read WORLD_SIZE and RANK).
 *
 * Never blocks, never fails.  Thread-safe.
 *
 * @param opts the options to fill; not NULL.
 */
FCCL_API void fccl_init_opts_init(fccl_init_opts_t *opts);

/**
 * Join the world.  *world receives the world group (owned by the library;
 * freed by fccl_finalize).
 *
 * Connects to the store (retrying until the timeout, so the store may
 * start after the ranks), opens the libfabric endpoints meanwhile,
 * publishes this rank's record, fetches its two ring neighbours' (3
 * store requests per rank in all, whatever the world size), gathers the
 * other records over the fabric in log2(world size) rounds, and ends with
 * a barrier of the world.  A peer's endpoint address is inserted only
 * when this rank first talks to it.  Blocks; each of these phases is
 * bounded by the timeout.  On failure everything is undone and fccl_init
 * may be called again.
 *
 * Not thread-safe: call it from one thread, with no other call of this
 * header running.
 *
 * @param opts options; NULL means all defaults (fccl_init_opts_init()).
 *     Read during the call only.
 * @param world receives the world group; may be NULL (fccl_world() gives
 *     it later).
 * @return FCCL_OK, or
 *   - FCCL_ERR_INVALID: bad or missing world size or rank (also in
 *     WORLD_SIZE, RANK), both store and init_method, unknown
 *     init_method, env:// without MASTER_ADDR/MASTER_PORT, a bad store
 *     address;
 *   - FCCL_ERR_STATE: already initialized;
 *   - FCCL_ERR_NOMEM;
 *   - FCCL_ERR_CONNECT: the store did not answer within the timeout;
 *   - FCCL_ERR_TIMEOUT: not every rank arrived (the message names the
 *     ring neighbours that did not; ranks further away time out in the
 *     gather, naming the peer they waited for), or the first barrier
 *     timed out;
 *   - FCCL_ERR_CLOSED, FCCL_ERR_IO, FCCL_ERR_PROTOCOL: the store
 *     connection broke or answered nonsense; FCCL_ERR_PROTOCOL also for a
 *     malformed rank record (another job with the same job id?);
 *   - FCCL_ERR_UNSUPPORTED: the provider is not available here, a peer
 *     has no endpoint of the forced provider, or the provider cannot
 *     serve this many ranks;
 *   - FCCL_ERR_FABRIC: a libfabric call failed;
 *   - FCCL_ERR_PEER: a rank failed during the first barrier.
 *
 * A rejoining process (opts.rejoin, or FCCL_REJOIN set and not "0")
 * instead posts its record as a newcomer and waits, up to the timeout,
 * for the members' fccl_group_grow(); *world is then the grown group
 * (see there).  FCCL_ERR_TIMEOUT when no grow took it in; FCCL_ERR_PEER
 * when a member died before it could.
 */
FCCL_API int fccl_init(const fccl_init_opts_t *opts, fccl_group_t **world);

/**
 * Tear everything down: groups, endpoints, memory, the store connection,
 * and this job's keys on the store.  Safe when not initialized.
 *
 * First waits in a barrier of the world (bounded by the world's timeout;
 * skipped when the world has failed or was aborted), so that rank 0's
 * in-process store and every endpoint stay up until all ranks are done;
 * then destroys every group, which waits for their queued asynchronous
 * collectives to end (each by its group timeout).  Wait for every request
 * handle before.  Afterwards every group pointer, group name and handle
 * of this world is invalid; fccl_init may be called again.
 *
 * Not thread-safe: no other fccl call on these groups may run.
 *
 * @return FCCL_OK, always (a failed final barrier is not reported).
 */
FCCL_API int fccl_finalize(void);

/** 1 between a successful fccl_init() and fccl_finalize(), else 0.
 * Never blocks. */
FCCL_API int fccl_is_initialized(void);
/** The world group, or NULL before init.  Owned by the library, valid
 * until fccl_finalize().  Never blocks. */
FCCL_API fccl_group_t *fccl_world(void);
/** World rank, or -1 before init.  Never blocks. */
FCCL_API int fccl_get_rank(void);
/** World size, or -1 before init.  Never blocks. */
FCCL_API int fccl_get_world_size(void);

/* ---- topology (of the world) ---- */

/** Where this rank runs.  A host is one kernel and network namespace
 * (hostname, boot id and netns; FCCL_FAKE_NODES=K pretends there are K). */
typedef struct fccl_topology {
    int node_count;  /**< distinct hosts */
    int node_rank;   /**< index of my host (ordered by lowest world rank) */
    int local_rank;  /**< my index among the ranks of my host, in world
                          rank order */
    int local_size;  /**< ranks on my host */
} fccl_topology_t;
/**
 * Fill *out with this rank's view of the world's hosts, as discovered by
 * fccl_init().  Never blocks.
 *
 * @param out receives the topology; not NULL.
 * @return FCCL_OK; FCCL_ERR_STATE before init; FCCL_ERR_INVALID if out
 *     is NULL.
 */
FCCL_API int fccl_get_topology(fccl_topology_t *out);
/** Host index (as node_rank above) of a world rank; -1 before init or if
 * world_rank is out of range.  Never blocks. */
FCCL_API int fccl_node_of(int world_rank);

/* ---- groups ---- */

/**
 * Compute a group's name without creating it.  Same checks as new.  Works
 * before init too (the ranks are then not checked against a world size).
 * Never blocks.
 *
 * @param ranks n world ranks, any order; not NULL.
 * @param n number of ranks, >= 1.
 * @param out receives the NUL-terminated name; not NULL.
 * @param outlen size of out; 64 bytes always suffice.
 * @return FCCL_OK; FCCL_ERR_INVALID for a NULL or empty list, a negative
 *     or (after init) out-of-range rank, a rank listed twice, more ranks
 *     than the world has, a NULL out or an outlen too small (the message
 *     says how much is needed); FCCL_ERR_NOMEM.
 */
FCCL_API int fccl_group_name_for(const int *ranks, size_t n, char *out,
                                 size_t outlen);
/**
 * Create a group of the given world ranks (any order; sorted).  Refuses
 * duplicates, out-of-range ranks and callers not in ranks.  Group rank r
 * is the r-th lowest world rank.
 *
 * Members agree on a context id through the store: the lowest member
 * reserves and publishes it, every other member reads it; then all
 * members run one barrier on the new group (so the lowest member can
 * delete the published key).  So it is a collective of the members: each
 * returns once every member has called it (up to fccl_init's timeout),
 * and members creating several groups must create them in an order that
 * cannot wait in a cycle (as for any collective).  Every store request
 * it makes is safe to repeat: with FCCL_STORE_RECONNECT=1 a store
 * restarted with its journal during the call does not fail it.
 *
 * ranks NULL with n 0 gives the world group itself (new_group(None) in
 * the seeds): no communication, and it is not destroyed by
 * fccl_group_destroy() (FCCL_ERR_INVALID, as for the world).
 *
 * @param ranks n world ranks; read during the call only.  NULL with n 0:
 *     the world.
 * @param n number of ranks, 1..world size (0 with ranks NULL).
 * @param out receives the group (NULL on failure); free it with
 *     fccl_group_destroy() or leave it to fccl_finalize().
 * @return FCCL_OK; FCCL_ERR_STATE before init; FCCL_ERR_INVALID (NULL
 *     out, the checks of fccl_group_name_for(), caller not a member);
 *     FCCL_ERR_NOMEM; FCCL_ERR_LIMIT when the job's context ids (2^20 - 1)
 *     are used up; FCCL_ERR_TIMEOUT when the lowest member did not publish in
 *     time or a member did not reach the barrier in time; FCCL_ERR_CLOSED,
 *     FCCL_ERR_IO, FCCL_ERR_PROTOCOL from the store; the barrier's errors
 *     (a dead member is named).
 */
FCCL_API int fccl_group_new(const int *ranks, size_t n, fccl_group_t **out);
/* ---- groups of the user's naming (in their own block) ---- */

/**
 * Check that name may be given to fccl_group_new_named(): 1 to 63 bytes
 * of letters, digits, '_', '-', '.' and ':', not starting with "fccl_"
 * (reserved: the world's name and the hashed names "fccl_<n>_<sha1>" of
 * fccl_group_new(), which a user name must never shadow).  Says nothing
 * of whether a group of that name exists.
 *
 * Never blocks; works before init.  Thread-safe.
 *
 * @return FCCL_OK; FCCL_ERR_INVALID (the message says why).
 */
FCCL_API int fccl_group_name_check(const char *name);
/**
 * fccl_group_new() under a name of the user's choosing (MindSpore's
 * create_group(group, rank_ids)): the same collective of the members, the
 * same membership rules and rank order, its own context id; only the name
 * differs.  Every member passes the same name and ranks (a member given
 * other ranks under the name fails with FCCL_ERR_INVALID naming both
 * member sets; one given another name waits for its lowest member and
 * times out).  The name must pass fccl_group_name_check() and must not be
 * the name of a group that exists on this rank (a named one not yet
 * destroyed); after fccl_group_destroy() it may be used again.
 *
 * @param name the name, copied; see above.
 * @param ranks n world ranks (any order); not NULL.
 * @param n 1..world size.
 * @param out receives the group (NULL on failure).
 * @return as fccl_group_new(), and FCCL_ERR_INVALID also for a NULL or
 *     bad name, a name in use on this rank, or no ranks.
 */
FCCL_API int fccl_group_new_named(const char *name, const int *ranks,
                                  size_t n, fccl_group_t **out);
/**
 * The group of this name on this rank: FCCL_WORLD_GROUP gives the world,
 * a user name its group, a hashed name the newest live creation of that
 * member set.
 *
 * Never blocks, never sets an error.  Not thread-safe against group
 * creation or destruction.
 *
 * @param name the name; NULL gives NULL.
 * @return the group (owned by the library), or NULL if there is none
 *     (or before init).
 */
FCCL_API fccl_group_t *fccl_group_find(const char *name);
/**
 * The libfabric providers that reach the group's other members from this
 * rank, in the order this rank opened its endpoints, joined by ',':
 * "shm", "tcp;ofi_rxm", or "shm,tcp;ofi_rxm" for a group with members on
 * this host and elsewhere; "" for a group of one rank.  Computed from the
 * endpoint each member is (or would be) reached by, without connecting.
 *
 * Never blocks.  Thread-safe.
 *
 * @param g the group; not NULL.
 * @param out receives the NUL-terminated list; not NULL.
 * @param outlen size of out; 64 bytes suffice for two providers.
 * @return FCCL_OK; FCCL_ERR_INVALID for NULL arguments or an outlen too
 *     small (the message says how much is needed).
 */
FCCL_API int fccl_group_providers(const fccl_group_t *g, char *out,
                                  size_t outlen);
/**
 * The group's view of the hosts (FCCL_FAKE_NODES=K pretends there are
 * K), as fccl_get_topology() for the world: node_count hosts among its
 * members, node_rank my host's index (in order of first appearance by
 * group rank), local_rank my index among the members on my host (in
 * group rank order), local_size how many members share my host.
 *
 * Never blocks.  Thread-safe.
 *
 * @return FCCL_OK; FCCL_ERR_INVALID if g or out is NULL.
 */
FCCL_API int fccl_group_topology(const fccl_group_t *g, fccl_topology_t *out);

/**
 * MPI_Comm_split: collective over parent.  Ranks with the same color form
 * a group, ordered by (key, parent rank).  color < 0: *out = NULL.
 *
 * Every rank of parent calls it, in parent's collective order (it runs an
 * all_gather and a broadcast on parent, each bounded by parent's timeout).
 * The new group's name follows its member set, as for fccl_group_new().
 *
 * @param parent the group to split; not NULL.
 * @param color >= 0 to join the group of that color; < 0 to join none.
 * @param key orders the ranks of one color (ties: parent rank order).
 * @param out receives the group, or NULL for color < 0 and on failure;
 *     free it with fccl_group_destroy() or leave it to fccl_finalize().
 * @return FCCL_OK; FCCL_ERR_STATE before init; FCCL_ERR_INVALID for a
 *     NULL parent or out; FCCL_ERR_NOMEM; FCCL_ERR_LIMIT when parent rank
 *     0 could not reserve context ids (used up, or its store call
 *     failed); any error of a collective on parent (fccl/coll.h).
 */
FCCL_API int fccl_group_split(fccl_group_t *parent, int color, int key,
                              fccl_group_t **out);
/**
 * Fail every pending and later call on the group at once.
 *
 * On this rank only: pending waits return FCCL_ERR_ABORTED promptly, and
 * every later call on the group returns it; other ranks learn of it by
 * their own timeouts or errors (an abort sends no failure notice, unlike
 * a timeout: see fccl/coll.h).  Cannot be undone; destroy the group
 * afterwards (the world: fccl_finalize()).
 *
 * Never blocks.  Thread-safe and async-signal-safe (it is one lock-free
 * atomic OR): meant to be called from another thread (a watchdog) or a
 * signal handler (Ctrl-C) while the group's thread is blocked.
 *
 * @param g the group; not NULL.
 * @return FCCL_OK; FCCL_ERR_INVALID if g is NULL.
 */
FCCL_API int fccl_group_abort(fccl_group_t *g);
/* ---- fault tolerance: revoke, failed ranks, shrink, grow ---- */

/**
 * Fail the group on every member (ULFM's MPIX_Comm_revoke): every
 * member's pending and later calls on g fail with FCCL_ERR_REVOKED and a
 * message naming the rank that revoked ("revoked by rank 2 (world 5)"),
 * within a second on every member whatever FCCL_PEER_TIMEOUT is (0
 * included); a call made after this member learnt of it fails at once.
 * Unlike fccl_group_abort(), which is local, it reaches every member: the
 * revoke is sent to each member over the library's heartbeat sockets (UDP,
 * sent three times).  A revoke wins over an earlier failure of the group:
 * later calls return FCCL_ERR_REVOKED.  Cannot be undone; the group can
 * still be shrunk (fccl_group_shrink()) or destroyed.
 *
 * Any member, any thread, any time; idempotent (a second call, or a call
 * after another member's revoke arrived, sends nothing).  Never blocks.
 *
 * @param g the group; not NULL.
 * @return FCCL_OK; FCCL_ERR_INVALID if g is NULL.
 */
FCCL_API int fccl_group_revoke(fccl_group_t *g);
/**
 * The group ranks of g that this member knows to have failed, ascending:
 * declared dead by the heartbeats (FCCL_PEER_TIMEOUT), named by a broken
 * connection, or on this host, exited; after a fccl_group_shrink() of g
 * that succeeded here, exactly the set the survivors left out (the agreed
 * failures, and the exclude list if one was given), the same list on
 * every survivor.  Unlike
 * fccl_group_failed_rank(), which gives one world rank, this lists them
 * all, by group rank.
 *
 * Never blocks.  Thread-safe.
 *
 * @param g the group; not NULL.
 * @param ranks receives at most max group ranks; may be NULL if max is 0.
 * @param max room in ranks, >= 0.
 * @return the total number of failed ranks known (may exceed max: call
 *     again with more room), or FCCL_ERR_INVALID for a NULL g, max < 0, or
 *     NULL ranks with max > 0.
 */
FCCL_API int fccl_group_failed_ranks(const fccl_group_t *g, int *ranks,
                                     int max);
/**
 * Make the group of g's survivors (ULFM's MPIX_Comm_shrink, NCCL's
 * ncclCommShrink): called by every surviving member of g, and only by
 * them; an excluded or dead rank calls nothing more on g.
 *
 * exclude == NULL (nexclude 0): the survivors agree on the failed set,
 * through the store, in a way that tolerates further failures while it
 * runs (ULFM's agree): each posts the failures it knows of; once every
 * member has posted or is known to have failed (a member that does
 * neither within twice FCCL_PEER_TIMEOUT, or the group timeout with
 * heartbeats off, counts as failed), any survivor proposes the union and
 * the store keeps the first proposal.  Afterwards
 * fccl_group_failed_ranks(g) gives exactly that set on every survivor.
 * With an exclude list, those ranks are left out as well (they are never
 * waited for: they may call nothing and exit), and are part of the set
 * fccl_group_failed_ranks() gives afterwards.  A rank that dies during the
 * shrink is left out too.  Works on a failed, a revoked and a healthy
 * group.
 *
 * The new group holds the survivors in their old order, renumbered from
 * 0, named by their member set as fccl_group_new() names it, with a fresh
 * context id and g's timeout; it is returned without a barrier (a death
 * right after the agreement shows up on the new group's first call).
 * The library stops counting the left-out ranks' failures: their later
 * exit fails no wait, and fccl_finalize() then skips its world barrier.
 * Call it on g the same number of times on every survivor.
 *
 * Blocks for the agreement (a few store round trips once every survivor
 * has called it), at most g's timeout.  Not thread-safe against other
 * calls on g.
 *
 * @param g the group to shrink; not NULL.
 * @param exclude nexclude group ranks of g to leave out (every survivor
 *     passes the same list), or NULL.
 * @param nexclude the length of exclude; 0 with NULL.
 * @param out receives the new group (NULL on failure); free it with
 *     fccl_group_destroy() or leave it to fccl_finalize().
 * @return FCCL_OK; FCCL_ERR_STATE before init; FCCL_ERR_INVALID (NULL g
 *     or out, a rank out of range or this rank in exclude, nexclude != 0
 *     with NULL); FCCL_ERR_NOMEM; FCCL_ERR_PEER when the other survivors
 *     decided without this rank; FCCL_ERR_TIMEOUT after g's timeout;
 *     FCCL_ERR_LIMIT (context ids used up); the store's errors.
 */
FCCL_API int fccl_group_shrink(fccl_group_t *g, const int *exclude,
                               int nexclude, fccl_group_t **out);
/**
 * Take new processes into a group (NCCL's ncclCommGrow): called by every
 * member of g; the newcomers call fccl_init() with FCCL_REJOIN set (or
 * opts.rejoin), each with the world rank it takes (RANK) and the job's
 * WORLD_SIZE, and reach the members through the store, as fccl_init
 * always does.  A newcomer's world rank must be one the members left out
 * in a fccl_group_shrink() (a respawned rank, or a new process given a
 * dead rank's place): the world size never changes.
 *
 * The grown group holds g's members with their ranks of g, then the
 * nnew newcomers in the order they reached the store; it is named by its
 * member set as fccl_group_new() names it ("fccl_<n>_<sha1>"), gets a
 * fresh context id and g's timeout, and ends with one barrier of all its
 * members.  A newcomer's fccl_init() returns this same group as its world
 * (fccl_world(); fccl_get_rank() is its world rank, fccl_get_world_size()
 * the job's).  g itself is unchanged.  Grows of a job are taken in turn:
 * every process that takes part in one has seen the same earlier ones
 * (the members of successive grows are the job's live ranks), so they
 * read the same newcomers.
 *
 * Blocks until the nnew newcomers have come and every member has reached
 * the barrier, at most g's timeout: a newcomer that never comes fails it
 * with FCCL_ERR_TIMEOUT naming which; a member or newcomer that dies
 * while it runs fails it (FCCL_ERR_PEER naming the rank) on the others
 * as soon as that death is known.  After a failure g goes on as before
 * (the newcomers are left out again): shrink it or grow it again.  Not
 * thread-safe against other calls on g.
 *
 * @param g the group to grow; not NULL.
 * @param nnew the number of newcomers, 1 .. world size - size of g.
 * @param out receives the grown group (NULL on failure); free it with
 *     fccl_group_destroy() or leave it to fccl_finalize().
 * @return FCCL_OK; FCCL_ERR_STATE before init; FCCL_ERR_INVALID (NULL g
 *     or out, nnew out of range, a newcomer claiming a world rank this
 *     member did not leave out, or one taken twice); FCCL_ERR_NOMEM;
 *     FCCL_ERR_TIMEOUT; FCCL_ERR_PEER; FCCL_ERR_PROTOCOL (junk on the
 *     store, or members growing different groups at once); FCCL_ERR_LIMIT
 *     (context ids used up); the store's and the barrier's errors.
 */
FCCL_API int fccl_group_grow(fccl_group_t *g, int nnew, fccl_group_t **out);

/**
 * Free the group (not the world: fccl_finalize does that).  Local to this
 * rank: not a collective.
 *
 * Blocks until the group's queued asynchronous collectives have ended
 * (each by its group timeout, at once after fccl_group_abort()).  Wait
 * for every request handle of the group first.  Afterwards g and its name
 * are invalid.  Not thread-safe: no other call on g may run.
 *
 * @param g a group from fccl_group_new() or fccl_group_split(); NULL is
 *     accepted and ignored.
 * @return FCCL_OK; FCCL_ERR_INVALID for the world group or a group that
 *     is unknown or already destroyed.
 */
FCCL_API int fccl_group_destroy(fccl_group_t *g);

/** The group's name (FCCL_WORLD_GROUP, or "fccl_<count>_<sha1>"); "" for
 * NULL.  The string belongs to the group.  Never blocks. */
FCCL_API const char *fccl_group_name(const fccl_group_t *g);
/** The calling rank's rank in the group; -1 for NULL.  Never blocks. */
FCCL_API int fccl_group_rank(const fccl_group_t *g);
/** The number of ranks in the group; -1 for NULL.  Never blocks. */
FCCL_API int fccl_group_size(const fccl_group_t *g);
/** Rank translation, group rank (0..size-1) -> *world, the world rank.
 * FCCL_ERR_INVALID (message says why) for NULL arguments or a group rank
 * out of range.  Never blocks. */
FCCL_API int fccl_group_to_world(const fccl_group_t *g, int group_rank,
                                 int *world);
/** Rank translation, world rank -> *grank, the rank in g.
 * FCCL_ERR_INVALID (message says why) for NULL arguments or a world rank
 * that is not a member.  Never blocks. */
FCCL_API int fccl_group_from_world(const fccl_group_t *g, int world_rank,
                                   int *grank);
/** Copy the members' world ranks (size entries) into out, in group rank
 * order.  FCCL_ERR_INVALID for NULL arguments or outlen < size.  Never
 * blocks. */
FCCL_API int fccl_group_members(const fccl_group_t *g, int *out,
                                size_t outlen);
/**
 * Set the group's timeout: how long each later operation on it may take
 * before it fails with FCCL_ERR_TIMEOUT.  Operations already running keep
 * their deadline.  Every rank should set the same value.  Never blocks;
 * call it from the thread that drives the group.
 *
 * @param g the group; not NULL.
 * @param timeout_ms > 0, in milliseconds.
 * @return FCCL_OK; FCCL_ERR_INVALID for a NULL group or timeout_ms <= 0.
 */
FCCL_API int fccl_group_set_timeout(fccl_group_t *g, int64_t timeout_ms);
/** The group's timeout in milliseconds, > 0: how long each operation on
 * it may take (the last fccl_group_set_timeout(), else fccl_init's
 * timeout_ms, else FCCL_TIMEOUT, else 300 s); -1 for NULL.  Never
 * blocks; reads what the thread that drives the group set. */
FCCL_API int64_t fccl_group_timeout(const fccl_group_t *g);

#ifdef __cplusplus
}
#endif
#endif
