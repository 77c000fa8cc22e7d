"""Error cases: every failure is a splat.Error naming the problem (bad shapes and
dtypes, spec parse errors with the caret, non-finite inputs naming the tensor, CUDA
on a machine without a GPU), plus the ABI of the ctypes struct mirrors and an import
with no library, no torch and no jax."""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import splat
from splat import _lib
from conftest import BF16, randn


def test_parse_error_has_caret():
    with pytest.raises(splat.Error) as info:
        splat.Pattern("window(12 5)", 100)
    err = info.value
    assert err.status == "SPLAT_ERR_PARSE" and err.code == 2
    assert "column 11" in err.message
    lines = err.message.splitlines()
    assert lines[-2].strip() == "window(12 5)"
    assert lines[-1].index("^") - lines[-2].index("w") == 10
    with pytest.raises(splat.Error, match="unknown pattern 'windo'"):
        splat.Pattern("windo(3)", 10)
    with pytest.raises(splat.Error, match="d=0 must be >= 1"):
        splat.Pattern("dilated(3,0)", 10)


def test_bad_pattern_arguments():
    with pytest.raises(splat.Error, match="seq=0 must be >= 1"):
        splat.Pattern("causal", 0)
    with pytest.raises(splat.Error, match="must be a string"):
        splat.Pattern(5, 10)
    with pytest.raises(splat.Error, match="mask must be 2-d"):
        splat.Pattern.from_mask(np.ones((2, 2, 2), bool))
    with pytest.raises(splat.Error, match="row=10"):
        splat.Pattern("causal", 10).row(10)
    with pytest.raises(splat.Error, match=r"seq=18446744073709551680 must be below 2\^63"):
        splat.Pattern("causal", 2**64 + 64)  # ctypes would have wrapped it to 64
    # analysis arguments are C ints: 2**32 would have wrapped to 0, the default, silently
    with pytest.raises(splat.Error, match=r"tile_q=4294967296 does not fit"):
        splat.Pattern("causal", 10).report(tile_q=2**32)
    with pytest.raises(splat.Error, match=r"max_segments=8589934592 does not fit"):
        splat.Pattern("causal", 10).report_text(max_segments=2**33)
    with pytest.raises(splat.Error, match=r"tile_k=2.0 must be an integer"):
        splat.Pattern("causal", 10).report(tile_k=2.0)


def test_flags_must_be_bools(rng):
    """Yes/no arguments are True or False (numpy's too), not read by their truth."""
    pat = splat.Pattern("causal", 8)
    q = randn(rng, (1, 2, 8, 4), np.float32)
    for bad in ("yes", "no", 1, None):
        with pytest.raises(splat.Error, match=f"as_json={bad!r} must be True or False") as info:
            pat.report_text(as_json=bad)
        assert info.value.status == "SPLAT_ERR_INVALID_ARGUMENT"
        with pytest.raises(splat.Error, match=f"return_lse={bad!r} must be True or False"):
            splat.attention(q, q, q, pat, return_lse=bad)
        with pytest.raises(splat.Error, match=f"return_lse={bad!r} must be True or False"):
            splat.softmax(splat.sddmm(q, q, pat), pat, return_lse=bad)
    assert json.loads(pat.report_text(as_json=np.bool_(True)))["nnz"] == pat.nnz
    assert len(splat.attention(q, q, q, pat, return_lse=np.bool_(True))) == 2


def test_integers_are_not_bools(rng):
    """Where an integer is expected, a bool (an int to Python) is refused, naming the argument;
    so are values the C field would wrap."""
    pat = splat.Pattern("causal", 8)
    with pytest.raises(splat.Error, match="row=True must be an integer"):
        pat.row(True)
    np.testing.assert_array_equal(pat.row(np.int64(2)), [0, 1, 2])
    q = randn(rng, (1, 2, 8, 4), np.float32)
    scores = splat.sddmm(q, q, pat)
    for bad in (True, 8.0, "8"):
        with pytest.raises(splat.Error, match=f"splat.softmax: seq_k={bad!r} must be an integer"):
            splat.softmax(scores, "causal", seq_k=bad)
    np.testing.assert_array_equal(splat.softmax(scores, "causal", seq_k=np.int32(8)), splat.softmax(scores, pat))
    args = dict(batch=1, heads=2, heads_kv=2, head_dim=4, dtype=0, device="cpu", ops=_lib.OPS_ATTENTION)
    # a cached plan for head_dim 1 would have answered head_dim=True (True == 1, same hash)
    splat.plan_cache.get(pat, **dict(args, head_dim=1))
    for name in ("batch", "heads", "heads_kv", "head_dim", "dtype", "ops"):
        with pytest.raises(splat.Error, match=f"{name}=True must be an integer"):
            splat.plan_cache.get(pat, **dict(args, **{name: True}))
    with pytest.raises(splat.Error, match=r"head_dim=18446744073709551620 does not fit the 64-bit"):
        splat.plan_cache.get(pat, **dict(args, head_dim=2**64 + 4))  # ctypes passed it as 4
    with pytest.raises(splat.Error, match=r"dtype=4294967296 does not fit the 32-bit"):
        splat.plan_cache.get(pat, **dict(args, dtype=2**32))  # ctypes passed it as 0: float32


def test_empty_batch_gives_empty_outputs(rng):
    """batch 0: outputs of the right shapes and nothing computed, as the JAX front end
    gives; the other shapes are still checked."""
    pat = splat.Pattern("window(3)", 30)
    q = randn(rng, (2, 4, 30, 16), np.float32)[:0]
    kv = randn(rng, (2, 2, 30, 16), np.float32)[:0]
    out, lse = splat.attention(q, kv, kv, pat, return_lse=True)
    assert out.shape == (0, 4, 30, 16) and lse.shape == (0, 4, 30)
    scores = splat.sddmm(q, kv, pat)
    assert scores.shape == (0, 4, 30, pat.row_width)
    probs = splat.softmax(scores, pat)
    assert splat.spmm(probs, kv, pat).shape == (0, 4, 30, 16)
    with pytest.raises(splat.Error, match="heads"):
        splat.attention(randn(rng, (0, 3, 30, 16), np.float32), kv, kv, pat)
    # what the C call checks for batch >= 1, checked without it
    with pytest.raises(splat.Error, match=r"k.shape=\[0, 2, 30, 8\] but the plan expects \[0, 2, 30, 16\]"):
        splat.attention(q, kv[..., :8], kv, pat)
    with pytest.raises(splat.Error, match=r"v.shape=\[0, 2, 29, 16\]"):
        splat.attention(q, kv, kv[:, :, :29], pat)
    with pytest.raises(splat.Error, match=r"q.shape=\[0, 4, 31, 16\] but the plan expects \[0, 4, 30, 16\]"):
        splat.sddmm(randn(rng, (1, 4, 31, 16), np.float32)[:0], kv, pat)
    with pytest.raises(splat.Error, match=r"scores.shape"):
        splat.softmax(scores[..., :-1], pat)
    with pytest.raises(splat.Error, match=r"v.shape=\[0, 2, 29, 16\]"):
        splat.spmm(probs, kv[:, :, :29], pat)


@pytest.mark.parametrize(
    "var,value,message",
    [
        ("SPLAT_PLAN_CACHE_SIZE", "abc", "$SPLAT_PLAN_CACHE_SIZE='abc' must be a non-negative integer"),
        # digits to str.isdigit() but not ASCII: int() refused the first with a bare ValueError
        ("SPLAT_PLAN_CACHE_SIZE", "\u00b2", "$SPLAT_PLAN_CACHE_SIZE='\u00b2' must be a non-negative integer"),
        ("SPLAT_PLAN_CACHE_SIZE", "\u0661\u0662", "$SPLAT_PLAN_CACHE_SIZE='\u0661\u0662' must be"),
        ("SPLAT_LIBRARY", "/nonexistent/libsplat.so", "$SPLAT_LIBRARY=/nonexistent/libsplat.so is not a file"),
    ],
)
def test_bad_environment_variables_are_named(var, value, message):
    code = "import splat\ntry:\n    splat.Pattern('causal', 4)\nexcept splat.Error as e:\n    print(e.message)\n"
    res = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, **{var: value}), capture_output=True, text=True
    )
    assert message in res.stdout + res.stderr, res.stdout + res.stderr


def test_empty_plan_cache_size_is_the_default():
    # as SPLAT_NUM_THREADS="" in the C library: an empty variable counts as unset
    code = "import splat\nprint(splat.plan_cache.info()['capacity'])\n"
    res = subprocess.run(
        [sys.executable, "-c", code], env=dict(os.environ, SPLAT_PLAN_CACHE_SIZE=""), capture_output=True, text=True
    )
    assert res.stdout.strip() == "64", res.stdout + res.stderr


def test_bad_shapes(rng):
    pat = splat.Pattern("causal", 40)
    q = randn(rng, (1, 2, 40, 8), np.float32)
    with pytest.raises(splat.Error, match=r"q must be 4-d .* got shape \(2, 40, 8\)") as info:
        splat.attention(q[0], q, q, pat)
    assert info.value.status == "SPLAT_ERR_INVALID_ARGUMENT"
    # scores and probs end in the row width, not head_dim
    with pytest.raises(splat.Error, match=r"scores must be 4-d \[batch, heads, seq, W\] \(W: the pattern's row_width\)"):
        splat.softmax(np.ones((40, 5), np.float32), pat)
    with pytest.raises(splat.Error, match=r"probs must be 4-d \[batch, heads, seq, W\]"):
        splat.spmm(np.ones((2, 40, 5), np.float32), q, pat)
    with pytest.raises(splat.Error, match=r"q.shape=\[1,2,41,8\] but the plan expects \[1,2,40,8\]"):
        splat.attention(randn(rng, (1, 2, 41, 8), np.float32), q, q, pat)
    with pytest.raises(splat.Error, match=r"k.shape"):
        splat.attention(q, randn(rng, (1, 2, 40, 16), np.float32), q, pat)
    with pytest.raises(splat.Error, match="heads"):
        splat.attention(randn(rng, (1, 3, 40, 8), np.float32), q, q, pat)
    with pytest.raises(splat.Error, match=r"k and v have 3 heads \(shape\[1\]\), which must divide q's 2"):
        k3 = randn(rng, (1, 3, 40, 8), np.float32)
        splat.attention(q, k3, k3, pat)
    with pytest.raises(splat.Error, match="head_dim=300"):
        big = randn(rng, (1, 1, 40, 300), np.float32)
        splat.attention(big, big, big, pat)
    scores = splat.sddmm(q, q, pat)
    with pytest.raises(splat.Error, match="scores.shape"):
        splat.softmax(scores[..., :-1], pat)


def test_bad_dtypes(rng):
    pat = splat.Pattern("causal", 40)
    q = randn(rng, (1, 2, 40, 8), np.float64)
    with pytest.raises(splat.Error, match="q.dtype=float64 unsupported: use float32, float16 or bfloat16"):
        splat.attention(q, q, q, pat)
    q32 = q.astype(np.float32)
    with pytest.raises(splat.Error, match="v.dtype=float16 but q.dtype=float32"):
        splat.attention(q32, q32, q32.astype(np.float16), pat)
    with pytest.raises(splat.Error, match="output.dtype=int32 unsupported"):
        splat.sddmm(q32, q32, pat, dtype=np.int32)
    for bad in ("nonsense", "garbage.float16"):
        with pytest.raises(splat.Error, match="output.dtype=.* unsupported"):
            splat.sddmm(q32, q32, pat, dtype=bad)
    for short, name in (("bf16", "bfloat16"), ("f16", "float16"), ("f32", "float32")):  # the C names
        assert splat.sddmm(q32, q32, pat, dtype=short).dtype.name == name


def test_bad_scale(rng):
    q = randn(rng, (1, 1, 10, 8), np.float32)
    with pytest.raises(splat.Error, match="scale=0"):
        splat.attention(q, q, q, "dense", scale=0.0)
    with pytest.raises(splat.Error, match="must be finite"):
        splat.attention(q, q, q, "dense", scale=float("inf"))
    # The library's scale is a float32, where 0 selects the default: a scale that rounds to
    # 0 would silently become 1/sqrt(head_dim); one that overflows would read as inf.
    for call in (lambda s: splat.attention(q, q, q, "dense", scale=s), lambda s: splat.sddmm(q, q, "dense", scale=s)):
        with pytest.raises(splat.Error, match=r"scale=1e-50 rounds to 0 in float32"):
            call(1e-50)
        with pytest.raises(splat.Error, match=r"scale=1e\+40 overflows float32"):
            call(1e40)
        with pytest.raises(splat.Error, match="must be a real number"):
            call("1")
    scores = splat.sddmm(q, q, "dense")
    with pytest.raises(splat.Error, match="overflows float32"):
        splat.softmax(scores, "dense", scale=-1e39, seq_k=scores.shape[2])
    with pytest.raises(splat.Error, match="must be a real number"):
        call(np.array([1.0, 2.0]))
    with pytest.raises(splat.Error, match="overflows float32"):
        call(10**400)  # too large even for a double
    # scalars of any kind are taken: 0-d arrays, numpy scalars, fractions
    from fractions import Fraction

    want = splat.attention(q, q, q, "dense", scale=0.5)
    for s in (np.array(0.5), np.float64(0.5), Fraction(1, 2)):
        np.testing.assert_array_equal(splat.attention(q, q, q, "dense", scale=s), want)
    tiny = splat.attention(q, q, q, "dense", scale=1e-37)  # float32-normal: used as given
    np.testing.assert_allclose(tiny, np.broadcast_to(q.mean(axis=2, keepdims=True), q.shape), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_nan_input_names_the_tensor(rng, which):
    pat = splat.Pattern("window(3)", 30)
    t = {n: randn(rng, (1, 2, 30, 8), np.float32) for n in "qkv"}
    t[which][0, 1, 7, 3] = np.nan
    with pytest.raises(splat.Error) as info:
        splat.attention(t["q"], t["k"], t["v"], pat)
    assert info.value.status == "SPLAT_ERR_INVALID_ARGUMENT"
    assert f"{which}[0,1,7,3] is nan" in info.value.message.lower()


def test_cuda_without_gpu_is_no_device():
    env = splat.environment()
    if env["cuda_available"]:
        pytest.skip("this machine has a GPU")
    assert env["why_not_cuda"]
    with pytest.raises(splat.Error) as info:
        splat.require_device("cuda")
    assert info.value.status == "SPLAT_ERR_NO_DEVICE"
    assert "CUDA" in info.value.message
    with pytest.raises(splat.Error, match="expected 'cpu', 'cuda' or 'cuda:N'"):
        splat.require_device("tpu")


def test_error_is_runtime_error():
    err = splat.Error("SPLAT_ERR_IO", "no file")
    assert isinstance(err, RuntimeError) and str(err) == "SPLAT_ERR_IO: no file" and err.code == 8


ABI_PROGRAM = r"""
#include <stddef.h>
#include <stdio.h>
#include "splat.h"
#define F(s, f) printf("%s.%s %zu\n", #s, #f, offsetof(s, f));
#define S(s) printf("%s %zu\n", #s, sizeof(s));
int main(void) {
  S(splat_tensor) F(splat_tensor, dtype) F(splat_tensor, shape) F(splat_tensor, strides)
  S(splat_context_options) F(splat_context_options, num_threads)
  S(splat_plan_desc) F(splat_plan_desc, dtype) F(splat_plan_desc, max_segments) F(splat_plan_desc, ops)
  S(splat_environment) F(splat_environment, device_name) F(splat_environment, device_cc_minor)
  S(splat_report) F(splat_report, rows_by_segments) F(splat_report, tile_q) F(splat_report, tile_rows_max)
  F(splat_report, tile_waste) F(splat_report, report_ms) F(splat_report, kernels_ms)
  F(splat_report, kernels_compiled) F(splat_report, device_bytes) F(splat_report, workspace_bytes)
  return 0;
}
"""


def _header_dir() -> Path:
    for d in (_lib.PACKAGE_DIR / "include", _lib.REPO_ROOT / "include"):
        if (d / "splat.h").is_file():
            return d
    pytest.skip("include/splat.h not found")


def test_struct_mirrors_match_header(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    src = tmp_path / "abi.c"
    src.write_text(ABI_PROGRAM)
    exe = tmp_path / "abi"
    subprocess.run([cc, "-std=c11", "-I", str(_header_dir()), str(src), "-o", str(exe)], check=True)
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    structs = {
        "splat_tensor": _lib.SplatTensor,
        "splat_context_options": _lib.SplatContextOptions,
        "splat_plan_desc": _lib.SplatPlanDesc,
        "splat_environment": _lib.SplatEnvironment,
        "splat_report": _lib.SplatReport,
    }
    for line in filter(None, lines):
        name, value = line.split()
        sname, _, field = name.partition(".")
        cls = structs[sname]
        got = getattr(cls, field).offset if field else ctypes.sizeof(cls)
        assert got == int(value), f"{name}: ctypes {got} != C {value}"


def test_import_needs_no_library_torch_or_jax(tmp_path):
    pkg = tmp_path / "splat"
    shutil.copytree(_lib.PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("*.so*", "__pycache__"))
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name.split('.')[0] in ('torch', 'jax', 'jaxlib'):
                    raise ImportError('blocked ' + name)
        sys.meta_path.insert(0, Block())
        import splat
        assert 'torch' not in sys.modules and 'jax' not in sys.modules
        try:
            splat.Pattern('causal', 4)
        except splat.Error as e:
            assert e.status == 'SPLAT_ERR_NO_LIBRARY', e
            assert 'pip install ./python' in e.message and 'SPLAT_LIBRARY' in e.message
            print('ok')
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "SPLAT_LIBRARY"}
    res = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert res.stdout.strip() == "ok", res.stderr


def test_spec_with_nul_and_mask_with_nan_are_refused():
    with pytest.raises(splat.Error, match="NUL character at 6"):
        splat.Pattern("causal\0garbage", 16)
    m = np.ones((4, 5), np.float32)
    m[2, 3] = np.nan
    with pytest.raises(splat.Error, match=r"mask\[2, 3\] is NaN"):
        splat.Pattern.from_mask(m)


def test_mask_that_is_no_array_is_refused():
    with pytest.raises(splat.Error, match=r"mask \(list\) cannot be read as an array"):
        splat.Pattern.from_mask([[1, 0], [1]])
    with pytest.raises(splat.Error, match="mask.dtype=complex64 must be bool, integer or floating-point"):
        splat.Pattern.from_mask(np.ones((2, 2), np.complex64))


@pytest.mark.skipif(BF16 is None, reason="needs ml_dtypes")
def test_bfloat16_mask_is_a_float_mask():
    """Like float16 and float32 masks: nonzero is visible, NaN is refused."""
    m = np.tril(np.ones((5, 7))) * 0.5
    want = splat.Pattern.from_mask(m)
    assert splat.Pattern.from_mask(m.astype(BF16)) == want
    with pytest.raises(splat.Error, match=r"mask\[1, 2\] is NaN"):
        splat.Pattern.from_mask(np.where(np.arange(35).reshape(5, 7) == 9, np.nan, m).astype(BF16))
