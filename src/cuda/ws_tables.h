/* ws_tables.h — the interval tables of the warp-specialised attention kernel
 * (kernels/attention_ws.cuh), built at plan creation: for each query tile, row block of
 * the kernel's tq rows and key group of the tile's predicated runs, a record of
 * SPLAT_WS_TABLE_BYTES (kernels/params.cuh) that the kernel's producer copies into shared
 * memory with the run's first sub-tile, instead of building it from the rows' segments on
 * its own chain (and in its registers). Pure C: tested without a GPU. */
#ifndef SPLAT_CUDA_WS_TABLES_H
#define SPLAT_CUDA_WS_TABLES_H

#include <stdint.h>

#include "../../kernels/params.cuh"
#include "analysis/acsr.h"
#include "splat.h"

typedef struct splat__ws_tables {
  unsigned char *data; /* count records of SPLAT_WS_TABLE_BYTES(tq, segs) */
  int64_t count, bytes;
} splat__ws_tables;

/* Builds the tables of a pattern as the kernel reads it: tiles[ntiles] and runs (device
 * layout, after the plan's ordering), rows perm[position] with segments in `a`, query
 * tiles read in row blocks of tq rows (64 or 128: a record a row block, as many as the
 * largest tile has), segs intervals a row (the kernel's SPLAT_MAX_SEGS; a row with more
 * in one group fails), sub-tiles of kt keys (the span's rule for rows of two intervals).
 * Sets runs[i].table for each predicated run (runs of one tile and group share a table)
 * and -1 for the others. */
splat_status splat__ws_tables_build(const splat__acsr *a, const int32_t *perm,
                                    const splat_dev_tile *tiles, int64_t ntiles,
                                    splat_dev_run *runs, int tq, int segs, int kt,
                                    splat__ws_tables *out);
void splat__ws_tables_free(splat__ws_tables *t);

#endif
