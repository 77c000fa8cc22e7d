/* parallel.c — fork-join parallelism on pthreads (see parallel.h). splat__parallel_for: the
 * caller and up to nthreads-1 workers pull chunks from one atomic counter until [0, n) is
 * covered; splat__parallel_run: a few jobs through it, each keeping its status and message. */
#include "core/parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "core/error.h"

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

int splat__online_cores(void) {
  /* The cores this process may run on (taskset, a container's cpuset), else those online. */
  cpu_set_t set;
  long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
  return n >= 1 ? (int)(n > 1024 ? 1024 : n) : 1;
}

typedef struct slot {
  splat_status st;
  char message[SPLAT__ERROR_CAP];
} slot;

typedef struct slots {
  splat_status (*job)(void *arg, int i);
  void *arg;
  slot at[SPLAT__PARALLEL_MAX];
} slots;

static void run_slots(void *arg, int64_t begin, int64_t end) {
  slots *s = arg;
  for (int64_t i = begin; i < end; i++) {
    slot *t = &s->at[i];
    t->st = s->job(s->arg, (int)i);
    if (t->st != SPLAT_OK) snprintf(t->message, sizeof t->message, "%s", splat__thread_error());
  }
}

splat_status splat__parallel_run(splat_status (*job)(void *arg, int i), void *arg, int n) {
  if (!job || n < 0 || n > SPLAT__PARALLEL_MAX)
    return splat__fail(SPLAT_ERR_INTERNAL, "splat__parallel_run: %d jobs (at most %d)", n,
                       SPLAT__PARALLEL_MAX);
  slots s;
  s.job = job;
  s.arg = arg;
  for (int i = 0; i < n; i++) s.at[i].st = SPLAT_OK;
  splat__parallel_for(n, n, 1, run_slots, &s);
  for (int i = 0; i < n; i++) {
    if (s.at[i].st != SPLAT_OK) return splat__fail(s.at[i].st, "%s", s.at[i].message);
  }
  return SPLAT_OK;
}
