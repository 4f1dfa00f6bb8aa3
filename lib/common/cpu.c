/* cpu.c — the CPU feature probe and its override (cpu.h). GCC and clang answer from
 * cpuid (__builtin_cpu_supports); other compilers and hosts get the portable loops. */
#include "cpu.h"

#include <stdlib.h>
#include <string.h>

int cpu_features_ = -1;

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>

/* CPUID leaf 7 EDX bit 23, asked directly: older compilers (clang 14) do not know the
 * name "avx512fp16" in __builtin_cpu_supports. Only asked once AVX-512 itself (and the
 * OS's saving of its registers) is known. */
static int has_avx512fp16(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 23 & 1u);
}
#endif

static unsigned hardware(void)
{
    unsigned f = 0;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (__builtin_cpu_supports("sse4.2")) f |= CPU_SSE42;
    if (__builtin_cpu_supports("pclmul")) f |= CPU_PCLMUL;
    if (__builtin_cpu_supports("avx2")) f |= CPU_HAS_AVX2;
    if ((f & CPU_HAS_AVX2) && (f & CPU_PCLMUL) && __builtin_cpu_supports("vpclmulqdq")) f |= CPU_VPCLMUL256;
    if ((f & CPU_HAS_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vbmi")) {
        f |= CPU_HAS_AVX512;
        if (__builtin_cpu_supports("avx512vbmi2")) f |= CPU_VBMI2;
        if (__builtin_cpu_supports("vpclmulqdq") && (f & CPU_PCLMUL)) f |= CPU_VPCLMUL;
        /* AVX512-FP16 marks Intel Sapphire Rapids and later: there vpgatherdd outruns
         * scalar loads (rans0's decoder: 1.2x). AMD's AVX-512 cores measured gathers 2x
         * slower than scalar loads, and earlier Intel cores pay the Gather Data Sampling
         * microcode's penalty: they keep the AVX2 decoder. */
        if (has_avx512fp16()) f |= CPU_GATHER;
    }
#endif
    return f;
}

const char *cpu_level_name(int level) { return level >= CPU_AVX512 ? "avx512" : level == CPU_AVX2 ? "avx2" : "scalar"; }

/* The groups a level allows. */
static unsigned allowed(const char *cap)
{
    if (!cap) return ~0u;
    if (!strcmp(cap, "scalar")) return 0;
    if (!strcmp(cap, "avx2")) return CPU_SSE42 | CPU_PCLMUL | CPU_HAS_AVX2;
    return ~0u; /* "avx512" and anything else: no cap */
}

unsigned cpu_probe(void)
{
    /* Racing threads compute and store the same value. */
    unsigned f = hardware() & allowed(getenv("CKPZ_CPU"));
    __atomic_store_n(&cpu_features_, (int)f, __ATOMIC_RELAXED);
    return f;
}

int cpu_refresh(void)
{
    cpu_probe();
    return cpu_level();
}
