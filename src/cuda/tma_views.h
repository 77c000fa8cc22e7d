/* tma_views.h — the TMA views of a plan's key groups for the sm_90a fused attention
 * kernel (kernels/attention_wgmma.cuh): which key runs its producer loads with tensor
 * maps, and, per call, the maps of K and V themselves. A view serves every group of one
 * (stride d, width w): K [batch][heads_kv][seq_k][D] seen as {D, d, seq_k / d, heads_kv,
 * batch} with box {64, w, 64 / w}, so the 64 gathered keys of a sub-tile that starts a
 * width-w piece are one box at (panel, phase, piece); Q's views are those of the rows'
 * stride in the pattern's query tiles (1 where they are consecutive), width 1. Pure C
 * except the encode, which takes the driver's cuTensorMapEncodeTiled. */
#ifndef SPLAT_CUDA_TMA_VIEWS_H
#define SPLAT_CUDA_TMA_VIEWS_H

#include <stdint.h>

#include "../../kernels/params.cuh"
#include "analysis/tile_plan.h"
#include "cuda/cuda_types.h"
#include "splat.h"

typedef struct splat__tma_views {
  int n;
  int32_t stride[SPLAT_TMA_VIEWS], width[SPLAT_TMA_VIEWS];
} splat__tma_views;

/* Sets runs[i].view to the index of the view of its group, adding views in order of
 * first use up to SPLAT_TMA_VIEWS, or to -1 where the group has none: a group needs its
 * width w to divide 64, 0 <= phase and phase + w <= stride <= seq_k; groups past the first
 * SPLAT_TMA_VIEWS (stride, width) pairs get none. */
void splat__tma_views_assign(splat_dev_run *runs, int64_t nruns, int64_t seq_k,
                             splat__tma_views *out);

/* 1 when the views splat__tma_views_assign would give plan t's runs serve every 64-key box
 * of every run (kernels/tma_view.cuh splat_tma_run_serves): the warp-specialised kernel
 * then needs no gather of K and V (SPLAT_WS_GATHER 0) wherever the inputs take tensor maps. */
int splat__tma_serves_plan(const splat__tile_plan *t, int64_t seq_k);
/* The same for plan t's runs after plan `before`'s have taken their views (pass 2 of a
 * two-pass plan after pass 1: splat__tma_views_assign_passes gives pass 1's runs the first
 * views); NULL before: splat__tma_serves_plan. */
int splat__tma_serves_after(const splat__tile_plan *before, const splat__tile_plan *t,
                            int64_t seq_k);

/* The views of a two-pass plan: over the runs of the passes the warp-specialised kernel
 * runs (ws[k] nonzero), pass 1's nruns[0] runs followed by pass 2's nruns[1] in `runs`; the
 * runs of a pass on another kernel (the mma.sync kernel) are left as they are and take no
 * view slot. */
void splat__tma_views_assign_passes(splat_dev_run *runs, const int64_t nruns[2], const int ws[2],
                                    int64_t seq_k, splat__tma_views *out);

/* Fills prm->kmap and prm->vmap for each view from K and V (f16 or bf16, [batch,
 * heads_kv, seq_k, head_dim] with unit last stride, 16-byte aligned data and strides; the
 * tile kernel's layout) and sets prm->tma = 1; sets it to 0 (every sub-tile gathered)
 * when there are no views, no encoder, or the driver refuses a map. */
void splat__tma_views_encode(const splat__tma_views *views, splat__tma_encode_fn encode,
                             const splat_tensor *k, const splat_tensor *v, int64_t batch,
                             int64_t heads_kv, int64_t seq_k, int64_t head_dim,
                             splat_attention_params *prm);

/* Fills prm->qmap[i] from Q (as K above, [batch, heads, seq_q, head_dim]) as the view of
 * stride qstride[i], width 1: box {64, 1, 64}, 64 rows qstride apart of a 64-column panel,
 * which the kernel loads for items whose rows step so (i: 0 for one-pass plans and pass
 * 1, 1 for pass 2; kernels/params.cuh); sets bit i of prm->qtma for each map encoded,
 * none (every item's Q gathered) without an encoder, for a stride below 1, or where the
 * driver refuses the map. */
void splat__tma_q_encode(splat__tma_encode_fn encode, const splat_tensor *q, int64_t batch,
                         int64_t heads, int64_t seq_q, int64_t head_dim, const int32_t qstride[2],
                         splat_attention_params *prm);

/* The row stride of plan t's query tiles for Q by TMA (kernels/params.cuh pat->qstride,
 * pat->qcover): of the strides by which some tile's rows step evenly (tiles of two or more
 * rows, in the plan's row order), the one covering the most rows; 1 without a permutation
 * or such a tile. One stride per pattern: the kernel checks each item's rows against it
 * and gathers those of other strides. */
void splat__tma_q_view(const splat__tile_plan *t, int64_t seq_q, splat_dev_pattern *pat);

/* SPLAT_ATTN_TMA: 1 (the default, also when unset or empty) loads key sub-tiles through
 * the views; 0 gathers every one by cp.async (a cross-check of the two paths); anything
 * else is SPLAT_ERR_INVALID_ARGUMENT with a sentence. */
splat_status splat__tma_env(int *on);

#endif
