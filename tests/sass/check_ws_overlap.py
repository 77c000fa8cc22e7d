#!/usr/bin/env python3
"""tests/sass/check_ws_overlap.py — checks in the SASS of the warp-specialised attention
kernel (kernels/attention_ws.cuh) that its steady loop keeps the pending P V product in
flight over the softmax: after the wait for S (`WARPGROUP.DEPBAR.LE gsb0, 0x1`) come the
scores' exponentials (`MUFU.EX2`, one per score register of the thread: KT / 2), and only
then the wait for the P V (`... gsb0, 0x0`). ptxas is free to hoist that wait to the top
of the softmax's basic block, and did (bench/NOTES.md, v4.8): nothing else would notice,
the results stay exact. Also that the passes of a two-pass plan carry their programmatic
dependent launch (bench/NOTES.md v10.1): pass 1 lets pass 2 start (`PREEXIT`, from
griddepcontrol.launch_dependents), pass 2 waits for pass 1's results (`ACQBULK`, from
griddepcontrol.wait), the other kernels have neither (a kernel that waited without the
host's dependent launch would only cost a no-op; one that read pass 1's rows without it
would race).

Needs no GPU: `splat codegen` generates and compiles the module (NVRTC), ptxas turns its
PTX into a CUBIN, nvdisasm prints the SASS.

usage: check_ws_overlap.py SPLAT_BINARY [--nvdisasm PATH]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile

WINDOW, TWO_PASS = "window(256)", "strided(64) | window(64)"
# (what, environment, spec, head_dim, keys per sub-tile, the kernel's name ends in)
CONFIGS = [
    # Two consumer warpgroups on a window.
    ("d64, 128-key sub-tiles (the default)", {}, WINDOW, 64, 128, "_seg1"),
    ("d64, 64-key sub-tiles", {"SPLAT_ATTN_KT": "64"}, WINDOW, 64, 64, "_seg1"),
    ("d128", {}, WINDOW, 128, 64, "_seg1"),
    ("d64, one consumer warpgroup", {"SPLAT_ATTN_WARPGROUPS": "1"}, WINDOW, 64, 64, "_seg1"),
    # Head_dim 96 as 128 columns (two consumer warpgroups), 192 (two),
    # 256 (one, no register split).
    ("d96", {}, WINDOW, 96, 64, "_seg1"),
    ("d192", {}, WINDOW, 192, 64, "_seg1"),
    ("d256", {}, WINDOW, 256, 64, "_seg1"),
    # The other epilogues (kernels/params.cuh SPLAT_EPI_*): split tiles' chunks, asked for
    # by a split, and the passes of a two-pass plan, whose second merges the first's rows.
    ("d64, the _split kernel", {"SPLAT_ATTN_SPLIT": "2"}, WINDOW, 64, 128, "_split"),
    ("d128, the _split kernel", {"SPLAT_ATTN_SPLIT": "2"}, WINDOW, 128, 64, "_split"),
    # The window's pass first; then strided(64)'s 64-row phase classes at 4096: one
    # consumer warpgroup, 64-key sub-tiles.
    ("d64, the _pass1 kernel", {}, TWO_PASS, 64, 128, "_pass1"),
    ("d64, the _pass2 kernel", {}, TWO_PASS, 64, 64, "_pass2"),
    ("d128, the _pass2 kernel", {}, TWO_PASS, 128, 64, "_pass2"),
]


def find_nvdisasm(given):
    if given:
        return given
    found = shutil.which("nvdisasm")
    if found:
        return found
    # The pip wheel nvidia-cuda-nvdisasm puts it under site-packages/nvidia/cu*/bin.
    for root in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path}:
        for path in glob.glob(os.path.join(root or ".", "nvidia", "*", "bin", "nvdisasm")):
            return path
    sys.exit("check_ws_overlap: nvdisasm not found (pip install nvidia-cuda-nvdisasm)")


def ws_sass(splat, nvdisasm, env_extra, spec, head_dim, suffix, work):
    """The SASS lines of the warp-specialised tile kernel, named ...suffix, of spec's
    attention."""
    dump, cache = os.path.join(work, "dump"), os.path.join(work, "cache")
    shutil.rmtree(dump, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, SPLAT_DUMP_DIR=dump, SPLAT_CACHE_DIR=cache, **env_extra)
    subprocess.run([splat, "codegen", spec, "--seq", "4096", "--head-dim", str(head_dim),
                    "--dtype", "bf16", "--arch", "sm_90a", "--op", "attention"],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    # The tile program asked for (the row, merge and other pass's kernels are programs of
    # their own); a dump is named program-hash.ptx.
    ptx = glob.glob(os.path.join(dump, f"splat_attn_ws_*{suffix}-*.ptx"))
    if len(ptx) != 1:
        sys.exit(f"check_ws_overlap: expected one dumped PTX of a *{suffix} tile program, "
                 f"found {ptx}")
    cubin = os.path.join(work, "module.cubin")
    subprocess.run(["ptxas", "-arch=sm_90a", "-O3", ptx[0], "-o", cubin], check=True)
    text = subprocess.run([nvdisasm, "-c", cubin], check=True, capture_output=True,
                          text=True).stdout
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith(".text."):
            inside = line.startswith(".text.splat_attn_ws_")
        elif inside:
            m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(.*?)\s*;", line)
            if m:
                lines.append(m.group(1))
    if not lines:
        sys.exit("check_ws_overlap: no splat_attn_ws_ kernel in the module")
    return lines


def exponentials_under_pv(lines):
    """For each wait for S with one group left in flight (the steady loop's), the number
    of MUFU.EX2 before the next wait for everything."""
    counts = []
    for i, ins in enumerate(lines):
        if re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x1$", ins):
            n = 0
            for later in lines[i + 1:]:
                if re.search(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x0$", later):
                    break
                n += "MUFU.EX2" in later
            counts.append(n)
    return counts


def dependent_launch(lines):
    """(whether the kernel lets dependents start, whether it waits for its prerequisite)."""
    pred = r"(@!?U?P\w+\s+)?"
    return (any(re.match(pred + r"PREEXIT\b", ins) for ins in lines),
            any(re.match(pred + r"ACQBULK\b", ins) for ins in lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("splat", help="the splat command-line tool (build/splat)")
    ap.add_argument("--nvdisasm", help="nvdisasm to use (default: PATH, then the pip wheel)")
    args = ap.parse_args()
    nvdisasm = find_nvdisasm(args.nvdisasm)
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        for what, env, spec, head_dim, kt, suffix in CONFIGS:
            lines = ws_sass(args.splat, nvdisasm, env, spec, head_dim, suffix, work)
            counts = exponentials_under_pv(lines)
            launch = dependent_launch(lines)
            want = (suffix == "_pass1", suffix == "_pass2")
            ok = len(counts) >= 1 and all(c >= kt // 2 for c in counts) and launch == want
            failed += not ok
            print(f"{what:<40} exponentials between the S wait and the P V wait: {counts} "
                  f"(need >= {kt // 2} each); PREEXIT, ACQBULK: {launch} (need {want}) "
                  f"{'ok' if ok else 'FAIL'}")
    print(f"{len(CONFIGS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
