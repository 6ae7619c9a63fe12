"""pip installs the package offline into a venv of Debian's python3, and it
imports from there without PYTHONPATH."""
import os
import subprocess

from conftest import SOURCE_DIR


def test_pip_install_offline_into_a_venv(tmp_path):
    venv = tmp_path / "env"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
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
