#!/usr/bin/env python3
"""kernel_times.py — which GPU kernels one splat.torch.attention call launches, and the
median time of each launch (torch.profiler / CUPTI), per pattern spec: shows where a
multi-kernel call (two passes, split tiles and their merge) spends its time.

    SPLAT_LIBRARY=build-gpu/libsplat.so PYTHONPATH=python python3 bench/kernel_times.py \
        --specs "strided(64) | window(64);window(94)" --seqs 4096 --head-dims 64,128

Batch 2, heads 16, bf16, as bench_fused.py; prints a line per (case, kernel)."""
import argparse
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

import splat.torch as st

HEADS, BATCH, REP = 16, 2, 20


def kernel_times(spec: str, seq: int, d: int) -> dict:
    """(launch index within a call, kernel name) -> median us of that launch."""
    qkv = [torch.randn(BATCH, HEADS, seq, d, dtype=torch.bfloat16, device="cuda") for _ in range(3)]
    for _ in range(3):  # plan, compile, warm up
        st.attention(*qkv, spec)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(REP):
            st.attention(*qkv, spec)
        torch.cuda.synchronize()
    evs = sorted((ev for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA
                  and ev.device_time > 0), key=lambda ev: ev.time_range.start)
    per_call = len(evs) // REP
    per = {}  # (launch index within the call, name) -> times
    for n, ev in enumerate(evs[: per_call * REP]):
        per.setdefault((n % per_call, ev.name), []).append(ev.device_time)
    return {key: statistics.median(t) for key, t in sorted(per.items())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--specs", required=True, help="semicolon-separated pattern specs")
    ap.add_argument("--seqs", default="4096", help="comma-separated seq lengths")
    ap.add_argument("--head-dims", default="64", help="comma-separated head dims")
    args = ap.parse_args()
    print(f"{'case':<44} {'#':>2} {'kernel':<60} {'us':>9}")
    for spec in args.specs.split(";"):
        for seq in map(int, args.seqs.split(",")):
            for d in map(int, args.head_dims.split(",")):
                case = f"{spec.strip()} {seq} d{d}"
                for (n, name), us in kernel_times(spec, seq, d).items():
                    print(f"{case:<44} {n:>2} {name[:60]:<60} {us:>9.1f}")


if __name__ == "__main__":
    main()
