/* test_grad_sign.c — 1-bit scaled-sign packets (bits = 1, doc/gradients.md): every
 * decoded value is +scale or -scale of its block with the sign of the value packed, the
 * block's scale is mean |v| (within float rounding), the packet's size is the header,
 * one scale a block and one bit an element; error feedback's invariant (updates applied
 * plus the last residual sum to the gradients, each step's residual exactly v minus what
 * the packet decodes to); NaN and infinity refused with the residual untouched; entropy
 * asked for still writes raw signs; every CPU level the same packet, residual and decoded
 * values (blocks that start mid-byte too); hostile
 * packets (every truncation, every byte flipped with and without the CRC re-sealed,
 * padding bits, a negative or infinite scale) refused or decoded to +-scale; the sum of
 * packets pack's packet of the decoded sums, in place too. */
#include "grad_util.h"

static size_t sign_size(size_t n, uint32_t block) { return 28 + 4 * ((n + block - 1) / block) + (n + 7) / 8; }

/* pkt (1-bit, of xv[0..n) in blocks of B) decodes to +-scale with xv's signs, scale =
 * mean |xv| of the block. */
static void check_signs(const uint8_t *pkt, size_t len, const float *xv, size_t n, uint32_t B, const char *what)
{
    float *y = malloc(n * 4 + 4);
    CHECKF(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, n) == CKPZ_OK, "%s: %s", what, ckpz_ctx_message(ctx));
    int bad = 0;
    for (size_t b = 0; b * B < n; b++) {
        size_t end = (b + 1) * B < n ? (b + 1) * B : n;
        double sum = 0;
        for (size_t i = b * B; i < end; i++) sum += fabs(xv[i]);
        double mean = sum / (double)(end - b * B);
        float s = scale_of(pkt, b);
        if (mean >= 0x1p-118 && fabs(s - mean) > 1e-6 * mean) bad++;
        for (size_t i = b * B; i < end; i++)
            if (y[i] != (xv[i] < 0 ? -s : s)) bad++;
    }
    CHECKF(!bad, "%s n=%zu block %u: %d values or scales wrong", what, n, (unsigned)B, bad);
    free(y);
}

static void test_roundtrip(void)
{
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    static const uint32_t blocks[] = {1, 7, 64, 512, 1024, 3000};
    for (size_t di = 0; di < 3; di++)
        for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++) {
            uint32_t B = blocks[bi];
            const size_t ns[] = {0, 1, 5, 8, 9, B - 1, B, B + 1, 3 * B + 13, 5000};
            for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
                size_t n = ns[k], len;
                float *x = malloc(n * 4 + 4), *xv = malloc(n * 4 + 4);
                fill(x, n);
                void *g = as_dtype(dts[di], x, n, xv);
                ckpz_grad_params p;
                ckpz_grad_params_init(&p);
                p.bits = 1, p.block = B, p.entropy = 1; /* asked for, but signs stay raw */
                uint8_t *pkt = pack(&p, dts[di], g, n, NULL, &len);
                CHECKF(len == sign_size(n, B) && pkt[21] == 0 && pkt[5] == 1, "n=%zu block %u: %zu bytes", n,
                       (unsigned)B, len);
                ckpz_grad_info info = {.struct_size = sizeof info};
                CHECK(ckpz_grad_info_read(ctx, pkt, len, &info) == CKPZ_OK && info.bits == 1 && info.count == n &&
                      info.block == B && info.dtype == dts[di]);
                check_signs(pkt, len, xv, n, B, ckpz_dtype_name(dts[di]));
                free(pkt), free(g), free(x), free(xv);
            }
        }
    /* an all-zero block: scale 0, every value decodes to 0 */
    float z[100] = {0}, y[100];
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.bits = 1, p.block = 64;
    size_t len;
    uint8_t *pkt = pack(&p, CKPZ_DTYPE_F32, z, 100, NULL, &len);
    CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, 100) == CKPZ_OK && y[0] == 0 && y[99] == 0);
    free(pkt);
}

/* Error feedback over many steps: sum of decoded packets + residual == sum of gradients. */
static void test_feedback(void)
{
    enum { N = 3001, T = 40 };
    static float g[N], res[N], y[N], before[N];
    static double applied[N], total[N];
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.bits = 1, p.block = 512;
    memset(res, 0, sizeof res);
    double worst = 0, step_bad = 0;
    for (int t = 0; t < T; t++) {
        fill(g, N);
        for (size_t i = 0; i < N; i++) before[i] = g[i] + res[i], total[i] += g[i];
        size_t len;
        uint8_t *pkt = pack(&p, CKPZ_DTYPE_F32, g, N, res, &len);
        CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
        for (size_t i = 0; i < N; i++) {
            applied[i] += y[i];
            if (res[i] != before[i] - y[i]) step_bad++;
        }
        free(pkt);
    }
    for (size_t i = 0; i < N; i++) {
        double err = fabs(applied[i] + res[i] - total[i]), mag = fabs(total[i]) + fabs(applied[i]) + 1e-30;
        if (err / mag > worst) worst = err / mag;
    }
    CHECKF(step_bad == 0, "%.0f residuals are not v - decoded", step_bad);
    CHECKF(worst < 1e-5, "applied + residual off the gradients' sum by %g (relative)", worst);
}

static void test_nonfinite(void)
{
    enum { N = 700 };
    static float x[N], res[N], keep[N];
    uint8_t pkt[4096];
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.bits = 1, p.block = 512;
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        fill(x, N), fill(res, N);
        memcpy(keep, res, sizeof res);
        x[611] = bad[k];
        size_t w = 1;
        CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, NULL, pkt, sizeof pkt, &w) == CKPZ_ERR_INPUT);
        CHECK(w == 0 && strstr(ckpz_ctx_message(ctx), "element 611 "));
        CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, res, pkt, sizeof pkt, &w) == CKPZ_ERR_INPUT);
        CHECK(!memcmp(keep, res, sizeof res));
        x[611] = 3e38f, res[611] = 3e38f, keep[611] = 3e38f; /* finite, but the sum overflows */
        CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, res, pkt, sizeof pkt, &w) == CKPZ_ERR_INPUT);
        CHECK(!memcmp(keep, res, sizeof res));
    }
    /* the largest floats: the scale (their mean) is finite, so is every value decoded */
    float big[3] = {0x1.fffffep127f, -0x1.fffffep127f, 0x1.fffffep127f}, y[3];
    size_t w;
    CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, big, 3, NULL, pkt, sizeof pkt, &w) == CKPZ_OK);
    CHECK(ckpz_grad_unpack(ctx, pkt, w, CKPZ_DTYPE_F32, y, 3) == CKPZ_OK && y[0] == big[0] && y[1] == big[1]);
    size_t sz;
    p.bits = 2;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
}

static void test_levels(void)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"};
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    const size_t sizes[] = {0, 1, 7, 9, 33, 100, 511, 512, 513, 1025, 4099};
    static const uint32_t blocks[] = {512, 7, 33, 2000};
    int top = top_isa();
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t di = 0; di < 3 * 4; di++) {
            size_t n = sizes[si];
            float *x = malloc(n * 4 + 4), *xv = malloc(n * 4 + 4), *r0 = malloc(n * 4 + 4), *r = malloc(n * 4 + 4),
                  *rs = malloc(n * 4 + 4), *y0 = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
            fill(x, n), fill(r0, n);
            void *g = as_dtype(dts[di % 3], x, n, xv);
            ckpz_grad_params p;
            ckpz_grad_params_init(&p);
            p.bits = 1, p.block = blocks[di / 3]; /* blocks not a multiple of 8: the kernels' odd starts */
            uint8_t *want[2] = {NULL, NULL};
            size_t wlen[2] = {0, 0};
            for (int m = 0; m <= top; m++) {
                force_isa(isa[m]);
                for (int ef = 0; ef < 2; ef++) {
                    memcpy(r, r0, n * 4);
                    size_t len;
                    uint8_t *pkt = pack(&p, dts[di % 3], g, n, ef ? r : NULL, &len);
                    if (!m) {
                        want[ef] = pkt, wlen[ef] = len;
                        if (ef) memcpy(rs, r, n * 4);
                        if (!ef) CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y0, n) == CKPZ_OK);
                        continue;
                    }
                    CHECKF(len == wlen[ef] && !memcmp(pkt, want[ef], len), "%s n=%zu block %u: packet differs", isa[m],
                           n, (unsigned)p.block);
                    if (ef)
                        CHECKF(!memcmp(rs, r, n * 4), "%s n=%zu block %u: residual differs", isa[m], n,
                               (unsigned)p.block);
                    CHECK(ckpz_grad_unpack(ctx, want[0], wlen[0], CKPZ_DTYPE_F32, y, n) == CKPZ_OK);
                    CHECKF(!memcmp(y, y0, n * 4), "%s n=%zu block %u: decoded values differ", isa[m], n,
                           (unsigned)p.block);
                    free(pkt);
                }
            }
            force_isa("avx512");
            free(want[0]), free(want[1]), free(g), free(x), free(xv), free(r0), free(r), free(rs), free(y0), free(y);
        }
}

static void test_hostile(void)
{
    enum { N = 37 };
    float x[N], y[N];
    fill(x, N);
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.bits = 1, p.block = 8;
    size_t len;
    uint8_t *pkt = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &len), *m = malloc(len + 8);
    for (size_t cut = 0; cut < len; cut++) {
        memcpy(m, pkt, cut);
        CHECKF(ckpz_grad_unpack(ctx, m, cut, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "cut to %zu accepted", cut);
    }
    memcpy(m, pkt, len), m[len] = 0;
    CHECK(ckpz_grad_unpack(ctx, m, len + 1, CKPZ_DTYPE_F32, y, N) != CKPZ_OK);
    int decoded = 0;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(m, pkt, len);
            m[i] ^= (uint8_t)(1u << bit);
            CHECKF(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "byte %zu flipped accepted", i);
            if (i >= len - 4) continue;
            reseal(m, len);
            ckpz_grad_info info = {.struct_size = sizeof info};
            ckpz_error e = ckpz_grad_info_read(ctx, m, len, &info);
            if (e != CKPZ_OK) {
                CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == e && ckpz_ctx_message(ctx)[0]);
                continue;
            }
            float *o = malloc(info.count * 4 + 4);
            CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, o, info.count) == CKPZ_OK);
            for (size_t k = 0; k < info.count; k++) { /* +-scale of its block, finite */
                float s = scale_of(m, k / info.block);
                CHECK(isfinite(o[k]) && (o[k] == s || o[k] == -s));
            }
            decoded++;
            free(o);
        }
    CHECK(decoded > 0); /* a flipped sign or scale bit re-sealed is a valid packet */
    /* padding bits past the count (37: bits 5..7 of the last code byte), each one */
    for (int bit = 5; bit < 8; bit++) {
        memcpy(m, pkt, len);
        m[len - 5] |= (uint8_t)(1u << bit);
        reseal(m, len);
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        CHECK(strstr(ckpz_ctx_message(ctx), "past the count"));
    }
    /* a negative, an infinite, a NaN scale; bits 2 (reserved) */
    const char *scales[] = {"\x00\x00\x80\xbf", "\x00\x00\x80\x7f", "\x00\x00\xc0\x7f"};
    for (int k = 0; k < 3; k++) {
        memcpy(m, pkt, len);
        memcpy(m + 24 + 4 * 2, scales[k], 4);
        reseal(m, len);
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
    }
    memcpy(m, pkt, len), m[5] = 2, reseal(m, len);
    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_VERSION);
    CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
    free(pkt), free(m);
}

/* The sum of 1-bit packets: pack's packet of the decoded sums, in place too. */
static void test_sum(void)
{
    enum { N = 2051 };
    static float a[N], b[N], ya[N], yb[N];
    fill(a, N), fill(b, N);
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.bits = 1, p.block = 512;
    size_t la, lb, lw, w;
    uint8_t *pa = pack(&p, CKPZ_DTYPE_F32, a, N, NULL, &la), *pb = pack(&p, CKPZ_DTYPE_F32, b, N, NULL, &lb);
    CHECK(ckpz_grad_unpack(ctx, pa, la, CKPZ_DTYPE_F32, ya, N) == CKPZ_OK);
    CHECK(ckpz_grad_unpack(ctx, pb, lb, CKPZ_DTYPE_F32, yb, N) == CKPZ_OK);
    for (size_t i = 0; i < N; i++) ya[i] += yb[i];
    uint8_t *want = pack(&p, CKPZ_DTYPE_F32, ya, N, NULL, &lw), *out = malloc(la);
    const void *two[2] = {pa, pb};
    size_t lens[2] = {la, lb};
    CHECK(ckpz_grad_sum(ctx, two, lens, 2, out, la, &w) == CKPZ_OK && w == lw && !memcmp(out, want, lw));
    CHECK(ckpz_grad_sum(ctx, two, lens, 2, pa, la, &w) == CKPZ_OK && !memcmp(pa, want, lw)); /* in place */
    free(pa), free(pb), free(want), free(out);
}

int main(void)
{
    ctx = ckpz_ctx_create();
    test_roundtrip();
    test_feedback();
    test_nonfinite();
    test_levels();
    test_hostile();
    test_sum();
    ckpz_ctx_free(ctx);
    return test_summary("test_grad_sign");
}
