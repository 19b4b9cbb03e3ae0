/** @file fccl/server.h
 *
 * fccl server: the TCPStore server, embeddable in any program.
 *
 * This is the server `tcpstore-server` runs, the one `fccl-run` starts for
 * its ranks and the one rank 0 serves under srun or mpirun (`host_store`
 * in fccl/pg.h): PyTorch's TCPStore protocol, both dialects on one port,
 * with fccl's extensions (TLS on the same port, token authentication, a
 * journal that survives restarts, limits, STATS, an HTTP status port).
 * Every option of tcpstore-server is a field of fccl_server_opts_t and
 * can be set by its command-line name with fccl_server_opts_set().
 *
 * Lifecycle:
 *
 *     fccl_server_opts_t o;
 *     fccl_server_opts_init(&o);               // the defaults
 *     o.port = 0;                              // a free port
 *     fccl_server_opts_set(&o, "tls-cert", "srv.pem");   // or o.tls_cert
 *     fccl_server_t *s;
 *     if (fccl_server_create(&o, &s) < 0)      // binds, listens, replays
 *         fprintf(stderr, "%s\n", fccl_last_error());
 *     fccl_server_start(s);                    // serves on its own thread
 *     ... fccl_server_port(s) ...
 *     fccl_server_wait_workers(s, 4, 60000);   // optional
 *     fccl_server_free(s);                     // stops, closes, frees
 *
 * fccl_server_create() binds and listens before it returns, so the port
 * is known and clients may connect at once (they queue until the loop
 * runs).  The loop runs either on a thread of the server's own
 * (fccl_server_start) or on the caller's (fccl_server_run, which returns
 * after fccl_server_stop).  One libevent loop serves every client; the
 * calls below that say so are safe from any thread.
 *
 * Reload.  fccl_server_reload() (tcpstore-server: SIGHUP) reads the TLS
 * certificate, key and client CA and the token files again, from the
 * paths given at creation: new connections use the new ones, open
 * connections keep theirs, and a file that does not load is logged and
 * the old one kept.
 *
 * Files from systemd.  When CREDENTIALS_DIRECTORY is set (systemd's
 * LoadCredential=), a relative tls_cert, tls_key, tls_ca, token_file or
 * read_token_file names a credential in that directory; when
 * STATE_DIRECTORY is set (StateDirectory=), a relative journal is made in
 * it.  Absolute paths are taken as they are, and relative paths without
 * those variables are relative to the working directory.
 *
 * Status codes are FCCL_OK or a negative FCCL_ERR_* (fccl/core.h), with
 * the calling thread's message in fccl_last_error().  Log lines go to
 * stderr (subsystem STORE).
 */
#ifndef FCCL_SERVER_H
#define FCCL_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "fccl/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A store server.  Opaque. */
typedef struct fccl_server fccl_server_t;

/** tcpstore-server's port, and fccl_server_opts_init()'s. */
#define FCCL_SERVER_DEFAULT_PORT 29500
/** The largest value a server may be configured for (max_value). */
#define FCCL_SERVER_MAX_VALUE_CAP (1ull << 30)
/** The longest key a server may be configured for (max_key). */
#define FCCL_SERVER_MAX_KEY_CAP (1ull << 20)

/** max_conns_per_addr's default ("auto"): max_conns (once capped to the
 * file limit) less a sixteenth of it kept for other addresses, at least
 * 1024 (max_conns when that is smaller): 18,690 on a file limit of
 * 20,000. */
#define FCCL_SERVER_PER_ADDR_AUTO UINT64_MAX

/** fsync_mode values. */
enum fccl_server_fsync {
    FCCL_SERVER_FSYNC_ALWAYS = 0,   /**< records on disk before any reply */
    FCCL_SERVER_FSYNC_INTERVAL = 1, /**< every fsync_interval_ms */
    FCCL_SERVER_FSYNC_NEVER = 2,    /**< when the kernel writes them */
};

/** Every tcpstore-server option.  Fill with fccl_server_opts_init(),
 * then set fields directly or by name with fccl_server_opts_set().
 * Paths are copied into the fixed arrays; fccl_server_create() copies
 * the whole struct. */
typedef struct fccl_server_opts {
    char host[256];   /**< address to listen on; "" (default): every
                         interface, IPv4 and IPv6 on one port */
    int port;         /**< TCP port, default 29500; 0 picks a free one */
    int world_size;   /**< workers that join with ADD("init/", 1) (for
                         wait_for_workers and the status page); 0: none */
    int wait_for_workers; /**< log joins until world_size joined or
                         timeout_ms passed; needs world_size > 0 */
    int64_t timeout_ms;   /**< join timeout, default 300 s; 0: none */
    uint64_t max_key;          /**< key bytes, default 8 KiB, <= 1 MiB */
    uint64_t max_value;        /**< value bytes, default 64 MiB, <= 1 GiB */
    uint64_t max_keys_per_req; /**< keys in one request, default 131072 */
    uint64_t max_conns;        /**< open connections, default 65536 */
    uint64_t max_total_bytes;  /**< stored keys + values, plus bytes held
                                  for unfinished requests and unsent
                                  MULTI_GET / key-list replies; 4 GiB */
    uint64_t max_conns_per_addr; /**< connections of one client IP;
                                    default FCCL_SERVER_PER_ADDR_AUTO;
                                    0: no cap */
    int64_t request_timeout_ms;  /**< an unfinished request or TLS
                                    handshake without progress this long
                                    is closed; default 30 s, 0: never */
    int64_t handshake_timeout_ms; /**< a connection that has not finished
                                     VALIDATE (and, with auth_required,
                                     its proof) this long after accept is
                                     closed; default 10 s, 0: never */
    char tls_cert[512]; /**< PEM certificate (chain): TLS on the same port */
    char tls_key[512];  /**< PEM private key of tls_cert (mode & 077 = 0) */
    char tls_ca[512];   /**< PEM CA: clients must present a certificate it
                           signed (mutual TLS) */
    int tls_required;   /**< refuse plaintext connections */
    char token_file[512];      /**< read-write token (one line, >= 16
                                  bytes, mode & 077 = 0) */
    char read_token_file[512]; /**< read-only token */
    int auth_required;  /**< nothing but VALIDATE, PING and AUTH before a
                           proof (locks out PyTorch clients) */
    char journal[512];  /**< journal file; "" (default): none */
    int journal_recover; /**< start on a journal damaged in the middle:
                            keep a copy, skip the damage, replay every
                            intact record (without it such a journal is
                            refused: FCCL_ERR_IO) */
    int fsync_mode;     /**< an fccl_server_fsync; default ALWAYS */
    int64_t fsync_interval_ms; /**< FCCL_SERVER_FSYNC_INTERVAL's period,
                                  default 100 */
    char http[300];     /**< status port "HOST:PORT" (or "PORT": on
                           127.0.0.1); "" (default): none.  A host beyond
                           loopback needs http_public */
    int http_public;    /**< let http listen beyond loopback */
    /** --backend etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (or etcds://):
     * every key lives in etcd, this server is a front-end; "" (default):
     * in this process.  Not with journal or wait_for_workers. */
    char backend[1024];
    char backend_user[256];          /**< etcd user (with its password) */
    char backend_password_file[512]; /**< its password, mode & 077 = 0 */
    char backend_tls_ca[512];   /**< CA that verifies the etcd members */
    char backend_tls_cert[512]; /**< client certificate for etcd */
    char backend_tls_key[512];  /**< its key */
    int log_level;      /**< 0 error .. 4 trace, applied to the whole
                           process by fccl_server_create(); -1 (default):
                           leave it as it is */
    int handle_signals; /**< for programs: SIGINT/SIGTERM end
                           fccl_server_run(), SIGHUP reloads; default 0 */
} fccl_server_opts_t;

/**
 * Fill opts with the defaults above (those of tcpstore-server).
 *
 * Never blocks, never fails.  Thread-safe.
 *
 * @param opts the options to fill; not NULL.
 */
FCCL_API void fccl_server_opts_init(fccl_server_opts_t *opts);

/**
 * Set one option by its tcpstore-server name without "--": "port",
 * "max-value-bytes" (or "max-value"), "tls-cert", "wait-for-workers",
 * "timeout" (seconds), "fsync", "http", ...; '_' works as '-'.  Sizes
 * take K/M/G/KiB/MiB/GiB suffixes; seconds may have fractions; booleans
 * take 1/0/true/false/yes/no/on/off, or "" for true.
 *
 * Never blocks.  Not thread-safe on one opts.
 *
 * @param opts the options to change.
 * @param name the option's name.
 * @param value its value as text; read during the call only.
 * @return FCCL_OK, or FCCL_ERR_INVALID with a message naming the option:
 *     an unknown name, a malformed or out-of-range value, a path longer
 *     than its field, a NULL argument.
 */
FCCL_API int fccl_server_opts_set(fccl_server_opts_t *opts, const char *name,
                                  const char *value);

/**
 * Apply a configuration file: "name = value" lines with the names of
 * fccl_server_opts_set(), '#' comments and blank lines.  The lines before
 * a bad one stay applied.
 *
 * Blocks reading the file.  Not thread-safe on one opts.
 *
 * @param opts the options to change.
 * @param path the file.
 * @return FCCL_OK; FCCL_ERR_IO if it cannot be read; FCCL_ERR_INVALID
 *     naming path:line for a malformed line or a bad option.
 */
FCCL_API int fccl_server_opts_load(fccl_server_opts_t *opts, const char *path);

/**
 * Fill the options of a store a job hosts itself (fccl-run's, rank 0's
 * under srun or mpirun) from the environment, so that it takes the same
 * security and durability settings as a tcpstore-server:
 * PREFIX_SERVER_TLS_CERT, PREFIX_SERVER_TLS_KEY and PREFIX_SERVER_TLS_CA
 * (the server's certificate, key and client CA; a certificate also sets
 * tls_required), PREFIX_SERVER_JOURNAL (the journal), and
 * PREFIX_TOKEN_FILE (the token the clients prove: it becomes token_file
 * with auth_required).  Unset or empty variables leave their fields as
 * they are.
 *
 * Never blocks.  Not thread-safe against setenv.
 *
 * @param opts the options to change.
 * @param prefix "FCCL_STORE" for fccl_init and fccl-run.
 * @return FCCL_OK; FCCL_ERR_INVALID (a NULL argument, a path too long,
 *     naming the variable).
 */
FCCL_API int fccl_server_opts_env(fccl_server_opts_t *opts, const char *prefix);

/**
 * Check the options as fccl_server_create() does: ranges and
 * combinations (tls_key without tls_cert, wait_for_workers without
 * world_size, http beyond loopback without http_public, ...).  Files are
 * not opened.
 *
 * Never blocks.  Thread-safe.
 *
 * @return FCCL_OK or FCCL_ERR_INVALID naming the option.
 */
FCCL_API int fccl_server_opts_check(const fccl_server_opts_t *opts);

/**
 * Make a server from opts (copied): open and replay the journal, load the
 * TLS files and tokens, bind and listen (IPv4 and IPv6 when host is every
 * interface), and the status port if asked.  Clients can connect once
 * this returns; nothing is served until fccl_server_start() or
 * fccl_server_run().  Logs "listening on HOST:PORT" (info) and, when it
 * listens beyond loopback with plaintext accepted and no token required,
 * a warning.
 *
 * Blocks while the journal is replayed; otherwise does not wait.
 * Thread-safe (each call makes its own server).
 *
 * @param opts the options; read during the call only.
 * @param out receives the server (free it with fccl_server_free()); NULL
 *     on failure, when everything made is undone.
 * @return FCCL_OK, or
 *   - FCCL_ERR_INVALID: the options (as fccl_server_opts_check()), a NULL
 *     argument;
 *   - FCCL_ERR_IO: binding or listening failed (the port is in use, the
 *     host is not this machine's), a journal that cannot be opened or is
 *     held by another server;
 *   - FCCL_ERR_AUTH: a TLS certificate, key or CA that does not load, a
 *     key or token file readable by group or others, a token too short;
 *   - FCCL_ERR_NOMEM.
 */
FCCL_API int fccl_server_create(const fccl_server_opts_t *opts,
                                fccl_server_t **out);

/**
 * Serve on a new thread of the server's own until fccl_server_stop() or
 * fccl_server_free().
 *
 * Does not block.  Thread-safe.
 *
 * @return FCCL_OK; FCCL_ERR_INVALID (NULL); FCCL_ERR_STATE (it already
 *     runs, or was started before); FCCL_ERR_IO (no thread).
 */
FCCL_API int fccl_server_start(fccl_server_t *server);

/**
 * Serve on the calling thread until fccl_server_stop() (or, with
 * handle_signals, SIGINT or SIGTERM).  A stop asked for before the call
 * makes it return at once.  SIGPIPE is blocked on this thread while it
 * runs.
 *
 * Blocks.  One loop at a time per server.
 *
 * @return FCCL_OK; FCCL_ERR_INVALID (NULL); FCCL_ERR_STATE (it already
 *     runs); FCCL_ERR_IO (the event loop failed).
 */
FCCL_API int fccl_server_run(fccl_server_t *server);

/** @name Queries
 * The port listened on (the one picked when port was 0); the address as
 * in the "listening on" line, "HOST:PORT", owned by the server; the
 * status port's address, "" without one.  Never block; thread-safe.
 * @{ */
FCCL_API int fccl_server_port(const fccl_server_t *server);
FCCL_API const char *fccl_server_address(const fccl_server_t *server);
FCCL_API const char *fccl_server_http_address(const fccl_server_t *server);
/** @} */

/**
 * The workers joined so far: the value of the counter "init/" that
 * PyTorch's clients and every fccl rank add 1 to (kept across a journal
 * restart).
 *
 * Never blocks.  Thread-safe.
 */
FCCL_API int64_t fccl_server_joined(const fccl_server_t *server);

/**
 * Wait until n workers have joined (fccl_server_joined() >= n).
 *
 * Blocks up to timeout_ms (which must be >= 0; 0 just looks) while the
 * server serves on another thread.  Thread-safe; several threads may
 * wait at once.
 *
 * @return FCCL_OK; FCCL_ERR_TIMEOUT, with a message saying how many of n
 *     joined; FCCL_ERR_STATE when the loop stopped meanwhile (or ran and
 *     ended before); FCCL_ERR_INVALID (NULL, n < 0, timeout_ms < 0).
 */
FCCL_API int fccl_server_wait_workers(fccl_server_t *server, int n,
                                      int64_t timeout_ms);

/**
 * Ask the loop to read the TLS certificate, key and CA and the token
 * files again (what tcpstore-server does on SIGHUP).  The reload happens
 * on the loop's thread soon after; each file that does not load (or a key
 * that does not match the new certificate) is logged as a warning and the
 * old material kept; open connections are not touched.
 *
 * Never blocks.  Safe from any thread and from a signal handler.
 */
FCCL_API void fccl_server_reload(fccl_server_t *server);

/**
 * Ask the loop to stop: fccl_server_run() returns, the thread of
 * fccl_server_start() ends.  A stop before the loop runs makes the next
 * run return at once.
 *
 * Never blocks.  Safe from any thread and from a signal handler; twice is
 * fine.  NULL is a no-op.
 */
FCCL_API void fccl_server_stop(fccl_server_t *server);

/**
 * Stop the server (joining the thread of fccl_server_start()), close
 * every connection, the listeners, the status port and the journal, and
 * free everything.
 *
 * Blocks until the thread has ended.  Must not be called from the loop
 * itself nor while fccl_server_run() runs on another thread (stop it and
 * let it return first).  NULL is a no-op.
 */
FCCL_API void fccl_server_free(fccl_server_t *server);

#ifdef __cplusplus
}
#endif
#endif
