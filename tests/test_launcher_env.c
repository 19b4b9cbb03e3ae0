/*
 * env:// under the launchers clusters use (bootstrap/launcher_env.c):
 * made-up environments of torchrun, Slurm (srun), Open MPI and MPICH/PMI,
 * each parsed and compared with the values a person reads off them; the
 * Slurm node-list and tasks-per-node forms; and the errors (a clear one
 * naming MASTER_ADDR for mpirun without it).  The end-to-end starts are in
 * tests/multihost.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "fccl/core.h"
#include "lib/envcheck.h"

/* One case per environment, each read as a person would: alike on purpose. */
Test(launcher_env, nothing)
{
    const char *env[] = {"HOME=/root", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_NONE, -1, -1, -1, -1, "", -1, 0);
}

Test(launcher_env, torchrun)
{
    const char *env[] = {"RANK=5", "WORLD_SIZE=8", "LOCAL_RANK=1",
                         "LOCAL_WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1",
                         "MASTER_PORT=1234", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_TORCHRUN, 5, 8, 1, 4, "10.0.0.1", 1234, 0);
}

/* torchrun inside a Slurm allocation: torchrun's variables win. */
Test(launcher_env, torchrun_wins_over_slurm_and_mpi)
{
    const char *env[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2",
                         "SLURM_LOCALID=0", "SLURM_JOB_NODELIST=gpu[7-8]",
                         "OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
                         "RANK=6", "WORLD_SIZE=16", "LOCAL_RANK=2",
                         "LOCAL_WORLD_SIZE=8", "MASTER_ADDR=gpu7",
                         "MASTER_PORT=29400", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_TORCHRUN, 6, 16, 2, 8, "gpu7", 29400, 0);
}

/* srun with no MASTER_ADDR: store on the first node of the list, port
 * 29500, served by rank 0. */
Test(launcher_env, srun_without_master_addr)
{
    const char *env[] = {"SLURM_PROCID=5", "SLURM_NTASKS=8",
                         "SLURM_LOCALID=1", "SLURM_NODEID=2",
                         "SLURM_TASKS_PER_NODE=2(x4)",
                         "SLURM_JOB_NODELIST=node[01-04,07]", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_SLURM, 5, 8, 1, 2, "node01", 29500, 1);
}

Test(launcher_env, slurm_uneven_nodes_and_master_vars)
{
    /* 3+3+1 tasks on three nodes; we are the single task of node 2 */
    const char *env[] = {"SLURM_PROCID=6", "SLURM_NPROCS=7",
                         "SLURM_LOCALID=0", "SLURM_NODEID=2",
                         "SLURM_TASKS_PER_NODE=3(x2),1",
                         "SLURM_JOB_NODELIST=a[1-3]", "MASTER_ADDR=a9",
                         "MASTER_PORT=4000", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_SLURM, 6, 7, 0, 1, "a9", 4000, 1);
}

Test(launcher_env, slurm_step_values_first)
{
    const char *env[] = {"SLURM_PROCID=1", "SLURM_NTASKS=4",
                         "SLURM_LOCALID=1", "SLURM_NODEID=0",
                         "SLURM_STEP_TASKS_PER_NODE=2(x2)",
                         "SLURM_TASKS_PER_NODE=4",
                         "SLURM_STEP_NODELIST=c[5-6]",
                         "SLURM_JOB_NODELIST=c[1-6]", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_SLURM, 1, 4, 1, 2, "c5", 29500, 1);
}

Test(launcher_env, ntasks_per_node)
{
    const char *env[] = {"SLURM_PROCID=3", "SLURM_NTASKS=4",
                         "SLURM_LOCALID=1", "SLURM_NODEID=1",
                         "SLURM_NTASKS_PER_NODE=2", "SLURM_NODELIST=h1,h2",
                         NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_SLURM, 3, 4, 1, 2, "h1", 29500, 1);
}

Test(launcher_env, openmpi)
{
    const char *env[] = {"OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=6",
                         "OMPI_COMM_WORLD_LOCAL_RANK=0",
                         "OMPI_COMM_WORLD_LOCAL_SIZE=3",
                         "MASTER_ADDR=fd00::1", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_OPENMPI, 3, 6, 0, 3, "fd00::1", 29500, 1);
}

/* mpirun (hydra) inside a Slurm batch job: the batch step's SLURM_PROCID
 * does not match, so the MPI variables count. */
Test(launcher_env, mpich_inside_slurm_batch)
{
    const char *env[] = {"PMI_RANK=2", "PMI_SIZE=4", "MPI_LOCALRANKID=0",
                         "MPI_LOCALNRANKS=2", "SLURM_PROCID=0",
                         "SLURM_NTASKS=1", "SLURM_JOB_NODELIST=n[1-2]",
                         "MASTER_ADDR=n1", "MASTER_PORT=29600", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_MPICH, 2, 4, 0, 2, "n1", 29600, 1);
}

/* srun --mpi=pmi2 sets PMI_RANK equal to SLURM_PROCID: a Slurm start,
 * which finds the store host in the node list. */
Test(launcher_env, srun_pmi2_counts_as_slurm)
{
    const char *env[] = {"PMI_RANK=3", "PMI_SIZE=4", "SLURM_PROCID=3",
                         "SLURM_NTASKS=4", "SLURM_LOCALID=1",
                         "SLURM_NODEID=1", "SLURM_TASKS_PER_NODE=2(x2)",
                         "SLURM_JOB_NODELIST=n[1-2]", NULL};
    struct launcher_env e = ec_parse_ok(env, 1);
    ec_expect(&e, LENV_SLURM, 3, 4, 1, 2, "n1", 29500, 1);
}

Test(launcher_env, mpirun_without_master_addr_is_an_error)
{
    const char *ompi[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                          NULL};
    ec_parse_err(ompi, "MASTER_ADDR is not set");
    ec_parse_err(ompi, "OMPI_COMM_WORLD_RANK");
    const char *pmi[] = {"PMI_RANK=1", "PMI_SIZE=2", NULL};
    ec_parse_err(pmi, "MASTER_ADDR");
    ec_parse_err(pmi, "PMI_RANK");
    /* tcp:// brings its own address: ranks only */
    struct launcher_env e = ec_parse_ok(pmi, 0);
    ec_expect(&e, LENV_MPICH, 1, 2, -1, -1, "", 29500, 1);
}

Test(launcher_env, bad_values)
{
    const char *a[] = {"SLURM_PROCID=x", "SLURM_NTASKS=2", NULL};
    ec_parse_err(a, "SLURM_PROCID='x'");
    const char *b[] = {"SLURM_PROCID=4", "SLURM_NTASKS=4", "SLURM_NODELIST=h1",
                       NULL};
    ec_parse_err(b, "rank 4 is out of range for world size 4");
    const char *c[] = {"SLURM_PROCID=0", NULL};
    ec_parse_err(c, "SLURM_NTASKS");
    const char *d[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2",
                       "SLURM_JOB_NODELIST=node[01-", NULL};
    ec_parse_err(d, "node[01-");
    const char *f[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODEID=3",
                       "SLURM_TASKS_PER_NODE=1(x2),0", NULL};
    ec_parse_err(f, "node 3");
    const char *g[] = {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
                       "MASTER_ADDR=h", "MASTER_PORT=http", NULL};
    ec_parse_err(g, "MASTER_PORT='http'");
    const char *h[] = {"SLURM_PROCID=0", "SLURM_NTASKS=2", NULL};
    ec_parse_err(h, "SLURM_JOB_NODELIST");
}

Test(launcher_env, first_host_forms)
{
    static const struct { const char *list, *want; } ok[] = {
        {"node[01-04,07]", "node01"}, {"node[07,01-04]", "node07"},
        {"host1", "host1"},           {"a,b,c", "a"},
        {"gpu-a[3],gpu-b[1-2]", "gpu-a3"},
        {"rack[1-2]-n[3-4]", "rack1-n3"},
        {"n[0009-0010]", "n0009"},    {"x[5]", "x5"},
    };
    char out[64];
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        cr_assert_eq(launcher_env_first_host(ok[i].list, out, sizeof(out)),
                     FCCL_OK, "%s: %s", ok[i].list, fccl_last_error());
        cr_expect_str_eq(out, ok[i].want, "%s", ok[i].list);
    }
    static const char *bad[] = {"", "n[", "n[]", "n]1", ",a", "n[a-b]",
                                "n[1-2"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = launcher_env_first_host(bad[i], out, sizeof(out));
        cr_expect_eq(rc, FCCL_ERR_INVALID, "'%s' accepted as '%s'", bad[i],
                     out);
    }
    char tiny[4];
    cr_expect_eq(launcher_env_first_host("node1", tiny, sizeof(tiny)),
                 FCCL_ERR_INVALID);
}

Test(launcher_env, tasks_per_node_forms)
{
    static const struct { const char *spec; int node, want; } ok[] = {
        {"2(x3),1", 0, 2}, {"2(x3),1", 2, 2}, {"2(x3),1", 3, 1},
        {"4", 0, 4},       {"1,2,3", 1, 2},   {"1(x1),5(x2)", 2, 5},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int got = -1;
        cr_assert_eq(launcher_env_tasks_on_node(ok[i].spec, ok[i].node, &got),
                     FCCL_OK, "%s: %s", ok[i].spec, fccl_last_error());
        cr_expect_eq(got, ok[i].want, "%s node %d: %d want %d", ok[i].spec,
                     ok[i].node, got, ok[i].want);
    }
    static const char *bad[] = {"", "2(x", "2(x0)", "x", "2;3", "2(3)"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int got = -1;
        cr_expect_eq(launcher_env_tasks_on_node(bad[i], 0, &got),
                     FCCL_ERR_INVALID, "'%s' accepted as %d", bad[i], got);
    }
}
