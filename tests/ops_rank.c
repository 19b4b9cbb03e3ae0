/*
 * ops_rank: one rank of a job that bootstraps over a store fccl does not
 * own.  The rank connects to the job's TCPStore (MASTER_ADDR/MASTER_PORT,
 * as fccl-run sets them) but hands fccl_init only a table of four
 * operations (set, get, add, delete_key) that forward to that connection,
 * so check, wait and multi_get are built by the library from them.  Then
 * an all_reduce of ranks, a group of the even ranks and one on it, each
 * checked against the value computed here; prints "ops ok RANK" and the
 * number of calls each entry received.  Exit 0 on success.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fccl/fccl.h"

struct fwd {
    fccl_store_t *real;
    int nset, nget, nadd, ndel;
};

static int f_set(void *ctx, const char *key, const void *val, size_t len)
{
    struct fwd *f = ctx;
    f->nset++;
    return fccl_store_set(f->real, key, val, len);
}

static int f_get(void *ctx, const char *key, void **val, size_t *len,
                 int64_t timeout_ms)
{
    struct fwd *f = ctx;
    f->nget++;
    return fccl_store_get(f->real, key, val, len, timeout_ms);
}

static int f_add(void *ctx, const char *key, int64_t delta, int64_t *out)
{
    struct fwd *f = ctx;
    f->nadd++;
    return fccl_store_add(f->real, key, delta, out);
}

static int f_del(void *ctx, const char *key, int *deleted)
{
    struct fwd *f = ctx;
    f->ndel++;
    return fccl_store_delete(f->real, key, deleted);
}

static int fail(const char *what, int rc)
{
    fprintf(stderr, "ops_rank: %s: %s (%s)\n", what, fccl_strerror(rc),
            fccl_last_error());
    return 1;
}

int main(void)
{
    const char *host = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    const char *tsa = getenv("TCPSTORE_ADDR");
    if (!(tsa && *tsa) && (!host || !port))
        return fail("MASTER_ADDR/MASTER_PORT", FCCL_ERR_INVALID);
    char addr[300];
    if (tsa && *tsa) /* fccl-run's store (one node: MASTER_* is torch's) */
        snprintf(addr, sizeof(addr), "%s", tsa);
    else
        snprintf(addr, sizeof(addr), "%s:%s", host, port);
    fccl_store_opts_t so;
    fccl_store_opts_init(&so);
    so.addr = addr;
    so.timeout_ms = 60000;
    struct fwd f = {0};
    int rc = fccl_store_connect(&so, &f.real);
    if (rc < 0)
        return fail("connect", rc);

    fccl_store_ops_t ops = {.set = f_set, .get = f_get, .add = f_add,
                            .delete_key = f_del};
    fccl_store_t *st;
    if ((rc = fccl_store_from_ops(&ops, sizeof(ops), &f, "forwarded", 60000,
                                  &st)) < 0)
        return fail("from_ops", rc);
    fccl_init_opts_t io;
    fccl_init_opts_init(&io);
    io.store = st;
    fccl_group_t *w;
    if ((rc = fccl_init(&io, &w)) < 0)
        return fail("init", rc);
    int me = fccl_get_rank(), n = fccl_get_world_size();

    int64_t v = me + 1, sum = 0;
    if ((rc = fccl_all_reduce(&v, &sum, 1, FCCL_INT64, FCCL_SUM, w, NULL)) < 0)
        return fail("all_reduce", rc);
    if (sum != (int64_t)n * (n + 1) / 2) {
        fprintf(stderr, "ops_rank: sum %lld, want %d\n", (long long)sum,
                n * (n + 1) / 2);
        return 1;
    }
    int evens[64], ne = 0;
    for (int r = 0; r < n && ne < 64; r += 2)
        evens[ne++] = r;
    if (me % 2 == 0) {
        fccl_group_t *g;
        if ((rc = fccl_group_new(evens, (size_t)ne, &g)) < 0)
            return fail("group_new", rc);
        int64_t x = me, xs = 0, want = 0;
        for (int i = 0; i < ne; i++)
            want += evens[i];
        if ((rc = fccl_all_reduce(&x, &xs, 1, FCCL_INT64, FCCL_SUM, g,
                                  NULL)) < 0)
            return fail("group all_reduce", rc);
        if (xs != want) {
            fprintf(stderr, "ops_rank: group sum %lld, want %lld\n",
                    (long long)xs, (long long)want);
            return 1;
        }
        fccl_group_destroy(g);
    }
    fccl_finalize();
    fccl_store_close(st);
    fccl_store_close(f.real);
    printf("ops ok %d set %d get %d add %d del %d\n", me, f.nset, f.nget,
           f.nadd, f.ndel);
    return 0;
}
