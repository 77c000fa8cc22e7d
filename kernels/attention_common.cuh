/* attention_common.cuh — the per-sub-tile steps both fused attention tile kernels share
 * (attention_tile.cuh on mma.sync, attention_wgmma.cuh on wgmma): the closed-form mask of
 * predicated runs, the online softmax, the epilogue that writes O / l and the
 * log-sum-exp, and, for the chunks of a split tile, the partial store the merge kernel
 * reads (attention_merge.cuh, a program of its own). Both kernels hold a warp's 16 x KT
 * scores and its 16 x head_dim output in the same register layout (the m16n8 accumulator,
 * repeated over 8-column blocks j):
 *     s[4j + 2hf + e]  row 16 warp + g + 8 hf, gathered key g0 + 8j + 2t + e
 *     o[4j + 2hf + e]  the same rows, head_dim column 8j + 2t + e
 * with g = lane / 4, t = lane % 4, hf, e in {0, 1}. m and l are the running max (base 2)
 * and this thread's part of the running sum of rows g and g + 8.
 *
 * Needs SPLAT_MAX_SEGS and SPLAT_DT from the prelude. */

#include "common.cuh"

#ifndef SPLAT_KERNELS_ATTENTION_COMMON_CUH
#define SPLAT_KERNELS_ATTENTION_COMMON_CUH

/* The pass of a two-pass plan the program's tile kernel runs (1, 2), else 0: from the
 * prelude's epilogue SPLAT_ATTN_EPI (params.cuh SPLAT_EPI_*; absent outside tile programs). */
#if defined(SPLAT_ATTN_EPI) && SPLAT_ATTN_EPI == SPLAT_EPI_PASS1
#define SPLAT_ATTN_PASS 1
#elif defined(SPLAT_ATTN_EPI) && SPLAT_ATTN_EPI == SPLAT_EPI_PASS2
#define SPLAT_ATTN_PASS 2
#else
#define SPLAT_ATTN_PASS 0
#endif

/* The sum over the 4 lanes of a quad (the threads holding one row). */
SPLAT_DEV float splat_quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

/* Row r (of its tile) of workspace slot `slot` for batch*head bh: head_dim floats of O,
 * then m and l. */
SPLAT_DEV float *splat_attn_part_row(const splat_attention_params &P, int slot, int64_t bh, int r,
                                     int64_t BH) {
  return P.part + (((int64_t)slot * BH + bh) * P.part_rows + r) * (SPLAT_HEAD_DIM + 2);
}

/* The bits [a, a + w) of a 32-bit word (0 <= a <= 32, 0 <= w, a + w <= 32): one BMSK. */
SPLAT_DEV uint32_t splat_bit_range(int a, int w) {
  uint32_t m;
  asm("bmsk.clamp.b32 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(w));
  return m;
}

/* Predicated runs: entries whose gathered key lies in none of the row's intervals for the
 * run's group become -inf (rows past the block's last have no intervals). iv, niv: the
 * run's interval tables (TQ rows); r0 = 16 warp + g. A row's entries of the thread are the
 * gathered keys c0 + x(k) for k = 2 j + e (c0 = g0 + 2 t, j < NJ, e in {0, 1}), x(k) =
 * 8 (k / 2) + k % 2, increasing in k: an interval keeps one contiguous range of k, bits of a
 * keep word built by one BMSK (about ten instructions an interval instead of two
 * compares an entry); then one select an entry on predicates that ptxas takes from the
 * word several at a time (R2P): bit k is the k-th entry in register order. */
template <int NJ>
SPLAT_DEV void splat_attn_mask(float (&s)[4 * NJ], const splat_ival *iv, const int *niv, int r0,
                               int32_t g0, int t) {
  static_assert(NJ >= 1 && NJ <= 16, "splat_attn_mask: 1 to 16 n8 blocks");
  const int32_t c0 = g0 + 2 * t;
  /* The first k with x(k) >= v, i.e. the number of keys 8 j < v and 8 j + 1 < v with j >= 0:
   * ceil(v / 8) + ceil((v - 1) / 8) (arithmetic shifts round towards -inf), clamped to
   * [0, 2 NJ]. */
  auto first_at = [](int32_t v) { return min(max(((v + 7) >> 3) + ((v + 6) >> 3), 0), 2 * NJ); };
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const int r = r0 + 8 * hf;
    const int n = niv[r];
    const splat_ival *rv = iv + r * SPLAT_MAX_SEGS;
    uint32_t keep = 0u; /* bit 2 j + e: entry (j, e) is in an interval */
    /* Interval v = [lo, hi] of gathered keys: the k with c0 + x(k) in it. */
    auto add = [&](int2 v) {
      const int32_t klo = first_at(v.x - c0), kend = first_at(v.y - c0 + 1);
      keep |= splat_bit_range(klo, max(kend - klo, 0));
    };
    /* Bounded by the prelude's count, unrolled: a loop to n took ~12% more compile time for
     * two intervals a row (bench/NOTES.md v11). */
#pragma unroll
    for (int q = 0; q < SPLAT_MAX_SEGS; q++) {
      if (q >= n) break;
      add(*(const int2 *)(rv + q));
    }
#pragma unroll
    for (int j = 0; j < NJ; j++) {
#pragma unroll
      for (int e = 0; e < 2; e++) {
        if (!((keep >> (2 * j + e)) & 1u)) s[4 * j + 2 * hf + e] = SPLAT_NEG_INF;
      }
    }
  }
}

/* Predicated runs: does any of the 64 rows of a warpgroup (block rows row0 .. row0 + 63)
 * have an entry in key sub-tile [g0, g0 + KT)? iv, niv: the run's interval tables (TQ
 * rows). Each warp of the warpgroup asks for all 64 rows (two a lane) and gets the same
 * answer by its vote, so the warpgroup's wgmma stays uniform. */
template <int TQ, int KT>
SPLAT_DEV bool splat_attn_wg_touches(const splat_ival *iv, const int *niv, int row0, int32_t g0,
                                     int lane) {
  bool mine = false;
  for (int rr = lane; rr < 64; rr += 32) {
    const int r = row0 + rr;
    const splat_ival *rv = iv + r * SPLAT_MAX_SEGS;
    const int n = niv[r];
#pragma unroll
    for (int q = 0; q < SPLAT_MAX_SEGS; q++) {
      if (q >= n) break;
      const int4 v = *(const int4 *)(rv + q);
      mine = mine || (v.x < g0 + KT && v.y >= g0);
    }
  }
  return __any_sync(0xffffffffu, mine);
}

/* The logit scale of the softmax step: raw scores s are base-2 logits s c. c > 0 is folded
 * into the exponent (the row max of s c is c times that of s); any other scale is applied
 * to s here, before the mask, and the step runs with c = 1. Uniform: a branch, no cost. */
template <int N>
SPLAT_DEV float splat_attn_logit_scale(float (&s)[N], float scale_log2) {
  if (scale_log2 > 0.f) return scale_log2;
#pragma unroll
  for (int i = 0; i < N; i++) s[i] *= scale_log2;
  return 1.f;
}

/* The softmax half of an online-softmax step on scores s whose base-2 logits are s c (c > 0,
 * splat_attn_logit_scale): new row max (base 2) over the quad, s -> exp2(s c - max) by
 * one FFMA and one ex2, l -> l * alpha + this thread's sum; returns in alpha the factor
 * exp2(m_old - m_new) by which O must still be rescaled (splat_attn_rescale). A row whose
 * entries are all masked (-inf) so far keeps p = 0 and finite exponents. */
template <int NJ>
SPLAT_DEV void splat_attn_softmax_step(float (&s)[4 * NJ], float (&m)[2], float (&l)[2],
                                       float (&alpha)[2], float c) {
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    /* Max and sum as trees over the row's 2 NJ entries: short dependency chains. */
    float t[NJ];
#pragma unroll
    for (int j = 0; j < NJ; j++) t[j] = fmaxf(s[4 * j + 2 * hf], s[4 * j + 2 * hf + 1]);
#pragma unroll
    for (int w = 1; w < NJ; w *= 2) {
#pragma unroll
      for (int j = 0; j + w < NJ; j += 2 * w) t[j] = fmaxf(t[j], t[j + w]);
    }
    float mx = t[0];
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    mx = fmaxf(m[hf], mx * c);
    const float base = mx == SPLAT_NEG_INF ? 0.f : mx;
    alpha[hf] = splat_ex2(m[hf] - base);
    m[hf] = mx;
#pragma unroll
    for (int j = 0; j < NJ; j++) {
      s[4 * j + 2 * hf] = splat_ex2(fmaf(s[4 * j + 2 * hf], c, -base));
      s[4 * j + 2 * hf + 1] = splat_ex2(fmaf(s[4 * j + 2 * hf + 1], c, -base));
      t[j] = s[4 * j + 2 * hf] + s[4 * j + 2 * hf + 1];
    }
#pragma unroll
    for (int w = 1; w < NJ; w *= 2) {
#pragma unroll
      for (int j = 0; j + w < NJ; j += 2 * w) t[j] += t[j + w];
    }
    l[hf] = l[hf] * alpha[hf] + t[0]; /* this thread's columns; the quad sums at the end */
  }
}

/* O of rows g (hf 0) and g + 8 (hf 1) times alpha[hf]. */
template <int NO>
SPLAT_DEV void splat_attn_rescale(float (&o)[NO], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < NO / 4; j++) {
    o[4 * j] *= alpha[0];
    o[4 * j + 1] *= alpha[0];
    o[4 * j + 2] *= alpha[1];
    o[4 * j + 3] *= alpha[1];
  }
}

/* One whole online-softmax step: the softmax half, then O rescaled. */
template <int NJ, int NO>
SPLAT_DEV void splat_attn_online_softmax(float (&s)[4 * NJ], float (&o)[NO], float (&m)[2],
                                         float (&l)[2], float c) {
  float alpha[2];
  splat_attn_softmax_step<NJ>(s, m, l, alpha, c);
  splat_attn_rescale<NO>(o, alpha);
}

/* A two-pass plan's workspace rows (params.cuh SPLAT_ROWPART_BYTES): pass 1's O in fp16
 * of O / unit in bf16 plans (SPLAT_ROWPART_HALF: splat_attn_row_scale), else in floats;
 * then m, l (and unit) as floats at SPLAT_ROWPART_TAIL. A copy of a row into shared memory takes
 * SPLAT_ROWPART_COPY bytes (whole 16-byte chunks: a bulk copy's unit). */
#define SPLAT_ROWPART_HALF (SPLAT_DT == SPLAT_BF16)
#define SPLAT_ROWPART_TAIL (SPLAT_HEAD_DIM * (SPLAT_ROWPART_HALF ? 2 : 4))
#define SPLAT_ROWPART_COPY (SPLAT_ROWPART_TAIL + 16)
static_assert(SPLAT_ROWPART_BYTES(SPLAT_HEAD_DIM, SPLAT_ROWPART_HALF) % 32 == 0 &&
                  SPLAT_ROWPART_COPY <= SPLAT_ROWPART_BYTES(SPLAT_HEAD_DIM, SPLAT_ROWPART_HALF),
              "workspace rows of whole sectors, holding their copies");

/* Original row `row` of (b, h) in a two-pass plan's workspace. */
SPLAT_DEV unsigned char *splat_attn_rowpart(const splat_attention_params &P, int64_t b, int64_t h,
                                            int row) {
  return P.rowpart + ((b * P.shape.heads + h) * P.pat.seq_q + row) *
                         SPLAT_ROWPART_BYTES(SPLAT_HEAD_DIM, SPLAT_ROWPART_HALF);
}

/* Pass 1 of two: the tail of workspace row `part`: its maximum mx, quad-summed sum lt and
 * (SPLAT_ROWPART_HALF) unit. */
SPLAT_DEV void splat_attn_store_rowpart_tail(unsigned char *part, float mx, float lt, float unit) {
  if (SPLAT_ROWPART_HALF)
    *(float4 *)(part + SPLAT_ROWPART_TAIL) = make_float4(mx, lt, unit, 0.f);
  else
    *(float2 *)(part + SPLAT_ROWPART_TAIL) = make_float2(mx, lt);
}

/* Pass 1 of two: a row's unnormalised O (this thread's column pairs of block row r0 + 8 hf,
 * as splat_attn_store holds them), its maximum mx and quad-summed sum lt to its workspace
 * row `part`; sc = {1 / unit, unit} from splat_attn_row_scale. */
template <int NO>
SPLAT_DEV void splat_attn_store_rowpart(unsigned char *part, const float (&o)[NO], int hf, int t,
                                        float mx, float lt, float2 sc) {
#pragma unroll
  for (int j = 0; j < NO / 4; j++) {
    const int d = 8 * j + 2 * t;
    if (d >= SPLAT_HEAD_DIM) continue;
    const float x0 = o[4 * j + 2 * hf], x1 = o[4 * j + 2 * hf + 1];
    if (SPLAT_ROWPART_HALF)
      *(uint32_t *)(part + 2 * d) = splat_pack2<SPLAT_F16>(x0 * sc.x, x1 * sc.x);
    else
      *(float2 *)(part + 4 * d) = make_float2(x0, x1);
  }
  if (t == 0) splat_attn_store_rowpart_tail(part, mx, lt, sc.y);
}

/* The fp16 scale of a workspace row of this thread's block row r0 + 8 hf (every lane calls
 * it: quad shuffles over the row's max |O| = amax): {1 / unit, unit}, unit a power of two
 * with amax / unit in [2^14, 2^15) (fp16 holds it, and every element down to 2^-28 amax stays
 * a normal fp16 with 11 bits, 3 more than the bf16 output; the scaling is exact). Tiny or
 * zero amax: unit 2^-126; huge: 2^113; infinite or NaN: unit 1 (its inf and NaN columns stay
 * so, the others are rounded to fp16). {1, 1} where O is kept in floats. */
template <int NO>
SPLAT_DEV float2 splat_attn_row_scale(const float (&o)[NO], int hf) {
  if (!SPLAT_ROWPART_HALF) return make_float2(1.f, 1.f);
  float a = 0.f;
#pragma unroll
  for (int j = 0; j < NO / 4; j++)
    a = fmaxf(a, fmaxf(fabsf(o[4 * j + 2 * hf]), fabsf(o[4 * j + 2 * hf + 1])));
  a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 1));
  a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, 2));
  /* amax in [2^(E - 127), 2^(E - 126)) for its biased exponent E >= 1: unit 2^(E - 141). */
  const int e = (int)((__float_as_uint(a) >> 23) & 0xffu), u = e == 255 ? 141 : max(e, 15);
  return make_float2(__uint_as_float((uint32_t)(268 - u) << 23),
                     __uint_as_float((uint32_t)(u - 14) << 23));
}

/* Pass 2 of a two-pass plan: pulls the pass-1 results of block rows r0, r0 + 8 (below
 * nrows; original rows row[0], row[1]) towards L2 at the item's start, so the epilogue's
 * loads of them do not wait on DRAM. A quad's threads take the row's 128-byte lines in turn. */
SPLAT_DEV void splat_attn_prefetch_prior(const splat_attention_params &P, int64_t b, int64_t h,
                                         const int (&row)[2], int r0, int nrows, int t) {
  if (SPLAT_ATTN_PASS != 2) return;
  constexpr int BYTES = SPLAT_ROWPART_COPY, LINES = (BYTES + 127) / 128 + 1;
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const int r = r0 + 8 * hf;
    if (r >= nrows) continue;
    const unsigned char *part = splat_attn_rowpart(P, b, h, row[hf]);
#pragma unroll
    for (int i = t; i < LINES; i += 4)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(part + min(128 * i, BYTES - 4)));
  }
}

/* Pass 1's columns d, d + 1 of a workspace row at p as stored: an fp16 pair of O / unit in
 * bf16 plans (SPLAT_ROWPART_HALF, a register), else two floats of O. Loaded by ld.shared
 * where the kernel has staged the row in shared memory (SHARED; a generic load costs an
 * address check), else by a global load; splat_attn_prior_unpack makes floats of them. */
#if SPLAT_ROWPART_HALF
typedef uint32_t splat_prior_word;
#else
typedef uint2 splat_prior_word;
#endif
template <bool SHARED>
SPLAT_DEV splat_prior_word splat_attn_prior_load(const unsigned char *p, int d) {
  constexpr int EB = SPLAT_ROWPART_HALF ? 2 : 4; /* bytes an element */
  if (!SHARED) return *(const splat_prior_word *)(p + EB * d);
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p + EB * d);
  splat_prior_word v;
#if SPLAT_ROWPART_HALF
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(a));
#else
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(a));
#endif
  return v;
}
SPLAT_DEV float2 splat_attn_prior_unpack(splat_prior_word v) {
#if SPLAT_ROWPART_HALF
  return make_float2(splat_f16_to_f32((uint16_t)(v & 0xffffu)),
                     splat_f16_to_f32((uint16_t)(v >> 16)));
#else
  return make_float2(__uint_as_float(v.x), __uint_as_float(v.y));
#endif
}
/* The two as fp32 O / unit (SPLAT_ROWPART_HALF) or O. */
template <bool SHARED>
SPLAT_DEV float2 splat_attn_prior2(const unsigned char *p, int d) {
  return splat_attn_prior_unpack(splat_attn_prior_load<SHARED>(p, d));
}

/* Pass 1's m, l and unit (1 where O is kept in floats) of a workspace row at p (as
 * splat_attn_prior2). */
template <bool SHARED>
SPLAT_DEV float3 splat_attn_prior_tail(const unsigned char *p) {
  const unsigned char *q = p + SPLAT_ROWPART_TAIL;
  if (SPLAT_ROWPART_HALF) {
    float4 v;
    if (SHARED)
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                   : "r"((uint32_t)__cvta_generic_to_shared(q)));
    else
      v = *(const float4 *)q;
    return make_float3(v.x, v.y, v.z);
  }
  const float2 v = splat_attn_prior2<SHARED>(q, 0);
  return make_float3(v.x, v.y, 1.f);
}

/* Pass 2 of two: merges pass 1's (m1, l1) = ml into a row's maximum mx and quad-summed sum
 * lt, and gives the weights of the two passes' O: M = max(mx, m1), w = 2^(mx - M),
 * w1 = 2^(m1 - M); lt = lt w + l1 w1, mx = M (both -inf, a row without entries: weights
 * and sum 0). */
SPLAT_DEV void splat_attn_merge_ml(float2 ml, float &mx, float &lt, float &w, float &w1) {
  const float M = fmaxf(mx, ml.x), base = M == SPLAT_NEG_INF ? 0.f : M;
  w = splat_ex2(mx - base);
  w1 = splat_ex2(ml.x - base);
  lt = lt * w + ml.y * w1;
  mx = M;
}

/* O / l (zeros for rows without entries) to the original rows row[0], row[1] of the
 * block's rows r0, r0 + 8 that are below nrows, by column pairs when aligned (4-byte
 * stores, 8-byte for f32); lse = (m + log2 l) ln 2, or -inf. head_dim columns past
 * SPLAT_HEAD_DIM are dropped. Two-pass plans (SPLAT_ATTN_PASS): pass 1 leaves O, m and l
 * in P.rowpart instead (splat_attn_store_rowpart); pass 2 merges them in:
 * M = max(m, m1), O = (O 2^(m - M) + O1 2^(m1 - M)) / (l 2^(m - M) + l1 2^(m1 - M)). Pass 2
 * loads a row's pass-1 columns PC pairs at a time before their stores (the stores
 * could alias them for all the compiler knows: loads interleaved with stores would wait a
 * memory round trip per column pair). The epilogue of the kernels without warp
 * specialisation (attention_wgmma.cuh, attention_tile.cuh), and the warp-specialised
 * kernel's pass 1 in f32 rows. col0: O's first column (a column panel of the f32 tile
 * kernel, one pass only); the log-sum-exp comes with column 0's. */
template <int NO>
SPLAT_DEV void splat_attn_store(const splat_attention_params &P, const float (&o)[NO],
                                const float (&m)[2], const float (&l)[2], int64_t b, int64_t h,
                                const int (&row)[2], int r0, int nrows, int t, int col0 = 0) {
  constexpr int PC = 4;
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    float lt = splat_quad_sum(l[hf]), mx = m[hf];
    const float2 sc =
        SPLAT_ATTN_PASS == 1 ? splat_attn_row_scale<NO>(o, hf) : make_float2(1.f, 1.f);
    const int r = r0 + 8 * hf;
    if (r < nrows) {
      float w = 1.f, w1 = 0.f;
      if (SPLAT_ATTN_PASS == 1) {
        splat_attn_store_rowpart<NO>(splat_attn_rowpart(P, b, h, row[hf]), o, hf, t, mx, lt, sc);
        continue;
      }
      const unsigned char *prior = nullptr; /* pass 2: pass 1's row */
      if (SPLAT_ATTN_PASS == 2) {
        prior = splat_attn_rowpart(P, b, h, row[hf]);
        const float3 ml = splat_attn_prior_tail<false>(prior);
        splat_attn_merge_ml(make_float2(ml.x, ml.y), mx, lt, w, w1);
        w1 *= ml.z; /* O1's weight: kept as O1 / unit */
      }
      const float inv = lt > 0.f ? 1.f / lt : 0.f;
      const int64_t oo = splat_off(P.out, b, h, row[hf]);
      const bool pair = P.out.s3 == 1 && splat_pair_aligned<SPLAT_DT>(P.out.data, oo);
      /* Column pairs in groups of PC (registers allowing), a group's pass-1 columns loaded
       * before its stores. */
#pragma unroll
      for (int j0 = 0; j0 < NO / 4; j0 += PC) {
        float2 p1[PC];
#pragma unroll
        for (int j = 0; j < PC; j++) {
          const int d = col0 + 8 * (j0 + j) + 2 * t;
          p1[j] = prior && j0 + j < NO / 4 && d < SPLAT_HEAD_DIM
                      ? splat_attn_prior2<false>(prior, d)
                      : make_float2(0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < PC && j0 + j < NO / 4; j++) {
          const int d = col0 + 8 * (j0 + j) + 2 * t, c = 4 * (j0 + j) + 2 * hf;
          const float x0 = (o[c] * w + p1[j].x * w1) * inv,
                      x1 = (o[c + 1] * w + p1[j].y * w1) * inv;
          if (pair && d + 1 < SPLAT_HEAD_DIM) {
            splat_st_pair<SPLAT_DT>(P.out.data, oo + d, x0, x1);
          } else {
            if (d < SPLAT_HEAD_DIM) splat_st<SPLAT_DT>(P.out.data, oo + d * P.out.s3, x0);
            if (d + 1 < SPLAT_HEAD_DIM) splat_st<SPLAT_DT>(P.out.data, oo + (d + 1) * P.out.s3, x1);
          }
        }
      }
      if (P.lse.data && t == 0 && col0 == 0) {
        ((float *)P.lse.data)[splat_off(P.lse, b, h, row[hf])] =
            lt != 0.f ? (mx + log2f(lt)) * SPLAT_LN2 : SPLAT_NEG_INF; /* NaN stays NaN */
      }
    }
  }
}

/* A chunk of a split tile: its unnormalised O and its m, l (quad-summed) per row, to
 * workspace slot `slot` (rows rb + r0, rb + r0 + 8 of the tile, below nrows), for
 * splat_attn_merge. */
template <int NO>
SPLAT_DEV void splat_attn_store_part(const splat_attention_params &P, const float (&o)[NO],
                                     const float (&m)[2], const float (&l)[2], int slot, int64_t bh,
                                     int rb, int r0, int nrows, int t) {
  const int64_t BH = P.shape.batch * P.shape.heads;
#pragma unroll
  for (int hf = 0; hf < 2; hf++) {
    const float lt = splat_quad_sum(l[hf]);
    const int r = r0 + 8 * hf;
    if (r < nrows) {
      float *row = splat_attn_part_row(P, slot, bh, rb + r, BH);
#pragma unroll
      for (int j = 0; j < NO / 4; j++) {
        const int d = 8 * j + 2 * t;
        if (d < SPLAT_HEAD_DIM) row[d] = o[4 * j + 2 * hf];
        if (d + 1 < SPLAT_HEAD_DIM) row[d + 1] = o[4 * j + 2 * hf + 1];
      }
      if (t == 0) {
        row[SPLAT_HEAD_DIM] = m[hf];
        row[SPLAT_HEAD_DIM + 1] = lt;
      }
    }
  }
}

#endif
