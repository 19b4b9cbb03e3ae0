/*
 * TLS on tcpstore-server's own port (PROTOCOL.md "Extensions"): OpenSSL
 * clients and plain clients on one port sharing keys and waking each other,
 * tls-required, client certificates (tls-ca), a garbage handshake, large
 * and pipelined traffic inside TLS, and a certificate that does not load.
 * Certificates are made with the openssl program at test time.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/wire.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/time.h>

#define M DIALECT_MODERN
#define L DIALECT_LEGACY

static char dir[64];
static char srv_cert[128], srv_key[128], cli_cert[128], cli_key[128];

static void setup(void)
{
    srv_need_openssl();
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-tls"), 0);
    srv_make_cert_in(dir, "server", srv_cert, srv_key, sizeof(srv_cert),
                     "store");
    srv_make_cert_in(dir, "client", cli_cert, cli_key, sizeof(cli_cert),
                     "rank");
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(tls, .init = setup, .fini = teardown, .timeout = 120);

/* ---- a small blocking TLS client ---- */

struct tcli {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
};

/* Connect and handshake; returns 0, or -1 if the handshake failed. */
static int tls_open(struct tcli *t, int port, int with_cert)
{
    t->ctx = SSL_CTX_new(TLS_client_method());
    cr_assert(t->ctx);
    cr_assert_eq(SSL_CTX_load_verify_locations(t->ctx, srv_cert, NULL), 1);
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    if (with_cert) {
        cr_assert_eq(SSL_CTX_use_certificate_file(t->ctx, cli_cert,
                                                  SSL_FILETYPE_PEM), 1);
        cr_assert_eq(SSL_CTX_use_PrivateKey_file(t->ctx, cli_key,
                                                 SSL_FILETYPE_PEM), 1);
    }
    t->fd = cli_connect(port);
    /* Blocking I/O bounded by socket timeouts: nothing hangs. */
    struct timeval tv = {TH_IO_MS / 1000, 0};
    setsockopt(t->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(t->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    fcntl(t->fd, F_SETFL, fcntl(t->fd, F_GETFL) & ~O_NONBLOCK);
    t->ssl = SSL_new(t->ctx);
    SSL_set_fd(t->ssl, t->fd);
    return SSL_connect(t->ssl) == 1 ? 0 : -1;
}

static void tls_close(struct tcli *t)
{
    SSL_free(t->ssl);
    SSL_CTX_free(t->ctx);
    close(t->fd);
    ERR_clear_error();
}

static int tls_write(struct tcli *t, struct codec_buf *b)
{
    size_t off = 0;
    while (off < b->len) {
        int n = SSL_write(t->ssl, b->p + off, (int)(b->len - off));
        if (n <= 0)
            return -1;
        off += (size_t)n;
    }
    codec_buf_reset(b);
    return 0;
}

static int tls_read(struct tcli *t, void *buf, size_t n)
{
    uint8_t *p = buf;
    while (n) {
        int r = SSL_read(t->ssl, p, (int)(n > (1 << 30) ? 1 << 30 : n));
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void tls_expect(struct tcli *t, const void *want, size_t n)
{
    uint8_t *got = malloc(n ? n : 1);
    cr_assert_eq(tls_read(t, got, n), 0, "TLS read of %zu bytes failed", n);
    cr_assert(memcmp(got, want, n) == 0);
    free(got);
}

static void tls_expect_str(struct tcli *t, const void *v, size_t n)
{
    uint8_t h[8];
    cr_assert_eq(tls_read(t, h, 8), 0);
    cr_assert_eq(codec_get_u64(h), n);
    tls_expect(t, v, n);
}

static int64_t tls_numkeys(struct tcli *t)
{
    struct codec_buf b;
    codec_buf_init(&b);
    put_op(&b, M, OP_GETNUMKEYS);
    cr_assert_eq(tls_write(t, &b), 0);
    codec_buf_free(&b);
    uint8_t r[8];
    cr_assert_eq(tls_read(t, r, 8), 0);
    return (int64_t)codec_get_u64(r);
}

static void start_tls_server(struct srv *s, const char *extra1,
                             const char *extra2)
{
    const char *args[] = {"--tls-cert", srv_cert, "--tls-key", srv_key,
                          extra1,       extra2,   NULL};
    srv_start(s, args);
}

/* ---- tests ---- */

Test(tls, tls_and_plain_clients_share_one_port)
{
    struct srv s;
    start_tls_server(&s, NULL, NULL);
    struct codec_buf b;
    codec_buf_init(&b);
    struct tcli t;
    cr_assert_eq(tls_open(&t, s.port, 0), 0, "handshake failed");
    /* Inside TLS: the modern dialect (VALIDATE first, like PyTorch). */
    put_op(&b, M, OP_VALIDATE);
    codec_put_u32(&b, STORE_VALIDATE_MAGIC);
    f_set(&b, M, "/secret", "s3cr3t");
    f_key(&b, M, OP_GET, "/secret");
    f_wait1(&b, M, "/from-plain");
    cr_assert_eq(tls_write(&t, &b), 0);
    tls_expect_str(&t, "s3cr3t", 6);
    /* A plain legacy client on the same port sees the key and wakes the
     * TLS client's wait. */
    int p = cli_connect(s.port);
    f_key(&b, L, OP_GET, "/secret");
    f_set(&b, L, "/from-plain", "1");
    cli_send(p, &b);
    cli_expect_cstr(p, "s3cr3t");
    uint8_t stop;
    cr_assert_eq(tls_read(&t, &stop, 1), 0);
    cr_assert_eq(stop, REPLY_STOP_WAITING);
    cr_assert_eq(tls_numkeys(&t), 2);
    close(p);
    tls_close(&t);
    codec_buf_free(&b);
    srv_finish(&s);
}

Test(tls, big_and_pipelined_traffic)
{
    struct srv s;
    start_tls_server(&s, NULL, NULL);
    struct codec_buf b;
    codec_buf_init(&b);
    struct tcli t;
    cr_assert_eq(tls_open(&t, s.port, 0), 0);
    size_t n = 3u << 20;
    uint8_t *v = malloc(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint8_t)(i * 7 + (i >> 11));
    f_kv(&b, M, OP_SET, "/big", v, n);
    f_key(&b, M, OP_GET, "/big");
    for (int i = 0; i < 500; i++)
        f_add(&b, M, "/n", 2);
    cr_assert_eq(tls_write(&t, &b), 0);
    tls_expect_str(&t, v, n);
    for (int i = 0; i < 500; i++) {
        uint8_t r[8];
        cr_assert_eq(tls_read(&t, r, 8), 0);
        cr_assert_eq((int64_t)codec_get_u64(r), 2 * (i + 1));
    }
    free(v);
    tls_close(&t);
    codec_buf_free(&b);
    srv_finish(&s);
}

Test(tls, tls_required_refuses_plaintext)
{
    struct srv s;
    start_tls_server(&s, "--tls-required", NULL);
    int p = cli_connect(s.port);
    char name[64], want[128];
    cli_name(p, name, sizeof(name));
    struct codec_buf b;
    codec_buf_init(&b);
    put_op(&b, L, OP_GETNUMKEYS);
    cli_send(p, &b);
    cli_expect_closed(p, TH_IO_MS);
    close(p);
    snprintf(want, sizeof(want), "closing client %s: plaintext connection "
             "refused (tls-required)", name);
    cr_assert(srv_log_wait(&s, want, TH_IO_MS), "no log line '%s'", want);
    struct tcli t;
    cr_assert_eq(tls_open(&t, s.port, 0), 0);
    cr_assert_eq(tls_numkeys(&t), 0);
    tls_close(&t);
    codec_buf_free(&b);
    srv_finish(&s);
}

Test(tls, client_certificates_required_with_tls_ca)
{
    struct srv s;
    start_tls_server(&s, "--tls-ca", cli_cert);
    /* Without a certificate: the handshake (or, with TLS 1.3, the first
     * exchange after it) fails and the server says why. */
    struct tcli t;
    int ok = tls_open(&t, s.port, 0) == 0;
    if (ok) {
        struct codec_buf b;
        codec_buf_init(&b);
        put_op(&b, M, OP_GETNUMKEYS);
        int w = tls_write(&t, &b);
        uint8_t r[8];
        ok = w == 0 && tls_read(&t, r, 8) == 0;
        codec_buf_free(&b);
    }
    tls_close(&t);
    cr_assert(!ok, "a client without a certificate was served");
    cr_assert(srv_log_wait(&s, "TLS: ", TH_IO_MS));
    /* With one signed by the CA: served. */
    cr_assert_eq(tls_open(&t, s.port, 1), 0, "handshake with a cert failed");
    cr_assert_eq(tls_numkeys(&t), 0);
    tls_close(&t);
    srv_finish(&s);
}

Test(tls, garbage_handshake_closes_only_that_client)
{
    struct srv s;
    start_tls_server(&s, NULL, NULL);
    int good = cli_modern(s.port);
    int bad = cli_connect(s.port);
    static const uint8_t junk[] = {0x16, 0x03, 0x01, 0x00, 0x05, 'h', 'e',
                                   'l', 'l', 'o', 0xFF, 0xFF, 0xFF};
    cli_send_raw(bad, junk, sizeof(junk));
    cli_expect_closed(bad, TH_IO_MS);
    close(bad);
    cr_assert(srv_log_wait(&s, "TLS: ", TH_IO_MS));
    cr_assert_eq(cli_numkeys(good, M), 0);
    close(good);
    srv_finish(&s);
}

Test(tls, bad_certificate_files_fail_at_start)
{
    char *out = NULL;
    const char *argv[] = {"tcpstore-server", "--port",  "0",
                          "--tls-cert",      srv_key, "--tls-key",
                          srv_key,           NULL};
    int st = srv_run(argv, TH_IO_MS, &out);
    cr_assert_eq(st, 1, "status %d: %s", st, out);
    cr_assert(strstr(out, "TLS certificate"), "%s", out);
    free(out);
    /* Half a TLS config is a usage error. */
    const char *half[] = {"tcpstore-server", "--tls-cert", srv_cert, NULL};
    cr_assert_eq(srv_run(half, TH_IO_MS, NULL), 2);
}

/* Issue 9: an unfinished TLS handshake held a connection slot forever.
 * Now it is closed after --request-timeout; a finished TLS connection
 * that is merely idle stays. */
Test(tls, unfinished_handshake_times_out_idle_tls_stays)
{
    struct srv s;
    start_tls_server(&s, "--request-timeout", "1");
    struct tcli t;
    cr_assert_eq(tls_open(&t, s.port, 0), 0, "handshake failed");
    int half = cli_connect(s.port);
    cli_send_raw(half, "\x16\x03\x01", 3); /* a record header, no more */
    cli_expect_closed(half, 5000);
    close(half);
    cr_assert(srv_log_wait(&s, "TLS handshake not finished", TH_IO_MS));
    th_sleep_ms(1500);
    cr_assert_eq(tls_numkeys(&t), 0);
    tls_close(&t);
    srv_finish(&s);
}

/* Issue 9: a plaintext fccl client of a TLS-only server used to be told
 * "if the server is PyTorch <= 2.0, use the legacy dialect".  Issue 25:
 * the server now says why in its reply to the client's hello, and the
 * client reports that (FCCL_ERR_AUTH, as every TLS failure). */
Test(tls, plaintext_client_of_tls_only_server_is_told_why)
{
    struct srv s;
    start_tls_server(&s, "--tls-required", NULL);
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, s.port, 3000);
    fccl_store_t *st = NULL;
    cr_assert_eq(fccl_store_connect(&o, &st), FCCL_OK, "%s",
                 fccl_last_error());
    int rc = fccl_store_set(st, "k", "v", 1);
    cr_assert_eq(rc, FCCL_ERR_AUTH, "rc %d: %s", rc, fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "--tls-required"), "%s",
              fccl_last_error());
    cr_assert(!strstr(fccl_last_error(), "PyTorch"), "%s",
              fccl_last_error());
    fccl_store_close(st);
    srv_finish(&s);
}
