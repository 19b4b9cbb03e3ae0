/*
 * Helpers for the store client tests (test_client, test_cli,
 * test_pytorch_compat): start a server program as a subprocess on a free
 * port and read its "listening on HOST:PORT" line, run a program with
 * given stdin and environment and capture stdout/stderr separately, all
 * under hard deadlines.  Header-only (static functions).
 */
#ifndef FCCL_TEST_STORE_UTIL_H
#define FCCL_TEST_STORE_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double su_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void su_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* $FCCL_BIN/name, else build/bin/name.  Static buffer per call site use. */
static inline const char *su_bin(const char *name, char *buf, size_t len)
{
    const char *d = getenv("FCCL_BIN");
    snprintf(buf, len, "%s/%s", d && *d ? d : "build/bin", name);
    return buf;
}

/* A port that was free a moment ago. */
static inline int su_free_port(void)
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

struct su_server {
    pid_t pid;
    int out_fd;     /* its stdout, kept open so late writes never SIGPIPE */
    int port;
    char addr[300]; /* "HOST:PORT" from its listening line */
};

/* Start argv (argv[0] a path) and wait up to timeout_s for a stdout line
 * "listening on HOST:PORT".  Returns 0, or -1 with the server reaped. */
static inline int su_server_start(struct su_server *s, char *const argv[],
                                  double timeout_s)
{
    int pfd[2];
    memset(s, 0, sizeof(*s));
    s->out_fd = -1;
    if (pipe(pfd) < 0)
        return -1;
    pid_t parent = getpid();
    s->pid = fork();
    if (s->pid < 0)
        return -1;
    if (s->pid == 0) {
        /* A test killed by its timeout must not leave servers behind.
         * (Tied to the forking thread: start servers from the test's main
         * thread.) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        dup2(pfd[1], 1);
        close(pfd[0]);
        close(pfd[1]);
        execv(argv[0], argv);
        _exit(127);
    }
    close(pfd[1]);
    s->out_fd = pfd[0];
    char line[512];
    size_t n = 0;
    double end = su_now() + timeout_s;
    while (n < sizeof(line) - 1) {
        int ms = (int)((end - su_now()) * 1000);
        struct pollfd p = {.fd = s->out_fd, .events = POLLIN};
        if (ms <= 0 || poll(&p, 1, ms) <= 0)
            break;
        ssize_t r = read(s->out_fd, line + n, 1);
        if (r <= 0)
            break;
        if (line[n] == '\n') {
            line[n] = '\0';
            const char *a = strstr(line, "listening on ");
            if (!a)
                break;
            snprintf(s->addr, sizeof(s->addr), "%s", a + 13);
            const char *colon = strrchr(s->addr, ':');
            s->port = colon ? atoi(colon + 1) : 0;
            return s->port > 0 ? 0 : -1;
        }
        n++;
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    close(s->out_fd);
    s->pid = 0;
    return -1;
}

/* SIGTERM, then SIGKILL after 5 s.  Returns the wait status. */
static inline int su_server_stop(struct su_server *s)
{
    int st = 0;
    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    double end = su_now() + 5;
    while (waitpid(s->pid, &st, WNOHANG) == 0) {
        if (su_now() > end) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            break;
        }
        su_sleep_ms(5);
    }
    close(s->out_fd);
    s->pid = 0;
    return st;
}

/* Our tcpstore-server on 127.0.0.1, free port; extra args may be NULL. */
static inline int su_start_ours(struct su_server *s, const char *extra1,
                                const char *extra2)
{
    char bin[512];
    char *argv[] = {(char *)su_bin("tcpstore-server", bin, sizeof(bin)),
                    "--host", "127.0.0.1", "--port", "0",
                    (char *)extra1, (char *)extra2, NULL};
    return su_server_start(s, argv, 20);
}

/* Directory of the test sources (tests/py scripts): $FCCL_SRCDIR or ".". */
static inline const char *su_py(const char *script, char *buf, size_t len)
{
    const char *d = getenv("FCCL_SRCDIR");
    snprintf(buf, len, "%s/tests/py/%s", d && *d ? d : ".", script);
    return buf;
}

#define SU_PYTHON "/usr/bin/python3"

static inline int su_have_torch(void)
{
    static int have = -1;
    if (have < 0)
        have = system(SU_PYTHON " -c 'import torch' >/dev/null 2>&1") == 0;
    return have;
}

/* PyTorch 1.13's own TCPStore server (legacy dialect). */
static inline int su_start_pytorch(struct su_server *s)
{
    char py[512];
    char *argv[] = {SU_PYTHON, (char *)su_py("pt_server.py", py, sizeof(py)),
                    NULL};
    return su_server_start(s, argv, 60);
}

struct su_result {
    int status;     /* exit code; 128+sig if killed; 124 if timed out */
    char *out, *err;
    size_t outlen, errlen;
};

static inline void su_result_free(struct su_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

static inline void su_append(char **buf, size_t *len, size_t *cap,
                             const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        while (*len + n + 1 > *cap)
            *cap = *cap ? *cap * 2 : 4096;
        *buf = realloc(*buf, *cap);
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* Run argv with `env` entries ("NAME=VALUE", or "NAME=" ... "-NAME" to
 * unset) applied, feeding in[0..inlen) on stdin, capturing stdout and
 * stderr, killed after timeout_s (status 124).  Returns 0 or -1. */
static inline int su_run(char *const argv[], const char *const *env,
                         const void *in, size_t inlen, double timeout_s,
                         struct su_result *r)
{
    int pin[2], pout[2], perr[2];
    memset(r, 0, sizeof(*r));
    if (pipe(pin) < 0 || pipe(pout) < 0 || pipe(perr) < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        for (int i = 0; i < 2; i++) {
            close(pin[i]);
            close(pout[i]);
            close(perr[i]);
        }
        for (; env && *env; env++) {
            if ((*env)[0] == '-')
                unsetenv(*env + 1);
            else
                putenv((char *)*env);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    signal(SIGPIPE, SIG_IGN);
    fcntl(pin[1], F_SETFL, O_NONBLOCK);
    size_t sent = 0, ocap = 0, ecap = 0;
    int infd = pin[1];
    if (inlen == 0) {
        close(infd);
        infd = -1;
    }
    su_append(&r->out, &r->outlen, &ocap, "", 0);
    su_append(&r->err, &r->errlen, &ecap, "", 0);
    double end = su_now() + timeout_s;
    int open_fds = 2, timed_out = 0;
    while (open_fds > 0) {
        struct pollfd p[3] = {{.fd = pout[0], .events = POLLIN},
                              {.fd = perr[0], .events = POLLIN},
                              {.fd = infd, .events = POLLOUT}};
        int ms = (int)((end - su_now()) * 1000);
        if (ms <= 0) {
            timed_out = 1;
            break;
        }
        if (poll(p, 3, ms) < 0 && errno != EINTR)
            break;
        char buf[65536];
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            ssize_t n = read(p[i].fd, buf, sizeof(buf));
            if (n <= 0) {
                close(p[i].fd);
                *(i == 0 ? &pout[0] : &perr[0]) = -1;
                open_fds--;
            } else if (i == 0) {
                su_append(&r->out, &r->outlen, &ocap, buf, (size_t)n);
            } else {
                su_append(&r->err, &r->errlen, &ecap, buf, (size_t)n);
            }
        }
        if (infd >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t n = write(infd, (const char *)in + sent, inlen - sent);
            if (n > 0)
                sent += (size_t)n;
            if (n < 0 || sent == inlen) {
                close(infd);
                infd = -1;
            }
        }
    }
    if (infd >= 0)
        close(infd);
    if (pout[0] >= 0)
        close(pout[0]);
    if (perr[0] >= 0)
        close(perr[0]);
    int st = 0;
    if (timed_out)
        kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    r->status = timed_out            ? 124
                : WIFEXITED(st)      ? WEXITSTATUS(st)
                                     : 128 + WTERMSIG(st);
    return 0;
}

#endif
