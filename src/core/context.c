/* context.c — contexts (backend choice, thread count), the environment query and
 * splat_last_error. */
#include "core/context.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "cuda/backend.h"
#include "cuda/driver.h"

/* Worker threads of a default CPU context: $SPLAT_NUM_THREADS, else the cores the process may
 * run on (core/parallel.h splat__online_cores). A value
 * that is not an integer in 1..1024 is SPLAT_ERR_INVALID_ARGUMENT, named (fn: the caller). */
static splat_status default_threads(const char *fn, int *out) {
  const char *env = getenv("SPLAT_NUM_THREADS");
  if (env && *env) {
    char *end = NULL;
    errno = 0;
    const long n = strtol(env, &end, 10);
    if (*end || errno || n < 1 || n > 1024) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "%s: SPLAT_NUM_THREADS=%s unsupported: must be an integer in 1..1024 "
                         "(unset: one thread per core the process may run on)",
                         fn, env);
    }
    *out = (int)n;
    return SPLAT_OK;
  }
  *out = splat__online_cores();
  return SPLAT_OK;
}

const char *splat_last_error(const splat_context *ctx) {
  return ctx ? ctx->error : splat__thread_error();
}

splat_status splat_environment_query(splat_environment *out, char *why_not_cuda, size_t cap) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_environment_query: out is NULL");
  memset(out, 0, sizeof *out);
  /* A bad SPLAT_NUM_THREADS is the status, after the rest is filled in (a diagnostic such
   * as `splat env` still reports CUDA and NVRTC); its message is kept across the probe. */
  char bad[512] = "";
  const splat_status st = default_threads("splat_environment_query", &out->cpu_threads);
  if (st != SPLAT_OK) snprintf(bad, sizeof bad, "%s", splat__thread_error());
  char local[512];
  if (splat__cuda_probe(out, local, sizeof local) != SPLAT_OK) {
    if (why_not_cuda && cap) snprintf(why_not_cuda, cap, "%s", local);
  } else if (why_not_cuda && cap) {
    why_not_cuda[0] = '\0';
  }
  return st == SPLAT_OK ? SPLAT_OK : splat__fail(st, "%s", bad);
}

splat_status splat_context_create(const splat_context_options *options, splat_context **out) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_context_create: out is NULL");
  *out = NULL;
  splat_context_options opt = {SPLAT_BACKEND_AUTO, 0, 0};
  if (options) opt = *options;
  if (opt.backend != SPLAT_BACKEND_AUTO && opt.backend != SPLAT_BACKEND_CPU &&
      opt.backend != SPLAT_BACKEND_CUDA) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "splat_context_create: backend=%d is not a splat_backend value",
                       (int)opt.backend);
  }
  if (opt.num_threads < 0 || opt.num_threads > 1024) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "splat_context_create: num_threads=%d must be in 0..1024 (0 = default)",
                       opt.num_threads);
  }
  if (opt.device < 0) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_context_create: device=%d must be >= 0",
                       opt.device);
  }
  int threads = opt.num_threads;
  if (!threads) {
    const splat_status st = default_threads("splat_context_create", &threads);
    if (st != SPLAT_OK) return st;
  }
  /* CUDA: asked for, or AUTO with a usable device whose backend opens. */
  splat_backend backend = SPLAT_BACKEND_CPU;
  splat__cuda_context *cuda = NULL;
  if (opt.backend == SPLAT_BACKEND_CUDA || opt.backend == SPLAT_BACKEND_AUTO) {
    splat_status st = splat__cuda_context_open(opt.device, &cuda);
    if (st == SPLAT_OK) {
      backend = SPLAT_BACKEND_CUDA;
    } else if (opt.backend == SPLAT_BACKEND_CUDA) {
      return st;
    }
  }
  splat_context *ctx = calloc(1, sizeof *ctx);
  if (!ctx) {
    splat__cuda_context_close(cuda);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_context_create: out of memory");
  }
  ctx->backend = backend;
  ctx->cuda = cuda;
  ctx->device = opt.device;
  ctx->num_threads = threads;
  *out = ctx;
  return SPLAT_OK;
}

void splat_context_destroy(splat_context *ctx) {
  if (ctx) splat__cuda_context_close(ctx->cuda);
  free(ctx);
}

splat_backend splat_context_backend(const splat_context *ctx) {
  return ctx ? ctx->backend : SPLAT_BACKEND_CPU;
}
