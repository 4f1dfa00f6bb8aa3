/* rans0.c — order-0 rANS with tables that adapt along the plane.
 *
 * Tensor scales drift along a checkpoint, so one table per plane leaves ~1.5% on the
 * table; but a table per small block costs tens of bytes. The encoder therefore cuts
 * the plane into base blocks (8-32 KiB by level, down to 1 KiB on small planes), counts
 * each, and greedily merges a block into the running segment whenever one shared table
 * is estimated cheaper than two (table bytes included). All segments share one rANS stream: the interleaved
 * states simply switch tables at segment boundaries, so adaptation costs only the
 * tables, not a state flush per block.
 *
 * Payload: u8 log2(base block) | u8 log2(states N: 5 or 6) | per segment: LEB128
 * block count, table | N little-endian u32 final states | 16-bit little-endian
 * renormalisation words. Symbol i belongs to state i % N. Encoder and decoder each
 * have a portable scalar loop and an AVX2 loop (runtime dispatch, no -mavx2 needed
 * for the build) that emit and read the same words in the same order, so every
 * combination decodes; the scalar loops are branch-free except for the loop itself.
 * The encoder also has AVX-512 loops (avx512.c): one for segments of up to 64 symbols,
 * every exponent plane measured, at twice the AVX2 loop's speed, and one for any
 * alphabet (delta residual planes) at about 3.5 times.
 */
#include <stdlib.h>
#include <string.h>

#include "ent_internal.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RANS0_HAVE_AVX2 1
#include <immintrin.h>
#endif

static size_t leb_write(uint8_t *out, size_t v)
{
    size_t k = 0;
    while (v >= 0x80) {
        out[k++] = (uint8_t)(0x80 | (v & 0x7f));
        v >>= 7;
    }
    out[k++] = (uint8_t)v;
    return k;
}

static int leb_read(const uint8_t **pp, const uint8_t *end, size_t *v)
{
    const uint8_t *p = *pp;
    uint64_t r = 0;
    for (int shift = 0; shift < 35; shift += 7) {
        if (p >= end)
            return -1;
        uint8_t b = *p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            /* canonical encodings only: no padding bytes, no bits past 32 */
            if ((shift && b == 0) || r > UINT32_MAX)
                return -1;
            *pp = p;
            *v = (size_t)r;
            return 0;
        }
    }
    return -1;
}

int rans0_base_shift(int level, size_t n)
{
    int sh = level <= 2 ? 15 : level <= 5 ? 14 : 13;
    /* Tiny planes: one block, never more than needed. */
    while (sh > 10 && ((size_t)1 << sh) > n)
        sh--;
    return sh;
}

int ent_grow(void **buf, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    void *nb = realloc(*buf, need);
    if (!nb)
        return -1;
    *buf = nb;
    *cap = need;
    return 0;
}

static double seg_cost(const uint32_t *cnt, uint64_t total)
{
    return ent_bits(cnt, total) / 8.0 + (double)rans_table_cost(cnt, total) + 1.0;
}

#ifdef RANS0_HAVE_AVX2
/* Encoder: for a mask of lanes that flush a word, nibble 8-c+k (c = lanes flushing)
 * = the k-th flushing lane, so their words land at the top of 8 in lane order. */
static const uint32_t enc_lut[256] = {
    0x00000000u, 0x00000000u, 0x10000000u, 0x10000000u, 0x20000000u, 0x20000000u, 0x21000000u, 0x21000000u,
    0x30000000u, 0x30000000u, 0x31000000u, 0x31000000u, 0x32000000u, 0x32000000u, 0x32100000u, 0x32100000u,
    0x40000000u, 0x40000000u, 0x41000000u, 0x41000000u, 0x42000000u, 0x42000000u, 0x42100000u, 0x42100000u,
    0x43000000u, 0x43000000u, 0x43100000u, 0x43100000u, 0x43200000u, 0x43200000u, 0x43210000u, 0x43210000u,
    0x50000000u, 0x50000000u, 0x51000000u, 0x51000000u, 0x52000000u, 0x52000000u, 0x52100000u, 0x52100000u,
    0x53000000u, 0x53000000u, 0x53100000u, 0x53100000u, 0x53200000u, 0x53200000u, 0x53210000u, 0x53210000u,
    0x54000000u, 0x54000000u, 0x54100000u, 0x54100000u, 0x54200000u, 0x54200000u, 0x54210000u, 0x54210000u,
    0x54300000u, 0x54300000u, 0x54310000u, 0x54310000u, 0x54320000u, 0x54320000u, 0x54321000u, 0x54321000u,
    0x60000000u, 0x60000000u, 0x61000000u, 0x61000000u, 0x62000000u, 0x62000000u, 0x62100000u, 0x62100000u,
    0x63000000u, 0x63000000u, 0x63100000u, 0x63100000u, 0x63200000u, 0x63200000u, 0x63210000u, 0x63210000u,
    0x64000000u, 0x64000000u, 0x64100000u, 0x64100000u, 0x64200000u, 0x64200000u, 0x64210000u, 0x64210000u,
    0x64300000u, 0x64300000u, 0x64310000u, 0x64310000u, 0x64320000u, 0x64320000u, 0x64321000u, 0x64321000u,
    0x65000000u, 0x65000000u, 0x65100000u, 0x65100000u, 0x65200000u, 0x65200000u, 0x65210000u, 0x65210000u,
    0x65300000u, 0x65300000u, 0x65310000u, 0x65310000u, 0x65320000u, 0x65320000u, 0x65321000u, 0x65321000u,
    0x65400000u, 0x65400000u, 0x65410000u, 0x65410000u, 0x65420000u, 0x65420000u, 0x65421000u, 0x65421000u,
    0x65430000u, 0x65430000u, 0x65431000u, 0x65431000u, 0x65432000u, 0x65432000u, 0x65432100u, 0x65432100u,
    0x70000000u, 0x70000000u, 0x71000000u, 0x71000000u, 0x72000000u, 0x72000000u, 0x72100000u, 0x72100000u,
    0x73000000u, 0x73000000u, 0x73100000u, 0x73100000u, 0x73200000u, 0x73200000u, 0x73210000u, 0x73210000u,
    0x74000000u, 0x74000000u, 0x74100000u, 0x74100000u, 0x74200000u, 0x74200000u, 0x74210000u, 0x74210000u,
    0x74300000u, 0x74300000u, 0x74310000u, 0x74310000u, 0x74320000u, 0x74320000u, 0x74321000u, 0x74321000u,
    0x75000000u, 0x75000000u, 0x75100000u, 0x75100000u, 0x75200000u, 0x75200000u, 0x75210000u, 0x75210000u,
    0x75300000u, 0x75300000u, 0x75310000u, 0x75310000u, 0x75320000u, 0x75320000u, 0x75321000u, 0x75321000u,
    0x75400000u, 0x75400000u, 0x75410000u, 0x75410000u, 0x75420000u, 0x75420000u, 0x75421000u, 0x75421000u,
    0x75430000u, 0x75430000u, 0x75431000u, 0x75431000u, 0x75432000u, 0x75432000u, 0x75432100u, 0x75432100u,
    0x76000000u, 0x76000000u, 0x76100000u, 0x76100000u, 0x76200000u, 0x76200000u, 0x76210000u, 0x76210000u,
    0x76300000u, 0x76300000u, 0x76310000u, 0x76310000u, 0x76320000u, 0x76320000u, 0x76321000u, 0x76321000u,
    0x76400000u, 0x76400000u, 0x76410000u, 0x76410000u, 0x76420000u, 0x76420000u, 0x76421000u, 0x76421000u,
    0x76430000u, 0x76430000u, 0x76431000u, 0x76431000u, 0x76432000u, 0x76432000u, 0x76432100u, 0x76432100u,
    0x76500000u, 0x76500000u, 0x76510000u, 0x76510000u, 0x76520000u, 0x76520000u, 0x76521000u, 0x76521000u,
    0x76530000u, 0x76530000u, 0x76531000u, 0x76531000u, 0x76532000u, 0x76532000u, 0x76532100u, 0x76532100u,
    0x76540000u, 0x76540000u, 0x76541000u, 0x76541000u, 0x76542000u, 0x76542000u, 0x76542100u, 0x76542100u,
    0x76543000u, 0x76543000u, 0x76543100u, 0x76543100u, 0x76543200u, 0x76543200u, 0x76543210u, 0x76543210u,
};

/* Per-symbol encoder parameters for the vector path, one 16-byte row so that eight
 * rows transpose into four vectors: xmax, magic, bias, cmpl | s1 << 16 | s2 << 24.
 * Division is Granlund-Montgomery's round-up method with a 33-bit magic,
 * q = (t + ((x - t) >> s1)) >> s2 with t = mulhi(x, magic): exact for all 32-bit x,
 * so it yields the same quotient (and stream) as the scalar 64-bit reciprocal. */
static void build_vsym(const uint16_t *freq, uint32_t (*vt)[4])
{
    uint32_t cum = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (f) {
            uint32_t l = 0, magic = 0, s1 = 0, s2 = 0;
            if (f > 1) {
                while ((1u << l) < f)
                    l++;
                magic = (uint32_t)((((uint64_t)1 << 32) * ((1u << l) - f)) / f + 1);
                s1 = 1;
                s2 = l - 1;
            }
            vt[s][0] = f << (32 - RANS_BITS);
            vt[s][1] = magic;
            vt[s][2] = cum;
            vt[s][3] = (RANS_M - f) | s1 << 16 | s2 << 24;
        }
        cum += f;
    }
}

static inline __attribute__((always_inline, target("avx2"))) uint8_t *
enc_avx2_n(const unsigned N, uint32_t *st, const uint32_t (*vt)[4], const uint8_t *src,
           size_t lo, size_t hi, uint8_t *p)
{
    __m256i X[RANS0_NMAX / 8];
    for (unsigned v = 0; v < N / 8; v++)
        X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
    const __m256i low16 = _mm256_set1_epi32(0xffff);
    const __m256i low8 = _mm256_set1_epi32(0xff);
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    const __m256i nib = _mm256_set1_epi32(15);
    for (size_t i0 = hi; i0 > lo;) {
        i0 -= N;
        for (unsigned v = N / 8; v-- > 0;) {
            const uint8_t *s = src + i0 + 8 * v;
#define ROW(k) _mm_loadu_si128((const __m128i *)(const void *)vt[s[k]])
            __m256i y0 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW(0)), ROW(4), 1);
            __m256i y1 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW(1)), ROW(5), 1);
            __m256i y2 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW(2)), ROW(6), 1);
            __m256i y3 = _mm256_inserti128_si256(_mm256_castsi128_si256(ROW(3)), ROW(7), 1);
#undef ROW
            __m256i t0 = _mm256_unpacklo_epi32(y0, y1), t1 = _mm256_unpackhi_epi32(y0, y1);
            __m256i t2 = _mm256_unpacklo_epi32(y2, y3), t3 = _mm256_unpackhi_epi32(y2, y3);
            __m256i xmax = _mm256_unpacklo_epi64(t0, t2), mag = _mm256_unpackhi_epi64(t0, t2);
            __m256i bias = _mm256_unpacklo_epi64(t1, t3), pk = _mm256_unpackhi_epi64(t1, t3);
            __m256i x = X[v];
            __m256i ge = _mm256_cmpeq_epi32(_mm256_max_epu32(x, xmax), x);
            int m = _mm256_movemask_ps(_mm256_castsi256_ps(ge));
            __m256i idx = _mm256_and_si256(
                _mm256_srlv_epi32(_mm256_set1_epi32((int)enc_lut[m]), shifts), nib);
            __m256i wv = _mm256_permutevar8x32_epi32(_mm256_and_si256(x, low16), idx);
            __m128i w16 = _mm_packus_epi32(_mm256_castsi256_si128(wv),
                                           _mm256_extracti128_si256(wv, 1));
            _mm_storeu_si128((__m128i *)(void *)(p - 16), w16);
            p -= 2 * __builtin_popcount((unsigned)m);
            x = _mm256_blendv_epi8(x, _mm256_srli_epi32(x, 16), ge);
            __m256i pe = _mm256_mul_epu32(x, mag);
            __m256i po = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), _mm256_srli_epi64(mag, 32));
            __m256i t = _mm256_blend_epi32(_mm256_srli_epi64(pe, 32), po, 0xAA);
            __m256i s1 = _mm256_and_si256(_mm256_srli_epi32(pk, 16), low8);
            __m256i s2 = _mm256_srli_epi32(pk, 24);
            __m256i q = _mm256_srlv_epi32(
                _mm256_add_epi32(t, _mm256_srlv_epi32(_mm256_sub_epi32(x, t), s1)), s2);
            __m256i cm = _mm256_and_si256(pk, low16);
            X[v] = _mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_mullo_epi32(q, cm));
        }
    }
    for (unsigned v = 0; v < N / 8; v++)
        _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    return p;
}

__attribute__((target("avx2"))) static uint8_t *
enc_avx2_32(uint32_t *st, const uint32_t (*vt)[4], const uint8_t *src, size_t lo, size_t hi,
            uint8_t *p)
{
    return enc_avx2_n(32, st, vt, src, lo, hi, p);
}

__attribute__((target("avx2"))) static uint8_t *
enc_avx2_64(uint32_t *st, const uint32_t (*vt)[4], const uint8_t *src, size_t lo, size_t hi,
            uint8_t *p)
{
    return enc_avx2_n(64, st, vt, src, lo, hi, p);
}
#endif

size_t rans0_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap,
                    int level)
{
    if (n == 0)
        return 0;
    int sh = rans0_base_shift(level, n);
    size_t B = (size_t)1 << sh;
    size_t nb = (n + B - 1) >> sh;
    /* Layout of bhist: nb block histograms, then per segment its first block and a
     * normalised table (reusing the block's slot as uint16[256]). */
    if (ent_grow((void **)&c->bhist, &c->bhist_cap, nb * (256 * sizeof(uint32_t) + sizeof(size_t))))
        return 0;
    uint32_t *bh = c->bhist;
    size_t *segstart = (size_t *)(void *)(bh + nb * 256);
    if (c->bhist_shift != sh || c->bhist_src != src || c->bhist_n != n) {
        for (size_t b = 0; b < nb; b++) {
            size_t s0 = b << sh, len = (b + 1 == nb) ? n - s0 : B;
            ent_histogram(src + s0, len, bh + b * 256);
        }
    }
    c->bhist_src = NULL; /* consumed: the slots are reused for segment tables below */
    /* Greedy merge, left to right. */
    uint32_t cur[256];
    memcpy(cur, bh, sizeof cur);
    uint64_t curtot = nb == 1 ? n : B;
    double curcost = seg_cost(cur, curtot), est = 0;
    size_t nseg = 0;
    segstart[nseg++] = 0;
    for (size_t b = 1; b < nb; b++) {
        const uint32_t *h = bh + b * 256;
        uint64_t tot = (b + 1 == nb) ? n - (b << sh) : B;
        uint32_t m[256];
        for (int s = 0; s < 256; s++)
            m[s] = cur[s] + h[s];
        double cm = seg_cost(m, curtot + tot);
        double ch = seg_cost(h, tot);
        if (cm <= curcost + ch) {
            memcpy(cur, m, sizeof cur);
            curtot += tot;
            curcost = cm;
        } else {
            /* Segment closed: park its summed counts in its first block's slot. */
            memcpy(bh + segstart[nseg - 1] * 256, cur, sizeof cur);
            est += curcost;
            segstart[nseg++] = b;
            memcpy(cur, h, sizeof cur);
            curtot = tot;
            curcost = ch;
        }
    }
    memcpy(bh + segstart[nseg - 1] * 256, cur, sizeof cur);
    est += curcost + 2 + 4 * (n >= RANS0_BIG_PLANE ? 64 : 32);
    if (est >= (double)n || cap < 1)
        return 0;

    /* Header: tables are written now; the stream goes to scratch and is copied after. */
    size_t hdr = 0;
    size_t lim = cap < n ? cap : n; /* anything not below n loses to STORED anyway */
    if (lim < 2)
        return 0;
    dst[hdr++] = (uint8_t)sh;
    hdr++; /* lane count, set below */
    for (size_t k = 0; k < nseg; k++) {
        size_t b0 = segstart[k], b1 = k + 1 < nseg ? segstart[k + 1] : nb;
        uint16_t *f = (uint16_t *)(void *)(bh + b0 * 256);
        uint16_t tmp[256];
        uint8_t tb[8 + 2 * 256];
        rans_normalize(bh + b0 * 256, tmp);
        memcpy(f, tmp, sizeof tmp);
        size_t tl = leb_write(tb, b1 - b0);
        tl += rans_table_write(f, tb + tl);
        if (hdr + tl >= lim)
            return 0;
        memcpy(dst + hdr, tb, tl);
        hdr += tl;
    }
    if (hdr >= n)
        return 0;
    unsigned N = n >= RANS0_BIG_PLANE ? 64 : 32, NM = N - 1;
    dst[1] = N == 64 ? 6 : 5;

    /* Worst case 12 bits per symbol plus the states; 2n is loose and simple. */
    size_t scap = 2 * n + 4 * RANS0_NMAX + 64;
    uint8_t *sbuf = ent_scratch(c, scap);
    if (!sbuf)
        return 0;
    uint8_t *p = sbuf + scap;
    uint32_t *st = c->st;
    for (unsigned j = 0; j < N; j++)
        st[j] = RANS_L;
    rans_esym *E = c->etab;
#ifdef RANS0_HAVE_AVX2
    int simd = ent_simd_level();
#endif
    for (size_t k = nseg; k-- > 0;) {
        size_t b0 = segstart[k], b1 = k + 1 < nseg ? segstart[k + 1] : nb;
        size_t s0 = b0 << sh, s1 = b1 << sh;
        if (s1 > n)
            s1 = n;
        const uint16_t *fq = (const uint16_t *)(const void *)(bh + b0 * 256);
        rans_build_esym(fq, E);
        size_t vlo = s0;
#ifdef RANS0_HAVE_AVX2
        if (simd >= ENT_SIMD_AVX2)
            vlo = s0 + (s1 - s0) / N * N; /* segments start on a round */
#endif
        for (size_t i = s1; i-- > vlo;) {
            const rans_esym *e = &E[src[i]];
            uint32_t x = st[i & NM];
            uint32_t fl = x >= e->xmax;
            /* Unconditional store, conditional advance: no mispredicted branch. */
            ent_put16(p - 2, (uint16_t)x);
            p -= 2 * fl;
            x >>= fl << 4;
            uint32_t q = (uint32_t)ent_mulhi64_32(x, e->rcp);
            st[i & NM] = x + e->bias + q * e->cmpl;
        }
#ifdef RANS0_HAVE_AVX2
        if (vlo > s0) {
            uint8_t *q = NULL;
#ifdef ENT_HAVE_AVX512
            if (simd >= ENT_SIMD_AVX512)
                q = rans0_enc_avx512(c, N, fq, src, s0, vlo, p);
#endif
            if (!q) { /* no AVX-512 */
                build_vsym(fq, c->vtab);
                q = N == 64 ? enc_avx2_64(st, (const uint32_t(*)[4])c->vtab, src, s0, vlo, p)
                            : enc_avx2_32(st, (const uint32_t(*)[4])c->vtab, src, s0, vlo, p);
            }
            p = q;
        }
#endif
    }
    for (unsigned j = N; j-- > 0;) {
        p -= 4;
        p[0] = (uint8_t)st[j];
        p[1] = (uint8_t)(st[j] >> 8);
        p[2] = (uint8_t)(st[j] >> 16);
        p[3] = (uint8_t)(st[j] >> 24);
    }
    size_t slen = (size_t)(sbuf + scap - p);
    if (hdr + slen >= n || hdr + slen > cap)
        return 0;
    memcpy(dst + hdr, p, slen);
    return hdr + slen;
}

/* One decode step of state j; refills from p without a bounds check (callers
 * guarantee 2 bytes per remaining state in the round). */
#define DEC_STEP(j)                                                                  \
    do {                                                                             \
        uint32_t x_ = st[j];                                                         \
        uint32_t e_ = dt[x_ & (RANS_M - 1)];                                         \
        out[j] = (uint8_t)e_;                                                        \
        x_ = (e_ >> 20) * (x_ >> RANS_BITS) + ((e_ >> 8) & (RANS_M - 1));            \
        uint32_t nd_ = x_ < RANS_L;                                                  \
        uint32_t w_ = (uint32_t)p[0] | ((uint32_t)p[1] << 8);                        \
        x_ = (x_ << (nd_ << 4)) | (w_ & (0u - nd_));                                 \
        p += 2 * nd_;                                                                \
        st[j] = x_;                                                                  \
    } while (0)

/* Decodes whole rounds of N symbols (first symbol on state 0) while a round's worst
 * case of input remains; returns the symbols done. */
static size_t dec_scalar(unsigned N, uint32_t *st, const uint32_t *dt, const uint8_t **pp,
                         const uint8_t *end, uint8_t *out, size_t len)
{
    const uint8_t *p = *pp;
    size_t i = 0;
    for (; i + N <= len && end - p >= 2 * (ptrdiff_t)N; i += N, out += N) {
        for (unsigned j = 0; j < N; j++)
            DEC_STEP(j);
    }
    *pp = p;
    return i;
}

#ifdef RANS0_HAVE_AVX2

/* Decoder: row m lists, for each lane i that refills (bit i of m), how many refilling
 * lanes come before it: the index of its word among those read. Built by the
 * preprocessor so the table is constant data (no init, no race). */
#define PB_(m, i) (((m) >> (i)) & 1)
#define PC_(m, i)                                                                     \
    ((i > 0 ? PB_(m, 0) : 0) + (i > 1 ? PB_(m, 1) : 0) + (i > 2 ? PB_(m, 2) : 0) +    \
     (i > 3 ? PB_(m, 3) : 0) + (i > 4 ? PB_(m, 4) : 0) + (i > 5 ? PB_(m, 5) : 0) +    \
     (i > 6 ? PB_(m, 6) : 0))
#define PR_(m) {PC_(m, 0), PC_(m, 1), PC_(m, 2), PC_(m, 3), PC_(m, 4), PC_(m, 5), PC_(m, 6), PC_(m, 7)}
#define PR4_(m) PR_(m), PR_(m + 1), PR_(m + 2), PR_(m + 3)
#define PR16_(m) PR4_(m), PR4_(m + 4), PR4_(m + 8), PR4_(m + 12)
#define PR64_(m) PR16_(m), PR16_(m + 16), PR16_(m + 32), PR16_(m + 48)
static const uint32_t dec_perm[256][8] = {PR64_(0), PR64_(64), PR64_(128), PR64_(192)};

/* The table lookup is done with scalar loads, not vpgatherdd: gathers measured 2x
 * slower on the AMD machine this was tuned on, and the lookup is on the critical
 * path of every round. */
static inline __attribute__((always_inline, target("avx2"))) size_t
dec_avx2_n(const unsigned N, uint32_t *st, const uint32_t *dt, const uint8_t **pp,
           const uint8_t *end, uint8_t *out, size_t len)
{
    const uint8_t *p = *pp;
    __m256i X[RANS0_NMAX / 8];
    for (unsigned v = 0; v < N / 8; v++)
        X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
    const __m256i mask12 = _mm256_set1_epi32(RANS_M - 1);
    const __m256i low8 = _mm256_set1_epi32(0xff);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i ord = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    size_t i = 0;
    for (; i + N <= len && end - p >= 2 * (ptrdiff_t)N; i += N) {
        __m256i S[RANS0_NMAX / 8];
        for (unsigned v = 0; v < N / 8; v++) {
            __m256i x = X[v];
            uint32_t ix[8];
            _mm256_storeu_si256((__m256i *)(void *)ix, _mm256_and_si256(x, mask12));
            __m256i e = _mm256_setr_epi32((int)dt[ix[0]], (int)dt[ix[1]], (int)dt[ix[2]],
                                          (int)dt[ix[3]], (int)dt[ix[4]], (int)dt[ix[5]],
                                          (int)dt[ix[6]], (int)dt[ix[7]]);
            S[v] = _mm256_and_si256(e, low8);
            __m256i f = _mm256_srli_epi32(e, 20);
            __m256i b = _mm256_and_si256(_mm256_srli_epi32(e, 8), mask12);
            x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, RANS_BITS)), b);
            __m256i nd = _mm256_cmpeq_epi32(_mm256_srli_epi32(x, 16), zero);
            int m = _mm256_movemask_ps(_mm256_castsi256_ps(nd));
            /* Refilling lanes take the next words in lane order: expand them. */
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
            w = _mm256_permutevar8x32_epi32(
                w, _mm256_loadu_si256((const __m256i *)(const void *)dec_perm[m]));
            __m256i xs = _mm256_or_si256(_mm256_slli_epi32(x, 16), w);
            X[v] = _mm256_blendv_epi8(x, xs, nd);
            p += 2 * __builtin_popcount((unsigned)m);
        }
        for (unsigned v = 0; v < N / 8; v += 4) {
            __m256i a = _mm256_packus_epi32(S[v], S[v + 1]);
            __m256i b = _mm256_packus_epi32(S[v + 2], S[v + 3]);
            __m256i cc = _mm256_packus_epi16(a, b);
            cc = _mm256_permutevar8x32_epi32(cc, ord);
            _mm256_storeu_si256((__m256i *)(void *)(out + i + 8 * v), cc);
        }
    }
    for (unsigned v = 0; v < N / 8; v++)
        _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    *pp = p;
    return i;
}

__attribute__((target("avx2"))) static size_t
dec_avx2_32(uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end,
            uint8_t *out, size_t len)
{
    return dec_avx2_n(32, st, dt, pp, end, out, len);
}

__attribute__((target("avx2"))) static size_t
dec_avx2_64(uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end,
            uint8_t *out, size_t len)
{
    return dec_avx2_n(64, st, dt, pp, end, out, len);
}
#endif

int rans0_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    if (n == 0 || srclen < 2)
        return -1;
    const uint8_t *p = src, *end = src + srclen;
    int sh = *p++;
    if (sh < 10 || sh > 24)
        return -1;
    int lg = *p++;
    if (lg != 5 && lg != 6)
        return -1;
    unsigned N = 1u << lg;
    size_t nb = ((n - 1) >> sh) + 1;
    /* Pass 1: validate the segment list and find where the stream starts. */
    const uint8_t *tabs = p;
    size_t covered = 0;
    uint16_t f[256];
    while (covered < nb) {
        size_t k;
        if (leb_read(&p, end, &k) || k == 0 || k > nb - covered)
            return -1;
        if (rans_table_read(&p, end, f))
            return -1;
        covered += k;
    }
    if ((size_t)(end - p) < 4 * (size_t)N)
        return -1;
    uint32_t *st = c->st;
    for (unsigned j = 0; j < N; j++) {
        st[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                (uint32_t)p[3] << 24;
        if (st[j] < RANS_L)
            return -1;
        p += 4;
    }
#ifdef RANS0_HAVE_AVX2
    int use_avx2 = ent_use_avx2();
#endif
    const uint8_t *tp = tabs;
    size_t b = 0;
    uint32_t *dt = c->dtab;
    while (b < nb) {
        size_t k = 0;
        if (leb_read(&tp, end, &k) || rans_table_read(&tp, end, f)) /* checked in pass 1 */
            return -1;
        rans_build_dtab(f, dt);
        size_t s0 = b << sh, s1 = (b + k) << sh;
        if (s1 > n || b + k == nb)
            s1 = n;
        b += k;
        size_t i = s0, done;
#ifdef RANS0_HAVE_AVX2
        if (use_avx2)
            done = N == 64 ? dec_avx2_64(st, dt, &p, end, dst + i, s1 - i)
                           : dec_avx2_32(st, dt, &p, end, dst + i, s1 - i);
        else
#endif
            done = dec_scalar(N, st, dt, &p, end, dst + i, s1 - i);
        i += done;
        for (; i < s1; i++) {
            /* Tail: same step with the input bound checked per refill. */
            unsigned j = (unsigned)(i & (N - 1));
            uint32_t x = st[j];
            uint32_t e = dt[x & (RANS_M - 1)];
            dst[i] = (uint8_t)e;
            x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
            if (x < RANS_L) {
                if (end - p < 2)
                    return -1;
                x = (x << 16) | (uint32_t)p[0] | ((uint32_t)p[1] << 8);
                p += 2;
            }
            st[j] = x;
        }
    }
    if (p != end)
        return -1;
    for (unsigned j = 0; j < N; j++)
        if (st[j] != RANS_L)
            return -1;
    return 0;
}
