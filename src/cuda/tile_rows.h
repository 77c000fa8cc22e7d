/* tile_rows.h — the query tile of a CUDA plan whose description leaves it to splat
 * (splat_plan_desc.tile_q 0): the analysis tiles the pattern at 128 rows; where three
 * consumer warpgroups of the sm_90a warp-specialised kernel would run its fused attention
 * on tiles of 192 rows, and those tiles compute little more, the plan takes 192-row tiles
 * instead (splat__tile_rows_choose, which `splat codegen` calls, and attn_passes.c
 * splat__attn_pass_rows for each pass of a two-pass plan; cuda_backend.c
 * splat__cuda_plan_tile_rows weighs the 192-row plan the analysis built beside the 128-row
 * one with splat__tile_rows_choose_built; docs/cuda.md "Query tiles"; bench/NOTES.md v58, v59, v60,
 * v61, v74). Pure C. */
#ifndef SPLAT_CUDA_TILE_ROWS_H
#define SPLAT_CUDA_TILE_ROWS_H

#include <stdint.h>

#include "analysis/acsr.h"
#include "analysis/tile_plan.h"
#include "splat.h"

/* Whether a plan of description d on a device of arch is worth tiling again at 192 rows:
 * fused attention only (ops SPLAT_OPS_ATTENTION: the unfused kernels take 192-row tiles as
 * row blocks, no faster), key tiles of 128, sm_90a, splat__kspec_rows192's dtypes and
 * head_dims, and the environment's defaults for the kernel (SPLAT_ATTN_WARPGROUPS unset;
 * SPLAT_ATTN_WS, SPLAT_ATTN_KT, SPLAT_ATTN_TMA and SPLAT_ATTN_SPLIT unset or at their
 * defaults 1, 128, 1 and 0: another value asks for another kernel, and a bad one fails plan
 * creation later with its own message). */
int splat__tile_rows_try(const splat_plan_desc *d, const char *arch);

/* What the choice between the two tile plans of one pattern weighs. */
typedef struct splat__tile_rows_case {
  const splat__tile_plan *t128, *t192; /* the 128-row and 192-row tile plans */
  int64_t work128, work192;            /* their warpgroups' sub-tiles (splat__tile_rows_work) */
  int idle;     /* the work counts idle warpgroups (pass 2 of two: SPLAT__TILE_ROWS_MAX_SLOTS) */
  int served;   /* TMA views serve every key sub-tile of the 192-row plan (tma_views.h) */
  int two_pass; /* its fused attention may run two passes (splat__tile_plan_may_pass) */
  int head_dim;
  int64_t bh;   /* batch x heads: work items per query tile */
  int sm_count; /* the device's SMs (0: unknown, the rounds not counted) */
} splat__tile_rows_case;

/* The most sub-tiles the 192-row plan's warpgroups may compute per sub-tile of the 128-row
 * plan's, and the fewest rounds of 192-row work items over the SMs (tile_rows.c says why). */
#define SPLAT__TILE_ROWS_MAX_WORK 1.05
/* Pass 2 of a two-pass plan (its phase classes, attn_passes.c): the most sub-tiles the
 * 192-row plan's warpgroups may compute, idle ones counted (splat__tile_rows_work), per
 * sub-tile of the 128-row plan's. A class of 1024 rows (strided(64) at 65536) is five tiles
 * of 192 rows and one of 64, whose item leaves two of three warpgroups idle: 1.125x; one of
 * 256 (at 16384), 192 + 64: 1.5x (tile_rows.c says what was measured). */
#define SPLAT__TILE_ROWS_MAX_SLOTS 1.15
#define SPLAT__TILE_ROWS_MIN_ROUNDS 4
/* Above head_dim 64 (128 columns, three warpgroups on 64-key sub-tiles): window(256), causal
 * and dilated windows 0.94-1.00x at 5.3 rounds (4096, batch 2, 16 heads), 1.05-1.06x at 21
 * (16384) on an H100 (bench/NOTES.md v73). */
#define SPLAT__TILE_ROWS_MIN_ROUNDS_WIDE 16
/* Above head_dim 48 (at head_dim 49 .. 64 only below SPLAT__TILE_ROWS_STRADDLE_ROUNDS rounds
 * of 192-row items, or with the SMs unknown): a 128-row plan with at most this share of its
 * key tiles predicated keeps 128 rows where the 192-row plan's share is more than
 * SPLAT__TILE_ROWS_MORE_PREDICATED higher (blocks that 192-row tiles straddle: their items
 * are the heaviest, and weigh on the last round). From 16 rounds at head_dim 64 they run
 * 1.03-1.08x faster than 128-row tiles (blocked(512), (640), (1024) at 16384 and 65536 on an
 * H100), at 128 blocked(512) 0.97-0.98x (bench/NOTES.md v74). */
#define SPLAT__TILE_ROWS_FULL 0.10
#define SPLAT__TILE_ROWS_MORE_PREDICATED 0.15
/* The same above head_dim 64, where the test applies at any round count: blocked(1024), 21-22
 * points more predicated, runs 1.09x (16384) and 1.05x (65536) faster on 192-row tiles,
 * blocked(512), 39-40 points more, 0.97-0.98x (H100, bench/NOTES.md v76). */
#define SPLAT__TILE_ROWS_MORE_PREDICATED_WIDE 0.30
#define SPLAT__TILE_ROWS_STRADDLE_ROUNDS 16

/* 1 when the 192-row plan should replace the 128-row one: it runs on three consumer
 * warpgroups (served, no two passes, tiles of more than 128 rows); its warpgroups compute at
 * most SPLAT__TILE_ROWS_MAX_WORK times the sub-tiles (idle: SPLAT__TILE_ROWS_MAX_SLOTS); above
 * head_dim 48 (at 64 and below, below 16 rounds), it does not predicate much more of a plan
 * the 128-row one runs nearly full (SPLAT__TILE_ROWS_FULL, SPLAT__TILE_ROWS_MORE_PREDICATED,
 * above head_dim 64 SPLAT__TILE_ROWS_MORE_PREDICATED_WIDE; SPLAT__TILE_ROWS_STRADDLE_ROUNDS);
 * and its work items fill at least
 * SPLAT__TILE_ROWS_MIN_ROUNDS rounds of the SMs (SPLAT__TILE_ROWS_MIN_ROUNDS_WIDE above
 * head_dim 64; where sm_count is known). */
int splat__tile_rows_prefer_192(const splat__tile_rows_case *c);

/* The whole choice for a plan of description d (tile_q left to splat, the rest as plan
 * creation fills it) on a device of arch with sm_count SMs (0: unknown), whose analysis gave
 * ACSR a over seq_k keys and the 128-row tile plan t128, its warpgroups' work counted with
 * the idle ones where idle is 1 (pass 2 of a two-pass plan): where splat__tile_rows_try and then
 * splat__tile_rows_prefer_192 take 192-row tiles, *take = 1 and the 192-row tile plan in
 * *t192 (the caller frees it); else *take = 0 and nothing is kept. Fails as
 * splat__tile_plan_build (out of memory). */
splat_status splat__tile_rows_choose(const splat__acsr *a, const splat__tile_plan *t128,
                                     int64_t seq_k, const splat_plan_desc *d, const char *arch,
                                     int sm_count, int idle, splat__tile_plan *t192, int *take);
/* The same choice where the caller built the 192-row tile plan *t192 already (at 192 rows
 * and d->tile_k, beside the 128-row one: plan creation builds the two at once) and
 * splat__tile_rows_try holds: *take = 1 keeps it in *t192, else it is freed. Where it loses,
 * the plan cut at the rows' stretches (tile_plan.h splat__tile_plan_build_cut: blocks that
 * 192-row tiles straddle) is built and weighed as pass 2's are, its idle warpgroups counted,
 * where the straddle test (SPLAT__TILE_ROWS_FULL ..) alone refused the plain tiles, at
 * head_dim 49 .. 64; *take = 1 then puts that one in *t192. */
void splat__tile_rows_choose_built(const splat__acsr *a, const splat__tile_plan *t128,
                                   int64_t seq_k, const splat_plan_desc *d, int sm_count, int idle,
                                   splat__tile_plan *t192, int *take);

/* The consumer warpgroups' 128-key sub-tiles of plan t over pattern a: over its query
 * tiles' 64-row blocks, every key tile of a full run, and the key tiles of a predicated run
 * that meet the hull of the block's rows' intervals in its group (a warpgroup skips the
 * others). With blocks > 0, a tile of fewer rows than blocks x 64 also counts its missing
 * blocks, each as its heaviest one: the idle warpgroups of a kernel of that many, whose
 * item lasts as long as its busiest. Plans of 128-key tiles. */
int64_t splat__tile_rows_work(const splat__acsr *a, const splat__tile_plan *t, int blocks);

#endif
