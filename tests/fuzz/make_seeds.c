/* make_seeds.c — writes the seed corpora of the per-parser harnesses
 * (tests/fuzz/corpus/<harness>/ for every fuzz_<harness>.c but decompress and
 * roundtrip, which make_corpus.c seeds). Not part of the default build; rerun it when a
 * format or an input layout changes, from the repository root (it reads
 * tests/data/torch/ and tests/data/compat/):
 *   cmake --build build --target fuzz_make_seeds && build/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
 * It overwrites its own seeds and leaves other files (crash-* regression inputs) alone.
 * Each seed is a valid input in the layout its harness documents (the control bytes
 * first), so that mutations start from the parsers' deep paths: real torch.save and
 * .npz files, safetensors and .npy headers of every dtype, pickles taken from the .pt
 * files, policies and models (the built-in one too), entropy streams of every codec
 * (and plain planes for rANS order 0's encode mode), chunk frames of every dtype,
 * transform and predictor (lossy and escape-coded ones included), and the records of
 * .ckpz files of every version. Output is deterministic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CKPZ_EXPERIMENTAL
#include "ckpz.h"
#include "codec/codec.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "entropy/ent_internal.h"
#include "formats/pickle.h"
#include "formats/zip.h"
#include "fuzz_base.h"
#include "predict/features.h"
#include "predict/mlp.h"
#include "transforms/ids.h"
#include "transforms/planes.h"
#include "transforms/policy.h"
#include "transforms/predict.h"

static const char *dir;
static size_t total_bytes, total_files;

static uint64_t s = 0x0123456789abcdefull;
static uint64_t rnd(void)
{
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}
static double gauss(void)
{
    double a = ((rnd() >> 11) + 1.0) / 9007199254740993.0, b = (rnd() >> 11) / 9007199254740992.0;
    return sqrt(-2 * log(a)) * cos(6.283185307179586 * b);
}

static void die(const char *what)
{
    fprintf(stderr, "make_seeds: %s\n", what);
    exit(1);
}

/* Writes corpus/<sub>/<name>: head[0..hn) then p[0..n). */
static void put2(const char *sub, const char *name, const void *head, size_t hn, const void *p, size_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *f = fopen(path, "wb");
    if (!f || (hn && fwrite(head, 1, hn, f) != hn) || (n && fwrite(p, 1, n, f) != n) || fclose(f)) {
        perror(path);
        exit(1);
    }
    total_bytes += hn + n;
    total_files++;
}
static void put(const char *sub, const char *name, const void *p, size_t n) { put2(sub, name, NULL, 0, p, n); }

static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *b = malloc(cap);
    for (;;) {
        if (!b) die("out of memory");
        len += fread(b + len, 1, cap - len, f);
        if (len < cap) break;
        b = realloc(b, cap *= 2);
    }
    fclose(f);
    *n = len;
    return b;
}

/* ---- formats ---- */

static size_t safetensors(uint8_t *p, const char *json_fmt, size_t pad_to, size_t data_len)
{
    size_t jl = strlen(json_fmt);
    size_t hl = pad_to > jl ? pad_to : jl;
    st64(p, hl);
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json_fmt, jl);
    for (size_t i = 0; i < data_len; i++) p[8 + hl + i] = (uint8_t)(gauss() * 40);
    return 8 + hl + data_len;
}

static size_t npy(uint8_t *p, int major, const char *dict, size_t data_len)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hl = ((pre + dl + 1 + 63) / 64) * 64 - pre;
    memcpy(p, "\x93NUMPY", 6);
    p[6] = (uint8_t)major;
    p[7] = 0;
    if (major == 1) st16(p + 8, (uint16_t)hl);
    else st32(p + 8, (uint32_t)hl);
    memset(p + pre, ' ', hl);
    memcpy(p + pre, dict, dl);
    p[pre + hl - 1] = '\n';
    for (size_t i = 0; i < data_len; i++) p[pre + hl + i] = (uint8_t)rnd();
    return pre + hl + data_len;
}

/* A stored zip of members (name, data), flag bit 3 (data descriptors) when desc. */
static size_t zip(uint8_t *p, int nm, const char *const *names, const uint8_t *const *data, const size_t *lens,
                  int desc)
{
    size_t at = 0;
    for (int i = 0; i < nm; i++) {
        size_t nl = strlen(names[i]);
        st32(p + at, 0x04034b50u);
        st16(p + at + 4, 20);
        st16(p + at + 6, desc ? 8 : 0);
        st16(p + at + 8, 0);
        st32(p + at + 10, 0);
        st32(p + at + 14, 0);
        st32(p + at + 18, desc ? 0 : (uint32_t)lens[i]);
        st32(p + at + 22, desc ? 0 : (uint32_t)lens[i]);
        st16(p + at + 26, (uint16_t)nl);
        st16(p + at + 28, 0);
        memcpy(p + at + 30, names[i], nl);
        at += 30 + nl;
        memcpy(p + at, data[i], lens[i]);
        at += lens[i];
        if (desc) {
            st32(p + at, 0x08074b50u);
            st32(p + at + 4, 0);
            st32(p + at + 8, (uint32_t)lens[i]);
            st32(p + at + 12, (uint32_t)lens[i]);
            at += 16;
        }
    }
    st32(p + at, 0x02014b50u); /* the start of a central directory: the walk stops there */
    memset(p + at + 4, 0, 42);
    return at + 46;
}

static void format_seeds(void)
{
    static uint8_t b[1 << 16], z[1 << 16];
    size_t n;
    /* safetensors */
    const char *st_json[] = {
        "{\"__metadata__\":{\"format\":\"pt\"},\"w.a\":{\"dtype\":\"BF16\",\"shape\":[4,8],\"data_offsets\":[0,64]},"
        "\"w.b\":{\"dtype\":\"F32\",\"shape\":[16],\"data_offsets\":[64,128]}}",
        "{\"a\":{\"dtype\":\"F64\",\"shape\":[2,2],\"data_offsets\":[0,32]},\"b\":{\"dtype\":\"I64\",\"shape\":[],"
        "\"data_offsets\":[32,40]},\"c\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[40,40]},"
        "\"d\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[40,43]}}",
        "{\"\\u00e9\\n\\\"x\":{\"dtype\":\"F16\",\"shape\":[1,1,1,5],\"data_offsets\":[0,10]},"
        "\"e\":{\"dtype\":\"F8_E4M3\",\"shape\":[6],\"data_offsets\":[10,16]},\"f\":{\"dtype\":\"F8_E5M2\","
        "\"shape\":[2],\"data_offsets\":[16,18]},\"g\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[18,20]}}",
        "{\"x\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]},\"y\":{\"dtype\":\"U16\",\"shape\":[4],"
        "\"data_offsets\":[4,12]},\"z\":{\"dtype\":\"U32\",\"shape\":[1],\"data_offsets\":[12,16]},"
        "\"q\":{\"dtype\":\"U64\",\"shape\":[1],\"data_offsets\":[16,24]},\"r\":{\"dtype\":\"I16\",\"shape\":[2],"
        "\"data_offsets\":[24,28]},\"s\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[28,36]}}",
        "{\"__metadata__\":{\"k\":[1,{\"n\":null,\"t\":true,\"f\":false,\"x\":-1.5e3}]}}",
        "{}",
    };
    size_t st_data[] = {128, 43, 20, 36, 0, 0};
    for (size_t i = 0; i < sizeof st_json / sizeof *st_json; i++) {
        char nm[32];
        n = safetensors(b, st_json[i], (strlen(st_json[i]) + 15) & ~(size_t)7, st_data[i]);
        snprintf(nm, sizeof nm, "st-%zu", i);
        put("safetensors", nm, b, n);
        uint8_t ctl[3] = {7, 0, (uint8_t)(i % 16 | (i & 1) << 4 | (i % 4) << 5)};
        if (i < 3) put2("detect", nm, ctl, 3, b, n);
        if (i == 0) put("safetensors", "st-0-short", b, n - 7);
        if (i == 1) {
            ctl[0] = CKPZ_INPUT_SAFETENSORS;
            put2("detect", "st-forced", ctl, 3, b, n);
        }
    }
    /* npy */
    const char *npy_dict[] = {
        "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
        "{'descr': '<f2', 'fortran_order': False, 'shape': (10,), }",
        "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 2, 2), }",
        "{'descr': '>i8', 'fortran_order': False, 'shape': (), }",
        "{'descr': '<i2', 'fortran_order': False, 'shape': (0, 5), }",
        "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }",
        "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (1,2,)}",
        "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }",
        "{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }",
    };
    size_t npy_data[] = {48, 20, 8, 8, 0, 16, 16, 5, 16};
    for (size_t i = 0; i < sizeof npy_dict / sizeof *npy_dict; i++) {
        char nm[32];
        n = npy(b, i == 6 ? 2 : i == 7 ? 3 : 1, npy_dict[i], npy_data[i]);
        snprintf(nm, sizeof nm, "npy-%zu", i);
        put("npy", nm, b, n);
        if (i == 0) put("npy", "npy-0-short", b, n - 5);
        if (i < 2) {
            uint8_t ctl[3] = {(uint8_t)(i ? CKPZ_INPUT_NPY : 7), 0, 0x13};
            put2("detect", nm, ctl, 3, b, n);
        }
    }
    /* zip walks: hand-made archives and the real ones */
    static uint8_t m1[256], m2[256];
    size_t l1 = npy(m1, 1, npy_dict[0], 48), l2 = npy(m2, 1, npy_dict[1], 20);
    const char *names[] = {"a.npy", "b.npy", "notes.txt"};
    const uint8_t *datas[] = {m1, m2, (const uint8_t *)"hello"};
    size_t lens[] = {l1, l2, 5};
    for (int desc = 0; desc < 2; desc++) {
        n = zip(z, 3, names, datas, lens, desc);
        uint8_t ctl = (uint8_t)(desc ? 0x4a : 0x2f);
        put2("npz", desc ? "npz-desc" : "npz-stored", &ctl, 1, z, n);
        put2("zip", desc ? "npz-desc" : "npz-stored", &ctl, 1, z, n);
        uint8_t c3[3] = {desc ? CKPZ_INPUT_NPZ : 7, 0, (uint8_t)(desc ? 0x46 : 0xf4)};
        put2("detect", desc ? "npz-desc" : "npz-stored", c3, 3, z, n);
    }
    /* members the zip harness's callback sizes each way (name byte % 4) */
    {
        uint8_t d1[40] = {30, 0};
        const char *zn[] = {"@x", "Ay", "Bzz", "C", "D"};
        const uint8_t *zd[] = {d1, d1, d1, d1, d1};
        size_t zl[] = {40, 32, 21, 10, 0};
        n = zip(z, 5, zn, zd, zl, 1);
        uint8_t ctl = 0x13;
        put2("zip", "callback-modes-desc", &ctl, 1, z, n);
        n = zip(z, 5, zn, zd, zl, 0);
        ctl = 0xb2;
        put2("zip", "callback-modes", &ctl, 1, z, n);
    }
    const char *real[] = {"empty.pt",      "scalar.pt",     "shared.pt",  "nested.pt",
                          "bf16_state.pt", "fp32_state.pt", "arrays.npz", "arrays_z.npz"};
    for (size_t i = 0; i < sizeof real / sizeof *real; i++) {
        char path[256], nm[64];
        snprintf(path, sizeof path, "tests/data/torch/%s", real[i]);
        size_t fl;
        uint8_t *f = slurp(path, &fl);
        int is_npz = strstr(real[i], ".npz") != NULL;
        uint8_t ctl = (uint8_t)(i * 37 + 0x19);
        put2("zip", real[i], &ctl, 1, f, fl);
        if (is_npz) put2("npz", real[i], &ctl, 1, f, fl);
        uint8_t c3[3] = {(uint8_t)(i & 1    ? 7
                                   : is_npz ? CKPZ_INPUT_NPZ
                                            : CKPZ_INPUT_TORCH),
                         0, (uint8_t)(i * 29 + 0x0c)};
        put2("detect", real[i], c3, 3, f, fl);
        if (!is_npz) { /* the pickle */
            zip_member m;
            size_t need;
            if (zip_local_header(f, fl, 0, &m, &need) != 1) die("no zip header in a .pt file");
            pkl_storages t;
            size_t end = 0;
            if (pkl_torch_storages(f + m.data_off, fl - (size_t)m.data_off, &t, &end) != PKL_OK)
                die("pickle of a .pt file not understood");
            pkl_storages_free(&t);
            snprintf(nm, sizeof nm, "%.*s.pkl", (int)(strlen(real[i]) - 3), real[i]);
            put("pickle", nm, f + m.data_off, end);
        }
        free(f);
    }
    /* optimizer state dicts: param groups read for auto's beta2, hostile ones too */
    const char *optim[] = {"adamw.pt", "optim_groups.pt"};
    for (size_t i = 0; i < sizeof optim / sizeof *optim; i++) {
        char path[256], nm[64];
        snprintf(path, sizeof path, "tests/data/torch/%s", optim[i]);
        size_t fl, end = 0, need;
        uint8_t *f = slurp(path, &fl);
        zip_member m;
        pkl_storages t;
        if (zip_local_header(f, fl, 0, &m, &need) != 1 ||
            pkl_torch_storages(f + m.data_off, fl - (size_t)m.data_off, &t, &end) != PKL_OK)
            die("pickle of an optimizer .pt file not understood");
        pkl_storages_free(&t);
        snprintf(nm, sizeof nm, "%.*s.pkl", (int)(strlen(optim[i]) - 3), optim[i]);
        put("pickle", nm, f + m.data_off, end);
        free(f);
    }
    /* raw inputs for detection */
    for (size_t i = 0; i < 600; i++) b[i] = (uint8_t)(gauss() * 10);
    uint8_t c3[3] = {CKPZ_INPUT_RAW, CKPZ_DTYPE_BF16, 0x30};
    put2("detect", "raw-bf16", c3, 3, b, 601);
    c3[0] = 7, c3[1] = CKPZ_DTYPE_F32, c3[2] = 0x05;
    put2("detect", "auto-raw-f32", c3, 3, b, 403);
    c3[0] = 7, c3[1] = 0, c3[2] = 0x1f;
    put2("detect", "auto-opaque", c3, 3, b, 100);
}

/* ---- legacy torch files: real ones, damaged copies, their object pickles ---- */

/* Where the first storage's count is in a legacy file (its .expect's first offset - 8). */
static size_t first_count(const char *file)
{
    char path[256];
    snprintf(path, sizeof path, "tests/data/torch/%s.expect", file);
    FILE *f = fopen(path, "r");
    unsigned long long off = 0;
    if (!f || fscanf(f, "%llu", &off) != 1 || off < 8) die("no .expect for a legacy file");
    fclose(f);
    return (size_t)off - 8;
}

static void legacy_seeds(void)
{
    const char *real[] = {"legacy1_nested.pt", "legacy1_empty.pt",  "legacy1_fp32_state.pt",
                          "legacy2_shared.pt", "legacy2_scalar.pt", "legacy2_bf16_state.pt"};
    for (size_t i = 0; i < sizeof real / sizeof *real; i++) {
        char path[256], nm[96];
        snprintf(path, sizeof path, "tests/data/torch/%s", real[i]);
        size_t fl, c = first_count(real[i]);
        uint8_t *f = slurp(path, &fl);
        uint8_t ctl = (uint8_t)(i * 53 + 0x84);
        put2("legacy", real[i], &ctl, 1, f, fl);
        uint8_t c3[3] = {(uint8_t)(i & 1 ? 7 : CKPZ_INPUT_TORCH), 0, (uint8_t)(i * 29 + 0x1c)};
        put2("detect", real[i], c3, 3, f, fl);
        /* the object's pickle: after the magic (15), version (6) and sys_info pickles */
        size_t at = 21, end = 0;
        pkl_storages t;
        if (pkl_torch_storages(f + at, fl - at, &t, &end) != PKL_OK) die("sys_info of a legacy file not understood");
        pkl_storages_free(&t);
        at += end;
        if (pkl_torch_storages(f + at, fl - at, &t, &end) != PKL_OK) die("legacy pickle not understood");
        pkl_storages_free(&t);
        snprintf(nm, sizeof nm, "%.*s.pkl", (int)(strlen(real[i]) - 3), real[i]);
        put("pickle", nm, f + at, end);
        if (i) {
            free(f);
            continue;
        }
        /* damaged: a count one more, a count in bytes, cut inside a storage, big-endian */
        f[c] += 1;
        snprintf(nm, sizeof nm, "%s-count-lies", real[i]);
        put2("legacy", nm, &ctl, 1, f, fl);
        f[c] -= 1;
        snprintf(nm, sizeof nm, "%s-cut", real[i]);
        put2("legacy", nm, &ctl, 1, f, c + 13);
        size_t le = 0; /* "little_endian", a BINPUT, NEWTRUE */
        while (le + 16 <= c && memcmp(f + le, "little_endianq", 14)) le++;
        if (le + 16 > c || f[le + 15] != 0x88) die("no little_endian: True in a legacy file");
        f[le + 15] = 0x89;
        snprintf(nm, sizeof nm, "%s-big-endian", real[i]);
        put2("legacy", nm, &ctl, 1, f, fl);
        free(f);
    }
}

/* ---- policies and models ---- */

static void text_seeds(void)
{
    const char *pol[] = {
        "*.exp_avg_sq             pointwise-rel 0.5\n*.exp_avg                abs 1e-5 prune 0.9\n"
        "*norm*                   lossless level 9\n*                        abs 1e-5\n",
        "# comment only\n\n   \t\n",
        "model.*.weight rel 1e-3 stochastic max-mae 0.01 level 3\n[a-c]?.w change-rel 0.1 no-base\n",
        "* int8 asym pct 99.9\n",
        "*attn* bits 16 block 128 sym delta\n*mlp* bits 8 per-channel prune 0.5 max-mae 0\n* lossless\n",
        "* pointwise-rel 1e-2 prune 0 level 1\r\n",
        "*  bogus 3\n",
        "optimizer.state.* auto 2 beta2 0.95 level 4\n*.exp_avg change-rel 0.2 no-base\n* auto beta2 1\n",
        "*.exp_avg_sq pointwise-rel 0.5 stochastic-log\n*.exp_avg pointwise-rel 0.9 stochastic prune 0.25 no-base\n"
        "* abs 1e-4 stochastic-log\n",
    };
    for (size_t i = 0; i < sizeof pol / sizeof *pol; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "policy-%zu", i);
        put("policy", nm, pol[i], strlen(pol[i]));
    }
    /* models: the built-in one and small ones of every shape rule */
    put("mlp", "builtin", mlp_builtin_text, strlen(mlp_builtin_text));
    static char m[1 << 16];
    for (int v = 0; v < 3; v++) {
        unsigned in = v == 2 ? 3 : FEAT_COUNT;
        int k = snprintf(m, sizeof m, "ckpz-ratio-mlp 1\ninputs %u\nlayers %d\nmean", in, v + 1);
        for (unsigned i = 0; i < in; i++) k += snprintf(m + k, sizeof m - (size_t)k, " %g", 0.1 * i);
        k += snprintf(m + k, sizeof m - (size_t)k, "\nscale");
        for (unsigned i = 0; i < in; i++) k += snprintf(m + k, sizeof m - (size_t)k, " %g", 1.0 + i);
        unsigned prev = in;
        for (int l = 0; l <= v; l++) {
            unsigned out = l == v ? 1 : 4;
            k += snprintf(m + k, sizeof m - (size_t)k, "\n# layer %d\nlayer %u %u %s\nweights", l, prev, out,
                          l == v ? "linear" : "relu");
            for (unsigned i = 0; i < prev * out; i++)
                k += snprintf(m + k, sizeof m - (size_t)k, " %.3g", gauss() * (i % 3 ? 1 : 1e5));
            k += snprintf(m + k, sizeof m - (size_t)k, "\nbias");
            for (unsigned i = 0; i < out; i++) k += snprintf(m + k, sizeof m - (size_t)k, " %.3g", gauss());
            prev = out;
        }
        k += snprintf(m + k, sizeof m - (size_t)k, "\nend\n# trailing comment\n");
        char nm[32];
        snprintf(nm, sizeof nm, "model-%d", v);
        put("mlp", nm, m, (size_t)k);
    }
}

/* ---- entropy streams ---- */

static ent_ctx *ec;

/* Planes of several kinds, n bytes. */
static void plane(uint8_t *p, size_t n, int kind)
{
    for (size_t i = 0; i < n; i++) {
        switch (kind) {
        case 0: p[i] = (uint8_t)(120 + (int)(gauss() * 2)); break;                    /* exponents */
        case 1: p[i] = (uint8_t)rnd(); break;                                          /* mantissa */
        case 2: p[i] = (uint8_t)((i / 7) % 3 ? 0 : rnd() % 4); break;                 /* sparse ints */
        case 3: p[i] = i ? (uint8_t)(p[i - 1] + (rnd() % 5 == 0 ? (int)(gauss() * 3) : 0)) : 9; break; /* o1 */
        default: p[i] = "layer.0.weight = 13;\n"[i % 21]; break;                     /* text */
        }
    }
}

static void entropy_seeds(void)
{
    static uint8_t p[200000], z[250000];
    static const struct {
        uint8_t codec;
        const char *sub;
    } co[] = {{ENT_RANS0, "rans0"},   {ENT_RANS1, "rans1"},     {ENT_ZSTD, "zstd"},       {ENT_LZ4, "lz4"},
              {ENT_SNAPPY, "snappy"}, {ENT_DEFLATE, "deflate"}, {ENT_RANSCTX, "ransctx"}, {ENT_RANSCTXM, "ransmean"},
              {ENT_RANS0S, "rans0s"}, {ENT_RANS0T, "rans0t"}};
    static const size_t sizes[] = {1, 31, 32, 100, 1000, 5000, 65536};
    for (size_t c = 0; c < sizeof co / sizeof *co; c++) {
        for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
            for (int kind = 0; kind < 5; kind++) {
                size_t n = sizes[si];
                if (n == 65536 && (c || kind)) continue; /* one plane of 64 lanes (the smallest) */
                plane(p, n, kind);
                int level = 1 + (int)((si + (size_t)kind) % 9);
                uint8_t got;
                size_t zl = ent_encode_with(ec, co[c].codec, p, n, z, ent_bound(n), level, &got);
                if (got != co[c].codec) continue;
                uint8_t h[5] = {co[c].codec, (uint8_t)(kind % 3), (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16)};
                char nm[64];
                snprintf(nm, sizeof nm, "%zu-k%d-l%d", n, kind, level);
                put2(co[c].sub, nm, h + 1, 4, z, zl);
                if (n <= 5000) {
                    snprintf(nm, sizeof nm, "%s-%zu-k%d", co[c].sub, n, kind);
                    put2("entropy", nm, h, 5, z, zl);
                }
            }
        }
    }
    /* rans0's encode mode: planes to code, one tiled to 64 KiB (64 lanes) */
    for (int kind = 0; kind < 3; kind++) {
        plane(p, 3000, kind);
        uint8_t h[4] = {(uint8_t)(0x80 | (kind * 3) << 2), 0, 0, 0};
        char nm[32];
        snprintf(nm, sizeof nm, "encode-k%d", kind);
        put2("rans0", nm, h, 4, p, 3000);
    }
    uint8_t eh[4] = {0xc0 | 5 << 2, 0, 0, 1}; /* 65536, byte-table AVX-512 loop */
    put2("rans0", "encode-tiled-65536", eh, 4, p, 1500);
    /* codec 11's encode mode: the same planes (tails over one segment or two) */
    for (int kind = 0; kind < 3; kind++) {
        plane(p, 3000, kind);
        uint8_t h[4] = {(uint8_t)(0x80 | (kind * 3) << 2 | (kind & 1)), (uint8_t)(kind ? 0 : 0x88), 0, 0};
        char nm[32];
        snprintf(nm, sizeof nm, "encode-k%d", kind);
        put2("rans0t", nm, h, 4, p, 3000);
    }
    put2("rans0t", "encode-tiled-65536", eh, 4, p, 1500);
    /* codec 8's encode mode: a correlated plane (kind 3) and a random one, AVX2 and AVX-512 */
    for (int kind = 0; kind < 4; kind += 3) {
        plane(p, 5000, kind);
        uint8_t h8[4] = {(uint8_t)(0x80 | (kind * 2) << 2 | (kind ? 3 : 0)), 0x88, 0x13, 0};
        char nm[32];
        snprintf(nm, sizeof nm, "encode-k%d", kind);
        put2("ransctx", nm, h8, 4, p, 5000);
        put2("ransmean", nm, h8, 4, p, 5000); /* codec 10's, the same planes */
    }
    /* dispatcher: stored, constant, unknown codec */
    plane(p, 500, 1);
    uint8_t h[5] = {ENT_STORED, 0, 0xf4, 1, 0};
    put2("entropy", "stored-500", h, 5, p, 500);
    h[0] = ENT_CONST, h[2] = 0x10, h[3] = 0x27;
    put2("entropy", "const-10000", h, 5, "\x7f", 1);
    h[0] = 10;
    put2("entropy", "unknown-codec", h, 5, p, 100);
    /* codec 9's encode mode: a bell beside random bytes (a small tensor's plane) */
    for (size_t i = 0; i < 1152; i++) p[i] = (uint8_t)(i < 384 ? 0x70 + (int)(gauss() * 3) : (int)(rnd() & 255));
    uint8_t h9[4] = {0x80 | 2 << 2, 0x80, 0x04, 0};
    put2("rans0s", "encode-mixed", h9, 4, p, 1152);
}

/* ---- chunk frames ---- */

/* Writes one chunk harness seed from a coded frame: dtype, flags, length, frame fields,
 * CRC, payload. */
static void chunk_seed(const char *name, ckpz_dtype dt, int based, const uint8_t *frame, uint8_t flags)
{
    uint32_t raw_len = ld32(frame + 8), pl = ld32(frame + 12);
    uint8_t h[13] = {(uint8_t)dt,
                     (uint8_t)(flags | (based ? 1 : 0)),
                     (uint8_t)raw_len,
                     (uint8_t)(raw_len >> 8),
                     (uint8_t)(raw_len >> 16),
                     frame[16],
                     frame[17],
                     frame[18],
                     frame[19]};
    memcpy(h + 9, frame + 20, 4);
    put2("chunk", name, h, 13, frame + CTR_FRAME_SIZE, pl);
}

/* Codes raw (rows x cols values of dt) lossily under the policy line spec, against base
 * when it is not NULL, into out, and writes it as the chunk seed `name` (with "-xf" and the
 * frame's transform appended when xf_tag), its first decode at the vector level in flags. */
static void lossy_seed(chunk_scratch *cs, const char *name, int xf_tag, const char *spec, ckpz_dtype dt, uint64_t rows,
                       uint64_t cols, const uint8_t *raw, const uint8_t *base, uint8_t *out, uint8_t flags)
{
    char why[128];
    policy *pol = policy_parse(spec, 0, why, sizeof why);
    if (!pol) die(why);
    quant_plan plan = {0};
    uint64_t shape[2] = {rows, cols};
    plan.spec = policy_match(pol, "w", dt, 2, shape, 0);
    policy_free(pol);
    quant_plan_shape(&plan, 2, shape);
    plan.abs_bound = plan.spec.bound;
    size_t n = (size_t)(rows * cols) * ckpz_dtype_size(dt);
    if (plan.spec.prune > 0) plan.prune_thr = quant_prune_threshold(dt, raw, NULL, n, plan.spec.prune);
    quant_stats st;
    quant_stats_init(&st);
    const uint8_t *restored;
    uint32_t rc;
    if (!chunk_encode_lossy(cs, 0, 3, &plan, dt, 0, 0, raw, n, base, out, &rc, &restored, &st))
        die("lossy chunk not coded");
    char nm[64];
    if (xf_tag) snprintf(nm, sizeof nm, "%s-xf%u", name, out[16]);
    else snprintf(nm, sizeof nm, "%s", name);
    chunk_seed(nm, dt, base != NULL, out, flags);
}

static void chunk_seeds(void)
{
    static uint8_t raw[1 << 17], basebuf[1 << 17], planes[(1 << 17) * 4], out[(1 << 17) * 3];
    const uint8_t *fb = fuzz_base();
    for (size_t i = 0; i < sizeof basebuf; i += FUZZ_BASE_BYTES)
        memcpy(basebuf + i, fb, sizeof basebuf - i < FUZZ_BASE_BYTES ? sizeof basebuf - i : FUZZ_BASE_BYTES);
    /* lossless, every dtype, with and without the base */
    for (int dt = 0; dt < CKPZ_DTYPE_COUNT_; dt++) {
        for (int based = 0; based < 2; based++) {
            size_t n = 3000 + (size_t)dt * 7 + (size_t)based;
            unsigned es = dt ? ckpz_dtype_size((ckpz_dtype)dt) : 1;
            for (size_t i = 0; i + es <= n; i += es) {
                /* the base's element moved by a small step (or equal: copy-like runs) */
                memcpy(raw + i, basebuf + i, es);
                if (!based || i % 5) {
                    unsigned v = raw[i] + (unsigned)(gauss() * 3);
                    raw[i] = (uint8_t)v;
                }
                if (!based && es == 1) raw[i] = (uint8_t)(gauss() * 4);
            }
            uint32_t crc;
            int level = 1 + (dt * 2 + based) % 9;
            size_t fl = chunk_encode(ec, level, (ckpz_dtype)dt, 0, raw, n, based ? basebuf : NULL, planes, out, &crc,
                                     NULL);
            (void)fl;
            char nm[64];
            snprintf(nm, sizeof nm, "dt%d-%s-l%d", dt, based ? "based" : "plain", level);
            chunk_seed(nm, (ckpz_dtype)dt, based, out, (uint8_t)((dt % 3) << 1));
        }
    }
    /* escape transform: bf16 / f32 / f16 small steps against the base, some far */
    static const ckpz_dtype esc_dt[] = {CKPZ_DTYPE_BF16, CKPZ_DTYPE_F32, CKPZ_DTYPE_F16, CKPZ_DTYPE_I16};
    for (size_t k = 0; k < 4; k++) {
        unsigned es = ckpz_dtype_size(esc_dt[k]);
        size_t n = 60000 - 60000 % es;
        memcpy(raw, basebuf, n);
        for (size_t i = 0; i < n; i += es) {
            int d = (int)(rnd() % 9) - 4;
            if (rnd() % 16 == 0) d *= 50;
            unsigned v = raw[i] | (unsigned)raw[i + 1] << 8;
            v += (unsigned)d;
            raw[i] = (uint8_t)v, raw[i + 1] = (uint8_t)(v >> 8);
        }
        uint32_t crc;
        chunk_encode(ec, 3, esc_dt[k], 0, raw, n, basebuf, planes, out, &crc, NULL);
        char nm[64];
        snprintf(nm, sizeof nm, "delta-%d-xf%u-pred%u", (int)esc_dt[k], out[16], out[19]);
        chunk_seed(nm, esc_dt[k], 1, out, 0);
    }
    /* a copy frame */
    chunk_copy_frame(0, 5000, crc32c(0, basebuf, 5000), out);
    chunk_seed("copy-5000", CKPZ_DTYPE_F32, 1, out, 0);
    /* a chunk of two slices (over 48 KiB) of floats */
    for (size_t i = 0; i < 100000; i += 4) {
        float f = (float)(gauss() * 0.02);
        memcpy(raw + i, &f, 4);
    }
    uint32_t crc;
    chunk_encode(ec, 5, CKPZ_DTYPE_F32, 0, raw, 100001, NULL, planes, out, &crc, NULL);
    chunk_seed("f32-100001", CKPZ_DTYPE_F32, 0, out, 4);
    /* lossy: every grid, pruning, 16-bit codes, with and without the base */
    chunk_scratch *cs = chunk_scratch_create(1, 1 << 17, CHUNK_SCRATCH_ENCODE_LOSSY);
    if (!cs) die("out of memory");
    const char *specs[] = {
        "* abs 1e-3", "* abs 1e-6 prune 0.3",  "* pointwise-rel 0.05", "* bits 8 block 32 sym", "* bits 16 per-channel",
        "* int8",     "* abs 1e-4 stochastic", "* bits 8 delta"};
    static const ckpz_dtype ldt[] = {CKPZ_DTYPE_F32, CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16, CKPZ_DTYPE_F64};
    for (size_t k = 0; k < sizeof specs / sizeof *specs; k++) {
        ckpz_dtype dt = ldt[k % 4];
        int based = k % 3 == 1;
        for (size_t i = 0; i < 2560; i++) {
            double v = gauss() * 0.05;
            if (i % 97 == 0) v = 1e30; /* exceptions */
            if (dt == CKPZ_DTYPE_F32) {
                float f = (float)v;
                memcpy(raw + 4 * i, &f, 4);
            } else if (dt == CKPZ_DTYPE_F64) {
                memcpy(raw + 8 * i, &v, 8);
            } else {
                float f = (float)v;
                uint32_t u;
                memcpy(&u, &f, 4);
                uint16_t hv = dt == CKPZ_DTYPE_BF16 ? (uint16_t)(u >> 16) : (uint16_t)(0x3000 + (int)(v * 1000));
                st16(raw + 2 * i, hv);
            }
        }
        char nm[32];
        snprintf(nm, sizeof nm, "lossy-%zu", k);
        lossy_seed(cs, nm, 1, specs[k], dt, 40, 64, raw, based ? basebuf : NULL, out, (uint8_t)(k % 4) << 1);
    }
    chunk_scratch_free(cs);
}

/* Q8_0 blocks (transform q8): GGML's quantisation of Gaussian weights, at phase 0 and
 * with 5 bytes before the first block and 7 after the last; a generator of its own, so
 * that the other seeds stay as they were. */
static void q8_seeds(void)
{
    static uint8_t raw[34 * 40 + 12], planes[sizeof raw * 4], out[sizeof raw * 3];
    uint64_t st = 0x51f15e;
    for (int k = 0; k < 2; k++) {
        size_t p = k ? 5 : 0, n = p + 34 * 40 + (k ? 7 : 0);
        for (size_t b = 0; b < 41; b++) {
            int q[32], most = 1;
            for (int i = 0; i < 32; i++) {
                st = st * 6364136223846793005ull + 1442695040888963407ull;
                q[i] = (int)((st >> 33) % 201) - 100;
                most = abs(q[i]) > most ? abs(q[i]) : most;
            }
            uint8_t blk[34] = {0x12, 0x0c};
            for (int i = 0; i < 32; i++)
                blk[2 + i] = (uint8_t)(int8_t)((q[i] * 127 + (q[i] < 0 ? -most : most) / 2) / most);
            for (int i = 0; i < 34; i++)
                if (b * 34 + i + p >= 34 && b * 34 + i + p - 34 < n) raw[b * 34 + i + p - 34] = blk[i];
        }
        uint32_t crc;
        chunk_encode(ec, 3, CKPZ_DTYPE_I8, 0, raw, n, NULL, planes, out, &crc, NULL);
        if (out[16] != XF_Q8) die("q8 seed not coded as q8");
        char nm[64];
        snprintf(nm, sizeof nm, "q8-phase%zu-%zu", p, n);
        chunk_seed(nm, CKPZ_DTYPE_I8, 0, out, 0);
    }
}

/* ---- container records, from .ckpz files of every version ---- */

static void records(const char *tag, const uint8_t *z, size_t zl)
{
    char nm[96];
    if (zl < 72) die("short ckpz");
    unsigned flags = ld16(z + 10);
    /* the file's flags as the harnesses take them: CTR_FILE_* (packed and coded in version 5 only) */
    uint8_t ff = (uint8_t)(((flags & 1) ? 1 : 0) | ((flags & 2) ? 2 : 0) | (ld16(z + 8) == 5 && (flags & 4) ? 4 : 0) |
                           (ld16(z + 8) == 5 && (flags & 8) ? 8 : 0));
    uint8_t coded = ff & 8 ? 32 : 0; /* ctr_entry's control bit for a coded list */
    put("ctr_header", tag, z, CTR_HEADER_SIZE);
    uint8_t fs[8];
    st64(fs, zl);
    put2("ctr_trailer", tag, fs, 8, z + zl - CTR_TRAILER_SIZE, CTR_TRAILER_SIZE);
    uint32_t cs = ld32(z + 12);
    uint8_t cb = 0;
    while ((CKPZ_CHUNK_MIN << cb) < cs && cb < 8) cb++;
    size_t pos = CTR_HEADER_SIZE, end = zl - CTR_TRAILER_SIZE, chunks = 0, entries = 0;
    if (flags & 1) {
        size_t bl = 12 + ld32(z + pos + 4);
        put("ctr_base", tag, z + pos, bl + 5);
        pos += bl;
    }
    while (pos + 8 <= end) {
        uint32_t tag4 = ld32(z + pos);
        if (tag4 == CTR_TAG_ENTRY || tag4 == CTR_TAG_LIST) {
            size_t bl = ld32(z + pos + 4);
            if (entries++ < 2) {
                uint8_t ctl = (uint8_t)(8 | (ff & 3) << 1 | (ff & 4) << 2 | coded);
                snprintf(nm, sizeof nm, "%s-frame%zu", tag, entries);
                put2("ctr_entry", nm, &ctl, 1, z + pos, 12 + bl);
                ctl = (uint8_t)((ff & 3) << 1 | (ff & 4) << 2 | coded);
                snprintf(nm, sizeof nm, "%s-record%zu", tag, entries);
                put2("ctr_entry", nm, &ctl, 1, z + pos + 8, bl);
            }
            pos += 12 + bl;
        } else if (tag4 == CTR_TAG_CHUNK) {
            size_t pl = ld32(z + pos + 12);
            if (chunks++ < 2) {
                uint8_t h[5] = {cb, 0, 0, 0, 0};
                snprintf(nm, sizeof nm, "%s-%zu", tag, chunks);
                put2("ctr_chunk", nm, h, 5, z + pos, CTR_FRAME_SIZE);
            }
            pos += CTR_FRAME_SIZE + pl;
        } else {
            break;
        }
    }
    if (pos + 4 <= end && ld32(z + pos) == CTR_TAG_INDEX) {
        uint8_t h[17];
        st64(h, pos);
        st64(h + 8, ld64(z + zl - CTR_TRAILER_SIZE + 16));
        h[16] = ff;
        put2("ctr_index", tag, h, 17, z + pos, end - pos);
        uint8_t ctl = (uint8_t)(1 | (ff & 3) << 1 | (ff & 4) << 2 | coded);
        snprintf(nm, sizeof nm, "%s-index-record", tag);
        if (!coded) {
            put2("ctr_entry", nm, &ctl, 1, z + pos + 24, end - pos - 24);
        } else { /* the list's count (2 bytes), then the list and the seek table after it */
            uint8_t hc[3] = {ctl, (uint8_t)ld64(z + pos + 8), (uint8_t)(ld64(z + pos + 8) >> 8)};
            size_t nc = (size_t)ld64(z + pos + 16);
            put2("ctr_entry", nm, hc, 3, z + pos + 24, end - pos - 24 - 16 * nc);
        }
    }
}

static void container_seeds(void)
{
    static uint8_t buf[300000];
    struct {
        const char *tag, *policy;
        int based;
        ckpz_dtype dt;
        size_t n;
    } f[] = {{"v5-f32", NULL, 0, CKPZ_DTYPE_F32, 4000},
             {"v5-multichunk", NULL, 0, CKPZ_DTYPE_I32, 140000},
             {"v5-lossy", "* abs 1e-3", 0, CKPZ_DTYPE_F32, 8000},
             {"v5-delta", NULL, 1, CKPZ_DTYPE_BF16, FUZZ_BASE_BYTES},
             {"v5-delta-lossy", "* abs 1e-4", 1, CKPZ_DTYPE_F32, FUZZ_BASE_BYTES},
             {"v5-empty", NULL, 0, CKPZ_DTYPE_NONE, 0}};
    for (size_t k = 0; k < sizeof f / sizeof *f; k++) {
        if (f[k].based) {
            memcpy(buf, fuzz_base(), FUZZ_BASE_BYTES);
            for (size_t i = 0; i < f[k].n; i += 2) buf[i] = (uint8_t)(buf[i] + (rnd() % 5));
        } else {
            for (size_t i = 0; i + 4 <= f[k].n; i += 4) {
                float v = (float)(gauss() * 0.05);
                memcpy(buf + i, &v, 4);
            }
        }
        /* two tensors: lossy entries need ndim >= 2, which a raw dump has not; a
         * safetensors header gives them */
        char json[400];
        size_t half = (f[k].n / 2) & ~(size_t)7;
        unsigned es = f[k].dt ? ckpz_dtype_size(f[k].dt) : 1;
        const char *dn = f[k].dt == CKPZ_DTYPE_BF16 ? "BF16" : f[k].dt == CKPZ_DTYPE_I32 ? "I32" : "F32";
        int jl = snprintf(json, sizeof json,
                          "{\"a.weight\":{\"dtype\":\"%s\",\"shape\":[%zu,8],\"data_offsets\":[0,%zu]},"
                          "\"b.weight\":{\"dtype\":\"%s\",\"shape\":[%zu,8],\"data_offsets\":[%zu,%zu]}}",
                          dn, half / es / 8, half, dn, half / es / 8, half, 2 * half);
        size_t hl = ((size_t)jl + 7) & ~(size_t)7;
        static uint8_t file[300000];
        st64(file, hl);
        memset(file + 8, ' ', hl);
        memcpy(file + 8, json, (size_t)jl);
        memcpy(file + 8 + hl, buf, 2 * half);
        size_t fn = f[k].n ? 8 + hl + 2 * half : 0;
        ckpz_ctx *ctx = ckpz_ctx_create();
        ckpz_params p;
        ckpz_params_init(&p);
        p.chunk_size = 65536;
        p.threads = 1;
        p.policy = f[k].policy;
        if (f[k].based) {
            /* the base: the same file with fuzz_base()'s bytes */
            static uint8_t bfile[300000];
            memcpy(bfile, file, 8 + hl);
            memcpy(bfile + 8 + hl, fuzz_base(), 2 * half);
            p.base = bfile;
            p.base_size = fn;
        }
        void *z = NULL;
        size_t zl = 0;
        if (ckpz_compress_buffer(ctx, &p, file, fn, &z, &zl)) die(ckpz_ctx_message(ctx));
        records(f[k].tag, z, zl);
        ckpz_free(z);
        ckpz_ctx_free(ctx);
    }
    /* files of the earlier versions, as earlier ckpz wrote them (tests/data/compat) */
    const char *compat[][2] = {{"fp32_state.v1.ckpz", "compat-v1"},
                               {"fp32_state.v5.ckpz", "compat-v5"},
                               {"next.bf16.v2.ckpz", "compat-v2"},
                               {"next.bf16.v3.ckpz", "compat-v3"},
                               {"next.bf16.v4.ckpz", "compat-v4"}};
    for (size_t i = 0; i < sizeof compat / sizeof *compat; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/compat/%s", compat[i][0]);
        size_t n;
        uint8_t *z = slurp(path, &n);
        records(compat[i][1], z, n);
        free(z);
    }
}

/* Gradient packets (fuzz_grad.c: a control byte, then the packet): dense 8-, 4- and 1-bit (raw, rANS-coded
 * and constant codes), sparse with gaps and a bitmap, FP32 and 8-bit values, as written (control 0) and resealed (1). */
static void grad_seeds(void)
{
    enum { N = 300 };
    float x[N];
    for (int i = 0; i < N; i++) x[i] = (float)gauss();
    static const struct {
        unsigned kind, bits;
        double density;
        const char *name;
    } cases[] = {{CKPZ_GRAD_DENSE, 8, 0, "dense8"},   {CKPZ_GRAD_DENSE, 4, 0, "dense4"},
                 {CKPZ_GRAD_TOPK, 8, 0.05, "gaps8"},  {CKPZ_GRAD_TOPK, 32, 0.05, "gaps32"},
                 {CKPZ_GRAD_TOPK, 8, 0.7, "bitmap8"}, {CKPZ_GRAD_THRESHOLD, 32, 0, "threshold32"},
                 {CKPZ_GRAD_DENSE, 1, 0, "dense1"}};
    ckpz_ctx *ctx = ckpz_ctx_create();
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        ckpz_grad_params p;
        ckpz_grad_params_init(&p);
        p.kind = cases[c].kind, p.bits = cases[c].bits, p.block = 32, p.stochastic = (int)(c & 1);
        p.density = cases[c].density, p.threshold = 1.0f;
        uint8_t pkt[4096];
        size_t len;
        if (ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, x, N, NULL, pkt, sizeof pkt, &len)) die(ckpz_ctx_message(ctx));
        for (uint8_t ctl = 0; ctl < 2; ctl++) {
            char name[64];
            snprintf(name, sizeof name, "%s-%u", cases[c].name, ctl);
            put2("grad", name, &ctl, 1, pkt, len);
        }
    }
    /* Dense packets whose codes are entropy-coded: rANS (heavy-tailed values, peaked
     * codes) and constant (zeros), 8- and 4-bit. */
    enum { NE = 2048 };
    static float xe[NE];
    static uint8_t pe[NE + 256];
    for (int z = 0; z < 2; z++)
        for (unsigned bits = 8; bits >= 4; bits -= 4) {
            for (int i = 0; i < NE; i++) {
                double g = gauss(), c = 0;
                for (int k = 0; k < 3; k++) c += pow(gauss(), 2);
                xe[i] = z ? 0.0f : (float)(g / sqrt(c / 3 + 1e-12));
            }
            ckpz_grad_params p;
            ckpz_grad_params_init(&p);
            p.bits = bits, p.entropy = 1;
            size_t len;
            if (ckpz_grad_pack(ctx, &p, CKPZ_DTYPE_F32, xe, NE, NULL, pe, sizeof pe, &len)) die(ckpz_ctx_message(ctx));
            if (pe[21] != (z ? 1 : 2)) die("grad seeds: the codes were not entropy-coded");
            for (uint8_t ctl = 0; ctl < 2; ctl++) {
                char name[64];
                snprintf(name, sizeof name, "%s%u-%u", z ? "const" : "rans", bits, ctl);
                put2("grad", name, &ctl, 1, pe, len);
            }
        }
    ckpz_ctx_free(ctx);
}

/* Lossy chunks of 8,192 values, past the decoder's table threshold (quant_decode.c's
 * TABLE_MIN), which the seeds above (2,560 values) stay below: one-byte codes with a
 * pruning bitmap (f32, bf16: inverse_table), two-byte codes on the log grid (f32:
 * inverse_prel16), the log grid against the base (the base's grid indices remembered),
 * and the absolute grid's one-byte codes. Written after every other seed, so that the
 * random numbers of theirs stay as they were. */
static void lossy_table_seeds(void)
{
    static uint8_t raw[1 << 17], basebuf[1 << 17], out[(1 << 17) * 3];
    const uint8_t *fb = fuzz_base();
    for (size_t i = 0; i < sizeof basebuf; i += FUZZ_BASE_BYTES)
        memcpy(basebuf + i, fb, sizeof basebuf - i < FUZZ_BASE_BYTES ? sizeof basebuf - i : FUZZ_BASE_BYTES);
    chunk_scratch *cs = chunk_scratch_create(1, 1 << 17, CHUNK_SCRATCH_ENCODE_LOSSY);
    if (!cs) die("out of memory");
    static const struct {
        const char *spec, *name;
        ckpz_dtype dt;
        int based;
    } L[] = {{"* pointwise-rel 0.1 prune 0.2", "lossy-table-f32", CKPZ_DTYPE_F32, 0},
             {"* pointwise-rel 0.1 prune 0.2", "lossy-table-bf16", CKPZ_DTYPE_BF16, 0},
             {"* pointwise-rel 0.0001", "lossy-prel16-f32", CKPZ_DTYPE_F32, 0},
             {"* pointwise-rel 0.01", "lossy-prel-based-f32", CKPZ_DTYPE_F32, 1},
             {"* abs 0.01", "lossy-abs-table-f32", CKPZ_DTYPE_F32, 0}};
    for (size_t k = 0; k < sizeof L / sizeof *L; k++) {
        unsigned es = ckpz_dtype_size(L[k].dt);
        for (size_t i = 0; i < 64 * 128; i++) {
            double v = gauss() * 0.05;
            if (i % 97 == 0) v = 1e30; /* exceptions */
            float f = (float)v;
            uint32_t u;
            memcpy(&u, &f, 4);
            if (es == 4) st32(raw + 4 * i, u);
            else st16(raw + 2 * i, (uint16_t)(u >> 16));
        }
        /* the first decode at AVX-512's level */
        lossy_seed(cs, L[k].name, 0, L[k].spec, L[k].dt, 64, 128, raw, L[k].based ? basebuf : NULL, out, 2 << 1);
    }
    chunk_scratch_free(cs);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR (run from the repository root)\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    if (!(ec = ent_ctx_create())) die("out of memory");
    format_seeds();
    legacy_seeds();
    text_seeds();
    entropy_seeds();
    chunk_seeds();
    q8_seeds();
    container_seeds();
    grad_seeds();
    lossy_table_seeds();
    ent_ctx_free(ec);
    printf("wrote %zu seeds, %zu bytes\n", total_files, total_bytes);
    return 0;
}
