/*
 * SIGHUP reload of tcpstore-server's TLS certificate, key and CA and of
 * its token files: the next client gets the new certificate (checked with
 * a client that trusts only the new one, and one that trusts only the old
 * one) while a connection opened before keeps working; a corrupt
 * certificate, a key that does not match it and a token file that does
 * not load are refused with a log line and the old material kept; a
 * token rotation (the old token refused, the new one accepted, a client
 * proven with the old one served on).  Certificates are made with the
 * openssl program.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"

static char dir[64];

static const char *at(char *buf, const char *name)
{
    snprintf(buf, 128, "%s/%s", dir, name);
    return buf;
}

static void write_file(const char *name, const char *text, int mode)
{
    char p[128];
    cr_assert_eq(th_write_file(at(p, name), text, mode), 0, "%s: %s", p,
                 strerror(errno));
}

/* Replace `to`'s content with `from`'s, as an operator rotating files in
 * place does (same path, mode 0600). */
static void copy_file(const char *from, const char *to)
{
    char a[128], b[128];
    FILE *in = fopen(at(a, from), "rb"), *out = fopen(at(b, to), "wb");
    cr_assert(in && out, "copy %s -> %s: %s", a, b, strerror(errno));
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
        cr_assert_eq(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    cr_assert_eq(chmod(b, 0600), 0);
}

static void setup(void)
{
    srv_need_openssl();
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-reload"), 0);
    char c[128], k[128];
    srv_make_cert(at(c, "a.crt"), at(k, "a.key"), "store-a");
    srv_make_cert(at(c, "b.crt"), at(k, "b.key"), "store-b");
    copy_file("a.crt", "srv.crt");
    copy_file("a.key", "srv.key");
    write_file("t1", "first-token-0123456789abc\n", 0600);
    write_file("t2", "second-token-zyxwvutsrqpo\n", 0600);
    copy_file("t1", "token");
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(reload, .init = setup, .fini = teardown, .timeout = 120);

static void start_tls(struct srv *s)
{
    char c[128], k[128];
    srv_start_local(s, (const char *[]){"--tls-cert", at(c, "srv.crt"),
                                        "--tls-key", at(k, "srv.key"),
                                        "--tls-required", NULL});
}

/* A client trusting only the certificate file `ca` (TLS) or proving the
 * token in file `tok` (files of dir; NULL: not used). */
static int connect_with(int port, const char *ca, const char *tok,
                        fccl_store_t **st)
{
    char addr[TH_ADDR_LEN], pca[128], ptok[128];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, 3000);
    if (ca)
        o.tls_ca = at(pca, ca);
    if (tok)
        o.token_file = at(ptok, tok);
    *st = NULL;
    return fccl_store_connect(&o, st);
}

static int connect_ca(int port, const char *ca, fccl_store_t **st)
{
    return connect_with(port, ca, NULL, st);
}

/* SIGHUP, then wait for the reload's log line (the n-th one). */
static void hup(struct srv *s, const char *needle, int nth)
{
    cr_assert_eq(kill(s->pid, SIGHUP), 0);
    double end = th_now() + TH_IO_MS / 1000.0;
    while (srv_log_count(s, needle) < nth && th_now() < end)
        th_sleep_ms(10);
    cr_assert_geq(srv_log_count(s, needle), nth, "no '%s' after SIGHUP:\n%s",
                  needle, srv_log(s));
}

Test(reload, next_client_gets_the_new_certificate_open_one_goes_on)
{
    struct srv s = {0};
    start_tls(&s);
    fccl_store_t *open_before, *st;
    cr_assert_eq(connect_ca(s.port, "a.crt", &open_before), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(open_before, "k", "1", 1), FCCL_OK);
    /* Before the reload the B-only client is refused: the test can fail. */
    cr_assert_eq(connect_ca(s.port, "b.crt", &st), FCCL_ERR_AUTH);

    copy_file("b.crt", "srv.crt");
    copy_file("b.key", "srv.key");
    hup(&s, "loaded for new connections", 1);

    cr_assert_eq(connect_ca(s.port, "b.crt", &st), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(st, "k", "1");
    fccl_store_close(st);
    cr_assert_eq(connect_ca(s.port, "a.crt", &st), FCCL_ERR_AUTH,
                 "a client trusting only the old certificate got in");
    /* The connection made before the reload is served on. */
    cr_assert_eq(fccl_store_set(open_before, "k2", "2", 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(open_before, "k2", "2");
    fccl_store_close(open_before);
    cr_assert_eq(srv_log_count(&s, "keeping"), 0);
    /* The day-long certificates are warned about at start and at the
     * reload. */
    cr_assert_eq(srv_log_count(&s, "expires in"), 2, "%s", srv_log(&s));
    srv_finish(&s);
}

Test(reload, a_corrupt_certificate_or_mismatched_key_keeps_the_old)
{
    struct srv s = {0};
    start_tls(&s);
    write_file("srv.crt", "-----BEGIN CERTIFICATE-----\nnot base64 at all\n"
                          "-----END CERTIFICATE-----\n", 0644);
    hup(&s, "keeping the TLS certificate and key", 1);
    cr_assert(srv_log_count(&s, "srv.crt"), "the log names the file");
    fccl_store_t *st;
    cr_assert_eq(connect_ca(s.port, "a.crt", &st), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(st, "still", "a", 1), FCCL_OK);
    fccl_store_close(st);

    /* B's certificate with A's key: refused as a pair. */
    copy_file("b.crt", "srv.crt");
    hup(&s, "keeping the TLS certificate and key", 2);
    cr_assert(srv_log_count(&s, "mismatch"), "%s", srv_log(&s));
    cr_assert_eq(connect_ca(s.port, "a.crt", &st), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(st);
    cr_assert_eq(connect_ca(s.port, "b.crt", &st), FCCL_ERR_AUTH);

    /* A key others can read is refused too. */
    copy_file("b.key", "srv.key");
    char k[128];
    cr_assert_eq(chmod(at(k, "srv.key"), 0644), 0);
    hup(&s, "keeping the TLS certificate and key", 3);
    cr_assert_eq(connect_ca(s.port, "b.crt", &st), FCCL_ERR_AUTH);
    cr_assert_eq(chmod(k, 0600), 0);
    hup(&s, "loaded for new connections", 1);
    cr_assert_eq(connect_ca(s.port, "b.crt", &st), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(st);
    srv_finish(&s);
}

static int connect_token(int port, const char *tok, fccl_store_t **st)
{
    return connect_with(port, NULL, tok, st);
}

Test(reload, token_rotation)
{
    struct srv s = {0};
    char t[128];
    srv_start_local(&s, (const char *[]){"--token-file", at(t, "token"),
                                         "--auth-required", NULL});
    fccl_store_t *proven, *st;
    cr_assert_eq(connect_token(s.port, "t1", &proven), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(connect_token(s.port, "t2", &st), FCCL_ERR_AUTH);

    copy_file("t2", "token");
    hup(&s, "loaded for new proofs", 1);
    cr_assert_eq(connect_token(s.port, "t1", &st), FCCL_ERR_AUTH,
                 "the old token still works after the rotation");
    cr_assert_eq(connect_token(s.port, "t2", &st), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(st, "new", "1", 1), FCCL_OK);
    fccl_store_close(st);
    cr_assert_eq(fccl_store_set(proven, "old", "1", 1), FCCL_OK, "%s",
                 fccl_last_error());

    /* A token file that does not load: the rotated token stays. */
    write_file("token", "short\n", 0600);
    hup(&s, "keeping the tokens", 1);
    cr_assert_eq(connect_token(s.port, "t2", &st), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(st);
    fccl_store_close(proven);
    srv_finish(&s);
}
