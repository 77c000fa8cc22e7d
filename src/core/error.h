/* error.h — recording failures: the thread-local and per-context last-error message. */
#ifndef SPLAT_CORE_ERROR_H
#define SPLAT_CORE_ERROR_H

#include "splat.h"

#define SPLAT__ERROR_CAP 1024

#if defined(__GNUC__)
#define SPLAT__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SPLAT__PRINTF(a, b)
#endif

/* Records a formatted message as the calling thread's last error and returns status. */
splat_status splat__fail(splat_status status, const char *fmt, ...) SPLAT__PRINTF(2, 3);
/* The calling thread's last error message. */
const char *splat__thread_error(void);
/* Copies the thread's last error into a context's message buffer (cap SPLAT__ERROR_CAP)
 * when status is not SPLAT_OK; returns status unchanged. */
splat_status splat__capture(char *ctx_message, splat_status status);
/* The calling thread's last error message copied into buf (SPLAT__ERROR_CAP bytes), and put
 * back from it: around work whose failures the library recovers from (speculative builds),
 * so that a call that succeeds leaves the message of the caller's last failed call. */
void splat__error_save(char *buf);
void splat__error_restore(const char *buf);

#endif
