/*
 * fccl-bench's operations beyond nccl-tests' (all_to_all_v,
 * neighbor_exchange, neighbor_exchange_v2, all_to_all_dims), each run
 * under fccl-run with every result checked (-c 1: fccl-bench computes
 * where each output element must come from and counts the wrong ones),
 * on 1, 3 and 4 ranks on shm and 2 on tcp;ofi_rxm, sizes from 8 B to
 * 256 KiB in steps of 8 (zero-length blocks, odd and even counts), so a
 * wrong element or a failed call fails the test.  Also: the neighbour
 * exchanges refuse -i, and -s / -t out of range are usage errors.
 * bench/pair.sh's helpers: what pair_opts.h reads from stamps (against
 * figures worked out by hand), its -m option, and barrier_pair -m stamps
 * on 2 ranks.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cli/bench/pair_opts.h"
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

/* Two ranks, three pairs, stamps in us (entry, exit, end):
 *   pair 0: r0 0.0 1.0 1.5   r1 0.8 0.9 1.6  time 0.7 skew 0.1 crit 0.8
 *   pair 1: r0 2.0 2.2 2.6   r1 2.1 2.3 2.5  time 0.4 skew 0.1 crit 0.5
 *   pair 2: r0 3.0 3.5 4.5   r1 3.4 3.4 3.9  time 1.0 skew 0.1 crit 1.1
 * medians: time 0.7, skew 0.1, crit 0.8. */
Test(bench_pair, stamps_read)
{
    const double us[18] = {
        0.0, 1.0, 1.5, 2.0, 2.2, 2.6, 3.0, 3.5, 4.5, /* rank 0 */
        0.8, 0.9, 1.6, 2.1, 2.3, 2.5, 3.4, 3.4, 3.9, /* rank 1 */
    };
    double st[18], t, sk, cr;
    for (int i = 0; i < 18; i++)
        st[i] = us[i] * 1e-6 + 1000.0; /* seconds, as clocks read */
    cr_assert_eq(pair_stamps(st, 2, 3, &t, &sk, &cr), 0);
    cr_assert_float_eq(t, 0.7, 1e-6, "time %f", t);
    cr_assert_float_eq(sk, 0.1, 1e-6, "skew %f", sk);
    cr_assert_float_eq(cr, 0.8, 1e-6, "crit %f", cr);
}

Test(bench_pair, mode_option)
{
    struct pair_opts o;
    char *ok[] = {"x", "-m", "stamps", "-o", "broadcast"};
    cr_assert_eq(pair_opts_parse(5, ok, &o), 0);
    cr_assert(o.mode == PAIR_MODE_STAMPS && strcmp(o.op, "broadcast") == 0);
    char *pairs[] = {"x", "-m", "pairs"};
    cr_assert_eq(pair_opts_parse(3, pairs, &o), 0);
    cr_assert_eq(o.mode, PAIR_MODE_PAIRS);
    char *loop[] = {"x", "-n", "7", "-m", "loop"};
    cr_assert_eq(pair_opts_parse(5, loop, &o), 0);
    cr_assert(o.mode == PAIR_MODE_LOOP && o.iters == 7);
    char *bad[] = {"x", "-m", "stamp"};
    cr_assert_eq(pair_opts_parse(3, bad, &o), -1);
    char *bare[] = {"x", "-m"};
    cr_assert_eq(pair_opts_parse(2, bare, &o), -1);
}

/* barrier_pair ARGS on 2 ranks over shm; its output (the caller frees
 * it), once it has exited 0. */
static char *pair_run(const char *args)
{
    char cmd[512], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "FCCL_PROVIDER=shm FCCL_TIMEOUT=60 %s/fccl-run -n 2 --no-prefix "
             "%s/../bench/barrier_pair %s", th_bin_dir(), th_bin_dir(), args);
    int rc = th_sh(cmd, 100, &out);
    cr_assert_eq(rc, 0, "%s: exit %d: %s", cmd, rc, out ? out : "");
    return out;
}

Test(bench_pair, stamps_run_shm_2, .timeout = 120)
{
    char op[32], *out = pair_run("-o all_reduce -n 2000 -m stamps");
    const char *line = out ? strstr(out, "stamps ") : NULL;
    int n = 0;
    size_t bytes = 0;
    double t = -1, sk = -1, cr = -1;
    cr_assert(line && sscanf(line, "stamps %31s %d %zu %lf %lf %lf", op, &n,
                             &bytes, &t, &sk, &cr) == 6,
              "no stamps line: %s", out ? out : "");
    cr_assert(strcmp(op, "all_reduce") == 0 && n == 2 && bytes == 8);
    /* a call takes time; the last to arrive cannot finish before it came */
    cr_assert(t > 0 && sk >= 0 && cr > 0 && t < 1e6 && cr < 1e6,
              "time %f skew %f crit %f", t, sk, cr);
    free(out);
}

/* -m loop: calls back to back; a loop of 4,000 broadcasts reads a time
 * per call, and it is the loop's line, not a pair's */
Test(bench_pair, loop_run_shm_2, .timeout = 120)
{
    char op[32], *out = pair_run("-o broadcast -b 64 -n 4000 -m loop");
    const char *line = out ? strstr(out, "loop ") : NULL;
    int n = 0;
    size_t bytes = 0;
    double us = -1;
    cr_assert(line && sscanf(line, "loop %31s %d %zu %lf", op, &n, &bytes,
                             &us) == 4,
              "no loop line: %s", out ? out : "");
    cr_assert(strcmp(op, "broadcast") == 0 && n == 2 && bytes == 64);
    cr_assert(us > 0 && us < 1e6, "us %f", us);
    cr_assert(!strstr(out, "pair "), "%s", out);
    free(out);
}
