/** @file fccl/fccl.h
 *
 * fccl: the umbrella header.  `#include <fccl/fccl.h>` and link with
 * -lfccl (`pkg-config --cflags --libs fccl`).
 *
 * Which header holds what (each one can also be included alone):
 *
 *   fccl/core.h   status codes (FCCL_OK, FCCL_ERR_*), fccl_strerror(),
 *                 the per-thread error message fccl_last_error(), the
 *                 version macros and fccl_version(), FCCL_API.
 *   fccl/store.h  the TCPStore client: connect to tcpstore-server or a
 *                 PyTorch TCPStore server, set/get/add/wait/... keys,
 *                 prefixed views.
 *   fccl/pg.h     process groups: fccl_init() / fccl_finalize(), the
 *                 world group, rank and size, the discovered topology
 *                 (hosts, local ranks), creating, splitting, aborting and
 *                 destroying groups, rank translation.
 *   fccl/coll.h   data types and reduction ops, point-to-point and
 *                 collective operations on a group (blocking, or
 *                 asynchronous with a request handle), fccl_wait() and
 *                 fccl_test(), forcing an algorithm.
 *   fccl/moe.h    the MoE operators (fccl_moe_dispatch,
 *                 fccl_moe_combine, fccl_moe_combine_add_rms_norm),
 *                 built on the collectives of fccl/coll.h.
 *   fccl/server.h the TCPStore server itself, embeddable: options (every
 *                 tcpstore-server option), create, serve on a thread or
 *                 the caller's, wait for workers, reload, stop, free.
 *
 * A typical program: fccl_init() (pg.h) to join the world, collectives
 * (coll.h) on the world group or on groups made from it, fccl_finalize().
 * Every call returns FCCL_OK or a negative FCCL_ERR_* (core.h); after a
 * failure fccl_last_error() says what went wrong.
 */
#ifndef FCCL_H
#define FCCL_H
#include "fccl/core.h"
#include "fccl/store.h"
#include "fccl/coll.h"
#include "fccl/pg.h"
#include "fccl/moe.h"
#include "fccl/server.h"
#endif
