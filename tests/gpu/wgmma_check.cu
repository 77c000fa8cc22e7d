/* wgmma_check.cu — GPU check of the Hopper building blocks of kernels/wgmma.cuh (not part
 * of ctest; run on an H100/H200). One CTA of one warpgroup (128 threads) per case:
 *   1. gathers Q [64][D] (rows through an index array: a random choice of query rows) and
 *      K, V [N][D] (dilated keys 3 + 2j) into 128B-swizzled shared memory, either by
 *      cp.async (one 16-byte chunk per copy, splat_sw128_tile_off) or by TMA
 *      (SWIZZLE_128B tensor maps; K and V as a 3-d view {D, 2, seq/2} whose middle
 *      coordinate fixes the dilation phase) completing on mbarriers;
 *   2. S = Q K^T by SS wgmma over D/16 k16 steps (K-major descriptors), first step with
 *      scale_d = 0 onto NaN-filled accumulators; writes S (fp32);
 *   3. P = S rounded to 16 bits in registers (accumulator -> A fragment, no shuffles),
 *      O = P V by RS wgmma over N/16 steps, V as an MN-major B (tnspB = 1); writes O.
 * dtype bf16 and f16, head_dim D 64 and 128, key tile N 64 and 128. Host: random
 * inputs in [-1, 1] rounded to the dtype; float64 references from the rounded inputs
 * (O from P = the dtype rounding of the GPU's S, which is exactly what the kernel fed
 * the second product); outputs poisoned with NaN first. Tolerance (DESIGN.md §7, fp32
 * accumulation of exact 16-bit products): |err| <= 1e-5 * sum_k |a_k b_k| per element;
 * NaN never passes. Prints one line per check and "N passed, N failed"; exit status 1
 * on a failure, 2 when no sm_90 device is present.
 *
 * Build (from the repository root; no -lcuda: the TMA encoder comes from the runtime's
 * driver entry point):
 *   nvcc -gencode=arch=compute_90a,code=sm_90a -std=c++17 -Ikernels -Xptxas -v \
 *        -o /tmp/wgmma_check tests/gpu/wgmma_check.cu
 * (-arch=sm_90a works with nvcc 13.0 too.) CMake: -DSPLAT_BUILD_GPU_TESTS=ON builds the
 * target splat_wgmma_check (needs a CUDA compiler). */
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "../../kernels/wgmma.cuh"

#define CK(x)                                                                             \
  do {                                                                                    \
    cudaError_t e_ = (x);                                                                 \
    if (e_ != cudaSuccess) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      exit(1);                                                                            \
    }                                                                                     \
  } while (0)

static constexpr int kThreads = 128;
static constexpr int kM = 64; /* query rows of the warpgroup */

/* ------------------------------------------------------------------ device */

/* Gathers ROWS rows (rows[r] of a [*, D] 16-bit matrix) into a swizzled tile. */
template <int D, int ROWS>
__device__ void gather_tile(uint8_t *tile, const uint16_t *src, const int *rows) {
  constexpr int CH = D / 8;
  for (int c = threadIdx.x; c < ROWS * CH; c += kThreads) {
    const int r = c / CH, ch = c % CH;
    splat_cp_async16(tile + splat_sw128_tile_off<ROWS>(r, ch), src + (int64_t)rows[r] * D + ch * 8,
                     true);
  }
}

template <int DT, int D, int N, bool TMA>
__global__ void __launch_bounds__(kThreads, 1)
    check_kernel(const uint16_t *q, const uint16_t *k, const uint16_t *v, const int *qrow,
                 const int *krow, float *S, float *O, uint64_t *descs,
                 const __grid_constant__ splat_tensor_map mq,
                 const __grid_constant__ splat_tensor_map mk,
                 const __grid_constant__ splat_tensor_map mv, int q0, int kphase, int kj0) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t bars[2];
  uint8_t *smem = (uint8_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  uint8_t *sQ = smem, *sK = sQ + kM * D * 2, *sV = sK + N * D * 2;
  const int t = threadIdx.x;

  if (TMA) {
    if (t == 0) {
      splat_tma_prefetch_map(&mq);
      splat_tma_prefetch_map(&mk);
      splat_tma_prefetch_map(&mv);
      splat_mbar_init(&bars[0], 1);
      splat_mbar_init(&bars[1], 1);
      splat_mbar_fence_init();
    }
    __syncthreads();
    if (t == 0) {
      splat_mbar_arrive_expect_tx(&bars[0], (kM + N) * D * 2);
      for (int p = 0; p < D / 64; p++) {
        splat_tma_load_2d(sQ + p * kM * 128, &mq, &bars[0], p * 64, q0);
        splat_tma_load_3d(sK + p * N * 128, &mk, &bars[0], p * 64, kphase, kj0);
      }
      splat_mbar_arrive_expect_tx(&bars[1], N * D * 2);
      for (int p = 0; p < D / 64; p++)
        splat_tma_load_3d(sV + p * N * 128, &mv, &bars[1], p * 64, kphase, kj0);
    }
    splat_mbar_wait(&bars[0], 0);
  } else {
    gather_tile<D, kM>(sQ, q, qrow);
    gather_tile<D, N>(sK, k, krow);
    splat_cp_async_commit();
    gather_tile<D, N>(sV, v, krow);
    splat_cp_async_commit();
    splat_cp_async_wait<1>();
    splat_fence_proxy_async();
    __syncthreads();
  }

  const uint32_t aQ = splat_smem_addr(sQ), aK = splat_smem_addr(sK), aV = splat_smem_addr(sV);
  if (t == 0) {
    descs[0] = splat_wgmma_desc_k<kM>(aQ, 0) - (aQ >> 4);
    descs[1] = splat_wgmma_desc_k<N>(aK, 0) - (aK >> 4);
    descs[2] = splat_wgmma_desc_mn<N>(aV, 0) - (aV >> 4);
  }

  /* S = Q K^T */
  float s[N / 2];
#pragma unroll
  for (int i = 0; i < N / 2; i++) s[i] = __int_as_float(0x7fc00000);
  splat_wgmma_fence_acc(s);
  splat_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++)
    splat_wgmma_ss<DT, N>(s, splat_wgmma_desc_k<kM>(aQ, kk), splat_wgmma_desc_k<N>(aK, kk), kk > 0);
  splat_wgmma_commit();
  splat_wgmma_wait<0>();
  splat_wgmma_fence_acc(s);
#pragma unroll
  for (int i = 0; i < N / 2; i++)
    S[splat_wgmma_acc_row(t, i) * N + splat_wgmma_acc_col(t, i)] = s[i];

  /* P = 16-bit S in registers; O = P V */
  uint32_t p[N / 16][4];
  splat_wgmma_acc_to_a<DT, N>(s, p);
  if (TMA) {
    splat_mbar_wait(&bars[1], 0);
  } else {
    splat_cp_async_wait<0>();
    splat_fence_proxy_async();
    __syncthreads();
  }
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; i++) o[i] = __int_as_float(0x7fc00000);
  splat_wgmma_fence_acc(o);
  splat_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < N / 16; kk++)
    splat_wgmma_rs<DT, D, 1>(o, p[kk], splat_wgmma_desc_mn<N>(aV, kk), kk > 0);
  splat_wgmma_commit();
  splat_wgmma_wait<0>();
  splat_wgmma_fence_acc(o);
#pragma unroll
  for (int i = 0; i < D / 2; i++)
    O[splat_wgmma_acc_row(t, i) * D + splat_wgmma_acc_col(t, i)] = o[i];
}

/* ------------------------------------------------------------------ host */

static uint16_t to16(int dt, float x) {
  if (dt == SPLAT_BF16) {
    const __nv_bfloat16_raw r = __float2bfloat16_rn(x);
    return r.x;
  }
  const __half_raw r = __float2half_rn(x);
  return r.x;
}
static double from16(int dt, uint16_t u) {
  if (dt == SPLAT_BF16) {
    uint32_t w = (uint32_t)u << 16;
    float f;
    memcpy(&f, &w, 4);
    return f;
  }
  __half_raw r;
  r.x = u;
  return __half2float(__half(r));
}

typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                              const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                              const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
static encode_fn encode;

/* A SWIZZLE_128B map of rank `rank` over 16-bit data; dims/strides innermost first
 * (strides in bytes, rank - 1 of them). */
static splat_tensor_map make_map(int dt, void *base, int rank, const cuuint64_t *dims,
                                 const cuuint64_t *strides, const cuuint32_t *box) {
  CUtensorMap m;
  cuuint32_t es[3] = {1, 1, 1};
  CUresult r = encode(
      &m, dt == SPLAT_BF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
      (cuuint32_t)rank, base, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", (int)r);
    exit(1);
  }
  static_assert(sizeof(CUtensorMap) == sizeof(splat_tensor_map), "tensor map size");
  splat_tensor_map s;
  memcpy(&s, &m, sizeof s);
  return s;
}

static int passed, failed;

/* Compares out[rows][cols] with ref (float64) under tol = 1e-5 * mag per element. */
static void compare(const char *what, const std::vector<float> &out, const std::vector<double> &ref,
                    const std::vector<double> &mag, const char *extra) {
  double worst = 0; /* max err / mag */
  long bad = 0, nonfinite = 0;
  for (size_t i = 0; i < out.size(); i++) {
    if (!std::isfinite(out[i])) {
      nonfinite++;
      continue;
    }
    const double err = fabs((double)out[i] - ref[i]);
    const double m = mag[i] > 0 ? mag[i] : 1e-30;
    if (err / m > worst) worst = err / m;
    if (err > 1e-5 * m) bad++;
  }
  const bool ok = bad == 0 && nonfinite == 0;
  printf("%s %-34s max|err|/sum|ab| %.2e (tol 1e-5)  bad %ld  nonfinite %ld%s%s\n",
         ok ? "PASS" : "FAIL", what, worst, bad, nonfinite, extra[0] ? "  " : "", extra);
  ok ? passed++ : failed++;
}

template <int DT, int D, int N, bool TMA>
static void run_case(std::mt19937 &rng) {
  const int seq_q = 80, seq_k = 2 * N + 8; /* seq_k even: the 3-d view {D, 2, seq_k/2} */
  std::uniform_real_distribution<float> uni(-1.f, 1.f);
  std::vector<uint16_t> hq((size_t)seq_q * D), hk((size_t)seq_k * D), hv((size_t)seq_k * D);
  for (auto &x : hq) x = to16(DT, uni(rng));
  for (auto &x : hk) x = to16(DT, uni(rng));
  for (auto &x : hv) x = to16(DT, uni(rng));
  /* Rows: TMA reads query rows q0 .. q0+63 and keys kphase + 2 (kj0 + j) = 3 + 2j;
   * cp.async gathers a random choice of query rows and the same dilated keys. */
  const int q0 = 5, kphase = 1, kj0 = 1;
  std::vector<int> qrow(kM), krow(N);
  if (TMA) {
    for (int i = 0; i < kM; i++) qrow[i] = q0 + i;
  } else {
    std::vector<int> perm(seq_q);
    for (int i = 0; i < seq_q; i++) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int i = 0; i < kM; i++) qrow[i] = perm[i];
  }
  for (int j = 0; j < N; j++) krow[j] = kphase + 2 * (kj0 + j);

  uint16_t *dq, *dk, *dv;
  int *dqrow, *dkrow;
  float *dS, *dO;
  uint64_t *ddesc;
  CK(cudaMalloc(&dq, hq.size() * 2));
  CK(cudaMalloc(&dk, hk.size() * 2));
  CK(cudaMalloc(&dv, hv.size() * 2));
  CK(cudaMalloc(&dqrow, kM * sizeof(int)));
  CK(cudaMalloc(&dkrow, N * sizeof(int)));
  CK(cudaMalloc(&dS, (size_t)kM * N * 4));
  CK(cudaMalloc(&dO, (size_t)kM * D * 4));
  CK(cudaMalloc(&ddesc, 3 * 8));
  CK(cudaMemcpy(dq, hq.data(), hq.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dk, hk.data(), hk.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dv, hv.data(), hv.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dqrow, qrow.data(), kM * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dkrow, krow.data(), N * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemset(dS, 0xFF, (size_t)kM * N * 4)); /* NaN poison */
  CK(cudaMemset(dO, 0xFF, (size_t)kM * D * 4));

  splat_tensor_map mq, mk, mv;
  memset(&mq, 0, sizeof mq);
  mk = mv = mq;
  if (TMA) {
    const cuuint64_t qd[2] = {(cuuint64_t)D, (cuuint64_t)seq_q}, qs[1] = {(cuuint64_t)D * 2};
    const cuuint32_t qb[2] = {64, kM};
    mq = make_map(DT, dq, 2, qd, qs, qb);
    const cuuint64_t kd[3] = {(cuuint64_t)D, 2, (cuuint64_t)seq_k / 2};
    const cuuint64_t ks[2] = {(cuuint64_t)D * 2, (cuuint64_t)D * 4};
    const cuuint32_t kb[3] = {64, 1, N};
    mk = make_map(DT, dk, 3, kd, ks, kb);
    mv = make_map(DT, dv, 3, kd, ks, kb);
  }

  const size_t smem = (size_t)(kM + 2 * N) * D * 2 + 1024;
  auto kern = check_kernel<DT, D, N, TMA>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  kern<<<1, kThreads, smem>>>(dq, dk, dv, dqrow, dkrow, dS, dO, ddesc, mq, mk, mv, q0, kphase, kj0);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());

  std::vector<float> S((size_t)kM * N), O((size_t)kM * D);
  uint64_t desc[3];
  CK(cudaMemcpy(S.data(), dS, S.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(O.data(), dO, O.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(desc, ddesc, sizeof desc, cudaMemcpyDeviceToHost));

  /* S reference */
  std::vector<double> Sref(S.size()), Smag(S.size());
  for (int i = 0; i < kM; i++)
    for (int j = 0; j < N; j++) {
      double acc = 0, mag = 0;
      for (int d = 0; d < D; d++) {
        const double a = from16(DT, hq[(size_t)qrow[i] * D + d]),
                     b = from16(DT, hk[(size_t)krow[j] * D + d]);
        acc += a * b;
        mag += fabs(a * b);
      }
      Sref[(size_t)i * N + j] = acc;
      Smag[(size_t)i * N + j] = mag;
    }
  /* O reference from P = dtype(S_gpu) */
  std::vector<double> Oref(O.size()), Omag(O.size());
  for (int i = 0; i < kM; i++)
    for (int d = 0; d < D; d++) {
      double acc = 0, mag = 0;
      for (int j = 0; j < N; j++) {
        const float sv = S[(size_t)i * N + j];
        const double pv = std::isfinite(sv) ? from16(DT, to16(DT, sv)) : NAN;
        const double b = from16(DT, hv[(size_t)krow[j] * D + d]);
        acc += pv * b;
        mag += fabs(pv * b);
      }
      Oref[(size_t)i * D + d] = acc;
      Omag[(size_t)i * D + d] = mag;
    }

  char name[96], extra[160];
  const char *ty = DT == SPLAT_BF16 ? "bf16" : "f16 ";
  const char *ld = TMA ? "tma     " : "cp.async";
  auto fields = [](uint64_t x, char *buf, size_t cap) {
    snprintf(buf, cap, "LBO %u SBO %u sw %u", (unsigned)((x >> 16) & 0x3FFF) << 4,
             (unsigned)((x >> 32) & 0x3FFF) << 4, (unsigned)(x >> 62));
  };
  char fq[48], fk[48], fv[48];
  fields(desc[0], fq, sizeof fq);
  fields(desc[1], fk, sizeof fk);
  fields(desc[2], fv, sizeof fv);
  snprintf(name, sizeof name, "%s D=%-3d N=%-3d %s S=QK^T", ty, D, N, ld);
  snprintf(extra, sizeof extra, "[Q: %s | K: %s]", fq, fk);
  compare(name, S, Sref, Smag, extra);
  snprintf(name, sizeof name, "%s D=%-3d N=%-3d %s O=PV", ty, D, N, ld);
  snprintf(extra, sizeof extra, "[V: %s]", fv);
  compare(name, O, Oref, Omag, extra);

  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dqrow);
  cudaFree(dkrow);
  cudaFree(dS);
  cudaFree(dO);
  cudaFree(ddesc);
}

template <int DT, bool TMA>
static void run_dtype(std::mt19937 &rng) {
  run_case<DT, 64, 64, TMA>(rng);
  run_case<DT, 64, 128, TMA>(rng);
  run_case<DT, 128, 64, TMA>(rng);
  run_case<DT, 128, 128, TMA>(rng);
}

int main() {
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  if (prop.major != 9) {
    fprintf(stderr, "needs an sm_90 device\n");
    return 2;
  }
  cudaDriverEntryPointQueryResult qr;
  void *fn = nullptr;
  CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                      &qr));
  if (!fn || qr != cudaDriverEntryPointSuccess) {
    fprintf(stderr, "cuTensorMapEncodeTiled not found\n");
    return 2;
  }
  encode = (encode_fn)fn;

  std::mt19937 rng(20250611u);
  run_dtype<SPLAT_BF16, false>(rng);
  run_dtype<SPLAT_F16, false>(rng);
  run_dtype<SPLAT_BF16, true>(rng);
  run_dtype<SPLAT_F16, true>(rng);
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
