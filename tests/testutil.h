/* testutil.h — the few helpers the C tests share: a check macro that reports the
 * failing expression and keeps going, and a seeded PRNG so every run sees the same data. */
#ifndef CKPZ_TESTUTIL_H
#define CKPZ_TESTUTIL_H

#include <stdint.h>
#include <stdio.h>

static int test_failures;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            test_failures++;                                                         \
        }                                                                            \
    } while (0)

#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (!(cond)) {                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                            \
            fputc('\n', stderr);                                                     \
            test_failures++;                                                         \
        }                                                                            \
    } while (0)

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static inline uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
/* Roughly normal, sum of uniforms: enough to give float planes realistic exponents. */
static inline double rng_normal(void)
{
    double s = 0;
    for (int i = 0; i < 4; i++) s += (double)(rng() >> 11) / 9007199254740992.0;
    return (s - 2.0) * 1.7320508;
}

static inline int test_summary(const char *name)
{
    if (test_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
    else printf("%s: all checks passed\n", name);
    return test_failures ? 1 : 0;
}

#endif
