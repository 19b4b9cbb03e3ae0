/*
 * The server's options (fccl/server.h): defaults, setting one by its
 * tcpstore-server name, config files, and the checks of the whole set.
 * Every option is a row of one table (name, alias, kind, field), so a
 * config file, a command line, fccl_server_opts_set() and Python's
 * TCPStore(is_master=True) read the same names the same way.
 */
#include "fccl/server.h"

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "net.h"
#include "server_int.h"

void fccl_server_opts_init(fccl_server_opts_t *c)
{
    if (!c)
        return;
    memset(c, 0, sizeof(*c));
    c->port = FCCL_SERVER_DEFAULT_PORT;
    c->timeout_ms = FCCL_DEFAULT_TIMEOUT_MS;
    c->max_key = 8ull << 10;
    c->max_value = 64ull << 20;
    c->max_keys_per_req = 131072;
    c->max_conns = 65536;
    c->max_total_bytes = 4ull << 30;
    c->max_conns_per_addr = FCCL_SERVER_PER_ADDR_AUTO;
    c->request_timeout_ms = 30000;
    c->handshake_timeout_ms = 10000;
    c->log_level = -1;
    c->fsync_interval_ms = 100;
}

/* ---- value parsers ---- */

/* "64MiB", "8k", "1G", "4096" -> bytes; -1 if malformed. */
static int parse_size(const char *s, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    while (*end == ' ')
        end++;
    unsigned shift = 0;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: return -1;
        }
        end++;
        if (strcasecmp(end, "ib") != 0 && strcasecmp(end, "b") != 0 &&
            *end != '\0')
            return -1;
    }
    if (shift && v > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, int *out)
{
    static const char *const yes[] = {"", "1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (strcasecmp(s, yes[i]) == 0)
            return *out = 1, 0;
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (strcasecmp(s, no[i]) == 0)
            return *out = 0, 0;
    return -1;
}

static int bad(const char *key, const char *value, const char *why)
{
    return fccl_err(FCCL_ERR_INVALID, "option %s: bad value '%s' (%s)", key,
                    value, why);
}

/* ---- the table ---- */

enum opt_kind {
    K_HOST,     /* listening address: "*" and "[v6]" accepted */
    K_INT,      /* integer in [lo, hi], into an int or an int64_t */
    K_BOOL,
    K_SECONDS,  /* seconds (fractions allowed) into an int64_t of ms */
    K_SIZE,     /* bytes with K/M/G suffixes into a uint64_t */
    K_PATH,     /* a path into a char array */
    K_FSYNC,    /* always | interval | never */
    K_LOGLEVEL, /* error .. trace */
    K_HTTP,     /* the status port: PORT or HOST:PORT */
    K_PER_ADDR, /* a size, or "auto" (FCCL_SERVER_PER_ADDR_AUTO) */
};

struct opt {
    const char *name, *alias;
    enum opt_kind kind;
    size_t off, size; /* the field */
    long lo, hi;      /* K_INT's range */
};

#define FIELD(f) offsetof(fccl_server_opts_t, f), \
                 sizeof(((fccl_server_opts_t *)0)->f)

/* One row per option: the repetition is the table. */
static const struct opt OPTS[] = {
    {"host", NULL, K_HOST, FIELD(host), 0, 0},
    {"port", NULL, K_INT, FIELD(port), 0, 65535},
    {"world-size", NULL, K_INT, FIELD(world_size), 0, 1 << 24},
    {"wait-for-workers", NULL, K_BOOL, FIELD(wait_for_workers), 0, 0},
    {"timeout", NULL, K_SECONDS, FIELD(timeout_ms), 0, 0},
    {"max-key-bytes", "max-key", K_SIZE, FIELD(max_key), 0, 0},
    {"max-value-bytes", "max-value", K_SIZE, FIELD(max_value), 0, 0},
    {"max-keys-per-request", "max-keys", K_SIZE, FIELD(max_keys_per_req),
     0, 0},
    {"max-connections", "max-conns", K_SIZE, FIELD(max_conns), 0, 0},
    {"max-total-bytes", NULL, K_SIZE, FIELD(max_total_bytes), 0, 0},
    {"max-connections-per-addr", NULL, K_PER_ADDR,
     FIELD(max_conns_per_addr), 0, 0},
    {"request-timeout", NULL, K_SECONDS, FIELD(request_timeout_ms), 0, 0},
    {"handshake-timeout", NULL, K_SECONDS, FIELD(handshake_timeout_ms), 0,
     0},
    {"journal-recover", NULL, K_BOOL, FIELD(journal_recover), 0, 0},
    {"tls-cert", NULL, K_PATH, FIELD(tls_cert), 0, 0},
    {"tls-key", NULL, K_PATH, FIELD(tls_key), 0, 0},
    {"tls-ca", NULL, K_PATH, FIELD(tls_ca), 0, 0},
    {"tls-required", NULL, K_BOOL, FIELD(tls_required), 0, 0},
    {"token-file", NULL, K_PATH, FIELD(token_file), 0, 0},
    {"read-token-file", NULL, K_PATH, FIELD(read_token_file), 0, 0},
    {"auth-required", NULL, K_BOOL, FIELD(auth_required), 0, 0},
    {"journal", NULL, K_PATH, FIELD(journal), 0, 0},
    {"fsync", NULL, K_FSYNC, FIELD(fsync_mode), 0, 0},
    {"fsync-interval-ms", NULL, K_INT, FIELD(fsync_interval_ms), 1,
     3600000},
    {"http", NULL, K_HTTP, FIELD(http), 0, 0},
    {"http-public", NULL, K_BOOL, FIELD(http_public), 0, 0},
    {"backend", NULL, K_PATH, FIELD(backend), 0, 0},
    {"backend-user", NULL, K_PATH, FIELD(backend_user), 0, 0},
    {"backend-password-file", NULL, K_PATH, FIELD(backend_password_file), 0,
     0},
    {"backend-tls-ca", NULL, K_PATH, FIELD(backend_tls_ca), 0, 0},
    {"backend-tls-cert", NULL, K_PATH, FIELD(backend_tls_cert), 0, 0},
    {"backend-tls-key", NULL, K_PATH, FIELD(backend_tls_key), 0, 0},
    {"log-level", NULL, K_LOGLEVEL, FIELD(log_level), 0, 0},
};

/* Option names with '_' read as '-'. */
static void normalize(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; in[i] && i + 1 < n; i++)
        out[i] = in[i] == '_' ? '-' : (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
}

static const struct opt *find_opt(const char *name)
{
    char k[64];
    normalize(name, k, sizeof(k));
    for (size_t i = 0; i < sizeof(OPTS) / sizeof(OPTS[0]); i++)
        if (!strcmp(k, OPTS[i].name) ||
            (OPTS[i].alias && !strcmp(k, OPTS[i].alias)))
            return &OPTS[i];
    return NULL;
}

static void put_int(void *field, size_t size, int64_t v)
{
    if (size == sizeof(int))
        *(int *)field = (int)v;
    else
        *(int64_t *)field = v;
}

/* src[0..len) into dst (n bytes); `value` names it in the error. */
static int put_text(char *dst, size_t n, const char *key, const char *value,
                    const char *src, size_t len)
{
    if (len >= n)
        return bad(key, value, "too long");
    memcpy(dst, src, len);
    dst[len] = '\0';
    return FCCL_OK;
}

static int set_host(char *dst, size_t n, const char *key, const char *value)
{
    const char *h = value;
    if (strcmp(h, "*") == 0)
        h = "";
    size_t len = strlen(h);
    /* "[::1]" is accepted as the bare address. */
    if (len >= 2 && h[0] == '[' && h[len - 1] == ']') {
        h++;
        len -= 2;
    }
    return put_text(dst, n, key, value, h, len);
}

/* "PORT" (on loopback), "HOST:PORT", "[V6]:PORT" or "*:PORT" (every
 * interface), kept as "HOST:PORT" with "*" for every interface. */
static int set_http(char *dst, size_t n, const char *key, const char *value)
{
    char host[FCCL_HOST_MAX], buf[FCCL_HOST_MAX + 16];
    long port;
    if (!*value) {
        dst[0] = '\0';
        return FCCL_OK;
    }
    if (parse_long(value, 0, 65535, &port) == 0) {
        snprintf(buf, sizeof(buf), "127.0.0.1:%ld", port);
    } else {
        int p;
        if (fccl_addr_parse(value, host, sizeof(host), &p) < 0 || !host[0])
            return bad(key, value, "expected PORT or HOST:PORT");
        fccl_addr_format(buf, sizeof(buf), host, p);
    }
    size_t len = strlen(buf);
    if (len >= n)
        return bad(key, value, "too long");
    memcpy(dst, buf, len + 1);
    return FCCL_OK;
}

static int set_fsync(int *dst, const char *key, const char *value)
{
    static const char *const modes[] = {"always", "interval", "never"};
    for (int i = 0; i < 3; i++)
        if (strcasecmp(value, modes[i]) == 0)
            return *dst = i, FCCL_OK;
    return bad(key, value, "expected always, interval or never");
}

static int apply(const struct opt *o, void *field, const char *key,
                 const char *value)
{
    long v;
    int b;
    uint64_t sz;
    int64_t ms;
    switch (o->kind) {
    case K_HOST:
        return set_host(field, o->size, key, value);
    case K_INT:
        if (parse_long(value, o->lo, o->hi, &v) < 0) {
            char why[64];
            snprintf(why, sizeof(why), "expected %ld..%ld", o->lo, o->hi);
            return bad(key, value, why);
        }
        put_int(field, o->size, v);
        return FCCL_OK;
    case K_BOOL:
        if (parse_bool(value, &b) < 0)
            return bad(key, value, "expected true or false");
        *(int *)field = b;
        return FCCL_OK;
    case K_SECONDS:
        if ((ms = fccl_parse_seconds_ms(value)) < 0)
            return bad(key, value, "expected seconds >= 0");
        *(int64_t *)field = ms;
        return FCCL_OK;
    case K_SIZE:
        if (parse_size(value, &sz) < 0)
            return bad(key, value, "expected a size such as 4096, 8KiB, "
                       "64MiB");
        *(uint64_t *)field = sz;
        return FCCL_OK;
    case K_PATH:
        return put_text(field, o->size, key, value, value, strlen(value));
    case K_FSYNC:
        return set_fsync(field, key, value);
    case K_LOGLEVEL:
        if ((b = fccl_log_parse_level(value)) < 0)
            return bad(key, value, "expected error|warn|info|debug|trace");
        *(int *)field = b;
        return FCCL_OK;
    case K_HTTP:
        return set_http(field, o->size, key, value);
    case K_PER_ADDR:
        if (strcasecmp(value, "auto") == 0) {
            *(uint64_t *)field = FCCL_SERVER_PER_ADDR_AUTO;
            return FCCL_OK;
        }
        if (parse_size(value, &sz) < 0)
            return bad(key, value, "expected auto or a count");
        *(uint64_t *)field = sz;
        return FCCL_OK;
    }
    return fccl_err(FCCL_ERR_INVALID, "option %s: unhandled kind", key);
}

int fccl_server_opts_set(fccl_server_opts_t *c, const char *key,
                         const char *value)
{
    if (!c || !key || !value)
        return fccl_err(FCCL_ERR_INVALID, "option without name or value");
    const struct opt *o = find_opt(key);
    if (!o)
        return fccl_err(FCCL_ERR_INVALID, "unknown option '%s'", key);
    return apply(o, (char *)c + o->off, key, value);
}

/* ---- the checks of the whole set ---- */

static int check_http(const fccl_server_opts_t *c)
{
    char host[FCCL_HOST_MAX];
    int port;
    if (!c->http[0])
        return FCCL_OK;
    if (fccl_addr_parse(c->http, host, sizeof(host), &port) < 0)
        return fccl_err(FCCL_ERR_INVALID, "http '%s': expected HOST:PORT",
                        c->http);
    if (!c->http_public && !store_is_loopback(host))
        return fccl_err(FCCL_ERR_INVALID,
                        "http %s listens beyond loopback: the status page "
                        "shows every client and key prefix; add "
                        "http-public to allow it", c->http);
    return FCCL_OK;
}

int fccl_server_opts_check(const fccl_server_opts_t *c)
{
    if (!c)
        return fccl_err(FCCL_ERR_INVALID, "server options: NULL");
    if (c->port < 0 || c->port > 65535)
        return fccl_err(FCCL_ERR_INVALID, "port %d out of range", c->port);
    if (c->max_key < 1 || c->max_key > FCCL_SERVER_MAX_KEY_CAP)
        return fccl_err(FCCL_ERR_INVALID,
                        "max-key-bytes %llu: must be 1..%llu",
                        (unsigned long long)c->max_key,
                        (unsigned long long)FCCL_SERVER_MAX_KEY_CAP);
    if (c->max_value > FCCL_SERVER_MAX_VALUE_CAP)
        return fccl_err(FCCL_ERR_INVALID,
                        "max-value-bytes %llu: must be at most 1 GiB",
                        (unsigned long long)c->max_value);
    if (c->max_keys_per_req < 1 || c->max_keys_per_req > (1ull << 24))
        return fccl_err(FCCL_ERR_INVALID,
                        "max-keys-per-request %llu: must be 1..16777216",
                        (unsigned long long)c->max_keys_per_req);
    if (c->max_conns < 1)
        return fccl_err(FCCL_ERR_INVALID, "max-connections must be >= 1");
    if (c->backend[0] && strncmp(c->backend, "etcd://", 7) != 0 &&
        strncmp(c->backend, "etcds://", 8) != 0)
        return fccl_err(FCCL_ERR_INVALID, "backend '%s': expected "
                        "etcd://HOST:PORT[,HOST:PORT...][/PREFIX] or "
                        "etcds://...", c->backend);
    if (c->backend[0] && (c->journal[0] || c->wait_for_workers))
        return fccl_err(FCCL_ERR_INVALID, "--backend keeps the state in "
                        "etcd: --%s does not apply",
                        c->journal[0] ? "journal" : "wait-for-workers");
    if (c->backend_user[0] && !c->backend_password_file[0])
        return fccl_err(FCCL_ERR_INVALID, "--backend-user needs "
                        "--backend-password-file");
    if (c->world_size < 0)
        return fccl_err(FCCL_ERR_INVALID, "world-size must be >= 0");
    if (c->wait_for_workers && c->world_size <= 0)
        return fccl_err(FCCL_ERR_INVALID,
                        "wait-for-workers needs world-size > 0");
    if (c->timeout_ms < 0 || c->request_timeout_ms < 0 ||
        c->handshake_timeout_ms < 0)
        return fccl_err(FCCL_ERR_INVALID, "timeouts must be >= 0");
    if (c->fsync_mode < FCCL_SERVER_FSYNC_ALWAYS ||
        c->fsync_mode > FCCL_SERVER_FSYNC_NEVER)
        return fccl_err(FCCL_ERR_INVALID, "fsync mode %d unknown",
                        c->fsync_mode);
    if (c->fsync_interval_ms < 1)
        return fccl_err(FCCL_ERR_INVALID, "fsync-interval-ms must be >= 1");
    if (!c->tls_cert[0] != !c->tls_key[0])
        return fccl_err(FCCL_ERR_INVALID,
                        "tls-cert and tls-key go together");
    if ((c->tls_ca[0] || c->tls_required) && !c->tls_cert[0])
        return fccl_err(FCCL_ERR_INVALID,
                        "tls-ca and tls-required need tls-cert and tls-key");
    if ((c->auth_required || c->read_token_file[0]) && !c->token_file[0])
        return fccl_err(FCCL_ERR_INVALID,
                        "auth-required and read-token-file need token-file");
    return check_http(c);
}

/* ---- config files ---- */

/* Trim spaces at both ends in place. */
static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* One config line: blank, comment, or "key = value [# comment]". */
static int load_line(fccl_server_opts_t *c, char *line, const char *path,
                     int lineno)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *s = trim(line);
    if (!*s)
        return FCCL_OK;
    char *eq = strchr(s, '=');
    if (!eq)
        return fccl_err(FCCL_ERR_INVALID, "%s:%d: expected 'key = value'",
                        path, lineno);
    *eq = '\0';
    char *key = trim(s), *val = trim(eq + 1);
    if (strcmp(key, "config") == 0)
        return fccl_err(FCCL_ERR_INVALID, "%s:%d: config files do not nest",
                        path, lineno);
    int rc = fccl_server_opts_set(c, key, val);
    return rc < 0 ? fccl_err_wrap(rc, "%s:%d", path, lineno) : FCCL_OK;
}

int fccl_server_opts_load(fccl_server_opts_t *c, const char *path)
{
    if (!c || !path)
        return fccl_err(FCCL_ERR_INVALID, "config: NULL argument");
    FILE *f = fopen(path, "r");
    if (!f)
        return fccl_err_sys(FCCL_ERR_IO, errno, "config %s", path);
    char line[1024];
    int lineno = 0, rc = FCCL_OK;
    while (rc == FCCL_OK && fgets(line, sizeof(line), f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = fccl_err(FCCL_ERR_INVALID, "%s:%d: line too long", path,
                          lineno);
            break;
        }
        rc = load_line(c, line, path, lineno);
    }
    if (rc == FCCL_OK && ferror(f))
        rc = fccl_err_sys(FCCL_ERR_IO, errno, "config %s", path);
    fclose(f);
    return rc;
}
