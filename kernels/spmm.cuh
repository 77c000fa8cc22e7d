/* spmm.cuh — R-SpMM: out[i] = sum_n probs[i, n] * V[col_n(i)]; empty rows give zeros.
 *
 * SPLAT_SPMM_TILE_NAME (f16/bf16 V, tensor cores): one CTA of SPLAT_WARPS warps per
 * (query tile, batch*head); warp w owns rows [16w, 16w+16) and a 16 x head_dim fp32
 * accumulator in registers. For each key run and each key sub-tile of SPLAT_KT gathered
 * keys, the V rows are gathered into a double-buffered shared stage with cp.async
 * (keys >= seq_k zero-filled), each warp builds its 16 x KT slice of P in shared memory
 * from the values through the row's interval table for the run's group (0 outside the
 * row's intervals; values rounded to V's dtype), and O += P V runs on mma.sync
 * m16n8k16. O is written once, each tile row to its original (unpermuted) row. Every
 * regular row belongs to exactly one query tile, so rows without runs get zeros here.
 *
 * SPLAT_SPMM_ROWS_NAME (any dtype, any strides): one warp per row, lanes own head_dim
 * columns lane, lane+32, ...; entries are fetched 32 at a time (probability and
 * column) and broadcast by shuffles. Used for the irregular remainder, f32, and
 * layouts the tile kernel does not take.
 *
 * Prelude: SPLAT_DT (V, out), SPLAT_PDT (probs), SPLAT_HEAD_DIM, SPLAT_MAX_SEGS,
 * SPLAT_WARPS, SPLAT_KT, SPLAT_TILE_K, SPLAT_STAGES, SPLAT_ROW_WARPS, kernel names. */

#include "common.cuh"
#include "pipeline.cuh"

#define SPLAT_DC ((SPLAT_HEAD_DIM + 31) / 32) /* head_dim columns per lane, row kernel */

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

#if SPLAT_DT != SPLAT_F32 && !defined(SPLAT_NO_TILE)

#define SPLAT_DP ((SPLAT_HEAD_DIM + 15) / 16 * 16) /* head_dim padded to 16 */
#define SPLAT_LDV (SPLAT_DP + 8)                   /* shared V row stride (halves) */
#define SPLAT_LDP (SPLAT_KT + 8)                   /* shared P row stride (halves) */
#define SPLAT_TQ (16 * SPLAT_WARPS)
#define SPLAT_THREADS (32 * SPLAT_WARPS)
#define SPLAT_CHUNKS (SPLAT_DP / 8)
#define SPLAT_PCH ((SPLAT_KT / 8 + 8) / 8) /* 16-byte P chunks per lane and row piece */
/* 3 CTAs per SM (168 registers): d128 fits 3 in shared memory too; 4 would spill. */
#define SPLAT_MIN_CTAS (SPLAT_WARPS > 4 ? 1 : 3)

/* Dynamic shared memory of the tile kernel, bytes (kgen.c computes the same): the V
 * ring, the P tile, STAGES interval tables + counts, row ids. */
#define SPLAT_SPMM_SMEM                                                 \
  (SPLAT_STAGES * SPLAT_KT * SPLAT_LDV * 2 + SPLAT_TQ * SPLAT_LDP * 2 + \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4)

static_assert(
    SPLAT_SPMM_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

/* Gathers V rows of key sub-tile g0 .. g0 + KT of a run into a shared stage. */
SPLAT_DEV void splat_spmm_load_v(const splat_spmm_params &P, const splat_dev_run &run, int64_t g0,
                                 int64_t vo, uint16_t *stage) {
  splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
      (const uint16_t *)P.v.data, vo, P.v.s2, P.pat.seq_k, run, g0,
      [&](int kk, int ch) { return stage + kk * SPLAT_LDV + ch * 8; });
}

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_MIN_CTAS)
    SPLAT_SPMM_TILE_NAME(const splat_spmm_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  uint16_t *sV = (uint16_t *)splat_smem;
  uint16_t *sP = sV + SPLAT_STAGES * SPLAT_KT * SPLAT_LDV;
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
  /* P rows by 16-byte loads: same dtype as V, contiguous, 16-byte aligned base. */
  const bool vec =
      SPLAT_PDT == SPLAT_DT && P.probs.s3 == 1 && (((unsigned long long)P.probs.data) & 15) == 0;
  const int nsub_tile = SPLAT_TILE_K / SPLAT_KT;
  uint16_t *wp = sP + 16 * warp * SPLAT_LDP; /* this warp's 16 x KT slice of P */

  for (int64_t bh = bh0; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    const int64_t hk = h / P.shape.heads_per_kv;
    const int64_t vo = splat_off(P.v, b, hk, 0);
    float acc[SPLAT_DP / 8][4];
#pragma unroll
    for (int j = 0; j < SPLAT_DP / 8; j++) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;

    __syncthreads(); /* sRow is in; the previous (b, h) is done with the tables */
    /* One pipeline over the key sub-tiles of all runs (see sddmm.cuh). */
    splat_pipe pipe = {0, 0, 0};
    auto issue = [&]() {
      splat_pipe_issue<SPLAT_TQ, SPLAT_STAGES, SPLAT_KT>(
          pipe, P.pat, tile, nrows, nsub_tile, sRow, sIv, sNiv,
          [&](const splat_dev_run &run, int64_t g0, int s) {
            splat_spmm_load_v(P, run, g0, vo, sV + s * SPLAT_KT * SPLAT_LDV);
          });
    };
#pragma unroll
    for (int s = 0; s < SPLAT_STAGES - 1; s++) issue();
    __syncthreads(); /* the first run's tables are in */

    int ci = 0, cs = 0, it = 0;
    while (ci < tile.nruns) {
      issue();
      const splat_dev_run run = P.pat.runs[tile.run_begin + ci];
      const int32_t g0 = run.base + cs * SPLAT_KT;
      const int tb = ci % SPLAT_STAGES;
      /* P loads for this sub-tile go out before waiting for V: each row's first interval
       * piece in the sub-tile, 8 lanes per row, 4 rows per pass, by 16-byte chunks of the
       * row's contiguous value entries (element by element in partial chunks). */
      uint4 buf[4][SPLAT_PCH];
      int64_t pd0[4];
      int plen[4], psrc[4], pq[4];
#pragma unroll
      for (int pass = 0; pass < 4; pass++) {
        const int rl = 4 * pass + (lane >> 3), r = 16 * warp + rl;
        plen[pass] = 0;
        pq[pass] = -1;
        pd0[pass] = 0;
        psrc[pass] = 0;
        if (warp_active && r < nrows) {
          const int niv = sNiv[tb * SPLAT_TQ + r];
          const splat_ival *iv = sIv + (tb * SPLAT_TQ + r) * SPLAT_MAX_SEGS;
          for (int q = 0; q < niv; q++) {
            int32_t a, x;
            const int len = splat_ival_clip(*(const int4 *)(iv + q), g0, SPLAT_KT, &a, &x);
            if (len > 0) {
              plen[pass] = len;
              pq[pass] = q;
              pd0[pass] = splat_off(P.probs, b, h, sRow[r]) + x;
              psrc[pass] = rl * SPLAT_LDP + (a - g0);
              break;
            }
          }
        }
        if (!vec) plen[pass] = 0;
        const int64_t d0 = pd0[pass], d1 = d0 + plen[pass];
        const uint16_t *pp = (const uint16_t *)P.probs.data;
#pragma unroll
        for (int k = 0; k < SPLAT_PCH; k++) {
          const int64_t e0 = ((d0 >> 3) + sub + 8 * k) << 3;
          uint4 v = make_uint4(0u, 0u, 0u, 0u);
          if (e0 < d1) {
            if (e0 >= d0 && e0 + 8 <= d1) {
              v = *(const uint4 *)(pp + e0);
            } else {
              uint32_t w[4];
#pragma unroll
              for (int e = 0; e < 4; e++) {
                const int64_t x0 = e0 + 2 * e, x1 = x0 + 1;
                const uint32_t lo = x0 >= d0 && x0 < d1 ? pp[x0] : 0u;
                const uint32_t hi = x1 >= d0 && x1 < d1 ? pp[x1] : 0u;
                w[e] = lo | (hi << 16);
              }
              v = make_uint4(w[0], w[1], w[2], w[3]);
            }
          }
          buf[pass][k] = v;
        }
      }
      splat_cp_async_wait<SPLAT_STAGES - 1>();
      __syncthreads(); /* stage `it` is in */
      if (warp_active) {
        /* Zeros, then the pieces: entries outside the row's intervals stay 0. */
        for (int c = lane; c < 16 * (SPLAT_KT / 8); c += 32) {
          *(uint4 *)(wp + (c / (SPLAT_KT / 8)) * SPLAT_LDP + (c % (SPLAT_KT / 8)) * 8) =
              make_uint4(0u, 0u, 0u, 0u);
        }
        __syncwarp();
#pragma unroll
        for (int pass = 0; pass < 4; pass++) {
          const int64_t d0 = pd0[pass], d1 = d0 + plen[pass];
#pragma unroll
          for (int k = 0; k < SPLAT_PCH; k++) {
            const int64_t e0 = ((d0 >> 3) + sub + 8 * k) << 3;
            if (e0 < d1) {
              const uint32_t w[4] = {buf[pass][k].x, buf[pass][k].y, buf[pass][k].z,
                                     buf[pass][k].w};
#pragma unroll
              for (int e = 0; e < 8; e++) {
                const int64_t x = e0 + e;
                if (x >= d0 && x < d1)
                  wp[psrc[pass] + (int)(x - d0)] = (uint16_t)(w[e >> 1] >> (16 * (e & 1)));
              }
            }
          }
        }
        /* Other pieces (a row with two intervals in one sub-tile), and every piece when
         * the values are not 16-byte loadable: element by element. */
#pragma unroll
        for (int pass = 0; pass < 4; pass++) {
          const int rl = 4 * pass + (lane >> 3), r = 16 * warp + rl;
          if (r < nrows && (!vec || pq[pass] >= 0)) {
            const int niv = sNiv[tb * SPLAT_TQ + r];
            const splat_ival *iv = sIv + (tb * SPLAT_TQ + r) * SPLAT_MAX_SEGS;
            const int64_t po = splat_off(P.probs, b, h, sRow[r]);
            for (int q = vec ? pq[pass] + 1 : 0; q < niv; q++) {
              int32_t a, x;
              const int len = splat_ival_clip(*(const int4 *)(iv + q), g0, SPLAT_KT, &a, &x);
              for (int k2 = sub; k2 < len; k2 += 8) {
                const float pv =
                    splat_ld<SPLAT_PDT>(P.probs.data, po + (int64_t)(x + k2) * P.probs.s3);
                wp[rl * SPLAT_LDP + (a - g0) + k2] = splat_to16<SPLAT_DT>(pv);
              }
            }
          }
        }
        __syncwarp();
        const uint16_t *st = sV + (it % SPLAT_STAGES) * SPLAT_KT * SPLAT_LDV;
#pragma unroll
        for (int kk = 0; kk < SPLAT_KT / 16; kk++) {
          uint32_t a[4];
          splat_ldmatrix_x4(a, wp + (lane & 15) * SPLAT_LDP + kk * 16 + (lane >> 4) * 8);
#pragma unroll
          for (int j = 0; j < SPLAT_DP / 8; j += 2) {
            uint32_t bv[4];
            splat_ldmatrix_x4_trans(
                bv, st + (kk * 16 + (lane & 15)) * SPLAT_LDV + 8 * j + (lane >> 4) * 8);
            const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
            splat_mma16816<SPLAT_DT>(acc[j], a, b0);
            splat_mma16816<SPLAT_DT>(acc[j + 1], a, b1);
          }
        }
      }
      __syncthreads(); /* stage `it` may be refilled, the P slice rebuilt */
      it++;
      if (++cs == run.ntiles * nsub_tile) {
        ci++;
        cs = 0;
      }
    }
    /* O rows of this warp, to their original rows; every row of the tile is written
     * (rows without runs get zeros). Pairs of columns by 4-byte stores when aligned. */
    if (warp_active) {
#pragma unroll
      for (int half = 0; half < 2; half++) {
        const int r = half ? r1 : r0;
        if (r < nrows) {
          const int64_t oo = splat_off(P.out, b, h, sRow[r]);
          const bool pair =
              P.out.s3 == 1 && ((((unsigned long long)P.out.data) >> 1) + oo) % 2 == 0;
#pragma unroll
          for (int j = 0; j < SPLAT_DP / 8; j++) {
            const int d = 8 * j + 2 * (lane & 3);
            if (pair && d + 1 < SPLAT_HEAD_DIM) {
              *(uint32_t *)((uint16_t *)P.out.data + oo + d) =
                  splat_pack2<SPLAT_DT>(acc[j][2 * half], acc[j][2 * half + 1]);
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

#endif
