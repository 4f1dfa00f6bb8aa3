/* copy.c — streaming copies (copy.h): 64-byte stores on CPUs with AVX-512, 16-byte ones
 * with SSE2 elsewhere on x86-64. */
#include "copy.h"

#include <string.h>

#include "cpu.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define COPY_HAVE_X86 1

__attribute__((target("avx512f"))) static void stream512(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t head = (64 - ((uintptr_t)dst & 63)) & 63, i = head;
    memcpy(dst, src, head);
    for (; i + 256 <= n; i += 256) {
        __m512i a = _mm512_loadu_si512((const void *)(src + i)), b = _mm512_loadu_si512((const void *)(src + i + 64));
        __m512i c = _mm512_loadu_si512((const void *)(src + i + 128)),
                d = _mm512_loadu_si512((const void *)(src + i + 192));
        _mm512_stream_si512((void *)(dst + i), a);
        _mm512_stream_si512((void *)(dst + i + 64), b);
        _mm512_stream_si512((void *)(dst + i + 128), c);
        _mm512_stream_si512((void *)(dst + i + 192), d);
    }
    memcpy(dst + i, src + i, n - i);
}

static void stream128(uint8_t *dst, const uint8_t *src, size_t n)
{
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15, i = head;
    memcpy(dst, src, head);
    for (; i + 64 <= n; i += 64) {
        _mm_stream_si128((__m128i *)(void *)(dst + i), _mm_loadu_si128((const __m128i *)(const void *)(src + i)));
        _mm_stream_si128((__m128i *)(void *)(dst + i + 16),
                         _mm_loadu_si128((const __m128i *)(const void *)(src + i + 16)));
        _mm_stream_si128((__m128i *)(void *)(dst + i + 32),
                         _mm_loadu_si128((const __m128i *)(const void *)(src + i + 32)));
        _mm_stream_si128((__m128i *)(void *)(dst + i + 48),
                         _mm_loadu_si128((const __m128i *)(const void *)(src + i + 48)));
    }
    memcpy(dst + i, src + i, n - i);
}
#endif

void mem_stream(uint8_t *dst, const uint8_t *src, size_t n)
{
#ifdef COPY_HAVE_X86
    if (n < 64) {
        memcpy(dst, src, n);
        return;
    }
    if (cpu_level() >= CPU_AVX512) stream512(dst, src, n);
    else stream128(dst, src, n);
    _mm_sfence(); /* ordered before whatever the caller publishes next (another thread reads it) */
#else
    memcpy(dst, src, n);
#endif
}

void mem_copy_far(uint8_t *dst, const uint8_t *src, size_t n)
{
    if (n >= MEM_FAR_COPY) mem_stream(dst, src, n);
    else if (n) memcpy(dst, src, n);
}
