/*
 * Internal: the algorithm tables and the selector.  Each operation has a
 * table of {id, name, description, fn}; FCCL_ALGO_<OP> and fccl_set_algo
 * force an entry by name, else coll_select picks one from the group's
 * topology, its size and the message size.  The floor above the
 * algorithms: it names them, they never call it (an algorithm that
 * cannot run returns COLL_FALLBACK, run.h, and its caller asks
 * coll_select_fallback).
 */
#ifndef FCCL_COLL_SELECT_H
#define FCCL_COLL_SELECT_H

#include <stddef.h>

#include "args.h"

struct coll_run;
struct coll_state;

typedef int (*coll_algo_fn)(struct coll_run *run);

struct coll_algo {
    int id;
    const char *name;
    const char *description;
    coll_algo_fn fn;
};

/* Operation name as in FCCL_ALGO_<OP> ("ALL_REDUCE") and in the API
 * ("all_reduce"); kind from an API-style name ("all_reduce", "allreduce"),
 * -1 if none. */
const char *coll_kind_env(enum coll_kind k);
const char *coll_kind_name(enum coll_kind k);
int coll_kind_parse(const char *name);

/* The table of kind k (terminated by an entry with name NULL). */
const struct coll_algo *coll_algos(enum coll_kind k);
/* Index of algorithm `name` for kind k, or -1. */
int coll_algo_find(enum coll_kind k, const char *name);
/* Write "ring, rd, ..." into buf. */
void coll_algo_list(enum coll_kind k, char *buf, size_t len);
/* Read FCCL_ALGO_<OP> for every kind into st (at group creation). */
void coll_algo_env(struct coll_state *st);
/* Choose the algorithm for run->a (honouring a forced one).  Returns NULL
 * with FCCL_ERR_INVALID recorded if the forced name is unknown. */
const struct coll_algo *coll_select(struct coll_run *run, int *rc);
/* What runs when run->a's algorithm returned COLL_FALLBACK: for
 * all_reduce, the automatic choice among the algorithms that use the
 * transport.  NULL with FCCL_ERR_STATE recorded for a kind that has no
 * fallback (an internal error). */
const struct coll_algo *coll_select_fallback(struct coll_run *run, int *rc);
/* Name of the algorithm an even call of `op` ("all_reduce", ...,
 * "all_to_all_v" for per-peer counts; all_to_all_dims: count is the
 * slice) with count elements of dtype (root for rooted ops) on group g
 * would run now
 * (what coll_select picks; fccl-bench's algo column), "-" for an unknown
 * op or group, "?" for a bad forced name.  Static string. */
struct fccl_group;
const char *coll_algo_for(struct fccl_group *g, const char *op, size_t count,
                          fccl_dtype_t dtype, int root);

#endif
