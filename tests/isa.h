/* isa.h — how tests and fuzz harnesses run every vector path on the same bytes: through
 * the library's one override, the environment variable CKPZ_CPU (lib/common/cpu.h),
 * changed between calls. */
#ifndef CKPZ_TEST_ISA_H
#define CKPZ_TEST_ISA_H

#include <stdlib.h>

#include "common/cpu.h"

/* Caps the instruction sets at isa ("scalar", "avx2", "avx512"); returns the level now
 * in force (lower than asked on a CPU without it). */
static inline int force_isa(const char *isa)
{
    setenv("CKPZ_CPU", isa, 1);
    return cpu_refresh();
}

/* The highest level this CPU runs, whatever CKPZ_CPU said. */
static inline int top_isa(void) { return force_isa("avx512"); }

#endif
