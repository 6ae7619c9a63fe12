"""Shared fixtures of the Python tests: the package from build/python (CTest
sets PYTHONPATH), the qkv binary and the source tree (QKV_BINARY,
QKV_SOURCE_DIR), float64 references."""
import os
import pathlib

import pytest
import torch

SOURCE_DIR = pathlib.Path(os.environ.get("QKV_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
QKV_BINARY = os.environ.get("QKV_BINARY", str(SOURCE_DIR / "build" / "qkv"))


@pytest.fixture(autouse=True)
def _seeded():
    torch.manual_seed(0)
    yield


@pytest.fixture
def qkv_binary():
    if not os.path.exists(QKV_BINARY):
        pytest.fail("the qkv binary is not at %s (set QKV_BINARY)" % QKV_BINARY)
    return QKV_BINARY


def random_rotation(dtype=torch.float64, generator=None):
    """A uniformly random rotation [3, 3] (QR of a Gaussian matrix, det +1)."""
    q, r = torch.linalg.qr(torch.randn(3, 3, dtype=torch.float64, generator=generator))
    q = q * torch.sign(torch.diagonal(r))
    if torch.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q.to(dtype)
