"""fccl: MindSpore's ``mindspore.communication`` / ``comm_func`` API (which
mirrors torch.distributed) over libfccl, on NumPy arrays, buffer-protocol
objects and torch CPU tensors.

    import numpy as np, fccl
    fccl.init_process_group()            # RANK, WORLD_SIZE, MASTER_ADDR/PORT
    x = np.full(4, fccl.get_rank(), np.float32)
    fccl.all_reduce(x)                   # in place: every rank has the sum
    fccl.destroy_process_group()

Groups are passed by name (``new_group`` / ``create_group``) or as Group
objects; ``None`` is the world group ``"fccl_world_group"``.  ``src``,
``dst`` and ``peer`` are global ranks.  Blocking calls release the GIL; a
timeout raises :class:`TimeoutError`, a dead peer :class:`PeerError`, and
Ctrl-C in a blocking call raises KeyboardInterrupt (the group is then
failed, as after a timeout).
"""
import os as _os

# libfabric loads PSM's libinfinipath, whose constructor replaces the
# handlers of SIGINT, SIGTERM, SIGSEGV, SIGBUS, SIGILL and SIGABRT with one
# that calls exit(1): Ctrl-C would end the interpreter instead of raising
# KeyboardInterrupt.  This variable, read by that constructor, keeps
# Python's handlers.
_os.environ.setdefault("IPATH_NO_BACKTRACE", "1")

from . import _fccl  # noqa: E402
from ._fccl import (CommHandle, Error, Group, PeerError, RevokedError,
                    TimeoutError)
from .coll import *  # noqa: F401,F403
from .coll import __all__ as _coll_all
from .moe import MoeConfig, MoeDispatch
from .objects import *  # noqa: F401,F403
from .objects import __all__ as _obj_all
from .pg import *  # noqa: F401,F403
from .pg import __all__ as _pg_all
from .store import TCPStore

__version__ = _fccl.version

__all__ = (["TCPStore", "CommHandle", "Group", "Error", "TimeoutError",
            "PeerError", "RevokedError", "MoeConfig", "MoeDispatch"] +
           _pg_all + _coll_all + _obj_all)
