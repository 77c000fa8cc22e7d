/* env.c — switches and counts read from the environment (see env.h). */
#include "core/env.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* The switch's value, `unset` when the variable is unset or empty. */
static splat_status read_switch(const char *name, const char *on_means, const char *off_means,
                                int unset, int *on) {
  const char *v = getenv(name);
  *on = unset;
  if (!v || !*v) return SPLAT_OK;
  if (!strcmp(v, "1") || !strcmp(v, "0")) {
    *on = v[0] == '1';
    return SPLAT_OK;
  }
  return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s=%s unsupported: must be 1 (%s) or 0 (%s)",
                     name, v, on_means, off_means);
}

splat_status splat__env_switch(const char *name, const char *on_means, const char *off_means,
                               int *on) {
  return read_switch(name, on_means, off_means, 1, on);
}

splat_status splat__env_flag(const char *name, const char *on_means, const char *off_means,
                             int *on) {
  return read_switch(name, on_means, off_means, 0, on);
}

splat_status splat__env_count(const char *name, long long most, const char *means, long long unset,
                              long long *n) {
  const char *v = getenv(name);
  *n = unset;
  if (!v || !*v) return SPLAT_OK;
  char *end = NULL;
  const long long x = strtoll(v, &end, 10);
  if (*end || x < 0 || x > most)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s=%s unsupported: must be %s", name, v, means);
  *n = x;
  return SPLAT_OK;
}
