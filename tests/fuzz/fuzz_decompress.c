/* fuzz_decompress.c — libFuzzer harness for every reader of .ckpz input.
 *
 * The input is handed, as a .ckpz file, to:
 *   - ckpz_decompress_stream in test mode (wr = NULL) and with a writer that discards,
 *   - ckpz_archive_open over an in-memory pread, then ckpz_archive_extract of every entry
 *     (and ckpz_archive_find of the first tensor's name),
 *   - ckpz_original_size,
 * all with params.mem_limit = 64 MiB and one thread, and for a file whose header says it
 * has a base, the corpus's base (fuzz_base.h). Nothing may crash, leak, hang or read out
 * of bounds; a failure must leave a message.
 *
 * Random mutations almost never get past the CRC-32C checks, so the same readers run a
 * second time on a "resealed" copy: the harness walks the documented layout
 * (doc/format.md) and recomputes every checksum it can (file header, base frame, entry
 * frames and entry list frames, chunk payloads and frame headers, index, trailer). That lets mutated lengths, counts,
 * transform/plane fields and coded plane data reach the parsers and entropy decoders.
 *
 * Build: see tests/fuzz/README.md. The same file is linked into replay_decompress.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/crc32c.h"
#include "../memfile.h"
#include "fuzz_base.h"

/* A sink that keeps nothing and counts: a memory sink with no room and no limit. */
static ckpz_mem fz_counter(void) { return (ckpz_mem){.limit = SIZE_MAX}; }

static void need_message(ckpz_error e, const ckpz_ctx *ctx, const char *what)
{
    if (e != CKPZ_OK && !ckpz_ctx_message(ctx)[0]) {
        fprintf(stderr, "%s failed with %s but left no message\n", what, ckpz_error_name(e));
        abort();
    }
}

static uint32_t fz_ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static void fz_st32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Recomputes the checksums of b in place, following the layout as far as it parses.
 * Returns 1 if anything changed. */
static int reseal(uint8_t *b, size_t n)
{
    if (n < 32 + 40) return 0;
    uint8_t *orig_trailer_crc = b + n - 4;
    uint32_t before = fz_ld32(orig_trailer_crc);
    int changed = 0;
    uint32_t c = crc32c(0, b, 28);
    if (fz_ld32(b + 28) != c) changed = 1, fz_st32(b + 28, c);
    size_t pos = 32, end = n - 40;
    if (pos + 8 <= end && !memcmp(b + pos, "CKBS", 4)) { /* a delta file's base frame */
        size_t body = fz_ld32(b + pos + 4);
        if (body <= end - pos - 8 && 4 <= end - pos - 8 - body) {
            c = crc32c(0, b + pos, 8 + body);
            if (fz_ld32(b + pos + 8 + body) != c) changed = 1, fz_st32(b + pos + 8 + body, c);
            pos += 12 + body;
        }
    }
    while (pos + 4 <= end) {
        if (!memcmp(b + pos, "CKEN", 4) || !memcmp(b + pos, "CKEL", 4)) { /* entry frame or list */
            if (pos + 8 > end) break;
            size_t body = fz_ld32(b + pos + 4);
            if (body > end - pos - 8 || 4 > end - pos - 8 - body) break;
            c = crc32c(0, b + pos, 8 + body);
            if (fz_ld32(b + pos + 8 + body) != c) changed = 1, fz_st32(b + pos + 8 + body, c);
            pos += 12 + body;
        } else if (!memcmp(b + pos, "CKCH", 4)) {
            if (32 > end - pos) break;
            size_t pl = fz_ld32(b + pos + 12);
            if (pl > end - pos - 32) break;
            c = crc32c(0, b + pos + 32, pl);
            if (fz_ld32(b + pos + 24) != c) changed = 1, fz_st32(b + pos + 24, c);
            c = crc32c(0, b + pos, 28);
            if (fz_ld32(b + pos + 28) != c) changed = 1, fz_st32(b + pos + 28, c);
            pos += 32 + pl;
        } else {
            break;
        }
    }
    uint8_t *t = b + n - 40;
    if (pos + 4 <= end && !memcmp(b + pos, "CKIX", 4)) {
        /* point the trailer at the index that follows the last frame */
        for (int i = 0; i < 8; i++) t[i] = (uint8_t)((uint64_t)pos >> (8 * i));
        for (int i = 0; i < 8; i++) t[8 + i] = (uint8_t)((uint64_t)(end - pos) >> (8 * i));
        fz_st32(t + 28, crc32c(0, b + pos, end - pos));
    }
    memcpy(t + 32, "CKTR", 4);
    fz_st32(t + 36, crc32c(0, t, 36));
    if (fz_ld32(t + 36) != before) changed = 1;
    return changed;
}

static void run_all(const uint8_t *data, size_t size)
{
    static ckpz_ctx *ctx; /* kept between runs, as a caller keeps one (and as fast) */
    if (!ctx && !(ctx = ckpz_ctx_create())) return;
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    p.mem_limit = (size_t)64 << 20;
    if (size >= 12 && (data[10] & 1)) { /* a delta file: the corpus's base (fuzz_base.h) */
        size_t gn;
        const uint8_t *g = fuzz_gbase(&gn);
        int groups = size >= 48 && fz_ld32(data + 40) == gn && fz_ld32(data + 44) == 0; /* its base frame's size */
        p.base = groups ? g : fuzz_base();
        p.base_size = groups ? gn : FUZZ_BASE_BYTES;
    }

    /* streaming, test mode, in odd pieces */
    ckpz_mem r = mem_in(data, size, 1021);
    ckpz_stats st = {.struct_size = sizeof st};
    ckpz_error e = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &r, NULL, NULL, &st);
    need_message(e, ctx, "decompress_stream(wr=NULL)");
    ckpz_error e_test = e;

    /* streaming into a sink, whole reads */
    ckpz_mem sink = fz_counter();
    r = mem_in(data, size, 0);
    e = ckpz_decompress_stream(ctx, &p, ckpz_mem_read, &r, ckpz_mem_write, &sink, &st);
    need_message(e, ctx, "decompress_stream");
    if ((e == CKPZ_OK) != (e_test == CKPZ_OK)) {
        fprintf(stderr, "test mode and decoding disagree: %s vs %s\n", ckpz_error_name(e_test), ckpz_error_name(e));
        abort();
    }
    if (e == CKPZ_OK && sink.size != st.original_bytes) abort();

    /* the size a caller would allocate */
    uint64_t osz = 0;
    ckpz_error e_size = ckpz_original_size(ctx, data, size, &osz);
    need_message(e_size, ctx, "original_size");
    if (e == CKPZ_OK && (e_size != CKPZ_OK || osz != sink.size)) {
        fprintf(stderr, "decoded %llu bytes but ckpz_original_size says %s/%llu\n", (unsigned long long)sink.size,
                ckpz_error_name(e_size), (unsigned long long)osz);
        abort();
    }

    /* random access */
    ckpz_mem f = mem_in(data, size, 0);
    ckpz_archive *a = NULL;
    e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, size, &a);
    need_message(e, ctx, "archive_open");
    if (e == CKPZ_OK) {
        ckpz_archive_info info = {.struct_size = sizeof info};
        ckpz_archive_get_info(a, &info);
        uint64_t total = 0;
        int all_ok = 1;
        for (uint64_t i = 0; i < info.entries; i++) {
            ckpz_entry en = {.struct_size = sizeof en};
            if (ckpz_archive_entry(a, i, &en) != CKPZ_OK) abort();
            if (i == 0 && en.name[0]) {
                uint64_t idx;
                ckpz_archive_find(ctx, a, en.name, &idx);
            }
            ckpz_mem es = fz_counter();
            e = ckpz_archive_extract(ctx, a, i, ckpz_mem_write, &es);
            need_message(e, ctx, "archive_extract");
            if (e == CKPZ_OK && es.size != en.length) {
                fprintf(stderr, "entry %llu: extracted %llu bytes, index says %llu\n", (unsigned long long)i,
                        (unsigned long long)es.size, (unsigned long long)en.length);
                abort();
            }
            all_ok &= e == CKPZ_OK;
            total += es.size;
        }
        if (all_ok && total != info.original_size) abort();
        ckpz_archive_close(a);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run_all(data, size);
    if (size >= 72 && size <= ((size_t)4 << 20)) {
        uint8_t *copy = malloc(size);
        if (!copy) return 0;
        memcpy(copy, data, size);
        if (reseal(copy, size)) run_all(copy, size);
        free(copy);
    }
    return 0;
}
