/* dtype.c — f16 and bf16 conversions and element loads/stores through double.
 *
 * Narrowing rounds to nearest, ties to even, directly from the double (or float)
 * value: going double -> float -> half would round twice and can land on a half-way
 * point that then ties the wrong way. NaNs keep their sign and top payload bits (and
 * stay NaN); infinities and overflow give infinities; subnormals are exact. */
#include "core/dtype.h"

#include <string.h>

/* Rounds a finite or non-finite double to a binary format with `mbits` stored mantissa
 * bits, smallest normal exponent `emin`, largest exponent `emax` and infinity encoding
 * `inf` (sign excluded); returns the 16-bit encoding. */
static uint16_t narrow_from_double(double v, int mbits, int emin, int emax, uint16_t inf) {
  uint64_t u;
  memcpy(&u, &v, sizeof u);
  const uint16_t sign = (uint16_t)((u >> 63) << 15);
  const int exp = (int)((u >> 52) & 0x7FF);
  const uint64_t mant = u & ((UINT64_C(1) << 52) - 1);
  if (exp == 0x7FF) {
    if (mant == 0) return sign | inf;
    uint16_t payload = (uint16_t)(mant >> (52 - mbits));
    if (payload == 0) payload = (uint16_t)(1u << (mbits - 1)); /* keep it a NaN */
    return sign | inf | payload;
  }
  if (exp == 0)
    return sign;                   /* zero, or a double subnormal: far below half the least
                                      subnormal of either format */
  const int e = exp - 1023;        /* v = M * 2^(e - 52) with M in [2^52, 2^53) */
  if (e > emax) return sign | inf; /* |v| >= 2^(emax+1) is past max + half an ulp */
  const uint64_t m = mant | (UINT64_C(1) << 52);
  const int q = (e > emin ? e : emin) - mbits; /* exponent of the target ulp */
  const int shift = q - (e - 52);              /* bits of M below the target ulp, >= 42 */
  if (shift > 53) return sign;                 /* |v| < half the least subnormal */
  uint64_t r = m >> shift;
  const uint64_t rem = m & ((UINT64_C(1) << shift) - 1);
  const uint64_t half = UINT64_C(1) << (shift - 1);
  if (rem > half || (rem == half && (r & 1))) r++;
  /* Normal: biased exponent (e - emin + 1) over r - 2^mbits, written as
   * ((e - emin) << mbits) + r so that a carry out of the mantissa bumps the exponent.
   * Subnormal (q = emin - mbits): just r, which may carry into the least normal. */
  const uint64_t enc = ((uint64_t)(q - (emin - mbits)) << mbits) + r;
  if (enc >= inf) return sign | inf;
  return sign | (uint16_t)enc;
}

uint16_t splat__f32_to_f16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu)) {
    /* NaN: keep the payload bits that fit, without quieting, so f16 -> f32 -> f16 is
     * the identity on every bit pattern. */
    uint16_t payload = (uint16_t)((bits & 0x7FFFFFu) >> 13);
    if (payload == 0) payload = 0x200;
    return (uint16_t)((bits >> 16) & 0x8000) | 0x7C00 | payload;
  }
  return narrow_from_double((double)f, 10, -14, 15, 0x7C00); /* float -> double is exact */
}

uint16_t splat__f32_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x7FFFFFu)) {
    uint16_t payload = (uint16_t)((bits & 0x7FFFFFu) >> 16);
    if (payload == 0) payload = 0x40;
    return (uint16_t)((bits >> 16) & 0x8000) | 0x7F80 | payload;
  }
  /* Round to nearest even on the low 16 bits; a carry ripples into the exponent and
   * turns the largest finite values past the half-way point into infinity. */
  return (uint16_t)((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

int splat__dtype_size(splat_dtype dtype) {
  switch (dtype) {
    case SPLAT_F32:
      return 4;
    case SPLAT_F16:
    case SPLAT_BF16:
      return 2;
  }
  return 0;
}

double splat__load(const void *base, splat_dtype dtype, int64_t offset) {
  switch (dtype) {
    case SPLAT_F32:
      return ((const float *)base)[offset];
    case SPLAT_F16:
      return splat__f16_to_f32(((const uint16_t *)base)[offset]);
    case SPLAT_BF16:
      return splat__bf16_to_f32(((const uint16_t *)base)[offset]);
  }
  return 0.0;
}

void splat__store(void *base, splat_dtype dtype, int64_t offset, double v) {
  switch (dtype) {
    case SPLAT_F32:
      ((float *)base)[offset] = (float)v;
      break;
    case SPLAT_F16:
      ((uint16_t *)base)[offset] = narrow_from_double(v, 10, -14, 15, 0x7C00);
      break;
    case SPLAT_BF16:
      ((uint16_t *)base)[offset] = narrow_from_double(v, 7, -126, 127, 0x7F80);
      break;
  }
}
