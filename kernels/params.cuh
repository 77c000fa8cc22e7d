/* params.cuh — the parameter structs of splat's kernels and the constants the host needs
 * from them, defined once and shared by the host (C11, included from the C files of
 * src/cuda) and the device (NVRTC, no host headers).
 * Kernels take their struct by value. Pointers are device addresses; strides count
 * elements. Tensor index order is [batch, heads, seq, dim]; values are
 * [batch, heads, seq_q, W]. Keep every struct free of padding surprises: 8-byte
 * members first, then 4-byte members. */
#ifndef SPLAT_KERNELS_PARAMS_CUH
#define SPLAT_KERNELS_PARAMS_CUH

#ifdef __CUDACC_RTC__
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
#include <stdint.h>
#endif

/* Functions shared by the host (C11) and the device (NVRTC): tma_view.cuh, seg_interval.cuh. */
#if defined(__CUDACC_RTC__)
#define SPLAT_HOST_DEV __device__ __forceinline__
#elif defined(__CUDACC__)
#define SPLAT_HOST_DEV static __host__ __device__ __forceinline__
#else
#define SPLAT_HOST_DEV static inline
#endif

/* A CUtensorMap (cuda.h) without host headers: 128 opaque bytes, 64-byte aligned. The
 * host encodes it (cuTensorMapEncodeTiled, src/cuda/tma_views.c); a kernel reads it in
 * place from its __grid_constant__ parameter (kernels/wgmma.cuh, the TMA wrappers). */
#ifdef __cplusplus
#define SPLAT_ALIGN64 alignas(64)
#else
#define SPLAT_ALIGN64 _Alignas(64)
#endif
typedef struct splat_tensor_map {
  SPLAT_ALIGN64 uint64_t opaque[16];
} splat_tensor_map;

/* TMA views per plan: distinct (stride, width) key groups loaded by tensor maps. */
#define SPLAT_TMA_VIEWS 4

/* One key run of the tile plan as the device reads it (tile_plan.h's splat__key_run):
 * gathered indices [base, base + ntiles * tile_k) of the group (phase, stride, width),
 * key(g) = phase + (g / width) * stride + g % width. */
typedef struct splat_dev_run {
  int32_t phase, stride, width;
  int32_t base, ntiles, predicate;
  /* The TMA view of the group (the plan's views, src/cuda/tma_views.h): the index of the
   * tensor maps that load this run's sub-tiles, or -1 (gathered by cp.async). */
  int32_t view;
  /* The warp-specialised attention kernel's interval table of a predicated run (the
   * plan's tables: index of the record of the item's first row block, row block b at
   * table + b; src/cuda/ws_tables.h), or -1. */
  int32_t table;
} splat_dev_run;

/* A record of the warp-specialised attention kernel's interval tables (one per query tile,
 * row block of tq rows and key group of a predicated run; built at plan time by
 * src/cuda/ws_tables.c, copied into shared memory with the run's first sub-tile): each
 * row's intervals of the group (tq x segs splat_ival of 16 bytes, attention_ws.cuh), the
 * span of every 32 rows (tq / 32 x 16 bytes: lo, hi, full_lo, full_hi), each row's
 * interval count (tq x 4 bytes). A multiple of 16 bytes, as a bulk copy needs. */
#define SPLAT_WS_TABLE_SPAN_OFF(tq, segs) ((tq) * (segs)*16)
#define SPLAT_WS_TABLE_NIV_OFF(tq, segs) (SPLAT_WS_TABLE_SPAN_OFF(tq, segs) + (tq) / 32 * 16)
#define SPLAT_WS_TABLE_BYTES(tq, segs) (SPLAT_WS_TABLE_NIV_OFF(tq, segs) + (tq)*4)

/* One query tile: permuted positions [row_begin, row_begin + nrows), key runs
 * [run_begin, run_begin + nruns). */
typedef struct splat_dev_tile {
  int32_t row_begin, nrows, run_begin, nruns;
} splat_dev_tile;

/* The pattern as the device sees it (uploaded once at plan creation). */
typedef struct splat_dev_pattern {
  const int64_t *row_seg;  /* [seq_q + 1] segment offsets per original row */
  const int32_t *segs;     /* [nsegs * 4] (start, stride, count, width) */
  const int64_t *rem_row;  /* [seq_q + 1] remainder CSR row offsets */
  const int32_t *rem_cols; /* [rem_nnz] remainder columns */
  const int32_t *perm;     /* [seq_q] original row of each permuted position */
  const splat_dev_tile *tiles;
  const splat_dev_run *runs;
  /* Fused attention with split tiles (else NULL): per tile, the workspace slot its partial
   * result goes to, or -1 (a whole tile, written directly); and the split tiles to merge,
   * [nmerge] x (row_begin, nrows, first slot, slots). */
  const int32_t *slots;
  const int32_t *merge;
  /* The warp-specialised attention kernel's interval tables (records of
   * SPLAT_WS_TABLE_BYTES, splat_dev_run.table), or NULL. */
  const unsigned char *tables;
  int64_t seq_q, seq_k;
  /* Q by TMA (the sm_90a warp-specialised kernel): the row stride qstride of the plan's
   * query tiles (an item's rows q0, q0 + qstride, ...; 1: consecutive rows) and the rows
   * its view covers, qcover = qstride x floor(seq_q / qstride) (src/cuda/tma_views.c
   * splat__tma_q_view). */
  int32_t qstride, qcover;
} splat_dev_pattern;

/* A 4-d strided tensor view. */
typedef struct splat_dev_tensor {
  void *data;
  int64_t s0, s1, s2, s3;
} splat_dev_tensor;

/* Shared by all ops: batch, heads and the rows a row kernel walks. */
typedef struct splat_dev_shape {
  int64_t batch, heads;
  int32_t heads_per_kv; /* heads / heads_kv (GQA) */
  int32_t head_dim;
  int32_t row_begin; /* row kernels: permuted positions [row_begin, row_begin + row_count) */
  int32_t row_count;
} splat_dev_shape;

/* scores = scale * Q K^T sampled at the mask. */
typedef struct splat_sddmm_params {
  splat_dev_pattern pat;
  splat_dev_tensor q, k, scores;
  splat_dev_shape shape;
  float scale;
  int32_t row_width; /* W, the scores' last dimension */
} splat_sddmm_params;

/* Chunks (16 bytes) of a row each lane keeps in registers on the softmax's register path
 * (kernels/softmax.cuh; rows up to 32 x SPLAT_SM_RC chunks: 768 f32 or 1536 16-bit
 * entries; longer rows stream). The host's launch picks its grid by it (cuda_backend.c). */
#define SPLAT_SM_RC 6

/* probs = softmax(scale * scores) per row; lse optional (data NULL). */
typedef struct splat_softmax_params {
  splat_dev_pattern pat;
  splat_dev_tensor scores, probs, lse;
  splat_dev_shape shape;
  float scale_log2; /* scale * log2(e) */
  float scale;
} splat_softmax_params;

/* out = probs V. */
typedef struct splat_spmm_params {
  splat_dev_pattern pat;
  splat_dev_tensor probs, v, out;
  splat_dev_shape shape;
} splat_spmm_params;

/* out = softmax(scale * Q K^T) V under the mask; lse optional. part: the workspace of
 * split tiles (NULL without), [slots][batch * heads][part_rows][head_dim + 2] fp32: a
 * chunk's unnormalised O, then its running max m (base 2) and sum l per row. kmap, vmap:
 * the tensor maps of K and V for each TMA view of the plan (sm_90a kernel), valid when
 * tma is 1 (else every key sub-tile is gathered); qmap[i], Q's, seen with the row stride of
 * the pattern the kernel runs (pat.qstride; [0] one-pass plans and pass 1, [1] pass 2),
 * valid when bit i of qtma is set (else every item's Q rows are gathered). Two-pass plans
 * (tile_plan.h splat__tile_plan_passes): pass 1's kernel leaves each row's unnormalised O,
 * m and l in rowpart ([batch * heads][seq_q] rows of SPLAT_ROWPART_BYTES, by original row)
 * instead of writing out; pass 2's kernel merges them into its own result (SPLAT_EPI_*). */
typedef struct splat_attention_params {
  splat_tensor_map kmap[SPLAT_TMA_VIEWS], vmap[SPLAT_TMA_VIEWS];
  splat_tensor_map qmap[2]; /* Q as rows of stride pat.qstride (qtma bit i) */
  splat_dev_pattern pat;
  splat_dev_tensor q, k, v, out, lse;
  float *part;
  unsigned char *rowpart;
  int64_t work; /* warp-specialised kernel: work items (tiles x row blocks x batch*heads) */
  splat_dev_shape shape;
  float scale_log2; /* scale * log2(e) */
  float scale;
  int32_t part_rows; /* the launched pattern's tile_q (each pass's own): its work items per
                      * query tile, and the split workspace's rows per slot */
  int32_t tma, qtma;
} splat_attention_params;

/* Bytes per row of a two-pass plan's workspace rowpart: pass 1's unnormalised O, then its
 * m and l (and a unit) as floats, padded to whole 32-byte sectors. `half` (bf16 plans): O as
 * fp16 of O / unit, unit a power of two scaling the row's max |O| into fp16's top binades
 * (attention_common.cuh splat_attn_row_scale): fp16 keeps 3 bits more than the bf16 output,
 * so the merge adds at most 1/16 of an output rounding step to elements down to 2^-28 of
 * the row's max (O in bf16 added up to a whole one: bench/NOTES.md v10); else O as floats. */
#define SPLAT_ROWPART_BYTES(head_dim, half) \
  ((half) ? ((head_dim)*2 + 16 + 31) / 32 * 32 : ((head_dim) + 2 + 7) / 8 * 8 * 4)

/* The epilogues of the fused attention tile kernels (prelude SPLAT_ATTN_EPI, kgen.h
 * splat__kspec.epi): each kernel is compiled for one, so it carries no other's code. */
#define SPLAT_EPI_PLAIN 0 /* one pass, no split tiles: O and lse to the outputs */
#define SPLAT_EPI_SPLIT 1 /* one pass; chunks of split tiles leave partial results in part */
#define SPLAT_EPI_PASS1 2 /* pass 1 of two: every row's partial result to rowpart */
#define SPLAT_EPI_PASS2 3 /* pass 2 of two: merges rowpart into its result, then the outputs */

#endif
