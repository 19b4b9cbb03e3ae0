/*
 * rank.h: how the rank helper programs fccl-run launches for the tests
 * (fault_check, group_check, boot_scale, ...) start and report a failed
 * call (part of libtesthelp.a; no Criterion).  Their stdout is read line
 * by line while they run, and their stderr names the program.
 */
#ifndef FCCL_TESTS_LIB_RANK_H
#define FCCL_TESTS_LIB_RANK_H

#include "fccl/fccl.h"

/* Shell pieces of a 3-rank job a test starts by hand, without a launcher
 * (as srun or mpirun would), each rank's log in $d/rRANK.log: the
 * environment (a printf format taking the store's port; FCCL_PROVIDER and
 * FCCL_JOB_ID are the test's), then the wait, up to 20 s, until all three
 * have printed "ready". */
#define TH_HAND_JOB_ENV                                                      \
    "FCCL_TIMEOUT=60 FCCL_PEER_TIMEOUT=2 MASTER_ADDR=127.0.0.1 "             \
    "MASTER_PORT=%d WORLD_SIZE=3 "
#define TH_HAND_JOB_READY                                                    \
    "for i in $(seq 200); do [ $(cat $d/r*.log | grep -c ready) -eq 3 ] "    \
    "&& break; sleep 0.1; done; sleep 0.5; "

/* stdout line-buffered, then: `args_ok` false prints "usage: PROG USAGE"
 * and returns 2; else fccl_init(NULL, w), whose failure is printed as
 * "PROG: init: ERROR (DETAIL)" and returns 1.  0 once the rank is up:
 * anything else is the program's exit status. */
int th_rank_start(const char *prog, int args_ok, const char *usage,
                  fccl_group_t **w);

/* "PROG: WHAT: ERROR (DETAIL)" on stderr for the fccl status rc; returns
 * 1, the exit status for it. */
int th_rank_fail(const char *prog, const char *what, int rc);

#endif
