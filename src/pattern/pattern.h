/* pattern.h — internal view of a pattern: an expression tree over closed-form specs
 * and explicit masks, evaluated one row at a time into affine segments or bits. */
#ifndef SPLAT_PATTERN_PATTERN_H
#define SPLAT_PATTERN_PATTERN_H

#include <stdint.h>

#include "splat.h"

/* An affine segment: the columns start + t*stride + u for 0 <= t < count and
 * 0 <= u < width (count runs of `width` consecutive columns, run starts `stride`
 * apart). Canonical forms, which every producer emits:
 *  - contiguous range [a, a+L):      {a, 1, L, 1}
 *  - arithmetic progression, d > 1:  {o, d, n, 1} with n >= 2
 *  - runs of width w, 1 < w < d:     {o, d, n, w} with n >= 2
 * A single column is the contiguous range {a, 1, 1, 1}. count >= 1 always. */
typedef struct splat__segment {
  int32_t start;
  int32_t stride;
  int32_t count;
  int32_t width;
} splat__segment;

/* Number of columns of a segment. */
static inline int64_t splat__segment_nnz(splat__segment s) {
  return (int64_t)s.count * s.width;
}
/* Last column of a segment. */
static inline int64_t splat__segment_last(splat__segment s) {
  return (int64_t)s.start + (int64_t)(s.count - 1) * s.stride + s.width - 1;
}
/* 1 when column j belongs to the segment. */
int splat__segment_contains(splat__segment s, int64_t j);

/* Evaluates rows of one pattern. Holds the scratch space row evaluation needs, so
 * evaluation allocates nothing; one evaluator per thread. */
typedef struct splat__row_eval splat__row_eval;

splat_status splat__row_eval_create(const splat_pattern *p, splat__row_eval **out);
void splat__row_eval_destroy(splat__row_eval *e);

/* Row i as segments sorted by start whose spans [start, last] are disjoint and
 * increasing, in canonical form. Returns the count (0..cap), or -1 when the row
 * needs more than cap segments. */
int splat__row_segments(splat__row_eval *e, int64_t i, splat__segment *out, int cap);
/* The rows that repeat row i's segments (as splat__row_segments gives them): returns
 * the last one, r (i <= r < seq_q), with *shift = 0 when rows i..r have exactly row i's
 * segments, 1 when each row q has them moved right by q - i columns. O(nodes). */
int64_t splat__row_run(const splat__row_eval *e, int64_t i, int *shift);
/* Row i's columns in increasing order into out (room for seq_k); returns the count. */
int64_t splat__row_columns(splat__row_eval *e, int64_t i, int32_t *out);

/* Largest sequence length a pattern may have (columns are stored as int32). */
#define SPLAT__MAX_SEQ ((int64_t)1 << 30)

#endif
