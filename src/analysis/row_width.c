/* row_width.c — W, the last dimension of ACSR value tensors: the largest row nnz rounded
 * up to the residue modulo 16 entries under which the R-SDDMM writes whole 32-byte
 * sectors (16 16-bit entries), chosen from the mask's segments alone (a pattern has one W,
 * whatever the plan).
 *
 * Column j of row i sits at value entry i W + j - off(i), off(i) = the first column of the
 * row's range minus its first entry. When W = off(i + 1) - off(i) (mod 16), every column
 * sits at the same place in its sector in both rows, so a sub-tile of keys covers whole
 * sectors in every row as it does in the first, and a row's last sector is completed by
 * the next row's first entries, written by the same CTA: sliding windows (off grows by one
 * a row) want W = 1 (mod 16) (window(256): 513 and 0.086 ms at seq 4096 d64, against 0.090
 * at 528). Rows that start on a sector want W = 0 (mod 16): blocked rows (off steps by
 * whole blocks; 512: 0.069 ms, 0.099 at 513), rows regrouped by stride and phase (dilated:
 * a row's neighbours in memory belong to other CTAs; 528: 0.092 ms, 0.101 at 513), and rows
 * followed by padding (longformer's window rows in a width of 4096). bench/NOTES.md v16.
 * Rows shorter than SPLAT__ROUNDED_ROWS entries keep W = the largest row nnz. */
#include "analysis/acsr.h"

/* The offset off(i) of regular row i (above) through its largest segment, when every
 * segment of the row is a contiguous range of columns; 0 when one is strided (rows the
 * tile plan may regroup by stride and phase) or the row is irregular or empty. */
static int range_offset(const splat__acsr *a, int64_t i, int64_t *off) {
  if (splat__acsr_row_irregular(a, i) || a->row_seg[i + 1] == a->row_seg[i]) return 0;
  int64_t idx = 0, best = -1;
  for (int64_t s = a->row_seg[i]; s < a->row_seg[i + 1]; s++) {
    const splat__segment g = a->segs[s];
    if (g.count > 1 && g.stride > 1 && g.stride != g.width) return 0;
    if (splat__segment_nnz(g) > best) best = splat__segment_nnz(g), *off = g.start - idx;
    idx += splat__segment_nnz(g);
  }
  return 1;
}

int64_t splat__acsr_choose_row_width(const splat__acsr *a) {
  const int64_t w = a->width;
  if (w < SPLAT__ROUNDED_ROWS) return w; /* short rows: rounding would cost up to 15 / w */
  /* Each pair of neighbouring rows votes for a residue: off(i + 1) - off(i) where both are
   * full (within a sector of w) contiguous ranges, else 0. */
  int64_t votes[16] = {0};
  int64_t prev_off = 0;
  int prev_ok = 0;
  for (int64_t i = 0; i < a->seq_q; i++) {
    int64_t off = 0;
    const int ok = splat__acsr_row_nnz(a, i) + 15 >= w && range_offset(a, i, &off);
    if (i > 0) votes[ok && prev_ok ? (off - prev_off) & 15 : 0]++;
    prev_ok = ok, prev_off = off;
  }
  int r = 0;
  for (int k = 1; k < 16; k++)
    if (votes[k] > votes[r]) r = k;
  return w + ((r - w) & 15);
}
