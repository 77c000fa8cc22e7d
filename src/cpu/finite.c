/* finite.c — input checks of the CPU kernels: find the first non-finite element an op
 * would read (in parallel, deterministically the lowest index) and report it by name
 * and index before anything is written. */
#include <stdatomic.h>

#include "core/error.h"
#include "core/parallel.h"
#include "cpu/kernels.h"

/* 1 when element `off` of x is a NaN or an infinity; bit tests, no conversion. */
static int is_nonfinite(const void *x, splat_dtype dt, int64_t off) {
  switch (dt) {
    case SPLAT_F32: {
      const uint32_t *u = (const uint32_t *)x;
      return (u[off] & 0x7F800000u) == 0x7F800000u;
    }
    case SPLAT_F16:
      return (((const uint16_t *)x)[off] & 0x7C00) == 0x7C00;
    case SPLAT_BF16:
      return (((const uint16_t *)x)[off] & 0x7F80) == 0x7F80;
  }
  return 0;
}

typedef struct scan {
  const splat_tensor *t;
  const splat__acsr *acsr; /* NULL: whole tensor; else only entries k < row nnz */
  int64_t d1, d2, d3;      /* shape[1..3] */
  atomic_llong first;      /* lowest flat index found so far, INT64_MAX if none */
} scan;

static void record(scan *s, int64_t flat) {
  long long cur = atomic_load(&s->first);
  while (flat < cur && !atomic_compare_exchange_weak(&s->first, &cur, (long long)flat)) {
  }
}

/* Rows r = (i0 * d1 + i1) * d2 + i2 of the tensor, each scanned along the last dim. */
static void scan_rows(void *p, int64_t begin, int64_t end) {
  scan *s = (scan *)p;
  const splat_tensor *t = s->t;
  for (int64_t r = begin; r < end; r++) {
    if (r * s->d3 >= (int64_t)atomic_load(&s->first)) return; /* nothing lower left here */
    const int64_t i2 = r % s->d2, i1 = (r / s->d2) % s->d1, i0 = r / (s->d2 * s->d1);
    int64_t n = s->acsr ? splat__acsr_row_nnz(s->acsr, i2) : s->d3;
    if (n > s->d3) n = s->d3;
    const int64_t off = splat__cpu_offset(t, i0, i1, i2, 0);
    for (int64_t k = 0; k < n; k++) {
      if (is_nonfinite(t->data, t->dtype, off + k * t->strides[3])) {
        record(s, r * s->d3 + k);
        return;
      }
    }
  }
}

static splat_status check(int nthreads, const char *op, const char *name, const splat_tensor *t,
                          const splat__acsr *acsr) {
  scan s;
  s.t = t;
  s.acsr = acsr;
  s.d1 = t->shape[1];
  s.d2 = t->shape[2];
  s.d3 = t->shape[3];
  atomic_init(&s.first, (long long)INT64_MAX);
  const int64_t rows = t->shape[0] * s.d1 * s.d2;
  if (rows <= 0 || s.d3 <= 0) return SPLAT_OK;
  /* A row costs d3 bit tests: chunks of a few thousand elements. */
  int64_t chunk = 4096 / s.d3;
  if (chunk < 1) chunk = 1;
  if (rows * s.d3 < (int64_t)1 << 16) nthreads = 1; /* not worth starting threads */
  splat__parallel_for(nthreads, rows, chunk, scan_rows, &s);
  const int64_t flat = (int64_t)atomic_load(&s.first);
  if (flat == INT64_MAX) return SPLAT_OK;
  const int64_t i3 = flat % s.d3, r = flat / s.d3;
  const int64_t i2 = r % s.d2, i1 = (r / s.d2) % s.d1, i0 = r / (s.d2 * s.d1);
  const double v = splat__load(t->data, t->dtype, splat__cpu_offset(t, i0, i1, i2, i3));
  const char *what = v != v ? "nan" : v > 0 ? "inf" : "-inf";
  return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                     "%s: %s[%lld,%lld,%lld,%lld] is %s; inputs must be finite", op, name,
                     (long long)i0, (long long)i1, (long long)i2, (long long)i3, what);
}

splat_status splat__cpu_check_finite(int nthreads, const char *op, const char *name,
                                     const splat_tensor *t) {
  return check(nthreads, op, name, t, NULL);
}

splat_status splat__cpu_check_finite_values(int nthreads, const char *op, const char *name,
                                            const splat_plan *plan, const splat_tensor *t) {
  return check(nthreads, op, name, t, &plan->acsr);
}
