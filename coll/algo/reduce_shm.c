/*
 * Reduce through the shared segment of a one-host group: the all_reduce
 * of allreduce_shm.c with only the root copying the result out (the
 * reduction work is spread over all members the same way).
 */
#include "algos.h"

int coll_reduce_shm(struct coll_run *run)
{
    return coll_shm_reduce(run, run->a->root);
}
