/* test_kernels_compile.c — CI without a GPU: generates every kernel specialisation the
 * GPU check (tests/gpu/gpu_check.c) uses, as the programs plans compile (each op's row
 * kernel and tile kernel apart), and compiles each with NVRTC for sm_90a and sm_80
 * (splat__nvrtc_compile, no cache); fails on a compile error, any register spill (from
 * the runtime's ptxas report) or wgmma instructions ptxas serialises (its C7518 / C7520
 * "Potential Performance Loss" notes), and prints a table (kernel, arch, registers, spills,
 * stack, shared memory). Skips (and says so) only when NVRTC cannot be loaded.
 * SPLAT_TEST_COMPILE_EVERY=N (scripts/test sets it for the sanitised build, whose NVRTC
 * output is the plain build's): every source is still generated, but only every N-th
 * program is compiled and checked, so the host code runs under the sanitisers at a
 * fraction of the time (the plain build compiles them all). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "cuda/kgen.h"
#include "cuda/nvrtc.h"
#include "harness.h"

/* The head_dims of the GPU check: 64 and 128, 40 (tile path, not a multiple of 16) and
 * 36 (row kernels only). */
static const int dims[] = {64, 128, 40, 36};
static const splat_dtype dts[] = {SPLAT_F32, SPLAT_F16, SPLAT_BF16};
static const char *archs[] = {"sm_90a", "sm_80"};

typedef struct job {
  splat__kspec spec;
  const char *arch;
  char *src;
  /* results */
  splat_status st;
  char *log;
  size_t cubin_size;
} job;

enum { MAX_JOBS = 1024 };
static job *jobs;
static int njobs, next_job;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&lock);
    const int j = next_job < njobs ? next_job++ : -1;
    pthread_mutex_unlock(&lock);
    if (j < 0) return NULL;
    char program[176];
    splat__kspec_program(&jobs[j].spec, program, sizeof program);
    splat__compiled c;
    memset(&c, 0, sizeof c);
    jobs[j].st = splat__nvrtc_compile(jobs[j].src, program, jobs[j].arch, &c);
    if (jobs[j].st != SPLAT_OK) {
      jobs[j].log = strdup(splat__thread_error()); /* the message carries the log's head */
    } else {
      jobs[j].log = c.log;
      jobs[j].cubin_size = c.cubin_size;
      c.log = NULL;
    }
    splat__compiled_free(&c);
  }
}

/* The programs of a spec for arch (its row kernel's, its tile kernel's when it has one,
 * and an attention tile kernel's second pass or merge kernel: kgen.h); a program already
 * queued for arch (specs differing only in their tile kernels share the row and merge
 * programs) is compiled once. */
static void add_program_with(const splat__kspec *s, const splat__kspec *pass2, const char *arch) {
  splat__kspec prog[SPLAT__KPROG_PER_OP];
  const int np = splat__kspec_programs(s, pass2, prog);
  for (int i = 0; i < np; i++) {
    char *src = NULL;
    splat_status st = splat__kspec_source(&prog[i], &src);
    CHECK(st == SPLAT_OK);
    if (st != SPLAT_OK) continue;
    int dup = 0;
    for (int j = 0; j < njobs && !dup; j++)
      dup = !strcmp(jobs[j].arch, arch) && !strcmp(jobs[j].src, src);
    if (dup) {
      free(src);
      continue;
    }
    if (njobs == MAX_JOBS) {
      CHECKF(0, "more than %d kernel sources: raise MAX_JOBS", MAX_JOBS);
      free(src);
      return;
    }
    job *jb = &jobs[njobs++];
    memset(jb, 0, sizeof *jb);
    jb->spec = prog[i];
    jb->arch = arch;
    jb->src = src;
  }
}

static void add_program(const splat__kspec *s, const char *arch) {
  add_program_with(s, NULL, arch);
}

/* A spec's programs for arch; an attention spec with a tile kernel with each of its
 * epilogues (kernels/params.cuh SPLAT_EPI_*: one pass, split tiles, and the two passes). */
static void add_arch(const splat__kspec *s, const char *arch) {
  if (s->op != SPLAT__KOP_ATTENTION || !s->tile) {
    add_program(s, arch);
    return;
  }
  const int epis[3] = {SPLAT_EPI_PLAIN, SPLAT_EPI_SPLIT, SPLAT_EPI_PASS1};
  for (int e = 0; e < 3; e++) {
    splat__kspec v = *s;
    v.epi = epis[e];
    add_program(&v, arch);
  }
}

/* A spec for both archs; the wgmma attention spec (sm_90a only) is added by the caller. */
static void add(const splat__kspec *s) {
  for (int a = 0; a < 2; a++) add_arch(s, archs[a]);
}

static void report(const job *jb, const char *name, int dyn_smem) {
  if (!name[0]) return;
  splat__ptxas_stats in;
  const int found = splat__ptxas_report(jb->log, name, &in) == SPLAT_OK;
  const int spills = in.spill_stores + in.spill_loads;
  printf("%-58s %-7s %4d %6d %6d %7d %s\n", name, jb->arch, in.registers, spills, in.stack,
         in.smem + dyn_smem,
         !found   ? "NOT FOUND"
         : spills ? "SPILLS"
                  : "ok");
  CHECKF(found, "%s (%s): no ptxas report for the kernel", name, jb->arch);
  CHECKF(spills == 0, "%s (%s): %d bytes of register spills", name, jb->arch, spills);
}

int main(void) {
  if (splat__nvrtc_version(NULL, NULL) != SPLAT_OK) {
    printf("NVRTC unavailable, skipping: %s\n", splat__thread_error());
    printf("0 passed, 0 failed, 1 skipped\n");
    return 0;
  }
  jobs = calloc(MAX_JOBS, sizeof *jobs);
  if (!jobs) return 1;
  for (int t = 0; t < 3; t++) {
    splat__kspec s;
    splat__kspec_init(&s, SPLAT__KOP_SOFTMAX, dts[t], dts[t], dts[t], 0, SPLAT_MAX_SEGMENTS, 128,
                      128);
    add(&s);
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
      const splat__kop ops[3] = {SPLAT__KOP_SDDMM, SPLAT__KOP_SPMM, SPLAT__KOP_ATTENTION};
      for (int o = 0; o < 3; o++) {
        splat__kspec_init(&s, ops[o], dts[t], dts[t], dts[t], dims[d], SPLAT_MAX_SEGMENTS, 128,
                          128);
        add(&s);
        /* The SDDMM write-out with 4 lanes a row (plans with regrouped rows), at head_dim 64. */
        if (ops[o] == SPLAT__KOP_SDDMM && dims[d] == 64) {
          splat__kspec w4 = s;
          w4.write_lanes = 4;
          add(&w4);
        }
        /* The R-SDDMM on wgmma (sm_90a only), with the 4-lane write-out of regrouped rows
         * where it has no row stores (16-bit head_dim 128), and at 16-bit head_dim 64 also
         * with the 64-key sub-tiles of key tiles of 64 (its default takes 128). */
        splat__kspec wf = s;
        if (splat__kspec_use_sddmm_wgmma(&wf, 0)) add_arch(&wf, "sm_90a");
        splat__kspec wf4 = wf;
        wf4.write_lanes = 4;
        if (wf.wgmma && !wf.write_mode) add_arch(&wf4, "sm_90a");
        splat__kspec wk = s;
        wk.tile_k = 64;
        if (wf.kt == 128 && splat__kspec_use_sddmm_wgmma(&wk, 0)) add_arch(&wk, "sm_90a");
        /* Rows of one interval (the row stores' common case). */
        splat__kspec w1 = s;
        w1.max_segs = 1;
        if (splat__kspec_use_sddmm_wgmma(&w1, 0) && w1.write_mode == SPLAT__WRITE_ROWS)
          add_arch(&w1, "sm_90a");
        /* The sm_90a attention kernels (wgmma, warp-specialised), with one and with two
         * consumer warpgroups; the warp-specialised one also with 64-key sub-tiles where
         * its default is 128. */
        for (int kind = SPLAT__WGMMA_SYNC; kind <= SPLAT__WGMMA_WS; kind++) {
          for (int wgs = 1; wgs <= 2; wgs++) {
            splat__kspec w = s;
            if (splat__kspec_use_wgmma(&w, kind, wgs, 0)) add_arch(&w, "sm_90a");
            splat__kspec w64 = s;
            if (w.kt != 64 && splat__kspec_use_wgmma(&w64, kind, wgs, 64)) add_arch(&w64, "sm_90a");
            /* A two-pass plan's kernels as its passes specialise them (1-2 segments a row,
             * key tiles of 128 or 64): their smaller tables leave room for pass 2's staged
             * rows, which the specs of 8 segments above mostly have not. */
            for (int segs = 1; segs <= 2 && kind == SPLAT__WGMMA_WS; segs++) {
              for (int tk = 128; tk >= 64; tk /= 2) {
                splat__kspec p = s;
                p.max_segs = segs;
                p.tile_k = tk;
                p.epi = SPLAT_EPI_PASS1; /* its programs: pass 1's and pass 2's kernels */
                if (splat__kspec_use_wgmma(&p, kind, wgs, 0) && p.wgmma == SPLAT__WGMMA_WS) {
                  add_program(&p, "sm_90a");
                  /* Narrow (query tiles of 64 rows, head_dim 128): one warpgroup for the
                   * plain kernel and pass 2, and for pass 1 where it takes it (bf16). */
                  splat__kspec nw[3] = {p, p, p};
                  nw[0].epi = SPLAT_EPI_PLAIN;
                  nw[1].epi = SPLAT_EPI_PASS1;
                  nw[2].epi = SPLAT_EPI_PASS2;
                  for (int i = 0; i < 3; i++) {
                    nw[i].narrow = 1;
                    splat__kspec_ws_narrow(&nw[i]);
                  }
                  if (wgs == 2 && dims[d] > 64) {
                    add_program(&nw[0], "sm_90a");
                    add_program_with(&nw[1], &nw[2], "sm_90a");
                  }
                }
              }
            }
          }
        }
      }
    }
  }

  /* The warp-specialised kernel's other head_dims (the GPU check's --dims): 32 and 48 as 64
   * columns, 96 and 120 as 128 (two consumer warpgroups), 136 and 192 as 192 (one at the most
   * segments a row, two at 6), 256 as 256 (one at the most segments; two at 3 and below:
   * below), 16-bit: every epilogue at the most segments a row, and a two-pass plan's kernels
   * at one and two segments. */
  const int ws_dims[7] = {32, 48, 96, 120, 256, 192, 136};
  for (int t = 1; t < 3; t++) {
    for (int d = 0; d < 7; d++) {
      splat__kspec s;
      splat__kspec_init(&s, SPLAT__KOP_ATTENTION, dts[t], dts[t], dts[t], ws_dims[d],
                        SPLAT_MAX_SEGMENTS, 128, 128);
      splat__kspec w = s;
      CHECK(splat__kspec_use_wgmma(&w, SPLAT__WGMMA_WS, 0, 0) &&
            w.warps == (ws_dims[d] > 128 ? 4 : 8)); /* 8 segments: one above 128 columns */
      add_arch(&w, "sm_90a");
      /* 192 columns: two consumer warpgroups up to 6 segments a row. */
      splat__kspec w6 = s;
      w6.max_segs = 6;
      if (splat__kspec_ws_cols(ws_dims[d]) == 192) {
        CHECK(splat__kspec_use_wgmma(&w6, SPLAT__WGMMA_WS, 0, 0) && w6.warps == 8);
        add_arch(&w6, "sm_90a");
      }
      for (int segs = 1; segs <= 2; segs++) {
        splat__kspec p = s;
        p.max_segs = segs;
        p.epi = SPLAT_EPI_PASS1;
        if (!splat__kspec_use_wgmma(&p, SPLAT__WGMMA_WS, 0, 0)) continue;
        splat__kspec p2 = p; /* as splat__kspec_for_pass makes them */
        p2.epi = SPLAT_EPI_PASS2;
        splat__kspec_ws_narrow(&p);
        splat__kspec_ws_narrow(&p2);
        add_program_with(&p, &p2, "sm_90a");
      }
    }
  }

  /* 256 columns on two consumer warpgroups (one Q buffer, kgen.c splat__kspec_ws_qbufs): one
   * to three segments a row, each epilogue where splat__kspec_ws_narrow keeps two (the plain
   * one, pass 1 in bf16 or at one segment, beside a pass 2 of one segment on two), and the
   * ones it takes to one warpgroup (split tiles, f16's pass 1 above one segment). */
  for (int t = 1; t < 3; t++) {
    for (int segs = 1; segs <= 4; segs++) {
      splat__kspec s;
      splat__kspec_init(&s, SPLAT__KOP_ATTENTION, dts[t], dts[t], dts[t], 256, segs, 128, 128);
      CHECK(splat__kspec_use_wgmma(&s, SPLAT__WGMMA_WS, 0, 0) && s.warps == (segs <= 3 ? 8 : 4));
      if (segs > 3) continue;
      CHECK(splat__kspec_ws_qbufs(&s) == 1);
      splat__kspec p2 = s;
      p2.max_segs = 1;
      p2.epi = SPLAT_EPI_PASS2;
      splat__kspec_ws_narrow(&p2);
      CHECK(p2.warps == 8);
      const int epis[3] = {SPLAT_EPI_PLAIN, SPLAT_EPI_SPLIT, SPLAT_EPI_PASS1};
      for (int e = 0; e < 3; e++) {
        splat__kspec x = s;
        x.epi = epis[e];
        splat__kspec_ws_narrow(&x);
        const int two = epis[e] == SPLAT_EPI_PLAIN ||
                        (epis[e] == SPLAT_EPI_PASS1 && (dts[t] == SPLAT_BF16 || segs == 1));
        CHECK(x.warps == (two ? 8 : 4));
        add_program_with(&x, &p2, "sm_90a");
      }
      splat__kspec q2 = s; /* pass 2 above one segment: one warpgroup */
      q2.epi = SPLAT_EPI_PASS2;
      splat__kspec_ws_narrow(&q2);
      CHECK(q2.warps == (segs > 1 ? 4 : 8));
    }
  }

  /* Three consumer warpgroups on 192-row tiles (16-bit head_dim 32 .. 64 with 128-key
   * sub-tiles, 128 with 64-key ones; no gather: kgen.c splat__kspec_plan with warpgroups 3),
   * one to three segments a row where the shared memory takes them, with the plain epilogue
   * (split tiles take two), and pass 1 of a two-pass plan in bf16 up to head_dim 64. The
   * opt-in of SPLAT_ATTN_WARPGROUPS=3 allows the tiles. */
  setenv("SPLAT_ATTN_WARPGROUPS", "3", 1);
  for (int t = 1; t < 3; t++) {
    const int d3[4] = {32, 48, 64, 128};
    for (int d = 0; d < 4; d++) {
      for (int segs = 1; segs <= 3; segs++) {
        splat__kspec s;
        splat__kspec_init(&s, SPLAT__KOP_ATTENTION, dts[t], dts[t], dts[t], d3[d], segs, 192, 128);
        CHECK(splat__kspec_use_wgmma(&s, SPLAT__WGMMA_WS, 3, 0) && s.warps == 12 && !s.gather);
        if (splat__kspec_tile_smem(&s) <= 232448) add_program(&s, "sm_90a");
        /* Pass 1 of a two-pass plan on 192-row tiles (bf16, one or two segments a row, as
         * attn_passes.c splat__attn_pass_rows limits it), beside a pass 2 of two warpgroups,
         * and beside a pass 2 of one segment on three (its staged rows in shared memory). */
        if (dts[t] == SPLAT_BF16 && segs <= 2 && d3[d] <= 64) {
          splat__kspec p1 = s, p2;
          p1.epi = SPLAT_EPI_PASS1;
          splat__kspec_init(&p2, SPLAT__KOP_ATTENTION, dts[t], dts[t], dts[t], d3[d], 1, 128, 128);
          CHECK(splat__kspec_use_wgmma(&p2, SPLAT__WGMMA_WS, 2, 0) && p2.warps == 8);
          p2.epi = SPLAT_EPI_PASS2;
          add_program_with(&p1, &p2, "sm_90a");
          if (segs == 1) {
            splat__kspec p3;
            splat__kspec_init(&p3, SPLAT__KOP_ATTENTION, dts[t], dts[t], dts[t], d3[d], 1, 192,
                              128);
            CHECK(splat__kspec_use_wgmma(&p3, SPLAT__WGMMA_WS, 3, 0) && p3.warps == 12);
            p3.epi = SPLAT_EPI_PASS2;
            p3.smem_optin = 232448;
            const int unstaged = splat__kspec_tile_smem(&p3) - (32 + 192 * (2 * d3[d] + 16));
            p3.epi = SPLAT_EPI_PLAIN;
            CHECKF(splat__kspec_tile_smem(&p3) == unstaged, "pass 2 not staged: %d bytes",
                   unstaged);
            p3.epi = SPLAT_EPI_PASS2;
            add_program_with(&p1, &p3, "sm_90a");
          }
        }
      }
    }
  }
  unsetenv("SPLAT_ATTN_WARPGROUPS");

  /* 16-bit head_dim 32 on the warp-specialised kernel (as 64 columns, kgen.c): one segment
   * a row, and a two-pass plan's passes (two segments a row, then one); two consumer
   * warpgroups on 128-key tiles, and one on 64-key tiles (the 64-row phase classes of
   * strided(64) | window(64) at 4096). The most segments a row: ws_dims above. */
  for (int t = 1; t < 3; t++) {
    for (int wgs = 2; wgs >= 1; wgs--) {
      splat__kspec s;
      splat__kspec_init(&s, SPLAT__KOP_ATTENTION, dts[t], dts[t], dts[t], 32, 1, 128,
                        wgs == 2 ? 128 : 64);
      CHECK(splat__kspec_use_wgmma(&s, SPLAT__WGMMA_WS, wgs, 0) && s.warps == 4 * wgs);
      add_arch(&s, "sm_90a");
      splat__kspec p1, p2 = s;
      splat__kspec_init(&p1, SPLAT__KOP_ATTENTION, dts[t], dts[t], dts[t], 32, 2, 128, 128);
      CHECK(splat__kspec_use_wgmma(&p1, SPLAT__WGMMA_WS, 0, 0));
      p1.epi = SPLAT_EPI_PASS1;
      p2.epi = SPLAT_EPI_PASS2;
      add_program_with(&p1, &p2, "sm_90a");
    }
  }

  /* The f32 tile kernels (3xTF32 mma.sync) at the head_dims whose shapes differ from 40, 64
   * and 128's: attention at 48 (3 stages, 3 CTAs an SM; every epilogue) and 104 / 120, SpMM
   * at 104 / 120 (column panels of 4 blocks and a partial one); both above head_dim 128 with
   * O in two column panels (the attention's for one pass without split tiles: the plain
   * epilogue only), the second panel whole (192, 256) or shorter (136). */
  const int f32_dims[6] = {48, 104, 120, 136, 192, 256};
  for (int d = 0; d < 6; d++) {
    for (int o = 0; o < 2; o++) {
      splat__kspec s;
      splat__kspec_init(&s, o ? SPLAT__KOP_SPMM : SPLAT__KOP_ATTENTION, SPLAT_F32, SPLAT_F32,
                        SPLAT_F32, f32_dims[d], SPLAT_MAX_SEGMENTS, 128, 128);
      CHECK(s.tile);
      if (f32_dims[d] > 128) {
        s.epi = SPLAT_EPI_PLAIN;
        for (int a = 0; a < 2; a++) add_program(&s, archs[a]);
      } else if (!o || d > 0) {
        add(&s);
      }
    }
  }

  const char *every_env = getenv("SPLAT_TEST_COMPILE_EVERY");
  const int every = every_env && atoi(every_env) > 1 ? atoi(every_env) : 1;
  if (every > 1) {
    int kept = 0;
    for (int j = 0; j < njobs; j++) {
      if (j % every == 0) {
        jobs[kept++] = jobs[j];
      } else {
        free(jobs[j].src);
      }
    }
    printf("SPLAT_TEST_COMPILE_EVERY=%d: compiling %d of the %d programs\n", every, kept, njobs);
    njobs = kept;
  }

  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int nthreads = ncpu > 4 ? 4 : ncpu < 1 ? 1 : (int)ncpu;
  pthread_t th[4];
  for (int i = 0; i < nthreads; i++) pthread_create(&th[i], NULL, worker, NULL);
  for (int i = 0; i < nthreads; i++) pthread_join(th[i], NULL);

  printf("%-58s %-7s %4s %6s %6s %7s\n", "kernel", "arch", "regs", "spills", "stack", "smem");
  for (int j = 0; j < njobs; j++) {
    job *jb = &jobs[j];
    char rows[160], tile[160], merge[160], kernel[160], program[176];
    splat__kspec_names(&jb->spec, rows, tile, sizeof rows);
    splat__kspec_merge_name(&jb->spec, merge, sizeof merge);
    splat__kspec_kernel(&jb->spec, kernel, sizeof kernel);
    splat__kspec_program(&jb->spec, program, sizeof program);
    CHECKF(jb->st == SPLAT_OK, "%s (%s) failed to compile:\n%s", program, jb->arch,
           jb->log ? jb->log : "(no log)");
    if (jb->st == SPLAT_OK) {
      /* E.g. a wgmma behind a branch after its fence: each waits for the previous. */
      CHECKF(!strstr(jb->log, "Potential Performance Loss: wgmma"),
             "%s (%s): ptxas serialises wgmma (its C7518 / C7520 note):\n%s", program, jb->arch,
             jb->log);
      report(jb, kernel, splat__kspec_tile_smem(&jb->spec)); /* 0 for row and merge programs */
      /* Each program compiles its one kernel: the others are not on its path. */
      const char *others[3] = {rows, tile, merge};
      for (int o = 0; o < 3; o++) {
        if (others[o][0] && strcmp(others[o], kernel)) {
          CHECKF(!strstr(jb->log, others[o]), "%s (%s): the program also compiled %s", program,
                 jb->arch, others[o]);
        }
      }
    }
    free(jb->src);
    free(jb->log);
  }
  free(jobs);
  return harness_finish();
}
