"""PyTorch front end on CPU tensors (skipped when torch is absent): the custom op
``splat::attention`` against the float64 reference, in eager mode, under
``torch.compile`` and through ``torch.library.opcheck``; errors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import reference as ref  # noqa: E402
import splat  # noqa: E402
import splat.torch as st  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
CASES = [ref.SPECS[i] for i in (0, 1, 4, 5, 7, 11, 14)]


def _inputs(seed, seq_q, seq_k, dtype, B=2, H=4, Hkv=2, D=24, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, seq_q, D, generator=g).to(dtype)
    k = torch.randn(B, Hkv, seq_k, D, generator=g).to(dtype)
    v = torch.randn(B, Hkv, seq_k, D, generator=g).to(dtype)
    return q.to(device), k.to(device), v.to(device)


def _np(t):
    return t.detach().float().cpu().numpy()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("spec,pred", CASES, ids=[s for s, _ in CASES])
def test_eager_cpu(spec, pred, dtype):
    seq_q, seq_k = 97, 61
    q, k, v = _inputs(0, seq_q, seq_k, dtype)
    out, lse = st.attention(q, k, v, splat.Pattern(spec, seq_q, seq_k), return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == (2, 4, seq_q)
    want, want_lse = ref.attention(_np(q), _np(k), _np(v), ref.mask_of(pred, seq_q, seq_k))
    ref.assert_close(_np(out), want, str(dtype).split(".")[1], spec)
    ref.assert_close(_np(lse), want_lse, "float32", spec + " lse")


def test_strided_and_mask_pattern():
    rng = np.random.default_rng(3)
    mask = ref.random_mask(rng, 50, 50, 0.3)
    pat = splat.Pattern.from_mask(mask)
    q, k, v = _inputs(1, 50, 50, torch.float32)
    qt = q.transpose(1, 2).contiguous().transpose(1, 2)  # [B,S,H,D] memory
    out = st.attention(qt, k.flip(2).flip(2), v, pat, scale=0.7)
    want, _ = ref.attention(_np(q), _np(k), _np(v), mask, scale=0.7)
    ref.assert_close(_np(out), want, "float32", "strided mask")


def test_compile_cpu():
    pat = splat.Pattern("window(5) | global(3)", 64)
    q, k, v = _inputs(2, 64, 64, torch.float32)

    def f(q, k, v):
        return st.attention(q * 1.5, k, v, pat).sum(dim=-1)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    want, _ = ref.attention(1.5 * _np(q), _np(k), _np(v), ref.mask_of(ref.union(ref.window(5), ref.global_(3)), 64, 64))
    ref.assert_close(_np(compiled(q, k, v)), want.sum(-1), "float16", "compiled")


def test_opcheck():
    q, k, v = _inputs(3, 40, 40, torch.float32)
    torch.library.opcheck(
        torch.ops.splat.attention.default,
        (q, k, v, "causal", 40, 40, 0.0),
        test_utils=("test_schema", "test_faketensor"),
    )


def test_errors():
    q, k, v = _inputs(4, 30, 30, torch.float32)
    with pytest.raises(splat.Error, match="q must be 4-d"):
        st.attention(q[0], k, v, "causal")
    with pytest.raises(splat.Error, match="float64 unsupported"):
        st.attention(q.double(), k.double(), v.double(), "causal")
    with pytest.raises(splat.Error, match="is 31x31 but the inputs have seq_q=30"):
        st.attention(q, k, v, splat.Pattern("causal", 31))
    v[0, 1, 2, 3] = float("nan")
    with pytest.raises(splat.Error, match=r"v\[0,1,2,3\] is nan"):
        st.attention(q, k, v, "causal")
    with pytest.raises(splat.Error) as info:
        st.attention(q, k, k, "window(12 5)")
    assert info.value.status == "SPLAT_ERR_PARSE"


def test_flags_must_be_bools():
    q, k, v = _inputs(7, 16, 16, torch.float32)
    for bad in ("yes", 1, None):
        with pytest.raises(splat.Error, match=f"return_lse={bad!r} must be True or False"):
            st.attention(q, k, v, "causal", return_lse=bad)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float8_e4m3fn, torch.float16, torch.bool], ids=str)
def test_mask_tensors(dtype):
    """Masks of any dtype whose values are numbers, and ones that require grad, read as the
    numpy array of their values would be (numpy has no bfloat16 or float8; Tensor.numpy()
    refuses a tensor that requires grad)."""
    m = torch.tril(torch.ones(5, 7))
    want = splat.Pattern.from_mask(m.numpy())
    assert splat.Pattern.from_mask(m.to(dtype)) == want
    if dtype.is_floating_point:
        assert splat.Pattern.from_mask(m.to(dtype).requires_grad_()) == want
    assert splat.Pattern.from_mask(m.requires_grad_()) == want


def test_mask_tensor_errors():
    m = torch.tril(torch.ones(4, 4, dtype=torch.bfloat16))
    m[2, 1] = float("nan")
    with pytest.raises(splat.Error, match=r"mask\[2, 1\] is NaN"):
        splat.Pattern.from_mask(m)
    with pytest.raises(splat.Error, match=r"mask \(Tensor\) cannot be read as an array"):
        splat.Pattern.from_mask(torch.ones(4, 4, device="meta"))
    with pytest.raises(splat.Error, match="mask.dtype=complex64 must be bool, integer or floating-point"):
        splat.Pattern.from_mask(torch.ones(4, 4, dtype=torch.complex64))


def test_compile_with_scale():
    """A given scale traces under fullgraph=True (its float32 check is pure Python)."""
    pat = splat.Pattern("window(3)", 32)
    q, k, v = _inputs(5, 32, 32, torch.float32)
    compiled = torch.compile(lambda q, k, v: st.attention(q, k, v, pat, scale=0.3), fullgraph=True, backend="aot_eager")
    want, _ = ref.attention(_np(q), _np(k), _np(v), ref.mask_of(ref.window(3), 32, 32), scale=0.3)
    ref.assert_close(_np(compiled(q, k, v)), want, "float32", "compiled with scale")


def test_input_errors():
    """Inputs that are not tensors, on another device, or of the wrong rank (through the
    wrapper and the op itself), and a scale the op would read as the default."""
    q, k, v = _inputs(6, 16, 16, torch.float32)
    with pytest.raises(splat.Error, match="k is on meta but q is on cpu"):
        st.attention(q, k.to("meta"), v, "causal")
    with pytest.raises(splat.Error, match="q must be a torch.Tensor, got ndarray"):
        st.attention(_np(q), _np(k), _np(v), "causal")
    with pytest.raises(splat.Error, match="q must be 4-d"):
        torch.ops.splat.attention(q[0], k[0], v[0], "causal", 16, 16, 0.0)
    with pytest.raises(splat.Error, match="rounds to 0 in float32"):
        torch.ops.splat.attention(q, k, v, "causal", 16, 16, 1e-50)
