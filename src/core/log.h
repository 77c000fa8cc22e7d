/* log.h — splat's only way to print: diagnostics to stderr, off unless
 * $SPLAT_LOG_LEVEL (error, warn, info, debug, or 0-4; 0 / unset = off) enables them. */
#ifndef SPLAT_CORE_LOG_H
#define SPLAT_CORE_LOG_H

#include "core/error.h"

typedef enum splat__log_level {
  SPLAT__LOG_OFF = 0,
  SPLAT__LOG_ERROR = 1,
  SPLAT__LOG_WARN = 2,
  SPLAT__LOG_INFO = 3,
  SPLAT__LOG_DEBUG = 4
} splat__log_level;

/* The level enabled by $SPLAT_LOG_LEVEL, read once per process. */
splat__log_level splat__log_threshold(void);
/* 1 when messages of `level` are printed. */
int splat__log_enabled(splat__log_level level);
/* Prints "splat <level>: <message>\n" to stderr when the level is enabled. */
void splat__log(splat__log_level level, const char *fmt, ...) SPLAT__PRINTF(2, 3);

#endif
