/* test_grad_sparse.c — top-k and threshold sparsification (ckpz_grad_* with
 * kind CKPZ_GRAD_TOPK / CKPZ_GRAD_THRESHOLD, doc/gradients.md): the elements kept are
 * the definition's (ties to the lowest index, zeros never), their values exact (FP32)
 * or within half a step (8-bit), the residual exactly v minus what was sent, unpack_add
 * the same floats; every CPU level writing the same packet and residual; hostile sparse
 * packets (every truncation, every bit flipped with and without the CRC resealed,
 * indices out of range, gaps overlong or not shortest, bitmap padding) refused or
 * decoded in bounds; the ">= 30x fewer bytes" of top 1 % with 8-bit values. */
#include "grad_util.h"

static const float *g_mag_v;
static int by_mag(const void *a, const void *b)
{
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    float x = fabsf(g_mag_v[i]), y = fabsf(g_mag_v[j]);
    if (x != y) return x > y ? -1 : 1;
    return i < j ? -1 : i > j;
}

/* The elements the definition keeps from v[0..n): a flag each, and how many. */
static size_t want_kept(const float *v, size_t n, const ckpz_grad_params *p, uint8_t *keep)
{
    memset(keep, 0, n + 1);
    size_t kept = 0;
    if (p->kind == CKPZ_GRAD_THRESHOLD) {
        for (size_t i = 0; i < n; i++)
            if (fabsf(v[i]) >= p->threshold) keep[i] = 1, kept++;
        return kept;
    }
    size_t k = (size_t)ceil(p->density * (double)n);
    if (k > n) k = n;
    uint32_t *ord = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) ord[i] = (uint32_t)i;
    g_mag_v = v;
    qsort(ord, n, 4, by_mag);
    for (size_t r = 0; r < k; r++)
        if (v[ord[r]] != 0) keep[ord[r]] = 1, kept++;
    free(ord);
    return kept;
}

/* Top-k and threshold: the elements kept are the definition's, their values exact (FP32)
 * or within half a step of their block's scale (8-bit), zeros elsewhere; the residual is
 * v minus what the packet decodes to, exactly; unpack_add adds those same floats; the
 * packet is no larger than ckpz_grad_packet_size; with ties (values repeated) the lowest
 * indices win. */
static void test_sparse(void)
{
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    const size_t sizes[] = {0, 1, 2, 7, 100, 1000, 4099, 70001};
    const double dens[] = {0.001, 0.01, 0.3, 1.0};
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t di = 0; di < 3; di++)
            for (int v = 0; v < 16; v++) {
                size_t n = sizes[si];
                float *x = malloc(n * 4 + 4), *xv = malloc(n * 4 + 4), *r = malloc(n * 4 + 4), *val = malloc(n * 4 + 4),
                      *y = malloc(n * 4 + 4), *acc = malloc(n * 4 + 4);
                uint8_t *keep = malloc(n + 1);
                fill(x, n);
                if (v & 8) /* ties: few distinct values */
                    for (size_t i = 0; i < n; i++) x[i] = (float)((int)(rng() % 7) - 3);
                void *g = as_dtype(dts[di], x, n, xv);
                int ef = v & 1;
                if (ef) fill(r, n);
                ckpz_grad_params p;
                ckpz_grad_params_init(&p);
                p.bits = v & 2 ? 32 : 8, p.block = v & 4 ? 5 : 256, p.seed = rng();
                p.kind = rng() % 3 ? CKPZ_GRAD_TOPK : CKPZ_GRAD_THRESHOLD;
                p.density = dens[rng() % 4], p.threshold = v & 8 ? 2.0f : 1e-3f;
                for (size_t i = 0; i < n; i++) val[i] = ef ? r[i] + xv[i] : xv[i];
                size_t kept = want_kept(val, n, &p, keep), len;
                uint8_t *pkt = pack(&p, dts[di], g, n, ef ? r : NULL, &len);
                ckpz_grad_info info = {.struct_size = sizeof info};
                CHECKF(ckpz_grad_info_read(ctx, pkt, len, &info) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
                CHECK(info.kind == p.kind && info.count == n && info.dtype == dts[di] && info.bits == p.bits);
                CHECKF(info.nnz == kept, "n=%zu kind %u density %g: %llu kept, want %zu", n, p.kind, p.density,
                       (unsigned long long)info.nnz, kept);
                CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, n) == CKPZ_OK);
                size_t bad = 0, j = 0;
                float big = 0;
                for (size_t i = 0; i < n; i++)
                    if (keep[i] && fabsf(val[i]) > big) big = fabsf(val[i]);
                /* 8-bit: half a step of the largest kept magnitude / 127, at most */
                float bound = p.bits == 32 ? 0 : 0.5f * big / 127 * 1.0001f;
                for (size_t i = 0; i < n; i++) {
                    if (!keep[i]) {
                        if (y[i] != 0 && !bad++)
                            fprintf(stderr, "sparse n=%zu: element %zu not kept is %g\n", n, i, y[i]);
                        continue;
                    }
                    float err = fabsf(y[i] - val[i]);
                    if (!(err <= bound) && !bad++)
                        fprintf(stderr, "sparse n=%zu: element %zu: %g -> %g\n", n, i, val[i], y[i]);
                    j++;
                }
                CHECK(!bad && j == kept);
                if (ef)
                    for (size_t i = 0; i < n; i++) {
                        float want = val[i] - y[i];
                        if (memcmp(&want, &r[i], 4) && !bad++)
                            fprintf(stderr, "sparse residual %zu: %g, want %g\n", i, r[i], want);
                    }
                CHECK(!bad);
                fill(acc, n);
                float *acc2 = malloc(n * 4 + 4);
                for (size_t i = 0; i < n; i++) acc2[i] = acc[i] + y[i];
                CHECK(ckpz_grad_unpack_add(ctx, pkt, len, acc, n) == CKPZ_OK);
                CHECK(!memcmp(acc, acc2, n * 4));
                if (dts[di] != CKPZ_DTYPE_F32) { /* the packet's dtype back: each the nearest of y */
                    uint8_t *back = malloc(n * 2 + 2), w[2];
                    const dtype_info *d = dtype_get(dts[di]);
                    CHECK(ckpz_grad_unpack(ctx, pkt, len, dts[di], back, n) == CKPZ_OK);
                    for (size_t i = 0; i < n; i++) {
                        d->from_double(w, y[i]);
                        if (memcmp(w, back + 2 * i, 2) && !bad++) fprintf(stderr, "sparse %s out %zu\n", d->name, i);
                    }
                    CHECK(!bad);
                    free(back);
                }
                free(acc2), free(pkt), free(g), free(x), free(xv), free(r), free(val), free(y), free(acc), free(keep);
            }
}

/* Every level writes the scalar loops' sparse packet and residual, bit for bit. */
static void test_sparse_levels(void)
{
    static const char *const isa[] = {"scalar", "avx2", "avx512"};
    static const ckpz_dtype dts[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16};
    const size_t sizes[] = {0, 1, 9, 257, 1025, 70001};
    int top = top_isa();
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (size_t di = 0; di < 3; di++)
            for (int v = 0; v < 8; v++) {
                size_t n = sizes[si];
                float *x = malloc(n * 4 + 4), *xv = malloc(n * 4 + 4), *r0 = malloc(n * 4 + 4), *r = malloc(n * 4 + 4),
                      *rw = malloc(n * 4 + 4);
                fill(x, n), fill(r0, n);
                void *g = as_dtype(dts[di], x, n, xv);
                ckpz_grad_params p;
                ckpz_grad_params_init(&p);
                p.kind = v & 1 ? CKPZ_GRAD_THRESHOLD : CKPZ_GRAD_TOPK, p.threshold = 1e-4f;
                p.bits = v & 2 ? 32 : 8, p.stochastic = p.bits == 8 && v & 4, p.block = 33, p.seed = rng();
                p.density = v & 4 ? 0.05 : 0.5;
                uint8_t *want = NULL;
                size_t wlen = 0;
                for (int m = 0; m <= top; m++) {
                    force_isa(isa[m]);
                    memcpy(r, r0, n * 4);
                    size_t len;
                    uint8_t *pkt = pack(&p, dts[di], g, n, r, &len);
                    if (m == 0) {
                        want = pkt, wlen = len;
                        memcpy(rw, r, n * 4);
                        continue;
                    }
                    CHECKF(len == wlen && !memcmp(pkt, want, len), "%s n=%zu %s case %d: sparse packet differs", isa[m],
                           n, ckpz_dtype_name(dts[di]), v);
                    CHECKF(!memcmp(rw, r, n * 4), "%s n=%zu case %d: sparse residual differs", isa[m], n, v);
                    free(pkt);
                }
                force_isa("avx512");
                free(want), free(g), free(x), free(xv), free(r0), free(r), free(rw);
            }
}

/* Hostile sparse packets (both index codings, both value widths): every truncation,
 * every byte flipped with and without the CRC re-sealed, and fields set one at a time
 * (indices out of range, gaps overlong or not shortest, bitmap padding, counts past
 * the length) refused, or decoded into exactly the elements promised. */
static void test_sparse_hostile(void)
{
    for (int v = 0; v < 4; v++) {
        enum { N = 61 };
        float x[N], y[N];
        fill(x, N);
        ckpz_grad_params p;
        ckpz_grad_params_init(&p);
        p.kind = CKPZ_GRAD_TOPK, p.bits = v & 1 ? 32 : 8, p.block = 4;
        p.density = v & 2 ? 0.9 : 0.1; /* 0.9: a bitmap is smaller than the gaps */
        size_t len;
        uint8_t *pkt = pack(&p, CKPZ_DTYPE_F32, x, N, NULL, &len), *m = malloc(len + 8);
        CHECK(pkt[20] == (v & 2 ? 1 : 0));
        for (size_t cut = 0; cut < len; cut++) {
            memcpy(m, pkt, cut);
            CHECKF(ckpz_grad_unpack(ctx, m, cut, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "cut to %zu accepted", cut);
        }
        int decoded = 0;
        for (size_t i = 0; i < len; i++)
            for (int flip = 0; flip < 8; flip++) {
                memcpy(m, pkt, len);
                m[i] ^= (uint8_t)(1u << flip);
                CHECKF(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) != CKPZ_OK, "byte %zu flipped accepted", i);
                if (i >= len - 4) continue;
                reseal(m, len);
                ckpz_grad_info info = {.struct_size = sizeof info};
                ckpz_error e = ckpz_grad_info_read(ctx, m, len, &info);
                if (e == CKPZ_OK && info.count > 4096) { /* a count's high bit flipped: valid, if large */
                    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_PARAM);
                } else if (e == CKPZ_OK) {
                    float *o = malloc(info.count * 4 + 1);
                    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, o, info.count) == CKPZ_OK);
                    CHECK(ckpz_grad_unpack_add(ctx, m, len, o, info.count) == CKPZ_OK);
                    decoded++;
                    free(o);
                } else {
                    CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == e);
                    CHECK(ckpz_ctx_message(ctx)[0] != 0);
                }
            }
        CHECK(decoded > 0);
        ckpz_grad_info info = {.struct_size = sizeof info};
        CHECK(ckpz_grad_info_read(ctx, pkt, len, &info) == CKPZ_OK);
        size_t vals = 32 + (p.bits == 8 ? 4 * ((info.nnz + 3) / 4) + info.nnz : 4 * info.nnz);
        struct {
            size_t off;
            uint8_t val;
            ckpz_error want;
        } cases[] = {{4, 2, CKPZ_ERR_VERSION},  {5, 16, CKPZ_ERR_VERSION}, {7, 2, CKPZ_ERR_VERSION},
                     {20, 2, CKPZ_ERR_VERSION}, {21, 0, CKPZ_ERR_VERSION}, {22, 1, CKPZ_ERR_VERSION},
                     {16, 1, CKPZ_ERR_CORRUPT}, {27, 1, CKPZ_ERR_CORRUPT}, {31, 1, CKPZ_ERR_CORRUPT}};
        for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
            memcpy(m, pkt, len);
            m[cases[c].off] = cases[c].val;
            reseal(m, len);
            ckpz_error e = ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N);
            CHECKF(e == cases[c].want, "case %d: byte %zu = %u: %s (%s)", v, cases[c].off, cases[c].val,
                   ckpz_error_name(e), ckpz_ctx_message(ctx));
        }
        memcpy(m, pkt, len);
        if (v & 2) { /* a bitmap: a bit past the last element, then one bit more than nnz */
            m[len - 5] |= 0x80;
            reseal(m, len);
            CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
            CHECK(strstr(ckpz_ctx_message(ctx), "past the last element"));
        } else { /* gaps: the last one past the count; one not in its shortest form */
            m[len - 5] = 0x7f;
            reseal(m, len);
            CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
            CHECK(strstr(ckpz_ctx_message(ctx), "past the count"));
            memcpy(m, pkt, len);
            m[vals] |= 0x80, m[vals + 1] = 0; /* the first gap as two bytes ending in 0 */
            reseal(m, len);
            CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
            CHECK(strstr(ckpz_ctx_message(ctx), "shortest form"));
        }
        if (p.bits == 32) { /* a value that is not finite */
            memcpy(m, pkt, len);
            m[32 + 3] = 0x7f, m[32 + 2] = 0x80;
            reseal(m, len);
            CHECK(ckpz_grad_unpack(ctx, m, len, CKPZ_DTYPE_F32, y, N) == CKPZ_ERR_CORRUPT);
        }
        CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N - 1) == CKPZ_ERR_PARAM);
        CHECK(ckpz_grad_unpack(ctx, pkt, len, CKPZ_DTYPE_F32, y, N) == CKPZ_OK);
        free(pkt), free(m);
    }
    /* bad params */
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.kind = CKPZ_GRAD_TOPK;
    size_t sz;
    p.bits = 4;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
    p.bits = 8, p.density = 0;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
    p.kind = CKPZ_GRAD_THRESHOLD, p.threshold = -1;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
    p.kind = 7;
    CHECK(ckpz_grad_packet_size(ctx, &p, 10, &sz) == CKPZ_ERR_PARAM);
    /* a NaN refused with the residual untouched */
    float g[100], r[100], r0[100];
    fill(g, 100), fill(r, 100);
    memcpy(r0, r, sizeof r);
    g[57] = NAN;
    p.kind = CKPZ_GRAD_TOPK, p.density = 0.1;
    uint8_t buf[2048];
    CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, g, 100, r, buf, sizeof buf, &sz) == CKPZ_ERR_INPUT);
    CHECK(strstr(ckpz_ctx_message(ctx), "element 57") && !memcmp(r, r0, sizeof r));
    /* a caller's params struct from before the sparse fields packs dense */
    ckpz_grad_params_init(&p);
    p.kind = CKPZ_GRAD_TOPK;
    p.struct_size = offsetof(ckpz_grad_params, kind);
    CHECK(ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, r, 100, NULL, buf, sizeof buf, &sz) == CKPZ_OK &&
          !memcmp(buf, "CKGQ", 4));
}

/* The ">= 30x fewer bytes" at the most aggressive setting: top 1 %, 8-bit values. */
static void test_sparse_ratio(void)
{
    enum { N = 1 << 20 };
    float *x = malloc(N * 4), *r = calloc(N, 4);
    fill(x, N);
    ckpz_grad_params p;
    ckpz_grad_params_init(&p);
    p.kind = CKPZ_GRAD_TOPK, p.density = 0.01;
    size_t len;
    uint8_t *pkt = pack(&p, CKPZ_DTYPE_F32, x, N, r, &len);
    printf("test_grad_sparse: top 1 %% of %d FP32 values, 8-bit: %zu bytes, %.1fx fewer\n", N, len, 4.0 * N / len);
    CHECK(4.0 * N / len >= 30);
    free(x), free(r), free(pkt);
}

int main(void)
{
    ctx = ckpz_ctx_create();
    test_sparse();
    test_sparse_levels();
    test_sparse_hostile();
    test_sparse_ratio();
    ckpz_ctx_free(ctx);
    return test_summary("test_grad_sparse");
}
