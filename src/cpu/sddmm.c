/* sddmm.c — CPU sampled dense-dense product: for every mask element (i, j),
 * scores[b,h,i,k] = scale * <Q[b,h,i], K[b,hk,j]> with j the k-th column of row i,
 * the dot product in double, rounded once to the scores dtype. */
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/kernels.h"

typedef struct sddmm_args {
  const splat_plan *plan;
  const splat_tensor *q, *k, *scores;
  double scale;
} sddmm_args;

static void sddmm_rows(void *p, int64_t begin, int64_t end) {
  const sddmm_args *a = (const sddmm_args *)p;
  const splat_plan *plan = a->plan;
  const splat_tensor *q = a->q, *k = a->k, *sc = a->scores;
  const int64_t H = plan->desc.heads, D = plan->desc.head_dim, Sq = plan->seq_q;
  const int64_t group = H / plan->desc.heads_kv;
  double qd[SPLAT_MAX_HEAD_DIM];
  for (int64_t r = begin; r < end; r++) {
    const int64_t i = r % Sq, h = (r / Sq) % H, b = r / (Sq * H), hk = h / group;
    splat__cpu_cols it;
    splat__cpu_cols_begin(&it, &plan->acsr, i);
    int64_t j;
    if (!splat__cpu_cols_next(&it, &j)) continue; /* empty row: nothing to write */
    splat__cpu_load_vec(q->data, q->dtype, splat__cpu_offset(q, b, h, i, 0), q->strides[3], D, qd);
    const int64_t kbase = splat__cpu_offset(k, b, hk, 0, 0);
    const int64_t sbase = splat__cpu_offset(sc, b, h, i, 0);
    int64_t n = 0;
    do {
      const double dot =
          splat__cpu_dot(qd, k->data, k->dtype, kbase + j * k->strides[2], k->strides[3], D);
      splat__store(sc->data, sc->dtype, sbase + n * sc->strides[3], a->scale * dot);
      n++;
    } while (splat__cpu_cols_next(&it, &j));
  }
}

splat_status splat__cpu_sddmm(const splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                              double scale, const splat_tensor *scores) {
  const int nthreads = splat__cpu_threads(plan);
  splat_status st = splat__cpu_check_finite(nthreads, "splat_sddmm", "q", q);
  if (st == SPLAT_OK) st = splat__cpu_check_finite(nthreads, "splat_sddmm", "k", k);
  if (st != SPLAT_OK) return st;
  sddmm_args a = {plan, q, k, scores, scale};
  const int64_t rows = plan->desc.batch * plan->desc.heads * plan->seq_q;
  splat__parallel_for(nthreads, rows, splat__cpu_row_chunk(rows, nthreads), sddmm_rows, &a);
  return SPLAT_OK;
}
