/* codegen.h — generated kernel sources: a comment stating the specialisation in
 * words, the #define prelude, then an embedded kernels/<name>.cuh template with its
 * #include "x.cuh" lines expanded, so the source is one self-contained translation
 * unit (what NVRTC compiles, what the cache key hashes, what SPLAT_DUMP_DIR shows). */
#ifndef SPLAT_CUDA_CODEGEN_H
#define SPLAT_CUDA_CODEGEN_H

#include "splat.h"

/* One prelude line: #define name value. */
typedef struct splat__define {
  const char *name;  /* a C identifier */
  const char *value; /* one line of text; NULL or "" for a bare #define */
} splat__define;

/* The embedded text of kernels/<name> ("sddmm.cuh"), NUL-terminated, or NULL for an
 * unknown name. Generated at build time by cmake/embed_kernels.cmake. */
const char *splat__kernel_template(const char *name);
/* The name of embedded template i in sorted order, or NULL when i is out of range. */
const char *splat__kernel_template_name(int i);

/* Builds the source of kernel template `kernel_template_name` ("smoke.cuh"):
 *
 *   / * <comment> * /                      (any "* /" inside is defused)
 *   #define NAME VALUE                    (one per define, in order)
 *   #line 1 "kernels/<template>"
 *   <template text>
 *
 * An #include "x.cuh" line of a template whose x.cuh is embedded is replaced by the
 * text of x.cuh (between #line directives, so compile errors point at the template
 * file and line); each file is expanded once, later includes of it become comments.
 * #include <...> lines are left alone (they sit in host-only branches).
 * defines: host array of ndefines (may be NULL when 0). comment: host, may be NULL.
 * *source_out: malloc'd NUL-terminated source, the caller frees. Fails with
 * SPLAT_ERR_INVALID_ARGUMENT for an unknown template, a bad name or value, or an
 * include of a file that is not embedded. */
splat_status splat__codegen(const char *kernel_template_name, const splat__define *defines,
                            int ndefines, const char *comment, char **source_out);

#endif
