/*
 * The collective test matrix (DESIGN.md "Test matrix"): one launch of the
 * helper tests/coll_check per (provider, rank count), which runs every
 * case of that launch on real processes over the real provider and checks
 * every rank's result against an independent reference (see its header).
 *
 *   shm, tcp;ofi_rxm and net: the full matrix on 1, 2, 3, 4, 5 and 8
 *   ranks; udp;ofi_rxd and sockets: the smoke matrix on 2 and 3 ranks;
 *   argument errors, overlapping groups from two threads, a killed rank
 *   and fccl_group_abort, on shm, tcp and net.
 *
 * FCCL_TEST_REDUCED=1 (the sanitized build) keeps shm with 1-3 ranks, no
 * multi-MiB sizes, and the special modes on shm.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc.h"
#include "lib/tp_harness.h"

#define TCP "tcp;ofi_rxm"
#define NET tp_net_provider()

/* Run one launch; require exit 0 and at least min_cases cases. */
static void launch(const char *prov, int n, const char *mode, int min_cases,
                   int timeout_s)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s/coll_check -p \"%s\" -n %d -m %s -t %d",
             th_testbin_dir(), prov, n, mode, timeout_s - 20);
    char *out = NULL;
    int rc = th_sh(cmd, timeout_s, &out);
    const char *line = strstr(out ? out : "", "coll_check: ");
    int cases = -1, failed = -1, mism = -1;
    if (line) {
        const char *p = strstr(line, ": ");
        p = p ? strstr(p + 2, ": ") : NULL;
        if (p)
            sscanf(p + 2, "%d cases, %d failed, %d hash", &cases, &failed,
                   &mism);
    }
    if (rc != 0 || cases < min_cases || failed != 0 || mism != 0) {
        size_t len = out ? strlen(out) : 0;
        fprintf(stderr, "%s\n", len > 6000 ? out + len - 6000 : out ? out : "");
    }
    cr_assert_eq(rc, 0, "%s: exit %d", cmd, rc);
    cr_assert_geq(cases, min_cases, "%s: only %d cases ran", cmd, cases);
    cr_assert_eq(failed, 0, "%s: %d failures", cmd, failed);
    cr_assert_eq(mism, 0, "%s: %d cross-rank mismatches", cmd, mism);
    free(out);
}

static void full(const char *prov, int n)
{
    if (th_reduced() && (strcmp(prov, "shm") != 0 || n > 3))
        cr_skip_test("reduced matrix: shm with 1-3 ranks only");
    launch(prov, n, "matrix", 300, 400);
}

/* A provider's matrix cases: 1 to 5 and 8 ranks. */
#define MATRIX_CASES(name, prov)                                               \
    Test(coll_matrix, name##_1, .timeout = 420) { full(prov, 1); }             \
    Test(coll_matrix, name##_2, .timeout = 420) { full(prov, 2); }             \
    Test(coll_matrix, name##_3, .timeout = 420) { full(prov, 3); }             \
    Test(coll_matrix, name##_4, .timeout = 420) { full(prov, 4); }             \
    Test(coll_matrix, name##_5, .timeout = 420) { full(prov, 5); }             \
    Test(coll_matrix, name##_8, .timeout = 420) { full(prov, 8); }

MATRIX_CASES(shm, "shm")
MATRIX_CASES(tcp, TCP)
MATRIX_CASES(net, NET)

static void smoke(const char *prov, int n)
{
    if (th_reduced())
        cr_skip_test("reduced matrix: no smoke providers");
    launch(prov, n, "smoke", 150, 300);
}

/* Without shared segments (FCCL_SHM_SEGMENT=0): every one-host and
 * per-host stage takes its transport fallback. */
Test(coll_smoke, no_segment_tcp_4, .timeout = 320)
{
    setenv("FCCL_SHM_SEGMENT", "0", 1);
    launch(TCP, 4, "smoke", 150, 300);
}

Test(coll_smoke, udp_rxd_2, .timeout = 320) { smoke("udp;ofi_rxd", 2); }
Test(coll_smoke, udp_rxd_3, .timeout = 320) { smoke("udp;ofi_rxd", 3); }
Test(coll_smoke, sockets_2, .timeout = 320) { smoke("sockets", 2); }
Test(coll_smoke, sockets_3, .timeout = 320) { smoke("sockets", 3); }

static void special(const char *prov, int n, const char *mode, int min_cases)
{
    if (th_reduced() && strcmp(prov, "shm") != 0)
        cr_skip_test("reduced matrix: shm only");
    launch(prov, n, mode, min_cases, 120);
}

Test(coll_args, shm_3, .timeout = 140) { special("shm", 3, "args", 2); }
Test(coll_args, tcp_2, .timeout = 140) { special(TCP, 2, "args", 2); }
Test(coll_args, net_2, .timeout = 140) { special(NET, 2, "args", 2); }
Test(coll_groups, shm_3, .timeout = 140) { special("shm", 3, "groups", 120); }
Test(coll_groups, shm_4, .timeout = 140) { special("shm", 4, "groups", 120); }
Test(coll_groups, tcp_3, .timeout = 140) { special(TCP, 3, "groups", 120); }
/* two groups from two threads: on net a message that came before its
 * receive would hold back the other group's (deadlocked before the
 * clear-to-send) */
Test(coll_groups, net_3, .timeout = 140) { special(NET, 3, "groups", 120); }
Test(coll_groups, net_4, .timeout = 140) { special(NET, 4, "groups", 120); }
Test(coll_kill, shm_3, .timeout = 140) { special("shm", 3, "kill", 2); }
Test(coll_kill, shm_4, .timeout = 140) { special("shm", 4, "kill", 2); }
Test(coll_kill, tcp_3, .timeout = 140) { special(TCP, 3, "kill", 2); }
Test(coll_kill, net_3, .timeout = 140) { special(NET, 3, "kill", 2); }
Test(coll_abort, shm_3, .timeout = 140) { special("shm", 3, "abort", 2); }
Test(coll_abort, tcp_2, .timeout = 140) { special(TCP, 2, "abort", 2); }
Test(coll_abort, net_2, .timeout = 140) { special(NET, 2, "abort", 2); }
