#include "net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

int fccl_addr_parse(const char *addr, char *host, size_t hostlen, int *port)
{
    if (!addr || !*addr)
        return fccl_err(FCCL_ERR_INVALID, "empty address");
    const char *h = addr, *colon;
    size_t hl;
    if (addr[0] == '[') {
        const char *rb = strchr(addr, ']');
        if (!rb || rb[1] != ':')
            return fccl_err(FCCL_ERR_INVALID,
                            "address '%s': expected [IPV6]:PORT", addr);
        h = addr + 1;
        hl = (size_t)(rb - h);
        colon = rb + 1;
    } else {
        colon = strrchr(addr, ':');
        if (!colon)
            return fccl_err(FCCL_ERR_INVALID,
                            "address '%s': expected HOST:PORT", addr);
        if (memchr(addr, ':', (size_t)(colon - addr)))
            return fccl_err(FCCL_ERR_INVALID,
                            "address '%s': write IPv6 as [ADDR]:PORT", addr);
        hl = (size_t)(colon - addr);
    }
    if (hl == 0 || hl >= hostlen)
        return fccl_err(FCCL_ERR_INVALID, "address '%s': bad host", addr);
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || errno || p < 0 || p > 65535)
        return fccl_err(FCCL_ERR_INVALID, "address '%s': bad port", addr);
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (int)p;
    return FCCL_OK;
}

void fccl_addr_format(char *out, size_t outlen, const char *host, int port)
{
    if (strchr(host, ':'))
        snprintf(out, outlen, "[%s]:%d", host, port);
    else
        snprintf(out, outlen, "%s:%d", host, port);
}

int fccl_bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = events};
        int ms = fccl_ms_left(deadline);
        if (ms == 0)
            return FCCL_ERR_TIMEOUT;
        int r = poll(&p, 1, ms);
        if (r > 0)
            return FCCL_OK;
        if (r == 0)
            return FCCL_ERR_TIMEOUT;
        if (errno != EINTR)
            return fccl_err_sys(FCCL_ERR_IO, errno, "poll");
    }
}

/* wait_fd for the full-transfer loops: a timeout named by `what`. */
static int wait_more(int fd, short events, uint64_t deadline,
                     const char *what)
{
    int rc = wait_fd(fd, events, deadline);
    if (rc == FCCL_ERR_TIMEOUT)
        return fccl_err(rc, "%s timed out", what);
    return rc;
}

/* Non-blocking connect so the deadline bounds it, then back to blocking. */
static int connect_one(const struct addrinfo *ai, uint64_t deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC |
                                       SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "socket");
    int rc = FCCL_OK;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            rc = fccl_err_sys(FCCL_ERR_CONNECT, errno, "connect");
            goto fail;
        }
        rc = wait_fd(fd, POLLOUT, deadline);
        if (rc < 0) {
            if (rc == FCCL_ERR_TIMEOUT)
                fccl_err(rc, "connect timed out");
            goto fail;
        }
        int soerr = 0;
        socklen_t sl = sizeof(soerr);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl);
        if (soerr) {
            rc = fccl_err_sys(FCCL_ERR_CONNECT, soerr, "connect");
            goto fail;
        }
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
fail:
    close(fd);
    return rc;
}

int fccl_addr_resolve(const char *host, int port, int passive, int err,
                      const char *what, struct fccl_resolved *out)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM,
                             .ai_family = AF_UNSPEC};
    if (passive)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    char portstr[16];
    snprintf(portstr, sizeof(portstr), "%d", port);
    fccl_addr_format(out->where, sizeof(out->where), host, port);
    out->res = NULL;
    int g = getaddrinfo(host, portstr, &hints, &out->res);
    if (g != 0)
        return fccl_err(err, "%s %s: %s", what, out->where, gai_strerror(g));
    return FCCL_OK;
}

int fccl_tcp_connect(const char *host, int port, uint64_t deadline)
{
    struct fccl_resolved r;
    int rc = fccl_addr_resolve(host, port, 0, FCCL_ERR_CONNECT, "resolve",
                               &r);
    if (rc < 0)
        return rc;
    rc = FCCL_ERR_CONNECT;
    for (struct addrinfo *ai = r.res; ai; ai = ai->ai_next) {
        rc = connect_one(ai, deadline);
        if (rc >= 0 || rc == FCCL_ERR_TIMEOUT)
            break;
    }
    freeaddrinfo(r.res);
    if (rc < 0)
        return fccl_err_wrap(rc, "%s", r.where);
    return rc;
}

int fccl_write_full(int fd, const void *buf, size_t len, uint64_t deadline)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_more(fd, POLLOUT, deadline, "send");
            if (rc < 0)
                return rc;
            continue;
        }
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET))
            return fccl_err_sys(FCCL_ERR_CLOSED, errno, "send");
        return fccl_err_sys(FCCL_ERR_IO, errno, "send");
    }
    return FCCL_OK;
}

int fccl_read_full(int fd, void *buf, size_t len, uint64_t deadline)
{
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return fccl_err(FCCL_ERR_CLOSED, "connection closed by peer");
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int rc = wait_more(fd, POLLIN, deadline, "receive");
            if (rc < 0)
                return rc;
            continue;
        }
        if (errno == ECONNRESET)
            return fccl_err_sys(FCCL_ERR_CLOSED, errno, "recv");
        return fccl_err_sys(FCCL_ERR_IO, errno, "recv");
    }
    return FCCL_OK;
}

/* The one loop of fccl_fd_write and fccl_fd_read: `wr` says which. */
static int fd_move(int fd, char *p, size_t len, int wr, uint64_t deadline)
{
    while (len) {
        if (!wr && wait_fd(fd, POLLIN, deadline) < 0)
            return -1;
        ssize_t n = wr ? write(fd, p, len) : read(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int fccl_fd_write(int fd, const void *buf, size_t len)
{
    return fd_move(fd, (char *)buf, len, 1, 0);
}

int fccl_fd_read(int fd, void *buf, size_t len, uint64_t deadline)
{
    return fd_move(fd, buf, len, 0, deadline);
}
