#!/bin/bash
# bench/pending/s55-next.sh — v75 and v77 on a device (not run in stop 55: no device came), one
# call of ~6-8 minutes. A = the tree + s53-d128-pass1.patch (v75: head_dim 128's pass 1 of
# two-pass plans on 192-row tiles) + s55-d32-pvn.patch (v77: O = P V on head_dim rounded up to
# 16 columns, at least 32); O = the tree + v75 only (v77's base). First wgmma_check (v77's
# N = 32 .. 112 products read from 64-column V panels, against float64), then the float64
# checks (v75's strided | window at 16384 d128; head_dim 32 / 48 / 96 / 200 quick), v75's
# bench beside the same-nnz window, head_dim 32 / 96 / 200 A vs O (+ FlexAttention), then f16 and plan
# checks, v76's blocked d128 and B (s54-d128-pass2-unstaged.patch on A). Results land in $OUT
# as they come. Run from anywhere: bash bench/pending/s55-next.sh
cd "$(dirname "$0")/../.." || exit 1
w=${OUT:-/tmp/out-s55}; mkdir -p "$w" /tmp/lg
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
rm -rf /tmp/treeA /tmp/treeO && cp -r . /tmp/treeO && (cd /tmp/treeO && rm -rf build* && patch -p1 < bench/pending/s53-d128-pass1.patch >/dev/null) || exit 1
cp -r /tmp/treeO /tmp/treeA && (cd /tmp/treeA && patch -p1 < bench/pending/s55-d32-pvn.patch >/dev/null) || exit 1
(cd /tmp/treeA && nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -Ikernels -o /tmp/wgmma_check tests/gpu/wgmma_check.cu && /tmp/wgmma_check) >"$w/wgmma_check.txt" 2>&1; echo "wgmma_check rc $? $(tail -1 "$w/wgmma_check.txt")"; grep -i "fail\|on 32\|on 48" "$w/wgmma_check.txt" | head -12
t0=$(date +%s)
(cmake -S /tmp/treeO -B /tmp/bO -DCMAKE_BUILD_TYPE=Release >/tmp/lg/buildO.log 2>&1 && cmake --build /tmp/bO -j 6 --target splat >>/tmp/lg/buildO.log 2>&1; echo "build O rc $?" >>/tmp/lg/buildO.log) &
cmake -S /tmp/treeA -B /tmp/bA -DCMAKE_BUILD_TYPE=Release >/tmp/lg/buildA.log 2>&1 && cmake --build /tmp/bA -j 12 --target splat splat_gpu_check >>/tmp/lg/buildA.log 2>&1 || { tail -20 /tmp/lg/buildA.log; exit 1; }
echo "build A $(( $(date +%s) - t0 )) s"; nvidia-smi --query-gpu=name --format=csv,noheader
export SPLAT_CACHE_DIR=/tmp/bA/kcache PYTHONPATH=python SPLAT_LIBRARY=/tmp/bA/libsplat.so
SPLAT_LOG_LEVEL=info timeout 90 /tmp/bA/tests/splat_gpu_check --attention-plans --filter "strided(64)" --dims 128 --dtype bf16 --plans-seq 16384 >"$w/check-v75.txt" 2>/tmp/lg/check-v75.log; echo "v75 check: strided(64) | window(64) d128 16384 rc $? $(tail -1 "$w/check-v75.txt")"
grep -o "pass [12] on 192-row query tiles" /tmp/lg/check-v75.log | sort | uniq -c
timeout 120 /tmp/bA/tests/splat_gpu_check --quick --dims 32,48,96,200 --dtype bf16 >"$w/check-d32-quick-bf16.txt" 2>&1; echo "d32/48/96/200 quick bf16 rc $? $(tail -1 "$w/check-d32-quick-bf16.txt")"
timeout 100 python3 bench/bench_fused.py --peers splat,splat-wg2 --specs "strided(64) | window(64)" --seqs 65536 --head-dims 128 --rep 20 --warmup 2 --json "$w/v75.jsonl" >"$w/v75.txt" 2>/tmp/lg/v75.log; echo "bench v75 rc $?"
summ "$w/v75.jsonl"; grep "same nnz" "$w/v75.txt"
D32="window(256);blocked(512)"
timeout 80 python3 bench/bench_fused.py --peers splat,flex --no-same-nnz --specs "$D32" --seqs 16384 --head-dims 32,96,200 --rep 20 --warmup 2 --json "$w/d32-A.jsonl" >"$w/d32-A.txt" 2>/tmp/lg/d32A.log; echo "bench d32 A rc $?"
wait; tail -1 /tmp/lg/buildO.log
SPLAT_CACHE_DIR=/tmp/bO/kcache SPLAT_LIBRARY=/tmp/bO/libsplat.so timeout 40 python3 bench/bench_fused.py --peers splat --no-same-nnz --specs "$D32" --seqs 16384 --head-dims 32,96,200 --rep 20 --warmup 2 --json "$w/d32-O.jsonl" >"$w/d32-O.txt" 2>/tmp/lg/d32O.log; echo "bench d32 base rc $?"
python3 - "$w/d32-A.jsonl" "$w/d32-O.jsonl" <<'PY'
import json, sys
a = {(c['spec'], c['seq'], c['head_dim']): c for c in map(json.loads, open(sys.argv[1]))}
try: o = {(c['spec'], c['seq'], c['head_dim']): c for c in map(json.loads, open(sys.argv[2]))}
except OSError: o = {}
for k, c in a.items():
  b = o.get(k, {}).get('splat_ms')
  print(f"{k[0]:24s} {k[1]:6d} d{k[2]:<3d} A {c['splat_ms']:.4f} base {b or 0:.4f} base/A {(b or 0)/c['splat_ms']:.3f} flex/A {(c.get('flex_ms') or 0)/c['splat_ms']:.3f}")
PY
timeout 45 /tmp/bA/tests/splat_gpu_check --quick --dims 32,96 --dtype f16 >"$w/check-d32-quick-f16.txt" 2>&1; echo "d32/96 quick f16 rc $? $(tail -1 "$w/check-d32-quick-f16.txt")"
timeout 60 /tmp/bA/tests/splat_gpu_check --attention-plans --dims 32,96 --dtype bf16 >"$w/check-d32-plans.txt" 2>&1; echo "d32/96 plans bf16 rc $? $(tail -1 "$w/check-d32-plans.txt")"
grep -h FAIL "$w"/check-*.txt | head -5
timeout 100 python3 bench/bench_fused.py --peers splat,splat-wg2 --no-same-nnz --specs "blocked(896);blocked(1024);blocked(640)" --seqs 16384,65536 --head-dims 128 --rep 20 --warmup 2 --json "$w/v76.jsonl" >"$w/v76.txt" 2>/tmp/lg/v76.log; echo "bench v76 rc $?"
summ "$w/v76.jsonl"
echo "== B: v75 + s54-d128-pass2-unstaged.patch (pass 2 on 192 rows at head_dim 128, unstaged)"
cp -r /tmp/treeA /tmp/treeB && (cd /tmp/treeB && rm -rf build* && patch -p1 < bench/pending/s54-d128-pass2-unstaged.patch >/dev/null) || exit 1
cmake -S /tmp/treeB -B /tmp/bB -DCMAKE_BUILD_TYPE=Release >/tmp/lg/buildB.log 2>&1 && cmake --build /tmp/bB -j 16 --target splat splat_gpu_check >>/tmp/lg/buildB.log 2>&1 || exit 1
export SPLAT_CACHE_DIR=/tmp/bB/kcache SPLAT_LIBRARY=/tmp/bB/libsplat.so
SPLAT_LOG_LEVEL=info timeout 120 /tmp/bB/tests/splat_gpu_check --attention-plans --filter "strided(8)" --dims 128 --dtype bf16 --plans-seq 16384 >"$w/check-B.txt" 2>/tmp/lg/check-B.log; echo "B: strided(8) | window(8) d128 16384 rc $? $(tail -1 "$w/check-B.txt")"
grep -o "pass [12] on 192-row query tiles" /tmp/lg/check-B.log | sort | uniq -c
timeout 60 python3 bench/bench_fused.py --peers splat,splat-wg2 --no-same-nnz --specs "strided(64) | window(64)" --seqs 65536 --head-dims 128 --rep 20 --warmup 2 --json "$w/abB.jsonl" >"$w/abB.txt" 2>/tmp/lg/abB.log; echo "bench B rc $?"
summ "$w/abB.jsonl"
(cd /tmp/lg && tar czf "$w/s55-logs.tgz" *.log)
