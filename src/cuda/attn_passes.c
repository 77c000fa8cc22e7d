/* attn_passes.c — the choice of two-pass fused attention (see attn_passes.h). */
#include "cuda/attn_passes.h"

#include <string.h>

#include "core/env.h"
#include "core/error.h"
#include "core/log.h"

splat_status splat__attn_passes_env(int *on) {
  return splat__env_switch("SPLAT_ATTN_PASSES",
                           "the fused attention of masks mixing contiguous and strided segments in "
                           "two passes where that computes less",
                           "always one pass", on);
}

double splat__attn_passes_bytes(int64_t batch, int64_t heads, int64_t seq_q, int head_dim) {
  return (double)batch * (double)heads * (double)seq_q * (head_dim + 2) * 4.0;
}

splat_status splat__attn_passes_plan(const splat__acsr *a, const splat__tile_plan *single,
                                     int64_t batch, int64_t heads, int head_dim,
                                     splat__tile_plan pass[2], int *npass) {
  *npass = 0;
  memset(pass, 0, 2 * sizeof *pass);
  int on = 1;
  splat_status st = splat__attn_passes_env(&on);
  if (st != SPLAT_OK || !on) return st;
  st = splat__tile_plan_passes(a, single, pass, npass);
  if (st != SPLAT_OK || *npass == 0) return st;
  const double bytes = splat__attn_passes_bytes(batch, heads, a->seq_q, head_dim);
  if (bytes > (double)SPLAT__ATTN_PASSES_MAX_BYTES) {
    splat__log(SPLAT__LOG_INFO,
               "fused attention: one pass, although two would compute %lld instead of %lld "
               "entries: their workspace would take %.0f MiB",
               (long long)(pass[0].computed + pass[1].computed), (long long)single->computed,
               bytes / (1 << 20));
    splat__tile_plan_free(&pass[0]);
    splat__tile_plan_free(&pass[1]);
    *npass = 0;
    return SPLAT_OK;
  }
  splat__log(SPLAT__LOG_INFO,
             "fused attention: two passes computing %lld + %lld entries (one: %lld)",
             (long long)pass[0].computed, (long long)pass[1].computed, (long long)single->computed);
  return SPLAT_OK;
}
