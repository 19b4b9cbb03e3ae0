/*
 * Where a server's files come from besides its options.
 *
 * Hosted stores (fccl-run's own, --host-store, rank 0's under srun or
 * mpirun) have no command line of their own: fccl_server_opts_env() takes
 * their TLS files, journal and token from the environment, so that they
 * are as secure and durable as a tcpstore-server with the same settings.
 * The token is the one the job's clients prove (FCCL_STORE_TOKEN_FILE), so
 * one variable serves both ends.
 *
 * Under systemd, secrets arrive through LoadCredential= in
 * $CREDENTIALS_DIRECTORY and state belongs in StateDirectory=
 * ($STATE_DIRECTORY): a relative credential path or journal is looked up
 * there when the variable is set (store_resolve_paths, at create).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "server_int.h"

static int env_path(char *dst, size_t n, const char *prefix,
                    const char *name, int *set)
{
    char var[128];
    snprintf(var, sizeof(var), "%s_%s", prefix, name);
    const char *v = getenv(var);
    *set = 0;
    if (!v || !*v)
        return FCCL_OK;
    size_t len = strlen(v);
    if (len >= n)
        return fccl_err(FCCL_ERR_INVALID, "%s: path too long (%zu bytes, at "
                        "most %zu)", var, len, n - 1);
    memcpy(dst, v, len + 1);
    *set = 1;
    return FCCL_OK;
}

int fccl_server_opts_env(fccl_server_opts_t *o, const char *prefix)
{
    if (!o || !prefix)
        return fccl_err(FCCL_ERR_INVALID, "fccl_server_opts_env: NULL "
                        "argument");
    int set, rc;
    if ((rc = env_path(o->tls_cert, sizeof(o->tls_cert), prefix,
                       "SERVER_TLS_CERT", &set)) < 0)
        return rc;
    /* A job that gives its store a certificate means to be reached over
     * TLS only. */
    if (set)
        o->tls_required = 1;
    if ((rc = env_path(o->tls_key, sizeof(o->tls_key), prefix,
                       "SERVER_TLS_KEY", &set)) < 0 ||
        (rc = env_path(o->tls_ca, sizeof(o->tls_ca), prefix, "SERVER_TLS_CA",
                       &set)) < 0 ||
        (rc = env_path(o->journal, sizeof(o->journal), prefix,
                       "SERVER_JOURNAL", &set)) < 0 ||
        (rc = env_path(o->token_file, sizeof(o->token_file), prefix,
                       "TOKEN_FILE", &set)) < 0)
        return rc;
    /* The clients prove this token: the store demands it of everyone. */
    if (set)
        o->auth_required = 1;
    return FCCL_OK;
}

/* path relative and dir set: path = dir/path. */
static int under(char *path, size_t n, const char *dir, size_t dirlen,
                 const char *what, const char *var)
{
    if (!path[0] || path[0] == '/' || !dir || !dirlen)
        return FCCL_OK;
    char joined[1024];
    int k = snprintf(joined, sizeof(joined), "%.*s/%s", (int)dirlen, dir,
                     path);
    if (k < 0 || (size_t)k >= n || (size_t)k >= sizeof(joined))
        return fccl_err(FCCL_ERR_INVALID, "%s %s in $%s (%.*s): path too "
                        "long", what, path, var, (int)dirlen, dir);
    LOG_INFO("STORE", "%s %s: %s (from $%s)", what, path, joined, var);
    memcpy(path, joined, (size_t)k + 1);
    return FCCL_OK;
}

int store_resolve_paths(fccl_server_opts_t *c)
{
    const char *cred = getenv("CREDENTIALS_DIRECTORY");
    size_t clen = cred ? strlen(cred) : 0;
    struct {
        char *p;
        size_t n;
        const char *what;
    } creds[] = {
        {c->tls_cert, sizeof(c->tls_cert), "tls-cert"},
        {c->tls_key, sizeof(c->tls_key), "tls-key"},
        {c->tls_ca, sizeof(c->tls_ca), "tls-ca"},
        {c->token_file, sizeof(c->token_file), "token-file"},
        {c->read_token_file, sizeof(c->read_token_file), "read-token-file"},
    };
    for (size_t i = 0; i < sizeof(creds) / sizeof(creds[0]); i++) {
        int rc = under(creds[i].p, creds[i].n, cred, clen, creds[i].what,
                       "CREDENTIALS_DIRECTORY");
        if (rc < 0)
            return rc;
    }
    /* StateDirectory= with several entries gives a ':'-separated list:
     * the first is ours. */
    const char *state = getenv("STATE_DIRECTORY");
    size_t slen = state ? strcspn(state, ":") : 0;
    return under(c->journal, sizeof(c->journal), state, slen, "journal",
                 "STATE_DIRECTORY");
}
