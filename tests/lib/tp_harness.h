/*
 * tp_harness.h: run N real processes that each hold a live transport, with
 * no store and no bootstrap (part of libtesthelp.a; no Criterion, so the
 * helper programs use it too).
 *
 *   static int body(struct fccl_tp *tp, int rank, int n, void *arg)
 *   {
 *       ... tp_isend / tp_irecv / tp_waitall ...
 *       TPH_CHECK(got == want, "rank %d sent %d", peer, got);
 *       return 0;                      // non-zero = this rank failed
 *   }
 *   struct tp_harness h = {.provider = "shm", .nranks = 4};
 *   cr_assert_eq(tp_harness_run(&h, body, NULL), 0);
 *
 * How it works: the parent forks the N children FIRST (libfabric must never
 * be initialised before a fork).  Each child opens its transport with the
 * given provider, sends its name blob to the parent over a pipe; the parent
 * sends every blob to every child; each child calls tp_add_peers (node_of
 * all 0 unless h->node_of is set), tells the parent, waits until every
 * child has (so no message reaches a rank that has not added its peers:
 * see tp_set_local), runs `fn`, closes the transport and
 * exits 0 only if fn returned 0.  The parent waits for all children until
 * h->timeout_ms (default 60 s), SIGKILLs them all on timeout, and returns 0
 * only if every child exited 0.  It reports failures on stderr.  Children
 * also die with their parent (PR_SET_PDEATHSIG) and by alarm() shortly
 * after the deadline, so a killed test leaves no rank spinning; the shm
 * segments of ranks that exited without tp_close are removed.
 *
 * The body runs in a child process, so Criterion asserts must not be used
 * there: use TPH_CHECK (prints rank, line, condition and fccl_last_error,
 * then returns -1 from the body).  Network providers are pinned to the
 * loopback interface ("lo") unless h->opts.net_iface or FCCL_NET_IFACE
 * says otherwise, so tests never send traffic off the machine.
 */
#ifndef FCCL_TESTS_LIB_TP_HARNESS_H
#define FCCL_TESTS_LIB_TP_HARNESS_H

#include <stdio.h>

#include "fccl/core.h"
#include "tp.h"

#define TPH_MAX_RANKS 64

struct tp_harness {
    const char *provider;  /* forced provider; NULL = auto (env may force) */
    int nranks;            /* 1..TPH_MAX_RANKS */
    int timeout_ms;        /* whole run; 0 = 60000 */
    const int *node_of;    /* host index per rank; NULL = all on host 0 */
    struct tp_opts opts;   /* other tp_open options (provider is ignored) */
    const char *const *rank_env; /* per rank: "NAME=value" put in that
                                    rank's environment before tp_open, or
                                    NULL; the array may be NULL */
    /* Filled in by tp_harness_run: */
    double open_ms_max;    /* slowest tp_open among the ranks */
    char desc[128];        /* rank 0's tp_provider_desc() */
};

typedef int (*tp_harness_fn)(struct fccl_tp *tp, int rank, int n, void *arg);

extern int tph_rank; /* this process's rank inside a harness child */

#define TPH_CHECK(cond, ...)                                                   \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "[rank %d] %s:%d: check failed: %s: ", tph_rank,   \
                    __FILE__, __LINE__, #cond);                                \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, " (last error: %s)\n", fccl_last_error());         \
            return -1;                                                         \
        }                                                                      \
    } while (0)

/* Run fn on h->nranks fresh processes.  Blocks until all exit or the
 * deadline; returns 0 only if every rank exited 0, -1 otherwise. */
int tp_harness_run(struct tp_harness *h, tp_harness_fn fn, void *arg);

/* The native TCP RDM provider's name in this libfabric: "net" in 1.17
 * (Debian 12), which 1.18 renamed "tcp" (Debian 13's 2.1 has no "net"). */
const char *tp_net_provider(void);

#endif
