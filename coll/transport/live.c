/*
 * Is a peer on this host still alive?  shm has no connection to break, so
 * a rank that dies leaves its peers waiting until their deadline (300 s by
 * default).  Each rank's name blob carries its pid and pid namespace; for
 * a local peer in our namespace we hold a pidfd, which becomes readable
 * when that process exits (and, unlike a pid, is never reused), opened
 * when the peer is resolved or first checked (not for all n at start).
 * A wait that has seen nothing complete for TP_LIVE_NS polls the pidfds
 * of the ranks it depends on.  Without pidfd_open (Linux < 5.3) the
 * deadline remains the only bound.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "tp_int.h"

static int pidfd_open_(int pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

static void live_open(struct fccl_tp *tp, struct tp_peer *p,
                      const void *blob, size_t len, int local)
{
    int pid = 0;
    uint64_t ns = 0;
    p->pidfd = -1;
    if (!local || tp_blob_proc(blob, len, &pid, &ns) != FCCL_OK)
        return;
    if (ns != tp->pidns || ns == 0 || pid == tp->pid)
        return;
    p->live_pid = pid;
    p->pidfd = pidfd_open_(pid);
    /* The pid is from its own record, so it existed: ESRCH means it has
     * exited and been reaped since (a reused pid we cannot tell apart; the
     * heartbeats and the deadline still bound that case). */
    if (p->pidfd < 0 && errno == ESRCH)
        p->live_gone = 1;
    else if (p->pidfd < 0)
        LOG_DEBUG("FABRIC", "pidfd_open(%d): %s; a dead peer is found only "
                  "by the deadline", (int)pid, strerror(errno));
}

void tp_live_add(struct fccl_tp *tp, struct tp_peer *p, const void *blob,
                 size_t len, int local)
{
    live_open(tp, p, blob, len, local);
    /* last, with release: a checker that sees it (live_ensure, without
     * the lock) also sees pidfd and live_gone */
    atomic_store_explicit(&p->live_tried, 1, memory_order_release);
}

/* Open rank r's liveness handle without resolving it (under tp->lock):
 * its blob comes from the lookup resolve.c uses too, which is the
 * transport's state, not resolve.c's, so this stays here, below it. */
static void watch_locked(struct fccl_tp *tp, int r)
{
    const void *blob = NULL;
    size_t len = 0;
    int local = 0;
    struct tp_peer *p = &tp->peers[r];
    if (r == tp->my_rank || atomic_load(&p->live_tried))
        return;
    if (tp->lookup(tp->lookup_arg, r, &blob, &len, &local) < 0)
        return; /* no record: the deadline still bounds the wait */
    tp_live_add(tp, p, blob, len, local);
}

/* Rank r's pidfd, opened on the first check that needs it: a job of n
 * ranks on one host opens only those it waits for, not n - 1 each at
 * start.  Under the lock, like resolve.c's (which opens it too). */
static void live_ensure(struct fccl_tp *tp, int r)
{
    if (atomic_load_explicit(&tp->peers[r].live_tried, memory_order_acquire))
        return;
    pthread_mutex_lock(&tp->lock);
    watch_locked(tp, r);
    pthread_mutex_unlock(&tp->lock);
}

void tp_live_close(struct tp_peer *p)
{
    if (p->pidfd >= 0)
        close(p->pidfd);
    if (p->old_pidfd >= 0)
        close(p->old_pidfd);
    p->pidfd = p->old_pidfd = -1;
}

/* First of the n ranks whose process has exited, or -1.  Opens the
 * pidfds it lacks (hence the cast: the table's handles, not the
 * transport's state, change). */
int tp_live_dead(const struct fccl_tp *ctp, const int *ranks, size_t n,
                 int skip_bye)
{
    struct fccl_tp *tp = (struct fccl_tp *)ctp;
    struct pollfd fds[64];
    int who[64];
    size_t k = 0;
    for (size_t i = 0; i <= n; i++) {
        if (k == 64 || (i == n && k)) {
            if (poll(fds, (nfds_t)k, 0) > 0)
                for (size_t j = 0; j < k; j++)
                    if (fds[j].revents)
                        return who[j];
            k = 0;
        }
        if (i == n)
            break;
        int r = ranks[i];
        if (r < 0 || r >= tp->nranks || r == tp->my_rank ||
            (skip_bye && atomic_load(&tp->peers[r].hb_bye)))
            continue;
        live_ensure(tp, r);
        if (tp->peers[r].live_gone)
            return r;
        if (tp->peers[r].pidfd < 0)
            continue;
        fds[k].fd = tp->peers[r].pidfd;
        fds[k].events = POLLIN;
        fds[k].revents = 0;
        who[k++] = r;
    }
    return -1;
}
