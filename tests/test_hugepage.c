/* test_hugepage.c — the rule that decides how much of a large output asks for 2 MiB
 * pages (workmem_huge_policy), fed made-up transparent_hugepage/defrag and
 * /proc/buddyinfo texts: where a fault would compact memory itself, only the free 2 MiB
 * blocks beyond the reserve are asked for, the DMA zone not counted; where it would not,
 * all of them. Then workmem_room and ckpz_huge_span on this machine: room that is
 * written end to end, and a span that never exceeds what the rule allows. */
#define CKPZ_EXPERIMENTAL /* ckpz_huge_span */
#include <stdlib.h>
#include <string.h>

#include "codec/workmem.h"
#include "testutil.h"

#define MB ((size_t)1 << 20)

/* A buddyinfo text: DMA with many big blocks (never counted), DMA32 and Normal with the
 * given counts of order 9 and 10 (order 10 = two 2 MiB blocks). */
static const char *buddy(char *buf, size_t size, unsigned dma32_9, unsigned normal_9, unsigned normal_10)
{
    snprintf(buf, size,
             "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      9    300 \n"
             "Node 0, zone    DMA32      2      2      3      2      3      2      1      4      4 %6u      0 \n"
             "Node 0, zone   Normal  33774  34544  37715  23901  12286   5578   2470   1057    424 %6u %6u \n",
             dma32_9, normal_9, normal_10);
    return buf;
}

static void test_modes(void)
{
    char b[1024];
    const char *none = buddy(b, sizeof b, 0, 0, 0);
    /* never and defer do not compact in the fault: everything n holds */
    CHECK(workmem_huge_policy("always defer defer+madvise madvise [never]", none, 64 * MB) == 64 * MB);
    CHECK(workmem_huge_policy("always [defer] defer+madvise madvise never", none, 64 * MB) == 64 * MB);
    /* the compacting modes, and an unknown one: none free, none asked */
    CHECK(workmem_huge_policy("always defer defer+madvise [madvise] never", none, 64 * MB) == 0);
    CHECK(workmem_huge_policy("[always] defer defer+madvise madvise never", none, 64 * MB) == 0);
    CHECK(workmem_huge_policy("always defer [defer+madvise] madvise never", none, 64 * MB) == 0);
    CHECK(workmem_huge_policy(NULL, none, 64 * MB) == 0);
    CHECK(workmem_huge_policy("garbage", none, 64 * MB) == 0);
}

static void test_blocks(void)
{
    char b[1024];
    const char *madv = "always defer defer+madvise [madvise] never\n";
    /* 10 (DMA32) + 20 (Normal order 9) + 2 * 15 (order 10) = 60 free, 32 kept back: 28 */
    const char *some = buddy(b, sizeof b, 10, 20, 15);
    CHECK(workmem_huge_policy(madv, some, 64 * MB) == 28 * 2 * MB);
    CHECK(workmem_huge_policy(madv, some, 56 * MB) == 28 * 2 * MB);
    CHECK(workmem_huge_policy(madv, some, 20 * MB) == 20 * MB);
    CHECK(workmem_huge_policy(madv, some, 21 * MB) == 20 * MB); /* whole pages n holds from 4 MiB on */
    CHECK(workmem_huge_policy(madv, some, 3 * MB) == 4 * MB);   /* below, n rounded up */
    CHECK(workmem_huge_policy(madv, some, MB) == 2 * MB);
    CHECK(workmem_huge_policy(madv, some, MB - 1) == 0);
    /* exactly the reserve free: none; one more: one */
    CHECK(workmem_huge_policy(madv, buddy(b, sizeof b, 0, 32, 0), 64 * MB) == 0);
    CHECK(workmem_huge_policy(madv, buddy(b, sizeof b, 0, 33, 0), 64 * MB) == 2 * MB);
    /* the DMA zone's 9 + 2 * 300 blocks do not count */
    CHECK(workmem_huge_policy(madv, buddy(b, sizeof b, 0, 0, 0), 64 * MB) == 0);
    /* plenty: all of n */
    CHECK(workmem_huge_policy(madv, buddy(b, sizeof b, 100, 776, 1806), 123 * MB) == 122 * MB);
    /* no buddyinfo (not readable): none */
    CHECK(workmem_huge_policy(madv, NULL, 64 * MB) == 0);
    /* a short or cut-off text: what it shows */
    CHECK(workmem_huge_policy(madv, "Node 0, zone Normal 1 2 3 4 5 6 7 8 9 40", 64 * MB) == 8 * 2 * MB);
    CHECK(workmem_huge_policy(madv, "Node 0, zone Normal 1 2", 64 * MB) == 0);
    CHECK(workmem_huge_policy(madv, "", 64 * MB) == 0);
}

static void test_room(void)
{
    size_t sizes[] = {0, 1, MB - 1, MB, 3 * MB + 5, 9 * MB + 1};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        unsigned char *p = workmem_room(n);
        CHECK(p != NULL);
        if (!p) continue;
        memset(p, 0x5a, n);
        CHECK(n == 0 || (p[0] == 0x5a && p[n - 1] == 0x5a));
        size_t span = ckpz_huge_span(n);
        CHECKF(span % (2 * MB) == 0 && span <= (n < 4 * MB ? (n + 2 * MB - 1) / (2 * MB) * 2 * MB : n),
               "n %zu span %zu", n, span);
        CHECK(n >= MB || span == 0);
        free(p);
    }
}

int main(void)
{
    test_modes();
    test_blocks();
    test_room();
    if (test_failures) fprintf(stderr, "test_hugepage: %d failures\n", test_failures);
    return test_failures != 0;
}
