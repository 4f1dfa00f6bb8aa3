/* test_corrupt.c — hostile and damaged .ckpz input.
 *
 * Builds a few archives with the public API (a safetensors-like file with a BF16 and an
 * F32 tensor, a raw random buffer, a raw I32 dump, an empty input; 64 KiB chunks so
 * that there are several), finds every section of each file by walking the documented
 * layout (doc/format.md), and then damages them:
 *
 *   - bit flips in the file header, every entry frame, every chunk frame header, the
 *     plane descriptors and strided payload positions of every chunk, the index and
 *     the trailer. A plain flip must be refused by every reader (the archive reader,
 *     which never reads entry frames, may instead return the exact original bytes).
 *   - the same flips "resealed": every checksum recomputed at its original place, so
 *     that the damaged field itself (a length, a count, a reserved byte, a codec id,
 *     coded data) reaches the parsers and decoders. Those must fail or return exactly
 *     the original bytes; a reserved field must always fail.
 *   - codec and transform ids this build does not have: refused as written by a newer
 *     ckpz (CKPZ_ERR_VERSION), with the chunk and tensor named, not as corruption.
 *   - truncation at every section boundary and at 200 strided lengths; appended
 *     garbage; two archives concatenated; foreign inputs; hostile trailers and
 *     indexes with correct checksums that claim huge sizes and counts.
 *
 * Every reader is run: ckpz_decompress_buffer (1 and 2 threads), ckpz_decompress_stream
 * with wr = NULL (test mode) fed in odd-sized pieces, and ckpz_archive_open + extract of
 * every entry. No call may crash, every failure must leave a message, and damage inside
 * a chunk must be reported with the chunk number (and the tensor name for payloads).
 *
 * Exit status: 0 if every check passed; each failed check is printed.
 */
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <zstd.h>

#include "ckpz.h"
#include "common/crc32c.h"
#include "memfile.h"

#if defined(__SANITIZE_ADDRESS__)
#define CKPZ_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CKPZ_TEST_ASAN 1
#endif
#endif

#ifdef CKPZ_TEST_ASAN
/* Under ASan any allocation above 256 MiB is reported as an error (a hostile header
 * that makes the library reserve gigabytes fails the test instead of passing). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=256"; }
#endif

#define NSAMPLES 9

/* ---- checks ------------------------------------------------------------------------ */
static unsigned long n_checks, n_failed;
static const int verbose = 0;

static void failf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char *fmt, ...)
{
    n_failed++;
    if (n_failed > 60) return; /* keep the log readable */
    va_list ap;
    va_start(ap, fmt);
    fputs("FAIL: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
    fflush(stdout);
}

#define CHECK(cond, ...)                 \
    do {                                 \
        n_checks++;                      \
        if (!(cond)) failf(__VA_ARGS__); \
    } while (0)

/* ---- little-endian helpers ---------------------------------------------------------- */
static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | ((uint64_t)rd32(p + 4) << 32); }
static void wr32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* ---- deterministic data --------------------------------------------------------------- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rng(void)
{
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1Dull;
}
static double gauss(void)
{
    double u1 = ((rng() >> 11) + 1.0) / 9007199254740993.0, u2 = (rng() >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

/* rows > 1: the tensors are matrices of `rows` rows (lossy coding takes those) */
static uint8_t *make_safetensors(size_t na, size_t nb, size_t rows, size_t *len)
{
    char json[512];
    int jl = snprintf(json, sizeof json,
                      "{\"a\":{\"dtype\":\"BF16\",\"shape\":[%zu,%zu],\"data_offsets\":[0,%zu]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],\"data_offsets\":[%zu,%zu]}}",
                      rows, na / rows, 2 * na, rows, nb / rows, 2 * na, 2 * na + 4 * nb);
    size_t hl = ((size_t)jl + 7) & ~(size_t)7;
    size_t n = 8 + hl + 2 * na + 4 * nb;
    uint8_t *p = malloc(n);
    wr64(p, hl);
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, (size_t)jl);
    uint8_t *d = p + 8 + hl;
    for (size_t i = 0; i < na; i++, d += 2) {
        float f = (float)(gauss() * 0.02);
        uint32_t u;
        memcpy(&u, &f, 4);
        d[0] = (uint8_t)(u >> 16);
        d[1] = (uint8_t)(u >> 24);
    }
    for (size_t i = 0; i < nb; i++, d += 4) {
        float f = (float)(gauss() * 0.05);
        uint32_t u;
        memcpy(&u, &f, 4);
        wr32(d, u);
    }
    *len = n;
    return p;
}

/* Many small tensors (norms and biases: packed entries share chunks), an empty one and
 * one too large to pack in between, F32 and BF16. */
static uint8_t *make_small_safetensors(size_t *len)
{
    static const size_t elems[] = {16, 10, 384, 96, 1152, 40, 0, 8, 5000, 64, 2000, 3, 777, 128, 24, 1024, 50, 7};
    enum { NT = sizeof elems / sizeof *elems };
    char json[4096];
    int jl = 1;
    size_t off = 0;
    json[0] = '{';
    for (int t = 0; t < NT; t++) {
        int bf = t % 3 == 1 && t != 7; /* 7 is F32, as the tensor after it */
        size_t bytes = elems[t] * (bf ? 2 : 4);
        jl += snprintf(json + jl, sizeof json - (size_t)jl,
                       "%s\"layer.%d.%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}", t ? "," : "",
                       t, t % 2 ? "bias" : "norm.weight", bf ? "BF16" : "F32", elems[t], off, off + bytes);
        off += bytes;
    }
    json[jl++] = '}';
    size_t hl = ((size_t)jl + 7) & ~(size_t)7;
    size_t n = 8 + hl + off;
    uint8_t *p = malloc(n);
    wr64(p, hl);
    memset(p + 8, ' ', hl);
    memcpy(p + 8, json, (size_t)jl);
    uint8_t *d = p + 8 + hl;
    for (int t = 0; t < NT; t++) {
        int bf = t % 3 == 1 && t != 7; /* 7 is F32, as the tensor after it */
        double scale = t % 2 ? 0.01 : 1.0, centre = t % 2 ? 0 : 1.0; /* biases near 0, norms near 1 */
        for (size_t i = 0; i < elems[t]; i++) {
            float f = (float)(centre + gauss() * 0.05 * scale);
            uint32_t u;
            memcpy(&u, &f, 4);
            if (bf) {
                d[0] = (uint8_t)(u >> 16);
                d[1] = (uint8_t)(u >> 24);
                d += 2;
            } else {
                wr32(d, u);
                d += 4;
            }
        }
    }
    *len = n;
    return p;
}

/* ---- layout of a valid file (doc/format.md) -------------------------------------------------- */
enum { SEC_HEADER, SEC_ENTRY, SEC_CHUNK, SEC_INDEX, SEC_TRAILER, SEC_BASE };
static const char *sec_name[] = {"file header", "entry frame", "chunk frame", "index", "trailer", "base frame"};

typedef struct {
    int kind;
    size_t off, len; /* whole section */
    size_t body;     /* entry frame: B; chunk: P */
    long no;         /* entry number or chunk number */
    long entry;      /* chunk: owning entry */
    unsigned nplanes;
} section;

typedef struct {
    char name[64];
    int tensor; /* dtype != NONE */
    uint64_t offset, length;
} entry_ref;

typedef struct {
    const char *label;
    const uint8_t *orig;
    uint8_t *owned; /* lossy samples: the restored content, which orig points to */
    size_t olen;
    const uint8_t *base; /* a delta sample's base, else NULL */
    size_t base_len;
    uint8_t *z;
    size_t zlen;
    section sec[256];
    size_t nsec;
    entry_ref ent[64];
    size_t nent;
    size_t nchunks;
    unsigned codec_seen[8];
    unsigned esc_chunks, esc_escaping; /* escape-transform chunks, those with escapes */
    unsigned esc_wide;                 /* escape-transform chunks with T = ESC_T_WIDE */
} sample;

static int parse_layout(sample *s)
{
    const uint8_t *z = s->z;
    size_t n = s->zlen, pos = 32;
    s->nsec = 0;
    if (n < 32 + 24 + 40) return -1;
    s->sec[s->nsec++] = (section){SEC_HEADER, 0, 32, 0, 0, -1, 0};
    if (z[10] & 1) { /* a delta file (version 2, or 3 with flag 1): the base frame follows the header */
        size_t b = rd32(z + 36);
        s->sec[s->nsec++] = (section){SEC_BASE, 32, 12 + b, b, 0, -1, 0};
        pos += 12 + b;
    }
    long ne = 0, nc = 0;
    for (;;) {
        if (pos + 4 > n - 40 || s->nsec >= 250) return -1;
        uint32_t tag = rd32(z + pos);
        if (!memcmp(z + pos, "CKIX", 4)) break;
        if (!memcmp(z + pos, "CKEN", 4) || !memcmp(z + pos, "CKEL", 4)) { /* an entry frame, or a list */
            size_t b = rd32(z + pos + 4);
            s->sec[s->nsec++] = (section){SEC_ENTRY, pos, 12 + b, b, ne++, -1, 0};
            pos += 12 + b;
        } else if (!memcmp(z + pos, "CKCH", 4)) {
            size_t p = rd32(z + pos + 12);
            unsigned np = z[pos + 18];
            s->sec[s->nsec++] = (section){SEC_CHUNK, pos, 32 + p, p, nc++, (long)rd32(z + pos + 4), np};
            for (unsigned i = 0; i < np; i++) {
                unsigned c = z[pos + 32 + 8 * i];
                s->codec_seen[c < 8 ? c : 7]++;
            }
            if (z[pos + 16] == 4 && np >= 5 && 32 + 8 * np + 2 <= p + 32) { /* escape: plane 0 is L, T */
                unsigned L = z[pos + 32 + 8 * np];
                s->esc_chunks++;
                s->esc_wide += z[pos + 32 + 8 * np + 1] == 63;
                if (L + 2 < np && rd32(z + pos + 32 + 8 * (L + 2) + 4) > 0) s->esc_escaping++;
            }
            pos += 32 + p;
        } else {
            (void)tag;
            return -1;
        }
    }
    s->sec[s->nsec++] = (section){SEC_INDEX, pos, n - 40 - pos, 0, 0, -1, 0};
    s->sec[s->nsec++] = (section){SEC_TRAILER, n - 40, 40, 0, 0, -1, 0};
    s->nchunks = (size_t)nc;
    return 0;
}

/* Recomputes every checksum of a copy of s->z at the places the valid layout has them. */
static void reseal(const sample *s, uint8_t *b)
{
    for (size_t i = 0; i < s->nsec; i++) {
        const section *c = &s->sec[i];
        uint8_t *p = b + c->off;
        switch (c->kind) {
        case SEC_HEADER: wr32(p + 28, crc32c(0, p, 28)); break;
        case SEC_ENTRY:
        case SEC_BASE: wr32(p + 8 + c->body, crc32c(0, p, 8 + c->body)); break;
        case SEC_CHUNK:
            wr32(p + 24, crc32c(0, p + 32, c->body));
            wr32(p + 28, crc32c(0, p, 28));
            break;
        case SEC_INDEX: wr32(b + s->zlen - 40 + 28, crc32c(0, p, c->len)); break;
        case SEC_TRAILER: wr32(p + 36, crc32c(0, p, 36)); break;
        }
    }
}

/* ---- running every reader on one damaged copy ---------------------------------------- */
enum { MUST_FAIL = 1, FAIL_OR_SAME = 2 };

typedef struct {
    int expect;            /* MUST_FAIL or FAIL_OR_SAME */
    int archive_may_pass;  /* plain flip the archive reader never reads (entry frames) */
    long chunk;            /* >= 0: the message must name "chunk N" */
    const char *tensor;    /* non-NULL: the message must also name it */
    int trunc_codes;       /* only TRUNCATED/NOT_CKPZ/CORRUPT/CHECKSUM accepted */
    int forbid_nomem;      /* NOMEM means a huge allocation was attempted */
    ckpz_error code;       /* not CKPZ_OK: the code every reader must return */
    const char *says;      /* not NULL: what every message must contain */
} expectation;

static int names_chunk(const char *msg, long chunk)
{
    char pat[48];
    int pl = snprintf(pat, sizeof pat, "chunk %ld", chunk);
    for (const char *q = strstr(msg, pat); q; q = strstr(q + 1, pat))
        if (q[pl] < '0' || q[pl] > '9') return 1;
    return 0;
}

static int trunc_code_ok(ckpz_error e)
{
    return e == CKPZ_ERR_TRUNCATED || e == CKPZ_ERR_NOT_CKPZ || e == CKPZ_ERR_CORRUPT || e == CKPZ_ERR_CHECKSUM;
}

static void check_error(const char *reader, const char *what, ckpz_error e, const char *msg, const expectation *x,
                        int naming)
{
    CHECK(msg && msg[0], "%s: %s: error %d (%s) without a message", what, reader, e, ckpz_error_name(e));
    if (x->trunc_codes)
        CHECK(trunc_code_ok(e), "%s: %s: unexpected code %d (%s): %s", what, reader, e, ckpz_error_name(e), msg);
    if (x->forbid_nomem)
        CHECK(e != CKPZ_ERR_NOMEM, "%s: %s: CKPZ_ERR_NOMEM (tried a huge allocation?): %s", what, reader, msg);
    CHECK(e != CKPZ_ERR_INTERNAL && e != CKPZ_ERR_PARAM, "%s: %s: code %d (%s): %s", what, reader, e,
          ckpz_error_name(e), msg);
    if (x->code)
        CHECK(e == x->code, "%s: %s: code %d (%s), not %s: %s", what, reader, e, ckpz_error_name(e),
              ckpz_error_name(x->code), msg);
    if (x->says && msg)
        CHECK(strstr(msg, x->says) != NULL, "%s: %s: message does not say \"%s\": \"%s\"", what, reader, x->says, msg);
    if (naming && x->chunk >= 0) {
        CHECK(names_chunk(msg, x->chunk), "%s: %s: message does not name chunk %ld: \"%s\"", what, reader, x->chunk,
              msg);
        if (x->tensor) {
            char q[80];
            snprintf(q, sizeof q, "'%s'", x->tensor);
            CHECK(strstr(msg, q) != NULL, "%s: %s: message does not name tensor %s: \"%s\"", what, reader, q, msg);
        }
    }
}

static void run_readers(const sample *s, const uint8_t *b, size_t len, const expectation *x, const char *what,
                        size_t mem_limit)
{
    expectation same;
    if (len == s->zlen && !memcmp(b, s->z, len) && x->expect == MUST_FAIL) {
        /* the rewrite happened to reproduce the intact file (e.g. the empty sample) */
        same = *x;
        same.expect = FAIL_OR_SAME;
        x = &same;
    }
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    uint8_t *dst = malloc(s->olen + 1);
    int buf_ok[2] = {0, 0};

    /* one-shot buffer, 1 and 2 threads */
    for (int t = 1; t <= 2; t++) {
        ckpz_params_init(&p);
        p.threads = t;
        p.mem_limit = mem_limit;
        p.base = s->base;
        p.base_size = s->base_len;
        char reader[40];
        snprintf(reader, sizeof reader, "decompress_buffer(threads=%d)", t);
        memset(dst, 0xA5, s->olen + 1);
        ckpz_error e = ckpz_decompress_buffer(ctx, &p, b, len, dst, s->olen);
        if (e == CKPZ_OK) {
            buf_ok[t - 1] = 1;
            CHECK(x->expect != MUST_FAIL, "%s: %s returned CKPZ_OK", what, reader);
            CHECK(!memcmp(dst, s->orig, s->olen), "%s: %s returned CKPZ_OK with wrong bytes", what, reader);
        } else {
            check_error(reader, what, e, ckpz_ctx_message(ctx), x, 1);
        }
    }
    CHECK(buf_ok[0] == buf_ok[1], "%s: 1 and 2 threads disagree", what);

    /* streaming test mode, fed in odd pieces */
    {
        ckpz_params_init(&p);
        p.threads = 1;
        p.mem_limit = mem_limit;
        p.base = s->base;
        p.base_size = s->base_len;
        ckpz_mem r = mem_in(b, len, 4093);
        ckpz_stats st = {.struct_size = sizeof st};
        ckpz_error e = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &r, NULL, NULL, &st);
        if (e == CKPZ_OK) {
            CHECK(x->expect != MUST_FAIL, "%s: decompress_stream(wr=NULL) returned CKPZ_OK", what);
            CHECK(buf_ok[0], "%s: decompress_stream(wr=NULL) OK but decompress_buffer failed", what);
            CHECK(st.original_bytes == s->olen, "%s: decompress_stream(wr=NULL) OK with %llu bytes, not %zu", what,
                  (unsigned long long)st.original_bytes, s->olen);
        } else {
            check_error("decompress_stream(wr=NULL)", what, e, ckpz_ctx_message(ctx), x, 1);
            CHECK(!buf_ok[0], "%s: decompress_stream(wr=NULL) failed but decompress_buffer succeeded", what);
        }
    }

    /* random access */
    {
        ckpz_params_init(&p);
        p.threads = 1;
        p.mem_limit = mem_limit;
        p.base = s->base;
        p.base_size = s->base_len;
        ckpz_mem f = mem_in(b, len, 0);
        ckpz_archive *a = NULL;
        ckpz_error e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, len, &a);
        int any_fail = e != CKPZ_OK;
        if (e) {
            check_error("archive_open", what, e, ckpz_ctx_message(ctx), x, 0);
            CHECK(a == NULL, "%s: archive_open failed but returned an archive", what);
        } else {
            ckpz_archive_info info = {.struct_size = sizeof info};
            ckpz_archive_get_info(a, &info);
            CHECK(info.original_size == s->olen, "%s: archive_open OK with original size %llu, not %zu", what,
                  (unsigned long long)info.original_size, s->olen);
            ckpz_mem w = mem_out(dst, s->olen + 1);
            for (uint64_t i = 0; i < info.entries; i++) {
                ckpz_entry en = {.struct_size = sizeof en};
                if (ckpz_archive_entry(a, i, &en) != CKPZ_OK) {
                    CHECK(0, "%s: archive_entry(%llu) failed", what, (unsigned long long)i);
                    continue;
                }
                w.size = 0;
                e = ckpz_archive_extract(ctx, a, i, ckpz_mem_write, &w);
                char reader[48];
                snprintf(reader, sizeof reader, "archive_extract(%llu)", (unsigned long long)i);
                if (e == CKPZ_OK) {
                    int same = en.offset <= s->olen && en.length <= s->olen - en.offset && w.size == en.length &&
                               !memcmp(dst, s->orig + en.offset, w.size);
                    CHECK(same, "%s: %s returned CKPZ_OK with wrong bytes", what, reader);
                } else {
                    any_fail = 1;
                    check_error(reader, what, e, ckpz_ctx_message(ctx), x, 1);
                }
            }
            ckpz_archive_close(a);
        }
        if (x->expect == MUST_FAIL && !x->archive_may_pass)
            CHECK(any_fail, "%s: archive_open and every archive_extract returned CKPZ_OK", what);
    }
    free(dst);
    ckpz_ctx_free(ctx);
}

/* ---- the tests ----------------------------------------------------------------------------- */
static int build_sample(sample *s, const char *label, const uint8_t *orig, size_t olen, ckpz_input_format fmt,
                        ckpz_dtype dt, int level, const uint8_t *base, size_t base_len, const char *policy)
{
    memset(s, 0, sizeof *s);
    s->label = label;
    s->orig = orig;
    s->olen = olen;
    s->base = base;
    s->base_len = base_len;
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.chunk_size = 65536;
    p.threads = 2;
    p.level = level;
    p.format = fmt;
    p.raw_dtype = dt;
    p.base = base;
    p.base_size = base_len;
    p.policy = policy;
    void *z = NULL;
    size_t zl = 0;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, orig, olen, &z, &zl);
    CHECK(e == CKPZ_OK, "%s: compress failed: %s: %s", label, ckpz_error_name(e), ckpz_ctx_message(ctx));
    if (e) {
        ckpz_ctx_free(ctx);
        return -1;
    }
    s->z = z;
    s->zlen = zl;
    if (policy) {
        /* A lossy file: what every reader must return is what the intact file restores
         * (checked here to differ from the original, and to be stable across readers). */
        uint8_t *rest = malloc(olen + 1);
        ckpz_params dp;
        ckpz_params_init(&dp);
        dp.base = base;
        dp.base_size = base_len;
        e = ckpz_decompress_buffer(ctx, &dp, z, zl, rest, olen);
        CHECK(e == CKPZ_OK && memcmp(rest, orig, olen), "%s: lossy file: %s", label, ckpz_ctx_message(ctx));
        s->orig = orig = rest;
        s->owned = rest;
    }
    /* the intact file must round-trip through every reader */
    expectation ok = {FAIL_OR_SAME, 0, -1, NULL, 0, 0, CKPZ_OK, NULL};
    uint8_t *dst = malloc(olen + 1);
    ckpz_params_init(&p);
    p.base = base;
    p.base_size = base_len;
    e = ckpz_decompress_buffer(ctx, &p, z, zl, dst, olen);
    CHECK(e == CKPZ_OK && !memcmp(dst, orig, olen), "%s: intact file does not round-trip: %s", label,
          ckpz_ctx_message(ctx));
    free(dst);
    CHECK(parse_layout(s) == 0, "%s: cannot walk the layout of the intact file", label);
    ckpz_mem f = mem_in(s->z, s->zlen, 0);
    ckpz_archive *a = NULL;
    e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, zl, &a);
    CHECK(e == CKPZ_OK, "%s: cannot open the intact archive: %s", label, ckpz_ctx_message(ctx));
    if (a) {
        ckpz_archive_info info = {.struct_size = sizeof info};
        ckpz_archive_get_info(a, &info);
        CHECK(info.chunks == s->nchunks, "%s: archive has %llu chunks, layout walk found %zu", label,
              (unsigned long long)info.chunks, s->nchunks);
        for (uint64_t i = 0; i < info.entries && i < 64; i++) {
            ckpz_entry en = {.struct_size = sizeof en};
            ckpz_archive_entry(a, i, &en);
            snprintf(s->ent[i].name, sizeof s->ent[i].name, "%s", en.name);
            s->ent[i].tensor = en.dtype != CKPZ_DTYPE_NONE;
            s->ent[i].offset = en.offset;
            s->ent[i].length = en.length;
            s->nent = i + 1;
        }
        ckpz_archive_close(a);
    }
    run_readers(s, s->z, s->zlen, &ok, label, 0);
    ckpz_ctx_free(ctx);
    printf("%s: %zu -> %zu bytes, %zu entries, %zu chunks, codecs stored/const/rans0/rans1/zstd = %u/%u/%u/%u/%u\n",
           label, olen, zl, s->nent, s->nchunks, s->codec_seen[0], s->codec_seen[1], s->codec_seen[2], s->codec_seen[3],
           s->codec_seen[4]);
    return 0;
}

/* Positions to damage in one section, with what the message must name. */
static void flip_at(const sample *s, const section *c, size_t pos, unsigned bit, int resealed, uint8_t *buf)
{
    memcpy(buf, s->z, s->zlen);
    buf[pos] ^= (uint8_t)(1u << bit);
    if (resealed) reseal(s, buf);
    if (resealed && !memcmp(buf, s->z, s->zlen)) return; /* the flip was in a checksum: undone */
    expectation x = {MUST_FAIL, 0, -1, NULL, 0, 0, CKPZ_OK, NULL};
    size_t rel = pos - c->off;
    if (c->kind == SEC_ENTRY) x.archive_may_pass = 1;
    if (c->kind == SEC_CHUNK) {
        x.chunk = c->no;
        if (rel >= 32 && !resealed && c->entry >= 0 && (size_t)c->entry < s->nent && s->ent[c->entry].tensor)
            x.tensor = s->ent[c->entry].name;
        if (!resealed && rel >= 32 + 8 * (size_t)c->nplanes) {
            /* a plane's coded bytes: whatever its decoder makes of them, the payload's
             * checksum is what every reader must report */
            x.code = CKPZ_ERR_CHECKSUM;
            x.says = "compressed data checksum mismatch";
        }
    }
    if (resealed) {
        x.expect = FAIL_OR_SAME;
        x.chunk = -1;
        x.tensor = NULL;
    }
    char what[160];
    snprintf(what, sizeof what, "%s: %s%s %ld, byte %zu (file offset %zu) bit %u", s->label,
             resealed ? "resealed flip in " : "flip in ", sec_name[c->kind], c->no, rel, pos, bit);
    run_readers(s, buf, s->zlen, &x, what, 0);
}

static void test_flips(const sample *s)
{
    uint8_t *buf = malloc(s->zlen);
    unsigned long before = n_checks;
    for (int resealed = 0; resealed <= 1; resealed++) {
        for (size_t i = 0; i < s->nsec; i++) {
            const section *c = &s->sec[i];
            size_t all = c->len; /* every byte of small sections */
            if (c->kind == SEC_CHUNK) all = 32 + 8 * (size_t)c->nplanes; /* header + descriptors */
            if (c->kind == SEC_INDEX && all > 4096) all = 4096;
            for (size_t k = 0; k < all && k < c->len; k++)
                flip_at(s, c, c->off + k, (unsigned)((k * 3 + (size_t)resealed) & 7), resealed, buf);
            if (c->kind == SEC_CHUNK || (c->kind == SEC_INDEX && c->len > all)) {
                /* strided positions through the rest */
                size_t start = all, rest = c->len - all;
                for (int k = 0; k < 12 && rest; k++) {
                    size_t at = start + (rest - 1) * (size_t)k / 11;
                    flip_at(s, c, c->off + at, (unsigned)(k & 7), resealed, buf);
                }
                flip_at(s, c, c->off + c->len - 1, 0, resealed, buf);
            }
        }
    }
    free(buf);
    printf("%s: bit flips: %lu checks\n", s->label, n_checks - before);
}

/* Resealed single-byte rewrites of fields that are reserved (must be zero) or that have
 * a fixed valid set: the decoder must refuse them even though every checksum holds. */
static void test_reserved(const sample *s)
{
    uint8_t *buf = malloc(s->zlen);
    expectation x = {MUST_FAIL, 0, -1, NULL, 0, 0, CKPZ_OK, NULL};
    char what[160];
    for (size_t i = 0; i < s->nsec; i++) {
        const section *c = &s->sec[i];
        size_t fields[24];
        size_t nf = 0;
        int archive_may_pass = 0;
        switch (c->kind) {
        case SEC_HEADER:
            fields[nf++] = 8;  /* version */
            fields[nf++] = 10; /* flags */
            fields[nf++] = 11;
            for (size_t k = 17; k < 28; k++) fields[nf++] = k;
            break;
        case SEC_ENTRY:
            fields[nf++] = 8 + 1; /* reserved byte of the record */
            fields[nf++] = 8 + 0; /* dtype: 0x80 is no dtype */
            archive_may_pass = 1;
            break;
        case SEC_CHUNK:
            fields[nf++] = 19; /* reserved */
            fields[nf++] = 16; /* transform */
            fields[nf++] = 18; /* plane count */
            for (unsigned pl = 0; pl < c->nplanes && nf < 22; pl++) {
                fields[nf++] = 32 + 8 * pl + 1; /* descriptor reserved bytes */
                if (pl == 0) fields[nf++] = 32 + 8 * pl; /* codec id */
            }
            break;
        case SEC_BASE:
            fields[nf++] = 8 + 18; /* reserved */
            fields[nf++] = 8 + 19;
            break;
        case SEC_INDEX:
            fields[nf++] = 4; /* reserved */
            fields[nf++] = 7;
            if (c->len > 25) fields[nf++] = 24 + 1; /* first record's reserved byte */
            break;
        default: break;
        }
        for (size_t k = 0; k < nf; k++) {
            memcpy(buf, s->z, s->zlen);
            buf[c->off + fields[k]] ^= 0x80;
            reseal(s, buf);
            x.archive_may_pass = archive_may_pass;
            x.chunk = c->kind == SEC_CHUNK ? c->no : -1;
            snprintf(what, sizeof what, "%s: resealed reserved/enum field in %s %ld at byte %zu", s->label,
                     sec_name[c->kind], c->no, fields[k]);
            run_readers(s, buf, s->zlen, &x, what, 0);
        }
    }
    free(buf);
}

/* Codec and transform ids this build does not have, one unassigned in the format's range
 * and one of the private range, in the last plane's descriptor (never a header) and in the
 * frame of the first chunk that has planes, resealed: every reader must refuse the file as
 * written by a newer ckpz (CKPZ_ERR_VERSION, "needs codec id N"), naming the chunk and
 * its tensor, not call it corrupt. */
static void test_unknown_ids(const sample *s)
{
    const section *c = NULL;
    for (size_t i = 0; i < s->nsec && !c; i++)
        if (s->sec[i].kind == SEC_CHUNK && s->sec[i].nplanes) c = &s->sec[i];
    if (!c) return;
    uint8_t *buf = malloc(s->zlen);
    static const unsigned ids[] = {63, 200};
    char what[160], says[64];
    for (int kind = 0; kind < 2; kind++)
        for (size_t k = 0; k < 2; k++) {
            memcpy(buf, s->z, s->zlen);
            buf[c->off + (kind ? 16 : 32 + 8 * (c->nplanes - 1))] = (uint8_t)ids[k];
            reseal(s, buf);
            snprintf(says, sizeof says, "needs %s id %u (written by a newer ckpz?)", kind ? "transform" : "codec",
                     ids[k]);
            expectation x = {MUST_FAIL, 0, c->no, NULL, 0, 0, CKPZ_ERR_VERSION, says};
            if (c->entry >= 0 && (size_t)c->entry < s->nent && s->ent[c->entry].tensor)
                x.tensor = s->ent[c->entry].name;
            snprintf(what, sizeof what, "%s: %s id %u in chunk %ld", s->label, kind ? "transform" : "codec", ids[k],
                     c->no);
            run_readers(s, buf, s->zlen, &x, what, 0);
        }
    free(buf);
}

static void test_truncation(const sample *s)
{
    size_t cuts[2048];
    size_t n = 0;
    cuts[n++] = 0;
    cuts[n++] = 1;
    cuts[n++] = 7;
    cuts[n++] = 8;
    cuts[n++] = 31;
    for (size_t i = 0; i < s->nsec && n < 1900; i++) {
        const section *c = &s->sec[i];
        size_t pts[] = {c->off,      c->off + 1,  c->off + 4,  c->off + 8,  c->off + c->len / 2, c->off + c->len - 1,
                        c->off + 16, c->off + 31, c->off + 32, c->off + 40, c->off + c->len - 4};
        for (size_t k = 0; k < sizeof pts / sizeof *pts; k++)
            if (pts[k] < s->zlen && pts[k] >= c->off && pts[k] < c->off + c->len) cuts[n++] = pts[k];
    }
    size_t step = s->zlen / 200 ? s->zlen / 200 : 1;
    for (size_t l = 0; l < s->zlen && n < 2040; l += step) cuts[n++] = l;
    cuts[n++] = s->zlen - 1;
    expectation x = {MUST_FAIL, 0, -1, NULL, 1, 0, CKPZ_OK, NULL};
    char what[128];
    for (size_t i = 0; i < n; i++) {
        snprintf(what, sizeof what, "%s: truncated to %zu of %zu bytes", s->label, cuts[i], s->zlen);
        run_readers(s, s->z, cuts[i], &x, what, 0);
        ckpz_ctx *ctx = ckpz_ctx_create();
        uint64_t osz;
        ckpz_error e = ckpz_original_size(ctx, s->z, cuts[i], &osz);
        CHECK(e != CKPZ_OK, "%s: ckpz_original_size returned CKPZ_OK", what);
        ckpz_ctx_free(ctx);
    }
    printf("%s: %zu truncations\n", s->label, n);
}

static void test_appended(const sample *s, const sample *other)
{
    size_t extra = s->zlen + other->zlen + 4096;
    uint8_t *buf = malloc(s->zlen + extra);
    expectation x = {MUST_FAIL, 0, -1, NULL, 0, 0, CKPZ_OK, NULL};
    char what[160];
    struct {
        const char *name;
        size_t n;
        int kind;
    } cases[] = {{"1 zero byte", 1, 0},        {"7 random bytes", 7, 1},         {"40 zero bytes", 40, 0},
                 {"100 random bytes", 100, 1}, {"a copy of the trailer", 40, 2}, {"index+trailer again", 0, 3},
                 {"the same file", 0, 4},      {"another ckpz file", 0, 5}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        memcpy(buf, s->z, s->zlen);
        size_t n = cases[i].n;
        uint8_t *t = buf + s->zlen;
        const section *ix = &s->sec[s->nsec - 2];
        switch (cases[i].kind) {
        case 0: memset(t, 0, n); break;
        case 1:
            for (size_t k = 0; k < n; k++) t[k] = (uint8_t)rng();
            break;
        case 2: memcpy(t, s->z + s->zlen - 40, 40); break;
        case 3:
            n = ix->len + 40;
            memcpy(t, s->z + ix->off, n);
            break;
        case 4:
            n = s->zlen;
            memcpy(t, s->z, n);
            break;
        case 5:
            n = other->zlen;
            memcpy(t, other->z, n);
            break;
        }
        snprintf(what, sizeof what, "%s: appended %s", s->label, cases[i].name);
        run_readers(s, buf, s->zlen + n, &x, what, 0);
    }
    free(buf);
}

static void test_foreign(void)
{
    uint8_t buf[4096];
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    struct {
        const char *name;
        size_t n;
    } cases[6] = {{"empty input", 0}, {"zstd frame", 0}, {"random bytes", 1000},
                  {"PNG header", 0},  {"one byte", 1},   {"7 bytes of magic", 7}};
    uint8_t src[3000];
    for (size_t k = 0; k < sizeof src; k++) src[k] = (uint8_t)(k % 17);
    for (int c = 0; c < 6; c++) {
        size_t n = cases[c].n;
        memset(buf, 0, sizeof buf);
        switch (c) {
        case 1: n = ZSTD_compress(buf, sizeof buf, src, sizeof src, 3); break;
        case 2:
            for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)rng();
            buf[0] = 0x42;
            break;
        case 3: {
            static const uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0,    0,    0,
                                          13,   'I', 'H', 'D', 'R',  0,    0,    0,    16,   0,    0,
                                          0,    16,  8,   6,   0,    0,    0,    0x1f, 0xf3, 0xff, 0x61};
            memcpy(buf, png, sizeof png);
            n = sizeof png;
            break;
        }
        case 4: buf[0] = 0x89; break;
        case 5: memcpy(buf, "\211CKPZ\r\n", 7); break;
        }
        uint8_t dst[16];
        ckpz_error e = ckpz_decompress_buffer(ctx, &p, buf, n, dst, sizeof dst);
        CHECK(e == CKPZ_ERR_NOT_CKPZ, "foreign %s: decompress_buffer: %s", cases[c].name, ckpz_error_name(e));
        CHECK(ckpz_ctx_message(ctx)[0], "foreign %s: no message", cases[c].name);
        ckpz_mem r = mem_in(buf, n, 0);
        e = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &r, NULL, NULL, NULL);
        CHECK(e == CKPZ_ERR_NOT_CKPZ, "foreign %s: decompress_stream: %s", cases[c].name, ckpz_error_name(e));
        ckpz_mem f = mem_in(buf, n, 0);
        ckpz_archive *a = NULL;
        e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, n, &a);
        CHECK(e == CKPZ_ERR_NOT_CKPZ && !a, "foreign %s: archive_open: %s", cases[c].name, ckpz_error_name(e));
        ckpz_archive_close(a);
        uint64_t osz;
        e = ckpz_original_size(ctx, buf, n, &osz);
        CHECK(e == CKPZ_ERR_NOT_CKPZ, "foreign %s: original_size: %s", cases[c].name, ckpz_error_name(e));
    }
    ckpz_ctx_free(ctx);
}

/* Rewrites the trailer fields and recomputes its checksum. */
static void set_trailer(uint8_t *b, size_t len, int field, uint64_t v)
{
    uint8_t *t = b + len - 40;
    if (field < 3) wr64(t + 8 * field, v);
    else wr32(t + 24 + 4 * (field - 3), (uint32_t)v);
    wr32(t + 36, crc32c(0, t, 36));
}

static void reseal_index(uint8_t *b, size_t len)
{
    uint64_t io = rd64(b + len - 40), il = rd64(b + len - 32);
    set_trailer(b, len, 4, crc32c(0, b + io, (size_t)il));
}

static void test_hostile(const sample *s)
{
    uint8_t *buf = malloc(s->zlen + 64);
    expectation x = {MUST_FAIL, 0, -1, NULL, 0, 1, CKPZ_OK, NULL};
    char what[160];
    const section *ix = &s->sec[s->nsec - 2];
    uint64_t huge[] = {(uint64_t)1 << 31, (uint64_t)1 << 40, UINT64_MAX, UINT64_MAX - 39, (uint64_t)s->zlen * 1000};
    for (size_t h = 0; h < sizeof huge / sizeof *huge; h++) {
        for (int field = 0; field < 3; field++) {
            static const char *fname[] = {"index offset", "index length", "original size"};
            for (size_t lim = 0; lim < 2; lim++) {
                memcpy(buf, s->z, s->zlen);
                set_trailer(buf, s->zlen, field, huge[h]);
                snprintf(what, sizeof what, "%s: trailer claims %s %llu (mem_limit %s)", s->label, fname[field],
                         (unsigned long long)huge[h], lim ? "64 KiB" : "default");
                run_readers(s, buf, s->zlen, &x, what, lim ? 65536 : 0);
            }
        }
        /* a consistent pair: the "index" starts right after the header and runs to the trailer */
        memcpy(buf, s->z, s->zlen);
        set_trailer(buf, s->zlen, 0, 32);
        set_trailer(buf, s->zlen, 1, s->zlen - 72);
        reseal_index(buf, s->zlen);
        snprintf(what, sizeof what, "%s: trailer claims the whole file is the index", s->label);
        run_readers(s, buf, s->zlen, &x, what, 0);
        run_readers(s, buf, s->zlen, &x, what, 4096);
        /* huge counts in a resealed index */
        for (int which = 0; which < 2; which++) {
            memcpy(buf, s->z, s->zlen);
            wr64(buf + ix->off + 8 + 8 * which, huge[h]);
            reseal_index(buf, s->zlen);
            snprintf(what, sizeof what, "%s: index claims %llu %s", s->label, (unsigned long long)huge[h],
                     which ? "chunks" : "entries");
            run_readers(s, buf, s->zlen, &x, what, 0);
        }
    }
    /* counts that just fit the index length */
    for (int which = 0; which < 2; which++) {
        memcpy(buf, s->z, s->zlen);
        wr64(buf + ix->off + 8 + 8 * which, which ? (ix->len - 24) / 16 : (ix->len - 24) / 40);
        reseal_index(buf, s->zlen);
        snprintf(what, sizeof what, "%s: index claims the most %s that fit", s->label, which ? "chunks" : "entries");
        run_readers(s, buf, s->zlen, &x, what, 0);
    }
    /* a seek table record pointing far away / huge frame length */
    if (s->nchunks) {
        size_t st = ix->off + ix->len - 16 * s->nchunks;
        for (int f = 0; f < 3; f++) {
            memcpy(buf, s->z, s->zlen);
            if (f == 0) wr64(buf + st, (uint64_t)1 << 50);
            if (f == 1) wr32(buf + st + 12, 0xFFFFFFF0u);
            if (f == 2) wr32(buf + st + 8, 0xFFFFFFF0u);
            reseal_index(buf, s->zlen);
            snprintf(what, sizeof what, "%s: seek table record 0 rewritten (%d)", s->label, f);
            run_readers(s, buf, s->zlen, &x, what, 0);
        }
    }
    free(buf);
}

/* A synthetic file: header + index of n empty entries + trailer, all checksums valid.
 * It is valid for the random-access reader (an empty original in n empty pieces), so
 * the memory limit decides; the stream reader saw no entry frames and must refuse it. */
static void test_many_entries(void)
{
    size_t ne = 200000, ilen = 24 + 40 * ne, len = 32 + ilen + 40;
    uint8_t *b = calloc(1, len);
    memcpy(b, "\211CKPZ\r\n\032", 8);
    b[8] = 1;
    wr32(b + 12, 65536);
    wr32(b + 28, crc32c(0, b, 28));
    uint8_t *ix = b + 32;
    memcpy(ix, "CKIX", 4);
    wr64(ix + 8, ne);
    uint8_t *t = b + 32 + ilen;
    wr64(t, 32);
    wr64(t + 8, ilen);
    wr32(t + 28, crc32c(0, ix, ilen));
    memcpy(t + 32, "CKTR", 4);
    wr32(t + 36, crc32c(0, t, 36));
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    p.mem_limit = 1 << 20;
    ckpz_mem f = mem_in(b, len, 0);
    ckpz_archive *a = NULL;
    ckpz_error e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, len, &a);
    CHECK(e == CKPZ_ERR_LIMIT, "index of %zu empty entries with mem_limit 1 MiB: archive_open returned %s: %s", ne,
          ckpz_error_name(e), ckpz_ctx_message(ctx));
    ckpz_archive_close(a);
    a = NULL;
    p.mem_limit = 0;
    e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, len, &a);
    CHECK(e == CKPZ_OK, "index of %zu empty entries, default mem_limit: archive_open returned %s: %s", ne,
          ckpz_error_name(e), ckpz_ctx_message(ctx));
    ckpz_archive_close(a);
    ckpz_mem r = mem_in(b, len, 0);
    e = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &r, NULL, NULL, NULL);
    CHECK(e != CKPZ_OK && ckpz_ctx_message(ctx)[0], "index of %zu entries not in the stream: decompress_stream: %s", ne,
          ckpz_error_name(e));
    ckpz_ctx_free(ctx);
    free(b);
}

/* The chunk size comes from the file header: a file with 16 MiB chunks must not make a
 * reader with a 1 MiB memory limit reserve chunk buffers beyond it. */
static void test_chunk_size_limit(const uint8_t *orig, size_t olen)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.chunk_size = CKPZ_CHUNK_MAX;
    p.threads = 1;
    void *z = NULL;
    size_t zl = 0;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, orig, olen, &z, &zl);
    CHECK(e == CKPZ_OK, "compress with 16 MiB chunks: %s", ckpz_ctx_message(ctx));
    if (e) {
        ckpz_ctx_free(ctx);
        return;
    }
    ckpz_params_init(&p);
    p.threads = 1;
    p.mem_limit = 1 << 20;
    ckpz_mem r = mem_in(z, zl, 0);
    e = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &r, NULL, NULL, NULL);
    CHECK(e == CKPZ_ERR_LIMIT, "16 MiB chunk size in the header, mem_limit 1 MiB: decompress_stream returned %s (%s)",
          ckpz_error_name(e), ckpz_ctx_message(ctx));
    ckpz_mem f = mem_in(z, zl, 0);
    ckpz_archive *a = NULL;
    e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, zl, &a);
    if (e == CKPZ_OK) {
        uint8_t *dst = malloc(olen);
        ckpz_mem w = mem_out(dst, olen);
        e = ckpz_archive_extract(ctx, a, 0, ckpz_mem_write, &w);
        free(dst);
        ckpz_archive_close(a);
    }
    CHECK(e == CKPZ_ERR_LIMIT,
          "16 MiB chunk size in the header, mem_limit 1 MiB: archive open/extract returned %s (%s)", ckpz_error_name(e),
          ckpz_ctx_message(ctx));
    ckpz_free(z);
    ckpz_ctx_free(ctx);
}

static void limit_address_space(void)
{
#ifndef CKPZ_TEST_ASAN
    /* Outside ASan: cap the address space at what is mapped now plus 1 GiB, so that a
     * huge allocation fails (and shows as CKPZ_ERR_NOMEM, which the hostile checks
     * refuse) instead of quietly succeeding on an overcommitting system. */
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long pages = 0;
    if (f) {
        if (fscanf(f, "%lu", &pages) != 1) pages = 0;
        fclose(f);
    }
    if (pages) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_AS, &rl) == 0) {
            rlim_t want = (rlim_t)pages * 4096 + ((rlim_t)1 << 30);
            if (rl.rlim_max == RLIM_INFINITY || want < rl.rlim_max) {
                rl.rlim_cur = want;
                setrlimit(RLIMIT_AS, &rl);
            }
        }
    }
#endif
}

/* A delta file read without its base, or with a wrong one, is refused by every reader
 * with CKPZ_ERR_BASE and a message naming the CRC-32C of the base it needs (listing
 * needs no base). */
static void test_base_errors(const sample *s)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    uint8_t *dst = malloc(s->olen), *wrong = malloc(s->base_len);
    char crc[16];
    snprintf(crc, sizeof crc, "%08x", (unsigned)crc32c(0, s->base, s->base_len));
    memcpy(wrong, s->base, s->base_len);
    wrong[s->base_len / 2] ^= 4;
    for (int k = 0; k < 3; k++) {
        const char *what = k == 0 ? "no base" : k == 1 ? "wrong base" : "shorter base";
        ckpz_params_init(&p);
        p.base = k ? wrong : NULL;
        p.base_size = k == 0 ? 0 : k == 1 ? s->base_len : s->base_len - 1;
        ckpz_error e = ckpz_decompress_buffer(ctx, &p, s->z, s->zlen, dst, s->olen);
        CHECK(e == CKPZ_ERR_BASE && strstr(ckpz_ctx_message(ctx), crc), "%s: decompress_buffer: %d %s", what, e,
              ckpz_ctx_message(ctx));
        ckpz_mem r = mem_in(s->z, s->zlen, 0);
        e = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &r, NULL, NULL, NULL);
        CHECK(e == CKPZ_ERR_BASE && strstr(ckpz_ctx_message(ctx), crc), "%s: decompress_stream: %d %s", what, e,
              ckpz_ctx_message(ctx));
        ckpz_mem f = mem_in(s->z, s->zlen, 0);
        ckpz_archive *a = NULL;
        e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, s->zlen, &a);
        if (k == 0) { /* opens (for listing); extraction of a coded-against-base entry fails */
            CHECK(e == CKPZ_OK, "no base: archive_open: %s", ckpz_ctx_message(ctx));
            ckpz_base_info bi = {.struct_size = sizeof bi};
            if (a) ckpz_archive_get_base(a, &bi);
            CHECK(a && bi.needed && bi.size == s->base_len && bi.depth == 1, "no base: archive_get_base");
            ckpz_mem w = mem_out(dst, s->olen);
            ckpz_entry en = {.struct_size = sizeof en};
            uint64_t idx = 0;
            CHECK(a && ckpz_archive_find(ctx, a, "b", &idx) == CKPZ_OK && ckpz_archive_entry(a, idx, &en) == CKPZ_OK &&
                      en.based,
                  "no base: tensor b is not coded against the base");
            e = a ? ckpz_archive_extract(ctx, a, idx, ckpz_mem_write, &w) : CKPZ_ERR_INTERNAL;
            CHECK(e == CKPZ_ERR_BASE && strstr(ckpz_ctx_message(ctx), crc), "no base: extract: %d %s", e,
                  ckpz_ctx_message(ctx));
        } else {
            CHECK(e == CKPZ_ERR_BASE && strstr(ckpz_ctx_message(ctx), crc), "%s: archive_open: %d %s", what, e,
                  ckpz_ctx_message(ctx));
        }
        ckpz_archive_close(a);
    }
    /* the unchanged start of b is one copy frame however many chunks it spans */
    int copies = 0, big_copy = 0;
    for (size_t i = 0; i < s->nsec; i++) {
        const section *c = &s->sec[i];
        if (c->kind == SEC_CHUNK && s->z[c->off + 19] == 3) {
            copies++;
            big_copy |= rd32(s->z + c->off + 8) > 65536;
        }
    }
    CHECK(copies >= 1 && big_copy, "delta sample: %d copy frames, none longer than a chunk", copies);
    free(dst);
    free(wrong);
    ckpz_ctx_free(ctx);
}

int main(void)
{
    size_t st_len, rnd_len = 300000, i32_len = 200000;
    uint8_t *st = make_safetensors(110000, 80000, 1, &st_len);
    size_t lst_len;
    uint8_t *lst = make_safetensors(110000, 80000, 10, &lst_len);
    uint8_t *rnd = malloc(rnd_len), *i32 = malloc(i32_len);
    for (size_t k = 0; k < rnd_len; k++) rnd[k] = (uint8_t)(rng() >> 56);
    for (size_t k = 0; k < i32_len; k += 4) wr32(i32 + k, (uint32_t)(int32_t)(gauss() * 300.0));

    limit_address_space();

    /* the next checkpoint of st: tensor a moved by an ulp here and there, the first 60%
     * of b unchanged (copy frames spanning several chunks), the rest moved */
    uint8_t *st2 = malloc(st_len);
    memcpy(st2, st, st_len);
    {
        size_t hl = (size_t)rd64(st2), a0 = 8 + hl, b0 = a0 + 2 * 110000;
        for (size_t k = 0; k < 110000; k += 7) st2[a0 + 2 * k] ^= 1;
        for (size_t k = 48000; k < 80000; k++) wr32(st2 + b0 + 4 * k, rd32(st2 + b0 + 4 * k) + (uint32_t)(rng() % 5));
    }

    /* a next checkpoint whose residuals often escape the escape transform's A plane:
     * steps of up to 16 units in a's (bf16) last place (T = 31, a few escapes), of up to
     * 3 M in b's (f32: top residual bytes up to ~90, T = 63 with escapes) */
    size_t et_len;
    uint8_t *et = make_safetensors(36000, 17000, 1, &et_len), *et2 = malloc(et_len);
    memcpy(et2, et, et_len);
    {
        size_t hl = (size_t)rd64(et2), a0 = 8 + hl, b0 = a0 + 2 * 36000;
        for (size_t k = 0; k < 36000; k++) {
            unsigned v = et2[a0 + 2 * k] | (unsigned)et2[a0 + 2 * k + 1] << 8;
            v = (v + (unsigned)(rng() % 33) - 16) & 0xffff;
            et2[a0 + 2 * k] = (uint8_t)v;
            et2[a0 + 2 * k + 1] = (uint8_t)(v >> 8);
        }
        for (size_t k = 0; k < 17000; k++)
            wr32(et2 + b0 + 4 * k, rd32(et2 + b0 + 4 * k) + (uint32_t)(rng() % 6000001) - 3000000u);
    }

    static sample s[NSAMPLES];
    int ok = build_sample(&s[0], "safetensors", st, st_len, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, NULL, 0, NULL) == 0;
    ok &= build_sample(&s[1], "raw random", rnd, rnd_len, CKPZ_INPUT_RAW, CKPZ_DTYPE_NONE, 1, NULL, 0, NULL) == 0;
    ok &= build_sample(&s[2], "raw i32 level 9", i32, i32_len, CKPZ_INPUT_RAW, CKPZ_DTYPE_I32, 9, NULL, 0, NULL) == 0;
    ok &= build_sample(&s[3], "empty", rnd, 0, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, NULL, 0, NULL) == 0;
    ok &= build_sample(&s[4], "delta safetensors", st2, st_len, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, st, st_len,
                       NULL) == 0;
    /* lossy: every grid and side plane (bitmap, group parameters, 16-bit codes) */
    ok &= build_sample(&s[5], "lossy safetensors", lst, lst_len, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, NULL, 0,
                       "a bits 8 block 64 prune 0.3\nb pointwise-rel 0.001\n") == 0;
    ok &= build_sample(&s[6], "lossy delta", lst, lst_len, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, s[5].owned, lst_len,
                       "a bits 8 block 32 delta\nb abs 0.0001 prune 0.2\n") == 0;
    ok &= build_sample(&s[7], "delta with escapes", et2, et_len, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, et, et_len,
                       NULL) == 0;
    size_t sm_len;
    uint8_t *sm = make_small_safetensors(&sm_len);
    ok &= build_sample(&s[8], "packed small tensors", sm, sm_len, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, 3, NULL, 0, NULL) ==
          0;
    if (ok) {
        CHECK(s[0].nchunks >= 5 && s[0].nent >= 3, "safetensors sample: only %zu chunks, %zu entries", s[0].nchunks,
              s[0].nent);
        CHECK(s[4].zlen < s[0].zlen / 2, "delta sample: %zu bytes, stand-alone %zu", s[4].zlen, s[0].zlen);
        CHECK(s[4].esc_chunks > 0 && s[7].esc_escaping > 0,
              "escape transform: %u chunks in the delta sample, %u with escapes in the escaping one", s[4].esc_chunks,
              s[7].esc_escaping);
        CHECK(s[4].esc_wide < s[4].esc_chunks && s[7].esc_wide > 0,
              "escape thresholds: %u of %u chunks at T = 63 in the delta sample, %u in the escaping one", s[4].esc_wide,
              s[4].esc_chunks, s[7].esc_wide);
        /* 18 tensors and the header in 3 chunks: a group of the header and six small ones
         * (the empty tensor ends it), one small tensor that leads the one too large to pack,
         * and a group of the nine last */
        CHECK(s[8].nent == 19 && s[8].nchunks == 3, "packed sample: %zu entries in %zu chunks", s[8].nent,
              s[8].nchunks);
        for (int k = 0; k < NSAMPLES; k++) {
            test_flips(&s[k]);
            test_reserved(&s[k]);
            test_unknown_ids(&s[k]);
            test_truncation(&s[k]);
            test_appended(&s[k], &s[(k + 1) % NSAMPLES]);
            test_hostile(&s[k]);
        }
        test_base_errors(&s[4]);
        test_foreign();
        test_many_entries();
        test_chunk_size_limit(rnd, rnd_len);
    }
    for (int k = 0; k < NSAMPLES; k++) {
        ckpz_free(s[k].z);
        free(s[k].owned);
    }
    free(lst);
    free(st);
    free(st2);
    free(et);
    free(et2);
    free(sm);
    free(rnd);
    free(i32);
    if (verbose) printf("done\n");
    printf("test_corrupt: %lu checks, %lu failed\n", n_checks, n_failed);
    return n_failed ? 1 : 0;
}
