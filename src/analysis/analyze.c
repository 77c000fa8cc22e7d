/* analyze.c — the public analysis entry points: splat_analyze (ACSR, tile plan and
 * report of a pattern, timed) and splat_report_format (a readable text report or one
 * line of JSON whose keys are the splat_report field names). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "analysis/acsr.h"
#include "analysis/report.h"
#include "analysis/tile_plan.h"
#include "core/error.h"
#include "core/timer.h"
#include "splat.h"

#define MAX_TILE 1024

static splat_status check_tile(const char *name, int v) {
  if (v < 0 || v > MAX_TILE)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "splat_analyze: %s=%d invalid: must be 0 (default 128) or 1..%d", name, v,
                       MAX_TILE);
  return SPLAT_OK;
}

splat_status splat_analyze(const splat_pattern *pattern, int tile_q, int tile_k, int max_segments,
                           splat_report *out) {
  if (!pattern) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_analyze: pattern is NULL");
  if (!out)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_analyze: out (the report) is NULL");
  splat_status st;
  if ((st = check_tile("tile_q", tile_q)) != SPLAT_OK) return st;
  if ((st = check_tile("tile_k", tile_k)) != SPLAT_OK) return st;
  if (max_segments < 0 || max_segments > SPLAT_MAX_SEGMENTS)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "splat_analyze: max_segments=%d invalid: must be 0 (default %d) or 1..%d",
                       max_segments, SPLAT_MAX_SEGMENTS, SPLAT_MAX_SEGMENTS);
  if (tile_q == 0) tile_q = 128;
  if (tile_k == 0) tile_k = 128;
  if (max_segments == 0) max_segments = SPLAT_MAX_SEGMENTS;

  splat__acsr a;
  splat__tile_plan t;
  memset(&t, 0, sizeof t);
  const double t0 = splat__now_ms();
  st = splat__acsr_build(pattern, max_segments, &a);
  if (st != SPLAT_OK) return st;
  const double t1 = splat__now_ms();
  st = splat__tile_plan_build(&a, tile_q, tile_k, &t);
  if (st != SPLAT_OK) {
    splat__acsr_free(&a);
    return st;
  }
  const double t2 = splat__now_ms();
  splat_report r;
  memset(&r, 0, sizeof r);
  st = splat__report_build(&a, &t, &r);
  splat__tile_plan_free(&t);
  splat__acsr_free(&a);
  if (st != SPLAT_OK) return st;
  r.analysis_ms = t1 - t0;
  r.plan_ms = t2 - t1;
  *out = r;
  return SPLAT_OK;
}

/* ---------------------------------------------------------------- formatting */

/* Appends into a caller buffer, truncating safely and counting the full length. */
typedef struct sbuf {
  char *buf;
  size_t cap, len;
} sbuf;

static void SPLAT__PRINTF(2, 3) sb_printf(sbuf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const size_t room = b->len < b->cap ? b->cap - b->len : 0;
  const int n = vsnprintf(room ? b->buf + b->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) b->len += (size_t)n;
}

/* A byte count with a binary unit: "2.00 MiB". */
static void sb_bytes(sbuf *b, int64_t bytes) {
  static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) v /= 1024.0, u++;
  if (u == 0)
    sb_printf(b, "%lld B", (long long)bytes);
  else
    sb_printf(b, "%.2f %s", v, units[u]);
}

static void sb_ratio(sbuf *b, int64_t num, int64_t den) {
  if (den > 0)
    sb_printf(b, "%.3gx", (double)num / (double)den);
  else
    sb_printf(b, "-");
}

static void sb_json_double(sbuf *b, const char *key, double v, int comma) {
  if (isfinite(v))
    sb_printf(b, "\"%s\":%.10g%s", key, v, comma ? "," : "");
  else
    sb_printf(b, "\"%s\":null%s", key, comma ? "," : "");
}

static void format_json(sbuf *b, const splat_report *r, int K) {
#define I64(f) sb_printf(b, "\"" #f "\":%lld,", (long long)r->f)
#define INT(f) sb_printf(b, "\"" #f "\":%d,", r->f)
  sb_printf(b, "{");
  I64(seq_q);
  I64(seq_k);
  I64(nnz);
  sb_json_double(b, "density", r->density, 1);
  I64(max_row_nnz);
  I64(row_width);
  INT(max_segments);
  sb_printf(b, "\"rows_by_segments\":[");
  for (int s = 0; s <= K + 1; s++)
    sb_printf(b, "%lld%s", (long long)r->rows_by_segments[s], s <= K ? "," : "");
  sb_printf(b, "],");
  I64(segments);
  I64(regular_nnz);
  sb_json_double(b, "regular_fraction", r->regular_fraction, 1);
  I64(irregular_rows);
  I64(acsr_bytes);
  I64(csr_bytes);
  I64(bsr_blocks);
  I64(bsr_bytes);
  INT(tile_q);
  INT(tile_k);
  INT(rows_permuted);
  INT(tile_rows_max);
  I64(query_tiles);
  I64(key_runs);
  I64(full_tiles);
  I64(predicated_tiles);
  I64(computed);
  sb_json_double(b, "tile_waste", r->tile_waste, 1);
  sb_json_double(b, "analysis_ms", r->analysis_ms, 1);
  sb_json_double(b, "plan_ms", r->plan_ms, 1);
  sb_json_double(b, "report_ms", r->report_ms, 1);
  sb_json_double(b, "kernels_ms", r->kernels_ms, 1);
  sb_printf(b, "\"kernels_compiled\":%d,", r->kernels_compiled);
  sb_printf(b, "\"device_bytes\":%lld,", (long long)r->device_bytes);
  sb_printf(b, "\"workspace_bytes\":%lld", (long long)r->workspace_bytes);
  sb_printf(b, "}");
#undef I64
#undef INT
}

static void format_text(sbuf *b, const splat_report *r, int K) {
  const double rows = r->seq_q > 0 ? (double)r->seq_q : 1.0;
  sb_printf(b, "mask %lld x %lld\n", (long long)r->seq_q, (long long)r->seq_k);
  sb_printf(b, "  nnz              %lld (density %.4g%%)\n", (long long)r->nnz, 100.0 * r->density);
  if (r->row_width == r->max_row_nnz) {
    sb_printf(b, "  row width W      %lld (largest row)\n", (long long)r->row_width);
  } else if (r->max_row_nnz == 0) {
    sb_printf(b, "  row width W      %lld (empty mask: at least 1)\n", (long long)r->row_width);
  } else {
    sb_printf(b, "  row width W      %lld (largest row %lld, rounded up to a multiple of 16)\n",
              (long long)r->row_width, (long long)r->max_row_nnz);
  }
  sb_printf(b, "  segments/row     K = %d\n", r->max_segments);
  for (int s = 0; s <= K; s++) {
    if (r->rows_by_segments[s] == 0) continue;
    sb_printf(b, "    %d segment%s  %12lld rows (%5.1f%%)\n", s, s == 1 ? " " : "s",
              (long long)r->rows_by_segments[s], 100.0 * (double)r->rows_by_segments[s] / rows);
  }
  sb_printf(b, "    irregular   %12lld rows (%5.1f%%)\n", (long long)r->rows_by_segments[K + 1],
            100.0 * (double)r->rows_by_segments[K + 1] / rows);
  sb_printf(b, "  segments         %lld\n", (long long)r->segments);
  sb_printf(b, "  regular          %.3f%% of nnz (%lld of %lld; %lld irregular rows)\n",
            100.0 * r->regular_fraction, (long long)r->regular_nnz, (long long)r->nnz,
            (long long)r->irregular_rows);
  sb_printf(b, "metadata\n  ACSR             ");
  sb_bytes(b, r->acsr_bytes);
  sb_printf(b, "\n  CSR (int32)      ");
  sb_bytes(b, r->csr_bytes);
  sb_printf(b, " = ");
  sb_ratio(b, r->csr_bytes, r->acsr_bytes);
  sb_printf(b, " ACSR\n  BSR 128x128      ");
  sb_bytes(b, r->bsr_bytes);
  sb_printf(b, " = ");
  sb_ratio(b, r->bsr_bytes, r->acsr_bytes);
  sb_printf(b, " ACSR (%lld non-empty blocks)\n", (long long)r->bsr_blocks);
  sb_printf(b, "tile plan %dx%d\n", r->tile_q, r->tile_k);
  sb_printf(b, "  rows permuted    %s\n",
            r->rows_permuted ? "yes (regrouped by stride and phase)" : "no");
  sb_printf(b, "  query tiles      %lld (at most %d rows each)\n", (long long)r->query_tiles,
            r->tile_rows_max);
  sb_printf(b, "  key runs         %lld\n", (long long)r->key_runs);
  const int64_t kt = r->full_tiles + r->predicated_tiles;
  sb_printf(b, "  key tiles        %lld full (no predicate), %lld predicated (%.1f%% full)\n",
            (long long)r->full_tiles, (long long)r->predicated_tiles,
            kt > 0 ? 100.0 * (double)r->full_tiles / (double)kt : 0.0);
  sb_printf(b, "  computed         %lld tile elements (whole %dx%d tiles)\n",
            (long long)r->computed, r->tile_q, r->tile_k);
  sb_printf(b, "  tile waste       %.3fx (computed / regular nnz; 1.0 = none)\n", r->tile_waste);
  sb_printf(b, "timings\n");
  sb_printf(b, "  analysis         %.3f ms (segments + remainder)\n", r->analysis_ms);
  sb_printf(b, "  plan             %.3f ms (alignment + tile plan)\n", r->plan_ms);
  sb_printf(b, "  report           %.3f ms\n", r->report_ms);
  if (r->kernels_ms > 0 || r->kernels_compiled > 0) /* a CUDA plan's; none for an analysis */
    sb_printf(b, "  kernels          %.3f ms (%d compiled, the rest from the kernel cache)\n",
              r->kernels_ms, r->kernels_compiled);
  if (r->device_bytes > 0 || r->workspace_bytes > 0) sb_printf(b, "device\n"); /* a CUDA plan's */
  if (r->device_bytes > 0) {
    sb_printf(b, "  memory           ");
    sb_bytes(b, r->device_bytes);
    sb_printf(b, " held by the plan (metadata)\n");
  }
  if (r->workspace_bytes > 0) { /* a CUDA plan's, of two passes or split tiles */
    sb_printf(b, "  workspace        ");
    sb_bytes(b, r->workspace_bytes);
    sb_printf(b, " an attention call takes from the context's pool while it runs\n");
  }
}

splat_status splat_report_format(const splat_report *report, int json, char *buf, size_t cap,
                                 size_t *len) {
  if (!report)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_report_format: report is NULL");
  if (!buf && cap > 0)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "splat_report_format: buf is NULL but cap=%zu is not 0", cap);
  int K = report->max_segments;
  if (K < 0 || K > SPLAT_MAX_SEGMENTS)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "splat_report_format: report->max_segments=%d invalid: must be 0..%d", K,
                       SPLAT_MAX_SEGMENTS);
  sbuf b = {buf, cap, 0};
  if (cap > 0) buf[0] = '\0';
  if (json)
    format_json(&b, report, K);
  else
    format_text(&b, report, K);
  if (len) *len = b.len;
  return SPLAT_OK;
}
