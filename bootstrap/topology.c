#include "topology.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"

static void read_first_line(const char *path, char *out, size_t outlen)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fgets(out, (int)outlen, f))
        out[strcspn(out, "\r\n")] = '\0';
    fclose(f);
}

void topo_host_id(char *out, size_t outlen, int rank, int world_size)
{
    const char *fake = getenv("FCCL_FAKE_NODES");
    int k = fake ? atoi(fake) : 0;
    if (k > 0 && world_size > 0) {
        if (k > world_size)
            k = world_size;
        snprintf(out, outlen, "fake-node-%d",
                 (int)((long long)rank * k / world_size));
        return;
    }
    char host[64] = "", boot[40] = "";
    gethostname(host, sizeof(host) - 1);
    host[sizeof(host) - 1] = '\0';
    read_first_line("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
    /* The netns inode separates containers that share a kernel (same boot
     * id) and may even share a hostname. */
    struct stat st;
    unsigned long long ns = 0;
    if (stat("/proc/self/ns/net", &st) == 0)
        ns = (unsigned long long)st.st_ino;
    snprintf(out, outlen, "%s/%s/%llu", host, boot, ns);
}

/* The boot id field of "host/boot/netns" (empty if there is none). */
static void machine_key(const char *hostid, const char **key, size_t *len)
{
    const char *a = strchr(hostid, '/');
    const char *b = a ? strchr(a + 1, '/') : NULL;
    *key = a && b ? a + 1 : "";
    *len = a && b ? (size_t)(b - a - 1) : 0;
}

int topo_machine_size(const char *const *hostids, int n, int me)
{
    const char *mine, *k;
    size_t ml, kl;
    int count = 0;
    machine_key(hostids[me], &mine, &ml);
    for (int r = 0; r < n; r++) {
        machine_key(hostids[r], &k, &kl);
        count += kl == ml && memcmp(k, mine, ml) == 0;
    }
    return count;
}

static const char *const *sort_ids; /* qsort has no argument pointer */

static int cmp_host(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    int c = strcmp(sort_ids[x], sort_ids[y]);
    return c ? c : (x > y) - (x < y);
}

int topo_assign_nodes(const char *const *hostids, int n, int *node_of,
                      int *nnodes)
{
    /* Sort ranks by host (then rank): O(n log n), for 131,072 ranks on
     * 16,384 hosts too.  Each host's first rank in the sorted run is its
     * lowest; hosts are then numbered in order of that lowest rank. */
    size_t cnt = (size_t)(n > 0 ? n : 1);
    int *ord = malloc(sizeof(int) * cnt), *lead = malloc(sizeof(int) * cnt);
    if (!ord || !lead) {
        free(ord);
        free(lead);
        return fccl_err(FCCL_ERR_NOMEM, "topology: out of memory");
    }
    for (int r = 0; r < n; r++)
        ord[r] = r;
    sort_ids = hostids;
    qsort(ord, (size_t)n, sizeof(int), cmp_host);
    sort_ids = NULL;
    for (int i = 0; i < n; i++) /* lead[r]: lowest rank of r's host */
        lead[ord[i]] = i > 0 && strcmp(hostids[ord[i]], hostids[ord[i - 1]]) == 0
                           ? lead[ord[i - 1]]
                           : ord[i];
    int count = 0;
    for (int r = 0; r < n; r++) /* a host's id is fixed at its lowest rank */
        node_of[r] = lead[r] == r ? count++ : node_of[lead[r]];
    free(ord);
    free(lead);
    *nnodes = count;
    return FCCL_OK;
}

void topo_local(const int *node_of, int n, int rank, int *local_rank,
                int *local_size)
{
    int lr = 0, ls = 0;
    for (int r = 0; r < n; r++) {
        if (node_of[r] != node_of[rank])
            continue;
        if (r < rank)
            lr++;
        ls++;
    }
    *local_rank = lr;
    *local_size = ls;
}
