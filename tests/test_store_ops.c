/*
 * Stores fccl does not own (fccl_store_from_ops): an in-memory table of
 * set/get/add/delete_key written here, and what the library builds from
 * it (check, wait, multi_get, multi_set), refuses (UNSUPPORTED naming
 * the call), prefixes (views) and reports (the entry's own message with
 * the store, call and key); then a 4-rank fccl-run job whose ranks
 * bootstrap over a four-entry table forwarding to the job's store
 * (tests/ops_rank.c).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "fccl/fccl.h"
#include "lib/proc.h"

#define MAXK 64

struct mem {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *key[MAXK];
    char *val[MAXK];
    size_t len[MAXK];
    int n, closed, gets;
};

static int find(struct mem *m, const char *k)
{
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->key[i], k))
            return i;
    return -1;
}

static void put(struct mem *m, const char *k, const void *v, size_t l)
{
    int i = find(m, k);
    if (i < 0) {
        i = m->n++;
        m->key[i] = strdup(k);
    } else {
        free(m->val[i]);
    }
    m->val[i] = malloc(l + 1);
    memcpy(m->val[i], v, l);
    m->val[i][l] = 0;
    m->len[i] = l;
    pthread_cond_broadcast(&m->cv);
}

static int m_set(void *ctx, const char *k, const void *v, size_t l)
{
    struct mem *m = ctx;
    pthread_mutex_lock(&m->mu);
    put(m, k, v, l);
    pthread_mutex_unlock(&m->mu);
    return FCCL_OK;
}

static int m_get(void *ctx, const char *k, void **v, size_t *l, int64_t ms)
{
    struct mem *m = ctx;
    struct timespec dl = fccl_realtime_after_ms(ms);
    pthread_mutex_lock(&m->mu);
    m->gets++;
    int i;
    while ((i = find(m, k)) < 0)
        if (pthread_cond_timedwait(&m->cv, &m->mu, &dl)) {
            pthread_mutex_unlock(&m->mu);
            return fccl_set_error(FCCL_ERR_TIMEOUT, "no such key in memory");
        }
    *v = malloc(m->len[i] + 1);
    memcpy(*v, m->val[i], m->len[i] + 1);
    *l = m->len[i];
    pthread_mutex_unlock(&m->mu);
    return FCCL_OK;
}

static int m_add(void *ctx, const char *k, int64_t d, int64_t *out)
{
    struct mem *m = ctx;
    pthread_mutex_lock(&m->mu);
    int i = find(m, k);
    int64_t v = (i < 0 ? 0 : atoll(m->val[i])) + d;
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    put(m, k, buf, strlen(buf));
    pthread_mutex_unlock(&m->mu);
    if (out)
        *out = v;
    return FCCL_OK;
}

static int m_del(void *ctx, const char *k, int *deleted)
{
    struct mem *m = ctx;
    pthread_mutex_lock(&m->mu);
    int i = find(m, k);
    if (i >= 0) {
        free(m->key[i]);
        free(m->val[i]);
        m->n--;
        m->key[i] = m->key[m->n];
        m->val[i] = m->val[m->n];
        m->len[i] = m->len[m->n];
    }
    pthread_mutex_unlock(&m->mu);
    if (deleted)
        *deleted = i >= 0;
    return FCCL_OK;
}

static void m_close(void *ctx)
{
    struct mem *m = ctx;
    m->closed++;
}

static struct mem mem;
static fccl_store_t *st;

static void setup(void)
{
    memset(&mem, 0, sizeof(mem));
    pthread_mutex_init(&mem.mu, NULL);
    pthread_cond_init(&mem.cv, NULL);
    fccl_store_ops_t ops = {.set = m_set, .get = m_get, .add = m_add,
                            .delete_key = m_del, .close = m_close};
    cr_assert_eq(fccl_store_from_ops(&ops, sizeof(ops), &mem, "mem://t",
                                     5000, &st),
                 FCCL_OK, "%s", fccl_last_error());
}

static void teardown(void)
{
    fccl_store_close(st);
    for (int i = 0; i < mem.n; i++) {
        free(mem.key[i]);
        free(mem.val[i]);
    }
}

TestSuite(ops, .init = setup, .fini = teardown, .timeout = 30);

Test(ops, single_key_calls_reach_the_table)
{
    cr_assert_eq(fccl_store_set(st, "a", "xyz", 3), FCCL_OK);
    void *v = NULL;
    size_t l = 0;
    cr_assert_eq(fccl_store_get(st, "a", &v, &l, -1), FCCL_OK);
    cr_expect_eq(l, 3);
    cr_expect_str_eq(v, "xyz");
    free(v);
    int64_t n = 0;
    cr_assert_eq(fccl_store_add(st, "c", 5, &n), FCCL_OK);
    cr_assert_eq(fccl_store_add(st, "c", -7, &n), FCCL_OK);
    cr_expect_eq(n, -2);
    int d = -1;
    cr_assert_eq(fccl_store_delete(st, "a", &d), FCCL_OK);
    cr_expect_eq(d, 1);
    cr_assert_eq(fccl_store_delete(st, "a", &d), FCCL_OK);
    cr_expect_eq(d, 0);
    /* The table sees the keys as given: no "/" of the TCPStore. */
    cr_expect_geq(find(&mem, "c"), 0);
    cr_expect_str_eq(fccl_store_addr(st), "mem://t");
    cr_expect_eq(fccl_store_timeout_ms(st), 5000);
}

Test(ops, missing_entries_are_unsupported_by_name)
{
    void *v;
    size_t l;
    cr_expect_eq(fccl_store_compare_set(st, "k", "", 0, "x", 1, &v, &l),
                 FCCL_ERR_UNSUPPORTED);
    cr_expect(strstr(fccl_last_error(), "COMPARE_SET") &&
                  strstr(fccl_last_error(), "mem://t"),
              "%s", fccl_last_error());
    int64_t n;
    cr_expect_eq(fccl_store_num_keys(st, &n), FCCL_ERR_UNSUPPORTED);
    cr_expect_eq(fccl_store_append(st, "k", "x", 1), FCCL_ERR_UNSUPPORTED);
    cr_expect_eq(fccl_store_queue_len(st, "q", &n), FCCL_ERR_UNSUPPORTED);
    cr_expect_eq(fccl_store_barrier(st, "b", 1, 100), FCCL_ERR_UNSUPPORTED);
}

Test(ops, check_wait_multi_are_built_from_get_and_set)
{
    const char *keys[] = {"x", "y", "z"};
    const void *vals[] = {"1", "22", "333"};
    size_t lens[] = {1, 2, 3};
    int all = -1;
    cr_assert_eq(fccl_store_check(st, keys, 3, &all), FCCL_OK, "%s",
                 fccl_last_error());
    cr_expect_eq(all, 0);
    cr_expect_eq(fccl_store_wait(st, keys, 3, 50), FCCL_ERR_TIMEOUT);
    cr_expect(strstr(fccl_last_error(), "'x'"), "%s", fccl_last_error());
    cr_assert_eq(fccl_store_multi_set(st, keys, vals, lens, 3), FCCL_OK);
    cr_assert_eq(fccl_store_check(st, keys, 3, &all), FCCL_OK);
    cr_expect_eq(all, 1);
    cr_expect_eq(fccl_store_wait(st, keys, 3, 50), FCCL_OK);
    void *out[3];
    size_t ol[3];
    cr_assert_eq(fccl_store_multi_get(st, keys, 3, out, ol, 1000), FCCL_OK);
    for (int i = 0; i < 3; i++) {
        cr_expect_eq(ol[i], lens[i]);
        cr_expect(!memcmp(out[i], vals[i], lens[i]));
        free(out[i]);
    }
    /* A missing key fails the whole multi_get, freeing what it had. */
    const char *some[] = {"x", "nope"};
    cr_expect_eq(fccl_store_multi_get(st, some, 2, out, ol, 50),
                 FCCL_ERR_TIMEOUT);
}

Test(ops, views_prefix_keys_and_close_once)
{
    fccl_store_t *v1, *v2;
    cr_assert_eq(fccl_store_prefixed(st, "job/", &v1), FCCL_OK);
    cr_assert_eq(fccl_store_prefixed(v1, "g1/", &v2), FCCL_OK);
    cr_assert_eq(fccl_store_set(v2, "k", "v", 1), FCCL_OK);
    cr_expect_geq(find(&mem, "job/g1/k"), 0);
    void *v;
    size_t l;
    cr_expect_eq(fccl_store_get(v1, "g1/k", &v, &l, 100), FCCL_OK);
    free(v);
    fccl_store_close(v2);
    fccl_store_close(v1);
    cr_expect_eq(mem.closed, 0, "closed before its last handle");
    fccl_store_close(st);
    st = NULL;
    cr_expect_eq(mem.closed, 1);
}

Test(ops, errors_name_store_call_key_and_the_entry_message)
{
    void *v;
    size_t l;
    cr_expect_eq(fccl_store_get(st, "missing", &v, &l, 20), FCCL_ERR_TIMEOUT);
    const char *m = fccl_last_error();
    cr_expect(strstr(m, "mem://t") && strstr(m, "GET") &&
                  strstr(m, "missing") && strstr(m, "no such key in memory"),
              "%s", m);
    cr_expect_eq(fccl_store_set(NULL, "a", "b", 1), FCCL_ERR_INVALID);
    cr_expect_eq(fccl_store_set(st, NULL, "b", 1), FCCL_ERR_INVALID);
    fccl_store_ops_t ops = {0};
    fccl_store_t *x;
    cr_expect_eq(fccl_store_from_ops(&ops, sizeof(ops) + 8, NULL, NULL, 0,
                                     &x),
                 FCCL_ERR_INVALID);
    cr_expect_eq(fccl_store_from_ops(NULL, 0, NULL, NULL, 0, &x),
                 FCCL_ERR_INVALID);
}

Test(ops, a_job_bootstraps_over_four_entries, .timeout = 120)
{
    char run[512], rank[512], cmd[1400], *out = NULL;
    th_bin("fccl-run", run, sizeof(run));
    snprintf(rank, sizeof(rank), "%s/ops_rank", th_testbin_dir());
    snprintf(cmd, sizeof(cmd),
             "FCCL_PROVIDER=shm FCCL_TIMEOUT=60 %s -n 4 %s 2>&1", run, rank);
    int rc = th_sh(cmd, 100, &out);
    cr_expect_eq(rc, 0, "%s", out);
    for (int r = 0; r < 4; r++) {
        char want[32];
        snprintf(want, sizeof(want), "ops ok %d ", r);
        cr_expect(strstr(out, want), "rank %d: %s", r, out);
    }
    free(out);
}
