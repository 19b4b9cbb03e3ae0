/*
 * Listening sockets of the store server: bind and listen before the loop
 * runs, so the port is known (and connections queue in the kernel) as soon
 * as fccl_server_create returns.  "All interfaces" means two sockets, an
 * IPv6-only one on [::] and an IPv4 one on 0.0.0.0, on the same port; a
 * host without IPv6 gets the IPv4 one alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "net.h"
#include "server_int.h"

#define DEFAULT_BACKLOG 4096
#define PORT_RETRIES 16

/* The kernel's cap on listen backlogs: asking for it gets the most. */
static int listen_backlog(void)
{
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
    int n = 0;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = 0;
        fclose(f);
    }
    return n > 0 ? n : DEFAULT_BACKLOG;
}

static int open_one(const struct sockaddr *sa, socklen_t len, int v6only,
                    int *err)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                    0);
    if (fd < 0) {
        *err = errno;
        return -1;
    }
    int one = 1;
    /* Restarting on the same port must not fail on TIME_WAIT leftovers. */
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (sa->sa_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
    if (bind(fd, sa, len) < 0 || listen(fd, listen_backlog()) < 0) {
        *err = errno;
        close(fd);
        return -1;
    }
    return fd;
}

static int no_ipv6(int err)
{
    return err == EAFNOSUPPORT || err == EADDRNOTAVAIL ||
           err == EPROTONOSUPPORT;
}

/* [::] (v6 only) and 0.0.0.0 on one port.  With port 0 the kernel picks
 * the v6 port, which may be taken on v4; then try again. */
static int open_all(int port, int fds[2], int *n, int *port_out)
{
    for (int attempt = 0; attempt < PORT_RETRIES; attempt++) {
        struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
                                  .sin6_port = htons((uint16_t)port),
                                  .sin6_addr = IN6ADDR_ANY_INIT};
        int err = 0, p = port;
        int f6 = open_one((struct sockaddr *)&a6, sizeof(a6), 1, &err);
        if (f6 >= 0)
            p = fccl_bound_port(f6);
        else if (!no_ipv6(err))
            return fccl_err_sys(FCCL_ERR_IO, err, "listen on [::]:%d", port);
        struct sockaddr_in a4 = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)p),
                                 .sin_addr.s_addr = htonl(INADDR_ANY)};
        int f4 = open_one((struct sockaddr *)&a4, sizeof(a4), 0, &err);
        if (f4 < 0) {
            if (f6 >= 0)
                close(f6);
            if (port == 0 && f6 >= 0 && err == EADDRINUSE)
                continue;
            return fccl_err_sys(FCCL_ERR_IO, err, "listen on 0.0.0.0:%d", p);
        }
        *n = 0;
        fds[(*n)++] = f4;
        if (f6 >= 0)
            fds[(*n)++] = f6;
        *port_out = p;
        return FCCL_OK;
    }
    return fccl_err(FCCL_ERR_IO, "no port free on both IPv4 and IPv6");
}

/* A named host: the first of its addresses that binds. */
static int open_host(const char *host, int port, int fds[2], int *n,
                     int *port_out)
{
    struct fccl_resolved r;
    int rc = fccl_addr_resolve(host, port, 1, FCCL_ERR_IO, "listen on", &r);
    if (rc < 0)
        return rc;
    int err = 0, fd = -1;
    for (struct addrinfo *ai = r.res; ai && fd < 0; ai = ai->ai_next)
        fd = open_one(ai->ai_addr, ai->ai_addrlen, 0, &err);
    freeaddrinfo(r.res);
    if (fd < 0)
        return fccl_err_sys(FCCL_ERR_IO, err, "listen on %s", r.where);
    fds[0] = fd;
    *n = 1;
    *port_out = fccl_bound_port(fd);
    return FCCL_OK;
}

int store_listen_open(const char *host, int port, int fds[2], int *n,
                      int *port_out)
{
    if (!host[0])
        return open_all(port, fds, n, port_out);
    return open_host(host, port, fds, n, port_out);
}

void store_format_peer(const struct sockaddr *sa, char *out, size_t outlen)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
        port = ntohs(a->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
        port = ntohs(a->sin6_port);
    }
    fccl_addr_format(out, outlen, ip, port);
}
