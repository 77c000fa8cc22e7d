/* attn_passes.h — whether a plan's fused attention runs as two passes (tile_plan.h
 * splat__tile_plan_passes: strided segments in one, contiguous ones in the other, each
 * with its own ACSR and row order), and the per-row workspace that carries pass 1's
 * results to pass 2 (kernels/attention_common.cuh SPLAT_ROWPART_BYTES, written by
 * splat_attn_store_rowpart or the staged epilogue, merged by splat_attn_merge_ml). */
#ifndef SPLAT_CUDA_ATTN_PASSES_H
#define SPLAT_CUDA_ATTN_PASSES_H

#include <stdint.h>

#include "analysis/tile_plan.h"
#include "cuda/kgen.h"
#include "splat.h"

/* The workspace is [batch * heads][seq_q] rows of SPLAT_ROWPART_BYTES (params.cuh);
 * above this many bytes the plan keeps a single pass. The cap is high: one pass of a mask
 * two passes serve computes nearly dense tiles (strided(64) | window(64) at 65536, d128,
 * batch 2: 6.5x slower than two passes with their 1.1 GB workspace, bench/NOTES.md v9). */
#define SPLAT__ATTN_PASSES_MAX_BYTES (4ull << 30)

/* SPLAT_ATTN_PASSES: 1 (default, also unset or empty): two passes where they compute
 * less; 0: never; anything else is SPLAT_ERR_INVALID_ARGUMENT with a sentence. */
splat_status splat__attn_passes_env(int *on);

/* Bytes of the per-row workspace of a two-pass plan of dtype dt. */
double splat__attn_passes_bytes(int64_t batch, int64_t heads, int64_t seq_q, int head_dim,
                                splat_dtype dt);

/* What each pass's tile kernel is specialised for (kgen.h splat__kspec_for_pass): the most
 * segments a regular row has in the pass, its plan's query and key tiles (tile_plan.h: the
 * key tile half the single plan's where that computes less; the query tile 192 where
 * splat__attn_pass_rows takes it), the most rows of one of its query tiles, and whether its
 * kernel has three consumer warpgroups (wg3: a pass on 192-row tiles that TMA serves whole,
 * as splat__attn_pass_rows checked). */
typedef struct splat__attn_pass_shape {
  int segs, tile_q, tile_k, tile_rows, wg3;
} splat__attn_pass_shape;

/* Each pass's 192-row tile plan where the rule of tile_rows.h chose it for the pass alone
 * (chosen[k]; splat__attn_pass_rows_try), before its kernel is weighed
 * (splat__attn_pass_rows). */
typedef struct splat__attn_pass_trials {
  splat__tile_plan t192[2];
  int chosen[2];
} splat__attn_pass_trials;

/* The two passes built ahead: plan creation builds them beside the single plan (core/plan.c,
 * on other threads; cuda/backend.h splat__cuda_plan_passes_ahead), where the mask mixes
 * segment kinds, and splat__attn_passes_plan weighs them once the single plan is known. */
typedef struct splat__attn_passes_ahead {
  int built;          /* 0: nothing was built (one kind of segment, SPLAT_ATTN_PASSES=0, ...) */
  int taken;          /* 1: splat__attn_passes_plan took the passes (not the trials) */
  int tile_q, tile_k; /* the tiles they were built on (the single plan's at 128 rows) */
  splat__tile_plan pass[2];
  splat__acsr part[2];
  splat__attn_pass_shape shape[2];
  splat__attn_pass_trials trials; /* their 192-row trials, where query tiles are left to splat */
} splat__attn_passes_ahead;

/* Builds the passes ahead for a plan of ACSR a and description d (its tile_q and tile_k, the
 * workspace of its batch x heads x head_dim in its dtype) whose keys number seq_k, with
 * their 192-row trials where `trials` (on arch with sm_count SMs, as splat__attn_pass_rows),
 * when SPLAT_ATTN_PASSES allows, a mixes segment kinds (tile_plan.h
 * splat__tile_plan_mixes) and the workspace fits SPLAT__ATTN_PASSES_MAX_BYTES; else
 * out->built = 0. Free with splat__attn_passes_ahead_free. */
splat_status splat__attn_passes_ahead_build(const splat__acsr *a, const splat_plan_desc *d,
                                            int trials, int64_t seq_k, const char *arch,
                                            int sm_count, splat__attn_passes_ahead *out);
void splat__attn_passes_ahead_free(splat__attn_passes_ahead *ahead);

/* The two passes of the fused attention for a plan with ACSR a, single tile plan `single`
 * and batch x heads x head_dim of dtype dt, when SPLAT_ATTN_PASSES allows, two passes compute at
 * most 3/4 of the single plan, and the workspace fits SPLAT__ATTN_PASSES_MAX_BYTES: *npass = 2 with
 * pass[0], pass[1] built and their ACSRs in part[0], part[1] (tile_plan.h
 * splat__tile_plan_passes_free) and their shapes in shape[0], shape[1]. Else *npass = 0. The
 * passes are taken from `ahead` where it holds them built on single's tiles (it keeps its
 * trials; NULL or else: built here). */
splat_status splat__attn_passes_plan(const splat__acsr *a, const splat__tile_plan *single,
                                     int64_t batch, int64_t heads, int head_dim, splat_dtype dt,
                                     splat__attn_passes_ahead *ahead, splat__tile_plan pass[2],
                                     splat__acsr part[2], splat__attn_pass_shape shape[2],
                                     int *npass);

/* Each pass of a two-pass plan on 192-row query tiles where the rule of tile_rows.h
 * (splat__tile_rows_choose) takes them for the pass's own ACSR part[k] and 128-row plan
 * pass[k] (pass 2's warpgroups counted with the idle ones: its phase classes need not fill
 * whole 192-row tiles), for a plan of description d (query tiles left to splat; the pass plans
 * serve only the fused attention, so d's other ops do not matter) on a device of arch with
 * sm_count SMs (0: unknown) and smem_optin bytes of shared memory (0: no limit), and the
 * kernel splat__kspec_for_pass makes for it has three consumer warpgroups. In bf16 only
 * (f16's fp32 workspace rows spill within three warpgroups' 160 registers in pass 1's
 * epilogue, and do not fit staged beside pass 2's stages), pass 1 of one or two segments a
 * row and pass 2 of one (attn_passes.c says why). Then pass[k] and shape[k] become the
 * 192-row plan's and take[k] = 1; else both stay as they are and take[k] = 0. The rule's
 * trials are `ahead`'s where not NULL (splat__attn_pass_rows_try; taken or freed here), else
 * run here. Fails as splat__tile_rows_choose and splat__kspec_for_pass. */
splat_status splat__attn_pass_rows(const splat__acsr part[2], splat__tile_plan pass[2],
                                   splat__attn_pass_shape shape[2], const splat_report *rep,
                                   int64_t seq_k, const splat_plan_desc *d, const char *arch,
                                   int sm_count, int smem_optin, splat__attn_pass_trials *ahead,
                                   int take[2]);
/* The trials of splat__attn_pass_rows alone (the rule of tile_rows.h for each pass, on two
 * threads), into *trials (free with splat__attn_pass_trials_free; on failure nothing held).
 * A pass's 192-row plan is taken from built[k] where that holds one (built beside the
 * pass's own on key tiles of its width: tile_plan.h splat__tile_plan_passes_build; the
 * caller frees what is left), else built here; built may be NULL. */
splat_status splat__attn_pass_rows_try(const splat__acsr part[2], const splat__tile_plan pass[2],
                                       const splat__attn_pass_shape shape[2], int64_t seq_k,
                                       const splat_plan_desc *d, const char *arch, int sm_count,
                                       splat__tile_plan built[2], splat__attn_pass_trials *trials);
void splat__attn_pass_trials_free(splat__attn_pass_trials *trials);

/* Each pass's attention tile spec for its shape (kgen.h splat__kspec_for_pass), in
 * spec[0..1], for a plan of report rep, dtype dt and head_dim on arch with smem_optin bytes
 * of shared memory (0: no limit); *ok = 1 when both have a tile kernel, else 0 and the plan
 * runs one pass (a pass's kernel may exceed the shared memory where the single plan's does
 * not: its contiguous segments split around lattice points). Fails as
 * splat__kspec_for_pass. */
splat_status splat__attn_pass_specs(splat__kspec spec[2], const splat__attn_pass_shape shape[2],
                                    const splat_report *rep, splat_dtype dt, int head_dim,
                                    int smem_optin, const char *arch, int *ok);

/* For `splat codegen` (no plan, no GPU): whether a plan of pattern p with the default K
 * and tile shape tile_q x tile_k would run its fused attention in two passes (as
 * splat__attn_passes_plan decides it for batch x heads), in *two_pass, with the passes'
 * shapes in shape[0..1] (each on 192-row tiles where splat__attn_pass_rows takes them on arch
 * with sm_count SMs, 0: unknown, tile_q 128 being splat's default), and whether
 * SPLAT_ATTN_SPLIT asks for split tiles (one pass only), in *split. */
splat_status splat__attn_passes_of_pattern(const splat_pattern *p, int tile_q, int tile_k,
                                           int head_dim, splat_dtype dt, int64_t batch,
                                           int64_t heads, const char *arch, int sm_count,
                                           int *two_pass, splat__attn_pass_shape shape[2],
                                           int *split);

#endif
