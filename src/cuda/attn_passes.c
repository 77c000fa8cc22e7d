/* attn_passes.c — the choice of two-pass fused attention (see attn_passes.h). */
#include "cuda/attn_passes.h"

#include <string.h>

#include "analysis/acsr.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "cuda/tile_rows.h"
#include "cuda/tile_split.h"
#include "cuda/tma_views.h"

#include "../../kernels/params.cuh"

splat_status splat__attn_passes_env(int *on) {
  return splat__env_switch("SPLAT_ATTN_PASSES",
                           "the fused attention of masks mixing contiguous and strided segments in "
                           "two passes where that computes less",
                           "always one pass", on);
}

double splat__attn_passes_bytes(int64_t batch, int64_t heads, int64_t seq_q, int head_dim,
                                splat_dtype dt) {
  return (double)batch * (double)heads * (double)seq_q *
         SPLAT_ROWPART_BYTES(head_dim, dt == SPLAT_BF16);
}

/* The passes' shapes from their ACSRs and plans (over the regular rows, the same in both). */
static void pass_shapes(const splat__acsr part[2], const splat__tile_plan pass[2],
                        splat__attn_pass_shape shape[2]) {
  memset(shape, 0, 2 * sizeof *shape);
  for (int k = 0; k < 2; k++) {
    for (int64_t q = 0; q < pass[k].regular_rows; q++) {
      const int64_t i = pass[k].permuted ? pass[k].perm[q] : q;
      const int n = (int)(part[k].row_seg[i + 1] - part[k].row_seg[i]);
      if (n > shape[k].segs) shape[k].segs = n;
    }
    if (shape[k].segs < 1) shape[k].segs = 1;
    shape[k].tile_q = pass[k].tile_q;
    shape[k].tile_k = pass[k].tile_k;
    shape[k].tile_rows = splat__tile_plan_max_rows(&pass[k]);
  }
}

splat_status splat__attn_passes_plan(const splat__acsr *a, const splat__tile_plan *single,
                                     int64_t batch, int64_t heads, int head_dim, splat_dtype dt,
                                     splat__tile_plan pass[2], splat__acsr part[2],
                                     splat__attn_pass_shape shape[2], int *npass) {
  *npass = 0;
  memset(pass, 0, 2 * sizeof *pass);
  memset(part, 0, 2 * sizeof *part);
  memset(shape, 0, 2 * sizeof *shape);
  int on = 1;
  splat_status st = splat__attn_passes_env(&on);
  if (st != SPLAT_OK || !on) return st;
  st = splat__tile_plan_passes(a, single, pass, part, npass);
  if (st != SPLAT_OK || *npass == 0) return st;
  const double bytes = splat__attn_passes_bytes(batch, heads, a->seq_q, head_dim, dt);
  if (bytes > (double)SPLAT__ATTN_PASSES_MAX_BYTES) {
    splat__log(SPLAT__LOG_INFO,
               "fused attention: one pass, although two would compute %lld instead of %lld "
               "entries: their workspace would take %.0f MiB",
               (long long)(pass[0].computed + pass[1].computed), (long long)single->computed,
               bytes / (1 << 20));
    for (int k = 0; k < 2; k++) {
      splat__tile_plan_free(&pass[k]);
      splat__pass_acsr_free(&part[k]);
    }
    *npass = 0;
    return SPLAT_OK;
  }
  pass_shapes(part, pass, shape);
  splat__log(SPLAT__LOG_INFO,
             "fused attention: two passes computing %lld + %lld entries (one: %lld); up to %d + "
             "%d segments a row, %d + %d rows a tile",
             (long long)pass[0].computed, (long long)pass[1].computed, (long long)single->computed,
             shape[0].segs, shape[1].segs, shape[0].tile_rows, shape[1].tile_rows);
  return SPLAT_OK;
}

/* The passes' 192-row trials (splat__attn_pass_rows), one job each (core/parallel.h). */
typedef struct rows_jobs {
  const splat__acsr *part;
  const splat__tile_plan *pass;
  const splat__attn_pass_shape *shape;
  int64_t seq_k;
  const splat_plan_desc *d;
  const char *arch;
  int sm_count;
  splat__tile_plan t192[2];
  int chosen[2];
} rows_jobs;

/* Pass k's 192-row tile plan where the rule takes it for the pass alone (its kernel and,
 * for pass 2, the views pass 1 leaves are weighed after). */
static splat_status try_rows(void *arg, int k) {
  rows_jobs *j = arg;
  /* Pass 1 of up to two segments a row (the window of strided | window, split around its
   * lattice points): with more, the kernel drops to 3 stages, and at head_dim 64 with 8 its
   * pass-1 epilogue spills; neither was measured. Pass 2 of one (a lattice): with two, its
   * merge spills 4 bytes. */
  if (j->d->dtype != SPLAT_BF16 || j->pass[k].tile_q != 128 || j->pass[k].tile_k != 128 ||
      j->shape[k].segs > (k == 0 ? 2 : 1))
    return SPLAT_OK;
  splat_plan_desc d1 = *j->d;
  d1.ops = SPLAT_OPS_ATTENTION;
  d1.tile_k = j->pass[k].tile_k; /* the 192-row plan's key tile: the pass's */
  return splat__tile_rows_choose(&j->part[k], &j->pass[k], j->seq_k, &d1, j->arch, j->sm_count, k,
                                 &j->t192[k], &j->chosen[k]);
}

/* Pass k takes its chosen 192-row plan t192 where its kernel runs three consumer
 * warpgroups (and, for pass 2, TMA views serve it after pass 1's); else t192 is freed. */
static splat_status take_rows(splat__tile_plan pass[2], splat__attn_pass_shape shape[2], int k,
                              splat__tile_plan *t192, const splat_report *rep, int64_t seq_k,
                              const splat_plan_desc *d, const char *arch, int smem_optin,
                              int *take) {
  *take = 0;
  /* Pass 2's runs take the views pass 1's leave (tma_views.h). */
  if (k == 1 && !splat__tma_serves_after(&pass[0], t192, seq_k)) {
    splat__tile_plan_free(t192);
    return SPLAT_OK;
  }
  splat__attn_pass_shape s = shape[k];
  s.tile_q = 192;
  s.wg3 = 1;
  s.tile_rows = splat__tile_plan_max_rows(t192);
  splat__kspec ks;
  splat_status st = splat__kspec_for_pass(&ks, rep, d->dtype, (int)d->head_dim, smem_optin, arch,
                                          s.segs, s.tile_q, s.tile_k, s.tile_rows, s.wg3, k + 1);
  /* Pass 2 with its rows staged (the variant compiled and checked; without, from 199 to
   * 226 KB of shared memory at head_dim 64, its merge would read them from L2). */
  int staged = 1;
  if (k == 1 && st == SPLAT_OK && ks.tile) {
    splat__kspec plain = ks;
    plain.epi = SPLAT_EPI_PLAIN;
    staged = splat__kspec_tile_smem(&ks) > splat__kspec_tile_smem(&plain);
  }
  if (st == SPLAT_OK && ks.tile && ks.warps == 12 && staged) {
    splat__tile_plan_free(&pass[k]);
    pass[k] = *t192;
    memset(t192, 0, sizeof *t192); /* the pass's now */
    shape[k] = s;
    *take = 1;
    splat__log(SPLAT__LOG_INFO, "fused attention: pass %d on 192-row query tiles", k + 1);
    return SPLAT_OK;
  }
  splat__tile_plan_free(t192);
  return st;
}

splat_status splat__attn_pass_rows(const splat__acsr part[2], splat__tile_plan pass[2],
                                   splat__attn_pass_shape shape[2], const splat_report *rep,
                                   int64_t seq_k, const splat_plan_desc *d, const char *arch,
                                   int sm_count, int smem_optin, int take[2]) {
  take[0] = take[1] = 0;
  rows_jobs j;
  memset(&j, 0, sizeof j);
  j.part = part;
  j.pass = pass;
  j.shape = shape;
  j.seq_k = seq_k;
  j.d = d;
  j.arch = arch;
  j.sm_count = sm_count;
  splat_status st = splat__parallel_run(try_rows, &j, 2);
  for (int k = 0; k < 2 && st == SPLAT_OK; k++) {
    if (j.chosen[k])
      st = take_rows(pass, shape, k, &j.t192[k], rep, seq_k, d, arch, smem_optin, &take[k]);
  }
  for (int k = 0; k < 2; k++) splat__tile_plan_free(&j.t192[k]); /* untaken, or after a failure */
  return st;
}

splat_status splat__attn_pass_specs(splat__kspec spec[2], const splat__attn_pass_shape shape[2],
                                    const splat_report *rep, splat_dtype dt, int head_dim,
                                    int smem_optin, const char *arch, int *ok) {
  *ok = 0;
  for (int k = 0; k < 2; k++) {
    const splat_status st = splat__kspec_for_pass(&spec[k], rep, dt, head_dim, smem_optin, arch,
                                                  shape[k].segs, shape[k].tile_q, shape[k].tile_k,
                                                  shape[k].tile_rows, shape[k].wg3, k + 1);
    if (st != SPLAT_OK) return st;
  }
  *ok = spec[0].tile && spec[1].tile;
  return SPLAT_OK;
}

splat_status splat__attn_passes_of_pattern(const splat_pattern *p, int tile_q, int tile_k,
                                           int head_dim, splat_dtype dt, const char *arch,
                                           int *two_pass, splat__attn_pass_shape shape[2],
                                           int *split) {
  *two_pass = *split = 0;
  splat__acsr a;
  splat__tile_plan single, pass[2];
  splat__acsr part[2];
  memset(&single, 0, sizeof single);
  splat_status st = splat__acsr_build(p, SPLAT_MAX_SEGMENTS, &a);
  if (st != SPLAT_OK) return st;
  st = splat__tile_plan_build(&a, tile_q, tile_k, &single);
  int npass = 0;
  if (st == SPLAT_OK)
    st = splat__attn_passes_plan(&a, &single, 1, 1, head_dim, dt, pass, part, shape, &npass);
  if (st == SPLAT_OK && npass && tile_q == 128) {
    const splat_plan_desc d = {
        1, 1, 1, head_dim, dt, 0, tile_k, SPLAT_MAX_SEGMENTS, SPLAT_OPS_ATTENTION};
    splat_report rep;
    memset(&rep, 0, sizeof rep);
    int take[2];
    st = splat__attn_pass_rows(part, pass, shape, &rep, a.seq_k, &d, arch, 0, 0, take);
  }
  if (npass) {
    *two_pass = st == SPLAT_OK;
    for (int k = 0; k < 2; k++) {
      splat__tile_plan_free(&pass[k]);
      splat__pass_acsr_free(&part[k]);
    }
  }
  int max_ktiles = 0;
  if (st == SPLAT_OK && !npass) st = splat__attn_split_env(&max_ktiles);
  *split = max_ktiles > 0;
  splat__tile_plan_free(&single);
  splat__acsr_free(&a);
  return st;
}
