/* nvrtc.h — NVRTC loaded at run time (dlopen; no link-time dependency): compiling a
 * generated CUDA C source to a CUBIN for one arch, and reading the ptxas report
 * (registers, spills) out of the compile log. */
#ifndef SPLAT_CUDA_NVRTC_H
#define SPLAT_CUDA_NVRTC_H

#include <pthread.h>
#include <stddef.h>

#include "splat.h"

/* The result of one compile. Every pointer is heap memory owned by the struct. */
typedef struct splat__compiled {
  void *cubin; /* the CUBIN image for cuModuleLoadData */
  size_t cubin_size;
  char *ptx;         /* PTX text, or NULL (see splat__nvrtc_ptx) */
  char *log;         /* NUL-terminated compile log with the ptxas report; never NULL once filled */
  double compile_ms; /* wall time of the NVRTC compile (0 for a cache hit) */
} splat__compiled;

/* Frees the members and zeroes the struct; accepts NULL. */
void splat__compiled_free(splat__compiled *c);

/* Loading NVRTC on a thread of its own while the caller goes on: its dlopen takes ~5.5 ms
 * where the library is in the page cache (its static initialisers) and far more from a cold
 * disk, and every plan needs its version for the kernel cache's keys, even when all its
 * kernels come from the disk cache. Plan creation starts it before the analysis and joins it
 * at its end (a plan that fails before its kernels waits for the load too); the first key or
 * compile waits for the load (pthread_once) in between. Starts nothing once NVRTC was loaded
 * (or found missing), or where no thread can be started (the first key then loads it). */
typedef struct splat__nvrtc_prefetch {
  int started;
  pthread_t thread;
} splat__nvrtc_prefetch;
void splat__nvrtc_prefetch_begin(splat__nvrtc_prefetch *p);
/* Joins the thread, if one was started. */
void splat__nvrtc_prefetch_end(splat__nvrtc_prefetch *p);

/* The loaded NVRTC's version. Returns SPLAT_ERR_UNSUPPORTED with a sentence when NVRTC
 * cannot be loaded. major, minor: host, may be NULL. */
splat_status splat__nvrtc_version(int *major, int *minor);

/* Whether this process has loaded NVRTC (and found it usable); loads nothing. */
int splat__nvrtc_loaded(void);
/* The file the loader mapped for the loaded NVRTC (an absolute path where it was found by
 * its soname); "" when NVRTC is not loaded or the loader cannot tell. */
const char *splat__nvrtc_file(void);
/* 1 with the version of the NVRTC this process has mapped where the search's first names
 * ($SPLAT_NVRTC_LIBRARY, else the sonames) find one mapped already (loaded by splat, or by
 * another library, as torch may: a dlopen by soname would return that one); loads nothing.
 * Else 0. */
int splat__nvrtc_mapped(int *major, int *minor);

/* The options splat compiles with for arch, as one space-separated string (part of
 * the cache key). buf: host, cap chars. */
void splat__nvrtc_options_text(const char *arch, char *buf, size_t cap);

/* Compiles source (a complete translation unit: NVRTC sees no host headers and no
 * include path) to a CUBIN for arch ("sm_90a", "sm_80", ...), with
 *   --gpu-architecture=<arch> -default-device -std=c++17 -lineinfo --ptxas-options=-v
 * program_name names the program in the log ("sddmm_f16_d64.cu"). out: host, filled
 * on success (ptx stays NULL: a CUBIN compile has no PTX to return). Fails with
 * SPLAT_ERR_COMPILE, the first 20 lines of the log in the message; with
 * SPLAT_ERR_UNSUPPORTED when NVRTC cannot be loaded or does not know arch. */
splat_status splat__nvrtc_compile(const char *source, const char *program_name, const char *arch,
                                  splat__compiled *out);

/* The PTX of source for the virtual arch of arch ("sm_90a" -> "compute_90a"): a second
 * compile, done only for dumps and inspection. ptx: host, receives malloc'd text. */
splat_status splat__nvrtc_ptx(const char *source, const char *program_name, const char *arch,
                              char **ptx);

/* The ptxas report of one entry function. */
typedef struct splat__ptxas_stats {
  int registers;    /* "Used N registers" */
  int spill_stores; /* "N bytes spill stores" */
  int spill_loads;  /* "N bytes spill loads" */
  int stack;        /* "N bytes stack frame" */
  int smem;         /* static shared memory, "N bytes smem" (0 when not reported) */
} splat__ptxas_stats;

/* Reads the ptxas report of kernel (its name as compiled, e.g. the extern "C" name;
 * NULL = the first entry function) out of a compile log made with
 * --ptxas-options=-v. out: host. SPLAT_ERR_INVALID_ARGUMENT when the log has no
 * report for that kernel (no -v, or a wrong name). */
splat_status splat__ptxas_report(const char *log, const char *kernel, splat__ptxas_stats *out);

/* The registers and spill bytes (stores + loads) of kernel, as splat__ptxas_report.
 * registers, spill_bytes: host, may be NULL; -1 when not found. */
static inline splat_status splat__ptxas_parse(const char *log, const char *kernel, int *registers,
                                              int *spill_bytes) {
  splat__ptxas_stats s = {-1, -1, -1, -1, -1};
  splat_status st = splat__ptxas_report(log, kernel, &s);
  if (registers) *registers = st == SPLAT_OK ? s.registers : -1;
  if (spill_bytes) *spill_bytes = st == SPLAT_OK ? s.spill_stores + s.spill_loads : -1;
  return st;
}

#endif
