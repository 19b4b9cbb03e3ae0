/*
 * Protective default: a store that anyone on the network can reach and
 * write to in plain text should not start silently.  One warning at start
 * when the server listens on something other than loopback, still
 * accepts plaintext connections (no --tls-required) and does not require a
 * token (--auth-required).
 */
#include <arpa/inet.h>
#include <string.h>

#include "log.h"
#include "server_int.h"

/* 1 for an address that only this host can reach. */
static int is_loopback(const char *host)
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
    if ((host[0] && is_loopback(host)) || s->cfg.tls_required ||
        (s->auth && s->cfg.auth_required))
        return;
    LOG_WARN("STORE", "listening on %s, reachable from other hosts, with "
             "plaintext accepted and no token required: anyone who can "
             "connect can read and change every key (use --tls-cert/"
             "--tls-key/--tls-required, --token-file with --auth-required, "
             "or --host 127.0.0.1)",
             host[0] ? host : "every interface");
}
