/* attention.c — CPU fused attention forward: per row, one pass of online softmax in
 * double (running maximum m, running sum l, accumulator rescaled only when m grows),
 * then out = acc / l rounded once and lse = m + log(l). Empty rows give zeros and
 * lse = -inf. No allocation: the query row and accumulator live on the stack. */
#include <math.h>
#include <string.h>

#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/kernels.h"

typedef struct attention_args {
  const splat_plan *plan;
  const splat_tensor *q, *k, *v, *out, *lse;
  double scale;
} attention_args;

static void attention_rows(void *p, int64_t begin, int64_t end) {
  const attention_args *a = (const attention_args *)p;
  const splat_plan *plan = a->plan;
  const splat_tensor *q = a->q, *k = a->k, *v = a->v, *o = a->out;
  const int64_t H = plan->desc.heads, D = plan->desc.head_dim, Sq = plan->seq_q;
  const int64_t group = H / plan->desc.heads_kv;
  double qd[SPLAT_MAX_HEAD_DIM], acc[SPLAT_MAX_HEAD_DIM];
  for (int64_t r = begin; r < end; r++) {
    const int64_t i = r % Sq, h = (r / Sq) % H, b = r / (Sq * H), hk = h / group;
    memset(acc, 0, sizeof(double) * (size_t)D);
    double m = -INFINITY, l = 0.0;
    splat__cpu_cols it;
    splat__cpu_cols_begin(&it, &plan->acsr, i);
    int64_t j;
    if (splat__cpu_cols_next(&it, &j)) {
      splat__cpu_load_vec(q->data, q->dtype, splat__cpu_offset(q, b, h, i, 0), q->strides[3], D,
                          qd);
      const int64_t kbase = splat__cpu_offset(k, b, hk, 0, 0);
      const int64_t vbase = splat__cpu_offset(v, b, hk, 0, 0);
      do {
        const double s = a->scale * splat__cpu_dot(qd, k->data, k->dtype, kbase + j * k->strides[2],
                                                   k->strides[3], D);
        if (s > m) {
          const double c = exp(m - s); /* 0 for the first column (m = -inf) */
          l *= c;
          for (int64_t d = 0; d < D; d++) acc[d] *= c;
          m = s;
        }
        const double w = exp(s - m);
        l += w;
        splat__cpu_axpy(w, v->data, v->dtype, vbase + j * v->strides[2], v->strides[3], D, acc);
      } while (splat__cpu_cols_next(&it, &j));
      /* l >= 1: the maximum contributes exp(0). */
      for (int64_t d = 0; d < D; d++) acc[d] /= l;
    }
    splat__cpu_store_vec(o->data, o->dtype, splat__cpu_offset(o, b, h, i, 0), o->strides[3], D,
                         acc);
    if (a->lse) {
      const double row_lse = l > 0.0 ? m + log(l) : -INFINITY;
      splat__store(a->lse->data, a->lse->dtype, splat__cpu_offset(a->lse, b, h, i, 0), row_lse);
    }
  }
}

splat_status splat__cpu_attention(const splat_plan *plan, const splat_tensor *q,
                                  const splat_tensor *k, const splat_tensor *v, double scale,
                                  const splat_tensor *out, const splat_tensor *lse) {
  const int nthreads = splat__cpu_threads(plan);
  splat_status st = splat__cpu_check_finite(nthreads, "splat_attention", "q", q);
  if (st == SPLAT_OK) st = splat__cpu_check_finite(nthreads, "splat_attention", "k", k);
  if (st == SPLAT_OK) st = splat__cpu_check_finite(nthreads, "splat_attention", "v", v);
  if (st != SPLAT_OK) return st;
  attention_args a = {plan, q, k, v, out, lse, scale};
  const int64_t rows = plan->desc.batch * plan->desc.heads * plan->seq_q;
  splat__parallel_for(nthreads, rows, splat__cpu_row_chunk(rows, nthreads), attention_rows, &a);
  return SPLAT_OK;
}
