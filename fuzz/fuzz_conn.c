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
#include <stdint.h>
#include <string.h>

#include "fuzz_server.h"

static struct store_server *srv;

static void setup(void)
{
    struct store_server_config c;
    fuzz_server_config(&c, 4u << 20); /* large-value path from 1 MiB */
    ASSERT(fccl_server_create(&c, &srv) == 0);
    /* Reach the large-value and lent-reply paths with small inputs. */
    srv->big_value_min = 200;
    srv->lend_min = 100;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        setup();
    if (size < 1)
        return 0;
    int fd = fuzz_client(srv, "10.0.0.1:1");
    size_t piece = data[0] & 0x80 ? 1 : 1 + (data[0] & 0x7F) * 37u;
    fuzz_feed(srv, fd, data + 1, size - 1, piece);
    fuzz_close_and_check(srv, fd);
    return 0;
}
