/*
 * tcpstore-server options: defaults, "name = value" setting, config files
 * and range checks.  The names are the command-line ones without "--", so a
 * config file and a command line read the same.
 */
#include "server.h"

#include <ctype.h>
#include <stddef.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "err.h"
#include "log.h"

void store_server_config_default(struct store_server_config *c)
{
    memset(c, 0, sizeof(*c));
    c->port = STORE_SERVER_DEFAULT_PORT;
    c->timeout_ms = FCCL_DEFAULT_TIMEOUT_MS;
    c->max_key = 8ull << 10;
    c->max_value = 64ull << 20;
    c->max_keys_per_req = 131072;
    c->max_conns = 65536;
    c->max_total_bytes = 4ull << 30;
    c->max_conns_per_addr = STORE_SERVER_PER_ADDR_AUTO;
    c->request_timeout_ms = 30000;
    c->log_level = -1;
    c->fsync_interval_ms = 100;
    c->handshake_timeout_ms = 10000;
}

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

static int parse_int(const char *s, long lo, long hi, long *out)
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

/* Option names with '_' read as '-'. */
static void normalize(const char *in, char *out, size_t n)
{
    size_t i = 0;
    for (; in[i] && i + 1 < n; i++)
        out[i] = in[i] == '_' ? '-' : (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
}

static int bad(const char *key, const char *value, const char *why)
{
    return fccl_err(FCCL_ERR_INVALID, "option %s: bad value '%s' (%s)", key,
                    value, why);
}

static int set_size(uint64_t *dst, const char *key, const char *value)
{
    uint64_t v;
    if (parse_size(value, &v) < 0)
        return bad(key, value, "expected a size such as 4096, 8KiB, 64MiB");
    *dst = v;
    return FCCL_OK;
}

static int set_path(char *dst, size_t n, const char *key, const char *value);

/* --backend and the --backend-* options of its user and TLS. */
static int set_backend(struct store_server_config *c, const char *k,
                       const char *key, const char *value)
{
    static const struct {
        const char *name;
        size_t off, len;
    } f[] = {
#define BE_FIELD(n, m) {n, offsetof(struct store_server_config, m),          \
                        sizeof(((struct store_server_config *)0)->m)}
        BE_FIELD("backend", backend),
        BE_FIELD("backend-user", backend_user),
        BE_FIELD("backend-password-file", backend_password_file),
        BE_FIELD("backend-tls-ca", backend_tls_ca),
        BE_FIELD("backend-tls-cert", backend_tls_cert),
        BE_FIELD("backend-tls-key", backend_tls_key),
#undef BE_FIELD
    };
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (strcmp(k, f[i].name) == 0)
            return set_path((char *)c + f[i].off, f[i].len, key, value);
    return fccl_err(FCCL_ERR_INVALID, "unknown option '%s'", key);
}

static int set_path(char *dst, size_t n, const char *key, const char *value)
{
    if (strlen(value) >= n)
        return bad(key, value, "path too long");
    memcpy(dst, value, strlen(value) + 1);
    return FCCL_OK;
}

static int set_host(struct store_server_config *c, const char *value)
{
    const char *h = value;
    if (strcmp(h, "*") == 0)
        h = "";
    size_t n = strlen(h);
    /* "[::1]" is accepted as the bare address. */
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n >= sizeof(c->host))
        return bad("host", value, "too long");
    memcpy(c->host, h, n);
    c->host[n] = '\0';
    return FCCL_OK;
}

int store_server_config_set(struct store_server_config *c, const char *key,
                            const char *value)
{
    char k[64];
    long v;
    if (!key || !value)
        return fccl_err(FCCL_ERR_INVALID, "option without name or value");
    normalize(key, k, sizeof(k));
    if (strcmp(k, "host") == 0)
        return set_host(c, value);
    if (strcmp(k, "port") == 0) {
        if (parse_int(value, 0, 65535, &v) < 0)
            return bad(key, value, "expected 0..65535");
        c->port = (int)v;
        return FCCL_OK;
    }
    if (strcmp(k, "world-size") == 0) {
        if (parse_int(value, 0, 1 << 24, &v) < 0)
            return bad(key, value, "expected a rank count >= 0");
        c->world_size = (int)v;
        return FCCL_OK;
    }
    if (strcmp(k, "wait-for-workers") == 0)
        return parse_bool(value, &c->wait_for_workers) < 0
                   ? bad(key, value, "expected true or false")
                   : FCCL_OK;
    if (strcmp(k, "timeout") == 0) {
        int64_t ms = fccl_parse_seconds_ms(value);
        if (ms < 0)
            return bad(key, value, "expected seconds >= 0");
        c->timeout_ms = ms;
        return FCCL_OK;
    }
    if (strcmp(k, "max-key-bytes") == 0 || strcmp(k, "max-key") == 0)
        return set_size(&c->max_key, key, value);
    if (strcmp(k, "max-value-bytes") == 0 || strcmp(k, "max-value") == 0)
        return set_size(&c->max_value, key, value);
    if (strcmp(k, "max-keys-per-request") == 0 ||
        strcmp(k, "max-keys") == 0)
        return set_size(&c->max_keys_per_req, key, value);
    if (strcmp(k, "max-connections") == 0 || strcmp(k, "max-conns") == 0)
        return set_size(&c->max_conns, key, value);
    if (strcmp(k, "max-total-bytes") == 0)
        return set_size(&c->max_total_bytes, key, value);
    if (strcmp(k, "max-connections-per-addr") == 0 &&
        strcasecmp(value, "auto") == 0)
        return c->max_conns_per_addr = STORE_SERVER_PER_ADDR_AUTO, FCCL_OK;
    if (strcmp(k, "max-connections-per-addr") == 0)
        return set_size(&c->max_conns_per_addr, key, value);
    if (strcmp(k, "journal-recover") == 0)
        return parse_bool(value, &c->journal_recover) < 0
                   ? bad(key, value, "expected true or false")
                   : FCCL_OK;
    if (strcmp(k, "handshake-timeout") == 0) {
        int64_t ms = fccl_parse_seconds_ms(value);
        if (ms < 0)
            return bad(key, value, "expected seconds >= 0");
        c->handshake_timeout_ms = ms;
        return FCCL_OK;
    }
    if (strcmp(k, "request-timeout") == 0) {
        int64_t ms = fccl_parse_seconds_ms(value);
        if (ms < 0)
            return bad(key, value, "expected seconds >= 0");
        c->request_timeout_ms = ms;
        return FCCL_OK;
    }
    if (strcmp(k, "tls-cert") == 0)
        return set_path(c->tls_cert, sizeof(c->tls_cert), key, value);
    if (strcmp(k, "tls-key") == 0)
        return set_path(c->tls_key, sizeof(c->tls_key), key, value);
    if (strcmp(k, "tls-ca") == 0)
        return set_path(c->tls_ca, sizeof(c->tls_ca), key, value);
    if (strcmp(k, "tls-required") == 0)
        return parse_bool(value, &c->tls_required) < 0
                   ? bad(key, value, "expected true or false")
                   : FCCL_OK;
    if (strcmp(k, "token-file") == 0)
        return set_path(c->token_file, sizeof(c->token_file), key, value);
    if (strcmp(k, "read-token-file") == 0)
        return set_path(c->read_token_file, sizeof(c->read_token_file), key,
                        value);
    if (strcmp(k, "auth-required") == 0)
        return parse_bool(value, &c->auth_required) < 0
                   ? bad(key, value, "expected true or false")
                   : FCCL_OK;
    if (strcmp(k, "journal") == 0)
        return set_path(c->journal, sizeof(c->journal), key, value);
    if (strncmp(k, "backend", 7) == 0)
        return set_backend(c, k, key, value);
    if (strcmp(k, "fsync") == 0) {
        static const char *const modes[] = {"always", "interval", "never"};
        for (int i = 0; i < 3; i++)
            if (strcasecmp(value, modes[i]) == 0)
                return c->fsync_mode = i, FCCL_OK;
        return bad(key, value, "expected always, interval or never");
    }
    if (strcmp(k, "fsync-interval-ms") == 0) {
        if (parse_int(value, 1, 3600000, &v) < 0)
            return bad(key, value, "expected 1..3600000 milliseconds");
        c->fsync_interval_ms = v;
        return FCCL_OK;
    }
    if (strcmp(k, "log-level") == 0) {
        int lvl = fccl_log_parse_level(value);
        if (lvl < 0)
            return bad(key, value, "expected error|warn|info|debug|trace");
        c->log_level = lvl;
        return FCCL_OK;
    }
    return fccl_err(FCCL_ERR_INVALID, "unknown option '%s'", key);
}

int store_server_config_check(const struct store_server_config *c)
{
    if (c->port < 0 || c->port > 65535)
        return fccl_err(FCCL_ERR_INVALID, "port %d out of range", c->port);
    if (c->max_key < 1 || c->max_key > STORE_SERVER_MAX_KEY_CAP)
        return fccl_err(FCCL_ERR_INVALID,
                        "max-key-bytes %llu: must be 1..%llu",
                        (unsigned long long)c->max_key,
                        (unsigned long long)STORE_SERVER_MAX_KEY_CAP);
    if (c->max_value > STORE_SERVER_MAX_VALUE_CAP)
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
    if (c->wait_for_workers && c->world_size <= 0)
        return fccl_err(FCCL_ERR_INVALID,
                        "wait-for-workers needs world-size > 0");
    if (c->timeout_ms < 0)
        return fccl_err(FCCL_ERR_INVALID, "timeout must be >= 0");
    if (!c->tls_cert[0] != !c->tls_key[0])
        return fccl_err(FCCL_ERR_INVALID,
                        "tls-cert and tls-key go together");
    if ((c->tls_ca[0] || c->tls_required) && !c->tls_cert[0])
        return fccl_err(FCCL_ERR_INVALID,
                        "tls-ca and tls-required need tls-cert and tls-key");
    if ((c->auth_required || c->read_token_file[0]) && !c->token_file[0])
        return fccl_err(FCCL_ERR_INVALID,
                        "auth-required and read-token-file need token-file");
    return FCCL_OK;
}

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
static int load_line(struct store_server_config *c, char *line,
                     const char *path, int lineno)
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
    int rc = store_server_config_set(c, key, val);
    return rc < 0 ? fccl_err_wrap(rc, "%s:%d", path, lineno) : FCCL_OK;
}

int store_server_config_load(struct store_server_config *c, const char *path)
{
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
