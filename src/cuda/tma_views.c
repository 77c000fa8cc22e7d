/* tma_views.c — TMA views of key groups and their tensor maps (tma_views.h). */
#include "cuda/tma_views.h"

#include <stdlib.h>
#include <string.h>

#include "../../kernels/tma_view.cuh"
#include "core/env.h"
#include "core/error.h"

/* cuda.h's CUtensorMapDataType, CUtensorMapSwizzle and CUtensorMapL2promotion values. */
enum { TMA_F16 = 6, TMA_BF16 = 9, TMA_SWIZZLE_128B = 3, TMA_L2_256B = 3 };

/* The view of group (stride d, width w, phase) in `views`, added where it is new and a
 * slot is left; -1 where the group has none (tma_views.h: the rule). */
static int view_of(splat__tma_views *views, int32_t d, int32_t w, int32_t phase, int64_t seq_k) {
  const int fits =
      d >= 1 && d <= seq_k && w >= 1 && 64 % w == 0 && phase >= 0 && (int64_t)phase + w <= d;
  if (!fits) return -1;
  int v = 0;
  while (v < views->n && (views->stride[v] != d || views->width[v] != w)) v++;
  if (v == views->n) {
    if (views->n == SPLAT_TMA_VIEWS) return -1;
    views->stride[v] = d;
    views->width[v] = w;
    views->n++;
  }
  return v;
}

void splat__tma_views_assign(splat_dev_run *runs, int64_t nruns, int64_t seq_k,
                             splat__tma_views *out) {
  memset(out, 0, sizeof *out);
  for (int64_t i = 0; i < nruns; i++)
    runs[i].view = view_of(out, runs[i].stride, runs[i].width, runs[i].phase, seq_k);
}

int splat__tma_serves_after(const splat__tile_plan *before, const splat__tile_plan *t,
                            int64_t seq_k) {
  splat__tma_views views;
  memset(&views, 0, sizeof views);
  if (t->tile_k % SPLAT_TMA_BOX || t->nruns == 0) return 0; /* no runs: no views, no maps */
  for (int64_t i = 0; before && i < before->nruns; i++) {
    const splat__key_group *g = &before->runs[i].group;
    (void)view_of(&views, g->stride, g->width, g->phase, seq_k);
  }
  const int32_t boxes = t->tile_k / SPLAT_TMA_BOX; /* a key tile's */
  for (int64_t i = 0; i < t->nruns; i++) {
    const splat__key_run *r = &t->runs[i];
    const splat__key_group *g = &r->group;
    if (view_of(&views, g->stride, g->width, g->phase, seq_k) < 0) return 0;
    const splat_tma_run v =
        splat_tma_run_of(g->phase, g->stride, g->width, r->base, SPLAT_TMA_BOX, seq_k);
    for (int32_t b = 0; b < r->ntiles * boxes; b++)
      if (!splat_tma_run_serves(v, b)) return 0;
  }
  return 1;
}

int splat__tma_serves_plan(const splat__tile_plan *t, int64_t seq_k) {
  return splat__tma_serves_after(NULL, t, seq_k);
}

void splat__tma_views_assign_passes(splat_dev_run *runs, const int64_t nruns[2], const int ws[2],
                                    int64_t seq_k, splat__tma_views *out) {
  splat__tma_views_assign(ws[0] ? runs : runs + nruns[0],
                          (ws[0] ? nruns[0] : 0) + (ws[1] ? nruns[1] : 0), seq_k, out);
}

/* The map of one view over tensor t: {D, d, seq_k / d, heads_kv, batch}, box
 * {64, w, 64 / w, 1, 1}. Byte strides of dims 1..4: row, d rows, head, batch (a dim of
 * extent 1 gets the span below it, any stride being valid there). */
static int encode_one(splat__tma_encode_fn encode, splat_tensor_map *map, const splat_tensor *t,
                      int32_t d, int32_t w, int64_t batch, int64_t heads_kv, int64_t seq_k,
                      int64_t head_dim) {
  if (d < 1 || seq_k / d < 1 || w < 1 || 64 % w != 0) return 0;
  const unsigned long long esz = 2;
  const unsigned long long dims[5] = {(unsigned long long)head_dim, (unsigned long long)d,
                                      (unsigned long long)(seq_k / d), (unsigned long long)heads_kv,
                                      (unsigned long long)batch};
  unsigned long long strides[4] = {(unsigned long long)t->strides[2] * esz,
                                   (unsigned long long)t->strides[2] * esz * (unsigned long long)d,
                                   (unsigned long long)t->strides[1] * esz,
                                   (unsigned long long)t->strides[0] * esz};
  for (int i = 2; i < 4; i++) {
    if (dims[i + 1] == 1) strides[i] = strides[i - 1] * dims[i];
  }
  const unsigned box[5] = {64, (unsigned)w, (unsigned)(64 / w), 1, 1};
  const unsigned ones[5] = {1, 1, 1, 1, 1};
  const int dtype = t->dtype == SPLAT_F16 ? TMA_F16 : TMA_BF16;
  return encode(map, dtype, 5, t->data, dims, strides, box, ones, 0, TMA_SWIZZLE_128B, TMA_L2_256B,
                0) == CUDA_SUCCESS;
}

void splat__tma_views_encode(const splat__tma_views *views, splat__tma_encode_fn encode,
                             const splat_tensor *k, const splat_tensor *v, int64_t batch,
                             int64_t heads_kv, int64_t seq_k, int64_t head_dim,
                             splat_attention_params *prm) {
  prm->tma = 0;
  if (!encode || views->n == 0) return;
  for (int i = 0; i < views->n; i++) {
    const int32_t d = views->stride[i], w = views->width[i];
    if (!encode_one(encode, &prm->kmap[i], k, d, w, batch, heads_kv, seq_k, head_dim) ||
        !encode_one(encode, &prm->vmap[i], v, d, w, batch, heads_kv, seq_k, head_dim))
      return;
  }
  prm->tma = 1;
}

void splat__tma_q_encode(splat__tma_encode_fn encode, const splat_tensor *q, int64_t batch,
                         int64_t heads, int64_t seq_q, int64_t head_dim, const int32_t qstride[2],
                         splat_attention_params *prm) {
  prm->qtma = 0;
  for (int i = 0; i < 2 && encode; i++) {
    if (qstride[i] >= 1 &&
        encode_one(encode, &prm->qmap[i], q, qstride[i], 1, batch, heads, seq_q, head_dim))
      prm->qtma |= 1 << i;
  }
}

void splat__tma_q_view(const splat__tile_plan *t, int64_t seq_q, splat_dev_pattern *pat) {
  enum { STRIDES = 8 }; /* distinct strides counted; past them, not candidates */
  int32_t step[STRIDES];
  int64_t rows[STRIDES];
  int n = 0;
  for (int64_t i = 0; t->perm && i < t->ntiles; i++) {
    const splat__query_tile *q = &t->tiles[i];
    if (q->nrows < 2) continue;
    const int32_t *r = t->perm + q->row_begin, d = r[1] - r[0];
    int even = d >= 1;
    for (int32_t j = 2; j < q->nrows && even; j++) even = r[j] - r[j - 1] == d;
    if (!even) continue;
    int c = 0;
    while (c < n && step[c] != d) c++;
    if (c == n) {
      if (n == STRIDES) continue;
      step[n] = d;
      rows[n++] = 0;
    }
    rows[c] += q->nrows;
  }
  int32_t best = 1;
  int64_t most = 0;
  for (int c = 0; c < n; c++) {
    if (rows[c] > most) {
      most = rows[c];
      best = step[c];
    }
  }
  pat->qstride = best;
  pat->qcover = (int32_t)(seq_q / best * best);
}

splat_status splat__tma_env(int *on) {
  return splat__env_switch("SPLAT_ATTN_TMA",
                           "key sub-tiles of the sm_90a fused attention loaded by TMA where their "
                           "group allows, and Q where an item's rows step evenly",
                           "all gathered by cp.async", on);
}
