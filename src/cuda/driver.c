/* driver.c — dlopen of libcuda.so.1: the environment probe (a few entry points by
 * dlsym), the process-wide driver table (everything through cuGetProcAddress), error
 * mapping, and devices opened through their primary context. */
#include "cuda/driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "cuda/nvrtc.h"

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_device_name_fn)(char *, int, int);
typedef int (*cu_device_attr_fn)(int *, int, int);
typedef int (*cu_error_string_fn)(int, const char **);

enum { CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 };

/* Opens the first library of a NULL-terminated list of sonames, or returns NULL with
 * dlerror()'s text for the first name in first_error (host, cap chars). */
static void *open_first(const char *const *names, char *first_error, size_t cap) {
  for (int i = 0; names[i]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    if (i == 0) {
      const char *err = dlerror();
      snprintf(first_error, cap, "%s", err ? err : "not found");
    }
  }
  return NULL;
}

static splat_status no_device(char *why, size_t cap, const char *fmt, const char *detail) {
  char buf[512];
  snprintf(buf, sizeof buf, fmt, detail ? detail : "");
  if (why && cap) snprintf(why, cap, "%s", buf);
  return splat__fail(SPLAT_ERR_NO_DEVICE, "%s", buf);
}

static void probe_nvrtc(splat_environment *env) {
  int major = 0, minor = 0;
  if (splat__nvrtc_version(&major, &minor) == SPLAT_OK) {
    env->nvrtc_available = 1;
    env->nvrtc_version = major * 1000 + minor * 10;
  }
}

splat_status splat__cuda_probe(splat_environment *env, char *why, size_t cap) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  probe_nvrtc(env);
  char first_error[256] = "";
  void *h = open_first(names, first_error, sizeof first_error);
  if (!h) {
    return no_device(why, cap, "no CUDA driver: dlopen(libcuda.so.1) failed (%s)", first_error);
  }
  cu_init_fn init = (cu_init_fn)(uintptr_t)dlsym(h, "cuInit");
  cu_int_fn driver_version = (cu_int_fn)(uintptr_t)dlsym(h, "cuDriverGetVersion");
  cu_int_fn device_count = (cu_int_fn)(uintptr_t)dlsym(h, "cuDeviceGetCount");
  cu_device_get_fn device_get = (cu_device_get_fn)(uintptr_t)dlsym(h, "cuDeviceGet");
  cu_device_name_fn device_name = (cu_device_name_fn)(uintptr_t)dlsym(h, "cuDeviceGetName");
  cu_device_attr_fn device_attr = (cu_device_attr_fn)(uintptr_t)dlsym(h, "cuDeviceGetAttribute");
  cu_error_string_fn error_string = (cu_error_string_fn)(uintptr_t)dlsym(h, "cuGetErrorString");
  if (!init || !driver_version || !device_count || !device_get || !device_name || !device_attr) {
    dlclose(h);
    return no_device(why, cap, "the CUDA driver library lacks basic entry points%s", NULL);
  }
  int rc = init(0);
  if (rc != 0) {
    const char *msg = NULL;
    if (error_string) error_string(rc, &msg);
    splat_status st = no_device(why, cap, "cuInit failed: %s", msg ? msg : "unknown error");
    dlclose(h);
    return st;
  }
  driver_version(&env->cuda_driver_version);
  int count = 0;
  if (device_count(&count) != 0 || count <= 0) {
    dlclose(h);
    return no_device(why, cap, "the CUDA driver found no device%s", NULL);
  }
  env->cuda_devices = count;
  int dev = 0;
  if (device_get(&dev, 0) == 0) {
    device_name(env->device_name, (int)sizeof env->device_name, dev);
    device_attr(&env->device_cc_major, CU_ATTR_CC_MAJOR, dev);
    device_attr(&env->device_cc_minor, CU_ATTR_CC_MINOR, dev);
  }
  env->cuda_available = 1;
  if (why && cap) why[0] = '\0';
  /* The driver stays loaded: unloading libcuda after cuInit is unsafe. */
  return SPLAT_OK;
}

/* ---------------------------------------------------------------- the driver table */

typedef CUresult (*get_proc_v2_fn)(const char *symbol, void **pfn, int cuda_version, uint64_t flags,
                                   int *status);
typedef CUresult (*get_proc_v1_fn)(const char *symbol, void **pfn, int cuda_version,
                                   uint64_t flags);

/* The ABI version we ask cuGetProcAddress for: the signatures in driver.h are those
 * of the CUDA 12.0 headers (cuMemAlloc_v2, cuCtxPushCurrent_v2, ...). */
#define SPLAT__CUDA_ABI 12000

static pthread_once_t api_once = PTHREAD_ONCE_INIT;
static splat__cuda_api_table api_table;
static int api_ok;
static char api_why[512];

/* Entry points by base name and their slot in the table. */
static const struct {
  const char *name;
  size_t offset;
} api_entries[] = {
#define ENTRY(f) \
  { #f, offsetof(splat__cuda_api_table, f) }
    ENTRY(cuInit),
    ENTRY(cuDriverGetVersion),
    ENTRY(cuDeviceGetCount),
    ENTRY(cuDeviceGet),
    ENTRY(cuDeviceGetAttribute),
    ENTRY(cuDeviceGetName),
    ENTRY(cuDevicePrimaryCtxRetain),
    ENTRY(cuDevicePrimaryCtxRelease),
    ENTRY(cuCtxPushCurrent),
    ENTRY(cuCtxPopCurrent),
    ENTRY(cuCtxGetCurrent),
    ENTRY(cuModuleLoadData),
    ENTRY(cuModuleUnload),
    ENTRY(cuModuleGetFunction),
    ENTRY(cuFuncSetAttribute),
    ENTRY(cuFuncGetAttribute),
    ENTRY(cuLaunchKernel),
    ENTRY(cuMemAlloc),
    ENTRY(cuMemFree),
    ENTRY(cuMemcpyHtoD),
    ENTRY(cuMemcpyDtoH),
    ENTRY(cuMemcpyHtoDAsync),
    ENTRY(cuMemsetD8Async),
    ENTRY(cuStreamSynchronize),
    ENTRY(cuStreamWaitEvent),
    ENTRY(cuEventCreate),
    ENTRY(cuEventRecord),
    ENTRY(cuEventSynchronize),
    ENTRY(cuEventElapsedTime),
    ENTRY(cuEventDestroy),
    ENTRY(cuGetErrorName),
    ENTRY(cuGetErrorString),
    ENTRY(cuPointerGetAttribute),
    ENTRY(cuTensorMapEncodeTiled),
    ENTRY(cuLaunchKernelEx),
    ENTRY(cuStreamIsCapturing),
    ENTRY(cuMemPoolCreate),
    ENTRY(cuMemPoolDestroy),
    ENTRY(cuMemPoolSetAttribute),
    ENTRY(cuMemPoolTrimTo),
    ENTRY(cuMemAllocFromPoolAsync),
    ENTRY(cuMemFreeAsync),
#undef ENTRY
};

static void set_slot(const char *name, void *fn) {
  for (size_t i = 0; i < sizeof api_entries / sizeof api_entries[0]; i++) {
    if (!strcmp(api_entries[i].name, name)) {
      memcpy((char *)&api_table + api_entries[i].offset, &fn, sizeof fn);
    }
  }
}

static void *get_slot(size_t i) {
  void *fn = NULL;
  memcpy(&fn, (const char *)&api_table + api_entries[i].offset, sizeof fn);
  return fn;
}

static void load_api(void) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  char first[256] = "";
  void *lib = open_first(names, first, sizeof first);
  if (!lib) {
    snprintf(api_why, sizeof api_why,
             "no CUDA driver: dlopen(libcuda.so.1) failed (%s); CUDA needs an NVIDIA GPU and "
             "its driver",
             first);
    return;
  }
  /* Error strings first, by dlsym, so the failures below can be described. */
  set_slot("cuGetErrorName", dlsym(lib, "cuGetErrorName"));
  set_slot("cuGetErrorString", dlsym(lib, "cuGetErrorString"));
  get_proc_v2_fn get_v2 = (get_proc_v2_fn)(uintptr_t)dlsym(lib, "cuGetProcAddress_v2");
  get_proc_v1_fn get_v1 = (get_proc_v1_fn)(uintptr_t)dlsym(lib, "cuGetProcAddress");
  if (!get_v2 && !get_v1) {
    snprintf(api_why, sizeof api_why,
             "the CUDA driver is too old: libcuda.so.1 has no cuGetProcAddress (driver 11.3 or "
             "newer is needed, 12.0 or newer recommended)");
    return;
  }
  for (size_t i = 0; i < sizeof api_entries / sizeof api_entries[0]; i++) {
    void *fn = NULL;
    int status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult rc =
        get_v2 ? get_v2(api_entries[i].name, &fn, SPLAT__CUDA_ABI, CU_GET_PROC_ADDRESS_DEFAULT,
                        &status)
               : get_v1(api_entries[i].name, &fn, SPLAT__CUDA_ABI, CU_GET_PROC_ADDRESS_DEFAULT);
    if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
      if (get_slot(i)) continue; /* the error-string fallbacks from dlsym */
      /* Optional: without it the warp-specialised attention kernel gathers every key
       * sub-tile (tma_views.c takes a NULL encoder). */
      if (!strcmp(api_entries[i].name, "cuTensorMapEncodeTiled")) continue;
      /* Optional: without the first, pass 2 of a two-pass attention waits for pass 1 to
       * end before it starts (cuda_backend.c launch_tile); without the second, it does so
       * on drivers before 12.3 (splat__cuda_pdl_allowed). */
      if (!strcmp(api_entries[i].name, "cuLaunchKernelEx") ||
          !strcmp(api_entries[i].name, "cuStreamIsCapturing"))
        continue;
      /* Optional: without them the context has no workspace pool and its attention plans
       * run one pass (workspace.c). */
      if (!strncmp(api_entries[i].name, "cuMemPool", 9) ||
          !strcmp(api_entries[i].name, "cuMemAllocFromPoolAsync") ||
          !strcmp(api_entries[i].name, "cuMemFreeAsync"))
        continue;
      snprintf(api_why, sizeof api_why,
               "the CUDA driver lacks %s (cuGetProcAddress returned %d, status %d); a driver "
               "for CUDA 12.0 or newer is needed",
               api_entries[i].name, (int)rc, status);
      return;
    }
    memcpy((char *)&api_table + api_entries[i].offset, &fn, sizeof fn);
  }
  CUresult rc = api_table.cuInit(0);
  if (rc != CUDA_SUCCESS) {
    const char *name = NULL, *text = NULL;
    if (api_table.cuGetErrorName) api_table.cuGetErrorName(rc, &name);
    if (api_table.cuGetErrorString) api_table.cuGetErrorString(rc, &text);
    snprintf(api_why, sizeof api_why, "cuInit failed: %s (%s)%s", name ? name : "unknown error",
             text ? text : "no description",
             rc == CUDA_ERROR_NO_DEVICE ? "; no CUDA-capable GPU is visible" : "");
    return;
  }
  api_table.cuDriverGetVersion(&api_table.driver_version);
  api_ok = 1;
  splat__log(SPLAT__LOG_INFO, "CUDA driver %d.%d loaded", api_table.driver_version / 1000,
             api_table.driver_version % 1000 / 10);
  /* The driver stays loaded for the life of the process. */
}

splat_status splat__cuda_api(const splat__cuda_api_table **out) {
  pthread_once(&api_once, load_api);
  if (out) *out = api_ok ? &api_table : NULL;
  if (!api_ok) {
    splat__log(SPLAT__LOG_DEBUG, "%s", api_why);
    return splat__fail(SPLAT_ERR_NO_DEVICE, "%s", api_why);
  }
  return SPLAT_OK;
}

splat_status splat__cuda_check(CUresult rc, const char *what) {
  if (rc == CUDA_SUCCESS) return SPLAT_OK;
  const char *name = NULL, *text = NULL;
  if (api_table.cuGetErrorName) api_table.cuGetErrorName(rc, &name);
  if (api_table.cuGetErrorString) api_table.cuGetErrorString(rc, &text);
  char fallback[32];
  if (!name) {
    snprintf(fallback, sizeof fallback, "CUDA error %d", (int)rc);
    name = fallback;
  }
  splat_status st = rc == CUDA_ERROR_OUT_OF_MEMORY ? SPLAT_ERR_OUT_OF_MEMORY : SPLAT_ERR_CUDA;
  splat__log(SPLAT__LOG_WARN, "%s failed: %s (%s)", what ? what : "a CUDA call", name,
             text ? text : "no description");
  return splat__fail(st, "%s failed: %s (%s)", what ? what : "a CUDA call", name,
                     text ? text : "no description");
}

/* ---------------------------------------------------------------- devices */

void splat__cuda_arch_name(int cc_major, int cc_minor, char *buf, size_t cap) {
  if (!buf || !cap) return;
  snprintf(buf, cap, "sm_%d%d%s", cc_major, cc_minor, cc_major == 9 && cc_minor == 0 ? "a" : "");
}

splat_status splat__cuda_device_open(int ordinal, splat__cuda_device *out) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__cuda_device_open: out is NULL");
  memset(out, 0, sizeof *out);
  out->ordinal = -1;
  const splat__cuda_api_table *cu = NULL;
  splat_status st = splat__cuda_api(&cu);
  if (st != SPLAT_OK) return st;
  int count = 0;
  st = splat__cuda_check(cu->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (st != SPLAT_OK) return st;
  if (ordinal < 0 || ordinal >= count) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "CUDA device %d does not exist: the driver sees %d device(s)", ordinal,
                       count);
  }
  CUdevice dev = 0;
  st = splat__cuda_check(cu->cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  if (st != SPLAT_OK) return st;
  static const struct {
    int attribute;
    size_t offset;
    const char *name;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, offsetof(splat__cuda_device, cc_major),
       "compute capability major"},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, offsetof(splat__cuda_device, cc_minor),
       "compute capability minor"},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(splat__cuda_device, sm_count),
       "multiprocessor count"},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
       offsetof(splat__cuda_device, max_threads_per_block), "max threads per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK,
       offsetof(splat__cuda_device, max_smem_per_block), "max shared memory per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
       offsetof(splat__cuda_device, max_smem_per_block_optin),
       "max shared memory per block (opt-in)"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
       offsetof(splat__cuda_device, max_smem_per_sm), "max shared memory per multiprocessor"},
      {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, offsetof(splat__cuda_device, memory_pools),
       "memory pools supported"},
  };
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0]; i++) {
    char what[96];
    snprintf(what, sizeof what, "cuDeviceGetAttribute(%s)", attrs[i].name);
    int value = 0;
    st = splat__cuda_check(cu->cuDeviceGetAttribute(&value, attrs[i].attribute, dev), what);
    if (st != SPLAT_OK) return st;
    memcpy((char *)out + attrs[i].offset, &value, sizeof value);
  }
  st = splat__cuda_check(cu->cuDeviceGetName(out->name, (int)sizeof out->name, dev),
                         "cuDeviceGetName");
  if (st != SPLAT_OK) return st;
  out->name[sizeof out->name - 1] = '\0';
  splat__cuda_arch_name(out->cc_major, out->cc_minor, out->arch, sizeof out->arch);
  CUcontext ctx = NULL;
  st = splat__cuda_check(cu->cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  if (st != SPLAT_OK) return st;
  out->ordinal = ordinal;
  out->device = dev;
  out->context = ctx;
  splat__log(SPLAT__LOG_INFO, "CUDA device %d: %s, sm_%d%d, %d SMs, %d bytes shared/block (opt-in)",
             ordinal, out->name, out->cc_major, out->cc_minor, out->sm_count,
             out->max_smem_per_block_optin);
  return SPLAT_OK;
}

void splat__cuda_device_close(splat__cuda_device *dev) {
  if (!dev || !dev->context) return;
  const splat__cuda_api_table *cu = NULL;
  if (splat__cuda_api(&cu) == SPLAT_OK) {
    (void)splat__cuda_check(cu->cuDevicePrimaryCtxRelease(dev->device),
                            "cuDevicePrimaryCtxRelease");
  }
  dev->context = NULL;
  dev->ordinal = -1;
}

splat_status splat__cuda_push(const splat__cuda_device *dev) {
  if (!dev || !dev->context) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__cuda_push: the device is not open");
  }
  const splat__cuda_api_table *cu = NULL;
  splat_status st = splat__cuda_api(&cu);
  if (st != SPLAT_OK) return st;
  return splat__cuda_check(cu->cuCtxPushCurrent(dev->context), "cuCtxPushCurrent");
}

splat_status splat__cuda_pop(void) {
  const splat__cuda_api_table *cu = NULL;
  splat_status st = splat__cuda_api(&cu);
  if (st != SPLAT_OK) return st;
  CUcontext ctx = NULL;
  return splat__cuda_check(cu->cuCtxPopCurrent(&ctx), "cuCtxPopCurrent");
}

/* Attributes of cuPointerGetAttribute (cuda.h's CUpointer_attribute). */
enum { POINTER_MEMORY_TYPE = 2, POINTER_IS_MANAGED = 8, POINTER_DEVICE_ORDINAL = 9 };

splat_status splat__cuda_check_pointer(const char *fn, const char *name, const void *ptr,
                                       int ordinal) {
  const splat__cuda_api_table *api = NULL;
  splat_status st = splat__cuda_api(&api);
  if (st != SPLAT_OK) return st;
  unsigned int memory_type = 0;
  CUresult rc =
      api->cuPointerGetAttribute(&memory_type, POINTER_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)ptr);
  if (rc != 0) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: %s.data=%p is not memory CUDA knows (plain host memory?); a CUDA "
                       "context needs device, managed or CUDA-registered host memory",
                       fn, name, ptr);
  }
  int managed = 0, device = -1;
  api->cuPointerGetAttribute(&managed, POINTER_IS_MANAGED, (CUdeviceptr)(uintptr_t)ptr);
  if (managed) return SPLAT_OK;
  if (api->cuPointerGetAttribute(&device, POINTER_DEVICE_ORDINAL, (CUdeviceptr)(uintptr_t)ptr) ==
          0 &&
      device != ordinal) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: %s.data=%p lives on CUDA device %d but the context uses device %d", fn,
                       name, ptr, device, ordinal);
  }
  return SPLAT_OK;
}

int splat__cuda_pdl_allowed(const splat__cuda_api_table *api, CUstream stream) {
  if (!api->cuLaunchKernelEx) return 0;
  if (api->driver_version >= 12030) return 1;
  int status = 1; /* CU_STREAM_CAPTURE_STATUS_NONE is 0 */
  return api->cuStreamIsCapturing && api->cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
         status == 0;
}
