/*
 * The store's journal (tcpstore-server --journal): acknowledged writes
 * survive SIGKILL at random moments, a torn or corrupt tail is dropped
 * with a log line, counters and queues survive, compaction under load
 * keeps the data.  Real server binary, real client library, real files.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/wire.h"

#include <pthread.h>
#include <sys/stat.h>

#include "fccl/store.h"
#include "log.h"

#define WRITERS 3
#define KILL_ROUNDS 20   /* FCCL_JOURNAL_ROUNDS=N for a longer run */
#define MAX_ROUNDS 1000

TestSuite(journal, .timeout = 110);
/* (the SIGKILL test alone may run longer with FCCL_JOURNAL_ROUNDS) */

static char jdir[64], jpath[128];

/* A fresh directory for the journal; removed with all in it. */
static void make_dir(void)
{
    cr_assert_eq(th_mkdtemp(jdir, sizeof(jdir), "fccl-jrn"), 0);
    snprintf(jpath, sizeof(jpath), "%s/store.journal", jdir);
}

static void remove_dir(void) { th_rmtree(jdir); }

static void start_with(struct srv *s, const char *fsync)
{
    srv_start_local(s, (const char *[]){"--journal", jpath, "--fsync", fsync,
                                        NULL});
}

static int key_exists(fccl_store_t *st, const char *key)
{
    int present = -1;
    cr_assert_eq(fccl_store_check(st, &key, 1, &present), FCCL_OK);
    return present;
}

static off_t file_size(const char *p)
{
    struct stat sb;
    cr_assert_eq(stat(p, &sb), 0, "stat %s: %s", p, strerror(errno));
    return sb.st_size;
}

/* ---- 1. acknowledged writes survive SIGKILL ---- */

/* A writer process: SETs and ADDs until the server dies; after each
 * acknowledged one it reports (i, counter value) on fd. */
static void writer(int port, int id, int round, int fd)
{
    char addr[TH_ADDR_LEN], key[64], val[96];
    fccl_log_set_level(FCCL_LOG_ERROR); /* the kill is expected */
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, 5000);
    fccl_store_t *st = NULL;
    if (fccl_store_connect(&o, &st) != FCCL_OK)
        _exit(0); /* killed before we connected: nothing acknowledged */
    for (int32_t i = 0;; i++) {
        snprintf(key, sizeof(key), "w%d/r%d/%d", id, round, i);
        snprintf(val, sizeof(val), "value-%d-%d-%d-%x", id, round, i,
                 (unsigned)(i * 2654435761u));
        if (fccl_store_set(st, key, val, strlen(val)) != FCCL_OK)
            break;
        int64_t c;
        snprintf(key, sizeof(key), "count/w%d", id);
        if (fccl_store_add(st, key, 1, &c) != FCCL_OK)
            break;
        int64_t rec[2] = {i, c};
        if (write(fd, rec, sizeof(rec)) != (ssize_t)sizeof(rec))
            break;
    }
    fccl_store_close(st);
    _exit(0);
}

struct acked {
    int32_t last_i;  /* last acknowledged SET index, -1 none */
    int64_t count;   /* last acknowledged counter value */
};

static void run_round(int round, struct acked ack[WRITERS], unsigned *seed)
{
    struct srv s = {0};
    start_with(&s, "always");
    pid_t pids[WRITERS];
    int fds[WRITERS];
    for (int w = 0; w < WRITERS; w++) {
        int p[2];
        cr_assert_eq(pipe(p), 0);
        pids[w] = fork();
        cr_assert(pids[w] >= 0);
        if (pids[w] == 0) {
            close(p[0]);
            writer(s.port, w, round, p[1]);
        }
        close(p[1]);
        fds[w] = p[0];
        ack[w].last_i = -1;
    }
    th_sleep_ms(30 + (int)(rand_r(seed) % 200));
    srv_kill_hard(&s);
    for (int w = 0; w < WRITERS; w++) {
        int64_t rec[2];
        ssize_t k;
        while ((k = read(fds[w], rec, sizeof(rec))) == (ssize_t)sizeof(rec)) {
            cr_assert_eq(rec[0], ack[w].last_i + 1);
            ack[w].last_i = (int32_t)rec[0];
            cr_assert_gt(rec[1], ack[w].count, "counter went back");
            ack[w].count = rec[1];
        }
        close(fds[w]);
        int st = th_reap(pids[w], 10000);
        cr_assert(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                  "writer %d failed", w);
    }
    srv_cleanup(&s);
}

static void check_round(fccl_store_t *st, int round,
                        const struct acked ack[WRITERS])
{
    char key[64], val[96];
    for (int w = 0; w < WRITERS; w++) {
        for (int32_t i = 0; i <= ack[w].last_i; i++) {
            snprintf(key, sizeof(key), "w%d/r%d/%d", w, round, i);
            snprintf(val, sizeof(val), "value-%d-%d-%d-%x", w, round, i,
                     (unsigned)(i * 2654435761u));
            srv_expect_cstr(st, key, val);
        }
        /* An unacknowledged SET may or may not have landed; never more
         * than one past the last acknowledged one per writer. */
        snprintf(key, sizeof(key), "w%d/r%d/%d", w, round, ack[w].last_i + 2);
        cr_assert_eq(key_exists(st, key), 0, "%s exists, never sent", key);
        int64_t c;
        snprintf(key, sizeof(key), "count/w%d", w);
        cr_assert_eq(fccl_store_add(st, key, 0, &c), FCCL_OK);
        cr_assert_geq(c, ack[w].count, "writer %d counter %lld < acked %lld",
                      w, (long long)c, (long long)ack[w].count);
    }
}

Test(journal, acked_writes_survive_sigkill, .timeout = 600)
{
    make_dir();
    unsigned seed = (unsigned)time(NULL), seed0 = seed;
    const char *env = getenv("FCCL_JOURNAL_ROUNDS");
    int rounds = env && atoi(env) > 0 ? atoi(env) : KILL_ROUNDS;
    if (rounds > MAX_ROUNDS)
        rounds = MAX_ROUNDS;
    static struct acked ack[MAX_ROUNDS][WRITERS];
    memset(ack, 0, sizeof(ack));
    int64_t count[WRITERS] = {0};
    int total = 0;
    for (int r = 0; r < rounds; r++) {
        for (int w = 0; w < WRITERS; w++)
            ack[r][w].count = count[w];
        run_round(r, ack[r], &seed);
        struct srv s = {0};
        start_with(&s, "always");
        fccl_store_t *st = srv_store_open(s.port, 0);
        check_round(st, r, ack[r]);
        if (r > 0)
            check_round(st, r - 1, ack[r - 1]); /* older rounds stay */
        for (int w = 0; w < WRITERS; w++) {
            total += ack[r][w].last_i + 1;
            char key[32];
            int64_t c;
            snprintf(key, sizeof(key), "count/w%d", w);
            cr_assert_eq(fccl_store_add(st, key, 0, &c), FCCL_OK);
            count[w] = c; /* the next round continues from what is there */
        }
        fccl_store_close(st);
        srv_cleanup(&s);
    }
    cr_log_info("%d rounds (seed %u), %d acknowledged SETs checked", rounds,
                seed0, total);
    cr_assert_gt(total, rounds, "too few acknowledged writes to mean "
                 "anything");
    remove_dir();
}

/* ---- 2. a torn or corrupt tail ---- */

/* Fill k0..k9, kill, note the size; then one more SET (big value), kill. */
static off_t write_then_tail(const char *tail_val)
{
    struct srv s = {0};
    start_with(&s, "always");
    fccl_store_t *st = srv_store_open(s.port, 0);
    char key[16], val[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        cr_assert_eq(fccl_store_set(st, key, val, strlen(val)), FCCL_OK);
    }
    fccl_store_close(st);
    srv_kill_hard(&s);
    srv_cleanup(&s);
    off_t good = file_size(jpath);
    start_with(&s, "always");
    st = srv_store_open(s.port, 0);
    cr_assert_eq(fccl_store_set(st, "tail", tail_val, strlen(tail_val)),
                 FCCL_OK);
    fccl_store_close(st);
    srv_kill_hard(&s);
    srv_cleanup(&s);
    cr_assert_gt(file_size(jpath), good + (off_t)strlen(tail_val));
    return good;
}

static void expect_tail_dropped(off_t good, const char *why)
{
    struct srv s = {0};
    start_with(&s, "always");
    cr_assert(srv_log_wait(&s, why, 5000), "no '%s' log line", why);
    cr_assert(srv_log_wait(&s, "dropping the last", 1000));
    cr_assert_eq(file_size(jpath), good, "file not truncated at the tear");
    fccl_store_t *st = srv_store_open(s.port, 0);
    char key[16], val[32];
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        snprintf(val, sizeof(val), "v%d", i);
        srv_expect_cstr(st, key, val);
    }
    cr_assert_eq(key_exists(st, "tail"), 0, "torn record was applied");
    /* The journal goes on from the cut. */
    cr_assert_eq(fccl_store_set(st, "after", "ok", 2), FCCL_OK);
    fccl_store_close(st);
    srv_kill_hard(&s);
    srv_cleanup(&s);
    start_with(&s, "always");
    st = srv_store_open(s.port, 0);
    srv_expect_cstr(st, "after", "ok");
    srv_expect_cstr(st, "k9", "v9");
    fccl_store_close(st);
    srv_cleanup(&s);
}

Test(journal, torn_record_dropped)
{
    make_dir();
    char big[200];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    off_t good = write_then_tail(big);
    cr_assert_eq(truncate(jpath, good + 60), 0); /* mid-record */
    expect_tail_dropped(good, "torn record");
    remove_dir();
}

Test(journal, corrupt_record_dropped)
{
    make_dir();
    char big[200];
    memset(big, 'y', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    off_t good = write_then_tail(big);
    int fd = open(jpath, O_RDWR);
    cr_assert(fd >= 0);
    uint8_t b;
    cr_assert_eq(pread(fd, &b, 1, good + 100), 1);
    b ^= 0x40;
    cr_assert_eq(pwrite(fd, &b, 1, good + 100), 1);
    close(fd);
    expect_tail_dropped(good, "checksum mismatch");
    remove_dir();
}

/* ---- 3. counters and queues ---- */

Test(journal, counters_and_queues_survive)
{
    make_dir();
    struct srv s = {0};
    start_with(&s, "always");
    fccl_store_t *st = srv_store_open(s.port, 0);
    int64_t c;
    for (int i = 1; i <= 50; i++)
        cr_assert_eq(fccl_store_add(st, "ctr", i, &c), FCCL_OK);
    cr_assert_eq(c, 50 * 51 / 2);
    cr_assert_eq(fccl_store_add(st, "neg", -7, &c), FCCL_OK);
    char v[16];
    for (int i = 0; i < 10; i++) {
        snprintf(v, sizeof(v), "item%d", i);
        cr_assert_eq(fccl_store_queue_push(st, "q", v, strlen(v)), FCCL_OK);
    }
    for (int i = 0; i < 3; i++) { /* pops are journaled too */
        void *p = NULL;
        size_t n;
        cr_assert_eq(fccl_store_queue_pop(st, "q", 0, &p, &n, 1000), FCCL_OK);
        snprintf(v, sizeof(v), "item%d", i);
        cr_assert(n == strlen(v) && memcmp(p, v, n) == 0);
        free(p);
    }
    cr_assert_eq(fccl_store_set(st, "gone", "x", 1), FCCL_OK);
    cr_assert_eq(fccl_store_delete(st, "gone", NULL), FCCL_OK);
    fccl_store_close(st);
    srv_kill_hard(&s);
    srv_cleanup(&s);

    start_with(&s, "always");
    st = srv_store_open(s.port, 0);
    cr_assert_eq(fccl_store_add(st, "ctr", 0, &c), FCCL_OK);
    cr_assert_eq(c, 50 * 51 / 2);
    cr_assert_eq(fccl_store_add(st, "neg", 0, &c), FCCL_OK);
    cr_assert_eq(c, -7);
    int64_t qn = -1;
    cr_assert_eq(fccl_store_queue_len(st, "q", &qn), FCCL_OK);
    cr_assert_eq(qn, 7);
    for (int i = 3; i < 10; i++) {
        void *p = NULL;
        size_t n;
        cr_assert_eq(fccl_store_queue_pop(st, "q", 0, &p, &n, 1000), FCCL_OK);
        snprintf(v, sizeof(v), "item%d", i);
        cr_assert(n == strlen(v) && memcmp(p, v, n) == 0, "queue order");
        free(p);
    }
    cr_assert_eq(key_exists(st, "gone"), 0, "deleted key came back");
    fccl_store_close(st);
    srv_cleanup(&s);
    remove_dir();
}

/* ---- 4. compaction under load ---- */

Test(journal, compaction_under_load)
{
    make_dir();
    struct srv s = {0};
    start_with(&s, "interval");
    fccl_store_t *st = srv_store_open(s.port, 0);
    enum { KEYS = 64, ROUNDS = 60, VLEN = 1000 };
    char key[32], val[VLEN + 1];
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < KEYS; k++) {
            snprintf(key, sizeof(key), "ck%d", k);
            memset(val, 'a' + (r + k) % 26, VLEN);
            snprintf(val, 32, "r%d-k%d-", r, k);
            val[strlen(val)] = '-';
            val[VLEN] = '\0';
            cr_assert_eq(fccl_store_set(st, key, val, VLEN), FCCL_OK);
        }
        int64_t c;
        cr_assert_eq(fccl_store_add(st, "writes", KEYS, &c), FCCL_OK);
    }
    /* The compaction may still be under way when the last write returns
     * (a fast machine wrote all of it in 0.2 s): poll STATS for it. */
    char *stats = NULL;
    const char *line = NULL;
    for (double end = th_now() + 10; ; usleep(20 * 1000)) {
        free(stats);
        stats = NULL;
        cr_assert_eq(fccl_store_stats(st, &stats, NULL), FCCL_OK);
        line = strstr(stats, "journal_compactions ");
        cr_assert(line, "no journal_compactions in STATS: %s", stats);
        if (atoll(line + strlen("journal_compactions ")) > 0 ||
            th_now() > end)
            break;
    }
    cr_assert_gt(atoll(line + strlen("journal_compactions ")), 0,
                 "no compaction within 10 s of the writes");
    line = strstr(stats, "journal_bytes ");
    cr_assert(line);
    cr_assert_eq(atoll(line + strlen("journal_bytes ")),
                 (long long)file_size(jpath), "STATS disagrees with the file");
    free(stats);
    fccl_store_close(st);
    cr_assert(srv_log_wait(&s, "compacted", 2000), "no compaction logged");
    srv_finish(&s);
    /* Written: ~64 KiB x 60 = ~3.8 MiB; after compaction far less. */
    off_t sz = file_size(jpath);
    cr_assert_lt(sz, (off_t)(3u << 20), "journal %lld bytes: not compacted",
                 (long long)sz);
    struct stat sb;
    cr_assert_eq(stat(jpath, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0600, "journal mode %o", sb.st_mode & 0777);

    start_with(&s, "always");
    st = srv_store_open(s.port, 0);
    int r = ROUNDS - 1;
    for (int k = 0; k < KEYS; k++) {
        snprintf(key, sizeof(key), "ck%d", k);
        memset(val, 'a' + (r + k) % 26, VLEN);
        snprintf(val, 32, "r%d-k%d-", r, k);
        val[strlen(val)] = '-';
        val[VLEN] = '\0';
        srv_expect_cstr(st, key, val);
    }
    int64_t c;
    cr_assert_eq(fccl_store_add(st, "writes", 0, &c), FCCL_OK);
    cr_assert_eq(c, KEYS * ROUNDS);
    fccl_store_close(st);
    srv_cleanup(&s);
    remove_dir();
}

/* ---- one journal, one server ---- */

Test(journal, second_server_refused)
{
    make_dir();
    struct srv a = {0};
    start_with(&a, "always");
    const char *argv[] = {"tcpstore-server", "--host", "127.0.0.1", "--port",
                          "0", "--journal", jpath, NULL};
    char *log = NULL;
    cr_assert_neq(srv_run(argv, 10000, &log), 0,
                  "a second server on the same journal started");
    cr_assert(strstr(log, "in use by another server"), "log: %s", log);
    free(log);
    /* the first one is undisturbed */
    fccl_store_t *s = srv_store_open(a.port, 0);
    cr_assert_eq(fccl_store_set(s, "k", "v", 1), FCCL_OK);
    fccl_store_close(s);
    srv_cleanup(&a);
    remove_dir();
}

/* ---- wake-ups of other connections go through the group commit ---- */

Test(journal, waiters_woken_under_fsync_always)
{
    make_dir();
    struct srv s = {0};
    start_with(&s, "always");
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char addr[TH_ADDR_LEN];
        fccl_store_opts_t o;
        srv_client_opts(&o, addr, s.port, 0);
        fccl_store_t *st = NULL;
        void *v = NULL, *q = NULL;
        size_t n = 0, qn = 0;
        int ok = fccl_store_connect(&o, &st) == FCCL_OK &&
                 fccl_store_get(st, "late", &v, &n, 5000) == FCCL_OK &&
                 n == 5 && memcmp(v, "value", 5) == 0 &&
                 fccl_store_queue_pop(st, "jobs", 1, &q, &qn, 5000) ==
                     FCCL_OK &&
                 qn == 3 && memcmp(q, "job", 3) == 0;
        _exit(ok ? 0 : 1);
    }
    fccl_store_t *st = srv_store_open(s.port, 0);
    th_sleep_ms(200); /* the child is parked in its WAIT by now */
    cr_assert_eq(fccl_store_set(st, "late", "value", 5), FCCL_OK);
    th_sleep_ms(100);
    cr_assert_eq(fccl_store_queue_push(st, "jobs", "job", 3), FCCL_OK);
    int wst = th_reap(pid, 15000);
    cr_assert(wst != -1 && WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
              "the waiting client was not woken with the right values");
    fccl_store_close(st);
    srv_kill_hard(&s);
    srv_cleanup(&s);
    /* The pop was journaled: the queue is empty after a restart. */
    start_with(&s, "always");
    st = srv_store_open(s.port, 0);
    int64_t len = -1;
    cr_assert_eq(fccl_store_queue_len(st, "jobs", &len), FCCL_OK);
    cr_assert_eq(len, 0);
    srv_expect_cstr(st, "late", "value");
    fccl_store_close(st);
    srv_cleanup(&s);
    remove_dir();
}

/* ---- options: config file, bad values ---- */

Test(journal, options_from_config_file_and_bad_values)
{
    make_dir();
    char conf[200], text[400];
    snprintf(conf, sizeof(conf), "%s/server.conf", jdir);
    snprintf(text, sizeof(text),
             "host = 127.0.0.1\njournal = %s\nfsync = interval\n"
             "fsync-interval-ms = 20\n", jpath);
    FILE *f = fopen(conf, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    const char *extra[] = {"--config", conf, NULL};
    struct srv s = {0};
    srv_start(&s, extra);
    fccl_store_t *st = srv_store_open(s.port, 0);
    cr_assert_eq(fccl_store_set(st, "from-conf", "yes", 3), FCCL_OK);
    fccl_store_close(st);
    th_sleep_ms(100); /* a few 20 ms syncs */
    srv_kill_hard(&s);
    srv_cleanup(&s);
    start_with(&s, "never"); /* same file from the command line */
    st = srv_store_open(s.port, 0);
    srv_expect_cstr(st, "from-conf", "yes");
    fccl_store_close(st);
    srv_cleanup(&s);

    const char *bad_mode[] = {"tcpstore-server", "--port", "0", "--journal",
                              jpath, "--fsync", "sometimes", NULL};
    char *log = NULL;
    cr_assert_eq(srv_run(bad_mode, 10000, &log), 2);
    cr_assert(strstr(log, "always, interval or never"), "log: %s", log);
    free(log);
    const char *bad_ms[] = {"tcpstore-server", "--port", "0",
                            "--fsync-interval-ms", "0", NULL};
    cr_assert_eq(srv_run(bad_ms, 10000, NULL), 2);
    /* A file that is not a journal is refused, never overwritten. */
    char other[200];
    snprintf(other, sizeof(other), "%s/not-a-journal", jdir);
    f = fopen(other, "w");
    cr_assert(f);
    fputs("precious data\n", f);
    fclose(f);
    const char *foreign[] = {"tcpstore-server", "--port", "0", "--journal",
                             other, NULL};
    cr_assert_eq(srv_run(foreign, 10000, &log), 1);
    cr_assert(strstr(log, "not an fccl journal"), "log: %s", log);
    free(log);
    cr_assert_eq(file_size(other), (off_t)strlen("precious data\n"));
    unlink(other);
    unlink(conf);
    remove_dir();
}

/* ---- TLS connections sync at once (their bufferevent writes by itself) ---- */

Test(journal, tls_and_plain_clients_acked_writes_survive)
{
    srv_need_openssl();
    make_dir();
    char cert[200], key[200];
    snprintf(cert, sizeof(cert), "%s/cert.pem", jdir);
    snprintf(key, sizeof(key), "%s/key.pem", jdir);
    srv_make_cert(cert, key, "store");
    struct srv s = {0};
    srv_start_local(&s, (const char *[]){"--journal", jpath, "--tls-cert",
                                         cert, "--tls-key", key, NULL});
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, s.port, 0);
    o.tls = 1;
    o.tls_ca = cert;
    fccl_store_t *t = NULL, *p = srv_store_open(s.port, 0);
    cr_assert_eq(fccl_store_connect(&o, &t), FCCL_OK, "%s", fccl_last_error());
    char k[32], v[32];
    int64_t c;
    for (int i = 0; i < 200; i++) { /* interleaved: held and synced at once */
        snprintf(k, sizeof(k), "tls%d", i);
        snprintf(v, sizeof(v), "t%d", i * 7);
        cr_assert_eq(fccl_store_set(t, k, v, strlen(v)), FCCL_OK);
        snprintf(k, sizeof(k), "plain%d", i);
        cr_assert_eq(fccl_store_set(p, k, v, strlen(v)), FCCL_OK);
        cr_assert_eq(fccl_store_add(t, "both", 1, &c), FCCL_OK);
        cr_assert_eq(fccl_store_add(p, "both", 1, &c), FCCL_OK);
    }
    srv_kill_hard(&s);
    fccl_store_close(t);
    fccl_store_close(p);
    srv_cleanup(&s);
    start_with(&s, "always");
    p = srv_store_open(s.port, 0);
    for (int i = 0; i < 200; i++) {
        snprintf(v, sizeof(v), "t%d", i * 7);
        snprintf(k, sizeof(k), "tls%d", i);
        srv_expect_cstr(p, k, v);
        snprintf(k, sizeof(k), "plain%d", i);
        srv_expect_cstr(p, k, v);
    }
    cr_assert_eq(fccl_store_add(p, "both", 0, &c), FCCL_OK);
    cr_assert_eq(c, 400);
    fccl_store_close(p);
    srv_cleanup(&s);
    unlink(cert);
    unlink(key);
    remove_dir();
}

/* ---- 7. compaction in the background ---- */

struct pinger {
    int port;
    volatile int stop;
    int count, failed;
    double max_us, sum_us;
};

/* PING round trips until told to stop; the slowest one is logged. */
static void *ping_loop(void *arg)
{
    struct pinger *p = arg;
    fccl_store_t *st = srv_store_open(p->port, 0);
    while (!p->stop) {
        double us = 0;
        double t0 = th_now();
        if (fccl_store_ping(st, &us) < 0) {
            p->failed++;
            break;
        }
        us = (th_now() - t0) * 1e6;
        p->count++;
        p->sum_us += us;
        if (us > p->max_us)
            p->max_us = us;
    }
    fccl_store_close(st);
    return NULL;
}

static long long stat_of(fccl_store_t *st, const char *name)
{
    char *stats = NULL, pat[64];
    cr_assert_eq(fccl_store_stats(st, &stats, NULL), FCCL_OK);
    snprintf(pat, sizeof(pat), "%s ", name);
    const char *at = strstr(stats, pat);
    cr_assert(at, "no %s in STATS", name);
    long long v = atoll(at + strlen(pat));
    free(stats);
    return v;
}

static void big_value(char *v, size_t n, int round, int k)
{
    memset(v, 'a' + (round * 7 + k) % 26, n);
    snprintf(v, 32, "r%d-k%d", round, k);
}

/* Rewrites of 4 MiB of live data (64 values of 64 KiB) until the journal
 * passes 4x that, with small mutations after every value (SET of a new
 * key, ADD, DELETE of the previous small key) so that some land while a
 * child writes the snapshot; a PING loop on another connection meanwhile.
 * Every value is right afterwards and after SIGKILL + replay; the PING
 * latency is logged, not asserted. */
Test(journal, compaction_in_background_keeps_clients_served, .timeout = 180)
{
    enum { KEYS = 64, VLEN = 65536, ROUNDS = 6 };
    make_dir();
    struct srv s = {0};
    start_with(&s, "always");
    fccl_store_t *st = srv_store_open(s.port, 0);
    struct pinger pg = {.port = s.port};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, ping_loop, &pg), 0);
    static char v[VLEN];
    char key[32], sv[32];
    int64_t c = 0;
    int small = 0;
    for (int r = 0; r < ROUNDS; r++) {
        for (int k = 0; k < KEYS; k++, small++) {
            snprintf(key, sizeof(key), "big%d", k);
            big_value(v, VLEN, r, k);
            cr_assert_eq(fccl_store_set(st, key, v, VLEN), FCCL_OK, "%s",
                         fccl_last_error());
            snprintf(key, sizeof(key), "m%d", small);
            snprintf(sv, sizeof(sv), "v%d", small);
            cr_assert_eq(fccl_store_set(st, key, sv, strlen(sv)), FCCL_OK);
            cr_assert_eq(fccl_store_add(st, "ctr", 1, &c), FCCL_OK);
            if (small % 2) { /* odd small keys are deleted again */
                int deleted = 0;
                cr_assert_eq(fccl_store_delete(st, key, &deleted), FCCL_OK);
                cr_assert_eq(deleted, 1);
            }
        }
    }
    /* The last compaction finishes by the server's 1 s sweep at most. */
    for (int i = 0; i < 100 && stat_of(st, "journal_compacting"); i++)
        th_sleep_ms(100);
    pg.stop = 1;
    pthread_join(t, NULL);
    long long done = stat_of(st, "journal_compactions");
    long long turn_us = stat_of(st, "loop_turn_max_us");
    cr_log_info("background compaction: %lld done; PING during the run: %d, "
                "mean %.0f us, max %.0f us; longest loop turn %lld us",
                done, pg.count, pg.count ? pg.sum_us / pg.count : 0.0,
                pg.max_us, turn_us);
    cr_assert_eq(pg.failed, 0, "a PING failed during compaction");
    cr_assert_gt(done, 0, "no compaction ran");
    cr_assert(srv_log_wait(&s, "in the background", 2000));
    char *log = srv_log(&s);
    const char *marks[] = {"fork took", "in the background"};
    for (int i = 0; i < 2; i++) {
        const char *at = strstr(log, marks[i]);
        const char *bol = at, *eol = at ? strchr(at, '\n') : NULL;
        while (bol && bol > log && bol[-1] != '\n')
            bol--;
        if (at && eol)
            cr_log_info("server: %.*s", (int)(eol - bol), bol);
    }
    free(log);
    fccl_store_close(st);
    for (int pass = 0; pass < 2; pass++) {
        st = srv_store_open(s.port, 0);
        for (int k = 0; k < KEYS; k++) {
            snprintf(key, sizeof(key), "big%d", k);
            big_value(v, VLEN, ROUNDS - 1, k);
            void *got = NULL;
            size_t n = 0;
            cr_assert_eq(fccl_store_get(st, key, &got, &n, 2000), FCCL_OK);
            cr_assert(n == VLEN && memcmp(got, v, VLEN) == 0,
                      "pass %d: %s wrong", pass, key);
            free(got);
        }
        for (int i = 0; i < small; i++) {
            snprintf(key, sizeof(key), "m%d", i);
            const char *keys[1] = {key};
            int present = -1;
            cr_assert_eq(fccl_store_check(st, keys, 1, &present), FCCL_OK);
            cr_assert_eq(present, i % 2 == 0, "pass %d: %s present %d",
                         pass, key, present);
            if (present) {
                snprintf(sv, sizeof(sv), "v%d", i);
                srv_expect_cstr(st, key, sv);
            }
        }
        cr_assert_eq(fccl_store_add(st, "ctr", 0, &c), FCCL_OK);
        cr_assert_eq(c, small, "pass %d: ctr %lld", pass, (long long)c);
        fccl_store_close(st);
        /* Again after SIGKILL: the compacted file + tail replay to it. */
        srv_kill_hard(&s);
        srv_cleanup(&s);
        start_with(&s, "always");
    }
    srv_cleanup(&s);
    remove_dir();
}
