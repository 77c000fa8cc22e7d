#!/bin/bash
# bench/pending/s53-d128-pass1.sh — v75 on a device (not run in stop 53: no device time left): applies s53-d128-pass1.patch (head_dim 128 pass 1 of two-pass plans on 192-row tiles, bf16, from 16 rounds) to a copy of the tree, checks strided(64) | window(64) at 16384 d128 against the float64 reference, then times it against 128-row passes (wg2) beside the same-nnz windows. Run from the repository root: bash bench/pending/s53-d128-pass1.sh (writes a tarball under $OUT).
cd "$(dirname "$0")/../.." || exit 1
w=/tmp/w-s53d; rm -rf $w /tmp/tree-v75; mkdir -p $w /tmp/s53-a
cp -r . /tmp/tree-v75 && (cd /tmp/tree-v75 && rm -rf build* && patch -p1 < bench/pending/s53-d128-pass1.patch) || exit 1
cd /tmp/tree-v75
cmake -S . -B /tmp/s53-a -DCMAKE_BUILD_TYPE=Release -DSPLAT_BUILD_BENCH=ON >$w/build.log 2>&1 && cmake --build /tmp/s53-a -j 16 >>$w/build.log 2>&1 || { tail -20 $w/build.log; exit 1; }
nvidia-smi --query-gpu=name --format=csv,noheader
export SPLAT_CACHE_DIR=/tmp/s53-a/kcache
SPLAT_LOG_LEVEL=info timeout 60 /tmp/s53-a/tests/splat_gpu_check --attention-plans --filter "strided(64)" --dims 128 --dtype bf16 --plans-seq 16384 >$w/check-d128.txt 2>$w/check-d128.log; echo "plans strided(64)|window(64) d128 16384 rc $?"; tail -1 $w/check-d128.txt
grep -o "pass [12] on 192-row query tiles" $w/check-d128.log | sort | uniq -c
export PYTHONPATH=python SPLAT_LIBRARY=/tmp/s53-a/libsplat.so
timeout 100 python3 bench/bench_fused.py --peers splat,splat-wg2 --specs "strided(64) | window(64)" --seqs 16384,65536 --head-dims 128 --rep 30 --warmup 2 --json $w/ab.jsonl >$w/ab.txt 2>$w/ab.log; echo "bench rc $?"
python3 - $w/ab.jsonl <<'PY'
import json, sys
for line in open(sys.argv[1]):
    c = json.loads(line)
    ms = {k[:-3]: v for k, v in c.items() if k.endswith("_ms") and v and not k.startswith(("splat_plan", "flex_mask"))}
    s = ms.get("splat")
    print(f"{c['spec']:26s} {c['seq']:6d} d{c['head_dim']:<4d}", " ".join(f"{k} {v:.4f} ({v/s:.3f})" for k, v in ms.items()))
PY
grep "same nnz" $w/ab.txt
(cd $w && tar czf "$OUT/s53d.tgz" *.txt *.jsonl *.log)
