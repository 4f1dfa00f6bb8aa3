/* test_grad.c — the gradient calls (ckpz_grad_*, doc/gradients.md): quantisation error
 * within half a step (nearest) and one step (stochastic), stochastic rounding unbiased
 * over many seeds and reproducible for one, error feedback's invariant (the updates
 * applied plus the last residual sum to the gradients), NaN and infinity refused with
 * the residual untouched, empty and odd sizes, every CPU level writing the same packet
 * and residual bit for bit, and hostile packets (every byte flipped, with and without
 * the CRC re-sealed; every truncation; fields out of range) refused or decoded in
 * bounds; BF16/FP16 output the dtype table's rounding at every level (ties, the whole
 * range); the sum of packets (ckpz_grad_sum) pack's packet of the sums. Sparse packets:
 * test_grad_sparse.c. */
#include "grad_util.h"

/* Round trips: every size around the block, both widths, both roundings, each dtype. */
static void test_bounds(void)
{
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    static const uint32_t blocks[] = {1, 7, 64, 256, 3000};
    for (size_t di = 0; di < 3; di++)
        for (size_t bi = 0; bi < sizeof blocks / sizeof *blocks; bi++)
            for (unsigned bits = 8; bits >= 4; bits -= 4)
                for (int sto = 0; sto < 2; sto++) {
                    uint32_t B = blocks[bi];
                    size_t sizes[] = {0, 1, B > 1 ? B - 1 : 2, B, B + 1, 5 * B + 3};
                    for (size_t si = 0; si < 6; si++) {
                        size_t n = sizes[si];
                        float *x = malloc(n * 4 + 4), *xv = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
                        fill(x, n);
                        void *g = as_dtype(dts[di], x, n, xv);
                        ckpz_grad_params p;
                        ckpz_grad_params_init(&p);
                        p.bits = bits, p.block = B, p.stochastic = sto, p.seed = rng();
                        size_t len;
                        uint8_t *pkt = pack(&p, dts[di], g, n, NULL, &len);
                        ckpz_grad_info info = {.struct_size = sizeof info};
                        CHECK(ckpz_grad_info_read(ctx, pkt, len, &info) == CKPZ_OK);
                        CHECK(info.count == n && info.bits == bits && info.block == B && info.dtype == dts[di] &&
                              info.stochastic == sto);
                        CHECKF(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, n) == CKPZ_OK, "%s",
                               ckpz_ctx_message(ctx));
                        size_t bad = 0;
                        for (size_t i = 0; i < n; i++) {
                            float s = scale_of(pkt, i / B), err = fabsf(xv[i] - y[i]);
                            /* half a step (nearest) or a step (stochastic), and the slack of
                             * inv = qmax / a not being exactly 1 / scale */
                            float bound = (sto ? 1.0f : 0.5f) * s * 1.0001f + 1e-37f;
                            if (!(err <= bound) && !bad++)
                                fprintf(stderr, "%s %u-bit block %u n=%zu sto=%d: element %zu: %g -> %g, scale %g\n",
                                        ckpz_dtype_name(dts[di]), bits, B, n, sto, i, xv[i], y[i], s);
                        }
                        CHECK(!bad);
                        /* the packet's own dtype back: each value the nearest of the type to y */
                        void *back = malloc(n * 2 + 2);
                        if (dts[di] != CKPZ_DTYPE_F32) {
                            CHECK(ckpz_grad_unpack(ctx, pkt, len, dts[di], back, n) == CKPZ_OK);
                            const dtype_info *d = dtype_get(dts[di]);
                            uint8_t want[2];
                            for (size_t i = 0; i < n; i++) {
                                d->from_double(want, y[i]);
                                if (memcmp(want, (uint8_t *)back + 2 * i, 2) && !bad++)
                                    fprintf(stderr, "%s output differs at %zu\n", d->name, i);
                            }
                            CHECK(!bad);
                        }
                        free(back), free(pkt), free(g), free(x), free(xv), free(y);
                    }
                }
}

/* Stochastic rounding: the same seed, the same packet; the mean over many seeds is the
 * value (within 5 standard deviations of the mean of S draws: step / (2 sqrt S) at most). */
static void test_unbiased(void)
{
    enum { N = 300, S = 4000 };
    for (unsigned bits = 8; bits >= 4; bits -= 4) {
        float x[N], y[N];
        double sum[N] = {0};
        for (int i = 0; i < N; i++) x[i] = (float)((double)(rng() >> 11) / 0x1p53 * 2 - 1);
        x[0] = 1.0f; /* one block, its largest magnitude 1: a known step */
        ckpz_grad_params p;
        ckpz_grad_params_init(&p);
        p.bits = bits, p.block = N, p.stochastic = 1, p.seed = 42;
        size_t l1, l2;
        uint8_t *a = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &l1), *b = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &l2);
        CHECK(l1 == l2 && !memcmp(a, b, l1));
        p.seed = 43;
        free(b);
        b = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &l2);
        CHECK(memcmp(a, b, l1) != 0); /* another seed, other draws */
        free(a), free(b);
        float step = 1.0f / (bits == 8 ? 127 : 7);
        for (int s = 0; s < S; s++) {
            p.seed = (uint64_t)s * 0x9e3779b97f4a7c15ull;
            uint8_t *q = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &l1);
            CHECK(ckpz_grad_unpack(ctx, q, l1, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
            for (int i = 0; i < N; i++) sum[i] += y[i];
            free(q);
        }
        int bad = 0;
        double worst = 0;
        for (int i = 0; i < N; i++) {
            double dev = fabs(sum[i] / S - x[i]) / (step / (2 * sqrt((double)S)));
            worst = dev > worst ? dev : worst;
            bad += dev > 5;
        }
        CHECKF(!bad, "%u-bit: %d of %d means off by more than 5 sigma (worst %.1f)", bits, bad, N, worst);
        /* and nearest rounding is biased on the same values, so the check can fail */
        p.stochastic = 0;
        uint8_t *q = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &l1);
        CHECK(ckpz_grad_unpack(ctx, q, l1, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
        int far = 0;
        for (int i = 0; i < N; i++) far += fabs(y[i] - x[i]) / (step / (2 * sqrt((double)S))) > 5;
        CHECK(far > N / 2);
        free(q);
    }
}

/* Error feedback: over T steps, sum of what was applied + the last residual == sum of
 * the gradients, to float rounding (each step rounds g + r and r's update: a few ulp of
 * the values involved). */
static void test_feedback(void)
{
    enum { N = 1000, T = 60 };
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    for (size_t di = 0; di < 3; di++)
        for (unsigned bits = 8; bits >= 4; bits -= 4)
            for (int sto = 0; sto < 2; sto++) {
                static float res[N], x[N], xv[N], y[N];
                static double gsum[N], asum[N], vmax[N];
                memset(res, 0, sizeof res), memset(gsum, 0, sizeof gsum), memset(asum, 0, sizeof asum);
                memset(vmax, 0, sizeof vmax);
                ckpz_grad_params p;
                ckpz_grad_params_init(&p);
                p.bits = bits, p.block = 96, p.stochastic = sto;
                for (int t = 0; t < T; t++) {
                    for (int i = 0; i < N; i++) x[i] = (float)(rng_normal() * (1 + i % 7) * 1e-3);
                    void *g = as_dtype(dts[di], x, N, xv);
                    p.seed = (uint64_t)t;
                    size_t len;
                    for (int i = 0; i < N; i++) {
                        double v = fabs((double)xv[i]) + fabs((double)res[i]);
                        vmax[i] = v > vmax[i] ? v : vmax[i];
                    }
                    uint8_t *pkt = pack(&p, dts[di], g, N, res, &len);
                    CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
                    for (int i = 0; i < N; i++) gsum[i] += xv[i], asum[i] += y[i];
                    free(pkt), free(g);
                }
                int bad = 0;
                double worst = 0;
                for (int i = 0; i < N; i++) {
                    double err = fabs(asum[i] + res[i] - gsum[i]), tol = T * 4 * 0x1p-24 * vmax[i];
                    worst = err / tol > worst ? err / tol : worst;
                    bad += err > tol;
                }
                CHECKF(!bad, "%s %u-bit sto=%d: %d elements off the invariant (worst %.2f of the tolerance)",
                       ckpz_dtype_name(dts[di]), bits, sto, bad, worst);
                /* the residual stays within a step of the block (not drifting) */
                float rmax = 0;
                for (int i = 0; i < N; i++) rmax = fabsf(res[i]) > rmax ? fabsf(res[i]) : rmax;
                CHECK(rmax < 7e-3f * (bits == 8 ? 1 : 3));
            }
}

/* NaN and infinity: CKPZ_ERR_INPUT naming the element, the residual untouched. */
static void test_nonfinite(void)
{
    enum { N = 700 };
    static float x[N], res[N], keep[N];
    uint8_t pkt[4096];
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    for (int k = 0; k < 3; k++) {
        fill(x, N), fill(res, N);
        memcpy(keep, res, sizeof res);
        x[611] = bad[k];
        size_t w = 1;
        CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, NULL, pkt, sizeof pkt, &w) == CKPZ_ERR_INPUT);
        CHECK(w == 0 && strstr(ckpz_ctx_message(ctx), "element 611 "));
        CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, res, pkt, sizeof pkt, &w) == CKPZ_ERR_INPUT);
        CHECK(strstr(ckpz_ctx_message(ctx), "element 611 ") && !memcmp(keep, res, sizeof res));
        /* a finite gradient whose sum with the residual overflows */
        x[611] = 3e38f, res[611] = 3e38f, keep[611] = 3e38f;
        CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, res, pkt, sizeof pkt, &w) == CKPZ_ERR_INPUT);
        CHECK(!memcmp(keep, res, sizeof res));
    }
    /* bad parameters */
    size_t sz;
    p.bits = 5;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
    p.bits = 8, p.block = 0;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
    p.block = 65537;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
    p.block = 256;
    CHECK(ckpz_grad_packet_size(ctx, &p, 1ull << 32, &sz) == CKPZ_ERR_PARAM);
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_OK && sz == 24 + 4 + 10 + 4);
    CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, 10, NULL, pkt, sz - 1, &sz) == CKPZ_ERR_PARAM);
    CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_I32, x, 10, NULL, pkt, sizeof pkt, &sz) == CKPZ_ERR_PARAM);
    p.struct_size = 0;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
}

/* Every level writes the scalar loops' packet and residual, bit for bit. */
static void test_levels(void)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"};
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    const size_t sizes[] = {0, 1, 7, 8, 9, 255, 256, 257, 1023, 1024, 1025, 4099, 70001};
    int top = top_isa();
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t di = 0; di < 3; di++)
            for (int v = 0; v < 8; v++) {
                size_t n = sizes[si];
                float *x = malloc(n * 4 + 4), *xv = malloc(n * 4 + 4), *r0 = malloc(n * 4 + 4), *r = malloc(n * 4 + 4),
                      *y0 = malloc(n * 4 + 4), *y = malloc(n * 4 + 4);
                fill(x, n), fill(r0, n);
                void *g = as_dtype(dts[di], x, n, xv);
                ckpz_grad_params p;
                ckpz_grad_params_init(&p);
                p.bits = v & 1 ? 4 : 8, p.stochastic = (v >> 1) & 1, p.block = v & 4 ? 33 : 256, p.seed = rng();
                uint8_t *want = NULL;
                size_t wlen = 0;
                for (int m = 0; m <= top; m++) {
                    force_isa(isa[m]);
                    for (int ef = 0; ef < 2; ef++) {
                        memcpy(r, r0, n * 4);
                        size_t len;
                        uint8_t *pkt = pack(&p, dts[di], g, n, ef ? r : NULL, &len);
                        if (m == 0 && !ef) want = pkt, wlen = len;
                        else if (!ef) {
                            CHECKF(len == wlen && !memcmp(pkt, want, len), "%s n=%zu %s case %d: packet differs",
                                   isa[m], n, ckpz_dtype_name(dts[di]), v);
                            free(pkt);
                        } else {
                            CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, n) == CKPZ_OK);
                            if (m == 0) memcpy(y0, r, n * 4); /* the scalar residual */
                            else CHECKF(!memcmp(y0, r, n * 4), "%s n=%zu case %d: residual differs", isa[m], n, v);
                            free(pkt);
                        }
                    }
                }
                force_isa("avx512");
                free(want), free(g), free(x), free(xv), free(r0), free(r), free(y0), free(y);
            }
}

/* Hostile packets: each decoded into a buffer of exactly the elements promised (the
 * sanitizer build sees any read or write out of bounds). */
static void test_hostile(void)
{
    for (unsigned bits = 8; bits >= 4; bits -= 4) {
        enum { N = 37 };
        float x[N], y[N];
        fill(x, N);
        ckpz_grad_params p;
        ckpz_grad_params_init(&p);
        p.bits = bits, p.block = 8;
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
            for (int flip = 0; flip < 2; flip++) {
                memcpy(m, pkt, len);
                m[i] ^= flip ? 0x80 : 0x01;
                CHECKF(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "byte %zu flipped accepted", i);
                if (i >= len - 4) continue;
                reseal(m, len); /* past the checksum, to the field checks */
                ckpz_grad_info info = {.struct_size = sizeof info};
                ckpz_error e = ckpz_grad_info_read(ctx, m, len, &info);
                if (e == CKPZ_OK) {
                    float *o = malloc(info.count * 4 + 1);
                    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, o, info.count) == CKPZ_OK);
                    decoded++;
                    free(o);
                } else {
                    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == e);
                    CHECK(ckpz_ctx_message(ctx)[0] != 0);
                }
            }
        CHECK(decoded > 0); /* a flipped code or scale bit re-sealed is a valid packet */
        /* fields one at a time, re-sealed */
        struct {
            size_t off;
            uint8_t val;
            ckpz_error want;
        } cases[] = {{4, 2, CKPZ_ERR_VERSION},      {5, 16, CKPZ_ERR_VERSION},    {6, CKPZ_DTYPE_I8, CKPZ_ERR_VERSION},
                     {7, 2, CKPZ_ERR_VERSION},      {20, 1, CKPZ_ERR_VERSION},    {23, 1, CKPZ_ERR_VERSION},
                     {19, 1, CKPZ_ERR_CORRUPT},     {16, 1, CKPZ_ERR_CORRUPT},    {12, N + 2, CKPZ_ERR_TRUNCATED},
                     {12, N - 3, CKPZ_ERR_CORRUPT}, {27, 0xff, CKPZ_ERR_CORRUPT}, {27, 0x80, CKPZ_ERR_CORRUPT}};
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            memcpy(m, pkt, len);
            m[cases[c].off] = cases[c].val;
            reseal(m, len);
            ckpz_error e = ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N);
            CHECKF(e == cases[c].want, "%u-bit: byte %zu = %u: %s (%s)", bits, cases[c].off, cases[c].val,
                   ckpz_error_name(e), ckpz_ctx_message(ctx));
        }
        /* a scale whose largest multiple overflows (decoded as infinity) */
        memcpy(m, pkt, len);
        memcpy(m + 24, "\xff\xff\x7f\x7f", 4);
        reseal(m, len);
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        {
            float big[3] = {0x1.fffffep127f, -0x1.fffffep127f, 1}, yb[3];
            size_t blen;
            uint8_t *bp = pack(&p, CKPZ_DTYPE_F32, big, 3, NULL, &blen);
            CHECK(ckpz_grad_unpack(ctx, bp, blen, CKPZ_DTYPE_F32, yb, 3) == CKPZ_OK && isfinite(yb[0]) &&
                  yb[0] > 0x1p127f && isfinite(yb[1]));
            free(bp);
        }
        /* block 0, and a code out of range */
        memcpy(m, pkt, len);
        memset(m + 8, 0, 4);
        reseal(m, len);
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        memcpy(m, pkt, len);
        size_t codes = 24 + 4 * ((N + 7) / 8);
        m[codes + 3] = bits == 8 ? 0x80 : 0x08;
        reseal(m, len);
        CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        CHECK(strstr(ckpz_ctx_message(ctx), bits == 8 ? "element 3's code" : "element 6's code"));
        if (bits == 4) { /* N odd: the last byte's high half is padding, which must be 0 */
            memcpy(m, pkt, len);
            m[len - 5] |= 0x10;
            reseal(m, len);
            CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        }
        CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N - 1) == CKPZ_ERR_PARAM);
        CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
        free(pkt), free(m);
    }
}

/* Unpacking to BF16 and FP16 at every level: each value the dtype table's nearest, over
 * the whole range (FP16's subnormals and overflow to infinity), and at the ties: blocks
 * of 16 whose scale has tie bits of either type and whose codes are powers of two (so
 * each decoded value keeps those bits). */
static void test_narrow(void)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"};
    enum { N = 4099, B = 16 };
    float *x = malloc(N * 4), *y = malloc(N * 4);
    for (size_t i = 0; i < N; i++) x[i] = (float)(rng_normal() * ldexp(1.0, (int)(rng() % 80) - 40));
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.block = B;
    size_t len;
    uint8_t *pkt = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &len), *out = malloc(2 * N), w[2];
    size_t nb = (N + B - 1) / B;
    for (size_t b = 0; b < nb; b += 2) {
        static const uint32_t low[] = {0x8000, 0x7fff, 0x18000, 0x1000, 0x3000, 0x0fff, 0};
        uint32_t u = ((uint32_t)(rng() % 0x7a000000u) & ~0x1ffffu) | low[rng() % 7];
        for (int k = 0; k < 4; k++) pkt[24 + 4 * b + k] = (uint8_t)(u >> 8 * k);
        for (size_t i = b * B; i < (b + 1) * B && i < N; i++) {
            int c = 1 << (rng() % 7);
            pkt[24 + 4 * nb + i] = (uint8_t)(rng() & 1 ? c : -c);
        }
    }
    reseal(pkt, len);
    CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
    int top = top_isa();
    for (int m = 0; m <= top; m++) {
        force_isa(isa[m]);
        for (int t = 0; t < 2; t++) {
            ckpz_dtype dt = t ? CKPZ_DTYPE_F16 : CKPZ_DTYPE_BF16;
            const dtype_info *d = dtype_get(dt);
            CHECK(ckpz_grad_unpack(ctx, pkt, len, dt, out, N) == CKPZ_OK);
            size_t bad = 0;
            for (size_t i = 0; i < N; i++) {
                d->from_double(w, y[i]);
                if (memcmp(w, out + 2 * i, 2) && !bad++)
                    fprintf(stderr, "%s %s: element %zu (%g) differs\n", isa[m], d->name, i, y[i]);
            }
            CHECK(!bad);
        }
    }
    force_isa("avx512");
    free(x), free(y), free(pkt), free(out);
}

/* The sum of packets: the packet ckpz_grad_pack writes for the FP32 sums of what the
 * inputs decode to (added in order), so within half its own step of them; the same at
 * every level; layouts that differ, sparse packets, too little room and a damaged input
 * refused. */
static void test_sum(void)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"};
    const size_t sizes[] = {1, 7, 255, 256, 257, 4099};
    int top = top_isa();
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int v = 0; v < 8; v++) {
            size_t n = sizes[si], m = 1 + (size_t)(rng() % 4);
            ckpz_grad_params p;
            ckpz_grad_params_init(&p);
            p.bits = v & 1 ? 4 : 8, p.block = v & 2 ? 33 : 256, p.stochastic = v >> 2 & 1;
            uint8_t *pk[4];
            size_t lens[4], len;
            float *x = malloc(n * 4), *y = malloc(n * 4), *sum = calloc(n, 4), *ys = malloc(n * 4);
            for (size_t k = 0; k < m; k++) {
                fill(x, n);
                p.seed = rng();
                pk[k] = pack(&p, CKPZ_DTYPE_F32, x, n, NULL, &lens[k]);
                CHECK(ckpz_grad_unpack(ctx, pk[k], lens[k], CKPZ_DTYPE_F32, y, n) == CKPZ_OK);
                for (size_t i = 0; i < n; i++) sum[i] = k ? sum[i] + y[i] : y[i];
            }
            p.stochastic = 0;
            uint8_t *want = pack(&p, CKPZ_DTYPE_F32, sum, n, NULL, &len), *got = malloc(len);
            CHECK(len == lens[0]);
            for (int lv = 0; lv <= top; lv++) {
                force_isa(isa[lv]);
                size_t w = 0;
                memset(got, 0xa5, len);
                ckpz_error e = ckpz_grad_sum(ctx, (const void *const *)pk, lens, m, got, len, &w);
                CHECKF(e == CKPZ_OK && w == len, "sum: %s", ckpz_ctx_message(ctx));
                CHECKF(!memcmp(got, want, len), "%s n=%zu case %d m=%zu: the sum is not pack's packet of the sums",
                       isa[lv], n, v, m);
                /* in place: the first input is the output */
                uint8_t *first = malloc(len), *keep0 = pk[0];
                memcpy(first, pk[0], len);
                pk[0] = first;
                e = ckpz_grad_sum(ctx, (const void *const *)pk, lens, m, first, len, &w);
                CHECKF(e == CKPZ_OK && !memcmp(first, want, len), "%s n=%zu case %d m=%zu: the sum in place differs",
                       isa[lv], n, v, m);
                pk[0] = keep0;
                free(first);
            }
            force_isa("avx512");
            CHECK(ckpz_grad_unpack(ctx, got, len, CKPZ_DTYPE_F32, ys, n) == CKPZ_OK);
            size_t bad = 0;
            for (size_t i = 0; i < n; i++)
                if (!(fabsf(ys[i] - sum[i]) <= 0.5f * scale_of(got, i / p.block) * 1.0001f + 1e-37f) && !bad++)
                    fprintf(stderr, "sum: element %zu: %g, the inputs' sum %g\n", i, ys[i], sum[i]);
            CHECK(!bad);
            for (size_t k = 0; k < m; k++) free(pk[k]);
            free(want), free(got), free(x), free(y), free(sum), free(ys);
        }
    /* refusals */
    enum { N = 100 };
    float x[N];
    fill(x, N);
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    size_t la, lb, lc, w;
    uint8_t *a = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &la), out[1024];
    p.block = 64;
    uint8_t *b = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &lb);
    p.kind = CKPZ_GRAD_TOPK;
    uint8_t *c = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &lc);
    const void *two[2] = {a, b};
    size_t lens[2] = {la, lb};
    CHECK(ckpz_grad_sum(ctx, two, lens, 2, out, sizeof out, &w) == CKPZ_ERR_PARAM);
    CHECK(strstr(ckpz_ctx_message(ctx), "packet 1"));
    two[1] = c, lens[1] = lc;
    CHECK(ckpz_grad_sum(ctx, two, lens, 2, out, sizeof out, &w) == CKPZ_ERR_PARAM);
    two[1] = a, lens[1] = la;
    CHECK(ckpz_grad_sum(ctx, two, lens, 2, out, la - 1, &w) == CKPZ_ERR_PARAM);
    CHECK(ckpz_grad_sum(ctx, two, lens, 0, out, sizeof out, &w) == CKPZ_ERR_PARAM);
    uint8_t *d = malloc(la);
    memcpy(d, a, la);
    d[30] ^= 1;
    two[1] = d;
    CHECK(ckpz_grad_sum(ctx, two, lens, 2, out, sizeof out, &w) == CKPZ_ERR_CHECKSUM);
    CHECKF(strstr(ckpz_ctx_message(ctx), "packet 1: ") && strstr(ckpz_ctx_message(ctx), "CRC"), "%s",
           ckpz_ctx_message(ctx));
    two[1] = a;
    CHECK(ckpz_grad_sum(ctx, two, lens, 2, out, sizeof out, &w) == CKPZ_OK && w == la);
    free(a), free(b), free(c), free(d);
}

int main(void)
{
    ctx = ckpz_ctx_create();
    test_bounds();
    test_unbiased();
    test_feedback();
    test_nonfinite();
    test_levels();
    test_narrow();
    test_hostile();
    test_sum();
    ckpz_ctx_free(ctx);
    return test_summary("test_grad");
}
