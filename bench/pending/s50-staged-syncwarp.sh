#!/bin/bash
# stop 50: the device check and A/B for bench/pending/s50-staged-syncwarp.patch (bench/NOTES.md
# v69: pass 2's staged copies behind the warp's barrier where the kernel has one or two
# consumer warpgroups), which no device ran in stop 50. Copy it to ab/ and run
# `bash ab/s50-staged-syncwarp.sh` through the device tool with carry ["ab"]: it builds main
# (o) and main with the patch (n), runs the strided attention plans' checks and racecheck on
# n, then bench/bench_fused.py (splat only) on both, alternating, and prints new / old.
set -u
cd "$(dirname "$0")/.." || exit 1
root=$PWD
out=${OUT:-/tmp/out}; mkdir -p "$out"; w=/tmp/w-s50; rm -rf "$w"; mkdir -p "$w"
for t in o n; do
  rm -rf "/tmp/s50-$t" && mkdir -p "/tmp/s50-$t"
  # shellcheck disable=SC2046,SC2010
  cp -r $(ls -A | grep -v -e '^build' -e '^ab$' -e '^\.git$') "/tmp/s50-$t/"
  if [ $t = n ]; then
    (cd "/tmp/s50-$t" && patch -p1 -s <"$root/bench/pending/s50-staged-syncwarp.patch") || { echo "the patch does not apply"; exit 1; }
  fi
  (cd "/tmp/s50-$t" && cmake -S . -B b -DCMAKE_BUILD_TYPE=Release -DSPLAT_BUILD_BENCH=ON >"$w/build-$t.log" 2>&1 &&
    cmake --build b -j 8 >>"$w/build-$t.log" 2>&1) &
done
wait
for t in o n; do [ -f "/tmp/s50-$t/b/libsplat.so" ] || { echo "build $t failed"; tail -20 "$w/build-$t.log"; exit 1; }; done
nvidia-smi --query-gpu=name --format=csv,noheader
B=/tmp/s50-n/b
export SPLAT_CACHE_DIR=/tmp/s50-n/kcache
timeout 120 $B/tests/splat_gpu_check --attention-plans --filter strided --dims 64,128 --dtype bf16 >"$w/check_bf16.txt" 2>&1; echo "strided bf16 rc $?"; tail -1 "$w/check_bf16.txt"
timeout 60 $B/tests/splat_gpu_check --attention-plans --filter strided --dims 64 --dtype f16 >"$w/check_f16.txt" 2>&1; echo "strided f16 rc $?"; tail -1 "$w/check_f16.txt"
# Two consumer warpgroups in pass 2 (the staged path the patch changes; at 4096 the plans'
# pass 2 takes one): forced.
SPLAT_ATTN_WARPGROUPS=2 timeout 120 $B/tests/splat_gpu_check --attention-plans --filter strided --dims 64,128 --dtype bf16 >"$w/check_wg2.txt" 2>&1; echo "strided bf16, two warpgroups rc $?"; tail -1 "$w/check_wg2.txt"
for wg in 1 2; do
  SPLAT_ATTN_WARPGROUPS=$wg timeout 150 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 3 $B/tests/splat_gpu_check --quick --filter strided --dims 64 --dtype bf16 >"$w/racecheck-wg$wg.txt" 2>&1
  echo "racecheck (quick strided, $wg warpgroup(s)) rc $? (3: hazards)"; grep -E "RACECHECK SUMMARY|passed" "$w/racecheck-wg$wg.txt" | tail -2
done
SPECS="strided(64) | window(64);window(95);window(192)"
for r in 1 2; do for t in o n; do
  (cd "/tmp/s50-$t" && SPLAT_CACHE_DIR="/tmp/s50-$t/kcache" SPLAT_LIBRARY=b/libsplat.so PYTHONPATH=python timeout 150 python3 bench/bench_fused.py --peers splat --no-same-nnz --specs "$SPECS" --seqs 4096,16384 --head-dims 64,128 --json "$w/bench-$t-$r.jsonl" >"$w/bench-$t-$r.txt" 2>&1; echo "[$t] round $r rc $?")
done; done
python3 - "$w" <<'PY'
import glob, json, sys
w = sys.argv[1]
def load(t):
    d = {}
    for f in sorted(glob.glob(f"{w}/bench-{t}-*.jsonl")):
        for line in open(f):
            c = json.loads(line)
            if c.get("splat_ms"):
                d.setdefault((c["spec"], c["seq"], c["head_dim"]), []).append(c["splat_ms"])
    return d
o, n = load("o"), load("n")
for k in o:
    if k in n:
        print(f"{str(k):44} old {'/'.join(f'{x:.4f}' for x in o[k])}  new {'/'.join(f'{x:.4f}' for x in n[k])}  new/old {min(n[k]) / min(o[k]):.3f}")
PY
(cd "$w" && tar czf "$out/all.tgz" .)
