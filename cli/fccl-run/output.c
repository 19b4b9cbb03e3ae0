/*
 * fccl-run: the ranks' output, each line prefixed with its rank, and
 * --log-dir's byte-for-byte copies.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run.h"

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
void fr_drain_stream(struct launcher *L, int r, struct stream *s)
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

void fr_close_stream(struct launcher *L, int r, struct stream *s)
{
    if (s->fd < 0)
        return;
    fr_drain_stream(L, r, s);
    if (s->fd < 0)
        return;
    if (s->len)
        emit(L, r, s, s->buf, s->len);
    s->len = 0;
    close(s->fd);
    s->fd = -1;
}

/* mkdir -p */
int fr_make_dirs(const char *path)
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
int fr_open_logs(struct launcher *L)
{
    if (!L->log_dir)
        return 0;
    char dir[4096], path[4200];
    snprintf(dir, sizeof(dir), "%s/attempt_%d", L->log_dir, L->attempt);
    if (fr_make_dirs(dir) < 0) {
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
