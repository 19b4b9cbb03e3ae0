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
 *  - --bind-to core: the CPUs this launcher may use, grouped into cores
 *    (hardware threads of one core stay together), are shared out in
 *    order: with C cores and N <= C ranks, local rank r gets cores
 *    r*(C/N) .. r*(C/N)+C/N-1 (the C mod N last cores stay idle); with
 *    N > C, rank r gets core r mod C.  Set in the child before exec.
 *
 * Several nodes meet through the store, under keys "fccl-run/...":
 *  - job id: --job-id, else FCCL_JOB_ID, else TORCHELASTIC_RUN_ID; with
 *    none, node 0 makes a fresh one (host, pid, clock) and SETs it under
 *    "fccl-run/launch"; the other nodes GET it (waiting for it) and ADD 1
 *    to "fccl-run/<job>/seen"; once all M-1 have, node 0 deletes both.  So
 *    every node of one launch has the same id and the next launch on the
 *    store gets a new one.  (Launches without a job id on one store must
 *    not overlap in their start; give --job-id when they might.)
 *  - failure: the first node whose rank fails ADDs "fccl-run/<job>/nfail"
 *    and, being first, SETs "fccl-run/<job>/failed" to "<status> <text>";
 *    every node checks that key every 250 ms and then stops its ranks and
 *    exits with that status.  Launcher store calls time out after 5 s, so
 *    a node cut off from the store still exits.
 *  - end: each node ADDs "fccl-run/<job>/exited"; the node that brings it
 *    to M deletes the job's fccl-run keys; the node hosting the store
 *    waits (up to 8 s) for that before it stops serving.  With a given job
 *    id, node 0 also deletes them at its start: keys left by an earlier
 *    launch of that id whose node was killed outright.
 *  - restarts (--max-restarts, the same on every node): the keys above
 *    are per attempt, under the attempt's job id <ns> ("<job>", then
 *    "<job>-r<A>").  A node whose ranks all succeeded ADDs "<ns>/done"
 *    and waits (FCCL_TIMEOUT at most) until every node has (the job
 *    succeeded) or "<ns>/failed" appears (it joins the restart, or after
 *    the last attempt exits with that status).  After a failure, once
 *    its ranks are stopped, a node ADDs "<ns>/stopped" (or "<ns>/veto"
 *    when it will not restart: no restarts left, interrupted); node 0
 *    waits (30 s at most) for M-1 stopped and no veto, deletes the next
 *    attempt's keys and SETs "<ns>/restart" to "go", else to "stop"; the
 *    others wait for that key.  Each node then ADDs "<ns>/exited" and the
 *    last deletes the attempt's keys.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "etcd_addr.h"
#include "fccl/core.h"
#include "fccl/store.h"
#include "fccl/server.h"
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
    struct stream io[2];
    cpu_set_t *cpus;  /* --bind-to core: this rank's CPUs, else NULL */
    size_t cpus_size;
};

struct launcher {
    int n, prefix;
    int nnodes, node_rank, host_store;
    int max_restarts, attempt, bind_cores;
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

static int sig_pipe[2] = {-1, -1};
static pid_t launcher_pid;

static pid_t launcher_pid;

static void on_signal(int sig)
{
    /* A rank between fork and exec still has this handler and shares the
     * pipe: a SIGTERM meant for it would read as the launcher's own. */
    if (getpid() != launcher_pid) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    unsigned char b = (unsigned char)sig;
    int saved = errno;
    ssize_t w = write(sig_pipe[1], &b, 1);
    (void)w;
    errno = saved;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fccl-run -n N [options] PROGRAM [ARGS...]\n"
            "Launch N ranks of PROGRAM on this machine with MASTER_ADDR, "
            "MASTER_PORT,\nRANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE "
            "set.\n\n"
            "options:\n"
            "  -n, --nproc N       ranks on this node (required, >= 1)\n"
            "  --nnodes M          nodes in the job (default 1); each runs "
            "fccl-run\n"
            "  --node-rank K       this node, 0..M-1 (default 0): ranks "
            "K*N..K*N+N-1\n"
            "  --store HOST:PORT   use this store instead of starting one "
            "in-process\n"
            "                      (required with --nnodes > 1)\n"
            "  --host-store        serve the store in-process, bound to "
            "--store's\n"
            "                      HOST:PORT (on the node that has that "
            "address)\n"
            "  --store-tls-cert FILE  the hosted store serves TLS only, with "
            "this\n"
            "                      certificate (else FCCL_STORE_SERVER_TLS_CERT);"
            " ranks\n"
            "                      verify it unless FCCL_STORE_TLS_CA says "
            "otherwise\n"
            "  --store-tls-key FILE   its key (else FCCL_STORE_SERVER_TLS_KEY)\n"
            "  --store-tls-ca FILE    demand client certificates of this CA "
            "(else\n"
            "                      FCCL_STORE_SERVER_TLS_CA; ranks present\n"
            "                      FCCL_STORE_TLS_CERT/KEY)\n"
            "  --store-token-file FILE  the hosted store requires this token "
            "and\n"
            "                      the ranks prove it (else "
            "FCCL_STORE_TOKEN_FILE)\n"
            "  --store-journal FILE   the hosted store's journal (else\n"
            "                      FCCL_STORE_SERVER_JOURNAL)\n"
            "  --job-id ID         store key namespace (else FCCL_JOB_ID, "
            "else\n"
            "                      TORCHELASTIC_RUN_ID, else a fresh one "
            "agreed by all\n"
            "                      nodes through the store)\n"
            "  --provider NAME     set FCCL_PROVIDER for every rank "
            "(e.g. shm, \"tcp;ofi_rxm\")\n"
            "  --fake-nodes K      testing: pretend the ranks are spread over "
            "K hosts\n"
            "  --no-prefix         do not prefix output lines with \"[RANK] \"\n"
            "  --log-dir DIR       also write each rank's stdout and stderr to\n"
            "                      DIR/attempt_<A>/rank<R>.stdout and .stderr\n"
            "                      (DIR created if missing)\n"
            "  --max-restarts N    when a rank fails, stop the others and start "
            "all\n"
            "                      again, at most N times (default 0); with "
            "--nnodes\n"
            "                      every node restarts together (give each "
            "node the same N)\n"
            "  --bind-to core|none pin each rank to its own share of the cores "
            "this\n"
            "                      launcher may use (default none; more ranks "
            "than\n"
            "                      cores wrap around)\n"
            "  -h, --help          this text\n"
            "  --version           print the version and exit\n\n"
            "Ranks also get FCCL_JOB_ID and GROUP_RANK (the node rank), "
            "RESTART_COUNT and\nTORCHELASTIC_RESTART_COUNT (the attempt, 0 "
            "first), the rest of torchrun's variables\n(ROLE_RANK, "
            "ROLE_NAME, ROLE_WORLD_SIZE, GROUP_WORLD_SIZE, TORCHELASTIC_RUN_ID,"
            "\nTORCHELASTIC_MAX_RESTARTS, TORCHELASTIC_USE_AGENT_STORE=True: "
            "torch's env:// then\nuses this store), msrun's MS_WORKER_NUM,\n"
            "MS_SCHED_HOST, MS_SCHED_PORT, "
            "MS_NODE_ID, RANK_ID and RANK_SIZE; with one node,\n"
            "FCCL_NET_IFACE=lo unless set (all ranks are local).  "
            "With --nnodes > 1 a\nrank failing on any node stops every node.\n\n"
            "Exit status: 0 when every rank of an attempt exits 0; else the "
            "last attempt's\nfirst failing rank's status (128 + N if killed "
            "by signal N); 2 on usage\nerrors.\n");
}

static int parse_count(const char *opt, const char *arg, long lo, long hi,
                       int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (!*arg || *end || v < lo || v > hi) {
        fprintf(stderr, "fccl-run: %s must be %ld..%ld, got '%s'\n", opt, lo,
                hi, arg);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int check_args(struct launcher *L)
{
    if (L->n == 0) {
        fprintf(stderr, "fccl-run: need -n N and a PROGRAM\n");
        return -1;
    }
    if (L->node_rank >= L->nnodes) {
        fprintf(stderr, "fccl-run: --node-rank %d is out of range for "
                        "--nnodes %d\n", L->node_rank, L->nnodes);
        return -1;
    }
    if ((long long)L->n * L->nnodes > 1 << 24) {
        fprintf(stderr, "fccl-run: %d nodes x %d ranks is too many\n",
                L->nnodes, L->n);
        return -1;
    }
    if (L->store_addr && !L->host_store &&
        (L->st_cert || L->st_key || L->st_ca || L->st_token ||
         L->st_journal)) {
        fprintf(stderr, "fccl-run: the --store-* options set up the store "
                        "fccl-run hosts: give --host-store too, or leave out "
                        "--store\n");
        return -1;
    }
    if ((L->nnodes > 1 || L->host_store) && !L->store_addr) {
        fprintf(stderr, "fccl-run: %s needs --store HOST:PORT (the address "
                        "every node can reach)\n",
                L->host_store ? "--host-store" : "--nnodes > 1");
        return -1;
    }
    return 0;
}

static int parse_args(struct launcher *L, int argc, char **argv)
{
    static const struct option opts[] = {
        {"nproc", required_argument, NULL, 'n'},
        {"nnodes", required_argument, NULL, 'M'},
        {"node-rank", required_argument, NULL, 'K'},
        {"node_rank", required_argument, NULL, 'K'},
        {"store", required_argument, NULL, 's'},
        {"host-store", no_argument, NULL, 'H'},
        {"store-tls-cert", required_argument, NULL, 1001},
        {"store-tls-key", required_argument, NULL, 1002},
        {"store-tls-ca", required_argument, NULL, 1003},
        {"store-token-file", required_argument, NULL, 1004},
        {"store-journal", required_argument, NULL, 1005},
        {"job-id", required_argument, NULL, 'j'},
        {"provider", required_argument, NULL, 'p'},
        {"fake-nodes", required_argument, NULL, 'k'},
        {"no-prefix", no_argument, NULL, 'q'},
        {"log-dir", required_argument, NULL, 'L'},
        {"max-restarts", required_argument, NULL, 'R'},
        {"bind-to", required_argument, NULL, 'B'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    int c, rc = 0;
    L->prefix = 1;
    L->nnodes = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, "+n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': rc = parse_count("-n", optarg, 1, 4096, &L->n); break;
        case 'M': rc = parse_count("--nnodes", optarg, 1, 1 << 16, &L->nnodes); break;
        case 'K': rc = parse_count("--node-rank", optarg, 0, 1 << 16, &L->node_rank); break;
        case 's': L->store_addr = optarg; break;
        case 'H': L->host_store = 1; break;
        case 1001: L->st_cert = optarg; break;
        case 1002: L->st_key = optarg; break;
        case 1003: L->st_ca = optarg; break;
        case 1004: L->st_token = optarg; break;
        case 1005: L->st_journal = optarg; break;
        case 'j': L->job_opt = optarg; break;
        case 'p': L->provider = optarg; break;
        case 'k': L->fake_nodes = optarg; break;
        case 'q': L->prefix = 0; break;
        case 'L':
            L->log_dir = optarg;
            if (!*optarg) {
                fprintf(stderr, "fccl-run: --log-dir needs a directory\n");
                rc = -1;
            }
            break;
        case 'R': rc = parse_count("--max-restarts", optarg, 0, 1 << 20, &L->max_restarts); break;
        case 'B':
            if (strcmp(optarg, "core") != 0 && strcmp(optarg, "none") != 0) {
                fprintf(stderr, "fccl-run: --bind-to must be core or none, "
                                "got '%s'\n", optarg);
                rc = -1;
            }
            L->bind_cores = strcmp(optarg, "core") == 0;
            break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("fccl-run (fccl) %s\n", fccl_version()); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (rc < 0)
        return -1;
    if (optind >= argc) {
        fprintf(stderr, "fccl-run: need -n N and a PROGRAM\n");
        usage(stderr);
        return -1;
    }
    if (check_args(L) < 0)
        return -1;
    L->argv = argv + optind;
    return 0;
}

/* ---- the hosted store's security (its own block: the store fccl-run
 * serves takes the TLS, token and journal settings a tcpstore-server
 * would, and its ranks are told how to reach it) ---- */

static int any_client_tls(void)
{
    static const char *const vars[] = {"FCCL_STORE_TLS_CA",
                                       "FCCL_STORE_TLS_CERT",
                                       "FCCL_STORE_TLS_KEY",
                                       "FCCL_STORE_TLS_SERVER_NAME"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

/* FCCL_STORE_SERVER_* and FCCL_STORE_TOKEN_FILE first, the --store-*
 * options over them. */
static int hosted_opts(const struct launcher *L, fccl_server_opts_t *o)
{
    const struct {
        const char *opt, *val, *name;
    } v[] = {
        {"--store-tls-cert", L->st_cert, "tls-cert"},
        {"--store-tls-key", L->st_key, "tls-key"},
        {"--store-tls-ca", L->st_ca, "tls-ca"},
        {"--store-token-file", L->st_token, "token-file"},
        {"--store-journal", L->st_journal, "journal"},
    };
    if (fccl_server_opts_env(o, "FCCL_STORE") < 0) {
        fprintf(stderr, "fccl-run: %s\n", fccl_last_error());
        return -1;
    }
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (v[i].val && fccl_server_opts_set(o, v[i].name, v[i].val) < 0) {
            fprintf(stderr, "fccl-run: %s: %s\n", v[i].opt,
                    fccl_last_error());
            return -1;
        }
    o->tls_required |= L->st_cert != NULL;
    o->auth_required |= L->st_token != NULL;
    if (fccl_server_opts_check(o) < 0) {
        fprintf(stderr, "fccl-run: the store it hosts: %s\n",
                fccl_last_error());
        return -1;
    }
    return 0;
}

/* The ranks (and this launcher's own connection, which reads the same
 * variables) prove the store's token and, when it serves TLS, verify it:
 * against FCCL_STORE_TLS_CA if set, else against its own certificate
 * (right for a self-signed one, or a chain file that ends in its root). */
static int point_clients(const fccl_server_opts_t *o)
{
    if (o->token_file[0])
        setenv("FCCL_STORE_TOKEN_FILE", o->token_file, 1);
    if (!o->tls_cert[0]) {
        if (!any_client_tls())
            return 0;
        fprintf(stderr, "fccl-run: FCCL_STORE_TLS_* is set, so the ranks "
                "reach the store over TLS, but the store fccl-run hosts has "
                "no certificate: give --store-tls-cert and --store-tls-key "
                "(or FCCL_STORE_SERVER_TLS_CERT and _KEY), or unset "
                "FCCL_STORE_TLS_*\n");
        return -1;
    }
    setenv("FCCL_STORE_TLS_CA", o->tls_cert, 0);
    const char *cc = getenv("FCCL_STORE_TLS_CERT");
    const char *ck = getenv("FCCL_STORE_TLS_KEY");
    if (o->tls_ca[0] && (!cc || !*cc || !ck || !*ck)) {
        fprintf(stderr, "fccl-run: the store it hosts demands client "
                "certificates signed by %s: set FCCL_STORE_TLS_CERT and "
                "FCCL_STORE_TLS_KEY for the ranks\n", o->tls_ca);
        return -1;
    }
    return 0;
}

/* The store: the one given, served here (--host-store) or a local one. */
static int start_store(struct launcher *L, char *host, size_t hostlen,
                       int *port)
{
    fccl_server_opts_t o;
    fccl_server_opts_init(&o);
    if (etcd_is_addr(L->store_addr)) {
        if (L->host_store) {
            fprintf(stderr, "fccl-run: --host-store serves a TCPStore, not "
                    "etcd (%s)\n", L->store_addr);
            return -1;
        }
        snprintf(host, hostlen, "%s", L->store_addr);
        *port = 0;
        return 0;
    }
    if (L->store_addr) {
        /* "H:P,H:P": front-ends of one store; MASTER_ADDR names the first */
        char first[FCCL_HOST_MAX + 16];
        snprintf(first, sizeof(first), "%.*s",
                 (int)strcspn(L->store_addr, ","), L->store_addr);
        if (strchr(L->store_addr, ',') && L->host_store) {
            fprintf(stderr, "fccl-run: --host-store serves one address, "
                    "not the list %s\n", L->store_addr);
            return -1;
        }
        if (fccl_addr_parse(first, host, hostlen, port) < 0) {
            fprintf(stderr, "fccl-run: --store: %s\n", fccl_last_error());
            return -1;
        }
        if (!L->host_store)
            return 0;
        snprintf(o.host, sizeof(o.host), "%.*s", (int)sizeof(o.host) - 1, host);
        o.port = *port;
    } else {
        snprintf(o.host, sizeof(o.host), "127.0.0.1");
        o.port = 0;
    }
    if (hosted_opts(L, &o) < 0 || point_clients(&o) < 0)
        return -1;
    int rc = fccl_server_create(&o, &L->server);
    if (rc >= 0)
        rc = fccl_server_start(L->server);
    if (rc < 0) {
        fprintf(stderr, "fccl-run: cannot start the store on %s:%d: %s\n",
                o.host, o.port, fccl_last_error());
        fccl_server_free(L->server);
        L->server = NULL;
        return rc;
    }
    if (!L->store_addr) {
        snprintf(host, hostlen, "127.0.0.1");
        *port = fccl_server_port(L->server);
    }
    return 0;
}

/* etcd: grant this node's lease (FCCL_STORE_LEASE_TTL, default 60 s),
 * keep it alive while we run and hand it to the ranks (FCCL_STORE_LEASE):
 * if this launcher dies, its job's keys go away after the TTL; at the end
 * closing the handle revokes the lease. */
static int open_lease(struct launcher *L)
{
    if (!etcd_is_addr(L->store_addr))
        return 0;
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = L->store_addr;
    fccl_store_opts_env(&o, "FCCL_STORE");
    o.lease_id = 0;
    if (o.lease_ttl_s <= 0)
        o.lease_ttl_s = 60;
    o.lease_revoke = 1;
    if (fccl_store_connect(&o, &L->lease) < 0) {
        fprintf(stderr, "fccl-run: cannot open a lease on %s: %s\n",
                L->store_addr, fccl_last_error());
        return -1;
    }
    char id[32];
    snprintf(id, sizeof(id), "%lld", (long long)fccl_store_lease_id(L->lease));
    setenv("FCCL_STORE_LEASE", id, 1);
    return 0;
}

/* ---- nodes meeting through the store (nnodes > 1) ---- */

static void ns_key(const char *ns, char *out, size_t len, const char *what)
{
    snprintf(out, len, "fccl-run/%s/%s", ns, what);
}

/* A key of this attempt. */
static void job_key(const struct launcher *L, char *out, size_t len,
                    const char *what)
{
    ns_key(L->ns, out, len, what);
}

static int connect_kv(struct launcher *L, const char *host, int port)
{
    char addr[FCCL_HOST_MAX * 4];
    if (etcd_is_addr(L->store_addr) || strchr(L->store_addr, ','))
        snprintf(addr, sizeof(addr), "%s", L->store_addr);
    else
        fccl_addr_format(addr, sizeof(addr), host, port);
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = addr;
    /* The ranks' TLS and token (FCCL_STORE_TLS_*, FCCL_STORE_TOKEN_FILE):
     * a store that requires them must let the launchers in too. */
    fccl_store_opts_env(&o, "FCCL_STORE");
    /* Wait for the store as long as ranks would (its node may start
     * later), then reopen with a short call timeout: a node cut off from
     * the store must not hang its exit on it. */
    int rc = fccl_store_connect(&o, &L->kv);
    if (rc >= 0) {
        fccl_store_close(L->kv);
        L->kv = NULL;
        o.timeout_ms = KV_CALL_MS;
        rc = fccl_store_connect(&o, &L->kv);
    }
    if (rc < 0) {
        fprintf(stderr, "fccl-run: node %d: cannot reach the store %s: %s\n",
                L->node_rank, addr, fccl_last_error());
        return -1;
    }
    return 0;
}

/* Node 0 makes a fresh id and publishes it; the others wait for it and say
 * they have seen it (node 0 then removes the launch key, see watch()). */
static int agree_job_id(struct launcher *L)
{
    if (L->node_rank == 0) {
        char host[64] = "";
        gethostname(host, sizeof(host) - 1);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(L->job, sizeof(L->job), "run-%s-%d-%llx", host,
                 (int)getpid(),
                 (unsigned long long)ts.tv_sec * 1000000000ull +
                     (unsigned long long)ts.tv_nsec);
        if (fccl_store_set(L->kv, LAUNCH_KEY, L->job, strlen(L->job)) < 0)
            goto fail;
        L->launch_pending = 1;
        snprintf(L->ns, sizeof(L->ns), "%s", L->job);
        return 0;
    }
    void *v = NULL;
    size_t len = 0;
    if (fccl_store_get(L->kv, LAUNCH_KEY, &v, &len,
                       fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS)) < 0)
        goto fail;
    snprintf(L->job, sizeof(L->job), "%.*s", (int)len, (char *)v);
    snprintf(L->ns, sizeof(L->ns), "%s", L->job);
    free(v);
    char key[200];
    job_key(L, key, sizeof(key), "seen");
    if (fccl_store_add(L->kv, key, 1, NULL) < 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "fccl-run: node %d: agreeing on a job id through the "
                    "store: %s (or give --job-id)\n",
            L->node_rank, fccl_last_error());
    return -1;
}

static const char *const JOB_KEYS[] = {"failed",  "nfail", "seen",
                                       "exited",  "done",  "stopped",
                                       "veto",    "restart"};

static void clear_ns_keys(struct launcher *L, const char *ns)
{
    char key[200];
    for (size_t i = 0; i < sizeof(JOB_KEYS) / sizeof(JOB_KEYS[0]); i++) {
        ns_key(ns, key, sizeof(key), JOB_KEYS[i]);
        fccl_store_delete(L->kv, key, NULL);
    }
}

static void clear_job_keys(struct launcher *L) { clear_ns_keys(L, L->ns); }

static int pick_job_id(struct launcher *L, const char *host, int port)
{
    const char *j = L->job_opt;
    if (!j || !*j)
        j = getenv("FCCL_JOB_ID");
    if (!j || !*j)
        j = getenv("TORCHELASTIC_RUN_ID");
    if (j && *j)
        snprintf(L->job, sizeof(L->job), "%s", j);
    else if (L->nnodes == 1)
        snprintf(L->job, sizeof(L->job), "run-%d-%lld", (int)getpid(),
                 (long long)time(NULL));
    snprintf(L->ns, sizeof(L->ns), "%s", L->job);
    if (L->nnodes == 1)
        return 0;
    if (connect_kv(L, host, port) < 0)
        return -1;
    if (!L->job[0])
        return agree_job_id(L);
    /* A given id may be reused: keys left by an earlier launch of it whose
     * node was killed outright must not fail or end this one.  Node 0
     * deletes them; a node that finds a failure key before that ignores it
     * until it is gone. */
    if (L->node_rank == 0) {
        clear_job_keys(L);
        return 0;
    }
    char key[200];
    job_key(L, key, sizeof(key), "failed");
    const char *kp = key;
    fccl_store_check(L->kv, &kp, 1, &L->stale_fail);
    return 0;
}

/* First failure of the job: publish "<status> <text>" for the others. */
static void publish_failure(struct launcher *L, int code, const char *what)
{
    if (!L->kv || L->remote_fail)
        return;
    char key[200], val[256];
    int64_t n = 0;
    job_key(L, key, sizeof(key), "nfail");
    if (fccl_store_add(L->kv, key, 1, &n) < 0 || n != 1)
        return;
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    int len = snprintf(val, sizeof(val), "%d %s on node %d (%s)", code, what,
                       L->node_rank, host);
    job_key(L, key, sizeof(key), "failed");
    fccl_store_set(L->kv, key, val, (size_t)len);
}

static void signal_all(struct launcher *L, int sig);

/* Another node's failure in this attempt ("<ns>/failed"): 1 when there is
 * one (remote_fail and fail_code set, the cause printed followed by
 * `then`), 0 when not or when the store was lost. */
static int other_node_failed(struct launcher *L, const char *then)
{
    char key[200];
    job_key(L, key, sizeof(key), "failed");
    const char *kp = key;
    int present = 0;
    if (fccl_store_check(L->kv, &kp, 1, &present) < 0) {
        /* The store is gone (its host died?): the ranks find out about
         * their peers themselves; stop asking. */
        fprintf(stderr, "fccl-run: node %d: lost the store (%s); no longer "
                        "watching the other nodes\n",
                L->node_rank, fccl_last_error());
        fccl_store_close(L->kv);
        L->kv = NULL;
        return 0;
    }
    if (present && L->stale_fail)
        return 0; /* an earlier launch's, until node 0 deletes it */
    L->stale_fail = 0;
    if (!present)
        return 0;
    void *v = NULL;
    size_t len = 0;
    if (fccl_store_get(L->kv, key, &v, &len, 5000) < 0)
        return 0;
    char *text = NULL;
    long code = strtol(v, &text, 10);
    L->remote_fail = 1;
    L->fail_code = code > 0 && code < 256 ? (int)code : 1;
    fprintf(stderr, "fccl-run: node %d: %s; %s\n", L->node_rank,
            text && *text ? text + 1 : "a rank failed", then);
    free(v);
    return 1;
}

/* Every WATCH_MS: another node's failure stops ours; node 0 removes the
 * launch key once every node has read it. */
static void watch(struct launcher *L)
{
    if (!L->kv || fccl_now_ns() < L->next_watch)
        return;
    L->next_watch = fccl_now_ns() + WATCH_MS * 1000000ull;
    if (L->launch_pending) {
        char key[200];
        int64_t seen = 0;
        ns_key(L->job, key, sizeof(key), "seen");
        if (fccl_store_add(L->kv, key, 0, &seen) >= 0 &&
            seen >= L->nnodes - 1) {
            fccl_store_delete(L->kv, LAUNCH_KEY, NULL);
            fccl_store_delete(L->kv, key, NULL);
            L->launch_pending = 0;
        }
    }
    if (L->remote_fail || L->fail_rank >= 0)
        return;
    if (other_node_failed(L, "stopping this node's ranks")) {
        signal_all(L, SIGTERM);
        L->kill_at = fccl_now_ns() + GRACE_MS * 1000000ull;
    }
}

/* The node that brings "exited" to M removes the job's launcher keys; the
 * node serving the store keeps it up until then (or END_WAIT_MS). */
static void finish_nodes(struct launcher *L)
{
    if (!L->kv)
        return;
    char key[200];
    int64_t n = 0;
    job_key(L, key, sizeof(key), "exited");
    if (L->launch_pending) {
        fccl_store_delete(L->kv, LAUNCH_KEY, NULL);
        L->launch_pending = 0;
    }
    if (fccl_store_add(L->kv, key, 1, &n) >= 0 && n >= L->nnodes) {
        clear_job_keys(L);
        return;
    }
    if (!L->server)
        return;
    uint64_t until = fccl_deadline_ms(END_WAIT_MS);
    while (fccl_now_ns() < until) {
        const char *kp = key;
        int present = 1;
        if (fccl_store_check(L->kv, &kp, 1, &present) < 0 || !present)
            return;
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* libfabric's shm provider names its segment "/dev/shm/<pid>:..."; a rank
 * that was killed leaves it behind.  The pid is our dead child's. */
static void remove_shm_files(pid_t pid)
{
    char pre[32];
    int plen = snprintf(pre, sizeof(pre), "%d:", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, pre, (size_t)plen) == 0 &&
            unlinkat(dirfd(d), e->d_name, 0) == 0)
            LOG_INFO("RUN", "removed /dev/shm/%s of rank pid %d", e->d_name,
                     (int)pid);
    closedir(d);
}

static void set_env_int(const char *name, int v)
{
    char buf[16];
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

/* In the child: wire up stdio, set the rank's variables, exec. */
static void exec_rank(struct launcher *L, int r, int out_fd, int err_fd)
{
    dup2(out_fd, STDOUT_FILENO);
    dup2(err_fd, STDERR_FILENO);
    /* A launcher killed outright takes its ranks along, so the other
     * nodes see this node's ranks go instead of a half-alive node. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != launcher_pid)
        _exit(128 + SIGKILL);
    int g = L->node_rank * L->n + r;
    set_env_int("RANK", g);
    set_env_int("LOCAL_RANK", r);
    set_env_int("ROLE_RANK", g); /* torchrun's: one role, "default" */
    /* msrun's names for the rank (MS_ROLE stays unset: with it, a
     * MindSpore program would look for msrun's scheduler at our store). */
    set_env_int("RANK_ID", g);
    set_env_int("MS_NODE_ID", g);
    struct rank_proc *p = &L->ranks[r];
    if (p->cpus && sched_setaffinity(0, p->cpus_size, p->cpus) < 0) {
        fprintf(stderr, "fccl-run: rank %d: cannot bind to its CPUs: %s\n", g,
                strerror(errno));
        _exit(127);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(L->argv[0], L->argv);
    fprintf(stderr, "fccl-run: cannot run %s: %s\n", L->argv[0],
            strerror(errno));
    _exit(127);
}

static int spawn_ranks(struct launcher *L)
{
    for (int r = 0; r < L->n; r++) {
        int po[2], pe[2];
        if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0) {
            perror("fccl-run: pipe");
            return -1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            perror("fccl-run: fork");
            return -1;
        }
        if (pid == 0)
            exec_rank(L, r, po[1], pe[1]);
        close(po[1]);
        close(pe[1]);
        struct rank_proc *p = &L->ranks[r];
        p->pid = pid;
        p->io[0].fd = po[0];
        p->io[1].fd = pe[0];
        fcntl(po[0], F_SETFL, O_NONBLOCK);
        fcntl(pe[0], F_SETFL, O_NONBLOCK);
        L->running++;
    }
    return 0;
}

static void emit(struct launcher *L, int r, struct stream *s, const char *line,
                 size_t len)
{
    if (L->prefix)
        fprintf(s->out, "[%d] ", L->node_rank * L->n + r);
    fwrite(line, 1, len, s->out);
    if (len == 0 || line[len - 1] != '\n')
        fputc('\n', s->out);
    fflush(s->out);
}

/* --log-dir: the rank's bytes as they came.  A failing write (disk full)
 * stops that copy with one message; the console output goes on. */
static void log_copy(struct launcher *L, int r, struct stream *s,
                     const char *p, size_t n)
{
    while (s->log_fd >= 0 && n > 0) {
        ssize_t w = write(s->log_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            fprintf(stderr, "fccl-run: rank %d: writing its %s log: %s; no "
                            "longer copying it\n",
                    L->node_rank * L->n + r, s->out == stdout ? "stdout"
                                                              : "stderr",
                    strerror(errno));
            close(s->log_fd);
            s->log_fd = -1;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Forward complete lines; a line longer than LINE_MAX_BYTES is cut. */
static void drain_stream(struct launcher *L, int r, struct stream *s)
{
    char chunk[16384];
    for (;;) {
        ssize_t n = read(s->fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                if (s->len)
                    emit(L, r, s, s->buf, s->len);
                s->len = 0;
                close(s->fd);
                s->fd = -1;
            }
            return;
        }
        log_copy(L, r, s, chunk, (size_t)n);
        char *nb = realloc(s->buf, s->len + (size_t)n);
        if (!nb)
            return;
        s->buf = nb;
        memcpy(s->buf + s->len, chunk, (size_t)n);
        s->len += (size_t)n;
        size_t start = 0;
        for (size_t i = 0; i < s->len; i++) {
            if (s->buf[i] != '\n' && i - start < LINE_MAX_BYTES)
                continue;
            emit(L, r, s, s->buf + start, i - start + 1);
            start = i + 1;
        }
        memmove(s->buf, s->buf + start, s->len - start);
        s->len -= start;
    }
}

static void signal_all(struct launcher *L, int sig)
{
    for (int r = 0; r < L->n; r++)
        if (L->ranks[r].pid > 0 && !L->ranks[r].done)
            kill(L->ranks[r].pid, sig);
}

static int status_code(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

static void reap(struct launcher *L)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int r = 0; r < L->n; r++) {
            struct rank_proc *p = &L->ranks[r];
            if (p->pid != pid)
                continue;
            p->done = 1;
            p->status = status;
            L->running--;
            remove_shm_files(pid);
            int code = status_code(status);
            /* After a remote failure or our own ^C, ranks ending is the
             * consequence, not a failure of their own. */
            if (code == 0 || L->fail_rank >= 0 || L->remote_fail ||
                L->signalled)
                break;
            L->fail_rank = r;
            L->fail_code = code;
            int g = L->node_rank * L->n + r;
            char what[128];
            if (WIFSIGNALED(status))
                snprintf(what, sizeof(what), "rank %d killed by signal %d (%s)",
                         g, WTERMSIG(status), strsignal(WTERMSIG(status)));
            else
                snprintf(what, sizeof(what), "rank %d exited with status %d",
                         g, code);
            fprintf(stderr, "fccl-run: %s%s\n", what,
                    L->running ? "; stopping the other ranks" : "");
            publish_failure(L, code, what);
            signal_all(L, SIGTERM);
            L->kill_at = fccl_now_ns() + GRACE_MS * 1000000ull;
        }
    }
}

static void handle_signals(struct launcher *L)
{
    unsigned char sigs[64];
    ssize_t n = read(sig_pipe[0], sigs, sizeof(sigs));
    for (ssize_t i = 0; i < n; i++) {
        if (sigs[i] == SIGCHLD)
            continue;
        if (L->signalled) {
            signal_all(L, SIGKILL); /* second ^C: no more waiting */
            continue;
        }
        L->signalled = sigs[i];
        signal_all(L, sigs[i]);
        L->kill_at = fccl_now_ns() + GRACE_MS * 1000000ull;
        char what[96];
        snprintf(what, sizeof(what), "fccl-run interrupted by signal %d (%s)",
                 sigs[i], strsignal(sigs[i]));
        publish_failure(L, 128 + sigs[i], what);
    }
    reap(L);
}

/* Wait up to 200 ms (less before a pending SIGKILL) and handle whatever is
 * ready.  Returns 0, or -1 if poll itself failed. */
static int poll_once(struct launcher *L, struct pollfd *pfd, int *owner)
{
    int k = 0;
    pfd[k] = (struct pollfd){.fd = sig_pipe[0], .events = POLLIN};
    owner[k++] = -1;
    for (int r = 0; r < L->n; r++)
        for (int s = 0; s < 2; s++)
            if (L->ranks[r].io[s].fd >= 0) {
                pfd[k] = (struct pollfd){.fd = L->ranks[r].io[s].fd,
                                         .events = POLLIN};
                owner[k++] = r * 2 + s;
            }
    int ms = 200;
    if (L->kill_at) {
        int left = fccl_ms_left(L->kill_at);
        ms = left < ms ? left : ms;
    }
    int nready = poll(pfd, (nfds_t)k, ms);
    if (nready < 0 && errno != EINTR)
        return -1;
    for (int i = 0; nready > 0 && i < k; i++) {
        if (!pfd[i].revents)
            continue;
        if (owner[i] < 0)
            handle_signals(L);
        else
            drain_stream(L, owner[i] / 2, &L->ranks[owner[i] / 2].io[owner[i] % 2]);
    }
    return 0;
}

static int open_streams(const struct launcher *L)
{
    int k = 0;
    for (int r = 0; r < L->n; r++)
        k += (L->ranks[r].io[0].fd >= 0) + (L->ranks[r].io[1].fd >= 0);
    return k;
}

static void run_loop(struct launcher *L)
{
    struct pollfd *pfd = calloc((size_t)L->n * 2 + 1, sizeof(*pfd));
    int *owner = calloc((size_t)L->n * 2 + 1, sizeof(int));
    uint64_t drain_until = 0;
    if (!pfd || !owner)
        goto out;
    for (;;) {
        reap(L);
        watch(L);
        if (L->kill_at && fccl_now_ns() >= L->kill_at) {
            signal_all(L, SIGKILL);
            L->kill_at = 0;
        }
        if (L->running == 0) {
            /* A rank's own children may keep its pipes open: give the
             * output a moment, not forever. */
            if (!drain_until)
                drain_until = fccl_now_ns() + 1000000000ull;
            if (open_streams(L) == 0 || fccl_now_ns() >= drain_until)
                break;
        }
        if (poll_once(L, pfd, owner) < 0)
            break;
    }
out:
    free(pfd);
    free(owner);
}

static void install_signals(void)
{
    if (pipe2(sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        perror("fccl-run: pipe");
        exit(1);
    }
    launcher_pid = getpid();
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Put libfccl-preload.so (preload/kallsyms.c) into the ranks' LD_PRELOAD,
 * unless FCCL_KEEP_KALLSYMS=1: it saves each rank libfabric's 0.1 s read
 * of /proc/kallsyms.  Looked for next to this program's lib/ folder (the
 * build tree and an installed prefix); missing, the ranks start without. */
static void preload_kallsyms_shim(void)
{
    const char *keep = getenv("FCCL_KEEP_KALLSYMS");
    if (keep && *keep && strcmp(keep, "0") != 0)
        return;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';
    static const char *const rel[] = {"/../lib/libfccl-preload.so",
                                      "/../lib/fccl/libfccl-preload.so"};
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        char path[4200];
        snprintf(path, sizeof(path), "%s%s", exe, rel[i]);
        char *real = realpath(path, NULL);
        if (!real)
            continue;
        const char *old = getenv("LD_PRELOAD");
        char val[8192];
        snprintf(val, sizeof(val), "%s%s%s", real, old && *old ? ":" : "",
                 old ? old : "");
        setenv("LD_PRELOAD", val, 1);
        free(real);
        return;
    }
}

/* The variables every rank of this node shares. */
static void set_job_env(struct launcher *L, const char *host, int port)
{
    if (etcd_is_addr(L->store_addr)) {
        /* etcd: fccl_init reads FCCL_STORE_ADDRS; MASTER_ADDR stays one
         * TCPStore host, which etcd is not. */
        setenv("FCCL_STORE_ADDRS", L->store_addr, 1);
        unsetenv("MASTER_ADDR");
        unsetenv("MASTER_PORT");
    } else {
        setenv("MASTER_ADDR", host, 1);
        set_env_int("MASTER_PORT", port);
        /* A list of front-ends: fccl ranks move to the next on failure;
         * torch's MASTER_ADDR stays the first. */
        if (L->store_addr && strchr(L->store_addr, ','))
            setenv("FCCL_STORE_ADDRS", L->store_addr, 1);
    }
    set_env_int("WORLD_SIZE", L->nnodes * L->n);
    set_env_int("LOCAL_WORLD_SIZE", L->n);
    set_env_int("GROUP_RANK", L->node_rank);
    /* The rest of what torchrun sets for its workers.  USE_AGENT_STORE
     * makes torch's env:// connect to the store at MASTER_PORT as a
     * client (under "/worker/attempt_<TORCHELASTIC_RESTART_COUNT>/")
     * instead of rank 0 binding that port, which our store holds. */
    set_env_int("GROUP_WORLD_SIZE", L->nnodes);
    set_env_int("ROLE_WORLD_SIZE", L->nnodes * L->n);
    setenv("ROLE_NAME", "default", 1);
    setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
    /* msrun's variables too, so programs written for msrun run as they
     * are (env:// reads torchrun's first; both say the same). */
    set_env_int("MS_WORKER_NUM", L->nnodes * L->n);
    set_env_int("RANK_SIZE", L->nnodes * L->n);
    if (!etcd_is_addr(L->store_addr)) {
        setenv("MS_SCHED_HOST", host, 1);
        set_env_int("MS_SCHED_PORT", port);
    }
    if (L->provider)
        setenv("FCCL_PROVIDER", L->provider, 1);
    /* One node: every rank is on this machine, so keep network providers
     * on loopback rather than whatever interface they would pick first.
     * Several: the provider must find the interface to the other hosts. */
    if (L->nnodes == 1)
        setenv("FCCL_NET_IFACE", "lo", 0);
    if (L->fake_nodes)
        setenv("FCCL_FAKE_NODES", L->fake_nodes, 1);
}

/* ---- --bind-to core ---- */

/* The first CPU of cpu's core (its lowest hardware-thread sibling), the
 * key that groups the threads of one core; the CPU itself when the
 * kernel does not say. */
static int core_key(int cpu)
{
    char path[128];
    snprintf(path, sizeof(path),
             "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
             cpu);
    FILE *f = fopen(path, "r");
    int first = cpu;
    if (f) {
        if (fscanf(f, "%d", &first) != 1)
            first = cpu;
        fclose(f);
    }
    return first;
}

/* "0-3,8,10-11" */
static void format_cpus(const cpu_set_t *set, size_t size, int ncpu,
                        char *out, size_t len)
{
    size_t o = 0;
    out[0] = '\0';
    for (int c = 0; c < ncpu && o < len; c++) {
        if (!CPU_ISSET_S(c, size, set))
            continue;
        int e = c;
        while (e + 1 < ncpu && CPU_ISSET_S(e + 1, size, set))
            e++;
        o += (size_t)snprintf(out + o, len - o, "%s%d", o ? "," : "", c);
        if (e > c && o < len)
            o += (size_t)snprintf(out + o, len - o, "-%d", e);
        c = e;
    }
}

/* This launcher's own CPU mask, sized for the machine. */
static cpu_set_t *own_cpus(size_t *size, int *ncpu)
{
    for (int n = 1024; n <= 1 << 18; n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        if (!set)
            return NULL;
        size_t sz = CPU_ALLOC_SIZE(n);
        if (sched_getaffinity(0, sz, set) == 0) {
            *size = sz;
            *ncpu = n;
            return set;
        }
        CPU_FREE(set);
        if (errno != EINVAL)
            return NULL;
    }
    return NULL;
}

/* Share the allowed CPUs out by core: cores in the order of their first
 * CPU; C cores, N ranks: rank r gets C/N consecutive cores from r*(C/N),
 * or core r mod C when N > C (wrap-around).  Prints one line per rank. */
static int plan_binding(struct launcher *L)
{
    size_t size = 0;
    int ncpu = 0, ncores = 0;
    cpu_set_t *own = own_cpus(&size, &ncpu);
    int *key = own ? calloc((size_t)ncpu, sizeof(int)) : NULL;
    int *core_first = own ? calloc((size_t)ncpu, sizeof(int)) : NULL;
    if (!own || !key || !core_first) {
        fprintf(stderr, "fccl-run: --bind-to core: cannot read this "
                        "process's CPUs: %s\n", strerror(errno));
        goto fail;
    }
    /* key[c]: index of c's core among the allowed cores, -1 if c is not
     * allowed. */
    for (int c = 0; c < ncpu; c++) {
        key[c] = -1;
        if (!CPU_ISSET_S(c, size, own))
            continue;
        int k = core_key(c), i = 0;
        while (i < ncores && core_first[i] != k)
            i++;
        if (i == ncores)
            core_first[ncores++] = k;
        key[c] = i;
    }
    int per = ncores >= L->n ? ncores / L->n : 1;
    for (int r = 0; r < L->n; r++) {
        struct rank_proc *p = &L->ranks[r];
        int lo = ncores >= L->n ? r * per : r % ncores;
        if (!(p->cpus = CPU_ALLOC(ncpu)))
            goto fail;
        p->cpus_size = size;
        CPU_ZERO_S(size, p->cpus);
        for (int c = 0; c < ncpu; c++)
            if (key[c] >= lo && key[c] < lo + per)
                CPU_SET_S(c, size, p->cpus);
        char text[512];
        format_cpus(p->cpus, size, ncpu, text, sizeof(text));
        fprintf(stderr, "fccl-run: rank %d bound to CPUs %s\n",
                L->node_rank * L->n + r, text);
    }
    CPU_FREE(own);
    free(key);
    free(core_first);
    return 0;
fail:
    if (own)
        CPU_FREE(own);
    free(key);
    free(core_first);
    return -1;
}

/* ---- --log-dir ---- */

/* mkdir -p */
static int make_dirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = c;
        if (!c)
            break;
    }
    struct stat st;
    if (stat(buf, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* DIR/attempt_<A>/rank<R>.stdout and .stderr, truncated. */
static int open_logs(struct launcher *L)
{
    if (!L->log_dir)
        return 0;
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s/attempt_%d", L->log_dir, L->attempt);
    if (make_dirs(dir) < 0) {
        fprintf(stderr, "fccl-run: --log-dir: cannot create %s: %s\n", dir,
                strerror(errno));
        return -1;
    }
    static const char *const what[2] = {"stdout", "stderr"};
    for (int r = 0; r < L->n; r++)
        for (int k = 0; k < 2; k++) {
            snprintf(path, sizeof(path), "%s/rank%d.%s", dir,
                     L->node_rank * L->n + r, what[k]);
            int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
                          0644);
            if (fd < 0) {
                fprintf(stderr, "fccl-run: --log-dir: cannot create %s: "
                                "%s\n", path, strerror(errno));
                return -1;
            }
            L->ranks[r].io[k].log_fd = fd;
        }
    return 0;
}

/* ---- attempts ---- */

/* Before each attempt: the ranks' slots and the attempt's failure state
 * are fresh; streams a rank's own children kept open are closed now. */
static void reset_attempt(struct launcher *L)
{
    for (int r = 0; r < L->n; r++) {
        struct rank_proc *p = &L->ranks[r];
        for (int k = 0; k < 2; k++) {
            struct stream *st = &p->io[k];
            if (st->fd >= 0)
                close(st->fd);
            if (st->log_fd >= 0)
                close(st->log_fd);
            free(st->buf);
            *st = (struct stream){.fd = -1, .out = k ? stderr : stdout,
                                  .log_fd = -1};
        }
        p->pid = 0;
        p->done = p->status = 0;
    }
    L->running = 0;
    L->fail_rank = -1;
    L->fail_code = 0;
    L->start_failed = 0;
    L->remote_fail = 0;
    L->kill_at = 0;
    L->next_watch = 0;
    if (L->attempt > 0) {
        snprintf(L->ns, sizeof(L->ns), "%s-r%d", L->job, L->attempt);
        L->stale_fail = 0; /* node 0 cleared the attempt's keys */
    }
    /* A new job id per attempt: the ranks' keys of a failed attempt stay
     * out of the next one's way. */
    setenv("FCCL_JOB_ID", L->ns, 1);
    setenv("TORCHELASTIC_RUN_ID", L->job, 1); /* torchrun's: every attempt */
    set_env_int("RESTART_COUNT", L->attempt);
    set_env_int("TORCHELASTIC_RESTART_COUNT", L->attempt);
    set_env_int("TORCHELASTIC_MAX_RESTARTS", L->max_restarts);
}

/* One attempt: start this node's ranks and run until they have ended. */
static void run_attempt(struct launcher *L)
{
    reset_attempt(L);
    if (open_logs(L) < 0 || spawn_ranks(L) < 0) {
        signal_all(L, SIGKILL);
        L->start_failed = 1;
        L->fail_code = 1;
        publish_failure(L, 1, "cannot start the ranks");
    }
    run_loop(L);
}

static int attempt_failed(const struct launcher *L)
{
    return L->fail_rank >= 0 || L->remote_fail || L->start_failed;
}

/* ---- restarts across nodes (see the top of the file) ---- */

/* Sleep up to ms; 1 when a signal came meanwhile (L->signalled set; being
 * the first failure, it stops the other nodes too). */
static int nap(struct launcher *L, int ms)
{
    struct pollfd p = {.fd = sig_pipe[0], .events = POLLIN};
    if (poll(&p, 1, ms) > 0) {
        unsigned char sigs[64];
        ssize_t n = read(sig_pipe[0], sigs, sizeof(sigs));
        for (ssize_t i = 0; i < n; i++)
            if (sigs[i] != SIGCHLD && !L->signalled) {
                L->signalled = sigs[i];
                char what[96];
                snprintf(what, sizeof(what), "fccl-run interrupted by signal "
                         "%d (%s)", sigs[i], strsignal(sigs[i]));
                publish_failure(L, 128 + sigs[i], what);
            }
    }
    return L->signalled != 0;
}

static int kv_count(struct launcher *L, const char *what, int64_t delta,
                    int64_t *n)
{
    char key[200];
    job_key(L, key, sizeof(key), what);
    return fccl_store_add(L->kv, key, delta, n);
}

/* With restarts across nodes, a node whose ranks all succeeded waits
 * until every node's did (0) or another node failed (1), FCCL_TIMEOUT at
 * most (0 then): so it can restart with them, and after the last attempt
 * exits with the job's status rather than its own ranks'. */
static int others_failed(struct launcher *L)
{
    int64_t n = 0;
    if (L->nnodes == 1 || !L->kv || L->max_restarts == 0 ||
        kv_count(L, "done", 1, &n) < 0 || n >= L->nnodes)
        return 0;
    uint64_t until = fccl_deadline_ms(fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS));
    while (fccl_now_ns() < until) {
        if (nap(L, WATCH_MS) || !L->kv)
            return 0;
        if (other_node_failed(L, "restarting with the others"))
            return 1;
        if (!L->kv || kv_count(L, "done", 0, &n) < 0 || n >= L->nnodes)
            return 0;
    }
    fprintf(stderr, "fccl-run: node %d: %lld of %d nodes done after "
                    "FCCL_TIMEOUT; leaving\n",
            L->node_rank, (long long)n, L->nnodes);
    return 0;
}

/* Node 0: "go" once the M-1 others stopped their ranks and none vetoed. */
static int decide_restart(struct launcher *L, int want)
{
    const char *verdict = "stop";
    uint64_t until = fccl_deadline_ms(RESTART_WAIT_MS);
    int64_t stopped = 0, veto = 0;
    while (want) {
        if (kv_count(L, "stopped", 0, &stopped) < 0 ||
            kv_count(L, "veto", 0, &veto) < 0 || veto > 0)
            break;
        if (stopped >= L->nnodes - 1) {
            verdict = "go";
            break;
        }
        if (fccl_now_ns() >= until) {
            fprintf(stderr, "fccl-run: node 0: %lld of %d other nodes "
                            "stopped their ranks within %d s; not "
                            "restarting\n",
                    (long long)stopped, L->nnodes - 1,
                    RESTART_WAIT_MS / 1000);
            break;
        }
        if (nap(L, NAP_MS))
            break;
    }
    char key[200];
    int go = verdict[0] == 'g';
    if (go) {
        /* The next attempt starts clean: keys an earlier launch of this
         * job id left; and every node has read the launch key by now. */
        char next[160];
        snprintf(next, sizeof(next), "%s-r%d", L->job, L->attempt + 1);
        clear_ns_keys(L, next);
        if (L->launch_pending) {
            ns_key(L->job, key, sizeof(key), "seen");
            fccl_store_delete(L->kv, LAUNCH_KEY, NULL);
            fccl_store_delete(L->kv, key, NULL);
            L->launch_pending = 0;
        }
    }
    job_key(L, key, sizeof(key), "restart");
    if (fccl_store_set(L->kv, key, verdict, strlen(verdict)) < 0)
        return 0;
    return go;
}

/* The other nodes: report, then wait for node 0's verdict. */
static int await_restart(struct launcher *L, int want)
{
    if (kv_count(L, want ? "stopped" : "veto", 1, NULL) < 0 || !want)
        return 0;
    char key[200];
    job_key(L, key, sizeof(key), "restart");
    const char *kp = key;
    uint64_t until = fccl_deadline_ms(RESTART_WAIT_MS + END_WAIT_MS);
    int present = 0;
    while (fccl_now_ns() < until) {
        if (nap(L, NAP_MS)) {
            kv_count(L, "veto", 1, NULL);
            return 0;
        }
        if (fccl_store_check(L->kv, &kp, 1, &present) < 0 || present)
            break;
    }
    void *v = NULL;
    size_t len = 0;
    if (!present || fccl_store_get(L->kv, key, &v, &len, KV_CALL_MS) < 0) {
        fprintf(stderr, "fccl-run: node %d: no word from node 0 about a "
                        "restart; not restarting\n", L->node_rank);
        return 0;
    }
    int go = len == 2 && memcmp(v, "go", 2) == 0;
    free(v);
    return go;
}

/* After a failed attempt: 1 when the ranks are to start again.  Across
 * nodes every node comes here (or vetoes) so they agree. */
static int agree_restart(struct launcher *L)
{
    if (L->max_restarts == 0)
        return 0;
    int want = L->attempt < L->max_restarts && !L->signalled &&
               !L->start_failed;
    if (L->nnodes == 1)
        return want;
    if (!L->kv)
        return 0;
    int go = L->node_rank == 0 ? decide_restart(L, want)
                               : await_restart(L, want);
    if (!go)
        return 0;
    /* The attempt's keys go with its last node. */
    int64_t n = 0;
    if (kv_count(L, "exited", 1, &n) >= 0 && n >= L->nnodes)
        clear_job_keys(L);
    return 1;
}

static void free_launcher(struct launcher *L)
{
    for (int r = 0; L->ranks && r < L->n; r++) {
        for (int k = 0; k < 2; k++) {
            free(L->ranks[r].io[k].buf);
            if (L->ranks[r].io[k].log_fd >= 0)
                close(L->ranks[r].io[k].log_fd);
        }
        if (L->ranks[r].cpus)
            CPU_FREE(L->ranks[r].cpus);
    }
    free(L->ranks);
    fccl_store_close(L->kv);
    fccl_store_close(L->lease); /* revokes the lease: the job's keys go */
    L->lease = NULL;
    fccl_server_free(L->server); /* stops it first */
}

int main(int argc, char **argv)
{
    struct launcher L = {.fail_rank = -1};
    launcher_pid = getpid();
    if (parse_args(&L, argc, argv) < 0)
        return 2;
    if (L.log_dir && make_dirs(L.log_dir) < 0) {
        fprintf(stderr, "fccl-run: --log-dir: cannot create %s: %s\n",
                L.log_dir, strerror(errno));
        return 1;
    }
    install_signals();
    preload_kallsyms_shim();
    char host[FCCL_HOST_MAX * 4];
    int port;
    if (start_store(&L, host, sizeof(host), &port) < 0 ||
        open_lease(&L) < 0)
        return 1;
    L.ranks = calloc((size_t)L.n, sizeof(*L.ranks));
    for (int r = 0; L.ranks && r < L.n; r++)
        L.ranks[r].io[0].fd = L.ranks[r].io[1].fd = L.ranks[r].io[0].log_fd =
            L.ranks[r].io[1].log_fd = -1;
    if (!L.ranks || (L.bind_cores && plan_binding(&L) < 0) ||
        pick_job_id(&L, host, port) < 0) {
        free_launcher(&L);
        return 1;
    }
    set_job_env(&L, host, port);
    for (;;) {
        run_attempt(&L);
        int failed = attempt_failed(&L);
        if (!failed && !L.signalled)
            failed = others_failed(&L);
        if ((!failed && !L.signalled) || !agree_restart(&L))
            break;
        L.attempt++;
        fprintf(stderr, "fccl-run: node %d: restart %d of %d: starting the "
                        "ranks again\n",
                L.node_rank, L.attempt, L.max_restarts);
    }
    finish_nodes(&L);
    free_launcher(&L);
    if (attempt_failed(&L))
        return L.fail_code ? L.fail_code : 1;
    if (L.signalled)
        return 128 + L.signalled;
    return 0;
}
