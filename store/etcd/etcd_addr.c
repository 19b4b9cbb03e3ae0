/*
 * Parsing etcd:// and etcds:// store addresses (etcd_addr.h).
 */
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "etcd_addr.h"
#include "net.h"

int etcd_is_addr(const char *addr)
{
    return addr && (strncmp(addr, "etcd://", 7) == 0 ||
                    strncmp(addr, "etcds://", 8) == 0);
}

static int add_member(struct etcd_target *t, const char *addr,
                      const char *p, size_t n)
{
    char one[300];
    if (n == 0 || n >= sizeof(one))
        return fccl_err(FCCL_ERR_INVALID, "etcd address '%s': %s member",
                        addr, n ? "too long a" : "an empty");
    if (t->n >= ETCD_EP_MAX)
        return fccl_err(FCCL_ERR_INVALID, "etcd address '%s': more than %d "
                        "members", addr, ETCD_EP_MAX);
    memcpy(one, p, n);
    one[n] = '\0';
    struct etcd_ep *e = &t->ep[t->n];
    int rc = fccl_addr_parse(one, e->host, sizeof(e->host), &e->port);
    if (rc < 0)
        return fccl_err_wrap(rc, "etcd address '%s'", addr);
    if (!e->host[0] || e->port <= 0)
        return fccl_err(FCCL_ERR_INVALID, "etcd address '%s': member '%s' "
                        "needs a host and a port", addr, one);
    char host[sizeof(e->host)];
    memcpy(host, e->host, sizeof(host));
    int v6 = strchr(host, ':') != NULL;
    snprintf(e->base, sizeof(e->base), "%s://%s%s%s:%d",
             t->tls ? "https" : "http", v6 ? "[" : "", host, v6 ? "]" : "",
             e->port);
    t->n++;
    return FCCL_OK;
}

int etcd_addr_parse(const char *addr, struct etcd_target *t)
{
    memset(t, 0, sizeof(*t));
    if (!etcd_is_addr(addr))
        return fccl_err(FCCL_ERR_INVALID, "'%s' is not an etcd:// or "
                        "etcds:// address", addr ? addr : "(null)");
    t->tls = addr[4] == 's';
    const char *p = addr + (t->tls ? 8 : 7);
    const char *slash = strchr(p, '/');
    const char *end = slash ? slash : p + strlen(p);
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *stop = comma ? comma : end;
        int rc = add_member(t, addr, p, (size_t)(stop - p));
        if (rc < 0)
            return rc;
        p = comma ? comma + 1 : end;
    }
    if (t->n == 0)
        return fccl_err(FCCL_ERR_INVALID, "etcd address '%s': no "
                        "HOST:PORT member", addr);
    if (end[-1] == ',')
        return fccl_err(FCCL_ERR_INVALID, "etcd address '%s': an empty "
                        "member after ','", addr);
    if (slash) {
        size_t n = strlen(slash);
        while (n > 0 && slash[n - 1] == '/')
            n--;
        if (n >= sizeof(t->prefix))
            return fccl_err(FCCL_ERR_INVALID, "etcd address '%s': prefix "
                            "over %d bytes", addr, ETCD_PREFIX_MAX - 1);
        memcpy(t->prefix, slash, n);
        t->prefix[n] = '\0';
        t->prefixlen = n;
    }
    return FCCL_OK;
}
