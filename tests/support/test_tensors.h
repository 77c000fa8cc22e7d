/* test_tensors.h — strided test tensors: each over its own allocation, every byte first
 * 0xFF (NaN in every dtype), in one of five layouts (contiguous, [B,S,H,D], padded, heads
 * in reverse memory order, head_dim strided by the sequence), so that tests catch
 * unwritten elements and writes outside the logical ones. */
#ifndef SPLAT_TESTS_TEST_TENSORS_H
#define SPLAT_TESTS_TEST_TENSORS_H

#include <stdint.h>

#include "splat.h"

enum { L_CONTIG, L_BSHD, L_PAD, L_NEGHEAD, L_DMAJOR, L_COUNT };
extern const char *const layout_name[L_COUNT];

typedef struct tens {
  unsigned char *base;
  int64_t elems; /* allocated elements */
  int64_t min_off;
  splat_tensor t;
} tens;

/* A [d0, d1, d2, d3] tensor of dtype dt in layout (an L_* value). */
tens tens_make(splat_dtype dt, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int layout);
void tens_free(tens *x);
/* Element offset of [a, b, c, d] in t. */
int64_t toff(const splat_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d);

#endif
