/* context.h — the structures behind the context and plan handles. */
#ifndef SPLAT_CORE_CONTEXT_H
#define SPLAT_CORE_CONTEXT_H

#include "analysis/acsr.h"
#include "analysis/tile_plan.h"
#include "core/error.h"

/* CUDA backend state (src/cuda/backend.h); NULL on CPU contexts and plans. */
typedef struct splat__cuda_context splat__cuda_context;
typedef struct splat__cuda_plan splat__cuda_plan;

struct splat_context {
  splat_backend backend; /* CPU or CUDA, never AUTO */
  int device;
  int num_threads;
  splat__cuda_context *cuda; /* CUDA contexts only */
  char error[SPLAT__ERROR_CAP];
};

struct splat_plan {
  splat_context *ctx;
  splat_plan_desc desc; /* with defaults filled in */
  int tile_q_left;      /* desc.tile_q was 0: splat chooses the query tiles (cuda/tile_rows.h) */
  int64_t seq_q, seq_k;
  splat__acsr acsr;
  splat__tile_plan tiles;
  splat_report report;
  splat__cuda_plan *cuda; /* CUDA plans only: device metadata and kernels */
};

#endif
