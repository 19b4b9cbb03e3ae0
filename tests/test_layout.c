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

/* The objects as built pass ARGS over DIR (those named NAMES); a copy in
 * which VICTIM calls SYM is refused, the call named as going HOW. */
static void holds(const char *dir, const char *args, const char *names,
                  const char *victim, const char *sym, const char *how)
{
    passes(dir, args, names);
    plant(dir, victim, sym);
    refused(dir, args, victim, sym, how, names);
}

/* One case per map (alike on purpose, each names its wrong call). */

/* the options, at the bottom, sending on a connection */
Test(layout, store_client_map_refuses_an_upward_call)
{
    holds("store/client", "--map store/client/store_vt.h", "*.o",
          "store_opts", "sc_send", "above it");
}

/* etcd's request layer calling back into its read-modify-write */
Test(layout, store_client_etcd_goes_one_way)
{
    holds("store/client", "--map store/client/store_vt.h", "*.o",
          "etcd_client", "ec_rmw_run", "above it");
}

/* the client calling into the server (and neither is above) */
Test(layout, store_client_and_server_stand_side_by_side)
{
    holds("store", "client,server etcd proto", "*.o", "client/store_opts",
          "store_conn_reply", "stands beside it");
}

/* the slots closing a connection by its name, not through s->life */
Test(layout, store_server_map_refuses_an_upward_call)
{
    holds("store/server", "--map store/server/server_int.h", "*.o",
          "server_slots", "store_conn_free", "above it");
}

/* the group commit sending a reply itself */
Test(layout, store_server_journal_sits_below_the_replies)
{
    holds("store/server", "--map store/server/server_int.h", "*.o",
          "server_journal", "store_conn_reply", "above it");
}

/* the transfers calling back into the handlers */
Test(layout, store_server_etcd_backend_goes_one_way)
{
    holds("store/server", "--map store/server/backend_etcd.h", "backend_*.o",
          "backend_etcd", "store_be_dispatch", "above it");
}

Test(layout, coll_transport_map_refuses_an_upward_call)
{
    holds("coll/transport", "--map coll/transport/tp.h", "*.o", "names",
          "tp_open", "above it");
}

/* the options parser starting the ranks */
Test(layout, fccl_run_map_refuses_an_upward_call)
{
    holds("cli/fccl-run", "--map cli/fccl-run/run.h", "*.o", "options",
          "fr_spawn_ranks", "above it");
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
