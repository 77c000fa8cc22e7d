#!/bin/bash
# bench/pending/s53-d128-pass1.sh — v75 on a device (not run in stops 53 and 54: no device came).
# A = the tree + s53-d128-pass1.patch (head_dim 128's pass 1 of two-pass plans on 192-row tiles,
# bf16, from 16 rounds; with its test changes): checks strided(64) | window(64) at 16384 d128
# against the float64 reference and times it against 128-row passes (splat-wg2) beside the
# same-nnz windows at 16384 / 65536. B = A + s54-d128-pass2-unstaged.patch (pass 2 on 192 rows
# too, its rows not staged): checks strided(8) | window(8) at 16384 d128 (both passes on 192
# rows) and times the union at 65536. Results land in $OUT as they come (the device call's
# files). Run from the repository root: bash bench/pending/s53-d128-pass1.sh
cd "$(dirname "$0")/../.." || exit 1
w=${OUT:-/tmp/out-v75}; mkdir -p "$w" /tmp/lg
summ() { python3 - "$@" <<'PY'
import json, sys
for f in sys.argv[1:]:
  for line in open(f):
    c = json.loads(line)
    ms = {k[:-3]: v for k, v in c.items() if k.endswith("_ms") and v and not k.startswith(("splat_plan", "flex_mask"))}
    s = ms.get("splat")
    print(f"{c['spec']:26s} {c['seq']:6d} d{c['head_dim']:<4d}", " ".join(f"{k} {v:.4f} ({v/s:.3f})" for k, v in ms.items()))
PY
}
rm -rf /tmp/treeA /tmp/treeB && cp -r . /tmp/treeA && (cd /tmp/treeA && rm -rf build* && patch -p1 < bench/pending/s53-d128-pass1.patch >/dev/null) || exit 1
cp -r /tmp/treeA /tmp/treeB && (cd /tmp/treeB && patch -p1 < bench/pending/s54-d128-pass2-unstaged.patch >/dev/null) || exit 1
t0=$(date +%s)
cmake -S /tmp/treeA -B /tmp/bA -DCMAKE_BUILD_TYPE=Release >/tmp/lg/buildA.log 2>&1 && cmake --build /tmp/bA -j 16 --target splat splat_gpu_check >>/tmp/lg/buildA.log 2>&1 || { tail -20 /tmp/lg/buildA.log; exit 1; }
echo "build A $(( $(date +%s) - t0 )) s"; nvidia-smi --query-gpu=name --format=csv,noheader
(cmake -S /tmp/treeB -B /tmp/bB -DCMAKE_BUILD_TYPE=Release >/tmp/lg/buildB.log 2>&1 && cmake --build /tmp/bB -j 4 --target splat splat_gpu_check >>/tmp/lg/buildB.log 2>&1; echo "build B rc $?" >>/tmp/lg/buildB.log) &
export SPLAT_CACHE_DIR=/tmp/bA/kcache PYTHONPATH=python SPLAT_LIBRARY=/tmp/bA/libsplat.so
SPLAT_LOG_LEVEL=info timeout 90 /tmp/bA/tests/splat_gpu_check --attention-plans --filter "strided(64)" --dims 128 --dtype bf16 --plans-seq 16384 >/tmp/lg/check-A.txt 2>/tmp/lg/check-A.log; echo "A: strided(64) | window(64) d128 16384 rc $? $(tail -1 /tmp/lg/check-A.txt)"
grep -o "pass [12] on 192-row query tiles" /tmp/lg/check-A.log | sort | uniq -c
cp /tmp/lg/check-A.txt "$w/"
timeout 150 python3 bench/bench_fused.py --peers splat,splat-wg2 --specs "strided(64) | window(64)" --seqs 16384,65536 --head-dims 128 --rep 20 --warmup 2 --json "$w/abA.jsonl" >"$w/abA.txt" 2>/tmp/lg/abA.log; echo "bench A rc $?"
summ "$w/abA.jsonl"; grep "same nnz" "$w/abA.txt"
wait; tail -1 /tmp/lg/buildB.log
export SPLAT_CACHE_DIR=/tmp/bB/kcache SPLAT_LIBRARY=/tmp/bB/libsplat.so
SPLAT_LOG_LEVEL=info timeout 120 /tmp/bB/tests/splat_gpu_check --attention-plans --filter "strided(8)" --dims 128 --dtype bf16 --plans-seq 16384 >/tmp/lg/check-B.txt 2>/tmp/lg/check-B.log; echo "B: strided(8) | window(8) d128 16384 rc $? $(tail -1 /tmp/lg/check-B.txt)"
grep -o "pass [12] on 192-row query tiles" /tmp/lg/check-B.log | sort | uniq -c
cp /tmp/lg/check-B.txt "$w/"
timeout 60 python3 bench/bench_fused.py --peers splat,splat-wg2 --no-same-nnz --specs "strided(64) | window(64)" --seqs 65536 --head-dims 128 --rep 20 --warmup 2 --json "$w/abB.jsonl" >"$w/abB.txt" 2>/tmp/lg/abB.log; echo "bench B rc $?"
summ "$w/abB.jsonl"
(cd /tmp/lg && tar czf "$w/v75-logs.tgz" *.txt *.log)
