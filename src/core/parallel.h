/* parallel.h — fork-join parallelism on pthreads: a loop over index chunks (the CPU
 * backend's operations) and a few jobs with statuses (plan creation: the kernels'
 * compiles, the passes' tile plans, the 128- and 192-row query tiles). */
#ifndef SPLAT_CORE_PARALLEL_H
#define SPLAT_CORE_PARALLEL_H

#include <stdint.h>

#include "splat.h"

/* Calls fn(arg, begin, end) over disjoint chunks covering [0, n) on up to nthreads
 * threads (the caller's included) and returns when all are done. Falls back to the
 * calling thread alone if threads cannot be started. */
void splat__parallel_for(int nthreads, int64_t n, int64_t chunk,
                         void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

/* The cores the process may run on (its CPU affinity; else the online cores), from 1 to
 * 1024. */
int splat__online_cores(void);

/* The most jobs of one splat__parallel_run. */
#define SPLAT__PARALLEL_MAX 8

/* Runs job(arg, i) for i in [0, n) on up to n threads (splat__parallel_for, one job a
 * chunk) and returns when all have. The jobs must not share what they write. splat's error
 * message is thread-local: each job's is kept, and the status of the failing job of lowest
 * index is returned with its message as the calling thread's error; else SPLAT_OK. */
splat_status splat__parallel_run(splat_status (*job)(void *arg, int i), void *arg, int n);

#endif
