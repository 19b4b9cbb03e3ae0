/*
 * launcher_env.c: read rank, size, local rank, local size and the store
 * address from whichever launcher started us (torchrun, msrun, Open MPI,
 * MPICH, Slurm); see launcher_env.h for the rules.  Parsing is a pure function of
 * a variable lookup, so tests feed it made-up environments.
 */
#include "launcher_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"

#define INT_LIMIT (1 << 24) /* ranks and sizes, as in pg.c */

const char *launcher_env_source_name(int source)
{
    switch (source) {
    case LENV_TORCHRUN: return "torchrun";
    case LENV_MSRUN: return "msrun";
    case LENV_OPENMPI: return "Open MPI";
    case LENV_MPICH: return "MPICH/PMI";
    case LENV_SLURM: return "Slurm";
    default: return "none";
    }
}

static const char *var(lenv_get_fn get, void *ctx, const char *name)
{
    const char *v = get(ctx, name);
    return v && *v ? v : NULL;
}

/* A decimal integer 0..INT_LIMIT; *out untouched when the variable is
 * unset (FCCL_ERR_NOTFOUND). */
static int var_int(lenv_get_fn get, void *ctx, const char *name, int *out)
{
    const char *s = var(get, ctx, name);
    if (!s)
        return FCCL_ERR_NOTFOUND;
    char *end;
    long v = strtol(s, &end, 10);
    if (*end != '\0' || v < 0 || v > INT_LIMIT)
        return fccl_err(FCCL_ERR_INVALID, "init env://: %s='%s' is not a "
                        "valid count", name, s);
    *out = (int)v;
    return FCCL_OK;
}

/* Like var_int, but an unset variable is fine (rc FCCL_OK, *out kept). */
static int opt_int(lenv_get_fn get, void *ctx, const char *name, int *out)
{
    int rc = var_int(get, ctx, name, out);
    return rc == FCCL_ERR_NOTFOUND ? FCCL_OK : rc;
}

int launcher_env_first_host(const char *list, char *out, size_t outlen)
{
    size_t o = 0;
    const char *p = list ? list : "";
    while (*p && *p != ',') {
        if (*p == ']')
            goto bad;
        if (*p != '[') {
            if (o + 1 >= outlen)
                goto bad;
            out[o++] = *p++;
            continue;
        }
        /* "[01-04,07]": the first number of the first range */
        p++;
        if (*p < '0' || *p > '9')
            goto bad;
        while (*p >= '0' && *p <= '9') {
            if (o + 1 >= outlen)
                goto bad;
            out[o++] = *p++;
        }
        while (*p && *p != ']' && *p != '[')
            p++;
        if (*p != ']')
            goto bad;
        p++;
    }
    if (o == 0)
        goto bad;
    out[o] = '\0';
    return FCCL_OK;
bad:
    if (outlen)
        out[0] = '\0';
    return fccl_err(FCCL_ERR_INVALID, "init env://: cannot read the first "
                    "host of the Slurm node list '%s'", list ? list : "");
}

int launcher_env_tasks_on_node(const char *spec, int node, int *out)
{
    const char *p = spec ? spec : "";
    long seen = 0;
    int found = -1;
    /* Read the whole list, so a malformed tail is noticed too. */
    while (*p) {
        char *end;
        long tasks = strtol(p, &end, 10), reps = 1;
        if (end == p || tasks < 0 || tasks > INT_LIMIT)
            goto bad;
        p = end;
        if (strncmp(p, "(x", 2) == 0) {
            reps = strtol(p + 2, &end, 10);
            if (end == p + 2 || *end != ')' || reps < 1 || reps > INT_LIMIT)
                goto bad;
            p = end + 1;
        }
        if (found < 0 && node < seen + reps)
            found = (int)tasks;
        seen += reps;
        if (*p == ',' && p[1])
            p++;
        else if (*p)
            goto bad;
    }
    if (found >= 0) {
        *out = found;
        return FCCL_OK;
    }
bad:
    return fccl_err(FCCL_ERR_INVALID, "init env://: cannot read the tasks "
                    "of node %d from the Slurm tasks-per-node list '%s'",
                    node, spec ? spec : "");
}

/* ---- one function per launcher: rank, size, local rank and size ---- */

static int from_torchrun(lenv_get_fn get, void *ctx, struct launcher_env *e)
{
    int rc;
    if ((rc = opt_int(get, ctx, "RANK", &e->rank)) < 0 ||
        (rc = opt_int(get, ctx, "WORLD_SIZE", &e->size)) < 0 ||
        (rc = opt_int(get, ctx, "LOCAL_RANK", &e->local_rank)) < 0 ||
        (rc = opt_int(get, ctx, "LOCAL_WORLD_SIZE", &e->local_size)) < 0)
        return rc;
    return FCCL_OK;
}

static int from_mpi(lenv_get_fn get, void *ctx, struct launcher_env *e,
                    const char *const names[4])
{
    int rc;
    if ((rc = var_int(get, ctx, names[0], &e->rank)) < 0 ||
        (rc = var_int(get, ctx, names[1], &e->size)) < 0 ||
        (rc = opt_int(get, ctx, names[2], &e->local_rank)) < 0 ||
        (rc = opt_int(get, ctx, names[3], &e->local_size)) < 0)
        return rc;
    return FCCL_OK;
}

/* Two variables that must agree when both are set (msrun sets RANK_ID and
 * MS_NODE_ID, MS_WORKER_NUM and RANK_SIZE to the same values). */
static int either_int(lenv_get_fn get, void *ctx, const char *first,
                      const char *second, int *out)
{
    int a = -1, b = -1, rc;
    if ((rc = opt_int(get, ctx, first, &a)) < 0 ||
        (rc = opt_int(get, ctx, second, &b)) < 0)
        return rc;
    if (a >= 0 && b >= 0 && a != b)
        return fccl_err(FCCL_ERR_INVALID, "init env://: msrun variables "
                        "disagree: %s=%d but %s=%d", first, a, second, b);
    *out = a >= 0 ? a : b;
    return FCCL_OK;
}

/* msrun (and Ascend scripts with a rank table): RANK_ID / MS_NODE_ID,
 * MS_WORKER_NUM / RANK_SIZE, LOCAL_RANK.  msrun's RANK is the local
 * index, never read here. */
static int from_msrun(lenv_get_fn get, void *ctx, struct launcher_env *e)
{
    const char *role = var(get, ctx, "MS_ROLE");
    if (role && strcmp(role, "MS_WORKER") != 0)
        return fccl_err(FCCL_ERR_INVALID, "init env://: MS_ROLE=%s: this "
                        "is msrun's %s process, not a rank (fccl needs no "
                        "scheduler: rank 0 serves the store)", role,
                        strcmp(role, "MS_SCHED") == 0 ? "scheduler" : "non-worker");
    int rc;
    if ((rc = either_int(get, ctx, "MS_WORKER_NUM", "RANK_SIZE", &e->size)) < 0 ||
        (rc = either_int(get, ctx, "RANK_ID", "MS_NODE_ID", &e->rank)) < 0 ||
        (rc = opt_int(get, ctx, "LOCAL_RANK", &e->local_rank)) < 0)
        return rc;
    if (e->rank < 0)
        return fccl_err(FCCL_ERR_INVALID, "init env://: started by msrun "
                        "(%s is set) but neither RANK_ID nor MS_NODE_ID is: "
                        "msrun leaves ranks to be assigned at registration "
                        "unless it is given --node_rank",
                        var(get, ctx, "MS_WORKER_NUM") ? "MS_WORKER_NUM"
                                                       : "RANK_SIZE");
    return FCCL_OK;
}

static int msrun_vars(lenv_get_fn get, void *ctx)
{
    return var(get, ctx, "MS_WORKER_NUM") || var(get, ctx, "RANK_SIZE");
}

static const char *const OMPI_VARS[4] = {
    "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"};
static const char *const PMI_VARS[4] = {"PMI_RANK", "PMI_SIZE",
                                        "MPI_LOCALRANKID", "MPI_LOCALNRANKS"};

static int slurm_local_size(lenv_get_fn get, void *ctx, int *out)
{
    static const char *const specs[] = {"SLURM_STEP_TASKS_PER_NODE",
                                        "SLURM_NTASKS_PER_NODE",
                                        "SLURM_TASKS_PER_NODE"};
    int node = 0, rc;
    if ((rc = opt_int(get, ctx, "SLURM_NODEID", &node)) < 0)
        return rc;
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        const char *s = var(get, ctx, specs[i]);
        if (s)
            return launcher_env_tasks_on_node(s, strchr(s, ',') ? node : 0,
                                              out);
    }
    return FCCL_OK;
}

static int from_slurm(lenv_get_fn get, void *ctx, struct launcher_env *e)
{
    int rc;
    if ((rc = var_int(get, ctx, "SLURM_PROCID", &e->rank)) < 0)
        return rc;
    rc = var_int(get, ctx, "SLURM_NTASKS", &e->size);
    if (rc == FCCL_ERR_NOTFOUND)
        rc = var_int(get, ctx, "SLURM_NPROCS", &e->size);
    if (rc == FCCL_ERR_NOTFOUND)
        return fccl_err(FCCL_ERR_INVALID, "init env://: SLURM_PROCID is set "
                        "but SLURM_NTASKS is not");
    if (rc < 0 || (rc = opt_int(get, ctx, "SLURM_LOCALID", &e->local_rank)) < 0)
        return rc;
    return slurm_local_size(get, ctx, &e->local_size);
}

/* An MPI start whose rank and size are Slurm's is srun's direct launch. */
static int slurm_agrees(lenv_get_fn get, void *ctx, const struct launcher_env *e)
{
    int r = -1, n = -1;
    if (var_int(get, ctx, "SLURM_PROCID", &r) < 0)
        return 0;
    if (var_int(get, ctx, "SLURM_NTASKS", &n) < 0 &&
        var_int(get, ctx, "SLURM_NPROCS", &n) < 0)
        return 0;
    return r == e->rank && n == e->size;
}

static int which_source(lenv_get_fn get, void *ctx)
{
    /* torchrun's variables first; but msrun exports RANK too (its local
     * index), so RANK alone next to msrun's variables is msrun's. */
    if (var(get, ctx, "WORLD_SIZE") ||
        (var(get, ctx, "RANK") && !msrun_vars(get, ctx)))
        return LENV_TORCHRUN;
    if (msrun_vars(get, ctx))
        return LENV_MSRUN;
    if (var(get, ctx, OMPI_VARS[0]))
        return LENV_OPENMPI;
    if (var(get, ctx, PMI_VARS[0]))
        return LENV_MPICH;
    if (var(get, ctx, "SLURM_PROCID"))
        return LENV_SLURM;
    return LENV_NONE;
}

static int read_ranks(lenv_get_fn get, void *ctx, struct launcher_env *e)
{
    int rc = FCCL_OK;
    switch (e->source) {
    case LENV_TORCHRUN: return from_torchrun(get, ctx, e);
    case LENV_MSRUN: return from_msrun(get, ctx, e);
    case LENV_OPENMPI: rc = from_mpi(get, ctx, e, OMPI_VARS); break;
    case LENV_MPICH: rc = from_mpi(get, ctx, e, PMI_VARS); break;
    case LENV_SLURM: return from_slurm(get, ctx, e);
    default: return FCCL_OK;
    }
    if (rc < 0)
        return rc;
    if (slurm_agrees(get, ctx, e)) {
        struct launcher_env s = *e;
        s.source = LENV_SLURM;
        if ((rc = from_slurm(get, ctx, &s)) < 0)
            return rc;
        if (s.local_rank < 0)
            s.local_rank = e->local_rank;
        if (s.local_size < 0)
            s.local_size = e->local_size;
        *e = s;
    }
    return FCCL_OK;
}

static int check_ranges(const struct launcher_env *e)
{
    const char *src = launcher_env_source_name(e->source);
    if (e->size == 0)
        return fccl_err(FCCL_ERR_INVALID, "init env://: %s world size is 0",
                        src);
    if (e->rank >= 0 && e->size > 0 && e->rank >= e->size)
        return fccl_err(FCCL_ERR_INVALID, "init env://: %s rank %d is out of "
                        "range for world size %d", src, e->rank, e->size);
    if (e->local_rank >= 0 && e->local_size > 0 &&
        e->local_rank >= e->local_size)
        return fccl_err(FCCL_ERR_INVALID, "init env://: %s local rank %d is "
                        "out of range for %d ranks on this host", src,
                        e->local_rank, e->local_size);
    return FCCL_OK;
}

static int read_store(lenv_get_fn get, void *ctx, int need_addr,
                      struct launcher_env *e)
{
    const char *a = var(get, ctx, "MASTER_ADDR");
    int rc = opt_int(get, ctx, "MASTER_PORT", &e->port);
    if (rc < 0)
        return rc;
    /* msrun's scheduler address is where its ranks meet: the store. */
    if (e->source == LENV_MSRUN) {
        if (!a)
            a = var(get, ctx, "MS_SCHED_HOST");
        if (e->port < 0 && (rc = opt_int(get, ctx, "MS_SCHED_PORT", &e->port)) < 0)
            return rc;
    }
    if (e->source != LENV_TORCHRUN && e->source != LENV_NONE) {
        e->host_store = 1;
        if (e->port < 0)
            e->port = LENV_DEFAULT_PORT;
    }
    if (a) {
        snprintf(e->master_addr, sizeof(e->master_addr), "%s", a);
        return FCCL_OK;
    }
    if (e->source == LENV_SLURM) {
        static const char *const lists[] = {
            "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
        for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
            const char *l = var(get, ctx, lists[i]);
            if (l)
                return launcher_env_first_host(l, e->master_addr,
                                               sizeof(e->master_addr));
        }
        if (!need_addr)
            return FCCL_OK;
        return fccl_err(FCCL_ERR_INVALID, "init env://: started by Slurm but "
                        "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set");
    }
    if (need_addr && e->source == LENV_MSRUN)
        return fccl_err(FCCL_ERR_INVALID,
                        "init env://: started by msrun (or with RANK_SIZE) "
                        "but neither MS_SCHED_HOST nor MASTER_ADDR is set: "
                        "export MASTER_ADDR=<host of rank 0> (and "
                        "MASTER_PORT, default %d)", LENV_DEFAULT_PORT);
    if (need_addr && (e->source == LENV_OPENMPI || e->source == LENV_MPICH))
        return fccl_err(FCCL_ERR_INVALID,
                        "init env://: started by %s (%s is set) but "
                        "MASTER_ADDR is not set: export MASTER_ADDR=<host of "
                        "rank 0> (and MASTER_PORT, default %d) to every rank, "
                        "e.g. mpirun -x MASTER_ADDR=...",
                        launcher_env_source_name(e->source),
                        e->source == LENV_OPENMPI ? OMPI_VARS[0] : PMI_VARS[0],
                        LENV_DEFAULT_PORT);
    return FCCL_OK;
}

int launcher_env_parse(lenv_get_fn get, void *ctx, int need_addr,
                       struct launcher_env *out)
{
    struct launcher_env e = {.rank = -1, .size = -1, .local_rank = -1,
                             .local_size = -1, .port = -1};
    e.source = which_source(get, ctx);
    int rc = read_ranks(get, ctx, &e);
    if (rc >= 0)
        rc = check_ranges(&e);
    if (rc >= 0)
        rc = read_store(get, ctx, need_addr, &e);
    if (rc < 0)
        return rc;
    *out = e;
    return FCCL_OK;
}

/* ---- the process environment ---- */

static const char *real_getenv(void *ctx, const char *name)
{
    (void)ctx;
    return getenv(name);
}

static void set_int(const char *name, int v)
{
    char buf[16];
    if (v < 0)
        return;
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 0);
}

int launcher_env_apply(int need_addr, int *host_store)
{
    struct launcher_env e;
    *host_store = 0;
    int rc = launcher_env_parse(real_getenv, NULL, need_addr, &e);
    if (rc < 0 || e.source == LENV_NONE || e.source == LENV_TORCHRUN)
        return rc;
    /* msrun's RANK is its local index: ours is the global rank. */
    if (e.source == LENV_MSRUN) {
        char buf[16];
        snprintf(buf, sizeof(buf), "%d", e.rank);
        setenv("RANK", buf, 1);
    }
    set_int("RANK", e.rank);
    set_int("WORLD_SIZE", e.size);
    set_int("LOCAL_RANK", e.local_rank);
    set_int("LOCAL_WORLD_SIZE", e.local_size);
    if (e.master_addr[0])
        setenv("MASTER_ADDR", e.master_addr, 0);
    set_int("MASTER_PORT", e.port);
    *host_store = e.host_store;
    LOG_INFO("BOOT", "%s start: rank %d of %d, local %d of %d, store %s:%d%s",
             launcher_env_source_name(e.source), e.rank, e.size, e.local_rank,
             e.local_size, e.master_addr, e.port,
             e.host_store ? " (served by rank 0)" : "");
    return FCCL_OK;
}
