"""splat.torch — the PyTorch front end: ``torch.ops.splat.attention``.

    import splat, splat.torch
    out = splat.torch.attention(q, k, v, splat.Pattern("window(128) | global(16)", seq))

The op is a ``torch.library.custom_op`` with a fake (meta) implementation, so it works
in eager mode and under ``torch.compile`` (the pattern is a string argument: the spec
text, or ``#<key>`` naming a live ``Pattern.from_mask`` pattern). CUDA tensors run on
splat's CUDA backend on ``torch.cuda.current_stream()``; CPU tensors on the CPU
backend. Inputs are [batch, heads, seq, head_dim] float32 / float16 / bfloat16 with any
strides. Forward only: there is no autograd formula yet. Plans are cached with the
numpy front end's (``splat.plan_cache``).
"""

# No `from __future__ import annotations` here: torch.library.custom_op reads the
# annotations of the op's signature as types.
import ctypes
from typing import Optional, Tuple, Union

import torch

from . import _lib
from .errors import flag, invalid
from .ops import check_4d, check_empty_batch, plan_cache, resolve_scale, round_to_float32
from .pattern import Pattern, pattern_for_token

__all__ = ["attention"]


def _tensor(t: torch.Tensor, what: str) -> _lib.SplatTensor:
    return _lib.tensor(t.data_ptr(), _lib.dtype_code(str(t.dtype), what), t.shape, t.stride())


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Tensors, 4-d, and k and v on q's device: checked by the wrapper, the op and its fake
    (the fake runs alone under torch.compile and where the devices differ, e.g. a meta k)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise invalid(f"{name} must be a torch.Tensor, got {type(x).__name__} (splat.attention takes numpy arrays)")
        check_4d(tuple(x.shape), name)
    for name, x in (("k", k), ("v", v)):
        if x.device != q.device:
            raise invalid(f"{name} is on {x.device} but q is on {q.device}")


def _device(t: torch.Tensor) -> str:
    if t.device.type == "cpu":
        return "cpu"
    if t.device.type == "cuda":
        return f"cuda:{t.device.index if t.device.index is not None else torch.cuda.current_device()}"
    raise invalid(f"tensors on {t.device} are not supported: use CPU or CUDA tensors")


@torch.library.custom_op("splat::attention", mutates_args=())
def _attention_op(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: str, seq_q: int, seq_k: int, scale: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    """out [B,H,Sq,D] (q's dtype) and float32 lse [B,H,Sq]; scale 0 = 1/sqrt(D)."""
    _check_inputs(q, k, v)
    if scale != 0.0 and round_to_float32(scale) == 0.0:
        raise invalid(f"scale={scale:g} rounds to 0 in float32, where 0 selects the default 1/sqrt(head_dim)")
    pat = pattern_for_token(pattern, seq_q, seq_k)
    B, H, Sq, D = q.shape
    device = _device(q)
    code = _lib.dtype_code(str(q.dtype), "q")
    plan = plan_cache.get(pat, max(B, 1), H, k.shape[1], D, code, device, _lib.OPS_ATTENTION)
    out = torch.empty((B, H, Sq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, H, Sq), dtype=torch.float32, device=q.device)
    # lse [B,H,Sq] seen by C as [B,H,Sq,1]
    lse_t = _lib.tensor(lse.data_ptr(), 0, (B, H, Sq, 1), tuple(lse.stride()) + (1,))
    if B == 0:
        kv = (0, k.shape[1], pat.seq_k, D)
        check_empty_batch(q=(q.shape, (0, H, pat.seq_q, D)), k=(k.shape, kv), v=(v.shape, kv))
        return out, lse
    stream = torch.cuda.current_stream(q.device).cuda_stream if device != "cpu" else None
    plan.call(
        "attention",
        ctypes.byref(_tensor(q, "q")),
        ctypes.byref(_tensor(k, "k")),
        ctypes.byref(_tensor(v, "v")),
        scale,
        ctypes.byref(_tensor(out, "out")),
        ctypes.byref(lse_t),
        stream,
    )
    return out, lse


@_attention_op.register_fake
def _attention_fake(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, pattern: str, seq_q: int, seq_k: int, scale: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    _check_inputs(q, k, v)
    B, H, Sq, D = q.shape
    return q.new_empty((B, H, Sq, D)), q.new_empty((B, H, Sq), dtype=torch.float32)


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
    the float32 log-sum-exp [batch, heads, seq_q]."""
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
