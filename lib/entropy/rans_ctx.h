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

/* Registry row functions (ent_codec_desc). The estimate leaves its choice of m and K
 * for an encode of the same plane just after it. */
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
