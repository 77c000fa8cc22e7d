/* names.c — names and messages of statuses, dtypes and backends, and the version. */
#include <string.h>
#include <strings.h>

#include "core/error.h"

#define SPLAT__STR2(x) #x
#define SPLAT__STR(x) SPLAT__STR2(x)

const char *splat_version(void) {
  return SPLAT__STR(SPLAT_VERSION_MAJOR) "." SPLAT__STR(SPLAT_VERSION_MINOR) "." SPLAT__STR(
      SPLAT_VERSION_PATCH);
}

static const struct {
  splat_status status;
  const char *name;
  const char *message;
} status_table[] = {
    {SPLAT_OK, "SPLAT_OK", "success"},
    {SPLAT_ERR_INVALID_ARGUMENT, "SPLAT_ERR_INVALID_ARGUMENT", "invalid argument"},
    {SPLAT_ERR_PARSE, "SPLAT_ERR_PARSE", "pattern spec does not parse"},
    {SPLAT_ERR_UNSUPPORTED, "SPLAT_ERR_UNSUPPORTED", "unsupported by this build or device"},
    {SPLAT_ERR_OUT_OF_MEMORY, "SPLAT_ERR_OUT_OF_MEMORY", "out of memory"},
    {SPLAT_ERR_NO_DEVICE, "SPLAT_ERR_NO_DEVICE", "no CUDA driver or device"},
    {SPLAT_ERR_CUDA, "SPLAT_ERR_CUDA", "CUDA driver error"},
    {SPLAT_ERR_COMPILE, "SPLAT_ERR_COMPILE", "kernel compilation failed"},
    {SPLAT_ERR_IO, "SPLAT_ERR_IO", "file input/output failed"},
    {SPLAT_ERR_INTERNAL, "SPLAT_ERR_INTERNAL", "internal error in splat"},
};

const char *splat_status_name(splat_status status) {
  for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++) {
    if (status_table[i].status == status) return status_table[i].name;
  }
  return "SPLAT_ERR_UNKNOWN";
}

const char *splat_status_message(splat_status status) {
  for (size_t i = 0; i < sizeof status_table / sizeof status_table[0]; i++) {
    if (status_table[i].status == status) return status_table[i].message;
  }
  return "unknown status";
}

const char *splat_dtype_name(splat_dtype dtype) {
  switch (dtype) {
    case SPLAT_F32:
      return "f32";
    case SPLAT_F16:
      return "f16";
    case SPLAT_BF16:
      return "bf16";
  }
  return NULL;
}

splat_status splat_dtype_parse(const char *name, splat_dtype *out) {
  static const struct {
    const char *name;
    splat_dtype dtype;
  } names[] = {{"f32", SPLAT_F32},  {"fp32", SPLAT_F32},  {"float32", SPLAT_F32},
               {"f16", SPLAT_F16},  {"fp16", SPLAT_F16},  {"float16", SPLAT_F16},
               {"half", SPLAT_F16}, {"bf16", SPLAT_BF16}, {"bfloat16", SPLAT_BF16}};
  if (!name || !out) {
    return splat__fail(SPLAT_ERR_INVALID_ARGUMENT, "splat_dtype_parse: %s is NULL",
                       name ? "out" : "name");
  }
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strcasecmp(name, names[i].name) == 0) {
      *out = names[i].dtype;
      return SPLAT_OK;
    }
  }
  return splat__fail(
      SPLAT_ERR_INVALID_ARGUMENT,
      "unknown dtype '%s': expected f32, f16 or bf16 (or fp32, float16, bfloat16, ...)", name);
}

const char *splat_backend_name(splat_backend backend) {
  switch (backend) {
    case SPLAT_BACKEND_AUTO:
      return "auto";
    case SPLAT_BACKEND_CPU:
      return "cpu";
    case SPLAT_BACKEND_CUDA:
      return "cuda";
  }
  return NULL;
}
