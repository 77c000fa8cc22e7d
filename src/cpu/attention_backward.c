/* attention_backward.c — CPU backward of the fused attention, in double: per row,
 * P[i,j] = exp(scale <q_i, k_j> - lse_i) from the forward's log-sum-exp, then
 * dS[i,j] = P[i,j] (<dout_i, v_j> - <dout_i, out_i>), dq_i = scale sum_j dS[i,j] k_j, and
 * into per-key accumulators dk_j += scale dS[i,j] q_i, dv_j += P[i,j] dout_i. One job per
 * (batch, key/value head) owns that head's dk and dv accumulators (Sk x D doubles each,
 * allocated per job) and walks the rows of every query head sharing it, so no two jobs
 * write the same gradient; each gradient is rounded once, when stored. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "cpu/cpu.h"
#include "cpu/kernels.h"

typedef struct backward_args {
  const splat_plan *plan;
  const splat_tensor *q, *k, *v, *out, *lse, *dout, *dq, *dk, *dv;
  double scale;
  atomic_int out_of_memory;
} backward_args;

/* Rows of query head h of batch b: dq stored, dk / dv accumulated (unscaled dk). */
static void backward_head(const backward_args *a, int64_t b, int64_t h, int64_t hk, double *dk_acc,
                          double *dv_acc) {
  const splat_plan *plan = a->plan;
  const splat_tensor *q = a->q, *k = a->k, *v = a->v, *dout = a->dout;
  const int64_t D = plan->desc.head_dim, Sq = plan->seq_q;
  const int64_t kbase = splat__cpu_offset(k, b, hk, 0, 0),
                vbase = splat__cpu_offset(v, b, hk, 0, 0);
  double qd[SPLAT_MAX_HEAD_DIM], dod[SPLAT_MAX_HEAD_DIM], dq_acc[SPLAT_MAX_HEAD_DIM];
  for (int64_t i = 0; i < Sq; i++) {
    memset(dq_acc, 0, sizeof(double) * (size_t)D);
    splat__cpu_cols it;
    splat__cpu_cols_begin(&it, &plan->acsr, i);
    int64_t j;
    if (splat__cpu_cols_next(&it, &j)) {
      splat__cpu_load_vec(q->data, q->dtype, splat__cpu_offset(q, b, h, i, 0), q->strides[3], D,
                          qd);
      splat__cpu_load_vec(dout->data, dout->dtype, splat__cpu_offset(dout, b, h, i, 0),
                          dout->strides[3], D, dod);
      const double row_d =
          splat__cpu_dot(dod, a->out->data, a->out->dtype, splat__cpu_offset(a->out, b, h, i, 0),
                         a->out->strides[3], D);
      const double lse =
          splat__load(a->lse->data, a->lse->dtype, splat__cpu_offset(a->lse, b, h, i, 0));
      do {
        const int64_t koff = kbase + j * k->strides[2];
        const double s = a->scale * splat__cpu_dot(qd, k->data, k->dtype, koff, k->strides[3], D);
        const double p = exp(s - lse);
        const double dp =
            splat__cpu_dot(dod, v->data, v->dtype, vbase + j * v->strides[2], v->strides[3], D);
        const double ds = p * (dp - row_d);
        splat__cpu_axpy(ds, k->data, k->dtype, koff, k->strides[3], D, dq_acc);
        double *dkj = dk_acc + j * D, *dvj = dv_acc + j * D;
        for (int64_t d = 0; d < D; d++) {
          dkj[d] += ds * qd[d];
          dvj[d] += p * dod[d];
        }
      } while (splat__cpu_cols_next(&it, &j));
      for (int64_t d = 0; d < D; d++) dq_acc[d] *= a->scale;
    }
    splat__cpu_store_vec(a->dq->data, a->dq->dtype, splat__cpu_offset(a->dq, b, h, i, 0),
                         a->dq->strides[3], D, dq_acc);
  }
}

/* Jobs [begin, end) of (batch, key/value head) pairs. */
static void backward_jobs(void *p, int64_t begin, int64_t end) {
  backward_args *a = (backward_args *)p;
  const splat_plan *plan = a->plan;
  const int64_t Hkv = plan->desc.heads_kv, D = plan->desc.head_dim, Sk = plan->seq_k;
  const int64_t group = plan->desc.heads / Hkv;
  double *dk_acc = malloc((size_t)(Sk * D) * sizeof *dk_acc);
  double *dv_acc = malloc((size_t)(Sk * D) * sizeof *dv_acc);
  if (!dk_acc || !dv_acc) {
    atomic_store(&a->out_of_memory, 1);
    free(dk_acc);
    free(dv_acc);
    return;
  }
  for (int64_t job = begin; job < end; job++) {
    const int64_t b = job / Hkv, hk = job % Hkv;
    memset(dk_acc, 0, (size_t)(Sk * D) * sizeof *dk_acc);
    memset(dv_acc, 0, (size_t)(Sk * D) * sizeof *dv_acc);
    for (int64_t h = hk * group; h < (hk + 1) * group; h++)
      backward_head(a, b, h, hk, dk_acc, dv_acc);
    for (int64_t j = 0; j < Sk; j++) {
      double *dkj = dk_acc + j * D;
      for (int64_t d = 0; d < D; d++) dkj[d] *= a->scale;
      splat__cpu_store_vec(a->dk->data, a->dk->dtype, splat__cpu_offset(a->dk, b, hk, j, 0),
                           a->dk->strides[3], D, dkj);
      splat__cpu_store_vec(a->dv->data, a->dv->dtype, splat__cpu_offset(a->dv, b, hk, j, 0),
                           a->dv->strides[3], D, dv_acc + j * D);
    }
  }
  free(dk_acc);
  free(dv_acc);
}

/* lse must be what the forward wrote: a number, or -inf exactly on the rows that see no
 * key (exp(s - lse) of a row that sees keys would be infinite). */
static splat_status check_lse(const splat_plan *plan, const splat_tensor *lse) {
  static const char *fn = "splat_attention_backward";
  const int64_t B = plan->desc.batch, H = plan->desc.heads, Sq = plan->seq_q;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < H; h++)
      for (int64_t i = 0; i < Sq; i++) {
        const double x = splat__load(lse->data, lse->dtype, splat__cpu_offset(lse, b, h, i, 0));
        const int64_t nnz = splat__acsr_row_nnz(&plan->acsr, i);
        if (x != x || x == INFINITY || (x == -INFINITY && nnz > 0))
          return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                             "%s: lse[%lld,%lld,%lld,0] is %s but row %lld sees %lld keys; lse "
                             "must be the forward's log-sum-exp (-inf only on rows that see none)",
                             fn, (long long)b, (long long)h, (long long)i,
                             x != x  ? "nan"
                             : x > 0 ? "inf"
                                     : "-inf",
                             (long long)i, (long long)nnz);
      }
  return SPLAT_OK;
}

splat_status splat__cpu_attention_backward(const splat_plan *plan, const splat_tensor *q,
                                           const splat_tensor *k, const splat_tensor *v,
                                           const splat_tensor *out, const splat_tensor *lse,
                                           const splat_tensor *dout, double scale,
                                           const splat_tensor *dq, const splat_tensor *dk,
                                           const splat_tensor *dv) {
  static const char *fn = "splat_attention_backward";
  const int nthreads = splat__cpu_threads(plan);
  const struct {
    const char *name;
    const splat_tensor *t;
  } inputs[] = {{"q", q}, {"k", k}, {"v", v}, {"out", out}, {"dout", dout}};
  for (size_t n = 0; n < sizeof inputs / sizeof *inputs; n++) {
    const splat_status st = splat__cpu_check_finite(nthreads, fn, inputs[n].name, inputs[n].t);
    if (st != SPLAT_OK) return st;
  }
  const splat_status st = check_lse(plan, lse);
  if (st != SPLAT_OK) return st;
  backward_args a = {plan, q, k, v, out, lse, dout, dq, dk, dv, scale, 0};
  const int64_t jobs = plan->desc.batch * plan->desc.heads_kv;
  splat__parallel_for(nthreads, jobs, 1, backward_jobs, &a);
  if (atomic_load(&a.out_of_memory))
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY,
                       "%s: out of memory for the key gradients' double accumulators (2 x seq_k "
                       "%lld x head_dim %lld doubles a thread)",
                       fn, (long long)plan->seq_k, (long long)plan->desc.head_dim);
  return SPLAT_OK;
}
