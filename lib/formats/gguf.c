/* gguf.c — the GGUF reader (llama.cpp's model format; see formats.h).
 *
 * Layout (little-endian, version 2 or 3): "GGUF", version u32, tensor count u64,
 * key-value count u64; the key-values (key: u64 length + bytes; value type u32; the
 * value: a scalar, a string, or an array of a type and a u64 count, arrays nesting);
 * the tensor infos (name string, n_dims u32, n_dims u64 dimensions innermost first,
 * GGML type u32, data offset u64); zero padding to the alignment (the u32 key
 * general.alignment, 32 without it); then the data section, each tensor at its offset
 * from the section's start (a multiple of the alignment).
 *
 * The header, key-values and tensor infos stay opaque bytes: they are kept exactly and
 * only read to find the tensors. F32, F16, BF16, F64 and the integer types become
 * tensors of those dtypes, shape outermost first (GGUF lists it innermost first);
 * block-quantised types (Q8_0, Q4_K, ...) become u8 tensors of [rows..., bytes per
 * row] named "NAME:q8_0", so that listings show their GGML type and delta coding
 * matches them by name. The whole header must lie in the prefix (FMT_PROBE_MAX).
 *
 * The file is hostile: every count, length and dimension is checked against the bytes
 * that remain before use, arrays nest at most GGUF_MAX_DEPTH deep, and what the reader
 * allocates (one record per tensor info, each at least 24 bytes of header) is bounded by
 * the header's size. A header it cannot follow makes the file opaque after the magic;
 * a tensor it cannot vouch for (a type it does not know, a size that overflows or does
 * not divide into blocks, an offset off the alignment, data past the end of the file,
 * a name with a NUL, ranges that overlap) leaves its bytes opaque. Only a missing magic
 * or version, or an unknown version, is "not GGUF" (FMT_ERROR).
 */
#include <stdlib.h>
#include <string.h>

#include "common/grow.h"
#include "formats.h"

#define GGUF_MAX_DEPTH 8   /* nested arrays followed; deeper ones make the header opaque */
#define GGUF_MAX_DIMS 16   /* GGML has 4; more cannot be a GGML tensor */
#define GGUF_INFO_MIN 24   /* the smallest tensor info: empty name, no dimension */

/* GGML types, by id: block size in elements, bytes per block, and the ckpz dtype when
 * the elements are plain numbers (their names are the dtype table's), else NONE and the
 * block format's name, which its tensors' u8 rows carry (NAME:TYPE). */
/* clang-format off */
static const struct {
    const char *name;
    uint16_t blck, size;
    ckpz_dtype dtype;
} ggml_types[] = {
    [0] = {NULL, 1, 4, CKPZ_DTYPE_F32},       [1] = {NULL, 1, 2, CKPZ_DTYPE_F16},
    [2] = {"q4_0", 32, 18, CKPZ_DTYPE_NONE},   [3] = {"q4_1", 32, 20, CKPZ_DTYPE_NONE},
    [6] = {"q5_0", 32, 22, CKPZ_DTYPE_NONE},   [7] = {"q5_1", 32, 24, CKPZ_DTYPE_NONE},
    [8] = {"q8_0", 32, 34, CKPZ_DTYPE_NONE},   [9] = {"q8_1", 32, 36, CKPZ_DTYPE_NONE},
    [10] = {"q2_k", 256, 84, CKPZ_DTYPE_NONE}, [11] = {"q3_k", 256, 110, CKPZ_DTYPE_NONE},
    [12] = {"q4_k", 256, 144, CKPZ_DTYPE_NONE}, [13] = {"q5_k", 256, 176, CKPZ_DTYPE_NONE},
    [14] = {"q6_k", 256, 210, CKPZ_DTYPE_NONE}, [15] = {"q8_k", 256, 292, CKPZ_DTYPE_NONE},
    [16] = {"iq2_xxs", 256, 66, CKPZ_DTYPE_NONE}, [17] = {"iq2_xs", 256, 74, CKPZ_DTYPE_NONE},
    [18] = {"iq3_xxs", 256, 98, CKPZ_DTYPE_NONE}, [19] = {"iq1_s", 256, 50, CKPZ_DTYPE_NONE},
    [20] = {"iq4_nl", 32, 18, CKPZ_DTYPE_NONE}, [21] = {"iq3_s", 256, 110, CKPZ_DTYPE_NONE},
    [22] = {"iq2_s", 256, 82, CKPZ_DTYPE_NONE}, [23] = {"iq4_xs", 256, 136, CKPZ_DTYPE_NONE},
    [24] = {NULL, 1, 1, CKPZ_DTYPE_I8},        [25] = {NULL, 1, 2, CKPZ_DTYPE_I16},
    [26] = {NULL, 1, 4, CKPZ_DTYPE_I32},      [27] = {NULL, 1, 8, CKPZ_DTYPE_I64},
    [28] = {NULL, 1, 8, CKPZ_DTYPE_F64},      [29] = {"iq1_m", 256, 56, CKPZ_DTYPE_NONE},
    [30] = {NULL, 1, 2, CKPZ_DTYPE_BF16},    [34] = {"tq1_0", 256, 54, CKPZ_DTYPE_NONE},
    [35] = {"tq2_0", 256, 66, CKPZ_DTYPE_NONE}, [39] = {"mxfp4", 32, 17, CKPZ_DTYPE_NONE},
};
/* clang-format on */
#define GGML_NTYPES (sizeof ggml_types / sizeof ggml_types[0])

/* Metadata value types: the bytes of a scalar (0: string, array, or not a type). */
enum { GGUF_STRING = 8, GGUF_ARRAY = 9, GGUF_NVTYPES = 13 };
static const uint8_t scalar_size[GGUF_NVTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

/* A cursor over the prefix. `need` records how far a read wanted to go when the
 * prefix ended first; `bad` that the header cannot be followed. */
typedef struct {
    const uint8_t *p;
    size_t len, i;
    uint64_t need;
    const char *bad;
} cur;

static uint64_t ld(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned k = n; k-- > 0;) v = v << 8 | p[k];
    return v;
}

/* 1 when n more bytes are at hand; else records what is wanted (0). */
static int have(cur *c, uint64_t n)
{
    if (n <= c->len - c->i) return 1;
    if (c->i + n < c->i || c->i + n > UINT64_MAX / 2) c->bad = "a length runs past any file";
    else if (!c->need) c->need = c->i + n;
    return 0;
}

static int get(cur *c, unsigned n, uint64_t *v)
{
    if (!have(c, n)) return -1;
    *v = ld(c->p + c->i, n);
    c->i += n;
    return 0;
}

static int skip(cur *c, uint64_t n)
{
    if (!have(c, n)) return -1;
    c->i += (size_t)n;
    return 0;
}

/* A string: its length, then the bytes; *s and *n point at them in the prefix. */
static int string(cur *c, const uint8_t **s, uint64_t *n)
{
    if (get(c, 8, n) || !have(c, *n)) return -1;
    *s = c->p + c->i;
    c->i += (size_t)*n;
    return 0;
}

/* Skips a value of type t; arrays nest at most GGUF_MAX_DEPTH deep. */
static int value(cur *c, uint64_t t, int depth)
{
    if (t >= GGUF_NVTYPES) {
        c->bad = "unknown metadata value type";
        return -1;
    }
    if (scalar_size[t]) return skip(c, scalar_size[t]);
    const uint8_t *s;
    uint64_t n;
    if (t == GGUF_STRING) return string(c, &s, &n);
    uint64_t et, count;
    if (depth >= GGUF_MAX_DEPTH) {
        c->bad = "metadata arrays nested too deep";
        return -1;
    }
    if (get(c, 4, &et) || get(c, 8, &count)) return -1;
    if (et >= GGUF_NVTYPES) {
        c->bad = "unknown metadata value type";
        return -1;
    }
    if (scalar_size[et]) {
        if (count > UINT64_MAX / scalar_size[et]) {
            c->bad = "a metadata array runs past any file";
            return -1;
        }
        return skip(c, count * scalar_size[et]);
    }
    /* strings and arrays: each takes at least 8 bytes, so a count beyond what remains
     * is found before looping over it */
    if (count > (c->len - c->i) / 8) {
        have(c, count > UINT64_MAX / 8 ? UINT64_MAX : count * 8);
        return -1;
    }
    for (uint64_t k = 0; k < count; k++)
        if (value(c, et, depth + 1)) return -1;
    return 0;
}

typedef struct {
    const uint8_t *name;
    uint64_t name_len;
    uint32_t ndim;
    const uint8_t *dims;   /* ndim u64, innermost first, in the prefix */
    uint32_t type;
    uint64_t off, bytes;   /* absolute range (valid when ok) */
    int ok;
    size_t idx;
} g_info;

static int info_cmp(const void *a, const void *b)
{
    const g_info *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The bytes of a tensor of type t and its dimensions, or UINT64_MAX when this reader
 * cannot vouch for them (unknown type, overflow, a row that is not whole blocks). */
static uint64_t tensor_bytes(const g_info *g)
{
    if (g->type >= GGML_NTYPES || !ggml_types[g->type].size) return UINT64_MAX;
    uint64_t n = 1;
    int zero = 0;
    for (uint32_t d = 0; d < g->ndim; d++) {
        uint64_t k = ld(g->dims + 8 * (size_t)d, 8);
        if (k == 0) zero = 1;
        else if (n > UINT64_MAX / k) return UINT64_MAX;
        else n *= k;
    }
    uint64_t row = g->ndim ? ld(g->dims, 8) : 1, blck = ggml_types[g->type].blck;
    if (row % blck) return UINT64_MAX;
    if (zero) return 0;
    if ((n / blck) > UINT64_MAX / ggml_types[g->type].size) return UINT64_MAX;
    return n / blck * ggml_types[g->type].size;
}

/* Pushes one tensor: its dtype, or u8 rows of its blocks named NAME:TYPE. */
static int push_info(fmt_list *out, const g_info *g)
{
    uint64_t shape[GGUF_MAX_DIMS];
    for (uint32_t d = 0; d < g->ndim; d++) shape[g->ndim - 1 - d] = ld(g->dims + 8 * (size_t)d, 8);
    ckpz_dtype dt = ggml_types[g->type].dtype;
    if (dt != CKPZ_DTYPE_NONE)
        return fmt_push(out, dt, (const char *)g->name, (size_t)g->name_len, g->ndim, shape, g->off, g->bytes);
    const char *tn = ggml_types[g->type].name;
    size_t nl = (size_t)g->name_len, tl = strlen(tn);
    char *name = malloc(nl + 1 + tl);
    if (!name) return -1;
    memcpy(name, g->name, nl);
    name[nl] = ':';
    memcpy(name + nl + 1, tn, tl);
    /* block types have whole blocks per row, so a row has at least one dimension */
    shape[g->ndim - 1] = shape[g->ndim - 1] / ggml_types[g->type].blck * ggml_types[g->type].size;
    int rc = fmt_push(out, CKPZ_DTYPE_U8, name, nl + 1 + tl, g->ndim, shape, g->off, g->bytes);
    free(name);
    return rc;
}

static fmt_status gguf_describe(const uint8_t *p, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                                size_t *need, char *why, size_t whylen)
{
    if (fmt_begin(out, rq, &len, total, need, why, whylen)) return FMT_ERROR;
    int eof = total != CKPZ_SIZE_UNKNOWN && len >= total;
    static const uint8_t magic[4] = {'G', 'G', 'U', 'F'};
    if (memcmp(p, magic, len < 4 ? len : 4) != 0) {
        fmt_why(why, whylen, "no GGUF magic");
        return FMT_ERROR;
    }
    if (len < 8) { /* the magic and the version decide whether this is GGUF */
        if (eof) {
            fmt_why(why, whylen, "file of %zu bytes is too short for a GGUF header", len);
            return FMT_ERROR;
        }
        *need = total != CKPZ_SIZE_UNKNOWN && total < 64 ? (size_t)total : 64;
        return FMT_NEED_MORE;
    }
    uint64_t version = ld(p + 4, 4), ntensors = 0, nkv = 0;
    if (version != 2 && version != 3) {
        fmt_why(why, whylen, "GGUF version %llu (this reader knows 2 and 3, little-endian)",
                (unsigned long long)version);
        return FMT_ERROR;
    }
    cur c = {p, len, 8, 0, NULL};
    g_info *inf = NULL;
    size_t ninf = 0, cap = 0;
    uint64_t align = 32;
    fmt_status st = FMT_DONE;
    if (get(&c, 8, &ntensors) || get(&c, 8, &nkv)) goto short_;
    if (ntensors > FMT_PROBE_MAX / GGUF_INFO_MIN || nkv > FMT_PROBE_MAX / 13) {
        c.bad = "counts larger than any header";
        goto bad;
    }
    for (uint64_t k = 0; k < nkv; k++) {
        const uint8_t *key;
        uint64_t kl, t;
        if (string(&c, &key, &kl) || get(&c, 4, &t)) goto short_;
        if (kl == 17 && !memcmp(key, "general.alignment", 17)) {
            uint64_t a;
            if (t != 4) { /* u32 */
                c.bad = "general.alignment is not a u32";
                goto bad;
            }
            if (get(&c, 4, &a)) goto short_;
            if (a == 0 || a % 8 || a > (1u << 30)) {
                c.bad = "general.alignment is not a multiple of 8";
                goto bad;
            }
            align = a;
        } else if (value(&c, t, 0)) {
            goto short_;
        }
    }
    for (uint64_t k = 0; k < ntensors; k++) {
        g_info g;
        memset(&g, 0, sizeof g);
        uint64_t nd, t;
        if (string(&c, &g.name, &g.name_len) || get(&c, 4, &nd)) goto short_;
        if (nd > GGUF_MAX_DIMS) {
            c.bad = "a tensor with more dimensions than GGML has";
            goto bad;
        }
        g.ndim = (uint32_t)nd;
        g.dims = c.p + c.i;
        if (skip(&c, 8 * nd) || get(&c, 4, &t) || get(&c, 8, &g.off)) goto short_;
        g.type = (uint32_t)(t > UINT32_MAX ? UINT32_MAX : t);
        g.idx = (size_t)k;
        if (grow_array((void **)&inf, &cap, ninf + 1, sizeof *inf)) {
            st = FMT_NOMEM;
            goto done;
        }
        inf[ninf++] = g;
    }
    /* the data section starts at the next multiple of the alignment */
    uint64_t data = c.i + (align - c.i % align) % align;
    for (size_t k = 0; k < ninf; k++) {
        g_info *g = &inf[k];
        g->bytes = tensor_bytes(g);
        g->ok = g->bytes != UINT64_MAX && g->off % align == 0 && g->off <= UINT64_MAX - data &&
                g->bytes <= UINT64_MAX - data - g->off && !memchr(g->name, 0, (size_t)g->name_len);
        if (g->ok) {
            g->off += data;
            if (total != CKPZ_SIZE_UNKNOWN && g->off + g->bytes > total) g->ok = 0; /* data past the end of the file */
        }
    }
    /* keep the tensors in offset order; a run of tensors that overlap one another is
     * left opaque as a whole, an empty one inside another dropped */
    size_t nok = 0;
    for (size_t k = 0; k < ninf; k++)
        if (inf[k].ok) inf[nok++] = inf[k];
    if (nok > 1) qsort(inf, nok, sizeof *inf, info_cmp);
    out->format = CKPZ_INPUT_GGUF;
    for (size_t k = 0; k < nok;) {
        size_t j = k + 1, members = 1;
        uint64_t run_end = inf[k].off + inf[k].bytes;
        for (; j < nok && inf[j].off < run_end; j++) {
            if (!inf[j].bytes) continue; /* an empty tensor inside another holds no bytes: dropped */
            members++;
            if (inf[j].off + inf[j].bytes > run_end) run_end = inf[j].off + inf[j].bytes;
        }
        if (members == 1 && push_info(out, &inf[k])) {
            st = FMT_NOMEM;
            goto done;
        }
        k = j;
    }
    if (fmt_finish(out)) {
        st = FMT_NOMEM;
        goto done;
    }
    goto done;

short_:
    /* The prefix ended inside the header (or the header cannot be followed): ask for
     * more, at least twice as much (a long vocabulary then costs a few rounds), or
     * give up on it. */
    if (!c.bad) {
        if (eof || (total != CKPZ_SIZE_UNKNOWN && c.need > total)) {
            c.bad = "the file ends inside the header";
        } else if (c.need > FMT_PROBE_MAX) {
            c.bad = "a header larger than the limit";
        } else {
            uint64_t want = c.need > 2 * (uint64_t)len ? c.need : 2 * (uint64_t)len;
            if (want > FMT_PROBE_MAX) want = FMT_PROBE_MAX;
            if (total != CKPZ_SIZE_UNKNOWN && want > total) want = total;
            *need = (size_t)want;
            st = FMT_NEED_MORE;
            goto done;
        }
    }
bad:
    free(inf);
    return fmt_all_opaque(out, CKPZ_INPUT_GGUF, why, whylen, c.bad);
done:
    if (st != FMT_DONE) fmt_list_free(out);
    free(inf);
    return st;
}

static int gguf_sniff(const uint8_t *p, size_t len) { return len >= 4 && !memcmp(p, "GGUF", 4); }

const fmt_reader fmt_reader_gguf = {CKPZ_INPUT_GGUF, "gguf", gguf_sniff, gguf_describe, NULL, NULL};
