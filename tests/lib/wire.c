/* A raw TCPStore client for the server tests (wire.h). */
#include "wire.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "clock.h"
#include "fccl/core.h"
#include "net.h"

/* The sockets are the library's (common/net.c), which take deadlines on
 * its clock. */
static uint64_t io_deadline(void) { return fccl_deadline_ms(TH_IO_MS); }

int cli_connect(int port)
{
    int fd = fccl_tcp_connect("127.0.0.1", port, io_deadline());
    cr_assert(fd >= 0, "connect to port %d failed", port);
    return fd;
}

int cli_modern(int port)
{
    int fd = cli_connect(port);
    struct codec_buf b;
    codec_buf_init(&b);
    f_validate(&b);
    cli_send(fd, &b);
    codec_buf_free(&b);
    return fd;
}

void cli_name(int fd, char *out, size_t n)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    int port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    snprintf(out, n, "127.0.0.1:%d", port);
}

void cli_send_raw(int fd, const void *p, size_t n)
{
    int rc = fccl_write_full(fd, p, n, io_deadline());
    cr_assert_eq(rc, 0, "send of %zu bytes failed", n);
}

void cli_send(int fd, struct codec_buf *b)
{
    cr_assert(!b->oom);
    cli_send_raw(fd, b->p, b->len);
    codec_buf_reset(b);
}

void cli_read(int fd, void *buf, size_t n)
{
    int rc = fccl_read_full(fd, buf, n, io_deadline());
    cr_assert_eq(rc, 0, "expected %zu reply bytes: %s", n,
                 fccl_last_error());
}

void cli_expect(int fd, const void *want, size_t n)
{
    uint8_t *got = malloc(n ? n : 1);
    cr_assert(got);
    cli_read(fd, got, n);
    cr_assert(memcmp(got, want, n) == 0, "reply bytes differ (%zu bytes)", n);
    free(got);
}

void cli_expect_u8(int fd, uint8_t v) { cli_expect(fd, &v, 1); }

void cli_expect_u32(int fd, uint32_t v)
{
    uint8_t b[4];
    cli_read(fd, b, 4);
    cr_assert_eq(codec_get_u32(b), v);
}

void cli_expect_i64(int fd, int64_t v)
{
    uint8_t b[8];
    cli_read(fd, b, 8);
    int64_t got = (int64_t)codec_get_u64(b);
    cr_assert_eq(got, v, "expected i64 %lld, got %lld", (long long)v,
                 (long long)got);
}

static void expect_len(int fd, size_t n)
{
    uint8_t h[8];
    cli_read(fd, h, 8);
    cr_assert_eq(codec_get_u64(h), (uint64_t)n, "expected a %zu-byte string, "
                 "got length %llu", n, (unsigned long long)codec_get_u64(h));
}

void cli_expect_str(int fd, const void *v, size_t n)
{
    expect_len(fd, n);
    cli_expect(fd, v, n);
}

void cli_expect_cstr(int fd, const char *s)
{
    cli_expect_str(fd, s, strlen(s));
}

uint8_t *cli_read_str(int fd, size_t n)
{
    expect_len(fd, n);
    uint8_t *got = malloc(n ? n : 1);
    cr_assert(got);
    cli_read(fd, got, n);
    return got;
}

void cli_expect_silence(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r = poll(&p, 1, ms);
    cr_assert_eq(r, 0, "unexpected bytes (or close) within %d ms", ms);
}

void cli_expect_closed(int fd, int ms)
{
    uint64_t dl = fccl_deadline_ms(ms);
    char buf[4096];
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, fccl_ms_left(dl));
        cr_assert(r > 0, "connection still open after %d ms", ms);
        ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return;
    }
}

int cli_connect_from(const char *src, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in me = {.sin_family = AF_INET};
    inet_pton(AF_INET, src, &me.sin_addr);
    cr_assert(bind(fd, (struct sockaddr *)&me, sizeof(me)) == 0, "bind %s",
              src);
    struct sockaddr_in to = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    cr_assert(connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0,
              "connect: %s", strerror(errno));
    return fd;
}

void cli_validate(int fd)
{
    struct codec_buf b;
    codec_buf_init(&b);
    f_validate(&b);
    cli_send(fd, &b);
    codec_buf_free(&b);
}

void cli_ping_ok(int fd)
{
    struct codec_buf b;
    codec_buf_init(&b);
    put_op(&b, DIALECT_MODERN, OP_PING);
    codec_put_u32(&b, 0xABCD1234u);
    cli_send(fd, &b);
    cli_expect_u32(fd, 0xABCD1234u);
    codec_buf_free(&b);
}

int64_t cli_numkeys(int fd, enum store_dialect d)
{
    struct codec_buf b;
    codec_buf_init(&b);
    put_op(&b, d, OP_GETNUMKEYS);
    cli_send(fd, &b);
    codec_buf_free(&b);
    uint8_t r[8];
    cli_read(fd, r, 8);
    return (int64_t)codec_get_u64(r);
}

/* ---- frame builders ---- */

void put_op(struct codec_buf *b, enum store_dialect d, enum store_op op)
{
    cr_assert(codec_put_type(b, d, op) >= 0, "%s missing in dialect %d",
              codec_op_name(op), (int)d);
}

void put_key(struct codec_buf *b, const char *k)
{
    codec_put_str(b, k, strlen(k));
}

void f_validate(struct codec_buf *b)
{
    put_op(b, DIALECT_MODERN, OP_VALIDATE);
    codec_put_u32(b, STORE_VALIDATE_MAGIC);
}

void f_key(struct codec_buf *b, enum store_dialect d, enum store_op op,
           const char *k)
{
    put_op(b, d, op);
    put_key(b, k);
}

void f_kv(struct codec_buf *b, enum store_dialect d, enum store_op op,
          const char *k, const void *v, size_t n)
{
    put_op(b, d, op);
    put_key(b, k);
    codec_put_str(b, v, n);
}

void f_set(struct codec_buf *b, enum store_dialect d, const char *k,
           const char *v)
{
    f_kv(b, d, OP_SET, k, v, strlen(v));
}

void f_add(struct codec_buf *b, enum store_dialect d, const char *k,
           int64_t delta)
{
    f_key(b, d, OP_ADD, k);
    codec_put_i64(b, delta);
}

void f_cas(struct codec_buf *b, enum store_dialect d, const char *k,
           const char *exp, const char *des)
{
    f_key(b, d, OP_COMPARE_SET, k);
    put_key(b, exp);
    put_key(b, des);
}

void f_keys(struct codec_buf *b, enum store_dialect d, enum store_op op,
            int n, const char *const *keys)
{
    put_op(b, d, op);
    codec_put_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++)
        put_key(b, keys[i]);
}

void f_wait1(struct codec_buf *b, enum store_dialect d, const char *k)
{
    f_keys(b, d, OP_WAIT, 1, &k);
}
