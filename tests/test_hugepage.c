/* test_hugepage.c — the rule that decides how much of a large output asks for 2 MiB
 * pages (workmem_huge_policy), fed made-up transparent_hugepage/defrag and
 * /proc/buddyinfo texts: where a fault would compact memory itself, only the free 2 MiB
 * blocks beyond the reserve are asked for, the DMA zone not counted; where it would not,
 * all of them. Then workmem_room and ckpz_huge_span on this machine: room that is
 * written end to end, and a span that never exceeds what the rule allows; a whole-page
 * room given back (workmem_room_free) is the next room of its size, not another. */
#define CKPZ_EXPERIMENTAL /* ckpz_huge_span */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/workmem.h"
#include "testutil.h"

#define MB ((size_t)1 << 20)
#if defined(__GLIBC__) /* where rooms are kept (workmem.c) */
#include <malloc.h>
#define KEEPS 1
#else
#define KEEPS 0
#define malloc_trim(pad) ((void)(pad))
#endif

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

/* Room of 1.5 MiB holding 1 MiB kept whole, given back and taken again with its bytes
 * (fresh pages would be zeros); one that holds
 * 1 KiB given back down to it; a room too small for a request is not taken. */
static void test_kept(void)
{
    size_t n = 3 * MB / 2;
    unsigned char *p = workmem_room(n);
    CHECK(p != NULL);
    if (!p) return;
    memset(p, 1, MB);
    int whole = KEEPS && ckpz_huge_span(n) > 0 && (uintptr_t)p % (2 * MB) == 0;
    unsigned char *q = workmem_room_fit(p, n, MB);
    CHECK(q != NULL && q[0] == 1 && q[MB - 1] == 1);
    CHECK(!whole || q == p);
    workmem_room_free(q);
    malloc_trim(0); /* free heap pages handed back: only a kept room keeps its bytes */
    unsigned char *r = workmem_room(n), *big = workmem_room(7 * MB);
    CHECK(r != NULL && big != NULL);
    CHECKF(!whole || (r == q && r[0] == 1 && r[MB - 1] == 1), "kept room %p, next room %p", (void *)q, (void *)r);
    CHECK(big != q);
    if (r) memset(r, 2, n);
    free(big);
    unsigned char *s = r ? workmem_room_fit(r, n, 1024) : NULL; /* a small output: cut down */
    CHECK(!r || (s != NULL && s[0] == 2 && s[1023] == 2));
    workmem_room_free(s);
    unsigned char *t = workmem_room(n); /* s is not kept: a room of 1 KiB is no output's */
    CHECK(t != NULL && (!whole || (uintptr_t)t % (2 * MB) == 0));
    if (t) memset(t, 3, n);
    free(t);
    printf("test_hugepage: kept rooms %s\n", whole ? "checked" : "not checked (no 2 MiB pages asked for)");
}

int main(void)
{
    test_modes();
    test_blocks();
    test_room();
    test_kept();
    if (test_failures) fprintf(stderr, "test_hugepage: %d failures\n", test_failures);
    return test_failures != 0;
}
