#!/usr/bin/env python3
"""gpu_check.py — splat's Python front ends on an NVIDIA GPU, in one command:

    python3 python/tests/gpu_check.py [--quick] [--out DIR]

Runs splat.torch.attention (eager, on the current and on a side stream, one plan on two
streams at once, and under torch.compile with inductor), splat.jax.attention (jit, vmap;
jax.grad refused) and splat.jax's unfused sddmm -> softmax -> spmm (jit) on CUDA for specs of
DESIGN.md §2 at awkward sizes, dtypes f32/f16/bf16 and head_dim 64/128, against the
float64 reference of python/tests/reference.py (masks from brute-force predicates).
Outputs are poisoned with NaN first (freed NaN-filled blocks are what the allocator
hands out next). Tolerance, after DESIGN.md §7: no worse than twice the error of a naive
same-dtype implementation (dense masked softmax in torch, in the input dtype), with a
floor of one ulp of the output dtype at the largest output magnitude (the `bound` column
is the larger), and never NaN; log-sum-exp within 1e-5. Prints a table and writes it to DIR/python_gpu_check.txt (default
bench/results/). Exit status 1 when any case fails. Runs from a checkout without
installing: it puts python/ on sys.path and finds build-python/ or build/.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
import traceback
from pathlib import Path

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with torch
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
if importlib.util.find_spec("splat") is None:  # not installed: the checkout's package
    sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

import reference as ref  # noqa: E402
import splat  # noqa: E402

SPECS = [s for s in ref.SPECS if s[0] in (
    "dense", "causal", "window(5)", "dilated(3,4)", "strided(7)", "fixed(16,4)", "global(5)",
    "bigbird(8,1,1,2,42)", "window(4) | global(2)", "(blocked(8) | global(3)) & causal",
)]
SHAPES = [(97, 97), (160, 97)]
HEAD_DIMS = [64, 128]
TITLE = "spec                                    shape    d dtype     path             max err      bound result"
TDEV, JDEV = "cuda", "gpu"  # torch device, jax platform (--cpu: "cpu", "cpu" for a dry run)
ULP = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}  # spacing at 1.0

rows: list = []
failures = 0
log = None  # the output file, written as rows come (a timeout keeps what ran)


def emit(line: str) -> None:
    rows.append(line)
    print(line, flush=True)
    if log is not None:
        log.write(line + "\n")
        log.flush()


def record(spec, shape, d, dtype, path, err, bound, note=""):
    global failures
    ok = np.isfinite(err) and err <= bound
    failures += not ok
    emit(f"{spec:36s} {shape:>8s} {d:4d} {dtype:9s} {path:16s} {err:10.3e} {bound:10.3e} "
         f"{'PASS' if ok else 'FAIL'}{(' ' + note) if note else ''}")


def failed(spec, shape, d, dtype, path, exc):
    global failures
    failures += 1
    msg = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
    emit(f"{spec:36s} {shape:>8s} {d:4d} {dtype:9s} {path:16s} {'-':>10s} {'-':>10s} FAIL {msg}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="head_dim 64 only, fewer specs")
    ap.add_argument("--cpu", action="store_true", help="dry run of this script on the CPU backend")
    ap.add_argument("--out", default=os.environ.get("OUT") or str(HERE.parent.parent / "bench" / "results"))
    args = ap.parse_args()
    global TDEV, JDEV
    if args.cpu:
        TDEV, JDEV = "cpu", "cpu"
    specs = SPECS[:5] if args.quick else SPECS
    head_dims = HEAD_DIMS[:1] if args.quick else HEAD_DIMS

    env = splat.environment()
    header = [f"splat {splat.library_version()} ({splat.library_path()})",
              f"device: {env['device_name'] or 'none'} cc {env['device_cc_major']}.{env['device_cc_minor']}, "
              f"driver {env['cuda_driver_version']}, nvrtc {env['nvrtc_version']}"
              + (f"; why not CUDA: {env['why_not_cuda']}" if env["why_not_cuda"] else "")]
    try:
        import torch
        import splat.torch as st
        header.append(f"torch {torch.__version__}, cuda {torch.version.cuda}"
                      + (f", {torch.cuda.get_device_name()}" if TDEV == "cuda" else ""))
    except Exception as exc:  # report and go on with jax
        torch = st = None
        header.append(f"torch unavailable: {exc}")
    try:
        import jax
        import jax.numpy as jnp
        import splat.jax as sj
        header.append(f"jax {jax.__version__}, devices {jax.devices()}")
    except Exception as exc:
        jax = jnp = sj = None
        header.append(f"jax unavailable: {exc}")
    global log
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "python_gpu_check.txt", "w")
    print("\n".join(header), flush=True)
    log.write("\n".join(header) + "\n\n" + TITLE + "\n")
    print(TITLE, flush=True)

    t0 = time.time()
    for spec, pred in specs:
        for seq_q, seq_k in SHAPES:
            mask = ref.mask_of(pred, seq_q, seq_k)
            pat = splat.Pattern(spec, seq_q, seq_k)
            for d in head_dims:
                for dname in ("float32", "float16", "bfloat16"):
                    check_case(spec, pat, mask, seq_q, seq_k, d, dname, torch, st, jax, jnp, sj)
    mask = ref.random_mask(np.random.default_rng(11), 97, 97, 0.2)  # an explicit mask
    for dname in ("float32", "float16", "bfloat16"):
        check_case("random mask", splat.Pattern.from_mask(mask), mask, 97, 97, 64, dname, torch, st, jax, jnp, sj)
    if torch is not None:
        compiled_cases(torch, st)
        if TDEV == "cuda":
            streams_case(torch, st)
            graph_case(torch, st)
    if jax is not None:
        vmap_case(jax, sj)
    elapsed = time.time() - t0

    summary = f"{len(rows) - failures} passed, {failures} failed ({elapsed:.1f} s)"
    emit(summary)
    log.close()
    print(f"wrote {out / 'python_gpu_check.txt'}")
    return 1 if failures else 0


def inputs(seq_q, seq_k, d, dname, seed=0):
    rng = np.random.default_rng(seed)
    B, H, Hkv = 2, 4, 2
    q = rng.standard_normal((B, H, seq_q, d))
    k = rng.standard_normal((B, Hkv, seq_k, d))
    v = rng.standard_normal((B, Hkv, seq_k, d))
    return q, k, v


def naive_bound(torch, q, k, v, mask, dname, want):
    """Twice the error of dense masked attention computed in the input dtype."""
    dt = getattr(torch, dname)
    Q, K, V = (torch.tensor(x, device=TDEV).to(dt) for x in (q, k, v))
    group = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(group, 1), V.repeat_interleave(group, 1)
    s = (Q @ K.transpose(-1, -2)) * (1.0 / np.sqrt(q.shape[-1]))
    m = torch.tensor(mask, device=TDEV)
    p = torch.softmax(s.masked_fill(~m, float("-inf")), dim=-1).nan_to_num(0.0)
    naive = (p @ V).float().cpu().numpy()
    # floor: one ulp of the output dtype at the largest output (a single output rounding)
    return max(2 * ref.max_error(naive, want), ULP[dname] * float(np.max(np.abs(want))))


def poison(torch, nbytes):
    """Fills freed allocator blocks with NaN so torch.empty hands out NaN."""
    if TDEV == "cuda":
        torch.full((nbytes // 4 + 1024,), float("nan"), device=TDEV)  # freed at once


def check_case(spec, pat, mask, seq_q, seq_k, d, dname, torch, st, jax, jnp, sj):
    shape = f"{seq_q}x{seq_k}"
    q, k, v = inputs(seq_q, seq_k, d, dname)
    # the reference sees the inputs rounded to dtype, as the kernels do
    if torch is not None:
        dt = getattr(torch, dname)
        Q, K, V = (torch.tensor(x, device=TDEV).to(dt) for x in (q, k, v))
        qr, kr, vr = (X.float().cpu().numpy() for X in (Q, K, V))
    else:
        import ml_dtypes
        npdt = ml_dtypes.bfloat16 if dname == "bfloat16" else np.dtype(dname)
        qr, kr, vr = (x.astype(npdt).astype(np.float64) for x in (q, k, v))
    want, want_lse = ref.attention(qr, kr, vr, mask)
    bound = naive_bound(torch, qr, kr, vr, mask, dname, want) if torch is not None else ref.GPU_TOLERANCE[dname]
    lse_bound = 1e-5
    if torch is not None:
        try:
            poison(torch, Q.numel() * 8)
            out, lse = st.attention(Q, K, V, pat, return_lse=True)
            if TDEV == "cuda":
                torch.cuda.synchronize()
            record(spec, shape, d, dname, "torch eager", ref.max_error(out.float().cpu().numpy(), want), bound)
            record(spec, shape, d, dname, "torch eager lse", ref.max_error(lse.cpu().numpy(), want_lse), lse_bound)
            if d == 64 and dname == "float16" and TDEV == "cuda":
                side = torch.cuda.Stream()
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    poison(torch, Q.numel() * 8)
                    out_s = st.attention(Q, K, V, pat)
                side.synchronize()
                record(spec, shape, d, dname, "torch stream", ref.max_error(out_s.float().cpu().numpy(), want), bound)
        except Exception as exc:
            traceback.print_exc()
            failed(spec, shape, d, dname, "torch eager", exc)
    if sj is not None:
        try:
            jdt = jnp.dtype(dname)
            Qj, Kj, Vj = (jax.device_put(jnp.asarray(x, dtype=jdt), jax.devices(JDEV)[0]) for x in (qr, kr, vr))
            f = jax.jit(lambda a, b, c: sj.attention(a, b, c, pat, return_lse=True))
            out, lse = f(Qj, Kj, Vj)
            record(spec, shape, d, dname, "jax jit", ref.max_error(np.asarray(out.astype(jnp.float32)), want), bound)
            record(spec, shape, d, dname, "jax jit lse", ref.max_error(np.asarray(lse), want_lse), lse_bound)
        except Exception as exc:
            traceback.print_exc()
            failed(spec, shape, d, dname, "jax jit", exc)
        unfused_case(spec, pat, mask, shape, d, dname, qr, kr, want, jax, jnp, sj, Qj, Kj, Vj)


def unfused_case(spec, pat, mask, shape, d, dname, qr, kr, want, jax, jnp, sj, Qj, Kj, Vj):
    """splat.jax's unfused ops under jit: the R-SDDMM's scores at the mask's entries against
    scale Q K^T in float64 (padding entries are unspecified: not compared), then
    softmax -> R-SpMM against the attention reference. Both round scores (and the pipeline
    its probabilities) to the dtype, so the bound is reference.py's GPU tolerance."""
    try:
        scores = jax.jit(lambda a, b: sj.sddmm(a, b, pat))(Qj, Kj)
        group = qr.shape[1] // kr.shape[1]
        dense = np.einsum("bhid,bhjd->bhij", qr, np.repeat(kr, group, axis=1)) / np.sqrt(d)
        width = pat.row_width
        want_s = ref.to_values(dense, mask, width)
        valid = np.zeros(want_s.shape[-2:], dtype=bool)
        for i, cols in enumerate(ref.columns(mask)):
            valid[i, : len(cols)] = True
        got = np.asarray(scores.astype(jnp.float32)).astype(np.float64)
        record(spec, shape, d, dname, "jax sddmm", ref.max_error(np.where(valid, got, want_s), want_s),
               ref.GPU_TOLERANCE[dname])
        out = jax.jit(lambda s, c: sj.spmm(sj.softmax(s, pat), c, pat))(scores, Vj)
        record(spec, shape, d, dname, "jax unfused", ref.max_error(np.asarray(out.astype(jnp.float32)), want),
               ref.GPU_TOLERANCE[dname])
    except Exception as exc:
        traceback.print_exc()
        failed(spec, shape, d, dname, "jax unfused", exc)


def compiled_cases(torch, st):
    """torch.compile (inductor, fullgraph) of a block around the op, per dtype."""
    spec, pred = "window(4) | global(2)", ref.union(ref.window(4), ref.global_(2))
    pat = splat.Pattern(spec, 97, 97)
    mask = ref.mask_of(pred, 97, 97)

    def block(q, k, v):
        return st.attention(q * 2.0, k, v, pat) + 1.0

    compiled = torch.compile(block, fullgraph=True)
    for dname in ("float32", "float16", "bfloat16"):
        try:
            dt = getattr(torch, dname)
            q, k, v = inputs(97, 97, 64, dname, seed=5)
            Q, K, V = (torch.tensor(x, device=TDEV).to(dt) for x in (q, k, v))
            qr, kr, vr = ((2.0 * Q).float().cpu().numpy(), K.float().cpu().numpy(), V.float().cpu().numpy())
            want, _ = ref.attention(qr, kr, vr, mask)
            bound = naive_bound(torch, qr, kr, vr, mask, dname, want)
            got = compiled(Q, K, V).float().cpu().numpy() - 1.0
            record(spec, "97x97", 64, dname, "torch compiled", ref.max_error(got, want), bound + 4 * ULP[dname])  # + the compiled graph's +1 / -1 roundings at |x| <= 2
        except Exception as exc:
            traceback.print_exc()
            failed(spec, "97x97", 64, dname, "torch compiled", exc)


def streams_case(torch, st):
    """One plan with a workspace (strided(8)|window(8) at 700 runs in two passes) called on two
    streams at once with different inputs, several rounds: each output must match its own
    reference (each call takes its own workspace from the context's pool)."""
    spec, pred, n, dname = "strided(8)|window(8)", ref.union(ref.strided(8), ref.window(8)), 700, "bfloat16"
    pat = splat.Pattern(spec, n, n)
    mask = ref.mask_of(pred, n, n)
    try:
        sets = []
        for seed in (21, 22):
            X = [torch.tensor(x, device=TDEV).to(torch.bfloat16) for x in inputs(n, n, 64, dname, seed=seed)]
            r = [x.float().cpu().numpy() for x in X]
            want, _ = ref.attention(*r, mask)
            sets.append((X, want, naive_bound(torch, *r, mask, dname, want)))
        streams = [torch.cuda.Stream(), torch.cuda.Stream()]
        for s in streams:
            s.wait_stream(torch.cuda.current_stream())
        outs = [None, None]
        for _ in range(4):
            for i, s in enumerate(streams):
                with torch.cuda.stream(s):
                    outs[i] = st.attention(*sets[i][0], pat)
        torch.cuda.synchronize()
        for i in range(2):
            record(spec, f"{n}x{n}", 64, dname, f"torch 2 streams {i}",
                   ref.max_error(outs[i].float().cpu().numpy(), sets[i][1]), sets[i][2])
    except Exception as exc:
        traceback.print_exc()
        failed(spec, f"{n}x{n}", 64, dname, "torch 2 streams", exc)


def graph_case(torch, st):
    """Calls captured in a CUDA graph (torch.cuda.graph), a one-pass plan and a two-pass one
    (whose workspace becomes graph memory nodes), replayed on new inputs copied into the
    captured ones: each replay must match the reference of those inputs, and the plan must
    still run eagerly afterwards."""
    dname = "bfloat16"
    for spec, pred, n in (("window(16)", ref.window(16), 300),
                          ("strided(8)|window(8)", ref.union(ref.strided(8), ref.window(8)), 700)):
        pat = splat.Pattern(spec, n, n)
        mask = ref.mask_of(pred, n, n)
        try:
            X = [torch.tensor(x, device=TDEV).to(torch.bfloat16) for x in inputs(n, n, 64, dname, seed=31)]
            side = torch.cuda.Stream()  # warm-up off the default stream, as torch.cuda.graph asks
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                st.attention(*X, pat)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = st.attention(*X, pat)
            for seed in (32, 33):
                new = inputs(n, n, 64, dname, seed=seed)
                for dst, src in zip(X, new):
                    dst.copy_(torch.tensor(src, device=TDEV).to(torch.bfloat16))
                graph.replay()
                torch.cuda.synchronize()
                r = [x.float().cpu().numpy() for x in X]
                want, _ = ref.attention(*r, mask)
                record(spec, f"{n}x{n}", 64, dname, f"torch graph replay {seed}",
                       ref.max_error(out.float().cpu().numpy(), want), naive_bound(torch, *r, mask, dname, want))
            eager = st.attention(*X, pat)
            record(spec, f"{n}x{n}", 64, dname, "torch eager after graph",
                   ref.max_error(eager.float().cpu().numpy(), want), naive_bound(torch, *r, mask, dname, want))
        except Exception as exc:
            traceback.print_exc()
            failed(spec, f"{n}x{n}", 64, dname, "torch graph", exc)


def vmap_case(jax, sj):
    """jax.vmap over a leading axis (merged into the batch by the handler), under jit."""
    spec, pred = "dilated(3,4) | global(2)", ref.union(ref.dilated(3, 4), ref.global_(2))
    pat = splat.Pattern(spec, 97, 61)
    mask = ref.mask_of(pred, 97, 61)
    rng = np.random.default_rng(9)
    qs = rng.standard_normal((3, 2, 4, 97, 64)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 61, 64)).astype(np.float32) for _ in range(2))
    try:
        gpu = jax.devices(JDEV)[0]
        f = jax.jit(jax.vmap(lambda a: sj.attention(a, k, v, pat)))
        out = np.asarray(f(jax.device_put(qs, gpu)))
        err = max(ref.max_error(out[n], ref.attention(qs[n], k, v, mask)[0]) for n in range(3))
        record(spec, "97x61", 64, "float32", "jax vmap", err, ref.GPU_TOLERANCE["float32"])
    except Exception as exc:
        traceback.print_exc()
        failed(spec, "97x61", 64, "float32", "jax vmap", exc)
    # The ops are forward-only: jax.grad through one is refused with splat.Error naming it.
    try:
        q1 = jax.device_put(qs[0], jax.devices(JDEV)[0])
        try:
            jax.grad(lambda a: sj.attention(a, k, v, pat).sum())(q1)
            raise AssertionError("jax.grad through splat.jax.attention did not raise")
        except splat.Error as exc:
            assert "forward-only" in str(exc), str(exc)
        record(spec, "97x61", 64, "float32", "jax grad refused", 0.0, 0.0)
    except Exception as exc:
        traceback.print_exc()
        failed(spec, "97x61", 64, "float32", "jax grad refused", exc)


if __name__ == "__main__":
    sys.exit(main())
