/* workspace.c — stream-ordered workspaces from one memory pool per CUDA context
 * (workspace.h). */
#include "cuda/workspace.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"

splat_status splat__workspace_pool_create(const splat__cuda_device *dev, CUmemoryPool *out) {
  *out = NULL;
  if (!dev->memory_pools) {
    splat__log(SPLAT__LOG_INFO,
               "device %d serves no memory pools: attention plans run one pass, without "
               "a workspace",
               dev->ordinal);
    return SPLAT_OK;
  }
  const splat__cuda_api_table *drv = NULL;
  splat_status st = splat__cuda_api(&drv);
  if (st != SPLAT_OK) return st;
  splat__cu_mem_pool_props props;
  memset(&props, 0, sizeof props);
  props.alloc_type = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handle_types = CU_MEM_HANDLE_TYPE_NONE;
  props.location_type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location_id = dev->ordinal;
  CUmemoryPool pool = NULL;
  st = splat__cuda_check(drv->cuMemPoolCreate(&pool, &props),
                         "cuMemPoolCreate (the attention's workspaces)");
  if (st != SPLAT_OK) return st;
  /* Keep what was served: released at every synchronisation (the default), each call
   * after one would map its workspace afresh. */
  uint64_t keep = UINT64_MAX;
  st = splat__cuda_check(drv->cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
                         "cuMemPoolSetAttribute (the workspaces' release threshold)");
  if (st != SPLAT_OK) {
    drv->cuMemPoolDestroy(pool);
    return st;
  }
  *out = pool;
  return SPLAT_OK;
}

void splat__workspace_pool_destroy(CUmemoryPool pool) {
  const splat__cuda_api_table *drv = NULL;
  if (pool && splat__cuda_api(&drv) == SPLAT_OK) drv->cuMemPoolDestroy(pool);
}

splat_status splat__workspace_take(CUmemoryPool pool, size_t bytes, CUstream stream,
                                   CUdeviceptr *out) {
  *out = 0;
  const splat__cuda_api_table *drv = NULL;
  splat_status st = splat__cuda_api(&drv);
  if (st != SPLAT_OK) return st;
  char what[128];
  snprintf(what, sizeof what, "cuMemAllocFromPoolAsync (%.1f MiB of workspace)",
           (double)bytes / (1 << 20));
  return splat__cuda_check(drv->cuMemAllocFromPoolAsync(out, bytes, pool, stream), what);
}

splat_status splat__workspace_give(CUdeviceptr ptr, CUstream stream) {
  const splat__cuda_api_table *drv = NULL;
  if (!ptr) return SPLAT_OK;
  splat_status st = splat__cuda_api(&drv);
  if (st != SPLAT_OK) return st;
  return splat__cuda_check(drv->cuMemFreeAsync(ptr, stream),
                           "cuMemFreeAsync (the attention's workspace)");
}
