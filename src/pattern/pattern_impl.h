/* pattern_impl.h — private to src/pattern: the expression tree behind a splat_pattern,
 * explicit bit masks, and the helpers the pattern files share (closed-form row
 * generators, segment-list algebra, bit rows). */
#ifndef SPLAT_PATTERN_IMPL_H
#define SPLAT_PATTERN_IMPL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pattern/pattern.h"

/* Largest magnitude of an integer argument in a spec (seeds excepted): keeps every
 * closed-form computation inside int64 without overflow checks. */
#define SPLAT__SPEC_INT_MAX ((int64_t)1 << 53)
/* Segments a node's list may hold on the segment path before the row falls back to
 * bits (bigbird leaves get room for all their blocks). */
#define SPLAT__NODE_SEGS 64

typedef enum splat__pnode_kind {
  SPLAT__PN_DENSE,
  SPLAT__PN_CAUSAL,
  SPLAT__PN_WINDOW,     /* a = {l, r} */
  SPLAT__PN_DILATED,    /* a = {w, d} */
  SPLAT__PN_STRIDED,    /* a = {s} */
  SPLAT__PN_FIXED,      /* a = {b, c} */
  SPLAT__PN_BLOCKED,    /* a = {b} */
  SPLAT__PN_GLOBAL,     /* a = {g} */
  SPLAT__PN_BIGBIRD,    /* a = {b, w, g, r}, seed */
  SPLAT__PN_LONGFORMER, /* a = {w, g} */
  SPLAT__PN_MASK,       /* mask */
  SPLAT__PN_OR,         /* left | right */
  SPLAT__PN_AND         /* left & right */
} splat__pnode_kind;

/* An explicit mask as bit rows: bit j of row i is word j/64, bit j%64 of
 * bits[i * words]. Bits past cols are zero. Shared between patterns (refcounted). */
typedef struct splat__bitmask {
  atomic_int refs;
  int64_t rows, cols;
  int64_t words; /* per row: ceil(cols / 64) */
  uint64_t *bits;
} splat__bitmask;

typedef struct splat__pnode {
  splat__pnode_kind kind;
  int64_t a[4];
  uint64_t seed;
  int left, right; /* OR / AND: indices of the operands (always < this node's index) */
  splat__bitmask *mask;
} splat__pnode;

/* Nodes are stored in post-order: operands precede the operator; the root is last. */
struct splat_pattern {
  int64_t seq_q, seq_k;
  int n_nodes;
  splat__pnode *nodes;
  char *spec; /* canonical text */
};

/* ---- parse.c */
/* Parses spec into a node array (malloc'ed, post-order). On failure returns
 * SPLAT_ERR_PARSE (or the mask loader's status) with the message recorded. */
splat_status splat__parse_spec(const char *spec, int64_t seq_q, int64_t seq_k, splat__pnode **nodes,
                               int *n_nodes);
/* Releases the masks a node array references and frees it. */
void splat__nodes_free(splat__pnode *nodes, int n);

/* ---- mask.c */
splat__bitmask *splat__bitmask_new(int64_t rows, int64_t cols); /* zeroed; NULL on OOM */
void splat__bitmask_retain(splat__bitmask *m);
void splat__bitmask_release(splat__bitmask *m);
/* Loads a 2-d .npy file (bool / uint8 / int8, C or Fortran order). `who` prefixes
 * messages. */
splat_status splat__npy_load(const char *path, const char *who, splat__bitmask **out);

/* ---- closed_form.c */
/* Scratch a bigbird leaf needs: room for its random blocks and a bitset over ranks. */
typedef struct splat__bigbird_scratch {
  int64_t *blocks;
  uint64_t *taken;
  int64_t blocks_cap; /* entries of blocks */
  int64_t taken_words;
} splat__bigbird_scratch;
/* Row i of a closed-form leaf as canonical segments (sorted, disjoint spans). Returns
 * the count or -1 when more than cap are needed. */
int splat__leaf_segments(const splat__pnode *n, int64_t i, int64_t seq_k, splat__segment *out,
                         int cap, splat__bigbird_scratch *bb);
/* Rows after i whose segments repeat row i's: rows i..*same have exactly row i's
 * segments, rows i..*shifted have them moved right by one column a row (row r: every
 * start + r - i). Both >= i, and may run past the last row (INT64_MAX: forever). */
void splat__leaf_run(const splat__pnode *n, int64_t i, int64_t seq_k, int64_t *same,
                     int64_t *shifted);
/* Most segments splat__leaf_segments can return for this leaf. */
int64_t splat__leaf_max_segments(const splat__pnode *n, int64_t seq_k);
/* The splitmix64 step used by bigbird (documented in docs/patterns.md). */
uint64_t splat__splitmix64(uint64_t *state);

/* ---- segment_algebra.c */
/* Canonical segment for count runs of width columns, stride apart (values int64). */
splat__segment splat__seg_canon(int64_t start, int64_t stride, int64_t count, int64_t width);
/* Appends s to out[0..n), merging it into the last segment when they join (adjacent
 * ranges, the next run of a runs/AP segment). Returns the new n or -1 past cap. */
int splat__seg_push(splat__segment *out, int n, int cap, splat__segment s);
/* Appends the part of {start, stride, count, width} inside [lo, hi] as at most three
 * canonical pieces. Returns the new n or -1 past cap. */
int splat__seg_push_clipped(splat__segment *out, int n, int cap, int64_t start, int64_t stride,
                            int64_t count, int64_t width, int64_t lo, int64_t hi);
/* Union / intersection of two canonical lists. Returns the count, or -1 when the
 * result needs more than cap segments or sparse segments cannot be combined exactly
 * in segment form (the caller then falls back to bits). */
int splat__seg_union(const splat__segment *a, int na, const splat__segment *b, int nb,
                     splat__segment *out, int cap);
int splat__seg_intersect(const splat__segment *a, int na, const splat__segment *b, int nb,
                         splat__segment *out, int cap);

/* ---- bitrow.c */
void splat__bits_set_range(uint64_t *w, int64_t lo, int64_t hi); /* inclusive */
void splat__bits_set_segment(uint64_t *w, splat__segment s);
/* Compresses bits [0, nbits) into canonical segments, greedily left to right.
 * Returns the count or -1 past cap. */
int splat__bits_compress(const uint64_t *w, int64_t nwords, splat__segment *out, int cap);
/* Writes the set bits' indices in increasing order; returns their number. */
int64_t splat__bits_expand(const uint64_t *w, int64_t nwords, int32_t *out);
int64_t splat__bits_count(const uint64_t *w, int64_t nwords);

/* Integer helpers of the row generators and the segment algebra. */
static inline int64_t imin(int64_t a, int64_t b) {
  return a < b ? a : b;
}
static inline int64_t imax(int64_t a, int64_t b) {
  return a > b ? a : b;
}
/* Floor and ceiling of a / b for b > 0. */
static inline int64_t fdiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline int64_t cdiv(int64_t a, int64_t b) {
  return -fdiv(-a, b);
}

#endif
