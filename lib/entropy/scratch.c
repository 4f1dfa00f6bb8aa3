/* scratch.c — the coders' working memory in an ent_ctx: buffers that grow to the
 * largest plane seen and stay, so that no coder allocates in its hot path; and the copy
 * of a stored plane into the output (ent_copy_far). Every coder calls down into these;
 * nothing here calls a coder. */
#include <stdlib.h>
#include <string.h>

#include "common/cpu.h"
#include "ent_internal.h"

#ifdef ENT_HAVE_X86
#include <immintrin.h>
#endif

int ent_grow(void **buf, size_t *cap, size_t need)
{
    if (*cap >= need) return 0;
    void *nb = realloc(*buf, need);
    if (!nb) return -1;
    *buf = nb;
    *cap = need;
    return 0;
}

uint8_t *ent_scratch(ent_ctx *c, size_t n)
{
    return ent_grow((void **)&c->scratch, &c->scratch_cap, n) ? NULL : c->scratch;
}

uint8_t *ent_cand(ent_ctx *c, size_t n) { return ent_grow((void **)&c->cand, &c->cand_cap, n) ? NULL : c->cand; }

uint8_t *ent_keep(ent_ctx *c, unsigned k, size_t n)
{
    return k >= ENT_KEEP || ent_grow((void **)&c->keep[k], &c->keep_cap[k], n) ? NULL : c->keep[k];
}

#ifdef ENT_HAVE_X86
__attribute__((target("avx512f"))) static void copy_stream(uint8_t *dst, const uint8_t *src, size_t n)
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
    _mm_sfence();
    memcpy(dst + i, src + i, n - i);
}
#endif

void ent_copy_far(uint8_t *dst, const uint8_t *src, size_t n)
{
#ifdef ENT_HAVE_X86
    if (n >= ENT_FAR_COPY && cpu_level() >= CPU_AVX512) {
        copy_stream(dst, src, n);
        return;
    }
#endif
    if (n) memcpy(dst, src, n);
}
