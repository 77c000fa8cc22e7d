/* attention_wgmma.cuh — the fused attention forward on Hopper (sm_90a): the shape of
 * attention_tile.cuh with both products on wgmma. The row kernel of attention_rows.cuh
 * takes the irregular remainder. With SPLAT_ATTN_WS=0, and where the warp-specialised
 * kernel (attention_ws.cuh, the default) does not fit: head_dim 128 with 64-row tiles,
 * shared memory over the device's limit.
 *
 * SPLAT_ATTN_TILE_NAME (f16/bf16, head_dim 64 or 128): one CTA = SPLAT_WARPS / 4
 * warpgroups of 64 rows each per (query tile row block, batch*head); with two, both read
 * each K/V stage, halving the key traffic per row (SPLAT_ATTN_WARPGROUPS=2, experimental). Q, and
 * each ring stage's gathered K and V rows, sit in shared memory in the 128-byte-swizzle layout
 * wgmma reads (wgmma.cuh): cp.async gathers any key group (dilated and strided keys are addresses,
 * not masks) and each thread fences its copies into the async proxy before the barrier.
 * Per 64-key sub-tile: S = Q K^T by wgmma m64n64k16 with both operands in shared memory
 * (K-major); the mask predicate only on predicated runs (the row's intervals of the run's
 * group, as in attention_tile.cuh); the online softmax in registers; P rounded to the
 * input dtype straight from the S accumulator registers is the register A operand of
 * O += P V (wgmma m64n{64,128}k16, V MN-major through the transpose bit). A warpgroup
 * skips a predicated sub-tile none of its rows touches. O / l and the log-sum-exp go to the
 * original rows; rows without entries get zeros and -inf. A chunk of a split tile leaves
 * partial results for the merge kernel instead (attention_merge.cuh).
 *
 * Prelude: as attention_tile.cuh (SPLAT_WARPS = 4 x warpgroups). */

#include "attention_common.cuh"
#include "attention_rows.cuh"
#include "common.cuh"
#include "pipeline.cuh"
#include "wgmma.cuh"

#if SPLAT_DT != SPLAT_F32 && !defined(SPLAT_NO_TILE)

#define SPLAT_WGS (SPLAT_WARPS / 4) /* consumer warpgroups: 1, or 2 sharing each K/V stage */
static_assert(SPLAT_WARPS % 4 == 0 && SPLAT_WGS >= 1 && SPLAT_WGS <= 2,
              "the wgmma attention kernel takes 1 or 2 warpgroups");
#define SPLAT_TQ (64 * SPLAT_WGS) /* query rows per CTA: 64 per consumer warpgroup */
#define SPLAT_THREADS (128 * SPLAT_WGS)
#define SPLAT_DP SPLAT_HEAD_DIM /* 64 or 128: whole 64-column panels */
#define SPLAT_CHUNKS (SPLAT_DP / 8)
#define SPLAT_NS (SPLAT_KT / 2) /* S accumulator registers per thread */
#define SPLAT_NO (SPLAT_DP / 2) /* O accumulator registers per thread */
#define SPLAT_TILE_BYTES(rows) ((rows)*SPLAT_DP * 2)
#define SPLAT_MIN_CTAS (SPLAT_WGS > 1 ? 1 : SPLAT_DP <= 64 ? 3 : 2)

/* Dynamic shared memory, bytes (kgen.c computes the same): 1024 of alignment slack, Q,
 * STAGES x (K, V), interval tables + counts, row ids. */
#define SPLAT_ATTN_SMEM                                                                \
  (1024 + SPLAT_TILE_BYTES(SPLAT_TQ) + 2 * SPLAT_STAGES * SPLAT_TILE_BYTES(SPLAT_KT) + \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4)

static_assert(
    SPLAT_ATTN_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_MIN_CTAS)
    SPLAT_ATTN_TILE_NAME(const splat_attention_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  /* Swizzled tiles need 1024-byte alignment of their shared addresses. */
  const uint32_t base_addr = splat_smem_addr(splat_smem);
  unsigned char *sbase = splat_smem + (((base_addr + 1023u) & ~1023u) - base_addr);
  unsigned char *sQ = sbase;
  unsigned char *sKV = sQ + SPLAT_TILE_BYTES(SPLAT_TQ); /* stage s: K tile, then V tile */
  splat_ival *sIv = (splat_ival *)(sKV + 2 * SPLAT_STAGES * SPLAT_TILE_BYTES(SPLAT_KT));
  int *sNiv = (int *)(sIv + SPLAT_STAGES * SPLAT_TQ * SPLAT_MAX_SEGS);
  int *sRow = sNiv + SPLAT_STAGES * SPLAT_TQ;
  const uint32_t q_addr = splat_smem_addr(sQ), kv_addr = splat_smem_addr(sKV);

  /* CTA = (query tile, batch*head, row block z): tile rows [z*TQ, z*TQ + TQ). */
  splat_dev_tile tile;
  int ti, rb, bh0;
  const int nrows = splat_tile_rows<SPLAT_TQ>(P.pat, tile, ti, rb, bh0, sRow);
  if (nrows <= 0) return;
  const int slot = P.pat.slots ? P.pat.slots[ti] : -1; /* a chunk of a split tile: partials */
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const int g = lane >> 2, t = lane & 3;
  const int r0 = 64 * wg + 16 * warp + g; /* this thread's rows r0, r0 + 8 of the block */
  const int64_t BH = P.shape.batch * P.shape.heads;
  const int nsub = SPLAT_TILE_K / SPLAT_KT;

  for (int64_t bh = bh0; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    const int64_t hk = h / P.shape.heads_per_kv;
    const int64_t ko = splat_off(P.k, b, hk, 0), vo = splat_off(P.v, b, hk, 0);

    __syncthreads(); /* sRow is in; the previous (b, h) is done with sQ and the tables */
    splat_gather_rows<SPLAT_CHUNKS, SPLAT_TQ, SPLAT_THREADS, uint16_t>(
        P.q, b, h, sRow, nrows,
        [&](int r, int ch) { return sQ + splat_sw128_tile_off<SPLAT_TQ>(r, ch); });
    splat_cp_async_commit();

    splat_pipe pipe = {0, 0, 0};
    auto issue = [&]() {
      splat_pipe_issue<SPLAT_TQ, SPLAT_STAGES, SPLAT_KT>(
          pipe, P.pat, tile, P.pat.runs + tile.run_begin, nrows, nsub, sRow, sIv, sNiv,
          [&](const splat_dev_run &run, int64_t g0, int s) {
            unsigned char *sk = sKV + s * 2 * SPLAT_TILE_BYTES(SPLAT_KT);
            unsigned char *sv = sk + SPLAT_TILE_BYTES(SPLAT_KT);
            splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
                (const uint16_t *)P.k.data, ko, P.k.s2, P.pat.seq_k, run, g0,
                [&](int kk, int ch) { return sk + splat_sw128_tile_off<SPLAT_KT>(kk, ch); });
            splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS>(
                (const uint16_t *)P.v.data, vo, P.v.s2, P.pat.seq_k, run, g0,
                [&](int kk, int ch) { return sv + splat_sw128_tile_off_mn<SPLAT_KT>(kk, ch); });
          });
    };
    /* The pipeline's first stages: a loop, not unrolled (each issue() inlines the interval
     * tables and the gather; copies of them cost compile time, not speed). */
#pragma unroll 1
    for (int s = 0; s < SPLAT_STAGES - 1; s++) issue();

    float o[SPLAT_NO];
#pragma unroll
    for (int i = 0; i < SPLAT_NO; i++) o[i] = 0.f;
    float m[2] = {SPLAT_NEG_INF, SPLAT_NEG_INF}, l[2] = {0.f, 0.f}; /* rows g, g + 8 */

    int ci = 0, cs = 0, it = 0;
    while (ci < tile.nruns) {
      issue();
      splat_cp_async_wait<SPLAT_STAGES - 1>();
      splat_fence_proxy_async(); /* this thread's copies -> visible to wgmma */
      __syncthreads();           /* sub-tile `it`, its run's tables and Q are in */
      const splat_dev_run run = P.pat.runs[tile.run_begin + ci];
      const int32_t g0 = run.base + cs * SPLAT_KT;
      const int tb = ci % SPLAT_STAGES;
      /* Predicated runs: does any of the warpgroup's 64 rows have an entry in this
       * sub-tile? Each warp of the warpgroup asks for all 64 (two rows a lane) and gets
       * the same answer, so the warpgroup's wgmma stays uniform. */
      bool touched = 64 * wg < nrows; /* a warpgroup past the block's rows idles */
      if (touched && run.predicate) {
        touched = splat_attn_wg_touches<SPLAT_TQ, SPLAT_KT>(
            sIv + tb * SPLAT_TQ * SPLAT_MAX_SEGS, sNiv + tb * SPLAT_TQ, 64 * wg, g0, lane);
      }
      if (touched) {
        const uint32_t k_addr =
            kv_addr + (uint32_t)((it % SPLAT_STAGES) * 2 * SPLAT_TILE_BYTES(SPLAT_KT));
        const uint32_t v_addr = k_addr + SPLAT_TILE_BYTES(SPLAT_KT);
        float s[SPLAT_NS];
        splat_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < SPLAT_DP / 16; kk++) {
          splat_wgmma_ss<SPLAT_DT, SPLAT_KT>(
              s, splat_wgmma_desc_k<SPLAT_TQ>(q_addr + wg * 64 * 128, kk),
              splat_wgmma_desc_k<SPLAT_KT>(k_addr, kk), kk > 0);
        }
        splat_wgmma_commit();
        splat_wgmma_wait<0>();
        splat_wgmma_fence_acc(s);
        /* Base-2 logits; the mask of predicated runs; the online softmax (the register
         * layout of attention_common.cuh). */
        const float c = splat_attn_logit_scale(s, P.scale_log2);
        if (run.predicate) {
          splat_attn_mask<SPLAT_KT / 8>(s, sIv + tb * SPLAT_TQ * SPLAT_MAX_SEGS,
                                        sNiv + tb * SPLAT_TQ, r0, g0, t);
        }
        splat_attn_online_softmax<SPLAT_KT / 8, SPLAT_NO>(s, o, m, l, c);
        uint32_t a[SPLAT_KT / 16][4];
        splat_wgmma_acc_to_a<SPLAT_DT, SPLAT_KT>(s, a);
        splat_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < SPLAT_KT / 16; kk++) {
          splat_wgmma_rs<SPLAT_DT, SPLAT_DP, 1>(o, a[kk], splat_wgmma_desc_mn<SPLAT_KT>(v_addr, kk),
                                                1);
        }
        splat_wgmma_commit();
        splat_wgmma_wait<0>();
        splat_wgmma_fence_acc(o);
      }
      __syncthreads(); /* stage `it` may be refilled */
      splat_pipe_consumed(ci, cs, it, run, nsub);
    }
    splat_cp_async_wait<0>();

    /* O / l and the log-sum-exp, to the original rows. */
    if (SPLAT_ATTN_EPI == SPLAT_EPI_SPLIT && slot >= 0) {
      splat_attn_store_part<SPLAT_NO>(P, o, m, l, slot, bh, rb, r0, nrows, t);
    } else {
      splat_attn_store<SPLAT_NO>(P, o, m, l, b, h, {sRow[r0], sRow[r0 + 8]}, r0, nrows, t);
    }
  }
}

#endif
