/* cpu.h — the CPU backend: reference kernels with double accumulation. Arguments have
 * been validated (shapes, dtypes, strides, NULLs) by the API layer; these check that
 * inputs are finite and compute. scale is final (defaults already resolved). */
#ifndef SPLAT_CPU_CPU_H
#define SPLAT_CPU_CPU_H

#include "core/context.h"

splat_status splat__cpu_sddmm(const splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                              double scale, const splat_tensor *scores);
splat_status splat__cpu_softmax(const splat_plan *plan, const splat_tensor *scores, double scale,
                                const splat_tensor *probs, const splat_tensor *lse);
splat_status splat__cpu_spmm(const splat_plan *plan, const splat_tensor *probs,
                             const splat_tensor *v, const splat_tensor *out);
splat_status splat__cpu_attention(const splat_plan *plan, const splat_tensor *q,
                                  const splat_tensor *k, const splat_tensor *v, double scale,
                                  const splat_tensor *out, const splat_tensor *lse);
/* Backward of the fused attention (attention_backward.c): lse is required and checked
 * against the plan's rows; dk and dv sum over the query heads of their key/value head. */
splat_status splat__cpu_attention_backward(const splat_plan *plan, const splat_tensor *q,
                                           const splat_tensor *k, const splat_tensor *v,
                                           const splat_tensor *out, const splat_tensor *lse,
                                           const splat_tensor *dout, double scale,
                                           const splat_tensor *dq, const splat_tensor *dk,
                                           const splat_tensor *dv);

#endif
