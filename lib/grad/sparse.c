/* sparse.c — top-k and threshold sparsification of gradients and its packet (magic CKGS,
 * doc/gradients.md): the elements kept, their indices (LEB128 gaps or a bitmap,
 * whichever is smaller), their values (FP32, or 8-bit codes with one scale per block of
 * values, quantised by the dense path's kernels), a CRC-32C of all.
 *
 * The selection is a magnitude cut (the float bits of |v|, ordered as the values are)
 * and a number of ties at it, taken in index order: for top-k the cut is the k-th
 * largest magnitude, found exactly by two histogram passes over the buffer (the top 16
 * bits, counted into 4 tables in turn so that elements of one bin do not wait on each
 * other's increment, then the low 16 within the cut's bin: 1 MiB of counters, no copy
 * or sort of the buffer); for a threshold it is the threshold's bits, and a first pass counts what
 * it keeps (and refuses a NaN or infinity). The last pass gathers the kept indices and
 * values; the packet is laid out from them. With error feedback no pass before the last
 * changes the residual
 * (a NaN or infinity is refused with it untouched), and the last leaves each element's
 * residual as v (not sent) or v minus what the packet decodes to. The selection is the
 * same scalar code at every level, and the quantisation the same kernels as the dense
 * path, so every level writes the same packet. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "common/dtype.h"
#include "grad/grad.h"

#define SP_VERSION 1
#define SP_HEADER 32
#define SP_FLAG_STOCHASTIC 1u
#define SP_GAPS 0   /* index coding: LEB128 varints of the gaps */
#define SP_BITMAP 1 /* one bit per element, element i in bit i % 8 of byte i / 8 */
#define SP_HISTS 4  /* top-k's first histogram: tables counted into in turn, then summed */

typedef struct sp_head {
    unsigned bits, flags, coding, kind;
    ckpz_dtype dtype;
    uint32_t block; /* values per scale (8-bit); 0 for FP32 values */
    uint64_t count, nnz, ilen;
    size_t scales, values, index, size;
} sp_head;

static unsigned varint_len(uint64_t x)
{
    unsigned n = 1;
    while (x >= 0x80) x >>= 7, n++;
    return n;
}

/* The layout from bits, block, count, nnz and ilen; 0 when it would not fit a size_t. */
static int sp_layout(sp_head *h)
{
    uint64_t nsc = h->bits == 8 ? (h->nnz + h->block - 1) / h->block : 0;
    uint64_t size = SP_HEADER + 4 * nsc + (h->bits == 8 ? 1 : 4) * h->nnz + h->ilen + 4;
    if (size > SIZE_MAX) return 0;
    h->scales = SP_HEADER;
    h->values = SP_HEADER + (size_t)(4 * nsc);
    h->index = h->values + (size_t)((h->bits == 8 ? 1 : 4) * h->nnz);
    h->size = (size_t)size;
    return 1;
}

static uint64_t sp_bitmap_len(uint64_t count) { return (count + 7) / 8; }

static ckpz_error sp_check_params(ckpz_ctx *ctx, const ckpz_grad_params *q, uint64_t n, uint64_t *kmax)
{
    if (q->bits != 8 && q->bits != 32)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: bits %u (8 or 32)", q->bits);
    if (q->bits == 8 && (q->block < 1 || q->block > GRAD_BLOCK_MAX))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: block %u (1..%u)", (unsigned)q->block,
                        GRAD_BLOCK_MAX);
    if (q->stochastic != 0 && q->stochastic != 1)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: stochastic %d (0 or 1)", q->stochastic);
    if (n > GRAD_COUNT_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: %llu elements (at most 2^32 - 1 a packet)",
                        (unsigned long long)n);
    if (q->kind == CKPZ_GRAD_TOPK) {
        if (!(q->density > 0 && q->density <= 1))
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: density %g (0 < density <= 1)", q->density);
        double k = ceil(q->density * (double)n);
        *kmax = k >= (double)n ? n : (uint64_t)k;
    } else {
        if (!(q->threshold > 0 && q->threshold <= 0x1.fffffep127f))
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: threshold %g (finite, > 0)",
                            (double)q->threshold);
        *kmax = n;
    }
    return CKPZ_OK;
}

/* The most a packet of params q can take for n elements (at most kmax kept). */
static ckpz_error sp_bound(ckpz_ctx *ctx, const ckpz_grad_params *q, uint64_t n, uint64_t kmax, size_t *size)
{
    uint64_t gaps = 5 * kmax, bm = sp_bitmap_len(n);
    sp_head h = {
        .bits = q->bits, .block = q->bits == 8 ? q->block : 0, .count = n, .nnz = kmax, .ilen = gaps < bm ? gaps : bm};
    if (!sp_layout(&h))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: the packet exceeds the address space");
    *size = h.size;
    return CKPZ_OK;
}

ckpz_error grad_sparse_size(ckpz_ctx *ctx, const ckpz_grad_params *q, uint64_t n, size_t *size)
{
    uint64_t kmax;
    size_t s = 0;
    ckpz_error e = sp_check_params(ctx, q, n, &kmax);
    if (!e) e = sp_bound(ctx, q, n, kmax, &s);
    if (size) *size = s;
    return e;
}

/* A pass over the values v = grad (+ residual), staged a piece at a time; the residual
 * is not changed. */
typedef struct sp_src {
    ckpz_dtype dtype;
    const void *grad;
    const float *res;
    uint64_t n;
} sp_src;

static const float *sp_piece(const sp_src *s, uint64_t i, size_t len, float *tmp, float *sum)
{
    const float *v = grad_stage(s->dtype, s->grad, i, len, tmp);
    if (!s->res) return v;
    for (size_t k = 0; k < len; k++) sum[k] = s->res[i + k] + v[k]; /* as the add kernel: res += grad */
    return sum;
}

static uint32_t sp_mag(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return u & 0x7fffffffu;
}

/* The selection: magnitudes above cut, then the first `ties` equal to it (cut 0: no
 * ties, zeros are never kept). */
typedef struct sp_sel {
    uint32_t cut;
    uint64_t ties;
} sp_sel;

/* Top-k: the cut and ties keeping the k largest magnitudes (fewer when fewer are
 * non-zero). -1 with *bad the first element not finite. */
static int sp_topk(const sp_src *s, uint64_t k, sp_sel *sel, uint32_t *hist, uint64_t *bad)
{
    float tmp[GRAD_PIECE], sum[GRAD_PIECE];
    memset(hist, 0, SP_HISTS * 65536 * sizeof *hist);
    for (uint64_t i = 0; i < s->n; i += GRAD_PIECE) {
        size_t len = s->n - i < GRAD_PIECE ? (size_t)(s->n - i) : GRAD_PIECE;
        const float *v = sp_piece(s, i, len, tmp, sum);
        uint32_t top = 0;
        for (size_t j = 0; j < len; j++) { /* SP_HISTS tables in turn: no chain of increments of one bin */
            uint32_t m = sp_mag(v[j]);
            top = m > top ? m : top;
            hist[(j % SP_HISTS) << 16 | m >> 16]++;
        }
        if (top >= 0x7f800000u) {
            for (size_t j = 0; j < len; j++)
                if (sp_mag(v[j]) >= 0x7f800000u) {
                    *bad = i + j;
                    return -1;
                }
        }
    }
    for (uint32_t b = 0; b < 65536; b++)
        for (int t = 1; t < SP_HISTS; t++) hist[b] += hist[(uint32_t)t << 16 | b];
    uint64_t above = 0;
    uint32_t bin = 0x7f80;
    while (bin > 0 && above + hist[bin - 1] < k) above += hist[--bin];
    bin = bin ? bin - 1 : 0; /* the bin holding the k-th largest (k <= n: bin 0 at the lowest) */
    memset(hist, 0, 65536 * sizeof *hist);
    for (uint64_t i = 0; i < s->n; i += GRAD_PIECE) {
        size_t len = s->n - i < GRAD_PIECE ? (size_t)(s->n - i) : GRAD_PIECE;
        const float *v = sp_piece(s, i, len, tmp, sum);
        for (size_t j = 0; j < len; j++) {
            uint32_t m = sp_mag(v[j]);
            if (m >> 16 == bin) hist[m & 0xffff]++;
        }
    }
    uint32_t lo = 0x10000;
    while (lo > 1 && above + hist[lo - 1] < k) above += hist[--lo];
    lo--; /* the k-th largest is bin << 16 | lo; the elements above it number `above` */
    sel->cut = bin << 16 | lo;
    sel->ties = sel->cut ? k - above : 0; /* a cut of 0: the non-zero ones, fewer than k */
    return 0;
}

/* Threshold mode's first pass: counts what sel keeps (ties: none) and refuses a value
 * not finite. */
static int sp_count(const sp_src *s, sp_sel sel, uint64_t *nnz, uint64_t *bad)
{
    float tmp[GRAD_PIECE], sum[GRAD_PIECE];
    uint64_t kept = 0;
    for (uint64_t i = 0; i < s->n; i += GRAD_PIECE) {
        size_t len = s->n - i < GRAD_PIECE ? (size_t)(s->n - i) : GRAD_PIECE;
        const float *v = sp_piece(s, i, len, tmp, sum);
        for (size_t j = 0; j < len; j++) {
            uint32_t m = sp_mag(v[j]);
            if (m >= 0x7f800000u) {
                *bad = i + j;
                return -1;
            }
            kept += m > sel.cut;
        }
    }
    *nnz = kept;
    return 0;
}

/* The last pass: idx and vals get the kept elements (their number returned); the
 * residual becomes v. */
static uint64_t sp_gather(const grad_kernels *K, const sp_src *s, float *res, sp_sel sel, uint32_t *idx, float *vals)
{
    float tmp[GRAD_PIECE];
    uint64_t kept = 0, ties = sel.ties;
    for (uint64_t i = 0; i < s->n; i += GRAD_PIECE) {
        size_t len = s->n - i < GRAD_PIECE ? (size_t)(s->n - i) : GRAD_PIECE;
        const float *v = grad_stage(s->dtype, s->grad, i, len, tmp);
        if (res) {
            K->add(res + i, v, len);
            v = res + i;
        }
        for (size_t j = 0; j < len; j++) {
            uint32_t m = sp_mag(v[j]);
            if (m > sel.cut || (m == sel.cut && ties && ties--)) idx[kept] = (uint32_t)(i + j), vals[kept++] = v[j];
        }
    }
    return kept;
}

ckpz_error grad_sparse_pack(ckpz_ctx *ctx, const ckpz_grad_params *q, ckpz_dtype dtype, const void *grad, uint64_t n,
                            float *residual, void *dst, size_t cap, size_t *written)
{
    uint64_t kmax, bad = 0;
    size_t bound;
    ckpz_error e = sp_check_params(ctx, q, n, &kmax);
    if (!e) e = sp_bound(ctx, q, n, kmax, &bound);
    if (e) return e;
    if (!dst || cap < bound)
        return ctx_fail(ctx, CKPZ_ERR_PARAM,
                        "gradient sparsification: %zu bytes of room, ckpz_grad_packet_size says %zu", dst ? cap : 0,
                        bound);
    if (n && !grad) return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient sparsification: no gradient buffer");
    const grad_kernels *K = grad_kernels_get();
    sp_src s = {dtype, grad, residual, n};
    sp_sel sel = {0, 0};
    uint64_t nnz = 0, gaps = 0;
    int r;
    if (q->kind == CKPZ_GRAD_TOPK) {
        uint32_t *hist = malloc(SP_HISTS * 65536 * sizeof *hist);
        if (!hist) return ctx_fail(ctx, CKPZ_ERR_NOMEM, "gradient sparsification: no memory for a histogram");
        r = sp_topk(&s, kmax, &sel, hist, &bad);
        free(hist);
        nnz = kmax; /* room: at most k are kept */
    } else {
        sel.cut = sp_mag(q->threshold) - 1, sel.ties = 0; /* above the cut: >= threshold */
        r = sp_count(&s, sel, &nnz, &bad);
    }
    if (r)
        return ctx_fail(ctx, CKPZ_ERR_INPUT, "gradient sparsification: element %llu is NaN or infinite%s",
                        (unsigned long long)bad, residual ? " with the residual added; the residual is unchanged" : "");
    uint32_t *idx = malloc(nnz * sizeof *idx + 1);
    float *vals = malloc(nnz * sizeof *vals + 1);
    if (!idx || !vals) {
        free(idx), free(vals);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "gradient sparsification: no memory for %llu values",
                        (unsigned long long)nnz);
    }
    nnz = sp_gather(K, &s, residual, sel, idx, vals);
    for (uint64_t j = 0, next = 0; j < nnz; next = (uint64_t)idx[j++] + 1) gaps += varint_len(idx[j] - next);
    sp_head h = {.bits = q->bits,
                 .flags = q->stochastic && q->bits == 8 ? SP_FLAG_STOCHASTIC : 0,
                 .kind = q->kind,
                 .dtype = dtype,
                 .block = q->bits == 8 ? q->block : 0,
                 .count = n,
                 .nnz = nnz};
    h.coding = gaps <= sp_bitmap_len(n) ? SP_GAPS : SP_BITMAP;
    h.ilen = h.coding == SP_GAPS ? gaps : sp_bitmap_len(n);
    sp_layout(&h); /* no larger than the bound */

    uint8_t *pkt = dst;
    memcpy(pkt, GRAD_SPARSE_MAGIC, 4);
    pkt[4] = SP_VERSION, pkt[5] = (uint8_t)h.bits, pkt[6] = (uint8_t)dtype, pkt[7] = (uint8_t)h.flags;
    st32(pkt + 8, h.block);
    st64(pkt + 12, n);
    pkt[20] = (uint8_t)h.coding, pkt[21] = (uint8_t)h.kind, pkt[22] = pkt[23] = 0;
    st32(pkt + 24, (uint32_t)nnz);
    st32(pkt + 28, (uint32_t)h.ilen);
    if (h.bits == 32) {
        for (uint64_t j = 0; j < nnz; j++) {
            uint32_t u;
            memcpy(&u, &vals[j], 4);
            st32(pkt + h.values + 4 * j, u);
            if (residual) residual[idx[j]] = 0;
        }
    } else {
        grad_key key = grad_key_of(q->seed);
        for (uint64_t b0 = 0; b0 < nnz; b0 += h.block) {
            size_t len = nnz - b0 < h.block ? (size_t)(nnz - b0) : h.block;
            uint32_t a_bits = 0;
            K->absmax(vals + b0, NULL, len, &a_bits);
            float a, inv = 0, scale = 0;
            memcpy(&a, &a_bits, 4);
            if (a >= GRAD_TINY) inv = 127.0f / a, scale = grad_scale(a, 127);
            memcpy(&a_bits, &scale, 4);
            st32(pkt + h.scales + 4 * (b0 / h.block), a_bits);
            grad_qjob j = {.v = vals + b0,
                           .n = len,
                           .idx = (uint32_t)b0,
                           .inv = inv,
                           .scale = scale,
                           .qmax = 127,
                           .stochastic = (h.flags & SP_FLAG_STOCHASTIC) != 0,
                           .key = key,
                           .codes = (int8_t *)(pkt + h.values + b0),
                           .resid = vals + b0}; /* vals becomes what is not sent */
            K->quant(&j);
        }
        if (residual)
            for (uint64_t j = 0; j < nnz; j++) residual[idx[j]] = vals[j];
    }
    uint8_t *ix = pkt + h.index;
    if (h.coding == SP_BITMAP) {
        memset(ix, 0, h.ilen);
        for (uint64_t j = 0; j < nnz; j++) ix[idx[j] >> 3] |= (uint8_t)(1u << (idx[j] & 7));
    } else {
        uint64_t next = 0;
        for (uint64_t j = 0; j < nnz; j++) {
            uint64_t g = idx[j] - next;
            next = (uint64_t)idx[j] + 1;
            while (g >= 0x80) *ix++ = (uint8_t)(g | 0x80), g >>= 7;
            *ix++ = (uint8_t)g;
        }
    }
    free(idx), free(vals);
    st32(pkt + h.size - 4, crc32c(0, pkt, h.size - 4));
    if (written) *written = h.size;
    return CKPZ_OK;
}

/* The indices, in order, to fn (or only checked, fn NULL): -1 and *why at the first
 * that is out of range or badly coded. The packet's sizes are already consistent. */
static int sp_indices(const sp_head *h, const uint8_t *ix, void (*fn)(void *, uint64_t, uint64_t), void *arg,
                      const char **why, uint64_t *at)
{
    uint64_t j = 0;
    if (h->coding == SP_BITMAP) {
        for (uint64_t byte = 0; byte < h->ilen; byte++) {
            unsigned bits = ix[byte];
            if (byte == h->ilen - 1 && h->count & 7 && bits >> (h->count & 7)) {
                *why = "bits past the last element set", *at = byte;
                return -1;
            }
            while (bits) {
                unsigned b = (unsigned)__builtin_ctz(bits);
                bits &= bits - 1;
                if (j == h->nnz) {
                    *why = "more elements than the count of values", *at = byte;
                    return -1;
                }
                if (fn) fn(arg, j, byte * 8 + b);
                j++;
            }
        }
    } else {
        uint64_t next = 0, p = 0;
        for (; j < h->nnz; j++) {
            uint64_t g = 0;
            unsigned shift = 0;
            for (;;) {
                if (p == h->ilen || shift > 28) {
                    *why = p == h->ilen ? "gaps run past their bytes" : "a gap longer than 5 bytes", *at = j;
                    return -1;
                }
                uint8_t c = ix[p++];
                g |= (uint64_t)(c & 0x7f) << shift;
                shift += 7;
                if (!(c & 0x80)) {
                    if (!c && shift > 7) {
                        *why = "a gap not in its shortest form", *at = j;
                        return -1;
                    }
                    break;
                }
            }
            if (g >= h->count - next) { /* next <= count: the last index was < count */
                *why = "an index past the count", *at = j;
                return -1;
            }
            if (fn) fn(arg, j, next + g);
            next += g + 1;
        }
        if (p != h->ilen) {
            *why = "bytes after the last gap", *at = p;
            return -1;
        }
    }
    if (j != h->nnz) {
        *why = "fewer elements than the count of values", *at = j;
        return -1;
    }
    return 0;
}

static ckpz_error sp_parse(ckpz_ctx *ctx, const uint8_t *src, size_t len, sp_head *h)
{
    ckpz_error e = grad_frame_check(ctx, "sparse gradient packet", src, len, SP_HEADER, SP_VERSION);
    if (e) return e;
    *h = (sp_head){.bits = src[5],
                   .dtype = (ckpz_dtype)src[6],
                   .flags = src[7],
                   .block = ld32(src + 8),
                   .count = ld64(src + 12),
                   .coding = src[20],
                   .kind = src[21],
                   .nnz = ld32(src + 24),
                   .ilen = ld32(src + 28)};
    if (h->bits != 8 && h->bits != 32)
        return ctx_fail(ctx, CKPZ_ERR_VERSION, "sparse gradient packet: %u-bit values (8 or 32)", h->bits);
    if (!grad_dtype_ok(h->dtype)) return ctx_fail(ctx, CKPZ_ERR_VERSION, "sparse gradient packet: dtype %u", src[6]);
    if (h->flags & ~SP_FLAG_STOCHASTIC || h->coding > SP_BITMAP || h->kind < CKPZ_GRAD_TOPK ||
        h->kind > CKPZ_GRAD_THRESHOLD || src[22] || src[23])
        return ctx_fail(ctx, CKPZ_ERR_VERSION,
                        "sparse gradient packet: unknown fields (flags %02x, index coding %u, selection %u, "
                        "bytes 22-23 %02x%02x)",
                        h->flags, h->coding, h->kind, src[22], src[23]);
    if (h->bits == 8 ? h->block < 1 || h->block > GRAD_BLOCK_MAX : h->block != 0 || h->flags)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "sparse gradient packet: block %u, flags %02x for %u-bit values",
                        (unsigned)h->block, h->flags, h->bits);
    if (h->count > GRAD_COUNT_MAX || h->nnz > h->count)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "sparse gradient packet: %llu values of %llu elements",
                        (unsigned long long)h->nnz, (unsigned long long)h->count);
    if (h->coding == SP_BITMAP ? h->ilen != sp_bitmap_len(h->count) : h->ilen < h->nnz || h->ilen > 5 * h->nnz)
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "sparse gradient packet: %llu bytes of indices for %llu values",
                        (unsigned long long)h->ilen, (unsigned long long)h->nnz);
    if (!sp_layout(h) || h->size != len)
        return ctx_fail(ctx, len < h->size ? CKPZ_ERR_TRUNCATED : CKPZ_ERR_CORRUPT,
                        "sparse gradient packet: its fields need %zu bytes, the packet has %zu", h->size, len);
    if (h->bits == 8) {
        for (uint64_t b = 0; b < (h->nnz + h->block - 1) / h->block; b++) {
            uint32_t u = ld32(src + h->scales + 4 * b);
            float f;
            memcpy(&f, &u, 4);
            if (u >= 0x7f800000u || !(127.0f * f <= 0x1.fffffep127f))
                return ctx_fail(ctx, CKPZ_ERR_CORRUPT,
                                "sparse gradient packet: scale %llu (bits %08x) is not a value >= 0 whose "
                                "multiples up to 127 are finite",
                                (unsigned long long)b, (unsigned)u);
        }
        uint64_t bad = grad_kernels_get()->check((const int8_t *)(src + h->values), (size_t)h->nnz, 127);
        if (bad < h->nnz)
            return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "sparse gradient packet: value %llu's code is out of [-127, 127]",
                            (unsigned long long)bad);
    } else {
        for (uint64_t j = 0; j < h->nnz; j++)
            if ((ld32(src + h->values + 4 * j) & 0x7fffffffu) >= 0x7f800000u)
                return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "sparse gradient packet: value %llu is NaN or infinite",
                                (unsigned long long)j);
    }
    const char *why = "";
    uint64_t at = 0;
    if (sp_indices(h, src + h->index, NULL, NULL, &why, &at))
        return ctx_fail(ctx, CKPZ_ERR_CORRUPT, "sparse gradient packet: %s (%s %llu)", why,
                        h->coding == SP_BITMAP ? "bitmap byte" : "value", (unsigned long long)at);
    return CKPZ_OK;
}

ckpz_error grad_sparse_info(ckpz_ctx *ctx, const uint8_t *src, size_t len, ckpz_grad_info *mine)
{
    sp_head h;
    ckpz_error e = sp_parse(ctx, src, len, &h);
    if (e) return e;
    *mine = (ckpz_grad_info){.struct_size = sizeof *mine,
                             .count = h.count,
                             .dtype = h.dtype,
                             .bits = h.bits,
                             .block = h.block,
                             .stochastic = (h.flags & SP_FLAG_STOCHASTIC) != 0,
                             .kind = h.kind,
                             .nnz = h.nnz};
    return CKPZ_OK;
}

/* The scatter of value j to element i. */
typedef struct sp_out {
    const sp_head *h;
    const uint8_t *pkt;
    ckpz_dtype dtype;
    void *out;
    int add;
} sp_out;

static float sp_value(const sp_head *h, const uint8_t *pkt, uint64_t j)
{
    uint32_t u;
    float f;
    if (h->bits == 32) {
        u = ld32(pkt + h->values + 4 * j);
        memcpy(&f, &u, 4);
        return f;
    }
    u = ld32(pkt + h->scales + 4 * (j / h->block));
    memcpy(&f, &u, 4);
    return (float)(int8_t)pkt[h->values + j] * f; /* as the dequant kernel */
}

static void sp_put(void *arg, uint64_t j, uint64_t i)
{
    const sp_out *o = arg;
    float v = sp_value(o->h, o->pkt, j);
    if (o->add) ((float *)o->out)[i] += v;
    else if (o->dtype == CKPZ_DTYPE_F32) ((float *)o->out)[i] = v;
    else if (o->dtype == CKPZ_DTYPE_BF16) dt_st_b32(2, (uint8_t *)o->out + 2 * i, v);
    else dtype_get(o->dtype)->from_double((uint8_t *)o->out + 2 * i, v);
}

ckpz_error grad_sparse_unpack(ckpz_ctx *ctx, const uint8_t *src, size_t len, ckpz_dtype dtype, void *out, uint64_t n,
                              int add)
{
    sp_head h;
    ckpz_error e = sp_parse(ctx, src, len, &h);
    if (e) return e;
    if (n != h.count)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient unpacking: room for %llu elements, the packet has %llu",
                        (unsigned long long)n, (unsigned long long)h.count);
    if (n && !out) return ctx_fail(ctx, CKPZ_ERR_PARAM, "gradient unpacking: no output buffer");
    if (!add && n) memset(out, 0, (size_t)n * ckpz_dtype_size(dtype)); /* +0.0 in each type */
    sp_out o = {&h, src, dtype, out, add};
    const char *why;
    uint64_t at;
    sp_indices(&h, src + h.index, sp_put, &o, &why, &at); /* checked by sp_parse */
    return CKPZ_OK;
}
