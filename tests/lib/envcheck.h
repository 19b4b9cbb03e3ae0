/*
 * envcheck.h: env:// parsing (bootstrap/launcher_env.c) checked against
 * made-up environments, for the launcher suites (test_launcher_env,
 * test_launcher_msrun).  Asserts with Criterion (Criterion test binaries
 * only).
 */
#ifndef FCCL_TESTS_LIB_ENVCHECK_H
#define FCCL_TESTS_LIB_ENVCHECK_H

#include "launcher_env.h"

/* launcher_env_parse's lookup over ctx, an environment given as
 * NULL-terminated "NAME=VALUE" strings. */
const char *ec_lookup(void *ctx, const char *name);

/* Parse env; it must succeed. */
struct launcher_env ec_parse_ok(const char *const *env, int need_addr);

/* e must say: source src, rank, size, local rank lr and size ls, the
 * master's address and port, and whether this rank hosts the store. */
void ec_expect(const struct launcher_env *e, int src, int rank, int size,
               int lr, int ls, const char *addr, int port, int hs);

/* Parsing env (an address needed) must fail with FCCL_ERR_INVALID and a
 * message containing needle. */
void ec_parse_err(const char *const *env, const char *needle);

#endif
