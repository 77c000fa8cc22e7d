/* attention_tile.cuh — the fused attention forward on tensor cores (portable mma.sync path,
 * sm_80+): O = softmax(scale Q K^T) V over the plan's query tiles and key runs, never
 * writing the scores, plus the natural log-sum-exp. The row kernel of attention_rows.cuh
 * takes the irregular remainder.
 *
 * SPLAT_ATTN_TILE_NAME: one CTA of SPLAT_WARPS warps per (query tile row block,
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
 * f32 inputs keep f32 in shared memory and run both products as 3xTF32 on mma.sync m16n8k8
 * (splat_mma1688_3xtf32: operands split hi + lo, hi hi + hi lo + lo hi, the small products
 * in an accumulator of their own): S like the f32 R-SDDMM; P V with P's accumulator pairs
 * as the A fragments under a permutation of each 8 keys (A's k = t, t + 4 are keys 2t,
 * 2t + 1, which this thread holds; V's rows are read in the same order), one 8-column block
 * of O at a time into fresh accumulators added to O once per sub-tile (the tensor cores
 * truncate their accumulation: over a whole row that would bias O).
 * Above head_dim 128 (f32), O is computed in two column panels, each a walk over the keys
 * of its own that recomputes S (SPLAT_OPANELS).
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

#if !defined(SPLAT_NO_TILE)

#if SPLAT_DT == SPLAT_F32
typedef float splat_elt;                   /* Q, K, V in shared memory */
#define SPLAT_KSTEP 8                      /* mma k step: m16n8k8 tf32 */
#define SPLAT_DP ((SPLAT_HEAD_DIM + 7) / 8 * 8) /* head_dim padded to 8 */
/* Shared row stride (floats): a 16-byte pad; at 4 mod 8 words, the fragments' loads (row
 * g or 2t, column t or g) meet 32 banks. */
#define SPLAT_LD (SPLAT_DP + 4)
#define SPLAT_QREG 0
/* CTAs an SM the registers are bounded for: 3 up to head_dim 48 (kgen.c gives it 3 stages
 * there; its split tiles' epilogue spills within 168 registers), 2 above; 1 with more than 4
 * warps (tile_q 80-112). */
#define SPLAT_MIN_CTAS \
  (SPLAT_WARPS > 4 ? 1 : SPLAT_DP <= 48 && SPLAT_ATTN_EPI != SPLAT_EPI_SPLIT ? 3 : 2)
/* Above head_dim 128, O in two column panels, each a walk over the keys of its own that
 * recomputes S: all of O would be up to 128 registers a thread at head_dim 256, which
 * spill beside S and the 3xTF32 operands. One pass without split tiles only (kgen.c). */
#define SPLAT_OPANELS (SPLAT_DP > 128 ? 2 : 1)
#else
typedef uint16_t splat_elt;
#define SPLAT_KSTEP 16                             /* m16n8k16 f16/bf16 */
#define SPLAT_DP ((SPLAT_HEAD_DIM + 15) / 16 * 16) /* head_dim padded to 16 */
#define SPLAT_LD (SPLAT_DP + 8)                    /* shared Q/K/V row stride (halves) */
/* Q fragments stay in registers up to head_dim 64 (16 registers) with up to 4 segments a
 * row; above, they are read from shared memory per k step so O's accumulator (head_dim / 2
 * registers) and the mask's interval walk fit. */
#define SPLAT_QREG (SPLAT_DP <= 64 && SPLAT_MAX_SEGS <= 4)
#define SPLAT_MIN_CTAS (SPLAT_WARPS > 4 ? 1 : SPLAT_DP <= 64 ? 3 : 2) /* 1: tile_q 80-112 */
#define SPLAT_OPANELS 1
#endif
/* Columns of O a walk over the keys computes: whole 8-column blocks, the first panel the
 * larger. */
#define SPLAT_OW ((SPLAT_DP / 8 + SPLAT_OPANELS - 1) / SPLAT_OPANELS * 8)
static_assert(SPLAT_OPANELS == 1 || SPLAT_ATTN_EPI == SPLAT_EPI_PLAIN,
              "O's column panels are for plans of one pass without split tiles");
#define SPLAT_EPC (16 / (int)sizeof(splat_elt)) /* elements per 16-byte chunk */
#define SPLAT_TQ (16 * SPLAT_WARPS)
#define SPLAT_THREADS (32 * SPLAT_WARPS)
#define SPLAT_CHUNKS (SPLAT_DP / SPLAT_EPC)
#define SPLAT_NJ (SPLAT_KT / 8) /* n8 tiles of a key sub-tile */

/* Dynamic shared memory of the tile kernel, bytes (kgen.c computes the same): Q, the
 * K + V ring, STAGES interval tables + counts, row ids. */
#define SPLAT_ATTN_SMEM                                                                \
  ((SPLAT_TQ + 2 * SPLAT_STAGES * SPLAT_KT) * SPLAT_LD * (int)sizeof(splat_elt) +      \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4)

static_assert(
    SPLAT_ATTN_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

#if SPLAT_DT == SPLAT_F32
/* S = Q K^T of a warp's 16 rows and a key sub-tile (stage sk) in 3xTF32. */
SPLAT_DEV void splat_attn_tile_s(float (&s)[4 * SPLAT_NJ], const float *sQ, const float *sk,
                                 int warp, int g, int t) {
  float small[4 * SPLAT_NJ];
#pragma unroll
  for (int i = 0; i < 4 * SPLAT_NJ; i++) s[i] = small[i] = 0.f;
#pragma unroll 1
  for (int kk = 0; kk < SPLAT_DP / 8; kk++) {
    uint32_t ah[4], al[4];
    splat_tf32_split_a(sQ + (16 * warp + g) * SPLAT_LD + kk * 8 + t, SPLAT_LD, ah, al);
#pragma unroll
    for (int j = 0; j < SPLAT_NJ; j++) {
      const float *kb = sk + (8 * j + g) * SPLAT_LD + kk * 8 + t;
      splat_mma1688_3xtf32(&s[4 * j], &small[4 * j], ah, al, kb[0], kb[4]);
    }
  }
#pragma unroll
  for (int i = 0; i < 4 * SPLAT_NJ; i++) s[i] += small[i];
}

/* O += P V in 3xTF32 for a warp's 16 rows: P (s, the accumulator layout) and the sub-tile's
 * V rows (stage sv), O's columns c0 .. c0 + SPLAT_OW - 1 (those below SPLAT_DP). A's k = t,
 * t + 4 of 8-key block j are keys 8j + 2t, 8j + 2t + 1: P's entries s[4j + 2hf + e] of this
 * thread, and V's rows read in that order. */
SPLAT_DEV void splat_attn_tile_pv(float (&o)[SPLAT_OW / 2], const float (&s)[4 * SPLAT_NJ],
                                  const float *sv, int g, int t, int c0) {
  const int nb = SPLAT_OPANELS == 1 ? SPLAT_DP / 8 : (SPLAT_DP - c0) / 8; /* blocks left */
  sv += c0;
  /* Two 8-column blocks at a time: independent accumulator chains. P's split is written in
   * the loop; the compiler keeps or recomputes it as registers allow. */
#pragma unroll
  for (int n = 0; n < SPLAT_OW / 8; n += 2) {
    float c[2][4], cs[2][4];
#pragma unroll
    for (int u = 0; u < 2; u++) c[u][0] = c[u][1] = c[u][2] = c[u][3] = cs[u][0] = cs[u][1] =
        cs[u][2] = cs[u][3] = 0.f;
#pragma unroll
    for (int j = 0; j < SPLAT_NJ; j++) {
      uint32_t ph[4], pl[4];
      splat_tf32_split(s[4 * j], ph[0], pl[0]);     /* row g, key 2t */
      splat_tf32_split(s[4 * j + 2], ph[1], pl[1]); /* row g + 8, key 2t */
      splat_tf32_split(s[4 * j + 1], ph[2], pl[2]); /* row g, key 2t + 1 */
      splat_tf32_split(s[4 * j + 3], ph[3], pl[3]); /* row g + 8, key 2t + 1 */
      const float *vb = sv + (8 * j + 2 * t) * SPLAT_LD + g;
#pragma unroll
      for (int u = 0; u < 2; u++) {
        if (n + u < SPLAT_OW / 8 && n + u < nb)
          splat_mma1688_3xtf32(c[u], cs[u], ph, pl, vb[8 * (n + u)], vb[SPLAT_LD + 8 * (n + u)]);
      }
    }
#pragma unroll
    for (int u = 0; u < 2; u++) {
#pragma unroll
      for (int e = 0; e < 4; e++) {
        if (n + u < SPLAT_OW / 8) o[4 * (n + u) + e] += c[u][e] + cs[u][e];
      }
    }
  }
}
#endif

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_MIN_CTAS)
    SPLAT_ATTN_TILE_NAME(const splat_attention_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  splat_elt *sQ = (splat_elt *)splat_smem;
  splat_elt *sKV = sQ + SPLAT_TQ * SPLAT_LD; /* stage s: K rows, then V rows */
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
    splat_gather_rows<SPLAT_CHUNKS, SPLAT_TQ, SPLAT_THREADS, splat_elt>(
        P.q, b, h, sRow, nrows,
        [&](int r, int ch) { return sQ + r * SPLAT_LD + ch * SPLAT_EPC; });
    splat_cp_async_commit();

    /* Each panel of O's columns (one but above head_dim 128): a walk over the keys. */
#pragma unroll 1
    for (int panel = 0; panel < SPLAT_OPANELS; panel++) {
      const int c0 = panel * SPLAT_OW; /* O's first column */
      splat_pipe pipe = {0, 0, 0};
      auto issue = [&]() {
        splat_pipe_issue<SPLAT_TQ, SPLAT_STAGES, SPLAT_KT>(
            pipe, P.pat, tile, P.pat.runs + tile.run_begin, nrows, nsub, sRow, sIv, sNiv,
            [&](const splat_dev_run &run, int64_t g0, int s) {
              splat_elt *sk = sKV + s * 2 * SPLAT_KT * SPLAT_LD, *sv = sk + SPLAT_KT * SPLAT_LD;
              splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
                  (const splat_elt *)P.k.data, ko, P.k.s2, P.pat.seq_k, run, g0,
                  [&](int kk, int ch) { return sk + kk * SPLAT_LD + ch * SPLAT_EPC; });
              splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
                  (const splat_elt *)P.v.data, vo, P.v.s2, P.pat.seq_k, run, g0,
                  [&](int kk, int ch) { return sv + kk * SPLAT_LD + ch * SPLAT_EPC; });
            });
      };
      /* The pipeline's first stages: a loop, not unrolled (each issue() inlines the interval
       * tables and the gather; copies of them cost compile time, not speed). */
#pragma unroll 1
      for (int s = 0; s < SPLAT_STAGES - 1; s++) issue();

      float o[SPLAT_OW / 2];
#pragma unroll
      for (int i = 0; i < SPLAT_OW / 2; i++) o[i] = 0.f;
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
            splat_ldmatrix_x4(
                qf[kk], sQ + (16 * warp + (lane & 15)) * SPLAT_LD + kk * 16 + (lane >> 4) * 8);
          }
        }
#endif
        /* Does any row of this warp have an entry in this sub-tile? (Uniform operands.) */
        if (warp_active && (!run.predicate || splat_warp_touches<SPLAT_TQ, SPLAT_KT>(
                                                  sIv, sNiv, tb, nrows, warp, lane, g0))) {
          const splat_elt *sk = sKV + (it % SPLAT_STAGES) * 2 * SPLAT_KT * SPLAT_LD;
          const splat_elt *sv = sk + SPLAT_KT * SPLAT_LD;
          float s[4 * SPLAT_NJ];
#if SPLAT_DT == SPLAT_F32
          splat_attn_tile_s(s, sQ, sk, warp, g, t);
#else
#pragma unroll
          for (int i = 0; i < 4 * SPLAT_NJ; i++) s[i] = 0.f;
#pragma unroll
          for (int kk = 0; kk < SPLAT_DP / 16; kk++) {
#if SPLAT_QREG
            const uint32_t *a = qf[kk];
#else
            uint32_t a[4];
            splat_ldmatrix_x4(
                a, sQ + (16 * warp + (lane & 15)) * SPLAT_LD + kk * 16 + (lane >> 4) * 8);
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
#endif
          /* Base-2 logits; the mask of predicated runs; the online softmax. */
          const float c = splat_attn_logit_scale(s, P.scale_log2);
          if (run.predicate) {
            splat_attn_mask<SPLAT_NJ>(s, sIv + tb * SPLAT_TQ * SPLAT_MAX_SEGS, sNiv + tb * SPLAT_TQ,
                                      16 * warp + g, g0, t);
          }
          splat_attn_online_softmax<SPLAT_NJ, SPLAT_OW / 2>(s, o, m, l, c);
#if SPLAT_DT == SPLAT_F32
          splat_attn_tile_pv(o, s, sv, g, t, c0);
#else
          /* O += P V: P's accumulator pairs are the A fragments of m16n8k16. */
#pragma unroll
          for (int kk = 0; kk < SPLAT_KT / 16; kk++) {
            uint32_t a[4];
#pragma unroll
            for (int r = 0; r < 4; r++)
              a[r] = splat_pack2<SPLAT_DT>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
            splat_mma_pv_k16<SPLAT_DT, SPLAT_DP / 8, SPLAT_LD>(a, sv, kk, lane,
                                                               [&](int j) { return o + 4 * j; });
          }
#endif
        }
        __syncthreads(); /* stage `it` may be refilled */
        splat_pipe_consumed(ci, cs, it, run, nsub);
      }
      /* Drain the empty groups still counted, so the next panel or (b, h) starts clean. */
      splat_cp_async_wait<0>();

      /* O / l and the log-sum-exp, to the original rows. */
      if (warp_active && SPLAT_ATTN_EPI == SPLAT_EPI_SPLIT && slot >= 0) {
        splat_attn_store_part<SPLAT_OW / 2>(P, o, m, l, slot, bh, rb, 16 * warp + g, nrows, t);
      } else if (warp_active) {
        const int r = 16 * warp + g;
        splat_attn_store<SPLAT_OW / 2>(P, o, m, l, b, h, {sRow[r], sRow[r + 8]}, r, nrows, t, c0);
      }
    }
  }
}

#endif
