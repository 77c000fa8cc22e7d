#!/usr/bin/env python3
"""bench/sass_regions.py — where a kernel's warps spend their time, by region of its SASS:
reads the per-SASS-line table that `ncu --page source --csv --print-source sass` writes
(scripts/gpu-check profile leaves it as profile_sass.csv.gz) and prints, for each region of
consecutive lines, its warp-state samples (the time warps spent there, sampled), their share,
the instructions executed and the leading stall reasons.

A region starts at each line whose SASS matches one of the cut patterns: by default the
warp-specialised attention kernel's landmarks (USETMAXREG: the producer's and consumers'
code; WARPGROUP.DEPBAR: a wait for the tensor cores; SYNCS.PHASECHK: an mbarrier wait;
BAR.SYNC: a named barrier; EXIT), or at the given line numbers (the table's rows, 0-based,
as printed). Regions below --min-share percent of the samples are folded into the next line.

    python3 bench/sass_regions.py profile_sass.csv.gz
    python3 bench/sass_regions.py src.csv --lines 51,237,261,880,990,1254,1770,2148

Needs no GPU. bench/NOTES.md v67 has an example (window(64) at 16384, head_dim 64).
"""
import argparse
import csv
import gzip
import io
import re
import sys

LANDMARKS = [r"USETMAXREG", r"WARPGROUP\.DEPBAR", r"SYNCS\.PHASECHK", r"BAR\.SYNC", r"\bEXIT\b"]
SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(text):
    """A cell as an integer (ncu writes thousands separators; empty cells are 0)."""
    text = (text or "").replace(",", "").strip()
    try:
        return int(float(text))
    except ValueError:
        return 0


def kernels(path):
    """(kernel name, header, rows) for each kernel in the table."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        reader = csv.reader(io.StringIO(f.read()))
    name, header, rows, out = None, None, [], []
    for row in reader:
        if row and row[0] == "Kernel Name":
            if header:
                out.append((name, header, rows))
            name, header, rows = (row[1] if len(row) > 1 else "?"), None, []
        elif header is None and row and row[0] == "Address":
            header = row
        elif header is not None and row:
            rows.append(row)
    if header:
        out.append((name, header, rows))
    return out


def regions(rows, col, cuts, lines):
    """Start lines of the regions: line 0, the given lines, and the lines matching a cut."""
    starts = {0} | {n for n in lines if 0 <= n < len(rows)}
    if not lines:
        pattern = re.compile("|".join(cuts))
        starts |= {i for i, r in enumerate(rows) if pattern.search(r[col["Source"]])}
    return sorted(starts)


def summarise(name, header, rows, cuts, lines, min_share, top):
    col = {h: i for i, h in enumerate(header)}
    if SAMPLES not in col or EXECUTED not in col:
        print(f"{name}: no '{SAMPLES}' / '{EXECUTED}' columns (collect --section SourceCounters)")
        return
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    samples = [number(r[col[SAMPLES]]) for r in rows]
    total = sum(samples) or 1
    print(f"{name}: {sum(samples)} samples, "
          f"{sum(number(r[col[EXECUTED]]) for r in rows)} instructions executed (warp level)")
    print(f"  {'lines':>11} {'samples':>8} {'share':>6} {'instructions':>13}  "
          f"{'first line':<40} leading stalls")
    starts = regions(rows, col, cuts, lines) + [len(rows)]
    begin = 0
    for k in range(1, len(starts)):
        end = starts[k]
        s = sum(samples[begin:end])
        if 100.0 * s / total < min_share and end < len(rows):
            continue  # folded into the next region
        reasons = {}
        for r in rows[begin:end]:
            for h in stalls:
                v = number(r[col[h]])
                if v:
                    reasons[h[6:]] = reasons.get(h[6:], 0) + v
        lead = sorted(reasons.items(), key=lambda x: -x[1])[:top]
        first = " ".join(rows[begin][col["Source"]].split())[:40]
        print(f"  {begin:>5}-{end - 1:<5} {s:>8} {100.0 * s / total:5.1f}% "
              f"{sum(number(r[col[EXECUTED]]) for r in rows[begin:end]):>13}  {first:<40} "
              + ", ".join(f"{n} {v}" for n, v in lead))
        begin = end


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("table", help="ncu's per-SASS-line CSV (.csv or .csv.gz)")
    ap.add_argument("--cut", action="append", help="a regex of SASS that starts a region "
                    "(repeatable; default: the warp-specialised kernel's landmarks)")
    ap.add_argument("--lines", default="", help="comma-separated start lines instead of --cut")
    ap.add_argument("--kernel", help="only kernels whose name contains this")
    ap.add_argument("--min-share", type=float, default=1.0,
                    help="fold regions below this percent of the samples into the next")
    ap.add_argument("--top", type=int, default=3, help="stall reasons shown a region")
    args = ap.parse_args()
    lines = [int(x) for x in args.lines.split(",") if x.strip()]
    found = kernels(args.table)
    if not found:
        print(f"sass_regions: no kernel table in {args.table}")
        return 1
    for name, header, rows in found:
        if args.kernel and args.kernel not in name:
            continue
        summarise(name, header, rows, args.cut or LANDMARKS, lines, args.min_share, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
