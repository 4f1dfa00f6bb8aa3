/* cli.c — the ckpz command line (cli.h): arguments in, one operation out.
 *
 * The flags are the ones zstd, xz and gzip users already type (-d -c -k --rm -f -o -r
 * -T# -1..-9 -v -q -l -t --), parsed by hand so that short flags combine the way they do
 * there (-dkf, -T4, -c3) and options may follow file names. Parsing only fills a
 * fio_prefs (prefs.h) and picks an operation, which runs through the front end's table
 * (cli_ops: ckpz's in main.c, over ops.c, list.c, rebase.c, bench.c and predict_cli.c;
 * ckpz-mpi's in mpi/cli.c). Parsing (long_option, short_options, parse_args) and running
 * (dispatch) are apart. A usage error exits with 2 before any file is touched; a failure
 * on a file exits with 1 after the remaining files were processed.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ckpz.h"
#include "cli.h"
#include "fileio.h"
#include "filelist.h"
#include "lossyopt.h"
#include "predict_cli.h"
#include "prefs.h"

typedef enum {
    MODE_COMPRESS,
    MODE_DECOMPRESS,
    MODE_TEST,
    MODE_LIST,
    MODE_EXTRACT,
    MODE_BENCH,
    MODE_REBASE,
    MODE_PREDICT
} cli_mode;

static void usage(FILE *f)
{
    /* clang-format off */
    fprintf(f,
        "Usage: ckpz [OPTIONS] [FILE...]\n"
        "Compress deep-learning checkpoints losslessly: FILE -> FILE.ckpz, and back with -d.\n"
        "With no FILE, or when FILE is -, read standard input and write standard output.\n"
        "\n"
        "Operations:\n"
        "  -z, --compress        compress (default)\n"
        "  -d, --decompress      restore FILE.ckpz -> FILE, byte for byte\n"
        "  -t, --test            verify FILE.ckpz (every checksum), write nothing\n"
        "  -l, --list            list the tensors stored in FILE.ckpz\n"
        "      --extract NAME    write the original bytes of tensor NAME of one FILE.ckpz\n"
        "                        (to -o OUT, or to standard output)\n"
        "  -b                    benchmark in memory: ckpz vs zstd -1 and -3 on each FILE\n"
        "                        (one thread unless -T is given)\n"
        "  -i#                   seconds per benchmark measurement (default 1; 0 = 3 runs)\n"
        "      --predict[=features]  predict each tensor's ratio and the file's from samples,\n"
        "                        without compressing, for the level and lossy options given\n"
        "                        (=features: the model's inputs, TSV)\n"
        "      --model FILE      --predict: model weights (default: built in)\n"
        "      --rebase          turn each delta FILE.ckpz into a stand-alone file (in its\n"
        "                        place once complete, or to -o OUT)\n"
        "\n"
        "Delta checkpoints:\n"
        "      --base PREV       code FILE against the previous checkpoint PREV (original\n"
        "                        or .ckpz): unchanged tensors cost a reference, changed\n"
        "                        ones the cheapest of XOR, difference or stand-alone coding.\n"
        "                        Restoring needs the same base: -d/-t/--extract/--rebase\n"
        "                        take --base PREV, or find the base by its recorded name\n"
        "                        beside the file; the base is checked by its checksum\n"
        "      --keyframe-every N  write a stand-alone file instead once the chain behind\n"
        "                        it would reach N files (bounds restore cost)\n"
        "\n"
        "Lossy coding (float tensors of 2+ dimensions; never norms, biases, integers):\n"
        "      --lossy=auto[:K]  bounds per tensor from its role (weight, Adam exp_avg,\n"
        "                        exp_avg_sq, else exact); K = tight, default, aggressive\n"
        "                        or a number (1 = default) moves them together\n"
        "      --abs E           every value within E of the original\n"
        "      --rel R           within R x (max - min) of its tensor\n"
        "      --change-rel R    with --base: within R x the RMS of the tensor's change\n"
        "                        since the base (error scales with the update)\n"
        "      --pointwise-rel R within R x |value|; sign kept, never zero (Adam's v)\n"
        "      --int8[=sym|asym] 8-bit codes, one scale per row (per channel)\n"
        "      --bits 8|16       8/16-bit codes, offset and scale per block of --block N\n"
        "                        elements (default 64)\n"
        "      --percentile P    calibrate --int8/--bits to the P-th percentile, not min-max\n"
        "      --col-delta       --int8/--bits: code each value's difference from the\n"
        "                        restored value a row up (column-wise delta)\n"
        "      --prune RATE      set the RATE smallest values (with --base: changes) to zero\n"
        "      --stochastic      --abs/--rel/--pointwise-rel: unbiased rounding on a grid\n"
        "                        of step E (log grid: ratio 1 + R): each value kept on\n"
        "                        average, so changes smaller than a step survive (chains)\n"
        "      --stochastic-log  --pointwise-rel: as --stochastic, log2 |value| kept on\n"
        "                        average instead (what divides or scales: Adam's v)\n"
        "      --max-mae X       code a chunk losslessly where its mean error would pass X\n"
        "      --policy FILE     per-tensor rules: 'PATTERN MODE [OPTIONS]' per line, first\n"
        "                        match wins (doc/lossy.md); the flags above add '* MODE'\n"
        "                        With --base PREV.ckpz, values are coded around PREV's\n"
        "                        restored values (errors do not add up along a chain).\n"
        "                        -l and -v show each tensor's MAE, max error and PSNR\n"
        "\n"
        "Output:\n"
        "  -o FILE               write to FILE (one input only)\n"
        "  -c, --stdout          write to standard output (several files: one after the\n"
        "                        other, and -d restores them one after the other);\n"
        "                        of -c and -o the later one counts, as in zstd\n"
        "  -r, --recursive       operate on the files under directories (not following\n"
        "                        links; compression skips .ckpz files, -d/-t/-l take only\n"
        "                        those)\n"
        "  -k, --keep            keep the input file (default)\n"
        "      --rm              remove the input once the output is complete and synced\n"
        "  -f, --force           overwrite an existing output, write to a terminal,\n"
        "                        compress a file that already ends in .ckpz\n"
        "\n"
        "Compression:\n"
        "  -1 .. -9              level (default %d; -1 the fast level: no context coders;\n"
        "                        -9 runs at a few MB/s per core);\n"
        "                        -0 stores the chunks as they are (for links faster than coding)\n"
        "  -T#, --threads=#      threads in all, 0 = all cores (default 0)\n"
        "      --target-bw RATE  MB/s of the disk or link the output goes to: measure the\n"
        "                        levels (storing, -0, included) on samples of each role of\n"
        "                        tensor (exp_avg_sq, exp_avg, gradients, the rest; with\n"
        "                        --base, as deltas) and take the levels and threads that\n"
        "                        deliver the file fastest end to end (-v prints the cost\n"
        "                        model); stores unless a level at twice the link's speed\n"
        "                        on half the threads saves 5%% of the time; not measured where\n"
        "                        measuring cannot pay for itself\n"
        "      --cpu-budget N    most threads --target-bw may use (default: -T, all cores)\n"
        "      --chunk-size=SIZE 64K .. 16M (suffixes K, KiB, M, MiB; default 1M)\n"
        "      --codec=NAME      coder of the byte planes: auto (default: per plane the\n"
        "                        smallest of rANS and zstd), rans, or one back end for every\n"
        "                        plane that is not random or constant: zstd, lz4, snappy,\n"
        "                        deflate (lz4 and snappy decode fastest)\n"
        "      --format=FMT      auto, safetensors, torch, npy, npz, gguf, raw (default auto)\n"
        "      --dtype=TYPE      element type of raw input (implies --format=raw):",
        CKPZ_LEVEL_DEFAULT);
    /* clang-format on */
    /* the library's names, so that a new dtype needs no edit here */
    int col = 80;
    for (int t = 1; t < CKPZ_DTYPE_COUNT_; t++) {
        const char *name = ckpz_dtype_name((ckpz_dtype)t);
        if (col + 1 + (int)strlen(name) > 80) col = fprintf(f, "\n%23s", "") - 1;
        col += fprintf(f, " %s", name);
    }
    /* clang-format off */
    fprintf(f, "\n"
        "      --shape=DIMS      shape of raw input, e.g. 2000x2000 (with --dtype; the file\n"
        "                        must hold exactly that many elements): lossy options\n"
        "                        code only tensors of 2+ dimensions, and raw input\n"
        "                        without a shape is one dimension\n"
        "      --memory=SIZE     largest allocation a file may ask for, and the most its\n"
        "                        tensor tables may take together (default 1G)\n"
        "\n"
        "Messages:\n"
        "  -v, --verbose         more messages (per-file summary even when not a terminal)\n"
        "  -q, --quiet           errors only\n"
        "      --[no-]progress   progress line on stderr (default: if stderr is a terminal)\n"
        "      --stats[=json]    per file on stderr: ratio, time, MB/s, CPU time and cores used\n"
        "  -h, --help            this help\n"
        "  -V, --version         version\n"
        "  --                    end of options: every later argument is a file name\n"
        "\n"
        "Exit status: 0 success, 1 a file failed, 2 usage error.\n");
    /* clang-format on */
}

/* Prints "ckpz: <message>" and a pointer to -h; returns the usage exit status, 2. */
static int bad_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_usage(const char *fmt, ...)
{
    va_list ap;
    fputs("ckpz: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'ckpz -h' for help.\n", stderr);
    return 2;
}

/* Whole string as a non-negative decimal number. */
static int parse_uint(const char *s, unsigned long *out)
{
    char *end;
    unsigned long v;
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end) return -1;
    *out = v;
    return 0;
}

/* "1M", "256K", "64KiB", "1048576": bytes, or -1. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, mul = 1;
    if (!s || *s < '0' || *s > '9') return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno) return -1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30;
    if (mul > 1) {
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B") || !strcmp(end, "ib")) end += strlen(end);
    } else if (!strcmp(end, "B")) {
        end++;
    }
    if (*end || v > (unsigned long long)SIZE_MAX / mul) return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static int set_level(fio_prefs *p, unsigned long v)
{
    if ((v < CKPZ_LEVEL_MIN && v != CKPZ_LEVEL_STORE) || v > CKPZ_LEVEL_MAX) {
        return bad_usage("level must be %d..%d (or %d: store)", CKPZ_LEVEL_MIN, CKPZ_LEVEL_MAX, CKPZ_LEVEL_STORE);
    }
    p->level = (int)v;
    return 0;
}

static int set_threads(fio_prefs *p, const char *s)
{
    unsigned long v;
    if (parse_uint(s, &v) != 0 || v > 4096) return bad_usage("invalid thread count '%s' (0 = all cores)", s ? s : "");
    p->threads = (int)v;
    p->threads_set = 1;
    return 0;
}

static int set_chunk(fio_prefs *p, const char *s)
{
    size_t v;
    if (parse_size(s, &v) != 0) return bad_usage("invalid chunk size '%s'", s ? s : "");
    if (v < CKPZ_CHUNK_MIN || v > CKPZ_CHUNK_MAX) return bad_usage("chunk size must be 64 KiB..16 MiB, not '%s'", s);
    p->chunk_size = v;
    return 0;
}

static int set_format(fio_prefs *p, const char *s, int *format_set)
{
    char known[128] = "";
    size_t used = 0;
    for (int f = 0; f < CKPZ_INPUT_COUNT_; f++) { /* the library's names */
        const char *name = ckpz_input_format_name((ckpz_input_format)f);
        if (!strcmp(s, name)) {
            p->format = (ckpz_input_format)f;
            *format_set = 1;
            return 0;
        }
        int k = snprintf(known + used, sizeof known - used, "%s%s", f ? ", " : "", name);
        if (k > 0 && (size_t)k < sizeof known - used) used += (size_t)k;
    }
    return bad_usage("unknown format '%s' (%s)", s, known);
}

/* --shape 2000x2000 (or 2000,2000): outermost dimension first, each >= 1. */
static int set_shape(fio_prefs *p, const char *s)
{
    const char *c = s;
    p->raw_ndim = 0;
    for (;;) {
        char *end;
        if (*c < '0' || *c > '9') break;
        errno = 0;
        unsigned long long v = strtoull(c, &end, 10);
        if (errno || v == 0 || p->raw_ndim == FIO_MAX_NDIM) break;
        p->raw_shape[p->raw_ndim++] = v;
        c = end;
        if (*c == '\0') return 0;
        if (*c != 'x' && *c != 'X' && *c != ',') break;
        c++;
    }
    return bad_usage("invalid shape '%s' (dimensions >= 1 joined by 'x', at most %d: e.g. 2000x2000)", s, FIO_MAX_NDIM);
}

static int set_codec(fio_prefs *p, const char *s)
{
    ckpz_codec c = ckpz_codec_from_name(s);
    if (c == CKPZ_CODEC_COUNT_) {
        char names[96] = "";
        for (int k = 0; k < CKPZ_CODEC_COUNT_; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "",
                     ckpz_codec_name((ckpz_codec)k));
        return bad_usage("unknown codec '%s' (%s)", s, names);
    }
    p->codec = c;
    return 0;
}

static int set_dtype(fio_prefs *p, const char *s, int *dtype_set)
{
    ckpz_dtype t = ckpz_dtype_from_name(s);
    /* NONE is a valid answer only for the names of opaque bytes */
    if (t == CKPZ_DTYPE_NONE && strcmp(s, "bytes") && strcmp(s, "none")) return bad_usage("unknown dtype '%s'", s);
    p->raw_dtype = t;
    *dtype_set = 1;
    return 0;
}

/* One run of the command: what the arguments asked for. */
typedef struct cli_run {
    fio_prefs p;
    lossy_flags lf;
    cli_mode mode;
    const char *extract_name;
    predict_opts po;
    const char **files; /* the file names, then -r's expansion of them */
    int nfiles, opts_done, format_set, dtype_set, recursive;
    char out_last;      /* 'c' or 'o': the later of -c and -o, which counts */
    char *policy;       /* malloc'd (build_policy) */
    char **expanded;    /* -r's file list (fio_expand_dirs) */
    int nexpanded;
} cli_run;

#define CLI_GO (-1) /* an option was taken: parse on (else: the exit status) */

static int version(void)
{
    printf("ckpz %s (libckpz %s, zstd %s)\n", CKPZ_VERSION_STRING, ckpz_version_string(), bench_zstd_version());
    return 0;
}

/* The long option argv[*i] ("--name", "--name=V", or "--name V", which moves *i on). */
static int long_option(cli_run *r, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *name = a + 2, *eq = strchr(name, '=');
    const char *val = eq ? eq + 1 : NULL;
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    int rcopt = 0, kind;
/* clang-format off */
#define IS(s) (len == strlen(s) && !strncmp(name, s, len))
/* options with a value take "--opt=V" or "--opt V" */
#define NEED_VAL()                                                                      \
    do {                                                                                \
        if (!val) {                                                                     \
            if (*i + 1 >= argc) return bad_usage("option '%s' needs a value", a);      \
            val = argv[++*i];                                                           \
        }                                                                               \
    } while (0)
#define NO_VAL()                                                                        \
    do {                                                                                \
        if (val) return bad_usage("option '%s' takes no value", a);                     \
    } while (0)
    if (len == 0) {
        r->opts_done = 1;
        return CLI_GO;
    } else if (IS("compress")) { NO_VAL(); r->mode = MODE_COMPRESS; }
    else if (IS("decompress") || IS("uncompress")) { NO_VAL(); r->mode = MODE_DECOMPRESS; }
    else if (IS("test")) { NO_VAL(); r->mode = MODE_TEST; }
    else if (IS("list")) { NO_VAL(); r->mode = MODE_LIST; }
    else if (IS("bench")) { NO_VAL(); r->mode = MODE_BENCH; }
    else if (IS("extract")) { NEED_VAL(); r->mode = MODE_EXTRACT; r->extract_name = val; }
    else if (IS("rebase")) { NO_VAL(); r->mode = MODE_REBASE; }
    else if (IS("predict")) {
        if (val && strcmp(val, "features")) return bad_usage("--predict takes no value or =features");
        r->mode = MODE_PREDICT;
        r->po.features = val != NULL;
    }
    else if (IS("model")) { NEED_VAL(); r->po.model_path = val; }
    else if (IS("base")) { NEED_VAL(); r->p.base_path = val; }
    else if (IS("keyframe-every")) {
        unsigned long v;
        NEED_VAL();
        if (parse_uint(val, &v) != 0 || v < 1 || v > 1000000)
            return bad_usage("--keyframe-every needs a number of files, 1..1000000");
        r->p.keyframe_every = (unsigned)v;
    }
    else if ((kind = lossy_takes(name, len)) != LOSSY_NOT_MINE) {
        char why[160];
        if (kind == LOSSY_NEEDS_VAL) NEED_VAL();
        else if (kind == LOSSY_NO_VAL) NO_VAL();
        if (lossy_option(&r->lf, name, len, val, why, sizeof why)) return bad_usage("%s", why);
    }
    else if (IS("max-mae")) {
        char why[160];
        NEED_VAL();
        if (lossy_fraction("max-mae", val, 0, 1e30, &r->p.max_mae, why, sizeof why)) return bad_usage("%s", why);
    }
    else if (IS("target-bw")) {
        char *end;
        NEED_VAL();
        r->p.target_bw = strtod(val, &end);
        if (*end || !(r->p.target_bw > 0) || r->p.target_bw > 1e7)
            return bad_usage("--target-bw needs the output's speed in MB/s, not '%s'", val);
    }
    else if (IS("cpu-budget")) {
        unsigned long v;
        NEED_VAL();
        if (parse_uint(val, &v) != 0 || v < 1 || v > 4096) return bad_usage("--cpu-budget needs a thread count >= 1");
        r->p.cpu_budget = (int)v;
    }
    else if (IS("stats")) {
        if (val && strcmp(val, "json")) return bad_usage("--stats takes no value or =json");
        r->p.stats = val ? 2 : 1;
    }
    else if (IS("stdout")) { NO_VAL(); r->p.to_stdout = 1; r->out_last = 'c'; }
    else if (IS("output")) { NEED_VAL(); r->p.out_name = val; r->out_last = 'o'; }
    else if (IS("recursive")) { NO_VAL(); r->recursive = 1; }
    else if (IS("keep")) { NO_VAL(); r->p.remove_src = 0; }
    else if (IS("rm")) { NO_VAL(); r->p.remove_src = 1; }
    else if (IS("force")) { NO_VAL(); r->p.force = 1; }
    else if (IS("verbose")) { NO_VAL(); r->p.verbosity++; }
    else if (IS("quiet")) { NO_VAL(); if (r->p.verbosity > 0) r->p.verbosity--; }
    else if (IS("progress")) { NO_VAL(); r->p.progress = 1; }
    else if (IS("no-progress")) { NO_VAL(); r->p.progress = 0; }
    else if (IS("threads")) { NEED_VAL(); rcopt = set_threads(&r->p, val); }
    else if (IS("chunk-size")) { NEED_VAL(); rcopt = set_chunk(&r->p, val); }
    else if (IS("format")) { NEED_VAL(); rcopt = set_format(&r->p, val, &r->format_set); }
    else if (IS("dtype")) { NEED_VAL(); rcopt = set_dtype(&r->p, val, &r->dtype_set); }
    else if (IS("shape")) { NEED_VAL(); rcopt = set_shape(&r->p, val); }
    else if (IS("codec")) { NEED_VAL(); rcopt = set_codec(&r->p, val); }
    else if (IS("memory")) {
        NEED_VAL();
        if (parse_size(val, &r->p.mem_limit) != 0 || r->p.mem_limit == 0)
            return bad_usage("invalid memory limit '%s'", val);
    }
    else if (IS("help")) { usage(stdout); return 0; }
    else if (IS("version")) {
        NO_VAL();
        return version();
    } else return bad_usage("unknown option '%s'", a);
#undef IS
#undef NEED_VAL
#undef NO_VAL
/* clang-format on */
    return rcopt ? rcopt : CLI_GO;
}

/* The cluster of short options argv[*i]: -dkf, -T4, -3, -o FILE (which moves *i on). */
static int short_options(cli_run *r, int argc, char **argv, int *i)
{
    const char *s = argv[*i] + 1;
    int rc;
    while (*s) {
        char c = *s;
        char opt[3] = {'-', c, '\0'};
        if (c >= '0' && c <= '9') {
            unsigned long v = 0;
            while (*s >= '0' && *s <= '9') {
                if (v < 1000) v = v * 10 + (unsigned long)(*s - '0');
                s++;
            }
            if ((rc = set_level(&r->p, v)) != 0) return rc;
            continue;
        }
        s++;
        switch (c) {
        case 'z': r->mode = MODE_COMPRESS; break;
        case 'd': r->mode = MODE_DECOMPRESS; break;
        case 't': r->mode = MODE_TEST; break;
        case 'l': r->mode = MODE_LIST; break;
        case 'b': r->mode = MODE_BENCH; break;
        case 'c':
            r->p.to_stdout = 1;
            r->out_last = 'c';
            break;
        case 'r': r->recursive = 1; break;
        case 'k': r->p.remove_src = 0; break;
        case 'f': r->p.force = 1; break;
        case 'v': r->p.verbosity++; break;
        case 'q':
            if (r->p.verbosity > 0) r->p.verbosity--;
            break;
        case 'h': usage(stdout); return 0;
        case 'V': return version();
        case 'T':
        case 'i': {
            /* the number follows directly (-T4) or is the next argument (-T 4) */
            char num[32];
            size_t k = 0;
            const char *v;
            while (*s >= '0' && *s <= '9' && k < sizeof(num) - 1) num[k++] = *s++;
            num[k] = '\0';
            if (k == 0 && *s == '\0' && *i + 1 < argc) {
                v = argv[++*i];
            } else if (k == 0 && *s) { /* -Tx: the rest of the cluster is the value, to name it */
                v = s;
                s += strlen(s);
            } else {
                v = num;
            }
            if (c == 'T') {
                if ((rc = set_threads(&r->p, v)) != 0) return rc;
            } else {
                unsigned long sec;
                if (parse_uint(v, &sec) != 0 || sec > 3600) return bad_usage("-i needs a number of seconds, 0..3600");
                r->p.bench_seconds = (double)sec;
            }
            break;
        }
        case 'o':
            if (*s) {
                r->p.out_name = s;
            } else {
                if (*i + 1 >= argc) return bad_usage("option '%s' needs a file name", "-o");
                r->p.out_name = argv[++*i];
            }
            s += strlen(s);
            r->out_last = 'o';
            break;
        default: return bad_usage("unknown option '%s'", opt);
        }
    }
    return CLI_GO;
}

/* Options into r, the other arguments into r->files; the checks that take all of them. */
static int parse_args(cli_run *r, int argc, char **argv)
{
    int rc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (r->opts_done || a[0] != '-' || a[1] == '\0') r->files[r->nfiles++] = a;
        else if ((rc = a[1] == '-' ? long_option(r, argc, argv, &i) : short_options(r, argc, argv, &i)) != CLI_GO)
            return rc;
    }
    fio_prefs *p = &r->p;
    if (r->dtype_set && !r->format_set) p->format = CKPZ_INPUT_RAW;
    if (p->raw_ndim && (p->raw_dtype == CKPZ_DTYPE_NONE || p->format != CKPZ_INPUT_RAW))
        return bad_usage("--shape applies to raw input: give its element type with --dtype");
    if (p->to_stdout && p->out_name) {
        /* zstd keeps the later of the two; said rather than done silently */
        if (p->verbosity >= 2 && strcmp(p->out_name, "-"))
            fprintf(stderr, "ckpz: both -c and -o given: the later one counts (%s%s)\n",
                    r->out_last == 'o' ? "writing " : "writing to standard output, not ", p->out_name);
        if (r->out_last == 'o') p->to_stdout = 0;
        else p->out_name = NULL;
    }
    char why[160];
    if ((rc = lossy_build_policy(&r->lf, &r->policy, why, sizeof why)) != 0) return rc < 0 ? bad_usage("%s", why) : rc;
    p->policy = r->policy;
    if (p->policy && r->mode != MODE_COMPRESS && r->mode != MODE_BENCH && r->mode != MODE_PREDICT)
        return bad_usage("lossy options apply to compression");
    if (r->po.model_path && r->mode != MODE_PREDICT) return bad_usage("--model applies to --predict");
    if (r->recursive && r->mode == MODE_EXTRACT) return bad_usage("-r does not apply to --extract");
    return CLI_GO;
}

/* The files of the run (standard input when none; -r's walk), then the operation of the
 * front end's table. */
static int dispatch(cli_run *r, const cli_ops *ops)
{
    const fio_prefs *p = &r->p;
    const char **files = r->files;
    int nfiles = r->nfiles, rc, walk_failed = 0;
    cli_mode mode = r->mode;
    if (nfiles == 0) {
        if (mode == MODE_BENCH) return bad_usage("-b needs at least one FILE");
        files[0] = "-";
        nfiles = 1;
    }
    if (r->recursive) {
        int want_ckpz = mode != MODE_COMPRESS && mode != MODE_BENCH && mode != MODE_PREDICT;
        if (fio_expand_dirs(p, want_ckpz, files, nfiles, &r->expanded, &r->nexpanded, &walk_failed) != 0) {
            fputs("ckpz: out of memory\n", stderr);
            return 1;
        }
        files = (const char **)r->expanded;
        nfiles = r->nexpanded;
        if (nfiles == 0) {
            if (p->verbosity >= 2) fputs("ckpz: no files found\n", stderr);
            return walk_failed;
        }
    }
    if (p->out_name && nfiles > 1 && (mode == MODE_COMPRESS || mode == MODE_DECOMPRESS || mode == MODE_REBASE))
        return bad_usage("-o takes exactly one input file");
    if (mode == MODE_EXTRACT && nfiles != 1) return bad_usage("--extract takes exactly one FILE.ckpz");

    if (mode == MODE_COMPRESS && p->level == CKPZ_LEVEL_MAX && p->verbosity >= 2)
        /* the measurements of BENCHMARKS.md: 11 MB/s per core against -3's 1800, for
         * 20.6% savings against 19.8% */
        fprintf(stderr,
                "ckpz: note: -%d compresses at a few MB/s per core (about 10) for output about 1%% smaller "
                "than -3's; -q hides this note\n",
                CKPZ_LEVEL_MAX);

    fio_install_signal_handlers();
    const char *const *f = files;
    switch (mode) {
    case MODE_COMPRESS: rc = ops->compress(p, f, nfiles); break;
    case MODE_DECOMPRESS: rc = ops->decompress(p, f, nfiles); break;
    case MODE_TEST: rc = ops->test(p, f, nfiles); break;
    case MODE_LIST: rc = ops->list(p, f, nfiles); break;
    case MODE_EXTRACT: rc = ops->extract(p, r->extract_name, f[0]); break;
    case MODE_BENCH: rc = ops->bench(p, f, nfiles); break;
    case MODE_REBASE: rc = ops->rebase(p, f, nfiles); break;
    case MODE_PREDICT: rc = ops->predict(p, f, nfiles, &r->po); break;
    default: rc = 2; break;
    }
    return rc || walk_failed ? 1 : 0;
}

int cli_main(int argc, char **argv, const cli_ops *ops)
{
    cli_run r;
    memset(&r, 0, sizeof r);
    r.lf.sym = -1;
    r.mode = MODE_COMPRESS;
    fio_prefs_init(&r.p);
    r.files = malloc(sizeof(*r.files) * (size_t)(argc > 0 ? argc : 1));
    if (!r.files) {
        fputs("ckpz: out of memory\n", stderr);
        return 1;
    }
    int rc = parse_args(&r, argc, argv);
    if (rc == CLI_GO) rc = dispatch(&r, ops);
    free(r.files);
    free(r.policy);
    fio_list_free(r.expanded, r.nexpanded);
    return rc;
}
