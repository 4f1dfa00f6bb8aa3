/* test_twin.c — the device decoder's host half and CPU twins, on the CPU: for each .ckpz
 * file named, the plan (lib/gpu/plan.c), the twin of the rANS warp (lib/gpu/rans0_twin.c)
 * and every thread of the merge kernel (lib/gpu/merge_dev.h, with the launch's thread
 * count) must restore exactly what ckpz_decompress_buffer restores, and the pieces of
 * the CRC kernel (lib/gpu/crc_dev.h, XORed in reverse order) must give every merged
 * chunk its frame's CRC-32C, and its CRC of runs of bytes at every alignment must be
 * crc32c's. Then hostile bytes:
 * 400 copies of planned rANS planes (codec 2 or 11) with one change (mutate_plane.h: a word
 * cut off, a bit of the head or tables, a byte anywhere, a table cut short, a bit of the
 * states) must be refused or decoded by the twin exactly as the CPU's decoder of their
 * codec (rans0_decode, rans0t_decode) refuses or decodes them. With no file named, it makes its own: synthetic tensors (BF16, FP16, FP32, FP64,
 * I32, U8 and opaque bytes; element counts from 1 up, odd byte counts with a tail plane,
 * scales that drift along the tensor so that rANS tables change; 64 KiB and 1 MiB chunks;
 * levels 1, 3 and 9) compressed with ckpz_compress_buffer, and 300 copies of one of
 * them with one byte changed, which the plan must refuse unless the twins still restore
 * the original from them; and before those, planes coded straight by the codec 2 and 11
 * encoders (direct_planes), the writer's files having no codec 2 planes. No GPU needed (tests/gpu/run.sh
 * builds it). Exit 1 on any difference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/crc32c.h"
#include "entropy/ent_internal.h"
#include "entropy/entropy.h"
#include "gpu/crc_dev.h"
#include "gpu/merge_dev.h"
#include "gpu/plan.h"
#include "transforms/ids.h"
#include "transforms/planes.h"
#include "mutate_plane.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

/* The plan carried out on the CPU: the twin for the rANS planes, xf_merge for chunks. */
static int restore(const gpu_plan *pl, const uint8_t *file, uint8_t *out)
{
    uint8_t *scratch = malloc(pl->scratch_size ? pl->scratch_size : 1);
    if (!scratch) return -1;
    for (size_t i = 0; i < pl->nrp; i++) {
        const gpu_rplane *r = &pl->rp[i];
        if (gpu_rans0_twin(r->codec, file + r->src, r->len, scratch + r->dst, r->size)) {
            fprintf(stderr, "chunk %u plane %u: the twin refuses it\n", r->chunk, r->plane);
            free(scratch);
            return -1;
        }
    }
    uint32_t nthreads = 256; /* gpu_dec_run's grid: 256 per GM_BLOCK_ELEMS elements of the largest chunk */
    for (size_t c = 0; c < pl->nmc; c++) {
        uint32_t per = (pl->mc[c].n / pl->mc[c].esize + GM_BLOCK_ELEMS - 1) / GM_BLOCK_ELEMS;
        if (256 * per > nthreads) nthreads = 256 * per;
    }
    for (size_t c = 0; c < pl->nmc; c++) {
        const gpu_mchunk *m = &pl->mc[c];
        const uint8_t *p[GPU_PLANES_MAX];
        for (int b = 0; b < GPU_PLANES_MAX; b++)
            p[b] = m->plane[b] & GPU_FROM_FILE ? file + (m->plane[b] & ~GPU_FROM_FILE) : scratch + m->plane[b];
        for (uint32_t t = 0; t < nthreads; t++)
            gm_merge_chunk(m->esize, m->xf == XF_FLOAT, p, m->n, out + m->out, t, nthreads);
    }
    free(scratch);
    /* the CRC kernel: every piece of every merged chunk, XORed in any order */
    uint32_t tab[8 * 256], x2n[64];
    gc_tables(tab, x2n);
    for (size_t c = 0; c < pl->nmc; c++) {
        const gpu_mchunk *m = &pl->mc[c];
        uint32_t acc = 0;
        for (uint32_t k = (m->n + GC_PIECE - 1) / GC_PIECE; k-- > 0;) acc ^= gc_piece(tab, x2n, out + m->out, m->n, k);
        if (acc != m->raw_crc) {
            fprintf(stderr, "chunk %u: checksum mismatch in the restored data\n", m->chunk);
            return -1;
        }
    }
    for (size_t c = 0; c < pl->nhc; c++) memcpy(out + pl->hc[c].out, pl->host + pl->hc[c].src, pl->hc[c].n);
    return 0;
}

/* The coded plane c[0..len) (codec, n bytes) with one change (mutate_plane.h): the twin
 * and the CPU decoder must agree. tried[how], refused[how]: per kind of change. */
static int agree(ent_ctx *ec, unsigned codec, const uint8_t *c, size_t len, size_t n, int *tried, int *refused)
{
    uint8_t *src = malloc(len), *a = malloc(n), *b = malloc(n);
    memcpy(src, c, len);
    int how;
    len = mutate_plane(src, len, n, codec, rnd, &how);
    uint8_t *cut = malloc(len ? len : 1); /* exactly the bytes left, so that a sanitizer sees a read past them */
    memcpy(cut, src, len);
    memset(a, 0xa5, n);
    memset(b, 0x5a, n);
    int rt = gpu_rans0_twin(codec, cut, len, a, n);
    int rc = ent_decode(ec, (uint8_t)codec, cut, len, b, n);
    int bad = (rt != 0) != (rc != 0) || (rt == 0 && memcmp(a, b, n) != 0) || rt == -2;
    if (bad) fprintf(stderr, "codec %u, %zu bytes, change %d: twin %d, CPU %d\n", codec, n, how, rt, rc);
    tried[how]++;
    refused[how] += rt != 0;
    free(cut);
    free(src);
    free(a);
    free(b);
    return bad;
}

static int mutate(ent_ctx *ec, const gpu_plan *pl, const uint8_t *file, int *tried, int *refused)
{
    const gpu_rplane *r = &pl->rp[rnd() % pl->nrp];
    int bad = agree(ec, r->codec, file + r->src, r->len, r->size, tried, refused);
    if (bad) fprintf(stderr, "  (chunk %u plane %u)\n", r->chunk, r->plane);
    return bad;
}

/* One file in memory: the checks above; returns the failures. */
static int check(ckpz_ctx *ctx, ent_ctx *ec, const char *name, const uint8_t *file, size_t size)
{
    gpu_plan pl;
    uint64_t orig;
    if (ckpz_original_size(ctx, file, size, &orig) || gpu_plan_build(ctx, file, size, &pl)) {
        fprintf(stderr, "%s: %s\n", name, ckpz_ctx_message(ctx));
        return 1;
    }
    uint8_t *ref = malloc(orig + 1), *out = malloc(orig + 1);
    if (ckpz_decompress_buffer(ctx, NULL, file, size, ref, orig)) {
        fprintf(stderr, "%s: %s\n", name, ckpz_ctx_message(ctx));
        return 1;
    }
    memset(out, 0xee, orig);
    int bad = restore(&pl, file, out) || memcmp(out, ref, orig) != 0;
    int mbad = 0, tried[5] = {0}, refused[5] = {0}, nref = 0;
    size_t n11 = 0;
    for (int k = 0; k < 400 && pl.nrp; k++) mbad += mutate(ec, &pl, file, tried, refused);
    for (int h = 0; h < 5; h++) nref += refused[h];
    for (size_t i = 0; i < pl.nrp; i++) n11 += pl.rp[i].codec == GPU_RANS0T;
    printf("%s: %llu bytes, %llu chunks: %zu merged (%llu rANS planes, %zu of them codec 11, %llu stored), %zu on the "
           "host (%llu bytes): %s; changed planes: %d/%d refused (word cut %d/%d, head %d/%d, byte %d/%d, table cut "
           "%d/%d, state bit %d/%d), %d disagreements\n",
           name, (unsigned long long)orig, (unsigned long long)pl.chunks, pl.nmc, (unsigned long long)pl.rans0_planes,
           n11, (unsigned long long)pl.stored_planes, pl.nhc, (unsigned long long)pl.host_size,
           bad ? "DIFFERENT" : "same bytes", nref, pl.nrp ? 400 : 0, refused[0], tried[0], refused[1], tried[1],
           refused[2], tried[2], refused[3], tried[3], refused[4], tried[4], mbad);
    gpu_plan_free(&pl);
    free(ref);
    free(out);
    return bad + mbad;
}

/* normal(0, 1) by Box-Muller */
static double gauss(void)
{
    double u = ((rnd() >> 11) + 1.0) / 9007199254740993.0, v = (rnd() >> 11) / 9007199254740992.0;
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* n bytes of dtype: values whose scale drifts tenfold and back along the buffer. */
static void fill(ckpz_dtype t, uint8_t *b, size_t n)
{
    size_t es = t == CKPZ_DTYPE_F64                           ? 8
                : t == CKPZ_DTYPE_F32 || t == CKPZ_DTYPE_I32  ? 4
                : t == CKPZ_DTYPE_BF16 || t == CKPZ_DTYPE_F16 ? 2
                                                              : 1;
    for (size_t i = 0; i + es <= n; i += es) {
        double x = 0.02 * gauss() * (1.0 + 9.0 * sin(3.14159 * (double)i / (double)n));
        float f = (float)x;
        uint32_t u;
        memcpy(&u, &f, 4);
        if (t == CKPZ_DTYPE_F64) memcpy(b + i, &x, 8);
        else if (t == CKPZ_DTYPE_F32) memcpy(b + i, &u, 4);
        else if (t == CKPZ_DTYPE_BF16) b[i] = (uint8_t)(u >> 16), b[i + 1] = (uint8_t)(u >> 24);
        else if (t == CKPZ_DTYPE_F16) { /* not a real half: sign, 5-bit exponent range, mantissa bits */
            uint16_t h = (uint16_t)(((u >> 16) & 0x8000) | ((((u >> 23) & 0xff) - 112) & 0x1f) << 10 |
                                    ((u >> 13) & 0x3ff));
            b[i] = (uint8_t)h, b[i + 1] = (uint8_t)(h >> 8);
        } else if (t == CKPZ_DTYPE_I32) {
            int32_t v = (int32_t)(x * 5000);
            memcpy(b + i, &v, 4);
        } else b[i] = (uint8_t)(128 + x * 500);
    }
    for (size_t i = n / es * es; i < n; i++) b[i] = (uint8_t)rnd();
}

/* Whole files with one byte changed: the plan refuses them, or the twins restore the
 * original (a change the checksums do not cover, in the index, say). Never a crash. */
static int hostile_file(ckpz_ctx *ctx, const uint8_t *file, size_t size, const uint8_t *raw, size_t n)
{
    uint8_t *f = malloc(size), *out = malloc(n);
    int refused = 0, bad = 0;
    for (int k = 0; k < 300; k++) {
        memcpy(f, file, size);
        size_t at = k % 3 ? rnd() % (size < 4096 ? size : 4096) : rnd() % size; /* headers and first frames */
        f[at] ^= (uint8_t)(1 + rnd() % 255);
        gpu_plan pl;
        if (gpu_plan_build(ctx, f, size, &pl)) {
            refused++;
            continue;
        }
        memset(out, 0xee, n);
        if (pl.original_size != n || restore(&pl, f, out) || memcmp(out, raw, n) != 0) {
            fprintf(stderr, "changed file byte %zu: planned, but not restored\n", at);
            bad++;
        }
        gpu_plan_free(&pl);
    }
    printf("changed files: 300, %d refused by the plan, %d planned but wrong\n", refused, bad);
    free(f);
    free(out);
    return bad;
}

static int synthetic(ckpz_ctx *ctx, ent_ctx *ec)
{
    static const ckpz_dtype types[] = {CKPZ_DTYPE_BF16, CKPZ_DTYPE_F16, CKPZ_DTYPE_F32, CKPZ_DTYPE_F64,
                                       CKPZ_DTYPE_I32,  CKPZ_DTYPE_U8,  CKPZ_DTYPE_NONE};
    static const size_t sizes[] = {1, 2, 7, 1000, 65536 + 3, 1000003, 3u << 20};
    static const int levels[] = {1, 3, 9};
    int fails = 0;
    for (size_t t = 0; t < sizeof types / sizeof *types; t++)
        for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
            for (int cs = 0; cs < 2; cs++) {
                size_t n = sizes[z];
                uint8_t *raw = malloc(n);
                fill(types[t], raw, n);
                ckpz_params p;
                ckpz_params_init(&p);
                p.format = CKPZ_INPUT_RAW;
                p.raw_dtype = types[t];
                p.level = levels[(t + z + (size_t)cs) % 3];
                p.chunk_size = cs ? 1u << 20 : 64u << 10;
                p.threads = 1;
                void *f;
                size_t fsize;
                char name[96];
                snprintf(name, sizeof name, "synthetic %s, %zu bytes, chunks %zu, level %d",
                         types[t] ? ckpz_dtype_format_name(types[t], CKPZ_INPUT_RAW) : "opaque", n, p.chunk_size,
                         p.level);
                if (ckpz_compress_buffer(ctx, &p, raw, n, &f, &fsize)) {
                    fprintf(stderr, "%s: %s\n", name, ckpz_ctx_message(ctx));
                    return 1;
                }
                fails += check(ctx, ec, name, f, fsize);
                if (types[t] == CKPZ_DTYPE_BF16 && n == (3u << 20) && !cs) fails += hostile_file(ctx, f, fsize, raw, n);
                ckpz_free(f);
                free(raw);
            }
    return fails;
}

/* 1 when codec 11's tail (the last t rounds) holds a segment start: the twin then decodes
 * the tail with more than one table. */
static int tail_crosses(const uint8_t *c, size_t len, size_t n)
{
    int sh;
    unsigned N;
    size_t nb, nm, b = 0, k;
    const uint8_t *p = c + 2, *end = c + len;
    if (gr_head(c, len, n, 1, &sh, &N, &nb, &nm)) return 0;
    for (; b < nb; b += k)
        if (gr_leb(&p, end, &k) || gr_dtab(&p, end, NULL)) return 0;
        else if ((b << sh) > nm && (b << sh) < n) return 1;
    return 0;
}

/* Planes coded straight by rans0_encode and rans0t_encode (codecs 2 and 11; the writer
 * no longer writes codec 2 but for delta residuals, which the plan leaves to the host):
 * sizes from 1 byte to 1 MiB, skewed, drifting (segments with tables of their own),
 * even-only (codec 11's mode 1 tables) and nearly constant (the longest tails) bytes,
 * and nearly constant ones whose last 1500 change (a last segment inside the tail),
 * levels 1, 3, 9. The twin must restore each as the CPU decoder
 * does, and agree with it on 8 changed copies of each. */
static int direct_planes(ent_ctx *ec)
{
    static const size_t sizes[] = {
        1,    2,    31,   33,    64,         100,          992,    1000,           1984,
        2047, 4096, 4099, 20000, 65536 + 17, 65536 + 1500, 300001, (1u << 20) + 5, (1u << 18) + 1500};
    int fails = 0, tried[5] = {0}, refused[5] = {0}, nref = 0, coded[2] = {0, 0}, tails = 0, cross = 0, all = 0;
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++)
        for (int kind = 0; kind < 5; kind++) {
            size_t n = sizes[z], cap = n + 4096;
            uint8_t *raw = malloc(n), *c = malloc(cap), *a = malloc(n), *b = malloc(n);
            for (size_t i = 0; i < n; i++) {
                uint64_t r = rnd();
                int g = __builtin_ctzll(r | 1ull << 40); /* geometric */
                raw[i] = kind == 0                   ? (uint8_t)(120 + g)
                         : kind == 1                 ? (uint8_t)(40 + 80 * i / n + g)
                         : kind == 2                 ? (uint8_t)(2 * (g & 15))
                         : kind == 3 || i + 1500 < n ? (uint8_t)((r >> 48) == 0)
                                                     : (uint8_t)(7 + ((r >> 52) == 0));
            }
            int level = z % 3 == 0 ? 1 : z % 3 == 1 ? 3 : 9;
            for (int f = 0; f < 2; f++) {
                unsigned codec = f ? GPU_RANS0T : GPU_RANS0;
                size_t len = f ? rans0t_encode(ec, raw, n, c, cap, level) : rans0_encode(ec, raw, n, c, cap, level);
                if (!len) continue; /* not smaller than the plane: it would be stored */
                coded[f]++;
                if (f && c[1] >> 3) {
                    tails++;
                    cross += tail_crosses(c, len, n);
                    all += (size_t)(c[1] >> 3) << (c[1] & 7) == n;
                }
                memset(a, 0xa5, n);
                memset(b, 0x5a, n);
                int rt = gpu_rans0_twin(codec, c, len, a, n), rc = ent_decode(ec, (uint8_t)codec, c, len, b, n);
                if (rt || rc || memcmp(a, raw, n) || memcmp(b, raw, n)) {
                    fprintf(stderr, "codec %u, %zu bytes, kind %d, level %d: twin %d, CPU %d\n", codec, n, kind, level,
                            rt, rc);
                    fails++;
                }
                for (int k = 0; k < 8; k++) fails += agree(ec, codec, c, len, n, tried, refused);
            }
            free(raw);
            free(c);
            free(a);
            free(b);
        }
    for (int h = 0; h < 5; h++) nref += refused[h];
    printf("planes coded directly: %d codec 2, %d codec 11 (%d with a tail, %d of them all tail, %d with a segment "
           "start in the tail): %s; changed copies: %d/%d refused, %d failures\n",
           coded[0], coded[1], tails, all, cross, fails ? "DIFFERENT" : "same bytes", nref, 8 * (coded[0] + coded[1]),
           fails);
    return fails;
}

/* crc_dev.h's CRC of a run of bytes against the CPU's, at every start modulo 32 (the
 * bytes before the first 16-byte boundary, the 16-byte steps, the tail): 0 or 1. */
static int crc_runs(void)
{
    static const uint32_t lens[] = {0, 1, 7, 15, 16, 17, 31, 32, 33, 47, 100, 1023, 1024, 1025, 4099};
    uint32_t tab[8 * 256], x2n[64];
    uint8_t *buf = malloc(4099 + 32);
    if (!buf) return 1;
    gc_tables(tab, x2n);
    for (size_t i = 0; i < 4099 + 32; i++) buf[i] = (uint8_t)rnd();
    int bad = 0;
    for (uint32_t at = 0; at < 32; at++)
        for (size_t k = 0; k < sizeof lens / sizeof *lens; k++)
            if (gc_bytes(tab, buf + at, lens[k]) != crc32c(0, buf + at, lens[k])) {
                fprintf(stderr, "crc_dev.h: %u bytes at %u: CRC differs from crc32c\n", lens[k], at);
                bad = 1;
            }
    free(buf);
    printf("crc_dev.h against crc32c, starts 0..31, %zu lengths: %s\n", sizeof lens / sizeof *lens,
           bad ? "DIFFERENT" : "same");
    return bad;
}

int main(int argc, char **argv)
{
    int fails = 0;
    ckpz_ctx *ctx = ckpz_ctx_create();
    ent_ctx *ec = ent_ctx_create();
    fails += crc_runs();
    if (argc < 2) fails += direct_planes(ec) + synthetic(ctx, ec);
    for (int f = 1; f < argc; f++) {
        size_t size;
        uint8_t *file = slurp(argv[f], &size);
        if (!file) {
            fprintf(stderr, "%s: cannot read\n", argv[f]);
            return 2;
        }
        fails += check(ctx, ec, argv[f], file, size);
        free(file);
    }
    ent_ctx_free(ec);
    ckpz_ctx_free(ctx);
    printf("%s\n", fails ? "FAILED" : "all checks passed");
    return fails ? 1 : 0;
}
