/*
 * Internals shared by the server's event-loop glue (server.c) and its
 * command dispatch (server_ops.c).  Not installed, not for other modules.
 */
#ifndef FCCL_STORE_SERVER_INT_H
#define FCCL_STORE_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "codec.h"
#include "kv.h"
#include "server.h"
#include "waiters.h"

struct bufferevent;
struct evbuffer;

#define STORE_READ_CHUNK (64u << 10) /* bytes per read of a socket */

struct store_conn {
    struct store_server *s;
    struct bufferevent *bev; /* owns the socket; output side */
    struct evbuffer *in;     /* bytes of incomplete requests */
    struct event *rev;       /* the socket's read event */
    int fd;
    struct store_conn *prev, *next; /* the server's list of connections */
    enum store_dialect dialect;
    size_t need;        /* buffered bytes needed before parsing again */
    uint64_t reserved;  /* bytes of s->inflight held for a large request */
    struct waiter *wait; /* the pending WAIT, if any */
    uint8_t paused;  /* reads stopped: replies pile up unread */
    uint8_t closing; /* EOF seen: flush what is queued, then free */
    uint8_t broken;  /* send failed: drop output, free at the next event */
    uint8_t tls;     /* bev is a bufferevent_openssl; in is its input */
    uint8_t peeked;  /* first byte looked at (TLS configured only) */
    char addr[64];   /* "HOST:PORT" of the client, for log lines */
};

struct store_server {
    struct store_server_config cfg;
    struct codec_limits lim;
    struct event_base *base;
    struct evconnlistener *lis[2];
    int nlis;
    struct event *stop_ev, *sig_int, *sig_term, *join_timer, *accept_timer;
    int stop_pipe[2];
    int port;
    char address[300];
    struct kv kv;
    struct waiters ws;
    struct store_conn *conns;
    uint64_t nconns;
    uint64_t inflight; /* bytes promised to large partial requests */
    struct store_conn *cur; /* connection whose requests are being run */
    struct codec_buf out;   /* replies of `cur`, sent at the end of a batch */
    uint8_t rbuf[STORE_READ_CHUNK]; /* each read lands here first */
    struct ssl_ctx_st *tls; /* SSL_CTX when TLS is configured */
    _Atomic int64_t joined; /* read by store_server_joined from any thread */
    int join_armed;
    atomic_int running;
    int thread_started;
    pthread_t thread;
};

/* ---- server_conn.c ---- */

/* Serve a freshly accepted socket (non-blocking, TCP_NODELAY set); `addr`
 * names the peer in log lines.  On failure the socket is closed and
 * FCCL_ERR_NOMEM returned. */
int store_conn_new(struct store_server *s, int fd, const char *addr);

/* Cancel c's wait, close its socket and free it. */
void store_conn_free(struct store_conn *c);

/* Queue reply bytes for c, in order: batched for the current connection,
 * sent at once (or buffered) for others.  Never fails the caller: a
 * connection whose output cannot be kept is marked broken. */
void store_conn_reply(struct store_conn *c, const void *p, size_t n);

/* Log why and disconnect c at its next event (safe while another
 * connection's request runs). */
void store_conn_abort(struct store_conn *c, const char *why);

/* ---- server_listen.c ---- */

/* Bind and listen on host:port ("" = all interfaces, IPv4 and IPv6) with
 * the kernel's largest backlog.  fds[0..*n) are non-blocking, close-on-exec
 * listening sockets; *port_out the bound port.  FCCL_OK or FCCL_ERR_IO. */
int store_listen_open(const char *host, int port, int fds[2], int *n,
                      int *port_out);

struct sockaddr;
/* "IP:PORT" / "[IP6]:PORT" of a peer, for log lines. */
void store_format_peer(const struct sockaddr *sa, char *out, size_t outlen);

/* ---- server_tls.c ---- */

/* Build the SSL_CTX from tls-cert/tls-key (and tls-ca) if configured.
 * FCCL_OK or FCCL_ERR_AUTH naming the file and OpenSSL's reason. */
int store_tls_setup(struct store_server *s);
void store_tls_teardown(struct store_server *s);
/* 1 if the next byte on fd is a TLS handshake record, 0 if not (or EOF),
 * -1 if no byte is there yet. */
int store_tls_peek(int fd);
/* A server-side bufferevent_openssl on fd (closes fd when freed), or NULL. */
struct bufferevent *store_tls_bufferevent(struct store_server *s, int fd);
/* Why a TLS connection failed (OpenSSL's queue, else errno). */
const char *store_tls_conn_error(struct bufferevent *bev);

/* ---- server_ops.c ---- */

/* Run one parsed request for c.  FCCL_OK, or a negative status whose
 * message (fccl_last_error) says why c must be closed. */
int store_dispatch(struct store_server *s, struct store_conn *c,
                   const struct codec_req *req);

/* waiters.on_ready: c's WAIT completed; send STOP_WAITING. */
void store_conn_wait_ready(struct store_conn *c);

/* waiters.on_fail: c's WAIT was dropped (out of memory); disconnect c. */
void store_conn_wait_failed(struct store_conn *c);

#endif
