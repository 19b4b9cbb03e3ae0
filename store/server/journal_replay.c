/*
 * Opening the journal (journal_open: the lock, a compaction's leftover,
 * the magic) and its replay at start (journal.h has the file format),
 * above journal.c, whose writer it uses to rewrite a recovered file.
 * Records
 * are read from the file through a window of JOURNAL_WINDOW bytes (a
 * record larger than that gets a buffer of its own size, once its length
 * has been checked against the file), so the replay's memory is the live
 * data plus one buffer, whatever the file's size.
 *
 * A record is valid when its header's length is in range, the record lies
 * within the file, its CRC32 matches and its payload's own lengths and
 * type make sense.  At the first record that is not valid the rest of the
 * file is scanned byte by byte for the next valid one:
 *  - none: a torn or corrupt tail (a write cut short by a crash): the file
 *    is truncated there, with a log line, as it always was;
 *  - one: damage in the middle, with intact records behind it.  By default
 *    the server refuses to start, naming the file, the offset and how many
 *    intact records follow, and touches nothing.  With --journal-recover
 *    the damaged file is kept beside the journal (FILE.damaged-DATE, a
 *    hard link, else a copy), every damaged stretch is skipped (logged
 *    with its offset and length), every intact record is replayed, and
 *    the journal is rewritten from the replayed state.
 * A false resynchronisation needs 32 bits of CRC and the payload's 64-bit
 * length to agree by chance; a value that holds a copy of journal records
 * could fool it, which is why recovery is never the default.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "codec.h"
#include "err.h"
#include "journal.h"
#include "kv.h"
#include "log.h"
#include "net.h"

#define JOURNAL_WINDOW (1u << 20) /* bytes read from the file at a time */
#define COPY_CHUNK (1u << 20)

/* ---- applying one record ---- */

int journal_apply(struct kv *kv, const uint8_t *p, uint64_t n)
{
    if (n < JOURNAL_PAYLOAD_FIXED)
        return fccl_err(FCCL_ERR_PROTOCOL, "journal record too short");
    uint8_t type = p[0];
    uint64_t klen = codec_get_u32(p + 1), vlen = codec_get_u64(p + 5);
    if (klen > n - JOURNAL_PAYLOAD_FIXED ||
        vlen != n - JOURNAL_PAYLOAD_FIXED - klen)
        return fccl_err(FCCL_ERR_PROTOCOL, "journal record lengths");
    const uint8_t *key = p + JOURNAL_PAYLOAD_FIXED, *val = key + klen;
    if (type == JREC_DEL || type == JREC_POP) {
        struct kv_entry *e = kv_find(kv, key, klen);
        if (!e)
            return FCCL_OK;
        if (type == JREC_DEL)
            kv_del_value(kv, e);
        else
            kv_item_free(kv_queue_pop(kv, e));
        kv_release(kv, e);
        return FCCL_OK;
    }
    struct kv_entry *e = kv_lookup_or_add(kv, key, klen);
    if (!e)
        return fccl_err(FCCL_ERR_NOMEM, "journal replay");
    int rc;
    int64_t out;
    switch (type) {
    case JREC_SET: rc = kv_set(kv, e, val, vlen); break;
    case JREC_APPEND: rc = kv_append(kv, e, val, vlen); break;
    case JREC_PUSH: rc = kv_queue_push(kv, e, val, vlen); break;
    case JREC_ADD:
        rc = vlen == 8 ? kv_add(kv, e, (int64_t)codec_get_u64(val), &out)
                       : fccl_err(FCCL_ERR_PROTOCOL, "journal ADD length");
        break;
    default:
        rc = fccl_err(FCCL_ERR_PROTOCOL, "journal record type %u", type);
    }
    if (rc < 0)
        kv_release(kv, e);
    return rc;
}

/* ---- the source: a file read through a window, or bytes in memory ---- */

struct jsrc {
    int fd;             /* -1: mem */
    const uint8_t *mem;
    uint64_t base;      /* file offset of the source's byte 0 (messages) */
    uint64_t size;      /* bytes of the source */
    uint8_t *win;       /* file: bytes [woff, woff + wlen) */
    size_t cap, wlen;
    uint64_t woff;
    int err;            /* errno of a failed read */
};

/* Bytes [off, off + n) of the source (the caller has checked that they
 * lie within it), or NULL with s->err set. */
static const uint8_t *src_at(struct jsrc *s, uint64_t off, size_t n)
{
    if (s->fd < 0)
        return s->mem + off;
    if (s->win && off >= s->woff && off + n <= s->woff + s->wlen)
        return s->win + (off - s->woff);
    size_t want = n > JOURNAL_WINDOW ? n : JOURNAL_WINDOW;
    if (want > s->size - off)
        want = (size_t)(s->size - off);
    /* A record larger than the window gets a buffer of its own size; the
     * next small read shrinks it back. */
    if (want > s->cap || (s->cap > JOURNAL_WINDOW && want <= JOURNAL_WINDOW)) {
        size_t cap = want > JOURNAL_WINDOW ? want : JOURNAL_WINDOW;
        free(s->win);
        s->wlen = s->cap = 0;
        s->win = malloc(cap);
        if (!s->win) {
            s->err = ENOMEM;
            return NULL;
        }
        s->cap = cap;
    }
    size_t got = 0;
    while (got < want) {
        ssize_t k = pread(s->fd, s->win + got, want - got,
                          (off_t)(s->base + off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            s->err = k < 0 ? errno : EIO; /* shorter than it was */
            s->wlen = 0;
            return NULL;
        }
        got += (size_t)k;
    }
    s->woff = off;
    s->wlen = want;
    return s->win;
}

static void src_free(struct jsrc *s)
{
    free(s->win);
    s->win = NULL;
    s->cap = s->wlen = 0;
}

/* ---- one record ---- */

enum rec_check { REC_VALID, REC_BAD, REC_IOERR };

/* Do the payload's own fields fit its length (a cheap filter before the
 * CRC when resynchronising)? */
static int payload_fits(const uint8_t *f, uint64_t len)
{
    uint8_t type = f[0];
    uint64_t klen = codec_get_u32(f + 1), vlen = codec_get_u64(f + 5);
    if (type < JREC_SET || type > JREC_POP)
        return 0;
    if (klen > len - JOURNAL_PAYLOAD_FIXED ||
        vlen != len - JOURNAL_PAYLOAD_FIXED - klen)
        return 0;
    return type != JREC_ADD || vlen == 8;
}

/* Is there a valid record at off?  *len its payload length, *p its
 * payload (valid until the next src_at), *why the reason if not.  With
 * strict, a record whose payload does not parse is not valid either (a
 * resynchronisation candidate); without, it is replayed and logged as
 * not applied, as before. */
static enum rec_check rec_at(struct jsrc *s, uint64_t off, int strict,
                             uint64_t *len, const uint8_t **p,
                             const char **why)
{
    if (s->size - off < JOURNAL_HDR) {
        *why = "torn record header";
        return REC_BAD;
    }
    const uint8_t *h = src_at(s, off, JOURNAL_HDR);
    if (!h)
        return REC_IOERR;
    uint64_t n = codec_get_u32(h);
    uint32_t crc = codec_get_u32(h + 4);
    if (n < JOURNAL_PAYLOAD_FIXED || n > JOURNAL_REC_MAX) {
        *why = "bad record length";
        return REC_BAD;
    }
    if (s->size - off - JOURNAL_HDR < n) {
        *why = "torn record";
        return REC_BAD;
    }
    if (strict) {
        const uint8_t *f = src_at(s, off + JOURNAL_HDR, JOURNAL_PAYLOAD_FIXED);
        if (!f)
            return REC_IOERR;
        if (!payload_fits(f, n)) {
            *why = "bad record fields";
            return REC_BAD;
        }
    }
    const uint8_t *b = src_at(s, off + JOURNAL_HDR, (size_t)n);
    if (!b)
        return REC_IOERR;
    if (journal_crc32(0, b, (size_t)n) != crc) {
        *why = "checksum mismatch";
        return REC_BAD;
    }
    *len = n;
    *p = b;
    return REC_VALID;
}

/* Could a record start at h (n bytes of the source from there)?  The
 * header's length and the payload's fields, before any CRC. */
static int plausible(const uint8_t *h, uint64_t n)
{
    uint64_t len = codec_get_u32(h);
    return len >= JOURNAL_PAYLOAD_FIXED && len <= JOURNAL_REC_MAX &&
           n - JOURNAL_HDR >= len && payload_fits(h + JOURNAL_HDR, len);
}

/* The offset of the first valid record at or after `from`: s->size if
 * there is none, UINT64_MAX on a read error.  Byte by byte, a window at a
 * time; only plausible headers cost a CRC. */
static uint64_t resync(struct jsrc *s, uint64_t from)
{
    const uint64_t min = JOURNAL_HDR + JOURNAL_PAYLOAD_FIXED;
    uint64_t off = from;
    while (off < s->size && s->size - off >= min) {
        uint64_t avail = s->size - off;
        size_t span = avail < JOURNAL_WINDOW ? (size_t)avail : JOURNAL_WINDOW;
        const uint8_t *w = src_at(s, off, span);
        if (!w)
            return UINT64_MAX;
        for (size_t i = 0; i + min <= span; i++) {
            if (!plausible(w + i, s->size - off - i))
                continue;
            uint64_t len;
            const uint8_t *p;
            const char *why;
            enum rec_check r = rec_at(s, off + i, 1, &len, &p, &why);
            if (r == REC_VALID)
                return off + i;
            if (r == REC_IOERR || !(w = src_at(s, off, span)))
                return UINT64_MAX; /* (rec_at may have moved the window) */
        }
        off += span - min + 1;
    }
    return s->size;
}

uint64_t journal_resync(const uint8_t *b, uint64_t n, uint64_t from)
{
    struct jsrc s = {.fd = -1, .mem = b, .size = n};
    return resync(&s, from);
}

/* Count the valid records from off to the end, resynchronising past
 * further damage: what a replay that stopped at off would lose. */
static int count_intact(struct jsrc *s, uint64_t off, uint64_t *recs,
                        uint64_t *bytes)
{
    *recs = *bytes = 0;
    while (off < s->size) {
        uint64_t len;
        const uint8_t *p;
        const char *why;
        enum rec_check r = rec_at(s, off, 1, &len, &p, &why);
        if (r == REC_IOERR)
            return -1;
        if (r == REC_VALID) {
            (*recs)++;
            *bytes += JOURNAL_HDR + len;
            off += JOURNAL_HDR + len;
            continue;
        }
        off = resync(s, off + 1);
        if (off == UINT64_MAX)
            return -1;
    }
    return 0;
}

/* ---- replay ---- */

struct replay {
    const char *name;   /* for log lines */
    uint64_t records;   /* applied */
    uint64_t end;       /* the good prefix: offset of the first bad byte */
    const char *why;    /* why the replay stopped there, NULL at EOF */
    uint64_t skipped, regions; /* damage skipped (recover only) */
};

static void apply_logged(struct kv *kv, struct replay *r, uint64_t off,
                         const uint8_t *p, uint64_t len)
{
    if (journal_apply(kv, p, len) < 0)
        LOG_WARN("STORE", "journal %s: record at offset %llu not applied: "
                 "%s", r->name, (unsigned long long)off,
                 fccl_last_error());
    r->records++;
}

/* Replay the valid records from `from` up to the first bad one. */
static int replay_from(struct jsrc *s, struct kv *kv, struct replay *r,
                       uint64_t from)
{
    uint64_t off = from;
    r->why = NULL;
    while (off < s->size) {
        uint64_t len;
        const uint8_t *p;
        enum rec_check c = rec_at(s, off, 0, &len, &p, &r->why);
        if (c == REC_IOERR)
            return -1;
        if (c == REC_BAD)
            break;
        apply_logged(kv, r, s->base + off, p, len);
        off += JOURNAL_HDR + len;
    }
    r->end = off;
    if (off == s->size)
        r->why = NULL;
    return 0;
}

uint64_t journal_replay(struct kv *kv, const uint8_t *b, uint64_t n,
                        const char *name, const char **why,
                        uint64_t *records)
{
    struct jsrc s = {.fd = -1, .mem = b, .size = n};
    struct replay r = {.name = name};
    replay_from(&s, kv, &r, 0); /* memory cannot fail to read */
    *why = r.why;
    *records += r.records;
    return r.end;
}

static int io_fail(const struct jsrc *s, const char *path)
{
    return fccl_err_sys(FCCL_ERR_IO, s->err ? s->err : EIO,
                        "journal %s: read", path);
}

/* Damage at r->end with valid records behind it (the first at `next`):
 * without recover, refuse, saying what would be lost. */
static int refuse_damaged(struct jsrc *s, const struct replay *r,
                          uint64_t next)
{
    uint64_t recs, bytes;
    if (count_intact(s, next, &recs, &bytes) < 0)
        return io_fail(s, r->name);
    return fccl_err(FCCL_ERR_IO,
                    "journal %s: %s at offset %llu, and %llu intact "
                    "records (%llu bytes, the first at offset %llu) follow "
                    "it: refusing to start rather than lose them (the file "
                    "is untouched; --journal-recover keeps a copy of it, "
                    "skips the damaged bytes and replays every intact "
                    "record)",
                    r->name, r->why, (unsigned long long)(s->base + r->end),
                    (unsigned long long)recs, (unsigned long long)bytes,
                    (unsigned long long)(s->base + next));
}

/* Replay the whole source.  At damage followed by valid records: refuse
 * (recover 0) or skip to them (recover 1).  A bad stretch with nothing
 * valid behind it is the tail: r->end and r->why say where and why. */
static int replay_all(struct jsrc *s, struct kv *kv, int recover,
                      struct replay *r)
{
    uint64_t from = 0;
    for (;;) {
        if (replay_from(s, kv, r, from) < 0)
            return io_fail(s, r->name);
        if (!r->why)
            return FCCL_OK;
        uint64_t next = resync(s, r->end + 1);
        if (next == UINT64_MAX)
            return io_fail(s, r->name);
        if (next >= s->size)
            return FCCL_OK; /* the tail */
        if (!recover)
            return refuse_damaged(s, r, next);
        LOG_WARN("STORE", "journal %s: %s at offset %llu: skipping %llu "
                 "damaged bytes; replay resumes at offset %llu", r->name,
                 r->why, (unsigned long long)(s->base + r->end),
                 (unsigned long long)(next - r->end),
                 (unsigned long long)(s->base + next));
        r->skipped += next - r->end;
        r->regions++;
        from = next;
    }
}

/* ---- recovery: keep the damaged file, rewrite the journal ---- */

static int copy_file(int in, const char *to)
{
    int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (out < 0)
        return -1;
    uint8_t *b = malloc(COPY_CHUNK);
    off_t off = 0;
    int rc = b ? 0 : -1;
    while (rc == 0) {
        ssize_t k = pread(in, b, COPY_CHUNK, off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            rc = k < 0 ? -1 : 0;
            break;
        }
        for (ssize_t w = 0; w < k;) {
            ssize_t m = write(out, b + w, (size_t)(k - w));
            if (m < 0 && errno == EINTR)
                continue;
            if (m <= 0) {
                rc = -1;
                break;
            }
            w += m;
        }
        off += k;
    }
    int e = errno;
    free(b);
    if (rc == 0 && fsync(out) < 0)
        rc = -1, e = errno;
    close(out);
    if (rc < 0)
        unlink(to);
    errno = e;
    return rc;
}

/* FILE.damaged-YYYYmmdd-HHMMSS (with -N if taken): a hard link to the
 * damaged file (it is never written again), else a copy.  The name goes
 * to out. */
static int keep_damaged(const struct journal *j, char *out, size_t len)
{
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime_r(&now, &tm));
    for (int n = 0; n < 100; n++) {
        if (n)
            snprintf(out, len, "%s.damaged-%s-%d", j->path, stamp, n);
        else
            snprintf(out, len, "%s.damaged-%s", j->path, stamp);
        if (link(j->path, out) == 0)
            return FCCL_OK;
        if (errno == EEXIST)
            continue;
        if (copy_file(j->fd, out) == 0)
            return FCCL_OK;
        if (errno != EEXIST)
            return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s: keeping a "
                                "copy of the damaged file as %s", j->path,
                                out);
    }
    return fccl_err(FCCL_ERR_IO, "journal %s: no free name for a copy of "
                    "the damaged file", j->path);
}

static int recover_finish(struct journal *j, struct kv *kv,
                          const struct replay *r)
{
    char copy[600];
    int rc = keep_damaged(j, copy, sizeof(copy));
    if (rc < 0)
        return rc;
    rc = journal_rewrite(j, kv);
    if (rc < 0)
        return fccl_err_wrap(rc, "journal %s: rewriting it after recovery "
                             "(the damaged file is kept as %s)", j->path,
                             copy);
    LOG_WARN("STORE", "journal %s: recovered: replayed %llu intact records, "
             "lost %llu damaged bytes in %llu stretch%s (what they held is "
             "gone); the damaged file is kept as %s", j->path,
             (unsigned long long)r->records, (unsigned long long)r->skipped,
             (unsigned long long)r->regions, r->regions == 1 ? "" : "es",
             copy);
    return FCCL_OK;
}

/* ---- the file ---- */

/* Drop a torn tail: the file ends where the good records end. */
static int cut_tail(struct journal *j, const struct replay *r, uint64_t end,
                    uint64_t n)
{
    LOG_WARN("STORE", "journal %s: %s at offset %llu; dropping the last "
             "%llu bytes (no intact record follows)", j->path, r->why,
             (unsigned long long)end, (unsigned long long)(n - end));
    if (ftruncate(j->fd, (off_t)end) < 0 || fdatasync(j->fd) < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s: truncate",
                            j->path);
    return FCCL_OK;
}

int journal_replay_file(struct journal *j, struct kv *kv, uint64_t n,
                        int recover)
{
    const uint64_t mlen = sizeof(JOURNAL_MAGIC) - 1;
    struct jsrc s = {.fd = j->fd, .base = mlen, .size = n - mlen};
    struct replay r = {.name = j->path};
    uint64_t saved = kv->max_bytes;
    kv->max_bytes = 0; /* what was stored before is stored again */
    int rc = replay_all(&s, kv, recover, &r);
    kv->max_bytes = saved;
    src_free(&s);
    j->records_replayed = r.records;
    if (rc < 0)
        return rc;
    uint64_t end = r.why ? mlen + r.end : n;
    LOG_INFO("STORE", "journal %s: replayed %llu records (%llu bytes), "
             "%llu keys", j->path, (unsigned long long)r.records,
             (unsigned long long)(end - mlen - r.skipped),
             (unsigned long long)kv->nkeys);
    j->size = n;
    /* The damaged file is kept as it is, tail included, before anything
     * is written; the rewrite then replaces it. */
    if (r.regions)
        return recover_finish(j, kv, &r);
    if (r.why && (rc = cut_tail(j, &r, end, n)) < 0)
        return rc;
    j->size = end;
    return FCCL_OK;
}

/* ---- opening ---- */

/* A FILE.tmp left by a compaction that was killed (a SIGKILL of the
 * server, whose child then dies too) is removed: nobody will finish it.
 * We hold the journal's lock, so no live server writes it; a live child
 * would hold its lock, and it is then left alone. */
static void drop_stale_tmp(const struct journal *j)
{
    char tmp[600];
    struct stat sb;
    snprintf(tmp, sizeof(tmp), "%s.tmp", j->path);
    int fd = open(tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &sb) == 0 &&
        S_ISREG(sb.st_mode) && unlink(tmp) == 0)
        LOG_INFO("STORE", "journal %s: removed %s (%lld bytes) left by an "
                 "interrupted compaction", j->path, tmp,
                 (long long)sb.st_size);
    close(fd);
}

/* Check the magic (write it into an empty file) and replay the rest. */
static int load(struct journal *j, struct kv *kv, int recover)
{
    const size_t mlen = sizeof(JOURNAL_MAGIC) - 1;
    char magic[sizeof(JOURNAL_MAGIC) - 1];
    struct stat st;
    if (fstat(j->fd, &st) < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s: stat", j->path);
    uint64_t n = (uint64_t)st.st_size;
    if (n == 0) {
        if (fccl_fd_write(j->fd, (const uint8_t *)JOURNAL_MAGIC, mlen) < 0 ||
            fdatasync(j->fd) < 0)
            return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s", j->path);
        j->size = mlen;
        return FCCL_OK;
    }
    if (n < mlen || pread(j->fd, magic, mlen, 0) != (ssize_t)mlen ||
        memcmp(magic, JOURNAL_MAGIC, mlen) != 0)
        return fccl_err(FCCL_ERR_IO, "journal %s: not an fccl journal "
                        "(bad magic); refusing to overwrite it", j->path);
    return journal_replay_file(j, kv, n, recover);
}

int journal_open(struct journal *j, const char *path, enum journal_fsync mode,
                 int recover, struct kv *kv)
{
    memset(j, 0, sizeof(*j));
    j->fd = -1;
    j->child_fd = -1;
    j->mode = mode;
    if (strlen(path) >= sizeof(j->path))
        return fccl_err(FCCL_ERR_INVALID, "journal path too long");
    strcpy(j->path, path);
    j->fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (j->fd < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "journal %s: open", path);
    /* Two servers appending to one file would interleave records. */
    if (flock(j->fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        close(j->fd);
        j->fd = -1;
        return e == EWOULDBLOCK
                   ? fccl_err(FCCL_ERR_IO, "journal %s is in use by another "
                              "server", path)
                   : fccl_err_sys(FCCL_ERR_IO, e, "journal %s: lock", path);
    }
    drop_stale_tmp(j);
    int rc = load(j, kv, recover);
    if (rc < 0) {
        close(j->fd);
        j->fd = -1;
    }
    return rc;
}
