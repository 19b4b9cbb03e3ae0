/*
 * boot_scale: one rank of a bootstrap scaling test job (run by
 * test_boot_scale.c under fccl-run or by hand).  Modes (argv[1]):
 *   init            init, barrier, finalize; prints "R<rank> resolved <n>"
 *                   (peers this rank put into its address vector)
 *   sparse          init, split into pairs {2i, 2i+1}, all_reduce in the
 *                   pair; prints "R<rank> pairsum <s> resolved <n>"
 *   groups K        K times: fccl_group_new of the world's ranks, then a
 *                   split of the world, each destroyed again; rank 0
 *                   prints "keys before <a> after <b>" (store key count
 *                   around the loop, after barriers)
 *   deadpeer        the last rank exits right after init; every other
 *                   rank makes the group {itself, last} and all_reduces
 *                   on it; prints "R<rank> err <status> <secs> <message>"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "fccl/fccl.h"
#include "lib/proc.h"
#include "lib/rank.h"
#include "tp.h"

static int die(const char *what, int rc)
{
    return th_rank_fail("boot_scale", what, rc);
}

static int mode_init(fccl_group_t *w)
{
    int rc = fccl_barrier(w, NULL);
    if (rc < 0)
        return die("barrier", rc);
    printf("R%d resolved %d\n", fccl_get_rank(), tp_resolved_count(boot.tp));
    return 0;
}

static int mode_sparse(fccl_group_t *w)
{
    int r = fccl_get_rank(), n = fccl_get_world_size();
    fccl_group_t *pair;
    int rc = fccl_group_split(w, r / 2, r, &pair);
    if (rc < 0)
        return die("split", rc);
    int64_t v = r + 1, s = 0;
    if ((rc = fccl_all_reduce(&v, &s, 1, FCCL_INT64, FCCL_SUM, pair, NULL)) < 0)
        return die("all_reduce", rc);
    fccl_group_destroy(pair);
    printf("R%d pairsum %lld resolved %d of %d\n", r, (long long)s,
           tp_resolved_count(boot.tp), n - 1);
    return 0;
}

static int count_keys(fccl_group_t *w, fccl_store_t *st, int64_t *n)
{
    int rc = fccl_barrier(w, NULL);
    if (rc >= 0 && fccl_get_rank() == 0)
        rc = fccl_store_num_keys(st, n);
    return rc < 0 ? die("counting keys", rc) : 0;
}

static int mode_groups(fccl_group_t *w, int k)
{
    int n = fccl_get_world_size();
    int *all = malloc(sizeof(int) * (size_t)n);
    char addr[300];
    snprintf(addr, sizeof(addr), "%s", th_job_store_addr());
    fccl_store_opts_t so;
    fccl_store_opts_init(&so);
    so.addr = addr;
    fccl_store_t *st = NULL;
    int rc = fccl_store_connect(&so, &st);
    if (rc < 0 || !all)
        return die("store connect", rc);
    for (int i = 0; i < n; i++)
        all[i] = n - 1 - i;
    int64_t before = -1, after = -1;
    for (int i = -1; i < k; i++) {
        fccl_group_t *g;
        if (i % 2 == 0)
            rc = fccl_group_new(all, (size_t)n, &g);
        else
            rc = fccl_group_split(w, 0, 0, &g);
        if (rc < 0)
            return die(i % 2 == 0 ? "group_new" : "group_split", rc);
        fccl_group_destroy(g);
        if (i == -1 && count_keys(w, st, &before)) /* "ctx" exists now */
            return 1;
    }
    if (count_keys(w, st, &after))
        return 1;
    if (fccl_get_rank() == 0)
        printf("keys before %lld after %lld groups %d\n", (long long)before,
               (long long)after, k);
    fccl_store_close(st);
    free(all);
    return 0;
}

static int mode_deadpeer(fccl_group_t *w)
{
    int r = fccl_get_rank(), n = fccl_get_world_size();
    if (r == n - 1)
        _exit(0); /* gone before most ranks ever talked to it */
    int members[2] = {r, n - 1};
    fccl_group_t *g;
    double t0 = th_now();
    int rc = fccl_group_new(members, 2, &g);
    if (rc >= 0) {
        int64_t v = 1, s = 0;
        rc = fccl_all_reduce(&v, &s, 1, FCCL_INT64, FCCL_SUM, g, NULL);
    }
    printf("R%d err %d %.1f %s\n", r, rc, th_now() - t0, fccl_last_error());
    fccl_group_abort(w); /* the final barrier would wait for the dead */
    return 0;
}

int main(int argc, char **argv)
{
    fccl_group_t *w;
    int ret = 2, rc = th_rank_start("boot_scale", argc >= 2,
                                    "init|sparse|groups K|deadpeer", &w);
    if (rc)
        return rc;
    if (strcmp(argv[1], "init") == 0)
        ret = mode_init(w);
    else if (strcmp(argv[1], "sparse") == 0)
        ret = mode_sparse(w);
    else if (strcmp(argv[1], "groups") == 0 && argc >= 3)
        ret = mode_groups(w, atoi(argv[2]));
    else if (strcmp(argv[1], "deadpeer") == 0)
        ret = mode_deadpeer(w);
    fccl_finalize();
    return ret;
}
