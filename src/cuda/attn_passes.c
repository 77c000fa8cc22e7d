/* attn_passes.c — the choice of two-pass fused attention (see attn_passes.h). */
#include "cuda/attn_passes.h"

#include <string.h>

#include "analysis/acsr.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/timer.h"
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

/* The passes' 192-row tiles: bf16 at head_dim 32 .. 64 (f16's pass 1 and 72 .. 128 were not
 * measured on three warpgroups; at 128 pass 1 compiles there without spills, 211-220 KB, and
 * pass 2 would not stage its rows: bench/NOTES.md v75). */
static int pass_rows_dtype_dims(const splat_plan_desc *d) {
  return d->dtype == SPLAT_BF16 && d->head_dim <= 64;
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
                                     splat__attn_passes_ahead *ahead, splat__tile_plan pass[2],
                                     splat__acsr part[2], splat__attn_pass_shape shape[2],
                                     int *npass) {
  *npass = 0;
  memset(pass, 0, 2 * sizeof *pass);
  memset(part, 0, 2 * sizeof *part);
  memset(shape, 0, 2 * sizeof *shape);
  int on = 1;
  splat_status st = splat__attn_passes_env(&on);
  if (st != SPLAT_OK || !on) return st;
  if (ahead && ahead->built && ahead->tile_q == single->tile_q &&
      ahead->tile_k == single->tile_k) { /* built beside the single plan: weighed here */
    if (splat__tile_plan_may_pass(a, single) && splat__tile_plan_passes_pay(ahead->pass, single)) {
      memcpy(pass, ahead->pass, sizeof ahead->pass);
      memcpy(part, ahead->part, sizeof ahead->part);
      memset(ahead->pass, 0, sizeof ahead->pass); /* the caller's now */
      memset(ahead->part, 0, sizeof ahead->part);
      ahead->taken = 1;
      *npass = 2;
    }
  } else {
    st = splat__tile_plan_passes(a, single, pass, part, npass);
  }
  if (st != SPLAT_OK || *npass == 0) return st;
  const double bytes = splat__attn_passes_bytes(batch, heads, a->seq_q, head_dim, dt);
  if (bytes > (double)SPLAT__ATTN_PASSES_MAX_BYTES) {
    splat__log(SPLAT__LOG_INFO,
               "fused attention: one pass, although two would compute %lld instead of %lld "
               "entries: their workspace would take %.0f MiB",
               (long long)(pass[0].computed + pass[1].computed), (long long)single->computed,
               bytes / (1 << 20));
    splat__tile_plan_passes_free(pass, part);
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

splat_status splat__attn_passes_ahead_build(const splat__acsr *a, const splat_plan_desc *d,
                                            int trials, int64_t seq_k, const char *arch,
                                            int sm_count, splat__attn_passes_ahead *out) {
  memset(out, 0, sizeof *out);
  /* A bad SPLAT_ATTN_PASSES fails the plan where splat__attn_passes_plan reads it. */
  int on = 1;
  if (splat__attn_passes_env(&on) != SPLAT_OK || !on || !splat__tile_plan_mixes(a) ||
      splat__attn_passes_bytes(d->batch, d->heads, a->seq_q, (int)d->head_dim, d->dtype) >
          (double)SPLAT__ATTN_PASSES_MAX_BYTES)
    return SPLAT_OK;
  /* The 192-row trials' plans beside the passes' own where try_rows may want them (its
   * conditions known before the passes: those on the rows' segments are not). */
  splat_plan_desc d1 = *d;
  d1.ops = SPLAT_OPS_ATTENTION;
  const int q2 =
      trials && pass_rows_dtype_dims(d) && d->tile_q == 128 && splat__tile_rows_try(&d1, arch) ? 192
                                                                                               : 0;
  splat__tile_plan t192[2];
  memset(t192, 0, sizeof t192);
  const double t0 = splat__now_ms();
  splat_status st =
      splat__tile_plan_passes_build(a, d->tile_q, d->tile_k, q2, out->pass, out->part, t192);
  if (st == SPLAT_OK) pass_shapes(out->part, out->pass, out->shape);
  const double t1 = splat__now_ms();
  if (st == SPLAT_OK && trials)
    st = splat__attn_pass_rows_try(out->part, out->pass, out->shape, seq_k, d, arch, sm_count, t192,
                                   &out->trials);
  splat__log(SPLAT__LOG_DEBUG,
             "plan: the passes built ahead in %.2f ms, their 192-row trials weighed in %.2f",
             t1 - t0, splat__now_ms() - t1);
  for (int k = 0; k < 2; k++) splat__tile_plan_free(&t192[k]); /* those try_rows did not take */
  if (st != SPLAT_OK) {
    splat__attn_passes_ahead_free(out);
    return st;
  }
  out->built = 1;
  out->tile_q = d->tile_q;
  out->tile_k = d->tile_k;
  return SPLAT_OK;
}

void splat__attn_passes_ahead_free(splat__attn_passes_ahead *ahead) {
  splat__tile_plan_passes_free(ahead->pass, ahead->part);
  splat__attn_pass_trials_free(&ahead->trials);
  ahead->built = ahead->taken = 0;
}

/* The passes' 192-row trials (splat__attn_pass_rows_try), one job each (core/parallel.h). */
typedef struct rows_jobs {
  const splat__acsr *part;
  const splat__tile_plan *pass;
  const splat__attn_pass_shape *shape;
  int64_t seq_k;
  const splat_plan_desc *d;
  const char *arch;
  int sm_count;
  splat__tile_plan *built; /* the 192-row plans built already ([k] empty: not built) or NULL */
  splat__attn_pass_trials *trials;
} rows_jobs;

/* Pass k's 192-row tile plan where the rule takes it for the pass alone (its kernel and,
 * for pass 2, the views pass 1 leaves are weighed after). */
static splat_status try_rows(void *arg, int k) {
  rows_jobs *j = arg;
  /* Pass 1 of up to two segments a row (the window of strided | window, split around its
   * lattice points): with more, the kernel drops to 3 stages, and at head_dim 64 with 8 its
   * pass-1 epilogue spills; neither was measured. Pass 2 of one (a lattice): with two, its
   * merge spills 4 bytes. */
  if (!pass_rows_dtype_dims(j->d) || j->pass[k].tile_q != 128 || j->pass[k].tile_k != 128 ||
      j->shape[k].segs > (k == 0 ? 2 : 1))
    return SPLAT_OK;
  splat_plan_desc d1 = *j->d;
  d1.ops = SPLAT_OPS_ATTENTION;
  d1.tile_k = j->pass[k].tile_k; /* the 192-row plan's key tile: the pass's */
  if (j->built && j->built[k].tiles) {
    if (!splat__tile_rows_try(&d1, j->arch)) return SPLAT_OK;
    j->trials->t192[k] = j->built[k];
    memset(&j->built[k], 0, sizeof j->built[k]); /* the trial's now */
    splat__tile_rows_choose_built(&j->part[k], &j->pass[k], j->seq_k, &d1, j->sm_count, k,
                                  &j->trials->t192[k], &j->trials->chosen[k]);
    return SPLAT_OK;
  }
  return splat__tile_rows_choose(&j->part[k], &j->pass[k], j->seq_k, &d1, j->arch, j->sm_count, k,
                                 &j->trials->t192[k], &j->trials->chosen[k]);
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

splat_status splat__attn_pass_rows_try(const splat__acsr part[2], const splat__tile_plan pass[2],
                                       const splat__attn_pass_shape shape[2], int64_t seq_k,
                                       const splat_plan_desc *d, const char *arch, int sm_count,
                                       splat__tile_plan built[2], splat__attn_pass_trials *trials) {
  memset(trials, 0, sizeof *trials);
  rows_jobs j = {part, pass, shape, seq_k, d, arch, sm_count, built, trials};
  const splat_status st = splat__parallel_run(try_rows, &j, 2);
  if (st != SPLAT_OK) splat__attn_pass_trials_free(trials);
  return st;
}

void splat__attn_pass_trials_free(splat__attn_pass_trials *trials) {
  for (int k = 0; k < 2; k++) {
    splat__tile_plan_free(&trials->t192[k]);
    trials->chosen[k] = 0;
  }
}

splat_status splat__attn_pass_rows(const splat__acsr part[2], splat__tile_plan pass[2],
                                   splat__attn_pass_shape shape[2], const splat_report *rep,
                                   int64_t seq_k, const splat_plan_desc *d, const char *arch,
                                   int sm_count, int smem_optin, splat__attn_pass_trials *ahead,
                                   int take[2]) {
  take[0] = take[1] = 0;
  splat__attn_pass_trials own;
  splat__attn_pass_trials *trials = ahead ? ahead : &own;
  splat_status st =
      ahead ? SPLAT_OK
            : splat__attn_pass_rows_try(part, pass, shape, seq_k, d, arch, sm_count, NULL, &own);
  for (int k = 0; k < 2 && st == SPLAT_OK; k++) {
    if (trials->chosen[k])
      st = take_rows(pass, shape, k, &trials->t192[k], rep, seq_k, d, arch, smem_optin, &take[k]);
  }
  splat__attn_pass_trials_free(trials); /* untaken, or after a failure */
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
                                           int head_dim, splat_dtype dt, int64_t batch,
                                           int64_t heads, const char *arch, int sm_count,
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
    st = splat__attn_passes_plan(&a, &single, batch, heads, head_dim, dt, NULL, pass, part, shape,
                                 &npass);
  if (st == SPLAT_OK && npass && tile_q == 128) {
    const splat_plan_desc d = {
        batch, heads, heads, head_dim, dt, 0, tile_k, SPLAT_MAX_SEGMENTS, SPLAT_OPS_ATTENTION};
    splat_report rep;
    memset(&rep, 0, sizeof rep);
    int take[2];
    st = splat__attn_pass_rows(part, pass, shape, &rep, a.seq_k, &d, arch, sm_count, 0, NULL, take);
  }
  if (npass) {
    *two_pass = st == SPLAT_OK;
    splat__tile_plan_passes_free(pass, part);
  }
  int max_ktiles = 0;
  if (st == SPLAT_OK && !npass) st = splat__attn_split_env(&max_ktiles);
  *split = max_ktiles > 0;
  splat__tile_plan_free(&single);
  splat__acsr_free(&a);
  return st;
}
