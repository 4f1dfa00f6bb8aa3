/* test_copy.c — the streaming copies (lib/common/copy.c): mem_stream and mem_copy_far
 * write exactly the source's bytes and nothing around them, at every destination and
 * source alignment within a line and at sizes about the 16-, 64- and 256-byte steps and
 * MEM_FAR_COPY, on each vector path (scalar, AVX2, AVX-512 where the CPU has them); and
 * ckpz_mem_write, which copies unlent frames with them, keeps a sink's bytes in order
 * across writes of every such size. */
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/copy.h"
#include "isa.h"
#include "testutil.h"

#define GUARD 80

static const size_t sizes[] = {0, 1, 15, 16, 17, 63, 64, 65, 255, 256, 257, 1000, 4095, 65535, 65536, 65537, 200003};

static void check_copies(const char *isa)
{
    size_t most = 200003 + 2 * GUARD + 64;
    uint8_t *src = malloc(most), *dst = malloc(most), *want = malloc(most);
    if (!src || !dst || !want) {
        CHECK(!"out of memory");
        return;
    }
    for (size_t i = 0; i < most; i++) src[i] = (uint8_t)rng();
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++)
        for (unsigned da = 0; da < 64; da += 7)
            for (unsigned sa = 0; sa < 64; sa += 13)
                for (int far = 0; far < 2; far++) {
                    size_t n = sizes[k];
                    memset(dst, 0xa5, most);
                    memcpy(want, dst, most);
                    memcpy(want + GUARD + da, src + sa, n);
                    if (far) mem_copy_far(dst + GUARD + da, src + sa, n);
                    else mem_stream(dst + GUARD + da, src + sa, n);
                    CHECKF(!memcmp(dst, want, most), "%s: %s of %zu bytes, destination +%u, source +%u", isa,
                           far ? "mem_copy_far" : "mem_stream", n, da, sa);
                }
    free(src);
    free(dst);
    free(want);
}

static void check_sink(void)
{
    size_t total = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) total += sizes[k] + 3;
    uint8_t *src = malloc(total), *out = malloc(total + 1);
    if (!src || !out) {
        CHECK(!"out of memory");
        return;
    }
    for (size_t i = 0; i < total; i++) src[i] = (uint8_t)rng();
    ckpz_mem m;
    memset(&m, 0, sizeof m);
    m.data = out + 1; /* an odd start: every later write lands off a line */
    m.capacity = total;
    ckpz_sink sink;
    ckpz_sink_mem(&sink, &m);
    size_t at = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k] + 3;
        CHECK(sink.write(sink.opaque, src + at, n) == 0);
        at += n;
    }
    CHECKF(m.size == total && !memcmp(out + 1, src, total), "memory sink: %zu bytes written of %zu", m.size, total);
    free(src);
    free(out);
}

int main(void)
{
    static const char *const isas[] = {"scalar", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        force_isa(isas[i]);
        check_copies(isas[i]);
    }
    top_isa();
    check_sink();
    if (test_failures) {
        fprintf(stderr, "test_copy: %d check(s) failed\n", test_failures);
        return 1;
    }
    printf("test_copy: all passed\n");
    return 0;
}
