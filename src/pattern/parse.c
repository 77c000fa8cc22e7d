/* parse.c — the pattern spec grammar (docs/patterns.md) into a post-order node
 * array, with error messages that say what was expected and show the spec with a
 * caret under the offending character. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "pattern/pattern_impl.h"

#define MAX_DEPTH 200
#define MAX_NODES 100000
#define MAX_ARGS 5

typedef struct parser {
  const char *s;
  size_t pos;
  int64_t seq_q, seq_k;
  splat__pnode *nodes;
  int n, cap;
  int depth;
} parser;

static const char KNOWN[] =
    "dense, causal, window, dilated, strided, fixed, blocked, global, bigbird, longformer, mask";

/* 1 for a UTF-8 continuation byte (10xxxxxx): not a character of its own. */
static int continuation(unsigned char c) {
  return (c & 0xc0) == 0x80;
}

/* The characters of s[from, to): its bytes less UTF-8 continuation bytes. */
static size_t chars(const char *s, size_t from, size_t to) {
  size_t n = 0;
  for (size_t k = from; k < to; k++) n += !continuation((unsigned char)s[k]);
  return n;
}

/* Records a parse error at byte `at`: the message, the column, and the spec with a
 * caret. Long specs are shown as an excerpt around the column. Columns count characters
 * (UTF-8 sequences as one), so the caret stands under the character at `at` in a terminal
 * of narrow characters. */
static splat_status fail_at(const parser *p, splat_status st, size_t at, const char *fmt, ...)
    SPLAT__PRINTF(4, 5);
static splat_status fail_at(const parser *p, splat_status st, size_t at, const char *fmt, ...) {
  char head[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  const size_t len = strlen(p->s);
  size_t from = 0, to = len;
  enum { span = 100 }; /* bytes of a long spec shown around the column */
  if (len > span) {
    from = at > span / 2 ? at - span / 2 : 0;
    to = from + span < len ? from + span : len;
    if (to == len) from = len > span ? len - span : 0;
    /* The excerpt cuts no character in two: a UTF-8 sequence has at most 3 continuation
     * bytes, so each edge moves at most 3 (invalid text, a long run of them, is cut). */
    for (int k = 0; k < 3 && from > 0 && continuation((unsigned char)p->s[from]); k++) from--;
    for (int k = 0; k < 3 && to < len && continuation((unsigned char)p->s[to]); k++) to++;
  }
  char line[3 + span + 6 + 3 + 1]; /* "...", the span, the edges' widening, "...", NUL */
  size_t o = 0;
  if (from > 0) line[o++] = '.', line[o++] = '.', line[o++] = '.';
  const size_t caret = o + chars(p->s, from, at);
  for (size_t k = from; k < to; k++) {
    unsigned char c = (unsigned char)p->s[k];
    line[o++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c; /* tabs, newlines: one column */
  }
  if (to < len) line[o++] = '.', line[o++] = '.', line[o++] = '.';
  line[o] = 0;
  return splat__fail(st, "%s at column %zu\n  %s\n  %*s^", head, chars(p->s, 0, at) + 1, line,
                     (int)caret, "");
}

/* What is at byte `at`, for messages: "'x'" or "end of spec". */
static const char *found(const parser *p, size_t at, char buf[16]) {
  unsigned char c = (unsigned char)p->s[at];
  if (!c) return "end of spec";
  if (c < 0x20 || c >= 0x7f) {
    snprintf(buf, 16, "byte 0x%02x", c);
  } else {
    snprintf(buf, 16, "'%c'", c);
  }
  return buf;
}

static void skip_ws(parser *p) {
  while (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
         p->s[p->pos] == '\r')
    p->pos++;
}

static splat_status add_node(parser *p, splat__pnode nd, int *idx) {
  if (p->n >= MAX_NODES) {
    return fail_at(p, SPLAT_ERR_PARSE, p->pos, "spec has more than %d terms", MAX_NODES);
  }
  if (p->n == p->cap) {
    int cap = p->cap ? p->cap * 2 : 8;
    splat__pnode *nn = realloc(p->nodes, (size_t)cap * sizeof *nn);
    if (!nn) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_pattern_parse: out of memory");
    p->nodes = nn, p->cap = cap;
  }
  p->nodes[p->n] = nd;
  *idx = p->n++;
  return SPLAT_OK;
}

typedef struct arg {
  size_t pos;
  int neg;
  uint64_t mag;
} arg;

static int64_t arg_value(arg a) {
  return a.neg ? -(int64_t)a.mag : (int64_t)a.mag;
}

/* '(' [int (',' int)*] ')' after `name`. */
static splat_status parse_args(parser *p, const char *name, arg *args, int *nargs) {
  char fb[16];
  *nargs = 0;
  p->pos++; /* '(' */
  skip_ws(p);
  if (p->s[p->pos] == ')') {
    p->pos++;
    return SPLAT_OK;
  }
  for (;;) {
    skip_ws(p);
    arg a = {p->pos, 0, 0};
    if (p->s[p->pos] == '-') a.neg = 1, p->pos++;
    if (p->s[p->pos] < '0' || p->s[p->pos] > '9') {
      return fail_at(p, SPLAT_ERR_PARSE, p->pos,
                     "expected an integer in the arguments of %s (found %s)", name,
                     found(p, p->pos, fb));
    }
    while (p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
      uint64_t dgt = (uint64_t)(p->s[p->pos] - '0');
      if (a.mag > (UINT64_MAX - dgt) / 10) {
        return fail_at(p, SPLAT_ERR_PARSE, a.pos, "integer out of range in the arguments of %s",
                       name);
      }
      a.mag = a.mag * 10 + dgt;
      p->pos++;
    }
    if (*nargs < MAX_ARGS) args[*nargs] = a;
    (*nargs)++;
    skip_ws(p);
    if (p->s[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->s[p->pos] == ')') {
      p->pos++;
      return SPLAT_OK;
    }
    return fail_at(p, SPLAT_ERR_PARSE, p->pos,
                   "expected ',' or ')' in the arguments of %s (found %s)", name,
                   found(p, p->pos, fb));
  }
}

typedef struct spec_def {
  const char *name;
  splat__pnode_kind kind;
  int min_args, max_args;
  const char *usage;
  const char *arg_names[MAX_ARGS];
} spec_def;

static const spec_def DEFS[] = {
    {"dense", SPLAT__PN_DENSE, 0, 0, "dense", {0}},
    {"causal", SPLAT__PN_CAUSAL, 0, 0, "causal", {0}},
    {"window", SPLAT__PN_WINDOW, 1, 2, "window(w) or window(l,r)", {"l", "r"}},
    {"dilated", SPLAT__PN_DILATED, 2, 2, "dilated(w,d)", {"w", "d"}},
    {"strided", SPLAT__PN_STRIDED, 1, 1, "strided(s)", {"s"}},
    {"fixed", SPLAT__PN_FIXED, 2, 2, "fixed(b,c)", {"b", "c"}},
    {"blocked", SPLAT__PN_BLOCKED, 1, 1, "blocked(b)", {"b"}},
    {"global", SPLAT__PN_GLOBAL, 1, 1, "global(g)", {"g"}},
    {"bigbird", SPLAT__PN_BIGBIRD, 5, 5, "bigbird(b,w,g,r,seed)", {"b", "w", "g", "r", "seed"}},
    {"longformer", SPLAT__PN_LONGFORMER, 2, 2, "longformer(w,g)", {"w", "g"}},
};

/* Checks argument k against `min` (and `max` when has_max). */
static splat_status check_arg(parser *p, const spec_def *d, const arg *args, int k, int64_t min,
                              int has_max, int64_t max, const char *max_text) {
  int64_t v = arg_value(args[k]);
  if (v < min) {
    return fail_at(p, SPLAT_ERR_PARSE, args[k].pos, "%s: %s=%lld must be >= %lld", d->name,
                   d->arg_names[k], (long long)v, (long long)min);
  }
  if (has_max && v > max) {
    return fail_at(p, SPLAT_ERR_PARSE, args[k].pos, "%s: %s=%lld must be <= %s", d->name,
                   d->arg_names[k], (long long)v, max_text);
  }
  return SPLAT_OK;
}

static splat_status parse_named(parser *p, const spec_def *d, size_t name_pos, int *idx) {
  arg args[MAX_ARGS];
  int nargs = 0;
  splat_status st;
  skip_ws(p);
  if (p->s[p->pos] == '(') {
    st = parse_args(p, d->name, args, &nargs);
    if (st != SPLAT_OK) return st;
  } else if (d->min_args > 0) {
    char fb[16];
    return fail_at(p, SPLAT_ERR_PARSE, p->pos, "expected '(' after %s, as in %s (found %s)",
                   d->name, d->usage, found(p, p->pos, fb));
  }
  if (nargs < d->min_args || nargs > d->max_args) {
    return fail_at(p, SPLAT_ERR_PARSE, name_pos, "%s takes %s%d argument%s (%s), got %d", d->name,
                   d->min_args != d->max_args ? "1 or " : "", d->max_args,
                   d->max_args == 1 ? "" : "s", d->usage, nargs);
  }
  splat__pnode nd;
  memset(&nd, 0, sizeof nd);
  nd.kind = d->kind;
  nd.left = nd.right = -1;
  /* Range of every integer argument (bigbird's seed is a uint64). */
  for (int k = 0; k < nargs; k++) {
    if (d->kind == SPLAT__PN_BIGBIRD && k == 4) {
      if (args[k].neg && args[k].mag) {
        return fail_at(p, SPLAT_ERR_PARSE, args[k].pos, "bigbird: seed=-%llu must be >= 0",
                       (unsigned long long)args[k].mag);
      }
      nd.seed = args[k].mag;
    } else if (args[k].mag > (uint64_t)SPLAT__SPEC_INT_MAX) {
      return fail_at(p, SPLAT_ERR_PARSE, args[k].pos,
                     "%s: %s=%s%llu out of range: magnitude must be <= 2^53", d->name,
                     d->arg_names[k], args[k].neg ? "-" : "", (unsigned long long)args[k].mag);
    } else {
      nd.a[k] = arg_value(args[k]);
    }
  }
  const int64_t lo = -SPLAT__SPEC_INT_MAX;
  st = SPLAT_OK;
  switch (d->kind) {
    case SPLAT__PN_WINDOW:
      if (nargs == 1) nd.a[1] = nd.a[0];
      break;
    case SPLAT__PN_DILATED:
      st = check_arg(p, d, args, 0, 0, 0, 0, NULL);
      if (!st) st = check_arg(p, d, args, 1, 1, 0, 0, NULL);
      break;
    case SPLAT__PN_STRIDED:
    case SPLAT__PN_BLOCKED:
      st = check_arg(p, d, args, 0, 1, 0, 0, NULL);
      break;
    case SPLAT__PN_FIXED: {
      st = check_arg(p, d, args, 0, 1, 0, 0, NULL);
      char btext[32];
      snprintf(btext, sizeof btext, "b=%lld", (long long)nd.a[0]);
      if (!st) st = check_arg(p, d, args, 1, 0, 1, nd.a[0], btext);
      break;
    }
    case SPLAT__PN_GLOBAL:
      st = check_arg(p, d, args, 0, 0, 0, 0, NULL);
      break;
    case SPLAT__PN_LONGFORMER:
      st = check_arg(p, d, args, 0, lo, 0, 0, NULL);
      if (!st) st = check_arg(p, d, args, 1, 0, 0, 0, NULL);
      break;
    case SPLAT__PN_BIGBIRD:
      st = check_arg(p, d, args, 0, 1, 0, 0, NULL);
      for (int k = 1; k < 4 && !st; k++) st = check_arg(p, d, args, k, 0, 0, 0, NULL);
      break;
    default:
      break;
  }
  if (st != SPLAT_OK) return st;
  return add_node(p, nd, idx);
}

/* mask("path"): a string literal with \" and \\ escapes. */
static splat_status parse_mask(parser *p, size_t name_pos, int *idx) {
  char fb[16];
  skip_ws(p);
  if (p->s[p->pos] != '(') {
    return fail_at(p, SPLAT_ERR_PARSE, p->pos,
                   "expected '(' after mask, as in mask(\"m.npy\") (found %s)",
                   found(p, p->pos, fb));
  }
  p->pos++;
  skip_ws(p);
  char q = p->s[p->pos];
  if (q != '"' && q != '\'') {
    return fail_at(p, SPLAT_ERR_PARSE, p->pos,
                   "expected a quoted .npy path in mask(...), as in mask(\"m.npy\") (found %s)",
                   found(p, p->pos, fb));
  }
  const size_t open = p->pos++;
  size_t cap = 64, n = 0;
  char *path = malloc(cap);
  if (!path) return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_pattern_parse: out of memory");
  for (;;) {
    char c = p->s[p->pos];
    if (!c) {
      free(path);
      return fail_at(p, SPLAT_ERR_PARSE, open, "unterminated string in mask(...)");
    }
    p->pos++;
    if (c == q) break;
    if (c == '\\' && (p->s[p->pos] == q || p->s[p->pos] == '\\')) c = p->s[p->pos++];
    if (n + 2 > cap) {
      char *np = realloc(path, cap *= 2);
      if (!np) {
        free(path);
        return splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "splat_pattern_parse: out of memory");
      }
      path = np;
    }
    path[n++] = c;
  }
  path[n] = 0;
  skip_ws(p);
  if (p->s[p->pos] != ')') {
    free(path);
    return fail_at(p, SPLAT_ERR_PARSE, p->pos,
                   "expected ')' after the path in mask(...) (found %s)", found(p, p->pos, fb));
  }
  p->pos++;
  splat__bitmask *m = NULL;
  splat_status st = splat__npy_load(path, "mask", &m);
  if (st != SPLAT_OK) {
    char msg[SPLAT__ERROR_CAP];
    snprintf(msg, sizeof msg, "%s", splat__thread_error());
    free(path);
    return fail_at(p, st, name_pos, "%s", msg);
  }
  if (m->rows != p->seq_q || m->cols != p->seq_k) {
    st =
        fail_at(p, SPLAT_ERR_INVALID_ARGUMENT, name_pos,
                "mask: '%s' has shape %lldx%lld but the pattern is %lldx%lld (seq_q x seq_k)", path,
                (long long)m->rows, (long long)m->cols, (long long)p->seq_q, (long long)p->seq_k);
    free(path);
    splat__bitmask_release(m);
    return st;
  }
  free(path);
  splat__pnode nd;
  memset(&nd, 0, sizeof nd);
  nd.kind = SPLAT__PN_MASK;
  nd.left = nd.right = -1;
  nd.mask = m;
  st = add_node(p, nd, idx);
  if (st != SPLAT_OK) splat__bitmask_release(m);
  return st;
}

static splat_status parse_expr(parser *p, int *idx);

static splat_status parse_factor(parser *p, int *idx) {
  char fb[16];
  skip_ws(p);
  const size_t at = p->pos;
  const char c = p->s[at];
  if (c == '(') {
    if (++p->depth > MAX_DEPTH) {
      return fail_at(p, SPLAT_ERR_PARSE, at, "parentheses nested deeper than %d", MAX_DEPTH);
    }
    p->pos++;
    splat_status st = parse_expr(p, idx);
    if (st != SPLAT_OK) return st;
    skip_ws(p);
    if (p->s[p->pos] != ')') {
      return fail_at(p, SPLAT_ERR_PARSE, p->pos,
                     "expected ')' to close the '(' at column %zu (found %s)", at + 1,
                     found(p, p->pos, fb));
    }
    p->pos++;
    p->depth--;
    return SPLAT_OK;
  }
  if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_')) {
    return fail_at(p, SPLAT_ERR_PARSE, at, "expected a pattern name or '(' (found %s)",
                   found(p, at, fb));
  }
  size_t end = at;
  while ((p->s[end] >= 'a' && p->s[end] <= 'z') || (p->s[end] >= 'A' && p->s[end] <= 'Z') ||
         (p->s[end] >= '0' && p->s[end] <= '9') || p->s[end] == '_')
    end++;
  const size_t len = end - at;
  if ((unsigned char)p->s[end] >= 0x80) { /* "wïndow": not the name 'w' */
    return fail_at(p, SPLAT_ERR_PARSE, end,
                   "pattern names are ASCII letters, digits and '_' (found %s)", found(p, end, fb));
  }
  p->pos = end;
  if (len == 4 && memcmp(p->s + at, "mask", 4) == 0) return parse_mask(p, at, idx);
  for (size_t k = 0; k < sizeof DEFS / sizeof DEFS[0]; k++) {
    if (strlen(DEFS[k].name) == len && memcmp(DEFS[k].name, p->s + at, len) == 0) {
      return parse_named(p, &DEFS[k], at, idx);
    }
  }
  return fail_at(p, SPLAT_ERR_PARSE, at, "unknown pattern '%.*s' (known patterns: %s)",
                 len > 40 ? 40 : (int)len, p->s + at, KNOWN);
}

/* A chain of `op`-separated operands, left-associative. */
static splat_status parse_chain(parser *p, char op, int *idx) {
  splat_status st = op == '|' ? parse_chain(p, '&', idx) : parse_factor(p, idx);
  if (st != SPLAT_OK) return st;
  for (;;) {
    skip_ws(p);
    if (p->s[p->pos] != op) return SPLAT_OK;
    p->pos++;
    int rhs;
    st = op == '|' ? parse_chain(p, '&', &rhs) : parse_factor(p, &rhs);
    if (st != SPLAT_OK) return st;
    splat__pnode nd;
    memset(&nd, 0, sizeof nd);
    nd.kind = op == '|' ? SPLAT__PN_OR : SPLAT__PN_AND;
    nd.left = *idx, nd.right = rhs;
    st = add_node(p, nd, idx);
    if (st != SPLAT_OK) return st;
  }
}

static splat_status parse_expr(parser *p, int *idx) {
  return parse_chain(p, '|', idx);
}

void splat__nodes_free(splat__pnode *nodes, int n) {
  if (!nodes) return;
  for (int k = 0; k < n; k++) splat__bitmask_release(nodes[k].mask);
  free(nodes);
}

splat_status splat__parse_spec(const char *spec, int64_t seq_q, int64_t seq_k, splat__pnode **nodes,
                               int *n_nodes) {
  parser p = {spec, 0, seq_q, seq_k, NULL, 0, 0, 0};
  int root = -1;
  splat_status st = parse_expr(&p, &root);
  if (st == SPLAT_OK) {
    skip_ws(&p);
    if (p.s[p.pos] != 0) {
      char fb[16];
      const char *what = p.s[p.pos] == ')' ? "unbalanced ')': expected '|', '&' or end of spec"
                                           : "expected '|', '&' or end of spec";
      st = fail_at(&p, SPLAT_ERR_PARSE, p.pos, "%s (found %s)", what, found(&p, p.pos, fb));
    }
  }
  if (st != SPLAT_OK) {
    splat__nodes_free(p.nodes, p.n);
    return st;
  }
  *nodes = p.nodes;
  *n_nodes = p.n;
  return SPLAT_OK;
}
