"""Independent float64 references for the Python tests (and python/tests/gpu_check.py).

Masks come from brute-force predicates written straight from DESIGN.md §2 and the
BigBird rules of docs/patterns.md, never from the library. The attention reference
is a dense float64 masked softmax; its gradients come from the chain rule through it.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Tuple

import numpy as np

Pred = Callable[[np.ndarray, np.ndarray, int, int], np.ndarray]


def _grid(seq_q: int, seq_k: int) -> Tuple[np.ndarray, np.ndarray]:
    return np.arange(seq_q)[:, None], np.arange(seq_k)[None, :]


def dense() -> Pred:
    return lambda i, j, sq, sk: np.ones(np.broadcast(i, j).shape, dtype=bool)


def causal() -> Pred:
    return lambda i, j, sq, sk: j <= i


def window(l: int, r: Optional[int] = None) -> Pred:
    r = l if r is None else r
    return lambda i, j, sq, sk: (i - l <= j) & (j <= i + r)


def dilated(w: int, d: int) -> Pred:
    return lambda i, j, sq, sk: ((j - i) % d == 0) & (np.abs(j - i) <= d * w)


def strided(s: int) -> Pred:
    return lambda i, j, sq, sk: (i - j) % s == 0


def fixed(b: int, c: int) -> Pred:
    return lambda i, j, sq, sk: (i // b == j // b) | (j % b >= b - c)


def blocked(b: int) -> Pred:
    return lambda i, j, sq, sk: i // b == j // b


def global_(g: int) -> Pred:
    return lambda i, j, sq, sk: (i < g) | (j < g)


def longformer(w: int, g: int) -> Pred:
    return union(window(w), global_(g))


def union(a: Pred, b: Pred) -> Pred:
    return lambda i, j, sq, sk: a(i, j, sq, sk) | b(i, j, sq, sk)


def intersect(a: Pred, b: Pred) -> Pred:
    return lambda i, j, sq, sk: a(i, j, sq, sk) & b(i, j, sq, sk)


_M64 = (1 << 64) - 1


def _splitmix64(state: int) -> Tuple[int, int]:
    state = (state + 0x9E3779B97F4A7C15) & _M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return state, z ^ (z >> 31)


def _bigbird_random_blocks(qb: int, nkb: int, w: int, g: int, r: int, seed: int) -> List[int]:
    cand = [c for c in range(nkb) if c >= g and abs(c - qb) > w]
    m = len(cand)
    k = min(r, m)
    state = (seed ^ (qb * 0xD1342543DE82EF95)) & _M64
    chosen: set = set()
    for jj in range(m - k, m):
        state, z = _splitmix64(state)
        t = z % (jj + 1)
        chosen.add(jj if t in chosen else t)
    return [cand[s] for s in sorted(chosen)]


def bigbird(b: int, w: int, g: int, r: int, seed: int) -> Pred:
    def pred(i: np.ndarray, j: np.ndarray, sq: int, sk: int) -> np.ndarray:
        qb, kb = i // b, j // b
        out = (np.abs(kb - qb) <= w) | (kb < g) | (qb < g)
        out = np.broadcast_to(out, np.broadcast(i, j).shape).copy()
        nkb = -(-sk // b)
        for q_block in range(-(-sq // b)):
            if q_block < g:
                continue
            rows = slice(q_block * b, min(sq, (q_block + 1) * b))
            for kb_r in _bigbird_random_blocks(q_block, nkb, w, g, r, seed):
                out[rows, kb_r * b : min(sk, (kb_r + 1) * b)] = True
        return out

    return pred


def mask_of(pred: Pred, seq_q: int, seq_k: int) -> np.ndarray:
    i, j = _grid(seq_q, seq_k)
    return np.broadcast_to(pred(i, j, seq_q, seq_k), (seq_q, seq_k)).astype(bool)


# Every spec of DESIGN.md §2 (plus combinations), with its predicate.
SPECS: List[Tuple[str, Pred]] = [
    ("dense", dense()),
    ("causal", causal()),
    ("window(5)", window(5)),
    ("window(3,11)", window(3, 11)),
    ("window(-2,6)", window(-2, 6)),
    ("dilated(3,4)", dilated(3, 4)),
    ("strided(7)", strided(7)),
    ("fixed(16,4)", fixed(16, 4)),
    ("blocked(10)", blocked(10)),
    ("global(5)", global_(5)),
    ("longformer(4,3)", longformer(4, 3)),
    ("bigbird(8,1,1,2,42)", bigbird(8, 1, 1, 2, 42)),
    ("window(4) | global(2)", union(window(4), global_(2))),
    ("causal & window(9,0)", intersect(causal(), window(9, 0))),
    ("(blocked(8) | global(3)) & causal", intersect(union(blocked(8), global_(3)), causal())),
    ("dilated(3,2) | dilated(2,3)", union(dilated(3, 2), dilated(2, 3))),
    ("strided(5) & window(20)", intersect(strided(5), window(20))),
]


def random_mask(rng: np.random.Generator, seq_q: int, seq_k: int, density: float) -> np.ndarray:
    """A random mask with an empty row and a full row when there is room."""
    m = rng.random((seq_q, seq_k)) < density
    if seq_q > 2:
        m[1] = False
        m[2] = True
    return m


def _probs(q: np.ndarray, k: np.ndarray, mask: np.ndarray, scale: Optional[float]) -> Tuple[np.ndarray, np.ndarray]:
    """float64 masked softmax probabilities [B,H,Sq,Sk] (rows that see no key: zeros) and
    log-sum-exp [B,H,Sq]; k [B,H,Sk,D] (key/value heads already repeated)."""
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = scale * np.einsum("bhid,bhjd->bhij", q, k)
    s = np.where(mask, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.where(mask, np.exp(s - m_safe), 0.0)
    total = p.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(total > 0, np.log(total) + m_safe, -np.inf)[..., 0]
        p = np.where(total > 0, p / np.where(total > 0, total, 1.0), 0.0)
    return p, lse


def _f64_heads(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v in float64, k and v repeated to q's heads (grouped-query attention)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    group = q.shape[1] // k.shape[1]
    return q, np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)


def attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, scale: Optional[float] = None
) -> Tuple[np.ndarray, np.ndarray]:
    """float64 masked attention and log-sum-exp; q [B,H,Sq,D], k/v [B,Hkv,Sk,D]."""
    q, k, v = _f64_heads(q, k, v)
    p, lse = _probs(q, k, mask, scale)
    return np.einsum("bhij,bhjd->bhid", p, v), lse


def attention_backward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray,
    dout: np.ndarray,
    scale: Optional[float] = None,
    dlse: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float64 gradients (dq, dk, dv) of ``attention``'s out (cotangent dout [B,H,Sq,D]) and
    lse (cotangent dlse [B,H,Sq], optional), by the chain rule through the dense masked
    softmax (its Jacobian diag(p) - p p^T, not the library's <dout, out> shortcut); dk and
    dv sum over the query heads of their key/value head."""
    B, Hkv = np.shape(k)[:2]
    q, kr, vr = _f64_heads(q, k, v)
    dout = np.asarray(dout, dtype=np.float64)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    p, _ = _probs(q, kr, mask, scale)
    dp = np.einsum("bhid,bhjd->bhij", dout, vr)
    ds = p * (dp - (p * dp).sum(axis=-1, keepdims=True))
    if dlse is not None:
        ds = ds + p * np.asarray(dlse, dtype=np.float64)[..., None]
    dq = scale * np.einsum("bhij,bhjd->bhid", ds, kr)
    per_head = scale * np.einsum("bhij,bhid->bhjd", ds, q), np.einsum("bhij,bhid->bhjd", p, dout)
    dk, dv = (g.reshape((B, Hkv, -1) + g.shape[2:]).sum(axis=2) for g in per_head)
    return dq, dk, dv


def _rounder(dtype_name: str) -> Callable[[np.ndarray], np.ndarray]:
    """x -> x rounded to dtype_name, as float32 (numpy's float32 arithmetic in between)."""
    if dtype_name == "bfloat16":
        import ml_dtypes

        dt = np.dtype(ml_dtypes.bfloat16)
    else:
        dt = np.dtype(dtype_name)
    return lambda x: np.asarray(x, dtype=np.float32).astype(dt).astype(np.float32)


def naive_attention_backward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray,
    dout: np.ndarray,
    dtype_name: str,
    scale: Optional[float] = None,
    dlse: Optional[np.ndarray] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradients of ``attention_backward`` computed naively in dtype_name: the dense
    formulas in float32 arithmetic with every intermediate (scores, probabilities, out, dP,
    dS, the gradients) rounded to the dtype. Its error is the yardstick of
    ``assert_grads_close``."""
    r = _rounder(dtype_name)
    q, k, v, dout = (r(x) for x in (q, k, v, dout))
    B, Hkv = k.shape[:2]
    group = q.shape[1] // Hkv
    kr, vr = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = np.float32(1.0 / np.sqrt(q.shape[-1]) if scale is None else scale)
    s = np.where(mask, r(scale * np.einsum("bhid,bhjd->bhij", q, kr)), -np.inf)
    m = s.max(axis=-1, keepdims=True)
    e = r(np.where(mask, np.exp(s - np.where(np.isfinite(m), m, 0)), 0))
    total = r(e.sum(axis=-1, keepdims=True))
    p = r(e / np.where(total > 0, total, 1))
    out = r(np.einsum("bhij,bhjd->bhid", p, vr))
    dp = r(np.einsum("bhid,bhjd->bhij", dout, vr))
    ds = r(p * (dp - r((dout * out).sum(axis=-1, keepdims=True))))
    if dlse is not None:
        ds = r(ds + p * r(dlse)[..., None])
    dq = r(scale * np.einsum("bhij,bhjd->bhid", ds, kr))
    per_head = scale * np.einsum("bhij,bhid->bhjd", ds, q), np.einsum("bhij,bhid->bhjd", p, dout)
    dk, dv = (r(g.reshape((B, Hkv, -1) + g.shape[2:]).sum(axis=2)) for g in per_head)
    return dq, dk, dv


def assert_grads_close(
    got: Tuple[np.ndarray, np.ndarray, np.ndarray],
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray,
    dout: np.ndarray,
    dtype_name: str,
    what: str = "",
    scale: Optional[float] = None,
    dlse: Optional[np.ndarray] = None,
    want: Optional[Tuple[np.ndarray, np.ndarray, np.ndarray]] = None,
) -> None:
    """(dq, dk, dv) against ``want`` (default: ``attention_backward``'s): each within twice
    the error of ``naive_attention_backward`` in the same dtype, measured by ``max_error``."""
    if want is None:
        want = attention_backward(q, k, v, mask, dout, scale, dlse)
    naive = naive_attention_backward(q, k, v, mask, dout, dtype_name, scale, dlse)
    for name, g, w, n in zip(("dq", "dk", "dv"), got, want, naive):
        tol = 2 * max_error(n, w)
        err = max_error(g, w)
        assert err <= tol, f"{what} {name}: max error {err:.3e} > {tol:.1e} (twice a naive {dtype_name} one)"


def columns(mask: np.ndarray) -> List[np.ndarray]:
    """Visible columns of each row, increasing (the ACSR value order)."""
    return [np.nonzero(row)[0] for row in mask]


def to_values(dense: np.ndarray, mask: np.ndarray, width: int) -> np.ndarray:
    """Dense [..., Sq, Sk] scores -> ACSR values [..., Sq, width] (padding 0)."""
    out = np.zeros(dense.shape[:-1] + (width,), dtype=np.float64)
    for i, cols in enumerate(columns(mask)):
        out[..., i, : len(cols)] = dense[..., i, cols]
    return out


# Tolerances per dtype: the CPU backend accumulates in double and rounds once, so the
# error is a rounding of the output; GPU kernels get the loose column.
TOLERANCE = {"float32": 2e-6, "float16": 1e-3, "bfloat16": 8e-3}
GPU_TOLERANCE = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}


def max_error(got: np.ndarray, ref: np.ndarray) -> float:
    """Largest |got - ref| / (1 + |ref|); inf when got has a NaN where ref has none,
    or disagrees on an infinity (-inf log-sum-exp of empty rows)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if np.isnan(got).any() or (np.isinf(got) != np.isinf(ref)).any():
        return float("inf")
    same_inf = np.isinf(ref) & (got == ref)
    if (np.isinf(ref) & ~same_inf).any():
        return float("inf")
    finite = ~np.isinf(ref)
    if not finite.any():
        return 0.0
    g, r = got[finite], ref[finite]
    return float((np.abs(g - r) / (1.0 + np.abs(r))).max())


def assert_close(got: np.ndarray, ref: np.ndarray, dtype_name: str, what: str = "", gpu: bool = False) -> None:
    tol = (GPU_TOLERANCE if gpu else TOLERANCE)[dtype_name]
    err = max_error(got, ref)
    assert err <= tol, f"{what}: max error {err:.3e} > {tol:.1e} ({dtype_name})"
