/* Address parsing and small blocking-socket helpers shared by the store
 * client, the launcher and the bootstrap.  Addresses are "HOST:PORT" or
 * "[IPv6]:PORT" everywhere. */
#ifndef FCCL_NET_H
#define FCCL_NET_H

#include <stddef.h>
#include <stdint.h>

#define FCCL_HOST_MAX 256

/* Split "HOST:PORT" / "[V6]:PORT" into host (without brackets) and port.
 * Returns FCCL_OK or FCCL_ERR_INVALID with a message naming `addr`. */
int fccl_addr_parse(const char *addr, char *host, size_t hostlen, int *port);

/* Format host and port back into "HOST:PORT", bracketing IPv6 literals. */
void fccl_addr_format(char *out, size_t outlen, const char *host, int port);

/* The local port a bound socket has (IPv4 or IPv6), -1 if getsockname
 * fails. */
int fccl_bound_port(int fd);

/* Connect a TCP socket (TCP_NODELAY, CLOEXEC, blocking) to host:port, trying
 * every resolved address, giving up at `deadline` (fccl_deadline_ms).
 * Returns the fd (>= 0) or a negative status; a refused connect is
 * FCCL_ERR_CONNECT so the caller can retry with backoff. */
int fccl_tcp_connect(const char *host, int port, uint64_t deadline);

/* Write all of buf, or read exactly len bytes, before `deadline`.  Return
 * FCCL_OK, FCCL_ERR_TIMEOUT, FCCL_ERR_CLOSED (EOF) or FCCL_ERR_IO. */
int fccl_write_full(int fd, const void *buf, size_t len, uint64_t deadline);
int fccl_read_full(int fd, void *buf, size_t len, uint64_t deadline);

/* Write all of buf to, or read exactly len bytes from, a blocking file or
 * pipe (the calls above are for sockets), EINTR retried; a read waits for
 * data until `deadline` (fccl_deadline_ms).  Return 0, or -1 on an error
 * (errno), EOF or the deadline, with no error message set. */
int fccl_fd_write(int fd, const void *buf, size_t len);
int fccl_fd_read(int fd, void *buf, size_t len, uint64_t deadline);

/* host:port's addresses (getaddrinfo's list) and "HOST:PORT" for
 * messages. */
struct fccl_resolved {
    struct addrinfo *res;
    char where[FCCL_HOST_MAX + 16];
};

/* Resolve host:port for a stream socket into *out: for connecting, or,
 * `passive`, for binding (AI_PASSIVE, a numeric port).  Returns FCCL_OK
 * (freeaddrinfo out->res when done), or `err` with the message
 * "WHAT HOST:PORT: reason". */
int fccl_addr_resolve(const char *host, int port, int passive, int err,
                      const char *what, struct fccl_resolved *out);

#endif
