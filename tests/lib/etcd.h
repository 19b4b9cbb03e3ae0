/*
 * etcd.h: an etcd cluster of 1 to 3 members on loopback for one test
 * (part of libtesthelp.a).  Free ports, data in a temporary directory,
 * every member killed with the test process (PR_SET_PDEATHSIG) and the
 * directory removed by etcd_cluster_stop.  No Criterion here: calls report
 * failure by their return value.
 */
#ifndef FCCL_TESTS_LIB_ETCD_H
#define FCCL_TESTS_LIB_ETCD_H

#include <sys/types.h>

#define ETCD_CL_MAX 3

struct etcd_cluster {
    int n;
    char dir[128];
    pid_t pid[ETCD_CL_MAX];
    int cport[ETCD_CL_MAX], pport[ETCD_CL_MAX];
    char endpoints[256]; /* "127.0.0.1:P1,127.0.0.1:P2,..." (etcdctl) */
    char addr[320];      /* "etcd://" (or "etcds://") endpoints */
    char tlsargs[700];   /* etcdctl's TLS flags, "" without TLS */
};

/* TLS on the members' client URLs (etcd's --cert-file, --key-file and,
 * with ca, --client-cert-auth --trusted-ca-file). */
struct etcd_tls {
    const char *cert, *key, *ca;
};

/* Start n members (with these extra etcd arguments each, or NULL) and
 * wait until the cluster answers (20 s).  0, or -1 with the reason on
 * stderr (and nothing left running). */
int etcd_cluster_start(struct etcd_cluster *c, int n,
                       const char *const *extra);
/* The same with TLS (tls not NULL): addr is then "etcds://...". */
int etcd_cluster_start_tls(struct etcd_cluster *c, int n,
                           const char *const *extra,
                           const struct etcd_tls *tls);

/* SIGKILL member i (it stays dead). */
void etcd_cluster_kill(struct etcd_cluster *c, int i);

/* Index of the member that leads now, or -1. */
int etcd_cluster_leader(const struct etcd_cluster *c);

/* Run `etcdctl --endpoints=... ARGS` (ARGS a shell fragment); its exit
 * status, output into *out (malloc'd) when out is not NULL. */
int etcd_cluster_ctl(const struct etcd_cluster *c, const char *args,
                     char **out);

/* Kill every member and remove the data directory. */
void etcd_cluster_stop(struct etcd_cluster *c);

#endif
