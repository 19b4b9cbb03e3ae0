/* Server processes for Criterion tests (srv.h). */
#include "srv.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

void srv_spawn(struct srv *s, const char *const *argv, int *outfd)
{
    int p[2];
    memset(s, 0, sizeof(*s));
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0, "pipe: %s", strerror(errno));
    snprintf(s->errpath, sizeof(s->errpath), "/tmp/fccl-srv-XXXXXX");
    int efd = mkostemp(s->errpath, O_CLOEXEC);
    cr_assert(efd >= 0, "mkstemp: %s", strerror(errno));
    char path[512];
    th_bin(argv[0], path, sizeof(path));
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) /* the test died before prctl */
            _exit(1);
        dup2(p[1], 1);
        dup2(efd, 2);
        execv(path, (char *const *)argv);
        fprintf(stderr, "exec %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    close(p[1]);
    close(efd);
    s->pid = pid;
    *outfd = p[0];
}

int srv_read_line(int fd, char *buf, size_t n, int ms)
{
    double end = th_now() + ms / 1000.0;
    size_t len = 0;
    while (len + 1 < n) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = th_ms_left(end);
        int r = left > 0 ? poll(&p, 1, left) : 0;
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t k = read(fd, buf + len, 1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        if (buf[len] == '\n')
            break;
        len++;
    }
    buf[len] = '\0';
    return (int)len;
}

void srv_start_argv(struct srv *s, const char *const *argv, double timeout_s)
{
    int outfd;
    srv_spawn(s, argv, &outfd);
    char line[256];
    int len = srv_read_line(outfd, line, sizeof(line),
                            (int)(timeout_s * 1000));
    const char *colon = len > 0 ? strrchr(line, ':') : NULL;
    if (len > 0 && strncmp(line, "listening on ", 13) == 0 && colon) {
        snprintf(s->addr, sizeof(s->addr), "%s", line + 13);
        s->port = atoi(colon + 1);
    }
    if (s->port <= 0 || s->port >= 65536) {
        srv_kill_hard(s);
        close(outfd);
        char *log = srv_log(s);
        fprintf(stderr, "%s: no 'listening on HOST:PORT' line within %.0f s "
                "(got '%s'); its log:\n%s\n", argv[0], timeout_s,
                len >= 0 ? line : "", log);
        free(log);
        unlink(s->errpath);
        cr_assert_fail("%s did not start", argv[0]);
    }
    s->out_fd = outfd;
}

int srv_run(const char *const *argv, int ms, char **out)
{
    char path[512];
    const char *args[64];
    size_t n = 0;
    args[n++] = th_bin(argv[0], path, sizeof(path));
    for (size_t i = 1; argv[i] && n < 63; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    struct th_cmd c = {.argv = args, .timeout_s = ms / 1000.0};
    struct th_result r;
    cr_assert_eq(th_run(&c, &r), 0, "cannot run %s", path);
    /* 124: stopped by the timeout; 128 + N: killed by signal N */
    cr_assert_lt(r.status, 124, "%s did not exit by itself (status %d): "
                 "%s%s", path, r.status, r.out, r.err);
    if (out) {
        *out = malloc(r.outlen + r.errlen + 1);
        cr_assert(*out);
        memcpy(*out, r.out, r.outlen);
        memcpy(*out + r.outlen, r.err, r.errlen + 1);
    }
    int status = r.status;
    th_result_free(&r);
    return status;
}

void srv_start_prog(struct srv *s, const char *const *prefix,
                    const char *const *extra)
{
    const char *argv[64];
    char server[512];
    int n = 0;
    for (int i = 0; prefix && prefix[i] && n < 40; i++)
        argv[n++] = prefix[i];
    th_bin("tcpstore-server", server, sizeof(server));
    argv[n++] = prefix ? server : "tcpstore-server";
    argv[n++] = "--port";
    argv[n++] = "0";
    for (int i = 0; extra && extra[i] && n < 62; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    srv_start_argv(s, argv, 30);
}

void srv_start(struct srv *s, const char *const *extra)
{
    srv_start_prog(s, NULL, extra);
}

void srv_start_local(struct srv *s, const char *const *extra)
{
    const char *argv[64] = {"--host", "127.0.0.1"};
    int n = 2;
    for (int i = 0; extra && extra[i] && n < 63; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    srv_start(s, argv);
}

int srv_wait(struct srv *s, int ms)
{
    if (s->pid <= 0)
        return -1;
    int st = th_reap(s->pid, ms);
    s->pid = 0;
    return st;
}

int srv_stop_ms(struct srv *s, int ms)
{
    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    int st = srv_wait(s, ms);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int srv_stop(struct srv *s) { return srv_stop_ms(s, 10000); }

void srv_finish(struct srv *s)
{
    int rc = srv_stop(s);
    srv_cleanup(s);
    cr_assert_eq(rc, 0, "server exit status %d", rc);
}

void srv_kill_hard(struct srv *s)
{
    if (s->pid <= 0)
        return;
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

char *srv_log(const struct srv *s)
{
    FILE *f = fopen(s->errpath, "r");
    cr_assert(f, "%s: %s", s->errpath, strerror(errno));
    char *buf = calloc(1, 1 << 20);
    cr_assert(buf);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

int srv_log_count(const struct srv *s, const char *needle)
{
    char *log = srv_log(s);
    int n = th_count(log, needle);
    free(log);
    return n;
}

int srv_log_wait(const struct srv *s, const char *needle, int ms)
{
    double end = th_now() + ms / 1000.0;
    for (;;) {
        char *log = srv_log(s);
        int found = strstr(log, needle) != NULL;
        free(log);
        if (found)
            return 1;
        if (th_ms_left(end) == 0)
            return 0;
        th_sleep_ms(10);
    }
}

void srv_cleanup(struct srv *s)
{
    srv_kill_hard(s);
    if (s->out_fd > 0)
        close(s->out_fd);
    s->out_fd = 0;
    if (s->errpath[0])
        unlink(s->errpath);
    s->errpath[0] = '\0';
}

void srv_client_opts(fccl_store_opts_t *o, char *addr, int port,
                     int64_t timeout_ms)
{
    snprintf(addr, TH_ADDR_LEN, "127.0.0.1:%d", port);
    fccl_store_opts_init(o);
    o->addr = addr;
    o->timeout_ms = timeout_ms;
}

fccl_store_t *srv_store_open(int port, int reconnect)
{
    return srv_store_open_as(port, reconnect, FCCL_DIALECT_MODERN, 10000);
}

fccl_store_t *srv_store_open_as(int port, int reconnect, fccl_dialect_t d,
                                int64_t timeout_ms)
{
    char addr[TH_ADDR_LEN];
    fccl_store_opts_t o;
    srv_client_opts(&o, addr, port, timeout_ms);
    o.reconnect = reconnect;
    o.dialect = d;
    fccl_store_t *st = NULL;
    cr_assert_eq(fccl_store_connect(&o, &st), FCCL_OK, "connect to %s: %s",
                 addr, fccl_last_error());
    return st;
}

void srv_expect_value(fccl_store_t *st, const char *key, const void *want,
                      size_t len)
{
    void *v = NULL;
    size_t n = 12345;
    int rc = fccl_store_get(st, key, &v, &n, 5000);
    cr_assert_eq(rc, FCCL_OK, "get %s: %s", key, fccl_last_error());
    cr_assert_eq(n, len, "get %s: %zu bytes, want %zu", key, n, len);
    cr_assert(memcmp(v, want, len) == 0, "get %s: wrong bytes", key);
    cr_assert_eq(((char *)v)[n], '\0', "get %s: value not NUL-terminated",
                 key);
    free(v);
}

void srv_expect_cstr(fccl_store_t *st, const char *key, const char *want)
{
    srv_expect_value(st, key, want, strlen(want));
}

int srv_tcpstore(int port, const char *dir, const char *env,
                 const char *args, char **out)
{
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "cd %s && %s %s/tcpstore --timeout 5 --addr 127.0.0.1:%d %s", dir,
             env, th_bin_dir(), port, args);
    return th_sh(cmd, 30, out);
}

void srv_need_openssl(void)
{
    if (system("openssl version >/dev/null 2>&1") != 0)
        cr_skip_test("no openssl program to make certificates");
}

void srv_make_cert(const char *cert, const char *key, const char *cn)
{
    srv_need_openssl();
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 " TH_NEWKEY " -nodes -days 1 -keyout %s "
             "-out %s -subj /CN=%s -addext subjectAltName=IP:127.0.0.1 "
             ">/dev/null 2>&1", key, cert, cn);
    cr_assert_eq(system(cmd), 0, "openssl req failed: %s", cmd);
    cr_assert_eq(chmod(key, 0600), 0, "chmod %s: %s", key, strerror(errno));
}

void srv_make_cert_in(const char *dir, const char *name, char *cert,
                      char *key, size_t len, const char *cn)
{
    snprintf(cert, len, "%s/%s.crt", dir, name);
    snprintf(key, len, "%s/%s.key", dir, name);
    srv_make_cert(cert, key, cn);
}

void srv_boot_check_job(int port, const char *env)
{
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "FCCL_PROVIDER=shm FCCL_TIMEOUT=60 %s %s/fccl-run -n 2 --store "
             "127.0.0.1:%d %s/boot_check host",
             env, th_bin_dir(), port, th_testbin_dir());
    int ex = th_sh(cmd, 100, &out);
    cr_assert_eq(ex, 0, "exit %d: %s", ex, out);
    free(out);
}

int srv_connect_nowhere(const char *scheme, int64_t timeout_ms, char *addr,
                        size_t len, double *took)
{
    snprintf(addr, len, "%s127.0.0.1:%d", scheme, th_free_port());
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = addr;
    o.timeout_ms = timeout_ms;
    fccl_store_t *s = (fccl_store_t *)1;
    double t0 = th_now();
    int rc = fccl_store_connect(&o, &s);
    *took = th_now() - t0;
    cr_assert_null(s, "no handle on failure");
    return rc;
}

fccl_store_t *srv_connect_to(const char *addr, fccl_dialect_t d, int raw,
                             int64_t timeout_ms)
{
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = addr;
    o.dialect = d;
    o.raw_keys = raw;
    o.timeout_ms = timeout_ms;
    fccl_store_t *s = NULL;
    int rc = fccl_store_connect(&o, &s);
    cr_assert_eq(rc, FCCL_OK, "connect %s: %s", addr, fccl_last_error());
    return s;
}
