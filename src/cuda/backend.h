/* backend.h — the CUDA backend as src/core sees it: open a device context, build the
 * device side of a plan (metadata upload, kernel generation, compile, module load), and
 * run the four operations on the caller's stream. Arguments of the operations have been
 * validated by the API layer (src/core/ops.c), as for the CPU backend (src/cpu/cpu.h). */
#ifndef SPLAT_CUDA_BACKEND_H
#define SPLAT_CUDA_BACKEND_H

#include "core/context.h"
#include "cuda/attn_passes.h"

typedef struct splat__cuda_context splat__cuda_context;
typedef struct splat__cuda_plan splat__cuda_plan;

/* Opens CUDA device `device` through its primary context. SPLAT_ERR_NO_DEVICE when no
 * driver / device is usable, SPLAT_ERR_UNSUPPORTED below compute capability 8.0. */
splat_status splat__cuda_context_open(int device, splat__cuda_context **out);
void splat__cuda_context_close(splat__cuda_context *c);

/* Whether a plan of a CUDA context whose description left the query tile to splat, analysed
 * at 128 rows, may take 192-row tiles instead (tile_rows.h splat__tile_rows_try on its
 * device): the analysis then builds those beside the 128-row ones. */
int splat__cuda_plan_tries_rows192(const splat_plan *plan);

/* Takes t192, the 192-row tile plan built beside the 128-row one, in place of those where
 * tile_rows.h prefers it (three consumer warpgroups of the sm_90a warp-specialised attention
 * kernel; plan->tiles, plan->report, plan->desc.tile_q; plan_ms counts the choice), else
 * frees it. */
splat_status splat__cuda_plan_tile_rows(splat_plan *plan, splat__tile_plan *t192);

/* The two passes a plan's fused attention may run (attn_passes.h), built ahead into *out
 * from its ACSR and description alone, on another thread while the analysis builds the single
 * plan (core/plan.c): only where the plan's ops include the attention and its device serves
 * the passes' workspace. */
splat_status splat__cuda_plan_passes_ahead(const splat_plan *plan, splat__attn_passes_ahead *out);

/* The device side of a plan of a CUDA context (plan->ctx->cuda): uploads the ACSR and
 * tile plan, generates, compiles and loads the kernels; the attention's passes taken from
 * `ahead` where it holds them (else NULL or empty; the caller frees it). Never called for
 * CPU plans. */
splat_status splat__cuda_plan_create(splat_plan *plan, splat__attn_passes_ahead *ahead,
                                     splat__cuda_plan **out);
void splat__cuda_plan_destroy(splat__cuda_plan *p);

/* The operations: same arguments as splat__cpu_* plus the stream; tensors in device
 * memory. Never synchronise; the attention of a two-pass or split plan takes its workspace
 * from the context's pool on the stream and gives it back there (workspace.h), nothing else
 * allocates. */
splat_status splat__cuda_sddmm(const splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                               double scale, const splat_tensor *scores, splat_stream stream);
splat_status splat__cuda_softmax(const splat_plan *plan, const splat_tensor *scores, double scale,
                                 const splat_tensor *probs, const splat_tensor *lse,
                                 splat_stream stream);
splat_status splat__cuda_spmm(const splat_plan *plan, const splat_tensor *probs,
                              const splat_tensor *v, const splat_tensor *out, splat_stream stream);
splat_status splat__cuda_attention(const splat_plan *plan, const splat_tensor *q,
                                   const splat_tensor *k, const splat_tensor *v, double scale,
                                   const splat_tensor *out, const splat_tensor *lse,
                                   splat_stream stream);

#endif
