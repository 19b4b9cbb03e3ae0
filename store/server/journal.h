/*
 * The store's journal (tcpstore-server --journal FILE): every mutation of
 * the table is appended to FILE as one record before it is applied, and
 * FILE is replayed through the kv API when the server starts, so a killed
 * server comes back with the keys, counters and queues it had.
 *
 * File: an 8-byte magic "FCCLJNL1", then records
 *     u32 len | u32 crc32(payload) | payload (len bytes)
 *     payload = u8 type | u32 klen | key | u64 vlen | value
 * (little-endian; ADD carries its delta as the 8-byte value).
 *
 * Replay (journal_replay.c) streams the file through a 1 MiB window.  A
 * record that is cut short or fails its CRC with no valid record behind
 * it is a torn tail: the file is truncated there, with a log line.  One
 * with valid records behind it is damage: the server refuses to start
 * (naming the offset and what follows), or with recover keeps a copy of
 * the file (FILE.damaged-DATE), skips to the next valid record and
 * rewrites the journal from what was replayed.  A FILE.tmp left by an
 * interrupted compaction is removed at open.
 *
 * Durability (fsync mode): ALWAYS: appended records are fdatasync'ed
 * before the server sends any reply (journal_sync_pending is called by the
 * send path), so an acknowledged write is on disk; INTERVAL: a timer syncs
 * every interval_ms; NEVER: the page cache decides.
 *
 * Compaction: when the file grows past 4x the live data and 1 MiB, a forked
 * child writes the live state (its copy-on-write view of the table at the
 * fork) to FILE.tmp and syncs it, while the server goes on appending to
 * FILE and keeps a copy of every record appended since the fork (the
 * tail).  When the child has exited, the tail is appended to FILE.tmp,
 * synced, and FILE.tmp renamed over FILE, in one short loop turn (as
 * Redis's AOF rewrite).  If fork fails it is done in the loop, as before.
 *
 * Single-threaded: the server's event loop is the only user.
 */
#ifndef FCCL_STORE_JOURNAL_H
#define FCCL_STORE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "codec.h"

struct kv;

enum journal_fsync {
    JOURNAL_FSYNC_ALWAYS = 0,
    JOURNAL_FSYNC_INTERVAL = 1,
    JOURNAL_FSYNC_NEVER = 2,
};

enum journal_rec {
    JREC_SET = 1,
    JREC_APPEND = 2,
    JREC_ADD = 3,  /* value: i64 delta, 8 bytes little-endian */
    JREC_DEL = 4,
    JREC_PUSH = 5,
    JREC_POP = 6,
};

#define JOURNAL_MAGIC "FCCLJNL1"
#define JOURNAL_HDR 8 /* u32 len + u32 crc */
#define JOURNAL_PAYLOAD_FIXED 13 /* u8 type + u32 klen + u64 vlen */
#define JOURNAL_REC_MAX ((2ull << 30) + (2ull << 20)) /* > any value */
#define JOURNAL_COMPACT_MIN (1ull << 20)
#define JOURNAL_COMPACT_RATIO 4
#define JOURNAL_RETRY_NS 500000000ull /* rewrite attempts while failed */

struct journal {
    int fd;
    char path[512];
    enum journal_fsync mode;
    uint64_t size;    /* bytes in the file */
    uint64_t rollback; /* size before the last append */
    int dirty;        /* appended since the last sync */
    uint64_t retry_at; /* a failed compaction is retried past this size */
    int failed;       /* a write, undo or fdatasync failed: no appends until
                         journal_writable has rewritten the file */
    uint64_t retry_ns; /* monotonic time of the next rewrite attempt */
    pid_t child;      /* compaction writer (forked), 0 if none */
    int child_fd;     /* FILE.tmp while the child writes it, else -1 */
    uint64_t child_t0; /* when it was forked (ns) */
    struct codec_buf tail; /* records appended since the fork */
    size_t tail_rollback;  /* tail length before the last append */
    uint64_t syncs, compactions, records_replayed;
};

/* CRC-32 (IEEE, as zlib's crc32) of p[0..n), continuing from crc (0 to
 * start). */
uint32_t journal_crc32(uint32_t crc, const uint8_t *p, size_t n);

/* Open (create with mode 0600) path, remove a stale path.tmp, replay its
 * records into kv (whose byte limit is lifted during the replay), drop a
 * torn or corrupt tail.  Damage with valid records behind it: without
 * recover FCCL_ERR_IO naming the offset and the intact records that
 * follow (the file untouched); with recover the damaged file is kept
 * beside it, every valid record replayed and the file rewritten.
 * FCCL_OK, FCCL_ERR_IO (open/read/write, naming the file), FCCL_ERR_NOMEM. */
int journal_open(struct journal *j, const char *path, enum journal_fsync mode,
                 int recover, struct kv *kv);
void journal_close(struct journal *j);

/* Append one record (before the mutation it describes is applied).
 * FCCL_OK or FCCL_ERR_IO (the mutation must then be refused). */
int journal_append(struct journal *j, enum journal_rec type,
                   const uint8_t *key, uint64_t klen, const uint8_t *val,
                   uint64_t vlen);
int journal_append_add(struct journal *j, const uint8_t *key, uint64_t klen,
                       int64_t delta);
/* The mutation of the last append failed: take its record back out. */
void journal_undo(struct journal *j);

/* fdatasync if anything was appended since the last sync.  FCCL_OK, or
 * FCCL_ERR_IO when it failed or the journal is failed already: replies
 * that waited for this sync must not be sent (the records may not be on
 * disk).  A failure logs one line and sets j->failed. */
int journal_sync(struct journal *j);

/* Before a mutation's append: FCCL_OK if the journal takes writes.  After
 * a failed write, undo or fdatasync (j->failed) it is rewritten from kv's
 * live state (compaction: FILE.tmp, fdatasync, rename) at most once per
 * JOURNAL_RETRY_NS; until that succeeds every mutation gets FCCL_ERR_IO
 * (the server refuses it) while reads go on.  The rewrite, not a later
 * fdatasync of the same file, ends the failure: after a failed sync the
 * kernel may have dropped those pages and reports it only once. */
int journal_writable(struct journal *j, struct kv *kv);

/* Rewrite the file from kv's live state if it has grown past the
 * compaction threshold.  Errors are logged; the old file stays. */
void journal_maybe_compact(struct journal *j, struct kv *kv);

/* Finish a background compaction whose child has exited (non-blocking;
 * called from the server's loop).  Errors are logged; the old file stays. */
void journal_compact_poll(struct journal *j);

/* Apply one record's payload to kv (replay; also the fuzz target's entry).
 * FCCL_OK, FCCL_ERR_PROTOCOL (malformed payload) or kv's error. */
int journal_apply(struct kv *kv, const uint8_t *p, uint64_t n);

/* Rewrite the file from kv's live state now, in the caller's thread
 * (FILE.tmp, fdatasync, rename).  FCCL_OK or FCCL_ERR_IO; the old file
 * stays on failure. */
int journal_rewrite(struct journal *j, struct kv *kv);

/* journal_replay.c: replay j's open file of n bytes (magic checked) into
 * kv, as journal_open says; sets j->size and j->records_replayed. */
int journal_replay_file(struct journal *j, struct kv *kv, uint64_t n,
                        int recover);

/* The offset of the first valid record (header, CRC and payload fields)
 * in b[from..n), or n if there is none (what a recovering replay skips
 * to). */
uint64_t journal_resync(const uint8_t *b, uint64_t n, uint64_t from);

/* Replay the records in b[0..n) (the file after its magic) into kv,
 * stopping at the first torn or corrupt one; returns the length of the good
 * prefix, *why (NULL if all of b was good) says why it stopped, *records
 * is increased by the records applied.  name labels log lines. */
uint64_t journal_replay(struct kv *kv, const uint8_t *b, uint64_t n,
                        const char *name, const char **why,
                        uint64_t *records);

#endif
