/*
 * The TCPStore server (internal API, used by cli/tcpstore-server and by the
 * bootstrap, which embeds it on rank 0).
 *
 * One libevent loop serves every client: it speaks both dialects of
 * PROTOCOL.md (chosen per connection from its first bytes), parses requests
 * incrementally, answers pipelined requests in order, parks WAITs until
 * their keys exist, and closes (with one log line naming the client) any
 * connection that breaks the protocol or a limit, without disturbing the
 * others.
 *
 * Lifecycle: config_default (+ config_set / config_load) -> create (binds
 * and listens, so the port is known and connections queue at once) -> run
 * in the calling thread, or start_thread -> stop (from any thread or a
 * signal handler) -> free.  Status codes are FCCL_OK or negative
 * FCCL_ERR_*, with a message in fccl_last_error().
 */
#ifndef FCCL_STORE_SERVER_H
#define FCCL_STORE_SERVER_H

#include <stdint.h>

#define STORE_SERVER_DEFAULT_PORT 29500
#define STORE_SERVER_MAX_VALUE_CAP (1ull << 30) /* the seeds' 1 GiB */
#define STORE_SERVER_MAX_KEY_CAP (1ull << 20)   /* far below the sniff */

struct store_server_config {
    char host[256];   /* "" = all interfaces (IPv4 and IPv6) */
    int port;         /* default 29500; 0 = a free port */
    int world_size;   /* workers that join with ADD("init/", 1) */
    int wait_for_workers; /* count and log joins; needs world_size > 0 */
    int64_t timeout_ms;   /* join timeout (default 300 s); 0 = none */
    uint64_t max_key;          /* key bytes, default 8 KiB */
    uint64_t max_value;        /* value bytes, default 64 MiB, <= 1 GiB */
    uint64_t max_keys_per_req; /* keys in one request, default 131072 */
    uint64_t max_conns;        /* open connections, default 65536 */
    uint64_t max_total_bytes;  /* stored keys + values, plus the bytes held
                                  for unfinished requests and unsent
                                  MULTI_GET/LIST replies; default 4 GiB */
    uint64_t max_conns_per_addr; /* connections of one client IP; default
                                    STORE_SERVER_PER_ADDR_AUTO (below);
                                    0 = no cap */
    int64_t request_timeout_ms;  /* an unfinished request or TLS handshake
                                    that makes no progress for this long is
                                    closed; default 30 s, 0 = never */
    char tls_cert[512]; /* PEM certificate (chain): enables TLS */
    char tls_key[512];  /* PEM private key of tls_cert */
    char tls_ca[512];   /* PEM CA: clients must present a cert it signed */
    int tls_required;   /* refuse plaintext connections */
    char token_file[512];      /* read-write token (AUTH, server_auth.c) */
    char read_token_file[512]; /* read-only token */
    int auth_required;  /* nothing but VALIDATE, PING and AUTH before a
                           successful proof (locks out PyTorch clients) */
    char journal[512];  /* journal file (journal.h); "" = none */
    int fsync_mode;     /* JOURNAL_FSYNC_ALWAYS (default) / INTERVAL / NEVER */
    int64_t fsync_interval_ms; /* INTERVAL's period, default 100 */
    int log_level;      /* FCCL_LOG_*; -1 (default) = leave as it is */
    /* --backend etcd://...: the state in etcd (backend_etcd.h), not in
     * this process; its user, password file and TLS files */
    char backend[1024];
    char backend_user[256];
    char backend_password_file[512];
    char backend_tls_ca[512], backend_tls_cert[512], backend_tls_key[512];
    int handle_signals; /* SIGINT/SIGTERM end run(); for programs only */
    /* issue 25: */
    int journal_recover; /* replay past damage in the middle of the
                            journal, keeping a copy (journal.h); without
                            it such a journal refuses to start */
    int64_t handshake_timeout_ms; /* a connection that has not finished
                                     VALIDATE (and, with auth_required,
                                     its proof) this long after accept is
                                     closed; default 10 s, 0 = never */
};

/* max_conns_per_addr's default: half of max_conns (once capped to the
 * file limit), at least 1024 or max_conns when that is smaller. */
#define STORE_SERVER_PER_ADDR_AUTO UINT64_MAX

struct store_server;

/* Fill c with the defaults above. */
void store_server_config_default(struct store_server_config *c);

/* Set one option by its command-line name without "--" ("port",
 * "max-value-bytes" or "max-value", "wait-for-workers", "timeout" in
 * seconds, ...; '_' works as '-').  Sizes take K/M/G/KiB/MiB/GiB suffixes;
 * booleans take 1/0/true/false/yes/no/on/off or "" for true.
 * FCCL_ERR_INVALID with a message naming the option if the name is unknown
 * or the value is malformed or out of range. */
int store_server_config_set(struct store_server_config *c, const char *key,
                            const char *value);

/* Apply a config file: "key = value" lines with the names above, '#'
 * comments and blank lines.  FCCL_ERR_IO if unreadable, FCCL_ERR_INVALID
 * naming file:line on a bad line. */
int store_server_config_load(struct store_server_config *c, const char *path);

/* Check the whole config (ranges, combinations).  FCCL_ERR_INVALID. */
int store_server_config_check(const struct store_server_config *c);

/* Build a server from c (copied): bind and listen (both IPv4 and IPv6 when
 * host is all interfaces), so store_server_port() is valid and clients can
 * connect once this returns; nothing is served until run/start_thread.
 * Does not block.  FCCL_ERR_INVALID (config), FCCL_ERR_IO (bind/listen,
 * e.g. port in use), FCCL_ERR_NOMEM. */
int store_server_create(const struct store_server_config *c,
                        struct store_server **out);

/* The TCP port listened on (the chosen one when config port was 0). */
int store_server_port(const struct store_server *s);

/* "HOST:PORT" as printed in the "listening on" line. */
const char *store_server_address(const struct store_server *s);

/* Serve in the calling thread until store_server_stop() (or SIGINT/SIGTERM
 * with handle_signals).  SIGPIPE is blocked in this thread while it runs.
 * FCCL_OK, or FCCL_ERR_STATE if already running. */
int store_server_run(struct store_server *s);

/* Run the loop in a new thread.  FCCL_OK, FCCL_ERR_STATE (already
 * running), FCCL_ERR_IO (thread creation). */
int store_server_start_thread(struct store_server *s);

/* Ask the loop to stop.  Safe from any thread and from a signal handler
 * (it only write()s to a pipe); a stop before run makes run return at
 * once.  Never blocks. */
void store_server_stop(struct store_server *s);

/* Stop (and join the thread of start_thread), close every connection and
 * free everything.  Must not be called from the loop itself. NULL ok. */
void store_server_free(struct store_server *s);

/* Workers joined so far (the value of "init/"), for wait_for_workers. */
int64_t store_server_joined(const struct store_server *s);

#endif
