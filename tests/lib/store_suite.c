/* store_suite.c: the store API checks shared by the store suites. */
#include "store_suite.h"

#include <criterion/criterion.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "srv.h"

int ss_present(fccl_store_t *s, const char *key)
{
    int all = -1;
    const char *keys[1] = {key};
    cr_assert_eq(fccl_store_check(s, keys, 1, &all), FCCL_OK, "%s",
                 fccl_last_error());
    return all;
}

void ss_cas(fccl_store_t *s, const char *key, const char *exp,
            const char *des, const char *want)
{
    void *cur = NULL;
    size_t len = 0;
    int rc = fccl_store_compare_set(s, key, exp, strlen(exp), des,
                                    strlen(des), &cur, &len);
    cr_assert_eq(rc, FCCL_OK, "cas: %s", fccl_last_error());
    cr_assert(len == strlen(want) && memcmp(cur, want, len) == 0,
              "cas %s '%s'->'%s': reply '%.*s', want '%s'", key, exp, des,
              (int)len, (char *)cur, want);
    free(cur);
}

void ss_set_get_overwrite_empty(fccl_store_t *s)
{
    cr_assert_eq(fccl_store_set(s, "a", "hello", 5), FCCL_OK);
    srv_expect_value(s, "a", "hello", 5);
    cr_assert_eq(fccl_store_set(s, "a", "hi", 2), FCCL_OK);
    srv_expect_value(s, "a", "hi", 2);
    cr_assert_eq(fccl_store_set(s, "empty", "", 0), FCCL_OK);
    srv_expect_value(s, "empty", "", 0);
    cr_assert_eq(ss_present(s, "empty"), 1, "an empty value is a value");
}

void ss_binary_and_large_values(fccl_store_t *s, size_t big)
{
    uint8_t all[256];
    for (int i = 0; i < 256; i++)
        all[i] = (uint8_t)i;
    cr_assert_eq(fccl_store_set(s, "bin", all, sizeof(all)), FCCL_OK);
    srv_expect_value(s, "bin", all, sizeof(all));
    uint8_t *b = malloc(big);
    cr_assert(b);
    uint32_t x = 12345;
    for (size_t i = 0; i < big; i++) {
        x = x * 1103515245u + 12345u;
        b[i] = (uint8_t)(x >> 16);
    }
    cr_assert_eq(fccl_store_set(s, "big", b, big), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_value(s, "big", b, big);
    const char *keys[3] = {"bin", "big", "bin"};
    void *vals[3];
    size_t lens[3];
    cr_assert_eq(fccl_store_multi_get(s, keys, 3, vals, lens, 5000), FCCL_OK,
                 "%s", fccl_last_error());
    cr_assert(lens[0] == 256 && lens[1] == big && lens[2] == 256);
    cr_assert(memcmp(vals[1], b, big) == 0 && memcmp(vals[2], all, 256) == 0);
    for (int i = 0; i < 3; i++)
        free(vals[i]);
    free(b);
}

void ss_compare_set_all_cases(fccl_store_t *s)
{
    ss_cas(s, "c", "", "first", "first"); /* missing + empty expected: create */
    srv_expect_value(s, "c", "first", 5);
    ss_cas(s, "c", "first", "second", "second"); /* match: swap */
    srv_expect_value(s, "c", "second", 6);
    ss_cas(s, "c", "nope", "third", "second"); /* mismatch: current value */
    srv_expect_value(s, "c", "second", 6);
    ss_cas(s, "m", "exp", "des", "exp"); /* missing + expected: echo only */
    cr_assert_eq(ss_present(s, "m"), 0);
}

void ss_check_delete_num_keys(fccl_store_t *s)
{
    int64_t n = -1;
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK, "%s", fccl_last_error());
    cr_assert_eq(n, 0);
    fccl_store_set(s, "x", "1", 1);
    fccl_store_set(s, "y", "2", 1);
    const char *xy[2] = {"x", "y"}, *xz[2] = {"x", "z"};
    int all = -1;
    cr_assert_eq(fccl_store_check(s, xy, 2, &all), FCCL_OK);
    cr_assert_eq(all, 1);
    cr_assert_eq(fccl_store_check(s, xz, 2, &all), FCCL_OK);
    cr_assert_eq(all, 0);
    cr_assert_eq(fccl_store_check(s, xz, 0, &all), FCCL_OK);
    cr_assert_eq(all, 1, "no keys: all present");
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 2);
    int del = -1;
    cr_assert_eq(fccl_store_delete(s, "x", &del), FCCL_OK);
    cr_assert_eq(del, 1);
    cr_assert_eq(fccl_store_delete(s, "x", &del), FCCL_OK);
    cr_assert_eq(del, 0);
    cr_assert_eq(ss_present(s, "x"), 0);
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, 1);
}

void ss_append_multi(fccl_store_t *s)
{
    cr_assert_eq(fccl_store_append(s, "ap", "ab", 2), FCCL_OK);
    cr_assert_eq(fccl_store_append(s, "ap", "", 0), FCCL_OK);
    cr_assert_eq(fccl_store_append(s, "ap", "cd", 2), FCCL_OK);
    srv_expect_value(s, "ap", "abcd", 4);
    const char *keys[3] = {"k0", "k1", "k2"};
    const void *vals[3] = {"zero", "", "two\0x"};
    size_t lens[3] = {4, 0, 5};
    cr_assert_eq(fccl_store_multi_set(s, keys, vals, lens, 3), FCCL_OK);
    void *got[3];
    size_t glen[3];
    const char *order[3] = {"k2", "k0", "k1"};
    cr_assert_eq(fccl_store_multi_get(s, order, 3, got, glen, 5000), FCCL_OK,
                 "%s", fccl_last_error());
    cr_assert(glen[0] == 5 && memcmp(got[0], "two\0x", 5) == 0);
    cr_assert(glen[1] == 4 && memcmp(got[1], "zero", 4) == 0);
    cr_assert(glen[2] == 0);
    for (int i = 0; i < 3; i++)
        free(got[i]);
}

void ss_append_multi_ping(fccl_store_t *s, double max_rtt_us)
{
    ss_append_multi(s);
    double rtt = -1;
    cr_assert_eq(fccl_store_ping(s, &rtt), FCCL_OK, "%s", fccl_last_error());
    cr_assert(rtt > 0 && rtt < max_rtt_us, "rtt %f us", rtt);
    cr_assert_eq(fccl_store_ping(s, NULL), FCCL_OK);
}

void ss_list_keys_sorted_and_through_views(fccl_store_t *s)
{
    fccl_store_t *v = NULL;
    fccl_store_set(s, "job/b", "1", 1);
    fccl_store_set(s, "job/a", "1", 1);
    fccl_store_set(s, "other", "1", 1);
    char **keys = NULL;
    size_t n = 0;
    cr_assert_eq(fccl_store_list_keys(s, "job/", &keys, &n), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(n, 2);
    cr_assert_str_eq(keys[0], "job/a");
    cr_assert_str_eq(keys[1], "job/b");
    fccl_store_free_keys(keys, n);
    cr_assert_eq(fccl_store_list_keys(s, "", &keys, &n), FCCL_OK);
    cr_assert_eq(n, 3);
    fccl_store_free_keys(keys, n);
    cr_assert_eq(fccl_store_prefixed(s, "job/", &v), FCCL_OK);
    cr_assert_eq(fccl_store_list_keys(v, NULL, &keys, &n), FCCL_OK);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(keys[0], "a", "view prefix stripped");
    cr_assert_str_eq(keys[1], "b");
    fccl_store_free_keys(keys, n);
    srv_expect_value(v, "a", "1", 1);
    fccl_store_close(v);
}
