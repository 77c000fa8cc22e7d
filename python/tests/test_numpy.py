"""numpy front end on the CPU backend against the float64 reference: every spec of
DESIGN.md §2 at awkward sizes (seq 97, seq_q != seq_k), random masks, the unfused
pipeline (sddmm, softmax, spmm), grouped-query attention, arbitrary strides, the plan
cache and pattern queries; the attention backward against the reference's gradients and
finite differences."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import reference as ref
import splat
from splat.ops import round_to_float32
from conftest import BF16, DTYPES, randn

SHAPES = [(97, 97), (61, 97), (97, 40)]  # (seq_q, seq_k)


@pytest.mark.parametrize("spec,pred", ref.SPECS, ids=[s for s, _ in ref.SPECS])
@pytest.mark.parametrize("seq_q,seq_k", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_pattern_rows_match_predicate(spec, pred, seq_q, seq_k):
    pat = splat.Pattern(spec, seq_q, seq_k)
    mask = ref.mask_of(pred, seq_q, seq_k)
    assert (pat.seq_q, pat.seq_k) == (seq_q, seq_k)
    np.testing.assert_array_equal(pat.to_dense(), mask)
    assert pat.nnz == int(mask.sum())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("spec,pred", ref.SPECS, ids=[s for s, _ in ref.SPECS])
@pytest.mark.parametrize("seq_q,seq_k", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_attention_every_spec(rng, spec, pred, seq_q, seq_k, dtype):
    B, H, Hkv, D = 2, 4, 2, 24
    q = randn(rng, (B, H, seq_q, D), dtype)
    k = randn(rng, (B, Hkv, seq_k, D), dtype)
    v = randn(rng, (B, Hkv, seq_k, D), dtype)
    mask = ref.mask_of(pred, seq_q, seq_k)
    out, lse = splat.attention(q, k, v, splat.Pattern(spec, seq_q, seq_k), return_lse=True)
    want, want_lse = ref.attention(q, k, v, mask)
    assert out.dtype == dtype and out.shape == q.shape and lse.shape == (B, H, seq_q)
    ref.assert_close(out, want, dtype.name, f"{spec} out")
    ref.assert_close(lse, want_lse, "float32", f"{spec} lse")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("spec,pred", ref.SPECS, ids=[s for s, _ in ref.SPECS])
def test_unfused_pipeline_every_spec(rng, spec, pred, dtype):
    B, H, seq_q, seq_k, D = 1, 3, 97, 61, 16
    q, k, v = (randn(rng, (B, H, s, D), dtype) for s in (seq_q, seq_k, seq_k))
    mask = ref.mask_of(pred, seq_q, seq_k)
    pat = splat.Pattern(spec, seq_q, seq_k)
    scale = 0.3
    scores = splat.sddmm(q, k, pat, scale=scale, dtype=np.float32)
    W = scores.shape[-1]
    assert W == max(1, int(mask.sum(axis=1).max()))
    dense_s = scale * np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64))
    ref.assert_close(scores, ref.to_values(dense_s, mask, W), "float32", "sddmm")
    probs, lse = splat.softmax(scores, pat, return_lse=True)
    out = splat.spmm(probs.astype(dtype), v, pat)
    want, want_lse = ref.attention(q, k, v, mask, scale=scale)
    ref.assert_close(lse, want_lse, "float32", "softmax lse")
    # probs are rounded to dtype before spmm: allow two roundings
    ref.assert_close(out, want, dtype.name if dtype != np.float32 else "float16", "spmm")


@pytest.mark.parametrize(
    "spec,pred,width",
    [("dilated(100,2)", ref.dilated(100, 2), 208), ("window(100)", ref.window(100), 208)],
)
def test_row_width_rounds_long_rows(rng, spec, pred, width):
    # docs/format.md "Row width": rows of 128 or more entries are padded to a multiple of 16
    B, H, seq, D = 1, 2, 700, 8
    q, k = (randn(rng, (B, H, seq, D), np.float32) for _ in range(2))
    mask = ref.mask_of(pred, seq, seq)
    pat = splat.Pattern(spec, seq)
    assert pat.report()["max_row_nnz"] == int(mask.sum(axis=1).max()) == 201
    assert pat.row_width == pat.report()["row_width"] == width
    scores = splat.sddmm(q, k, pat, scale=0.5, dtype=np.float32)
    assert scores.shape == (B, H, seq, width)
    dense_s = 0.5 * np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64))
    ref.assert_close(scores, ref.to_values(dense_s, mask, width), "float32", "sddmm")
    probs = splat.softmax(scores, pat)
    assert probs.shape == scores.shape
    with pytest.raises(splat.Error, match=r"expects \[1, ?2, ?700, ?%d\].*row width W" % width):
        splat.softmax(np.ascontiguousarray(scores[..., :201]), pat)
    want, _ = ref.attention(q, k, k, mask, scale=0.5)
    ref.assert_close(splat.spmm(probs, k, pat), want, "float32", "spmm")


@pytest.mark.parametrize("seed", range(6))
def test_random_masks(seed):
    rng = np.random.default_rng(seed)
    seq_q, seq_k = [(97, 97), (33, 130), (130, 33)][seed % 3]
    density = [0.02, 0.3, 0.9][seed % 3]
    mask = ref.random_mask(rng, seq_q, seq_k, density)
    pat = splat.Pattern.from_mask(mask)
    np.testing.assert_array_equal(pat.to_dense(), mask)
    assert pat.spec == f"mask({seq_q}x{seq_k})"
    q = randn(rng, (2, 2, seq_q, 32), np.float32)
    k = randn(rng, (2, 2, seq_k, 32), np.float32)
    v = randn(rng, (2, 2, seq_k, 32), np.float32)
    out, lse = splat.attention(q, k, v, pat, return_lse=True)
    want, want_lse = ref.attention(q, k, v, mask)
    ref.assert_close(out, want, "float32", "random mask")
    ref.assert_close(lse, want_lse, "float32", "random mask lse")
    if seq_q > 2:  # the forced empty row: zeros and -inf, never NaN
        assert np.all(out[:, :, 1] == 0) and np.all(lse[:, :, 1] == -np.inf)


def test_mask_patterns_combine_with_specs(rng):
    mask = ref.random_mask(rng, 50, 50, 0.1)
    pat = splat.Pattern.from_mask(mask) | splat.Pattern("window(2)", 50)
    want = mask | ref.mask_of(ref.window(2), 50, 50)
    np.testing.assert_array_equal(pat.to_dense(), want)
    both = splat.Pattern("causal", 50) & splat.Pattern("global(4)", 50)
    np.testing.assert_array_equal(both.to_dense(), ref.mask_of(ref.intersect(ref.causal(), ref.global_(4)), 50, 50))
    assert both.key[0] == "spec" and pat.key[0] == "mask"


def test_mask_file_is_read_as_it_is_now(rng, tmp_path, monkeypatch):
    """A spec naming a .npy file is known by the file's contents: a rewritten file gives
    the new mask's result, never a cached plan of the old one."""
    monkeypatch.chdir(tmp_path)
    q, k, v = (randn(rng, (1, 2, 24, 8), np.float32) for _ in range(3))
    first = ref.random_mask(rng, 24, 24, 0.2)
    np.save("m.npy", first)
    out = splat.attention(q, k, v, 'mask("m.npy")')
    ref.assert_close(out, ref.attention(q, k, v, first)[0], "float32", "mask file")
    second = ref.mask_of(ref.causal(), 24, 24)
    np.save("m.npy", second)
    pat = splat.Pattern('mask("m.npy") | window(1)', 24)
    assert pat.key[0] == "mask" and pat.token.startswith("#")
    for p in ('mask("m.npy")', 'mask ("m.npy")', splat.Pattern('mask("m.npy")', 24)):
        out = splat.attention(q, k, v, p)
        ref.assert_close(out, ref.attention(q, k, v, second)[0], "float32", "rewritten mask file")
    assert splat.Pattern('mask("m.npy")', 24) == splat.Pattern('mask("m.npy")', 24)


def test_softmax_spec_text_needs_seq_k(rng):
    """The scores do not carry seq_k: softmax refuses spec text without it, and with it
    (seq_q != seq_k) normalises over each row's true entries."""
    q = rng.standard_normal((1, 1, 20, 8)).astype(np.float32)
    k, v = (rng.standard_normal((1, 1, 30, 8)).astype(np.float32) for _ in range(2))
    spec = "window(0,19)"
    scores = splat.sddmm(q, k, spec, scale=0.5)
    with pytest.raises(splat.Error, match=r"seq_k="):
        splat.softmax(scores, spec)
    with pytest.raises(splat.Error, match=r"seq_k=20 but the pattern has 30 keys"):
        splat.softmax(scores, splat.Pattern(spec, 20, 30), seq_k=20)
    probs = splat.softmax(scores, spec, seq_k=30)
    np.testing.assert_array_equal(probs, splat.softmax(scores, splat.Pattern(spec, 20, 30)))
    mask = ref.mask_of(ref.window(0, 19), 20, 30)
    ref.assert_close(splat.spmm(probs, v, spec), ref.attention(q, k, v, mask, scale=0.5)[0], "float32", "rectangular")


def test_pattern_equality_by_canonical_spec():
    """Spellings of one spec are one pattern (equal, one hash); other specs, sizes or
    union orders are not (equality is by canonical text, not by mask content)."""
    a, b = splat.Pattern("window(3)", 64), splat.Pattern("window( 3 , 3 )", 64)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != splat.Pattern("window(3,2)", 64)
    assert a != splat.Pattern("window(3)", 65)
    assert splat.Pattern("window(3)|global(2)", 64) == splat.Pattern("window(3,3) | global(2)", 64)


def test_mask_file_spec_is_read_once_while_unchanged(rng, tmp_path, monkeypatch):
    """A string spec naming a file is read again only when the file's stamps (inode, size,
    mtime, ctime) change, or when it was modified in the last two seconds (a rewrite within
    the timestamp granularity could keep them all)."""
    import os

    from splat import pattern as P

    monkeypatch.chdir(tmp_path)
    first = ref.random_mask(rng, 24, 24, 0.2)
    np.save("m.npy", first)
    spec = 'mask ("m.npy") | window(1)'
    assert P.pattern_for_token(spec, 24, 24) is not P.pattern_for_token(spec, 24, 24)  # just written
    monkeypatch.setattr(P, "_RACY_NS", 0)  # as if written long ago
    a = P.pattern_for_token(spec, 24, 24)
    assert P.pattern_for_token(spec, 24, 24) is a
    np.testing.assert_array_equal(a.to_dense(), first | ref.mask_of(ref.window(1), 24, 24))
    st = os.stat("m.npy")
    second = ref.mask_of(ref.causal(), 24, 24)
    np.save("m.npy", second)  # the same size and inode; the mtime set apart below
    os.utime("m.npy", ns=(st.st_atime_ns, st.st_mtime_ns - 10**9))
    b = P.pattern_for_token(spec, 24, 24)
    assert b is not a and P.pattern_for_token(spec, 24, 24) is b
    np.testing.assert_array_equal(b.to_dense(), second | ref.mask_of(ref.window(1), 24, 24))
    # Paths as the parser reads them: only the quote and the backslash are escaped.
    text = "mask('a\\'b') | mask(\"c\\d\") | mask('e\\\\')"  # mask('a\'b') | mask("c\d") | mask('e\\')
    assert [P._unquote(m.group(2), m.group(1)) for m in P._MASK_PATH.finditer(text)] == ["a'b", "c\\d", "e\\"]
    with pytest.raises(splat.Error, match="SPLAT_ERR_PARSE|NUL|null"):  # the parser's error, not os.stat's
        P.pattern_for_token('mask("m\0.npy")', 24, 24)
    os.remove("m.npy")  # a file that cannot be read fails every time, nothing cached
    for _ in range(2):
        with pytest.raises(splat.Error):
            P.pattern_for_token(spec, 24, 24)


def test_pattern_from_npy_takes_the_files_shape(rng, tmp_path):
    mask = ref.random_mask(rng, 30, 20, 0.3)
    np.save(tmp_path / "m.npy", mask)
    p = splat.Pattern.from_npy(tmp_path / "m.npy")
    assert (p.seq_q, p.seq_k) == (30, 20)
    np.testing.assert_array_equal(p.to_dense(), mask)
    # known by its rows, as the spec naming the file is
    assert p.token == splat.Pattern(f'mask("{tmp_path}/m.npy")', 30, 20).token
    q, k, v = randn(rng, (1, 2, 30, 8), np.float32), *(randn(rng, (1, 2, 20, 8), np.float32) for _ in range(2))
    ref.assert_close(splat.attention(q, k, v, p), ref.attention(q, k, v, mask)[0], "float32", "from_npy")
    with pytest.raises(splat.Error, match="cannot open"):
        splat.Pattern.from_npy(tmp_path / "missing.npy")
    with pytest.raises(splat.Error, match="must be a file name"):
        splat.Pattern.from_npy(17)
    with pytest.raises(splat.Error, match="contains a NUL character"):
        splat.Pattern.from_npy("m\0.npy")
    assert splat.Pattern.from_npy(str(tmp_path / "m.npy").encode()).token == p.token  # bytes paths too


def test_equal_masks_share_a_token_while_any_lives(rng, tmp_path):
    """Rebinding a name to an equal mask pattern frees the first; the token (what the torch
    op and the JAX handlers look up) must still find the one alive."""
    mask = ref.random_mask(rng, 16, 16, 0.3)
    np.save(tmp_path / "m.npy", mask)
    for make in (lambda: splat.Pattern.from_mask(mask), lambda: splat.Pattern(f'mask("{tmp_path}/m.npy")', 16)):
        p = make()
        p = make()  # the first object dies here, the second lives
        assert splat.pattern.pattern_for_token(p.token, 16, 16) is p


def test_any_strides(rng):
    B, H, S, D = 2, 3, 97, 16
    pat = splat.Pattern("window(7) | global(2)", S)
    mask = ref.mask_of(ref.union(ref.window(7), ref.global_(2)), S, S)
    # q laid out [B, S, H, D] and viewed as [B, H, S, D]; k reversed along seq;
    # v broadcast over the batch (stride 0).
    q = randn(rng, (B, S, H, D), np.float32).transpose(0, 2, 1, 3)
    k_base = randn(rng, (B, H, S, D), np.float32)
    k = k_base[:, :, ::-1]
    v = np.broadcast_to(randn(rng, (1, H, S, D), np.float32), (B, H, S, D))
    assert not q.flags.c_contiguous and k.strides[2] < 0 and v.strides[0] == 0
    out = splat.attention(q, k, v, pat)
    want, _ = ref.attention(q, k, v, mask)
    ref.assert_close(out, want, "float32", "strided")


def test_size_one_dimension_stride_is_unused(rng):
    """A dimension of extent 1 is never stepped along: any stride there reads the same
    elements (numpy and torch give such dimensions arbitrary strides)."""
    q = randn(rng, (1, 2, 9, 4), np.float32)
    huge = np.lib.stride_tricks.as_strided(q, q.shape, (2**50 * q.itemsize,) + q.strides[1:])
    np.testing.assert_array_equal(splat.attention(huge, q, q, "causal"), splat.attention(q, q, q, "causal"))


def test_misaligned_inputs_are_copied(rng):
    """Arrays whose data sits off their elements' alignment (a buffer read at an odd byte
    offset) give the results of their values: the library refuses such pointers, so the
    front end passes an aligned copy."""
    S, D = 33, 8
    mask = ref.mask_of(ref.causal(), S, S)
    for dt in (np.float32, np.float16):
        q, k, v = (randn(rng, (1, 2, S, D), dt) for _ in range(3))
        odd = []
        for x in (q, k, v):
            buf = bytearray(x.nbytes + 1)
            y = np.frombuffer(buf, dtype=dt, count=x.size, offset=1).reshape(x.shape)
            y[...] = x
            assert not y.flags.aligned
            odd.append(y)
        out = splat.attention(*odd, "causal")
        np.testing.assert_array_equal(out, splat.attention(q, k, v, "causal"))
        ref.assert_close(out, ref.attention(q, k, v, mask)[0], np.dtype(dt).name, "misaligned")


def test_byte_swapped_inputs_are_read_as_their_values(rng):
    """Arrays in the other byte order ('>f4' on a little-endian machine) give the results of
    their values, in native-order outputs (they were read as native floats)."""
    S, D = 33, 8
    mask = ref.mask_of(ref.causal(), S, S)
    for native in (np.float32, np.float16):
        q, k, v = (randn(rng, (1, 2, S, D), native) for _ in range(3))
        qs, ks, vs = (x.astype(x.dtype.newbyteorder()) for x in (q, k, v))
        assert not qs.dtype.isnative and np.array_equal(qs, q)
        out = splat.attention(qs, ks, vs, "causal")
        assert out.dtype == np.dtype(native) and out.dtype.isnative
        np.testing.assert_array_equal(out, splat.attention(q, k, v, "causal"))
        ref.assert_close(out, ref.attention(q, k, v, mask)[0], np.dtype(native).name, "byte-swapped")
        scores = splat.sddmm(qs, ks, "causal")
        np.testing.assert_array_equal(scores, splat.sddmm(q, k, "causal"))
        seq = q.shape[2]
        probs = splat.softmax(scores.astype(scores.dtype.newbyteorder()), "causal", seq_k=seq)
        np.testing.assert_array_equal(probs, splat.softmax(scores, "causal", seq_k=seq))
        np.testing.assert_array_equal(splat.spmm(probs, vs, "causal"), splat.spmm(probs, v, "causal"))


def test_string_pattern_and_scale(rng):
    q, k, v = (randn(rng, (1, 2, 40, 8), np.float32) for _ in range(3))
    out = splat.attention(q, k, v, "causal", scale=0.5)
    want, _ = ref.attention(q, k, v, ref.mask_of(ref.causal(), 40, 40), scale=0.5)
    ref.assert_close(out, want, "float32", "string spec")


def test_plan_cache_reuses_plans(rng):
    splat.plan_cache.clear()
    pat = splat.Pattern("blocked(16)", 64)
    q = randn(rng, (1, 2, 64, 8), np.float32)
    before = splat.plan_cache.info()
    for _ in range(3):
        splat.attention(q, q, q, pat)
    splat.attention(q, q, q, splat.Pattern("blocked(16)", 64))  # equal pattern, new object
    info = splat.plan_cache.info()
    assert info["misses"] - before["misses"] == 1
    assert info["hits"] - before["hits"] == 3
    assert info["size"] >= 1 and info["device_bytes"] == 0  # CPU plans hold no device memory
    assert info["workspace_bytes"] == 0  # nor take workspaces
    splat.attention(q.astype(np.float16), q.astype(np.float16), q.astype(np.float16), pat)
    assert splat.plan_cache.info()["misses"] - before["misses"] == 2


def test_plan_cache_is_bounded(rng):
    cache = splat.ops.PlanCache(2)
    for s in (16, 32, 48):
        cache.get(splat.Pattern("causal", s), 1, 1, 1, 8, 0, "cpu", splat._lib.OPS_UNFUSED)
    assert cache.info()["size"] == 2


def test_plans_are_built_for_their_operations(rng):
    """The fused attention and the unfused operations get separate plans (a CUDA plan
    compiles only what it runs); a plan refuses an operation it was not built for."""
    splat.plan_cache.clear()
    pat = splat.Pattern("window(3)", 32)
    q = randn(rng, (1, 2, 32, 8), np.float32)
    before = splat.plan_cache.info()["misses"]
    splat.attention(q, q, q, pat)
    splat.sddmm(q, q, pat)
    assert splat.plan_cache.info()["misses"] - before == 2
    plan = splat.ops.Plan(pat, 1, 2, 2, 8, 0, "cpu", splat._lib.OPS_ATTENTION)
    with pytest.raises(splat.Error, match="SPLAT_OPS_SDDMM"):
        plan.call("sddmm", None, None, 0.0, None, None)


def test_pattern_report():
    pat = splat.Pattern("longformer(8,2)", 97)
    rep = pat.report()
    mask = ref.mask_of(ref.longformer(8, 2), 97, 97)
    assert rep["nnz"] == int(mask.sum())
    assert rep["seq_q"] == rep["seq_k"] == 97
    assert rep["max_row_nnz"] == int(mask.sum(axis=1).max())
    assert rep["regular_fraction"] == 1.0
    assert len(rep["rows_by_segments"]) == 10
    assert rep["spec"] == "longformer(8,2)"
    text = pat.report_text()
    assert "nnz" in text and str(rep["nnz"]) in text
    import json

    assert json.loads(pat.report_text(as_json=True))["nnz"] == rep["nnz"]
    # an analysis holds no device memory; nor does a CPU plan
    assert rep["device_bytes"] == 0 and json.loads(pat.report_text(as_json=True))["device_bytes"] == 0
    plan = splat.ops.Plan(pat, 1, 2, 2, 8, 0, "cpu", splat._lib.OPS_ATTENTION)
    assert plan.report()["device_bytes"] == 0 and plan.report()["workspace_bytes"] == 0
    np.testing.assert_array_equal(pat.row(50), np.nonzero(mask[50])[0])
    assert "longformer(8,2)" in repr(pat)


@pytest.mark.skipif(BF16 is None, reason="ml_dtypes not installed")
def test_bfloat16_outputs_are_bfloat16(rng):
    q = randn(rng, (1, 1, 20, 8), BF16)
    assert splat.attention(q, q, q, "dense").dtype == BF16


def test_round_to_float32_matches_numpy():
    """The pure-Python float32 rounding the front ends check scales with (torch.compile
    traces it) equals numpy's cast: ties to even, subnormals, overflow to inf, signs."""
    r = random.Random(5)
    values = [0.5, -0.0, 1e39, -1e39, 2.0**-149, 2.0**-150, 2.0**-151, 1 + 2.0**-24, 1 + 3 * 2.0**-24]
    values.append(float(np.float32(3.4028235e38)) * (1 + 2.0**-25))  # the tie past float32's largest
    for _ in range(20000):
        f = np.float32(math.ldexp(r.random(), r.randint(-150, 128))) * r.choice((1, -1))
        nxt = np.nextafter(f, np.float32(math.copysign(np.inf, f)))
        values += [float(f), (float(f) + float(nxt)) / 2 if np.isfinite(nxt) else float(f)]
        values.append(math.ldexp(r.random(), r.randint(-160, 130)) * r.choice((1, -1)))
    with np.errstate(over="ignore"):
        for x in values:
            want, got = float(np.float32(x)), round_to_float32(x)
            assert want == got and math.copysign(1, want) == math.copysign(1, got), (x, want, got)


# ------------------------------------------------------------------ attention backward


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("spec,pred", ref.SPECS, ids=[s for s, _ in ref.SPECS])
@pytest.mark.parametrize("seq_q,seq_k", SHAPES, ids=[f"{a}x{b}" for a, b in SHAPES])
def test_attention_backward_every_spec(rng, spec, pred, seq_q, seq_k, dtype):
    """Gradients of every spec (window(-2,6) at 97x40 has rows that see no key) with
    grouped-query attention, within twice a naive same-dtype computation's error."""
    B, H, Hkv, D = 2, 4, 2, 24
    q = randn(rng, (B, H, seq_q, D), dtype)
    k, v = (randn(rng, (B, Hkv, seq_k, D), dtype) for _ in range(2))
    dout = randn(rng, (B, H, seq_q, D), dtype)
    pat = splat.Pattern(spec, seq_q, seq_k)
    out, lse = splat.attention(q, k, v, pat, return_lse=True)
    grads = splat.attention_backward(q, k, v, out, lse, dout, pat)
    assert [(g.shape, g.dtype) for g in grads] == [(x.shape, dtype) for x in (q, k, v)]
    ref.assert_grads_close(grads, q, k, v, ref.mask_of(pred, seq_q, seq_k), dout, dtype.name, spec)


@pytest.mark.parametrize("seed", range(3))
def test_attention_backward_random_masks(seed):
    """Rows that see no key get dq = 0, keys that no row sees dk = dv = 0 (exactly); one
    key/value head for three query heads; a given scale; dout of any strides; spec text."""
    rng = np.random.default_rng(200 + seed)
    seq_q, seq_k = [(50, 50), (33, 70), (70, 33)][seed]
    mask = ref.random_mask(rng, seq_q, seq_k, [0.1, 0.4, 0.8][seed])
    mask[:, 3] = False
    pat = splat.Pattern.from_mask(mask)
    q = randn(rng, (2, 3, seq_q, 16), np.float32)
    k, v = (randn(rng, (2, 1, seq_k, 16), np.float32) for _ in range(2))
    dout = np.broadcast_to(randn(rng, (1, 3, seq_q, 16), np.float32), q.shape)  # batch stride 0
    out, lse = splat.attention(q, k, v, pat, scale=0.7, return_lse=True)
    dq, dk, dv = splat.attention_backward(q, k, v, out, lse, dout, pat, scale=0.7)
    ref.assert_grads_close((dq, dk, dv), q, k, v, mask, dout, "float32", "random mask", scale=0.7)
    assert np.all(dq[:, :, 1] == 0) and np.all(dk[:, :, 3] == 0) and np.all(dv[:, :, 3] == 0)
    spec = "window(2,5) | global(3)"
    out, lse = splat.attention(q, k, v, spec, return_lse=True)
    grads = splat.attention_backward(q, k, v, out, lse[..., None], dout, spec)  # lse with its trailing 1
    ref.assert_grads_close(grads, q, k, v, splat.Pattern(spec, seq_q, seq_k).to_dense(), dout, "float32", spec)


def test_attention_backward_finite_differences():
    """The gradient of L = sum(out * dout) along random directions matches central
    differences of splat.attention itself in float32 (step 1e-2, the difference taken
    between the float32 points, so that rounding them is no error; relative agreement 2e-3,
    where the differences seen are below 3e-4)."""
    rng = np.random.default_rng(7)
    seq_q, seq_k = 40, 29
    pat = splat.Pattern("window(3,6) | global(2)", seq_q, seq_k)
    q = randn(rng, (1, 4, seq_q, 16), np.float32)
    k, v = (randn(rng, (1, 2, seq_k, 16), np.float32) for _ in range(2))
    dout = randn(rng, q.shape, np.float32)

    def loss(*x):
        return float((splat.attention(*x, pat).astype(np.float64) * dout).sum())

    out, lse = splat.attention(q, k, v, pat, return_lse=True)
    grads = splat.attention_backward(q, k, v, out, lse, dout, pat)
    for i, (x, g) in enumerate(zip((q, k, v), grads)):
        for _ in range(3):
            d = rng.standard_normal(x.shape)
            plus, minus = ((x + sign * 1e-2 * d).astype(np.float32) for sign in (1, -1))
            args_p, args_m = ([plus if j == i else y for j, y in enumerate((q, k, v))] for plus in (plus, minus))
            fd = loss(*args_p) - loss(*args_m)
            want = float((g.astype(np.float64) * (plus.astype(np.float64) - minus)).sum())
            assert abs(fd - want) <= 2e-3 * abs(want), ("qkv"[i], fd, want)


def test_attention_backward_empty_batch():
    """Batch 0: empty gradients of the inputs' shapes, no C call; shapes still checked."""
    z = np.ones((0, 2, 10, 8), np.float32)
    zk = np.ones((0, 1, 12, 8), np.float32)
    lse = np.ones((0, 2, 10), np.float32)
    grads = splat.attention_backward(z, zk, zk, z, lse, z, "causal")
    assert [(g.shape, g.dtype) for g in grads] == [(z.shape, z.dtype), (zk.shape, z.dtype), (zk.shape, z.dtype)]
    with pytest.raises(splat.Error, match=r"lse.shape=\[0, 2, 9, 1\] but the plan expects \[0, 2, 10, 1\]"):
        splat.attention_backward(z, zk, zk, z, lse[:, :, 1:], z, "causal")
    with pytest.raises(splat.Error, match=r"dout.shape=\[0, 2, 10, 7\] but the plan expects \[0, 2, 10, 8\]"):
        splat.attention_backward(z, zk, zk, z, lse, z[..., 1:], "causal")


def test_attention_backward_errors(rng):
    """An lse that is not the forward's (dtype, shape, -inf on a row that sees keys) and a
    NaN or mistyped dout are refused, naming the tensor."""
    q, k, v = (randn(rng, (1, 2, 10, 8), np.float32) for _ in range(3))
    pat = splat.Pattern("causal", 10)
    out, lse = splat.attention(q, k, v, pat, return_lse=True)

    def backward(lse=lse, dout=q):
        return splat.attention_backward(q, k, v, out, lse, dout, pat)

    cases = [
        ((lse.astype(np.float64), q), r"lse must be float32 \[batch, heads, seq_q\].*got float64"),
        ((lse[0], q), r"lse must be float32 .*shape \(2, 10\)"),
        ((np.ascontiguousarray(lse[:, :, 1:]), q), r"lse.shape=\[1,2,9,1\] but the plan expects \[1,2,10,1\]"),
        ((np.where(np.arange(10) == 3, -np.inf, lse).astype(np.float32), q),
         r"lse\[0,0,3,0\] is -inf but row 3 sees 4 keys"),
        ((np.where(np.arange(10) == 5, np.nan, lse).astype(np.float32), q), r"lse\[0,0,5,0\] is nan"),
        ((lse, np.where(np.arange(8) == 3, np.nan, q).astype(np.float32)), r"dout\[0,0,0,3\] is nan"),
        ((lse, q.astype(np.float16)), r"dout.dtype=float16 but q.dtype=float32"),
    ]
    for (bad_lse, bad_dout), message in cases:
        with pytest.raises(splat.Error, match=message) as info:
            backward(bad_lse, bad_dout)
        assert info.value.status == "SPLAT_ERR_INVALID_ARGUMENT"
    backward()  # the forward's own lse and a finite dout
