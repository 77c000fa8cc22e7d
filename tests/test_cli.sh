#!/bin/sh
# test_cli.sh — the splat command end to end: help texts, analyze (text and JSON, the
# exact nnz of a 131072-token longformer pattern computed here independently), parse
# errors, run on the built-in default (which checks itself against a float64
# reference), codegen and env. Usage: test_cli.sh PATH/TO/splat
SPLAT=${1:?usage: test_cli.sh PATH/TO/splat}
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # check NAME CONDITION-EXIT-CODE
  if [ "$2" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAIL: $1"; fi
}
contains() { grep -q -- "$2" "$1"; }

"$SPLAT" --help >"$tmp/out" 2>&1; check "splat --help exits 0" $?
contains "$tmp/out" "analyze"; check "splat --help lists analyze" $?
for verb in analyze run env codegen; do
  "$SPLAT" $verb --help >"$tmp/out" 2>&1; check "splat $verb --help exits 0" $?
  contains "$tmp/out" "usage: splat $verb"; check "splat $verb --help prints usage" $?
done
"$SPLAT" frobnicate >"$tmp/out" 2>&1; test $? -eq 2; check "unknown command exits 2" $?
contains "$tmp/out" "unknown command 'frobnicate'"; check "unknown command is named" $?

# The exact nnz of longformer(256,64) at 131072, counted row by row with awk.
expected=$(awk 'BEGIN { N = 131072; w = 256; g = 64; nnz = 0;
  for (i = 0; i < N; i++) {
    if (i < g) { nnz += N; continue }
    lo = i - w; if (lo < 0) lo = 0; hi = i + w; if (hi > N - 1) hi = N - 1;
    inwin = hi - lo + 1; glob = g; if (lo < g) glob = lo;  # globals left of the window
    nnz += inwin + glob }
  printf "%d", nnz }')
"$SPLAT" analyze "longformer(256,64)" --seq 131072 --json >"$tmp/json" 2>&1; check "analyze --json exits 0" $?
contains "$tmp/json" "\"nnz\": *$expected[,}]"; check "analyze --json nnz = $expected" $?
for key in density analysis_ms plan_ms tile_waste regular_fraction rows_by_segments bsr_bytes; do
  contains "$tmp/json" "\"$key\""; check "analyze --json has $key" $?
done
echo "longformer(256,64) @131072: $(grep -o '"analysis_ms": *[0-9.e+-]*' "$tmp/json"), $(grep -o '"plan_ms": *[0-9.e+-]*' "$tmp/json")"

"$SPLAT" analyze "dilated(4,3) | global(2)" --seq 97 --tile 16x16 >"$tmp/out" 2>&1; check "analyze text exits 0" $?
contains "$tmp/out" "mask ("; check "analyze prints a picture" $?
contains "$tmp/out" "dilated(4,3)"; check "analyze prints the spec" $?
"$SPLAT" analyze "window(3" --seq 10 >"$tmp/out" 2>&1; test $? -ne 0; check "bad spec fails" $?
contains "$tmp/out" "\^"; check "bad spec message has a caret" $?
"$SPLAT" analyze "window(3)" >"$tmp/out" 2>&1; test $? -eq 2; check "missing --seq exits 2" $?
"$SPLAT" analyze "window(3)" --seq -5 >"$tmp/out" 2>&1; test $? -eq 2; check "negative --seq exits 2" $?
"$SPLAT" analyze "window(3)" --seq 10 --tile 12 >"$tmp/out" 2>&1; test $? -eq 2; check "bad --tile exits 2" $?
"$SPLAT" codegen "window(8)" --seq 64 --head-dim 64 >"$tmp/out" 2>&1; test $? -eq 2; check "codegen without --dtype exits 2" $?
contains "$tmp/out" "missing --dtype T"; check "codegen names the missing option" $?
"$SPLAT" analyze dense --seq 2 --seq-k 100 >"$tmp/out" 2>&1; check "analyze dense 2x100 exits 0" $?
test "$(grep -c '^|#\{64\}|$' "$tmp/out")" -eq 2; check "a dense mask draws only '#' when seq_k is not a multiple of 64" $?
"$SPLAT" analyze "blocked(50)" --seq 100 >"$tmp/out" 2>&1; test "$(grep '^|' "$tmp/out" | grep -c '[.:]')" -eq 0; check "blocked(50) over 100 draws whole cells only" $?
"$SPLAT" analyze "window(3)" --seq 10 --seq 20 >"$tmp/out" 2>&1; test $? -eq 2; check "repeated --seq exits 2" $?
contains "$tmp/out" "--seq given twice ('10', then '20')"; check "repeated --seq names both values" $?
"$SPLAT" run --seq 64 --dtype f16 --dtype bf16 >"$tmp/out" 2>&1; test $? -eq 2; check "run: repeated --dtype exits 2" $?
contains "$tmp/out" "splat run: --dtype given twice"; check "run: repeated --dtype named" $?
"$SPLAT" codegen "window(3)" --seq 64 --head-dim 64 --dtype f16 --op sddmm --op spmm --source-only >"$tmp/out" 2>&1; test $? -eq 2; check "codegen: repeated --op exits 2" $?

"$SPLAT" run --seq 300 --heads 2 --repeat 1 >"$tmp/out" 2>&1; check "run exits 0" $?
contains "$tmp/out" "check: .*OK"; check "run checks itself" $?
"$SPLAT" run --seq 129 --spec "dilated(8,3) | causal" --dtype f16 --head-dim 24 --repeat 1 >"$tmp/out" 2>&1
check "run with options exits 0" $?
"$SPLAT" run --seq 150 --seq-k 97 --heads 4 --heads-kv 2 --spec "dilated(4,3) | global(2)" --dtype f32 --repeat 1 >"$tmp/out" 2>&1
check "run with seq_k and grouped-query heads exits 0" $?
contains "$tmp/out" "heads 4 (kv 2), seq 150 x 97"; check "run states seq_k and heads_kv" $?
contains "$tmp/out" "check: .*on 3 (batch, head) slice(s).*OK"; check "grouped-query run checks a middle head too" $?
"$SPLAT" run --spec "window(-1)" --seq 64 --batch 1 --heads 1 --repeat 1 >"$tmp/out" 2>&1; check "run of an empty mask exits 0" $?
contains "$tmp/out" "bound 0 (every reference output is 0: exact): OK"; check "run of an empty mask checks for exact zeros" $?
"$SPLAT" run --spec "window(2)" --seq 1000000 --batch 64 --heads 64 --head-dim 128 --repeat 1 >"$tmp/out" 2>&1; test $? -eq 1; check "run past the host's memory exits 1" $?
contains "$tmp/out" "splat run: the tensors need 3921.5 GiB of host memory; this machine has"; check "run past the host's memory says how much it needs" $?
"$SPLAT" run --heads 6 --heads-kv 4 >"$tmp/out" 2>&1; test $? -eq 2; check "heads-kv not dividing heads exits 2" $?
# The check visits each row's keys only: a long sparse run checks in well under a second
# (it took ~37 s at 16384 when it scored every key).
"$SPLAT" run --spec "window(16)" --seq 16384 --batch 1 --heads 1 --dtype f32 --repeat 1 --threads 2 >"$tmp/out" 2>&1
check "long sparse run exits 0" $?
contains "$tmp/out" "check: .*OK"; check "long sparse run checks itself" $?
"$SPLAT" run --seed 18446744073709551615 >"$tmp/out" 2>&1; test $? -eq 2; check "run --seed past int64 exits 2" $?
SPLAT_LOG_LEVEL=loud "$SPLAT" run --spec "window(8)" --seq 64 --batch 1 --heads 1 >"$tmp/out" 2>&1
check "run with an unknown SPLAT_LOG_LEVEL still runs" $?
contains "$tmp/out" "SPLAT_LOG_LEVEL=loud unknown"; check "an unknown SPLAT_LOG_LEVEL is said once" $?
"$SPLAT" version extra >"$tmp/out" 2>&1; test $? -eq 2; check "version with an argument exits 2" $?
contains "$tmp/out" "unexpected argument 'extra'"; check "version names the stray argument" $?
SPLAT_NUM_THREADS=abc "$SPLAT" env >"$tmp/out" 2>&1; test $? -ne 0; check "env with a bad SPLAT_NUM_THREADS fails" $?
contains "$tmp/out" "SPLAT_NUM_THREADS=abc"; check "a bad SPLAT_NUM_THREADS is named" $?
contains "$tmp/out" "nvrtc:"; check "env with a bad SPLAT_NUM_THREADS still reports the rest" $?
"$SPLAT" run --spec --seq 64 >"$tmp/out" 2>&1; test $? -eq 2; check "run --spec with no pattern exits 2" $?
contains "$tmp/out" "spec needs a pattern"; check "a missing --spec pattern is named" $?
"$SPLAT" run --dtype int4 >"$tmp/out" 2>&1; test $? -eq 2; check "run --dtype int4 exits 2" $?
contains "$tmp/out" "int4"; check "bad dtype is named" $?

SPLAT_CACHE_DIR="$tmp/cache" "$SPLAT" cache list >"$tmp/out" 2>&1; check "cache list exits 0" $?
contains "$tmp/out" "$tmp/cache"; check "cache list names \$SPLAT_CACHE_DIR" $?
SPLAT_CACHE_DIR="$tmp/cache" "$SPLAT" cache clear >"$tmp/out" 2>&1; check "cache clear exits 0" $?
"$SPLAT" cache bogus >"$tmp/out" 2>&1; test $? -eq 2; check "cache bogus exits 2" $?

# The picture: window(0) is the diagonal (two rows a line, each cell one column, half
# full), and a mask 2^30 columns wide is drawn from its segments in well under a second.
"$SPLAT" analyze "window(0)" --seq 64 >"$tmp/out" 2>&1; check "analyze window(0) exits 0" $?
line=$(grep '^|' "$tmp/out" | sed -n 2p)
test "$line" = "|  ::                                                            |"; check "analyze draws window(0)'s diagonal (line 2: '$line')" $?
timeout 20 "$SPLAT" analyze "window(100) | strided(3)" --seq 1024 --seq-k 1073741824 >"$tmp/out" 2>&1
check "analyze draws a 2^30-wide mask in time" $?
test "$(grep -c '^|' "$tmp/out")" -eq 32; check "analyze draws 32 lines of a 2^30-wide mask" $?

# A FIFO under a cache entry's name is refused, never waited on; `cache clear` removes the
# names splat writes and leaves other files alone, also ones that look like them.
mkdir -p "$tmp/fcache"
fifo_entry=0123456789abcdef0123456789abcdef.cubin
mkfifo "$tmp/fcache/$fifo_entry"
SPLAT_CACHE_DIR="$tmp/fcache" timeout 20 "$SPLAT" cache list >"$tmp/out" 2>&1; check "cache list with a FIFO entry returns" $?
contains "$tmp/out" "${fifo_entry%.cubin}  invalid"; check "cache list calls the FIFO entry invalid" $?
for f in .tmp-0123456789abcdef0123456789abcdef-a1B2c3 .tmp-nvrtc-Zz09aa nvrtc-0123456789abcdef.stamp; do
  : >"$tmp/fcache/$f"
done
for f in .tmp-notes nvrtc-my.stamp .tmp-nvrtc-toolong1 nvrtc-0123456789ABCDEF.stamp keep.txt; do
  : >"$tmp/fcache/$f"
done
SPLAT_CACHE_DIR="$tmp/fcache" timeout 20 "$SPLAT" cache clear >"$tmp/out" 2>&1; check "cache clear with a FIFO entry exits 0" $?
left=$(ls -A "$tmp/fcache" | LC_ALL=C sort | tr '\n' ' ')
test "$left" = ".tmp-notes .tmp-nvrtc-toolong1 keep.txt nvrtc-0123456789ABCDEF.stamp nvrtc-my.stamp "
check "cache clear removes splat's names only (left: $left)" $?

# Output that cannot be written fails the command, naming why.
if [ -w /dev/full ]; then
  "$SPLAT" --help >/dev/full 2>"$tmp/out"; test $? -eq 1; check "--help > /dev/full exits 1" $?
  contains "$tmp/out" "cannot write the output"; check "a failed write to stdout is named" $?
  "$SPLAT" analyze "window(4)" --seq 64 >/dev/full 2>"$tmp/out"; test $? -ne 0; check "analyze > /dev/full fails" $?
fi

"$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bf16 --arch sm_75 --source-only >"$tmp/out" 2>&1
test $? -eq 2; check "codegen --arch sm_75 exits 2" $?
contains "$tmp/out" "sm_80 or newer"; check "codegen names the oldest target" $?
for arch in sm_0080 sm_080 sm_1000 sm_90b; do
  "$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bf16 --arch $arch --source-only >"$tmp/out" 2>&1
  test $? -eq 2 && contains "$tmp/out" "got '$arch'"; check "codegen --arch $arch (the library refuses it) exits 2" $?
done
"$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bf16 --arch sm_99999999999999999999 --source-only >"$tmp/out" 2>&1
test $? -eq 2; check "codegen --arch past the range of long exits 2" $?
contains "$tmp/out" "got 'sm_99999999999999999999'"; check "codegen names the out-of-range --arch" $?
"$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bf16 --op sddmm --source-only >"$tmp/out" 2>&1
check "codegen --source-only exits 0" $?
contains "$tmp/out" "splat_sddmm_wgmma_bf16_v_bf16_d64_q64_k128_kt128"; check "codegen source names the kernel (sm_90a: wgmma)" $?
"$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bfloat16 --op sddmm --arch sm_80 --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "splat_sddmm_tile_bf16_v_bf16_d64"; check "codegen source names the kernel (sm_80: mma.sync)" $?
# The query tile a plan of the fused attention alone takes (docs/cuda.md, Query tiles):
# 192 rows for window(256) at head_dim 64, and for blocked(512) cut at its blocks (96 tiles
# at 16384, where tiles laid from row 0 would be 86); 128 for blocked(256) (192 + 64 a block)
# and for plans of every op; SPLAT_ATTN_WARPGROUPS=2 keeps 128.
"$SPLAT" codegen "window(256)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q192_k128_kt128_s4_seg1" && contains "$tmp/out" "query tiles of 192 rows"
check "codegen: window(256)'s fused attention takes 192-row tiles" $?
"$SPLAT" codegen "blocked(512)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q192_k128_kt128_s4_seg1" && contains "$tmp/out" "96 query tiles"
check "codegen: blocked(512) takes 192-row tiles cut at its blocks" $?
# With the SMs named, the rounds count: blocked(512) at 16384 on an H100 (2 x 16 heads, 132 SMs,
# 21 rounds) takes plain 192-row tiles (86), with one head too few rounds for any; blocked(1024)
# at head_dim 128 takes them (21 points more predicated), blocked(512) not (39).
"$SPLAT" codegen "blocked(512)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only --batch 2 --heads 16 --sms 132 >"$tmp/out" 2>&1
contains "$tmp/out" "86 query tiles" && contains "$tmp/out" "batch 2 x heads 16 on 132 SMs"
check "codegen --sms: blocked(512) on an H100 takes plain 192-row tiles" $?
"$SPLAT" codegen "blocked(512)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only --sms 132 >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q128_k128"; check "codegen --sms: one head's items keep 128-row tiles" $?
"$SPLAT" codegen "blocked(1024)" --seq 16384 --head-dim 128 --dtype bf16 --op attention --source-only --batch 2 --heads 16 --sms 132 >"$tmp/out" 2>&1
contains "$tmp/out" "query tiles of 192 rows"; check "codegen --sms: blocked(1024) at head_dim 128 takes 192-row tiles" $?
"$SPLAT" codegen "blocked(512)" --seq 16384 --head-dim 128 --dtype bf16 --op attention --source-only --batch 2 --heads 16 --sms 132 >"$tmp/out" 2>&1
contains "$tmp/out" "query tiles of 128 rows, as a plan of the fused attention alone takes them with batch 2 x heads 16 on 132 SMs" && contains "$tmp/out" "splat_attn_ws_bf16_d128_q128"
check "codegen --sms: blocked(512) at head_dim 128 keeps 128-row tiles" $?
# The passes of a two-pass plan count the rounds too: strided(64) | window(64) at 16384 puts
# its first pass on 192 rows with the SMs unknown and for 2 x 16 heads on 132 SMs, not for one.
"$SPLAT" codegen "strided(64) | window(64)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q192_k128_kt128_s4_seg2_pass1"; check "codegen: pass 1 on 192 rows, the SMs unknown" $?
"$SPLAT" codegen "strided(64) | window(64)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only --sms 132 >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q128_k128_kt128_s4_seg2_pass1"; check "codegen --sms: one head keeps pass 1 on 128 rows" $?
"$SPLAT" codegen "strided(64) | window(64)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only --sms 132 --batch 2 --heads 16 >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q192_k128_kt128_s4_seg2_pass1" && contains "$tmp/out" "pass 1 on query tiles of 192 rows"
check "codegen --sms: 2 x 16 heads put pass 1 on 192 rows" $?
# The last round's split (docs/cuda.md, The last round): window(95) at 4096 for 2 x 16 heads on
# 132 SMs splits one of its 22 tiles into three of 64 rows; SPLAT_ATTN_TAIL=0 splits none.
env -u SPLAT_ATTN_TAIL -u SPLAT_ATTN_PERSISTENT -u SPLAT_ATTN_WARPGROUPS "$SPLAT" codegen "window(95)" --seq 4096 --head-dim 64 --dtype bf16 --op attention --source-only --batch 2 --heads 16 --sms 132 >"$tmp/out" 2>&1
contains "$tmp/out" "24 query tiles" && contains "$tmp/out" "1 of them split into 64-row tiles"; check "codegen --sms: the last round's split" $?
SPLAT_ATTN_TAIL=junk "$SPLAT" codegen "window(95)" --seq 4096 --head-dim 64 --dtype bf16 --op attention --source-only --batch 2 --heads 16 --sms 132 >"$tmp/out" 2>&1
test $? -eq 1 && contains "$tmp/out" "splat codegen failed" && contains "$tmp/out" "SPLAT_ATTN_TAIL"; check "codegen --sms: a bad SPLAT_ATTN_TAIL named" $?
SPLAT_ATTN_TAIL=0 "$SPLAT" codegen "window(95)" --seq 4096 --head-dim 64 --dtype bf16 --op attention --source-only --batch 2 --heads 16 --sms 132 >"$tmp/out" 2>&1
contains "$tmp/out" "22 query tiles" && ! contains "$tmp/out" "split into 64-row tiles"; check "codegen --sms: SPLAT_ATTN_TAIL=0 splits none" $?
"$SPLAT" codegen "window(8)" --seq 64 --head-dim 64 --dtype bf16 --heads 65537 --source-only >"$tmp/out" 2>&1; test $? -eq 2; check "codegen --heads 65537 exits 2" $?
"$SPLAT" codegen "window(8)" --seq 64 --head-dim 64 --dtype bf16 --sms -1 --source-only >"$tmp/out" 2>&1; test $? -eq 2; check "codegen --sms -1 exits 2" $?
contains "$tmp/out" "--sms expects an integer"; check "codegen names the bad --sms" $?
"$SPLAT" codegen "blocked(256)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q128_k128"; check "codegen: blocked(256) keeps 128-row tiles at head_dim 64" $?
"$SPLAT" codegen "window(256)" --seq 16384 --head-dim 64 --dtype bf16 --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q128_k128"; check "codegen: a plan of every op keeps 128-row tiles" $?
SPLAT_ATTN_WARPGROUPS=2 "$SPLAT" codegen "window(256)" --seq 16384 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "splat_attn_ws_bf16_d64_q128_k128"; check "codegen: SPLAT_ATTN_WARPGROUPS=2 keeps 128-row tiles" $?
# SPLAT_ATTN_TRACE=1 specialises the warp-specialised attention kernel to write timestamps
# (bench/item_trace.py); off by default; other values are refused with a sentence.
env -u SPLAT_ATTN_TRACE "$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "#define SPLAT_WS_TRACE 0"; check "codegen: the attention kernel untraced by default" $?
SPLAT_ATTN_TRACE=1 "$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
contains "$tmp/out" "#define SPLAT_WS_TRACE 1"; check "codegen: SPLAT_ATTN_TRACE=1 traces the attention kernel" $?
SPLAT_ATTN_TRACE=yes "$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype bf16 --op attention --source-only >"$tmp/out" 2>&1
test $? -ne 0 && contains "$tmp/out" "SPLAT_ATTN_TRACE=yes unsupported: must be 1"; check "codegen: a bad SPLAT_ATTN_TRACE is refused" $?
SPLAT_CACHE_DIR="$tmp/kcache" "$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype f32 --op softmax >"$tmp/out" 2>&1
if [ $? -eq 0 ]; then
  contains "$tmp/out" "registers"; check "codegen prints the ptxas report" $?
elif grep -q "NVRTC" "$tmp/out"; then
  echo "skipped: codegen's ptxas report (NVRTC unavailable: $(grep -m1 NVRTC "$tmp/out"))"
else
  check "codegen compiles or reports NVRTC missing" 1
fi

# A SPLAT_CACHE_DIR that cannot hold the cache (a file) is said once on stderr, and the
# kernels still compile.
: >"$tmp/afile"
SPLAT_CACHE_DIR="$tmp/afile" "$SPLAT" codegen "window(64)" --seq 1000 --head-dim 64 --dtype f32 --op softmax >"$tmp/out" 2>&1
if [ $? -eq 0 ]; then
  test "$(grep -c "SPLAT_CACHE_DIR=$tmp/afile cannot hold the kernel cache" "$tmp/out")" -eq 1
  check "an unusable SPLAT_CACHE_DIR is said once" $?
elif grep -q "NVRTC" "$tmp/out"; then
  echo "skipped: an unusable SPLAT_CACHE_DIR (NVRTC unavailable)"
else
  check "codegen with an unusable SPLAT_CACHE_DIR compiles or reports NVRTC missing" 1
fi

"$SPLAT" version --help >"$tmp/out" 2>&1; check "version --help exits 0" $?
contains "$tmp/out" "usage: splat version"; check "version --help prints its usage" $?

"$SPLAT" env >"$tmp/out" 2>&1; check "env exits 0" $?
contains "$tmp/out" "cuda:"; check "env reports cuda" $?
grep -Eq "^nvrtc: ([0-9]+\.[0-9]+|unavailable: NVRTC)" "$tmp/out"; check "env gives NVRTC's version or the loader's reason" $?

echo "$passed passed, $failed failed"
test "$failed" -eq 0
