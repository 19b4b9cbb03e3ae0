/*
 * fccl-run: attempts and restarts (--max-restarts); across nodes
 * node 0 decides and the others wait for its word (nodes.c has the keys).
 */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

/* Before each attempt: the ranks' slots and the attempt's failure state
 * are fresh; streams a rank's own children kept open are closed now. */
static void reset_attempt(struct launcher *L)
{
    for (int r = 0; r < L->n; r++) {
        struct rank_proc *p = &L->ranks[r];
        for (int k = 0; k < 2; k++) {
            struct stream *st = &p->io[k];
            if (st->fd >= 0)
                close(st->fd);
            if (st->log_fd >= 0)
                close(st->log_fd);
            free(st->buf);
            *st = (struct stream){.fd = -1, .out = k ? stderr : stdout,
                                  .log_fd = -1};
        }
        p->pid = 0;
        p->respawns = 0;
        p->done = p->status = 0;
    }
    L->running = 0;
    L->fail_rank = -1;
    L->fail_code = 0;
    L->start_failed = 0;
    L->remote_fail = 0;
    L->kill_at = 0;
    L->next_watch = 0;
    if (L->attempt > 0) {
        snprintf(L->ns, sizeof(L->ns), "%s-r%d", L->job, L->attempt);
        L->stale_fail = 0; /* node 0 cleared the attempt's keys */
    }
    /* A new job id per attempt: the ranks' keys of a failed attempt stay
     * out of the next one's way. */
    setenv("FCCL_JOB_ID", L->ns, 1);
    setenv("TORCHELASTIC_RUN_ID", L->job, 1); /* torchrun's: every attempt */
    fr_set_env_int("RESTART_COUNT", L->attempt);
    fr_set_env_int("TORCHELASTIC_RESTART_COUNT", L->attempt);
    fr_set_env_int("TORCHELASTIC_MAX_RESTARTS", L->max_restarts);
}

/* One attempt: start this node's ranks and run until they have ended. */
void fr_run_attempt(struct launcher *L)
{
    reset_attempt(L);
    if (fr_open_logs(L) < 0 || fr_spawn_ranks(L) < 0) {
        fr_signal_all(L, SIGKILL);
        L->start_failed = 1;
        L->fail_code = 1;
        fr_publish_failure(L, 1, "cannot start the ranks");
    }
    fr_run_loop(L);
}

int fr_attempt_failed(const struct launcher *L)
{
    return L->fail_rank >= 0 || L->remote_fail || L->start_failed;
}

/* ---- restarts across nodes (see the top of nodes.c) ---- */

/* Sleep up to ms; 1 when a signal came meanwhile (L->signalled set; being
 * the first failure, it stops the other nodes too). */
static int nap(struct launcher *L, int ms)
{
    struct pollfd p = {.fd = fr_sig_pipe[0], .events = POLLIN};
    if (poll(&p, 1, ms) > 0) {
        unsigned char sigs[64];
        ssize_t n = read(fr_sig_pipe[0], sigs, sizeof(sigs));
        for (ssize_t i = 0; i < n; i++)
            if (sigs[i] != SIGCHLD && !L->signalled) {
                L->signalled = sigs[i];
                char what[96];
                snprintf(what, sizeof(what), "fccl-run interrupted by signal "
                         "%d (%s)", sigs[i], strsignal(sigs[i]));
                fr_publish_failure(L, 128 + sigs[i], what);
            }
    }
    return L->signalled != 0;
}

static int kv_count(struct launcher *L, const char *what, int64_t delta,
                    int64_t *n)
{
    char key[200];
    fr_job_key(L, key, sizeof(key), what);
    return fccl_store_add(L->kv, key, delta, n);
}

/* With restarts across nodes, a node whose ranks all succeeded waits
 * until every node's did (0) or another node failed (1), FCCL_TIMEOUT at
 * most (0 then): so it can restart with them, and after the last attempt
 * exits with the job's status rather than its own ranks'. */
int fr_others_failed(struct launcher *L)
{
    int64_t n = 0;
    if (L->nnodes == 1 || !L->kv || L->max_restarts == 0 ||
        kv_count(L, "done", 1, &n) < 0 || n >= L->nnodes)
        return 0;
    uint64_t until = fccl_deadline_ms(fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS));
    while (fccl_now_ns() < until) {
        if (nap(L, WATCH_MS) || !L->kv)
            return 0;
        if (fr_other_node_failed(L, "restarting with the others"))
            return 1;
        if (!L->kv || kv_count(L, "done", 0, &n) < 0 || n >= L->nnodes)
            return 0;
    }
    fprintf(stderr, "fccl-run: node %d: %lld of %d nodes done after "
                    "FCCL_TIMEOUT; leaving\n",
            L->node_rank, (long long)n, L->nnodes);
    return 0;
}

/* Node 0: "go" once the M-1 others stopped their ranks and none vetoed. */
static int decide_restart(struct launcher *L, int want)
{
    const char *verdict = "stop";
    uint64_t until = fccl_deadline_ms(RESTART_WAIT_MS);
    int64_t stopped = 0, veto = 0;
    while (want) {
        if (kv_count(L, "stopped", 0, &stopped) < 0 ||
            kv_count(L, "veto", 0, &veto) < 0 || veto > 0)
            break;
        if (stopped >= L->nnodes - 1) {
            verdict = "go";
            break;
        }
        if (fccl_now_ns() >= until) {
            fprintf(stderr, "fccl-run: node 0: %lld of %d other nodes "
                            "stopped their ranks within %d s; not "
                            "restarting\n",
                    (long long)stopped, L->nnodes - 1,
                    RESTART_WAIT_MS / 1000);
            break;
        }
        if (nap(L, NAP_MS))
            break;
    }
    char key[200];
    int go = verdict[0] == 'g';
    if (go) {
        /* The next attempt starts clean: keys an earlier launch of this
         * job id left; and every node has read the launch key by now. */
        char next[160];
        snprintf(next, sizeof(next), "%s-r%d", L->job, L->attempt + 1);
        fr_clear_ns_keys(L, next);
        if (L->launch_pending) {
            fr_ns_key(L->job, key, sizeof(key), "seen");
            fccl_store_delete(L->kv, LAUNCH_KEY, NULL);
            fccl_store_delete(L->kv, key, NULL);
            L->launch_pending = 0;
        }
    }
    fr_job_key(L, key, sizeof(key), "restart");
    if (fccl_store_set(L->kv, key, verdict, strlen(verdict)) < 0)
        return 0;
    return go;
}

/* The other nodes: report, then wait for node 0's verdict. */
static int await_restart(struct launcher *L, int want)
{
    if (kv_count(L, want ? "stopped" : "veto", 1, NULL) < 0 || !want)
        return 0;
    char key[200];
    fr_job_key(L, key, sizeof(key), "restart");
    const char *kp = key;
    uint64_t until = fccl_deadline_ms(RESTART_WAIT_MS + END_WAIT_MS);
    int present = 0;
    while (fccl_now_ns() < until) {
        if (nap(L, NAP_MS)) {
            kv_count(L, "veto", 1, NULL);
            return 0;
        }
        if (fccl_store_check(L->kv, &kp, 1, &present) < 0 || present)
            break;
    }
    void *v = NULL;
    size_t len = 0;
    if (!present || fccl_store_get(L->kv, key, &v, &len, KV_CALL_MS) < 0) {
        fprintf(stderr, "fccl-run: node %d: no word from node 0 about a "
                        "restart; not restarting\n", L->node_rank);
        return 0;
    }
    int go = len == 2 && memcmp(v, "go", 2) == 0;
    free(v);
    return go;
}

/* After a failed attempt: 1 when the ranks are to start again.  Across
 * nodes every node comes here (or vetoes) so they agree. */
int fr_agree_restart(struct launcher *L)
{
    if (L->max_restarts == 0)
        return 0;
    int want = L->attempt < L->max_restarts && !L->signalled &&
               !L->start_failed;
    if (L->nnodes == 1)
        return want;
    if (!L->kv)
        return 0;
    int go = L->node_rank == 0 ? decide_restart(L, want)
                               : await_restart(L, want);
    if (!go)
        return 0;
    /* The attempt's keys go with its last node. */
    int64_t n = 0;
    if (kv_count(L, "exited", 1, &n) >= 0 && n >= L->nnodes)
        fr_clear_job_keys(L);
    return 1;
}
