/* test_grad_entropy.c — dense gradient packets whose codes are entropy-coded
 * (ckpz_grad_params.entropy, doc/gradients.md): on heavy-tailed values (as gradients
 * are) the packet is smaller than the raw one, decodes to the same values bit for bit
 * (so every bound of the raw packet holds) and leaves the same residual, at every CPU
 * level; codes that do not shrink (uniform, tiny buffers) stay raw, a zero buffer is one
 * byte of codes; a caller whose struct_size ends before the field packs raw; hostile
 * packets (every truncation, every byte flipped with and without the CRC re-sealed, the
 * coding byte and the coded length wrong) are refused or decode in bounds; the sum of
 * coded packets is the sum of their raw twins, in place too. */
#include <stddef.h>
#include <stdio.h>

#include "grad_util.h"

/* Student-t-like values (a normal over the root of a chi-square of 3 degrees), spread
 * over a few magnitudes per block: peaked codes, as layer gradients give. */
static void fill_peaked(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double c = 0;
        for (int k = 0; k < 3; k++) {
            double u = rng_normal();
            c += u * u;
        }
        x[i] = (float)(rng_normal() / sqrt(c / 3 + 1e-12) * 1e-3);
    }
}

static uint8_t *pack_with(unsigned bits, int entropy, const float *x, size_t n, float *res, size_t *len)
{
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.bits = bits, p.entropy = (unsigned)entropy;
    size_t cap = 0;
    CHECK(ckpz_grad_packet_size(ctx, &p, n, &cap) == CKPZ_OK);
    uint8_t *pkt = malloc(cap);
    ckpz_error e = ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, n, res, pkt, cap, len);
    CHECKF(e == CKPZ_OK && *len <= cap, "pack n=%zu: %s", n, ckpz_ctx_message(ctx));
    return pkt;
}

/* Coded and raw packets of the same values: the same decoded values and residuals. */
static void test_roundtrip(void)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"};
    int top = top_isa();
    enum { N = 1 << 16 };
    float *x = malloc(N * 4), *ya = malloc(N * 4), *yb = malloc(N * 4), *ra = calloc(N, 4), *rb = calloc(N, 4);
    fill_peaked(x, N);
    for (unsigned bits = 8; bits >= 4; bits -= 4)
        for (int lv = 0; lv <= top; lv++) {
            force_isa(isa[lv]);
            memset(ra, 0, N * 4), memset(rb, 0, N * 4);
            size_t la, lb;
            uint8_t *a = pack_with(bits, 0, x, N, ra, &la), *b = pack_with(bits, 1, x, N, rb, &lb);
            CHECKF(b[21] == 2 && a[21] == 0, "%u-bit: codings %u and %u", bits, a[21], b[21]);
            double raw_codes = bits == 8 ? N : N / 2.0, coded = (double)(lb - (la - (size_t)raw_codes));
            if (lv == 0)
                printf("test_grad_entropy: %u-bit codes of %d t(3) values: %.3f bits each coded; the packet %.2fx "
                       "fewer bytes than FP32 (raw %.2fx)\n",
                       bits, N, 8 * coded / N, 4.0 * N / (double)lb, 4.0 * N / (double)la);
            CHECKF(coded < 0.9 * raw_codes, "%u-bit: coded codes %.0f bytes of %.0f", bits, coded, raw_codes);
            CHECK(!memcmp(a, b, 21) && !memcmp(a + 22, b + 22, 2) && !memcmp(a + 24, b + 24, 4 * (N / 256)));
            CHECK(!memcmp(ra, rb, N * 4)); /* error feedback unchanged */
            CHECK(ckpz_grad_unpack(ctx, a, la, CKPZ_DTYPE_F32, ya, N) == CKPZ_OK);
            CHECKF(ckpz_grad_unpack(ctx, b, lb, CKPZ_DTYPE_F32, yb, N) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
            CHECK(!memcmp(ya, yb, N * 4));
            size_t bad = 0;
            for (size_t i = 0; i < N; i++) /* the bound, again: half a step of the block */
                bad += !(fabsf(yb[i] - x[i]) <= 0.5f * scale_of(b, i / 256) * 1.0001f);
            CHECK(!bad);
            memset(yb, 0, N * 4);
            CHECK(ckpz_grad_unpack_add(ctx, b, lb, yb, N) == CKPZ_OK && !memcmp(ya, yb, N * 4));
            uint16_t *h = malloc(N * 2), *g = malloc(N * 2);
            CHECK(ckpz_grad_unpack(ctx, a, la, CKPZ_DTYPE_BF16, h, N) == CKPZ_OK);
            CHECK(ckpz_grad_unpack(ctx, b, lb, CKPZ_DTYPE_BF16, g, N) == CKPZ_OK && !memcmp(h, g, N * 2));
            ckpz_grad_info info = {.struct_size = sizeof info};
            CHECK(ckpz_grad_info_read(ctx, b, lb, &info) == CKPZ_OK && info.count == N && info.bits == bits);
            free(a), free(b), free(h), free(g);
        }
    free(x), free(ya), free(yb), free(ra), free(rb);
}

/* Codes that do not shrink stay raw; zeros are one byte; an old struct_size packs raw. */
static void test_fallback(void)
{
    enum { N = 4096 };
    float *x = malloc(N * 4), y[N];
    for (size_t i = 0; i < N; i++) x[i] = (float)((double)(rng() % 255) - 127); /* every code alike */
    for (size_t b = 0; b < N; b += 256) x[b] = 127;
    size_t la, lb;
    uint8_t *a = pack_with(8, 0, x, N, NULL, &la), *b = pack_with(8, 1, x, N, NULL, &lb);
    CHECKF(lb == la && b[21] == 0 && !memcmp(a, b, la), "uniform codes: %zu bytes of %zu, coding %u", lb, la, b[21]);
    free(a), free(b);
    float tiny[5] = {1, -2, 3, 0.5f, 0};
    b = pack_with(8, 1, tiny, 5, NULL, &lb);
    CHECK(lb == 24 + 4 + 5 + 4 && b[21] == 0);
    free(b);
    memset(x, 0, N * 4);
    b = pack_with(4, 1, x, N, NULL, &lb);
    CHECKF(b[21] == 1 && lb == 24 + 4 * (N / 256) + 1 + 4, "zeros: coding %u, %zu bytes", b[21], lb);
    CHECK(ckpz_grad_unpack(ctx, b, lb, CKPZ_DTYPE_F32, y, N) == CKPZ_OK && y[0] == 0 && y[N - 1] == 0);
    free(b);
    fill_peaked(x, N);
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.entropy = 1;
    p.struct_size = offsetof(ckpz_grad_params, entropy); /* a caller built before the field */
    size_t cap;
    CHECK(ckpz_grad_packet_size(ctx, &p, N, &cap) == CKPZ_OK);
    b = malloc(cap);
    CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, NULL, b, cap, &lb) == CKPZ_OK && lb == cap && b[21] == 0);
    free(b), free(x);
}

static void test_hostile(void)
{
    enum { N = 3000 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    fill_peaked(x, N);
    for (unsigned bits = 8; bits >= 4; bits -= 4) {
        size_t len, la;
        uint8_t *pkt = pack_with(bits, 1, x, N, NULL, &len), *raw = pack_with(bits, 0, x, N, NULL, &la);
        CHECKF(pkt[21] == 2 && len < la, "%u-bit: coding %u, %zu bytes of %zu", bits, pkt[21], len, la);
        uint8_t *m = malloc(la + 8);
        for (size_t cut = 0; cut < len; cut++) {
            memcpy(m, pkt, cut);
            CHECKF(ckpz_grad_unpack(ctx, m, cut, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "cut to %zu accepted", cut);
            if (cut > 28) { /* re-sealed: the coded length is wrong */
                reseal(m, cut);
                CHECKF(ckpz_grad_unpack(ctx, m, cut, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "cut to %zu, resealed", cut);
            }
        }
        int decoded = 0;
        for (size_t i = 0; i < len; i++)
            for (int flip = 0; flip < 2; flip++) {
                memcpy(m, pkt, len);
                m[i] ^= flip ? 0x80 : 0x01;
                CHECKF(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "byte %zu flipped accepted", i);
                if (i >= len - 4) continue;
                reseal(m, len);
                ckpz_grad_info info = {.struct_size = sizeof info};
                ckpz_error e = ckpz_grad_info_read(ctx, m, len, &info);
                if (e == CKPZ_OK) { /* a valid packet: it decodes in full, finite */
                    float *o = malloc(info.count * 4 + 4);
                    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, o, info.count) == CKPZ_OK);
                    for (size_t k = 0; k < info.count; k++) CHECK(isfinite(o[k]));
                    decoded++;
                    free(o);
                } else {
                    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == e);
                    CHECK(ckpz_ctx_message(ctx)[0] != 0);
                }
            }
        CHECK(decoded > 0);
        /* the coding byte: unknown (VERSION), coded on a raw packet, raw on a coded one */
        memcpy(m, pkt, len), m[21] = 3, reseal(m, len);
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_VERSION);
        memcpy(m, raw, la), m[21] = 2, reseal(m, la);
        CHECK(ckpz_grad_unpack(ctx, m, la, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        CHECK(strstr(ckpz_ctx_message(ctx), "coded codes"));
        memcpy(m, pkt, len), m[21] = 0, reseal(m, len);
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_TRUNCATED);
        memcpy(m, pkt, len), m[21] = 1, reseal(m, len); /* "constant" with more than a byte */
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
        free(pkt), free(raw), free(m);
    }
    free(x), free(y);
}

/* ckpz_grad_sum of coded inputs: byte for byte the sum of their raw twins (raw codes). */
static void test_sum(void)
{
    enum { N = 5000, M = 3 };
    float *x = malloc(N * 4);
    for (unsigned bits = 8; bits >= 4; bits -= 4) {
        uint8_t *raw[M], *coded[M];
        size_t lr[M], lc[M], w1, w2;
        for (int k = 0; k < M; k++) {
            fill_peaked(x, N);
            raw[k] = pack_with(bits, 0, x, N, NULL, &lr[k]);
            coded[k] = pack_with(bits, 1, x, N, NULL, &lc[k]);
            CHECK(coded[k][21] == 2 && lc[k] < lr[k]);
        }
        uint8_t *want = malloc(lr[0]), *got = malloc(lr[0]);
        CHECK(ckpz_grad_sum(ctx, (const void *const *)raw, lr, M, want, lr[0], &w1) == CKPZ_OK);
        CHECK(ckpz_grad_sum(ctx, (const void *const *)coded, lc, M, got, lr[0], &w2) == CKPZ_OK);
        CHECKF(w1 == w2 && !memcmp(want, got, w1), "%u-bit: the sum of coded packets differs", bits);
        CHECK(ckpz_grad_sum(ctx, (const void *const *)coded, lc, M, got, lr[0] - 1, &w2) == CKPZ_ERR_PARAM);
        uint8_t *first = malloc(lr[0]), *keep = coded[0]; /* in place, into a coded input */
        memcpy(first, coded[0], lc[0]);
        coded[0] = first;
        CHECK(ckpz_grad_sum(ctx, (const void *const *)coded, lc, M, first, lr[0], &w2) == CKPZ_OK);
        CHECKF(w2 == w1 && !memcmp(first, want, w1), "%u-bit: the sum in place differs", bits);
        coded[0] = keep;
        for (int k = 0; k < M; k++) free(raw[k]), free(coded[k]);
        free(want), free(got), free(first);
    }
    free(x);
}

int main(void)
{
    ctx = ckpz_ctx_create();
    test_roundtrip();
    test_fallback();
    test_hostile();
    test_sum();
    ckpz_ctx_free(ctx);
    return test_summary("test_grad_entropy");
}
