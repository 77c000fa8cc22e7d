/* timer.h — a monotonic wall clock in milliseconds, for the timings reports print. */
#ifndef SPLAT_CORE_TIMER_H
#define SPLAT_CORE_TIMER_H

double splat__now_ms(void);

#endif
