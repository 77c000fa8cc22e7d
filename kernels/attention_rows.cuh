/* attention_rows.cuh — the row kernel of the fused attention forward: O = softmax(scale
 * Q K^T) V under the mask, with the natural log-sum-exp, one row at a time. It serves the
 * irregular remainder, and head_dims and layouts the tile kernel (attention_tile.cuh) does
 * not take (f32 above head_dim 128 in two-pass or split plans among them).
 *
 * SPLAT_ATTN_ROWS_NAME: one warp per (row, batch*head), any dtype, any strides. The Q
 * row lives in shared memory as fp32 pre-multiplied by scale * log2(e). The row's
 * entries are walked 32 at a time (from its segments or its remainder columns): each
 * lane computes one score, the warp updates the running max and sum (online softmax in
 * base 2, fp32), rescales its accumulator, and accumulates p * V[col] with lanes owning
 * head_dim columns lane, lane+32, ... Empty rows give zeros and lse = -inf.
 *
 * Prelude: SPLAT_DT (Q, K, V, O), SPLAT_HEAD_DIM, SPLAT_ROW_WARPS, the kernel name. */

#include "common.cuh"

#ifndef SPLAT_KERNELS_ATTENTION_ROWS_CUH
#define SPLAT_KERNELS_ATTENTION_ROWS_CUH

#define SPLAT_ADC ((SPLAT_HEAD_DIM + 31) / 32)

#if !defined(SPLAT_NO_ROWS) /* the tile kernel's program (kgen.c) */
extern "C" __global__ void __launch_bounds__(SPLAT_ROW_WARPS * 32)
    SPLAT_ATTN_ROWS_NAME(const splat_attention_params P) {
  __shared__ float sq[SPLAT_ROW_WARPS][SPLAT_HEAD_DIM];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t pos = (int64_t)blockIdx.x * SPLAT_ROW_WARPS + warp;
  if (pos >= P.shape.row_count) return;
  const int64_t i = P.pat.perm[P.shape.row_begin + pos];
  const splat_row row = splat_row_of(P.pat, i);
  const int64_t BH = P.shape.batch * P.shape.heads;
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    const int64_t hk = h / P.shape.heads_per_kv;
    const int64_t qo = splat_off(P.q, b, h, i);
    const int64_t ko = splat_off(P.k, b, hk, 0), vo = splat_off(P.v, b, hk, 0);
    __syncwarp();
    for (int d = lane; d < SPLAT_HEAD_DIM; d += 32) {
      sq[warp][d] = splat_ld<SPLAT_DT>(P.q.data, qo + d * P.q.s3) * P.scale_log2;
    }
    __syncwarp();
    float acc[SPLAT_ADC];
#pragma unroll
    for (int c = 0; c < SPLAT_ADC; c++) acc[c] = 0.f;
    float m = SPLAT_NEG_INF, l = 0.f;
    for (int64_t base = 0; base < row.nnz; base += 32) {
      const bool valid = base + lane < row.nnz;
      float t = SPLAT_NEG_INF;
      int32_t j = 0;
      if (valid) {
        j = (int32_t)splat_row_col(P.pat, row, base + lane);
        const int64_t kj = ko + (int64_t)j * P.k.s2;
        float a0 = 0.f, a1 = 0.f;
        int d = 0;
        for (; d + 1 < SPLAT_HEAD_DIM; d += 2) {
          a0 = fmaf(sq[warp][d], splat_ld<SPLAT_DT>(P.k.data, kj + d * P.k.s3), a0);
          a1 = fmaf(sq[warp][d + 1], splat_ld<SPLAT_DT>(P.k.data, kj + (d + 1) * P.k.s3), a1);
        }
        if (d < SPLAT_HEAD_DIM)
          a0 = fmaf(sq[warp][d], splat_ld<SPLAT_DT>(P.k.data, kj + d * P.k.s3), a0);
        t = a0 + a1;
      }
      const float mn = fmaxf(m, splat_warp_max(t)); /* finite: the chunk has an entry */
      const float alpha = exp2f(m - mn);
      const float p = valid ? exp2f(t - mn) : 0.f;
      l = l * alpha + splat_warp_sum(p);
      m = mn;
#pragma unroll
      for (int c = 0; c < SPLAT_ADC; c++) acc[c] *= alpha;
      const int cnt = row.nnz - base < 32 ? (int)(row.nnz - base) : 32;
      for (int tt = 0; tt < cnt; tt++) {
        const float pt = __shfl_sync(0xffffffffu, p, tt);
        const int64_t vj = vo + (int64_t)__shfl_sync(0xffffffffu, j, tt) * P.v.s2;
#pragma unroll
        for (int c = 0; c < SPLAT_ADC; c++) {
          const int d = lane + 32 * c;
          if (d < SPLAT_HEAD_DIM)
            acc[c] = fmaf(pt, splat_ld<SPLAT_DT>(P.v.data, vj + d * P.v.s3), acc[c]);
        }
      }
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const int64_t oo = splat_off(P.out, b, h, i);
#pragma unroll
    for (int c = 0; c < SPLAT_ADC; c++) {
      const int d = lane + 32 * c;
      if (d < SPLAT_HEAD_DIM) splat_st<SPLAT_DT>(P.out.data, oo + d * P.out.s3, acc[c] * inv);
    }
    if (P.lse.data && lane == 0) {
      ((float *)P.lse.data)[splat_off(P.lse, b, h, i)] =
          row.nnz ? (m + log2f(l)) * SPLAT_LN2 : SPLAT_NEG_INF;
    }
  }
}
#endif /* !SPLAT_NO_ROWS */

#endif
