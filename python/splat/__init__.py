"""splat — attention under sparse regular masks (Python binding of libsplat).

    import numpy as np, splat
    pat = splat.Pattern("window(64) | global(4)", 1024)
    out = splat.attention(q, k, v, pat)            # numpy [batch, heads, seq, head_dim]
    print(pat.report_text())                       # what the analysis found

``splat.jax`` and ``splat.torch`` are the JAX (XLA FFI) and PyTorch (custom op) front
ends; importing ``splat`` itself needs neither. See docs/python.md.
"""

from __future__ import annotations

from typing import Any, Dict

from . import _lib
from .errors import Error
from .ops import attention, attention_backward, plan_cache, sddmm, softmax, spmm
from .pattern import Pattern

__version__ = "0.1.0"
__all__ = [
    "Error",
    "Pattern",
    "attention",
    "attention_backward",
    "sddmm",
    "softmax",
    "spmm",
    "environment",
    "require_device",
    "library_version",
    "library_path",
    "plan_cache",
]


def environment() -> Dict[str, Any]:
    """Backends this process can use (CPU threads, CUDA devices, NVRTC) and, in
    ``why_not_cuda``, why CUDA is unusable ("" when it is usable)."""
    return _lib.environment()


def require_device(device: str = "cuda") -> None:
    """Opens splat's context for ``device`` ("cpu", "cuda", "cuda:N"); raises
    ``splat.Error`` (``SPLAT_ERR_NO_DEVICE`` where there is no GPU or driver)."""
    _lib.context(device)


def library_version() -> str:
    """The version of the loaded libsplat ("0.1.0")."""
    return _lib.version()


def library_path() -> str:
    """Where the loaded libsplat.so lives."""
    return str(_lib.library_path())
