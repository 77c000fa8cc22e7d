/* driver.h — finding the CUDA driver at run time (dlopen of libcuda.so.1, entry points
 * through cuGetProcAddress), so splat loads and runs its CPU backend on machines with
 * no GPU or driver; error mapping; and devices opened through their primary context
 * (so splat shares the GPU with torch and jax in one process). */
#ifndef SPLAT_CUDA_DRIVER_H
#define SPLAT_CUDA_DRIVER_H

#include <stddef.h>

#include "cuda/cuda_types.h"
#include "splat.h"

/* Fills the CUDA fields of env (cuda_*, nvrtc_*, device_*). Returns SPLAT_OK when a
 * driver and a device are usable; otherwise SPLAT_ERR_NO_DEVICE with the reason in
 * the thread's last error and in why (host, cap chars, may be NULL). */
splat_status splat__cuda_probe(splat_environment *env, char *why, size_t cap);

/* The driver entry points splat uses, resolved once per process (the ABI of the
 * CUDA 12+ headers: the _v2 variants where cuda.h maps a name to one). */
typedef struct splat__cuda_api_table {
  int driver_version; /* cuDriverGetVersion, e.g. 13000 */
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *version);
  CUresult (*cuDeviceGetCount)(int *count);
  CUresult (*cuDeviceGet)(CUdevice *device, int ordinal);
  CUresult (*cuDeviceGetAttribute)(int *value, int attribute, CUdevice device);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *ctx, CUdevice device);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device);
  CUresult (*cuCtxPushCurrent)(CUcontext ctx);
  CUresult (*cuCtxPopCurrent)(CUcontext *ctx);
  CUresult (*cuCtxGetCurrent)(CUcontext *ctx);
  CUresult (*cuModuleLoadData)(CUmodule *module, const void *image);
  CUresult (*cuModuleUnload)(CUmodule module);
  CUresult (*cuModuleGetFunction)(CUfunction *func, CUmodule module, const char *name);
  CUresult (*cuFuncSetAttribute)(CUfunction func, int attribute, int value);
  CUresult (*cuFuncGetAttribute)(int *value, int attribute, CUfunction func);
  CUresult (*cuLaunchKernel)(CUfunction func, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                             unsigned block_x, unsigned block_y, unsigned block_z,
                             unsigned shared_bytes, CUstream stream, void **params, void **extra);
  CUresult (*cuMemAlloc)(CUdeviceptr *ptr, size_t bytes);
  CUresult (*cuMemFree)(CUdeviceptr ptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void *src, size_t bytes);
  CUresult (*cuMemcpyDtoH)(void *dst, CUdeviceptr src, size_t bytes);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t bytes, CUstream stream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream);
  CUresult (*cuStreamSynchronize)(CUstream stream);
  CUresult (*cuStreamWaitEvent)(CUstream stream, CUevent event, unsigned flags);
  CUresult (*cuEventCreate)(CUevent *event, unsigned flags);
  CUresult (*cuEventRecord)(CUevent event, CUstream stream);
  CUresult (*cuEventSynchronize)(CUevent event);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent start, CUevent end);
  CUresult (*cuEventDestroy)(CUevent event);
  CUresult (*cuGetErrorName)(CUresult error, const char **name);
  CUresult (*cuGetErrorString)(CUresult error, const char **text);
  CUresult (*cuPointerGetAttribute)(void *data, int attribute, CUdeviceptr ptr);
  splat__tma_encode_fn cuTensorMapEncodeTiled; /* NULL when the driver lacks it */
  CUresult (*cuLaunchKernelEx)(const splat__cu_launch_config *config, CUfunction func,
                               void **params, void **extra);     /* NULL when the driver lacks it */
  CUresult (*cuStreamIsCapturing)(CUstream stream, int *status); /* NULL when lacking */
  /* Stream-ordered allocation from a memory pool (workspace.h); NULL when the driver lacks
   * them (the context then has no pool). */
  CUresult (*cuMemPoolCreate)(CUmemoryPool *pool, const splat__cu_mem_pool_props *props);
  CUresult (*cuMemPoolDestroy)(CUmemoryPool pool);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool pool, int attribute, void *value);
  CUresult (*cuMemPoolTrimTo)(CUmemoryPool pool, size_t keep_bytes);
  CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr *ptr, size_t bytes, CUmemoryPool pool,
                                      CUstream stream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr ptr, CUstream stream);
} splat__cuda_api_table;

/* Whether a launch on `stream` may carry the programmatic-dependent attribute (pass 2 of a
 * two-pass attention): the driver has cuLaunchKernelEx, and either records programmatic
 * dependencies in graphs (12.3 or newer) or reports that `stream` is not being captured.
 * An older driver refuses the attribute under capture, and that refusal invalidates the
 * capture, so it is never tried there. */
int splat__cuda_pdl_allowed(const splat__cuda_api_table *api, CUstream stream);

/* The process-wide table, loaded (dlopen, cuGetProcAddress, cuInit) on first use.
 * out: host, receives a pointer to the static table. Returns SPLAT_ERR_NO_DEVICE
 * with a sentence when there is no driver, it is too old, or cuInit fails (for
 * example because no GPU is present); the outcome is computed once. */
splat_status splat__cuda_api(const splat__cuda_api_table **out);

/* SPLAT_OK when rc is CUDA_SUCCESS; otherwise records "<what> failed: CUDA_ERROR_X
 * (description)" and returns SPLAT_ERR_OUT_OF_MEMORY for CUDA_ERROR_OUT_OF_MEMORY,
 * SPLAT_ERR_CUDA for everything else. what: host string naming the call. */
splat_status splat__cuda_check(CUresult rc, const char *what);

/* SPLAT_OK when ptr is memory that device `ordinal` can use (device memory of that
 * device, managed memory, or host memory registered with CUDA); otherwise
 * SPLAT_ERR_INVALID_ARGUMENT with "<fn>: <name>.data=<ptr> is ...". fn, name: host
 * strings for the message. */
splat_status splat__cuda_check_pointer(const char *fn, const char *name, const void *ptr,
                                       int ordinal);

/* An opened device: its primary context is retained until splat__cuda_device_close. */
typedef struct splat__cuda_device {
  int ordinal;
  CUdevice device;
  CUcontext context; /* the device's primary context (retained) */
  int cc_major, cc_minor;
  int sm_count;
  int max_threads_per_block;
  int max_smem_per_block;       /* default limit, bytes */
  int max_smem_per_block_optin; /* with cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES) */
  int max_smem_per_sm;
  int memory_pools; /* 1 when it serves stream-ordered allocation from pools (workspace.h) */
  char name[128];
  char arch[16]; /* what to compile for: "sm_90a" for 9.0, else "sm_XY" */
} splat__cuda_device;

/* Opens device `ordinal` and retains its primary context. out: host. Fails with
 * SPLAT_ERR_NO_DEVICE without a driver, SPLAT_ERR_INVALID_ARGUMENT for an ordinal
 * out of range, SPLAT_ERR_CUDA when the driver refuses. */
splat_status splat__cuda_device_open(int ordinal, splat__cuda_device *out);
/* Releases the primary context; accepts NULL and a zeroed / already closed device. */
void splat__cuda_device_close(splat__cuda_device *dev);
/* Makes the device's primary context current on the calling thread (push) / restores
 * the previous one (pop). Pair them around every driver call that needs a context. */
splat_status splat__cuda_push(const splat__cuda_device *dev);
splat_status splat__cuda_pop(void);

/* The arch string to compile for a compute capability: "sm_90a" for 9.0 (wgmma, TMA),
 * "sm_<major><minor>" otherwise. buf: host, cap chars (16 is plenty). */
void splat__cuda_arch_name(int cc_major, int cc_minor, char *buf, size_t cap);

#endif
