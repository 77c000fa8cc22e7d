/* parallel.c — splat__parallel_for: a fork-join loop on pthreads. The caller and up to
 * nthreads-1 workers pull chunks from one atomic counter until [0, n) is covered. */
#include "cpu/parallel.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct job {
  void (*fn)(void *arg, int64_t begin, int64_t end);
  void *arg;
  int64_t n, chunk;
  atomic_llong next; /* first index of the next chunk to hand out */
} job;

/* Runs chunks until none are left. */
static void drain(job *j) {
  for (;;) {
    const int64_t begin = (int64_t)atomic_fetch_add(&j->next, (long long)j->chunk);
    if (begin >= j->n) return;
    const int64_t end = j->n - begin < j->chunk ? j->n : begin + j->chunk;
    j->fn(j->arg, begin, end);
  }
}

static void *worker(void *p) {
  drain((job *)p);
  return NULL;
}

/* Workers started per call at most; more than any sensible num_threads. */
#define MAX_WORKERS 1024

void splat__parallel_for(int nthreads, int64_t n, int64_t chunk,
                         void (*fn)(void *arg, int64_t begin, int64_t end), void *arg) {
  if (n <= 0) return;
  if (chunk < 1) chunk = 1;
  const int64_t nchunks = (n - 1) / chunk + 1;
  int64_t want = nthreads < 1 ? 1 : nthreads;
  if (want > nchunks) want = nchunks;
  if (want > MAX_WORKERS + 1) want = MAX_WORKERS + 1;

  job j;
  j.fn = fn;
  j.arg = arg;
  j.n = n;
  j.chunk = chunk;
  atomic_init(&j.next, 0);

  pthread_t threads[MAX_WORKERS];
  int started = 0;
  for (int64_t t = 1; t < want; t++) {
    if (pthread_create(&threads[started], NULL, worker, &j) != 0) break; /* caller does the rest */
    started++;
  }
  drain(&j);
  for (int t = 0; t < started; t++) pthread_join(threads[t], NULL);
}
