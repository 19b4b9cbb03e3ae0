/* Test helpers: run commands with a hard timeout and capture their output,
 * start tcpstore-server on a free port, find built programs.  Header-only
 * (static functions) so each test binary stays self-contained. */
#ifndef FCCL_TEST_PROC_UTIL_H
#define FCCL_TEST_PROC_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline const char *pu_dir(const char *env, const char *fallback)
{
    const char *d = getenv(env);
    return d && *d ? d : fallback;
}
#define PU_BIN pu_dir("FCCL_BIN", "build/bin")
#define PU_TESTBIN pu_dir("FCCL_TESTBIN", "build/tests")

static inline double pu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Run `cmd` through sh under `timeout`, stdout+stderr captured into *out
 * (malloc'd).  Returns the exit status (124 = timed out), -1 on error. */
static inline int pu_run(const char *cmd, int timeout_s, char **out)
{
    size_t len = strlen(cmd) + 64;
    char *full = malloc(len);
    snprintf(full, len, "timeout -k 5 %d sh -c '%s' 2>&1", timeout_s, cmd);
    FILE *p = popen(full, "r");
    free(full);
    if (!p)
        return -1;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, p)) > 0) {
        n += r;
        if (cap - n < 1024)
            buf = realloc(buf, cap *= 2);
    }
    buf[n] = '\0';
    int st = pclose(p);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A port that was free a moment ago (for "nobody listens here" cases). */
static inline int pu_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &l);
    close(fd);
    return ntohs(a.sin_port);
}

/* Start tcpstore-server on 127.0.0.1, port 0; returns its pid and port
 * (from the "listening on HOST:PORT" line), or -1. */
static inline pid_t pu_start_server(int *port, const char *extra_args)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char cmd[1024];
        snprintf(cmd, sizeof(cmd),
                 "exec %s/tcpstore-server --host 127.0.0.1 --port 0 %s",
                 PU_BIN, extra_args ? extra_args : "");
        dup2(pfd[1], STDOUT_FILENO);
        close(pfd[0]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    FILE *f = fdopen(pfd[0], "r");
    char line[256] = "";
    *port = -1;
    if (f && fgets(line, sizeof(line), f)) {
        char *c = strrchr(line, ':');
        if (strncmp(line, "listening on ", 13) == 0 && c)
            *port = atoi(c + 1);
    }
    if (f)
        fclose(f);
    if (*port <= 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return pid;
}

static inline int pu_stop(pid_t pid)
{
    int st = 0;
    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Count lines of `out` that contain `needle`. */
static inline int pu_count(const char *out, const char *needle)
{
    int n = 0;
    for (const char *p = out; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* Lowercase hex SHA-1 of s via the sha1sum program (independent of the
 * code under test). */
static inline void pu_sha1(const char *s, char hex[41])
{
    size_t len = strlen(s) + 32;
    char *cmd = malloc(len), *out = NULL;
    snprintf(cmd, len, "printf %%s \"%s\" | sha1sum", s);
    pu_run(cmd, 10, &out);
    free(cmd);
    memset(hex, 0, 41);
    if (out && strlen(out) >= 40)
        memcpy(hex, out, 40);
    free(out);
}

#endif
