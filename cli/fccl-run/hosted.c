/*
 * fccl-run: the store the ranks meet at: the one given, or one served
 * in-process (with the TLS, token and journal a tcpstore-server would
 * take); etcd's lease.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static int any_client_tls(void)
{
    static const char *const vars[] = {"FCCL_STORE_TLS_CA",
                                       "FCCL_STORE_TLS_CERT",
                                       "FCCL_STORE_TLS_KEY",
                                       "FCCL_STORE_TLS_SERVER_NAME"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

/* FCCL_STORE_SERVER_* and FCCL_STORE_TOKEN_FILE first, the --store-*
 * options over them. */
static int hosted_opts(const struct launcher *L, fccl_server_opts_t *o)
{
    const struct {
        const char *opt, *val, *name;
    } v[] = {
        {"--store-tls-cert", L->st_cert, "tls-cert"},
        {"--store-tls-key", L->st_key, "tls-key"},
        {"--store-tls-ca", L->st_ca, "tls-ca"},
        {"--store-token-file", L->st_token, "token-file"},
        {"--store-journal", L->st_journal, "journal"},
    };
    if (fccl_server_opts_env(o, "FCCL_STORE") < 0) {
        fprintf(stderr, "fccl-run: %s\n", fccl_last_error());
        return -1;
    }
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (v[i].val && fccl_server_opts_set(o, v[i].name, v[i].val) < 0) {
            fprintf(stderr, "fccl-run: %s: %s\n", v[i].opt,
                    fccl_last_error());
            return -1;
        }
    o->tls_required |= L->st_cert != NULL;
    o->auth_required |= L->st_token != NULL;
    if (fccl_server_opts_check(o) < 0) {
        fprintf(stderr, "fccl-run: the store it hosts: %s\n",
                fccl_last_error());
        return -1;
    }
    return 0;
}

/* The ranks (and this launcher's own connection, which reads the same
 * variables) prove the store's token and, when it serves TLS, verify it:
 * against FCCL_STORE_TLS_CA if set, else against its own certificate
 * (right for a self-signed one, or a chain file that ends in its root). */
static int point_clients(const fccl_server_opts_t *o)
{
    if (o->token_file[0])
        setenv("FCCL_STORE_TOKEN_FILE", o->token_file, 1);
    if (!o->tls_cert[0]) {
        if (!any_client_tls())
            return 0;
        fprintf(stderr, "fccl-run: FCCL_STORE_TLS_* is set, so the ranks "
                "reach the store over TLS, but the store fccl-run hosts has "
                "no certificate: give --store-tls-cert and --store-tls-key "
                "(or FCCL_STORE_SERVER_TLS_CERT and _KEY), or unset "
                "FCCL_STORE_TLS_*\n");
        return -1;
    }
    setenv("FCCL_STORE_TLS_CA", o->tls_cert, 0);
    const char *cc = getenv("FCCL_STORE_TLS_CERT");
    const char *ck = getenv("FCCL_STORE_TLS_KEY");
    if (o->tls_ca[0] && (!cc || !*cc || !ck || !*ck)) {
        fprintf(stderr, "fccl-run: the store it hosts demands client "
                "certificates signed by %s: set FCCL_STORE_TLS_CERT and "
                "FCCL_STORE_TLS_KEY for the ranks\n", o->tls_ca);
        return -1;
    }
    return 0;
}

/* The store: the one given, served here (--host-store) or a local one. */
int fr_start_store(struct launcher *L, char *host, size_t hostlen,
                       int *port)
{
    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    if (etcd_is_addr(L->store_addr)) {
        if (L->host_store) {
            fprintf(stderr, "fccl-run: --host-store serves a TCPStore, not "
                    "etcd (%s)\n", L->store_addr);
            return -1;
        }
        snprintf(host, hostlen, "%s", L->store_addr);
        *port = 0;
        return 0;
    }
    if (L->store_addr) {
        /* "H:P,H:P": front-ends of one store; MASTER_ADDR names the first */
        char first[FCCL_HOST_MAX + 16];
        snprintf(first, sizeof(first), "%.*s",
                 (int)strcspn(L->store_addr, ","), L->store_addr);
        if (strchr(L->store_addr, ',') && L->host_store) {
            fprintf(stderr, "fccl-run: --host-store serves one address, "
                    "not the list %s\n", L->store_addr);
            return -1;
        }
        if (fccl_addr_parse(first, host, hostlen, port) < 0) {
            fprintf(stderr, "fccl-run: --store: %s\n", fccl_last_error());
            return -1;
        }
        if (!L->host_store)
            return 0;
        snprintf(o.host, sizeof(o.host), "%.*s", (int)sizeof(o.host) - 1, host);
        o.port = *port;
    } else {
        snprintf(o.host, sizeof(o.host), "127.0.0.1");
        o.port = 0;
    }
    if (hosted_opts(L, &o) < 0 || point_clients(&o) < 0)
        return -1;
    int rc = fccl_server_create(&o, &L->server);
    if (rc >= 0)
        rc = fccl_server_start(L->server);
    if (rc < 0) {
        fprintf(stderr, "fccl-run: cannot start the store on %s:%d: %s\n",
                o.host, o.port, fccl_last_error());
        fccl_server_free(L->server);
        L->server = NULL;
        return rc;
    }
    if (!L->store_addr) {
        snprintf(host, hostlen, "127.0.0.1");
        *port = fccl_server_port(L->server);
    }
    return 0;
}

/* etcd: grant this node's lease (FCCL_STORE_LEASE_TTL, default 60 s),
 * keep it alive while we run and hand it to the ranks (FCCL_STORE_LEASE):
 * if this launcher dies, its job's keys go away after the TTL; at the end
 * closing the handle revokes the lease. */
int fr_open_lease(struct launcher *L)
{
    if (!etcd_is_addr(L->store_addr))
        return 0;
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = L->store_addr;
    fccl_store_opts_env(&o, "FCCL_STORE");
    o.lease_id = 0;
    if (o.lease_ttl_s <= 0)
        o.lease_ttl_s = 60;
    o.lease_revoke = 1;
    if (fccl_store_connect(&o, &L->lease) < 0) {
        fprintf(stderr, "fccl-run: cannot open a lease on %s: %s\n",
                L->store_addr, fccl_last_error());
        return -1;
    }
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)fccl_store_lease_id(L->lease));
    setenv("FCCL_STORE_LEASE", id, 1);
    return 0;
}
