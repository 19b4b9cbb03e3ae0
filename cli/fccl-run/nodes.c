/*
 * fccl-run: nodes meeting through the store (nnodes > 1), under keys
 * "fccl-run/...":
 *  - job id: --job-id, else FCCL_JOB_ID, else TORCHELASTIC_RUN_ID; with
 *    none, node 0 makes a fresh one (host, pid, clock) and SETs it under
 *    "fccl-run/launch"; the other nodes GET it (waiting for it) and ADD 1
 *    to "fccl-run/<job>/seen"; once all M-1 have, node 0 deletes both.  So
 *    every node of one launch has the same id and the next launch on the
 *    store gets a new one.  (Launches without a job id on one store must
 *    not overlap in their start; give --job-id when they might.)
 *  - failure: the first node whose rank fails ADDs "fccl-run/<job>/nfail"
 *    and, being first, SETs "fccl-run/<job>/failed" to "<status> <text>";
 *    every node checks that key every 250 ms and then stops its ranks and
 *    exits with that status.  Launcher store calls time out after 5 s, so
 *    a node cut off from the store still exits.
 *  - end: each node ADDs "fccl-run/<job>/exited"; the node that brings it
 *    to M deletes the job's fccl-run keys; the node hosting the store
 *    waits (up to 8 s) for that before it stops serving.  With a given job
 *    id, node 0 also deletes them at its start: keys left by an earlier
 *    launch of that id whose node was killed outright.
 *  - restarts (--max-restarts, the same on every node): the keys above
 *    are per attempt, under the attempt's job id <ns> ("<job>", then
 *    "<job>-r<A>").  A node whose ranks all succeeded ADDs "<ns>/done"
 *    and waits (FCCL_TIMEOUT at most) until every node has (the job
 *    succeeded) or "<ns>/failed" appears (it joins the restart, or after
 *    the last attempt exits with that status).  After a failure, once
 *    its ranks are stopped, a node ADDs "<ns>/stopped" (or "<ns>/veto"
 *    when it will not restart: no restarts left, interrupted); node 0
 *    waits (30 s at most) for M-1 stopped and no veto, deletes the next
 *    attempt's keys and SETs "<ns>/restart" to "go", else to "stop"; the
 *    others wait for that key.  Each node then ADDs "<ns>/exited" and the
 *    last deletes the attempt's keys.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "run.h"

void fr_ns_key(const char *ns, char *out, size_t len, const char *what)
{
    snprintf(out, len, "fccl-run/%s/%s", ns, what);
}

/* A key of this attempt. */
void fr_job_key(const struct launcher *L, char *out, size_t len,
                    const char *what)
{
    fr_ns_key(L->ns, out, len, what);
}

static int connect_kv(struct launcher *L, const char *host, int port)
{
    char addr[FCCL_HOST_MAX * 4];
    if (etcd_is_addr(L->store_addr) || strchr(L->store_addr, ','))
        snprintf(addr, sizeof(addr), "%s", L->store_addr);
    else
        fccl_addr_format(addr, sizeof(addr), host, port);
    fccl_store_opts_t o;
    fccl_store_opts_init(&o);
    o.addr = addr;
    /* The ranks' TLS and token (FCCL_STORE_TLS_*, FCCL_STORE_TOKEN_FILE):
     * a store that requires them must let the launchers in too. */
    fccl_store_opts_env(&o, "FCCL_STORE");
    /* Wait for the store as long as ranks would (its node may start
     * later), then reopen with a short call timeout: a node cut off from
     * the store must not hang its exit on it. */
    int rc = fccl_store_connect(&o, &L->kv);
    if (rc >= 0) {
        fccl_store_close(L->kv);
        L->kv = NULL;
        o.timeout_ms = KV_CALL_MS;
        rc = fccl_store_connect(&o, &L->kv);
    }
    if (rc < 0) {
        fprintf(stderr, "fccl-run: node %d: cannot reach the store %s: %s\n",
                L->node_rank, addr, fccl_last_error());
        return -1;
    }
    return 0;
}

/* Node 0 makes a fresh id and publishes it; the others wait for it and say
 * they have seen it (node 0 then removes the launch key, see fr_watch()). */
static int agree_job_id(struct launcher *L)
{
    if (L->node_rank == 0) {
        char host[64] = "";
        gethostname(host, sizeof(host) - 1);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(L->job, sizeof(L->job), "run-%s-%d-%llx", host,
                 (int)getpid(),
                 (unsigned long long)ts.tv_sec * 1000000000ull +
                     (unsigned long long)ts.tv_nsec);
        if (fccl_store_set(L->kv, LAUNCH_KEY, L->job, strlen(L->job)) < 0)
            goto fail;
        L->launch_pending = 1;
        snprintf(L->ns, sizeof(L->ns), "%s", L->job);
        return 0;
    }
    void *v = NULL;
    size_t len = 0;
    if (fccl_store_get(L->kv, LAUNCH_KEY, &v, &len,
                       fccl_env_timeout_ms(FCCL_DEFAULT_TIMEOUT_MS)) < 0)
        goto fail;
    snprintf(L->job, sizeof(L->job), "%.*s", (int)len, (char *)v);
    snprintf(L->ns, sizeof(L->ns), "%s", L->job);
    free(v);
    char key[200];
    fr_job_key(L, key, sizeof(key), "seen");
    if (fccl_store_add(L->kv, key, 1, NULL) < 0)
        goto fail;
    return 0;
fail:
    fprintf(stderr, "fccl-run: node %d: agreeing on a job id through the "
                    "store: %s (or give --job-id)\n",
            L->node_rank, fccl_last_error());
    return -1;
}

static const char *const JOB_KEYS[] = {"failed",  "nfail", "seen",
                                       "exited",  "done",  "stopped",
                                       "veto",    "restart"};

void fr_clear_ns_keys(struct launcher *L, const char *ns)
{
    char key[200];
    for (size_t i = 0; i < sizeof(JOB_KEYS) / sizeof(JOB_KEYS[0]); i++) {
        fr_ns_key(ns, key, sizeof(key), JOB_KEYS[i]);
        fccl_store_delete(L->kv, key, NULL);
    }
}

void fr_clear_job_keys(struct launcher *L) { fr_clear_ns_keys(L, L->ns); }

int fr_pick_job_id(struct launcher *L, const char *host, int port)
{
    const char *j = L->job_opt;
    if (!j || !*j)
        j = getenv("FCCL_JOB_ID");
    if (!j || !*j)
        j = getenv("TORCHELASTIC_RUN_ID");
    if (j && *j)
        snprintf(L->job, sizeof(L->job), "%s", j);
    else if (L->nnodes == 1)
        snprintf(L->job, sizeof(L->job), "run-%d-%lld", (int)getpid(),
                 (long long)time(NULL));
    snprintf(L->ns, sizeof(L->ns), "%s", L->job);
    if (L->nnodes == 1)
        return 0;
    if (connect_kv(L, host, port) < 0)
        return -1;
    if (!L->job[0])
        return agree_job_id(L);
    /* A given id may be reused: keys left by an earlier launch of it whose
     * node was killed outright must not fail or end this one.  Node 0
     * deletes them; a node that finds a failure key before that ignores it
     * until it is gone. */
    if (L->node_rank == 0) {
        fr_clear_job_keys(L);
        return 0;
    }
    char key[200];
    fr_job_key(L, key, sizeof(key), "failed");
    const char *kp = key;
    fccl_store_check(L->kv, &kp, 1, &L->stale_fail);
    return 0;
}

/* First failure of the job: publish "<status> <text>" for the others. */
void fr_publish_failure(struct launcher *L, int code, const char *what)
{
    if (!L->kv || L->remote_fail)
        return;
    char key[200], val[256];
    int64_t n = 0;
    fr_job_key(L, key, sizeof(key), "nfail");
    if (fccl_store_add(L->kv, key, 1, &n) < 0 || n != 1)
        return;
    char host[64] = "";
    gethostname(host, sizeof(host) - 1);
    int len = snprintf(val, sizeof(val), "%d %s on node %d (%s)", code, what,
                       L->node_rank, host);
    fr_job_key(L, key, sizeof(key), "failed");
    fccl_store_set(L->kv, key, val, (size_t)len);
}

/* Another node's failure in this attempt ("<ns>/failed"): 1 when there is
 * one (remote_fail and fail_code set, the cause printed followed by
 * `then`), 0 when not or when the store was lost. */
int fr_other_node_failed(struct launcher *L, const char *then)
{
    char key[200];
    fr_job_key(L, key, sizeof(key), "failed");
    const char *kp = key;
    int present = 0;
    if (fccl_store_check(L->kv, &kp, 1, &present) < 0) {
        /* The store is gone (its host died?): the ranks find out about
         * their peers themselves; stop asking. */
        fprintf(stderr, "fccl-run: node %d: lost the store (%s); no longer "
                        "watching the other nodes\n",
                L->node_rank, fccl_last_error());
        fccl_store_close(L->kv);
        L->kv = NULL;
        return 0;
    }
    if (present && L->stale_fail)
        return 0; /* an earlier launch's, until node 0 deletes it */
    L->stale_fail = 0;
    if (!present)
        return 0;
    void *v = NULL;
    size_t len = 0;
    if (fccl_store_get(L->kv, key, &v, &len, 5000) < 0)
        return 0;
    char *text = NULL;
    long code = strtol(v, &text, 10);
    L->remote_fail = 1;
    L->fail_code = code > 0 && code < 256 ? (int)code : 1;
    fprintf(stderr, "fccl-run: node %d: %s; %s\n", L->node_rank,
            text && *text ? text + 1 : "a rank failed", then);
    free(v);
    return 1;
}

/* Every WATCH_MS: another node's failure stops ours; node 0 removes the
 * launch key once every node has read it. */
void fr_watch(struct launcher *L)
{
    if (!L->kv || fccl_now_ns() < L->next_watch)
        return;
    L->next_watch = fccl_now_ns() + WATCH_MS * 1000000ull;
    if (L->launch_pending) {
        char key[200];
        int64_t seen = 0;
        fr_ns_key(L->job, key, sizeof(key), "seen");
        if (fccl_store_add(L->kv, key, 0, &seen) >= 0 &&
            seen >= L->nnodes - 1) {
            fccl_store_delete(L->kv, LAUNCH_KEY, NULL);
            fccl_store_delete(L->kv, key, NULL);
            L->launch_pending = 0;
        }
    }
    if (L->remote_fail || L->fail_rank >= 0)
        return;
    if (fr_other_node_failed(L, "stopping this node's ranks")) {
        fr_signal_all(L, SIGTERM);
        L->kill_at = fccl_now_ns() + GRACE_MS * 1000000ull;
    }
}

/* The node that brings "exited" to M removes the job's launcher keys; the
 * node serving the store keeps it up until then (or END_WAIT_MS). */
void fr_finish_nodes(struct launcher *L)
{
    if (!L->kv)
        return;
    char key[200];
    int64_t n = 0;
    fr_job_key(L, key, sizeof(key), "exited");
    if (L->launch_pending) {
        fccl_store_delete(L->kv, LAUNCH_KEY, NULL);
        L->launch_pending = 0;
    }
    if (fccl_store_add(L->kv, key, 1, &n) >= 0 && n >= L->nnodes) {
        fr_clear_job_keys(L);
        return;
    }
    if (!L->server)
        return;
    uint64_t until = fccl_deadline_ms(END_WAIT_MS);
    while (fccl_now_ns() < until) {
        const char *kp = key;
        int present = 1;
        if (fccl_store_check(L->kv, &kp, 1, &present) < 0 || !present)
            return;
        struct timespec ts = {0, 50 * 1000000};
        nanosleep(&ts, NULL);
    }
}
