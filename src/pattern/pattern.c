/* pattern.c — the public pattern API (parse, masks, union / intersection, accessors,
 * rows), canonical spec text, and the row evaluator: every node of the expression
 * tree evaluated on segment lists, falling back to bit rows for the whole row when a
 * combination cannot stay exact in segment form; and the runs of rows that repeat one. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pattern/pattern_impl.h"

/* ---------------------------------------------------------------- spec text */

typedef struct strbuf {
  char *s;
  size_t len, cap;
  int oom;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) SPLAT__PRINTF(2, 3);
static void sb_printf(strbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? b->cap - b->len : 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
      b->oom = 1;
      return;
    }
    if (b->s && b->len + (size_t)n < b->cap) {
      b->len += (size_t)n;
      return;
    }
    size_t cap = b->cap ? b->cap : 64;
    while (cap <= b->len + (size_t)n) cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
      b->oom = 1;
      return;
    }
    b->s = s, b->cap = cap;
  }
}

static void print_leaf(strbuf *b, const splat__pnode *n) {
  switch (n->kind) {
    case SPLAT__PN_DENSE:
      sb_printf(b, "dense");
      break;
    case SPLAT__PN_CAUSAL:
      sb_printf(b, "causal");
      break;
    case SPLAT__PN_WINDOW:
      sb_printf(b, "window(%lld,%lld)", (long long)n->a[0], (long long)n->a[1]);
      break;
    case SPLAT__PN_DILATED:
      sb_printf(b, "dilated(%lld,%lld)", (long long)n->a[0], (long long)n->a[1]);
      break;
    case SPLAT__PN_STRIDED:
      sb_printf(b, "strided(%lld)", (long long)n->a[0]);
      break;
    case SPLAT__PN_FIXED:
      sb_printf(b, "fixed(%lld,%lld)", (long long)n->a[0], (long long)n->a[1]);
      break;
    case SPLAT__PN_BLOCKED:
      sb_printf(b, "blocked(%lld)", (long long)n->a[0]);
      break;
    case SPLAT__PN_GLOBAL:
      sb_printf(b, "global(%lld)", (long long)n->a[0]);
      break;
    case SPLAT__PN_BIGBIRD:
      sb_printf(b, "bigbird(%lld,%lld,%lld,%lld,%llu)", (long long)n->a[0], (long long)n->a[1],
                (long long)n->a[2], (long long)n->a[3], (unsigned long long)n->seed);
      break;
    case SPLAT__PN_LONGFORMER:
      sb_printf(b, "longformer(%lld,%lld)", (long long)n->a[0], (long long)n->a[1]);
      break;
    case SPLAT__PN_MASK:
      sb_printf(b, "mask(%lldx%lld)", (long long)n->mask->rows, (long long)n->mask->cols);
      break;
    case SPLAT__PN_OR:
    case SPLAT__PN_AND: /* print_tree writes the operators */
      break;
  }
}

/* One step of printing: literal text, or node k (text NULL) under an intersection or not. */
typedef struct print_item {
  const char *text;
  int k, parent_and;
} print_item;

/* The canonical text of node `root`, with an explicit stack: a chain of terms is as deep
 * as it is long ("a | a | ... | a" of 50000 terms parses), which recursion would pay for
 * in the caller's stack. An operator pops one item and pushes at most five, so 4 items a
 * node plus one bound the stack. */
static void print_tree(strbuf *b, const splat_pattern *p, int root) {
  print_item *stack = malloc(((size_t)p->n_nodes * 4 + 1) * sizeof *stack);
  if (!stack) {
    b->oom = 1;
    return;
  }
  int top = 0;
  stack[top++] = (print_item){NULL, root, 0};
  while (top > 0 && !b->oom) {
    const print_item it = stack[--top];
    if (it.text) {
      sb_printf(b, "%s", it.text);
      continue;
    }
    const splat__pnode *n = &p->nodes[it.k];
    if (n->kind != SPLAT__PN_OR && n->kind != SPLAT__PN_AND) {
      print_leaf(b, n);
      continue;
    }
    const int is_and = n->kind == SPLAT__PN_AND;
    const int paren = it.parent_and && !is_and;
    /* Pushed in the reverse of the printing order. */
    if (paren) stack[top++] = (print_item){")", 0, 0};
    stack[top++] = (print_item){NULL, n->right, is_and};
    stack[top++] = (print_item){is_and ? " & " : " | ", 0, 0};
    stack[top++] = (print_item){NULL, n->left, is_and};
    if (paren) stack[top++] = (print_item){"(", 0, 0};
  }
  free(stack);
}

/* ---------------------------------------------------------------- construction */

static splat_status finish(splat_pattern *p, const char *who, splat_pattern **out) {
  strbuf b = {0};
  print_tree(&b, p, p->n_nodes - 1);
  if (b.oom || !b.s) {
    free(b.s);
    splat_pattern_destroy(p);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "%s: out of memory", who);
  }
  p->spec = b.s;
  *out = p;
  return SPLAT_OK;
}

static splat_status check_seq(const char *who, const char *name, int64_t v) {
  if (v < 1 || v > SPLAT__MAX_SEQ) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s=%lld must be in 1..%lld", who, name,
                       (long long)v, (long long)SPLAT__MAX_SEQ);
  }
  return SPLAT_OK;
}

splat_status splat_pattern_parse(const char *spec, int64_t seq_q, int64_t seq_k,
                                 splat_pattern **out) {
  static const char who[] = "splat_pattern_parse";
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: out is NULL", who);
  *out = NULL;
  if (!spec) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: spec is NULL", who);
  if (seq_q < 1) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: seq_q=%lld must be positive", who,
                       (long long)seq_q);
  }
  splat_status st = check_seq(who, "seq_q", seq_q);
  if (seq_k <= 0) seq_k = seq_q;
  if (!st) st = check_seq(who, "seq_k", seq_k);
  if (st) return st;
  splat_pattern *p = calloc(1, sizeof *p);
  if (!p) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "%s: out of memory", who);
  p->seq_q = seq_q, p->seq_k = seq_k;
  st = splat__parse_spec(spec, seq_q, seq_k, &p->nodes, &p->n_nodes);
  if (st) {
    free(p);
    return st;
  }
  return finish(p, who, out);
}

static splat_status from_bitmask(splat__bitmask *m, const char *who, splat_pattern **out) {
  splat_pattern *p = calloc(1, sizeof *p);
  splat__pnode *nd = calloc(1, sizeof *nd);
  if (!p || !nd) {
    free(p);
    free(nd);
    splat__bitmask_release(m);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "%s: out of memory", who);
  }
  nd->kind = SPLAT__PN_MASK;
  nd->left = nd->right = -1;
  nd->mask = m;
  p->seq_q = m->rows, p->seq_k = m->cols;
  p->nodes = nd, p->n_nodes = 1;
  return finish(p, who, out);
}

splat_status splat_pattern_from_mask(const uint8_t *mask, int64_t seq_q, int64_t seq_k,
                                     splat_pattern **out) {
  static const char who[] = "splat_pattern_from_mask";
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: out is NULL", who);
  *out = NULL;
  if (!mask) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: mask is NULL", who);
  splat_status st = check_seq(who, "seq_q", seq_q);
  if (!st) st = check_seq(who, "seq_k", seq_k);
  if (st) return st;
  splat__bitmask *m = splat__bitmask_new(seq_q, seq_k);
  if (!m) {
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "%s: out of memory for a %lldx%lld mask", who,
                       (long long)seq_q, (long long)seq_k);
  }
  for (int64_t i = 0; i < seq_q; i++) {
    const uint8_t *row = mask + i * seq_k;
    uint64_t *w = m->bits + i * m->words;
    for (int64_t j = 0; j < seq_k; j++) {
      if (row[j]) w[j >> 6] |= (uint64_t)1 << (j & 63);
    }
  }
  return from_bitmask(m, who, out);
}

splat_status splat_pattern_from_npy(const char *path, splat_pattern **out) {
  static const char who[] = "splat_pattern_from_npy";
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: out is NULL", who);
  *out = NULL;
  if (!path) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: path is NULL", who);
  splat__bitmask *m = NULL;
  splat_status st = splat__npy_load(path, who, &m);
  if (st) return st;
  return from_bitmask(m, who, out);
}

static splat_status combine(const splat_pattern *a, const splat_pattern *b, splat__pnode_kind kind,
                            const char *who, splat_pattern **out) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: out is NULL", who);
  *out = NULL;
  if (!a || !b) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: %s is NULL", who, !a ? "a" : "b");
  }
  if (a->seq_q != b->seq_q || a->seq_k != b->seq_k) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: a is %lldx%lld but b is %lldx%lld; shapes (seq_q x seq_k) must match",
                       who, (long long)a->seq_q, (long long)a->seq_k, (long long)b->seq_q,
                       (long long)b->seq_k);
  }
  splat_pattern *p = calloc(1, sizeof *p);
  const int n = a->n_nodes + b->n_nodes + 1;
  splat__pnode *nodes = malloc((size_t)n * sizeof *nodes);
  if (!p || !nodes) {
    free(p);
    free(nodes);
    return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "%s: out of memory", who);
  }
  memcpy(nodes, a->nodes, (size_t)a->n_nodes * sizeof *nodes);
  memcpy(nodes + a->n_nodes, b->nodes, (size_t)b->n_nodes * sizeof *nodes);
  for (int k = a->n_nodes; k < n - 1; k++) {
    if (nodes[k].kind == SPLAT__PN_OR || nodes[k].kind == SPLAT__PN_AND) {
      nodes[k].left += a->n_nodes, nodes[k].right += a->n_nodes;
    }
  }
  for (int k = 0; k < n - 1; k++) splat__bitmask_retain(nodes[k].mask);
  memset(&nodes[n - 1], 0, sizeof nodes[n - 1]);
  nodes[n - 1].kind = kind;
  nodes[n - 1].left = a->n_nodes - 1, nodes[n - 1].right = n - 2;
  p->seq_q = a->seq_q, p->seq_k = a->seq_k;
  p->nodes = nodes, p->n_nodes = n;
  return finish(p, who, out);
}

splat_status splat_pattern_union(const splat_pattern *a, const splat_pattern *b,
                                 splat_pattern **out) {
  return combine(a, b, SPLAT__PN_OR, "splat_pattern_union", out);
}

splat_status splat_pattern_intersect(const splat_pattern *a, const splat_pattern *b,
                                     splat_pattern **out) {
  return combine(a, b, SPLAT__PN_AND, "splat_pattern_intersect", out);
}

void splat_pattern_destroy(splat_pattern *p) {
  if (!p) return;
  splat__nodes_free(p->nodes, p->n_nodes);
  free(p->spec);
  free(p);
}

int64_t splat_pattern_seq_q(const splat_pattern *p) {
  return p ? p->seq_q : 0;
}
int64_t splat_pattern_seq_k(const splat_pattern *p) {
  return p ? p->seq_k : 0;
}
const char *splat_pattern_spec(const splat_pattern *p) {
  return p && p->spec ? p->spec : "";
}

/* ---------------------------------------------------------------- evaluator */

typedef struct node_scratch {
  splat__segment *segs;
  int cap, n;
  int64_t cache_key; /* bigbird: query block whose segments segs holds, or -1 */
  uint64_t *bits;    /* [words] */
} node_scratch;

struct splat__row_eval {
  const splat_pattern *p;
  int64_t seq_k, words;
  int n_nodes;
  int simple; /* 1 when the pattern is one closed-form leaf */
  node_scratch *ns;
  splat__bigbird_scratch bb;
};

void splat__row_eval_destroy(splat__row_eval *e) {
  if (!e) return;
  if (e->ns) {
    for (int k = 0; k < e->n_nodes; k++) {
      free(e->ns[k].segs);
      free(e->ns[k].bits);
    }
  }
  free(e->ns);
  free(e->bb.blocks);
  free(e->bb.taken);
  free(e);
}

splat_status splat__row_eval_create(const splat_pattern *p, splat__row_eval **out) {
  if (!out) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__row_eval_create: out is NULL");
  *out = NULL;
  if (!p) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__row_eval_create: pattern is NULL");
  splat__row_eval *e = calloc(1, sizeof *e);
  if (!e) goto oom;
  e->p = p, e->seq_k = p->seq_k, e->words = (p->seq_k + 63) / 64, e->n_nodes = p->n_nodes;
  e->ns = calloc((size_t)p->n_nodes, sizeof *e->ns);
  if (!e->ns) goto oom;
  int64_t bb_blocks = 0;
  for (int k = 0; k < p->n_nodes; k++) {
    const splat__pnode *nd = &p->nodes[k];
    node_scratch *s = &e->ns[k];
    s->cap = SPLAT__NODE_SEGS;
    s->cache_key = -1;
    if (nd->kind == SPLAT__PN_BIGBIRD) {
      int64_t m = splat__leaf_max_segments(nd, p->seq_k);
      if (m > s->cap) s->cap = (int)m;
      if (m > bb_blocks) bb_blocks = m;
    }
    s->segs = malloc((size_t)s->cap * sizeof *s->segs);
    s->bits = malloc((size_t)e->words * sizeof *s->bits);
    if (!s->segs || !s->bits) goto oom;
  }
  if (bb_blocks > 0) {
    e->bb.blocks_cap = bb_blocks;
    e->bb.taken_words = e->words; /* key blocks <= seq_k */
    e->bb.blocks = malloc((size_t)bb_blocks * sizeof *e->bb.blocks);
    e->bb.taken = calloc((size_t)e->words, sizeof *e->bb.taken);
    if (!e->bb.blocks || !e->bb.taken) goto oom;
  }
  e->simple = p->n_nodes == 1 && p->nodes[0].kind != SPLAT__PN_MASK &&
              p->nodes[0].kind != SPLAT__PN_BIGBIRD;
  *out = e;
  return SPLAT_OK;
oom:
  splat__row_eval_destroy(e);
  return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat__row_eval_create: out of memory");
}

/* Segment path for every node in post-order. Returns 0 when some node cannot be
 * expressed in at most its capacity of segments (the row then goes through bits). */
static int eval_segments(splat__row_eval *e, int64_t i) {
  const splat__pnode *nodes = e->p->nodes;
  for (int k = 0; k < e->n_nodes; k++) {
    const splat__pnode *nd = &nodes[k];
    node_scratch *s = &e->ns[k];
    int n;
    switch (nd->kind) {
      case SPLAT__PN_MASK:
        n = splat__bits_compress(nd->mask->bits + i * nd->mask->words, e->words, s->segs, s->cap);
        break;
      case SPLAT__PN_OR:
      case SPLAT__PN_AND: {
        const node_scratch *l = &e->ns[nd->left], *r = &e->ns[nd->right];
        n = nd->kind == SPLAT__PN_OR
                ? splat__seg_union(l->segs, l->n, r->segs, r->n, s->segs, s->cap)
                : splat__seg_intersect(l->segs, l->n, r->segs, r->n, s->segs, s->cap);
        break;
      }
      case SPLAT__PN_BIGBIRD: {
        int64_t qb = i / nd->a[0];
        if (qb == s->cache_key) continue;
        n = splat__leaf_segments(nd, i, e->seq_k, s->segs, s->cap, &e->bb);
        s->cache_key = n < 0 ? -1 : qb;
        break;
      }
      default:
        n = splat__leaf_segments(nd, i, e->seq_k, s->segs, s->cap, &e->bb);
        break;
    }
    if (n < 0) return 0;
    s->n = n;
  }
  return 1;
}

/* Bit path for every node in post-order; the row is in the root's bits. */
static void eval_bits(splat__row_eval *e, int64_t i) {
  const splat__pnode *nodes = e->p->nodes;
  const int64_t words = e->words;
  for (int k = 0; k < e->n_nodes; k++) {
    const splat__pnode *nd = &nodes[k];
    node_scratch *s = &e->ns[k];
    uint64_t *w = s->bits;
    switch (nd->kind) {
      case SPLAT__PN_MASK:
        memcpy(w, nd->mask->bits + i * nd->mask->words, (size_t)words * sizeof *w);
        break;
      case SPLAT__PN_OR: {
        const uint64_t *l = e->ns[nd->left].bits, *r = e->ns[nd->right].bits;
        for (int64_t t = 0; t < words; t++) w[t] = l[t] | r[t];
        break;
      }
      case SPLAT__PN_AND: {
        const uint64_t *l = e->ns[nd->left].bits, *r = e->ns[nd->right].bits;
        for (int64_t t = 0; t < words; t++) w[t] = l[t] & r[t];
        break;
      }
      default: {
        /* Closed-form leaves never exceed their capacity (bigbird's is sized for it). */
        int n = splat__leaf_segments(nd, i, e->seq_k, s->segs, s->cap, &e->bb);
        s->cache_key = -1;
        memset(w, 0, (size_t)words * sizeof *w);
        for (int t = 0; t < n; t++) splat__bits_set_segment(w, s->segs[t]);
        break;
      }
    }
  }
}

int splat__row_segments(splat__row_eval *e, int64_t i, splat__segment *out, int cap) {
  if (e->simple) {
    /* One closed-form leaf: straight into out (-1 when cap is short; bits below may
     * still find a shorter form). */
    int n = splat__leaf_segments(&e->p->nodes[0], i, e->seq_k, out, cap, NULL);
    if (n >= 0) return n;
  } else if (eval_segments(e, i)) {
    const node_scratch *r = &e->ns[e->n_nodes - 1];
    if (r->n <= cap) {
      memcpy(out, r->segs, (size_t)r->n * sizeof *out);
      return r->n;
    }
  }
  /* Too many segments, or not exact in segment form: bits, then greedy compression. */
  eval_bits(e, i);
  return splat__bits_compress(e->ns[e->n_nodes - 1].bits, e->words, out, cap);
}

/* Every leaf's rows repeat over the common part of their runs; union, intersection,
 * the bit fallback and its greedy compression only compare columns with one another,
 * so the root's segments then repeat (or move) with them. */
int64_t splat__row_run(const splat__row_eval *e, int64_t i, int *shift) {
  int64_t same = INT64_MAX, shifted = INT64_MAX;
  for (int k = 0; k < e->n_nodes && (same > i || shifted > i); k++) {
    const splat__pnode *nd = &e->p->nodes[k];
    if (nd->kind == SPLAT__PN_OR || nd->kind == SPLAT__PN_AND) continue;
    int64_t s0, s1;
    splat__leaf_run(nd, i, e->seq_k, &s0, &s1);
    same = imin(same, s0);
    shifted = imin(shifted, s1);
  }
  const int64_t last = e->p->seq_q - 1;
  *shift = shifted > same;
  return imin(last, *shift ? shifted : same);
}

int64_t splat__row_columns(splat__row_eval *e, int64_t i, int32_t *out) {
  if (eval_segments(e, i)) {
    const node_scratch *r = &e->ns[e->n_nodes - 1];
    int64_t n = 0;
    for (int t = 0; t < r->n; t++) {
      const splat__segment s = r->segs[t];
      for (int64_t q = 0, j = s.start; q < s.count; q++, j += s.stride) {
        for (int64_t u = 0; u < s.width; u++) out[n++] = (int32_t)(j + u);
      }
    }
    return n;
  }
  eval_bits(e, i);
  return splat__bits_expand(e->ns[e->n_nodes - 1].bits, e->words, out);
}

splat_status splat_pattern_row(const splat_pattern *p, int64_t row, int64_t *cols, int64_t cap,
                               int64_t *count) {
  static const char who[] = "splat_pattern_row";
  if (!p) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: pattern is NULL", who);
  if (!count) return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: count is NULL", who);
  if (cap < 0) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: cap=%lld must be >= 0", who,
                       (long long)cap);
  }
  if (cap > 0 && !cols) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: cols is NULL but cap=%lld", who,
                       (long long)cap);
  }
  if (row < 0 || row >= p->seq_q) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: row=%lld must be in 0..%lld", who,
                       (long long)row, (long long)(p->seq_q - 1));
  }
  splat__row_eval *e;
  splat_status st = splat__row_eval_create(p, &e);
  if (st) return st;
  int64_t n = 0;
  if (eval_segments(e, row)) {
    const node_scratch *r = &e->ns[e->n_nodes - 1];
    for (int t = 0; t < r->n; t++) {
      const splat__segment s = r->segs[t];
      for (int64_t q = 0, j = s.start; q < s.count; q++, j += s.stride) {
        for (int64_t u = 0; u < s.width; u++, n++) {
          if (n < cap) cols[n] = j + u;
        }
      }
    }
  } else {
    eval_bits(e, row);
    const uint64_t *w = e->ns[e->n_nodes - 1].bits;
    for (int64_t k = 0; k < e->words; k++) {
      for (uint64_t x = w[k]; x; x &= x - 1, n++) {
        if (n < cap) cols[n] = k * 64 + __builtin_ctzll(x);
      }
    }
  }
  splat__row_eval_destroy(e);
  *count = n;
  return SPLAT_OK;
}
