/* ops.c — compress, decompress and test (-z, -d, -t): each file through the library's
 * streaming calls, from an input to an output of the file layer (fileio.h), with the
 * base it is coded against (basefile.c) and, with --target-bw, the levels the tuner
 * chose for the link (autotune.c). The rules for names are zstd's: FILE -> FILE.ckpz and
 * back, "-" or no name means a pipe; so are the summaries. --rm deletes the input only
 * after the output and its name are durable. Every function prints its own messages
 * and returns 0, or 1 if any file failed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "autotune.h"
#include "basefile.h"
#include "display.h"
#include "fileio.h"
#include "filelist.h"
#include "ops.h"

typedef enum { OP_COMPRESS, OP_DECOMPRESS, OP_TEST } fio_op;

/* The summaries are zstd's. With -v: a line per file, and a total line for several.
 * At the default level: on a terminal a line per file; when stderr is not a terminal
 * (a log) a line for a single file, one total line for several, and nothing when the
 * output is stdout (zstd lowers its level there: the bytes on stdout are the point) or
 * when --stats reports instead. */
static int per_file_summary(const fio_prefs *p, int nfiles, const char *dst)
{
    if (p->verbosity >= 3) return 1;
    if (p->verbosity < 2) return 0;
    if (isatty(STDERR_FILENO)) return 1;
    return nfiles == 1 && dst && !p->stats; /* --stats=json on stderr stays JSON */
}

static int total_summary(const fio_prefs *p, int nfiles)
{
    if (nfiles < 2 || p->verbosity < 2) return 0;
    return p->verbosity >= 3 || (!isatty(STDERR_FILENO) && !p->to_stdout && !p->stats);
}

static double cpu_seconds(const struct rusage *r)
{
    return (double)r->ru_utime.tv_sec + (double)r->ru_utime.tv_usec / 1e6 + (double)r->ru_stime.tv_sec +
           (double)r->ru_stime.tv_usec / 1e6;
}

/* --stats: what one file's compression or decompression achieved, for monitoring:
 * sizes, ratio, wall time and throughput (MB/s of original bytes), CPU time of the
 * process and the cores it kept busy on average (CPU time / wall time), and with
 * --target-bw the share of the link the output used. */
static void print_stats(const fio_prefs *p, fio_op op, const char *name, const ckpz_stats *st, double wall,
                        const struct rusage *ru0, int threads)
{
    struct rusage ru1;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu = cpu_seconds(&ru1) - cpu_seconds(ru0), w = wall > 1e-9 ? wall : 1e-9;
    double ratio = st->compressed_bytes ? (double)st->original_bytes / (double)st->compressed_bytes : 0;
    const char *what = op == OP_COMPRESS ? "compress" : op == OP_TEST ? "test" : "decompress";
    /* With --target-bw: the share of the link the output used (its bytes over the time
     * the link had); near 1 = the link was the limit, low = compression was; above 1
     * when buffers downstream (a pipe) took the last bytes faster than the link. */
    double link = op == OP_COMPRESS && p->target_bw > 0 ? (double)st->compressed_bytes / w / (p->target_bw * 1e6) : 0;
    if (p->stats == 2) {
        fputs("{\"file\":\"", stderr);
        for (const char *c = name; *c; c++) { /* a JSON string: escape what must be */
            unsigned char u = (unsigned char)*c;
            if (u == '"' || u == '\\') fprintf(stderr, "\\%c", u);
            else if (u < 0x20) fprintf(stderr, "\\u%04x", u);
            else fputc(u, stderr);
        }
        fprintf(stderr,
                "\",\"operation\":\"%s\",\"original_bytes\":%llu,\"compressed_bytes\":%llu,\"ratio\":%.6f,"
                "\"seconds\":%.6f,\"mb_per_s\":%.3f,\"cpu_seconds\":%.6f,\"cpu_use\":%.3f,\"threads\":%d",
                what, (unsigned long long)st->original_bytes, (unsigned long long)st->compressed_bytes, ratio, wall,
                (double)st->original_bytes / 1e6 / w, cpu, cpu / w,
                threads ? threads : (int)sysconf(_SC_NPROCESSORS_ONLN));
        if (link > 0) fprintf(stderr, ",\"target_bw_mb_per_s\":%.3f,\"link_use\":%.3f", p->target_bw, link);
        fputs("}\n", stderr);
    } else {
        fprintf(stderr, "%s: %s: ratio %.3fx (%llu -> %llu bytes), %.3f s, %.1f MB/s, CPU %.3f s (%.2f cores)", name,
                what, ratio, (unsigned long long)st->original_bytes, (unsigned long long)st->compressed_bytes, wall,
                (double)st->original_bytes / 1e6 / w, cpu, cpu / w);
        if (link > 0) fprintf(stderr, ", link %.0f%% of %.0f MB/s", 100 * link, p->target_bw);
        fputc('\n', stderr);
    }
}

/* What the files of one run added up to, for the total line of several files. */
typedef struct fio_totals {
    int files;
    uint64_t original, compressed;
} fio_totals;

static void add_stats(ckpz_stats *sum, const ckpz_stats *one)
{
    sum->original_bytes += one->original_bytes;
    sum->compressed_bytes += one->compressed_bytes;
    sum->tensor_bytes += one->tensor_bytes;
    sum->tensors += one->tensors;
    sum->chunks += one->chunks;
    sum->format = one->format;
}

/* The base the .ckpz input in needs (-d, -t), into *cache: found from its head, peeked
 * at in the input's own buffer, so that a pipe or FIFO, which cannot be opened and read
 * again, keeps every byte for the decoder. stdin has no name to find a base beside:
 * --base or nothing. 0, or 1 after printing why. */
static int base_of_input(const fio_prefs *p, fio_in *in, const char *src, fio_base *cache, const fio_base **base)
{
    const unsigned char *head = NULL;
    size_t hlen = 0;
    if (!in->is_stdin && fio_in_peek(in, &head, &hlen) != 0) {
        fio_error("%s: read error: %s", in->name, strerror(in->err));
        return 1;
    }
    return fio_base_for_head(p, src, head, hlen, cache, base);
}

/* One file: src to dst (NULL = stdout; ignored by OP_TEST), coded against base (NULL:
 * none; -d and -t find it themselves, into cache), at the levels and threads tune chose
 * (NULL: the preferences'); summary: print this file's summary line. */
static int run_one(ckpz_ctx *ctx, const fio_prefs *p, const autotune_choice *tune, fio_op op, const char *src,
                   const char *dst, const fio_base *base, fio_base *cache, int summary, fio_totals *tot)
{
    fio_in in;
    fio_out out;
    ckpz_source from;
    ckpz_sink to;
    ckpz_params params;
    ckpz_stats stats = {.struct_size = sizeof stats};
    fio_progress pg;
    ckpz_error e;
    double t0, dt;
    int has_out = op != OP_TEST, streams = 0;

    memset(&out, 0, sizeof(out));
    if (fio_in_open(&in, src, p, 0) != 0) return 1;
    if (op != OP_COMPRESS && base_of_input(p, &in, src, cache, &base) != 0) {
        fio_in_close(&in);
        return 1;
    }
    if (has_out && fio_out_open(&out, dst, in.regular && !in.is_stdin ? &in.st : NULL, p, op == OP_COMPRESS) != 0) {
        fio_out_abort(&out);
        fio_in_close(&in);
        return 1;
    }
    fio_params(p, &params);
    if (tune) {
        params.level = tune->level;
        params.threads = tune->threads;
        if (!params.policy) params.policy = tune->policy;
    }
    if (base && base->path) {
        params.base = base->data;
        params.base_size = base->size;
        params.base_name = fio_base_record_name(base);
        params.base_depth = base->depth;
    }
    if (op == OP_COMPRESS) fio_in_map(&in);
    fio_in_source(&in, &from);
    fio_out_sink(&out, &to); /* a file can be patched: the base's CRC needs no pass of its own */
    stats = (ckpz_stats){.struct_size = sizeof stats};
    fio_progress_start(&pg, in.name, p, &from);
    struct rusage ru0;
    getrusage(RUSAGE_SELF, &ru0);
    t0 = fio_now();
    if (op == OP_COMPRESS) {
        e = ckpz_compress_io(ctx, &params, &from, &to, &stats);
    } else {
        /* streams back to back (cat a.ckpz b.ckpz, ckpz -c a b) restore to their originals
         * back to back, as zstd does with frames */
        in.split = 1;
        for (;;) {
            ckpz_stats one = {.struct_size = sizeof one};
            e = ckpz_decompress_io(ctx, &params, &from, has_out ? &to : NULL, &one);
            if (e != CKPZ_OK) break;
            add_stats(&stats, &one);
            streams++;
            int more = fio_in_next_stream(&in);
            if (more < 0) e = CKPZ_ERR_READ;
            if (more <= 0) break;
        }
    }
    dt = fio_now() - t0;
    fio_progress_end(&pg);
    if (e == CKPZ_OK && p->stats) print_stats(p, op, in.name, &stats, dt, &ru0, params.threads);
    if (e != CKPZ_OK) {
        const char *msg = ckpz_ctx_message(ctx);
        if (streams > 0 && !in.err && !(has_out && out.err))
            fio_error("%s: at byte %llu, after %d complete stream%s: %s", in.name,
                      (unsigned long long)stats.compressed_bytes, streams, streams == 1 ? "" : "s",
                      msg && *msg ? msg : ckpz_error_name(e));
        else fio_report(ctx, e, &in, has_out ? &out : NULL);
        const char *doing = op == OP_COMPRESS ? "it was compressed"
                            : op == OP_TEST   ? "it was tested"
                                              : "it was decompressed";
        fio_in_changed(&in, doing, 0); /* the likely cause, when it did */
        if (has_out) fio_out_abort(&out);
        fio_in_close(&in);
        return 1;
    }
    if (has_out) {
        int remove_src = p->remove_src && !in.is_stdin && !out.is_stdout && !out.direct;
        const struct stat *keep = in.regular && !in.is_stdin ? &in.st : NULL;
        if (fio_in_changed(&in, op == OP_COMPRESS ? "it was compressed" : "it was decompressed", 1)) {
            fio_out_abort(&out);
            fio_in_close(&in);
            return 1;
        }
        if (fio_out_commit(&out, keep, p, remove_src) != 0) {
            fio_in_close(&in);
            return 1;
        }
        if (remove_src && unlink(src) != 0) {
            fio_error("%s: cannot remove: %s", src, strerror(errno));
            fio_in_close(&in);
            return 1;
        }
    }
    /* Lossy modes code tensors of two or more dimensions: a raw dump without a shape
     * has none, which the file would not show (it is simply lossless). */
    if (op == OP_COMPRESS && p->policy && stats.format == CKPZ_INPUT_RAW && !p->raw_ndim)
        fio_warn("%s: nothing was coded lossy: raw input %s (lossy modes code tensors of two or more "
                 "dimensions: give its shape, e.g. --dtype f32 --shape 2000x2000)",
                 in.name, p->raw_dtype == CKPZ_DTYPE_NONE ? "without --dtype is opaque bytes" : "is one dimension");
    fio_in_close(&in);
    if (op == OP_COMPRESS && p->policy && dst) fio_lossy_report(ctx, p, dst);
    tot->files++;
    tot->original += stats.original_bytes;
    tot->compressed += stats.compressed_bytes;

    if (op == OP_TEST) {
        if (p->verbosity >= 3) {
            char a[32], b[32];
            fprintf(stderr, "%s : OK (%s => %s, %.1f MB/s)\n", in.name, fio_human(a, sizeof(a), stats.compressed_bytes),
                    fio_human(b, sizeof(b), stats.original_bytes),
                    (double)stats.original_bytes / 1e6 / (dt > 1e-9 ? dt : 1e-9));
        } else if (p->verbosity >= 2) {
            fprintf(stderr, "%s : OK\n", in.name);
        }
    } else if (summary) {
        char a[32], b[32];
        double ratio = stats.compressed_bytes ? (double)stats.original_bytes / (double)stats.compressed_bytes : 0.0;
        double mbs = (double)stats.original_bytes / 1e6 / (dt > 1e-9 ? dt : 1e-9);
        if (op == OP_COMPRESS)
            fprintf(stderr, "%s : %.1f%% (%s => %s, %s) %.3fx, %.1f MB/s\n", in.name,
                    stats.original_bytes ? 100.0 * (double)stats.compressed_bytes / (double)stats.original_bytes : 0.0,
                    fio_human(a, sizeof(a), stats.original_bytes), fio_human(b, sizeof(b), stats.compressed_bytes),
                    out.name, ratio, mbs);
        else
            fprintf(stderr, "%s : %s => %s, %s (%.3fx, %.1f MB/s)\n", in.name,
                    fio_human(a, sizeof(a), stats.compressed_bytes), fio_human(b, sizeof(b), stats.original_bytes),
                    out.name, ratio, mbs);
    }
    return 0;
}

/* With --target-bw, the levels and threads ckpz_tune measures best for the link, into
 * *t (its policy for the caller to free); NULL when the preferences stand (no
 * --target-bw; stdin, which cannot be sampled ahead; a file that cannot be measured,
 * which the compression will report). */
static const autotune_choice *tuned(const fio_prefs *p, fio_op op, const char *src, const fio_base *base,
                                    autotune_choice *t)
{
    t->policy = NULL;
    if (op != OP_COMPRESS || !(p->target_bw > 0)) return NULL;
    if (!strcmp(src, "-")) {
        fio_warn("--target-bw: standard input cannot be sampled ahead; using -%d", p->level);
        return NULL;
    }
    return autotune_choose(p, src, base ? base->data : NULL, base ? base->size : 0, t) == 0 ? t : NULL;
}

static int run_files(const fio_prefs *p, fio_op op, const char *const *files, int n)
{
    fio_totals tot = {0, 0, 0};
    ckpz_ctx *ctx = ckpz_ctx_create();
    fio_base cache;
    const fio_base *base = NULL;
    int i, failed = 0;
    fio_set_verbosity(p->verbosity);
    memset(&cache, 0, sizeof(cache));
    if (!ctx) {
        fio_error("out of memory");
        return 1;
    }
    if (op == OP_COMPRESS && p->base_path) {
        if (fio_base_load(p, p->base_path, &cache) != 0) {
            ckpz_ctx_free(ctx);
            return 1;
        }
        base = &cache;
        if (p->keyframe_every && cache.depth + 1 >= p->keyframe_every) {
            if (p->verbosity >= 3)
                fprintf(stderr,
                        "ckpz: keyframe: %s is %u delta file%s deep, --keyframe-every %u: "
                        "writing stand-alone files\n",
                        p->base_path, (unsigned)cache.depth, cache.depth == 1 ? "" : "s", p->keyframe_every);
            base = NULL;
        }
    }
    if (p->remove_src && (p->to_stdout || (p->out_name && !strcmp(p->out_name, "-"))))
        fio_warn("--rm is ignored when writing to stdout");
    for (i = 0; i < n; i++) {
        char *dst = NULL;
        if (op != OP_TEST && fio_output_name(p, op == OP_DECOMPRESS, 1, files[i], &dst) != 0) {
            failed = 1;
            continue;
        }
        if (op == OP_COMPRESS && base && dst && ckpz_same_file(dst, base->path)) {
            fio_error("%s: the output %s is the base it is coded against, aborting", files[i], dst);
            failed = 1;
        } else {
            autotune_choice t;
            if (run_one(ctx, p, tuned(p, op, files[i], base, &t), op, files[i], dst, base, &cache,
                        per_file_summary(p, n, dst), &tot) != 0)
                failed = 1;
            free(t.policy);
        }
        free(dst);
    }
    if (op != OP_TEST && total_summary(p, n)) {
        char a[32], b[32];
        double ratio = tot.compressed ? (double)tot.original / (double)tot.compressed : 0.0;
        fio_human(a, sizeof(a), op == OP_COMPRESS ? tot.original : tot.compressed);
        fio_human(b, sizeof(b), op == OP_COMPRESS ? tot.compressed : tot.original);
        if (op == OP_COMPRESS)
            fprintf(stderr, "%d files compressed : %.1f%% (%s => %s) %.3fx\n", tot.files,
                    tot.original ? 100.0 * (double)tot.compressed / (double)tot.original : 0.0, a, b, ratio);
        else fprintf(stderr, "%d files decompressed : %s => %s (%.3fx)\n", tot.files, a, b, ratio);
    }
    fio_base_free(&cache);
    ckpz_ctx_free(ctx);
    return failed;
}

int fio_compress_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_COMPRESS, files, n);
}

int fio_decompress_files(const fio_prefs *p, const char *const *files, int n)
{
    return run_files(p, OP_DECOMPRESS, files, n);
}

int fio_test_files(const fio_prefs *p, const char *const *files, int n) { return run_files(p, OP_TEST, files, n); }
