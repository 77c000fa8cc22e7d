/* error.c — the thread-local last-error message, and copying it into a context. */
#include "core/error.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char thread_message[SPLAT__ERROR_CAP];
/* Serialises writes of contexts' messages: threads failing at once on one context (the
 * Python package shares one per device) each leave a whole sentence, never a mix. Only
 * failures take it. */
static pthread_mutex_t context_message_lock = PTHREAD_MUTEX_INITIALIZER;

splat_status splat__fail(splat_status status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(thread_message, sizeof thread_message, fmt, ap);
  va_end(ap);
  return status;
}

const char *splat__thread_error(void) {
  return thread_message;
}

splat_status splat__capture(char *ctx_message, splat_status status) {
  if (status != SPLAT_OK && ctx_message) {
    pthread_mutex_lock(&context_message_lock);
    snprintf(ctx_message, SPLAT__ERROR_CAP, "%s", thread_message);
    pthread_mutex_unlock(&context_message_lock);
  }
  return status;
}

void splat__error_save(char *buf) {
  snprintf(buf, SPLAT__ERROR_CAP, "%s", thread_message);
}

void splat__error_restore(const char *buf) {
  snprintf(thread_message, sizeof thread_message, "%s", buf);
}
