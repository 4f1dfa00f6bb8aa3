/* test_split.c — one compression split into parts (ckpz_experimental.h "one compression,
 * many processes"), each part coded alone and the file laid out from all parts' records,
 * must give the bytes ckpz_compress_io gives: on the sample safetensors files, a
 * torch.save file and raw bytes, in 1, 2, 3 and 7 parts, lossless, lossy with rules
 * whose bounds depend on whole tensors (rel, pruning), and against a base in which some
 * tensors are unchanged (copy frames that run across parts). The processes libckpz_mpi
 * runs are simulated here: every part plans for itself, as every rank does. The same
 * file laid out a stretch at a time (ckpz_split_lay), as ranks that write while others
 * still code lay it out, with the chunks dealt to the parts in turns and coded into the
 * caller's memory (ckpz_split_code_into); the progress the coder reports, and its
 * refusals. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CKPZ_EXPERIMENTAL
#include "api/split.h"
#include "ckpz.h"
#include "memfile.h"
#include "testutil.h"

static uint8_t *load(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n ? *n : 1);
    if (b && fread(b, 1, *n, f) != *n) free(b), b = NULL;
    fclose(f);
    return b;
}

static void serial(const ckpz_params *p, const uint8_t *in, size_t n, ckpz_mem *out)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_mem m = mem_in(in, n, 0);
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &m);
    *out = (ckpz_mem){.grow = 1};
    ckpz_sink_mem(&k, out);
    ckpz_error e = ckpz_compress_io(ctx, p, &s, &k, NULL);
    CHECKF(e == CKPZ_OK, "serial: %s", ckpz_ctx_message(ctx));
    ckpz_ctx_free(ctx);
}

/* The file as `parts` processes write it: chunks split by input bytes. */
static int split(const ckpz_params *p, const uint8_t *in, size_t n, int parts, uint8_t **file, size_t *size)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_mem m = mem_in(in, n, 0);
    ckpz_source s;
    ckpz_source_mem(&s, &m);
    ckpz_split *pl[8] = {0};
    uint64_t first[9] = {0};
    void *coded[8] = {0};
    size_t coded_len[8] = {0};
    uint8_t *records = NULL;
    int ok = 1;
    for (int r = 0; r < parts && ok; r++) {
        ckpz_error e = ckpz_split_plan(ctx, p, &s, &pl[r]);
        CHECKF(e == CKPZ_OK, "plan: %s", ckpz_ctx_message(ctx));
        ok = e == CKPZ_OK;
    }
    uint64_t nc = ok ? ckpz_split_chunks(pl[0]) : 0;
    for (int r = 1; r < parts && ok; r++) CHECK(ckpz_split_chunks(pl[r]) == nc);
    /* part r takes the chunks that start in its share of the input's bytes */
    for (int r = 0, k = 0; r <= parts; r++) {
        uint64_t lo = (uint64_t)n * r / parts, off, len;
        while (ok && (uint64_t)k < nc && (ckpz_split_chunk(pl[0], k, &off, &len), off < lo)) k++;
        first[r] = r == parts ? nc : (uint64_t)k;
    }
    records = calloc(nc + 1, CKPZ_SPLIT_RECORD_SIZE);
    for (int r = 0; r < parts && ok; r++) {
        ckpz_error e = split_code(ctx, pl[r], first[r], first[r + 1] - first[r],
                                  records + first[r] * CKPZ_SPLIT_RECORD_SIZE, &coded[r], &coded_len[r]);
        CHECKF(e == CKPZ_OK, "code: %s", ckpz_ctx_message(ctx));
        ok = e == CKPZ_OK;
    }
    *file = NULL;
    for (int r = 0; r < parts && ok; r++) {
        ckpz_split_out o = {.struct_size = sizeof o};
        ckpz_error e = split_write(ctx, pl[r], records, first[r], first[r + 1] - first[r], coded[r], coded_len[r], &o);
        CHECKF(e == CKPZ_OK, "write: %s", ckpz_ctx_message(ctx));
        if ((ok = e == CKPZ_OK)) {
            if (!*file) *file = calloc(o.file_size, 1), *size = o.file_size;
            CHECK(o.file_size == *size && o.region_offset + o.region_len <= *size);
            size_t at = 0;
            for (size_t i = 0; i < o.npieces; i++) {
                CHECK(at + o.pieces[i].len <= o.region_len);
                if (at + o.pieces[i].len > o.region_len) break;
                memcpy(*file + o.region_offset + at, o.pieces[i].ptr, o.pieces[i].len);
                at += o.pieces[i].len;
            }
            CHECK(at == o.region_len);
            if (r == parts - 1) { /* the head and tail: any part has them */
                memcpy(*file, o.head, o.head_len);
                memcpy(*file + o.tail_offset, o.tail, o.tail_len);
                CHECK(o.tail_offset + o.tail_len == o.file_size);
            }
        }
        ckpz_split_out_free(&o);
    }
    for (int r = 0; r < parts; r++) ckpz_split_free(pl[r]), free(coded[r]);
    free(records);
    ckpz_ctx_free(ctx);
    return ok;
}

typedef struct counted {
    int calls, abort_at;
    uint64_t last_done, total;
} counted;

static int count_progress(void *opaque, uint64_t done, uint64_t total)
{
    counted *c = opaque;
    CHECK(done > c->last_done || c->calls == 0);
    c->calls++, c->last_done = done, c->total = total;
    return c->abort_at && c->calls == c->abort_at;
}

/* The file as `parts` processes write it a stretch of `step` chunks at a time: stretch
 * i is part (i % parts)'s, coded into memory of ckpz_split_bound's size; every part lays
 * out every stretch in order (its own with their frames, the others' muted). */
static int stretches(const ckpz_params *p, const uint8_t *in, size_t n, int parts, uint64_t step, uint8_t **file,
                     size_t *size)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_mem m = mem_in(in, n, 0);
    ckpz_source s;
    ckpz_source_mem(&s, &m);
    counted prog = {0};
    s.progress = count_progress, s.progress_opaque = &prog;
    ckpz_split *pl[8] = {0};
    int ok = 1;
    for (int r = 0; r < parts && ok; r++) {
        ckpz_error e = ckpz_split_plan(ctx, p, &s, &pl[r]);
        CHECKF(e == CKPZ_OK, "plan: %s", ckpz_ctx_message(ctx));
        ok = e == CKPZ_OK;
    }
    uint64_t nc = ok ? ckpz_split_chunks(pl[0]) : 0, ns = (nc + step - 1) / step;
    uint8_t *records = calloc(nc + 1, CKPZ_SPLIT_RECORD_SIZE);
    void **coded = calloc(ns + 1, sizeof *coded);
    size_t *coded_len = calloc(ns + 1, sizeof *coded_len);
    for (uint64_t i = 0; i < ns && ok; i++) {
        uint64_t k = i * step, c = nc - k < step ? nc - k : step, bound = ckpz_split_bound(pl[i % parts], k, c);
        coded[i] = malloc(bound ? bound : 1);
        prog = (counted){0};
        ckpz_error e = ckpz_split_code_into(ctx, pl[i % parts], k, c, records + k * CKPZ_SPLIT_RECORD_SIZE, coded[i],
                                            bound, &coded_len[i]);
        CHECKF(e == CKPZ_OK, "code: %s", ckpz_ctx_message(ctx));
        uint64_t raw = 0, off, len;
        for (uint64_t j = k; j < k + c; j++) raw += (ckpz_split_chunk(pl[0], j, &off, &len), len);
        CHECKF(prog.calls == (int)c && prog.last_done == raw && prog.total == raw,
               "progress: %d calls for %llu chunks, %llu of %llu bytes", prog.calls, (unsigned long long)c,
               (unsigned long long)prog.last_done, (unsigned long long)raw);
        ok = e == CKPZ_OK;
    }
    *file = NULL;
    for (int r = 0; r < parts && ok; r++) {
        for (uint64_t i = 0; i <= ns && ok; i++) { /* i == ns: nothing more, the tail (again for nc == 0) */
            uint64_t upto = i == ns ? nc : (i + 1) * step < nc ? (i + 1) * step : nc;
            int mine = i < ns && (int)(i % parts) == r;
            if (i == ns && upto == (ns ? nc : 1)) break; /* laid out with the last stretch */
            ckpz_split_out o = {.struct_size = sizeof o};
            ckpz_error e = ckpz_split_lay(ctx, pl[r], records, upto, mine ? i * step : 0, mine ? upto - i * step : 0,
                                          mine ? coded[i] : NULL, mine ? coded_len[i] : 0, &o);
            CHECKF(e == CKPZ_OK, "lay: %s", ckpz_ctx_message(ctx));
            if (!(ok = e == CKPZ_OK)) break;
            if (o.head_len) {
                CHECK(i == 0);
                if (!*file) *file = calloc(n + (64u << 20), 1), *size = 0;
                memcpy(*file, o.head, o.head_len);
            }
            size_t at = 0;
            for (size_t q = 0; q < o.npieces && *file; q++) {
                memcpy(*file + o.region_offset + at, o.pieces[q].ptr, o.pieces[q].len);
                at += o.pieces[q].len;
            }
            CHECK(at == o.region_len && (mine || !at));
            if (o.tail_len) {
                CHECK(upto == nc);
                memcpy(*file + o.tail_offset, o.tail, o.tail_len);
                *size = o.file_size;
            }
            ckpz_split_out_free(&o);
        }
    }
    /* refusals: too little room, a stretch before the one laid out; then a new layout */
    if (ok && nc) {
        size_t got;
        CHECK(ckpz_split_code_into(ctx, pl[0], 0, 1, records, coded[0], ckpz_split_bound(pl[0], 0, 1) - 1, &got) ==
              CKPZ_ERR_PARAM);
        prog = (counted){.abort_at = 1};
        CHECK(ckpz_split_code_into(ctx, pl[0], 0, 1, records, coded[0], ckpz_split_bound(pl[0], 0, 1), &got) ==
              CKPZ_ERR_ABORTED);
        ckpz_split_out o = {.struct_size = sizeof o};
        CHECK(ckpz_split_lay(ctx, pl[0], records, 1, 0, 0, NULL, 0, &o) == CKPZ_OK);
        ckpz_split_out_free(&o);
        CHECK(ckpz_split_lay(ctx, pl[0], records, 0, 0, 0, NULL, 0, &o) == CKPZ_ERR_PARAM);
        CHECK(ckpz_split_lay(ctx, pl[0], records, 1, 0, 0, NULL, 0, &o) == CKPZ_OK && o.head_len);
        ckpz_split_out_free(&o);
    }
    for (int r = 0; r < parts; r++) ckpz_split_free(pl[r]);
    for (uint64_t i = 0; i < ns; i++) free(coded[i]);
    free(coded), free(coded_len), free(records);
    ckpz_ctx_free(ctx);
    return ok && *file;
}

static void same(const char *what, const ckpz_params *p, const uint8_t *in, size_t n)
{
    ckpz_mem ref;
    serial(p, in, n, &ref);
    static const int parts[] = {1, 2, 3, 7};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        uint8_t *f = NULL;
        size_t size = 0;
        if (!split(p, in, n, parts[i], &f, &size)) continue;
        CHECKF(size == ref.size && !memcmp(f, ref.data, size), "%s in %d parts: not the serial file", what, parts[i]);
        free(f);
    }
    static const struct {
        int parts;
        uint64_t step;
    } laid[] = {{1, 1}, {2, 3}, {3, 8}, {7, 2}};
    for (size_t i = 0; i < sizeof laid / sizeof *laid; i++) {
        uint8_t *f = NULL;
        size_t size = 0;
        if (!stretches(p, in, n, laid[i].parts, laid[i].step, &f, &size)) continue;
        CHECKF(size == ref.size && !memcmp(f, ref.data, size),
               "%s laid out in stretches of %llu chunks, %d parts: "
               "not the serial file",
               what, (unsigned long long)laid[i].step, laid[i].parts);
        free(f);
    }
    free(ref.data);
}

int main(void)
{
    size_t nb, nf, nt;
    uint8_t *bf16 = load("samples/gpt-small.bf16.safetensors", &nb);
    uint8_t *f32 = load("samples/gpt-small.f32.safetensors", &nf);
    uint8_t *pt = load("tests/data/torch/adamw.pt", &nt);
    CHECK(bf16 && f32 && pt);
    if (!bf16 || !f32 || !pt) return test_summary("test_split");
    ckpz_params p;
    ckpz_params_init(&p);
    p.chunk_size = 64 << 10; /* many chunks, packed groups among them */
    p.threads = 2;
    same("bf16 safetensors", &p, bf16, nb);
    same("torch.save", &p, pt, nt);
    p.level = 1;
    same("f32 safetensors", &p, f32, nf);
    p.level = 3;
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_F32;
    same("raw f32", &p, f32 + 4096, nf - 4096);
    p.format = CKPZ_INPUT_AUTO;
    p.raw_dtype = CKPZ_DTYPE_NONE;

    p.policy = "*wte* rel 1e-3 prune 0.2\n*attn* abs 1e-4\n* lossless\n";
    same("lossy rules", &p, f32, nf);
    p.policy = NULL;

    /* a base: the same file with some tensors changed; unchanged chunks become copy frames */
    uint8_t *next = malloc(nf);
    memcpy(next, f32, nf);
    for (size_t i = nf / 3; i < nf / 2; i += 97) next[i] ^= 1;
    p.base = f32;
    p.base_size = nf;
    same("against a base", &p, next, nf);
    p.policy = "* change-rel 0.1\n";
    same("lossy against a base", &p, next, nf);
    free(next);
    free(bf16), free(f32), free(pt);
    return test_summary("test_split");
}
