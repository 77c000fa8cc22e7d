/* softmax.cuh — row softmax on ACSR values: probs[n] = exp(scale * s[n] - m) / sum over
 * the row's entries n < nnz(i) (padding is never read or written), fp32 math.
 *
 * SPLAT_SOFTMAX_ROWS_NAME: one warp per row (rows are at most W long): pass 1 keeps an
 * online (max, sum) per lane over entries lane, lane+32, ..., in base-2 with log2(e)
 * folded into the scale, combined across the warp by shuffles; pass 2 writes
 * exp2(t - max) / sum. In place (probs == scores) is fine: each entry is read and then
 * written by the same thread. lse (optional) = natural log-sum-exp; an empty row gets
 * lse = -inf and nothing else. Rows: permuted positions [row_begin, row_begin + row_count).
 * Contiguous values (s3 == 1, 16-byte aligned base, scores and probs of one layout): the
 * row's entries are walked by aligned 16-byte chunks (lane c takes chunks c, c+32, ...;
 * the row's first and last chunks may be partial and are masked), with a 16-byte store
 * for each whole chunk of probs of the same dtype (element stores in partial chunks, so
 * a neighbouring row's entries are never written). Rows of up to 32 x SPLAT_SM_RC chunks
 * keep their chunks in registers (one load each, splat_softmax_row_regs); longer ones
 * load each chunk in both passes (splat_softmax_row_vec). SPLAT_SM_RC is in params.cuh,
 * where the host's launch reads it too.
 *
 * Prelude: SPLAT_SDT (scores), SPLAT_PDT (probs), SPLAT_ROW_WARPS, the kernel name. */

#include "common.cuh"

/* Online (max, sum) of exp2 over one lane's entries: adds t (base-2 scaled score). */
SPLAT_DEV void splat_online_add(float t, float &m, float &l) {
  if (t > m) {
    l = l * exp2f(m - t) + 1.f;
    m = t;
  } else {
    l += exp2f(t - m);
  }
}
/* Combines the lanes' (m, l) into the row's max M and sum L (lanes with no entry: m =
 * -inf, l = 0). */
SPLAT_DEV void splat_online_reduce(float m, float l, float &M, float &L) {
  M = splat_warp_max(m);
  l = m == SPLAT_NEG_INF ? 0.f : l * exp2f(m - M);
  L = splat_warp_sum(l);
}

#define SPLAT_SM_SE (SPLAT_SDT == SPLAT_F32 ? 4 : 8) /* scores per 16-byte chunk */
#define SPLAT_SM_PE (SPLAT_PDT == SPLAT_F32 ? 4 : 8) /* probs per 16-byte chunk */

/* Chunk c (aligned 16-byte) of scores as floats, entries outside [so, so + nnz) as 0:
 * one 16-byte load when the chunk is whole, element loads otherwise (never past the
 * row, so never past the buffer). */
SPLAT_DEV void splat_softmax_chunk(const splat_softmax_params &P, int64_t c, int64_t so,
                                   int64_t nnz, float f[SPLAT_SM_SE]) {
  const int64_t x0 = c * SPLAT_SM_SE;
  if (x0 >= so && x0 + SPLAT_SM_SE <= so + nnz) {
    const uint4 v = ((const uint4 *)P.scores.data)[c];
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++) {
#if SPLAT_SDT == SPLAT_F32
      f[e] = __uint_as_float(w[e]);
#else
      const uint16_t hv = (uint16_t)(w[e >> 1] >> (16 * (e & 1)));
      f[e] = SPLAT_SDT == SPLAT_F16 ? splat_f16_to_f32(hv) : splat_bf16_to_f32(hv);
#endif
    }
  } else {
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++) {
      const int64_t x = x0 + e;
      f[e] = x >= so && x < so + nnz ? splat_ld<SPLAT_SDT>(P.scores.data, x) : 0.f;
    }
  }
}

/* Entry e of a 16-byte chunk of scores, as a float. */
SPLAT_DEV float splat_softmax_entry(const uint4 &v, int e) {
  const uint32_t w = e < SPLAT_SM_SE / 2 ? (e < SPLAT_SM_SE / 4 ? v.x : v.y)
                                         : (e < 3 * SPLAT_SM_SE / 4 ? v.z : v.w);
#if SPLAT_SDT == SPLAT_F32
  return __uint_as_float(w);
#else
  const uint16_t hv = (uint16_t)(w >> (16 * (e & 1)));
  return SPLAT_SDT == SPLAT_F16 ? splat_f16_to_f32(hv) : splat_bf16_to_f32(hv);
#endif
}

/* Stores pr[0], ..., pr[SPLAT_SM_PE - 1] as probs entries [x, x + SPLAT_SM_PE), a whole
 * aligned 16-byte chunk, in one 16-byte store. */
SPLAT_DEV void splat_softmax_store_chunk(const splat_softmax_params &P, int64_t x,
                                         const float *pr) {
#if SPLAT_PDT == SPLAT_F32
  const uint4 o = make_uint4(__float_as_uint(pr[0]), __float_as_uint(pr[1]), __float_as_uint(pr[2]),
                             __float_as_uint(pr[3]));
#else
  const uint4 o =
      make_uint4(splat_pack2<SPLAT_PDT>(pr[0], pr[1]), splat_pack2<SPLAT_PDT>(pr[2], pr[3]),
                 splat_pack2<SPLAT_PDT>(pr[4], pr[5]), splat_pack2<SPLAT_PDT>(pr[6], pr[7]));
#endif
  *(uint4 *)((unsigned char *)P.probs.data + x * (16 / SPLAT_SM_PE)) = o;
}

/* Stores chunk c of probs: one 16-byte store when it is whole and probs has the scores'
 * entries per chunk, else entry by entry inside [so, so + nnz). */
SPLAT_DEV void splat_softmax_put(const splat_softmax_params &P, int64_t c, int64_t so, int64_t nnz,
                                 const float (&pr)[SPLAT_SM_SE]) {
  const int64_t x0 = c * SPLAT_SM_SE;
  if (SPLAT_SM_SE == SPLAT_SM_PE && x0 >= so && x0 + SPLAT_SM_SE <= so + nnz) {
    splat_softmax_store_chunk(P, x0, pr);
  } else {
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++) {
      const int64_t x = x0 + e;
      if (x >= so && x < so + nnz) splat_st<SPLAT_PDT>(P.probs.data, x, pr[e]);
    }
  }
}

/* The register path of a row of at most 32 x SPLAT_SM_RC chunks: lane takes chunks lane,
 * lane + 32, ... of the row (aligned 16-byte chunks of scores from the one holding entry
 * so), loads each once (16 bytes when whole; the row's first and last chunks entry by
 * entry, the rest of them zero), then the row max, the sum of exp2 and the stores run
 * from registers with a bit mask of each chunk's entries in the row instead of tests, and
 * 2^x by splat_ex2 (probabilities below 2^-126 flush to zero). Indices are row-relative
 * (32-bit). Same arguments as splat_softmax_row_vec. */
SPLAT_DEV void splat_softmax_row_regs(const splat_softmax_params &P, int64_t so, int64_t nnz,
                                      int lane, int64_t lse_off) {
  constexpr int SB = 16 / SPLAT_SM_SE;                     /* bytes of a score */
  const int a = (int)(so % SPLAT_SM_SE), n = (int)nnz;     /* n < 32 * RC * SE here */
  const int nch = (a + n + SPLAT_SM_SE - 1) / SPLAT_SM_SE; /* the row's chunks */
  const unsigned char *srow = (const unsigned char *)P.scores.data + so * SB;
  const uint4 *schunk = (const uint4 *)(srow - a * SB);
  constexpr uint32_t FULL = (1u << SPLAT_SM_SE) - 1u;
  uint4 v[SPLAT_SM_RC];
  uint32_t msk[SPLAT_SM_RC];
  float m = SPLAT_NEG_INF;
#pragma unroll
  for (int k = 0; k < SPLAT_SM_RC; k++) {
    const int x0 = (lane + 32 * k) * SPLAT_SM_SE - a; /* row entry of the chunk's entry 0 */
    v[k] = make_uint4(0u, 0u, 0u, 0u);
    msk[k] = 0u;
    if (32 * k >= nch) continue; /* the same for the whole warp */
    if (x0 >= 0 && x0 + SPLAT_SM_SE <= n) {
      v[k] = schunk[lane + 32 * k];
      msk[k] = FULL;
    } else if (x0 + SPLAT_SM_SE > 0 && x0 < n) {
      uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
      for (int e = 0; e < SPLAT_SM_SE; e++) {
        if (x0 + e >= 0 && x0 + e < n) {
          msk[k] |= 1u << e;
#if SPLAT_SDT == SPLAT_F32
          w[e] = *(const uint32_t *)(srow + 4 * (x0 + e));
#else
          w[e >> 1] |= (uint32_t)(*(const uint16_t *)(srow + 2 * (x0 + e))) << (16 * (e & 1));
#endif
        }
      }
      v[k] = make_uint4(w[0], w[1], w[2], w[3]);
    }
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++) {
      const float t = splat_softmax_entry(v[k], e) * P.scale_log2;
      m = fmaxf(m, (msk[k] >> e) & 1u ? t : SPLAT_NEG_INF);
    }
  }
  const float M = splat_warp_max(m);
  float l = 0.f;
#pragma unroll
  for (int k = 0; k < SPLAT_SM_RC; k++) {
    if (32 * k >= nch) break;
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++) {
      const float x = splat_ex2(fmaf(splat_softmax_entry(v[k], e), P.scale_log2, -M));
      l += (msk[k] >> e) & 1u ? x : 0.f;
    }
  }
  const float L = splat_warp_sum(l), inv = 1.f / L;
#pragma unroll
  for (int k = 0; k < SPLAT_SM_RC; k++) {
    if (32 * k >= nch) break;
    if (msk[k] == 0u) continue;
    const int x0 = (lane + 32 * k) * SPLAT_SM_SE - a;
    float pr[SPLAT_SM_SE];
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++)
      pr[e] = splat_ex2(fmaf(splat_softmax_entry(v[k], e), P.scale_log2, -M)) * inv;
    if (SPLAT_SM_SE == SPLAT_SM_PE && msk[k] == FULL) {
      splat_softmax_store_chunk(P, so + x0, pr);
    } else {
#pragma unroll
      for (int e = 0; e < SPLAT_SM_SE; e++) {
        if ((msk[k] >> e) & 1u) splat_st<SPLAT_PDT>(P.probs.data, so + x0 + e, pr[e]);
      }
    }
  }
  if (lse_off >= 0 && lane == 0) ((float *)P.lse.data)[lse_off] = (M + log2f(L)) * SPLAT_LN2;
}

/* One row of the vector path: entries [so, so + nnz) of scores, rewritten in place in
 * probs (same offsets). lse_off < 0: no lse. */
SPLAT_DEV void splat_softmax_row_vec(const splat_softmax_params &P, int64_t so, int64_t nnz,
                                     int lane, int64_t lse_off) {
  const int64_t c0 = so / SPLAT_SM_SE, c1 = (so + nnz - 1) / SPLAT_SM_SE;
  float m = SPLAT_NEG_INF, l = 0.f;
  for (int64_t c = c0 + lane; c <= c1; c += 32) {
    float f[SPLAT_SM_SE];
    splat_softmax_chunk(P, c, so, nnz, f);
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++) {
      const int64_t x = c * SPLAT_SM_SE + e;
      if (x < so || x >= so + nnz) continue;
      const float t = f[e] * P.scale_log2;
      splat_online_add(t, m, l);
    }
  }
  float M, L;
  splat_online_reduce(m, l, M, L);
  const float inv = 1.f / L;
  for (int64_t c = c0 + lane; c <= c1; c += 32) {
    float pr[SPLAT_SM_SE];
    splat_softmax_chunk(P, c, so, nnz, pr);
#pragma unroll
    for (int e = 0; e < SPLAT_SM_SE; e++) pr[e] = exp2f(pr[e] * P.scale_log2 - M) * inv;
    splat_softmax_put(P, c, so, nnz, pr);
  }
  if (lse_off >= 0 && lane == 0) ((float *)P.lse.data)[lse_off] = (M + log2f(L)) * SPLAT_LN2;
}

extern "C" __global__ void __launch_bounds__(SPLAT_ROW_WARPS * 32)
    SPLAT_SOFTMAX_ROWS_NAME(const splat_softmax_params P) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t pos = (int64_t)blockIdx.x * SPLAT_ROW_WARPS + warp;
  if (pos >= P.shape.row_count) return;
  const int64_t i = P.pat.perm[P.shape.row_begin + pos];
  const splat_row row = splat_row_of(P.pat, i);
  const int64_t BH = P.shape.batch * P.shape.heads;
  /* Vector path: same layout for scores and probs (entry offsets equal), contiguous,
   * 16-byte aligned bases. */
  const bool vec = P.scores.s3 == 1 && P.probs.s3 == 1 && P.scores.s0 == P.probs.s0 &&
                   P.scores.s1 == P.probs.s1 && P.scores.s2 == P.probs.s2 &&
                   (((unsigned long long)P.scores.data) & 15) == 0 &&
                   (((unsigned long long)P.probs.data) & 15) == 0;
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const int b = (int)bh / (int)P.shape.heads, h = (int)bh - b * (int)P.shape.heads;
    if (row.nnz == 0) {
      if (P.lse.data && lane == 0) ((float *)P.lse.data)[splat_off(P.lse, b, h, i)] = SPLAT_NEG_INF;
      continue;
    }
    const int64_t so = splat_off(P.scores, b, h, i), po = splat_off(P.probs, b, h, i);
    if (vec && so == po) {
      const int64_t lse_off = P.lse.data ? splat_off(P.lse, b, h, i) : -1;
      if ((so + row.nnz - 1) / SPLAT_SM_SE - so / SPLAT_SM_SE < 32 * SPLAT_SM_RC) {
        splat_softmax_row_regs(P, so, row.nnz, lane, lse_off);
      } else {
        splat_softmax_row_vec(P, so, row.nnz, lane, lse_off);
      }
      continue;
    }
    float m = SPLAT_NEG_INF, l = 0.f;
    for (int64_t n = lane; n < row.nnz; n += 32) {
      const float t = splat_ld<SPLAT_SDT>(P.scores.data, so + n * P.scores.s3) * P.scale_log2;
      splat_online_add(t, m, l);
    }
    float M, L;
    splat_online_reduce(m, l, M, L);
    const float inv = 1.f / L;
    for (int64_t n = lane; n < row.nnz; n += 32) {
      const float t = splat_ld<SPLAT_SDT>(P.scores.data, so + n * P.scores.s3) * P.scale_log2;
      splat_st<SPLAT_PDT>(P.probs.data, po + n * P.probs.s3, exp2f(t - M) * inv);
    }
    if (P.lse.data && lane == 0) {
      ((float *)P.lse.data)[splat_off(P.lse, b, h, i)] = (M + log2f(L)) * SPLAT_LN2;
    }
  }
}
