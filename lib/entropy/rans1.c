/* rans1.c — order-1 rANS: the table for each byte is chosen by the byte before it.
 *
 * Worth it only where the previous byte predicts the next (Adam's second moment, large
 * exponent planes), and only if its tables are paid for, so the plan gives a context
 * its own table only when its estimated saving over a shared fallback table exceeds
 * that table's bytes; all other contexts share one table built from their pooled
 * counts. With one stream per plane (no sub-block adaptation), the plane is cut into
 * 32 equal lanes, one per rANS state, each starting with context 0, so the 32 chains
 * of "decode byte -> pick next table" run independently instead of one serial chain;
 * the remainder after 32 equal lanes is the tail of lane 31.
 *
 * Payload: shared table | LEB128 K | K x (u8 context, increasing, table) | 32 u32
 * final states | 16-bit renormalisation words, all little-endian. Decoding is scalar
 * and walks up to 257 16 KiB tables (L2, not L1), ~0.4 GB/s against ~2.4 GB/s for
 * order-0, which is why the selector only tries it from level 4.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ent_internal.h"

static int ensure_tables(ent_ctx *c)
{
    if (!c->o1cnt) c->o1cnt = malloc(256 * 256 * sizeof *c->o1cnt);
    if (!c->o1dtab) c->o1dtab = malloc(257 * (size_t)RANS_M * sizeof *c->o1dtab);
    if (!c->o1etab) c->o1etab = malloc(257 * 256 * sizeof *c->o1etab);
    return c->o1cnt && c->o1dtab && c->o1etab ? 0 : -1;
}

static double cross_bits(const uint32_t *row, const uint32_t *ref, uint64_t reftot)
{
    double b = 0;
    for (int s = 0; s < 256; s++)
        if (row[s]) b += (double)row[s] * log2((double)reftot / (double)ref[s]);
    return b;
}

static void count_o1(uint32_t *cnt, const uint8_t *src, size_t n)
{
    size_t seg = n / RANS_N;
    uint8_t prev = 0;
    for (unsigned k = 0; k < RANS_N; k++) {
        const uint8_t *q = src + k * seg;
        prev = 0;
        for (size_t i = 0; i < seg; i++) {
            cnt[256 * prev + q[i]]++;
            prev = q[i];
        }
    }
    for (size_t i = RANS_N * seg; i < n; i++) {
        cnt[256 * prev + src[i]]++;
        prev = src[i];
    }
}

double rans1_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist0, int sampled)
{
    if (n < RANS_N || ensure_tables(c)) return 1e300;
    uint32_t *cnt = c->o1cnt;
    for (int s = 0; s < 256; s++)
        if (hist0[s] || s == 0) memset(cnt + 256 * s, 0, 256 * sizeof *cnt);
    /* Sampled: pairs inside every fourth 4 KiB piece, entropy scaled back up; the
     * counts are then only good for deciding, and the encoder recounts. */
    double scale = 1.0;
    if (sampled && n >= 64 * 1024) {
        size_t m = 0;
        for (size_t o = 0; o + 4096 <= n; o += 16384, m += 4096) {
            uint8_t prev = src[o];
            for (size_t i = o + 1; i < o + 4096; i++) {
                cnt[256 * prev + src[i]]++;
                prev = src[i];
            }
        }
        scale = (double)n / (double)(m - m / 4096);
    } else {
        count_o1(cnt, src, n);
    }
    /* A context earns its own table when that beats coding it with the order-0 one. */
    uint32_t shared[256] = {0};
    double est = 0;
    uint64_t shtot = 0;
    for (int r = 0; r < 256; r++) {
        c->o1own[r] = 0;
        if (!(hist0[r] || r == 0)) continue;
        const uint32_t *row = cnt + 256 * r;
        uint64_t t = 0;
        for (int s = 0; s < 256; s++) t += row[s];
        if (!t) continue;
        double own = ent_bits(row, t) / 8 * scale + (double)rans_table_cost(row, t) + 1;
        double sh = cross_bits(row, hist0, n) / 8 * scale;
        if (own < sh) {
            c->o1own[r] = 1;
            est += own;
        } else {
            for (int s = 0; s < 256; s++) shared[s] += row[s];
            shtot += t;
        }
    }
    est += ent_bits(shared, shtot) / 8 * scale + (double)rans_table_cost(shared, shtot) + 2 + 4 * RANS_N;
    return est;
}

size_t rans1_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap)
{
    /* Expects an unsampled rans1_estimate() on the same plane just before (counts and
     * plan). */
    if (n < RANS_N || ensure_tables(c)) return 0;
    uint32_t *cnt = c->o1cnt;
    uint32_t shared[256] = {0};
    uint16_t cmap[256]; /* table per context: 0 = shared, up to 256 own */
    unsigned K = 0;
    int any_shared = 0;
    memset(cmap, 0, sizeof cmap);
    size_t hdr = 0;
    uint16_t f[256];
    /* Shared table: pooled counts of every context without its own table. */
    uint32_t h0[256];
    ent_histogram(src, n, h0);
    for (int r = 0; r < 256; r++) {
        if (!(h0[r] || r == 0) || c->o1own[r]) continue;
        for (int s = 0; s < 256; s++) shared[s] += cnt[256 * r + s];
    }
    for (int s = 0; s < 256; s++) any_shared |= shared[s] != 0;
    if (!any_shared) shared[0] = 1;
    if (cap < 2 + 510 + 3) return 0;
    rans_normalize(shared, f);
    hdr += rans_table_write(f, dst + hdr);
    rans_build_esym(f, c->o1etab);
    for (int r = 0; r < 256; r++) K += c->o1own[r] && (h0[r] || r == 0);
    size_t kpos = hdr;
    hdr += K >= 128 ? 2 : 1;
    dst[kpos] = (uint8_t)(K >= 128 ? 0x80 | (K & 0x7f) : K);
    if (K >= 128) dst[kpos + 1] = (uint8_t)(K >> 7);
    unsigned t = 1;
    for (int r = 0; r < 256; r++) {
        if (!(c->o1own[r] && (h0[r] || r == 0))) continue;
        if (hdr + 1 + 512 > cap || hdr >= n) return 0;
        cmap[r] = (uint16_t)t;
        dst[hdr++] = (uint8_t)r;
        rans_normalize(cnt + 256 * r, f);
        hdr += rans_table_write(f, dst + hdr);
        rans_build_esym(f, c->o1etab + 256 * t);
        t++;
    }
    /* cmap 0 = shared; a context index of K+1 tables fits 257 slots. */
    size_t scap = 2 * n + 4 * RANS_N + 64;
    uint8_t *sbuf = ent_scratch(c, scap);
    if (!sbuf) return 0;
    uint8_t *p = sbuf + scap;
    uint32_t st[RANS_N];
    for (unsigned j = 0; j < RANS_N; j++) st[j] = RANS_L;
    const rans_esym *E = c->o1etab;
    size_t seg = n / RANS_N;
#define ENC1(lane, pos, ctxbyte) st[lane] = rans_enc_step(st[lane], &E[256 * (size_t)cmap[ctxbyte] + src[pos]], &p)
    for (size_t i = n; i-- > RANS_N * seg;) ENC1(RANS_N - 1, i, i == 0 ? 0 : src[i - 1]);
    for (size_t j = seg; j-- > 0;)
        for (unsigned k = RANS_N; k-- > 0;) {
            size_t i = k * seg + j;
            ENC1(k, i, j == 0 ? 0 : src[i - 1]);
        }
#undef ENC1
    return rans_finish(st, RANS_N, p, sbuf + scap, dst, hdr, n, cap);
}

int rans1_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    if (n < RANS_N || ensure_tables(c)) return -1;
    const uint8_t *p = src, *end = src + srclen;
    uint16_t f[256];
    uint16_t cmap[256];
    memset(cmap, 0, sizeof cmap);
    uint32_t *DT = c->o1dtab;
    if (rans_table_read(&p, end, f)) return -1;
    rans_build_dtab(f, DT);
    if (p >= end) return -1;
    unsigned K = *p++;
    if (K & 0x80) {
        if (p >= end || *p > 2) return -1;
        K = (K & 0x7f) | (unsigned)*p++ << 7;
        if (K < 128 || K > 256) return -1;
    }
    int last = -1;
    for (unsigned t = 1; t <= K; t++) {
        if (p >= end) return -1;
        int r = *p++;
        if (r <= last) /* strictly increasing: no context defined twice */
            return -1;
        last = r;
        cmap[r] = (uint16_t)t;
        if (rans_table_read(&p, end, f)) return -1;
        rans_build_dtab(f, DT + (size_t)t * RANS_M);
    }
    if ((size_t)(end - p) < 4 * RANS_N) return -1;
    uint32_t st[RANS_N];
    for (unsigned j = 0; j < RANS_N; j++) {
        st[j] = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
        if (st[j] < RANS_L) return -1;
        p += 4;
    }
    size_t seg = n / RANS_N;
    size_t j = 0;
    /* Table offsets pre-multiplied and one output pointer per lane: the per-symbol
     * work is the load of the entry and the load of the next table's offset. */
    uint32_t coff[256];
    for (int r = 0; r < 256; r++) coff[r] = (uint32_t)cmap[r] * RANS_M;
    uint8_t *outp[RANS_N];
    for (unsigned k = 0; k < RANS_N; k++) outp[k] = dst + k * seg;
    uint32_t tb[RANS_N];
    for (unsigned k = 0; k < RANS_N; k++) tb[k] = coff[0];
    for (; j < seg && end - p >= 2 * (ptrdiff_t)RANS_N; j++) {
        for (unsigned k = 0; k < RANS_N; k++) {
            uint32_t x = st[k];
            uint32_t e = DT[tb[k] + (x & (RANS_M - 1))];
            outp[k][j] = (uint8_t)e;
            tb[k] = coff[e & 0xff];
            x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
            uint32_t nd = x < RANS_L;
            uint32_t w = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
            x = (x << (nd << 4)) | (w & (0u - nd));
            p += 2 * nd;
            st[k] = x;
        }
    }
    for (; j < seg; j++) {
        for (unsigned k = 0; k < RANS_N; k++) {
            uint32_t x = st[k];
            uint32_t e = DT[tb[k] + (x & (RANS_M - 1))];
            outp[k][j] = (uint8_t)e;
            tb[k] = coff[e & 0xff];
            x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
            if (x < RANS_L) {
                if (end - p < 2) return -1;
                x = (x << 16) | (uint32_t)p[0] | ((uint32_t)p[1] << 8);
                p += 2;
            }
            st[k] = x;
        }
    }
    for (size_t i = RANS_N * seg; i < n; i++) {
        uint32_t x = st[RANS_N - 1];
        uint32_t e = DT[tb[RANS_N - 1] + (x & (RANS_M - 1))];
        dst[i] = (uint8_t)e;
        tb[RANS_N - 1] = coff[e & 0xff];
        x = (e >> 20) * (x >> RANS_BITS) + ((e >> 8) & (RANS_M - 1));
        if (x < RANS_L) {
            if (end - p < 2) return -1;
            x = (x << 16) | (uint32_t)p[0] | ((uint32_t)p[1] << 8);
            p += 2;
        }
        st[RANS_N - 1] = x;
    }
    if (p != end) return -1;
    for (unsigned k = 0; k < RANS_N; k++)
        if (st[k] != RANS_L) return -1;
    return 0;
}
