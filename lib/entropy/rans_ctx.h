/* rans_ctx.h — rANS with a small context (codec 8, rans_ctx.c; vector encoders and
 * decoders in rans_ctx_avx2.c and rans_ctx_avx512.c). Internal to the entropy stage: the registry
 * (codecs.c) holds its row. Layout of the states and coded bytes: doc/entropy.md. */
#ifndef CKPZ_RANS_CTX_H
#define CKPZ_RANS_CTX_H

#include "ent_internal.h"

#define RC_KMAX 16u /* contexts: at most 16 tables */
#define RC_WIDE 32u /* buckets the estimate counts, to place a window of RC_KMAX */
#define RC_G 4u     /* groups: one contiguous part of the plane each */
#define RC_W 16u    /* lanes (states) of a group; the context is the byte RC_W back */
#define RC_N (RC_G * RC_W)
/* Bytes of each group's part (a multiple of RC_W); group RC_G-1 also owns the rest. */
#define RC_PART(n) ((n) / RC_N * RC_W)

/* The estimate's RC_SETS sets of counters, each RC_ROW (padded apart so that equal
 * counters of two sets do not share their low 12 address bits). */
#define RC_SETS 4
#define RC_ROW (RC_WIDE * 256 + 16)

/* The sampled estimates count in stages inside every RC_STEP bytes of the plane: the
 * first RC_SAMPLE bytes (rc_sample, rm_sample: the same bytes for both codecs, so their
 * contexts are compared on one sample), then up to 4 KiB, then the rest. A context coder
 * is counted past the first stage only where its sample's estimate is at most
 * RC_GAIN_MIN times the plane's order-0 entropy. */
#define RC_STEP 16384u
#define RC_SAMPLE 1024u
#define RC_GAIN_MIN 0.995

/* The state of codecs 8 and 10 (rans_ctxm.h): tables, the estimate's counts and its
 * choice, kept for an encode of the same plane. */
typedef struct {
    uint32_t dtab[RC_KMAX * RANS_M]; /* decode tables, one per context */
    rans_esym etab[RC_KMAX * 256];   /* encode tables */
    uint32_t wide[RC_SETS * RC_ROW]; /* (context, byte) by 32 buckets around the mode */
    uint32_t sum[RC_WIDE * 256];     /* the sets summed (rc_sum_sets) */
    uint32_t head[256];              /* the first RC_W bytes of every group (their context: m) */
    uint16_t freq[RC_KMAX][256];     /* the chosen window's tables */
    uint64_t zt[RC_KMAX * 256];      /* AVX-512 encoder fields (rans_ctx_avx512.c) */
    uint32_t vt[RC_KMAX * 256][4];   /* AVX2 encoder rows (rans_ctx_avx2.c) */
    const uint8_t *src;              /* the plane the estimate chose m, K and the tables for */
    size_t n;
    unsigned plane; /* c->plane of that estimate */
    uint8_t m, K;
    unsigned mode;     /* the plane's most common value, as the estimate's buckets are placed */
    int lo, hi;        /* its values' range */
    size_t k;          /* bytes a sampled estimate counted so far (0: none under way) */
    uint32_t off[256]; /* bucket of a context value times 256, RC_WIDE buckets around mode */
} rc_tabs;

/* The bucket of a context v in the window of K from lo, clamped at both ends. */
static inline unsigned rc_bucket(int v, int lo, unsigned K)
{
    int d = v - lo;
    return d < 0 ? 0 : (unsigned)d >= K ? K - 1 : (unsigned)d;
}

/* off[v] = bucket of a context v, times stride: one load instead of a clamp whose
 * branches the data mispredicts. */
static inline void rc_bucket_table(unsigned m, unsigned K, uint32_t stride, uint32_t *off)
{
    int lo = (int)m - (int)(K / 2);
    for (unsigned v = 0; v < 256; v++) off[v] = rc_bucket((int)v, lo, K) * stride;
}

/* Shared by codecs 8 and 10 (rans_ctx.c). rc_range: the plane's mode and its values
 * [lo, hi] (the counts are 0 outside). rc_sum_sets: S->wide's sets summed into S->sum,
 * values [lo, hi]. rc_merge_win: counts of the window of K contexts around m merged
 * from S->sum (with head, the group heads in m's own bucket). rc_est_win: the coded size
 * of merged counts, scaled by scale. rc_choose: the best window (S->m, S->K) for the
 * counts so far, its estimate in *best. rc_tables: the counts complete, the window
 * chosen and the tables normalised for the encoder; returns the coded size. */
void rc_range(const uint32_t *hist, unsigned *mode, int *lo, int *hi);
void rc_sum_sets(rc_tabs *S, int lo, int hi);
void rc_merge_win(const rc_tabs *S, unsigned mode, int m, unsigned K, int lo, int hi, int head, uint32_t *mc);
double rc_est_win(const uint32_t *mc, unsigned K, double scale, int lo, int hi);
/* The estimate of the counts so far (their sets summed) with the window of RC_KMAX
 * contexts around the mode, scaled to a plane of n bytes: the sampled stage's figure. */
double rc_est_sampled(rc_tabs *S, size_t n);
void rc_choose(rc_tabs *S, unsigned mode, double scale, int lo, int hi, double *best);
double rc_tables(ent_ctx *c, rc_tabs *S, const uint8_t *src, size_t n, unsigned mode, int lo, int hi);
/* The encoder's start: estimates the plane by est unless the last estimate was of it,
 * writes m, K and the tables to dst and builds the encode tables for the level vec
 * (cpu_level). Returns the header's length, 0 where it does not fit or the codec does
 * not apply. */
size_t rc_enc_head(ent_ctx *c, rc_tabs *S, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int vec,
                   double (*est)(ent_ctx *, const uint8_t *, size_t, const uint32_t *, int));
/* The decoder's start: reads m, K and the tables from *pp (building S->dtab) and the
 * RC_N states into st. Returns K, or 0 on bad input. */
unsigned rc_dec_head(rc_tabs *S, const uint8_t **pp, const uint8_t *end, uint32_t *st, unsigned *m);

/* Registry row functions (ent_codec_desc). The estimate leaves its choice of m and K
 * for an encode of the same plane just after it. */
/* The sampled estimate's stages, apart (rc_estimate sampled is rc_sample, its gain
 * test against RC_GAIN_MIN, then rc_rest): rc_sample counts the pairs of the first
 * stage of a plane of 64 KiB or more and returns their estimate (K = 16 around the mode)
 * scaled to the plane, 1e300 where it does not apply; rc_rest goes on from there as the
 * estimate does (1e300 where its second stage cannot beat c->est_bar). */
double rc_sample(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist);
double rc_rest(ent_ctx *c, const uint8_t *src, size_t n);
double rc_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled);
size_t rc_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level);
int rc_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);
void rc_free(ent_ctx *c);

#ifdef ENT_HAVE_X86
/* Decode whole rounds (RC_N symbols: 16 of each group, in group order) from round 0
 * while a round's worst case of words (2·RC_N bytes) remains, with the context tables
 * dt (K × 4096 entries) around m; the part of each group is P bytes at dst + g·P.
 * Returns the rounds done; st and *pp advanced as the scalar loop would. */
size_t rc_dec_avx2(uint32_t *st, const uint32_t *dt, unsigned m, unsigned K, const uint8_t **pp, const uint8_t *end,
                   uint8_t *dst, size_t P);
size_t rc_dec_avx512(uint32_t *st, const uint32_t *dt, unsigned m, unsigned K, const uint8_t **pp, const uint8_t *end,
                     uint8_t *dst, size_t P);
/* The AVX2 decoders' refill permute (rans_ctx_avx2.c), shared by codec 10: row k, for
 * each lane i that refills (bit i of k), how many refilling lanes come before it. */
extern const uint32_t rc_perm[256][8];
/* rans_ctx_avx512.c, the encoder: fills entry t (its K × 256 slots) of the field array
 * zt (two 32-bit fields a slot) from table t's frequencies, then codes all whole rounds (the tail of group
 * RC_G-1 coded before, by the scalar loop) with tables zt, continuing st and writing
 * words down from p; returns the new p. Needs CPU_AVX512. */
/* rans_ctx_avx2.c, the encoder: as rc_enc_avx512, with the rows vt of every table
 * (table t's at vt + 256·t, rans_build_vrows) and off[v] = bucket of v times 256.
 * Needs CPU_AVX2. */
uint8_t *rc_enc_avx2(uint32_t *st, const uint32_t (*vt)[4], const uint32_t *off, unsigned m, const uint8_t *src,
                     size_t P, uint8_t *p);
void rc_build_zt(const uint16_t *freq, uint64_t *zt, unsigned t);
uint8_t *rc_enc_avx512(uint32_t *st, const uint64_t *zt, unsigned m, unsigned K, const uint8_t *src, size_t P,
                       uint8_t *p);
/* rans_ctx_avx512.c, the estimate's count: adds the pairs (byte RC_W back, byte) at
 * offsets [a, b) (a >= RC_W), each to counter bucket · 256 + byte of one of the four
 * sets w[0..3], the bucket the byte RC_W back less lo clamped to [0, RC_WIDE - 1], 64
 * at a time; returns the offset where it stopped (the rest is the caller's). Needs
 * CPU_AVX512. */
size_t rc_pairs_avx512(uint32_t *const *w, const uint8_t *src, int lo, size_t a, size_t b);
#endif

#endif
