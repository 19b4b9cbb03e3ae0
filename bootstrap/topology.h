/* Internal: host identity and the topology derived from every rank's. */
#ifndef FCCL_BOOT_TOPOLOGY_H
#define FCCL_BOOT_TOPOLOGY_H

#include <stddef.h>

#define HOSTID_MAX 160

/* This process's host identity: hostname, boot id and network namespace,
 * so two containers or namespaces on one machine are told apart.
 * FCCL_FAKE_NODES=K (testing) replaces it with "fake-node-<rank*K/size>".
 * Never fails; fields it cannot read are left out. */
void topo_host_id(char *out, size_t outlen, int rank, int world_size);

/* Number hosts by their lowest rank: node_of[r] for each rank, *nnodes.
 * hostids[r] are NUL-terminated strings.  Returns FCCL_OK or NOMEM. */
int topo_assign_nodes(const char *const *hostids, int n, int *node_of,
                      int *nnodes);

/* How many of the n ranks run on my machine (same kernel: the boot id of
 * their host ids), whatever their hostname or network namespace: ranks in
 * namespaces or containers of one machine share its CPUs.  Host ids
 * without a boot id (FCCL_FAKE_NODES) all count as one machine. */
int topo_machine_size(const char *const *hostids, int n, int me);

/* My local rank and local size given node_of. */
void topo_local(const int *node_of, int n, int rank, int *local_rank,
                int *local_size);

#endif
