/*
 * libFuzzer target: journal replay (store/server/journal.c).  Input: the
 * records of a journal file after its magic, with valid CRCs patched in
 * for a part of them (byte 0 says which) so the fuzzer reaches the payload
 * decoder, not only the checksum.  Checked on every input:
 *  - the good prefix lies within the input and replaying it alone again
 *    reports no tear and the same length;
 *  - the table's byte count matches its values and queued items;
 *  - resynchronising past the first bad record (what --journal-recover
 *    does) lands within the input, on a record that replays;
 *  - nothing reads outside the buffer (ASan) or overflows (UBSan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec.h"
#include "fuzz.h"
#include "journal.h"
#include "kv.h"
#include "log.h"

/* Walk the records and write the right CRC into those bit i of mask picks. */
static void patch_crcs(uint8_t *b, size_t n, uint8_t mask)
{
    size_t off = 0;
    for (int i = 0; off + JOURNAL_HDR <= n; i++) {
        uint64_t len = codec_get_u32(b + off);
        if (len > n - off - JOURNAL_HDR)
            return;
        if (mask & (1u << (i & 7)))
            codec_set_u32(b + off + 4,
                          journal_crc32(0, b + off + JOURNAL_HDR, len));
        off += JOURNAL_HDR + len;
    }
}

static uint64_t chain_bytes(const struct kv_entry *e)
{
    uint64_t sum = 0;
    for (; e; e = e->next) {
        if (e->has_val)
            sum += e->klen + e->vlen;
        for (const struct kv_item *it = e->qhead; it; it = it->next)
            sum += it->len;
    }
    return sum;
}

/* Keys and values of set keys plus queued values, as kv.h counts them. */
static uint64_t counted_bytes(const struct kv *kv)
{
    uint64_t sum = 0;
    for (uint64_t i = 0; i <= kv->mask; i++)
        sum += chain_bytes(kv->buckets[i]);
    for (uint64_t i = kv->moved; kv->old && i <= kv->old_mask; i++)
        sum += chain_bytes(kv->old[i]);
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fccl_log_set_level(FCCL_LOG_ERROR);
    size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return 0;
    memcpy(b, data + 1, n);
    patch_crcs(b, n, data[0]);
    struct kv kv;
    ASSERT(kv_init(&kv, 0) == 0);
    const char *why;
    uint64_t recs = 0;
    uint64_t good = journal_replay(&kv, b, n, "fuzz", &why, &recs);
    ASSERT(good <= n);
    ASSERT((why == NULL) == (good == n));
    ASSERT(counted_bytes(&kv) == kv.bytes);
    kv_free(&kv);
    ASSERT(kv_init(&kv, 0) == 0);
    uint64_t recs2 = 0;
    ASSERT(journal_replay(&kv, b, good, "fuzz", &why, &recs2) == good);
    ASSERT(why == NULL && recs2 == recs);
    if (good < n) {
        uint64_t next = journal_resync(b, n, good + 1);
        ASSERT(next > good && next <= n);
        if (next < n)
            ASSERT(journal_replay(&kv, b + next, n - next, "fuzz", &why,
                                  &recs2) > 0);
    }
    kv_free(&kv);
    free(b);
    return 0;
}
