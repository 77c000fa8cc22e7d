"""splat.jax — the JAX front end: splat's ops as XLA FFI custom calls.

    import splat.jax as sj
    out = sj.attention(q, k, v, splat.Pattern("window(128) | global(16)", seq))

``attention``, ``sddmm``, ``softmax`` and ``spmm`` take jax arrays of shape
[batch, heads, seq, head_dim] (float32, float16, bfloat16) and call the C handlers of
``libsplat_jax.so`` (python/splat/_xla_ffi.c) through ``jax.ffi.ffi_call``, on the CPU
and on CUDA GPUs (the handler runs on XLA's stream). They work under ``jax.jit`` and
``jax.vmap`` (the mapped axis is merged into the batch).

``attention`` is differentiable in reverse mode (``jax.grad``, ``jax.vjp``: a
``jax.custom_vjp``), for the gradients of out and of lse: its backward is
``splat.attention_backward`` (the C library's CPU backward), run on the host through
``jax.pure_callback`` (on a GPU as well: the operands go to the host and the gradients
back, as the CUDA backend has no backward yet). ``sddmm``, ``softmax`` and ``spmm`` are
forward-only: a gradient through them raises ``splat.Error``.

The pattern travels as attributes of the custom call: its spec text, or, for explicit
masks (``Pattern.from_mask``) and combinations involving them, a content key under
which the pattern is registered with the handler library. Registered patterns are kept
for the life of the process. A compiled function that names a mask pattern needs that
pattern to be built in the running process.

Errors found while tracing (shapes, dtypes, specs) raise ``splat.Error``. Errors found
by the handler (a NaN input) raise ``splat.Error`` in eager calls (which wait for the
result); under ``jit`` they arrive as JAX's runtime error whose text carries the same
status name and message.

``libsplat_jax.so`` is found like libsplat (bundled in the package, then
``$SPLAT_JAX_LIBRARY``, then the build trees); when it is missing it is compiled once
from the bundled source against the installed jaxlib's FFI headers into
``$SPLAT_CACHE_DIR/python`` (default ``~/.cache/splat/python``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
from functools import lru_cache, partial
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero

from . import _build, _lib
from .errors import Error, flag, invalid
from .ops import SHORT_DTYPES, as_pattern, attention_backward, check_4d, float32_scale, resolve_scale, values_pattern
from .pattern import Pattern, pattern_for_token

try:
    from jax.core import Tracer
except ImportError:  # pragma: no cover - moved in some jax versions
    from jax._src.core import Tracer

__all__ = ["attention", "sddmm", "softmax", "spmm"]

_OPS = ("attention", "sddmm", "softmax", "spmm")
_PLATFORMS = (("cpu", "cpu"), ("CUDA", "cuda"))

_lock = threading.Lock()
_ext: Optional[ctypes.CDLL] = None
_registered: Dict[str, Pattern] = {}


def _cache_dir() -> Path:
    base = os.environ.get("SPLAT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "splat"
    )
    return Path(base) / "python"


def _build_extension() -> Path:
    """Compiles libsplat_jax.so for the installed jaxlib (once; cached by content)."""
    source = _lib.PACKAGE_DIR / "_xla_ffi.c"
    headers = [d for d in (_lib.PACKAGE_DIR / "include", _lib.REPO_ROOT / "include") if (d / "splat.h").is_file()]
    jax_inc = _build.jax_include_dir()
    if not source.is_file() or not headers or jax_inc is None:
        raise Error(
            "SPLAT_ERR_NO_LIBRARY",
            "libsplat_jax.so is missing and cannot be built here (needs python/splat/_xla_ffi.c, "
            "splat.h and jaxlib's FFI headers): reinstall with jax present, e.g. "
            "`pip install --no-build-isolation ./python`, or set $SPLAT_JAX_LIBRARY",
        )
    libsplat = _lib.library_path().resolve()
    digest = hashlib.sha256()
    for part in (source, headers[0] / "splat.h", jax_inc / "xla" / "ffi" / "api" / "c_api.h"):
        digest.update(part.read_bytes())
    digest.update(str(libsplat).encode())
    out = _cache_dir() / f"libsplat_jax-{digest.hexdigest()[:16]}.so"
    if not out.is_file():
        try:
            _build.compile_jax_ffi(source, jax_inc, headers[0], libsplat, out)
        except _build.BuildError as exc:
            raise Error("SPLAT_ERR_NO_LIBRARY", str(exc)) from exc
    return out


def _extension() -> ctypes.CDLL:
    """The handler library, loaded and its targets registered with JAX (once)."""
    global _ext
    if _ext is not None:
        return _ext
    with _lock:
        if _ext is None:
            _lib.lib()  # libsplat first: the extension's dependency resolves to it
            found = _lib.find_library("libsplat_jax.so", "SPLAT_JAX_LIBRARY")
            path = found[0] if found else _build_extension()
            ext = ctypes.CDLL(str(path))
            ext.splat_jax_register_pattern.restype = ctypes.c_int
            ext.splat_jax_register_pattern.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
            for op in _OPS:
                for platform, suffix in _PLATFORMS:
                    fn = getattr(ext, f"splat_xla_{op}_{suffix}")
                    try:
                        jax.ffi.register_ffi_target(f"splat_{op}", jax.ffi.pycapsule(fn), platform=platform)
                    except Exception:
                        if platform == "cpu":
                            raise  # CUDA registration may fail where jaxlib has no CUDA
            _ext = ext
    return _ext


def extension_path() -> str:
    """Where the loaded libsplat_jax.so lives."""
    ext = _extension()
    return str(ext._name)


def _spec_attr(pat: Pattern) -> str:
    """The ``spec`` attribute: spec text, or ``#<key>`` of a pattern registered with
    the handler library (and then kept alive here for the life of the process)."""
    token = pat.token
    if token.startswith("#"):
        ext = _extension()  # before taking _lock, which _extension() takes too
        with _lock:
            if token not in _registered:
                if ext.splat_jax_register_pattern(token[1:].encode(), pat.handle) != 0:
                    raise Error("SPLAT_ERR_OUT_OF_MEMORY", "registering the pattern failed")
                _registered[token] = pat
    return token


def _attrs(pat: Pattern, scale: float) -> Dict[str, Any]:
    return {
        "spec": _spec_attr(pat),
        "seq_q": np.int64(pat.seq_q),
        "seq_k": np.int64(pat.seq_k),
        "scale": np.float32(scale),
    }


def _check(x: Any, what: str) -> Any:
    x = jnp.asarray(x)
    check_4d(tuple(x.shape), what)
    _lib.dtype_code(x.dtype.name, what)
    return x


def _same_dtype(ref: Any, ref_name: str, **others: Any) -> None:
    for name, x in others.items():
        if x.dtype != ref.dtype:
            raise invalid(f"{name}.dtype={x.dtype.name} but {ref_name}.dtype={ref.dtype.name}")


def _check_qkv(q: Any, k: Any, v: Optional[Any]) -> None:
    """Shape rules of include/splat.h, checked while tracing."""
    B, H, _, D = q.shape
    for name, x in (("k", k), ("v", v)):
        if x is None:
            continue
        if x.shape[0] != B or x.shape[3] != D or x.shape[1] < 1 or H % x.shape[1]:
            raise invalid(
                f"{name}.shape={tuple(x.shape)} does not fit q.shape={tuple(q.shape)}: expected "
                f"[{B}, heads_kv, seq_k, {D}] with heads_kv dividing {H}"
            )
    if v is not None and v.shape != k.shape:
        raise invalid(f"v.shape={tuple(v.shape)} but k.shape={tuple(k.shape)}")
    if not 1 <= D <= _lib.MAX_HEAD_DIM:
        raise invalid(f"head_dim={D} must be in 1..{_lib.MAX_HEAD_DIM}")


def _check_seq(pat: Pattern, seq_q: int, seq_k: Optional[int]) -> None:
    if pat.seq_q != seq_q or (seq_k is not None and pat.seq_k != seq_k):
        raise invalid(
            f"pattern {pat.spec!r} is {pat.seq_q}x{pat.seq_k} but the inputs have seq_q={seq_q}"
            + (f", seq_k={seq_k}" if seq_k is not None else "")
        )


_SPLAT_MESSAGE = re.compile(r"splat \w+: (SPLAT_ERR_[A-Z_]+): (.*)", re.S)


@lru_cache(maxsize=256)
def _ffi(op: str, results: Tuple[Tuple[Tuple[int, ...], str], ...], attrs: Tuple[Tuple[str, Any], ...]) -> Any:
    """The FFI call of op (results: (shape, dtype) each; attrs: its attributes) and its
    keyword attributes. Cached by the call's shapes and attributes."""
    call = jax.ffi.ffi_call(
        f"splat_{op}", [jax.ShapeDtypeStruct(s, d) for s, d in results], vmap_method="broadcast_all"
    )
    return call, dict(attrs)


def _eager(call: Any, operands: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Any:
    """Runs the call on concrete operands and waits, so that a failure of the handler is a
    splat.Error here."""
    try:
        return jax.block_until_ready(call(*operands, **kwargs))
    except Exception as exc:
        m = _SPLAT_MESSAGE.search(str(exc))
        if m is None:
            raise
        raise Error(m.group(1), m.group(2).strip()) from exc


def _traced(x: Any) -> bool:
    return any(isinstance(a, Tracer) for a in jax.tree_util.tree_leaves(x))


@lru_cache(maxsize=256)
def _forward_only(op: str, results: Tuple[Tuple[Tuple[int, ...], str], ...], attrs: Tuple[Tuple[str, Any], ...]) -> Any:
    """The FFI call of op (as ``_ffi``) as a function JAX may trace for jvp and grad: where a
    tangent flows into it, a splat.Error saying the op has no gradient (instead of JAX's
    generic message); inputs with no tangent (constants, stop_gradient) pass."""
    call, kwargs = _ffi(op, results, attrs)

    @jax.custom_jvp
    def f(*operands: Any) -> Any:
        return call(*operands, **kwargs)

    def jvp(primals: Tuple[Any, ...], tangents: Tuple[Any, ...]) -> Any:
        if all(isinstance(t, SymbolicZero) for t in tangents):
            out = f(*primals)
            return out, [jnp.zeros_like(o) for o in out]
        raise Error(
            "SPLAT_ERR_UNSUPPORTED",
            f"splat.jax.{op} is forward-only: it has no gradient yet; wrap its inputs in "
            "jax.lax.stop_gradient where none is needed",
        )

    f.defjvp(jvp, symbolic_zeros=True)
    return f


def _backward_on_host(pat: Pattern, scale: Optional[float], *arrays: Any) -> Tuple[np.ndarray, ...]:
    """``splat.attention_backward`` of q, k, v, out, lse, dout (numpy or concrete jax arrays)
    whose leading dimensions (vmap's, then the batch) are merged into the batch."""
    q, k, v, out, lse, dout = (np.asarray(a) for a in arrays)
    four_d = [a.reshape((-1,) + a.shape[-3:]) for a in (q, k, v, out, dout)]  # [batch, heads, seq, head_dim]
    grads = attention_backward(*four_d[:4], lse.reshape((-1,) + lse.shape[-2:]), four_d[4], pat, scale)
    return tuple(g.reshape(a.shape) for g, a in zip(grads, (q, k, v)))


def _attention_backward(pat: Pattern, scale: Optional[float], *arrays: Any) -> Tuple[Any, ...]:
    """dq, dk, dv from q, k, v, out, lse, dout: splat's CPU backward, called on the host
    (a ``jax.pure_callback`` when traced; on concrete arrays directly, so that a failure is a
    splat.Error here)."""
    host = partial(_backward_on_host, pat, scale)
    if not _traced(arrays):
        return tuple(jnp.asarray(g) for g in host(*arrays))
    shapes = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays[:3])
    return jax.pure_callback(host, shapes, *arrays, vmap_method="broadcast_all")


@lru_cache(maxsize=256)
def _attention_vjp(results: Tuple[Tuple[Tuple[int, ...], str], ...], attrs: Tuple[Tuple[str, Any], ...]) -> Any:
    """The attention (results: out, or out and lse) as a function JAX differentiates in
    reverse mode (``jax.custom_vjp``): under differentiation the forward also writes the lse
    the backward needs, and the backward (``_attention_backward``) takes the gradients of
    out and of lse (when they are used)."""
    call, kwargs = _ffi("attention", results, attrs)
    with_lse, _ = _ffi("attention", (results[0], (results[0][0][:3], "float32")), attrs)
    pat = pattern_for_token(kwargs["spec"], int(kwargs["seq_q"]), int(kwargs["seq_k"]))
    scale = float(kwargs["scale"]) or None  # 0: the default 1/sqrt(head_dim)

    @jax.custom_vjp
    def f(q: Any, k: Any, v: Any) -> Any:
        return call(q, k, v, **kwargs)

    def fwd(*primals: Any) -> Any:
        operands = tuple(p.value for p in primals)
        out, lse = with_lse(*operands, **kwargs) if _traced(operands) else _eager(with_lse, operands, kwargs)
        return [out, lse][: len(results)], (*operands, out, lse)

    def bwd(residuals: Tuple[Any, ...], cotangents: List[Any]) -> Tuple[Any, ...]:
        q, k, v, out, lse = residuals
        dout, dlse = cotangents if len(cotangents) == 2 else (cotangents[0], None)
        grads: Tuple[Any, ...] = (jnp.zeros_like(q), jnp.zeros_like(k), jnp.zeros_like(v))
        if not isinstance(dout, SymbolicZero):
            grads = _attention_backward(pat, scale, q, k, v, out, lse, dout)
        if dlse is not None and not isinstance(dlse, SymbolicZero):
            # d lse_i / d s_ij = P_ij: the dS, hence dq and dk, of a backward whose values are 1
            # in column 0 and 0 elsewhere, whose out is 0, and whose dout is dlse in column 0
            ones = jnp.zeros_like(v).at[..., 0].set(1)
            g = jnp.zeros_like(q).at[..., 0].set(dlse.astype(q.dtype))
            dq, dk, _ = _attention_backward(pat, scale, q, k, ones, jnp.zeros_like(q), lse, g)
            if not isinstance(dout, SymbolicZero):  # each sum rounded once
                f32 = jnp.float32
                dq, dk = ((a.astype(f32) + b.astype(f32)).astype(q.dtype) for a, b in zip(grads, (dq, dk)))
            grads = (dq, dk, grads[2])
        return grads

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    return f


def _call(op: str, results: List[jax.ShapeDtypeStruct], operands: Tuple[Any, ...], attrs: Dict[str, Any]) -> List[Any]:
    """The op on its operands: traced (under jit, vmap, grad), through ``_attention_vjp``
    or ``_forward_only``; eager, the plain FFI call (custom_jvp's dispatch costs ~0.2 ms)."""
    _extension()
    key = (tuple((tuple(r.shape), jnp.dtype(r.dtype).name) for r in results), tuple(sorted(attrs.items())))
    if _traced(operands):
        return (_attention_vjp(*key) if op == "attention" else _forward_only(op, *key))(*operands)
    call, kwargs = _ffi(op, *key)
    return _eager(call, operands, kwargs)


def attention(
    q: Any, k: Any, v: Any, pattern: Union[Pattern, str], scale: Optional[float] = None, return_lse: bool = False
) -> Union[Any, Tuple[Any, Any]]:
    """Attention under ``pattern`` (see ``splat.attention``): q [batch, heads, seq_q,
    head_dim], k and v [batch, heads_kv, seq_k, head_dim]. Returns out (q's dtype)
    and, with ``return_lse``, the float32 log-sum-exp [batch, heads, seq_q]."""
    return_lse = flag(return_lse, "return_lse")
    q, k, v = _check(q, "q"), _check(k, "k"), _check(v, "v")
    _same_dtype(q, "q", k=k, v=v)
    _check_qkv(q, k, v)
    pat = as_pattern(pattern, q.shape[2], k.shape[2])
    _check_seq(pat, q.shape[2], k.shape[2])
    results = [jax.ShapeDtypeStruct(q.shape, q.dtype)]
    if return_lse:
        results.append(jax.ShapeDtypeStruct(q.shape[:3], jnp.float32))
    res = _call("attention", results, (q, k, v), _attrs(pat, resolve_scale(scale)))
    return (res[0], res[1]) if return_lse else res[0]


def sddmm(q: Any, k: Any, pattern: Union[Pattern, str], scale: Optional[float] = None, dtype: Any = None) -> Any:
    """Sampled Q K^T as ACSR values [batch, heads, seq_q, W] (see ``splat.sddmm``);
    ``dtype`` defaults to q's dtype. Padding entries are unspecified."""
    q, k = _check(q, "q"), _check(k, "k")
    _same_dtype(q, "q", k=k)
    _check_qkv(q, k, None)
    pat = as_pattern(pattern, q.shape[2], k.shape[2])
    _check_seq(pat, q.shape[2], k.shape[2])
    try:
        out_dtype = q.dtype if dtype is None else jnp.dtype(SHORT_DTYPES.get(dtype, dtype) if isinstance(dtype, str) else dtype)
    except TypeError:
        raise invalid(f"output.dtype={dtype!r} unsupported: use float32, float16 or bfloat16") from None
    _lib.dtype_code(out_dtype.name, "output")
    results = [jax.ShapeDtypeStruct(q.shape[:3] + (pat.row_width,), out_dtype)]
    return _call("sddmm", results, (q, k), _attrs(pat, resolve_scale(scale)))[0]


def softmax(
    scores: Any,
    pattern: Union[Pattern, str],
    scale: float = 1.0,
    return_lse: bool = False,
    seq_k: Optional[int] = None,
) -> Union[Any, Tuple[Any, Any]]:
    """Row softmax of ``scale * scores`` over ACSR values (see ``splat.softmax``; a spec
    string needs ``seq_k``). Padding entries are unspecified."""
    return_lse = flag(return_lse, "return_lse")
    s = _check(scores, "scores")
    pat = values_pattern(pattern, s.shape[2], seq_k, "splat.jax.softmax")
    _check_seq(pat, s.shape[2], None)
    if s.shape[3] != pat.row_width:
        raise invalid(f"scores.shape[3]={s.shape[3]} but the pattern's row width W is {pat.row_width}")
    scale = float32_scale(scale)
    results = [jax.ShapeDtypeStruct(s.shape, s.dtype)]
    if return_lse:
        results.append(jax.ShapeDtypeStruct(s.shape[:3], jnp.float32))
    res = _call("softmax", results, (s,), _attrs(pat, float(scale)))
    return (res[0], res[1]) if return_lse else res[0]


def spmm(probs: Any, v: Any, pattern: Union[Pattern, str]) -> Any:
    """ACSR values times V: [batch, heads, seq_q, head_dim] in v's dtype (see
    ``splat.spmm``)."""
    p, v = _check(probs, "probs"), _check(v, "v")
    pat = as_pattern(pattern, p.shape[2], v.shape[2])
    _check_seq(pat, p.shape[2], v.shape[2])
    if p.shape[3] != pat.row_width:
        raise invalid(f"probs.shape[3]={p.shape[3]} but the pattern's row width W is {pat.row_width}")
    if v.shape[0] != p.shape[0] or v.shape[1] < 1 or p.shape[1] % v.shape[1]:
        raise invalid(f"v.shape={tuple(v.shape)} does not fit probs.shape={tuple(p.shape)}")
    if not 1 <= v.shape[3] <= _lib.MAX_HEAD_DIM:
        raise invalid(f"head_dim={v.shape[3]} must be in 1..{_lib.MAX_HEAD_DIM}")
    results = [jax.ShapeDtypeStruct(p.shape[:3] + (v.shape[3],), v.dtype)]
    return _call("spmm", results, (p, v), _attrs(pat, 1.0))[0]
