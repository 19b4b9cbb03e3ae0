/*
 * The store's journal: record codec, append / sync / undo and compaction
 * (see journal.h for the file format and the guarantees).  Opening and
 * replaying it are journal_replay.c's, above this file.
 */
#include "journal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "codec.h"
#include "err.h"
#include "kv.h"
#include "log.h"
#include "net.h"

#define PAYLOAD_FIXED JOURNAL_PAYLOAD_FIXED
#define BUF_FLUSH (1u << 20) /* compaction writes in chunks this large */

/* ---- CRC-32 (reflected, polynomial 0xEDB88320), tables built once ----
 * Slicing by 8 (eight tables, eight bytes per step): a replay checks every
 * byte of the file, and this is about four times as fast as a byte at a
 * time. */

static uint32_t crc_table[8][256];

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^
                              crc_table[0][crc_table[t - 1][i] & 0xff];
}

uint32_t journal_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    if (!crc_table[0][1])
        crc_init();
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
                             (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
              crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
              crc_table[3][p[4]] ^ crc_table[2][p[5]] ^ crc_table[1][p[6]] ^
              crc_table[0][p[7]];
    }
    for (; n; n--)
        crc = crc_table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* ---- writing ---- */

/* Header + fixed payload fields of one record into h (JOURNAL_HDR +
 * PAYLOAD_FIXED bytes); the key and value follow it in the file. */
static void rec_head(uint8_t *h, enum journal_rec type, const uint8_t *key,
                     uint64_t klen, const uint8_t *val, uint64_t vlen)
{
    uint8_t *f = h + JOURNAL_HDR;
    f[0] = (uint8_t)type;
    codec_set_u32(f + 1, (uint32_t)klen);
    codec_set_u64(f + 5, vlen);
    uint32_t crc = journal_crc32(0, f, PAYLOAD_FIXED);
    crc = journal_crc32(crc, key, klen);
    crc = journal_crc32(crc, val, vlen);
    codec_set_u32(h, (uint32_t)(PAYLOAD_FIXED + klen + vlen));
    codec_set_u32(h + 4, crc);
}

/* The record into b (compaction). */
static void rec_put(struct codec_buf *b, enum journal_rec type,
                    const uint8_t *key, uint64_t klen, const uint8_t *val,
                    uint64_t vlen)
{
    uint8_t h[JOURNAL_HDR + PAYLOAD_FIXED];
    rec_head(h, type, key, klen, val, vlen);
    codec_put_bytes(b, h, sizeof(h));
    if (klen)
        codec_put_bytes(b, key, klen);
    if (vlen)
        codec_put_bytes(b, val, vlen);
}

int journal_append(struct journal *j, enum journal_rec type,
                   const uint8_t *key, uint64_t klen, const uint8_t *val,
                   uint64_t vlen)
{
    uint8_t h[JOURNAL_HDR + PAYLOAD_FIXED];
    if (PAYLOAD_FIXED + klen + vlen > UINT32_MAX)
        return fccl_err(FCCL_ERR_LIMIT, "journal record of %llu bytes",
                        (unsigned long long)(klen + vlen));
    rec_head(h, type, key, klen, val, vlen);
    j->rollback = j->size;
    j->tail_rollback = j->tail.len;
    /* One writev would do; three writes to an O_APPEND fd are as safe
     * since replay drops a torn tail. */
    if (fccl_fd_write(j->fd, h, sizeof(h)) < 0 ||
        fccl_fd_write(j->fd, key, (size_t)klen) < 0 ||
        fccl_fd_write(j->fd, val, (size_t)vlen) < 0) {
        int e = errno;
        journal_undo(j);
        j->failed = 1; /* as Redis after a failed AOF write */
        j->retry_ns = fccl_now_ns() + JOURNAL_RETRY_NS;
        return fccl_err_sys(FCCL_ERR_IO, e, "journal %s: append (refusing "
                            "writes until the journal is rewritten)",
                            j->path);
    }
    j->size += sizeof(h) + klen + vlen;
    j->dirty = 1;
    if (j->child > 0) { /* for the compacted file too */
        codec_put_bytes(&j->tail, h, sizeof(h));
        codec_put_bytes(&j->tail, key, (size_t)klen);
        codec_put_bytes(&j->tail, val, (size_t)vlen);
    }
    return FCCL_OK;
}

int journal_append_add(struct journal *j, const uint8_t *key, uint64_t klen,
                       int64_t delta)
{
    uint8_t v[8];
    codec_set_u64(v, (uint64_t)delta);
    return journal_append(j, JREC_ADD, key, klen, v, sizeof(v));
}

void journal_undo(struct journal *j)
{
    if (j->child > 0)
        j->tail.len = j->tail_rollback;
    if (ftruncate(j->fd, (off_t)j->rollback) == 0) {
        j->size = j->rollback;
        return;
    }
    /* A torn record left in the file would end a replay there, dropping
     * every later record: no more appends until the file is rewritten. */
    LOG_WARN("STORE", "journal %s: cannot take back a record: %s; refusing "
             "writes until the journal is rewritten", j->path,
             strerror(errno));
    j->failed = 1;
}

int journal_sync(struct journal *j)
{
    if (!j->dirty || j->fd < 0)
        return FCCL_OK;
    j->dirty = 0;
    /* Appended before a failed append: not known to be durable either. */
    if (j->failed)
        return fccl_err(FCCL_ERR_IO, "journal %s: not writable since a failed "
                                     "write or fdatasync", j->path);
    j->syncs++;
    if (fdatasync(j->fd) == 0)
        return FCCL_OK;
    /* What the failed sync covered may never reach the disk, and the
     * kernel reports it only once: the file is suspect until rewritten
     * from memory (journal_writable). */
    int e = errno;
    j->failed = 1;
    j->retry_ns = fccl_now_ns() + JOURNAL_RETRY_NS;
    LOG_WARN("STORE", "journal %s: fdatasync: %s; refusing writes until the "
             "journal is rewritten", j->path, strerror(e));
    return fccl_err_sys(FCCL_ERR_IO, e, "journal %s: fdatasync", j->path);
}

/* ---- opening ---- */

static void bg_abort(struct journal *j);

void journal_close(struct journal *j)
{
    bg_abort(j);
    if (j->fd < 0)
        return;
    journal_sync(j);
    close(j->fd);
    j->fd = -1;
}

/* ---- compaction ---- */

struct compact {
    struct codec_buf b;
    int fd, failed;
    uint64_t written;
};

static void flush_buf(struct compact *c, int force)
{
    if (c->failed || (!force && c->b.len < BUF_FLUSH))
        return;
    if (c->b.oom || fccl_fd_write(c->fd, c->b.p, c->b.len) < 0)
        c->failed = 1;
    c->written += c->b.len;
    codec_buf_reset(&c->b);
}

static void put_entry(struct compact *c, const struct kv_entry *e)
{
    if (e->has_val)
        rec_put(&c->b, JREC_SET, e->key, e->klen, e->val, e->vlen);
    for (const struct kv_item *it = e->qhead; it; it = it->next) {
        rec_put(&c->b, JREC_PUSH, e->key, e->klen, it->data, it->len);
        flush_buf(c, 0);
    }
    flush_buf(c, 0);
}

/* Every entry: the current buckets, and the old ones not yet moved. */
static void put_all(struct compact *c, const struct kv *kv)
{
    for (uint64_t i = 0; i <= kv->mask; i++)
        for (const struct kv_entry *e = kv->buckets[i]; e; e = e->next)
            put_entry(c, e);
    if (!kv->old)
        return;
    for (uint64_t i = kv->moved; i <= kv->old_mask; i++)
        for (const struct kv_entry *e = kv->old[i]; e; e = e->next)
            put_entry(c, e);
}

static void sync_dir(const char *path)
{
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s", path);
    int fd = open(dirname(tmp), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return;
    fsync(fd);
    close(fd);
}

int journal_rewrite(struct journal *j, struct kv *kv)
{
    bg_abort(j); /* its FILE.tmp is the one written here */
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.tmp", j->path);
    struct compact c = {.fd = -1};
    codec_buf_init(&c.b);
    c.fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
                0600);
    if (c.fd < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s: open", tmp);
    flock(c.fd, LOCK_EX | LOCK_NB); /* the file that becomes the journal */
    codec_put_bytes(&c.b, JOURNAL_MAGIC, sizeof(JOURNAL_MAGIC) - 1);
    put_all(&c, kv);
    flush_buf(&c, 1);
    codec_buf_free(&c.b);
    if (c.failed || fdatasync(c.fd) < 0 || rename(tmp, j->path) < 0) {
        int e = errno;
        close(c.fd);
        unlink(tmp);
        return fccl_err_sys(FCCL_ERR_IO, e, "journal %s: compaction",
                            j->path);
    }
    sync_dir(j->path);
    uint64_t before = j->size;
    close(j->fd);
    j->fd = c.fd;
    j->size = j->rollback = c.written;
    j->dirty = 0;
    j->compactions++;
    LOG_INFO("STORE", "journal %s: compacted %llu -> %llu bytes", j->path,
             (unsigned long long)before, (unsigned long long)c.written);
    return FCCL_OK;
}

int journal_writable(struct journal *j, struct kv *kv)
{
    if (!j->failed)
        return FCCL_OK;
    uint64_t now = fccl_now_ns();
    if (now < j->retry_ns)
        return fccl_err(FCCL_ERR_IO, "journal %s: refusing writes since a "
                        "failed write or fdatasync (next try to rewrite it "
                        "in %llu ms)", j->path,
                        (unsigned long long)((j->retry_ns - now) / 1000000));
    j->retry_ns = now + JOURNAL_RETRY_NS;
    if (journal_rewrite(j, kv) < 0)
        return fccl_err_wrap(FCCL_ERR_IO, "refusing writes since a failed "
                             "write or fdatasync");
    j->failed = 0;
    j->retry_at = 0;
    LOG_WARN("STORE", "journal %s: rewritten from memory; accepting writes "
             "again", j->path);
    return FCCL_OK;
}

/* ---- compaction in a child process ---- */

/* Close every descriptor but keep: the child must not hold the server's
 * listening sockets (a restarted server could not bind its port), its
 * clients or the journal's lock. */
static void close_all_but(int keep)
{
    int max = (int)sysconf(_SC_OPEN_MAX);
    for (int fd = 3; fd < (max > 0 ? max : 65536); fd++)
        if (fd != keep)
            close(fd);
}

/* In the child: the snapshot of kv (the parent's memory at the fork) into
 * fd, synced.  Never returns. */
static void child_write(int fd, const struct kv *kv, pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
    close_all_but(fd);
    struct compact c = {.fd = fd};
    codec_buf_init(&c.b);
    codec_put_bytes(&c.b, JOURNAL_MAGIC, sizeof(JOURNAL_MAGIC) - 1);
    put_all(&c, kv);
    flush_buf(&c, 1);
    _exit(c.failed || fdatasync(fd) < 0 ? 1 : 0);
}

static void tmp_path(const struct journal *j, char *out, size_t len)
{
    snprintf(out, len, "%s.tmp", j->path);
}

static int bg_start(struct journal *j, const struct kv *kv)
{
    char tmp[600];
    tmp_path(j, tmp, sizeof(tmp));
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC,
                  0600);
    if (fd < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s: open", tmp);
    flock(fd, LOCK_EX | LOCK_NB); /* the file that becomes the journal */
    uint64_t t0 = fccl_now_ns();
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return fccl_err_sys(FCCL_ERR_IO, e, "journal %s: fork", j->path);
    }
    if (pid == 0)
        child_write(fd, kv, parent);
    j->child = pid;
    j->child_fd = fd;
    j->child_t0 = fccl_now_ns();
    codec_buf_init(&j->tail);
    j->tail_rollback = 0;
    LOG_INFO("STORE", "journal %s: compacting %llu bytes in process %d "
             "(fork took %.1f ms)", j->path, (unsigned long long)j->size,
             (int)pid, (double)(j->child_t0 - t0) / 1e6);
    return FCCL_OK;
}

/* The child is done: FILE.tmp + tail, synced, becomes FILE. */
static int bg_finish(struct journal *j)
{
    char tmp[600];
    tmp_path(j, tmp, sizeof(tmp));
    struct stat sb;
    uint64_t t0 = fccl_now_ns();
    if (j->tail.oom)
        return fccl_err(FCCL_ERR_NOMEM, "journal %s: compaction: out of "
                                        "memory for the tail", j->path);
    if (fccl_fd_write(j->child_fd, j->tail.p, j->tail.len) < 0 ||
        fdatasync(j->child_fd) < 0 || fstat(j->child_fd, &sb) < 0 ||
        rename(tmp, j->path) < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s: compaction",
                            j->path);
    sync_dir(j->path);
    uint64_t before = j->size;
    close(j->fd);
    j->fd = j->child_fd;
    j->child_fd = -1;
    j->size = j->rollback = (uint64_t)sb.st_size;
    j->dirty = 0; /* the tail, synced just now, holds what was dirty */
    j->compactions++;
    uint64_t t1 = fccl_now_ns();
    LOG_INFO("STORE", "journal %s: compacted %llu -> %llu bytes in the "
             "background (%.1f ms; %zu bytes appended meanwhile, added and "
             "synced in %.1f ms)", j->path, (unsigned long long)before,
             (unsigned long long)sb.st_size,
             (double)(t1 - j->child_t0) / 1e6, j->tail.len,
             (double)(t1 - t0) / 1e6);
    return FCCL_OK;
}

static void bg_cleanup(struct journal *j)
{
    char tmp[600];
    if (j->child_fd >= 0) {
        close(j->child_fd);
        tmp_path(j, tmp, sizeof(tmp));
        unlink(tmp);
    }
    j->child_fd = -1;
    j->child = 0;
    codec_buf_free(&j->tail);
}

static void bg_abort(struct journal *j)
{
    if (j->child <= 0)
        return;
    kill(j->child, SIGKILL);
    while (waitpid(j->child, NULL, 0) < 0 && errno == EINTR)
        ;
    bg_cleanup(j);
}

void journal_compact_poll(struct journal *j)
{
    int st = 0;
    if (j->child <= 0)
        return;
    pid_t r = waitpid(j->child, &st, WNOHANG);
    if (r == 0 || (r < 0 && errno == EINTR))
        return;
    int rc = r == j->child && WIFEXITED(st) && WEXITSTATUS(st) == 0
                 ? bg_finish(j)
                 : fccl_err(FCCL_ERR_IO, "journal %s: the compaction "
                            "process failed (status %d)", j->path, st);
    if (rc < 0) {
        LOG_WARN("STORE", "%s; keeping the old file", fccl_last_error());
        j->retry_at = 2 * j->size;
    } else {
        j->retry_at = 0;
    }
    bg_cleanup(j);
}

void journal_maybe_compact(struct journal *j, struct kv *kv)
{
    journal_compact_poll(j);
    uint64_t live = kv->bytes + kv->nentries * (JOURNAL_HDR + PAYLOAD_FIXED);
    if (j->child > 0 || j->size < JOURNAL_COMPACT_MIN ||
        j->size < j->retry_at || j->size < JOURNAL_COMPACT_RATIO * live)
        return;
    if (bg_start(j, kv) == FCCL_OK)
        return;
    LOG_WARN("STORE", "%s; compacting in the loop instead", fccl_last_error());
    /* After a failure (disk full, say) wait for the file to double rather
     * than rewrite everything at every mutation. */
    if (journal_rewrite(j, kv) < 0) {
        LOG_WARN("STORE", "%s", fccl_last_error());
        j->retry_at = 2 * j->size;
        return;
    }
    j->retry_at = 0;
}
