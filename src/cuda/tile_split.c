/* tile_split.c — splitting long query tiles into chunks over disjoint key ranges, for the
 * fused attention and the R-SDDMM (see tile_split.h). */
#include "cuda/tile_split.h"

#include <stdlib.h>
#include <string.h>

#include "core/env.h"
#include "core/error.h"

static int64_t tile_ktiles(const splat_dev_tile *t, const splat_dev_run *runs) {
  int64_t k = 0;
  for (int32_t r = 0; r < t->nruns; r++) k += runs[t->run_begin + r].ntiles;
  return k;
}

void splat__tile_split_free(splat__tile_split *s) {
  if (!s) return;
  free(s->tiles);
  free(s->runs);
  free(s->slots);
  free(s->merge);
  memset(s, 0, sizeof *s);
}

splat_status splat__tile_split_build(const splat_dev_tile *tiles, int64_t ntiles,
                                     const splat_dev_run *runs, int tile_k, int max_ktiles,
                                     splat__tile_split *out) {
  memset(out, 0, sizeof *out);
  /* Sizes: every chunk boundary cuts at most one run in two. */
  int64_t nt = 0, nr = 0, nm = 0;
  for (int64_t i = 0; i < ntiles; i++) {
    const int64_t k = tile_ktiles(&tiles[i], runs);
    const int64_t chunks = max_ktiles > 0 && k > max_ktiles ? (k + max_ktiles - 1) / max_ktiles : 1;
    nt += chunks;
    nr += tiles[i].nruns + (chunks - 1);
    nm += chunks > 1;
  }
  if (nt > INT32_MAX || nr > INT32_MAX) {
    return splat__fail(SPLAT_ERR_UNSUPPORTED,
                       "splat_plan_create: splitting the long query tiles gives %lld tiles and "
                       "%lld runs, more than the int32 plan indices hold",
                       (long long)nt, (long long)nr);
  }
  out->tiles = malloc((size_t)(nt ? nt : 1) * sizeof *out->tiles);
  out->runs = malloc((size_t)(nr ? nr : 1) * sizeof *out->runs);
  out->slots = malloc((size_t)(nt ? nt : 1) * sizeof *out->slots);
  out->merge = malloc((size_t)(nm ? nm : 1) * 4 * sizeof *out->merge);
  if (!out->tiles || !out->runs || !out->slots || !out->merge) {
    splat__tile_split_free(out);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_plan_create: out of memory");
  }
  for (int64_t i = 0; i < ntiles; i++) {
    const splat_dev_tile *t = &tiles[i];
    const int64_t k = tile_ktiles(t, runs);
    const int64_t chunks = max_ktiles > 0 && k > max_ktiles ? (k + max_ktiles - 1) / max_ktiles : 1;
    if (chunks == 1) {
      splat_dev_tile *o = &out->tiles[out->ntiles];
      *o = *t;
      o->run_begin = (int32_t)out->nruns;
      memcpy(&out->runs[out->nruns], &runs[t->run_begin], (size_t)t->nruns * sizeof *runs);
      out->nruns += t->nruns;
      out->slots[out->ntiles++] = -1;
      continue;
    }
    int32_t *m = &out->merge[4 * out->nmerge++];
    m[0] = t->row_begin;
    m[1] = t->nrows;
    m[2] = (int32_t)out->nslots;
    m[3] = (int32_t)chunks;
    /* Walk the runs, handing out chunk c's k / chunks (+1 for the first k % chunks). */
    int64_t c = 0, left = k / chunks + (k % chunks > 0);
    splat_dev_tile *o = NULL;
    for (int32_t r = 0; r < t->nruns; r++) {
      splat_dev_run run = runs[t->run_begin + r];
      while (run.ntiles > 0) {
        if (!o) {
          o = &out->tiles[out->ntiles];
          o->row_begin = t->row_begin;
          o->nrows = t->nrows;
          o->run_begin = (int32_t)out->nruns;
          o->nruns = 0;
          out->slots[out->ntiles++] = (int32_t)out->nslots++;
        }
        const int32_t take = run.ntiles < left ? run.ntiles : (int32_t)left;
        splat_dev_run piece = run;
        piece.ntiles = take;
        out->runs[out->nruns++] = piece;
        o->nruns++;
        run.base += take * tile_k;
        run.ntiles -= take;
        left -= take;
        if (left == 0) {
          c++;
          left = k / chunks + (k % chunks > c);
          o = NULL;
        }
      }
    }
  }
  return SPLAT_OK;
}

splat_status splat__attn_split_env(int *max_ktiles) {
  long long n = 0;
  const splat_status st =
      splat__env_count("SPLAT_ATTN_SPLIT", 1048576,
                       "0 (no split) or the most key tiles of a chunk, 1 to 1048576", 0, &n);
  *max_ktiles = (int)n;
  return st;
}

int splat__sddmm_split_ktiles(const splat_dev_tile *tiles, int64_t ntiles,
                              const splat_dev_run *runs) {
  int64_t k = 0;
  for (int64_t i = 0; i < ntiles; i++) k += tile_ktiles(&tiles[i], runs);
  const int64_t want = ntiles > 0 ? (3 * k + 2 * ntiles - 1) / (2 * ntiles) : 0;
  return want < 4 ? 4 : want > 1048576 ? 1048576 : (int)want;
}
