/* bench_plan.c — plan creation for long closed-form patterns (TARGETS item 4: analysis of a
 * 131072-token pattern under 5 ms; a CUDA plan from the disk cache under 20 ms):
 * splat_plan_create --repeat times per spec in one process; prints the best analysis_ms and
 * plan_ms of the reports (ACSR, then alignment + tile plan) and their sum. With --backend
 * cuda, plans of the fused attention alone (bf16, --batch x --heads x --head-dim) on the
 * GPU: also the best kernels_ms (getting and loading the kernels), the best wall time of
 * splat_plan_create, and the rest of that run's wall time (the backend's own planning:
 * query tiles, the two passes' choice, interval tables, TMA views, uploads, workspaces;
 * a plan's report is built within its plan_ms, and so are the two passes where they are
 * built beside the single plan).
 *
 *   build/splat_bench_plan [--seq N] [--repeat R] [--backend cpu|cuda] [--batch B]
 *                          [--heads H] [--head-dim D] [SPEC ...]
 *
 * Without specs: the fused benchmark's suite (window, dilated, strided | window, fixed,
 * blocked, longformer, causal & window, bigbird). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "splat.h"

static double wall_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
  static const char *suite[] = {
      "window(256)",  "dilated(256,2)",     "strided(64) | window(64)", "fixed(256,32)",
      "blocked(512)", "longformer(256,64)", "causal & window(512,0)",   "bigbird(64,3,2,3,0)"};
  int64_t seq = 131072, batch = 1, heads = 1, head_dim = 64;
  int repeat = 5, nspecs = 0, cuda = 0;
  const size_t nsuite = sizeof suite / sizeof suite[0];
  const char **specs = calloc((size_t)argc + nsuite, sizeof *specs);
  if (!specs) return 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--seq") && i + 1 < argc) {
      seq = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
      repeat = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--batch") && i + 1 < argc) {
      batch = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--heads") && i + 1 < argc) {
      heads = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--head-dim") && i + 1 < argc) {
      head_dim = atoll(argv[++i]);
    } else if (!strcmp(argv[i], "--backend") && i + 1 < argc &&
               (!strcmp(argv[i + 1], "cpu") || !strcmp(argv[i + 1], "cuda"))) {
      cuda = !strcmp(argv[++i], "cuda");
    } else if (argv[i][0] == '-') {
      fprintf(stderr,
              "usage: %s [--seq N] [--repeat R] [--backend cpu|cuda] [--batch B] [--heads H] "
              "[--head-dim D] [SPEC ...]\n",
              argv[0]);
      free(specs);
      return 2;
    } else {
      specs[nspecs++] = argv[i];
    }
  }
  if (nspecs == 0) {
    for (size_t i = 0; i < nsuite; i++) specs[nspecs++] = suite[i];
  }
  if (seq < 1 || repeat < 1 || batch < 1 || heads < 1 || head_dim < 1) {
    fprintf(stderr, "--seq, --repeat, --batch, --heads and --head-dim must be positive\n");
    free(specs);
    return 2;
  }
  splat_context_options opt = {cuda ? SPLAT_BACKEND_CUDA : SPLAT_BACKEND_CPU, 0, 0};
  splat_context *ctx = NULL;
  if (splat_context_create(&opt, &ctx) != SPLAT_OK) {
    fprintf(stderr, "%s\n", splat_last_error(NULL));
    free(specs);
    return 1;
  }
  if (cuda) {
    printf(
        "seq %lld, CUDA backend, fused attention alone, batch %lld, heads %lld, head_dim %lld, "
        "bf16; best of %d in one process (ms; rest: the best wall time's run less its "
        "analysis, plan, report and kernels)\n",
        (long long)seq, (long long)batch, (long long)heads, (long long)head_dim, repeat);
    printf("%-28s %9s %9s %9s %9s %9s\n", "spec", "analysis", "plan", "kernels", "wall", "rest");
  } else {
    printf("seq %lld, CPU backend, best of %d in one process (ms)\n", (long long)seq, repeat);
    printf("%-28s %9s %9s %9s\n", "spec", "analysis", "plan", "sum");
  }
  int rc = 0;
  for (int s = 0; s < nspecs; s++) {
    double best_a = 1e30, best_p = 1e30, best_k = 1e30, best_w = 1e30, rest = 0;
    for (int r = 0; r < repeat; r++) {
      splat_pattern *pat = NULL;
      splat_plan *plan = NULL;
      splat_plan_desc desc = {1, 1, 0, 64, SPLAT_BF16, 0, 0, 0, 0};
      if (cuda) {
        const splat_plan_desc d = {batch, heads, heads, head_dim,           SPLAT_BF16,
                                   0,     0,     0,     SPLAT_OPS_ATTENTION};
        desc = d;
      }
      splat_report rep;
      double t0 = 0, t1 = 0;
      if (splat_pattern_parse(specs[s], seq, 0, &pat) != SPLAT_OK ||
          (t0 = wall_ms(), splat_plan_create(ctx, pat, &desc, &plan)) != SPLAT_OK ||
          (t1 = wall_ms(), splat_plan_report(plan, &rep)) != SPLAT_OK) {
        fprintf(stderr, "%s: %s\n", specs[s], splat_last_error(ctx));
        splat_plan_destroy(plan);
        splat_pattern_destroy(pat);
        rc = 1;
        break;
      }
      if (rep.analysis_ms < best_a) best_a = rep.analysis_ms;
      if (rep.plan_ms < best_p) best_p = rep.plan_ms;
      if (rep.kernels_ms < best_k) best_k = rep.kernels_ms;
      if (t1 - t0 < best_w) {
        best_w = t1 - t0;
        rest = best_w - rep.analysis_ms - rep.plan_ms - rep.kernels_ms; /* report in plan_ms */
      }
      splat_plan_destroy(plan);
      splat_pattern_destroy(pat);
    }
    if (best_a < 1e30 && cuda)
      printf("%-28s %9.2f %9.2f %9.2f %9.2f %9.2f\n", specs[s], best_a, best_p, best_k, best_w,
             rest);
    else if (best_a < 1e30)
      printf("%-28s %9.2f %9.2f %9.2f\n", specs[s], best_a, best_p, best_a + best_p);
  }
  splat_context_destroy(ctx);
  free(specs);
  return rc;
}
