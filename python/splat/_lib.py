"""splat._lib — the ctypes layer over libsplat.so.

Everything that knows the C ABI lives here and only here: where the library is found,
the struct mirrors of ``include/splat.h`` (splat_tensor, splat_plan_desc, splat_report,
splat_environment, splat_context_options), the function prototypes, the status check
that turns a failing call into :class:`splat.Error`, and the per-device contexts.

Library search order (first hit wins):
  1. the copy bundled inside the package (``splat/libsplat.so``, put there by
     ``pip install``);
  2. ``$SPLAT_LIBRARY`` (a full path to a prebuilt libsplat.so);
  3. the repository's build trees: ``build-python/`` (what ``pip install`` builds) and
     ``build/`` (the README's ``cmake -S . -B build``).
The library is loaded on first use, so ``import splat`` works even when it is missing.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence

from .errors import STATUS_NAMES, Error

PACKAGE_DIR = Path(__file__).resolve().parent
# python/splat/_lib.py -> the repository root, when the package runs from a checkout.
REPO_ROOT = PACKAGE_DIR.parent.parent
BUILD_DIRS = ("build-python", "build")

MAX_SEGMENTS = 8  # SPLAT_MAX_SEGMENTS
MAX_HEAD_DIM = 256  # SPLAT_MAX_HEAD_DIM
DEFAULT_SCALE = 0.0  # SPLAT_DEFAULT_SCALE

# splat_dtype values, keyed by the dtype's name in numpy / ml_dtypes / jax / torch.
DTYPE_CODES = {"float32": 0, "float16": 1, "bfloat16": 2}
DTYPE_NAMES = {code: name for name, code in DTYPE_CODES.items()}
BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2}


# ------------------------------------------------------------------ struct mirrors
# Field order and types follow include/splat.h exactly; tests/test_abi.py compiles a
# C program against the header and compares sizes and offsets.

_i64 = ctypes.c_int64


class SplatTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("dtype", ctypes.c_int),
        ("shape", _i64 * 4),
        ("strides", _i64 * 4),
    ]


class SplatContextOptions(ctypes.Structure):
    _fields_ = [("backend", ctypes.c_int), ("device", ctypes.c_int), ("num_threads", ctypes.c_int)]


class SplatEnvironment(ctypes.Structure):
    _fields_ = [
        ("cpu_threads", ctypes.c_int),
        ("cuda_available", ctypes.c_int),
        ("cuda_devices", ctypes.c_int),
        ("cuda_driver_version", ctypes.c_int),
        ("nvrtc_available", ctypes.c_int),
        ("nvrtc_version", ctypes.c_int),
        ("device_name", ctypes.c_char * 128),
        ("device_cc_major", ctypes.c_int),
        ("device_cc_minor", ctypes.c_int),
    ]


class SplatReport(ctypes.Structure):
    _fields_ = [
        ("seq_q", _i64),
        ("seq_k", _i64),
        ("nnz", _i64),
        ("density", ctypes.c_double),
        ("max_row_nnz", _i64),
        ("row_width", _i64),
        ("max_segments", ctypes.c_int),
        ("rows_by_segments", _i64 * (MAX_SEGMENTS + 2)),
        ("segments", _i64),
        ("regular_nnz", _i64),
        ("regular_fraction", ctypes.c_double),
        ("irregular_rows", _i64),
        ("acsr_bytes", _i64),
        ("csr_bytes", _i64),
        ("bsr_blocks", _i64),
        ("bsr_bytes", _i64),
        ("tile_q", ctypes.c_int),
        ("tile_k", ctypes.c_int),
        ("rows_permuted", ctypes.c_int),
        ("tile_rows_max", ctypes.c_int),
        ("query_tiles", _i64),
        ("key_runs", _i64),
        ("full_tiles", _i64),
        ("predicated_tiles", _i64),
        ("computed", _i64),
        ("tile_waste", ctypes.c_double),
        ("analysis_ms", ctypes.c_double),
        ("plan_ms", ctypes.c_double),
        ("report_ms", ctypes.c_double),
        ("kernels_ms", ctypes.c_double),
        ("kernels_compiled", ctypes.c_int),
        ("device_bytes", _i64),
        ("workspace_bytes", _i64),
    ]

    def to_dict(self) -> Dict[str, object]:
        out: Dict[str, object] = {}
        for name, _ in self._fields_:
            value = getattr(self, name)
            out[name] = list(value) if name == "rows_by_segments" else value
        return out


# splat_plan_desc.ops bits (include/splat.h SPLAT_OPS_*): the operations a plan is built for.
OPS_ATTENTION = 8
OPS_ATTENTION_BACKWARD = 16
OPS_UNFUSED = 7  # sddmm, softmax, spmm


class SplatPlanDesc(ctypes.Structure):
    _fields_ = [
        ("batch", _i64),
        ("heads", _i64),
        ("heads_kv", _i64),
        ("head_dim", _i64),
        ("dtype", ctypes.c_int),
        ("tile_q", ctypes.c_int),
        ("tile_k", ctypes.c_int),
        ("max_segments", ctypes.c_int),
        ("ops", ctypes.c_uint),
    ]


# ------------------------------------------------------------------ prototypes

_p = ctypes.c_void_p
_P = ctypes.POINTER
_PROTOTYPES = {
    "splat_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "splat_last_error": (ctypes.c_char_p, [_p]),
    "splat_version": (ctypes.c_char_p, []),
    "splat_context_create": (ctypes.c_int, [_P(SplatContextOptions), _P(_p)]),
    "splat_context_destroy": (None, [_p]),
    "splat_context_backend": (ctypes.c_int, [_p]),
    "splat_environment_query": (ctypes.c_int, [_P(SplatEnvironment), ctypes.c_char_p, ctypes.c_size_t]),
    "splat_pattern_parse": (ctypes.c_int, [ctypes.c_char_p, _i64, _i64, _P(_p)]),
    "splat_pattern_from_mask": (ctypes.c_int, [_p, _i64, _i64, _P(_p)]),
    "splat_pattern_from_npy": (ctypes.c_int, [ctypes.c_char_p, _P(_p)]),
    "splat_pattern_union": (ctypes.c_int, [_p, _p, _P(_p)]),
    "splat_pattern_intersect": (ctypes.c_int, [_p, _p, _P(_p)]),
    "splat_pattern_destroy": (None, [_p]),
    "splat_pattern_seq_q": (_i64, [_p]),
    "splat_pattern_seq_k": (_i64, [_p]),
    "splat_pattern_spec": (ctypes.c_char_p, [_p]),
    "splat_pattern_row": (ctypes.c_int, [_p, _i64, _P(_i64), _i64, _P(_i64)]),
    "splat_analyze": (ctypes.c_int, [_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, _P(SplatReport)]),
    "splat_report_format": (
        ctypes.c_int,
        [_P(SplatReport), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, _P(ctypes.c_size_t)],
    ),
    "splat_plan_create": (ctypes.c_int, [_p, _p, _P(SplatPlanDesc), _P(_p)]),
    "splat_plan_destroy": (None, [_p]),
    "splat_plan_report": (ctypes.c_int, [_p, _P(SplatReport)]),
    "splat_plan_row_width": (_i64, [_p]),
    "splat_sddmm": (ctypes.c_int, [_p, _P(SplatTensor), _P(SplatTensor), ctypes.c_float, _P(SplatTensor), _p]),
    "splat_softmax": (
        ctypes.c_int,
        [_p, _P(SplatTensor), ctypes.c_float, _P(SplatTensor), _P(SplatTensor), _p],
    ),
    "splat_spmm": (ctypes.c_int, [_p, _P(SplatTensor), _P(SplatTensor), _P(SplatTensor), _p]),
    "splat_attention": (
        ctypes.c_int,
        [_p, _P(SplatTensor), _P(SplatTensor), _P(SplatTensor), ctypes.c_float, _P(SplatTensor), _P(SplatTensor), _p],
    ),
    "splat_attention_backward": (
        ctypes.c_int,
        [_p] + [_P(SplatTensor)] * 6 + [ctypes.c_float] + [_P(SplatTensor)] * 3 + [_p],
    ),
}


# ------------------------------------------------------------------ loading


def find_library(filename: str, env_var: str) -> List[Path]:
    """Candidate paths for one of splat's shared libraries, in search order
    (bundled copy, ``$env_var``, repository build trees); only existing files. A
    ``$env_var`` naming no file is an error, not a path skipped."""
    candidates = [PACKAGE_DIR / filename]
    if os.environ.get(env_var):
        named = Path(os.environ[env_var])
        if not named.is_file():
            raise Error("SPLAT_ERR_NO_LIBRARY", f"${env_var}={named} is not a file")
        candidates.append(named)
    candidates += [REPO_ROOT / d / filename for d in BUILD_DIRS]
    return [c for c in candidates if c.is_file()]


_lock = threading.RLock()
_lib: Optional[ctypes.CDLL] = None
_lib_path: Optional[Path] = None

HOW_TO_BUILD = (
    "build it with `pip install ./python` from the repository root (runs CMake), or "
    "`cmake -S . -B build && cmake --build build -j`, or point $SPLAT_LIBRARY at a "
    "prebuilt libsplat.so"
)


def lib() -> ctypes.CDLL:
    """The loaded libsplat, with prototypes set (loaded once, on first use)."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None:
            found = find_library("libsplat.so", "SPLAT_LIBRARY")
            if not found:
                raise Error(
                    "SPLAT_ERR_NO_LIBRARY",
                    f"libsplat.so was not found (looked in {PACKAGE_DIR}, $SPLAT_LIBRARY, "
                    f"{', '.join(str(REPO_ROOT / d) for d in BUILD_DIRS)}): {HOW_TO_BUILD}",
                )
            try:
                handle = ctypes.CDLL(str(found[0]))
            except OSError as exc:
                raise Error("SPLAT_ERR_NO_LIBRARY", f"cannot load {found[0]}: {exc}") from exc
            for name, (restype, argtypes) in _PROTOTYPES.items():
                try:
                    fn = getattr(handle, name)
                except AttributeError as exc:
                    raise Error(
                        "SPLAT_ERR_NO_LIBRARY",
                        f"{found[0]} lacks {name}: it is older than this package; {HOW_TO_BUILD}",
                    ) from exc
                fn.restype = restype
                fn.argtypes = argtypes
            _lib_path = found[0]
            _lib = handle
    return _lib


def library_path() -> Path:
    """Path of the libsplat.so in use (loads it)."""
    lib()
    assert _lib_path is not None
    return _lib_path


def last_error() -> str:
    """The calling thread's last detailed message."""
    msg = lib().splat_last_error(None)
    return msg.decode("utf-8", "replace") if msg else ""


def check(status: int) -> None:
    """Raises :class:`splat.Error` for a failing status, with the thread's message."""
    if status != 0:
        raise Error(STATUS_NAMES.get(status, f"SPLAT_ERR_UNKNOWN({status})"), last_error())


def version() -> str:
    return lib().splat_version().decode()


# ------------------------------------------------------------------ contexts


def parse_device(device: str) -> tuple:
    """``"cpu"``, ``"cuda"``, ``"cuda:1"`` -> (backend name, ordinal)."""
    name, _, ordinal = str(device).partition(":")
    if name not in ("cpu", "cuda") or (ordinal and not ordinal.isdigit()):
        raise Error(
            "SPLAT_ERR_INVALID_ARGUMENT", f"device={device!r}: expected 'cpu', 'cuda' or 'cuda:N'"
        )
    return name, int(ordinal or 0)


_contexts: Dict[tuple, int] = {}


def context(device: str = "cpu") -> int:
    """The process-wide splat_context for a device (created once; kept for the life
    of the process, since plans refer to it). Raises SPLAT_ERR_NO_DEVICE for CUDA on
    a machine without a GPU or driver."""
    key = parse_device(device)
    ctx = _contexts.get(key)
    if ctx is not None:
        return ctx
    with _lock:
        if key not in _contexts:
            opts = SplatContextOptions(BACKENDS[key[0]], key[1], 0)
            out = ctypes.c_void_p()
            check(lib().splat_context_create(ctypes.byref(opts), ctypes.byref(out)))
            _contexts[key] = int(out.value)
        return _contexts[key]


def environment() -> Dict[str, object]:
    """What this process can use: CPU threads, CUDA devices and NVRTC, and why not."""
    env = SplatEnvironment()
    why = ctypes.create_string_buffer(1024)
    check(lib().splat_environment_query(ctypes.byref(env), why, len(why)))
    out: Dict[str, object] = {name: getattr(env, name) for name, _ in SplatEnvironment._fields_}
    out["device_name"] = env.device_name.decode("utf-8", "replace")
    out["why_not_cuda"] = why.value.decode("utf-8", "replace")
    return out


# ------------------------------------------------------------------ tensors


def dtype_code(name: str, what: str) -> int:
    """splat_dtype of a dtype name (``"float32"``, ``"torch.float16"``, ...)."""
    short = str(name).rsplit(".", 1)[-1]
    if short not in DTYPE_CODES:
        raise Error(
            "SPLAT_ERR_INVALID_ARGUMENT",
            f"{what}.dtype={short} unsupported: use float32, float16 or bfloat16",
        )
    return DTYPE_CODES[short]


def tensor(data: int, dtype: int, shape: Sequence[int], strides: Sequence[int]) -> SplatTensor:
    """A splat_tensor over memory at address ``data`` (strides in elements)."""
    return SplatTensor(data, dtype, (_i64 * 4)(*shape), (_i64 * 4)(*strides))
