/* attention_tile.cuh — the fused attention forward on tensor cores (portable mma.sync path,
 * sm_80+): O = softmax(scale Q K^T) V over the plan's query tiles and key runs, never
 * writing the scores, plus the natural log-sum-exp. The row kernel of attention_rows.cuh
 * takes the irregular remainder.
 *
 * SPLAT_ATTN_TILE_NAME (f16/bf16): one CTA of SPLAT_WARPS warps per (query tile row block,
 * batch*head); warp w owns rows [16w, 16w+16) of the block. The block's Q rows (permuted
 * order) are gathered into shared memory once. One cp.async pipeline walks the key
 * sub-tiles of SPLAT_KT gathered keys of all the tile's runs (pipeline.cuh), each stage
 * holding the sub-tile's K and V rows. Per sub-tile and warp: S = Q K^T on mma.sync
 * m16n8k16 (fp32), scaled to base-2 logits; in predicated runs each element is kept iff
 * its gathered key lies in one of the row's intervals for the run's group (the closed
 * form of the row's segments; full runs evaluate no predicate); the online softmax
 * (FlashAttention-2: running max and sum per row, O rescaled when the max moves) turns S
 * into P in registers, and P, rounded to the input dtype, is the A operand of O += P V
 * directly (the m16n8 accumulator layout is the m16n8k16 A layout). A warp skips a
 * sub-tile none of its rows touches. O is divided by the row sum once at the end and
 * written to the original rows; rows with no entries get zeros and lse = -inf.
 *
 * A chunk of a split tile (P.pat.slots[tile] >= 0) leaves partial results for the merge
 * kernel (attention_merge.cuh) instead of O; the passes of a two-pass plan leave or merge
 * theirs (attention_common.cuh splat_attn_store).
 *
 * Prelude: SPLAT_DT (Q, K, V, O), SPLAT_HEAD_DIM, SPLAT_MAX_SEGS, SPLAT_WARPS, SPLAT_KT,
 * SPLAT_TILE_K, SPLAT_STAGES, SPLAT_ROW_WARPS, the kernel names, and the epilogue
 * SPLAT_ATTN_EPI (params.cuh SPLAT_EPI_*: split chunks, a pass of two, or neither). */

#include "attention_common.cuh"
#include "attention_rows.cuh"
#include "common.cuh"
#include "pipeline.cuh"

#if SPLAT_DT != SPLAT_F32 && !defined(SPLAT_NO_TILE)

#define SPLAT_DP ((SPLAT_HEAD_DIM + 15) / 16 * 16) /* head_dim padded to 16 */
#define SPLAT_LD (SPLAT_DP + 8)                    /* shared Q/K/V row stride (halves) */
#define SPLAT_TQ (16 * SPLAT_WARPS)
#define SPLAT_THREADS (32 * SPLAT_WARPS)
#define SPLAT_CHUNKS (SPLAT_DP / 8)
#define SPLAT_NJ (SPLAT_KT / 8) /* n8 tiles of a key sub-tile */
/* Q fragments stay in registers up to head_dim 64 (16 registers) with up to 4 segments a
 * row; above, they are read from shared memory per k step so O's accumulator (head_dim / 2
 * registers) and the mask's interval walk fit. */
#define SPLAT_QREG (SPLAT_DP <= 64 && SPLAT_MAX_SEGS <= 4)
#define SPLAT_MIN_CTAS (SPLAT_DP <= 64 ? 3 : 2)

/* Dynamic shared memory of the tile kernel, bytes (kgen.c computes the same): Q, the
 * K + V ring, STAGES interval tables + counts, row ids. */
#define SPLAT_ATTN_SMEM                                      \
  ((SPLAT_TQ + 2 * SPLAT_STAGES * SPLAT_KT) * SPLAT_LD * 2 + \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4)

static_assert(
    SPLAT_ATTN_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_MIN_CTAS)
    SPLAT_ATTN_TILE_NAME(const splat_attention_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  uint16_t *sQ = (uint16_t *)splat_smem;
  uint16_t *sKV = sQ + SPLAT_TQ * SPLAT_LD; /* stage s: K rows, then V rows */
  splat_ival *sIv = (splat_ival *)(sKV + 2 * SPLAT_STAGES * SPLAT_KT * SPLAT_LD);
  int *sNiv = (int *)(sIv + SPLAT_STAGES * SPLAT_TQ * SPLAT_MAX_SEGS);
  int *sRow = sNiv + SPLAT_STAGES * SPLAT_TQ;

  /* CTA = (query tile, batch*head, row block z): tile rows [z*TQ, z*TQ + TQ). */
  splat_dev_tile tile;
  int ti, rb, bh0;
  const int nrows = splat_tile_rows<SPLAT_TQ>(P.pat, tile, ti, rb, bh0, sRow);
  if (nrows <= 0) return;
  const int slot = P.pat.slots ? P.pat.slots[ti] : -1; /* a chunk of a split tile: partials */
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int64_t BH = P.shape.batch * P.shape.heads;
  const bool warp_active = 16 * warp < nrows;
  const int nsub = SPLAT_TILE_K / SPLAT_KT;

  for (int64_t bh = bh0; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    const int64_t hk = h / P.shape.heads_per_kv;
    const int64_t ko = splat_off(P.k, b, hk, 0), vo = splat_off(P.v, b, hk, 0);

    __syncthreads(); /* sRow is in; the previous (b, h) is done with sQ and the tables */
    splat_gather_rows<SPLAT_CHUNKS, SPLAT_TQ, SPLAT_THREADS, uint16_t>(
        P.q, b, h, sRow, nrows, [&](int r, int ch) { return sQ + r * SPLAT_LD + ch * 8; });
    splat_cp_async_commit();

    splat_pipe pipe = {0, 0, 0};
    auto issue = [&]() {
      splat_pipe_issue<SPLAT_TQ, SPLAT_STAGES, SPLAT_KT>(
          pipe, P.pat, tile, P.pat.runs + tile.run_begin, nrows, nsub, sRow, sIv, sNiv,
          [&](const splat_dev_run &run, int64_t g0, int s) {
            uint16_t *sk = sKV + s * 2 * SPLAT_KT * SPLAT_LD, *sv = sk + SPLAT_KT * SPLAT_LD;
            splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
                (const uint16_t *)P.k.data, ko, P.k.s2, P.pat.seq_k, run, g0,
                [&](int kk, int ch) { return sk + kk * SPLAT_LD + ch * 8; });
            splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
                (const uint16_t *)P.v.data, vo, P.v.s2, P.pat.seq_k, run, g0,
                [&](int kk, int ch) { return sv + kk * SPLAT_LD + ch * 8; });
          });
    };
    /* The pipeline's first stages: a loop, not unrolled (each issue() inlines the interval
     * tables and the gather; copies of them cost compile time, not speed). */
#pragma unroll 1
    for (int s = 0; s < SPLAT_STAGES - 1; s++) issue();

    float o[SPLAT_DP / 2];
#pragma unroll
    for (int i = 0; i < SPLAT_DP / 2; i++) o[i] = 0.f;
    float m[2] = {SPLAT_NEG_INF, SPLAT_NEG_INF}, l[2] = {0.f, 0.f}; /* rows g, g + 8 */
#if SPLAT_QREG
    uint32_t qf[SPLAT_DP / 16][4];
#endif

    int ci = 0, cs = 0, it = 0;
    while (ci < tile.nruns) {
      issue();
      splat_cp_async_wait<SPLAT_STAGES - 1>();
      __syncthreads(); /* sub-tile `it`, its run's tables and (first time) Q are in */
      const splat_dev_run run = P.pat.runs[tile.run_begin + ci];
      const int32_t g0 = run.base + cs * SPLAT_KT;
      const int tb = ci % SPLAT_STAGES;
#if SPLAT_QREG
      if (it == 0 && warp_active) {
#pragma unroll
        for (int kk = 0; kk < SPLAT_DP / 16; kk++) {
          splat_ldmatrix_x4(qf[kk],
                            sQ + (16 * warp + (lane & 15)) * SPLAT_LD + kk * 16 + (lane >> 4) * 8);
        }
      }
#endif
      /* Does any row of this warp have an entry in this sub-tile? (Uniform operands.) */
      if (warp_active && (!run.predicate || splat_warp_touches<SPLAT_TQ, SPLAT_KT>(
                                                sIv, sNiv, tb, nrows, warp, lane, g0))) {
        const uint16_t *sk = sKV + (it % SPLAT_STAGES) * 2 * SPLAT_KT * SPLAT_LD;
        const uint16_t *sv = sk + SPLAT_KT * SPLAT_LD;
        float s[4 * SPLAT_NJ];
#pragma unroll
        for (int i = 0; i < 4 * SPLAT_NJ; i++) s[i] = 0.f;
#pragma unroll
        for (int kk = 0; kk < SPLAT_DP / 16; kk++) {
#if SPLAT_QREG
          const uint32_t *a = qf[kk];
#else
          uint32_t a[4];
          splat_ldmatrix_x4(a,
                            sQ + (16 * warp + (lane & 15)) * SPLAT_LD + kk * 16 + (lane >> 4) * 8);
#endif
#pragma unroll
          for (int j = 0; j < SPLAT_NJ; j += 2) {
            uint32_t bq[4];
            const int key = 8 * j + (lane & 7) + ((lane >> 4) << 3);
            splat_ldmatrix_x4(bq, sk + key * SPLAT_LD + kk * 16 + ((lane >> 3) & 1) * 8);
            const uint32_t b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
            splat_mma16816<SPLAT_DT>(s + 4 * j, a, b0);
            splat_mma16816<SPLAT_DT>(s + 4 * j + 4, a, b1);
          }
        }
        /* Base-2 logits; the mask of predicated runs; the online softmax. */
        const float c = splat_attn_logit_scale(s, P.scale_log2);
        if (run.predicate) {
          splat_attn_mask<SPLAT_NJ>(s, sIv + tb * SPLAT_TQ * SPLAT_MAX_SEGS, sNiv + tb * SPLAT_TQ,
                                    16 * warp + g, g0, t);
        }
        splat_attn_online_softmax<SPLAT_NJ, SPLAT_DP / 2>(s, o, m, l, c);
        /* O += P V: P's accumulator pairs are the A fragments of m16n8k16. */
#pragma unroll
        for (int kk = 0; kk < SPLAT_KT / 16; kk++) {
          uint32_t a[4];
#pragma unroll
          for (int r = 0; r < 4; r++)
            a[r] = splat_pack2<SPLAT_DT>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
#pragma unroll
          for (int j = 0; j < SPLAT_DP / 8; j += 2) {
            uint32_t bv[4];
            splat_ldmatrix_x4_trans(
                bv, sv + (kk * 16 + (lane & 15)) * SPLAT_LD + 8 * j + (lane >> 4) * 8);
            const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
            splat_mma16816<SPLAT_DT>(o + 4 * j, a, b0);
            splat_mma16816<SPLAT_DT>(o + 4 * j + 4, a, b1);
          }
        }
      }
      __syncthreads(); /* stage `it` may be refilled */
      it++;
      if (++cs == run.ntiles * nsub) {
        ci++;
        cs = 0;
      }
    }
    /* Drain the empty groups still counted, so the next (b, h) starts clean. */
    splat_cp_async_wait<0>();

    /* O / l and the log-sum-exp, to the original rows. */
    if (warp_active && SPLAT_ATTN_EPI == SPLAT_EPI_SPLIT && slot >= 0) {
      splat_attn_store_part<SPLAT_DP / 2>(P, o, m, l, slot, bh, rb, 16 * warp + g, nrows, t);
    } else if (warp_active) {
      const int r = 16 * warp + g;
      splat_attn_store<SPLAT_DP / 2>(P, o, m, l, b, h, {sRow[r], sRow[r + 8]}, r, nrows, t);
    }
  }
}

#endif
