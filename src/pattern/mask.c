/* mask.c — explicit masks: refcounted bit rows, and the .npy reader (format versions
 * 1-3, 2-d, dtype bool / uint8 / int8, C or Fortran order). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "pattern/pattern_impl.h"

splat__bitmask *splat__bitmask_new(int64_t rows, int64_t cols) {
  splat__bitmask *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->rows = rows, m->cols = cols, m->words = (cols + 63) / 64;
  m->bits = calloc((size_t)(rows * m->words), sizeof(uint64_t));
  if (!m->bits) {
    free(m);
    return NULL;
  }
  atomic_init(&m->refs, 1);
  return m;
}

void splat__bitmask_retain(splat__bitmask *m) {
  if (m) atomic_fetch_add(&m->refs, 1);
}

void splat__bitmask_release(splat__bitmask *m) {
  if (m && atomic_fetch_sub(&m->refs, 1) == 1) {
    free(m->bits);
    free(m);
  }
}

/* ---------------------------------------------------------------- .npy */

/* Times 'key' (in either quotes) occurs in a header dict. */
static int dict_count(const char *h, const char *key) {
  char pat[32];
  const char *quotes = "'\"";
  int n = 0;
  for (int q = 0; q < 2; q++) {
    snprintf(pat, sizeof pat, "%c%s%c", quotes[q], key, quotes[q]);
    for (const char *p = strstr(h, pat); p; p = strstr(p + 1, pat)) n++;
  }
  return n;
}

/* Finds 'key' in a header dict; returns the position just after the ':' or NULL. */
static const char *dict_value(const char *h, const char *key) {
  char pat[32];
  const char *quotes = "'\"";
  for (int q = 0; q < 2; q++) {
    snprintf(pat, sizeof pat, "%c%s%c", quotes[q], key, quotes[q]);
    const char *p = strstr(h, pat);
    if (!p) continue;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
  }
  return NULL;
}

static splat_status bad_header(const char *who, const char *path, const char *what) {
  return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "%s: '%s' is not a valid .npy file: %s", who, path,
                     what);
}

/* Parses the header dict into dtype code ('b', 'u' or 'i'), order and shape. */
static splat_status parse_header(const char *who, const char *path, const char *h, char *kind,
                                 int *fortran, int64_t shape[2]) {
  static const char *const keys[] = {"descr", "fortran_order", "shape"};
  for (int k = 0; k < 3; k++) {
    if (dict_count(h, keys[k]) > 1) {
      char what[64];
      snprintf(what, sizeof what, "'%s' appears more than once in the header", keys[k]);
      return bad_header(who, path, what);
    }
  }
  const char *p = dict_value(h, "descr");
  if (!p || (*p != '\'' && *p != '"')) return bad_header(who, path, "no 'descr' in the header");
  char q = *p++;
  const char *end = strchr(p, q);
  if (!end || end - p > 30) return bad_header(who, path, "malformed 'descr'");
  char descr[32];
  memcpy(descr, p, (size_t)(end - p));
  descr[end - p] = 0;
  const char *d = descr;
  if (*d == '|' || *d == '<' || *d == '>' || *d == '=') d++;
  if (strcmp(d, "b1") == 0 || strcmp(d, "?") == 0) {
    *kind = 'b';
  } else if (strcmp(d, "u1") == 0) {
    *kind = 'u';
  } else if (strcmp(d, "i1") == 0) {
    *kind = 'i';
  } else {
    return splat__fail(SPLAT_ERR_UNSUPPORTED,
                       "%s: '%s' has dtype '%s'; a mask must be bool ('|b1'), uint8 ('|u1') or "
                       "int8 ('|i1')",
                       who, path, descr);
  }
  p = dict_value(h, "fortran_order");
  if (!p) return bad_header(who, path, "no 'fortran_order' in the header");
  /* The word ends there: "Falsey" is neither. */
  if (strncmp(p, "True", 4) == 0 && p[4] && strchr(" ,}", p[4])) {
    *fortran = 1;
  } else if (strncmp(p, "False", 5) == 0 && p[5] && strchr(" ,}", p[5])) {
    *fortran = 0;
  } else {
    return bad_header(who, path, "'fortran_order' is neither True nor False");
  }
  p = dict_value(h, "shape");
  if (!p || *p != '(') return bad_header(who, path, "no 'shape' tuple in the header");
  p++;
  int nd = 0;
  int64_t dims[8];
  for (;;) {
    while (*p == ' ') p++;
    if (*p == ')') break;
    if (*p < '0' || *p > '9') return bad_header(who, path, "malformed 'shape'");
    int64_t v = 0;
    while (*p >= '0' && *p <= '9') {
      if (v > ((int64_t)1 << 40)) return bad_header(who, path, "a dimension is too large");
      v = v * 10 + (*p++ - '0');
    }
    while (*p == 'L' || *p == ' ') p++;
    if (nd < 8) dims[nd] = v;
    nd++;
    if (*p == ',') {
      p++;
    } else if (*p != ')') {
      return bad_header(who, path, "malformed 'shape'"); /* "(2 3)" */
    }
  }
  if (nd != 2) {
    char buf[160];
    int len = snprintf(buf, sizeof buf, "(");
    for (int t = 0; t < nd && t < 8 && len < 120; t++) {
      len += snprintf(buf + len, sizeof buf - (size_t)len, "%s%lld", t ? ", " : "",
                      (long long)dims[t]);
    }
    snprintf(buf + len, sizeof buf - (size_t)len, "%s)", nd == 1 ? "," : "");
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "%s: '%s' is %d-d, shape %s; a mask must be 2-d (seq_q, seq_k)", who, path,
                       nd, buf);
  }
  for (int t = 0; t < 2; t++) {
    if (dims[t] < 1 || dims[t] > SPLAT__MAX_SEQ) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "%s: '%s' has shape (%lld, %lld); each dimension must be 1..%lld", who,
                         path, (long long)dims[0], (long long)dims[1], (long long)SPLAT__MAX_SEQ);
    }
  }
  shape[0] = dims[0], shape[1] = dims[1];
  return SPLAT_OK;
}

splat_status splat__npy_load(const char *path, const char *who, splat__bitmask **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) {
    return splat__fail(SPLAT_ERR_IO, "%s: cannot open '%s': %s", who, path, strerror(errno));
  }
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fclose(f);
    return splat__fail(SPLAT_ERR_IO, "%s: '%s' is a directory, not a .npy file", who, path);
  }
  splat_status st = SPLAT_OK;
  char *header = NULL;
  uint8_t *buf = NULL;
  splat__bitmask *m = NULL;
  unsigned char pre[12];
  const size_t got = fread(pre, 1, 10, f);
  if (got != 10) {
    st = splat__fail(SPLAT_ERR_IO, "%s: '%s' is truncated: %zu bytes, a .npy preamble has 10", who,
                     path, got);
    goto out;
  }
  if (memcmp(pre, "\x93NUMPY", 6) != 0) {
    st = bad_header(who, path, "the magic string \\x93NUMPY is missing");
    goto out;
  }
  uint64_t hlen;
  if (pre[6] == 1) {
    hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8;
  } else if (pre[6] == 2 || pre[6] == 3) {
    if (fread(pre + 10, 1, 2, f) != 2) {
      st = bad_header(who, path, "truncated header");
      goto out;
    }
    hlen = (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
           (uint64_t)pre[11] << 24;
  } else {
    st = splat__fail(SPLAT_ERR_UNSUPPORTED,
                     "%s: '%s' uses .npy format version %d.%d; versions 1, 2 and 3 are supported",
                     who, path, pre[6], pre[7]);
    goto out;
  }
  if (hlen > (1u << 20)) {
    st = bad_header(who, path, "header longer than 1 MiB");
    goto out;
  }
  header = malloc(hlen + 1);
  if (!header) {
    st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "%s: out of memory reading '%s'", who, path);
    goto out;
  }
  if (fread(header, 1, hlen, f) != hlen) {
    st = bad_header(who, path, "truncated header");
    goto out;
  }
  header[hlen] = 0;
  char kind = 0;
  int fortran = 0;
  int64_t shape[2] = {0, 0};
  st = parse_header(who, path, header, &kind, &fortran, shape);
  if (st != SPLAT_OK) goto out;
  const int64_t rows = shape[0], cols = shape[1];
  /* A regular file shorter than its header's shape is truncated: said before the mask is
   * allocated (a header of a huge shape over a few bytes is not an out-of-memory). */
  const long pos = ftell(f);
  if (cols > 0 && pos >= 0 && fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) &&
      (uint64_t)rows > (uint64_t)(sb.st_size > pos ? sb.st_size - pos : 0) / (uint64_t)cols) {
    /* rows x cols, not their product: each is at most 2^40, the product may not fit */
    st = splat__fail(SPLAT_ERR_IO,
                     "%s: '%s' is truncated: expected %lld x %lld data bytes, it has %lld", who,
                     path, (long long)rows, (long long)cols,
                     (long long)(sb.st_size > pos ? sb.st_size - pos : 0));
    goto out;
  }
  m = splat__bitmask_new(rows, cols);
  /* One line of the file at a time: a row (C order) or a column (Fortran order). */
  const int64_t lines = fortran ? cols : rows, len = fortran ? rows : cols;
  buf = malloc((size_t)len);
  if (!m || !buf) {
    st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "%s: out of memory for a %lldx%lld mask from '%s'",
                     who, (long long)rows, (long long)cols, path);
    goto out;
  }
  for (int64_t l = 0; l < lines; l++) {
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
      st = splat__fail(SPLAT_ERR_IO, "%s: '%s' is truncated: expected %lld data bytes", who, path,
                       (long long)(rows * cols));
      goto out;
    }
    for (int64_t t = 0; t < len; t++) {
      if (!buf[t]) continue;
      int64_t i = fortran ? t : l, j = fortran ? l : t;
      m->bits[i * m->words + (j >> 6)] |= (uint64_t)1 << (j & 63);
    }
  }
  (void)kind; /* every 1-byte dtype: nonzero = visible */
out:
  fclose(f);
  free(header);
  free(buf);
  if (st == SPLAT_OK) {
    *out = m;
  } else {
    splat__bitmask_release(m);
  }
  return st;
}
