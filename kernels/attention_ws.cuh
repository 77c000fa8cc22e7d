/* attention_ws.cuh — the fused attention forward on Hopper (sm_90a), warp-specialised
 * in the FlashAttention-3 shape: the default (SPLAT_ATTN_WS=0 takes attention_wgmma.cuh,
 * which also serves where this one does not fit). The row kernel of attention_rows.cuh
 * takes the irregular remainder.
 *
 * SPLAT_ATTN_TILE_NAME (f16/bf16; head_dim 32 .. 64, or 72 .. 128 with two consumer
 * warpgroups, as 64 or 128 columns: SPLAT_DP; 136 .. 192 as 192, 200 .. 256 as 256, with
 * one or two): a persistent grid (the host launches SMs x CTAs per SM, or one CTA per work
 * item); each CTA walks work items (query tile, row block of SPLAT_TQ rows, batch*head)
 * blockIdx.x, + gridDim.x, ... with a producer warpgroup (warpgroup 0) and SPLAT_WARPS / 4
 * consumer warpgroups of 64 query rows each (three on 192-row tiles at head_dim 32 .. 64 and
 * 128, whose
 * producer has no gather: SPLAT_WS_GATHER); setmaxnreg moves registers from the producer to
 * the consumers.
 *   - Producer: per item, the row ids, the item's task record (splat_ws_task: the
 *     consumers never decode items or read the plan's tiles) and Q (by TMA where the
 *     item's rows step evenly by the pattern's row stride, P.pat.qstride; else cp.async)
 *     into one of two buffers (full and empty mbarriers per buffer: it loads item k+1 while
 *     the consumers finish item k; one buffer with two consumer warpgroups at 256 columns,
 *     SPLAT_QBUFS); after the last item, a record with no rows ends the walk;
 *     then every sub-tile (SPLAT_KT keys: 64, or 128 at 64 columns) of the tile's key runs
 *     into a ring of SPLAT_STAGES K/V stages guarded by "full" and "empty" mbarriers, the
 *     ring running on across items. A sub-tile whose run has a TMA view (P.kmap/vmap, one
 *     per (stride, width) group: src/cuda/tma_views.c) is one tensor-map load per 64 keys
 *     and 64-column panel of K and of V, issued by one thread (dilated and strided keys are
 *     the map's middle coordinates, not masks); any other sub-tile is gathered by cp.async
 *     by the whole warpgroup (none with SPLAT_WS_GATHER 0: the host checks). With a
 *     predicated run's first sub-tile it also copies the run's interval table for the mask,
 *     built at plan time (P.pat.tables, one record per query tile, row block and key group:
 *     src/cuda/ws_tables.c), by one bulk copy on the sub-tile's full barrier into buffer
 *     R % STAGES of a run counter R over the CTA's items (every run has at least one
 *     sub-tile, so the run STAGES back is done). It never reads the rows' segments: its
 *     chain per item is the item's decode, Q and the copies.
 *   - Consumers: S = Q K^T by wgmma m64nKTk16 (both operands in shared memory, K-major);
 *     the mask predicate only on predicated runs; the online softmax in registers; P in
 *     the input dtype straight from the S registers is the A operand of O += P V (wgmma
 *     RS, V MN-major through the transpose bit). The product P V of one sub-tile is in
 *     flight while the softmax of the next runs (S(j+1) and P(j) V(j) are issued
 *     together). A warpgroup skips a predicated sub-tile none of its rows touches, and masks
 *     only where some row does not cover the whole sub-tile (each table carries the key span
 *     of every 32 rows).
 *     O / l and the log-sum-exp go to the original rows; rows without entries get zeros
 *     and -inf. A chunk of a split tile leaves partial results for the merge kernel
 *     instead (attention_merge.cuh).
 *
 * Prelude: as attention_tile.cuh (SPLAT_WARPS = 4 x consumer warpgroups), plus
 * SPLAT_ATTN_EPI (params.cuh SPLAT_EPI_*), the one epilogue the kernel carries: PLAIN, for
 * plans of one pass without split tiles, the staged epilogue only (less code: ~15% less
 * compile time); SPLIT also leaves the partial results of split chunks for the merge kernel
 * (attention_merge.cuh, its own program); PASS1 / PASS2, the two passes of a two-pass plan:
 * leave every row's partial result, and merge it into the second pass's
 * (splat_ws_store_staged); every variant stores the output by that staged epilogue only
 * (the host runs the row kernel for outputs it cannot store so); in pass 2's
 * kernels whose shared memory has room (SPLAT_WS_STAGED), the consumers copy their rows' pass-1
 * results into shared memory at each item's start (cp.async copies completing on an mbarrier), so
 * the merge at the item's end reads them there, not from L2. The host launches pass 2 as a
 * programmatic dependent of pass 1 (cuda_backend.c launch_tile): pass 1 on this kernel lets it
 * start at once, on the SMs its CTAs leave (a pass 1 on the mma.sync kernel would
 * not signal: pass 2 then starts as that grid ends), where its producer loads the first items' Q
 * and K/V while pass 1 ends; its consumers wait for pass 1's results before anything else
 * (wgmma.cuh splat_grid_wait_prior). */

#include "attention_common.cuh"
#include "attention_rows.cuh"
#include "common.cuh"
#include "pipeline.cuh"
#include "tma_view.cuh"
#include "wgmma.cuh"

#if SPLAT_DT != SPLAT_F32 && !defined(SPLAT_NO_TILE)

/* SPLAT_WS_TRACE (SPLAT_ATTN_TRACE=1, for profiling: bench/item_trace.py): the producer's
 * thread 0 and each consumer warpgroup's first thread write the SM clock's low 32 bits at
 * the marks below (a consumer's mark 7: its ring position after the item) over the
 * log-sum-exp output instead of it, taken as a contiguous uint32 array [CTA][role:
 * producer, consumer warpgroup 0, 1][the CTA's item: up to SPLAT_WS_TRACE_ITEMS][mark: 8]
 * and cut at its batch x heads x seq_q elements (so the first B H S / 1536 CTAs are traced;
 * pass 2 of two-pass plans: pass 1 marks nothing; a third consumer warpgroup neither). */
#if SPLAT_WS_TRACE
#define SPLAT_WS_TRACE_ITEMS 64
SPLAT_DEV void splat_ws_mark(const splat_attention_params &P, int role, uint32_t item, int event,
                             uint32_t value) {
  const int64_t at = (((int64_t)blockIdx.x * 3 + role) * SPLAT_WS_TRACE_ITEMS + item) * 8 + event;
  if (SPLAT_ATTN_PASS != 1 && role < 3 && (role ? threadIdx.x % 128 : threadIdx.x) == 0 &&
      P.lse.data && item < SPLAT_WS_TRACE_ITEMS && at < P.shape.batch * P.shape.heads * P.pat.seq_q)
    ((volatile uint32_t *)P.lse.data)[at] = value;
}
#define SPLAT_WS_MARK(role, item, event) splat_ws_mark(P, role, item, event, (uint32_t)clock64())
#define SPLAT_WS_MARK_VALUE(role, item, event, value) splat_ws_mark(P, role, item, event, value)
#else
#define SPLAT_WS_MARK(role, item, event) ((void)0)
#define SPLAT_WS_MARK_VALUE(role, item, event, value) ((void)0)
#endif

#define SPLAT_WGS (SPLAT_WARPS / 4) /* consumer warpgroups: 1 .. 3, sharing each K/V stage */
/* SPLAT_WS_GATHER 0: the producer has no cp.async gather of K and V, every sub-tile being a
 * TMA box (the host compiles it so only for plans whose every sub-tile a view serves, and
 * runs the row kernel where the inputs take no tensor map: cuda_backend.c). */
#ifndef SPLAT_WS_GATHER
#define SPLAT_WS_GATHER 1
#endif
static_assert(SPLAT_WARPS % 4 == 0 && SPLAT_WGS >= 1 && SPLAT_WGS <= 3,
              "the warp-specialised attention kernel takes 1 .. 3 consumer warpgroups");
/* Three consumer warpgroups (192-row tiles, FlashAttention-3's shape at head_dim 64): 128-key
 * sub-tiles, whose consumers need 160 registers, beside a producer of 32, which fits only
 * without the gather (bench/NOTES.md v58). */
static_assert(SPLAT_WGS < 3 ||
                  ((SPLAT_HEAD_DIM <= 64 ? SPLAT_KT == 128
                                         : SPLAT_HEAD_DIM <= 128 && SPLAT_KT == 64) &&
                   !SPLAT_WS_GATHER),
              "three consumer warpgroups: 64 columns with 128-key sub-tiles or 128 with 64-key "
              "ones, no gather");
static_assert(SPLAT_KT == 64 || SPLAT_KT == 128,
              "the warp-specialised attention kernel takes 64- or 128-key sub-tiles");
#define SPLAT_BOX SPLAT_TMA_BOX /* keys per TMA box (tma_view.cuh): a sub-tile is KT / 64 */
#define SPLAT_TQ (64 * SPLAT_WGS)             /* query rows per CTA */
#define SPLAT_THREADS (128 * (SPLAT_WGS + 1)) /* + the producer warpgroup */
/* Columns of the Q, K and V tiles and of O: 64, 128, 192 or 256 (32 .. 56 run as 64, 72 ..
 * 120 as 128, 136 .. 184 as 192, 200 .. 248 as 256: the loads zero-fill the columns past
 * head_dim, whose products are zero in S and dropped from O). */
#define SPLAT_DP \
  (SPLAT_HEAD_DIM <= 64 ? 64 : SPLAT_HEAD_DIM <= 128 ? 128 : SPLAT_HEAD_DIM <= 192 ? 192 : 256)
static_assert(SPLAT_HEAD_DIM % 8 == 0 && (SPLAT_DP <= 128 || SPLAT_WGS <= 2),
              "the warp-specialised attention kernel takes head_dim 32 .. 256 (a multiple of "
              "8), above 128 with one or two consumer warpgroups");
#define SPLAT_JH (SPLAT_HEAD_DIM / 8) /* 8-column blocks of O within head_dim */
#define SPLAT_CHUNKS (SPLAT_DP / 8)
#define SPLAT_NS (SPLAT_KT / 2) /* S accumulator registers per thread */
#define SPLAT_NO (SPLAT_DP / 2) /* O accumulator registers per thread */
#define SPLAT_TILE_BYTES(rows) ((rows)*SPLAT_DP * 2)
/* CTAs per SM and the register split: the launch bound gives R = 65536 / (THREADS x
 * CTAS) per thread (rounded down to 8: 128 with three consumer warpgroups, 168 with two, 128
 * with one); setmaxnreg takes the producer down to 80 (32 with three, without the gather)
 * and the consumers up to what the CTA's pool then allows: 160 each of three, 208 each of
 * two, 176 for one. The producer only issues copies (the interval
 * tables come from the plan), and compiles without spills at 80 (4-20 bytes at 72); it needed ~120
 * when it built the tables (104 and 112 with one consumer warpgroup, beside 152 / 144;
 * bench/NOTES.md v44, v51, v55). One consumer warpgroup above 128 columns: one CTA an SM (its
 * stages fill the shared memory), whose 256 threads get the most a thread can have (255 registers)
 * with no split (SPLAT_WS_REG_SPLIT 0). */
#define SPLAT_MIN_CTAS (SPLAT_WGS > 1 || SPLAT_DP > 128 ? 1 : 2)
#define SPLAT_WS_REG_SPLIT (SPLAT_WGS > 1 || SPLAT_DP <= 128)
#define SPLAT_PRODUCER_REGS (SPLAT_WGS == 3 ? 32 : 80)
#define SPLAT_CONSUMER_REGS (SPLAT_WGS == 1 ? 176 : SPLAT_WGS == 2 ? 208 : 160)
/* Q buffers: two (the producer loads item k + 1's Q while the consumers finish item k), one
 * with two consumer warpgroups at 256 columns (two of 64 KB do not fit beside two K/V stages
 * of 64 KB: FlashAttention-3's shape at head_dim 256; the next item's Q then loads after the
 * epilogue, which stages O in the buffer). kgen.c splat__kspec_ws_qbufs says the same. */
#define SPLAT_QBUFS (SPLAT_DP == 256 && SPLAT_WGS > 1 ? 1 : 2)
static_assert(SPLAT_PRODUCER_REGS + SPLAT_WGS * SPLAT_CONSUMER_REGS <=
                  (65536 / (SPLAT_THREADS * SPLAT_MIN_CTAS)) / 8 * 8 * (SPLAT_WGS + 1),
              "setmaxnreg: the warpgroups' registers exceed the CTA's pool");

/* Dynamic shared memory, bytes (kgen.c computes the same): 1024 of alignment slack, two Q
 * buffers, STAGES x (K, V), the mbarriers (full and empty per stage, full and empty per Q
 * buffer), STAGES interval-table records (params.cuh SPLAT_WS_TABLE_BYTES), two buffers of row
 * ids, two task records (48 bytes each); then, in pass 2's kernels where they fit (kgen.c
 * splat__kspec_tile_smem decides it for the device: one warpgroup, two CTAs still sharing
 * an SM; two or three, a CTA's opt-in; SPLAT_TILE_SMEM then includes them), its rows' pass-1
 * results (SPLAT_WS_STAGED): a barrier per warpgroup (SPLAT_WS_PFULL_BYTES) and
 * SPLAT_ROWPART_COPY bytes a row, so the merge does not wait on L2 at each
 * item's end (bench/NOTES.md v9.5). Staged by a bulk copy a row, the two-warpgroup kernels
 * were 0.5-1.5% slower than unstaged (v9.7); by cp.async, 2-5% faster (v20). */
#define SPLAT_WS_TAB SPLAT_WS_TABLE_BYTES(SPLAT_TQ, SPLAT_MAX_SEGS) /* a table record */
static_assert(sizeof(splat_ival) == 16 && SPLAT_WS_TAB % 16 == 0 &&
                  (SPLAT_QBUFS * SPLAT_TILE_BYTES(SPLAT_TQ) +
                   2 * SPLAT_STAGES * SPLAT_TILE_BYTES(SPLAT_KT) +
                   8 * (2 * SPLAT_STAGES + 2 * SPLAT_QBUFS)) %
                          16 ==
                      0,
              "the interval tables' layout (params.cuh): whole 16-byte records at a 16-byte "
              "aligned offset from the 1024-aligned base, as a bulk copy needs");
#define SPLAT_WS_SMEM_BASE                                                                 \
  (1024 + SPLAT_QBUFS * SPLAT_TILE_BYTES(SPLAT_TQ) +                                       \
   2 * SPLAT_STAGES * SPLAT_TILE_BYTES(SPLAT_KT) + 8 * (2 * SPLAT_STAGES + 2 * SPLAT_QBUFS) + \
   SPLAT_STAGES * SPLAT_WS_TAB + SPLAT_QBUFS * (SPLAT_TQ * 4 + 48))
/* The staged rows' barriers, one a consumer warpgroup, in whole 16-byte units. */
#define SPLAT_WS_PFULL_BYTES (SPLAT_WGS == 3 ? 32 : 16)
#define SPLAT_WS_STAGED_BYTES (SPLAT_WS_PFULL_BYTES + SPLAT_TQ * SPLAT_ROWPART_COPY)
#define SPLAT_WS_STAGED \
  (SPLAT_ATTN_PASS == 2 && SPLAT_TILE_SMEM == SPLAT_WS_SMEM_BASE + SPLAT_WS_STAGED_BYTES)
#define SPLAT_ATTN_SMEM (SPLAT_WS_SMEM_BASE + SPLAT_WS_STAGED * SPLAT_WS_STAGED_BYTES)

/* The span of a run's intervals over a set of rows (32 in a table record, joined to a
 * consumer warpgroup's 64): lo..hi, the hull of their intervals when every row has one, or
 * two a few keys apart (a sub-tile outside it is touched by no row; one inside may still
 * be untouched, between the rows: computed, all masked), else lo = INT32_MIN and hi =
 * INT32_MAX (unknown: the rows' intervals decide); every row has an interval covering
 * full_lo..full_hi (empty when full_lo > full_hi). Rows past the item's are left out:
 * their results are dropped. src/cuda/ws_tables.c builds them (in kernels of two
 * intervals a row, the hull of two a few keys apart: the contiguous pass of strided |
 * window, a window with holes at the lattice points, runs 2-4% faster than with the rows'
 * votes; bench/NOTES.md v9.4). */
SPLAT_DEV int4 splat_span_join(int4 a, int4 b) {
  return make_int4(min(a.x, b.x), max(a.y, b.y), max(a.z, b.z), min(a.w, b.w));
}
static_assert(
    SPLAT_ATTN_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

/* A work item: rows [rb, rb + nrows) of query tile ti (`tile`), for batch b, head h. */
struct splat_ws_item {
  splat_dev_tile tile;
  int ti, rb, nrows;
  int64_t bh, b, h;
};

/* Work item w of P.work: tile-major (the host uploads the tiles heaviest first), then row
 * block, then batch*head (fastest), as splat_tile_block orders a grid of one item per
 * CTA. nrows <= 0: a row block past its tile, no work. In 32 bits (64-bit divisions cost
 * ~100 instructions each, per item and warp, and their code doubled the producer's): the
 * host launches this kernel only where P.work < 2^32 (cuda_backend.c launch_tile). */
SPLAT_DEV splat_ws_item splat_ws_item_of(const splat_attention_params &P, uint32_t w, uint32_t BH) {
  splat_ws_item it;
  const uint32_t heads = (uint32_t)P.shape.heads;
  const uint32_t gz = (uint32_t)((P.part_rows + SPLAT_TQ - 1) / SPLAT_TQ), per = BH * gz;
  const uint32_t rest = w % per, bh = rest % BH;
  it.ti = (int)(w / per);
  it.bh = (int64_t)bh;
  it.b = (int64_t)(bh / heads);
  it.h = (int64_t)(bh % heads);
  it.rb = (int)(rest / BH) * SPLAT_TQ;
  it.tile = P.pat.tiles[it.ti];
  it.nrows = it.tile.nrows - it.rb < SPLAT_TQ ? it.tile.nrows - it.rb : SPLAT_TQ;
  return it;
}

/* What the consumers need of an item, written by the producer beside its Q and row ids:
 * a = {runs, rows (0: the end of the CTA's walk), row block, split slot or -1},
 * c = {b, h, b * heads + h, index of its first run in P.pat.runs}, and r = that run's
 * {base, sub-tiles, predicate, 0} (the walk's first step needs no global load). */
struct splat_ws_task {
  int4 a, c, r;
};

/* O / l of a consumer warpgroup's 64 rows (block rows 64 cw ..) to the original rows
 * sRow[r], r < nrows, through its own 64 rows of the item's Q buffer `sQb` (their S
 * products are complete): each warp puts its 16 rows there in the input dtype (the
 * 128-byte swizzle keeps the 4-byte writes free of bank conflicts), then writes them as
 * whole rows of 16-byte stores. The log-sum-exp as splat_attn_store. A row's sum l is at
 * least 1 (its maximum contributes 2^0), so 1 / l and log2 l come from the special-function
 * unit (relative errors ~2^-22, far below the output's rounding) without the IEEE
 * routines' range checks (a merged sum too: one of its passes' weights is 1); the (b, h)
 * part of the offsets is computed once. Pass 2 of two merges pass 1's row first (sStaged:
 * its staged rows, SPLAT_WS_STAGED). Pass 1 of two in bf16 plans (SPLAT_ROWPART_HALF) writes
 * its rows the same way to the workspace, as fp16 of O / unit, the tail (m, l, unit) by a
 * lane a row (attention_common.cuh splat_attn_store_rowpart's layout; whole 16-byte
 * stores, where column pairs left half-filled sectors: bench/NOTES.md v10.2, v10.3). Outputs
 * whose rows cannot take 16-byte stores run on the row kernel (cuda_backend.c out_vec_ok). An
 * element-by-element path here cost this fast path up to 8% of the kernel's time at
 * head_dim 64 inline, and up to 2.4% out of line behind a uniform branch (bench/NOTES.md,
 * stop 16). */
SPLAT_DEV void splat_ws_store_staged(const splat_attention_params &P, const float (&o)[SPLAT_NO],
                                     const float (&m)[2], const float (&l)[2], int64_t b, int64_t h,
                                     const int *sRow, unsigned char *sQb, int cw, int warp,
                                     int lane, int nrows, const unsigned char *sStaged) {
  const int t = lane & 3;
  const int64_t lse_bh = b * P.lse.s0 + h * P.lse.s1, out_bh = b * P.out.s0 + h * P.out.s1;
  constexpr bool part = SPLAT_ATTN_PASS == 1 && SPLAT_ROWPART_HALF; /* to the workspace */
  /* The workspace rows of (b, h) (pass 1 of two, and pass 2 without staged rows): their
   * offset once, each row's by one multiplication (per row, part of the 3.4 M instructions
   * pass 1's workspace rows add at 16384, bench/NOTES.md v22). */
  constexpr int64_t part_bytes = SPLAT_ROWPART_BYTES(SPLAT_HEAD_DIM, SPLAT_ROWPART_HALF);
  unsigned char *const part_bh = SPLAT_ATTN_PASS ? splat_attn_rowpart(P, b, h, 0) : nullptr;
  /* Pass 2: pass 1's rows (block rows past nrows read row 0's, or a staged row of an
   * earlier item: in bounds, their results are dropped) as loaded (splat_prior_word: a
   * register a column pair in bf16 plans), with their tails, both rows' before the first
   * shared store, which could alias them for all the compiler knows: read between the
   * stores, each read's round trip came in turn (from shared memory a column pair at a
   * time, 16 of them at head_dim 64; from L2 a row at a time; bench/NOTES.md v50, v52).
   * From L2 in f16 plans and above 128 columns a row at a time (registers: f16's rows of
   * floats, both at once, spilled 20 bytes at 128 columns; above it O alone is 96-128). */
  constexpr bool prior_first =
      SPLAT_ATTN_PASS == 2 && (SPLAT_WS_STAGED || (SPLAT_DP <= 128 && SPLAT_ROWPART_HALF));
  splat_prior_word p1[2][SPLAT_JH];
  float3 ml[2];
  auto load_prior = [&](int hf) {
    constexpr bool sh = SPLAT_WS_STAGED;
    const int r = 64 * cw + 16 * warp + (lane >> 2) + 8 * hf;
    const unsigned char *pr =
        sh ? sStaged + r * SPLAT_ROWPART_COPY : part_bh + sRow[r] * part_bytes;
#pragma unroll
    for (int j = 0; j < SPLAT_JH; j++) p1[hf][j] = splat_attn_prior_load<sh>(pr, 8 * j + 2 * t);
    ml[hf] = splat_attn_prior_tail<sh>(pr);
  };
  if constexpr (prior_first) {
#pragma unroll
    for (int hf = 0; hf < 2; hf++) load_prior(hf);
  }
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    float lt = splat_quad_sum(l[hf]), mx = m[hf];
    const int r = 64 * cw + 16 * warp + (lane >> 2) + 8 * hf;
    const float2 sc = part ? splat_attn_row_scale<SPLAT_NO>(o, hf) : make_float2(1.f, 1.f);
    /* Pass 2: merged with pass 1's row (attention_common.cuh splat_attn_merge_ml). */
    float w = 1.f, w1 = 0.f;
    if constexpr (SPLAT_ATTN_PASS == 2) {
      if (!prior_first) load_prior(hf);
      splat_attn_merge_ml(make_float2(ml[hf].x, ml[hf].y), mx, lt, w, w1);
      w1 *= ml[hf].z; /* O1's weight: kept as O1 / unit */
    }
    const float inv = part ? sc.x : (lt > 0.f ? __fdividef(1.f, lt) : 0.f);
    /* Pass 2: 1 / l folded into both weights (a multiplication less an element). */
    w *= inv;
    w1 *= inv;
#pragma unroll
    for (int j = 0; j < SPLAT_NO / 4; j++) {
      float x0 = o[4 * j + 2 * hf], x1 = o[4 * j + 2 * hf + 1];
      if constexpr (SPLAT_ATTN_PASS == 2) {
        /* Columns past head_dim (not stored): pass 1's row ends before them. */
        const float2 q = j < SPLAT_JH ? splat_attn_prior_unpack(p1[hf][j < SPLAT_JH ? j : 0])
                                      : make_float2(0.f, 0.f);
        x0 = x0 * w + q.x * w1;
        x1 = x1 * w + q.y * w1;
      } else {
        x0 *= inv;
        x1 *= inv;
      }
      *(uint32_t *)(sQb + splat_sw128_tile_off<SPLAT_TQ>(r, j) + 4 * t) =
          part ? splat_pack2<SPLAT_F16>(x0, x1) : splat_pack2<SPLAT_DT>(x0, x1);
    }
    if constexpr (part) {
      if (t == 0 && r < nrows)
        splat_attn_store_rowpart_tail(part_bh + sRow[r] * part_bytes, mx, lt, sc.y);
    } else if (!SPLAT_WS_TRACE && P.lse.data && t == 0 && r < nrows) {
      ((float *)P.lse.data)[lse_bh + (int64_t)sRow[r] * P.lse.s2] =
          lt != 0.f ? (mx + __log2f(lt)) * SPLAT_LN2 : SPLAT_NEG_INF; /* NaN stays NaN */
    }
  }
  __syncwarp();
  /* The warp's 16 rows: CH 16-byte chunks each, in NP passes of 32 lanes; lane l of pass i
   * takes chunk (32 i + l) % CH of row (32 i + l) / CH (32 / CH whole rows a pass where CH
   * divides 32; at 192 columns a row's 24 chunks straddle passes). With at most four passes
   * (head_dim 64), every pass's shared memory loads first (rows past nrows read the block's
   * unused entries), then predicated stores: the loads' latency is paid once, not before
   * each store (1-3% faster at head_dim 64). The eight passes of head_dim 128 keep a load
   * and a store per pass: the grouped form was 1-2% slower there (bench/NOTES.md v8). */
  constexpr int CH = SPLAT_DP / 8, NP = 16 * CH / 32;
  const int rw0 = 64 * cw + 16 * warp;
  auto slot_row = [&](int i) {
    return 32 % CH == 0 ? rw0 + 32 / CH * i + lane / CH : rw0 + (32 * i + lane) / CH;
  };
  auto slot_ch = [&](int i) { return 32 % CH == 0 ? lane % CH : (32 * i + lane) % CH; };
  /* Row 0's chunk 0: of the output, or of pass 1's workspace row. */
  unsigned char *const dst0 = part ? part_bh : (unsigned char *)((uint16_t *)P.out.data + out_bh);
  const int64_t dst_row = part ? part_bytes : P.out.s2 * 2;
  if constexpr (NP <= 4) {
    uint4 v[NP];
    int orow[NP];
#pragma unroll
    for (int i = 0; i < NP; i++) {
      v[i] = *(const uint4 *)(sQb + splat_sw128_tile_off<SPLAT_TQ>(slot_row(i), slot_ch(i)));
      orow[i] = sRow[slot_row(i)];
    }
#pragma unroll
    for (int i = 0; i < NP; i++)
      splat_st16_if(dst0 + 16 * slot_ch(i) + (int64_t)orow[i] * dst_row, v[i],
                    slot_row(i) < nrows && slot_ch(i) < SPLAT_JH);
  } else {
#pragma unroll
    for (int i = 0; i < NP; i++) {
      const int r = slot_row(i), ch = slot_ch(i);
      if (r < nrows && ch < SPLAT_JH) /* chunks past head_dim: not stored */
        *(uint4 *)(dst0 + 16 * ch + (int64_t)sRow[r] * dst_row) =
            *(const uint4 *)(sQb + splat_sw128_tile_off<SPLAT_TQ>(r, ch));
    }
  }
}

/* A sub-tile of K (K-major, mn = false) or V (MN-major, mn = true) gathered by the
 * producer warpgroup's cp.async into the swizzled stage tile `dst`, for sub-tiles no TMA
 * view serves: out of line, one copy of the gather's code for both (the path is rare and
 * its two inlined copies were an eighth of the kernel's code and compile time). */
__device__ __noinline__ void splat_ws_gather(const uint16_t *base, int64_t off, int64_t s2,
                                             int64_t seq_k, splat_dev_run run, int32_t g0,
                                             unsigned char *dst, bool mn) {
  splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, 128, true>(
      base, off, s2, seq_k, run, g0, [&](int kk, int ch) {
        return dst + (mn ? splat_sw128_tile_off_mn<SPLAT_KT>(kk, ch)
                         : splat_sw128_tile_off<SPLAT_KT>(kk, ch));
      });
}

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_MIN_CTAS)
    SPLAT_ATTN_TILE_NAME(const __grid_constant__ splat_attention_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  /* Pass 1 of two: pass 2 may be scheduled now (it waits for this grid's results). */
  if (SPLAT_ATTN_PASS == 1 && threadIdx.x == 0) splat_grid_launch_dependents();
  /* Swizzled tiles need 1024-byte alignment of their shared addresses. */
  const uint32_t base_addr = splat_smem_addr(splat_smem);
  unsigned char *sbase = splat_smem + (((base_addr + 1023u) & ~1023u) - base_addr);
  unsigned char *sQ = sbase; /* QBUFS buffers: item k uses buffer k % QBUFS */
  unsigned char *sKV = sQ + SPLAT_QBUFS * SPLAT_TILE_BYTES(SPLAT_TQ); /* stage s: K, then V */
  uint64_t *full = (uint64_t *)(sKV + 2 * SPLAT_STAGES * SPLAT_TILE_BYTES(SPLAT_KT));
  uint64_t *empty = full + SPLAT_STAGES;
  uint64_t *qfull = empty + SPLAT_STAGES;   /* [QBUFS]: Q and row ids of buffer b are in */
  uint64_t *qempty = qfull + SPLAT_QBUFS;   /* [QBUFS]: the consumers are done with buffer b */
  unsigned char *sTab = (unsigned char *)(qempty + SPLAT_QBUFS); /* [STAGES] table records */
  int *sRows = (int *)(sTab + SPLAT_STAGES * SPLAT_WS_TAB); /* [QBUFS][TQ] the items' rows */
  splat_ws_task *sTask = (splat_ws_task *)(sRows + SPLAT_QBUFS * SPLAT_TQ); /* [QBUFS] items */
  uint64_t *pfull = (uint64_t *)(sTask + SPLAT_QBUFS); /* [WGS] (STAGED): the rows' copies are in */
  unsigned char *sStaged = (unsigned char *)pfull + SPLAT_WS_PFULL_BYTES; /* [TQ][COPY] (STAGED) */

  if (threadIdx.x == 0) {
    for (int s = 0; s < SPLAT_STAGES; s++) {
      splat_mbar_init(&full[s], 128);              /* every producer thread arrives */
      splat_mbar_init(&empty[s], 128 * SPLAT_WGS); /* every consumer thread arrives */
    }
    for (int b = 0; b < SPLAT_QBUFS; b++) {
      splat_mbar_init(&qfull[b], 128);
      splat_mbar_init(&qempty[b], 128 * SPLAT_WGS);
    }
    if (SPLAT_WS_STAGED)
      for (int c = 0; c < SPLAT_WGS; c++)
        splat_mbar_init(&pfull[c], 128); /* every thread's copies */
    splat_mbar_fence_init();
  }
  __syncthreads(); /* the barriers are in */

  /* The CTA takes work items blockIdx.x, + gridDim.x, ... (a persistent grid when the
   * host launches fewer CTAs than items). Both roles walk the same items and count the
   * same sub-tiles (n: ring position) and runs (R: interval-table buffer R % STAGES). */
  const int wg = threadIdx.x >> 7;
  const int64_t BH = P.shape.batch * P.shape.heads;
  const int nsub = SPLAT_TILE_K / SPLAT_KT;

  if (wg == 0) {
    /* ---------------------------------------------------------------- producer */
    if constexpr (SPLAT_WS_REG_SPLIT) splat_setmaxnreg_dec<SPLAT_PRODUCER_REGS>();
    uint32_t n = 0, R = 0, k = 0;
    /* This thread's row ids of the next item (row block rows threadIdx.x + 128 i) are
     * fetched one item ahead, once the current one's Q is in: the dependent global loads (the
     * item's tile, then the permutation) run while the current item's sub-tiles are issued, not at
     * the item's start (which decodes the item again from the cache). */
    constexpr int RPT = (SPLAT_TQ + 127) / 128; /* row ids a producer thread: rows x + 128 i */
    int nrow[RPT] = {};
    splat_ws_item nx; /* the next item, decoded once (its divisions: 13% of the instructions
                       * of a kernel of one-sub-tile items when decoded twice, v20) */
    auto fetch = [&](int64_t at) {
      if (at >= P.work) return;
      nx = splat_ws_item_of(P, (uint32_t)at, (uint32_t)BH);
#pragma unroll
      for (int i = 0; i < RPT; i++) {
        const int x = (int)threadIdx.x + 128 * i;
        nrow[i] = x < nx.nrows ? P.pat.perm[nx.tile.row_begin + nx.rb + x] : 0;
      }
    };
    fetch(blockIdx.x);
    for (int64_t w = blockIdx.x; w < P.work; w += gridDim.x) {
      const splat_ws_item it = nx;
      int row[RPT];
#pragma unroll
      for (int i = 0; i < RPT; i++) row[i] = nrow[i];
      if (it.nrows <= 0) {
        fetch(w + gridDim.x);
        continue;
      }
      SPLAT_WS_MARK(0, k, 0); /* trace: the item starts */
      const splat_dev_tile tile = it.tile;
      const int nrows = it.nrows;
      const int64_t b = it.b, h = it.h, hk = h / P.shape.heads_per_kv;
      const int64_t ko = splat_off(P.k, b, hk, 0), vo = splat_off(P.v, b, hk, 0);
      /* Q and the row ids into buffer k % QBUFS, once the consumers are done with item
       * k - QBUFS. */
      const int qb = (int)(k % SPLAT_QBUFS);
      int *sRow = sRows + qb * SPLAT_TQ;
      unsigned char *sQb = sQ + qb * SPLAT_TILE_BYTES(SPLAT_TQ);
      splat_mbar_wait(&qempty[qb], ((k / SPLAT_QBUFS) & 1u) ^ 1u);
      SPLAT_WS_MARK(0, k, 1); /* trace: its Q buffer is free */
      /* Q by TMA for items whose rows step by the pattern's stride (qstride: 1 for
       * consecutive rows, a phase class's stride for regrouped ones) within the rows its
       * view covers (qmap[qm], the pattern's: bit qm of P.qtma): thread 0 issues a box per
       * 64 rows and 64-column panel at (phase, position) = (first % qstride, first /
       * qstride) on the buffer's barrier, which expects their bytes (its arrival comes with
       * the others', finish_q), zero-filled past the view (rows past the item's are loaded
       * and dropped). */
      constexpr int qm = SPLAT_ATTN_PASS == 2;
      auto load_q = [&](int first) {
        const int qs = P.pat.qstride;
        const int ph = qs == 1 ? 0 : first % qs, at = qs == 1 ? first : first / qs;
        splat_mbar_expect_tx(&qfull[qb], SPLAT_TILE_BYTES(SPLAT_TQ));
#pragma unroll
        for (int p = 0; p < SPLAT_DP / 64; p++)
#pragma unroll
          for (int hb = 0; hb < SPLAT_TQ / 64; hb++)
            splat_tma_load_5d(sQb + p * SPLAT_TQ * 128 + hb * 64 * 128, &P.qmap[qm], &qfull[qb],
                              64 * p, ph, at + 64 * hb, (int)h, (int)b);
      };
#pragma unroll
      for (int i = 0; i < RPT; i++)
        if (threadIdx.x + 128 * i < SPLAT_TQ) sRow[threadIdx.x + 128 * i] = row[i];
      if (threadIdx.x == 0) {
        const int slot = P.pat.slots ? P.pat.slots[it.ti] : -1;
        sTask[qb].a = make_int4(tile.nruns, nrows, it.rb, slot);
        sTask[qb].c = make_int4((int)b, (int)h, (int)it.bh, tile.run_begin);
        if (tile.nruns > 0) {
          const splat_dev_run r0 = P.pat.runs[tile.run_begin];
          sTask[qb].r = make_int4(r0.base, r0.ntiles, r0.predicate, 0);
        }
      }
      splat_bar_sync(1, 128); /* the producer warpgroup's row ids are in for its Q gather */
      SPLAT_WS_MARK(0, k, 2); /* trace: its row ids are in */
      /* By TMA where the item's rows step by qstride inside the view (a vote), else
       * gathered. */
      auto even = [&]() {
        bool e = true;
#pragma unroll
        for (int i = 0; i < RPT; i++) {
          const int tx = (int)threadIdx.x + 128 * i;
          e = e && (tx >= nrows ||
                    (sRow[tx] == sRow[0] + P.pat.qstride * tx && sRow[tx] < P.pat.qcover));
        }
        return e;
      };
      if (((P.qtma >> qm) & 1) && splat_bar_and(1, 128, even())) {
        if (threadIdx.x == 0) load_q(sRow[0]);
      } else {
        splat_gather_rows<SPLAT_CHUNKS, SPLAT_TQ, 128, uint16_t>(
            P.q, b, h, sRow, nrows,
            [&](int r, int ch) { return sQb + splat_sw128_tile_off<SPLAT_TQ>(r, ch); });
        splat_cp_async_commit();
      }
      SPLAT_WS_MARK(0, k, 3); /* trace: its Q is issued */
      /* Q is waited for after the item's first sub-tile is issued (its interval tables
       * and loads go out under Q's), then the next item is fetched. */
      bool q_pending = true;
      auto finish_q = [&]() {
        splat_cp_async_wait<0>();  /* (none under TMA) */
        splat_fence_proxy_async(); /* this thread's copies -> visible to wgmma */
        splat_mbar_arrive(&qfull[qb]);
        q_pending = false;
        fetch(w + gridDim.x);
      };
      k++;
      for (int li = 0; li < tile.nruns; li++, R++) {
        const splat_dev_run run = P.pat.runs[tile.run_begin + li];
        /* Which of the run's sub-tiles its TMA view serves (tma_view.cuh); the rest are
         * gathered. */
        const bool view = P.tma && run.view >= 0;
        const splat_tma_run tv = splat_tma_run_of(run.phase, run.stride, view ? run.width : 1,
                                                  run.base, SPLAT_BOX, P.pat.seq_k);
        for (int ls = 0; ls < run.ntiles * nsub; ls++, n++) {
          const int st = (int)(n % SPLAT_STAGES);
          splat_mbar_wait(&empty[st], ((n / SPLAT_STAGES) & 1u) ^ 1u);
          if (li == 0 && ls == 0) SPLAT_WS_MARK(0, k - 1, 4); /* trace: a stage for it is free */
          /* A predicated run's interval table for the item's row block (P.pat.tables),
           * into buffer R % STAGES (the run STAGES back is done; the consumers read it only
           * in predicated runs) with the run's first sub-tile: the stage's full barrier
           * waits for its bytes too (announced before this thread's arrival below). */
          if (ls == 0 && run.predicate && threadIdx.x == 0) {
            unsigned char *tab = sTab + (int)(R % SPLAT_STAGES) * SPLAT_WS_TAB;
            splat_mbar_expect_tx(&full[st], SPLAT_WS_TAB);
            splat_bulk_load(tab,
                            P.pat.tables + (int64_t)(run.table + it.rb / SPLAT_TQ) * SPLAT_WS_TAB,
                            SPLAT_WS_TAB, &full[st]);
          }
          const int32_t g0 = run.base + ls * SPLAT_KT;
          unsigned char *sk = sKV + st * 2 * SPLAT_TILE_BYTES(SPLAT_KT);
          unsigned char *sv = sk + SPLAT_TILE_BYTES(SPLAT_KT);
          /* Boxes of 64 keys: the sub-tile is loaded by TMA when the view serves each. */
          bool boxed = view || !SPLAT_WS_GATHER;
#pragma unroll
          for (int h = 0; h < SPLAT_KT / SPLAT_BOX; h++)
            boxed = boxed &&
                    (!SPLAT_WS_GATHER || splat_tma_run_serves(tv, ls * (SPLAT_KT / SPLAT_BOX) + h));
          if (boxed) {
            if (threadIdx.x == 0) {
              splat_mbar_arrive_expect_tx(&full[st], 2 * SPLAT_TILE_BYTES(SPLAT_KT));
#pragma unroll
              for (int h = 0; h < SPLAT_KT / SPLAT_BOX; h++) {
                const int j0 = tv.j0 + tv.jstep * (ls * (SPLAT_KT / SPLAT_BOX) + h);
#pragma unroll
                for (int p = 0; p < SPLAT_DP / 64; p++) {
                  const int at = p * SPLAT_KT * 128 + h * SPLAT_BOX * 128; /* panel p, row 64 h */
                  splat_tma_load_5d(sk + at, &P.kmap[run.view], &full[st], 64 * p, run.phase, j0,
                                    (int)hk, (int)b);
                  splat_tma_load_5d(sv + at, &P.vmap[run.view], &full[st], 64 * p, run.phase, j0,
                                    (int)hk, (int)b);
                }
              }
            } else {
              splat_mbar_arrive(&full[st]);
            }
          } else if constexpr (SPLAT_WS_GATHER) {
            splat_ws_gather((const uint16_t *)P.k.data, ko, P.k.s2, P.pat.seq_k, run, g0, sk,
                            false);
            splat_ws_gather((const uint16_t *)P.v.data, vo, P.v.s2, P.pat.seq_k, run, g0, sv, true);
            splat_cp_async_commit();
            splat_cp_async_wait<0>();
            splat_fence_proxy_async();
            splat_mbar_arrive(&full[st]);
          }
          if (li == 0 && ls == 0) SPLAT_WS_MARK(0, k - 1, 5); /* trace: its first sub-tile issued */
          if (q_pending) finish_q();
          if (li == 0 && ls == 0)
            SPLAT_WS_MARK(0, k - 1, 6); /* trace: Q handed over, next fetched */
        }
      }
      SPLAT_WS_MARK(0, k - 1, 7); /* trace: its sub-tiles issued */
      if (q_pending) finish_q();
    }
    /* The end of the walk: a task with no rows. */
    const int qb = (int)(k % SPLAT_QBUFS);
    splat_mbar_wait(&qempty[qb], ((k / SPLAT_QBUFS) & 1u) ^ 1u);
    if (threadIdx.x == 0) sTask[qb].a = make_int4(0, 0, 0, -1);
    splat_mbar_arrive(&qfull[qb]);
    return;
  }

  /* ---------------------------------------------------------------- consumers */
  if constexpr (SPLAT_WS_REG_SPLIT) splat_setmaxnreg_inc<SPLAT_CONSUMER_REGS>();
  /* Pass 2 of two: pass 1's rows are complete and visible (its producer reads only the
   * inputs and the plan, and may run ahead). Every consumer thread waits: each reads them. */
  if (SPLAT_ATTN_PASS == 2) splat_grid_wait_prior();
  const int cw = wg - 1; /* consumer warpgroup: block rows 64 cw .. 64 cw + 63 */
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int t = lane & 3;
  const int r0 = 64 * cw + 16 * warp + (lane >> 2); /* this thread's rows r0, r0 + 8 */
  /* Table record tb (params.cuh SPLAT_WS_TABLE_BYTES): the rows' intervals, the spans of
   * 32 rows, the rows' interval counts. */
  auto tab_iv = [&](int tb) { return (const splat_ival *)(sTab + tb * SPLAT_WS_TAB); };
  auto tab_span = [&](int tb) {
    return (const int4 *)(sTab + tb * SPLAT_WS_TAB +
                          SPLAT_WS_TABLE_SPAN_OFF(SPLAT_TQ, SPLAT_MAX_SEGS));
  };
  auto tab_niv = [&](int tb) {
    return (const int *)(sTab + tb * SPLAT_WS_TAB +
                         SPLAT_WS_TABLE_NIV_OFF(SPLAT_TQ, SPLAT_MAX_SEGS));
  };
  /* The descriptors of stage 0's K and V tiles; a stage and a k16 step move them by
   * constants (splat_wgmma_desc_add). */
  const uint32_t kv_addr = splat_smem_addr(sKV);
  const uint64_t kdesc0 = splat_wgmma_desc_k<SPLAT_KT>(kv_addr, 0);
  const uint64_t vdesc0 = splat_wgmma_desc_mn<SPLAT_KT>(kv_addr + SPLAT_TILE_BYTES(SPLAT_KT), 0);
  uint32_t n = 0, R = 0, k = 0;
  for (;;) {
    const int qb = (int)(k % SPLAT_QBUFS);
    const int *sRow = sRows + qb * SPLAT_TQ;
    const uint64_t qdesc = splat_wgmma_desc_k<SPLAT_TQ>(
        splat_smem_addr(sQ) + (uint32_t)(qb * SPLAT_TILE_BYTES(SPLAT_TQ)) + cw * 64 * 128, 0);
    SPLAT_WS_MARK(wg, k, 0); /* trace: the warpgroup waits for the next item */
    splat_mbar_wait(&qfull[qb], (k / SPLAT_QBUFS) & 1u);
    SPLAT_WS_MARK(wg, k, 1); /* trace: its Q is in */
    const int4 ta = sTask[qb].a;
    const int nruns = ta.x, nrows = ta.y;
    if (nrows <= 0) break;               /* the producer's end of the walk */
    const int slot = ta.w;               /* a chunk of a split tile: partials */
    const bool active = 64 * cw < nrows; /* a warpgroup past the item's rows idles */
    if (SPLAT_WS_STAGED) {
      /* Pass 2: this warpgroup's rows' pass-1 results into its rows of sStaged, by 16-byte
       * cp.async copies spread over its 128 threads, each thread arriving on pfull[cw] once
       * its copies are in, while the item's sub-tiles run (the phase of item k has parity
       * k & 1). A bulk copy a row cost each warp a loop over its lanes (the copy's operands
       * are uniform): 8% of the instructions of strided(64) | window(64)'s pass 2 at 4096
       * (bench/NOTES.md v20). The warpgroup's reads of the last item's rows, and its waits
       * on the last phase, are done first (its named barrier). */
      splat_bar_sync(2 + cw, 128);
      /* Two threads a row, each every other chunk of it: one row id and address a thread,
       * the copies at constant offsets from them (a division by the chunk count per copy
       * was 4% of pass 2's instructions at 16384, bench/NOTES.md v22). */
      constexpr int CH = SPLAT_ROWPART_COPY / 16;
      const int lr = threadIdx.x & 127, r = 64 * cw + (lr >> 1), half = lr & 1;
      if (r < nrows) {
        const unsigned char *src =
            splat_attn_rowpart(P, sTask[qb].c.x, sTask[qb].c.y, sRow[r]) + 16 * half;
        const uint32_t dst = splat_smem_addr(sStaged + r * SPLAT_ROWPART_COPY + 16 * half);
#pragma unroll
        for (int i = 0; i < (CH + 1) / 2; i++)
          if (2 * i + half < CH) splat_cp_async16_at(dst + 32 * i, src + 32 * i);
      }
      splat_cp_async_mbar_arrive(&pfull[cw]);
    } else if (SPLAT_ATTN_PASS == 2) {
      splat_attn_prefetch_prior(P, sTask[qb].c.x, sTask[qb].c.y, {sRow[r0], sRow[r0 + 8]}, r0,
                                nrows, t);
    }

    float o[SPLAT_NO];
#pragma unroll
    for (int i = 0; i < SPLAT_NO; i++) o[i] = 0.f;
    float m[2] = {SPLAT_NEG_INF, SPLAT_NEG_INF}, l[2] = {0.f, 0.f}; /* rows g, g + 8 */
    uint32_t a[SPLAT_KT / 16][4]; /* P of the pending sub-tile (stage pst), in 16 bits */
    int pst = 0;

    /* O += P V of the pending sub-tile: its k16 steps on the V of the stage whose
     * descriptor is vdesc (the steady loop passes a stage's as a constant offset from
     * vdesc0, the rare paths one computed at run time: one copy of their code, not one a
     * stage). */
    auto issue_pv_on = [&](uint64_t vdesc) {
#pragma unroll
      for (int kk = 0; kk < SPLAT_KT / 16; kk++) {
        const uint64_t d = splat_wgmma_desc_add(vdesc, splat_wgmma_mn_step(kk));
        if constexpr (SPLAT_DP <= 128) {
          splat_wgmma_rs<SPLAT_DT, SPLAT_DP, 1>(o, a[kk], d, 1);
        } else {
          /* 192 or 256 columns as an N = 128 product and an N = 64 or 128 one: columns 128 ..
           * of O (registers 64 .., the accumulator layout's n8 blocks in order) on V's panels
           * 2 and on. */
          constexpr int N2 = SPLAT_DP > 128 ? SPLAT_DP - 128 : 64; /* (a compiled branch) */
          splat_wgmma_rs<SPLAT_DT, 128, 1>(*(float(*)[64])o, a[kk], d, 1);
          splat_wgmma_rs<SPLAT_DT, N2, 1>(*(float(*)[N2 / 2])(o + 64), a[kk],
                                          splat_wgmma_desc_add(d, 2 * SPLAT_KT * 128), 1);
        }
      }
    };
    auto stage_desc = [&](uint64_t desc0, uint32_t st) {
      return splat_wgmma_desc_add(desc0, st * 2 * SPLAT_TILE_BYTES(SPLAT_KT));
    };

    /* O += P V of the pending sub-tile (issued, or issue it now when `issue`); waits for
     * it and releases its stage. */
    auto finish_pv = [&](bool issue) {
      if (issue) {
        splat_wgmma_fence();
        issue_pv_on(stage_desc(vdesc0, (uint32_t)pst));
        splat_wgmma_commit();
      }
      splat_wgmma_wait<0>();
#pragma unroll
      for (int kk = 0; kk < SPLAT_KT / 16; kk++) splat_wgmma_fence_regs(a[kk]);
      splat_wgmma_fence_acc(o);
      splat_mbar_arrive(&empty[pst]); /* its V is read */
    };

    /* The cursor walks the tile's sub-tiles in the producer's order: run li, sub-tile ls
     * of it, ring position n. next(pending) moves it to the next sub-tile this warpgroup
     * computes, its stage full, releasing the stages of the ones it skips (predicated
     * sub-tiles none of its rows touches; all of them for an idle warpgroup). With a
     * P V pending (`pending`, a constant at each call), the first skip finishes it: the
     * producer needs its stage back to fill the sub-tile STAGES further on, which the walk
     * may reach. Returns 0 at the end (nothing pending then), 1 at a sub-tile with nothing
     * pending, 2 at one with the P V still pending. Each warp asks for all 64 rows (two a
     * lane) and gets the same answer, so the warpgroup's wgmma stays uniform. */
    int li = 0, ls = 0;
    int4 run = sTask[qb].r; /* {base, sub-tiles, predicate} of run li */
    auto step = [&]() {
      n++;
      if (++ls == run.y * nsub) {
        ls = 0;
        if (++li < nruns) {
          const splat_dev_run nr = P.pat.runs[sTask[qb].c.w + li];
          run = make_int4(nr.base, nr.ntiles, nr.predicate, 0);
        }
      }
    };
    /* This warpgroup's span of the run's table (buffer tb): its two 32-row spans joined. */
    auto span = [&](int tb) {
      const int4 *sp = tab_span(tb);
      return splat_span_join(sp[2 * cw], sp[2 * cw + 1]);
    };
    auto next = [&](bool pending) -> int {
      for (;; step()) {
        const bool end = li >= nruns;
        const int st = (int)(n % SPLAT_STAGES);
        bool touched = false;
        if (!end) {
          const int tb = (int)((R + li) % SPLAT_STAGES);
          const int32_t g0 = run.x + ls * SPLAT_KT;
          splat_mbar_wait(&full[st], (n / SPLAT_STAGES) & 1u);
          touched = active;
          if (touched && run.z) {
            /* By the span when it is exact (always with one segment a row: no row has two
             * intervals), else by the rows' intervals. */
            const int4 sp = span(tb);
            touched = SPLAT_MAX_SEGS > 1 && sp.x == (int)0x80000000
                          ? splat_attn_wg_touches<SPLAT_TQ, SPLAT_KT>(tab_iv(tb), tab_niv(tb),
                                                                      64 * cw, g0, lane)
                          : sp.x < g0 + SPLAT_KT && sp.y >= g0;
          }
        }
        if (touched) return pending ? 2 : 1;
        /* A skip or the end: the pending P V first (one call site: its code once). */
        if (pending) {
          finish_pv(true);
          pending = false;
        }
        if (end) return 0;
        splat_mbar_arrive(&empty[st]);
      }
    };
    /* The scores of the cursor's sub-tile in s, masked, then their softmax half. */
    auto scores = [&](float(&s)[SPLAT_NS], float(&alpha)[2]) {
      const float c = splat_attn_logit_scale(s, P.scale_log2);
      if (run.z) {
        /* Not where every row of the warpgroup covers the whole sub-tile. */
        const int tb = (int)((R + li) % SPLAT_STAGES);
        const int32_t g0 = run.x + ls * SPLAT_KT;
        const int4 sp = span(tb);
        if (!(sp.z <= g0 && sp.w >= g0 + SPLAT_KT - 1)) {
          splat_attn_mask<SPLAT_KT / 8>(s, tab_iv(tb), tab_niv(tb), r0, g0, t);
        }
      }
      splat_attn_softmax_step<SPLAT_KT / 8>(s, m, l, alpha, c);
    };
    /* S = Q K^T on the K tile whose descriptor is kdesc (as issue_pv_on). At 192 and 256
     * columns with two warpgroups (208 registers a consumer then), and with three (160),
     * Q's descriptor comes through an opaque copy at each call: otherwise the compiler keeps
     * every k16 step's descriptor in registers over the walk (24 of them at 192 columns; f16's
     * pass 1 then spilled; three warpgroups spilled 44 bytes). */
    auto issue_s_on = [&](float(&s)[SPLAT_NS], uint64_t kdesc) {
      const uint64_t qd =
          (SPLAT_DP >= 192 && SPLAT_WGS > 1) || SPLAT_WGS == 3 ? splat_opaque(qdesc) : qdesc;
#pragma unroll
      for (int kk = 0; kk < (SPLAT_HEAD_DIM + 15) / 16; kk++) { /* not the zero columns */
        splat_wgmma_ss<SPLAT_DT, SPLAT_KT>(
            s, splat_wgmma_desc_add(qd, splat_wgmma_k_step<SPLAT_TQ>(kk)),
            splat_wgmma_desc_add(kdesc, splat_wgmma_k_step<SPLAT_KT>(kk)), kk > 0);
      }
    };
    /* An item's first computed sub-tile, or one after a skip (stage st at run time). */
    auto issue_s = [&](float(&s)[SPLAT_NS], int st) {
      splat_wgmma_fence();
      issue_s_on(s, stage_desc(kdesc0, (uint32_t)st));
      splat_wgmma_commit();
    };
    /* The steady step's S on stage st and P V on the stage before it (pst), their
     * descriptors constant offsets from kdesc0 / vdesc0 (a copy a stage). */
    auto issue_s_pv = [&](float(&s)[SPLAT_NS], int st) {
      splat_with_const<SPLAT_STAGES>(st, [&](auto ST) {
        splat_wgmma_fence();
        issue_s_on(s, stage_desc(kdesc0, ST.value));
        splat_wgmma_commit();
        issue_pv_on(stage_desc(vdesc0, (ST.value + SPLAT_STAGES - 1) % SPLAT_STAGES));
        splat_wgmma_commit();
      });
    };

    /* A computed sub-tile with nothing pending: S, its softmax, P. Then per sub-tile: S(j)
     * and P(j-1) V(j-1) issued together, the softmax of S(j) while P V runs, O rescaled
     * once it is in. A skip in between finishes the pending P V (next), and the walk
     * re-enters at the first step. (Two copies of the scores' code: one body for both
     * with the waits under a branch makes ptxas serialise the wgmma, C7518.) */
    int at = next(false);
    SPLAT_WS_MARK(wg, k, 2); /* trace: its first computed sub-tile is in (or none is left) */
    bool entered = false;    /* trace: marks 3 and 4 at the first computed sub-tile only */
    while (at) {
      {
        float s[SPLAT_NS], alpha[2];
        pst = (int)(n % SPLAT_STAGES);
        issue_s(s, pst);
        splat_wgmma_wait<0>();
        splat_wgmma_fence_acc(s);
        if (!entered) SPLAT_WS_MARK(wg, k, 3); /* trace: the first S is in */
        scores(s, alpha);
        splat_attn_rescale<SPLAT_NO>(o, alpha);
        splat_wgmma_acc_to_a<SPLAT_DT, SPLAT_KT>(s, a);
        if (!entered) SPLAT_WS_MARK(wg, k, 4); /* trace: its softmax and P are done */
        entered = true;
      }
      step();
      while ((at = next(true)) == 2) {
        const int st = (int)(n % SPLAT_STAGES);
        float s[SPLAT_NS], alpha[2];
        issue_s_pv(s, st);     /* its fence also covers P's registers */
        splat_wgmma_wait<1>(); /* S is in; P V may still run */
        splat_wgmma_fence_acc(s);
        scores(s, alpha);
        /* The cursor's step (a branch) before the P V's wait: the wait then opens a new
         * basic block; in the softmax's own block ptxas hoists it above the exponentials
         * (tests/sass/check_ws_overlap.py). */
        step();
        finish_pv(false);
        splat_attn_rescale<SPLAT_NO>(o, alpha);
        splat_wgmma_acc_to_a<SPLAT_DT, SPLAT_KT>(s, a);
        pst = st;
      }
    }
    SPLAT_WS_MARK(wg, k, 5); /* trace: the walk is done */

    /* O / l and the log-sum-exp, to the original rows, by the staged epilogue (the host
     * launches this kernel only on outputs whose rows take 16-byte stores: cuda_backend.c
     * out_vec_ok), which needs the Q buffer. The two others hand it (and its row ids and
     * task) back to the producer first, which can then load item k + 2 while they store: a
     * chunk of a split tile leaves its partial results, pass 1 of two in fp16 and f32 plans
     * its f32 workspace rows (bf16 plans' fp16 rows go through the staged one, v10.3). One
     * epilogue for the output kept pass 2's code ~25% smaller than with column-pair stores
     * beside it, which were also 3-11% slower (bench/NOTES.md v9.6, v11). */
    const int4 tc = sTask[qb].c; /* b, h, b * heads + h */
    if (SPLAT_ATTN_EPI == SPLAT_EPI_SPLIT ? slot < 0 : SPLAT_ATTN_PASS != 1 || SPLAT_ROWPART_HALF) {
      if (SPLAT_WS_STAGED) splat_mbar_wait(&pfull[cw], k & 1u);
      splat_ws_store_staged(P, o, m, l, tc.x, tc.y, sRow, sQ + qb * SPLAT_TILE_BYTES(SPLAT_TQ), cw,
                            warp, lane, nrows, sStaged);
      /* The buffer's next Q may come by TMA (the async proxy): after these generic
       * accesses. */
      splat_fence_proxy_async();
      splat_mbar_arrive(&qempty[qb]);
    }
#if SPLAT_ATTN_EPI == SPLAT_EPI_SPLIT || (SPLAT_ATTN_PASS == 1 && !SPLAT_ROWPART_HALF)
    else {
      const int row[2] = {sRow[r0], sRow[r0 + 8]};
      splat_mbar_arrive(&qempty[qb]);
      if (SPLAT_ATTN_EPI == SPLAT_EPI_SPLIT)
        splat_attn_store_part<SPLAT_NO>(P, o, m, l, slot, tc.z, ta.z, r0, nrows, t);
      else /* pass 1's f32 workspace rows */
        splat_attn_store<SPLAT_NO>(P, o, m, l, tc.x, tc.y, row, r0, nrows, t);
    }
#endif
    SPLAT_WS_MARK(wg, k, 6);          /* trace: the epilogue is done */
    SPLAT_WS_MARK_VALUE(wg, k, 7, n); /* trace: the ring position */
    R += (uint32_t)nruns;
    k++;
  }
}

#endif
