/*
 * env:// under MindSpore's msrun and Ascend-style RANK_ID/RANK_SIZE
 * (bootstrap/launcher_env.c), from made-up environments: the variables
 * msrun gives each worker, the precedence (torchrun's variables first,
 * then msrun's, then MPI and Slurm), MASTER_* over MS_SCHED_*, and the
 * errors (scheduler process, disagreeing variables, no rank, no address).
 * The 2-rank job started with msrun's variables only is in test_launcher.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fccl/core.h"
#include "lib/envcheck.h"

/* What msrun --worker_num 8 --local_worker_num 4 --node_rank 1 gives its
 * second local worker: RANK is msrun's local index, not the rank. */
Test(launcher_msrun, msrun_worker)
{
    const char *env[] = {"MS_WORKER_NUM=8", "MS_SCHED_HOST=10.0.0.1",
                         "MS_SCHED_PORT=8118", "MS_TOPO_TIMEOUT=600",
                         "MS_ROLE=MS_WORKER", "MS_NODE_ID=5", "RANK_ID=5",
                         "RANK_SIZE=8", "RANK=1", "LOCAL_RANK=1",
                         "DEVICE_ID=1", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_MSRUN, 5, 8, 1, -1, "10.0.0.1", 8118, 1);
    cr_expect_str_eq(launcher_env_source_name(e.source), "msrun");
}

/* An Ascend script's RANK_ID and RANK_SIZE alone (the seeds' variables). */
Test(launcher_msrun, rank_id_and_rank_size)
{
    const char *env[] = {"RANK_ID=3", "RANK_SIZE=4", "MASTER_ADDR=h0", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_MSRUN, 3, 4, -1, -1, "h0", 29500, 1);
}

/* MS_NODE_ID without RANK_ID, MS_WORKER_NUM without RANK_SIZE. */
Test(launcher_msrun, node_id_and_worker_num_only)
{
    const char *env[] = {"MS_WORKER_NUM=2", "MS_NODE_ID=1",
                         "MS_SCHED_HOST=127.0.0.1", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_MSRUN, 1, 2, -1, -1, "127.0.0.1", 29500, 1);
}

Test(launcher_msrun, master_vars_win_over_sched_vars)
{
    const char *env[] = {"MS_WORKER_NUM=4", "RANK_ID=0", "MS_SCHED_HOST=a",
                         "MS_SCHED_PORT=1000", "MASTER_ADDR=b",
                         "MASTER_PORT=2000", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_MSRUN, 0, 4, -1, -1, "b", 2000, 1);
    /* Each MS_SCHED_* stands in for the MASTER_* variable that is unset. */
    const char *env2[] = {"MS_WORKER_NUM=4", "RANK_ID=0", "MS_SCHED_HOST=a",
                          "MS_SCHED_PORT=1000", "MASTER_ADDR=b", NULL};
    e = ec_parse_ok(env2, 1);
    ec_expect(&e, LENV_MSRUN, 0, 4, -1, -1, "b", 1000, 1);
    const char *env3[] = {"MS_WORKER_NUM=4", "RANK_ID=0", "MS_SCHED_HOST=a",
                          "MASTER_PORT=2000", NULL};
    e = ec_parse_ok(env3, 1);
    ec_expect(&e, LENV_MSRUN, 0, 4, -1, -1, "a", 2000, 1);
}

/* fccl-run sets torchrun's variables and msrun's: torchrun's win. */
Test(launcher_msrun, torchrun_variables_win)
{
    const char *env[] = {"RANK=6", "WORLD_SIZE=8", "LOCAL_RANK=2",
                         "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=m",
                         "MASTER_PORT=29400", "MS_WORKER_NUM=8",
                         "MS_NODE_ID=6", "RANK_ID=6", "RANK_SIZE=8",
                         "MS_SCHED_HOST=m", "MS_SCHED_PORT=29400", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_TORCHRUN, 6, 8, 2, 4, "m", 29400, 0);
    /* RANK without msrun's variables is still torchrun's. */
    const char *env2[] = {"RANK=1", "MASTER_ADDR=m", "RANK_ID=4", NULL};
    e = ec_parse_ok(env2, 1);
    cr_expect_eq(e.source, LENV_TORCHRUN);
    cr_expect_eq(e.rank, 1);
}

/* msrun inside a Slurm allocation or under mpirun: msrun's variables are
 * the ones meant for this process. */
Test(launcher_msrun, msrun_wins_over_mpi_and_slurm)
{
    const char *env[] = {"SLURM_PROCID=0", "SLURM_NTASKS=1",
                         "SLURM_JOB_NODELIST=gpu[1-2]",
                         "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1",
                         "PMI_RANK=0", "PMI_SIZE=1", "MS_WORKER_NUM=16",
                         "RANK_ID=9", "LOCAL_RANK=1", "MS_SCHED_HOST=gpu1",
                         "MS_SCHED_PORT=8118", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_MSRUN, 9, 16, 1, -1, "gpu1", 8118, 1);
}

/* RANK_ID alone says nothing about the job's size: not a launcher start. */
Test(launcher_msrun, rank_id_alone_is_no_start)
{
    const char *env[] = {"RANK_ID=2", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    cr_expect_eq(e.source, LENV_NONE);
}

Test(launcher_msrun, scheduler_and_other_roles_refused)
{
    const char *sched[] = {"MS_WORKER_NUM=2", "MS_ROLE=MS_SCHED",
                           "RANK_ID=0", "MS_SCHED_HOST=h", NULL};
    ec_parse_err(sched, "scheduler");
    ec_parse_err(sched, "MS_ROLE=MS_SCHED");
    const char *ps[] = {"MS_WORKER_NUM=2", "MS_ROLE=MS_PSERVER",
                        "RANK_ID=0", "MS_SCHED_HOST=h", NULL};
    ec_parse_err(ps, "MS_ROLE=MS_PSERVER");
}

Test(launcher_msrun, disagreeing_variables)
{
    const char *rank[] = {"MS_WORKER_NUM=4", "RANK_ID=1", "MS_NODE_ID=2",
                          "MS_SCHED_HOST=h", NULL};
    ec_parse_err(rank, "RANK_ID=1 but MS_NODE_ID=2");
    const char *size[] = {"MS_WORKER_NUM=4", "RANK_SIZE=8", "RANK_ID=1",
                          "MS_SCHED_HOST=h", NULL};
    ec_parse_err(size, "MS_WORKER_NUM=4 but RANK_SIZE=8");
}

/* msrun without --node_rank on several nodes leaves ranks unassigned. */
Test(launcher_msrun, no_rank)
{
    const char *env[] = {"MS_WORKER_NUM=8", "MS_ROLE=MS_WORKER",
                         "MS_SCHED_HOST=h", "MS_SCHED_PORT=8118",
                         "LOCAL_RANK=0", NULL};
    ec_parse_err(env, "--node_rank");
}

Test(launcher_msrun, no_address)
{
    const char *env[] = {"RANK_ID=0", "RANK_SIZE=2", NULL};
    ec_parse_err(env, "MS_SCHED_HOST");
    ec_parse_err(env, "MASTER_ADDR");
    /* Without env:// (an explicit address) that is fine. */
    struct launcher_env e = ec_parse_ok(env, 0);
    ec_expect(&e, LENV_MSRUN, 0, 2, -1, -1, "", 29500, 1);
}

Test(launcher_msrun, bad_values)
{
    const char *range[] = {"RANK_ID=8", "RANK_SIZE=8", "MASTER_ADDR=h", NULL};
    ec_parse_err(range, "out of range");
    const char *zero[] = {"RANK_ID=0", "RANK_SIZE=0", "MASTER_ADDR=h", NULL};
    ec_parse_err(zero, "world size is 0");
    const char *name[] = {"MS_WORKER_NUM=2", "MS_NODE_ID=worker-1",
                          "MS_SCHED_HOST=h", NULL};
    ec_parse_err(name, "MS_NODE_ID='worker-1'");
    const char *port[] = {"RANK_ID=0", "RANK_SIZE=2", "MS_SCHED_HOST=h",
                          "MS_SCHED_PORT=80x", NULL};
    ec_parse_err(port, "MS_SCHED_PORT");
    const char *local[] = {"RANK_ID=0", "RANK_SIZE=2", "MASTER_ADDR=h",
                           "LOCAL_RANK=x", NULL};
    ec_parse_err(local, "LOCAL_RANK");
}
