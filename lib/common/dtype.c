/* dtype.c — element types: names, sizes, parsing. One table so names, sizes and the
 * numbers stored in the container cannot drift apart. */
#include <string.h>
#include <strings.h>

#include "ckpz.h"

static const struct {
    const char *name;
    unsigned size;
    const char *aliases[3];
} dtypes[CKPZ_DTYPE_COUNT_] = {
    [CKPZ_DTYPE_NONE] = {"bytes", 1, {"none", "opaque", 0}},
    [CKPZ_DTYPE_BF16] = {"bf16", 2, {"bfloat16", 0, 0}},
    [CKPZ_DTYPE_F16] = {"f16", 2, {"fp16", "float16", "half"}},
    [CKPZ_DTYPE_F32] = {"f32", 4, {"fp32", "float32", "float"}},
    [CKPZ_DTYPE_F64] = {"f64", 8, {"fp64", "float64", "double"}},
    [CKPZ_DTYPE_F8E4M3] = {"f8e4m3", 1, {"float8_e4m3fn", "f8_e4m3", 0}},
    [CKPZ_DTYPE_F8E5M2] = {"f8e5m2", 1, {"float8_e5m2", "f8_e5m2", 0}},
    [CKPZ_DTYPE_I8] = {"i8", 1, {"int8", 0, 0}},
    [CKPZ_DTYPE_I16] = {"i16", 2, {"int16", 0, 0}},
    [CKPZ_DTYPE_I32] = {"i32", 4, {"int32", 0, 0}},
    [CKPZ_DTYPE_I64] = {"i64", 8, {"int64", 0, 0}},
    [CKPZ_DTYPE_U8] = {"u8", 1, {"uint8", 0, 0}},
    [CKPZ_DTYPE_U16] = {"u16", 2, {"uint16", 0, 0}},
    [CKPZ_DTYPE_U32] = {"u32", 4, {"uint32", 0, 0}},
    [CKPZ_DTYPE_U64] = {"u64", 8, {"uint64", 0, 0}},
    [CKPZ_DTYPE_BOOL] = {"bool", 1, {0, 0, 0}},
};

const char *ckpz_dtype_name(ckpz_dtype t)
{
    return (unsigned)t < CKPZ_DTYPE_COUNT_ ? dtypes[t].name : NULL;
}

unsigned ckpz_dtype_size(ckpz_dtype t) { return (unsigned)t < CKPZ_DTYPE_COUNT_ ? dtypes[t].size : 1; }

ckpz_dtype ckpz_dtype_from_name(const char *name)
{
    if (!name) return CKPZ_DTYPE_NONE;
    for (int t = 1; t < CKPZ_DTYPE_COUNT_; t++) {
        if (!strcasecmp(name, dtypes[t].name)) return (ckpz_dtype)t;
        for (int a = 0; a < 3 && dtypes[t].aliases[a]; a++)
            if (!strcasecmp(name, dtypes[t].aliases[a])) return (ckpz_dtype)t;
    }
    return CKPZ_DTYPE_NONE;
}
