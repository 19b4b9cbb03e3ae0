/*
 * torchq.h: what the files of fccl.torch's queue share (internal to the
 * extension; see torchq.c for how the queue works).
 */
#ifndef FCCLPY_TORCHQ_H
#define FCCLPY_TORCHQ_H

#include "fcclpy.h"
#include "torchq_abi.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* enum tq_op: torchq_abi.h */

extern const char *const tq_op_names[TQ_NUM_OPS]; /* "all_reduce", ... */

#define MB_TAG 0x7ffffff0 /* monitored_barrier's messages */
#define POLL_MIN_NS 20000L
#define POLL_MAX_NS 1000000L

typedef void (*complete_fn)(void *work, int rc, const char *msg, int src);

/* A message that arrived for a cancelled receive from any source. */
typedef struct stash {
    struct stash *next;
    int peer, tag;
    size_t len;
    void *data;
} stash;

/* One queued operation. */
typedef struct item {
    struct item *next;
    void *work;              /* retained FcclWork, completed once */
    int p2p;
    fccl_request_t *req;     /* NULL for a receive from any source */
    int peer, tag;           /* p2p: group rank (-1: any source) */
    uint64_t start_ns, deadline_ns; /* p2p */
    char what[256];
    /* receive from any source */
    int nany;
    fccl_request_t **any;
    void **anybuf;
    int *anypeer;
    void *dst;
    size_t len;
} item;

/* A queue: the Python object TorchQueue. */
typedef struct {
    PyObject_HEAD
    fccl_group_t *g;
    int owned;               /* made by fccl_group_new: destroyed by close */
    int rank, size;
    pthread_mutex_t lock;
    pthread_cond_t cv;       /* new submissions, stop */
    item *head, *tail;
    int np2p;                /* queued p2p items */
    pthread_t thread;
    int started, stop, closed;
    pthread_t waiter;        /* see waiter() in torchq.c */
    int waiter_started;
    item *waiting;           /* the item waiter() is in fccl_wait for */
    int failed;              /* sticky */
    char failmsg[1000];
    stash *stash;
    complete_fn complete;
    size_t inline_bytes;
    int64_t timeout_ms;
    char name[128];          /* "group 'ID' (fccl name)" for messages */
} tq;

/* An operation that ended, its Work to complete outside the lock. */
typedef struct {
    item *it;
    int rc, src;
    char msg[1600]; /* failure text, when rc < 0 */
} ended;

/* ---- torchq.c ---- */
uint64_t tq_now_ns(void);
struct timespec tq_abs_in(long ns);
/* Start (or run inline) a collective / post a send or receive; the GIL
 * released.  FCCL_OK, or FCCL_ERR_INVALID (the Work failed too). */
typedef struct {
    int op;
    void *sbuf, *rbuf;
    size_t count;
    fccl_dtype_t dtype;
    fccl_redop_t redop;
    int root;
    size_t *c1, *c2; /* per-rank counts of the _v forms */
} coll_args;
int tq_submit_coll(tq *q, void *work, const coll_args *a);
int tq_submit_p2p(tq *q, void *work, int is_send, void *buf, size_t count,
                  fccl_dtype_t dt, int peer, int tag);
/* Cancel queued p2p, wait for queued collectives, stop the threads. */
void tq_stop(tq *q);

/* ---- torchq_p2p.c ---- */
/* A message kept aside for (peer, tag) (peer < 0: any), or NULL; the
 * caller frees it and its data.  Under the lock. */
stash *tq_stash_take(tq *q, int peer, int tag);
void tq_stash_free_all(tq *q);
/* Test an any-source receive: 1 when finished (*rc, *src set), else 0.
 * Under the lock. */
int tq_any_test(tq *q, item *it, int *rc, int *src);
void tq_any_cancel(item *it);
/* monitored_barrier(timeout_ms, wait_all) of the Python type. */
PyObject *tq_monitored_barrier(tq *q, PyObject *args);

/* ---- torchq_py.c ---- */
/* (fpy_torchq_add_types, fpy_torchq_methods: fcclpy.h) */

#endif
