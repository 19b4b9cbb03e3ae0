/*
 * Internal: what the floor above coll/ (the bootstrap) calls to hand a
 * group to the collective engine and take it back (coll_group.c).  The
 * group itself, which the bootstrap fills in, is struct fccl_group
 * (run/group.h).
 */
#ifndef FCCL_COLL_GROUP_INIT_H
#define FCCL_COLL_GROUP_INIT_H

struct fccl_group;

/* Called by the bootstrap once a group's membership is filled in: set up
 * coll's per-group state (sequence, error, worker).  FCCL_ERR_INVALID for
 * a malformed group, FCCL_ERR_NOMEM. */
int coll_group_init(struct fccl_group *g);
/* Tear it down; waits for queued asynchronous work to end. */
void coll_group_fini(struct fccl_group *g);

#endif
