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
/* W, the last dimension of ACSR value tensors (a->row_width): the largest row nnz, rounded
 * up to a multiple of 16 from SPLAT__ROUNDED_ROWS on, so that rows of contiguous 16-bit
 * values start on 32-byte sectors and no two rows share one (docs/format.md "Row width";
 * bench/NOTES.md v16). Shorter rows keep the largest nnz (rounding would cost up to 15 / W
 * of the memory). */
#define SPLAT__ROUNDED_ROWS 128
static inline int64_t splat__acsr_choose_row_width(int64_t max_row_nnz) {
  return max_row_nnz < SPLAT__ROUNDED_ROWS ? max_row_nnz : (max_row_nnz + 15) / 16 * 16;
}
/* The bytes a's arrays take. */
double splat__acsr_bytes(const splat__acsr *a);
/* Bytes of this machine's physical memory, or 0 if unknown: the analysis refuses, with
 * SPLAT_ERR_OUT_OF_MEMORY, work whose arrays cannot fit in it (the kernel would grant the
 * allocations and end the process later). */
double splat__physical_memory(void);
/* Number of columns of row i. */
int64_t splat__acsr_row_nnz(const splat__acsr *a, int64_t i);
/* Columns of row i in increasing order into out (room for a->width); returns count.
 * Entry k of ACSR values belongs to column out[k]. */
int64_t splat__acsr_row_columns(const splat__acsr *a, int64_t i, int32_t *out);

#endif
