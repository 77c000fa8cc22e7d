/* attention_merge.cuh — the merge of split tiles of the fused attention forward. A query
 * tile whose key runs are long (longformer's and BigBird's global rows see every key) is
 * planned as several chunks over disjoint key ranges so that many CTAs share its work;
 * each chunk leaves, per row, its unnormalised O, its running max m (base 2) and sum l in
 * the workspace (attention_common.cuh splat_attn_store_part). This kernel combines them:
 * M = max m_c, L = sum l_c 2^(m_c - M), O = sum O_c 2^(m_c - M) / L, lse = (M + log2 L)
 * ln 2; rows without entries get zeros and -inf.
 *
 * SPLAT_ATTN_MERGE_NAME: grid x = split tile (P.pat.merge) x blocks of 4 of its rows
 * (ceil(part_rows / 4) per tile), y = batch*head (strided); one warp per row: lanes take
 * the chunks 32 at a time for the max, the sum and each chunk's weight 2^(m_c - M), then
 * head_dim columns. Prelude: SPLAT_DT, SPLAT_HEAD_DIM and the name. */

#include "attention_common.cuh"

#ifndef SPLAT_KERNELS_ATTENTION_MERGE_CUH
#define SPLAT_KERNELS_ATTENTION_MERGE_CUH

#define SPLAT_MDC ((SPLAT_HEAD_DIM + 31) / 32) /* head_dim columns per lane */

extern "C" __global__ void __launch_bounds__(128)
    SPLAT_ATTN_MERGE_NAME(const splat_attention_params P) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int per_tile = (P.part_rows + 3) / 4;
  const int4 grp =
      ((const int4 *)P.pat.merge)[blockIdx.x / per_tile]; /* row_begin, nrows, slot0, chunks */
  const int r = (blockIdx.x % per_tile) * 4 + warp;
  if (r >= grp.y) return;
  const int64_t i = P.pat.perm[grp.x + r];
  const int64_t BH = P.shape.batch * P.shape.heads;
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    float mx = SPLAT_NEG_INF;
    for (int c = lane; c < grp.w; c += 32)
      mx = fmaxf(mx, splat_attn_part_row(P, grp.z + c, bh, r, BH)[SPLAT_HEAD_DIM]);
    mx = splat_warp_max(mx);
    const float base = mx == SPLAT_NEG_INF ? 0.f : mx; /* no entries anywhere: every weight 0 */
    float sum = 0.f, acc[SPLAT_MDC];
#pragma unroll
    for (int k = 0; k < SPLAT_MDC; k++) acc[k] = 0.f;
    for (int c0 = 0; c0 < grp.w; c0 += 32) {
      /* Lane c's weight of chunk c0 + c, then every lane's columns of each chunk. */
      float w = 0.f;
      if (c0 + lane < grp.w) {
        const float *row = splat_attn_part_row(P, grp.z + c0 + lane, bh, r, BH);
        w = exp2f(row[SPLAT_HEAD_DIM] - base);
        sum += row[SPLAT_HEAD_DIM + 1] * w;
      }
      const int n = grp.w - c0 < 32 ? grp.w - c0 : 32;
      for (int c = 0; c < n; c++) {
        const float wc = __shfl_sync(0xffffffffu, w, c);
        const float *row = splat_attn_part_row(P, grp.z + c0 + c, bh, r, BH);
#pragma unroll
        for (int k = 0; k < SPLAT_MDC; k++) {
          const int d = lane + 32 * k;
          if (d < SPLAT_HEAD_DIM) acc[k] += row[d] * wc;
        }
      }
    }
    sum = splat_warp_sum(sum);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    const int64_t oo = splat_off(P.out, b, h, i);
#pragma unroll
    for (int k = 0; k < SPLAT_MDC; k++) {
      const int d = lane + 32 * k;
      if (d < SPLAT_HEAD_DIM) splat_st<SPLAT_DT>(P.out.data, oo + d * P.out.s3, acc[k] * inv);
    }
    if (P.lse.data && lane == 0) {
      ((float *)P.lse.data)[splat_off(P.lse, b, h, i)] =
          sum != 0.f ? (mx + log2f(sum)) * SPLAT_LN2 : SPLAT_NEG_INF; /* NaN stays NaN */
    }
  }
}

#endif
