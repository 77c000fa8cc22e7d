/* tile_plan.h — the tile plan: for each query tile (rows regrouped so a tile shares
 * stride and phase) a short list of key runs over gathered keys, each marked as
 * needing a per-element predicate or not. This is what kernels iterate over. */
#ifndef SPLAT_ANALYSIS_TILE_PLAN_H
#define SPLAT_ANALYSIS_TILE_PLAN_H

#include <stdint.h>

#include "analysis/acsr.h"

/* A group of keys: the lattice key(g) = phase + (g / width) * stride + g % width over
 * gathered indices g >= 0. A segment {o, d, n, w} belongs to group
 * (o mod d, d, w); contiguous segments belong to (0, 1, 1), whose key(g) = g. */
typedef struct splat__key_group {
  int32_t phase, stride, width;
} splat__key_group;

/* A run of key tiles: gathered indices [base, base + ntiles * tile_k) of one group,
 * cut into tiles of tile_k. Keys past seq_k or outside the mask only occur in
 * predicated runs. */
typedef struct splat__key_run {
  splat__key_group group;
  int32_t base;
  int32_t ntiles;
  /* 0: every (row, key) of the run is in the mask, for every row of the tile.
   * 1: element (row, key) counts iff key is in one of the row's segments of this
   *    run's group. */
  int32_t predicate;
} splat__key_run;

typedef struct splat__query_tile {
  int64_t row_begin; /* first position in permuted row order */
  int32_t nrows;     /* 1..tile_q rows, all of one (stride, phase) class */
  int64_t run_begin; /* runs[run_begin .. run_begin + nruns) */
  int32_t nruns;
} splat__query_tile;

typedef struct splat__tile_plan {
  int tile_q, tile_k;
  /* perm[p] = original row at permuted position p ([seq_q]); regular rows come first
   * (positions [0, regular_rows)), irregular rows after. Identity when !permuted. */
  int32_t *perm;
  int permuted;
  int64_t regular_rows;
  splat__query_tile *tiles;
  int64_t ntiles;
  splat__key_run *runs;
  int64_t nruns;
  int64_t full_tiles, predicated_tiles;
  int64_t computed; /* sum over key tiles of tile_q * tile_k */
} splat__tile_plan;

/* Key of gathered index g in group grp. */
static inline int64_t splat__group_key(splat__key_group grp, int64_t g) {
  return grp.phase + (g / grp.width) * grp.stride + g % grp.width;
}
/* Group a segment belongs to. */
splat__key_group splat__segment_group(splat__segment s);

/* Builds the plan over the regular rows of a, choosing between identity order and
 * rows regrouped by (stride, phase) by the smaller computed work. */
splat_status splat__tile_plan_build(const splat__acsr *a, int tile_q, int tile_k,
                                    splat__tile_plan *out);
void splat__tile_plan_free(splat__tile_plan *t);
/* The identity-order plan whose query tiles (of at most tile_q rows) also begin and end
 * every stretch of at least tile_q consecutive regular rows with the same segments (a
 * block of blocked(512) at 192 rows: tiles of 192, 192 and 128 rows, all full, where
 * tiles laid from row 0 straddle the blocks), for the rows' own tile size. *made = 1 with
 * the plan in *out; *made = 0 and nothing held where no stretch edge falls inside such a
 * tile, or the rows would be regrouped (strided segments). Fails as splat__tile_plan_build. */
splat_status splat__tile_plan_build_cut(const splat__acsr *a, int tile_q, int tile_k,
                                        splat__tile_plan *out, int *made);

/* The fused attention in two passes, for masks that mix contiguous and strided segments
 * in one row (strided(64) | window(64)): no single row order aligns both, so the single
 * plan computes nearly dense tiles. Pass 0 plans the contiguous segments alone, pass 1
 * the strided ones (each in its own row order), over the same regular rows; every
 * (row, key) of the mask is in exactly one pass, whose results the kernels merge per row.
 * Where a row's strided segments are one lattice its contiguous ones cut, the lattice
 * points inside them go to the strided pass, so its tiles have no holes (a predicated
 * diagonal cost strided(64) | window(64)'s strided pass a third of its time,
 * bench/NOTES.md v9.3); the contiguous pass has them instead, at its edges. The strided
 * pass comes second and merges: its items are long (a phase class's keys span the
 * sequence) where the contiguous pass's are a window's few sub-tiles, so the merge's
 * workspace reads and epilogue weigh less there (strided(64) | window(64) 5-10% faster on
 * an H200 at 4096 and 16384, and at 65536 with head_dim 128; bench/NOTES.md v9.5). A pass's
 * key tiles are half the single plan's where that computes a fifth less and the single
 * plan's are a multiple of 128 keys (phase classes of 64 keys: strided(64) | window(64) at
 * 4096).
 * *npass = 2 with out[0], out[1] built
 * and each pass's own ACSR in part[0], part[1] (a's rows and remainder: rem_row and
 * rem_cols are a's, shared; splat__tile_plan_passes_free) when the two compute at most 3/4
 * of `single`'s work (tried only when single computes over twice the mask's entries);
 * else *npass = 0 and out and part hold nothing. */
splat_status splat__tile_plan_passes(const splat__acsr *a, const splat__tile_plan *single,
                                     splat__tile_plan out[2], splat__acsr part[2], int *npass);
/* The two passes of splat__tile_plan_passes built on query tiles of tile_q rows and key
 * tiles of tile_k (the single plan's), whatever they compute: plan creation builds them
 * beside the single plan, before that plan is known (cuda/attn_passes.h), and weighs them
 * with splat__tile_plan_passes_pay after. For an a that mixes segment kinds
 * (splat__tile_plan_mixes). With tile_q2 > 0, each pass's plan on query tiles of tile_q2
 * rows is built beside too, into out2[k], where the pass keeps key tiles of tile_k (else
 * out2[k] is empty; out2 may be NULL where tile_q2 is 0). On failure nothing is held. */
splat_status splat__tile_plan_passes_build(const splat__acsr *a, int tile_q, int tile_k,
                                           int tile_q2, splat__tile_plan out[2],
                                           splat__acsr part[2], splat__tile_plan out2[2]);
/* Whether the passes out pay against the single plan: they compute at most 3/4 of its work. */
int splat__tile_plan_passes_pay(const splat__tile_plan out[2], const splat__tile_plan *single);
/* Frees the passes' plans and ACSRs (each may be empty). */
void splat__tile_plan_passes_free(splat__tile_plan out[2], splat__acsr part[2]);
/* The most rows of one query tile of t (0 without tiles). */
int32_t splat__tile_plan_max_rows(const splat__tile_plan *t);

/* Whether splat__tile_plan_passes tries two passes for a and single at all: single computes
 * over twice the mask's entries and the mask has both contiguous and strided segments. Cheap
 * (a pass over the segments); the passes themselves may still compute too much. */
int splat__tile_plan_may_pass(const splat__acsr *a, const splat__tile_plan *single);
/* Whether a has both contiguous (stride 1) and strided segments (a pass over them). */
int splat__tile_plan_mixes(const splat__acsr *a);
/* Frees a pass's ACSR from splat__tile_plan_passes (its row_seg and segs). */
void splat__pass_acsr_free(splat__acsr *part);

#endif
