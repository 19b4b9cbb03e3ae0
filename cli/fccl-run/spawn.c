/*
 * fccl-run: spawning and signals: the signal pipe, the variables
 * every rank gets, fork and exec, signalling the ranks, and the /dev/shm
 * files a killed rank leaves.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

int fr_sig_pipe[2] = {-1, -1};
pid_t fr_launcher_pid;

static void on_signal(int sig)
{
    /* A rank between fork and exec still has this handler and shares the
     * pipe: a SIGTERM meant for it would read as the launcher's own. */
    if (getpid() != fr_launcher_pid) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    unsigned char b = (unsigned char)sig;
    int saved = errno;
    ssize_t w = write(fr_sig_pipe[1], &b, 1);
    (void)w;
    errno = saved;
}

/* libfabric's shm provider names its segment "/dev/shm/<pid>:..."; a rank
 * that was killed leaves it behind.  So may a rank killed while it set up
 * a group's shared segment ("/dev/shm/fccl-<pid>-<n>", coll/shm/seg.c,
 * whose name is removed once every member has mapped it).  The pid is our
 * dead child's. */
void fr_remove_shm_files(pid_t pid)
{
    char pre[32], seg[40];
    int plen = snprintf(pre, sizeof(pre), "%d:", (int)pid);
    int slen = snprintf(seg, sizeof(seg), "fccl-%d-", (int)pid);
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if ((strncmp(e->d_name, pre, (size_t)plen) == 0 ||
             strncmp(e->d_name, seg, (size_t)slen) == 0) &&
            unlinkat(dirfd(d), e->d_name, 0) == 0)
            LOG_INFO("RUN", "removed /dev/shm/%s of rank pid %d", e->d_name,
                     (int)pid);
    closedir(d);
}

void fr_set_env_int(const char *name, int v)
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
    if (getppid() != fr_launcher_pid)
        _exit(128 + SIGKILL);
    /* a session of its own, where the ranks fit the CPUs (bind.c); the
     * launcher passes on the signals a terminal sends its session */
    if (L->own_sessions)
        setsid();
    int g = L->node_rank * L->n + r;
    fr_set_env_int("RANK", g);
    fr_set_env_int("LOCAL_RANK", r);
    fr_set_env_int("ROLE_RANK", g); /* torchrun's: one role, "default" */
    /* msrun's names for the rank (MS_ROLE stays unset: with it, a
     * MindSpore program would look for msrun's scheduler at our store). */
    fr_set_env_int("RANK_ID", g);
    fr_set_env_int("MS_NODE_ID", g);
    struct rank_proc *p = &L->ranks[r];
    /* A respawned rank joins the survivors through their grow. */
    if (p->respawns > 0)
        fr_set_env_int("FCCL_REJOIN", p->respawns);
    else
        unsetenv("FCCL_REJOIN");
    if (p->cpus && sched_setaffinity(0, p->cpus_size, p->cpus) < 0) {
        fprintf(stderr, "fccl-run: rank %d: cannot bind to its CPUs: %s\n", g,
                strerror(errno));
        _exit(127);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execvp(L->argv[0], L->argv);
    fprintf(stderr, "fccl-run: cannot run %s: %s\n", L->argv[0],
            strerror(errno));
    _exit(127);
}

int fr_spawn_rank(struct launcher *L, int r)
{
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) < 0) {
        perror("fccl-run: pipe");
        return -1;
    }
    if (pipe2(pe, O_CLOEXEC) < 0) {
        perror("fccl-run: pipe");
        close(po[0]);
        close(po[1]);
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("fccl-run: fork");
        for (int k = 0; k < 2; k++) {
            close(po[k]);
            close(pe[k]);
        }
        return -1;
    }
    if (pid == 0)
        exec_rank(L, r, po[1], pe[1]);
    close(po[1]);
    close(pe[1]);
    struct rank_proc *p = &L->ranks[r];
    p->pid = pid;
    p->done = p->status = 0;
    p->io[0].fd = po[0];
    p->io[1].fd = pe[0];
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    fcntl(pe[0], F_SETFL, O_NONBLOCK);
    L->running++;
    return 0;
}

int fr_spawn_ranks(struct launcher *L)
{
    for (int r = 0; r < L->n; r++)
        if (fr_spawn_rank(L, r) < 0)
            return -1;
    return 0;
}

void fr_signal_all(struct launcher *L, int sig)
{
    for (int r = 0; r < L->n; r++)
        if (L->ranks[r].pid > 0 && !L->ranks[r].done)
            kill(L->ranks[r].pid, sig);
}

int fr_status_code(int status)
{
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

void fr_install_signals(void)
{
    if (pipe2(fr_sig_pipe, O_CLOEXEC | O_NONBLOCK) < 0) {
        perror("fccl-run: pipe");
        exit(1);
    }
    fr_launcher_pid = getpid();
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Put libfccl-preload.so (preload/kallsyms.c) into the ranks' LD_PRELOAD,
 * unless FCCL_KEEP_KALLSYMS=1: it saves each rank libfabric's 0.1 s read
 * of /proc/kallsyms.  Looked for next to this program's lib/ folder (the
 * build tree and an installed prefix); missing, the ranks start without. */
void fr_preload_kallsyms_shim(void)
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

/* A TCP port free on every local address now, or -1.  Rank 0 binds it a
 * moment later, as torchrun's agent has its workers do.  Taken below
 * Linux's ephemeral range (32768-60999), from 20000-28999, so that no
 * outgoing connection made meanwhile (the other ranks' retrying connects
 * to this very port among them) gets it as its local port. */
static int free_local_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    unsigned start = (unsigned)getpid() * 7919u + (unsigned)time(NULL);
    int port = -1;
    for (unsigned i = 0; i < 9000 && port < 0; i++) {
        struct sockaddr_in a = {.sin_family = AF_INET};
        int p = 20000 + (int)((start + i) % 9000);
        a.sin_port = htons((uint16_t)p);
        if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
            port = p;
    }
    close(fd);
    return port;
}

/* torch's env:// on one node: rank 0 hosts torch's own store at
 * MASTER_ADDR:MASTER_PORT and the others connect to it, as under torchrun
 * with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1.  Not the agent store
 * (TORCHELASTIC_USE_AGENT_STORE=True, every rank a client of ours): torch
 * 2.x makes that client with use_libuv=True whatever USE_LIBUV says, which
 * a torch built without libuv (Debian 13's 2.6) refuses.  USE_LIBUV=0 (if
 * unset) lets such a torch's rank 0 serve; 1.13 ignores it.  fccl's own
 * clients keep our store through FCCL_STORE_ADDRS and TCPSTORE_ADDR (read
 * before MASTER_*), and msrun's MS_SCHED_*.  Several nodes keep the agent
 * store (rank 0's address is not known to the others here). */
static void set_torch_store_env(const struct launcher *L, const char *host,
                                int port)
{
    char addr[FCCL_HOST_MAX * 4 + 16];
    fccl_addr_format(addr, sizeof(addr), host, port);
    int tport = L->nnodes == 1 ? free_local_port() : -1;
    if (tport < 0) {
        setenv("MASTER_ADDR", host, 1);
        fr_set_env_int("MASTER_PORT", port);
        setenv("TORCHELASTIC_USE_AGENT_STORE", "True", 1);
        return;
    }
    if (!L->store_addr || !strchr(L->store_addr, ','))
        setenv("FCCL_STORE_ADDRS", addr, 1);
    setenv("TCPSTORE_ADDR", addr, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    fr_set_env_int("MASTER_PORT", tport);
    unsetenv("TORCHELASTIC_USE_AGENT_STORE");
    setenv("USE_LIBUV", "0", 0);
}

/* The variables every rank of this node shares. */
void fr_set_job_env(struct launcher *L, const char *host, int port)
{
    if (etcd_is_addr(L->store_addr)) {
        /* etcd: fccl_init reads FCCL_STORE_ADDRS; MASTER_ADDR stays one
         * TCPStore host, which etcd is not. */
        setenv("FCCL_STORE_ADDRS", L->store_addr, 1);
        unsetenv("MASTER_ADDR");
        unsetenv("MASTER_PORT");
    } else {
        /* A list of front-ends: fccl ranks move to the next on failure;
         * torch's MASTER_ADDR stays the first. */
        if (L->store_addr && strchr(L->store_addr, ','))
            setenv("FCCL_STORE_ADDRS", L->store_addr, 1);
        set_torch_store_env(L, host, port);
    }
    fr_set_env_int("WORLD_SIZE", L->nnodes * L->n);
    fr_set_env_int("LOCAL_WORLD_SIZE", L->n);
    fr_set_env_int("GROUP_RANK", L->node_rank);
    /* The rest of what torchrun sets for its workers. */
    fr_set_env_int("GROUP_WORLD_SIZE", L->nnodes);
    fr_set_env_int("ROLE_WORLD_SIZE", L->nnodes * L->n);
    setenv("ROLE_NAME", "default", 1);
    /* msrun's variables too, so programs written for msrun run as they
     * are (env:// reads torchrun's first; both say the same). */
    fr_set_env_int("MS_WORKER_NUM", L->nnodes * L->n);
    fr_set_env_int("RANK_SIZE", L->nnodes * L->n);
    if (!etcd_is_addr(L->store_addr)) {
        setenv("MS_SCHED_HOST", host, 1);
        fr_set_env_int("MS_SCHED_PORT", port);
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
