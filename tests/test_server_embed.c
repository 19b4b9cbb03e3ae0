/*
 * The embeddable server (fccl/server.h) from a C program, through the
 * public header only: TLS, a required token and a journal all on, a
 * client that sets and reads keys, the server freed and made again on the
 * same journal with the keys still there; waiting for workers (timeout,
 * success, a waiter woken by joins, the loop's end); the hosted-store
 * variables (fccl_server_opts_env); systemd's CREDENTIALS_DIRECTORY and
 * STATE_DIRECTORY; a reload from the API; and the failures an embedding
 * program must be told about clearly: a certificate that does not load,
 * a key or token file others can read, a token file that is missing, a
 * port in use, a status port beyond loopback, NULL arguments.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fccl/core.h"
#include "fccl/server.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"

static char dir[64];
static char cert[128], key[128], token[128], jrn[128];

static void path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void write_file(const char *p, const char *text, int mode)
{
    cr_assert_eq(th_write_file(p, text, mode), 0, "%s: %s", p,
                 strerror(errno));
}

static void setup(void)
{
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-embed"), 0);
    path(cert, sizeof(cert), "srv.crt");
    path(key, sizeof(key), "srv.key");
    path(token, sizeof(token), "token");
    path(jrn, sizeof(jrn), "store.journal");
    write_file(token, "embedded-token-0123456789\n", 0600);
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(embed, .init = setup, .fini = teardown, .timeout = 120);

/* Loopback, a free port, TLS required, token required, journal. */
static void secure_opts(fccl_server_opts_t *o)
{
    fccl_server_opts_init(o);
    cr_assert_eq(fccl_server_opts_set(o, "host", "127.0.0.1"), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(o, "port", "0"), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(o, "tls-cert", cert), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(o, "tls-key", key), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(o, "tls-required", ""), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(o, "token-file", token), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(o, "auth_required", "yes"), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(o, "journal", jrn), FCCL_OK);
}

static fccl_server_t *start(const fccl_server_opts_t *o)
{
    fccl_server_t *s = NULL;
    cr_assert_eq(fccl_server_create(o, &s), FCCL_OK, "%s", fccl_last_error());
    cr_assert_not_null(s);
    cr_assert_eq(fccl_server_start(s), FCCL_OK, "%s", fccl_last_error());
    cr_assert_eq(fccl_server_start(s), FCCL_ERR_STATE);
    return s;
}

/* A client with the CA (the self-signed certificate) and the token. */
static int connect_secure(int port, fccl_store_t **st, int with_token)
{
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, 5000);
    o.tls_ca = cert;
    o.token_file = with_token ? token : NULL;
    return fccl_store_connect(&o, st);
}

Test(embed, tls_token_journal_survive_a_restart)
{
    srv_make_cert(cert, key, "store");
    fccl_server_opts_t o;
    secure_opts(&o);
    fccl_server_t *s = start(&o);
    int port = fccl_server_port(s);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%d", port);
    cr_assert_str_eq(fccl_server_address(s), want);
    cr_assert_str_eq(fccl_server_http_address(s), "");

    fccl_store_t *st;
    cr_assert_eq(connect_secure(port, &st, 1), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(st, "config", "v1", 2), FCCL_OK, "%s",
                 fccl_last_error());
    int64_t n = 0;
    cr_assert_eq(fccl_store_add(st, "count", 5, &n), FCCL_OK);
    cr_assert_eq(n, 5);
    srv_expect_cstr(st, "config", "v1");
    fccl_store_close(st);

    /* Without the token a write is refused; a plain client gets nowhere. */
    cr_assert_eq(connect_secure(port, &st, 0), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_lt(fccl_store_set(st, "intruder", "x", 1), 0);
    fccl_store_close(st);
    fccl_store_t *plain = NULL;
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t po;
    srv_client_opts(&po, addr, port, 1500);
    int rc = fccl_store_connect(&po, &plain);
    if (rc == FCCL_OK) {
        cr_assert_lt(fccl_store_set(plain, "intruder", "x", 1), 0);
        fccl_store_close(plain);
    }

    /* The program makes the server again on the same journal. */
    fccl_server_free(s);
    o.port = port;
    s = start(&o);
    cr_assert_eq(connect_secure(port, &st, 1), FCCL_OK, "%s",
                 fccl_last_error());
    srv_expect_cstr(st, "config", "v1");
    cr_assert_eq(fccl_store_add(st, "count", 0, &n), FCCL_OK);
    cr_assert_eq(n, 5, "the counter after the restart: %lld", (long long)n);
    int present = -1;
    cr_assert_eq(fccl_store_check(st, (const char *const[]){"intruder"}, 1,
                                  &present), FCCL_OK);
    cr_assert_eq(present, 0, "a refused write must not be in the journal");
    fccl_store_close(st);
    fccl_server_free(s);
    struct stat sb;
    cr_assert_eq(stat(jrn, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0600);
}

/* ---- workers ---- */

static fccl_server_t *plain_server(void)
{
    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    snprintf(o.host, sizeof(o.host), "127.0.0.1");
    o.port = 0;
    return start(&o);
}

static void join(int port)
{
    fccl_store_opts_t o;
    char addr[TH_ADDR_LEN];
    srv_client_opts(&o, addr, port, 5000);
    o.raw_keys = 1; /* "init/", as PyTorch's clients and fccl_init add */
    fccl_store_t *st;
    cr_assert_eq(fccl_store_connect(&o, &st), FCCL_OK);
    cr_assert_eq(fccl_store_add(st, "init/", 1, NULL), FCCL_OK);
    fccl_store_close(st);
}

struct waiter {
    fccl_server_t *s;
    int n, rc;
    double took;
};

static void *wait_main(void *arg)
{
    struct waiter *w = arg;
    double t0 = th_now();
    w->rc = fccl_server_wait_workers(w->s, w->n, 10000);
    w->took = th_now() - t0;
    return NULL;
}

Test(embed, wait_for_workers)
{
    fccl_server_t *s = plain_server();
    int port = fccl_server_port(s);
    double t0 = th_now();
    cr_assert_eq(fccl_server_wait_workers(s, 2, 300), FCCL_ERR_TIMEOUT);
    cr_assert_geq(th_now() - t0, 0.29);
    cr_assert(strstr(fccl_last_error(), "0 of 2"), "%s", fccl_last_error());
    cr_assert_eq(fccl_server_wait_workers(s, 0, 0), FCCL_OK);

    struct waiter w = {s, 2, -99, 0};
    pthread_t t;
    pthread_create(&t, NULL, wait_main, &w);
    th_sleep_ms(200);
    join(port);
    cr_assert_eq(fccl_server_joined(s), 1);
    join(port);
    pthread_join(t, NULL);
    cr_assert_eq(w.rc, FCCL_OK, "%s", fccl_last_error());
    cr_assert_lt(w.took, 5.0, "woken by the join, not the timeout");
    cr_assert_eq(fccl_server_joined(s), 2);
    cr_assert_eq(fccl_server_wait_workers(s, 2, 0), FCCL_OK);

    /* A waiter learns that the loop stopped. */
    struct waiter w3 = {s, 3, -99, 0};
    pthread_create(&t, NULL, wait_main, &w3);
    th_sleep_ms(200);
    fccl_server_stop(s);
    pthread_join(t, NULL);
    cr_assert_eq(w3.rc, FCCL_ERR_STATE);
    cr_assert_lt(w3.took, 5.0);
    cr_assert_eq(fccl_server_wait_workers(s, -1, 0), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_server_wait_workers(NULL, 1, 0), FCCL_ERR_INVALID);
    fccl_server_free(s);
}

/* ---- where the options come from ---- */

Test(embed, opts_env_gives_a_hosted_store_the_servers_settings)
{
    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    setenv("FCCLT_SERVER_TLS_CERT", "/c.pem", 1);
    setenv("FCCLT_SERVER_TLS_KEY", "/k.pem", 1);
    setenv("FCCLT_SERVER_TLS_CA", "/ca.pem", 1);
    setenv("FCCLT_SERVER_JOURNAL", "/j", 1);
    setenv("FCCLT_TOKEN_FILE", "/t", 1);
    cr_assert_eq(fccl_server_opts_env(&o, "FCCLT"), FCCL_OK);
    cr_assert_str_eq(o.tls_cert, "/c.pem");
    cr_assert_str_eq(o.tls_key, "/k.pem");
    cr_assert_str_eq(o.tls_ca, "/ca.pem");
    cr_assert_str_eq(o.journal, "/j");
    cr_assert_str_eq(o.token_file, "/t");
    cr_assert_eq(o.tls_required, 1);
    cr_assert_eq(o.auth_required, 1);

    fccl_server_opts_init(&o);
    unsetenv("FCCLT_SERVER_TLS_CERT");
    setenv("FCCLT_TOKEN_FILE", "", 1); /* empty: as unset */
    cr_assert_eq(fccl_server_opts_env(&o, "FCCLT"), FCCL_OK);
    cr_assert_eq(o.tls_required, 0);
    cr_assert_eq(o.auth_required, 0);
    cr_assert_str_eq(o.token_file, "");
    char big[2048];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    setenv("FCCLT_SERVER_JOURNAL", big, 1);
    cr_assert_eq(fccl_server_opts_env(&o, "FCCLT"), FCCL_ERR_INVALID);
    cr_assert(strstr(fccl_last_error(), "FCCLT_SERVER_JOURNAL"), "%s",
              fccl_last_error());
    cr_assert_eq(fccl_server_opts_env(NULL, "FCCLT"), FCCL_ERR_INVALID);
}

Test(embed, systemd_credentials_and_state_directories)
{
    char cred[128], state[128], p[256];
    path(cred, sizeof(cred), "credentials");
    path(state, sizeof(state), "state");
    cr_assert_eq(mkdir(cred, 0700), 0);
    cr_assert_eq(mkdir(state, 0700), 0);
    snprintf(p, sizeof(p), "%s/tls-cert", cred);
    char k[256], t[256];
    snprintf(k, sizeof(k), "%s/tls-key", cred);
    snprintf(t, sizeof(t), "%s/token", cred);
    srv_make_cert(p, k, "store");
    strcpy(cert, p); /* what the client trusts */
    write_file(t, "credential-token-0123456789\n", 0400);
    setenv("CREDENTIALS_DIRECTORY", cred, 1);
    setenv("STATE_DIRECTORY", state, 1);

    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    snprintf(o.host, sizeof(o.host), "127.0.0.1");
    o.port = 0;
    cr_assert_eq(fccl_server_opts_set(&o, "tls-cert", "tls-cert"), 0);
    cr_assert_eq(fccl_server_opts_set(&o, "tls-key", "tls-key"), 0);
    cr_assert_eq(fccl_server_opts_set(&o, "token-file", "token"), 0);
    cr_assert_eq(fccl_server_opts_set(&o, "auth-required", "1"), 0);
    cr_assert_eq(fccl_server_opts_set(&o, "journal", "store.journal"), 0);
    fccl_server_t *s = start(&o);
    snprintf(p, sizeof(p), "%s/store.journal", state);
    cr_assert_eq(access(p, F_OK), 0, "the journal is made in STATE_DIRECTORY");

    fccl_store_opts_t co;
    char addr[TH_ADDR_LEN];
    srv_client_opts(&co, addr, fccl_server_port(s), 5000);
    co.tls_ca = cert;
    co.token_file = t;
    fccl_store_t *st;
    cr_assert_eq(fccl_store_connect(&co, &st), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(st, "k", "v", 1), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(st);
    fccl_server_free(s);

    /* An absolute path is taken as it is. */
    fccl_server_opts_init(&o);
    snprintf(o.host, sizeof(o.host), "127.0.0.1");
    o.port = 0;
    path(p, sizeof(p), "abs.journal");
    snprintf(o.journal, sizeof(o.journal), "%s", p);
    s = start(&o);
    cr_assert_eq(access(p, F_OK), 0);
    fccl_server_free(s);
}

Test(embed, reload_from_the_api_takes_a_new_token)
{
    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    snprintf(o.host, sizeof(o.host), "127.0.0.1");
    o.port = 0;
    snprintf(o.token_file, sizeof(o.token_file), "%s", token);
    o.auth_required = 1;
    fccl_server_t *s = start(&o);
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t co;
    srv_client_opts(&co, addr, fccl_server_port(s), 3000);
    co.token_file = token;
    fccl_store_t *before;
    cr_assert_eq(fccl_store_connect(&co, &before), FCCL_OK);

    char old[128];
    path(old, sizeof(old), "old-token");
    write_file(old, "embedded-token-0123456789\n", 0600);
    write_file(token, "the-rotated-token-abcdefgh\n", 0600);
    fccl_server_reload(s);
    /* The reload runs on the loop: a client with the old token is
     * refused once it has. */
    co.token_file = old;
    fccl_store_t *st = NULL;
    int refused = 0;
    for (double end = th_now() + 5; !refused && th_now() < end;) {
        if (fccl_store_connect(&co, &st) < 0)
            refused = 1;
        else
            fccl_store_close(st);
        th_sleep_ms(20);
    }
    cr_assert(refused, "the old token still works after the reload");
    co.token_file = token;
    cr_assert_eq(fccl_store_connect(&co, &st), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(st, "after", "1", 1), FCCL_OK);
    fccl_store_close(st);
    /* The connection proven before goes on. */
    cr_assert_eq(fccl_store_set(before, "before", "1", 1), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(before);
    fccl_server_free(s);
}

/* ---- failures ---- */

static int create_fails(const fccl_server_opts_t *o, int want,
                        const char *needle)
{
    fccl_server_t *s = (fccl_server_t *)1;
    int rc = fccl_server_create(o, &s);
    cr_assert_eq(rc, want, "rc %d (%s), want %d", rc, fccl_last_error(),
                 want);
    cr_assert_null(s);
    cr_assert(strstr(fccl_last_error(), needle), "'%s' lacks '%s'",
              fccl_last_error(), needle);
    return rc;
}

Test(embed, clear_errors)
{
    srv_make_cert(cert, key, "store");
    fccl_server_opts_t o;
    secure_opts(&o);
    o.journal[0] = '\0';

    char bad[128];
    path(bad, sizeof(bad), "garbage.crt");
    write_file(bad, "this is no certificate\n", 0644);
    snprintf(o.tls_cert, sizeof(o.tls_cert), "%s", bad);
    create_fails(&o, FCCL_ERR_AUTH, "garbage.crt");
    path(bad, sizeof(bad), "missing.crt");
    snprintf(o.tls_cert, sizeof(o.tls_cert), "%s", bad);
    create_fails(&o, FCCL_ERR_AUTH, "missing.crt");

    secure_opts(&o);
    o.journal[0] = '\0';
    cr_assert_eq(chmod(key, 0644), 0);
    create_fails(&o, FCCL_ERR_AUTH, "chmod");
    cr_assert_eq(chmod(key, 0600), 0);

    cr_assert_eq(chmod(token, 0644), 0);
    create_fails(&o, FCCL_ERR_AUTH, token);
    cr_assert_eq(chmod(token, 0600), 0);
    path(bad, sizeof(bad), "no-token");
    snprintf(o.token_file, sizeof(o.token_file), "%s", bad);
    create_fails(&o, FCCL_ERR_IO, "no-token");
    path(bad, sizeof(bad), "short-token");
    write_file(bad, "short\n", 0600);
    snprintf(o.token_file, sizeof(o.token_file), "%s", bad);
    create_fails(&o, FCCL_ERR_AUTH, "short-token");

    /* A port in use. */
    fccl_server_t *a = plain_server();
    fccl_server_opts_init(&o);
    snprintf(o.host, sizeof(o.host), "127.0.0.1");
    o.port = fccl_server_port(a);
    create_fails(&o, FCCL_ERR_IO, "in use");
    /* The same for the status port. */
    o.port = 0;
    snprintf(o.http, sizeof(o.http), "127.0.0.1:%d", fccl_server_port(a));
    create_fails(&o, FCCL_ERR_IO, "in use");
    fccl_server_free(a);

    /* A status port beyond loopback needs http-public. */
    fccl_server_opts_init(&o);
    cr_assert_eq(fccl_server_opts_set(&o, "http", "0.0.0.0:0"), FCCL_OK);
    cr_assert_eq(fccl_server_opts_check(&o), FCCL_ERR_INVALID);
    cr_assert(strstr(fccl_last_error(), "http-public"), "%s",
              fccl_last_error());
    cr_assert_eq(fccl_server_opts_set(&o, "http", "9100"), FCCL_OK);
    cr_assert_str_eq(o.http, "127.0.0.1:9100");
    cr_assert_eq(fccl_server_opts_check(&o), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(&o, "http", "[::1]:9100"), FCCL_OK);
    cr_assert_eq(fccl_server_opts_check(&o), FCCL_OK);
    cr_assert_eq(fccl_server_opts_set(&o, "http", "nohost:"),
                 FCCL_ERR_INVALID);

    /* NULL arguments. */
    fccl_server_t *s;
    cr_assert_eq(fccl_server_create(NULL, &s), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_server_create(&o, NULL), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_server_opts_set(NULL, "port", "1"), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_server_opts_set(&o, "port", NULL), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_server_start(NULL), FCCL_ERR_INVALID);
    cr_assert_eq(fccl_server_run(NULL), FCCL_ERR_INVALID);
    fccl_server_stop(NULL);
    fccl_server_reload(NULL);
    fccl_server_free(NULL);
}
