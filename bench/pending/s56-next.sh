#!/bin/bash
# bench/pending/s56-next.sh — the pending kernel changes on a device in one call (~7 min):
# A = the tree + s53-d128-pass1.patch (v75: head_dim 128's pass 1 of two-pass plans on 192-row
# tiles) + s55-d32-pvn.patch (v77: O = P V on head_dim rounded up to 16 columns, at least 32);
# H = the tree. v75 touches only head_dim 128's two-pass plans and v77 only head_dim off 64 /
# 128 columns, so A vs H times each on its own cases. Order: wgmma_check (v77's N = 32 .. 112
# products against float64), the float64 checks of A and of H (stop 54's host code has not run
# on a GPU), A vs H (+ FlexAttention), v76's blocked
# d128 on H, item 3's strided / dilated alone on H. Results land in $OUT as they come.
# Run from anywhere: bash bench/pending/s56-next.sh [short]
cd "$(dirname "$0")/../.." || exit 1
w=${OUT:-/tmp/out-s56}; mkdir -p "$w" /tmp/lg
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
ab() { python3 - "$@" <<'PY'
import json, sys
key = lambda c: (c['spec'], c['seq'], c['head_dim'])
a = {key(c): c for c in map(json.loads, open(sys.argv[1]))}
try: h = {key(c): c for c in map(json.loads, open(sys.argv[2]))}
except OSError: h = {}
for k, c in a.items():
  b = h.get(k, {}).get('splat_ms') or 0
  print(f"{k[0]:26s} {k[1]:6d} d{k[2]:<3d} A {c['splat_ms']:.4f} H {b:.4f} H/A {b/c['splat_ms']:.3f} flex/A {(c.get('flex_ms') or 0)/c['splat_ms']:.3f}")
PY
}
rm -rf /tmp/treeA /tmp/treeH && cp -r . /tmp/treeH && rm -rf /tmp/treeH/build* && cp -r /tmp/treeH /tmp/treeA || exit 1
(cd /tmp/treeA && patch -p1 < bench/pending/s53-d128-pass1.patch >/dev/null && patch -p1 < bench/pending/s55-d32-pvn.patch >/dev/null) || exit 1
for t in H A; do (cmake -S /tmp/tree$t -B /tmp/b$t -DCMAKE_BUILD_TYPE=Release >/tmp/lg/build$t.log 2>&1 && cmake --build /tmp/b$t -j 8 --target splat splat_gpu_check >>/tmp/lg/build$t.log 2>&1; echo "build $t rc $?" >>/tmp/lg/build$t.log) & done
(cd /tmp/treeA && nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -Ikernels -o /tmp/wgmma_check tests/gpu/wgmma_check.cu && /tmp/wgmma_check) >"$w/wgmma_check.txt" 2>&1; echo "wgmma_check rc $? $(tail -1 "$w/wgmma_check.txt")"; grep -i "fail" "$w/wgmma_check.txt" | head -8
wait; tail -qn1 /tmp/lg/buildH.log /tmp/lg/buildA.log; nvidia-smi --query-gpu=name --format=csv,noheader
export PYTHONPATH=python
runA() { SPLAT_CACHE_DIR=/tmp/bA/kcache SPLAT_LIBRARY=/tmp/bA/libsplat.so "$@"; }
runH() { SPLAT_CACHE_DIR=/tmp/bH/kcache SPLAT_LIBRARY=/tmp/bH/libsplat.so "$@"; }
runH timeout 80 /tmp/bH/tests/splat_gpu_check --quick --dims 64,128 --dtype bf16 >"$w/check-H-quick.txt" 2>&1; echo "H (the tree) quick d64/128 bf16 rc $? $(tail -1 "$w/check-H-quick.txt")"
runA timeout 80 /tmp/bA/tests/splat_gpu_check --quick --dims 32,48,96,200 --dtype bf16 >"$w/check-A-quick-bf16.txt" 2>&1; echo "A quick d32/48/96/200 bf16 rc $? $(tail -1 "$w/check-A-quick-bf16.txt")"
[ "$1" = short ] && exit 0 # a short device window: wgmma_check and the float64 checks only
B="--rep 20 --warmup 2"
runA timeout 60 python3 bench/bench_fused.py --peers splat,flex --no-same-nnz --specs "window(256);blocked(512)" --seqs 16384 --head-dims 32,96,200 $B --json "$w/v77-A.jsonl" >"$w/v77-A.txt" 2>/tmp/lg/v77A.log; echo "bench v77 A rc $?"
runH timeout 35 python3 bench/bench_fused.py --peers splat --no-same-nnz --specs "window(256);blocked(512)" --seqs 16384 --head-dims 32,96,200 $B --json "$w/v77-H.jsonl" >"$w/v77-H.txt" 2>/tmp/lg/v77H.log; echo "bench v77 H rc $?"
ab "$w/v77-A.jsonl" "$w/v77-H.jsonl"
SPLAT_LOG_LEVEL=info runA timeout 60 /tmp/bA/tests/splat_gpu_check --attention-plans --filter "strided(64)" --dims 128 --dtype bf16 --plans-seq 16384 >"$w/check-A-v75.txt" 2>/tmp/lg/check-v75.log; echo "A strided(64) | window(64) d128 16384 rc $? $(tail -1 "$w/check-A-v75.txt")"
grep -o "pass [12] on 192-row query tiles" /tmp/lg/check-v75.log | sort | uniq -c
runA timeout 80 python3 bench/bench_fused.py --peers splat --specs "strided(64) | window(64)" --seqs 16384,65536 --head-dims 128 $B --json "$w/v75-A.jsonl" >"$w/v75-A.txt" 2>/tmp/lg/v75A.log; echo "bench v75 A rc $?"
runH timeout 35 python3 bench/bench_fused.py --peers splat --no-same-nnz --specs "strided(64) | window(64)" --seqs 16384,65536 --head-dims 128 $B --json "$w/v75-H.jsonl" >"$w/v75-H.txt" 2>/tmp/lg/v75H.log; echo "bench v75 H rc $?"
ab "$w/v75-A.jsonl" "$w/v75-H.jsonl"; grep "same nnz" "$w/v75-A.txt"
runA timeout 45 /tmp/bA/tests/splat_gpu_check --quick --dims 32,96 --dtype f16 >"$w/check-A-quick-f16.txt" 2>&1; echo "A quick d32/96 f16 rc $? $(tail -1 "$w/check-A-quick-f16.txt")"
runA timeout 60 /tmp/bA/tests/splat_gpu_check --attention-plans --dims 32,96 --dtype bf16 >"$w/check-A-plans.txt" 2>&1; echo "A plans d32/96 bf16 rc $? $(tail -1 "$w/check-A-plans.txt")"
runH timeout 60 /tmp/bH/tests/splat_gpu_check --attention-plans --filter "blocked" --dims 128 --dtype bf16 >"$w/check-H-blocked.txt" 2>&1; echo "H plans blocked d128 rc $? $(tail -1 "$w/check-H-blocked.txt")"
grep -h FAIL "$w"/check-*.txt | head -5
runH timeout 80 python3 bench/bench_fused.py --peers splat,splat-wg2 --no-same-nnz --specs "blocked(896);blocked(1024);blocked(640)" --seqs 16384,65536 --head-dims 128 $B --json "$w/v76.jsonl" >"$w/v76.txt" 2>/tmp/lg/v76.log; echo "bench v76 rc $?"
summ "$w/v76.jsonl"
runH timeout 150 python3 bench/bench_fused.py --peers splat --specs "strided(64);dilated(128,4)" --seqs 4096,16384,65536 --head-dims 64,128 $B --time-budget-s 120 --json "$w/item3-alone.jsonl" >"$w/item3-alone.txt" 2>/tmp/lg/item3.log; echo "bench item 3 alone rc $?"
sed -n '/relative useful/,$p' "$w/item3-alone.txt"
(cd /tmp/lg && tar czf "$w/s56-logs.tgz" *.log)
