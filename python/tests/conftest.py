"""pytest setup for splat's Python tests: runs JAX on the CPU, makes the checkout's
package importable when splat is not installed, and provides shared fixtures (dtypes,
random inputs)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

# These tests pin the CPU backend's semantics (finite-input checks, any values dtype);
# JAX on CUDA is covered by gpu_check.py. Set JAX_PLATFORMS to override.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np
import pytest

if importlib.util.find_spec("splat") is None:  # not installed: the checkout's package
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

sys.path.insert(0, str(Path(__file__).resolve().parent))  # reference.py

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - ml_dtypes comes with jax
    BF16 = None

DTYPES = [np.dtype(np.float32), np.dtype(np.float16)] + ([BF16] if BF16 is not None else [])


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


def randn(rng: np.random.Generator, shape, dtype) -> np.ndarray:
    """Random normal inputs in dtype (never zeros)."""
    return rng.standard_normal(shape).astype(dtype)
