/*
 * tcpstore-server's status port (--http): /metrics parsed as Prometheus
 * text and checked against a known workload (N SETs and M GETs sent as
 * raw frames, so every request and byte count is computed here from the
 * frames themselves), refused writes by reason, waiters, the journal's
 * figures; /status.json (workers against the world size, keys by prefix,
 * a parked barrier, clients by address); the tokens in front of
 * everything but /healthz (Bearer with either token, Basic, wrong and
 * missing ones); loopback unless --http-public; and the page in a real
 * headless browser (Debian's chromium): the numbers of a job in its DOM
 * after its script ran, and a screenshot in the test's directory.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fccl/core.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/wire.h"

#define M DIALECT_MODERN

static char dir[64];
static char http[64]; /* HOST:PORT of the status port */

static void setup(void)
{
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-http"), 0);
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(http, .init = setup, .fini = teardown, .timeout = 180);

static void need(const char *prog)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
    if (system(cmd) != 0)
        cr_skip_test("no %s here (scripts/install-deps.sh installs it)",
                     prog);
}

/* tcpstore-server on loopback with a status port on a free port. */
static void start(struct srv *s, const char *const *extra)
{
    const char *argv[24] = {"--http", "127.0.0.1:0"};
    int n = 2;
    for (; extra && *extra && n < 22; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    srv_start_local(s, argv);
    char *log = srv_log(s);
    const char *p = strstr(log, "status page on http://");
    cr_assert(p, "no status page line in:\n%s", log);
    p += strlen("status page on http://");
    size_t len = strcspn(p, "/");
    cr_assert_lt(len, sizeof(http));
    memcpy(http, p, len);
    http[len] = '\0';
    free(log);
}

/* GET path with curl's extra `args`: the status code; *body the body
 * (malloc'd). */
static int curl(const char *args, const char *path, char **body)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "curl -s -S -m 10 %s -w '\\n%%{http_code}' 'http://%s%s'", args,
             http, path);
    int rc = th_sh(cmd, 30, &out);
    cr_assert_eq(rc, 0, "%s: exit %d: %s", cmd, rc, out);
    char *last = strrchr(out, '\n');
    cr_assert(last, "%s: %s", cmd, out);
    int code = atoi(last + 1);
    *last = '\0';
    *body = out;
    return code;
}

static char *get_ok(const char *args, const char *path)
{
    char *body;
    int code = curl(args, path, &body);
    cr_assert_eq(code, 200, "GET %s: %d %s", path, code, body);
    return body;
}

/* ---- the Prometheus text ---- */

/* Every line is a HELP, a TYPE, or a sample of a family typed before it,
 * "name[{label="value",...}] number". */
static void check_format(const char *text)
{
    char typed[8192] = " ";
    int samples = 0;
    for (const char *p = text; *p;) {
        const char *eol = strchr(p, '\n');
        cr_assert(eol, "the text must end with a newline");
        char line[512];
        size_t n = (size_t)(eol - p);
        cr_assert_lt(n, sizeof(line));
        memcpy(line, p, n);
        line[n] = '\0';
        p = eol + 1;
        char name[128], kind[32];
        if (sscanf(line, "# TYPE %127s %31s", name, kind) == 2) {
            cr_assert(!strcmp(kind, "counter") || !strcmp(kind, "gauge") ||
                      !strcmp(kind, "histogram"), "%s", line);
            strcat(typed, name);
            strcat(typed, " ");
            continue;
        }
        if (!strncmp(line, "# HELP fccl_store_", 18))
            continue;
        size_t nl = strcspn(line, "{ ");
        cr_assert(nl > 0 && nl < sizeof(name), "%s", line);
        memcpy(name, line, nl);
        name[nl] = '\0';
        char key[140];
        snprintf(key, sizeof(key), " %s ", name);
        if (!strstr(typed, key)) { /* a histogram's _bucket, _sum, _count */
            static const char *const sfx[] = {"_bucket", "_sum", "_count"};
            for (int i = 0; i < 3; i++) {
                size_t sl = strlen(sfx[i]);
                if (nl > sl && !strcmp(name + nl - sl, sfx[i]))
                    name[nl - sl] = '\0';
            }
            snprintf(key, sizeof(key), " %s ", name);
        }
        cr_assert(strstr(typed, key), "sample before its TYPE: %s", line);
        const char *v = strrchr(line, ' ');
        char *end;
        cr_assert(v, "%s", line);
        strtod(v + 1, &end);
        cr_assert(*end == '\0' && end > v + 1, "bad value: %s", line);
        samples++;
    }
    cr_assert_gt(samples, 40);
}

/* The value of one series, e.g. `fccl_store_keys` or
 * `fccl_store_requests_total{type="SET"}`. */
static double series(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p;) {
        if (!strncmp(p, name, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    cr_assert_fail("no series %s in:\n%s", name, text);
    return -1;
}

static char *metrics(const char *auth)
{
    char *m = get_ok(auth, "/metrics");
    check_format(m);
    return m;
}

Test(http, metrics_count_a_known_workload)
{
    struct srv s = {0};
    start(&s, (const char *[]){"--max-total-bytes", "4KiB", NULL});
    enum { NSET = 7, NGET = 5 };
    struct codec_buf b;
    codec_buf_init(&b);
    uint64_t set_bytes = 0, get_bytes = 0, sent = 0, valid_bytes;
    int fd = cli_connect(s.port);
    f_validate(&b);
    valid_bytes = b.len;
    cli_send(fd, &b);
    char k[32], v[32];
    for (int i = 0; i < NSET; i++) {
        snprintf(k, sizeof(k), "/job/a/k%d", i);
        snprintf(v, sizeof(v), "value-%d", i * 111);
        f_set(&b, M, k, v);
        set_bytes += b.len;
        cli_send(fd, &b);
    }
    for (int i = 0; i < NGET; i++) {
        snprintf(k, sizeof(k), "/job/a/k%d", i);
        snprintf(v, sizeof(v), "value-%d", i * 111);
        f_key(&b, M, OP_GET, k);
        get_bytes += b.len;
        cli_send(fd, &b);
        cli_expect_cstr(fd, v);
        sent += 8 + strlen(v); /* u64 length + the value */
    }
    /* A second client parks a WAIT. */
    int waiter = cli_modern(s.port);
    f_wait1(&b, M, "/never");
    uint64_t wait_bytes = b.len;
    cli_send(waiter, &b);
    cli_expect_silence(waiter, 100);

    char *m = metrics("");
    cr_assert_eq(series(m, "fccl_store_requests_total{type=\"SET\"}"), NSET);
    cr_assert_eq(series(m, "fccl_store_requests_total{type=\"GET\"}"), NGET);
    cr_assert_eq(series(m, "fccl_store_requests_total{type=\"VALIDATE\"}"),
                 2);
    cr_assert_eq(series(m, "fccl_store_requests_total{type=\"WAIT\"}"), 1);
    cr_assert_eq(series(m, "fccl_store_requests_total{type=\"ADD\"}"), 0);
    cr_assert_eq(series(m, "fccl_store_request_bytes_total{type=\"SET\"}"),
                 (double)set_bytes);
    cr_assert_eq(series(m, "fccl_store_request_bytes_total{type=\"GET\"}"),
                 (double)get_bytes);
    cr_assert_eq(series(m, "fccl_store_received_bytes_total"),
                 (double)(2 * valid_bytes + set_bytes + get_bytes +
                          wait_bytes));
    cr_assert_eq(series(m, "fccl_store_sent_bytes_total"), (double)sent);
    cr_assert_eq(series(m, "fccl_store_keys"), NSET);
    cr_assert_eq(series(m, "fccl_store_connections"), 2);
    cr_assert_eq(series(m, "fccl_store_waiters"), 1);
    cr_assert_eq(series(m, "fccl_store_journal_enabled"), 0);
    cr_assert_eq(series(m,
                        "fccl_store_writes_refused_total{reason=\"limit\"}"),
                 0);
    free(m);

    /* A write over the byte limit, from a client that asked for SYNC. */
    int sync = cli_modern(s.port);
    put_op(&b, M, OP_SYNC);
    cli_send(sync, &b);
    cli_expect_u8(sync, 0);
    char big[5000];
    memset(big, 'x', sizeof(big));
    f_kv(&b, M, OP_SET, "/big", big, sizeof(big));
    put_op(&b, M, OP_SYNC);
    cli_send(sync, &b);
    uint8_t code;
    cli_read(sync, &code, 1);
    cr_assert_neq(code, 0, "the SET over the limit was accepted");
    m = metrics("");
    cr_assert_eq(series(m,
                        "fccl_store_writes_refused_total{reason=\"limit\"}"),
                 1);
    cr_assert_eq(series(m, "fccl_store_keys"), NSET);
    free(m);
    close(sync);
    close(waiter);
    close(fd);
    codec_buf_free(&b);
    srv_finish(&s);
}

Test(http, journal_figures_and_healthz)
{
    struct srv s = {0};
    char j[128];
    snprintf(j, sizeof(j), "%s/store.journal", dir);
    start(&s, (const char *[]){"--journal", j, NULL});
    fccl_store_t *st = srv_store_open(s.port, 0);
    for (int i = 0; i < 10; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        cr_assert_eq(fccl_store_set(st, k, "v", 1), FCCL_OK);
    }
    char *m = metrics("");
    cr_assert_eq(series(m, "fccl_store_journal_enabled"), 1);
    cr_assert_eq(series(m, "fccl_store_journal_failed"), 0);
    double n = series(m, "fccl_store_journal_sync_seconds_count");
    cr_assert_geq(n, 10, "every confirmed SET waits for an fdatasync");
    cr_assert_eq(series(m, "fccl_store_journal_sync_seconds_bucket"
                           "{le=\"+Inf\"}"), n);
    cr_assert_gt(series(m, "fccl_store_journal_sync_seconds_sum"), 0);
    cr_assert_gt(series(m, "fccl_store_journal_bytes"), 10 * 20);
    free(m);
    char *h = get_ok("", "/healthz");
    cr_assert_str_eq(h, "ok\n");
    free(h);
    char *body;
    cr_assert_eq(curl("", "/nothing-here", &body), 404);
    free(body);
    int code = curl("-X POST", "/metrics", &body);
    cr_assert(code == 405 || code == 501, "POST: %d %s", code, body);
    free(body);
    fccl_store_close(st);
    srv_finish(&s);
}

/* ---- the status page's data ---- */

static void barrier(int fd, const char *key, int64_t n)
{
    struct codec_buf b;
    codec_buf_init(&b);
    put_op(&b, M, OP_BARRIER);
    put_key(&b, key);
    codec_put_i64(&b, n);
    cli_send(fd, &b);
    codec_buf_free(&b);
}

/* A small job's traces: 2 of 4 workers joined (init/), 3 keys under one
 * job's prefix and 2 plain ones, one barrier with 1 of 3 arrived (its
 * counter is a key too). */
static void job(int port, int *fds)
{
    struct codec_buf b;
    codec_buf_init(&b);
    for (int i = 0; i < 2; i++) {
        fds[i] = cli_modern(port);
        f_add(&b, M, "init/", 1);
        cli_send(fds[i], &b);
        cli_expect_i64(fds[i], i + 1);
    }
    f_set(&b, M, "/fccl/jobA/rank0", "0123456789");
    f_set(&b, M, "/fccl/jobA/rank1", "0123456789");
    f_set(&b, M, "/fccl/jobA/rank2", "0123456789");
    f_set(&b, M, "/alpha", "1");
    f_set(&b, M, "/beta", "2");
    cli_send(fds[0], &b);
    cr_assert_eq(cli_numkeys(fds[0], M), 6); /* and init/ */
    barrier(fds[1], "/step", 3);
    cli_expect_silence(fds[1], 100);
    codec_buf_free(&b);
}

Test(http, status_json_shows_the_job)
{
    struct srv s = {0};
    start(&s, (const char *[]){"--world-size", "4", NULL});
    int fds[2];
    job(s.port, fds);
    char *j = get_ok("", "/status.json");
    cr_assert(strstr(j, "\"world_size\":4,\"joined\":2"), "%s", j);
    cr_assert(strstr(j, "{\"prefix\":\"/fccl/jobA/\",\"keys\":3,"
                        "\"bytes\":78}"), "%s", j); /* 3 x (16 + 10) */
    /* "/alpha" "1", "/beta" "2" and the barrier's counter "/step" "1" */
    cr_assert(strstr(j, "{\"prefix\":\"/\",\"keys\":3,\"bytes\":19}"),
              "%s", j);
    cr_assert(strstr(j, "{\"prefix\":\"init/\",\"keys\":1,\"bytes\":6}"),
              "%s", j);
    cr_assert(strstr(j, "{\"key\":\"/step\",\"arrived\":1,\"target\":3,"
                        "\"waiting\":1}"), "%s", j);
    cr_assert(strstr(j, "{\"addr\":\"127.0.0.1\",\"connections\":2,"
                        "\"tls\":0,\"waiting\":1"), "%s", j);
    cr_assert(strstr(j, "\"connections\":2,\"keys\":7"), "%s", j);
    free(j);
    close(fds[0]);
    close(fds[1]);
    srv_finish(&s);
}

/* ---- tokens and exposure ---- */

static void write_token(const char *name, const char *text)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    cr_assert(f);
    fprintf(f, "%s\n", text);
    fclose(f);
    cr_assert_eq(chmod(p, 0600), 0);
}

#define RW_TOKEN "http-read-write-token-0123"
#define RO_TOKEN "http-read-only-token-abcde"

Test(http, tokens_guard_everything_but_healthz)
{
    write_token("rw", RW_TOKEN);
    write_token("ro", RO_TOKEN);
    char rw[128], ro[128];
    snprintf(rw, sizeof(rw), "%s/rw", dir);
    snprintf(ro, sizeof(ro), "%s/ro", dir);
    struct srv s = {0};
    start(&s, (const char *[]){"--token-file", rw, "--read-token-file", ro,
                               NULL});
    char *body;
    cr_assert_eq(curl("", "/healthz", &body), 200);
    free(body);
    const char *paths[] = {"/metrics", "/status.json", "/"};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(curl("", paths[i], &body), 401, "%s open", paths[i]);
        free(body);
        cr_assert_eq(curl("-H 'Authorization: Bearer not-the-token-xyz'",
                          paths[i], &body), 401);
        free(body);
        cr_assert_eq(curl("-H 'Authorization: Bearer " RO_TOKEN "'",
                          paths[i], &body), 200, "%s: %s", paths[i], body);
        free(body);
        cr_assert_eq(curl("-H 'Authorization: Bearer " RW_TOKEN "'",
                          paths[i], &body), 200);
        free(body);
        cr_assert_eq(curl("-u 'someone:" RO_TOKEN "'", paths[i], &body),
                     200);
        free(body);
        cr_assert_eq(curl("-u 'someone:wrong'", paths[i], &body), 401);
        free(body);
    }
    cr_assert_eq(curl("-D - -o /dev/null", "/metrics", &body), 401);
    cr_assert(strstr(body, "WWW-Authenticate: Basic"), "%s", body);
    free(body);
    srv_finish(&s);
}

Test(http, beyond_loopback_needs_http_public)
{
    char *out = NULL;
    int rc = srv_run((const char *[]){"tcpstore-server", "--port", "0",
                                      "--http", "0.0.0.0:0", NULL},
                     10000, &out);
    cr_assert_eq(rc, 2, "exit %d: %s", rc, out);
    cr_assert(strstr(out, "http-public"), "%s", out);
    free(out);
    struct srv s = {0};
    srv_start(&s, (const char *[]){"--http", "0.0.0.0:0", "--http-public",
                                   NULL});
    cr_assert(srv_log_wait(&s, "status port 0.0.0.0:0 is public", TH_IO_MS),
              "no warning for a public status page without a token:\n%s",
              srv_log(&s));
    srv_finish(&s);
}

/* ---- the page in a browser ---- */

/* chromium headless on url: --dump-dom once the page's script ran (into
 * *dom, malloc'd), or a screenshot into png. */
static int chromium(const char *url, const char *png, char **dom)
{
    char cmd[2048], profile[128];
    snprintf(profile, sizeof(profile), "%s/profile-XXXXXX", dir);
    cr_assert(mkdtemp(profile), "mkdtemp: %s", strerror(errno));
    int n = snprintf(cmd, sizeof(cmd),
                     "chromium --headless --no-sandbox --disable-gpu "
                     "--disable-background-networking "
                     "--disable-component-update --disable-sync "
                     "--no-first-run --user-data-dir=%s "
                     "--virtual-time-budget=3000 ", profile);
    if (png)
        snprintf(cmd + n, sizeof(cmd) - (size_t)n,
                 "--screenshot=%s --window-size=1200,900 '%s' 2>/dev/null",
                 png, url);
    else
        snprintf(cmd + n, sizeof(cmd) - (size_t)n,
                 "--dump-dom '%s' 2>/dev/null", url);
    return th_sh(cmd, 90, dom);
}

static void expect_in(const char *dom, const char *text)
{
    cr_assert(strstr(dom, text), "the page lacks '%s':\n%s", text, dom);
}

Test(http, the_page_in_a_headless_browser)
{
    need("chromium");
    write_token("rw", RW_TOKEN);
    char rw[128];
    snprintf(rw, sizeof(rw), "%s/rw", dir);
    struct srv s = {0};
    start(&s, (const char *[]){"--world-size", "4", "--token-file", rw,
                               NULL});
    int fds[2];
    job(s.port, fds);
    char url[256], *dom = NULL;
    /* The browser answers the page's Basic challenge with the URL's
     * credentials and repeats them for the page's own fetches. */
    snprintf(url, sizeof(url), "http://viewer:" RW_TOKEN "@%s/", http);
    int rc = chromium(url, NULL, &dom);
    cr_assert_eq(rc, 0, "chromium exit %d: %s", rc, dom);
    expect_in(dom, "<span id=\"joined\">2</span>");
    expect_in(dom, "<span id=\"world\">4</span>");
    expect_in(dom, "<b id=\"keys\">7</b>");
    expect_in(dom, "<b id=\"conns\">2</b>");
    expect_in(dom, "<b id=\"waiters\">1</b>"); /* the parked barrier */
    expect_in(dom, "<code>/fccl/jobA/</code></td><td class=\"n\">3</td>"
                   "<td class=\"n\">78</td>");
    expect_in(dom, "<code>/step</code></td><td class=\"n\">1</td>"
                   "<td class=\"n\">3</td><td class=\"n\">1</td>");
    expect_in(dom, "<td>127.0.0.1</td><td class=\"n\">2</td>");
    expect_in(dom, "<td>SET</td><td class=\"n\">5</td>");
    cr_assert_null(strstr(dom, "class=\"err\""), "%s", dom);
    free(dom);

    char png[128];
    snprintf(png, sizeof(png), "%s/status-page.png", dir);
    rc = chromium(url, png, &dom);
    cr_assert_eq(rc, 0, "chromium exit %d: %s", rc, dom);
    free(dom);
    FILE *f = fopen(png, "rb");
    cr_assert(f, "no screenshot at %s", png);
    unsigned char sig[8];
    cr_assert_eq(fread(sig, 1, 8, f), 8);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fclose(f);
    cr_assert(!memcmp(sig, "\x89PNG\r\n\x1a\n", 8), "not a PNG");
    cr_assert_gt(size, 10000, "a %ld-byte screenshot is a blank one", size);
    const char *keep = getenv("FCCL_KEEP_SCREENSHOT");
    if (keep && *keep) {
        char cmd[512], *o;
        snprintf(cmd, sizeof(cmd), "cp %s %s", png, keep);
        cr_assert_eq(th_sh(cmd, 10, &o), 0, "%s", o);
        free(o);
    }
    close(fds[0]);
    close(fds[1]);
    srv_finish(&s);
}
