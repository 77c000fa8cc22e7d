/* test_api.c — the public API under misuse: every bad argument returns a status and
 * a message that names it, per thread and per context; nothing crashes. */
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "splat.h"

#define SEQ 40
#define D 16

static int contains(const char *hay, const char *needle) {
  return strstr(hay, needle) != NULL;
}

static void test_names(void) {
  CHECK(!strcmp(splat_status_name(SPLAT_OK), "SPLAT_OK"));
  CHECK(!strcmp(splat_status_name(SPLAT_ERR_NO_DEVICE), "SPLAT_ERR_NO_DEVICE"));
  CHECK(!strcmp(splat_status_name((splat_status)99), "SPLAT_ERR_UNKNOWN"));
  for (int s = 0; s <= SPLAT_ERR_INTERNAL; s++) {
    CHECKF(strlen(splat_status_message((splat_status)s)) > 0, "status %d has no message", s);
    CHECKF(strncmp(splat_status_name((splat_status)s), "SPLAT_", 6) == 0, "status %d", s);
  }
  CHECK(!strcmp(splat_version(), "0.1.0"));
  splat_dtype dt;
  CHECK(splat_dtype_parse("bfloat16", &dt) == SPLAT_OK && dt == SPLAT_BF16);
  CHECK(splat_dtype_parse("FP16", &dt) == SPLAT_OK && dt == SPLAT_F16);
  CHECK(splat_dtype_parse("int8", &dt) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(contains(splat_last_error(NULL), "int8"));
  CHECK(splat_dtype_parse(NULL, &dt) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_dtype_name((splat_dtype)7) == NULL);
  CHECK(!strcmp(splat_backend_name(SPLAT_BACKEND_CUDA), "cuda"));
  splat_tensor t = splat_tensor_contiguous(NULL, SPLAT_F16, 2, 3, 4, 5);
  CHECK(t.strides[0] == 60 && t.strides[1] == 20 && t.strides[2] == 5 && t.strides[3] == 1);
}

static void test_context(void) {
  splat_context *ctx = (splat_context *)&ctx; /* must be reset to NULL on failure */
  splat_context_options bad = {(splat_backend)9, 0, 0};
  CHECK(splat_context_create(&bad, &ctx) == SPLAT_ERR_INVALID_ARGUMENT && ctx == NULL);
  CHECK(contains(splat_last_error(NULL), "backend=9"));
  splat_context_options threads = {SPLAT_BACKEND_CPU, 0, -1};
  CHECK(splat_context_create(&threads, &ctx) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(contains(splat_last_error(NULL), "num_threads=-1"));
  CHECK(splat_context_create(NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  /* $SPLAT_NUM_THREADS, read where num_threads is 0: a bad value is named, never ignored. */
  splat_context_options cpu = {SPLAT_BACKEND_CPU, 0, 0};
  splat_environment e;
  const char *bad_threads[] = {"abc", "0", "-1", "100000", "4x", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad_threads / sizeof *bad_threads; i++) {
    setenv("SPLAT_NUM_THREADS", bad_threads[i], 1);
    CHECK(splat_context_create(&cpu, &ctx) == SPLAT_ERR_INVALID_ARGUMENT && ctx == NULL);
    CHECKF(contains(splat_last_error(NULL), "SPLAT_NUM_THREADS=") &&
               contains(splat_last_error(NULL), bad_threads[i]),
           "'%s'", splat_last_error(NULL));
    CHECK(splat_environment_query(&e, NULL, 0) == SPLAT_ERR_INVALID_ARGUMENT);
  }
  setenv("SPLAT_NUM_THREADS", "3", 1);
  CHECK(splat_context_create(&cpu, &ctx) == SPLAT_OK);
  splat_context_destroy(ctx);
  CHECK(splat_environment_query(&e, NULL, 0) == SPLAT_OK && e.cpu_threads == 3);
  splat_context_options two = {SPLAT_BACKEND_CPU, 0, 2}; /* explicit: the variable unread */
  setenv("SPLAT_NUM_THREADS", "abc", 1);
  CHECK(splat_context_create(&two, &ctx) == SPLAT_OK);
  splat_context_destroy(ctx);
  /* The environment query names the variable after filling in the rest (here: no CUDA). */
  char why_env[256] = "x";
  CHECK(splat_environment_query(&e, why_env, sizeof why_env) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(contains(splat_last_error(NULL), "SPLAT_NUM_THREADS=abc"), "%s", splat_last_error(NULL));
  CHECK(e.cpu_threads == 0 && (e.cuda_available ? why_env[0] == '\0' : why_env[0] != '\0'));
  unsetenv("SPLAT_NUM_THREADS");

  /* CUDA: either a clear NO_DEVICE (no driver here) or, with a GPU, UNSUPPORTED until
   * the CUDA backend lands. Never a crash, always a sentence. */
  splat_environment env;
  char why[512];
  CHECK(splat_environment_query(&env, why, sizeof why) == SPLAT_OK);
  CHECK(env.cpu_threads >= 1);
  /* Unset, one thread per core the process may run on: its CPU affinity (taskset, a
   * container's cpuset), not every online core. */
  cpu_set_t mine, one;
  CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0 && env.cpu_threads == CPU_COUNT(&mine));
  for (int c = 0; c < CPU_SETSIZE; c++) {
    if (!CPU_ISSET(c, &mine)) continue;
    CPU_ZERO(&one);
    CPU_SET(c, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    CHECK(splat_environment_query(&env, NULL, 0) == SPLAT_OK && env.cpu_threads == 1);
    CHECK(sched_setaffinity(0, sizeof mine, &mine) == 0);
    break;
  }
  splat_context_options cuda = {SPLAT_BACKEND_CUDA, 0, 0};
  splat_status st = splat_context_create(&cuda, &ctx);
  if (!env.cuda_available) {
    CHECK(st == SPLAT_ERR_NO_DEVICE);
    CHECK(strlen(why) > 10 && contains(splat_last_error(NULL), "CUDA"));
  } else {
    CHECK(st == SPLAT_ERR_UNSUPPORTED || st == SPLAT_OK);
    if (st == SPLAT_OK) splat_context_destroy(ctx);
  }
  CHECK(splat_environment_query(NULL, NULL, 0) == SPLAT_ERR_INVALID_ARGUMENT);

  /* AUTO always yields a usable context. */
  CHECK(splat_context_create(NULL, &ctx) == SPLAT_OK);
  CHECK(splat_context_backend(ctx) == SPLAT_BACKEND_CPU);
  splat_context_destroy(ctx);
  splat_context_destroy(NULL);
  splat_pattern_destroy(NULL);
  splat_plan_destroy(NULL);
}

static void test_plan_desc(splat_context *ctx, splat_pattern *p) {
  splat_plan *plan = NULL;
  splat_plan_desc good = {2, 4, 2, D, SPLAT_F32, 0, 0, 0, 0};
  struct {
    splat_plan_desc desc;
    const char *needle;
  } cases[] = {
      {{0, 4, 0, D, SPLAT_F32, 0, 0, 0, 0}, "batch=0"},
      {{1, 0, 0, D, SPLAT_F32, 0, 0, 0, 0}, "heads=0"},
      {{1, 4, 3, D, SPLAT_F32, 0, 0, 0, 0}, "heads_kv=3"},
      {{1, 4, 0, 0, SPLAT_F32, 0, 0, 0, 0}, "head_dim=0"},
      {{1, 4, 0, 300, SPLAT_F32, 0, 0, 0, 0}, "head_dim=300"},
      {{1, 4, 0, D, (splat_dtype)5, 0, 0, 0, 0}, "dtype=5"},
      {{1, 4, 0, D, SPLAT_F32, -1, 0, 0, 0}, "tile_q=-1, tile_k=0"},
      {{1, 4, 0, D, SPLAT_F32, 0, 4096, 0, 0}, "tile_q=0, tile_k=4096"},
      {{1, 4, 0, D, SPLAT_F32, 0, 0, 9, 0}, "max_segments=9"},
      {{1, 4, 0, D, SPLAT_F32, 0, 0, 0, 32}, "ops=0x20"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    splat_status st = splat_plan_create(ctx, p, &cases[i].desc, &plan);
    CHECKF(st == SPLAT_ERR_INVALID_ARGUMENT && plan == NULL, "case %zu: %s", i,
           splat_status_name(st));
    CHECKF(contains(splat_last_error(ctx), cases[i].needle), "case %zu: '%s' lacks '%s'", i,
           splat_last_error(ctx), cases[i].needle);
  }
  CHECK(splat_plan_create(NULL, p, &good, &plan) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_plan_create(ctx, NULL, &good, &plan) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(contains(splat_last_error(ctx), "pattern is NULL"));
  CHECK(splat_plan_create(ctx, p, NULL, &plan) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_plan_create(ctx, p, &good, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  /* A plan that is created leaves the thread's message of the last failed call. */
  CHECK(splat_plan_create(ctx, p, &good, &plan) == SPLAT_OK && plan);
  CHECKF(contains(splat_last_error(NULL), "out is NULL"), "'%s'", splat_last_error(NULL));
  splat_plan_destroy(plan);
  splat_report rep;
  CHECK(splat_plan_report(NULL, &rep) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat_plan_row_width(NULL) == 0);
}

/* Random values in [-1, 1) into a float buffer. */
static void fill(float *x, size_t n, unsigned seed) {
  srand(seed);
  for (size_t i = 0; i < n; i++) x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

static void test_ops(splat_context *ctx, splat_pattern *p) {
  splat_plan *plan = NULL;
  splat_plan_desc desc = {2, 4, 2, D, SPLAT_F32, 0, 0, 0, 0};
  CHECK(splat_plan_create(ctx, p, &desc, &plan) == SPLAT_OK);
  if (!plan) return;
  int64_t W = splat_plan_row_width(plan);
  CHECK(W >= 1);
  size_t nq = 2 * 4 * SEQ * D, nkv = 2 * 2 * SEQ * D, nvals = 2 * 4 * SEQ * (size_t)W;
  float *q = malloc(nq * 4), *k = malloc(nkv * 4), *v = malloc(nkv * 4), *o = malloc(nq * 4);
  float *s = malloc(nvals * 4), *lse = malloc(2 * 4 * SEQ * 4);
  fill(q, nq, 1), fill(k, nkv, 2), fill(v, nkv, 3);
  splat_tensor tq = splat_tensor_contiguous(q, SPLAT_F32, 2, 4, SEQ, D);
  splat_tensor tk = splat_tensor_contiguous(k, SPLAT_F32, 2, 2, SEQ, D);
  splat_tensor tv = splat_tensor_contiguous(v, SPLAT_F32, 2, 2, SEQ, D);
  splat_tensor to = splat_tensor_contiguous(o, SPLAT_F32, 2, 4, SEQ, D);
  splat_tensor ts = splat_tensor_contiguous(s, SPLAT_F32, 2, 4, SEQ, W);
  splat_tensor tl = splat_tensor_contiguous(lse, SPLAT_F32, 2, 4, SEQ, 1);

  CHECK(splat_attention(plan, &tq, &tk, &tv, SPLAT_DEFAULT_SCALE, &to, &tl, NULL) == SPLAT_OK);
  CHECK(splat_sddmm(plan, &tq, &tk, 0.25f, &ts, NULL) == SPLAT_OK);
  CHECK(splat_softmax(plan, &ts, 1.0f, &ts, &tl, NULL) == SPLAT_OK); /* in place */
  CHECK(splat_spmm(plan, &ts, &tv, &to, NULL) == SPLAT_OK);
  CHECK(splat_attention(plan, &tq, &tk, &tv, 0.0f, &to, NULL, NULL) == SPLAT_OK);

  /* Each bad argument: status and a message naming it, on the context and thread. */
  splat_tensor bad;
#define EXPECT_BAD(call, needle)                                                          \
  do {                                                                                    \
    splat_status st_ = (call);                                                            \
    CHECKF(st_ == SPLAT_ERR_INVALID_ARGUMENT, "%s -> %s", #call, splat_status_name(st_)); \
    CHECKF(contains(splat_last_error(ctx), needle), "%s: '%s' lacks '%s'", #call,         \
           splat_last_error(ctx), needle);                                                \
    CHECK(!strcmp(splat_last_error(ctx), splat_last_error(NULL)));                        \
  } while (0)

  EXPECT_BAD(splat_attention(plan, NULL, &tk, &tv, 0, &to, NULL, NULL), "q is NULL");
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, NULL, NULL, NULL), "out is NULL");
  bad = tq, bad.shape[2] = SEQ + 1;
  EXPECT_BAD(splat_attention(plan, &bad, &tk, &tv, 0, &to, NULL, NULL), "q.shape=[2,4,41,16]");
  bad = tk, bad.shape[1] = 4;
  EXPECT_BAD(splat_attention(plan, &tq, &bad, &tv, 0, &to, NULL, NULL), "k.shape");
  bad = tv, bad.dtype = SPLAT_F16;
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &bad, 0, &to, NULL, NULL), "v.dtype=f16");
  bad = tq, bad.dtype = (splat_dtype)11;
  EXPECT_BAD(splat_attention(plan, &bad, &tk, &tv, 0, &to, NULL, NULL), "q.dtype=11");
  bad = tq, bad.data = NULL;
  EXPECT_BAD(splat_attention(plan, &bad, &tk, &tv, 0, &to, NULL, NULL), "q.data is NULL");
  bad = tq, bad.data = (char *)tq.data + 1; /* inside the buffer, off its elements' alignment */
  EXPECT_BAD(splat_attention(plan, &bad, &tk, &tv, 0, &to, NULL, NULL),
             "is not aligned to its 4-byte");
  bad = to, bad.data = (char *)to.data + 2;
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &bad, NULL, NULL), "out.data=");
  bad = to, bad.strides[2] = 0;
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &bad, NULL, NULL), "overlap");
  bad = to, bad.strides[1] = D; /* heads and rows collide */
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &bad, NULL, NULL), "overlap");
  bad = tq, bad.strides[0] = (int64_t)1 << 50;
  EXPECT_BAD(splat_attention(plan, &bad, &tk, &tv, 0, &to, NULL, NULL), "strides[0]");
  bad = tl, bad.dtype = SPLAT_F16;
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &to, &bad, NULL), "lse.dtype=f16");
  bad = tl, bad.shape[3] = 2;
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &to, &bad, NULL), "lse.shape");
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &tq, NULL, NULL), "out overlaps q in memory");
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, NAN, &to, NULL, NULL), "scale=nan");
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, INFINITY, &to, NULL, NULL), "scale=inf");
  EXPECT_BAD(splat_softmax(plan, &ts, NAN, &ts, NULL, NULL), "scale");
  bad = ts, bad.shape[3] = W + 1;
  EXPECT_BAD(splat_sddmm(plan, &tq, &tk, 0, &bad, NULL), "scores.shape");
  EXPECT_BAD(splat_sddmm(plan, &tq, &tk, 0, &tk, NULL), "scores.shape");
  bad = ts, bad.data = s + 1; /* shifted by one: overlaps without being the same tensor */
  EXPECT_BAD(splat_softmax(plan, &ts, 1, &bad, NULL, NULL), "overlaps scores in memory");
  EXPECT_BAD(splat_spmm(plan, &ts, &tv, &tv, NULL), "out.shape");
  EXPECT_BAD(splat_spmm(plan, &ts, NULL, &to, NULL), "v is NULL");
  CHECK(splat_attention(NULL, &tq, &tk, &tv, 0, &to, NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(contains(splat_last_error(NULL), "plan is NULL"));

  /* Outputs interleaved with inputs in one buffer ([B, S, 2H, D]: out the first H heads of
   * each row, q the last H) share no element: accepted, the same result as separate
   * buffers. Heads shifted by one row slot apart (out heads 0-3, q heads 3-6) do share. */
  {
    const int64_t H = 4, HD = 2 * H * D;
    float *both = malloc((size_t)(2 * SEQ * HD) * 4), *sep = malloc(nq * 4);
    CHECK(both && sep);
    splat_tensor io = to, iq = tq;
    io.data = both, iq.data = both + H * D;
    io.strides[0] = iq.strides[0] = SEQ * HD, io.strides[1] = iq.strides[1] = D;
    io.strides[2] = iq.strides[2] = HD, io.strides[3] = iq.strides[3] = 1;
    for (int64_t b = 0; b < 2; b++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < SEQ; i++)
          memcpy(both + b * SEQ * HD + i * HD + (H + h) * D, q + ((b * H + h) * SEQ + i) * D,
                 D * 4);
    splat_tensor ts2 = splat_tensor_contiguous(sep, SPLAT_F32, 2, 4, SEQ, D);
    CHECK(splat_attention(plan, &tq, &tk, &tv, 0.5f, &ts2, NULL, NULL) == SPLAT_OK);
    CHECK(splat_attention(plan, &iq, &tk, &tv, 0.5f, &io, NULL, NULL) == SPLAT_OK);
    int same = 1;
    for (int64_t b = 0; b < 2; b++)
      for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < SEQ; i++)
          same &= !memcmp(both + b * SEQ * HD + i * HD + h * D, sep + ((b * H + h) * SEQ + i) * D,
                          D * 4);
    CHECK(same);
    bad = iq, bad.data = both + (H - 1) * D;
    EXPECT_BAD(splat_attention(plan, &bad, &tk, &tv, 0, &io, NULL, NULL),
               "out overlaps q in memory");
    bad = iq, bad.strides[1] = D + 1; /* different head strides: not proven apart, refused */
    EXPECT_BAD(splat_attention(plan, &bad, &tk, &tv, 0, &io, NULL, NULL),
               "out overlaps q in memory");
    free(both), free(sep);
  }

  /* Non-finite inputs are refused with the tensor named, before anything is written. */
  q[5 * D + 3] = NAN;
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &to, NULL, NULL), "q[");
  q[5 * D + 3] = 0.5f;
  v[7] = INFINITY;
  EXPECT_BAD(splat_attention(plan, &tq, &tk, &tv, 0, &to, NULL, NULL), "v[");
  EXPECT_BAD(splat_spmm(plan, &ts, &tv, &to, NULL), "v[");
  v[7] = 0.5f;
  CHECK(splat_attention(plan, &tq, &tk, &tv, 0, &to, NULL, NULL) == SPLAT_OK);
#undef EXPECT_BAD

  free(q), free(k), free(v), free(o), free(s), free(lse);
  splat_plan_destroy(plan);
}

/* A plan built for some operations runs them and refuses the others, naming the flag. */
static void test_plan_ops(splat_context *ctx, splat_pattern *p) {
  splat_plan *plan = NULL;
  splat_plan_desc desc = {1, 2, 0, D, SPLAT_F32, 0, 0, 0, SPLAT_OPS_ATTENTION};
  CHECK(splat_plan_create(ctx, p, &desc, &plan) == SPLAT_OK);
  if (!plan) return;
  const int64_t W = splat_plan_row_width(plan);
  float *q = calloc(2 * SEQ * D, 4), *o = calloc(2 * SEQ * D, 4), *s = calloc(2 * SEQ * W, 4);
  fill(q, 2 * SEQ * D, 4);
  splat_tensor tq = splat_tensor_contiguous(q, SPLAT_F32, 1, 2, SEQ, D);
  splat_tensor to = splat_tensor_contiguous(o, SPLAT_F32, 1, 2, SEQ, D);
  splat_tensor ts = splat_tensor_contiguous(s, SPLAT_F32, 1, 2, SEQ, W);
  CHECK(splat_attention(plan, &tq, &tq, &tq, 0, &to, NULL, NULL) == SPLAT_OK);
  CHECK(splat_sddmm(plan, &tq, &tq, 0, &ts, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(contains(splat_last_error(ctx), "SPLAT_OPS_SDDMM") &&
             contains(splat_last_error(ctx), "ops = 0x8"),
         "'%s'", splat_last_error(ctx));
  CHECK(splat_softmax(plan, &ts, 1, &ts, NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(contains(splat_last_error(ctx), "SPLAT_OPS_SOFTMAX"));
  CHECK(splat_spmm(plan, &ts, &tq, &to, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(contains(splat_last_error(ctx), "SPLAT_OPS_SPMM"));
  splat_plan_destroy(plan);
  desc.ops = SPLAT_OPS_UNFUSED;
  CHECK(splat_plan_create(ctx, p, &desc, &plan) == SPLAT_OK);
  if (plan) {
    CHECK(splat_sddmm(plan, &tq, &tq, 0, &ts, NULL) == SPLAT_OK);
    CHECK(splat_attention(plan, &tq, &tq, &tq, 0, &to, NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(contains(splat_last_error(ctx), "SPLAT_OPS_ATTENTION"));
  }
  splat_plan_destroy(plan);
  free(q), free(o), free(s);
}

/* Shapes and strides each in range whose product is not: a plan whose tensors would have
 * more than 2^60 elements, and a tensor whose strides reach past 2^60 elements, are refused
 * with a message, before any element count or offset overflows int64. */
static void test_huge_sizes(splat_context *ctx) {
  splat_pattern *p = NULL;
  splat_plan *plan = NULL;
  CHECK(splat_pattern_parse("window(1)", 256, 0, &p) == SPLAT_OK);
  const splat_plan_desc huge = {(int64_t)1 << 31, 65536, 0, 256, SPLAT_F32, 0, 0, 0, 0};
  CHECK(splat_plan_create(ctx, p, &huge, &plan) == SPLAT_ERR_INVALID_ARGUMENT && !plan);
  CHECKF(contains(splat_last_error(ctx), "q and out") &&
             contains(splat_last_error(ctx), "batch=2147483648"),
         "'%s'", splat_last_error(ctx));
  splat_plan_destroy(plan);
  splat_pattern_destroy(p);

  /* Scores and probs of 2^31 x 128 x 4096 x W (W >= 2001: 2^61): refused for a plan of the
   * unfused operations, not for one of fused attention alone, which never has them (its q
   * and out: 2^50 elements). */
  CHECK(splat_pattern_parse("window(1000)", 4096, 0, &p) == SPLAT_OK);
  splat_plan_desc wide = {(int64_t)1 << 31, 128, 0, 1, SPLAT_F32, 0, 0, 0, 0};
  plan = NULL;
  CHECK(splat_plan_create(ctx, p, &wide, &plan) == SPLAT_ERR_INVALID_ARGUMENT && !plan);
  CHECKF(contains(splat_last_error(ctx), "scores and probs") &&
             contains(splat_last_error(ctx), "seq_q=4096 x row width W="),
         "'%s'", splat_last_error(ctx));
  wide.ops = SPLAT_OPS_ATTENTION;
  CHECKF(splat_plan_create(ctx, p, &wide, &plan) == SPLAT_OK, "attention only: '%s'",
         splat_last_error(ctx));
  splat_plan_destroy(plan);
  splat_pattern_destroy(p);

  /* 2^31 batches of one 4 x 1 head: small, but a batch stride of 2^40 reaches 2^71. */
  CHECK(splat_pattern_parse("dense", 4, 0, &p) == SPLAT_OK);
  const splat_plan_desc many = {(int64_t)1 << 31, 1, 0, 1, SPLAT_F32, 0, 0, 0, 0};
  plan = NULL;
  CHECK(splat_plan_create(ctx, p, &many, &plan) == SPLAT_OK);
  if (plan) {
    static float q[8], o[8];
    splat_tensor tq = splat_tensor_contiguous(q, SPLAT_F32, (int64_t)1 << 31, 1, 4, 1);
    splat_tensor to = splat_tensor_contiguous(o, SPLAT_F32, (int64_t)1 << 31, 1, 4, 1);
    tq.strides[0] = (int64_t)1 << 40;
    CHECK(splat_attention(plan, &tq, &tq, &tq, 0, &to, NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECKF(contains(splat_last_error(ctx), "q.strides=[1099511627776,"), "'%s'",
           splat_last_error(ctx));
  }
  splat_plan_destroy(plan);
  splat_pattern_destroy(p);
}

/* A batch or head dimension of extent 1 is indexed at 0 only: whatever its stride (2^50,
 * INT64_MIN: a framework may leave any value there), the results are those of the contiguous
 * tensors, bit for bit; softmax in place is still recognised as in place. A key dimension of
 * extent 1 keeps the range check. */
static void test_unused_strides(splat_context *ctx) {
  enum { S = 24, DH = 8, H = 3 };
  splat_pattern *p = NULL;
  CHECK(splat_pattern_parse("window(5) | global(1)", S, 0, &p) == SPLAT_OK);
  splat_plan *plan = NULL;
  const splat_plan_desc desc = {1, H, 1, DH, SPLAT_F32, 0, 0, 0, 0};
  CHECK(p && splat_plan_create(ctx, p, &desc, &plan) == SPLAT_OK);
  if (!plan) {
    splat_pattern_destroy(p);
    return;
  }
  const int64_t W = splat_plan_row_width(plan);
  static float q[H * S * DH], k[S * DH], v[S * DH], o1[H * S * DH], o2[H * S * DH];
  float *s1 = calloc((size_t)(H * S * W), 4), *s2 = calloc((size_t)(H * S * W), 4);
  fill(q, H * S * DH, 4), fill(k, S * DH, 5), fill(v, S * DH, 6);
  splat_tensor tq = splat_tensor_contiguous(q, SPLAT_F32, 1, H, S, DH);
  splat_tensor tk = splat_tensor_contiguous(k, SPLAT_F32, 1, 1, S, DH);
  splat_tensor tv = splat_tensor_contiguous(v, SPLAT_F32, 1, 1, S, DH);
  splat_tensor to1 = splat_tensor_contiguous(o1, SPLAT_F32, 1, H, S, DH);
  splat_tensor to2 = to1;
  to2.data = o2;
  CHECK(splat_attention(plan, &tq, &tk, &tv, 0, &to1, NULL, NULL) == SPLAT_OK);
  splat_tensor wq = tq, wk = tk, wv = tv;
  wq.strides[0] = (int64_t)1 << 50;
  wk.strides[0] = INT64_MIN, wk.strides[1] = (int64_t)1 << 45;
  wv.strides[0] = 7, wv.strides[1] = -3; /* also off the 16-byte alignment vector loads need */
  to2.strides[0] = (int64_t)1 << 61;
  CHECKF(splat_attention(plan, &wq, &wk, &wv, 0, &to2, NULL, NULL) == SPLAT_OK, "'%s'",
         splat_last_error(ctx));
  CHECK(memcmp(o1, o2, sizeof o1) == 0);
  splat_tensor ts1 = splat_tensor_contiguous(s1, SPLAT_F32, 1, H, S, W), ts2 = ts1, ts2b;
  ts2.data = s2;
  CHECK(splat_sddmm(plan, &tq, &tk, 0.5f, &ts1, NULL) == SPLAT_OK);
  CHECK(splat_sddmm(plan, &wq, &wk, 0.5f, &ts2, NULL) == SPLAT_OK);
  ts2b = ts2, ts2b.strides[0] = 12345; /* the same elements as ts2: in place */
  CHECK(splat_softmax(plan, &ts1, 1.0f, &ts1, NULL, NULL) == SPLAT_OK);
  CHECKF(splat_softmax(plan, &ts2, 1.0f, &ts2b, NULL, NULL) == SPLAT_OK, "'%s'",
         splat_last_error(ctx));
  CHECK(memcmp(s1, s2, (size_t)(H * S * W) * 4) == 0);
  splat_plan_destroy(plan);
  /* seq_k 1: the key dimension's stride stays range-checked */
  splat_pattern_destroy(p);
  p = NULL;
  const splat_plan_desc one = {1, 1, 1, DH, SPLAT_F32, 0, 0, 0, 0};
  plan = NULL;
  CHECK(splat_pattern_parse("dense", 4, 1, &p) == SPLAT_OK &&
        splat_plan_create(ctx, p, &one, &plan) == SPLAT_OK);
  if (plan) {
    splat_tensor k1 = splat_tensor_contiguous(k, SPLAT_F32, 1, 1, 1, DH);
    splat_tensor q1 = splat_tensor_contiguous(q, SPLAT_F32, 1, 1, 4, DH);
    splat_tensor out1 = splat_tensor_contiguous(o1, SPLAT_F32, 1, 1, 4, DH);
    k1.strides[2] = (int64_t)1 << 50;
    CHECK(splat_attention(plan, &q1, &k1, &k1, 0, &out1, NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECKF(contains(splat_last_error(ctx), "k.strides[2]=1125899906842624 is out of range"), "'%s'",
           splat_last_error(ctx));
  }
  splat_plan_destroy(plan);
  splat_pattern_destroy(p);
  free(s1);
  free(s2);
}

int main(void) {
  test_names();
  test_context();
  splat_context_options opt = {SPLAT_BACKEND_CPU, 0, 2};
  splat_context *ctx = NULL;
  splat_pattern *p = NULL;
  CHECK(splat_context_create(&opt, &ctx) == SPLAT_OK);
  CHECK(splat_pattern_parse("window(3) | global(2)", SEQ, 0, &p) == SPLAT_OK);
  if (ctx && p) {
    test_plan_desc(ctx, p);
    test_ops(ctx, p);
    test_plan_ops(ctx, p);
    test_huge_sizes(ctx);
    test_unused_strides(ctx);
  }
  splat_pattern_destroy(p);
  splat_context_destroy(ctx);
  return harness_finish();
}
