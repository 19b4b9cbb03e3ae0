/*
 * fccl-run: the run loop of one attempt: ranks reaped (the first
 * failure stops the rest, unless --no-kill), the launcher's signals
 * forwarded, output polled.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

/* --respawn: start failed rank r again, alone, if it has respawns left
 * and the job is not stopping.  1 if it was started. */
static int respawn(struct launcher *L, int r, const char *what)
{
    struct rank_proc *p = &L->ranks[r];
    if (p->respawns >= L->respawn || L->signalled || L->remote_fail)
        return 0;
    for (int s = 0; s < 2; s++) /* the old process's last words first */
        fr_close_stream(L, r, &p->io[s]);
    p->respawns++;
    if (fr_spawn_rank(L, r) < 0) {
        p->respawns--;
        p->done = 1;
        return 0;
    }
    fprintf(stderr, "fccl-run: %s; respawning it (%d of %d, "
            "FCCL_REJOIN=%d); the other ranks go on\n", what, p->respawns,
            L->respawn, p->respawns);
    return 1;
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
            fr_remove_shm_files(pid);
            int code = fr_status_code(status);
            /* After a remote failure or our own ^C, ranks ending is the
             * consequence, not a failure of their own. */
            if (code == 0 || L->remote_fail || L->signalled)
                break;
            int g = L->node_rank * L->n + r;
            char what[128];
            if (WIFSIGNALED(status))
                snprintf(what, sizeof(what), "rank %d killed by signal %d (%s)",
                         g, WTERMSIG(status), strsignal(WTERMSIG(status)));
            else
                snprintf(what, sizeof(what), "rank %d exited with status %d",
                         g, code);
            if (L->respawn && respawn(L, r, what))
                break; /* not the job's failure: the rank goes on */
            if (L->fail_rank >= 0)
                break;
            L->fail_rank = r;
            L->fail_code = code;
            if (L->no_kill) { /* the others go on (a job that shrinks) */
                fprintf(stderr, "fccl-run: %s%s\n", what, L->running
                        ? "; the other ranks go on (--no-kill)" : "");
                break;
            }
            fprintf(stderr, "fccl-run: %s%s\n", what,
                    L->running ? "; stopping the other ranks" : "");
            fr_publish_failure(L, code, what);
            fr_signal_all(L, SIGTERM);
            L->kill_at = fccl_now_ns() + GRACE_MS * 1000000ull;
        }
    }
}

static void handle_signals(struct launcher *L)
{
    unsigned char sigs[64];
    ssize_t n = read(fr_sig_pipe[0], sigs, sizeof(sigs));
    for (ssize_t i = 0; i < n; i++) {
        if (sigs[i] == SIGCHLD)
            continue;
        if (L->signalled) {
            fr_signal_all(L, SIGKILL); /* second ^C: no more waiting */
            continue;
        }
        L->signalled = sigs[i];
        fr_signal_all(L, sigs[i]);
        L->kill_at = fccl_now_ns() + GRACE_MS * 1000000ull;
        char what[96];
        snprintf(what, sizeof(what), "fccl-run interrupted by signal %d (%s)",
                 sigs[i], strsignal(sigs[i]));
        fr_publish_failure(L, 128 + sigs[i], what);
    }
    reap(L);
}

/* Wait up to 200 ms (less before a pending SIGKILL) and handle whatever is
 * ready.  Returns 0, or -1 if poll itself failed. */
static int poll_once(struct launcher *L, struct pollfd *pfd, int *owner)
{
    int k = 0;
    pfd[k] = (struct pollfd){.fd = fr_sig_pipe[0], .events = POLLIN};
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
            fr_drain_stream(L, owner[i] / 2, &L->ranks[owner[i] / 2].io[owner[i] % 2]);
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

void fr_run_loop(struct launcher *L)
{
    struct pollfd *pfd = calloc((size_t)L->n * 2 + 1, sizeof(*pfd));
    int *owner = calloc((size_t)L->n * 2 + 1, sizeof(int));
    uint64_t drain_until = 0;
    if (!pfd || !owner)
        goto out;
    for (;;) {
        reap(L);
        fr_watch(L);
        if (L->kill_at && fccl_now_ns() >= L->kill_at) {
            fr_signal_all(L, SIGKILL);
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
