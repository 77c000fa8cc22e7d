/* validate.h — argument checks shared by every operation: tensor shapes, dtypes,
 * strides, non-overlapping outputs, and outputs that do not alias inputs. */
#ifndef SPLAT_CORE_VALIDATE_H
#define SPLAT_CORE_VALIDATE_H

#include "splat.h"

/* Which dtypes a tensor may have. */
typedef enum splat__dtype_rule {
  SPLAT__DTYPE_ANY = -1,
} splat__dtype_rule;

/* Checks t is non-NULL, has dtype `dtype` (or any valid dtype when dtype is
 * SPLAT__DTYPE_ANY), the shape `shape`, a non-NULL data pointer unless empty, and
 * addressable strides; outputs (is_output) must not overlap themselves.
 * fn and name prefix the message: "splat_attention: q.shape = ...". */
splat_status splat__check_tensor(const char *fn, const char *name, const splat_tensor *t,
                                 const int64_t shape[4], int dtype, int is_output);
/* Fails when the memory spans of out and in intersect (exact aliasing is reported
 * too; callers that allow it check for it first). */
splat_status splat__check_disjoint(const char *fn, const char *out_name, const splat_tensor *out,
                                   const char *in_name, const splat_tensor *in);
/* 1 when a and b describe the same elements (same data, dtype, shape and strides). */
int splat__same_tensor(const splat_tensor *a, const splat_tensor *b);

#endif
