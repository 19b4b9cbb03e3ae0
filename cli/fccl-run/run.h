/*
 * fccl-run: launch the ranks of a job, like torchrun or msrun.
 *
 *   fccl-run -n N [--store HOST:PORT] [options] PROGRAM ARGS...
 *   fccl-run -n N --nnodes M --node-rank K --store HOST:PORT [--host-store]
 *            PROGRAM ARGS...          (once on each of M hosts)
 *
 * Starts a store in-process unless one is given (or, with --host-store,
 * serves the given address itself), starts this node's N ranks with the
 * torchrun variables (global rank K*N + local rank) and msrun's, prefixes
 * every output line with the global rank, forwards SIGINT/SIGTERM, and when
 * a rank fails stops the rest and exits with that rank's status (128 + N
 * when it was killed by signal N).  It removes the /dev/shm files a killed
 * rank's libfabric shm endpoint leaves behind (they are named "<pid>:...").
 *
 * Options of torchrun's and msrun's kind:
 *  - --log-dir DIR: each rank's stdout and stderr are also copied, byte for
 *    byte and without the prefix, to DIR/attempt_<A>/rank<R>.stdout and
 *    .stderr (A the attempt, R the global rank; DIR is created).
 *  - --max-restarts N: when a rank fails, the node's ranks are stopped and
 *    all started again, at most N times; attempt A (0 first) runs with
 *    RESTART_COUNT = TORCHELASTIC_RESTART_COUNT = A and FCCL_JOB_ID =
 *    "<job>" for A = 0, "<job>-r<A>" after, so a new attempt never meets
 *    the keys of a failed one.  The exit status is the last attempt's.
 *  - --no-kill (srun's): a rank that fails does not stop the others;
 *    fccl-run waits for them all and exits with the first failure's
 *    status.  No failure is published to the other nodes either (give
 *    every node the flag).  For jobs whose survivors go on
 *    (fccl_group_shrink).
 *  - --respawn N (implies --no-kill): a rank that fails is started again
 *    alone, with the same RANK, LOCAL_RANK and WORLD_SIZE and
 *    FCCL_REJOIN=<k> (its k-th respawn), at most N times per rank, while
 *    the others go on; its fccl_init joins the survivors' group through
 *    their fccl_group_grow.  A failure followed by a respawn is not the
 *    job's failure: the exit status is the first failure no respawn
 *    followed (0 if none).
 *  - --bind-to core: the CPUs this launcher may use, grouped into cores
 *    (hardware threads of one core stay together), are shared out in
 *    order: with C cores and N <= C ranks, local rank r gets cores
 *    r*(C/N) .. r*(C/N)+C/N-1 (the C mod N last cores stay idle); with
 *    N > C, rank r gets core r mod C.  Set in the child before exec.
 *
 * The program is in files by job (run.h, this header, has the state they
 * share).  Module map, top down:
 *   main.c     main: the order of the steps, and the end
 *   restart.c  attempts: one attempt's start and state; restarts, alone
 *              and agreed across nodes (node 0 decides, the others wait)
 *   loop.c     the run loop: reaping ranks, forwarding signals to them,
 *              polling their output and the signal pipe
 *   nodes.c    nodes meeting through the store: the job id, failures
 *              published and watched, the end (protocol at its top)
 *   spawn.c    spawning and signals: the signal pipe, the ranks' variables
 *              and LD_PRELOAD, fork and exec, signalling the ranks, the
 *              /dev/shm files of a killed rank
 *   output.c   the ranks' output: prefixed lines, --log-dir copies
 *   bind.c     --bind-to core: the ranks' shares of the cores
 *   hosted.c   the store: the one given, or hosted in-process with its
 *              TLS, token and journal; etcd's lease
 *   options.c  the command line: --help, parsing, the checks between
 *              options
 * Each file calls only files below it in this list (the build checks it
 * on the objects, scripts/check-calls.sh), so a new option lands in
 * options.c and the part of the launcher it belongs to.  Names shared
 * between files start with fr_ (the program links libfccl's internal
 * archive, whose names must not meet ours).
 */
#ifndef FCCL_RUN_H
#define FCCL_RUN_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "clock.h"
#include "etcd_addr.h"
#include "fccl/core.h"
#include "fccl/server.h"
#include "fccl/store.h"
#include "log.h"
#include "net.h"

#define GRACE_MS 3000
#define LINE_MAX_BYTES 65536
#define WATCH_MS 250         /* how often a node checks for failures */
#define KV_CALL_MS 5000      /* launcher store calls (not waits) */
/* Store host: wait this long for the other nodes to finish; they need at
 * most a watch period plus the SIGTERM grace to stop their ranks. */
#define END_WAIT_MS (GRACE_MS + 5000)
#define LAUNCH_KEY "fccl-run/launch"
/* Node 0 waits this long for the others to stop their ranks before a
 * restart; they need a watch period, the grace and the output drain. */
#define RESTART_WAIT_MS 30000
#define NAP_MS 50

struct stream {
    int fd;          /* read end, -1 when closed */
    FILE *out;       /* stdout or stderr */
    char *buf;
    size_t len;
    int log_fd;      /* --log-dir copy, -1 if none */
};

struct rank_proc {
    pid_t pid;
    int done, status;
    int respawns;     /* --respawn: times this rank was started again */
    struct stream io[2];
    cpu_set_t *cpus;  /* --bind-to core: this rank's CPUs, else NULL */
    size_t cpus_size;
};

struct launcher {
    int n, prefix;
    int nnodes, node_rank, host_store;
    int max_restarts, attempt, bind_cores;
    int no_kill;              /* --no-kill: a failed rank stops no other */
    int own_sessions;         /* each rank leads a session (fr_own_sessions) */
    int respawn;              /* --respawn N: a failed rank is started
                                 again, alone, up to N times */
    const char *store_addr, *provider, *fake_nodes, *job_opt, *log_dir;
    char job[128];            /* the launch's job id */
    char ns[160];             /* this attempt's: job, or job-r<attempt> */
    char **argv;
    struct rank_proc *ranks;
    int running;
    int fail_rank, fail_code; /* first failure (of this attempt) */
    int start_failed;         /* this attempt's ranks could not start */
    int signalled;            /* signal the launcher got, 0 if none */
    uint64_t kill_at;         /* SIGKILL survivors at this time */
    fccl_server_t *server;
    /* the hosted store's --store-tls-cert/-key/-ca, --store-token-file,
     * --store-journal (NULL: from FCCL_STORE_SERVER_*, or none) */
    const char *st_cert, *st_key, *st_ca, *st_token, *st_journal;
    fccl_store_t *kv;         /* launcher's store connection (nnodes > 1) */
    fccl_store_t *lease;      /* etcd: the handle keeping this node's
                                 lease alive (its ranks write under it) */
    int remote_fail;          /* a rank on another node failed */
    int launch_pending;       /* node 0: launch key still to remove */
    int stale_fail;           /* a failure key predates this launch */
    uint64_t next_watch;
};

/* spawn.c: the signal pipe (SIGCHLD, SIGINT, SIGTERM as bytes) and the
 * launcher's own pid (a forked rank before exec is not the launcher). */
extern int fr_sig_pipe[2];
extern pid_t fr_launcher_pid;

/* restart.c */
void fr_run_attempt(struct launcher *L);
int fr_attempt_failed(const struct launcher *L);
int fr_others_failed(struct launcher *L);
int fr_agree_restart(struct launcher *L);

/* loop.c: run until this attempt's ranks have ended and their output is
 * drained (or 1 s after, when a rank's children hold its pipes). */
void fr_run_loop(struct launcher *L);

/* nodes.c */
void fr_ns_key(const char *ns, char *out, size_t len, const char *what);
void fr_job_key(const struct launcher *L, char *out, size_t len,
                const char *what);
void fr_clear_ns_keys(struct launcher *L, const char *ns);
void fr_clear_job_keys(struct launcher *L);
int fr_pick_job_id(struct launcher *L, const char *host, int port);
void fr_publish_failure(struct launcher *L, int code, const char *what);
int fr_other_node_failed(struct launcher *L, const char *then);
void fr_watch(struct launcher *L);
void fr_finish_nodes(struct launcher *L);

/* spawn.c */
void fr_install_signals(void);
void fr_preload_kallsyms_shim(void);
void fr_set_env_int(const char *name, int v);
void fr_set_job_env(struct launcher *L, const char *host, int port);
int fr_spawn_ranks(struct launcher *L);
/* Start rank r (again: with FCCL_REJOIN=respawns when respawns > 0);
 * -1 when pipe or fork failed (printed). */
int fr_spawn_rank(struct launcher *L, int r);
void fr_signal_all(struct launcher *L, int sig);
int fr_status_code(int status);
void fr_remove_shm_files(pid_t pid);

/* output.c */
void fr_drain_stream(struct launcher *L, int r, struct stream *s);
/* Forward what is left of a dead rank's stream (a last line without a
 * newline too) and close it, even if its children still hold it open. */
void fr_close_stream(struct launcher *L, int r, struct stream *s);
int fr_make_dirs(const char *path);
int fr_open_logs(struct launcher *L);

/* bind.c */
int fr_plan_binding(struct launcher *L);
/* 1 when each of the n ranks should lead a session of its own: a launch
 * of one node (nnodes <= 1) whose ranks fit the CPUs this launcher may
 * run on (bind.c says why). */
int fr_own_sessions(int n, int nnodes);

/* hosted.c */
int fr_start_store(struct launcher *L, char *host, size_t hostlen,
                   int *port);
int fr_open_lease(struct launcher *L);

/* options.c: fills L from the command line; -1 on a usage error (the
 * message printed); exits for --help and --version. */
int fr_parse_args(struct launcher *L, int argc, char **argv);

#endif
