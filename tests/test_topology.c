/*
 * The topology derived from host ids: hosts numbered by their lowest rank,
 * and how many ranks share a machine's CPUs (same boot id, whatever the
 * hostname or network namespace: hosts simulated by namespaces).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "fccl/core.h"
#include "topology.h"

Test(topology, hosts_numbered_by_lowest_rank)
{
    const char *ids[] = {"b/k1/7", "a/k1/8", "b/k1/7", "c/k2/7", "a/k1/8"};
    int node_of[5], nnodes = 0;
    cr_assert_eq(topo_assign_nodes(ids, 5, node_of, &nnodes), FCCL_OK);
    cr_assert_eq(nnodes, 3);
    int want[5] = {0, 1, 0, 2, 1};
    for (int r = 0; r < 5; r++)
        cr_assert_eq(node_of[r], want[r], "rank %d: node %d, want %d", r,
                     node_of[r], want[r]);
}

Test(topology, machine_counts_namespaces_of_one_kernel)
{
    /* two namespaces of machine k1 (ranks 0-3), one host k2 (4, 5) */
    const char *ids[] = {"node1/k1/100", "node1/k1/100", "node2/k1/200",
                         "node2/k1/200", "node9/k2/100", "node9/k2/100"};
    for (int me = 0; me < 4; me++)
        cr_assert_eq(topo_machine_size(ids, 6, me), 4, "rank %d", me);
    cr_assert_eq(topo_machine_size(ids, 6, 4), 2);
    cr_assert_eq(topo_machine_size(ids, 6, 5), 2);
}

Test(topology, boot_id_compared_whole)
{
    /* "k1" must not match "k10", nor an empty boot id a missing one */
    const char *ids[] = {"h/k1/1", "h/k10/1", "h//1", "h/k1/2"};
    cr_assert_eq(topo_machine_size(ids, 4, 0), 2);
    cr_assert_eq(topo_machine_size(ids, 4, 1), 1);
    cr_assert_eq(topo_machine_size(ids, 4, 2), 1);
}

Test(topology, fake_nodes_are_one_machine)
{
    const char *ids[] = {"fake-node-0", "fake-node-0", "fake-node-1",
                         "fake-node-1"};
    for (int me = 0; me < 4; me++)
        cr_assert_eq(topo_machine_size(ids, 4, me), 4);
}
