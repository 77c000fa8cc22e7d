/* tile_tail.c — a persistent grid's last round taken by light items (tile_tail.h). */
#include "cuda/tile_tail.h"

#include <stdlib.h>

#include "core/env.h"
#include "core/error.h"
#include "cuda/kgen.h"

splat_status splat__tile_tail_env(int64_t *m) {
  long long n = -1;
  const splat_status st =
      splat__env_count("SPLAT_ATTN_TAIL", 1048576,
                       "the query tiles of 192 rows to split into tiles of 64, 0 to 1048576 "
                       "(unset: as the rule decides)",
                       -1, &n);
  *m = n;
  return st;
}

typedef struct tail_pick {
  int64_t cost, index;
} tail_pick;

/* Lightest first; of equal ones, the later tile first. */
static int cmp_pick(const void *pa, const void *pb) {
  const tail_pick *a = pa, *b = pb;
  if (a->cost != b->cost) return a->cost < b->cost ? -1 : 1;
  return a->index > b->index ? -1 : a->index < b->index;
}

static int64_t tile_ktiles(const splat__tile_plan *t, const splat__query_tile *q) {
  int64_t k = 0;
  for (int32_t r = 0; r < q->nruns; r++) k += t->runs[q->run_begin + r].ntiles;
  return k;
}

splat_status splat__tile_tail_split(splat__tile_plan *t, int64_t m, int rows) {
  if (m <= 0 || rows <= 0 || t->ntiles == 0) return SPLAT_OK;
  tail_pick *pick = malloc((size_t)t->ntiles * sizeof *pick);
  char *split = calloc((size_t)t->ntiles, 1);
  if (!pick || !split) {
    free(pick);
    free(split);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_plan_create: out of memory");
  }
  int64_t n = 0;
  for (int64_t i = 0; i < t->ntiles; i++) {
    if (t->tiles[i].nrows <= rows) continue;
    pick[n].cost = tile_ktiles(t, &t->tiles[i]) * t->tiles[i].nrows;
    pick[n++].index = i;
  }
  qsort(pick, (size_t)n, sizeof *pick, cmp_pick);
  if (m > n) m = n;
  for (int64_t i = 0; i < m; i++) split[pick[i].index] = 1;
  free(pick);
  int64_t ntiles = 0, nruns = 0;
  for (int64_t i = 0; i < t->ntiles; i++) {
    const int64_t parts = split[i] ? (t->tiles[i].nrows + rows - 1) / rows : 1;
    ntiles += parts;
    nruns += parts * t->tiles[i].nruns;
  }
  splat__query_tile *tiles = malloc((size_t)ntiles * sizeof *tiles);
  splat__key_run *runs = malloc((size_t)(nruns ? nruns : 1) * sizeof *runs);
  if (!tiles || !runs) {
    free(tiles);
    free(runs);
    free(split);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_plan_create: out of memory");
  }
  int64_t nt = 0, nr = 0;
  for (int64_t i = 0; i < t->ntiles; i++) {
    const splat__query_tile q = t->tiles[i];
    const int32_t step = split[i] ? rows : q.nrows;
    for (int32_t r0 = 0; r0 < q.nrows; r0 += step) {
      splat__query_tile part = {q.row_begin + r0, q.nrows - r0 < step ? q.nrows - r0 : step, nr,
                                q.nruns};
      for (int32_t r = 0; r < q.nruns; r++) runs[nr++] = t->runs[q.run_begin + r];
      tiles[nt++] = part;
    }
  }
  free(split);
  free(t->tiles);
  free(t->runs);
  t->tiles = tiles;
  t->ntiles = nt;
  t->runs = runs;
  t->nruns = nr;
  return SPLAT_OK;
}

/* A tile as the tail's model sees it: its key tiles and rows. */
typedef struct tail_tile {
  int64_t ktiles;
  int32_t nrows;
} tail_tile;

/* Heaviest first by rows x key tiles, as cuda_backend.c dev_plan orders the tiles. */
static int cmp_heavy(const void *pa, const void *pb) {
  const tail_tile *a = pa, *b = pb;
  const int64_t x = a->ktiles * a->nrows, y = b->ktiles * b->nrows;
  if (x != y) return x > y ? -1 : 1;
  return a->nrows > b->nrows ? -1 : a->nrows < b->nrows; /* ties: whole tiles first */
}

/* The last CTA's finish, items cost key tiles (light times that for tiles of `rows` rows or
 * fewer) handed round-robin to `ctas` CTAs in dev_plan's order, bh items a tile. */
static double makespan(tail_tile *tiles, int64_t n, int64_t bh, int64_t ctas, int rows,
                       double light, double *load) {
  qsort(tiles, (size_t)n, sizeof *tiles, cmp_heavy);
  for (int64_t c = 0; c < ctas; c++) load[c] = 0;
  int64_t w = 0;
  for (int64_t i = 0; i < n; i++) {
    const double cost = (double)tiles[i].ktiles * (tiles[i].nrows > rows ? 1.0 : light);
    for (int64_t b = 0; b < bh; b++, w++) load[w % ctas] += cost;
  }
  double most = 0;
  for (int64_t c = 0; c < ctas; c++) most = load[c] > most ? load[c] : most;
  return most;
}

int64_t splat__tile_tail_choose(const splat__tile_plan *t, int64_t bh, int64_t ctas, int rows,
                                double light, int64_t most) {
  if (t->ntiles == 0 || bh <= 0 || ctas <= 0 || most <= 0 ||
      (double)t->ntiles * (double)bh > SPLAT__TILE_TAIL_MAX_ROUNDS * (double)ctas)
    return 0;
  const int64_t cap = t->ntiles * ((t->tile_q + rows - 1) / rows);
  tail_tile *base = malloc((size_t)t->ntiles * sizeof *base);
  tail_tile *tiles = malloc((size_t)cap * sizeof *tiles);
  double *load = malloc((size_t)ctas * sizeof *load);
  int64_t best = 0;
  if (base && tiles && load) {
    int64_t n = 0;
    for (int64_t i = 0; i < t->ntiles; i++) {
      base[i].ktiles = tile_ktiles(t, &t->tiles[i]);
      base[i].nrows = t->tiles[i].nrows;
    }
    /* Lightest whole tiles last (splat__tile_tail_split's pick, up to its ties). */
    qsort(base, (size_t)t->ntiles, sizeof *base, cmp_heavy);
    double best_time = 0;
    for (int64_t m = 0; m <= most; m++) {
      n = 0;
      int64_t left = m; /* tiles still to split, from the lightest */
      for (int64_t i = t->ntiles - 1; i >= 0; i--) {
        if (left > 0 && base[i].nrows > rows) {
          left--;
          for (int32_t r0 = 0; r0 < base[i].nrows; r0 += rows)
            tiles[n++] =
                (tail_tile){base[i].ktiles, base[i].nrows - r0 < rows ? base[i].nrows - r0 : rows};
        } else {
          tiles[n++] = base[i];
        }
      }
      if (left > 0) break; /* no tile left to split */
      const double time = makespan(tiles, n, bh, ctas, rows, light, load);
      if (m == 0 || time < best_time) best_time = time, best = m;
    }
  }
  free(base);
  free(tiles);
  free(load);
  return best;
}

int64_t splat__tile_tail_cap(const splat__tile_plan *t, int64_t m, int keep) {
  int64_t over = 0;
  for (int64_t i = 0; i < t->ntiles; i++) over += t->tiles[i].nrows > keep;
  return m < over - 1 ? m : over > 0 ? over - 1 : 0;
}

splat_status splat__tile_tail_apply(splat__tile_plan *t, int64_t bh, int64_t ctas, int64_t *split) {
  *split = 0;
  int64_t m = -1;
  int persistent = 1;
  splat_status st = splat__tile_tail_env(&m);
  if (st == SPLAT_OK) st = splat__kspec_env_persistent(&persistent);
  if (st != SPLAT_OK) return st;
  if (m < 0)
    m = persistent ? splat__tile_tail_choose(t, bh, ctas, 64, SPLAT__TILE_TAIL_LIGHT,
                                             SPLAT__TILE_TAIL_MOST)
                   : 0;
  /* A tile of more than 128 rows stays whole: the kernel chosen stays the plan's. */
  m = splat__tile_tail_cap(t, m, 128);
  if (m <= 0) return SPLAT_OK;
  st = splat__tile_tail_split(t, m, 64);
  if (st == SPLAT_OK) *split = m;
  return st;
}
