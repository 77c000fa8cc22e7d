/* tma_view.cuh — which keys a TMA view's box loads, shared by the device (the producer of
 * attention_ws.cuh) and the host (C11: tests/test_cuda_runtime.c checks it against the
 * gather's definition of a group's keys). The view of key group (phase p, stride d,
 * width w) sees K as {D, d, seq_k / d, heads_kv, batch}; a 64-key sub-tile starting at
 * gathered index g0 (a multiple of w) is the box {64, w, 64 / w} at (0, p, g0 / w): its
 * row kk holds key p + kk % w + d (g0 / w + kk / w), zero-filled where the third
 * coordinate reaches seq_k / d. */
#ifndef SPLAT_KERNELS_TMA_VIEW_CUH
#define SPLAT_KERNELS_TMA_VIEW_CUH

#include "params.cuh"

#define SPLAT_TMA_BOX 64 /* keys a TMA box holds (a view's box: {64, w, 64 / w}) */

/* Key of row kk of the box of sub-tile g0, and whether the box reads it (1) or zero-fills
 * it (0: third coordinate >= seq_k / d). */
SPLAT_HOST_DEV int64_t splat_tma_box_key(int32_t phase, int32_t stride, int32_t width, int32_t g0,
                                         int kk, int64_t seq_k, int *read) {
  const int64_t j = (int64_t)(g0 / width) + kk / width;
  *read = j < seq_k / stride;
  return (int64_t)phase + kk % width + (int64_t)stride * j;
}

/* Which sub-tiles of a key run the view's box serves, worked out once per run so the
 * producer's test per sub-tile is a multiply-add and two compares. Sub-tile ls (kt keys,
 * kt a multiple of w) starts at gathered index g0 = base + kt ls, a width-w piece when
 * base is (then g0 / w = base / w + (kt / w) ls); it is served when every key the box
 * zero-fills is past seq_k. With J = seq_k / d, the box zero-fills its rows of j >= J;
 * those of j > J hold keys >= d (J + 1) > seq_k, and those of j = J keys phase + i + d J,
 * past seq_k when phase >= seq_k - d J (`tail`). */
typedef struct splat_tma_run {
  int32_t j0, jstep, J; /* box coordinate of sub-tile 0, its step per sub-tile, seq_k / d */
  int32_t start, tail;  /* base starts a piece; the last piece's zero-filled keys are past seq_k */
} splat_tma_run;

SPLAT_HOST_DEV splat_tma_run splat_tma_run_of(int32_t phase, int32_t stride, int32_t width,
                                              int32_t base, int kt, int64_t seq_k) {
  splat_tma_run v;
  v.J = (int32_t)(seq_k / stride);
  v.j0 = base / width;
  v.jstep = kt / width;
  v.start = base % width == 0;
  v.tail = (int64_t)phase >= seq_k - (int64_t)stride * v.J;
  return v;
}

/* Whether sub-tile ls of the run is exactly the view's box, whose third coordinate is then
 * v.j0 + v.jstep ls. */
SPLAT_HOST_DEV int splat_tma_run_serves(splat_tma_run v, int32_t ls) {
  const int32_t j0 = v.j0 + v.jstep * ls;
  return v.start && (j0 + v.jstep <= v.J || j0 > v.J || v.tail);
}

#endif
