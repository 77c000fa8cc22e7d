/* spmm.cuh — R-SpMM: out[i] = sum_n probs[i, n] * V[col_n(i)]; empty rows give zeros.
 *
 * SPLAT_SPMM_TILE_NAME (tensor cores: f16/bf16 V on mma.sync m16n8k16, f32 V as 3xTF32 on
 * m16n8k8): one CTA of SPLAT_WARPS warps per (query tile, batch*head); warp w owns rows
 * [16w, 16w+16) and a 16 x head_dim fp32 accumulator in registers. For each key run and
 * each key sub-tile of SPLAT_KT gathered keys, the V rows are gathered into a
 * double-buffered shared stage with cp.async (keys >= seq_k zero-filled), each warp builds
 * its 16 x KT slice of P in shared memory from the values through the row's interval table
 * for the run's group (0 outside the row's intervals; values rounded to V's dtype, f32 kept
 * as is), and O += P V runs on the tensor cores. f32: P and V are split into tf32 hi + lo
 * as they are loaded and hi*hi, lo*hi + hi*lo go to two accumulators of the sub-tile
 * (splat_mma1688_3xtf32), added to O by FADDs at its end; above head_dim 128, O's columns
 * in two panels, each a walk of its own over the keys (SPLAT_OPANELS). O is written once,
 * each tile row to its original (unpermuted) row. Every regular row belongs to exactly one
 * query tile, so rows without runs get zeros here.
 *
 * SPLAT_SPMM_ROWS_NAME (any dtype, any strides): one warp per row, lanes own head_dim
 * columns lane, lane+32, ...; entries are fetched 32 at a time (probability and
 * column) and broadcast by shuffles. Used for the irregular remainder, head_dims the tile
 * kernel does not take and layouts it does not take.
 *
 * Prelude: SPLAT_DT (V, out), SPLAT_PDT (probs), SPLAT_HEAD_DIM, SPLAT_MAX_SEGS,
 * SPLAT_WARPS, SPLAT_KT, SPLAT_TILE_K, SPLAT_STAGES, SPLAT_ROW_WARPS, kernel names. */

#include "common.cuh"
#include "pipeline.cuh"

#define SPLAT_DC ((SPLAT_HEAD_DIM + 31) / 32) /* head_dim columns per lane, row kernel */

#if !defined(SPLAT_NO_ROWS) /* the tile kernel's program (kgen.c) */
extern "C" __global__ void __launch_bounds__(SPLAT_ROW_WARPS * 32)
    SPLAT_SPMM_ROWS_NAME(const splat_spmm_params P) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t pos = (int64_t)blockIdx.x * SPLAT_ROW_WARPS + warp;
  if (pos >= P.shape.row_count) return;
  const int64_t i = P.pat.perm[P.shape.row_begin + pos];
  const splat_row row = splat_row_of(P.pat, i);
  const int64_t BH = P.shape.batch * P.shape.heads;
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    const int64_t hk = h / P.shape.heads_per_kv;
    const int64_t po = splat_off(P.probs, b, h, i), vo = splat_off(P.v, b, hk, 0);
    float acc[SPLAT_DC];
#pragma unroll
    for (int t = 0; t < SPLAT_DC; t++) acc[t] = 0.f;
    for (int64_t base = 0; base < row.nnz; base += 32) {
      float p = 0.f;
      int32_t j = 0;
      if (base + lane < row.nnz) {
        p = splat_ld<SPLAT_PDT>(P.probs.data, po + (base + lane) * P.probs.s3);
        j = (int32_t)splat_row_col(P.pat, row, base + lane);
      }
      const int cnt = row.nnz - base < 32 ? (int)(row.nnz - base) : 32;
      for (int t = 0; t < cnt; t++) {
        const float pt = __shfl_sync(0xffffffffu, p, t);
        const int64_t vj = vo + (int64_t)__shfl_sync(0xffffffffu, j, t) * P.v.s2;
#pragma unroll
        for (int c = 0; c < SPLAT_DC; c++) {
          const int d = lane + 32 * c;
          if (d < SPLAT_HEAD_DIM)
            acc[c] = fmaf(pt, splat_ld<SPLAT_DT>(P.v.data, vj + d * P.v.s3), acc[c]);
        }
      }
    }
    const int64_t oo = splat_off(P.out, b, h, i);
#pragma unroll
    for (int c = 0; c < SPLAT_DC; c++) {
      const int d = lane + 32 * c;
      if (d < SPLAT_HEAD_DIM) splat_st<SPLAT_DT>(P.out.data, oo + d * P.out.s3, acc[c]);
    }
  }
}
#endif /* !SPLAT_NO_ROWS */

#if !defined(SPLAT_NO_TILE)

/* Shared V and P elements: V's dtype (16-bit as raw words). */
#if SPLAT_DT == SPLAT_F32
#define SPLAT_KSTEP 8 /* mma k step: m16n8k8 tf32 */
#define SPLAT_VT float
#else
#define SPLAT_KSTEP 16 /* m16n8k16 f16/bf16 */
#define SPLAT_VT uint16_t
#endif
#define SPLAT_EPC (16 / (int)sizeof(SPLAT_VT)) /* elements per 16-byte chunk */
#define SPLAT_DP ((SPLAT_HEAD_DIM + SPLAT_KSTEP - 1) / SPLAT_KSTEP * SPLAT_KSTEP)
/* Shared row strides (elements): V rows padded by 16 bytes, P rows by 8 elements, so the
 * fragment loads are conflict-free. 16-bit: rows an odd number of 16 bytes apart (mod 128),
 * ldmatrix's 8 rows in distinct banks. f32 (the tile kernel's 3xTF32 loop): B's loads of
 * rows 2t, 2t + 1 (t < 4) at column g (g < 8) need 2 LDV = 8 (mod 16) words, A's float2
 * loads of rows g at columns 2t, 2t + 1 (a half-warp at a time) LDP = 8 (mod 16) words
 * (KT is a multiple of 16). */
#define SPLAT_LDV (SPLAT_DP + SPLAT_EPC)
#define SPLAT_LDP (SPLAT_KT + 8)
#define SPLAT_TQ (16 * SPLAT_WARPS)
#define SPLAT_THREADS (32 * SPLAT_WARPS)
#define SPLAT_CHUNKS (SPLAT_DP / SPLAT_EPC)

#if SPLAT_DT == SPLAT_F32
/* f32: the column blocks (8 columns) of O whose sub-tile accumulators (hi*hi and the small
 * products) are live at once: all up to head_dim 64; above, panels of 4 blocks, each a pass
 * over the P slice that loads and splits its A fragments again (8 blocks spilled at head_dim
 * 128 within 168 registers). */
#define SPLAT_PAN (SPLAT_DP / 8 <= 8 ? SPLAT_DP / 8 : 4)
/* Above head_dim 128, O in two column panels, each a walk of its own over the keys (V's
 * sub-tiles and the P slice loaded again): all of O is up to 128 registers a thread at
 * head_dim 256, which spill beside the panel's accumulators. */
#define SPLAT_OPANELS (SPLAT_DP > 128 ? 2 : 1)
#else
#define SPLAT_OPANELS 1
#define SPLAT_PCR (SPLAT_KT / 8)        /* 16-byte P chunks per sub-tile row */
#define SPLAT_PIT (16 * SPLAT_PCR / 32) /* P chunks per lane and sub-tile */
/* P items loaded before the wait for V (their words stay in registers across it): all of
 * them up to head_dim 64, half with the larger accumulator of head_dim 128. */
#define SPLAT_PPRE (SPLAT_DP > 64 ? SPLAT_PIT / 2 : SPLAT_PIT)
static_assert(SPLAT_PIT >= 1 && SPLAT_PIT <= 4 && 32 % SPLAT_PCR == 0,
              "the P items of a lane keep their state in 16 bits each of one 64-bit word");
#endif
/* 3 CTAs per SM (168 registers): d128 fits 3 in shared memory too; 4 would spill. f32 above
 * head_dim 64: 2 (its column panels spilled within 168 registers at head_dims 104-120, and
 * with 16-key sub-tiles at 72-128). */
#define SPLAT_MIN_CTAS (SPLAT_WARPS > 4 ? 1 : SPLAT_DT == SPLAT_F32 && SPLAT_DP > 64 ? 2 : 3)
/* Columns of O a walk over the keys computes: whole 8-column blocks, the first panel the
 * larger. */
#define SPLAT_OW ((SPLAT_DP / 8 + SPLAT_OPANELS - 1) / SPLAT_OPANELS * 8)

/* Dynamic shared memory of the tile kernel, bytes (kgen.c computes the same): the V
 * ring, the P tile, STAGES interval tables + counts, row ids. */
#define SPLAT_SPMM_SMEM                                                                  \
  ((SPLAT_STAGES * SPLAT_KT * SPLAT_LDV + SPLAT_TQ * SPLAT_LDP) * (int)sizeof(SPLAT_VT) + \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4)

static_assert(
    SPLAT_SPMM_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

/* Gathers V rows of key sub-tile g0 .. g0 + KT of a run into a shared stage. */
SPLAT_DEV void splat_spmm_load_v(const splat_spmm_params &P, const splat_dev_run &run, int64_t g0,
                                 int64_t vo, SPLAT_VT *stage) {
  splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
      (const SPLAT_VT *)P.v.data, vo, P.v.s2, P.pat.seq_k, run, g0,
      [&](int kk, int ch) { return stage + kk * SPLAT_LDV + ch * SPLAT_EPC; });
}

/* A value as the P slice holds it: V's dtype. */
SPLAT_DEV SPLAT_VT splat_spmm_pval(float v) {
#if SPLAT_DT == SPLAT_F32
  return v;
#else
  return splat_to16<SPLAT_DT>(v);
#endif
}

#if SPLAT_DT != SPLAT_F32

/* The sub-tile's P slice where the values are V's 16-bit dtype in contiguous rows with a
 * 4-byte aligned base: a lane item is 8 columns c8 .. c8 + 7 of tile row r. Finds the
 * first interval of the row's table (for the run) that meets them and loads its values
 * there as 4-byte words into w (zeros on entry; 5 words, as the first value may sit in a
 * word's high half). A word whose other half is outside the interval's values is read as
 * the one 16-bit half it needs, so no entry outside M(i) is read. prow: the row's values
 * (device). Returns the item's state for splat_spmm_p_store: bit 0 the words' parity,
 * bits 1-3 and 4-6 the first and last column the interval covers, bits 8.. the interval
 * + 1 (0: none). */
SPLAT_DEV int splat_spmm_p_load(const splat_ival *iv_rows, const int *niv_rows, int r, int c8,
                                int32_t g0, const uint16_t *prow, uint32_t (&w)[5]) {
  const int niv = niv_rows[r];
  for (int q = 0; q < niv; q++) {
    const int4 v = *(const int4 *)(iv_rows + r * SPLAT_MAX_SEGS + q);
    const int32_t lo = max(v.x, g0 + c8), hi = min(v.y, g0 + c8 + 7);
    if (lo > hi) continue;
    const int clo = lo - g0 - c8, chi = hi - g0 - c8;
    const int32_t e0 = v.z - v.x + g0 + c8, vmax = v.z + (v.y - v.x); /* value indices */
    const int par = (int)((((unsigned long long)prow >> 1) + (unsigned)e0) & 1u);
    /* Word k holds columns 2k - par and 2k - par + 1; words kmin .. kmax are needed, all
     * whole but for the low half of the first or the high half of the last when that
     * half is outside the interval's values. */
    const int kmin = (clo + par) >> 1, kmax = (chi + par) >> 1;
    const int32_t eb = e0 - par; /* value index of word 0's low half */
    const bool lo_ok = eb + 2 * kmin >= v.z, hi_ok = eb + 2 * kmax + 1 <= vmax;
    const uint16_t *hb = prow + eb;
#pragma unroll
    for (int k = 0; k < 5; k++) {
      if (k >= kmin && k <= kmax) {
        if ((k > kmin || lo_ok) && (k < kmax || hi_ok)) {
          w[k] = *(const uint32_t *)(hb + 2 * k);
        } else {
          w[k] = k == kmin && !lo_ok ? (uint32_t)hb[2 * k + 1] << 16 : (uint32_t)hb[2 * k];
        }
      }
    }
    return par | clo << 1 | chi << 4 | (q + 1) << 8;
  }
  return 0;
}

/* Writes splat_spmm_p_load's item to dst (shared, 8 values, 16-byte aligned): its words
 * shifted to the columns, zeros outside the interval, then any later interval of the
 * row that meets the same columns value by value (rare: a gap inside 8 columns). */
SPLAT_DEV void splat_spmm_p_store(const splat_ival *iv_rows, const int *niv_rows, int r, int c8,
                                  int32_t g0, const uint16_t *prow, const uint32_t (&w)[5],
                                  int meta, uint16_t *dst) {
  const int par = meta & 1, clo = (meta >> 1) & 7, chi = (meta >> 4) & 7, q = (meta >> 8) - 1;
  if (q < 0) {
    *(uint4 *)dst = make_uint4(0u, 0u, 0u, 0u);
    return;
  }
  uint32_t o[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const uint32_t x = par ? __funnelshift_r(w[j], w[j + 1], 16) : w[j];
    const uint32_t m = (2 * j >= clo && 2 * j <= chi ? 0xffffu : 0u) |
                       (2 * j + 1 >= clo && 2 * j + 1 <= chi ? 0xffff0000u : 0u);
    o[j] = x & m;
  }
  *(uint4 *)dst = make_uint4(o[0], o[1], o[2], o[3]);
  const int niv = niv_rows[r];
  for (int q2 = q + 1; q2 < niv; q2++) {
    const int4 v = *(const int4 *)(iv_rows + r * SPLAT_MAX_SEGS + q2);
    const int32_t lo = max(v.x, g0 + c8), hi = min(v.y, g0 + c8 + 7);
    for (int32_t g = lo; g <= hi; g++) dst[g - g0 - c8] = prow[v.z + (g - v.x)];
  }
}

#endif /* SPLAT_DT != SPLAT_F32 */

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_MIN_CTAS)
    SPLAT_SPMM_TILE_NAME(const splat_spmm_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  SPLAT_VT *sV = (SPLAT_VT *)splat_smem;
  SPLAT_VT *sP = sV + SPLAT_STAGES * SPLAT_KT * SPLAT_LDV;
  splat_ival *sIv = (splat_ival *)(sP + SPLAT_TQ * SPLAT_LDP);
  int *sNiv = (int *)(sIv + SPLAT_STAGES * SPLAT_TQ * SPLAT_MAX_SEGS);
  int *sRow = sNiv + SPLAT_STAGES * SPLAT_TQ;

  /* CTA = (query tile, batch*head, row block z): tile rows [z*TQ, z*TQ + TQ). */
  splat_dev_tile tile;
  int ti, rb, bh0;
  const int nrows = splat_tile_rows<SPLAT_TQ>(P.pat, tile, ti, rb, bh0, sRow);
  if (nrows <= 0) return;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, sub = lane & 7;
  const int64_t BH = P.shape.batch * P.shape.heads;
  const bool warp_active = 16 * warp < nrows;
  const int r0 = 16 * warp + (lane >> 2), r1 = r0 + 8;
#if SPLAT_DT != SPLAT_F32
  /* P rows by 4-byte words (splat_spmm_p_load): same dtype as V, contiguous, 4-byte
   * aligned base. */
  const bool vec =
      SPLAT_PDT == SPLAT_DT && P.probs.s3 == 1 && (((unsigned long long)P.probs.data) & 3) == 0;
#endif
  const int nsub_tile = SPLAT_TILE_K / SPLAT_KT;
  SPLAT_VT *wp = sP + 16 * warp * SPLAT_LDP; /* this warp's 16 x KT slice of P */

  for (int64_t bh = bh0; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    const int64_t hk = h / P.shape.heads_per_kv;
    const int64_t vo = splat_off(P.v, b, hk, 0);
    /* Each panel of O's columns (one but f32 above head_dim 128): a walk over the keys. */
#pragma unroll 1
    for (int panel = 0; panel < SPLAT_OPANELS; panel++) {
      const int c0 = panel * SPLAT_OW; /* O's first column */
      float acc[SPLAT_OW / 8][4]; /* O: column block j = columns c0 + 8j .. c0 + 8j + 7 */
#pragma unroll
      for (int j = 0; j < SPLAT_OW / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

      __syncthreads(); /* sRow is in; the previous walk is done with the tables */
#if SPLAT_DT != SPLAT_F32
      /* The values of (b, h), and of row r (of the tile) in them, for the P items. */
      const uint16_t *pbh = (const uint16_t *)P.probs.data + b * P.probs.s0 + h * P.probs.s1;
      auto prow = [&](int r) { return pbh + (int64_t)sRow[r] * P.probs.s2; };
#endif
      /* One pipeline over the key sub-tiles of all runs (see sddmm.cuh). */
      splat_pipe pipe = {0, 0, 0};
      auto issue = [&]() {
        splat_pipe_issue<SPLAT_TQ, SPLAT_STAGES, SPLAT_KT>(
            pipe, P.pat, tile, P.pat.runs + tile.run_begin, nrows, nsub_tile, sRow, sIv, sNiv,
            [&](const splat_dev_run &run, int64_t g0, int s) {
              splat_spmm_load_v(P, run, g0, vo, sV + s * SPLAT_KT * SPLAT_LDV);
            });
      };
      /* The pipeline's first STAGES - 1 sub-tiles are issued by the loop's first passes
       * (`pre`): one copy of issue(), which inlines the interval tables and the gather. */
      int ci = 0, cs = 0, it = 0;
      for (int pre = SPLAT_STAGES - 1; ci < tile.nruns;) {
        issue();
        if (pre > 0) {
          if (--pre == 0) __syncthreads(); /* the first run's tables are in */
          continue;
        }
        const splat_dev_run run = P.pat.runs[tile.run_begin + ci];
        const int32_t g0 = run.base + cs * SPLAT_KT;
        const int tb = ci % SPLAT_STAGES;
#if SPLAT_DT != SPLAT_F32
        /* P loads for this sub-tile (splat_spmm_p_load): the first SPLAT_PPRE items' go out
         * before waiting for V, the others' after it; then the slice is assembled
         * (splat_spmm_p_store). */
        uint32_t pw[SPLAT_PIT][5];
        uint64_t pmeta = 0; /* 16 bits an item */
        auto p_load = [&](int pi) {
          const int r = 16 * warp + (pi * 32 + lane) / SPLAT_PCR;
#pragma unroll
          for (int k = 0; k < 5; k++) pw[pi][k] = 0u;
          if (r < nrows) {
            pmeta |= (uint64_t)splat_spmm_p_load(sIv + tb * SPLAT_TQ * SPLAT_MAX_SEGS,
                                                 sNiv + tb * SPLAT_TQ, r, (lane % SPLAT_PCR) * 8,
                                                 g0, prow(r), pw[pi])
                     << (16 * pi);
          }
        };
        if (vec && warp_active) {
#pragma unroll
          for (int pi = 0; pi < SPLAT_PPRE; pi++) p_load(pi);
        }
#endif
        splat_cp_async_wait<SPLAT_STAGES - 1>();
        __syncthreads(); /* stage `it` is in */
        if (warp_active) {
#if SPLAT_DT != SPLAT_F32
          if (vec) {
#pragma unroll
            for (int pi = SPLAT_PPRE; pi < SPLAT_PIT; pi++) p_load(pi);
#pragma unroll
            for (int pi = 0; pi < SPLAT_PIT; pi++) {
              const int rl = (pi * 32 + lane) / SPLAT_PCR, c8 = (lane % SPLAT_PCR) * 8;
              splat_spmm_p_store(sIv + tb * SPLAT_TQ * SPLAT_MAX_SEGS, sNiv + tb * SPLAT_TQ,
                                 16 * warp + rl, c8, g0, prow(16 * warp + rl), pw[pi],
                                 (int)(pmeta >> (16 * pi)) & 0xffff, wp + rl * SPLAT_LDP + c8);
            }
          } else
#endif
          {
            /* Any dtype or layout (f32 always): zeros, then every piece element by element. */
            constexpr int PC = SPLAT_KT / SPLAT_EPC; /* 16-byte chunks of a slice row */
            for (int c = lane; c < 16 * PC; c += 32) {
              *(uint4 *)(wp + (c / PC) * SPLAT_LDP + (c % PC) * SPLAT_EPC) =
                  make_uint4(0u, 0u, 0u, 0u);
            }
            __syncwarp();
#pragma unroll
            for (int pass = 0; pass < 4; pass++) {
              const int rl = 4 * pass + (lane >> 3), r = 16 * warp + rl;
              if (r < nrows) {
                const int niv = sNiv[tb * SPLAT_TQ + r];
                const splat_ival *iv = sIv + (tb * SPLAT_TQ + r) * SPLAT_MAX_SEGS;
                const int64_t po = splat_off(P.probs, b, h, sRow[r]);
                for (int q = 0; q < niv; q++) {
                  int32_t a, x;
                  const int len = splat_ival_clip(*(const int4 *)(iv + q), g0, SPLAT_KT, &a, &x);
                  for (int k2 = sub; k2 < len; k2 += 8) {
                    const float pv =
                        splat_ld<SPLAT_PDT>(P.probs.data, po + (int64_t)(x + k2) * P.probs.s3);
                    wp[rl * SPLAT_LDP + (a - g0) + k2] = splat_spmm_pval(pv);
                  }
                }
              }
            }
          }
          __syncwarp();
          const SPLAT_VT *st = sV + (it % SPLAT_STAGES) * SPLAT_KT * SPLAT_LDV;
#if SPLAT_DT == SPLAT_F32
          /* 3xTF32 on m16n8k8. Fragments (PTX ISA, mma.m16n8k8 .tf32; g = lane / 4, t = lane %
           * 4; (row, column)): A (16 x 8 of P) a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3
           * (g + 8, t + 4); B (8 x 8 of V) b0 (t, g), b1 (t + 4, g); C c0, c1 (g, 2t), (g, 2t + 1)
           * and c2, c3 the same in row g + 8: acc's layout, as with m16n8k16. The product sums
           * over k, so any order of a k step's 8 keys serves where A and B agree: k index t is
           * key 2t, t + 4 key 2t + 1. Then a0, a2 (a1, a3) are one float2 of the P slice and b0,
           * b1 rows 2t and 2t + 1 of the V stage, all conflict-free (SPLAT_LDV, SPLAT_LDP).
           * A panel of SPLAT_PAN column blocks at a time: hi*hi and the small products
           * accumulate over the sub-tile's KT / 8 k steps in registers of their own, then go to
           * O by FADDs (round to nearest). The tensor cores' accumulation truncates every k step
           * at the accumulator's ulp (bench/NOTES.md v21): kept over a row's whole keys, that
           * bias grows with the row (in v21's model of it, O's error reached the GPU check's
           * bound, twice a naive fp32 implementation's, at ~1,000 keys a row, 2x it at 4,097);
           * flushed per sub-tile it stays at 0.07-0.18x of the bound from 129 to 4,097 keys. */
          const int g = lane >> 2, t = lane & 3;
          const float *pa = wp + g * SPLAT_LDP + 2 * t; /* A: row g, keys 2t and 2t + 1 */
          const float *vb = st + 2 * t * SPLAT_LDV + c0 + g; /* B: key 2t, column c0 + g */
          constexpr int NB = SPLAT_OW / 8; /* O's blocks a walk; nb: those below SPLAT_DP */
          const int nb = SPLAT_OPANELS == 1 ? NB : (SPLAT_DP - c0) / 8;
#pragma unroll
          for (int j0 = 0; j0 < NB; j0 += SPLAT_PAN) {
            float hi[SPLAT_PAN][4], small[SPLAT_PAN][4];
#pragma unroll
            for (int j = 0; j < SPLAT_PAN; j++) {
#pragma unroll
              for (int e = 0; e < 4; e++) hi[j][e] = small[j][e] = 0.f;
            }
#pragma unroll 2
            for (int kk = 0; kk < SPLAT_KT / 8; kk++) {
              const float2 p0 = *(const float2 *)(pa + 8 * kk);
              const float2 p1 = *(const float2 *)(pa + 8 * SPLAT_LDP + 8 * kk);
              uint32_t ah[4], al[4];
              splat_tf32_split(p0.x, ah[0], al[0]);
              splat_tf32_split(p1.x, ah[1], al[1]);
              splat_tf32_split(p0.y, ah[2], al[2]);
              splat_tf32_split(p1.y, ah[3], al[3]);
#pragma unroll
              for (int j = 0; j < SPLAT_PAN && j0 + j < NB; j++) {
                const float *v = vb + 8 * kk * SPLAT_LDV + 8 * (j0 + j);
                if (j0 + j < nb) splat_mma1688_3xtf32(hi[j], small[j], ah, al, v[0], v[SPLAT_LDV]);
              }
            }
#pragma unroll
            for (int j = 0; j < SPLAT_PAN && j0 + j < NB; j++) {
#pragma unroll
              for (int e = 0; e < 4; e++) acc[j0 + j][e] += hi[j][e] + small[j][e];
            }
          }
#else
#pragma unroll
          for (int kk = 0; kk < SPLAT_KT / 16; kk++) {
            uint32_t a[4];
            splat_ldmatrix_x4(a, wp + (lane & 15) * SPLAT_LDP + kk * 16 + (lane >> 4) * 8);
            splat_mma_pv_k16<SPLAT_DT, SPLAT_DP / 8, SPLAT_LDV>(a, st, kk, lane,
                                                                [&](int j) { return acc[j]; });
          }
#endif
        }
        __syncthreads(); /* stage `it` may be refilled, the P slice rebuilt */
        splat_pipe_consumed(ci, cs, it, run, nsub_tile);
      }
      /* O rows of this warp, to their original rows; every row of the tile is written
       * (rows without runs get zeros). Pairs of columns by one store when aligned. */
      if (warp_active) {
#pragma unroll
        for (int half = 0; half < 2; half++) {
          const int r = half ? r1 : r0;
          if (r < nrows) {
            const int64_t oo = splat_off(P.out, b, h, sRow[r]);
            const bool pair = P.out.s3 == 1 && splat_pair_aligned<SPLAT_DT>(P.out.data, oo);
#pragma unroll
            for (int j = 0; j < SPLAT_OW / 8; j++) {
              const int d = c0 + 8 * j + 2 * (lane & 3);
              if (pair && d + 1 < SPLAT_HEAD_DIM) {
                splat_st_pair<SPLAT_DT>(P.out.data, oo + d, acc[j][2 * half], acc[j][2 * half + 1]);
              } else {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                  if (d + e < SPLAT_HEAD_DIM)
                    splat_st<SPLAT_DT>(P.out.data, oo + (d + e) * P.out.s3, acc[j][2 * half + e]);
                }
              }
            }
          }
        }
      }
    }
  }
}

#endif
