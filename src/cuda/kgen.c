/* kgen.c — specialisations of splat's own kernels: choice of tile kernel, names, the
 * #define prelude and the generated source through splat__codegen (see kgen.h and
 * docs/cuda.md "Kernels"). */
#include "cuda/kgen.h"

#include "cuda/codegen.h"

#include "core/env.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Interval table entry of kernels/common.cuh (4 x int32). */
#define IVAL_BYTES 16

static const char *dname(splat_dtype d) {
  return d == SPLAT_F32 ? "f32" : d == SPLAT_F16 ? "f16" : "bf16";
}

static const char *op_name(splat__kop op) {
  switch (op) {
    case SPLAT__KOP_SDDMM:
      return "sddmm";
    case SPLAT__KOP_SOFTMAX:
      return "softmax";
    case SPLAT__KOP_SPMM:
      return "spmm";
    default:
      return "attn";
  }
}

static const char *spec_template(const splat__kspec *s) {
  if (s->op == SPLAT__KOP_SDDMM && s->wgmma) return "sddmm_wgmma.cuh";
  return s->wgmma == SPLAT__WGMMA_WS     ? "attention_ws.cuh"
         : s->wgmma == SPLAT__WGMMA_SYNC ? "attention_wgmma.cuh"
                                         : splat__kspec_template(s->op);
}

const char *splat__kspec_template(splat__kop op) {
  switch (op) {
    case SPLAT__KOP_SDDMM:
      return "sddmm.cuh";
    case SPLAT__KOP_SOFTMAX:
      return "softmax.cuh";
    case SPLAT__KOP_SPMM:
      return "spmm.cuh";
    default:
      return "attention_tile.cuh";
  }
}

/* The key sub-tile and stages of the portable (mma.sync) tile kernels of SDDMM and SpMM:
 * 64 keys (32 above head_dim 128, and for f32 above 64), halved until they divide the key
 * tile; 3 stages for 16-bit inputs, 2 for f32 and for the 16-bit R-SDDMM above head_dim 64
 * (3 CTAs an SM instead of 2: 64 KB each at head_dim 128, 1.14-1.19x on an H200,
 * bench/NOTES.md v12). */
static void portable_sub_tiles(splat__kspec *s) {
  int kt = s->head_dim > 128 || (s->dt == SPLAT_F32 && s->head_dim > 64) ? 32 : 64;
  while (s->tile_k % kt) kt /= 2;
  s->kt = kt;
  s->stages = s->dt == SPLAT_F32 || (s->op == SPLAT__KOP_SDDMM && s->head_dim > 64) ? 2 : 3;
  s->write_mode = SPLAT__WRITE_LANES;
}

void splat__kspec_init(splat__kspec *s, splat__kop op, splat_dtype dt, splat_dtype vdt,
                       splat_dtype pdt, int head_dim, int max_segs, int tile_q, int tile_k) {
  memset(s, 0, sizeof *s);
  s->op = op;
  s->dt = dt;
  s->vdt = op == SPLAT__KOP_ATTENTION ? dt : vdt;
  s->pdt = op == SPLAT__KOP_SOFTMAX ? pdt : s->vdt;
  s->head_dim = head_dim;
  s->max_segs = max_segs;
  s->row_warps = 4;
  s->gather = 1;
  s->write_lanes = op == SPLAT__KOP_SDDMM ? 2 : 0;
  s->stages = 2;
  s->tile_k = tile_k;
  /* Tile kernels: SDDMM, SpMM and fused attention for f16/bf16 (mma.sync m16n8k16) and f32
   * (3xTF32 m16n8k8; SpMM and attention above head_dim 128 in two column panels of O, the
   * attention's for one pass without split tiles: splat__kspec_attn_epilogues,
   * splat__kspec_for_pass). A CTA takes 64 rows (4 warps) of a query tile when tile_q
   * allows, so 2-4 CTAs share an SM and hide each other's latency (sub-tiles and stages:
   * portable_sub_tiles); 192-row tiles at the shapes that take them (splat__kspec_rows192),
   * as three row blocks of 64 (or one for the three consumer warpgroups of the
   * warp-specialised attention kernel). */
  const int tile_op = op != SPLAT__KOP_SOFTMAX;
  const int rows192 = tile_q == 192 && splat__kspec_rows192(dt, head_dim);
  if (tile_op && head_dim % 8 == 0 && tile_q % 16 == 0 && tile_q >= 16 &&
      (tile_q <= 128 || rows192) && tile_k % 16 == 0) {
    s->tile = 1;
    s->warps = tile_q % 64 == 0 ? 4 : tile_q / 16;
    portable_sub_tiles(s);
    /* Fused attention: 64-key sub-tiles carrying K and V; 3 stages up to head_dim 64,
     * 2 above (shared memory: 2 CTAs per SM at head_dim 128). f32 (the registers of O, S and
     * the 3xTF32 operands): 32 keys up to head_dim 64, 16 above (more spill); 3 stages up to
     * head_dim 48, whose kernel fits 3 CTAs an SM (1.05x; 3 CTAs at head_dim 64 need 16-key
     * sub-tiles: 0.91x, bench/NOTES.md v29), else 2. */
    if (op == SPLAT__KOP_ATTENTION) {
      int kt = dt != SPLAT_F32 ? 64 : head_dim <= 64 ? 32 : 16;
      while (tile_k % kt) kt /= 2;
      s->kt = kt;
      s->stages = dt != SPLAT_F32 ? (head_dim <= 64 ? 3 : 2) : head_dim <= 48 ? 3 : 2;
      /* f32 above head_dim 160: a CTA of 8 warps takes the query tile's 128 rows (its Q, 64
       * KB at head_dim 256, leaves shared memory for one CTA an SM, which 4 warps alone left
       * latency-bound): 1.38-1.61x at head_dim 256, 1.03-1.11x at 192; at 136 two CTAs of
       * 4 warps share an SM and 8 warps ran 0.76-0.95x (bench/NOTES.md v33). */
      if (dt == SPLAT_F32 && head_dim > 160 && tile_q % 128 == 0) s->warps = 8;
    }
  }
  if (op == SPLAT__KOP_SOFTMAX) s->head_dim = 0; /* softmax does not depend on it */
}

int splat__kspec_table_segs(const splat_report *r) {
  int n = 1;
  for (int s = 1; s <= r->max_segments; s++) {
    if (r->rows_by_segments[s] > 0) n = s;
  }
  return n;
}

/* The attention tile kernel's name ends in its epilogue (none for PLAIN). */
static const char *epi_suffix(int epi) {
  return epi == SPLAT_EPI_SPLIT   ? "_split"
         : epi == SPLAT_EPI_PASS1 ? "_pass1"
         : epi == SPLAT_EPI_PASS2 ? "_pass2"
                                  : "";
}

void splat__kspec_names(const splat__kspec *s, char *rows, char *tile, size_t cap) {
  const char *on = op_name(s->op);
  if (s->op == SPLAT__KOP_SOFTMAX) {
    snprintf(rows, cap, "splat_softmax_rows_%s_to_%s", dname(s->vdt), dname(s->pdt));
  } else if (s->op == SPLAT__KOP_ATTENTION) {
    snprintf(rows, cap, "splat_attn_rows_%s_d%d", dname(s->dt), s->head_dim);
  } else {
    snprintf(rows, cap, "splat_%s_rows_%s_v_%s_d%d", on, dname(s->dt), dname(s->vdt), s->head_dim);
  }
  if (s->tile && s->wgmma && s->op == SPLAT__KOP_ATTENTION) {
    snprintf(tile, cap, "splat_attn_%s_%s_d%d_q%d_k%d_kt%d_s%d_seg%d%s",
             s->wgmma == SPLAT__WGMMA_WS ? "ws" : "wgmma", dname(s->dt), s->head_dim, 16 * s->warps,
             s->tile_k, s->kt, s->stages, s->max_segs, epi_suffix(s->epi));
  } else if (s->tile) {
    char w[16] = "";
    if (s->op == SPLAT__KOP_SDDMM)
      snprintf(w, sizeof w, "_w%d%s", s->write_lanes,
               s->write_mode == SPLAT__WRITE_ROWS ? "_rows" : "");
    if (s->op == SPLAT__KOP_ATTENTION) snprintf(w, sizeof w, "%s", epi_suffix(s->epi));
    snprintf(tile, cap, "splat_%s_%s_%s_v_%s_d%d_q%d_k%d_kt%d_s%d_seg%d%s", on,
             s->wgmma ? "wgmma" : "tile", dname(s->dt), dname(s->vdt), s->head_dim, 16 * s->warps,
             s->tile_k, s->kt, s->stages, s->max_segs, w);
  } else if (cap) {
    tile[0] = '\0';
  }
}

void splat__kspec_merge_name(const splat__kspec *s, char *buf, size_t cap) {
  if (s->op == SPLAT__KOP_ATTENTION &&
      (s->program == SPLAT__KPROG_MERGE || (s->tile && s->epi == SPLAT_EPI_SPLIT))) {
    snprintf(buf, cap, "splat_attn_merge_%s_d%d", dname(s->dt), s->head_dim);
  } else if (cap) {
    buf[0] = '\0';
  }
}

int splat__kspec_tile_smem(const splat__kspec *s) {
  if (!s->tile) return 0;
  /* Mirrors SPLAT_SDDMM_SMEM / SPLAT_SPMM_SMEM / SPLAT_ATTN_SMEM of kernels/sddmm.cuh,
   * spmm.cuh, attention_tile.cuh and attention_wgmma.cuh (64 rows, swizzled tiles). */
  const int tq = 16 * s->warps;
  const int tables = s->stages * tq * (s->max_segs * IVAL_BYTES + 4) + tq * 4;
  if (s->op == SPLAT__KOP_SDDMM && s->wgmma) {
    /* sddmm_wgmma.cuh: alignment slack, the K ring (swizzled) and for f32 the lo tile, Q
     * (rows padded by 16 bytes) sharing its buffer with the score staging tile, 8 runs of
     * 32 bytes (kernels/sddmm.cuh SPLAT_SDDMM_RUNS). */
    const int esz = s->dt == SPLAT_F32 ? 4 : 2, lo = s->dt == SPLAT_F32;
    const int q = tq * (s->head_dim + 16 / esz) * esz,
              o = tq * (s->kt + 8) * (s->vdt == SPLAT_F32 ? 4 : 2);
    /* With row stores, 16-byte records of the rows (kernels/sddmm.cuh). */
    return 1024 + (s->stages + lo) * s->kt * s->head_dim * esz + (q > o ? q : o) + 8 * 32 + tables +
           (s->write_mode == SPLAT__WRITE_ROWS ? tq * 16 : 0);
  }
  if (s->op == SPLAT__KOP_SDDMM) {
    const int f32 = s->dt == SPLAT_F32, esz = f32 ? 4 : 2, kstep = f32 ? 8 : 16;
    const int dp = (s->head_dim + kstep - 1) / kstep * kstep, ld = dp + 16 / esz;
    const int osz = s->vdt == SPLAT_F32 ? 4 : 2;
    return (tq + s->stages * s->kt) * ld * esz + tq * (s->kt + 8) * osz + 8 * 32 + tables;
  }
  const int dp = (s->head_dim + 15) / 16 * 16, ld = dp + 8;
  /* The f32 attention tile kernel: rows of head_dim padded to 8 floats, plus 4. */
  if (s->op == SPLAT__KOP_ATTENTION && s->dt == SPLAT_F32 && !s->wgmma)
    return (tq + 2 * s->stages * s->kt) * ((s->head_dim + 7) / 8 * 8 + 4) * 4 + tables;
  if (s->wgmma == SPLAT__WGMMA_WS) {
    /* Q buffers (splat__kspec_ws_qbufs), mbarriers, the tables' spans per warp (16 bytes), a
     * row-id buffer and a task record (48 bytes) a Q buffer; in pass 2's kernels, its staged pass-1
     * rows where they fit (the room below; the kernel stages them when SPLAT_TILE_SMEM,
     * this size, includes them: SPLAT_WS_STAGED; a barrier a warpgroup in 16 or 32 bytes
     * (SPLAT_WS_PFULL_BYTES), then the rows' O (fp16 in
     * bf16 plans, else floats) and m, l (and a unit) in 16 bytes; attention_common.cuh
     * SPLAT_ROWPART_COPY) */
    const int qbufs = splat__kspec_ws_qbufs(s);
    const int base = 1024 +
                     (qbufs * tq + 2 * s->stages * s->kt) * splat__kspec_ws_cols(s->head_dim) * 2 +
                     8 * (2 * s->stages + 2 * qbufs) + (tables - tq * 4) +
                     s->stages * (tq / 32) * 16 + qbufs * (tq * 4 + 48);
    const int staged =
        (s->warps == 12 ? 32 : 16) + tq * (s->head_dim * (s->dt == SPLAT_BF16 ? 2 : 4) + 16);
    /* The room: a CTA's opt-in; with one warpgroup, half an SM's shared memory (the opt-in
     * and the 1 KB reserved per CTA) less that 1 KB, so two CTAs still share an SM. The
     * kernel stages its rows when its shared memory (SPLAT_TILE_SMEM) includes them. */
    const int optin = s->smem_optin > 0 ? s->smem_optin : 232448;
    const int room = s->warps == 4 ? (optin + 1024) / 2 - 1024 : optin;
    return base + (s->epi == SPLAT_EPI_PASS2 && base + staged <= room ? staged : 0);
  }
  if (s->wgmma) return 1024 + (tq + 2 * s->stages * s->kt) * s->head_dim * 2 + tables;
  if (s->op == SPLAT__KOP_ATTENTION) return (tq + 2 * s->stages * s->kt) * ld * 2 + tables;
  /* SpMM: the V ring and the P slice in V's dtype (f32 rows padded to 8 floats, plus 4). */
  if (s->dt == SPLAT_F32)
    return s->stages * s->kt * ((s->head_dim + 7) / 8 * 8 + 4) * 4 + tq * (s->kt + 8) * 4 + tables;
  return s->stages * s->kt * ld * 2 + tq * (s->kt + 8) * 2 + tables;
}

static int dcode(splat_dtype d) {
  return d == SPLAT_F32 ? 0 : d == SPLAT_F16 ? 1 : 2;
}

int splat__kspec_use_wgmma(splat__kspec *s, int kind, int warpgroups, int kt) {
  const int hd = s->head_dim;
  /* The warp-specialised kernel's head_dims: 32 .. 256 (multiples of 8, run as 64, 128, 192
   * or 256 columns: kernels/attention_ws.cuh SPLAT_DP); the wgmma kernel's 64 and 128.
   * Head_dim 32 as 64 columns against the mma.sync kernel on an H100: windows, blocks,
   * dilated and strided windows 1.10-1.24x (v54); with the producer of v55, fixed(256,32)
   * 1.56-1.77x, strided(64) | window(64) 1.04x, BigBird 0.98-1.03x, longformer(256,64)
   * 0.93-0.98x (bench/NOTES.md v56). f32 stays on the mma.sync kernel (3xTF32). */
  const int ws_dim = hd % 8 == 0 && hd >= 32 && hd <= 256;
  if (s->op != SPLAT__KOP_ATTENTION || !s->tile || s->dt == SPLAT_F32 || !ws_dim || s->kt != 64 ||
      kind == SPLAT__WGMMA_NONE || (kind != SPLAT__WGMMA_WS && hd != 64 && hd != 128))
    return 0;
  if (hd > 128) {
    /* Head_dim 136 .. 256 (the warp-specialised kernel, by the test above), 64-key
     * sub-tiles in 2 stages, one CTA an SM; two consumer warpgroups by default where rows
     * have at most 6 segments (with 7, the consumers spilled at 200 registers and the
     * interval tables exceed the shared memory), else one. As 192 columns (136 .. 192): O
     * is 96 registers a thread, stages of 48 KB (bench/NOTES.md v36). As 256 (200 .. 256):
     * O is 128 registers, stages of 64 KB, and two warpgroups take one Q buffer
     * (splat__kspec_ws_qbufs) where rows have at most 3 segments (from 4 the consumers spill
     * 8 bytes at 208 registers; bench/NOTES.md v72). */
    s->wgmma = SPLAT__WGMMA_WS;
    s->warps = warpgroups != 1 && s->max_segs <= (hd <= 192 ? 6 : 3) ? 8 : 4;
    s->stages = 2;
    return 1;
  }
  if (kind == SPLAT__WGMMA_WS) {
    /* Two consumer warpgroups by default. head_dim 128 needs them here: with one, two CTAs
     * share an SM and the consumers' registers (O, S, P and the descriptors) fit beside
     * the producer's only in some kernels (splat__kspec_ws_narrow). The K/V ring: 4 stages
     * at head_dim 64, 3 at 128. Head_dim 64 with two warpgroups takes 128-key sub-tiles
     * where the key tile allows (4 stages, splat__kspec_plan drops to 3 where they do not
     * fit): half the per-sub-tile work of the walk, the barriers and the row statistics. */
    const int wgs = warpgroups ? warpgroups : 2;
    if (s->head_dim <= 64 || wgs >= 2) {
      s->wgmma = SPLAT__WGMMA_WS;
      s->warps = 4 * wgs;
      s->stages = s->head_dim <= 64 ? 4 : 3;
      /* Three (192-row tiles, splat__kspec_plan): the producer without the gather
       * (kernels/attention_ws.cuh SPLAT_WS_GATHER); at 64 columns 128-key sub-tiles in 4
       * stages (194 KB), at 128 64-key ones in 3 (205 KB; bench/NOTES.md v73). */
      s->gather = wgs != 3;
      if (s->head_dim <= 64 && (wgs == 3 || (wgs == 2 && kt != 64)) && s->tile_k % 128 == 0) {
        s->kt = 128;
        s->stages = 4;
      }
      return 1;
    }
    /* head_dim 128 with one warpgroup: the wgmma kernel (72 .. 120: neither). */
    if (hd != 128) return 0;
  }
  const int wgs = warpgroups == 2 ? 2 : 1;
  s->wgmma = SPLAT__WGMMA_SYNC;
  s->warps = 4 * wgs;
  /* Two warpgroups: one CTA per SM (registers), so one more stage to cover latency. */
  if (wgs > 1) s->stages = s->head_dim <= 64 ? 4 : 3;
  return 1;
}

int splat__kspec_use_sddmm_wgmma(splat__kspec *s, int smem_optin) {
  /* One warpgroup a CTA; head_dim 64 or 128. f32: whole 128-byte panels, a row's 16-byte
   * chunks dividing the 128 threads (each thread splits the same column of chunks it
   * gathered; head_dim 96's 24 chunks do not), Q's hi / lo registers within budget; 32- or
   * 64-key sub-tiles. f16 / bf16: 64- or 128-key sub-tiles (wgmma m64n64k16, m64n128k16). */
  const int f32 = s->dt == SPLAT_F32;
  if (s->op == SPLAT__KOP_SDDMM && s->wgmma) return 1; /* already */
  if (s->op != SPLAT__KOP_SDDMM || !s->tile || s->warps != 4 ||
      (s->head_dim != 64 && s->head_dim != 128) || (s->kt != 64 && !(f32 && s->kt == 32)))
    return 0;
  s->wgmma = SPLAT__WGMMA_SYNC;
  /* 16-bit at head_dim 64: 128-key sub-tiles in 2 stages where the key tile allows (half
   * the sub-tiles' fixed costs; 54 KB and 127 registers, 4 CTAs an SM): 1.03-1.10x over 64
   * keys in 3 stages; at head_dim 128 they were 0.88x (bench/NOTES.md v13.1). */
  if (!f32 && s->head_dim == 64 && s->tile_k % 128 == 0) {
    s->kt = 128;
    s->stages = 2;
  }
  /* The write-out from shifted staging rows with 128-key sub-tiles of 16-bit scores (256
   * bytes a row): by bulk copies 1.02-1.12x at head_dim 64 over the lanes' stores; at
   * head_dim 128, whose 64-key sub-tiles give copies of 128 bytes, 0.91-0.96x (bench/NOTES.md
   * v14). The warp's row stores instead, one range a row and sub-tile (a row's other ranges
   * by the lanes): window 1.01-1.03x, blocked 1.08-1.10x over the bulk copies (v15);
   * regrouped rows too since their row width keeps them off each other's sectors (dilated
   * 1.03-1.04x at 4096, 0.98x at 16384), rows of two intervals with the evict-first policy
   * (longformer 1.03x; v16). f32 scores keep 16-byte stores (not measured). */
  s->write_mode = s->vdt == SPLAT_F32 || s->kt < 128 ? SPLAT__WRITE_LANES : SPLAT__WRITE_ROWS;
  if (smem_optin > 0 && splat__kspec_tile_smem(s) > smem_optin) {
    s->wgmma = SPLAT__WGMMA_NONE;
    portable_sub_tiles(s);
    return 0;
  }
  return 1;
}

splat_status splat__kspec_env_sddmm(splat__kspec *specs, int smem_optin) {
  int on;
  splat_status st = splat__env_switch("SPLAT_SDDMM_WGMMA", "the R-SDDMM on wgmma on sm_90a",
                                      "the R-SDDMM on mma.sync, the portable kernel", &on);
  splat__kspec *s = &specs[SPLAT__KOP_SDDMM];
  if (st != SPLAT_OK || on || !s->wgmma) return st;
  s->wgmma = SPLAT__WGMMA_NONE;
  portable_sub_tiles(s); /* the portable kernel's own sub-tiles (not wgmma's 128 keys) */
  if (s->tile && smem_optin > 0 && splat__kspec_tile_smem(s) > smem_optin) s->tile = 0;
  return SPLAT_OK;
}

void splat__kspec_write_lanes(splat__kspec *specs, int rows_permuted) {
  splat__kspec *s = &specs[SPLAT__KOP_SDDMM];
  s->write_lanes = rows_permuted && !s->write_mode ? 4 : 2;
}

splat_status splat__kspec_env_attn(int *kind, int *warpgroups, int *kt) {
  const char *ws = getenv("SPLAT_ATTN_WS"), *wg = getenv("SPLAT_ATTN_WARPGROUPS");
  const char *k = getenv("SPLAT_ATTN_KT");
  *kind = SPLAT__WGMMA_WS;
  *warpgroups = 0;
  *kt = 0;
  if (k && *k) {
    if (strcmp(k, "64") && strcmp(k, "128")) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "SPLAT_ATTN_KT=%s unsupported: must be 64 or 128 (keys per sub-tile of "
                         "the warp-specialised attention kernel)",
                         k);
    }
    *kt = atoi(k);
  }
  if (ws && *ws && strcmp(ws, "1")) {
    if (strcmp(ws, "0")) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "SPLAT_ATTN_WS=%s unsupported: must be 1 (the default: the "
                         "warp-specialised sm_90a fused attention kernel) or 0 (the wgmma "
                         "kernel without warp specialisation)",
                         ws);
    }
    *kind = SPLAT__WGMMA_SYNC;
  }
  if (!wg || !*wg) return SPLAT_OK;
  if (!strcmp(wg, "1") || !strcmp(wg, "2") || !strcmp(wg, "3")) {
    *warpgroups = wg[0] - '0';
    return SPLAT_OK;
  }
  return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                     "SPLAT_ATTN_WARPGROUPS=%s unsupported: must be 1, 2 or 3 (consumer "
                     "warpgroups of the sm_90a fused attention kernel; 3: query tiles of 192 "
                     "rows at head_dim 32 .. 128 where TMA serves every key sub-tile)",
                     wg);
}

int splat__kspec_rows192(splat_dtype dt, int64_t head_dim) {
  /* 72 .. 120 (as 128 columns) spill 12 bytes on three warpgroups. */
  return dt != SPLAT_F32 && head_dim >= 32 && head_dim % 8 == 0 &&
         (head_dim <= 64 || head_dim == 128);
}

int splat__kspec_default_tile_q(splat_dtype dt, int64_t head_dim) {
  const char *wg = getenv("SPLAT_ATTN_WARPGROUPS");
  return wg && !strcmp(wg, "3") && splat__kspec_rows192(dt, head_dim) ? 192 : 128;
}

splat_status splat__kspec_env_persistent(int *on) {
  return splat__env_switch("SPLAT_ATTN_PERSISTENT",
                           "a persistent grid for the warp-specialised attention kernel",
                           "one CTA per work item", on);
}

void splat__kspec_plan(splat__kspec *specs, splat_dtype dt, int head_dim, int max_segs, int tile_q,
                       int tile_k, int tile_rows, int smem_optin, const char *arch, int kind,
                       int warpgroups, int kt) {
  /* Two warpgroups only where a query tile fills them: tile_q >= 128 and, at head_dim 64
   * (where one warpgroup has the warp-specialised kernel too), tiles of more than 64 rows.
   * Phase classes of 64 rows (strided(64) at 4096) leave the second warpgroup idle and
   * their 64-key tiles half-fill 128-key sub-tiles: one warpgroup runs them ~1.5x faster
   * (bench/NOTES.md, stop 14); so at 256 columns, where two warpgroups also take one Q
   * buffer (v72). At head_dim 128 such tiles mark the warp-specialised kernel narrow: one
   * warpgroup where its epilogue allows (splat__kspec_ws_narrow). */
  const int full =
      tile_q >= 128 && ((head_dim > 64 && splat__kspec_ws_cols(head_dim) != 256) || tile_rows > 64);
  const int narrow = tile_q >= 128 && tile_rows <= 64 && !warpgroups;
  /* Three consumer warpgroups (warpgroups 3: the caller's word that TMA serves every key
   * sub-tile, plan_for) on tiles of 192 rows at head_dim 32 .. 64 with 128-key sub-tiles
   * (windows 1.09-1.15x at 16384 on an H100, blocks whose size 192 does not divide slower:
   * bench/NOTES.md v58), or at 128 with the 64-key ones it always takes (v73); else as for
   * warpgroups 0. */
  const int three = warpgroups == 3 && kind == SPLAT__WGMMA_WS && dt != SPLAT_F32 &&
                    tile_q == 192 && tile_rows > 128 && head_dim <= 128 &&
                    (head_dim > 64 || (tile_k % 128 == 0 && kt != 64));
  if (warpgroups == 3 && !three) warpgroups = 0;
  for (int op = 0; op < SPLAT__KOP_COUNT; op++) {
    splat__kspec *s = &specs[op];
    splat__kspec_init(s, (splat__kop)op, dt, dt, dt, head_dim, max_segs, tile_q, tile_k);
    s->smem_optin = smem_optin;
    if (arch && !strcmp(arch, "sm_90a")) {
      const splat__kspec plain = *s;
      const int wgs = three ? 3 : full ? warpgroups : 1;
      splat__kspec_use_wgmma(s, kind, wgs, kt);
      /* The warp-specialised kernel's shared memory over the limit: 128-key sub-tiles in
       * 3 stages, else 64-key ones, else the wgmma kernel. */
      if (s->wgmma == SPLAT__WGMMA_WS && s->kt > 64 && s->stages > 3 && smem_optin > 0 &&
          splat__kspec_tile_smem(s) > smem_optin)
        s->stages = 3;
      if (s->wgmma == SPLAT__WGMMA_WS && s->kt > 64 && smem_optin > 0 &&
          splat__kspec_tile_smem(s) > smem_optin) {
        *s = plain;
        splat__kspec_use_wgmma(s, kind, three ? 2 : wgs, 64);
      }
      /* Three warpgroups at 128 columns (64-key sub-tiles already) over it: two. */
      if (s->wgmma == SPLAT__WGMMA_WS && s->warps == 12 && smem_optin > 0 &&
          splat__kspec_tile_smem(s) > smem_optin) {
        *s = plain;
        splat__kspec_use_wgmma(s, kind, 2, 64);
      }
      if (s->wgmma == SPLAT__WGMMA_WS && smem_optin > 0 && splat__kspec_tile_smem(s) > smem_optin) {
        *s = plain;
        splat__kspec_use_wgmma(s, SPLAT__WGMMA_SYNC, wgs, 0);
      }
      splat__kspec_use_sddmm_wgmma(s, smem_optin);
      s->narrow = narrow && s->wgmma == SPLAT__WGMMA_WS && s->warps == 8 && head_dim == 128 &&
                  max_segs <= 2;
    }
    /* The 8-warp f32 attention kernel over the limit (sm_80's 163 KB at head_dim 256): 4. */
    if (s->tile && !s->wgmma && s->warps == 8 && smem_optin > 0 &&
        splat__kspec_tile_smem(s) > smem_optin)
      s->warps = 4;
    if (s->tile && smem_optin > 0 && splat__kspec_tile_smem(s) > smem_optin) s->tile = 0;
  }
}

/* splat__kspec_plan for a report, with K segments a row, key tiles of tile_k and query
 * tiles of at most tile_rows rows, under the environment's attention kernel. */
static splat_status plan_for(splat__kspec *specs, const splat_report *rep, splat_dtype dt,
                             int head_dim, int smem_optin, const char *arch, int segs, int tile_k,
                             int tile_rows, int tma_all) {
  int kind, warpgroups, kt;
  splat_status st = splat__kspec_env_attn(&kind, &warpgroups, &kt);
  if (st != SPLAT_OK) return st;
  /* Three consumer warpgroups on 192-row tiles where TMA serves every key sub-tile. */
  if (rep->tile_q == 192 && tma_all && !warpgroups) warpgroups = 3;
  if (!tma_all && warpgroups == 3) warpgroups = 0;
  splat__kspec_plan(specs, dt, head_dim, segs, rep->tile_q, tile_k, tile_rows, smem_optin, arch,
                    kind, warpgroups, kt);
  splat__kspec *a = &specs[SPLAT__KOP_ATTENTION];
  int trace;
  st = splat__env_flag("SPLAT_ATTN_TRACE",
                       "the warp-specialised attention kernel writes each work item's "
                       "timestamps over the log-sum-exp",
                       "the log-sum-exp", &trace);
  a->trace = trace && a->tile && a->wgmma == SPLAT__WGMMA_WS;
  return st;
}

splat_status splat__kspec_for_plan(splat__kspec *specs, const splat_report *rep, splat_dtype dt,
                                   int head_dim, int smem_optin, const char *arch, int tma_all) {
  /* The report's tile rows count for rows of one segment: a mask whose rows have several
   * may run two passes, specialised apart (splat__kspec_for_pass). */
  const int segs = splat__kspec_table_segs(rep);
  splat_status st = plan_for(specs, rep, dt, head_dim, smem_optin, arch, segs, rep->tile_k,
                             segs > 1 ? rep->tile_q : rep->tile_rows_max, tma_all);
  if (st != SPLAT_OK) return st;
  st = splat__kspec_env_sddmm(specs, smem_optin);
  splat__kspec_write_lanes(specs, rep->rows_permuted);
  return st;
}

splat_status splat__kspec_for_pass(splat__kspec *out, const splat_report *rep, splat_dtype dt,
                                   int head_dim, int smem_optin, const char *arch, int segs,
                                   int tile_q, int tile_k, int tile_rows, int tma_all, int pass) {
  splat__kspec specs[SPLAT__KOP_COUNT];
  splat_report r = *rep; /* the pass's own query tile */
  r.tile_q = tile_q;
  splat_status st =
      plan_for(specs, &r, dt, head_dim, smem_optin, arch, segs, tile_k, tile_rows, tma_all);
  if (st != SPLAT_OK) return st;
  *out = specs[SPLAT__KOP_ATTENTION];
  /* f32 above head_dim 128 (O in column panels) runs one pass only. */
  if (dt == SPLAT_F32 && head_dim > 128) out->tile = 0;
  if (out->tile) {
    out->epi = pass == 1 ? SPLAT_EPI_PASS1 : SPLAT_EPI_PASS2;
    out->program = pass == 1 ? SPLAT__KPROG_TILE : SPLAT__KPROG_PASS2;
    splat__kspec_ws_narrow(out);
    /* The pass's epilogue may take more shared memory (pass 2's staged rows). */
    if (smem_optin > 0 && splat__kspec_tile_smem(out) > smem_optin) out->tile = 0;
  }
  return SPLAT_OK;
}

void splat__kspec_ws_narrow(splat__kspec *s) {
  /* 256 columns on two consumer warpgroups (208 registers a consumer) compile without spills
   * with the plain epilogue, pass 1 in bf16, and pass 1 in f16 and pass 2 at one segment a
   * row; the split epilogue spills 16-84 bytes, f16's pass 1 and pass 2 above one segment
   * 16-24: one warpgroup for those. */
  if (s->tile && s->wgmma == SPLAT__WGMMA_WS && s->warps == 8 &&
      splat__kspec_ws_cols(s->head_dim) == 256 &&
      (s->epi == SPLAT_EPI_SPLIT ||
       (s->max_segs > 1 &&
        (s->epi == SPLAT_EPI_PASS2 || (s->epi == SPLAT_EPI_PASS1 && s->dt != SPLAT_BF16)))))
    s->warps = 4;
  if (!s->narrow || !s->tile) return;
  const int one = s->epi == SPLAT_EPI_PLAIN || s->epi == SPLAT_EPI_PASS2 ||
                  (s->epi == SPLAT_EPI_PASS1 && s->dt == SPLAT_BF16);
  /* Either way from either (epilogues set again). */
  s->warps = one ? 4 : 8;
  s->stages = one ? 2 : 3;
}

void splat__kspec_attn_epilogues(splat__kspec *specs, int two_pass, int split) {
  splat__kspec *s = &specs[SPLAT__KOP_ATTENTION];
  /* f32 above head_dim 128 (O in column panels) runs no split tiles: the row kernel then. */
  if (s->tile && split && s->dt == SPLAT_F32 && s->head_dim > 128) s->tile = 0;
  s->epi = !s->tile   ? SPLAT_EPI_PLAIN
           : two_pass ? SPLAT_EPI_PASS1
           : split    ? SPLAT_EPI_SPLIT
                      : SPLAT_EPI_PLAIN;
  /* Split tiles on two consumer warpgroups, not three (whose split epilogue spills 124-204
   * bytes): they take the 192-row tiles as row blocks of 128, with the gather. */
  if (s->epi == SPLAT_EPI_SPLIT && s->wgmma == SPLAT__WGMMA_WS && s->warps == 12) {
    s->warps = 8;
    s->gather = 1;
  }
  splat__kspec_ws_narrow(s);
}

/* The row kernel's program of an op: the fields its kernel depends on, every other field at
 * its no-tile value (so one row program serves every tile kernel and segment count K of
 * the op: the row kernels walk a row's segments, however many, without tables). */
static splat__kspec rows_program(const splat__kspec *s) {
  splat__kspec r; /* tile_q 0: no tile kernel */
  splat__kspec_init(&r, s->op, s->dt, s->vdt, s->pdt, s->head_dim, 1, 0, 0);
  r.row_warps = s->row_warps;
  return r;
}

int splat__kspec_programs(const splat__kspec *s, const splat__kspec *pass2, splat__kspec *out) {
  out[0] = rows_program(s);
  if (!s->tile) return 1;
  out[1] = *s;
  out[1].program = SPLAT__KPROG_TILE;
  if (s->op != SPLAT__KOP_ATTENTION || s->epi == SPLAT_EPI_PLAIN) return 2;
  if (s->epi == SPLAT_EPI_PASS1) {
    out[2] = pass2 ? *pass2 : *s;
    out[2].epi = SPLAT_EPI_PASS2;
    out[2].program = SPLAT__KPROG_PASS2;
  } else {
    out[2] = rows_program(s); /* the merge kernel depends on what the row kernel does */
    out[2].program = SPLAT__KPROG_MERGE;
  }
  return 3;
}

/* Whether a spec's program is one of the op's tile kernels. */
static int is_tile_program(const splat__kspec *s) {
  return s->tile && (s->program == SPLAT__KPROG_TILE || s->program == SPLAT__KPROG_PASS2);
}

void splat__kspec_kernel(const splat__kspec *s, char *buf, size_t cap) {
  char rows[160], tile[160], merge[160];
  splat__kspec_names(s, rows, tile, sizeof rows);
  splat__kspec_merge_name(s, merge, sizeof merge);
  snprintf(buf, cap, "%s",
           is_tile_program(s)                 ? tile
           : s->program == SPLAT__KPROG_MERGE ? merge
                                              : rows);
}

void splat__kspec_program(const splat__kspec *s, char *buf, size_t cap) {
  char kernel[160];
  splat__kspec_kernel(s, kernel, sizeof kernel);
  snprintf(buf, cap, "%s.cu", kernel);
}

/* Prelude values: NINT integers as text (SPLAT_TILE_SMEM: the dynamic shared memory the
 * launch gives the tile kernel, which each tile kernel static_asserts against its own
 * layout), then the kernel names (row and tile; the merge program: its kernel's only), the
 * flags of some kernels (SPLAT_ATTN_EPI, SPLAT_WLPR, SPLAT_SDDMM_ROWSTORE) and which kernels the
 * program leaves out (SPLAT_NO_ROWS or SPLAT_NO_TILE); kept alive for splat__codegen. */
enum { NINT = 11, NDEF = NINT + 7 };

splat_status splat__kspec_source(const splat__kspec *spec, char **out) {
  const int tile_program = is_tile_program(spec);
  const int merge_program = spec->program == SPLAT__KPROG_MERGE;
  splat__kspec rows_only = rows_program(spec);
  rows_only.program = spec->program;
  const splat__kspec *s = tile_program ? spec : &rows_only;
  char rows[160], tile[160], merge[160], comment[1024];
  splat__kspec_names(s, rows, tile, sizeof rows);
  splat__kspec_merge_name(s, merge, sizeof merge);
  const char *N = s->op == SPLAT__KOP_SDDMM     ? "SDDMM"
                  : s->op == SPLAT__KOP_SOFTMAX ? "SOFTMAX"
                  : s->op == SPLAT__KOP_SPMM    ? "SPMM"
                                                : "ATTN";
  char tile_words[512] = "";
  if (s->tile) {
    snprintf(tile_words, sizeof tile_words,
             "; tensor-core tile kernel %s on %s (%d warps = %d query rows per CTA, key tile %d "
             "in sub-tiles of %d keys, %d shared-memory stages, %d bytes of dynamic shared "
             "memory)",
             tile,
             s->wgmma == SPLAT__WGMMA_WS      ? "warp-specialised wgmma + TMA (sm_90a)"
             : s->wgmma && s->dt == SPLAT_F32 ? "3xTF32 wgmma (sm_90a)"
             : s->wgmma                       ? "wgmma (sm_90a)"
             : s->dt == SPLAT_F32             ? "3xTF32 mma.sync"
                                              : "mma.sync",
             s->warps, 16 * s->warps, s->tile_k, s->kt, s->stages, splat__kspec_tile_smem(s));
  }
  if (s->tile && s->op == SPLAT__KOP_ATTENTION) {
    const size_t used = strlen(tile_words);
    snprintf(tile_words + used, sizeof tile_words - used, ", %s",
             s->epi == SPLAT_EPI_SPLIT   ? "with the partial results of split tiles' chunks"
             : s->epi == SPLAT_EPI_PASS1 ? "pass 1 of two (every row's partial result left)"
             : s->epi == SPLAT_EPI_PASS2 ? "pass 2 of two (pass 1's partial results merged)"
                                         : "one pass, no split tiles");
  }
  char rows_words[300];
  if (tile_program) {
    snprintf(rows_words, sizeof rows_words, "the tile kernel's program (row kernel %s: its own)",
             rows);
  } else if (merge_program) {
    snprintf(rows_words, sizeof rows_words,
             "merge kernel %s of split tiles (their chunks' partial results to the outputs)",
             merge);
  } else {
    snprintf(rows_words, sizeof rows_words, "row kernel %s (%d warps, one row per warp)", rows,
             s->row_warps);
  }
  char segs_words[64] = "";
  if (tile_program) {
    snprintf(segs_words, sizeof segs_words, ", up to %d affine segments per row", s->max_segs);
  }
  snprintf(comment, sizeof comment,
           "splat generated kernel source: %s for %s inputs, %s values%s%s, head_dim %d%s; %s%s",
           op_name(s->op), dname(s->dt), dname(s->vdt), s->op == SPLAT__KOP_SOFTMAX ? " to " : "",
           s->op == SPLAT__KOP_SOFTMAX ? dname(s->pdt) : "", s->head_dim, segs_words, rows_words,
           tile_words);
  const int ivals[] = {dcode(s->dt),
                       dcode(s->vdt),
                       dcode(s->pdt),
                       s->head_dim > 0 ? s->head_dim : 1,
                       s->max_segs,
                       s->warps > 0 ? s->warps : 1,
                       s->kt > 0 ? s->kt : 16,
                       s->tile_k > 0 ? s->tile_k : 16,
                       s->stages,
                       s->row_warps,
                       splat__kspec_tile_smem(s)};
  static const char *inames[] = {"SPLAT_DT",        "SPLAT_SDT",      "SPLAT_PDT",
                                 "SPLAT_HEAD_DIM",  "SPLAT_MAX_SEGS", "SPLAT_WARPS",
                                 "SPLAT_KT",        "SPLAT_TILE_K",   "SPLAT_STAGES",
                                 "SPLAT_ROW_WARPS", "SPLAT_TILE_SMEM"};
  char text[NINT][16], rows_name[48], tile_name[48], lanes[16], epi[4];
  splat__define defs[NDEF];
  int n = 0;
  for (int i = 0; i < NINT; i++, n++) {
    snprintf(text[i], sizeof text[i], "%d", ivals[i]);
    defs[n].name = inames[i];
    defs[n].value = text[i];
  }
  if (merge_program) {
    defs[n].name = "SPLAT_ATTN_MERGE_NAME";
    defs[n++].value = merge;
    return splat__codegen("attention_merge.cuh", defs, n, comment, out);
  }
  snprintf(rows_name, sizeof rows_name, "SPLAT_%s_ROWS_NAME", N);
  defs[n].name = rows_name;
  defs[n++].value = rows;
  if (s->op == SPLAT__KOP_ATTENTION && tile_program) {
    snprintf(epi, sizeof epi, "%d", s->epi);
    defs[n].name = "SPLAT_ATTN_EPI";
    defs[n++].value = epi;
    defs[n].name = "SPLAT_WS_TRACE";
    defs[n++].value = s->trace ? "1" : "0";
    if (!s->gather) { /* only then: every other kernel's source stays as it was */
      defs[n].name = "SPLAT_WS_GATHER";
      defs[n++].value = "0";
    }
  }
  if (s->op == SPLAT__KOP_SDDMM && tile_program) {
    snprintf(lanes, sizeof lanes, "%d", s->write_lanes);
    defs[n].name = "SPLAT_WLPR";
    defs[n++].value = lanes;
    defs[n].name = "SPLAT_SDDMM_ROWSTORE";
    defs[n++].value = s->write_mode == SPLAT__WRITE_ROWS ? "1" : "0";
  }
  if (tile_program) {
    snprintf(tile_name, sizeof tile_name, "SPLAT_%s_TILE_NAME", N);
    defs[n].name = tile_name;
    defs[n++].value = tile;
    defs[n].name = "SPLAT_NO_ROWS";
    defs[n++].value = "1";
  } else {
    defs[n].name = "SPLAT_NO_TILE";
    defs[n++].value = "1";
  }
  return splat__codegen(spec_template(s), defs, n, comment, out);
}
