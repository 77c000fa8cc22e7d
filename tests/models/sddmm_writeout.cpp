// sddmm_writeout.cpp — a host model of the R-SDDMM tile kernels' score write-out: the
// real device functions of kernels/sddmm.cuh (staging, the column blocks a warp stages,
// the row shift, the ranges with their carried tails and completed sectors, the row
// stores), extracted by tests/models/sddmm_writeout.py into extracted.h, run on 32
// cooperative lanes (ucontext) with the warp intrinsics emulated. Each trial draws a warp's
// 16 rows of random intervals (adjacent ones, other groups' entries between them, row ends
// and padding), unaligned row strides and offsets, chains of sub-tiles in random order and
// fresh scores per sub-tile, then checks after every sub-tile that each written entry holds
// its staged score, padding only 0, and nothing else is touched; at each (b, h)'s end, that
// every entry was written. Usage: sddmm_writeout TRIALS SEED; exit status 1 on a failure.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <random>
#include <algorithm>
#include <ucontext.h>

#define SPLAT_F32 0
#define SPLAT_F16 1
#define SPLAT_BF16 2
#define SPLAT_DEV static inline
#define SPLAT_HOST_DEV static inline
#ifndef SPLAT_SDT
#define SPLAT_SDT SPLAT_F16
#endif
#ifndef SPLAT_KT
#define SPLAT_KT 128
#endif
#define SPLAT_WARPS 4
#ifndef SPLAT_WLPR
#define SPLAT_WLPR 2
#endif
#ifndef SPLAT_MAX_SEGS
#define SPLAT_MAX_SEGS 6
#endif
struct int4 { int x, y, z, w; };
struct uint4 { uint32_t x, y, z, w; };
struct float2 { float x, y; };
static inline float2 make_float2(float a, float b) { return {a, b}; }
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s) {
  uint64_t v = ((uint64_t)y << 32) | x; uint32_t r = 0;
  for (int i = 0; i < 4; i++) { int sel = (s >> (4 * i)) & 7; r |= (uint32_t)((v >> (8 * sel)) & 0xff) << (8 * i); }
  return r;
}
template <int DT> static inline uint32_t splat_pack2(float lo, float hi) {
  return ((uint32_t)lo & 0xffffu) | (((uint32_t)hi & 0xffffu) << 16);
}
template <int DT> static inline uint16_t splat_to16(float v) { return (uint16_t)(uint32_t)v; }
struct splat_dev_tensor { void *data; int64_t s0, s1, s2, s3; };
struct splat_sddmm_params { splat_dev_tensor scores; float scale; int32_t row_width; };

// ---- cooperative warp ----
static ucontext_t g_sched, g_lane[32];
static int g_cur;
static long long g_slot[32];
static void warp_bar() { swapcontext(&g_lane[g_cur], &g_sched); }
static void __syncwarp(unsigned = 0xffffffffu) { warp_bar(); }
static int __shfl_sync(unsigned, int v, int src) { g_slot[g_cur] = v; warp_bar(); int r = (int)g_slot[src]; warp_bar(); return r; }
static int __reduce_min_sync(unsigned, int v) { g_slot[g_cur] = v; warp_bar(); long long m = g_slot[0]; for (int i = 1; i < 32; i++) m = std::min(m, g_slot[i]); warp_bar(); return (int)m; }
static int __reduce_max_sync(unsigned, int v) { g_slot[g_cur] = v; warp_bar(); long long m = g_slot[0]; for (int i = 1; i < 32; i++) m = std::max(m, g_slot[i]); warp_bar(); return (int)m; }
static int __any_sync(unsigned, int v) { g_slot[g_cur] = v != 0; warp_bar(); int r = 0; for (int i = 0; i < 32; i++) r |= (int)g_slot[i]; warp_bar(); return r; }
static uint64_t splat_l2_evict_first_policy() { return 0; }
static void splat_st16_evict_first(uint4 *p, uint4 v, uint64_t) { *p = v; }

#include "extracted.h"

// ---- the trial ----
#define KT SPLAT_KT
#define OSZ SPLAT_OSZ
typedef uint32_t word;
static const word SENT = OSZ == 4 ? 0xffffffffu : 0xffffu;
static std::mt19937_64 rng;
static int rnd(int n) { return (int)(rng() % (uint64_t)n); }

struct Step { int32_t g0; bool first, last; int s; };
static std::vector<Step> steps;         // processing order
static int nsub, NBH = 2, warp, nrows;
alignas(16) static splat_ival sIv[SPLAT_TQ * SPLAT_MAX_SEGS];
static int sNiv[SPLAT_TQ], sRow[SPLAT_TQ];
alignas(16) static unsigned char stagebuf[(SPLAT_TQ + 8) * SPLAT_LDO * 4];
alignas(16) static uint4 recs[16];
static std::vector<word> vals;          // [bh][s][rl][col]
static std::vector<unsigned char> gmem_raw;
static unsigned char *gmem;
static int64_t gsize, s2, bh_off[2];
static int row_width, nnz[SPLAT_TQ];
static bool vec;
static splat_sddmm_params P;
static long long fails, checks;
static bool verbose;
static int cur_step_idx, cur_bh;

static word gget(int64_t e) { return OSZ == 4 ? ((uint32_t *)gmem)[e] : ((uint16_t *)gmem)[e]; }
static word enc(word v) { if (OSZ == 4) { float f = (float)v; uint32_t b; memcpy(&b, &f, 4); return b; } return v; }
static int step_of(int32_t g) { return g / KT; }  // sub-tile s covers [s KT, s KT + KT)

// expected state of entry e of warp row rl at bh: returns kind: 0 group entry (want), 1 padding, 2 untouched
static int expect(int bh, int rl, int e, word *want) {
  const int r = 16 * warp + rl;
  if (r < nrows && e < row_width) {
    if (e >= nnz[r]) { *want = 0; return 1; }
    for (int q = 0; q < sNiv[r]; q++) {
      const splat_ival &v = sIv[r * SPLAT_MAX_SEGS + q];
      if (e >= v.idx0 && e <= v.idx0 + (v.hi - v.lo)) {
        const int32_t g = v.lo + (e - v.idx0);
        const int s = step_of(g);
        *want = enc(vals[(((size_t)bh * nsub + s) * 16 + rl) * KT + (g - s * KT)]);
        return 0;
      }
    }
  }
  return 2;
}
static void report(const char *what, int bh, int rl, int e, word got, word want) {
  fails++;
  if (verbose && fails < 20)
    fprintf(stderr, "FAIL %s: bh %d row %d (warp %d) entry %d got %x want %x (step %d g0 %d)\n", what, bh, rl,
            warp, e, got, want, cur_step_idx, steps[cur_step_idx].g0);
}
// Every written entry holds its staged value (or 0 in padding); untouched otherwise.
static void check(int bh, bool complete) {
  for (int rl = 0; rl < 16; rl++) {
    const int r = 16 * warp + rl;
    for (int e = 0; e < s2; e++) {
      const int64_t a = bh_off[bh] + (int64_t)sRow[r] * s2 + e;
      const word got = gget(a);
      word want = 0;
      const int k = expect(bh, rl, e, &want);
      checks++;
      if (k == 0) {
        if (got == SENT) { if (complete) report("unwritten", bh, rl, e, got, want); }
        else if (got != want) report("value", bh, rl, e, got, want);
      } else if (k == 1) {
        if (got != SENT && got != 0) report("padding", bh, rl, e, got, want);
      } else if (got != SENT) report("outside", bh, rl, e, got, want);
    }
  }
}

static void lane_main(int lane) {
  bool carry = false;
  unsigned char *wo = stagebuf + 16 * warp * SPLAT_LDO * OSZ;
  for (int bh = 0; bh < NBH; bh++) {
    warp_bar();
    if (lane == 0) { // the staging tile held Q at the (b, h)'s start: garbage
      for (size_t i = 0; i < sizeof stagebuf; i++) stagebuf[i] = (unsigned char)rng();
      cur_bh = bh;
    }
    warp_bar();
    for (size_t si = 0; si < steps.size(); si++) {
      const Step &S = steps[si];
      if (lane == 0) cur_step_idx = (int)si;
      int blocks;
      const int shift = splat_sddmm_prepare(P, wo, sIv, sNiv, sRow, 0, nrows, warp, lane, S.first, S.g0,
                                            bh_off[bh], vec, carry, blocks);
      const bool touches = blocks != 0;
      float acc[KT / 2];
      const int g = lane >> 2, t = lane & 3;
      for (int j = 0; j < KT / 8; j++)
        for (int hf = 0; hf < 2; hf++)
          for (int e = 0; e < 2; e++)
            acc[4 * j + 2 * hf + e] =
                (float)vals[(((size_t)bh * nsub + S.s) * 16 + g + 8 * hf) * KT + 8 * j + 2 * t + e];
      warp_bar();
      if (touches)
        splat_sddmm_emit(P, acc, wo, sIv, sNiv, sRow, 0, nrows, warp, lane, S.first, S.last, S.g0, bh_off[bh],
                         vec, shift, blocks, carry, recs);
      warp_bar();
      if (lane == 0) check(bh, false);
      warp_bar();
    }
    if (lane == 0) check(bh, true);
  }
}
static bool g_done[32];
static void lane_entry(int lane) { lane_main(lane); g_done[lane] = true; swapcontext(&g_lane[lane], &g_sched); }
static char stacks[32][1 << 16];

static int32_t pick_point(int N) {
  const int c = rnd(10);
  if (c < 4) return rnd(N);
  if (c < 7) return std::min(N - 1, std::max(0, 8 * rnd(N / 8 + 1) + rnd(3) - 1));
  return std::min(N - 1, std::max(0, KT * rnd(N / KT + 1) + rnd(3) - 1));
}

static void make_trial() {
  nsub = 1 + rnd(5);
  const int N = nsub * KT;
  warp = rnd(4);
  nrows = rnd(4) == 0 ? 16 * warp + 1 + rnd(16) : 16 * (warp + 1) + rnd(64 - 16 * (warp + 1) + 1);
  if (nrows > SPLAT_TQ) nrows = SPLAT_TQ;
  vec = rnd(8) != 0;
  row_width = 0;
  for (int r = 0; r < SPLAT_TQ; r++) {
    sNiv[r] = 0; nnz[r] = 0;
    if (r < 16 * warp || r >= 16 * warp + 16 || r >= nrows) continue;
    const int k = 1 + rnd(rnd(3) == 0 ? SPLAT_MAX_SEGS : 2);
    std::vector<int32_t> p;
    for (int i = 0; i < 2 * k; i++) p.push_back(pick_point(N));
    std::sort(p.begin(), p.end());
    int idx = 0, n = 0;
    int32_t prev_hi = -1;
    for (int i = 0; i < k; i++) {
      int32_t lo = p[2 * i], hi = p[2 * i + 1];
      if (rnd(6) == 0) lo = prev_hi + 1;  // adjacent to the previous interval
      if (lo <= prev_hi || lo > hi || lo >= N) continue;
      if (rnd(3) == 0) idx += 1 + rnd(20); // another group's segment before it
      splat_ival &v = sIv[r * SPLAT_MAX_SEGS + n];
      v.lo = lo; v.hi = hi; v.idx0 = idx; v.ends_row = 0;
      idx += hi - lo + 1; prev_hi = hi; n++;
    }
    if (n > 0 && rnd(4) != 0) sIv[r * SPLAT_MAX_SEGS + n - 1].ends_row = 1;
    else idx += rnd(3) ? 1 + rnd(12) : 0; // trailing other group's entries (or none)
    sNiv[r] = n; nnz[r] = idx;
    row_width = std::max(row_width, idx);
  }
  row_width += rnd(3) == 0 ? 0 : rnd(30);
  if (row_width == 0) row_width = 1;
  // nnz < row_width rows have padding; rows with nnz == row_width none.
  s2 = row_width + (rnd(3) == 0 ? 0 : rnd(40));
  int perm[SPLAT_TQ];
  for (int i = 0; i < SPLAT_TQ; i++) perm[i] = i;
  std::shuffle(perm, perm + SPLAT_TQ, rng);
  for (int i = 0; i < SPLAT_TQ; i++) sRow[i] = perm[i];
  bh_off[0] = rnd(64);
  bh_off[1] = bh_off[0] + SPLAT_TQ * s2 + rnd(64);
  gsize = bh_off[1] + SPLAT_TQ * s2 + 64;
  gmem_raw.assign(gsize * OSZ + 64, 0);
  gmem = gmem_raw.data() + ((16 - ((uintptr_t)gmem_raw.data() & 15)) & 15);
  for (int64_t i = 0; i < gsize; i++) {
    if (OSZ == 4) ((uint32_t *)gmem)[i] = SENT; else ((uint16_t *)gmem)[i] = (uint16_t)SENT;
  }
  P.scores.data = gmem; P.scores.s2 = s2; P.scores.s3 = 1; P.scale = 1.0f; P.row_width = row_width;
  vals.resize((size_t)NBH * nsub * 16 * KT);
  for (auto &v : vals) v = 1 + rnd(0xfffe);
  // chains of consecutive sub-tiles
  std::vector<std::vector<int>> chains;
  for (int s = 0; s < nsub; s++) {
    if (s == 0 || rnd(4) == 0) chains.push_back({});
    chains.back().push_back(s);
  }
  if (rnd(4) == 0) std::shuffle(chains.begin(), chains.end(), rng);
  steps.clear();
  for (auto &c : chains)
    for (size_t i = 0; i < c.size(); i++)
      steps.push_back({(int32_t)(c[i] * KT), i == 0, i + 1 == c.size(), c[i]});
}

int main(int argc, char **argv) {
  const long trials = argc > 1 ? atol(argv[1]) : 1000;
  rng.seed(argc > 2 ? atoll(argv[2]) : 1);
  verbose = true;
  long bad_trials = 0;
  for (long tr = 0; tr < trials; tr++) {
    make_trial();
    const long long f0 = fails;
    for (int l = 0; l < 32; l++) {
      getcontext(&g_lane[l]);
      g_lane[l].uc_stack.ss_sp = stacks[l];
      g_lane[l].uc_stack.ss_size = sizeof stacks[l];
      g_lane[l].uc_link = nullptr;
      makecontext(&g_lane[l], (void (*)())lane_entry, 1, l);
      g_done[l] = false;
    }
    for (;;) {
      int nd = 0;
      for (int l = 0; l < 32; l++) {
        if (g_done[l]) { nd++; continue; }
        g_cur = l;
        swapcontext(&g_sched, &g_lane[l]);
      }
      if (nd == 32) break;
      int d2 = 0;
      for (int l = 0; l < 32; l++) d2 += g_done[l];
      if (d2 != 0 && d2 != 32) { fprintf(stderr, "divergent barriers\n"); return 2; }
    }
    if (fails > f0) bad_trials++;
  }
  printf("trials %ld, entry checks %lld, failures %lld (trials with failures %ld)\n", trials, checks, fails,
         bad_trials);
  return fails != 0;
}
