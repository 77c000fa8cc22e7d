/* kernels.h — helpers shared by the CPU kernels: walking a row's columns straight from
 * the ACSR segments (no buffer, no allocation), strided vector loads / dots / axpys in
 * double with the dtype switch hoisted out of the loop, row-parallel scheduling, and
 * the input finiteness checks (finite.c). */
#ifndef SPLAT_CPU_KERNELS_H
#define SPLAT_CPU_KERNELS_H

#include <stdint.h>

#include "core/context.h"
#include "core/dtype.h"

/* ------------------------------------------------------------ columns of a row */

/* Iterates the columns of one row in increasing order: the row's affine segments
 * (sorted, disjoint, each walked run by run), then its remainder CSR columns (a row
 * has one or the other). The n-th column returned belongs to ACSR value entry n. */
typedef struct splat__cpu_cols {
  const splat__acsr *a;
  int64_t seg, seg_end; /* segment indices still to walk */
  int64_t t, u;         /* position inside segment seg: run t, column u of the run */
  int64_t rem, rem_end; /* remainder indices still to walk */
} splat__cpu_cols;

static inline void splat__cpu_cols_begin(splat__cpu_cols *it, const splat__acsr *a, int64_t i) {
  it->a = a;
  it->seg = a->row_seg[i];
  it->seg_end = a->row_seg[i + 1];
  it->t = 0;
  it->u = 0;
  it->rem = a->rem_row[i];
  it->rem_end = a->rem_row[i + 1];
}

/* Stores the next column in *j and returns 1, or returns 0 at the end of the row. */
static inline int splat__cpu_cols_next(splat__cpu_cols *it, int64_t *j) {
  if (it->seg < it->seg_end) {
    const splat__segment s = it->a->segs[it->seg];
    *j = (int64_t)s.start + it->t * s.stride + it->u;
    if (++it->u == s.width) {
      it->u = 0;
      if (++it->t == s.count) {
        it->t = 0;
        it->seg++;
      }
    }
    return 1;
  }
  if (it->rem < it->rem_end) {
    *j = it->a->rem_cols[it->rem++];
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------ strided vectors */

/* out[d] = x[off + d*stride] for d < n, widened to double. */
static inline void splat__cpu_load_vec(const void *x, splat_dtype dt, int64_t off, int64_t stride,
                                       int64_t n, double *out) {
  switch (dt) {
    case SPLAT_F32:
      for (int64_t d = 0; d < n; d++) out[d] = ((const float *)x)[off + d * stride];
      break;
    case SPLAT_F16:
      for (int64_t d = 0; d < n; d++)
        out[d] = splat__f16_to_f32(((const uint16_t *)x)[off + d * stride]);
      break;
    case SPLAT_BF16:
      for (int64_t d = 0; d < n; d++)
        out[d] = splat__bf16_to_f32(((const uint16_t *)x)[off + d * stride]);
      break;
  }
}

/* sum_d a[d] * x[off + d*stride] in double, d ascending. */
static inline double splat__cpu_dot(const double *a, const void *x, splat_dtype dt, int64_t off,
                                    int64_t stride, int64_t n) {
  double s = 0.0;
  switch (dt) {
    case SPLAT_F32:
      for (int64_t d = 0; d < n; d++) s += a[d] * ((const float *)x)[off + d * stride];
      break;
    case SPLAT_F16:
      for (int64_t d = 0; d < n; d++)
        s += a[d] * splat__f16_to_f32(((const uint16_t *)x)[off + d * stride]);
      break;
    case SPLAT_BF16:
      for (int64_t d = 0; d < n; d++)
        s += a[d] * splat__bf16_to_f32(((const uint16_t *)x)[off + d * stride]);
      break;
  }
  return s;
}

/* acc[d] += w * x[off + d*stride] in double. */
static inline void splat__cpu_axpy(double w, const void *x, splat_dtype dt, int64_t off,
                                   int64_t stride, int64_t n, double *acc) {
  switch (dt) {
    case SPLAT_F32:
      for (int64_t d = 0; d < n; d++) acc[d] += w * ((const float *)x)[off + d * stride];
      break;
    case SPLAT_F16:
      for (int64_t d = 0; d < n; d++)
        acc[d] += w * splat__f16_to_f32(((const uint16_t *)x)[off + d * stride]);
      break;
    case SPLAT_BF16:
      for (int64_t d = 0; d < n; d++)
        acc[d] += w * splat__bf16_to_f32(((const uint16_t *)x)[off + d * stride]);
      break;
  }
}

/* x[off + d*stride] = in[d] rounded to the dtype, for d < n. */
static inline void splat__cpu_store_vec(void *x, splat_dtype dt, int64_t off, int64_t stride,
                                        int64_t n, const double *in) {
  for (int64_t d = 0; d < n; d++) splat__store(x, dt, off + d * stride, in[d]);
}

/* Element offset of [i0, i1, i2, i3] in a tensor. */
static inline int64_t splat__cpu_offset(const splat_tensor *t, int64_t i0, int64_t i1, int64_t i2,
                                        int64_t i3) {
  return i0 * t->strides[0] + i1 * t->strides[1] + i2 * t->strides[2] + i3 * t->strides[3];
}

/* ------------------------------------------------------------ scheduling */

/* Worker threads of the plan's context (at least 1). */
static inline int splat__cpu_threads(const splat_plan *plan) {
  return plan->ctx && plan->ctx->num_threads > 0 ? plan->ctx->num_threads : 1;
}

/* Rows per chunk when `rows` independent rows (all (b, h, i)) go to `nthreads`: small
 * enough that the atomic counter balances uneven rows, large enough to amortise it. */
static inline int64_t splat__cpu_row_chunk(int64_t rows, int nthreads) {
  int64_t c = rows / ((int64_t)nthreads * 16);
  if (c < 1) c = 1;
  if (c > 256) c = 256;
  return c;
}

/* ------------------------------------------------------------ finiteness (finite.c) */

/* Checks every element of a [d0, d1, d2, d3] tensor. On the first (lowest, in logical
 * row-major order) non-finite element returns SPLAT_ERR_INVALID_ARGUMENT through
 * splat__fail: "<op>: <name>[b,h,s,d] is nan; inputs must be finite". */
splat_status splat__cpu_check_finite(int nthreads, const char *op, const char *name,
                                     const splat_tensor *t);
/* Same for an ACSR values tensor [B, H, seq_q, W], reading only the entries k < nnz of
 * row i (padding is never read). */
splat_status splat__cpu_check_finite_values(int nthreads, const char *op, const char *name,
                                            const splat_plan *plan, const splat_tensor *t);

#endif
