/* ent_check.h — what the entropy tests (test_entropy.c, test_rans_ctx.c,
 * test_rans_ctxm.c, test_rans_small.c) share: a check with a message that keeps going, and a seeded
 * xorshift generator (RND_SEED, defined before the include, picks another sequence). */
#ifndef CKPZ_TEST_ENT_CHECK_H
#define CKPZ_TEST_ENT_CHECK_H

#include <stdint.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            failures++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
        }                                                        \
    } while (0)

#ifndef RND_SEED
#define RND_SEED 0x9E3779B97F4A7C15ull
#endif
static uint64_t rng = RND_SEED;
static inline uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

#endif
