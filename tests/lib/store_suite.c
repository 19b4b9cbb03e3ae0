/* store_suite.c: the store API checks shared by the store suites. */
#include "store_suite.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"
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

struct ss_delayed {
    ss_opener open;
    const char *key, *val;
    int delay_ms, queue;
};

/* On a handle of its own: after delay_ms, push val on queue key or set
 * key to val. */
static void *delayed_set(void *arg)
{
    struct ss_delayed *d = arg;
    fccl_store_t *s = d->open();
    th_sleep_ms(d->delay_ms);
    if (d->queue)
        fccl_store_queue_push(s, d->key, d->val, strlen(d->val));
    else
        fccl_store_set(s, d->key, d->val, strlen(d->val));
    fccl_store_close(s);
    return NULL;
}

void ss_queues_fifo_and_blocking_pop(fccl_store_t *s, ss_opener open2)
{
    for (int i = 0; i < 5; i++) {
        char v[16];
        snprintf(v, sizeof(v), "i%d", i);
        cr_assert_eq(fccl_store_queue_push(s, "q", v, strlen(v)), FCCL_OK,
                     "%s", fccl_last_error());
    }
    int64_t n = -1;
    cr_assert_eq(fccl_store_queue_len(s, "q", &n), FCCL_OK);
    cr_assert_eq(n, 5);
    for (int i = 0; i < 5; i++) {
        void *v = NULL;
        size_t l = 0;
        char want[16];
        snprintf(want, sizeof(want), "i%d", i);
        cr_assert_eq(fccl_store_queue_pop(s, "q", 0, &v, &l, 1000), FCCL_OK,
                     "%s", fccl_last_error());
        cr_assert(l == strlen(want) && memcmp(v, want, l) == 0,
                  "pop %d: '%.*s'", i, (int)l, (char *)v);
        free(v);
    }
    void *v = NULL;
    size_t l = 0;
    cr_assert_eq(fccl_store_queue_pop(s, "q", 0, &v, &l, 1000),
                 FCCL_ERR_NOTFOUND);
    double t0 = th_now();
    cr_assert_eq(fccl_store_queue_pop(s, "q", 1, &v, &l, 300),
                 FCCL_ERR_TIMEOUT);
    cr_assert(th_now() - t0 >= 0.29, "a 300 ms pop ended after %.3f s",
              th_now() - t0);
    pthread_t t;
    struct ss_delayed d = {open2, "q", "late", 300, 1};
    pthread_create(&t, NULL, delayed_set, &d);
    t0 = th_now();
    cr_assert_eq(fccl_store_queue_pop(s, "q", 1, &v, &l, 10000), FCCL_OK,
                 "%s", fccl_last_error());
    cr_assert(th_now() - t0 < 5, "woken by the push, not a poll");
    cr_assert(l == 4 && memcmp(v, "late", 4) == 0);
    free(v);
    pthread_join(t, NULL);
    cr_assert_eq(fccl_store_queue_len(s, "q", &n), FCCL_OK);
    cr_assert_eq(n, 0);
}

void ss_wait_and_get_block_until_set(fccl_store_t *s, ss_opener open2)
{
    pthread_t t;
    struct ss_delayed d = {open2, "late", "v", 400, 0};
    pthread_create(&t, NULL, delayed_set, &d);
    double t0 = th_now();
    void *v = NULL;
    size_t l = 0;
    cr_assert_eq(fccl_store_get(s, "late", &v, &l, 10000), FCCL_OK, "%s",
                 fccl_last_error());
    double dt = th_now() - t0;
    cr_assert(dt > 0.3 && dt < 4, "get waited %.3f s", dt);
    cr_assert(l == 1 && memcmp(v, "v", 2) == 0, "value not 'v' + NUL");
    free(v);
    pthread_join(t, NULL);
    struct ss_delayed d2 = {open2, "w2", "v", 300, 0};
    pthread_create(&t, NULL, delayed_set, &d2);
    t0 = th_now();
    const char *keys[2] = {"late", "w2"};
    cr_assert_eq(fccl_store_wait(s, keys, 2, 10000), FCCL_OK, "%s",
                 fccl_last_error());
    dt = th_now() - t0;
    cr_assert(dt > 0.2 && dt < 4, "wait waited %.3f s", dt);
    pthread_join(t, NULL);
}

struct ss_worker {
    fccl_store_t *s;
    int id, iters, errors;
};

static void *hammer(void *arg)
{
    struct ss_worker *w = arg;
    for (int i = 0; i < w->iters; i++) {
        char key[32], val[64];
        snprintf(key, sizeof(key), "t%d/%d", w->id, i);
        int vl = snprintf(val, sizeof(val), "thread %d iter %d", w->id, i);
        void *got = NULL;
        size_t len = 0;
        if (fccl_store_add(w->s, "shared", 1, NULL) != FCCL_OK ||
            fccl_store_set(w->s, key, val, (size_t)vl) != FCCL_OK ||
            fccl_store_get(w->s, key, &got, &len, 5000) != FCCL_OK ||
            len != (size_t)vl || memcmp(got, val, len) != 0)
            w->errors++;
        free(got);
    }
    return NULL;
}

void ss_threads_share_one_handle(fccl_store_t *s, int iters)
{
    fccl_store_t *view = NULL;
    cr_assert_eq(fccl_store_prefixed(s, "v/", &view), FCCL_OK);
    enum { T = 4 };
    pthread_t th[T];
    struct ss_worker w[T];
    for (int i = 0; i < T; i++) {
        w[i] = (struct ss_worker){i % 2 ? view : s, i, iters, 0};
        pthread_create(&th[i], NULL, hammer, &w[i]);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(w[i].errors, 0, "thread %d: %d errors", i, w[i].errors);
    }
    int64_t a, b, n = 0;
    cr_assert_eq(fccl_store_add(s, "shared", 0, &a), FCCL_OK);
    cr_assert_eq(fccl_store_add(view, "shared", 0, &b), FCCL_OK);
    cr_assert_eq(a + b, T * iters, "%lld + %lld", (long long)a, (long long)b);
    cr_assert_eq(a, T / 2 * iters);
    /* Every thread's keys, and the two counters. */
    cr_assert_eq(fccl_store_num_keys(s, &n), FCCL_OK);
    cr_assert_eq(n, T * iters + 2, "%lld keys", (long long)n);
    fccl_store_close(view);
}

void ss_add_counts_in_decimal(fccl_store_t *s)
{
    int64_t v = 0;
    cr_assert_eq(fccl_store_add(s, "n", 5, &v), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(v, 5);
    cr_assert_eq(fccl_store_add(s, "n", -7, &v), FCCL_OK);
    cr_assert_eq(v, -2);
    srv_expect_value(s, "n", "-2", 2);
    cr_assert_eq(fccl_store_add(s, "n", (int64_t)1 << 40, NULL), FCCL_OK);
    cr_assert_eq(fccl_store_add(s, "n", 0, &v), FCCL_OK);
    cr_assert_eq(v, ((int64_t)1 << 40) - 2);
}
