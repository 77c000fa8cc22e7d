/* common.cuh — device helpers every splat kernel uses: element types and conversions
 * (f32, f16, bf16 as raw 16-bit words; no CUDA headers), strided tensor addressing,
 * a row's columns from its affine segments or the irregular remainder, warp
 * reductions, and the PTX wrappers of the tensor-core paths (cp.async, ldmatrix,
 * mma.sync m16n8k16). Specialised by the prelude's #defines:
 *   SPLAT_DT    dtype of Q, K, V, O: 0 f32, 1 f16, 2 bf16
 *   SPLAT_VDT   dtype of ACSR values (scores / probs), same codes
 *   SPLAT_HEAD_DIM, SPLAT_MAX_SEGS (segments per regular row, K). */

#include "params.cuh"
#include "seg_interval.cuh"

#ifndef SPLAT_KERNELS_COMMON_CUH
#define SPLAT_KERNELS_COMMON_CUH

#define SPLAT_F32 0
#define SPLAT_F16 1
#define SPLAT_BF16 2

#define SPLAT_DEV __device__ __forceinline__
#define SPLAT_LOG2E 1.4426950408889634f
#define SPLAT_LN2 0.6931471805599453f
#define SPLAT_NEG_INF (-__int_as_float(0x7f800000))

/* ------------------------------------------------------------ element types */

SPLAT_DEV float splat_f16_to_f32(uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
SPLAT_DEV uint16_t splat_f32_to_f16(float f) {
  uint16_t h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
SPLAT_DEV float splat_bf16_to_f32(uint16_t h) {
  return __uint_as_float(((uint32_t)h) << 16);
}
SPLAT_DEV uint16_t splat_f32_to_bf16(float f) {
  uint16_t h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

/* Loads element `off` of a buffer of dtype DT as float. */
template <int DT>
SPLAT_DEV float splat_ld(const void *p, int64_t off) {
  if (DT == SPLAT_F32) return ((const float *)p)[off];
  if (DT == SPLAT_F16) return splat_f16_to_f32(((const uint16_t *)p)[off]);
  return splat_bf16_to_f32(((const uint16_t *)p)[off]);
}
/* Stores v rounded to dtype DT (round to nearest even) at element `off`. */
template <int DT>
SPLAT_DEV void splat_st(void *p, int64_t off, float v) {
  if (DT == SPLAT_F32) {
    ((float *)p)[off] = v;
  } else if (DT == SPLAT_F16) {
    ((uint16_t *)p)[off] = splat_f32_to_f16(v);
  } else {
    ((uint16_t *)p)[off] = splat_f32_to_bf16(v);
  }
}
/* 16 bytes to global memory at p (16-byte aligned; a generic pointer to global memory,
 * whose generic and global addresses coincide) when pred holds: one predicated vector
 * store, no branch (a branch lets the compiler split it into 4-byte stores and sink the
 * loads that feed it into the branch, each store then waiting on its own load). */
SPLAT_DEV void splat_st16_if(void *p, uint4 v, bool pred) {
  asm volatile(
      "{\n .reg .pred q;\n setp.ne.b32 q, %5, 0;\n"
      " @q st.global.v4.b32 [%0], {%1, %2, %3, %4};\n}\n" ::"l"(p),
      "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"((int)pred)
      : "memory");
}
/* Two floats packed as a 16-bit pair of dtype DT (lo in the low half). */
template <int DT>
SPLAT_DEV uint32_t splat_pack2(float lo, float hi) {
  uint32_t r;
  if (DT == SPLAT_F16) {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}
/* A float rounded to 16-bit dtype DT: its bit pattern. */
template <int DT>
SPLAT_DEV uint16_t splat_to16(float v) {
  return DT == SPLAT_F16 ? splat_f32_to_f16(v) : splat_f32_to_bf16(v);
}
/* Whether elements off and off + 1 of dtype DT at p can take one store (splat_st_pair). */
template <int DT>
SPLAT_DEV bool splat_pair_aligned(const void *p, int64_t off) {
  return (((unsigned long long)p) / (DT == SPLAT_F32 ? 4 : 2) + off) % 2 == 0;
}
/* x0, x1 rounded to dtype DT at elements off, off + 1 of p by one 4-byte (16-bit) or 8-byte
 * (f32) store; splat_pair_aligned holds. */
template <int DT>
SPLAT_DEV void splat_st_pair(void *p, int64_t off, float x0, float x1) {
  if (DT == SPLAT_F32)
    *(float2 *)((float *)p + off) = make_float2(x0, x1);
  else
    *(uint32_t *)((uint16_t *)p + off) = splat_pack2<DT>(x0, x1);
}

/* ------------------------------------------------------------ addressing */

SPLAT_DEV int64_t splat_off(const splat_dev_tensor &t, int64_t b, int64_t h, int64_t s) {
  return b * t.s0 + h * t.s1 + s * t.s2;
}

/* Key of gathered index g in a group (phase, stride, width). */
SPLAT_DEV int64_t splat_group_key(int32_t phase, int32_t stride, int32_t width, int64_t g) {
  if (width == 1) return (int64_t)phase + g * stride;
  return (int64_t)phase + (g / width) * stride + g % width;
}

/* A row's columns: its affine segments (regular rows) or its remainder CSR range.
 * Entry n of the row's values belongs to the n-th column in increasing order. */
typedef struct splat_row {
  int64_t seg0, seg1; /* segments [seg0, seg1) */
  int64_t rem0, rem1; /* remainder columns [rem0, rem1) */
  int64_t nnz;
} splat_row;

SPLAT_DEV splat_row splat_row_of(const splat_dev_pattern &p, int64_t i) {
  splat_row r;
  r.seg0 = p.row_seg[i];
  r.seg1 = p.row_seg[i + 1];
  r.rem0 = p.rem_row[i];
  r.rem1 = p.rem_row[i + 1];
  int64_t n = r.rem1 - r.rem0;
  for (int64_t s = r.seg0; s < r.seg1; s++) n += (int64_t)p.segs[4 * s + 2] * p.segs[4 * s + 3];
  r.nnz = n;
  return r;
}

/* Column of entry n (0 <= n < nnz) of a row: walks at most K segments. */
SPLAT_DEV int64_t splat_row_col(const splat_dev_pattern &p, const splat_row &r, int64_t n) {
  if (r.rem1 > r.rem0) return p.rem_cols[r.rem0 + n];
  for (int64_t s = r.seg0; s < r.seg1; s++) {
    const int32_t start = p.segs[4 * s], stride = p.segs[4 * s + 1];
    const int32_t count = p.segs[4 * s + 2], width = p.segs[4 * s + 3];
    const int64_t m = (int64_t)count * width;
    if (n < m) {
      if (width == 1) return (int64_t)start + n * stride;
      return (int64_t)start + (n / width) * stride + n % width;
    }
    n -= m;
  }
  return 0; /* unreachable for n < nnz */
}

/* 2^x by the special-function unit alone (ex2.approx.ftz: relative error ~2^-22, results
 * below 2^-126 flushed to zero), without exp2f's range fix-up around it. */
SPLAT_DEV float splat_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* ------------------------------------------------------------ warp reductions */

SPLAT_DEV float splat_warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
SPLAT_DEV float splat_warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/* ------------------------------------------------------------ tensor-core PTX */

SPLAT_DEV uint32_t splat_smem_addr(const void *p) {
  return (uint32_t)__cvta_generic_to_shared(p);
}
/* 16-byte asynchronous copy global -> shared; zero-fills when !valid. */
SPLAT_DEV void splat_cp_async16(void *smem, const void *gmem, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(splat_smem_addr(smem)),
               "l"(gmem), "r"(n));
}
/* 16 bytes global -> shared (shared-window address saddr), all of them. */
SPLAT_DEV void splat_cp_async16_at(uint32_t saddr, const void *gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(saddr), "l"(gmem));
}
/* An arrival on the mbarrier at `bar` once all of this thread's earlier cp.async copies
 * are complete (counted in the barrier's expected arrivals: .noinc). */
SPLAT_DEV void splat_cp_async_mbar_arrive(uint64_t *bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(splat_smem_addr(bar))
               : "memory");
}
SPLAT_DEV void splat_cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int N>
SPLAT_DEV void splat_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

SPLAT_DEV void splat_ldmatrix_x4(uint32_t r[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(splat_smem_addr(smem)));
}
SPLAT_DEV void splat_ldmatrix_x2(uint32_t r[2], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(splat_smem_addr(smem)));
}
SPLAT_DEV void splat_ldmatrix_x4_trans(uint32_t r[4], const void *smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(splat_smem_addr(smem)));
}

/* d += a * b on a 16x8x16 tile, fp32 accumulation; DT picks f16 or bf16 operands. */
template <int DT>
SPLAT_DEV void splat_mma16816(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  if (DT == SPLAT_BF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

/* O += A V over k16 step kk on mma.sync: a, the A fragment of 16 rows x 16 keys (keys 16 kk
 * ..); v, the stage's V (row stride LD elements, the head_dim columns contiguous); NB
 * 8-column blocks of O, acc(j) the 4 floats of block j, two blocks a time from one
 * ldmatrix.trans. The fused attention's and the R-SpMM's P V. */
template <int DT, int NB, int LD, typename T, class Acc>
SPLAT_DEV void splat_mma_pv_k16(const uint32_t (&a)[4], const T *v, int kk, int lane,
                                const Acc &acc) {
#pragma unroll
  for (int j = 0; j < NB; j += 2) {
    uint32_t bv[4];
    splat_ldmatrix_x4_trans(bv, v + (kk * 16 + (lane & 15)) * LD + 8 * j + (lane >> 4) * 8);
    const uint32_t b0[2] = {bv[0], bv[1]}, b1[2] = {bv[2], bv[3]};
    splat_mma16816<DT>(acc(j), a, b0);
    splat_mma16816<DT>(acc(j + 1), a, b1);
  }
}

/* d += a * b on a 16x8x8 tile of tf32 operands (raw tf32 bit patterns), fp32 accumulation. */
SPLAT_DEV void splat_mma1688_tf32(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* 3xTF32 split: x = hi + lo with hi, lo tf32 (round to nearest); hi*hi + hi*lo + lo*hi
 * then carries about 22 significant bits of each product. */
SPLAT_DEV uint32_t splat_tf32_round(float x) {
  uint32_t r;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  /* Round to nearest even: one F2FP.TF32 instruction on sm_90 (the .rna form below is
   * emulated there in ~4 instructions). */
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
#else
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x)); /* sm_80: ties away from zero */
#endif
  return r;
}
SPLAT_DEV void splat_tf32_split(float x, uint32_t &hi, uint32_t &lo) {
  hi = splat_tf32_round(x);
  lo = splat_tf32_round(x - __uint_as_float(hi));
}
/* The m16n8k8 A fragment of a row-major f32 tile split into tf32 hi + lo: a points at row g,
 * column t of the fragment's 16 x 8 block (rows g, g + 8; columns t, t + 4), ld the row
 * stride in floats. */
SPLAT_DEV void splat_tf32_split_a(const float *a, int ld, uint32_t ah[4], uint32_t al[4]) {
  splat_tf32_split(a[0], ah[0], al[0]);
  splat_tf32_split(a[8 * ld], ah[1], al[1]);
  splat_tf32_split(a[4], ah[2], al[2]);
  splat_tf32_split(a[8 * ld + 4], ah[3], al[3]);
}
/* One k8 step of a 3xTF32 product on a 16x8x8 tile: acc += ah bh and small += al bh + ah bl,
 * the B fragment (b0, b1: rows t and t + 4 of column g) split here. The small products keep
 * an accumulator of their own: the tensor cores' accumulation truncates each step at the
 * accumulator's ulp, which would drop most of their bits in acc (bench/NOTES.md v21). */
SPLAT_DEV void splat_mma1688_3xtf32(float acc[4], float small[4], const uint32_t ah[4],
                                    const uint32_t al[4], float b0, float b1) {
  uint32_t bh[2], bl[2];
  splat_tf32_split(b0, bh[0], bl[0]);
  splat_tf32_split(b1, bh[1], bl[1]);
  splat_mma1688_tf32(small, al, bh);
  splat_mma1688_tf32(small, ah, bl);
  splat_mma1688_tf32(acc, ah, bh);
}

/* ------------------------------------------------------------ interval tables
 * For one key run (group) and one row: each of the row's segments of that group is a
 * contiguous interval [lo, hi] of gathered indices whose values start at entry idx0
 * (the nnz of the row's earlier segments). Built per run into shared memory. */
typedef struct splat_ival {
  int32_t lo, hi, idx0;
  int32_t ends_row; /* 1 when the interval's last entry is the row's last */
} splat_ival;

/* Appends to iv[*n] the interval of segment g = {start, stride, count, width} when it
 * belongs to group (phase, stride, width) (seg_interval.cuh), its values starting at entry
 * *idx, which then moves past the segment's entries; last: the row's last segment. */
SPLAT_DEV void splat_seg_interval(int4 g, int32_t phase, int32_t stride, int32_t width, bool last,
                                  splat_ival *iv, int *n, int32_t *idx) {
  int32_t lo, hi;
  if (splat_seg_ival(g.x, g.y, g.z, g.w, phase, stride, width, &lo, &hi)) {
    iv[*n].lo = lo;
    iv[*n].hi = hi;
    iv[*n].idx0 = *idx;
    iv[*n].ends_row = last;
    ++*n;
  }
  *idx += g.z * g.w;
}

/* Fills iv[0..) with row i's intervals of group (phase, stride, width); returns the
 * count (0..K). */
SPLAT_DEV int splat_row_intervals(const splat_dev_pattern &p, int64_t i, int32_t phase,
                                  int32_t stride, int32_t width, splat_ival *iv) {
  const int64_t s0 = p.row_seg[i], s1 = p.row_seg[i + 1];
  int n = 0;
  int32_t idx = 0;
  for (int64_t s = s0; s < s1; s++)
    splat_seg_interval(
        make_int4(p.segs[4 * s], p.segs[4 * s + 1], p.segs[4 * s + 2], p.segs[4 * s + 3]), phase,
        stride, width, s == s1 - 1, iv, &n, &idx);
  return n;
}

/* The part of interval v inside the key sub-tile [g0, g0 + n): gathered indices
 * [*a, *a + len), whose values are entries [*x, *x + len); returns len (<= 0: none). */
SPLAT_DEV int splat_ival_clip(const int4 v, int32_t g0, int n, int32_t *a, int32_t *x) {
  const int32_t lo = v.x > g0 ? v.x : g0;
  const int32_t hi = v.y < g0 + n - 1 ? v.y : g0 + n - 1;
  *a = lo;
  *x = v.z + (lo - v.x);
  return hi - lo + 1;
}

/* Value entry of gathered index g in a row's interval table, or -1. */
SPLAT_DEV int32_t splat_ival_find(const splat_ival *iv, int n, int32_t g) {
  int32_t r = -1;
  for (int t = 0; t < n; t++) {
    const int4 v = *(const int4 *)(iv + t);
    if (g >= v.x && g <= v.y) r = v.z + (g - v.x);
  }
  return r;
}

/* A compile-time int, and f(splat_const<v>{}) for a run-time v in [0, N): the callee sees
 * v as a constant (e.g. a ring stage, so shared addresses and wgmma descriptors become a
 * uniform base plus immediates instead of per-thread arithmetic). */
template <int K>
struct splat_const {
  static constexpr int value = K;
};
template <int N, int K = 0, class F>
SPLAT_DEV void splat_with_const(int v, F &&f) {
  if constexpr (K + 1 < N) {
    if (v == K) {
      f(splat_const<K>{});
    } else {
      splat_with_const<N, K + 1>(v, f);
    }
  } else {
    f(splat_const<K>{});
  }
}

#endif
