/* report.c — the statistics of an analysis: sizes, segment histogram, metadata bytes
 * of ACSR against CSR and 128x128 block-sparse, and the tile plan's work and waste.
 * Non-empty 128x128 blocks are counted exactly in O(segments + block columns touched). */
#include "analysis/report.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/timer.h"

#define BSR 128

/* Marks block columns [lo, hi] in the current block row; counts the new ones. */
static inline void mark_span(int64_t *stamp, int64_t cur, int64_t lo, int64_t hi, int64_t *n) {
  for (int64_t c = lo; c <= hi; c++) {
    if (stamp[c] != cur) {
      stamp[c] = cur;
      (*n)++;
    }
  }
}

/* Exact count of non-empty BSR x BSR blocks. Per block row, each segment marks the
 * block columns it touches: a segment of stride < BSR touches every block of its span
 * (its gaps are shorter than a block), a longer stride marks its runs one by one.
 * Identical marks of neighbouring rows (same segment slot) are skipped. */
static int64_t count_bsr_blocks(const splat__acsr *a, int64_t *stamp) {
  const int K = a->max_segments;
  int64_t blocks = 0;
  const int64_t block_rows = (a->seq_q + BSR - 1) / BSR;
  for (int64_t br = 0; br < block_rows; br++) {
    const int64_t cur = br + 1;
    int64_t prev[SPLAT_MAX_SEGMENTS][4];
    for (int k = 0; k < K && k < SPLAT_MAX_SEGMENTS; k++) prev[k][0] = -1;
    const int64_t r1 = (br + 1) * BSR < a->seq_q ? (br + 1) * BSR : a->seq_q;
    for (int64_t i = br * BSR; i < r1; i++) {
      if (splat__acsr_row_irregular(a, i)) {
        for (int64_t q = a->rem_row[i]; q < a->rem_row[i + 1]; q++) {
          const int64_t c = a->rem_cols[q] / BSR;
          if (stamp[c] != cur) {
            stamp[c] = cur;
            blocks++;
          }
        }
        continue;
      }
      const int64_t s0 = a->row_seg[i];
      const int ns = (int)(a->row_seg[i + 1] - s0);
      for (int k = 0; k < ns; k++) {
        const splat__segment s = a->segs[s0 + k];
        int64_t key[4];
        const int small = s.stride < BSR || s.count == 1;
        if (small) {
          key[0] = 0, key[1] = s.start / BSR, key[2] = splat__segment_last(s) / BSR, key[3] = 0;
        } else if (s.stride % BSR == 0) {
          /* Every run sits at the same offset in its block: the marks depend on the
           * first run's blocks, the stride and the count only. */
          key[0] = 1, key[1] = s.start / BSR;
          key[2] = ((s.start % BSR) + s.width - 1) / BSR;
          key[3] = ((int64_t)s.count << 32) | (uint32_t)s.stride;
        } else {
          key[0] = 2, key[1] = s.start, key[2] = s.width;
          key[3] = ((int64_t)s.count << 32) | (uint32_t)s.stride;
        }
        if (k < SPLAT_MAX_SEGMENTS && prev[k][0] == key[0] && prev[k][1] == key[1] &&
            prev[k][2] == key[2] && prev[k][3] == key[3])
          continue;
        if (k < SPLAT_MAX_SEGMENTS) memcpy(prev[k], key, sizeof key);
        if (small) {
          mark_span(stamp, cur, key[1], key[2], &blocks);
        } else {
          for (int64_t t = 0; t < s.count; t++) {
            const int64_t run = s.start + t * (int64_t)s.stride;
            mark_span(stamp, cur, run / BSR, (run + s.width - 1) / BSR, &blocks);
          }
        }
      }
    }
  }
  return blocks;
}

splat_status splat__report_build(const splat__acsr *a, const splat__tile_plan *t,
                                 splat_report *out) {
  if (!a || !t || !out)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "report: %s is NULL",
                       !a   ? "acsr"
                       : !t ? "tile plan"
                            : "out");
  const double t0 = splat__now_ms();
  /* Built in a local copy: out's analysis_ms and plan_ms are left as they are. */
  splat_report r;
  memset(&r, 0, sizeof r);
  splat_report *const rep = &r;

  const int64_t seq_q = a->seq_q, seq_k = a->seq_k;
  const int K = a->max_segments;
  rep->seq_q = seq_q;
  rep->seq_k = seq_k;
  rep->nnz = a->nnz;
  rep->density = seq_q > 0 && seq_k > 0 ? (double)a->nnz / ((double)seq_q * (double)seq_k) : 0.0;
  rep->max_row_nnz = a->nnz > 0 ? a->width : 0; /* a->width is at least 1 */
  rep->row_width = a->row_width;
  rep->max_segments = K;
  for (int64_t i = 0; i < seq_q; i++) {
    if (splat__acsr_row_irregular(a, i)) {
      rep->rows_by_segments[K + 1]++;
    } else {
      const int64_t ns = a->row_seg[i + 1] - a->row_seg[i];
      rep->rows_by_segments[ns <= K ? ns : K]++;
    }
  }
  rep->segments = seq_q > 0 ? a->row_seg[seq_q] : 0;
  rep->regular_nnz = a->nnz - a->rem_nnz;
  rep->regular_fraction = a->nnz > 0 ? (double)rep->regular_nnz / (double)a->nnz : 1.0;
  rep->irregular_rows = a->rem_rows;
  rep->acsr_bytes = (seq_q + 1) * 4 + rep->segments * 16;
  if (a->rem_rows > 0) rep->acsr_bytes += (seq_q + 1) * 4 + a->rem_nnz * 4;
  rep->csr_bytes = (seq_q + 1 + a->nnz) * 4;

  const int64_t block_rows = (seq_q + BSR - 1) / BSR, block_cols = (seq_k + BSR - 1) / BSR;
  int64_t *stamp = calloc((size_t)(block_cols > 0 ? block_cols : 1), sizeof *stamp);
  if (!stamp) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "report: out of memory");
  rep->bsr_blocks = count_bsr_blocks(a, stamp);
  free(stamp);
  rep->bsr_bytes = (block_rows + 1 + rep->bsr_blocks) * 4;

  rep->tile_q = t->tile_q;
  rep->tile_k = t->tile_k;
  rep->rows_permuted = t->permuted;
  rep->tile_rows_max = splat__tile_plan_max_rows(t);
  rep->query_tiles = t->ntiles;
  rep->key_runs = t->nruns;
  rep->full_tiles = t->full_tiles;
  rep->predicated_tiles = t->predicated_tiles;
  rep->computed = t->computed;
  rep->tile_waste = rep->regular_nnz > 0 ? (double)t->computed / (double)rep->regular_nnz : 0.0;
  rep->report_ms = splat__now_ms() - t0;
  memcpy(out, rep, offsetof(splat_report, analysis_ms));
  out->report_ms = rep->report_ms;
  return SPLAT_OK;
}
