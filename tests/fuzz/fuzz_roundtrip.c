/* fuzz_roundtrip.c — libFuzzer harness: whatever goes in must come back out.
 *
 * The input is compressed twice and every result is decoded and compared:
 *   1. as is, format auto-detected (safetensors / npy / raw), default level;
 *   2. as a raw dump of the dtype chosen by the first byte (byte % 16), at the level
 *      chosen by the second byte; if the first byte has its top bit set, the rest of
 *      the input is tiled up to ~150 KB so that it spans several 64 KiB chunks.
 * Levels 7-9 search ~60x longer per byte than 1-6 and take the same paths on little
 * input as on much: they get the first 16 KiB only, and tiled inputs levels 1-6, which
 * keeps the harness near 1,000 runs a second without losing a path.
 * Each archive is decoded by ckpz_decompress_buffer (1 and 2 threads) and by
 * ckpz_archive_open + extract of every entry; any error or difference aborts.
 *
 * Build: see tests/fuzz/README.md. The same file is linked into replay_roundtrip.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "../memfile.h"

static void die(const char *what, ckpz_error e, const ckpz_ctx *ctx)
{
    fprintf(stderr, "roundtrip: %s: %s: %s\n", what, ckpz_error_name(e), ckpz_ctx_message(ctx));
    abort();
}

static void roundtrip(const uint8_t *src, size_t n, ckpz_input_format fmt, ckpz_dtype dt, int level)
{
    static ckpz_ctx *ctx; /* kept between runs, as a caller keeps one (and as fast) */
    if (!ctx && !(ctx = ckpz_ctx_create())) return;
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    p.chunk_size = 65536;
    p.level = level;
    p.format = fmt;
    p.raw_dtype = dt;
    void *z = NULL;
    size_t zl = 0;
    ckpz_error e = ckpz_compress_buffer(ctx, &p, src, n, &z, &zl);
    if (e == CKPZ_ERR_NOMEM) goto out;
    if (e) die("compress", e, ctx);

    uint64_t osz = 0;
    if ((e = ckpz_original_size(ctx, z, zl, &osz))) die("original_size", e, ctx);
    if (osz != n) {
        fprintf(stderr, "roundtrip: original_size %llu, input %zu\n", (unsigned long long)osz, n);
        abort();
    }
    uint8_t *dst = malloc(n + 1);
    if (!dst) goto out;
    for (int t = 1; t <= 2; t++) {
        p.threads = t;
        memset(dst, 0xA5, n + 1);
        if ((e = ckpz_decompress_buffer(ctx, &p, z, zl, dst, n))) die("decompress_buffer", e, ctx);
        if (memcmp(dst, src, n)) {
            fprintf(stderr, "roundtrip: decompress_buffer (threads %d) differs (format %d, dtype %d, level %d)\n", t,
                    (int)fmt, (int)dt, level);
            abort();
        }
    }
    p.threads = 1;
    ckpz_mem f = mem_in(z, zl, 0);
    ckpz_archive *a = NULL;
    if ((e = ckpz_archive_open(ctx, &p, ckpz_mem_pread, &f, zl, &a))) die("archive_open", e, ctx);
    ckpz_archive_info info = {.struct_size = sizeof info};
    ckpz_archive_get_info(a, &info);
    if (info.original_size != n || info.compressed_size != zl) abort();
    ckpz_mem o = mem_out(dst, n);
    for (uint64_t i = 0; i < info.entries; i++) {
        ckpz_entry en = {.struct_size = sizeof en};
        if (ckpz_archive_entry(a, i, &en)) abort();
        if (en.offset != o.size) abort(); /* entries tile the original in order */
        if ((e = ckpz_archive_extract(ctx, a, i, ckpz_mem_write, &o))) die("archive_extract", e, ctx);
        if (o.size != en.offset + en.length) abort();
    }
    if (o.size != n || memcmp(dst, src, n)) {
        fprintf(stderr, "roundtrip: extracted entries differ from the input\n");
        abort();
    }
    ckpz_archive_close(a);
    free(dst);
out:
    ckpz_free(z);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > ((size_t)1 << 20)) return 0;
    roundtrip(data, size, CKPZ_INPUT_AUTO, CKPZ_DTYPE_NONE, CKPZ_LEVEL_DEFAULT);
    if (size < 2) return 0;
    ckpz_dtype dt = (ckpz_dtype)(data[0] % CKPZ_DTYPE_COUNT_);
    int level = CKPZ_LEVEL_MIN + data[1] % (CKPZ_LEVEL_MAX - CKPZ_LEVEL_MIN + 1);
    const uint8_t *body = data + 2;
    size_t n = size - 2;
    if ((data[0] & 0x80) && n > 0) {
        level = CKPZ_LEVEL_MIN + data[1] % 6;
        size_t want = 150000 + n % 8; /* several chunks, sometimes a partial element */
        uint8_t *big = malloc(want);
        if (!big) return 0;
        for (size_t k = 0; k < want; k++) big[k] = (uint8_t)(body[k % n] + (uint8_t)(k / n)); /* vary the tiles */
        roundtrip(big, want, CKPZ_INPUT_RAW, dt, level);
        free(big);
    } else {
        if (level >= 7 && n > 16384) n = 16384;
        roundtrip(body, n, CKPZ_INPUT_RAW, dt, level);
    }
    return 0;
}
