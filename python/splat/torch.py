"""splat.torch — the PyTorch front end: ``torch.ops.splat.attention`` and its gradients.

    import splat, splat.torch
    out = splat.torch.attention(q, k, v, splat.Pattern("window(128) | global(16)", seq))

The op is a ``torch.library.custom_op`` with a fake (meta) implementation, so it works
in eager mode and under ``torch.compile`` (the pattern is a string argument: the spec
text, or ``#<key>`` naming a live ``Pattern.from_mask`` pattern). CUDA tensors run on
splat's CUDA backend on ``torch.cuda.current_stream()``; CPU tensors on the CPU
backend. Inputs are [batch, heads, seq, head_dim] float32 / float16 / bfloat16 with any
strides. Plans are cached with the numpy front end's (``splat.plan_cache``).

Autograd: the op's backward (``torch.library.register_autograd``) runs
``torch.ops.splat.attention_backward`` (``splat_attention_backward``, also a custom op with
a fake) from the saved q, k, v, out and lse, for the gradients of out and of lse. It runs on
the CPU backend; on CUDA tensors it raises ``splat.Error`` (``SPLAT_ERR_UNSUPPORTED``: the
CUDA backend has no attention backward yet).
"""

# No `from __future__ import annotations` here: torch.library.custom_op reads the
# annotations of the op's signature as types.
import ctypes
from typing import Any, Optional, Tuple, Union

import torch

from . import _lib
from .errors import flag, invalid
from .ops import Plan, check_4d, check_empty_batch, plan_cache, resolve_scale, round_to_float32
from .pattern import Pattern, pattern_for_token

__all__ = ["attention"]


def _tensor(t: torch.Tensor, what: str) -> _lib.SplatTensor:
    return _lib.tensor(t.data_ptr(), _lib.dtype_code(str(t.dtype), what), t.shape, t.stride())


def _lse_tensor(lse: torch.Tensor) -> _lib.SplatTensor:
    """lse [B,H,Sq] float32 as C sees it: [B,H,Sq,1]."""
    return _lib.tensor(lse.data_ptr(), _lib.DTYPE_CODES["float32"], (*lse.shape, 1), (*lse.stride(), 1))


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **more: torch.Tensor) -> None:
    """Tensors, 4-d (lse: 3-d), and all on q's device: checked by the wrapper, the ops and
    their fakes (a fake runs alone under torch.compile and where the devices differ, e.g. a
    meta k). ``more``: the backward's out, lse and dout."""
    tensors = (("q", q), ("k", k), ("v", v), *more.items())
    for name, x in tensors:
        if not isinstance(x, torch.Tensor):
            raise invalid(f"{name} must be a torch.Tensor, got {type(x).__name__} (splat.attention takes numpy arrays)")
        if name != "lse":
            check_4d(tuple(x.shape), name)
        elif x.dim() != 3 or x.dtype != torch.float32:
            raise invalid(
                f"lse must be float32 [batch, heads, seq_q] (as splat::attention returns it), got {x.dtype} "
                f"of shape {tuple(x.shape)}"
            )
    for name, x in tensors[1:]:
        if x.device != q.device:
            raise invalid(f"{name} is on {x.device} but q is on {q.device}")


def _check_scale(scale: float) -> None:
    if scale != 0.0 and round_to_float32(scale) == 0.0:
        raise invalid(f"scale={scale:g} rounds to 0 in float32, where 0 selects the default 1/sqrt(head_dim)")


def _device(t: torch.Tensor) -> str:
    if t.device.type == "cpu":
        return "cpu"
    if t.device.type == "cuda":
        return f"cuda:{t.device.index if t.device.index is not None else torch.cuda.current_device()}"
    raise invalid(f"tensors on {t.device} are not supported: use CPU or CUDA tensors")


def _plan(q: torch.Tensor, k: torch.Tensor, pattern: str, seq_q: int, seq_k: int, ops: int) -> Tuple[Plan, Pattern]:
    """The cached plan of ``ops`` for q's and k's shapes, dtype and device, and its pattern."""
    pat = pattern_for_token(pattern, seq_q, seq_k)
    B, H, _, D = q.shape
    code = _lib.dtype_code(str(q.dtype), "q")
    return plan_cache.get(pat, max(B, 1), H, k.shape[1], D, code, _device(q), ops), pat


def _stream(t: torch.Tensor) -> Optional[int]:
    return torch.cuda.current_stream(t.device).cuda_stream if t.device.type == "cuda" else None


@torch.library.custom_op("splat::attention", mutates_args=())
def _attention_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: str, seq_q: int, seq_k: int, scale: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    """out [B,H,Sq,D] (q's dtype) and float32 lse [B,H,Sq]; scale 0 = 1/sqrt(D)."""
    _check_inputs(q, k, v)
    _check_scale(scale)
    plan, pat = _plan(q, k, pattern, seq_q, seq_k, _lib.OPS_ATTENTION)
    B, H, Sq, D = q.shape
    out = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, Sq), dtype=torch.float32, device=q.device)
    if B == 0:
        kv = (0, k.shape[1], pat.seq_k, D)
        check_empty_batch(q=(q.shape, (0, H, pat.seq_q, D)), k=(k.shape, kv), v=(v.shape, kv))
        return out, lse
    plan.call(
        "attention",
        ctypes.byref(_tensor(q, "q")),
        ctypes.byref(_tensor(k, "k")),
        ctypes.byref(_tensor(v, "v")),
        scale,
        ctypes.byref(_tensor(out, "out")),
        ctypes.byref(_lse_tensor(lse)),
        _stream(q),
    )
    return out, lse


@_attention_op.register_fake
def _attention_fake(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: str, seq_q: int, seq_k: int, scale: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    _check_inputs(q, k, v)
    B, H, Sq, D = q.shape
    return q.new_empty((B, H, Sq, D)), q.new_empty((B, H, Sq), dtype=torch.float32)


@torch.library.custom_op("splat::attention_backward", mutates_args=())
def _attention_backward_op(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    dout: torch.Tensor,
    pattern: str,
    seq_q: int,
    seq_k: int,
    scale: float,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv (q's dtype) of ``splat::attention`` for dout = dL/dout: q, k, v, pattern,
    seq_q, seq_k and scale as the forward took them, out and lse as it returned them
    (include/splat.h ``splat_attention_backward``). On CUDA tensors the library refuses it
    (SPLAT_ERR_UNSUPPORTED: no CUDA backward yet)."""
    _check_inputs(q, k, v, out=out, lse=lse, dout=dout)
    _check_scale(scale)
    plan, pat = _plan(q, k, pattern, seq_q, seq_k, _lib.OPS_ATTENTION_BACKWARD)
    grads = tuple(torch.empty(x.shape, dtype=q.dtype, device=q.device) for x in (q, k, v))
    B, H, _, D = q.shape
    if B == 0:
        qs, kv = (0, H, pat.seq_q, D), (0, k.shape[1], pat.seq_k, D)
        check_empty_batch(
            q=(q.shape, qs), k=(k.shape, kv), v=(v.shape, kv), out=(out.shape, qs), lse=(lse.shape, qs[:3]),
            dout=(dout.shape, qs),
        )
        return grads
    inputs = [_tensor(x, name) for x, name in ((q, "q"), (k, "k"), (v, "v"), (out, "out"))]
    inputs += [_lse_tensor(lse), _tensor(dout, "dout")]
    plan.call(
        "attention_backward",
        *(ctypes.byref(t) for t in inputs),
        scale,
        *(ctypes.byref(_tensor(g, name)) for g, name in zip(grads, ("dq", "dk", "dv"))),
        _stream(q),
    )
    return grads


@_attention_backward_op.register_fake
def _attention_backward_fake(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    lse: torch.Tensor,
    dout: torch.Tensor,
    pattern: str,
    seq_q: int,
    seq_k: int,
    scale: float,
) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    _check_inputs(q, k, v, out=out, lse=lse, dout=dout)
    return q.new_empty(q.shape), q.new_empty(k.shape), q.new_empty(v.shape)


def _setup_context(ctx: Any, inputs: Tuple[Any, ...], output: Tuple[torch.Tensor, torch.Tensor]) -> None:
    q, k, v, pattern, seq_q, seq_k, scale = inputs
    ctx.save_for_backward(q, k, v, *output)
    ctx.args = (pattern, seq_q, seq_k, scale)
    if pattern.startswith("#"):  # a mask pattern its caller no longer references lives until the backward
        ctx.mask_pattern = pattern_for_token(pattern, seq_q, seq_k)
    ctx.set_materialize_grads(False)  # an output the loss does not use (lse) brings None, not zeros


def _backward(
    ctx: Any, dout: Optional[torch.Tensor], dlse: Optional[torch.Tensor]
) -> Tuple[Optional[torch.Tensor], ...]:
    """Gradients of q, k, v from those of out and lse (either may be None: unused)."""
    q, k, v, out, lse = ctx.saved_tensors
    grads = (None, None, None)
    if dout is not None:
        grads = torch.ops.splat.attention_backward(q, k, v, out, lse, dout, *ctx.args)
    if dlse is not None:
        # d lse_i / d s_ij = P_ij: the dS, hence dq and dk, of a backward whose values are 1 in
        # column 0 and 0 elsewhere, whose out is 0, and whose dout is dlse in column 0
        ones = torch.zeros(v.shape, dtype=v.dtype, device=v.device)
        ones[..., 0] = 1
        g = torch.zeros(q.shape, dtype=q.dtype, device=q.device)
        g[..., 0] = dlse
        dq, dk, _ = torch.ops.splat.attention_backward(q, k, ones, torch.zeros_like(g), lse, g, *ctx.args)
        if dout is not None:  # each sum rounded once
            dq, dk = ((a.float() + b.float()).to(q.dtype) for a, b in ((grads[0], dq), (grads[1], dk)))
        grads = (dq, dk, grads[2])
    return (*(g if need else None for g, need in zip(grads, ctx.needs_input_grad)), None, None, None, None)


_attention_op.register_autograd(_backward, setup_context=_setup_context)


_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    pattern: Union[Pattern, str],
    scale: Optional[float] = None,
    return_lse: bool = False,
) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Attention under ``pattern`` (see ``splat.attention``) on torch tensors: q
    [batch, heads, seq_q, head_dim], k and v [batch, heads_kv, seq_k, head_dim], all
    on one device (CPU or CUDA). Returns out in q's dtype and, with ``return_lse``,
    the float32 log-sum-exp [batch, heads, seq_q]. Both are differentiable with respect to
    q, k and v on CPU tensors (``.backward()``, ``torch.autograd.grad``)."""
    return_lse = flag(return_lse, "return_lse")
    _check_inputs(q, k, v)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if x.dtype not in _DTYPES:
            raise invalid(f"{name}.dtype={x.dtype} unsupported: use float32, float16 or bfloat16")
        if x.dtype != q.dtype:
            raise invalid(f"{name}.dtype={x.dtype} but q.dtype={q.dtype}")
    seq_q, seq_k = q.shape[2], k.shape[2]
    if isinstance(pattern, Pattern):
        if (pattern.seq_q, pattern.seq_k) != (seq_q, seq_k):
            raise invalid(
                f"pattern {pattern.spec!r} is {pattern.seq_q}x{pattern.seq_k} but the inputs have "
                f"seq_q={seq_q}, seq_k={seq_k}"
            )
        token = pattern.token
    elif isinstance(pattern, str) and not pattern.startswith("#"):
        token = pattern
    else:
        raise invalid(f"pattern={pattern!r} must be a splat.Pattern or a spec string")
    out, lse = _attention_op(q, k, v, token, seq_q, seq_k, resolve_scale(scale))
    return (out, lse) if return_lse else out
