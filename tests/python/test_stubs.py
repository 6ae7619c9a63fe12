"""The type stubs in the source tree (python/qkv/*.pyi, for mypy, pyright and
IDEs) are what `python -m qkv._stubs` writes from the bindings now: a binding
changed without regenerating them fails here."""
import ast

from conftest import SOURCE_DIR
from qkv import _stubs


def test_the_stubs_are_current_and_parse():
    for file, make in _stubs.STUBS.items():
        expected = make()
        ast.parse(expected)
        path = SOURCE_DIR / "python" / "qkv" / file
        assert path.read_text() == expected, (
            "%s is stale: PYTHONPATH=build/python /usr/bin/python3 -m qkv._stubs python/qkv" % path)
    assert (SOURCE_DIR / "python" / "qkv" / "py.typed").exists()


def test_the_stubs_name_every_public_function_and_module():
    import qkv
    ops = ast.parse((SOURCE_DIR / "python" / "qkv" / "ops.pyi").read_text())
    assert {f.name for f in ops.body if isinstance(f, ast.FunctionDef)} == set(qkv.ops.__all__)
    nn = ast.parse((SOURCE_DIR / "python" / "qkv" / "nn.pyi").read_text())
    classes = {c.name for c in nn.body if isinstance(c, ast.ClassDef)}
    assert classes == {n for n in qkv.nn.__all__ if isinstance(getattr(qkv.nn, n), type)} - {"KVCache"}
