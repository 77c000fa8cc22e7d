/* ws_tables.c — the warp-specialised attention kernel's interval tables, built at plan
 * creation (ws_tables.h). A record holds, for the rows of one row block of a query tile
 * and one key group: each row's intervals of gathered indices (one per segment of the
 * group, in the row's order, with the entry index and row-end flag of kernels/common.cuh
 * splat_seg_interval), their count, and per 32 rows the span the consumers test sub-tiles
 * against (attention_ws.cuh: the hull lo..hi of the rows' intervals and the keys full_lo ..
 * full_hi every row covers, or unknown when a row has intervals far apart). */
#include "cuda/ws_tables.h"

#include <stdlib.h>
#include <string.h>

#include "../../kernels/seg_interval.cuh"
#include "core/error.h"

/* One row's intervals of group (phase, stride, width) in `iv` (the first cap of them), as
 * the kernels read them (kernels/common.cuh splat_ival: lo, hi, idx0, ends_row); returns
 * their count. */
static int row_intervals(const splat__acsr *a, int64_t row, int32_t phase, int32_t stride,
                         int32_t width, int32_t (*iv)[4], int cap) {
  const int64_t s0 = a->row_seg[row], s1 = a->row_seg[row + 1];
  int n = 0;
  int32_t idx = 0;
  for (int64_t s = s0; s < s1; s++) {
    const splat__segment g = a->segs[s];
    int32_t lo, hi;
    const int in =
        splat_seg_ival(g.start, g.stride, g.count, g.width, phase, stride, width, &lo, &hi);
    if (in && n < cap) {
      iv[n][0] = lo;
      iv[n][1] = hi;
      iv[n][2] = idx;
      iv[n][3] = s == s1 - 1;
    }
    n += in;
    idx += g.count * g.width;
  }
  return n;
}

/* The span of rows with n intervals each as one int4 {lo, hi, full_lo, full_hi}: one
 * interval, itself; two a few keys apart (at most kt / 8) in kernels of two a row, their
 * hull with nothing full; none, empty; else unknown (lo INT32_MIN, hi INT32_MAX). Joined
 * over rows: min lo, max hi, max full_lo, min full_hi. */
static void row_span(const int32_t (*iv)[4], int n, int segs, int kt, int32_t sp[4]) {
  if (n == 1) {
    sp[0] = sp[2] = iv[0][0];
    sp[1] = sp[3] = iv[0][1];
  } else if (n == 0) {
    sp[0] = sp[2] = INT32_MAX;
    sp[1] = sp[3] = INT32_MIN;
  } else if (segs == 2 && iv[1][0] - iv[0][1] <= kt / 8) {
    sp[0] = iv[0][0];
    sp[1] = iv[1][1];
    sp[2] = INT32_MAX;
    sp[3] = INT32_MIN;
  } else {
    sp[0] = INT32_MIN;
    sp[1] = INT32_MAX;
    sp[2] = INT32_MAX;
    sp[3] = INT32_MIN;
  }
}

/* Fills the record of rows perm[first .. first + nrows) (nrows <= tq; rows past them: no
 * intervals, left out of the spans) for group grp; returns 0 when a row has more than segs
 * intervals. */
static int fill_record(unsigned char *rec, const splat__acsr *a, const int32_t *perm, int64_t first,
                       int nrows, const splat_dev_run *grp, int tq, int segs, int kt) {
  int32_t(*iv)[4] = (int32_t(*)[4])rec;
  int32_t(*span)[4] = (int32_t(*)[4])(rec + SPLAT_WS_TABLE_SPAN_OFF(tq, segs));
  int32_t *niv = (int32_t *)(rec + SPLAT_WS_TABLE_NIV_OFF(tq, segs));
  for (int w = 0; w < tq / 32; w++) {
    span[w][0] = INT32_MAX; /* no rows yet: empty hull, full keys everywhere */
    span[w][1] = INT32_MIN;
    span[w][2] = INT32_MIN;
    span[w][3] = INT32_MAX;
  }
  for (int r = 0; r < tq; r++) {
    int32_t(*riv)[4] = iv + (int64_t)r * segs;
    const int n = r < nrows ? row_intervals(a, perm[first + r], grp->phase, grp->stride, grp->width,
                                            riv, segs)
                            : 0;
    if (n > segs) return 0;
    niv[r] = n;
    if (r >= nrows) continue;
    int32_t sp[4];
    row_span((const int32_t(*)[4])riv, n, segs, kt, sp);
    int32_t *w = span[r / 32];
    if (sp[0] < w[0]) w[0] = sp[0];
    if (sp[1] > w[1]) w[1] = sp[1];
    if (sp[2] > w[2]) w[2] = sp[2];
    if (sp[3] < w[3]) w[3] = sp[3];
  }
  return 1;
}

/* The first predicated run of a tile's runs tr[0..i] in tr[i]'s group: i itself when no
 * earlier one is (that run's table is the group's). */
static int32_t first_of_group(const splat_dev_run *tr, int32_t i) {
  int32_t j = 0;
  while (j < i && !(tr[j].predicate && tr[j].phase == tr[i].phase && tr[j].stride == tr[i].stride &&
                    tr[j].width == tr[i].width))
    j++;
  return j;
}

splat_status splat__ws_tables_build(const splat__acsr *a, const int32_t *perm,
                                    const splat_dev_tile *tiles, int64_t ntiles,
                                    splat_dev_run *runs, int tq, int segs, int kt,
                                    splat__ws_tables *out) {
  memset(out, 0, sizeof *out);
  if (tq < 64 || tq % 64 || segs < 1 || kt < 8) {
    return splat__fail(SPLAT_ERR_INTERNAL,
                       "splat_plan_create: interval tables of %d rows, %d segments a row, "
                       "%d-key sub-tiles",
                       tq, segs, kt);
  }
  int32_t most = 1;
  for (int64_t t = 0; t < ntiles; t++)
    if (tiles[t].nrows > most) most = tiles[t].nrows;
  const int blocks = (int)((most + tq - 1) / tq); /* row blocks of the largest tile */
  const int64_t rec = SPLAT_WS_TABLE_BYTES(tq, segs);
  /* Count first: one table per tile and distinct group of its predicated runs. */
  int64_t count = 0;
  for (int64_t t = 0; t < ntiles; t++) {
    splat_dev_run *tr = runs + tiles[t].run_begin;
    for (int32_t i = 0; i < tiles[t].nruns; i++) {
      tr[i].table = -1;
      if (!tr[i].predicate) continue;
      const int32_t j = first_of_group(tr, i);
      if (j < i) {
        tr[i].table = tr[j].table;
      } else {
        if (count * blocks > INT32_MAX - blocks) {
          return splat__fail(SPLAT_ERR_UNSUPPORTED,
                             "splat_plan_create: more than 2^31 interval tables");
        }
        tr[i].table = (int32_t)(count * blocks);
        count++;
      }
    }
  }
  out->count = count * blocks;
  out->bytes = out->count * rec;
  if (out->count == 0) return SPLAT_OK;
  out->data = calloc((size_t)out->count, (size_t)rec);
  if (!out->data) {
    memset(out, 0, sizeof *out);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY,
                       "splat_plan_create: out of memory (%lld bytes of interval tables)",
                       (long long)(count * blocks * rec));
  }
  for (int64_t t = 0; t < ntiles; t++) {
    const splat_dev_run *tr = runs + tiles[t].run_begin;
    for (int32_t i = 0; i < tiles[t].nruns; i++) {
      if (!tr[i].predicate || first_of_group(tr, i) < i)
        continue; /* filled with its group's first */
      for (int b = 0; b < blocks; b++) {
        const int left = tiles[t].nrows - b * tq;
        if (!fill_record(out->data + (int64_t)(tr[i].table + b) * rec, a, perm,
                         (int64_t)tiles[t].row_begin + (int64_t)b * tq, left < tq ? left : tq,
                         &tr[i], tq, segs, kt)) {
          splat__ws_tables_free(out);
          return splat__fail(SPLAT_ERR_INTERNAL,
                             "splat_plan_create: a row of query tile %lld has more than %d "
                             "intervals of one key group (the attention kernel's tables)",
                             (long long)t, segs);
        }
      }
    }
  }
  return SPLAT_OK;
}

void splat__ws_tables_free(splat__ws_tables *t) {
  if (!t) return;
  free(t->data);
  memset(t, 0, sizeof *t);
}
