/* wgmma.cuh — Hopper (sm_90a) building blocks of the fused attention kernel: the
 * 128-byte-swizzle shared-memory tile layout, wgmma matrix descriptors for K-major and
 * MN-major (transposed) operands, wgmma.mma_async wrappers (SS and RS forms, f16/bf16
 * operands, fp32 accumulators, N = 64 and 128; an RS form for TF32, N = 32 and 64, used
 * by the f32 R-SDDMM of sddmm_wgmma.cuh), the accumulator register layout and its
 * conversion into the A registers of the next product (P = S in 16 bits, FlashAttention-3),
 * async-proxy fences, mbarriers, setmaxnreg, TMA tile loads and programmatic dependent
 * launches. Verified on an H100 by
 * tests/gpu/wgmma_check.cu (S = Q K^T by SS, O = P V by RS with V MN-major, tiles gathered
 * by cp.async or loaded by TMA, bf16 and f16, head_dim 64/128, key tiles 64/128).
 *
 * Including this file is harmless on other targets: every wrapper whose instruction the
 * target lacks compiles to __trap() (wgmma and setmaxnreg need sm_90a, the
 * "arch-specific" target, which NVRTC/nvcc signal with __CUDA_ARCH_FEAT_SM90_ALL; the
 * mbarrier, fence.proxy.async and TMA wrappers need sm_90). SPLAT_HAS_WGMMA and
 * SPLAT_HAS_TMA say (0/1) which set is live, for static checks in kernels.
 *
 * Conventions: "warpgroup" = 4 consecutive warps starting at a warp index divisible by 4;
 * t = threadIdx.x % 128 within it, w = t / 32 (its warp), lane = t % 32, g = lane / 4,
 * q = lane % 4. 16-bit elements (f16 or bf16, DT = SPLAT_F16 / SPLAT_BF16) except the
 * TF32 wrapper, whose 32-element panels have the same 128-byte rows. */

#include "common.cuh"

#ifndef SPLAT_KERNELS_WGMMA_CUH
#define SPLAT_KERNELS_WGMMA_CUH

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SPLAT_HAS_WGMMA 1
#else
#define SPLAT_HAS_WGMMA 0
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SPLAT_HAS_TMA 1
#else
#define SPLAT_HAS_TMA 0
#endif

/* ================================================================ tile layout
 *
 * A tile of ROWS rows x D 16-bit columns (D = 64 or 128) is stored as D/64 "panels"
 * one after another, each panel ROWS x 64 elements = ROWS x 128 bytes, 1024-byte
 * aligned (the swizzle reads address bits 4..9, so the tile base must be 1024-aligned).
 * Within a panel, row r occupies bytes [128 r, 128 r + 128) and its 16-byte chunk c
 * (elements 8c .. 8c+7 of the panel's 64) sits at chunk slot c ^ (r % 8). This is
 * CUTLASS's Swizzle<3,4,3> and exactly what TMA writes with CU_TENSOR_MAP_SWIZZLE_128B
 * and a box whose inner extent is 64 elements (128 bytes).
 *
 * The same physical layout serves both operand kinds:
 *   - K-major: Q [64][D] (A of S = Q K^T) and K [keys][D] (B of S): the reduction dim
 *     (head_dim) is contiguous;
 *   - MN-major: V [keys][D] as B of O = P V: the reduction dim is keys, and N = head_dim
 *     is the contiguous one; wgmma reads it with the transpose bit (tnspB = 1).
 * Only the descriptor differs (below). */

/* Byte offset of 16-byte chunk `ch` (0..7) of row `r` inside one ROWS x 64 panel. */
SPLAT_DEV uint32_t splat_sw128_off(int r, int ch) {
  return (uint32_t)(r * 128 + ((ch ^ (r & 7)) << 4));
}

/* Byte offset of 16-byte chunk `ch` (0 .. D/8-1; elements 8ch .. 8ch+7 of the row) of
 * row `r` of a ROWS x D tile stored as D/64 panels (K-major Q, K). */
template <int ROWS>
SPLAT_DEV uint32_t splat_sw128_tile_off(int r, int ch) {
  return (uint32_t)((ch >> 3) * (ROWS * 128)) + splat_sw128_off(r, ch & 7);
}

/* The MN-major V tile [KEYS][D] (head_dim contiguous): identical to the K-major
 * formula (row = key, chunk = 8 head_dim elements); spelled separately for clarity. */
template <int KEYS>
SPLAT_DEV uint32_t splat_sw128_tile_off_mn(int key, int ch) {
  return splat_sw128_tile_off<KEYS>(key, ch);
}

/* ================================================================ descriptors
 *
 * 64-bit shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
 *   bits  0..13  start address >> 4 (shared-window byte address)
 *   bits 16..29  leading dimension byte offset (LBO) >> 4
 *   bits 32..45  stride dimension byte offset (SBO) >> 4
 *   bits 49..51  base offset (0: each 1024-byte swizzle atom starts 1024-aligned)
 *   bits 62..63  swizzle: 0 none, 1 128B, 2 64B, 3 32B
 *
 * K-major, 128B swizzle (Q as A and K as B of S = Q K^T):
 *   LBO = 16 B (field 1; unused: one k16 step, 32 bytes, never leaves a 128-byte row)
 *   SBO = 1024 B (field 64: the distance between 8-row groups)
 *   k16 step kk (head_dim elements 16kk .. 16kk+15): start address +
 *     (kk / 4) * ROWS * 128  (the panel)  +  (kk % 4) * 32  (the 32-byte slice of the
 *     row; the hardware applies the XOR swizzle to the address it forms, which is why
 *     the 32-byte steps inside a swizzled row are legal with base offset 0).
 *
 * MN-major, 128B swizzle, tnspB = 1 (V [KEYS][D] as B of O = P V; K dim = keys,
 * N dim = head_dim):
 *   LBO = KEYS * 128 B (the panel stride: the distance between the 64-element blocks of
 *         N; only read when N > 64, i.e. head_dim 128 — D = 64 ignores it)
 *   SBO = 1024 B (the distance between groups of 8 keys)
 *   k16 step kk (keys 16kk .. 16kk+15): start address + kk * 2048.
 *
 * Values used by the check (bytes; field = bytes >> 4):
 *   K-major  Q tile (64 rows):      LBO 16, SBO 1024, swizzle 1; panel stride 8192
 *   K-major  K tile (KEYS rows):    LBO 16, SBO 1024, swizzle 1; panel stride KEYS*128
 *   MN-major V tile, D = 64:        LBO KEYS*128 (ignored), SBO 1024, swizzle 1
 *   MN-major V tile, D = 128:       LBO KEYS*128 (8192 at 64 keys, 16384 at 128), SBO 1024
 */

#define SPLAT_WGMMA_SWIZZLE_128B 1ull

/* Descriptor of the matrix at shared address `saddr` (bytes, 16-aligned) with the given
 * LBO, SBO (bytes, multiples of 16) and 128-byte swizzle. */
SPLAT_DEV uint64_t splat_wgmma_desc(uint32_t saddr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((saddr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (SPLAT_WGMMA_SWIZZLE_128B << 62);
}

/* x, through an instruction the compiler cannot move out of a loop: values derived from it
 * are computed where they are used, not kept in registers from before the loop. */
SPLAT_DEV uint64_t splat_opaque(uint64_t x) {
  uint64_t y;
  asm volatile("mov.b64 %0, %1;" : "=l"(y) : "l"(x));
  return y;
}

/* A descriptor moved by `bytes` (multiple of 16): the start address is the low field, and
 * shared addresses stay below 2^18, so a plain add never carries out of it. */
SPLAT_DEV uint64_t splat_wgmma_desc_add(uint64_t desc, uint32_t bytes) {
  /* On the low word only: one 32-bit add, no carry chain. */
  return (desc & 0xFFFFFFFF00000000ull) | (uint32_t)((uint32_t)desc + (bytes >> 4));
}

/* Where k16 step kk of a K-major ROWS x D tile starts, in bytes from the tile: its
 * 64-column panel, then 32 bytes per step inside the panel's 128-byte rows. */
template <int ROWS>
SPLAT_DEV uint32_t splat_wgmma_k_step(int kk) {
  return (uint32_t)((kk >> 2) * (ROWS * 128) + (kk & 3) * 32);
}

/* K-major descriptor of k16 step kk of a ROWS x D tile at shared address `tile`
 * (1024-aligned; Q as A, K as B of S = Q K^T). Step kk of the same tile is also
 * splat_wgmma_desc_add(splat_wgmma_desc_k<ROWS>(tile, 0), splat_wgmma_k_step<ROWS>(kk)). */
template <int ROWS>
SPLAT_DEV uint64_t splat_wgmma_desc_k(uint32_t tile, int kk) {
  return splat_wgmma_desc(tile + splat_wgmma_k_step<ROWS>(kk), 16, 1024);
}

/* Where k16 step kk (keys 16kk .. 16kk+15) of an MN-major V tile starts: 16 rows of 128
 * bytes per step. */
SPLAT_DEV uint32_t splat_wgmma_mn_step(int kk) {
  return (uint32_t)(kk * 2048);
}

/* MN-major descriptor of k16 step kk of a V tile [KEYS][D] at shared address `tile`
 * (1024-aligned); use with tnspB = 1. */
template <int KEYS>
SPLAT_DEV uint64_t splat_wgmma_desc_mn(uint32_t tile, int kk) {
  return splat_wgmma_desc(tile + splat_wgmma_mn_step(kk), KEYS * 128, 1024);
}

/* ================================================================ register layouts
 *
 * Accumulator of m64nNk16 (fp32, N/2 registers per thread, d[0 .. N/2)): the warpgroup's
 * warp w owns rows 16w .. 16w+15; for register i, with j = i / 4 (the 8-column block)
 * and e = i % 4:
 *     row = 16 w + g + 8 (e / 2)        col = 8 j + 2 q + (e % 2)
 * i.e. d[4j], d[4j+1] are (g, 8j+2q), (g, 8j+2q+1) and d[4j+2], d[4j+3] the same
 * columns of row g+8 — the m16n8 accumulator of mma.sync, repeated over N/8 column
 * blocks, one 16-row slab per warp.
 *
 * A operand from registers (RS form), m64k16, 16-bit: 4 registers of 2 elements per
 * thread per k16 step (low half = lower column), again the mma.sync m16n8k16 A layout
 * per warp slab:
 *     a[0] = (g,   2q .. 2q+1)     a[1] = (g+8, 2q .. 2q+1)
 *     a[2] = (g,   2q+8 .. 2q+9)   a[3] = (g+8, 2q+8 .. 2q+9)     (row 16w + ..)
 *
 * So the S accumulator (64 x KEYS) turns into the A registers of P for O += P V without
 * any data movement (the FlashAttention-3 trick): for k16 step kk (keys 16kk .. 16kk+15)
 *     a[0] = pack(s[8kk+0], s[8kk+1])   a[1] = pack(s[8kk+2], s[8kk+3])
 *     a[2] = pack(s[8kk+4], s[8kk+5])   a[3] = pack(s[8kk+6], s[8kk+7])
 * (splat_wgmma_acc_to_a below). Row statistics of the online softmax: a thread holds
 * rows g and g+8 of its warp's slab; the 4 threads of a quad (same g) share them, so a
 * row max/sum is the thread's partial over its registers then two __shfl_xor (1, 2). */

/* Row and column (within the 64 x N tile) of accumulator register i of thread t
 * (0..127 within the warpgroup). */
SPLAT_DEV int splat_wgmma_acc_row(int t, int i) {
  return 16 * (t >> 5) + ((t & 31) >> 2) + 8 * ((i >> 1) & 1);
}
SPLAT_DEV int splat_wgmma_acc_col(int t, int i) {
  return 8 * (i >> 2) + 2 * (t & 3) + (i & 1);
}

/* S accumulator (64 x N, fp32) -> A registers of the 16-bit P for N/16 k16 steps. */
template <int DT, int N>
SPLAT_DEV void splat_wgmma_acc_to_a(const float (&s)[N / 2], uint32_t (&a)[N / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < N / 16; kk++) {
#pragma unroll
    for (int r = 0; r < 4; r++)
      a[kk][r] = splat_pack2<DT>(s[8 * kk + 2 * r], s[8 * kk + 2 * r + 1]);
  }
}

/* ================================================================ wgmma
 *
 * Order of a product: (registers that the wgmma reads or writes were last written by
 * ordinary instructions) splat_wgmma_fence(); issue splat_wgmma_ss / _rs for every k16
 * step; splat_wgmma_commit(); ... splat_wgmma_wait<n>() before reading the accumulators
 * (n = number of younger groups allowed in flight). splat_wgmma_fence_acc() around a
 * group stops the compiler from moving accumulator accesses across it.
 *
 * Shared memory written by ordinary stores or by cp.async (generic proxy) must be made
 * visible to wgmma (async proxy): each writing thread, after its cp.async.wait_group,
 * runs splat_fence_proxy_async(), then the barrier, then the wgmma. TMA writes are
 * async-proxy already; waiting on their mbarrier suffices. */

SPLAT_DEV void splat_wgmma_fence() {
#if SPLAT_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
SPLAT_DEV void splat_wgmma_commit() {
#if SPLAT_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  __trap();
#endif
}
template <int N>
SPLAT_DEV void splat_wgmma_wait() {
#if SPLAT_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
  __trap();
#endif
}
/* Compiler-only fence on each register of an accumulator or A fragment. */
template <int R>
SPLAT_DEV void splat_wgmma_fence_acc(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(d[i])::"memory");
}
template <int R>
SPLAT_DEV void splat_wgmma_fence_regs(uint32_t (&a)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+r"(a[i])::"memory");
}

/* Shared memory written through the generic proxy (st.shared, cp.async) -> visible to
 * the async proxy (wgmma, TMA store). */
SPLAT_DEV void splat_fence_proxy_async() {
#if SPLAT_HAS_TMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#else
  __trap();
#endif
}

#if SPLAT_HAS_WGMMA
#define SPLAT__WG_ASM(...) asm volatile(__VA_ARGS__)
#else
#define SPLAT__WG_ASM(...) __trap()
#endif

#define SPLAT__WG_R32                                       \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15," \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define SPLAT__WG_O32(d)                                                                          \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define SPLAT__WG_R64                                                \
  "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"          \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31," \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47," \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define SPLAT__WG_O64(d)                                                                          \
  SPLAT__WG_O32(d), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), \
      "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]),  \
      "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]),  \
      "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]),  \
      "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])

/* SS form: d (+)= A(desc da, 64 x 16, K-major) * B(desc db, 16 x N); TB = tnspB. */
#define SPLAT__WGMMA_SS(N, TY, R, O, IA, IB, IS, ITB)                                         \
  template <int TB>                                                                           \
  SPLAT_DEV void splat__wgmma_ss_##TY##_n##N(float(&d)[N / 2], uint64_t da, uint64_t db,      \
                                             int scale_d) {                                   \
    SPLAT__WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " IS                                      \
                  ", 0;\n"                                                                    \
                  "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TY "." #TY " " R ", " IA \
                  ", " IB ", p, 1, 1, 0, " ITB ";\n}\n"                                       \
                  : O(d)                                                                      \
                  : "l"(da), "l"(db), "r"(scale_d), "n"(TB));                                 \
  }
/* RS form: d (+)= A(4 registers, 64 x 16) * B(desc db, 16 x N); TB = tnspB. */
#define SPLAT__WGMMA_RS(N, TY, R, O, IA, IB, IS, ITB)                                              \
  template <int TB>                                                                                \
  SPLAT_DEV void splat__wgmma_rs_##TY##_n##N(float(&d)[N / 2], const uint32_t(&a)[4], uint64_t db, \
                                             int scale_d) {                                        \
    SPLAT__WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " IS                                           \
                  ", 0;\n"                                                                         \
                  "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #TY "." #TY " " R ", " IA      \
                  ", " IB ", p, 1, 1, " ITB ";\n}\n"                                               \
                  : O(d)                                                                           \
                  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d), "n"(TB));   \
  }

SPLAT__WGMMA_SS(64, bf16, SPLAT__WG_R32, SPLAT__WG_O32, "%32", "%33", "%34", "%35")
SPLAT__WGMMA_SS(64, f16, SPLAT__WG_R32, SPLAT__WG_O32, "%32", "%33", "%34", "%35")
SPLAT__WGMMA_SS(128, bf16, SPLAT__WG_R64, SPLAT__WG_O64, "%64", "%65", "%66", "%67")
SPLAT__WGMMA_SS(128, f16, SPLAT__WG_R64, SPLAT__WG_O64, "%64", "%65", "%66", "%67")
SPLAT__WGMMA_RS(64, bf16, SPLAT__WG_R32, SPLAT__WG_O32, "{%32,%33,%34,%35}", "%36", "%37", "%38")
SPLAT__WGMMA_RS(64, f16, SPLAT__WG_R32, SPLAT__WG_O32, "{%32,%33,%34,%35}", "%36", "%37", "%38")
SPLAT__WGMMA_RS(128, bf16, SPLAT__WG_R64, SPLAT__WG_O64, "{%64,%65,%66,%67}", "%68", "%69", "%70")
SPLAT__WGMMA_RS(128, f16, SPLAT__WG_R64, SPLAT__WG_O64, "{%64,%65,%66,%67}", "%68", "%69", "%70")

#define SPLAT__WG_R16 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define SPLAT__WG_O16(d)                                                                          \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15])

/* TF32, RS form: d (+)= A(4 registers, 64 x 8) * B(desc db, 8 x N, K-major; TF32 takes no
 * transpose). A's registers per warp slab: a[0] = (g, q), a[1] = (g+8, q), a[2] = (g, q+4),
 * a[3] = (g+8, q+4), each an f32 container whose tf32 value the unit reads. */
#define SPLAT__WGMMA_RS_TF32(N, R, O, IA, IB, IS)                                                \
  SPLAT_DEV void splat__wgmma_rs_tf32_n##N(float(&d)[N / 2], const uint32_t(&a)[4], uint64_t db, \
                                           int scale_d) {                                        \
    SPLAT__WG_ASM("{\n.reg .pred p;\nsetp.ne.b32 p, " IS                                         \
                  ", 0;\n"                                                                       \
                  "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 " R ", " IA ", " IB   \
                  ", p, 1, 1;\n}\n"                                                              \
                  : O(d)                                                                         \
                  : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));          \
  }
SPLAT__WGMMA_RS_TF32(32, SPLAT__WG_R16, SPLAT__WG_O16, "{%16,%17,%18,%19}", "%20", "%21")
SPLAT__WGMMA_RS_TF32(64, SPLAT__WG_R32, SPLAT__WG_O32, "{%32,%33,%34,%35}", "%36", "%37")

/* d (+)= A * B on a 64 x N x 8 TF32 step, A from registers, B (K-major) a descriptor;
 * N: 32 or 64. A k8 step is 32 bytes of an f32 row, as a k16 step of a 16-bit one, so
 * splat_wgmma_desc_k addresses TF32 tiles (of 32-element panels) unchanged. */
template <int N>
SPLAT_DEV void splat_wgmma_rs_tf32(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db,
                                   int scale_d) {
  static_assert(N == 32 || N == 64, "splat_wgmma_rs_tf32: N must be 32 or 64");
  if constexpr (N == 32) splat__wgmma_rs_tf32_n32(d, a, db, scale_d);
  if constexpr (N == 64) splat__wgmma_rs_tf32_n64(d, a, db, scale_d);
}

/* d (+)= A * B on a 64 x N x 16 step, both operands in shared memory (descriptors);
 * scale_d = 0 overwrites d (its old contents, even NaN, are ignored), 1 accumulates.
 * DT: SPLAT_BF16 or SPLAT_F16; N: 64 or 128; TB: 1 for an MN-major B. */
template <int DT, int N, int TB = 0>
SPLAT_DEV void splat_wgmma_ss(float (&d)[N / 2], uint64_t da, uint64_t db, int scale_d) {
  static_assert(N == 64 || N == 128, "splat_wgmma_ss: N must be 64 or 128");
  static_assert(DT == SPLAT_BF16 || DT == SPLAT_F16, "splat_wgmma_ss: 16-bit operands only");
  if constexpr (DT == SPLAT_BF16 && N == 64) splat__wgmma_ss_bf16_n64<TB>(d, da, db, scale_d);
  if constexpr (DT == SPLAT_BF16 && N == 128) splat__wgmma_ss_bf16_n128<TB>(d, da, db, scale_d);
  if constexpr (DT == SPLAT_F16 && N == 64) splat__wgmma_ss_f16_n64<TB>(d, da, db, scale_d);
  if constexpr (DT == SPLAT_F16 && N == 128) splat__wgmma_ss_f16_n128<TB>(d, da, db, scale_d);
}

/* d (+)= A * B on a 64 x N x 16 step, A from registers (layout above), B a descriptor. */
template <int DT, int N, int TB = 0>
SPLAT_DEV void splat_wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t db, int scale_d) {
  static_assert(N == 64 || N == 128, "splat_wgmma_rs: N must be 64 or 128");
  static_assert(DT == SPLAT_BF16 || DT == SPLAT_F16, "splat_wgmma_rs: 16-bit operands only");
  if constexpr (DT == SPLAT_BF16 && N == 64) splat__wgmma_rs_bf16_n64<TB>(d, a, db, scale_d);
  if constexpr (DT == SPLAT_BF16 && N == 128) splat__wgmma_rs_bf16_n128<TB>(d, a, db, scale_d);
  if constexpr (DT == SPLAT_F16 && N == 64) splat__wgmma_rs_f16_n64<TB>(d, a, db, scale_d);
  if constexpr (DT == SPLAT_F16 && N == 128) splat__wgmma_rs_f16_n128<TB>(d, a, db, scale_d);
}

/* ================================================================ register budget
 * setmaxnreg: the warpgroup's per-thread register limit becomes R (multiple of 8,
 * 24..256). Takes effect only when the kernel has a register cap at entry
 * (__launch_bounds__(threads, 1) or -maxrregcount) and each warpgroup role is one branch
 * of one if/else; all warps of the warpgroup must execute it. FA3: producer dec to 24 or
 * 40, consumers inc to 232 / 240. */
template <int R>
SPLAT_DEV void splat_setmaxnreg_inc() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: 24..256, multiple of 8");
  SPLAT__WG_ASM("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
SPLAT_DEV void splat_setmaxnreg_dec() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg: 24..256, multiple of 8");
  SPLAT__WG_ASM("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}

/* Named barrier `id` (1..15; 0 is __syncthreads) over `nthreads` (multiple of 32), e.g.
 * one warpgroup's 128 threads. */
SPLAT_DEV void splat_bar_sync(int id, int nthreads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
SPLAT_DEV void splat_bar_arrive(int id, int nthreads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(nthreads) : "memory");
}
/* Named barrier `id` over `nthreads` that also returns whether `pred` holds in every one
 * of them (bar.red.and). */
SPLAT_DEV bool splat_bar_and(int id, int nthreads, bool pred) {
  uint32_t all;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.and.pred q, %2, %3, p;\n"
      "selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(all)
      : "r"((uint32_t)pred), "r"(id), "r"(nthreads)
      : "memory");
  return all != 0;
}

/* ================================================================ mbarrier
 * A 64-bit shared-memory barrier. Phase protocol: init with the number of arrivals per
 * phase; a phase completes when that many arrivals have happened and the expected
 * transaction bytes (arrive_expect_tx) have landed; waiters wait on the parity of the
 * phase they expect to complete (0 first, then 1, 0, ...). */

/* Initialise (one thread), then splat_mbar_fence_init() and a barrier before use. */
SPLAT_DEV void splat_mbar_init(uint64_t *bar, uint32_t count) {
#if SPLAT_HAS_TMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(splat_smem_addr(bar)), "r"(count)
               : "memory");
#else
  __trap();
#endif
}
/* Makes initialised mbarriers visible to the async proxy (TMA) and the cluster. */
SPLAT_DEV void splat_mbar_fence_init() {
#if SPLAT_HAS_TMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  __trap();
#endif
}
/* One arrival (release semantics at CTA scope). */
SPLAT_DEV void splat_mbar_arrive(uint64_t *bar) {
#if SPLAT_HAS_TMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(splat_smem_addr(bar)) : "memory");
#else
  __trap();
#endif
}
/* Expects `bytes` more transaction bytes in this phase, without an arrival: a thread
 * that arrives later anyway (before the phase can complete) issues the loads. */
SPLAT_DEV void splat_mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
#if SPLAT_HAS_TMA
  asm volatile(
      "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(splat_smem_addr(bar)),
      "r"(bytes)
      : "memory");
#else
  __trap();
#endif
}
/* One arrival that also expects `bytes` more transaction bytes in this phase (the
 * producer, before or after issuing the TMA loads that complete_tx on this barrier). */
SPLAT_DEV void splat_mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
#if SPLAT_HAS_TMA
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(splat_smem_addr(bar)),
      "r"(bytes)
      : "memory");
#else
  __trap();
#endif
}
/* Non-blocking probe: true once the phase of parity `parity` has completed. */
SPLAT_DEV bool splat_mbar_try_wait(uint64_t *bar, uint32_t parity) {
#if SPLAT_HAS_TMA
  uint32_t ok;
  asm volatile(
      "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, "
      "p;\n}\n"
      : "=r"(ok)
      : "r"(splat_smem_addr(bar)), "r"(parity)
      : "memory");
  return ok != 0;
#else
  __trap();
  return false;
#endif
}
/* Blocks until the phase of parity `parity` has completed (acquire at CTA scope). */
SPLAT_DEV void splat_mbar_wait(uint64_t *bar, uint32_t parity) {
  while (!splat_mbar_try_wait(bar, parity)) {
  }
}

/* ================================================================ TMA
 * Tensor maps are splat_tensor_map (params.cuh): the host encodes them with
 * cuTensorMapEncodeTiled (CU_TENSOR_MAP_SWIZZLE_128B, box inner extent 64 elements for the
 * layout above) and passes them by value in a `const __grid_constant__` kernel parameter;
 * the wrappers take their address. Coordinates are element indices, innermost first;
 * out-of-bounds elements are zero-filled (and still count towards the transaction bytes).
 * The destination must be 1024-byte aligned (128B swizzle).
 * Dilated keys (DESIGN.md §6): view K [seq][D] as 3-d {D, d, seq/d} (strides D*2 and
 * d*D*2 bytes) with box {64, 1, KEYS}: coordinate (c0, phase, j0) loads keys
 * phase + d*j0, phase + d*(j0+1), ... densely into KEYS rows. */

/* Prefetches the tensor map (one thread, early in the kernel). */
SPLAT_DEV void splat_tma_prefetch_map(const splat_tensor_map *map) {
#if SPLAT_HAS_TMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
#else
  __trap();
#endif
}
/* 2-d tile load (one thread issues): box at coordinates (c0 inner, c1) -> smem `dst`,
 * completing `bytes` of transaction on `bar`. */
SPLAT_DEV void splat_tma_load_2d(void *dst, const splat_tensor_map *map, uint64_t *bar, int c0,
                                 int c1) {
#if SPLAT_HAS_TMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3}], "
      "[%4];\n" ::"r"(splat_smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(splat_smem_addr(bar))
      : "memory");
#else
  __trap();
#endif
}
/* A bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global
 * `src` to shared `dst` (one thread issues), completing its bytes of transaction on `bar`. */
SPLAT_DEV void splat_bulk_load(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
#if SPLAT_HAS_TMA
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(splat_smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(splat_smem_addr(bar))
      : "memory");
#else
  __trap();
#endif
}
/* 5-d tile load: coordinates (c0 inner, c1, c2, c3, c4). */
SPLAT_DEV void splat_tma_load_5d(void *dst, const splat_tensor_map *map, uint64_t *bar, int c0,
                                 int c1, int c2, int c3, int c4) {
#if SPLAT_HAS_TMA
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, %4, %5, %6}], [%7];\n" ::"r"(splat_smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(splat_smem_addr(bar))
      : "memory");
#else
  __trap();
#endif
}
/* 3-d tile load: coordinates (c0 inner, c1, c2). */
SPLAT_DEV void splat_tma_load_3d(void *dst, const splat_tensor_map *map, uint64_t *bar, int c0,
                                 int c1, int c2) {
#if SPLAT_HAS_TMA
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, "
      "%3, "
      "%4}], [%5];\n" ::"r"(splat_smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(splat_smem_addr(bar))
      : "memory");
#else
  __trap();
#endif
}

/* ================================================================ dependent launches
 * Programmatic dependent launch (sm_90): a kernel the host launches with programmatic
 * stream serialisation may start while the kernel before it on the stream still runs.
 * The earlier kernel lets it be scheduled (one thread a CTA suffices; it starts on SMs
 * the earlier kernel's CTAs leave); the later one waits, in every thread that reads what
 * the earlier one wrote, until that kernel has completed and its memory is visible. Both
 * are no-ops in kernels launched without the attribute. */
SPLAT_DEV void splat_grid_launch_dependents() {
#if SPLAT_HAS_TMA
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#else
  __trap();
#endif
}
SPLAT_DEV void splat_grid_wait_prior() {
#if SPLAT_HAS_TMA
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#else
  __trap();
#endif
}

#endif
