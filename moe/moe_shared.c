/*
 * The expert buffer: combine reading the peers' rows in place.
 *
 * Why.  On one host every byte a combine receives is a CPU copy (the
 * receiver's process_vm_readv), and with more ranks than cores that copy
 * competes with the math for the same cores.  The weighted sum reads every
 * row anyway, so when the experts' outputs lie in memory the token owner
 * can map, it reads them there: each row crosses memory once.
 *
 * How.  fccl_moe_new (opts.expert_buffer) makes the buffer in a memfd
 * (a header page with a random cookie, then expand_rows rows), shares
 * {pid, fd, length, cookie} with an all_gather over EP, and each rank maps
 * the others' read-only through /proc/PID/fd/FD (the same permission CMA
 * needs: one pid namespace, ptrace rights), checking the length and the
 * cookie (so a pid on another host can never map a stranger's file).  An
 * all_reduce(min) then decides for every rank at once: all mapped, or
 * none uses the in-place path.  The mappings outlive a peer that exits
 * (the memfd lives while any mapping does).
 *
 * A combine goes in place when, in its count exchange (moe_combine.c),
 * every rank says it passed its expert buffer as expand_x.  That exchange
 * also tells every owner where each peer's rows for it lie (the peers'
 * counts, in the expert-side order by local expert, then owner) and that
 * they are written (a rank enters combine after its experts ran).  The
 * owner then finishes its tokens straight from the peers' memory and sends
 * each peer it read from an 8-byte "done"; a rank returns only when every
 * rank that reads its rows said done, so its buffer may be rewritten.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"
#include "moe_int.h"

#define MOE_SHARED_HDR 4096u
#define MOE_SHARED_MAGIC 0x4d6f4558ull /* "MoEX" */

enum { SI_OK, SI_PID, SI_FD, SI_LEN, SI_COOKIE, SI_N };

static int plain_buffer(struct fccl_moe *m, size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes ? bytes : 64) != 0)
        return fccl_err(FCCL_ERR_NOMEM, "moe_new: no memory for the expert "
                        "buffer (%zu bytes)", bytes);
    memset(p, 0, bytes ? bytes : 64);
    m->xbuf = p;
    m->xplain = 1;
    return FCCL_OK;
}

/* Our own memfd mapping; 0 on failure (then the caller goes plain). */
static int own_mapping(struct fccl_moe *m, size_t len, int *fd_out,
                       uint64_t *cookie)
{
    int fd = memfd_create("fccl-moe", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (ftruncate(fd, (off_t)len) != 0 ||
        posix_fallocate(fd, 0, (off_t)len) != 0) { /* no SIGBUS later */
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return 0;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    *cookie = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^
              ((uint64_t)getpid() << 16) ^ (uint64_t)(uintptr_t)p ^
              MOE_SHARED_MAGIC;
    memcpy(p, cookie, sizeof(*cookie));
    m->xmap = p;
    m->xmap_len = len;
    m->xbuf = (unsigned char *)p + MOE_SHARED_HDR;
    *fd_out = fd;
    return 1;
}

/* Map peer r's buffer read-only; 0 on any doubt. */
static int map_peer(struct fccl_moe *m, int r, const int64_t *si)
{
    char path[64];
    size_t len = (size_t)si[SI_LEN];
    snprintf(path, sizeof(path), "/proc/%lld/fd/%lld",
             (long long)si[SI_PID], (long long)si[SI_FD]);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    void *p = MAP_FAILED;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        (size_t)st.st_size >= len && len > MOE_SHARED_HDR)
        p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return 0;
    uint64_t c;
    memcpy(&c, p, sizeof(c));
    m->peer_map[r] = p;
    m->peer_len[r] = len;
    if (c != (uint64_t)si[SI_COOKIE])
        return 0; /* unmapped by moe_shared_free */
    m->peer_rows[r] = (const unsigned char *)p + MOE_SHARED_HDR;
    m->peer_cap[r] = (len - MOE_SHARED_HDR) / m->rowb;
    return 1;
}

static void unmap_peers(struct fccl_moe *m)
{
    for (int r = 0; m->peer_map && r < m->ep_size; r++) {
        if (m->peer_map[r])
            munmap(m->peer_map[r], m->peer_len[r]);
        m->peer_map[r] = NULL;
        m->peer_rows[r] = NULL;
    }
}

int moe_shared_new(struct fccl_moe *m)
{
    size_t bytes = m->expand_rows * m->rowb;
    const char *env = getenv("FCCL_MOE_SHARED");
    int want = !m->tp && !(env && strcmp(env, "0") == 0);
    int f = 0;
    m->peer_rows = calloc((size_t)m->ep_size, sizeof(*m->peer_rows));
    m->peer_cap = calloc((size_t)m->ep_size, sizeof(*m->peer_cap));
    m->peer_map = calloc((size_t)m->ep_size, sizeof(*m->peer_map));
    m->peer_len = calloc((size_t)m->ep_size, sizeof(*m->peer_len));
    m->done_sink = calloc((size_t)m->ep_size, sizeof(*m->done_sink));
    f = !m->peer_rows || !m->peer_cap || !m->peer_map || !m->peer_len ||
        !m->done_sink;
    if (m->tp) /* TP ranks (all of the EP group) do not share buffers */
        return f ? fccl_err(FCCL_ERR_NOMEM, "moe_new: no memory")
                 : plain_buffer(m, bytes);
    /* From here every rank of the EP group takes part in both exchanges. */
    int64_t all[FCCL_MOE_MAX_EP * SI_N], mine[SI_N] = {0}, ok;
    size_t len = MOE_SHARED_HDR +
                 ((bytes + MOE_SHARED_HDR - 1) / MOE_SHARED_HDR) *
                     MOE_SHARED_HDR;
    int fd = -1;
    uint64_t cookie = 0;
    if (!f && want && own_mapping(m, len, &fd, &cookie)) {
        mine[SI_OK] = 1;
        mine[SI_PID] = getpid();
        mine[SI_FD] = fd;
        mine[SI_LEN] = (int64_t)len;
        mine[SI_COOKIE] = (int64_t)cookie;
    }
    int rc = fccl_all_gather(mine, all, SI_N, FCCL_INT64, m->ep, NULL);
    ok = rc == FCCL_OK && mine[SI_OK];
    for (int r = 0; ok && r < m->ep_size; r++)
        if (r != m->ep_rank)
            ok = all[(size_t)r * SI_N + SI_OK] &&
                 map_peer(m, r, all + (size_t)r * SI_N);
    int rc2 = rc == FCCL_OK ? fccl_all_reduce(&ok, &ok, 1, FCCL_INT64,
                                              FCCL_MIN, m->ep, NULL)
                            : rc;
    if (fd >= 0) /* every peer has opened it by now (or given up) */
        close(fd);
    if (rc2 == FCCL_OK && ok) {
        m->shared_ok = 1;
        return FCCL_OK;
    }
    unmap_peers(m); /* our own mapping stays, as an ordinary buffer */
    if (rc2 < 0)
        return rc2;
    if (f)
        return fccl_err(FCCL_ERR_NOMEM, "moe_new: no memory");
    return m->xbuf ? FCCL_OK : plain_buffer(m, bytes);
}

void moe_shared_free(struct fccl_moe *m)
{
    unmap_peers(m);
    if (m->xmap)
        munmap(m->xmap, m->xmap_len);
    else if (m->xplain)
        free(m->xbuf);
    m->xmap = NULL;
    m->xbuf = NULL;
    free(m->peer_rows);
    free(m->peer_cap);
    free(m->peer_map);
    free(m->peer_len);
    free(m->done_sink);
}

int fccl_moe_get_expert_buffer(fccl_moe_t *m, void **buf, int *shared)
{
    if (buf)
        *buf = NULL;
    if (!m || !buf)
        return fccl_err(FCCL_ERR_INVALID, "moe_get_expert_buffer: %s is "
                        "NULL", !m ? "moe" : "buf");
    if (!m->xbuf)
        return fccl_err(FCCL_ERR_INVALID, "moe_get_expert_buffer: the "
                        "config was made without opts.expert_buffer");
    *buf = m->xbuf;
    if (shared)
        *shared = m->shared_ok;
    return FCCL_OK;
}

/* ---- the in-place combine ---- */

static const int64_t *meta_row(const struct fccl_moe *m, int r)
{
    return m->meta + (size_t)r * m->metalen;
}

/* Rows of peer r's expert side for owner s and its local expert le. */
static int64_t give(const struct fccl_moe *m, int r, int s, int le)
{
    return meta_row(m, r)[1 + (size_t)s * m->L + (size_t)le];
}

/* Note every piece of peer r for this rank where it lies. */
static int peer_pieces(struct fccl_moe *m, int r, const int32_t *off)
{
    int me = m->ep_rank;
    size_t row = 0;
    for (int le = 0; le < m->L; le++)
        for (int s = 0; s < m->ep_size; s++) {
            size_t n = (size_t)give(m, r, s, le);
            if (s == me && n > 0) {
                size_t p = (size_t)r * m->L + (size_t)le;
                if (row + n > m->peer_cap[r]) /* cannot pass the checks */
                    return fccl_err(FCCL_ERR_PROTOCOL, "moe_combine: rank "
                                    "%d's rows for rank %d run past its "
                                    "expert buffer", r, me);
                moe_arrived(m, off[p], n, m->peer_rows[r] + row * m->rowb);
            }
            row += n;
        }
    return FCCL_OK;
}

/* Do rank r and this rank share rows in direction (from -> to)? */
static int reads_from(const struct fccl_moe *m, int from, int to)
{
    for (int le = 0; le < m->L; le++)
        if (give(m, from, to, le) > 0)
            return 1;
    return 0;
}

int moe_shared_begin(struct fccl_moe *m)
{
    struct moe_op *op = &m->op;
    const int32_t *off = moe_assist_off((int32_t *)op->f.in.assist_info);
    int me = m->ep_rank, rc = FCCL_OK;
    op->nr = 0;
    /* "done" from every rank that reads ours */
    for (int s = 0; s < m->ep_size && rc == FCCL_OK; s++) {
        if (s == me || !reads_from(m, me, s))
            continue;
        m->req_piece[op->nr] = -1;
        rc = fccl_irecv(&m->done_sink[s], 1, FCCL_INT64, s,
                        MOE_TAG_COMBINE_DONE, m->ep, &m->reqs[op->nr]);
        op->nr += rc == FCCL_OK;
    }
    for (int r = 0; r < m->ep_size && rc == FCCL_OK; r++)
        if (r != me)
            rc = peer_pieces(m, r, off);
    return rc;
}

int moe_shared_end(struct fccl_moe *m)
{
    struct moe_op *op = &m->op;
    int me = m->ep_rank;
    size_t ns = 0;
    for (int r = 0; r < m->ep_size; r++)
        if (r != me && reads_from(m, r, me))
            m->ops[ns++] = (fccl_p2p_op_t){1, &m->done_word, 1, FCCL_INT64,
                                           r, MOE_TAG_COMBINE_DONE};
    return ns ? fccl_batch_isend_irecv(m->ops, ns, m->ep, &op->sreq)
              : FCCL_OK;
}
