/* tile_rows.c — whether a CUDA plan trades its 128-row query tiles for 192-row ones
 * (tile_rows.h), and the warpgroups' work that decides it. Three consumer warpgroups on
 * 192-row tiles give each K / V sub-tile a third 64-row chain of wgmma and online softmax.
 * H100, head_dim 64, the default's time over 192 rows' (bench/NOTES.md v59):
 *   - windows, causal and dilated windows, blocked(384), causal, fixed(256,32): 1.05-1.17x
 *     at 16384, 1.02-1.08x at 4096 (batch 2, 16 heads: 704 items, 5.3 rounds of 132 SMs).
 *     Their warpgroups compute the same sub-tiles at either tile (a warpgroup skips the
 *     predicated sub-tiles its 64 rows do not touch), even where the plan computes 1.2-1.34x
 *     the elements (window(128)).
 *   - BigBird 0.95x: its warpgroups compute 1.21-1.27x the sub-tiles (random blocks that
 *     one of three row blocks needs); longformer(256,64) 1.00-1.04x at 1.07x the sub-tiles.
 *   - blocked(512) 0.94x at 4096, 1.02x at 16384: its 128-row tiles are all full, the
 *     192-row tiles that straddle its blocks predicated (the same sub-tiles computed). At
 *     head_dim 32 and 48, whose sub-tiles cost less, it gains 1.03-1.10x.
 * So: at most 5% more sub-tiles; above head_dim 48, where the 128-row plan runs nearly all its
 * key tiles full (at most 10% predicated), not 15 points more of them predicated (blocked(512):
 * 0-3% -> 37-40%; causal 0.4-6% -> 0.8-12%, fixed(256,32) at 16384 6% -> 16% gain; above
 * head_dim 64, 30 points: blocked(1024), 0 -> 21%, gains there, bench/NOTES.md v76); and at
 * least 4 rounds of items: fewer, longer items leave more of the last round empty (windows,
 * causal and dilated windows with batch 1: 1.3 rounds (2048) 0.87-0.92x, 2.7 rounds (4096)
 * 1.02x, against 5.3 rounds (4096, batch 2) 1.03-1.05x). */
#include "cuda/tile_rows.h"

#include <string.h>

#include "../../kernels/seg_interval.cuh"
#include "core/log.h"
#include "cuda/kgen.h"
#include "cuda/tile_split.h"
#include "cuda/tma_views.h"

int splat__tile_rows_try(const splat_plan_desc *d, const char *arch) {
  if (d->ops != SPLAT_OPS_ATTENTION || d->tile_k != 128 || !arch || strcmp(arch, "sm_90a") ||
      !splat__kspec_rows192(d->dtype, d->head_dim))
    return 0;
  /* The kernel options as their own parsers read them (a bad value: no, and plan creation
   * fails later with the parser's sentence). */
  int kind, warpgroups, kt, tma, split;
  return splat__kspec_env_attn(&kind, &warpgroups, &kt) == SPLAT_OK && kind == SPLAT__WGMMA_WS &&
         !warpgroups && kt != 64 && splat__tma_env(&tma) == SPLAT_OK && tma &&
         splat__attn_split_env(&split) == SPLAT_OK && !split;
}

/* The share of plan t's key tiles that are predicated (0 without key tiles). */
static double predicated_share(const splat__tile_plan *t) {
  const int64_t n = t->full_tiles + t->predicated_tiles;
  return n ? (double)t->predicated_tiles / (double)n : 0;
}

/* splat__tile_rows_prefer_192, with the straddle test (SPLAT__TILE_ROWS_FULL ..) or without. */
static int prefer(const splat__tile_rows_case *c, int straddle_test) {
  const splat__tile_plan *a = c->t128, *b = c->t192;
  if (!c->served || c->two_pass || splat__tile_plan_max_rows(b) <= 128) return 0;
  const double max_work = c->idle ? SPLAT__TILE_ROWS_MAX_SLOTS : SPLAT__TILE_ROWS_MAX_WORK;
  if ((double)c->work192 > max_work * (double)c->work128) return 0;
  /* Rounds of 192-row items (sm_count unknown: as few as the straddle test needs). */
  const double rounds =
      c->sm_count > 0 ? (double)c->bh * (double)b->ntiles / (double)c->sm_count : 0;
  const double pa = predicated_share(a), pb = predicated_share(b);
  if (straddle_test && c->head_dim > 48 &&
      (c->head_dim > 64 || rounds < SPLAT__TILE_ROWS_STRADDLE_ROUNDS) &&
      pa <= SPLAT__TILE_ROWS_FULL &&
      pb - pa > (c->head_dim > 64 ? SPLAT__TILE_ROWS_MORE_PREDICATED_WIDE
                                  : SPLAT__TILE_ROWS_MORE_PREDICATED))
    return 0;
  return c->sm_count <= 0 || rounds >= (c->head_dim > 64 ? SPLAT__TILE_ROWS_MIN_ROUNDS_WIDE
                                                         : SPLAT__TILE_ROWS_MIN_ROUNDS);
}

int splat__tile_rows_prefer_192(const splat__tile_rows_case *c) {
  return prefer(c, 1);
}

splat_status splat__tile_rows_choose(const splat__acsr *a, const splat__tile_plan *t128,
                                     int64_t seq_k, const splat_plan_desc *d, const char *arch,
                                     int sm_count, int idle, splat__tile_plan *t192, int *take) {
  *take = 0;
  if (!splat__tile_rows_try(d, arch)) return SPLAT_OK;
  splat_status st = splat__tile_plan_build(a, 192, d->tile_k, t192);
  if (st != SPLAT_OK) return st;
  splat__tile_rows_choose_built(a, t128, seq_k, d, sm_count, idle, t192, take);
  return SPLAT_OK;
}

/* Fills c's TMA and pass checks and its work counts for its 192-row plan. */
static void weigh(splat__tile_rows_case *c, const splat__acsr *a, int64_t seq_k) {
  c->served = splat__tma_serves_plan(c->t192, seq_k);
  c->two_pass = splat__tile_plan_may_pass(a, c->t192);
  if (c->served && !c->two_pass) {
    c->work128 = splat__tile_rows_work(a, c->t128, c->idle ? 2 : 0);
    c->work192 = splat__tile_rows_work(a, c->t192, c->idle ? 3 : 0);
  }
}

void splat__tile_rows_choose_built(const splat__acsr *a, const splat__tile_plan *t128,
                                   int64_t seq_k, const splat_plan_desc *d, int sm_count, int idle,
                                   splat__tile_plan *t192, int *take) {
  splat__tile_rows_case c = {t128,    t192, 0, 0, idle, 0, 0, (int)d->head_dim, d->batch * d->heads,
                             sm_count};
  weigh(&c, a, seq_k);
  *take = prefer(&c, 1);
  if (*take) {
    splat__log(SPLAT__LOG_DEBUG,
               "plan: 192-row query tiles (their warpgroups' sub-tiles: %.3fx the 128-row "
               "tiles')",
               (double)c.work192 / (double)c.work128);
    return;
  }
  const int straddled = prefer(&c, 0); /* the straddle test alone refused them */
  splat__tile_plan_free(t192);
  /* Tiles cut at the rows' stretches (the blocks the 192-row tiles straddle), their idle
   * warpgroups counted: built only here, where the straddle test alone refused the plain
   * 192-row tiles, at head_dim 49 .. 64 (at 128, blocked(512) runs 0.98x on them; a failure
   * to build them leaves the 128-row plan). */
  splat__tile_plan cut;
  int made = 0;
  if (!straddled || d->head_dim > 64 ||
      splat__tile_plan_build_cut(a, 192, d->tile_k, &cut, &made) != SPLAT_OK || !made)
    return;
  c.t192 = &cut;
  c.idle = 1;
  c.work128 = c.work192 = 0;
  weigh(&c, a, seq_k);
  *take = prefer(&c, 1);
  if (!*take) {
    splat__tile_plan_free(&cut);
    return;
  }
  *t192 = cut;
  splat__log(SPLAT__LOG_DEBUG,
             "plan: 192-row query tiles cut at the rows' stretches (their warpgroups' sub-tiles, "
             "idle ones counted: %.3fx the 128-row tiles')",
             (double)c.work192 / (double)c.work128);
}

int64_t splat__tile_rows_work(const splat__acsr *a, const splat__tile_plan *t, int blocks) {
  int64_t work = 0;
  for (int64_t q = 0; q < t->ntiles; q++) {
    const splat__query_tile *qt = &t->tiles[q];
    const splat__key_run *runs = t->runs + qt->run_begin;
    int64_t heaviest = 0; /* the most sub-tiles of one of the tile's blocks */
    const int32_t nblocks = (qt->nrows + 63) / 64;
    for (int32_t rb = 0; rb < qt->nrows; rb += 64) {
      const int64_t before = work;
      const int64_t p0 = qt->row_begin + rb;
      const int64_t p1 = p0 + (qt->nrows - rb < 64 ? qt->nrows - rb : 64);
      splat__key_group hull_of = {0, 0, 0}; /* the group of lo..hi (stride 0: none yet) */
      int32_t lo = INT32_MAX, hi = INT32_MIN;
      for (int32_t i = 0; i < qt->nruns; i++) {
        const splat__key_run *r = &runs[i];
        if (!r->predicate) {
          work += r->ntiles;
          continue;
        }
        const splat__key_group g = r->group;
        if (g.phase != hull_of.phase || g.stride != hull_of.stride || g.width != hull_of.width) {
          hull_of = g; /* the hull of the block's intervals in the run's group */
          lo = INT32_MAX, hi = INT32_MIN;
          for (int64_t p = p0; p < p1; p++) {
            const int64_t row = t->permuted ? t->perm[p] : p;
            for (int64_t s = a->row_seg[row]; s < a->row_seg[row + 1]; s++) {
              const splat__segment e = a->segs[s];
              int32_t l, h;
              if (splat_seg_ival(e.start, e.stride, e.count, e.width, g.phase, g.stride, g.width,
                                 &l, &h)) {
                lo = l < lo ? l : lo;
                hi = h > hi ? h : hi;
              }
            }
          }
        }
        if (lo > hi) continue;
        const int64_t k0 = lo <= r->base ? 0 : ((int64_t)lo - r->base) / t->tile_k;
        int64_t k1 = hi < r->base ? -1 : ((int64_t)hi - r->base) / t->tile_k;
        if (k1 > r->ntiles - 1) k1 = r->ntiles - 1;
        if (k1 >= k0) work += k1 - k0 + 1;
      }
      if (work - before > heaviest) heaviest = work - before;
    }
    if (blocks > nblocks) work += (blocks - nblocks) * heaviest;
  }
  return work;
}
