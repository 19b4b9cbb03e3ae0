/*
 * fccl-run: launch an N-rank job on this machine, like torchrun or msrun.
 *
 *   fccl-run -n N [--store HOST:PORT] [options] PROGRAM ARGS...
 *
 * Starts a store in-process unless one is given, starts N ranks with the
 * torchrun variables, prefixes every output line with the rank, forwards
 * SIGINT/SIGTERM, and when a rank fails stops the rest and exits with that
 * rank's status (128 + N when it was killed by signal N).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fccl/core.h"
#include "log.h"
#include "net.h"
#include "server.h"

#define GRACE_MS 3000
#define LINE_MAX_BYTES 65536

struct stream {
    int fd;          /* read end, -1 when closed */
    FILE *out;       /* stdout or stderr */
    char *buf;
    size_t len;
};

struct rank_proc {
    pid_t pid;
    int done, status;
    struct stream io[2];
};

struct launcher {
    int n, prefix;
    const char *store_addr, *provider, *fake_nodes;
    char **argv;
    struct rank_proc *ranks;
    int running;
    int fail_rank, fail_code; /* first failure */
    int signalled;            /* signal the launcher got, 0 if none */
    uint64_t kill_at;         /* SIGKILL survivors at this time */
    struct store_server *server;
};

static int sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
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
            "  -n, --nproc N       number of ranks (required, >= 1)\n"
            "  --store HOST:PORT   use this store instead of starting one "
            "in-process\n"
            "  --provider NAME     set FCCL_PROVIDER for every rank "
            "(e.g. shm, \"tcp;ofi_rxm\")\n"
            "  --fake-nodes K      testing: pretend the ranks are spread over "
            "K hosts\n"
            "  --no-prefix         do not prefix output lines with \"[RANK] \"\n"
            "\nRanks also get FCCL_JOB_ID (unique per launch) and, unless set,\n"
            "FCCL_NET_IFACE=lo (all ranks are local).\n"
            "  -h, --help          this text\n\n"
            "Exit status: 0 when every rank exits 0; else the first failing "
            "rank's\nstatus (128 + N if killed by signal N); 2 on usage "
            "errors.\n");
}

static int parse_args(struct launcher *L, int argc, char **argv)
{
    static const struct option opts[] = {
        {"nproc", required_argument, NULL, 'n'},
        {"store", required_argument, NULL, 's'},
        {"provider", required_argument, NULL, 'p'},
        {"fake-nodes", required_argument, NULL, 'k'},
        {"no-prefix", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;
    L->prefix = 1;
    while ((c = getopt_long(argc, argv, "+n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 4096) {
                fprintf(stderr, "fccl-run: -n must be 1..4096, got '%s'\n",
                        optarg);
                return -1;
            }
            L->n = (int)v;
            break;
        }
        case 's': L->store_addr = optarg; break;
        case 'p': L->provider = optarg; break;
        case 'k': L->fake_nodes = optarg; break;
        case 'q': L->prefix = 0; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (L->n == 0 || optind >= argc) {
        fprintf(stderr, "fccl-run: need -n N and a PROGRAM\n");
        usage(stderr);
        return -1;
    }
    L->argv = argv + optind;
    return 0;
}

static int start_store(struct launcher *L, char *host, size_t hostlen,
                       int *port)
{
    if (L->store_addr)
        return fccl_addr_parse(L->store_addr, host, hostlen, port);
    struct store_server_config cfg;
    store_server_config_default(&cfg);
    snprintf(cfg.host, sizeof(cfg.host), "127.0.0.1");
    cfg.port = 0;
    int rc = store_server_create(&cfg, &L->server);
    if (rc >= 0)
        rc = store_server_start_thread(L->server);
    if (rc < 0) {
        fprintf(stderr, "fccl-run: cannot start the store: %s\n",
                fccl_last_error());
        return rc;
    }
    snprintf(host, hostlen, "127.0.0.1");
    *port = store_server_port(L->server);
    return 0;
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
    set_env_int("RANK", r);
    set_env_int("LOCAL_RANK", r);
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
        p->io[0] = (struct stream){.fd = po[0], .out = stdout};
        p->io[1] = (struct stream){.fd = pe[0], .out = stderr};
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
        fprintf(s->out, "[%d] ", r);
    fwrite(line, 1, len, s->out);
    if (len == 0 || line[len - 1] != '\n')
        fputc('\n', s->out);
    fflush(s->out);
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
            int code = status_code(status);
            if (code == 0 || L->fail_rank >= 0)
                break;
            L->fail_rank = r;
            L->fail_code = code;
            if (WIFSIGNALED(status))
                fprintf(stderr, "fccl-run: rank %d killed by signal %d (%s)",
                        r, WTERMSIG(status), strsignal(WTERMSIG(status)));
            else
                fprintf(stderr, "fccl-run: rank %d exited with status %d", r,
                        code);
            fprintf(stderr, "%s\n",
                    L->running ? "; stopping the other ranks" : "");
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

int main(int argc, char **argv)
{
    struct launcher L = {.fail_rank = -1};
    if (parse_args(&L, argc, argv) < 0)
        return 2;
    install_signals();
    preload_kallsyms_shim();
    char host[FCCL_HOST_MAX];
    int port;
    if (start_store(&L, host, sizeof(host), &port) < 0)
        return 1;
    setenv("MASTER_ADDR", host, 1);
    set_env_int("MASTER_PORT", port);
    set_env_int("WORLD_SIZE", L.n);
    set_env_int("LOCAL_WORLD_SIZE", L.n);
    if (!getenv("FCCL_JOB_ID")) {
        char job[64];
        snprintf(job, sizeof(job), "run-%d-%lld", (int)getpid(),
                 (long long)time(NULL));
        setenv("FCCL_JOB_ID", job, 1);
    }
    if (L.provider)
        setenv("FCCL_PROVIDER", L.provider, 1);
    /* Every rank is on this machine: keep network providers on loopback
     * rather than whatever interface they would pick first. */
    setenv("FCCL_NET_IFACE", "lo", 0);
    if (L.fake_nodes)
        setenv("FCCL_FAKE_NODES", L.fake_nodes, 1);
    L.ranks = calloc((size_t)L.n, sizeof(*L.ranks));
    if (!L.ranks)
        return 1;
    int rc = spawn_ranks(&L);
    if (rc < 0) {
        signal_all(&L, SIGKILL);
        L.fail_code = 1;
    }
    run_loop(&L);
    for (int r = 0; r < L.n; r++) {
        free(L.ranks[r].io[0].buf);
        free(L.ranks[r].io[1].buf);
    }
    free(L.ranks);
    if (L.server) {
        store_server_stop(L.server);
        store_server_free(L.server);
    }
    if (L.fail_rank >= 0 || rc < 0)
        return L.fail_code ? L.fail_code : 1;
    if (L.signalled)
        return 128 + L.signalled;
    return 0;
}
