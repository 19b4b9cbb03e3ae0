/*
 * fccl process groups: from "here is the store" to a world group with a
 * known topology, and subgroups of it.
 *
 * fccl_init() is collective over the world: every rank calls it with the
 * same world size and its own rank.  Each rank opens its libfabric
 * endpoints, publishes their names and its host identity through the store
 * (O(1) store operations per rank), learns everyone else's, and returns the
 * world group "fccl_world_group".  One world per process at a time.
 *
 * Groups: fccl_group_new(ranks) is called by the member ranks only (every
 * member with the same ranks, in the same order relative to the member's
 * other group creations).  The name is "fccl_<count>_<sha1>" where sha1 is
 * the lowercase hex SHA-1 of the sorted world ranks joined by "_".  Each
 * creation gets a fresh context id, so a group destroyed and created again
 * never takes the old one's messages.
 *
 * Every call returns FCCL_OK or a negative FCCL_ERR_* with a message
 * (fccl_last_error()).  Not thread-safe against itself: create and destroy
 * groups from one thread.
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

#define FCCL_WORLD_GROUP "fccl_world_group"

typedef struct fccl_init_opts {
    const char *init_method; /* "env://" or "tcp://HOST:PORT"; NULL with a
                                store given, else "env://" */
    fccl_store_t *store;     /* explicit store (not with init_method); the
                                caller keeps ownership */
    int world_size;          /* > 0, or -1: WORLD_SIZE */
    int rank;                /* 0..world_size-1, or -1: RANK */
    int64_t timeout_ms;      /* <= 0: FCCL_TIMEOUT, else 300 s */
    int host_store;          /* rank 0 starts an in-process store server on
                                the init address if none answers */
    const char *provider;    /* NULL: FCCL_PROVIDER, FI_PROVIDER, or auto */
    const char *job_id;      /* key namespace; NULL: FCCL_JOB_ID, else
                                TORCHELASTIC_RUN_ID, else "fccl" */
} fccl_init_opts_t;

void fccl_init_opts_init(fccl_init_opts_t *opts);

/* Join the world.  *world receives the world group (owned by the library;
 * freed by fccl_finalize).  Errors: FCCL_ERR_INVALID (bad size/rank/both
 * store and init_method), FCCL_ERR_STATE (already initialized),
 * FCCL_ERR_TIMEOUT (names the ranks that never arrived), FCCL_ERR_CONNECT,
 * FCCL_ERR_FABRIC. */
int fccl_init(const fccl_init_opts_t *opts, fccl_group_t **world);

/* Tear everything down: groups, endpoints, memory, the store connection,
 * and this job's keys on the store.  Safe when not initialized. */
int fccl_finalize(void);

int fccl_is_initialized(void);
/* The world group, or NULL before init. */
fccl_group_t *fccl_world(void);
/* World rank / size; -1 before init. */
int fccl_get_rank(void);
int fccl_get_world_size(void);

/* ---- topology (of the world) ---- */
typedef struct fccl_topology {
    int node_count;  /* distinct hosts */
    int node_rank;   /* index of my host (ordered by lowest world rank) */
    int local_rank;  /* my index among the ranks of my host */
    int local_size;  /* ranks on my host */
} fccl_topology_t;
int fccl_get_topology(fccl_topology_t *out);
/* Host index of a world rank; -1 if out of range. */
int fccl_node_of(int world_rank);

/* ---- groups ---- */
/* Compute a group's name without creating it.  Same checks as new. */
int fccl_group_name_for(const int *ranks, size_t n, char *out, size_t outlen);
/* Create a group of the given world ranks (any order; sorted).  Refuses
 * duplicates, out-of-range ranks and callers not in ranks. */
int fccl_group_new(const int *ranks, size_t n, fccl_group_t **out);
/* MPI_Comm_split: collective over parent.  Ranks with the same color form
 * a group, ordered by (key, parent rank).  color < 0: *out = NULL. */
int fccl_group_split(fccl_group_t *parent, int color, int key,
                     fccl_group_t **out);
/* Fail every pending and later call on the group at once. */
int fccl_group_abort(fccl_group_t *g);
/* Free the group (not the world: fccl_finalize does that). */
int fccl_group_destroy(fccl_group_t *g);

const char *fccl_group_name(const fccl_group_t *g);
int fccl_group_rank(const fccl_group_t *g);
int fccl_group_size(const fccl_group_t *g);
/* Rank translation; FCCL_ERR_INVALID (message says why) if not a member. */
int fccl_group_to_world(const fccl_group_t *g, int group_rank, int *world);
int fccl_group_from_world(const fccl_group_t *g, int world_rank, int *grank);
/* Copy the members' world ranks (size entries) into out. */
int fccl_group_members(const fccl_group_t *g, int *out, size_t outlen);
int fccl_group_set_timeout(fccl_group_t *g, int64_t timeout_ms);

#ifdef __cplusplus
}
#endif
#endif
