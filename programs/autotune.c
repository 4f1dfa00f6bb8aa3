/* autotune.c — --target-bw: choose the level and thread count for the link the output
 * goes to.
 *
 * A codec slower than the link makes saving slower than not compressing; a faster link
 * wants a faster codec. For each input file the choice comes from measurement, not from
 * a table: windows from the middle of every tensor of the file's most common dtype (the
 * tensor list comes from the --predict reader, which reads the header and tiny samples),
 * together 1/128 of the file (at least 64 KiB, at most 2 MiB), are compressed in memory
 * as a raw dump of that dtype at each candidate level on one thread and restored, which
 * gives the level's ratio and its compress and decompress speed on this data and this
 * machine (the slow level on 1/16 of that). Measuring takes a few milliseconds; the
 * speeds it sees on such small inputs are low (fixed costs per call), which only makes
 * the model cautious about compressing on fast links. A save that would take under
 * QUICK_SAVE_S uncompressed is not measured for at all: the default level on every
 * allowed thread, which outruns such links here, costs less than measuring would. The cost of a configuration (level L, T
 * threads) for S bytes over a link of B bytes/s is then
 *     compress  c = S / (speed_c(L) x scale(T))     scale(T) = 1 + 0.73 (T - 1), measured
 *     transfer  x = S / ratio(L) / B                (ckpz -b -T1/-T2 on 371 MB: 1.73x)
 *     decompress d = S / speed_d(L)
 * and, compression being overlapped with writing, saving takes max(c, x): the choice
 * minimises it (the fewest threads within 1% of the best), and -v prints every candidate
 * with c, x, d and seed 001's total c + x + d. Writing the file uncompressed takes S / B;
 * it is printed too, so that a choice slower than that would show.
 */
#include "autotune.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAMPLE (2u << 20)
#define SAMPLE_MIN (64u << 10)

static const int levels[] = {1, 3, 6};
/* Levels 6 and up run at 10-150 MB/s per core here (BENCHMARKS.md): on a link faster than
 * that they cannot save time, so they are not even measured. */
#define SLOW_LEVEL 6
/* Saves shorter than this (file size / link speed) are not worth measuring for. */
#define QUICK_SAVE_S 0.5
#define SLOW_LEVEL_MAX_MBS 150.0
#define NLEVELS (int)(sizeof levels / sizeof levels[0])

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double scale(int t) { return 1 + 0.73 * (t - 1); }

/* The tensors of the file, from the --predict reader (header and tiny samples only). */
typedef struct {
    uint64_t off, len;
    ckpz_dtype dt;
} seg;
typedef struct {
    seg *s;
    size_t n, cap;
} segs;

static int collect(void *opaque, const ckpz_prediction *t)
{
    segs *v = opaque;
    if (t->dtype == CKPZ_DTYPE_NONE || t->length < 64) return 0;
    if (v->n == v->cap) {
        size_t nc = v->cap ? 2 * v->cap : 64;
        seg *ns = realloc(v->s, nc * sizeof *ns);
        if (!ns) return 1;
        v->s = ns;
        v->cap = nc;
    }
    v->s[v->n++] = (seg){t->offset, t->length, t->dtype};
    return 0;
}

static int fd_pread(void *opaque, void *buf, size_t n, uint64_t off)
{
    FILE *f = opaque;
    return fseeko(f, (off_t)off, SEEK_SET) == 0 && fread(buf, 1, n, f) == n ? 0 : -1;
}

int autotune_choose(const fio_prefs *p, const char *path, int *level, int *threads)
{
    uint8_t *buf = malloc(SAMPLE), *back = malloc(SAMPLE);
    ckpz_ctx *ctx = ckpz_ctx_create();
    uint64_t size = 0;
    int rc = -1;
    double t_start = now();
    if (!buf || !back || !ctx) goto out;
    struct stat st0;
    int budget0 = p->threads ? p->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (p->cpu_budget && p->cpu_budget < budget0) budget0 = p->cpu_budget;
    if (budget0 < 1) budget0 = 1;
    if (stat(path, &st0) == 0 && (double)st0.st_size / (p->target_bw * 1e6) < QUICK_SAVE_S) {
        /* Measuring (5-20 ms) would cost more than a close choice can win on a save this
         * short: the default level on every thread allowed, which outruns such a link. */
        *level = CKPZ_LEVEL_DEFAULT;
        *threads = budget0;
        if (p->verbosity >= 3)
            fprintf(stderr, "%s: --target-bw %.0f MB/s: a save of %.3f s uncompressed, too short to measure for: "
                    "-%d -T%d\n", path, p->target_bw, (double)st0.st_size / (p->target_bw * 1e6), *level, *threads);
        rc = 0;
        goto out;
    }
    /* Windows spread over the tensors of the file's most common dtype (the bulk of a
     * checkpoint), WIN bytes every so many tensors, concatenated and coded as a raw
     * dump of that dtype: the tensors' data, not the header the file starts with. */
    FILE *f = fopen(path, "rb");
    if (!f) goto out;
    segs v = {0};
    ckpz_predict_params pp;
    ckpz_predict_params_init(&pp);
    pp.format = p->format;
    pp.raw_dtype = p->raw_dtype;
    pp.sample_bytes = 4096;
    pp.sample_budget = 4096;
    ckpz_predict_total tot;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || ckpz_predict_file(ctx, &pp, fd_pread, f, (uint64_t)st.st_size, collect, &v, &tot)) {
        fclose(f);
        free(v.s);
        goto out;
    }
    size = (uint64_t)st.st_size;
    uint64_t by[CKPZ_DTYPE_COUNT_] = {0};
    for (size_t i = 0; i < v.n; i++) by[v.s[i].dt] += v.s[i].len;
    ckpz_dtype dt = CKPZ_DTYPE_NONE;
    for (int d = 1; d < CKPZ_DTYPE_COUNT_; d++)
        if (by[d] > by[dt]) dt = (ckpz_dtype)d;
    size_t n = 0, want = (size_t)(size / 128 < SAMPLE ? size / 128 : SAMPLE);
    if (want < SAMPLE_MIN) want = SAMPLE_MIN;
    size_t ntens = 0;
    for (size_t i = 0; i < v.n; i++) ntens += v.s[i].dt == dt;
    size_t win = ntens ? want / ntens : 0;
    unsigned es = ckpz_dtype_size(dt);
    win = win < 4096 ? 4096 : win;
    win -= win % 8;
    for (size_t i = 0; i < v.n && n + win <= SAMPLE; i++) {
        if (v.s[i].dt != dt) continue;
        uint64_t len = v.s[i].len < win ? v.s[i].len - v.s[i].len % es : win;
        uint64_t at = v.s[i].off + (v.s[i].len - len) / 2 / es * es; /* the middle of the tensor */
        if (len && fd_pread(f, buf + n, (size_t)len, at) == 0) n += (size_t)len;
    }
    fclose(f);
    free(v.s);
    if (n == 0) goto out;
    int budget = p->threads ? p->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (p->cpu_budget && p->cpu_budget < budget) budget = p->cpu_budget;
    if (budget < 1) budget = 1;
    double ratio[NLEVELS], sc[NLEVELS], sd[NLEVELS];
    int measured[NLEVELS];
    for (int k = 0; k < NLEVELS; k++) {
        measured[k] = !(levels[k] >= SLOW_LEVEL && p->target_bw > SLOW_LEVEL_MAX_MBS);
        if (!measured[k]) continue;
        size_t m = levels[k] >= SLOW_LEVEL ? n / 16 - n / 16 % 8 : n;
        if (m < 4096) m = n;
        ckpz_params q;
        fio_params(p, &q);
        q.level = levels[k];
        q.threads = 1;
        q.format = CKPZ_INPUT_RAW;
        q.raw_dtype = dt;
        q.policy = NULL; /* the level's own speed; a lossy policy keeps its share */
        void *z = NULL;
        size_t zl = 0;
        /* two runs, the faster counts: the first one pays for page faults */
        double best_c = 1e30, best_d = 1e30;
        for (int run = 0; run < 2; run++) {
            ckpz_free(z);
            z = NULL;
            double t0 = now();
            if (ckpz_compress_buffer(ctx, &q, buf, m, &z, &zl) != CKPZ_OK) goto out;
            double t1 = now();
            if (ckpz_decompress_buffer(ctx, &q, z, zl, back, m) != CKPZ_OK) {
                ckpz_free(z);
                goto out;
            }
            double t2 = now();
            if (t1 - t0 < best_c) best_c = t1 - t0;
            if (t2 - t1 < best_d) best_d = t2 - t1;
        }
        ckpz_free(z);
        ratio[k] = (double)m / (double)(zl ? zl : 1);
        sc[k] = (double)m / (best_c > 1e-9 ? best_c : 1e-9);
        sd[k] = (double)m / (best_d > 1e-9 ? best_d : 1e-9);
    }
    double S = (double)size, B = p->target_bw * 1e6, best = 1e300;
    int best_k = 0, best_t = 1;
    if (p->verbosity >= 3)
        fprintf(stderr,
                "%s: --target-bw %.0f MB/s, %d threads at most; measured on %.2f MB of its %s tensors:\n"
                "  %-11s %7s %9s %9s %9s %9s %9s %s\n",
                path, p->target_bw, budget, (double)n / 1e6, ckpz_dtype_name(dt), "config", "ratio", "compress", "transfer",
                "restore", "save", "c+x+d", "(seconds)");
    double save[NLEVELS][64];
    if (budget > 64) budget = 64;
    for (int k = 0; k < NLEVELS; k++) {
        for (int t = 1; t <= budget; t++) {
            if (!measured[k]) {
                save[k][t - 1] = 1e300;
                continue;
            }
            double c = S / (sc[k] * scale(t)), x = S / ratio[k] / B, d = S / sd[k];
            save[k][t - 1] = c > x ? c : x;
            if (save[k][t - 1] < best) best = save[k][t - 1];
            if (p->verbosity >= 3)
                fprintf(stderr, "  -%d -T%-6d %6.3fx %9.3f %9.3f %9.3f %9.3f %9.3f\n", levels[k], t, ratio[k], c, x,
                        d, save[k][t - 1], c + x + d);
        }
    }
    /* Within 1% of the fastest save: the fewest threads, then the smallest output. */
    for (int t = 1, found = 0; t <= budget && !found; t++)
        for (int k = 0; k < NLEVELS; k++)
            if (measured[k] && save[k][t - 1] <= best * 1.01 && (!found || ratio[k] > ratio[best_k])) {
                best_k = k;
                best_t = t;
                found = 1;
            }
    best = save[best_k][best_t - 1];
    if (p->verbosity >= 3) {
        fprintf(stderr, "  %-11s %7s %9s %9.3f %9s %9.3f %9.3f\n", "uncompressed", "1.000x", "", S / B, "", S / B,
                S / B);
        fprintf(stderr, "  chosen: -%d -T%d (save %.3f s against %.3f s uncompressed; measuring took %.3f s)\n",
                levels[best_k], best_t, best, S / B, now() - t_start);
    }
    *level = levels[best_k];
    *threads = best_t;
    rc = 0;
out:
    free(buf);
    free(back);
    ckpz_ctx_free(ctx);
    return rc;
}
