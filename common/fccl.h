/* fccl: the umbrella header.  Link with -lfccl (pkg-config fccl). */
#ifndef FCCL_H
#define FCCL_H
#include "fccl/core.h"
#include "fccl/store.h"
#include "fccl/coll.h"
#include "fccl/pg.h"
#include "fccl/moe.h"
#endif
