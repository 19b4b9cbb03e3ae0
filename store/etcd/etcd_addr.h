/*
 * etcd store addresses: etcd://HOST:PORT[,HOST:PORT...][/PREFIX], or
 * etcds:// for TLS.  The members are tried in the order given; PREFIX is
 * the start of every etcd key the store writes (with its leading "/",
 * trailing "/"s dropped), so "etcd://h:2379/jobs/a" keeps the TCPStore
 * key "/x" at the etcd key "/jobs/a/x".
 */
#ifndef FCCL_STORE_ETCD_ADDR_H
#define FCCL_STORE_ETCD_ADDR_H

#include <stddef.h>

#define ETCD_EP_MAX 16    /* members in one address */
#define ETCD_PREFIX_MAX 1024

struct etcd_ep {
    char host[256];
    int port;
    char base[300]; /* "http://HOST:PORT" or "https://[V6]:PORT" */
};

struct etcd_target {
    int tls;
    int n;
    struct etcd_ep ep[ETCD_EP_MAX];
    char prefix[ETCD_PREFIX_MAX]; /* NUL-terminated; may be "" */
    size_t prefixlen;
};

/* 1 if addr names an etcd store (etcd:// or etcds://). */
int etcd_is_addr(const char *addr);

/* Parse addr into t.  FCCL_OK, or FCCL_ERR_INVALID naming what is wrong
 * (no member, a bad HOST:PORT, too many members, a prefix too long). */
int etcd_addr_parse(const char *addr, struct etcd_target *t);

#endif
