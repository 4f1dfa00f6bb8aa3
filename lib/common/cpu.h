/* cpu.h — the one probe of what the CPU can run, for every kernel chosen at run time.
 *
 * Kernels are built with target attributes (no -m flags), so the library runs on any
 * x86-64 and picks its vector loops here: the CPU is asked once, and the answer can be
 * capped by the environment variable CKPZ_CPU, which names the highest instruction set to
 * use: "scalar" (the portable loops and the SSE2 ones, baseline on x86-64), "avx2" (also
 * SSE4.2 crc32, PCLMULQDQ and the AVX2 loops) or "avx512" (everything; the default).
 * Tests and benches set it to run every path on the same bytes: all paths write the same
 * output. Any other value is ignored. The features a kernel needs come in groups that
 * only exist together with their level (AVX-512 VBMI2 only at "avx512"), so a kernel
 * asks for its group and the cap applies to all.
 */
#ifndef CKPZ_CPU_H
#define CKPZ_CPU_H

/* Levels, in the order CKPZ_CPU caps them. */
enum cpu_level { CPU_SCALAR = 0, CPU_AVX2 = 1, CPU_AVX512 = 2 };

/* Feature groups (bits of cpu_features()). */
enum {
    CPU_SSE42 = 1u << 0,      /* the crc32 instruction (level avx2) */
    CPU_PCLMUL = 1u << 1,     /* PCLMULQDQ (level avx2) */
    CPU_HAS_AVX2 = 1u << 2,   /* AVX2 */
    CPU_HAS_AVX512 = 1u << 3, /* AVX-512 F, BW, VL and VBMI: every AVX-512 kernel needs these */
    CPU_VBMI2 = 1u << 4,      /* AVX-512 VBMI2 (vpcompressb, vpexpandb), with CPU_HAS_AVX512 */
    CPU_VPCLMUL = 1u << 5,    /* VPCLMULQDQ on zmm registers, with CPU_HAS_AVX512 and CPU_PCLMUL */
    CPU_VPCLMUL256 = 1u << 6, /* VPCLMULQDQ on ymm registers, with CPU_HAS_AVX2 and CPU_PCLMUL (level
                                 avx512: capped at avx2, the PCLMULQDQ loop runs) */
    CPU_GATHER = 1u << 7      /* AVX-512 gathers faster than scalar loads (cpu.c says where), with
                                 CPU_HAS_AVX512 */
};

extern int cpu_features_; /* -1 until probed (cpu.c) */
unsigned cpu_probe(void);

/* The usable feature groups: what the CPU has, capped by CKPZ_CPU. Cheap: one load
 * after the first call. */
static inline unsigned cpu_features(void)
{
    int f = __atomic_load_n(&cpu_features_, __ATOMIC_RELAXED);
    return f >= 0 ? (unsigned)f : cpu_probe();
}

static inline int cpu_level(void)
{
    unsigned f = cpu_features();
    return f & CPU_HAS_AVX512 ? CPU_AVX512 : f & CPU_HAS_AVX2 ? CPU_AVX2 : CPU_SCALAR;
}

/* Reads CKPZ_CPU again (tests change it with setenv between calls; no other thread may
 * be coding meanwhile) and returns the level now in force. */
int cpu_refresh(void);

/* "scalar", "avx2", "avx512". */
const char *cpu_level_name(int level);

#endif
