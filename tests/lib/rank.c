/* The start and the failure report of the rank helper programs. */
#include "rank.h"

#include <stdio.h>

int th_rank_fail(const char *prog, const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, fccl_strerror(rc),
            fccl_last_error());
    return 1;
}

int th_rank_start(const char *prog, int args_ok, const char *usage,
                  fccl_group_t **w)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!args_ok) {
        fprintf(stderr, "usage: %s %s\n", prog, usage);
        return 2;
    }
    int rc = fccl_init(NULL, w);
    return rc < 0 ? th_rank_fail(prog, "init", rc) : 0;
}
