/*
 * The in-process server harness that fuzz_conn.c and fuzz_auth.c share:
 * the small limits both start their server with, feeding an input to one
 * connection piece by piece with a non-blocking loop turn after each, and
 * the check once its client end is closed.  The server is never run as a
 * thread: the targets turn its event loop by hand.
 */
#ifndef FCCL_FUZZ_SERVER_H
#define FCCL_FUZZ_SERVER_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "server_int.h"

/* Loopback, an ephemeral port, errors-only logging, and limits small
 * enough that a fuzzer reaches each of them; `max_value` is the target's. */
static inline void fuzz_server_config(struct store_server_config *c,
                                      uint64_t max_value)
{
    fccl_server_opts_init(c);
    strcpy(c->host, "127.0.0.1");
    c->port = 0;
    c->max_key = 64;
    c->max_value = max_value;
    c->max_keys_per_req = 16;
    c->max_total_bytes = 8u << 20;
    c->log_level = 0;
}

/* A new connection of `srv` at `addr` ("IP:PORT"); returns the client's
 * end of the socketpair, non-blocking. */
static inline int fuzz_client(struct store_server *srv, const char *addr)
{
    int sv[2];
    ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    ASSERT(store_conn_new(srv, sv[0], addr) == 0);
    return sv[1];
}

/* Read and drop whatever the server has sent to `fd` (non-blocking). */
static inline void fuzz_drain(int fd)
{
    uint8_t buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

/* p[0..left) into `fd` in pieces of `piece` bytes, a loop turn and a drain
 * after each, until it is all written or the server has closed it. */
static inline void fuzz_feed(struct store_server *srv, int fd,
                             const uint8_t *p, size_t left, size_t piece)
{
    while (left > 0) {
        size_t n = left < piece ? left : piece;
        ssize_t w = write(fd, p, n);
        if (w <= 0) {
            ASSERT(errno == EAGAIN || errno == EPIPE || errno == ECONNRESET);
            if (errno != EAGAIN)
                break; /* the server closed this client */
            w = 0;
        }
        p += w;
        left -= (size_t)w;
        event_base_loop(srv->base, EVLOOP_NONBLOCK);
        fuzz_drain(fd);
        if (srv->nconns == 0)
            break;
    }
}

/* Close the client end, turn the loop until the connection is gone, and
 * check that nothing is left counted as held or queued. */
static inline void fuzz_close_and_check(struct store_server *srv, int fd)
{
    close(fd);
    for (int i = 0; i < 1000 && srv->nconns > 0; i++)
        event_base_loop(srv->base, EVLOOP_NONBLOCK);
    ASSERT(srv->nconns == 0);
    ASSERT(srv->held == 0);
    ASSERT(srv->out_held == 0);
}

#endif
