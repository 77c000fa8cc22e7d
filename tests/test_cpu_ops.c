/* test_cpu_ops.c — the CPU backend against an independent dense float64 reference:
 * sddmm, softmax (also in place), spmm and fused attention through the public API, on
 * every reference pattern (brute-force predicates) and random explicit masks, with
 * f32/f16/bf16, odd head dims, grouped-query heads, strided layouts, empty rows,
 * poisoned outputs, NaN/inf inputs and 1 vs 4 threads. Also the dtype conversions,
 * exhaustively. Tolerance: one ulp of the output dtype (the only rounding left). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "core/parallel.h"
#include "harness.h"
#include "splat.h"
#include "support/reference_patterns.h"
#include "support/test_helpers.h"
#include "support/test_tensors.h"

/* ------------------------------------------------------------ dtype conversions */

/* Value of an f16 / bf16 encoding from its definition (independent of dtype.c). */
static double f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
  return (h & 0x8000) ? -v : v;
}
static double bf16_value(uint16_t h) {
  const int e = (h >> 7) & 0xFF, m = h & 0x7F;
  double v = e == 0 ? ldexp(m, -133) : e == 255 ? (m ? NAN : INFINITY) : ldexp(m + 128, e - 134);
  return (h & 0x8000) ? -v : v;
}

static uint16_t store16(splat_dtype dt, double v) {
  uint16_t h;
  splat__store(&h, dt, 0, v);
  return h;
}

static void test_dtype_exhaustive(void) {
  int bad_value = 0, bad_trip = 0, bad_store = 0, bad_load = 0;
  for (uint32_t u = 0; u < 65536; u++) {
    const uint16_t h = (uint16_t)u;
    for (int which = 0; which < 2; which++) {
      const splat_dtype dt = which ? SPLAT_BF16 : SPLAT_F16;
      const float f = which ? splat__bf16_to_f32(h) : splat__f16_to_f32(h);
      const double want = which ? bf16_value(h) : f16_value(h);
      const int nan = want != want;
      if (nan ? !isnan(f) : ((double)f != want || !signbit(f) != !signbit(want))) bad_value++;
      /* Bit-exact round trip through float, NaN payloads included. */
      const uint16_t back = which ? splat__f32_to_bf16(f) : splat__f32_to_f16(f);
      if (back != h) bad_trip++;
      /* Through double: exact for every non-NaN; NaN stays NaN with its sign. */
      const uint16_t st = store16(dt, (double)f);
      if (nan ? ((st & 0x7FFF) <= (which ? 0x7F80 : 0x7C00) || (st & 0x8000) != (h & 0x8000))
              : st != h)
        bad_store++;
      const double ld = splat__load(&h, dt, 0);
      if (nan ? !isnan(ld) : (ld != want || !signbit(ld) != !signbit(want))) bad_load++;
    }
  }
  CHECKF(bad_value == 0, "%d f16/bf16 encodings decode to the wrong value", bad_value);
  CHECKF(bad_trip == 0, "%d encodings do not round-trip through float", bad_trip);
  CHECKF(bad_store == 0, "%d encodings do not round-trip through double", bad_store);
  CHECKF(bad_load == 0, "%d encodings load to the wrong double", bad_load);
}

/* Every midpoint between adjacent finite values (subnormals included) ties to even,
 * and its neighbours round to the nearer side; from float and from double. The value
 * just above a midpoint in double rounds to a float that IS the midpoint: rounding
 * double -> float -> half would tie it the wrong way, so this checks direct rounding. */
static void test_dtype_midpoints(void) {
  int bad = 0, traps = 0;
  for (int which = 0; which < 2; which++) {
    const splat_dtype dt = which ? SPLAT_BF16 : SPLAT_F16;
    const uint16_t maxfin = which ? 0x7F7F : 0x7BFF, inf = which ? 0x7F80 : 0x7C00;
    for (uint16_t h = 0; h <= maxfin; h++) {
      const double lo = which ? bf16_value(h) : f16_value(h);
      const double hi = h == maxfin ? ldexp(1.0, which ? 128 : 16)
                                    : (which ? bf16_value(h + 1) : f16_value(h + 1));
      const double mid = 0.5 * (lo + hi); /* exact */
      const uint16_t even = (h & 1) ? (uint16_t)(h + 1) : h;
      const uint16_t up = h == maxfin ? inf : (uint16_t)(h + 1);
      for (int s = 0; s < 2; s++) {
        const uint16_t sg = s ? 0x8000 : 0;
        const double m = s ? -mid : mid;
        const double above = s ? -nextafter(mid, INFINITY) : nextafter(mid, INFINITY);
        const double below = s ? -nextafter(mid, 0.0) : nextafter(mid, 0.0);
        const uint16_t w_mid = (uint16_t)((h == maxfin ? inf : even) | sg);
        if (store16(dt, m) != w_mid) bad++;
        if (store16(dt, above) != (up | sg)) bad++;
        if (store16(dt, below) != (h | sg)) bad++;
        const uint16_t from_f = which ? splat__f32_to_bf16((float)m) : splat__f32_to_f16((float)m);
        if (from_f != w_mid) bad++;
        const float fa = s ? -nextafterf((float)mid, INFINITY) : nextafterf((float)mid, INFINITY);
        const float fb = s ? -nextafterf((float)mid, 0.0f) : nextafterf((float)mid, 0.0f);
        if ((which ? splat__f32_to_bf16(fa) : splat__f32_to_f16(fa)) != (up | sg)) bad++;
        if ((which ? splat__f32_to_bf16(fb) : splat__f32_to_f16(fb)) != (h | sg)) bad++;
        if ((double)(float)above == m && !(h & 1)) traps++;
      }
    }
  }
  CHECKF(bad == 0, "%d midpoint roundings wrong", bad);
  CHECKF(traps > 1000, "only %d double-rounding trap cases exercised", traps);
}

static void test_dtype_specials(void) {
  CHECK(store16(SPLAT_F16, 65504.0) == 0x7BFF);
  CHECK(store16(SPLAT_F16, 65519.99) == 0x7BFF);
  CHECK(store16(SPLAT_F16, 65520.0) == 0x7C00);
  CHECK(store16(SPLAT_F16, 1e6) == 0x7C00);
  CHECK(store16(SPLAT_F16, -1e6) == 0xFC00);
  CHECK(store16(SPLAT_F16, DBL_MAX) == 0x7C00);
  CHECK(store16(SPLAT_F16, INFINITY) == 0x7C00);
  CHECK(store16(SPLAT_F16, -INFINITY) == 0xFC00);
  CHECK(splat__f32_to_f16(FLT_MAX) == 0x7C00);
  CHECK(splat__f32_to_f16(-INFINITY) == 0xFC00);
  CHECK(store16(SPLAT_F16, 0x1p-24) == 0x0001);
  CHECK(store16(SPLAT_F16, 0x1p-25) == 0x0000);               /* tie to even: 0 */
  CHECK(store16(SPLAT_F16, 0x1.0000000000001p-25) == 0x0001); /* just above the tie */
  CHECK(store16(SPLAT_F16, 0x3p-25) == 0x0002);               /* 1.5 ulp: tie to even 2 */
  CHECK(store16(SPLAT_F16, 1e-30) == 0x0000);
  CHECK(store16(SPLAT_F16, -1e-30) == 0x8000);
  CHECK(store16(SPLAT_F16, 4.9e-324) == 0x0000);
  CHECK(store16(SPLAT_F16, -0.0) == 0x8000);
  CHECK(store16(SPLAT_F16, 0x1.ffcp-15) == 0x0400); /* largest subnormal + carries up */
  CHECK(store16(SPLAT_F16, 1.0) == 0x3C00);
  CHECK(store16(SPLAT_F16, 1.0 + 0x1p-11) == 0x3C00); /* tie to even */
  CHECK(store16(SPLAT_F16, 1.0 + 0x3p-11) == 0x3C02); /* tie to even, up */
  CHECK(store16(SPLAT_F16, 2047.5) == 0x67FF + 1);    /* 2047.5 -> 2048 */
  CHECK(isnan(splat__load((uint16_t[]){store16(SPLAT_F16, NAN)}, SPLAT_F16, 0)));
  CHECK(store16(SPLAT_BF16, 1e39) == 0x7F80);
  CHECK(store16(SPLAT_BF16, -1e39) == 0xFF80);
  CHECK(splat__f32_to_bf16(FLT_MAX) == 0x7F80);
  CHECK(store16(SPLAT_BF16, 0x1.fep127) == 0x7F7F);
  CHECK(store16(SPLAT_BF16, 0x1.ffp127) == 0x7F80); /* tie at the top: to inf */
  CHECK(store16(SPLAT_BF16, 0x1p-133) == 0x0001);
  CHECK(store16(SPLAT_BF16, 0x1p-134) == 0x0000);
  CHECK(store16(SPLAT_BF16, 1.0 + 0x1p-8) == 0x3F80);
  CHECK(store16(SPLAT_BF16, 1.0 + 0x3p-8) == 0x3F82);
  CHECK(isnan(splat__load((uint16_t[]){store16(SPLAT_BF16, -NAN)}, SPLAT_BF16, 0)));
  CHECK(splat__f32_to_bf16(NAN) != 0x7F80 && (splat__f32_to_bf16(NAN) & 0x7F80) == 0x7F80);
  float f;
  splat__store(&f, SPLAT_F32, 0, 1e39);
  CHECK(isinf(f) && f > 0);
  splat__store(&f, SPLAT_F32, 0, 1.0 + 0x1p-24);
  CHECK(f == 1.0f);
  CHECK(splat__load(&f, SPLAT_F32, 0) == 1.0);
  CHECK(splat__dtype_size(SPLAT_F32) == 4 && splat__dtype_size(SPLAT_F16) == 2 &&
        splat__dtype_size(SPLAT_BF16) == 2);

#ifdef __FLT16_MAX__
  /* The compiler's own conversion as an oracle, on random doubles around f16's range. */
  int bad = 0;
  for (int n = 0; n < 200000; n++) {
    uint64_t bits = rng_next();
    const uint64_t e = 1023 - 30 + (bits % 50); /* 2^-30 .. 2^19 */
    bits = (bits & 0x800FFFFFFFFFFFFFull) | (e << 52);
    if (n & 1) bits &= ~((uint64_t)0x3FFFFFFFFull); /* near-midpoint trailing zeros */
    double d;
    memcpy(&d, &bits, sizeof d);
    _Float16 hf = (_Float16)d;
    uint16_t want;
    memcpy(&want, &hf, sizeof want);
    if (store16(SPLAT_F16, d) != want) bad++;
    _Float16 hf2 = (_Float16)(float)d;
    memcpy(&want, &hf2, sizeof want);
    if (splat__f32_to_f16((float)d) != want) bad++;
  }
  CHECKF(bad == 0, "%d conversions disagree with the compiler's _Float16", bad);
#endif
}

/* ------------------------------------------------------------ parallel_for */

typedef struct pf_arg {
  int *hits;
  int64_t chunk;
  int bad_chunk;
} pf_arg;

static void pf_fn(void *p, int64_t b, int64_t e) {
  pf_arg *a = (pf_arg *)p;
  if (e - b > a->chunk || e <= b) a->bad_chunk = 1;
  for (int64_t i = b; i < e; i++) __atomic_fetch_add(&a->hits[i], 1, __ATOMIC_RELAXED);
}

static void test_parallel_for(void) {
  const int64_t ns[] = {0, 1, 7, 1000, 4097};
  const int64_t chunks[] = {1, 3, 64, 10000};
  const int threads[] = {1, 2, 4, 9};
  for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
    for (size_t b = 0; b < sizeof chunks / sizeof *chunks; b++)
      for (size_t c = 0; c < sizeof threads / sizeof *threads; c++) {
        int *hits = calloc((size_t)ns[a] + 1, sizeof(int));
        pf_arg arg = {hits, chunks[b], 0};
        splat__parallel_for(threads[c], ns[a], chunks[b], pf_fn, &arg);
        int ok = !arg.bad_chunk;
        for (int64_t i = 0; i < ns[a]; i++) ok &= hits[i] == 1;
        CHECKF(ok, "parallel_for n=%lld chunk=%lld threads=%d", (long long)ns[a],
               (long long)chunks[b], threads[c]);
        free(hits);
      }
}

/* ------------------------------------------------------------ test tensors */

/* Fills logical elements with random values of magnitude in [0.05, 1], never zero. */
static void tens_fill(tens *x) {
  const splat_tensor *t = &x->t;
  for (int64_t a = 0; a < t->shape[0]; a++)
    for (int64_t b = 0; b < t->shape[1]; b++)
      for (int64_t c = 0; c < t->shape[2]; c++)
        for (int64_t d = 0; d < t->shape[3]; d++) {
          double v = 0.05 + 0.95 * rng_unit();
          if (rng_next() & 1) v = -v;
          splat__store(t->data, t->dtype, toff(t, a, b, c, d), v);
        }
}

/* Logical elements as doubles, row-major [d0, d1, d2, d3]. */
static double *tens_read(const tens *x) {
  const splat_tensor *t = &x->t;
  const int64_t n = t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3];
  double *out = xmalloc(sizeof(double) * (size_t)n);
  int64_t idx = 0;
  for (int64_t a = 0; a < t->shape[0]; a++)
    for (int64_t b = 0; b < t->shape[1]; b++)
      for (int64_t c = 0; c < t->shape[2]; c++)
        for (int64_t d = 0; d < t->shape[3]; d++)
          out[idx++] = splat__load(t->data, t->dtype, toff(t, a, b, c, d));
  return out;
}

/* Every allocated element not written by the op still holds the poison: padding
 * entries of values (last index >= rownnz[row]) and gaps between strided elements.
 * rownnz NULL: all logical elements are written. Returns the count of bad elements. */
static int64_t count_unpoisoned(const tens *x, const int64_t *rownnz) {
  const splat_tensor *t = &x->t;
  const int size = splat__dtype_size(t->dtype);
  unsigned char *written = calloc((size_t)x->elems, 1);
  for (int64_t a = 0; a < t->shape[0]; a++)
    for (int64_t b = 0; b < t->shape[1]; b++)
      for (int64_t c = 0; c < t->shape[2]; c++) {
        const int64_t n = rownnz ? rownnz[c] : t->shape[3];
        for (int64_t d = 0; d < n; d++) written[toff(t, a, b, c, d) - x->min_off] = 1;
      }
  int64_t bad = 0;
  for (int64_t e = 0; e < x->elems; e++) {
    if (written[e]) continue;
    for (int k = 0; k < size; k++) bad += x->base[e * size + k] != 0xFF;
  }
  free(written);
  return bad;
}

/* ------------------------------------------------------------ comparison */

typedef struct cmp {
  int64_t n, bad;
  double worst; /* largest |got - ref| / tol */
  char first[200];
} cmp;

static void cmp_one(cmp *c, double got, double ref, double tol, const char *what, int64_t i0,
                    int64_t i1, int64_t i2, int64_t i3) {
  c->n++;
  const double err = fabs(got - ref);
  const int ok = (got == ref) || err <= tol; /* NaN fails; -inf == -inf passes */
  if (ok) {
    if (tol > 0 && err / tol > c->worst) c->worst = err / tol;
    return;
  }
  if (c->bad++ == 0)
    snprintf(c->first, sizeof c->first, "%s[%lld,%lld,%lld,%lld] got %.9g want %.9g tol %.3g", what,
             (long long)i0, (long long)i1, (long long)i2, (long long)i3, got, ref, tol);
}

/* ------------------------------------------------------------ the cases */

typedef struct tcase {
  const char *spec;    /* closed-form spec, or NULL for `mask` */
  int ref;             /* index into splat_ref_patterns, -1 for a mask */
  const uint8_t *mask; /* explicit mask [sq * sk] when spec is NULL */
  int64_t sq, sk;
  int64_t B, H, Hkv, D;
  splat_dtype dt, vdt;  /* Q/K/V/O dtype, scores/probs dtype */
  int layout, vlayout;  /* Q/K/V/O layout, values layout */
  int scale_in_softmax; /* 1: sddmm scale 1, softmax scale s; 0: the other way */
  int default_scale;    /* pass SPLAT_DEFAULT_SCALE to sddmm / attention */
  int threads_check;    /* rerun on a 1-thread context and compare bitwise */
} tcase;

static splat_context *ctx1, *ctx4;

static splat_plan *make_plan(splat_context *ctx, const tcase *c) {
  splat_pattern *pat = NULL;
  splat_status st = c->spec ? splat_pattern_parse(c->spec, c->sq, c->sk, &pat)
                            : splat_pattern_from_mask(c->mask, c->sq, c->sk, &pat);
  CHECKF(st == SPLAT_OK, "pattern '%s' %lldx%lld: %s", c->spec ? c->spec : "mask", (long long)c->sq,
         (long long)c->sk, splat_last_error(NULL));
  if (st != SPLAT_OK) return NULL;
  splat_plan_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.batch = c->B;
  desc.heads = c->H;
  desc.heads_kv = c->Hkv;
  desc.head_dim = c->D;
  desc.dtype = c->dt;
  splat_plan *plan = NULL;
  st = splat_plan_create(ctx, pat, &desc, &plan);
  CHECKF(st == SPLAT_OK, "plan for '%s': %s", c->spec ? c->spec : "mask", splat_last_error(ctx));
  splat_pattern_destroy(pat);
  return st == SPLAT_OK ? plan : NULL;
}

/* All outputs of one run of the four ops. */
typedef struct outs {
  tens scores, probs, inplace, out, att, lse, lse2, att_lse;
} outs;

static void outs_make(outs *o, const tcase *c, int64_t W) {
  o->scores = tens_make(c->vdt, c->B, c->H, c->sq, W, c->vlayout);
  o->probs = tens_make(c->vdt, c->B, c->H, c->sq, W, c->vlayout);
  o->inplace = tens_make(c->vdt, c->B, c->H, c->sq, W, c->vlayout);
  o->out = tens_make(c->dt, c->B, c->H, c->sq, c->D, c->layout);
  o->att = tens_make(c->dt, c->B, c->H, c->sq, c->D, c->layout);
  o->lse = tens_make(SPLAT_F32, c->B, c->H, c->sq, 1, L_PAD);
  o->lse2 = tens_make(SPLAT_F32, c->B, c->H, c->sq, 1, L_CONTIG);
  o->att_lse = tens_make(SPLAT_F32, c->B, c->H, c->sq, 1, L_BSHD);
}

static void outs_free(outs *o) {
  tens *all[] = {&o->scores, &o->probs, &o->inplace, &o->out,
                 &o->att,    &o->lse,   &o->lse2,    &o->att_lse};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) tens_free(all[i]);
}

/* Runs sddmm -> softmax -> spmm, softmax in place, and attention. */
static int run_ops(splat_plan *plan, const tcase *c, const tens *q, const tens *k, const tens *v,
                   float scale, outs *o) {
  const float s_sddmm = c->default_scale ? SPLAT_DEFAULT_SCALE : c->scale_in_softmax ? 1.0f : scale;
  const float s_soft = c->scale_in_softmax ? scale : 1.0f;
  const float s_att = c->default_scale ? SPLAT_DEFAULT_SCALE : scale;
  int ok = 1;
  splat_status st = splat_sddmm(plan, &q->t, &k->t, s_sddmm, &o->scores.t, NULL);
  CHECKF(st == SPLAT_OK, "sddmm: %s", splat_last_error(NULL));
  ok &= st == SPLAT_OK;
  st = splat_softmax(plan, &o->scores.t, s_soft, &o->probs.t, &o->lse.t, NULL);
  CHECKF(st == SPLAT_OK, "softmax: %s", splat_last_error(NULL));
  ok &= st == SPLAT_OK;
  /* In place on a copy of the scores (same strides, so same buffer layout). */
  memcpy(o->inplace.base, o->scores.base,
         (size_t)o->scores.elems * (size_t)splat__dtype_size(c->vdt));
  st = splat_softmax(plan, &o->inplace.t, s_soft, &o->inplace.t, &o->lse2.t, NULL);
  CHECKF(st == SPLAT_OK, "softmax in place: %s", splat_last_error(NULL));
  ok &= st == SPLAT_OK;
  st = splat_spmm(plan, &o->probs.t, &v->t, &o->out.t, NULL);
  CHECKF(st == SPLAT_OK, "spmm: %s", splat_last_error(NULL));
  ok &= st == SPLAT_OK;
  st = splat_attention(plan, &q->t, &k->t, &v->t, s_att, &o->att.t, &o->att_lse.t, NULL);
  CHECKF(st == SPLAT_OK, "attention: %s", splat_last_error(NULL));
  ok &= st == SPLAT_OK;
  return ok;
}

static int same_bytes(const tens *a, const tens *b) {
  return a->elems == b->elems &&
         memcmp(a->base, b->base, (size_t)a->elems * (size_t)splat__dtype_size(a->t.dtype)) == 0;
}

static int ref_contains(int r, int64_t i, int64_t j, int64_t sq, int64_t sk) {
  const ref_pattern *p = &splat_ref_patterns[r];
  return p->contains(p, i, j, sq, sk) != 0;
}

static int cases_run, cases_big;

static void run_case(const tcase *c) {
  cases_run++;
  cases_big += c->sq >= 1000;
  char label[256];
  snprintf(label, sizeof label, "%s sq=%lld sk=%lld B=%lld H=%lld/%lld D=%lld %s/%s %s/%s%s",
           c->spec ? c->spec : "mask", (long long)c->sq, (long long)c->sk, (long long)c->B,
           (long long)c->H, (long long)c->Hkv, (long long)c->D, dt_name(c->dt), dt_name(c->vdt),
           layout_name[c->layout], layout_name[c->vlayout],
           c->default_scale ? " default-scale" : "");
  const int64_t sq = c->sq, sk = c->sk, B = c->B, H = c->H, Hkv = c->Hkv, D = c->D;
  const int64_t group = H / Hkv;

  /* The reference mask, as CSR of increasing columns. */
  int64_t *rowptr = xmalloc(sizeof(int64_t) * (size_t)(sq + 1));
  int64_t *rownnz = xmalloc(sizeof(int64_t) * (size_t)sq);
  int64_t nnz = 0, maxrow = 0;
  for (int64_t i = 0; i < sq; i++) {
    int64_t n = 0;
    for (int64_t j = 0; j < sk; j++)
      n += c->spec ? ref_contains(c->ref, i, j, sq, sk) : c->mask[i * sk + j] != 0;
    rownnz[i] = n;
    rowptr[i] = nnz;
    nnz += n;
    if (n > maxrow) maxrow = n;
  }
  rowptr[sq] = nnz;
  int64_t *cols = xmalloc(sizeof(int64_t) * (size_t)(nnz ? nnz : 1));
  for (int64_t i = 0, e = 0; i < sq; i++)
    for (int64_t j = 0; j < sk; j++)
      if (c->spec ? ref_contains(c->ref, i, j, sq, sk) : c->mask[i * sk + j] != 0) cols[e++] = j;

  splat_plan *plan = make_plan(ctx4, c);
  if (!plan) {
    free(rowptr), free(rownnz), free(cols);
    return;
  }
  const int64_t W = splat_plan_row_width(plan);
  /* docs/format.md "Row width": the widest row, at least 1; from 128 on rounded up to 16 */
  const int64_t wmin = maxrow > 0 ? maxrow : 1,
                want = maxrow >= 128 ? (maxrow + 15) / 16 * 16 : wmin;
  CHECKF(W == want, "%s: row width %lld, reference max row nnz %lld", label, (long long)W,
         (long long)maxrow);
  if (W < maxrow) {
    splat_plan_destroy(plan);
    free(rowptr), free(rownnz), free(cols);
    return;
  }

  tens q = tens_make(c->dt, B, H, sq, D, c->layout);
  tens k = tens_make(c->dt, B, Hkv, sk, D, c->layout);
  tens v = tens_make(c->dt, B, Hkv, sk, D, (c->layout + 1) % L_COUNT);
  tens_fill(&q), tens_fill(&k), tens_fill(&v);
  double *Q = tens_read(&q), *K = tens_read(&k), *V = tens_read(&v);
  const float scale = c->default_scale ? (float)(1.0 / sqrt((double)D)) : 0.7f / sqrtf((float)D);
  const double sc = c->default_scale ? 1.0 / sqrt((double)D) : (double)scale;

  outs o;
  outs_make(&o, c, W);
  const int ran = run_ops(plan, c, &q, &k, &v, scale, &o);

  if (ran) {
    const double s_sddmm = c->scale_in_softmax ? 1.0 : sc;
    const double s_soft = c->scale_in_softmax ? sc : 1.0;
    cmp c_sd = {0}, c_sm = {0}, c_lse = {0}, c_mm = {0}, c_at = {0}, c_alse = {0}, c_fu = {0};
    double *x = xmalloc(sizeof(double) * (size_t)W), *acc = xmalloc(sizeof(double) * (size_t)D);
    const splat_tensor *S = &o.scores.t, *P = &o.probs.t, *O = &o.out.t, *A = &o.att.t;
    double maxx = 0, maxv = 0;
    for (int64_t e = 0; e < B * Hkv * sk * D; e++) maxv = fmax(maxv, fabs(V[e]));
    for (int64_t b = 0; b < B; b++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < sq; i++) {
          const int64_t hk = h / group, n = rownnz[i];
          const double *qi = Q + ((b * H + h) * sq + i) * D;
          /* sddmm: scale * <q, k> from the inputs. */
          for (int64_t kk = 0; kk < n; kk++) {
            const double *kj = K + ((b * Hkv + hk) * sk + cols[rowptr[i] + kk]) * D;
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += qi[d] * kj[d];
            const double ref = s_sddmm * dot;
            const double got = splat__load(S->data, S->dtype, toff(S, b, h, i, kk));
            cmp_one(&c_sd, got, ref, ulp_of(c->vdt, ref) + 1e-12, "scores", b, h, i, kk);
          }
          /* softmax of the library's scores. */
          double m = -INFINITY, sum = 0;
          for (int64_t kk = 0; kk < n; kk++) {
            x[kk] = s_soft * splat__load(S->data, S->dtype, toff(S, b, h, i, kk));
            m = fmax(m, x[kk]);
            maxx = fmax(maxx, fabs(x[kk]));
          }
          for (int64_t kk = 0; kk < n; kk++) sum += exp(x[kk] - m);
          for (int64_t kk = 0; kk < n; kk++) {
            const double ref = exp(x[kk] - m) / sum;
            const double got = splat__load(P->data, P->dtype, toff(P, b, h, i, kk));
            cmp_one(&c_sm, got, ref, ulp_of(c->vdt, ref) + 1e-12, "probs", b, h, i, kk);
          }
          const double lref = n ? m + log(sum) : -INFINITY;
          const double lgot = splat__load(o.lse.t.data, SPLAT_F32, toff(&o.lse.t, b, h, i, 0));
          cmp_one(&c_lse, lgot, lref, n ? ulp_of(SPLAT_F32, lref) + 1e-12 : 0, "lse", b, h, i, 0);
          /* spmm of the library's probs. */
          for (int64_t d = 0; d < D; d++) acc[d] = 0;
          for (int64_t kk = 0; kk < n; kk++) {
            const double p = splat__load(P->data, P->dtype, toff(P, b, h, i, kk));
            const double *vj = V + ((b * Hkv + hk) * sk + cols[rowptr[i] + kk]) * D;
            for (int64_t d = 0; d < D; d++) acc[d] += p * vj[d];
          }
          for (int64_t d = 0; d < D; d++) {
            const double got = splat__load(O->data, O->dtype, toff(O, b, h, i, d));
            cmp_one(&c_mm, got, acc[d], n ? ulp_of(c->dt, acc[d]) + 1e-12 : 0, "out", b, h, i, d);
          }
          /* attention from the inputs, softmax over scale * <q, k>. */
          m = -INFINITY, sum = 0;
          for (int64_t kk = 0; kk < n; kk++) {
            const double *kj = K + ((b * Hkv + hk) * sk + cols[rowptr[i] + kk]) * D;
            double dot = 0;
            for (int64_t d = 0; d < D; d++) dot += qi[d] * kj[d];
            x[kk] = sc * dot;
            m = fmax(m, x[kk]);
          }
          for (int64_t d = 0; d < D; d++) acc[d] = 0;
          for (int64_t kk = 0; kk < n; kk++) {
            const double w = exp(x[kk] - m);
            const double *vj = V + ((b * Hkv + hk) * sk + cols[rowptr[i] + kk]) * D;
            sum += w;
            for (int64_t d = 0; d < D; d++) acc[d] += w * vj[d];
          }
          for (int64_t d = 0; d < D; d++) {
            const double ref = n ? acc[d] / sum : 0.0;
            const double got = splat__load(A->data, A->dtype, toff(A, b, h, i, d));
            /* Empty rows: exactly zero. */
            cmp_one(&c_at, got, ref, n ? ulp_of(c->dt, ref) + 1e-12 : 0, "attention out", b, h, i,
                    d);
            /* Fused against the unfused pipeline: their difference is the rounding of
             * scores and probs to the values dtype plus two output roundings. */
            const double un = splat__load(O->data, O->dtype, toff(O, b, h, i, d));
            const double ev = eps_of(c->vdt);
            const double tol = 2 * ulp_of(c->dt, ref) + ev * (2 * maxx + 2) * maxv + 1e-12;
            cmp_one(&c_fu, got, un, tol, "attention vs unfused", b, h, i, d);
          }
          const double alref = n ? m + log(sum) : -INFINITY;
          const double algot =
              splat__load(o.att_lse.t.data, SPLAT_F32, toff(&o.att_lse.t, b, h, i, 0));
          cmp_one(&c_alse, algot, alref, n ? ulp_of(SPLAT_F32, alref) + 1e-12 : 0, "attention lse",
                  b, h, i, 0);
        }
    free(x), free(acc);
    const cmp *all[] = {&c_sd, &c_sm, &c_lse, &c_mm, &c_at, &c_alse, &c_fu};
    const char *names[] = {"sddmm",     "softmax",       "softmax lse",         "spmm",
                           "attention", "attention lse", "attention vs unfused"};
    for (int t = 0; t < 7; t++)
      CHECKF(all[t]->bad == 0, "%s: %s: %lld of %lld off, first %s", label, names[t],
             (long long)all[t]->bad, (long long)all[t]->n, all[t]->first);

    /* In place gives the same bits as out of place. */
    CHECKF(same_bytes(&o.inplace, &o.probs), "%s: softmax in place differs", label);
    {
      int same = 1;
      for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
          for (int64_t i = 0; i < sq; i++) {
            const float a1 = ((const float *)o.lse.t.data)[toff(&o.lse.t, b, h, i, 0)];
            const float a2 = ((const float *)o.lse2.t.data)[toff(&o.lse2.t, b, h, i, 0)];
            same &= memcmp(&a1, &a2, sizeof a1) == 0;
          }
      CHECKF(same, "%s: in-place lse differs", label);
    }
    /* Nothing outside the written entries was touched. */
    const tens *vals[] = {&o.scores, &o.probs, &o.inplace};
    for (int t = 0; t < 3; t++)
      CHECKF(count_unpoisoned(vals[t], rownnz) == 0, "%s: values tensor %d: padding written", label,
             t);
    CHECKF(count_unpoisoned(&o.out, NULL) == 0 && count_unpoisoned(&o.att, NULL) == 0 &&
               count_unpoisoned(&o.lse, NULL) == 0 && count_unpoisoned(&o.att_lse, NULL) == 0,
           "%s: bytes outside the outputs written", label);
    CHECKF(count_unpoisoned(&q, NULL) == 0 && count_unpoisoned(&k, NULL) == 0 &&
               count_unpoisoned(&v, NULL) == 0,
           "%s: input gaps changed", label);

    /* 1 thread and 4 threads give identical bits. */
    if (c->threads_check) {
      splat_plan *plan1 = make_plan(ctx1, c);
      if (plan1) {
        outs o1;
        outs_make(&o1, c, W);
        if (run_ops(plan1, c, &q, &k, &v, scale, &o1)) {
          CHECKF(same_bytes(&o.scores, &o1.scores) && same_bytes(&o.probs, &o1.probs) &&
                     same_bytes(&o.inplace, &o1.inplace) && same_bytes(&o.out, &o1.out) &&
                     same_bytes(&o.att, &o1.att) && same_bytes(&o.lse, &o1.lse) &&
                     same_bytes(&o.att_lse, &o1.att_lse),
                 "%s: 1 thread and 4 threads differ", label);
        }
        outs_free(&o1);
        splat_plan_destroy(plan1);
      }
    }
  }

  outs_free(&o);
  free(Q), free(K), free(V);
  tens_free(&q), tens_free(&k), tens_free(&v);
  splat_plan_destroy(plan);
  free(rowptr), free(rownnz), free(cols);
}

/* A configuration that rotates dtypes, head dims, heads and layouts with n. */
static tcase config(int n, int64_t sq, int64_t sk) {
  static const splat_dtype dts[] = {SPLAT_F32, SPLAT_F16, SPLAT_BF16};
  static const int64_t dims[] = {64, 24, 128, 64, 5};
  tcase c;
  memset(&c, 0, sizeof c);
  c.sq = sq;
  c.sk = sk;
  c.B = 2;
  c.H = (n % 2) ? 4 : 3;
  c.Hkv = (n % 2) ? 2 : 3;
  c.D = dims[n % 5];
  c.dt = dts[n % 3];
  c.vdt = dts[(n / 3) % 3];
  c.layout = n % L_COUNT;
  c.vlayout = (n / 2) % 2 ? L_PAD : L_CONTIG;
  c.scale_in_softmax = (n / 4) % 2;
  c.default_scale = n % 7 == 3;
  if (c.default_scale) c.scale_in_softmax = 0; /* SPLAT_DEFAULT_SCALE is for sddmm */
  c.threads_check = 1;
  return c;
}

/* A random explicit mask of the given density with some empty rows and one full row. */
static uint8_t *random_mask(int64_t sq, int64_t sk, double density, int empty_rows) {
  uint8_t *m = xmalloc((size_t)(sq * sk));
  for (int64_t e = 0; e < sq * sk; e++) m[e] = rng_unit() < density;
  for (int r = 0; r < empty_rows && sq > 0; r++)
    memset(m + (int64_t)(rng_next() % (uint64_t)sq) * sk, 0, (size_t)sk);
  if (sq > 2) memset(m + (sq / 2) * sk, 1, (size_t)sk);
  return m;
}

static void test_patterns(void) {
  int n = 0;
  /* Every reference spec at seq 97. */
  for (int r = 0; r < splat_ref_pattern_count; r++) {
    tcase c = config(n++, 97, 97);
    c.spec = splat_ref_patterns[r].spec;
    c.ref = r;
    run_case(&c);
  }
  /* Some at seq_q != seq_k. */
  for (int r = 0; r < splat_ref_pattern_count; r += 3) {
    tcase c = config(n++, (r / 3) % 2 ? 150 : 61, (r / 3) % 2 ? 61 : 130);
    c.spec = splat_ref_patterns[r].spec;
    c.ref = r;
    run_case(&c);
  }
  /* Sparse ones at seq 1000 (dense ones would only cost time). */
  int big = 0;
  for (int r = 0; r < splat_ref_pattern_count && big < 4; r += 2) {
    int64_t nnz = 0;
    for (int64_t i = 0; i < 1000; i += 37)
      for (int64_t j = 0; j < 1000; j++) nnz += ref_contains(r, i, j, 1000, 1000);
    if (nnz > 27 * 1000 / 8) continue; /* density over ~1/8 */
    tcase c = config(n++, 1000, 1000);
    c.spec = splat_ref_patterns[r].spec;
    c.ref = r;
    c.B = 1;
    c.H = 2;
    c.Hkv = 1;
    c.D = big % 2 ? 128 : 64;
    c.threads_check = big == 0;
    run_case(&c);
    big++;
  }
  /* Random explicit masks. */
  struct {
    int64_t sq, sk;
    double density;
    int empty;
  } masks[] = {{97, 97, 0.3, 6}, {64, 200, 0.05, 3}, {200, 50, 0.7, 10}, {33, 40, 0.0, 0},
               {1, 1, 1.0, 0},   {97, 1, 0.5, 0},    {5, 300, 0.9, 1}};
  for (size_t t = 0; t < sizeof masks / sizeof *masks; t++) {
    uint8_t *m = random_mask(masks[t].sq, masks[t].sk, masks[t].density, masks[t].empty);
    if (masks[t].density == 0.0) memset(m, 0, (size_t)(masks[t].sq * masks[t].sk));
    tcase c = config(n++, masks[t].sq, masks[t].sk);
    c.ref = -1;
    c.mask = m;
    run_case(&c);
    free(m);
  }
}

/* ------------------------------------------------------------ non-finite inputs */

static int msg_has(const char *needle) {
  const char *msg = splat_last_error(ctx4);
  const int ok = strstr(msg, needle) != NULL;
  if (!ok) fprintf(stderr, "  message was: %s (wanted '%s')\n", msg, needle);
  return ok;
}

static void test_nonfinite(void) {
  tcase c = config(0, 97, 97);
  c.spec = "window(3)";
  c.mask = NULL;
  c.B = 2, c.H = 4, c.Hkv = 2, c.D = 24;
  c.layout = L_PAD;
  c.vlayout = L_PAD;
  splat_plan *plan = make_plan(ctx4, &c);
  if (!plan) return;
  const int64_t W = splat_plan_row_width(plan);
  CHECK(W == 7);
  for (int di = 0; di < 3; di++) {
    const splat_dtype dt = di == 0 ? SPLAT_F32 : di == 1 ? SPLAT_F16 : SPLAT_BF16;
    splat_plan_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.batch = c.B, desc.heads = c.H, desc.heads_kv = c.Hkv, desc.head_dim = c.D;
    desc.dtype = dt;
    splat_pattern *pat = NULL;
    splat_plan *p = NULL;
    if (splat_pattern_parse(c.spec, 97, 97, &pat) != SPLAT_OK ||
        splat_plan_create(ctx4, pat, &desc, &p) != SPLAT_OK) {
      CHECKF(0, "plan: %s", splat_last_error(ctx4));
      splat_pattern_destroy(pat);
      continue;
    }
    splat_pattern_destroy(pat);
    tens q = tens_make(dt, 2, 4, 97, 24, L_PAD), k = tens_make(dt, 2, 2, 97, 24, L_BSHD),
         v = tens_make(dt, 2, 2, 97, 24, L_CONTIG);
    tens s = tens_make(dt, 2, 4, 97, W, L_PAD), o = tens_make(dt, 2, 4, 97, 24, L_CONTIG);
    tens l = tens_make(SPLAT_F32, 2, 4, 97, 1, L_CONTIG);
    tens_fill(&q), tens_fill(&k), tens_fill(&v);
    const size_t osz = (size_t)o.elems * (size_t)splat__dtype_size(dt);

    /* Gaps of a padded input hold NaN already: never read, so fine. */
    CHECK(splat_attention(p, &q.t, &k.t, &v.t, 0.3f, &o.t, &l.t, NULL) == SPLAT_OK);
    memset(o.base, 0xFF, osz);
    memset(l.base, 0xFF, (size_t)l.elems * 4);

    /* NaN in q, with a later inf too: the lowest index is named; nothing is written. */
    splat__store(q.t.data, dt, toff(&q.t, 1, 3, 60, 2), INFINITY);
    splat__store(q.t.data, dt, toff(&q.t, 0, 1, 5, 3), NAN);
    CHECK(splat_attention(p, &q.t, &k.t, &v.t, 0.3f, &o.t, &l.t, NULL) ==
          SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_attention: q[0,1,5,3] is nan"));
    CHECK(msg_has("finite"));
    {
      /* Nothing written: the poison is intact everywhere. */
      int64_t changed = 0;
      for (size_t e = 0; e < osz; e++) changed += o.base[e] != 0xFF;
      for (size_t e = 0; e < (size_t)l.elems * 4; e++) changed += l.base[e] != 0xFF;
      CHECKF(changed == 0, "%lld output bytes written by a failing attention", (long long)changed);
    }
    CHECK(splat_sddmm(p, &q.t, &k.t, 1.0f, &s.t, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_sddmm: q[0,1,5,3] is nan"));
    splat__store(q.t.data, dt, toff(&q.t, 0, 1, 5, 3), 0.5);
    CHECK(splat_attention(p, &q.t, &k.t, &v.t, 0.3f, &o.t, &l.t, NULL) ==
          SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("q[1,3,60,2] is inf"));
    splat__store(q.t.data, dt, toff(&q.t, 1, 3, 60, 2), 0.5);

    /* inf in k, -inf in v. */
    splat__store(k.t.data, dt, toff(&k.t, 1, 0, 96, 23), INFINITY);
    CHECK(splat_sddmm(p, &q.t, &k.t, 1.0f, &s.t, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_sddmm: k[1,0,96,23] is inf"));
    CHECK(splat_attention(p, &q.t, &k.t, &v.t, 0.3f, &o.t, &l.t, NULL) ==
          SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_attention: k[1,0,96,23] is inf"));
    splat__store(k.t.data, dt, toff(&k.t, 1, 0, 96, 23), -0.5);
    splat__store(v.t.data, dt, toff(&v.t, 0, 1, 0, 0), -INFINITY);
    CHECK(splat_attention(p, &q.t, &k.t, &v.t, 0.3f, &o.t, &l.t, NULL) ==
          SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_attention: v[0,1,0,0] is -inf"));

    /* scores: NaN in a valid entry fails softmax; NaN in padding is fine. */
    CHECK(splat_sddmm(p, &q.t, &k.t, 1.0f, &s.t, NULL) == SPLAT_OK);
    tens pr = tens_make(dt, 2, 4, 97, W, L_CONTIG);
    /* Row 0 of window(3) has 4 columns: entries 4..6 are padding (still NaN). */
    CHECK(splat_softmax(p, &s.t, 1.0f, &pr.t, NULL, NULL) == SPLAT_OK);
    CHECK(splat_spmm(p, &pr.t, &v.t, &o.t, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_spmm: v[0,1,0,0] is -inf"));
    splat__store(v.t.data, dt, toff(&v.t, 0, 1, 0, 0), 0.25);
    memset(o.base, 0xFF, osz);
    CHECK(splat_spmm(p, &pr.t, &v.t, &o.t, NULL) == SPLAT_OK);
    splat__store(s.t.data, dt, toff(&s.t, 1, 2, 40, 6), NAN);
    memset(pr.base, 0xFF, (size_t)pr.elems * (size_t)splat__dtype_size(dt));
    CHECK(splat_softmax(p, &s.t, 1.0f, &pr.t, &l.t, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_softmax: scores[1,2,40,6] is nan"));
    {
      int64_t changed = 0;
      for (int64_t e = 0; e < pr.elems * splat__dtype_size(dt); e++) changed += pr.base[e] != 0xFF;
      CHECKF(changed == 0, "%lld probs bytes written by a failing softmax", (long long)changed);
    }
    CHECK(splat_softmax(p, &s.t, 1.0f, &s.t, NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    splat__store(s.t.data, dt, toff(&s.t, 1, 2, 40, 6), 0.0);
    CHECK(splat_softmax(p, &s.t, 1.0f, &pr.t, &l.t, NULL) == SPLAT_OK);
    /* probs: -inf in a valid entry fails spmm. */
    splat__store(pr.t.data, dt, toff(&pr.t, 0, 0, 96, 3), -INFINITY);
    CHECK(splat_spmm(p, &pr.t, &v.t, &o.t, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(msg_has("splat_spmm: probs[0,0,96,3] is -inf"));
    /* Row 96 has 4 columns: entry 4 is padding and never read. */
    splat__store(pr.t.data, dt, toff(&pr.t, 0, 0, 96, 3), 0.25);
    splat__store(pr.t.data, dt, toff(&pr.t, 0, 0, 96, 4), NAN);
    CHECK(splat_spmm(p, &pr.t, &v.t, &o.t, NULL) == SPLAT_OK);

    tens_free(&pr);
    tens_free(&q), tens_free(&k), tens_free(&v), tens_free(&s), tens_free(&o), tens_free(&l);
    splat_plan_destroy(p);
  }
  splat_plan_destroy(plan);
}

int main(void) {
  double t0 = now_s();
  test_dtype_exhaustive();
  test_dtype_midpoints();
  test_dtype_specials();
  test_parallel_for();
  double t1 = now_s();

  splat_context_options opt;
  memset(&opt, 0, sizeof opt);
  opt.backend = SPLAT_BACKEND_CPU;
  opt.num_threads = 1;
  CHECK(splat_context_create(&opt, &ctx1) == SPLAT_OK);
  opt.num_threads = 4;
  CHECK(splat_context_create(&opt, &ctx4) == SPLAT_OK);
  if (ctx1 && ctx4) {
    test_patterns();
    double t2 = now_s();
    test_nonfinite();
    printf("%d cases (%d at seq 1000): dtype %.2f s, patterns %.2f s, non-finite %.2f s\n",
           cases_run, cases_big, t1 - t0, t2 - t1, now_s() - t2);
  }
  splat_context_destroy(ctx1);
  splat_context_destroy(ctx4);
  return harness_finish();
}
