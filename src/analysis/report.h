/* report.h — the statistics of an analysis (splat_report) from ACSR and a tile plan. */
#ifndef SPLAT_ANALYSIS_REPORT_H
#define SPLAT_ANALYSIS_REPORT_H

#include "analysis/acsr.h"
#include "analysis/tile_plan.h"

/* Fills every field of out except analysis_ms and plan_ms (report_ms included). */
splat_status splat__report_build(const splat__acsr *a, const splat__tile_plan *t,
                                 splat_report *out);

#endif
