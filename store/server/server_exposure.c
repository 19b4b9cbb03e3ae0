/*
 * Protective default: a store that anyone on the network can reach and
 * write to in plain text should not start silently.  One warning at start
 * when the server listens on something other than loopback, still
 * accepts plaintext connections (no --tls-required) and does not require a
 * token (--auth-required); every hosted store (fccl-run's, rank 0's) is
 * made by fccl_server_create and warns the same way.  Another when the
 * status port is public and nothing guards it.
 */
#include <arpa/inet.h>
#include <string.h>

#include "log.h"
#include "server_int.h"

int store_is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (!strcmp(host, "localhost"))
        return 1;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return 0;
}

void store_warn_exposure(const struct store_server *s)
{
    const char *host = s->cfg.host;
    if (s->cfg.http_public && !s->auth)
        LOG_WARN("STORE", "the status port %s is public and the store has no "
                 "token: anyone who can reach it sees every client address "
                 "and key prefix (give --token-file to require a bearer "
                 "token)", s->cfg.http);
    if ((host[0] && store_is_loopback(host)) || s->cfg.tls_required ||
        (s->auth && s->cfg.auth_required))
        return;
    LOG_WARN("STORE", "listening on %s, reachable from other hosts, with "
             "plaintext accepted and no token required: anyone who can "
             "connect can read and change every key (use --tls-cert/"
             "--tls-key/--tls-required, --token-file with --auth-required, "
             "or --host 127.0.0.1)",
             host[0] ? host : "every interface");
}
