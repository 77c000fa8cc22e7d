/* workspace.h — the device memory a fused attention call works in (two-pass plans' rows,
 * split tiles' chunks): taken from its CUDA context's memory pool on the call's stream and
 * given back on it when the call's kernels are done (stream-ordered allocation). So plans
 * hold no workspace of their own (a cache of plans for many shapes holds the pool's peak,
 * not one workspace each), calls of one plan on several streams run at once, and a CUDA
 * graph capturing a call records the workspace as graph memory nodes. The pool keeps what
 * it has served until the context is destroyed (docs/cuda.md "Workspace"). */
#ifndef SPLAT_CUDA_WORKSPACE_H
#define SPLAT_CUDA_WORKSPACE_H

#include <stddef.h>

#include "cuda/cuda_types.h"
#include "cuda/driver.h"
#include "splat.h"

/* Each function calls the driver through drv (splat__cuda_api's table; tests pass their own). */

/* The pool of device dev (its context current), keeping what it serves: *out NULL where
 * the device serves no memory pools, the driver lacks their functions or refuses to create
 * one (logged at info; plans then take no workspace: cuda_backend.c attn_layout_plan).
 * Fails only where the driver table cannot be had. */
splat_status splat__workspace_pool_create(const splat__cuda_api_table *drv,
                                          const splat__cuda_device *dev, CUmemoryPool *out);
/* Accepts NULL. Memory still taken is released once its calls end. */
void splat__workspace_pool_destroy(const splat__cuda_api_table *drv, CUmemoryPool pool);
/* Releases the memory pool holds and no call has taken (a plan with a workspace is
 * destroyed: the pool's footprint follows the live plans). Accepts NULL. */
void splat__workspace_pool_trim(const splat__cuda_api_table *drv, CUmemoryPool pool);

/* bytes of pool's memory, usable by work enqueued on stream after this call, in *out.
 * Fails as cuMemAllocFromPoolAsync (SPLAT_ERR_OUT_OF_MEMORY naming the bytes and `hint`,
 * the way to a plan without the workspace). */
splat_status splat__workspace_take(const splat__cuda_api_table *drv, CUmemoryPool pool,
                                   size_t bytes, const char *hint, CUstream stream,
                                   CUdeviceptr *out);
/* Gives ptr back to its pool once the work enqueued on stream before this call is done.
 * Accepts 0. */
splat_status splat__workspace_give(const splat__cuda_api_table *drv, CUdeviceptr ptr,
                                   CUstream stream);

#endif
