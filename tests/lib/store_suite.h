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

/* A test of Criterion suite `suite` that runs ss_<name> on a handle from
 * open() (a function returning a connected handle), then closes it. */
#define SS_TEST(suite, name, open)                                             \
    Test(suite, name)                                                          \
    {                                                                          \
        fccl_store_t *ss_s = open();                                           \
        ss_##name(ss_s);                                                       \
        fccl_store_close(ss_s);                                                \
    }

/* Likewise, ss_<name>(handle, arg). */
#define SS_TEST_WITH(suite, name, open, arg)                                   \
    Test(suite, name)                                                          \
    {                                                                          \
        fccl_store_t *ss_s = open();                                           \
        ss_##name(ss_s, arg);                                                  \
        fccl_store_close(ss_s);                                                \
    }

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

/* add: positive, negative, past 32 bits, 0 to read; the value is kept in
 * decimal. */
void ss_add_counts_in_decimal(fccl_store_t *s);

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

/* Opens a second handle on the same store (fails the test if it cannot). */
typedef fccl_store_t *(*ss_opener)(void);

/* queue_push/len/pop: FIFO order, a non-blocking pop of an empty queue,
 * a blocking pop ending at its timeout, and one woken by a push from a
 * handle of open2's. */
void ss_queues_fifo_and_blocking_pop(fccl_store_t *s, ss_opener open2);

/* get and wait block until a handle of open2's sets the keys. */
void ss_wait_and_get_block_until_set(fccl_store_t *s, ss_opener open2);

/* 4 threads on s and on a prefixed view of it, iters rounds each of add,
 * set and get; the counters and the key count add up. */
void ss_threads_share_one_handle(fccl_store_t *s, int iters);
#endif
