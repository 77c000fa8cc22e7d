"""splat.ops — plans, the plan cache, and the numpy front end.

``attention``, ``sddmm``, ``softmax`` and ``spmm`` take numpy arrays of shape
[batch, heads, seq, head_dim] (float32, float16, or ml_dtypes.bfloat16), with any
strides, and run on the CPU backend. Plans are built once per (pattern, shapes, dtype,
device) and kept in a bounded LRU cache shared with the torch front end
(``$SPLAT_PLAN_CACHE_SIZE`` entries, default 64).
"""

from __future__ import annotations

import ctypes
import math
import os
import re
import threading
from collections import OrderedDict
from typing import Any, Dict, NamedTuple, Optional, Tuple, Union

import numpy as np

from . import _lib
from .errors import c_integer, flag, invalid, positive_int
from .pattern import Pattern, pattern_for_token

# ------------------------------------------------------------------ plans

# head_dim given to plans that only serve softmax (which never reads Q, K or V).
_VALUES_ONLY_HEAD_DIM = 64


class PlanParams(NamedTuple):
    """What a plan is built for besides its pattern: the arguments that follow the pattern
    in ``Plan(pattern, ...)`` and ``PlanCache.get(pattern, ...)``, defined once here. All
    required: a cached plan for the wrong device or operations must not come from an
    omitted argument."""

    batch: int
    heads: int
    heads_kv: int
    head_dim: int
    dtype: int
    device: str
    ops: int


def plan_params(*args: Any, **kwargs: Any) -> PlanParams:
    """``PlanParams(*args, **kwargs)`` checked: integers, never bools (True would key the cache
    as 1), that fit the fields of ``splat_plan_desc`` (ctypes would wrap past them)."""
    params = PlanParams(*args, **kwargs)
    return params._replace(
        **{what: c_integer(getattr(params, what), what, 64) for what in ("batch", "heads", "heads_kv", "head_dim")},
        **{what: c_integer(getattr(params, what), what, 32) for what in ("dtype", "ops")},
    )


class Plan:
    """A C ``splat_plan``: the analysis of one pattern for one set of shapes, dtype
    and device (``Plan(pattern, *args, **kwargs)``, the rest as ``PlanParams``). Runs are
    serialised by ``lock`` (a plan runs on one thread at a time)."""

    def __init__(self, pattern: Pattern, *args: Any, **kwargs: Any) -> None:
        self.handle: Optional[int] = None
        batch, heads, heads_kv, head_dim, dtype, device, ops = plan_params(*args, **kwargs)
        if heads_kv > 0 and heads % heads_kv:
            # the C message's "or be 0" is the C API's spelling of heads_kv = heads
            raise invalid(
                f"k and v have {heads_kv} heads (shape[1]), which must divide q's {heads} "
                "(grouped-query attention: each k/v head serves heads / heads_kv query heads)"
            )
        ctx = _lib.context(device)
        desc = _lib.SplatPlanDesc(batch, heads, heads_kv, head_dim, dtype, 0, 0, 0, ops)
        out = ctypes.c_void_p()
        _lib.check(_lib.lib().splat_plan_create(ctx, pattern.handle, ctypes.byref(desc), ctypes.byref(out)))
        self.handle = out.value
        self.device = device
        self.width = int(_lib.lib().splat_plan_row_width(self.handle))
        self.lock = threading.Lock()

    def report(self) -> Dict[str, Any]:
        rep = _lib.SplatReport()
        _lib.check(_lib.lib().splat_plan_report(self.handle, ctypes.byref(rep)))
        return rep.to_dict()

    def call(self, fn_name: str, *args: Any) -> None:
        """Runs ``splat_<fn_name>(plan, *args)`` and raises on failure."""
        fn = getattr(_lib.lib(), "splat_" + fn_name)
        with self.lock:
            _lib.check(fn(self.handle, *args))

    def __del__(self) -> None:
        handle, self.handle = self.handle, None
        if handle and _lib is not None and _lib._lib is not None:
            _lib._lib.splat_plan_destroy(handle)


PlanKey = Tuple[Any, PlanParams]


class PlanCache:
    """A bounded LRU of plans keyed by (pattern key, ``PlanParams``): the fused attention
    and the unfused operations (``_lib.OPS_ATTENTION`` / ``_lib.OPS_UNFUSED``) get plans of
    their own, so a CUDA plan compiles only the kernels it runs."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._plans: "OrderedDict[PlanKey, Plan]" = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, pattern: Pattern, *args: Any, **kwargs: Any) -> Plan:
        """``Plan(pattern, *args, **kwargs)``: the cached one, else a new one, cached."""
        params = plan_params(*args, **kwargs)
        key = (pattern.key, params)
        with self._lock:
            plan = self._plans.get(key)
            if plan is not None:
                self._plans.move_to_end(key)
                self.hits += 1
                return plan
            self.misses += 1
            plan = Plan(pattern, *params)
            self._plans[key] = plan
            while len(self._plans) > self.capacity:
                self._plans.popitem(last=False)
            return plan

    def clear(self) -> None:
        with self._lock:
            self._plans.clear()

    def info(self) -> Dict[str, int]:
        """Size, capacity, hits and misses; ``device_bytes``, the device memory its plans
        hold (their metadata; 0 for CPU plans); and ``workspace_bytes``, the most one
        attention call of theirs takes from the context's workspace pool while it runs."""
        with self._lock:
            reports = [p.report() for p in self._plans.values()]
            return {
                "size": len(self._plans),
                "capacity": self.capacity,
                "hits": self.hits,
                "misses": self.misses,
                "device_bytes": sum(int(r["device_bytes"]) for r in reports),
                "workspace_bytes": max((int(r["workspace_bytes"]) for r in reports), default=0),
            }


def _cache_size() -> int:
    # empty counts as unset, as for the C library's variables (SPLAT_NUM_THREADS, ...)
    text = os.environ.get("SPLAT_PLAN_CACHE_SIZE") or "64"
    # ASCII digits (str.isdigit() would pass "²", which int() refuses); leading blanks as
    # strtol skips them, no trailing ones
    if not re.fullmatch(r"[ \t\n\v\f\r]*[0-9]+", text):
        raise invalid(f"$SPLAT_PLAN_CACHE_SIZE={text!r} must be a non-negative integer")
    return int(text)


plan_cache = PlanCache(_cache_size())


def as_pattern(pattern: Union[Pattern, str], seq_q: int, seq_k: int) -> Pattern:
    """A Pattern object; a spec string is parsed for (seq_q, seq_k) (and cached)."""
    if isinstance(pattern, Pattern):
        return pattern
    if isinstance(pattern, str) and not pattern.startswith("#"):
        return pattern_for_token(pattern, seq_q, seq_k)
    raise invalid(f"pattern={pattern!r} must be a splat.Pattern or a spec string")


def values_pattern(pattern: Union[Pattern, str], seq_q: int, seq_k: Optional[int], fn: str) -> Pattern:
    """The pattern of an op on ACSR values alone (softmax): their shape gives seq_q but not
    seq_k, so spec text needs ``seq_k`` (parsed as seq_q x seq_q, a pattern of more keys
    would be normalised over the wrong entries without a word); a Pattern must match it."""
    if seq_k is not None:
        seq_k = positive_int(seq_k, f"{fn}: seq_k")
    if isinstance(pattern, str) and seq_k is None:
        raise invalid(
            f"{fn}: pattern={pattern!r} is spec text, and the scores do not say how many keys "
            "their rows see: pass seq_k= (the keys' sequence length) or a splat.Pattern"
        )
    pat = as_pattern(pattern, seq_q, seq_q if seq_k is None else seq_k)
    if seq_k is not None and pat.seq_k != seq_k:
        raise invalid(f"{fn}: seq_k={seq_k} but the pattern has {pat.seq_k} keys")
    return pat


_FLOAT32_MAX = 3.4028234663852886e38


def round_to_float32(x: float) -> float:
    """x rounded to the nearest float32 (ties to even), as a Python float: +-inf past float32's
    range, subnormals kept. Pure Python (no numpy call), so torch.compile(fullgraph=True) can
    trace a front end that checks its scale with it."""
    if x == 0.0 or not math.isfinite(x):
        return x
    m, e = math.frexp(abs(x))  # abs(x) = m * 2**e, 0.5 <= m < 1
    if e < -149:  # below half of float32's smallest subnormal, 2**-149
        return math.copysign(0.0, x)
    bits = 24 if e >= -125 else e + 149  # significant bits float32 keeps at this exponent
    y = math.ldexp(round(math.ldexp(m, bits)), e - bits)  # round(): half to even
    return math.copysign(math.inf if y > _FLOAT32_MAX else y, x)


def float32_scale(scale: Any) -> float:
    """A scale as the C library takes it (a float32): a real number (a Python or numpy
    scalar, a 0-d array, a jax or torch scalar), finite in float32."""
    if isinstance(scale, (bool, np.bool_, str, bytes, complex, np.complexfloating)) or getattr(scale, "ndim", 0):
        raise invalid(f"scale={scale!r} must be a real number")
    if "Tracer" in type(scale).__name__:  # a value traced by jax.jit / vmap / grad
        raise invalid(
            f"scale={scale!r} is a traced JAX value; the kernels take the scale as a constant: pass a "
            "Python or numpy number (under jax.jit, close over it or mark the argument static)"
        )
    try:
        value = float(scale)
    except (TypeError, ValueError):
        raise invalid(f"scale={scale!r} must be a real number") from None
    except OverflowError:
        raise invalid(f"scale={scale!r} overflows float32, the library's scale type") from None
    if not math.isfinite(value):
        raise invalid(f"scale={value} must be finite")
    single = round_to_float32(value)
    if not math.isfinite(single):
        raise invalid(f"scale={value:g} overflows float32, the library's scale type (largest {_FLOAT32_MAX:g})")
    return single


def resolve_scale(scale: Optional[float]) -> float:
    """The float passed to C: SPLAT_DEFAULT_SCALE (0) for None (1/sqrt(head_dim))."""
    if scale is None:
        return _lib.DEFAULT_SCALE
    single = float32_scale(scale)
    if float(scale) == 0.0:
        raise invalid("scale=0 is not supported (0 selects the default 1/sqrt(head_dim)); pass None")
    if single == 0.0:
        raise invalid(
            f"scale={float(scale):g} rounds to 0 in float32, the library's scale type (below ~7e-46 in "
            "magnitude), where 0 selects the default 1/sqrt(head_dim); pass None for the default"
        )
    return single


def check_4d(shape: Tuple[int, ...], what: str) -> None:
    if len(shape) != 4:
        # ACSR values (scores, probs) end in the row width W, inputs in head_dim
        last = "W] (W: the pattern's row_width)" if what in ("scores", "probs") else "head_dim]"
        raise invalid(f"{what} must be 4-d [batch, heads, seq, {last}, got shape {tuple(shape)}")


# ------------------------------------------------------------------ numpy front end


def _array(x: Any, what: str) -> Tuple[np.ndarray, int]:
    arr = np.asarray(x)
    check_4d(arr.shape, what)
    code = _lib.dtype_code(arr.dtype.name, what)
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))  # byte-swapped ('>f4' here): a native copy
    if not arr.flags.aligned or any(s % arr.itemsize for s in arr.strides):
        # data off its elements' alignment (np.frombuffer at an odd offset), or byte strides
        # that are not whole elements: an aligned C-order copy (the library refuses both)
        arr = np.array(arr, order="C", copy=True)
    return arr, code


def _tensor(arr: np.ndarray, code: int) -> _lib.SplatTensor:
    return _lib.tensor(arr.ctypes.data, code, arr.shape, [s // arr.itemsize for s in arr.strides])


def _dtype_of(code: int) -> np.dtype:
    name = _lib.DTYPE_NAMES[code]
    if name == "bfloat16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


def check_empty_batch(**shapes: Tuple[Tuple[int, ...], Tuple[int, ...]]) -> None:
    """Batch 0 (nothing to compute, no C call): each tensor's (shape, expected shape), as
    the call would have checked them; the plan, built for batch 1, checked the rest."""
    for name, (got, want) in shapes.items():
        if tuple(got) != tuple(want):
            hint = ""
            if name in ("scores", "probs") and tuple(got)[3:] != tuple(want)[3:]:
                hint = (
                    " (the last dimension is the row width W, pattern.row_width: the largest row nnz,"
                    " from 128 on rounded up to a multiple of 16)"
                )
            raise invalid(f"{name}.shape={list(got)} but the plan expects {list(want)}{hint}")


def _out_code(dtype: Any, default: int) -> int:
    """splat_dtype of an output dtype: a numpy dtype (or anything np.dtype takes), or the
    names splat uses ("f32", "f16", "bf16")."""
    if dtype is None:
        return default
    if isinstance(dtype, str) and dtype in SHORT_DTYPES:
        dtype = SHORT_DTYPES[dtype]
    try:
        name = np.dtype(dtype).name
    except TypeError:
        if dtype != "bfloat16":  # numpy knows it only once ml_dtypes is imported
            raise invalid(f"output.dtype={dtype!r} unsupported: use float32, float16 or bfloat16") from None
        name = dtype
    return _lib.dtype_code(name, "output")


SHORT_DTYPES = {"f32": "float32", "f16": "float16", "bf16": "bfloat16"}


def attention(
    q: Any,
    k: Any,
    v: Any,
    pattern: Union[Pattern, str],
    scale: Optional[float] = None,
    return_lse: bool = False,
) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
    """Attention under ``pattern``: ``softmax(scale * q k^T restricted to the mask) v``.

    q: [batch, heads, seq_q, head_dim]; k, v: [batch, heads_kv, seq_k, head_dim]
    (heads_kv divides heads: grouped-query attention). scale: None for
    1/sqrt(head_dim). Returns out [batch, heads, seq_q, head_dim] in q's dtype, and
    with ``return_lse`` also the float32 log-sum-exp [batch, heads, seq_q] (-inf for
    rows that see no key; their output is zero)."""
    return_lse = flag(return_lse, "return_lse")
    qa, code = _array(q, "q")
    ka, kcode = _array(k, "k")
    va, vcode = _array(v, "v")
    for name, c in (("k", kcode), ("v", vcode)):
        if c != code:
            raise invalid(f"{name}.dtype={_lib.DTYPE_NAMES[c]} but q.dtype={_lib.DTYPE_NAMES[code]}")
    pat = as_pattern(pattern, qa.shape[2], ka.shape[2])
    B, H, Sq, D = qa.shape
    plan = plan_cache.get(pat, max(B, 1), H, ka.shape[1], D, code, "cpu", _lib.OPS_ATTENTION)
    out = np.empty(qa.shape, dtype=qa.dtype)
    lse = np.empty((B, H, Sq, 1), dtype=np.float32) if return_lse else None
    lse_t = ctypes.byref(_tensor(lse, 0)) if lse is not None else None
    if B == 0:
        kv = (0, ka.shape[1], pat.seq_k, D)
        check_empty_batch(q=(qa.shape, (0, H, pat.seq_q, D)), k=(ka.shape, kv), v=(va.shape, kv))
    else:
        plan.call(
            "attention",
            ctypes.byref(_tensor(qa, code)),
            ctypes.byref(_tensor(ka, code)),
            ctypes.byref(_tensor(va, code)),
            resolve_scale(scale),
            ctypes.byref(_tensor(out, code)),
            lse_t,
            None,
        )
    return (out, lse[..., 0]) if lse is not None else out


def attention_backward(
    q: Any,
    k: Any,
    v: Any,
    out: Any,
    lse: Any,
    dout: Any,
    pattern: Union[Pattern, str],
    scale: Optional[float] = None,
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of :func:`attention`: given its q, k, v, pattern and scale, the out and
    lse it returned (``return_lse=True``; lse [batch, heads, seq_q] or with a trailing 1)
    and dout = dL/dout, returns (dq, dk, dv) in q's dtype. dk and dv of grouped-query
    attention sum over the query heads sharing a key/value head; keys no row sees get
    zeros. Runs on the CPU backend (double accumulation, each gradient rounded once)."""
    qa, code = _array(q, "q")
    arrays = {"q": qa}
    for name, x in (("k", k), ("v", v), ("out", out), ("dout", dout)):
        arrays[name], c = _array(x, name)
        if c != code:
            raise invalid(f"{name}.dtype={_lib.DTYPE_NAMES[c]} but q.dtype={_lib.DTYPE_NAMES[code]}")
    la = np.asarray(lse)
    if la.ndim == 3:
        la = la[..., None]
    if la.ndim != 4 or la.dtype != np.float32:
        raise invalid(
            f"lse must be float32 [batch, heads, seq_q] (as attention(..., return_lse=True) returns "
            f"it), got {la.dtype} of shape {tuple(np.shape(lse))}"
        )
    arrays["lse"], _ = _array(la, "lse")
    ka = arrays["k"]
    pat = as_pattern(pattern, qa.shape[2], ka.shape[2])
    B, H, Sq, D = qa.shape
    plan = plan_cache.get(pat, max(B, 1), H, ka.shape[1], D, code, "cpu", _lib.OPS_ATTENTION_BACKWARD)
    dq = np.empty(qa.shape, dtype=qa.dtype)
    dk = np.empty(ka.shape, dtype=qa.dtype)
    dv = np.empty(arrays["v"].shape, dtype=qa.dtype)
    if B == 0:
        kv = (0, ka.shape[1], pat.seq_k, D)
        qs = (0, H, pat.seq_q, D)
        check_empty_batch(
            q=(qa.shape, qs), k=(ka.shape, kv), v=(arrays["v"].shape, kv), out=(arrays["out"].shape, qs),
            lse=(arrays["lse"].shape, (0, H, pat.seq_q, 1)), dout=(arrays["dout"].shape, qs),
        )
        return dq, dk, dv
    t = {name: _tensor(a, _lib.DTYPE_CODES["float32"] if name == "lse" else code) for name, a in arrays.items()}
    plan.call(
        "attention_backward",
        *(ctypes.byref(t[name]) for name in ("q", "k", "v", "out", "lse", "dout")),
        resolve_scale(scale),
        *(ctypes.byref(_tensor(g, code)) for g in (dq, dk, dv)),
        None,
    )
    return dq, dk, dv


def sddmm(
    q: Any, k: Any, pattern: Union[Pattern, str], scale: Optional[float] = None, dtype: Any = None
) -> np.ndarray:
    """Sampled dense-dense product: ``scores[b,h,i,t] = scale * <q[b,h,i], k[b,hk,c_t(i)]>``
    where c_t(i) is the t-th visible column of row i (increasing). Returns ACSR values
    [batch, heads, seq_q, W] (W = ``pattern.row_width``: the widest row, from 128 entries on
    rounded up to a multiple of 16; padding entries are 0) in ``dtype``
    (default: q's dtype). scale: None for 1/sqrt(head_dim)."""
    qa, code = _array(q, "q")
    ka, kcode = _array(k, "k")
    if kcode != code:
        raise invalid(f"k.dtype={_lib.DTYPE_NAMES[kcode]} but q.dtype={_lib.DTYPE_NAMES[code]}")
    pat = as_pattern(pattern, qa.shape[2], ka.shape[2])
    B, H, Sq, D = qa.shape
    plan = plan_cache.get(pat, max(B, 1), H, ka.shape[1], D, code, "cpu", _lib.OPS_UNFUSED)
    ocode = _out_code(dtype, code)
    scores = np.zeros((B, H, Sq, plan.width), dtype=_dtype_of(ocode))
    if B == 0:
        check_empty_batch(q=(qa.shape, (0, H, pat.seq_q, D)), k=(ka.shape, (0, ka.shape[1], pat.seq_k, D)))
    else:
        plan.call(
            "sddmm",
            ctypes.byref(_tensor(qa, code)),
            ctypes.byref(_tensor(ka, code)),
            resolve_scale(scale),
            ctypes.byref(_tensor(scores, ocode)),
            None,
        )
    return scores


def softmax(
    scores: Any,
    pattern: Union[Pattern, str],
    scale: float = 1.0,
    return_lse: bool = False,
    seq_k: Optional[int] = None,
) -> Union[np.ndarray, Tuple[np.ndarray, np.ndarray]]:
    """Row softmax of ``scale * scores`` over each row's visible entries (ACSR values
    [batch, heads, seq_q, W] as ``sddmm`` returns them). ``scale`` is used as given.
    Returns probs in the scores' dtype (padding 0), and with ``return_lse`` the
    float32 log-sum-exp [batch, heads, seq_q]. A spec string needs ``seq_k`` (the keys'
    sequence length: the scores do not carry it)."""
    return_lse = flag(return_lse, "return_lse")
    sa, code = _array(scores, "scores")
    B, H, Sq, _ = sa.shape
    pat = values_pattern(pattern, Sq, seq_k, "splat.softmax")
    scale = float32_scale(scale)
    plan = plan_cache.get(pat, max(B, 1), H, H, _VALUES_ONLY_HEAD_DIM, code, "cpu", _lib.OPS_UNFUSED)
    probs = np.zeros(sa.shape, dtype=sa.dtype)
    lse = np.empty((B, H, Sq, 1), dtype=np.float32) if return_lse else None
    if B == 0:
        check_empty_batch(scores=(sa.shape, (0, H, pat.seq_q, plan.width)))
    else:
        plan.call(
            "softmax",
            ctypes.byref(_tensor(sa, code)),
            float(scale),
            ctypes.byref(_tensor(probs, code)),
            ctypes.byref(_tensor(lse, 0)) if lse is not None else None,
            None,
        )
    return (probs, lse[..., 0]) if lse is not None else probs


def spmm(probs: Any, v: Any, pattern: Union[Pattern, str]) -> np.ndarray:
    """Sparse-dense product: ``out[b,h,i] = sum_t probs[b,h,i,t] * v[b,hk,c_t(i)]``.
    probs: ACSR values [batch, heads, seq_q, W] (any supported dtype); v:
    [batch, heads_kv, seq_k, head_dim]. Returns out in v's dtype (zeros for empty rows)."""
    pa, pcode = _array(probs, "probs")
    va, code = _array(v, "v")
    B, H, Sq, _ = pa.shape
    pat = as_pattern(pattern, Sq, va.shape[2])
    plan = plan_cache.get(pat, max(B, 1), H, va.shape[1], va.shape[3], code, "cpu", _lib.OPS_UNFUSED)
    out = np.empty((B, H, Sq, va.shape[3]), dtype=va.dtype)
    if B == 0:
        check_empty_batch(
            probs=(pa.shape, (0, H, pat.seq_q, plan.width)), v=(va.shape, (0, va.shape[1], pat.seq_k, va.shape[3]))
        )
    else:
        plan.call(
            "spmm",
            ctypes.byref(_tensor(pa, pcode)),
            ctypes.byref(_tensor(va, code)),
            ctypes.byref(_tensor(out, code)),
            None,
        )
    return out
