/* rans_ctxm.h — rANS with a round's mean as context (codec 10, rans_ctxm.c; vector
 * loops in rans_ctxm_avx2.c and rans_ctxm_avx512.c). Codec 8's layout, buckets, tables
 * and coded bytes (rans_ctx.h, doc/entropy.md), with one context per round of a group:
 * the rounded mean of the group's previous 16 bytes. Internal to the entropy stage. */
#ifndef CKPZ_RANS_CTXM_H
#define CKPZ_RANS_CTXM_H

#include "rans_ctx.h"

/* Registry row functions (ent_codec_desc), as codec 8's. */
/* The sampled estimate's stages, as codec 8's (rc_sample, rc_rest in rans_ctx.h). */
double rm_sample(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist);
double rm_rest(ent_ctx *c, const uint8_t *src, size_t n);
double rm_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled);
size_t rm_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level);
int rm_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);
void rm_free(ent_ctx *c);

/* The context of the 16 bytes after q[0..16): their rounded mean, (sum + 8) / 16. */
static inline unsigned rm_mean16(const uint8_t *q)
{
    uint64_t a, b;
    memcpy(&a, q, 8);
    memcpy(&b, q + 8, 8);
    const uint64_t lo = 0x00ff00ff00ff00ffull;
    uint64_t s = (a & lo) + ((a >> 8) & lo) + (b & lo) + ((b >> 8) & lo); /* four 16-bit sums */
    return (unsigned)((((s * 0x0001000100010001ull) >> 48) + 8) >> 4);
}

#ifdef ENT_HAVE_X86
/* As rc_dec_avx2 / rc_dec_avx512 (rans_ctx.h), with the round's contexts: bkt[v] = the
 * bucket of a mean v times RANS_M. */
size_t rm_dec_avx2(uint32_t *st, const uint32_t *dt, const uint32_t *bkt, unsigned m, const uint8_t **pp,
                   const uint8_t *end, uint8_t *dst, size_t P);
size_t rm_dec_avx512(uint32_t *st, const uint32_t *dt, const uint32_t *bkt, unsigned m, const uint8_t **pp,
                     const uint8_t *end, uint8_t *dst, size_t P);
/* As rc_enc_avx2 / rc_enc_avx512: the whole rounds, off[v] = bucket of a mean v times 256. */
uint8_t *rm_enc_avx2(uint32_t *st, const uint32_t (*vt)[4], const uint32_t *off, unsigned m, const uint8_t *src,
                     size_t P, uint8_t *p);
/* The estimate's count: the buckets of nr consecutive whole rounds from q (the rounded
 * mean of the 16 bytes before each, less base, clamped to [0, RC_WIDE)) into out, 16
 * rounds at a time; returns the rounds done (the rest is the caller's). */
size_t rm_buckets_avx512(const uint8_t *q, size_t nr, int base, uint8_t *out);
uint8_t *rm_enc_avx512(uint32_t *st, const uint64_t *zt, const uint32_t *off, unsigned m, const uint8_t *src, size_t P,
                       uint8_t *p);
#endif

#endif
