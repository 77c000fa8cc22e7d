/* cuda_types.h — the few CUDA driver API types and constants splat uses, declared
 * without any CUDA header so the library builds where CUDA is absent. Values are
 * those of the CUDA 13 toolkit's cuda.h (they are part of the driver's stable ABI). */
#ifndef SPLAT_CUDA_TYPES_H
#define SPLAT_CUDA_TYPES_H

#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr; /* CUdeviceptr_v2 on 64-bit hosts */
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream; /* the same struct tag as splat.h's splat_stream */
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;

/* CUresult values splat looks at by number. */
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_STUB_LIBRARY = 34,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_NOT_FOUND = 500
};

/* CUdevice_attribute values. */
enum {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115
};

/* CUfunction_attribute values. */
enum {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9
};

/* CUevent_flags. */
enum { CU_EVENT_DEFAULT = 0x0, CU_EVENT_BLOCKING_SYNC = 0x1, CU_EVENT_DISABLE_TIMING = 0x2 };

/* A memory pool of device memory (CUmemPoolProps with CU_MEM_ALLOCATION_TYPE_PINNED, no
 * export handle, a CU_MEM_LOCATION_TYPE_DEVICE location) and the attribute splat sets. */
enum { CU_MEM_ALLOCATION_TYPE_PINNED = 1, CU_MEM_HANDLE_TYPE_NONE = 0 };
enum { CU_MEM_LOCATION_TYPE_DEVICE = 1 };
enum { CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4 };
typedef struct splat__cu_mem_pool_props {
  int alloc_type, handle_types;
  int location_type, location_id;
  void *win32_security_attributes;
  size_t max_size;
  unsigned short usage;
  unsigned char reserved[54];
} splat__cu_mem_pool_props;
_Static_assert(sizeof(splat__cu_mem_pool_props) == 88 &&
                   offsetof(splat__cu_mem_pool_props, win32_security_attributes) == 16 &&
                   offsetof(splat__cu_mem_pool_props, usage) == 32,
               "CUmemPoolProps's layout (cuda.h)");

/* CUdriverProcAddress_flags and CUdriverProcAddressQueryResult (cuGetProcAddress). */
enum {
  CU_GET_PROC_ADDRESS_DEFAULT = 0,
  CU_GET_PROC_ADDRESS_LEGACY_STREAM = 1,
  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 2
};
enum {
  CU_GET_PROC_ADDRESS_SUCCESS = 0,
  CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
  CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
};

/* cuLaunchKernelEx's configuration (CUlaunchConfig, CUlaunchAttribute: an id, padding to 8
 * bytes, a 64-byte value union) and the one attribute splat sets. */
enum { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct splat__cu_launch_attr {
  int id;
  char pad[4];
  union {
    char bytes[64];
    int programmatic_stream_serialization_allowed;
  } value;
} splat__cu_launch_attr;
typedef struct splat__cu_launch_config {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes;
  CUstream stream;
  splat__cu_launch_attr *attrs;
  unsigned num_attrs;
} splat__cu_launch_config;
_Static_assert(sizeof(splat__cu_launch_attr) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(sizeof(splat__cu_launch_config) == 56 &&
                   offsetof(splat__cu_launch_config, stream) == 32 &&
                   offsetof(splat__cu_launch_config, attrs) == 40 &&
                   offsetof(splat__cu_launch_config, num_attrs) == 48,
               "CUlaunchConfig's layout (cuda.h)");

/* cuTensorMapEncodeTiled, cuda.h's signature with its enum arguments as int (data type,
 * interleave, swizzle, L2 promotion, out-of-bounds fill) and the map as 128 bytes. */
typedef CUresult (*splat__tma_encode_fn)(void *map, int dtype, unsigned rank, void *addr,
                                         const unsigned long long *dims,
                                         const unsigned long long *strides, const unsigned *box,
                                         const unsigned *elem_strides, int interleave, int swizzle,
                                         int l2_promotion, int oob_fill);

#endif
