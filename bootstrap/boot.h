/* Internal: the process-wide bootstrap state shared by pg.c and group.c. */
#ifndef FCCL_BOOT_H
#define FCCL_BOOT_H

#include "coll_group.h"
#include "group.h"
#include "fccl/pg.h"
#include "fccl/server.h"
#include "fccl/store.h"

struct name_count;

struct boot_state {
    int initialized;
    int rank, size;
    int64_t timeout_ms;
    uint64_t deadline;            /* of fccl_init's waits (monotonic ns) */
    char job[128];
    fccl_store_t *base;           /* connection we opened (NULL if given) */
    fccl_store_t *store;          /* view "fccl/<job>/" */
    fccl_server_t *server;        /* in-process server (host_store) */
    struct fccl_tp *tp;
    struct fccl_group *world;
    int *node_of;                 /* world topology, by world rank */
    void **recs;                  /* every rank's record (ring all_gather);
                                     the transport resolves peers from it */
    size_t *rec_lens;
    char hostid[160];             /* mine (topology.h HOSTID_MAX) */
    int nnodes, local_rank, local_size;
    struct fccl_group **groups;   /* live user groups, for finalize */
    size_t ngroups, cap_groups;
    struct name_count *counts;    /* creations per group name */
    /* grow.c: the job's newcomers this process has seen taken in (the
     * next grow reads entry joined + 1), whether a grow changed the
     * members (fccl_finalize then skips its world barrier), and the
     * records newcomers replaced (freed with the others at finalize) */
    uint32_t joined;
    int regrown;
    void **retired;
    size_t nretired;
};

extern struct boot_state boot;

/* What the last successful fccl_init of this process spent, per phase, in
 * milliseconds: wall time and CPU time of the whole process (every
 * thread), except fabric_cpu, the CPU of the thread that opened the
 * libfabric endpoints (fi_getinfo, fi_enable: not N-dependent; it runs
 * during the store connect, so store_cpu includes it).  For benchmarks
 * (bench/init_barrier -v); not part of the API. */
enum { BOOT_PH_STORE, BOOT_PH_NEIGHBOURS, BOOT_PH_GATHER, BOOT_PH_WORLD,
       BOOT_PH_BARRIER, BOOT_PH_N };
struct boot_init_stats {
    double wall_ms[BOOT_PH_N], cpu_ms[BOOT_PH_N];
    double fabric_cpu_ms;
};
const struct boot_init_stats *boot_last_init_stats(void);

/* ---- records.c: the ranks' records and the world built from them ---- */

/* The store key of rank's record. */
void boot_addr_key(char *out, size_t len, int rank);
/* This rank's record (version, host id, the transport's endpoint names),
 * malloc'd into *out. */
int boot_make_record(struct fccl_tp *tp, void **out, size_t *outlen);
/* Publish rec and fetch the two ring neighbours' records (boot.recs). */
int boot_exchange_records(void *rec, size_t reclen);
/* Gather every other record over the fabric (log2(n) rounds). */
int boot_ring_gather(void);
/* The transport's lookup of rank r's endpoint names in the records. */
int boot_record_lookup(void *arg, int r, const void **name, size_t *len,
                       int *local);
/* After a failed wait for the others: rc, with the ranks whose records
 * never reached the store named (one store request). */
int boot_name_missing(int rc);
/* Check the versions, assign nodes, tell the transport the local ranks,
 * make boot.world. */
int boot_build_world(void);
/* Free boot.recs (after tp_close: the transport's lookups read them). */
void boot_free_records(void);
/* Keep this rank's own record in boot.recs (a rejoining rank, which
 * publishes it through grow.c instead). */
int boot_keep_own_record(const void *rec, size_t len);
/* The host id (HOSTID_MAX bytes) of a record; FCCL_ERR_PROTOCOL for a
 * malformed one. */
int boot_record_hostid(const void *rec, size_t len, char *hostid);

/* ---- grow.c ---- */

/* fccl_init of a rejoining rank (FCCL_REJOIN), after the store and the
 * transport are open and rec is made: post rec as a newcomer, wait for
 * the members' fccl_group_grow to take it in, open the transport to the
 * members, and make boot.world the grown group (its first barrier is
 * fccl_init's).  Bounded by boot.deadline. */
int boot_rejoin(const void *rec, size_t reclen);

/* Allocate a group of `size` members with zeroed fields; arrays allocated. */
struct fccl_group *boot_group_alloc(int size);
/* Fill topology fields of g from its world[] and boot.node_of, then call
 * coll_group_init.  Frees g on failure. */
int boot_group_finish(struct fccl_group *g);
void boot_group_free(struct fccl_group *g);
/* Destroy every live user group and the creation counters (finalize). */
void boot_groups_destroy_all(void);
/* group.c, for shrink.c: the name fccl_<n>_<sha1> of n sorted world
 * ranks; reserve `count` fresh context ids (the first in *first); make,
 * finish and register a group of world_order (group rank order). */
int boot_name_of_sorted(const int *s, size_t n, char *out, size_t outlen);
int boot_ctx_reserve(int64_t count, uint32_t *first);
int boot_make_group(const int *world_order, int size, const char *name,
                    int named, uint32_t ctx, struct fccl_group **out);

#endif
