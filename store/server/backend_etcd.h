/*
 * tcpstore-server --backend etcd://...: the TCPStore protocol served with
 * all state in etcd, so several servers can front one job and the state
 * outlives any of them (README "High availability").
 *
 * The event loop never waits on etcd: every etcd request is a curl easy
 * handle on one multi handle driven by libevent (CURLMOPT_SOCKETFUNCTION
 * and CURLMOPT_TIMERFUNCTION), and every TCPStore request becomes a
 * `struct be_op`, a small state machine whose steps are etcd requests.
 * A connection's ops sit in a queue in arrival order and their replies
 * go out in that order, whichever finishes first.
 *
 * The etcd key of wire key K is PREFIX K (the same key the etcd:// client
 * uses), counters are decimal text, queues and receipts live under
 * PREFIX "\0" (etcd_keys.h).
 *
 * Module map, top down:
 *   backend_ops.c   one handler per request type, and the entry that
 *                   queues a request with its handler (store_be_dispatch)
 *   backend_etcd.c  the multi handle on libevent, transfers with
 *                   failover between members, auth, the reply order
 * Each file calls only files below it in this list (the build checks it,
 * scripts/check-calls.sh): the transfer layer starts an op's handler
 * through op->run, given when the op was queued, as it continues an op
 * through the `next` step each request names.
 */
#ifndef FCCL_STORE_BACKEND_ETCD_H
#define FCCL_STORE_BACKEND_ETCD_H

#include <stdint.h>

#include <json-c/json.h>

#include "codec.h"
#include "etcd_http.h"
#include "etcd_keys.h"
#include "etcd_rmw.h"

#include "server_names.h" /* struct store_server = fccl/server.h's */

struct store_server;
struct store_conn;
struct be_op;
struct be_xfer;

/* ---- for the rest of the server ---- */

/* Open the backend named by s->cfg.backend (authenticating, checking a
 * member answers).  FCCL_OK without one; FCCL_ERR_INVALID, _CONNECT,
 * _AUTH naming the cause. */
int store_be_open(struct store_server *s);
void store_be_close(struct store_server *s);
/* Run request r of c on etcd (instead of the in-memory table).  FCCL_OK,
 * or a negative status when c must be closed now. */
int store_be_dispatch(struct store_server *s, struct store_conn *c,
                      const struct codec_req *r);
/* c is going: drop its ops and their transfers. */
void store_be_conn_gone(struct store_conn *c);
/* STATS lines of the backend. */
void store_be_stats(struct store_server *s, struct codec_buf *b);

/* ---- between the two files ---- */

#define BE_OP_MS 30000    /* an op's etcd requests, all told */
#define BE_WATCH_SLICE_MS 5000
#define BE_UNCERTAIN 1    /* be_next rc: a write's reply was lost */

typedef void (*be_next)(struct be_op *op, int rc, json_object *rep);

struct be_watch {
    int found, canceled;
    struct ej_kv kv;
};

struct be_op {
    struct store_server *s;
    struct store_conn *c;
    struct be_op *next;     /* the connection's queue */
    enum store_op kind;
    int done, fatal;        /* fatal: close c when it reaches the head */
    int started;            /* run called: it is the head, or a
                               CANCEL_WAIT (which acts on the head) */
    void (*run)(struct be_op *op); /* its handler (backend_ops.c) */
    int quiet;              /* a write without a reply (SYNC reports) */
    struct codec_buf out;   /* the reply */
    struct ek_key key;      /* PREFIX + the wire key */
    uint8_t *val, *val2;
    size_t vlen, v2len;
    int64_t num;
    struct ek_key *keys;    /* multi-key ops */
    uint8_t **vals;
    size_t *vlens;
    size_t nkeys, at;
    int64_t rev;
    uint64_t deadline;      /* of its etcd requests (not of a WAIT) */
    /* read-modify-write */
    struct ermw_in rin;
    struct ermw_out rout;
    struct ej_kv cur;
    int present, known, tries;
    uint64_t seq;
    /* after a lost reply: what the receipt decides */
    void (*r_yes)(struct be_op *op), (*r_no)(struct be_op *op);
    struct be_xfer *x[2];   /* transfers in flight (a WAIT has two) */
    struct be_watch w[2];
};

/* Send req (taken) to path for op: next(op, rc, reply) runs once it is
 * answered (FCCL_OK, reply put by be_xfer_done's caller after next), or
 * failed for good (a status, message set), or, for a request that must
 * not be repeated, lost (BE_UNCERTAIN).  slot 0 or 1; stream: a watch. */
void be_send(struct be_op *op, int slot, const char *path, json_object *req,
             int repeatable, int stream, be_next next);
/* Stop op's transfer in slot (a WAIT's other watch, a cancel). */
void be_cancel(struct be_op *op, int slot);
/* Send c's replies that are due, in order (a SYNC at the head is
 * answered now). */
void be_flush(struct store_conn *c);
/* op has its reply in op->out (or none): send what is due, in order. */
void be_op_done(struct be_op *op);
/* op failed: with c closed when its turn comes (not quiet), or the
 * refusal kept for SYNC (quiet). */
void be_op_fail(struct be_op *op, int rc);
/* The receipt key of this server, and the next sequence number. */
struct ek_key be_receipt_key(struct store_server *s);
uint64_t be_next_seq(struct store_server *s);
const struct etcd_conf *be_conf(struct store_server *s);
/* PREFIX + p[0..n) */
struct ek_key be_key(struct store_server *s, const void *p, size_t n);

/* Queue r as an op of c's (its fields filled from the request) whose
 * handler is run, started when it reaches the head of c's queue
 * (CANCEL_WAIT at once).  FCCL_ERR_LIMIT past the ops one connection may
 * have in flight, FCCL_ERR_NOMEM. */
int be_queue(struct store_server *s, struct store_conn *c,
             const struct codec_req *r, void (*run)(struct be_op *op));
/* CANCEL_WAIT: stop c's pending WAIT/BARRIER op, if any (it ends with no
 * reply). */
void be_cancel_waits(struct store_conn *c);

#endif
