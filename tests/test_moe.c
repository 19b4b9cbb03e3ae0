/*
 * MoE expert parallelism (fccl/moe.h) on real processes: one fccl-run job
 * of tests/moe_check per (provider, rank count, mode), each checking every
 * rank's results against the reference the helper computes itself (see
 * its header).  layer: the matrix of layouts (shared-expert ranks, TP
 * group of 2, dtypes, random and skewed routing, masks, uneven bs) on 2, 4
 * and 8 ranks; args: every argument error on every rank, which must fail
 * everywhere with FCCL_ERR_INVALID and never hang.  On shm and
 * tcp;ofi_rxm.  FCCL_TEST_REDUCED=1 (the sanitized build) runs a third of
 * the layer matrix, on shm only.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc.h"

#define TCP "tcp;ofi_rxm"

/* The command of an n-rank moe_check job on provider prov (the reduced
 * tiers run shm only: the test is skipped there for another provider). */
static void job_cmd(char *cmd, size_t len, const char *prov, int n,
                    int timeout_s, const char *mode)
{
    if (th_reduced() && strcmp(prov, "shm") != 0)
        cr_skip_test("reduced: shm only");
    snprintf(cmd, len,
             "FCCL_PROVIDER=\"%s\" FCCL_TIMEOUT=%d %s/fccl-run -n %d "
             "%s/moe_check -m %s",
             prov, timeout_s, th_bin_dir(), n, th_testbin_dir(), mode);
}

static void job(const char *prov, int n, const char *mode, int min_cases)
{
    if (n > 4)
        TH_LONG_CASE("more than 4 ranks");
    char cmd[512];
    job_cmd(cmd, sizeof(cmd), prov, n, 60, mode);
    char *out = NULL;
    int rc = th_sh(cmd, 150, &out);
    const char *line = strstr(out ? out : "", "moe_check: ranks=");
    int cases = -1, failed = -1;
    if (line) {
        const char *p = strstr(line, ": ");
        p = p ? strstr(p + 2, ": ") : NULL;
        if (p)
            sscanf(p + 2, "%d cases, %d failed", &cases, &failed);
    }
    if (rc != 0 || cases < min_cases || failed != 0) {
        size_t len = out ? strlen(out) : 0;
        fprintf(stderr, "%s\n", len > 6000 ? out + len - 6000 : out ? out : "");
    }
    cr_assert_eq(rc, 0, "%s: exit %d", cmd, rc);
    cr_assert_geq(cases, min_cases, "%s: only %d cases ran", cmd, cases);
    cr_assert_eq(failed, 0, "%s: %d failures", cmd, failed);
    free(out);
}

static void layer(const char *prov, int n, int min_cases, int min_reduced)
{
    job(prov, n, "layer", th_reduced() ? min_reduced : min_cases);
}

Test(moe_layer, shm_2, .timeout = 170) { layer("shm", 2, 26, 6); }
Test(moe_layer, shm_4, .timeout = 170) { layer("shm", 4, 60, 11); }
Test(moe_layer, shm_8, .timeout = 170) { layer("shm", 8, 76, 11); }
Test(moe_layer, tcp_2, .timeout = 170) { layer(TCP, 2, 26, 6); }
Test(moe_layer, tcp_4, .timeout = 170) { layer(TCP, 4, 60, 11); }
Test(moe_layer, tcp_8, .timeout = 170) { layer(TCP, 8, 76, 11); }

Test(moe_args, shm_2, .timeout = 170) { job("shm", 2, "args", 33); }
Test(moe_args, shm_4, .timeout = 170) { job("shm", 4, "args", 41); }
Test(moe_args, shm_8, .timeout = 170) { job("shm", 8, "args", 41); }
Test(moe_args, tcp_4, .timeout = 170) { job(TCP, 4, "args", 41); }

/* fccl-moe-bench with its defaults checks every output (exit 0 and the
 * "all results correct" line), on 2 and 4 ranks and with TP; one rank is a
 * usage error (exit 2). */
static void bench(int n, const char *args, int want_rc)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "FCCL_PROVIDER=shm FCCL_TIMEOUT=60 %s/fccl-run -n %d "
             "%s/fccl-moe-bench %s",
             th_bin_dir(), n, th_bin_dir(), args);
    char *out = NULL;
    int rc = th_sh(cmd, 150, &out);
    if (rc != want_rc)
        fprintf(stderr, "%s\n", out ? out : "");
    cr_assert_eq(rc, want_rc, "%s: exit %d, want %d", cmd, rc, want_rc);
    if (want_rc == 0)
        cr_assert(strstr(out, "# all results correct") &&
                      strstr(out, "fused") && strstr(out, "unfused"),
                  "%s: %s", cmd, out);
    free(out);
}

Test(moe_bench, checked_2, .timeout = 170) { bench(2, "-c 1 -n 2 -w 1", 0); }
Test(moe_bench, checked_4_tp_shared, .timeout = 170)
{
    bench(4, "-c 1 -n 2 -w 1 -t 2 -S 1 -d float32", 0);
}
Test(moe_bench, one_rank, .timeout = 60) { bench(1, "", 2); }
Test(moe_bench, bad_k, .timeout = 60) { bench(2, "-k 99", 2); }

/* A rank dies with its combine rows unread: every survivor must fail,
 * naming it, within 30 s (FCCL_TIMEOUT=20 would end a hang later). */
static void kill_job(const char *prov, int n)
{
    char cmd[512];
    job_cmd(cmd, sizeof(cmd), prov, n, 20, "kill");
    char *out = NULL;
    int rc = th_sh(cmd, 90, &out);
    int ok = th_count(out ? out : "", "-> ok");
    if (rc != 0 || ok != n - 1)
        fprintf(stderr, "%s\n", out ? out : "");
    cr_assert_eq(rc, 0, "%s: exit %d", cmd, rc);
    cr_assert_eq(ok, n - 1, "%s: %d of %d survivors failed properly", cmd,
                 ok, n - 1);
    free(out);
}

Test(moe_kill, shm_4, .timeout = 120) { kill_job("shm", 4); }
Test(moe_kill, tcp_3, .timeout = 120) { kill_job(TCP, 3); }
