/* ops.c — the public operations: validate every argument against the plan, resolve
 * the scale, then dispatch to the context's backend. */
#include <math.h>

#include "core/context.h"
#include "core/validate.h"
#include "cpu/cpu.h"
#include "cuda/backend.h"
#include "cuda/driver.h"

/* Shapes a plan expects. */
typedef struct op_shapes {
  int64_t q[4], kv[4], values[4], lse[4];
} op_shapes;

static op_shapes shapes_of(const splat_plan *p) {
  const splat_plan_desc *d = &p->desc;
  op_shapes s = {{d->batch, d->heads, p->seq_q, d->head_dim},
                 {d->batch, d->heads_kv, p->seq_k, d->head_dim},
                 {d->batch, d->heads, p->seq_q, p->acsr.row_width},
                 {d->batch, d->heads, p->seq_q, 1}};
  return s;
}

/* Resolves SPLAT_DEFAULT_SCALE and rejects non-finite scales. */
static splat_status resolve_scale(const char *fn, const splat_plan *p, float scale,
                                  int allow_default, double *out) {
  if (!isfinite(scale)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: scale=%g must be finite", fn,
                       (double)scale);
  }
  *out = (allow_default && scale == SPLAT_DEFAULT_SCALE) ? 1.0 / sqrt((double)p->desc.head_dim)
                                                         : (double)scale;
  return SPLAT_OK;
}

#define TRY(expr)                    \
  do {                               \
    splat_status st_ = (expr);       \
    if (st_ != SPLAT_OK) return st_; \
  } while (0)

/* Dispatch by the plan's backend: CUDA plans run on the caller's stream. */
#define ON_CUDA(plan) ((plan)->ctx->backend == SPLAT_BACKEND_CUDA)

/* The plan must have been built for the operation (splat_plan_desc.ops). */
static splat_status check_op(const char *fn, const splat_plan *plan, unsigned bit,
                             const char *flag) {
  if (plan->desc.ops & bit) return SPLAT_OK;
  return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                     "%s: the plan was built without this operation (splat_plan_desc.ops = 0x%x); "
                     "build it with %s in ops (or ops = 0 for all)",
                     fn, plan->desc.ops, flag);
}

/* On CUDA plans, every tensor must be memory the context's device can use. */
static splat_status check_memory(const char *fn, const splat_plan *plan, int n,
                                 const char *const *names, const splat_tensor *const *tensors) {
  if (!ON_CUDA(plan)) return SPLAT_OK;
  for (int i = 0; i < n; i++) {
    if (!tensors[i]) continue;
    const splat_tensor *t = tensors[i];
    if (t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3] == 0) continue;
    splat_status st = splat__cuda_check_pointer(fn, names[i], t->data, plan->ctx->device);
    if (st != SPLAT_OK) return st;
  }
  return SPLAT_OK;
}

static splat_status sddmm(splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                          float scale, const splat_tensor *scores, splat_stream stream) {
  static const char *fn = "splat_sddmm";
  TRY(check_op(fn, plan, SPLAT_OPS_SDDMM, "SPLAT_OPS_SDDMM"));
  op_shapes s = shapes_of(plan);
  int dt = (int)plan->desc.dtype;
  double sc = 0;
  TRY(splat__check_tensor(fn, "q", q, s.q, dt, 0));
  TRY(splat__check_tensor(fn, "k", k, s.kv, dt, 0));
  TRY(splat__check_tensor(fn, "scores", scores, s.values, SPLAT__DTYPE_ANY, 1));
  TRY(splat__check_disjoint(fn, "scores", scores, "q", q));
  TRY(splat__check_disjoint(fn, "scores", scores, "k", k));
  TRY(resolve_scale(fn, plan, scale, 1, &sc));
  TRY(check_memory(fn, plan, 3, (const char *const[]){"q", "k", "scores"},
                   (const splat_tensor *const[]){q, k, scores}));
  if (ON_CUDA(plan)) return splat__cuda_sddmm(plan, q, k, sc, scores, stream);
  return splat__cpu_sddmm(plan, q, k, sc, scores);
}

static splat_status softmax(splat_plan *plan, const splat_tensor *scores, float scale,
                            const splat_tensor *probs, const splat_tensor *lse,
                            splat_stream stream) {
  static const char *fn = "splat_softmax";
  TRY(check_op(fn, plan, SPLAT_OPS_SOFTMAX, "SPLAT_OPS_SOFTMAX"));
  op_shapes s = shapes_of(plan);
  double sc = 0;
  TRY(splat__check_tensor(fn, "scores", scores, s.values, SPLAT__DTYPE_ANY, 0));
  TRY(splat__check_tensor(fn, "probs", probs, s.values, SPLAT__DTYPE_ANY, 1));
  if (!splat__same_tensor(probs, scores)) {
    TRY(splat__check_disjoint(fn, "probs", probs, "scores", scores));
  }
  if (lse) {
    TRY(splat__check_tensor(fn, "lse", lse, s.lse, SPLAT_F32, 1));
    TRY(splat__check_disjoint(fn, "lse", lse, "scores", scores));
    TRY(splat__check_disjoint(fn, "lse", lse, "probs", probs));
  }
  TRY(resolve_scale(fn, plan, scale, 0, &sc));
  TRY(check_memory(fn, plan, 3, (const char *const[]){"scores", "probs", "lse"},
                   (const splat_tensor *const[]){scores, probs, lse}));
  if (ON_CUDA(plan)) return splat__cuda_softmax(plan, scores, sc, probs, lse, stream);
  return splat__cpu_softmax(plan, scores, sc, probs, lse);
}

static splat_status spmm(splat_plan *plan, const splat_tensor *probs, const splat_tensor *v,
                         const splat_tensor *out, splat_stream stream) {
  static const char *fn = "splat_spmm";
  TRY(check_op(fn, plan, SPLAT_OPS_SPMM, "SPLAT_OPS_SPMM"));
  op_shapes s = shapes_of(plan);
  int dt = (int)plan->desc.dtype;
  TRY(splat__check_tensor(fn, "probs", probs, s.values, SPLAT__DTYPE_ANY, 0));
  TRY(splat__check_tensor(fn, "v", v, s.kv, dt, 0));
  TRY(splat__check_tensor(fn, "out", out, s.q, dt, 1));
  TRY(splat__check_disjoint(fn, "out", out, "probs", probs));
  TRY(splat__check_disjoint(fn, "out", out, "v", v));
  TRY(check_memory(fn, plan, 3, (const char *const[]){"probs", "v", "out"},
                   (const splat_tensor *const[]){probs, v, out}));
  if (ON_CUDA(plan)) return splat__cuda_spmm(plan, probs, v, out, stream);
  return splat__cpu_spmm(plan, probs, v, out);
}

static splat_status attention(splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                              const splat_tensor *v, float scale, const splat_tensor *out,
                              const splat_tensor *lse, splat_stream stream) {
  static const char *fn = "splat_attention";
  TRY(check_op(fn, plan, SPLAT_OPS_ATTENTION, "SPLAT_OPS_ATTENTION"));
  op_shapes s = shapes_of(plan);
  int dt = (int)plan->desc.dtype;
  double sc = 0;
  TRY(splat__check_tensor(fn, "q", q, s.q, dt, 0));
  TRY(splat__check_tensor(fn, "k", k, s.kv, dt, 0));
  TRY(splat__check_tensor(fn, "v", v, s.kv, dt, 0));
  TRY(splat__check_tensor(fn, "out", out, s.q, dt, 1));
  TRY(splat__check_disjoint(fn, "out", out, "q", q));
  TRY(splat__check_disjoint(fn, "out", out, "k", k));
  TRY(splat__check_disjoint(fn, "out", out, "v", v));
  if (lse) {
    TRY(splat__check_tensor(fn, "lse", lse, s.lse, SPLAT_F32, 1));
    TRY(splat__check_disjoint(fn, "lse", lse, "q", q));
    TRY(splat__check_disjoint(fn, "lse", lse, "k", k));
    TRY(splat__check_disjoint(fn, "lse", lse, "v", v));
    TRY(splat__check_disjoint(fn, "lse", lse, "out", out));
  }
  TRY(resolve_scale(fn, plan, scale, 1, &sc));
  TRY(check_memory(fn, plan, 5, (const char *const[]){"q", "k", "v", "out", "lse"},
                   (const splat_tensor *const[]){q, k, v, out, lse}));
  if (ON_CUDA(plan)) return splat__cuda_attention(plan, q, k, v, sc, out, lse, stream);
  return splat__cpu_attention(plan, q, k, v, sc, out, lse);
}

static splat_status attention_backward(splat_plan *plan, const splat_tensor *q,
                                       const splat_tensor *k, const splat_tensor *v,
                                       const splat_tensor *out, const splat_tensor *lse,
                                       const splat_tensor *dout, float scale,
                                       const splat_tensor *dq, const splat_tensor *dk,
                                       const splat_tensor *dv, splat_stream stream) {
  static const char *fn = "splat_attention_backward";
  TRY(check_op(fn, plan, SPLAT_OPS_ATTENTION_BACKWARD, "SPLAT_OPS_ATTENTION_BACKWARD"));
  op_shapes s = shapes_of(plan);
  const int dt = (int)plan->desc.dtype;
  double sc = 0;
  const char *const in_names[] = {"q", "k", "v", "out", "lse", "dout"};
  const splat_tensor *const ins[] = {q, k, v, out, lse, dout};
  const int64_t *const in_shapes[] = {s.q, s.kv, s.kv, s.q, s.lse, s.q};
  for (int n = 0; n < 6; n++)
    TRY(splat__check_tensor(fn, in_names[n], ins[n], in_shapes[n], n == 4 ? SPLAT_F32 : dt, 0));
  const char *const out_names[] = {"dq", "dk", "dv"};
  const splat_tensor *const outs[] = {dq, dk, dv};
  const int64_t *const out_shapes[] = {s.q, s.kv, s.kv};
  for (int n = 0; n < 3; n++) {
    TRY(splat__check_tensor(fn, out_names[n], outs[n], out_shapes[n], dt, 1));
    for (int m = 0; m < 6; m++)
      TRY(splat__check_disjoint(fn, out_names[n], outs[n], in_names[m], ins[m]));
    for (int m = 0; m < n; m++)
      TRY(splat__check_disjoint(fn, out_names[n], outs[n], out_names[m], outs[m]));
  }
  TRY(resolve_scale(fn, plan, scale, 1, &sc));
  TRY(check_memory(fn, plan, 9,
                   (const char *const[]){"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"},
                   (const splat_tensor *const[]){q, k, v, out, lse, dout, dq, dk, dv}));
  if (ON_CUDA(plan)) {
    (void)stream;
    return splat__fail(SPLAT_ERR_UNSUPPORTED,
                       "%s: the CUDA backend has no attention backward yet; a CPU context "
                       "computes it",
                       fn);
  }
  return splat__cpu_attention_backward(plan, q, k, v, out, lse, dout, sc, dq, dk, dv);
}

/* Public entry points: a NULL plan fails on the thread; anything else is also
 * recorded on the plan's context. */
splat_status splat_sddmm(splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                         float scale, const splat_tensor *scores, splat_stream stream) {
  if (!plan) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_sddmm: plan is NULL");
  return splat__capture(plan->ctx->error, sddmm(plan, q, k, scale, scores, stream));
}

splat_status splat_softmax(splat_plan *plan, const splat_tensor *scores, float scale,
                           const splat_tensor *probs, const splat_tensor *lse,
                           splat_stream stream) {
  if (!plan) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_softmax: plan is NULL");
  return splat__capture(plan->ctx->error, softmax(plan, scores, scale, probs, lse, stream));
}

splat_status splat_spmm(splat_plan *plan, const splat_tensor *probs, const splat_tensor *v,
                        const splat_tensor *out, splat_stream stream) {
  if (!plan) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_spmm: plan is NULL");
  return splat__capture(plan->ctx->error, spmm(plan, probs, v, out, stream));
}

splat_status splat_attention(splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                             const splat_tensor *v, float scale, const splat_tensor *out,
                             const splat_tensor *lse, splat_stream stream) {
  if (!plan) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_attention: plan is NULL");
  return splat__capture(plan->ctx->error, attention(plan, q, k, v, scale, out, lse, stream));
}

splat_status splat_attention_backward(splat_plan *plan, const splat_tensor *q,
                                      const splat_tensor *k, const splat_tensor *v,
                                      const splat_tensor *out, const splat_tensor *lse,
                                      const splat_tensor *dout, float scale, const splat_tensor *dq,
                                      const splat_tensor *dk, const splat_tensor *dv,
                                      splat_stream stream) {
  if (!plan)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_attention_backward: plan is NULL");
  return splat__capture(plan->ctx->error, attention_backward(plan, q, k, v, out, lse, dout, scale,
                                                             dq, dk, dv, stream));
}
