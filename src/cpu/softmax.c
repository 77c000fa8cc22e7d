/* softmax.c — CPU row softmax over ACSR values: probs = softmax(scale * scores) per row,
 * lse = log(sum exp(scale * scores)), in double and numerically stable (the row maximum
 * is subtracted). Works in place: each entry is read before it is written. */
#include <math.h>

#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/kernels.h"

typedef struct softmax_args {
  const splat_plan *plan;
  const splat_tensor *scores, *probs, *lse;
  double scale;
} softmax_args;

static void softmax_rows(void *p, int64_t begin, int64_t end) {
  const softmax_args *a = (const softmax_args *)p;
  const splat_plan *plan = a->plan;
  const splat_tensor *sc = a->scores, *pr = a->probs, *lse = a->lse;
  const int64_t H = plan->desc.heads, Sq = plan->seq_q;
  const double scale = a->scale;
  for (int64_t r = begin; r < end; r++) {
    const int64_t i = r % Sq, h = (r / Sq) % H, b = r / (Sq * H);
    const int64_t n = splat__acsr_row_nnz(&plan->acsr, i);
    double row_lse = -INFINITY;
    if (n > 0) {
      const int64_t sbase = splat__cpu_offset(sc, b, h, i, 0), ss = sc->strides[3];
      const int64_t pbase = splat__cpu_offset(pr, b, h, i, 0), ps = pr->strides[3];
      double m = -INFINITY;
      for (int64_t k = 0; k < n; k++) {
        const double x = scale * splat__load(sc->data, sc->dtype, sbase + k * ss);
        if (x > m) m = x;
      }
      double sum = 0.0;
      for (int64_t k = 0; k < n; k++)
        sum += exp(scale * splat__load(sc->data, sc->dtype, sbase + k * ss) - m);
      /* sum >= 1: the maximum contributes exp(0). */
      for (int64_t k = 0; k < n; k++) {
        const double x = scale * splat__load(sc->data, sc->dtype, sbase + k * ss);
        splat__store(pr->data, pr->dtype, pbase + k * ps, exp(x - m) / sum);
      }
      row_lse = m + log(sum);
    }
    if (lse) splat__store(lse->data, lse->dtype, splat__cpu_offset(lse, b, h, i, 0), row_lse);
  }
}

splat_status splat__cpu_softmax(const splat_plan *plan, const splat_tensor *scores, double scale,
                                const splat_tensor *probs, const splat_tensor *lse) {
  const int nthreads = splat__cpu_threads(plan);
  splat_status st =
      splat__cpu_check_finite_values(nthreads, "splat_softmax", "scores", plan, scores);
  if (st != SPLAT_OK) return st;
  softmax_args a = {plan, scores, probs, lse, scale};
  const int64_t rows = plan->desc.batch * plan->desc.heads * plan->seq_q;
  splat__parallel_for(nthreads, rows, splat__cpu_row_chunk(rows, nthreads), softmax_rows, &a);
  return SPLAT_OK;
}
