/* plan.c — plan creation: validates the description, runs the analysis (ACSR, tile
 * plan, report) once, and keeps what the operations need. */
#include <stdlib.h>
#include <string.h>

#include "analysis/report.h"
#include "core/context.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "cuda/attn_passes.h"
#include "cuda/backend.h"
#include "cuda/kernel_cache.h"
#include "cuda/kgen.h"
#include "cuda/nvrtc.h"

#define DEFAULT_TILE 128
#define MAX_TILE 1024

static splat_status check_desc(const splat_plan_desc *d) {
  static const char *fn = "splat_plan_create";
  if (d->batch < 1 || d->batch > ((int64_t)1 << 31)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: batch=%lld must be in 1..2^31", fn,
                       (long long)d->batch);
  }
  if (d->heads < 1 || d->heads > 65536) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: heads=%lld must be in 1..65536", fn,
                       (long long)d->heads);
  }
  if (d->heads_kv < 0 || (d->heads_kv > 0 && d->heads % d->heads_kv != 0)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: heads_kv=%lld must divide heads=%lld (or be 0 for heads_kv = heads)",
                       fn, (long long)d->heads_kv, (long long)d->heads);
  }
  if (d->head_dim < 1 || d->head_dim > SPLAT_MAX_HEAD_DIM) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: head_dim=%lld must be in 1..%d", fn,
                       (long long)d->head_dim, SPLAT_MAX_HEAD_DIM);
  }
  if (!splat_dtype_name(d->dtype)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: dtype=%d is not a splat_dtype value", fn,
                       (int)d->dtype);
  }
  if (d->tile_q < 0 || d->tile_q > MAX_TILE || d->tile_k < 0 || d->tile_k > MAX_TILE) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: tile_q=%d, tile_k=%d: tile sizes must be in 1..%d (0 = %d)", fn,
                       d->tile_q, d->tile_k, MAX_TILE, DEFAULT_TILE);
  }
  if (d->ops & ~(unsigned)SPLAT_OPS_ALL) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: ops=0x%x has bits that are no SPLAT_OPS_* value (0x%x at most)", fn,
                       d->ops, (unsigned)SPLAT_OPS_ALL);
  }
  if (d->max_segments < 0 || d->max_segments > SPLAT_MAX_SEGMENTS) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: max_segments=%d must be in 0..%d", fn,
                       d->max_segments, SPLAT_MAX_SEGMENTS);
  }
  return SPLAT_OK;
}

/* Each tensor of the plan within 2^60 elements, so that element counts and offsets never
 * overflow int64 (a desc in range, 2^31 batches x 65536 heads, over 256 rows x head_dim
 * 256 would); run after the analysis, which sets the row width W. */
static splat_status check_sizes(const splat_plan *plan) {
  const splat_plan_desc *d = &plan->desc;
  const struct {
    const char *names, *rows, *cols;
    int64_t heads, nrows, ncols;
  } t[] = {
      {"q and out", "seq_q", "head_dim", d->heads, plan->seq_q, d->head_dim},
      {"k and v", "seq_k", "head_dim", d->heads_kv, plan->seq_k, d->head_dim},
      {"scores and probs", "seq_q", "row width W", d->heads, plan->seq_q, plan->acsr.row_width}};
  /* scores and probs only where the plan runs the unfused operations that take them */
  const size_t ntensors = sizeof t / sizeof t[0] - !(d->ops & SPLAT_OPS_UNFUSED);
  for (size_t i = 0; i < ntensors; i++) {
    const __int128 n = (__int128)d->batch * t[i].heads * t[i].nrows * t[i].ncols;
    if (n > (__int128)1 << 60) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "splat_plan_create: %s would have batch=%lld x heads=%lld x %s=%lld x "
                         "%s=%lld = %.3g elements; a tensor may have at most 2^60",
                         t[i].names, (long long)d->batch, (long long)t[i].heads, t[i].rows,
                         (long long)t[i].nrows, t[i].cols, (long long)t[i].ncols, (double)n);
    }
  }
  return SPLAT_OK;
}

/* The analysis's tile plans, built at once (core/parallel.h): the plan's [0] and its report;
 * the 192-row one a CUDA plan may take instead [1] (cuda/backend.h splat__cuda_plan_tile_rows);
 * the two passes a CUDA plan's fused attention may run [2] (splat__cuda_plan_passes_ahead:
 * they need not wait for the single plan they are weighed against; bench/NOTES.md v65). */
typedef struct tile_jobs {
  splat_plan *plan;
  splat__tile_plan *t192;
  splat__attn_passes_ahead *ahead;
} tile_jobs;

static splat_status build_tiles(void *arg, int i) {
  const tile_jobs *j = arg;
  splat_plan *plan = j->plan;
  /* The passes are built ahead on speculation: where that fails (out of memory), they are
   * not, and the plan builds them later only where it takes them (and fails there). */
  if (i == 2) {
    if (j->ahead) (void)splat__cuda_plan_passes_ahead(plan, j->ahead);
    return SPLAT_OK;
  }
  if (i == 1) {
    return j->t192 ? splat__tile_plan_build(&plan->acsr, 192, plan->desc.tile_k, j->t192)
                   : SPLAT_OK;
  }
  splat_status st =
      splat__tile_plan_build(&plan->acsr, plan->desc.tile_q, plan->desc.tile_k, &plan->tiles);
  return st == SPLAT_OK ? splat__report_build(&plan->acsr, &plan->tiles, &plan->report) : st;
}

/* Builds the analysis of a plan, the 192-row tile plan into *t192 unless t192 is NULL and
 * the passes into *ahead unless ahead is NULL; on failure everything built so far is freed.
 * plan_ms: the tile plans' wall time (the report's within it, built after the 128-row plan
 * while the others may still run). */
static splat_status analyse(splat_plan *plan, const splat_pattern *pattern, splat__tile_plan *t192,
                            splat__attn_passes_ahead *ahead) {
  double t0 = splat__now_ms();
  splat_status st = splat__acsr_build(pattern, plan->desc.max_segments, &plan->acsr);
  if (st != SPLAT_OK) return st;
  double t1 = splat__now_ms();
  tile_jobs jobs = {plan, t192, ahead};
  st = splat__parallel_run(build_tiles, &jobs, ahead ? 3 : t192 ? 2 : 1);
  double t2 = splat__now_ms();
  if (st != SPLAT_OK) {
    if (t192) splat__tile_plan_free(t192);
    if (ahead) splat__attn_passes_ahead_free(ahead);
    splat__tile_plan_free(&plan->tiles);
    splat__acsr_free(&plan->acsr);
    return st;
  }
  plan->report.analysis_ms = t1 - t0;
  plan->report.plan_ms = t2 - t1;
  return SPLAT_OK;
}

splat_status splat_plan_create(splat_context *ctx, const splat_pattern *pattern,
                               const splat_plan_desc *desc, splat_plan **out) {
  if (out) *out = NULL;
  if (!ctx) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_plan_create: ctx is NULL");
  if (!pattern || !desc || !out) {
    splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_plan_create: %s is NULL",
                !pattern ? "pattern"
                : !desc  ? "desc"
                         : "out");
    return splat__capture(ctx->error, SPLAT_ERR_INVALID_ARGUMENT);
  }
  splat_status st = check_desc(desc);
  if (st != SPLAT_OK) return splat__capture(ctx->error, st);
  /* Speculative builds below (the passes built ahead, cut 192-row tiles) may fail and be
   * given up; a plan created anyway leaves the thread's message as it found it. */
  char message_before[SPLAT__ERROR_CAP];
  splat__error_save(message_before);
  splat_plan *plan = calloc(1, sizeof *plan);
  if (!plan) {
    splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_plan_create: out of memory");
    return splat__capture(ctx->error, SPLAT_ERR_OUT_OF_MEMORY);
  }
  plan->ctx = ctx;
  plan->desc = *desc;
  if (!plan->desc.heads_kv) plan->desc.heads_kv = desc->heads;
  /* Query tiles left to splat: 128 rows (192 where SPLAT_ATTN_WARPGROUPS=3 asks for them,
   * kgen.h), which a CUDA plan may trade for 192 after the analysis (tile_rows.h). */
  plan->tile_q_left = !desc->tile_q;
  const int rows_left = plan->tile_q_left && ctx->backend == SPLAT_BACKEND_CUDA;
  if (!plan->desc.tile_q)
    plan->desc.tile_q = ctx->backend == SPLAT_BACKEND_CUDA
                            ? splat__kspec_default_tile_q(desc->dtype, desc->head_dim)
                            : DEFAULT_TILE;
  if (!plan->desc.tile_k) plan->desc.tile_k = DEFAULT_TILE;
  if (!plan->desc.max_segments) plan->desc.max_segments = SPLAT_MAX_SEGMENTS;
  if (!plan->desc.ops) plan->desc.ops = SPLAT_OPS_ALL;
  plan->seq_q = splat_pattern_seq_q(pattern);
  plan->seq_k = splat_pattern_seq_k(pattern);
  /* A CUDA plan's kernels need NVRTC's version (their cache keys name it): NVRTC is loaded
   * meanwhile unless the disk cache's stamp gives it (cuda/kernel_cache.h). */
  splat__nvrtc_prefetch nvrtc = {0};
  if (ctx->backend == SPLAT_BACKEND_CUDA && !splat__kernel_cache_version_known())
    splat__nvrtc_prefetch_begin(&nvrtc);
  splat__tile_plan t192;
  memset(&t192, 0, sizeof t192);
  const int rows192 =
      rows_left && plan->desc.tile_q == DEFAULT_TILE && splat__cuda_plan_tries_rows192(plan);
  splat__attn_passes_ahead ahead;
  memset(&ahead, 0, sizeof ahead);
  st = analyse(plan, pattern, rows192 ? &t192 : NULL,
               ctx->backend == SPLAT_BACKEND_CUDA ? &ahead : NULL);
  if (st != SPLAT_OK) {
    splat__nvrtc_prefetch_end(&nvrtc);
    free(plan);
    return splat__capture(ctx->error, st);
  }
  st = check_sizes(plan);
  if (st == SPLAT_OK && rows192) st = splat__cuda_plan_tile_rows(plan, &t192);
  splat__tile_plan_free(&t192);                             /* where check_sizes failed */
  if (st == SPLAT_OK && ctx->backend == SPLAT_BACKEND_CUDA) /* device metadata and kernels */
    st = splat__cuda_plan_create(plan, &ahead, &plan->cuda);
  splat__attn_passes_ahead_free(&ahead); /* what the plan did not take */
  splat__nvrtc_prefetch_end(&nvrtc);
  if (st != SPLAT_OK) {
    splat_plan_destroy(plan);
    return splat__capture(ctx->error, st);
  }
  splat__error_restore(message_before);
  *out = plan;
  return SPLAT_OK;
}

void splat_plan_destroy(splat_plan *plan) {
  if (!plan) return;
  splat__cuda_plan_destroy(plan->cuda);
  splat__tile_plan_free(&plan->tiles);
  splat__acsr_free(&plan->acsr);
  free(plan);
}

splat_status splat_plan_report(const splat_plan *plan, splat_report *out) {
  if (!plan || !out) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_plan_report: %s is NULL",
                       plan ? "out" : "plan");
  }
  *out = plan->report;
  return SPLAT_OK;
}

int64_t splat_plan_row_width(const splat_plan *plan) {
  return plan ? plan->acsr.row_width : 0;
}
