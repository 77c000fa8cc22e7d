/* splat.h — the one public header of splat: sparse attention under regular masks.
 *
 * splat computes, for every batch b and head h,
 *     O[i] = sum_{j in M(i)} softmax_j(scale * <Q[i], K[j]>) * V[j]
 * where M(i) is the set of key columns query row i may see (the pattern, see
 * docs/patterns.md). A pattern is analysed once into the affine-compressed sparse
 * row format (ACSR) and a tile plan; the plan then runs the operations many times.
 *
 * Conventions:
 *  - Every function returns a splat_status. On failure a sentence naming the
 *    argument, its value and the rule is kept: per context for calls that take a
 *    context or plan, and per thread for all calls (splat_last_error(NULL)).
 *  - Handles are opaque and owned by the caller; *_destroy accepts NULL.
 *  - Sizes, strides and indices are int64_t; strides count elements, not bytes.
 *  - Library code never prints, exits or aborts on user input.
 *  - This header needs no CUDA header. */
#ifndef SPLAT_H
#define SPLAT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported functions of the shared library. */
#if defined(__GNUC__)
#define SPLAT_API __attribute__((visibility("default")))
#else
#define SPLAT_API
#endif

#define SPLAT_VERSION_MAJOR 0
#define SPLAT_VERSION_MINOR 1
#define SPLAT_VERSION_PATCH 0

/* Most affine segments a row may have before it goes to the irregular remainder. */
#define SPLAT_MAX_SEGMENTS 8
/* Largest head_dim any backend accepts. */
#define SPLAT_MAX_HEAD_DIM 256
/* Pass as `scale` to splat_sddmm / splat_attention for 1/sqrt(head_dim). */
#define SPLAT_DEFAULT_SCALE 0.0f

/* ---------------------------------------------------------------- status */

typedef enum splat_status {
  SPLAT_OK = 0,
  SPLAT_ERR_INVALID_ARGUMENT = 1, /* a NULL, a bad shape, stride, dtype, value, NaN */
  SPLAT_ERR_PARSE = 2,            /* a pattern spec that does not follow the grammar */
  SPLAT_ERR_UNSUPPORTED = 3,      /* valid request this build or device cannot serve */
  SPLAT_ERR_OUT_OF_MEMORY = 4,    /* host or device allocation failed */
  SPLAT_ERR_NO_DEVICE = 5,        /* CUDA requested but no driver or GPU is present */
  SPLAT_ERR_CUDA = 6,             /* the CUDA driver returned an error */
  SPLAT_ERR_COMPILE = 7,          /* run-time compilation of a kernel failed */
  SPLAT_ERR_IO = 8,               /* a file could not be read or written */
  SPLAT_ERR_INTERNAL = 9          /* a bug in splat; please report it */
} splat_status;

/* "SPLAT_OK", "SPLAT_ERR_INVALID_ARGUMENT", ...; "SPLAT_ERR_UNKNOWN" for other values.
 * Returns a static string. */
SPLAT_API const char *splat_status_name(splat_status status);
/* A short fixed description of the status ("invalid argument", ...). Static string. */
SPLAT_API const char *splat_status_message(splat_status status);

typedef struct splat_context splat_context;
typedef struct splat_pattern splat_pattern;
typedef struct splat_plan splat_plan;

/* The detailed message of the last failure: of `ctx` when it is not NULL, else of
 * the calling thread. "" when there was none. The string stays valid until the next
 * failing call on the same context / thread. Threads failing at once on one context each
 * write a whole message (the last one stays); a thread that reads a context's message
 * while another fails on it may see it change: splat_last_error(NULL), the calling
 * thread's own, has no such race. */
SPLAT_API const char *splat_last_error(const splat_context *ctx);

/* "0.1.0": the library version as a static string. */
SPLAT_API const char *splat_version(void);

/* ---------------------------------------------------------------- tensors */

typedef enum splat_dtype { SPLAT_F32 = 0, SPLAT_F16 = 1, SPLAT_BF16 = 2 } splat_dtype;

/* "f32", "f16", "bf16"; NULL for an unknown value. */
SPLAT_API const char *splat_dtype_name(splat_dtype dtype);
/* Parses "f32"/"fp32"/"float32", "f16"/"fp16"/"float16", "bf16"/"bfloat16". */
SPLAT_API splat_status splat_dtype_parse(const char *name, splat_dtype *out);

/* A strided 4-d tensor. For Q, K, V and O: [batch, heads, seq, head_dim].
 * ACSR values (scores, probabilities): [batch, heads, seq_q, W], W = the plan's
 * row width. Log-sum-exp: dtype SPLAT_F32, [batch, heads, seq_q, 1].
 * `data` is host memory for a CPU context, device memory for a CUDA context.
 * Strides are in elements, |stride| <= 2^40 (outputs must not overlap); a batch or head
 * dimension of extent 1 may have any stride, never used (docs/api.md, Tensors). */
typedef struct splat_tensor {
  void *data;
  splat_dtype dtype;
  int64_t shape[4];
  int64_t strides[4];
} splat_tensor;

/* Fills a contiguous row-major descriptor. */
SPLAT_API splat_tensor splat_tensor_contiguous(void *data, splat_dtype dtype, int64_t d0,
                                               int64_t d1, int64_t d2, int64_t d3);

/* ---------------------------------------------------------------- context */

typedef enum splat_backend {
  SPLAT_BACKEND_AUTO = 0, /* CUDA when usable, else CPU */
  SPLAT_BACKEND_CPU = 1,
  SPLAT_BACKEND_CUDA = 2
} splat_backend;

/* "auto", "cpu", "cuda"; NULL for an unknown value. */
SPLAT_API const char *splat_backend_name(splat_backend backend);

typedef struct splat_context_options {
  splat_backend backend; /* SPLAT_BACKEND_AUTO by default */
  int device;            /* CUDA device ordinal; 0 by default */
  int num_threads;       /* CPU worker threads; 0 = $SPLAT_NUM_THREADS or all the cores the
                          * process may run on (its CPU affinity) */
} splat_context_options;

/* options: host, may be NULL for defaults. out: host, receives the new context. */
SPLAT_API splat_status splat_context_create(const splat_context_options *options,
                                            splat_context **out);
SPLAT_API void splat_context_destroy(splat_context *ctx);
/* The backend the context runs on (never AUTO). */
SPLAT_API splat_backend splat_context_backend(const splat_context *ctx);

/* Which backends this process can use. `why_not_cuda`: host buffer of `cap` chars
 * (may be NULL when cap is 0) receiving the reason CUDA is unusable, or "" when it is.
 * A bad $SPLAT_NUM_THREADS returns SPLAT_ERR_INVALID_ARGUMENT naming it, with cpu_threads 0
 * and every other field filled in. */
typedef struct splat_environment {
  int cpu_threads;                      /* worker threads a default CPU context uses */
  int cuda_available;                   /* 1 when a driver and at least one device were found */
  int cuda_devices;                     /* number of CUDA devices */
  int cuda_driver_version;              /* e.g. 13000; 0 when unknown */
  int nvrtc_available;                  /* 1 when NVRTC could be loaded */
  int nvrtc_version;                    /* major*1000 + minor*10; 0 when unknown */
  char device_name[128];                /* device 0's name, "" when none */
  int device_cc_major, device_cc_minor; /* device 0's compute capability */
} splat_environment;
SPLAT_API splat_status splat_environment_query(splat_environment *out, char *why_not_cuda,
                                               size_t cap);

/* ---------------------------------------------------------------- patterns */

/* Parses a pattern spec (grammar in docs/patterns.md), e.g. "window(256) | global(64)",
 * for seq_q query rows and seq_k key columns (seq_k <= 0 means seq_k = seq_q).
 * spec: host NUL-terminated string. out: host, receives the pattern.
 * A bad spec returns SPLAT_ERR_PARSE with a message pointing at the character. */
SPLAT_API splat_status splat_pattern_parse(const char *spec, int64_t seq_q, int64_t seq_k,
                                           splat_pattern **out);
/* An explicit mask. mask: host uint8_t[seq_q * seq_k], row-major, nonzero = visible.
 * The bits are copied. */
SPLAT_API splat_status splat_pattern_from_mask(const uint8_t *mask, int64_t seq_q, int64_t seq_k,
                                               splat_pattern **out);
/* An explicit mask from a 2-d .npy file of dtype bool, uint8 or int8 (C or Fortran
 * order). path: host NUL-terminated string. */
SPLAT_API splat_status splat_pattern_from_npy(const char *path, splat_pattern **out);
/* Union (a | b) and intersection (a & b); a and b must have equal seq_q and seq_k.
 * The operands are not consumed. */
SPLAT_API splat_status splat_pattern_union(const splat_pattern *a, const splat_pattern *b,
                                           splat_pattern **out);
SPLAT_API splat_status splat_pattern_intersect(const splat_pattern *a, const splat_pattern *b,
                                               splat_pattern **out);
SPLAT_API void splat_pattern_destroy(splat_pattern *pattern);

SPLAT_API int64_t splat_pattern_seq_q(const splat_pattern *pattern);
SPLAT_API int64_t splat_pattern_seq_k(const splat_pattern *pattern);
/* The canonical spec text ("window(3,3) | global(2)"; explicit masks print as
 * "mask(<seq_q>x<seq_k>)"). Static for the pattern's lifetime. */
SPLAT_API const char *splat_pattern_spec(const splat_pattern *pattern);
/* Columns of row i in increasing order. cols: host int64_t[cap] (may be NULL when
 * cap is 0); *count: host, receives the row's full column count even when it exceeds
 * cap (only the first cap are written). */
SPLAT_API splat_status splat_pattern_row(const splat_pattern *pattern, int64_t row, int64_t *cols,
                                         int64_t cap, int64_t *count);

/* ---------------------------------------------------------------- analysis */

/* What the analysis of a pattern found (docs/format.md explains each field). */
typedef struct splat_report {
  int64_t seq_q, seq_k;
  int64_t nnz;         /* mask elements */
  double density;      /* nnz / (seq_q * seq_k) */
  int64_t max_row_nnz; /* the largest row's nnz (0 for an empty mask) */
  int64_t row_width;   /* W, the last dimension of ACSR values (splat_plan_row_width) */
  int max_segments;    /* K used by the analysis */
  /* rows_by_segments[s] = rows with s affine segments (s = 0..K);
   * rows_by_segments[K + 1] = irregular rows (more than K segments). */
  int64_t rows_by_segments[SPLAT_MAX_SEGMENTS + 2];
  int64_t segments;    /* affine segments over all regular rows */
  int64_t regular_nnz; /* mask elements in rows of at most K segments */
  double regular_fraction;
  int64_t irregular_rows;
  int64_t acsr_bytes; /* ACSR metadata: row offsets + segments + remainder CSR */
  int64_t csr_bytes;  /* CSR with int32 indices: (seq_q + 1 + nnz) * 4 */
  int64_t bsr_blocks; /* non-empty 128x128 blocks */
  int64_t bsr_bytes;  /* 128x128 block-sparse metadata: (block rows + 1 + blocks) * 4 */
  int tile_q, tile_k; /* tile shape of the plan */
  int rows_permuted;  /* 1 when rows were regrouped by stride and phase */
  int tile_rows_max;  /* most rows in one query tile (a phase class may hold fewer than tile_q) */
  int64_t query_tiles;
  int64_t key_runs;
  int64_t full_tiles;       /* key tiles run with no predicate */
  int64_t predicated_tiles; /* key tiles that evaluate the mask per element */
  int64_t computed;         /* tile elements computed: sum of tile_q x tile_k per key tile */
  double tile_waste;        /* computed / regular_nnz (1.0 = no waste) */
  double analysis_ms;       /* segments + remainder */
  double plan_ms;           /* alignment + tile plans, wall time; a plan's includes its report's
                             * (built beside them) and a CUDA plan's its two passes' where built
                             * beside them (docs/cuda.md, Kernels) */
  double report_ms;         /* the statistics above */
  /* Kernels of a CUDA plan: wall time to get (memory cache, disk cache or NVRTC compile)
   * and load every kernel program at plan creation (an op's row and tile kernels are two),
   * and how many of them NVRTC compiled (not cache hits). 0 for CPU plans and for
   * splat_analyze. */
  double kernels_ms;
  int kernels_compiled;
  /* Device memory a CUDA plan holds from creation to destruction: its metadata (segments,
   * tiles, runs, tables). 0 for CPU plans and for splat_analyze. */
  int64_t device_bytes;
  /* Device memory each fused attention call of a CUDA plan works in while it runs
   * (two-pass attention's rows, split tiles' chunks), taken from its context's memory pool
   * on the call's stream and given back there (docs/cuda.md "Workspace"). 0 where a call
   * takes none, for CPU plans and for splat_analyze. */
  int64_t workspace_bytes;
} splat_report;

/* Analyses a pattern without a context: tile_q, tile_k (0 = 128), max_segments
 * (0 = SPLAT_MAX_SEGMENTS). out: host. */
SPLAT_API splat_status splat_analyze(const splat_pattern *pattern, int tile_q, int tile_k,
                                     int max_segments, splat_report *out);
/* Formats a report as text (json = 0) or one JSON object (json = 1) into buf (host,
 * cap chars, may be NULL when cap is 0); *len (host, may be NULL) receives the length
 * needed without the NUL. Truncates safely. */
SPLAT_API splat_status splat_report_format(const splat_report *report, int json, char *buf,
                                           size_t cap, size_t *len);

/* ---------------------------------------------------------------- plans */

/* The operations a plan is built for (splat_plan_desc.ops, a bit set): a CUDA plan
 * compiles and loads only their kernels, and running any other fails with
 * SPLAT_ERR_INVALID_ARGUMENT. 0 means all of them. The CUDA backend has no attention
 * backward yet: there splat_attention_backward fails with SPLAT_ERR_UNSUPPORTED. */
enum {
  SPLAT_OPS_SDDMM = 1,
  SPLAT_OPS_SOFTMAX = 2,
  SPLAT_OPS_SPMM = 4,
  SPLAT_OPS_ATTENTION = 8,
  SPLAT_OPS_ATTENTION_BACKWARD = 16,
  SPLAT_OPS_UNFUSED = 7, /* sddmm, softmax and spmm: SPLAT's pipeline */
  SPLAT_OPS_ALL = 31
};

typedef struct splat_plan_desc {
  int64_t batch;
  int64_t heads;      /* query heads */
  int64_t heads_kv;   /* key/value heads; 0 = heads; must divide heads */
  int64_t head_dim;   /* 1..SPLAT_MAX_HEAD_DIM */
  splat_dtype dtype;  /* dtype of Q, K, V and O */
  int tile_q, tile_k; /* 0 = 128; a CUDA plan's tile_q 0 may take 192 (docs/cuda.md) */
  int max_segments;   /* 0 = SPLAT_MAX_SEGMENTS */
  unsigned ops;       /* SPLAT_OPS_* bits of the operations to run; 0 = SPLAT_OPS_ALL */
} splat_plan_desc;

/* Builds a plan: analysis, tile plan and (on CUDA) kernels. desc: host. The pattern
 * is not referenced after this returns. out: host, receives the plan. A plan whose tensors
 * would hold more than 2^60 elements (q and out, k and v, and with unfused operations in ops
 * the scores and probs of row width W) is SPLAT_ERR_INVALID_ARGUMENT, naming the tensor. */
SPLAT_API splat_status splat_plan_create(splat_context *ctx, const splat_pattern *pattern,
                                         const splat_plan_desc *desc, splat_plan **out);
SPLAT_API void splat_plan_destroy(splat_plan *plan);
/* The analysis the plan was built from. out: host. */
SPLAT_API splat_status splat_plan_report(const splat_plan *plan, splat_report *out);
/* W, the last dimension of ACSR value tensors: the largest row nnz (at least 1), rounded up
 * to a multiple of 16 when it is 128 or more (docs/format.md "Row width"). */
SPLAT_API int64_t splat_plan_row_width(const splat_plan *plan);

/* ---------------------------------------------------------------- operations
 * All tensors live where the plan's context runs (host for CPU, device for CUDA)
 * and must match the plan's shapes. stream: a CUstream for CUDA (NULL = default
 * stream); ignored by the CPU backend, which runs synchronously. Inputs must be
 * finite. Values of padding entries (k >= row nnz) are never read; the CUDA R-SDDMM may set
 * to +0 those in the 32-byte sector of a row's last entry, and writes no other. */
typedef struct CUstream_st *splat_stream;

/* scores[b,h,i,k] = scale * <Q[b,h,i], K[b,hk,col_k(i)]>, col_k(i) the k-th column
 * of M(i), hk = h / (H / Hkv). q: [B,H,Sq,D]; k: [B,Hkv,Sk,D]; scores: [B,H,Sq,W], any
 * dtype. scale SPLAT_DEFAULT_SCALE (0) is 1/sqrt(D): a double that rounds to 0 as a float
 * (below ~7e-46 in magnitude, passed here) selects it too. */
SPLAT_API splat_status splat_sddmm(splat_plan *plan, const splat_tensor *q, const splat_tensor *k,
                                   float scale, const splat_tensor *scores, splat_stream stream);
/* probs = softmax over each row of (scale * scores); probs may be scores itself.
 * lse: [B,H,Sq,1] f32 receiving log(sum exp(scale * scores)), -inf for empty rows;
 * may be NULL. scale is used as given (pass 1 when sddmm already scaled). */
SPLAT_API splat_status splat_softmax(splat_plan *plan, const splat_tensor *scores, float scale,
                                     const splat_tensor *probs, const splat_tensor *lse,
                                     splat_stream stream);
/* out[b,h,i] = sum_k probs[b,h,i,k] * V[b,hk,col_k(i)]; empty rows give zeros.
 * probs: [B,H,Sq,W]; v: [B,Hkv,Sk,D]; out: [B,H,Sq,D]. */
SPLAT_API splat_status splat_spmm(splat_plan *plan, const splat_tensor *probs,
                                  const splat_tensor *v, const splat_tensor *out,
                                  splat_stream stream);
/* Fused forward: out = attention(q, k, v) under the pattern; lse as in splat_softmax
 * (may be NULL). Empty rows give zeros and lse = -inf. A CUDA call of a plan with a
 * workspace (two-pass masks such as strided | window, SPLAT_ATTN_SPLIT:
 * splat_report.workspace_bytes) takes it from its context's memory pool on `stream` and
 * gives it back there, so calls on several streams may overlap, and a CUDA
 * graph may capture the call (docs/cuda.md "Workspace"); SPLAT_ERR_OUT_OF_MEMORY where the
 * pool cannot serve it. */
SPLAT_API splat_status splat_attention(splat_plan *plan, const splat_tensor *q,
                                       const splat_tensor *k, const splat_tensor *v, float scale,
                                       const splat_tensor *out, const splat_tensor *lse,
                                       splat_stream stream);
/* Backward of splat_attention: with P[i,j] = exp(scale <q_i, k_j> - lse_i) over the
 * pattern's (i, j) and dout = dL/dout, writes
 *   dv_j = sum_i P[i,j] dout_i,   dS[i,j] = P[i,j] (<dout_i, v_j> - <dout_i, out_i>),
 *   dq_i = scale sum_j dS[i,j] k_j,   dk_j = scale sum_i dS[i,j] q_i,
 * dk and dv of grouped-query attention summing over the query heads of their key/value
 * head. q, k, v, scale: the forward's; out and lse: what the forward wrote for them (lse
 * required: [B,H,Sq,1] f32, -inf exactly on rows that see no key). dout: [B,H,Sq,D]; dq:
 * [B,H,Sq,D]; dk, dv: [B,Hkv,Sk,D]; all but lse in the plan's dtype. Keys no row sees get
 * zero gradients. The outputs must not overlap the inputs or each other. Needs
 * SPLAT_OPS_ATTENTION_BACKWARD in the plan's ops; CPU backend only for now. */
SPLAT_API splat_status splat_attention_backward(splat_plan *plan, const splat_tensor *q,
                                                const splat_tensor *k, const splat_tensor *v,
                                                const splat_tensor *out, const splat_tensor *lse,
                                                const splat_tensor *dout, float scale,
                                                const splat_tensor *dq, const splat_tensor *dk,
                                                const splat_tensor *dv, splat_stream stream);

#ifdef __cplusplus
}
#endif
#endif /* SPLAT_H */
