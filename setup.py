"""pip's entry: builds the module qkv._qkv with the project's CMake build
(the build/ folder, or $QKV_BUILD) and puts it beside the package's .py
files. Metadata is in pyproject.toml."""
import glob
import importlib.machinery
import os
import shutil
import subprocess
import sys

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
# setuptools' own work folders go inside the CMake build folder, not the source tree.
BUILD = os.environ.get("QKV_BUILD", os.path.join(ROOT, "build"))
os.makedirs(os.path.join(BUILD, "setuptools"), exist_ok=True)


class BuildModuleWithCMake(build_py):
    def run(self):
        build_dir = BUILD
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release"],
                              stdout=subprocess.DEVNULL)
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "qkv_python", "-j", str(os.cpu_count())])
        built = glob.glob(os.path.join(build_dir, "python", "qkv", "_qkv*.so"))
        usable = [f for f in built if any(f.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)]
        if not usable:
            sys.exit("qkv: %s holds %s, which this interpreter (%s) cannot import; qkv builds for Debian's "
                     "/usr/bin/python3 (or a venv of it)" % (build_dir, built or "no module", sys.executable))
        super().run()
        shutil.copy(usable[0], os.path.join(self.build_lib, "qkv"))


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True  # a platform wheel: the package holds a compiled module


setup(cmdclass={"build_py": BuildModuleWithCMake}, distclass=BinaryDistribution,
      options={"build": {"build_base": os.path.join(BUILD, "setuptools")},
               "egg_info": {"egg_base": os.path.join(BUILD, "setuptools")}})
