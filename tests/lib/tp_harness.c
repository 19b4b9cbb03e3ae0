/* N processes with a live transport each (tp_harness.h). */
#include "tp_harness.h"

#include <errno.h>
#include <glob.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <rdma/fabric.h>

#include "clock.h"
#include "net.h"
#include "proc.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

int tph_rank = -1;

static int tph_write(int fd, const void *buf, size_t len)
{
    return fccl_fd_write(fd, buf, len);
}

/* Read exactly len bytes, giving up at `end` (a th_now() time). */
static int tph_read(int fd, void *buf, size_t len, double end)
{
    return fccl_fd_read(fd, buf, len, fccl_deadline_ms(th_ms_left(end)));
}

/* Child side: open, publish, learn the others, add peers, run, close. */
static int tph_child(struct tp_harness *h, int rank, int wfd, int rfd,
                            tp_harness_fn fn, void *arg)
{
    struct tp_opts o = h->opts;
    o.provider = h->provider;
    if (h->rank_env && h->rank_env[rank])
        putenv((char *)h->rank_env[rank]);
    if (!o.net_iface && !getenv("FCCL_NET_IFACE"))
        o.net_iface = "lo";
    tp_env_defaults();
    struct fccl_tp *tp = NULL;
    double t0 = th_now();
    int rc = tp_open(&o, &tp);
    double ms = (th_now() - t0) * 1e3;
    size_t len = 0;
    if (rc == 0)
        rc = tp_local_name(tp, NULL, &len);
    if (rc < 0) {
        fprintf(stderr, "[rank %d] tp_open(%s): %s\n", rank,
                h->provider ? h->provider : "auto", fccl_last_error());
        return 1;
    }
    char *blob = malloc(len);
    uint32_t l32 = (uint32_t)len;
    char desc[128] = {0};
    snprintf(desc, sizeof(desc), "%s", tp_provider_desc(tp));
    if (!blob || tp_local_name(tp, blob, &len) < 0 ||
        tph_write(wfd, &l32, 4) || tph_write(wfd, &ms, sizeof(ms)) ||
        tph_write(wfd, desc, sizeof(desc)) || tph_write(wfd, blob, len))
        return 1;
    free(blob);
    int n = h->nranks;
    void *names[TPH_MAX_RANKS] = {0};
    size_t lens[TPH_MAX_RANKS];
    int node[TPH_MAX_RANKS];
    double dl = th_now() + h->timeout_ms / 1e3;
    for (int r = 0; r < n; r++) {
        if (tph_read(rfd, &l32, 4, dl) || !(names[r] = malloc(l32 ? l32 : 1)) ||
            tph_read(rfd, names[r], l32, dl))
            return 1;
        lens[r] = l32;
        node[r] = h->node_of ? h->node_of[r] : 0;
    }
    rc = tp_add_peers(tp, n, rank, (const void *const *)names, lens, node);
    for (int r = 0; r < n; r++)
        free(names[r]);
    if (rc < 0) {
        fprintf(stderr, "[rank %d] tp_add_peers: %s\n", rank,
                fccl_last_error());
        tp_close(tp);
        return 1;
    }
    /* Everyone has added its peers (shm resolves them there) before
     * anyone sends: the parent answers once all have said so. */
    char go = 1;
    if (tph_write(wfd, &go, 1) || tph_read(rfd, &go, 1, dl)) {
        fprintf(stderr, "[rank %d] no start signal (another rank failed)\n",
                rank);
        tp_close(tp);
        return 1;
    }
    rc = fn(tp, rank, n, arg);
    if (rc != 0)
        fprintf(stderr, "[rank %d] body failed (%d): %s\n", rank, rc,
                fccl_last_error());
    tp_close(tp);
    return rc != 0;
}

/* Parent side: gather blobs, broadcast them, then the start signal once
 * every child has added its peers.  -1 if a child died. */
static int tph_exchange(struct tp_harness *h, int *rfd, int *wfd,
                               double dl)
{
    int n = h->nranks, rc = 0;
    void *blob[TPH_MAX_RANKS] = {0};
    uint32_t len[TPH_MAX_RANKS];
    for (int r = 0; r < n && rc == 0; r++) {
        double ms;
        char desc[128];
        if (tph_read(rfd[r], &len[r], 4, dl) || tph_read(rfd[r], &ms, 8, dl) ||
            tph_read(rfd[r], desc, sizeof(desc), dl) ||
            !(blob[r] = malloc(len[r] ? len[r] : 1)) ||
            tph_read(rfd[r], blob[r], len[r], dl)) {
            fprintf(stderr, "tp_harness: rank %d sent no name (tp_open "
                    "failed or timed out)\n", r);
            rc = -1;
            break;
        }
        if (ms > h->open_ms_max)
            h->open_ms_max = ms;
        if (r == 0)
            memcpy(h->desc, desc, sizeof(h->desc));
    }
    for (int c = 0; c < n && rc == 0; c++)
        for (int r = 0; r < n && rc == 0; r++)
            if (tph_write(wfd[c], &len[r], 4) ||
                tph_write(wfd[c], blob[r], len[r]))
                rc = -1;
    for (int r = 0; r < n; r++)
        free(blob[r]);
    /* start together once every child has added its peers */
    char go = 1;
    for (int r = 0; r < n && rc == 0; r++)
        if (tph_read(rfd[r], &go, 1, dl)) {
            fprintf(stderr, "tp_harness: rank %d could not add its peers\n",
                    r);
            rc = -1;
        }
    for (int c = 0; c < n && rc == 0; c++)
        if (tph_write(wfd[c], &go, 1))
            rc = -1;
    return rc;
}

/* shm names its segment /dev/shm/<pid>:...; a rank that died without
 * tp_close leaves it behind. */
static void tph_unlink_shm(pid_t pid)
{
    char pat[64];
    glob_t g;
    snprintf(pat, sizeof(pat), "/dev/shm/%d:*", (int)pid);
    if (glob(pat, 0, NULL, &g) == 0)
        for (size_t i = 0; i < g.gl_pathc; i++)
            unlink(g.gl_pathv[i]);
    globfree(&g);
}

/* Reap every child by `dl`; SIGKILL the rest.  0 if all exited 0. */
static int tph_reap(int n, pid_t *pid, double dl)
{
    int left = n, bad = 0;
    int done[TPH_MAX_RANKS] = {0};
    while (left) {
        for (int r = 0; r < n; r++) {
            int st;
            if (done[r] || waitpid(pid[r], &st, WNOHANG) != pid[r])
                continue;
            done[r] = 1;
            left--;
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                bad++;
                if (WIFSIGNALED(st))
                    fprintf(stderr, "tp_harness: rank %d killed by signal "
                            "%d\n", r, WTERMSIG(st));
                else
                    fprintf(stderr, "tp_harness: rank %d exited %d\n", r,
                            WEXITSTATUS(st));
            }
        }
        if (!left)
            break;
        if (th_ms_left(dl) == 0) {
            for (int r = 0; r < n; r++)
                if (!done[r]) {
                    fprintf(stderr, "tp_harness: rank %d still running at "
                            "the deadline: killed\n", r);
                    kill(pid[r], SIGKILL);
                    waitpid(pid[r], NULL, 0);
                    done[r] = 1;
                    bad++;
                }
            break;
        }
        th_sleep_ms(2);
    }
    for (int r = 0; r < n; r++)
        tph_unlink_shm(pid[r]);
    return bad ? -1 : 0;
}

int tp_harness_run(struct tp_harness *h, tp_harness_fn fn,
                                 void *arg)
{
    int n = h->nranks;
    if (n < 1 || n > TPH_MAX_RANKS)
        return -1;
    if (h->timeout_ms <= 0)
        h->timeout_ms = 60000;
    double dl = th_now() + h->timeout_ms / 1e3;
    pid_t pid[TPH_MAX_RANKS];
    int up[TPH_MAX_RANKS][2], down[TPH_MAX_RANKS][2];
    h->open_ms_max = 0;
    h->desc[0] = '\0';
    fflush(NULL);
    pid_t parent = getpid();
    for (int r = 0; r < n; r++) {
        if (pipe(up[r]) || pipe(down[r]))
            return -1;
        pid[r] = fork();
        if (pid[r] < 0)
            return -1;
        if (pid[r] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            alarm((unsigned)(h->timeout_ms / 1000 + 10));
            for (int k = 0; k <= r; k++) {
                if (k != r) {
                    close(up[k][0]);
                    close(down[k][1]);
                }
            }
            close(up[r][0]);
            close(down[r][1]);
            tph_rank = r;
            int rc = tph_child(h, r, up[r][1], down[r][0], fn, arg);
            fflush(NULL);
#if defined(__SANITIZE_ADDRESS__)
            if (__lsan_do_recoverable_leak_check())
                rc = 1;
#endif
            _exit(rc);
        }
        close(up[r][1]);
        close(down[r][0]);
    }
    int rfd[TPH_MAX_RANKS], wfd[TPH_MAX_RANKS];
    for (int r = 0; r < n; r++) {
        rfd[r] = up[r][0];
        wfd[r] = down[r][1];
    }
    int rc = tph_exchange(h, rfd, wfd, dl);
    for (int r = 0; r < n; r++) {
        close(rfd[r]);
        close(wfd[r]);
    }
    /* A failed exchange leaves children blocked on their pipe: they see
     * EOF now and exit; reap them without waiting for the deadline. */
    int rrc = tph_reap(n, pid, rc ? th_now() + 2.0 : dl);
    return rc || rrc ? -1 : 0;
}


const char *tp_net_provider(void)
{
    static const char *name;
    if (name)
        return name;
    struct fi_info *hints = fi_allocinfo(), *list = NULL;
    int have = 0;
    if (hints) {
        hints->fabric_attr->prov_name = strdup("net");
        hints->ep_attr->type = FI_EP_RDM;
        have = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, hints, &list) == 0;
        fi_freeinfo(list);
        fi_freeinfo(hints);
    }
    name = have ? "net" : "tcp";
    return name;
}
