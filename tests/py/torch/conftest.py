"""The multi-rank torch suites: every rank of an fccl-run launch runs the
same pytest session (tests run in the same order everywhere).  The
default group is backend "fccl" over torch's env:// (fccl-run's store);
a Gloo group over the same ranks is there to compare with."""
import datetime

import pytest
import torch
import torch.distributed as dist

import fccl.torch  # noqa: F401  (registers "fccl")


@pytest.fixture(scope="session", autouse=True)
def world():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("fccl", timeout=datetime.timedelta(seconds=60))
    yield
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="session")
def gloo(world):
    return dist.new_group(backend="gloo")


@pytest.fixture
def rank():
    return dist.get_rank()


@pytest.fixture
def size():
    return dist.get_world_size()
