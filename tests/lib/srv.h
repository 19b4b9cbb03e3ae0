/*
 * srv.h: a store server (or any program of the build) as a child
 * process of a Criterion test: the one way tests start tcpstore-server on
 * a free port, with extra arguments, its stderr captured in a log file,
 * stopped gracefully (SIGTERM, exit code checked) or hard (SIGKILL).
 *
 *   struct srv s;
 *   srv_start(&s, (const char *[]){"--journal", path, NULL});
 *   ... 127.0.0.1:s.port ...; srv_log_wait(&s, "compacted", TH_IO_MS);
 *   srv_finish(&s);              // SIGTERM, exit 0 required, log removed
 *
 * A failure to start fails the test (cr_assert), so these calls are for
 * Criterion test binaries only (the helper programs never link this
 * file).  The child dies with the test (PR_SET_PDEATHSIG, which follows
 * the thread that forked: start servers from the test's main thread), so
 * a test killed at its timeout leaves no server behind.
 */
#ifndef FCCL_TESTS_LIB_SRV_H
#define FCCL_TESTS_LIB_SRV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fccl/store.h"

#define TH_IO_MS 5000 /* deadline of one expected reply or log line */

/* A child program; zeroed (`= {0}`) or filled by srv_start/srv_spawn. */
struct srv {
    pid_t pid;        /* 0 once it has been waited for */
    int port;         /* from its "listening on HOST:PORT" line */
    char addr[256];   /* HOST:PORT as it printed it */
    char errpath[64]; /* its stderr (the server's log) */
    int out_fd;       /* its stdout after that line, kept open so a late
                         write never meets a closed pipe; 0 = none (0 is
                         the test's stdin, never ours) */
};

/* Start argv (NULL-terminated, argv[0] included; a name without '/' is
 * a program of th_bin_dir()): stdout is a pipe returned in *outfd,
 * stderr goes to s->errpath.  Fails the test if it cannot fork. */
void srv_spawn(struct srv *s, const char *const *argv, int *outfd);

/* One line of a child's stdout (the '\n' dropped) within ms: its
 * length, or -1 at EOF or the deadline. */
int srv_read_line(int fd, char *buf, size_t n, int ms);

/* Start argv as srv_spawn does and wait up to timeout_s for its first
 * line, which must be "listening on HOST:PORT" (s->addr, s->port).  Fails
 * the test, with the server killed and its log shown, otherwise. */
void srv_start_argv(struct srv *s, const char *const *argv, double timeout_s);

/* [prefix...] tcpstore-server --port 0 [extra...] (both lists
 * NULL-terminated, or NULL; with a prefix, e.g. valgrind, the server is
 * named by its full path).  The server binds every interface unless extra
 * says --host. */
void srv_start_prog(struct srv *s, const char *const *prefix,
                    const char *const *extra);
void srv_start(struct srv *s, const char *const *extra);

/* tcpstore-server --host 127.0.0.1 --port 0 [extra...]: a server only
 * this machine can reach, s->addr "127.0.0.1:PORT". */
void srv_start_local(struct srv *s, const char *const *extra);

/* Run argv (argv[0] as for srv_spawn) to its end within ms, for programs
 * expected to exit by themselves (usage errors, refused configurations):
 * its exit code; fails the test if it had to be killed.  *out (if not
 * NULL; malloc'd) is its stdout followed by its stderr. */
int srv_run(const char *const *argv, int ms, char **out);

/* Wait up to ms for the child to end by itself; its wait status (s->pid
 * then 0), or -1 when it had to be SIGKILLed. */
int srv_wait(struct srv *s, int ms);

/* SIGTERM, then wait up to ms: the exit code, or -1 if it hung (then
 * SIGKILLed) or died by a signal.  srv_stop waits 10 s.  -1 also when
 * nothing runs (s->pid 0). */
int srv_stop_ms(struct srv *s, int ms);
int srv_stop(struct srv *s);

/* The graceful end of a test's server: srv_stop, srv_cleanup, and the
 * test fails unless the server exited 0. */
void srv_finish(struct srv *s);

/* SIGKILL and reap (crash tests: nothing is flushed). */
void srv_kill_hard(struct srv *s);

/* The whole log so far (malloc'd, at most 1 MiB). */
char *srv_log(const struct srv *s);

/* How many times needle occurs in the log so far. */
int srv_log_count(const struct srv *s, const char *needle);

/* Poll the log until needle shows up: 1, or 0 after ms. */
int srv_log_wait(const struct srv *s, const char *needle, int ms);

/* Kill what still runs, close its stdout, remove its log.  Safe on a
 * zeroed struct and twice. */
void srv_cleanup(struct srv *s);

/* ---- clients of it ---- */

#define TH_ADDR_LEN 32

/* o initialised for 127.0.0.1:port with timeout_ms (0: the library's
 * default); the address text is kept in addr (TH_ADDR_LEN bytes), which
 * must outlive o. */
void srv_client_opts(fccl_store_opts_t *o, char *addr, int port,
                     int64_t timeout_ms);

/* A connected client of 127.0.0.1:port (10 s timeout, reconnecting if
 * asked); fails the test if it cannot connect. */
fccl_store_t *srv_store_open(int port, int reconnect);

/* Likewise in dialect d with timeout_ms (srv_store_open: modern, 10 s). */
fccl_store_t *srv_store_open_as(int port, int reconnect, fccl_dialect_t d,
                                int64_t timeout_ms);

/* GET key (5 s timeout) returns exactly want[0..len), NUL-terminated as
 * the API promises; fails the test otherwise.  srv_expect_cstr: want is
 * a string. */
void srv_expect_value(fccl_store_t *st, const char *key, const void *want,
                      size_t len);
void srv_expect_cstr(fccl_store_t *st, const char *key, const char *want);

/* `cd dir && ENV tcpstore --timeout 5 --addr 127.0.0.1:port ARGS` (env
 * and args are shell words, dir holds the files they name) under a 30 s
 * limit; its exit status, *out its stdout and stderr (malloc'd). */
int srv_tcpstore(int port, const char *dir, const char *env,
                 const char *args, char **out);

/* Skips the test when there is no openssl program to make certificates
 * with (call it before making anything a skip would leave behind). */
void srv_need_openssl(void);

/* A self-signed certificate for CN=cn with subjectAltName IP:127.0.0.1,
 * made by the openssl program, its key mode 0600.  Skips the test as
 * srv_need_openssl does; fails it when openssl fails. */
void srv_make_cert(const char *cert, const char *key, const char *cn);

/* srv_make_cert of dir/name.crt and dir/name.key, their paths left in
 * cert and key (len bytes each). */
void srv_make_cert_in(const char *dir, const char *name, char *cert,
                      char *key, size_t len, const char *cn);

/* `ENV fccl-run -n 2 --store 127.0.0.1:port boot_check host` on shm (env:
 * shell words), asserting that the job exits 0 within 100 s. */
void srv_boot_check_job(int port, const char *env);

/* fccl_store_connect to SCHEME127.0.0.1:PORT (scheme "" or "etcd://"), a
 * port nobody listens on, with timeout_ms: its return code, the address
 * in addr (len bytes) and the seconds it took in *took.  Asserts that no
 * handle was left. */
int srv_connect_nowhere(const char *scheme, int64_t timeout_ms, char *addr,
                        size_t len, double *took);
/* A connected client of addr (any address fccl_store_connect takes) in
 * dialect d, raw keys if raw; fails the test if it cannot connect. */
fccl_store_t *srv_connect_to(const char *addr, fccl_dialect_t d, int raw,
                             int64_t timeout_ms);
#endif
