/*
 * A journal whose disk fails (tcpstore-server --journal, --fsync always):
 * the journal lives on an ext4 file system in a loop device whose backing
 * file sits on a small tmpfs, so the file system believes it has room but
 * its writeback fails once the tmpfs is full: fdatasync reports the error
 * the way a failing disk does.  Then a write is never acknowledged, every
 * mutation is refused (its connection closed, one log line each), reads
 * go on; once the tmpfs has room again the journal is rewritten from
 * memory and writes are accepted; a restart replays every acknowledged
 * write.
 *
 * Needs root (mount, loop devices) and mkfs.ext4; skipped otherwise.
 * Everything made is removed in .fini, also when the test fails.
 */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"

#include <stdarg.h>
#include <sys/stat.h>

static char root[64];      /* tmpfs mount point, "" if none */
static char mnt[128];      /* ext4 mount point inside it */
static char jpath[192];    /* the journal */
static int tmpfs_up, ext4_up;
static struct srv srv;

__attribute__((format(printf, 1, 2))) static int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    return system(cmd);
}

static void teardown(void)
{
    srv_cleanup(&srv); /* the server holds the journal open */
    srv.pid = 0;
    if (ext4_up && sh("umount %s 2>/dev/null || umount -l %s", mnt, mnt) != 0)
        cr_log_warn("umount %s failed", mnt);
    if (tmpfs_up &&
        sh("umount %s 2>/dev/null || umount -l %s", root, root) != 0)
        cr_log_warn("umount %s failed", root);
    if (root[0]) {
        rmdir(mnt);
        rmdir(root);
    }
    ext4_up = tmpfs_up = 0;
    root[0] = '\0';
}

/* tmpfs of 6 MiB at root; a 64 MiB ext4 image in it, loop-mounted at mnt;
 * then a filler takes all but ~512 KiB of the tmpfs.  0, or skip. */
static int setup_disk(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root (mount)");
    if (system("command -v mkfs.ext4 >/dev/null 2>&1") != 0)
        cr_skip_test("needs mkfs.ext4");
    cr_assert_eq(th_mkdtemp(root, sizeof(root), "fccl-jfail"), 0);
    snprintf(mnt, sizeof(mnt), "%s/mnt", root);
    snprintf(jpath, sizeof(jpath), "%s/store.journal", mnt);
    if (sh("mount -t tmpfs -o size=6m tmpfs %s", root) != 0) {
        rmdir(root);
        root[0] = '\0';
        cr_skip_test("cannot mount a tmpfs here");
    }
    tmpfs_up = 1;
    cr_assert_eq(sh("truncate -s 64M %s/disk.img && mkfs.ext4 -q -F -O "
                    "^has_journal -N 128 -E lazy_itable_init=0 %s/disk.img",
                    root, root), 0, "mkfs.ext4 failed");
    cr_assert_eq(mkdir(mnt, 0700), 0);
    if (sh("timeout 30 mount -o loop,errors=continue %s/disk.img %s", root,
           mnt) != 0)
        cr_skip_test("cannot loop-mount here");
    ext4_up = 1;
    /* All of the tmpfs, then give back 512 KiB. */
    cr_assert_eq(sh("dd if=/dev/zero of=%s/filler bs=64k 2>/dev/null; "
                    "truncate -s -512K %s/filler", root, root), 0,
                 "making the filler failed");
    return 0;
}

static void start(void)
{
    srv_start_local(&srv, (const char *[]){"--journal", jpath, "--fsync",
                                           "always", NULL});
}

static int stat_value(fccl_store_t *s, const char *name)
{
    char *text = NULL, pat[64];
    size_t len = 0;
    cr_assert_eq(fccl_store_stats(s, &text, &len), FCCL_OK, "%s",
                 fccl_last_error());
    snprintf(pat, sizeof(pat), "%s ", name);
    const char *at = strstr(text, pat);
    cr_assert(at, "no %s in STATS", name);
    int v = atoi(at + strlen(pat));
    free(text);
    return v;
}

#define BIG 65536
#define MAX_BIG 64

Test(journal_fail, fsync_failure_refuses_writes_until_rewritten,
     .timeout = 120, .fini = teardown)
{
    setup_disk();
    start();
    static char big[BIG];
    char key[32];
    fccl_store_t *s = srv_store_open(srv.port, 0);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        cr_assert_eq(fccl_store_set(s, key, key, strlen(key)), FCCL_OK, "%s",
                     fccl_last_error());
    }
    /* 64 KiB values until the disk fails; each one acknowledged (SET +
     * SYNC returned OK) must survive. */
    int acked = 0, rc = FCCL_OK;
    for (; acked < MAX_BIG; acked++) {
        memset(big, 'a' + acked % 26, sizeof(big));
        snprintf(key, sizeof(key), "big%d", acked);
        if ((rc = fccl_store_set(s, key, big, sizeof(big))) < 0)
            break;
    }
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO,
              "%d x 64 KiB on 512 KiB: last SET returned %d (%s)", acked, rc,
              fccl_last_error());
    cr_log_info("disk failed after %d acknowledged 64 KiB values: %s", acked,
                fccl_last_error());
    fccl_store_close(s);
    cr_assert(srv_log_count(&srv, "fdatasync") >= 1,
              "no fdatasync failure logged");

    /* Reads go on; mutations are refused, one log line each. */
    s = srv_store_open(srv.port, 0);
    srv_expect_value(s, "k3", "k3", 2);
    cr_assert_eq(stat_value(s, "journal_failed"), 1);
    int before = srv_log_count(&srv, "closing client");
    int64_t v = 0;
    rc = fccl_store_add(s, "ctr", 1, &v);
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO, "ADD returned %d",
              rc);
    fccl_store_close(s);
    th_sleep_ms(100); /* the log line is written before the close */
    cr_assert_eq(srv_log_count(&srv, "closing client") - before, 1,
                 "a refused ADD logs one line");
    s = srv_store_open(srv.port, 0);
    cr_assert_neq(fccl_store_set(s, "refused", "x", 1), FCCL_OK);
    fccl_store_close(s);

    /* Room again: the journal is rewritten and writes are accepted. */
    cr_assert_eq(sh("rm -f %s/filler", root), 0);
    int ok = 0;
    for (int i = 0; i < 100 && !ok; i++) {
        s = srv_store_open(srv.port, 0);
        ok = fccl_store_set(s, "after", "yes", 3) == FCCL_OK;
        if (!ok) {
            fccl_store_close(s);
            th_sleep_ms(100);
        }
    }
    cr_assert(ok, "writes still refused with room on the disk");
    cr_assert_eq(stat_value(s, "journal_failed"), 0);
    cr_assert(srv_log_count(&srv, "accepting writes again") == 1);
    fccl_store_close(s);

    /* SIGKILL and replay: every acknowledged write is back. */
    srv_kill_hard(&srv);
    srv_cleanup(&srv);
    start();
    s = srv_store_open(srv.port, 0);
    for (int i = 0; i < 10; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        srv_expect_value(s, key, key, strlen(key));
    }
    for (int i = 0; i < acked; i++) {
        memset(big, 'a' + i % 26, sizeof(big));
        snprintf(key, sizeof(key), "big%d", i);
        srv_expect_value(s, key, big, sizeof(big));
    }
    srv_expect_value(s, "after", "yes", 3);
    const char *refused[] = {"refused", "ctr"};
    int present = 1;
    cr_assert_eq(fccl_store_check(s, refused, 1, &present), FCCL_OK);
    cr_assert_eq(present, 0, "a refused SET was stored");
    cr_assert_eq(fccl_store_check(s, refused + 1, 1, &present), FCCL_OK);
    cr_assert_eq(present, 0, "a refused ADD was stored");
    fccl_store_close(s);
}
