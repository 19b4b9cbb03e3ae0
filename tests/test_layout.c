/*
 * The module maps hold: a call against a map fails the build.  The build
 * runs scripts/check-calls.sh on the objects before it makes any library
 * (the Makefile's $(CALLS_OK)); here each map gets a call that goes the
 * wrong way, added to a copy of the built objects, and the script must
 * refuse it and name the call, while the real objects pass.  Also the
 * 900-line limit (scripts/check-lines.sh) on a file made too long.
 *
 * Sources: $FCCL_SRCDIR, else the current directory; objects: the build
 * directory above $FCCL_TESTBIN (build/tests).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/proc.h"

static char src[512], obj[600], tmp[128];

static void setup(void)
{
    const char *s = getenv("FCCL_SRCDIR");
    snprintf(src, sizeof(src), "%s", s && *s ? s : ".");
    snprintf(obj, sizeof(obj), "%s/../obj", th_testbin_dir());
    cr_assert_eq(th_mkdtemp(tmp, sizeof(tmp), "fccl-layout"), 0);
}

static void teardown(void)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    th_sh(cmd, 30, NULL);
}

TestSuite(layout, .init = setup, .fini = teardown, .timeout = 120);

/* Run cmd (a shell line) from the sources; its status, *out its output. */
static int sh(char **out, const char *fmt, const char *a, const char *b)
{
    char cmd[8192];
    int n = snprintf(cmd, sizeof(cmd), "cd '%s' && ", src);
    snprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, a, b);
    return th_sh(cmd, 90, out);
}

/* Copy the built objects below DIR (under obj/) into tmp/DIR, then
 * replace VICTIM.o (a path below DIR) by an object that calls SYM, which
 * a file above VICTIM in the map defines. */
static void plant(const char *dir, const char *victim, const char *sym)
{
    char cmd[2048], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "mkdir -p '%s/%s' && cp -r '%s/%s/.' '%s/%s/' && "
             "printf 'int %s(void);\\nint layout_upward(void) "
             "{ return %s(); }\\n' | cc -x c -w -c - -o '%s/%s/%s.o'",
             tmp, dir, obj, dir, tmp, dir, sym, sym, tmp, dir, victim);
    int rc = th_sh(cmd, 60, &out);
    cr_assert_eq(rc, 0, "%s: %s", cmd, out ? out : "");
    free(out);
}

/* check-calls.sh over ROOT/DIR with the map (or the unit list) in ARGS
 * and the objects there named NAMES (a find -name pattern): its exit
 * status, *out its output. */
static int check(const char *root, const char *dir, const char *args,
                 const char *names, char **out)
{
    char line[2048];
    snprintf(line, sizeof(line), "scripts/check-calls.sh '%s/%s' %s -- "
             "$(find '%s/%s' -name '%s' | sort)",
             root, dir, args, root, dir, names);
    return sh(out, "%s%s", line, "");
}

/* The planted copy is refused: exit 1, naming SYM as a call of VICTIM
 * going up (or beside, HOW says which). */
static void refused(const char *dir, const char *args, const char *victim,
                    const char *sym, const char *how, const char *names)
{
    char *out = NULL, want[300];
    int rc = check(tmp, dir, args, names, &out);
    cr_assert_eq(rc, 1, "exit %d, want 1: %s", rc, out);
    snprintf(want, sizeof(want), "%s.o calls %s of", victim, sym);
    cr_assert(strstr(out, want), "no '%s' in: %s", want, out);
    cr_assert(strstr(out, how), "no '%s' in: %s", how, out);
    free(out);
}

/* The objects as built pass the same check. */
static void passes(const char *dir, const char *args, const char *names)
{
    char *out = NULL;
    int rc = check(obj, dir, args, names, &out);
    cr_assert_eq(rc, 0, "exit %d: %s", rc, out);
    free(out);
}

Test(layout, store_client_map_refuses_an_upward_call)
{
    const char *map = "--map store/client/store_vt.h";
    passes("store/client", map, "*.o");
    /* the options, at the bottom, sending on a connection */
    plant("store/client", "store_opts", "sc_send");
    refused("store/client", map, "store_opts", "sc_send", "above it",
            "*.o");
}

Test(layout, store_client_etcd_goes_one_way)
{
    const char *map = "--map store/client/store_vt.h";
    /* etcd's request layer calling back into its read-modify-write */
    plant("store/client", "etcd_client", "ec_rmw_run");
    refused("store/client", map, "etcd_client", "ec_rmw_run", "above it",
            "*.o");
}

Test(layout, store_client_and_server_stand_side_by_side)
{
    const char *order = "client,server etcd proto";
    passes("store", order, "*.o");
    /* the client calling into the server (and neither is above) */
    plant("store", "client/store_opts", "store_conn_reply");
    refused("store", order, "client/store_opts", "store_conn_reply",
            "stands beside it", "*.o");
}

Test(layout, store_server_map_refuses_an_upward_call)
{
    const char *map = "--map store/server/server_int.h";
    passes("store/server", map, "*.o");
    /* the slots closing a connection by its name, not through s->life */
    plant("store/server", "server_slots", "store_conn_free");
    refused("store/server", map, "server_slots", "store_conn_free",
            "above it", "*.o");
}

Test(layout, store_server_journal_sits_below_the_replies)
{
    const char *map = "--map store/server/server_int.h";
    /* the group commit sending a reply itself */
    plant("store/server", "server_journal", "store_conn_reply");
    refused("store/server", map, "server_journal", "store_conn_reply",
            "above it", "*.o");
}

Test(layout, store_server_etcd_backend_goes_one_way)
{
    const char *map = "--map store/server/backend_etcd.h";
    passes("store/server", map, "backend_*.o");
    /* the transfers calling back into the handlers */
    plant("store/server", "backend_etcd", "store_be_dispatch");
    refused("store/server", map, "backend_etcd", "store_be_dispatch",
            "above it", "backend_*.o");
}

Test(layout, coll_transport_map_refuses_an_upward_call)
{
    const char *map = "--map coll/transport/tp.h";
    passes("coll/transport", map, "*.o");
    plant("coll/transport", "names", "tp_open");
    refused("coll/transport", map, "names", "tp_open", "above it", "*.o");
}

Test(layout, fccl_run_map_refuses_an_upward_call)
{
    const char *map = "--map cli/fccl-run/run.h";
    passes("cli/fccl-run", map, "*.o");
    /* the options parser starting the ranks */
    plant("cli/fccl-run", "options", "fr_spawn_ranks");
    refused("cli/fccl-run", map, "options", "fr_spawn_ranks", "above it",
            "*.o");
}

Test(layout, a_file_over_900_lines_fails)
{
    char *out = NULL;
    int rc = sh(&out, "scripts/check-lines.sh%s%s", "", "");
    cr_assert_eq(rc, 0, "the tree: %s", out ? out : "");
    free(out);
    /* a copy of cli/ with one file of 901 lines, checked from tmp */
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "cp -r '%s/cli' '%s/' && seq 901 > '%s/cli/long.c' && "
             "cd '%s' && \"$OLDPWD/%s/scripts/check-lines.sh\"",
             src, tmp, tmp, tmp, src[0] == '/' ? "." : src);
    if (src[0] == '/')
        snprintf(cmd, sizeof(cmd),
                 "cp -r '%s/cli' '%s/' && seq 901 > '%s/cli/long.c' && "
                 "cd '%s' && '%s/scripts/check-lines.sh'",
                 src, tmp, tmp, tmp, src);
    rc = th_sh(cmd, 60, &out);
    cr_assert_eq(rc, 1, "%s: exit %d: %s", cmd, rc, out);
    cr_assert(strstr(out, "cli/long.c: 901 lines, over 900"), "%s", out);
    free(out);
}
