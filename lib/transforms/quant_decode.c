/* quant_decode.c — the lossy decoder (see quant.h): the chunk header's layout, then
 * codes back to values with the encoder's own reconstruction (quant_grid.h). */
#include "quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/bytes.h"
#include "common/dtype.h"
#include "quant_grid.h"

unsigned quant_layout_read(const uint8_t *h, ckpz_dtype dt, size_t n, int have_base, quant_layout *L)
{
    memset(L, 0, sizeof *L);
    if (!quant_dtype_ok(dt)) return 0;
    unsigned es = ckpz_dtype_size(dt);
    L->mode = h[0];
    L->w = h[1];
    L->flags = h[2];
    L->group = ld32(h + 4);
    L->first = ld32(h + 8);
    L->q0 = (int32_t)ld32(h + 12);
    uint64_t sb = ld64(h + 16);
    memcpy(&L->step, &sb, 8);
    L->nexc = ld32(h + 24);
    L->nel = n / es;
    L->row = ld32(h + 28);
    if (h[3] || (L->flags & ~15u) || (L->row != 0) != ((L->flags & QUANT_F_DELTA) != 0)) return 0;
    if (L->w != 1 && L->w != 2) return 0;
    if ((L->flags & QUANT_F_BASE) && !have_base) return 0;
    if (L->nexc > L->nel) return 0;
    if (L->mode == QM_AFFINE) {
        if (L->group < 16 || L->first == 0 || L->first > L->group || (L->nel && L->first > L->nel) ||
            (!L->nel && L->first) || sb || L->q0 || (L->row && (L->row < L->group || (L->flags & QUANT_F_BASE))))
            return 0;
        L->ngroups = L->nel ? 1 + (L->nel - L->first + L->group - 1) / L->group : 0;
    } else if (L->mode == QM_ABS || L->mode == QM_PREL) {
        if (L->group || L->first || !(L->step > 0) || !isfinite(L->step) || (L->flags & (QUANT_F_SYM | QUANT_F_DELTA)))
            return 0;
    } else {
        return 0;
    }
    unsigned np = 0;
    L->size[np++] = QUANT_HDR;
    L->size[np++] = L->ngroups * 8;
    L->size[np++] = (L->flags & QUANT_F_BITMAP) ? (L->nel + 7) / 8 : 0;
    L->size[np++] = L->nel; /* until the bitmap says otherwise */
    if (L->w == 2) L->size[np++] = L->nel;
    L->size[np++] = (size_t)L->nexc * es;
    if (n % es) L->size[np++] = n % es;
    L->nplanes = np;
    return np;
}

int quant_set_kept(quant_layout *L, const uint8_t *bitmap)
{
    size_t kept = 0;
    for (size_t i = 0; i < L->size[2]; i++) kept += (size_t)__builtin_popcount(bitmap[i]);
    if (L->nel % 8 && L->size[2] && (bitmap[L->size[2] - 1] >> (L->nel % 8))) return -1;
    if (kept < L->nexc) return -1;
    L->size[3] = kept;
    if (L->w == 2) L->size[4] = kept;
    return 0;
}

/* The absolute grid for f32 or bf16 (es = b32) without a bitmap, the common case:
 * recon_abs and the rounding to the dtype, without the generic element access. */
static inline int inverse_abs_fast(unsigned es, const quant_layout *L, const uint8_t *const *plane, const uint8_t *base,
                                   uint8_t *out)
{
    const uint8_t *hi = plane[3], *lo = L->w == 2 ? plane[4] : NULL, *exc = plane[3 + L->w];
    uint32_t maxc = L->w == 1 ? 255u : 65535u;
    size_t ne = 0;
    for (size_t i = 0; i < L->nel; i++) {
        uint32_t code = lo ? ((uint32_t)hi[i] << 8) | lo[i] : hi[i];
        if (code >= maxc - 1) {
            if (code != maxc || ne >= L->nexc) return -1;
            memcpy(out + es * i, exc + es * ne++, es);
            continue;
        }
        double p = base ? dt_ld_b32(es, base + es * i) : 0;
        if (!(p - p == 0)) p = 0;
        int64_t c = (int64_t)(code >> 1) ^ -(int64_t)(code & 1); /* zigzag back */
        dt_st_b32(es, out + es * i, recon_abs(p, c + L->q0, L->step));
    }
    return ne == L->nexc ? 0 : -1;
}

int quant_inverse(const quant_layout *L, ckpz_dtype dt, const uint8_t *const *plane, const uint8_t *base, size_t n,
                  uint8_t *out)
{
    if (!(L->flags & QUANT_F_BASE)) base = NULL; /* coded stand-alone in a based entry */
    unsigned b32 = dtype_b32(dtype_get(dt));
    if (L->mode == QM_ABS && b32 && !(L->flags & QUANT_F_BITMAP)) {
        if (inverse_abs_fast(b32, L, plane, base, out)) return -1;
        memcpy(out + L->nel * b32, plane[L->nplanes - 1], n - L->nel * b32);
        return 0;
    }
    unsigned es = ckpz_dtype_size(dt);
    size_t nel = L->nel, kc = 0, ne = 0, kept = L->size[3];
    const uint8_t *params = plane[1], *bitmap = (L->flags & QUANT_F_BITMAP) ? plane[2] : NULL;
    const uint8_t *hi = plane[3], *lo = L->w == 2 ? plane[4] : NULL, *exc = plane[3 + L->w];
    uint32_t maxc = L->w == 1 ? 255u : 65535u, half = (maxc - 1) / 2;
    int sym = (L->flags & QUANT_F_SYM) != 0;
    exp_cache ec;
    if (L->mode == QM_PREL) exp_cache_init(&ec);
    double inv = L->step > 0 ? 1.0 / L->step : 0;
    size_t gi = 0, gleft = L->first;
    float go = 0, gs = 0;
    for (size_t i = 0; i < nel; i++) {
        uint8_t *op = out + i * es;
        const uint8_t *bp = base ? base + i * es : NULL;
        double p = L->mode == QM_AFFINE ? affine_pred(dt, base, out, L->row, i) : bp ? ld_el(dt, bp) : 0;
        if (!isfinite(p)) p = 0;
        if (L->mode == QM_AFFINE) {
            if (gleft == 0) {
                gi++;
                gleft = L->group;
            }
            gleft--;
            memcpy(&go, params + gi * 8, 4);
            memcpy(&gs, params + gi * 8 + 4, 4);
        }
        if (bitmap && !(bitmap[i >> 3] >> (i & 7) & 1)) {
            st_el(dt, op, p);
            continue;
        }
        if (kc >= kept) return -1;
        uint32_t code = lo ? ((uint32_t)hi[kc] << 8) | lo[kc] : hi[kc];
        kc++;
        if (code == maxc) {
            if (ne >= L->nexc) return -1;
            memcpy(op, exc + ne * es, es);
            ne++;
            continue;
        }
        if (L->mode == QM_AFFINE) {
            st_el(dt, op, recon_affine(p, go, gs, code, sym, half));
        } else if (L->mode == QM_ABS) {
            if (code > maxc - 2) return -1;
            uint64_t z = code;
            int64_t c = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
            st_el(dt, op, recon_abs(p, c + L->q0, L->step));
        } else { /* QM_PREL */
            if (code == maxc - 1) {
                st_el(dt, op, 0.0);
                continue;
            }
            int ng = code & 1;
            uint64_t z = code >> 1;
            int64_t c = (z & 1) ? -(int64_t)(z >> 1) - 1 : (int64_t)(z >> 1);
            int64_t pr = bp ? prel_pred(ld_el(dt, bp), inv) : L->q0;
            st_el(dt, op, recon_prel(&ec, c + pr, L->step, ng));
        }
    }
    if (kc != kept || ne != L->nexc) return -1;
    memcpy(out + nel * es, plane[L->nplanes - 1], n - nel * es);
    return 0;
}
