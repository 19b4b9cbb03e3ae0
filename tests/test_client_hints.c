/*
 * What a client is told when the server will not serve it (issue 25).
 * Every close before the first reply used to lead with "a PyTorch <= 2.0
 * server does so ... use the legacy dialect", also for --tls-required, a
 * missing token, a per-address refusal and a server killed during WAIT;
 * a DELETE with the read-only token said only "server closed the
 * connection".  Now tcpstore-server says why in its reply to the fccl
 * hello, the client prints it, and the PyTorch hint is left for a server
 * that closes without a reason.  Also: the warning at start for a
 * certificate that is expired, not yet valid or about to expire.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"

static char dir[64];

static void setup(void)
{
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-hint"), 0);
}

static void teardown(void)
{
    if (dir[0])
        th_rmtree(dir);
}

TestSuite(hints, .init = setup, .fini = teardown, .timeout = 60);

static const char *path_of(const char *name, char *buf, size_t n)
{
    snprintf(buf, n, "%s/%s", dir, name);
    return buf;
}

static void write_token(const char *name, const char *text)
{
    char p[128];
    FILE *f = fopen(path_of(name, p, sizeof(p)), "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
    cr_assert_eq(chmod(p, 0600), 0);
}

static fccl_store_t *open_with(int port, const char *token, int64_t ms)
{
    char addr[TH_ADDR_LEN], tok[128];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, ms);
    if (token)
        o.token_file = path_of(token, tok, sizeof(tok));
    fccl_store_t *st = NULL;
    cr_assert_eq(fccl_store_connect(&o, &st), FCCL_OK, "%s",
                 fccl_last_error());
    return st;
}

static void no_pytorch_hint(void)
{
    cr_assert(!strstr(fccl_last_error(), "PyTorch") &&
                  !strstr(fccl_last_error(), "legacy dialect"),
              "misleading hint: %s", fccl_last_error());
}

static void expect_msg(int rc, int want, const char *needle)
{
    cr_assert_eq(rc, want, "rc %d (%s), want %d", rc, fccl_strerror(rc),
                 want);
    cr_assert(strstr(fccl_last_error(), needle), "no '%s' in: %s", needle,
              fccl_last_error());
    no_pytorch_hint();
}

/* ---- refusals told in-band ---- */

Test(hints, auth_required_without_a_token_says_a_token_is_needed)
{
    write_token("rw", "read-write-token-0123456789\n");
    char rw[128];
    struct srv s;
    srv_start_local(&s, (const char *[]){"--token-file",
                                         path_of("rw", rw, sizeof(rw)),
                                         "--auth-required", NULL});
    fccl_store_t *st = open_with(s.port, NULL, 3000);
    cr_assert_eq(fccl_store_ping(st, NULL), FCCL_OK, "%s",
                 fccl_last_error()); /* PING is served without a token */
    void *v = NULL;
    size_t n = 0;
    expect_msg(fccl_store_get(st, "k", &v, &n, 1000), FCCL_ERR_AUTH,
               "requires a token (--auth-required");
    fccl_store_close(st);
    st = open_with(s.port, NULL, 3000);
    expect_msg(fccl_store_set(st, "k", "v", 1), FCCL_ERR_AUTH,
               "requires a token (--auth-required");
    fccl_store_close(st);
    srv_finish(&s);
}

Test(hints, tls_required_says_tls_is_needed)
{
    srv_need_openssl();
    char cert[128], key[128];
    srv_make_cert(path_of("c.pem", cert, sizeof(cert)),
                  path_of("k.pem", key, sizeof(key)), "store");
    struct srv s;
    srv_start_local(&s, (const char *[]){"--tls-cert", cert, "--tls-key",
                                         key, "--tls-required", NULL});
    fccl_store_t *st = open_with(s.port, NULL, 3000);
    int64_t nk;
    expect_msg(fccl_store_num_keys(st, &nk), FCCL_ERR_AUTH,
               "requires TLS (--tls-required)");
    fccl_store_close(st);
    char *out = NULL;
    cr_assert_eq(srv_tcpstore(s.port, dir, "", "get k", &out), 4);
    cr_assert(strstr(out, "requires TLS") && !strstr(out, "PyTorch"), "%s",
              out);
    free(out);
    srv_finish(&s);
}

Test(hints, per_address_refusal_says_which_cap)
{
    struct srv s;
    srv_start_local(&s, (const char *[]){"--max-connections-per-addr", "2",
                                         "--max-connections", "50", NULL});
    fccl_store_t *a = open_with(s.port, NULL, 3000);
    fccl_store_t *b = open_with(s.port, NULL, 3000);
    cr_assert_eq(fccl_store_set(a, "a", "1", 1), FCCL_OK);
    cr_assert_eq(fccl_store_set(b, "b", "1", 1), FCCL_OK);
    fccl_store_t *c = open_with(s.port, NULL, 3000);
    expect_msg(fccl_store_set(c, "c", "1", 1), FCCL_ERR_LIMIT,
               "max-connections-per-addr");
    cr_assert(strstr(fccl_last_error(), "refused the connection"), "%s",
              fccl_last_error());
    fccl_store_close(c);
    srv_expect_cstr(a, "b", "1"); /* the others are undisturbed */
    fccl_store_close(a);
    fccl_store_close(b);
    srv_finish(&s);
}

static void *kill_later(void *arg)
{
    th_sleep_ms(300);
    srv_kill_hard(arg);
    return NULL;
}

Test(hints, server_killed_during_wait_is_not_blamed_on_pytorch)
{
    struct srv s;
    srv_start_local(&s, NULL);
    fccl_store_t *st = open_with(s.port, NULL, 5000);
    pthread_t t;
    pthread_create(&t, NULL, kill_later, &s);
    const char *keys[1] = {"never"};
    int rc = fccl_store_wait(st, keys, 1, 4000);
    pthread_join(t, NULL);
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO, "rc %d: %s", rc,
              fccl_last_error());
    cr_assert(strstr(fccl_last_error(), "closed the connection"), "%s",
              fccl_last_error());
    no_pytorch_hint();
    fccl_store_close(st);
    srv_cleanup(&s);
}

/* Each op with a reply that the read-only token does not allow: refused
 * with the reason, and the connection goes on. */
Test(hints, read_only_token_refusals_say_why)
{
    write_token("rw", "read-write-token-0123456789\n");
    write_token("ro", "read-only-token-abcdefghij\n");
    char rw[128], ro[128];
    struct srv s;
    srv_start_local(&s, (const char *[]){"--token-file",
                                         path_of("rw", rw, sizeof(rw)),
                                         "--read-token-file",
                                         path_of("ro", ro, sizeof(ro)),
                                         NULL});
    fccl_store_t *w = open_with(s.port, "rw", 3000);
    cr_assert_eq(fccl_store_set(w, "k", "v", 1), FCCL_OK);
    cr_assert_eq(fccl_store_queue_push(w, "q", "x", 1), FCCL_OK);
    fccl_store_t *r = open_with(s.port, "ro", 3000);
    int del = -1;
    int64_t n = 0;
    void *v = NULL;
    size_t len = 0;
    expect_msg(fccl_store_delete(r, "k", &del), FCCL_ERR_AUTH,
               "DELETE_KEY needs the read-write token; the client holds "
               "the read-only token");
    expect_msg(fccl_store_add(r, "n", 1, &n), FCCL_ERR_AUTH,
               "read-only token");
    expect_msg(fccl_store_compare_set(r, "k", "v", 1, "w", 1, &v, &len),
               FCCL_ERR_AUTH, "read-only token");
    expect_msg(fccl_store_queue_pop(r, "q", 0, &v, &len, 1000),
               FCCL_ERR_AUTH, "read-only token");
    expect_msg(fccl_store_barrier(r, "bar", 1, 1000), FCCL_ERR_AUTH,
               "read-only token");
    expect_msg(fccl_store_set(r, "k", "w", 1), FCCL_ERR_AUTH,
               "read-only token"); /* SET's, as before: SYNC said so */
    srv_expect_cstr(r, "k", "v"); /* same connection, nothing changed */
    int64_t qn = -1;
    cr_assert_eq(fccl_store_queue_len(r, "q", &qn), FCCL_OK);
    cr_assert_eq(qn, 1);
    fccl_store_close(r);
    fccl_store_close(w);
    srv_finish(&s);
}

/* A server that closes without a reason before any reply: still the
 * PyTorch <= 2.0 hint (what tcpstore-server would not do). */
static void *accept_and_close(void *arg)
{
    int lfd = *(int *)arg;
    for (int i = 0; i < 2; i++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            return NULL;
        th_sleep_ms(50);
        close(fd);
    }
    return NULL;
}

Test(hints, a_close_without_reason_still_suggests_the_legacy_dialect)
{
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    cr_assert(bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0);
    cr_assert(listen(lfd, 4) == 0);
    getsockname(lfd, (struct sockaddr *)&a, &l);
    pthread_t t;
    pthread_create(&t, NULL, accept_and_close, &lfd);
    fccl_store_t *st = open_with(ntohs(a.sin_port), NULL, 2000);
    int64_t nk;
    int rc = fccl_store_num_keys(st, &nk);
    cr_assert(rc == FCCL_ERR_CLOSED || rc == FCCL_ERR_IO, "rc %d", rc);
    cr_assert(strstr(fccl_last_error(), "legacy dialect"), "%s",
              fccl_last_error());
    fccl_store_close(st);
    shutdown(lfd, SHUT_RDWR);
    close(lfd);
    pthread_join(t, NULL);
}

/* ---- certificate dates ---- */

/* A self-signed certificate valid from now + from_s to now + to_s. */
static void make_cert(const char *cert, const char *key, long from_s,
                      long to_s)
{
    EVP_PKEY *pk = EVP_EC_gen("P-256");
    X509 *x = X509_new();
    cr_assert(pk && x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), from_s);
    X509_gmtime_adj(X509_getm_notAfter(x), to_s);
    X509_set_pubkey(x, pk);
    X509_NAME *nm = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_ASC,
                               (const unsigned char *)"store", -1, -1, 0);
    X509_set_issuer_name(x, nm);
    cr_assert(X509_sign(x, pk, EVP_sha256()) > 0);
    FILE *f = fopen(cert, "w");
    cr_assert(f);
    PEM_write_X509(f, x);
    fclose(f);
    f = fopen(key, "w");
    cr_assert(f);
    cr_assert_eq(chmod(key, 0600), 0);
    PEM_write_PrivateKey(f, pk, NULL, NULL, 0, NULL, NULL);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(pk);
}

/* Start a TLS server on a certificate valid [from_s, to_s) from now:
 * the number of lines of its log that contain needle. */
static int cert_warning(long from_s, long to_s, const char *needle)
{
    char cert[128], key[128];
    make_cert(path_of("d.pem", cert, sizeof(cert)),
              path_of("dk.pem", key, sizeof(key)), from_s, to_s);
    struct srv s;
    srv_start_local(&s, (const char *[]){"--tls-cert", cert, "--tls-key",
                                         key, NULL});
    int n = srv_log_count(&s, needle);
    char *log = srv_log(&s);
    cr_log_info("%s", log);
    free(log);
    srv_finish(&s);
    return n;
}

Test(hints, certificate_dates_are_warned_about_at_start)
{
    const long day = 86400;
    cr_assert_eq(cert_warning(-30 * day, -day, "expired on"), 1);
    cr_assert_eq(cert_warning(2 * day, 30 * day, "is not valid before"), 1);
    cr_assert_eq(cert_warning(-day, 3 * day, "expires in"), 1);
    cr_assert_eq(cert_warning(-day, 365 * day, "TLS certificate"), 0);
}
