/*
 * The stream of one etcd watch (POST /v3/watch through the gateway): one
 * JSON object a line, {"result": {...}} with events, or an error.  Fed
 * piece by piece from the reply buffer, it stops at the first PUT event
 * (deletes are not what a wait waits for) or at a cancel.
 */
#ifndef FCCL_STORE_ETCD_WATCH_H
#define FCCL_STORE_ETCD_WATCH_H

#include "etcd_http.h"
#include "etcd_json.h"

struct etcd_watch {
    int found;     /* kv holds the first PUT (caller frees it) */
    int canceled;  /* the watch was refused or canceled: why */
    struct ej_kv kv;
    char why[200];
};

/* An etcd_reply stream callback (arg: struct etcd_watch): consume the
 * whole lines of r; 1 (stop the transfer) once found or canceled. */
int etcd_watch_feed(struct etcd_reply *r, void *arg);

#endif
