/* workspace.c — stream-ordered workspaces from one memory pool per CUDA context
 * (workspace.h). */
#include "cuda/workspace.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

/* No pool for device dev, and why (logged): its attention plans run one pass. */
static splat_status no_pool(const splat__cuda_device *dev, const char *why) {
  splat__log(SPLAT__LOG_INFO,
             "device %d: no memory pool for workspaces (%s): attention plans run "
             "one pass, and SPLAT_ATTN_SPLIT is refused",
             dev->ordinal, why);
  return SPLAT_OK;
}

splat_status splat__workspace_pool_create(const splat__cuda_api_table *drv,
                                          const splat__cuda_device *dev, CUmemoryPool *out) {
  *out = NULL;
  if (!dev->memory_pools) return no_pool(dev, "the device serves none");
  if (!drv->cuMemPoolCreate || !drv->cuMemPoolDestroy || !drv->cuMemPoolSetAttribute ||
      !drv->cuMemPoolTrimTo || !drv->cuMemAllocFromPoolAsync || !drv->cuMemFreeAsync)
    return no_pool(dev, "the driver lacks the cuMemPool functions");
  splat__cu_mem_pool_props props;
  memset(&props, 0, sizeof props);
  props.alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handle_types = CU_MEM_HANDLE_TYPE_NONE;
  props.location_type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location_id = dev->ordinal;
  CUmemoryPool pool = NULL;
  CUresult rc = drv->cuMemPoolCreate(&pool, &props);
  /* Keep what was served: released at every synchronisation (the default), each call
   * after one would map its workspace afresh. Plans trim it when they go
   * (splat__workspace_pool_trim). */
  uint64_t keep = UINT64_MAX;
  if (rc == CUDA_SUCCESS) {
    rc = drv->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    if (rc != CUDA_SUCCESS) drv->cuMemPoolDestroy(pool);
  }
  if (rc != CUDA_SUCCESS) {
    const char *name = NULL;
    if (drv->cuGetErrorName) drv->cuGetErrorName(rc, &name);
    char why[96];
    snprintf(why, sizeof why, "creating it failed: %s", name ? name : "unknown error");
    return no_pool(dev, why);
  }
  *out = pool;
  return SPLAT_OK;
}

void splat__workspace_pool_destroy(const splat__cuda_api_table *drv, CUmemoryPool pool) {
  if (pool) drv->cuMemPoolDestroy(pool);
}

void splat__workspace_pool_trim(const splat__cuda_api_table *drv, CUmemoryPool pool) {
  if (pool) drv->cuMemPoolTrimTo(pool, 0);
}

splat_status splat__workspace_take(const splat__cuda_api_table *drv, CUmemoryPool pool,
                                   size_t bytes, const char *hint, CUstream stream,
                                   CUdeviceptr *out) {
  *out = 0;
  char what[256];
  snprintf(what, sizeof what,
           "splat_attention: cuMemAllocFromPoolAsync (%.1f MiB of workspace; %s)",
           (double)bytes / (1 << 20), hint);
  return splat__cuda_check(drv->cuMemAllocFromPoolAsync(out, bytes, pool, stream), what);
}

splat_status splat__workspace_give(const splat__cuda_api_table *drv, CUdeviceptr ptr,
                                   CUstream stream) {
  if (!ptr) return SPLAT_OK;
  return splat__cuda_check(drv->cuMemFreeAsync(ptr, stream),
                           "splat_attention: cuMemFreeAsync (the workspace)");
}
