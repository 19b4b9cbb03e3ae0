/*
 * The elastic training example (examples/elastic_train.c): 4 ranks (2
 * cores here), rank 1 SIGKILLed at a random step under `fccl-run
 * --respawn 1`; the survivors go on, take the respawned rank back in, and
 * every rank's final parameters are bitwise equal to those of a run
 * without the failure (the reference, run here first).  On shm and
 * tcp;ofi_rxm.  The step is printed so a failure can be replayed.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/proc.h"

#define N 4
#define STEPS 40

static int run(const char *prov, int kill_step, int respawn, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "FCCL_TIMEOUT=30 FCCL_PEER_TIMEOUT=3 "
             "%s/fccl-run %s -n %d --provider '%s' "
             "%s/../examples/elastic_train %d %d", th_bin_dir(),
             respawn ? "--respawn 1" : "", N, prov, th_bin_dir(), STEPS,
             kill_step);
    return th_sh(cmd, 120, out);
}

/* Rank r's final parameter bits into buf ("" if it printed none). */
static void final_of(const char *out, int r, char *buf, size_t len)
{
    char want[32];
    snprintf(want, sizeof(want), "] R%d FINAL ", r);
    th_line_at(out, want, strlen(want), buf, len);
}

static void elastic(const char *prov)
{
    char *ref = NULL, *out = NULL, want[256], got[256];
    cr_assert_eq(run(prov, -1, 0, &ref), 0, "reference run:\n%s", ref);
    final_of(ref, 0, want, sizeof(want));
    cr_assert(strlen(want) > 60, "no reference parameters:\n%s", ref);
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int k = 1 + rand() % (STEPS - 8);
    fprintf(stderr, "elastic on %s: rank 1 killed at step %d\n", prov, k);
    int st = run(prov, k, 1, &out);
    cr_expect_eq(st, 0, "step %d: exit %d:\n%s", k, st, out);
    char dying[64];
    snprintf(dying, sizeof(dying), "R1 dying at step %d", k);
    cr_expect(strstr(out, dying) && strstr(out, "respawning it"),
              "step %d: the kill and the respawn:\n%s", k, out);
    for (int r = 0; r < N; r++) {
        final_of(out, r, got, sizeof(got));
        cr_expect_str_eq(got, want, "step %d: rank %d's parameters differ "
                         "from the fault-free run's:\n%s", k, r, out);
    }
    free(ref);
    free(out);
}

Test(elastic, kill_respawn_bitwise_shm, .timeout = 180) { elastic("shm"); }
Test(elastic, kill_respawn_bitwise_tcp, .timeout = 180)
{
    TH_LONG_CASE("a second provider");
    elastic("tcp;ofi_rxm");
}
