/*
 * A journal damaged in the middle (issue 25): the server used to truncate
 * the file at the first bad record, erasing every intact record behind it.
 * Now it refuses to start, naming the offset and what follows, and with
 * --journal-recover keeps a copy of the damaged file, skips the damage and
 * replays every intact record.  Also: replay streams the file (the
 * server's peak RSS follows the live data, not the file), and a FILE.tmp
 * left by a killed compaction is removed at start.
 *
 * The journals are written here, record by record, from the documented
 * format (docs/PROTOCOL-fccl.md) with a CRC-32 of our own, so the damage
 * lands at known offsets.
 */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"

static char dir[64], jpath[128];

/* Each test's directory, removed after it, passed or failed. */
static void make_dir(void)
{
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-jdmg"), 0);
    snprintf(jpath, sizeof(jpath), "%s/store.journal", dir);
}

static void remove_dir(void)
{
    if (dir[0])
        th_rmtree(dir);
}

TestSuite(jdamage, .init = make_dir, .fini = remove_dir, .timeout = 240);

/* ---- writing journals ---- */

/* zlib's CRC-32, bit by bit (a reference independent of the server's). */
static uint32_t crc32_ref(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1)));
    }
    return ~crc;
}

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* One SET record (type 1) of key k, value v[0..vn) onto f; its size. */
static size_t put_set(FILE *f, const char *k, const void *v, size_t vn)
{
    size_t kn = strlen(k), len = 13 + kn + vn;
    uint8_t *rec = malloc(8 + len);
    cr_assert(rec);
    uint8_t *p = rec + 8;
    p[0] = 1;
    le32(p + 1, (uint32_t)kn);
    le64(p + 5, vn);
    memcpy(p + 13, k, kn);
    memcpy(p + 13 + kn, v, vn);
    le32(rec, (uint32_t)len);
    le32(rec + 4, crc32_ref(0, p, len));
    cr_assert_eq(fwrite(rec, 1, 8 + len, f), 8 + len);
    free(rec);
    return 8 + len;
}

#define NREC 2001
#define BAD 1000 /* the record damaged (0-based): 1000 before, 1000 after */

static void key_of(int i, char *k, size_t n) { snprintf(k, n, "/k%04d", i); }

static void val_of(int i, char *v, size_t n)
{
    snprintf(v, n, "value-%d-%08x", i, (unsigned)(i * 2654435761u));
}

/* NREC SETs of distinct keys; off[i] gets record i's file offset. */
static void write_journal(off_t off[NREC + 1])
{
    FILE *f = fopen(jpath, "wb");
    cr_assert(f, "%s: %s", jpath, strerror(errno));
    cr_assert_eq(fwrite("FCCLJNL1", 1, 8, f), 8);
    off_t at = 8;
    for (int i = 0; i < NREC; i++) {
        char k[32], v[64];
        key_of(i, k, sizeof(k));
        val_of(i, v, sizeof(v));
        off[i] = at;
        at += (off_t)put_set(f, k, v, strlen(v));
    }
    off[NREC] = at;
    cr_assert_eq(fclose(f), 0);
}

static void patch(off_t at, const void *p, size_t n)
{
    int fd = open(jpath, O_RDWR);
    cr_assert(fd >= 0);
    cr_assert_eq(pwrite(fd, p, n, at), (ssize_t)n);
    close(fd);
}

static uint8_t *slurp(const char *path, size_t *n)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "%s: %s", path, strerror(errno));
    struct stat sb;
    cr_assert_eq(fstat(fd, &sb), 0);
    uint8_t *b = malloc((size_t)sb.st_size + 1);
    cr_assert(b);
    cr_assert_eq(pread(fd, b, (size_t)sb.st_size, 0), sb.st_size);
    close(fd);
    *n = (size_t)sb.st_size;
    return b;
}

/* The name of the one FILE.damaged-* beside the journal, or "". */
static void find_damaged(char *out, size_t n)
{
    DIR *d = opendir(dir);
    cr_assert(d);
    struct dirent *e;
    int found = 0;
    out[0] = '\0';
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, "store.journal.damaged-", 22) != 0)
            continue;
        found++;
        snprintf(out, n, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    cr_assert_leq(found, 1, "more than one damaged copy");
}

/* ---- checks ---- */

/* Every key but BAD holds its value; BAD is gone; nothing else is. */
static void expect_all_but_bad(int port)
{
    fccl_store_t *st = srv_store_open(port, 0);
    int64_t nk = -1;
    cr_assert_eq(fccl_store_num_keys(st, &nk), FCCL_OK);
    cr_assert_eq(nk, NREC - 1, "%lld keys after recovery, want %d",
                 (long long)nk, NREC - 1);
    for (int i = 0; i < NREC; i++) {
        char k[32], v[64];
        key_of(i, k, sizeof(k));
        val_of(i, v, sizeof(v));
        const char *key = k + 1; /* the client adds the '/' */
        int present = -1;
        cr_assert_eq(fccl_store_check(st, &key, 1, &present), FCCL_OK);
        cr_assert_eq(present, i != BAD, "%s present %d", k, present);
        if (i != BAD)
            srv_expect_cstr(st, key, v);
    }
    fccl_store_close(st);
}

/* Damage at BAD: refused (file untouched), then recovered. */
static void refuse_then_recover(off_t off[NREC + 1])
{
    size_t n0, n1;
    uint8_t *before = slurp(jpath, &n0);
    const char *argv[] = {"tcpstore-server", "--host", "127.0.0.1", "--port",
                          "0", "--journal", jpath, NULL};
    char *log = NULL;
    cr_assert_eq(srv_run(argv, 30000, &log), 1, "the server started on a "
                 "damaged journal: %s", log);
    char want[96];
    snprintf(want, sizeof(want), "at offset %lld, and %d intact records",
             (long long)off[BAD], NREC - 1 - BAD);
    cr_assert(strstr(log, want), "no '%s' in: %s", want, log);
    cr_assert(strstr(log, jpath) && strstr(log, "--journal-recover"), "%s",
              log);
    free(log);
    uint8_t *after = slurp(jpath, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "a refused start changed the journal (%zu -> %zu bytes)", n0,
              n1);
    free(after);

    struct srv s = {0};
    srv_start_local(&s, (const char *[]){"--journal", jpath,
                                         "--journal-recover", NULL});
    cr_assert(srv_log_wait(&s, "recovered: replayed 2000 intact records",
                           2000), "no recovery line");
    snprintf(want, sizeof(want), "at offset %lld: skipping %lld damaged "
             "bytes; replay resumes at offset %lld", (long long)off[BAD],
             (long long)(off[BAD + 1] - off[BAD]), (long long)off[BAD + 1]);
    cr_assert(srv_log_wait(&s, want, 1000), "no '%s'", want);
    expect_all_but_bad(s.port);
    char copy[512];
    find_damaged(copy, sizeof(copy));
    cr_assert(copy[0], "no damaged copy beside the journal");
    after = slurp(copy, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "the kept copy is not the damaged file");
    free(after);
    free(before);
    /* The journal was rewritten: a plain restart needs no recovery. */
    fccl_store_t *st = srv_store_open(s.port, 0);
    cr_assert_eq(fccl_store_set(st, "later", "x", 1), FCCL_OK);
    fccl_store_close(st);
    srv_kill_hard(&s);
    srv_cleanup(&s);
    srv_start_local(&s, (const char *[]){"--journal", jpath, NULL});
    st = srv_store_open(s.port, 0);
    srv_expect_cstr(st, "later", "x");
    int64_t nk = -1;
    cr_assert_eq(fccl_store_num_keys(st, &nk), FCCL_OK);
    cr_assert_eq(nk, NREC);
    fccl_store_close(st);
    srv_finish(&s);
    unlink(copy);
}

Test(jdamage, flipped_byte_mid_file_refused_then_recovered)
{
    off_t off[NREC + 1];
    write_journal(off);
    /* One byte of record BAD's value. */
    uint8_t b;
    int fd = open(jpath, O_RDWR);
    cr_assert(fd >= 0);
    off_t at = off[BAD] + 8 + 13 + 6 + 3;
    cr_assert_eq(pread(fd, &b, 1, at), 1);
    b ^= 0x01;
    cr_assert_eq(pwrite(fd, &b, 1, at), 1);
    close(fd);
    refuse_then_recover(off);
}

/* The journal with record `rec` claiming a length of 2^31 bytes. */
static void write_journal_huge_length(off_t off[NREC + 1], int rec)
{
    write_journal(off);
    uint8_t len[4];
    le32(len, 1u << 31);
    patch(off[rec], len, 4);
}

Test(jdamage, length_2_pow_31_mid_file_refused_then_recovered)
{
    off_t off[NREC + 1];
    write_journal_huge_length(off, BAD);
    refuse_then_recover(off);
}

/* A bad tail (nothing valid behind it) is still cut, not refused. */
Test(jdamage, damaged_last_record_is_a_tail)
{
    off_t off[NREC + 1];
    write_journal_huge_length(off, NREC - 1);
    struct srv s = {0};
    srv_start_local(&s, (const char *[]){"--journal", jpath, NULL});
    cr_assert(srv_log_wait(&s, "dropping the last", 2000));
    struct stat sb;
    cr_assert_eq(stat(jpath, &sb), 0);
    cr_assert_eq(sb.st_size, off[NREC - 1]);
    fccl_store_t *st = srv_store_open(s.port, 0);
    int64_t nk = -1;
    cr_assert_eq(fccl_store_num_keys(st, &nk), FCCL_OK);
    cr_assert_eq(nk, NREC - 1);
    fccl_store_close(st);
    srv_finish(&s);
}

/* ---- memory: the file streams, the live data stays ---- */

static long vm_hwm_kib(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert(f);
    long kib = -1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

/* 160 overwrites of 4 keys with 1 MiB values: a 160 MiB file, 4 MiB live. */
Test(jdamage, replay_memory_follows_live_data_not_file)
{
    enum { KEYS = 4, ROUNDS = 40, VLEN = 1 << 20 };
    FILE *f = fopen(jpath, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite("FCCLJNL1", 1, 8, f), 8);
    uint8_t *v = malloc(VLEN);
    cr_assert(v);
    for (int r = 0; r < ROUNDS; r++)
        for (int k = 0; k < KEYS; k++) {
            char key[16];
            snprintf(key, sizeof(key), "/big%d", k);
            memset(v, 'a' + (r + k) % 26, VLEN);
            put_set(f, key, v, VLEN);
        }
    cr_assert_eq(fclose(f), 0);
    struct stat sb;
    cr_assert_eq(stat(jpath, &sb), 0);
    long bound = 40L << 10; /* KiB */
#ifdef __SANITIZE_ADDRESS__
    /* ASan keeps freed memory in quarantine (256 MiB): without it, what
     * is left is its own overhead. */
    char asan[512];
    const char *was = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof(asan), "%s%squarantine_size_mb=0", was ? was : "",
             was && *was ? ":" : "");
    setenv("ASAN_OPTIONS", asan, 1);
    bound = 100L << 10;
#endif
    struct srv s = {0};
    srv_start_local(&s, (const char *[]){"--journal", jpath, NULL});
    long hwm = vm_hwm_kib(s.pid);
    cr_log_info("replay of a %lld MiB journal holding %d MiB: server peak "
                "RSS %ld MiB", (long long)(sb.st_size >> 20),
                KEYS * VLEN >> 20, hwm >> 10);
    cr_assert_gt(hwm, 0);
    /* live 4 MiB + a 1 MiB window + one record + the program itself */
    cr_assert_lt(hwm, bound, "peak RSS %ld KiB replaying a %lld-byte "
                 "file with 4 MiB live", hwm, (long long)sb.st_size);
    fccl_store_t *st = srv_store_open(s.port, 0);
    for (int k = 0; k < KEYS; k++) {
        char key[16];
        snprintf(key, sizeof(key), "big%d", k);
        memset(v, 'a' + (ROUNDS - 1 + k) % 26, VLEN);
        void *got = NULL;
        size_t n = 0;
        cr_assert_eq(fccl_store_get(st, key, &got, &n, 5000), FCCL_OK);
        cr_assert(n == VLEN && memcmp(got, v, VLEN) == 0, "%s wrong", key);
        free(got);
    }
    fccl_store_close(st);
    srv_finish(&s);
    free(v);
}

/* ---- a FILE.tmp of a killed compaction ---- */

Test(jdamage, leftover_tmp_removed_at_start)
{
    off_t off[NREC + 1];
    write_journal(off);
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.tmp", jpath);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0);
    close(fd); /* empty, as a SIGKILL right after the fork leaves it */
    struct srv s = {0};
    srv_start_local(&s, (const char *[]){"--journal", jpath, NULL});
    cr_assert_eq(access(tmp, F_OK), -1, "%s is still there", tmp);
    cr_assert(srv_log_wait(&s, "interrupted compaction", 1000));
    fccl_store_t *st = srv_store_open(s.port, 0);
    srv_expect_cstr(st, "k0000", "value-0-00000000");
    fccl_store_close(st);
    srv_finish(&s);
}
