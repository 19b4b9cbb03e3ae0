/*
 * tcpstore-server: the TCPStore server as a program.  A thin wrapper over
 * the embeddable server (fccl/server.h): options (or a config file) ->
 * fccl_server_create -> "listening on HOST:PORT" on stdout -> run until
 * SIGINT/SIGTERM (SIGHUP reloads the TLS files and tokens) -> free.
 * Exit codes: 0 after a signal, 1 if the server cannot start (e.g. the port
 * is taken, or a TLS file does not load), 2 on a usage error.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "fccl/core.h"
#include "fccl/server.h"
#include "log.h"

static void usage(FILE *f)
{
    fprintf(f,
"usage: tcpstore-server [OPTIONS]\n"
"A TCPStore server for PyTorch (both wire dialects), libfccl and tcpstore.\n"
"\n"
"  --host HOST                 address to listen on (default: all\n"
"                              interfaces, IPv4 and IPv6)\n"
"  --port PORT                 TCP port (default 29500; 0 picks a free one)\n"
"  --world-size N              workers expected to join with ADD(init/, 1)\n"
"  --wait-for-workers          log joins until all N joined or --timeout;\n"
"                              the server keeps serving either way\n"
"  --timeout SEC               join timeout in seconds (default 300)\n"
"  --max-key-bytes N           longest key (default 8KiB, at most 1MiB)\n"
"  --max-value-bytes N         longest value (default 64MiB, at most 1GiB)\n"
"  --max-keys-per-request N    keys in one request (default 131072)\n"
"  --max-connections N         open connections (default 65536)\n"
"  --max-total-bytes N         stored keys + values, plus bytes held for\n"
"                              unfinished requests and unsent MULTI_GET /\n"
"                              key-list replies (default 4GiB)\n"
"  --max-connections-per-addr N  connections from one client IP (default\n"
"                              auto: --max-connections less a sixteenth\n"
"                              kept for other addresses, at least 1024;\n"
"                              0 = no cap); at a cap, connections that\n"
"                              made no request are closed first for a\n"
"                              newcomer, of its own address too\n"
"  --handshake-timeout SEC     close a connection that has not sent\n"
"                              VALIDATE (legacy: a first request; with\n"
"                              --auth-required: a proof) this long after\n"
"                              connecting (default 10, 0 = never), unless\n"
"                              kept as a PyTorch 1.13 client's silent\n"
"                              second connection\n"
"  --request-timeout SEC       close a connection whose unfinished request\n"
"                              or TLS handshake makes no progress this long\n"
"                              (default 30; idle connections stay open)\n"
"  --tls-cert FILE             PEM certificate: accept TLS on the same port\n"
"                              (a first byte 0x16 starts TLS); SIGHUP reads\n"
"                              it, the key, the CA and the tokens again\n"
"  --tls-key FILE              PEM private key of --tls-cert\n"
"  --tls-ca FILE               require client certificates signed by this CA\n"
"  --tls-required              refuse plaintext connections\n"
"  --token-file FILE           token (one line, >= 16 bytes, mode 0600) that\n"
"                              clients prove with AUTH (full rights)\n"
"  --read-token-file FILE      a second token with read-only rights\n"
"  --auth-required             only VALIDATE, PING and AUTH before a proof\n"
"                              (PyTorch clients cannot connect then)\n"
"  --journal FILE              append every mutation to FILE (mode 0600) and\n"
"                              replay it at start: keys, counters and queues\n"
"                              survive a restart or SIGKILL\n"
"  --fsync MODE                always (default: on disk before any reply),\n"
"                              interval, or never\n"
"  --fsync-interval-ms MS      period of --fsync interval (default 100)\n"
"  --http HOST:PORT            status port (default off; PORT alone means\n"
"                              127.0.0.1): /healthz, /metrics (Prometheus),\n"
"                              / (a page for people); with tokens all but\n"
"                              /healthz need 'Authorization: Bearer TOKEN'\n"
"  --http-public               let --http listen beyond loopback\n"
"  --journal-recover           start on a journal damaged in the middle:\n"
"                              keep a copy (FILE.damaged-DATE), skip the\n"
"                              damage, replay every intact record (without\n"
"                              it the server refuses to start)\n"
"  --backend etcd://HOST:PORT[,HOST:PORT...][/PREFIX]\n"
"                              keep all state in etcd (etcds:// for TLS),\n"
"                              so several servers can serve one store\n"
"  --backend-user USER         etcd user (with --backend-password-file)\n"
"  --backend-password-file FILE  its password, one line, mode 0600\n"
"  --backend-tls-ca FILE       CA that verifies the etcd members\n"
"  --backend-tls-cert FILE     client certificate for etcd\n"
"  --backend-tls-key FILE      its key (mode 0600)\n"
"  --log-level LEVEL           error|warn|info|debug|trace (default info,\n"
"                              or FCCL_LOG_LEVEL)\n"
"  --config FILE               read options from FILE: 'key = value' lines\n"
"                              with the names above without '--', '#'\n"
"                              comments; command-line options win\n"
"  --help                      show this help\n"
"  --version                   show the version\n"
"Sizes take K, M, G (or KiB, MiB, GiB) suffixes.  Prints 'listening on\n"
"HOST:PORT' once it accepts connections; logs go to stderr.  Under\n"
"systemd, relative key, certificate and token paths are looked up in\n"
"$CREDENTIALS_DIRECTORY and a relative journal in $STATE_DIRECTORY.\n");
}

static void usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "tcpstore-server: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'tcpstore-server --help'.\n");
    exit(2);
}

/* Split "--name=value" / "--name value"; returns the name without "--"
 * in `name`, and the value (NULL for a flag with no value). */
static const char *option_value(int argc, char **argv, int *i, char *name,
                                size_t namelen, int is_flag)
{
    const char *a = argv[*i] + 2;
    const char *eq = strchr(a, '=');
    size_t n = eq ? (size_t)(eq - a) : strlen(a);
    if (n >= namelen)
        usage_error("option too long: %s", argv[*i]);
    memcpy(name, a, n);
    name[n] = '\0';
    if (eq)
        return eq + 1;
    if (is_flag)
        return NULL;
    if (*i + 1 >= argc)
        usage_error("option --%s needs a value", name);
    return argv[++*i];
}

static int is_flag(const char *arg)
{
    static const char *const flags[] = {"wait-for-workers", "tls-required",
                                        "auth-required", "http-public",
                                        "journal-recover",
                                        "help", "version"};
    const char *a = arg + 2;
    size_t n = strcspn(a, "=");
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
        if (strlen(flags[i]) == n && strncmp(a, flags[i], n) == 0)
            return 1;
    return 0;
}

/* First pass: --help, --version and --config, which the others override. */
static void early_options(int argc, char **argv, fccl_server_opts_t *cfg)
{
    char name[64];
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--", 2) != 0)
            usage_error("unexpected argument '%s'", argv[i]);
        int flag = is_flag(argv[i]);
        const char *v = option_value(argc, argv, &i, name, sizeof(name), flag);
        if (strcmp(name, "help") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(name, "version") == 0) {
            printf("tcpstore-server (fccl) %s\n", fccl_version());
            exit(0);
        }
        if (strcmp(name, "config") == 0 && fccl_server_opts_load(cfg, v) < 0)
            usage_error("%s", fccl_last_error());
    }
}

static void late_options(int argc, char **argv, fccl_server_opts_t *cfg)
{
    char name[64];
    for (int i = 1; i < argc; i++) {
        int flag = is_flag(argv[i]);
        const char *v = option_value(argc, argv, &i, name, sizeof(name), flag);
        if (strcmp(name, "config") == 0)
            continue;
        if (fccl_server_opts_set(cfg, name, v ? v : "") < 0)
            usage_error("%s", fccl_last_error());
    }
}

int main(int argc, char **argv)
{
    fccl_server_opts_t cfg;
    fccl_server_opts_init(&cfg);
    const char *env = getenv("FCCL_LOG_LEVEL");
    int lvl = env ? fccl_log_parse_level(env) : -1;
    cfg.log_level = lvl >= 0 ? lvl : FCCL_LOG_INFO;
    cfg.handle_signals = 1;
    early_options(argc, argv, &cfg);
    late_options(argc, argv, &cfg);
    if (fccl_server_opts_check(&cfg) < 0)
        usage_error("%s", fccl_last_error());

    /* Peers that vanish mid-reply must not kill the server. */
    signal(SIGPIPE, SIG_IGN);
    fccl_server_t *s;
    if (fccl_server_create(&cfg, &s) < 0) {
        fprintf(stderr, "tcpstore-server: %s\n", fccl_last_error());
        return 1;
    }
    printf("listening on %s\n", fccl_server_address(s));
    fflush(stdout);
    int rc = fccl_server_run(s);
    if (rc < 0)
        fprintf(stderr, "tcpstore-server: %s\n", fccl_last_error());
    fccl_server_free(s);
    libevent_global_shutdown();
    return rc < 0 ? 1 : 0;
}
