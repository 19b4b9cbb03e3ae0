/*
 * Store client: waiting on a socket with a deadline (below TLS and the
 * plain receive alike).
 */
#include <errno.h>
#include <poll.h>

#include "client_int.h"
#include "clock.h"
#include "err.h"

int sc_wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, fccl_ms_left(deadline));
        if (r > 0)
            return FCCL_OK;
        if (r == 0)
            return fccl_err(FCCL_ERR_TIMEOUT, "no reply before the deadline");
        if (errno != EINTR)
            return fccl_err_sys(FCCL_ERR_IO, errno, "poll");
    }
}
