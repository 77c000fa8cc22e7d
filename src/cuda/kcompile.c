/* kcompile.c — concurrent specialise-and-get of a plan's kernels (see kcompile.h).
 * NVRTC is thread-safe across programs and the kernel cache is (mutex-protected memory
 * cache, atomic disk writes); splat's error message is thread-local, so each worker
 * keeps a copy of its own and the caller re-raises the first failure. */
#include "cuda/kcompile.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/timer.h"

typedef struct job {
  const splat__kspec *spec;
  const char *arch;
  splat__kcompiled *out;
  splat_status st;
  char message[SPLAT__ERROR_CAP];
} job;

static void run_job(job *j) {
  char *src = NULL;
  const double t0 = splat__now_ms();
  splat__kspec_program(j->spec, j->out->program, sizeof j->out->program);
  j->st = splat__kspec_source(j->spec, &src);
  if (j->st == SPLAT_OK) {
    j->st = splat__kernel_cache_get(src, j->out->program, j->arch, &j->out->bin, &j->out->hit);
  }
  free(src);
  j->out->ms = splat__now_ms() - t0;
  if (j->st != SPLAT_OK) snprintf(j->message, sizeof j->message, "%s", splat__thread_error());
}

static void *job_thread(void *arg) {
  run_job(arg);
  return NULL;
}

splat_status splat__kspec_compile_all(const splat__kspec *specs, int n, const char *arch,
                                      splat__kcompiled *out) {
  if (n < 0 || n > SPLAT__KPROG_MAX || (n > 0 && (!specs || !out))) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__kspec_compile_all: bad arguments");
  }
  job jobs[SPLAT__KPROG_MAX];
  pthread_t threads[SPLAT__KPROG_MAX];
  int started[SPLAT__KPROG_MAX];
  for (int i = 0; i < n; i++) {
    memset(&out[i], 0, sizeof out[i]);
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].spec = &specs[i];
    jobs[i].arch = arch;
    jobs[i].out = &out[i];
  }
  /* Job 0 runs on the calling thread; the others in threads (inline if one cannot be
   * started: slower, never wrong). */
  for (int i = 1; i < n; i++) {
    started[i] = pthread_create(&threads[i], NULL, job_thread, &jobs[i]) == 0;
  }
  if (n > 0) run_job(&jobs[0]);
  for (int i = 1; i < n; i++) {
    if (started[i]) {
      pthread_join(threads[i], NULL);
    } else {
      run_job(&jobs[i]);
    }
  }
  for (int i = 0; i < n; i++) {
    if (jobs[i].st == SPLAT_OK) continue;
    const splat_status st = jobs[i].st;
    char message[SPLAT__ERROR_CAP];
    snprintf(message, sizeof message, "%s", jobs[i].message);
    for (int k = 0; k < n; k++) splat__compiled_free(&out[k].bin);
    return splat__fail(st, "%s", message);
  }
  return SPLAT_OK;
}
