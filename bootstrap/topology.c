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

int topo_assign_nodes(const char *const *hostids, int n, int *node_of,
                      int *nnodes)
{
    /* O(n * nodes): n is at most a few thousand and this runs once. */
    int *first = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    if (!first)
        return fccl_err(FCCL_ERR_NOMEM, "topology: out of memory");
    int count = 0;
    for (int r = 0; r < n; r++) {
        int id = -1;
        for (int j = 0; j < count && id < 0; j++)
            if (strcmp(hostids[first[j]], hostids[r]) == 0)
                id = j;
        if (id < 0) {
            id = count;
            first[count++] = r;
        }
        node_of[r] = id;
    }
    free(first);
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
