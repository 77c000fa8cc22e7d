/* env.c — on/off switches read from the environment (see env.h). */
#include "core/env.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"

splat_status splat__env_switch(const char *name, const char *on_means, const char *off_means,
                               int *on) {
  const char *v = getenv(name);
  *on = 1;
  if (!v || !*v || !strcmp(v, "1")) return SPLAT_OK;
  if (!strcmp(v, "0")) {
    *on = 0;
    return SPLAT_OK;
  }
  return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s=%s unsupported: must be 1 (%s) or 0 (%s)",
                     name, v, on_means, off_means);
}
