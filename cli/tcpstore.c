/*
 * tcpstore: a TCPStore client for shell scripts (DESIGN.md).
 *
 *   tcpstore [--addr HOST:PORT] [--timeout SEC] [--dialect modern|legacy]
 *            [--raw-keys] VERB ARGS
 *
 * Options come before the verb; everything after it is the verb's
 * arguments, so `tcpstore add KEY -7` adds minus seven.  Values are binary
 * safe: `set KEY -` reads stdin, `get KEY` and `pop KEY` write the raw
 * value.  `mget` and `keys` print several items, each ended by a newline,
 * or by a NUL byte with -0 (as find -print0), so a script can split them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fccl/store.h"
#include "log.h"
#include "net.h"

enum {
    EXIT_DONE = 0,
    EXIT_NO = 1,      /* the answer is no */
    EXIT_USAGE = 2,   /* usage error, or a verb the dialect lacks */
    EXIT_TIMEOUT = 3, /* timed out waiting for a key */
    EXIT_CONN = 4,    /* cannot connect, protocol, TLS or auth error */
};

struct cli {
    const char *addr;
    char addrbuf[FCCL_HOST_MAX + 16];
    int64_t timeout_ms;
    int legacy;
    int raw_keys;
    char sep; /* ends each item of mget and keys: '\n', or '\0' with -0 */
    fccl_store_opts_t tls; /* only the TLS, token, reconnect and etcd
                              fields */
    const char *verb;
    int argc;    /* the verb's arguments */
    char **argv;
};

struct verb {
    const char *name;
    int min_args, max_args; /* max -1: any number */
    int modern_only;
    int (*run)(fccl_store_t *s, const struct cli *c);
    const char *usage;
};

static void usage(FILE *f)
{
    fputs(
        "usage: tcpstore [OPTIONS] VERB ARGS\n"
        "\n"
        "Options (only before the verb):\n"
        "  --addr HOST:PORT     store address ([IPv6]:PORT for IPv6); a list\n"
        "                       H:P,H:P of front-ends taken in turn; or\n"
        "                       etcd://H:P[,H:P...][/PREFIX] (etcds:// TLS)\n"
        "  --timeout SEC        timeout of the connect and of every wait "
        "(default 300)\n"
        "  --dialect DIALECT    modern (PyTorch >= 2.1, tcpstore-server; "
        "default)\n"
        "                       or legacy (PyTorch <= 2.0 servers)\n"
        "  --raw-keys           send keys as given (default: prefixed with "
        "\"/\" as\n"
        "                       PyTorch does, so both see the same keys)\n"
        "  --tls                speak TLS (implied by any --tls-* option)\n"
        "  --tls-ca FILE        verify the server's certificate with this CA\n"
        "  --tls-cert FILE      client certificate (for a server with "
        "--tls-ca)\n"
        "  --tls-key FILE       key of --tls-cert (mode 0600 or stricter)\n"
        "  --tls-server-name N  name (or IP) the server's certificate must "
        "carry\n"
        "                       (default: the host of --addr)\n"
        "  --token-file FILE    prove this token to the server (its "
        "--token-file or\n"
        "                       --read-token-file; mode 0600 or stricter)\n"
        "  --reconnect          ride out a dropped connection (a store "
        "restarted\n"
        "                       with --journal): reconnect within --timeout "
        "and repeat\n"
        "                       get, mget, check, wait, set, delete, keys, "
        "num-keys,\n"
        "                       qlen, ping, stats; add, append, cas, "
        "barrier, push and\n"
        "                       pop whose reply was lost exit 4 (not sent "
        "twice)\n"
        "  -0, --null           end each item that mget and keys print with "
        "a NUL\n"
        "                       byte instead of a newline\n"
        "  -h, --help           this text\n"
        "  --version            print the version and exit\n"
        "\n"
        "Verbs:\n"
        "  set KEY VALUE        store VALUE (\"-\" reads it from stdin, "
        "binary safe)\n"
        "  get KEY              wait for KEY, write its raw value to stdout\n"
        "  add KEY N            add N to the integer at KEY, print the new "
        "value\n"
        "  cas KEY EXPECTED NEW compare-and-set; exit 1 unless NEW is stored "
        "after\n"
        "  check KEY...         exit 0 if every KEY exists now, else 1\n"
        "  wait KEY...          wait until every KEY exists\n"
        "  barrier KEY N        count this arrival at KEY and wait until N "
        "have\n"
        "                       arrived (PyTorch's BARRIER; exit 3 on timeout)\n"
        "  mget KEY...          wait for every KEY, then print their values "
        "in the\n"
        "                       order given, each followed by a newline "
        "(-0: a NUL)\n"
        "  delete KEY           delete KEY; exit 1 if it did not exist\n"
        "  num-keys             print the number of keys on the server\n"
        "  ping                 print the round-trip time (modern only)\n"
        "  append KEY VALUE     append VALUE (\"-\": stdin) to KEY (modern "
        "only)\n"
        "  push KEY VALUE       add VALUE (\"-\": stdin) at the tail of the "
        "queue KEY\n"
        "                       (modern only)\n"
        "  pop KEY              wait for an item in the queue KEY, take the "
        "oldest and\n"
        "                       write it raw to stdout (exit 3 on timeout; "
        "modern only)\n"
        "  qlen KEY             print the number of items in the queue KEY "
        "(modern only)\n"
        "  keys [PREFIX]        list keys starting with PREFIX, one per line\n"
        "                       (modern dialect, tcpstore-server only)\n"
        "  stats                print the server's figures as 'name value' "
        "lines\n"
        "                       (modern dialect, tcpstore-server only)\n"
        "\n"
        "Writes (set, append) are confirmed by the server (SYNC, or a "
        "round trip\n"
        "on PyTorch servers): a refused write exits 4 with the reason.\n"
        "\n"
        "Environment:\n"
        "  TCPSTORE_ADDR        address when --addr is not given\n"
        "  MASTER_ADDR, MASTER_PORT  address when neither is given "
        "(port default 29500)\n"
        "  TCPSTORE_TIMEOUT     seconds, when --timeout is not given\n"
        "  TCPSTORE_DIALECT     modern or legacy, when --dialect is not "
        "given\n"
        "  TCPSTORE_TLS_CA, TCPSTORE_TLS_CERT, TCPSTORE_TLS_KEY,\n"
        "  TCPSTORE_TLS_SERVER_NAME  the --tls-* options when not given\n"
        "  TCPSTORE_TOKEN_FILE  --token-file when not given\n"
        "  TCPSTORE_RECONNECT   1: --reconnect (0: off)\n"
        "\n"
        "Exit status:\n"
        "  0 done   1 the answer is no (check, delete, cas)   2 usage error "
        "(or a verb\n"
        "  the legacy dialect lacks)   3 timed out waiting for a key or a "
        "queue item\n"
        "  4 cannot connect, write refused, protocol, TLS or auth error\n",
        f);
}

static int usage_error(const char *fmt, const char *arg)
{
    fputs("tcpstore: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs("\n(try tcpstore --help)\n", stderr);
    return EXIT_USAGE;
}

/* Map a library status to the exit code; `waiting` verbs time out on
 * keys (3), the others time out on an unresponsive server (4). */
static int fail(int rc, int waiting)
{
    fprintf(stderr, "tcpstore: %s\n", fccl_last_error());
    switch (rc) {
    case FCCL_ERR_TIMEOUT:
        return waiting ? EXIT_TIMEOUT : EXIT_CONN;
    case FCCL_ERR_UNSUPPORTED:
    case FCCL_ERR_INVALID:
        return EXIT_USAGE;
    default:
        return EXIT_CONN;
    }
}

static int write_all(const void *p, size_t len)
{
    const char *b = p;
    while (len > 0) {
        ssize_t n = write(STDOUT_FILENO, b, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            fprintf(stderr, "tcpstore: write to stdout: %s\n",
                    strerror(errno));
            return EXIT_CONN;
        }
        b += n;
        len -= (size_t)n;
    }
    return EXIT_DONE;
}

/* VALUE, or all of stdin when VALUE is "-". *buf is malloc'd or NULL. */
static int value_arg(const char *arg, char **buf, const void **val,
                     size_t *len)
{
    *buf = NULL;
    if (strcmp(arg, "-") != 0) {
        *val = arg;
        *len = strlen(arg);
        return 0;
    }
    size_t cap = 65536, n = 0;
    char *p = malloc(cap);
    for (;;) {
        if (!p) {
            fputs("tcpstore: out of memory reading stdin\n", stderr);
            return -1;
        }
        ssize_t r = read(STDIN_FILENO, p + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            fprintf(stderr, "tcpstore: read stdin: %s\n", strerror(errno));
            free(p);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n == cap) {
            char *q = realloc(p, cap *= 2);
            if (!q)
                free(p);
            p = q;
        }
    }
    *buf = p;
    *val = p;
    *len = n;
    return 0;
}

static int v_set(fccl_store_t *s, const struct cli *c)
{
    char *buf;
    const void *val;
    size_t len;
    if (value_arg(c->argv[1], &buf, &val, &len) < 0)
        return EXIT_USAGE;
    int rc = fccl_store_set(s, c->argv[0], val, len);
    free(buf);
    return rc < 0 ? fail(rc, 0) : EXIT_DONE;
}

static int v_append(fccl_store_t *s, const struct cli *c)
{
    char *buf;
    const void *val;
    size_t len;
    if (value_arg(c->argv[1], &buf, &val, &len) < 0)
        return EXIT_USAGE;
    int rc = fccl_store_append(s, c->argv[0], val, len);
    free(buf);
    return rc < 0 ? fail(rc, 0) : EXIT_DONE;
}

static int v_get(fccl_store_t *s, const struct cli *c)
{
    void *val;
    size_t len;
    int rc = fccl_store_get(s, c->argv[0], &val, &len, -1);
    if (rc < 0)
        return fail(rc, 1);
    int ex = write_all(val, len);
    free(val);
    return ex;
}

/* Items of a list (mget, keys), each ended by c->sep. */
static int write_item(const struct cli *c, const void *p, size_t len)
{
    int ex = write_all(p, len);
    return ex == EXIT_DONE ? write_all(&c->sep, 1) : ex;
}

/* Waits for every key (exit 3 on timeout), then one value per key in the
 * order given; a value holding the separator is printed as it is, so
 * binary values want get, one key at a time. */
static int v_mget(fccl_store_t *s, const struct cli *c)
{
    size_t n = (size_t)c->argc;
    void **vals = calloc(n, sizeof(*vals));
    size_t *lens = calloc(n, sizeof(*lens));
    if (!vals || !lens) {
        free(vals);
        free(lens);
        fputs("tcpstore: out of memory\n", stderr);
        return EXIT_CONN;
    }
    int rc = fccl_store_multi_get(s, (const char *const *)c->argv, n, vals,
                                  lens, -1);
    int ex = rc < 0 ? fail(rc, 1) : EXIT_DONE;
    for (size_t i = 0; i < n; i++) {
        if (rc >= 0 && ex == EXIT_DONE)
            ex = write_item(c, vals[i], lens[i]);
        free(vals[i]);
    }
    free(vals);
    free(lens);
    return ex;
}

static int v_push(fccl_store_t *s, const struct cli *c)
{
    char *buf;
    const void *val;
    size_t len;
    if (value_arg(c->argv[1], &buf, &val, &len) < 0)
        return EXIT_USAGE;
    int rc = fccl_store_queue_push(s, c->argv[0], val, len);
    free(buf);
    return rc < 0 ? fail(rc, 0) : EXIT_DONE;
}

/* The library's blocking pop: it waits on the server (no polling) up to
 * the timeout for an item, and loops when another consumer took it first. */
static int v_pop(fccl_store_t *s, const struct cli *c)
{
    void *val;
    size_t len;
    int rc = fccl_store_queue_pop(s, c->argv[0], 1, &val, &len, -1);
    if (rc < 0)
        return fail(rc, 1);
    int ex = write_all(val, len);
    free(val);
    return ex;
}

static int v_qlen(fccl_store_t *s, const struct cli *c)
{
    int64_t n;
    int rc = fccl_store_queue_len(s, c->argv[0], &n);
    if (rc < 0)
        return fail(rc, 0);
    printf("%" PRId64 "\n", n);
    return EXIT_DONE;
}

static int parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || errno)
        return -1;
    *v = x;
    return 0;
}

static int v_add(fccl_store_t *s, const struct cli *c)
{
    int64_t delta, now;
    if (parse_i64(c->argv[1], &delta) < 0)
        return usage_error("add: '%s' is not a 64-bit integer", c->argv[1]);
    int rc = fccl_store_add(s, c->argv[0], delta, &now);
    if (rc < 0)
        return fail(rc, 0);
    printf("%" PRId64 "\n", now);
    return EXIT_DONE;
}

static int v_cas(fccl_store_t *s, const struct cli *c)
{
    const char *exp = c->argv[1], *des = c->argv[2];
    void *cur;
    size_t curlen;
    int rc = fccl_store_compare_set(s, c->argv[0], exp, strlen(exp), des,
                                    strlen(des), &cur, &curlen);
    if (rc < 0)
        return fail(rc, 0);
    /* PyTorch's reply is not always what is stored (PROTOCOL.md): judge
     * success by the reply alone. */
    int ok = curlen == strlen(des) && memcmp(cur, des, curlen) == 0;
    free(cur);
    return ok ? EXIT_DONE : EXIT_NO;
}

static int v_check(fccl_store_t *s, const struct cli *c)
{
    int all;
    int rc = fccl_store_check(s, (const char *const *)c->argv,
                              (size_t)c->argc, &all);
    if (rc < 0)
        return fail(rc, 0);
    return all ? EXIT_DONE : EXIT_NO;
}

static int v_wait(fccl_store_t *s, const struct cli *c)
{
    int rc = fccl_store_wait(s, (const char *const *)c->argv, (size_t)c->argc,
                             -1);
    return rc < 0 ? fail(rc, 1) : EXIT_DONE;
}

/* PyTorch's BARRIER (18): count this arrival at KEY, wait for N. */
static int v_barrier(fccl_store_t *s, const struct cli *c)
{
    int64_t n;
    if (parse_i64(c->argv[1], &n) < 0 || n < 1)
        return usage_error("barrier: '%s' is not a count >= 1", c->argv[1]);
    int rc = fccl_store_barrier(s, c->argv[0], n, -1);
    return rc < 0 ? fail(rc, 1) : EXIT_DONE;
}

static int v_delete(fccl_store_t *s, const struct cli *c)
{
    int deleted;
    int rc = fccl_store_delete(s, c->argv[0], &deleted);
    if (rc < 0)
        return fail(rc, 0);
    return deleted ? EXIT_DONE : EXIT_NO;
}

static int v_num_keys(fccl_store_t *s, const struct cli *c)
{
    (void)c;
    int64_t n;
    int rc = fccl_store_num_keys(s, &n);
    if (rc < 0)
        return fail(rc, 0);
    printf("%" PRId64 "\n", n);
    return EXIT_DONE;
}

static int v_ping(fccl_store_t *s, const struct cli *c)
{
    (void)c;
    double us;
    int rc = fccl_store_ping(s, &us);
    if (rc < 0)
        return fail(rc, 0);
    printf("rtt %.1f us\n", us);
    return EXIT_DONE;
}

static int v_keys(fccl_store_t *s, const struct cli *c)
{
    char **keys;
    size_t n;
    int rc = fccl_store_list_keys(s, c->argc ? c->argv[0] : "", &keys, &n);
    if (rc < 0)
        return fail(rc, 0);
    int ex = EXIT_DONE;
    for (size_t i = 0; i < n && ex == EXIT_DONE; i++)
        ex = write_item(c, keys[i], strlen(keys[i]));
    fccl_store_free_keys(keys, n);
    return ex;
}

static int v_stats(fccl_store_t *s, const struct cli *c)
{
    (void)c;
    char *text;
    size_t n;
    int rc = fccl_store_stats(s, &text, &n);
    if (rc < 0)
        return fail(rc, 0);
    int ex = write_all(text, n);
    free(text);
    return ex;
}

static const struct verb verbs[] = {
    {"set", 2, 2, 0, v_set, "set KEY VALUE"},
    {"get", 1, 1, 0, v_get, "get KEY"},
    {"add", 2, 2, 0, v_add, "add KEY N"},
    {"cas", 3, 3, 0, v_cas, "cas KEY EXPECTED NEW"},
    {"check", 1, -1, 0, v_check, "check KEY..."},
    {"wait", 1, -1, 0, v_wait, "wait KEY..."},
    {"mget", 1, -1, 0, v_mget, "mget KEY..."},
    {"delete", 1, 1, 0, v_delete, "delete KEY"},
    {"num-keys", 0, 0, 0, v_num_keys, "num-keys"},
    {"ping", 0, 0, 1, v_ping, "ping"},
    {"append", 2, 2, 1, v_append, "append KEY VALUE"},
    {"keys", 0, 1, 1, v_keys, "keys [PREFIX]"},
    {"stats", 0, 0, 1, v_stats, "stats"},
    {"barrier", 2, 2, 1, v_barrier, "barrier KEY N"},
    {"push", 2, 2, 1, v_push, "push KEY VALUE"},
    {"pop", 1, 1, 1, v_pop, "pop KEY"},
    {"qlen", 1, 1, 1, v_qlen, "qlen KEY"},
};

static const struct verb *find_verb(const char *name)
{
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
        if (strcmp(verbs[i].name, name) == 0)
            return &verbs[i];
    return NULL;
}

static int set_dialect(struct cli *c, const char *v)
{
    if (strcmp(v, "modern") == 0)
        c->legacy = 0;
    else if (strcmp(v, "legacy") == 0)
        c->legacy = 1;
    else
        return usage_error("unknown dialect '%s' (modern or legacy)", v);
    return 0;
}

static int set_timeout(struct cli *c, const char *v)
{
    c->timeout_ms = fccl_parse_seconds_ms(v);
    /* It bounds the connect and every request too: 0 leaves no time. */
    if (c->timeout_ms <= 0)
        return usage_error("bad timeout '%s' (seconds, at least 0.001)", v);
    return 0;
}

/* Address, timeout and dialect from the environment, overridden by the
 * options parsed afterwards. */
static int env_defaults(struct cli *c)
{
    const char *a = getenv("TCPSTORE_ADDR");
    const char *ma = getenv("MASTER_ADDR"), *mp = getenv("MASTER_PORT");
    if (a && *a) {
        c->addr = a;
    } else if (ma && *ma) {
        char *end;
        long port = mp && *mp ? strtol(mp, &end, 10) : 29500;
        if (mp && *mp && (*end || port < 0 || port > 65535))
            return usage_error("bad MASTER_PORT '%s'", mp);
        fccl_addr_format(c->addrbuf, sizeof(c->addrbuf), ma, (int)port);
        c->addr = c->addrbuf;
    }
    const char *t = getenv("TCPSTORE_TIMEOUT"), *d = getenv("TCPSTORE_DIALECT");
    c->timeout_ms = FCCL_DEFAULT_TIMEOUT_MS;
    if (t && *t && set_timeout(c, t) != 0)
        return EXIT_USAGE;
    if (d && *d && set_dialect(c, d) != 0)
        return EXIT_USAGE;
    fccl_store_opts_init(&c->tls);
    fccl_store_opts_env(&c->tls, "TCPSTORE");
    return 0;
}

/* The TLS or token option named o (length ol), or NULL. */
static const char **tls_field(struct cli *c, const char *o, size_t ol)
{
    static const char *const names[] = {"--tls-ca", "--tls-cert",
                                        "--tls-key", "--tls-server-name",
                                        "--token-file"};
    const char **fields[] = {&c->tls.tls_ca, &c->tls.tls_cert,
                             &c->tls.tls_key, &c->tls.tls_server_name,
                             &c->tls.token_file};
    for (size_t k = 0; k < 5; k++)
        if (strlen(names[k]) == ol && !strncmp(o, names[k], ol))
            return fields[k];
    return NULL;
}

/* Options up to the verb.  Returns 0, -1 for --help, -2 for --version,
 * or an exit code. */
static int parse_args(struct cli *c, int argc, char **argv)
{
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1]; i++) {
        const char *o = argv[i], *eq = strchr(o, '=');
        size_t ol = eq ? (size_t)(eq - o) : strlen(o);
        if (!strcmp(o, "-h") || !strcmp(o, "--help"))
            return -1;
        if (!strcmp(o, "--version"))
            return -2;
        if (!strcmp(o, "--raw-keys")) {
            c->raw_keys = 1;
            continue;
        }
        if (!strcmp(o, "-0") || !strcmp(o, "--null")) {
            c->sep = '\0';
            continue;
        }
        if (!strcmp(o, "--reconnect")) {
            c->tls.reconnect = 1;
            continue;
        }
        if (!strcmp(o, "--tls")) {
            c->tls.tls = 1;
            continue;
        }
        const char **tf = tls_field(c, o, ol);
        if (tf) {
            const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
            if (!v || !*v)
                return usage_error("option %s needs a value", o);
            *tf = v;
            continue;
        }
        if (!strcmp(o, "--")) {
            i++;
            break;
        }
        int known = (ol == 6 && !strncmp(o, "--addr", ol)) ||
                    (ol == 9 && !strncmp(o, "--timeout", ol)) ||
                    (ol == 9 && !strncmp(o, "--dialect", ol));
        if (!known)
            return usage_error("unknown option '%s'", o);
        const char *v = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!v)
            return usage_error("option %s needs a value", o);
        if (ol == 6 && !strncmp(o, "--addr", ol)) {
            c->addr = v;
        } else if (ol == 9 && !strncmp(o, "--timeout", ol)) {
            if (set_timeout(c, v) != 0)
                return EXIT_USAGE;
        } else {
            if (set_dialect(c, v) != 0)
                return EXIT_USAGE;
        }
    }
    if (i >= argc)
        return usage_error("%s", "no verb given");
    c->verb = argv[i];
    c->argc = argc - i - 1;
    c->argv = argv + i + 1;
    return 0;
}

int main(int argc, char **argv)
{
    struct cli c;
    memset(&c, 0, sizeof(c));
    c.sep = '\n';
    /* Failures are reported once, by main, on stderr. */
    if (!getenv("FCCL_LOG_LEVEL"))
        fccl_log_set_level(FCCL_LOG_ERROR);
    int rc = env_defaults(&c);
    if (rc != 0)
        return rc;
    rc = parse_args(&c, argc, argv);
    if (rc == -1) {
        usage(stdout);
        return EXIT_DONE;
    }
    if (rc == -2) {
        printf("tcpstore (fccl) %s\n", fccl_version());
        return EXIT_DONE;
    }
    if (rc != 0)
        return rc;
    const struct verb *v = find_verb(c.verb);
    if (!v)
        return usage_error("unknown verb '%s'", c.verb);
    if (c.argc < v->min_args || (v->max_args >= 0 && c.argc > v->max_args))
        return usage_error("usage: tcpstore [OPTIONS] %s", v->usage);
    if (v->modern_only && c.legacy)
        return usage_error("'%s' is not available in the legacy dialect "
                           "(PyTorch <= 2.0 servers lack it)",
                           v->name);
    if (!c.addr)
        return usage_error("%s", "no address: give --addr HOST:PORT or set "
                                 "TCPSTORE_ADDR or MASTER_ADDR");
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = c.addr;
    o.timeout_ms = c.timeout_ms;
    o.dialect = c.legacy ? FCCL_DIALECT_LEGACY : FCCL_DIALECT_MODERN;
    o.raw_keys = c.raw_keys;
    o.tls = c.tls.tls;
    o.tls_ca = c.tls.tls_ca;
    o.tls_cert = c.tls.tls_cert;
    o.tls_key = c.tls.tls_key;
    o.tls_server_name = c.tls.tls_server_name;
    o.token_file = c.tls.token_file;
    o.reconnect = c.tls.reconnect;
    o.etcd_user = c.tls.etcd_user; /* TCPSTORE_ETCD_* (etcd:// only) */
    o.etcd_password_file = c.tls.etcd_password_file;
    o.lease_ttl_s = c.tls.lease_ttl_s;
    o.lease_id = c.tls.lease_id;
    fccl_store_t *s;
    rc = fccl_store_connect(&o, &s);
    if (rc < 0)
        return rc == FCCL_ERR_INVALID ? (fail(rc, 0), EXIT_USAGE)
                                      : (fail(rc, 0), EXIT_CONN);
    int ex = v->run(s, &c);
    fccl_store_close(s);
    if (fflush(stdout) != 0 && ex == EXIT_DONE)
        ex = EXIT_CONN;
    return ex;
}
