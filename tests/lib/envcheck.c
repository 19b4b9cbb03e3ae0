/* env:// parsing checks shared by the launcher suites (envcheck.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "envcheck.h"
#include "fccl/core.h"

const char *ec_lookup(void *ctx, const char *name)
{
    size_t n = strlen(name);
    for (const char *const *e = ctx; *e; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

struct launcher_env ec_parse_ok(const char *const *env, int need_addr)
{
    struct launcher_env e;
    int rc = launcher_env_parse(ec_lookup, (void *)env, need_addr, &e);
    cr_assert_eq(rc, FCCL_OK, "parse failed: %s", fccl_last_error());
    return e;
}

void ec_expect(const struct launcher_env *e, int src, int rank, int size,
               int lr, int ls, const char *addr, int port, int hs)
{
    cr_expect_eq(e->source, src, "source %s, want %s",
                 launcher_env_source_name(e->source),
                 launcher_env_source_name(src));
    cr_expect_eq(e->rank, rank, "rank %d want %d", e->rank, rank);
    cr_expect_eq(e->size, size, "size %d want %d", e->size, size);
    cr_expect_eq(e->local_rank, lr, "local rank %d want %d", e->local_rank, lr);
    cr_expect_eq(e->local_size, ls, "local size %d want %d", e->local_size, ls);
    cr_expect_str_eq(e->master_addr, addr);
    cr_expect_eq(e->port, port, "port %d want %d", e->port, port);
    cr_expect_eq(e->host_store, hs, "host_store %d want %d", e->host_store, hs);
}

void ec_parse_err(const char *const *env, const char *needle)
{
    struct launcher_env e;
    int rc = launcher_env_parse(ec_lookup, (void *)env, 1, &e);
    cr_assert_eq(rc, FCCL_ERR_INVALID, "rc %d, want INVALID", rc);
    cr_assert(strstr(fccl_last_error(), needle), "message '%s' lacks '%s'",
              fccl_last_error(), needle);
}
