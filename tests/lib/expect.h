/*
 * expect.h: what a program run by th_run (proc.h) must have done, for the
 * suites that run the command-line programs (test_cli, test_cli_verbs,
 * test_pytorch_compat).  Each asserts with Criterion (Criterion test
 * binaries only) and frees r.
 */
#ifndef FCCL_TESTS_LIB_EXPECT_H
#define FCCL_TESTS_LIB_EXPECT_H

#include <stddef.h>

#include "proc.h"

/* Exit status `status` and, unless out is NULL, exactly the len bytes of
 * out on stdout. */
void th_expect_out(struct th_result r, int status, const void *out,
                   size_t len);

/* Exit status `status`, nothing on stdout, stderr containing needle. */
void th_expect_err(struct th_result r, int status, const char *needle);

#endif
