/*
 * store_suite.h: the store API checks every store implementation must
 * pass, whatever is behind the handle (tcpstore-server in test_client,
 * etcd in test_etcd).  Each takes an open handle on an empty key space,
 * asserts with Criterion (Criterion test binaries only) and leaves the
 * handle open; the suites add what is particular to their store around
 * these calls.
 */
#ifndef FCCL_TESTS_LIB_STORE_SUITE_H
#define FCCL_TESTS_LIB_STORE_SUITE_H

#include <stddef.h>

#include "fccl/store.h"

/* 1 if key is present, 0 if not (fccl_store_check must succeed). */
int ss_present(fccl_store_t *s, const char *key);

/* compare_set(key, exp -> des) must succeed and reply want. */
void ss_cas(fccl_store_t *s, const char *key, const char *exp,
            const char *des, const char *want);

/* set, overwrite and an empty value, read back. */
void ss_set_get_overwrite_empty(fccl_store_t *s);

/* All 256 byte values, and a pseudo-random value of big bytes, through
 * get and multi_get (a key asked twice). */
void ss_binary_and_large_values(fccl_store_t *s, size_t big);

/* compare_set: create, swap, mismatch, missing with an expected value. */
void ss_compare_set_all_cases(fccl_store_t *s);

/* check (all, some, none asked), delete (present and not), num_keys. */
void ss_check_delete_num_keys(fccl_store_t *s);

/* append (also empty), multi_set with binary and empty values, multi_get
 * in another order. */
void ss_append_multi(fccl_store_t *s);

/* ss_append_multi, then ping with its round trip under max_rtt_us. */
void ss_append_multi_ping(fccl_store_t *s, double max_rtt_us);

/* list_keys under a prefix, sorted; the whole space; through a prefixed
 * view (prefix stripped, values reachable). */
void ss_list_keys_sorted_and_through_views(fccl_store_t *s);

#endif
