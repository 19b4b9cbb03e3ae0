/*
 * The store server's lifecycle and event-loop glue (fccl/server.h): the
 * event base, listeners and accepting (with the connection limit), the
 * control pipe (stop and reload from any thread or signal handler),
 * signals, the join timeout, running in a
 * thread, and teardown in the reverse order of setup.  An accepted
 * socket becomes a connection here (store_conn_new, on the plain
 * transport); its life is server_conn.c's, the status port
 * server_http.c's, the count of joined workers server_join.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dlist.h"
#include "clock.h"
#include "conn_type.h"
#include "err.h"
#include "log.h"
#include "net.h"
#include "backend_etcd.h"
#include "server_int.h"

#define ACCEPT_PAUSE_MS 100 /* out of fds: pause accepting this long */
#define SWEEP_MS 1000       /* how often stalled requests are looked for */

/* The connection being accepted was refused by store_slots_admit: it is
 * kept (outside the slots) only to be told why. */
static int take_refusal(struct store_server *s, struct store_conn *c)
{
    if (!s->admit.pending)
        return 0;
    s->admit.pending = 0;
    c->refuse_msg = strdup(s->admit.msg);
    if (!c->refuse_msg)
        return -1;
    c->refuse_code = s->admit.code;
    c->refused = 1;
    s->nrefused++;
    return 1;
}

int store_conn_new(struct store_server *s, int fd, const char *addr)
{
    struct store_conn *c = calloc(1, sizeof(*c));
    if (!c) {
        s->admit.pending = 0;
        close(fd); /* as promised: the caller does not close it */
        return fccl_err(FCCL_ERR_NOMEM, "connection");
    }
    c->s = s;
    if (conn_plain_open(c, fd) < 0) {
        s->admit.pending = 0;
        free(c);
        return FCCL_ERR_NOMEM;
    }
    c->state = s->tls ? CONN_SNIFF : CONN_OPEN;
    c->need = 1;
    c->born_ms = c->last_ms = fccl_now_ns() / 1000000u;
    snprintf(c->addr, sizeof(c->addr), "%s", addr);
    int refused = take_refusal(s, c);
    if (refused < 0 || store_conn_watch_out(c) < 0 ||
        (!refused && store_slots_attach(s, c, addr) < 0)) {
        if (c->refused)
            s->nrefused--;
        free(c->refuse_msg);
        store_conn_unwatch_out(c);
        c->ct->release(c, 0);
        free(c);
        return fccl_err(FCCL_ERR_NOMEM, "connection");
    }
    if (refused)
        s->st.conns_told++;
    s->st.conns_total++;
    DLIST_PUSH(s->conns, c, prev, next);
    s->nconns++;
    return FCCL_OK;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int salen, void *arg)
{
    struct store_server *s = arg;
    char addr[64];
    (void)l;
    (void)salen;
    uint64_t t0 = store_turn_begin();
    store_format_peer(sa, addr, sizeof(addr));
    if (!store_slots_admit(s, addr)) {
        s->st.conns_refused++;
        close(fd);
        store_turn_end(s, t0);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (store_conn_new(s, fd, addr) < 0)
        LOG_WARN("STORE", "refusing client %s: %s", addr, fccl_last_error());
    else
        LOG_DEBUG("STORE", "client %s connected", addr);
    store_turn_end(s, t0);
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    struct store_server *s = arg;
    uint64_t t0 = store_turn_begin();
    (void)fd;
    (void)what;
    store_slots_sweep(s);
    store_jrn_poll(s); /* a background compaction done? */
    kv_migrate(&s->kv, 65536); /* a quiet table finishes growing too */
    store_turn_end(s, t0);
}

static void set_listening(struct store_server *s, int on)
{
    for (int i = 0; i < s->nlis; i++) {
        if (on)
            evconnlistener_enable(s->lis[i]);
        else
            evconnlistener_disable(s->lis[i]);
    }
}

static void on_accept_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    set_listening(arg, 1);
}

/* accept() failed for a reason other than a retriable one: out of fds or
 * memory.  Pause accepting briefly instead of spinning on the listener. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
    struct store_server *s = arg;
    int err = EVUTIL_SOCKET_ERROR();
    struct timeval tv = {0, ACCEPT_PAUSE_MS * 1000};
    (void)l;
    LOG_WARN("STORE", "accept: %s; pausing new connections for %d ms",
             evutil_socket_error_to_string(err), ACCEPT_PAUSE_MS);
    set_listening(s, 0);
    evtimer_add(s->accept_timer, &tv);
}

/* ---- the control pipe, signals, join timeout ---- */

#define CTL_STOP 'x'
#define CTL_RELOAD 'r'

/* Bytes written by fccl_server_stop / fccl_server_reload (from any
 * thread or a signal handler): a reload runs here, on the loop. */
static void on_control(evutil_socket_t fd, short what, void *arg)
{
    struct store_server *s = arg;
    char buf[64];
    int stop = 0, reload = 0;
    ssize_t n;
    (void)what;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        for (ssize_t i = 0; i < n; i++) {
            stop |= buf[i] == CTL_STOP;
            reload |= buf[i] == CTL_RELOAD;
        }
    if (reload)
        store_reload(s);
    if (stop)
        event_base_loopbreak(s->base);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct store_server *s = arg;
    (void)what;
    if (sig == SIGHUP) {
        LOG_INFO("STORE", "SIGHUP: reloading TLS files and tokens");
        store_reload(s);
        return;
    }
    LOG_INFO("STORE", "signal %d: shutting down", (int)sig);
    event_base_loopexit(s->base, NULL);
}

static void on_join_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct store_server *s = arg;
    (void)fd;
    (void)what;
    if (s->joined < s->cfg.world_size)
        LOG_WARN("STORE", "timeout after %.1f s: %lld/%d workers joined; "
                 "still serving", (double)s->cfg.timeout_ms / 1000.0,
                 (long long)s->joined, s->cfg.world_size);
}

/* ---- lifecycle ---- */

static void limits_from_config(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    s->lim.max_key = c->max_key;
    s->lim.max_value = c->max_value;
    s->lim.max_keys = c->max_keys_per_req;
    s->lim.max_request = 2 * c->max_value + 2 * c->max_key + 4096;
    s->ws.kv = &s->kv;
    s->ws.max_keys = c->max_keys_per_req;
    s->ws.max_bytes = s->lim.max_request;
    s->ws.on_ready = store_conn_wait_ready;
    s->ws.on_fail = store_conn_wait_failed;
}

static int open_listeners(struct store_server *s)
{
    int fds[2], n = 0;
    int rc = store_listen_open(s->cfg.host, s->cfg.port, fds, &n, &s->port);
    if (rc < 0)
        return rc;
    for (int i = 0; i < n; i++) {
        s->lis[i] = evconnlistener_new(
            s->base, on_accept, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC,
            0 /* already listening */, fds[i]);
        if (!s->lis[i]) {
            for (int j = i; j < n; j++)
                close(fds[j]);
            return fccl_err(FCCL_ERR_NOMEM, "evconnlistener_new");
        }
        s->nlis++;
        evconnlistener_set_error_cb(s->lis[i], on_accept_error);
    }
    const char *shown = s->cfg.host[0] ? s->cfg.host : "0.0.0.0";
    fccl_addr_format(s->address, sizeof(s->address), shown, s->port);
    return FCCL_OK;
}

static int add_events(struct store_server *s)
{
    if (pipe2(s->stop_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "pipe");
    s->stop_ev = event_new(s->base, s->stop_pipe[0], EV_READ | EV_PERSIST,
                           on_control, s);
    s->accept_timer = evtimer_new(s->base, on_accept_resume, s);
    s->join_timer = evtimer_new(s->base, on_join_timeout, s);
    s->sweep_timer = event_new(s->base, -1, EV_PERSIST, on_sweep, s);
    struct timeval sweep = {SWEEP_MS / 1000, (SWEEP_MS % 1000) * 1000};
    if (!s->stop_ev || !s->accept_timer || !s->join_timer ||
        !s->sweep_timer || event_add(s->stop_ev, NULL) < 0 ||
        event_add(s->sweep_timer, &sweep) < 0)
        return fccl_err(FCCL_ERR_NOMEM, "creating server events");
    if (!s->cfg.handle_signals)
        return FCCL_OK;
    s->sig_int = evsignal_new(s->base, SIGINT, on_signal, s);
    s->sig_term = evsignal_new(s->base, SIGTERM, on_signal, s);
    s->sig_hup = evsignal_new(s->base, SIGHUP, on_signal, s);
    if (!s->sig_int || !s->sig_term || !s->sig_hup ||
        evsignal_add(s->sig_int, NULL) < 0 ||
        evsignal_add(s->sig_term, NULL) < 0 ||
        evsignal_add(s->sig_hup, NULL) < 0)
        return fccl_err(FCCL_ERR_IO,
                        "installing SIGINT/SIGTERM/SIGHUP handlers");
    return FCCL_OK;
}

int fccl_server_create(const struct store_server_config *cfg,
                       struct store_server **out)
{
    if (!out)
        return fccl_err(FCCL_ERR_INVALID, "fccl_server_create: out is NULL");
    *out = NULL;
    int rc = fccl_server_opts_check(cfg);
    if (rc < 0)
        return rc;
    struct store_server *s = calloc(1, sizeof(*s));
    if (!s)
        return fccl_err(FCCL_ERR_NOMEM, "store server");
    s->stop_pipe[0] = s->stop_pipe[1] = -1;
    s->cfg = *cfg;
    s->life = &store_conn_life;
    s->started_ns = fccl_now_ns();
    s->big_value_min = STORE_BIG_VALUE;
    s->lend_min = STORE_LEND_MIN;
    if (cfg->log_level >= 0)
        fccl_log_set_level(cfg->log_level);
    CHECK_GOTO(store_join_init(s), rc, fail);
    CHECK_GOTO(store_resolve_paths(&s->cfg), rc, fail);
    limits_from_config(s);
    codec_buf_init(&s->out);
    s->base = event_base_new();
    if (!s->base) {
        rc = fccl_err(FCCL_ERR_NOMEM, "event_base_new");
        goto fail;
    }
    CHECK_GOTO(kv_init(&s->kv, cfg->max_total_bytes), rc, fail);
    CHECK_GOTO(waiters_init(&s->ws, &s->kv), rc, fail);
    CHECK_GOTO(store_jrn_open(s), rc, fail);
    CHECK_GOTO(store_slots_init(s), rc, fail);
    CHECK_GOTO(store_tls_setup(s), rc, fail);
    CHECK_GOTO(store_auth_setup(s), rc, fail);
    CHECK_GOTO(store_be_open(s), rc, fail);
    CHECK_GOTO(open_listeners(s), rc, fail);
    CHECK_GOTO(store_http_open(s), rc, fail);
    CHECK_GOTO(add_events(s), rc, fail);
    LOG_INFO("STORE", "listening on %s (%d socket%s)", s->address, s->nlis,
             s->nlis > 1 ? "s, IPv4 and IPv6" : "");
    store_warn_exposure(s);
    *out = s;
    return FCCL_OK;
fail:
    fccl_server_free(s);
    return rc;
}

int fccl_server_port(const struct store_server *s)
{
    return s ? s->port : -1;
}

const char *fccl_server_address(const struct store_server *s)
{
    return s ? s->address : "";
}

const char *fccl_server_http_address(const struct store_server *s)
{
    return s ? s->http_address : "";
}

static void arm_join_timer(struct store_server *s)
{
    const struct store_server_config *c = &s->cfg;
    if (s->join_armed || !c->wait_for_workers)
        return;
    s->join_armed = 1;
    LOG_INFO("STORE", "waiting for %d workers (timeout %.1f s)",
             c->world_size, (double)c->timeout_ms / 1000.0);
    if (c->timeout_ms <= 0 || s->joined >= c->world_size)
        return;
    struct timeval tv = {(time_t)(c->timeout_ms / 1000),
                         (suseconds_t)(c->timeout_ms % 1000) * 1000};
    evtimer_add(s->join_timer, &tv);
}

/* A SIGPIPE raised by a write in this thread while it was blocked must not
 * fire when the old mask comes back: take it off the pending set. */
static void drop_pending_sigpipe(void)
{
    sigset_t pend, pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    struct timespec zero = {0, 0};
    while (sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE))
        if (sigtimedwait(&pipe_only, NULL, &zero) < 0)
            break;
}

/* The loop ended: waiters for workers learn it at once. */
static void mark_ended(struct store_server *s, int ended)
{
    pthread_mutex_lock(&s->join_mu);
    atomic_store(&s->ended, ended);
    pthread_cond_broadcast(&s->join_cv);
    pthread_mutex_unlock(&s->join_mu);
}

int fccl_server_run(struct store_server *s)
{
    if (!s)
        return fccl_err(FCCL_ERR_INVALID, "fccl_server_run: server is NULL");
    int expected = 0;
    if (!atomic_compare_exchange_strong(&s->running, &expected, 1))
        return fccl_err(FCCL_ERR_STATE, "store server already running");
    mark_ended(s, 0);
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
    arm_join_timer(s);
    int rc = event_base_dispatch(s->base);
    if (!sigismember(&old, SIGPIPE))
        drop_pending_sigpipe();
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    atomic_store(&s->running, 0);
    mark_ended(s, 1);
    if (rc < 0)
        return fccl_err(FCCL_ERR_IO, "event loop failed");
    return FCCL_OK;
}

static void *server_thread(void *arg)
{
    fccl_server_run(arg);
    return NULL;
}

int fccl_server_start(struct store_server *s)
{
    if (!s)
        return fccl_err(FCCL_ERR_INVALID, "fccl_server_start: server is NULL");
    if (s->thread_started || atomic_load(&s->running))
        return fccl_err(FCCL_ERR_STATE, "store server already running");
    int e = pthread_create(&s->thread, NULL, server_thread, s);
    if (e)
        return fccl_err_sys(FCCL_ERR_IO, e, "store server thread");
    s->thread_started = 1;
    return FCCL_OK;
}

static void control(struct store_server *s, char what)
{
    if (!s || s->stop_pipe[1] < 0)
        return;
    /* A full pipe already holds requests the loop has yet to read: the
     * loop still sees one byte of each kind, so ignoring EAGAIN is right
     * unless the pipe is full of the other kind, which 64 KiB of control
     * bytes never are in practice. */
    ssize_t w = write(s->stop_pipe[1], &what, 1);
    (void)w;
}

void fccl_server_stop(struct store_server *s) { control(s, CTL_STOP); }

void fccl_server_reload(struct store_server *s) { control(s, CTL_RELOAD); }

static void free_event(struct event **ev)
{
    if (*ev)
        event_free(*ev);
    *ev = NULL;
}

void fccl_server_free(struct store_server *s)
{
    if (!s)
        return;
    if (s->thread_started) {
        fccl_server_stop(s);
        pthread_join(s->thread, NULL);
        s->thread_started = 0;
    }
    while (s->conns)
        store_conn_free(s->conns);
    store_http_close(s);
    free_event(&s->sweep_timer);
    free_event(&s->join_timer);
    free_event(&s->accept_timer);
    free_event(&s->sig_hup);
    free_event(&s->sig_term);
    free_event(&s->sig_int);
    free_event(&s->stop_ev);
    for (int i = 0; i < 2; i++)
        if (s->stop_pipe[i] >= 0)
            close(s->stop_pipe[i]);
    for (int i = 0; i < s->nlis; i++)
        evconnlistener_free(s->lis[i]);
    store_be_close(s);
    store_tls_teardown(s);
    store_auth_teardown(s);
    store_slots_free(s);
    store_jrn_close(s);
    waiters_free(&s->ws);
    kv_free(&s->kv);
    codec_buf_free(&s->out);
    if (s->base)
        event_base_free(s->base);
    if (s->join_sync) {
        pthread_cond_destroy(&s->join_cv);
        pthread_mutex_destroy(&s->join_mu);
    }
    free(s);
}
