/*
 * libFuzzer target: one server connection's state
 * (store/server/server_conn.c and everything it drives: sniffing, parsing,
 * large values, dispatch, WAITs, SYNC, STATS, back-pressure) fed its bytes
 * in pieces.
 *
 * One in-process server (never run as a thread: this target turns its
 * event loop by hand) lives across inputs, with small limits so that every
 * limit is reachable.  Per input: a socketpair, one end served as a client
 * connection, the input's first byte chooses the piece size (1 byte at a
 * time, or more), the rest is written piece by piece, each followed by a
 * non-blocking loop turn; replies are read and dropped.  Then the client
 * end closes and the loop runs until the connection is gone.  Checked:
 * no crash or sanitizer report, and once every connection is gone nothing
 * is counted as held or queued, and the connection count is back to 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server_int.h"

#define ASSERT(c)                                                              \
    do {                                                                       \
        if (!(c))                                                              \
            abort();                                                           \
    } while (0)

static struct store_server *srv;

static void setup(void)
{
    struct store_server_config c;
    fccl_server_opts_init(&c);
    strcpy(c.host, "127.0.0.1");
    c.port = 0;
    c.max_key = 64;
    c.max_value = 4u << 20; /* large-value path from 1 MiB */
    c.max_keys_per_req = 16;
    c.max_total_bytes = 8u << 20;
    c.log_level = 0; /* errors only */
    ASSERT(fccl_server_create(&c, &srv) == 0);
    /* Reach the large-value and lent-reply paths with small inputs. */
    srv->big_value_min = 200;
    srv->lend_min = 100;
}

static void drain(int fd)
{
    uint8_t buf[65536];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
}

static void turn(int peer)
{
    event_base_loop(srv->base, EVLOOP_NONBLOCK);
    drain(peer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        setup();
    if (size < 1)
        return 0;
    int sv[2];
    ASSERT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0);
    ASSERT(store_conn_new(srv, sv[0], "10.0.0.1:1") == 0);
    size_t piece = data[0] & 0x80 ? 1 : 1 + (data[0] & 0x7F) * 37u;
    const uint8_t *p = data + 1;
    size_t left = size - 1;
    while (left > 0) {
        size_t n = left < piece ? left : piece;
        ssize_t w = write(sv[1], p, n);
        if (w <= 0) {
            ASSERT(errno == EAGAIN || errno == EPIPE || errno == ECONNRESET);
            if (errno != EAGAIN)
                break; /* the server closed this client */
            w = 0;
        }
        p += w;
        left -= (size_t)w;
        turn(sv[1]);
        if (srv->nconns == 0)
            break;
    }
    close(sv[1]);
    for (int i = 0; i < 1000 && srv->nconns > 0; i++)
        event_base_loop(srv->base, EVLOOP_NONBLOCK);
    ASSERT(srv->nconns == 0);
    ASSERT(srv->held == 0);
    ASSERT(srv->out_held == 0);
    return 0;
}
