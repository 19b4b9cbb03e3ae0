/*
 * torchq_abi.h: the one call fccl.torch's C++ process group
 * (fccl/torch/_work.cpp) makes into this extension, for its hot path
 * (small collectives on the calling thread, no Python in between).
 *
 * Plain C with no Python or fccl header, so that the C++ side includes
 * it alone.  The extension hands the function over in a capsule named
 * TQ_HOT_CAPSULE (attribute `torchq_hot` of fccl._fccl), and each
 * TorchQueue its queue in a capsule named TQ_QUEUE_CAPSULE (attribute
 * `handle`); the caller keeps the TorchQueue alive while it calls.
 */
#ifndef FCCLPY_TORCHQ_ABI_H
#define FCCLPY_TORCHQ_ABI_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TQ_HOT_CAPSULE "fccl.torchq_hot"
#define TQ_QUEUE_CAPSULE "fccl.torchq"

enum tq_op {
    TQ_BARRIER, TQ_BROADCAST, TQ_REDUCE, TQ_ALL_REDUCE, TQ_ALL_GATHER,
    TQ_ALL_GATHER_V, TQ_REDUCE_SCATTER, TQ_REDUCE_SCATTER_V, TQ_GATHER,
    TQ_SCATTER, TQ_ALL_TO_ALL, TQ_ALL_TO_ALL_V, TQ_NUM_OPS
};

/* A collective without per-rank counts (not the _v forms). */
typedef struct {
    int op;          /* enum tq_op */
    void *sbuf, *rbuf;
    size_t count;
    int dtype;       /* fccl_dtype_t */
    int redop;       /* fccl_redop_t */
    int root;
} tq_hot_args;

/* Run (inline when small and the queue is idle) or queue the collective
 * `a` on `queue`, completing `work` (a reference from the C++ side,
 * handed over) through the queue's complete function.  Call it without
 * the GIL.  Returns 0 when the Work is completed or queued (a failure of
 * the operation fails the Work, not the call); TQ_HOT_INVALID for a bad
 * argument, TQ_HOT_UNUSABLE for a process that cannot use fccl (forked,
 * not initialized): the Work is failed too and err holds the message. */
#define TQ_HOT_INVALID (-1)
#define TQ_HOT_UNUSABLE (-2)
typedef int (*tq_hot_fn)(void *queue, void *work, const tq_hot_args *a,
                         char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
