/* timer.c — monotonic wall clock in milliseconds. */
#include "core/timer.h"

#include <time.h>

double splat__now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}
