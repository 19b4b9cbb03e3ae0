/*
 * TLS in the store client (library and `tcpstore`): server verification
 * with a CA (IP literal against an IP subjectAltName, --tls-server-name),
 * mutual TLS, the environment variables, and each failure case (TLS client
 * against a plain server, plain client against --tls-required, wrong CA,
 * expired certificate, wrong name, a key readable by others): a clear
 * error naming the cause and exit 4 on the client, one log line on the
 * server, and a client connected meanwhile still served.
 * Certificates are made with the openssl program at test time.
 */
#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"

static char dir[64];

static void sh(const char *fmt, const char *a)
{
    char cmd[1024], inner[900];
    snprintf(inner, sizeof(inner), fmt, a, a, a, a, a, a, a, a);
    snprintf(cmd, sizeof(cmd), "cd %s && { %s; } >/dev/null 2>&1", dir, inner);
    cr_assert_eq(system(cmd), 0, "failed: %s", inner);
}

/* ca.crt signs server.crt (IP:127.0.0.1, DNS:store.test), expired.crt
 * (same names, validity over) and client.crt; other-ca.crt signs nothing
 * we use. */
static void setup(void)
{
    srv_need_openssl();
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-ctls"), 0);
    const char *self = "openssl req -x509 " TH_NEWKEY " -nodes -days 1 "
                       "-keyout %s.key -out %s.crt -subj /CN=%s";
    sh(self, "ca");
    sh(self, "other-ca");
    sh("printf 'subjectAltName=IP:127.0.0.1,DNS:store.test\\n' > %s.ext",
       "server");
    const char *csr = "openssl req " TH_NEWKEY " -nodes -keyout %s.key "
                      "-out %s.csr -subj /CN=%s";
    sh(csr, "server");
    sh(csr, "client");
    sh("openssl x509 -req -in %s.csr -CA ca.crt -CAkey ca.key "
       "-CAcreateserial -days 1 -extfile %s.ext -out %s.crt", "server");
    /* validity over: -days -1 (OpenSSL 3.0, Debian 12) or, where that is
     * refused (3.5, Debian 13), an explicit past window */
    sh("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key "
       "-CAcreateserial -days -1 -extfile server.ext -out %s.crt || "
       "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key "
       "-CAcreateserial -not_before 20200101000000Z -not_after "
       "20200102000000Z -extfile server.ext -out expired.crt", "expired");
    sh("openssl x509 -req -in %s.csr -CA ca.crt -CAkey ca.key "
       "-CAcreateserial -days 1 -out %s.crt", "client");
    sh("chmod 600 %s.key client.key", "server");
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(ctls, .init = setup, .fini = teardown, .timeout = 120);

static const char *path(char *buf, const char *name)
{
    snprintf(buf, 128, "%s/%s", dir, name);
    return buf;
}

/* A server with TLS from `cert` (and server.key); extra args after. */
static void start(struct srv *s, const char *cert, const char *a1,
                  const char *a2)
{
    char c[128], k[128];
    const char *argv[] = {"--tls-cert", path(c, cert), "--tls-key",
                          path(k, "server.key"), a1, a2, NULL};
    srv_start(s, argv);
}

/* A library handle over TLS, verified with ca.crt. */
static int lib_open(int port, const char *ca, const char *name,
                    fccl_store_t **out)
{
    char addr[TH_ADDR_LEN], cab[128];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, 5000);
    o.tls_ca = ca ? path(cab, ca) : NULL;
    o.tls_server_name = name;
    return fccl_store_connect(&o, out);
}

/* A verified connection with the client certificate (mutual TLS). */
static int lib_open_cert(int port, fccl_store_t **out)
{
    char addr[TH_ADDR_LEN], cab[128], crt[128], key[128];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, 5000);
    o.tls_ca = path(cab, "ca.crt");
    o.tls_cert = path(crt, "client.crt");
    o.tls_key = path(key, "client.key");
    return fccl_store_connect(&o, out);
}

/* tcpstore with `env` and `args` in the certificates' directory. */
static int run_cli(int port, const char *env, const char *args, char **out)
{
    return srv_tcpstore(port, dir, env, args, out);
}

static int log_lines(const struct srv *s) { return srv_log_count(s, "\n"); }

/* The server's log from line `from` on (malloc'd). */
static char *log_since(const struct srv *s, int from)
{
    char *log = srv_log(s), *p = log;
    for (int i = 0; i < from && p && *p; i++) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    char *tail = strdup(p ? p : "");
    free(log);
    return tail;
}

/* The failure case: exit 4, output naming `cause`, exactly `lines` new
 * server log lines (1 when the attempt reached the server, 0 when the
 * client refused before connecting), containing `logged` if not NULL,
 * and `bystander` still served. */
static void expect_refused(struct srv *s, fccl_store_t *bystander,
                           const char *env, const char *args,
                           const char *cause, int lines, const char *logged)
{
    int before = log_lines(s);
    char *out = NULL;
    int ex = run_cli(s->port, env, args, &out);
    cr_assert_eq(ex, 4, "exit %d, output: %s", ex, out);
    cr_assert(strstr(out, cause), "'%s' not in: %s", cause, out);
    free(out);
    /* The server may log just after the client gave up. */
    double end = th_now() + TH_IO_MS / 1e3;
    while (log_lines(s) < before + lines && th_ms_left(end) > 0)
        th_sleep_ms(10);
    th_sleep_ms(200); /* and nothing more follows */
    char *added = log_since(s, before);
    cr_assert_eq(log_lines(s) - before, lines, "%s: want %d server log "
                 "line(s), got:\n%s", args, lines, added);
    if (logged)
        cr_assert(strstr(added, logged), "'%s' not in: %s", logged, added);
    free(added);
    int64_t n = -1;
    cr_assert_eq(fccl_store_num_keys(bystander, &n), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_geq(n, 1);
}

Test(ctls, verified_connection_by_ip_and_by_name)
{
    struct srv s;
    start(&s, "server.crt", NULL, NULL);
    fccl_store_t *a, *b;
    cr_assert_eq(lib_open(s.port, "ca.crt", NULL, &a), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(lib_open(s.port, "ca.crt", "store.test", &b), FCCL_OK,
                 "%s", fccl_last_error());
    /* Large values and a wait woken by the other handle, inside TLS. */
    size_t big = 3u << 20;
    char *v = malloc(big);
    for (size_t i = 0; i < big; i++)
        v[i] = (char)(i * 7 + 1);
    cr_assert_eq(fccl_store_set(a, "big", v, big), FCCL_OK, "%s",
                 fccl_last_error());
    void *got = NULL;
    size_t len = 0;
    cr_assert_eq(fccl_store_get(b, "big", &got, &len, 5000), FCCL_OK);
    cr_assert_eq(len, big);
    cr_assert_eq(memcmp(got, v, big), 0);
    free(got);
    free(v);
    int64_t sum = 0;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(fccl_store_add(i % 2 ? a : b, "ctr", 1, &sum), FCCL_OK);
    cr_assert_eq(sum, 100);
    /* The CLI with the CA from the environment sees the same keys. */
    char *out = NULL;
    int ex = run_cli(s.port, "TCPSTORE_TLS_CA=ca.crt", "get ctr", &out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert_str_eq(out, "100");
    free(out);
    fccl_store_close(a);
    fccl_store_close(b);
    srv_finish(&s);
}

Test(ctls, mutual_tls)
{
    struct srv s;
    char ca[128];
    start(&s, "server.crt", "--tls-ca", path(ca, "ca.crt"));
    char *out = NULL;
    int ex = run_cli(s.port, "",
                     "--tls-ca ca.crt --tls-cert client.crt --tls-key "
                     "client.key set k v", &out);
    cr_assert_eq(ex, 0, "%s", out);
    free(out);
    ex = run_cli(s.port, "TCPSTORE_TLS_CA=ca.crt TCPSTORE_TLS_CERT=client.crt"
                 " TCPSTORE_TLS_KEY=client.key", "get k", &out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert_str_eq(out, "v");
    free(out);
    /* Without a client certificate: refused, the cause named, one line
     * in the server's log. */
    fccl_store_t *by;
    cr_assert_eq(lib_open_cert(s.port, &by), FCCL_OK, "%s", fccl_last_error());
    expect_refused(&s, by, "", "--tls-ca ca.crt get k", "client certificate",
                   1, "TLS: ");
    fccl_store_close(by);
    srv_finish(&s);
}

Test(ctls, each_failure_names_its_cause)
{
    struct srv s, plain;
    start(&s, "server.crt", "--tls-required", NULL);
    fccl_store_t *by;
    cr_assert_eq(lib_open(s.port, "ca.crt", NULL, &by), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(by, "here", "1", 1), FCCL_OK);
    /* Wrong CA: the server logs the failed handshake. */
    expect_refused(&s, by, "", "--tls-ca other-ca.crt get here",
                   "certificate is not accepted", 1, "TLS: ");
    /* Wrong name. */
    expect_refused(&s, by, "",
                   "--tls-ca ca.crt --tls-server-name other.test get here",
                   "--tls-server-name", 1, "TLS: ");
    /* Plain client against --tls-required. */
    expect_refused(&s, by, "", "get here", "tls-required", 1,
                   "plaintext connection refused (tls-required)");
    /* A key others can read. */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "cp %s/client.key %s/open.key && chmod 644 "
             "%s/open.key", dir, dir, dir);
    cr_assert_eq(system(cmd), 0);
    /* (refused by the client before it connects: nothing at the server) */
    expect_refused(&s, by, "", "--tls-cert client.crt --tls-key open.key "
                   "get here", "chmod 600", 0, NULL);
    fccl_store_close(by);
    srv_finish(&s);

    /* Expired certificate. */
    start(&s, "expired.crt", NULL, NULL);
    cr_assert_eq(lib_open(s.port, NULL, NULL, &by), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(by, "here", "1", 1), FCCL_OK);
    expect_refused(&s, by, "TCPSTORE_TLS_CA=ca.crt", "get here",
                   "certificate has expired", 1, "TLS: ");
    fccl_store_close(by);
    srv_finish(&s);

    /* TLS client against a plain server. */
    srv_start(&plain, NULL);
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, plain.port, 5000);
    cr_assert_eq(fccl_store_connect(&o, &by), FCCL_OK);
    cr_assert_eq(fccl_store_set(by, "here", "1", 1), FCCL_OK);
    expect_refused(&plain, by, "", "--tls-ca ca.crt get here",
                   "does not serve TLS", 1, "this server has no TLS");
    fccl_store_close(by);
    srv_finish(&plain);
}

Test(ctls, library_reports_bad_ca_without_retrying)
{
    struct srv s;
    start(&s, "server.crt", NULL, NULL);
    fccl_store_t *h = NULL;
    double t0 = th_now();
    int rc = lib_open(s.port, "other-ca.crt", NULL, &h);
    cr_assert_eq(rc, FCCL_ERR_AUTH, "rc %d: %s", rc, fccl_last_error());
    cr_assert_null(h);
    cr_assert(strstr(fccl_last_error(), "other-ca.crt"), "%s",
              fccl_last_error());
    /* Not retried until the 5 s timeout: a handshake or two. */
    cr_assert_lt(th_now() - t0, 4.0);
    srv_finish(&s);
}

/* A TLS handle whose server went away returns an error: no SIGPIPE kills
 * the calling process (SSL_write uses write(2), not MSG_NOSIGNAL). */
Test(ctls, server_gone_is_an_error_not_a_signal)
{
    struct srv s;
    start(&s, "server.crt", NULL, NULL);
    fccl_store_t *h;
    cr_assert_eq(lib_open(s.port, "ca.crt", NULL, &h), FCCL_OK, "%s",
                 fccl_last_error());
    cr_assert_eq(fccl_store_set(h, "k", "v", 1), FCCL_OK);
    srv_kill_hard(&s);
    char big[65536];
    memset(big, 'x', sizeof(big));
    int rc = FCCL_OK;
    for (int i = 0; i < 20 && rc == FCCL_OK; i++)
        rc = fccl_store_set(h, "k", big, sizeof(big));
    cr_assert_neq(rc, FCCL_OK);
    fccl_store_close(h);
    srv_cleanup(&s);
}

/* fccl_init through fccl-run --store with FCCL_STORE_TLS_* against a
 * server that requires TLS: the job runs, every rank joined. */
Test(ctls, fccl_init_over_tls, .timeout = 120)
{
    struct srv s;
    start(&s, "server.crt", "--tls-required", NULL);
    char env[256];
    snprintf(env, sizeof(env),
             "FCCL_STORE_TLS_CA=%s/ca.crt FCCL_STORE_TLS_SERVER_NAME=store.test",
             dir);
    srv_boot_check_job(s.port, env);
    char *log = srv_log(&s);
    cr_assert_eq(th_count(log, "plaintext connection refused"), 0, "%s", log);
    free(log);
    char *o2 = NULL;
    int ex = run_cli(s.port, "TCPSTORE_TLS_CA=ca.crt", "--raw-keys get init/",
                     &o2);
    cr_assert_eq(ex, 0, "%s", o2);
    cr_assert_str_eq(o2, "2");
    free(o2);
    srv_finish(&s);
}

/* The server refuses a TLS key that group or others can read. */
Test(ctls, server_refuses_an_open_key)
{
    char cmd[768], *out = NULL;
    snprintf(cmd, sizeof(cmd), "cp %s/server.key %s/open-server.key && "
             "chmod 640 %s/open-server.key && %s/tcpstore-server --port 0 "
             "--tls-cert %s/server.crt --tls-key %s/open-server.key",
             dir, dir, dir, th_bin_dir(), dir, dir);
    int ex = th_sh(cmd, 30, &out);
    cr_assert_eq(ex, 1, "exit %d: %s", ex, out);
    cr_assert(strstr(out, "open-server.key is readable or writable by "
                          "others (mode 0640)"), "%s", out);
    cr_assert(strstr(out, "chmod 600"), "%s", out);
    free(out);
}
