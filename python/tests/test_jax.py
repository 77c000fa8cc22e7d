"""JAX front end on CPU (XLA FFI handlers of libsplat_jax.so) against the float64
reference: every spec of DESIGN.md §2 at awkward sizes, random masks (registered
patterns), the unfused pipeline, jit, vmap, gradients of the attention (eager, jit,
vmap), and errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

import reference as ref  # noqa: E402
import splat  # noqa: E402
import splat.jax as sj  # noqa: E402
from conftest import DTYPES, randn  # noqa: E402

SHAPES = [(97, 97), (61, 97), (97, 40)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("spec,pred", ref.SPECS, ids=[s for s, _ in ref.SPECS])
@pytest.mark.parametrize("seq_q,seq_k", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_attention_every_spec(rng, spec, pred, seq_q, seq_k, dtype):
    B, H, Hkv, D = 2, 4, 2, 24
    q = randn(rng, (B, H, seq_q, D), dtype)
    k = randn(rng, (B, Hkv, seq_k, D), dtype)
    v = randn(rng, (B, Hkv, seq_k, D), dtype)
    pat = splat.Pattern(spec, seq_q, seq_k)
    out, lse = sj.attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), pat, return_lse=True)
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == (B, H, seq_q)
    want, want_lse = ref.attention(q, k, v, ref.mask_of(pred, seq_q, seq_k))
    ref.assert_close(np.asarray(out), want, dtype.name, f"{spec} out")
    ref.assert_close(np.asarray(lse), want_lse, "float32", f"{spec} lse")


@pytest.mark.parametrize("seed", range(4))
def test_random_masks(seed):
    rng = np.random.default_rng(100 + seed)
    seq_q, seq_k = [(97, 97), (33, 70), (70, 33), (97, 97)][seed]
    mask = ref.random_mask(rng, seq_q, seq_k, [0.05, 0.5, 0.9, 0.2][seed])
    pat = splat.Pattern.from_mask(mask)
    if seed == 3:  # a mask combined with a spec: still registered by content
        pat = pat | splat.Pattern("window(2)", seq_q, seq_k)
        mask = mask | ref.mask_of(ref.window(2), seq_q, seq_k)
    q, k, v = (randn(rng, (2, 2, s, 16), np.float32) for s in (seq_q, seq_k, seq_k))
    out, lse = jax.jit(lambda a, b, c: sj.attention(a, b, c, pat, return_lse=True))(q, k, v)
    want, want_lse = ref.attention(q, k, v, mask)
    ref.assert_close(np.asarray(out), want, "float32", "random mask")
    ref.assert_close(np.asarray(lse), want_lse, "float32", "random mask lse")


def test_mask_file_is_read_as_it_is_now(rng, tmp_path, monkeypatch):
    """A spec naming a .npy file reaches the handlers as its content's key: a rewritten
    file gives the new mask's result, not the plan the handlers cached for the old one."""
    monkeypatch.chdir(tmp_path)
    q, k, v = (randn(rng, (1, 2, 24, 8), np.float32) for _ in range(3))
    for mask in (ref.random_mask(rng, 24, 24, 0.2), ref.mask_of(ref.causal(), 24, 24)):
        np.save("m.npy", mask)
        out = sj.attention(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), 'mask("m.npy")')
        ref.assert_close(np.asarray(out), ref.attention(q, k, v, mask)[0], "float32", "mask file")


def test_jit_and_scale(rng):
    pat = splat.Pattern("causal & window(9,0)", 97)
    q, k, v = (randn(rng, (1, 3, 97, 32), np.float32) for _ in range(3))
    f = jax.jit(lambda a, b, c: sj.attention(a, b, c, pat, scale=0.25))
    want, _ = ref.attention(q, k, v, ref.mask_of(ref.intersect(ref.causal(), ref.window(9, 0)), 97, 97), scale=0.25)
    for _ in range(2):
        ref.assert_close(np.asarray(f(q, k, v)), want, "float32", "jit")
    # a spec string inside jit, and a computation around the call
    g = jax.jit(lambda a: jnp.sum(sj.attention(a * 2, a, a, "dense") ** 2))
    want_d, _ = ref.attention(2 * q, q, q, np.ones((97, 97), bool))
    assert abs(float(g(q)) - float((want_d**2).sum())) < 1e-3 * float((want_d**2).sum())
    # a traced scale is refused with a sentence that says what to do
    h = jax.jit(lambda a, s: sj.attention(a, a, a, pat, scale=s))
    with pytest.raises(splat.Error, match="traced JAX value.*static"):
        h(q, 0.25)


def test_vmap(rng):
    pat = splat.Pattern("dilated(3,4) | global(2)", 97, 61)
    mask = ref.mask_of(ref.union(ref.dilated(3, 4), ref.global_(2)), 97, 61)
    N, B, H, D = 3, 2, 2, 16
    qs = randn(rng, (N, B, H, 97, D), np.float32)
    k, v = (randn(rng, (B, H, 61, D), np.float32) for _ in range(2))
    # only q is mapped (k, v broadcast), under jit
    out = jax.jit(jax.vmap(lambda a: sj.attention(a, k, v, pat)))(qs)
    assert out.shape == qs.shape
    for n in range(N):
        want, _ = ref.attention(qs[n], k, v, mask)
        ref.assert_close(np.asarray(out[n]), want, "float32", f"vmap[{n}]")
    # mapped over axis 1 instead of 0
    out_t = jax.vmap(lambda a: sj.attention(a, k, v, pat), in_axes=1)(qs.transpose(1, 0, 2, 3, 4))
    np.testing.assert_array_equal(np.asarray(out_t), np.asarray(out))
    # every operand mapped, one vmap nested in another, with lse
    ks = randn(rng, (B, N, B, H, 61, D), np.float32)
    qs2 = np.broadcast_to(qs[None], (B,) + qs.shape)
    f = jax.vmap(jax.vmap(lambda a, b: sj.attention(a, b, b, pat, return_lse=True), in_axes=(0, 0)))
    out2, lse2 = f(qs2, ks)
    for x in range(B):
        for n in range(N):
            want, want_lse = ref.attention(qs2[x, n], ks[x, n], ks[x, n], mask)
            ref.assert_close(np.asarray(out2[x, n]), want, "float32", "nested vmap")
            ref.assert_close(np.asarray(lse2[x, n]), want_lse, "float32", "nested vmap lse")


def test_unfused_ops_are_forward_only_under_grad(rng):
    """A gradient through sddmm, softmax or spmm is a splat.Error naming the op (eager and
    under jit); inputs that carry no tangent (stop_gradient, constants) still run."""
    q, k, v = (jnp.asarray(randn(rng, (1, 2, 24, 8), np.float32)) for _ in range(3))
    pat = splat.Pattern("window(3)", 24)
    with pytest.raises(splat.Error, match="splat.jax.sddmm is forward-only"):
        jax.jit(jax.grad(lambda a: sj.sddmm(q, a, pat).sum()))(k)
    scores = sj.sddmm(q, k, pat)
    with pytest.raises(splat.Error, match="splat.jax.softmax is forward-only"):
        jax.grad(lambda s: sj.softmax(s, pat).sum())(scores)
    with pytest.raises(splat.Error, match="splat.jax.spmm is forward-only"):
        jax.grad(lambda w: sj.spmm(sj.softmax(scores, pat), w, pat).sum())(v)
    g = jax.grad(lambda a: (a * a).sum() + sj.attention(jax.lax.stop_gradient(a), k, v, pat).sum())(q)
    np.testing.assert_allclose(np.asarray(g), 2 * np.asarray(q), rtol=1e-6)
    g = jax.grad(lambda a: (a * a).sum() + sj.sddmm(jax.lax.stop_gradient(a), k, pat).sum())(q)
    np.testing.assert_allclose(np.asarray(g), 2 * np.asarray(q), rtol=1e-6)
    assert sj.sddmm(q, k, pat, dtype="bf16").dtype == jnp.bfloat16  # splat's dtype names
    with pytest.raises(splat.Error, match="output.dtype=.*nonsense.* unsupported"):
        sj.sddmm(q, k, pat, dtype="nonsense")
    with pytest.raises(splat.Error, match="output.dtype=int32 unsupported"):
        sj.sddmm(q, k, pat, dtype=jnp.int32)
    np.testing.assert_array_equal(sj.attention(q, k, v, pat, scale=jnp.float32(0.5)), sj.attention(q, k, v, pat, scale=0.5))


GRAD_CASES = [ref.SPECS[i] for i in (1, 4, 7, 12, 14)]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("spec,pred", GRAD_CASES, ids=[s for s, _ in GRAD_CASES])
def test_grad(rng, spec, pred, dtype):
    """jax.grad of sum(out * dout), eager and under jit, with grouped-query attention
    (window(-2,6) at 97x40 has rows that see no key), against the float64 reference."""
    seq_q, seq_k = 97, 40
    q = randn(rng, (2, 4, seq_q, 24), dtype)
    k, v = (randn(rng, (2, 2, seq_k, 24), dtype) for _ in range(2))
    dout = randn(rng, q.shape, dtype)
    pat = splat.Pattern(spec, seq_q, seq_k)
    grad = jax.grad(lambda a, b, c: (sj.attention(a, b, c, pat) * dout).sum(), argnums=(0, 1, 2))
    eager = grad(q, k, v)
    assert [(g.shape, g.dtype) for g in eager] == [(x.shape, dtype) for x in (q, k, v)]
    mask = ref.mask_of(pred, seq_q, seq_k)
    ref.assert_grads_close([np.asarray(g) for g in eager], q, k, v, mask, dout, dtype.name, spec)
    for a, b in zip(jax.jit(grad)(q, k, v), eager):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_grad_through_lse(rng, dtype):
    """The gradient of lse (d lse_i / d s_ij = P_ij), with out's and alone; a given scale;
    a mask pattern, under jit."""
    seq_q, seq_k = 50, 40
    mask = ref.random_mask(rng, seq_q, seq_k, 0.3)
    pat = splat.Pattern.from_mask(mask)
    q = randn(rng, (1, 4, seq_q, 16), dtype)
    k, v = (randn(rng, (1, 2, seq_k, 16), dtype) for _ in range(2))
    dout = randn(rng, q.shape, dtype)
    dlse = np.where(mask.any(axis=1), randn(rng, q.shape[:3], np.float32), 0)  # lse is -inf where a row sees no key

    def loss(a, b, c, w=None):
        out, lse = sj.attention(a, b, c, pat, scale=0.3, return_lse=True)
        lse_term = jnp.where(jnp.isfinite(lse), lse * dlse, 0).sum()
        return lse_term if w is None else (out.astype(jnp.float32) * w).sum() + lse_term

    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(q, k, v, dout.astype(np.float32))
    ref.assert_grads_close([np.asarray(g) for g in grads], q, k, v, mask, dout, dtype.name, "out and lse", 0.3, dlse)
    dq, dk, dv = jax.grad(loss, argnums=(0, 1, 2))(q, k, v)  # out unused: no backward call for it
    assert not np.asarray(dv).any()
    got = [np.asarray(dq), np.asarray(dk), np.zeros(v.shape)]
    ref.assert_grads_close(got, q, k, v, mask, np.zeros(q.shape, dtype), dtype.name, "lse", 0.3, dlse)


def test_grad_vmap(rng):
    """vmap of grad (the backward's callback merges the mapped axis into the batch), under
    jit, only some operands mapped; grad of a vmapped function."""
    pat = splat.Pattern("dilated(3,4) | global(2)", 61, 97)
    mask = ref.mask_of(ref.union(ref.dilated(3, 4), ref.global_(2)), 61, 97)
    N, B, D = 3, 2, 16
    qs = randn(rng, (N, B, 4, 61, D), np.float32)
    k, v = (randn(rng, (B, 2, 97, D), np.float32) for _ in range(2))
    dout = randn(rng, (B, 4, 61, D), np.float32)
    grad = jax.grad(lambda a, b, c: (sj.attention(a, b, c, pat) * dout).sum(), argnums=(0, 1, 2))
    dq, dk, dv = jax.jit(jax.vmap(grad, in_axes=(0, None, None)))(qs, k, v)
    assert dq.shape == qs.shape and dk.shape == (N,) + k.shape and dv.shape == (N,) + v.shape
    for n in range(N):
        got = [np.asarray(g[n]) for g in (dq, dk, dv)]
        ref.assert_grads_close(got, qs[n], k, v, mask, dout, "float32", f"vmap[{n}]")
    total = jax.grad(lambda a: (jax.vmap(lambda x: sj.attention(x, k, v, pat))(a) * dout).sum())(qs)
    np.testing.assert_allclose(np.asarray(total), np.asarray(dq), rtol=1e-6, atol=1e-7)


def test_grad_errors(rng):
    """A NaN cotangent fails the backward naming dout: a splat.Error under eager grad, JAX's
    runtime error carrying the same status and message under jit."""
    pat = splat.Pattern("window(3)", 30)
    q, k, v = (randn(rng, (1, 2, 30, 8), np.float32) for _ in range(3))
    dout = randn(rng, q.shape, np.float32)
    dout[0, 1, 4, 2] = np.nan
    grad = jax.grad(lambda a: (sj.attention(a, k, v, pat) * dout).sum())
    with pytest.raises(splat.Error) as info:
        grad(q)
    assert info.value.status == "SPLAT_ERR_INVALID_ARGUMENT" and "dout[0,1,4,2] is nan" in info.value.message
    with pytest.raises(Exception, match=r"SPLAT_ERR_INVALID_ARGUMENT.*dout\[0,1,4,2\] is nan"):
        jax.block_until_ready(jax.jit(grad)(q))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_unfused_pipeline(rng, dtype):
    spec, pred = "fixed(16,4)", ref.fixed(16, 4)
    seq_q, seq_k = 97, 61
    pat = splat.Pattern(spec, seq_q, seq_k)
    mask = ref.mask_of(pred, seq_q, seq_k)
    q, k, v = (randn(rng, (2, 2, s, 16), dtype) for s in (seq_q, seq_k, seq_k))

    @jax.jit
    def pipeline(q, k, v):
        s = sj.sddmm(q, k, pat, scale=0.5, dtype=jnp.float32)
        p, lse = sj.softmax(s, pat, return_lse=True)
        return s, lse, sj.spmm(p.astype(q.dtype), v, pat)

    s, lse, out = pipeline(q, k, v)
    W = pat.row_width
    # Spec text: the scores do not carry seq_k, so softmax needs it (compared on each row's
    # entries: padding is unspecified in splat.jax).
    with pytest.raises(splat.Error, match=r"seq_k="):
        sj.softmax(s, spec)
    entries = np.arange(W)[None, :] < mask.sum(axis=1)[:, None]
    np.testing.assert_array_equal(
        np.where(entries, np.asarray(sj.softmax(s, spec, seq_k=seq_k)), 0),
        np.where(entries, np.asarray(sj.softmax(s, pat)), 0),
    )
    assert s.shape == (2, 2, seq_q, W) and W == int(mask.sum(axis=1).max())
    dense_s = 0.5 * np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64))
    got_s = np.asarray(s)
    for i, cols in enumerate(ref.columns(mask)):  # padding is unspecified under jax
        ref.assert_close(got_s[:, :, i, : len(cols)], dense_s[:, :, i, cols], "float32", "sddmm")
    want, want_lse = ref.attention(q, k, v, mask, scale=0.5)
    ref.assert_close(np.asarray(lse), want_lse, "float32", "softmax lse")
    ref.assert_close(np.asarray(out), want, dtype.name if dtype != np.float32 else "float16", "spmm")


def test_trace_time_errors(rng):
    pat = splat.Pattern("causal", 40)
    q = jnp.asarray(randn(rng, (1, 2, 40, 8), np.float32))
    with pytest.raises(splat.Error, match="q must be 4-d"):
        sj.attention(q[0], q, q, pat)
    with pytest.raises(splat.Error, match=r"pattern 'causal' is 40x40 but the inputs have seq_q=39"):
        jax.jit(lambda a: sj.attention(a, a, a, pat))(q[:, :, 1:])
    with pytest.raises(splat.Error, match="heads_kv dividing 2"):
        sj.attention(q, jnp.concatenate([q, q, q], axis=1), jnp.concatenate([q, q, q], axis=1), pat)
    with pytest.raises(splat.Error, match="q.dtype=int32 unsupported"):
        sj.attention(q.astype(jnp.int32), q, q, pat)
    with pytest.raises(splat.Error, match="k.dtype=float16 but q.dtype=float32"):
        sj.attention(q, q.astype(jnp.float16), q, pat)
    with pytest.raises(splat.Error) as info:
        sj.attention(q, q, q, "window(12 5)")
    assert info.value.status == "SPLAT_ERR_PARSE" and "^" in info.value.message
    probs = sj.softmax(sj.sddmm(q, q, pat), pat)
    for d in (0, 300):  # spmm's head_dim is v's alone: checked while tracing too
        with pytest.raises(splat.Error, match=f"head_dim={d} must be in 1..256"):
            jax.jit(lambda p, v: sj.spmm(p, v, pat))(probs, jnp.ones((1, 2, 40, d), jnp.float32))
    scores = sj.sddmm(q, q, pat)
    for bad in ("yes", 1, None):
        with pytest.raises(splat.Error, match=f"return_lse={bad!r} must be True or False"):
            sj.attention(q, q, q, pat, return_lse=bad)
        with pytest.raises(splat.Error, match=f"return_lse={bad!r} must be True or False"):
            sj.softmax(scores, pat, return_lse=bad)
    with pytest.raises(splat.Error, match="splat.jax.softmax: seq_k=True must be an integer"):
        sj.softmax(scores, "causal", seq_k=True)


def test_bfloat16_mask_is_a_float_mask():
    m = jnp.tril(jnp.ones((5, 7))) * 0.5
    assert splat.Pattern.from_mask(m.astype(jnp.bfloat16)) == splat.Pattern.from_mask(np.asarray(m))


def test_nan_input_names_the_tensor(rng):
    pat = splat.Pattern("window(3)", 30)
    q, k, v = (randn(rng, (1, 2, 30, 8), np.float32) for _ in range(3))
    v[0, 1, 4, 2] = np.nan
    with pytest.raises(splat.Error) as info:  # eager: splat.Error
        sj.attention(q, k, v, pat)
    assert info.value.status == "SPLAT_ERR_INVALID_ARGUMENT" and "v[0,1,4,2] is nan" in info.value.message
    with pytest.raises(Exception, match=r"SPLAT_ERR_INVALID_ARGUMENT.*v\[0,1,4,2\] is nan"):
        jax.block_until_ready(jax.jit(lambda a, b, c: sj.attention(a, b, c, pat))(q, k, v))


def test_first_call_with_a_mask_pattern():
    """A fresh process whose first splat.jax call names a mask pattern (loading the
    handler library while registering the pattern) finishes."""
    code = (
        "import numpy as np, jax, splat, splat.jax as sj\n"
        "m = np.tril(np.ones((20, 20), bool))\n"
        "q = np.ones((1, 1, 20, 8), np.float32)\n"
        "print(float(jax.jit(lambda a: sj.attention(a, a, a, splat.Pattern.from_mask(m)))(q).sum()))\n"
    )
    pkg_parent = str(Path(splat.__file__).resolve().parent.parent)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": pkg_parent, "JAX_PLATFORMS": "cpu"})
    assert res.returncode == 0, res.stderr[-2000:]
    assert float(res.stdout.split()[-1]) == 160.0


def test_extension_builds_from_source(tmp_path):
    """The fallback used when libsplat_jax.so was not built at install time."""
    from splat import _build, _lib

    inc = _build.jax_include_dir()
    header = next(d for d in (_lib.PACKAGE_DIR / "include", _lib.REPO_ROOT / "include") if (d / "splat.h").is_file())
    if inc is None or _build.compiler() is None:
        pytest.skip("no jax FFI headers or no C compiler")
    out = _build.compile_jax_ffi(_lib.PACKAGE_DIR / "_xla_ffi.c", inc, header, _lib.library_path(), tmp_path / "x.so")
    assert out.is_file() and out.stat().st_size > 0
