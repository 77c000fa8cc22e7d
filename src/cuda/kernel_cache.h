/* kernel_cache.h — the kernel cache of DESIGN.md §6: compiled CUBINs by a 128-bit key
 * hashing (generated source, program name, NVRTC version, compile options, arch,
 * splat_version()), in a process-wide memory cache and a disk cache of one file per
 * key under $SPLAT_CACHE_DIR (else ${XDG_CACHE_HOME:-$HOME/.cache}/splat), written
 * atomically (temp file in the same directory + rename), validated on every read.
 * $SPLAT_DUMP_DIR, when set, receives <name>-<key>.cu / .ptx / .log of every compile
 * and of every disk hit that enters the memory cache. */
#ifndef SPLAT_CUDA_KERNEL_CACHE_H
#define SPLAT_CUDA_KERNEL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "core/hash.h"
#include "cuda/nvrtc.h"
#include "splat.h"

/* Where a kernel came from. */
typedef enum splat__cache_hit {
  SPLAT__CACHE_COMPILED = 0, /* compiled now by NVRTC */
  SPLAT__CACHE_MEMORY = 1,   /* this process compiled or loaded it before */
  SPLAT__CACHE_DISK = 2      /* read from the disk cache */
} splat__cache_hit;

/* "compiled", "memory", "disk". */
const char *splat__cache_hit_name(splat__cache_hit hit);

/* The key of (source, program_name, arch) with the NVRTC version and splat's compile
 * options. The version is the loaded NVRTC's; a process that has not loaded NVRTC takes it
 * from the disk cache's stamp for its environment (nvrtc-<16 hex>.stamp: the variables
 * NVRTC's search reads, hashed; written by the last process that loaded NVRTC with them)
 * where the library file the stamp names is unchanged (device, inode, size, modification
 * time), so plans whose kernels all come from the disk cache never load NVRTC (its dlopen
 * costs ~5 ms and slowed plan creation's threads beside it: bench/NOTES.md v66); else NVRTC
 * is loaded and the stamp written. A compile loads NVRTC, and where its version is not the
 * stamp's the keys take the loaded one (and the stamp is rewritten). SPLAT_ERR_UNSUPPORTED
 * when NVRTC is needed and cannot be loaded. key: host. */
splat_status splat__kernel_cache_key(const char *source, const char *program_name, const char *arch,
                                     splat__hash128 *key);

/* Whether the keys' NVRTC version is known without loading NVRTC (loaded already, or the
 * stamp holds; then it is kept for the process): plan creation starts no NVRTC prefetch
 * then (nvrtc.h). Loads nothing. */
int splat__kernel_cache_version_known(void);

/* The CUBIN of source for arch: from memory, else disk, else compiled with
 * splat__nvrtc_compile (then stored in both). source, program_name, arch: host
 * strings (as splat__nvrtc_compile). out: host, receives copies the caller frees with
 * splat__compiled_free (ptx is set only when this call compiled with a dump). hit:
 * host, may be NULL. A disk cache that cannot be created or written is logged and
 * skipped; it never fails the call. Thread-safe. */
splat_status splat__kernel_cache_get(const char *source, const char *program_name, const char *arch,
                                     splat__compiled *out, splat__cache_hit *hit);

/* The disk cache directory (it may not exist yet). buf: host, cap chars.
 * SPLAT_ERR_IO when no variable names one, SPLAT_ERR_INVALID_ARGUMENT when too long. */
splat_status splat__cache_dir(char *buf, size_t cap);

/* One disk cache file as splat__cache_list reports it. */
typedef struct splat__cache_entry {
  const char *path;     /* full path, valid during the callback */
  char key[33];         /* 32 hex digits */
  char program[128];    /* program name ("" when invalid) */
  char arch[16];        /* "sm_90a" ("" when invalid) */
  int64_t cubin_bytes;  /* 0 when invalid */
  int64_t log_bytes;    /* 0 when invalid */
  int64_t file_bytes;   /* size on disk */
  int64_t created_unix; /* seconds since the epoch when written (0 when invalid) */
  int valid;            /* 0: corrupt, truncated or of another format version */
} splat__cache_entry;

/* Return nonzero to stop the listing. */
typedef int (*splat__cache_visit)(const splat__cache_entry *entry, void *user);

/* Calls visit for every cache file (<32 hex>.cubin) of splat__cache_dir in name
 * order. visit may be NULL (just count). count: host, may be NULL: files visited.
 * A missing directory lists nothing and returns SPLAT_OK. */
splat_status splat__cache_list(splat__cache_visit visit, void *user, int64_t *count);

/* Removes every cache file, NVRTC stamp and leftover temporary file of splat__cache_dir
 * (nothing else). removed: host, may be NULL. SPLAT_ERR_IO when a file cannot be removed. */
splat_status splat__cache_clear(int64_t *removed);

/* Test hook: empties the process-wide memory cache. */
void splat__kernel_cache_drop_memory(void);

#endif
