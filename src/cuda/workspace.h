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

/* The pool of device dev (its context current): *out NULL, and SPLAT_OK, where the device
 * serves no memory pools (dev->memory_pools 0: plans then take no workspace, attn_passes.h).
 * Fails as the driver's cuMemPoolCreate. */
splat_status splat__workspace_pool_create(const splat__cuda_device *dev, CUmemoryPool *out);
/* Accepts NULL. Memory still taken is released once its calls end. */
void splat__workspace_pool_destroy(CUmemoryPool pool);

/* bytes of pool's memory, usable by work enqueued on stream after this call, in *out.
 * Fails as cuMemAllocFromPoolAsync (SPLAT_ERR_OUT_OF_MEMORY naming the bytes). */
splat_status splat__workspace_take(CUmemoryPool pool, size_t bytes, CUstream stream,
                                   CUdeviceptr *out);
/* Gives ptr back to its pool once the work enqueued on stream before this call is done.
 * Accepts 0. */
splat_status splat__workspace_give(CUdeviceptr ptr, CUstream stream);

#endif
