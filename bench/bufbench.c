/* bufbench.c — the one-shot in-memory calls against `ckpz -b -T1`'s path, on the same bytes.
 *
 *     bufbench [-r RUNS] [-l LEVEL] [-s MB] [-w PATH] FILE.safetensors...
 *
 * Inputs, each a valid safetensors file built in memory from the tensors of the FILEs
 * (their real bytes, listed with ckpz_predict_file): 64 KiB, 256 KiB and 1 MiB (the
 * first tensors of the first FILE, the last one cut to a 1-D slice to fill the size
 * exactly), each FILE whole as it is, and an -s MB file (default 64: every tensor of
 * every FILE again and again, renamed "copyK.NAME", the last one cut to fit; -w writes
 * it to PATH, e.g. for timing the CLI or --target-bw on it).
 *
 * Per input and call, RUNS timed runs (default 5, after one untimed warm-up) on one
 * context reused across runs, interleaved call by call so that all see the same machine
 * state; the median is printed as MB/s (original bytes / s / 1e6, as ckpz -b prints):
 *   ref      ckpz_compress_stream, threads 1, memory reader, output into a buffer
 *            allocated once and reused: what `ckpz -b -T1` times (programs/bench.c)
 *   buf      ckpz_compress_buffer, default params (threads 0 = all cores); the result
 *            freed with ckpz_free after each run, as a caller would
 *   buf-T1   the same with threads 1
 *   into     ckpz_compress_into, default params, into one dst of ckpz_compress_bound
 *            bytes reused across runs (zstd's ZSTD_compressCCtx pattern)
 *   into-T1  the same with threads 1
 * and each call's ratio to ref. Every call's output is compared with into-T1's (they
 * must be byte for byte equal: threads and the output buffer change nothing), and
 * into-T1's output is restored and compared with the input.
 *
 * -DBUFBENCH_NO_INTO builds it against a library without ckpz_compress_into (0.4.0 before
 * it): the into rows are then left out, for before/after numbers.
 *
 * Build: cc -O2 -Iinclude bench/bufbench.c build/libckpz.a -lzstd -llz4 -ldeflate -lpthread -lm -ldl
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CKPZ_EXPERIMENTAL /* ckpz_predict_file */
#include "ckpz.h"
#include "memio.h"

#define MAX_RUNS 101

typedef struct {
    char *name;
    ckpz_dtype dt;
    uint32_t ndim;
    uint64_t shape[64];
    const uint8_t *data;
    uint64_t len;
} tensor;

typedef struct {
    tensor *t;
    size_t n, cap;
    const uint8_t *file;
} tlist;

static int collect(void *opaque, const ckpz_prediction *p)
{
    tlist *l = opaque;
    if (p->dtype == CKPZ_DTYPE_NONE || p->ndim > 64) return 0;
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 256;
        tensor *nt = realloc(l->t, nc * sizeof *nt);
        if (!nt) return 1;
        l->t = nt;
        l->cap = nc;
    }
    tensor *t = &l->t[l->n++];
    t->name = strdup(p->name);
    t->dt = p->dtype;
    t->ndim = p->ndim;
    memcpy(t->shape, p->shape, p->ndim * sizeof *p->shape);
    t->data = l->file + p->offset;
    t->len = p->length;
    return t->name == NULL;
}

static const char *st_dtype(ckpz_dtype t)
{
    const char *n = ckpz_dtype_format_name(t, CKPZ_INPUT_SAFETENSORS);
    return n ? n : "";
}

typedef struct {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_put(b, tmp, (size_t)k);
}

/* A safetensors file of exactly `size` bytes from the tensors in order (again and again
 * with copy prefixes when `repeat`); NULL if the tensors cannot fill it. */
static uint8_t *make_safetensors(const tlist *l, size_t size, int repeat)
{
    size_t hguess = 1024;
    for (int attempt = 0; attempt < 64; attempt++) {
        if (hguess + 8 >= size) return NULL;
        size_t budget = size - 8 - hguess, used = 0, k = 0, copy = 0;
        sbuf h = {0};
        sb_put(&h, "{", 1);
        /* pass 1: the header */
        while (used < budget) {
            if (k == l->n) {
                if (!repeat || !l->n) break;
                k = 0;
                copy++;
            }
            const tensor *t = &l->t[k++];
            unsigned es = ckpz_dtype_size(t->dt);
            uint64_t len = t->len;
            int sliced = 0;
            if (len > budget - used) {
                len = (budget - used) / es * es;
                sliced = 1;
                if (!len) break;
            }
            if (!len) continue; /* empty tensors add nothing to fill with */
            sb_printf(&h, "%s\"", h.n > 1 ? "," : "");
            if (repeat) sb_printf(&h, "copy%zu.", copy);
            sb_put(&h, t->name, strlen(t->name));
            sb_printf(&h, "\":{\"dtype\":\"%s\",\"shape\":[", st_dtype(t->dt));
            if (sliced) sb_printf(&h, "%llu", (unsigned long long)(len / es));
            else
                for (uint32_t d = 0; d < t->ndim; d++)
                    sb_printf(&h, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
            sb_printf(&h, "],\"data_offsets\":[%zu,%zu]}", used, used + (size_t)len);
            used += (size_t)len;
        }
        sb_put(&h, "}", 1);
        if (used == 0) {
            free(h.p);
            return NULL;
        }
        if (8 + h.n + used > size) { /* the header came out longer than guessed */
            hguess = h.n + 64;
            free(h.p);
            continue;
        }
        size_t hlen = size - 8 - used; /* padded with spaces, as the format allows */
        if (hlen - h.n > 4096) { /* not enough tensor bytes to fill the size */
            free(h.p);
            return NULL;
        }
        uint8_t *f = malloc(size);
        if (!f) return NULL;
        for (int i = 0; i < 8; i++) f[i] = (uint8_t)((uint64_t)hlen >> (8 * i));
        memcpy(f + 8, h.p, h.n);
        memset(f + 8 + h.n, ' ', hlen - h.n);
        free(h.p);
        /* pass 2: the data, in the same order */
        uint8_t *d = f + 8 + hlen;
        size_t at = 0;
        k = 0;
        while (at < used) {
            if (k == l->n) k = 0;
            const tensor *t = &l->t[k++];
            size_t len = t->len < used - at ? (size_t)t->len : used - at;
            memcpy(d + at, t->data, len);
            at += len;
        }
        return f;
    }
    return NULL;
}

static double now(void) { return clk(CLOCK_MONOTONIC); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { REF, BUF, BUF1, INTO, INTO1, NCALLS };
static const char *const call_name[NCALLS] = {"ref", "buf", "buf-T1", "into", "into-T1"};

typedef struct {
    ckpz_ctx *ctx;
    ckpz_params p0, p1; /* threads 0 and 1 */
    uint8_t *ref_out, *into_out;
    size_t ref_cap, into_cap;
    uint8_t *outs[NCALLS];
    size_t out_len[NCALLS];
} state;

/* The untimed warm-up run of call c; its output is kept in s->outs[c] for the checks. */
static int run(state *s, int c, const uint8_t *src, size_t n)
{
    ckpz_error e = CKPZ_OK;
    size_t len = 0;
    const uint8_t *out = NULL;
    void *z = NULL;
    switch (c) {
    case REF: {
        ckpz_mem in = {.data = (void *)src, .size = n}, o = {.data = s->ref_out, .capacity = s->ref_cap};
        e = ckpz_compress_stream(s->ctx, &s->p1, ckpz_mem_read, &in, n, ckpz_mem_write, &o, NULL);
        out = s->ref_out;
        len = o.size;
        break;
    }
    case BUF:
    case BUF1:
        e = ckpz_compress_buffer(s->ctx, c == BUF ? &s->p0 : &s->p1, src, n, &z, &len);
        out = z;
        break;
#ifndef BUFBENCH_NO_INTO
    case INTO:
    case INTO1:
        e = ckpz_compress_into(s->ctx, c == INTO ? &s->p0 : &s->p1, src, n, s->into_out, s->into_cap, &len);
        out = s->into_out;
        break;
#endif
    default: return 0;
    }
    if (e != CKPZ_OK) {
        fprintf(stderr, "%s: %s\n", call_name[c], ckpz_ctx_message(s->ctx));
        ckpz_free(z);
        return -1;
    }
    if (!s->outs[c] || s->out_len[c] < len) s->outs[c] = realloc(s->outs[c], len);
    memcpy(s->outs[c], out, len);
    s->out_len[c] = len;
    ckpz_free(z);
    return 0;
}

static int bench_input(state *s, const char *label, const uint8_t *src, size_t n, int runs, int have_into)
{
    double t[NCALLS][MAX_RUNS];
    int ncalls = have_into ? NCALLS : INTO;
    s->ref_cap = n + n / 64 + (1u << 20); /* as programs/bench.c sizes it */
    s->ref_out = malloc(s->ref_cap);
#ifndef BUFBENCH_NO_INTO
    s->into_cap = ckpz_compress_bound(n);
#else
    s->into_cap = 1;
#endif
    s->into_out = malloc(s->into_cap);
    if (!s->ref_out || !s->into_out) return -1;
    memset(s->ref_out, 0, s->ref_cap); /* touched once, as zstd's and bench.c's are */
    memset(s->into_out, 0, s->into_cap);
    for (int c = 0; c < ncalls; c++)
        if (run(s, c, src, n)) return -1; /* warm-up */
    for (int r = 0; r < runs; r++)
        for (int c = 0; c < ncalls; c++) {
            double t0 = now();
            ckpz_error e = CKPZ_OK;
            size_t len = 0;
            void *z = NULL;
            if (c == REF) {
                ckpz_mem in = {.data = (void *)src, .size = n}, o = {.data = s->ref_out, .capacity = s->ref_cap};
                e = ckpz_compress_stream(s->ctx, &s->p1, ckpz_mem_read, &in, n, ckpz_mem_write, &o, NULL);
                len = o.size;
            } else if (c == BUF || c == BUF1) {
                e = ckpz_compress_buffer(s->ctx, c == BUF ? &s->p0 : &s->p1, src, n, &z, &len);
                ckpz_free(z);
            } else {
#ifndef BUFBENCH_NO_INTO
                e = ckpz_compress_into(s->ctx, c == INTO ? &s->p0 : &s->p1, src, n, s->into_out, s->into_cap, &len);
#endif
            }
            t[c][r] = now() - t0;
            if (e != CKPZ_OK || len != s->out_len[c]) {
                fprintf(stderr, "%s %s: %s\n", label, call_name[c], e ? ckpz_ctx_message(s->ctx) : "size changed");
                return -1;
            }
        }
    double med[NCALLS];
    for (int c = 0; c < ncalls; c++) {
        qsort(t[c], (size_t)runs, sizeof t[c][0], cmp_double);
        med[c] = t[c][runs / 2];
    }
    int cmpto = have_into ? INTO1 : BUF1, bad = 0;
    for (int c = 0; c < ncalls; c++)
        if (c != REF && (s->out_len[c] != s->out_len[cmpto] || memcmp(s->outs[c], s->outs[cmpto], s->out_len[c]))) {
            fprintf(stderr, "%s: %s's output differs from %s's\n", label, call_name[c], call_name[cmpto]);
            bad = 1;
        }
    uint8_t *back = malloc(n ? n : 1);
    if (!back || ckpz_decompress_buffer(s->ctx, &s->p1, s->outs[cmpto], s->out_len[cmpto], back, n) != CKPZ_OK ||
        memcmp(back, src, n)) {
        fprintf(stderr, "%s: round trip is NOT identical to the input\n", label);
        bad = 1;
    }
    free(back);
    printf("%-38s %10zu -> %9zu (%.3fx)", label, n, s->out_len[cmpto], (double)n / (double)s->out_len[cmpto]);
    for (int c = 0; c < ncalls; c++) printf("  %s %7.1f", call_name[c], (double)n / med[c] / 1e6);
    printf(" MB/s |");
    for (int c = 1; c < ncalls; c++) printf(" %s/ref %.2f", call_name[c], med[REF] / med[c]);
    printf("%s\n", s->out_len[REF] == s->out_len[cmpto] && !memcmp(s->outs[REF], s->outs[cmpto], s->out_len[REF])
                       ? ""
                       : " (ref's output differs: described form past the bound)");
    fflush(stdout);
    free(s->ref_out);
    free(s->into_out);
    return bad ? -1 : 0;
}

static uint8_t *load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = len > 0 ? malloc((size_t)len) : NULL;
    if (p && fread(p, 1, (size_t)len, f) != (size_t)len) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)len;
    return p;
}

int main(int argc, char **argv)
{
    int runs = 5, level = CKPZ_LEVEL_DEFAULT, nf = 0, failed = 0;
    size_t big = 64;
    const char *files[64], *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") && i + 1 < argc) runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) level = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) big = (size_t)atol(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc) out_path = argv[++i];
        else if (nf < 64) files[nf++] = argv[i];
    }
    if (runs < 1) runs = 1;
    if (runs > MAX_RUNS) runs = MAX_RUNS;
    if (!nf) {
        fprintf(stderr, "usage: bufbench [-r RUNS] [-l LEVEL] [-s MB] [-w PATH] FILE.safetensors...\n");
        return 2;
    }
#ifdef BUFBENCH_NO_INTO
    int have_into = 0;
#else
    int have_into = 1;
#endif
    state s;
    memset(&s, 0, sizeof s);
    s.ctx = ckpz_ctx_create();
    ckpz_params_init(&s.p0);
    s.p0.level = level;
    s.p1 = s.p0;
    s.p1.threads = 1;
    tlist all = {0};
    uint8_t *data[64];
    size_t size[64];
    printf("ckpz %s, level %d, median of %d runs, one context per call kind reused\n", ckpz_version_string(), level,
           runs);
    for (int i = 0; i < nf; i++) {
        if (!(data[i] = load(files[i], &size[i]))) {
            fprintf(stderr, "%s: cannot read\n", files[i]);
            return 1;
        }
        ckpz_predict_params pp;
        ckpz_predict_params_init(&pp);
        pp.features_only = 1;
        pp.sample_bytes = 4096;
        pp.sample_budget = 4096;
        ckpz_mem m = {.data = (void *)data[i], .size = size[i]};
        all.file = data[i];
        if (ckpz_predict_file(s.ctx, &pp, ckpz_mem_pread, &m, size[i], collect, &all, NULL) != CKPZ_OK) {
            fprintf(stderr, "%s: %s\n", files[i], ckpz_ctx_message(s.ctx));
            return 1;
        }
    }
    static const size_t parts[] = {64u << 10, 256u << 10, 1u << 20};
    for (int i = 0; i < nf; i++) {
        const char *b = strrchr(files[i], '/') ? strrchr(files[i], '/') + 1 : files[i];
        tlist mine = all; /* this file's tensors */
        mine.n = 0;
        while (mine.t < all.t + all.n && !(mine.t->data >= data[i] && mine.t->data < data[i] + size[i])) mine.t++;
        while (mine.t + mine.n < all.t + all.n && mine.t[mine.n].data >= data[i] &&
               mine.t[mine.n].data < data[i] + size[i])
            mine.n++;
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            char label[96];
            snprintf(label, sizeof label, "%4zu KiB of %.22s", parts[k] >> 10, b);
            uint8_t *f = make_safetensors(&mine, parts[k], 0);
            if (!f) {
                printf("%-38s (the file has too few tensor bytes)\n", label);
                continue;
            }
            failed |= bench_input(&s, label, f, parts[k], runs, have_into) != 0;
            free(f);
        }
        failed |= bench_input(&s, b, data[i], size[i], runs, have_into) != 0;
    }
    if (big) {
        uint8_t *f = make_safetensors(&all, big << 20, 1);
        char label[64];
        snprintf(label, sizeof label, "%zu MiB of copies (safetensors)", big);
        if (f && out_path) {
            FILE *o = fopen(out_path, "wb");
            if (!o || fwrite(f, 1, big << 20, o) != big << 20 || fclose(o) != 0) {
                fprintf(stderr, "%s: cannot write\n", out_path);
                failed = 1;
            }
        }
        if (f) failed |= bench_input(&s, label, f, big << 20, runs, have_into) != 0;
        free(f);
    }
    ckpz_ctx_free(s.ctx);
    return failed;
}
