/* dtype.h — the one table of element types (dtype.c): per ckpz_dtype its size, class and
 * bit layout, how the transform stage cuts it into byte planes and what each plane holds,
 * its value as a double and back, and its names in each file format ckpz reads. Every
 * stage and reader asks here, so a new dtype is one row in dtype.c (and its number in
 * ckpz.h): the table is checked complete at compile time, and nothing else in the
 * library names a dtype or switches on one.
 */
#ifndef CKPZ_DTYPE_H
#define CKPZ_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "ckpz.h"

enum dt_class { DT_OPAQUE = 0, DT_FLOAT, DT_SINT, DT_UINT, DT_BOOL };

/* How the transform stage cuts elements into planes (transforms/planes.h). */
enum dt_layout {
    DT_LAYOUT_BYTES = 0, /* one plane: the bytes as they are (1-byte types, opaque bytes) */
    DT_LAYOUT_FLOAT,     /* rotated left one bit (sign to bit 0), split most-significant first */
    DT_LAYOUT_INT        /* split most-significant first */
};

/* What a plane holds, for the entropy stage's choice (its hints, entropy/entropy.h). */
enum dt_role { DT_ROLE_OPAQUE = 0, DT_ROLE_EXPONENT, DT_ROLE_MANTISSA, DT_ROLE_INT };

/* Where a name comes from (dtype_find, ckpz_dtype_format_name). */
enum dt_naming { DT_NAMES_CKPZ = 0, DT_NAMES_SAFETENSORS, DT_NAMES_NUMPY, DT_NAMES_TORCH };

typedef struct dtype_info {
    const char *name;        /* ckpz's own: ckpz_dtype_name, --dtype, ckpz -l */
    const char *aliases[4];  /* also accepted by ckpz_dtype_from_name (any case) */
    unsigned size;           /* bytes per element */
    uint8_t cls;             /* enum dt_class; DT_FLOAT selects the predictor's order-preserving map */
    uint8_t ebits, mbits;    /* floats: exponent and stored mantissa bits, after one sign bit */
    uint8_t layout;          /* enum dt_layout */
    uint8_t exp_planes;      /* planes of the layout, from the first, that carry exponent bits */
    uint8_t role;            /* enum dt_role of the other planes */
    /* The element's value (little-endian): exact, NaN and infinities as they are. */
    double (*to_double)(const uint8_t *p);
    /* The nearest value of the type (ties to even), NaN kept NaN; NULL for the types no
     * stage writes values of (lossy coding takes floats of 2 bytes and more). */
    void (*from_double)(uint8_t *p, double v);
    const char *safetensors;  /* the header's "dtype" */
    const char *numpy[3];     /* .npy descr; ml_dtypes' bfloat16 is a 2-byte void */
    const char *torch[5];     /* in torch.save pickles: storage classes, then torch dtype names */
} dtype_info;

extern const dtype_info dtype_table[CKPZ_DTYPE_COUNT_];

/* The row of t (opaque bytes' for values out of range). */
static inline const dtype_info *dtype_get(ckpz_dtype t)
{
    return &dtype_table[(unsigned)t < CKPZ_DTYPE_COUNT_ ? (unsigned)t : 0];
}

static inline int dtype_is_float(ckpz_dtype t) { return dtype_get(t)->cls == DT_FLOAT; }

/* The type named s[0..len) (exact bytes, case-sensitive as the formats are) in the given
 * naming; CKPZ_DTYPE_COUNT_ when no type has that name. */
ckpz_dtype dtype_find(enum dt_naming naming, const char *s, size_t len);

/* Floats that are the top `size` bytes of an IEEE binary32 (f32: 4, bf16: 2): the hot
 * loops of lossy coding load and store them inline; to_double and from_double give the
 * same values. 0 for other types. */
static inline unsigned dtype_b32(const dtype_info *d)
{
    return d->cls == DT_FLOAT && d->ebits == 8 && (d->size == 2 || d->size == 4) ? d->size : 0;
}

static inline float dt_ld_b32(unsigned size, const uint8_t *p)
{
    uint32_t u = size == 2 ? (uint32_t)(p[0] | p[1] << 8) << 16
                           : (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Stores v rounded to the type; returns the stored value. */
static inline float dt_st_b32(unsigned size, uint8_t *p, double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    if (size == 4) {
        p[0] = (uint8_t)u, p[1] = (uint8_t)(u >> 8), p[2] = (uint8_t)(u >> 16), p[3] = (uint8_t)(u >> 24);
        return f;
    }
    if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x400000u; /* NaN stays NaN */
    else u += 0x7fffu + ((u >> 16) & 1u);                 /* to nearest, ties to even */
    u &= 0xffff0000u;
    p[0] = (uint8_t)(u >> 16), p[1] = (uint8_t)(u >> 24);
    memcpy(&f, &u, 4);
    return f;
}

#endif
