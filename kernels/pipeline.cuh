/* pipeline.cuh — the producer side of the key sub-tile pipeline shared by the tile
 * kernels of R-SDDMM (K) and R-SpMM (V): one cp.async pipeline over the key sub-tiles
 * of all key runs of a query tile, so no drain at run boundaries. Each call issues the
 * next sub-tile (the caller's `load` gathers it into ring stage `issued % STAGES`) and
 * commits a cp.async group (an empty one past the last run, so wait_group counts stay
 * uniform); when it is a run's first sub-tile, the rows' interval tables for the run's
 * group are built (or copied from the previous run's, of the same group) into table
 * buffer `run % STAGES` by the first TQ threads.
 *
 * Needs SPLAT_MAX_SEGS from the prelude. */

#include "common.cuh"

#ifndef SPLAT_KERNELS_PIPELINE_CUH
#define SPLAT_KERNELS_PIPELINE_CUH

/* The CTA's query tile (index into the plan's tiles), row block and first batch*head.
 * Blocks are dispatched in linear order (x, then y, then z) and the host uploads the
 * tiles heaviest first (cuda_backend.c), so the linear id is read tile-major: all
 * (batch*head, row block) CTAs of the heaviest tiles start first and the long tiles
 * (longformer's global rows) do not form the tail. */
SPLAT_DEV void splat_tile_block(int &tile, int &rblock, int &bh0) {
  const unsigned per = gridDim.y * gridDim.z;
  const unsigned long long L =
      blockIdx.x +
      (unsigned long long)gridDim.x * (blockIdx.y + (unsigned long long)gridDim.y * blockIdx.z);
  const unsigned rest = (unsigned)(L % per);
  tile = (int)(L / per);
  bh0 = (int)(rest % gridDim.y);
  rblock = (int)(rest / gridDim.y);
}

/* The CTA's block: TQ rows of its query tile (`tile`, index ti), from row rb = rblock * TQ
 * of the tile; bh0 is its first batch*head. Returns the block's row count (<= 0: none).
 * The first TQ threads write the block's original rows to sRow[0 .. TQ) (0 past the
 * count); they are visible after the next barrier. */
template <int TQ>
SPLAT_DEV int splat_tile_rows(const splat_dev_pattern &pat, splat_dev_tile &tile, int &ti, int &rb,
                              int &bh0, int *sRow) {
  int rblock;
  splat_tile_block(ti, rblock, bh0);
  tile = pat.tiles[ti];
  rb = rblock * TQ;
  const int nrows = tile.nrows - rb < TQ ? tile.nrows - rb : TQ;
  if (nrows > 0 && threadIdx.x < TQ) {
    sRow[threadIdx.x] = (int)threadIdx.x < nrows ? pat.perm[tile.row_begin + rb + threadIdx.x] : 0;
  }
  return nrows;
}

/* Producer position: run li, sub-tile ls of it; issued = sub-tiles (groups) issued. */
typedef struct splat_pipe {
  int li, ls, issued;
} splat_pipe;

/* Whether two runs gather the same key group (phase, stride, width): their rows' interval
 * tables are the same. */
SPLAT_DEV bool splat_same_group(const splat_dev_run &a, const splat_dev_run &c) {
  return a.phase == c.phase && a.stride == c.stride && a.width == c.width;
}

/* Whether run j of a tile's nruns goes on from run j - 1: the same group, the next keys
 * (key tiles of tile_k keys), so a row's interval may go on across them. */
SPLAT_DEV bool splat_runs_join(const splat_dev_run *runs, int nruns, int j, int tile_k) {
  if (j <= 0 || j >= nruns) return false;
  const splat_dev_run a = runs[j - 1];
  const splat_dev_run c = runs[j];
  return splat_same_group(a, c) && a.base + a.ntiles * tile_k == c.base;
}

/* Issues the next sub-tile of `tile` (rows sRow[0..nrows), nsub sub-tiles of KT keys
 * per key tile of a run; runs: the tile's runs, pat.runs + tile.run_begin or a copy in
 * shared memory). load(run, g0, stage): gathers gathered indices [g0, g0 + KT) of run into
 * ring stage `stage` (issued first: its latency overlaps the tables' loads). sIv, sNiv:
 * STAGES x TQ tables; a run of the previous run's group copies that run's tables (each
 * thread its own row's, which it built; buffer tb is not in use, so neither is the other)
 * instead of reading the row's segments again. */
template <int TQ, int STAGES, int KT, class Load>
SPLAT_DEV void splat_pipe_issue(splat_pipe &q, const splat_dev_pattern &pat,
                                const splat_dev_tile &tile, const splat_dev_run *runs, int nrows,
                                int nsub, const int *sRow, splat_ival *sIv, int *sNiv,
                                const Load &load) {
  if (q.li < tile.nruns) {
    const splat_dev_run run = runs[q.li];
    load(run, (int64_t)run.base + (int64_t)q.ls * KT, q.issued % STAGES);
    if (q.ls == 0 && threadIdx.x < TQ) {
      const int r = threadIdx.x, tb = q.li % STAGES;
      splat_ival *iv = sIv + (tb * TQ + r) * SPLAT_MAX_SEGS;
      if (q.li > 0 && splat_same_group(runs[q.li - 1], run)) {
        const int pb = (q.li - 1) % STAGES, n = sNiv[pb * TQ + r];
        const splat_ival *pv = sIv + (pb * TQ + r) * SPLAT_MAX_SEGS;
        for (int k = 0; k < n; k++) iv[k] = pv[k];
        sNiv[tb * TQ + r] = n;
      } else {
        sNiv[tb * TQ + r] =
            r < nrows ? splat_row_intervals(pat, sRow[r], run.phase, run.stride, run.width, iv) : 0;
      }
    }
    if (++q.ls == run.ntiles * nsub) {
      q.li++;
      q.ls = 0;
    }
  }
  splat_cp_async_commit();
  q.issued++;
}

/* The consumer's position after a sub-tile: `it` sub-tiles done, sub-tile cs of run ci (whose
 * run, of run.ntiles key tiles of nsub sub-tiles each, is `run`). */
SPLAT_DEV void splat_pipe_consumed(int &ci, int &cs, int &it, const splat_dev_run &run,
                                   int nsub) {
  it++;
  if (++cs == run.ntiles * nsub) {
    ci++;
    cs = 0;
  }
}

/* The consumer side of a predicated run: does any of a warp's 16 rows (block rows 16 warp ..,
 * of nrows) have an interval of table buffer tb meeting gathered keys [g0, g0 + KT)?
 * Warp-uniform (a vote); every lane of the warp calls it. */
template <int TQ, int KT>
SPLAT_DEV bool splat_warp_touches(const splat_ival *sIv, const int *sNiv, int tb, int nrows,
                                  int warp, int lane, int32_t g0) {
  bool touched = false;
  if (16 * warp < nrows && lane < 16) {
    const int r = 16 * warp + lane;
    const int niv = sNiv[tb * TQ + r];
    const splat_ival *iv = sIv + (tb * TQ + r) * SPLAT_MAX_SEGS;
    for (int q = 0; q < niv; q++) {
      const int4 v = *(const int4 *)(iv + q);
      touched = touched || (v.x < g0 + KT && v.y >= g0);
    }
  }
  return __any_sync(0xffffffffu, touched);
}

/* Gathers the query rows of a CTA's block, original rows sRow[0 .. TQ), from a
 * [B, H, S, head_dim] tensor at (b, h) into shared memory, one 16-byte cp.async per chunk
 * of 16 / sizeof(T) elements; dst(r, ch) is the shared address of chunk ch of block row
 * r. Rows from nrows on and chunks past SPLAT_HEAD_DIM are zero-filled. Q of R-SDDMM and
 * of the fused attention. */
template <int CHUNKS, int TQ, int THREADS, typename T, class Dst>
SPLAT_DEV void splat_gather_rows(const splat_dev_tensor &x, int64_t b, int64_t h, const int *sRow,
                                 int nrows, const Dst &dst) {
  constexpr int EPC = 16 / (int)sizeof(T);
  const T *base = (const T *)x.data;
  const T *bh = base + splat_off(x, b, h, 0); /* the (b, h) part once, not per chunk */
  /* A fixed trip count (threadIdx.x < THREADS), unrolled: when THREADS is a multiple of
   * CHUNKS, a thread's chunk column is fixed and its rows step by a constant. */
#pragma unroll 4
  for (int i = 0; i < (TQ * CHUNKS + THREADS - 1) / THREADS; i++) {
    const unsigned c = threadIdx.x + (unsigned)(i * THREADS);
    if ((TQ * CHUNKS) % THREADS != 0 && c >= (unsigned)(TQ * CHUNKS)) break;
    const int r = (int)(c / CHUNKS), ch = (int)(c % CHUNKS);
    const bool valid = r < nrows && ch * EPC < SPLAT_HEAD_DIM;
    const int row = valid ? sRow[r] : 0;
    splat_cp_async16(dst(r, ch), valid ? bh + (int64_t)row * x.s2 + ch * EPC : base, valid);
  }
}

/* Gathers the rows of gathered keys g0 .. g0 + KT of a run from a [.., seq_k, head_dim]
 * tensor (element offset `off` of the batch and head, row stride s2) into a shared stage,
 * one 16-byte cp.async per chunk of 16 / sizeof(T) elements; dst(kk, ch) is the shared
 * address of chunk ch of gathered row kk (a padded row-major stage, or a swizzled one for
 * wgmma). Keys past seq_k and chunks past SPLAT_HEAD_DIM are zero-filled. K for R-SDDMM,
 * V for R-SpMM, both for the fused attention. ONE_TEST (the R-SDDMM's): a thread of a run of
 * width 1 tests once whether all its keys lie inside seq_k, and then copies without tests
 * (the R-SpMM was 0.99-1.0x with it). */
template <int CHUNKS, int KT, int THREADS, bool ROLLED = false, bool ONE_TEST = false, typename T,
          class Dst>
SPLAT_DEV void splat_gather_keys(const T *base, int64_t off, int64_t s2, int64_t seq_k,
                                 const splat_dev_run &run, int64_t g0, const Dst &dst) {
  constexpr int EPC = 16 / (int)sizeof(T), N = KT * CHUNKS;
  const T *kb = base + off;
  const unsigned t = threadIdx.x;
  if constexpr (THREADS % CHUNKS == 0 && N % THREADS == 0) {
    if (run.width == 1) {
      /* Keys affine in the gathered index (every run but blocks of width > 1): a thread's
       * chunk column is fixed and its keys step by a constant, so its source address steps
       * by a constant too — no per-chunk key or 64-bit address arithmetic. */
      constexpr int KSTEP = THREADS / CHUNKS;
      static_assert((KSTEP & (KSTEP - 1)) == 0, "THREADS / CHUNKS: a power of two");
      __builtin_assume(t < (unsigned)THREADS); /* the callers' threads: kk0 < KSTEP */
      const int ch = (int)(t % CHUNKS), kk0 = (int)(t / CHUNKS);
      const bool col = ch * EPC < SPLAT_HEAD_DIM;
      int64_t key = (int64_t)run.phase + (g0 + kk0) * (int64_t)run.stride;
      const int64_t kstep = (int64_t)KSTEP * run.stride;
      const T *src = kb + key * s2 + ch * EPC;
      const int64_t sstep = kstep * s2;
      if (ONE_TEST && col && key + (N / THREADS - 1) * kstep < seq_k) {
        /* Every key of this thread inside seq_k (all but a sequence's last sub-tile): the
         * copies without a test or a select each (R-SDDMM 1.02x at head_dim 64,
         * bench/NOTES.md v19). Rows KSTEP apart, KSTEP a multiple of 8, are a constant
         * apart in both stage layouts (padded rows; 128-byte swizzle, whose phase is the
         * row % 8). */
        const uint32_t a0 = splat_smem_addr(dst(kk0, ch));
        const uint32_t astep = N / THREADS > 1 ? splat_smem_addr(dst(kk0 + KSTEP, ch)) - a0 : 0;
#pragma unroll
        for (int i = 0; i < N / THREADS; i++) {
          splat_cp_async16_at(KSTEP % 8 == 0 ? a0 + (uint32_t)i * astep
                                             : splat_smem_addr(dst(kk0 | (i * KSTEP), ch)),
                              src);
          src += sstep;
        }
        return;
      }
#pragma unroll
      for (int i = 0; i < N / THREADS; i++) {
        const bool valid = col && key < seq_k;
        /* kk0 < KSTEP, a power of two: the row is kk0 | i KSTEP, and the bits of a
         * swizzle phase (row % 8) stay kk0's when KSTEP >= 8 */
        splat_cp_async16(dst(kk0 | (i * KSTEP), ch), valid ? src : base, valid);
        key += kstep;
        src += sstep;
      }
      return;
    }
  }
  /* A fixed trip count from an unsigned thread index: the chunk's row and column are
   * shifts, the shared base of dst is computed once. Not unrolled where the caller has a
   * faster path for most runs (ROLLED: the warp-specialised kernel's TMA; unrolled, this loop
   * was 6% of its compile time, bench/NOTES.md v11). */
#pragma unroll(ROLLED ? 1 : (N + THREADS - 1) / THREADS)
  for (int i = 0; i < (N + THREADS - 1) / THREADS; i++) {
    const unsigned c = t + (unsigned)(i * THREADS);
    if (N % THREADS != 0 && c >= (unsigned)N) break;
    const int kk = (int)(c / CHUNKS), ch = (int)(c % CHUNKS);
    const int64_t key = splat_group_key(run.phase, run.stride, run.width, g0 + kk);
    const bool valid = key < seq_k && ch * EPC < SPLAT_HEAD_DIM;
    splat_cp_async16(dst(kk, ch), valid ? kb + key * s2 + ch * EPC : base, valid);
  }
}

#endif
