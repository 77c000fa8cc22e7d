/* kgen.h — the specialisations of splat's own kernels (R-SDDMM, softmax, R-SpMM, simple
 * attention): which kernels a plan needs, their names, their #define prelude, their
 * launch shapes and shared memory. Pure C with no CUDA dependency, so the compile
 * checks and the CLI use it on machines without a GPU. */
#ifndef SPLAT_CUDA_KGEN_H
#define SPLAT_CUDA_KGEN_H

#include <stddef.h>

#include "../../kernels/params.cuh" /* SPLAT_EPI_* */
#include "splat.h"

typedef enum splat__kop {
  SPLAT__KOP_SDDMM = 0,
  SPLAT__KOP_SOFTMAX = 1,
  SPLAT__KOP_SPMM = 2,
  SPLAT__KOP_ATTENTION = 3,
  SPLAT__KOP_COUNT = 4
} splat__kop;

/* The kernels of an op: its row kernel, plus its tile kernel when `tile`; as sources, the
 * programs splat__kspec_programs derives (`program` says which one a spec stands for). */
typedef struct splat__kspec {
  splat__kop op;
  splat_dtype dt;  /* Q, K, V, O */
  splat_dtype vdt; /* ACSR values: scores (sddmm out, softmax in) or probs (spmm in) */
  splat_dtype pdt; /* softmax only: probs out */
  int head_dim;
  int max_segs;    /* K of the plan: interval-table rows */
  int tile;        /* 1: also the tensor-core tile kernel (see splat__kspec_init) */
  int warps;       /* tile kernel: warps per CTA = tile_q / 16 */
  int tile_k;      /* the plan's key tile */
  int kt;          /* key sub-tile the tile kernel iterates (divides tile_k) */
  int stages;      /* shared-memory stages of the key/value gather */
  int row_warps;   /* row kernel: warps (rows) per CTA */
  int wgmma;       /* which sm_90a tile kernel (SPLAT__WGMMA_*), or 0; for sddmm SYNC
                    * means sddmm_wgmma.cuh */
  int write_lanes; /* sddmm tile kernels: lanes per row of the score write-out, 2 or 4 */
  int write_mode;  /* sddmm wgmma kernel: how a row's whole 16-byte chunks of scores go out
                    * (SPLAT__WRITE_*; kernels/sddmm.cuh SPLAT_SDDMM_ROWSTORE) */
  int epi;         /* attention tile kernel: its one epilogue (kernels/params.cuh SPLAT_EPI_*:
                    * PLAIN for one pass without split tiles, SPLIT, or PASS1 for two-pass
                    * plans, whose second pass is a PASS2 kernel of its own) */
  int program;     /* which of the op's kernels a source holds (SPLAT__KPROG_*) */
  int smem_optin;  /* the device's opt-in shared memory per CTA (0: sm_90's 227 KB): pass 2
                    * of two stages its rows where they fit (splat__kspec_tile_smem) */
  int trace;       /* warp-specialised attention: each item's timestamps written over the
                    * log-sum-exp instead of it (SPLAT_ATTN_TRACE=1, kernels/attention_ws.cuh
                    * SPLAT_WS_TRACE; bench/item_trace.py reads them) */
  int gather;      /* warp-specialised attention: 0 for a producer without the cp.async
                    * gather of K and V (three consumer warpgroups: every sub-tile a TMA box;
                    * kernels/attention_ws.cuh SPLAT_WS_GATHER), else 1 */
  int narrow;      /* warp-specialised attention at head_dim 128 (two consumer warpgroups,
                    * at most two segments a row) of a plan whose query tiles have at most
                    * 64 rows: splat__kspec_ws_narrow takes it to one */
} splat__kspec;

/* An op's kernels compile as separate programs, concurrently: its row kernel's; when it has
 * one, its tile kernel's; for the attention tiles of two-pass plans, the second pass's tile
 * kernel's (SPLAT__KPROG_PASS2), and of split plans, the merge kernel's. The row and merge
 * kernels' programs depend on the op, dtypes and head_dim only, so plans that differ in
 * their tile kernels or segment counts share them in the cache. */
enum {
  SPLAT__KPROG_ROWS = 0,
  SPLAT__KPROG_TILE = 1,
  SPLAT__KPROG_PASS2 = 2,
  SPLAT__KPROG_MERGE = 3,
  SPLAT__KPROG_KINDS = 4,
  SPLAT__KPROG_PER_OP = 3, /* programs an op has at most */
  SPLAT__KPROG_MAX = 8     /* a plan's at most: SDDMM 2, softmax 1, SpMM 2, attention 3 */
};

/* The sm_90a attention tile kernels: the warp-specialised attention_ws.cuh (the default)
 * and attention_wgmma.cuh (SPLAT_ATTN_WS=0, and where the other does not fit). */
enum { SPLAT__WGMMA_NONE = 0, SPLAT__WGMMA_SYNC = 1, SPLAT__WGMMA_WS = 2 };
/* The R-SDDMM's write-out of whole chunks: the lanes' 16-byte stores from any staging
 * entry, or from shifted staging rows by the warp's row stores. */
enum { SPLAT__WRITE_LANES = 0, SPLAT__WRITE_ROWS = 1 };

/* Fills a spec for an op of a plan: tile kernel chosen when head_dim % 8 == 0 (f32 SpMM and
 * attention: up to 128), tile_q a multiple of 16 up to 128 and tile_k a multiple of 16. */
void splat__kspec_init(splat__kspec *s, splat__kop op, splat_dtype dt, splat_dtype vdt,
                       splat_dtype pdt, int head_dim, int max_segs, int tile_q, int tile_k);

/* Interval-table entries per row the tile kernels of a plan need: the most affine
 * segments any regular row of the analysis has (at least 1; at most its K). A row has
 * at most that many intervals in any key run's group. */
int splat__kspec_table_segs(const splat_report *r);

/* Kernel names: "splat_sddmm_rows_bf16_v_bf16_d128_k8", "splat_sddmm_tile_bf16_v_bf16_d128_
 * q128_k128_kt64_s2_k8_w2" ("splat_sddmm_wgmma_bf16_..." for sddmm_wgmma.cuh; sddmm tile
 * names end in the write-out's lanes per row). buf: host, cap chars. The tile name is ""
 * when !s->tile. */
void splat__kspec_names(const splat__kspec *s, char *rows, char *tile, size_t cap);

/* The merge kernel of split tiles (attention specs with a SPLAT_EPI_SPLIT tile kernel, and
 * the merge program's spec): its name, e.g. "splat_attn_merge_bf16_d64", or "" for other
 * specs. buf: host, cap chars. */
void splat__kspec_merge_name(const splat__kspec *s, char *buf, size_t cap);

/* Columns of the warp-specialised attention kernel's tiles at head_dim hd: 64, 128, 192 or
 * 256 (kernels/attention_ws.cuh SPLAT_DP). */
static inline int splat__kspec_ws_cols(int hd) {
  return hd <= 64 ? 64 : hd <= 128 ? 128 : hd <= 192 ? 192 : 256;
}
/* Q buffers of the warp-specialised attention kernel: one with two consumer warpgroups at
 * 256 columns (two of 64 KB do not fit beside the K/V stages), else two
 * (kernels/attention_ws.cuh SPLAT_QBUFS). */
static inline int splat__kspec_ws_qbufs(const splat__kspec *s) {
  return splat__kspec_ws_cols(s->head_dim) == 256 && s->warps > 4 ? 1 : 2;
}
/* Dynamic shared memory of the tile kernel in bytes (0 when !s->tile). */
int splat__kspec_tile_smem(const splat__kspec *s);
/* Threads per CTA of the tile and row kernels (the warp-specialised attention kernel adds
 * its producer warpgroup to the 16 x warps rows' warps). */
static inline int splat__kspec_tile_threads(const splat__kspec *s) {
  return 32 * s->warps + (s->wgmma == SPLAT__WGMMA_WS ? 128 : 0);
}
/* CTAs of the warp-specialised attention kernel that fit one SM: its launch bounds (one
 * with two consumer warpgroups, two with one), fewer where their shared memory (plus the
 * 1 KB the driver reserves per CTA) exceeds smem_per_sm bytes; at least 1. Its persistent
 * grid is SMs x this. */
static inline int splat__kspec_ws_ctas_per_sm(const splat__kspec *s, int smem_per_sm) {
  const int bound = s->warps > 4 ? 1 : 2;
  const int fit = smem_per_sm / (splat__kspec_tile_smem(s) + 1024);
  return fit < 1 ? 1 : fit < bound ? fit : bound;
}
static inline int splat__kspec_row_threads(const splat__kspec *s) {
  return 32 * s->row_warps;
}

/* The template file of an op ("sddmm.cuh", ...). */
const char *splat__kspec_template(splat__kop op);

/* Switches an attention spec with a tile kernel to the sm_90a kernel `kind`
 * (SPLAT__WGMMA_SYNC or _WS) of `warpgroups` consumer warpgroups of 64 rows (0: the
 * kernel's default, 1 for SYNC and 2 for WS, whose producer warpgroup comes on top) when
 * it qualifies (64-key sub-tiles): SYNC at head_dim 64 or 128; WS at head_dim 128 with one
 * warpgroup takes the SYNC kernel instead; head_dim 40 .. 56, and 32 where rows have one
 * segment (as 64 columns: WS as at 64), and 72 .. 120 (as 128: WS with two warpgroups only),
 * multiples of 8; head_dim 136 .. 192 (as 192) only WS, two warpgroups by default (one above 6
 * segments a row), 2 stages; 200 .. 256 (as 256) only WS, always one warpgroup and 2 stages. kt:
 * keys per sub-tile of WS, 0 (default: 128 at head_dim 64 with two warpgroups where tile_k allows,
 * else 64), 64 or 128 (where allowed). Returns 1 when it switched. */
int splat__kspec_use_wgmma(splat__kspec *s, int kind, int warpgroups, int kt);

/* The R-SDDMM on sm_90a: turns an SDDMM tile spec into sddmm_wgmma.cuh's (wgmma, 3xTF32
 * for f32, one warpgroup per CTA) when it qualifies — 4 warps, head_dim 64 or 128, 64-key
 * sub-tiles (or 32 for f32), shared memory within smem_optin (0: no limit); 16-bit inputs
 * at head_dim 64 then take 128-key sub-tiles in 2 stages where tile_k allows. Returns 1 when
 * it did (or the spec already was). splat__kspec_plan applies it for sm_90a. */
int splat__kspec_use_sddmm_wgmma(splat__kspec *s, int smem_optin);

/* SPLAT_SDDMM_WGMMA from the environment, applied to a plan's specs: 1 or unset keeps
 * them; 0 gives the R-SDDMM the mma.sync tile kernel, with its own key sub-tiles and stages,
 * instead of sddmm_wgmma.cuh's
 * (dropping the tile kernel if that one's shared memory exceeds smem_optin, 0: no limit);
 * any other value is SPLAT_ERR_INVALID_ARGUMENT with a sentence. */
splat_status splat__kspec_env_sddmm(splat__kspec *specs, int smem_optin);

/* The sddmm tile kernels' lanes per row of the score write-out, from the plan's report
 * (after the R-SDDMM's kernel is chosen): 2 (a warp's 16 rows in one pass, one interval
 * setup a row and sub-tile) for rows in identity order and with the row stores (write_mode), 4 (8
 * rows a pass) where rows were regrouped by stride and phase (rows_permuted), whose rows interleave
 * in memory with other CTAs' and which ran up to 27% slower with 2 (bench/NOTES.md, v6). */
void splat__kspec_write_lanes(splat__kspec *specs, int rows_permuted);

/* The sm_90a attention kernel from the environment: SPLAT_ATTN_WS (1 or unset: kind
 * SPLAT__WGMMA_WS; 0: SPLAT__WGMMA_SYNC), SPLAT_ATTN_WARPGROUPS (1, 2 or 3; unset: 0,
 * the kernel's default) and SPLAT_ATTN_KT (64 or 128; unset: 0, the default); any other value
 * is SPLAT_ERR_INVALID_ARGUMENT with a sentence. */
splat_status splat__kspec_env_attn(int *kind, int *warpgroups, int *kt);

/* SPLAT_ATTN_PERSISTENT: 1 (default, also unset or empty): the warp-specialised kernel runs
 * a persistent grid (SMs x CTAs per SM, each CTA walking work items); 0: one CTA per work
 * item (a cross-check); anything else is SPLAT_ERR_INVALID_ARGUMENT with a sentence. */
splat_status splat__kspec_env_persistent(int *on);

/* The specs of the kernels a plan uses, one per op (indexed by splat__kop), for Q/K/V/O
 * and values of dtype dt: splat__kspec_init of each op, the sm_90a attention kernel `kind`
 * of `warpgroups` warpgroups (1 when tile_q < 128, and at head_dim 64 when no query tile
 * has more than tile_rows = 64 rows; 3, the WS kernel's three on 192-row tiles at 16-bit
 * head_dim 32 .. 64 with 128-key sub-tiles, only where the caller knows TMA serves every
 * key sub-tile: else as 0) and sub-tiles of kt keys
 * (splat__kspec_use_wgmma) when arch is "sm_90a" (64-key sub-tiles, then the SYNC kernel,
 * where the WS one's shared memory exceeds smem_optin), then the tile kernel dropped where
 * its dynamic shared memory exceeds smem_optin bytes (the device's opt-in limit; 0 = no
 * limit). specs: host array of SPLAT__KOP_COUNT; arch: host string
 * such as "sm_90a". */
void splat__kspec_plan(splat__kspec *specs, splat_dtype dt, int head_dim, int max_segs, int tile_q,
                       int tile_k, int tile_rows, int smem_optin, const char *arch, int kind,
                       int warpgroups, int kt);

/* A plan's specs in one call, as plan creation and `splat codegen` both need them: the
 * sm_90a attention kernel from the environment (splat__kspec_env_attn), splat__kspec_plan
 * for the report's tile shape, K and tile rows (splat_report.tile_rows_max where rows have
 * one segment, else tile_q), the SDDMM write-out lanes from its
 * rows_permuted (splat__kspec_write_lanes) and SPLAT_SDDMM_WGMMA (splat__kspec_env_sddmm).
 * tma_all: TMA views serve every key sub-tile of the plan (tma_views.h
 * splat__tma_serves_plan), which three consumer warpgroups on 192-row tiles need.
 * The attention epilogues come after (splat__kspec_attn_epilogues): they depend on the
 * two-pass decision, which needs to know whether there is a tile kernel. */
splat_status splat__kspec_for_plan(splat__kspec *specs, const splat_report *rep, splat_dtype dt,
                                   int head_dim, int smem_optin, const char *arch, int tma_all);

/* Whether query tiles of 192 rows take tile kernels at dtype dt and head_dim: 16-bit, head_dim
 * 32 .. 64 in steps of 8 (the three consumer warpgroups' shape, bench/NOTES.md v58; other
 * kernels take them as row blocks of 64). Elsewhere 192-row tiles run the row kernels. */
int splat__kspec_rows192(splat_dtype dt, int64_t head_dim);

/* A plan's query tile rows when its description leaves them to splat (tile_q 0), before the
 * analysis: 192 where SPLAT_ATTN_WARPGROUPS=3 asks for them and splat__kspec_rows192 allows,
 * else 128 (which a CUDA plan may still trade for 192 after it: tile_rows.h). */
int splat__kspec_default_tile_q(splat_dtype dt, int64_t head_dim);

/* The attention tile kernel's epilogue (splat__kspec.epi): PASS1 when the plan runs two
 * passes (two_pass), SPLIT when it may split its tiles (split: SPLAT_ATTN_SPLIT > 0), else
 * PLAIN (for the warp-specialised kernel the staged epilogue only: ~15% less compile
 * time); then splat__kspec_ws_narrow. Other specs are left alone. */
void splat__kspec_attn_epilogues(splat__kspec *specs, int two_pass, int split);

/* A warp-specialised attention spec's consumer warpgroups once its epilogue is known: at 256
 * columns, one where two would spill (kgen.c says which). A narrow spec (splat__kspec.narrow) with
 * one consumer warpgroup (two CTAs an SM, its K/V ring in 2 stages) where its epilogue compiles
 * without spills at 104 / 152 registers (producer / consumers): PLAIN, PASS2, and PASS1 in bf16;
 * with two (8 warps, 3 stages) for the others (f16's f32 workspace rows and the SPLIT
 * epilogue spill 12-52 bytes; below head_dim 128 every one spills 4: not narrow). Two
 * warpgroups leave the second idle on 64-row items: one runs strided(64) at 4096 1.3-1.4x
 * faster (bench/NOTES.md v51). Other specs are left alone. */
void splat__kspec_ws_narrow(splat__kspec *s);

/* The attention tile spec of one pass (1 or 2) of a two-pass plan, in *out: as
 * splat__kspec_for_plan would make it for a plan whose rows have at most segs segments, whose
 * query tiles have tile_q rows, at most tile_rows of them in one, and whose key tiles have
 * tile_k keys (the pass's plan's: attn_passes.h splat__attn_pass_shape; one consumer
 * warpgroup at head_dim 64 for tiles of up to 64 rows; three on 192-row tiles where tma_all
 * says TMA serves every key sub-tile), with epilogue PASS1 or PASS2 (program TILE or PASS2).
 * Fails as splat__kspec_env_attn. */
splat_status splat__kspec_for_pass(splat__kspec *out, const splat_report *rep, splat_dtype dt,
                                   int head_dim, int smem_optin, const char *arch, int segs,
                                   int tile_q, int tile_k, int tile_rows, int tma_all, int pass);

/* The programs of an op's spec s to out[0..), which holds SPLAT__KPROG_PER_OP: ROWS, then
 * TILE when s->tile, then PASS2 when its epilogue is PASS1 (pass2's kernel, from
 * splat__kspec_for_pass; NULL: s's with epilogue PASS2), or MERGE when it is SPLIT;
 * returns how many. */
int splat__kspec_programs(const splat__kspec *s, const splat__kspec *pass2, splat__kspec *out);

/* The one kernel a spec's program (s->program) holds: its row, tile or merge kernel's
 * name. buf: host, cap chars. */
void splat__kspec_kernel(const splat__kspec *s, char *buf, size_t cap);

/* The program name of a spec's source in compile logs, the cache and dumps: its kernel's
 * name (splat__kspec_kernel) + ".cu". buf: host, cap chars. */
void splat__kspec_program(const splat__kspec *s, char *buf, size_t cap);

/* The source of the spec's program (s->program: a tile program when SPLAT__KPROG_TILE or
 * _PASS2, the merge kernel's when _MERGE, else the row kernel's) through splat__codegen: a
 * comment stating the spec in words, the #define prelude of the spec, then the embedded
 * template (which includes common.cuh and params.cuh). *out: malloc'd, caller frees.
 * Fails as splat__codegen. */
splat_status splat__kspec_source(const splat__kspec *s, char **out);

#endif
