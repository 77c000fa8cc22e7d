/* sddmm_wgmma.cuh — R-SDDMM on Hopper (sm_90a): scores = scale * Q K^T on wgmma, written
 * into ACSR values like the mma.sync tile kernel of sddmm.cuh, whose row kernel (the
 * irregular remainder, odd layouts), CTA pipeline, staging and write-out this file shares.
 *
 * SPLAT_SDDMM_TILE_NAME: one warpgroup (64 rows) per CTA = (query tile row block,
 * batch*head). The block's Q rows are gathered once per (b, h) into padded rows and
 * become the warps' A registers (the RS form: no Q in shared memory afterwards, so its
 * buffer doubles as the score staging tile). Each key sub-tile of SPLAT_KT gathered keys
 * lands by cp.async in a 128-byte-swizzled stage (128-byte panels, the layout
 * splat_wgmma_desc_k reads); each thread fences the chunks it copied into the async
 * proxy, and after the barrier the warpgroup issues one wgmma m64n{KT} per k step:
 *   - f16 / bf16: k16 steps, Q's A registers loaded by ldmatrix (the m16n8k16 A layout);
 *   - f32: 3xTF32 (x = hi + lo, both tf32 rounded to nearest; lo*hi + hi*lo + hi*hi),
 *     three m64n{KT}k8 products per k8 step, the two small ones into an accumulator of
 *     their own, added to hi*hi's at the end (the tensor cores' accumulation rounds each
 *     step's sum toward zero, it appears: added into hi*hi's accumulator, each small
 *     product cost a truncation at that accumulator's ulp, and at head_dim 256 the scores
 *     missed twice the naive fp32 error by up to 1.3x; bench/NOTES.md v21); every thread
 *     splits the chunks it copied
 *     itself (visible to it after its own wait_group, so no extra barrier) into hi in
 *     place and lo in one shared lo tile, Q into hi / lo registers once per (b, h).
 * The tensor work leaves the warps' instruction stream: what remains per sub-tile is the
 * gather, the staging and the stores (and for f32 the split).
 *
 * Prelude: as sddmm.cuh, with SPLAT_WARPS = 4, SPLAT_HEAD_DIM a multiple of 64 (f16 /
 * bf16) or 32 (f32: whole 128-byte panels), SPLAT_KT 64 (or 128 for f16 / bf16, 32 for
 * f32). */

#define SPLAT_SDDMM_WG 1
#include "wgmma.cuh"

#include "sddmm.cuh"

#if !defined(SPLAT_NO_TILE)

#define SPLAT_WG_F32 (SPLAT_DT == SPLAT_F32)
static_assert(SPLAT_WARPS == 4 &&
                  (SPLAT_WG_F32 ? SPLAT_HEAD_DIM % 32 == 0 && (SPLAT_KT == 32 || SPLAT_KT == 64)
                                : SPLAT_HEAD_DIM % 64 == 0 && (SPLAT_KT == 64 || SPLAT_KT == 128)),
              "sddmm_wgmma.cuh: one warpgroup; f32: head_dim a multiple of 32, 32 or 64 keys; "
              "f16 / bf16: head_dim a multiple of 64, 64 or 128 keys");

#define SPLAT_ESZ (SPLAT_WG_F32 ? 4 : 2)                     /* bytes per Q / K element */
#define SPLAT_EPC (16 / SPLAT_ESZ)                           /* elements per 16-byte chunk */
#define SPLAT_WCHUNKS (SPLAT_HEAD_DIM / SPLAT_EPC)           /* 16-byte chunks of a row */
#define SPLAT_KSTEPS (SPLAT_HEAD_DIM / (SPLAT_EPC * 2))      /* k8 (f32) or k16 steps */
#define SPLAT_LDQ (SPLAT_HEAD_DIM + SPLAT_EPC)               /* padded Q row (elements) */
#define SPLAT_KBYTES (SPLAT_KT * SPLAT_HEAD_DIM * SPLAT_ESZ) /* one swizzled K tile */
#define SPLAT_QBYTES (SPLAT_TQ * SPLAT_LDQ * SPLAT_ESZ)      /* Q at a (b, h)'s start */
#define SPLAT_OBYTES (SPLAT_TQ * SPLAT_LDO * SPLAT_OSZ)      /* the score staging tile */
#define SPLAT_QOBYTES (SPLAT_QBYTES > SPLAT_OBYTES ? SPLAT_QBYTES : SPLAT_OBYTES)
#if SPLAT_WG_F32
#define SPLAT_QK_T float
#else
#define SPLAT_QK_T uint16_t
#endif

/* Dynamic shared memory, bytes (kgen.c computes the same): 1024 of alignment slack, the
 * K ring, the lo tile (f32), Q / staging, the tile's runs, STAGES interval tables +
 * counts, row ids. */
#define SPLAT_SDDMM_SMEM                                                                     \
  (1024 + (SPLAT_STAGES + SPLAT_WG_F32) * SPLAT_KBYTES + SPLAT_QOBYTES +                     \
   SPLAT_SDDMM_RUNS * (int)sizeof(splat_dev_run) +                                           \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4 + \
   (SPLAT_SDDMM_ROWSTORE ? SPLAT_TQ * 16 : 0))

static_assert(
    SPLAT_SDDMM_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

#if SPLAT_WG_F32
/* The chunks of a K stage this thread gathered (splat_gather_keys' affine assignment:
 * column ch = t % WCHUNKS, rows kk0 + i * KSTEP with kk0 = t / WCHUNKS < KSTEP), split
 * into tf32 hi in place and lo at the same offset of the lo tile. KSTEP is a power of two
 * above kk0, so row kk0 + i KSTEP's swizzle phase is kk0's XOR (i KSTEP) % 8 and each
 * chunk's offset is the first one's plus constants. */
SPLAT_DEV void splat_sddmm_split_own(unsigned char *stage, unsigned char *lo) {
  constexpr int N = SPLAT_KT * SPLAT_WCHUNKS, KSTEP = SPLAT_THREADS / SPLAT_WCHUNKS;
  static_assert(
      N % SPLAT_THREADS == 0 && SPLAT_THREADS % SPLAT_WCHUNKS == 0 && (KSTEP & (KSTEP - 1)) == 0,
      "whole chunks per thread, a fixed column, a power-of-two row step");
  const unsigned t = threadIdx.x;
  const int ch = (int)(t % SPLAT_WCHUNKS), kk0 = (int)(t / SPLAT_WCHUNKS);
  const uint32_t base = splat_sw128_tile_off<SPLAT_KT>(kk0, ch);
#pragma unroll
  for (int i = 0; i < N / SPLAT_THREADS; i++) {
    const uint32_t off = (base + (uint32_t)(i * KSTEP * 128)) ^ (uint32_t)(((i * KSTEP) & 7) << 4);
    const float4 x = *(const float4 *)(stage + off);
    uint4 h, l;
    splat_tf32_split(x.x, h.x, l.x);
    splat_tf32_split(x.y, h.y, l.y);
    splat_tf32_split(x.z, h.z, l.z);
    splat_tf32_split(x.w, h.w, l.w);
    *(uint4 *)(stage + off) = h;
    *(uint4 *)(lo + off) = l;
  }
}
#endif

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_HEAD_DIM <= 64
                                                                ? (SPLAT_WG_F32 ? 3 : 4)
                                                                : (SPLAT_WG_F32 ? 2 : 3))
    SPLAT_SDDMM_TILE_NAME(const splat_sddmm_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  /* Swizzled tiles need 1024-byte alignment of their shared addresses. */
  const uint32_t base_addr = splat_smem_addr(splat_smem);
  unsigned char *sK = splat_smem + (((base_addr + 1023u) & ~1023u) - base_addr);
  unsigned char *sLo = sK + SPLAT_STAGES * SPLAT_KBYTES; /* f32 only */
  unsigned char *sQO = sLo + SPLAT_WG_F32 * SPLAT_KBYTES;
  splat_dev_run *sRuns = (splat_dev_run *)(sQO + SPLAT_QOBYTES);
  splat_ival *sIv = (splat_ival *)(sRuns + SPLAT_SDDMM_RUNS);
  int *sNiv = (int *)(sIv + SPLAT_STAGES * SPLAT_TQ * SPLAT_MAX_SEGS);
  int *sRow = sNiv + SPLAT_STAGES * SPLAT_TQ;
  /* With row stores, each warp's 16 row records (splat_sddmm_row_stores). */
  uint4 *sRec = (uint4 *)(sRow + SPLAT_TQ) + 16 * (threadIdx.x >> 5);
  const uint32_t k_addr = splat_smem_addr(sK);
  const SPLAT_QK_T *sQ = (const SPLAT_QK_T *)sQO;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  unsigned char *wo = sQO + 16 * warp * SPLAT_LDO * SPLAT_OSZ; /* this warp's staging rows */
  bool carry = false; /* splat_sddmm_emit's, kept across sub-tiles */
#if SPLAT_WG_F32
  const uint32_t lo_addr = splat_smem_addr(sLo);
  const int g = lane >> 2, t = lane & 3;
  uint32_t qh[SPLAT_KSTEPS][4], ql[SPLAT_KSTEPS][4]; /* this thread's A registers */
#else
  uint32_t qa[SPLAT_KSTEPS][4];    /* this thread's A registers */
#endif
  splat_sddmm_cta(
      P, sIv, sNiv, sRow, sRuns,
      [&](int64_t b, int64_t h, int nrows) {
        splat_gather_rows<SPLAT_WCHUNKS, SPLAT_TQ, SPLAT_THREADS, SPLAT_QK_T>(
            P.q, b, h, sRow, nrows,
            [&](int r, int ch) { return (SPLAT_QK_T *)sQO + r * SPLAT_LDQ + ch * SPLAT_EPC; });
      },
      [&](const splat_dev_run &run, int64_t g0, int64_t ko, int st) {
        unsigned char *sk = sK + st * SPLAT_KBYTES;
        splat_gather_keys<SPLAT_WCHUNKS, SPLAT_KT, SPLAT_THREADS, false, true>(
            (const SPLAT_QK_T *)P.k.data, ko, P.k.s2, P.pat.seq_k, run, g0,
            [&](int kk, int ch) { return sk + splat_sw128_tile_off<SPLAT_KT>(kk, ch); });
      },
      [&](bool first, bool last, int32_t g0, int tb, int it, int nrows, int64_t bh_off, bool vec) {
#if SPLAT_WG_F32
        splat_sddmm_split_own(sK + (it % SPLAT_STAGES) * SPLAT_KBYTES, sLo);
        splat_fence_proxy_async(); /* this thread's hi / lo -> visible to wgmma */
#else
        splat_fence_proxy_async(); /* this thread's copies -> visible to wgmma */
#endif
        __syncthreads(); /* sub-tile `it`, its tables (and at it 0, Q) are in */
        if (it == 0) {
#if SPLAT_WG_F32
          /* Q's A registers: rows 16 warp + g (+8), columns 8 kk + t (+4), split once. */
          const float *qr = sQ + (16 * warp + g) * SPLAT_LDQ + t;
#pragma unroll
          for (int kk = 0; kk < SPLAT_KSTEPS; kk++) {
            splat_tf32_split(qr[8 * kk], qh[kk][0], ql[kk][0]);
            splat_tf32_split(qr[8 * SPLAT_LDQ + 8 * kk], qh[kk][1], ql[kk][1]);
            splat_tf32_split(qr[8 * kk + 4], qh[kk][2], ql[kk][2]);
            splat_tf32_split(qr[8 * SPLAT_LDQ + 8 * kk + 4], qh[kk][3], ql[kk][3]);
          }
#else
      /* Q's A registers (the m16n8k16 A layout of the warp's 16 rows), by ldmatrix. */
#pragma unroll
          for (int kk = 0; kk < SPLAT_KSTEPS; kk++)
            splat_ldmatrix_x4(
                qa[kk], sQ + (16 * warp + (lane & 15)) * SPLAT_LDQ + kk * 16 + (lane >> 4) * 8);
#endif
          __syncthreads(); /* every warp has its Q: the buffer becomes the staging tile */
        }
        const uint32_t kh = k_addr + (uint32_t)((it % SPLAT_STAGES) * SPLAT_KBYTES);
        float acc[SPLAT_KT / 2];
#if SPLAT_WG_F32
        float small[SPLAT_KT / 2]; /* lo*hi + hi*lo */
#endif
        splat_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < SPLAT_KSTEPS; kk++) {
          const uint64_t dh = splat_wgmma_desc_k<SPLAT_KT>(kh, kk);
#if SPLAT_WG_F32
          const uint64_t dl = splat_wgmma_desc_k<SPLAT_KT>(lo_addr, kk);
          splat_wgmma_rs_tf32<SPLAT_KT>(small, ql[kk], dh, kk > 0);
          splat_wgmma_rs_tf32<SPLAT_KT>(small, qh[kk], dl, 1);
          splat_wgmma_rs_tf32<SPLAT_KT>(acc, qh[kk], dh, kk > 0);
#else
          splat_wgmma_rs<SPLAT_DT, SPLAT_KT>(acc, qa[kk], dh, kk > 0);
#endif
        }
        splat_wgmma_commit();
        /* While the products run: the warp's column blocks and its rows' shifts (a warp none
         * of whose rows meets the sub-tile stages and writes nothing). */
        int blocks;
        const int shift = splat_sddmm_prepare(P, wo, sIv, sNiv, sRow, tb, nrows, warp, lane, first,
                                              g0, bh_off, vec, carry, blocks);
        const bool touches = blocks != 0;
        splat_wgmma_wait<0>();
        splat_wgmma_fence_acc(acc);
#if SPLAT_WG_F32
        splat_wgmma_fence_acc(small);
#pragma unroll
        for (int i = 0; i < SPLAT_KT / 2; i++) acc[i] += small[i];
#endif
        if (touches)
          splat_sddmm_emit(P, acc, wo, sIv, sNiv, sRow, tb, nrows, warp, lane, first, last, g0,
                           bh_off, vec, shift, blocks, carry, sRec);
      });
}

#endif /* !SPLAT_NO_TILE */
