/* acsr.c — builds the generalised ACSR format: each row's columns as up to K affine
 * segments from the pattern's row evaluator, rows needing more going to a CSR remainder.
 * One pass over the rows, arrays sized from sample rows and grown geometrically:
 * O(seq_q x K) for closed forms. Rows that repeat an evaluated row (the same segments,
 * or all moved right a column a row: splat__row_run) are copied instead of evaluated. */
#include "analysis/acsr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/error.h"

/* Asks for transparent huge pages over the 2 MiB-aligned interior of a large block: a
 * 131072-row analysis otherwise spends a third of its time faulting in 4 KiB pages. */
static void advise_huge(void *p, size_t bytes) {
  const uintptr_t huge = (uintptr_t)2 << 20;
  uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + bytes) & ~(huge - 1);
  if (p && hi > lo) madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
}

#define RUN_GAP_MAX 64

double splat__physical_memory(void) {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  return pages > 0 && size > 0 ? (double)pages * (double)size : 0.0;
}

double splat__acsr_bytes(const splat__acsr *a) {
  return (double)(a->seq_q + 1) * 2 * sizeof(int64_t) +
         (double)a->row_seg[a->seq_q] * sizeof *a->segs + (double)a->rem_nnz * sizeof *a->rem_cols;
}

/* Grows *buf (elements of `elem` bytes, capacity *cap) to hold at least `need`. */
static int grow(void **buf, int64_t *cap, int64_t need, size_t elem) {
  if (need <= *cap) return 1;
  int64_t ncap = *cap > 0 ? *cap : 64;
  while (ncap < need) ncap += ncap / 2 + 64;
  void *p = realloc(*buf, (size_t)ncap * elem);
  if (!p) return 0;
  *buf = p;
  *cap = ncap;
  advise_huge(p, (size_t)ncap * elem);
  return 1;
}

/* Rows i+1..end repeat row i, whose n segments end the array (*nseg of them): appends
 * them, moved right r - i columns for row r when shift. 0 on OOM. */
static int copy_run(splat__acsr *out, int64_t *seg_cap, int64_t *nseg, int64_t i, int64_t end,
                    int n, int shift, int64_t rem_nnz, int max_segments) {
  if (!grow((void **)&out->segs, seg_cap, *nseg + (end - i) * n + max_segments, sizeof *out->segs))
    return 0;
  const splat__segment *src = out->segs + *nseg - n;
  splat__segment *dst = out->segs + *nseg;
  for (int64_t r = i + 1; r <= end; r++, dst += n) {
    out->row_seg[r] = *nseg + (r - i - 1) * n;
    out->rem_row[r] = rem_nnz;
    const int32_t d = shift ? (int32_t)(r - i) : 0;
    for (int s = 0; s < n; s++) {
      dst[s] = src[s];
      dst[s].start += d;
    }
  }
  *nseg += (end - i) * n;
  return 1;
}

void splat__acsr_free(splat__acsr *a) {
  if (!a) return;
  free(a->row_seg);
  free(a->segs);
  free(a->rem_row);
  free(a->rem_cols);
  memset(a, 0, sizeof *a);
}

splat_status splat__acsr_build(const splat_pattern *p, int max_segments, splat__acsr *out) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "acsr: out is NULL");
  memset(out, 0, sizeof *out);
  if (!p) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "pattern is NULL");
  if (max_segments == 0) max_segments = SPLAT_MAX_SEGMENTS;
  if (max_segments < 0 || max_segments > SPLAT_MAX_SEGMENTS)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "max_segments=%d invalid: must be 0 (default %d) or 1..%d", max_segments,
                       SPLAT_MAX_SEGMENTS, SPLAT_MAX_SEGMENTS);
  const int64_t seq_q = splat_pattern_seq_q(p), seq_k = splat_pattern_seq_k(p);
  if (seq_q < 0 || seq_k < 0 || seq_q > SPLAT__MAX_SEQ || seq_k > SPLAT__MAX_SEQ)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "pattern shape %lldx%lld invalid: sequence lengths must be 0..%lld",
                       (long long)seq_q, (long long)seq_k, (long long)SPLAT__MAX_SEQ);

  splat__row_eval *e = NULL;
  splat_status st = splat__row_eval_create(p, &e);
  if (st != SPLAT_OK) return st;

  out->seq_q = seq_q;
  out->seq_k = seq_k;
  out->max_segments = max_segments;
  int64_t seg_cap = 0, rem_cap = 0;
  /* Room for the segments from 64 sample rows (+ 1/8 + 16), so the array is rarely
   * regrown: a regrowth copies into fresh pages, whose faults cost more than the rows
   * (bigbird at 131072: 5 segments a row, 654,080 in all). */
  int64_t seg_guess = 16;
  if (seq_q > 0) {
    splat__segment scratch[SPLAT_MAX_SEGMENTS];
    const int64_t samples = seq_q < 64 ? seq_q : 64;
    int64_t found = 0;
    for (int64_t j = 0; j < samples; j++) {
      const int n = splat__row_segments(e, j * (seq_q - 1) / (samples > 1 ? samples - 1 : 1),
                                        scratch, max_segments);
      if (n > 0) found += n;
    }
    const int64_t est = (int64_t)((double)found / (double)samples * (double)seq_q);
    seg_guess = est + est / 8 + 16;
  }
  /* Two offsets a row and the segments: refused here when this machine's memory cannot
   * hold them (the kernel would grant the allocations and end the process later). */
  const double need = (double)(seq_q + 1) * 2 * sizeof(int64_t) +
                      (double)seg_guess * sizeof *out->segs,
               have = splat__physical_memory();
  if (have > 0 && need > have) {
    st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY,
                     "the analysis of %lld rows needs about %.1f GB; this machine has %.1f GB",
                     (long long)seq_q, need / 1e9, have / 1e9);
    goto fail;
  }
  out->row_seg = malloc((size_t)(seq_q + 1) * sizeof *out->row_seg);
  out->rem_row = malloc((size_t)(seq_q + 1) * sizeof *out->rem_row);
  advise_huge(out->row_seg, (size_t)(seq_q + 1) * sizeof *out->row_seg);
  advise_huge(out->rem_row, (size_t)(seq_q + 1) * sizeof *out->rem_row);
  if (!out->row_seg || !out->rem_row ||
      !grow((void **)&out->segs, &seg_cap, seg_guess, sizeof *out->segs)) {
    st =
        splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "acsr: out of memory for %lld rows", (long long)seq_q);
    goto fail;
  }

  {
    int64_t nseg = 0, rem_nnz = 0, rem_rows = 0, nnz = 0, width = 0, next_try = 0, gap = 1;
    int64_t *row_seg = out->row_seg, *rem_row = out->rem_row;
    for (int64_t i = 0; i < seq_q; i++) {
      row_seg[i] = nseg;
      rem_row[i] = rem_nnz;
      if (nseg + max_segments > seg_cap) {
        if (!grow((void **)&out->segs, &seg_cap, nseg + max_segments, sizeof *out->segs)) {
          st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "acsr: out of memory for segments");
          goto fail;
        }
      }
      splat__segment *segs = out->segs + nseg;
      int n = splat__row_segments(e, i, segs, max_segments);
      int64_t row_nnz = 0;
      if (n >= 0) {
        for (int s = 0; s < n; s++) row_nnz += splat__segment_nnz(segs[s]);
        nseg += n;
        /* Rows that repeat this one (exactly, or moved right a column a row): copies.
         * Asked again at once after a run, else after a gap doubling up to RUN_GAP_MAX
         * rows (patterns without runs then pay almost nothing for the question). */
        if (i >= next_try) {
          int shift;
          const int64_t end = splat__row_run(e, i, &shift);
          gap = end > i ? 1 : (2 * gap < RUN_GAP_MAX ? 2 * gap : RUN_GAP_MAX);
          next_try = end > i ? end + 1 : i + gap;
          if (end > i) {
            if (!copy_run(out, &seg_cap, &nseg, i, end, n, shift, rem_nnz, max_segments)) {
              st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "acsr: out of memory for segments");
              goto fail;
            }
            nnz += row_nnz * (end - i);
            i = end;
          }
        }
      } else {
        const int64_t want = rem_nnz + (seq_k > 0 ? seq_k : 1);
        if (want > rem_cap && have > 0) {
          /* Refused past half this machine's memory (the process would be killed later):
           * the columns so far, or once an eighth of the rows is seen, their projection
           * over every row (a mask's irregular rows may all come first: not earlier). */
          const double seen = (double)(i + 1), sofar = (double)want * sizeof *out->rem_cols;
          const double projected =
              seen * 8 >= (double)seq_q
                  ? (double)rem_nnz * sizeof *out->rem_cols * (double)seq_q / seen
                  : 0;
          const double bound = projected > sofar ? projected : sofar;
          if (need + bound > have / 2) {
            st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY,
                             "the irregular remainder (rows that need more than %d segments; "
                             "%lld of the first %lld) would take about %.1f GB of columns, more "
                             "than half of this machine's %.1f GB",
                             max_segments, (long long)(rem_rows + 1), (long long)(i + 1),
                             bound / 1e9, have / 1e9);
            goto fail;
          }
        }
        if (!grow((void **)&out->rem_cols, &rem_cap, want, sizeof *out->rem_cols)) {
          st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "acsr: out of memory for the remainder");
          goto fail;
        }
        row_nnz = splat__row_columns(e, i, out->rem_cols + rem_nnz);
        rem_nnz += row_nnz;
        rem_rows++;
      }
      nnz += row_nnz;
      if (row_nnz > width) width = row_nnz;
    }
    row_seg[seq_q] = nseg;
    rem_row[seq_q] = rem_nnz;
    out->nnz = nnz;
    out->width = width > 0 ? width : 1;
    out->rem_nnz = rem_nnz;
    out->rem_rows = rem_rows;
    /* Give back the slack of the geometric growth (shrinking never fails for good). */
    if (nseg > 0 && nseg < seg_cap) {
      void *q = realloc(out->segs, (size_t)nseg * sizeof *out->segs);
      if (q) out->segs = q;
    }
    if (rem_nnz > 0 && rem_nnz < rem_cap) {
      void *q = realloc(out->rem_cols, (size_t)rem_nnz * sizeof *out->rem_cols);
      if (q) out->rem_cols = q;
    }
  }
  splat__row_eval_destroy(e);
  out->row_width = splat__acsr_choose_row_width(out->width);
  return SPLAT_OK;

fail:
  splat__row_eval_destroy(e);
  splat__acsr_free(out);
  return st;
}

int64_t splat__acsr_row_nnz(const splat__acsr *a, int64_t i) {
  if (splat__acsr_row_irregular(a, i)) return a->rem_row[i + 1] - a->rem_row[i];
  int64_t n = 0;
  for (int64_t s = a->row_seg[i]; s < a->row_seg[i + 1]; s++) n += splat__segment_nnz(a->segs[s]);
  return n;
}

int64_t splat__acsr_row_columns(const splat__acsr *a, int64_t i, int32_t *out) {
  if (splat__acsr_row_irregular(a, i)) {
    int64_t n = a->rem_row[i + 1] - a->rem_row[i];
    memcpy(out, a->rem_cols + a->rem_row[i], (size_t)n * sizeof *out);
    return n;
  }
  int64_t n = 0;
  for (int64_t s = a->row_seg[i]; s < a->row_seg[i + 1]; s++) {
    const splat__segment g = a->segs[s];
    for (int32_t t = 0; t < g.count; t++) {
      const int32_t run = g.start + t * g.stride;
      for (int32_t u = 0; u < g.width; u++) out[n++] = run + u;
    }
  }
  return n;
}
