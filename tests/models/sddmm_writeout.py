#!/usr/bin/env python3
"""sddmm_writeout.py — runs the host model of the R-SDDMM's score write-out
(tests/models/sddmm_writeout.cpp) on the kernels in kernels/: extracts the device
functions it models, compiles it with the host C++ compiler for each write-out variant
(the row stores of 16-bit scores at 128-key sub-tiles; the lanes' stores at 64 and 128
keys, 2 or 4 lanes a row; f32 scores), runs random trials, and checks that the model can
fail: with one column block too few staged it must report failures.
Usage: sddmm_writeout.py [TRIALS] (per variant; default 2000)."""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = os.path.join(ROOT, "kernels")
HARNESS = os.path.join(ROOT, "tests", "models", "sddmm_writeout.cpp")

VARIANTS = [
    ("row stores, f16, 128 keys", ["-DSPLAT_SDDMM_ROWSTORE=1", "-DSPLAT_KT=128"]),
    ("lanes, f16, 64 keys, 2 a row", ["-DSPLAT_KT=64", "-DSPLAT_WLPR=2"]),
    ("lanes, f16, 64 keys, 4 a row", ["-DSPLAT_KT=64", "-DSPLAT_WLPR=4"]),
    ("lanes, f16, 128 keys", ["-DSPLAT_KT=128"]),
    ("lanes, f32, 64 keys", ["-DSPLAT_SDT=SPLAT_F32", "-DSPLAT_KT=64"]),
    ("lanes, f32, 32 keys", ["-DSPLAT_SDT=SPLAT_F32", "-DSPLAT_KT=32"]),
]
# A mutation the model must catch: the warp's last staged column block rounded down.
MUTANT = ("hi = (__reduce_max_sync(0xffffffffu, hi) + 7) >> 3;",
          "hi = __reduce_max_sync(0xffffffffu, hi) >> 3;")


def section(lines, start, end, name, after=None):
    """Lines [first containing start (after the first containing `after`), first containing
    end after it) of a kernel file."""
    try:
        a0 = next(i for i, l in enumerate(lines) if after in l) if after else 0
        a = next(i for i in range(a0, len(lines)) if start in lines[i])
        b = next(i for i in range(a + 1, len(lines)) if end in lines[i])
    except StopIteration:
        sys.exit(f"sddmm_writeout.py: {name}: '{start}' .. '{end}' not found (the kernels changed: "
                 "update the extraction)")
    return lines[a:b]


def extract(sources):
    """The modelled device code, in dependency order, the two inline-asm store helpers left
    to the harness's host versions."""
    si = sources["seg_interval.cuh"].split("\n")
    cm = sources["common.cuh"].split("\n")
    pl = sources["pipeline.cuh"].split("\n")
    sd = sources["sddmm.cuh"].split("\n")
    parts = [
        section(si, "SPLAT_HOST_DEV int splat_seg_ival(", "#endif", "seg_interval.cuh"),
        section(cm, "typedef struct splat_ival {", "/* Fills iv[0..) with row i's intervals",
                "common.cuh"),
        section(cm, "SPLAT_DEV int splat_ival_clip(", "/* Value entry of gathered index g",
                "common.cuh"),
        section(pl, "/* The consumer side of a predicated run", "/* Gathers the query rows of a CTA",
                "pipeline.cuh"),
        section(sd, "#ifndef SPLAT_SDDMM_ROWSTORE", "/* The CTA of both R-SDDMM", "sddmm.cuh"),
    ]
    rows = "\n".join(section(sd, "#if SPLAT_SDDMM_ROWSTORE", "#if !defined(SPLAT_SDDMM_WG)",
                             "sddmm.cuh", after="/* The CTA of both R-SDDMM"))
    n = 0
    for fn in (r"SPLAT_DEV uint64_t splat_l2_evict_first_policy\(\) \{.*?\n\}\n",
               r"SPLAT_DEV void splat_st16_evict_first\(.*?\n\}\n"):
        rows, k = re.subn(fn, "", rows, flags=re.S)
        n += k
    if n != 2:
        sys.exit("sddmm_writeout.py: the L2-policy store helpers of sddmm.cuh not found")
    return "\n".join("\n".join(p) for p in parts) + "\n" + rows + "\n"


def build_and_run(tmp, name, code, flags, trials):
    d = os.path.join(tmp, re.sub(r"[^a-z0-9]+", "_", name.lower()))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "extracted.h"), "w") as f:
        f.write(code)
    exe = os.path.join(d, "model")
    cxx = os.environ.get("CXX", "c++")
    subprocess.run([cxx, "-std=c++17", "-O2", "-w", "-I", d] + flags + ["-o", exe, HARNESS],
                   check=True)
    r = subprocess.run([exe, str(trials), "1"], capture_output=True, text=True)
    return r.returncode, (r.stdout + r.stderr).strip().splitlines()


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    sources = {}
    for f in ("seg_interval.cuh", "common.cuh", "pipeline.cuh", "sddmm.cuh"):
        with open(os.path.join(KERNELS, f)) as fh:
            sources[f] = fh.read()
    code = extract(sources)
    if code.count(MUTANT[0]) != 1:
        sys.exit("sddmm_writeout.py: the mutation's line is not in splat_sddmm_prepare")
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in VARIANTS:
            rc, out = build_and_run(tmp, name, code, flags, trials)
            print(f"{name}: {out[-1] if out else '(no output)'}")
            if rc != 0:
                failed += 1
                print("\n".join(out[:10]))
        rc, out = build_and_run(tmp, "mutant", code.replace(*MUTANT), VARIANTS[0][1], 200)
        caught = rc != 0
        print(f"mutant (one column block too few staged): {'caught' if caught else 'NOT caught'}")
        failed += not caught
    print(f"{len(VARIANTS) + 1 - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
