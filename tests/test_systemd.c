/*
 * The systemd unit as shipped.  `make install DESTDIR=STAGING` puts the
 * unit and the config in the tree; `systemd-analyze verify --root=STAGING`
 * of the unit is clean (no systemd runs here: verify only loads it); its
 * ExecStart names the staged server and config.  Then the server is run
 * the way the unit runs it (its ExecStart arguments, with
 * CREDENTIALS_DIRECTORY and STATE_DIRECTORY set as systemd sets them and
 * mode-0400 credential copies, and the relative credential names the
 * config documents): the journal is made in the state directory, the key,
 * certificate and token come from the credentials, a TLS + token client is
 * served, and after a restart its key is still there.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <libgen.h>
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
static char root[512], build[128]; /* the source tree, the build's name */

static void setup(void)
{
    char bin[512];
    snprintf(bin, sizeof(bin), "%s", th_bin_dir());
    char *b = dirname(bin), copy[512]; /* ROOT/BUILD */
    snprintf(copy, sizeof(copy), "%s", b);
    snprintf(build, sizeof(build), "%s", basename(copy));
    snprintf(root, sizeof(root), "%s", dirname(b));
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-systemd"), 0);
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(systemd, .init = setup, .fini = teardown, .timeout = 600);

/* The words of the unit's ExecStart= line (at most n-1, NULL-ended). */
static int exec_start(const char *unit, char **argv, int n, char *buf,
                      size_t len)
{
    FILE *f = fopen(unit, "r");
    cr_assert(f, "%s: %s", unit, strerror(errno));
    char line[1024];
    int found = 0;
    while (!found && fgets(line, sizeof(line), f))
        found = !strncmp(line, "ExecStart=", 10);
    fclose(f);
    cr_assert(found, "%s has no ExecStart=", unit);
    snprintf(buf, len, "%s", line + 10);
    int k = 0;
    for (char *save, *w = strtok_r(buf, " \n", &save); w && k < n - 1;
         w = strtok_r(NULL, " \n", &save))
        argv[k++] = w;
    argv[k] = NULL;
    return k;
}

static const char *value_of(char **argv, const char *opt)
{
    for (int i = 0; argv[i]; i++)
        if (!strcmp(argv[i], opt) && argv[i + 1])
            return argv[i + 1];
    return NULL;
}

Test(systemd, the_staged_unit_verifies_clean)
{
    if (strstr(build, "san"))
        cr_skip_test("make install of the sanitized tree is not supported");
    if (system("command -v systemd-analyze >/dev/null 2>&1") != 0)
        cr_skip_test("no systemd-analyze (scripts/install-deps.sh installs "
                     "systemd)");
    char stage[128], cmd[2048], *out = NULL;
    snprintf(stage, sizeof(stage), "%s/stage", dir);
    snprintf(cmd, sizeof(cmd),
             "make -s -C %s BUILD=%s install DESTDIR=%s PREFIX=/usr/local",
             root, build, stage);
    int rc = th_sh(cmd, 540, &out);
    cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
    free(out);

    char unit[256];
    snprintf(unit, sizeof(unit),
             "%s/usr/local/lib/systemd/system/tcpstore-server.service", stage);
    /* The staged man pages answer the unit's Documentation= link. */
    snprintf(cmd, sizeof(cmd),
             "MANPATH=%s/usr/local/share/man systemd-analyze verify "
             "--root=%s %s", stage, stage, unit);
    rc = th_sh(cmd, 120, &out);
    cr_assert_eq(rc, 0, "%s: exit %d\n%s", cmd, rc, out);
    cr_assert_str_eq(out, "", "systemd-analyze is not silent:\n%s", out);
    free(out);

    char buf[1024], *argv[16], p[512];
    exec_start(unit, argv, 16, buf, sizeof(buf));
    cr_assert_str_eq(argv[0], "/usr/local/bin/tcpstore-server");
    snprintf(p, sizeof(p), "%s%s", stage, argv[0]);
    cr_assert_eq(access(p, X_OK), 0, "%s is not executable", p);
    const char *conf = value_of(argv, "--config");
    cr_assert(conf, "ExecStart gives no --config");
    snprintf(p, sizeof(p), "%s%s", stage, conf);
    cr_assert_eq(access(p, R_OK), 0, "the unit's config %s is not installed",
                 p);
    cr_assert_str_eq(value_of(argv, "--journal"), "store.journal");
}

/* A credential as systemd hands it over: a copy, mode 0400. */
static void credential(const char *cred, const char *name, const char *src)
{
    char cmd[1024], *out;
    snprintf(cmd, sizeof(cmd), "cp %s %s/%s && chmod 0400 %s/%s", src, cred,
             name, cred, name);
    cr_assert_eq(th_sh(cmd, 10, &out), 0, "%s: %s", cmd, out);
    free(out);
}

static void start_like_the_unit(struct srv *s)
{
    char unit[768], buf[1024], *words[16], conf[768], bin[512];
    snprintf(unit, sizeof(unit), "%s/conf/tcpstore-server.service.in", root);
    int n = exec_start(unit, words, 16, buf, sizeof(buf));
    snprintf(conf, sizeof(conf), "%s/conf/tcpstore-server.conf", root);
    const char *argv[40];
    int k = 0;
    argv[k++] = th_bin("tcpstore-server", bin, sizeof(bin));
    for (int i = 1; i < n; i++)
        argv[k++] = !strcmp(words[i - 1], "--config") ? conf : words[i];
    /* Loopback on a free port, and what the config says to write for the
     * unit's credentials. */
    const char *extra[] = {"--host", "127.0.0.1", "--port", "0",
                           "--tls-cert", "fccl-store.crt",
                           "--tls-key", "fccl-store.key", "--tls-required",
                           "--token-file", "fccl-store.token",
                           "--auth-required", NULL};
    for (int i = 0; extra[i]; i++)
        argv[k++] = extra[i];
    argv[k] = NULL;
    srv_start_argv(s, argv, 20);
}

static fccl_store_t *client(int port, const char *ca, const char *tok)
{
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, 5000);
    o.tls_ca = ca;
    o.token_file = tok;
    fccl_store_t *st = NULL;
    cr_assert_eq(fccl_store_connect(&o, &st), FCCL_OK, "%s",
                 fccl_last_error());
    return st;
}

Test(systemd, the_server_runs_as_the_unit_runs_it)
{
    srv_need_openssl();
    char cred[128], state[128], src[128], key[128], tok[128], jrn[192];
    snprintf(cred, sizeof(cred), "%s/credentials", dir);
    snprintf(state, sizeof(state), "%s/state", dir);
    cr_assert_eq(mkdir(cred, 0700), 0);
    cr_assert_eq(mkdir(state, 0700), 0);
    snprintf(src, sizeof(src), "%s/store.crt", dir);
    snprintf(key, sizeof(key), "%s/store.key", dir);
    snprintf(tok, sizeof(tok), "%s/store.token", dir);
    srv_make_cert(src, key, "store");
    FILE *f = fopen(tok, "w");
    cr_assert(f);
    fputs("systemd-credential-token-0123\n", f);
    fclose(f);
    cr_assert_eq(chmod(tok, 0600), 0);
    credential(cred, "fccl-store.crt", src);
    credential(cred, "fccl-store.key", key);
    credential(cred, "fccl-store.token", tok);
    setenv("CREDENTIALS_DIRECTORY", cred, 1);
    setenv("STATE_DIRECTORY", state, 1);
    /* The working directory is not where anything goes. */
    cr_assert_eq(chdir(dir), 0);

    struct srv s = {0};
    start_like_the_unit(&s);
    snprintf(jrn, sizeof(jrn), "%s/store.journal", state);
    struct stat sb;
    cr_assert_eq(stat(jrn, &sb), 0, "no journal in STATE_DIRECTORY:\n%s",
                 srv_log(&s));
    cr_assert_eq(sb.st_mode & 0777, 0600);
    cr_assert_neq(access("store.journal", F_OK), 0);
    cr_assert(srv_log_count(&s, "from $CREDENTIALS_DIRECTORY") >= 3, "%s",
              srv_log(&s));
    fccl_store_t *st = client(s.port, src, tok);
    cr_assert_eq(fccl_store_set(st, "unit", "works", 5), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_store_close(st);
    srv_finish(&s);

    start_like_the_unit(&s);
    st = client(s.port, src, tok);
    srv_expect_cstr(st, "unit", "works");
    fccl_store_close(st);
    srv_finish(&s);
}
