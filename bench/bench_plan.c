/* bench_plan.c — plan creation on the CPU backend for long closed-form patterns (TARGETS
 * item 4: analysis of a 131072-token pattern under 5 ms): splat_plan_create --repeat times
 * per spec in one process; prints the best analysis_ms and plan_ms of the reports (ACSR,
 * then alignment + tile plan) and their sum.
 *
 *   build/splat_bench_plan [--seq N] [--repeat R] [SPEC ...]
 *
 * Without specs: the fused benchmark's suite (window, dilated, strided | window, fixed,
 * blocked, longformer, causal & window, bigbird). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "splat.h"

int main(int argc, char **argv) {
  static const char *suite[] = {
      "window(256)",  "dilated(256,2)",     "strided(64) | window(64)", "fixed(256,32)",
      "blocked(512)", "longformer(256,64)", "causal & window(512,0)",   "bigbird(64,3,2,3,0)"};
  int64_t seq = 131072;
  int repeat = 5, nspecs = 0;
  const size_t nsuite = sizeof suite / sizeof suite[0];
  const char **specs = calloc((size_t)argc + nsuite, sizeof *specs);
  if (!specs) return 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seq") && i + 1 < argc) {
      seq = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = atoi(argv[++i]);
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: %s [--seq N] [--repeat R] [SPEC ...]\n", argv[0]);
      return 2;
    } else {
      specs[nspecs++] = argv[i];
    }
  }
  if (nspecs == 0) {
    for (size_t i = 0; i < nsuite; i++) specs[nspecs++] = suite[i];
  }
  if (seq < 1 || repeat < 1) {
    fprintf(stderr, "--seq and --repeat must be positive\n");
    return 2;
  }
  splat_context_options opt = {SPLAT_BACKEND_CPU, 0, 0};
  splat_context *ctx = NULL;
  if (splat_context_create(&opt, &ctx) != SPLAT_OK) {
    fprintf(stderr, "%s\n", splat_last_error(NULL));
    return 1;
  }
  printf("seq %lld, CPU backend, best of %d in one process (ms)\n", (long long)seq, repeat);
  printf("%-28s %9s %9s %9s\n", "spec", "analysis", "plan", "sum");
  int rc = 0;
  for (int s = 0; s < nspecs; s++) {
    double best_a = 1e30, best_p = 1e30;
    for (int r = 0; r < repeat; r++) {
      splat_pattern *pat = NULL;
      splat_plan *plan = NULL;
      splat_plan_desc desc = {1, 1, 0, 64, SPLAT_BF16, 0, 0, 0, 0};
      splat_report rep;
      if (splat_pattern_parse(specs[s], seq, 0, &pat) != SPLAT_OK ||
          splat_plan_create(ctx, pat, &desc, &plan) != SPLAT_OK ||
          splat_plan_report(plan, &rep) != SPLAT_OK) {
        fprintf(stderr, "%s: %s\n", specs[s], splat_last_error(ctx));
        splat_pattern_destroy(pat);
        rc = 1;
        break;
      }
      if (rep.analysis_ms < best_a) best_a = rep.analysis_ms;
      if (rep.plan_ms < best_p) best_p = rep.plan_ms;
      splat_plan_destroy(plan);
      splat_pattern_destroy(pat);
    }
    if (best_a < 1e30)
      printf("%-28s %9.2f %9.2f %9.2f\n", specs[s], best_a, best_p, best_a + best_p);
  }
  splat_context_destroy(ctx);
  free(specs);
  return rc;
}
