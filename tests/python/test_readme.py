"""The README's Python example runs as printed and learns."""
import os
import re
import subprocess
import sys

from conftest import SOURCE_DIR


def test_readme_example_runs_as_printed(tmp_path):
    readme = (SOURCE_DIR / "README.md").read_text()
    marker = "<!-- the block below runs as printed in tests/python/test_readme.py -->"
    assert marker in readme
    code = re.search(r"```python\n(.*?)```", readme[readme.index(marker):], re.S).group(1)
    # It runs in a scratch folder (it writes runs/py-shapes): the package path must not be relative.
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=path))
    assert r.returncode == 0, r.stderr
    accuracy = float(re.search(r"test accuracy ([0-9.]+)", r.stdout).group(1))
    assert accuracy >= 0.7, r.stdout  # 3 classes: chance is 1/3
