/* test_cuda_runtime.c — the CUDA runtime layer without a GPU: the driver table's
 * no-device answer and error mapping, the hash, logging defaults, code generation
 * from embedded templates, the choice of attention tile kernel, the workspace pool against
 * a fake driver table, the split of long
 * attention tiles, the choice of 192-row query tiles, NVRTC compiles of smoke.cuh for
 * sm_90a and sm_80 with the ptxas report, compile errors, the memory and disk kernel caches
 * (corruption, unwritable directories, 4 concurrent writer processes), list/clear and
 * SPLAT_DUMP_DIR. NVRTC tests are skipped (not passed) only when NVRTC cannot be
 * loaded. On a machine with a GPU it also loads and launches the smoke kernel. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../kernels/tma_view.cuh"
#include "analysis/acsr.h"
#include "analysis/report.h"
#include "analysis/tile_plan.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/log.h"
#include "core/timer.h"
#include "cuda/attn_passes.h"
#include "cuda/codegen.h"
#include "cuda/cuda_types.h"
#include "cuda/driver.h"
#include "cuda/kernel_cache.h"
#include "cuda/kgen.h"
#include "cuda/nvrtc.h"
#include "cuda/tile_rows.h"
#include "cuda/tile_split.h"
#include "cuda/tile_tail.h"
#include "cuda/tma_views.h"
#include "cuda/workspace.h"
#include "cuda/ws_tables.h"
#include "harness.h"
#include "support/reference_patterns.h"

static int skipped;

static void skip(const char *what, const char *why) {
  printf("SKIP %s: %s\n", what, why);
  skipped++;
}

/* ------------------------------------------------------------ files */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)flag;
  (void)ftw;
  return remove(path);
}

static void rm_rf(const char *path) {
  nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static unsigned char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf) buf[n] = '\0';
  fclose(f);
  if (size) *size = (size_t)n;
  return buf;
}

static int write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, n, f);
  fclose(f);
  return w == n ? 0 : -1;
}

/* ------------------------------------------------------------ no GPU, errors */

static void test_driver(void) {
  const splat__cuda_api_table *cu = (const splat__cuda_api_table *)(uintptr_t)1;
  splat_status st = splat__cuda_api(&cu);
  if (st != SPLAT_OK) {
    CHECK(st == SPLAT_ERR_NO_DEVICE);
    CHECK(cu == NULL);
    const char *msg = splat__thread_error();
    CHECKF(strlen(msg) > 20, "message '%s'", msg);
    CHECKF(strstr(msg, "libcuda") || strstr(msg, "cuInit") || strstr(msg, "driver"), "'%s'", msg);
    /* Asking again gives the same answer, and devices fail the same way. */
    CHECK(splat__cuda_api(NULL) == SPLAT_ERR_NO_DEVICE);
    splat__cuda_device dev;
    CHECK(splat__cuda_device_open(0, &dev) == SPLAT_ERR_NO_DEVICE);
    CHECK(dev.context == NULL);
    splat__cuda_device_close(&dev);
    splat__cuda_device_close(NULL);
    CHECK(splat__cuda_push(&dev) == SPLAT_ERR_INVALID_ARGUMENT);
    CHECK(splat__cuda_pop() == SPLAT_ERR_NO_DEVICE);
  } else {
    CHECK(cu != NULL && cu->cuLaunchKernel != NULL && cu->driver_version >= 12000);
  }
  /* Error mapping works with or without a driver. */
  CHECK(splat__cuda_check(CUDA_SUCCESS, "cuMemAlloc") == SPLAT_OK);
  CHECK(splat__cuda_check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc") == SPLAT_ERR_OUT_OF_MEMORY);
  CHECKF(strstr(splat__thread_error(), "cuMemAlloc failed: ") == splat__thread_error(), "'%s'",
         splat__thread_error());
  CHECK(splat__cuda_check(CUDA_ERROR_INVALID_IMAGE, "cuModuleLoadData") == SPLAT_ERR_CUDA);
  const char *msg = splat__thread_error();
  CHECKF(strstr(msg, "cuModuleLoadData failed: ") &&
             (strstr(msg, "CUDA_ERROR_INVALID_IMAGE") || strstr(msg, "CUDA error 200")),
         "'%s'", msg);

  char arch[16];
  splat__cuda_arch_name(9, 0, arch, sizeof arch);
  CHECK(!strcmp(arch, "sm_90a"));
  splat__cuda_arch_name(8, 0, arch, sizeof arch);
  CHECK(!strcmp(arch, "sm_80"));
  splat__cuda_arch_name(8, 9, arch, sizeof arch);
  CHECK(!strcmp(arch, "sm_89"));
  splat__cuda_arch_name(10, 0, arch, sizeof arch);
  CHECK(!strcmp(arch, "sm_100"));
}

/* ------------------------------------------------------------ hash, log */

static void test_hash(void) {
  /* FNV-1a 64 reference vectors. */
  CHECK(splat__fnv1a64("", 0) == 0xcbf29ce484222325ull);
  CHECK(splat__fnv1a64("a", 1) == 0xaf63dc4c8601ec8cull);
  CHECK(splat__fnv1a64("foobar", 6) == 0x85944171f73967e8ull);
  /* The 128-bit hash is pinned: changing it silently invalidates every disk cache. */
  char hex[33];
  splat__hash_hex(splat__hash_bytes("", 0), hex);
  CHECKF(!strcmp(hex, "eeac3c200a1a7876183e3f291bb73a54"), "hash('') = %s", hex);
  splat__hash_hex(splat__hash_bytes("splat", 5), hex);
  CHECKF(!strcmp(hex, "1b21be0b9b430a2b02a025f33e4baef1"), "hash('splat') = %s", hex);
  /* Incremental = one shot, whatever the split. */
  const char *text = "extern \"C\" __global__ void k(int *o) { o[0] = 42; }";
  size_t n = strlen(text);
  splat__hash128 whole = splat__hash_bytes(text, n);
  for (size_t cut = 0; cut <= n; cut += 7) {
    splat__hash h;
    splat__hash_init(&h);
    splat__hash_update(&h, text, cut);
    splat__hash_update(&h, text + cut, n - cut);
    splat__hash128 v = splat__hash_final(&h);
    CHECK(v.hi == whole.hi && v.lo == whole.lo);
  }
  /* Strings are length-delimited. */
  splat__hash a, b;
  splat__hash_init(&a);
  splat__hash_str(&a, "ab");
  splat__hash_str(&a, "c");
  splat__hash_init(&b);
  splat__hash_str(&b, "a");
  splat__hash_str(&b, "bc");
  splat__hash128 va = splat__hash_final(&a), vb = splat__hash_final(&b);
  CHECK(va.hi != vb.hi || va.lo != vb.lo);
  /* One bit flips about half of the output bits. */
  splat__hash128 x = splat__hash_bytes("splat", 5), y = splat__hash_bytes("splaT", 5);
  int bits = __builtin_popcountll(x.hi ^ y.hi) + __builtin_popcountll(x.lo ^ y.lo);
  CHECKF(bits > 40 && bits < 88, "%d bits differ", bits);
  /* Hex round trip. */
  splat__hash128 back;
  splat__hash_hex(whole, hex);
  CHECK(splat__hash_parse_hex(hex, &back) && back.hi == whole.hi && back.lo == whole.lo);
  CHECK(!splat__hash_parse_hex("0123456789abcdef0123456789abcdeg", &back));

  if (!getenv("SPLAT_LOG_LEVEL")) {
    CHECK(splat__log_threshold() == SPLAT__LOG_OFF);
    CHECK(!splat__log_enabled(SPLAT__LOG_ERROR));
    splat__log(SPLAT__LOG_ERROR, "this must not print (%d)", 1);
  }
}

/* ------------------------------------------------------------ codegen */

/* The smoke kernel's source: out[i] = value + i, kernel name splat_smoke_<tag>. */
static char *smoke_source(const char *tag, int value, char *kernel, size_t cap) {
  snprintf(kernel, cap, "splat_smoke_%s", tag);
  char v[32];
  snprintf(v, sizeof v, "%d", value);
  splat__define defs[] = {{"SPLAT_SMOKE_NAME", kernel}, {"SPLAT_SMOKE_VALUE", v}};
  char comment[128];
  snprintf(comment, sizeof comment, "smoke kernel %s: out[i] = %d + i", tag, value);
  char *src = NULL;
  splat_status st = splat__codegen("smoke.cuh", defs, 2, comment, &src);
  CHECKF(st == SPLAT_OK, "%s", splat__thread_error());
  return src;
}

static void test_codegen(void) {
  CHECK(splat__kernel_template("smoke.cuh") != NULL);
  CHECK(splat__kernel_template("params.cuh") != NULL);
  CHECK(splat__kernel_template("nope.cuh") == NULL);
  CHECK(splat__kernel_template(NULL) == NULL);
  CHECK(splat__kernel_template_name(0) != NULL);
  CHECK(splat__kernel_template_name(-1) == NULL);
  CHECK(splat__kernel_template_name(100000) == NULL);
  int found = 0;
  for (int i = 0; splat__kernel_template_name(i); i++) {
    found |= !strcmp(splat__kernel_template_name(i), "smoke.cuh");
    if (i > 0)
      CHECK(strcmp(splat__kernel_template_name(i - 1), splat__kernel_template_name(i)) < 0);
  }
  CHECK(found);

  splat__define defs[] = {
      {"SPLAT_SMOKE_NAME", "splat_smoke_cg"}, {"SPLAT_SMOKE_VALUE", "42"}, {"SPLAT_BARE", NULL}};
  char *src = NULL;
  CHECK(splat__codegen("smoke.cuh", defs, 3, "smoke, value 42 */ evil", &src) == SPLAT_OK);
  if (src) {
    const char *want =
        "/* smoke, value 42 * / evil */\n#define SPLAT_SMOKE_NAME splat_smoke_cg\n"
        "#define SPLAT_SMOKE_VALUE 42\n#define SPLAT_BARE\n#line 1 \"kernels/smoke.cuh\"\n";
    CHECKF(!strncmp(src, want, strlen(want)), "source starts:\n%.300s", src);
    /* params.cuh is expanded in place, once, and the include line is gone. */
    const char *params = strstr(src, "#line 1 \"kernels/params.cuh\"\n");
    CHECK(params != NULL);
    CHECK(strstr(src, "SPLAT_KERNELS_PARAMS_CUH") != NULL);
    CHECK(strstr(src, "#include \"params.cuh\"") == NULL);
    CHECK(strstr(src, "extern \"C\" __global__ void SPLAT_SMOKE_NAME") != NULL);
    /* After the include, line numbers resume in smoke.cuh. */
    CHECK(strstr(src, "\n#line 5 \"kernels/smoke.cuh\"\n") != NULL);
    free(src);
  }
  /* Errors. */
  src = (char *)1;
  CHECK(splat__codegen("nope.cuh", NULL, 0, NULL, &src) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(src == NULL);
  CHECKF(strstr(splat__thread_error(), "nope.cuh") && strstr(splat__thread_error(), "smoke.cuh"),
         "'%s'", splat__thread_error());
  splat__define bad_name[] = {{"2X", "1"}};
  CHECK(splat__codegen("smoke.cuh", bad_name, 1, NULL, &src) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(splat__thread_error(), "'2X'") != NULL);
  splat__define bad_value[] = {{"X", "1\n#define Y 2"}};
  CHECK(splat__codegen("smoke.cuh", bad_value, 1, NULL, &src) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__codegen("smoke.cuh", NULL, 1, NULL, &src) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__codegen("smoke.cuh", NULL, 0, NULL, NULL) == SPLAT_ERR_INVALID_ARGUMENT);
}

/* ------------------------------------------------------------ kernel choice */

/* Which attention tile kernel a plan gets: on sm_90a for f16/bf16 at head_dim 64 and 128
 * the wgmma kernel (one warpgroup by default, two when asked and tile_q >= 128) or, asked
 * for, the warp-specialised one (two consumer warpgroups by default, one at head_dim 64
 * only, plus its producer warpgroup); mma.sync elsewhere, none for f32; SPLAT_ATTN_WS and
 * SPLAT_ATTN_WARPGROUPS are parsed with a sentence on bad values. */
static void test_kernel_choice(void) {
  const int SYNC = SPLAT__WGMMA_SYNC, WS = SPLAT__WGMMA_WS;
  splat__kspec sp[SPLAT__KOP_COUNT];
  char rows[160], tile[160];
  splat__kspec *a = &sp[SPLAT__KOP_ATTENTION];
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(a->tile && a->wgmma == SYNC && a->warps == 4 && a->kt == 64 && a->stages == 3);
  CHECK(splat__kspec_tile_threads(a) == 128);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_attn_wgmma_bf16_d64_q64_k128_kt64_s3_seg1"), "%s", tile);
  CHECK(sp[SPLAT__KOP_SDDMM].wgmma == SYNC && !sp[SPLAT__KOP_SPMM].wgmma);
  splat__kspec_plan(sp, SPLAT_F16, 128, 2, 128, 128, 128, 0, "sm_90a", SYNC, 2, 0);
  CHECK(a->wgmma == SYNC && a->warps == 8 && a->stages == 3 && splat__kspec_tile_threads(a) == 256);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_attn_wgmma_f16_d128_q128_k128_kt64_s3_seg2"), "%s", tile);
  /* 1 KB slack + Q (128 rows) + 3 x (K, V) of 64 keys x 256 B + 3 tables of 128 rows. */
  CHECK(splat__kspec_tile_smem(a) ==
        1024 + (128 + 2 * 3 * 64) * 256 + 3 * 128 * (2 * 16 + 4) + 128 * 4);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 64, 128, 64, 0, "sm_90a", SYNC, 2,
                    0); /* tile_q 64: one */
  CHECK(a->wgmma == SYNC && a->warps == 4);

  /* The warp-specialised kernel: 2 consumer warpgroups + the producer by default, 128-key
   * sub-tiles in 4 stages at head_dim 64 (3 where 4 are over the shared-memory limit);
   * 64-key ones in 4 stages when asked, when the key tile is not a multiple of 128, or when
   * the 128-key kernel's shared memory is over the limit even in 3 stages. */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && a->kt == 128 && a->stages == 4 &&
        splat__kspec_tile_threads(a) == 384);
  CHECK(splat__kspec_ws_ctas_per_sm(a, 233472) == 1);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_attn_ws_bf16_d64_q128_k128_kt128_s4_seg1"), "%s",
         tile); /* the plain epilogue until splat__kspec_attn_epilogues */
  CHECK(splat__kspec_tile_smem(a) == 1024 + (2 * 128 + 2 * 4 * 128) * 128 + 12 * 8 +
                                         4 * 128 * (16 + 4) + 4 * 4 * 16 + 2 * 128 * 4 + 2 * 48);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 170 * 1024, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->kt == 128 && a->stages == 3); /* 4 stages: 172.3 KB */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 64);
  CHECK(a->wgmma == WS && a->kt == 64 && a->stages == 4);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_attn_ws_bf16_d64_q128_k128_kt64_s4_seg1"), "%s",
         tile); /* the plain epilogue until splat__kspec_attn_epilogues */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 192, 128, 0, "sm_90a", WS, 0, 128); /* tile_k 192 */
  CHECK(a->wgmma == WS && a->kt == 64);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 8, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->kt == 128 && splat__kspec_tile_smem(a) > 170 * 1024); /* 8 segments a row */

  /* Three consumer warpgroups: 192-row tiles of more than 128 rows, 16-bit head_dim
   * 32 .. 64, key tiles of 128, warpgroups 3 (the caller's word that TMA serves every
   * sub-tile): 128-key sub-tiles in 4 stages, no gather; the unfused ops' kernels take the
   * tiles as row blocks of 64. Anything else: as warpgroups 0. */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 128, 192, 0, "sm_90a", WS, 3, 0);
  CHECK(a->wgmma == WS && a->warps == 12 && a->kt == 128 && a->stages == 4 && !a->gather &&
        splat__kspec_tile_threads(a) == 512 && splat__kspec_ws_ctas_per_sm(a, 233472) == 1);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_attn_ws_bf16_d64_q192_k128_kt128_s4_seg1"), "%s", tile);
  CHECK(splat__kspec_tile_smem(a) == 1024 + (2 * 192 + 2 * 4 * 128) * 128 + 12 * 8 +
                                         4 * 192 * (16 + 4) + 4 * 6 * 16 + 2 * 192 * 4 + 2 * 48);
  CHECK(sp[SPLAT__KOP_SDDMM].tile && sp[SPLAT__KOP_SDDMM].warps == 4 && sp[SPLAT__KOP_SPMM].tile &&
        sp[SPLAT__KOP_SPMM].warps == 4);
  splat__kspec_attn_epilogues(sp, 0, 1); /* split tiles: two warpgroups, the gather */
  CHECK(a->epi == SPLAT_EPI_SPLIT && a->warps == 8 && a->gather && a->kt == 128);
  splat__kspec_plan(sp, SPLAT_F16, 32, 2, 192, 128, 192, 0, "sm_90a", WS, 3, 0);
  CHECK(a->warps == 12 && !a->gather);
  splat__kspec_attn_epilogues(sp, 0, 0);
  CHECK(a->epi == SPLAT_EPI_PLAIN && a->warps == 12 && !a->gather);
  /* Head_dim 128: 64-key sub-tiles in 3 stages, no gather (bench/NOTES.md v73); 96 (as 128
   * columns) takes no 192-row tiles. */
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 192, 128, 192, 0, "sm_90a", WS, 3, 0);
  CHECK(a->wgmma == WS && a->warps == 12 && a->kt == 64 && a->stages == 3 && !a->gather);
  CHECK(splat__kspec_tile_smem(a) == 1024 + (2 * 192 + 2 * 3 * 64) * 256 + 10 * 8 +
                                         3 * 192 * (16 + 4) + 3 * 6 * 16 + 2 * 192 * 4 + 2 * 48);
  splat__kspec_plan(sp, SPLAT_BF16, 128, 3, 192, 128, 192, 232448, "sm_90a", WS, 3, 0);
  CHECK(a->warps == 12 && splat__kspec_tile_smem(a) == 229584);
  /* 4 segments a row exceed the opt-in (238,800 bytes): two warpgroups, 64-key sub-tiles. */
  splat__kspec_plan(sp, SPLAT_BF16, 128, 4, 192, 128, 192, 232448, "sm_90a", WS, 3, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && a->kt == 64 && a->gather &&
        splat__kspec_tile_smem(a) <= 232448);
  splat__kspec_plan(sp, SPLAT_BF16, 96, 1, 192, 128, 192, 0, "sm_90a", WS, 3, 0);
  CHECK(!a->tile);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", WS, 3, 0);
  CHECK(a->warps == 8 && a->kt == 128 && a->gather); /* 128-row tiles */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 128, 128, 0, "sm_90a", WS, 3, 0);
  CHECK(a->warps == 8 && a->gather); /* no tile of more than 128 rows */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 192, 192, 0, "sm_90a", WS, 3, 0);
  CHECK(a->warps == 8 && a->kt == 64 && a->gather); /* key tiles of 192 */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 128, 192, 0, "sm_90a", WS, 3, 64);
  CHECK(a->warps == 8 && a->kt == 64 && a->gather); /* 64-key sub-tiles asked */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 128, 192, 0, "sm_90a", SYNC, 3, 0);
  CHECK(a->wgmma == SYNC && a->warps == 4 && a->gather);
  splat__kspec_plan(sp, SPLAT_F32, 64, 1, 192, 128, 192, 0, "sm_90a", WS, 3, 0);
  CHECK(!a->wgmma && a->gather);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 128, 192, 0, "sm_80", WS, 3, 0);
  CHECK(a->tile && !a->wgmma && a->warps == 4);
  /* Over the shared memory at 4 stages (194 KB): 3; over at 3 (158 KB): two warpgroups
   * (the tile's second row block of 64 rows leaves the second idle). */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 128, 192, 170 * 1024, "sm_90a", WS, 3, 0);
  CHECK(a->warps == 12 && a->stages == 3 && !a->gather);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 192, 128, 192, 140 * 1024, "sm_90a", WS, 3, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && a->gather && splat__kspec_tile_smem(a) <= 140 * 1024);
  /* The plan's tile before the analysis: 192 rows only under SPLAT_ATTN_WARPGROUPS=3, 16-bit
   * head_dim 32 .. 64. */
  setenv("SPLAT_ATTN_WARPGROUPS", "3", 1);
  CHECK(splat__kspec_default_tile_q(SPLAT_BF16, 64) == 192);
  CHECK(splat__kspec_default_tile_q(SPLAT_F16, 32) == 192);
  CHECK(splat__kspec_default_tile_q(SPLAT_F32, 64) == 128);
  CHECK(splat__kspec_default_tile_q(SPLAT_BF16, 128) == 192);
  CHECK(splat__kspec_default_tile_q(SPLAT_BF16, 96) == 128); /* 72 .. 120 spill on three */
  CHECK(splat__kspec_default_tile_q(SPLAT_BF16, 24) == 128);
  setenv("SPLAT_ATTN_WARPGROUPS", "2", 1);
  CHECK(splat__kspec_default_tile_q(SPLAT_BF16, 64) == 128);
  unsetenv("SPLAT_ATTN_WARPGROUPS");
  CHECK(splat__kspec_default_tile_q(SPLAT_BF16, 64) == 128);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 8, 128, 128, 128, 170 * 1024, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->kt == 64 && splat__kspec_tile_smem(a) <= 170 * 1024);
  splat__kspec_plan(sp, SPLAT_F16, 128, 2, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && a->stages == 3);
  /* Two Q buffers + the ring + 10 mbarriers (full and empty per stage and per Q buffer) +
   * tables + their spans (16 bytes per stage and producer warp) + two buffers of row ids +
   * two task records (48 bytes each). */
  CHECK(splat__kspec_tile_smem(a) == 1024 + (2 * 128 + 2 * 3 * 64) * 256 + 10 * 8 +
                                         3 * 128 * (2 * 16 + 4) + 3 * 4 * 16 + 2 * 128 * 4 +
                                         2 * 48);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", WS, 1, 0);
  CHECK(a->wgmma == WS && a->warps == 4 && splat__kspec_tile_threads(a) == 256);
  CHECK(splat__kspec_ws_ctas_per_sm(a, 233472) == 2); /* 2 x 89 KB fit 228 KB */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 8, 128, 128, 128, 0, "sm_90a", WS, 1, 0);
  CHECK(a->wgmma == WS && splat__kspec_tile_smem(a) == 117472 + 2 * 48);
  CHECK(splat__kspec_ws_ctas_per_sm(a, 233472) == 1); /* 8 segments a row: 2 x 115 KB do not fit */
  /* Head_dim 200 .. 256: the warp-specialised kernel as 256 columns, two consumer warpgroups
   * with one Q buffer where rows have at most 3 segments (one where the environment asks for
   * it, or where the epilogue would spill: splat__kspec_ws_narrow), the same shared memory;
   * 136 .. 192 as 192 columns with two (one where the query tiles have 64 rows or the
   * environment asks for one), the same shared memory (bench/NOTES.md v35, v36, v72). */
  splat__kspec_plan(sp, SPLAT_BF16, 256, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  const int smem256 = splat__kspec_tile_smem(a);
  CHECK(a->wgmma == WS && a->warps == 8 && a->stages == 2 && splat__kspec_ws_qbufs(a) == 1);
  /* One Q buffer of 128 rows and 2 stages of 64-key K and V tiles, of 256 columns, 6
   * mbarriers, the tables and their spans, a row-id buffer and a task record: 199 KB. */
  CHECK(smem256 ==
        1024 + (128 + 2 * 2 * 64) * 512 + 6 * 8 + 2 * 128 * (16 + 4) + 2 * 4 * 16 + 128 * 4 + 48);
  CHECK(splat__kspec_ws_ctas_per_sm(a, 233472) == 1);
  splat__kspec_plan(sp, SPLAT_F16, 200, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && splat__kspec_tile_smem(a) == smem256);
  splat__kspec_plan(sp, SPLAT_BF16, 256, 3, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->warps == 8 && splat__kspec_tile_smem(a) <= 232448);
  splat__kspec_plan(sp, SPLAT_BF16, 256, 4, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->warps == 4 && splat__kspec_ws_qbufs(a) == 2); /* 4 segments a row: one */
  /* Tiles of at most 64 rows (phase classes of 64: the lattice pass of strided(64) | window(64)
   * at 4096) would leave the second warpgroup idle: one. */
  splat__kspec_plan(sp, SPLAT_BF16, 256, 1, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->warps == 4 && splat__kspec_ws_qbufs(a) == 2);
  splat__kspec_plan(sp, SPLAT_BF16, 192, 1, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->warps == 8); /* 192 columns: as before (v36) */
  splat__kspec_plan(sp, SPLAT_BF16, 256, 1, 128, 128, 128, 0, "sm_90a", WS, 1, 0);
  const int smem256_one = splat__kspec_tile_smem(a);
  CHECK(a->warps == 4 && a->stages == 2 && splat__kspec_ws_qbufs(a) == 2);
  /* One warpgroup: two Q buffers of 64 rows, the rest as two's tables for 64 rows. */
  CHECK(smem256_one == 1024 + (2 * 64 + 2 * 2 * 64) * 512 + 8 * 8 + 2 * 64 * (16 + 4) + 2 * 2 * 16 +
                           2 * 64 * 4 + 2 * 48);
  /* The epilogues two warpgroups at 256 columns spill with: one (split tiles; f16's pass 1
   * and any pass 2 above one segment a row). */
  static const struct {
    splat_dtype dt;
    int two_pass, split, epi, warps;
  } epis256[] = {{SPLAT_F16, 0, 1, SPLAT_EPI_SPLIT, 4},
                 {SPLAT_F16, 1, 0, SPLAT_EPI_PASS1, 4},
                 {SPLAT_BF16, 1, 0, SPLAT_EPI_PASS1, 8},
                 {SPLAT_BF16, 0, 0, SPLAT_EPI_PLAIN, 8}};
  for (int i = 0; i < 4; i++) {
    splat__kspec_plan(sp, epis256[i].dt, 256, 2, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
    splat__kspec_attn_epilogues(sp, epis256[i].two_pass, epis256[i].split);
    CHECKF(a->epi == epis256[i].epi && a->warps == epis256[i].warps, "case %d: epi %d, %d warps", i,
           a->epi, a->warps);
  }
  splat__kspec_plan(sp, SPLAT_BF16, 192, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  const int smem192 = splat__kspec_tile_smem(a);
  CHECK(a->wgmma == WS && a->warps == 8 && a->stages == 2 && a->kt == 64);
  /* Two Q buffers of 128 rows and 2 stages of 64-key K and V tiles, of 192 columns: 189 KB. */
  CHECK(smem192 == 1024 + (2 * 128 + 2 * 2 * 64) * 384 + 8 * 8 + 2 * 128 * (16 + 4) + 2 * 4 * 16 +
                       2 * 128 * 4 + 2 * 48);
  splat__kspec_plan(sp, SPLAT_F16, 136, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && splat__kspec_tile_smem(a) == smem192);
  splat__kspec_plan(sp, SPLAT_BF16, 160, 1, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8); /* above head_dim 64 a tile's rows do not count */
  splat__kspec_plan(sp, SPLAT_BF16, 160, 1, 64, 64, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 4); /* query tiles of 64 rows: one */
  splat__kspec_plan(sp, SPLAT_BF16, 184, 1, 128, 128, 128, 0, "sm_90a", WS, 1, 0);
  CHECK(a->wgmma == WS && a->warps == 4 && a->stages == 2);
  splat__kspec_plan(sp, SPLAT_F16, 192, 6, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && splat__kspec_tile_smem(a) <= 232448);
  splat__kspec_plan(sp, SPLAT_F16, 192, 7, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 4); /* 7 segments a row: one warpgroup */
  CHECK(splat__kspec_tile_threads(&sp[SPLAT__KOP_SDDMM]) == 32 * sp[SPLAT__KOP_SDDMM].warps);
  /* Query tiles of at most 64 rows (phase classes: strided(64) at 4096) at head_dim 64:
   * one consumer warpgroup, however many segments a row has (a two-pass plan's strided
   * pass); not when tiles have more rows. splat__kspec_for_plan
   * counts a report's tile rows only where rows have one segment (else the plan may run
   * two passes, each specialised for its own tiles). */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 4);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 2, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 4 && a->max_segs == 2);
  /* At 72 .. 128 such tiles make the two-warpgroup kernel narrow: one warpgroup in 2
   * stages, two CTAs an SM, for the epilogues that compile clean with it (bench/NOTES.md
   * v51): PLAIN, PASS2, PASS1 in bf16; not SPLIT, nor f16's PASS1; not with more than two
   * segments a row, nor where the environment asks for a number of warpgroups. */
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && a->narrow);
  {
    const splat__kspec wide = *a;
    const int epis[4] = {SPLAT_EPI_PLAIN, SPLAT_EPI_PASS2, SPLAT_EPI_PASS1, SPLAT_EPI_SPLIT};
    for (int e = 0; e < 4; e++) {
      for (int f16 = 0; f16 < 2; f16++) {
        *a = wide;
        a->epi = epis[e];
        a->dt = a->vdt = a->pdt = f16 ? SPLAT_F16 : SPLAT_BF16;
        splat__kspec_ws_narrow(a);
        const int one = e < 2 || (e == 2 && !f16);
        CHECKF(a->warps == (one ? 4 : 8) && a->stages == (one ? 2 : 3), "epi %d f16 %d", e, f16);
        if (one) CHECK(splat__kspec_ws_ctas_per_sm(a, 233472) == 2);
      }
    }
  }
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  a->epi = SPLAT_EPI_PLAIN;
  splat__kspec_ws_narrow(a);
  a->epi = SPLAT_EPI_SPLIT; /* epilogues set again: back to two */
  splat__kspec_ws_narrow(a);
  CHECK(a->warps == 8 && a->stages == 3);
  /* Below head_dim 128 every narrow kernel spilled 4 bytes: not narrow. */
  splat__kspec_plan(sp, SPLAT_F16, 96, 2, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && !a->narrow);
  splat__kspec_plan(sp, SPLAT_BF16, 128, 3, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && !a->narrow);
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 128, 128, 65, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && !a->narrow);
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 128, 128, 64, 0, "sm_90a", WS, 2, 0);
  CHECK(a->wgmma == WS && a->warps == 8 && !a->narrow);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->warps == 4 && !a->narrow); /* head_dim 64: one warpgroup already */
  {
    splat_report r;
    memset(&r, 0, sizeof r);
    r.tile_q = r.tile_k = 128;
    r.tile_rows_max = 64;
    r.max_segments = 2;
    r.rows_by_segments[1] = 100;
    CHECK(splat__kspec_for_plan(sp, &r, SPLAT_BF16, 64, 0, "sm_90a", 0) == SPLAT_OK);
    CHECK(a->wgmma == WS && a->warps == 4);
    /* Head_dim 128: narrow, one warpgroup once the plain epilogue is set, two for split
     * tiles. */
    CHECK(splat__kspec_for_plan(sp, &r, SPLAT_BF16, 128, 0, "sm_90a", 0) == SPLAT_OK);
    CHECK(a->wgmma == WS && a->warps == 8 && a->narrow);
    splat__kspec_attn_epilogues(sp, 0, 0);
    CHECK(a->warps == 4 && a->stages == 2);
    splat__kspec_attn_epilogues(sp, 0, 1);
    CHECK(a->warps == 8 && a->stages == 3 && a->epi == SPLAT_EPI_SPLIT);
    r.rows_by_segments[2] = 1;
    CHECK(splat__kspec_for_plan(sp, &r, SPLAT_BF16, 64, 0, "sm_90a", 0) == SPLAT_OK);
    CHECK(a->wgmma == WS && a->warps == 8 && a->max_segs == 2);
    char rows_name[96], tile_name[96];
    splat__kspec_names(a, rows_name, tile_name, sizeof rows_name);
    CHECKF(!strcmp(tile_name, "splat_attn_ws_bf16_d64_q128_k128_kt128_s4_seg2"), "%s", tile_name);
    r.max_segments = 3;
    r.rows_by_segments[3] = 1;
    CHECK(splat__kspec_for_plan(sp, &r, SPLAT_BF16, 64, 0, "sm_90a", 0) == SPLAT_OK);
    CHECK(a->max_segs == 3);
  }
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 65, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && a->warps == 8);
  /* head_dim 128 with one consumer warpgroup (asked, or tile_q 64): the wgmma kernel. */
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 128, 128, 128, 0, "sm_90a", WS, 1, 0);
  CHECK(a->tile && a->wgmma == SYNC && a->warps == 4);
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 64, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && a->wgmma == SYNC && a->warps == 4);
  /* Its shared memory over the device's limit (8 segments a row at head_dim 128: 217 KB):
   * the wgmma kernel, which fits. */
  splat__kspec_plan(sp, SPLAT_BF16, 128, 8, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->wgmma == WS && splat__kspec_tile_smem(a) > 200 * 1024);
  splat__kspec_plan(sp, SPLAT_BF16, 128, 8, 128, 128, 128, 200 * 1024, "sm_90a", WS, 0, 0);
  CHECK(a->tile && a->wgmma == SYNC && splat__kspec_tile_smem(a) <= 200 * 1024);

  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_80", WS, 0, 0);
  CHECK(a->tile && !a->wgmma);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strncmp(tile, "splat_attn_tile_bf16", 20), "%s", tile);
  splat__kspec_plan(sp, SPLAT_BF16, 40, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0,
                    0); /* head_dim 40 */
  CHECK(a->tile && !a->wgmma);
  /* 16-bit head_dim 32: the warp-specialised kernel as 64 columns (its name says d32), with
   * one segment a row or more; the mma.sync kernel on sm_80 and in f32. */
  splat__kspec_plan(sp, SPLAT_BF16, 32, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && a->wgmma == WS && a->warps == 8 && a->kt == 128);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strncmp(tile, "splat_attn_ws_bf16_d32_", 23), "%s", tile);
  splat__kspec_plan(sp, SPLAT_F16, 32, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && a->wgmma == WS);
  splat__kspec_plan(sp, SPLAT_BF16, 32, 2, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && a->wgmma == WS && a->max_segs == 2);
  splat__kspec_plan(sp, SPLAT_BF16, 32, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(a->tile && !a->wgmma); /* SPLAT_ATTN_WS=0: the wgmma kernel is 64 / 128 only */
  splat__kspec_plan(sp, SPLAT_BF16, 32, 1, 128, 128, 128, 0, "sm_80", WS, 0, 0);
  CHECK(a->tile && !a->wgmma);
  splat__kspec_plan(sp, SPLAT_F32, 32, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && !a->wgmma);
  /* f32 attention: the mma.sync tile kernel (3xTF32), never wgmma; above head_dim 128 (O in
   * column panels) for one pass without split tiles only: with split tiles, the row kernel. */
  splat__kspec_plan(sp, SPLAT_F32, 128, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && !a->wgmma && a->kt == 16);
  splat__kspec_plan(sp, SPLAT_F32, 256, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && !a->wgmma && a->kt == 16 && a->warps == 8); /* one CTA an SM: 8 warps */
  splat__kspec_plan(sp, SPLAT_F32, 256, 1, 64, 128, 64, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && a->warps == 4); /* tile_q 64 */
  splat__kspec_plan(sp, SPLAT_F32, 256, 1, 128, 128, 128, 163 * 1024, "sm_80", WS, 0, 0);
  CHECK(a->tile && a->warps == 4 && splat__kspec_tile_smem(a) <= 163 * 1024); /* an A100's */
  splat__kspec_plan(sp, SPLAT_F32, 256, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  splat__kspec_attn_epilogues(sp, 0, 0);
  CHECK(a->tile && a->epi == SPLAT_EPI_PLAIN);
  splat__kspec_attn_epilogues(sp, 0, 1);
  CHECK(!a->tile && a->epi == SPLAT_EPI_PLAIN);
  splat__kspec_plan(sp, SPLAT_F32, 136, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && a->warps == 4); /* two CTAs an SM */
  splat__kspec_attn_epilogues(sp, 0, 1);
  CHECK(!a->tile);
  splat__kspec_plan(sp, SPLAT_F32, 128, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  splat__kspec_attn_epilogues(sp, 0, 1);
  CHECK(a->tile && a->epi == SPLAT_EPI_SPLIT);
  splat__kspec_plan(sp, SPLAT_F32, 64, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(a->tile && !a->wgmma && a->kt == 32 && a->stages == 2 && a->warps == 4);
  splat__kspec_plan(sp, SPLAT_F32, 48, 1, 128, 128, 128, 0, "sm_90a", WS, 0, 0);
  CHECK(a->tile && !a->wgmma && a->kt == 32 && a->stages == 3);
  splat__kspec_plan(sp, SPLAT_F32, 64, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  splat__kspec_names(a, rows, tile, sizeof rows);
  CHECKF(!strncmp(tile, "splat_attn_tile_f32", 19), "%s", tile);
  /* The f32 R-SDDMM on sm_90a: 3xTF32 on wgmma (sddmm_wgmma.cuh) at head_dim 64 (64-key
   * sub-tiles) and 128 (32-key), one warpgroup; mma.sync on sm_80, at head_dim 40 (not
   * whole 32-element panels) and where its shared memory is over. */
  splat__kspec *sd = &sp[SPLAT__KOP_SDDMM];
  CHECK(sd->tile && sd->wgmma == SYNC && sd->warps == 4 && sd->kt == 64 && sd->stages == 2);
  CHECK(splat__kspec_tile_threads(sd) == 128);
  splat__kspec_names(sd, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_sddmm_wgmma_f32_v_f32_d64_q64_k128_kt64_s2_seg1_w2"), "%s", tile);
  /* The write-out's lanes per row: 2 for rows in identity order, 4 for regrouped rows
   * (without bulk copies: f32 scores). */
  CHECK(!sd->write_mode);
  splat__kspec_write_lanes(sp, 1);
  CHECK(sd->write_lanes == 4 && sp[SPLAT__KOP_SPMM].write_lanes == 0);
  splat__kspec_names(sd, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_sddmm_wgmma_f32_v_f32_d64_q64_k128_kt64_s2_seg1_w4"), "%s", tile);
  splat__kspec_write_lanes(sp, 0);
  CHECK(sd->write_lanes == 2);
  /* The 16-bit R-SDDMM: a 3-stage ring up to head_dim 64, 2 stages above (3 CTAs an SM). */
  {
    splat__kspec h;
    splat__kspec_init(&h, SPLAT__KOP_SDDMM, SPLAT_BF16, SPLAT_BF16, SPLAT_BF16, 64, 1, 128, 128);
    CHECK(h.tile && h.kt == 64 && h.stages == 3);
    splat__kspec_init(&h, SPLAT__KOP_SDDMM, SPLAT_F16, SPLAT_F16, SPLAT_F16, 128, 1, 128, 128);
    CHECK(h.tile && h.kt == 64 && h.stages == 2 && splat__kspec_tile_smem(&h) < 227 * 1024 / 3);
  }
  /* The f32 R-SpMM: the mma.sync tile kernel (3xTF32), 64-key sub-tiles (32 above head_dim
   * 64) in 2 stages; shared memory: the V ring of rows of head_dim + 4 floats, the 64 x (KT
   * + 8) float P slice, 2 tables of 64 rows, row ids. Above head_dim 128 O in two column
   * panels. */
  {
    splat__kspec m;
    splat__kspec_init(&m, SPLAT__KOP_SPMM, SPLAT_F32, SPLAT_F32, SPLAT_F32, 64, 1, 128, 128);
    CHECK(m.tile && m.kt == 64 && m.stages == 2 &&
          splat__kspec_tile_smem(&m) == 2 * 64 * 68 * 4 + 64 * 72 * 4 + 2 * 64 * 20 + 256);
    splat__kspec_init(&m, SPLAT__KOP_SPMM, SPLAT_F32, SPLAT_F32, SPLAT_F32, 40, 1, 128, 128);
    CHECK(m.tile && m.kt == 64 &&
          splat__kspec_tile_smem(&m) == 2 * 64 * 44 * 4 + 64 * 72 * 4 + 2 * 64 * 20 + 256);
    splat__kspec_init(&m, SPLAT__KOP_SPMM, SPLAT_F32, SPLAT_F32, SPLAT_F32, 128, 1, 128, 128);
    CHECK(m.tile && m.kt == 32 && m.stages == 2 &&
          splat__kspec_tile_smem(&m) == 2 * 32 * 132 * 4 + 64 * 40 * 4 + 2 * 64 * 20 + 256);
    splat__kspec_init(&m, SPLAT__KOP_SPMM, SPLAT_F32, SPLAT_F32, SPLAT_F32, 256, 1, 128, 128);
    CHECK(m.tile && m.kt == 32 && /* O in two column panels: the same stages as at 128 */
          splat__kspec_tile_smem(&m) == 2 * 32 * 260 * 4 + 64 * 40 * 4 + 2 * 64 * 20 + 256);
  }
  /* 1 KB slack + 2 K stages and the lo tile (64 keys x 256 B) + Q (64 rows of 68 floats,
   * over the 64 x 72 staging floats) + 8 runs + 2 tables of 64 rows + row ids. */
  CHECK(splat__kspec_tile_smem(sd) ==
        1024 + 3 * 64 * 256 + 64 * 72 * 4 + 8 * 32 + 2 * 64 * (16 + 4) + 64 * 4);
  splat__kspec_plan(sp, SPLAT_F32, 128, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->wgmma == SYNC && sd->kt == 32 &&
        splat__kspec_tile_smem(sd) ==
            1024 + 3 * 32 * 512 + 64 * 132 * 4 + 8 * 32 + 2 * 64 * 20 + 256);
  splat__kspec_plan(sp, SPLAT_F32, 128, 1, 128, 128, 128, 84 * 1024, "sm_90a", SYNC, 0, 0);
  CHECK(sd->tile && !sd->wgmma); /* 87.0 KB over an 84 KB limit: mma.sync's 80.9 KB fit */
  splat__kspec_plan(sp, SPLAT_F32, 64, 1, 128, 128, 128, 0, "sm_80", SYNC, 0, 0);
  CHECK(sd->tile && !sd->wgmma);
  splat__kspec_names(sd, rows, tile, sizeof rows);
  CHECKF(!strncmp(tile, "splat_sddmm_tile_f32", 20), "%s", tile);
  splat__kspec_plan(sp, SPLAT_F32, 40, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->tile && !sd->wgmma);
  /* head_dim 96: 24 chunks a row do not divide the 128 threads (the split's assignment);
   * 32: not among the head_dims checked on a GPU. */
  splat__kspec_plan(sp, SPLAT_F32, 96, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->tile && !sd->wgmma);
  splat__kspec_plan(sp, SPLAT_F32, 32, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->tile && !sd->wgmma);
  /* f16 / bf16 on wgmma too. head_dim 64: 1 KB slack + 2 K stages of 128 keys x 128 B + the
   * 64 x 136 staging scores (over Q's 64 rows of 72 elements) + 8 runs + 2 tables of 64
   * rows + row ids; 64-key sub-tiles in 3 stages where the key tile is not a multiple
   * of 128. head_dim 128: 2 stages of 64 keys x 256 B and Q rows of 136. */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->tile && sd->wgmma == SYNC && sd->kt == 128 && sd->stages == 2);
  splat__kspec_names(sd, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_sddmm_wgmma_bf16_v_bf16_d64_q64_k128_kt128_s2_seg1_w2_rows"), "%s",
         tile);
  /* Shifted staging rows (128 keys of 16-bit scores: 256 bytes a row): 2 lanes a row,
   * regrouped too; rows of one interval by the warp's row stores (16-byte records a row). */
  splat__kspec_write_lanes(sp, 0);
  CHECK(sd->write_mode == SPLAT__WRITE_ROWS && sd->write_lanes == 2);
  CHECK(splat__kspec_tile_smem(sd) ==
        1024 + 2 * 128 * 128 + 64 * 136 * 2 + 8 * 32 + 2 * 64 * 20 + 256 + 64 * 16);
  /* Regrouped rows (dilated) too (their row width keeps them off each other's sectors). */
  splat__kspec_write_lanes(sp, 1);
  CHECK(sd->write_mode == SPLAT__WRITE_ROWS && sd->write_lanes == 2);
  /* Rows of two intervals too (one range a row and sub-tile by the row stores). */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 2, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  splat__kspec_names(sd, rows, tile, sizeof rows);
  CHECKF(!strcmp(tile, "splat_sddmm_wgmma_bf16_v_bf16_d64_q64_k128_kt128_s2_seg2_w2_rows"), "%s",
         tile);
  CHECK(sd->write_mode == SPLAT__WRITE_ROWS &&
        splat__kspec_tile_smem(sd) ==
            1024 + 2 * 128 * 128 + 64 * 136 * 2 + 8 * 32 + 2 * 64 * 36 + 256 + 64 * 16);
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(splat__kspec_use_sddmm_wgmma(sd, 0) == 1 && sd->kt == 128); /* already converted */
  /* SPLAT_SDDMM_WGMMA=0 gives the mma.sync kernel its own 64-key sub-tiles in 3 stages. */
  setenv("SPLAT_SDDMM_WGMMA", "0", 1);
  CHECK(splat__kspec_env_sddmm(sp, 0) == SPLAT_OK && sd->tile && !sd->wgmma && sd->kt == 64 &&
        sd->stages == 3 && !sd->write_mode);
  unsetenv("SPLAT_SDDMM_WGMMA");
  /* Bulk copies only for rows of 256 bytes a sub-tile: not with 64 16-bit keys. */
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 64, 64, 64, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->wgmma == SYNC && sd->kt == 64 && sd->stages == 3 && !sd->write_mode &&
        splat__kspec_tile_smem(sd) ==
            1024 + 3 * 64 * 128 + 64 * 72 * 2 + 8 * 32 + 3 * 64 * 20 + 256);
  splat__kspec_plan(sp, SPLAT_F16, 128, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->wgmma == SYNC && sd->stages == 2 && !sd->write_mode &&
        splat__kspec_tile_smem(sd) ==
            1024 + 2 * 64 * 256 + 64 * 136 * 2 + 8 * 32 + 2 * 64 * 20 + 256);
  splat__kspec_plan(sp, SPLAT_F16, 128, 1, 128, 32, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(sd->tile && sd->kt == 32 && !sd->wgmma);
  /* SPLAT_SDDMM_WGMMA=0: the mma.sync kernel (80.9 KB at head_dim 128), dropped when over the
   * limit; bad values are refused with a sentence. */
  unsetenv("SPLAT_SDDMM_WGMMA");
  splat__kspec_plan(sp, SPLAT_F32, 128, 1, 128, 128, 128, 0, "sm_90a", SYNC, 0, 0);
  CHECK(splat__kspec_env_sddmm(sp, 0) == SPLAT_OK && sd->wgmma == SYNC);
  setenv("SPLAT_SDDMM_WGMMA", "0", 1);
  CHECK(splat__kspec_env_sddmm(sp, 0) == SPLAT_OK && sd->tile && !sd->wgmma);
  splat__kspec_plan(sp, SPLAT_F32, 128, 1, 128, 128, 128, 87 * 1024, "sm_90a", SYNC, 0, 0);
  CHECK(sd->wgmma == SYNC);
  CHECK(splat__kspec_env_sddmm(sp, 78 * 1024) == SPLAT_OK && !sd->tile && !sd->wgmma);
  setenv("SPLAT_SDDMM_WGMMA", "no", 1);
  CHECK(splat__kspec_env_sddmm(sp, 0) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat__thread_error(), "SPLAT_SDDMM_WGMMA=no"), "'%s'", splat__thread_error());
  unsetenv("SPLAT_SDDMM_WGMMA");
  /* A tile kernel whose shared memory exceeds the device's limit is dropped. */
  splat__kspec_plan(sp, SPLAT_BF16, 128, 1, 128, 128, 128, 48 * 1024, "sm_90a", SYNC, 0, 0);
  CHECK(!a->tile);

  int kind = -1, w = -1, kt = -1;
  unsetenv("SPLAT_ATTN_WS");
  unsetenv("SPLAT_ATTN_WARPGROUPS");
  unsetenv("SPLAT_ATTN_KT");
  CHECK(splat__kspec_env_attn(&kind, &w, &kt) == SPLAT_OK && kind == WS && w == 0 && kt == 0);
  setenv("SPLAT_ATTN_KT", "64", 1);
  CHECK(splat__kspec_env_attn(&kind, &w, &kt) == SPLAT_OK && kt == 64);
  setenv("SPLAT_ATTN_KT", "96", 1);
  CHECK(splat__kspec_env_attn(&kind, &w, &kt) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat__thread_error(), "SPLAT_ATTN_KT=96"), "'%s'", splat__thread_error());
  unsetenv("SPLAT_ATTN_KT");
  setenv("SPLAT_ATTN_WS", "1", 1);
  setenv("SPLAT_ATTN_WARPGROUPS", "1", 1);
  CHECK(splat__kspec_env_attn(&kind, &w, &kt) == SPLAT_OK && kind == WS && w == 1);
  setenv("SPLAT_ATTN_WS", "0", 1);
  setenv("SPLAT_ATTN_WARPGROUPS", "2", 1);
  CHECK(splat__kspec_env_attn(&kind, &w, &kt) == SPLAT_OK && kind == SYNC && w == 2);
  setenv("SPLAT_ATTN_WARPGROUPS", "4", 1);
  CHECK(splat__kspec_env_attn(&kind, &w, &kt) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat__thread_error(), "SPLAT_ATTN_WARPGROUPS=4") &&
             strstr(splat__thread_error(), "1, 2 or 3"),
         "'%s'", splat__thread_error());
  unsetenv("SPLAT_ATTN_WARPGROUPS");
  setenv("SPLAT_ATTN_WS", "yes", 1);
  CHECK(splat__kspec_env_attn(&kind, &w, &kt) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat__thread_error(), "SPLAT_ATTN_WS=yes"), "'%s'", splat__thread_error());
  unsetenv("SPLAT_ATTN_WS");

  int on = -1;
  unsetenv("SPLAT_ATTN_PERSISTENT");
  CHECK(splat__kspec_env_persistent(&on) == SPLAT_OK && on == 1);
  setenv("SPLAT_ATTN_PERSISTENT", "0", 1);
  CHECK(splat__kspec_env_persistent(&on) == SPLAT_OK && on == 0);
  setenv("SPLAT_ATTN_PERSISTENT", "on", 1);
  CHECK(splat__kspec_env_persistent(&on) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat__thread_error(), "SPLAT_ATTN_PERSISTENT=on"), "'%s'", splat__thread_error());
  unsetenv("SPLAT_ATTN_PERSISTENT");
  unsetenv("SPLAT_ATTN_TMA");
  CHECK(splat__tma_env(&on) == SPLAT_OK && on == 1);
  setenv("SPLAT_ATTN_TMA", "0", 1);
  CHECK(splat__tma_env(&on) == SPLAT_OK && on == 0);
  setenv("SPLAT_ATTN_TMA", "2", 1);
  CHECK(splat__tma_env(&on) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECKF(strstr(splat__thread_error(), "SPLAT_ATTN_TMA=2"), "'%s'", splat__thread_error());
  unsetenv("SPLAT_ATTN_TMA");
}

/* ------------------------------------------------------------ TMA views */

/* A stand-in for cuTensorMapEncodeTiled: records its last arguments, fails on request. */
static struct {
  int calls, fail_at, dtype, swizzle;
  unsigned rank, box[5];
  void *addr;
  unsigned long long dims[5], strides[4];
} fake_tma;

static CUresult fake_encode(void *map, int dtype, unsigned rank, void *addr,
                            const unsigned long long *dims, const unsigned long long *strides,
                            const unsigned *box, const unsigned *elem_strides, int interleave,
                            int swizzle, int l2_promotion, int oob_fill) {
  (void)l2_promotion;
  if (++fake_tma.calls == fake_tma.fail_at) return CUDA_ERROR_INVALID_VALUE;
  memset(map, 0xAB, sizeof(splat_tensor_map));
  fake_tma.dtype = dtype;
  fake_tma.rank = rank;
  fake_tma.addr = addr;
  fake_tma.swizzle = swizzle;
  for (unsigned i = 0; i < rank && i < 5; i++) {
    fake_tma.dims[i] = dims[i];
    fake_tma.box[i] = box[i];
    if (i < 4) fake_tma.strides[i] = strides[i];
    if (elem_strides[i] != 1 || interleave != 0 || oob_fill != 0) return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* Views: one per (stride, width) in order of first use, none where a box cannot follow
 * the group (width not dividing 64, a piece crossing the stride, stride past seq_k) or
 * past SPLAT_TMA_VIEWS pairs; the maps' shape, strides and box for K [B][Hkv][S][D]. */
static void test_tma_views(void) {
  splat_dev_run runs[] = {
      {0, 1, 1, 0, 2, 0, 9, 0},      /* contiguous: view 0 */
      {1, 2, 1, 0, 1, 1, 9, 0},      /* dilated by 2: view 1 */
      {0, 2, 1, 64, 1, 0, 9, 0},     /* other phase, same view */
      {3, 256, 32, 0, 1, 1, 9, 0},   /* fixed's summary columns: view 2 */
      {240, 256, 32, 0, 1, 1, 9, 0}, /* 240 + 32 > 256: none */
      {0, 8, 3, 0, 1, 1, 9, 0},      /* width 3 does not divide 64: none */
      {0, 5000, 1, 0, 1, 1, 9, 0},   /* stride past seq_k: none */
      {2, 4, 1, 0, 1, 1, 9, 0},      /* view 3 */
      {1, 6, 1, 0, 1, 1, 9, 0},      /* a fifth pair: none */
      {0, 1, 1, 512, 3, 1, 9, 0},    /* contiguous again: view 0 */
      {5, 4, 1, 0, 1, 1, 9, 0},      /* phase past the stride: none */
      {-1, 2, 1, 0, 1, 1, 9, 0},     /* negative phase: none */
  };
  const int want[] = {0, 1, 1, 2, -1, -1, -1, 3, -1, 0, -1, -1};
  splat__tma_views v;
  splat__tma_views_assign(runs, 12, 4096, &v);
  CHECK(v.n == 4 && v.stride[0] == 1 && v.stride[1] == 2 && v.stride[2] == 256 &&
        v.width[2] == 32 && v.stride[3] == 4);
  for (int i = 0; i < 12; i++) CHECKF(runs[i].view == want[i], "run %d: view %d", i, runs[i].view);
  /* Two passes (pass 1's two contiguous runs, then pass 2's two of stride 64): views over
   * the passes the warp-specialised kernel runs; another kernel's runs keep their field
   * (7 here) and take no slot. */
  splat__tma_views pv;
  const int64_t pn[2] = {2, 2};
  const int both[2] = {1, 1}, second[2] = {0, 1}, first[2] = {1, 0};
  for (int c = 0; c < 3; c++) {
    splat_dev_run pr[4] = {{0, 1, 1, 0, 2, 1, 7, 0},
                           {0, 1, 1, 256, 1, 1, 7, 0},
                           {5, 64, 1, 0, 1, 0, 7, 0},
                           {9, 64, 1, 0, 1, 0, 7, 0}};
    const int *ws = c == 0 ? both : c == 1 ? second : first;
    splat__tma_views_assign_passes(pr, pn, ws, 4096, &pv);
    const int w1 = c == 0 ? 0 : c == 1 ? 7 : 0, w2 = c == 0 ? 1 : c == 1 ? 0 : 7;
    CHECKF(pv.n == (c == 0 ? 2 : 1) && pv.stride[0] == (c == 1 ? 64 : 1) && pr[0].view == w1 &&
               pr[1].view == w1 && pr[2].view == w2 && pr[3].view == w2,
           "passes case %d: %d views, runs %d %d %d %d", c, pv.n, pr[0].view, pr[1].view,
           pr[2].view, pr[3].view);
  }

  /* K and V [2][3][4096][128] bf16, contiguous. */
  static uint16_t kbuf[8], vbuf[8];
  splat_tensor k = splat_tensor_contiguous(kbuf, SPLAT_BF16, 2, 3, 4096, 128);
  splat_tensor vt = splat_tensor_contiguous(vbuf, SPLAT_BF16, 2, 3, 4096, 128);
  static splat_attention_params prm;
  memset(&fake_tma, 0, sizeof fake_tma);
  splat__tma_views_encode(&v, fake_encode, &k, &vt, 2, 3, 4096, 128, &prm);
  CHECK(prm.tma == 1 && fake_tma.calls == 8 && fake_tma.rank == 5 && fake_tma.addr == vbuf);
  /* The last map: view 3 (stride 4, width 1) of V. */
  CHECK(fake_tma.dims[0] == 128 && fake_tma.dims[1] == 4 && fake_tma.dims[2] == 1024 &&
        fake_tma.dims[3] == 3 && fake_tma.dims[4] == 2);
  CHECK(fake_tma.strides[0] == 256 && fake_tma.strides[1] == 1024 &&
        fake_tma.strides[2] == 4096ull * 256 && fake_tma.strides[3] == 3ull * 4096 * 256);
  CHECK(fake_tma.box[0] == 64 && fake_tma.box[1] == 1 && fake_tma.box[2] == 64 &&
        fake_tma.box[3] == 1 && fake_tma.box[4] == 1);
  CHECK(fake_tma.dtype == 9 && fake_tma.swizzle == 3); /* BFLOAT16, SWIZZLE_128B */
  CHECK(((const unsigned char *)prm.kmap[2].opaque)[0] == 0xAB);
  /* View 2 (stride 256, width 32): box {64, 32, 2}. */
  splat__tma_views one = {1, {256}, {32}};
  memset(&fake_tma, 0, sizeof fake_tma);
  splat__tma_views_encode(&one, fake_encode, &k, &vt, 2, 3, 4096, 128, &prm);
  CHECK(prm.tma == 1 && fake_tma.box[1] == 32 && fake_tma.box[2] == 2 && fake_tma.dims[2] == 16);
  /* Batch 1, one KV head: the unit dims get the span below them as stride. */
  splat_tensor k1 = splat_tensor_contiguous(kbuf, SPLAT_F16, 1, 1, 100, 64);
  memset(&fake_tma, 0, sizeof fake_tma);
  splat__tma_views_encode(&one, fake_encode, &k1, &k1, 1, 1, 100, 64, &prm);
  CHECK(prm.tma == 0 && fake_tma.calls == 0); /* stride 256 > seq_k 100: no map */
  splat__tma_views ctg = {1, {1}, {1}};
  memset(&fake_tma, 0, sizeof fake_tma);
  splat__tma_views_encode(&ctg, fake_encode, &k1, &k1, 1, 1, 100, 64, &prm);
  CHECK(prm.tma == 1 && fake_tma.dtype == 6 && fake_tma.dims[2] == 100 &&
        fake_tma.strides[2] == 100ull * 128 && fake_tma.strides[3] == 100ull * 128);
  /* A refused map, no encoder, no views: every sub-tile gathered. */
  memset(&fake_tma, 0, sizeof fake_tma);
  fake_tma.fail_at = 3;
  splat__tma_views_encode(&v, fake_encode, &k, &vt, 2, 3, 4096, 128, &prm);
  CHECK(prm.tma == 0 && fake_tma.calls == 3);
  splat__tma_views_encode(&v, NULL, &k, &vt, 2, 3, 4096, 128, &prm);
  CHECK(prm.tma == 0);
  splat__tma_views none = {0, {0}, {0}};
  splat__tma_views_encode(&none, fake_encode, &k, &vt, 2, 3, 4096, 128, &prm);
  CHECK(prm.tma == 0);

  /* Q [2][6][1000][96] f16 (6 heads on K's 3): the view of stride 1 over its own heads and
   * rows, box {64, 1, 64}; no second stride: one map; no encoder or a refused map:
   * gathered. */
  static uint16_t qbuf[8];
  splat_tensor q = splat_tensor_contiguous(qbuf, SPLAT_F16, 2, 6, 1000, 96);
  const int32_t one_pass[2] = {1, 0}, two_pass[2] = {1, 64}, strided_only[2] = {0, 64};
  memset(&fake_tma, 0, sizeof fake_tma);
  splat__tma_q_encode(fake_encode, &q, 2, 6, 1000, 96, one_pass, &prm);
  CHECK(prm.qtma == 1 && fake_tma.calls == 1 && fake_tma.addr == qbuf && fake_tma.dtype == 6);
  CHECK(fake_tma.dims[0] == 96 && fake_tma.dims[1] == 1 && fake_tma.dims[2] == 1000 &&
        fake_tma.dims[3] == 6 && fake_tma.dims[4] == 2);
  CHECK(fake_tma.strides[0] == 192 && fake_tma.strides[1] == 192 &&
        fake_tma.strides[2] == 1000ull * 192 && fake_tma.strides[3] == 6000ull * 192);
  CHECK(fake_tma.box[0] == 64 && fake_tma.box[1] == 1 && fake_tma.box[2] == 64 &&
        fake_tma.box[3] == 1 && fake_tma.box[4] == 1);
  CHECK(((const unsigned char *)prm.qmap[0].opaque)[0] == 0xAB);
  /* Pass 2's rows 64 apart: {96, 64, 1000 / 64, 6, 2}, 64 rows a step; a refused first map
   * leaves the second; a stride below 1 has none. */
  memset(&fake_tma, 0, sizeof fake_tma);
  memset(prm.qmap, 0, sizeof prm.qmap);
  splat__tma_q_encode(fake_encode, &q, 2, 6, 1000, 96, two_pass, &prm);
  CHECK(prm.qtma == 3 && fake_tma.calls == 2);
  CHECK(fake_tma.dims[0] == 96 && fake_tma.dims[1] == 64 && fake_tma.dims[2] == 15 &&
        fake_tma.dims[3] == 6 && fake_tma.dims[4] == 2);
  CHECK(fake_tma.strides[0] == 192 && fake_tma.strides[1] == 64ull * 192 &&
        fake_tma.strides[2] == 1000ull * 192 && fake_tma.strides[3] == 6000ull * 192);
  CHECK(fake_tma.box[0] == 64 && fake_tma.box[1] == 1 && fake_tma.box[2] == 64);
  CHECK(((const unsigned char *)prm.qmap[0].opaque)[0] == 0xAB &&
        ((const unsigned char *)prm.qmap[1].opaque)[0] == 0xAB);
  memset(&fake_tma, 0, sizeof fake_tma);
  fake_tma.fail_at = 1;
  splat__tma_q_encode(fake_encode, &q, 2, 6, 1000, 96, two_pass, &prm);
  CHECK(prm.qtma == 2 && fake_tma.calls == 2);
  memset(&fake_tma, 0, sizeof fake_tma);
  splat__tma_q_encode(fake_encode, &q, 2, 6, 1000, 96, strided_only, &prm);
  CHECK(prm.qtma == 2 && fake_tma.calls == 1);
  memset(&fake_tma, 0, sizeof fake_tma);
  fake_tma.fail_at = 1;
  splat__tma_q_encode(fake_encode, &q, 2, 6, 1000, 96, one_pass, &prm);
  CHECK(prm.qtma == 0);
  prm.qtma = 1;
  splat__tma_q_encode(NULL, &q, 2, 6, 1000, 96, two_pass, &prm);
  CHECK(prm.qtma == 0);
}

/* A tile plan's tiles and runs in the device layout (plan order; no TMA views, no
 * tables): calloc'd, the caller frees them. */
static splat_dev_tile *dev_tiles_of(const splat__tile_plan *t) {
  splat_dev_tile *tiles = calloc((size_t)(t->ntiles ? t->ntiles : 1), sizeof *tiles);
  for (int64_t i = 0; tiles && i < t->ntiles; i++) {
    const splat__query_tile *q = &t->tiles[i];
    splat_dev_tile d = {(int32_t)q->row_begin, q->nrows, (int32_t)q->run_begin, q->nruns};
    tiles[i] = d;
  }
  return tiles;
}
static splat_dev_run *dev_runs_of(const splat__tile_plan *t) {
  splat_dev_run *runs = calloc((size_t)(t->nruns ? t->nruns : 1), sizeof *runs);
  for (int64_t i = 0; runs && i < t->nruns; i++) {
    const splat__key_run *r = &t->runs[i];
    splat_dev_run d = {
        r->group.phase, r->group.stride, r->group.width, r->base, r->ntiles, r->predicate, -1, -1};
    runs[i] = d;
  }
  return runs;
}

/* Awkward sizes (seq_q, seq_k) for the reference patterns' plans. */
static const int64_t ref_sizes[][2] = {{97, 97}, {1000, 1000}, {333, 1000}, {4097, 4097}};
#define REF_SIZES (sizeof ref_sizes / sizeof ref_sizes[0])

/* Reference pattern pi at ref_sizes[si], parsed, analysed and planned in 128 x 128 tiles
 * into *pat, *a, *t; 0 (nothing to free) where the spec does not parse at that size. */
static int ref_plan(int pi, size_t si, splat_pattern **pat, splat__acsr *a, splat__tile_plan *t) {
  *pat = NULL;
  memset(t, 0, sizeof *t);
  if (splat_pattern_parse(splat_ref_patterns[pi].spec, ref_sizes[si][0], ref_sizes[si][1], pat) !=
      SPLAT_OK)
    return 0;
  CHECK(splat__acsr_build(*pat, 0, a) == SPLAT_OK);
  CHECK(splat__tile_plan_build(a, 128, 128, t) == SPLAT_OK);
  return 1;
}

/* Frees a pattern's plan, ACSR and, when np is 2, its two passes. */
static void free_plans(splat_pattern *p, splat__acsr *a, splat__tile_plan *t, int np,
                       splat__tile_plan pass[2], splat__acsr part[2]) {
  if (np == 2) splat__tile_plan_passes_free(pass, part);
  splat__tile_plan_free(t);
  splat__acsr_free(a);
  splat_pattern_destroy(p);
}

/* The square pattern of spec at seq, its ACSR and its tile plan of tile_q x 128 into *pat,
 * *a, *t (free_plans frees them). */
static void square_plan(const char *spec, int64_t seq, int tile_q, splat_pattern **pat,
                        splat__acsr *a, splat__tile_plan *t) {
  CHECKF(splat_pattern_parse(spec, seq, seq, pat) == SPLAT_OK, "%s", spec);
  CHECK(splat__acsr_build(*pat, 0, a) == SPLAT_OK);
  CHECK(splat__tile_plan_build(a, tile_q, 128, t) == SPLAT_OK);
}

/* splat__tile_tail_split on 192-row plans: m tiles become 64-row parts covering the same
 * rows with copies of their runs, the lightest (then the latest) first; the rest and the
 * totals unchanged. */
static void test_tile_tail(void) {
  static const struct {
    const char *spec;
    int64_t seq, m;
  } cases[] = {{"window(95)", 4096, 1},
               {"window(95)", 4096, 3},
               {"dilated(64,2)", 4000, 2},
               {"longformer(64,16)", 2000, 1},
               {"strided(64) | window(64)", 4096, 4},
               {"window(8)", 100, 50}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    splat_pattern *pat;
    splat__acsr a;
    splat__tile_plan t, u;
    square_plan(cases[c].spec, cases[c].seq, 192, &pat, &a, &t);
    CHECK(splat__tile_plan_build(&a, 192, 128, &u) == SPLAT_OK);
    int64_t whole = 0; /* tiles of more than 64 rows */
    for (int64_t i = 0; i < t.ntiles; i++) whole += t.tiles[i].nrows > 64;
    CHECK(splat__tile_tail_split(&u, cases[c].m, 64) == SPLAT_OK);
    const int64_t m = cases[c].m < whole ? cases[c].m : whole;
    int64_t extra = 0, bad = 0, runs = 0, i = 0;
    /* Each original tile's rows, in order, from u's tiles: parts follow one another. */
    int64_t j = 0, split_max = 0, whole_min = INT64_MAX;
    for (; i < t.ntiles && j < u.ntiles; i++) {
      const splat__query_tile *q = &t.tiles[i];
      int32_t rows = 0;
      int parts = 0;
      while (rows < q->nrows && j < u.ntiles) {
        const splat__query_tile *p = &u.tiles[j++];
        parts++;
        if (p->row_begin != q->row_begin + rows || p->nruns != q->nruns) bad++;
        for (int32_t r = 0; r < p->nruns; r++)
          if (memcmp(&u.runs[p->run_begin + r], &t.runs[q->run_begin + r], sizeof *u.runs)) bad++;
        runs += p->nruns;
        rows += p->nrows;
      }
      if (rows != q->nrows || (parts > 1 && (q->nrows <= 64 || parts != (q->nrows + 63) / 64)))
        bad++;
      extra += parts > 1;
      int64_t cost = 0;
      for (int32_t r = 0; r < q->nruns; r++) cost += t.runs[q->run_begin + r].ntiles;
      cost *= q->nrows;
      if (parts > 1 && cost > split_max) split_max = cost;
      if (parts == 1 && q->nrows > 64 && cost < whole_min) whole_min = cost;
    }
    CHECKF(i == t.ntiles && j == u.ntiles && !bad && extra == m && runs == u.nruns &&
               u.full_tiles == t.full_tiles && u.predicated_tiles == t.predicated_tiles &&
               u.computed == t.computed,
           "%s at %lld, m %lld: %lld tiles split (want %lld), %lld mismatches", cases[c].spec,
           (long long)cases[c].seq, (long long)cases[c].m, (long long)extra, (long long)m,
           (long long)bad);
    /* The parts came from the lightest tiles: no unsplit tile of more than 64 rows is
     * lighter than a split one. */
    CHECKF(split_max <= whole_min, "%s: a split tile of cost %lld, a whole one of %lld",
           cases[c].spec, (long long)split_max, (long long)whole_min);
    splat__tile_plan_free(&u);
    free_plans(pat, &a, &t, 0, NULL, NULL);
  }
  /* The cap keeps a tile of more than 128 rows whole, whatever the lightest are: a plan of
   * tiles of 192 rows x 1 key tile, 100 x 10 and 40 x 10 may split none (splitting its
   * lightest, the 192-row one, would leave 100 rows at most); with a second 192-row tile, one. */
  splat__key_run kr[3] = {{{0, 1, 1}, 0, 1, 0}, {{0, 1, 1}, 0, 10, 1}, {{0, 1, 1}, 0, 10, 1}};
  splat__query_tile qt[4] = {{0, 192, 0, 1}, {192, 100, 1, 1}, {292, 40, 2, 1}, {332, 192, 0, 1}};
  splat__tile_plan h = {192, 128, NULL, 0, 524, qt, 3, kr, 3, 1, 20, 0};
  CHECK(splat__tile_tail_cap(&h, 1, 128) == 0 && splat__tile_tail_cap(&h, 5, 64) == 1);
  h.ntiles = 4;
  CHECK(splat__tile_tail_cap(&h, 1, 128) == 1 && splat__tile_tail_cap(&h, 0, 128) == 0);
  h.ntiles = 0;
  CHECK(splat__tile_tail_cap(&h, 3, 128) == 0);
  /* The choice: window(95) at 4096 on 192-row tiles is 21 whole tiles and one of 64 rows, 32
   * items each (batch 2, 16 heads): 5.3 rounds of 132 CTAs, the last with 12 whole items. */
  splat_pattern *pat;
  splat__acsr a;
  splat__tile_plan t;
  square_plan("window(95)", 4096, 192, &pat, &a, &t);
  CHECK(t.ntiles == 22 && t.tiles[21].nrows == 64);
  const int64_t m = splat__tile_tail_choose(&t, 32, 132, 64, 0.6, 8);
  CHECKF(m >= 1 && m <= 2, "window(95) at 4096, 132 CTAs: %lld tiles split", (long long)m);
  /* Items in whole rounds (176 CTAs: 4 rounds), light parts that cost as much as a whole tile,
   * or more rounds than the rule looks at: none. */
  CHECK(splat__tile_tail_choose(&t, 32, 176, 64, 0.6, 8) == 0);
  CHECK(splat__tile_tail_choose(&t, 32, 132, 64, 1.0, 8) == 0);
  CHECK(splat__tile_tail_choose(&t, 32 * SPLAT__TILE_TAIL_MAX_ROUNDS, 132, 64, 0.6, 8) == 0);
  CHECK(splat__tile_tail_choose(&t, 32, 132, 64, 0.6, 0) == 0);
  free_plans(pat, &a, &t, 0, NULL, NULL);
  /* SPLAT_ATTN_TAIL: unset or empty leaves it to the rule, a count forces it, junk fails. */
  int64_t n = 0;
  unsetenv("SPLAT_ATTN_TAIL");
  CHECK(splat__tile_tail_env(&n) == SPLAT_OK && n == -1);
  setenv("SPLAT_ATTN_TAIL", "", 1);
  CHECK(splat__tile_tail_env(&n) == SPLAT_OK && n == -1);
  setenv("SPLAT_ATTN_TAIL", "0", 1);
  CHECK(splat__tile_tail_env(&n) == SPLAT_OK && n == 0);
  setenv("SPLAT_ATTN_TAIL", "3", 1);
  CHECK(splat__tile_tail_env(&n) == SPLAT_OK && n == 3);
  static const char *const bad[] = {"-1", "two", "2x", "99999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("SPLAT_ATTN_TAIL", bad[i], 1);
    CHECKF(splat__tile_tail_env(&n) == SPLAT_ERR_INVALID_ARGUMENT &&
               strstr(splat_last_error(NULL), "SPLAT_ATTN_TAIL") != NULL,
           "SPLAT_ATTN_TAIL=%s", bad[i]);
  }
  unsetenv("SPLAT_ATTN_TAIL");
  /* The whole step: as the rule picks (one tile of window(95) split: 24 tiles), none for a
   * grid of one CTA an item (SPLAT_ATTN_PERSISTENT=0), SPLAT_ATTN_TAIL's count (capped so a
   * tile of 192 rows stays), and the variables' errors, SPLAT_ATTN_TAIL's first. */
  static const struct {
    const char *tail, *persistent, *error;
    int64_t split, ntiles;
  } apply[] = {{NULL, NULL, NULL, 1, 24},
               {NULL, "0", NULL, 0, 22},
               {"0", NULL, NULL, 0, 22},
               {"2", "0", NULL, 2, 26},
               {"1000", NULL, NULL, 20, 62},
               {"two", NULL, "SPLAT_ATTN_TAIL", 0, 22},
               {"two", "maybe", "SPLAT_ATTN_TAIL", 0, 22},
               {"1", "maybe", "SPLAT_ATTN_PERSISTENT", 0, 22}};
  for (size_t i = 0; i < sizeof apply / sizeof *apply; i++) {
    square_plan("window(95)", 4096, 192, &pat, &a, &t);
    if (apply[i].tail) setenv("SPLAT_ATTN_TAIL", apply[i].tail, 1);
    if (apply[i].persistent) setenv("SPLAT_ATTN_PERSISTENT", apply[i].persistent, 1);
    int64_t split = -1;
    const splat_status st = splat__tile_tail_apply(&t, 32, 132, &split);
    CHECKF((apply[i].error
                ? st == SPLAT_ERR_INVALID_ARGUMENT && strstr(splat_last_error(NULL), apply[i].error)
                : st == SPLAT_OK) &&
               split == apply[i].split && t.ntiles == apply[i].ntiles,
           "tail %s, persistent %s: status %d, %lld split, %lld tiles",
           apply[i].tail ? apply[i].tail : "unset",
           apply[i].persistent ? apply[i].persistent : "unset", (int)st, (long long)split,
           (long long)t.ntiles);
    unsetenv("SPLAT_ATTN_TAIL");
    unsetenv("SPLAT_ATTN_PERSISTENT");
    free_plans(pat, &a, &t, 0, NULL, NULL);
  }
}

/* Checks sub-tile ls of a run of group (p, d, w) from gathered index base against the
 * gather's definition of its keys: when splat_tma_run_serves says the view's box serves
 * it, the box at third coordinate j0 + jstep ls holds in every row the gathered key
 * p + (g / w) d + g % w of g = base + 64 ls + row, and reads it exactly when that key is
 * below seq_k (else zero-fills it, as the gather does). Returns 1 when the box serves it. */
static int check_tma_subtile(int32_t p, int32_t d, int32_t w, int32_t base, int32_t ls,
                             int64_t seq_k, int64_t *bad) {
  const splat_tma_run v = splat_tma_run_of(p, d, w, base, 64, seq_k);
  const int ok = splat_tma_run_serves(v, ls);
  const int32_t g0 = base + 64 * ls;
  int dropped = 0; /* keys below seq_k the box would zero-fill */
  for (int kk = 0; kk < 64; kk++) {
    const int64_t g = (int64_t)g0 + kk, want = p + (g / w) * d + g % w;
    int read = 0;
    const int64_t key = splat_tma_box_key(p, d, w, g0, kk, seq_k, &read);
    if (g0 % w == 0 && key != want) ++*bad;
    if (!read && want < seq_k) dropped = 1;
    if (ok && read != (want < seq_k)) ++*bad;
  }
  if (ok && v.j0 + v.jstep * ls != g0 / w) ++*bad; /* the coordinate the producer passes */
  /* Exact: the box is refused only where it would drop a key (or g0 starts no piece). */
  if (g0 % w == 0 && ok == dropped) ++*bad;
  if (g0 % w != 0 && ok) ++*bad;
  return ok;
}

/* splat__tma_serves_plan (no gather needed: three consumer warpgroups) on the plan of a at
 * 192-row tiles against each run's view and every 64-key box checked as above; counts the
 * plans served in *served, returns 1 where the two disagree. */
static int check_serves_plan(const splat__acsr *a, int64_t seq_k, const char *spec,
                             int64_t *served) {
  splat__tile_plan t;
  CHECK(splat__tile_plan_build(a, 192, 128, &t) == SPLAT_OK);
  splat_dev_run *runs = dev_runs_of(&t);
  splat__tma_views v;
  int all = runs != NULL && t.nruns > 0; /* no runs: no views, so no maps */
  if (runs) splat__tma_views_assign(runs, t.nruns, seq_k, &v);
  int64_t unused = 0;
  for (int64_t i = 0; runs && i < t.nruns && all; i++) {
    const splat_dev_run *r = &runs[i];
    all = r->view >= 0;
    for (int32_t b = 0; all && b < r->ntiles * 2; b++)
      all = check_tma_subtile(r->phase, r->stride, r->width, r->base, b, seq_k, &unused);
  }
  const int got = splat__tma_serves_plan(&t, seq_k);
  if (got != all)
    printf("  %s at seq_k %lld: splat__tma_serves_plan %d, runs %d\n", spec, (long long)seq_k, got,
           all);
  *served += got;
  free(runs);
  splat__tile_plan_free(&t);
  return got != all;
}

/* The TMA views' boxes against the gather on random groups, then on every view sub-tile of
 * the tile plans of the reference specs at awkward sizes (seq_k not a multiple of the
 * stride: the last keys of low phases fall back to the gather), and each such plan at
 * 192-row tiles judged whole by splat__tma_serves_plan (check_serves_plan). */
static void test_tma_view_keys(void) {
  static const int widths[] = {1, 2, 4, 8, 16, 32, 64};
  uint64_t rng = 0x9E3779B97F4A7C15ull;
  int64_t bad = 0, served = 0, tried = 0;
  for (int trial = 0; trial < 20000; trial++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int32_t w = widths[(rng >> 33) % 7];
    const int32_t d = w + (int32_t)((rng >> 40) % 300);
    const int32_t p = (int32_t)((rng >> 20) % (uint64_t)(d - w + 1));
    const int64_t seq_k = d + (int64_t)((rng >> 12) % 5000);
    /* a run from a piece start, or (1 in 8) from inside a piece */
    const int32_t base = w * (int32_t)((rng >> 50) % (uint64_t)(seq_k / d + 3)) +
                         ((rng >> 7) % 8 == 0 ? (int32_t)((rng >> 3) % (uint64_t)w) : 0);
    const int32_t ls = (int32_t)((rng >> 44) % 3);
    served += check_tma_subtile(p, d, w, base, ls, seq_k, &bad);
    tried++;
  }
  CHECKF(bad == 0, "%lld mismatches between the view's box and the gather", (long long)bad);
  CHECKF(served > tried / 4 && served < tried, "%lld of %lld random sub-tiles served",
         (long long)served, (long long)tried);

  int64_t plan_subtiles = 0, plan_served = 0, plans = 0, whole = 0, judged_apart = 0;
  bad = 0;
  for (int pi = 0; pi < splat_ref_pattern_count; pi++) {
    for (size_t si = 0; si < REF_SIZES; si++) {
      splat_pattern *pat;
      splat__acsr a;
      splat__tile_plan t;
      if (!ref_plan(pi, si, &pat, &a, &t)) continue;
      splat_dev_run *runs = dev_runs_of(&t);
      splat__tma_views v;
      if (runs) splat__tma_views_assign(runs, t.nruns, ref_sizes[si][1], &v);
      for (int64_t i = 0; runs && i < t.nruns; i++) {
        const splat_dev_run *r = &runs[i];
        if (r->view < 0) continue;
        for (int32_t sub = 0; sub < r->ntiles * 2; sub++) {
          plan_subtiles++;
          plan_served += check_tma_subtile(r->phase, r->stride, r->width, r->base, sub,
                                           ref_sizes[si][1], &bad);
        }
      }
      free(runs);
      judged_apart += check_serves_plan(&a, ref_sizes[si][1], splat_ref_patterns[pi].spec, &whole);
      plans++;
      splat__tile_plan_free(&t);
      splat__acsr_free(&a);
      splat_pattern_destroy(pat);
    }
  }
  CHECKF(bad == 0, "%lld mismatches on the reference plans", (long long)bad);
  CHECKF(judged_apart == 0 && whole > 0 && whole < plans,
         "splat__tma_serves_plan: %lld of %lld reference plans judged apart from their runs, "
         "%lld served whole",
         (long long)judged_apart, (long long)plans, (long long)whole);
  printf(
      "plans TMA serves whole (192-row tiles, no gather needed): %lld of %lld reference "
      "plans\n",
      (long long)whole, (long long)plans);
  CHECKF(plan_subtiles > 1000 && plan_served > plan_subtiles / 2,
         "%lld of %lld view sub-tiles of the reference plans served by the box",
         (long long)plan_served, (long long)plan_subtiles);
  printf(
      "TMA view boxes: %lld of %lld view sub-tiles of the reference plans served, the rest "
      "gathered\n",
      (long long)plan_served, (long long)plan_subtiles);
}

/* splat__tma_serves_plan (and splat__tma_serves_after) on chosen plans: a plain window at 4096 is
 * served, a window at seq_k 4097 too (its last box is zero-filled past seq_k), fixed(100,30) is not
 * (its summary columns, pieces of 30 keys, take no view: a box holds whole pieces of a width
 * dividing 64). The reference plans: test_tma_view_keys. */
static void test_tma_serves_plan(void) {
  const char *specs[3] = {"window(256)", "window(256)", "fixed(100,30)"};
  const int64_t seqs[3] = {4096, 4097, 4096};
  const int want[3] = {1, 1, 0};
  for (int i = 0; i < 3; i++) {
    splat_pattern *pat = NULL;
    splat__acsr a;
    splat__tile_plan t;
    square_plan(specs[i], seqs[i], 192, &pat, &a, &t);
    CHECKF(splat__tma_serves_plan(&t, seqs[i]) == want[i], "%s at %lld", specs[i],
           (long long)seqs[i]);
    free_plans(pat, &a, &t, 0, NULL, NULL);
  }
  /* After a plan whose runs take all four views ((1,1), (2,1), (3,1), (5,1): pass 1 before
   * pass 2), dilated(32,2) (stride 2) is served by the view it shares, dilated(32,4) is not:
   * its stride-4 view has no slot left; alone, both are. */
  splat_pattern *pb = NULL;
  splat__acsr ab;
  splat__tile_plan tb;
  square_plan("dilated(4,2) | dilated(4,3) | dilated(4,5)", 4096, 192, &pb, &ab, &tb);
  const char *after[2] = {"dilated(32,2)", "dilated(32,4)"};
  for (int i = 0; i < 2; i++) {
    splat_pattern *pat = NULL;
    splat__acsr a;
    splat__tile_plan t;
    square_plan(after[i], 4096, 192, &pat, &a, &t);
    CHECKF(splat__tma_serves_plan(&t, 4096) && splat__tma_serves_after(NULL, &t, 4096) &&
               splat__tma_serves_after(&tb, &t, 4096) == (i == 0),
           "%s after four views", after[i]);
    free_plans(pat, &a, &t, 0, NULL, NULL);
  }
  free_plans(pb, &ab, &tb, 0, NULL, NULL);
}

/* Whether a plan takes 192-row query tiles (tile_rows.h): which plans try them, then the
 * choice on the two tile plans' reports of real patterns (H100: 132 SMs). */
static void test_tile_rows(void) {
  splat_plan_desc d = {2, 16, 16, 64, SPLAT_BF16, 128, 128, 8, SPLAT_OPS_ATTENTION};
  CHECK(splat__tile_rows_try(&d, "sm_90a"));
  CHECK(!splat__tile_rows_try(&d, "sm_80") && !splat__tile_rows_try(&d, NULL));
  d.ops = SPLAT_OPS_ALL; /* the unfused kernels would share the tiles */
  CHECK(!splat__tile_rows_try(&d, "sm_90a"));
  d.ops = SPLAT_OPS_ATTENTION;
  const int64_t dims[] = {24, 32, 40, 48, 56, 64, 72, 120, 128, 136};
  for (int i = 0; i < 10; i++) {
    d.head_dim = dims[i];
    CHECKF(
        splat__tile_rows_try(&d, "sm_90a") == ((dims[i] >= 32 && dims[i] <= 64) || dims[i] == 128),
        "head_dim %lld", (long long)dims[i]);
  }
  d.head_dim = 64;
  d.dtype = SPLAT_F16;
  CHECK(splat__tile_rows_try(&d, "sm_90a"));
  d.dtype = SPLAT_F32;
  CHECK(!splat__tile_rows_try(&d, "sm_90a"));
  d.dtype = SPLAT_BF16;
  d.tile_k = 64;
  CHECK(!splat__tile_rows_try(&d, "sm_90a"));
  d.tile_k = 256; /* the warpgroups' work counts 128-key tiles */
  CHECK(!splat__tile_rows_try(&d, "sm_90a"));
  d.tile_k = 128;
  /* A setting that asks for another kernel keeps 128 rows; the defaults' own values do not. */
  const char *envs[][3] = {{"SPLAT_ATTN_WS", "0", "1"},        {"SPLAT_ATTN_WARPGROUPS", "2", ""},
                           {"SPLAT_ATTN_WARPGROUPS", "1", ""}, {"SPLAT_ATTN_KT", "64", "128"},
                           {"SPLAT_ATTN_TMA", "0", "1"},       {"SPLAT_ATTN_SPLIT", "32", "0"}};
  for (int i = 0; i < 6; i++) {
    setenv(envs[i][0], envs[i][1], 1);
    CHECKF(!splat__tile_rows_try(&d, "sm_90a"), "%s=%s", envs[i][0], envs[i][1]);
    setenv(envs[i][0], envs[i][2], 1);
    CHECKF(splat__tile_rows_try(&d, "sm_90a"), "%s=%s", envs[i][0], envs[i][2]);
    unsetenv(envs[i][0]);
  }
  setenv("SPLAT_ATTN_KT", "96", 1); /* a bad value: no (plan creation then fails on it) */
  CHECK(!splat__tile_rows_try(&d, "sm_90a"));
  unsetenv("SPLAT_ATTN_KT");
  CHECK(splat__tile_rows_try(&d, "sm_90a"));
  /* The choice, on the two tile plans of real patterns: windows, causal windows, dilated
   * windows and blocks 192 divides take 192 rows where 32 heads' items fill 4 rounds of 132
   * SMs; BigBird (its warpgroups compute 1.2x the sub-tiles), blocked(512) at head_dim 64
   * below 16 rounds (192-row tiles straddle its blocks, which 128-row tiles cover whole) and
   * strided(64) at 4096 (phase classes of 64 rows) keep 128. */
  static const struct {
    const char *spec;
    int64_t seq, bh;
    int want;
  } cases[] = {{"window(256)", 16384, 32, 1},
               {"window(256)", 4096, 32, 1},
               {"window(256)", 4096, 16, 0},  /* 352 items: 2.7 rounds */
               {"window(128)", 16384, 32, 1}, /* computes 1.34x the elements, not the sub-tiles */
               {"causal & window(512,0)", 16384, 32, 1},
               {"dilated(256,2)", 16384, 32, 1},
               {"window(95)", 65536, 16, 1},
               {"blocked(384)", 4096, 32, 1},
               {"blocked(512)", 4096, 32, 0},
               {"blocked(512)", 4000, 32, 0},   /* a few predicated tiles at 128 rows */
               {"blocked(512)", 16384, 32, 1},  /* 20.8 rounds: straddled blocks pay (v74) */
               {"fixed(256,32)", 16384, 32, 1}, /* 6% -> 16% predicated */
               {"causal", 4096, 32, 1},         /* 6% -> 11% */
               {"bigbird(64,1,2,3,0)", 16384, 32, 0},
               {"strided(64)", 4096, 32, 0}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    splat_pattern *pat = NULL;
    splat__acsr a;
    splat__tile_plan t128, t192;
    square_plan(cases[i].spec, cases[i].seq, 128, &pat, &a, &t128);
    CHECK(splat__tile_plan_build(&a, 192, 128, &t192) == SPLAT_OK);
    splat__tile_rows_case c = {&t128,
                               &t192,
                               splat__tile_rows_work(&a, &t128, 0),
                               splat__tile_rows_work(&a, &t192, 0),
                               0,
                               1,
                               0,
                               64,
                               cases[i].bh,
                               132};
    CHECKF(splat__tile_rows_prefer_192(&c) == cases[i].want, "%s at %lld, batch x heads %lld",
           cases[i].spec, (long long)cases[i].seq, (long long)cases[i].bh);
    if (cases[i].want && !strcmp(cases[i].spec, "window(256)")) {
      /* Head_dim 128: at least 16 rounds (16384: 86 tiles x 32 = 20.8), not 4 (4096: 5.3). */
      c.head_dim = 128;
      CHECKF(splat__tile_rows_prefer_192(&c) == (cases[i].seq == 16384), "head_dim 128 at %lld",
             (long long)cases[i].seq);
      c.head_dim = 64;
    }
    if (cases[i].want) {
      c.served = 0; /* the producer would need the gather: two warpgroups over 192 rows */
      CHECK(!splat__tile_rows_prefer_192(&c));
      c.served = 1, c.two_pass = 1; /* passes take two warpgroups */
      CHECK(!splat__tile_rows_prefer_192(&c));
      c.two_pass = 0, c.work192 = c.work128 * 21 / 20 + 1; /* over 5% more sub-tiles */
      CHECK(!splat__tile_rows_prefer_192(&c));
    }
    if (cases[i].want && !strncmp(cases[i].spec, "blocked(512)", 12)) {
      c.head_dim = 128; /* straddled blocks at head_dim 128: 0.97-0.98x at any rounds */
      CHECK(!splat__tile_rows_prefer_192(&c));
      c.head_dim = 64;
    }
    if (!cases[i].want && !strncmp(cases[i].spec, "blocked(512)", 12)) {
      /* Straddled blocks pay at head_dim 48 at any rounds, above it from 16. */
      c.head_dim = 48;
      CHECK(splat__tile_rows_prefer_192(&c));
      c.head_dim = 56;
      CHECK(!splat__tile_rows_prefer_192(&c));
    }
    splat__tile_plan_free(&t192);
    free_plans(pat, &a, &t128, 0, NULL, NULL);
  }
  /* The warpgroups' sub-tiles, by hand: window(64) at 256, 128-row tiles. Tile 0's run
   * has key tiles 0-127 and 128-255: rows 0-63 (keys 0-127) need the first, rows 64-127
   * (keys 0-191) both. Tile 1's starts at key 64 (64-191, 192-319): rows 128-191 (keys
   * 64-255) and rows 192-255 (keys 128-255) need both. */
  splat_pattern *pat = NULL;
  splat__acsr a;
  splat__tile_plan t;
  square_plan("window(64)", 256, 128, &pat, &a, &t);
  CHECKF(t.ntiles == 2 && t.runs[1].base == 64 &&
             splat__tile_rows_work(&a, &t, 0) == 1 + 2 + 2 + 2 &&
             splat__tile_rows_work(&a, &t, 2) == 1 + 2 + 2 + 2,
         "%lld", (long long)splat__tile_rows_work(&a, &t, 0));
  /* Counted on three warpgroups, each tile's third (idle) one as its heaviest block: 2. */
  CHECKF(splat__tile_rows_work(&a, &t, 3) == 1 + 2 + 2 + 2 + 2 + 2, "%lld",
         (long long)splat__tile_rows_work(&a, &t, 3));
  free_plans(pat, &a, &t, 0, NULL, NULL);
  /* At 192 rows: tile 0 as above (1 + 2), tile 1's 64 rows (keys 64-191) one key tile, which
   * its idle second warpgroup counts again on two warpgroups, twice on three. */
  square_plan("window(64)", 192, 128, &pat, &a, &t);
  CHECKF(t.ntiles == 2 && splat__tile_rows_work(&a, &t, 0) == 1 + 2 + 1 &&
             splat__tile_rows_work(&a, &t, 2) == 1 + 2 + 1 + 1 &&
             splat__tile_rows_work(&a, &t, 3) == 1 + 2 + 2 + 1 + 1 + 1,
         "%lld %lld %lld", (long long)splat__tile_rows_work(&a, &t, 0),
         (long long)splat__tile_rows_work(&a, &t, 2), (long long)splat__tile_rows_work(&a, &t, 3));
  free_plans(pat, &a, &t, 0, NULL, NULL);

  /* The whole choice (splat__tile_rows_choose) on window(256) at 16384: 192 rows for 32
   * heads on 132 SMs, or with the SMs unknown; not for 1 head on 132 SMs, a plan of every
   * op, or sm_80; strided(64) | window(64) (two passes) keeps 128. */
  static const struct {
    const char *spec;
    int64_t heads;
    unsigned ops;
    const char *arch;
    int sms, want;
  } whole[] = {{"window(256)", 16, SPLAT_OPS_ATTENTION, "sm_90a", 132, 1},
               {"window(256)", 1, SPLAT_OPS_ATTENTION, "sm_90a", 0, 1},
               {"window(256)", 1, SPLAT_OPS_ATTENTION, "sm_90a", 132, 0},
               {"window(256)", 16, SPLAT_OPS_ALL, "sm_90a", 132, 0},
               {"window(256)", 16, SPLAT_OPS_ATTENTION, "sm_80", 132, 0},
               {"strided(64) | window(64)", 16, SPLAT_OPS_ATTENTION, "sm_90a", 0, 0}};
  for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++) {
    splat_pattern *w = NULL;
    splat__acsr wa;
    splat__tile_plan t128, t192;
    square_plan(whole[i].spec, 16384, 128, &w, &wa, &t128);
    CHECK(splat__tile_plan_may_pass(&wa, &t128) == !strncmp(whole[i].spec, "strided", 7));
    const splat_plan_desc d = {2, whole[i].heads, whole[i].heads, 64, SPLAT_BF16, 0, 128,
                               8, whole[i].ops};
    int take = -1;
    CHECK(splat__tile_rows_choose(&wa, &t128, 16384, &d, whole[i].arch, whole[i].sms, 0, &t192,
                                  &take) == SPLAT_OK);
    CHECKF(take == whole[i].want, "%s, heads %lld, ops %u, %s, %d SMs", whole[i].spec,
           (long long)whole[i].heads, whole[i].ops, whole[i].arch, whole[i].sms);
    if (take) {
      CHECK(t192.tile_q == 192 && t192.ntiles == 86);
      splat__tile_plan_free(&t192);
    }
    free_plans(w, &wa, &t128, 0, NULL, NULL);
  }

  /* Blocks that 192-row tiles straddle (batch 2 x 16 heads, 132 SMs): at head_dim 64 below
   * 16 rounds, where those tiles lose, tiles cut at the blocks (splat__tile_plan_build_cut:
   * 192, 192, 128 rows a block of 512), their idle warpgroups counted (at most 1.15x the
   * sub-tiles), in as many rounds as the plain ones need; from 16 rounds, and at head_dim
   * 48, the plain tiles; at 128 the plain ones where they straddle less (blocked(1024)). */
  static const struct {
    const char *spec;
    int64_t seq;
    int head_dim, want;
    int64_t ntiles;
  } cut[] = {{"blocked(512)", 4096, 64, 1, 24},
             {"blocked(1024)", 4096, 64, 1, 24},
             {"blocked(512)", 16384, 64, 1, 86},
             {"blocked(512)", 16384, 128, 0, 0},
             /* Above head_dim 64 no cut; plain tiles 21 points more predicated from 16
              * rounds (blocked(1024)), not 33 or 39 (blocked(640), (512)) nor below 16. */
             {"blocked(1024)", 16384, 128, 1, 86},
             {"blocked(1024)", 65536, 128, 1, 342},
             {"blocked(640)", 16384, 128, 0, 0},
             {"blocked(1024)", 4096, 128, 0, 0},
             {"blocked(512)", 4096, 128, 0, 0},
             {"blocked(512)", 4096, 48, 1, 22},
             {"blocked(256)", 4096, 64, 0, 0}, /* 192 + 64 a block: 1.5x, idle counted */
             {"blocked(640)", 4096, 64, 0, 0}, /* 3 x 192 + 64: 1.2x */
             {"window(256)", 4096, 64, 1, 22},
             /* Plain tiles refused for more work, not for straddling: no cut either. */
             {"bigbird(512,1,1,2,7)", 16384, 64, 0, 0}};
  for (size_t i = 0; i < sizeof cut / sizeof cut[0]; i++) {
    splat_pattern *w = NULL;
    splat__acsr wa;
    splat__tile_plan t128, t192;
    square_plan(cut[i].spec, cut[i].seq, 128, &w, &wa, &t128);
    const splat_plan_desc d = {2, 16,  16, cut[i].head_dim,    SPLAT_BF16,
                               0, 128, 8,  SPLAT_OPS_ATTENTION};
    int take = -1;
    CHECK(splat__tile_rows_choose(&wa, &t128, cut[i].seq, &d, "sm_90a", 132, 0, &t192, &take) ==
          SPLAT_OK);
    CHECKF(take == cut[i].want && (!take || t192.ntiles == cut[i].ntiles),
           "%s at %lld, head_dim %d: take %d, %lld tiles", cut[i].spec, (long long)cut[i].seq,
           cut[i].head_dim, take, take ? (long long)t192.ntiles : 0LL);
    if (take) splat__tile_plan_free(&t192);
    free_plans(w, &wa, &t128, 0, NULL, NULL);
  }
  /* Plain tiles refused for too few rounds (2 x 11 heads at 4096, head_dim 64: 22 x 22
   * items, 3.7 rounds): no cut, though its 24 tiles a batch*head would make 4. */
  {
    splat_pattern *w = NULL;
    splat__acsr wa;
    splat__tile_plan t128, t192;
    square_plan("blocked(512)", 4096, 128, &w, &wa, &t128);
    const splat_plan_desc d = {2, 11, 11, 64, SPLAT_BF16, 0, 128, 8, SPLAT_OPS_ATTENTION};
    int take = -1;
    CHECK(splat__tile_rows_choose(&wa, &t128, 4096, &d, "sm_90a", 132, 0, &t192, &take) ==
              SPLAT_OK &&
          take == 0);
    if (take > 0) splat__tile_plan_free(&t192);
    free_plans(w, &wa, &t128, 0, NULL, NULL);
  }
}

/* The row stride of a plan's query tiles for Q by TMA: 1 without a permutation or in row
 * order; else the even step that covers the most rows (short tiles, uneven tiles and
 * single rows do not count); the view's rows end at the last whole stride. On hand-made
 * plans, then on the plans of window, dilated and strided | window's two passes. */
static void test_tma_q_view(void) {
  splat__tile_plan t;
  splat_dev_pattern pat;
  memset(&t, 0, sizeof t);
  memset(&pat, 0, sizeof pat);
  splat__query_tile tl[5] = {{0, 2, 0, 1}, {2, 4, 0, 1}, {6, 3, 0, 1}, {9, 1, 0, 1}, {10, 1, 0, 1}};
  t.tiles = tl;
  t.ntiles = 5;
  splat__tma_q_view(&t, 11, &pat); /* no permutation */
  CHECK(pat.qstride == 1 && pat.qcover == 11);
  /* A 2-row tile of step 5 first, 4 rows of step 3, 3 uneven rows, two single rows. */
  int32_t perm[11] = {0, 5, 1, 4, 7, 10, 2, 3, 8, 6, 9};
  t.perm = perm;
  splat__tma_q_view(&t, 11, &pat);
  CHECK(pat.qstride == 3 && pat.qcover == 9);
  tl[1].nrows = 1; /* now only the step-5 tile steps evenly */
  splat__tma_q_view(&t, 11, &pat);
  CHECK(pat.qstride == 5 && pat.qcover == 10);
  tl[0].nrows = 1;
  splat__tma_q_view(&t, 11, &pat);
  CHECK(pat.qstride == 1 && pat.qcover == 11);

  static const struct {
    const char *spec;
    int64_t seq;
    int32_t stride[3]; /* the single plan's, then the two passes' (0: one pass) */
  } cases[] = {{"window(64)", 4096, {1, 0, 0}},
               {"dilated(256,2)", 4096, {2, 0, 0}},
               {"dilated(256,2)", 1001, {2, 0, 0}},
               {"strided(64) | window(64)", 4096, {0, 1, 64}},
               {"strided(64) | window(64)", 1000, {0, 1, 64}}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    splat_pattern *sp = NULL;
    splat__acsr a;
    splat__tile_plan plan, pass[2];
    splat__acsr part[2];
    splat__attn_pass_shape shape[2];
    int np = 0;
    square_plan(cases[c].spec, cases[c].seq, 128, &sp, &a, &plan);
    CHECK(splat__attn_passes_plan(&a, &plan, 2, 16, 64, SPLAT_BF16, NULL, pass, part, shape, &np) ==
          SPLAT_OK);
    for (int k = 0; k < 3; k++) {
      const int32_t want = cases[c].stride[k];
      if (k == 0 && want) {
        splat__tma_q_view(&plan, cases[c].seq, &pat);
      } else if (k > 0 && want) {
        CHECKF(np == 2, "%s at %lld: two passes", cases[c].spec, (long long)cases[c].seq);
        if (np != 2) break;
        splat__tma_q_view(&pass[k - 1], cases[c].seq, &pat);
      } else {
        continue;
      }
      CHECKF(pat.qstride == want && pat.qcover == cases[c].seq / want * want,
             "%s at %lld, plan %d: Q stride %d covering %d rows", cases[c].spec,
             (long long)cases[c].seq, k, pat.qstride, pat.qcover);
    }
    free_plans(sp, &a, &plan, np, pass, part);
  }
}

/* ------------------------------------------------------------ interval tables */

/* Checks the interval tables of plan t (rows perm, segments in a) built for row blocks of
 * tq rows and sub-tiles of kt keys against the rows' columns (splat__acsr_row_columns, the
 * segments expanded directly): every row of every tile sees, over the tile's runs (a full
 * run: all its keys; a predicated one: the gathered indices inside the row's intervals of
 * its table), each of its columns once and nothing else; the spans of 32 rows hold their
 * rows' intervals, and their full keys lie in an interval of every row. Returns the
 * mismatches. */
static int64_t check_ws_tables(const splat__acsr *a, const splat__tile_plan *t, int tq, int kt,
                               int64_t *tables) {
  int segs = 1;
  for (int64_t i = 0; i < a->seq_q; i++)
    if (a->row_seg[i + 1] - a->row_seg[i] > segs) segs = (int)(a->row_seg[i + 1] - a->row_seg[i]);
  splat_dev_tile *tiles = dev_tiles_of(t);
  splat_dev_run *runs = dev_runs_of(t);
  int32_t *cols = malloc((size_t)a->width * sizeof *cols);
  int *seen = calloc((size_t)a->seq_k, sizeof *seen);
  int64_t bad = 0;
  CHECK(tiles && runs && cols && seen);
  for (int64_t i = 0; i < t->nruns; i++) runs[i].table = 7; /* set by the build */
  splat__ws_tables wt;
  CHECK(splat__ws_tables_build(a, t->perm, tiles, t->ntiles, runs, tq, segs, kt, &wt) == SPLAT_OK);
  *tables += wt.count;
  const int64_t rec = SPLAT_WS_TABLE_BYTES(tq, segs);
  for (int64_t ti = 0; ti < t->ntiles && wt.count >= 0; ti++) {
    const splat_dev_tile *tl = &tiles[ti];
    for (int32_t r = 0; r < tl->nrows; r++) {
      const int64_t row = t->perm[tl->row_begin + r];
      memset(seen, 0, (size_t)a->seq_k * sizeof *seen);
      for (int32_t li = 0; li < tl->nruns; li++) {
        const splat_dev_run *run = &runs[tl->run_begin + li];
        if (run->predicate != (run->table >= 0)) bad++;
        const unsigned char *rc =
            run->predicate ? wt.data + (int64_t)(run->table + r / tq) * rec : NULL;
        const int32_t(*iv)[4] = rc ? (const int32_t(*)[4])rc + (int64_t)(r % tq) * segs : NULL;
        const int niv = rc ? ((const int32_t *)(rc + SPLAT_WS_TABLE_NIV_OFF(tq, segs)))[r % tq] : 0;
        if (niv < 0 || niv > segs) {
          bad++;
          continue;
        }
        for (int64_t g = run->base; g < run->base + (int64_t)run->ntiles * t->tile_k; g++) {
          const splat__key_group grp = {run->phase, run->stride, run->width};
          const int64_t key = splat__group_key(grp, g);
          if (key >= a->seq_k) continue;
          int in = !run->predicate;
          for (int q = 0; q < niv; q++) in |= g >= iv[q][0] && g <= iv[q][1];
          seen[key] += in;
        }
        if (!rc) continue;
        /* The span of the row's 32 rows holds its intervals; its full keys are covered. */
        const int32_t *sp =
            (const int32_t *)(rc + SPLAT_WS_TABLE_SPAN_OFF(tq, segs)) + 4 * ((r % tq) / 32);
        int full = sp[2] > sp[3];
        for (int q = 0; q < niv; q++) {
          if (sp[0] != INT32_MIN && (iv[q][0] < sp[0] || iv[q][1] > sp[1])) bad++;
          full |= iv[q][0] <= sp[2] && iv[q][1] >= sp[3];
        }
        bad += !full;
      }
      const int64_t n = splat__acsr_row_columns(a, row, cols);
      for (int64_t c = 0; c < n; c++) bad += seen[cols[c]] != 1, seen[cols[c]] = 0;
      for (int64_t j = 0; j < a->seq_k; j++) bad += seen[j] != 0;
    }
  }
  /* Groups of 32 rows with at most one interval each: the span is exactly their hull and
   * the keys all of them cover (none where a row has no interval). */
  for (int64_t ti = 0; ti < t->ntiles; ti++) {
    const splat_dev_tile *tl = &tiles[ti];
    for (int32_t li = 0; li < tl->nruns; li++) {
      const splat_dev_run *run = &runs[tl->run_begin + li];
      if (!run->predicate) continue;
      for (int32_t r0 = 0; r0 < tl->nrows; r0 += 32) {
        const unsigned char *rc = wt.data + (int64_t)(run->table + r0 / tq) * rec;
        const int32_t *niv = (const int32_t *)(rc + SPLAT_WS_TABLE_NIV_OFF(tq, segs));
        const int32_t *sp =
            (const int32_t *)(rc + SPLAT_WS_TABLE_SPAN_OFF(tq, segs)) + 4 * ((r0 % tq) / 32);
        int32_t want[4] = {INT32_MAX, INT32_MIN, INT32_MIN, INT32_MAX};
        int one = 1;
        for (int32_t r = r0; r < r0 + 32 && r < tl->nrows; r++) {
          const int32_t(*iv)[4] = (const int32_t(*)[4])rc + (int64_t)(r % tq) * segs;
          const int n = niv[r % tq];
          one &= n <= 1;
          if (n == 0) {
            want[2] = INT32_MAX;
            want[3] = INT32_MIN;
            continue;
          }
          if (iv[0][0] < want[0]) want[0] = iv[0][0];
          if (iv[0][1] > want[1]) want[1] = iv[0][1];
          if (want[2] != INT32_MAX && iv[0][0] > want[2]) want[2] = iv[0][0];
          if (want[3] != INT32_MIN && iv[0][1] < want[3]) want[3] = iv[0][1];
        }
        if (!one) continue;
        const int empty = want[2] > want[3], got_empty = sp[2] > sp[3];
        bad += sp[0] != want[0] || sp[1] != want[1] || empty != got_empty ||
               (!empty && (sp[2] != want[2] || sp[3] != want[3]));
      }
    }
  }
  splat__ws_tables_free(&wt);
  free(seen);
  free(cols);
  free(runs);
  free(tiles);
  return bad;
}

/* The warp-specialised kernel's interval tables (ws_tables.h) on the reference patterns'
 * plans and their passes, at awkward sizes, for one and two consumer warpgroups (64- and
 * 128-row blocks) and both sub-tile widths; runs of one tile and group share a table; a
 * row with more intervals than the kernel takes fails with a sentence. */
static void test_ws_tables(void) {
  int64_t bad = 0, tables = 0, plans = 0;
  for (int pi = 0; pi < splat_ref_pattern_count; pi++) {
    for (size_t si = 0; si < REF_SIZES; si++) {
      splat_pattern *pat;
      splat__acsr a, part[2];
      splat__tile_plan t, pass[2];
      splat__attn_pass_shape shape[2];
      int np = 0;
      if (!ref_plan(pi, si, &pat, &a, &t)) continue;
      CHECK(splat__attn_passes_plan(&a, &t, 2, 16, 64, SPLAT_BF16, NULL, pass, part, shape, &np) ==
            SPLAT_OK);
      for (int tq = 64; tq <= 128; tq += 64) {
        const int kt = tq; /* both widths, each with one row-block size */
        bad += check_ws_tables(&a, &t, tq, kt, &tables);
        for (int k = 0; np == 2 && k < 2; k++)
          bad += check_ws_tables(&part[k], &pass[k], tq, kt, &tables);
        plans += 1 + np;
      }
      /* Tiles of 192 rows in one block (three consumer warpgroups). */
      splat__tile_plan t192;
      CHECK(splat__tile_plan_build(&a, 192, 128, &t192) == SPLAT_OK);
      bad += check_ws_tables(&a, &t192, 192, 128, &tables);
      plans++;
      splat__tile_plan_free(&t192);
      free_plans(pat, &a, &t, np, pass, part);
    }
  }
  CHECKF(bad == 0, "%lld mismatches between the interval tables and the rows' columns",
         (long long)bad);
  CHECKF(plans > 100 && tables > plans, "%lld tables over %lld plans", (long long)tables,
         (long long)plans);
  printf("interval tables: %lld records over %lld plans checked against the rows' columns\n",
         (long long)tables, (long long)plans);

  /* Shared tables, and a row with more intervals than the kernel takes. */
  splat_pattern *pat = NULL;
  splat__acsr a;
  splat__tile_plan t;
  CHECK(splat_pattern_parse("longformer(16,4)", 1000, 1000, &pat) == SPLAT_OK);
  CHECK(splat__acsr_build(pat, 0, &a) == SPLAT_OK);
  CHECK(splat__tile_plan_build(&a, 128, 128, &t) == SPLAT_OK);
  splat_dev_tile *tiles = dev_tiles_of(&t);
  splat_dev_run *runs = dev_runs_of(&t);
  splat__ws_tables wt;
  CHECK(splat__ws_tables_build(&a, t.perm, tiles, t.ntiles, runs, 128, 3, 128, &wt) == SPLAT_OK);
  /* Within a tile, predicated runs share a table exactly when they share a group. */
  int64_t pairs = 0, wrong = 0;
  for (int64_t ti = 0; ti < t.ntiles; ti++) {
    const splat_dev_run *tr = runs + tiles[ti].run_begin;
    for (int32_t i = 0; i < tiles[ti].nruns; i++)
      for (int32_t j = 0; j < i; j++) {
        if (!tr[i].predicate || !tr[j].predicate) continue;
        const int same = tr[i].phase == tr[j].phase && tr[i].stride == tr[j].stride &&
                         tr[i].width == tr[j].width;
        pairs++;
        wrong += same != (tr[i].table == tr[j].table);
      }
  }
  CHECKF(wt.count > 0 && pairs > 0 && wrong == 0,
         "longformer(16,4) at 1000: %lld tables, %lld pairs of predicated runs, %lld wrong",
         (long long)wt.count, (long long)pairs, (long long)wrong);
  splat__ws_tables_free(&wt);
  /* Rows past the global ones have two intervals of the contiguous group (the global
   * columns and the window): one a row is too few. */
  CHECK(splat__ws_tables_build(&a, t.perm, tiles, t.ntiles, runs, 128, 1, 128, &wt) ==
        SPLAT_ERR_INTERNAL);
  CHECK(wt.count == 0 && wt.data == NULL);
  CHECK(strstr(splat_last_error(NULL), "intervals of one key group") != NULL);
  free(runs);
  free(tiles);
  free_plans(pat, &a, &t, 0, NULL, NULL);
}

/* ------------------------------------------------------------ two-pass attention */

/* Whether a spec at seq 4096 gets two passes for batch x heads x head_dim. */
static int passes_for(const char *spec, int64_t batch, int64_t heads, int head_dim) {
  splat_pattern *pat = NULL;
  splat__acsr a;
  splat__tile_plan t, pass[2];
  int np = -1;
  square_plan(spec, 4096, 128, &pat, &a, &t);
  splat__attn_pass_shape shape[2];
  splat__acsr part[2];
  const splat_status st = splat__attn_passes_plan(&a, &t, batch, heads, head_dim, SPLAT_BF16, NULL,
                                                  pass, part, shape, &np);
  if (st == SPLAT_OK && np == 2) {
    CHECK(pass[0].ntiles > 0 && pass[1].ntiles > 0 &&
          pass[0].computed + pass[1].computed < t.computed);
  }
  free_plans(pat, &a, &t, st == SPLAT_OK ? np : 0, pass, part);
  return st != SPLAT_OK ? -1 : np;
}

/* The passes of the two-pass plan of spec at seq on 192-row tiles for description d on arch
 * (132 SMs, 227 KB of shared memory unless smem_optin says otherwise), as plan creation
 * decides it (splat__attn_pass_rows): returns take[0] + 2 take[1], and checks that a taken
 * pass has 192-row tiles, three consumer warpgroups and the same rows, and an untaken one is
 * the 128-row plan it was. */
static int pass_rows_for(const char *spec, int64_t seq, const splat_plan_desc *d, const char *arch,
                         int smem_optin) {
  splat_pattern *pat = NULL;
  splat__acsr a;
  splat__tile_plan t, pass[2];
  splat__acsr part[2];
  splat__attn_pass_shape shape[2];
  int np = 0, take[2] = {-1, -1};
  square_plan(spec, seq, 128, &pat, &a, &t);
  splat_report rep;
  CHECK(splat__report_build(&a, &t, &rep) == SPLAT_OK);
  CHECK(splat__attn_passes_plan(&a, &t, d->batch, d->heads, (int)d->head_dim, d->dtype, NULL, pass,
                                part, shape, &np) == SPLAT_OK &&
        np == 2);
  int64_t rows[2], ntiles[2];
  for (int k = 0; k < 2; k++) {
    rows[k] = pass[k].regular_rows, ntiles[k] = pass[k].ntiles;
    CHECK(shape[k].tile_q == 128 && !shape[k].wg3);
  }
  CHECK(splat__attn_pass_rows(part, pass, shape, &rep, seq, d, arch, 132, smem_optin, NULL, take) ==
        SPLAT_OK);
  splat__kspec ps[2];
  int kernels = 0;
  CHECK(splat__attn_pass_specs(ps, shape, &rep, d->dtype, (int)d->head_dim, smem_optin, arch,
                               &kernels) == SPLAT_OK);
  for (int k = 0; k < 2; k++) {
    if (take[k]) {
      CHECKF(pass[k].tile_q == 192 && shape[k].tile_q == 192 && shape[k].wg3 &&
                 shape[k].tile_rows > 128 && pass[k].regular_rows == rows[k] &&
                 pass[k].ntiles < ntiles[k] && kernels && ps[k].warps == 12 && !ps[k].gather &&
                 ps[k].epi == (k ? SPLAT_EPI_PASS2 : SPLAT_EPI_PASS1),
             "pass %d: tile %d rows %d warps %d", k + 1, pass[k].tile_q, shape[k].tile_rows,
             ps[k].warps);
    } else {
      CHECKF(pass[k].tile_q == 128 && pass[k].ntiles == ntiles[k] && shape[k].tile_q == 128 &&
                 !shape[k].wg3 && (!kernels || ps[k].warps != 12),
             "pass %d", k + 1);
    }
  }
  free_plans(pat, &a, &t, np, pass, part);
  return take[0] + 2 * take[1];
}

/* Whether two tile plans are the same: shape, row order, tiles and runs. */
static int same_tile_plan(const splat__tile_plan *x, const splat__tile_plan *y, int64_t seq_q) {
  if (x->tile_q != y->tile_q || x->tile_k != y->tile_k || x->permuted != y->permuted ||
      x->regular_rows != y->regular_rows || x->ntiles != y->ntiles || x->nruns != y->nruns ||
      x->full_tiles != y->full_tiles || x->predicated_tiles != y->predicated_tiles ||
      x->computed != y->computed)
    return 0;
  for (int64_t q = 0; q < seq_q; q++) {
    if ((x->perm ? x->perm[q] : q) != (y->perm ? y->perm[q] : q)) return 0;
  }
  for (int64_t q = 0; q < x->ntiles; q++) {
    const splat__query_tile *u = &x->tiles[q], *v = &y->tiles[q];
    if (u->row_begin != v->row_begin || u->nrows != v->nrows || u->run_begin != v->run_begin ||
        u->nruns != v->nruns)
      return 0;
  }
  for (int64_t r = 0; r < x->nruns; r++) {
    const splat__key_run *u = &x->runs[r], *v = &y->runs[r];
    if (u->group.phase != v->group.phase || u->group.stride != v->group.stride ||
        u->group.width != v->group.width || u->base != v->base || u->ntiles != v->ntiles ||
        u->predicate != v->predicate)
      return 0;
  }
  return 1;
}

/* Whether two passes' ACSRs hold the same segments a row. */
static int same_part(const splat__acsr *x, const splat__acsr *y) {
  if (x->seq_q != y->seq_q || x->nnz != y->nnz) return 0;
  for (int64_t i = 0; i <= x->seq_q; i++) {
    if (x->row_seg[i] != y->row_seg[i]) return 0;
  }
  return !memcmp(x->segs, y->segs, (size_t)x->row_seg[x->seq_q] * sizeof *x->segs);
}

/* The passes built ahead (splat__attn_passes_ahead_build, as plan creation builds them beside
 * the single plan) and weighed after give what the passes built after the single plan give:
 * the same decision, plans, ACSRs, shapes and 192-row choices (spec at seq, description d
 * with tile_q 128, on arch with 132 SMs and smem_optin bytes). Where the single plan took
 * other tiles (192 rows), the passes are built again on those, as without them. */
static int check_passes_ahead(const char *spec, int64_t seq, const splat_plan_desc *d,
                              const char *arch, int smem_optin) {
  splat_pattern *pat = NULL;
  splat__acsr a;
  splat__tile_plan t, pass[2][2];
  splat__acsr part[2][2];
  splat__attn_pass_shape shape[2][2];
  int np[2] = {0, 0}, take[2][2] = {{0, 0}, {0, 0}};
  square_plan(spec, seq, 128, &pat, &a, &t);
  splat_report rep;
  CHECK(splat__report_build(&a, &t, &rep) == SPLAT_OK);
  splat__attn_passes_ahead ah;
  CHECK(splat__attn_passes_ahead_build(&a, d, 1, seq, arch, 132, &ah) == SPLAT_OK);
  CHECKF(ah.built == splat__tile_plan_mixes(&a) && !ah.taken, "%s at %lld", spec, (long long)seq);
  for (int w = 0; w < 2; w++) { /* w 0: built here; 1: from ah */
    CHECK(splat__attn_passes_plan(&a, &t, d->batch, d->heads, (int)d->head_dim, d->dtype,
                                  w ? &ah : NULL, pass[w], part[w], shape[w], &np[w]) == SPLAT_OK);
    if (np[w] == 2)
      CHECK(splat__attn_pass_rows(part[w], pass[w], shape[w], &rep, seq, d, arch, 132, smem_optin,
                                  w && ah.taken ? &ah.trials : NULL, take[w]) == SPLAT_OK);
  }
  /* the trials taken or freed by splat__attn_pass_rows where the passes were taken */
  CHECKF(np[1] == np[0] && ah.taken == (np[0] == 2) &&
             (!ah.taken || (!ah.trials.t192[0].tiles && !ah.trials.t192[1].tiles)),
         "%s at %lld: %d passes, ahead %d", spec, (long long)seq, np[1], np[0]);
  for (int k = 0; k < 2 && np[0] == 2 && np[1] == 2; k++) {
    CHECKF(take[1][k] == take[0][k] && same_tile_plan(&pass[1][k], &pass[0][k], seq) &&
               same_part(&part[1][k], &part[0][k]) &&
               !memcmp(&shape[1][k], &shape[0][k], sizeof shape[0][k]),
           "%s at %lld: pass %d", spec, (long long)seq, k + 1);
  }
  const int taken = take[1][0] + take[1][1];
  for (int w = 0; w < 2; w++) splat__tile_plan_passes_free(pass[w], part[w]);
  splat__attn_passes_ahead_free(&ah);
  /* A single plan on 192-row tiles: the passes ahead (on 128) are not taken. */
  splat__tile_plan t192;
  CHECK(splat__tile_plan_build(&a, 192, 128, &t192) == SPLAT_OK);
  CHECK(splat__attn_passes_ahead_build(&a, d, 0, seq, arch, 132, &ah) == SPLAT_OK);
  CHECK(splat__attn_passes_plan(&a, &t192, d->batch, d->heads, (int)d->head_dim, d->dtype, &ah,
                                pass[1], part[1], shape[1], &np[1]) == SPLAT_OK &&
        !ah.taken && ah.built == splat__tile_plan_mixes(&a));
  CHECK(splat__attn_passes_plan(&a, &t192, d->batch, d->heads, (int)d->head_dim, d->dtype, NULL,
                                pass[0], part[0], shape[0], &np[0]) == SPLAT_OK &&
        np[0] == np[1]);
  for (int k = 0; k < 2 && np[0] == 2; k++)
    CHECK(pass[1][k].tile_q == 192 && same_tile_plan(&pass[1][k], &pass[0][k], seq));
  for (int w = 0; w < 2; w++) splat__tile_plan_passes_free(pass[w], part[w]);
  splat__attn_passes_ahead_free(&ah);
  splat__tile_plan_free(&t192);
  free_plans(pat, &a, &t, 0, NULL, NULL);
  return taken;
}

/* check_passes_ahead over masks of one and of two kinds of segments, lengths on both sides
 * of the passes' ACSR split in chunks (4096 rows), both dtypes (the 192-row trials in bf16,
 * some taken), and with SPLAT_ATTN_PASSES=0 (nothing built ahead) and a workspace past
 * SPLAT__ATTN_PASSES_MAX_BYTES (likewise). */
static void test_attn_passes_ahead(void) {
  const char *specs[] = {"strided(64) | window(64)",
                         "strided(8) | window(8)",
                         "strided(128) | window(32) | window(32,1000)",
                         "window(64)",
                         "dilated(64,2)",
                         "longformer(64,16)"};
  const int64_t seqs[] = {700, 4097, 16384, 65536};
  splat_plan_desc d = {2, 16, 16, 64, SPLAT_BF16, 128, 128, 8, SPLAT_OPS_ATTENTION};
  int taken = 0;
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    for (size_t n = 0; n < sizeof seqs / sizeof *seqs; n++) {
      if (seqs[n] == 65536 && i > 0) continue; /* one long case */
      d.dtype = seqs[n] == 4097 ? SPLAT_F16 : SPLAT_BF16;
      taken += check_passes_ahead(specs[i], seqs[n], &d, "sm_90a", 232448);
    }
  }
  CHECKF(taken >= 2, "%d passes took 192-row tiles", taken);
  splat_pattern *pat = NULL;
  splat__acsr a;
  splat__tile_plan t;
  square_plan("strided(64) | window(64)", 4096, 128, &pat, &a, &t);
  splat__attn_passes_ahead ah;
  setenv("SPLAT_ATTN_PASSES", "0", 1);
  CHECK(splat__attn_passes_ahead_build(&a, &d, 1, 4096, "sm_90a", 132, &ah) == SPLAT_OK &&
        !ah.built && !ah.part[0].segs);
  unsetenv("SPLAT_ATTN_PASSES");
  splat_plan_desc big = d;
  big.batch = 1 << 20; /* 2^20 x 16 heads x 4096 rows of workspace: past the cap */
  CHECK(splat__attn_passes_ahead_build(&a, &big, 1, 4096, "sm_90a", 132, &ah) == SPLAT_OK &&
        !ah.built);
  CHECK(splat__attn_passes_ahead_build(&a, &d, 1, 4096, "sm_90a", 132, &ah) == SPLAT_OK &&
        ah.built && ah.tile_q == 128 && ah.tile_k == 128 && ah.part[0].segs && ah.pass[1].tiles);
  splat__attn_passes_ahead_free(&ah);
  CHECK(!ah.built && !ah.pass[0].tiles && !ah.part[1].segs);
  splat__attn_passes_ahead_free(&ah); /* twice: nothing left to free */
  free_plans(pat, &a, &t, 0, NULL, NULL);
}

/* The choice of the passes' query tiles: 192 rows for the window pass of strided | window in
 * bf16 at head_dim 32 .. 64 on sm_90a where its items fill 4 rounds of 132 SMs, with any
 * ops (the pass plans serve the fused attention alone); 128 for f16 (pass 1's epilogue
 * spills at three warpgroups), other head_dims and archs, too few items, shared memory
 * that does not take three warpgroups, a SPLAT_ATTN_WARPGROUPS setting, and a pass 1 of more
 * than two segments a row. The lattice pass too where its phase classes fill 192-row tiles
 * with few idle warpgroups: classes of 1024 rows (65536), not of 256 (16384) or 64 (4096). */
static void test_attn_pass_rows(void) {
  const char *sw = "strided(64) | window(64)";
  splat_plan_desc d = {2, 16, 16, 64, SPLAT_BF16, 128, 128, 8, SPLAT_OPS_ALL};
  /* Pass 1 of 8 segments a row (the windows split around the lattice points): 128. */
  const char *s8 = "strided(128) | window(32) | window(32,1000)";
  splat_pattern *p8 = NULL;
  splat__attn_pass_shape sh8[2];
  int two = 0, split = 0;
  CHECK(splat_pattern_parse(s8, 4096, 4096, &p8) == SPLAT_OK &&
        splat__attn_passes_of_pattern(p8, 128, 128, 64, SPLAT_BF16, 1, 1, NULL, 0, &two, sh8,
                                      &split) == SPLAT_OK &&
        two && sh8[0].segs == 8);
  splat_pattern_destroy(p8);
  CHECK(pass_rows_for(s8, 4096, &d, "sm_90a", 232448) == 0);
  CHECK(pass_rows_for(sw, 65536, &d, "sm_90a", 232448) == 3);
  CHECK(pass_rows_for(sw, 16384, &d, "sm_90a", 232448) == 1);
  CHECK(pass_rows_for(sw, 4096, &d, "sm_90a", 232448) == 1); /* 22 x 32 items: 5.3 rounds */
  CHECK(pass_rows_for(sw, 4096, &d, "sm_90a", 0) == 1);
  /* Classes of 512 rows (1.125x the sub-tiles, idle ones counted) take 192; its window(32)
   * pass does not (its 192-row tiles' warpgroups compute more than 5% more sub-tiles). */
  CHECK(pass_rows_for("strided(32) | window(32)", 16384, &d, "sm_90a", 0) == 2);
  d.head_dim = 32;
  CHECK(pass_rows_for(sw, 4096, &d, "sm_90a", 232448) == 1);
  CHECK(pass_rows_for(sw, 65536, &d, "sm_90a", 232448) == 3);
  d.head_dim = 128; /* not measured on three warpgroups (bench/NOTES.md v75) */
  CHECK(pass_rows_for(sw, 65536, &d, "sm_90a", 232448) == 0);
  d.head_dim = 96;
  CHECK(pass_rows_for(sw, 65536, &d, "sm_90a", 232448) == 0);
  d.head_dim = 64;
  CHECK(pass_rows_for(sw, 65536, &d, "sm_80", 232448) == 0);
  CHECK(pass_rows_for(sw, 65536, &d, "sm_90a", 101376) == 0);
  /* 215 KB: pass 2's three warpgroups would not stage its rows (226 KB with them). */
  {
    const int got = pass_rows_for(sw, 65536, &d, "sm_90a", 215000);
    CHECKF(got == 1, "%d", got);
  }
  d.dtype = SPLAT_F16;
  CHECK(pass_rows_for(sw, 65536, &d, "sm_90a", 232448) == 0);
  d.dtype = SPLAT_BF16;
  d.batch = 1; /* 22 x 16 items: 2.7 rounds */
  CHECK(pass_rows_for(sw, 4096, &d, "sm_90a", 232448) == 0);
  d.batch = 2;
  setenv("SPLAT_ATTN_WARPGROUPS", "2", 1);
  CHECK(pass_rows_for(sw, 65536, &d, "sm_90a", 232448) == 0);
  unsetenv("SPLAT_ATTN_WARPGROUPS");
}

/* The two passes' kernel specs of `spec` at seq (square) in bf16 for head_dim, arch and
 * smem_optin, into ps[0..1] with the passes' shapes in sh[0..1], as `splat codegen` makes
 * them. Returns 1 when the pattern takes two passes and both have a tile kernel. */
static int pass_specs_for(const char *spec, int64_t seq, int head_dim, const char *arch,
                          int smem_optin, splat__kspec ps[2], splat__attn_pass_shape sh[2]) {
  splat_pattern *p = NULL;
  splat_report r;
  int two = 0, split = 0, kernels = 0;
  CHECK(splat_pattern_parse(spec, seq, seq, &p) == SPLAT_OK &&
        splat_analyze(p, 0, 0, 0, &r) == SPLAT_OK);
  CHECK(splat__attn_passes_of_pattern(p, r.tile_q, r.tile_k, head_dim, SPLAT_BF16, 1, 1, arch, 0,
                                      &two, sh, &split) == SPLAT_OK);
  if (two)
    CHECK(splat__attn_pass_specs(ps, sh, &r, SPLAT_BF16, head_dim, smem_optin, arch, &kernels) ==
          SPLAT_OK);
  splat_pattern_destroy(p);
  return two && kernels;
}

/* The choice of two passes: strided | window takes them, window and dilated (one kind of
 * segment) do not, nor a workspace over the cap, nor SPLAT_ATTN_PASSES=0; bad values of
 * SPLAT_ATTN_PASSES fail with a sentence. */
static void test_attn_passes(void) {
  unsetenv("SPLAT_ATTN_PASSES");
  CHECK(passes_for("strided(64) | window(64)", 2, 16, 64) == 2);
  CHECK(passes_for("window(256)", 2, 16, 64) == 0);
  CHECK(passes_for("dilated(256,2)", 2, 16, 64) == 0);
  /* Rows padded to whole 32-byte sectors: fp16 O and three floats (bf16), f32 O and two. */
  CHECK(splat__attn_passes_bytes(2, 16, 4096, 64, SPLAT_BF16) == 2.0 * 16 * 4096 * 160);
  CHECK(splat__attn_passes_bytes(2, 16, 4096, 128, SPLAT_BF16) == 2.0 * 16 * 4096 * 288);
  CHECK(splat__attn_passes_bytes(2, 16, 4096, 64, SPLAT_F16) == 2.0 * 16 * 4096 * 72 * 4);
  CHECK(splat__attn_passes_bytes(2, 16, 4096, 128, SPLAT_F16) == 2.0 * 16 * 4096 * 136 * 4);
  CHECK(passes_for("strided(64) | window(64)", 64, 16, 128) == 2);   /* 1.2 GB of workspace */
  CHECK(passes_for("strided(64) | window(64)", 1024, 16, 128) == 0); /* 19.3 GB */
  setenv("SPLAT_ATTN_PASSES", "0", 1);
  CHECK(passes_for("strided(64) | window(64)", 2, 16, 64) == 0);
  setenv("SPLAT_ATTN_PASSES", "two", 1);
  CHECK(passes_for("strided(64) | window(64)", 2, 16, 64) == -1);
  CHECKF(strstr(splat__thread_error(), "SPLAT_ATTN_PASSES=two"), "'%s'", splat__thread_error());
  unsetenv("SPLAT_ATTN_PASSES");
}

/* The attention tile kernels' epilogues (kernels/params.cuh SPLAT_EPI_*), one a kernel:
 * plain for one pass without split tiles (no suffix, no merge kernel), "_split" with the
 * merge kernel as a third program, "_pass1" with the "_pass2" kernel as a third program for
 * two passes (which take precedence over a split); the same for the wgmma and mma.sync
 * kernels; SPLAT_ATTN_EPI in each tile program's prelude. And `splat codegen`'s view of a
 * pattern: two passes for strided | window, a split only where SPLAT_ATTN_SPLIT asks and
 * there is one pass. */
static void test_attn_epilogues(void) {
  unsetenv("SPLAT_ATTN_PASSES");
  unsetenv("SPLAT_ATTN_SPLIT");
  splat__kspec sp[SPLAT__KOP_COUNT], prog[SPLAT__KPROG_PER_OP];
  splat__kspec *a = &sp[SPLAT__KOP_ATTENTION];
  char rows[160], tile[160], merge[160], name[176], want[176], *src = NULL;
  const char *kinds[3] = {"sm_90a ws", "sm_90a wgmma", "sm_80"};
  const char *bases[3] = {"splat_attn_ws_bf16_d64_q128_k128_kt128_s4_seg1",
                          "splat_attn_wgmma_bf16_d64_q64_k128_kt64_s3_seg1",
                          "splat_attn_tile_bf16_v_bf16_d64_q64_k128_kt64_s3_seg1"};
  for (int kd = 0; kd < 3; kd++) {
    splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, kd == 2 ? "sm_80" : "sm_90a",
                      kd == 0 ? SPLAT__WGMMA_WS : SPLAT__WGMMA_SYNC, 0, 0);
    for (int c = 0; c < 4; c++) {
      const int two_pass = c & 1, split = c >> 1;
      const int epi = two_pass ? SPLAT_EPI_PASS1 : split ? SPLAT_EPI_SPLIT : SPLAT_EPI_PLAIN;
      splat__kspec_attn_epilogues(sp, two_pass, split);
      CHECKF(a->epi == epi, "%s c %d: epilogue %d", kinds[kd], c, a->epi);
      CHECK(sp[SPLAT__KOP_SDDMM].epi == 0 && sp[SPLAT__KOP_SPMM].epi == 0);
      splat__kspec_names(a, rows, tile, sizeof rows);
      splat__kspec_merge_name(a, merge, sizeof merge);
      snprintf(want, sizeof want, "%s%s", bases[kd],
               epi == SPLAT_EPI_PASS1   ? "_pass1"
               : epi == SPLAT_EPI_SPLIT ? "_split"
                                        : "");
      CHECKF(!strcmp(tile, want), "%s: %s", kinds[kd], tile);
      CHECKF(epi == SPLAT_EPI_SPLIT ? !strcmp(merge, "splat_attn_merge_bf16_d64") : !merge[0],
             "'%s'", merge);
      const int n = splat__kspec_programs(a, NULL, prog);
      CHECKF(n == (epi == SPLAT_EPI_PLAIN ? 2 : 3), "%s c %d: %d programs", kinds[kd], c, n);
      CHECK(splat__kspec_source(&prog[1], &src) == SPLAT_OK);
      if (src) {
        snprintf(want, sizeof want, "#define SPLAT_ATTN_EPI %d\n", epi);
        CHECK(strstr(src, want) && !strstr(src, "SPLAT_ATTN_MERGE_NAME"));
        free(src);
        src = NULL;
      }
      if (n < 3) continue;
      splat__kspec_program(&prog[2], name, sizeof name);
      CHECK(splat__kspec_source(&prog[2], &src) == SPLAT_OK);
      if (epi == SPLAT_EPI_PASS1) {
        /* The second pass: the same kernel shape with the merging epilogue. */
        snprintf(want, sizeof want, "%s_pass2.cu", bases[kd]);
        CHECKF(prog[2].program == SPLAT__KPROG_PASS2 && prog[2].epi == SPLAT_EPI_PASS2 &&
                   prog[2].warps == a->warps && prog[2].kt == a->kt && !strcmp(name, want),
               "%s: %s", kinds[kd], name);
        CHECK(src && strstr(src, "#define SPLAT_ATTN_EPI 3\n"));
      } else {
        /* The merge kernel alone: no row or tile kernel in its program. */
        CHECKF(
            prog[2].program == SPLAT__KPROG_MERGE && !strcmp(name, "splat_attn_merge_bf16_d64.cu"),
            "%s: %s", kinds[kd], name);
        CHECK(src && strstr(src, "#define SPLAT_ATTN_MERGE_NAME splat_attn_merge_bf16_d64\n") &&
              !strstr(src, rows) && !strstr(src, bases[kd]));
      }
      free(src);
      src = NULL;
    }
  }

  /* splat__kspec_for_plan: the environment's kernel, the report's tile shape and lanes. */
  splat_pattern *pat = NULL;
  splat_report rep;
  CHECK(splat_pattern_parse("dilated(64,2)", 4096, 4096, &pat) == SPLAT_OK);
  CHECK(splat_analyze(pat, 0, 0, 0, &rep) == SPLAT_OK);
  CHECK(splat__kspec_for_plan(sp, &rep, SPLAT_BF16, 64, 0, "sm_90a", 0) == SPLAT_OK);
  CHECK(a->wgmma == SPLAT__WGMMA_WS && a->tile_k == rep.tile_k && rep.rows_permuted &&
        sp[SPLAT__KOP_SDDMM].write_mode == SPLAT__WRITE_ROWS &&
        sp[SPLAT__KOP_SDDMM].write_lanes == 2);
  /* 192-row tiles (dilated(64,2)'s phase classes of 2048 rows fill them): three consumer
   * warpgroups without the gather where the caller says TMA serves every sub-tile
   * (tma_all), two with it where not, or where SPLAT_ATTN_WARPGROUPS asks for two. */
  splat_report r192;
  CHECK(splat_analyze(pat, 192, 0, 0, &r192) == SPLAT_OK && r192.tile_rows_max == 192);
  CHECK(splat__kspec_for_plan(sp, &r192, SPLAT_BF16, 64, 0, "sm_90a", 1) == SPLAT_OK);
  CHECK(a->wgmma == SPLAT__WGMMA_WS && a->warps == 12 && !a->gather);
  CHECK(splat__kspec_for_plan(sp, &r192, SPLAT_BF16, 64, 0, "sm_90a", 0) == SPLAT_OK);
  CHECK(a->wgmma == SPLAT__WGMMA_WS && a->warps == 8 && a->gather);
  setenv("SPLAT_ATTN_WARPGROUPS", "3", 1);
  CHECK(splat__kspec_for_plan(sp, &r192, SPLAT_BF16, 64, 0, "sm_90a", 1) == SPLAT_OK);
  CHECK(a->wgmma == SPLAT__WGMMA_WS && a->warps == 12 && !a->gather);
  setenv("SPLAT_ATTN_WARPGROUPS", "2", 1);
  CHECK(splat__kspec_for_plan(sp, &r192, SPLAT_BF16, 64, 0, "sm_90a", 1) == SPLAT_OK);
  CHECK(a->wgmma == SPLAT__WGMMA_WS && a->warps == 8 && a->gather);
  unsetenv("SPLAT_ATTN_WARPGROUPS");
  CHECK(splat__kspec_for_plan(sp, &rep, SPLAT_BF16, 128, 0, "sm_90a", 0) == SPLAT_OK);
  CHECK(sp[SPLAT__KOP_SDDMM].wgmma && !sp[SPLAT__KOP_SDDMM].write_mode &&
        sp[SPLAT__KOP_SDDMM].write_lanes == 4);
  setenv("SPLAT_ATTN_WS", "0", 1);
  CHECK(splat__kspec_for_plan(sp, &rep, SPLAT_BF16, 64, 0, "sm_90a", 0) == SPLAT_OK);
  CHECK(a->wgmma == SPLAT__WGMMA_SYNC);
  setenv("SPLAT_ATTN_WS", "maybe", 1);
  CHECK(splat__kspec_for_plan(sp, &rep, SPLAT_BF16, 64, 0, "sm_90a", 0) ==
        SPLAT_ERR_INVALID_ARGUMENT);
  unsetenv("SPLAT_ATTN_WS");
  setenv("SPLAT_SDDMM_WGMMA", "x", 1);
  CHECK(splat__kspec_for_plan(sp, &rep, SPLAT_F32, 64, 0, "sm_90a", 0) ==
        SPLAT_ERR_INVALID_ARGUMENT);
  /* The mma.sync R-SDDMM keeps 4 lanes a row for regrouped rows. */
  setenv("SPLAT_SDDMM_WGMMA", "0", 1);
  CHECK(splat__kspec_for_plan(sp, &rep, SPLAT_BF16, 64, 0, "sm_90a", 0) == SPLAT_OK);
  CHECK(!sp[SPLAT__KOP_SDDMM].wgmma && sp[SPLAT__KOP_SDDMM].write_lanes == 4);
  unsetenv("SPLAT_SDDMM_WGMMA");
  splat_pattern_destroy(pat);

  int two = -1, split = -1;
  splat__attn_pass_shape shape[2];
  const char *specs[] = {"strided(64) | window(64)", "window(256)"};
  for (int i = 0; i < 2; i++) {
    CHECK(splat_pattern_parse(specs[i], 4096, 4096, &pat) == SPLAT_OK);
    CHECK(splat__attn_passes_of_pattern(pat, 128, 128, 64, SPLAT_BF16, 1, 1, NULL, 0, &two, shape,
                                        &split) == SPLAT_OK);
    CHECKF(two == (i == 0) && split == 0, "%s: two %d split %d", specs[i], two, split);
    /* strided(64) | window(64): the window's pass first, in 128-row tiles, split around
     * the lattice points; then the strided pass, in phase classes of 64 rows, each row's
     * whole lattice one segment (its points inside the window too: tile_plan.h). */
    CHECKF(i == 1 || (shape[0].segs == 2 && shape[0].tile_rows == 128 && shape[0].tile_k == 128 &&
                      shape[1].segs == 1 && shape[1].tile_rows == 64 && shape[1].tile_k == 64),
           "pass shapes %d/%d/%d, %d/%d/%d", shape[0].segs, shape[0].tile_rows, shape[0].tile_k,
           shape[1].segs, shape[1].tile_rows, shape[1].tile_k);
    if (i == 0) {
      /* Each pass's kernel for its rows: two consumer warpgroups and 128-key sub-tiles for
       * the window, one for the 64-row classes on their 64-key tiles; the second pass's is the
       * third program. */
      splat__kspec ps[2], prog[SPLAT__KPROG_PER_OP];
      splat_report r2;
      int kernels = 0;
      CHECK(splat_analyze(pat, 0, 0, 0, &r2) == SPLAT_OK);
      CHECK(splat__attn_pass_specs(ps, shape, &r2, SPLAT_BF16, 64, 0, "sm_90a", &kernels) ==
                SPLAT_OK &&
            kernels);
      const splat__kspec p1 = ps[0], p2 = ps[1];
      /* A pass whose kernel exceeds the device's shared memory where the single plan's does
       * not (the window of strided(16) | window(56) splits into 8 segments a row; d128 on an
       * sm_86 with 99 KB): no two passes. */
      splat__attn_pass_shape sh[2];
      CHECK(pass_specs_for("strided(16) | window(56)", 4096, 128, "sm_86", 0, ps, sh) &&
            sh[0].segs == 8);
      CHECK(!pass_specs_for("strided(16) | window(56)", 4096, 128, "sm_86", 101376, ps, sh) &&
            !ps[0].tile && ps[1].tile);
      CHECKF(p1.wgmma == SPLAT__WGMMA_WS && p1.warps == 8 && p1.kt == 128 && p1.max_segs == 2 &&
                 p1.epi == SPLAT_EPI_PASS1 && p1.program == SPLAT__KPROG_TILE,
             "pass 1: warps %d kt %d segs %d epi %d", p1.warps, p1.kt, p1.max_segs, p1.epi);
      CHECKF(p2.wgmma == SPLAT__WGMMA_WS && p2.warps == 4 && p2.max_segs == 1 &&
                 p2.epi == SPLAT_EPI_PASS2 && p2.program == SPLAT__KPROG_PASS2,
             "pass 2: warps %d segs %d epi %d", p2.warps, p2.max_segs, p2.epi);
      /* Pass 2 stages its rows' pass-1 results in shared memory where two of its CTAs
       * still share an SM: 64 rows of 64 fp16 and 16 bytes (bf16), and a barrier per
       * warpgroup in 16 bytes (SPLAT_WS_PFULL_BYTES). */
      splat__kspec p2_unstaged = p2;
      p2_unstaged.epi = SPLAT_EPI_PASS1;
      CHECKF(splat__kspec_tile_smem(&p2) - splat__kspec_tile_smem(&p2_unstaged) == 16 + 64 * 144 &&
                 2 * (splat__kspec_tile_smem(&p2) + 1024) <= 233472,
             "pass 2 smem %d", splat__kspec_tile_smem(&p2));
      char n1[176], n2[176];
      CHECK(splat__kspec_programs(&p1, &p2, prog) == 3);
      splat__kspec_program(&prog[1], n1, sizeof n1);
      splat__kspec_program(&prog[2], n2, sizeof n2);
      /* Pass 1: rows in their own order, two segments a row; pass 2's rows are phase
       * classes. */
      CHECKF(!strcmp(n1, "splat_attn_ws_bf16_d64_q128_k128_kt128_s4_seg2_pass1.cu") &&
                 !strcmp(n2, "splat_attn_ws_bf16_d64_q64_k64_kt64_s4_seg1_pass2.cu"),
             "%s %s", n1, n2);
      /* At 16384 (256 keys a class) pass 2 has two warpgroups on 128-key tiles, and stages
       * its 128 rows too: one CTA an SM, within 227 KB. */
      /* At head_dim 128 and 4096 pass 2 (64-row classes) is narrow: one warpgroup, two
       * CTAs an SM; pass 1 (128-row tiles) keeps two. */
      CHECK(pass_specs_for("strided(64) | window(64)", 4096, 128, "sm_90a", 0, ps, sh));
      CHECKF(ps[0].warps == 8 && ps[1].warps == 4 && ps[1].stages == 2 &&
                 splat__kspec_ws_ctas_per_sm(&ps[1], 233472) == 2,
             "d128 passes: warps %d / %d", ps[0].warps, ps[1].warps);
      /* At head_dim 32 both passes run the warp-specialised kernel (as 64 columns); on
       * sm_90a, as `splat codegen` shows it (the SMs unknown), pass 1 takes 192-row tiles
       * and three consumer warpgroups (splat__attn_pass_rows). */
      CHECK(pass_specs_for("strided(64) | window(64)", 4096, 32, "sm_90a", 0, ps, sh));
      CHECK(splat__kspec_programs(&ps[0], &ps[1], prog) == 3);
      splat__kspec_program(&prog[1], n1, sizeof n1);
      splat__kspec_program(&prog[2], n2, sizeof n2);
      CHECKF(ps[0].wgmma == SPLAT__WGMMA_WS && ps[0].max_segs == 2 && ps[0].warps == 12 &&
                 !ps[0].gather && sh[0].tile_q == 192 && sh[0].wg3 && sh[0].tile_rows == 192 &&
                 ps[1].wgmma == SPLAT__WGMMA_WS && ps[1].warps == 4 && sh[1].tile_q == 128 &&
                 !sh[1].wg3 &&
                 !strcmp(n1, "splat_attn_ws_bf16_d32_q192_k128_kt128_s4_seg2_pass1.cu") &&
                 !strcmp(n2, "splat_attn_ws_bf16_d32_q64_k64_kt64_s4_seg1_pass2.cu"),
             "d32 passes: %s %s", n1, n2);
      CHECK(pass_specs_for("strided(64) | window(64)", 16384, 64, "sm_90a", 0, ps, sh) &&
            sh[1].tile_k == 128);
      splat__kspec w2_unstaged = ps[1];
      w2_unstaged.epi = SPLAT_EPI_PASS1;
      CHECKF(ps[1].warps == 8 && ps[1].kt == 128 &&
                 splat__kspec_tile_smem(&ps[1]) - splat__kspec_tile_smem(&w2_unstaged) ==
                     16 + 128 * 144 &&
                 splat__kspec_tile_smem(&ps[1]) <= 232448,
             "pass 2 at 16384: warps %d kt %d smem %d", ps[1].warps, ps[1].kt,
             splat__kspec_tile_smem(&ps[1]));
      /* The room is the device's: on a device whose opt-in is a byte short of that
       * kernel's staged size it keeps the same tile unstaged; the one-warpgroup pass 2 at
       * 4096 (two CTAs an SM) loses its staging once two staged CTAs no longer fit. */
      splat__kspec small = ps[1];
      small.smem_optin = splat__kspec_tile_smem(&ps[1]);
      CHECK(splat__kspec_tile_smem(&small) == splat__kspec_tile_smem(&ps[1]));
      small.smem_optin--;
      CHECKF(splat__kspec_tile_smem(&small) == splat__kspec_tile_smem(&w2_unstaged),
             "pass 2 with opt-in %d: smem %d", small.smem_optin, splat__kspec_tile_smem(&small));
      splat__kspec one = p2;
      one.smem_optin = 2 * (splat__kspec_tile_smem(&p2) + 1024) - 1024;
      CHECK(splat__kspec_tile_smem(&one) == splat__kspec_tile_smem(&p2));
      one.smem_optin -= 2;
      CHECK(splat__kspec_tile_smem(&one) == splat__kspec_tile_smem(&p2_unstaged));
    }
    setenv("SPLAT_ATTN_SPLIT", "2", 1);
    CHECK(splat__attn_passes_of_pattern(pat, 128, 128, 64, SPLAT_BF16, 1, 1, NULL, 0, &two, shape,
                                        &split) == SPLAT_OK);
    CHECKF(two == (i == 0) && split == (i == 1), "%s: two %d split %d", specs[i], two, split);
    setenv("SPLAT_ATTN_PASSES", "0", 1);
    CHECK(splat__attn_passes_of_pattern(pat, 128, 128, 64, SPLAT_BF16, 1, 1, NULL, 0, &two, shape,
                                        &split) == SPLAT_OK);
    CHECK(two == 0 && split == 1);
    unsetenv("SPLAT_ATTN_SPLIT");
    unsetenv("SPLAT_ATTN_PASSES");
    splat_pattern_destroy(pat);
  }
}

/* ------------------------------------------------------------ split attention tiles */

/* The (group, key tile, predicate) triples a tile's runs cover, in run order. */
static int64_t expand_tile(const splat_dev_tile *t, const splat_dev_run *runs, int tile_k,
                           int64_t *out) {
  int64_t n = 0;
  for (int32_t r = 0; r < t->nruns; r++) {
    const splat_dev_run *u = &runs[t->run_begin + r];
    for (int32_t k = 0; k < u->ntiles; k++) {
      out[n++] = ((((int64_t)u->phase * 131 + u->stride) * 7 + u->width) * 1000003 +
                  (u->base + (int64_t)k * tile_k)) *
                     2 +
                 u->predicate;
    }
  }
  return n;
}

/* Cuts a generated source after its comment and #define prelude (at the first #line). */
static void prelude_only(char *src) {
  char *line = strstr(src, "#line ");
  if (line) *line = '\0';
}

/* An op's programs (kgen.h): its row kernel's, which only the op, dtypes and head_dim
 * decide (so plans with other tile kernels or segment counts share it), and its tile
 * kernel's, each source holding its own kernels only. */
static void test_kernel_programs(void) {
  splat__kspec sp[SPLAT__KOP_COUNT], other[SPLAT__KOP_COUNT], prog[SPLAT__KPROG_PER_OP],
      oprog[SPLAT__KPROG_PER_OP];
  splat__kspec_plan(sp, SPLAT_BF16, 64, 1, 128, 128, 128, 0, "sm_90a", SPLAT__WGMMA_WS, 0, 0);
  splat__kspec_attn_epilogues(sp, 0, 0);
  splat__kspec_plan(other, SPLAT_BF16, 64, 3, 128, 128, 128, 0, "sm_90a", SPLAT__WGMMA_SYNC, 0, 0);
  for (int op = 0; op < SPLAT__KOP_COUNT; op++) {
    const int n = splat__kspec_programs(&sp[op], NULL, prog);
    CHECKF(n == (sp[op].tile ? 2 : 1), "op %d: %d programs", op, n);
    CHECK(prog[0].program == SPLAT__KPROG_ROWS && !prog[0].tile);
    char rows[160], tile[160], name[176], want[176], *src = NULL, *osrc = NULL;
    splat__kspec_names(&sp[op], rows, tile, sizeof rows);
    splat__kspec_program(&prog[0], name, sizeof name);
    snprintf(want, sizeof want, "%s.cu", rows);
    CHECKF(!strcmp(name, want), "%s", name);
    CHECK(splat__kspec_source(&prog[0], &src) == SPLAT_OK);
    splat__kspec_programs(&other[op], NULL, oprog);
    CHECK(splat__kspec_source(&oprog[0], &osrc) == SPLAT_OK);
    if (src && osrc) {
      CHECKF(!strcmp(src, osrc), "op %d: the row program depends on the tile kernel", op);
      prelude_only(src);
      CHECK(strstr(src, "#define SPLAT_NO_TILE 1\n") && !strstr(src, "SPLAT_NO_ROWS"));
      CHECK(!strstr(src, "_TILE_NAME") && !strstr(src, "SPLAT_ATTN_MERGE_NAME"));
    }
    free(src);
    free(osrc);
    src = NULL;
    if (n < 2) continue;
    CHECK(prog[1].program == SPLAT__KPROG_TILE && prog[1].tile && prog[1].kt == sp[op].kt);
    splat__kspec_program(&prog[1], name, sizeof name);
    snprintf(want, sizeof want, "%s.cu", tile);
    CHECKF(!strcmp(name, want), "%s", name);
    CHECK(splat__kspec_source(&prog[1], &src) == SPLAT_OK);
    if (src) {
      prelude_only(src);
      CHECK(strstr(src, "#define SPLAT_NO_ROWS 1\n") && !strstr(src, "SPLAT_NO_TILE"));
      CHECK(strstr(src, tile) != NULL);
    }
    free(src);
  }
  /* No tile kernel (head_dim 36, not a multiple of 8): one program. */
  splat__kspec f32[SPLAT__KOP_COUNT];
  splat__kspec_plan(f32, SPLAT_F32, 36, 1, 128, 128, 128, 0, "sm_90a", SPLAT__WGMMA_WS, 0, 0);
  CHECK(!f32[SPLAT__KOP_SPMM].tile && !f32[SPLAT__KOP_ATTENTION].tile &&
        splat__kspec_programs(&f32[SPLAT__KOP_SPMM], NULL, prog) == 1);
  /* The f32 R-SpMM above head_dim 128 (O in column panels): a tile kernel. */
  splat__kspec_plan(f32, SPLAT_F32, 256, 1, 128, 128, 128, 0, "sm_90a", SPLAT__WGMMA_WS, 0, 0);
  CHECK(f32[SPLAT__KOP_SPMM].tile && splat__kspec_programs(&f32[SPLAT__KOP_SPMM], NULL, prog) == 2);
}

/* Random tiles split at random limits: every chunk of a tile within the limit, the chunks
 * together covering exactly the tile's key tiles in order, slots and merge entries
 * consistent; tiles within the limit copied. */
static void test_tile_split(void) {
  enum { NT = 40, MAXR = 6 };
  splat_dev_tile tiles[NT];
  splat_dev_run runs[NT * MAXR];
  uint64_t seed = 12345;
  int bad = 0;
  for (int trial = 0; trial < 200 && !bad; trial++) {
    int nr = 0;
    for (int i = 0; i < NT; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      const int nruns = (int)((seed >> 33) % MAXR);
      tiles[i].row_begin = 128 * i;
      tiles[i].nrows = 1 + (int)((seed >> 20) % 128);
      tiles[i].run_begin = nr;
      tiles[i].nruns = nruns;
      for (int r = 0; r < nruns; r++, nr++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const int stride = 1 + (int)((seed >> 50) % 3), width = 1 + (int)((seed >> 45) % 3);
        splat_dev_run u = {(int)(seed >> 60),
                           stride,
                           width,
                           64 * (int)((seed >> 40) % 50),
                           (int)((seed >> 33) % 40),
                           (int)((seed >> 30) & 1),
                           0,
                           0};
        runs[nr] = u;
      }
    }
    const int tile_k = 64, max_k = 1 + trial % 17;
    splat__tile_split sp;
    if (splat__tile_split_build(tiles, NT, runs, tile_k, max_k, &sp) != SPLAT_OK) {
      bad = 1;
      break;
    }
    static int64_t want[NT * MAXR * 40], got[NT * MAXR * 40];
    int64_t o = 0, nslots = 0, nmerge = 0;
    for (int i = 0; i < NT && !bad; i++) {
      const int64_t nw = expand_tile(&tiles[i], runs, tile_k, want);
      if (nw <= max_k) { /* copied whole */
        bad |= o >= sp.ntiles || sp.slots[o] != -1 ||
               expand_tile(&sp.tiles[o], sp.runs, tile_k, got) != nw ||
               memcmp(want, got, (size_t)nw * sizeof *want) != 0;
        o++;
        continue;
      }
      const int32_t *m = &sp.merge[4 * nmerge++];
      const int64_t chunks = (nw + max_k - 1) / max_k;
      bad |=
          m[0] != tiles[i].row_begin || m[1] != tiles[i].nrows || m[2] != nslots || m[3] != chunks;
      int64_t ng = 0;
      for (int64_t c = 0; c < chunks && !bad; c++, o++) {
        const int64_t n = expand_tile(&sp.tiles[o], sp.runs, tile_k, got + ng);
        bad |= n < 1 || n > max_k || sp.slots[o] != nslots + c ||
               sp.tiles[o].row_begin != tiles[i].row_begin || sp.tiles[o].nrows != tiles[i].nrows;
        ng += n;
      }
      bad |= ng != nw || memcmp(want, got, (size_t)nw * sizeof *want) != 0;
      nslots += chunks;
    }
    bad |= o != sp.ntiles || nslots != sp.nslots || nmerge != sp.nmerge;
    CHECKF(!bad, "split trial %d (limit %d)", trial, max_k);
    splat__tile_split_free(&sp);
  }
  /* No limit: everything copied. */
  splat__tile_split sp;
  CHECK(splat__tile_split_build(tiles, NT, runs, 64, 0, &sp) == SPLAT_OK);
  CHECK(sp.ntiles == NT && sp.nmerge == 0 && sp.nslots == 0);
  splat__tile_split_free(&sp);

  int k = -1;
  unsetenv("SPLAT_ATTN_SPLIT");
  CHECK(splat__attn_split_env(&k) == SPLAT_OK && k == 0);
  setenv("SPLAT_ATTN_SPLIT", "16", 1);
  CHECK(splat__attn_split_env(&k) == SPLAT_OK && k == 16);
  setenv("SPLAT_ATTN_SPLIT", "16x", 1);
  CHECK(splat__attn_split_env(&k) == SPLAT_ERR_INVALID_ARGUMENT && k == 0);
  CHECKF(strstr(splat__thread_error(), "SPLAT_ATTN_SPLIT=16x") != NULL, "'%s'",
         splat__thread_error());
  setenv("SPLAT_ATTN_SPLIT", "-1", 1);
  CHECK(splat__attn_split_env(&k) == SPLAT_ERR_INVALID_ARGUMENT);
  unsetenv("SPLAT_ATTN_SPLIT");
}

/* The R-SDDMM's chunk size: 1.5x the mean key tiles of a tile, rounded up, at least 4. */
static void test_sddmm_split_ktiles(void) {
  splat_dev_run runs[4] = {{0, 1, 1, 0, 32, 0, 0, 0},
                           {0, 1, 1, 0, 6, 1, 0, 0},
                           {0, 1, 1, 0, 5, 1, 0, 0},
                           {0, 1, 1, 0, 1, 0, 0, 0}};
  /* A longformer-like plan: tiles of 32, 6 and 5 + 1 key tiles: 1.5 x 44 / 3 = 22. */
  splat_dev_tile tiles[3] = {{0, 64, 0, 1}, {64, 64, 1, 1}, {128, 64, 2, 2}};
  CHECKF(splat__sddmm_split_ktiles(tiles, 3, runs) == 22, "%d",
         splat__sddmm_split_ktiles(tiles, 3, runs));
  /* Short tiles: the floor of 4; no tiles: 4 too. */
  CHECK(splat__sddmm_split_ktiles(tiles + 2, 1, runs) == 9);
  splat_dev_tile small = {0, 64, 3, 1};
  CHECK(splat__sddmm_split_ktiles(&small, 1, runs) == 4);
  CHECK(splat__sddmm_split_ktiles(NULL, 0, runs) == 4);
}

/* ------------------------------------------------------------ NVRTC */

static const char *const ptxas_sample =
    "ptxas info    : 0 bytes gmem\n"
    "ptxas info    : Compiling entry function 'first_k' for 'sm_90a'\n"
    "ptxas info    : Function properties for first_k\n"
    "ptxas         .     16 bytes stack frame, 24 bytes spill stores, 8 bytes spill loads\n"
    "ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem\n"
    "ptxas info    : Compiling entry function 'second_k' for 'sm_90a'\n"
    "ptxas info    : Function properties for second_k\n"
    "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
    "ptxas info    : Used 40 registers, used 0 barriers\n";

static void test_ptxas_parse(void) {
  int regs = 0, spills = 0;
  CHECK(splat__ptxas_parse(ptxas_sample, "second_k", &regs, &spills) == SPLAT_OK);
  CHECK(regs == 40 && spills == 0);
  CHECK(splat__ptxas_parse(ptxas_sample, "first_k", &regs, &spills) == SPLAT_OK);
  CHECK(regs == 255 && spills == 32);
  CHECK(splat__ptxas_parse(ptxas_sample, NULL, &regs, NULL) == SPLAT_OK && regs == 255);
  splat__ptxas_stats s;
  CHECK(splat__ptxas_report(ptxas_sample, "first_k", &s) == SPLAT_OK);
  CHECK(s.registers == 255 && s.spill_stores == 24 && s.spill_loads == 8 && s.stack == 16 &&
        s.smem == 4096);
  CHECK(splat__ptxas_parse(ptxas_sample, "first", &regs, &spills) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(regs == -1 && spills == -1);
  CHECK(splat__ptxas_parse("", NULL, &regs, &spills) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__ptxas_parse(NULL, NULL, &regs, &spills) == SPLAT_ERR_INVALID_ARGUMENT);
}

static int have_nvrtc(void) {
  int major = 0, minor = 0;
  if (splat__nvrtc_version(&major, &minor) != SPLAT_OK) return 0;
  return major >= 12;
}

/* ---- the keys' NVRTC version from the disk cache's stamp (kernel_cache.h). Each check runs
 * in a child process: this one has not loaded NVRTC yet, so a child starts as a fresh
 * process would. A child returns 0 where its checks held, 77 without NVRTC, else the
 * number of the check that failed. */
#define STAMP_SRC "stamp test source"

static int in_child(int (*fn)(const char *dir), const char *dir) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("SPLAT_CACHE_DIR", dir, 1);
    _exit(fn(dir));
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

/* The stamp's path in dir (the one nvrtc-*.stamp there) into path; 0 when there is none. */
static int stamp_file(const char *dir, char *path, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  for (struct dirent *e; !found && (e = readdir(d));) {
    const size_t n = strlen(e->d_name);
    if (!strncmp(e->d_name, "nvrtc-", 6) && n > 6 && !strcmp(e->d_name + n - 6, ".stamp")) {
      snprintf(path, cap, "%s/%s", dir, e->d_name);
      found = 1;
    }
  }
  closedir(d);
  return found;
}

/* The key of STAMP_SRC as 32 hex digits into hex (0), or -1. */
static int stamp_key(char hex[33]) {
  splat__hash128 k;
  if (splat__kernel_cache_key(STAMP_SRC, "p", "sm_90a", &k) != SPLAT_OK) return -1;
  splat__hash_hex(k, hex);
  return 0;
}

/* The key dir/key.txt holds (written by child_load). */
static int saved_key(const char *dir, char hex[33]) {
  char path[4200];
  snprintf(path, sizeof path, "%s/key.txt", dir);
  FILE *f = fopen(path, "r");
  const int ok = f && fscanf(f, "%32s", hex) == 1;
  if (f) fclose(f);
  return ok ? 0 : -1;
}

/* A process with no stamp: NVRTC loaded as plan creation loads it (on a thread of its own,
 * the version unknown), then a key: the stamp is written. */
static int child_load(const char *dir) {
  char hex[33], path[4200];
  if (splat__kernel_cache_version_known()) return 1;
  splat__nvrtc_prefetch p;
  splat__nvrtc_prefetch_begin(&p);
  splat__nvrtc_prefetch_end(&p);
  if (stamp_key(hex) != 0) return 77;
  if (!splat__nvrtc_loaded()) return 2;
  if (!stamp_file(dir, path, sizeof path)) return 3;
  snprintf(path, sizeof path, "%s/key.txt", dir);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%s\n", hex) < 0) return 4;
  return fclose(f) == 0 ? 0 : 5;
}

/* A process with no stamp that computes a key: NVRTC is loaded then, and the stamp written. */
static int child_load_direct(const char *dir) {
  char hex[33], want[33], path[4200];
  if (splat__kernel_cache_version_known()) return 1;
  if (stamp_key(hex) != 0 || saved_key(dir, want) != 0 || strcmp(hex, want)) return 2;
  if (!splat__nvrtc_loaded()) return 3;
  return stamp_file(dir, path, sizeof path) ? 0 : 4;
}

/* A process with the stamp: the same key, NVRTC not loaded. */
static int child_stamped(const char *dir) {
  char hex[33], want[33];
  if (!splat__kernel_cache_version_known()) return 1;
  if (stamp_key(hex) != 0 || saved_key(dir, want) != 0) return 2;
  if (strcmp(hex, want)) return 3;
  return splat__nvrtc_loaded() ? 4 : 0;
}

/* A process whose stamp does not hold (damaged, another environment, a changed file). */
static int child_unknown(const char *dir) {
  (void)dir;
  if (splat__kernel_cache_version_known()) return 1;
  return splat__nvrtc_loaded() ? 2 : 0;
}

/* A process whose stamp names another version (12.3) of an unchanged file: that version's
 * key, NVRTC not loaded. */
static int child_other(const char *dir) {
  char hex[33], want[33];
  if (!splat__kernel_cache_version_known()) return 1;
  if (stamp_key(hex) != 0 || saved_key(dir, want) != 0) return 2;
  if (!strcmp(hex, want)) return 3;
  return splat__nvrtc_loaded() ? 4 : 0;
}

/* The same process compiling: NVRTC is loaded, its version is not the stamp's, so the
 * kernel is stored under the loaded version's key and the stamp rewritten. */
static int child_compile(const char *dir) {
  char kernel[64], hex[33], want[33], path[4200];
  char *src = smoke_source("stamp", 3, kernel, sizeof kernel);
  if (!src) return 1;
  splat__compiled c;
  splat__cache_hit hit;
  const splat_status st = splat__kernel_cache_get(src, "smoke_stamp.cu", "sm_90a", &c, &hit);
  if (st != SPLAT_OK) return 2;
  splat__compiled_free(&c);
  splat__hash128 k;
  if (hit != SPLAT__CACHE_COMPILED || !splat__nvrtc_loaded()) return 3;
  if (splat__kernel_cache_key(src, "smoke_stamp.cu", "sm_90a", &k) != SPLAT_OK) return 4;
  free(src);
  splat__hash_hex(k, hex);
  snprintf(path, sizeof path, "%s/%s.cubin", dir, hex);
  if (access(path, F_OK) != 0) return 5; /* stored under the loaded version's key */
  if (stamp_key(hex) != 0 || saved_key(dir, want) != 0 || strcmp(hex, want)) return 6;
  return 0;
}

/* Several threads compiling under a stale stamp: each kernel is stored under the key of the
 * NVRTC that compiled it (the loaded one), whichever thread loaded it. */
enum { STAMP_THREADS = 4 };
static void *compile_one(void *src) {
  splat__compiled c;
  splat__cache_hit hit;
  const splat_status st = splat__kernel_cache_get(src, "smoke_thread.cu", "sm_90a", &c, &hit);
  if (st == SPLAT_OK) splat__compiled_free(&c);
  return (void *)(intptr_t)(st == SPLAT_OK);
}

static int child_compile_threads(const char *dir) {
  char *src[STAMP_THREADS], kernel[64];
  for (int i = 0; i < STAMP_THREADS; i++) /* here: the harness's counters are not atomic */
    if (!(src[i] = smoke_source("thread", i + 10, kernel, sizeof kernel))) return 1;
  pthread_t t[STAMP_THREADS];
  for (int i = 0; i < STAMP_THREADS; i++)
    if (pthread_create(&t[i], NULL, compile_one, src[i]) != 0) return 1;
  int ok = 1;
  for (int i = 0; i < STAMP_THREADS; i++) {
    void *r = NULL;
    pthread_join(t[i], &r);
    ok &= r != NULL;
  }
  if (!ok || !splat__nvrtc_loaded()) return 2;
  for (int i = 0; i < STAMP_THREADS; i++) {
    char hex[33], path[4200];
    splat__hash128 k;
    if (splat__kernel_cache_key(src[i], "smoke_thread.cu", "sm_90a", &k) != SPLAT_OK) return 3;
    free(src[i]);
    splat__hash_hex(k, hex);
    snprintf(path, sizeof path, "%s/%s.cubin", dir, hex);
    if (access(path, F_OK) != 0) return 4 + i;
  }
  return 0;
}

/* A process that has mapped NVRTC itself (as torch may) under a stale stamp: the mapped
 * one's version, NVRTC not loaded by splat. */
static int child_mapped(const char *dir) {
  char hex[33], want[33];
  void *h = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) h = dlopen("/usr/local/cuda/lib64/libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!h) return 77;
  if (!splat__kernel_cache_version_known()) return 1;
  if (stamp_key(hex) != 0 || saved_key(dir, want) != 0 || strcmp(hex, want)) return 2;
  return splat__nvrtc_loaded() ? 3 : 0;
}

/* A stamp naming file with version major.minor, as kernel_cache.c writes one, over the
 * stamp at path. */
static int write_stamp(const char *path, const char *file, long major, long minor) {
  struct stat s;
  if (stat(file, &s) != 0) return -1;
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "splat nvrtc stamp 1\n%s\n%llu %llu %lld %lld.%09ld\n%ld %ld\n", file,
          (unsigned long long)s.st_dev, (unsigned long long)s.st_ino, (long long)s.st_size,
          (long long)s.st_mtim.tv_sec, (long)s.st_mtim.tv_nsec, major, minor);
  return fclose(f);
}

/* Runs first, before anything loads NVRTC in this process. */
static void test_nvrtc_stamp(const char *tmp) {
  char dir[4200], stamp[4200], saved[1400], fake[4200];
  snprintf(dir, sizeof dir, "%s/stamp", tmp);
  CHECK(mkdir(dir, 0755) == 0);
  int rc = in_child(child_load, dir);
  if (rc == 77) {
    skip("the NVRTC stamp", "no NVRTC");
    return;
  }
  CHECKF(rc == 0, "a process without a stamp: check %d", rc);
  CHECK(stamp_file(dir, stamp, sizeof stamp) && unlink(stamp) == 0);
  rc = in_child(child_load_direct, dir);
  CHECKF(rc == 0, "a process without a stamp, no prefetch: check %d", rc);
  CHECK(stamp_file(dir, stamp, sizeof stamp));
  rc = in_child(child_stamped, dir);
  CHECKF(rc == 0, "a process with the stamp: check %d", rc);
  rc = in_child(child_stamped, dir); /* twice: the stamp is read, not used up */
  CHECKF(rc == 0, "again: check %d", rc);
  /* Another environment of NVRTC's search: another stamp's name, none there. */
  const char *home = getenv("CUDA_HOME");
  char *cuda_home = home ? strdup(home) : NULL;
  setenv("CUDA_HOME", "/splat-test-no-such-dir", 1);
  rc = in_child(child_unknown, dir);
  CHECKF(rc == 0, "another CUDA_HOME: check %d", rc);
  if (cuda_home)
    setenv("CUDA_HOME", cuda_home, 1);
  else
    unsetenv("CUDA_HOME");
  free(cuda_home);
  /* Damaged: cut short, or another magic. */
  FILE *f = fopen(stamp, "r");
  const size_t n = f ? fread(saved, 1, sizeof saved - 1, f) : 0;
  if (f) fclose(f);
  saved[n] = '\0';
  CHECK(n > 20);
  const char *bad[] = {"splat nvrtc stamp 1\n", "splat nvrtc stamp 2\n/x\n1 2 3 4.5\n13 0\n", ""};
  for (int i = 0; i < 3; i++) {
    f = fopen(stamp, "w");
    CHECK(f && fputs(bad[i], f) >= 0 && fclose(f) == 0);
    rc = in_child(child_unknown, dir);
    CHECKF(rc == 0, "damaged stamp %d: check %d", i, rc);
  }
  /* Another version of a file that stays the same, then of a file that changed. */
  snprintf(fake, sizeof fake, "%s/libnvrtc-fake.so", tmp);
  f = fopen(fake, "w");
  CHECK(f && fputs("not a library", f) >= 0 && fclose(f) == 0);
  CHECK(write_stamp(stamp, fake, 12, 3) == 0);
  rc = in_child(child_other, dir);
  CHECKF(rc == 0, "a stamp of 12.3: check %d", rc);
  /* Versions no key names; a directory as the file. */
  const long versions[][2] = {{2147483647, 0}, {99999999999, 0}, {13, 100}, {0, 0}, {13, -1}};
  for (int i = 0; i < 5; i++) {
    CHECK(write_stamp(stamp, fake, versions[i][0], versions[i][1]) == 0);
    rc = in_child(child_unknown, dir);
    CHECKF(rc == 0, "a stamp of version %ld %ld: check %d", versions[i][0], versions[i][1], rc);
  }
  CHECK(write_stamp(stamp, tmp, 13, 0) == 0);
  rc = in_child(child_unknown, dir);
  CHECKF(rc == 0, "a stamp naming a directory: check %d", rc);
  /* An NVRTC the process mapped itself wins over a stale stamp. */
  CHECK(write_stamp(stamp, fake, 12, 3) == 0);
  rc = in_child(child_mapped, dir);
  CHECKF(rc == 0 || rc == 77, "an NVRTC mapped beside a stale stamp: check %d", rc);
  f = fopen(fake, "a");
  CHECK(f && fputs("!", f) >= 0 && fclose(f) == 0); /* its size changes */
  rc = in_child(child_unknown, dir);
  CHECKF(rc == 0, "a stamp whose file changed: check %d", rc);
  /* A FIFO in the stamp's place is not read (it would block). */
  CHECK(unlink(stamp) == 0 && mkfifo(stamp, 0644) == 0);
  rc = in_child(child_unknown, dir);
  CHECKF(rc == 0, "a FIFO as the stamp: check %d", rc);
  CHECK(unlink(stamp) == 0);
  /* A stale stamp (12.3 of an unchanged file) and a compile: the loaded version wins. */
  CHECK(write_stamp(stamp, fake, 12, 3) == 0);
  rc = in_child(child_compile, dir);
  CHECKF(rc == 0, "a compile under a stale stamp: check %d", rc);
  CHECK(write_stamp(stamp, fake, 12, 3) == 0);
  rc = in_child(child_compile_threads, dir);
  CHECKF(rc == 0, "%d threads compiling under a stale stamp: check %d", STAMP_THREADS, rc);
  rc = in_child(child_stamped, dir);
  CHECKF(rc == 0, "the rewritten stamp: check %d", rc);
  /* `splat cache clear` removes stamps too. */
  setenv("SPLAT_CACHE_DIR", dir, 1);
  int64_t removed = 0;
  CHECK(splat__cache_clear(&removed) == SPLAT_OK && removed >= 2 &&
        !stamp_file(dir, stamp, sizeof stamp));
  unsetenv("SPLAT_CACHE_DIR");
  CHECK(!splat__nvrtc_loaded()); /* all of it in the children */
}

/* NVRTC loaded on a thread of its own (plan creation overlaps its dlopen): the thread runs
 * the one load, after which no thread starts; a caller then gets the version, or, where NVRTC
 * is missing, the loader's sentence on its own thread. Runs first, before anything else
 * loads NVRTC (a machine that can start no thread would fail the first check). */
static void test_nvrtc_prefetch(void) {
  splat__nvrtc_prefetch p;
  splat__nvrtc_prefetch_begin(&p);
  CHECK(p.started); /* nothing loaded NVRTC yet in this process */
  splat__nvrtc_prefetch_end(&p);
  CHECK(!p.started);
  splat__nvrtc_prefetch_begin(&p); /* loaded (or found missing): nothing to start */
  CHECK(!p.started);
  splat__nvrtc_prefetch_end(&p);
  int major = -1;
  const splat_status st = splat__nvrtc_version(&major, NULL);
  CHECKF(st == SPLAT_OK ? major > 0
                        : major == 0 && strstr(splat__thread_error(), "NVRTC is not available"),
         "status %d, major %d, '%s'", (int)st, major, st == SPLAT_OK ? "" : splat__thread_error());
}

static void test_nvrtc(void) {
  if (!have_nvrtc()) {
    skip("NVRTC compiles", splat__thread_error());
    return;
  }
  char kernel[64];
  char *src = smoke_source("nv", 7, kernel, sizeof kernel);
  if (!src) return;
  const char *archs[] = {"sm_90a", "sm_80"};
  for (int a = 0; a < 2; a++) {
    splat__compiled c;
    double t0 = splat__now_ms();
    splat_status st = splat__nvrtc_compile(src, "smoke_nv.cu", archs[a], &c);
    double ms = splat__now_ms() - t0;
    CHECKF(st == SPLAT_OK, "%s: %s", archs[a], splat__thread_error());
    if (st != SPLAT_OK) continue;
    printf("cold NVRTC compile of smoke.cuh for %s: %.1f ms, %zu-byte cubin\n", archs[a], ms,
           c.cubin_size);
    CHECK(c.cubin_size > 64 && !memcmp(c.cubin,
                                       "\x7f"
                                       "ELF",
                                       4));
    CHECK(c.ptx == NULL && c.log != NULL);
    int regs = -1, spills = -1;
    CHECKF(splat__ptxas_parse(c.log, kernel, &regs, &spills) == SPLAT_OK, "%s\nlog:\n%s",
           splat__thread_error(), c.log);
    CHECKF(regs > 0 && regs < 64 && spills == 0, "regs %d spills %d", regs, spills);
    char want[96];
    snprintf(want, sizeof want, "for '%s'", archs[a]);
    CHECK(strstr(c.log, want) != NULL);
    splat__compiled_free(&c);
    CHECK(c.cubin == NULL && c.log == NULL);
  }
  char *ptx = NULL;
  CHECK(splat__nvrtc_ptx(src, "smoke_nv.cu", "sm_90a", &ptx) == SPLAT_OK);
  CHECK(ptx && strstr(ptx, ".target sm_90a") && strstr(ptx, kernel));
  free(ptx);
  free(src);

  /* A compile error: SPLAT_ERR_COMPILE with NVRTC's diagnostic in the message. */
  splat__compiled c;
  const char *bad =
      "extern \"C\" __global__ void k(int *o) {\n  o[0] = splat_undefined_thing;\n}\n";
  CHECK(splat__nvrtc_compile(bad, "bad.cu", "sm_90a", &c) == SPLAT_ERR_COMPILE);
  const char *msg = splat__thread_error();
  CHECKF(strstr(msg, "bad.cu") && strstr(msg, "sm_90a") &&
             strstr(msg, "identifier \"splat_undefined_thing\" is undefined"),
         "'%s'", msg);
  CHECK(c.cubin == NULL && c.log == NULL);
  /* Arch strings are checked before NVRTC sees them. */
  CHECK(splat__nvrtc_compile("", "x.cu", "sm_9", &c) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__nvrtc_compile("", "x.cu", "sm_90 -G", &c) == SPLAT_ERR_INVALID_ARGUMENT);
  CHECK(splat__nvrtc_compile("", "x.cu", "compute_90", &c) == SPLAT_ERR_INVALID_ARGUMENT);
  /* An arch NVRTC does not know. */
  CHECK(splat__nvrtc_compile("", "x.cu", "sm_12", &c) == SPLAT_ERR_UNSUPPORTED);
}

/* ------------------------------------------------------------ the cache */

typedef struct listing {
  int n, valid;
  char program[128], arch[16], key[33];
  int64_t cubin_bytes;
} listing;

static int collect(const splat__cache_entry *e, void *user) {
  listing *l = user;
  l->n++;
  l->valid += e->valid;
  snprintf(l->program, sizeof l->program, "%s", e->program);
  snprintf(l->arch, sizeof l->arch, "%s", e->arch);
  snprintf(l->key, sizeof l->key, "%s", e->key);
  l->cubin_bytes = e->cubin_bytes;
  return 0;
}

static listing list_cache(void) {
  listing l;
  memset(&l, 0, sizeof l);
  int64_t count = -1;
  CHECK(splat__cache_list(collect, &l, &count) == SPLAT_OK);
  CHECK(count == l.n);
  return l;
}

/* Same CUBIN (logs differ between compiles: ptxas reports its compile time). */
static int same(const splat__compiled *a, const splat__compiled *b) {
  return a->cubin_size == b->cubin_size && !memcmp(a->cubin, b->cubin, a->cubin_size);
}

/* The disk entry of src is valid: a fresh memory cache reads it back. */
static int disk_hit(const char *src, const char *name, const char *arch,
                    const splat__compiled *want) {
  splat__kernel_cache_drop_memory();
  splat__compiled c;
  splat__cache_hit hit = SPLAT__CACHE_COMPILED;
  if (splat__kernel_cache_get(src, name, arch, &c, &hit) != SPLAT_OK) return 0;
  int ok = hit == SPLAT__CACHE_DISK && same(&c, want);
  splat__compiled_free(&c);
  return ok;
}

static void test_cache_dir_env(const char *tmp) {
  char saved_cache[1024] = "", saved_xdg[1024] = "", saved_home[1024] = "";
  const char *v;
  int had_cache = (v = getenv("SPLAT_CACHE_DIR")) != NULL;
  if (had_cache) snprintf(saved_cache, sizeof saved_cache, "%s", v);
  int had_xdg = (v = getenv("XDG_CACHE_HOME")) != NULL;
  if (had_xdg) snprintf(saved_xdg, sizeof saved_xdg, "%s", v);
  int had_home = (v = getenv("HOME")) != NULL;
  if (had_home) snprintf(saved_home, sizeof saved_home, "%s", v);

  char buf[1024], want[1100];
  setenv("SPLAT_CACHE_DIR", tmp, 1);
  CHECK(splat__cache_dir(buf, sizeof buf) == SPLAT_OK && !strcmp(buf, tmp));
  unsetenv("SPLAT_CACHE_DIR");
  setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
  CHECK(splat__cache_dir(buf, sizeof buf) == SPLAT_OK && !strcmp(buf, "/xdg/cache/splat"));
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", "/home/someone", 1);
  CHECK(splat__cache_dir(buf, sizeof buf) == SPLAT_OK &&
        !strcmp(buf, "/home/someone/.cache/splat"));
  CHECK(splat__cache_dir(buf, 8) == SPLAT_ERR_INVALID_ARGUMENT);
  unsetenv("HOME");
  CHECK(splat__cache_dir(buf, sizeof buf) == SPLAT_ERR_IO);
  snprintf(want, sizeof want, "%s/", tmp);
  setenv("SPLAT_CACHE_DIR", want, 1);
  CHECK(splat__cache_dir(buf, sizeof buf) == SPLAT_OK && !strcmp(buf, tmp));

  if (had_home) setenv("HOME", saved_home, 1);
  if (had_xdg) setenv("XDG_CACHE_HOME", saved_xdg, 1);
  if (had_cache) {
    setenv("SPLAT_CACHE_DIR", saved_cache, 1);
  } else {
    unsetenv("SPLAT_CACHE_DIR");
  }
}

static void cache_path(const char *dir, const char *src, const char *name, const char *arch,
                       char *path, size_t cap) {
  splat__hash128 key;
  CHECK(splat__kernel_cache_key(src, name, arch, &key) == SPLAT_OK);
  char hex[33];
  splat__hash_hex(key, hex);
  snprintf(path, cap, "%s/%s.cubin", dir, hex);
}

static void test_cache(const char *tmp) {
  test_cache_dir_env(tmp);
  if (!have_nvrtc()) {
    skip("kernel cache", splat__thread_error());
    return;
  }
  char dir[800], path[900];
  snprintf(dir, sizeof dir, "%s/cache/nested", tmp); /* created on first store */
  setenv("SPLAT_CACHE_DIR", dir, 1);
  splat__kernel_cache_drop_memory();
  listing l = list_cache();
  CHECK(l.n == 0); /* a missing directory lists nothing */
  int64_t removed = -1;
  CHECK(splat__cache_clear(&removed) == SPLAT_OK && removed == 0);

  char kernel[64];
  char *src = smoke_source("cache", 11, kernel, sizeof kernel);
  if (!src) return;
  const char *name = "smoke_cache.cu";
  cache_path(dir, src, name, "sm_90a", path, sizeof path);

  splat__compiled cold, warm, disk;
  splat__cache_hit hit = SPLAT__CACHE_DISK;
  double t0 = splat__now_ms();
  CHECKF(splat__kernel_cache_get(src, name, "sm_90a", &cold, &hit) == SPLAT_OK, "%s",
         splat__thread_error());
  double cold_ms = splat__now_ms() - t0;
  CHECK(hit == SPLAT__CACHE_COMPILED);
  CHECK(cold.cubin_size > 0 && cold.compile_ms > 0);
  CHECK(access(path, R_OK) == 0);

  t0 = splat__now_ms();
  CHECK(splat__kernel_cache_get(src, name, "sm_90a", &warm, &hit) == SPLAT_OK);
  double mem_ms = splat__now_ms() - t0;
  CHECK(hit == SPLAT__CACHE_MEMORY && same(&cold, &warm));
  splat__compiled_free(&warm);

  splat__kernel_cache_drop_memory();
  t0 = splat__now_ms();
  CHECK(splat__kernel_cache_get(src, name, "sm_90a", &disk, &hit) == SPLAT_OK);
  double disk_ms = splat__now_ms() - t0;
  CHECK(hit == SPLAT__CACHE_DISK && same(&cold, &disk));
  CHECK(disk.compile_ms == 0);
  int regs = -1, spills = -1;
  CHECK(splat__ptxas_parse(disk.log, kernel, &regs, &spills) == SPLAT_OK && regs > 0);
  CHECK(!strcmp(disk.log, cold.log));
  splat__compiled_free(&disk);
  printf("kernel cache (smoke, sm_90a): compiled %.1f ms, memory hit %.3f ms, disk hit %.3f ms\n",
         cold_ms, mem_ms, disk_ms);

  /* The same source for another arch is another key. */
  CHECK(splat__kernel_cache_get(src, name, "sm_80", &warm, &hit) == SPLAT_OK);
  CHECK(hit == SPLAT__CACHE_COMPILED && !same(&cold, &warm));
  splat__compiled_free(&warm);

  l = list_cache();
  CHECK(l.n == 2 && l.valid == 2 && !strcmp(l.program, name));
  CHECK(!strcmp(l.arch, "sm_90a") || !strcmp(l.arch, "sm_80"));

  /* A corrupted file is ignored, recompiled and replaced. */
  size_t size = 0;
  unsigned char *bytes = read_file(path, &size);
  CHECK(bytes != NULL && size > 200);
  if (bytes) {
    bytes[size / 2] ^= 0x40;
    CHECK(write_file(path, bytes, size) == 0);
    splat__kernel_cache_drop_memory();
    CHECK(splat__kernel_cache_get(src, name, "sm_90a", &warm, &hit) == SPLAT_OK);
    CHECK(hit == SPLAT__CACHE_COMPILED && same(&cold, &warm));
    splat__compiled_free(&warm);
    CHECK(disk_hit(src, name, "sm_90a", &cold)); /* rewritten */
    bytes[size / 2] ^= 0x40;
    /* Truncated: the same. */
    CHECK(write_file(path, bytes, size - 10) == 0);
    splat__kernel_cache_drop_memory();
    CHECK(splat__kernel_cache_get(src, name, "sm_90a", &warm, &hit) == SPLAT_OK);
    CHECK(hit == SPLAT__CACHE_COMPILED && same(&cold, &warm));
    splat__compiled_free(&warm);
    CHECK(disk_hit(src, name, "sm_90a", &cold));
    /* Another key's file under this key's name: ignored. */
    char other[900];
    cache_path(dir, src, name, "sm_80", other, sizeof other);
    size_t osize = 0;
    unsigned char *obytes = read_file(other, &osize);
    CHECK(obytes && write_file(path, obytes, osize) == 0);
    splat__kernel_cache_drop_memory();
    CHECK(splat__kernel_cache_get(src, name, "sm_90a", &warm, &hit) == SPLAT_OK);
    CHECK(hit == SPLAT__CACHE_COMPILED && same(&cold, &warm));
    splat__compiled_free(&warm);
    free(obytes);
    /* Garbage is listed as invalid. */
    char junk[900];
    snprintf(junk, sizeof junk, "%s/0123456789abcdef0123456789abcdef.cubin", dir);
    CHECK(write_file(junk, "not a cache file", 16) == 0);
    snprintf(junk, sizeof junk, "%s/.tmp-leftover-XXXXXX", dir);
    CHECK(write_file(junk, "x", 1) == 0);
    snprintf(junk, sizeof junk, "%s/unrelated.txt", dir);
    CHECK(write_file(junk, "keep me", 7) == 0);
    l = list_cache();
    CHECK(l.n == 3 && l.valid == 2);
    char stamp[4200]; /* an NVRTC stamp, where a key of this process wrote one here */
    const int stamped = stamp_file(dir, stamp, sizeof stamp);
    CHECK(splat__cache_clear(&removed) == SPLAT_OK);
    CHECK(removed == 3 + stamped && !stamp_file(dir, stamp, sizeof stamp));
    l = list_cache();
    CHECK(l.n == 0);
    CHECK(access(junk, R_OK) == 0); /* clear removes only cache files */
    free(bytes);
  }

  /* A cache directory that cannot be created: compiles still succeed. */
  char file_as_dir[700];
  snprintf(file_as_dir, sizeof file_as_dir, "%s/a-file", tmp);
  CHECK(write_file(file_as_dir, "x", 1) == 0);
  snprintf(dir, sizeof dir, "%s/sub", file_as_dir);
  setenv("SPLAT_CACHE_DIR", dir, 1);
  splat__kernel_cache_drop_memory();
  CHECK(splat__kernel_cache_get(src, name, "sm_90a", &warm, &hit) == SPLAT_OK);
  CHECK(hit == SPLAT__CACHE_COMPILED && same(&cold, &warm));
  splat__compiled_free(&warm);
  CHECK(splat__kernel_cache_get(src, name, "sm_90a", &warm, &hit) == SPLAT_OK);
  CHECK(hit == SPLAT__CACHE_MEMORY);
  splat__compiled_free(&warm);

  /* A compile error is not cached. */
  snprintf(dir, sizeof dir, "%s/cache2", tmp);
  setenv("SPLAT_CACHE_DIR", dir, 1);
  CHECK(splat__kernel_cache_get("this is not CUDA", "bad.cu", "sm_90a", &warm, &hit) ==
        SPLAT_ERR_COMPILE);
  CHECK(warm.cubin == NULL);
  CHECK(splat__kernel_cache_get("this is not CUDA", "bad.cu", "sm_90a", &warm, &hit) ==
        SPLAT_ERR_COMPILE);
  l = list_cache();
  CHECK(l.n == 0);
  splat__compiled_free(&cold);
  free(src);
}

/* Four processes compile the same new key at once: all succeed, with identical bytes,
 * and the file left behind is valid. */
static void test_cache_concurrent(const char *tmp) {
  if (!have_nvrtc()) {
    skip("concurrent cache writers", splat__thread_error());
    return;
  }
  char dir[512];
  snprintf(dir, sizeof dir, "%s/concurrent", tmp);
  setenv("SPLAT_CACHE_DIR", dir, 1);
  char kernel[64];
  char *src = smoke_source("fork", 99, kernel, sizeof kernel);
  if (!src) return;
  enum { NPROC = 4 };
  int gate[2];
  CHECK(pipe(gate) == 0);
  fflush(stdout);
  fflush(stderr);
  pid_t pids[NPROC];
  for (int i = 0; i < NPROC; i++) {
    pids[i] = fork();
    if (pids[i] == 0) {
      close(gate[1]);
      char c;
      while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      splat__kernel_cache_drop_memory();
      splat__compiled out;
      splat__cache_hit hit;
      if (splat__kernel_cache_get(src, "smoke_fork.cu", "sm_90a", &out, &hit) != SPLAT_OK) _exit(2);
      char path[700];
      snprintf(path, sizeof path, "%s/../child-%d.bin", dir, i);
      if (write_file(path, out.cubin, out.cubin_size) != 0) _exit(3);
      _exit(hit == SPLAT__CACHE_MEMORY ? 4 : 0);
    }
    CHECK(pids[i] > 0);
  }
  close(gate[0]);
  close(gate[1]); /* releases every child at once */
  for (int i = 0; i < NPROC; i++) {
    int status = 0;
    if (pids[i] <= 0) continue;
    CHECK(waitpid(pids[i], &status, 0) == pids[i]);
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d status %d", i, status);
  }
  size_t n0 = 0;
  char path[700];
  snprintf(path, sizeof path, "%s/child-0.bin", tmp);
  unsigned char *first = read_file(path, &n0);
  CHECK(first != NULL && n0 > 0);
  for (int i = 1; i < NPROC && first; i++) {
    size_t n = 0;
    snprintf(path, sizeof path, "%s/child-%d.bin", tmp, i);
    unsigned char *other = read_file(path, &n);
    CHECKF(other && n == n0 && !memcmp(other, first, n0), "child %d's cubin differs", i);
    free(other);
  }
  listing l = list_cache();
  CHECK(l.n == 1 && l.valid == 1);
  {
    /* No temporary file is left behind. */
    int64_t removed = 0;
    CHECK(splat__cache_clear(&removed) == SPLAT_OK && removed == 1);
  }
  /* The parent sees the same bytes (from memory or a fresh compile). */
  splat__compiled mine;
  if (first && splat__kernel_cache_get(src, "smoke_fork.cu", "sm_90a", &mine, NULL) == SPLAT_OK) {
    CHECK(mine.cubin_size == n0 && !memcmp(mine.cubin, first, n0));
    splat__compiled_free(&mine);
  }
  free(first);
  free(src);
}

/* ------------------------------------------------------------ dumps */

static void test_dump(const char *tmp) {
  if (!have_nvrtc()) {
    skip("SPLAT_DUMP_DIR", splat__thread_error());
    return;
  }
  char dir[512], cache[512];
  snprintf(dir, sizeof dir, "%s/dump", tmp);
  snprintf(cache, sizeof cache, "%s/dump-cache", tmp);
  setenv("SPLAT_DUMP_DIR", dir, 1);
  setenv("SPLAT_CACHE_DIR", cache, 1);
  char kernel[64];
  char *src = smoke_source("dump", 5, kernel, sizeof kernel);
  if (!src) return;
  splat__compiled c;
  splat__cache_hit hit;
  CHECK(splat__kernel_cache_get(src, "smoke_dump.cu", "sm_90a", &c, &hit) == SPLAT_OK);
  CHECK(hit == SPLAT__CACHE_COMPILED);
  CHECK(c.ptx != NULL && strstr(c.ptx, kernel) != NULL);
  splat__compiled_free(&c);
  splat__hash128 key;
  CHECK(splat__kernel_cache_key(src, "smoke_dump.cu", "sm_90a", &key) == SPLAT_OK);
  char hex[33];
  splat__hash_hex(key, hex);
  const char *exts[] = {".cu", ".ptx", ".log"};
  for (int i = 0; i < 3; i++) {
    char path[700];
    snprintf(path, sizeof path, "%s/smoke_dump-%.16s%s", dir, hex, exts[i]);
    unsigned char *text = read_file(path, NULL);
    CHECKF(text != NULL, "%s missing", path);
    if (!text) continue;
    if (i == 0) CHECK(!strcmp((char *)text, src));
    if (i == 1) CHECK(strstr((char *)text, ".entry") != NULL);
    if (i == 2) CHECK(strstr((char *)text, "Used ") != NULL);
    free(text);
  }
  unsetenv("SPLAT_DUMP_DIR");
  free(src);
}

/* ------------------------------------------------------------ with a GPU */

static void test_gpu(void) {
  const splat__cuda_api_table *cu = NULL;
  if (splat__cuda_api(&cu) != SPLAT_OK) {
    skip("GPU launch", splat__thread_error());
    return;
  }
  if (!have_nvrtc()) {
    skip("GPU launch", "NVRTC is not available");
    return;
  }
  splat__cuda_device dev;
  CHECKF(splat__cuda_device_open(0, &dev) == SPLAT_OK, "%s", splat__thread_error());
  if (!dev.context) return;
  printf("device 0: %s, %s, %d SMs, %d bytes shared/block opt-in\n", dev.name, dev.arch,
         dev.sm_count, dev.max_smem_per_block_optin);
  CHECK(dev.sm_count > 0 && dev.max_smem_per_block_optin >= dev.max_smem_per_block);
  char kernel[64];
  char *src = smoke_source("gpu", 1000, kernel, sizeof kernel);
  splat__compiled c;
  memset(&c, 0, sizeof c);
  CHECKF(src && splat__kernel_cache_get(src, "smoke_gpu.cu", dev.arch, &c, NULL) == SPLAT_OK, "%s",
         splat__thread_error());
  if (c.cubin && splat__cuda_push(&dev) == SPLAT_OK) {
    CUmodule mod = NULL;
    CUfunction fn = NULL;
    CUdeviceptr d = 0;
    const int64_t n = 1000;
    int32_t host[1000];
    CHECK(splat__cuda_check(cu->cuModuleLoadData(&mod, c.cubin), "cuModuleLoadData") == SPLAT_OK);
    CHECK(mod && splat__cuda_check(cu->cuModuleGetFunction(&fn, mod, kernel),
                                   "cuModuleGetFunction") == SPLAT_OK);
    int regs = -1, ptxas_regs = -2;
    if (fn) {
      CHECK(cu->cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn) == CUDA_SUCCESS);
      splat__ptxas_parse(c.log, kernel, &ptxas_regs, NULL);
      CHECKF(regs == ptxas_regs, "driver %d registers, ptxas %d", regs, ptxas_regs);
    }
    CHECK(splat__cuda_check(cu->cuMemAlloc(&d, sizeof host), "cuMemAlloc") == SPLAT_OK);
    if (fn && d) {
      CHECK(cu->cuMemsetD8Async(d, 0xff, sizeof host, NULL) == CUDA_SUCCESS);
      int64_t count = n;
      void *params[] = {&d, &count};
      CHECK(splat__cuda_check(cu->cuLaunchKernel(fn, (unsigned)((n + 127) / 128), 1, 1, 128, 1, 1,
                                                 0, NULL, params, NULL),
                              "cuLaunchKernel") == SPLAT_OK);
      CHECK(cu->cuStreamSynchronize(NULL) == CUDA_SUCCESS);
      CHECK(cu->cuMemcpyDtoH(host, d, sizeof host) == CUDA_SUCCESS);
      int ok = 1;
      for (int64_t i = 0; i < n; i++) ok &= host[i] == 1000 + i;
      CHECK(ok);
    }
    if (d) cu->cuMemFree(d);
    if (mod) cu->cuModuleUnload(mod);
    CHECK(splat__cuda_pop() == SPLAT_OK);
  }
  splat__compiled_free(&c);
  free(src);
  splat__cuda_device_close(&dev);
  CHECK(dev.context == NULL);
}

/* ------------------------------------------------------------ programmatic launches */

/* splat__cuda_pdl_allowed against fakes: the attribute only where the driver takes it, and
 * never on a stream an older driver is capturing (or cannot say it is not). */
static int fake_capture_status, fake_capture_rc, fake_capture_calls;
static CUstream fake_capture_stream;
static CUresult fake_is_capturing(CUstream stream, int *status) {
  fake_capture_calls++;
  fake_capture_stream = stream;
  *status = fake_capture_status;
  return fake_capture_rc;
}
static CUresult fake_launch_ex(const splat__cu_launch_config *config, CUfunction func,
                               void **params, void **extra) {
  (void)config, (void)func, (void)params, (void)extra;
  return CUDA_SUCCESS;
}

static void test_pdl_allowed(void) {
  splat__cuda_api_table t;
  memset(&t, 0, sizeof t);
  CUstream s = (CUstream)(uintptr_t)0x9100;
  t.driver_version = 13000;
  t.cuStreamIsCapturing = fake_is_capturing;
  CHECK(!splat__cuda_pdl_allowed(&t, s)); /* no cuLaunchKernelEx */
  t.cuLaunchKernelEx = fake_launch_ex;
  fake_capture_status = 1; /* capturing */
  fake_capture_calls = 0;
  CHECK(splat__cuda_pdl_allowed(&t, s) && fake_capture_calls == 0); /* 12.3+: graphs take it */
  t.driver_version = 12030;
  CHECK(splat__cuda_pdl_allowed(&t, s));
  t.driver_version = 12020;
  CHECK(!splat__cuda_pdl_allowed(&t, s) && fake_capture_calls == 1 && fake_capture_stream == s);
  fake_capture_status = 0; /* not capturing */
  CHECK(splat__cuda_pdl_allowed(&t, s));
  fake_capture_rc = CUDA_ERROR_INVALID_VALUE; /* cannot say */
  CHECK(!splat__cuda_pdl_allowed(&t, s));
  fake_capture_rc = CUDA_SUCCESS;
  t.cuStreamIsCapturing = NULL;
  CHECK(!splat__cuda_pdl_allowed(&t, s));
}

/* ------------------------------------------------------------ workspace pool */

/* workspace.c against a driver table of fakes: what it asks the driver for, and the
 * contexts it leaves without a pool. */
static struct {
  int creates, destroys, trims, allocs, frees;
  int fail_create, fail_set, fail_alloc;
  splat__cu_mem_pool_props props;
  int attr;
  uint64_t threshold;
  size_t bytes, keep;
  CUmemoryPool pool;
  CUstream stream;
  CUdeviceptr freed;
} fk;
#define FAKE_POOL ((CUmemoryPool)(uintptr_t)0x5000)
#define FAKE_PTR ((CUdeviceptr)0x7000)
static CUresult fk_create(CUmemoryPool *pool, const splat__cu_mem_pool_props *props) {
  fk.creates++;
  fk.props = *props;
  if (fk.fail_create) return CUDA_ERROR_INVALID_VALUE;
  *pool = FAKE_POOL;
  return CUDA_SUCCESS;
}
static CUresult fk_destroy(CUmemoryPool pool) {
  fk.destroys += pool == FAKE_POOL;
  return CUDA_SUCCESS;
}
static CUresult fk_set(CUmemoryPool pool, int attribute, void *value) {
  (void)pool;
  fk.attr = attribute;
  memcpy(&fk.threshold, value, sizeof fk.threshold);
  return fk.fail_set ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static CUresult fk_trim(CUmemoryPool pool, size_t keep) {
  fk.trims += pool == FAKE_POOL;
  fk.keep = keep;
  return CUDA_SUCCESS;
}
static CUresult fk_alloc(CUdeviceptr *ptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
  fk.allocs++;
  fk.bytes = bytes, fk.pool = pool, fk.stream = stream;
  if (fk.fail_alloc) return CUDA_ERROR_OUT_OF_MEMORY;
  *ptr = FAKE_PTR;
  return CUDA_SUCCESS;
}
static CUresult fk_free(CUdeviceptr ptr, CUstream stream) {
  fk.frees++;
  fk.freed = ptr, fk.stream = stream;
  return CUDA_SUCCESS;
}

static void test_workspace_pool(void) {
  splat__cuda_api_table t;
  memset(&t, 0, sizeof t);
  t.cuMemPoolCreate = fk_create, t.cuMemPoolDestroy = fk_destroy;
  t.cuMemPoolSetAttribute = fk_set, t.cuMemPoolTrimTo = fk_trim;
  t.cuMemAllocFromPoolAsync = fk_alloc, t.cuMemFreeAsync = fk_free;
  splat__cuda_device dev;
  memset(&dev, 0, sizeof dev);
  dev.ordinal = 3;
  CUmemoryPool pool = FAKE_POOL;
  /* No pool where the device serves none, the driver lacks a function, or it refuses one
   * (a created pool whose threshold is refused is destroyed): SPLAT_OK each time. */
  memset(&fk, 0, sizeof fk);
  CHECK(splat__workspace_pool_create(&t, &dev, &pool) == SPLAT_OK && !pool && !fk.creates);
  dev.memory_pools = 1;
  splat__cuda_api_table lacking = t;
  lacking.cuMemFreeAsync = NULL;
  CHECK(splat__workspace_pool_create(&lacking, &dev, &pool) == SPLAT_OK && !pool && !fk.creates);
  fk.fail_create = 1;
  CHECK(splat__workspace_pool_create(&t, &dev, &pool) == SPLAT_OK && !pool && fk.creates == 1);
  fk.fail_create = 0, fk.fail_set = 1;
  CHECK(splat__workspace_pool_create(&t, &dev, &pool) == SPLAT_OK && !pool && fk.destroys == 1);
  /* A pool of pinned device memory on the device, no export handle, keeping what it serves. */
  memset(&fk, 0, sizeof fk);
  CHECK(splat__workspace_pool_create(&t, &dev, &pool) == SPLAT_OK && pool == FAKE_POOL);
  CHECK(fk.props.alloc_type == CU_MEM_ALLOCATION_TYPE_PINNED &&
        fk.props.handle_types == CU_MEM_HANDLE_TYPE_NONE &&
        fk.props.location_type == CU_MEM_LOCATION_TYPE_DEVICE && fk.props.location_id == 3 &&
        !fk.props.win32_security_attributes && !fk.props.max_size);
  CHECK(fk.attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD && fk.threshold == UINT64_MAX);
  /* A call's workspace: the bytes from the pool on the call's stream, given back there. */
  CUstream s = (CUstream)(uintptr_t)0x9000;
  CUdeviceptr ptr = 0;
  CHECK(splat__workspace_take(&t, pool, (size_t)160 << 20, "hint", s, &ptr) == SPLAT_OK);
  CHECK(ptr == FAKE_PTR && fk.bytes == (size_t)160 << 20 && fk.pool == pool && fk.stream == s);
  CHECK(splat__workspace_give(&t, ptr, s) == SPLAT_OK && fk.frees == 1 && fk.freed == ptr);
  CHECK(splat__workspace_give(&t, 0, s) == SPLAT_OK && fk.frees == 1); /* nothing taken */
  /* Out of memory: the call's status, naming the bytes and the way out; nothing taken. */
  fk.fail_alloc = 1;
  ptr = FAKE_PTR;
  CHECK(splat__workspace_take(&t, pool, (size_t)3 << 30, "SPLAT_ATTN_PASSES=0 runs one pass", s,
                              &ptr) == SPLAT_ERR_OUT_OF_MEMORY &&
        ptr == 0);
  const char *msg = splat_last_error(NULL);
  CHECKF(strstr(msg, "splat_attention") && strstr(msg, "3072.0 MiB of workspace") &&
             strstr(msg, "SPLAT_ATTN_PASSES=0 runs one pass"),
         "%s", msg);
  /* Trimmed to nothing kept (a plan with a workspace destroyed); no pool, no call. */
  splat__workspace_pool_trim(&t, pool);
  splat__workspace_pool_trim(&t, NULL);
  CHECK(fk.trims == 1 && fk.keep == 0);
  splat__workspace_pool_destroy(&t, pool);
  splat__workspace_pool_destroy(&t, NULL);
  CHECK(fk.destroys == 1);
}

int main(void) {
  char tmp[] = "/tmp/splat-test-cuda-XXXXXX";
  if (!mkdtemp(tmp)) {
    fprintf(stderr, "mkdtemp failed: %s\n", strerror(errno));
    return 1;
  }
  unsetenv("SPLAT_DUMP_DIR");
  double t0 = splat__now_ms();
  test_nvrtc_stamp(tmp);
  test_nvrtc_prefetch();
  test_driver();
  test_hash();
  test_codegen();
  test_kernel_choice();
  test_attn_passes();
  test_attn_pass_rows();
  test_attn_passes_ahead();
  test_attn_epilogues();
  test_kernel_programs();
  test_tma_views();
  test_tma_view_keys();
  test_tma_serves_plan();
  test_tile_rows();
  test_tile_tail();
  test_tma_q_view();
  test_ws_tables();
  test_workspace_pool();
  test_pdl_allowed();
  test_tile_split();
  test_sddmm_split_ktiles();
  test_ptxas_parse();
  test_nvrtc();
  test_cache(tmp);
  test_cache_concurrent(tmp);
  test_dump(tmp);
  test_gpu();
  rm_rf(tmp);
  printf("%.0f ms, %d skipped\n", splat__now_ms() - t0, skipped);
  return harness_finish();
}
