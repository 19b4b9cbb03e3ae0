/*
 * fault_check: one rank of a fault test job (tests/multihost/tests.sh),
 * started through env:// like any torchrun rank.  Modes (argv[1]):
 *   loop SECS       init, print "R<rank> pid <pid> ready", then run a
 *                   checked all_reduce every 50 ms for up to SECS s.  On a
 *                   failure print "R<rank> FAILED <status> at <epoch ms>:
 *                   <message>", try one more all_reduce (it must fail too:
 *                   "R<rank> NEXT <status>"), stay up FAULT_LINGER_MS ms
 *                   (so a survivor outlives a rank the test kills later),
 *                   finalize and exit 3.  No failure in SECS s: exit 0.
 *   busy MS RANK    all_reduce; rank RANK then sleeps MS ms outside fccl
 *                   while the others wait in the next all_reduce; both
 *                   results checked; prints "R<rank> ok" and exits 0.
 * Results are checked against the sum every rank can compute alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fccl/fccl.h"
#include "lib/proc.h"
#include "lib/rank.h"

/* Wall-clock time: the harness compares it with `date +%s%3N` taken in
 * another process. */
static long long epoch_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* all_reduce(SUM) of (rank + 1) * (i + 1): want size*(size+1)/2 * (i+1). */
static int checked_all_reduce(fccl_group_t *w, int rank, int size, int i)
{
    int in[4], out[4];
    for (int k = 0; k < 4; k++)
        in[k] = (rank + 1) * (i + k + 1);
    int rc = fccl_all_reduce(in, out, 4, FCCL_INT32, FCCL_SUM, w, NULL);
    if (rc < 0)
        return rc;
    for (int k = 0; k < 4; k++)
        if (out[k] != size * (size + 1) / 2 * (i + k + 1)) {
            fprintf(stderr, "R%d: wrong sum %d at %d\n", rank, out[k], k);
            exit(4);
        }
    return 0;
}

static int loop_mode(fccl_group_t *w, int rank, int size, long secs)
{
    printf("R%d pid %d ready\n", rank, (int)getpid());
    long long end = epoch_ms() + secs * 1000;
    for (int i = 0; epoch_ms() < end; i++) {
        int rc = checked_all_reduce(w, rank, size, i);
        if (rc < 0) {
            printf("R%d FAILED %s at %lld: %s\n", rank, fccl_strerror(rc),
                   epoch_ms(), fccl_last_error());
            rc = checked_all_reduce(w, rank, size, i + 1);
            printf("R%d NEXT %s: %s\n", rank, fccl_strerror(rc),
                   rc < 0 ? fccl_last_error() : "");
            const char *l = getenv("FAULT_LINGER_MS");
            if (l)
                th_sleep_ms((int)atol(l));
            fccl_finalize();
            return 3;
        }
        th_sleep_ms(50);
    }
    fccl_finalize();
    return 0;
}

static int busy_mode(fccl_group_t *w, int rank, int size, long ms, int who)
{
    int rc = checked_all_reduce(w, rank, size, 0);
    if (rc == 0 && rank == who)
        th_sleep_ms((int)ms); /* alive, but nowhere near fccl */
    if (rc == 0)
        rc = checked_all_reduce(w, rank, size, 1);
    if (rc < 0) {
        printf("R%d FAILED %s: %s\n", rank, fccl_strerror(rc),
               fccl_last_error());
        return 1;
    }
    printf("R%d ok\n", rank);
    fccl_finalize();
    return 0;
}

int main(int argc, char **argv)
{
    fccl_group_t *w;
    int rc = th_rank_start("fault_check", argc >= 3 &&
                           (strcmp(argv[1], "busy") != 0 || argc >= 4),
                           "loop SECS | busy MS RANK", &w);
    if (rc)
        return rc;
    int rank = fccl_get_rank(), size = fccl_get_world_size();
    if (strcmp(argv[1], "loop") == 0)
        return loop_mode(w, rank, size, atol(argv[2]));
    return busy_mode(w, rank, size, atol(argv[2]), atoi(argv[3]));
}
