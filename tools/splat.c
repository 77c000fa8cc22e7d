/* splat.c — the splat command: analyze a pattern, run attention on a built-in
 * default and check it against a float64 reference, print generated kernel
 * sources with their ptxas reports, manage the kernel cache, and report the
 * environment. Uses the public API, plus the library's dtype conversions, clock, kernel
 * specialisations and kernel cache. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/report.h"
#include "core/dtype.h"
#include "core/timer.h"
#include "cuda/attn_passes.h"
#include "cuda/driver.h"
#include "cuda/kcompile.h"
#include "cuda/kernel_cache.h"
#include "cuda/kgen.h"
#include "cuda/nvrtc.h"
#include "cuda/tile_rows.h"
#include "cuda/tile_tail.h"
#include "pattern/pattern.h"
#include "splat.h"

static const char *usage_main =
    "usage: splat <command> [options]\n"
    "\n"
    "commands:\n"
    "  analyze SPEC --seq N   analyse a pattern: report and a picture of the mask\n"
    "  run                    run attention on a built-in default and check it\n"
    "  codegen SPEC ...       print the generated CUDA sources and their ptxas reports\n"
    "  env                    which backends exist here, and why not\n"
    "  cache list|clear       list or empty the on-disk kernel cache\n"
    "  version                print the version\n"
    "\n"
    "`splat <command> --help` describes each command. Pattern grammar: docs/patterns.md.\n";

static const char *usage_analyze =
    "usage: splat analyze SPEC --seq N [options]\n"
    "\n"
    "Analyses the pattern SPEC (e.g. \"longformer(256,64)\", \"window(128) | global(4)\",\n"
    "'mask(\"m.npy\")') into ACSR and a tile plan, and prints the report.\n"
    "\n"
    "options:\n"
    "  --seq N           query rows (required; a mask(\"m.npy\") must match it)\n"
    "  --seq-k M         key columns (default: N)\n"
    "  --tile QxK        tile shape of the plan (default 128x128)\n"
    "  --max-segments K  affine segments per row before a row is irregular (1..8, default 8)\n"
    "  --json            print the report as one JSON object\n"
    "  --no-picture      omit the ASCII picture of the mask\n";

static const char *usage_run =
    "usage: splat run [options]\n"
    "\n"
    "Runs fused sparse attention on random inputs with the best available backend, times\n"
    "it, and checks it against a float64 reference (O(nnz x head_dim) per slice).\n"
    "\n"
    "options (defaults in brackets):\n"
    "  --spec SPEC       pattern [longformer(128,32)]\n"
    "  --seq N           sequence length (query rows) [2048]\n"
    "  --seq-k M         key columns [N]\n"
    "  --batch B         [2]\n"
    "  --heads H         query heads [4]\n"
    "  --heads-kv G      key/value heads, dividing H (grouped-query attention) [H]\n"
    "  --head-dim D      [64]\n"
    "  --dtype T         f32, f16 or bf16 (or float32, fp16, bfloat16, ...) [bf16]\n"
    "  --backend X       auto, cpu or cuda [auto]\n"
    "  --threads N       CPU threads [all cores]\n"
    "  --repeat R        timed repetitions, median reported [3]\n"
    "  --seed S          input seed [1]\n";

static const char *usage_codegen =
    "usage: splat codegen SPEC --seq N --head-dim D --dtype T [options]\n"
    "\n"
    "Prints, for each kernel program a CUDA plan of SPEC would use (an op's row kernel, and\n"
    "its tile kernel as a second program), the generated CUDA C\n"
    "source (a comment stating the specialisation, the #define prelude, the expanded\n"
    "kernels/*.cuh templates) and the ptxas report of each kernel in it (registers, spills,\n"
    "stack, shared memory), compiled with NVRTC for --arch. Needs NVRTC, not a GPU;\n"
    "compiles go through the kernel cache ($SPLAT_CACHE_DIR).\n"
    "\n"
    "options (defaults in brackets):\n"
    "  --seq N           query rows (required)\n"
    "  --seq-k M         key columns [N]\n"
    "  --head-dim D      head dimension (required)\n"
    "  --dtype T         f32, f16 or bf16 (or float32, fp16, bfloat16, ...) (required)\n"
    "  --arch A          target, e.g. sm_90a, sm_80 [sm_90a]\n"
    "  --op OP           sddmm, softmax, spmm, attention or all [all]\n"
    "  --batch B         batch of the plan whose tiles are shown, 1..2^20 [1]\n"
    "  --heads H         heads of that plan, 1..65536 [1]\n"
    "  --sms N           the device's SMs, which the choice of 192-row query tiles counts\n"
    "                    rounds of (132 on an H100 SXM), 0..4096; 0: unknown [0]\n"
    "                    (--batch, --heads and --sms matter to the fused attention only)\n"
    "  --source-only     print the sources, do not compile\n";

static const char *usage_cache =
    "usage: splat cache list | splat cache clear\n"
    "\n"
    "The kernel cache holds compiled kernels under $SPLAT_CACHE_DIR, else\n"
    "${XDG_CACHE_HOME:-~/.cache}/splat. `list` prints one line per file (key, arch,\n"
    "program, sizes, whether it is valid); `clear` removes the cache files and nothing else.\n";

static const char *usage_env =
    "usage: splat env\n"
    "\n"
    "Prints the version, the CPU threads a default context uses, and whether the CUDA\n"
    "driver, a GPU and NVRTC were found (and if not, why).\n";

/* Prints the last error of a failed call and returns the exit code 1. */
static int fail(const char *what, splat_status st, const splat_context *ctx) {
  fprintf(stderr, "splat: %s failed: %s: %s\n", what, splat_status_name(st), splat_last_error(ctx));
  return 1;
}

/* Parses a positive integer option value; prints an error and returns 0 on failure. */
static int parse_int(const char *opt, const char *text, int64_t lo, int64_t hi, int64_t *out) {
  char *end = NULL;
  errno = 0;
  long long v = text ? strtoll(text, &end, 10) : 0;
  if (!text || !*text || *end || errno == ERANGE || v < lo || v > hi) {
    fprintf(stderr, "splat: %s expects an integer in %lld..%lld, got '%s'\n", opt, (long long)lo,
            (long long)hi, text ? text : "");
    return 0;
  }
  *out = v;
  return 1;
}

/* A value option given twice (splat analyze X --seq 8 --seq 16) is an error, not the last
 * value taken silently: prints which and returns 1. opts: the verb's options that take a
 * value, NULL-terminated. */
static int repeated_option(const char *verb, int argc, char **argv, const char *const *opts) {
  for (int i = 0; i < argc; i++) {
    for (const char *const *o = opts; *o; o++) {
      if (strcmp(argv[i], *o)) continue;
      for (int j = 0; j < i; j++) {
        if (!strcmp(argv[j], *o)) {
          fprintf(stderr, "splat %s: %s given twice ('%s', then '%s'); give it once\n", verb, *o,
                  argv[j + 1], i + 1 < argc ? argv[i + 1] : "");
          return 1;
        }
      }
    }
  }
  return 0;
}

static int wants_help(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------ analyze */

/* Columns of segment g below column x: whole periods passed, each width wide, plus the
 * part of the period x falls in. */
static int64_t segment_columns_below(splat__segment g, int64_t x) {
  if (x <= g.start) return 0;
  const int64_t d = x - g.start;
  if (g.count == 1) return d < g.width ? d : g.width;
  const int64_t k = d / g.stride, r = d % g.stride;
  return k >= g.count ? (int64_t)g.count * g.width : k * g.width + (r < g.width ? r : g.width);
}

/* Adds row i's columns to the cells' counts: cell c holds the columns j with
 * j * cols / sk == c, [c0[c], c0[c + 1]). From the row's segments in O(cols x segments),
 * so a row 2^30 columns wide costs no more than a narrow one; a row of more segments than
 * the scratch holds (an explicit mask) is walked column by column. */
static int add_row_to_cells(splat__row_eval *e, int64_t i, int64_t sk, int cols, const int64_t *c0,
                            int64_t *hits, int32_t **columns) {
  enum { MAX_ROW_SEGMENTS = 64 };
  splat__segment segs[MAX_ROW_SEGMENTS];
  const int n = splat__row_segments(e, i, segs, MAX_ROW_SEGMENTS);
  if (n >= 0) {
    for (int g = 0; g < n; g++) {
      const int64_t first = segs[g].start, last = splat__segment_last(segs[g]);
      for (int c = (int)(first * cols / sk); c <= (int)(last * cols / sk); c++)
        hits[c] +=
            segment_columns_below(segs[g], c0[c + 1]) - segment_columns_below(segs[g], c0[c]);
    }
    return 1;
  }
  if (!*columns && !(*columns = malloc((size_t)sk * sizeof **columns))) return 0;
  const int64_t m = splat__row_columns(e, i, *columns);
  for (int64_t t = 0; t < m; t++) hits[(*columns)[t] * cols / sk]++;
  return 1;
}

/* Prints up to 32 x 64 cells of the mask; each cell shows the fraction of its
 * elements in the mask over up to 8 sampled rows: ' ' none, '.' < 1/3, ':' < 1, '#' all. */
static int print_picture(const splat_pattern *p) {
  enum { MAX_ROWS = 32, MAX_COLS = 64, SAMPLES = 8 };
  const int64_t sq = splat_pattern_seq_q(p), sk = splat_pattern_seq_k(p);
  const int rows = sq < MAX_ROWS ? (int)sq : MAX_ROWS, cols = sk < MAX_COLS ? (int)sk : MAX_COLS;
  int64_t c0[MAX_COLS + 1], hits[MAX_COLS];
  for (int c = 0; c <= cols; c++) c0[c] = (c * sk + cols - 1) / cols;
  splat__row_eval *e = NULL;
  const splat_status st = splat__row_eval_create(p, &e);
  if (st != SPLAT_OK) return fail("drawing the picture", st, NULL);
  int32_t *columns = NULL;
  int ok = 1;
  printf("mask (%d x %d cells over %lld x %lld):\n", rows, cols, (long long)sq, (long long)sk);
  for (int r = 0; r < rows && ok; r++) {
    const int64_t r0 = r * sq / rows, r1 = (r + 1) * sq / rows;
    const int64_t nsample = r1 - r0 < SAMPLES ? r1 - r0 : SAMPLES;
    memset(hits, 0, sizeof hits);
    for (int64_t s = 0; s < nsample && ok; s++)
      ok = add_row_to_cells(e, r0 + s * (r1 - r0) / nsample, sk, cols, c0, hits, &columns);
    if (!ok) break;
    putchar('|');
    for (int c = 0; c < cols; c++) {
      const int64_t cells = (c0[c + 1] - c0[c]) * nsample;
      putchar(hits[c] == 0 ? ' ' : hits[c] == cells ? '#' : 3 * hits[c] < cells ? '.' : ':');
    }
    printf("|\n");
  }
  free(columns);
  splat__row_eval_destroy(e);
  if (!ok) fprintf(stderr, "splat: out of memory drawing the picture\n");
  return ok ? 0 : 1;
}

static int cmd_analyze(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    fputs(usage_analyze, stdout);
    return 0;
  }
  const char *spec = NULL;
  int64_t seq = 0, seq_k = 0, tq = 0, tk = 0, kseg = 0;
  int json = 0, picture = 1;
  static const char *const value_opts[] = {"--seq", "--seq-k", "--tile", "--max-segments", NULL};
  if (repeated_option("analyze", argc, argv, value_opts)) return 2;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--seq")) {
      if (!parse_int(a, v, 1, (int64_t)1 << 30, &seq)) return 2;
      i++;
    } else if (!strcmp(a, "--seq-k")) {
      if (!parse_int(a, v, 1, (int64_t)1 << 30, &seq_k)) return 2;
      i++;
    } else if (!strcmp(a, "--tile")) {
      char *x = v ? strchr(v, 'x') : NULL;
      if (!x) {
        fprintf(stderr, "splat: --tile expects QxK, e.g. 128x128, got '%s'\n", v ? v : "");
        return 2;
      }
      *x = '\0';
      if (!parse_int("--tile Q", v, 1, 1024, &tq) || !parse_int("--tile K", x + 1, 1, 1024, &tk))
        return 2;
      i++;
    } else if (!strcmp(a, "--max-segments")) {
      if (!parse_int(a, v, 1, SPLAT_MAX_SEGMENTS, &kseg)) return 2;
      i++;
    } else if (!strcmp(a, "--json")) {
      json = 1;
    } else if (!strcmp(a, "--no-picture")) {
      picture = 0;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "splat analyze: unknown option '%s' (see splat analyze --help)\n", a);
      return 2;
    } else if (!spec) {
      spec = a;
    } else {
      fprintf(stderr, "splat analyze: unexpected argument '%s' (quote the spec)\n", a);
      return 2;
    }
  }
  if (!spec) {
    fprintf(stderr, "splat analyze: missing SPEC\n\n%s", usage_analyze);
    return 2;
  }
  if (!seq) {
    fprintf(stderr, "splat analyze: missing --seq N\n");
    return 2;
  }
  splat_pattern *p = NULL;
  splat_status st = splat_pattern_parse(spec, seq, seq_k, &p);
  if (st != SPLAT_OK) return fail("parsing the pattern", st, NULL);
  splat_report rep;
  st = splat_analyze(p, (int)tq, (int)tk, (int)kseg, &rep);
  if (st != SPLAT_OK) {
    splat_pattern_destroy(p);
    return fail("splat_analyze", st, NULL);
  }
  size_t len = 0;
  splat_report_format(&rep, json, NULL, 0, &len);
  char *text = malloc(len + 1);
  int rc = 0;
  if (!text) {
    fprintf(stderr, "splat: out of memory\n");
    rc = 1;
  } else {
    splat_report_format(&rep, json, text, len + 1, NULL);
    if (json) {
      printf("%s\n", text);
    } else {
      printf("pattern: %s\n%s\n", splat_pattern_spec(p), text);
      if (picture) rc = print_picture(p);
    }
  }
  free(text);
  splat_pattern_destroy(p);
  return rc;
}

/* ------------------------------------------------------------------ run */

typedef struct run_options {
  const char *spec;
  int64_t seq, batch, heads, head_dim, threads, repeat, seed, seq_k, heads_kv; /* 0: seq, heads */
  splat_dtype dtype;
  splat_backend backend;
} run_options;

/* xorshift64* in [-1, 1). */
static double next_uniform(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return (double)((*s * 2685821657736338717ULL) >> 11) * 0x1.0p-52 - 1.0;
}

/* Float64 reference for one (b, h) slice of contiguous tensors (q, out [B,H,S,D]; k, v
 * [B,Hkv,Sk,D], head h reading kv head h / (H / Hkv)): each row's softmax over the keys the
 * pattern's row set lists (O(nnz x D), so the check of a sparse pattern stays cheap at
 * long sequences). Returns max |out - ref| and the largest |ref|. */
static void reference_slice(const run_options *o, const splat_pattern *p, const void *q,
                            const void *k, const void *v, const void *out, int64_t b, int64_t h,
                            double scale, double *max_err, double *max_ref) {
  int64_t S = o->seq, Sk = o->seq_k, D = o->head_dim, base = (b * o->heads + h) * S * D;
  const int64_t hk = h / (o->heads / o->heads_kv), kbase = (b * o->heads_kv + hk) * Sk * D;
  double *s = malloc((size_t)Sk * sizeof *s), *x = malloc((size_t)((S + 2 * Sk) * D) * sizeof *x);
  int64_t *cols = malloc((size_t)Sk * sizeof *cols);
  if (!s || !x || !cols) {
    *max_err = INFINITY; /* cannot check: report a failure rather than a pass */
    S = Sk = 0;
  }
  double *qd = x, *kd = x + S * D, *vd = x + (S + Sk) * D;
  for (int64_t e = 0; e < S * D; e++) qd[e] = splat__load(q, o->dtype, base + e);
  for (int64_t e = 0; e < Sk * D; e++) {
    kd[e] = splat__load(k, o->dtype, kbase + e);
    vd[e] = splat__load(v, o->dtype, kbase + e);
  }
  for (int64_t i = 0; i < S; i++) {
    int64_t n = 0;
    splat_pattern_row(p, i, cols, Sk, &n);
    double m = -INFINITY, sum = 0;
    for (int64_t t = 0; t < n; t++) {
      double dot = 0;
      for (int64_t d = 0; d < D; d++) dot += qd[i * D + d] * kd[cols[t] * D + d];
      s[t] = scale * dot;
      if (s[t] > m) m = s[t];
    }
    for (int64_t t = 0; t < n; t++) s[t] = exp(s[t] - m), sum += s[t];
    for (int64_t d = 0; d < D; d++) {
      double acc = 0; /* a row without keys: zeros */
      for (int64_t t = 0; t < n; t++) acc += s[t] / sum * vd[cols[t] * D + d];
      double got = splat__load(out, o->dtype, base + i * D + d);
      double err = got == got ? fabs(got - acc) : INFINITY;
      if (err > *max_err) *max_err = err;
      if (fabs(acc) > *max_ref) *max_ref = fabs(acc);
    }
  }
  free(s);
  free(x);
  free(cols);
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int parse_run_options(int argc, char **argv, run_options *o) {
  static const char *const value_opts[] = {
      "--spec",    "--seq",    "--seq-k", "--heads-kv", "--batch",   "--heads", "--head-dim",
      "--threads", "--repeat", "--seed",  "--dtype",    "--backend", NULL};
  if (repeated_option("run", argc, argv, value_opts)) return 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int ok = 1;
    if (!strcmp(a, "--spec") && v && strncmp(v, "--", 2))
      o->spec = v;
    else if (!strcmp(a, "--spec")) {
      fprintf(stderr, "splat run: --spec needs a pattern, as in --spec \"window(64)\"%s%s%s\n",
              v ? " (got the option '" : "", v ? v : "", v ? "')" : "");
      return 0;
    } else if (!strcmp(a, "--seq"))
      ok = parse_int(a, v, 1, (int64_t)1 << 20, &o->seq);
    else if (!strcmp(a, "--seq-k"))
      ok = parse_int(a, v, 1, (int64_t)1 << 20, &o->seq_k);
    else if (!strcmp(a, "--heads-kv"))
      ok = parse_int(a, v, 1, 1024, &o->heads_kv);
    else if (!strcmp(a, "--batch"))
      ok = parse_int(a, v, 1, 1024, &o->batch);
    else if (!strcmp(a, "--heads"))
      ok = parse_int(a, v, 1, 1024, &o->heads);
    else if (!strcmp(a, "--head-dim"))
      ok = parse_int(a, v, 1, SPLAT_MAX_HEAD_DIM, &o->head_dim);
    else if (!strcmp(a, "--threads"))
      ok = parse_int(a, v, 1, 1024, &o->threads);
    else if (!strcmp(a, "--repeat"))
      ok = parse_int(a, v, 1, 1000, &o->repeat);
    else if (!strcmp(a, "--seed"))
      ok = parse_int(a, v, 0, INT64_MAX, &o->seed);
    else if (!strcmp(a, "--dtype")) {
      if (splat_dtype_parse(v ? v : "", &o->dtype) != SPLAT_OK) {
        fprintf(stderr, "splat run: %s\n", splat_last_error(NULL));
        return 0;
      }
    } else if (!strcmp(a, "--backend")) {
      if (v && !strcmp(v, "auto"))
        o->backend = SPLAT_BACKEND_AUTO;
      else if (v && !strcmp(v, "cpu"))
        o->backend = SPLAT_BACKEND_CPU;
      else if (v && !strcmp(v, "cuda"))
        o->backend = SPLAT_BACKEND_CUDA;
      else {
        fprintf(stderr, "splat run: --backend expects auto, cpu or cuda, got '%s'\n", v ? v : "");
        return 0;
      }
    } else {
      fprintf(stderr, "splat run: unknown option or missing value: '%s' (see splat run --help)\n",
              a);
      return 0;
    }
    if (!ok) return 0;
    i++;
  }
  return 1;
}

/* Device copies of `run`'s tensors on the CUDA backend (the driver through the runtime's
 * table, device 0's primary context, the one the splat context uses). */
typedef struct dev_buffers {
  const splat__cuda_api_table *cu;
  splat__cuda_device device;
  int open, pushed;
  CUdeviceptr ptr[5];
  size_t bytes[5];
} dev_buffers;

static splat_status dev_open(dev_buffers *d, void *host[5], const size_t bytes[5],
                             splat_tensor *ts[5]) {
  splat_status st = splat__cuda_api(&d->cu);
  if (st == SPLAT_OK) st = splat__cuda_device_open(0, &d->device);
  if (st != SPLAT_OK) return st;
  d->open = 1;
  if ((st = splat__cuda_push(&d->device)) != SPLAT_OK) return st;
  d->pushed = 1;
  for (int i = 0; i < 5; i++) {
    d->bytes[i] = bytes[i];
    st = splat__cuda_check(d->cu->cuMemAlloc(&d->ptr[i], bytes[i]), "cuMemAlloc");
    if (st == SPLAT_OK) {
      st = splat__cuda_check(d->cu->cuMemcpyHtoD(d->ptr[i], host[i], bytes[i]), "cuMemcpyHtoD");
    }
    if (st != SPLAT_OK) return st;
    ts[i]->data = (void *)(uintptr_t)d->ptr[i];
  }
  return SPLAT_OK;
}

static splat_status dev_sync(dev_buffers *d) {
  return splat__cuda_check(d->cu->cuStreamSynchronize(NULL), "cuStreamSynchronize");
}

static splat_status dev_fetch(dev_buffers *d, int i, void *host) {
  return splat__cuda_check(d->cu->cuMemcpyDtoH(host, d->ptr[i], d->bytes[i]), "cuMemcpyDtoH");
}

static void dev_close(dev_buffers *d) {
  for (int i = 0; i < 5; i++) {
    if (d->ptr[i]) d->cu->cuMemFree(d->ptr[i]);
  }
  if (d->pushed) splat__cuda_pop();
  if (d->open) splat__cuda_device_close(&d->device);
  memset(d, 0, sizeof *d);
}

static int cmd_run(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    fputs(usage_run, stdout);
    return 0;
  }
  run_options o = {"longformer(128,32)", 2048, 2, 4, 64, 0, 3, 1, 0, 0, SPLAT_BF16,
                   SPLAT_BACKEND_AUTO};
  if (!parse_run_options(argc, argv, &o)) return 2;
  if (!o.seq_k) o.seq_k = o.seq;
  if (!o.heads_kv) o.heads_kv = o.heads;
  if (o.heads % o.heads_kv) {
    fprintf(stderr, "splat run: --heads-kv %lld must divide --heads %lld\n", (long long)o.heads_kv,
            (long long)o.heads);
    return 2;
  }

  splat_context_options copt = {o.backend, 0, (int)o.threads};
  splat_context *ctx = NULL;
  splat_pattern *p = NULL;
  splat_plan *plan = NULL;
  void *q = NULL, *k = NULL, *v = NULL, *out = NULL;
  float *lse = NULL;
  int rc = 1;
  splat_status st = splat_context_create(&copt, &ctx);
  if (st != SPLAT_OK) return fail("creating the context", st, NULL);
  st = splat_pattern_parse(o.spec, o.seq, o.seq_k, &p);
  if (st != SPLAT_OK) {
    rc = fail("parsing the pattern", st, NULL);
    goto done;
  }
  splat_plan_desc desc = {o.batch, o.heads, o.heads_kv, o.head_dim,         o.dtype,
                          0,       0,       0,          SPLAT_OPS_ATTENTION};
  double t0 = splat__now_ms();
  st = splat_plan_create(ctx, p, &desc, &plan);
  double plan_ms = splat__now_ms() - t0;
  if (st != SPLAT_OK) {
    rc = fail("splat_plan_create", st, ctx);
    goto done;
  }
  splat_report rep;
  splat_plan_report(plan, &rep);

  int64_t n = o.batch * o.heads * o.seq * o.head_dim,
          nk = o.batch * o.heads_kv * o.seq_k * o.head_dim;
  size_t esz = o.dtype == SPLAT_F32 ? 4 : 2;
  /* Inputs past the machine's memory: said so, not left to malloc (which overcommits, or
   * aborts under sanitizers). */
  const double need =
      (double)(2 * n + 2 * nk) * (double)esz + (double)(o.batch * o.heads * o.seq) * sizeof *lse;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0 && need > (double)pages * (double)page) {
    fprintf(stderr,
            "splat run: the tensors need %.1f GiB of host memory; this machine has %.1f GiB "
            "(lower --batch, --heads, --seq or --head-dim)\n",
            need / (1 << 30), (double)pages * (double)page / (1 << 30));
    goto done;
  }
  q = malloc((size_t)n * esz), k = malloc((size_t)nk * esz), v = malloc((size_t)nk * esz);
  out = malloc((size_t)n * esz);
  lse = malloc((size_t)(o.batch * o.heads * o.seq) * sizeof *lse);
  if (!q || !k || !v || !out || !lse) {
    fprintf(stderr, "splat run: out of memory for %lld-element inputs\n", (long long)n);
    goto done;
  }
  uint64_t rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)o.seed;
  for (int64_t i = 0; i < n; i++) splat__store(q, o.dtype, i, next_uniform(&rng));
  for (int64_t i = 0; i < nk; i++) {
    splat__store(k, o.dtype, i, next_uniform(&rng));
    splat__store(v, o.dtype, i, next_uniform(&rng));
  }
  splat_tensor tq = splat_tensor_contiguous(q, o.dtype, o.batch, o.heads, o.seq, o.head_dim);
  splat_tensor tk = splat_tensor_contiguous(k, o.dtype, o.batch, o.heads_kv, o.seq_k, o.head_dim);
  splat_tensor tv = splat_tensor_contiguous(v, o.dtype, o.batch, o.heads_kv, o.seq_k, o.head_dim);
  splat_tensor to = splat_tensor_contiguous(out, o.dtype, o.batch, o.heads, o.seq, o.head_dim);
  splat_tensor tl = splat_tensor_contiguous(lse, SPLAT_F32, o.batch, o.heads, o.seq, 1);

  /* On CUDA the tensors live in device memory: copies of the inputs, results copied back. */
  const int on_cuda = splat_context_backend(ctx) == SPLAT_BACKEND_CUDA;
  dev_buffers dev;
  memset(&dev, 0, sizeof dev);
  if (on_cuda) {
    void *host[5] = {q, k, v, out, lse};
    size_t bytes[5] = {(size_t)n * esz, (size_t)nk * esz, (size_t)nk * esz, (size_t)n * esz,
                       (size_t)(o.batch * o.heads * o.seq) * sizeof *lse};
    splat_tensor *ts[5] = {&tq, &tk, &tv, &to, &tl};
    st = dev_open(&dev, host, bytes, ts);
    if (st != SPLAT_OK) {
      rc = fail("copying the inputs to the GPU", st, NULL);
      dev_close(&dev);
      goto done;
    }
  }
  double times[1000];
  for (int64_t r = 0; r < o.repeat; r++) {
    double t = splat__now_ms();
    st = splat_attention(plan, &tq, &tk, &tv, SPLAT_DEFAULT_SCALE, &to, &tl, NULL);
    if (st == SPLAT_OK && on_cuda) st = dev_sync(&dev);
    times[r] = splat__now_ms() - t;
    if (st != SPLAT_OK) {
      rc = fail("splat_attention", st, ctx);
      dev_close(&dev);
      goto done;
    }
  }
  if (on_cuda) {
    st = dev_fetch(&dev, 3, out);
    dev_close(&dev);
    if (st != SPLAT_OK) {
      rc = fail("copying the output from the GPU", st, NULL);
      goto done;
    }
  }
  qsort(times, (size_t)o.repeat, sizeof times[0], compare_doubles);
  double ms = times[o.repeat / 2];
  double flop = 4.0 * o.batch * o.heads * o.head_dim * (double)rep.nnz;

  printf(
      "splat run: %s, batch %lld, heads %lld (kv %lld), seq %lld x %lld, head_dim %lld, %s, "
      "backend %s\n",
      splat_pattern_spec(p), (long long)o.batch, (long long)o.heads, (long long)o.heads_kv,
      (long long)o.seq, (long long)o.seq_k, (long long)o.head_dim, splat_dtype_name(o.dtype),
      splat_backend_name(splat_context_backend(ctx)));
  printf(
      "plan:      nnz %lld (density %.2f%%), row width %lld, %.1f%% regular, %lld query tiles, "
      "%lld key runs, tile waste %.2fx; created in %.2f ms (kernels %.2f ms, %d compiled)",
      (long long)rep.nnz, 100 * rep.density, (long long)rep.row_width, 100 * rep.regular_fraction,
      (long long)rep.query_tiles, (long long)rep.key_runs, rep.tile_waste, plan_ms, rep.kernels_ms,
      rep.kernels_compiled);
  if (rep.device_bytes > 0) /* a CUDA plan's metadata */
    printf(", holds %.2f MiB of device memory", (double)rep.device_bytes / (1 << 20));
  if (rep.workspace_bytes > 0) /* two passes' rows, split tiles' chunks */
    printf(", a call takes %.2f MiB of workspace", (double)rep.workspace_bytes / (1 << 20));
  printf("\n");
  printf("attention: %.3f ms (median of %lld), %.2f useful GFLOP/s\n", ms, (long long)o.repeat,
         flop / (ms * 1e6));
  fflush(stdout); /* the float64 reference below takes seconds at large sizes */

  /* Check the first and the last (batch, head) slice against the reference, and with
   * grouped-query heads head 1 too (kv head 0: a mapping by h % heads_kv would read 1). */
  double max_err = 0, max_ref = 0, scale = 1.0 / sqrt((double)o.head_dim);
  int slices = 1;
  reference_slice(&o, p, q, k, v, out, 0, 0, scale, &max_err, &max_ref);
  if (o.batch * o.heads > 1) {
    reference_slice(&o, p, q, k, v, out, o.batch - 1, o.heads - 1, scale, &max_err, &max_ref);
    slices++;
  }
  if (o.heads_kv > 1 && o.heads > o.heads_kv && o.heads - 1 > 1) {
    reference_slice(&o, p, q, k, v, out, 0, 1, scale, &max_err, &max_ref);
    slices++;
  }
  /* The output is computed from the rounded inputs and rounded once: half an ulp of
   * the dtype at the largest magnitude bounds the error. */
  double eps = o.dtype == SPLAT_F32 ? 0x1p-24 : o.dtype == SPLAT_F16 ? 0x1p-11 : 0x1p-8;
  double bound = eps * max_ref * 1.01 + 1e-12;
  /* CUDA accumulates in fp32: an ulp of the dtype plus 4e-6 relative. */
  if (on_cuda) bound = (2 * eps + 4e-6) * max_ref + 1e-12;
  /* An all-zero reference (empty rows only) is matched exactly. */
  if (max_ref == 0) bound = 0;
  int ok = max_err <= bound;
  char why[64];
  snprintf(why, sizeof why, "%s of %s", on_cuda ? "an ulp + fp32 accumulation" : "half an ulp",
           splat_dtype_name(o.dtype));
  printf(
      "check:     max |error| %.3g against a float64 reference on %d (batch, head) "
      "slice(s); bound %.3g (%s): %s\n",
      max_err, slices, bound, max_ref == 0 ? "every reference output is 0: exact" : why,
      ok ? "OK" : "FAILED");
  rc = ok ? 0 : 1;
done:
  free(q), free(k), free(v), free(out), free(lse);
  splat_plan_destroy(plan);
  splat_pattern_destroy(p);
  splat_context_destroy(ctx);
  return rc;
}

/* ------------------------------------------------------------------ codegen */

/* Prints the ptxas report of one kernel of a compile log. */
static void print_ptxas(const char *log, const char *kernel, const char *arch, int dyn_smem) {
  splat__ptxas_stats r;
  if (splat__ptxas_report(log, kernel, &r) != SPLAT_OK) {
    printf("// ptxas %s %s: no report (%s)\n", arch, kernel, splat_last_error(NULL));
    return;
  }
  printf(
      "// ptxas %s %s: %d registers, %d bytes spill stores, %d bytes spill loads, %d bytes "
      "stack, shared memory %d bytes static + %d bytes dynamic\n",
      arch, kernel, r.registers, r.spill_stores, r.spill_loads, r.stack, r.smem, dyn_smem);
}

static int cmd_codegen(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    fputs(usage_codegen, stdout);
    return 0;
  }
  const char *spec = NULL, *arch = "sm_90a", *opname = "all";
  int64_t seq = 0, seq_k = 0, head_dim = 0, batch = 1, heads = 1, sms = 0;
  int dtype = -1, source_only = 0;
  static const char *const value_opts[] = {"--seq", "--seq-k", "--head-dim", "--dtype", "--arch",
                                           "--op",  "--batch", "--heads",    "--sms",   NULL};
  if (repeated_option("codegen", argc, argv, value_opts)) return 2;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--seq") || !strcmp(a, "--seq-k") || !strcmp(a, "--head-dim")) {
      int64_t *dst = !strcmp(a, "--seq") ? &seq : !strcmp(a, "--seq-k") ? &seq_k : &head_dim;
      if (!parse_int(a, v, 1, !strcmp(a, "--head-dim") ? SPLAT_MAX_HEAD_DIM : (int64_t)1 << 30,
                     dst))
        return 2;
      i++;
    } else if (!strcmp(a, "--batch") || !strcmp(a, "--heads") || !strcmp(a, "--sms")) {
      int64_t *dst = !strcmp(a, "--batch") ? &batch : !strcmp(a, "--heads") ? &heads : &sms;
      /* heads as splat_plan_create takes them (1 .. 65536) */
      const int64_t hi = dst == &sms ? 4096 : dst == &heads ? 65536 : (int64_t)1 << 20;
      if (!parse_int(a, v, dst == &sms ? 0 : 1, hi, dst)) return 2;
      i++;
    } else if (!strcmp(a, "--dtype") || !strcmp(a, "--arch") || !strcmp(a, "--op")) {
      if (!v) {
        fprintf(stderr, "splat codegen: %s needs a value\n", a);
        return 2;
      }
      if (!strcmp(a, "--dtype")) {
        /* The names `splat run` takes (splat_dtype_parse: f16, float16, half, ...). */
        splat_dtype parsed;
        if (splat_dtype_parse(v, &parsed) != SPLAT_OK) {
          fprintf(stderr, "splat codegen: --dtype expects f32, f16 or bf16, got '%s'\n", v);
          return 2;
        }
        dtype = (int)parsed;
      } else if (!strcmp(a, "--arch")) {
        /* sm_XY(Z), sm_XYa or sm_XYf with XY >= 80 written without leading zeros, as the
         * library takes it: the kernels use cp.async, bf16, ldmatrix */
        char *end = NULL;
        errno = 0; /* sm_99999999999999999999 saturates strtol: ERANGE, refused */
        long cc = strncmp(v, "sm_", 3) || !isdigit((unsigned char)v[3]) || v[3] == '0'
                      ? 0
                      : strtol(v + 3, &end, 10);
        if (cc < 80 || cc > 999 || errno == ERANGE || !end ||
            (*end && strcmp(end, "a") && strcmp(end, "f"))) {
          fprintf(stderr,
                  "splat codegen: --arch expects sm_80 or newer (e.g. sm_80, sm_90a), got '%s'\n",
                  v);
          return 2;
        }
        arch = v;
      } else {
        opname = v;
      }
      i++;
    } else if (!strcmp(a, "--source-only")) {
      source_only = 1;
    } else if (a[0] == '-' && a[1] == '-') {
      fprintf(stderr, "splat codegen: unknown option '%s' (see splat codegen --help)\n", a);
      return 2;
    } else if (!spec) {
      spec = a;
    } else {
      fprintf(stderr, "splat codegen: unexpected argument '%s' (quote the spec)\n", a);
      return 2;
    }
  }
  if (!spec || !seq || !head_dim || dtype < 0) {
    fprintf(stderr,
            "splat codegen: missing %s (SPEC, --seq, --head-dim and --dtype are required)\n\n%s",
            !spec       ? "SPEC"
            : !seq      ? "--seq N"
            : !head_dim ? "--head-dim D"
                        : "--dtype T",
            usage_codegen);
    return 2;
  }
  static const char *ops[SPLAT__KOP_COUNT] = {"sddmm", "softmax", "spmm", "attention"};
  int only = -1;
  for (int o = 0; o < SPLAT__KOP_COUNT; o++) {
    if (!strcmp(opname, ops[o])) only = o;
  }
  if (only < 0 && strcmp(opname, "all")) {
    fprintf(stderr,
            "splat codegen: --op expects sddmm, softmax, spmm, attention or all, got '%s'\n",
            opname);
    return 2;
  }
  splat_pattern *p = NULL;
  splat_status st = splat_pattern_parse(spec, seq, seq_k, &p);
  if (st != SPLAT_OK) return fail("parsing the pattern", st, NULL);
  /* The query tile a plan would take (tile_rows.h): for the fused attention alone
   * (--op attention), 192 rows where the rule takes them for --batch x --heads on --sms SMs. */
  int tile_q = splat__kspec_default_tile_q((splat_dtype)dtype, head_dim), take = 0;
  int64_t tail_split = 0; /* 192-row tiles split into 64-row ones for the last round */
  splat_report rep;
  memset(&rep, 0, sizeof rep);
  if (tile_q == 128 && only == SPLAT__KOP_ATTENTION) {
    const splat_plan_desc d = {batch,
                               heads,
                               heads,
                               head_dim,
                               (splat_dtype)dtype,
                               0,
                               128,
                               SPLAT_MAX_SEGMENTS,
                               SPLAT_OPS_ATTENTION};
    splat__acsr a;
    splat__tile_plan t128, t192;
    st = splat__acsr_build(p, SPLAT_MAX_SEGMENTS, &a);
    if (st == SPLAT_OK) {
      st = splat__tile_plan_build(&a, 128, 128, &t128);
      if (st == SPLAT_OK) {
        st = splat__tile_rows_choose(&a, &t128, splat_pattern_seq_k(p), &d, arch, (int)sms, 0,
                                     &t192, &take);
        /* The report of the tiles taken (192 rows may be cut at the rows' stretches), with
         * the SMs known their last round's split too (one CTA of three consumer warpgroups
         * an SM). */
        if (take && sms && st == SPLAT_OK)
          st = splat__tile_tail_apply(&t192, batch * heads, sms, &tail_split);
        if (take) {
          if (st == SPLAT_OK) st = splat__report_build(&a, &t192, &rep);
          splat__tile_plan_free(&t192);
        }
        splat__tile_plan_free(&t128);
      }
      splat__acsr_free(&a);
    }
    if (take) tile_q = 192;
  }
  const int analyze = st == SPLAT_OK && !take;
  if (analyze) st = splat_analyze(p, tile_q, 0, 0, &rep);
  if (st != SPLAT_OK) {
    splat_pattern_destroy(p);
    return fail(analyze ? "splat_analyze" : "splat codegen", st, NULL);
  }
  /* The kernels depend on the plan's dtype, head_dim, K and tile shape, not on the mask
   * (the mask reaches them as metadata), and the attention's on whether it runs two
   * passes or split tiles. The device's shared-memory limit is unknown here: every tile
   * kernel is shown (they fit the 99 KB of the smallest sm_80+ limit). 192-row tiles are
   * shown with three consumer warpgroups: the rule checked that TMA serves the plan, and
   * SPLAT_ATTN_WARPGROUPS=3 is taken as it (a plan checks its runs: tma_views.h). */
  splat__kspec specs[SPLAT__KOP_COUNT];
  st = splat__kspec_for_plan(specs, &rep, (splat_dtype)dtype, (int)head_dim, 0, arch,
                             rep.tile_q == 192);
  int two_pass = 0, split = 0;
  splat__attn_pass_shape shape[2];
  splat__kspec pass2;
  memset(&pass2, 0, sizeof pass2);
  const int attention = only < 0 || only == SPLAT__KOP_ATTENTION;
  if (st == SPLAT_OK && attention && specs[SPLAT__KOP_ATTENTION].tile)
    st = splat__attn_passes_of_pattern(p, rep.tile_q, rep.tile_k, (int)head_dim, (splat_dtype)dtype,
                                       batch, heads, arch, (int)sms, &two_pass, shape, &split);
  splat_pattern_destroy(p);
  if (st != SPLAT_OK) return fail("splat codegen", st, NULL);
  /* Each pass's tile kernel for its own rows, as plan creation does (one pass where either
   * has none). */
  splat__kspec passes[2];
  int kernels = 0;
  if (two_pass)
    st = splat__attn_pass_specs(passes, shape, &rep, (splat_dtype)dtype, (int)head_dim, 0, arch,
                                &kernels);
  if (st != SPLAT_OK) return fail("splat codegen", st, NULL);
  two_pass = two_pass && kernels;
  splat__kspec_attn_epilogues(specs, two_pass, split);
  if (two_pass) {
    specs[SPLAT__KOP_ATTENTION] = passes[0];
    pass2 = passes[1];
  }
  if (st != SPLAT_OK) return fail("splat codegen", st, NULL);
  printf(
      "// splat codegen: %s, seq %lld x %lld, head_dim %lld, %s, %s: %lld query tiles, %lld "
      "key runs\n",
      spec, (long long)rep.seq_q, (long long)rep.seq_k, (long long)head_dim,
      splat_dtype_name((splat_dtype)dtype), arch, (long long)rep.query_tiles,
      (long long)rep.key_runs);
  if (attention && specs[SPLAT__KOP_ATTENTION].tile)
    printf(
        "// fused attention: %s (as a plan of batch %lld x heads %lld decides it: a plan whose "
        "two-pass workspace would exceed 4 GiB runs one pass)\n",
        two_pass ? "two passes"
        : split  ? "one pass, split tiles (SPLAT_ATTN_SPLIT)"
                 : "one pass",
        (long long)batch, (long long)heads);
  /* How the query tiles were chosen: the rule counts rounds of the SMs (--sms). */
  char where[96];
  if (sms)
    snprintf(where, sizeof where, "batch %lld x heads %lld on %lld SMs", (long long)batch,
             (long long)heads, (long long)sms);
  else
    snprintf(where, sizeof where, "the SMs unknown, rounds not counted (--sms N counts them)");
  /* The last round's split, where the SMs are known and it split some. */
  char tail[64] = "";
  if (tail_split)
    snprintf(tail, sizeof tail, ", %lld of them split into 64-row tiles for the last round",
             (long long)tail_split);
  else if (!sms && rep.tile_q == 192)
    snprintf(tail, sizeof tail, "; the last round's split not shown");
  if (only == SPLAT__KOP_ATTENTION && specs[SPLAT__KOP_ATTENTION].tile)
    printf(
        "// query tiles of %d rows, as a plan of the fused attention alone takes them with %s"
        "%s (docs/cuda.md, Query tiles)\n",
        rep.tile_q, where, tail);
  for (int k = 0; k < 2; k++)
    if (two_pass && shape[k].wg3)
      printf(
          "// pass %d on query tiles of 192 rows, as a plan takes them with %s (docs/cuda.md, "
          "Query tiles)\n",
          k + 1, where);
  /* Every selected program (an op's row kernel, its tile kernel when it has one, and an
   * attention tile kernel's second pass or merge kernel) is
   * compiled (or read from the caches) concurrently, as plan creation does; each one's time
   * is its own, the total is the wall time. */
  splat__kspec sel[SPLAT__KPROG_MAX];
  splat__kcompiled got[SPLAT__KPROG_MAX];
  int nsel = 0, op_of[SPLAT__KPROG_MAX];
  for (int o = 0; o < SPLAT__KOP_COUNT; o++) {
    if (only >= 0 && o != only) continue;
    const int m = splat__kspec_programs(&specs[o], &pass2, &sel[nsel]);
    for (int i = 0; i < m; i++) op_of[nsel++] = o;
  }
  double all_ms = 0;
  if (!source_only) {
    const double t0 = splat__now_ms();
    st = splat__kspec_compile_all(sel, nsel, arch, got);
    if (st != SPLAT_OK) return fail("compiling with NVRTC", st, NULL);
    all_ms = splat__now_ms() - t0;
  }
  int rc = 0;
  for (int i = 0; i < nsel; i++) {
    const splat__kspec *s = &sel[i];
    char kernel[160], program[176], *src = NULL;
    splat__kspec_kernel(s, kernel, sizeof kernel);
    splat__kspec_program(s, program, sizeof program);
    st = splat__kspec_source(s, &src);
    if (st != SPLAT_OK) return fail("generating the source", st, NULL);
    printf("// ======== %s: %s\n%s", ops[op_of[i]], program, src);
    if (!source_only) {
      const splat__kcompiled *k = &got[i];
      printf("// ======== %s for %s: %s in %.1f ms, cubin %zu bytes\n", program, arch,
             splat__cache_hit_name(k->hit), k->ms, k->bin.cubin_size);
      /* dynamic shared memory: 0 for row and merge programs */
      print_ptxas(k->bin.log, kernel, arch, splat__kspec_tile_smem(s));
    }
    free(src);
  }
  if (!source_only) {
    printf("// ======== %d program(s) for %s got concurrently in %.1f ms\n", nsel, arch, all_ms);
    for (int i = 0; i < nsel; i++) splat__compiled_free(&got[i].bin);
  }
  return rc;
}

/* ------------------------------------------------------------------ cache */

static int print_cache_entry(const splat__cache_entry *e, void *user) {
  (void)user;
  if (e->valid) {
    printf("%s  %-7s %-48s cubin %7lld B  log %6lld B\n", e->key, e->arch, e->program,
           (long long)e->cubin_bytes, (long long)e->log_bytes);
  } else {
    printf("%s  invalid (corrupt, truncated or of another version: %lld B)\n", e->key,
           (long long)e->file_bytes);
  }
  return 0;
}

static int cmd_cache(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    fputs(usage_cache, stdout);
    return 0;
  }
  if (argc != 1 || (strcmp(argv[0], "list") && strcmp(argv[0], "clear"))) {
    fprintf(stderr, "splat cache: expected 'list' or 'clear'\n\n%s", usage_cache);
    return 2;
  }
  char dir[4096];
  splat_status st = splat__cache_dir(dir, sizeof dir);
  if (st != SPLAT_OK) return fail("finding the cache directory", st, NULL);
  int64_t n = 0;
  if (!strcmp(argv[0], "list")) {
    printf("cache directory: %s\n", dir);
    st = splat__cache_list(print_cache_entry, NULL, &n);
    if (st != SPLAT_OK) return fail("listing the cache", st, NULL);
    printf("%lld file(s)\n", (long long)n);
  } else {
    st = splat__cache_clear(&n);
    if (st != SPLAT_OK) return fail("clearing the cache", st, NULL);
    printf("removed %lld file(s) from %s\n", (long long)n, dir);
  }
  return 0;
}

/* ------------------------------------------------------------------ env */

static int cmd_env(int argc, char **argv) {
  if (wants_help(argc, argv)) {
    fputs(usage_env, stdout);
    return 0;
  }
  if (argc > 0) {
    fprintf(stderr, "splat env: unexpected argument '%s'\n", argv[0]);
    return 2;
  }
  splat_environment env;
  char why[512];
  /* A bad SPLAT_NUM_THREADS: reported on the cpu line, the rest still printed, exit 1. */
  const splat_status st = splat_environment_query(&env, why, sizeof why);
  char bad[512] = "";
  if (st != SPLAT_OK && st != SPLAT_ERR_INVALID_ARGUMENT)
    return fail("splat_environment_query", st, NULL);
  if (st != SPLAT_OK) snprintf(bad, sizeof bad, "%s", splat_last_error(NULL));
  printf("splat %s\n", splat_version());
  if (st != SPLAT_OK)
    printf("cpu:   unusable by default contexts: %s\n", bad);
  else
    printf("cpu:   available, %d threads (SPLAT_NUM_THREADS overrides)\n", env.cpu_threads);
  if (env.cuda_available) {
    printf("cuda:  driver %d.%d, %d device(s); device 0: %s (sm_%d%d)\n",
           env.cuda_driver_version / 1000, env.cuda_driver_version % 1000 / 10, env.cuda_devices,
           env.device_name, env.device_cc_major, env.device_cc_minor);
  } else {
    printf("cuda:  unavailable: %s\n", why);
  }
  if (env.nvrtc_available) {
    printf("nvrtc: %d.%d\n", env.nvrtc_version / 1000, env.nvrtc_version % 1000 / 10);
  } else {
    /* the loader's own sentence: which names were tried and what dlopen said */
    splat__nvrtc_version(NULL, NULL);
    printf("nvrtc: unavailable: %s\n", splat_last_error(NULL));
  }
  return st == SPLAT_OK ? 0 : 1;
}

static int run_command(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    fputs(usage_main, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "analyze")) return cmd_analyze(argc - 2, argv + 2);
  if (!strcmp(cmd, "run")) return cmd_run(argc - 2, argv + 2);
  if (!strcmp(cmd, "env")) return cmd_env(argc - 2, argv + 2);
  if (!strcmp(cmd, "cache")) return cmd_cache(argc - 2, argv + 2);
  if (!strcmp(cmd, "codegen")) return cmd_codegen(argc - 2, argv + 2);
  if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
    if (wants_help(argc - 2, argv + 2)) {
      printf("usage: splat version\n\nPrints the library's version (splat_version()).\n");
      return 0;
    }
    if (argc > 2) {
      fprintf(stderr, "splat version: unexpected argument '%s'\n", argv[2]);
      return 2;
    }
    printf("splat %s\n", splat_version());
    return 0;
  }
  fprintf(stderr, "splat: unknown command '%s'\n\n%s", cmd, usage_main);
  return 2;
}

/* A command whose output could not all be written (a full disk, a closed pipe) fails,
 * naming why, rather than exiting 0 with its output cut short. */
int main(int argc, char **argv) {
  const int rc = run_command(argc, argv);
  errno = 0;
  const int flushed = fflush(stdout) == 0;
  if (!flushed || ferror(stdout)) {
    fprintf(stderr, "splat: cannot write the output: %s\n",
            flushed || !errno ? "a write to stdout failed" : strerror(errno));
    return rc ? rc : 1;
  }
  return rc;
}
