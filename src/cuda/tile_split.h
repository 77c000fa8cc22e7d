/* tile_split.h — split tiles: a query tile whose key runs are long (longformer's and
 * BigBird's global rows see every key) would be one serial CTA per batch*head; cut into
 * chunks over disjoint key ranges, its work spreads over many CTAs. The fused attention's
 * chunks leave partial results (unnormalised O, max, sum) in a workspace slot that
 * kernels/attention_merge.cuh combines (SPLAT_ATTN_SPLIT); the R-SDDMM's need no merge, each
 * chunk's scores being final (always, splat__sddmm_split_ktiles). Pure C on the
 * device-layout arrays of kernels/params.cuh, so it is tested without a GPU. */
#ifndef SPLAT_CUDA_TILE_SPLIT_H
#define SPLAT_CUDA_TILE_SPLIT_H

#include <stdint.h>

#include "../../kernels/params.cuh"
#include "splat.h"

typedef struct splat__tile_split {
  splat_dev_tile *tiles; /* [ntiles]: whole tiles and chunks, in input order */
  int64_t ntiles;
  splat_dev_run *runs; /* [nruns] */
  int64_t nruns;
  int32_t *slots; /* [ntiles]: a chunk's workspace slot, or -1 for a whole tile */
  int32_t *merge; /* [nmerge * 4]: per split tile (row_begin, nrows, first slot, chunks) */
  int64_t nmerge;
  int64_t nslots; /* chunks in all = workspace slots */
} splat__tile_split;

/* Tiles with more than max_ktiles key tiles (the sum of their runs' ntiles) become
 * ceil(k / max_ktiles) chunks of k / chunks or one more key tiles, cut at key-tile
 * boundaries: a run cut in two keeps its group and predicate flag, the second part's base
 * moved by the first part's key tiles x tile_k. Other tiles are copied (slot -1). Chunks
 * of a tile take consecutive slots. max_ktiles <= 0 splits nothing. Host arrays in; *out
 * owns its arrays (splat__tile_split_free). */
splat_status splat__tile_split_build(const splat_dev_tile *tiles, int64_t ntiles,
                                     const splat_dev_run *runs, int tile_k, int max_ktiles,
                                     splat__tile_split *out);
void splat__tile_split_free(splat__tile_split *s);

/* Key tiles per chunk from SPLAT_ATTN_SPLIT: 0 (off; also when unset or empty) or 1 ..
 * 1048576; anything else is SPLAT_ERR_INVALID_ARGUMENT with a sentence. */
splat_status splat__attn_split_env(int *max_ktiles);

/* The R-SDDMM's key tiles per chunk: 1.5x the mean key tiles of a query tile, at least 4
 * (a chunk gathers its Q rows again: 4 key tiles keep that under 1/8 of its loads), so no
 * CTA's serial chain of sub-tiles is much longer than a typical tile's. */
int splat__sddmm_split_ktiles(const splat_dev_tile *tiles, int64_t ntiles,
                              const splat_dev_run *runs);

#endif
