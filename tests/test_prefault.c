/* test_prefault.c — mem_prefault (lib/common/prefault.c), the pages of a fresh
 * destination asked for in one call before a decoder fills it: only whole pages inside
 * the range become resident (never the pages it shares with bytes outside it, nor a
 * range under 64 KiB), memory already in use is left as it is, contents never change,
 * a range with a hole in it is no error and errno is kept. Then a whole file decoded
 * (ckpz_decompress_buffer) into a fresh mapping at an odd offset, one and two threads:
 * the same bytes. Where the kernel lacks the call (before Linux 5.14) or the system is
 * not Linux, the residency checks are skipped and the rest still runs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/prefault.h"
#include "testutil.h"

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>

#define PG ((size_t)sysconf(_SC_PAGESIZE))

static int supported(void)
{
#ifdef MADV_POPULATE_WRITE
    static char here[1];
    return madvise((void *)((uintptr_t)here & ~(uintptr_t)(PG - 1)), 0, MADV_POPULATE_WRITE) == 0;
#else
    return 0;
#endif
}

/* Resident pages of [p, p + pages * PG), p page-aligned, as 0/1 into in. */
static void resident(void *p, size_t pages, unsigned char *in)
{
    CHECK(mincore(p, pages * PG, in) == 0);
    for (size_t i = 0; i < pages; i++) in[i] &= 1;
}

static void test_pages(int sup)
{
    size_t pages = 64, len = pages * PG;
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED) return;
    unsigned char in[64];
    /* bytes 100 .. 40 pages + 50: whole pages 1..39 inside, 0 and 40 shared */
    mem_prefault(m + 100, 40 * PG - 50);
    resident(m, pages, in);
    CHECK(in[0] == 0 && in[40] == 0 && in[41] == 0 && in[63] == 0);
    if (sup)
        for (size_t i = 1; i < 40; i++) CHECKF(in[i] == 1, "page %zu of 1..39 not resident", i);
    /* under 64 KiB: nothing asked for */
    mem_prefault(m + 44 * PG, 64 * 1024 - 1);
    resident(m, pages, in);
    CHECK(in[44] == 0 && in[50] == 0);
    for (size_t i = 0; i < len; i++) /* (reading maps the zero page: after the checks above) */
        if (m[i]) {
            CHECKF(0, "byte %zu is %u, not 0", i, m[i]);
            break;
        }
    munmap(m, len);

    /* memory in use (its first page there): left as it is, contents kept */
    m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED) return;
    for (size_t i = 0; i < 8 * PG; i++) m[i] = (unsigned char)(i * 7 + 1);
    mem_prefault(m, len);
    resident(m, pages, in);
    CHECK(in[7] == 1 && in[8] == 0 && in[63] == 0);
    mem_prefault(m + 8 * PG, 16 * PG); /* its first page not there: fresh */
    resident(m, pages, in);
    if (sup) CHECK(in[8] == 1 && in[23] == 1);
    CHECK(in[24] == 0);
    for (size_t i = 0; i < 8 * PG; i++)
        if (m[i] != (unsigned char)(i * 7 + 1)) {
            CHECKF(0, "byte %zu changed", i);
            break;
        }
    /* a hole in a fresh range (pages 40..49 unmapped, 30 the first): the kernel refuses
     * the call (ENOMEM); no crash, errno as it was */
    CHECK(munmap(m + 40 * PG, 10 * PG) == 0);
    errno = 1234;
    mem_prefault(m + 30 * PG, 30 * PG);
    CHECK(errno == 1234);
    errno = 0;
    munmap(m, 40 * PG);
    munmap(m + 50 * PG, len - 50 * PG);
}

/* A file of float tensors (a safetensors header and 6 MiB of f32), compressed, then
 * decoded into a fresh mapping 100 bytes past its start. */
static void test_decode(void)
{
    size_t nf = (size_t)3 << 19, body = nf * 4;
    char hdr[256];
    int hl = snprintf(hdr, sizeof hdr, "{\"w\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}", nf,
                      body);
    while (hl % 8) hdr[hl++] = ' ';
    size_t n = 8 + (size_t)hl + body;
    unsigned char *src = malloc(n);
    CHECK(src != NULL);
    if (!src) return;
    for (int i = 0; i < 8; i++) src[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(src + 8, hdr, (size_t)hl);
    float *f = (float *)(src + 8 + hl);
    for (size_t i = 0; i < nf; i++) f[i] = (float)(rng_normal() * 0.02);
    ckpz_ctx *ctx = ckpz_ctx_create();
    for (int threads = 1; threads <= 2; threads++) {
        ckpz_params p;
        ckpz_params_init(&p);
        p.threads = threads;
        void *c = NULL;
        size_t cn = 0;
        CHECK(ckpz_compress_buffer(ctx, &p, src, n, &c, &cn) == CKPZ_OK);
        size_t len = ((n + 100) / PG + 1) * PG;
        unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(m != MAP_FAILED);
        if (m != MAP_FAILED) {
            CHECK(ckpz_decompress_buffer(ctx, &p, c, cn, m + 100, n) == CKPZ_OK);
            CHECKF(memcmp(m + 100, src, n) == 0, "%d threads: restored bytes differ", threads);
            munmap(m, len);
        }
        ckpz_free(c);
    }
    ckpz_ctx_free(ctx);
    free(src);
}

int main(void)
{
    int sup = supported();
    if (!sup) fprintf(stderr, "test_prefault: no MADV_POPULATE_WRITE here: residency not checked\n");
    test_pages(sup);
    test_decode();
    if (test_failures) fprintf(stderr, "test_prefault: %d failures\n", test_failures);
    return test_failures != 0;
}
#else
int main(void)
{
    mem_prefault(NULL, 0); /* does nothing elsewhere */
    return 0;
}
#endif
