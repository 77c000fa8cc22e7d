/* kcompile.h — getting the kernels of a plan concurrently: one thread per generated
 * source (specialise, then splat__kernel_cache_get: memory cache, disk cache or NVRTC;
 * each op's row and tile kernels are separate programs, kgen.h), so a cold plan costs its
 * slowest compile, not the sum. Pure C (pthreads), no CUDA
 * dependency: plan creation and `splat codegen` both use it. */
#ifndef SPLAT_CUDA_KCOMPILE_H
#define SPLAT_CUDA_KCOMPILE_H

#include "cuda/kernel_cache.h"
#include "cuda/kgen.h"
#include "splat.h"

/* One source's result. */
typedef struct splat__kcompiled {
  splat__compiled bin;  /* CUBIN + ptxas log (caller frees with splat__compiled_free) */
  splat__cache_hit hit; /* where it came from */
  double ms;            /* time to generate and get it (in its own thread) */
  char program[176];    /* program name (splat__kspec_program) */
} splat__kcompiled;

/* Generates and gets the sources of specs[0..n) for arch, each in its own thread (n at
 * most SPLAT__KPROG_MAX). out: host array of n, zeroed first; on success every entry
 * holds its CUBIN. On failure, the first failing spec's status and message (made the
 * calling thread's error), and every CUBIN already obtained is freed. Thread-safe as
 * splat__kernel_cache_get. */
splat_status splat__kspec_compile_all(const splat__kspec *specs, int n, const char *arch,
                                      splat__kcompiled *out);

#endif
