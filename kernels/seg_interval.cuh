/* seg_interval.cuh — where a row's segment lies among the gathered keys of a key group,
 * shared by the device (kernels/common.cuh, the interval tables the kernels build) and the
 * host (C11: src/cuda/ws_tables.c, those the warp-specialised attention kernel copies). */
#ifndef SPLAT_KERNELS_SEG_INTERVAL_CUH
#define SPLAT_KERNELS_SEG_INTERVAL_CUH

#include "params.cuh"

/* Segment {start st, stride sd, count cnt, width wd} (key start + stride t + i, t < count,
 * i < width; stride <= 1: contiguous) in group (phase, stride, width), whose gathered index
 * g is key phase + (g / width) stride + g % width: returns 1 with the segment's gathered
 * indices [*lo, *hi] when it belongs to the group (contiguous segments to (0, 1, 1)), else
 * 0. Mirrors the tile plan's mapping of segments to gathered indices. */
SPLAT_HOST_DEV int splat_seg_ival(int32_t st, int32_t sd, int32_t cnt, int32_t wd, int32_t phase,
                                  int32_t stride, int32_t width, int32_t *lo, int32_t *hi) {
  if (sd <= 1) {
    *lo = st;
    *hi = st + (cnt - 1) * sd + wd - 1;
    return stride == 1 && phase == 0 && width == 1;
  }
  *lo = (st / sd) * wd;
  *hi = *lo + cnt * wd - 1;
  return stride == sd && phase == st % sd && width == wd;
}

#endif
