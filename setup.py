"""pip's entry: builds the module qkv._qkv with the project's CMake build
against the torch of the interpreter that runs pip, and puts it beside the
package's .py files. The build folder is build/ for Debian's torch (the one
`make` uses), build-torch<version>-py<X.Y>/ for any other, or $QKV_BUILD.
Metadata is in pyproject.toml."""
import glob
import importlib.machinery
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))


def torch_of_this_interpreter():
    """(version, is Debian's python3-torch, its CMake prefix); exits with one line without torch."""
    try:
        import torch
        import torch.utils
    except ImportError:
        sys.exit("qkv: %s has no torch; install torch >= 2.1 into it first (or use Debian's /usr/bin/python3 "
                 "with python3-torch), then pip install --no-build-isolation ." % sys.executable)
    return torch.__version__, torch.__file__.startswith("/usr/lib/python3/"), torch.utils.cmake_prefix_path


def configured_torch_dir(build_dir):
    """The Torch_DIR a configured build folder found, or None."""
    try:
        with open(os.path.join(build_dir, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith("Torch_DIR:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


TORCH_VERSION, DEBIAN_TORCH, TORCH_PREFIX = torch_of_this_interpreter()
PYTHON_VERSION = "%d.%d" % sys.version_info[:2]
# setuptools' own work folders go inside the CMake build folder, not the source tree.
BUILD = os.environ.get("QKV_BUILD") or os.path.join(
    ROOT, "build" if DEBIAN_TORCH else "build-torch%s-py%s" % (TORCH_VERSION.replace("+", "-"), PYTHON_VERSION))
os.makedirs(os.path.join(BUILD, "setuptools"), exist_ok=True)


class BuildModuleWithCMake(build_py):
    def run(self):
        build_dir = BUILD
        # Debian's torch is the build's default LibTorch; any other comes from
        # this interpreter (its headers, libraries, C++ ABI and pybind11).
        # (A venv of Debian's python3 shares its ABI: build/ is the folder `make` uses.)
        # A folder already configured for this same torch keeps its settings
        # (`make TORCH=pip`'s build-pip/ from a venv that sees .venv's torch).
        same_torch = configured_torch_dir(build_dir) == os.path.join(TORCH_PREFIX, "Torch")
        torch_python = [] if DEBIAN_TORCH or same_torch else ["-DQKV_TORCH_PYTHON=" + sys.executable]
        # QKV_WITHOUT="hdf5;nifti" leaves optional libraries out (docs/build.md).
        without = ["-DQKV_WITHOUT=" + os.environ["QKV_WITHOUT"]] if "QKV_WITHOUT" in os.environ else []
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"] +
                              torch_python + without, stdout=subprocess.DEVNULL)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "qkv_python", "-j", str(os.cpu_count())])
        built = glob.glob(os.path.join(build_dir, "python", "qkv", "_qkv*.so"))
        usable = [f for f in built if any(f.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)]
        if not usable:
            sys.exit("qkv: %s holds %s, which this interpreter (%s) cannot import; build with QKV_BUILD set "
                     "to a folder of its own" % (build_dir, built or "no module", sys.executable))
        super().run()
        shutil.copy(usable[0], os.path.join(self.build_lib, "qkv"))
        shutil.copy(os.path.join(build_dir, "python", "qkv", "_built_for.json"), os.path.join(self.build_lib, "qkv"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: the package holds a compiled module


setup(cmdclass={"build_py": BuildModuleWithCMake}, distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join(BUILD, "setuptools")},
               "egg_info": {"egg_base": os.path.join(BUILD, "setuptools")}})
