"""bench/cold_plan.py — plan creation on the GPU from a cold kernel cache and from the disk
cache, per set of operations (splat_plan_desc.ops): each measurement is a fresh process
with an empty SPLAT_CACHE_DIR (and CUDA_CACHE_DISABLE=1, so no compile cache below splat's
serves it), then a second process on the same directory.

    SPLAT_LIBRARY=build-gpu/libsplat.so PYTHONPATH=python python3 bench/cold_plan.py \
        [--spec "window(256)"] [--seq 4096] [--head-dims 64,128] [--rounds 2] [--ops attention]

"plan" is the wall time of splat.ops.Plan (it includes the process's CUDA context
creation, ~0.2 s); "kernels" is the plan report's kernels_ms (compile, or disk load).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

OPS = ("unfused", "attention", "all")


def child(spec: str, seq: int, ops_name: str, head_dim: int) -> None:
    import splat
    from splat import _lib

    ops = {"unfused": _lib.OPS_UNFUSED, "attention": _lib.OPS_ATTENTION, "all": 0}[ops_name]
    pat = splat.Pattern(spec, seq)
    t0 = time.perf_counter()
    plan = splat.ops.Plan(pat, 2, 16, 16, head_dim, _lib.dtype_code("bfloat16", "q"), "cuda", ops)
    ms = (time.perf_counter() - t0) * 1e3
    rep = plan.report()
    print(f"{ms:.1f} {rep['kernels_ms']:.1f} {rep['kernels_compiled']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="window(256)")
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--head-dims", default="64,128")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--ops", default=",".join(OPS), help="sets of operations, of: " + ", ".join(OPS))
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.spec, a.seq, a.child[0], int(a.child[1]))
        return
    print(f"{a.spec}, seq {a.seq}, batch 2, heads 16, bf16; ms")
    print(f"{'ops':10s} {'dim':>4s} {'cache':6s} {'plan':>8s} {'kernels':>8s} compiled")
    for _ in range(a.rounds):
        for ops in a.ops.split(","):
            for d in (int(x) for x in a.head_dims.split(",")):
                with tempfile.TemporaryDirectory() as cache:
                    env = dict(os.environ, SPLAT_CACHE_DIR=cache, CUDA_CACHE_DISABLE="1")
                    for how in ("cold", "disk"):
                        cmd = [sys.executable, __file__, "--spec", a.spec, "--seq", str(a.seq), "--child", ops, str(d)]
                        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout.split()
                        print(f"{ops:10s} {d:4d} {how:6s} {float(out[0]):8.1f} {float(out[1]):8.1f} {out[2]}")


if __name__ == "__main__":
    main()
