#!/bin/bash
# stop 42: the first device call for v58's opt-in (SPLAT_ATTN_WARPGROUPS=3; bench/NOTES.md v58): its
# quick subsets, racecheck, the default's quick subset, then the A/B against the default. Copy
# it to ab/ and run `bash ab/s42c.sh` through the device tool with carry ["ab"].
set -u
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release >/dev/null && cmake --build build-gpu -j 16 --target splat splat_gpu_check >/dev/null || { echo build failed; exit 1; }
export SPLAT_LIBRARY=$PWD/build-gpu/libsplat.so PYTHONPATH=$PWD/python SPLAT_CACHE_DIR=/tmp/kc
nvidia-smi --query-gpu=name --format=csv,noheader
chk() { echo "== $*"; env "$@" 2>&1 | grep -E "FAIL|passed" | head -5; }
chk SPLAT_ATTN_WARPGROUPS=3 timeout 60 ./build-gpu/tests/splat_gpu_check --quick --dims 32,64
chk SPLAT_ATTN_WARPGROUPS=3 timeout 30 ./build-gpu/tests/splat_gpu_check --quick --dims 48,64 --dtype f16
chk SPLAT_ATTN_WARPGROUPS=3 SPLAT_ATTN_TMA=0 timeout 20 ./build-gpu/tests/splat_gpu_check --quick --dims 64 --filter window
chk timeout 30 ./build-gpu/tests/splat_gpu_check --quick --dims 64
echo "== racecheck, three warpgroups, --quick --dims 64 --filter window"
SPLAT_ATTN_WARPGROUPS=3 timeout 90 compute-sanitizer --tool racecheck --error-exitcode 3 \
  ./build-gpu/tests/splat_gpu_check --quick --dims 64 --filter window 2>&1 | tail -3
S="window(256);causal & window(512,0);dilated(256,2);blocked(512)"
python3 bench/bench_fused.py --seqs 4096,16384 --head-dims 64 --specs "$S" --no-same-nnz --peers splat,flex --json $OUT/A.jsonl > /tmp/A.txt 2>&1 || echo "A failed"
SPLAT_ATTN_WARPGROUPS=3 python3 bench/bench_fused.py --seqs 4096,16384 --head-dims 64 --specs "$S" --no-same-nnz --peers splat --json $OUT/W.jsonl > /tmp/W.txt 2>&1 || { echo "W failed"; tail -5 /tmp/W.txt; }
python3 - $OUT <<'PY'
import json,sys,collections
out=sys.argv[1]; ms=collections.defaultdict(dict); flex={}
for v in "AW":
    for l in open(f"{out}/{v}.jsonl"):
        j=json.loads(l); k=(j["spec"],j["seq"],j["head_dim"])
        if j.get("splat_ms"): ms[k][v]=j["splat_ms"]
        if j.get("flex_ms"): flex[k]=j["flex_ms"]
print("%-26s %6s %3s %8s %8s %7s %7s %7s"%("spec","seq","d","A ms","W ms","A/W","flex/A","flex/W"))
for k,p in ms.items():
    a=p.get("A",float('nan')); w=p.get("W",float('nan')); fl=flex.get(k,float('nan'))
    print("%-26s %6d %3d %8.4f %8.4f %7.3f %7.2f %7.2f"%(k[0],k[1],k[2],a,w,a/w,fl/a,fl/w))
PY
