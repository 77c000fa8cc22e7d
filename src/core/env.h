/* env.h — switches and counts read from the environment (SPLAT_ATTN_TMA and the like). */
#ifndef SPLAT_CORE_ENV_H
#define SPLAT_CORE_ENV_H

#include "splat.h"

/* Reads switch `name`: 1 (also unset or empty) sets *on = 1, 0 sets *on = 0; anything else
 * is SPLAT_ERR_INVALID_ARGUMENT with the sentence "NAME=value unsupported: must be 1
 * (on_means) or 0 (off_means)". */
splat_status splat__env_switch(const char *name, const char *on_means, const char *off_means,
                               int *on);

/* As splat__env_switch, but off unless set: unset or empty sets *on = 0. */
splat_status splat__env_flag(const char *name, const char *on_means, const char *off_means,
                             int *on);

/* Reads count `name`: unset or empty sets *n = unset; an integer 0 .. most sets *n to it;
 * anything else is SPLAT_ERR_INVALID_ARGUMENT with the sentence "NAME=value unsupported: must
 * be means". */
splat_status splat__env_count(const char *name, long long most, const char *means, long long unset,
                              long long *n);

#endif
