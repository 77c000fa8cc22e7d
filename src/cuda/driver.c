/* driver.c — dlopen of libcuda.so.1 and NVRTC; resolves the few driver entry points
 * the probe needs. Later CUDA code resolves the rest through cuGetProcAddress. */
#include "cuda/driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_int_fn)(int *);
typedef int (*cu_device_get_fn)(int *, int);
typedef int (*cu_device_name_fn)(char *, int, int);
typedef int (*cu_device_attr_fn)(int *, int, int);
typedef int (*cu_error_string_fn)(int, const char **);
typedef int (*nvrtc_version_fn)(int *, int *);

enum { CU_ATTR_CC_MAJOR = 75, CU_ATTR_CC_MINOR = 76 };

/* Opens the first library of a NULL-terminated list of sonames, or returns NULL. */
static void *open_first(const char *const *names) {
  for (int i = 0; names[i]; i++) {
    void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
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
  static const char *const names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so", NULL};
  void *h = open_first(names);
  if (!h) return;
  nvrtc_version_fn version = (nvrtc_version_fn)(uintptr_t)dlsym(h, "nvrtcVersion");
  int major = 0, minor = 0;
  if (version && version(&major, &minor) == 0) {
    env->nvrtc_available = 1;
    env->nvrtc_version = major * 1000 + minor * 10;
  }
  dlclose(h);
}

splat_status splat__cuda_probe(splat_environment *env, char *why, size_t cap) {
  static const char *const names[] = {"libcuda.so.1", "libcuda.so", NULL};
  probe_nvrtc(env);
  void *h = open_first(names);
  if (!h) {
    return no_device(why, cap, "no CUDA driver: dlopen(libcuda.so.1) failed (%s)", dlerror());
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
