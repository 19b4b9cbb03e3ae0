/*
 * Internals shared by the files of the server (store/server/): its state,
 * the connection, and what each file offers the others.  Not installed,
 * not for other modules.
 *
 * Module map of store/server, top down:
 *   server.c          the server's life: setup, the loop, accepting
 *                     (store_conn_new), signals, teardown
 *   server_http.c     the status port
 *   server_reload.c   SIGHUP: TLS files and tokens read again
 *   server_config.c   checking the options
 *   conn_plain.c      the plain transport (conn_type.h)
 *   conn_tls.c        the TLS transport
 *   server_conn.c     a connection's life: read, parse, dispatch, close
 *   server_ops.c      the commands, one handler per operation
 *   backend_ops.c     --backend etcd: the handlers (backend_etcd.h)
 *   backend_etcd.c    --backend etcd: transfers, the reply order
 *   server_list.c     LIST_KEYS over several loop turns
 *   server_metrics.c  /metrics and /status.json
 *   server_barrier.c  PyTorch's BARRIER
 *   server_auth.c     the token handshake and its gate
 *   server_slots.c    connections by client address: caps, sweeps
 *   conn_reply.c      replies, batched and in order
 *   server_journal.c  the journal's records, group commit and setup
 *   conn_out.c        a connection's output buffer: limits, hold, break
 *   server_join.c     workers joining (the "init/" counter)
 *   server_quiet.c    repeated warnings, summarised
 *   server_tls.c      the TLS context
 *   server_listen.c   listening sockets, peer names
 *   server_exposure.c the warning about plaintext beyond loopback
 *   server_env.c      paths from systemd's directories
 *   server_page.c     the status page's HTML
 *   server_stats.c    the loop's counters and the STATS reply
 *   waiters.c         WAIT: waiters by key (waiters.h)
 *   journal_replay.c  the journal: opening and replaying (journal.h)
 *   journal.c         the journal: records, compaction
 *   kv.c              the key table (kv.h)
 * Each file calls only files below it in this list (the build checks it
 * on the objects, scripts/check-calls.sh).  Where a lower file must reach
 * a connection's life (closing one, resuming its reads) it goes through
 * s->life, the table server_conn.c fills and server.c sets: the event
 * that needs it (an eviction, a timer, a listing's last turn) is below,
 * the connection above.
 */
#ifndef FCCL_STORE_SERVER_INT_H
#define FCCL_STORE_SERVER_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "codec.h"
#include "fccl/server.h"
#include "journal.h"
#include "kv.h"
#include "waiters.h"

#include "server_names.h" /* struct store_server = struct fccl_server */
#define STORE_SERVER_PER_ADDR_AUTO FCCL_SERVER_PER_ADDR_AUTO

struct bufferevent;
struct evbuffer;

#define STORE_READ_CHUNK (64u << 10) /* bytes per read of a socket */
#define STORE_SLICE (1u << 20) /* most bytes one connection reads per turn */
#define STORE_BIG_VALUE (1u << 20) /* default big_value_min */
#define STORE_LEND_MIN (64u << 10)  /* default lend_min */

struct addr_slot; /* server_slots.c: the connections of one client address */
struct be_state;  /* backend_etcd.c: --backend etcd:// */
struct store_conn;

/* The calls of a connection's life (server_conn.c) that the files below
 * it in the module map need: they reach them through s->life. */
struct store_conn_life {
    /* Cancel c's wait, close its socket and free it. */
    void (*free)(struct store_conn *c);
    /* c's reads were stopped for a deferred request (STORE_DEFER): read
     * and run again.  May free c. */
    void (*resume)(struct store_conn *c);
    /* c's LIST_KEYS reply is queued: run what c sent behind it.  May free
     * c. */
    void (*list_done)(struct store_conn *c);
};
extern const struct store_conn_life store_conn_life;
struct be_op;

/* A SET / APPEND / QUEUE_PUSH whose value is large: the value is read
 * straight into its own buffer, a slice per loop turn, and a SET hands the
 * buffer to the table without a copy (server_conn.c). */
struct big_req {
    enum store_op op;
    uint8_t *key;
    uint64_t klen;
    uint8_t *val; /* malloc'd, vlen bytes */
    uint64_t vlen, got;
};

/* Where a connection is in its life (server_conn.c).  It only moves down
 * this list, maybe skipping steps (a plain connection skips HANDSHAKE). */
enum conn_state {
    CONN_SNIFF,     /* TLS configured, first byte not seen (conn_tls.c) */
    CONN_HANDSHAKE, /* TLS handshake not finished */
    CONN_OPEN,      /* serving requests */
    CONN_CLOSING,   /* EOF seen: flush what is queued, then free */
    CONN_BROKEN,    /* send failed or aborted: output dropped, freed at
                       its next event */
};

struct conn_type; /* conn_type.h: the byte transport, plain or TLS */

/* What a connection has shown of itself (server_slots.c): who is closed
 * first when a cap is reached, and who the handshake timeout closes. */
enum conn_tier {
    CONN_TIER_NEW,     /* no VALIDATE yet (a legacy one: no request yet),
                          or with --auth-required not authenticated */
    CONN_TIER_GREETED, /* VALIDATE and nothing else */
    CONN_TIER_ACTIVE,  /* made a request: never closed for a newcomer of
                          its own address, nor for being quiet */
};

struct store_conn {
    struct store_server *s;
    const struct conn_type *ct; /* plain, or TLS once the sniff says so */
    enum conn_state state;
    struct bufferevent *bev; /* owns the socket; output side */
    struct evbuffer *in;     /* bytes of incomplete requests */
    struct event *rev;       /* the socket's read event (plain only) */
    struct evbuffer_cb_entry *out_cb; /* counts queued bytes in s->out_held */
    int fd;
    struct store_conn *prev, *next; /* the server's list of connections */
    enum store_dialect dialect;
    size_t need;        /* buffered bytes needed before parsing again */
    uint64_t held;      /* bytes of s->held for an unfinished request */
    struct big_req *big; /* a large value being read, or NULL */
    struct list_job *list; /* a LIST_KEYS in progress (server_list.c) */
    struct waiter *wait; /* the pending WAIT, if any */
    struct barrier_wait *bar; /* a parked BARRIER (server_barrier.c) */
    struct addr_slot *slot;           /* this client address's slot */
    struct store_conn *sprev, *snext; /* connections of the same address */
    uint64_t last_ms;    /* monotonic ms of the last byte read */
    uint64_t part_ms;    /* when the unfinished request (or TLS handshake)
                            began; 0 when there is none */
    uint64_t part_bytes; /* bytes of it read so far */
    uint8_t paused;   /* reads stopped: replies pile up unread (any state) */
    uint8_t jheld;    /* replies held until the journal's next fdatasync */
    struct store_conn *jnext; /* the server's list of such connections */
    uint8_t sync_aware; /* sent a SYNC: refused writes are reported, not
                           closed */
    int sync_code;      /* first refusal since the last SYNC, 0 = none */
    char *sync_msg;     /* its message, or NULL */
    uint8_t validated; /* VALIDATE seen (a second one closes) */
    uint8_t auth;      /* AUTH_READ_WRITE / AUTH_READ_ONLY once proven */
    uint8_t nonce_set; /* an AUTH_HELLO challenge is outstanding */
    uint8_t nonce[AUTH_NONCE_LEN];
    char addr[64];   /* "HOST:PORT" of the client, for log lines */
    struct be_op *be_head, *be_tail; /* --backend: requests in flight, in
                                        arrival order (backend_etcd.c) */
    uint32_t be_n;
    uint8_t be_flushing, be_again; /* be_flush running / asked again */
    /* issue 25: handshakes, refusals told in-band, failed proofs */
    uint64_t born_ms;  /* accepted (monotonic ms) */
    uint8_t tier;      /* enum conn_tier */
    uint8_t companion; /* NEW, kept past handshake_timeout as the silent
                          second connection of a PyTorch 1.13 client
                          (server_slots.c) */
    struct store_conn *qprev, *qnext; /* its address's queue of its tier */
    uint8_t fccl;      /* introduced itself with the fccl hello */
    uint8_t refused;   /* kept only to tell it why it is refused */
    uint8_t refuse_code; /* SYNC_* code of that refusal */
    char *refuse_msg;    /* and its text (malloc'd) */
    uint8_t close_after; /* close once its queued replies are sent */
    uint8_t draining;  /* replies sent: half-closed, waiting for its EOF */
    uint64_t closing_ms; /* when it began to close (close_after) */
    uint8_t auth_fails;  /* refused proofs on this connection */
    uint8_t deferred;    /* reads stopped until defer_ev (slowed proof) */
    uint64_t proof_at_ms; /* a slowed AUTH_PROOF runs at this time, or 0 */
    struct event *defer_ev;
};

/* Why a write was refused (the status page's and /metrics' split of
 * writes_refused). */
enum store_refuse {
    STORE_REFUSE_LIMIT,     /* a size or byte limit */
    STORE_REFUSE_NOMEM,
    STORE_REFUSE_READ_ONLY, /* the client holds the read-only token */
    STORE_REFUSE_AUTH,      /* auth-required and no proof yet */
    STORE_REFUSE_JOURNAL,   /* the journal refuses writes */
    STORE_REFUSE__COUNT,
};

/* fdatasync latency buckets: upper bounds in microseconds, +Inf after. */
#define STORE_JSYNC_BUCKETS 10
extern const uint64_t store_jsync_bounds_us[STORE_JSYNC_BUCKETS];

/* Repeated warnings, summarised (server_quiet.c). */
enum store_quiet_kind {
    QUIET_REFUSED,
    QUIET_EVICTED,
    QUIET_HANDSHAKE,
    QUIET_PROOF,
    QUIET_AUTH_CLOSED,
    QUIET__COUNT
};
#define QUIET_SLOTS 64
#define QUIET_WINDOW_MS 10000
struct quiet_entry {
    uint8_t used, kind;
    uint64_t since_ms; /* the window's first (logged) warning */
    uint64_t more;     /* warnings counted since */
    char ip[48];
};

/* A refusal for the connection being accepted, set by store_slots_admit
 * (STORE_ADMIT_TELL) and taken by store_conn_new. */
struct admit_refusal {
    int pending;
    uint8_t code; /* SYNC_* */
    char msg[256];
};
#define STORE_ADMIT_TELL 2 /* store_slots_admit: serve it to be told why */
#define STORE_REFUSED_MAX 32 /* such connections at once (they take fds
                                beyond max-connections: FD_RESERVE is 64) */
#define STORE_REFUSED_LINGER_MS 2000 /* time they get to say hello */

struct store_stats {
    uint64_t conns_total;     /* accepted since start */
    uint64_t conns_refused;   /* refused at accept (limits) */
    uint64_t conns_evicted;   /* idle ones closed to make room */
    uint64_t conns_timed_out; /* stalled requests / TLS handshakes */
    uint64_t conns_no_handshake; /* closed by --handshake-timeout */
    uint64_t conns_told;      /* refused with the reason in-band */
    uint64_t auth_refused;    /* refused token proofs */
    uint64_t auth_deferred;   /* proofs delayed (a slowed address) */
    uint64_t refused_writes;  /* writes refused and reported by SYNC */
    uint64_t refused_replies; /* MULTI_GET / LIST over the reply budget */
    uint64_t turn_max_us;     /* longest callback (one loop turn's work) */
    uint64_t turn_slow;       /* callbacks over 20 ms */
    uint64_t reqs[OP__COUNT], bytes[OP__COUNT];
    uint64_t bytes_out;       /* reply bytes queued or sent */
    uint64_t refused[STORE_REFUSE__COUNT]; /* refused writes by reason */
    uint64_t jsync_hist[STORE_JSYNC_BUCKETS + 1]; /* fdatasync latency */
    uint64_t jsync_ns;        /* their total */
    uint64_t reloads, reload_failures;
};

struct store_server {
    struct store_server_config cfg;
    struct codec_limits lim;
    struct event_base *base;
    struct evconnlistener *lis[2];
    int nlis;
    struct event *stop_ev, *sig_int, *sig_term, *sig_hup, *join_timer,
        *accept_timer;
    int stop_pipe[2];
    int port;
    char address[300];
    struct kv kv;
    struct waiters ws;
    struct store_conn *conns;
    uint64_t nconns;
    uint64_t held;     /* bytes held for unfinished requests */
    uint64_t out_held; /* bytes of replies queued, not yet sent */
    struct slot_table *slots; /* server_slots.c */
    struct event *sweep_timer;
    struct store_stats st;
    uint64_t big_value_min; /* values read into their own buffer (1 MiB) */
    uint64_t lend_min;      /* replies that refer to stored bytes (64 KiB);
                               both lowered by the fuzz target */
    struct store_conn *cur; /* connection whose requests are being run */
    struct codec_buf out;   /* replies of `cur`, sent at the end of a batch */
    uint8_t rbuf[STORE_READ_CHUNK]; /* each read lands here first */
    struct ssl_ctx_st *tls; /* SSL_CTX when TLS is configured */
    struct store_auth *auth; /* tokens (server_auth.c), or NULL */
    struct barrier_wait *barriers; /* parked BARRIERs (server_barrier.c) */
    struct journal jrn;   /* valid when has_journal */
    int has_journal;
    struct event *fsync_timer; /* --fsync interval */
    struct event *commit_ev;   /* --fsync always: sync, release held replies */
    struct store_conn *jheld;  /* connections whose replies wait for it */
    uint64_t per_addr_cap;  /* max_conns_per_addr resolved; 0 = none */
    uint64_t nrefused;      /* connections kept to be told why */
    struct admit_refusal admit;
    struct quiet_entry quiet[QUIET_SLOTS];
    _Atomic int64_t joined; /* read by fccl_server_joined from any thread */
    int join_armed;
    pthread_mutex_t join_mu; /* fccl_server_wait_workers sleeps on join_cv */
    pthread_cond_t join_cv;
    int join_sync;           /* both initialised */
    atomic_int ended;        /* the loop ran and returned */
    struct store_http *http; /* the status port (server_http.c), or NULL */
    char http_address[300];  /* its "HOST:PORT", "" without one */
    uint64_t started_ns;     /* when the server was made (uptime) */
    struct prefix_sum *prefixes; /* server_metrics.c's cached summary */
    atomic_int running;
    int thread_started;
    pthread_t thread;
    struct be_state *be; /* --backend etcd://, or NULL */
    const struct store_conn_life *life; /* &store_conn_life */
};


/* ---- server.c ---- */

/* Serve a freshly accepted socket (non-blocking, TCP_NODELAY set); `addr`
 * names the peer in log lines.  On failure the socket is closed and
 * FCCL_ERR_NOMEM returned. */
int store_conn_new(struct store_server *s, int fd, const char *addr);

/* ---- server_conn.c (what the transports call: conn_type.h) ---- */

/* Cancel c's wait, close its socket and free it. */
void store_conn_free(struct store_conn *c);
/* store_conn_life's resume and list_done. */
void store_conn_resume(struct store_conn *c);
void store_conn_list_done(struct store_conn *c);

/* ---- conn_reply.c ---- */

/* Queue reply bytes for c, in order: batched for the current connection,
 * sent at once (or buffered) for others.  Never fails the caller: a
 * connection whose output cannot be kept is marked broken. */
void store_conn_reply(struct store_conn *c, const void *p, size_t n);

/* Queue n reply bytes at p without copying them: cleanup(p, n, arg) runs
 * once they are sent or dropped (at once if they went out directly). */
void store_conn_reply_ref(struct store_conn *c, const void *p, size_t n,
                          void (*cleanup)(const void *, size_t, void *),
                          void *arg);

/* The batch of c (the current connection) is over: send its replies
 * gathered in s->out. */
void store_conn_flush(struct store_server *s, struct store_conn *c);

/* ---- conn_out.c ---- */

/* Log why and disconnect c at its next event (safe while another
 * connection's request runs). */
void store_conn_abort(struct store_conn *c, const char *why);
/* The same without the log line (err, an errno, says why at debug
 * level): c's output is dropped, c freed from its next event. */
void store_conn_break(struct store_conn *c, int err);

/* Keep c's queued output off the socket (the journal's group commit):
 * 1 if it stays there until store_conn_release, 0 if c's transport
 * cannot hold it back. */
int store_conn_hold(struct store_conn *c);
void store_conn_release(struct store_conn *c);

/* Count the bytes queued in c's output buffer in s->out_held (from when
 * it has one, FCCL_ERR_NOMEM) and stop (before the buffer goes). */
int store_conn_watch_out(struct store_conn *c);
void store_conn_unwatch_out(struct store_conn *c);

/* Would holding `more` bytes (an unfinished request or a queued reply)
 * pass the server's byte limit?  Stored, held and queued bytes all count. */
int store_would_overflow(const struct store_server *s, uint64_t more);

/* ---- server_slots.c ---- */

/* Slot table setup / teardown; raising RLIMIT_NOFILE and capping
 * max_conns to it (with a log line) happens in store_slots_init. */
int store_slots_init(struct store_server *s);
void store_slots_free(struct store_server *s);
/* May a client from `addr` connect now?  At a cap this closes a
 * connection that has not made a request (NEW before GREETED, oldest
 * first) of its own address (per-address cap) or of the address holding
 * the most such (max-connections), else the longest-idle one of the
 * address holding the most.  Returns 1 if yes; STORE_ADMIT_TELL if it is
 * refused but may be served to be told why (s->admit, for
 * store_conn_new); 0 if it must be closed now.  Log lines say why. */
int store_slots_admit(struct store_server *s, const char *addr);
/* c completed a request of type op: move it up its tiers. */
void store_slots_progress(struct store_server *s, struct store_conn *c,
                          enum store_op op);
/* Make c a connection that is only told why it is refused (code SYNC_*,
 * msg) when it says the fccl hello, and closed otherwise: 1, or 0 when
 * too many such are open (close c then). */
int store_slots_refuse(struct store_server *s, struct store_conn *c,
                       uint8_t code, const char *msg);
/* Link c into its address's slot / unlink it.  attach: FCCL_ERR_NOMEM. */
int store_slots_attach(struct store_server *s, struct store_conn *c,
                       const char *ip);
void store_slots_detach(struct store_server *s, struct store_conn *c);
/* Periodic sweep: close connections whose unfinished request or TLS
 * handshake made no progress within request_timeout, that have not
 * finished their handshake within handshake_timeout, and refused ones
 * whose time is up; log the summaries of repeated warnings. */
void store_slots_sweep(struct store_server *s);

/* ---- server_quiet.c ---- */

/* Log a warning (kind k, client IP ip) unless one of the same kind and
 * IP was logged in the last QUIET_WINDOW_MS: then count it; the count is
 * logged as "N more ... from IP in the last 10 s" when the window ends. */
void store_quiet_warn(struct store_server *s, enum store_quiet_kind k,
                      const char *ip, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Log the counts of windows that are over (all: every one). */
void store_quiet_flush(struct store_server *s, int all);
/* The IP part of "IP:PORT" / "[IP6]:PORT". */
void store_ip_of(const char *addr, char *ip, size_t n);

/* ---- server_list.c ---- */

/* Start LIST_KEYS(prefix r->key) for c; its reply comes from later loop
 * turns, and c runs nothing else until then.  FCCL_ERR_NOMEM. */
int store_list_start(struct store_server *s, struct store_conn *c,
                     const struct codec_req *r);
/* Drop c's listing, if any. */
void store_list_free(struct store_conn *c);

/* ---- server_stats.c ---- */

/* Timing of one callback, for STATS' longest loop turn. */
uint64_t store_turn_begin(void);
void store_turn_end(struct store_server *s, uint64_t t0);
/* One fdatasync took ns: into the latency histogram. */
void store_stats_sync(struct store_server *s, uint64_t ns);

/* The STATS reply text ("name value" lines) into b. */
void store_stats_text(struct store_server *s, struct codec_buf *b);

/* ---- server_listen.c ---- */

/* Bind and listen on host:port ("" = all interfaces, IPv4 and IPv6) with
 * the kernel's largest backlog.  fds[0..*n) are non-blocking, close-on-exec
 * listening sockets; *port_out the bound port.  FCCL_OK or FCCL_ERR_IO. */
int store_listen_open(const char *host, int port, int fds[2], int *n,
                      int *port_out);

struct sockaddr;
/* "IP:PORT" / "[IP6]:PORT" of a peer, for log lines. */
void store_format_peer(const struct sockaddr *sa, char *out, size_t outlen);

/* ---- server_tls.c ---- */

/* Build the SSL_CTX from tls-cert/tls-key (and tls-ca) if configured.
 * FCCL_OK or FCCL_ERR_AUTH naming the file and OpenSSL's reason. */
int store_tls_setup(struct store_server *s);
/* A fresh SSL_CTX from the configured files into *out (at start and for
 * a reload; it warns about the certificate's dates,
 * store_tls_warn_validity): FCCL_OK, or FCCL_ERR_AUTH / FCCL_ERR_NOMEM
 * with nothing made. */
int store_tls_load(const struct store_server_config *c,
                   struct ssl_ctx_st **out);
void store_tls_teardown(struct store_server *s);
/* OpenSSL's text for error e, or `fallback` when e is 0. */
const char *store_tls_reason(unsigned long e, const char *fallback);
/* One warning when the certificate of ctx (loaded from path, named in the
 * line) is not yet valid, expired, or expires within
 * STORE_CERT_WARN_DAYS: clients that verify it refuse the connection.
 * 1 when it warned, else 0.  Called at start; call it after loading a
 * new certificate too (a reload). */
#define STORE_CERT_WARN_DAYS 7
int store_tls_warn_validity(struct ssl_ctx_st *ctx, const char *path);

/* ---- server_journal.c ---- */

/* Open and replay the configured journal (before anyone can connect) and
 * set up its fdatasync events; FCCL_OK without one.  Errors as
 * journal_open, or FCCL_ERR_NOMEM. */
int store_jrn_open(struct store_server *s);
void store_jrn_close(struct store_server *s);
/* From the periodic sweep: finish a background compaction that is done. */
void store_jrn_poll(struct store_server *s);

/* Record a mutation before it is applied (no-op without a journal):
 * FCCL_OK, or FCCL_ERR_IO when the journal refuses writes (the mutation
 * is then refused too).  store_jrn_undo takes the record back when the
 * mutation fails after all. */
int store_jrn_record(struct store_server *s, enum journal_rec type,
                     struct codec_slice k, const uint8_t *v, uint64_t vlen);
int store_jrn_add(struct store_server *s, struct codec_slice k, int64_t d);
void store_jrn_undo(struct store_server *s);

/* --fsync always, group commit.  Must c's reply bytes wait for the
 * journal's fdatasync?  Then 1: queue them but do not send them; the
 * fdatasync at the end of the loop turn releases them (or, failing,
 * closes c without them).  0: send them now. */
int store_jrn_hold(struct store_conn *c);
/* c is closing: its held replies may go once they are on disk.  FCCL_OK,
 * or FCCL_ERR_IO when that sync failed and c is closed without them. */
int store_jrn_closing(struct store_conn *c);
/* c is freed: it no longer waits for a sync. */
void store_jrn_forget(struct store_conn *c);

/* ---- server_join.c ---- */

/* The mutex and condition fccl_server_wait_workers sleeps on (their clock
 * the monotonic one): FCCL_OK, or FCCL_ERR_NOMEM. */
int store_join_init(struct store_server *s);
/* The counter at key is now v (an ADD): when key is "init/", that many
 * workers joined (log lines, fccl_server_wait_workers woken). */
void store_join_counted(struct store_server *s, struct codec_slice key,
                        int64_t v);
/* Set s->joined from the "init/" counter (after the journal's replay). */
void store_joined_from_table(struct store_server *s);

/* ---- server_env.c ---- */

/* Relative credential paths into $CREDENTIALS_DIRECTORY, a relative
 * journal into $STATE_DIRECTORY (systemd), when those are set.
 * FCCL_ERR_INVALID when a path gets too long. */
int store_resolve_paths(fccl_server_opts_t *c);

/* ---- server_reload.c ---- */

/* Read the TLS files and tokens again (SIGHUP, fccl_server_reload): what
 * loads replaces the old, what does not is logged and the old kept. */
void store_reload(struct store_server *s);

/* ---- server_http.c ---- */

/* The status port, if configured: bind it and serve it from s->base.
 * FCCL_OK, FCCL_ERR_IO (bind), FCCL_ERR_NOMEM. */
int store_http_open(struct store_server *s);
void store_http_close(struct store_server *s);

/* ---- server_metrics.c ---- */

/* /metrics: the Prometheus text exposition of s into b. */
void store_metrics_text(struct store_server *s, struct codec_buf *b);
/* /status.json: what the status page shows, into b. */
void store_status_json(struct store_server *s, struct codec_buf *b);
/* The status page's HTML (server_page.c). */
extern const char store_status_page[];
/* Free the status page's cached key summary. */
void store_metrics_free(struct store_server *s);

/* ---- server_ops.c ---- */

/* Run one parsed request for c.  FCCL_OK, or a negative status whose
 * message (fccl_last_error) says why c must be closed. */
int store_dispatch(struct store_server *s, struct store_conn *c,
                   const struct codec_req *req);
/* The same for a request whose value is the malloc'd *owned: a SET takes
 * it into the table (and sets *owned to NULL); otherwise it stays the
 * caller's. */
int store_dispatch_owned(struct store_server *s, struct store_conn *c,
                         const struct codec_req *req, uint8_t **owned);

/* waiters.on_ready: c's WAIT completed; send STOP_WAITING. */
void store_conn_wait_ready(struct store_conn *c);

/* waiters.on_fail: c's WAIT was dropped (out of memory); disconnect c. */
void store_conn_wait_failed(struct store_conn *c);

/* Warn once when listening beyond loopback with plaintext accepted
 * (server_exposure.c). */
void store_warn_exposure(const struct store_server *s);
/* 1 for a host name or address only this machine can reach. */
int store_is_loopback(const char *host);

/* Token authentication (server_auth.c).  Setup loads the token files
 * (FCCL_ERR_AUTH naming a file readable by others or too short);
 * store_auth_gate decides whether c may run r: FCCL_OK, 1 when the gate
 * answered the request itself (AUTH_HELLO/PROOF), or FCCL_ERR_AUTH /
 * FCCL_ERR_PROTOCOL with the reason (the connection is closed, or for a
 * write SYNC reports it). */
int store_auth_setup(struct store_server *s);
void store_auth_teardown(struct store_server *s);
/* Read the configured token files again; only when both load are the
 * new tokens used (by proofs from then on).  FCCL_OK, FCCL_OK without
 * tokens, or the error of store_read_token with the old ones kept. */
int store_auth_reload(struct store_server *s);
/* Is tok[0..n) the read-write (2) or read-only (1) token?  0 if neither
 * (or no tokens).  Constant time in the token's bytes (the status port's
 * Bearer check). */
int store_auth_token_match(const struct store_server *s, const void *tok,
                           size_t n);
int store_auth_gate(struct store_server *s, struct store_conn *c,
                    const struct codec_req *r);
/* store_auth_gate's "not now": r must stay unread and c not be read until
 * c->defer_ev fires (a proof from an address that keeps failing). */
#define STORE_DEFER 2
/* c is freed: drop its timer. */
void store_auth_conn_free(struct store_conn *c);

/* PyTorch's BARRIER (server_barrier.c): count the arrival, reply
 * STOP_WAITING now or when the counter reaches world_size.  FCCL_OK,
 * FCCL_ERR_PROTOCOL (a wait already pending, world_size < 1),
 * FCCL_ERR_NOMEM, or the counter's error (not a number, store full). */
int store_barrier(struct store_server *s, struct store_conn *c,
                  const struct codec_req *r);
/* The counter at key is now v (a plain ADD): release the parked BARRIERs
 * whose world_size it reached.  O(1) when none is parked. */
void store_barrier_counted(struct store_server *s, struct codec_slice key,
                           int64_t v);
/* Drop c's parked barrier, if any (cancel, close). */
void store_barrier_drop(struct store_server *s, struct store_conn *c);
/* Call fn for each parked BARRIER (the status page): its key and target. */
void store_barrier_each(struct store_server *s,
                        void (*fn)(void *arg, const uint8_t *key,
                                   size_t klen, int64_t target),
                        void *arg);

#endif
