/*
 * fccl-bench's operations beyond nccl-tests' (all_to_all_v,
 * neighbor_exchange, neighbor_exchange_v2, all_to_all_dims), each run
 * under fccl-run with every result checked (-c 1: fccl-bench computes
 * where each output element must come from and counts the wrong ones),
 * on 1, 3 and 4 ranks on shm and 2 on tcp;ofi_rxm, sizes from 8 B to
 * 256 KiB in steps of 8 (zero-length blocks, odd and even counts), so a
 * wrong element or a failed call fails the test.  Also: the neighbour
 * exchanges refuse -i, and -s / -t out of range are usage errors.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc.h"

#define TCP "tcp;ofi_rxm"

/* fccl-run -n N fccl-bench ARGS; exit status and output. */
static int bench(const char *prov, int n, const char *args, char **out)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "FCCL_PROVIDER=\"%s\" FCCL_TIMEOUT=60 %s/fccl-run -n %d "
             "%s/fccl-bench %s",
             prov, th_bin_dir(), n, th_bin_dir(), args);
    return th_sh(cmd, 120, out);
}

/* Checked run: exit 0, every size correct, at least `rows` sizes. */
static void checked(const char *prov, int n, const char *op,
                    const char *more, int rows)
{
    char args[256], *out = NULL;
    snprintf(args, sizeof(args),
             "-o %s -c 1 -b 8 -e 256K -f 8 -n 2 -w 1 %s", op, more);
    int rc = bench(prov, n, args, &out);
    int got = th_count(out ? out : "", "[0]  "); /* rows; headers: "[0] #" */
    if (rc != 0 || !strstr(out ? out : "", "# all results correct"))
        fprintf(stderr, "%s\n", out ? out : "");
    cr_assert_eq(rc, 0, "%s on %d ranks (%s): exit %d", op, n, prov, rc);
    cr_assert(strstr(out, "# all results correct"), "%s: %s", op, out);
    cr_assert_geq(got, rows, "%s: only %d sizes: %s", op, got, out);
    free(out);
}

static void ops(const char *prov, int n)
{
    if (th_reduced() && strcmp(prov, "shm") != 0)
        cr_skip_test("reduced: shm only");
    checked(prov, n, "all_to_all_v", "", 5);
    checked(prov, n, "all_to_all_v", "-a pairwise -d int8", 5);
    checked(prov, n, "neighbor_exchange", "-d bfloat16", 5);
    checked(prov, n, "neighbor_exchange_v2", "-d float64", 5);
    checked(prov, n, "all_to_all_dims", "", 3);
    checked(prov, n, "all_to_all_dims", "-s 0 -t 2 -i -d int64", 3);
    checked(prov, n, "all_to_all_dims", "-s 2 -t 2 -a linear", 3);
}

Test(bench_ops, shm_1, .timeout = 200) { ops("shm", 1); }
Test(bench_ops, shm_3, .timeout = 200) { ops("shm", 3); }
Test(bench_ops, shm_4, .timeout = 200) { ops("shm", 4); }
Test(bench_ops, tcp_2, .timeout = 200) { ops(TCP, 2); }

static void usage_error(const char *args)
{
    char *out = NULL;
    int rc = bench("shm", 1, args, &out);
    cr_assert_eq(rc, 2, "fccl-bench %s: exit %d, want 2: %s", args, rc,
                 out ? out : "");
    free(out);
}

Test(bench_ops, usage_errors, .timeout = 60)
{
    usage_error("-o neighbor_exchange -i");
    usage_error("-o neighbor_exchange_v2 -i");
    usage_error("-o all_to_all_dims -s 3");
    usage_error("-o all_to_all_dims -t -1");
}
