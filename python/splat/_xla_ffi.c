/* _xla_ffi.c — XLA FFI handlers for splat's JAX front end (libsplat_jax.so).
 *
 * Written in C against the XLA FFI C API (xla/ffi/api/c_api.h, shipped with jaxlib);
 * links libsplat. python/splat/jax.py registers the handlers with
 * jax.ffi.register_ffi_target and calls them through jax.ffi.ffi_call:
 *
 *   target                  operands           results               platform
 *   splat_attention_{cpu,cuda}  q, k, v        out [, lse]           cpu / CUDA
 *   splat_sddmm_{cpu,cuda}      q, k           scores                cpu / CUDA
 *   splat_softmax_{cpu,cuda}    scores         probs [, lse]         cpu / CUDA
 *   splat_spmm_{cpu,cuda}       probs, v       out                   cpu / CUDA
 *
 * Attributes (all ops): spec (string: a pattern spec, or "#<key>" naming a pattern
 * registered with splat_jax_register_pattern), seq_q, seq_k (int64), scale (float32;
 * 0 = 1/sqrt(head_dim) for attention and sddmm). Buffers are row-major; every
 * dimension before the last three is merged into the batch, so vmap (which adds
 * leading dimensions) needs nothing from the handler.
 *
 * The hot path does no analysis and no compilation: it looks the plan up in a cache
 * keyed by the attributes, the shapes, the dtype and the device, and runs it on the
 * stream XLA gives (CUDA) or synchronously (CPU). A missing plan is created on first
 * use under a mutex. Plans live until the process exits. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "splat.h"
#include "xla/ffi/api/c_api.h"

#define EXPORT __attribute__((visibility("default")))

enum op { OP_ATTENTION, OP_SDDMM, OP_SOFTMAX, OP_SPMM };
static const char *const op_names[] = {"attention", "sddmm", "softmax", "spmm"};

/* head_dim of plans that only serve softmax (it reads no Q, K or V). */
#define VALUES_ONLY_HEAD_DIM 64
/* Most CUDA devices a process may use through this module. */
#define MAX_DEVICES 64

/* ------------------------------------------------------------------ errors */

static XLA_FFI_Error *ffi_error(const XLA_FFI_Api *api, XLA_FFI_Error_Code code, const char *msg) {
  XLA_FFI_Error_Create_Args args;
  memset(&args, 0, sizeof args);
  args.struct_size = XLA_FFI_Error_Create_Args_STRUCT_SIZE;
  args.message = msg;
  args.errc = code;
  return api->XLA_FFI_Error_Create(&args);
}

/* An error carrying a splat status name and the library's message. */
static XLA_FFI_Error *splat_error(const XLA_FFI_Api *api, const char *what, splat_status st) {
  char msg[2048];
  snprintf(msg, sizeof msg, "splat %s: %s: %s", what, splat_status_name(st),
           splat_last_error(NULL));
  XLA_FFI_Error_Code code = XLA_FFI_Error_Code_INTERNAL;
  switch (st) {
    case SPLAT_ERR_INVALID_ARGUMENT:
    case SPLAT_ERR_PARSE:
      code = XLA_FFI_Error_Code_INVALID_ARGUMENT;
      break;
    case SPLAT_ERR_UNSUPPORTED:
      code = XLA_FFI_Error_Code_UNIMPLEMENTED;
      break;
    case SPLAT_ERR_OUT_OF_MEMORY:
      code = XLA_FFI_Error_Code_RESOURCE_EXHAUSTED;
      break;
    case SPLAT_ERR_NO_DEVICE:
      code = XLA_FFI_Error_Code_FAILED_PRECONDITION;
      break;
    default:
      break;
  }
  return ffi_error(api, code, msg);
}

static XLA_FFI_Error *invalid(const XLA_FFI_Api *api, const char *op, const char *detail) {
  char msg[1024];
  snprintf(msg, sizeof msg, "splat %s: SPLAT_ERR_INVALID_ARGUMENT: %s", op, detail);
  return ffi_error(api, XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
}

/* ------------------------------------------------------------------ registry of patterns
 * Patterns that have no spec text (explicit masks) are registered from Python under a
 * content key; the caller keeps them alive for the life of the process. */

typedef struct registered {
  char *key;
  const splat_pattern *pattern;
  struct registered *next;
} registered;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static registered *registry;

/* key: host NUL-terminated string. pattern: must outlive every call that names key.
 * Returns 0, or -1 when out of memory. Registering a key twice keeps the first. */
EXPORT int splat_jax_register_pattern(const char *key, const splat_pattern *pattern) {
  int rc = 0;
  pthread_mutex_lock(&registry_lock);
  registered *r = registry;
  while (r && strcmp(r->key, key) != 0) r = r->next;
  if (!r) {
    r = malloc(sizeof *r);
    char *copy = malloc(strlen(key) + 1);
    if (r && copy) {
      strcpy(copy, key);
      r->key = copy;
      r->pattern = pattern;
      r->next = registry;
      registry = r;
    } else {
      free(r);
      free(copy);
      rc = -1;
    }
  }
  pthread_mutex_unlock(&registry_lock);
  return rc;
}

static const splat_pattern *registered_pattern(const char *key) {
  pthread_mutex_lock(&registry_lock);
  registered *r = registry;
  while (r && strcmp(r->key, key) != 0) r = r->next;
  pthread_mutex_unlock(&registry_lock);
  return r ? r->pattern : NULL;
}

/* ------------------------------------------------------------------ contexts and plans */

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static splat_context *cpu_context;
static splat_context *cuda_contexts[MAX_DEVICES];

typedef struct plan_entry {
  char *key;
  splat_plan *plan;
  pthread_mutex_t run_lock; /* a plan runs on one thread at a time */
  struct plan_entry *next;
} plan_entry;

static plan_entry *plans;

/* What identifies a plan: everything splat_plan_create sees. */
typedef struct plan_request {
  const char *spec;
  size_t spec_len;
  int64_t seq_q, seq_k;
  splat_backend backend;
  int device;
  splat_plan_desc desc;
} plan_request;

/* Called with cache_lock held. */
static splat_status context_for(splat_backend backend, int device, splat_context **out) {
  splat_context **slot = backend == SPLAT_BACKEND_CPU ? &cpu_context : &cuda_contexts[device];
  if (!*slot) {
    splat_context_options opt = {backend, device, 0};
    splat_status st = splat_context_create(&opt, slot);
    if (st != SPLAT_OK) return st;
  }
  *out = *slot;
  return SPLAT_OK;
}

/* Called with cache_lock held: parses or finds the pattern and builds the plan. On a
 * failure that has no splat message, *why says what went wrong. */
static splat_status create_plan(const plan_request *rq, const char *spec, splat_plan **out,
                                char *why, size_t cap) {
  splat_context *ctx = NULL;
  splat_status st = context_for(rq->backend, rq->device, &ctx);
  if (st != SPLAT_OK) return st;
  if (spec[0] == '#') {
    const splat_pattern *pat = registered_pattern(spec + 1);
    if (!pat) {
      snprintf(why, cap,
               "pattern %s is not registered in this process (build the splat.Pattern, e.g. "
               "with Pattern.from_mask, before calling the compiled function)",
               spec);
      return SPLAT_ERR_INVALID_ARGUMENT;
    }
    if (splat_pattern_seq_q(pat) != rq->seq_q || splat_pattern_seq_k(pat) != rq->seq_k) {
      snprintf(why, cap, "registered pattern %s is %lldx%lld, not %lldx%lld", spec,
               (long long)splat_pattern_seq_q(pat), (long long)splat_pattern_seq_k(pat),
               (long long)rq->seq_q, (long long)rq->seq_k);
      return SPLAT_ERR_INVALID_ARGUMENT;
    }
    return splat_plan_create(ctx, pat, &rq->desc, out);
  }
  splat_pattern *pat = NULL;
  st = splat_pattern_parse(spec, rq->seq_q, rq->seq_k, &pat);
  if (st == SPLAT_OK) st = splat_plan_create(ctx, pat, &rq->desc, out);
  splat_pattern_destroy(pat);
  return st;
}

/* The cached plan for a request, created on first use. On failure *why holds a
 * sentence when the failure is not a splat status (unknown registered key). */
static splat_status lookup_plan(const plan_request *rq, plan_entry **out, char *why, size_t cap) {
  char key[1024];
  const splat_plan_desc *d = &rq->desc;
  int prefix = snprintf(key, sizeof key, "%d|%d|%lld|%lld|%lld|%lld|%lld|%lld|%d|%u|",
                        (int)rq->backend, rq->device, (long long)rq->seq_q, (long long)rq->seq_k,
                        (long long)d->batch, (long long)d->heads, (long long)d->heads_kv,
                        (long long)d->head_dim, (int)d->dtype, d->ops);
  if (prefix < 0 || (size_t)prefix + rq->spec_len >= sizeof key) {
    snprintf(why, cap, "spec of %zu characters is too long (at most 900)", rq->spec_len);
    return SPLAT_ERR_INVALID_ARGUMENT;
  }
  memcpy(key + prefix, rq->spec, rq->spec_len);
  key[prefix + rq->spec_len] = '\0';
  const char *spec = key + prefix; /* NUL-terminated copy of the spec */
  why[0] = '\0';
  pthread_mutex_lock(&cache_lock);
  plan_entry *e = plans;
  while (e && strcmp(e->key, key) != 0) e = e->next;
  splat_status st = SPLAT_OK;
  if (!e) {
    splat_plan *plan = NULL;
    st = create_plan(rq, spec, &plan, why, cap);
    if (st == SPLAT_OK) {
      e = calloc(1, sizeof *e);
      char *copy = malloc(strlen(key) + 1);
      if (!e || !copy) {
        free(e);
        free(copy);
        splat_plan_destroy(plan);
        snprintf(why, cap, "out of host memory for the plan cache");
        st = SPLAT_ERR_OUT_OF_MEMORY;
      } else {
        strcpy(copy, key);
        e->key = copy;
        e->plan = plan;
        pthread_mutex_init(&e->run_lock, NULL);
        e->next = plans;
        plans = e;
      }
    }
  }
  pthread_mutex_unlock(&cache_lock);
  *out = e;
  return st;
}

/* ------------------------------------------------------------------ decoding */

static int dtype_of(XLA_FFI_DataType t, splat_dtype *out) {
  switch (t) {
    case XLA_FFI_DataType_F32:
      *out = SPLAT_F32;
      return 1;
    case XLA_FFI_DataType_F16:
      *out = SPLAT_F16;
      return 1;
    case XLA_FFI_DataType_BF16:
      *out = SPLAT_BF16;
      return 1;
    default:
      return 0;
  }
}

/* A row-major buffer seen as [batch, d1, d2, d3]: the dimensions before the last
 * three are merged into the batch. `drop_last`: the buffer has no last dimension
 * (lse [..., heads, seq_q] is seen as [batch, heads, seq_q, 1]). */
static int view(const XLA_FFI_Buffer *b, int drop_last, splat_tensor *t) {
  int64_t rank = b->rank + (drop_last ? 1 : 0);
  if (rank < 4) return 0;
  int64_t dims[4];
  dims[3] = drop_last ? 1 : b->dims[b->rank - 1];
  dims[2] = b->dims[rank - 2];
  dims[1] = b->dims[rank - 3];
  dims[0] = 1;
  for (int64_t i = 0; i < rank - 3; i++) dims[0] *= b->dims[i];
  t->data = b->data;
  if (!dtype_of(b->dtype, &t->dtype)) t->dtype = (splat_dtype)-1;
  for (int i = 0; i < 4; i++) t->shape[i] = dims[i];
  t->strides[3] = 1;
  t->strides[2] = dims[3];
  t->strides[1] = dims[3] * dims[2];
  t->strides[0] = dims[3] * dims[2] * dims[1];
  return 1;
}

typedef struct attrs {
  const XLA_FFI_ByteSpan *spec;
  int64_t seq_q, seq_k;
  float scale;
} attrs;

static int name_is(const XLA_FFI_ByteSpan *name, const char *s) {
  return name->len == strlen(s) && memcmp(name->ptr, s, name->len) == 0;
}

/* Reads spec, seq_q, seq_k and scale; returns NULL or a description of the problem. */
static const char *decode_attrs(const XLA_FFI_Attrs *a, attrs *out) {
  int seen = 0;
  memset(out, 0, sizeof *out);
  for (int64_t i = 0; i < a->size; i++) {
    const XLA_FFI_ByteSpan *name = a->names[i];
    if (name_is(name, "spec")) {
      if (a->types[i] != XLA_FFI_AttrType_STRING) return "attribute spec must be a string";
      out->spec = (const XLA_FFI_ByteSpan *)a->attrs[i];
      seen |= 1;
    } else if (name_is(name, "seq_q") || name_is(name, "seq_k")) {
      const XLA_FFI_Scalar *s = (const XLA_FFI_Scalar *)a->attrs[i];
      if (a->types[i] != XLA_FFI_AttrType_SCALAR || s->dtype != XLA_FFI_DataType_S64) {
        return "attributes seq_q and seq_k must be int64 scalars";
      }
      if (name->ptr[4] == 'q') {
        out->seq_q = *(const int64_t *)s->value;
        seen |= 2;
      } else {
        out->seq_k = *(const int64_t *)s->value;
        seen |= 4;
      }
    } else if (name_is(name, "scale")) {
      const XLA_FFI_Scalar *s = (const XLA_FFI_Scalar *)a->attrs[i];
      if (a->types[i] != XLA_FFI_AttrType_SCALAR || s->dtype != XLA_FFI_DataType_F32) {
        return "attribute scale must be a float32 scalar";
      }
      out->scale = *(const float *)s->value;
      seen |= 8;
    }
  }
  return seen == 15 ? NULL : "attributes spec, seq_q, seq_k and scale are required";
}

/* Fills the metadata XLA asks for when it loads the handler (API version, traits). */
static XLA_FFI_Error *metadata(XLA_FFI_CallFrame *frame) {
  XLA_FFI_Metadata_Extension *ext = (XLA_FFI_Metadata_Extension *)frame->extension_start;
  ext->metadata->api_version.struct_size = XLA_FFI_Api_Version_STRUCT_SIZE;
  ext->metadata->api_version.extension_start = NULL;
  ext->metadata->api_version.major_version = XLA_FFI_API_MAJOR;
  ext->metadata->api_version.minor_version = XLA_FFI_API_MINOR;
  ext->metadata->traits = 0;
  return NULL;
}

/* CUDA only: the stream XLA runs this call on, and the device ordinal. */
static XLA_FFI_Error *cuda_stream(XLA_FFI_CallFrame *frame, splat_stream *stream, int *device) {
  const XLA_FFI_Api *api = frame->api;
  XLA_FFI_Stream_Get_Args sa;
  memset(&sa, 0, sizeof sa);
  sa.struct_size = XLA_FFI_Stream_Get_Args_STRUCT_SIZE;
  sa.ctx = frame->ctx;
  XLA_FFI_Error *err = api->XLA_FFI_Stream_Get(&sa);
  if (err) return err;
  *stream = (splat_stream)sa.stream;
  *device = 0;
  size_t need = offsetof(XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get) + sizeof(void *);
  if (api->struct_size >= need && api->XLA_FFI_DeviceOrdinal_Get) {
    XLA_FFI_DeviceOrdinal_Get_Args da;
    memset(&da, 0, sizeof da);
    da.struct_size = XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE;
    da.ctx = frame->ctx;
    err = api->XLA_FFI_DeviceOrdinal_Get(&da);
    if (err) return err;
    *device = da.device_ordinal;
  }
  return NULL;
}

/* ------------------------------------------------------------------ the handler */

static XLA_FFI_Error *handle(XLA_FFI_CallFrame *frame, enum op op, splat_backend backend) {
  if (frame->extension_start && frame->extension_start->type == XLA_FFI_Extension_Metadata) {
    return metadata(frame);
  }
  const XLA_FFI_Api *api = frame->api;
  const char *name = op_names[op];
  if (frame->stage != XLA_FFI_ExecutionStage_EXECUTE) return NULL;

  static const int n_args[] = {3, 2, 1, 2}, min_rets[] = {1, 1, 1, 1}, max_rets[] = {2, 1, 2, 1};
  if (frame->args.size != n_args[op] || frame->rets.size < min_rets[op] ||
      frame->rets.size > max_rets[op]) {
    return invalid(api, name, "wrong number of operands or results");
  }
  splat_tensor in[3], ret[2];
  for (int64_t i = 0; i < frame->args.size; i++) {
    if (frame->args.types[i] != XLA_FFI_ArgType_BUFFER ||
        !view((const XLA_FFI_Buffer *)frame->args.args[i], 0, &in[i])) {
      return invalid(api, name, "operands must be arrays of rank >= 4");
    }
  }
  for (int64_t i = 0; i < frame->rets.size; i++) {
    if (frame->rets.types[i] != XLA_FFI_RetType_BUFFER ||
        !view((const XLA_FFI_Buffer *)frame->rets.rets[i], i == 1, &ret[i])) {
      return invalid(api, name, "results must be arrays of rank >= 4 (lse: rank >= 3)");
    }
  }
  attrs at;
  const char *bad = decode_attrs(&frame->attrs, &at);
  if (bad) return invalid(api, name, bad);

  /* The plan's shapes: Q-like operand for heads, K/V-like operand for heads_kv. */
  plan_request rq;
  memset(&rq, 0, sizeof rq);
  rq.spec = at.spec->ptr;
  rq.spec_len = at.spec->len;
  rq.seq_q = at.seq_q;
  rq.seq_k = at.seq_k;
  rq.backend = backend;
  const splat_tensor *kvlike = op == OP_SOFTMAX ? &in[0] : &in[1];
  rq.desc.batch = in[0].shape[0];
  rq.desc.heads = in[0].shape[1];
  rq.desc.heads_kv = kvlike->shape[1];
  rq.desc.head_dim = op == OP_SOFTMAX ? VALUES_ONLY_HEAD_DIM : kvlike->shape[3];
  rq.desc.dtype = kvlike->dtype; /* softmax: the values dtype (CUDA plans need it) */
  rq.desc.ops = op == OP_ATTENTION ? SPLAT_OPS_ATTENTION : SPLAT_OPS_UNFUSED;
  for (int64_t i = 0; i < frame->args.size; i++) {
    if (!splat_dtype_name(in[i].dtype)) {
      return invalid(api, name, "operand dtypes must be float32, float16 or bfloat16");
    }
  }

  splat_stream stream = NULL;
  if (backend == SPLAT_BACKEND_CUDA) {
    XLA_FFI_Error *err = cuda_stream(frame, &stream, &rq.device);
    if (err) return err;
    if (rq.device < 0 || rq.device >= MAX_DEVICES) return invalid(api, name, "device ordinal");
  }

  plan_entry *e = NULL;
  char why[512];
  splat_status st = lookup_plan(&rq, &e, why, sizeof why);
  if (st != SPLAT_OK) return why[0] ? invalid(api, name, why) : splat_error(api, name, st);

  const splat_tensor *lse = frame->rets.size == 2 ? &ret[1] : NULL;
  pthread_mutex_lock(&e->run_lock);
  switch (op) {
    case OP_ATTENTION:
      st = splat_attention(e->plan, &in[0], &in[1], &in[2], at.scale, &ret[0], lse, stream);
      break;
    case OP_SDDMM:
      st = splat_sddmm(e->plan, &in[0], &in[1], at.scale, &ret[0], stream);
      break;
    case OP_SOFTMAX:
      st = splat_softmax(e->plan, &in[0], at.scale, &ret[0], lse, stream);
      break;
    case OP_SPMM:
      st = splat_spmm(e->plan, &in[0], &in[1], &ret[0], stream);
      break;
  }
  pthread_mutex_unlock(&e->run_lock);
  return st == SPLAT_OK ? NULL : splat_error(api, name, st);
}

#define HANDLERS(op, OP)                                              \
  EXPORT XLA_FFI_Error *splat_xla_##op##_cpu(XLA_FFI_CallFrame *f) {  \
    return handle(f, OP, SPLAT_BACKEND_CPU);                          \
  }                                                                   \
  EXPORT XLA_FFI_Error *splat_xla_##op##_cuda(XLA_FFI_CallFrame *f) { \
    return handle(f, OP, SPLAT_BACKEND_CUDA);                         \
  }

HANDLERS(attention, OP_ATTENTION)
HANDLERS(sddmm, OP_SDDMM)
HANDLERS(softmax, OP_SOFTMAX)
HANDLERS(spmm, OP_SPMM)
