/*
 * One HTTP attempt to one etcd member (etcd_http.h): the easy handle's
 * setup from the store's options, the reply buffer, and the judgement of
 * what a failure means for the call.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "etcd_http.h"
#include "private_file.h"

#define PASSWORD_MAX 4096

static char *dup_or_null(const char *s)
{
    return s && *s ? strdup(s) : NULL;
}

int etcd_conf_init(struct etcd_conf *c, const char *addr, const char *ca,
                   const char *cert, const char *key, const char *sname,
                   const char *user, const char *password)
{
    memset(c, 0, sizeof(*c));
    int rc = etcd_addr_parse(addr, &c->t);
    if (rc < 0)
        return rc;
    snprintf(c->name, sizeof(c->name), "%s", addr);
    if (key && *key && (rc = store_check_private_file(key, "TLS key")) < 0)
        return fccl_err_wrap(rc, "store %s", c->name);
    c->tls_ca = dup_or_null(ca);
    c->tls_cert = dup_or_null(cert);
    c->tls_key = dup_or_null(key);
    c->tls_server_name = dup_or_null(sname);
    c->user = dup_or_null(user);
    c->password = password ? strdup(password) : NULL;
    if ((ca && *ca && !c->tls_ca) || (cert && *cert && !c->tls_cert) ||
        (key && *key && !c->tls_key) || (sname && *sname && !c->tls_server_name) ||
        (user && *user && !c->user) || (password && !c->password)) {
        etcd_conf_free(c);
        return fccl_err(FCCL_ERR_NOMEM, "store %s: out of memory", addr);
    }
    if (c->user && !c->password) {
        etcd_conf_free(c);
        return fccl_err(FCCL_ERR_INVALID, "store %s: etcd user '%s' given "
                        "without a password file", addr, user);
    }
    return FCCL_OK;
}

void etcd_conf_free(struct etcd_conf *c)
{
    free(c->tls_ca);
    free(c->tls_cert);
    free(c->tls_key);
    free(c->tls_server_name);
    free(c->user);
    if (c->password) {
        memset(c->password, 0, strlen(c->password));
        free(c->password);
    }
    memset(c, 0, sizeof(*c));
}

int etcd_read_password(const char *path, char **out)
{
    int rc = store_check_private_file(path, "etcd password file");
    if (rc < 0)
        return rc;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "etcd password file %s",
                            path);
    char *buf = malloc(PASSWORD_MAX + 1);
    if (!buf) {
        close(fd);
        return fccl_err(FCCL_ERR_NOMEM, "out of memory");
    }
    ssize_t n = read(fd, buf, PASSWORD_MAX + 1);
    int err = errno;
    close(fd);
    if (n < 0 || n > PASSWORD_MAX) {
        free(buf);
        return n < 0 ? fccl_err_sys(FCCL_ERR_IO, err, "etcd password file "
                                    "%s", path)
                     : fccl_err(FCCL_ERR_INVALID, "etcd password file %s: "
                                "over %d bytes", path, PASSWORD_MAX);
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    buf[n] = '\0';
    if (memchr(buf, '\n', (size_t)n)) {
        free(buf);
        return fccl_err(FCCL_ERR_AUTH, "etcd password file %s: more than "
                        "one line", path);
    }
    *out = buf;
    return FCCL_OK;
}

/* ---- one attempt ---- */

static size_t on_data(char *p, size_t sz, size_t nm, void *arg)
{
    struct etcd_reply *r = arg;
    size_t n = sz * nm;
    if (r->len + n > ETCD_REPLY_MAX) {
        r->over = 1;
        return 0;
    }
    if (r->len + n + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n + 1)
            cap *= 2;
        char *q = realloc(r->p, cap);
        if (!q)
            return 0;
        r->p = q;
        r->cap = cap;
    }
    memcpy(r->p + r->len, p, n);
    r->len += n;
    r->p[r->len] = '\0';
    if (r->stream && r->stream(r, r->arg)) {
        r->stopped = 1;
        return 0;
    }
    return n;
}

char *etcd_text(json_object *o, size_t *len)
{
    size_t n = 0;
    const char *s = json_object_to_json_string_length(
        o, JSON_C_TO_STRING_PLAIN, &n);
    char *t = s ? malloc(n + 1) : NULL;
    if (t) {
        memcpy(t, s, n + 1);
        *len = n;
    }
    return t;
}

static int set_tls(CURL *e, const struct etcd_conf *c, const char *connect_to,
                   struct curl_slist **cto)
{
    CURLcode r = CURLE_OK;
    if (c->tls_ca) {
        r |= curl_easy_setopt(e, CURLOPT_CAINFO, c->tls_ca);
        r |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
        r |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
    } else {
        /* As the TCPStore client without a CA: encrypted, unverified. */
        r |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
        r |= curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    if (c->tls_cert) {
        r |= curl_easy_setopt(e, CURLOPT_SSLCERT, c->tls_cert);
        r |= curl_easy_setopt(e, CURLOPT_SSLKEY,
                              c->tls_key ? c->tls_key : c->tls_cert);
    }
    if (connect_to) {
        *cto = curl_slist_append(NULL, connect_to);
        if (!*cto)
            return FCCL_ERR_NOMEM;
        r |= curl_easy_setopt(e, CURLOPT_CONNECT_TO, *cto);
    }
    return r == CURLE_OK ? FCCL_OK : FCCL_ERR_NOMEM;
}

int etcd_http_setup(struct etcd_http *h, const struct etcd_conf *c, int m,
                    const char *path, char *body, size_t blen,
                    const char *token, int64_t timeout_ms)
{
    const struct etcd_ep *ep = &c->t.ep[m];
    etcd_http_reset(h);
    h->body = body;
    h->blen = blen;
    if (!h->easy && !(h->easy = curl_easy_init()))
        return fccl_err(FCCL_ERR_NOMEM, "store %s: curl_easy_init failed",
                        c->name);
    CURL *e = h->easy;
    curl_easy_reset(e);
    char connect_to[600] = "";
    if (c->t.tls && c->tls_server_name) {
        /* The certificate must carry tls_server_name: ask for that name,
         * and connect to the member's address. */
        snprintf(h->url, sizeof(h->url), "https://%s:%d%s",
                 c->tls_server_name, ep->port, path);
        snprintf(connect_to, sizeof(connect_to), "%s:%d:%s:%d",
                 c->tls_server_name, ep->port, ep->host, ep->port);
    } else {
        snprintf(h->url, sizeof(h->url), "%s%s", ep->base, path);
    }
    char auth[4200];
    h->hdrs = curl_slist_append(NULL, "Content-Type: application/json");
    if (h->hdrs && token) {
        snprintf(auth, sizeof(auth), "Authorization: %s", token);
        struct curl_slist *n = curl_slist_append(h->hdrs, auth);
        if (n)
            h->hdrs = n;
    }
    h->errbuf[0] = '\0';
    CURLcode r = CURLE_OK;
    r |= curl_easy_setopt(e, CURLOPT_URL, h->url);
    r |= curl_easy_setopt(e, CURLOPT_POST, 1L);
    r |= curl_easy_setopt(e, CURLOPT_POSTFIELDS, h->body);
    r |= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)blen);
    r |= curl_easy_setopt(e, CURLOPT_HTTPHEADER, h->hdrs);
    r |= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_data);
    r |= curl_easy_setopt(e, CURLOPT_WRITEDATA, &h->reply);
    r |= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, h->errbuf);
    r |= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    r |= curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    r |= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                          (long)(timeout_ms > 0 ? timeout_ms : 1));
    r |= curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS,
                          (long)(timeout_ms > 0 && timeout_ms < 3000
                                     ? timeout_ms : 3000));
    /* No "Expect: 100-continue" wait on large bodies. */
    struct curl_slist *x = curl_slist_append(h->hdrs, "Expect:");
    if (x)
        h->hdrs = x;
    if (!h->hdrs || r != CURLE_OK)
        return fccl_err(FCCL_ERR_NOMEM, "store %s: setting up a request",
                        c->name);
    if (c->t.tls) {
        if (set_tls(e, c, connect_to[0] ? connect_to : NULL, &h->cto) < 0)
            return fccl_err(FCCL_ERR_NOMEM, "store %s: setting up TLS",
                            c->name);
    }
    return FCCL_OK;
}

void etcd_http_reset(struct etcd_http *h)
{
    curl_slist_free_all(h->hdrs);
    h->hdrs = NULL;
    curl_slist_free_all(h->cto);
    h->cto = NULL;
    free(h->body);
    h->body = NULL;
    free(h->reply.p);
    int (*stream)(struct etcd_reply *, void *) = h->reply.stream;
    void *arg = h->reply.arg;
    memset(&h->reply, 0, sizeof(h->reply));
    h->reply.stream = stream;
    h->reply.arg = arg;
}

void etcd_http_free(struct etcd_http *h)
{
    etcd_http_reset(h);
    if (h->easy)
        curl_easy_cleanup(h->easy);
    h->easy = NULL;
}

/* ---- judgement ---- */

static int has(const char *msg, const char *what)
{
    return strstr(msg, what) != NULL;
}

enum etcd_outcome etcd_judge_error(const struct etcd_conf *c, int m,
                                   int grpc, const char *msg, int *code)
{
    const char *who = c->t.ep[m].base;
    if (has(msg, "invalid auth token") || has(msg, "auth token"))
        return fccl_err(FCCL_ERR_AUTH, "etcd member %s: %s", who, msg),
               ETCD_REAUTH;
    if (has(msg, "request is too large") || has(msg, "larger than max")) {
        *code = FCCL_ERR_LIMIT;
        fccl_err(FCCL_ERR_LIMIT, "etcd member %s refused the request: %s "
                 "(over the cluster's request-size limit, "
                 "--max-request-bytes, 1.5 MiB by default)", who, msg);
        return ETCD_FAILED;
    }
    if (has(msg, "too many operations in txn request")) {
        *code = FCCL_ERR_LIMIT;
        fccl_err(FCCL_ERR_LIMIT, "etcd member %s: %s (the cluster's "
                 "--max-txn-ops, 128 by default)", who, msg);
        return ETCD_FAILED;
    }
    if (grpc == 16 || grpc == 7 || has(msg, "permission denied") ||
        has(msg, "authentication failed") || has(msg, "user name is empty")) {
        *code = FCCL_ERR_AUTH;
        fccl_err(FCCL_ERR_AUTH, "etcd member %s: %s", who, msg);
        return ETCD_FAILED;
    }
    /* Refused before a proposal: safe anywhere else. */
    if (has(msg, "no leader") || has(msg, "too many requests") ||
        has(msg, "not capable") || has(msg, "stopped") ||
        has(msg, "not started") || has(msg, "connection refused") ||
        has(msg, "Unavailable") || has(msg, "transport is closing")) {
        fccl_err(FCCL_ERR_CONNECT, "etcd member %s: %s", who, msg);
        return ETCD_NOT_SENT;
    }
    if (grpc == 4 || grpc == 14 || has(msg, "timed out") ||
        has(msg, "leader changed") || has(msg, "connection lost")) {
        fccl_err(FCCL_ERR_IO, "etcd member %s: %s", who, msg);
        return ETCD_UNCERTAIN;
    }
    *code = grpc == 5 ? FCCL_ERR_NOTFOUND
            : grpc == 3 ? FCCL_ERR_INVALID
                        : FCCL_ERR_PROTOCOL;
    fccl_err(*code, "etcd member %s: %s (code %d)", who, msg, grpc);
    return ETCD_FAILED;
}

static enum etcd_outcome curl_failed(struct etcd_http *h,
                                     const struct etcd_conf *c, int m,
                                     CURLcode cc, int *code)
{
    const char *who = c->t.ep[m].base;
    const char *why = h->errbuf[0] ? h->errbuf : curl_easy_strerror(cc);
    double pre = 0;
    curl_easy_getinfo(h->easy, CURLINFO_PRETRANSFER_TIME, &pre);
    switch (cc) {
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CIPHER:
    case CURLE_USE_SSL_FAILED:
        *code = FCCL_ERR_AUTH;
        fccl_err(FCCL_ERR_AUTH, "etcd member %s: TLS: %s%s", who, why,
                 cc == CURLE_PEER_FAILED_VERIFICATION
                     ? " (its certificate is not trusted by the CA file, "
                       "or is for another name)"
                     : "");
        return ETCD_FAILED;
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
        fccl_err(FCCL_ERR_CONNECT, "etcd member %s: %s", who, why);
        return ETCD_NOT_SENT;
    default:
        break;
    }
    /* A handshake the member cut short with an alert: it refused our
     * certificate (or we sent none). */
    if ((cc == CURLE_RECV_ERROR || cc == CURLE_SEND_ERROR) && c->t.tls &&
        strstr(why, "alert")) {
        *code = FCCL_ERR_AUTH;
        fccl_err(FCCL_ERR_AUTH, "etcd member %s: TLS: %s (the member "
                 "refused the client certificate, or none was given: "
                 "TLS_CERT/TLS_KEY)", who, why);
        return ETCD_FAILED;
    }
    if (h->reply.over) {
        *code = FCCL_ERR_LIMIT;
        fccl_err(FCCL_ERR_LIMIT, "etcd member %s: reply over %u bytes", who,
                 ETCD_REPLY_MAX);
        return ETCD_FAILED;
    }
    if (cc == CURLE_WRITE_ERROR && !h->reply.stopped) {
        *code = FCCL_ERR_NOMEM;
        fccl_err(FCCL_ERR_NOMEM, "etcd member %s: out of memory for a "
                 "reply", who);
        return ETCD_FAILED;
    }
    /* Nothing went out before the connection was made: not sent. */
    fccl_err(cc == CURLE_OPERATION_TIMEDOUT ? FCCL_ERR_TIMEOUT : FCCL_ERR_IO,
             "etcd member %s: %s", who, why);
    return pre <= 0 ? ETCD_NOT_SENT : ETCD_UNCERTAIN;
}

enum etcd_outcome etcd_http_judge(struct etcd_http *h,
                                  const struct etcd_conf *c, int m,
                                  CURLcode cc, json_object **out, int *code)
{
    const char *who = c->t.ep[m].base;
    *out = NULL;
    *code = 0;
    if (cc != CURLE_OK)
        return curl_failed(h, c, m, cc, code);
    long http = 0;
    curl_easy_getinfo(h->easy, CURLINFO_RESPONSE_CODE, &http);
    json_object *o = NULL;
    int prc = h->reply.len ? ej_parse(h->reply.p, h->reply.len, &o)
                           : FCCL_ERR_PROTOCOL;
    int grpc = 0;
    const char *msg = NULL;
    if (prc == FCCL_OK && ej_error(o, &grpc, &msg)) {
        enum etcd_outcome r = etcd_judge_error(c, m, grpc, msg, code);
        json_object_put(o);
        return r;
    }
    if (prc == FCCL_OK && http == 200) {
        *out = o;
        return ETCD_DONE;
    }
    json_object_put(o);
    if (http >= 500) {
        fccl_err(FCCL_ERR_IO, "etcd member %s: HTTP %ld", who, http);
        return ETCD_UNCERTAIN;
    }
    *code = FCCL_ERR_PROTOCOL;
    fccl_err(FCCL_ERR_PROTOCOL, "etcd member %s: HTTP %ld, not an etcd v3 "
             "JSON reply ('%.60s')", who, http,
             h->reply.p ? h->reply.p : "");
    return ETCD_FAILED;
}
