/*
 * The read-modify-write calls on etcd (ADD, APPEND, COMPARE_SET), as pure
 * functions of the value read: what to write back and what to answer.
 * The client and the front-end both run them inside the same optimistic
 * transaction (read, then write if the key's mod revision is still the
 * one read; etcd has no atomic add), so both give tcpstore-server's
 * results: counters are decimal text, ADD of a value that is not one is
 * refused, COMPARE_SET follows PyTorch.
 */
#ifndef FCCL_STORE_ETCD_RMW_H
#define FCCL_STORE_ETCD_RMW_H

#include <stddef.h>
#include <stdint.h>

enum ermw_kind { ERMW_ADD, ERMW_APPEND, ERMW_CAS };

struct ermw_in {
    enum ermw_kind kind;
    int64_t delta;              /* ADD */
    const uint8_t *val;         /* APPEND: the bytes; CAS: expected */
    size_t vlen;
    const uint8_t *desired;     /* CAS */
    size_t dlen;
};

struct ermw_out {
    int write;          /* 1: put nv */
    uint8_t *nv;        /* malloc'd new value (write), or NULL */
    size_t nvlen;
    int64_t num;        /* ADD: the new counter */
    /* CAS: the reply (the value stored afterwards, or expected); points
     * into nv, the current value or the input */
    const uint8_t *reply;
    size_t rlen;
};

/* Decide for current value cur[0..clen) (present: the key exists).
 * FCCL_OK; FCCL_ERR_INVALID (ADD on a value that is not a decimal
 * integer; the message quotes it); FCCL_ERR_NOMEM. */
int ermw_apply(const struct ermw_in *in, int present, const uint8_t *cur,
               size_t clen, struct ermw_out *out);
void ermw_out_free(struct ermw_out *o);

#endif
