/* Process-level test helpers (proc.h). */
#include "proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double th_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int th_ms_left(double end)
{
    double ms = (end - th_now()) * 1000.0;
    if (ms <= 0)
        return 0;
    return ms > 1e9 ? 1000000000 : (int)ms + 1;
}

void th_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static const char *env_dir(const char *name, const char *fallback)
{
    const char *d = getenv(name);
    return d && *d ? d : fallback;
}

const char *th_bin_dir(void) { return env_dir("FCCL_BIN", "build/bin"); }

const char *th_testbin_dir(void)
{
    return env_dir("FCCL_TESTBIN", "build/tests");
}

const char *th_bin(const char *name, char *buf, size_t len)
{
    if (strchr(name, '/'))
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "%s/%s", th_bin_dir(), name);
    return buf;
}

static int env_on(const char *name)
{
    const char *r = getenv(name);
    return r && *r && strcmp(r, "0") != 0;
}

int th_reduced(void)
{
    return env_on("FCCL_TEST_REDUCED") || env_on("FCCL_TEST_QUICK");
}

int th_quick(void) { return env_on("FCCL_TEST_QUICK"); }

const char *th_job_store_addr(void)
{
    static char addr[300];
    const char *t = getenv("TCPSTORE_ADDR");
    if (t && *t)
        snprintf(addr, sizeof(addr), "%s", t);
    else
        snprintf(addr, sizeof(addr), "%s:%s", getenv("MASTER_ADDR") ?: "",
                 getenv("MASTER_PORT") ?: "");
    return addr;
}

int th_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

int th_mkdtemp(char *dir, size_t len, const char *tag)
{
    if ((size_t)snprintf(dir, len, "/tmp/%s-XXXXXX", tag) >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(dir) ? 0 : -1;
}

int th_write_file(const char *path, const char *text, int mode)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    int bad = fputs(text, f) < 0;
    if (fclose(f) != 0 || bad)
        return -1;
    return chmod(path, (mode_t)mode);
}

static int rm_one(const char *path, const struct stat *st, int type,
                  struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    /* Keep going after a failure: remove as much as possible. */
    if ((type == FTW_DP ? rmdir(path) : unlink(path)) < 0)
        fprintf(stderr, "th_rmtree: %s: %s\n", path, strerror(errno));
    return 0;
}

int th_rmtree(const char *dir)
{
    if (!dir || !dir[0])
        return -1;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return access(dir, F_OK) == 0 ? -1 : 0;
}

int th_count(const char *hay, const char *needle)
{
    int n = 0;
    size_t len = strlen(needle);
    if (!hay || len == 0)
        return 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += len)
        n++;
    return n;
}

void th_line_at(const char *out, const char *want, size_t skip, char *buf,
                size_t len)
{
    const char *p = out ? strstr(out, want) : NULL;
    buf[0] = '\0';
    if (!p)
        return;
    p += skip;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    snprintf(buf, len, "%.*s", (int)(n < len ? n : len - 1), p);
}

int th_reap(pid_t pid, int ms)
{
    double end = th_now() + ms / 1000.0;
    int st;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return st;
        if (r < 0 && errno != EINTR)
            return -1;
        if (th_ms_left(end) == 0) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        th_sleep_ms(5);
    }
}

/* ---- th_run ---- */

/* A growing, always NUL-terminated byte buffer. */
struct grow {
    char *p;
    size_t len, cap;
};

static int grow_add(struct grow *g, const char *p, size_t n)
{
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (g->len + n + 1 > cap)
            cap *= 2;
        char *q = realloc(g->p, cap);
        if (!q)
            return -1;
        g->p = q;
        g->cap = cap;
    }
    memcpy(g->p + g->len, p, n);
    g->len += n;
    g->p[g->len] = '\0';
    return 0;
}

/* argv with `timeout -k 5 SECS` in front when c has a timeout (built
 * before the fork: the child of a threaded test should not allocate). */
static const char **run_argv(const struct th_cmd *c, char secs[32])
{
    size_t n = 0, k = 0;
    while (c->argv[n])
        n++;
    const char **argv = calloc(n + 5, sizeof(*argv));
    if (!argv)
        return NULL;
    if (c->timeout_s > 0) {
        snprintf(secs, 32, "%.3f", c->timeout_s);
        argv[k++] = "timeout";
        argv[k++] = "-k";
        argv[k++] = "5";
        argv[k++] = secs;
    }
    memcpy(argv + k, c->argv, (n + 1) * sizeof(*argv));
    return argv;
}

/* The child: stdin, stdout, stderr onto the pipes, the environment
 * changed, then exec. */
static void run_child(const struct th_cmd *c, const char **argv, int in,
                      int out, int err)
{
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    for (const char *const *e = c->env; e && *e; e++) {
        if ((*e)[0] == '-')
            unsetenv(*e + 1);
        else
            putenv((char *)*e);
    }
    execvp(argv[0], (char *const *)argv);
    fprintf(stderr, "th_run: exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int th_run(const struct th_cmd *c, struct th_result *r)
{
    int pin[2], pout[2], perr[2] = {-1, -1};
    char secs[32];
    memset(r, 0, sizeof(*r));
    const char **argv = run_argv(c, secs);
    if (!argv)
        return -1;
    if (pipe2(pin, O_CLOEXEC) < 0) {
        free(argv);
        return -1;
    }
    if (pipe2(pout, O_CLOEXEC) < 0 ||
        (!c->merge && pipe2(perr, O_CLOEXEC) < 0)) {
        close(pin[0]);
        close(pin[1]);
        free(argv);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(pin[1]);
        close(pout[0]);
        if (perr[0] >= 0)
            close(perr[0]);
        run_child(c, argv, pin[0], pout[1], c->merge ? pout[1] : perr[1]);
    }
    free(argv);
    close(pin[0]);
    close(pout[1]);
    if (perr[1] >= 0)
        close(perr[1]);
    if (pid < 0) {
        close(pin[1]);
        close(pout[0]);
        if (perr[0] >= 0)
            close(perr[0]);
        return -1;
    }
    /* A command that exits without reading all of stdin must not kill
     * the test with SIGPIPE; blocked in this thread only (and what was
     * raised consumed below), since ignoring it process-wide would hide
     * the SIGPIPE a test may be checking the library against. */
    sigset_t pipe_set, old_mask;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
    int infd = pin[1];
    if (c->inlen == 0)
        close_fd(&infd);
    else
        fcntl(infd, F_SETFL, O_NONBLOCK);
    struct grow out = {0}, err = {0};
    grow_add(&out, "", 0);
    grow_add(&err, "", 0);
    int rfd[2] = {pout[0], perr[0]};
    struct grow *cap[2] = {&out, &err};
    size_t sent = 0;
    /* `timeout` ends the command; this is the backstop for a `timeout`
     * that is itself stuck. */
    double end = c->timeout_s > 0 ? th_now() + c->timeout_s + 10 : 0;
    int killed = 0;
    while (rfd[0] >= 0 || rfd[1] >= 0) {
        struct pollfd p[3] = {{.fd = rfd[0], .events = POLLIN},
                              {.fd = rfd[1], .events = POLLIN},
                              {.fd = infd, .events = POLLOUT}};
        int ms = end > 0 ? th_ms_left(end) : -1;
        if (ms == 0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            killed = 1;
            break;
        }
        if (poll(p, 3, ms) < 0 && errno != EINTR)
            break;
        char buf[65536];
        for (int i = 0; i < 2; i++) {
            if (rfd[i] < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t n = read(rfd[i], buf, sizeof(buf));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                close_fd(&rfd[i]);
            else
                grow_add(cap[i], buf, (size_t)n);
        }
        if (infd >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = write(infd, (const char *)c->in + sent,
                              c->inlen - sent);
            if (n > 0)
                sent += (size_t)n;
            if ((n < 0 && errno != EAGAIN && errno != EINTR) ||
                sent == c->inlen)
                close_fd(&infd);
        }
    }
    close_fd(&infd);
    close_fd(&rfd[0]);
    close_fd(&rfd[1]);
    if (!sigismember(&old_mask, SIGPIPE)) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) > 0)
            ;
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    r->status = killed               ? 124
                : WIFEXITED(st)      ? WEXITSTATUS(st)
                                     : 128 + WTERMSIG(st);
    r->out = out.p;
    r->outlen = out.len;
    r->err = err.p;
    r->errlen = err.len;
    return 0;
}

void th_result_free(struct th_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

int th_sh(const char *cmd, int timeout_s, char **out)
{
    const char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    struct th_cmd c = {.argv = argv, .timeout_s = timeout_s, .merge = 1};
    struct th_result r;
    if (th_run(&c, &r) < 0) {
        if (out)
            *out = strdup("");
        return -1;
    }
    if (out)
        *out = r.out;
    else
        free(r.out);
    free(r.err);
    return r.status;
}

int th_job_on_store(int n, int port, const char *prog_args, int timeout_s,
                    char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "FCCL_PROVIDER=shm FCCL_TIMEOUT=60 "
             "%s/fccl-run -n %d --store 127.0.0.1:%d %s/%s", th_bin_dir(), n,
             port, th_testbin_dir(), prog_args);
    return th_sh(cmd, timeout_s, out);
}

pid_t th_spawn_logged(const char *const argv[], const char *log,
                      int own_group)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    if (own_group)
        setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    execvp(argv[0], (char *const *)argv);
    _exit(127);
}
