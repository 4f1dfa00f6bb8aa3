/* q8.c — transform q8 (XF_Q8): GGML's Q8_0 blocks (34 bytes: an FP16 scale, then 32
 * int8 quants scaled so that the block's largest magnitude is 127) split into planes
 * that each cost what their content is worth.
 *
 * Coded as one byte plane, a Q8_0 tensor came to ~1.04x: its quants hold ~7.69 bits of
 * order-0 entropy (absmax-scaled, near-Gaussian), its scales' high bytes ~2.3 bits, and
 * order-0 rANS over every byte was half of the decode time of a GGUF. Here the scales
 * become two planes (low bytes, near random; high bytes: sign and exponent, similar
 * across blocks), and each quant's zigzag (magnitude above, sign in bit 0) three fields:
 * its top 2 bits, which hold most of what the quants can be compressed by (~1.78 of 2
 * bits; four quants in one byte), its next 2 bits (four in a byte) and its low 4 bits
 * (two in a byte), which are near uniform and so stored as they are. Order-0 coding then
 * reads one byte per four quants, and the planes came ~0.6% smaller than the bytes coded
 * whole. The entropy stage still chooses for every plane: where quants crowd near zero
 * (a block's outlier sets its scale) the middle and low fields are coded too.
 *
 * A chunk need not start on a block: the first byte header is the phase (the bytes
 * before the first whole block), found by the encoder as the offset at which sampled
 * blocks have a largest quant magnitude of 127; those bytes and the tail after the last
 * whole block are one opaque plane. The encoder declines a chunk where no phase fits
 * (it is then coded as bytes). Planes: header (1 byte, stored), scale low bytes, scale
 * high bytes, top fields, middle fields, low fields (sizes: nb, nb, 8 nb, 8 nb, 16 nb
 * for nb whole blocks), then the phase and tail bytes. Within a block, byte i of the top
 * and middle fields holds quants i, 8 + i, 16 + i and 24 + i (bits 0-1 up to 6-7), byte
 * i of the low fields quants i (bits 0-3) and 16 + i, so that both directions work on
 * eight quants at once in a 64-bit word.
 */
#include <stdio.h>
#include <string.h>

#include "common/copy.h"
#include "common/cpu.h"
#include "common/crc32c.h"
#include "entropy/entropy.h"
#include "planes.h"
#include "simd.h"
#include "xform.h"

#define Q8_BLOCK 34      /* bytes per block */
#define Q8_MIN_BLOCKS 16 /* fewer whole blocks: declined (nothing to gain on the tables) */
#define Q8_SAMPLES 64    /* blocks sampled per phase tried */
#define Q8_SLICE 960     /* blocks merged and checksummed while in cache (~32 KiB) */
#define Q8_PLANES 7

static const uint64_t M03 = 0x0303030303030303ull, M0C = 0x0c0c0c0c0c0c0c0cull, M30 = 0x3030303030303030ull,
                      MC0 = 0xc0c0c0c0c0c0c0c0ull, M0F = 0x0f0f0f0f0f0f0f0full, MF0 = 0xf0f0f0f0f0f0f0f0ull,
                      M01 = 0x0101010101010101ull, M7F = 0x7f7f7f7f7f7f7f7full, MFE = 0xfefefefefefefefeull;

static uint64_t ld64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void st64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Zigzag of eight int8s at once: z = 2|q| - (q < 0), magnitude above, sign in bit 0
 * (s * 0xff: 0 or 0xff per byte, no carries between bytes). */
static uint64_t zz(uint64_t q)
{
    uint64_t s = (q >> 7) & M01;
    return ((q << 1) & MFE) ^ (s * 0xff);
}

static uint64_t unzz(uint64_t z) { return ((z >> 1) & M7F) ^ ((z & M01) * 0xff); }

/* 1 when the block looks like Q8_0's: a positive scale (FP16 sign bit clear) and quants
 * whose largest magnitude is exactly 127 (the scale is the largest magnitude / 127). Of
 * random bytes about one block in ten; a block read one byte early or late keeps the
 * 127 but its "scale" is a quant or a scale's low byte, negative half of the time. */
static int looks_q8(const uint8_t *blk)
{
    int most = 0;
    for (int i = 2; i < Q8_BLOCK; i++) {
        int v = (int8_t)blk[i];
        v = v < 0 ? -v : v;
        most = v > most ? v : most;
    }
    return most == 127 && blk[1] < 0x80;
}

/* The phase (0..33) at which the most sampled whole blocks look like Q8_0 blocks, if at
 * least 7/8 of them do; else -1. */
static int find_phase(const uint8_t *raw, size_t n)
{
    int best = -1;
    unsigned best_hits = 0;
    for (size_t p = 0; p < Q8_BLOCK && p < n; p++) {
        size_t nb = (n - p) / Q8_BLOCK;
        if (nb < Q8_MIN_BLOCKS) break;
        unsigned s = nb < Q8_SAMPLES ? (unsigned)nb : Q8_SAMPLES, need = s - s / 8, hits = 0;
        for (unsigned k = 0; k < s && hits + (s - k) >= need; k++)
            hits += looks_q8(raw + p + (size_t)k * (nb / s) * Q8_BLOCK);
        if (hits >= need && hits > best_hits) best = (int)p, best_hits = hits;
    }
    return best;
}

/* The planes (n bytes at most), then the bounce slice of a streamed restore (planes.h). */
size_t xf_q8_scratch(size_t n) { return (n ? n : 1) + XF_BOUNCE(Q8_SLICE * Q8_BLOCK); }

int xf_q8_encode(const xf_enc *e, xf_out *o, uint32_t *raw_crc)
{
    int phase = e->pred == PRED_NONE && e->esize == 1 ? find_phase(e->raw, e->n) : -1;
    if (phase < 0) return 0;
    size_t p = (size_t)phase, nb = (e->n - p) / Q8_BLOCK, tail = e->n - p - nb * Q8_BLOCK;
    uint8_t *slo = e->scratch, *shi = slo + nb, *top = shi + nb, *mid = top + 8 * nb, *lo = mid + 8 * nb,
            *rest = lo + 16 * nb;
    const uint8_t *blk = e->raw + p;
    for (size_t b = 0; b < nb; b++, blk += Q8_BLOCK) {
        uint64_t q0 = zz(ld64(blk + 2)), q1 = zz(ld64(blk + 10)), q2 = zz(ld64(blk + 18)), q3 = zz(ld64(blk + 26));
        slo[b] = blk[0];
        shi[b] = blk[1];
        st64(top + 8 * b, ((q0 >> 6) & M03) | ((q1 >> 4) & M0C) | ((q2 >> 2) & M30) | (q3 & MC0));
        st64(mid + 8 * b, ((q0 >> 4) & M03) | ((q1 >> 2) & M0C) | (q2 & M30) | ((q3 << 2) & MC0));
        st64(lo + 16 * b, (q0 & M0F) | ((q2 << 4) & MF0));
        st64(lo + 16 * b + 8, (q1 & M0F) | ((q3 << 4) & MF0));
    }
    memcpy(rest, e->raw, p);
    memcpy(rest + p, e->raw + p + nb * Q8_BLOCK, tail);
    o->head[0] = (uint8_t)p;
    const uint8_t *src[Q8_PLANES] = {o->head, slo, shi, top, mid, lo, rest};
    const size_t size[Q8_PLANES] = {1, nb, nb, 8 * nb, 8 * nb, 16 * nb, p + tail};
    /* near-random planes as mantissas (stored unseen from a sample), the top fields as
     * a skewed residual (order 0, no LZ attempt), the scales' high bytes as exponents */
    const int hint[Q8_PLANES] = {XF_KEEP,           ENT_HINT_MANTISSA, ENT_HINT_EXPONENT, ENT_HINT_RESIDUAL,
                                 ENT_HINT_MANTISSA, ENT_HINT_MANTISSA, ENT_HINT_OPAQUE};
    o->n = Q8_PLANES;
    for (unsigned i = 0; i < Q8_PLANES; i++) {
        o->src[i] = src[i];
        o->size[i] = size[i];
        o->hint[i] = hint[i];
    }
    *raw_crc = crc32c(0, e->raw, e->n);
    return Q8_PLANES;
}

/* Rebuilds blocks [b0, b0 + cnt) at out from the planes (AVX-512: q8_avx512.c, eight
 * blocks a step; AVX2: q8_avx2.c, one a step; the rest here). */
static void merge_blocks(const uint8_t *const *pl, size_t b0, size_t cnt, uint8_t *out)
{
#ifdef XF_HAVE_X86
    if (cpu_level() >= CPU_AVX512) {
        size_t done = q8_merge_avx512(pl, b0, cnt, out);
        b0 += done, cnt -= done, out += Q8_BLOCK * done;
    }
    if (cpu_level() >= CPU_AVX2) {
        size_t done = q8_merge_avx2(pl, b0, cnt, out);
        b0 += done, cnt -= done, out += Q8_BLOCK * done;
    }
#endif
    const uint8_t *slo = pl[1] + b0, *shi = pl[2] + b0, *top = pl[3] + 8 * b0, *mid = pl[4] + 8 * b0,
                  *lo = pl[5] + 16 * b0;
    for (size_t b = 0; b < cnt; b++, out += Q8_BLOCK) {
        uint64_t a = ld64(top + 8 * b), m = ld64(mid + 8 * b), l0 = ld64(lo + 16 * b), l1 = ld64(lo + 16 * b + 8);
        out[0] = slo[b];
        out[1] = shi[b];
        st64(out + 2, unzz(((a << 6) & MC0) | ((m << 4) & M30) | (l0 & M0F)));
        st64(out + 10, unzz(((a << 4) & MC0) | ((m << 2) & M30) | (l1 & M0F)));
        st64(out + 18, unzz(((a << 2) & MC0) | (m & M30) | ((l0 >> 4) & M0F)));
        st64(out + 26, unzz((a & MC0) | ((m >> 2) & M30) | ((l1 >> 4) & M0F)));
    }
}

ckpz_error xf_q8_decode(const xf_chunk *c, xf_in *in)
{
    if (c->pred != PRED_NONE || c->esize != 1 || c->nplanes != Q8_PLANES) {
        snprintf(in->why, in->whylen, "invalid q8 chunk (predictor %u, element size %u, %u planes)", c->pred, c->esize,
                 c->nplanes);
        return CKPZ_ERR_CORRUPT;
    }
    const uint8_t *pl[Q8_PLANES];
    ckpz_error err = in->next(in, 1, NULL, XF_IN_HEADER, &pl[0]);
    if (err) return err;
    size_t n = c->raw_len, p = pl[0][0];
    if (p >= Q8_BLOCK || p > n) {
        snprintf(in->why, in->whylen, "q8 phase %zu for a chunk of %zu bytes", p, n);
        return CKPZ_ERR_CORRUPT;
    }
    size_t nb = (n - p) / Q8_BLOCK, tail = n - p - nb * Q8_BLOCK;
    const size_t size[Q8_PLANES] = {1, nb, nb, 8 * nb, 8 * nb, 16 * nb, p + tail};
    uint8_t *dst = c->scratch;
    for (unsigned i = 1; i < Q8_PLANES; i++) {
        if ((err = in->next(in, size[i], dst, XF_IN_MAY_POINT, &pl[i]))) return err;
        dst += size[i];
    }
    if ((err = in->end(in))) return err;
    memcpy(c->out, pl[6], p);
    uint32_t crc = crc32c(0, c->out, p);
    uint8_t *bounce = c->stream ? xf_bounce(c->scratch + (n ? n : 1)) : NULL;
    for (size_t b0 = 0; b0 < nb; b0 += Q8_SLICE) {
        size_t cnt = nb - b0 < Q8_SLICE ? nb - b0 : Q8_SLICE;
        uint8_t *at = c->out + p + b0 * Q8_BLOCK, *to = bounce ? bounce : at;
        merge_blocks(pl, b0, cnt, to);
        crc = crc32c(crc, to, cnt * Q8_BLOCK);
        if (bounce) mem_stream(at, bounce, cnt * Q8_BLOCK);
    }
    memcpy(c->out + p + nb * Q8_BLOCK, pl[6] + p, tail);
    crc = crc32c(crc, c->out + p + nb * Q8_BLOCK, tail);
    if (crc != c->raw_crc) {
        snprintf(in->why, in->whylen, "decoded data checksum mismatch");
        return CKPZ_ERR_CHECKSUM;
    }
    return CKPZ_OK;
}
