/* tile_plan.c — alignment and the tile plan. Regular rows are cut into query tiles
 * (in identity order, or regrouped by the key group of each row's dominant strided
 * segment, whichever computes less); for each tile and key group, the rows' segments
 * become intervals of gathered key indices, and the union span is cut into key tiles
 * marked full (no predicate) or predicated, untouched tiles dropped. A tile's rows are
 * read in runs whose segments each move by a fixed step a row (one interval entry per
 * segment per run, stepped through key tile by key tile). Per tile the work is
 * O(runs x segments + key tiles / 64): events on a bitmap, swept in order. The identity
 * plan is skipped when a lower bound on its work already exceeds the regrouped plan's
 * (the choice stays exactly that of planning both). For the fused attention, a mask that
 * mixes contiguous and strided segments in a row may instead be planned as two passes, one
 * per kind of segment (splat__tile_plan_passes). */
#include "analysis/tile_plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/timer.h"

#define DEFAULT_TILE 128
#define MAX_TILE 1024

splat__key_group splat__segment_group(splat__segment s) {
  splat__key_group g;
  if (s.stride <= 1) {
    g.phase = 0;
    g.stride = 1;
    g.width = 1;
  } else {
    g.phase = s.start % s.stride;
    g.stride = s.stride;
    g.width = s.width;
  }
  return g;
}

static inline int group_eq(splat__key_group a, splat__key_group b) {
  return a.phase == b.phase && a.stride == b.stride && a.width == b.width;
}
/* Order of groups in a plan: by stride, then phase, then width; contiguous first. */
static int group_cmp(splat__key_group a, splat__key_group b) {
  if (a.stride != b.stride) return a.stride < b.stride ? -1 : 1;
  if (a.phase != b.phase) return a.phase < b.phase ? -1 : 1;
  if (a.width != b.width) return a.width < b.width ? -1 : 1;
  return 0;
}
static inline uint64_t group_hash(splat__key_group g) {
  uint64_t h = (uint64_t)(uint32_t)g.stride * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t)(uint32_t)g.phase * 0xC2B2AE3D27D4EB4Full;
  h ^= (uint64_t)(uint32_t)g.width * 0x165667B19E3779F9ull;
  return h ^ (h >> 29);
}

/* start / stride (stride > 1), reusing the quotient *cq cached for stride *cd when start
 * moved by less than a stride since (neighbouring rows' segments do); else divides. */
static inline int32_t quot_cached(int32_t start, int32_t stride, int32_t *cd, int32_t *cq) {
  if (start >= 0 && stride == *cd) {
    const int64_t r = (int64_t)start - (int64_t)*cq * stride;
    if (r >= 0 && r < stride) return *cq;
    if (r >= stride && r < 2 * (int64_t)stride) return ++*cq;
    if (r < 0 && r >= -(int64_t)stride) return --*cq;
  }
  *cd = stride;
  return *cq = start / stride;
}

/* A map from key group to a dense id 0..n-1, cleared in O(1) by bumping a stamp. */
typedef struct gmap {
  int64_t cap; /* power of two */
  splat__key_group *keys;
  int32_t *ids;
  uint32_t *stamp;
  uint32_t cur;
  int32_t n;
  splat__key_group *by_id; /* [id] -> group, room for id_cap */
  int64_t id_cap;
} gmap;

static void gmap_free(gmap *m) {
  free(m->keys);
  free(m->ids);
  free(m->stamp);
  free(m->by_id);
  memset(m, 0, sizeof *m);
}

static int gmap_alloc(gmap *m, int64_t cap) {
  m->cap = cap;
  m->keys = malloc((size_t)cap * sizeof *m->keys);
  m->ids = malloc((size_t)cap * sizeof *m->ids);
  m->stamp = calloc((size_t)cap, sizeof *m->stamp);
  m->cur = 1;
  return m->keys && m->ids && m->stamp;
}

static int gmap_init(gmap *m, int64_t expected) {
  memset(m, 0, sizeof *m);
  int64_t cap = 16;
  while (cap < 2 * expected) cap *= 2;
  m->id_cap = expected > 4 ? expected : 4;
  m->by_id = malloc((size_t)m->id_cap * sizeof *m->by_id);
  return gmap_alloc(m, cap) && m->by_id;
}

static inline void gmap_clear(gmap *m) {
  m->n = 0;
  if (++m->cur == 0) { /* stamp wrapped: really clear */
    memset(m->stamp, 0, (size_t)m->cap * sizeof *m->stamp);
    m->cur = 1;
  }
}

/* Id of g, inserted when new; -1 when out of memory. */
static int32_t gmap_get(gmap *m, splat__key_group g) {
  if (2 * (int64_t)(m->n + 1) > m->cap) { /* grow and rehash the live entries */
    gmap old = *m;
    if (!gmap_alloc(m, old.cap * 2)) {
      free(m->keys);
      free(m->ids);
      free(m->stamp);
      m->keys = old.keys, m->ids = old.ids, m->stamp = old.stamp, m->cap = old.cap;
      m->cur = old.cur;
      return -1;
    }
    for (int32_t id = 0; id < old.n; id++) {
      uint64_t h = group_hash(old.by_id[id]) & (uint64_t)(m->cap - 1);
      while (m->stamp[h] == m->cur) h = (h + 1) & (uint64_t)(m->cap - 1);
      m->stamp[h] = m->cur;
      m->keys[h] = old.by_id[id];
      m->ids[h] = id;
    }
    free(old.keys);
    free(old.ids);
    free(old.stamp);
  }
  uint64_t h = group_hash(g) & (uint64_t)(m->cap - 1);
  while (m->stamp[h] == m->cur) {
    if (group_eq(m->keys[h], g)) return m->ids[h];
    h = (h + 1) & (uint64_t)(m->cap - 1);
  }
  if (m->n >= m->id_cap) {
    int64_t nc = m->id_cap * 2;
    splat__key_group *p = realloc(m->by_id, (size_t)nc * sizeof *p);
    if (!p) return -1;
    m->by_id = p;
    m->id_cap = nc;
  }
  m->stamp[h] = m->cur;
  m->keys[h] = g;
  m->ids[h] = m->n;
  m->by_id[m->n] = g;
  return m->n++;
}

/* Sorting ids by their group (qsort has no context argument: sort (group, id) pairs). */
typedef struct gid_pair {
  splat__key_group g;
  int32_t id;
} gid_pair;
static int cmp_pair(const void *x, const void *y) {
  return group_cmp(((const gid_pair *)x)->g, ((const gid_pair *)y)->g);
}
/* ids[0..n) = 0..n-1 ordered by groups[id]; pairs: scratch of n. */
static void sort_ids(const splat__key_group *groups, int32_t n, int32_t *ids, gid_pair *pairs) {
  for (int32_t i = 0; i < n; i++) pairs[i].g = groups[i], pairs[i].id = i;
  qsort(pairs, (size_t)n, sizeof *pairs, cmp_pair);
  for (int32_t i = 0; i < n; i++) ids[i] = pairs[i].id;
}

/* The intervals [a + k da, b + k db] of gathered indices of group gid, k = 0..n-1: one
 * segment slot over a run of n rows in which that segment moves by a fixed step a row. */
typedef struct ival {
  int32_t gid;
  int32_t slot; /* index of the segment in its row */
  int32_t a, b, da, db;
  int32_t n;
} ival;

typedef struct builder {
  const splat__acsr *a;
  int tq, tk, tk_shift; /* tk_shift >= 0 when tk is a power of two */
  /* per-tile scratch */
  ival *iv, *iv2;
  int64_t iv_cap;
  gmap gm;
  int64_t *glo, *ghi, *gcnt, *gpos;
  int32_t *gorder;
  gid_pair *gpairs;
  int64_t g_cap;
  int32_t *dt, *df;
  uint64_t *bits;
  int64_t pos_cap; /* room in dt/df (positions), bits hold pos_cap bits */
  /* output */
  splat__query_tile *tiles;
  int64_t ntiles;
  splat__key_run *runs;
  int64_t nruns, runs_cap;
  int64_t full, pred, computed;
  /* the rows being planned: segments of the row at position p (through order) */
  const int64_t *row_seg;
  const splat__segment *segs;
  int64_t nord; /* positions in the order being planned */
  /* With stop_at_strided, the first tile that has a strided segment sets saw_strided
   * and ends the plan (left incomplete). */
  int stop_at_strided, saw_strided;
} builder;

/* Rows of a permuted order are scattered in memory: fetch the segment range and the
 * segments of rows a little ahead (two dependent loads per row; a row's first three
 * segments may straddle two lines: both fetched); positions clamped to the order. A
 * macro: gcc deletes calls to a function holding only prefetches. */
#define PF_SEGS 8
#define PF_RANGE 16
#define PREFETCH_ROW(b, order, p)                                        \
  do {                                                                   \
    const int64_t last_ = (b)->nord - 1;                                 \
    const int64_t p1_ = (p) + PF_RANGE < last_ ? (p) + PF_RANGE : last_; \
    const int64_t p2_ = (p) + PF_SEGS < last_ ? (p) + PF_SEGS : last_;   \
    __builtin_prefetch(&(b)->row_seg[(order)[p1_]]);                     \
    const splat__segment *s_ = &(b)->segs[(b)->row_seg[(order)[p2_]]];   \
    __builtin_prefetch(s_);                                              \
    __builtin_prefetch((const void *)((uintptr_t)s_ + 48));              \
  } while (0)

static void builder_free_scratch(builder *b) {
  free(b->iv);
  free(b->iv2);
  gmap_free(&b->gm);
  free(b->glo);
  free(b->ghi);
  free(b->gcnt);
  free(b->gpos);
  free(b->gorder);
  free(b->gpairs);
  free(b->dt);
  free(b->df);
  free(b->bits);
}

static int ensure_groups(builder *b, int64_t n) {
  if (n <= b->g_cap) return 1;
  int64_t c = b->g_cap ? b->g_cap : 16;
  while (c < n) c *= 2;
  void *p;
#define GROW(f)                                  \
  do {                                           \
    p = realloc(b->f, (size_t)c * sizeof *b->f); \
    if (!p) return 0;                            \
    b->f = p;                                    \
  } while (0)
  GROW(glo);
  GROW(ghi);
  GROW(gcnt);
  GROW(gpos);
  GROW(gorder);
  GROW(gpairs);
#undef GROW
  b->g_cap = c;
  return 1;
}

static int ensure_positions(builder *b, int64_t npos) {
  if (npos <= b->pos_cap) return 1;
  int64_t c = (npos + 63) / 64 * 64;
  if (c < 2 * b->pos_cap) c = (2 * b->pos_cap + 63) / 64 * 64;
  void *p1 = realloc(b->dt, (size_t)c * sizeof *b->dt);
  if (!p1) return 0;
  b->dt = p1;
  void *p2 = realloc(b->df, (size_t)c * sizeof *b->df);
  if (!p2) return 0;
  b->df = p2;
  void *p3 = realloc(b->bits, (size_t)(c / 64) * sizeof *b->bits);
  if (!p3) return 0;
  b->bits = p3;
  b->pos_cap = c;
  return 1;
}

static int push_run(builder *b, splat__key_run r) {
  if (b->nruns == b->runs_cap) {
    int64_t c = b->runs_cap ? b->runs_cap * 2 : 1024;
    void *p = realloc(b->runs, (size_t)c * sizeof *b->runs);
    if (!p) return 0;
    b->runs = p;
    b->runs_cap = c;
  }
  b->runs[b->nruns++] = r;
  return 1;
}

static inline void add_event(builder *b, int64_t pos, int32_t dt, int32_t df) {
  uint64_t bit = 1ull << (pos & 63);
  if (!(b->bits[pos >> 6] & bit)) {
    b->bits[pos >> 6] |= bit;
    b->dt[pos] = 0;
    b->df[pos] = 0;
  }
  b->dt[pos] += dt;
  b->df[pos] += df;
}

static inline int64_t div_tk(const builder *b, int64_t x) {
  return b->tk_shift >= 0 ? x >> b->tk_shift : x / b->tk;
}

static inline int64_t imin64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

/* Rows (>= 1) from this one over which v, moving by dv != 0 a row, keeps its floor and
 * ceiling in key tiles: none past this one when v sits on a tile boundary. */
static inline int64_t steady_rows(const builder *b, int64_t v, int64_t dv) {
  const int64_t m = div_tk(b, v) * b->tk;
  if (v == m) return 1;
  /* distance to the boundary ahead, and the step towards it */
  const int64_t gap = dv > 0 ? m + b->tk - v : v - m, step = dv > 0 ? dv : -dv;
  return gap <= step ? 1 : (gap + step - 1) / step;
}

static inline void flush_tuple(builder *b, const int64_t t[4], int32_t c) {
  add_event(b, t[0], c, 0);
  add_event(b, t[1] + 1, -c, 0);
  if (t[2] < t[3]) {
    add_event(b, t[2], 0, c);
    add_event(b, t[3], 0, -c);
  }
}

/* Key tiles of one group within one query tile of nrows rows: intervals iv[0..n),
 * union span [lo, hi]. Appends runs. */
static int plan_group(builder *b, splat__key_group grp, const ival *iv, int64_t n, int64_t lo,
                      int64_t hi, int32_t nrows) {
  const int64_t tk = b->tk;
  const int64_t T = div_tk(b, hi - lo) + 1; /* key tiles over the span */
  if (!ensure_positions(b, T + 1)) return 0;
  const int64_t nwords = (T + 1 + 63) / 64;
  memset(b->bits, 0, (size_t)nwords * sizeof *b->bits);

  /* Each interval touches key tiles [ta, tb] and wholly contains [fa, fe). Along a
   * run of rows the tuple stays the same while both ends stay inside one key tile (or
   * on one boundary): it is added once per stretch, with the stretch's row count, and
   * equal tuples of neighbouring stretches in the same segment slot are merged. */
  int64_t prev[SPLAT_MAX_SEGMENTS][4];
  int32_t cnt[SPLAT_MAX_SEGMENTS] = {0};
  for (int64_t k = 0; k < n; k++) {
    const ival *v = &iv[k];
    const int sl = v->slot < SPLAT_MAX_SEGMENTS ? v->slot : SPLAT_MAX_SEGMENTS - 1;
    int64_t *pv = prev[sl];
    int64_t x = v->a - lo, z = (int64_t)v->b - lo + 1; /* z: one past the interval */
    for (int32_t r = 0; r < v->n;) {
      const int64_t ta = div_tk(b, x), tb = div_tk(b, z - 1);
      const int64_t fa = ta + (x != ta * tk);
      const int64_t fe = div_tk(b, z);
      int64_t step = v->n - r;
      if (v->da && step > 1) step = imin64(step, steady_rows(b, x, v->da));
      if (v->db && step > 1) step = imin64(step, steady_rows(b, z, v->db));
      x += step * v->da;
      z += step * v->db;
      r += (int32_t)step;
      if (cnt[sl] && ta == pv[0] && tb == pv[1] && fa == pv[2] && fe == pv[3]) {
        cnt[sl] += (int32_t)step;
        continue;
      }
      if (cnt[sl]) flush_tuple(b, pv, cnt[sl]);
      pv[0] = ta, pv[1] = tb, pv[2] = fa, pv[3] = fe;
      cnt[sl] = (int32_t)step;
    }
  }
  for (int sl = 0; sl < SPLAT_MAX_SEGMENTS; sl++)
    if (cnt[sl]) flush_tuple(b, prev[sl], cnt[sl]);

  /* Sweep the event positions in order; between two of them the counts are constant. */
  int64_t touch = 0, full = 0, last = -1, run_end = -1, run_idx = -1;
  for (int64_t w = 0; w < nwords; w++) {
    uint64_t word = b->bits[w];
    while (word) {
      const int64_t p = w * 64 + __builtin_ctzll(word);
      word &= word - 1;
      if (last >= 0 && touch > 0 && p > last) {
        const int32_t pred = full == nrows ? 0 : 1;
        const int64_t nt = p - last;
        if (run_idx >= 0 && run_end == last && b->runs[run_idx].predicate == pred) {
          b->runs[run_idx].ntiles += (int32_t)nt;
        } else {
          splat__key_run r;
          r.group = grp;
          r.base = (int32_t)(lo + last * tk);
          r.ntiles = (int32_t)nt;
          r.predicate = pred;
          if (!push_run(b, r)) return 0;
          run_idx = b->nruns - 1;
        }
        run_end = p;
        b->computed += nt * b->tq * tk;
        if (pred)
          b->pred += nt;
        else
          b->full += nt;
      }
      touch += b->dt[p];
      full += b->df[p];
      last = p;
    }
  }
  return 1;
}

/* Row-run state of one query tile: the groups seen (a few most recent checked before
 * the map: a tile's segments usually fall in one or two groups) and the quotient cache
 * of each segment slot. */
typedef struct tile_scan {
  splat__key_group mru_g[4];
  int32_t mru_id[4];
  int nmru, next;
  int32_t qd[SPLAT_MAX_SEGMENTS], qq[SPLAT_MAX_SEGMENTS];
  int64_t m; /* intervals in b->iv */
} tile_scan;

/* Appends the intervals of a run of n rows: row k's segment s is g[s] with its start
 * moved by k ds[s] and its count by k dc[s] (no deltas when n == 1). 0 on OOM. */
static int add_run(builder *b, tile_scan *ts, const splat__segment *g, int ns, const int32_t *ds,
                   const int32_t *dc, int32_t n) {
  for (int k = 0; k < ns; k++) {
    const splat__segment s = g[k];
    const int64_t dstart = n > 1 ? ds[k] : 0, dcount = n > 1 ? dc[k] : 0;
    splat__key_group grp;
    int32_t x;
    int64_t da;
    if (s.stride <= 1) {
      grp.phase = 0, grp.stride = 1, grp.width = 1;
      x = s.start;
      da = dstart;
    } else {
      const int sl = k < SPLAT_MAX_SEGMENTS ? k : SPLAT_MAX_SEGMENTS - 1;
      const int32_t q = quot_cached(s.start, s.stride, &ts->qd[sl], &ts->qq[sl]);
      grp.phase = s.start - q * s.stride, grp.stride = s.stride, grp.width = s.width;
      x = q * s.width;
      da = dstart / s.stride * s.width;
    }
    const int32_t y = x + s.count * s.width - 1;
    const int64_t db = da + dcount * s.width;
    int32_t gid = -1;
    for (int c = 0; c < ts->nmru; c++)
      if (group_eq(grp, ts->mru_g[c])) {
        gid = ts->mru_id[c];
        break;
      }
    if (gid < 0) {
      const int32_t n0 = b->gm.n;
      gid = gmap_get(&b->gm, grp);
      if (gid < 0 || !ensure_groups(b, gid + 1)) return 0;
      if (gid == n0) { /* a new group in this tile */
        b->glo[gid] = INT64_MAX;
        b->ghi[gid] = -1;
        b->gcnt[gid] = 0;
      }
      ts->mru_g[ts->next] = grp;
      ts->mru_id[ts->next] = gid;
      ts->next = (ts->next + 1) & 3;
      if (ts->nmru < 4) ts->nmru++;
    }
    /* The ends move linearly: their extremes are at the first and last rows. */
    const int64_t xl = x + (n - 1) * da, yl = y + (n - 1) * db;
    const int64_t lo = x < xl ? x : xl, hi = y > yl ? y : yl;
    if (lo < b->glo[gid]) b->glo[gid] = lo;
    if (hi > b->ghi[gid]) b->ghi[gid] = hi;
    b->gcnt[gid]++;
    ival *v = &b->iv[ts->m++];
    v->gid = gid;
    v->slot = k;
    v->a = x;
    v->b = y;
    v->da = (int32_t)da;
    v->db = (int32_t)db;
    v->n = n;
  }
  return 1;
}

/* The second row s of a run starting at row segments g (n of each): sets the steps
 * (ds, dc) of each segment's start and count and the third row's segments nx. 0 when
 * a stride or width differs or a strided segment changes phase. */
static int start_run(const splat__segment *g, const splat__segment *s, int n, int32_t *ds,
                     int32_t *dc, splat__segment *nx) {
  if (n > SPLAT_MAX_SEGMENTS) return 0;
  for (int k = 0; k < n; k++) {
    if (s[k].stride != g[k].stride || s[k].width != g[k].width) return 0;
    ds[k] = s[k].start - g[k].start;
    dc[k] = s[k].count - g[k].count;
    if (g[k].stride > 1 && ds[k] % g[k].stride != 0) return 0;
    nx[k] = s[k];
    nx[k].start += ds[k];
    nx[k].count += dc[k];
  }
  return 1;
}

/* 1 when row segments s[0..n) are the predicted nx; then steps nx to the next row. */
static inline int continues_run(const splat__segment *s, int n, const int32_t *ds,
                                const int32_t *dc, splat__segment *nx) {
  for (int k = 0; k < n; k++) {
    if (s[k].start != nx[k].start || s[k].count != nx[k].count || s[k].stride != nx[k].stride ||
        s[k].width != nx[k].width)
      return 0;
  }
  for (int k = 0; k < n; k++) {
    nx[k].start += ds[k];
    nx[k].count += dc[k];
  }
  return 1;
}

/* One query tile: rows order[pb .. pb + nr) (positions pb.. when order is NULL). Rows
 * are read in runs whose segments each move by a fixed step a row (the rows of a
 * closed-form pattern mostly do), one interval list entry per segment per run. */
static int plan_tile(builder *b, const int32_t *order, int64_t pb, int32_t nr) {
  splat__query_tile *qt = &b->tiles[b->ntiles++];
  qt->row_begin = pb;
  qt->nrows = nr;
  qt->run_begin = b->nruns;
  qt->nruns = 0;

  const int64_t *row_seg = b->row_seg;
  const splat__segment *segs = b->segs;
  tile_scan ts;
  ts.nmru = ts.next = 0;
  memset(ts.qd, 0, sizeof ts.qd);
  memset(ts.qq, 0, sizeof ts.qq);
  ts.m = 0;
  gmap_clear(&b->gm);
  const splat__segment *g = NULL; /* first row of the current run */
  int gn = 0;                     /* its segments */
  int32_t len = 0;                /* its rows */
  int32_t ds[SPLAT_MAX_SEGMENTS], dc[SPLAT_MAX_SEGMENTS];
  splat__segment nx[SPLAT_MAX_SEGMENTS]; /* the run's next row, predicted */
  for (int32_t r = 0; r < nr; r++) {
    const int64_t row = order ? order[pb + r] : pb + r;
    if (order) PREFETCH_ROW(b, order, pb + r);
    const splat__segment *s = segs + row_seg[row];
    const int n = (int)(row_seg[row + 1] - row_seg[row]);
    if (len > 0 && n == gn &&
        (len == 1 ? start_run(g, s, n, ds, dc, nx) : continues_run(s, n, ds, dc, nx))) {
      len++;
      continue;
    }
    if (len > 0 && !add_run(b, &ts, g, gn, ds, dc, len)) return 0;
    g = s, gn = n, len = 1;
    if (b->stop_at_strided) {
      for (int k = 0; k < n; k++)
        if (s[k].stride > 1) {
          b->saw_strided = 1;
          return 1;
        }
    }
  }
  if (len > 0 && !add_run(b, &ts, g, gn, ds, dc, len)) return 0;
  const int64_t m = ts.m;
  if (m == 0) return 1;
  const int32_t G = b->gm.n;
  if (G == 1) {
    if (!plan_group(b, b->gm.by_id[0], b->iv, m, b->glo[0], b->ghi[0], nr)) return 0;
  } else {
    /* Stable counting sort of the intervals by group, groups in plan order. */
    sort_ids(b->gm.by_id, G, b->gorder, b->gpairs);
    int64_t acc = 0;
    for (int32_t oi = 0; oi < G; oi++) {
      const int32_t gi = b->gorder[oi];
      b->gpos[gi] = acc;
      acc += b->gcnt[gi];
    }
    for (int64_t k = 0; k < m; k++) b->iv2[b->gpos[b->iv[k].gid]++] = b->iv[k];
    int64_t off = 0;
    for (int32_t oi = 0; oi < G; oi++) {
      const int32_t gi = b->gorder[oi];
      if (!plan_group(b, b->gm.by_id[gi], b->iv2 + off, b->gcnt[gi], b->glo[gi], b->ghi[gi], nr))
        return 0;
      off += b->gcnt[gi];
    }
  }
  qt = &b->tiles[b->ntiles - 1];
  qt->nruns = (int32_t)(b->nruns - qt->run_begin);
  return 1;
}

static int cmp_u64(const void *x, const void *y) {
  const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* Plans the regular rows order[0 .. nreg), cut into tiles that never cross a boundary
 * in bounds[0 .. nb] (bounds[0] = 0, bounds[nb] = nreg). With a permuted order the
 * tiles are planned by increasing first row (classes interleave, so the rows being
 * read stay close in memory), then their runs are put back in tile order: a tile's
 * runs and counts do not depend on the order tiles are planned in. */
static int plan_order(builder *b, const int32_t *order, int64_t nreg, const int64_t *bounds,
                      int64_t nb) {
  int64_t ntiles = 0;
  for (int64_t c = 0; c < nb; c++) ntiles += (bounds[c + 1] - bounds[c] + b->tq - 1) / b->tq;
  b->tiles = malloc((size_t)(ntiles > 0 ? ntiles : 1) * sizeof *b->tiles);
  if (!b->tiles) return 0;
  b->ntiles = 0;
  b->nord = nreg;
  if (!order || nb < 2) {
    for (int64_t c = 0; c < nb; c++) {
      for (int64_t pb = bounds[c]; pb < bounds[c + 1]; pb += b->tq) {
        int64_t nr = bounds[c + 1] - pb;
        if (nr > b->tq) nr = b->tq;
        if (!plan_tile(b, order, pb, (int32_t)nr)) return 0;
        if (b->saw_strided) return 1;
      }
    }
    return 1;
  }
  /* (first row << 32 | tile index), tiles in order; rows and tiles fit in 31 bits. */
  uint64_t *key = malloc((size_t)(ntiles > 0 ? ntiles : 1) * sizeof *key);
  if (!key) return 0;
  int64_t t = 0;
  for (int64_t c = 0; c < nb; c++)
    for (int64_t pb = bounds[c]; pb < bounds[c + 1]; pb += b->tq, t++) {
      b->tiles[t].row_begin = pb;
      b->tiles[t].nrows = (int32_t)(bounds[c + 1] - pb < b->tq ? bounds[c + 1] - pb : b->tq);
      key[t] = (uint64_t)(uint32_t)order[pb] << 32 | (uint64_t)t;
    }
  qsort(key, (size_t)ntiles, sizeof *key, cmp_u64);
  for (int64_t i = 0; i < ntiles; i++) {
    const int64_t ti = (int64_t)(key[i] & 0xffffffffu);
    b->ntiles = ti;
    if (!plan_tile(b, order, b->tiles[ti].row_begin, b->tiles[ti].nrows)) {
      free(key);
      return 0;
    }
    if (b->saw_strided) { /* (the plan is left incomplete, as above) */
      free(key);
      return 1;
    }
  }
  free(key);
  b->ntiles = ntiles;
  splat__key_run *runs = malloc((size_t)(b->nruns > 0 ? b->nruns : 1) * sizeof *runs);
  if (!runs) return 0;
  int64_t n = 0;
  for (int64_t i = 0; i < ntiles; i++) {
    splat__query_tile *qt = &b->tiles[i];
    if (qt->nruns) memcpy(runs + n, b->runs + qt->run_begin, (size_t)qt->nruns * sizeof *runs);
    qt->run_begin = n;
    n += qt->nruns;
  }
  free(b->runs);
  b->runs = runs;
  b->runs_cap = b->nruns > 0 ? b->nruns : 1;
  return 1;
}

static void builder_take(builder *b, splat__tile_plan *t) {
  t->tiles = b->tiles;
  t->ntiles = b->ntiles;
  t->runs = b->runs;
  t->nruns = b->nruns;
  t->full_tiles = b->full;
  t->predicated_tiles = b->pred;
  t->computed = b->computed;
  b->tiles = NULL;
  b->runs = NULL;
  b->ntiles = b->nruns = b->runs_cap = 0;
  b->full = b->pred = b->computed = 0;
}

void splat__tile_plan_free(splat__tile_plan *t) {
  if (!t) return;
  free(t->perm);
  free(t->tiles);
  free(t->runs);
  memset(t, 0, sizeof *t);
}

/* Class of a regular row: group of its dominant (largest, first of equals) strided
 * segment; *len its nnz, 0 for the trivial class. cd, cq: quotient cache of quot_cached. */
static splat__key_group row_class(const splat__acsr *a, int64_t row, int64_t *len, int32_t *cd,
                                  int32_t *cq) {
  splat__key_group g = {0, 1, 1};
  int64_t best = 0, bi = -1;
  for (int64_t s = a->row_seg[row]; s < a->row_seg[row + 1]; s++) {
    const splat__segment seg = a->segs[s];
    if (seg.stride > 1 && splat__segment_nnz(seg) > best) {
      best = splat__segment_nnz(seg);
      bi = s;
    }
  }
  if (bi >= 0) { /* splat__segment_group, with the quotient cached */
    const splat__segment seg = a->segs[bi];
    g.phase = seg.start - quot_cached(seg.start, seg.stride, cd, cq) * seg.stride;
    g.stride = seg.stride;
    g.width = seg.width;
  }
  *len = best;
  return g;
}

/* Class ids by phase for a few (stride, width) pairs of small stride: one array read
 * per row where the map would hash (the rows of a strided pattern cycle through every
 * phase). ids[phase] = -1 until seen. */
#define PHASE_TABLES 4
#define PHASE_TABLE_MAX_STRIDE 65536
typedef struct phase_table {
  int32_t stride, width;
  int32_t *ids;
} phase_table;

/* A lower bound on the identity plan's key tiles, gathered row by row in identity order:
 * in each identity tile every distinct non-trivial class is a group of the tile, and a
 * row's dominant segment alone touches at least ceil(len / tile_k) key tiles of it. */
typedef struct lower_bound {
  int32_t *seen, *mx; /* per class: last tile seen in, largest len there */
  int32_t *list;      /* classes of the current tile, [tile_q] */
  int32_t nl, tile, cap;
  int64_t tiles;
} lower_bound;

/* Adds a row of class id with dominant length len; last: the row ends its tile. 0 on OOM.
 * b: for the key tile size. */
static int lower_bound_add(lower_bound *l, int32_t id, int64_t len, int last, const builder *b) {
  if (id >= l->cap) {
    int32_t c = l->cap > 0 ? l->cap : 64;
    while (c <= id) c *= 2;
    int32_t *s = realloc(l->seen, (size_t)c * sizeof *s);
    if (!s) return 0;
    l->seen = s;
    int32_t *m = realloc(l->mx, (size_t)c * sizeof *m);
    if (!m) return 0;
    l->mx = m;
    for (int32_t k = l->cap; k < c; k++) l->seen[k] = -1;
    l->cap = c;
  }
  if (len > 0) {
    if (l->seen[id] != l->tile) l->seen[id] = l->tile, l->mx[id] = 0, l->list[l->nl++] = id;
    if (len > l->mx[id]) l->mx[id] = (int32_t)len;
  }
  if (last) {
    for (int32_t k = 0; k < l->nl; k++) l->tiles += div_tk(b, l->mx[l->list[k]] + b->tk - 1);
    l->nl = 0;
    l->tile++;
  }
  return 1;
}

static int check_tile(int *v) {
  if (*v == 0) *v = DEFAULT_TILE;
  if (*v < 0 || *v > MAX_TILE) return 0;
  return 1;
}

/* Whether regular rows r0 and r1 have the same segments. */
static int same_segments(const splat__acsr *a, int64_t r0, int64_t r1) {
  const int64_t n = a->row_seg[r0 + 1] - a->row_seg[r0];
  return n == a->row_seg[r1 + 1] - a->row_seg[r1] &&
         !memcmp(a->segs + a->row_seg[r0], a->segs + a->row_seg[r1], (size_t)n * sizeof *a->segs);
}

/* plan_order's bounds over positions 0 .. nreg of `order` (NULL: the identity) that also
 * begin and end every stretch of at least min_rows consecutive rows with the same segments:
 * the number of intervals nb (bounds (*out)[0 .. nb]), 0 when each of them falls at a
 * multiple of tile_q (the tiles would be those of one interval: nothing is held), -1 without
 * memory. */
static int64_t stretch_bounds(const splat__acsr *a, const int32_t *order, int64_t nreg, int tile_q,
                              int min_rows, int64_t **out) {
  *out = NULL;
  int64_t cap = 16, nb = 0;
  int moved = 0;
  int64_t *bd = malloc((size_t)cap * sizeof *bd);
  if (!bd) return -1;
  bd[0] = 0;
  int64_t s0 = 0; /* the current stretch's first position */
  for (int64_t p = 1; p <= nreg; p++) {
    if (p < nreg && same_segments(a, order ? order[p - 1] : p - 1, order ? order[p] : p)) continue;
    if (p - s0 >= min_rows) {
      const int64_t at[2] = {s0, p};
      for (int i = 0; i < 2; i++) {
        if (at[i] <= bd[nb] || at[i] >= nreg) continue;
        if (nb + 3 > cap) { /* room for this bound and the last one, nreg */
          int64_t *g = realloc(bd, (size_t)(2 * cap) * sizeof *bd);
          if (!g) {
            free(bd);
            return -1;
          }
          bd = g;
          cap *= 2;
        }
        bd[++nb] = at[i];
        moved |= at[i] % tile_q != 0;
      }
    }
    s0 = p;
  }
  if (!moved) {
    free(bd);
    return 0;
  }
  bd[++nb] = nreg;
  *out = bd;
  return nb;
}

/* splat__tile_plan_build, or with cut_rows > 0 splat__tile_plan_build_cut's plan (*made). */
static splat_status build_plan(const splat__acsr *a, int tile_q, int tile_k, int cut_rows,
                               splat__tile_plan *out, int *made) {
  if (made) *made = 0;
  int cut_made = 0; /* *made once the plan is complete */
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "tile plan: out is NULL");
  memset(out, 0, sizeof *out);
  if (!a) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "tile plan: acsr is NULL");
  const int tq0 = tile_q, tk0 = tile_k;
  if (!check_tile(&tile_q))
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "tile_q=%d invalid: must be 0 (default %d) or 1..%d", tq0, DEFAULT_TILE,
                       MAX_TILE);
  if (!check_tile(&tile_k))
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "tile_k=%d invalid: must be 0 (default %d) or 1..%d", tk0, DEFAULT_TILE,
                       MAX_TILE);

  const int64_t seq_q = a->seq_q;
  const int K = a->max_segments > 0 ? a->max_segments : 1;
  /* At least a tile and a run for each tile_q rows, beside the analysis itself: refused
   * here when this machine's memory cannot hold them (tile 1 x 1 over 2^29 rows). */
  const double need =
                   splat__acsr_bytes(a) + (double)((seq_q + tile_q - 1) / tile_q) *
                                              (sizeof(splat__query_tile) + sizeof(splat__key_run)),
               have = splat__physical_memory();
  if (have > 0 && need > have)
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY,
                       "the tile plan of %lld rows in tiles of %dx%d needs at least %.1f GB with "
                       "the analysis; this machine has %.1f GB",
                       (long long)seq_q, tile_q, tile_k, need / 1e9, have / 1e9);
  splat_status st = SPLAT_OK;
  builder b;
  memset(&b, 0, sizeof b);
  b.a = a;
  b.tq = tile_q;
  b.tk = tile_k;
  b.tk_shift = -1;
  if ((tile_k & (tile_k - 1)) == 0) b.tk_shift = __builtin_ctz((unsigned)tile_k);
  int32_t *perm_b = NULL, *rank = NULL, *cls = NULL;
  lower_bound lbs;
  memset(&lbs, 0, sizeof lbs);
  phase_table pt[PHASE_TABLES];
  memset(pt, 0, sizeof pt);
  int64_t *bounds = NULL, *cuts = NULL;
  gmap cm;
  memset(&cm, 0, sizeof cm);
  splat__tile_plan alt;
  memset(&alt, 0, sizeof alt);

  out->tile_q = tile_q;
  out->tile_k = tile_k;
  /* The identity order (a) is written out only at the end when it is the plan's, unless
   * irregular rows make it a real permutation. */
  if (a->rem_rows > 0) out->perm = malloc((size_t)(seq_q > 0 ? seq_q : 1) * sizeof *out->perm);
  const int64_t ivmax = (int64_t)tile_q * K;
  b.iv = malloc((size_t)ivmax * sizeof *b.iv);
  b.iv2 = malloc((size_t)ivmax * sizeof *b.iv2);
  if ((a->rem_rows > 0 && !out->perm) || !b.iv || !b.iv2 || !gmap_init(&b.gm, 2 * ivmax) ||
      !ensure_groups(&b, 16) || !ensure_positions(&b, a->seq_k / tile_k + 3))
    goto oom;

  /* (a) identity order: regular rows first, then irregular rows. */
  int64_t nreg = 0;
  out->permuted = 0;
  if (a->rem_rows == 0) {
    nreg = seq_q;
  } else {
    for (int64_t i = 0; i < seq_q; i++)
      if (!splat__acsr_row_irregular(a, i)) out->perm[nreg++] = (int32_t)i;
    int64_t p = nreg;
    for (int64_t i = 0; i < seq_q; i++)
      if (splat__acsr_row_irregular(a, i)) out->perm[p++] = (int32_t)i;
    /* Not the identity unless every irregular row already comes last. */
    for (int64_t i = 0; i < seq_q; i++)
      if (out->perm[i] != i) {
        out->permuted = 1;
        break;
      }
  }
  out->regular_rows = nreg;
  /* (a) identity order first, stopped at the first strided segment: most patterns have
   * none, and then (a) is the plan. Irregular rows have no segments. The cut plan: its
   * tiles also cut at its stretches of rows (none: no plan). */
  const int64_t bnd_id[2] = {0, nreg};
  int64_t ncut = 1;
  if (cut_rows > 0) {
    ncut = stretch_bounds(a, out->permuted ? out->perm : NULL, nreg, tile_q, cut_rows, &cuts);
    if (ncut < 0) goto oom;
    if (ncut == 0) goto discard;
  }
  b.row_seg = a->row_seg;
  b.segs = a->segs;
  b.stop_at_strided = 1;
  if (!plan_order(&b, out->permuted ? out->perm : NULL, nreg, cuts ? cuts : bnd_id, ncut)) goto oom;
  const int any_strided = b.saw_strided;
  b.stop_at_strided = b.saw_strided = 0;
  if (!any_strided) { /* (a) complete: the plan */
    builder_take(&b, out);
    cut_made = cut_rows > 0;
    goto finish;
  }
  if (cut_rows > 0) goto discard; /* rows regrouped by class are never cut */
  free(b.tiles);                  /* the incomplete plan */
  b.tiles = NULL;
  b.ntiles = b.nruns = 0;
  b.full = b.pred = b.computed = 0;
  /* Rows regrouped by class (b) are planned next, when the rows fall into more than one
   * class (with one class the regrouped order is the identity order, tile for tile, and
   * could never win); then (a) in full unless a bound shows that (b) wins. */
  int have_alt = 0;
  int32_t C = 0;
  {
    cls = malloc((size_t)(nreg > 0 ? nreg : 1) * sizeof *cls);
    lbs.list = malloc((size_t)tile_q * sizeof *lbs.list);
    if (!cls || !lbs.list || !gmap_init(&cm, 64)) goto oom;
    int nontrivial = 0, npt = 0;
    int32_t cd = 0, cq = 0, in_tile = 0; /* rows of the current identity tile */
    for (int64_t p = 0; p < nreg; p++) {
      int64_t len;
      const splat__key_group g = row_class(a, out->perm ? out->perm[p] : p, &len, &cd, &cq);
      if (g.stride > 1) nontrivial = 1;
      int32_t *slot = NULL; /* the class's entry in a phase table */
      if (g.phase >= 0 && g.phase < g.stride && g.stride <= PHASE_TABLE_MAX_STRIDE) {
        int k = 0;
        while (k < npt && (pt[k].stride != g.stride || pt[k].width != g.width)) k++;
        if (k == npt && npt < PHASE_TABLES) {
          pt[k].ids = malloc((size_t)g.stride * sizeof *pt[k].ids);
          if (!pt[k].ids) goto oom;
          memset(pt[k].ids, 0xff, (size_t)g.stride * sizeof *pt[k].ids);
          pt[k].stride = g.stride;
          pt[k].width = g.width;
          npt++;
        }
        if (k < npt) slot = &pt[k].ids[g.phase];
      }
      int32_t id = slot ? *slot : -1;
      if (id < 0) {
        id = gmap_get(&cm, g);
        if (id < 0) goto oom;
        if (slot) *slot = id;
      }
      cls[p] = id;
      if (++in_tile == tile_q) in_tile = 0;
      if (!lower_bound_add(&lbs, id, len, in_tile == 0 || p == nreg - 1, &b)) goto oom;
    }
    C = cm.n;
    have_alt = nontrivial && C > 1;
  }
  if (have_alt) {
    rank = malloc((size_t)C * sizeof *rank);
    int32_t *ids = malloc((size_t)C * sizeof *ids);
    gid_pair *pairs = malloc((size_t)C * sizeof *pairs);
    bounds = calloc((size_t)C + 1, sizeof *bounds);
    perm_b = malloc((size_t)(seq_q > 0 ? seq_q : 1) * sizeof *perm_b);
    if (!rank || !ids || !pairs || !bounds || !perm_b) {
      free(ids);
      free(pairs);
      goto oom;
    }
    sort_ids(cm.by_id, C, ids, pairs);
    for (int32_t r = 0; r < C; r++) rank[ids[r]] = r;
    free(ids);
    free(pairs);
    for (int64_t p = 0; p < nreg; p++) bounds[rank[cls[p]] + 1]++;
    for (int32_t r = 0; r < C; r++) bounds[r + 1] += bounds[r];
    {
      int64_t *fill = malloc((size_t)C * sizeof *fill);
      if (!fill) goto oom;
      memcpy(fill, bounds, (size_t)C * sizeof *fill);
      for (int64_t p = 0; p < nreg; p++)
        perm_b[fill[rank[cls[p]]]++] = out->perm ? out->perm[p] : (int32_t)p;
      free(fill);
    }
    for (int64_t p = nreg; p < seq_q; p++) perm_b[p] = out->perm[p];
    b.row_seg = a->row_seg;
    b.segs = a->segs;
    if (!plan_order(&b, perm_b, nreg, bounds, C)) goto oom;
    builder_take(&b, &alt);
  }

  /* (a) identity order, unless the lower bound on its work (lower_bound) already exceeds
   * the regrouped plan's (then (b) wins the comparison below whatever (a) would be). */
  const int need_identity = !have_alt || !(lbs.tiles * tile_q * tile_k > alt.computed);
  if (need_identity) {
    b.row_seg = a->row_seg;
    b.segs = a->segs;
    if (!plan_order(&b, out->permuted ? out->perm : NULL, nreg, bnd_id, 1)) goto oom;
    builder_take(&b, out);
  }
  if (have_alt && (!need_identity || alt.computed < out->computed)) {
    free(out->perm);
    free(out->tiles);
    free(out->runs);
    out->perm = perm_b;
    perm_b = NULL;
    out->tiles = alt.tiles;
    out->ntiles = alt.ntiles;
    out->runs = alt.runs;
    out->nruns = alt.nruns;
    out->full_tiles = alt.full_tiles;
    out->predicated_tiles = alt.predicated_tiles;
    out->computed = alt.computed;
    /* Regrouping may keep every row in place and only cut tiles differently. */
    out->permuted = 0;
    for (int64_t i = 0; i < seq_q; i++)
      if (out->perm[i] != i) {
        out->permuted = 1;
        break;
      }
    alt.tiles = NULL;
    alt.runs = NULL;
  }
finish:
  if (!out->perm) { /* the identity order is the plan's */
    out->perm = malloc((size_t)(seq_q > 0 ? seq_q : 1) * sizeof *out->perm);
    if (!out->perm) goto oom;
    for (int64_t i = 0; i < seq_q; i++) out->perm[i] = (int32_t)i;
  }
  goto done;

discard:
  splat__tile_plan_free(out);
  goto done;
oom:
  st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "tile plan: out of memory (%lld rows, tile %dx%d)",
                   (long long)seq_q, tile_q, tile_k);
done:
  if (made) *made = st == SPLAT_OK && cut_made;
  free(cuts);
  free(b.tiles);
  free(b.runs);
  builder_free_scratch(&b);
  gmap_free(&cm);
  free(alt.tiles);
  free(alt.runs);
  free(perm_b);
  free(rank);
  free(cls);
  free(lbs.seen);
  free(lbs.mx);
  free(lbs.list);
  for (int k = 0; k < PHASE_TABLES; k++) free(pt[k].ids);
  free(bounds);
  if (st != SPLAT_OK) splat__tile_plan_free(out);
  return st;
}

splat_status splat__tile_plan_build(const splat__acsr *a, int tile_q, int tile_k,
                                    splat__tile_plan *out) {
  return build_plan(a, tile_q, tile_k, 0, out, NULL);
}

splat_status splat__tile_plan_build_cut(const splat__acsr *a, int tile_q, int tile_k,
                                        splat__tile_plan *out, int *made) {
  *made = 0;
  return build_plan(a, tile_q, tile_k, tile_q > 0 ? tile_q : DEFAULT_TILE, out, made);
}

/* A row's segments for the two passes: out0 (at most K) the strided ones, out1 (at most K)
 * the contiguous ones, *n0 and *n1 of each. Where the row's strided segments are one
 * lattice (stride d, one phase, width 1) that its contiguous segments cut (strided(64) |
 * window(64): the window takes keys i - 64, i, i + 64), the lattice points inside the
 * contiguous segments move to the strided pass, which then has no holes (its phase-class
 * tiles stay full: no predicated diagonal, one run), and the contiguous segments split
 * around them — when each pass keeps at most K segments and the strided pass no more
 * than it had, every merged progression has two points or more. */
/* Quotient caches of pass_row's divisions (quot_cached), one per segment slot: [0] the
 * strided segments', [1] the contiguous ones'; neighbouring rows' starts move by a key. */
typedef struct pass_row_cache {
  int32_t cd[2][SPLAT_MAX_SEGMENTS], cq[2][SPLAT_MAX_SEGMENTS];
} pass_row_cache;

/* x mod d for x >= 0, d > 1, through a quotient cache. */
static inline int64_t mod_cached(int32_t x, int32_t d, int32_t *cd, int32_t *cq) {
  return (int64_t)x - (int64_t)quot_cached(x, d, cd, cq) * d;
}

static void pass_row(const splat__segment *segs, int n, int K, pass_row_cache *pc,
                     splat__segment *out0, int *n0, splat__segment *out1, int *n1) {
  *n0 = *n1 = 0;
  for (int s = 0; s < n; s++) {
    if (segs[s].stride > 1)
      out0[(*n0)++] = segs[s];
    else
      out1[(*n1)++] = segs[s];
  }
  if (*n0 == 0 || *n1 == 0) return;
  const int32_t d = out0[0].stride;
  if (out0[0].start < 0) return; /* keys are not negative */
  const int64_t ph = mod_cached(out0[0].start, d, &pc->cd[0][0], &pc->cq[0][0]);
  for (int s = 0; s < *n0; s++)
    if (out0[s].stride != d || out0[s].width != 1 || out0[s].start < 0 ||
        (s && mod_cached(out0[s].start, d, &pc->cd[0][s], &pc->cq[0][s]) != ph))
      return;
  /* The lattice as ranges of points [lo, hi] (step d), the strided segments' and each
   * contiguous segment's points; the contiguous segments less those points. */
  int64_t lo[2 * SPLAT_MAX_SEGMENTS + 2], hi[2 * SPLAT_MAX_SEGMENTS + 2];
  int64_t pts[2 * SPLAT_MAX_SEGMENTS + 2]; /* each range's points */
  splat__segment c[SPLAT_MAX_SEGMENTS];
  int nr = 0, nc = 0;
  for (int s = 0; s < *n0; s++) {
    lo[nr] = out0[s].start;
    pts[nr] = out0[s].count;
    hi[nr++] = out0[s].start + (int64_t)(out0[s].count - 1) * d;
  }
  for (int s = 0; s < *n1; s++) {
    const int64_t a0 = out1[s].start, a1 = a0 + out1[s].count - 1; /* keys [a0, a1] */
    if (a0 < 0) return;
    int64_t gap = ph - mod_cached(out1[s].start, d, &pc->cd[1][s], &pc->cq[1][s]);
    if (gap < 0) gap += d;
    const int64_t p0 = a0 + gap; /* first point >= a0 */
    int64_t from = a0, last = p0, npts = 0;
    for (int64_t q = p0; q <= a1; q += d) {
      if (q > from) {
        if (nc == K) return;
        c[nc++] = (splat__segment){(int32_t)from, 1, (int32_t)(q - from), 1};
      }
      from = q + 1;
      last = q;
      npts++;
    }
    if (from <= a1) {
      if (nc == K) return;
      c[nc++] = (splat__segment){(int32_t)from, 1, (int32_t)(a1 - from + 1), 1};
    }
    if (p0 <= a1) {
      if (nr == 2 * SPLAT_MAX_SEGMENTS + 2) return;
      lo[nr] = p0;
      pts[nr] = npts;
      hi[nr++] = last;
    }
  }
  /* Sort the ranges by start (few) and merge those d apart. */
  for (int x = 1; x < nr; x++) {
    const int64_t tl = lo[x], th = hi[x], tp = pts[x];
    int y = x;
    for (; y > 0 && tl < lo[y - 1]; y--) lo[y] = lo[y - 1], hi[y] = hi[y - 1], pts[y] = pts[y - 1];
    lo[y] = tl, hi[y] = th, pts[y] = tp;
  }
  int m = 0;
  for (int x = 1; x < nr; x++) {
    if (lo[x] == hi[m] + d)
      hi[m] = hi[x], pts[m] += pts[x];
    else
      m++, lo[m] = lo[x], hi[m] = hi[x], pts[m] = pts[x];
  }
  m++;
  if (m > *n0) return;
  for (int x = 0; x < m; x++)
    if (pts[x] == 1) return; /* a lone point: its canonical form is contiguous */
  for (int x = 0; x < m; x++)
    out0[x] = (splat__segment){(int32_t)lo[x], (int32_t)d, (int32_t)pts[x], 1};
  *n0 = m;
  memcpy(out1, c, (size_t)nc * sizeof *c);
  *n1 = nc;
}

void splat__pass_acsr_free(splat__acsr *part) {
  free(part->row_seg);
  free(part->segs);
  part->row_seg = NULL;
  part->segs = NULL;
}

int32_t splat__tile_plan_max_rows(const splat__tile_plan *t) {
  int32_t most = 0;
  for (int64_t q = 0; q < t->ntiles; q++)
    if (t->tiles[q].nrows > most) most = t->tiles[q].nrows;
  return most;
}

int splat__tile_plan_mixes(const splat__acsr *a) {
  if (!a) return 0;
  const int64_t nsegs = a->row_seg[a->seq_q];
  int64_t ncontig = 0;
  for (int64_t s = 0; s < nsegs; s++) ncontig += a->segs[s].stride <= 1;
  return ncontig > 0 && ncontig < nsegs;
}

int splat__tile_plan_may_pass(const splat__acsr *a, const splat__tile_plan *single) {
  return a && single && single->computed > 2 * a->nnz && splat__tile_plan_mixes(a);
}

int splat__tile_plan_passes_pay(const splat__tile_plan out[2], const splat__tile_plan *single) {
  return 4 * (out[0].computed + out[1].computed) <= 3 * single->computed;
}

/* The passes' tile plans, six jobs (core/parallel.h): each pass's on the single plan's
 * tiles, on key tiles of half the width (splat__tile_plan_passes_build keeps those where
 * they compute a fifth less), and on query tiles of tile_q2 rows where asked. */
typedef struct pass_jobs {
  int tile_q, tile_k, tile_q2;
  const splat__acsr *part;
  splat__tile_plan *out, *out2, half[2];
} pass_jobs;

static splat_status plan_pass(void *arg, int i) {
  pass_jobs *j = arg;
  const int k = i / 3, v = i % 3; /* v 0: the tiles; 1: half-width keys; 2: tile_q2 rows */
  if (v == 1 && j->tile_k % 128) return SPLAT_OK; /* no half-width trial */
  if (v == 2 && !j->tile_q2) return SPLAT_OK;
  return splat__tile_plan_build(&j->part[k], v == 2 ? j->tile_q2 : j->tile_q,
                                v == 1 ? j->tile_k / 2 : j->tile_k,
                                v == 0   ? &j->out[k]
                                : v == 1 ? &j->half[k]
                                         : &j->out2[k]);
}

/* The passes' ACSRs are split from a's rows in chunks of rows, one job each (core/parallel.h),
 * from 4 x SPLIT_CHUNK_ROWS rows (split_chunks; test_analysis checks plans at 4097), in two
 * rounds: each row's segments counted into row_seg, then (their offsets summed) written.
 * pass_row runs twice a row, and the arrays are allocated at their size: written at their
 * bound (K contiguous segments a row) they held 8 MiB at 65536 rows for 3 of use, and fresh
 * pages cost (bench/NOTES.md v64). */
#define SPLIT_CHUNKS 8
#define SPLIT_CHUNK_ROWS 1024
typedef struct split_jobs {
  const splat__acsr *a;
  splat__acsr *part;
  int chunks, write;               /* write: the second round */
  int64_t nnz_of[SPLIT_CHUNKS][2]; /* each chunk's entries of each pass (first round) */
} split_jobs;

/* The split's chunks: one a core, from 4 (on fewer cores too: the chunked path is the one
 * tested) to SPLIT_CHUNKS, of SPLIT_CHUNK_ROWS rows at least; 1 below 4 such chunks. */
static int split_chunks(int64_t seq_q) {
  const int cores = splat__online_cores();
  const int64_t most = seq_q / SPLIT_CHUNK_ROWS;
  int64_t c = cores < 4 ? 4 : cores > SPLIT_CHUNKS ? SPLIT_CHUNKS : cores;
  if (c > most) c = most;
  return c >= 4 ? (int)c : 1;
}

static int64_t chunk_row(const split_jobs *j, int c) {
  return j->a->seq_q * c / j->chunks;
}

static splat_status split_rows(void *arg, int c) {
  split_jobs *j = arg;
  const splat__acsr *a = j->a;
  int64_t nnz[2] = {0, 0}; /* summed here, stored once: the chunks' counters share a line */
  pass_row_cache pc;
  memset(&pc, 0, sizeof pc);
  /* r[0]: the contiguous pass's segments of a row (the first pass: see tile_plan.h), r[1]:
   * the strided pass's. */
  splat__segment r[2][SPLAT_MAX_SEGMENTS];
  for (int64_t i = chunk_row(j, c); i < chunk_row(j, c + 1); i++) {
    int m[2];
    pass_row(&a->segs[a->row_seg[i]], (int)(a->row_seg[i + 1] - a->row_seg[i]), a->max_segments,
             &pc, r[1], &m[1], r[0], &m[0]);
    for (int k = 0; k < 2; k++) {
      splat__acsr *pk = &j->part[k];
      if (j->write) {
        memcpy(&pk->segs[pk->row_seg[i]], r[k], (size_t)m[k] * sizeof *r[k]);
      } else {
        pk->row_seg[i] = m[k];
        for (int x = 0; x < m[k]; x++) nnz[k] += (int64_t)r[k][x].count * r[k][x].width;
      }
    }
  }
  if (!j->write) j->nnz_of[c][0] = nnz[0], j->nnz_of[c][1] = nnz[1];
  return SPLAT_OK;
}

splat_status splat__tile_plan_passes_build(const splat__acsr *a, int tile_q, int tile_k,
                                           int tile_q2, splat__tile_plan out[2],
                                           splat__acsr part[2], splat__tile_plan out2[2]) {
  memset(out, 0, 2 * sizeof *out);
  memset(part, 0, 2 * sizeof *part);
  if (tile_q2) memset(out2, 0, 2 * sizeof *out2);
  const int64_t seq_q = a->seq_q;
  /* The ACSR of each pass: the same rows (and remainder), each row's segments of one kind
   * (split_rows). */
  part[0] = part[1] = *a;
  part[0].row_seg = part[1].row_seg = NULL;
  part[0].segs = part[1].segs = NULL;
  splat_status st = SPLAT_OK;
  for (int k = 0; k < 2; k++) {
    part[k].row_seg = malloc((size_t)(seq_q + 1) * sizeof *part[k].row_seg);
    if (!part[k].row_seg)
      st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "tile plan: out of memory (two passes)");
  }
  const double t0 = splat__now_ms();
  split_jobs sj;
  memset(&sj, 0, sizeof sj);
  sj.a = a;
  sj.part = part;
  sj.chunks = split_chunks(seq_q);
  if (st == SPLAT_OK) st = splat__parallel_run(split_rows, &sj, sj.chunks);
  int64_t n[2] = {0, 0}, nnz[2] = {0, 0};
  for (int k = 0; k < 2 && st == SPLAT_OK; k++) {
    for (int64_t i = 0; i < seq_q; i++) {
      const int64_t m = part[k].row_seg[i];
      part[k].row_seg[i] = n[k];
      n[k] += m;
    }
    for (int c = 0; c < sj.chunks; c++) nnz[k] += sj.nnz_of[c][k];
    part[k].segs = malloc((size_t)(n[k] + 1) * sizeof *part[k].segs);
    if (!part[k].segs)
      st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "tile plan: out of memory (two passes)");
  }
  sj.write = 1;
  if (st == SPLAT_OK) st = splat__parallel_run(split_rows, &sj, sj.chunks);
  const double t1 = splat__now_ms();
  if (st == SPLAT_OK) {
    part[0].row_seg[seq_q] = n[0];
    part[1].row_seg[seq_q] = n[1];
    pass_jobs j;
    memset(&j, 0, sizeof j);
    j.tile_q = tile_q, j.tile_k = tile_k, j.tile_q2 = tile_q2, j.part = part, j.out = out,
    j.out2 = out2;
    st = splat__parallel_run(plan_pass, &j, 6);
    /* Key tiles of half the width where they compute a fifth less: phase classes of 64 keys
     * (strided(64) at 4096) half-fill 128-key tiles, whose empty half costs the kernels a
     * predicated sub-tile per item (bench/NOTES.md v20). Only from widths that are multiples
     * of 128: the warp-specialised kernel takes key tiles of whole 64-key sub-tiles. Not
     * where it cannot: its tiles hold the pass's regular entries at least, so above 4/5 of
     * the plan's work they exceed a fifth less. */
    for (int k = 0; k < 2; k++) {
      part[k].nnz = a->rem_nnz + nnz[k];
      if (st == SPLAT_OK && tile_k % 128 == 0 && 5 * nnz[k] <= 4 * out[k].computed &&
          5 * j.half[k].computed <= 4 * out[k].computed) {
        splat__tile_plan_free(&out[k]);
        out[k] = j.half[k];
        if (tile_q2) splat__tile_plan_free(&out2[k]); /* on the full-width key tiles */
      } else {
        splat__tile_plan_free(&j.half[k]);
      }
    }
    splat__log(SPLAT__LOG_DEBUG,
               "tile plan: the passes' ACSRs split in %d chunk(s) %.2f ms, their tile plans %.2f",
               sj.chunks, t1 - t0, splat__now_ms() - t1);
  }
  if (st != SPLAT_OK) {
    splat__tile_plan_passes_free(out, part);
    for (int k = 0; k < 2 && tile_q2; k++) splat__tile_plan_free(&out2[k]);
  }
  return st;
}

void splat__tile_plan_passes_free(splat__tile_plan out[2], splat__acsr part[2]) {
  for (int k = 0; k < 2; k++) {
    splat__pass_acsr_free(&part[k]);
    splat__tile_plan_free(&out[k]);
  }
}

splat_status splat__tile_plan_passes(const splat__acsr *a, const splat__tile_plan *single,
                                     splat__tile_plan out[2], splat__acsr part[2], int *npass) {
  *npass = 0;
  memset(out, 0, 2 * sizeof *out);
  memset(part, 0, 2 * sizeof *part);
  if (!splat__tile_plan_may_pass(a, single)) return SPLAT_OK;
  const splat_status st =
      splat__tile_plan_passes_build(a, single->tile_q, single->tile_k, 0, out, part, NULL);
  if (st == SPLAT_OK && splat__tile_plan_passes_pay(out, single)) {
    *npass = 2;
    return SPLAT_OK;
  }
  splat__tile_plan_passes_free(out, part);
  return st;
}
