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
    size_t kept = bits_set(bitmap, L->size[2]);
    if (L->nel % 8 && L->size[2] && (bitmap[L->size[2] - 1] >> (L->nel % 8))) return -1;
    if (kept < L->nexc) return -1;
    L->size[3] = kept;
    if (L->w == 2) L->size[4] = kept;
    return 0;
}

/* The element loop of one grid (mode) and element type, always inlined: quant_inverse
 * calls it with constants, so each (mode, b32) pair gets a loop of its own with the other
 * modes' branches compiled out and f32 or bf16 (b32 = 4 or 2) loaded and stored inline,
 * not through the dtype table's functions (b32 = 0: any float type, through them; the
 * same values either way). One loop for every grid and type took 2.1 times as long to
 * restore a `--lossy=auto` torch.save file (87% of it here). Returns 0, or -1 for codes
 * that do not match their planes. */
static inline __attribute__((always_inline)) int inverse_loop(int mode, unsigned b32, const quant_layout *L,
                                                              ckpz_dtype dt, const uint8_t *const *plane,
                                                              const uint8_t *base, uint8_t *out)
{
    unsigned es = b32 ? b32 : ckpz_dtype_size(dt);
    size_t nel = L->nel, kc = 0, ne = 0, kept = L->size[3];
    const uint8_t *params = plane[1], *bitmap = (L->flags & QUANT_F_BITMAP) ? plane[2] : NULL;
    const uint8_t *hi = plane[3], *lo = L->w == 2 ? plane[4] : NULL, *exc = plane[3 + L->w];
    uint32_t maxc = L->w == 1 ? 255u : 65535u, half = (maxc - 1) / 2;
    int sym = (L->flags & QUANT_F_SYM) != 0;
    exp_cache ec;
    pred_cache pc;
    if (mode == QM_PREL) exp_cache_init(&ec);
    if (mode == QM_PREL && base) pred_cache_init(&pc);
    double inv = L->step > 0 ? 1.0 / L->step : 0;
    size_t gi = 0, gleft = L->first;
    float go = 0, gs = 0;
    for (size_t i = 0; i < nel; i++) {
        uint8_t *op = out + i * es;
        const uint8_t *bp = base ? base + i * es : NULL;
        double p;
        if (mode == QM_AFFINE) {
            p = L->row ? (i >= L->row ? ld_fast(b32, dt, out + (i - L->row) * es) : 0) : bp ? ld_fast(b32, dt, bp) : 0;
            if (gleft == 0) {
                gi++;
                gleft = L->group;
            }
            gleft--;
            memcpy(&go, params + gi * 8, 4);
            memcpy(&gs, params + gi * 8 + 4, 4);
        } else {
            p = bp ? ld_fast(b32, dt, bp) : 0;
        }
        if (!isfinite(p)) p = 0;
        if (bitmap && !(bitmap[i >> 3] >> (i & 7) & 1)) {
            put_fast(b32, dt, op, p);
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
        if (mode == QM_AFFINE) {
            put_fast(b32, dt, op, recon_affine(p, go, gs, code, sym, half));
        } else if (mode == QM_ABS) {
            if (code > maxc - 2) return -1;
            int64_t c = unzigzag(code);
            put_fast(b32, dt, op, recon_abs(p, c + L->q0, L->step));
        } else { /* QM_PREL */
            if (code == maxc - 1) {
                put_fast(b32, dt, op, 0.0);
                continue;
            }
            int ng = code & 1;
            int64_t c = unzigzag(code >> 1);
            int64_t pr = bp ? prel_pred_cached(&pc, ld_fast(b32, dt, bp), inv) : L->q0;
            put_fast(b32, dt, op, recon_prel(&ec, c + pr, L->step, ng));
        }
    }
    return kc == kept && ne == L->nexc ? 0 : -1;
}

/* Below this many elements a chunk's table (inverse_table, inverse_prel16) costs more
 * than it saves. */
#define TABLE_MIN 4096

/* A grid with no base and one-byte codes (the log grid of exp_avg, coded stand-alone in
 * every file of a chain; any grid in a chain's first file): each code stands for one
 * value, so the 254 values are computed and rounded to f32 or bf16 (b32) once a chunk
 * and copied per element, the same bytes inverse_loop stores. Returns 0, -1 as it does. */
static inline __attribute__((always_inline)) int inverse_table(int mode, unsigned b32, const quant_layout *L,
                                                               const uint8_t *const *plane, uint8_t *out)
{
    uint8_t tab[256 * 4], zero[4] = {0, 0, 0, 0};
    exp_cache ec;
    if (mode == QM_PREL) exp_cache_init(&ec);
    for (uint32_t code = 0; code < 255; code++) {
        double v;
        if (mode == QM_ABS) {
            v = recon_abs(0, unzigzag(code) + L->q0, L->step);
        } else if (code == 254) {
            v = 0.0;
        } else {
            v = recon_prel(&ec, unzigzag(code >> 1) + L->q0, L->step, code & 1);
        }
        dt_st_b32(b32, tab + code * b32, v);
    }
    const uint8_t *bitmap = (L->flags & QUANT_F_BITMAP) ? plane[2] : NULL, *codes = plane[3], *exc = plane[4];
    size_t kc = 0, ne = 0, kept = L->size[3];
    for (size_t i = 0; i < L->nel; i++) {
        uint8_t *op = out + i * b32;
        if (bitmap && !(bitmap[i >> 3] >> (i & 7) & 1)) { /* pruned: the prediction, 0 */
            memcpy(op, zero, b32);
            continue;
        }
        if (kc >= kept) return -1;
        uint32_t code = codes[kc++];
        if (code == 255) {
            if (ne >= L->nexc) return -1;
            memcpy(op, exc + ne++ * b32, b32);
        } else if (mode == QM_ABS && code == 254) {
            return -1;
        } else {
            memcpy(op, tab + code * b32, b32);
        }
    }
    return kc == kept && ne == L->nexc ? 0 : -1;
}

/* The log grid of f32 values with no base and two-byte codes (weights in a chain's first
 * file, at pointwise-rel 1/128 some hundreds of magnitudes a chunk): each magnitude code
 * z = code >> 1 stands for one value, rounded to f32 once, when first met, into a table
 * of their bits (all ones: not yet; no value rounds to that NaN), and the sign bit set
 * for negative codes (the bits of -v are those of v with the top bit set). Codes are
 * laid around the chunk's centre, so z is small: the table holds z < PREL16_TAB, larger
 * ones are rounded each time. bf16's grids, as coarse as its 8 bits of precision, take
 * two-byte codes rarely (none on the corpus' or the tests' tensors): inverse_loop does
 * them. The same bytes inverse_loop stores; returns 0, -1 as it does. */
#define PREL16_TAB 4096
static int inverse_prel16(const quant_layout *L, const uint8_t *const *plane, uint8_t *out)
{
    uint32_t tab[PREL16_TAB];
    memset(tab, 0xff, sizeof tab);
    exp_cache ec;
    exp_cache_init(&ec);
    const uint8_t *bitmap = (L->flags & QUANT_F_BITMAP) ? plane[2] : NULL, *hi = plane[3], *lo = plane[4],
                  *exc = plane[5];
    size_t kc = 0, ne = 0, kept = L->size[3];
    for (size_t i = 0; i < L->nel; i++) {
        uint8_t *op = out + 4 * i;
        uint32_t u = 0;
        if (bitmap && !(bitmap[i >> 3] >> (i & 7) & 1)) { /* pruned: the prediction, 0 */
            st32(op, 0);
            continue;
        }
        if (kc >= kept) return -1;
        uint32_t code = ((uint32_t)hi[kc] << 8) | lo[kc];
        kc++;
        if (code == 65535) {
            if (ne >= L->nexc) return -1;
            memcpy(op, exc + 4 * ne++, 4);
            continue;
        }
        if (code != 65534) { /* 65534: zero */
            uint32_t z = code >> 1;
            if (z >= PREL16_TAB || tab[z] == 0xffffffffu) {
                uint8_t b[4];
                dt_st_b32(4, b, recon_prel(&ec, unzigzag(z) + L->q0, L->step, 0));
                u = ld32(b);
                if (z < PREL16_TAB) tab[z] = u;
            } else {
                u = tab[z];
            }
            u |= (code & 1) << 31;
        }
        st32(op, u);
    }
    return kc == kept && ne == L->nexc ? 0 : -1;
}

#define INVERSE_ALL_TYPES(mode)                                  \
    (b32 == 4   ? inverse_loop(mode, 4, L, dt, plane, base, out) \
     : b32 == 2 ? inverse_loop(mode, 2, L, dt, plane, base, out) \
                : inverse_loop(mode, 0, L, dt, plane, base, out))

int quant_inverse(const quant_layout *L, ckpz_dtype dt, const uint8_t *const *plane, const uint8_t *base, size_t n,
                  uint8_t *out)
{
    if (!(L->flags & QUANT_F_BASE)) base = NULL; /* coded stand-alone in a based entry */
    unsigned b32 = dtype_b32(dtype_get(dt)), es = ckpz_dtype_size(dt);
    int err, tables = !base && b32 && L->nel >= TABLE_MIN;
    if (tables && L->mode == QM_PREL && L->w == 2 && b32 == 4) err = inverse_prel16(L, plane, out);
    else if (tables && (L->mode == QM_ABS || L->mode == QM_PREL) && L->w == 1)
        err = L->mode == QM_ABS
                  ? (b32 == 4 ? inverse_table(QM_ABS, 4, L, plane, out) : inverse_table(QM_ABS, 2, L, plane, out))
                  : (b32 == 4 ? inverse_table(QM_PREL, 4, L, plane, out) : inverse_table(QM_PREL, 2, L, plane, out));
    else
        err = L->mode == QM_AFFINE ? INVERSE_ALL_TYPES(QM_AFFINE)
              : L->mode == QM_ABS  ? INVERSE_ALL_TYPES(QM_ABS)
                                   : INVERSE_ALL_TYPES(QM_PREL);
    if (err) return -1;
    memcpy(out + L->nel * es, plane[L->nplanes - 1], n - L->nel * es);
    return 0;
}
