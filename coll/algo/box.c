/*
 * Boxes of dense tensors: the packing and unpacking under the shaped
 * collectives (neighbor_exchange_v2, all_to_all_dims).
 *
 * A box is the sub-tensor [lo[i], lo[i] + ext[i]) of every dimension i of
 * a C-order tensor; packed, it is ext[0] x .. x ext[nd-1] elements in the
 * same order.  The copy moves runs as long as the layout allows: the
 * trailing dimensions that the box spans whole are contiguous in both
 * forms and merge into one memcpy per index of the dimensions before
 * them (a box of whole rows of a 2-D tensor is a single memcpy).
 */
#include <string.h>

#include "algos.h"

void coll_box_copy(unsigned char *tensor, const size_t *dims, int nd,
                   const size_t *lo, const size_t *ext, size_t es,
                   unsigned char *box, int to_box)
{
    size_t stride[COLL_MAX_DIMS], idx[COLL_MAX_DIMS];
    if (nd < 1 || nd > COLL_MAX_DIMS)
        return;
    for (int i = 0; i < nd; i++)
        if (ext[i] == 0)
            return;
    stride[nd - 1] = es;
    for (int i = nd - 1; i > 0; i--)
        stride[i - 1] = stride[i] * dims[i];
    /* the run: dimension k and all the whole ones after it */
    int k = nd - 1;
    while (k > 0 && ext[k] == dims[k])
        k--;
    size_t run = ext[k] * stride[k];
    size_t base = 0;
    for (int i = 0; i < nd; i++) {
        base += lo[i] * stride[i];
        idx[i] = 0;
    }
    for (;;) {
        size_t off = base;
        for (int i = 0; i < k; i++)
            off += idx[i] * stride[i];
        if (to_box)
            memcpy(box, tensor + off, run);
        else
            memcpy(tensor + off, box, run);
        box += run;
        int i = k - 1; /* the odometer over dimensions 0..k-1 */
        while (i >= 0 && ++idx[i] == ext[i])
            idx[i--] = 0;
        if (i < 0)
            return;
    }
}
