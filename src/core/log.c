/* log.c — stderr diagnostics gated by $SPLAT_LOG_LEVEL (read once, thread-safe). */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t threshold_once = PTHREAD_ONCE_INIT;
static splat__log_level threshold = SPLAT__LOG_OFF;

static void read_threshold(void) {
  static const char *const names[] = {"off", "error", "warn", "info", "debug"};
  const char *env = getenv("SPLAT_LOG_LEVEL");
  threshold = SPLAT__LOG_OFF;
  if (!env || !*env) return;
  if (env[0] >= '0' && env[0] <= '4' && env[1] == '\0') {
    threshold = (splat__log_level)(env[0] - '0');
    return;
  }
  for (int i = 0; i < 5; i++) {
    if (!strcasecmp(env, names[i])) {
      threshold = (splat__log_level)i;
      return;
    }
  }
  if (!strcasecmp(env, "warning")) {
    threshold = SPLAT__LOG_WARN;
    return;
  }
  /* Whoever set it wants diagnostics: say once that this value gives none. */
  fprintf(stderr,
          "splat: SPLAT_LOG_LEVEL=%s unknown: use off, error, warn, info, debug or 0-4; logging "
          "stays off\n",
          env);
}

splat__log_level splat__log_threshold(void) {
  pthread_once(&threshold_once, read_threshold);
  return threshold;
}

int splat__log_enabled(splat__log_level level) {
  return level > SPLAT__LOG_OFF && level <= splat__log_threshold();
}

void splat__log(splat__log_level level, const char *fmt, ...) {
  static const char *const names[] = {"off", "error", "warn", "info", "debug"};
  if (!splat__log_enabled(level)) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  /* One fprintf call so lines of concurrent threads do not interleave. */
  fprintf(stderr, "splat %s: %s\n", names[level], buf);
}
