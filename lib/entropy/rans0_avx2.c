/* rans0_avx2.c — the AVX2 encode and decode loops of order-0 rANS (rans0.c), eight
 * states per vector. They emit and read the same 16-bit words in the same order as the
 * scalar loops, so every combination of encoder and decoder paths decodes; rans0.c
 * calls them when cpu_level() allows AVX2 (target attributes: no -mavx2 needed).
 */
#include "rans_avx2.h"

#ifdef ENT_HAVE_X86

/* Encoder: for a mask of lanes that flush a word, nibble 8-c+k (c = lanes flushing)
 * = the k-th flushing lane, so their words land at the top of 8 in lane order. */
const uint32_t rans_enc_lut[256] = {
    0x00000000u, 0x00000000u, 0x10000000u, 0x10000000u, 0x20000000u, 0x20000000u, 0x21000000u, 0x21000000u, 0x30000000u,
    0x30000000u, 0x31000000u, 0x31000000u, 0x32000000u, 0x32000000u, 0x32100000u, 0x32100000u, 0x40000000u, 0x40000000u,
    0x41000000u, 0x41000000u, 0x42000000u, 0x42000000u, 0x42100000u, 0x42100000u, 0x43000000u, 0x43000000u, 0x43100000u,
    0x43100000u, 0x43200000u, 0x43200000u, 0x43210000u, 0x43210000u, 0x50000000u, 0x50000000u, 0x51000000u, 0x51000000u,
    0x52000000u, 0x52000000u, 0x52100000u, 0x52100000u, 0x53000000u, 0x53000000u, 0x53100000u, 0x53100000u, 0x53200000u,
    0x53200000u, 0x53210000u, 0x53210000u, 0x54000000u, 0x54000000u, 0x54100000u, 0x54100000u, 0x54200000u, 0x54200000u,
    0x54210000u, 0x54210000u, 0x54300000u, 0x54300000u, 0x54310000u, 0x54310000u, 0x54320000u, 0x54320000u, 0x54321000u,
    0x54321000u, 0x60000000u, 0x60000000u, 0x61000000u, 0x61000000u, 0x62000000u, 0x62000000u, 0x62100000u, 0x62100000u,
    0x63000000u, 0x63000000u, 0x63100000u, 0x63100000u, 0x63200000u, 0x63200000u, 0x63210000u, 0x63210000u, 0x64000000u,
    0x64000000u, 0x64100000u, 0x64100000u, 0x64200000u, 0x64200000u, 0x64210000u, 0x64210000u, 0x64300000u, 0x64300000u,
    0x64310000u, 0x64310000u, 0x64320000u, 0x64320000u, 0x64321000u, 0x64321000u, 0x65000000u, 0x65000000u, 0x65100000u,
    0x65100000u, 0x65200000u, 0x65200000u, 0x65210000u, 0x65210000u, 0x65300000u, 0x65300000u, 0x65310000u, 0x65310000u,
    0x65320000u, 0x65320000u, 0x65321000u, 0x65321000u, 0x65400000u, 0x65400000u, 0x65410000u, 0x65410000u, 0x65420000u,
    0x65420000u, 0x65421000u, 0x65421000u, 0x65430000u, 0x65430000u, 0x65431000u, 0x65431000u, 0x65432000u, 0x65432000u,
    0x65432100u, 0x65432100u, 0x70000000u, 0x70000000u, 0x71000000u, 0x71000000u, 0x72000000u, 0x72000000u, 0x72100000u,
    0x72100000u, 0x73000000u, 0x73000000u, 0x73100000u, 0x73100000u, 0x73200000u, 0x73200000u, 0x73210000u, 0x73210000u,
    0x74000000u, 0x74000000u, 0x74100000u, 0x74100000u, 0x74200000u, 0x74200000u, 0x74210000u, 0x74210000u, 0x74300000u,
    0x74300000u, 0x74310000u, 0x74310000u, 0x74320000u, 0x74320000u, 0x74321000u, 0x74321000u, 0x75000000u, 0x75000000u,
    0x75100000u, 0x75100000u, 0x75200000u, 0x75200000u, 0x75210000u, 0x75210000u, 0x75300000u, 0x75300000u, 0x75310000u,
    0x75310000u, 0x75320000u, 0x75320000u, 0x75321000u, 0x75321000u, 0x75400000u, 0x75400000u, 0x75410000u, 0x75410000u,
    0x75420000u, 0x75420000u, 0x75421000u, 0x75421000u, 0x75430000u, 0x75430000u, 0x75431000u, 0x75431000u, 0x75432000u,
    0x75432000u, 0x75432100u, 0x75432100u, 0x76000000u, 0x76000000u, 0x76100000u, 0x76100000u, 0x76200000u, 0x76200000u,
    0x76210000u, 0x76210000u, 0x76300000u, 0x76300000u, 0x76310000u, 0x76310000u, 0x76320000u, 0x76320000u, 0x76321000u,
    0x76321000u, 0x76400000u, 0x76400000u, 0x76410000u, 0x76410000u, 0x76420000u, 0x76420000u, 0x76421000u, 0x76421000u,
    0x76430000u, 0x76430000u, 0x76431000u, 0x76431000u, 0x76432000u, 0x76432000u, 0x76432100u, 0x76432100u, 0x76500000u,
    0x76500000u, 0x76510000u, 0x76510000u, 0x76520000u, 0x76520000u, 0x76521000u, 0x76521000u, 0x76530000u, 0x76530000u,
    0x76531000u, 0x76531000u, 0x76532000u, 0x76532000u, 0x76532100u, 0x76532100u, 0x76540000u, 0x76540000u, 0x76541000u,
    0x76541000u, 0x76542000u, 0x76542000u, 0x76542100u, 0x76542100u, 0x76543000u, 0x76543000u, 0x76543100u, 0x76543100u,
    0x76543200u, 0x76543200u, 0x76543210u, 0x76543210u,
};

/* Per-symbol encoder parameters for the vector path, one 16-byte row so that eight
 * rows transpose into four vectors: xmax, magic, bias, cmpl | s1 << 16 | s2 << 24.
 * Division is Granlund-Montgomery's round-up method with a 33-bit magic,
 * q = (t + ((x - t) >> s1)) >> s2 with t = mulhi(x, magic): exact for all 32-bit x,
 * so it yields the same quotient (and stream) as the scalar 64-bit reciprocal. */
void rans_build_vrows(const uint16_t *freq, uint32_t (*vt)[4])
{
    uint32_t cum = 0;
    for (int s = 0; s < 256; s++) {
        uint32_t f = freq[s];
        if (f) {
            uint32_t l = 0, magic = 0, s1 = 0, s2 = 0;
            if (f > 1) {
                while ((1u << l) < f) l++;
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

static inline __attribute__((always_inline, target("avx2"))) uint8_t *enc_avx2_n(const unsigned N, uint32_t *st,
                                                                                 const uint32_t (*vt)[4],
                                                                                 const uint8_t *src, size_t lo,
                                                                                 size_t hi, uint8_t *p)
{
    __m256i X[RANS0_NMAX / 8];
    for (unsigned v = 0; v < N / 8; v++) X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
    for (size_t i0 = hi; i0 > lo;) {
        i0 -= N;
        for (unsigned v = N / 8; v-- > 0;) {
            const uint8_t *s = src + i0 + 8 * v;
            const uint32_t *const rows[8] = {vt[s[0]], vt[s[1]], vt[s[2]], vt[s[3]],
                                             vt[s[4]], vt[s[5]], vt[s[6]], vt[s[7]]};
            X[v] = rans_enc8_avx2(X[v], rows, &p);
        }
    }
    for (unsigned v = 0; v < N / 8; v++) _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    return p;
}

__attribute__((target("avx2"))) static uint8_t *enc_avx2_32(uint32_t *st, const uint32_t (*vt)[4], const uint8_t *src,
                                                            size_t lo, size_t hi, uint8_t *p)
{
    return enc_avx2_n(32, st, vt, src, lo, hi, p);
}

__attribute__((target("avx2"))) static uint8_t *enc_avx2_64(uint32_t *st, const uint32_t (*vt)[4], const uint8_t *src,
                                                            size_t lo, size_t hi, uint8_t *p)
{
    return enc_avx2_n(64, st, vt, src, lo, hi, p);
}

uint8_t *rans0_enc_avx2(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src, size_t lo, size_t hi,
                        uint8_t *p)
{
    rans_build_vrows(freq, c->vtab);
    return N == 64 ? enc_avx2_64(c->st, (const uint32_t(*)[4])c->vtab, src, lo, hi, p)
                   : enc_avx2_32(c->st, (const uint32_t(*)[4])c->vtab, src, lo, hi, p);
}

/* Decoder: row m lists, for each lane i that refills (bit i of m), how many refilling
 * lanes come before it: the index of its word among those read. Built by the
 * preprocessor so the table is constant data (no init, no race). */
#define PB_(m, i) (((m) >> (i)) & 1)
#define PC_(m, i)                                                                                            \
    ((i > 0 ? PB_(m, 0) : 0) + (i > 1 ? PB_(m, 1) : 0) + (i > 2 ? PB_(m, 2) : 0) + (i > 3 ? PB_(m, 3) : 0) + \
     (i > 4 ? PB_(m, 4) : 0) + (i > 5 ? PB_(m, 5) : 0) + (i > 6 ? PB_(m, 6) : 0))
#define PR_(m) {PC_(m, 0), PC_(m, 1), PC_(m, 2), PC_(m, 3), PC_(m, 4), PC_(m, 5), PC_(m, 6), PC_(m, 7)}
#define PR4_(m) PR_(m), PR_(m + 1), PR_(m + 2), PR_(m + 3)
#define PR16_(m) PR4_(m), PR4_(m + 4), PR4_(m + 8), PR4_(m + 12)
#define PR64_(m) PR16_(m), PR16_(m + 16), PR16_(m + 32), PR16_(m + 48)
static const uint32_t dec_perm[256][8] = {PR64_(0), PR64_(64), PR64_(128), PR64_(192)};

/* The table lookup is done with scalar loads, not vpgatherdd: gathers measured 2x
 * slower on the AMD machine this was tuned on, and the lookup is on the critical
 * path of every round. */
static inline __attribute__((always_inline, target("avx2"))) size_t dec_avx2_n(const unsigned N, uint32_t *st,
                                                                               const uint32_t *dt, const uint8_t **pp,
                                                                               const uint8_t *end, uint8_t *out,
                                                                               size_t len)
{
    const uint8_t *p = *pp;
    __m256i X[RANS0_NMAX / 8];
    for (unsigned v = 0; v < N / 8; v++) X[v] = _mm256_loadu_si256((const __m256i *)(const void *)(st + 8 * v));
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
            __m256i e = _mm256_setr_epi32((int)dt[ix[0]], (int)dt[ix[1]], (int)dt[ix[2]], (int)dt[ix[3]],
                                          (int)dt[ix[4]], (int)dt[ix[5]], (int)dt[ix[6]], (int)dt[ix[7]]);
            S[v] = _mm256_and_si256(e, low8);
            __m256i f = _mm256_srli_epi32(e, 20);
            __m256i b = _mm256_and_si256(_mm256_srli_epi32(e, 8), mask12);
            x = _mm256_add_epi32(_mm256_mullo_epi32(f, _mm256_srli_epi32(x, RANS_BITS)), b);
            __m256i nd = _mm256_cmpeq_epi32(_mm256_srli_epi32(x, 16), zero);
            int m = _mm256_movemask_ps(_mm256_castsi256_ps(nd));
            /* Refilling lanes take the next words in lane order: expand them. */
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
            w = _mm256_permutevar8x32_epi32(w, _mm256_loadu_si256((const __m256i *)(const void *)dec_perm[m]));
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
    for (unsigned v = 0; v < N / 8; v++) _mm256_storeu_si256((__m256i *)(void *)(st + 8 * v), X[v]);
    *pp = p;
    return i;
}

__attribute__((target("avx2"))) static size_t dec_avx2_32(uint32_t *st, const uint32_t *dt, const uint8_t **pp,
                                                          const uint8_t *end, uint8_t *out, size_t len)
{
    return dec_avx2_n(32, st, dt, pp, end, out, len);
}

__attribute__((target("avx2"))) static size_t dec_avx2_64(uint32_t *st, const uint32_t *dt, const uint8_t **pp,
                                                          const uint8_t *end, uint8_t *out, size_t len)
{
    return dec_avx2_n(64, st, dt, pp, end, out, len);
}

size_t rans0_dec_avx2(unsigned N, uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end,
                      uint8_t *out, size_t len)
{
    return N == 64 ? dec_avx2_64(st, dt, pp, end, out, len) : dec_avx2_32(st, dt, pp, end, out, len);
}
#endif
