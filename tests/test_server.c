/*
 * tcpstore-server, the real binary on a free port, driven over raw sockets
 * with frames built by the codec encoders: every operation of both
 * dialects with its exact reply bytes, blocking WAIT semantics, WAIT merging
 * on one connection, CANCEL_WAIT, waits dropped on disconnect, QUEUE_PUSH
 * waking one waiter, pipelining and byte-at-a-time requests, big values.
 * (Bad input, limits, load and lifecycle: test_server_robust.c.)
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/wire.h"

#define M DIALECT_MODERN
#define L DIALECT_LEGACY

static struct srv S;

static void start(void) { srv_start(&S, NULL); }
static void stop(void) { srv_finish(&S); }

TestSuite(server, .init = start, .fini = stop, .timeout = 60);

static struct codec_buf B;
static void buf_init(void) { codec_buf_init(&B); }

/* ---- every op, modern dialect ---- */

Test(server, modern_basic_ops)
{
    buf_init();
    int fd = cli_modern(S.port);
    put_op(&B, M, OP_PING);
    codec_put_u32(&B, 0xA1B2C3D4u);
    cli_send(fd, &B);
    cli_expect_u32(fd, 0xA1B2C3D4u);

    f_set(&B, M, "/a", "hello");
    f_key(&B, M, OP_GET, "/a");
    cli_send(fd, &B);
    cli_expect_cstr(fd, "hello");

    /* SET replaces; binary values survive; empty values are values. */
    static const char bin[] = {0, 1, (char)0xFF, 0, 'z'};
    f_kv(&B, M, OP_SET, "/a", bin, sizeof(bin));
    f_key(&B, M, OP_GET, "/a");
    f_set(&B, M, "/empty", "");
    f_key(&B, M, OP_GET, "/empty");
    cli_send(fd, &B);
    cli_expect_str(fd, bin, sizeof(bin));
    cli_expect_str(fd, "", 0);

    /* GET of a missing key on a modern link: an empty value. */
    f_key(&B, M, OP_GET, "/missing");
    cli_send(fd, &B);
    cli_expect_str(fd, "", 0);

    /* ADD: i64 reply, value stored as decimal text. */
    f_add(&B, M, "/n", 5);
    f_add(&B, M, "/n", -12);
    f_key(&B, M, OP_GET, "/n");
    f_add(&B, M, "/n", 0);
    cli_send(fd, &B);
    cli_expect_i64(fd, 5);
    cli_expect_i64(fd, -7);
    cli_expect_cstr(fd, "-7");
    cli_expect_i64(fd, -7);

    /* GETNUMKEYS counts /a /empty /n (not the missing one). */
    cr_assert_eq(cli_numkeys(fd, M), 3);

    /* DELETE_KEY: i64 1 then 0. */
    f_key(&B, M, OP_DELETE_KEY, "/a");
    f_key(&B, M, OP_DELETE_KEY, "/a");
    cli_send(fd, &B);
    cli_expect_i64(fd, 1);
    cli_expect_i64(fd, 0);
    cr_assert_eq(cli_numkeys(fd, M), 2);

    /* APPEND creates, then extends. */
    f_kv(&B, M, OP_APPEND, "/log", "ab", 2);
    f_kv(&B, M, OP_APPEND, "/log", "cd", 2);
    f_key(&B, M, OP_GET, "/log");
    cli_send(fd, &B);
    cli_expect_cstr(fd, "abcd");
    close(fd);
    codec_buf_free(&B);
}

Test(server, modern_compare_set)
{
    buf_init();
    int fd = cli_modern(S.port);
    /* Missing key, empty expected: created with desired. */
    f_cas(&B, M, "/c", "", "v1");
    /* Missing key, non-empty expected: reply expected, store nothing. */
    f_cas(&B, M, "/d", "exp", "v2");
    f_key(&B, M, OP_GET, "/d");
    /* Match: swapped.  Mismatch: the current value. */
    f_cas(&B, M, "/c", "v1", "v3");
    f_cas(&B, M, "/c", "nope", "v4");
    f_key(&B, M, OP_GET, "/c");
    cli_send(fd, &B);
    cli_expect_cstr(fd, "v1");
    cli_expect_cstr(fd, "exp");
    cli_expect_cstr(fd, "");
    cli_expect_cstr(fd, "v3");
    cli_expect_cstr(fd, "v3");
    cli_expect_cstr(fd, "v3");
    cr_assert_eq(cli_numkeys(fd, M), 1);
    close(fd);
    codec_buf_free(&B);
}

Test(server, modern_multi_and_check)
{
    buf_init();
    int fd = cli_modern(S.port);
    put_op(&B, M, OP_MULTI_SET);
    codec_put_u64(&B, 3);
    put_key(&B, "/m1"), put_key(&B, "one");
    put_key(&B, "/m2"), put_key(&B, "");
    put_key(&B, "/m3"), put_key(&B, "three");
    const char *keys[] = {"/m3", "/nope", "/m1", "/m2"};
    f_keys(&B, M, OP_MULTI_GET, 4, keys);
    f_keys(&B, M, OP_CHECK, 3, (const char *[]){"/m1", "/m2", "/m3"});
    f_keys(&B, M, OP_CHECK, 2, (const char *[]){"/m1", "/nope"});
    f_keys(&B, M, OP_CHECK, 0, NULL);
    f_keys(&B, M, OP_WAIT, 2, (const char *[]){"/m2", "/m3"});
    f_keys(&B, M, OP_WAIT, 0, NULL);
    cli_send(fd, &B);
    cli_expect_cstr(fd, "three");
    cli_expect_cstr(fd, "");
    cli_expect_cstr(fd, "one");
    cli_expect_cstr(fd, "");
    cli_expect_u8(fd, REPLY_READY);
    cli_expect_u8(fd, REPLY_NOT_READY);
    cli_expect_u8(fd, REPLY_READY);
    cli_expect_u8(fd, REPLY_STOP_WAITING);
    cli_expect_u8(fd, REPLY_STOP_WAITING);
    /* CANCEL_WAIT with nothing pending still answers WAIT_CANCELED. */
    put_op(&B, M, OP_CANCEL_WAIT);
    cli_send(fd, &B);
    cli_expect_u8(fd, REPLY_WAIT_CANCELED);
    cli_expect_silence(fd, 50);
    close(fd);
    codec_buf_free(&B);
}

Test(server, modern_queues)
{
    buf_init();
    int fd = cli_modern(S.port);
    f_key(&B, M, OP_QUEUE_LEN, "/q");
    f_key(&B, M, OP_QUEUE_POP, "/q");
    f_kv(&B, M, OP_QUEUE_PUSH, "/q", "first", 5);
    f_kv(&B, M, OP_QUEUE_PUSH, "/q", "", 0);
    f_kv(&B, M, OP_QUEUE_PUSH, "/q", "third", 5);
    f_key(&B, M, OP_QUEUE_LEN, "/q");
    f_key(&B, M, OP_QUEUE_POP, "/q");
    f_key(&B, M, OP_QUEUE_POP, "/q");
    f_key(&B, M, OP_QUEUE_POP, "/q");
    f_key(&B, M, OP_QUEUE_POP, "/q");
    cli_send(fd, &B);
    cli_expect_i64(fd, 0);
    cli_expect_i64(fd, 0); /* empty pop: the length only, never blocks */
    cli_expect_i64(fd, 3);
    cli_expect_i64(fd, 3);
    cli_expect_cstr(fd, "first");
    cli_expect_i64(fd, 2);
    cli_expect_cstr(fd, "");
    cli_expect_i64(fd, 1);
    cli_expect_cstr(fd, "third");
    cli_expect_i64(fd, 0);
    /* Queues are not keys. */
    cr_assert_eq(cli_numkeys(fd, M), 0);
    /* A WAIT is satisfied by a non-empty queue (and CHECK agrees). */
    f_kv(&B, M, OP_QUEUE_PUSH, "/q2", "x", 1);
    f_keys(&B, M, OP_CHECK, 1, (const char *[]){"/q2"});
    f_wait1(&B, M, "/q2");
    cli_send(fd, &B);
    cli_expect_u8(fd, REPLY_READY);
    cli_expect_u8(fd, REPLY_STOP_WAITING);
    close(fd);
    codec_buf_free(&B);
}

Test(server, modern_list_keys)
{
    buf_init();
    int fd = cli_modern(S.port);
    const char *set[] = {"/job/b", "/job/a", "/other", "/job/a/x", "/job"};
    for (int i = 0; i < 5; i++)
        f_set(&B, M, set[i], "v");
    f_kv(&B, M, OP_QUEUE_PUSH, "/job/queue", "q", 1);
    f_key(&B, M, OP_LIST_KEYS, "/job/");
    f_key(&B, M, OP_LIST_KEYS, "");
    f_key(&B, M, OP_LIST_KEYS, "/zzz");
    cli_send(fd, &B);
    cli_expect_i64(fd, 3);
    cli_expect_cstr(fd, "/job/a");
    cli_expect_cstr(fd, "/job/a/x");
    cli_expect_cstr(fd, "/job/b");
    cli_expect_i64(fd, 5);
    const char *sorted[] = {"/job", "/job/a", "/job/a/x", "/job/b", "/other"};
    for (int i = 0; i < 5; i++)
        cli_expect_cstr(fd, sorted[i]);
    cli_expect_i64(fd, 0);
    close(fd);
    codec_buf_free(&B);
}

/* ---- every op, legacy dialect ---- */

Test(server, legacy_all_ops)
{
    buf_init();
    int fd = cli_connect(S.port); /* no VALIDATE: legacy */
    f_set(&B, L, "/a", "1");
    cli_send(fd, &B);
    cr_assert_eq(B.len, 0);
    f_key(&B, L, OP_GET, "/a");
    f_add(&B, L, "/a", 41);
    f_cas(&B, L, "/a", "42", "x");
    f_cas(&B, L, "/b", "", "y");
    f_cas(&B, L, "/c", "e", "z");
    f_keys(&B, L, OP_CHECK, 2, (const char *[]){"/a", "/b"});
    f_keys(&B, L, OP_CHECK, 1, (const char *[]){"/c"});
    f_wait1(&B, L, "/b");
    put_op(&B, L, OP_GETNUMKEYS);
    f_key(&B, L, OP_DELETE_KEY, "/b");
    f_key(&B, L, OP_DELETE_KEY, "/b");
    f_kv(&B, L, OP_APPEND, "/ap", "12", 2);
    f_kv(&B, L, OP_APPEND, "/ap", "3", 1);
    put_op(&B, L, OP_MULTI_SET);
    codec_put_u64(&B, 2);
    put_key(&B, "/m1"), put_key(&B, "v1");
    put_key(&B, "/m2"), put_key(&B, "v2");
    f_keys(&B, L, OP_MULTI_GET, 3, (const char *[]){"/m2", "/ap", "/m1"});
    cli_send(fd, &B);
    cli_expect_cstr(fd, "1");
    cli_expect_i64(fd, 42);
    cli_expect_cstr(fd, "x");
    cli_expect_cstr(fd, "y");
    cli_expect_cstr(fd, "e");
    cli_expect_u8(fd, REPLY_READY);
    cli_expect_u8(fd, REPLY_NOT_READY);
    cli_expect_u8(fd, REPLY_STOP_WAITING);
    cli_expect_i64(fd, 2);
    cli_expect_i64(fd, 1);
    cli_expect_i64(fd, 0);
    cli_expect_cstr(fd, "v2");
    cli_expect_cstr(fd, "123");
    cli_expect_cstr(fd, "v1");
    /* Legacy byte 0 after the first message is SET, not VALIDATE. */
    cli_expect_silence(fd, 50);
    /* GET of a missing key on a legacy link closes it (as 1.13 does). */
    f_key(&B, L, OP_GET, "/missing");
    cli_send(fd, &B);
    cli_expect_closed(fd, TH_IO_MS);
    close(fd);
    /* ... and MULTI_GET of one too. */
    fd = cli_connect(S.port);
    f_keys(&B, L, OP_MULTI_GET, 2, (const char *[]){"/m1", "/none"});
    cli_send(fd, &B);
    cli_expect_closed(fd, TH_IO_MS);
    close(fd);
    /* The store kept its state for others. */
    fd = cli_modern(S.port);
    cr_assert_eq(cli_numkeys(fd, M), 4); /* /a /ap /m1 /m2 */
    close(fd);
    codec_buf_free(&B);
}

Test(server, both_dialects_share_keys)
{
    buf_init();
    int m = cli_modern(S.port), l = cli_connect(S.port);
    f_set(&B, L, "/shared", "from-legacy");
    cli_send(l, &B);
    /* GET only after STOP_WAITING: a pipelined GET would run at once. */
    f_wait1(&B, M, "/shared");
    cli_send(m, &B);
    cli_expect_u8(m, REPLY_STOP_WAITING);
    f_key(&B, M, OP_GET, "/shared");
    cli_send(m, &B);
    cli_expect_cstr(m, "from-legacy");
    close(m);
    close(l);
    codec_buf_free(&B);
}

/* ---- waiting ---- */

Test(server, wait_blocks_until_all_keys_exist)
{
    buf_init();
    int a = cli_modern(S.port), b = cli_connect(S.port);
    f_keys(&B, M, OP_WAIT, 2, (const char *[]){"/k1", "/k2"});
    cli_send(a, &B);
    cli_numkeys(a, M); /* the WAIT is parked before anyone writes */
    cli_expect_silence(a, 100);
    f_set(&B, L, "/k1", "1");
    cli_send(b, &B);
    cli_expect_silence(a, 100);
    f_add(&B, L, "/k2", 1); /* ADD wakes too */
    cli_send(b, &B);
    cli_expect_i64(b, 1);
    cli_expect_u8(a, REPLY_STOP_WAITING);
    cli_expect_silence(a, 50);
    close(a);
    close(b);
    codec_buf_free(&B);
}

Test(server, each_write_kind_wakes)
{
    buf_init();
    int w[5], b = cli_modern(S.port);
    const char *keys[] = {"/set", "/cas", "/app", "/mset", "/add"};
    for (int i = 0; i < 5; i++) {
        w[i] = cli_modern(S.port);
        f_wait1(&B, M, keys[i]);
        cli_send(w[i], &B);
        cli_numkeys(w[i], M);
    }
    /* A COMPARE_SET that stores nothing wakes nobody. */
    f_cas(&B, M, "/cas", "not-empty", "x");
    cli_send(b, &B);
    cli_expect_cstr(b, "not-empty");
    for (int i = 0; i < 5; i++)
        cli_expect_silence(w[i], i ? 0 : 100);
    f_set(&B, M, "/set", "1");
    f_cas(&B, M, "/cas", "", "x");
    f_kv(&B, M, OP_APPEND, "/app", "a", 1);
    put_op(&B, M, OP_MULTI_SET);
    codec_put_u64(&B, 1);
    put_key(&B, "/mset"), put_key(&B, "m");
    f_add(&B, M, "/add", 3);
    cli_send(b, &B);
    cli_expect_cstr(b, "x");
    cli_expect_i64(b, 3);
    for (int i = 0; i < 5; i++) {
        cli_expect_u8(w[i], REPLY_STOP_WAITING);
        close(w[i]);
    }
    close(b);
    codec_buf_free(&B);
}

/* A legacy client retrying after a receive timeout sends a second WAIT on
 * the same connection: one STOP_WAITING once all keys of both exist. */
Test(server, wait_merges_on_one_connection)
{
    buf_init();
    int a = cli_connect(S.port), b = cli_connect(S.port);
    f_wait1(&B, L, "/x");
    cli_send(a, &B);
    f_wait1(&B, L, "/y");
    cli_send(a, &B);
    /* Merged even when the second WAIT's keys all exist already. */
    f_set(&B, L, "/z", "z");
    cli_send(b, &B);
    cr_assert_eq(cli_numkeys(b, L), 1);
    f_wait1(&B, L, "/z");
    cli_send(a, &B);
    cr_assert_eq(cli_numkeys(a, L), 1); /* all three WAITs handled */
    f_set(&B, L, "/x", "1");
    cli_send(b, &B);
    cli_expect_silence(a, 100);
    f_set(&B, L, "/y", "2");
    cli_send(b, &B);
    cli_expect_u8(a, REPLY_STOP_WAITING);
    cli_expect_silence(a, 100);
    /* The connection is in step: the next reply is the next answer. */
    f_key(&B, L, OP_GET, "/y");
    cli_send(a, &B);
    cli_expect_cstr(a, "2");
    close(a);
    close(b);
    codec_buf_free(&B);
}

Test(server, cancel_wait)
{
    buf_init();
    int a = cli_modern(S.port), b = cli_modern(S.port);
    f_wait1(&B, M, "/c1");
    put_op(&B, M, OP_CANCEL_WAIT);
    cli_send(a, &B);
    cli_expect_u8(a, REPLY_WAIT_CANCELED);
    f_set(&B, M, "/c1", "v");
    cli_send(b, &B);
    cli_expect_silence(a, 100); /* the cancelled wait never fires */
    /* A wait that completed before the cancel: STOP_WAITING first. */
    f_wait1(&B, M, "/c2");
    cli_send(a, &B);
    cr_assert_eq(cli_numkeys(a, M), 1); /* parked */
    f_set(&B, M, "/c2", "v");
    cli_send(b, &B);
    cr_assert_eq(cli_numkeys(b, M), 2); /* the SET has been handled */
    put_op(&B, M, OP_CANCEL_WAIT);
    cli_send(a, &B);
    cli_expect_u8(a, REPLY_STOP_WAITING);
    cli_expect_u8(a, REPLY_WAIT_CANCELED);
    /* After a cancel, a new wait works normally. */
    f_wait1(&B, M, "/c3");
    cli_send(a, &B);
    cli_expect_silence(a, 50);
    f_set(&B, M, "/c3", "v");
    cli_send(b, &B);
    cli_expect_u8(a, REPLY_STOP_WAITING);
    close(a);
    close(b);
    codec_buf_free(&B);
}

Test(server, disconnect_drops_waits)
{
    buf_init();
    for (int i = 0; i < 20; i++) {
        int a = cli_modern(S.port);
        f_keys(&B, M, OP_WAIT, 2, (const char *[]){"/gone", "/gone2"});
        cli_send(a, &B);
        close(a);
    }
    int b = cli_modern(S.port), w = cli_modern(S.port);
    f_wait1(&B, M, "/gone");
    cli_send(w, &B);
    cli_numkeys(w, M);
    th_sleep_ms(50); /* let the server see the closes */
    f_set(&B, M, "/gone", "1");
    f_set(&B, M, "/gone2", "2");
    cli_send(b, &B);
    cli_expect_u8(w, REPLY_STOP_WAITING);
    cr_assert_eq(cli_numkeys(b, M), 2);
    /* (Under ASan, a waiter left behind would be a use-after-free or a
     * leak at the server's exit, failing the suite's exit-status check.) */
    close(b);
    close(w);
    codec_buf_free(&B);
}

/* WAIT replies only when all keys exist *now*: a key deleted while the
 * wait was parked keeps it parked. */
Test(server, wait_rechecks_deleted_keys)
{
    buf_init();
    int a = cli_modern(S.port), b = cli_modern(S.port);
    f_set(&B, M, "/p", "1");
    cli_send(b, &B);
    cr_assert_eq(cli_numkeys(b, M), 1);
    f_keys(&B, M, OP_WAIT, 2, (const char *[]){"/p", "/q"});
    cli_send(a, &B);
    cli_numkeys(a, M);
    f_key(&B, M, OP_DELETE_KEY, "/p");
    f_set(&B, M, "/q", "1");
    cli_send(b, &B);
    cli_expect_i64(b, 1);
    cli_expect_silence(a, 100);
    f_set(&B, M, "/p", "again");
    cli_send(b, &B);
    cli_expect_u8(a, REPLY_STOP_WAITING);
    close(a);
    close(b);
    codec_buf_free(&B);
}

/* A queue that was non-empty when the scan passed it, then popped empty,
 * no longer satisfies the wait. */
Test(server, wait_rechecks_drained_queues)
{
    buf_init();
    int a = cli_modern(S.port), b = cli_modern(S.port);
    f_keys(&B, M, OP_WAIT, 2, (const char *[]){"/qq", "/xx"});
    cli_send(a, &B);
    cr_assert_eq(cli_numkeys(a, M), 0);
    f_kv(&B, M, OP_QUEUE_PUSH, "/qq", "1", 1);
    f_key(&B, M, OP_QUEUE_POP, "/qq");
    cli_send(b, &B);
    cli_expect_i64(b, 1);
    cli_expect_cstr(b, "1");
    f_set(&B, M, "/xx", "x");
    cli_send(b, &B);
    cr_assert_eq(cli_numkeys(b, M), 1);
    cli_expect_silence(a, 100);
    f_kv(&B, M, OP_QUEUE_PUSH, "/qq", "2", 1);
    cli_send(b, &B);
    cli_expect_u8(a, REPLY_STOP_WAITING);
    close(a);
    close(b);
    codec_buf_free(&B);
}

/* Every rank waits on every rank's key; keys arrive one by one: each wait
 * answers exactly once, after the last key. */
Test(server, rendezvous_wait_on_all_keys)
{
    enum { N = 64 };
    buf_init();
    int fd[N];
    char names[N][16];
    const char *keys[N];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "/r/%d", i);
        keys[i] = names[i];
    }
    for (int i = 0; i < N; i++) {
        fd[i] = (i & 1) ? cli_modern(S.port) : cli_connect(S.port);
        enum store_dialect d = (i & 1) ? M : L;
        f_set(&B, d, keys[i], keys[i]);
        f_keys(&B, d, OP_WAIT, N, keys);
        cli_send(fd[i], &B);
        if (i + 1 == N) /* its own SET completed every wait, its own too */
            cli_expect_u8(fd[i], REPLY_STOP_WAITING);
        cr_assert_eq(cli_numkeys(fd[i], d), i + 1);
        cli_expect_silence(fd[i], 0);
    }
    for (int i = 0; i < N; i++) {
        enum store_dialect d = (i & 1) ? M : L;
        if (i + 1 < N)
            cli_expect_u8(fd[i], REPLY_STOP_WAITING);
        f_keys(&B, d, OP_MULTI_GET, N, keys);
        cli_send(fd[i], &B);
        for (int j = 0; j < N; j++)
            cli_expect_cstr(fd[i], keys[j]);
        cli_expect_silence(fd[i], 0);
        close(fd[i]);
    }
    codec_buf_free(&B);
}

Test(server, queue_push_wakes_one_waiter)
{
    buf_init();
    int w1 = cli_modern(S.port), w2 = cli_modern(S.port);
    int p = cli_modern(S.port);
    f_wait1(&B, M, "/jobs");
    cli_send(w1, &B);
    cr_assert_eq(cli_numkeys(w1, M), 0); /* w1 parked first, then w2 */
    f_wait1(&B, M, "/jobs");
    cli_send(w2, &B);
    cr_assert_eq(cli_numkeys(w2, M), 0);
    f_kv(&B, M, OP_QUEUE_PUSH, "/jobs", "j1", 2);
    cli_send(p, &B);
    /* Exactly one wakes: the first to wait. */
    cli_expect_u8(w1, REPLY_STOP_WAITING);
    cli_expect_silence(w2, 100);
    f_key(&B, M, OP_QUEUE_POP, "/jobs");
    cli_send(w1, &B);
    cli_expect_i64(w1, 1);
    cli_expect_cstr(w1, "j1");
    f_kv(&B, M, OP_QUEUE_PUSH, "/jobs", "j2", 2);
    cli_send(p, &B);
    cli_expect_u8(w2, REPLY_STOP_WAITING);
    f_key(&B, M, OP_QUEUE_POP, "/jobs");
    cli_send(w2, &B);
    cli_expect_i64(w2, 1);
    cli_expect_cstr(w2, "j2");
    close(w1);
    close(w2);
    close(p);
    codec_buf_free(&B);
}

/* ---- framing ---- */

Test(server, pipelined_requests_answered_in_order)
{
    buf_init();
    int fd = cli_modern(S.port);
    enum { N = 2000 };
    for (int i = 0; i < N; i++) {
        char k[32], v[32];
        snprintf(k, sizeof(k), "/p/%d", i);
        snprintf(v, sizeof(v), "value-%d", i * 7);
        f_set(&B, M, k, v);
        f_key(&B, M, OP_GET, k);
        f_add(&B, M, "/p/count", 1);
    }
    cli_send(fd, &B); /* ~100 KB in one go */
    for (int i = 0; i < N; i++) {
        char v[32];
        snprintf(v, sizeof(v), "value-%d", i * 7);
        cli_expect_cstr(fd, v);
        cli_expect_i64(fd, i + 1);
    }
    cr_assert_eq(cli_numkeys(fd, M), N + 1);
    close(fd);
    codec_buf_free(&B);
}

/* Requests split at every byte (each byte its own TCP segment). */
Test(server, requests_split_at_every_byte)
{
    buf_init();
    int fd = cli_modern(S.port), one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    f_set(&B, M, "/split", "0123456789");
    f_key(&B, M, OP_GET, "/split");
    f_keys(&B, M, OP_MULTI_GET, 2, (const char *[]){"/split", "/split"});
    f_add(&B, M, "/split-n", 9);
    for (size_t i = 0; i < B.len; i++) {
        cli_send_raw(fd, B.p + i, 1);
        if (i % 8 == 0)
            th_sleep_ms(1);
    }
    codec_buf_reset(&B);
    cli_expect_cstr(fd, "0123456789");
    cli_expect_cstr(fd, "0123456789");
    cli_expect_cstr(fd, "0123456789");
    cli_expect_i64(fd, 9);
    close(fd);
    codec_buf_free(&B);
}

/* An empty value's reply is one 8-byte frame sent at once (PyTorch's old
 * server left the header unflushed for 200 ms). */
Test(server, empty_value_reply_is_immediate)
{
    buf_init();
    int fd = cli_modern(S.port);
    f_set(&B, M, "/e", "");
    cli_send(fd, &B);
    uint64_t us[21];
    for (int i = 0; i < 21; i++) {
        f_key(&B, M, OP_GET, "/e");
        cli_send(fd, &B);
        double t0 = th_now();
        cli_expect_str(fd, "", 0);
        us[i] = (uint64_t)((th_now() - t0) * 1e6);
    }
    /* The median, so that a loaded machine's hiccup is not a stall. */
    int below = 0;
    for (int i = 0; i < 21; i++)
        below += us[i] < 50000;
    cr_assert_geq(below, 11, "most empty GETs took 50 ms or more");
    close(fd);
    codec_buf_free(&B);
}

Test(server, big_values_roundtrip)
{
    buf_init();
    size_t n = 24u << 20;
    uint8_t *v = malloc(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 2654435761u >> 13);
    int a = cli_modern(S.port), b = cli_connect(S.port);
    f_kv(&B, M, OP_SET, "/big", v, n);
    cli_send(a, &B);
    f_wait1(&B, L, "/big");
    cli_send(b, &B);
    cli_expect_u8(b, REPLY_STOP_WAITING);
    f_key(&B, L, OP_GET, "/big");
    cli_send(b, &B);
    cli_expect_str(b, v, n);
    f_kv(&B, M, OP_APPEND, "/big", "tail", 4);
    f_key(&B, M, OP_QUEUE_LEN, "/big");
    cli_send(a, &B);
    cli_expect_i64(a, 0);
    f_keys(&B, L, OP_MULTI_GET, 1, (const char *[]){"/big"});
    cli_send(b, &B);
    uint8_t *got = cli_read_str(b, n + 4);
    cr_assert(memcmp(got, v, n) == 0 && memcmp(got + n, "tail", 4) == 0);
    free(got);
    free(v);
    close(a);
    close(b);
    codec_buf_free(&B);
}
