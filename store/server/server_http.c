/*
 * The status port (--http HOST:PORT, off by default): libevent's HTTP
 * server on the store's own event loop, so it needs no thread and sees
 * the server's state between two loop turns.
 *
 *   /healthz      open to anyone: 200 "ok", or 503 while the journal
 *                 refuses writes
 *   /metrics      Prometheus text (server_metrics.c)
 *   /status.json  the status page's data
 *   /             the status page (server_page.c): self-contained HTML
 *                 that fetches /status.json every second
 *
 * When the store has tokens, everything but /healthz needs one of them:
 * "Authorization: Bearer TOKEN", or HTTP Basic with the token as password
 * (what a browser sends after asking, and repeats for the page's own
 * requests).  The read-only token is enough.  Only GET and HEAD are
 * served; headers are capped, request bodies refused, slow clients timed
 * out.  It listens on loopback unless http-public.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "err.h"
#include "log.h"
#include "net.h"
#include "server_int.h"

#define HTTP_TIMEOUT_S 10
#define HTTP_MAX_HEADERS 8192
#define HTTP_MAX_BODY 0

struct store_http {
    struct evhttp *h;
};

/* ---- authorization ---- */

/* The token of an "Authorization" header value into out: Bearer's as it
 * is, Basic's password.  Its length, or -1. */
static int header_token(const char *v, unsigned char *out, size_t cap)
{
    if (!strncasecmp(v, "Bearer ", 7)) {
        size_t n = strlen(v + 7);
        if (n >= cap)
            return -1;
        memcpy(out, v + 7, n);
        return (int)n;
    }
    if (strncasecmp(v, "Basic ", 6))
        return -1;
    const char *b64 = v + 6;
    size_t n = strlen(b64);
    if (n == 0 || n % 4 || n / 4 * 3 >= cap)
        return -1;
    int len = EVP_DecodeBlock(out, (const unsigned char *)b64, (int)n);
    if (len < 0)
        return -1;
    len -= (b64[n - 1] == '=') + (n > 1 && b64[n - 2] == '=');
    unsigned char *colon = memchr(out, ':', (size_t)len);
    if (!colon)
        return -1;
    size_t pw = (size_t)len - (size_t)(colon + 1 - out);
    memmove(out, colon + 1, pw);
    return (int)pw;
}

static int authorized(struct store_server *s, struct evhttp_request *req)
{
    if (!s->auth)
        return 1;
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req),
                                       "Authorization");
    unsigned char tok[HTTP_MAX_HEADERS];
    int n = v ? header_token(v, tok, sizeof(tok)) : -1;
    int ok = n > 0 && store_auth_token_match(s, tok, (size_t)n) > 0;
    OPENSSL_cleanse(tok, sizeof(tok));
    return ok;
}

/* ---- replies ---- */

static void common_headers(struct evhttp_request *req, const char *type)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Cache-Control", "no-store");
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
}

static void reply_text(struct evhttp_request *req, int code,
                       const char *reason, const char *text)
{
    struct evbuffer *b = evbuffer_new();
    if (!b) {
        evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
        return;
    }
    evbuffer_add(b, text, strlen(text));
    common_headers(req, "text/plain; charset=utf-8");
    evhttp_send_reply(req, code, reason, b);
    evbuffer_free(b);
}

static void reply_buf(struct evhttp_request *req, const char *type,
                      const struct codec_buf *cb)
{
    if (cb->oom) {
        evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
        return;
    }
    struct evbuffer *b = evbuffer_new();
    if (!b || evbuffer_add(b, cb->p, cb->len) < 0) {
        if (b)
            evbuffer_free(b);
        evhttp_send_error(req, HTTP_INTERNAL, "out of memory");
        return;
    }
    common_headers(req, type);
    evhttp_send_reply(req, HTTP_OK, "OK", b);
    evbuffer_free(b);
}

static void refuse(struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    evhttp_add_header(h, "WWW-Authenticate",
                      "Basic realm=\"fccl store\", charset=\"UTF-8\"");
    evhttp_add_header(h, "WWW-Authenticate", "Bearer realm=\"fccl store\"");
    reply_text(req, 401, "Unauthorized",
               "this store has tokens: send 'Authorization: Bearer TOKEN' "
               "(the read-only token is enough)\n");
}

/* ---- the pages ---- */

static void healthz(struct store_server *s, struct evhttp_request *req)
{
    if (s->has_journal && s->jrn.failed)
        reply_text(req, 503, "Service Unavailable",
                   "journal failed: writes refused\n");
    else
        reply_text(req, HTTP_OK, "OK", "ok\n");
}

static void page(struct store_server *s, struct evhttp_request *req,
                 void (*make)(struct store_server *, struct codec_buf *),
                 const char *type)
{
    struct codec_buf b;
    codec_buf_init(&b);
    make(s, &b);
    reply_buf(req, type, &b);
    codec_buf_free(&b);
}

static void status_page(struct store_server *s, struct codec_buf *b)
{
    (void)s;
    codec_put_bytes(b, store_status_page, strlen(store_status_page));
}

static void on_request(struct evhttp_request *req, void *arg)
{
    struct store_server *s = arg;
    uint64_t t0 = store_turn_begin();
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = u ? evhttp_uri_get_path(u) : NULL;
    if (!path || !*path)
        path = "/";
    if (!strcmp(path, "/healthz"))
        healthz(s, req);
    else if (strcmp(path, "/metrics") && strcmp(path, "/status.json") &&
             strcmp(path, "/"))
        reply_text(req, HTTP_NOTFOUND, "Not Found",
                   "not found: try /, /metrics, /status.json, /healthz\n");
    else if (!authorized(s, req))
        refuse(req);
    else if (!strcmp(path, "/metrics"))
        page(s, req, store_metrics_text, "text/plain; version=0.0.4; "
             "charset=utf-8");
    else if (!strcmp(path, "/status.json"))
        page(s, req, store_status_json, "application/json");
    else {
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "Content-Security-Policy",
                          "default-src 'none'; script-src 'unsafe-inline'; "
                          "style-src 'unsafe-inline'; connect-src 'self'");
        page(s, req, status_page, "text/html; charset=utf-8");
    }
    store_turn_end(s, t0);
}

/* ---- setup ---- */

int store_http_open(struct store_server *s)
{
    char host[FCCL_HOST_MAX];
    int port, fds[2], n = 0, bound = 0;
    if (!s->cfg.http[0])
        return FCCL_OK;
    if (fccl_addr_parse(s->cfg.http, host, sizeof(host), &port) < 0)
        return fccl_err(FCCL_ERR_INVALID, "http '%s'", s->cfg.http);
    const char *bind_host = strcmp(host, "*") ? host : "";
    int rc = store_listen_open(bind_host, port, fds, &n, &bound);
    if (rc < 0)
        return fccl_err_wrap(rc, "status port %s", s->cfg.http);
    struct store_http *h = calloc(1, sizeof(*h));
    if (h)
        h->h = evhttp_new(s->base);
    if (!h || !h->h) {
        free(h);
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return fccl_err(FCCL_ERR_NOMEM, "status port: evhttp_new");
    }
    s->http = h; /* from here store_http_close undoes everything */
    evhttp_set_allowed_methods(h->h, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
    evhttp_set_timeout(h->h, HTTP_TIMEOUT_S);
    evhttp_set_max_headers_size(h->h, HTTP_MAX_HEADERS);
    evhttp_set_max_body_size(h->h, HTTP_MAX_BODY);
    evhttp_set_gencb(h->h, on_request, s);
    for (int i = 0; i < n; i++)
        if (!evhttp_accept_socket_with_handle(h->h, fds[i])) {
            for (int j = i; j < n; j++)
                close(fds[j]);
            return fccl_err(FCCL_ERR_NOMEM, "status port: listener");
        }
    fccl_addr_format(s->http_address, sizeof(s->http_address),
                     bind_host[0] ? bind_host : "0.0.0.0", bound);
    LOG_INFO("STORE", "status page on http://%s/ (/metrics, /status.json, "
             "/healthz)%s", s->http_address,
             s->auth ? "; a token is needed but for /healthz" : "");
    return FCCL_OK;
}

void store_http_close(struct store_server *s)
{
    if (s->http) {
        evhttp_free(s->http->h); /* closes its sockets and connections */
        free(s->http);
        s->http = NULL;
    }
    store_metrics_free(s);
}
