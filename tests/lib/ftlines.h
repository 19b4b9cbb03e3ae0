/*
 * ftlines.h: reading what the fault-tolerance helper programs print
 * (ft_check, grow_check: lines "R<r> <key>..."), for test_ft and
 * test_grow.  The th_expect_* calls assert with Criterion (Criterion test
 * binaries only).
 */
#ifndef FCCL_TESTS_LIB_FTLINES_H
#define FCCL_TESTS_LIB_FTLINES_H

#include <stddef.h>

/* Into buf: the rest of rank r's first line "R<r> <key>..." in out,
 * from <key> on ("" if none). */
void th_rank_line(const char *out, int r, const char *key, char *buf,
                  size_t len);

/* The number after key in line, or -1 when key is not there. */
long long th_num_after(const char *line, const char *key);

/* Into name: "fccl_<n>_<sha1 of "a_b_c">" for the n ranks in that order,
 * the SHA-1 computed by sha1sum (independently of the library). */
void th_group_name(const int *ranks, int n, char *name, size_t len);

/* No /dev/shm file of any process that printed "R<r> pid <pid>" is left
 * (each found is named, then removed); returns how many such lines out
 * has (a respawned rank prints two). */
int th_expect_shm_clean(const char *out);

#endif
