/* hash.c — the 128-bit two-lane FNV-style hash of hash.h. */
#include "core/hash.h"

#include <string.h>

#define FNV_BASIS 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull
#define B_BASIS 0x6a09e667f3bcc909ull /* sqrt(2) fraction bits */
#define B_MULT 0x9e3779b97f4a7c15ull  /* golden ratio, odd */

static uint64_t rotl64(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

/* splitmix64's finaliser: a bijection with full avalanche. */
static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

void splat__hash_init(splat__hash *h) {
  h->a = FNV_BASIS;
  h->b = B_BASIS;
  h->len = 0;
}

void splat__hash_update(splat__hash *h, const void *data, size_t n) {
  const unsigned char *p = data;
  uint64_t a = h->a, b = h->b;
  for (size_t i = 0; i < n; i++) {
    a = (a ^ p[i]) * FNV_PRIME;
    b = rotl64((b ^ p[i]) * B_MULT, 23);
  }
  h->a = a;
  h->b = b;
  h->len += n;
}

void splat__hash_u64(splat__hash *h, uint64_t v) {
  unsigned char bytes[8];
  for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(v >> (8 * i));
  splat__hash_update(h, bytes, sizeof bytes);
}

void splat__hash_str(splat__hash *h, const char *s) {
  size_t n = s ? strlen(s) : 0;
  splat__hash_update(h, s, n);
  splat__hash_u64(h, (uint64_t)n);
}

splat__hash128 splat__hash_final(const splat__hash *h) {
  splat__hash128 out;
  out.hi = mix64(h->a ^ mix64(h->len + 0x243f6a8885a308d3ull));
  out.lo = mix64(h->b ^ rotl64(h->a, 32) ^ h->len);
  return out;
}

splat__hash128 splat__hash_bytes(const void *data, size_t n) {
  splat__hash h;
  splat__hash_init(&h);
  splat__hash_update(&h, data, n);
  return splat__hash_final(&h);
}

uint64_t splat__fnv1a64(const void *data, size_t n) {
  splat__hash h;
  splat__hash_init(&h);
  splat__hash_update(&h, data, n);
  return h.a;
}

void splat__hash_hex(splat__hash128 v, char out[33]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    out[i] = digits[(v.hi >> (60 - 4 * i)) & 15];
    out[16 + i] = digits[(v.lo >> (60 - 4 * i)) & 15];
  }
  out[32] = '\0';
}

int splat__hash_parse_hex(const char *s, splat__hash128 *out) {
  uint64_t w[2] = {0, 0};
  for (int i = 0; i < 32; i++) {
    char c = s[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return 0;
    }
    w[i / 16] = (w[i / 16] << 4) | (uint64_t)d;
  }
  out->hi = w[0];
  out->lo = w[1];
  return 1;
}
