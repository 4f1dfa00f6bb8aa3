/* dtype.c — the element type table (dtype.h): one row per ckpz_dtype, written once as
 * an X-macro so that the compiler checks it is complete (a row for every value, each at
 * its own number, none twice) and so that names, sizes, bit layouts and the numbers
 * stored in the container cannot drift apart.
 */
#include "dtype.h"

#include <math.h>
#include <strings.h>

#include "bytes.h"

/* ---- values ------------------------------------------------------------------------- */

/* A float of ebits exponent and mbits mantissa bits in the low bits of v (IEEE-style:
 * bias 2^(ebits-1) - 1, subnormals at exponent 0). inf: the all-ones exponent means
 * infinity or NaN; without it (f8e4m3fn) only an all-ones exponent and mantissa is NaN. */
static double minifloat(uint32_t v, unsigned ebits, unsigned mbits, int inf)
{
    uint32_t e = (v >> mbits) & ((1u << ebits) - 1), m = v & ((1u << mbits) - 1);
    int bias = (1 << (ebits - 1)) - 1;
    double x;
    if (e == (1u << ebits) - 1 && (inf || m == (1u << mbits) - 1)) x = inf && !m ? INFINITY : NAN;
    else if (e == 0) x = ldexp((double)m, 1 - bias - (int)mbits);
    else x = ldexp((double)(m | 1u << mbits), (int)e - bias - (int)mbits);
    return (v >> (ebits + mbits)) & 1 ? -x : x;
}

static double ld_bytes(const uint8_t *p) { return p[0]; }
static double ld_bf16(const uint8_t *p) { return dt_ld_b32(2, p); }
static double ld_f16(const uint8_t *p) { return minifloat(ld16(p), 5, 10, 1); }
static double ld_f32(const uint8_t *p) { return dt_ld_b32(4, p); }
static double ld_f64(const uint8_t *p) { return ldf64(p); }
static double ld_e4m3(const uint8_t *p) { return minifloat(p[0], 4, 3, 0); }
static double ld_e5m2(const uint8_t *p) { return minifloat(p[0], 5, 2, 1); }
static double ld_i8(const uint8_t *p) { return (int8_t)p[0]; }
static double ld_i16(const uint8_t *p) { return (int16_t)ld16(p); }
static double ld_i32(const uint8_t *p) { return (int32_t)ld32(p); }
static double ld_i64(const uint8_t *p) { return (double)(int64_t)ld64(p); }
static double ld_u16(const uint8_t *p) { return ld16(p); }
static double ld_u32(const uint8_t *p) { return ld32(p); }
static double ld_u64(const uint8_t *p) { return (double)ld64(p); }

static void st_bf16(uint8_t *p, double v) { dt_st_b32(2, p, v); }
static void st_f32(uint8_t *p, double v) { dt_st_b32(4, p, v); }
static void st_f64(uint8_t *p, double v) { stf64(p, v); }

/* Half precision, rounded to nearest, ties to even, through float (the double -> float
 * step rounds once, the float -> half step once more; lossy coding's encoder and decoder
 * both do exactly this, so the value restored is the one checked against the bound). */
static void st_f16(uint8_t *p, double v)
{
    float f = (float)v;
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu, h;
    if (a >= 0x7f800000u) {
        h = s | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0);
    } else if (a >= 0x477ff000u) { /* rounds to >= 65520: Inf */
        h = s | 0x7c00u;
    } else if (a < 0x38800000u) { /* below 2^-14: subnormal half */
        float t;
        memcpy(&t, &a, 4);
        double sub = (double)t * 16777216.0; /* in units of 2^-24, exact */
        h = s | (uint32_t)nearbyint(sub);    /* default rounding mode: ties to even */
    } else {
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        h = s | ((r - 0x38000000u) >> 13);
    }
    st16(p, (uint16_t)h);
}

/* ---- the table ----------------------------------------------------------------------
 * X(id, fields...): the row of CKPZ_DTYPE_id. Floats: ebits/mbits, the float layout with
 * the exponent in the first plane(s) (f64's 11 bits reach into the second), mantissa
 * bytes after; 1-byte floats are one plane of exponent-like bytes. Integers: their own
 * layout, every plane of the integer role. */
#define FLOAT(e, m, expl) .cls = DT_FLOAT, .ebits = e, .mbits = m, .exp_planes = expl, .role = DT_ROLE_MANTISSA
#define INT(c) .cls = c, .role = DT_ROLE_INT
/* clang-format off */
#define DTYPE_ROWS(X)                                                                                           \
    X(NONE, .name = "bytes", .aliases = {"none", "opaque"}, .size = 1, .cls = DT_OPAQUE, .role = DT_ROLE_OPAQUE, \
      .layout = DT_LAYOUT_BYTES, .to_double = ld_bytes)                                                          \
    X(BF16, .name = "bf16", .aliases = {"bfloat16"}, .size = 2, FLOAT(8, 7, 1), .layout = DT_LAYOUT_FLOAT,       \
      .to_double = ld_bf16, .from_double = st_bf16, .safetensors = "BF16", .numpy = {"<V2", "|V2"},            \
      .torch = {"BFloat16Storage", "bfloat16"})                                                                 \
    X(F16, .name = "f16", .aliases = {"fp16", "float16", "half"}, .size = 2, FLOAT(5, 10, 1),                   \
      .layout = DT_LAYOUT_FLOAT, .to_double = ld_f16, .from_double = st_f16, .safetensors = "F16",              \
      .numpy = {"<f2"}, .torch = {"HalfStorage", "float16", "half"})                                            \
    X(F32, .name = "f32", .aliases = {"fp32", "float32", "float"}, .size = 4, FLOAT(8, 23, 1),                  \
      .layout = DT_LAYOUT_FLOAT, .to_double = ld_f32, .from_double = st_f32, .safetensors = "F32",              \
      .numpy = {"<f4"}, .torch = {"FloatStorage", "float32", "float"})                                          \
    X(F64, .name = "f64", .aliases = {"fp64", "float64", "double"}, .size = 8, FLOAT(11, 52, 2),                \
      .layout = DT_LAYOUT_FLOAT, .to_double = ld_f64, .from_double = st_f64, .safetensors = "F64",              \
      .numpy = {"<f8"}, .torch = {"DoubleStorage", "float64", "double"})                                        \
    X(F8E4M3, .name = "f8e4m3", .aliases = {"float8_e4m3fn", "f8_e4m3"}, .size = 1, FLOAT(4, 3, 1),             \
      .layout = DT_LAYOUT_BYTES, .to_double = ld_e4m3, .safetensors = "F8_E4M3", .torch = {"float8_e4m3fn"})   \
    X(F8E5M2, .name = "f8e5m2", .aliases = {"float8_e5m2", "f8_e5m2"}, .size = 1, FLOAT(5, 2, 1),               \
      .layout = DT_LAYOUT_BYTES, .to_double = ld_e5m2, .safetensors = "F8_E5M2", .torch = {"float8_e5m2"})     \
    X(I8, .name = "i8", .aliases = {"int8"}, .size = 1, INT(DT_SINT), .layout = DT_LAYOUT_BYTES,                \
      .to_double = ld_i8, .safetensors = "I8", .numpy = {"|i1", "<i1"}, .torch = {"CharStorage", "int8"})       \
    X(I16, .name = "i16", .aliases = {"int16"}, .size = 2, INT(DT_SINT), .layout = DT_LAYOUT_INT,               \
      .to_double = ld_i16, .safetensors = "I16", .numpy = {"<i2"}, .torch = {"ShortStorage", "int16", "short"}) \
    X(I32, .name = "i32", .aliases = {"int32"}, .size = 4, INT(DT_SINT), .layout = DT_LAYOUT_INT,               \
      .to_double = ld_i32, .safetensors = "I32", .numpy = {"<i4"}, .torch = {"IntStorage", "int32", "int"})     \
    X(I64, .name = "i64", .aliases = {"int64"}, .size = 8, INT(DT_SINT), .layout = DT_LAYOUT_INT,               \
      .to_double = ld_i64, .safetensors = "I64", .numpy = {"<i8"}, .torch = {"LongStorage", "int64", "long"})   \
    X(U8, .name = "u8", .aliases = {"uint8"}, .size = 1, INT(DT_UINT), .layout = DT_LAYOUT_BYTES,               \
      .to_double = ld_bytes, .safetensors = "U8", .numpy = {"|u1", "<u1"},                                      \
      .torch = {"ByteStorage", "UntypedStorage", "_UntypedStorage", "uint8"})                                   \
    X(U16, .name = "u16", .aliases = {"uint16"}, .size = 2, INT(DT_UINT), .layout = DT_LAYOUT_INT,              \
      .to_double = ld_u16, .safetensors = "U16", .numpy = {"<u2"})                                              \
    X(U32, .name = "u32", .aliases = {"uint32"}, .size = 4, INT(DT_UINT), .layout = DT_LAYOUT_INT,              \
      .to_double = ld_u32, .safetensors = "U32", .numpy = {"<u4"})                                              \
    X(U64, .name = "u64", .aliases = {"uint64"}, .size = 8, INT(DT_UINT), .layout = DT_LAYOUT_INT,              \
      .to_double = ld_u64, .safetensors = "U64", .numpy = {"<u8"})                                              \
    X(BOOL, .name = "bool", .size = 1, INT(DT_BOOL), .layout = DT_LAYOUT_BYTES, .to_double = ld_bytes,          \
      .safetensors = "BOOL", .numpy = {"|b1", "<b1"}, .torch = {"BoolStorage", "bool"})
/* clang-format on */

#define DT_ROW(id, ...) [CKPZ_DTYPE_##id] = {__VA_ARGS__},
const dtype_info dtype_table[CKPZ_DTYPE_COUNT_] = {DTYPE_ROWS(DT_ROW)};

/* Complete: every id is a ckpz_dtype (else CKPZ_DTYPE_id is undeclared), none appears twice
 * (a duplicate enumerator), the rows come in the enum's order, and there are as many
 * rows as values. */
#define DT_SEQ(id, ...) DT_SEQ_##id,
enum { DTYPE_ROWS(DT_SEQ) DT_ROWS };
#define DT_CHECK(id, ...) _Static_assert((int)DT_SEQ_##id == (int)CKPZ_DTYPE_##id, "dtype.c: row " #id " out of order");
DTYPE_ROWS(DT_CHECK)
_Static_assert((int)DT_ROWS == (int)CKPZ_DTYPE_COUNT_, "dtype.c: one row per ckpz_dtype value");

/* ---- names -------------------------------------------------------------------------- */

static int name_is(const char *name, const char *s, size_t len)
{
    return strlen(name) == len && memcmp(name, s, len) == 0;
}

ckpz_dtype dtype_find(enum dt_naming naming, const char *s, size_t len)
{
    for (unsigned t = 1; t < CKPZ_DTYPE_COUNT_; t++) {
        const dtype_info *d = &dtype_table[t];
        const char *const *list;
        unsigned n;
        switch (naming) {
        case DT_NAMES_SAFETENSORS: list = &d->safetensors, n = 1; break;
        case DT_NAMES_NUMPY: list = d->numpy, n = 3; break;
        case DT_NAMES_TORCH: list = d->torch, n = 5; break;
        default: list = &d->name, n = 1; break;
        }
        for (unsigned k = 0; k < n && list[k]; k++)
            if (name_is(list[k], s, len)) return (ckpz_dtype)t;
    }
    return CKPZ_DTYPE_COUNT_;
}

const char *ckpz_dtype_name(ckpz_dtype t) { return (unsigned)t < CKPZ_DTYPE_COUNT_ ? dtype_table[t].name : NULL; }

unsigned ckpz_dtype_size(ckpz_dtype t) { return (unsigned)t < CKPZ_DTYPE_COUNT_ ? dtype_table[t].size : 1; }

ckpz_dtype ckpz_dtype_from_name(const char *name)
{
    if (!name) return CKPZ_DTYPE_NONE;
    for (int t = 1; t < CKPZ_DTYPE_COUNT_; t++) {
        if (!strcasecmp(name, dtype_table[t].name)) return (ckpz_dtype)t;
        for (int a = 0; a < 4 && dtype_table[t].aliases[a]; a++)
            if (!strcasecmp(name, dtype_table[t].aliases[a])) return (ckpz_dtype)t;
    }
    return CKPZ_DTYPE_NONE;
}

ckpz_error ckpz_dtype_to_double(ckpz_dtype t, const void *src, size_t n, double *dst)
{
    if ((unsigned)t >= CKPZ_DTYPE_COUNT_ || (n && (!src || !dst))) return CKPZ_ERR_PARAM;
    const dtype_info *d = &dtype_table[t];
    const uint8_t *p = (const uint8_t *)src;
    for (size_t i = 0; i < n; i++) dst[i] = d->to_double(p + i * d->size);
    return CKPZ_OK;
}

const char *ckpz_dtype_format_name(ckpz_dtype t, ckpz_input_format f)
{
    if ((unsigned)t >= CKPZ_DTYPE_COUNT_ || t == CKPZ_DTYPE_NONE) return NULL;
    const dtype_info *d = &dtype_table[t];
    switch (f) {
    case CKPZ_INPUT_SAFETENSORS: return d->safetensors;
    case CKPZ_INPUT_NPY:
    case CKPZ_INPUT_NPZ: return d->numpy[0];
    case CKPZ_INPUT_TORCH: return d->torch[0];
    default: return d->name;
    }
}
