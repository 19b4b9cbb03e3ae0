/*
 * proc.h: the process-level helpers every test and test helper program
 * shares (part of libtesthelp.a, built once from tests/lib/).
 *
 * One clock (CLOCK_MONOTONIC, read directly so a test does not time the
 * library with the library's own clock), one way to find the programs of
 * a build, one free-port finder, one temporary directory maker, and one
 * way to run a command under a hard timeout with its output captured.
 *
 * Nothing here uses Criterion: the helper programs (boot_check,
 * coll_check, ...) link it too.  Calls report failure by their return
 * value; the test decides what to assert.
 */
#ifndef FCCL_TESTS_LIB_PROC_H
#define FCCL_TESTS_LIB_PROC_H

#include <stddef.h>
#include <sys/types.h>

/* ---- time ---- */

/* Seconds on CLOCK_MONOTONIC (only differences mean anything). */
double th_now(void);

/* Milliseconds from now until `end` (a th_now() value), 0 once it has
 * passed; what poll() wants. */
int th_ms_left(double end);

/* Sleep ms milliseconds, the whole time even when signals interrupt. */
void th_sleep_ms(int ms);

/* ---- built programs ---- */

/* Where the build's programs are: $FCCL_BIN (scripts/run-tests.sh sets
 * it), else build/bin; th_testbin_dir: $FCCL_TESTBIN, else build/tests,
 * for the test helper programs. */
const char *th_bin_dir(void);
const char *th_testbin_dir(void);

/* buf = th_bin_dir()/name (name as it is when it holds a '/'); returns
 * buf. */
const char *th_bin(const char *name, char *buf, size_t len);

/* FCCL_TEST_REDUCED or FCCL_TEST_QUICK is set and not "0": the sanitized
 * build or the quick tier asks for the smaller matrix (fewer providers,
 * rank counts and sizes). */
int th_reduced(void);

/* FCCL_TEST_QUICK is set and not "0": the quick tier (`make check`), which
 * leaves the long cases out; `make test` runs them. */
int th_quick(void);

/* First thing in a long case (an 8-rank matrix, a soak, a CPU
 * measurement, a kill loop, anything past about 10 s here): skipped in
 * the quick tier, with the reason.  Criterion tests only. */
#define TH_LONG_CASE(why)                                                    \
    do {                                                                     \
        if (th_quick())                                                      \
            cr_skip_test("long case (%s): `make test` runs it", why);        \
    } while (0)

/* openssl req's option for a new key of a test certificate: P-256, made
 * in a millisecond where an RSA key takes up to seconds on a busy
 * machine (the suites make dozens). */
#define TH_NEWKEY "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1"

/* ---- ports and directories ---- */

/* A TCP port on 127.0.0.1 that was free a moment ago (for "nobody
 * listens here" cases and for servers that must be started on a known
 * port), or -1. */
int th_free_port(void);

/* The job's store as a rank sees it: TCPSTORE_ADDR (fccl-run's store; on
 * one node its MASTER_PORT is torch's, served by rank 0), else
 * "MASTER_ADDR:MASTER_PORT".  Static storage. */
const char *th_job_store_addr(void);

/* A fresh directory /tmp/<tag>-XXXXXX written into dir (len >= 64 is
 * plenty); 0, or -1 with errno. */
int th_mkdtemp(char *dir, size_t len, const char *tag);

/* Write text to path (created or truncated) and give it mode (key and
 * token files must be 0600); 0, or -1 with errno. */
int th_write_file(const char *path, const char *text, int mode);

/* Remove dir and everything below it (links are removed, never
 * followed); 0, or -1 if something stayed. */
int th_rmtree(const char *dir);

/* ---- running commands ---- */

/* What th_run runs.  argv[0] is a path or a name looked up in PATH. */
struct th_cmd {
    const char *const *argv;  /* NULL-terminated */
    const char *const *env;   /* "NAME=VALUE" set, "-NAME" unset; or NULL */
    const void *in;           /* stdin bytes (stdin is empty without) */
    size_t inlen;
    double timeout_s;         /* hard limit; <= 0: none */
    int merge;                /* stderr into the same capture as stdout */
};

struct th_result {
    int status;      /* exit code; 128 + N if killed by signal N; 124 if
                        the timeout stopped it */
    char *out, *err; /* NUL-terminated, malloc'd; err is "" with merge */
    size_t outlen, errlen;
};

/* Run c to its end and capture its output.  The command runs under
 * `timeout -k 5`, which puts it in a process group of its own and kills
 * that whole group at the deadline, so a job that started ranks leaves
 * none behind, even when the test itself is killed meanwhile.  Blocks
 * until the command and everything holding its output pipes are gone.
 * Returns 0 (r filled; free it with th_result_free) or -1 if it could
 * not be started. */
int th_run(const struct th_cmd *c, struct th_result *r);
void th_result_free(struct th_result *r);

/* `sh -c cmd` with stdout and stderr captured together into *out
 * (malloc'd, "" if nothing ran; never NULL).  Returns th_run's status, or
 * -1 if it could not be started. */
int th_sh(const char *cmd, int timeout_s, char **out);

/* `fccl-run -n N --store 127.0.0.1:PORT TESTBIN/PROG_ARGS` on shm with
 * FCCL_TIMEOUT=60, as th_sh runs it: its status, *out its output. */
int th_job_on_store(int n, int port, const char *prog_args, int timeout_s,
                    char **out);

/* Start argv[0] (looked up in PATH) in the background, stdout and stderr
 * into the file log, killed when the test dies; with own_group in a
 * process group of its own (kill it with kill(-pid, ...)).  Its pid, or
 * -1 when fork fails; the caller reaps it. */
pid_t th_spawn_logged(const char *const argv[], const char *log,
                      int own_group);

/* Wait up to ms for child pid; its wait status, or -1 when it had to be
 * SIGKILLed at the deadline. */
int th_reap(pid_t pid, int ms);

/* ---- text ---- */

/* How many times needle occurs in hay (non-overlapping). */
int th_count(const char *hay, const char *needle);

/* Into buf (len bytes, always terminated): the line of out from the first
 * `want` on, less its first skip bytes, without the newline; "" when want
 * is not in out. */
void th_line_at(const char *out, const char *want, size_t skip, char *buf,
                size_t len);

#endif
