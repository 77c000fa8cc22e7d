/* attention_merge.cuh — the merge of split tiles of the fused attention forward. A query
 * tile whose key runs are long (longformer's and BigBird's global rows see every key) is
 * planned as several chunks over disjoint key ranges so that many CTAs share its work;
 * each chunk leaves, per row, its unnormalised O, its running max m (base 2) and sum l in
 * the workspace (attention_common.cuh splat_attn_store_part). This kernel combines them:
 * M = max m_c, L = sum l_c 2^(m_c - M), O = sum O_c 2^(m_c - M) / L, lse = (M + log2 L)
 * ln 2; rows without entries get zeros and -inf.
 *
 * SPLAT_ATTN_MERGE_NAME: grid x = split tile (P.pat.merge), y = batch*head (strided);
 * 4 warps, one row per warp at a time, lanes over head_dim. Prelude: SPLAT_DT,
 * SPLAT_HEAD_DIM and the name. */

#include "attention_common.cuh"

#ifndef SPLAT_KERNELS_ATTENTION_MERGE_CUH
#define SPLAT_KERNELS_ATTENTION_MERGE_CUH

extern "C" __global__ void __launch_bounds__(128) SPLAT_ATTN_MERGE_NAME(const splat_attention_params P) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int4 grp = ((const int4 *)P.pat.merge)[blockIdx.x]; /* row_begin, nrows, slot0, slots */
  const int64_t BH = P.shape.batch * P.shape.heads;
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    for (int r = warp; r < grp.y; r += 4) {
      const int64_t i = P.pat.perm[grp.x + r];
      float mx = SPLAT_NEG_INF;
      for (int c = 0; c < grp.w; c++) mx = fmaxf(mx, splat_attn_part_row(P, grp.z + c, bh, r, BH)[SPLAT_HEAD_DIM]);
      const float base = mx == SPLAT_NEG_INF ? 0.f : mx; /* no entries anywhere: every weight 0 */
      float sum = 0.f;
      for (int c = 0; c < grp.w; c++) {
        const float *row = splat_attn_part_row(P, grp.z + c, bh, r, BH);
        sum += row[SPLAT_HEAD_DIM + 1] * exp2f(row[SPLAT_HEAD_DIM] - base);
      }
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const int64_t oo = splat_off(P.out, b, h, i);
      for (int d = lane; d < SPLAT_HEAD_DIM; d += 32) {
        float acc = 0.f;
        for (int c = 0; c < grp.w; c++) {
          const float *row = splat_attn_part_row(P, grp.z + c, bh, r, BH);
          acc += row[d] * exp2f(row[SPLAT_HEAD_DIM] - base);
        }
        splat_st<SPLAT_DT>(P.out.data, oo + d * P.out.s3, acc * inv);
      }
      if (P.lse.data && lane == 0) {
        ((float *)P.lse.data)[splat_off(P.lse, b, h, i)] =
            sum > 0.f ? (mx + log2f(sum)) * SPLAT_LN2 : SPLAT_NEG_INF;
      }
    }
  }
}

#endif
