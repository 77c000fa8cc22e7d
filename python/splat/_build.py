"""splat._build — builds the shared libraries the package needs.

Used by ``python/setup.py`` at install time and by ``splat.jax`` at run time (when
``libsplat_jax.so`` was not built at install time, e.g. because jax was not visible in
pip's isolated build environment). It imports nothing from the package, so setup.py
can load it by path.

- ``cmake_build(repo, build_dir)``: configures and builds libsplat with CMake.
- ``jax_include_dir()``: the XLA FFI headers of the installed jaxlib, or None.
- ``compile_jax_ffi(...)``: compiles ``_xla_ffi.c`` into ``libsplat_jax.so`` linking
  libsplat (C11, ``-Wall -Wextra -Werror``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional


class BuildError(RuntimeError):
    """A build step failed; the message carries the command's output."""


def _run(cmd: List[str], what: str) -> None:
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise BuildError(f"{what} failed ({' '.join(cmd)}):\n{res.stdout[-4000:]}{res.stderr[-4000:]}")


def cmake_build(repo: Path, build_dir: Path, jobs: Optional[int] = None) -> Path:
    """Builds libsplat.so from the repository at ``repo`` into ``build_dir`` and
    returns the real file (symlinks resolved)."""
    if not (repo / "CMakeLists.txt").is_file() or not (repo / "include" / "splat.h").is_file():
        raise BuildError(f"{repo} is not a splat source tree (no CMakeLists.txt / include/splat.h)")
    cmake = shutil.which("cmake")
    if not cmake:
        raise BuildError("cmake not found: install cmake, or set SPLAT_LIBRARY to a prebuilt libsplat.so")
    jobs = jobs or os.cpu_count() or 2
    _run([cmake, "-S", str(repo), "-B", str(build_dir), "-DSPLAT_BUILD_TESTS=OFF"], "cmake configure")
    _run([cmake, "--build", str(build_dir), "--target", "splat", "-j", str(jobs)], "cmake build")
    lib = build_dir / "libsplat.so"
    if not lib.exists():
        raise BuildError(f"cmake built no {lib}")
    return lib.resolve()


def jax_include_dir() -> Optional[Path]:
    """``$SPLAT_JAX_INCLUDE``, else ``jax.ffi.include_dir()`` of an importable jax;
    None when neither holds ``xla/ffi/api/c_api.h``."""
    candidates = []
    if os.environ.get("SPLAT_JAX_INCLUDE"):
        candidates.append(Path(os.environ["SPLAT_JAX_INCLUDE"]))
    try:
        import jax.ffi

        candidates.append(Path(jax.ffi.include_dir()))
    except Exception:  # jax absent or too old: no FFI headers
        pass
    for c in candidates:
        if (c / "xla" / "ffi" / "api" / "c_api.h").is_file():
            return c
    return None


def compiler() -> Optional[str]:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def compile_jax_ffi(source: Path, jax_include: Path, splat_include: Path, libsplat: Path, out: Path) -> Path:
    """Compiles the FFI handlers into ``out`` (written atomically), linked against
    ``libsplat`` (its SONAME is recorded; splat.jax loads libsplat first, so the
    dependency resolves to the copy already in the process)."""
    cc = compiler()
    if not cc:
        raise BuildError("no C compiler (cc, gcc or clang) to build libsplat_jax.so")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".libsplat_jax-", suffix=".so", dir=str(out.parent))
    os.close(fd)
    try:
        _run(
            [cc, "-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-pthread",
             "-Wall", "-Wextra", "-Werror", "-I", str(splat_include), "-I", str(jax_include),
             str(source), "-o", tmp, str(libsplat), "-Wl,-rpath,$ORIGIN"],
            "compiling libsplat_jax.so",
        )
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out
