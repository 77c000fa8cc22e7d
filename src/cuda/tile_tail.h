/* tile_tail.h — the last round of a persistent grid's work items: the warp-specialised
 * attention kernel walks its items (query tile x batch*head) in rounds of one item a CTA,
 * heaviest tiles first (cuda_backend.c dev_plan), so when the items do not fill whole
 * rounds the CTAs of the last one finish a whole item after the others. Splitting a few
 * tiles into 64-row tiles (one consumer warpgroup's rows: light items) lets the last round
 * take light items instead. Pure C. */
#ifndef SPLAT_CUDA_TILE_TAIL_H
#define SPLAT_CUDA_TILE_TAIL_H

#include <stdint.h>

#include "analysis/tile_plan.h"
#include "splat.h"

/* Splits m tiles of plan t with more than `rows` rows (the lightest by rows x key tiles, the
 * later of equal ones first) into tiles of `rows` rows, each with its own copy of the
 * tile's key runs (a run's interval table describes its own tile's rows). The plan's tile
 * and run arrays are replaced (runs in tile order); its counts of full and predicated key
 * tiles and computed elements stay those of the tiles before the split (the same rows meet
 * the same key tiles; the copies would triple them, and plan choices compare `computed`).
 * m larger than the tiles that qualify splits all of them. */
splat_status splat__tile_tail_split(splat__tile_plan *t, int64_t m, int rows);

/* A part's item against its whole tile's, and the most tiles the plan splits (H100, bf16,
 * head_dim 64, batch 2, 16 heads at 4096 on 192-row tiles: one split tile 0.93x the time at
 * window(95), 0.97x window(256), 0.98x causal & window(512,0), 0.99-1.00x window(64) and
 * dilated(256,2); two 1.01-1.07x on the windows: bench/NOTES.md v71). The share fits none
 * of them exactly (0.6 at window(95), ~0.95 at window(64), whose items are mostly fixed
 * cost); with at most one tile split it only decides whether one pays. */
#define SPLAT__TILE_TAIL_LIGHT 0.8
#define SPLAT__TILE_TAIL_MOST 1

/* m, or less so that at least one tile of more than `keep` rows stays whole (the kernel of
 * three consumer warpgroups needs a tile of more than 128: kgen.c). */
int64_t splat__tile_tail_cap(const splat__tile_plan *t, int64_t m, int keep);

/* SPLAT_ATTN_TAIL: unset or empty, *m = -1 (splat__tile_tail_choose decides); N >= 0 splits
 * N tiles (0: none); anything else is SPLAT_ERR_INVALID_ARGUMENT with a sentence. */
splat_status splat__tile_tail_env(int64_t *m);

/* Past this many rounds of items (tiles x batch*heads over the grid's CTAs) the last round's
 * share is small and no tile is split. */
#define SPLAT__TILE_TAIL_MAX_ROUNDS 16

/* How many tiles (0 .. most) splat__tile_tail_split should split into parts of `rows` rows
 * for a grid of `ctas` CTAs walking bh items a tile of plan t round-robin, heaviest tiles
 * first: the count whose last CTA finishes first (the fewest of equal ones), an item costing
 * its tile's key tiles, times `light` for a part (one consumer warpgroup's rows). 0 past
 * SPLAT__TILE_TAIL_MAX_ROUNDS rounds or without memory. */
int64_t splat__tile_tail_choose(const splat__tile_plan *t, int64_t bh, int64_t ctas, int rows,
                                double light, int64_t most);

/* The whole last-round step for the 192-row plan t of a three-warpgroup kernel whose grid has
 * `ctas` CTAs walking bh items a tile: the tiles SPLAT_ATTN_TAIL names, else (with
 * SPLAT_ATTN_PERSISTENT on; off, one CTA an item has no last round) those
 * splat__tile_tail_choose picks, capped by splat__tile_tail_cap(t, m, 128) so the kernel stays
 * the plan's, split into 64-row tiles; *split is how many (0: t unchanged). Reads
 * SPLAT_ATTN_TAIL, then SPLAT_ATTN_PERSISTENT, and fails on the first bad one; or as
 * splat__tile_tail_split. */
splat_status splat__tile_tail_apply(splat__tile_plan *t, int64_t bh, int64_t ctas, int64_t *split);

#endif
