"""setup.py — the build step of splat's Python package (metadata is in pyproject.toml).

Bundles into the package:
  - libsplat.so: $SPLAT_LIBRARY when set, else built by CMake from this repository
    into <repo>/build-python;
  - include/splat.h (so splat.jax can compile its FFI handlers later if needed);
  - libsplat_jax.so, when jaxlib's FFI headers are found ($SPLAT_JAX_INCLUDE, or an
    importable jax: use `pip install --no-build-isolation ./python` so that the build
    sees the environment's jax). Without it, splat.jax compiles the handlers on first
    import instead.
The wheel is tagged py3-none-<platform>: the package is ctypes-only, so one build
serves every Python version.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _helpers():
    """splat/_build.py, loaded by path (importing the package would need numpy)."""
    spec = importlib.util.spec_from_file_location("splat_build_helpers", HERE / "splat" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPyWithLibraries(build_py):
    def run(self) -> None:
        super().run()
        b = _helpers()
        pkg = Path(self.build_lib) / "splat"
        pkg.mkdir(parents=True, exist_ok=True)
        prebuilt = os.environ.get("SPLAT_LIBRARY")
        if prebuilt:
            lib = Path(prebuilt).resolve()
            if not lib.is_file():
                raise b.BuildError(f"SPLAT_LIBRARY={prebuilt} is not a file")
        else:
            lib = b.cmake_build(REPO, REPO / "build-python")
        shutil.copyfile(lib, pkg / "libsplat.so")
        include = pkg / "include"
        include.mkdir(exist_ok=True)
        header = REPO / "include" / "splat.h"
        if header.is_file():
            shutil.copyfile(header, include / "splat.h")
        jax_include = b.jax_include_dir()
        if jax_include is not None and (include / "splat.h").is_file():
            b.compile_jax_ffi(HERE / "splat" / "_xla_ffi.c", jax_include, include, pkg / "libsplat.so",
                              pkg / "libsplat_jax.so")
            print(f"splat: built libsplat_jax.so against {jax_include}")
        else:
            print("splat: jax not visible to the build; splat.jax will compile its handlers on first use")


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


cmdclass = {"build_py": BuildPyWithLibraries}
try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel


class PlatformWheel(bdist_wheel):
    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


cmdclass["bdist_wheel"] = PlatformWheel

setup(cmdclass=cmdclass, distclass=BinaryDistribution)
