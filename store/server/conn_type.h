/*
 * A server connection's byte transport: the few things a plain socket and
 * a TLS session do differently, as a table of operations, so that the
 * connection itself (server_conn.c: parsing, back-pressure, closing;
 * conn_reply.c: batching; conn_out.c: holding for the group commit)
 * never asks which one it has.
 *
 * Both are libevent bufferevents on the output side (c->bev, whose output
 * the connection fills and whose EV_WRITE it enables when bytes wait
 * there) and feed c->in on the input side.  They differ in who touches
 * the socket:
 *   conn_plain.c  we read the socket ourselves (64 KiB reads, large values
 *                 straight into their own buffer) and send() replies at
 *                 once while nothing is queued;
 *   conn_tls.c    a bufferevent_openssl reads and writes everything.
 * Every connection starts plain.  With TLS configured its first byte picks
 * the transport once (conn_tls_sniff): 0x16, a handshake record, hands
 * the socket to OpenSSL on the same port.
 */
#ifndef FCCL_STORE_CONN_TYPE_H
#define FCCL_STORE_CONN_TYPE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct bufferevent;
struct evbuffer;
struct store_conn;

struct conn_type {
    const char *name; /* in log lines: "plain", "TLS" */
    int encrypted;    /* counted in STATS as connections_tls */
    /* Start or stop delivering request bytes (back-pressure, a listing,
     * closing). */
    void (*reads)(struct store_conn *c, int on);
    /* Nothing is queued: write what the socket takes of p[0..n) now.  The
     * bytes taken (0: none, the caller queues them all), or -1 with errno
     * when the peer is gone. */
    ssize_t (*write_now)(struct store_conn *c, const uint8_t *p, size_t n);
    /* Read up to `want` more bytes of a large request into c->in now: the
     * bytes read, 0 when none (or when the transport reads on its own), or
     * -1 with errno.  EOF is left for the transport's read path. */
    ssize_t (*read_more)(struct store_conn *c, size_t want);
    /* Keep queued output off the socket until the connection enables
     * EV_WRITE again: 1, or 0 if this transport must go on writing. */
    int (*hold)(struct store_conn *c);
    /* The output buffer was emptied onto the socket. */
    void (*drained)(struct store_conn *c);
    /* Why the connection failed, for the log; NULL if there is nothing to
     * say beyond "connection ended". */
    const char *(*error)(struct store_conn *c);
    /* Free what the transport holds: its bufferevent (closing the socket
     * unless keep_socket), its read event and input buffer. */
    void (*release)(struct store_conn *c, int keep_socket);
};

/* ---- the transports ---- */

/* Make c a plain connection on fd (conn_plain.c): its bufferevent, input
 * buffer and read event, reading on.  FCCL_OK, or FCCL_ERR_NOMEM with fd
 * closed and nothing left to free. */
int conn_plain_open(struct store_conn *c, int fd);

/* c is in CONN_SNIFF (conn_tls.c): look at its first byte.  0 when c stays
 * plain and may be read now; 1 when there is nothing to read yet, or c was
 * handed to TLS or closed (tls-required). */
int conn_tls_sniff(struct store_conn *c);

/* ---- what the transports call (server_conn.c) ---- */

/* Bytes for c: fresh[0..n) just read (n may be 0 when they are in c->in
 * already).  Runs what is complete, sends the replies.  May free c. */
void store_conn_input(struct store_conn *c, const uint8_t *fresh, size_t n);
/* The peer closed its side: flush what is queued (bounded), or free c. */
void store_conn_eof(struct store_conn *c);
/* Switch c to transport ct, now owning the socket through bev and reading
 * into in; the old transport lets go of everything but the socket. */
void store_conn_set_transport(struct store_conn *c,
                              const struct conn_type *ct,
                              struct bufferevent *bev, struct evbuffer *in);
/* The bufferevent callbacks of the output side, for every transport. */
void store_conn_on_write(struct bufferevent *bev, void *arg);
void store_conn_on_event(struct bufferevent *bev, short what, void *arg);

#endif
