"""pip installs the package offline into a venv that has the torch these
tests run under (Debian's python3 with python3-torch, or the PyTorch 2.x venv
of `make test TORCH=pip`), and it imports from there without PYTHONPATH."""
import os
import subprocess
import sys

import torch

from conftest import SOURCE_DIR


def test_pip_install_offline_into_a_venv(tmp_path):
    venv = tmp_path / "env"
    if torch.__file__.startswith("/usr/lib/python3/"):
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True,
                       timeout=120)
    else:
        # A fresh venv that sees this interpreter's torch through a .pth file
        # (a second copy of the wheel would be gigabytes).
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip()
        with open(os.path.join(site, "torch_of_the_tests.pth"), "w") as f:
            f.write(os.path.dirname(os.path.dirname(torch.__file__)) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
               QKV_BUILD=os.environ.get("QKV_BUILD", str(SOURCE_DIR / "build")))
    r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-build-isolation", str(SOURCE_DIR)],
                       capture_output=True, text=True, timeout=1200, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import qkv, torch; print(qkv.ops.knn(torch.randn(2, 512, 3), 16).shape); print(qkv.__file__)"],
                       capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    shape, where = r.stdout.split("\n")[:2]
    assert shape == "torch.Size([2, 512, 16])" and where.startswith(str(venv)), r.stdout
    installed = os.path.dirname(where)  # the type stubs and PEP 561's marker come with the package
    assert all(os.path.exists(os.path.join(installed, f)) for f in ("ops.pyi", "nn.pyi", "py.typed"))


def test_a_build_folder_refuses_another_torch_and_keeps_its_own(tmp_path):
    # A folder made for Debian's LibTorch, asked for this interpreter's torch:
    # refused in one line, and its cache still names its own torch, so that
    # the next plain `cmake` of it works (the refused -D had stuck there).
    folder = tmp_path / "build"
    r = subprocess.run(["cmake", "-S", str(SOURCE_DIR), "-B", str(folder), "-G", "Ninja",
                        "-DQKV_TORCH_CONFIGURED:INTERNAL=Debian's libtorch-dev",
                        "-DQKV_TORCH_PYTHON_CONFIGURED:INTERNAL=", "-DQKV_TORCH_PYTHON=" + sys.executable],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "was configured for the LibTorch of Debian's libtorch-dev, not" in " ".join(r.stderr.split()), r.stderr
    cache = (folder / "CMakeCache.txt").read_text().splitlines()
    assert "QKV_TORCH_PYTHON:FILEPATH=" in cache, [l for l in cache if l.startswith("QKV_TORCH_PYTHON")]
