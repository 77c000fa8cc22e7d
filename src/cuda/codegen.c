/* codegen.c — assembling a generated kernel source from a prelude of #defines and an
 * embedded template, expanding the template's includes of other embedded templates. */
#include "cuda/codegen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"

/* A growing string; on allocation failure `failed` is set and appends become no-ops. */
typedef struct strbuf {
  char *data;
  size_t len, cap;
  int failed;
} strbuf;

static void sb_append(strbuf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
      b->failed = 1;
      return;
    }
    b->data = p;
    b->cap = cap;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = '\0';
}

static void sb_puts(strbuf *b, const char *s) {
  sb_append(b, s, strlen(s));
}

static void sb_printf(strbuf *b, const char *fmt, ...) SPLAT__PRINTF(2, 3);
static void sb_printf(strbuf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->failed = 1;
    return;
  }
  sb_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

static int is_identifier(const char *s) {
  if (!s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_')) return 0;
  for (s++; *s; s++) {
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
          *s == '_')) {
      return 0;
    }
  }
  return 1;
}

/* If line [p, end) is `#include "name"`, copies name into buf and returns 1. */
static int quoted_include(const char *p, const char *end, char *buf, size_t cap) {
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  if (p == end || *p != '#') return 0;
  p++;
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  if ((size_t)(end - p) < 7 || strncmp(p, "include", 7) != 0) return 0;
  p += 7;
  while (p < end && (*p == ' ' || *p == '\t')) p++;
  if (p == end || *p != '"') return 0;
  const char *name = ++p;
  while (p < end && *p != '"') p++;
  if (p == end || (size_t)(p - name) >= cap) return 0;
  memcpy(buf, name, (size_t)(p - name));
  buf[p - name] = '\0';
  return 1;
}

enum { MAX_DEPTH = 16, MAX_FILES = 64 };

typedef struct expander {
  strbuf *out;
  const char *done[MAX_FILES]; /* names already expanded */
  int ndone;
} expander;

static splat_status expand(expander *x, const char *name, const char *text, int depth) {
  if (depth > MAX_DEPTH) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "kernel template %s: includes nest deeper than %d levels", name, MAX_DEPTH);
  }
  if (x->ndone >= MAX_FILES) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "kernel template %s: more than %d templates included", name, MAX_FILES);
  }
  x->done[x->ndone++] = name;
  sb_printf(x->out, "#line 1 \"kernels/%s\"\n", name);
  int line = 1;
  for (const char *p = text; *p; line++) {
    const char *nl = strchr(p, '\n');
    const char *end = nl ? nl : p + strlen(p);
    char inc[128];
    if (quoted_include(p, end, inc, sizeof inc)) {
      const char *inc_text = splat__kernel_template(inc);
      if (!inc_text) {
        return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                           "kernel template %s line %d includes \"%s\", which is not an embedded "
                           "kernel template (kernels/<name>.cuh)",
                           name, line, inc);
      }
      int seen = 0;
      for (int i = 0; i < x->ndone; i++) seen |= !strcmp(x->done[i], inc);
      if (seen) {
        sb_printf(x->out, "/* #include \"%s\": already included above */\n", inc);
      } else {
        /* The table's copy of the name: `inc` dies with this frame, x->done keeps it. */
        const char *stored = NULL;
        for (int i = 0; (stored = splat__kernel_template_name(i)) != NULL; i++) {
          if (!strcmp(stored, inc)) break;
        }
        if (!stored) return splat__fail(SPLAT_ERR_INTERNAL, "kernel template %s: lookup", inc);
        splat_status st = expand(x, stored, inc_text, depth + 1);
        if (st != SPLAT_OK) return st;
        sb_printf(x->out, "\n#line %d \"kernels/%s\"\n", line + 1, name);
      }
    } else {
      sb_append(x->out, p, (size_t)(end - p));
      sb_puts(x->out, "\n");
    }
    if (!nl) break;
    p = nl + 1;
  }
  return SPLAT_OK;
}

splat_status splat__codegen(const char *kernel_template_name, const splat__define *defines,
                            int ndefines, const char *comment, char **source_out) {
  if (!source_out)
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat__codegen: source_out is NULL");
  *source_out = NULL;
  if (ndefines < 0 || (ndefines > 0 && !defines)) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                       "splat__codegen: ndefines=%d with defines %s; need ndefines >= 0 and an "
                       "array when it is positive",
                       ndefines, defines ? "set" : "NULL");
  }
  const char *text = splat__kernel_template(kernel_template_name);
  if (!text) {
    char known[512] = "";
    size_t len = 0;
    const char *n;
    for (int i = 0; (n = splat__kernel_template_name(i)) != NULL && len < sizeof known; i++) {
      int w = snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "", n);
      if (w < 0) break;
      len += (size_t)w;
    }
    return splat__fail(
        SPLAT_ERR_INVALID_ARGUMENT, "unknown kernel template '%s': the embedded templates are %s",
        kernel_template_name ? kernel_template_name : "(null)", known[0] ? known : "(none)");
  }
  for (int i = 0; i < ndefines; i++) {
    if (!is_identifier(defines[i].name)) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "kernel %s: define %d has name '%s', which is not a C identifier",
                         kernel_template_name, i, defines[i].name ? defines[i].name : "(null)");
    }
    if (defines[i].value && strpbrk(defines[i].value, "\r\n")) {
      return splat__fail(SPLAT_ERR_INVALID_ARGUMENT,
                         "kernel %s: the value of %s contains a line break; a define is one line",
                         kernel_template_name, defines[i].name);
    }
  }
  strbuf b = {NULL, 0, 0, 0};
  sb_puts(&b, "/* ");
  for (const char *c = comment ? comment : ""; *c; c++) {
    if (c[0] == '*' && c[1] == '/') {
      sb_puts(&b, "* ");
    } else {
      sb_append(&b, c, 1);
    }
  }
  sb_puts(&b, " */\n");
  for (int i = 0; i < ndefines; i++) {
    sb_puts(&b, "#define ");
    sb_puts(&b, defines[i].name);
    if (defines[i].value && defines[i].value[0]) {
      sb_puts(&b, " ");
      sb_puts(&b, defines[i].value);
    }
    sb_puts(&b, "\n");
  }
  expander x = {&b, {NULL}, 0};
  splat_status st = expand(&x, kernel_template_name, text, 0);
  if (st == SPLAT_OK && b.failed) {
    st = splat__fail(SPLAT_ERR_OUT_OF_MEMORY, "kernel %s: out of memory generating the source",
                     kernel_template_name);
  }
  if (st != SPLAT_OK) {
    free(b.data);
    return st;
  }
  *source_out = b.data;
  return SPLAT_OK;
}
