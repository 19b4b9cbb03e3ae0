/*
 * Internal: what the launcher that started this process says about the job,
 * so env:// works under srun and mpirun without a wrapper script.
 *
 * Sources, first match wins:
 *   torchrun / fccl-run   WORLD_SIZE set, or RANK set without MS_WORKER_NUM
 *                         and RANK_SIZE: RANK, WORLD_SIZE, LOCAL_RANK,
 *                         LOCAL_WORLD_SIZE
 *   MindSpore msrun, and  MS_WORKER_NUM or RANK_SIZE set: rank RANK_ID,
 *   Ascend rank tables    else MS_NODE_ID; size MS_WORKER_NUM, else
 *                         RANK_SIZE (both given must agree); LOCAL_RANK.
 *                         msrun's RANK is its local index, so RANK alone
 *                         does not make a torchrun start then.  A process
 *                         with MS_ROLE other than MS_WORKER (msrun's
 *                         scheduler, MS_SCHED) is refused: it is no rank,
 *                         and rank 0 serves the store instead.
 *   Open MPI (mpirun)     OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE
 *   MPICH / PMI (hydra)   PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
 *                         MPI_LOCALNRANKS
 *   Slurm (srun)          SLURM_PROCID, SLURM_NTASKS (or SLURM_NPROCS),
 *                         SLURM_LOCALID, tasks on this node from
 *                         SLURM_STEP_TASKS_PER_NODE, SLURM_NTASKS_PER_NODE
 *                         or SLURM_TASKS_PER_NODE ("2(x3),1") at
 *                         SLURM_NODEID
 * An MPI source whose rank and size equal Slurm's is srun starting an MPI
 * program (srun --mpi=pmi2 sets PMI_RANK too): that counts as Slurm.
 *
 * The store: MASTER_ADDR and MASTER_PORT (default 29500) always win.
 * Under msrun, MS_SCHED_HOST and MS_SCHED_PORT stand in for whichever of
 * them is unset.  Without MASTER_ADDR, Slurm's store host is the first host of
 * SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, else SLURM_NODELIST
 * (compressed forms like "node[01-04,07]" understood), where task 0 runs
 * under the default block distribution; an MPI start without MASTER_ADDR
 * (or an msrun start without MS_SCHED_HOST) is an error naming the
 * variable.  Under every launcher but torchrun,
 * rank 0 serves the store in-process (as PyTorch's env:// does).
 */
#ifndef FCCL_BOOT_LAUNCHER_ENV_H
#define FCCL_BOOT_LAUNCHER_ENV_H

#include <stddef.h>

#define LENV_HOST_MAX 256
#define LENV_DEFAULT_PORT 29500

enum lenv_source {
    LENV_NONE = 0,  /* nothing recognised */
    LENV_TORCHRUN,  /* torchrun, fccl-run, or variables set by hand */
    LENV_MSRUN,     /* MindSpore msrun, or Ascend's RANK_ID/RANK_SIZE */
    LENV_OPENMPI,
    LENV_MPICH,
    LENV_SLURM,
};

struct launcher_env {
    int source;                      /* enum lenv_source */
    int rank, size;                  /* -1 when unknown */
    int local_rank, local_size;      /* -1 when unknown */
    char master_addr[LENV_HOST_MAX]; /* "" when unknown */
    int port;                        /* -1 when unknown */
    int host_store;                  /* 1: rank 0 serves the store */
};

/* Reads one variable: its value, or NULL when unset. */
typedef const char *(*lenv_get_fn)(void *ctx, const char *name);

/* Work out *out from the variables `get` returns (a pure function of
 * them: pass getenv through a wrapper, or a table in tests).  need_addr:
 * the store address must come from the environment (env://), so an MPI
 * start without MASTER_ADDR is an error.  Returns FCCL_OK (also for
 * LENV_NONE), or FCCL_ERR_INVALID with a message naming the variable: a
 * malformed number or node list, a rank out of range, no MASTER_ADDR. */
int launcher_env_parse(lenv_get_fn get, void *ctx, int need_addr,
                       struct launcher_env *out);

/* "torchrun", "msrun", "Open MPI", "MPICH/PMI", "Slurm" or "none". */
const char *launcher_env_source_name(int source);

/* First host of a Slurm node list: "node[01-04,07],gpu2" -> "node01",
 * "rack[1-2]-n[3-4]" -> "rack1-n3".  FCCL_OK or FCCL_ERR_INVALID. */
int launcher_env_first_host(const char *list, char *out, size_t outlen);

/* Tasks on node `node` (0-based) of a Slurm tasks-per-node spec like
 * "2(x3),1" (nodes 0-2 run 2, node 3 runs 1).  FCCL_OK or
 * FCCL_ERR_INVALID (malformed, or fewer nodes than `node` + 1). */
int launcher_env_tasks_on_node(const char *spec, int node, int *out);

/* For fccl_init: parse the process environment and, when an msrun, MPI or
 * Slurm launcher was found, set the torchrun variables it implies that are
 * not set yet (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
 * MASTER_PORT; under msrun RANK is replaced, being msrun's local index),
 * so the rest of init and the program see one convention.
 * *host_store = 1 when rank 0 should serve the store.  Not thread-safe
 * (setenv).  Returns what launcher_env_parse returns. */
int launcher_env_apply(int need_addr, int *host_store);

#endif
