/* bench_unfused.c — SPLAT's unfused pipeline (R-SDDMM, softmax, R-SpMM) against
 * cuSPARSE (SDDMM and SpMM on CSR of the same pattern) and dense cuBLAS, on one GPU,
 * in one process, on the same inputs. Prints a table and appends JSON lines.
 *
 * Timing: CUDA events around each call, after warm-up, L2 flushed before every
 * repetition (a 256 MiB memset outside the timed region), median of --repeat.
 * Useful TFLOP/s of SDDMM and SpMM = 2 x batch x heads x head_dim x nnz / time. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cusparse.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "splat.h"

#define CHECK_CUDA(x)                                                                     \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)
#define CHECK_SPLAT(x, ctx)                                                              \
  do {                                                                                   \
    splat_status s_ = (x);                                                               \
    if (s_ != SPLAT_OK) {                                                                \
      fprintf(stderr, "%s: %s: %s\n", #x, splat_status_name(s_), splat_last_error(ctx)); \
      exit(1);                                                                           \
    }                                                                                    \
  } while (0)

typedef struct config {
  const char *spec;
  int64_t seq, batch, heads, dim;
} config;

typedef struct timer {
  cudaEvent_t start, stop;
  void *flush;
  size_t flush_bytes;
  int repeat;
} timer;

/* A closure: what to time. */
typedef int (*op_fn)(void *arg);

static int compare_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

/* Median milliseconds of fn over t->repeat runs (3 warm-ups), or -1 if fn fails. */
static double time_op(timer *t, op_fn fn, void *arg) {
  for (int i = 0; i < 3; i++)
    if (fn(arg)) return -1;
  float ms[256];
  int n = t->repeat < 256 ? t->repeat : 256;
  for (int i = 0; i < n; i++) {
    CHECK_CUDA(cudaMemsetAsync(t->flush, i & 0xff, t->flush_bytes, 0));
    CHECK_CUDA(cudaEventRecord(t->start, 0));
    if (fn(arg)) return -1;
    CHECK_CUDA(cudaEventRecord(t->stop, 0));
    CHECK_CUDA(cudaEventSynchronize(t->stop));
    CHECK_CUDA(cudaEventElapsedTime(&ms[i], t->start, t->stop));
  }
  qsort(ms, (size_t)n, sizeof ms[0], compare_float);
  return ms[n / 2];
}

/* The fp16 bits of f (|f| < 65504), rounded toward zero: subnormals below 2^-14. */
static uint16_t f16_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  const uint16_t sign = (uint16_t)((b >> 16) & 0x8000u);
  const int e = (int)((b >> 23) & 0xffu) - 127 + 15;
  const uint32_t m = b & 0x7fffffu;
  if (e <= 0) return e < -10 ? sign : (uint16_t)(sign | ((m | 0x800000u) >> (14 - e)));
  return (uint16_t)(sign | (uint32_t)e << 10 | m >> 13);
}

/* A device buffer of n uniform values in [-1, 1), dtype f32, f16 or bf16. */
static void *random_device(size_t n, splat_dtype dt, unsigned seed) {
  size_t esz = dt == SPLAT_F32 ? 4 : 2;
  unsigned char *h = malloc(n * esz);
  uint64_t s = 0x9E3779B97F4A7C15ULL * (seed + 1);
  for (size_t i = 0; i < n; i++) {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    float f = (float)((s * 2685821657736338717ULL) >> 40) * 0x1p-23f - 1.0f;
    if (dt == SPLAT_F32) {
      memcpy(h + 4 * i, &f, 4);
    } else if (dt == SPLAT_F16) {
      const uint16_t out = f16_bits(f);
      memcpy(h + 2 * i, &out, 2);
    } else { /* bf16 by truncation: inputs need to be random, not rounded */
      uint32_t b;
      memcpy(&b, &f, 4);
      uint16_t out = (uint16_t)(b >> 16);
      memcpy(h + 2 * i, &out, 2);
    }
  }
  void *d = NULL;
  CHECK_CUDA(cudaMalloc(&d, n * esz));
  CHECK_CUDA(cudaMemcpy(d, h, n * esz, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

/* ---------------------------------------------------------------- splat ops */

typedef struct splat_args {
  splat_plan *plan;
  splat_tensor q, k, v, scores, out, lse;
} splat_args;

static int run_sddmm(void *a) {
  splat_args *s = a;
  return splat_sddmm(s->plan, &s->q, &s->k, SPLAT_DEFAULT_SCALE, &s->scores, NULL) != SPLAT_OK;
}
static int run_softmax(void *a) {
  splat_args *s = a;
  return splat_softmax(s->plan, &s->scores, 1.0f, &s->scores, &s->lse, NULL) != SPLAT_OK;
}
static int run_spmm(void *a) {
  splat_args *s = a;
  return splat_spmm(s->plan, &s->scores, &s->v, &s->out, NULL) != SPLAT_OK;
}
static int run_pipeline(void *a) {
  return run_sddmm(a) || run_softmax(a) || run_spmm(a);
}

/* ---------------------------------------------------------------- cuSPARSE */

typedef struct sparse_args {
  cusparseHandle_t handle;
  cusparseDnMatDescr_t q, k, v, out;
  cusparseSpMatDescr_t csr;
  cudaDataType compute;
  void *sddmm_buffer, *spmm_buffer;
} sparse_args;

static int run_cusparse_sddmm(void *a) {
  sparse_args *s = a;
  float alpha = 1.0f, beta = 0.0f;
  return cusparseSDDMM(s->handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_TRANSPOSE,
                       &alpha, s->q, s->k, &beta, s->csr, s->compute, CUSPARSE_SDDMM_ALG_DEFAULT,
                       s->sddmm_buffer) != CUSPARSE_STATUS_SUCCESS;
}
static int run_cusparse_spmm(void *a) {
  sparse_args *s = a;
  float alpha = 1.0f, beta = 0.0f;
  return cusparseSpMM(s->handle, CUSPARSE_OPERATION_NON_TRANSPOSE, CUSPARSE_OPERATION_NON_TRANSPOSE,
                      &alpha, s->csr, s->v, &beta, s->out, s->compute, CUSPARSE_SPMM_CSR_ALG2,
                      s->spmm_buffer) != CUSPARSE_STATUS_SUCCESS;
}

/* Builds batched CSR and dense descriptors for the pattern in dtype `dt` (column
 * indices replicated per (batch, head) slice, as cuSPARSE's strided batches need). */
static void setup_cusparse(const config *c, const splat_pattern *p, int64_t nnz, cudaDataType dt,
                           sparse_args *s, void **buffers, int nbuf) {
  int64_t S = c->seq, D = c->dim, slices = c->batch * c->heads;
  int32_t *offsets = malloc((size_t)(S + 1) * 4);
  int32_t *cols = malloc((size_t)nnz * 4);
  int64_t *row = malloc((size_t)S * 8), pos = 0;
  for (int64_t i = 0; i < S; i++) {
    int64_t n = 0;
    offsets[i] = (int32_t)pos;
    splat_pattern_row(p, i, row, S, &n);
    for (int64_t t = 0; t < n; t++) cols[pos++] = (int32_t)row[t];
  }
  offsets[S] = (int32_t)pos;
  size_t esz = dt == CUDA_R_32F ? 4 : 2;
  int32_t *d_off, *d_cols;
  void *d_vals;
  CHECK_CUDA(cudaMalloc((void **)&d_off, (size_t)(S + 1) * 4));
  CHECK_CUDA(cudaMalloc((void **)&d_cols, (size_t)(nnz * slices) * 4));
  CHECK_CUDA(cudaMalloc(&d_vals, (size_t)(nnz * slices) * esz));
  CHECK_CUDA(cudaMemcpy(d_off, offsets, (size_t)(S + 1) * 4, cudaMemcpyHostToDevice));
  for (int64_t b = 0; b < slices; b++)
    CHECK_CUDA(cudaMemcpy(d_cols + b * nnz, cols, (size_t)nnz * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(d_vals, 0, (size_t)(nnz * slices) * esz));
  free(offsets), free(cols), free(row);
  buffers[0] = d_off, buffers[1] = d_cols, buffers[2] = d_vals;
  (void)nbuf;

  cusparseCreate(&s->handle);
  cusparseCreateCsr(&s->csr, S, S, nnz, d_off, d_cols, d_vals, CUSPARSE_INDEX_32I,
                    CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, dt);
  cusparseCsrSetStridedBatch(s->csr, (int)slices, 0, nnz);
  const splat_dtype sdt = dt == CUDA_R_32F ? SPLAT_F32 : dt == CUDA_R_16F ? SPLAT_F16 : SPLAT_BF16;
  void *q = random_device((size_t)(slices * S * D), sdt, 11);
  void *k = random_device((size_t)(slices * S * D), sdt, 12);
  void *v = random_device((size_t)(slices * S * D), sdt, 13);
  void *o;
  CHECK_CUDA(cudaMalloc(&o, (size_t)(slices * S * D) * esz));
  buffers[3] = q, buffers[4] = k, buffers[5] = v, buffers[6] = o;
  cusparseCreateDnMat(&s->q, S, D, D, q, dt, CUSPARSE_ORDER_ROW);
  cusparseCreateDnMat(&s->k, S, D, D, k, dt, CUSPARSE_ORDER_ROW);
  cusparseCreateDnMat(&s->v, S, D, D, v, dt, CUSPARSE_ORDER_ROW);
  cusparseCreateDnMat(&s->out, S, D, D, o, dt, CUSPARSE_ORDER_ROW);
  cusparseDnMatSetStridedBatch(s->q, (int)slices, S * D);
  cusparseDnMatSetStridedBatch(s->k, (int)slices, S * D);
  cusparseDnMatSetStridedBatch(s->v, (int)slices, S * D);
  cusparseDnMatSetStridedBatch(s->out, (int)slices, S * D);
  s->compute = CUDA_R_32F;
}

/* Runs fn(arg) with stdout and stderr sent to /dev/null: cuSPARSE prints "On entry
 * to ..." for a refused dtype, which the probe expects. */
static int quietly(int (*fn)(sparse_args *, int), sparse_args *s, int op) {
  fflush(stdout), fflush(stderr);
  int out = dup(1), err = dup(2), null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, 1), dup2(null, 2);
  int r = fn(s, op);
  fflush(stdout), fflush(stderr);
  if (out >= 0) dup2(out, 1), close(out);
  if (err >= 0) dup2(err, 2), close(err);
  if (null >= 0) close(null);
  return r;
}

/* Sizes the workspace of one op (0 = SDDMM, 1 = SpMM) and runs it once; returns 0 when
 * cuSPARSE refuses the dtype combination. */
static int prepare_cusparse_op(sparse_args *s, int op) {
  float alpha = 1.0f, beta = 0.0f;
  size_t bytes = 0;
  cusparseStatus_t st =
      op == 0 ? cusparseSDDMM_bufferSize(s->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                         CUSPARSE_OPERATION_TRANSPOSE, &alpha, s->q, s->k, &beta,
                                         s->csr, s->compute, CUSPARSE_SDDMM_ALG_DEFAULT, &bytes)
              : cusparseSpMM_bufferSize(s->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                        CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, s->csr, s->v,
                                        &beta, s->out, s->compute, CUSPARSE_SPMM_CSR_ALG2, &bytes);
  if (st != CUSPARSE_STATUS_SUCCESS) return 0;
  void **buffer = op == 0 ? &s->sddmm_buffer : &s->spmm_buffer;
  CHECK_CUDA(cudaMalloc(buffer, bytes + 1));
  int failed = op == 0 ? run_cusparse_sddmm(s) : run_cusparse_spmm(s);
  return !failed && cudaDeviceSynchronize() == cudaSuccess;
}

static void teardown_cusparse(sparse_args *s, void **buffers, int nbuf) {
  cusparseDestroySpMat(s->csr);
  cusparseDestroyDnMat(s->q), cusparseDestroyDnMat(s->k);
  cusparseDestroyDnMat(s->v), cusparseDestroyDnMat(s->out);
  cusparseDestroy(s->handle);
  cudaFree(s->sddmm_buffer), cudaFree(s->spmm_buffer);
  for (int i = 0; i < nbuf; i++) cudaFree(buffers[i]);
  memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------- cuBLAS (dense) */

typedef struct dense_args {
  cublasHandle_t handle;
  void *q, *k, *v, *s, *o;
  int64_t S, D;
} dense_args;

/* One (batch, head) slice: S = Q K^T (bf16 in, f32 accumulate, bf16 out). */
static int run_dense_qk(void *a) {
  dense_args *d = a;
  float alpha = 1.0f, beta = 0.0f;
  return cublasGemmEx(d->handle, CUBLAS_OP_T, CUBLAS_OP_N, (int)d->S, (int)d->S, (int)d->D, &alpha,
                      d->k, CUDA_R_16BF, (int)d->D, d->q, CUDA_R_16BF, (int)d->D, &beta, d->s,
                      CUDA_R_16BF, (int)d->S, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
}
/* One slice: O = P V. */
static int run_dense_pv(void *a) {
  dense_args *d = a;
  float alpha = 1.0f, beta = 0.0f;
  return cublasGemmEx(d->handle, CUBLAS_OP_N, CUBLAS_OP_N, (int)d->D, (int)d->S, (int)d->S, &alpha,
                      d->v, CUDA_R_16BF, (int)d->D, d->s, CUDA_R_16BF, (int)d->S, &beta, d->o,
                      CUDA_R_16BF, (int)d->D, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS;
}

/* ---------------------------------------------------------------- one case */

static void bench_case(const config *c, splat_context *ctx, timer *t, FILE *json,
                       const char *device) {
  int64_t S = c->seq, D = c->dim, slices = c->batch * c->heads;
  splat_pattern *p = NULL;
  CHECK_SPLAT(splat_pattern_parse(c->spec, S, S, &p), NULL);
  double row_ms[3];
  /* splat in each dtype; cuSPARSE in the first it takes (bf16, then f16, then f32) */
  enum { NDT = 3 };
  const char *dtype_names[NDT] = {"bf16", "f16", "f32"};
  const splat_dtype dtypes[NDT] = {SPLAT_BF16, SPLAT_F16, SPLAT_F32};
  const cudaDataType cuda_dtypes[NDT] = {CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F};
  double splat_ms[NDT][4];
  int64_t nnz = 0;
  for (int di = 0; di < NDT; di++) {
    splat_plan *plan = NULL;
    splat_plan_desc desc = {c->batch, c->heads, 0, D, dtypes[di], 0, 0, 0, SPLAT_OPS_UNFUSED};
    CHECK_SPLAT(splat_plan_create(ctx, p, &desc, &plan), ctx);
    splat_report rep;
    splat_plan_report(plan, &rep);
    nnz = rep.nnz;
    int64_t W = splat_plan_row_width(plan);
    splat_args a = {plan, {0}, {0}, {0}, {0}, {0}, {0}};
    size_t n = (size_t)(slices * S * D);
    a.q = splat_tensor_contiguous(random_device(n, dtypes[di], 1), dtypes[di], c->batch, c->heads,
                                  S, D);
    a.k = splat_tensor_contiguous(random_device(n, dtypes[di], 2), dtypes[di], c->batch, c->heads,
                                  S, D);
    a.v = splat_tensor_contiguous(random_device(n, dtypes[di], 3), dtypes[di], c->batch, c->heads,
                                  S, D);
    void *scores, *out, *lse;
    CHECK_CUDA(cudaMalloc(&scores, (size_t)(slices * S * W) * (dtypes[di] == SPLAT_F32 ? 4 : 2)));
    CHECK_CUDA(cudaMalloc(&out, n * (dtypes[di] == SPLAT_F32 ? 4 : 2)));
    CHECK_CUDA(cudaMalloc(&lse, (size_t)(slices * S) * 4));
    a.scores = splat_tensor_contiguous(scores, dtypes[di], c->batch, c->heads, S, W);
    a.out = splat_tensor_contiguous(out, dtypes[di], c->batch, c->heads, S, D);
    a.lse = splat_tensor_contiguous(lse, SPLAT_F32, c->batch, c->heads, S, 1);
    splat_ms[di][0] = time_op(t, run_sddmm, &a);
    splat_ms[di][1] = time_op(t, run_softmax, &a);
    splat_ms[di][2] = time_op(t, run_spmm, &a);
    splat_ms[di][3] = time_op(t, run_pipeline, &a);
    cudaFree(a.q.data), cudaFree(a.k.data), cudaFree(a.v.data);
    cudaFree(scores), cudaFree(out), cudaFree(lse);
    splat_plan_destroy(plan);
  }

  /* cuSPARSE per op: bf16 when it takes it, else f16, else f32; compared with splat in the
   * same dtype. */
  double cus_ms[2] = {-1, -1};
  int cus_dt[2] = {NDT - 1, NDT - 1}; /* index into dtypes[] */
  for (int op = 0; op < 2; op++) {
    for (int di = 0; di < NDT && cus_ms[op] < 0; di++) {
      sparse_args sp;
      void *bufs[7] = {0};
      memset(&sp, 0, sizeof sp);
      setup_cusparse(c, p, nnz, cuda_dtypes[di], &sp, bufs, 7);
      if (quietly(prepare_cusparse_op, &sp, op)) {
        cus_ms[op] = time_op(t, op == 0 ? run_cusparse_sddmm : run_cusparse_spmm, &sp);
        cus_dt[op] = di;
      }
      teardown_cusparse(&sp, bufs, 7);
    }
  }
  double cus_sddmm = cus_ms[0], cus_spmm = cus_ms[1];

  /* Dense cuBLAS, one slice timed, scaled by the slice count. */
  dense_args dn = {0};
  dn.S = S, dn.D = D;
  cublasCreate(&dn.handle);
  dn.q = random_device((size_t)(S * D), SPLAT_BF16, 4);
  dn.k = random_device((size_t)(S * D), SPLAT_BF16, 5);
  dn.v = random_device((size_t)(S * D), SPLAT_BF16, 6);
  CHECK_CUDA(cudaMalloc(&dn.s, (size_t)(S * S) * 2));
  CHECK_CUDA(cudaMalloc(&dn.o, (size_t)(S * D) * 2));
  row_ms[0] = time_op(t, run_dense_qk, &dn) * (double)slices;
  row_ms[1] = time_op(t, run_dense_pv, &dn) * (double)slices;
  cudaFree(dn.q), cudaFree(dn.k), cudaFree(dn.v), cudaFree(dn.s), cudaFree(dn.o);
  cublasDestroy(dn.handle);
  (void)row_ms;

  double flop2 = 2.0 * (double)slices * (double)D * (double)nnz;
  printf(
      "%-22s %6lld %4lld | sddmm %7.3f ms %6.1f TF/s  cusparse(%s) %8.3f  x%6.1f  cublas %7.3f"
      " | softmax %7.3f | spmm %7.3f ms %6.1f TF/s  cusparse(%s) %8.3f  x%6.1f  cublas %7.3f"
      " | all %7.3f\n",
      c->spec, (long long)S, (long long)D, splat_ms[0][0], flop2 / splat_ms[0][0] * 1e-9,
      dtype_names[cus_dt[0]], cus_sddmm, cus_sddmm / splat_ms[cus_dt[0]][0], row_ms[0],
      splat_ms[0][1], splat_ms[0][2], flop2 / splat_ms[0][2] * 1e-9, dtype_names[cus_dt[1]],
      cus_spmm, cus_spmm / splat_ms[cus_dt[1]][2], row_ms[1], splat_ms[0][3]);
  if (json) {
    for (int di = 0; di < NDT; di++) {
      fprintf(
          json,
          "{\"bench\":\"unfused\",\"device\":\"%s\",\"spec\":\"%s\",\"seq\":%lld,\"batch\":%lld,"
          "\"heads\":%lld,\"head_dim\":%lld,\"dtype\":\"%s\",\"nnz\":%lld,"
          "\"splat_sddmm_ms\":%.5f,\"splat_softmax_ms\":%.5f,\"splat_spmm_ms\":%.5f,"
          "\"splat_pipeline_ms\":%.5f,\"cusparse_sddmm_dtype\":\"%s\",\"cusparse_sddmm_ms\":%.5f,"
          "\"cusparse_spmm_dtype\":\"%s\",\"cusparse_spmm_ms\":%.5f,\"cublas_qk_ms\":%.5f,\"cublas_"
          "pv_ms\":%.5f}\n",
          device, c->spec, (long long)S, (long long)c->batch, (long long)c->heads, (long long)D,
          dtype_names[di], (long long)nnz, splat_ms[di][0], splat_ms[di][1], splat_ms[di][2],
          splat_ms[di][3], dtype_names[cus_dt[0]], cus_sddmm, dtype_names[cus_dt[1]], cus_spmm,
          row_ms[0], row_ms[1]);
    }
    fflush(json);
  }
  splat_pattern_destroy(p);
}

int main(int argc, char **argv) {
  const char *json_path = NULL, *only_spec = NULL;
  int64_t only_seq = 0, only_dim = 0;
  timer t = {0};
  t.repeat = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--json"))
      json_path = argv[i + 1];
    else if (!strcmp(argv[i], "--spec"))
      only_spec = argv[i + 1];
    else if (!strcmp(argv[i], "--seq"))
      only_seq = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--head-dim"))
      only_dim = atoll(argv[i + 1]);
    else if (!strcmp(argv[i], "--repeat"))
      t.repeat = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "usage: %s [--spec S] [--seq N] [--head-dim D] [--repeat R] [--json FILE]\n",
              argv[0]);
      return 2;
    }
  }
  splat_context_options opt = {SPLAT_BACKEND_CUDA, 0, 0};
  splat_context *ctx = NULL;
  CHECK_SPLAT(splat_context_create(&opt, &ctx), NULL);
  struct cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  CHECK_CUDA(cudaEventCreate(&t.start));
  CHECK_CUDA(cudaEventCreate(&t.stop));
  t.flush_bytes = (size_t)256 << 20;
  CHECK_CUDA(cudaMalloc(&t.flush, t.flush_bytes));
  FILE *json = json_path ? fopen(json_path, "a") : NULL;

  static const char *specs[] = {"window(256)", "dilated(256,2)", "blocked(512)",
                                "longformer(256,64)"};
  static const int64_t seqs[] = {4096, 16384}, dims[] = {64, 128};
  printf(
      "device: %s; batch 2, heads 16; times are medians of %d; ratio = cuSPARSE / splat in "
      "cuSPARSE's dtype\n",
      prop.name, t.repeat);
  /* --spec, --seq, --head-dim: a spec of its own, else a filter of the default cases; a
   * value given replaces that loop by itself, so each case runs once. */
  const size_t nspec = only_spec ? 1 : 4, nseq = only_seq ? 1 : 2, ndim = only_dim ? 1 : 2;
  for (size_t si = 0; si < nspec; si++) {
    for (size_t qi = 0; qi < nseq; qi++) {
      for (size_t di = 0; di < ndim; di++) {
        config c = {only_spec ? only_spec : specs[si], only_seq ? only_seq : seqs[qi], 2, 16,
                    only_dim ? only_dim : dims[di]};
        bench_case(&c, ctx, &t, json, prop.name);
      }
    }
  }
  printf("useful TFLOP/s (SDDMM, SpMM) = 2 x batch x heads x head_dim x nnz / time\n");
  if (json) fclose(json);
  splat_context_destroy(ctx);
  return 0;
}
