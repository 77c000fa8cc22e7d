/* test_cpu_backward.c — splat_attention_backward on the CPU backend against an
 * independent dense float64 reference: the forward and the analytic gradients written
 * here from the formulas in splat.h, over masks from the brute-force predicates of
 * support/reference_patterns.h (never the library's rows), the reference itself checked by
 * finite differences. The library's own forward supplies out and lse (the API contract);
 * its dq, dk, dv must match the reference within a bound derived below (bound_backward).
 * Cases cover closed-form and explicit masks with empty rows and unseen keys,
 * seq_q != seq_k, grouped-query heads, batch 2, head_dim 1..64, f32/f16/bf16, strided,
 * padded and negative-stride layouts, default and explicit scales, poisoned outputs,
 * 1 and 4 threads; then every refusal with its status and message. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/dtype.h"
#include "harness.h"
#include "splat.h"
#include "support/reference_patterns.h"
#include "support/test_helpers.h"
#include "support/test_tensors.h"

/* ------------------------------------------------------------ small helpers */

/* How far a forward output may be from the float64 value: one ulp of its dtype, plus
 * 1e-12 for the two float64 computations rounding across a boundary differently
 * (the same allowance as test_cpu_ops.c). */
static double fwd_err(splat_dtype dt, double x) {
  return ulp_of(dt, x) + 1e-12;
}

/* ------------------------------------------------------------ test tensors */

static size_t tens_bytes(const tens *x) {
  return (size_t)x->elems * (size_t)splat__dtype_size(x->t.dtype);
}

/* Fills the logical elements with random values of magnitude amp * [0.05, 1], either sign. */
static void tens_fill(tens *x, double amp) {
  const splat_tensor *t = &x->t;
  for (int64_t a = 0; a < t->shape[0]; a++)
    for (int64_t b = 0; b < t->shape[1]; b++)
      for (int64_t c = 0; c < t->shape[2]; c++)
        for (int64_t d = 0; d < t->shape[3]; d++) {
          const double v = amp * (0.05 + 0.95 * rng_unit());
          splat__store(t->data, t->dtype, toff(t, a, b, c, d), (rng_next() & 1) ? -v : v);
        }
}

/* The logical elements as doubles, row-major [d0, d1, d2, d3]. */
static double *tens_read(const tens *x) {
  const splat_tensor *t = &x->t;
  double *out =
      xmalloc(sizeof(double) * (size_t)(t->shape[0] * t->shape[1] * t->shape[2] * t->shape[3]));
  int64_t idx = 0;
  for (int64_t a = 0; a < t->shape[0]; a++)
    for (int64_t b = 0; b < t->shape[1]; b++)
      for (int64_t c = 0; c < t->shape[2]; c++)
        for (int64_t d = 0; d < t->shape[3]; d++)
          out[idx++] = splat__load(t->data, t->dtype, toff(t, a, b, c, d));
  return out;
}

/* Bytes of the allocation outside the logical elements that lost their poison. */
static int64_t count_gaps_written(const tens *x) {
  const splat_tensor *t = &x->t;
  const int size = splat__dtype_size(t->dtype);
  unsigned char *logical = calloc((size_t)x->elems, 1);
  for (int64_t a = 0; a < t->shape[0]; a++)
    for (int64_t b = 0; b < t->shape[1]; b++)
      for (int64_t c = 0; c < t->shape[2]; c++)
        for (int64_t d = 0; d < t->shape[3]; d++) logical[toff(t, a, b, c, d) - x->min_off] = 1;
  int64_t bad = 0;
  for (int64_t e = 0; e < x->elems; e++)
    for (int k = 0; !logical[e] && k < size; k++) bad += x->base[e * size + k] != 0xFF;
  free(logical);
  return bad;
}

/* 1 when every byte of the allocation is still the 0xFF poison. */
static int all_poison(const tens *x) {
  for (size_t e = 0; e < tens_bytes(x); e++)
    if (x->base[e] != 0xFF) return 0;
  return 1;
}

/* ------------------------------------------------------------ the float64 reference */

/* Problem sizes. Arrays are row-major doubles: q, out, dout, dq [B,H,Sq,D]; k, v, dk, dv
 * [B,Hkv,Sk,D]; lse [B,H,Sq]. The mask is uint8_t [Sq*Sk], nonzero = row i sees key j. */
typedef struct dims {
  int64_t B, H, Hkv, sq, sk, D;
} dims;

static double dot(const double *a, const double *b, int64_t n) {
  double s = 0;
  for (int64_t d = 0; d < n; d++) s += a[d] * b[d];
  return s;
}

/* Row i of head h of batch b (q-shaped arrays) and key j of its key/value head. */
static int64_t qrow(const dims *n, int64_t b, int64_t h, int64_t i) {
  return ((b * n->H + h) * n->sq + i) * n->D;
}
static int64_t krow(const dims *n, int64_t b, int64_t h, int64_t j) {
  const int64_t hk = h / (n->H / n->Hkv);
  return ((b * n->Hkv + hk) * n->sk + j) * n->D;
}

/* out = softmax(scale q k^T over the mask) v, lse = log sum exp; empty rows: 0 and -inf. */
static void ref_forward(const dims *n, const uint8_t *mask, double scale, const double *Q,
                        const double *K, const double *V, double *O, double *lse) {
  double *s = xmalloc(sizeof(double) * (size_t)n->sk);
  for (int64_t b = 0; b < n->B; b++)
    for (int64_t h = 0; h < n->H; h++)
      for (int64_t i = 0; i < n->sq; i++) {
        double *o = O + qrow(n, b, h, i), m = -INFINITY, sum = 0;
        for (int64_t j = 0; j < n->sk; j++)
          if (mask[i * n->sk + j]) {
            s[j] = scale * dot(Q + qrow(n, b, h, i), K + krow(n, b, h, j), n->D);
            m = fmax(m, s[j]);
          }
        memset(o, 0, sizeof(double) * (size_t)n->D);
        for (int64_t j = 0; j < n->sk; j++)
          if (mask[i * n->sk + j]) {
            const double w = exp(s[j] - m), *vj = V + krow(n, b, h, j);
            sum += w;
            for (int64_t d = 0; d < n->D; d++) o[d] += w * vj[d];
          }
        for (int64_t d = 0; d < n->D && sum > 0; d++) o[d] /= sum;
        lse[(b * n->H + h) * n->sq + i] = sum > 0 ? m + log(sum) : -INFINITY;
      }
  free(s);
}

/* The analytic gradients of L = sum(out * dout), from the formulas of splat.h, with the
 * float64 out and lse. skip >= 0 leaves query head `skip` of every group out of dk and dv:
 * a deliberately wrong variant (a lost grouped-query head). */
static void ref_backward(const dims *n, const uint8_t *mask, double scale, const double *Q,
                         const double *K, const double *V, const double *O, const double *lse,
                         const double *dO, int64_t skip, double *dQ, double *dK, double *dV) {
  const int64_t D = n->D, group = n->H / n->Hkv;
  memset(dQ, 0, sizeof(double) * (size_t)(n->B * n->H * n->sq * D));
  memset(dK, 0, sizeof(double) * (size_t)(n->B * n->Hkv * n->sk * D));
  memset(dV, 0, sizeof(double) * (size_t)(n->B * n->Hkv * n->sk * D));
  for (int64_t b = 0; b < n->B; b++)
    for (int64_t h = 0; h < n->H; h++)
      for (int64_t i = 0; i < n->sq; i++) {
        const double *qi = Q + qrow(n, b, h, i), *doi = dO + qrow(n, b, h, i);
        const double Di = dot(doi, O + qrow(n, b, h, i), D), li = lse[(b * n->H + h) * n->sq + i];
        double *dqi = dQ + qrow(n, b, h, i);
        for (int64_t j = 0; j < n->sk; j++) {
          if (!mask[i * n->sk + j]) continue;
          const double *kj = K + krow(n, b, h, j), *vj = V + krow(n, b, h, j);
          const double P = exp(scale * dot(qi, kj, D) - li);
          const double dS = P * (dot(doi, vj, D) - Di);
          for (int64_t d = 0; d < D; d++) dqi[d] += scale * dS * kj[d];
          if (h % group == skip) continue;
          double *dkj = dK + krow(n, b, h, j), *dvj = dV + krow(n, b, h, j);
          for (int64_t d = 0; d < D; d++) {
            dkj[d] += scale * dS * qi[d];
            dvj[d] += P * doi[d];
          }
        }
      }
}

/* How far the library's gradients may be from ref_backward's, per element (first order;
 * the factor 1.01 where it is used covers the second-order terms). The library reads the
 * same rounded q, k, v, dout as the reference, so their rounding is no error. What is:
 *  - out and lse are the forward's outputs, rounded: |out' - out| <= eo = fwd_err(dtype, out)
 *    and |lse' - lse| <= el = fwd_err(f32, lse) (asserted before the backward runs). Since
 *    P' = P exp(lse - lse'), P is off by a relative 1.01 el; D_i = <dout_i, out_i> is off by
 *    eD_i = sum_d |dout_id| eo_id.
 *  - arithmetic: the CPU backend computes in double (docs/api.md). The bound allows
 *    C_ARITH f32 unit roundoffs u on the sum of the absolute values of the terms at every
 *    level, so it does not hinge on that and stays near 1e-6 of those sums in f32:
 *      rho_ij  = 1.01 el_i + C u (scale sum_d |q_id k_jd| + |lse_i| + 1)   relative, of P_ij
 *      e(dS_ij) = P_ij (rho_ij |dP_ij - D_i| + eD_i + C u (sum_d |dout_id v_jd| + |D|_i))
 *      e(dq_id) = scale sum_j (e(dS_ij) + C u |dS_ij|) |k_jd|
 *      e(dk_jd) = scale sum_{h,i} (e(dS_ij) + C u |dS_ij|) |q_id|
 *      e(dv_jd) = sum_{h,i} P_ij (rho_ij + C u) |dout_id|
 *    with |D|_i = sum_d |dout_id out_id| and dP_ij = <dout_i, v_j>.
 *  - one final rounding to the dtype, added in finish_tol: 2 ulp (half an ulp is needed;
 *    the rest covers a result near a power of two).
 * So in f16 / bf16 the bound is the out rounding the gradients inherit plus the output
 * rounding: far tighter than twice a naive same-dtype computation (which would round
 * scores, probabilities and every partial sum to the dtype). */
enum { C_ARITH = 16 };
static const double U32 = 0x1p-24;

static void bound_backward(const dims *n, const uint8_t *mask, double scale, splat_dtype dt,
                           const double *Q, const double *K, const double *V, const double *O,
                           const double *lse, const double *dO, double *eQ, double *eK,
                           double *eV) {
  const int64_t D = n->D;
  const double cu = C_ARITH * U32;
  memset(eQ, 0, sizeof(double) * (size_t)(n->B * n->H * n->sq * D));
  memset(eK, 0, sizeof(double) * (size_t)(n->B * n->Hkv * n->sk * D));
  memset(eV, 0, sizeof(double) * (size_t)(n->B * n->Hkv * n->sk * D));
  for (int64_t b = 0; b < n->B; b++)
    for (int64_t h = 0; h < n->H; h++)
      for (int64_t i = 0; i < n->sq; i++) {
        const double *qi = Q + qrow(n, b, h, i), *doi = dO + qrow(n, b, h, i);
        const double *oi = O + qrow(n, b, h, i), li = lse[(b * n->H + h) * n->sq + i];
        double Di = 0, absD = 0, eD = 0;
        for (int64_t d = 0; d < D; d++) {
          Di += doi[d] * oi[d];
          absD += fabs(doi[d] * oi[d]);
          eD += fabs(doi[d]) * fwd_err(dt, oi[d]);
        }
        double *eqi = eQ + qrow(n, b, h, i);
        for (int64_t j = 0; j < n->sk; j++) {
          if (!mask[i * n->sk + j]) continue;
          const double *kj = K + krow(n, b, h, j), *vj = V + krow(n, b, h, j);
          double s = 0, abs_s = 0, dP = 0, abs_dP = 0;
          for (int64_t d = 0; d < D; d++) {
            s += qi[d] * kj[d];
            abs_s += fabs(qi[d] * kj[d]);
            dP += doi[d] * vj[d];
            abs_dP += fabs(doi[d] * vj[d]);
          }
          const double P = exp(scale * s - li);
          const double rho = 1.01 * fwd_err(SPLAT_F32, li) + cu * (scale * abs_s + fabs(li) + 1);
          const double e_dS = P * (rho * fabs(dP - Di) + eD + cu * (abs_dP + absD));
          const double w = e_dS + cu * P * fabs(dP - Di); /* e(dS) + C u |dS| */
          double *ekj = eK + krow(n, b, h, j), *evj = eV + krow(n, b, h, j);
          for (int64_t d = 0; d < D; d++) {
            eqi[d] += scale * w * fabs(kj[d]);
            ekj[d] += scale * w * fabs(qi[d]);
            evj[d] += P * (rho + cu) * fabs(doi[d]);
          }
        }
      }
}

/* Turns e (from bound_backward) into the tolerance in place: 2 ulp(dtype, ref) + 1.01 e,
 * or 0 (exactly zero wanted) where the element's row or key has no mask entry (live[s] = 0
 * for s the third index of [outer, S, D]). */
static void finish_tol(splat_dtype dt, const double *ref, double *e, const int64_t *live,
                       int64_t outer, int64_t S, int64_t D) {
  for (int64_t o = 0; o < outer; o++)
    for (int64_t s = 0; s < S; s++)
      for (int64_t d = 0; d < D; d++) {
        const int64_t x = (o * S + s) * D + d;
        e[x] = live[s] ? 2 * ulp_of(dt, ref[x]) + 1.01 * e[x] : 0.0;
      }
}

/* Elements with |got - ref| > tol (NaN counts as off); the first is described in `first`
 * (when not NULL) with its index in [d0, d1, S, D]. */
static int64_t count_off(const double *got, const double *ref, const double *tol,
                         const int64_t shape[4], char *first, size_t cap) {
  int64_t bad = 0;
  const int64_t total = shape[0] * shape[1] * shape[2] * shape[3];
  for (int64_t x = 0; x < total; x++) {
    if (got[x] == ref[x] || fabs(got[x] - ref[x]) <= tol[x]) continue;
    if (bad++ == 0 && first)
      snprintf(first, cap, "[%lld,%lld,%lld,%lld] got %.9g want %.9g tol %.3g",
               (long long)(x / (shape[3] * shape[2] * shape[1])),
               (long long)(x / (shape[3] * shape[2]) % shape[1]),
               (long long)(x / shape[3] % shape[2]), (long long)(x % shape[3]), got[x], ref[x],
               tol[x]);
  }
  return bad;
}

/* ------------------------------------------------------------ the reference, by finite differences
 */

static double loss(const dims *n, const uint8_t *mask, double scale, const double *Q,
                   const double *K, const double *V, const double *dO, double *O, double *lse) {
  ref_forward(n, mask, scale, Q, K, V, O, lse);
  return dot(O, dO, n->B * n->H * n->sq * n->D);
}

/* ref_backward against central differences of L = sum(out * dout) in float64, on a tiny
 * grouped-query problem with an empty row (2) and a key no row sees (4). */
static void test_reference_gradients(void) {
  static const uint8_t mask[5 * 6] = {1, 1, 0, 0, 0, 1, /**/ 0, 1, 1, 0, 0, 0, /**/
                                      0, 0, 0, 0, 0, 0, /**/ 1, 0, 1, 1, 0, 1, /**/
                                      1, 1, 1, 1, 0, 1};
  const dims n = {2, 4, 2, 5, 6, 3};
  const int64_t nq = n.B * n.H * n.sq * n.D, nk = n.B * n.Hkv * n.sk * n.D;
  const double scale = 0.7, step = 1e-5;
  double *Q = xmalloc(sizeof(double) * (size_t)nq), *dO = xmalloc(sizeof(double) * (size_t)nq);
  double *O = xmalloc(sizeof(double) * (size_t)nq), *dQ = xmalloc(sizeof(double) * (size_t)nq);
  double *K = xmalloc(sizeof(double) * (size_t)nk), *V = xmalloc(sizeof(double) * (size_t)nk);
  double *dK = xmalloc(sizeof(double) * (size_t)nk), *dV = xmalloc(sizeof(double) * (size_t)nk);
  double *lse = xmalloc(sizeof(double) * (size_t)(n.B * n.H * n.sq));
  for (int64_t x = 0; x < nq; x++) Q[x] = 2 * rng_unit() - 1, dO[x] = 2 * rng_unit() - 1;
  for (int64_t x = 0; x < nk; x++) K[x] = 2 * rng_unit() - 1, V[x] = 2 * rng_unit() - 1;
  ref_forward(&n, mask, scale, Q, K, V, O, lse);
  ref_backward(&n, mask, scale, Q, K, V, O, lse, dO, -1, dQ, dK, dV);

  double *const inputs[3] = {Q, K, V};
  const double *const grads[3] = {dQ, dK, dV};
  const int64_t sizes[3] = {nq, nk, nk};
  const char *const names[3] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; t++) {
    double worst = 0, largest = 0;
    for (int64_t x = 0; x < sizes[t]; x++) {
      const double keep = inputs[t][x];
      inputs[t][x] = keep + step;
      const double up = loss(&n, mask, scale, Q, K, V, dO, O, lse);
      inputs[t][x] = keep - step;
      const double down = loss(&n, mask, scale, Q, K, V, dO, O, lse);
      inputs[t][x] = keep;
      /* Truncation ~ step^2 = 1e-10, cancellation ~ 1e-16 |L| / step ~ 1e-10. */
      worst = fmax(worst, fabs((up - down) / (2 * step) - grads[t][x]));
      largest = fmax(largest, fabs(grads[t][x]));
    }
    CHECKF(worst < 1e-7, "reference %s off its finite differences by %.3g", names[t], worst);
    CHECKF(largest > 0.05, "reference %s is trivially small (%.3g)", names[t], largest);
  }
  /* The empty row and the unseen key have exactly zero gradients. */
  int zeros = 1;
  for (int64_t b = 0; b < n.B; b++)
    for (int64_t h = 0; h < n.H; h++)
      for (int64_t d = 0; d < n.D; d++) zeros &= dQ[qrow(&n, b, h, 2) + d] == 0.0;
  for (int64_t b = 0; b < n.B; b++)
    for (int64_t h = 0; h < n.H; h++)
      for (int64_t d = 0; d < n.D; d++)
        zeros &= dK[krow(&n, b, h, 4) + d] == 0.0 && dV[krow(&n, b, h, 4) + d] == 0.0;
  CHECK(zeros);
  free(Q), free(dO), free(O), free(dQ), free(K), free(V), free(dK), free(dV), free(lse);
}

/* ------------------------------------------------------------ the cases */

static splat_context *ctx1, *ctx4;

typedef struct bcase {
  const char *spec;    /* a spec of the reference table, or NULL for `mask` */
  const uint8_t *mask; /* explicit mask [sq * sk] when spec is NULL */
  int64_t sq, sk, B, H, Hkv, D;
  splat_dtype dt;
  int layout;        /* of q; the other tensors take the next layouts in turn */
  int default_scale; /* SPLAT_DEFAULT_SCALE (1/sqrt(D)), else 0.3 */
  double qamp;       /* magnitude of q: larger makes rows peaked and lse large */
} bcase;

static splat_plan *make_plan(splat_context *ctx, const bcase *c, unsigned ops) {
  splat_pattern *pat = NULL;
  splat_status st = c->spec ? splat_pattern_parse(c->spec, c->sq, c->sk, &pat)
                            : splat_pattern_from_mask(c->mask, c->sq, c->sk, &pat);
  CHECKF(st == SPLAT_OK, "pattern '%s': %s", c->spec ? c->spec : "mask", splat_last_error(NULL));
  if (st != SPLAT_OK) return NULL;
  splat_plan_desc desc;
  memset(&desc, 0, sizeof desc);
  desc.batch = c->B, desc.heads = c->H, desc.heads_kv = c->Hkv, desc.head_dim = c->D;
  desc.dtype = c->dt;
  desc.ops = ops;
  splat_plan *plan = NULL;
  st = splat_plan_create(ctx, pat, &desc, &plan);
  CHECKF(st == SPLAT_OK, "plan for '%s': %s", c->spec ? c->spec : "mask", splat_last_error(ctx));
  splat_pattern_destroy(pat);
  return st == SPLAT_OK ? plan : NULL;
}

/* The mask of a case as bytes, from the brute-force predicate or the explicit mask. */
static uint8_t *case_mask(const bcase *c) {
  uint8_t *m = xmalloc((size_t)(c->sq * c->sk));
  if (!c->spec) {
    memcpy(m, c->mask, (size_t)(c->sq * c->sk));
    return m;
  }
  const ref_pattern *p = splat_ref_pattern_find(c->spec);
  CHECKF(p != NULL, "'%s' is not in the reference table", c->spec);
  for (int64_t i = 0; i < c->sq; i++)
    for (int64_t j = 0; j < c->sk; j++) m[i * c->sk + j] = p && p->contains(p, i, j, c->sq, c->sk);
  return m;
}

/* Wrong variants of a reference gradient [outer, S, D] that the tolerance must reject:
 * negated, off by the scale factor (when scale != 1), each row or key taking its
 * neighbour's gradient (a mixed-up index, when S > 1). Returns how many were accepted. */
static int variants_accepted(const double *ref, const double *tol, const int64_t shape[4],
                             double scale, int scaled) {
  const int64_t total = shape[0] * shape[1] * shape[2] * shape[3], S = shape[2], D = shape[3];
  double *w = xmalloc(sizeof(double) * (size_t)total);
  int accepted = 0;
  for (int v = 0; v < 3; v++) {
    if ((v == 1 && (!scaled || scale == 1.0)) || (v == 2 && S < 2)) continue;
    for (int64_t x = 0; x < total; x++) {
      const int64_t s = x / D % S, next = x + ((s + 1) % S - s) * D;
      w[x] = v == 0 ? -ref[x] : v == 1 ? ref[x] / scale : ref[next];
    }
    accepted += count_off(w, ref, tol, shape, NULL, 0) == 0;
  }
  free(w);
  return accepted;
}

static int cases_run;

static void run_case(const bcase *c) {
  cases_run++;
  const int64_t sq = c->sq, sk = c->sk, B = c->B, H = c->H, Hkv = c->Hkv, D = c->D;
  const dims n = {B, H, Hkv, sq, sk, D};
  char label[256];
  snprintf(label, sizeof label, "%s %lldx%lld B=%lld H=%lld/%lld D=%lld %s %s%s qamp=%g",
           c->spec ? c->spec : "mask", (long long)sq, (long long)sk, (long long)B, (long long)H,
           (long long)Hkv, (long long)D, dt_name(c->dt), layout_name[c->layout],
           c->default_scale ? " default-scale" : "", c->qamp);

  uint8_t *mask = case_mask(c);
  int64_t *row_nnz = calloc((size_t)sq, sizeof(int64_t)),
          *col_nnz = calloc((size_t)sk, sizeof(int64_t));
  int64_t nnz = 0;
  for (int64_t i = 0; i < sq; i++)
    for (int64_t j = 0; j < sk; j++)
      if (mask[i * sk + j]) row_nnz[i]++, col_nnz[j]++, nnz++;

  /* ctx4's plan runs everything (ops 0); ctx1's is built for the backward alone. */
  splat_plan *plan4 = make_plan(ctx4, c, 0),
             *plan1 = make_plan(ctx1, c, SPLAT_OPS_ATTENTION_BACKWARD);
  const int L = c->layout;
  tens q = tens_make(c->dt, B, H, sq, D, L), k = tens_make(c->dt, B, Hkv, sk, D, (L + 1) % L_COUNT);
  tens v = tens_make(c->dt, B, Hkv, sk, D, (L + 2) % L_COUNT);
  tens dout = tens_make(c->dt, B, H, sq, D, (L + 3) % L_COUNT);
  tens out = tens_make(c->dt, B, H, sq, D, (L + 4) % L_COUNT);
  tens lse = tens_make(SPLAT_F32, B, H, sq, 1, L % 2 ? L_PAD : L_BSHD);
  tens_fill(&q, c->qamp), tens_fill(&k, 1), tens_fill(&v, 1), tens_fill(&dout, 1);
  double *Q = tens_read(&q), *K = tens_read(&k), *V = tens_read(&v), *dO = tens_read(&dout);
  const float scale = c->default_scale ? SPLAT_DEFAULT_SCALE : 0.3f;
  const double sc = c->default_scale ? 1.0 / sqrt((double)D) : (double)0.3f;

  const int64_t nq = B * H * sq * D, nk = B * Hkv * sk * D;
  double *O = xmalloc(sizeof(double) * (size_t)nq),
         *lse_ref = xmalloc(sizeof(double) * (size_t)(B * H * sq));
  double *dQ = xmalloc(sizeof(double) * (size_t)nq), *tQ = xmalloc(sizeof(double) * (size_t)nq);
  double *dK = xmalloc(sizeof(double) * (size_t)nk), *tK = xmalloc(sizeof(double) * (size_t)nk);
  double *dV = xmalloc(sizeof(double) * (size_t)nk), *tV = xmalloc(sizeof(double) * (size_t)nk);
  ref_forward(&n, mask, sc, Q, K, V, O, lse_ref);
  ref_backward(&n, mask, sc, Q, K, V, O, lse_ref, dO, -1, dQ, dK, dV);
  bound_backward(&n, mask, sc, c->dt, Q, K, V, O, lse_ref, dO, tQ, tK, tV);
  finish_tol(c->dt, dQ, tQ, row_nnz, B * H, sq, D);
  finish_tol(c->dt, dK, tK, col_nnz, B * Hkv, sk, D);
  finish_tol(c->dt, dV, tV, col_nnz, B * Hkv, sk, D);
  const int64_t qshape[4] = {B, H, sq, D}, kshape[4] = {B, Hkv, sk, D};

  /* The library's forward gives out and lse; the bound assumes they are within a forward
   * error of the float64 ones. */
  splat_status st = plan4 ? splat_attention(plan4, &q.t, &k.t, &v.t, scale, &out.t, &lse.t, NULL)
                          : SPLAT_ERR_INTERNAL;
  CHECKF(st == SPLAT_OK, "%s: forward: %s", label, splat_last_error(ctx4));
  if (st == SPLAT_OK) {
    double *Ol = tens_read(&out), *Ll = tens_read(&lse);
    int64_t off = 0;
    for (int64_t x = 0; x < nq; x++) off += !(fabs(Ol[x] - O[x]) <= fwd_err(c->dt, O[x]));
    for (int64_t x = 0; x < B * H * sq; x++)
      off += !(Ll[x] == lse_ref[x] || fabs(Ll[x] - lse_ref[x]) <= fwd_err(SPLAT_F32, lse_ref[x]));
    CHECKF(off == 0, "%s: %lld forward outputs beyond the bound's assumption", label,
           (long long)off);
    free(Ol), free(Ll);

    /* Inputs as bytes, to see that the backward leaves them alone. */
    const tens *ins[6] = {&q, &k, &v, &out, &lse, &dout};
    unsigned char *saved[6];
    for (int t = 0; t < 6; t++) {
      saved[t] = xmalloc(tens_bytes(ins[t]));
      memcpy(saved[t], ins[t]->base, tens_bytes(ins[t]));
    }
    splat_plan *plans[2] = {plan4, plan1};
    for (int p = 0; p < 2; p++) {
      if (!plans[p]) continue;
      tens dq = tens_make(c->dt, B, H, sq, D, (L + 1) % L_COUNT);
      tens dk = tens_make(c->dt, B, Hkv, sk, D, (L + 3) % L_COUNT);
      tens dv = tens_make(c->dt, B, Hkv, sk, D, (L + 4) % L_COUNT);
      st = splat_attention_backward(plans[p], &q.t, &k.t, &v.t, &out.t, &lse.t, &dout.t, scale,
                                    &dq.t, &dk.t, &dv.t, NULL);
      CHECKF(st == SPLAT_OK, "%s: backward (%d threads): %s", label, p ? 1 : 4,
             splat_last_error(p ? ctx1 : ctx4));
      if (st == SPLAT_OK) {
        const tens *gots[3] = {&dq, &dk, &dv};
        const double *refs[3] = {dQ, dK, dV}, *tols[3] = {tQ, tK, tV};
        const char *names[3] = {"dq", "dk", "dv"};
        for (int g = 0; g < 3; g++) {
          double *got = tens_read(gots[g]);
          char first[200] = "";
          const int64_t bad =
              count_off(got, refs[g], tols[g], g ? kshape : qshape, first, sizeof first);
          CHECKF(bad == 0, "%s (%d threads): %s: %lld off, first %s%s", label, p ? 1 : 4, names[g],
                 (long long)bad, names[g], first);
          CHECKF(count_gaps_written(gots[g]) == 0, "%s: %s written outside its elements", label,
                 names[g]);
          free(got);
        }
      }
      tens_free(&dq), tens_free(&dk), tens_free(&dv);
    }
    for (int t = 0; t < 6; t++) {
      CHECKF(memcmp(saved[t], ins[t]->base, tens_bytes(ins[t])) == 0, "%s: input %d changed", label,
             t);
      free(saved[t]);
    }
  }

  /* The bound is tight enough to reject wrong gradients: a sign, a scale factor, a
   * mixed-up index, a lost grouped-query head in dk / dv. */
  if (nnz > 0) {
    const double *refs[3] = {dQ, dK, dV}, *tols[3] = {tQ, tK, tV};
    const char *names[3] = {"dq", "dk", "dv"};
    for (int g = 0; g < 3; g++) {
      CHECKF(variants_accepted(refs[g], tols[g], g ? kshape : qshape, sc, g < 2) == 0,
             "%s: the %s tolerance accepts a wrong variant", label, names[g]);
      double max_ref = 0, max_tol = 0;
      for (int64_t x = 0; x < (g ? nk : nq); x++)
        max_ref = fmax(max_ref, fabs(refs[g][x])), max_tol = fmax(max_tol, tols[g][x]);
      /* f32: about 1e-6 of the sums of |terms| (bound_backward), which cancellation makes
       * up to ~100 times the gradients here: still far below them. */
      if (c->dt == SPLAT_F32)
        CHECKF(max_tol < 1e-3 * max_ref, "%s: %s tolerance %.3g vs gradients up to %.3g", label,
               names[g], max_tol, max_ref);
    }
    if (H > Hkv) {
      double *wQ = xmalloc(sizeof(double) * (size_t)nq), *wK = xmalloc(sizeof(double) * (size_t)nk);
      double *wV = xmalloc(sizeof(double) * (size_t)nk);
      ref_backward(&n, mask, sc, Q, K, V, O, lse_ref, dO, H / Hkv - 1, wQ, wK, wV);
      CHECKF(
          count_off(wK, dK, tK, kshape, NULL, 0) > 0 && count_off(wV, dV, tV, kshape, NULL, 0) > 0,
          "%s: the tolerance accepts dk / dv without a grouped-query head", label);
      free(wQ), free(wK), free(wV);
    }
  }

  free(Q), free(K), free(V), free(dO), free(O), free(lse_ref);
  free(dQ), free(tQ), free(dK), free(tK), free(dV), free(tV);
  tens_free(&q), tens_free(&k), tens_free(&v), tens_free(&dout), tens_free(&out), tens_free(&lse);
  splat_plan_destroy(plan4), splat_plan_destroy(plan1);
  free(mask), free(row_nnz), free(col_nnz);
}

/* A case of the given mask whose dtype, head dim, heads, layout and scale rotate with n. */
static bcase config(int n, const char *spec, const uint8_t *mask, int64_t sq, int64_t sk) {
  static const splat_dtype dts[] = {SPLAT_F32, SPLAT_F16, SPLAT_BF16};
  static const int64_t head_dims[] = {64, 33, 8, 1};
  static const int64_t heads[][2] = {{4, 2}, {4, 1}, {2, 2}};
  const bcase c = {.spec = spec,
                   .mask = mask,
                   .sq = sq,
                   .sk = sk,
                   .B = 2,
                   .H = heads[n % 3][0],
                   .Hkv = heads[n % 3][1],
                   .D = head_dims[n % 4],
                   .dt = dts[(n / 2) % 3],
                   .layout = n % L_COUNT,
                   .default_scale = (n / 3) % 2,
                   .qamp = n % 7 == 6 ? 4.0 : 1.0};
  return c;
}

/* A random mask of the given density, some rows and keys emptied. */
static uint8_t *random_mask(int64_t sq, int64_t sk, double density, int empty_rows,
                            int empty_cols) {
  uint8_t *m = xmalloc((size_t)(sq * sk));
  for (int64_t e = 0; e < sq * sk; e++) m[e] = rng_unit() < density;
  for (int r = 0; r < empty_rows; r++)
    memset(m + (int64_t)(rng_next() % (uint64_t)sq) * sk, 0, (size_t)sk);
  for (int r = 0; r < empty_cols; r++) {
    const int64_t j = (int64_t)(rng_next() % (uint64_t)sk);
    for (int64_t i = 0; i < sq; i++) m[i * sk + j] = 0;
  }
  return m;
}

static void test_cases(void) {
  /* Specs of the reference table: "window(3,-1)" leaves row 0 empty, "window(-2,4)" the
   * last two rows and keys 0 and 1, "window(-1)" everything. */
  static const char *const square[] = {"window(3)",
                                       "dilated(3,2)",
                                       "strided(3)",
                                       "blocked(37)",
                                       "causal",
                                       "global(5) | window(2) | strided(10)",
                                       "longformer(3,2)",
                                       "bigbird(4,1,1,2,42)",
                                       "window(3,-1)",
                                       "window(-2,4)",
                                       "strided(5) | window(1)",
                                       "causal & strided(7) | blocked(12) & dilated(3,2)",
                                       "fixed(4,1)",
                                       "dense",
                                       "window(-1)"};
  int n = 0;
  for (size_t s = 0; s < sizeof square / sizeof *square; s++) {
    bcase c = config(n++, square[s], NULL, 97, 97);
    run_case(&c);
  }
  /* Every dtype and head dim on a window with empty rows and unseen keys. */
  for (int m = 0; m < 12; m++) {
    bcase c = config(m, "window(-2,4)", NULL, 29, 29);
    run_case(&c);
  }
  /* seq_q != seq_k: keys past a window's reach see no row; causal rows past seq_k all see. */
  static const char *const rect[] = {"window(3)", "causal", "window(-2,4)", "bigbird(4,1,1,2,42)"};
  for (size_t s = 0; s < sizeof rect / sizeof *rect; s++)
    for (int t = 0; t < 2; t++) {
      bcase c = config(n++, rect[s], NULL, t ? 53 : 37, t ? 37 : 53);
      run_case(&c);
    }
  /* Longer sequences, sparse. */
  static const char *const longer[] = {"window(3)", "bigbird(4,1,1,2,42)",
                                       "global(5) | window(2) | strided(10)"};
  for (size_t s = 0; s < sizeof longer / sizeof *longer; s++) {
    bcase c = config(n++, longer[s], NULL, 1000, 1000);
    run_case(&c);
  }
  /* Explicit masks with empty rows and keys. */
  const int64_t shapes[][2] = {{45, 50}, {53, 37}, {40, 40}};
  for (int t = 0; t < 3; t++) {
    uint8_t *m = random_mask(shapes[t][0], shapes[t][1], 0.2 + 0.3 * t, 4, 3);
    bcase c = config(n++, NULL, m, shapes[t][0], shapes[t][1]);
    run_case(&c);
    free(m);
  }
}

/* ------------------------------------------------------------ refusals */

/* 1 when `word` occurs in `msg` with no letter, digit or '_' right before or after it. */
static int has_word(const char *msg, const char *word) {
  const size_t len = strlen(word);
  for (const char *p = strstr(msg, word); p; p = strstr(p + 1, word)) {
    const char before = p == msg ? ' ' : p[-1], after = p[len];
    const int id_before = before == '_' || (before >= '0' && before <= '9') ||
                          ((before | 32) >= 'a' && (before | 32) <= 'z');
    const int id_after = after == '_' || (after >= '0' && after <= '9') ||
                         ((after | 32) >= 'a' && (after | 32) <= 'z');
    if (!id_before && !id_after) return 1;
  }
  return 0;
}

/* The call was refused as an invalid argument, the message of ctx (NULL: the thread's)
 * naming `word` (a whole word) and holding `text` (may be NULL). */
static void expect_refused(splat_status st, const splat_context *ctx, const char *what,
                           const char *word, const char *text) {
  const char *msg = splat_last_error(ctx);
  CHECKF(st == SPLAT_ERR_INVALID_ARGUMENT, "%s: status %s", what, splat_status_name(st));
  CHECKF(has_word(msg, word) && (!text || strstr(msg, text)),
         "%s: message '%s' should name '%s'%s%s", what, msg, word, text ? " and say " : "",
         text ? text : "");
}

/* The backward with a[0..8] = q, k, v, out, lse, dout, dq, dk, dv. */
static splat_status backward(splat_plan *plan, const splat_tensor *const a[9], float scale) {
  return splat_attention_backward(plan, a[0], a[1], a[2], a[3], a[4], a[5], scale, a[6], a[7], a[8],
                                  NULL);
}

static void test_errors(void) {
  static const char *const names[9] = {"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"};
  const bcase c = {"window(3)", NULL, 16, 16, 2, 2, 1, 8, SPLAT_F16, L_CONTIG, 0, 1.0};
  splat_plan *plan = make_plan(ctx4, &c, 0), *fwd_only = make_plan(ctx4, &c, SPLAT_OPS_ATTENTION);
  if (!plan || !fwd_only) {
    splat_plan_destroy(plan), splat_plan_destroy(fwd_only);
    return;
  }
  tens t[9];
  for (int x = 0; x < 9; x++) {
    const int kv = x == 1 || x == 2 || x == 7 || x == 8;
    t[x] = tens_make(x == 4 ? SPLAT_F32 : SPLAT_F16, 2, kv ? 1 : 2, 16, x == 4 ? 1 : 8, L_CONTIG);
  }
  tens_fill(&t[0], 1), tens_fill(&t[1], 1), tens_fill(&t[2], 1), tens_fill(&t[5], 1);
  CHECK(splat_attention(plan, &t[0].t, &t[1].t, &t[2].t, 0.3f, &t[3].t, &t[4].t, NULL) == SPLAT_OK);
  const splat_tensor *args[9], *a[9];
  for (int x = 0; x < 9; x++) args[x] = &t[x].t;
  CHECKF(backward(plan, args, 0.3f) == SPLAT_OK, "valid call: %s", splat_last_error(ctx4));
  char what[96];

  for (int x = 0; x < 9; x++) {
    splat_tensor bad = t[x].t;
    memcpy(a, args, sizeof a);
    a[x] = NULL;
    snprintf(what, sizeof what, "%s NULL", names[x]);
    expect_refused(backward(plan, a, 0.3f), ctx4, what, names[x], "NULL");
    a[x] = &bad;
    bad.shape[x == 4 ? 3 : 2]++;
    snprintf(what, sizeof what, "%s of a wrong shape", names[x]);
    expect_refused(backward(plan, a, 0.3f), ctx4, what, names[x], "shape");
    bad = t[x].t;
    bad.dtype = x == 4 ? SPLAT_F16 : SPLAT_F32; /* lse is f32 whatever the plan's dtype */
    snprintf(what, sizeof what, "%s of dtype %s", names[x], dt_name(bad.dtype));
    expect_refused(backward(plan, a, 0.3f), ctx4, what, names[x], "dtype");
  }
  expect_refused(splat_attention_backward(NULL, args[0], args[1], args[2], args[3], args[4],
                                          args[5], 0.3f, args[6], args[7], args[8], NULL),
                 NULL, "plan NULL", "plan", NULL);
  expect_refused(backward(fwd_only, args, 0.3f), ctx4, "plan without the op",
                 "SPLAT_OPS_ATTENTION_BACKWARD", NULL);
  expect_refused(backward(plan, args, NAN), ctx4, "scale nan", "scale", NULL);

  /* Outputs overlapping inputs or each other: aliasing, partial overlap, self-overlap. */
  const struct { int out, in; } alias[] = {{6, 0}, {6, 5}, {6, 3}, {7, 1}, {8, 2}, {8, 7}, {7, 6}};
  for (size_t s = 0; s < sizeof alias / sizeof *alias; s++) {
    splat_tensor bad = t[alias[s].out].t;
    bad.data = t[alias[s].in].t.data;
    memcpy(a, args, sizeof a);
    a[alias[s].out] = &bad;
    snprintf(what, sizeof what, "%s over %s", names[alias[s].out], names[alias[s].in]);
    expect_refused(backward(plan, a, 0.3f), ctx4, what, names[alias[s].out], "overlap");
    CHECKF(has_word(splat_last_error(ctx4), names[alias[s].in]), "%s: '%s' names no %s", what,
           splat_last_error(ctx4), names[alias[s].in]);
  }
  {
    /* Partial overlaps within one buffer: dk five elements past k; an lse inside dq. */
    uint16_t *buf = xmalloc(sizeof(uint16_t) * 2 * 2 * 16 * 8);
    memcpy(buf, t[1].t.data, sizeof(uint16_t) * 2 * 16 * 8);
    splat_tensor kk = t[1].t, dk = t[7].t;
    kk.data = buf, dk.data = buf + 5;
    memcpy(a, args, sizeof a);
    a[1] = &kk, a[7] = &dk;
    expect_refused(backward(plan, a, 0.3f), ctx4, "dk partly over k", "dk", "overlap");
    CHECK(has_word(splat_last_error(ctx4), "k"));
    splat_tensor lse = t[4].t, dq = t[6].t;
    lse.data = buf + 256, dq.data = buf;
    memcpy(lse.data, t[4].t.data, sizeof(float) * 2 * 2 * 16);
    memcpy(a, args, sizeof a);
    a[4] = &lse, a[6] = &dq;
    expect_refused(backward(plan, a, 0.3f), ctx4, "dq over lse", "dq", "overlap");
    CHECK(has_word(splat_last_error(ctx4), "lse"));
    free(buf);
    dq = t[6].t;
    dq.strides[2] = 0;
    memcpy(a, args, sizeof a);
    a[6] = &dq;
    expect_refused(backward(plan, a, 0.3f), ctx4, "dq with overlapping rows", "dq", "overlap");
  }

  /* Non-finite inputs are named with their index and nothing is written. */
  const struct {
    int in;
    int64_t at[4];
    double value;
    const char *text;
  } nonfinite[] = {{5, {1, 1, 9, 2}, NAN, "dout[1,1,9,2]"},
                   {0, {0, 1, 3, 7}, INFINITY, "q[0,1,3,7]"},
                   {1, {1, 0, 15, 0}, -INFINITY, "k[1,0,15,0]"},
                   {2, {0, 0, 4, 5}, NAN, "v[0,0,4,5]"},
                   {3, {1, 0, 0, 1}, INFINITY, "out[1,0,0,1]"}};
  const char *const kinds[3] = {"nan", "inf", "-inf"};
  for (size_t s = 0; s < sizeof nonfinite / sizeof *nonfinite; s++) {
    const splat_tensor *x = &t[nonfinite[s].in].t;
    const int64_t *at = nonfinite[s].at, off = toff(x, at[0], at[1], at[2], at[3]);
    const double keep = splat__load(x->data, x->dtype, off);
    splat__store(x->data, x->dtype, off, nonfinite[s].value);
    for (int o = 6; o < 9; o++) memset(t[o].base, 0xFF, tens_bytes(&t[o]));
    snprintf(what, sizeof what, "%s in %s",
             kinds[isnan(nonfinite[s].value) ? 0
                   : nonfinite[s].value > 0  ? 1
                                             : 2],
             names[nonfinite[s].in]);
    expect_refused(backward(plan, args, 0.3f), ctx4, what, nonfinite[s].text,
                   kinds[isnan(nonfinite[s].value) ? 0
                         : nonfinite[s].value > 0  ? 1
                                                   : 2]);
    CHECKF(all_poison(&t[6]) && all_poison(&t[7]) && all_poison(&t[8]), "%s: outputs written",
           what);
    splat__store(x->data, x->dtype, off, keep);
  }
  /* lse: NaN, +inf, or -inf on a row that sees keys (every row of window(3)). */
  const double lse_bad[3] = {NAN, INFINITY, -INFINITY};
  for (int s = 0; s < 3; s++) {
    float *l = (float *)t[4].t.data + toff(&t[4].t, 1, 0, 5, 0);
    const float keep = *l;
    *l = (float)lse_bad[s];
    for (int o = 6; o < 9; o++) memset(t[o].base, 0xFF, tens_bytes(&t[o]));
    snprintf(what, sizeof what, "lse %s on a row with keys", kinds[s]);
    const splat_status st = backward(plan, args, 0.3f);
    expect_refused(st, ctx4, what, "lse", NULL);
    const char *msg = splat_last_error(ctx4);
    CHECKF(strstr(msg, "lse[1,0,5,0]") || strstr(msg, "row 5"), "%s: '%s' names no row 5", what,
           msg);
    CHECKF(all_poison(&t[6]) && all_poison(&t[7]) && all_poison(&t[8]), "%s: outputs written",
           what);
    *l = keep;
  }
  CHECKF(backward(plan, args, 0.3f) == SPLAT_OK, "valid call after the refusals: %s",
         splat_last_error(ctx4));

  for (int x = 0; x < 9; x++) tens_free(&t[x]);
  splat_plan_destroy(plan), splat_plan_destroy(fwd_only);
}

int main(void) {
  rng_seed(0x5DEECE66Dull);
  const double t0 = now_s();
  test_reference_gradients();
  const double t1 = now_s();
  splat_context_options opt = {SPLAT_BACKEND_CPU, 0, 1};
  CHECK(splat_context_create(&opt, &ctx1) == SPLAT_OK);
  opt.num_threads = 4;
  CHECK(splat_context_create(&opt, &ctx4) == SPLAT_OK);
  if (ctx1 && ctx4) {
    test_cases();
    const double t2 = now_s();
    test_errors();
    printf("%d cases: finite differences %.2f s, cases %.2f s, refusals %.2f s\n", cases_run,
           t1 - t0, t2 - t1, now_s() - t2);
  }
  splat_context_destroy(ctx1);
  splat_context_destroy(ctx4);
  return harness_finish();
}
