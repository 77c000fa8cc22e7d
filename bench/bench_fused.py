#!/usr/bin/env python3
"""bench_fused.py — splat's fused attention forward against its peers on one GPU.

For each case (pattern spec, seq, head_dim; heads 16, batch 2, batch 1 at 65536 unless
--batch; with --heads-kv H, grouped-query attention: K and V of H heads) it
runs, in one process on the same inputs:
  splat    splat.torch.attention (the fused kernel; plan creation timed separately)
  flex     torch.compile(flex_attention) with a BlockMask built once by create_block_mask
           (eager up to seq 16384, compiled above) from a closed-form mask_mod (build
           time reported)
  sdpa     dense flash SDPA, no mask (does more work: its TFLOP/s count seq^2)
  masked   SDPA with the boolean mask (efficient-attention / math backends), up to a
           2 GB mask
  unfused  splat's R-SDDMM, softmax and R-SpMM through the C library on torch memory
  splat-sync, splat-sync-wg2, splat-wg1, splat-wg2, splat-wg3, splat-item, splat-gather,
  splat-split, splat-1pass, splat-kt64, splat-part, splat-notail
           (opt-in: --peers ...,splat-sync) splat under a kernel option, against the
           default in one process: SPLAT_ATTN_WS=0 (the wgmma kernel without warp
           specialisation; with SPLAT_ATTN_WARPGROUPS=2), SPLAT_ATTN_WARPGROUPS=1 (one
           consumer warpgroup, head_dim 64), =2 (two, on 128-row tiles), =3 (192-row
           tiles, three where TMA serves them), SPLAT_ATTN_PERSISTENT=0 (one CTA per work
           item), SPLAT_ATTN_TMA=0 (every key sub-tile gathered by cp.async),
           SPLAT_ATTN_SPLIT=32, SPLAT_ATTN_PASSES=0 (always one pass), SPLAT_ATTN_KT=64
           (64-key sub-tiles at head_dim 64), SPLAT_ATTN_SPLIT=1048576 (nothing is split,
           but the plan compiles the "_split" kernel: the plain kernel against it),
           SPLAT_ATTN_TAIL=0 (no 192-row tile split into 64-row ones for the last round)
and prints a table per case, a summary (geomean speedup over FlexAttention, dilated
and strided against the window with the same nnz, run beside them and left out of the
geomean, and against window(256)), JSON lines and a PNG plot of useful TFLOP/s.

Every mask_mod is checked against splat's own expansion of its spec (dense at seq 1000,
sampled rows at the case's seq); a case whose mask disagrees is not reported. splat's
output and log-sum-exp are compared with FlexAttention's; a case whose error (max
|d| / max(1, |splat|)) exceeds 2e-2 is flagged and left out of the geomean (the other
peers' errors are printed too). Times are CUDA-event medians after warm-up, each
repetition on another of several input sets (together more than twice the L2), with the
GPU kept busy ahead of the call so host overhead is not timed.

Run from the repository root on a machine with an NVIDIA GPU, torch 2.x and triton
(matplotlib for --plot), after building libsplat:

    cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release && cmake --build build-gpu -j --target splat
    SPLAT_LIBRARY=build-gpu/libsplat.so PYTHONPATH=python python3 bench/bench_fused.py --quick
    scripts/gpu-check fused            # the whole suite; FUSED_ARGS="--quick" for a subset

Options: --specs "window(256);blocked(512)" --seqs 4096,16384 --head-dims 64 --dtype bf16
--peers splat,flex --warmup 3 --rep 100 --block-mask auto --time-budget-s 400 --json F --plot F.png
--replot A.jsonl,B.jsonl (the summary and plot of earlier runs' JSON lines, no GPU)
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

REPO = Path(__file__).resolve().parent.parent
if importlib.util.find_spec("splat") is None:  # not installed: the checkout's package
    sys.path.insert(0, str(REPO / "python"))

import splat  # noqa: E402
from splat import _lib  # noqa: E402
from splat.ops import Plan, plan_cache  # noqa: E402

DEFAULT_SPECS = [
    "window(256)",
    "dilated(256,2)",
    "strided(64) | window(64)",
    "fixed(256,32)",
    "blocked(512)",
    "longformer(256,64)",
    "causal & window(512,0)",
    "bigbird(64,1,2,3,0)",  # BigBird's own shape: 3 window blocks, 2 global, 3 random, block 64
]
DEFAULT_SEQS = [4096, 16384, 65536]
DEFAULT_HEAD_DIMS = [64, 128]
PEERS = ["splat", "flex", "sdpa", "masked", "unfused"]
# Opt-in peers: splat with the environment of an experimental kernel option, timed in
# the same process as the default: the warp-specialised kernel (two consumer warpgroups,
# one or three, or without TMA), the default kernel with two warpgroups, split long tiles.
VARIANT_ENV = {
    "splat-sync": {"SPLAT_ATTN_WS": "0"},
    "splat-sync-wg2": {"SPLAT_ATTN_WS": "0", "SPLAT_ATTN_WARPGROUPS": "2"},
    "splat-wg1": {"SPLAT_ATTN_WARPGROUPS": "1"},
    "splat-wg2": {"SPLAT_ATTN_WARPGROUPS": "2"},
    "splat-wg3": {"SPLAT_ATTN_WARPGROUPS": "3"},
    "splat-item": {"SPLAT_ATTN_PERSISTENT": "0"},
    "splat-gather": {"SPLAT_ATTN_TMA": "0"},
    "splat-split": {"SPLAT_ATTN_SPLIT": "32"},
    "splat-1pass": {"SPLAT_ATTN_PASSES": "0"},
    "splat-kt64": {"SPLAT_ATTN_KT": "64"},
    "splat-part": {"SPLAT_ATTN_SPLIT": "1048576"},
    "splat-notail": {"SPLAT_ATTN_TAIL": "0"},
}
EXTRA_PEERS = list(VARIANT_ENV)
HEADS = 16
CHECK_SEQ = 1000  # dense mask_mod check against splat: awkward on purpose
CHECK_ROWS = 24  # random rows checked at the case's seq, besides the edges
# splat vs FlexAttention: the largest |flex - splat| / max(1, |splat|) of out and of the
# log-sum-exp (absolute below 1, relative above: one bf16 ulp of an output near 4 is 1.6e-2)
TOLERANCE = 2e-2
EAGER_BLOCK_MASK_MAX_SEQ = 16384  # --block-mask auto: eager up to here (int64 [seq, seq] temporaries)
MASKED_MAX_BYTES = 2 << 30  # the boolean mask of masked SDPA
L2_FALLBACK_BYTES = 50 << 20
PEER_TARGET_MS = 300.0  # GPU time spent timing one peer (reps adapt, within bounds)
MIN_REP = 5
PAD_CYCLES = 400_000  # ~0.2 ms of GPU sleep before each timed call
FORMULA = ("useful TFLOP/s = 4 x batch x heads x head_dim x nnz(M) / time; sdpa's figure "
           "(in brackets) uses nnz = seq^2; splat x = peer ms / splat ms")


class Skip(Exception):
    """A peer that does not apply to a case (printed as 'skipped', not as a failure)."""


# ---------------------------------------------------------------- mask_mods
# A predicate pred(i, j) -> bool array of query rows i and key columns j, written with
# operators only, so one definition serves numpy arrays (the checks), torch tensors
# (the masked-SDPA mask) and FlexAttention's mask_mod (int32 scalars under vmap).
# Semantics: DESIGN.md §2; `//` and `%` are floor division and the non-negative
# remainder in Python, numpy and torch alike.

Pred = Callable[[object, object], object]
TableFor = Callable[[str, int], Tuple[object, int]]


def term_predicate(name: str, args: List[int], table_for: TableFor) -> Pred:
    """The predicate of one pattern call, e.g. window(256) or bigbird(64,1,2,3,0).
    table_for(term, block) gives a bigbird term's flattened block table and key-block
    count (the random blocks come from splat itself)."""
    if name == "dense" and not args:
        return lambda i, j: (i >= 0) & (j >= 0)
    if name == "causal" and not args:
        return lambda i, j: j <= i
    if name == "window" and len(args) in (1, 2):
        left, right = (args[0], args[0]) if len(args) == 1 else args
        return lambda i, j: (j >= i - left) & (j <= i + right)
    if name == "dilated" and len(args) == 2:
        w, d = args
        return lambda i, j: ((j - i) % d == 0) & (abs(j - i) <= w * d)
    if name == "strided" and len(args) == 1:
        s = args[0]
        return lambda i, j: (i - j) % s == 0
    if name == "fixed" and len(args) == 2:
        b, c = args
        return lambda i, j: (i // b == j // b) | (j % b >= b - c)
    if name == "blocked" and len(args) == 1:
        b = args[0]
        return lambda i, j: i // b == j // b
    if name == "global" and len(args) == 1:
        g = args[0]
        return lambda i, j: (i < g) | (j < g)
    if name == "longformer" and len(args) == 2:
        w, g = args
        return lambda i, j: ((j >= i - w) & (j <= i + w)) | (i < g) | (j < g)
    if name == "bigbird" and len(args) == 5:
        b = args[0]
        table, nkb = table_for("bigbird(" + ",".join(map(str, args)) + ")", b)
        return lambda i, j: table[(i // b) * nkb + j // b]
    raise ValueError(f"no mask_mod for {name}({','.join(map(str, args))})")


class SpecParser:
    """Recursive descent over splat's spec grammar (docs/patterns.md): `|` of `&` of
    calls and parenthesised expressions; explicit masks are not supported."""

    def __init__(self, spec: str, table_for: TableFor) -> None:
        self.tokens = re.findall(r"-?\d+|[a-z_]+|\S", spec)
        self.pos = 0
        self.table_for = table_for

    def parse(self) -> Pred:
        pred = self.union()
        if self.pos != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.pos]!r}")
        return pred

    def peek(self) -> Optional[str]:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, want: Optional[str] = None) -> str:
        tok = self.peek()
        if tok is None or (want is not None and tok != want):
            raise ValueError(f"expected {want or 'a token'}, found {tok!r}")
        self.pos += 1
        return tok

    def union(self) -> Pred:
        pred = self.intersection()
        while self.peek() == "|":
            self.take()
            pred = either(pred, self.intersection())
        return pred

    def intersection(self) -> Pred:
        pred = self.factor()
        while self.peek() == "&":
            self.take()
            pred = both(pred, self.factor())
        return pred

    def factor(self) -> Pred:
        if self.peek() == "(":
            self.take()
            pred = self.union()
            self.take(")")
            return pred
        name, args = self.take(), []
        if self.peek() == "(":
            self.take()
            while self.peek() != ")":
                args.append(int(self.take()))
                if self.peek() == ",":
                    self.take()
            self.take(")")
        return term_predicate(name, args, self.table_for)


def either(a: Pred, b: Pred) -> Pred:
    return lambda i, j: a(i, j) | b(i, j)


def both(a: Pred, b: Pred) -> Pred:
    return lambda i, j: a(i, j) & b(i, j)


def block_table(term: str, seq: int, block: int) -> Tuple[np.ndarray, int]:
    """A block-level pattern's table [query block, key block] as a flat bool array,
    read from splat's expansion of the first row of each query block."""
    pat = splat.Pattern(term, seq)
    nb = -(-seq // block)
    table = np.zeros((nb, nb), dtype=bool)
    for qb in range(nb):
        table[qb, pat.row(qb * block) // block] = True
    return table.reshape(-1), nb


def numpy_predicate(spec: str, seq: int) -> Pred:
    return SpecParser(spec, lambda term, b: block_table(term, seq, b)).parse()


def torch_predicate(spec: str, seq: int, device: str) -> Pred:
    import torch

    def table_for(term: str, b: int) -> Tuple[object, int]:
        table, nb = block_table(term, seq, b)
        return torch.from_numpy(table).to(device), nb

    return SpecParser(spec, table_for).parse()


def mask_mod_of(pred: Pred) -> Callable:
    def mask_mod(b, h, q_idx, kv_idx):
        return pred(q_idx, kv_idx)

    return mask_mod


# ---------------------------------------------------------------- checks against splat


def dense_mask_of(pred: Pred, seq: int, arange: Callable) -> np.ndarray:
    i, j = arange(seq), arange(seq)
    return np.broadcast_to(np.asarray(pred(i[:, None], j[None, :])), (seq, seq))


def disagreement(want: np.ndarray, got: np.ndarray) -> Optional[str]:
    if np.array_equal(want, got):
        return None
    i, j = np.argwhere(want != got)[0]
    return f"first at ({i}, {j}): splat {bool(want[i, j])}, mask_mod {bool(got[i, j])}"


def check_small(spec: str, torch=None) -> Optional[str]:
    """Why spec's mask_mod disagrees with splat at seq CHECK_SEQ, or None: on numpy
    arrays, and with torch also on CPU tensors with int32 indices (as FlexAttention
    passes them)."""
    try:
        want = splat.Pattern(spec, CHECK_SEQ).to_dense()
        why = disagreement(want, dense_mask_of(numpy_predicate(spec, CHECK_SEQ), CHECK_SEQ, np.arange))
        if why is None and torch is not None:
            pred = torch_predicate(spec, CHECK_SEQ, "cpu")
            why = disagreement(want, dense_mask_of(pred, CHECK_SEQ, lambda n: torch.arange(n, dtype=torch.int32)))
            why = why and f"torch: {why}"
        return why
    except (ValueError, splat.Error) as exc:
        return str(exc)


def check_rows(spec: str, pattern: "splat.Pattern", seq: int) -> Optional[str]:
    """Why the mask_mod disagrees with splat on sampled rows at the case's seq, or None."""
    pred = numpy_predicate(spec, seq)
    rng = np.random.default_rng(seq)
    edges = [0, 1, 63, 64, 255, 256, 511, 512, seq // 2, seq - 2, seq - 1]
    rows = sorted({r for r in edges if 0 <= r < seq} | set(rng.integers(0, seq, CHECK_ROWS).tolist()))
    j = np.arange(seq)
    for r in rows:
        got = np.flatnonzero(np.broadcast_to(np.asarray(pred(np.array([[r]]), j[None, :])), (1, seq))[0])
        want = pattern.row(r)
        if not np.array_equal(got, want):
            extra, missing = np.setdiff1d(got, want), np.setdiff1d(want, got)
            return (f"row {r}: mask_mod has {len(extra)} columns splat lacks (first {extra[:3].tolist()}) "
                    f"and lacks {len(missing)} of splat's (first {missing[:3].tolist()})")
    return None


# ---------------------------------------------------------------- timing


class Timer:
    """Median CUDA-event time of a call, rotating over input sets; reps adapt to
    PEER_TARGET_MS within [MIN_REP, rep]."""

    def __init__(self, torch, warmup: int, rep: int) -> None:
        self.torch, self.warmup, self.rep = torch, warmup, rep
        self.sleep = getattr(torch.cuda, "_sleep", None)

    def events(self, n: int) -> list:
        return [self.torch.cuda.Event(enable_timing=True) for _ in range(n)]

    def ms(self, fn: Callable, sets: list) -> float:
        cuda = self.torch.cuda
        start, stop = self.events(2)
        start.record()
        for r in range(self.warmup):
            fn(*sets[r % len(sets)])
        stop.record()
        cuda.synchronize()
        estimate = start.elapsed_time(stop) / max(1, self.warmup)
        reps = max(MIN_REP, min(self.rep, int(PEER_TARGET_MS / max(estimate, 1e-3))))
        starts, stops = self.events(reps), self.events(reps)
        for r in range(reps):
            if self.sleep is not None:
                self.sleep(PAD_CYCLES)  # the GPU waits here while the host enqueues the call
            starts[r].record()
            fn(*sets[r % len(sets)])
            stops[r].record()
        cuda.synchronize()
        return statistics.median(a.elapsed_time(b) for a, b in zip(starts, stops))


# ---------------------------------------------------------------- peers
# Each peer's setup(ctx, case) returns run(q, k, v) -> (out, lse or None) for
# [batch, heads, seq, head_dim] tensors and may add notes to case["notes"][peer];
# it raises Skip when the peer does not apply.


def splat_setup(ctx, case, peer: str = "splat"):
    pattern, B, D = case["pattern"], case["batch"], case["head_dim"]
    code = _lib.dtype_code(str(case["dtype"]), "q")
    t0 = time.perf_counter()
    HKV = case["heads_kv"]
    plan = plan_cache.get(pattern, B, HEADS, HKV, D, code, ctx.device, _lib.OPS_ATTENTION)
    first_ms = (time.perf_counter() - t0) * 1e3
    report = plan.report()
    t0 = time.perf_counter()
    Plan(pattern, B, HEADS, HKV, D, code, ctx.device, _lib.OPS_ATTENTION)  # kernels in memory: analysis + load
    again_ms = (time.perf_counter() - t0) * 1e3
    compiled = int(report["kernels_compiled"])
    how = f"cold: {compiled} kernels compiled" if compiled else "no kernel compiled: cache hit"
    tile = f"{report['tile_q']}x{report['tile_k']}"
    if peer == "splat":  # the default's plan (a variant's is in its note)
        case["splat_plan_ms"], case["splat_plan_again_ms"] = first_ms, again_ms
        case["splat_kernels_compiled"], case["splat_tile"] = compiled, tile
    held = int(report["device_bytes"]) / (1 << 20)  # metadata (MiB)
    work = int(report["workspace_bytes"]) / (1 << 20)  # a call's workspace from the pool (MiB)
    case["notes"][peer] = (
        f"plan {first_ms:.1f} ms ({how}), {again_ms:.1f} ms with kernels in memory, tiles {tile}, "
        f"holds {held:.2f} MiB" + (f", a call takes {work:.2f} MiB of workspace" if work else "")
    )

    def run(q, k, v):
        return splat.torch.attention(q, k, v, pattern, return_lse=True)

    return run


def variant_setup(peer: str):
    """A setup for splat's plan built under VARIANT_ENV[peer] (read at plan creation); the
    plan cache is emptied first so variants and the default never share a plan."""

    def setup(ctx, case):
        plan_cache.clear()
        saved = {name: os.environ.get(name) for name in VARIANT_ENV[peer]}
        os.environ.update(VARIANT_ENV[peer])
        try:
            return splat_setup(ctx, case, peer)
        finally:
            for name, value in saved.items():
                if value is None:
                    del os.environ[name]
                else:
                    os.environ[name] = value

    return setup


def flex_block_mask(ctx, spec: str, seq: int):
    """The BlockMask of (spec, seq), built (and timed) once per process: it does not
    depend on head_dim. create_block_mask runs eagerly or compiled (--block-mask; a
    compile costs seconds, up to minutes seen at seq 16384, and eagerly the mask
    materialises as [seq, seq]). Returns (block_mask, note, build ms, first build ms, mode)."""
    key = (spec, seq)
    if key not in ctx.block_masks:
        torch = ctx.torch
        mode = ctx.block_mask_mode
        if mode == "auto":
            mode = "eager" if seq <= EAGER_BLOCK_MASK_MAX_SEQ else "compiled"
        build = ctx.create_block_mask_compiled if mode == "compiled" else ctx.create_block_mask
        mask_mod = mask_mod_of(torch_predicate(spec, seq, ctx.device))
        times = []
        for _ in range(2):  # the first call of a compiled build compiles
            t0 = time.perf_counter()
            block_mask = build(mask_mod, None, None, seq, seq, device=ctx.device)
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
        ctx.block_masks[key] = (block_mask, f"BlockMask {times[1]:.1f} ms {mode} (first {times[0]:.0f} ms)",
                                times[1], times[0], mode)
    return ctx.block_masks[key]


def flex_setup(ctx, case):
    block_mask, note, build_ms, first_ms, mode = flex_block_mask(ctx, case["spec"], case["seq"])
    case["flex_mask_ms"], case["flex_mask_first_ms"], case["flex_mask_build"] = build_ms, first_ms, mode
    case["notes"]["flex"] = note
    aux = ctx.flex_aux
    gqa = case["heads_kv"] != HEADS

    def run(q, k, v):
        if aux is not None:
            out, extra = ctx.flex(q, k, v, block_mask=block_mask, return_aux=aux(lse=True), enable_gqa=gqa)
            return out, extra.lse
        return ctx.flex(q, k, v, block_mask=block_mask, return_lse=True, enable_gqa=gqa)

    return run


def sdpa_setup(ctx, case):
    F = ctx.torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    case["notes"]["sdpa"] = "dense, no mask (flash backend)"
    gqa = case["heads_kv"] != HEADS

    def run(q, k, v):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa), None

    return run


def masked_setup(ctx, case):
    torch, F = ctx.torch, ctx.torch.nn.functional
    from torch.nn.attention import SDPBackend, sdpa_kernel

    S = case["seq"]
    if case["heads_kv"] != HEADS:
        raise Skip("grouped-query attention: not set up for this peer")
    if S * S > MASKED_MAX_BYTES:
        raise Skip(f"the boolean mask would take {S * S / 2**30:.1f} GiB (limit {MASKED_MAX_BYTES / 2**30:.0f})")
    pred = torch_predicate(case["spec"], S, ctx.device)
    mask = torch.empty((S, S), dtype=torch.bool, device=ctx.device)
    cols = torch.arange(S, device=ctx.device)[None, :]
    for r0 in range(0, S, 1024):
        rows = torch.arange(r0, min(r0 + 1024, S), device=ctx.device)[:, None]
        mask[r0 : r0 + rows.shape[0]] = pred(rows, cols)
    case["notes"]["masked"] = f"bool mask {S * S / 2**20:.0f} MiB (efficient-attention or math backend)"

    def run(q, k, v):
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), None

    return run


def splat_tensor(t) -> _lib.SplatTensor:
    return _lib.tensor(t.data_ptr(), _lib.dtype_code(str(t.dtype), "tensor"), t.shape, t.stride())


def unfused_setup(ctx, case):
    """sddmm -> softmax (in place) -> spmm through the C library: the Python package
    runs these on numpy only, so the plan's C functions get torch CUDA pointers."""
    torch = ctx.torch
    B, S, D, dtype = case["batch"], case["seq"], case["head_dim"], case["dtype"]
    if case["heads_kv"] != HEADS:
        raise Skip("grouped-query attention: not set up for this peer")
    plan = plan_cache.get(
        case["pattern"], B, HEADS, HEADS, D, _lib.dtype_code(str(dtype), "q"), ctx.device, _lib.OPS_UNFUSED
    )
    values_bytes = B * HEADS * S * plan.width * torch.finfo(dtype).bits // 8
    free, _ = torch.cuda.mem_get_info()
    if values_bytes > free // 2:
        raise Skip(f"row-padded values [{B},{HEADS},{S},{plan.width}] need {values_bytes / 2**30:.1f} GiB "
                   f"({free / 2**30:.1f} GiB free)")
    scores = torch.empty((B, HEADS, S, plan.width), dtype=dtype, device=ctx.device)
    lse = torch.empty((B, HEADS, S, 1), dtype=torch.float32, device=ctx.device)
    scores_t, lse_t = ctypes.byref(splat_tensor(scores)), ctypes.byref(splat_tensor(lse))
    case["notes"]["unfused"] = f"values {values_bytes / 2**20:.0f} MiB (W = {plan.width})"

    def run(q, k, v):
        out = torch.empty_like(q)
        stream = torch.cuda.current_stream().cuda_stream
        plan.call("sddmm", ctypes.byref(splat_tensor(q)), ctypes.byref(splat_tensor(k)),
                  _lib.DEFAULT_SCALE, scores_t, stream)
        plan.call("softmax", scores_t, 1.0, scores_t, lse_t, stream)
        plan.call("spmm", scores_t, ctypes.byref(splat_tensor(v)), ctypes.byref(splat_tensor(out)), stream)
        return out, lse[..., 0]

    return run


SETUPS = {"splat": splat_setup, "flex": flex_setup, "sdpa": sdpa_setup,
          "masked": masked_setup, "unfused": unfused_setup,
          **{peer: variant_setup(peer) for peer in VARIANT_ENV}}
SAME_FUNCTION = ("flex", "masked", "unfused", *VARIANT_ENV)  # compared with splat's output


# ---------------------------------------------------------------- one case


class Context:
    """What every case shares: torch, the compiled FlexAttention entry points, the
    timer, the device, and what does not depend on head_dim or on the mask: the
    BlockMasks by (spec, seq), the dense-SDPA times by (seq, batch, head_dim)."""

    def __init__(self, torch, args) -> None:
        from torch.nn.attention import flex_attention as fa

        self.torch = torch
        self.device = f"cuda:{torch.cuda.current_device()}"
        self.flex = torch.compile(fa.flex_attention, dynamic=False)
        self.create_block_mask = fa.create_block_mask
        self.create_block_mask_compiled = torch.compile(fa.create_block_mask, dynamic=False)
        self.block_mask_mode = args.block_mask
        self.flex_aux = getattr(fa, "AuxRequest", None)
        self.timer = Timer(torch, args.warmup, args.rep)
        self.l2_bytes = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 0) or L2_FALLBACK_BYTES
        self.dense_ms: Dict[Tuple[int, int, int], float] = {}
        self.block_masks: Dict[Tuple[str, int], tuple] = {}


def input_sets(ctx, case) -> list:
    """Enough (q, k, v) sets that together they exceed twice the L2 (plus one); k and v of
    heads_kv heads."""
    torch = ctx.torch
    shapes = [(case["batch"], h, case["seq"], case["head_dim"]) for h in (HEADS, case["heads_kv"], case["heads_kv"])]
    set_bytes = sum(math.prod(shape) for shape in shapes) * torch.finfo(case["dtype"]).bits // 8
    n = min(8, 1 + -(-2 * ctx.l2_bytes // set_bytes))
    gen = torch.Generator(device=ctx.device).manual_seed(case["seq"] + case["head_dim"])
    return [tuple(torch.randn(shape, dtype=case["dtype"], device=ctx.device, generator=gen) for shape in shapes)
            for _ in range(n)]


def errors(a, b) -> Tuple[float, float]:
    """max |a - b| and max |a - b| / max(1, |b|); equal entries count 0 (two -inf
    log-sum-exps agree)."""
    a, b = a.float(), b.float()
    diff = (a - b).abs().masked_fill(a == b, 0.0)
    return float(diff.max()), float((diff / b.abs().clamp(min=1.0)).max())


def run_peer(ctx, case, peer: str, sets: list, reference) -> Optional[tuple]:
    """Sets up and times one peer; returns its first output (out, lse) or None."""
    res = case["peers"][peer]
    try:
        if peer == "sdpa" and case["dense_key"] in ctx.dense_ms:
            res["ms"] = ctx.dense_ms[case["dense_key"]]
            case["notes"]["sdpa"] = "dense, no mask (flash backend; timed once per seq and head_dim)"
            return None
        run = SETUPS[peer](ctx, case)
        t0 = time.perf_counter()
        first = run(*sets[0])
        ctx.torch.cuda.synchronize()
        res["first_call_s"] = time.perf_counter() - t0
        if reference is not None and peer in SAME_FUNCTION:  # before timing reuses the buffers
            res["err"], res["err_scaled"] = errors(first[0], reference[0])
            if first[1] is not None and reference[1] is not None:
                res["lse_err"], res["lse_err_scaled"] = errors(first[1], reference[1])
        res["ms"] = ctx.timer.ms(run, sets)
        if peer == "sdpa":
            ctx.dense_ms[case["dense_key"]] = res["ms"]
        return first
    except Skip as exc:
        res["skipped"] = str(exc)
    except Exception as exc:  # one peer's failure must not end the run
        lines = str(exc).strip().splitlines()
        res["error"] = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
        ctx.torch.cuda.empty_cache()
    return None


def run_case(ctx, spec: str, seq: int, head_dim: int, dtype, peers: List[str], heads_kv: int = HEADS,
             batch: int = 0) -> dict:
    batch = batch or (1 if seq >= 65536 else 2)
    pattern = splat.Pattern(spec, seq)
    report = pattern.report()
    case = {"spec": spec, "seq": seq, "batch": batch, "heads": HEADS, "heads_kv": heads_kv,
            "head_dim": head_dim, "dtype": dtype,
            "pattern": pattern, "nnz": int(report["nnz"]), "density": float(report["density"]),
            "dense_key": (seq, batch, head_dim), "notes": {}, "peers": {p: {} for p in peers}}
    why = check_rows(spec, pattern, seq)
    if why is not None:
        case["refused"] = f"mask_mod disagrees with splat at seq {seq}: {why}"
        return case
    sets = input_sets(ctx, case)
    case["input_sets"] = len(sets)
    reference = None
    for peer in peers:
        first = run_peer(ctx, case, peer, sets, reference)
        if peer == "splat":
            reference = first
        del first
    del sets, reference
    plan_cache.clear()
    ctx.torch.cuda.empty_cache()
    flex = case["peers"].get("flex", {})
    errs = [flex.get("err_scaled"), flex.get("lse_err_scaled")]
    case["flagged"] = any(e is not None and not e <= TOLERANCE for e in errs)
    return case


# ---------------------------------------------------------------- reporting


def tflops(case, ms: Optional[float], nnz: Optional[int] = None) -> Optional[float]:
    if ms is None or ms <= 0:
        return None
    n = case["nnz"] if nnz is None else nnz
    return 4.0 * case["batch"] * case["heads"] * case["head_dim"] * n / (ms * 1e-3) / 1e12


def peer_tflops(case, peer: str) -> Optional[float]:
    ms = case["peers"].get(peer, {}).get("ms")
    return tflops(case, ms, case["seq"] ** 2 if peer == "sdpa" else None)


def fmt(x: Optional[float], spec: str, width: int) -> str:
    return f"{x:{width}{spec}}" if x is not None else f"{'-':>{width}}"


def case_title(case) -> str:
    kv = f" (kv {case['heads_kv']})" if case.get("heads_kv", case["heads"]) != case["heads"] else ""
    return (f"{case['spec']}  seq {case['seq']} batch {case['batch']} heads {case['heads']}{kv} "
            f"d {case['head_dim']} {str(case['dtype']).replace('torch.', '')}")


def peer_note(case, peer: str) -> str:
    res = case["peers"][peer]
    if "skipped" in res:
        return f"skipped: {res['skipped']}"
    if "error" in res:
        return f"FAILED: {res['error']}"
    note = case["notes"].get(peer, "")
    if peer in ("splat", "flex") and "first_call_s" in res:
        note += f"; first call {res['first_call_s']:.2f} s"
    return note


def print_case(case, elapsed_case: float, elapsed_total: float) -> None:
    print(f"  nnz {case['nnz']:,} ({100 * case['density']:.1f}%), {case.get('input_sets', 0)} input sets")
    if "refused" in case:
        print(f"  REFUSED: {case['refused']}")
        return
    splat_ms = case["peers"].get("splat", {}).get("ms")
    print(f"  {'peer':15s} {'ms':>8s} {'TFLOP/s':>9s} {'splat x':>8s} {'err':>9s} {'scaled':>9s} {'lse err':>9s}  notes")
    for peer, res in case["peers"].items():
        ms, tf = res.get("ms"), peer_tflops(case, peer)
        tf_text = f"({tf:.1f})" if peer == "sdpa" and tf is not None else fmt(tf, ".1f", 9)
        ratio = ms / splat_ms if ms and splat_ms else None
        print(f"  {peer:15s} {fmt(ms, '.3f', 8)} {tf_text:>9s} {fmt(ratio, '.2f', 8)} "
              f"{fmt(res.get('err'), '.1e', 9)} {fmt(res.get('err_scaled'), '.1e', 9)} "
              f"{fmt(res.get('lse_err'), '.1e', 9)}  {peer_note(case, peer)}")
    if "flex" in case["peers"] and "err" in case["peers"]["flex"]:
        verdict = "FLAGGED (excluded from the geomean)" if case["flagged"] else "ok"
        print(f"  errors against splat: err = max |d|, scaled = max |d| / max(1, |splat|), lse err = max |d| "
              f"of the log-sum-exp; FlexAttention within {TOLERANCE:g} (scaled, out and lse): {verdict}")
    print(f"  {FORMULA}")
    print(f"  [case {elapsed_case:.1f} s, total {elapsed_total:.1f} s]", flush=True)


def json_line(case, meta: dict) -> str:
    row = dict(meta)
    row.update({k: case[k] for k in ("spec", "seq", "batch", "heads", "heads_kv", "head_dim", "nnz", "density")})
    row["dtype"] = str(case["dtype"]).replace("torch.", "")
    for key in ("input_sets", "refused", "flagged", "same_nnz_window", "comparator_of", "splat_plan_ms",
                "splat_plan_again_ms", "splat_tile",
                "splat_kernels_compiled", "flex_mask_ms", "flex_mask_first_ms", "flex_mask_build"):
        if key in case:
            row[key] = case[key]
    for peer, res in case["peers"].items():
        row[f"{peer}_ms"] = res.get("ms")
        for key in ("err", "err_scaled", "lse_err", "lse_err_scaled", "first_call_s", "skipped", "error"):
            if key in res:
                row[f"{peer}_{key}"] = res[key]
    return json.dumps(row)


def speedup(case) -> Optional[float]:
    s, f = case["peers"].get("splat", {}).get("ms"), case["peers"].get("flex", {}).get("ms")
    return f / s if s and f else None


def print_summary(cases: List[dict], skipped: List[str]) -> None:
    print("\n== summary (splat x = flex ms / splat ms; * = flagged: splat and FlexAttention disagree)")
    print(f"{'spec':28s} {'seq':>6s} {'d':>4s} {'splat ms':>9s} {'flex ms':>9s} {'splat x':>8s} "
          f"{'splat TF/s':>10s} {'flex TF/s':>9s} {'sdpa ms':>9s}")
    for c in cases:
        p = c["peers"]
        mark = "*" if c.get("flagged") else ("refused" if "refused" in c else "")
        print(f"{c['spec']:28s} {c['seq']:6d} {c['head_dim']:4d} {fmt(p.get('splat', {}).get('ms'), '.3f', 9)} "
              f"{fmt(p.get('flex', {}).get('ms'), '.3f', 9)} {fmt(speedup(c), '.2f', 8)} "
              f"{fmt(peer_tflops(c, 'splat'), '.1f', 10)} {fmt(peer_tflops(c, 'flex'), '.1f', 9)} "
              f"{fmt(p.get('sdpa', {}).get('ms'), '.3f', 9)} {mark}")
    print(FORMULA)
    ratios = [(speedup(c), c) for c in cases
              if speedup(c) and not c.get("flagged") and not c.get("comparator_of")]
    if ratios:
        geo = math.exp(sum(math.log(r) for r, _ in ratios) / len(ratios))
        worst, wc = min(ratios, key=lambda rc: rc[0])
        slower = sum(r < 1 for r, _ in ratios)
        print(f"geomean speedup over FlexAttention: {geo:.2f}x over {len(ratios)} cases; min {worst:.2f}x "
              f"({wc['spec']} seq {wc['seq']} d {wc['head_dim']}); {slower} cases slower than FlexAttention"
              + (" (same-nnz window comparators not counted)" if any(c.get("comparator_of") for c in cases) else ""))
    flagged = [c for c in cases if c.get("flagged")]
    if flagged:
        print(f"flagged (excluded): {', '.join(case_title(c) for c in flagged)}")
    print_relative(cases)
    if skipped:
        print(f"not run (time budget or refused masks): {len(skipped)} cases: {'; '.join(skipped)}")


def window_nnz(w: int, seq: int) -> int:
    """Entries of window(w) over seq x seq: |i - j| <= w."""
    w = min(w, seq - 1)
    return seq * (2 * w + 1) - w * (w + 1)


def same_nnz_window(spec: str, seq: int) -> Optional[str]:
    """For a dilated or strided spec, the window(w) whose entries at seq come closest to
    its own (TARGETS item 3 compares their useful TFLOP/s); None for other specs."""
    if "dilated" not in spec and "strided" not in spec:
        return None
    nnz = int(splat.Pattern(spec, seq).report()["nnz"])
    w = min(range(seq), key=lambda w: abs(window_nnz(w, seq) - nnz))
    return f"window({w})"


def print_relative(cases: List[dict]) -> None:
    """TARGETS items: window at >= 60% of dense SDPA's TFLOP/s; dilated / strided at
    >= 80% of the useful TFLOP/s of the window with the same nnz (same_nnz_window, run
    beside them) at the same seq and head_dim; window(256)'s figure too, for reference."""
    window = {(c["seq"], c["head_dim"]): c for c in cases if c["spec"] == "window(256)"}
    by_spec = {(c["spec"], c["seq"], c["head_dim"]): c for c in cases}
    lines = []
    for (seq, d), c in sorted(window.items()):
        s, dense = peer_tflops(c, "splat"), peer_tflops(c, "sdpa")
        if s and dense:
            lines.append(f"  window(256) seq {seq} d {d}: splat {s:.1f} TFLOP/s = {100 * s / dense:.0f}% of dense "
                         f"flash SDPA ({dense:.1f})")
    for c in cases:
        if not ("dilated" in c["spec"] or "strided" in c["spec"]):
            continue
        same = c.get("same_nnz_window")
        refs = ([(same, " (same nnz)")] if same else []) + ([("window(256)", "")] if same != "window(256)" else [])
        parts = []
        for ref, label in refs:
            w = by_spec.get((ref, c["seq"], c["head_dim"]))
            rel = [f"{peer} {100 * peer_tflops(c, peer) / peer_tflops(w, peer):.0f}%" for peer in ("splat", "flex")
                   if w is not None and peer_tflops(c, peer) and peer_tflops(w, peer)]
            if rel:
                parts.append(f"vs {ref}{label}: " + ", ".join(rel))
        if parts:
            lines.append(f"  {c['spec']} seq {c['seq']} d {c['head_dim']}: useful TFLOP/s " + "; ".join(parts))
    if lines:
        print("relative useful TFLOP/s (targets: window >= 60% of dense SDPA, dilated/strided >= 80% of the "
              "window with the same nnz):")
        print("\n".join(lines))


def plot(cases: List[dict], path: str) -> None:
    """Useful TFLOP/s per pattern and peer, one panel per (seq, head_dim); dense SDPA's
    TFLOP/s (over all seq^2) as a dashed line."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        print(f"no plot: {exc}")
        return
    shown = [c for c in cases if "refused" not in c]
    seqs = sorted({c["seq"] for c in shown})
    dims = sorted({c["head_dim"] for c in shown})
    if not shown:
        return
    peers = [p for p in ("splat", "flex", "masked", "unfused") if any(p in c["peers"] for c in shown)]
    fig, axes = plt.subplots(len(seqs), len(dims), figsize=(8 * len(dims), 3.8 * len(seqs)), squeeze=False)
    width = 0.8 / len(peers)
    for (r, seq), (col, d) in ((rs, cd) for rs in enumerate(seqs) for cd in enumerate(dims)):
        ax = axes[r, col]
        group = [c for c in shown if (c["seq"], c["head_dim"]) == (seq, d)]
        if not group:
            ax.set_visible(False)
            continue
        for k, peer in enumerate(peers):
            values = [peer_tflops(c, peer) or float("nan") for c in group]
            ax.bar([x + (k - (len(peers) - 1) / 2) * width for x in range(len(group))], values, width, label=peer)
        dense = next((peer_tflops(c, "sdpa") for c in group if peer_tflops(c, "sdpa")), None)
        if dense:
            ax.axhline(dense, color="k", linestyle="--", linewidth=1, label="dense flash SDPA (all seq^2)")
        labels = [c["spec"].replace(" ", "") + (" (flagged)" if c.get("flagged") else "") for c in group]
        ax.set_xticks(range(len(group)))
        ax.set_xticklabels(labels, rotation=25, ha="right", fontsize=7)
        ax.set_xlim(-0.5, len(group) - 0.5)
        shown_values = [v for c in group for p in peers for v in [peer_tflops(c, p)] if v]
        ax.set_yscale("log")
        ax.set_ylim(bottom=min([1.0] + shown_values) / 2)
        ax.set_ylabel("useful TFLOP/s")
        ax.set_title(f"seq {seq}, head_dim {d} (batch {group[0]['batch']}, heads {HEADS})", fontsize=9)
        ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


# ---------------------------------------------------------------- main


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("SPLAT_COMMIT", "unknown")


def int_list(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="splat fused attention vs FlexAttention, SDPA (dense and masked) "
                                             "and splat's unfused pipeline, on one GPU")
    ap.add_argument("--specs", help="semicolon-separated pattern specs (default: the 8 of the suite)")
    ap.add_argument("--seqs", type=int_list, help="comma-separated seq lengths (default 4096,16384,65536)")
    ap.add_argument("--head-dims", type=int_list, help="comma-separated head dims (default 64,128)")
    ap.add_argument("--heads-kv", type=int, default=HEADS,
                    help=f"heads of K and V (default {HEADS}: one each; fewer, dividing {HEADS}: grouped-query "
                    "attention, splat, FlexAttention and SDPA only)")
    ap.add_argument("--batch", type=int, default=0,
                    help="batch of every case (default 0: the suite's, 2 below seq 65536, 1 there)")
    ap.add_argument("--dtype", choices=("bf16", "fp16", "fp32"), default="bf16",
                    help="input dtype (default bf16; fp32 runs splat's 3xTF32 mma.sync kernel)")
    ap.add_argument("--quick", action="store_true", help="seq 4096 only (head_dim 64 and 128)")
    ap.add_argument("--no-same-nnz", action="store_true",
                    help="do not run the same-nnz window beside each dilated / strided case")
    ap.add_argument("--peers", default=",".join(PEERS),
                    help=f"comma-separated subset of {','.join(PEERS + EXTRA_PEERS)} (default: all but {','.join(EXTRA_PEERS)})")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up calls after the first (compiling) call")
    ap.add_argument("--rep", type=int, default=100, help=f"most timed calls per peer (at least {MIN_REP}; "
                    f"fewer when a call is long: about {PEER_TARGET_MS:.0f} ms of GPU time per peer)")
    ap.add_argument("--block-mask", choices=("auto", "eager", "compiled"), default="auto",
                    help=f"how create_block_mask runs (auto: eager up to seq {EAGER_BLOCK_MASK_MAX_SEQ}, "
                    "compiled above)")
    ap.add_argument("--time-budget-s", type=float, default=0.0,
                    help="start no new case after this many seconds (0: no limit)")
    ap.add_argument("--json", help="append one JSON line per case to this file")
    ap.add_argument("--plot", help="write a PNG of useful TFLOP/s here")
    ap.add_argument("--replot", help="comma-separated JSON-line files of earlier runs: print their summary "
                    "(and --plot them) together, running nothing")
    args = ap.parse_args(argv)
    args.specs = [s.strip() for s in args.specs.split(";") if s.strip()] if args.specs else DEFAULT_SPECS
    args.seqs = args.seqs or ([4096] if args.quick else DEFAULT_SEQS)
    args.head_dims = args.head_dims or DEFAULT_HEAD_DIMS
    args.peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    unknown = [p for p in args.peers if p not in PEERS + EXTRA_PEERS]
    if unknown:
        ap.error(f"unknown peers {unknown}: choose from {PEERS + EXTRA_PEERS}")
    if args.batch < 0:
        ap.error(f"--batch {args.batch}: must be 1 or more (0: the suite's)")
    if args.heads_kv < 1 or HEADS % args.heads_kv:
        ap.error(f"--heads-kv {args.heads_kv}: must divide the {HEADS} heads")
    if "splat" in args.peers:  # the reference for the others' errors: run it first
        args.peers.remove("splat")
        args.peers.insert(0, "splat")
    return args


def setup_torch():
    """torch with CUDA, splat's torch op, and dynamo limits raised so that every mask
    stays compiled (past the default limit FlexAttention silently runs uncompiled)."""
    try:
        import torch
    except ImportError as exc:
        raise SystemExit(f"bench_fused.py needs torch 2.x with CUDA and triton: {exc}")
    import splat.torch  # noqa: F401  (registers torch.ops.splat.attention)

    if not torch.cuda.is_available():
        raise SystemExit("bench_fused.py needs a CUDA GPU (torch.cuda.is_available() is False)")
    splat.require_device("cuda")
    cfg = torch._dynamo.config
    for name in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit",
                 "accumulated_recompile_limit"):
        if hasattr(cfg, name):
            setattr(cfg, name, 4096)
    for name in ("fail_on_recompile_limit_hit", "fail_on_cache_limit_hit"):
        if hasattr(cfg, name):
            setattr(cfg, name, True)  # fail loudly rather than time an uncompiled fallback
    return torch


def header(torch) -> dict:
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    meta = {"bench": "fused", "device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "triton": triton_version, "cuda": torch.version.cuda, "splat": splat.library_version(),
            "commit": git_commit()}
    print(f"device {meta['device']}, torch {meta['torch']} (CUDA {meta['cuda']}), triton {triton_version}")
    print(f"splat {meta['splat']} from {splat.library_path()}, commit {meta['commit']}")
    return meta


def cases_from_json(paths: str) -> List[dict]:
    """The cases of earlier runs from their JSON lines (the fields json_line writes)."""
    cases = []
    for path in paths.split(","):
        for line in open(path.strip()):
            row = json.loads(line)
            case = {k: v for k, v in row.items() if not any(k.startswith(p + "_") for p in PEERS + EXTRA_PEERS)
                    or k in ("same_nnz_window", "comparator_of", "splat_plan_ms", "splat_plan_again_ms",
                             "splat_tile", "splat_kernels_compiled", "flex_mask_ms",
                             "flex_mask_first_ms", "flex_mask_build")}
            case["peers"] = {}
            for peer in PEERS + EXTRA_PEERS:
                if f"{peer}_ms" in row:
                    case["peers"][peer] = {k[len(peer) + 1:]: v for k, v in row.items()
                                           if k.startswith(peer + "_") and not k.startswith(peer + "-")}
            cases.append(case)
    return cases


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    if args.replot:
        cases = cases_from_json(args.replot)
        print_summary(cases, [])
        if args.plot:
            plot(cases, args.plot)
        return 0
    torch = setup_torch()
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    meta = header(torch)
    refused = {}
    for spec in args.specs:
        why = check_small(spec, torch)
        print(f"mask_mod check at seq {CHECK_SEQ}: {spec}: {'ok' if why is None else 'DISAGREES: ' + why}")
        if why is not None:
            refused[spec] = why
    ctx = Context(torch, args)
    print(f"L2 {ctx.l2_bytes / 2**20:.0f} MiB; peers {','.join(args.peers)}; tolerance {TOLERANCE:g}", flush=True)
    # (seq, head_dim, spec, the case it is the same-nnz window of, its own same-nnz window):
    # each dilated / strided case's same-nnz window runs right after it, unless in the suite.
    plan = []
    for seq in args.seqs:
        for d in args.head_dims:
            for spec in args.specs:
                same = same_nnz_window(spec, seq) if spec not in refused else None
                plan.append((seq, d, spec, None, same))
                if same and same not in args.specs and not args.no_same_nnz:
                    plan.append((seq, d, same, spec, None))
    cases, skipped = [], [f"{spec} (mask_mod disagrees)" for spec in refused]
    t_start = time.perf_counter()
    json_file = open(args.json, "a") if args.json else None
    with torch.no_grad():
        for n, (seq, d, spec, comparator_of, same) in enumerate(plan, 1):
            if spec in refused:
                continue
            elapsed = time.perf_counter() - t_start
            if args.time_budget_s and elapsed > args.time_budget_s:
                skipped += [f"{s} seq {q} d {h}" for q, h, s, _, _ in plan[n - 1 :] if s not in refused]
                print(f"\ntime budget of {args.time_budget_s:.0f} s spent: {len(plan) - n + 1} cases not run")
                break
            print(f"\n== [{n}/{len(plan)}] {spec}  seq {seq}  d {d}", flush=True)
            t_case = time.perf_counter()
            case = run_case(ctx, spec, seq, d, dtype, args.peers, args.heads_kv, args.batch)
            if comparator_of:
                case["comparator_of"] = comparator_of
            if same:
                case["same_nnz_window"] = same
            print_case(case, time.perf_counter() - t_case, time.perf_counter() - t_start)
            cases.append(case)
            if json_file:
                json_file.write(json_line(case, meta) + "\n")
                json_file.flush()
    if json_file:
        json_file.close()
    print_summary(cases, skipped)
    if args.plot:
        plot(cases, args.plot)
    print(f"total {time.perf_counter() - t_start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
