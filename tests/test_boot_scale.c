/*
 * Bootstrap scaling: what each rank costs the store (counted by a TCP
 * proxy between the ranks and a real tcpstore-server), lazy peer
 * resolution (network peers), group creation leaving no keys behind, and
 * a peer that dies right after init.  Real processes under fccl-run,
 * provider shm unless a test says otherwise.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/proc.h"
#include "lib/srv.h"

#define PX_MAX 256

/* ---- a counting proxy: per client connection, bytes each way and
 * requests (turns: client data after server data, or the first) ---- */
struct px_conn {
    int c, s;           /* client side, server side */
    uint64_t up, down;  /* bytes client -> server, server -> client */
    uint64_t turns;
    int last_dir;       /* 0 none, 1 up, 2 down */
};

struct proxy {
    int lfd, port, upstream, stop_pipe[2];
    struct px_conn conns[PX_MAX];
    int n;
    pthread_t th;
};

static int connect_lo(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Copy what is readable on `from` to `to`; 0 at EOF or error. */
static int px_pump(int from, int to, uint64_t *count)
{
    char buf[65536];
    ssize_t k = read(from, buf, sizeof(buf));
    if (k <= 0)
        return 0;
    for (ssize_t off = 0; off < k;) {
        ssize_t w = write(to, buf + off, (size_t)(k - off));
        if (w <= 0)
            return 0;
        off += w;
    }
    *count += (uint64_t)k;
    return 1;
}

static void *px_main(void *arg)
{
    struct proxy *p = arg;
    struct pollfd fds[2 + 2 * PX_MAX];
    for (;;) {
        int k = 0;
        fds[k++] = (struct pollfd){.fd = p->stop_pipe[0], .events = POLLIN};
        fds[k++] = (struct pollfd){.fd = p->lfd, .events = POLLIN};
        for (int i = 0; i < p->n; i++) {
            fds[k++] = (struct pollfd){.fd = p->conns[i].c, .events = POLLIN};
            fds[k++] = (struct pollfd){.fd = p->conns[i].s, .events = POLLIN};
        }
        if (poll(fds, (nfds_t)k, 1000) < 0)
            continue;
        if (fds[0].revents)
            return NULL;
        if ((fds[1].revents & POLLIN) && p->n < PX_MAX) {
            int c = accept(p->lfd, NULL, NULL), s = connect_lo(p->upstream);
            if (c >= 0 && s >= 0)
                p->conns[p->n++] = (struct px_conn){.c = c, .s = s};
            else if (c >= 0)
                close(c);
        }
        for (int i = 0; i < p->n; i++) {
            struct px_conn *x = &p->conns[i];
            short cr = fds[2 + 2 * i].revents, sr = fds[3 + 2 * i].revents;
            if (x->c < 0)
                continue;
            int ok = 1;
            if (cr) {
                uint64_t before = x->up;
                ok = px_pump(x->c, x->s, &x->up);
                if (x->up > before && x->last_dir != 1) {
                    x->turns++;
                    x->last_dir = 1;
                }
            }
            if (ok && sr) {
                uint64_t before = x->down;
                ok = px_pump(x->s, x->c, &x->down);
                if (x->down > before)
                    x->last_dir = 2;
            }
            if (!ok) { /* keep the counters, close both sides */
                close(x->c);
                close(x->s);
                x->c = x->s = -1;
            }
        }
        /* closed connections stay listed (polling fd -1 is ignored) */
    }
}

static void px_start(struct proxy *p, int upstream)
{
    memset(p, 0, sizeof(*p));
    p->upstream = upstream;
    cr_assert_eq(pipe(p->stop_pipe), 0);
    p->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    cr_assert_eq(bind(p->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(p->lfd, 512), 0);
    getsockname(p->lfd, (struct sockaddr *)&a, &l);
    p->port = ntohs(a.sin_port);
    cr_assert_eq(pthread_create(&p->th, NULL, px_main, p), 0);
}

/* Stop; the largest per-connection figures. */
static void px_stop(struct proxy *p, uint64_t *bytes, uint64_t *turns,
                    int *conns)
{
    cr_assert_eq(write(p->stop_pipe[1], "x", 1), 1);
    pthread_join(p->th, NULL);
    *bytes = *turns = 0;
    for (int i = 0; i < p->n; i++) {
        struct px_conn *x = &p->conns[i];
        if (x->up + x->down > *bytes)
            *bytes = x->up + x->down;
        if (x->turns > *turns)
            *turns = x->turns;
        if (x->c >= 0) {
            close(x->c);
            close(x->s);
        }
    }
    *conns = p->n;
    close(p->lfd);
    close(p->stop_pipe[0]);
    close(p->stop_pipe[1]);
}

/* Run an init + barrier + finalize job of n ranks through the proxy. */
static void store_cost(int n, uint64_t *bytes, uint64_t *turns)
{
    int conns = 0;
    struct srv srv;
    srv_start_local(&srv, NULL);
    int port = srv.port;
    struct proxy px;
    px_start(&px, port);
    char *out = NULL;
    int st = th_job_on_store(n, px.port, "boot_scale init", 100, &out);
    px_stop(&px, bytes, turns, &conns);
    cr_assert_eq(st, 0, "%d ranks exited %d:\n%s", n, st, out);
    cr_expect_eq(conns, n, "%d store connections for %d ranks", conns, n);
    free(out);
    srv_finish(&srv);
}

/* The store cost of the most expensive rank must not grow with N. */
Test(boot_scale, store_bytes_per_rank_constant, .timeout = 240)
{
    uint64_t b4, t4, b32, t32;
    store_cost(4, &b4, &t4);
    store_cost(32, &b32, &t32);
    fprintf(stderr, "store per rank, max: N=4 %llu B %llu requests; N=32 "
            "%llu B %llu requests\n", (unsigned long long)b4,
            (unsigned long long)t4, (unsigned long long)b32,
            (unsigned long long)t32);
    cr_expect(b4 > 0 && t4 > 0, "nothing counted");
    cr_expect(b32 <= b4 * 3 / 2, "bytes grew %.2fx (N=4: %llu, N=32: %llu)",
              (double)b32 / (double)b4, (unsigned long long)b4,
              (unsigned long long)b32);
    cr_expect(t32 <= t4 * 3 / 2, "requests grew %.2fx (N=4: %llu, N=32: "
              "%llu)", (double)t32 / (double)t4, (unsigned long long)t4,
              (unsigned long long)t32);
}

/* Pairs only: every pair sums right, and no rank resolved every peer.
 * Over the network provider: shm peers are all resolved at start-up
 * (shm mismatches messages from senders it does not know yet). */
Test(boot_scale, lazy_resolution_sparse_job, .timeout = 180)
{
    const int n = 16;
    char cmd[1024], *out = NULL, line[128];
    snprintf(cmd, sizeof(cmd), "FCCL_PROVIDER='tcp;ofi_rxm' FCCL_TIMEOUT=60 "
             "%s/fccl-run -n %d %s/boot_scale sparse", th_bin_dir(), n,
             th_testbin_dir());
    int st = th_sh(cmd, 150, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    for (int r = 0; r < n; r++) {
        int a = r / 2 * 2;
        snprintf(line, sizeof(line), "R%d pairsum %d resolved ", r,
                 (a + 1) + (a + 2));
        const char *at = strstr(out, line);
        cr_expect(at != NULL, "missing \"%s\" in:\n%s", line, out);
        if (!at)
            continue;
        int resolved = atoi(at + strlen(line));
        /* ring neighbours, the pair, the barrier's log2(n) rounds; rank
         * 0 roots the split's broadcast, which may reach everyone */
        cr_expect(resolved >= 1 && (r == 0 || resolved <= 11),
                  "rank %d resolved %d of %d peers", r, resolved, n - 1);
    }
    free(out);
}

/* 10,000 group creations (new and split) leave the key count alone. */
Test(boot_scale, many_groups_leave_no_keys, .timeout = 240)
{
    struct srv srv;
    srv_start_local(&srv, NULL);
    int port = srv.port;
    char *out = NULL;
    int st = th_job_on_store(3, port, "boot_scale groups 10000", 200, &out);
    cr_assert_eq(st, 0, "exit %d:\n%s", st, out);
    long long before = -1, after = -2;
    const char *at = strstr(out, "keys before ");
    cr_assert(at, "%s", out);
    cr_assert_eq(sscanf(at, "keys before %lld after %lld", &before, &after), 2);
    cr_expect_eq(before, after, "store keys %lld before, %lld after 10,000 "
                 "groups", before, after);
    free(out);
    srv_tcpstore(port, ".", "", "num-keys", &out);
    /* only the join counter every PyTorch-style client leaves (init/) */
    cr_expect_str_eq(out, "1\n", "keys left after the job: %s", out);
    free(out);
    srv_tcpstore(port, ".", "", "--raw-keys get init/", &out);
    cr_expect_str_eq(out, "3", "init/ after a 3-rank job: %s", out);
    free(out);
    srv_finish(&srv);
}

/* Rank 7 exits right after init; ranks that never sent it anything still
 * get an error naming it, well within the timeout. */
Test(boot_scale, dead_unresolved_peer_named, .timeout = 120)
{
    const int n = 8;
    char cmd[1024], *out = NULL, line[64];
    snprintf(cmd, sizeof(cmd),
             "FCCL_PROVIDER=shm FCCL_TIMEOUT=5 %s/fccl-run -n %d "
             "%s/boot_scale deadpeer",
             th_bin_dir(), n, th_testbin_dir());
    double t0 = th_now();
    th_sh(cmd, 90, &out);
    double secs = th_now() - t0;
    for (int r = 0; r < n - 1; r++) {
        snprintf(line, sizeof(line), "R%d err -", r);
        const char *at = strstr(out, line);
        cr_expect(at != NULL, "rank %d did not fail:\n%s", r, out);
        if (!at)
            continue;
        const char *eol = strchr(at, '\n');
        char msg[512];
        snprintf(msg, sizeof(msg), "%.*s", eol ? (int)(eol - at) : 200, at);
        cr_expect(strstr(msg, "rank 7") != NULL, "rank %d: %s", r, msg);
        double s = 99;
        sscanf(msg, "R%*d err %*d %lf", &s);
        cr_expect(s < 10, "rank %d took %.1f s: %s", r, s, msg);
    }
    cr_expect(secs < 60, "job took %.1f s", secs);
    free(out);
}

/* Rank 5 of 8 never starts.  Only ranks 4 and 6 wait for its record in
 * the store; the others wait in the record gather for live ranks that
 * gave up (or for ranks that wait for those).  Every rank's error must
 * still name rank 5 as never arrived, within the timeout (4 s, one
 * deadline for the whole init) plus slack. */
Test(boot_scale, missing_rank_named_by_every_rank, .timeout = 120)
{
    const int n = 8, missing = 5;
    struct srv srv;
    srv_start_local(&srv, NULL);
    int port = srv.port;
    char cmd[4096], *out = NULL;
    int off = snprintf(cmd, sizeof(cmd),
                       "export FCCL_PROVIDER=shm FCCL_TIMEOUT=4 "
                       "MASTER_ADDR=127.0.0.1 MASTER_PORT=%d WORLD_SIZE=%d "
                       "FCCL_JOB_ID=missing8; ",
                       port, n);
    for (int r = 0; r < n; r++)
        if (r != missing)
            off += snprintf(cmd + off, sizeof(cmd) - (size_t)off,
                            "(RANK=%d %s/boot_check env 2>&1; echo \"rc $?\") "
                            "| sed \"s/^/[%d] /\" & ",
                            r, th_testbin_dir(), r);
    snprintf(cmd + off, sizeof(cmd) - (size_t)off, "wait");
    double t0 = th_now();
    th_sh(cmd, 90, &out);
    double secs = th_now() - t0;
    for (int r = 0; r < n; r++) {
        if (r == missing)
            continue;
        char tag[16], want[64];
        snprintf(tag, sizeof(tag), "[%d] ", r);
        snprintf(want, sizeof(want), "[%d] rc 1", r);
        cr_expect(strstr(out, want) != NULL, "rank %d must fail:\n%s", r,
                  out);
        /* its error line names the missing rank as never arrived */
        const char *at = out;
        int named = 0;
        while ((at = strstr(at, tag)) != NULL) {
            const char *eol = strchr(at, '\n');
            size_t len = eol ? (size_t)(eol - at) : strlen(at);
            char line[2048];
            snprintf(line, sizeof(line), "%.*s", (int)len, at);
            if (strstr(line, "rank 5 (of 8) never arrived"))
                named = 1;
            at += len;
        }
        cr_expect(named, "rank %d does not name rank %d:\n%s", r, missing,
                  out);
    }
    cr_expect(secs < 30, "took %.1f s with a 4 s timeout:\n%s", secs, out);
    free(out);
    srv_finish(&srv);
}
