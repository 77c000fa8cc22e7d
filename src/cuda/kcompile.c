/* kcompile.c — concurrent specialise-and-get of a plan's kernels (see kcompile.h), one
 * job each (core/parallel.h). NVRTC is thread-safe across programs and the kernel cache
 * is (mutex-protected memory cache, atomic disk writes). */
#include "cuda/kcompile.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/parallel.h"
#include "core/timer.h"

typedef struct jobs {
  const splat__kspec *specs;
  const char *arch;
  splat__kcompiled *out;
} jobs;

static splat_status compile_one(void *arg, int i) {
  const jobs *j = arg;
  splat__kcompiled *out = &j->out[i];
  char *src = NULL;
  const double t0 = splat__now_ms();
  splat__kspec_program(&j->specs[i], out->program, sizeof out->program);
  splat_status st = splat__kspec_source(&j->specs[i], &src);
  if (st == SPLAT_OK)
    st = splat__kernel_cache_get(src, out->program, j->arch, &out->bin, &out->hit);
  free(src);
  out->ms = splat__now_ms() - t0;
  return st;
}

_Static_assert(SPLAT__KPROG_MAX <= SPLAT__PARALLEL_MAX, "a plan's programs are one job each");

splat_status splat__kspec_compile_all(const splat__kspec *specs, int n, const char *arch,
                                      splat__kcompiled *out) {
  if (n < 0 || n > SPLAT__KPROG_MAX || (n > 0 && (!specs || !out))) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__kspec_compile_all: bad arguments");
  }
  for (int i = 0; i < n; i++) memset(&out[i], 0, sizeof out[i]);
  jobs j = {specs, arch, out};
  const splat_status st = splat__parallel_run(compile_one, &j, n);
  if (st != SPLAT_OK) {
    for (int k = 0; k < n; k++) splat__compiled_free(&out[k].bin);
  }
  return st;
}
