/*
 * Cross-memory attach (process_vm_readv) between processes on one host:
 * whether this process may use it, the copy itself, and the check a peer
 * runs before it agrees to read our memory.  The protocol that uses them
 * (descriptor, FIN, probe) is part of the request state machine, rndv.c.
 *
 * Permission.  CMA needs the same pid namespace and ptrace rights (Yama's
 * ptrace_scope 1, Ubuntu's default, refuses siblings).  FCCL_CMA=0 turns
 * the path off.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "tp_int.h"

static uint64_t pidns_inode(void)
{
    struct stat st;
    return stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* Copy len bytes from (pid, addr) to dst.  0 or a positive errno. */
int tp_cma_pull(int pid, uint64_t addr, void *dst, size_t len)
{
    size_t done = 0;
    while (done < len) {
        struct iovec l = {(char *)dst + done, len - done};
        struct iovec r = {(void *)(uintptr_t)(addr + done), len - done};
        ssize_t n = process_vm_readv(pid, &l, 1, &r, 1, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? errno : EFAULT;
        done += (size_t)n;
    }
    return 0;
}

void tp_cma_init(struct fccl_tp *tp)
{
    const char *env = getenv("FCCL_CMA");
    tp->pid = (int)getpid();
    tp->pidns = pidns_inode();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    tp->cma_magic = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
                    ((uint64_t)tp->pid << 40) ^ (uint64_t)(uintptr_t)tp;
    if (env && strcmp(env, "0") == 0) {
        LOG_DEBUG("FABRIC", "CMA off (FCCL_CMA=0)");
        return;
    }
    uint64_t probe = 0;
    if (tp->pidns == 0 ||
        tp_cma_pull(tp->pid, (uint64_t)(uintptr_t)&tp->cma_magic, &probe,
             sizeof(probe)) != 0 || probe != tp->cma_magic) {
        LOG_INFO("FABRIC", "CMA unavailable here (%s); shm copies large "
                 "messages itself", strerror(errno));
        return;
    }
    tp->cma_ok = 1;
}

int tp_cma_probe_ok(const struct fccl_tp *tp, int pid, uint64_t pidns,
                    uint64_t addr, uint64_t value)
{
    uint64_t word = 0;
    return tp->cma_ok && pidns == tp->pidns &&
           tp_cma_pull(pid, addr, &word, sizeof(word)) == 0 && word == value;
}
