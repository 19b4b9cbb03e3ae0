/*
 * libfccl-preload.so: a libfabric start-up workaround that fccl-run puts
 * into LD_PRELOAD of the ranks it starts (not part of libfccl, so a
 * program that merely links libfccl keeps libc's fopen).
 *
 * Debian's libfabric (1.17 API, library 1.20) reads /proc/kallsyms twice
 * inside its first fi_getinfo() (a dmabuf probe), whatever provider is
 * asked for and even on hosts with no RDMA device.  That costs about 0.1 s
 * of kernel CPU per process: on 2 cores a 64-rank job spent 3.0 of its
 * 3.6 s start-up there.  No libfabric variable skips the read
 * (bench/RESULTS.md lists the ones tried).  On a host without
 * /sys/class/infiniband the probe's answer cannot matter, so there the read
 * sees an empty file instead.  Hosts with RDMA devices, and anyone who sets
 * FCCL_KEEP_KALLSYMS=1 (then fccl-run does not inject it either), get the
 * real file.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef FILE *(*fopen_fn)(const char *, const char *);

static fopen_fn real_fopen(void)
{
    static _Atomic(fopen_fn) real;
    fopen_fn f = atomic_load(&real);
    if (!f) {
        f = (fopen_fn)dlsym(RTLD_NEXT, "fopen");
        atomic_store(&real, f);
    }
    return f;
}

/* 1 = hide the file, 0 = pass it through; decided once per process. */
static int hide_kallsyms(void)
{
    static _Atomic int decided = -1;
    int d = atomic_load(&decided);
    if (d < 0) {
        const char *keep = getenv("FCCL_KEEP_KALLSYMS");
        d = !(keep && *keep && strcmp(keep, "0") != 0) &&
            access("/sys/class/infiniband", F_OK) != 0;
        atomic_store(&decided, d);
    }
    return d;
}

__attribute__((visibility("default"))) FILE *fopen(const char *path,
                                               const char *mode)
{
    fopen_fn f = real_fopen();
    if (!f)
        return NULL;
    if (path && strcmp(path, "/proc/kallsyms") == 0 && hide_kallsyms())
        return f("/dev/null", mode);
    return f(path, mode);
}
