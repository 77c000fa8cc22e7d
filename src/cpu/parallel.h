/* parallel.h — a fork-join parallel loop over pthreads for the CPU backend. */
#ifndef SPLAT_CPU_PARALLEL_H
#define SPLAT_CPU_PARALLEL_H

#include <stdint.h>

#include "splat.h"

/* Calls fn(arg, begin, end) over disjoint chunks covering [0, n) on up to nthreads
 * threads (the caller's included) and returns when all are done. Falls back to the
 * calling thread alone if threads cannot be started. */
void splat__parallel_for(int nthreads, int64_t n, int64_t chunk,
                         void (*fn)(void *arg, int64_t begin, int64_t end), void *arg);

#endif
