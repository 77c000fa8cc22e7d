"""PyTorch front end on CPU tensors (skipped when torch is absent): the custom op
``splat::attention`` against the float64 reference, in eager mode, under
``torch.compile`` and through ``torch.library.opcheck``; its autograd (the op
``splat::attention_backward``) against torch's own autograd through a dense float64
reference; errors."""

from __future__ import annotations

import gc

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


# ------------------------------------------------------------------ autograd


def _dense(q, k, v, mask, scale=None):
    """out and lse of a dense masked softmax in float64 that torch's autograd differentiates:
    the independent reference of the gradients (rows that see no key: out 0, lse -inf, and
    no gradient). Returns the float64 leaves (q, k, v) with out and lse."""
    q, k, v = (x.detach().double().requires_grad_() for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    m = torch.as_tensor(mask)
    seen = m.any(dim=-1, keepdim=True)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = (scale * q @ kr.transpose(-1, -2)).masked_fill(~(m | ~seen), -torch.inf)  # empty rows: finite, dropped
    out = (torch.softmax(s, dim=-1) * seen) @ vr
    lse = torch.where(seen[..., 0], torch.logsumexp(s, dim=-1), -torch.inf)
    return (q, k, v), out, lse


def _dense_grads(q, k, v, mask, dout, dlse=None, scale=None):
    leaves, out, lse = _dense(q, k, v, mask, scale)
    loss = (out * dout.double()).sum()
    if dlse is not None:
        loss = loss + torch.where(torch.isfinite(lse), lse * dlse.double(), 0).sum()
    return tuple(_np(g) for g in torch.autograd.grad(loss, leaves))


def _check_grads(got, q, k, v, mask, dout, dtype, what, dlse=None, scale=None):
    """Gradients against torch's float64 autograd of ``_dense``, within twice a naive
    same-dtype computation's error (reference.assert_grads_close)."""
    want = _dense_grads(q, k, v, mask, dout, dlse, scale)
    ref.assert_grads_close(
        [_np(g) for g in got], _np(q), _np(k), _np(v), mask, _np(dout), str(dtype).split(".")[1], what,
        scale=scale, dlse=None if dlse is None else _np(dlse), want=want,
    )


def _leaves(*xs):
    return tuple(x.detach().requires_grad_() for x in xs)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("spec,pred", CASES, ids=[s for s, _ in CASES])
def test_backward_cpu(spec, pred, dtype):
    """out.backward(dout) with grouped-query attention (4 query heads, 2 key/value heads);
    window(-2,6) at 97x61 has rows that see no key."""
    seq_q, seq_k = 97, 61
    q, k, v = _leaves(*_inputs(10, seq_q, seq_k, dtype))
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(11)).to(dtype)
    out = st.attention(q, k, v, splat.Pattern(spec, seq_q, seq_k))
    out.backward(dout)
    assert [(x.grad.shape, x.grad.dtype) for x in (q, k, v)] == [(x.shape, dtype) for x in (q, k, v)]
    _check_grads((q.grad, k.grad, v.grad), q, k, v, ref.mask_of(pred, seq_q, seq_k), dout, dtype, spec)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward_through_lse(dtype):
    """The gradient of lse (d lse_i / d s_ij = P_ij), alone and with out's; a given scale."""
    seq_q, seq_k = 50, 40
    pred = ref.union(ref.window(-2, 6), ref.global_(2))
    pat = splat.Pattern("window(-2,6) | global(2)", seq_q, seq_k)
    mask = ref.mask_of(pred, seq_q, seq_k)
    q, k, v = _leaves(*_inputs(12, seq_q, seq_k, dtype))
    g = torch.Generator().manual_seed(13)
    dout, dlse = torch.randn(q.shape, generator=g).to(dtype), torch.randn(q.shape[:3], generator=g)
    dlse = torch.where(torch.as_tensor(mask.any(axis=1)), dlse, 0)  # lse is -inf, a constant, where a row sees no key
    out, lse = st.attention(q, k, v, pat, scale=0.3, return_lse=True)
    finite_lse = torch.where(torch.isfinite(lse), lse, 0)
    grads = torch.autograd.grad((out * dout).sum() + (finite_lse * dlse).sum(), (q, k, v), retain_graph=True)
    _check_grads(grads, q, k, v, mask, dout, dtype, "out and lse", dlse=dlse, scale=0.3)
    dq, dk, dv = torch.autograd.grad((finite_lse * dlse).sum(), (q, k, v), allow_unused=True)
    assert dv is None  # lse does not depend on v
    got = (dq, dk, torch.zeros_like(v))
    _check_grads(got, q, k, v, mask, torch.zeros_like(dout), dtype, "lse", dlse=dlse, scale=0.3)


def test_backward_some_inputs_require_grad():
    """Inputs that do not require grad get none; the others the gradients they get when
    all do."""
    pat = splat.Pattern("causal & window(9,0)", 40)
    q, k, v = _inputs(14, 40, 40, torch.float32)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(15))
    everything = _leaves(q, k, v)
    st.attention(*everything, pat).backward(dout)
    for wanted in ((2,), (0, 1), (1,)):
        xs = [x.detach().requires_grad_(i in wanted) for i, x in enumerate((q, k, v))]
        st.attention(*xs, pat).backward(dout)
        for i, x in enumerate(xs):
            if i in wanted:
                torch.testing.assert_close(x.grad, everything[i].grad, rtol=0, atol=0)
            else:
                assert x.grad is None


def test_no_grad_mode_is_unchanged():
    """Under torch.no_grad, or with no input requiring grad, the output carries no graph
    and equals the differentiable one."""
    pat = splat.Pattern("window(4) | global(2)", 33)
    q, k, v = _leaves(*_inputs(16, 33, 33, torch.float32))
    out = st.attention(q, k, v, pat)
    assert out.requires_grad and out.grad_fn is not None
    with torch.no_grad():
        plain = st.attention(q, k, v, pat)
    detached = st.attention(q.detach(), k.detach(), v.detach(), pat)
    for y in (plain, detached):
        assert not y.requires_grad and y.grad_fn is None
        torch.testing.assert_close(y, out.detach(), rtol=0, atol=0)


@pytest.mark.parametrize("with_lse", [False, True], ids=["out", "out+lse"])
def test_compile_backward(with_lse):
    """torch.compile(fullgraph=True) of a function around the op, then backward: the
    gradients of the eager calls, exactly (the same C calls), and the reference's."""
    pat = splat.Pattern("window(5) | global(3)", 64)
    mask = ref.mask_of(ref.union(ref.window(5), ref.global_(3)), 64, 64)

    def f(q, k, v):
        out, lse = st.attention(q * 1.5, k, v, pat, return_lse=True)
        return (out * out).sum() + (lse.sum() if with_lse else 0)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    q, k, v = _inputs(17, 64, 64, torch.float32)
    eager, comp = _leaves(q, k, v), _leaves(q, k, v)
    f(*eager).backward()
    compiled(*comp).backward()
    for a, b in zip(eager, comp):
        torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=0)
    out = st.attention(1.5 * q, k, v, pat)
    want = _dense_grads(1.5 * q, k, v, mask, 2 * out, dlse=torch.ones(q.shape[:3]) if with_lse else None)
    for x, w, name in zip(comp, (1.5 * want[0], want[1], want[2]), ("dq", "dk", "dv")):
        ref.assert_close(_np(x.grad), w, "float16", f"compiled {name}")  # out rounded to f32 feeds dout


def test_opcheck_backward():
    q, k, v = _inputs(18, 40, 40, torch.float32)
    out, lse = torch.ops.splat.attention(q, k, v, "causal", 40, 40, 0.0)
    torch.library.opcheck(
        torch.ops.splat.attention_backward.default,
        (q, k, v, out, lse, torch.randn_like(out), "causal", 40, 40, 0.0),
        test_utils=("test_schema", "test_faketensor"),
    )
    torch.library.opcheck(
        torch.ops.splat.attention.default,
        (*_leaves(q, k, v), "causal", 40, 40, 0.0),
        test_utils=("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic"),
    )


def test_backward_keeps_a_mask_pattern_alive():
    """A mask pattern that only the forward call referenced is still there for the backward."""
    mask = ref.random_mask(np.random.default_rng(19), 30, 30, 0.3)
    q, k, v = _leaves(*_inputs(20, 30, 30, torch.float32))
    out = st.attention(q, k, v, splat.Pattern.from_mask(mask))
    gc.collect()
    dout = torch.ones_like(out)
    out.backward(dout)
    _check_grads((q.grad, k.grad, v.grad), q, k, v, mask, dout, torch.float32, "mask pattern")


def test_backward_errors():
    """A NaN dout fails the backward naming it; the backward op checks lse's rank, dtype
    and device."""
    q, k, v = _leaves(*_inputs(21, 30, 30, torch.float32))
    out = st.attention(q, k, v, "causal")
    dout = torch.ones_like(out)
    dout[0, 1, 2, 3] = float("nan")
    with pytest.raises(splat.Error, match=r"splat_attention_backward: dout\[0,1,2,3\] is nan") as info:
        out.backward(dout)
    assert info.value.status == "SPLAT_ERR_INVALID_ARGUMENT"
    q, k, v = (x.detach() for x in (q, k, v))
    out, lse = torch.ops.splat.attention(q, k, v, "causal", 30, 30, 0.0)
    backward = torch.ops.splat.attention_backward
    for bad, got in ((lse[..., None], r"torch.float32 of shape \(2, 4, 30, 1\)"), (lse.half(), "torch.float16")):
        with pytest.raises(splat.Error, match=r"lse must be float32 \[batch, heads, seq_q\].*got " + got):
            backward(q, k, v, out, bad, out, "causal", 30, 30, 0.0)
    with pytest.raises(splat.Error, match="dout is on meta but q is on cpu"):
        backward(q, k, v, out, lse, out.to("meta"), "causal", 30, 30, 0.0)
    with pytest.raises(splat.Error, match=r"lse\[0,0,4,0\] is -inf but row 4 sees 5 keys"):
        backward(q, k, v, out, lse.index_fill(2, torch.tensor([4]), -torch.inf), out, "causal", 30, 30, 0.0)
