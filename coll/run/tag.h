/*
 * Internal: message tags of the collective engine.
 *
 * Tags (TP_TAG_BITS = 60): ctx (20 bits) | seq (24 bits) | step (16 bits).
 * Collectives keep bit 23 of the seq field clear (seq counts modulo 2^23);
 * point-to-point messages set it and put the user's tag in the 39 bits
 * below, so a user message can never match a collective's and vice versa.
 * Within one collective the step field only has to tell apart the
 * messages that flow between the same ordered pair of ranks.
 */
#ifndef FCCL_COLL_TAG_H
#define FCCL_COLL_TAG_H

#include <stdint.h>

#define COLL_CTX_BITS 20
#define COLL_SEQ_BITS 24
#define COLL_STEP_BITS 16
#define COLL_SEQ_MASK ((1u << (COLL_SEQ_BITS - 1)) - 1) /* 23 usable bits */
#define COLL_P2P_BIT (1ull << (COLL_STEP_BITS + COLL_SEQ_BITS - 1))
#define COLL_P2P_TAG_MAX (COLL_P2P_BIT - 1)
#define COLL_STEP_MAX (1u << COLL_STEP_BITS)

static inline uint64_t coll_tag_base(uint32_t ctx, uint32_t seq)
{
    return ((uint64_t)(ctx & ((1u << COLL_CTX_BITS) - 1))
            << (COLL_SEQ_BITS + COLL_STEP_BITS)) |
           ((uint64_t)(seq & COLL_SEQ_MASK) << COLL_STEP_BITS);
}

static inline uint64_t coll_p2p_tag(uint32_t ctx, int user_tag)
{
    return coll_tag_base(ctx, 0) | COLL_P2P_BIT | (uint64_t)(uint32_t)user_tag;
}

#endif
