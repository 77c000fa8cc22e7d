/* spmm.c — CPU sparse-dense product: out[b,h,i] = sum_k probs[b,h,i,k] * V[b,hk,j_k]
 * over the columns j_k of row i, accumulated in double and rounded once; empty rows
 * give zeros. */
#include <string.h>

#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/kernels.h"

typedef struct spmm_args {
  const splat_plan *plan;
  const splat_tensor *probs, *v, *out;
} spmm_args;

static void spmm_rows(void *p, int64_t begin, int64_t end) {
  const spmm_args *a = (const spmm_args *)p;
  const splat_plan *plan = a->plan;
  const splat_tensor *pr = a->probs, *v = a->v, *o = a->out;
  const int64_t H = plan->desc.heads, D = plan->desc.head_dim, Sq = plan->seq_q;
  const int64_t group = H / plan->desc.heads_kv;
  double acc[SPLAT_MAX_HEAD_DIM];
  for (int64_t r = begin; r < end; r++) {
    const int64_t i = r % Sq, h = (r / Sq) % H, b = r / (Sq * H), hk = h / group;
    memset(acc, 0, sizeof(double) * (size_t)D);
    const int64_t vbase = splat__cpu_offset(v, b, hk, 0, 0);
    const int64_t pbase = splat__cpu_offset(pr, b, h, i, 0);
    splat__cpu_cols it;
    splat__cpu_cols_begin(&it, &plan->acsr, i);
    int64_t j, n = 0;
    while (splat__cpu_cols_next(&it, &j)) {
      const double w = splat__load(pr->data, pr->dtype, pbase + n * pr->strides[3]);
      splat__cpu_axpy(w, v->data, v->dtype, vbase + j * v->strides[2], v->strides[3], D, acc);
      n++;
    }
    splat__cpu_store_vec(o->data, o->dtype, splat__cpu_offset(o, b, h, i, 0), o->strides[3], D,
                         acc);
  }
}

splat_status splat__cpu_spmm(const splat_plan *plan, const splat_tensor *probs,
                             const splat_tensor *v, const splat_tensor *out) {
  const int nthreads = splat__cpu_threads(plan);
  splat_status st = splat__cpu_check_finite_values(nthreads, "splat_spmm", "probs", plan, probs);
  if (st == SPLAT_OK) st = splat__cpu_check_finite(nthreads, "splat_spmm", "v", v);
  if (st != SPLAT_OK) return st;
  spmm_args a = {plan, probs, v, out};
  const int64_t rows = plan->desc.batch * plan->desc.heads * plan->seq_q;
  splat__parallel_for(nthreads, rows, splat__cpu_row_chunk(rows, nthreads), spmm_rows, &a);
  return SPLAT_OK;
}
