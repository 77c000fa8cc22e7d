/* sddmm.cuh — R-SDDMM: scores = scale * Q K^T computed only where the mask is, written
 * straight into ACSR values (entry k of row i = k-th column of M(i)).
 *
 * SPLAT_SDDMM_TILE_NAME (f16/bf16 inputs on m16n8k16; f32 on 3xTF32 m16n8k8; see
 * docs/cuda.md "Kernels" for the v2 shape: 64-row CTAs, grid z = row block, one cp.async
 * pipeline across runs, scores staged in shared memory and written by 16-byte stores).
 * v1 description, still accurate in outline: one CTA of SPLAT_WARPS warps
 * per (query tile, batch*head); warp w owns the tile's rows [16w, 16w+16). The tile's
 * Q rows (permuted order) are gathered into shared memory once with cp.async; then for
 * each key run of the tile, every key sub-tile of SPLAT_KT gathered keys
 * key(g) = phase + (g / width) * stride + g % width is gathered into a double-buffered
 * shared stage (keys >= seq_k zero-filled), S = Q K^T runs on mma.sync m16n8k16 with
 * fp32 accumulation, and each element is scattered to its value entry through the
 * row's interval table for the run's group (built in shared memory once per run):
 * entry = idx0 + (g - lo) for the interval [lo, hi] holding g; elements outside every
 * interval (only in predicated runs) are dropped.
 *
 * SPLAT_SDDMM_ROWS_NAME (any dtype, any strides; fp32 SIMT): one warp per row over the
 * rows permuted positions [row_begin, row_begin + row_count); the Q row is kept in
 * shared memory as fp32, each lane computes whole dot products for entries
 * lane, lane+32, ... Used for the irregular remainder, for f32 inputs and whenever the
 * tile kernel's layout requirements (contiguous, 16-byte aligned rows) do not hold.
 *
 * Prelude: SPLAT_DT (Q, K), SPLAT_SDT (scores), SPLAT_HEAD_DIM, SPLAT_MAX_SEGS,
 * SPLAT_WARPS, SPLAT_KT, SPLAT_STAGES, SPLAT_ROW_WARPS, SPLAT_WLPR (tile program only: lanes
 * per row of the score write-out: 2, or 4 for plans with regrouped rows; kgen.h
 * splat__kspec_write_lanes), SPLAT_SDDMM_ROWSTORE (tile program only, below), the kernel names,
 * and SPLAT_NO_TILE (the row kernel's program) or SPLAT_NO_ROWS (the tile kernel's). */

#include "common.cuh"
#include "pipeline.cuh"

#define SPLAT_RW SPLAT_ROW_WARPS

#if !defined(SPLAT_NO_ROWS) /* the tile kernel's program (kgen.c) */
extern "C" __global__ void __launch_bounds__(SPLAT_RW * 32)
    SPLAT_SDDMM_ROWS_NAME(const splat_sddmm_params P) {
  __shared__ float sq[SPLAT_RW][SPLAT_HEAD_DIM];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t pos = (int64_t)blockIdx.x * SPLAT_RW + warp;
  if (pos >= P.shape.row_count) return;
  const int64_t i = P.pat.perm[P.shape.row_begin + pos];
  const splat_row row = splat_row_of(P.pat, i);
  if (row.nnz == 0) return;
  const int64_t BH = P.shape.batch * P.shape.heads;
  for (int64_t bh = blockIdx.y; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads;
    const int64_t hk = h / P.shape.heads_per_kv;
    const int64_t qo = splat_off(P.q, b, h, i);
    __syncwarp();
    for (int d = lane; d < SPLAT_HEAD_DIM; d += 32)
      sq[warp][d] = splat_ld<SPLAT_DT>(P.q.data, qo + d * P.q.s3);
    __syncwarp();
    const int64_t ko = splat_off(P.k, b, hk, 0);
    const int64_t so = splat_off(P.scores, b, h, i);
    for (int64_t n = lane; n < row.nnz; n += 32) {
      const int64_t j = splat_row_col(P.pat, row, n);
      const int64_t kj = ko + j * P.k.s2;
      float acc0 = 0.f, acc1 = 0.f;
      int d = 0;
      for (; d + 1 < SPLAT_HEAD_DIM; d += 2) {
        acc0 = fmaf(sq[warp][d], splat_ld<SPLAT_DT>(P.k.data, kj + d * P.k.s3), acc0);
        acc1 = fmaf(sq[warp][d + 1], splat_ld<SPLAT_DT>(P.k.data, kj + (d + 1) * P.k.s3), acc1);
      }
      if (d < SPLAT_HEAD_DIM)
        acc0 = fmaf(sq[warp][d], splat_ld<SPLAT_DT>(P.k.data, kj + d * P.k.s3), acc0);
      splat_st<SPLAT_SDT>(P.scores.data, so + n * P.scores.s3, P.scale * (acc0 + acc1));
    }
  }
}
#endif /* !SPLAT_NO_ROWS */

#if !defined(SPLAT_NO_TILE)

/* Shared by the tile kernels (this file's mma.sync one, sddmm_wgmma.cuh's): a CTA of
 * SPLAT_WARPS warps takes 16 rows a warp; each key sub-tile's scores are staged in shared
 * memory (a warp its own 16 rows) and written out row by row through the interval tables.
 * SPLAT_SDDMM_ROWSTORE (prelude, 0 when absent; kgen.c sets it to 1 for sddmm_wgmma.cuh
 * with 128-key sub-tiles of 16-bit scores, 256 bytes a row): each staging row is shifted to
 * its scores' place in their 16-byte chunks, so a row's whole chunks are one aligned range,
 * which the warp's row stores write (splat_sddmm_row_stores: 16-byte stores, two rows a
 * pass). Without it the lanes store 16-byte chunks from any staging entry. */
#ifndef SPLAT_SDDMM_ROWSTORE
#define SPLAT_SDDMM_ROWSTORE 0
#endif
#if SPLAT_SDDMM_ROWSTORE
static_assert(SPLAT_WLPR == 2, "row stores: two lanes a row");
static_assert(SPLAT_SDT != SPLAT_F32, "row stores: 16-bit scores (kgen.c write_mode)");
#endif
#define SPLAT_TQ (16 * SPLAT_WARPS)
#define SPLAT_THREADS (32 * SPLAT_WARPS)
#define SPLAT_OSZ (SPLAT_SDT == SPLAT_F32 ? 4 : 2) /* bytes per score */
#define SPLAT_OVS (SPLAT_SDT == SPLAT_F32 ? 2 : 3) /* log2 scores per 16-byte store */
#define SPLAT_OV (1 << SPLAT_OVS)
/* A staging row: CARRY scores the previous sub-tile left unwritten (splat_sddmm_write),
 * then the sub-tile's KT. LDO keeps consecutive rows 4 banks apart (f16 / bf16). With
 * row stores, column c of a row sits at entry shift + c, shift (0 .. OV-1) putting it at
 * its global address's place in a 16-byte chunk; the carried scores fill entries
 * [0, shift) (SPLAT_SP0: where column 0 sits before the shift). */
#define SPLAT_CARRY 8
#define SPLAT_LDO (SPLAT_KT + SPLAT_CARRY) /* staging row stride (scores) */
#define SPLAT_SDDMM_RUNS 8                 /* a tile's runs kept in shared memory, at most */
#define SPLAT_SP0 (SPLAT_SDDMM_ROWSTORE ? 0 : SPLAT_CARRY)
static_assert(SPLAT_LDO * SPLAT_OSZ % 16 == 0 && SPLAT_CARRY >= SPLAT_OV,
              "staging rows start 16-byte aligned (row store sources) and hold a chunk of carry");

/* One staged score (raw bits of dtype SDT) of the staging tile. */
SPLAT_DEV uint32_t splat_sddmm_staged(const unsigned char *so, int e) {
  if (SPLAT_OSZ == 4) return ((const uint32_t *)so)[e];
  return ((const uint16_t *)so)[e];
}
SPLAT_DEV void splat_sddmm_put(void *base, int64_t e, uint32_t v) {
  if (SPLAT_OSZ == 4) {
    ((uint32_t *)base)[e] = v;
  } else {
    ((uint16_t *)base)[e] = (uint16_t)v;
  }
}

/* Stages the warp's 16 x KT scaled scores (dtype SDT) at wo (its 16 staging rows, row g's
 * column c at entry SP0 + shift + c, shift sh0 for rows g < 8, sh1 for g + 8; 0 without
 * row stores) from the m16n8 accumulator layout, repeated over KT/8 column blocks, of
 * which only blocks [jlo, jhi) are staged (from the lowest to the highest block the warp's
 * rows write, splat_sddmm_prepare):
 * acc[4j], acc[4j+1] are row g, columns 8j+2t, +1; acc[4j+2], acc[4j+3] the same columns
 * of row g+8 (mma.sync's C fragments and the wgmma accumulator of the warp's slab alike).
 * A shifted pair may straddle two 4-byte words: one store a score, each score converted on
 * its own (no unpacking of a pair). */
SPLAT_DEV void splat_sddmm_stage(const float (&acc)[SPLAT_KT / 2], float scale, unsigned char *wo,
                                 int lane, int sh0, int sh1, int jlo, int jhi) {
  static_assert(SPLAT_KT / 8 <= 32, "a bit a column block");
  const int g = lane >> 2, t = lane & 3;
  const uint32_t live = (jhi >= 32 ? ~0u : (1u << jhi) - 1u) & ~((1u << jlo) - 1u);
#pragma unroll
  for (int j = 0; j < SPLAT_KT / 8; j++) {
    if (!((live >> j) & 1u)) continue;
    const int c = 8 * j + 2 * t;
#pragma unroll
    for (int hf = 0; hf < 2; hf++) {
      const float x0 = scale * acc[4 * j + 2 * hf], x1 = scale * acc[4 * j + 2 * hf + 1];
      const int e = (g + 8 * hf) * SPLAT_LDO + SPLAT_SP0 + (hf ? sh1 : sh0) + c;
#if SPLAT_SDT == SPLAT_F32
      *(float2 *)(wo + 4 * e) = make_float2(x0, x1);
#else
      if (SPLAT_SDDMM_ROWSTORE) {
        ((uint16_t *)wo)[e] = splat_to16<SPLAT_SDT>(x0);
        ((uint16_t *)wo)[e + 1] = splat_to16<SPLAT_SDT>(x1);
      } else {
        *(uint32_t *)(wo + 2 * e) = splat_pack2<SPLAT_SDT>(x0, x1);
      }
#endif
    }
  }
}

/* The 16-byte chunk of staged scores from staging entry s0 on (any s0: 16-bit scores at an
 * odd entry take 4-byte shared loads of 5 words, each output word the middle halves of two,
 * PRMT). */
SPLAT_DEV uint4 splat_sddmm_chunk(const unsigned char *wo, int s0) {
  uint4 v;
#if SPLAT_SDT == SPLAT_F32
  v.x = splat_sddmm_staged(wo, s0);
  v.y = splat_sddmm_staged(wo, s0 + 1);
  v.z = splat_sddmm_staged(wo, s0 + 2);
  v.w = splat_sddmm_staged(wo, s0 + 3);
#else
  const uint32_t *w32 = (const uint32_t *)wo + (s0 >> 1);
  if ((s0 & 1) == 0) {
    v.x = w32[0];
    v.y = w32[1];
    v.z = w32[2];
    v.w = w32[3];
  } else {
    const uint32_t u0 = w32[0], u1 = w32[1], u2 = w32[2], u3 = w32[3], u4 = w32[4];
    v.x = __byte_perm(u0, u1, 0x5432);
    v.y = __byte_perm(u1, u2, 0x5432);
    v.z = __byte_perm(u2, u3, 0x5432);
    v.w = __byte_perm(u3, u4, 0x5432);
  }
#endif
  return v;
}

static_assert(SPLAT_WLPR == 2 || SPLAT_WLPR == 4 || SPLAT_WLPR == 8,
              "SPLAT_WLPR: lanes per row of the write-out, 2, 4 or 8");

/* Writes value entries [0, len) at d (global, 16-byte-aligned span: d's chunk starts
 * mis = entries before d) from staging entries src, src + 1, ... of wo, by the row's
 * SPLAT_WLPR lanes (sub: this lane's rank). Whole chunks [kf0, kf1): with WHOLE the row's
 * record for the warp's row stores (job; src - mis must then be 16-byte aligned), else
 * 16-byte stores by every lane, unrolled by 2 so two chunks' shared loads are in flight before their stores
 * (1.03-1.07x at head_dim 64 over one loop testing every chunk, bench/NOTES.md v13.2).
 * The partial chunks at the two ends (head: chunk 0 when mis > 0; tail: chunk kf1 when
 * the range ends inside it; one chunk when both) element by element, by lanes 0 and 1,
 * except where the range ends its row and `fill` (the row's padding entries after it,
 * splat_sddmm_write) lets lane 1 complete the 32-byte sector holding its last entry: the
 * tail chunk and the sector's other chunk go out whole, padding entries as 0. A sector no
 * store completes is read back from DRAM to merge when the L2 evicts it (rows whose
 * neighbours in memory belong to other CTAs, or end in padding: bench/NOTES.md v16). */
template <bool WHOLE>
SPLAT_DEV void splat_sddmm_range(unsigned char *d, int len, int fill, const unsigned char *wo,
                                 int src, int sub, uint4 &job) {
  static_assert(!WHOLE || SPLAT_SDDMM_ROWSTORE, "row-store ranges only in row-store programs");
  const int mis = (int)(((unsigned long long)d & 15) >> (4 - SPLAT_OVS));
  uint4 *cbase = (uint4 *)(d - mis * SPLAT_OSZ);
  const int kf0 = mis > 0, kf1 = (mis + len) >> SPLAT_OVS;
  const int src0 = src - mis;
  if constexpr (WHOLE) {
    /* The range for the warp's row stores (splat_sddmm_row_stores): the row's first whose
     * scores sit at their global place (splat_sddmm_write sends the others to the lanes). */
    if (kf1 > kf0) {
      const unsigned long long a = (unsigned long long)(cbase + kf0);
      job = make_uint4((uint32_t)a, (uint32_t)(a >> 32),
                       (uint32_t)((src0 + (kf0 << SPLAT_OVS)) * SPLAT_OSZ), (uint32_t)(kf1 - kf0));
    }
  } else {
#pragma unroll 2
    for (int k = kf0 + sub; k < kf1; k += SPLAT_WLPR)
      cbase[k] = splat_sddmm_chunk(wo, src0 + (k << SPLAT_OVS));
  }
  const int end = mis + len; /* entries from cbase */
  const bool tail = (end & (SPLAT_OV - 1)) != 0;
  if (fill > 0 && sub == 1 && (kf1 > 0 || mis == 0)) {
    /* Chunks kf1 .. the end of the sector holding entry end - 1, those inside the row. */
    const int kl = (end - 1) >> SPLAT_OVS;
    const int kse = kl + 1 + ((((unsigned long long)cbase >> 4) + kl + 1) & 1);
    const int e0 = (kf1 << SPLAT_OVS) - mis;
    uint4 c = make_uint4(0u, 0u, 0u, 0u);
    if (tail) { /* entries e0 .. len - 1 staged, the rest 0 */
      uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
      for (int k2 = 0; k2 < SPLAT_OV; k2++) {
        if (e0 + k2 < len) {
          const uint32_t x = splat_sddmm_staged(wo, src + e0 + k2);
          w[k2 * SPLAT_OSZ / 4] |= SPLAT_OSZ == 4 ? x : x << (16 * (k2 & 1));
        }
      }
      c = make_uint4(w[0], w[1], w[2], w[3]);
    }
    for (int k = kf1; k < kse && ((k + 1) << SPLAT_OVS) <= end + fill; k++) {
      cbase[k] = c;
      c = make_uint4(0u, 0u, 0u, 0u);
    }
    if (!tail || ((kf1 + 1) << SPLAT_OVS) <= end + fill) return;
  }
  const int kp = sub == 0 && mis > 0 ? 0 : sub == 1 && tail && (kf1 > 0 || mis == 0) ? kf1 : -1;
  if (kp >= 0) {
    const int e0 = (kp << SPLAT_OVS) - mis, s0 = src + e0;
#pragma unroll
    for (int k2 = 0; k2 < SPLAT_OV; k2++) {
      const int e = e0 + k2;
      if (e >= 0 && e < len) splat_sddmm_put(d, e, splat_sddmm_staged(wo, s0 + k2));
    }
  }
}

/* Writes the warp's staged rows: each row's part of every interval of table buffer tb
 * that meets gathered indices [g0, g0 + KT) is a contiguous range of value entries,
 * written by splat_sddmm_range (SPLAT_WLPR lanes per row, 32 / SPLAT_WLPR rows a pass)
 * when `vec` (contiguous, 16-byte aligned scores), else element by element. With `vec`,
 * an interval that goes on into the next sub-tile leaves the entries past its last whole
 * chunk unwritten (returns whether this lane did), and the next sub-tile writes them from
 * its staging rows' carry columns (splat_sddmm_emit copies them there) with its first
 * chunk: only an interval's two ends take element stores. cin: the entries before g0 of an
 * interval coming from the previous sub-tile were left for this one (without row stores:
 * the sub-tile does not begin its chain of runs, splat_sddmm_cta; with them: this lane's
 * row left some, its previous return value), last: g0 ends its chain, across which
 * intervals go on. shift: the row's staging shift (splat_sddmm_prepare; 0 without row
 * stores). With row stores, the intervals whose scores sit at their global place in a
 * chunk (all but a row's second interval of another phase in one sub-tile) may carry, and
 * the first of them a row goes out by the row stores; the others by 16-byte stores from
 * any entry, ends whole. bh_off: the element
 * offset of (b, h) in the scores. Positions inside a row are 32-bit (entry counts of one row),
 * addresses 64-bit once per interval. */
SPLAT_DEV bool splat_sddmm_write(const splat_sddmm_params &P, const unsigned char *wo,
                                 const splat_ival *sIv, const int *sNiv, const int *sRow, int tb,
                                 int nrows, int warp, int lane, int32_t g0, bool cin, bool last,
                                 int64_t bh_off, bool vec, int shift, uint4 &job) {
  const int sub = lane % SPLAT_WLPR;
  bool carried = false; /* this lane left entries for the next sub-tile */
#if SPLAT_SDDMM_ROWSTORE
  /* This row's record is taken (one range a row and sub-tile). Row stores have two lanes a
   * row, so one pass: the flag and `job` belong to the one row of this lane. */
  bool recorded = false;
#endif
#pragma unroll
  for (int pass = 0; pass < SPLAT_WLPR / 2; pass++) {
    const int rl = (32 / SPLAT_WLPR) * pass + lane / SPLAT_WLPR, r = 16 * warp + rl;
    if (r < nrows) {
      const int niv = sNiv[tb * SPLAT_TQ + r];
      const splat_ival *iv = sIv + (tb * SPLAT_TQ + r) * SPLAT_MAX_SEGS;
      const int64_t so = bh_off + (int64_t)sRow[r] * P.scores.s2;
      for (int q = 0; q < niv; q++) {
        const int4 v = *(const int4 *)(iv + q);
        int32_t a, x;
        int len = splat_ival_clip(v, g0, SPLAT_KT, &a, &x);
        if (len <= 0) continue;
        int src = rl * SPLAT_LDO + SPLAT_SP0 + shift + (a - g0);
        if (vec) {
          /* Entry e's place in its 16-byte chunk: (so + e) % OV (the scores are aligned). */
          const bool placed = SPLAT_SDDMM_ROWSTORE &&
                            (((uint32_t)so + (uint32_t)x - (uint32_t)src) & (SPLAT_OV - 1)) == 0;
          const bool carry = !SPLAT_SDDMM_ROWSTORE || placed;
          if (carry && cin && v.x < g0) { /* from the previous sub-tile: its unwritten tail */
            const int32_t w0 = max(v.z, x - (int32_t)((so + x) & (SPLAT_OV - 1)));
            src -= x - w0;
            len += x - w0;
            x = w0;
          }
          if (carry && !last &&
              v.y >= g0 + SPLAT_KT) { /* on into the next: up to a chunk boundary */
            const int left = (int)((so + x + len) & (SPLAT_OV - 1));
            carried = carried || left > 0;
            len -= left;
            if (len <= 0) continue;
          }
          unsigned char *d = (unsigned char *)P.scores.data + (so + x) * SPLAT_OSZ;
          /* The row's padding after its last entry, when this range ends the row. */
          const int fill = v.w && x + len == v.z + (v.y - v.x) + 1 ? P.row_width - (x + len) : 0;
#if SPLAT_SDDMM_ROWSTORE
          if (placed && !recorded) {
            splat_sddmm_range<true>(d, len, fill, wo, src, sub, job);
            recorded = true;
            continue;
          }
#endif
          splat_sddmm_range<false>(d, len, fill, wo, src, sub, job);
        } else {
          for (int k2 = sub; k2 < len; k2 += SPLAT_WLPR) {
            splat_sddmm_put(P.scores.data, so + (int64_t)(x + k2) * P.scores.s3,
                            splat_sddmm_staged(wo, src + k2));
          }
        }
      }
    }
  }
  return carried;
}

/* The CTA of both R-SDDMM tile kernels (this file's on mma.sync, sddmm_wgmma.cuh's on
 * wgmma): the block's rows (sRow; nothing to do for an empty tile), then for each (b, h)
 * of the CTA its query rows gathered into shared memory (gather_q(b, h), a cp.async
 * group) and one pipeline over the key sub-tiles of all the tile's runs
 * (load_k(run, g0, ko, stage) gathers one), running step(first, last, g0, tb, it, nrows,
 * bh_off, vec) on each sub-tile `it` (gathered keys [g0, g0 + KT) of a run, in ring stage
 * it % STAGES, table buffer tb; first / last: the sub-tile begins / ends a chain of runs of
 * one group over consecutive gathered keys (a window's predicated and full runs), across
 * which a row's interval goes on; vec: whether the scores take 16-byte stores, decided
 * once) once its group is in; step syncs the CTA before it reads the stage, and the
 * CTA syncs after it before the stage is refilled. The first STAGES - 1 sub-tiles are issued
 * by the loop's first passes (`pre`): one inlined copy of the tables and the gather. */
template <class GatherQ, class LoadK, class Step>
SPLAT_DEV void splat_sddmm_cta(const splat_sddmm_params &P, splat_ival *sIv, int *sNiv, int *sRow,
                               splat_dev_run *sRuns, const GatherQ &gather_q, const LoadK &load_k,
                               const Step &step) {
  splat_dev_tile tile; /* CTA = (query tile, batch*head, row block z) */
  int ti, rb, bh0;
  const int nrows = splat_tile_rows<SPLAT_TQ>(P.pat, tile, ti, rb, bh0, sRow);
  if (tile.nruns == 0 || nrows <= 0) return;
  /* The tile's runs in shared memory (read at every sub-tile; from global memory they were
   * a long-latency load in each step's critical path), where they fit. */
  const splat_dev_run *runs = P.pat.runs + tile.run_begin;
  if (tile.nruns <= SPLAT_SDDMM_RUNS) {
    constexpr int W = (int)(sizeof(splat_dev_run) / 4);
    for (int i = threadIdx.x; i < tile.nruns * W; i += SPLAT_THREADS)
      ((int32_t *)sRuns)[i] = ((const int32_t *)runs)[i];
    runs = sRuns; /* visible after the (b, h) loop's first barrier */
  }
  const int64_t BH = P.shape.batch * P.shape.heads;
  const int nsub_tile = SPLAT_TILE_K / SPLAT_KT;
  const bool vec = P.scores.s3 == 1 && (((unsigned long long)P.scores.data) & 15) == 0;
  for (int64_t bh = bh0; bh < BH; bh += gridDim.y) {
    const int64_t b = bh / P.shape.heads, h = bh % P.shape.heads, hk = h / P.shape.heads_per_kv;
    const int64_t ko = splat_off(P.k, b, hk, 0), bh_off = splat_off(P.scores, b, h, 0);
    __syncthreads(); /* sRow is in; the previous (b, h) is done with Q, staging and tables */
    gather_q(b, h, nrows);
    splat_cp_async_commit();
    splat_pipe pipe = {0, 0, 0};
    int ci = 0, cs = 0, it = 0;
    auto joins = [&](int j) { return splat_runs_join(runs, tile.nruns, j, SPLAT_TILE_K); };
    bool from_prev = false, into_next = joins(1);
    for (int pre = SPLAT_STAGES - 1; ci < tile.nruns;) {
      splat_pipe_issue<SPLAT_TQ, SPLAT_STAGES, SPLAT_KT>(
          pipe, P.pat, tile, runs, nrows, nsub_tile, sRow, sIv, sNiv,
          [&](const splat_dev_run &run, int64_t g0, int st) { load_k(run, g0, ko, st); });
      if (pre > 0) {
        pre--;
        continue;
      }
      splat_cp_async_wait<SPLAT_STAGES - 1>();
      const splat_dev_run run = runs[ci];
      const int nsub = run.ntiles * nsub_tile;
      step(cs == 0 && !from_prev, cs == nsub - 1 && !into_next, (int32_t)(run.base + cs * SPLAT_KT),
           ci % SPLAT_STAGES, it, nrows, bh_off, vec);
      __syncthreads(); /* stage `it` may be refilled */
      it++;
      if (++cs == nsub) {
        ci++;
        cs = 0;
        from_prev = into_next;
        into_next = joins(ci + 1);
      }
    }
  }
}

#if SPLAT_SDDMM_ROWSTORE
/* An L2 policy of evict-first (sm_80+) for data written once and read by a later kernel
 * at most: the whole chunks of scores, which leave the L2 first, while the partial sectors at
 * their ends, which the neighbouring entries' element stores complete later, stay
 * (window 1.04-1.08x, blocked 1.05-1.06x over plain stores, bench/NOTES.md v15). */
SPLAT_DEV uint64_t splat_l2_evict_first_policy() {
  uint64_t pol;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(pol));
  return pol;
}
/* 16 bytes to global memory at p (16-byte aligned) under L2 policy pol. */
SPLAT_DEV void splat_st16_evict_first(uint4 *p, uint4 v, uint64_t pol) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w), "l"(pol)
               : "memory");
}

/* The warp's row stores: each of its 16 staging rows' whole chunks (records recs[0 .. 16),
 * one a row, from splat_sddmm_write: x, y the global address of the first chunk, z its
 * staging byte offset from wo, w the chunk count, 0 for none) by 16-byte stores, two rows a
 * pass, lane 16 h + k storing chunk k of row 2 p + h: each store instruction writes two
 * rows' contiguous runs, where bulk copies' issue (one a row, its operands through uniform
 * registers) cost more (bench/NOTES.md v15, v16). A row's whole
 * chunks lie in staging entries [0, shift + KT), shift < OV (the carried tail, then the
 * sub-tile), chunk-aligned from entry 0: at most 16. */
static_assert(!SPLAT_SDDMM_ROWSTORE || SPLAT_OV - 1 + SPLAT_KT < 17 * SPLAT_OV,
              "row stores: at most 16 whole chunks a row and sub-tile");
SPLAT_DEV void splat_sddmm_row_stores(const unsigned char *wo, const uint4 *recs, int lane) {
  const int k = lane & 15;
  const uint64_t pol = splat_l2_evict_first_policy();
#pragma unroll 2
  for (int p = 0; p < 8; p++) {
    const uint4 j = recs[2 * p + (lane >> 4)];
    uint4 *d = (uint4 *)(((unsigned long long)j.y << 32) | j.x);
    const unsigned char *s = wo + j.z;
    if (k < (int)j.w) splat_st16_evict_first(d + k, *(const uint4 *)(s + 16 * k), pol);
  }
}
#endif

/* Before a warp's sub-tile g0 is computed: the column blocks it stages (`blocks`,
 * splat_sddmm_emit's, jlo | jhi << 16; 0 when none of its rows meets the sub-tile, which it
 * then skips) and, with row stores, each row's shift. With row stores, whose shifted staging
 * takes a 16-bit store a score, the blocks run from the lowest to the highest its rows write
 * (longformer 1.03x, window 1.02x at head_dim 64, bench/NOTES.md v17), found in the same
 * pass over the rows' intervals as the shift (v19); the other programs stage all blocks by
 * 4-byte (f16 / bf16) or 8-byte (f32) stores, where the narrower range did not pay for its
 * reductions. Returns the row's shift: the place in its 16-byte chunk of the global entry of
 * column 0 under the first interval meeting the sub-tile (0 without row stores or without
 * `vec`). A row's intervals are disjoint and in ascending order (splat_row_intervals keeps the
 * plan's segment order), so an interval carried in from the previous sub-tile is that first
 * one, and its shift is the one its tail was staged with. The row's carried tail (carry: this
 * lane's row left entries, splat_sddmm_emit; at most OV - 1 scores past its last whole chunk,
 * columns [KT - shift, KT) at entries [KT, KT + shift)) moves to entries [0, shift) (a row
 * that carries goes on into this sub-tile, so the warp does not skip it). The carried
 * columns were staged (the carrying interval reaches column KT - 1, so that sub-tile's
 * blocks ran to KT/8), and the unstaged entries the 16-byte copy brings into [shift, 8) are
 * overwritten by block 0 (the interval covers column 0 here). The wgmma kernel calls it
 * while the sub-tile's products are in flight (bench/NOTES.md v19d): the copy comes last, as
 * its registers on top of the accumulators' spilled when it came first. Every lane of the
 * warp calls it. */
SPLAT_DEV int splat_sddmm_prepare(const splat_sddmm_params &P, unsigned char *wo,
                                  const splat_ival *sIv, const int *sNiv, const int *sRow, int tb,
                                  int nrows, int warp, int lane, bool first, int32_t g0,
                                  int64_t bh_off, bool vec, bool carry, int &blocks) {
  int shift = 0;
#if SPLAT_SDDMM_ROWSTORE
  const int rl = lane >> 1, r = 16 * warp + rl;
  int lo = SPLAT_KT, hi = 0; /* the columns the row writes */
  if (r < nrows) {
    const int niv = sNiv[tb * SPLAT_TQ + r];
    const splat_ival *iv = sIv + (tb * SPLAT_TQ + r) * SPLAT_MAX_SEGS;
    const uint32_t so = (uint32_t)(bh_off + (int64_t)sRow[r] * P.scores.s2);
    for (int q = niv - 1; q >= 0; q--) {
      const int4 v = *(const int4 *)(iv + q);
      const int a = max(v.x - g0, 0), b = min(v.y - g0 + 1, SPLAT_KT);
      if (a < b) {
        lo = a; /* the intervals ascend: the last met is the lowest */
        hi = max(hi, b);
        if (vec) shift = (int)((so + (uint32_t)v.z - (uint32_t)v.x + (uint32_t)g0) & (SPLAT_OV - 1));
      }
    }
  }
  lo = __reduce_min_sync(0xffffffffu, lo) >> 3;
  hi = (__reduce_max_sync(0xffffffffu, hi) + 7) >> 3;
  blocks = hi > lo ? lo | hi << 16 : 0;
  unsigned char *row = wo + rl * SPLAT_LDO * SPLAT_OSZ;
  if ((lane & 1) == 0 && carry && !first)
    *(uint4 *)row = *(const uint4 *)(row + SPLAT_KT * SPLAT_OSZ);
#else
  (void)P, (void)wo, (void)sRow, (void)first, (void)bh_off, (void)vec, (void)carry;
  blocks = splat_warp_touches<SPLAT_TQ, SPLAT_KT>(sIv, sNiv, tb, nrows, warp, lane, g0)
               ? (SPLAT_KT / 8) << 16
               : 0;
#endif
  return shift;
}

/* A warp's scores of sub-tile g0, acc (16 x KT, the m16n8 layout), written to its rows'
 * ACSR entries through its staging rows wo (for warps some of whose rows meet the
 * sub-tile, in column blocks `blocks`: splat_sddmm_prepare; with row stores acc need only
 * hold those, the other programs stage every block);
 * first, last and vec as splat_sddmm_write, whose unwritten
 * tails move to the carry columns here (row stores: in splat_sddmm_prepare, which gave
 * `shift`). carry (row stores only; the caller keeps it from one sub-tile to the next,
 * false at first): whether this lane's row left entries for the next sub-tile. */
SPLAT_DEV void splat_sddmm_emit(const splat_sddmm_params &P, const float (&acc)[SPLAT_KT / 2],
                                unsigned char *wo, const splat_ival *sIv, const int *sNiv,
                                const int *sRow, int tb, int nrows, int warp, int lane, bool first,
                                bool last, int32_t g0, int64_t bh_off, bool vec, int shift,
                                int blocks, bool &carry, uint4 *recs) {
  const int jlo = blocks & 0xffff, jhi = blocks >> 16; /* the column blocks to stage */
#if SPLAT_SDDMM_ROWSTORE
  const int g = lane >> 2;
  const int sh0 = __shfl_sync(0xffffffffu, shift, 2 * g),
            sh1 = __shfl_sync(0xffffffffu, shift, 2 * g + 16);
  __syncwarp();
  splat_sddmm_stage(acc, P.scale, wo, lane, sh0, sh1, jlo, jhi);
  __syncwarp();
  uint4 job = make_uint4(0u, 0u, 0u, 0u); /* this row's record for the row stores */
  carry = splat_sddmm_write(P, wo, sIv, sNiv, sRow, tb, nrows, warp, lane, g0, carry && !first,
                            last, bh_off, vec, shift, job);
  if ((lane & 1) == 0) recs[lane >> 1] = job;
  __syncwarp();
  splat_sddmm_row_stores(wo, recs, lane);
#else
  (void)carry;
  (void)shift;
  (void)jlo;
  (void)jhi;
  splat_sddmm_stage(acc, P.scale, wo, lane, 0, 0, 0, SPLAT_KT / 8);
  __syncwarp();
  (void)recs;
  uint4 job = make_uint4(0u, 0u, 0u, 0u);
  const bool carried = splat_sddmm_write(P, wo, sIv, sNiv, sRow, tb, nrows, warp, lane, g0, !first,
                                         last, bh_off, vec, 0, job);
  __syncwarp();
  if (__any_sync(0xffffffffu, carried)) {
    /* The last CARRY staged scores of each row to its carry columns, for the next sub-tile
     * (which this warp stages: an interval going on into it touches it). */
    constexpr int V = SPLAT_CARRY * SPLAT_OSZ / 16; /* 16-byte pieces of a row's carry */
    for (int i = lane; i < 16 * V; i += 32) {
      unsigned char *row = wo + (i / V) * SPLAT_LDO * SPLAT_OSZ + (i % V) * 16;
      *(uint4 *)row = *(const uint4 *)(row + SPLAT_KT * SPLAT_OSZ);
    }
    __syncwarp();
  }
#endif
}

#if !defined(SPLAT_SDDMM_WG) /* sddmm_wgmma.cuh has its own tile kernel */
static_assert(!SPLAT_SDDMM_ROWSTORE, "the mma.sync R-SDDMM writes its scores by 16-byte stores");

#if SPLAT_DT == SPLAT_F32
#define SPLAT_KSTEP 8 /* mma k step: m16n8k8 tf32 */
#define SPLAT_EPC 4   /* Q/K elements per 16-byte chunk */
#define SPLAT_QK_T float
#else
#define SPLAT_KSTEP 16 /* m16n8k16 f16/bf16 */
#define SPLAT_EPC 8
#define SPLAT_QK_T uint16_t
#endif
#define SPLAT_DP ((SPLAT_HEAD_DIM + SPLAT_KSTEP - 1) / SPLAT_KSTEP * SPLAT_KSTEP)
#define SPLAT_LDS (SPLAT_DP + SPLAT_EPC) /* shared Q/K row stride (elements): 16 B pad */
#define SPLAT_CHUNKS (SPLAT_DP / SPLAT_EPC)
/* CTAs per SM the registers are bounded for: 4 (128 registers) for 16-bit inputs up to
 * head_dim 64, whose shared memory (~50 KB with one interval per row) fits 4 as well. */
#define SPLAT_MIN_CTAS (SPLAT_WARPS > 4 ? 1 : SPLAT_DT != SPLAT_F32 && SPLAT_HEAD_DIM <= 64 ? 4 : 2)

/* Dynamic shared memory of the tile kernel, bytes (kgen.c computes the same):
 * Q, the K ring, the score staging tile, the tile's runs, STAGES interval tables + counts,
 * row ids. */
#define SPLAT_SDDMM_SMEM                                                              \
  ((SPLAT_TQ + SPLAT_STAGES * SPLAT_KT) * SPLAT_LDS * (int)sizeof(SPLAT_QK_T) +       \
   SPLAT_TQ * SPLAT_LDO * SPLAT_OSZ + SPLAT_SDDMM_RUNS * (int)sizeof(splat_dev_run) + \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4)

static_assert(
    SPLAT_SDDMM_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

/* Gathers key sub-tile g0 .. g0 + KT of a run into a shared stage. */
SPLAT_DEV void splat_sddmm_load_k(const splat_sddmm_params &P, const splat_dev_run &run, int64_t g0,
                                  int64_t ko, SPLAT_QK_T *stage) {
  splat_gather_keys<SPLAT_CHUNKS, SPLAT_KT, SPLAT_THREADS, false, true>(
      (const SPLAT_QK_T *)P.k.data, ko, P.k.s2, P.pat.seq_k, run, g0,
      [&](int kk, int ch) { return stage + kk * SPLAT_LDS + ch * SPLAT_EPC; });
}

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_MIN_CTAS)
    SPLAT_SDDMM_TILE_NAME(const splat_sddmm_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  SPLAT_QK_T *sQ = (SPLAT_QK_T *)splat_smem;
  SPLAT_QK_T *sK = sQ + SPLAT_TQ * SPLAT_LDS;
  unsigned char *sO = (unsigned char *)(sK + SPLAT_STAGES * SPLAT_KT * SPLAT_LDS);
  splat_dev_run *sRuns = (splat_dev_run *)(sO + SPLAT_TQ * SPLAT_LDO * SPLAT_OSZ);
  splat_ival *sIv = (splat_ival *)(sRuns + SPLAT_SDDMM_RUNS);
  int *sNiv = (int *)(sIv + SPLAT_STAGES * SPLAT_TQ * SPLAT_MAX_SEGS);
  int *sRow = sNiv + SPLAT_STAGES * SPLAT_TQ;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  unsigned char *wo = sO + 16 * warp * SPLAT_LDO * SPLAT_OSZ; /* this warp's staging rows */
  bool carry = false; /* splat_sddmm_emit's, kept across sub-tiles */
  splat_sddmm_cta(
      P, sIv, sNiv, sRow, sRuns,
      [&](int64_t b, int64_t h, int nrows) {
        splat_gather_rows<SPLAT_CHUNKS, SPLAT_TQ, SPLAT_THREADS, SPLAT_QK_T>(
            P.q, b, h, sRow, nrows,
            [&](int r, int ch) { return sQ + r * SPLAT_LDS + ch * SPLAT_EPC; });
      },
      [&](const splat_dev_run &run, int64_t g0, int64_t ko, int st) {
        splat_sddmm_load_k(P, run, g0, ko, sK + st * SPLAT_KT * SPLAT_LDS);
      },
      [&](bool first, bool last, int32_t g0, int tb, int it, int nrows, int64_t bh_off, bool vec) {
        __syncthreads(); /* sub-tile `it` and its run's tables are in */
        /* Skip the sub-tile when no row of this warp has an interval meeting it (a
         * window's warp spans fewer keys than its tile's runs): no mma, no staging. */
        int blocks;
        const int shift = splat_sddmm_prepare(P, wo, sIv, sNiv, sRow, tb, nrows, warp, lane, first,
                                              g0, bh_off, vec, carry, blocks);
        if (blocks == 0) return;
        const SPLAT_QK_T *st = sK + (it % SPLAT_STAGES) * SPLAT_KT * SPLAT_LDS;
        float acc[SPLAT_KT / 2];
#pragma unroll
        for (int i = 0; i < SPLAT_KT / 2; i++) acc[i] = 0.f;
#if SPLAT_DT == SPLAT_F32
        /* The two small products in an accumulator of their own (splat_mma1688_3xtf32). */
        float small[SPLAT_KT / 2];
#pragma unroll
        for (int i = 0; i < SPLAT_KT / 2; i++) small[i] = 0.f;
        const int g = lane >> 2, t = lane & 3;
#pragma unroll 2
        for (int kk = 0; kk < SPLAT_DP / 8; kk++) {
          uint32_t ah[4], al[4];
          splat_tf32_split_a(sQ + (16 * warp + g) * SPLAT_LDS + kk * 8 + t, SPLAT_LDS, ah, al);
#pragma unroll
          for (int j = 0; j < SPLAT_KT / 8; j++) {
            const float *kb = st + (8 * j + g) * SPLAT_LDS + kk * 8 + t;
            splat_mma1688_3xtf32(&acc[4 * j], &small[4 * j], ah, al, kb[0], kb[4]);
          }
        }
#pragma unroll
        for (int i = 0; i < SPLAT_KT / 2; i++) acc[i] += small[i];
#else
#pragma unroll
        for (int kk = 0; kk < SPLAT_DP / 16; kk++) {
          uint32_t a[4];
          splat_ldmatrix_x4(a,
                            sQ + (16 * warp + (lane & 15)) * SPLAT_LDS + kk * 16 + (lane >> 4) * 8);
#pragma unroll
          for (int j = 0; j < SPLAT_KT / 8; j += 2) {
            uint32_t bq[4];
            const int key = 8 * j + (lane & 7) + ((lane >> 4) << 3);
            splat_ldmatrix_x4(bq, st + key * SPLAT_LDS + kk * 16 + ((lane >> 3) & 1) * 8);
            const uint32_t b0[2] = {bq[0], bq[1]}, b1[2] = {bq[2], bq[3]};
            splat_mma16816<SPLAT_DT>(&acc[4 * j], a, b0);
            splat_mma16816<SPLAT_DT>(&acc[4 * j + 4], a, b1);
          }
        }
#endif
        splat_sddmm_emit(P, acc, wo, sIv, sNiv, sRow, tb, nrows, warp, lane, first, last, g0,
                         bh_off, vec, shift, blocks, carry, nullptr);
      });
}

#endif /* !SPLAT_SDDMM_WG */
#endif /* !SPLAT_NO_TILE */
