/*
 * The client's options: their defaults (fccl_store_opts_init) and
 * the variables that set them (fccl_store_opts_env, PREFIX_TLS_CA, ...).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fccl/store.h"

void fccl_store_opts_init(fccl_store_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->dialect = FCCL_DIALECT_MODERN;
}

static void env_field(const char **field, const char *prefix,
                      const char *name)
{
    char var[96];
    snprintf(var, sizeof(var), "%s_%s", prefix, name);
    const char *v = getenv(var);
    if (v && *v)
        *field = v;
}

void fccl_store_opts_env(fccl_store_opts_t *o, const char *prefix)
{
    if (!o || !prefix)
        return;
    env_field(&o->tls_ca, prefix, "TLS_CA");
    env_field(&o->tls_cert, prefix, "TLS_CERT");
    env_field(&o->tls_key, prefix, "TLS_KEY");
    env_field(&o->tls_server_name, prefix, "TLS_SERVER_NAME");
    env_field(&o->token_file, prefix, "TOKEN_FILE");
    const char *rc = NULL;
    env_field(&rc, prefix, "RECONNECT");
    if (rc)
        o->reconnect = atoi(rc) != 0;
    env_field(&o->etcd_user, prefix, "ETCD_USER");
    env_field(&o->etcd_password_file, prefix, "ETCD_PASSWORD_FILE");
    const char *ttl = NULL, *lease = NULL;
    env_field(&ttl, prefix, "LEASE_TTL");
    if (ttl)
        o->lease_ttl_s = strtoll(ttl, NULL, 10);
    env_field(&lease, prefix, "LEASE");
    if (lease)
        o->lease_id = strtoll(lease, NULL, 10);
}
