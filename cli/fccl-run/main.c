/*
 * fccl-run: main, the order of its steps (run.h has the map).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"

static void free_launcher(struct launcher *L)
{
    for (int r = 0; L->ranks && r < L->n; r++) {
        for (int k = 0; k < 2; k++) {
            free(L->ranks[r].io[k].buf);
            if (L->ranks[r].io[k].log_fd >= 0)
                close(L->ranks[r].io[k].log_fd);
        }
        if (L->ranks[r].cpus)
            CPU_FREE(L->ranks[r].cpus);
    }
    free(L->ranks);
    fccl_store_close(L->kv);
    fccl_store_close(L->lease); /* revokes the lease: the job's keys go */
    L->lease = NULL;
    fccl_server_free(L->server); /* stops it first */
}

int main(int argc, char **argv)
{
    struct launcher L = {.fail_rank = -1};
    fr_launcher_pid = getpid();
    if (fr_parse_args(&L, argc, argv) < 0)
        return 2;
    if (L.log_dir && fr_make_dirs(L.log_dir) < 0) {
        fprintf(stderr, "fccl-run: --log-dir: cannot create %s: %s\n",
                L.log_dir, strerror(errno));
        return 1;
    }
    fr_install_signals();
    fr_preload_kallsyms_shim();
    char host[FCCL_HOST_MAX * 4];
    int port;
    if (fr_start_store(&L, host, sizeof(host), &port) < 0 ||
        fr_open_lease(&L) < 0)
        return 1;
    L.ranks = calloc((size_t)L.n, sizeof(*L.ranks));
    for (int r = 0; L.ranks && r < L.n; r++)
        L.ranks[r].io[0].fd = L.ranks[r].io[1].fd = L.ranks[r].io[0].log_fd =
            L.ranks[r].io[1].log_fd = -1;
    L.own_sessions = fr_own_sessions(L.n, L.nnodes);
    if (!L.ranks || (L.bind_cores && fr_plan_binding(&L) < 0) ||
        fr_pick_job_id(&L, host, port) < 0) {
        free_launcher(&L);
        return 1;
    }
    fr_set_job_env(&L, host, port);
    for (;;) {
        fr_run_attempt(&L);
        int failed = fr_attempt_failed(&L);
        if (!failed && !L.signalled)
            failed = fr_others_failed(&L);
        if ((!failed && !L.signalled) || !fr_agree_restart(&L))
            break;
        L.attempt++;
        fprintf(stderr, "fccl-run: node %d: restart %d of %d: starting the "
                        "ranks again\n",
                L.node_rank, L.attempt, L.max_restarts);
    }
    fr_finish_nodes(&L);
    free_launcher(&L);
    if (fr_attempt_failed(&L))
        return L.fail_code ? L.fail_code : 1;
    if (L.signalled)
        return 128 + L.signalled;
    return 0;
}
