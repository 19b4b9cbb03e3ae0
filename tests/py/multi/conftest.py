"""The multi-rank suites: every rank of an fccl-run launch runs the same
pytest session, so the tests run in the same order everywhere and each
collective meets its peers.  The world is made once per session."""
import pytest

import fccl


@pytest.fixture(scope="session", autouse=True)
def world():
    fccl.init_process_group()
    yield
    fccl.barrier()
    fccl.destroy_process_group()


@pytest.fixture
def rank():
    return fccl.get_rank()


@pytest.fixture
def size():
    return fccl.get_world_size()
