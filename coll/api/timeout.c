/*
 * Per-call timeouts: fccl_set_next_timeout() gives the next operation on
 * a group its own bound, which it takes when it takes its place in the
 * group's order (coll_take_timeout, at its sequence number).  The setting
 * lives in the group; like everything of a group it is written and read
 * by the one thread that drives it.
 */
#include "request.h"

int fccl_set_next_timeout(fccl_group_t *g, int64_t timeout_ms)
{
    if (!g || !g->state)
        return fccl_err(FCCL_ERR_INVALID, "set_next_timeout: group is NULL "
                        "or not set up");
    if (timeout_ms == 0 || timeout_ms < -1)
        return fccl_err(FCCL_ERR_INVALID, "set_next_timeout: %lld ms on "
                        "group %s (give > 0, or -1 to clear)",
                        (long long)timeout_ms, g->name);
    g->next_timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
    return FCCL_OK;
}

int64_t coll_take_timeout(struct fccl_group *g)
{
    int64_t ms = g->next_timeout_ms > 0 ? g->next_timeout_ms : g->timeout_ms;
    g->next_timeout_ms = 0;
    return ms;
}
