/*
 * One HTTP request to one etcd member, for the blocking client (an easy
 * handle) and the front-end (the same handle on a multi): setting the
 * handle up from the store's options, collecting the reply, and telling
 * what a failure means for the call: whether the request can be sent to
 * the next member (it was surely not applied), may have been applied,
 * or failed for good.
 */
#ifndef FCCL_STORE_ETCD_HTTP_H
#define FCCL_STORE_ETCD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "etcd_addr.h"
#include "etcd_json.h"

#define ETCD_REPLY_MAX (512u << 20) /* bytes of one reply we accept */
/* Longest one attempt on one member may take before the next is tried
 * (etcd itself gives up on a proposal after about 5 s plus an election). */
#define ETCD_ATTEMPT_MS 8000
#define ETCD_TXN_OPS 128 /* etcd's default --max-txn-ops */

/* What the store's options say about reaching etcd (copied strings). */
struct etcd_conf {
    struct etcd_target t;
    char *tls_ca, *tls_cert, *tls_key, *tls_server_name;
    char *user, *password; /* NULL: no authentication */
    char name[320];        /* the address, for messages */
};

/* The bytes of a reply, growing; `stream` (if set) is called on each
 * piece instead and returns 0 to go on, 1 to stop the transfer. */
struct etcd_reply {
    char *p;
    size_t len, cap;
    int over;     /* passed ETCD_REPLY_MAX */
    int stopped;  /* the stream callback ended the transfer */
    int (*stream)(struct etcd_reply *r, void *arg);
    void *arg;
};

/* The request of one attempt, as the easy handle refers to it. */
struct etcd_http {
    CURL *easy;
    struct curl_slist *hdrs;
    struct curl_slist *cto; /* CURLOPT_CONNECT_TO (tls_server_name) */
    struct etcd_reply reply;
    char errbuf[CURL_ERROR_SIZE];
    char url[400];
    char *body; /* owned */
    size_t blen;
};

enum etcd_outcome {
    ETCD_DONE,      /* a JSON reply that is not an error: *out set */
    ETCD_NOT_SENT,  /* surely not applied: another member may take it */
    ETCD_UNCERTAIN, /* may have been applied; the member is unreliable */
    ETCD_REAUTH,    /* the token expired or was dropped: authenticate */
    ETCD_FAILED,    /* a definite error, code and message set */
};

int etcd_conf_init(struct etcd_conf *c, const char *addr, const char *ca,
                   const char *cert, const char *key, const char *sname,
                   const char *user, const char *password);
void etcd_conf_free(struct etcd_conf *c);

/* Load a password file (mode 0600 or stricter; one line) into *out
 * (malloc'd).  FCCL_OK, FCCL_ERR_AUTH, FCCL_ERR_IO. */
int etcd_read_password(const char *path, char **out);

/* Set h (whose easy handle is made here if NULL) up to POST body to
 * member m's path, with the token if any, the attempt's time limit
 * timeout_ms.  Takes body.  FCCL_OK or FCCL_ERR_NOMEM. */
int etcd_http_setup(struct etcd_http *h, const struct etcd_conf *c, int m,
                    const char *path, char *body, size_t blen,
                    const char *token, int64_t timeout_ms);
/* Drop what one attempt holds (the easy handle stays for the next). */
void etcd_http_reset(struct etcd_http *h);
void etcd_http_free(struct etcd_http *h);

/* Judge a finished attempt: curl's result cc.  On ETCD_DONE *out is the
 * parsed reply (the caller puts it); on ETCD_FAILED *code is the fccl
 * status; every outcome but DONE leaves a message (fccl_last_error) that
 * names the member. */
enum etcd_outcome etcd_http_judge(struct etcd_http *h,
                                  const struct etcd_conf *c, int m,
                                  CURLcode cc, json_object **out, int *code);

/* Judge an error object of a reply (also a watch stream's): as above. */
enum etcd_outcome etcd_judge_error(const struct etcd_conf *c, int m,
                                   int grpc, const char *msg, int *code);

/* The text of a request object (json-c's), copied: malloc'd. */
char *etcd_text(json_object *o, size_t *len);

#endif
