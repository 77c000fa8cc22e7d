/* cuda_backend.c — the CUDA backend of splat's own kernels: device context, plan
 * creation (metadata upload, kernel specialisation, compile, module load, dynamic shared
 * memory attribute) and the four operations (argument packing, path choice, launches on
 * the caller's stream). Driver calls go through the runtime's splat__cuda_api table;
 * kernels come from splat__kernel_cache_get (memory cache, disk cache or NVRTC). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../kernels/params.cuh"
#include "analysis/report.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#include "core/parallel.h"
#include "core/timer.h"
#include "cuda/attn_passes.h"
#include "cuda/backend.h"
#include "cuda/driver.h"
#include "cuda/kcompile.h"
#include "cuda/kernel_cache.h"
#include "cuda/kgen.h"
#include "cuda/tile_rows.h"
#include "cuda/tile_split.h"
#include "cuda/tile_tail.h"
#include "cuda/tma_views.h"
#include "cuda/workspace.h"
#include "cuda/ws_tables.h"

/* The driver table (loaded by the context) and the check of one driver call. */
static const splat__cuda_api_table *drv;

#define CU(call, what)                                  \
  do {                                                  \
    splat_status st_ = splat__cuda_check((call), what); \
    if (st_ != SPLAT_OK) return st_;                    \
  } while (0)

/* ------------------------------------------------------------ context */

struct splat__cuda_context {
  splat__cuda_device dev; /* primary context retained */
  CUmemoryPool pool;      /* the attention calls' workspaces (NULL: the device has no pools) */
};

static splat_status push(const splat__cuda_context *c) {
  return splat__cuda_push(&c->dev);
}
static void pop(void) {
  splat__cuda_pop();
}

splat_status splat__cuda_context_open(int device, splat__cuda_context **out) {
  *out = NULL;
  splat_status st = splat__cuda_api(&drv);
  if (st != SPLAT_OK) return st;
  splat__cuda_context *c = calloc(1, sizeof *c);
  if (!c) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_context_create: out of memory");
  st = splat__cuda_device_open(device, &c->dev);
  if (st != SPLAT_OK) {
    free(c);
    return st;
  }
  if (c->dev.cc_major < 8) {
    const int ma = c->dev.cc_major, mi = c->dev.cc_minor;
    splat__cuda_device_close(&c->dev);
    free(c);
    return splat__fail(SPLAT_ERR_UNSUPPORTED,
                       "device %d has compute capability %d.%d; splat's CUDA kernels need 8.0 "
                       "or newer (cp.async, bf16 tensor cores)",
                       device, ma, mi);
  }
  st = push(c);
  if (st == SPLAT_OK) {
    st = splat__workspace_pool_create(drv, &c->dev, &c->pool);
    pop();
  }
  if (st != SPLAT_OK) {
    splat__cuda_device_close(&c->dev);
    free(c);
    return st;
  }
  *out = c;
  return SPLAT_OK;
}

void splat__cuda_context_close(splat__cuda_context *c) {
  if (!c) return;
  splat__workspace_pool_destroy(drv, c->pool);
  splat__cuda_device_close(&c->dev);
  free(c);
}

/* ------------------------------------------------------------ plan */

struct splat__cuda_plan {
  splat__cuda_context *cu;
  CUdeviceptr meta;     /* one allocation for all metadata */
  int64_t device_bytes; /* meta's bytes (splat_report.device_bytes) */
  splat_dev_pattern pat;
  int64_t ntiles, regular_rows;
  /* The fused attention's tiles: pat's, or with SPLAT_ATTN_SPLIT the split ones (slots,
   * merge list) and the bytes of their workspace `part` (nslots x batch*heads x tile_q x
   * (D + 2) fp32), which each call takes from the context's pool (workspace.h). */
  splat_dev_pattern attn_pat;
  int64_t attn_ntiles, nmerge;
  /* The R-SDDMM tile kernel's tiles: pat's with the long ones split into chunks (each
   * chunk's scores are final; tile_split.h splat__sddmm_split_ktiles). */
  splat_dev_pattern sddmm_pat;
  int64_t sddmm_ntiles;
  size_t part_bytes;
  /* Two-pass fused attention (attn_passes.h): each pass's pattern (segments, perm, tiles, runs) and
   * tiles, and the bytes of the per-row workspace `rowpart`, which each call takes from the
   * context's pool; npass 0 for a single pass. */
  int npass;
  splat_dev_pattern pass_pat[2];
  int64_t pass_ntiles[2];
  int pass_tile_q[2]; /* each pass's query tile (pass 1 may take 192 rows: attn_passes.h) */
  size_t rowpart_bytes;
  CUfunction merge;       /* the merge kernel of split tiles (attention module) */
  splat__tma_views views; /* the key groups the sm_90a attention kernel loads by TMA */
  int persistent;         /* the warp-specialised kernel's grid: persistent (1) or per item */
  splat__kspec spec[SPLAT__KOP_COUNT];
  CUmodule mod[SPLAT__KOP_COUNT][SPLAT__KPROG_KINDS]; /* the op's programs (SPLAT__KPROG_*) */
  CUfunction rows[SPLAT__KOP_COUNT];
  CUfunction tile[SPLAT__KOP_COUNT]; /* NULL when the op has no usable tile kernel */
  int tile_smem[SPLAT__KOP_COUNT];
  /* Two-pass plans: the second pass's attention tile kernel, its spec (spec[ATTENTION] is
   * the first's: each specialised for its pass's rows) and its dynamic shared memory. */
  CUfunction attn_pass2;
  splat__kspec attn_pass2_spec;
  int attn_pass2_smem;
};

/* The metadata's sections, each at a 256-byte offset of one device allocation and copied
 * there straight from its host array: no staging buffer (staging 11 MiB, strided(64) |
 * window(64) at 65536 rows, took 7.3 ms of the plan's creation; bench/NOTES.md v64). */
#define META_SECTIONS 26
typedef struct meta_sections {
  const void *src[META_SECTIONS];
  size_t bytes[META_SECTIONS], off[META_SECTIONS];
  int count;
  size_t size;
} meta_sections;

/* Appends a section of n bytes from data; returns its offset. */
static int64_t section_add(meta_sections *s, const void *data, size_t n) {
  assert(s->count < META_SECTIONS);
  const size_t off = (s->size + 255) & ~(size_t)255;
  s->src[s->count] = data;
  s->bytes[s->count] = n;
  s->off[s->count++] = off;
  s->size = off + n;
  return (int64_t)off;
}

typedef struct tile_cost {
  int64_t cost, index, row; /* row: the tile's first original row, or 0 */
} tile_cost;

/* Descending cost, then ascending first row, then ascending index (a total order:
 * qsort's result is unique). */
static int cmp_tile_cost(const void *a, const void *b) {
  const tile_cost *x = a, *y = b;
  if (x->cost != y->cost) return x->cost > y->cost ? -1 : 1;
  if (x->row != y->row) return x->row < y->row ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* The bytes of split tiles' workspace (part_bytes: nslots x batch*heads x tile_q rows x
 * (head_dim + 2) fp32), which each call takes from the context's pool. */
static splat_status part_workspace(splat__cuda_plan *p, const splat_plan *plan, int64_t nslots) {
  const splat_plan_desc *d = &plan->desc;
  const double bytes =
      (double)nslots * (double)(d->batch * d->heads) * plan->tiles.tile_q * (d->head_dim + 2) * 4.0;
  if (bytes > (double)(1ull << 32)) {
    return splat__fail(SPLAT_ERR_UNSUPPORTED,
                       "splat_plan_create: the workspace of %lld split attention tiles would take "
                       "%.1f GiB; raise SPLAT_ATTN_SPLIT (key tiles per chunk) or set it to 0",
                       (long long)nslots, bytes / (double)(1ull << 30));
  }
  p->part_bytes = (size_t)bytes;
  return SPLAT_OK;
}

/* A tile plan as the kernels read it, into tiles [t->ntiles] and runs [t->nruns]: tiles
 * heaviest first (rows x key tiles: the tile kernels read their block ids tile-major,
 * kernels/pipeline.cuh splat_tile_block, so the long tiles start first instead of forming
 * the tail of the grid), ties by their first original row where `by_row`, else in plan
 * order, runs as planned, no TMA view yet. By row: a plan with regrouped rows lists each
 * stride class's tiles apart; side by side, tiles whose rows interleave in memory run
 * together (the R-SDDMM at dilated(256,2), 16384, head_dim 64: 0.368 ms instead of 0.410;
 * the strided pass of strided(64) | window(64)'s fused attention at 16384 was 3% slower,
 * so the passes keep plan order; bench/NOTES.md v14). */
static splat_status dev_plan(const splat__tile_plan *t, splat_dev_tile *tiles, splat_dev_run *runs,
                             int by_row) {
  tile_cost *order = malloc((size_t)(t->ntiles ? t->ntiles : 1) * sizeof *order);
  if (!order) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_plan_create: out of memory");
  for (int64_t i = 0; i < t->ntiles; i++) {
    int64_t ktiles = 0;
    for (int64_t r = 0; r < t->tiles[i].nruns; r++)
      ktiles += t->runs[t->tiles[i].run_begin + r].ntiles;
    order[i].cost = ktiles * t->tiles[i].nrows;
    order[i].index = i;
    order[i].row = by_row && t->perm && t->tiles[i].nrows > 0 ? t->perm[t->tiles[i].row_begin] : 0;
  }
  if (t->ntiles > 1) qsort(order, (size_t)t->ntiles, sizeof *order, cmp_tile_cost);
  for (int64_t i = 0; i < t->ntiles; i++) {
    const splat__query_tile *q = &t->tiles[order[i].index];
    tiles[i].row_begin = (int32_t)q->row_begin;
    tiles[i].nrows = q->nrows;
    tiles[i].run_begin = (int32_t)q->run_begin;
    tiles[i].nruns = q->nruns;
  }
  free(order);
  for (int64_t i = 0; i < t->nruns; i++) {
    const splat__key_run *r = &t->runs[i];
    /* The tile kernels' pipelines (and the interval-table buffers of attention_ws.cuh)
     * count on every run having at least one key tile. */
    if (r->ntiles < 1) {
      return splat__fail(SPLAT_ERR_INTERNAL, "splat_plan_create: key run %lld has %d key tiles",
                         (long long)i, (int)r->ntiles);
    }
    splat_dev_run d = {
        r->group.phase, r->group.stride, r->group.width, r->base, r->ntiles, r->predicate, -1, -1};
    runs[i] = d;
  }
  return SPLAT_OK;
}

/* Whether a plan's attention runs a warp-specialised tile kernel (in either pass of two):
 * the one that loads keys through TMA views. */
static int attn_ws(const splat__cuda_plan *p) {
  return p->spec[SPLAT__KOP_ATTENTION].wgmma == SPLAT__WGMMA_WS ||
         p->attn_pass2_spec.wgmma == SPLAT__WGMMA_WS;
}

static int plan_fits_int32(const splat__tile_plan *t) {
  return t->nruns <= INT32_MAX && t->ntiles <= INT32_MAX;
}

/* How the fused attention's tile kernel runs a plan, decided before its kernels are
 * specialised (each carries the one epilogue the layout needs, kgen.h
 * splat__kspec_attn_epilogues): its two passes where they compute less
 * (attn_passes.h; npass 0: one), and SPLAT_ATTN_SPLIT's key tiles per chunk (0: no split). */
typedef struct attn_layout {
  splat__tile_plan pass[2];
  splat__acsr part[2]; /* each pass's own ACSR (its predicates' segments) */
  splat__attn_pass_shape shape[2];
  splat__kspec spec[2]; /* each pass's attention tile kernel (splat__attn_pass_specs) */
  int npass;
  int max_ktiles;
} attn_layout;

static void attn_layout_free(attn_layout *l) {
  splat__tile_plan_passes_free(l->pass, l->part);
}

/* The layout of a plan whose ops include the attention and whose spec has a tile kernel
 * (else one pass, no split). */
static splat_status attn_layout_plan(const splat__cuda_plan *p, const splat_plan *plan,
                                     splat__attn_passes_ahead *ahead, attn_layout *l) {
  memset(l, 0, sizeof *l);
  int max_ktiles = 0;
  splat_status st = splat__attn_split_env(&max_ktiles); /* bad values fail any CUDA plan */
  if (st != SPLAT_OK || !(plan->desc.ops & SPLAT_OPS_ATTENTION) ||
      !p->spec[SPLAT__KOP_ATTENTION].tile)
    return st;
  /* Both layouts that need a workspace take it from the context's pool, per call. */
  if (!p->cu->pool) {
    if (max_ktiles > 0) {
      return splat__fail(SPLAT_ERR_UNSUPPORTED,
                         "splat_plan_create: SPLAT_ATTN_SPLIT's split tiles need a workspace from "
                         "a memory pool, which device %d does not serve; unset SPLAT_ATTN_SPLIT",
                         p->cu->dev.ordinal);
    }
    return SPLAT_OK; /* one pass (workspace.c said so when the context was created) */
  }
  const double t0 = splat__now_ms();
  st = splat__attn_passes_plan(&plan->acsr, &plan->tiles, plan->desc.batch, plan->desc.heads,
                               plan->desc.head_dim, plan->desc.dtype, ahead, l->pass, l->part,
                               l->shape, &l->npass);
  const int taken = ahead && ahead->taken; /* then its trials are the passes' */
  const double t1 = splat__now_ms();
  /* Each pass on 192-row tiles where the rule takes them (query tiles left to splat). */
  int take[2];
  if (st == SPLAT_OK && l->npass && plan->tile_q_left)
    st = splat__attn_pass_rows(l->part, l->pass, l->shape, &plan->report, plan->seq_k, &plan->desc,
                               p->cu->dev.arch, p->cu->dev.sm_count,
                               p->cu->dev.max_smem_per_block_optin, taken ? &ahead->trials : NULL,
                               take);
  const double t2 = splat__now_ms();
  int kernels = 1; /* each pass's tile kernel, for its rows; without either, one pass */
  if (st == SPLAT_OK && l->npass) {
    st = splat__attn_pass_specs(l->spec, l->shape, &plan->report, plan->desc.dtype,
                                (int)plan->desc.head_dim, p->cu->dev.max_smem_per_block_optin,
                                p->cu->dev.arch, &kernels);
    splat__log(SPLAT__LOG_DEBUG,
               "plan: the passes' ACSRs and tile plans %.2f ms%s, their 192-row trials %.2f, "
               "their kernels' specs %.2f",
               t1 - t0, taken ? " (built beside the single plan)" : "", t2 - t1,
               splat__now_ms() - t2);
  }
  if (st == SPLAT_OK && l->npass &&
      (!plan_fits_int32(&l->pass[0]) || !plan_fits_int32(&l->pass[1]) || !kernels)) {
    attn_layout_free(l);
    l->npass = 0;
  }
  if (st == SPLAT_OK && !l->npass) l->max_ktiles = max_ktiles;
  return st;
}

/* The passes' interval tables (ws_tables.h), one job each (core/parallel.h): pass k's into
 * tabs[1 + k] where its kernel is the warp-specialised one. */
typedef struct pass_tables_jobs {
  const attn_layout *al;
  splat_dev_tile *const *tiles;
  splat_dev_run *const *runs;
  splat__ws_tables *tabs;
} pass_tables_jobs;

static splat_status pass_tables(void *arg, int k) {
  const pass_tables_jobs *j = arg;
  const splat__kspec *s = &j->al->spec[k];
  if (s->wgmma != SPLAT__WGMMA_WS) return SPLAT_OK;
  const splat__tile_plan *t = &j->al->pass[k];
  return splat__ws_tables_build(&j->al->part[k], t->perm, j->tiles[k], t->ntiles, j->runs[k],
                                16 * s->warps, s->max_segs, s->kt, &j->tabs[1 + k]);
}

/* Whether the plan runs op's tile kernel (build_kernels loads it: the op is among the plan's
 * and its spec has one), known before the kernel is loaded. */
static int has_tile_kernel(const splat__cuda_plan *p, const splat_plan *plan, int op) {
  return (plan->desc.ops & (1u << op)) && p->spec[op].tile;
}

static splat_status upload(splat__cuda_plan *p, const splat_plan *plan, const attn_layout *al) {
  const double t_begin = splat__now_ms();
  const splat__acsr *a = &plan->acsr;
  const splat__tile_plan *t = &plan->tiles;
  if (!plan_fits_int32(t) || a->seq_q >= INT32_MAX) {
    return splat__fail(SPLAT_ERR_UNSUPPORTED,
                       "splat_plan_create: %lld key runs / %lld query tiles exceed the CUDA "
                       "backend's int32 plan indices",
                       (long long)t->nruns, (long long)t->ntiles);
  }
  const splat__tile_plan *pass = al->pass;
  const int npass = al->npass;
  splat_status st = SPLAT_OK;
  const int64_t pt0 = npass ? pass[0].ntiles : 0, pt1 = npass ? pass[1].ntiles : 0;
  const int64_t pr0 = npass ? pass[0].nruns : 0, pr1 = npass ? pass[1].nruns : 0;
  splat_dev_tile *tiles = malloc((size_t)(t->ntiles + pt0 + pt1 + 1) * sizeof *tiles);
  splat_dev_run *runs = malloc((size_t)(t->nruns + pr0 + pr1 + 1) * sizeof *runs);
  /* The passes' tiles and runs follow the single plan's in the same arrays. */
  splat_dev_tile *ptiles[2] = {tiles ? tiles + t->ntiles : NULL,
                               tiles ? tiles + t->ntiles + pt0 : NULL};
  splat_dev_run *pruns[2] = {runs ? runs + t->nruns : NULL, runs ? runs + t->nruns + pr0 : NULL};
  meta_sections s;
  memset(&s, 0, sizeof s);
  if (st == SPLAT_OK && (!tiles || !runs))
    st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_plan_create: out of memory");
  if (st == SPLAT_OK) st = dev_plan(t, tiles, runs, 1);
  for (int k = 0; k < npass && st == SPLAT_OK; k++) st = dev_plan(&pass[k], ptiles[k], pruns[k], 0);
  /* TMA views of the key groups, for the warp-specialised attention kernel: over the
   * runs the attention tiles use (the passes' when two, of the passes that kernel runs: a
   * pass on the mma.sync kernel reads none, though today both passes of a 16-bit plan take
   * the warp-specialised kernel or neither; split runs keep them). The passes' runs are
   * consecutive: pass 1's, then pass 2's. */
  int tma = 0;
  if (st == SPLAT_OK) st = splat__tma_env(&tma);
  if (st == SPLAT_OK) st = splat__kspec_env_persistent(&p->persistent);
  if (st == SPLAT_OK && tma && attn_ws(p) && has_tile_kernel(p, plan, SPLAT__KOP_ATTENTION)) {
    if (npass) {
      const int64_t pr[2] = {pr0, pr1};
      const int ws[2] = {al->spec[0].wgmma == SPLAT__WGMMA_WS,
                         al->spec[1].wgmma == SPLAT__WGMMA_WS};
      splat__tma_views_assign_passes(pruns[0], pr, ws, plan->seq_k, &p->views);
    } else {
      splat__tma_views_assign(runs, t->nruns, plan->seq_k, &p->views);
    }
  }
  /* A kernel without the gather only where every run of its pattern has a view
   * (splat__tma_serves_plan; pass 1's runs take the first views). */
  for (int k = 0; k < (npass ? npass : 1) && st == SPLAT_OK; k++) {
    const int gather = npass ? al->spec[k].gather : p->spec[SPLAT__KOP_ATTENTION].gather;
    const splat_dev_run *r = npass ? pruns[k] : runs;
    const int64_t nr = npass ? pass[k].nruns : t->nruns;
    for (int64_t i = 0; st == SPLAT_OK && !gather && i < nr; i++) {
      if (r[i].view < 0)
        st = splat__fail(SPLAT_ERR_INTERNAL,
                         "splat_plan_create: key run %lld%s has no TMA view, and the attention "
                         "kernel has no gather",
                         (long long)i, npass ? (k ? " of pass 2" : " of pass 1") : "");
    }
  }
  /* The warp-specialised attention kernel's interval tables, for the pattern each of its
   * kernels runs (the single plan's, or each pass's that runs on it), before the split
   * below copies the runs (a chunk keeps its run's table: the same rows). */
  splat__ws_tables tabs[3];
  memset(tabs, 0, sizeof tabs);
  const double t_tables = splat__now_ms();
  if (st == SPLAT_OK && has_tile_kernel(p, plan, SPLAT__KOP_ATTENTION)) {
    if (!npass && attn_ws(p)) {
      const splat__kspec *s = &p->spec[SPLAT__KOP_ATTENTION];
      st = splat__ws_tables_build(a, t->perm, tiles, t->ntiles, runs, 16 * s->warps, s->max_segs,
                                  s->kt, &tabs[0]);
    }
    pass_tables_jobs j = {al, ptiles, pruns, tabs};
    if (npass) st = splat__parallel_run(pass_tables, &j, npass);
  }
  /* The fused attention's tiles of a single pass, split where a tile has more than
   * SPLAT_ATTN_SPLIT key tiles (off by default; only for the attention tile kernel). */
  splat__tile_split split;
  memset(&split, 0, sizeof split);
  if (st == SPLAT_OK && al->max_ktiles > 0 && has_tile_kernel(p, plan, SPLAT__KOP_ATTENTION)) {
    st = splat__tile_split_build(tiles, t->ntiles, runs, t->tile_k, al->max_ktiles, &split);
    if (split.nmerge == 0) splat__tile_split_free(&split); /* nothing was split */
  }
  splat__tile_split sd; /* the R-SDDMM's */
  memset(&sd, 0, sizeof sd);
  if (st == SPLAT_OK && has_tile_kernel(p, plan, SPLAT__KOP_SDDMM)) {
    st = splat__tile_split_build(tiles, t->ntiles, runs, t->tile_k,
                                 splat__sddmm_split_ktiles(tiles, t->ntiles, runs), &sd);
    if (sd.nmerge == 0) splat__tile_split_free(&sd);
  }
  int64_t off[META_SECTIONS];
  const double t_copy = splat__now_ms();
  if (st == SPLAT_OK) {
    const int64_t nsegs = a->row_seg[a->seq_q];
    off[0] = section_add(&s, a->row_seg, (size_t)(a->seq_q + 1) * 8);
    off[1] = section_add(&s, a->segs, (size_t)nsegs * 16);
    off[2] = section_add(&s, a->rem_row, (size_t)(a->seq_q + 1) * 8);
    off[3] = section_add(&s, a->rem_cols, (size_t)a->rem_nnz * 4);
    off[4] = section_add(&s, t->perm, (size_t)a->seq_q * 4);
    off[5] = section_add(&s, tiles, (size_t)t->ntiles * sizeof *tiles);
    off[6] = section_add(&s, runs, (size_t)t->nruns * sizeof *runs);
    off[7] = section_add(&s, split.tiles, (size_t)split.ntiles * sizeof *split.tiles);
    off[8] = section_add(&s, split.runs, (size_t)split.nruns * sizeof *split.runs);
    off[9] = section_add(&s, split.slots, (size_t)split.ntiles * sizeof *split.slots);
    off[10] = section_add(&s, split.merge, (size_t)split.nmerge * 4 * sizeof *split.merge);
    for (int k = 0; k < 2; k++) {
      off[11 + 3 * k] = section_add(&s, pass[k].perm, npass ? (size_t)a->seq_q * 4 : 0);
      off[12 + 3 * k] = section_add(&s, ptiles[k], (size_t)pass[k].ntiles * sizeof *tiles);
      off[13 + 3 * k] = section_add(&s, pruns[k], (size_t)pass[k].nruns * sizeof *runs);
      const splat__acsr *pa = &al->part[k];
      off[17 + 2 * k] = section_add(&s, pa->row_seg, npass ? (size_t)(a->seq_q + 1) * 8 : 0);
      off[18 + 2 * k] =
          section_add(&s, pa->segs, npass ? (size_t)pa->row_seg[a->seq_q] * sizeof *pa->segs : 0);
    }
    off[21] = section_add(&s, sd.tiles, (size_t)sd.ntiles * sizeof *sd.tiles);
    off[22] = section_add(&s, sd.runs, (size_t)sd.nruns * sizeof *sd.runs);
    for (int k = 0; k < 3; k++) off[23 + k] = section_add(&s, tabs[k].data, (size_t)tabs[k].bytes);
  }
  if (st == SPLAT_OK) {
    const size_t n = s.size ? s.size : 256;
    st = splat__cuda_check(drv->cuMemAlloc(&p->meta, n), "cuMemAlloc (the plan's metadata)");
    if (st == SPLAT_OK) p->device_bytes += (int64_t)n;
    /* The gaps between sections read as zeros, as a whole copy's would. */
    if (st == SPLAT_OK)
      st = splat__cuda_check(drv->cuMemsetD8Async(p->meta, 0, n, NULL),
                             "cuMemsetD8Async (the plan's metadata)");
    for (int i = 0; i < s.count && st == SPLAT_OK; i++) {
      if (s.bytes[i])
        st = splat__cuda_check(drv->cuMemcpyHtoD(p->meta + s.off[i], s.src[i], s.bytes[i]),
                               "cuMemcpyHtoD (the plan's metadata)");
    }
    /* A copy from pageable memory may return before its DMA lands, and the plan's calls
     * may run on any stream: the metadata is on the device before the plan is returned. */
    if (st == SPLAT_OK)
      st = splat__cuda_check(drv->cuStreamSynchronize(NULL),
                             "cuStreamSynchronize (the plan's metadata)");
  }
  if (st == SPLAT_OK) {
    const CUdeviceptr m = p->meta;
    p->pat.row_seg = (const int64_t *)(uintptr_t)(m + (CUdeviceptr)off[0]);
    p->pat.segs = (const int32_t *)(uintptr_t)(m + (CUdeviceptr)off[1]);
    p->pat.rem_row = (const int64_t *)(uintptr_t)(m + (CUdeviceptr)off[2]);
    p->pat.rem_cols = (const int32_t *)(uintptr_t)(m + (CUdeviceptr)off[3]);
    p->pat.perm = (const int32_t *)(uintptr_t)(m + (CUdeviceptr)off[4]);
    p->pat.tiles = (const splat_dev_tile *)(uintptr_t)(m + (CUdeviceptr)off[5]);
    p->pat.runs = (const splat_dev_run *)(uintptr_t)(m + (CUdeviceptr)off[6]);
    p->pat.seq_q = a->seq_q;
    p->pat.seq_k = a->seq_k;
    p->pat.tables =
        tabs[0].count ? (const unsigned char *)(uintptr_t)(m + (CUdeviceptr)off[23]) : NULL;
    splat__tma_q_view(t, a->seq_q, &p->pat);
    p->ntiles = t->ntiles;
    p->regular_rows = t->regular_rows;
    p->attn_pat = p->pat;
    p->attn_ntiles = t->ntiles;
    p->sddmm_pat = p->pat;
    p->sddmm_ntiles = t->ntiles;
    if (sd.nmerge > 0) {
      p->sddmm_pat.tiles = (const splat_dev_tile *)(uintptr_t)(m + (CUdeviceptr)off[21]);
      p->sddmm_pat.runs = (const splat_dev_run *)(uintptr_t)(m + (CUdeviceptr)off[22]);
      p->sddmm_ntiles = sd.ntiles;
    }
    if (split.nmerge > 0) {
      p->attn_pat.tiles = (const splat_dev_tile *)(uintptr_t)(m + (CUdeviceptr)off[7]);
      p->attn_pat.runs = (const splat_dev_run *)(uintptr_t)(m + (CUdeviceptr)off[8]);
      p->attn_pat.slots = (const int32_t *)(uintptr_t)(m + (CUdeviceptr)off[9]);
      p->attn_pat.merge = (const int32_t *)(uintptr_t)(m + (CUdeviceptr)off[10]);
      p->attn_ntiles = split.ntiles;
      p->nmerge = split.nmerge;
      st = part_workspace(p, plan, split.nslots);
    }
    for (int k = 0; k < npass; k++) {
      p->pass_pat[k] = p->pat;
      p->pass_pat[k].perm = (const int32_t *)(uintptr_t)(m + (CUdeviceptr)off[11 + 3 * k]);
      p->pass_pat[k].tiles = (const splat_dev_tile *)(uintptr_t)(m + (CUdeviceptr)off[12 + 3 * k]);
      p->pass_pat[k].runs = (const splat_dev_run *)(uintptr_t)(m + (CUdeviceptr)off[13 + 3 * k]);
      p->pass_pat[k].row_seg = (const int64_t *)(uintptr_t)(m + (CUdeviceptr)off[17 + 2 * k]);
      p->pass_pat[k].segs = (const int32_t *)(uintptr_t)(m + (CUdeviceptr)off[18 + 2 * k]);
      p->pass_pat[k].tables = tabs[1 + k].count
                                  ? (const unsigned char *)(uintptr_t)(m + (CUdeviceptr)off[24 + k])
                                  : NULL;
      splat__tma_q_view(&pass[k], a->seq_q, &p->pass_pat[k]);
      p->pass_ntiles[k] = pass[k].ntiles;
      p->pass_tile_q[k] = pass[k].tile_q;
    }
    if (st == SPLAT_OK && npass) {
      p->npass = npass;
      p->rowpart_bytes = (size_t)splat__attn_passes_bytes(
          plan->desc.batch, plan->desc.heads, a->seq_q, plan->desc.head_dim, plan->desc.dtype);
    }
  }
  if (st == SPLAT_OK)
    splat__log(SPLAT__LOG_DEBUG,
               "plan upload: tiles, runs and views %.2f ms, interval tables and splits %.2f, "
               "metadata copied %.2f",
               t_tables - t_begin, t_copy - t_tables, splat__now_ms() - t_copy);
  splat__tile_split_free(&split);
  splat__tile_split_free(&sd);
  for (int k = 0; k < 3; k++) splat__ws_tables_free(&tabs[k]);
  free(tiles);
  free(runs);
  return st;
}

/* Loads one program of op (prog: its spec, SPLAT__KPROG_*) from its CUBIN and finds the
 * kernel it holds; logs where the CUBIN came from and how long getting and loading took. */
static splat_status load_kernel(splat__cuda_plan *p, int op, const splat__kspec *prog,
                                const splat__kcompiled *k) {
  char kernel[160];
  splat__kspec_kernel(prog, kernel, sizeof kernel);
  const double t0 = splat__now_ms();
  const int g = prog->program;
  CUmodule *mod = &p->mod[op][g];
  CUfunction *f = g == SPLAT__KPROG_ROWS    ? &p->rows[op]
                  : g == SPLAT__KPROG_MERGE ? &p->merge
                  : g == SPLAT__KPROG_TILE  ? &p->tile[op]
                                            : &p->attn_pass2;
  splat_status st = splat__cuda_check(drv->cuModuleLoadData(mod, k->bin.cubin), "cuModuleLoadData");
  if (st == SPLAT_OK) {
    st = splat__cuda_check(drv->cuModuleGetFunction(f, *mod, kernel), "cuModuleGetFunction");
  }
  if (st == SPLAT_OK && (g == SPLAT__KPROG_TILE || g == SPLAT__KPROG_PASS2)) {
    int *smem = g == SPLAT__KPROG_TILE ? &p->tile_smem[op] : &p->attn_pass2_smem;
    *smem = splat__kspec_tile_smem(prog);
    st = splat__cuda_check(
        drv->cuFuncSetAttribute(*f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, *smem),
        "cuFuncSetAttribute (dynamic shared memory of the tile kernel)");
  }
  if (st != SPLAT_OK) return st;
  splat__log(SPLAT__LOG_INFO, "plan kernel %s for %s: %s, got in %.2f ms, loaded in %.2f ms",
             k->program, p->cu->dev.arch, splat__cache_hit_name(k->hit), k->ms,
             splat__now_ms() - t0);
  return SPLAT_OK;
}

/* Gets the programs of the plan's ops (splat_plan_desc.ops; specs set by the caller; an
 * op's row and tile kernels are separate programs) concurrently (splat__kspec_compile_all),
 * then loads them; fills the report's kernels_ms and kernels_compiled. */
static splat_status build_kernels(splat__cuda_plan *p, splat_plan *plan) {
  const splat_plan_desc *d = &plan->desc;
  splat_status st;
  const double t0 = splat__now_ms();
  /* The kernel ops are in the order of the SPLAT_OPS_* bits. */
  splat__kspec want[SPLAT__KPROG_MAX];
  int ops[SPLAT__KPROG_MAX], n = 0;
  for (int op = 0; op < SPLAT__KOP_COUNT; op++) {
    if (d->ops & (1u << op)) {
      if (n + SPLAT__KPROG_PER_OP > SPLAT__KPROG_MAX) {
        return splat__fail(SPLAT_ERR_INTERNAL, "plan kernels: more than %d programs",
                           SPLAT__KPROG_MAX);
      }
      const int m = splat__kspec_programs(&p->spec[op], &p->attn_pass2_spec, &want[n]);
      for (int i = 0; i < m; i++) ops[n++] = op;
    }
  }
  splat__kcompiled k[SPLAT__KPROG_MAX];
  st = splat__kspec_compile_all(want, n, p->cu->dev.arch, k);
  if (st != SPLAT_OK) return st;
  int ncompiled = 0;
  for (int i = 0; i < n; i++) {
    if (st == SPLAT_OK) st = load_kernel(p, ops[i], &want[i], &k[i]);
    ncompiled += k[i].hit == SPLAT__CACHE_COMPILED;
    splat__compiled_free(&k[i].bin);
  }
  if (st != SPLAT_OK) return st;
  plan->report.kernels_ms = splat__now_ms() - t0;
  plan->report.kernels_compiled = ncompiled;
  splat__log(SPLAT__LOG_INFO, "plan kernels: %d program(s), %d compiled, in %.2f ms", n, ncompiled,
             plan->report.kernels_ms);
  return SPLAT_OK;
}

void splat__cuda_plan_destroy(splat__cuda_plan *p) {
  if (!p) return;
  if (push(p->cu) == SPLAT_OK) {
    for (int op = 0; op < SPLAT__KOP_COUNT; op++) {
      for (int g = 0; g < SPLAT__KPROG_KINDS; g++) {
        if (p->mod[op][g]) drv->cuModuleUnload(p->mod[op][g]);
      }
    }
    if (p->meta) drv->cuMemFree(p->meta);
    if (p->rowpart_bytes || p->part_bytes) splat__workspace_pool_trim(drv, p->cu->pool);
    pop();
  }
  free(p);
}

int splat__cuda_plan_tries_rows192(const splat_plan *plan) {
  return splat__tile_rows_try(&plan->desc, plan->ctx->cuda->dev.arch);
}

/* The last round of the persistent grid's items in light ones (tile_tail.h): splits tiles of
 * the 192-row plan t192 of the three-warpgroup kernel `attn` as SPLAT_ATTN_TAIL or the rule
 * says, and rebuilds its report r192 where it did. */
static splat_status split_last_round(const splat_plan *plan, const splat__kspec *attn,
                                     splat__tile_plan *t192, splat_report *r192) {
  const splat__cuda_device *dev = &plan->ctx->cuda->dev;
  int64_t m = 0;
  const splat_status st = splat__tile_tail_apply(
      t192, plan->desc.batch * plan->desc.heads,
      (int64_t)dev->sm_count * splat__kspec_ws_ctas_per_sm(attn, dev->max_smem_per_sm), &m);
  if (st != SPLAT_OK || m <= 0) return st;
  splat__log(SPLAT__LOG_DEBUG, "plan: %lld query tiles split into 64-row ones (the last round)",
             (long long)m);
  return splat__report_build(&plan->acsr, t192, r192);
}

splat_status splat__cuda_plan_tile_rows(splat_plan *plan, splat__tile_plan *t192) {
  const splat__cuda_device *dev = &plan->ctx->cuda->dev;
  const double t0 = splat__now_ms();
  int take = 0;
  splat__tile_rows_choose_built(&plan->acsr, &plan->tiles, plan->seq_k, &plan->desc, dev->sm_count,
                                0, t192, &take);
  splat_report r192 = plan->report; /* the fields the report does not build: the analysis's */
  splat_status st = take ? splat__report_build(&plan->acsr, t192, &r192) : SPLAT_OK;
  /* Only where the kernel is the one the rule measured: three consumer warpgroups (not the
   * fallbacks of splat__kspec_plan over the device's shared memory). */
  splat__kspec specs[SPLAT__KOP_COUNT];
  if (st == SPLAT_OK && take)
    st = splat__kspec_for_plan(specs, &r192, plan->desc.dtype, (int)plan->desc.head_dim,
                               dev->max_smem_per_block_optin, dev->arch, 1);
  if (st == SPLAT_OK && take && specs[SPLAT__KOP_ATTENTION].warps == 12)
    st = split_last_round(plan, &specs[SPLAT__KOP_ATTENTION], t192, &r192);
  if (st == SPLAT_OK && take && specs[SPLAT__KOP_ATTENTION].warps == 12) {
    r192.plan_ms = plan->report.plan_ms + splat__now_ms() - t0;
    splat__tile_plan_free(&plan->tiles);
    plan->tiles = *t192;
    memset(t192, 0, sizeof *t192); /* the plan's now */
    plan->report = r192;
    plan->desc.tile_q = 192;
    return SPLAT_OK;
  }
  if (take) splat__tile_plan_free(t192);
  plan->report.plan_ms += splat__now_ms() - t0;
  return st;
}

/* A plan's kernels (build_kernels: their CUBINs got, mostly from a cache, and loaded) and
 * its metadata (upload: built on the host, then copied), one job each (core/parallel.h): the
 * two need only the specs. Each job makes the context current on its thread. */
typedef struct device_jobs {
  splat__cuda_plan *p;
  splat_plan *plan;
  const attn_layout *al;
} device_jobs;

static splat_status device_job(void *arg, int i) {
  const device_jobs *j = arg;
  splat_status st = push(j->p->cu);
  if (st != SPLAT_OK) return st;
  st = i ? upload(j->p, j->plan, j->al) : build_kernels(j->p, j->plan);
  pop();
  return st;
}

splat_status splat__cuda_plan_passes_ahead(const splat_plan *plan, splat__attn_passes_ahead *out) {
  memset(out, 0, sizeof *out);
  const splat__cuda_context *cu = plan->ctx->cuda;
  /* attn_layout_plan's conditions that need no kernel spec (those are weighed after) */
  if (!(plan->desc.ops & SPLAT_OPS_ATTENTION) || !cu->pool) return SPLAT_OK;
  return splat__attn_passes_ahead_build(&plan->acsr, &plan->desc, plan->tile_q_left, plan->seq_k,
                                        cu->dev.arch, cu->dev.sm_count, out);
}

splat_status splat__cuda_plan_create(splat_plan *plan, splat__attn_passes_ahead *ahead,
                                     splat__cuda_plan **out) {
  *out = NULL;
  splat__cuda_context *cu = plan->ctx->cuda;
  if (!cu) return splat__fail(SPLAT_ERR_INTERNAL, "splat_plan_create: context has no CUDA device");
  splat__cuda_plan *p = calloc(1, sizeof *p);
  if (!p) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_plan_create: out of memory");
  p->cu = cu;
  splat_status st = push(cu);
  if (st != SPLAT_OK) {
    free(p);
    return st;
  }
  /* The specs, then the attention's layout (which needs to know whether there is a tile
   * kernel, and decides its epilogues), then the kernels beside the metadata. */
  attn_layout al;
  memset(&al, 0, sizeof al);
  /* Whether TMA views serve every key sub-tile of the plan (192-row tiles take three
   * consumer warpgroups, whose producer has no gather, only then). */
  int tma = 0;
  st = splat__tma_env(&tma);
  const int tma_all = st == SPLAT_OK && tma && plan->tiles.tile_q == 192 &&
                      splat__tma_serves_plan(&plan->tiles, plan->seq_k);
  if (st == SPLAT_OK)
    st = splat__kspec_for_plan(p->spec, &plan->report, plan->desc.dtype, (int)plan->desc.head_dim,
                               cu->dev.max_smem_per_block_optin, cu->dev.arch, tma_all);
  const double t_layout = splat__now_ms();
  if (st == SPLAT_OK) st = attn_layout_plan(p, plan, ahead, &al);
  splat__log(SPLAT__LOG_DEBUG, "plan: the attention's layout (two passes, their tiles) %.2f ms",
             splat__now_ms() - t_layout);
  if (st == SPLAT_OK) {
    splat__kspec_attn_epilogues(p->spec, al.npass > 0, al.max_ktiles > 0);
    if (al.npass) { /* each pass's own tile kernel */
      p->spec[SPLAT__KOP_ATTENTION] = al.spec[0];
      p->attn_pass2_spec = al.spec[1];
    }
    device_jobs j = {p, plan, &al};
    st = splat__parallel_run(device_job, &j, 2);
  }
  if (st == SPLAT_OK) {
    plan->report.device_bytes = p->device_bytes;
    plan->report.workspace_bytes = (int64_t)(p->rowpart_bytes + p->part_bytes);
  }
  attn_layout_free(&al);
  pop();
  if (st != SPLAT_OK) {
    splat__cuda_plan_destroy(p);
    return st;
  }
  *out = p;
  return SPLAT_OK;
}

/* ------------------------------------------------------------ operations */

/* t's stride of batch or head dimension d, 0 where the dimension has extent 1 (indexed at
 * 0 only, its stride unused and unchecked: splat__check_tensor). */
static int64_t used_stride(const splat_tensor *t, int d) {
  return t->shape[d] == 1 ? 0 : t->strides[d];
}

static splat_dev_tensor dev_tensor(const splat_tensor *t) {
  splat_dev_tensor d;
  d.data = t ? t->data : NULL;
  d.s0 = t ? used_stride(t, 0) : 0;
  d.s1 = t ? used_stride(t, 1) : 0;
  d.s2 = t ? t->strides[2] : 0;
  d.s3 = t ? t->strides[3] : 0;
  return d;
}

static splat_dev_shape dev_shape(const splat_plan *plan, int64_t row_begin, int64_t row_count) {
  splat_dev_shape s;
  s.batch = plan->desc.batch;
  s.heads = plan->desc.heads;
  s.heads_per_kv = (int32_t)(plan->desc.heads / plan->desc.heads_kv);
  s.head_dim = (int32_t)plan->desc.head_dim;
  s.row_begin = (int32_t)row_begin;
  s.row_count = (int32_t)row_count;
  return s;
}

/* 1 when the tile kernels' cp.async gather can read a [B,H,S,D] tensor: last dim
 * contiguous, base and the other strides 16-byte aligned (8 elements of 16 bits, 4 floats). */
static int tile_layout_ok(const splat_tensor *t) {
  const int64_t e = t->dtype == SPLAT_F32 ? 4 : 8; /* elements in 16 bytes */
  return t->strides[3] == 1 && ((uintptr_t)t->data % 16) == 0 && used_stride(t, 0) % e == 0 &&
         used_stride(t, 1) % e == 0 && t->strides[2] % e == 0;
}

/* 1 when every row of a [B,H,S,D] 16-bit output can take 16-byte stores: last dim
 * contiguous, base and the other strides 16-byte aligned: the only outputs the
 * warp-specialised attention kernels write (kernels/attention_ws.cuh splat_ws_store_staged). */
static int out_vec_ok(const splat_tensor *t) {
  return t->strides[3] == 1 && ((uintptr_t)t->data % 16) == 0 &&
         (used_stride(t, 0) | used_stride(t, 1) | t->strides[2]) % 8 == 0;
}

static unsigned grid_y(const splat_plan *plan) {
  const int64_t bh = plan->desc.batch * plan->desc.heads;
  return (unsigned)(bh < 65535 ? bh : 65535);
}

static splat_status launch(CUfunction f, unsigned gx, unsigned gy, unsigned threads, unsigned smem,
                           splat_stream stream, void *params) {
  if (gx == 0) return SPLAT_OK;
  void *args[1] = {params};
  CU(drv->cuLaunchKernel(f, gx, gy, 1, threads, 1, 1, smem, (CUstream)stream, args, NULL),
     "cuLaunchKernel");
  return SPLAT_OK;
}

/* Tile kernel f of spec `spec` (smem bytes of dynamic shared memory): grid (query tiles,
 * batch x heads, row blocks), where a CTA of 16 x warps rows takes one row block of a
 * query tile (tile_q / (16 x warps) blocks). `dependent`: pass 2 of a two-pass attention
 * on the warp-specialised kernel, launched (where splat__cuda_pdl_allowed) as a
 * programmatic dependent of pass 1, so it starts while pass 1 ends where pass 1 is on that
 * kernel too (attention_ws.cuh; a pass 1 on the mma.sync kernel would not signal its
 * dependents: pass 2 then starts as its grid ends). */
static splat_status launch_tile(const splat_plan *plan, const splat__kspec *spec, CUfunction f,
                                int smem, int64_t ntiles, int tile_q, splat_stream stream,
                                void *params, int dependent) {
  const splat__cuda_plan *p = plan->cuda;
  if (ntiles == 0) return SPLAT_OK;
  const int tq = 16 * spec->warps;
  const unsigned gz = (unsigned)((tile_q + tq - 1) / tq);
  void *args[1] = {params};
  if (spec->wgmma == SPLAT__WGMMA_WS) {
    /* Work items (tile, row block, batch*head) walked by a 1-d grid: SMs x CTAs per SM of
     * them (persistent), or one CTA per item. */
    splat_attention_params *prm = params;
    prm->work = ntiles * (int64_t)gz * plan->desc.batch * plan->desc.heads;
    if (prm->work > (int64_t)UINT32_MAX) {
      /* The kernel decodes items in 32 bits (kernels/attention_ws.cuh splat_ws_item_of). */
      return splat__fail(SPLAT_ERR_UNSUPPORTED,
                         "splat_attention: %lld work items (query tiles x row blocks x batch x "
                         "heads) exceed the warp-specialised kernel's 2^32; set SPLAT_ATTN_WS=0 "
                         "or split the batch",
                         (long long)prm->work);
    }
    int64_t ctas = p->persistent ? (int64_t)p->cu->dev.sm_count *
                                       splat__kspec_ws_ctas_per_sm(spec, p->cu->dev.max_smem_per_sm)
                                 : prm->work;
    if (ctas > prm->work) ctas = prm->work;
    if (ctas > INT32_MAX) ctas = INT32_MAX;
    const unsigned threads = (unsigned)splat__kspec_tile_threads(spec);
    if (dependent && splat__cuda_pdl_allowed(drv, (CUstream)stream)) {
      splat__cu_launch_attr attr;
      memset(&attr, 0, sizeof attr);
      attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      attr.value.programmatic_stream_serialization_allowed = 1;
      const splat__cu_launch_config cfg = {
          (unsigned)ctas, 1, 1, threads, 1, 1, (unsigned)smem, (CUstream)stream, &attr, 1};
      /* Where the driver refuses the attribute anyway, the plain launch below. */
      if (drv->cuLaunchKernelEx(&cfg, f, args, NULL) == CUDA_SUCCESS) return SPLAT_OK;
    }
    CU(drv->cuLaunchKernel(f, (unsigned)ctas, 1, 1, threads, 1, 1, (unsigned)smem, (CUstream)stream,
                           args, NULL),
       "cuLaunchKernel");
    return SPLAT_OK;
  }
  CU(drv->cuLaunchKernel(f, (unsigned)ntiles, grid_y(plan), gz,
                         (unsigned)splat__kspec_tile_threads(spec), 1, 1, (unsigned)smem,
                         (CUstream)stream, args, NULL),
     "cuLaunchKernel");
  return SPLAT_OK;
}

/* Bytes of the longest row the softmax keeps in registers (kernels/softmax.cuh: 32 lanes x
 * SPLAT_SM_RC (kernels/params.cuh) chunks of 16 bytes, less two chunks for an unaligned start
 * and end). */
#define SOFTMAX_REG_ROW_BYTES (32 * SPLAT_SM_RC * 16 - 32)

/* Row kernel of op over permuted positions [begin, begin + count). `params` starts with
 * the shape at offset shape_off, which this sets. */
static splat_status launch_rows(const splat_plan *plan, splat__kop op, int64_t begin, int64_t count,
                                splat_dev_shape *shape, void *params, splat_stream stream) {
  const splat__cuda_plan *p = plan->cuda;
  if (count <= 0) return SPLAT_OK;
  *shape = dev_shape(plan, begin, count);
  const int rw = p->spec[op].row_warps;
  unsigned gy = grid_y(plan);
  if (op == SPLAT__KOP_SOFTMAX &&
      plan->acsr.width * splat__dtype_size(plan->desc.dtype) <= SOFTMAX_REG_ROW_BYTES) {
    /* Rows on the softmax's register path: its warps loop over (b, h) for their row (the
     * row's segments read once), with enough blocks along y for ~4 waves of 32 resident
     * warps an SM. Longer rows stream and keep one (b, h) a warp (no long serial tail). */
    const int64_t want = ((int64_t)4 * 32 * p->cu->dev.sm_count + count - 1) / count;
    if (want < (int64_t)gy) gy = (unsigned)(want > 0 ? want : 1);
  }
  return launch(p->rows[op], (unsigned)((count + rw - 1) / rw), gy, (unsigned)(32 * rw), 0, stream,
                params);
}

/* The attention call's workspaces (two passes' rows, split tiles' chunks) from the
 * context's pool on its stream, into the kernels' parameters (workspace.h); give_back()
 * returns them on the stream once the call's kernels are enqueued (or failed to be). */
static splat_status workspaces_take(const splat__cuda_plan *p, splat_attention_params *prm,
                                    splat_stream stream) {
  CUdeviceptr rowpart = 0, part = 0;
  splat_status st = SPLAT_OK;
  if (p->rowpart_bytes)
    st = splat__workspace_take(drv, p->cu->pool, p->rowpart_bytes,
                               "a plan created with SPLAT_ATTN_PASSES=0 runs one pass without it",
                               (CUstream)stream, &rowpart);
  if (st == SPLAT_OK && p->part_bytes)
    st = splat__workspace_take(drv, p->cu->pool, p->part_bytes,
                               "a plan created without SPLAT_ATTN_SPLIT has no split tiles",
                               (CUstream)stream, &part);
  prm->rowpart = (unsigned char *)(uintptr_t)rowpart;
  prm->part = (float *)(uintptr_t)part;
  return st;
}
static splat_status workspaces_give_back(const splat_attention_params *prm, splat_stream stream,
                                         splat_status st) {
  const splat_status s1 =
      splat__workspace_give(drv, (CUdeviceptr)(uintptr_t)prm->rowpart, (CUstream)stream);
  const splat_status s2 =
      splat__workspace_give(drv, (CUdeviceptr)(uintptr_t)prm->part, (CUstream)stream);
  return st != SPLAT_OK ? st : s1 != SPLAT_OK ? s1 : s2;
}

/* Launches op on the caller's stream with its context current: the tile kernel over the
 * query tiles, then the row kernel over the irregular remainder, when the op has a tile
 * kernel and `tile_ok` (the operands' layout suits it); else the row kernel over every
 * row. `shape` points at the shape inside `params`. */
static splat_status launch_op(const splat_plan *plan, splat__kop op, int tile_ok,
                              splat_dev_shape *shape, void *params, splat_stream stream) {
  const splat__cuda_plan *p = plan->cuda;
  splat_status st = push(p->cu);
  if (st != SPLAT_OK) return st;
  /* Only the attention's tile path works in a workspace. */
  splat_attention_params *const ws =
      op == SPLAT__KOP_ATTENTION && p->tile[op] && tile_ok ? params : NULL;
  if (ws) st = workspaces_take(p, ws, stream);
  if (st != SPLAT_OK) {
    if (ws) workspaces_give_back(ws, stream, st); /* what was taken */
    pop();
    return st;
  }
  if (p->tile[op] && tile_ok) {
    *shape = dev_shape(plan, 0, 0);
    const int epi = p->spec[op].epi;
    if (op == SPLAT__KOP_ATTENTION && (p->npass ? epi != SPLAT_EPI_PASS1 || !p->attn_pass2 ||
                                                      p->attn_pass2_spec.epi != SPLAT_EPI_PASS2
                                       : p->nmerge ? epi != SPLAT_EPI_SPLIT || !p->merge
                                                   : epi == SPLAT_EPI_PASS1)) {
      /* Each attention tile kernel carries one epilogue (kernels/params.cuh SPLAT_EPI_*). */
      st = splat__fail(SPLAT_ERR_INTERNAL,
                       "splat_attention: the plan's attention tile kernel (epilogue %d) does not "
                       "match its layout (%d passes, %lld split tiles)",
                       epi, p->npass, (long long)p->nmerge);
    } else if (op == SPLAT__KOP_ATTENTION && p->npass) {
      /* Two passes: the first leaves its rows' partial results, the second merges them. */
      splat_attention_params *prm = params;
      for (int k = 0; k < p->npass && st == SPLAT_OK; k++) {
        prm->pat = p->pass_pat[k];
        prm->part_rows = p->pass_tile_q[k]; /* the kernel's work items per query tile */
        /* Pass 2 depends on pass 1 only when pass 1 runs (else it would on whatever
         * kernel came before on the caller's stream). */
        st = k ? launch_tile(plan, &p->attn_pass2_spec, p->attn_pass2, p->attn_pass2_smem,
                             p->pass_ntiles[k], p->pass_tile_q[k], stream, params,
                             p->pass_ntiles[0] > 0)
               : launch_tile(plan, &p->spec[op], p->tile[op], p->tile_smem[op], p->pass_ntiles[k],
                             p->pass_tile_q[k], stream, params, 0);
      }
      prm->pat = p->pat;
      prm->part_rows = plan->tiles.tile_q;
    } else {
      st = launch_tile(plan, &p->spec[op], p->tile[op], p->tile_smem[op],
                       op == SPLAT__KOP_ATTENTION ? p->attn_ntiles
                       : op == SPLAT__KOP_SDDMM   ? p->sddmm_ntiles
                                                  : p->ntiles,
                       plan->tiles.tile_q, stream, params, 0);
    }
    /* Split attention tiles: merge the chunks' partial results. */
    if (st == SPLAT_OK && op == SPLAT__KOP_ATTENTION && p->nmerge > 0) {
      const int64_t blocks = p->nmerge * ((plan->tiles.tile_q + 3) / 4); /* 4 rows each */
      st = launch(p->merge, (unsigned)blocks, grid_y(plan), 128, 0, stream, params);
    }
    if (st == SPLAT_OK) {
      st = launch_rows(plan, op, p->regular_rows, plan->seq_q - p->regular_rows, shape, params,
                       stream);
    }
  } else {
    st = launch_rows(plan, op, 0, plan->seq_q, shape, params, stream);
  }
  if (ws) st = workspaces_give_back(ws, stream, st);
  pop();
  return st;
}

static splat_status check_values_dtype(const char *fn, const char *name, const splat_tensor *t,
                                       splat_dtype want) {
  if (t->dtype != want) {
    return splat__fail(SPLAT_ERR_UNSUPPORTED,
                       "%s: %s dtype %s differs from the plan's dtype %s; the CUDA backend "
                       "compiles its value kernels for the plan's dtype only",
                       fn, name, splat_dtype_name(t->dtype), splat_dtype_name(want));
  }
  return SPLAT_OK;
}

splat_status splat__cuda_sddmm(const splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                               double scale, const splat_tensor *scores, splat_stream stream) {
  const splat__cuda_plan *p = plan->cuda;
  splat_status st = check_values_dtype("splat_sddmm", "scores", scores, plan->desc.dtype);
  if (st != SPLAT_OK) return st;
  splat_sddmm_params prm;
  memset(&prm, 0, sizeof prm);
  const int tile_ok = tile_layout_ok(q) && tile_layout_ok(k);
  prm.pat = tile_ok ? p->sddmm_pat : p->pat; /* the row kernel reads only what both share */
  prm.q = dev_tensor(q);
  prm.k = dev_tensor(k);
  prm.scores = dev_tensor(scores);
  prm.scale = (float)scale;
  prm.row_width = (int32_t)plan->acsr.row_width;
  return launch_op(plan, SPLAT__KOP_SDDMM, tile_ok, &prm.shape, &prm, stream);
}

splat_status splat__cuda_softmax(const splat_plan *plan, const splat_tensor *scores, double scale,
                                 const splat_tensor *probs, const splat_tensor *lse,
                                 splat_stream stream) {
  const splat__cuda_plan *p = plan->cuda;
  splat_status st = check_values_dtype("splat_softmax", "scores", scores, plan->desc.dtype);
  if (st == SPLAT_OK) st = check_values_dtype("splat_softmax", "probs", probs, plan->desc.dtype);
  if (st != SPLAT_OK) return st;
  splat_softmax_params prm;
  memset(&prm, 0, sizeof prm);
  prm.pat = p->pat;
  prm.scores = dev_tensor(scores);
  prm.probs = dev_tensor(probs);
  prm.lse = dev_tensor(lse);
  prm.scale = (float)scale;
  prm.scale_log2 = (float)(scale * 1.4426950408889634);
  return launch_op(plan, SPLAT__KOP_SOFTMAX, 0, &prm.shape, &prm, stream);
}

splat_status splat__cuda_spmm(const splat_plan *plan, const splat_tensor *probs,
                              const splat_tensor *v, const splat_tensor *out, splat_stream stream) {
  const splat__cuda_plan *p = plan->cuda;
  splat_status st = check_values_dtype("splat_spmm", "probs", probs, plan->desc.dtype);
  if (st != SPLAT_OK) return st;
  splat_spmm_params prm;
  memset(&prm, 0, sizeof prm);
  prm.pat = p->pat;
  prm.probs = dev_tensor(probs);
  prm.v = dev_tensor(v);
  prm.out = dev_tensor(out);
  return launch_op(plan, SPLAT__KOP_SPMM, tile_layout_ok(v), &prm.shape, &prm, stream);
}

splat_status splat__cuda_attention(const splat_plan *plan, const splat_tensor *q,
                                   const splat_tensor *k, const splat_tensor *v, double scale,
                                   const splat_tensor *out, const splat_tensor *lse,
                                   splat_stream stream) {
  const splat__cuda_plan *p = plan->cuda;
  splat_attention_params prm;
  memset(&prm, 0, sizeof prm);
  int tile_ok = tile_layout_ok(q) && tile_layout_ok(k) && tile_layout_ok(v);
  if (tile_ok && attn_ws(p) && !out_vec_ok(out)) {
    /* The warp-specialised kernels store the output's rows in 16-byte chunks only (other
     * stores cost the fast path time, and the code of a second epilogue): outputs that cannot
     * take them run on the row kernel. */
    splat__log(SPLAT__LOG_DEBUG,
               "splat_attention: the output is not 16-byte aligned with a contiguous head_dim; "
               "the row kernel computes it");
    tile_ok = 0;
  }
  /* The tile path runs the attention tiles (split ones with their workspace); the row
   * kernel alone needs neither. */
  prm.pat = p->tile[SPLAT__KOP_ATTENTION] && tile_ok ? p->attn_pat : p->pat;
  prm.part_rows = plan->tiles.tile_q;
  prm.q = dev_tensor(q);
  prm.k = dev_tensor(k);
  prm.v = dev_tensor(v);
  prm.out = dev_tensor(out);
  prm.lse = dev_tensor(lse);
  prm.scale = (float)scale;
  prm.scale_log2 = (float)(scale * 1.4426950408889634);
  if (tile_ok && attn_ws(p)) {
    splat__tma_views_encode(&p->views, drv->cuTensorMapEncodeTiled, k, v, plan->desc.batch,
                            plan->desc.heads_kv, plan->seq_k, plan->desc.head_dim, &prm);
    /* Q by TMA where the keys are (SPLAT_ATTN_TMA=0 gathers both), seen with the row
     * stride of each pass's tiles (none for a pass on the mma.sync kernel). */
    const int ws0 = p->spec[SPLAT__KOP_ATTENTION].wgmma == SPLAT__WGMMA_WS;
    const int32_t qstride[2] = {
        !ws0       ? 0
        : p->npass ? p->pass_pat[0].qstride
                   : p->attn_pat.qstride,
        p->npass && p->attn_pass2_spec.wgmma == SPLAT__WGMMA_WS ? p->pass_pat[1].qstride : 0};
    if (prm.tma)
      splat__tma_q_encode(drv->cuTensorMapEncodeTiled, q, plan->desc.batch, plan->desc.heads,
                          plan->seq_q, plan->desc.head_dim, qstride, &prm);
    if (!prm.tma &&
        (!p->spec[SPLAT__KOP_ATTENTION].gather || (p->npass && !p->attn_pass2_spec.gather))) {
      /* A kernel without the gather (three consumer warpgroups; either pass's) where K and V
       * take no tensor map (a driver without cuTensorMapEncodeTiled, or one refusing a map):
       * the row kernel. */
      splat__log(SPLAT__LOG_DEBUG,
                 "splat_attention: K and V take no tensor map and the plan's "
                 "attention kernel has no gather; the row kernel computes it");
      tile_ok = 0;
      prm.pat = p->pat;
    }
  }
  return launch_op(plan, SPLAT__KOP_ATTENTION, tile_ok, &prm.shape, &prm, stream);
}
