"""import qkv makes glibc's malloc keep freed memory (a training step from
python3 then runs at the C++ speed; docs/python.md): a large block comes
from the heap, not from a mapping of its own that is unmapped on free."""
import ctypes
import os
import subprocess
import sys

import pytest
import torch

import qkv


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def glibc():
    libc = ctypes.CDLL("libc.so.6")
    if not hasattr(libc, "mallinfo2") or "jemalloc" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("glibc's malloc with mallinfo2 (2.33+) is not the allocator here")
    libc.mallinfo2.restype = MallInfo2
    return libc


def mappings_while_holding_a_large_block(libc):
    # Larger than every free chunk the heap holds, so that it comes either from a new mapping or from a grown heap.
    block = torch.empty(libc.mallinfo2().fordblks + (64 << 20), dtype=torch.uint8)
    mappings = libc.mallinfo2().hblks
    del block
    return mappings


def test_import_keeps_large_freed_blocks_in_the_heap():
    libc = glibc()
    before = libc.mallinfo2().hblks
    assert mappings_while_holding_a_large_block(libc) == before
    assert qkv.keep_freed_memory(False)
    try:
        assert mappings_while_holding_a_large_block(libc) == before + 1  # glibc's way: a mapping of its own
    finally:
        qkv.keep_freed_memory(True)
    assert mappings_while_holding_a_large_block(libc) == before
    assert qkv.release_memory() >= 0


def test_the_environment_can_leave_glibc_as_it_is():
    glibc()
    check = ("import ctypes, torch, qkv\n"
             "from test_allocator import MallInfo2, mappings_while_holding_a_large_block\n"
             "libc = ctypes.CDLL('libc.so.6'); libc.mallinfo2.restype = MallInfo2\n"
             "before = libc.mallinfo2().hblks\n"
             "print(mappings_while_holding_a_large_block(libc) - before)\n")
    env = dict(os.environ, QKV_KEEP_FREED_MEMORY="0",
               PYTHONPATH=os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"
    env["QKV_KEEP_FREED_MEMORY"] = "yes"
    r = subprocess.run([sys.executable, "-c", "import qkv"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode != 0 and "QKV_KEEP_FREED_MEMORY=yes: expected 0" in r.stderr
