"""The README's Python example and docs/python.md's tutorial run as printed and learn."""
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


def test_python_tutorial_runs_as_printed(tmp_path):
    # docs/python.md's tutorial: two DDP ranks, AdamW, a cosine schedule, an
    # EMA, and the embedding; written to a file as the page says (spawn
    # re-imports it in each rank).
    page = (SOURCE_DIR / "docs" / "python.md").read_text()
    marker = "<!-- the block below runs as printed in tests/python/test_readme.py -->"
    code = re.search(r"```python\n(.*?)```", page[page.index(marker):], re.S).group(1)
    (tmp_path / "train_vnt.py").write_text(code)
    path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    r = subprocess.run([sys.executable, "train_vnt.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, PYTHONPATH=path))
    assert r.returncode == 0, r.stderr
    accuracy = float(re.search(r"EMA test accuracy ([0-9.]+)", r.stdout).group(1))
    assert accuracy >= 0.6, r.stdout  # 3 classes: chance is 1/3
    assert "embeddings (30, " in r.stdout, r.stdout
