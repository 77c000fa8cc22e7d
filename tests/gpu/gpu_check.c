/* gpu_check.c — the GPU correctness check of the CUDA backend (not part of ctest; run on
 * a machine with an NVIDIA GPU): for every reference spec of tests/support at awkward
 * sizes, head_dims and dtypes (GQA on), each op on CUDA is compared with a float64
 * masked reference computed on the host from the same rounded inputs. Outputs are
 * poisoned with NaN bytes first; padding entries of value tensors must stay poisoned (the
 * R-SDDMM may set those sharing a row's last 32-byte sector to +0);
 * value-input padding is NaN too (never read). Tolerance: at most twice the error of a
 * naive same-dtype host implementation (fp32 accumulation, inputs and outputs rounded
 * to the dtype; for attention the scores and probabilities too, as softmax(Q K^T) V in
 * that dtype computes them) against the same reference, plus 2^-20 x max|reference| (a floor for
 * the case where the naive result happens to be exact). NaN never passes. Shapes: batch
 * 1 with 2 query heads over 1 KV head everywhere, plus batch 2 with 4 over 2 KV heads in
 * strided [B,S,H,D] storage at 333x1000. The host reference runs on every core
 * (pthreads over rows); a warm-up creates one plan per (dtype, head_dim) in parallel so
 * the cold NVRTC compiles overlap, and the summary prints plan-creation times.
 * Outside --quick, plans of the fused attention alone at 4096 with batch 2 and 16 heads too,
 * where a plan may take 192-row query tiles (attention_plans; --attention-plans: those only).
 * Usage: splat_gpu_check [--quick | --attention-plans] [--device N] [--filter SUBSTR]
 *                        [--timeout S] [--dims LIST] [--dtype T] [--plans-seq N]
 * --quick: seven specs (window, dilated, longformer, bigbird, a band, causal, strided|window) at
 * 33, 40x70 and 700, head_dim 64, bf16 (the subset the sanitizers run). --dims: up to four
 * comma-separated head_dims run at every size instead of 64 and 128 everywhere and 40 and 36
 * at 97 (e.g. --dims 256,56 for the sizes the full check leaves out). --dtype: only f32, f16
 * or bf16 (the full check runs all three; --quick bf16). --plans-seq: the attention-only
 * plans at N rows instead of 4096 (16384: head_dim 128's 192-row tiles need 16 rounds). Prints one
 * row per case and "N passed, N failed"; exit status 1 on any failure, 2 when no CUDA device is
 * usable, 3 on timeout.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/dtype.h"
#include "core/timer.h"
#include "cuda/driver.h"
#include "splat.h"
#include "support/reference_patterns.h"

/* The driver (the runtime's table) and the device whose primary context the check's own
 * buffers live in (the context splat uses). */
static const splat__cuda_api_table *cu;
static splat__cuda_device gpu;

static int passed, failed;

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "\nTIMEOUT: gpu_check exceeded its time limit\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(3);
}

static int cuda_setup(int device) {
  return splat__cuda_api(&cu) == SPLAT_OK && splat__cuda_device_open(device, &gpu) == SPLAT_OK &&
         splat__cuda_push(&gpu) == SPLAT_OK;
}

static int sync_device(void) {
  return cu->cuStreamSynchronize(NULL) == CUDA_SUCCESS;
}

/* ------------------------------------------------------------ parallel for
 * fn(ctx, begin, end, tid) over [0, n) in chunks, on nthreads threads (tid < nthreads). */
typedef void (*par_fn)(void *ctx, int64_t begin, int64_t end, int tid);
enum { MAX_THREADS = 64 };
static int nthreads = 1;

typedef struct par_job {
  par_fn fn;
  void *ctx;
  int64_t n, chunk, next;
  pthread_mutex_t lock;
} par_job;

typedef struct par_arg {
  par_job *job;
  int tid;
} par_arg;

static void *par_worker(void *p) {
  par_arg *a = p;
  par_job *j = a->job;
  for (;;) {
    pthread_mutex_lock(&j->lock);
    const int64_t b = j->next;
    j->next += j->chunk;
    pthread_mutex_unlock(&j->lock);
    if (b >= j->n) return NULL;
    j->fn(j->ctx, b, b + j->chunk < j->n ? b + j->chunk : j->n, a->tid);
  }
}

static void par_for(int64_t n, int64_t chunk, par_fn fn, void *ctx) {
  par_job j = {fn, ctx, n, chunk > 0 ? chunk : 1, 0, PTHREAD_MUTEX_INITIALIZER};
  pthread_t th[MAX_THREADS];
  par_arg args[MAX_THREADS];
  int started = 0;
  for (int t = 1; t < nthreads && (int64_t)t * j.chunk < n; t++) {
    args[t].job = &j, args[t].tid = t;
    if (pthread_create(&th[t], NULL, par_worker, &args[t]) != 0) break;
    started = t;
  }
  args[0].job = &j, args[0].tid = 0;
  par_worker(&args[0]);
  for (int t = 1; t <= started; t++) pthread_join(th[t], NULL);
}

/* ------------------------------------------------------------ host data */

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* [0, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}
static double round_dt(double v, splat_dtype dt) {
  if (dt == SPLAT_F32) return (double)(float)v;
  if (dt == SPLAT_F16) return splat__f16_to_f32(splat__f32_to_f16((float)v));
  return splat__bf16_to_f32(splat__f32_to_bf16((float)v));
}
static int esize(splat_dtype dt) {
  return dt == SPLAT_F32 ? 4 : 2;
}
static void put(void *buf, splat_dtype dt, int64_t i, double v) {
  if (dt == SPLAT_F32)
    ((float *)buf)[i] = (float)v;
  else if (dt == SPLAT_F16)
    ((uint16_t *)buf)[i] = splat__f32_to_f16((float)v);
  else
    ((uint16_t *)buf)[i] = splat__f32_to_bf16((float)v);
}
static double get(const void *buf, splat_dtype dt, int64_t i) {
  if (dt == SPLAT_F32) return ((const float *)buf)[i];
  if (dt == SPLAT_F16) return splat__f16_to_f32(((const uint16_t *)buf)[i]);
  return splat__bf16_to_f32(((const uint16_t *)buf)[i]);
}
static int poisoned(const void *buf, splat_dtype dt, int64_t i) {
  const unsigned char *p = (const unsigned char *)buf + i * esize(dt);
  for (int b = 0; b < esize(dt); b++) {
    if (p[b] != 0xFF) return 0;
  }
  return 1;
}

/* A padding entry i of sddmm's scores (buffers start 32-byte aligned): poisoned, or 0 where it
 * shares the 32-byte sector of its row's last entry `last` (-1: an empty row), which the
 * tile kernels complete with zeros. */
static int pad_ok(const void *buf, splat_dtype dt, int64_t i, int64_t last) {
  if (poisoned(buf, dt, i)) return 1;
  return last >= 0 && i * esize(dt) / 32 == last * esize(dt) / 32 && get(buf, dt, i) == 0.0 &&
         !signbit(get(buf, dt, i));
}

/* The mask from the independent reference predicate, as CSR. */
typedef struct mask {
  int64_t sq, sk, W, nnz;
  int64_t *rowp;
  int32_t *cols;
} mask;

typedef struct mask_job {
  const ref_pattern *rp;
  mask *m;
  int fill; /* 0: count rows into rowp[i + 1]; 1: write cols */
} mask_job;

static void mask_rows(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  mask_job *j = ctx;
  mask *m = j->m;
  for (int64_t i = begin; i < end; i++) {
    int64_t n = 0, at = j->fill ? m->rowp[i] : 0;
    for (int64_t c = 0; c < m->sk; c++) {
      if (!j->rp->contains(j->rp, i, c, m->sq, m->sk)) continue;
      if (j->fill) m->cols[at + n] = (int32_t)c;
      n++;
    }
    if (!j->fill) m->rowp[i + 1] = n;
  }
}

/* Two parallel passes over the rows: count, then fill. */
static int mask_build(const ref_pattern *rp, int64_t sq, int64_t sk, mask *m) {
  m->sq = sq, m->sk = sk, m->W = 1, m->nnz = 0, m->cols = NULL;
  m->rowp = malloc((size_t)(sq + 1) * sizeof *m->rowp);
  if (!m->rowp) return 0;
  m->rowp[0] = 0;
  mask_job j = {rp, m, 0};
  par_for(sq, 32, mask_rows, &j);
  for (int64_t i = 0; i < sq; i++) {
    if (m->rowp[i + 1] > m->W) m->W = m->rowp[i + 1];
    m->rowp[i + 1] += m->rowp[i];
  }
  m->nnz = m->rowp[sq];
  m->cols = malloc((size_t)(m->nnz ? m->nnz : 1) * sizeof *m->cols);
  if (!m->cols) return 0;
  j.fill = 1;
  par_for(sq, 32, mask_rows, &j);
  return 1;
}

/* A device buffer with its host image. */
typedef struct buf {
  CUdeviceptr d;
  void *h;
  size_t bytes;
} buf;
static int buf_new(buf *b, size_t bytes) {
  b->bytes = bytes ? bytes : 4;
  b->h = malloc(b->bytes);
  return b->h && cu->cuMemAlloc(&b->d, b->bytes) == CUDA_SUCCESS;
}
static void buf_free(buf *b) {
  if (b->d) cu->cuMemFree(b->d);
  free(b->h);
  memset(b, 0, sizeof *b);
}
static int up(buf *b) {
  return cu->cuMemcpyHtoD(b->d, b->h, b->bytes) == CUDA_SUCCESS;
}
static int down(buf *b) {
  return cu->cuMemcpyDtoH(b->h, b->d, b->bytes) == CUDA_SUCCESS;
}
static void poison(buf *b) {
  memset(b->h, 0xFF, b->bytes);
}

/* ------------------------------------------------------------ one case */

typedef struct result {
  double err, bound;
  int nan, pad_bad, status_bad;
} result;

/* The shape of a case: batch, heads, KV heads, and the layout of Q, K, V, O. */
typedef struct shape {
  int64_t B, H, HK;
  int bshd; /* 1: [B,S,H,D] storage (strided views), 0: contiguous [B,H,S,D] */
} shape;

static void row(const char *spec, const shape *c, int64_t sq, int64_t sk, int dim, splat_dtype dt,
                const char *op, const result *r, const char *note) {
  const int ok = !r->nan && !r->pad_bad && !r->status_bad && r->err <= r->bound;
  ok ? passed++ : failed++;
  char sz[32], cfg[32] = "";
  snprintf(sz, sizeof sz, sq == sk ? "%lld" : "%lldx%lld", (long long)sq, (long long)sk);
  if (c->B != 1 || c->H != 2 || c->HK != 1 || c->bshd) {
    snprintf(cfg, sizeof cfg, "b%lldh%lldk%lld%s", (long long)c->B, (long long)c->H,
             (long long)c->HK, c->bshd ? "-bshd" : "");
  }
  printf("%-30s %-9s %-13s %4d %-5s %-9s %10.3e %10.3e %s%s%s\n", spec, sz, cfg[0] ? cfg : "-", dim,
         splat_dtype_name(dt), op, r->err, r->bound, ok ? "PASS" : "FAIL",
         note && *note ? "  " : "", note ? note : "");
  fflush(stdout);
}

/* What one thread gathered for up to two results (an op and its lse). */
typedef struct acc {
  result r[2];
  double maxref[2], nerr[2];
} acc;

static void accumulate(acc *a, int w, double got, double ref, double naive) {
  result *r = &a->r[w];
  if (isnan(got) || isinf(got) != isinf(ref)) r->nan = 1;
  const double e = fabs(got - ref);
  if (e > r->err || isnan(e)) r->err = isnan(e) ? INFINITY : (e > r->err ? e : r->err);
  const double ne = fabs(naive - ref);
  if (ne > a->nerr[w]) a->nerr[w] = ne;
  if (fabs(ref) > a->maxref[w]) a->maxref[w] = fabs(ref);
}

/* Folds the per-thread accumulators into r[w] and sets its bound. */
static void finish(acc *per_thread, int w, result *r) {
  double maxref = 0, nerr = 0;
  for (int t = 0; t < nthreads; t++) {
    const acc *a = &per_thread[t];
    r->err = a->r[w].err > r->err || isnan(a->r[w].err) ? a->r[w].err : r->err;
    r->nan |= a->r[w].nan;
    r->pad_bad |= a->r[w].pad_bad;
    maxref = a->maxref[w] > maxref ? a->maxref[w] : maxref;
    nerr = a->nerr[w] > nerr ? a->nerr[w] : nerr;
  }
  r->bound = 2.0 * nerr + ldexp(maxref, -20);
}

/* Everything the reference of one case reads. Host images are in the tensors' storage
 * layout; qd, kd, vd are logical [B,H,S,D] doubles, vind [B,H,sq,W]. */
typedef struct check {
  const mask *m;
  shape c;
  int64_t sq, sk, D, W;
  splat_dtype dt;
  double scale, sc;
  const double *qd, *kd, *vd, *vind;
  const void *vout, *o; /* host images of the value output and O */
  const float *lse;
  acc *per_thread;
  int scratch; /* doubles per thread of scratch needed */
  double **scr;
} check;

/* Storage offset of element (b, h, s, d) of a [B,H,S,D] tensor of n_h heads. */
static int64_t at(const check *k, int64_t b, int64_t h, int64_t nh, int64_t S, int64_t s,
                  int64_t d) {
  return k->c.bshd ? ((b * S + s) * nh + h) * k->D + d : ((b * nh + h) * S + s) * k->D + d;
}

static int64_t kv_head(const check *k, int64_t bh) { /* index into kd/vd's B*HK heads */
  return (bh % k->c.H) / (k->c.H / k->c.HK) + (bh / k->c.H) * k->c.HK;
}

static void ref_sddmm(void *ctx, int64_t begin, int64_t end, int tid) {
  const check *k = ctx;
  acc *a = &k->per_thread[tid];
  const mask *m = k->m;
  for (int64_t it = begin; it < end; it++) {
    const int64_t bh = it / k->sq, i = it % k->sq, hk = kv_head(k, bh);
    const double *qi = k->qd + (bh * k->sq + i) * k->D;
    const int64_t n = m->rowp[i + 1] - m->rowp[i];
    for (int64_t e = 0; e < k->W; e++) {
      const int64_t idx = (bh * k->sq + i) * k->W + e;
      if (e >= n) {
        if (!pad_ok(k->vout, k->dt, idx, n > 0 ? idx - (e - n) - 1 : -1)) a->r[0].pad_bad = 1;
        continue;
      }
      const double *kj = k->kd + (hk * k->sk + m->cols[m->rowp[i] + e]) * k->D;
      double ref = 0;
      float nf = 0;
      for (int64_t d = 0; d < k->D; d++) ref += qi[d] * kj[d], nf += (float)qi[d] * (float)kj[d];
      ref *= k->scale;
      accumulate(a, 0, get(k->vout, k->dt, idx), ref, round_dt(nf * (float)k->scale, k->dt));
    }
  }
}

static void ref_softmax(void *ctx, int64_t begin, int64_t end, int tid) {
  const check *k = ctx;
  acc *a = &k->per_thread[tid];
  const mask *m = k->m;
  const double sc = k->sc;
  for (int64_t it = begin; it < end; it++) {
    const int64_t bh = it / k->sq, i = it % k->sq;
    const int64_t n = m->rowp[i + 1] - m->rowp[i], base = (bh * k->sq + i) * k->W;
    const double *vin = k->vind + base;
    double mx = -INFINITY, s = 0;
    float mf = -INFINITY, sf = 0;
    for (int64_t e = 0; e < n; e++) {
      if (sc * vin[e] > mx) mx = sc * vin[e];
      if ((float)sc * (float)vin[e] > mf) mf = (float)sc * (float)vin[e];
    }
    for (int64_t e = 0; e < n; e++) {
      s += exp(sc * vin[e] - mx);
      sf += expf((float)sc * (float)vin[e] - mf);
    }
    for (int64_t e = 0; e < k->W; e++) {
      if (e >= n) {
        if (!poisoned(k->vout, k->dt, base + e)) a->r[0].pad_bad = 1;
        continue;
      }
      const double ref = exp(sc * vin[e] - mx) / s;
      const double nv2 = round_dt(expf((float)sc * (float)vin[e] - mf) / sf, k->dt);
      accumulate(a, 0, get(k->vout, k->dt, base + e), ref, nv2);
    }
    const double lgot = k->lse[bh * k->sq + i];
    if (n == 0) {
      if (!(isinf(lgot) && lgot < 0)) a->r[1].nan = 1;
    } else {
      accumulate(a, 1, lgot, mx + log(s), (double)(mf + logf(sf)));
    }
  }
}

static void ref_spmm(void *ctx, int64_t begin, int64_t end, int tid) {
  const check *k = ctx;
  acc *a = &k->per_thread[tid];
  const mask *m = k->m;
  const int64_t D = k->D;
  double *accd = k->scr[tid];
  float *accf = (float *)(accd + D);
  for (int64_t it = begin; it < end; it++) {
    const int64_t bh = it / k->sq, i = it % k->sq, hk = kv_head(k, bh);
    const int64_t n = m->rowp[i + 1] - m->rowp[i], base = (bh * k->sq + i) * k->W;
    for (int64_t d = 0; d < D; d++) accd[d] = 0, accf[d] = 0;
    for (int64_t e = 0; e < n; e++) {
      const double *vj = k->vd + (hk * k->sk + m->cols[m->rowp[i] + e]) * D;
      const double p = k->vind[base + e];
      for (int64_t d = 0; d < D; d++) accd[d] += p * vj[d], accf[d] += (float)p * (float)vj[d];
    }
    const int64_t b = bh / k->c.H, h = bh % k->c.H;
    for (int64_t d = 0; d < D; d++) {
      accumulate(a, 0, get(k->o, k->dt, at(k, b, h, k->c.H, k->sq, i, d)), accd[d],
                 round_dt(accf[d], k->dt));
    }
  }
}

static void ref_attention(void *ctx, int64_t begin, int64_t end, int tid) {
  const check *k = ctx;
  acc *a = &k->per_thread[tid];
  const mask *m = k->m;
  const int64_t D = k->D, W = k->W > 0 ? k->W : 1;
  double *s = k->scr[tid], *accd = s + W;
  float *sf = (float *)(accd + D), *accf = sf + W;
  for (int64_t it = begin; it < end; it++) {
    const int64_t bh = it / k->sq, i = it % k->sq, hk = kv_head(k, bh);
    const int64_t n = m->rowp[i + 1] - m->rowp[i];
    const double *qi = k->qd + (bh * k->sq + i) * D;
    double mx = -INFINITY, sum = 0;
    float mf = -INFINITY, sumf = 0;
    for (int64_t e = 0; e < n; e++) {
      const double *kj = k->kd + (hk * k->sk + m->cols[m->rowp[i] + e]) * D;
      double x = 0;
      float xf = 0;
      for (int64_t d = 0; d < D; d++) x += qi[d] * kj[d], xf += (float)qi[d] * (float)kj[d];
      s[e] = x * k->scale, sf[e] = xf * (float)k->scale;
      if (s[e] > mx) mx = s[e];
      if (sf[e] > mf) mf = sf[e];
    }
    /* The naive output rounds scores and probabilities to the dtype (what softmax(Q K^T)
     * V computes in that dtype); its lse keeps the fp32 scores. */
    const float mr = (float)round_dt(mf, k->dt);
    float sumr = 0;
    for (int64_t e = 0; e < n; e++) {
      sumf += expf(sf[e] - mf);
      sumr += expf((float)round_dt(sf[e], k->dt) - mr);
    }
    for (int64_t d = 0; d < D; d++) accd[d] = 0, accf[d] = 0;
    for (int64_t e = 0; e < n; e++) {
      const double p = exp(s[e] - mx);
      const float pf = (float)round_dt(expf((float)round_dt(sf[e], k->dt) - mr) / sumr, k->dt);
      sum += p;
      const double *vj = k->vd + (hk * k->sk + m->cols[m->rowp[i] + e]) * D;
      for (int64_t d = 0; d < D; d++) accd[d] += p * vj[d], accf[d] += pf * (float)vj[d];
    }
    const int64_t b = bh / k->c.H, h = bh % k->c.H;
    for (int64_t d = 0; d < D; d++) {
      const double ref = n ? accd[d] / sum : 0.0;
      const double nv2 = n ? round_dt(accf[d], k->dt) : 0.0;
      accumulate(a, 0, get(k->o, k->dt, at(k, b, h, k->c.H, k->sq, i, d)), ref, nv2);
    }
    const double lgot = k->lse[bh * k->sq + i];
    if (n == 0) {
      if (!(isinf(lgot) && lgot < 0)) a->r[1].nan = 1;
    } else {
      accumulate(a, 1, lgot, mx + log(sum), (double)(mf + logf(sumf)));
    }
  }
}

/* Runs fn over every (batch x head, row) and folds its results into r0 (and r1). */
static void reference(check *k, par_fn fn, result *r0, result *r1) {
  memset(k->per_thread, 0, (size_t)nthreads * sizeof *k->per_thread);
  par_for(k->c.B * k->c.H * k->sq, 16, fn, k);
  finish(k->per_thread, 0, r0);
  if (r1) finish(k->per_thread, 1, r1);
}

/* Plan creation times: kernels_ms of every plan, by where the kernels came from. */
static double plan_ms_cached[1 << 16];
static int nplans_cached;

/* A [B, nh, S, D] tensor over storage in the case's layout. */
static splat_tensor view(const check *k, CUdeviceptr p, int64_t nh, int64_t S) {
  splat_tensor t = splat_tensor_contiguous((void *)(uintptr_t)p, k->dt, k->c.B, nh, S, k->D);
  if (k->c.bshd) {
    t.strides[3] = 1;
    t.strides[1] = k->D;
    t.strides[2] = nh * k->D;
    t.strides[0] = S * nh * k->D;
  }
  return t;
}

/* Fills logical [B, nh, S, D] doubles and their storage image in the case's layout. */
static void fill(const check *k, double *logical, void *image, int64_t nh, int64_t S) {
  for (int64_t b = 0; b < k->c.B; b++)
    for (int64_t h = 0; h < nh; h++)
      for (int64_t s = 0; s < S; s++)
        for (int64_t d = 0; d < k->D; d++) {
          const double v = round_dt(2 * urand() - 1, k->dt);
          logical[((b * nh + h) * S + s) * k->D + d] = v;
          put(image, k->dt, at(k, b, h, nh, S, s, d), v);
        }
}

/* One fused attention call of plan, its output through view `to` into buffer o (which `to`
 * starts `skip` bytes into: the unaligned case) and its lse into buffer lse, both poisoned
 * first; the results against the reference in r and rl. */
static void attention_case(splat_plan *plan, const splat_tensor *tq, const splat_tensor *tk,
                           const splat_tensor *tv, double scale, const splat_tensor *to,
                           const splat_tensor *tl, buf *o, buf *lse, size_t skip, check *ck,
                           result *r, result *rl) {
  poison(o), up(o);
  memset(lse->h, 0xFF, lse->bytes), up(lse);
  if (splat_attention(plan, tq, tk, tv, (float)scale, to, tl, NULL) != SPLAT_OK) r->status_bad = 1;
  if (!sync_device() || !down(o) || !down(lse)) r->status_bad = 1;
  if (skip) memmove(o->h, (char *)o->h + skip, o->bytes - skip);
  if (!r->status_bad) reference(ck, ref_attention, r, rl);
}

/* Counts of the attention-only plans (run_case with ops SPLAT_OPS_ATTENTION) by query tile. */
static int attn_plans, attn_plans_192;

static void run_case(splat_context *ctx, const ref_pattern *rp, const mask *m, const shape *c,
                     int dim, splat_dtype dt, unsigned ops) {
  const int64_t B = c->B, H = c->H, HK = c->HK, sq = m->sq, sk = m->sk, D = dim;
  const char *spec = rp->spec;
  splat_pattern *pat = NULL;
  splat_plan *plan = NULL;
  result r0 = {0, 0, 0, 0, 0};
  if (splat_pattern_parse(spec, sq, sk, &pat) != SPLAT_OK) {
    r0.status_bad = 1;
    row(spec, c, sq, sk, dim, dt, "plan", &r0, splat_last_error(NULL));
    return;
  }
  splat_plan_desc desc = {B, H, HK, D, dt, 0, 0, 0, ops};
  if (splat_plan_create(ctx, pat, &desc, &plan) != SPLAT_OK) {
    r0.status_bad = 1;
    row(spec, c, sq, sk, dim, dt, "plan", &r0, splat_last_error(ctx));
    splat_pattern_destroy(pat);
    return;
  }
  splat_pattern_destroy(pat);
  splat_report rep;
  splat_plan_report(plan, &rep);
  char tiles[48] = "";
  if (ops == SPLAT_OPS_ATTENTION) {
    attn_plans++, attn_plans_192 += rep.tile_q == 192;
    snprintf(tiles, sizeof tiles, "%dx%d tiles", rep.tile_q, rep.tile_k);
  }
  if (rep.kernels_compiled == 0 && nplans_cached < (int)(sizeof plan_ms_cached / sizeof(double)))
    plan_ms_cached[nplans_cached++] = rep.kernels_ms;
  /* W: the largest row of the reference mask, from 128 on rounded up to 16 (docs/format.md) */
  const int64_t W = splat_plan_row_width(plan);
  if (W != (m->W >= 128 ? (m->W + 15) / 16 * 16 : m->W)) {
    r0.status_bad = 1;
    row(spec, c, sq, sk, dim, dt, "width", &r0,
        "plan row width is not the reference mask's widest row, rounded up to 16 from 128");
    splat_plan_destroy(plan);
    return;
  }
  const int es = esize(dt);
  const int64_t nq = B * H * sq * D, nk = B * HK * sk * D, nv = B * H * sq * W, nl = B * H * sq;
  buf q = {0}, k = {0}, v = {0}, vin = {0}, vout = {0}, o = {0}, lse = {0};
  double *qd = malloc((size_t)nq * 8), *kd = malloc((size_t)nk * 8), *vd = malloc((size_t)nk * 8);
  double *vind = malloc((size_t)nv * 8);
  acc *per_thread = calloc((size_t)nthreads, sizeof *per_thread);
  double *scr[MAX_THREADS] = {NULL};
  int scr_ok = 1;
  for (int t = 0; t < nthreads; t++)
    scr_ok &= (scr[t] = malloc((size_t)(2 * (W + D) + 2) * 8)) != NULL;
  check ck = {m,    *c,   sq,   sk,   D,          W, dt, 1.0 / sqrt((double)D), 0.7, qd, kd, vd,
              vind, NULL, NULL, NULL, per_thread, 0, scr};
  if (!qd || !kd || !vd || !vind || !per_thread || !scr_ok || !buf_new(&q, (size_t)nq * es) ||
      !buf_new(&k, (size_t)nk * es) || !buf_new(&v, (size_t)nk * es) ||
      !buf_new(&vin, (size_t)nv * es) || !buf_new(&vout, (size_t)nv * es) ||
      !buf_new(&o, (size_t)(nq + 1) * es) || !buf_new(&lse, (size_t)nl * 4)) {
    r0.status_bad = 1;
    row(spec, c, sq, sk, dim, dt, "alloc", &r0, "host or device allocation failed");
    goto done;
  }
  ck.vout = vout.h, ck.o = o.h, ck.lse = lse.h;
  fill(&ck, qd, q.h, H, sq);
  fill(&ck, kd, k.h, HK, sk);
  fill(&ck, vd, v.h, HK, sk);
  up(&q), up(&k), up(&v);
  const double scale = ck.scale;
  splat_tensor tq = view(&ck, q.d, H, sq), tk = view(&ck, k.d, HK, sk);
  splat_tensor tv = view(&ck, v.d, HK, sk), to = view(&ck, o.d, H, sq);
  splat_tensor tin = splat_tensor_contiguous((void *)(uintptr_t)vin.d, dt, B, H, sq, W);
  splat_tensor tout = splat_tensor_contiguous((void *)(uintptr_t)vout.d, dt, B, H, sq, W);
  splat_tensor tl = splat_tensor_contiguous((void *)(uintptr_t)lse.d, SPLAT_F32, B, H, sq, 1);

  /* ---- sddmm */
  if (ops & SPLAT_OPS_SDDMM) {
    result r = r0;
    poison(&vout), up(&vout);
    if (splat_sddmm(plan, &tq, &tk, (float)scale, &tout, NULL) != SPLAT_OK) r.status_bad = 1;
    if (!sync_device() || !down(&vout)) r.status_bad = 1;
    if (!r.status_bad) reference(&ck, ref_sddmm, &r, NULL);
    row(spec, c, sq, sk, dim, dt, "sddmm", &r, r.status_bad ? splat_last_error(ctx) : "");
  }
  /* ---- softmax (scale 0.7) and its lse; value inputs in [-3, 3), padding NaN (never read) */
  if (ops & SPLAT_OPS_SOFTMAX) {
    result r = r0, rl = r0;
    for (int64_t bh = 0; bh < B * H; bh++) {
      for (int64_t i = 0; i < sq; i++) {
        const int64_t n = m->rowp[i + 1] - m->rowp[i];
        for (int64_t e = 0; e < W; e++) {
          const int64_t idx = (bh * sq + i) * W + e;
          if (e < n) {
            put(vin.h, dt, idx, vind[idx] = round_dt(6 * urand() - 3, dt));
          } else {
            memset((char *)vin.h + idx * es, 0xFF, (size_t)es);
          }
        }
      }
    }
    up(&vin);
    poison(&vout), up(&vout);
    memset(lse.h, 0xFF, lse.bytes), up(&lse);
    if (splat_softmax(plan, &tin, (float)ck.sc, &tout, &tl, NULL) != SPLAT_OK) r.status_bad = 1;
    if (!sync_device() || !down(&vout) || !down(&lse)) r.status_bad = 1;
    if (!r.status_bad) reference(&ck, ref_softmax, &r, &rl);
    row(spec, c, sq, sk, dim, dt, "softmax", &r, r.status_bad ? splat_last_error(ctx) : "");
    if (!r.status_bad) row(spec, c, sq, sk, dim, dt, "lse", &rl, "");
  }
  /* ---- spmm: probabilities in [0, 1) */
  if (ops & SPLAT_OPS_SPMM) {
    result r = r0;
    for (int64_t bh = 0; bh < B * H; bh++) {
      for (int64_t i = 0; i < sq; i++) {
        const int64_t n = m->rowp[i + 1] - m->rowp[i];
        for (int64_t e = 0; e < n; e++) {
          const int64_t idx = (bh * sq + i) * W + e;
          put(vin.h, dt, idx, vind[idx] = round_dt(urand(), dt));
        }
      }
    }
    up(&vin);
    poison(&o), up(&o);
    if (splat_spmm(plan, &tin, &tv, &to, NULL) != SPLAT_OK) r.status_bad = 1;
    if (!sync_device() || !down(&o)) r.status_bad = 1;
    if (!r.status_bad) reference(&ck, ref_spmm, &r, NULL);
    row(spec, c, sq, sk, dim, dt, "spmm", &r, r.status_bad ? splat_last_error(ctx) : "");
  }
  /* ---- attention (fused, simple) with lse */
  {
    result r = r0, rl = r0;
    attention_case(plan, &tq, &tk, &tv, scale, &to, &tl, &o, &lse, 0, &ck, &r, &rl);
    row(spec, c, sq, sk, dim, dt, "attention", &r, r.status_bad ? splat_last_error(ctx) : tiles);
    if (!r.status_bad) row(spec, c, sq, sk, dim, dt, "attn-lse", &rl, "");
  }
  /* ---- attention into an output one element past 16-byte alignment (with the strided
   * views): the tile kernels' stores element by element */
  if (c->bshd) {
    result r = r0, rl = r0;
    splat_tensor tu = to;
    tu.data = (char *)(uintptr_t)o.d + es;
    attention_case(plan, &tq, &tk, &tv, scale, &tu, &tl, &o, &lse, (size_t)es, &ck, &r, &rl);
    row(spec, c, sq, sk, dim, dt, "attn-unal", &r, r.status_bad ? splat_last_error(ctx) : "");
  }
  /* ---- bf16 attention with V scaled by 2^-120 and 2^100 (V changed for good: last):
   * two-pass plans keep pass 1's O in fp16 under a power-of-two unit per row, clamped at
   * both ends of the range (kernels/attention_common.cuh splat_attn_row_scale) */
  if (dt == SPLAT_BF16 && strstr(spec, "strided")) {
    static const int shift[2] = {-120, 100};
    static const char *const name[2] = {"attn-tiny", "attn-huge"};
    for (int x = 0; x < 2; x++) {
      result r = r0, rl = r0;
      for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < HK; h++)
          for (int64_t s = 0; s < sk; s++)
            for (int64_t d = 0; d < D; d++) {
              double *e = &vd[((b * HK + h) * sk + s) * D + d];
              *e = round_dt(ldexp(*e, x ? shift[1] - shift[0] : shift[0]), dt);
              put(v.h, dt, at(&ck, b, h, HK, sk, s, d), *e);
            }
      up(&v);
      attention_case(plan, &tq, &tk, &tv, scale, &to, &tl, &o, &lse, 0, &ck, &r, &rl);
      row(spec, c, sq, sk, dim, dt, name[x], &r, r.status_bad ? splat_last_error(ctx) : "");
    }
  }
done:
  buf_free(&q), buf_free(&k), buf_free(&v), buf_free(&vin), buf_free(&vout), buf_free(&o);
  buf_free(&lse);
  free(qd), free(kd), free(vd), free(vind), free(per_thread);
  for (int t = 0; t < nthreads; t++) free(scr[t]);
  splat_plan_destroy(plan);
}

/* ------------------------------------------------------------ warm-up
 * One small plan per (dtype, head_dim) on parallel threads, so the NVRTC compiles of
 * every kernel the check uses overlap (cold: compiled, or from the disk cache). */
typedef struct warm {
  splat_context *ctx;
  splat_dtype dt;
  int dim;
  splat_status st;
  double plan_ms, kernels_ms;
  int compiled;
} warm;

static void warm_one(void *ctx, int64_t begin, int64_t end, int tid) {
  (void)tid;
  warm *w = ctx;
  for (int64_t i = begin; i < end; i++) {
    splat_pattern *p = NULL;
    splat_plan *plan = NULL;
    w[i].st = splat_pattern_parse("window(3)", 64, 64, &p);
    splat_plan_desc desc = {1, 2, 1, w[i].dim, w[i].dt, 0, 0, 0, 0};
    const double t0 = splat__now_ms();
    if (w[i].st == SPLAT_OK) w[i].st = splat_plan_create(w[i].ctx, p, &desc, &plan);
    w[i].plan_ms = splat__now_ms() - t0;
    splat_report rep;
    if (w[i].st == SPLAT_OK && splat_plan_report(plan, &rep) == SPLAT_OK) {
      w[i].kernels_ms = rep.kernels_ms;
      w[i].compiled = rep.kernels_compiled;
    }
    splat_plan_destroy(plan);
    splat_pattern_destroy(p);
  }
}

/* Host memory handed to a CUDA plan is refused with a sentence, before any launch. */
static void check_host_pointers(splat_context *ctx) {
  splat_pattern *p = NULL;
  splat_plan *plan = NULL;
  splat_plan_desc desc = {1, 1, 0, 64, SPLAT_BF16, 0, 0, 0, 0};
  static uint16_t host[64 * 64];
  int ok = splat_pattern_parse("window(3)", 64, 0, &p) == SPLAT_OK &&
           splat_plan_create(ctx, p, &desc, &plan) == SPLAT_OK;
  if (ok) {
    splat_tensor t = splat_tensor_contiguous(host, SPLAT_BF16, 1, 1, 64, 64);
    static uint16_t out[64 * 64];
    splat_tensor o = splat_tensor_contiguous(out, SPLAT_BF16, 1, 1, 64, 64);
    splat_status st = splat_attention(plan, &t, &t, &t, SPLAT_DEFAULT_SCALE, &o, NULL, NULL);
    ok = st == SPLAT_ERR_INVALID_ARGUMENT && strstr(splat_last_error(ctx), "q.data=") != NULL;
    printf("%-30s host pointers to a CUDA plan -> %s: %s\n", "misuse", splat_status_name(st),
           ok ? "PASS" : "FAIL");
  }
  if (ok)
    passed++;
  else
    failed++;
  splat_plan_destroy(plan);
  splat_pattern_destroy(p);
}

/* Plans of the fused attention alone at 4096 with batch 2 and 16 heads (over 16 KV heads,
 * and over 4 in [B,S,H,D] storage): the shapes where a CUDA plan may take 192-row query
 * tiles (docs/cuda.md, Query tiles: on an H100 all but the last four of these do at head_dim
 * 64, blocked(512) on tiles cut at its blocks; in bf16, strided(64) | window(64) runs its first
 * pass on them, and strided(8) | window(8) its second, whose phase classes have 512 rows; the tiles
 * column shows the plan's tile, not a pass's). 16-bit dtypes, head_dim 64 and 40 unless --dims
 * names others. */
static void attention_plans(splat_context *ctx, const char *filter, const int *dims, int ndims,
                            const splat_dtype *dts, int ndts, int64_t seq) {
  static const char *specs[] = {"window(37)",
                                "causal & window(512,0)",
                                "dilated(3,2) | dilated(2,3)",
                                "blocked(37)",
                                "blocked(512)",
                                "global(64)",
                                "longformer(5,20)",
                                "bigbird(10,0,3,0,1)",
                                "longformer(256,64)",
                                "bigbird(16,1,2,3,7)",
                                "strided(64) | window(64)",
                                "strided(8)|window(8)"};
  const shape full = {2, 16, 16, 0}, gqa = {2, 16, 4, 1};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    const ref_pattern *rp = splat_ref_pattern_find(specs[i]);
    if (filter && !strstr(specs[i], filter)) continue;
    mask m;
    if (!rp || !mask_build(rp, seq, seq, &m)) {
      printf("%s: %s\n", specs[i], rp ? "out of host memory" : "not a reference pattern");
      failed++;
      if (rp) free(m.rowp), free(m.cols);
      continue;
    }
    for (int ti = 0; ti < ndts; ti++) {
      if (dts[ti] == SPLAT_F32) continue;
      for (int di = 0; di < ndims; di++)
        run_case(ctx, rp, &m, &full, dims[di], dts[ti], SPLAT_OPS_ATTENTION);
    }
    if (i < 2) run_case(ctx, rp, &m, &gqa, 64, SPLAT_BF16, SPLAT_OPS_ATTENTION);
    free(m.rowp);
    free(m.cols);
  }
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int quick = 0, device = 0, timeout = 900, attention_only = 0;
  int64_t plans_seq = 4096;
  const char *filter = NULL, *dtype = NULL;
  int dims_full[4] = {64, 128, 40, 36}, ndims_full = 4, dims_given = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--attention-plans"))
      attention_only = 1;
    else if (!strcmp(argv[i], "--device") && i + 1 < argc)
      device = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--filter") && i + 1 < argc)
      filter = argv[++i];
    else if (!strcmp(argv[i], "--dtype") && i + 1 < argc)
      dtype = argv[++i];
    else if (!strcmp(argv[i], "--plans-seq") && i + 1 < argc) {
      plans_seq = atoll(argv[++i]);
      if (plans_seq < 1 || plans_seq > 65536) {
        fprintf(stderr, "--plans-seq %s: want a row count from 1 to 65536\n", argv[i]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
      timeout = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--dims") && i + 1 < argc) {
      const char *s = argv[++i];
      ndims_full = 0;
      dims_given = 1;
      while (*s && ndims_full < 4) {
        char *end = NULL;
        const long d = strtol(s, &end, 10);
        if (end == s || d < 1 || d > 4096) break;
        dims_full[ndims_full++] = (int)d;
        s = *end == ',' ? end + 1 : end;
      }
      if (*s || ndims_full == 0) {
        fprintf(stderr, "--dims %s: want up to four comma-separated head_dims\n", argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr,
              "usage: %s [--quick | --attention-plans] [--device N] [--filter SUBSTR] "
              "[--timeout S] [--dims LIST] [--dtype f32|f16|bf16] [--plans-seq N]\n",
              argv[0]);
      return 2;
    }
  }
  int dt_only = -1; /* --dtype: its index in dts below */
  if (dtype) {
    static const char *names[] = {"bf16", "f16", "f32"};
    dt_only = 0;
    while (dt_only < 3 && strcmp(dtype, names[dt_only])) dt_only++;
    if (dt_only == 3) {
      fprintf(stderr, "--dtype %s: want f32, f16 or bf16\n", dtype);
      return 2;
    }
  }
  signal(SIGALRM, on_alarm);
  alarm((unsigned)timeout);
  const long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  nthreads = ncpu < 1 ? 1 : ncpu > MAX_THREADS ? MAX_THREADS : (int)ncpu;
  const double t_start = splat__now_ms();
  splat_context *ctx = NULL;
  splat_context_options opt = {SPLAT_BACKEND_CUDA, device, 0};
  if (splat_context_create(&opt, &ctx) != SPLAT_OK) {
    printf("no usable CUDA device: %s\n0 passed, 0 failed, 1 skipped\n", splat_last_error(NULL));
    return 2;
  }
  if (!cuda_setup(device)) {
    printf("the CUDA driver could not be set up for the check's own buffers: %s\n",
           splat_last_error(NULL));
    return 2;
  }
  static const int64_t sizes[][2] = {{97, 97}, {1000, 1000}, {333, 1000}, {1000, 97}, {4097, 4097}};
  splat_dtype dts[] = {SPLAT_BF16, SPLAT_F16, SPLAT_F32};
  /* strided(8)|window(8): two passes at 700 (tile_plan.h splat__tile_plan_passes). */
  static const char *quick_specs[] = {"window(3)",           "dilated(3,2)",     "longformer(3,2)",
                                      "bigbird(4,1,1,2,42)", "window(100,-100)", "causal",
                                      "strided(8)|window(8)"};
  const shape base = {1, 2, 1, 0}; /* GQA: 2 query heads share 1 KV head */
  const shape wide = {2, 4, 2, 1}; /* batch 2, GQA 4:2, [B,S,H,D] storage */
  const int ndims = quick && !dims_given ? 1 : ndims_full;
  int ndts = quick ? 1 : 3;
  if (dt_only >= 0) {
    dts[0] = dts[dt_only];
    ndts = 1;
  }

  /* Warm-up: every (dtype, head_dim) plan at once (cold compiles overlap). */
  warm w[12];
  int nw = 0;
  for (int ti = 0; ti < ndts; ti++) {
    for (int di = 0; di < ndims; di++) {
      warm x = {ctx, dts[ti], dims_full[di], SPLAT_OK, 0, 0, 0};
      w[nw++] = x;
    }
  }
  const double tw = splat__now_ms();
  par_for(nw, 1, warm_one, w);
  const double warm_wall = splat__now_ms() - tw;
  int warm_compiled = 0;
  double warm_max = 0;
  for (int i = 0; i < nw; i++) {
    if (w[i].st != SPLAT_OK) {
      printf("warm-up plan %s d%d failed: %s\n", splat_dtype_name(w[i].dt), w[i].dim,
             splat_last_error(ctx));
      failed++;
    }
    warm_compiled += w[i].compiled;
    if (w[i].kernels_ms > warm_max) warm_max = w[i].kernels_ms;
  }
  printf(
      "warm-up: %d plans on %d threads in %.0f ms wall; %d kernel programs compiled, the rest "
      "from the cache; slowest plan's kernels %.0f ms\n",
      nw, nthreads, warm_wall, warm_compiled, warm_max);

  printf("%-30s %-9s %-13s %4s %-5s %-9s %10s %10s %s\n", "spec", "seq", "shape", "dim", "dtype",
         "op", "max err", "bound", "result");
  for (int pi = 0; pi < splat_ref_pattern_count && !attention_only; pi++) {
    const ref_pattern *rp = &splat_ref_patterns[pi];
    if (filter && !strstr(rp->spec, filter)) continue;
    if (quick) {
      int in = 0;
      for (size_t t = 0; t < sizeof quick_specs / sizeof quick_specs[0]; t++) {
        in |= !strcmp(rp->spec, quick_specs[t]);
      }
      if (!in) continue;
    }
    /* Quick: 33, 40x70, and 700, where a 128-row tile walks past its K/V ring several
     * times and a warpgroup skips long stretches (global rows beside window rows). */
    static const int64_t quick_sizes[][2] = {{33, 33}, {40, 70}, {700, 700}};
    const size_t nsizes =
        quick ? sizeof quick_sizes / sizeof quick_sizes[0] : sizeof sizes / sizeof sizes[0];
    for (size_t si = 0; si < nsizes; si++) {
      const int64_t sq = quick ? quick_sizes[si][0] : sizes[si][0];
      const int64_t sk = quick ? quick_sizes[si][1] : sizes[si][1];
      mask m;
      if (!mask_build(rp, sq, sk, &m)) {
        printf("out of host memory building %s\n", rp->spec);
        failed++;
        free(m.rowp), free(m.cols);
        continue;
      }
      /* Keep the host reference affordable: large masks only at the smaller sizes. */
      const int big = m.nnz > 3000000;
      for (int di = 0; di < ndims && !big; di++) {
        if (!dims_given && di >= 2 && sq != 97) continue; /* odd head_dims at seq 97 */
        for (int ti = 0; ti < ndts; ti++)
          run_case(ctx, rp, &m, &base, dims_full[di], dts[ti], SPLAT_OPS_ALL);
      }
      /* Batch 2, heads 4 over 2 KV heads, strided [B,S,H,D] views: at 333x1000 (40x70). */
      if (!big && sq != sk && (quick || sq == 333)) {
        for (int ti = 0; ti < ndts; ti++) run_case(ctx, rp, &m, &wide, 64, dts[ti], SPLAT_OPS_ALL);
      }
      if (big)
        printf("%-30s %lldx%lld skipped: %lld mask elements (host reference too slow)\n", rp->spec,
               (long long)sq, (long long)sk, (long long)m.nnz);
      free(m.rowp);
      free(m.cols);
    }
  }
  if (!quick) {
    static const int plan_dims[2] = {64, 40};
    attention_plans(ctx, filter, dims_given ? dims_full : plan_dims, dims_given ? ndims_full : 2,
                    dts, ndts, plans_seq);
    printf("attention-only plans: %d, %d of them with 192-row query tiles\n", attn_plans,
           attn_plans_192);
    if (gpu.cc_major == 9 && gpu.cc_minor == 0 && attn_plans >= 10 && attn_plans_192 == 0) {
      printf("FAIL: no attention-only plan took 192-row query tiles on this sm_90 device\n");
      failed++;
    }
  }
  /* Not in --quick: that subset runs under compute-sanitizer, which reports the refused
   * cuPointerGetAttribute query this check provokes as an API error. */
  if (!quick && !attention_only) check_host_pointers(ctx);
  splat_context_destroy(ctx);
  if (nplans_cached) {
    qsort(plan_ms_cached, (size_t)nplans_cached, sizeof plan_ms_cached[0], cmp_double);
    printf(
        "plans with every kernel from the cache: %d, kernels got + loaded in median %.2f ms, "
        "max %.2f ms\n",
        nplans_cached, plan_ms_cached[nplans_cached / 2], plan_ms_cached[nplans_cached - 1]);
  }
  printf("%d host threads for the reference; %.1f s in all\n", nthreads,
         (splat__now_ms() - t_start) / 1000.0);
  printf("%d passed, %d failed\n", passed, failed);
  splat__cuda_pop();
  splat__cuda_device_close(&gpu);
  return failed ? 1 : 0;
}
