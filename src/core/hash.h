/* hash.h — a fast non-cryptographic 128-bit hash with an incremental API, used for
 * kernel cache keys and cache-file checksums.
 *
 * Two 64-bit lanes see every byte: lane `a` is exactly FNV-1a 64 (offset basis
 * 0xcbf29ce484222325, prime 0x100000001b3); lane `b` is an FNV-style lane with a
 * different basis and multiplier (0x9e3779b97f4a7c15) and a rotation, so the lanes do
 * not collide together. splat__hash_final mixes the byte count into both and runs
 * them through the splitmix64 finaliser. The output is stable across platforms and
 * versions of splat (tests pin values); changing it invalidates every disk cache. */
#ifndef SPLAT_CORE_HASH_H
#define SPLAT_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct splat__hash {
  uint64_t a, b; /* the two lanes */
  uint64_t len;  /* bytes hashed */
} splat__hash;

/* A finished 128-bit hash: hi and lo 64-bit halves. */
typedef struct splat__hash128 {
  uint64_t hi, lo;
} splat__hash128;

void splat__hash_init(splat__hash *h);
/* Hashes n bytes of data (host; may be NULL when n is 0). */
void splat__hash_update(splat__hash *h, const void *data, size_t n);
/* Hashes a NUL-terminated string (NULL as "") followed by its length, so a sequence
 * of strings hashes unambiguously ("ab","c" differs from "a","bc"). */
void splat__hash_str(splat__hash *h, const char *s);
/* Hashes v as 8 little-endian bytes. */
void splat__hash_u64(splat__hash *h, uint64_t v);
/* The hash of everything fed so far; h stays usable. */
splat__hash128 splat__hash_final(const splat__hash *h);

/* One-shot helpers. */
splat__hash128 splat__hash_bytes(const void *data, size_t n);
uint64_t splat__fnv1a64(const void *data, size_t n);

/* Writes 32 lowercase hex digits (hi then lo) and a NUL into out. */
void splat__hash_hex(splat__hash128 v, char out[33]);
/* Parses 32 hex digits; returns 1 on success, 0 otherwise. */
int splat__hash_parse_hex(const char *s, splat__hash128 *out);

#endif
