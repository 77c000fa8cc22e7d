/* acsr.h — the generalised affine-compressed sparse row format: per row up to K
 * affine segments, plus an irregular remainder in CSR for rows that need more. */
#ifndef SPLAT_ANALYSIS_ACSR_H
#define SPLAT_ANALYSIS_ACSR_H

#include <stdint.h>

#include "pattern/pattern.h"

typedef struct splat__acsr {
  int64_t seq_q, seq_k;
  int max_segments;  /* K */
  int64_t nnz;       /* all mask elements */
  int64_t width;     /* the largest row nnz, at least 1 */
  int64_t row_width; /* W, the last dimension of values (splat__acsr_choose_row_width) */
  /* Segments of regular row i: segs[row_seg[i] .. row_seg[i+1]). Irregular rows have
   * an empty range here and their columns in the remainder. [seq_q + 1] */
  int64_t *row_seg;
  splat__segment *segs; /* [row_seg[seq_q]] */
  /* Irregular remainder (CSR): columns of row i are rem_cols[rem_row[i] .. rem_row[i+1]),
   * empty for regular rows. [seq_q + 1] and [rem_nnz] */
  int64_t *rem_row;
  int32_t *rem_cols;
  int64_t rem_nnz;
  int64_t rem_rows;
} splat__acsr;

/* Analyses a pattern into ACSR with at most max_segments (1..SPLAT_MAX_SEGMENTS)
 * segments per regular row. O(seq_q x K) for closed-form specs. */
splat_status splat__acsr_build(const splat_pattern *p, int max_segments, splat__acsr *out);
void splat__acsr_free(splat__acsr *a);
/* 1 when row i is in the irregular remainder. */
static inline int splat__acsr_row_irregular(const splat__acsr *a, int64_t i) {
  return a->rem_row[i + 1] > a->rem_row[i];
}
/* W, the last dimension of ACSR value tensors: the largest row nnz rounded up to the
 * residue modulo 16 under which the GPU R-SDDMM writes whole 32-byte sectors (row_width.c),
 * when that is at least SPLAT__ROUNDED_ROWS. splat__acsr_build sets a->row_width by it. */
#define SPLAT__ROUNDED_ROWS 128
int64_t splat__acsr_choose_row_width(const splat__acsr *a);
/* Number of columns of row i. */
int64_t splat__acsr_row_nnz(const splat__acsr *a, int64_t i);
/* Columns of row i in increasing order into out (room for a->width); returns count.
 * Entry k of ACSR values belongs to column out[k]. */
int64_t splat__acsr_row_columns(const splat__acsr *a, int64_t i, int32_t *out);

#endif
