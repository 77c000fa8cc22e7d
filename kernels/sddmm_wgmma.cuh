/* sddmm_wgmma.cuh — R-SDDMM for f32 inputs on Hopper (sm_90a): scores = scale * Q K^T on
 * wgmma with 3xTF32 (x = hi + lo, both tf32 rounded to nearest; lo*hi + hi*lo + hi*hi),
 * written into ACSR values like the mma.sync tile kernel of sddmm.cuh, whose row kernel
 * (the irregular remainder, odd layouts), staging and write-out this file shares.
 *
 * SPLAT_SDDMM_TILE_NAME: one warpgroup (64 rows) per CTA = (query tile row block,
 * batch*head). The block's Q rows are gathered once per (b, h), split into hi / lo tf32
 * A registers (the RS form: no Q in shared memory afterwards, so its buffer doubles as
 * the score staging tile). Each key sub-tile of SPLAT_KT gathered keys lands by cp.async
 * in a 128-byte-swizzled stage (32-element f32 panels, the layout splat_wgmma_desc_k
 * reads); every thread splits the chunks it copied itself (visible to it after its own
 * wait_group, so no extra barrier) into hi in place and lo in one shared lo tile, fences
 * them into the async proxy, and after the barrier the warpgroup issues three wgmma
 * m64n{KT}k8 TF32 products per k8 step. The f32 tensor work leaves the warps' instruction
 * stream: what remains per sub-tile is the split (a few instructions per element, once
 * per CTA instead of once per warp), the staging and the stores.
 *
 * Prelude: as sddmm.cuh, with SPLAT_DT = SPLAT_F32, SPLAT_WARPS = 4 and SPLAT_HEAD_DIM a
 * multiple of 32 (whole 128-byte panels); SPLAT_KT 32 or 64. */

#define SPLAT_SDDMM_WG 1
#include "sddmm.cuh"
#include "wgmma.cuh"

#if !defined(SPLAT_NO_TILE)

static_assert(SPLAT_DT == SPLAT_F32 && SPLAT_WARPS == 4 && SPLAT_HEAD_DIM % 32 == 0 &&
                  (SPLAT_KT == 32 || SPLAT_KT == 64),
              "sddmm_wgmma.cuh: f32, one warpgroup, head_dim a multiple of 32, 32 or 64 keys");

#define SPLAT_WCHUNKS (SPLAT_HEAD_DIM / 4)              /* 16-byte chunks of an f32 row */
#define SPLAT_KSTEPS (SPLAT_HEAD_DIM / 8)               /* k8 steps */
#define SPLAT_LDQ (SPLAT_HEAD_DIM + 4)                  /* padded Q row (floats) */
#define SPLAT_KBYTES (SPLAT_KT * SPLAT_HEAD_DIM * 4)    /* one swizzled K tile */
#define SPLAT_QBYTES (SPLAT_TQ * SPLAT_LDQ * 4)         /* Q at a (b, h)'s start */
#define SPLAT_OBYTES (SPLAT_TQ * SPLAT_LDO * SPLAT_OSZ) /* the score staging tile */
#define SPLAT_QOBYTES (SPLAT_QBYTES > SPLAT_OBYTES ? SPLAT_QBYTES : SPLAT_OBYTES)

/* Dynamic shared memory, bytes (kgen.c computes the same): 1024 of alignment slack, the
 * K ring, the lo tile, Q / staging, STAGES interval tables + counts, row ids. */
#define SPLAT_SDDMM_SMEM                                      \
  (1024 + (SPLAT_STAGES + 1) * SPLAT_KBYTES + SPLAT_QOBYTES + \
   SPLAT_STAGES * SPLAT_TQ * (SPLAT_MAX_SEGS * (int)sizeof(splat_ival) + 4) + SPLAT_TQ * 4)

static_assert(
    SPLAT_SDDMM_SMEM == SPLAT_TILE_SMEM,
    "the launch (kgen.c splat__kspec_tile_smem) and this kernel disagree on its shared memory");

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

extern "C" __global__ void __launch_bounds__(SPLAT_THREADS, SPLAT_HEAD_DIM <= 64 ? 3 : 2)
    SPLAT_SDDMM_TILE_NAME(const splat_sddmm_params P) {
  extern __shared__ __align__(16) unsigned char splat_smem[];
  /* Swizzled tiles need 1024-byte alignment of their shared addresses. */
  const uint32_t base_addr = splat_smem_addr(splat_smem);
  unsigned char *sK = splat_smem + (((base_addr + 1023u) & ~1023u) - base_addr);
  unsigned char *sLo = sK + SPLAT_STAGES * SPLAT_KBYTES;
  unsigned char *sQO = sLo + SPLAT_KBYTES;
  splat_ival *sIv = (splat_ival *)(sQO + SPLAT_QOBYTES);
  int *sNiv = (int *)(sIv + SPLAT_STAGES * SPLAT_TQ * SPLAT_MAX_SEGS);
  int *sRow = sNiv + SPLAT_STAGES * SPLAT_TQ;
  const uint32_t k_addr = splat_smem_addr(sK), lo_addr = splat_smem_addr(sLo);
  const float *sQ = (const float *)sQO;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  unsigned char *wo = sQO + 16 * warp * SPLAT_LDO * SPLAT_OSZ; /* this warp's staging rows */
  uint32_t qh[SPLAT_KSTEPS][4], ql[SPLAT_KSTEPS][4];           /* this thread's A registers */
  splat_sddmm_cta(
      P, sIv, sNiv, sRow,
      [&](int64_t b, int64_t h, int nrows) {
        splat_gather_rows<SPLAT_WCHUNKS, SPLAT_TQ, SPLAT_THREADS, float>(
            P.q, b, h, sRow, nrows,
            [&](int r, int ch) { return (float *)sQO + r * SPLAT_LDQ + ch * 4; });
      },
      [&](const splat_dev_run &run, int64_t g0, int64_t ko, int st) {
        unsigned char *sk = sK + st * SPLAT_KBYTES;
        splat_gather_keys<SPLAT_WCHUNKS, SPLAT_KT, SPLAT_THREADS>(
            (const float *)P.k.data, ko, P.k.s2, P.pat.seq_k, run, g0,
            [&](int kk, int ch) { return sk + splat_sw128_tile_off<SPLAT_KT>(kk, ch); });
      },
      [&](bool first, bool last, int32_t g0, int tb, int it, int nrows, int64_t bh_off, bool vec) {
        splat_sddmm_split_own(sK + (it % SPLAT_STAGES) * SPLAT_KBYTES, sLo);
        splat_fence_proxy_async(); /* this thread's hi / lo -> visible to wgmma */
        __syncthreads();           /* sub-tile `it`, its tables (and at it 0, Q) are in */
        if (it == 0) {
          /* Q's A registers: rows 16 warp + g (+8), columns 8 kk + t (+4), split once. */
          const float *qa = sQ + (16 * warp + g) * SPLAT_LDQ + t;
#pragma unroll
          for (int kk = 0; kk < SPLAT_KSTEPS; kk++) {
            splat_tf32_split(qa[8 * kk], qh[kk][0], ql[kk][0]);
            splat_tf32_split(qa[8 * SPLAT_LDQ + 8 * kk], qh[kk][1], ql[kk][1]);
            splat_tf32_split(qa[8 * kk + 4], qh[kk][2], ql[kk][2]);
            splat_tf32_split(qa[8 * SPLAT_LDQ + 8 * kk + 4], qh[kk][3], ql[kk][3]);
          }
          __syncthreads(); /* every warp has its Q: the buffer becomes the staging tile */
        }
        const uint32_t kh = k_addr + (uint32_t)((it % SPLAT_STAGES) * SPLAT_KBYTES);
        float acc[SPLAT_KT / 2];
        splat_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < SPLAT_KSTEPS; kk++) {
          const uint64_t dh = splat_wgmma_desc_k<SPLAT_KT>(kh, kk);
          const uint64_t dl = splat_wgmma_desc_k<SPLAT_KT>(lo_addr, kk);
          splat_wgmma_rs_tf32<SPLAT_KT>(acc, ql[kk], dh, kk > 0);
          splat_wgmma_rs_tf32<SPLAT_KT>(acc, qh[kk], dl, 1);
          splat_wgmma_rs_tf32<SPLAT_KT>(acc, qh[kk], dh, 1);
        }
        splat_wgmma_commit();
        splat_wgmma_wait<0>();
        splat_wgmma_fence_acc(acc);
        /* A warp none of whose rows meets the sub-tile stages and writes nothing. */
        if (splat_warp_touches<SPLAT_TQ, SPLAT_KT>(sIv, sNiv, tb, nrows, warp, lane, g0))
          splat_sddmm_emit(P, acc, wo, sIv, sNiv, sRow, tb, nrows, warp, lane, first, last, g0,
                           bh_off, vec);
      });
}

#endif /* !SPLAT_NO_TILE */
