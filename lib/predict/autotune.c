/* autotune.c — ckpz_tune (the CLI's --target-bw, Python's target_bw=): measure the
 * candidate levels on samples of the input, for tune.c to choose the levels and the
 * thread count for the link the output goes to.
 *
 * For each input file the choice comes from measurement, not from a table. Its tensors
 * (listed by the --predict reader, which reads the header and tiny samples) fall into
 * roles by name: Adam's exp_avg_sq, exp_avg, gradients (names with "grad") and the rest
 * (weights, and the bytes outside tensors); they compress differently, so each role of
 * at least 2% of the file is measured on its own: chunks
 * of the role's tensors of its most common dtype, cut as the compression will cut them
 * and drawn one in k (gather), together about 1/128 of the role (at least 64 KiB and 16
 * chunks where it has them, at most 2 MiB for the file), are compressed in memory at
 * each candidate level and restored, as a safetensors file with one tensor per chunk,
 * which gives the level's ratio and its compress and decompress speed on this data and
 * this machine (the slow level on 1/16 of that). With --base, a role's tensors found in
 * the base (by name, dtype and size, as the library matches them) are measured instead,
 * coded against the base's chunks at the same places: a delta's ratio and speed differ
 * from stand-alone coding's (BF16 weights 10 steps apart: 3.0x against 1.4x); a role none
 * of whose tensors is in the base is measured stand-alone, as it will be coded.
 *
 * Measuring takes a tenth of a second or so (most of it the slow level on its 1 MB
 * chunks: 13 ms a run and role) and runs as the compression will: the same chunking
 * (small tensors are small chunks, each with its fixed costs: the same bytes ran at
 * 1.5 GB/s as 42 KB tensors and 3.0 GB/s as one raw dump), ckpz_compress_into on one
 * context for every sample (it keeps the coders' memory between calls, as one long
 * compression keeps it between chunks) into one output buffer, on one thread (tune.c's
 * scale(T) makes that T threads), fastest of three runs (two when the second takes over
 * 5 ms, one for the slow level). Before, one-shot calls that set everything up anew
 * measured 42-64 MB/s where -3 -T1 runs at 1-2 GB/s: 5.3-6.1 s predicted for a 256 MB
 * file that -3 -T1 compresses in 0.3 s of CPU (now 0.19-0.22 s). The model does not
 * count the caller's reading of the input (the CLI's copies, the kernel's): about a
 * third of a -T1 run from the page cache. A save that would take under half a second
 * uncompressed is not measured for at all (tune_quick): the default level, on one thread
 * per GB/s of link, outruns such links here and costs less than measuring.
 *
 * What the measurements make of it (the cost model and the choice) is tune.c's, a pure
 * function of them: this file measures, tune.c chooses.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckpz.h"
#include "common/ctx.h"
#include "predict/tune.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define SAMPLE (2u << 20)
#define SAMPLE_MIN (64u << 10)
#define LONG_RUN 0.005 /* seconds: a warm run this long measures a level well enough */

#define MAX_THREADS 64
/* A role below this share of the file is not measured: it takes the rest's level. */
#define ROLE_MIN_SHARE 0.02

/* The tensors of the file, from the --predict reader (header and tiny samples only). */
typedef struct {
    uint64_t off, len;
    ckpz_dtype dt;
    int role;
    char *name;    /* to find the tensor in the base */
    int64_t boff;  /* the same tensor's data in the base, or -1 */
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
    char *name = strdup(t->name);
    if (!name) return 1;
    v->s[v->n++] = (seg){t->offset, t->length, t->dtype, tune_role_of(t->name), name, -1};
    return 0;
}

static void segs_free(segs *v)
{
    for (size_t i = 0; i < v->n; i++) free(v->s[i].name);
    free(v->s);
}

/* Finds each tensor of v in the base (same name, dtype and size, as the library matches
 * them; base tensors taken once) and sets its boff; returns how many were found. */
static size_t match_base(ckpz_ctx *ctx, const ckpz_predict_params *pp, const void *base, size_t base_size, segs *v)
{
    segs b = {0};
    ckpz_mem m = {.data = (void *)base, .size = base_size};
    size_t found = 0;
    if (ckpz_predict_file(ctx, pp, ckpz_mem_pread, &m, base_size, collect, &b, NULL) != CKPZ_OK) {
        segs_free(&b);
        return 0;
    }
    for (size_t i = 0; i < v->n; i++)
        for (size_t k = 0; k < b.n; k++) {
            seg *t = &b.s[(i + k) % b.n]; /* the same position first: files of one model list alike */
            if (t->role >= 0 && t->dt == v->s[i].dt && t->len == v->s[i].len && !strcmp(t->name, v->s[i].name)) {
                v->s[i].boff = (int64_t)t->off;
                t->role = -1;
                found++;
                break;
            }
        }
    segs_free(&b);
    return found;
}

/* One piece of a sample: a chunk as the compression will cut it (buf[at..at+len)). */
typedef struct {
    size_t at, len;
} piece;
#define MAX_PIECES 4096
#define MIN_PIECES 16 /* when the role has as many chunks */
/* Room for the sample's safetensors header: MAX_PIECES entries of at most ~80 bytes. */
#define HEADER_ROOM ((size_t)MAX_PIECES * 96 + 64)

/* Chunk c's draw: a fixed hash (splitmix64), so that a file is always sampled alike. */
static uint64_t pick(uint64_t c)
{
    uint64_t z = c * 0x9e3779b97f4a7c15ull + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Chunks of the role's tensors of dtype dt, cut as the compression cuts them (at most
 * chunk bytes, never across tensors): one in k of them, k such that they make about
 * `want` bytes, into buf (at most SAMPLE) and pc (*npc pieces); returns the bytes read.
 * Taking one in k chunks, whatever their length, keeps the file's mix of small and
 * full chunks, whose speeds differ (a chunk costs fixed work: the same bytes coded as
 * 42 KB tensors ran at half the speed of one raw dump); the k-th of each run of k would
 * fall on the same few tensors of every layer (layers repeat one layout), so the one
 * is drawn by a hash of the chunk's number. With base: only tensors found in the base,
 * whose bytes at the same places go to bbuf. */
static size_t gather(const ckpz_source *f, const segs *v, int role, ckpz_dtype dt, size_t want, size_t chunk,
                     uint8_t *buf, const uint8_t *base, uint8_t *bbuf, piece *pc, size_t *npc)
{
    size_t n = 0;
    uint64_t bytes = 0, c = 0;
    unsigned es = ckpz_dtype_size(dt);
    *npc = 0;
#define TAKEN(i) (v->s[i].dt == dt && v->s[i].role == role && (!base || v->s[i].boff >= 0))
    uint64_t nchunks = 0;
    for (size_t i = 0; i < v->n; i++)
        if (TAKEN(i)) {
            bytes += v->s[i].len;
            nchunks += (v->s[i].len + chunk - 1) / chunk;
        }
    uint64_t k = bytes > want && want ? (bytes + want / 2) / want : 1;
    if (k > nchunks / MIN_PIECES) k = nchunks / MIN_PIECES; /* one or two pieces would be noise */
    if (k < 1) k = 1;
    for (size_t i = 0; i < v->n && *npc < MAX_PIECES && n < SAMPLE; i++) {
        if (!TAKEN(i)) continue;
        for (uint64_t at = 0; at < v->s[i].len && *npc < MAX_PIECES && n < SAMPLE; at += chunk, c++) {
            if (pick(c) % k) continue; /* one in k, at places no layout of layers repeats in */
            uint64_t len = v->s[i].len - at < chunk ? v->s[i].len - at : chunk;
            if (len > SAMPLE - n) len = SAMPLE - n;
            len -= len % es;
            if (!len || f->pread(f->opaque, buf + n, (size_t)len, v->s[i].off + at) != 0) continue;
            if (base) memcpy(bbuf + n, base + v->s[i].boff + at, (size_t)len);
            pc[(*npc)++] = (piece){n, (size_t)len};
            n += (size_t)len;
        }
    }
#undef TAKEN
    return n;
}

/* A safetensors file of the first np pieces of data as 1-D tensors of dt ("s0", "s1",
 * ...; opaque bytes as U8), into out (HEADER_ROOM + their bytes): the header from the
 * library's one safetensors writer. Returns its length, or 0 when it cannot be made. */
static size_t sample_file(const uint8_t *data, const piece *pc, size_t np, ckpz_dtype dt, uint8_t *out)
{
    if (!ckpz_dtype_format_name(dt, CKPZ_INPUT_SAFETENSORS)) dt = CKPZ_DTYPE_U8; /* opaque bytes */
    unsigned es = ckpz_dtype_size(dt);
    ckpz_st_tensor *t = malloc((np ? np : 1) * sizeof *t);
    uint64_t *dims = malloc((np ? np : 1) * sizeof *dims);
    char(*names)[24] = malloc((np ? np : 1) * sizeof *names);
    size_t hl = 0, off = 0;
    for (size_t i = 0; t && dims && names && i < np; i++) {
        snprintf(names[i], sizeof names[i], "s%zu", i);
        dims[i] = pc[i].len / es;
        t[i] = (ckpz_st_tensor){.name = names[i], .dtype = dt, .ndim = 1, .shape = &dims[i]};
        off += pc[i].len;
    }
    if (t && dims && names && ckpz_safetensors_header(NULL, t, np, NULL, 0, out, HEADER_ROOM, &hl, NULL) != CKPZ_OK)
        hl = 0;
    free(t), free(dims), free(names);
    if (!hl) return 0;
    memcpy(out + hl, data, off);
    return hl + off;
}

/* Compresses and restores the sample (np pieces of buf, coded against the same pieces of
 * bbuf when bbuf is not NULL) at each candidate level, as the compression will code it:
 * one chunk a piece, on one context, into z (zcap >= ckpz_compress_bound of a sample
 * file); st, bst and back hold a sample file each. */
static int measure(ckpz_ctx *ctx, const ckpz_params *p, double link_mbs, const uint8_t *buf, const piece *pc, size_t np,
                   ckpz_dtype dt, const uint8_t *bbuf, uint8_t *st, uint8_t *bst, uint8_t *back, uint8_t *z,
                   size_t zcap, tune_role *rc)
{
    size_t nall = 0;
    for (size_t i = 0; i < np; i++) nall += pc[i].len;
    for (int k = 0; k < TUNE_NLEVELS; k++) {
        rc->measured[k] = !(tune_levels[k] >= TUNE_SLOW_LEVEL && link_mbs > TUNE_SLOW_LEVEL_MAX_MBS);
        if (!rc->measured[k]) continue;
        /* the slow level on the first pieces that make 1/16 of the sample */
        size_t use = np, bytes = nall;
        if (tune_levels[k] >= TUNE_SLOW_LEVEL) {
            for (use = 0, bytes = 0; use < np && bytes < nall / 16;) bytes += pc[use++].len;
        }
        size_t m = sample_file(buf, pc, use, dt, st);
        if (!m || (bbuf && !sample_file(bbuf, pc, use, dt, bst))) return -1;
        ckpz_params q = *p;
        q.level = tune_levels[k];
        q.threads = 1;     /* tune.c's scale(T) makes it T threads */
        q.format = CKPZ_INPUT_SAFETENSORS;
        q.raw_ndim = 0;    /* the sample is a safetensors file of its own */
        q.policy = NULL;   /* the level's own speed; a lossy policy keeps its share */
        q.base = bbuf ? bst : NULL; /* the same pieces of the base, in a file of the same layout */
        q.base_size = bbuf ? m : 0;
        size_t zl = 0;
        /* three runs, the fastest counts: the first one at a level meets its tables and
         * the sample cold, and another process may take the core in any; after a warm
         * run of more than LONG_RUN (the slow level, on a chunk of 1 MB: 13 ms, measured
         * after the others have warmed the buffers) another would cost more than it
         * corrects */
        double best_c = 1e30, best_d = 1e30;
        for (int run = 0; run < 3; run++) {
            double t0 = now();
            if (ckpz_compress_into(ctx, &q, st, m, z, zcap, &zl) != CKPZ_OK) return -1;
            double t1 = now();
            if (ckpz_decompress_buffer(ctx, &q, z, zl, back, m) != CKPZ_OK) return -1;
            double t2 = now();
            if (t1 - t0 < best_c) best_c = t1 - t0;
            if (t2 - t1 < best_d) best_d = t2 - t1;
            if ((run > 0 || tune_levels[k] >= TUNE_SLOW_LEVEL) && t2 - t0 > LONG_RUN) break;
        }
        rc->ratio[k] = (double)m / (double)(zl ? zl : 1);
        rc->sc[k] = (double)m / (best_c > 1e-9 ? best_c : 1e-9);
        rc->sd[k] = (double)m / (best_d > 1e-9 ? best_d : 1e-9);
        if (use < np && k > 0 && rc->measured[k - 1]) {
            /* A part of the sample codes worse than all of it (tables weigh more): the
             * slow level's ratio is its gain over the level below on the same part,
             * applied to that level's ratio on the whole sample. */
            q.level = tune_levels[k - 1];
            if (ckpz_compress_into(ctx, &q, st, m, z, zcap, &zl) != CKPZ_OK) return -1;
            rc->ratio[k] *= rc->ratio[k - 1] / ((double)m / (double)(zl ? zl : 1));
        }
    }
    return 0;
}

/* Appends printf-formatted text to the explanation (when one is asked for). */
static void say(FILE *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(FILE *f, const char *fmt, ...)
{
    if (!f) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
}

ckpz_error ckpz_tune(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, double link_mbs, int cpu_budget,
                     ckpz_tune_result *out, ckpz_write_fn explain, void *explain_opaque)
{
    ctx_clear(ctx);
    if (!params || !src || !out || !(link_mbs > 0))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_tune: params, a source, a result and a link rate > 0 are needed");
    if (!src->pread || src->size == CKPZ_SIZE_UNKNOWN)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "ckpz_tune: the input is sampled ahead: it needs pread and a size");
    if (OUT_CHECK(ctx, out, "ckpz_tune_result")) return CKPZ_ERR_PARAM;
    ckpz_tune_result mine, *user = out; /* filled whole, given as far as the caller's reaches */
    out = &mine;
    memset(out, 0, sizeof *out);
    out->struct_size = sizeof *out;
    size_t zcap = ckpz_compress_bound(SAMPLE + HEADER_ROOM);
    uint8_t *buf = malloc(SAMPLE), *bbuf = NULL, *zbuf = malloc(zcap);
    uint8_t *sfile = malloc(SAMPLE + HEADER_ROOM), *bst = NULL, *back = malloc(SAMPLE + HEADER_ROOM);
    piece *pc = malloc(MAX_PIECES * sizeof *pc);
    size_t npc = 0;
    ckpz_ctx *mctx = ckpz_ctx_create(); /* the measuring calls' own: ctx keeps this call's message */
    ckpz_error err = CKPZ_ERR_NOMEM;
    double t_start = now();
    segs v = {0};
    char *text = NULL;
    size_t text_len = 0;
    FILE *ex = explain ? open_memstream(&text, &text_len) : NULL;
    const void *base = params->base;
    size_t base_size = params->base ? params->base_size : 0;
    double S = (double)src->size;
    if (!buf || !back || !zbuf || !sfile || !pc || !mctx || (explain && !ex)) goto out;
    int budget = params->threads > 0 ? params->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (cpu_budget > 0 && cpu_budget < budget) budget = cpu_budget;
    if (budget < 1) budget = 1;
    if (budget > MAX_THREADS) budget = MAX_THREADS;
    out->uncompressed_seconds = S / (link_mbs * 1e6);
    size_t chunk = (params->chunk_size ? params->chunk_size : (1u << 20) /* the library's default */) & ~(size_t)7;
    /* A transfer under TUNE_QUICK_SAVE_S is not even predicted (the predictor's reads
     * cost 20-50 ms on a loaded machine: a tenth of such a transfer); a longer one is, and
     * the predicted ratio tells whether measuring can pay for itself. */
    tune_choice qc;
    double ratio = 0; /* not predicted: tune_quick takes a nominal ratio */
    int quick = (out->uncompressed_seconds < TUNE_QUICK_SAVE_S || tune_outruns(link_mbs, budget)) &&
                tune_quick(S, link_mbs, 0, budget, (double)chunk, &qc);
    ckpz_predict_params pp;
    ckpz_predict_params_init(&pp);
    pp.format = params->format;
    pp.raw_dtype = params->raw_dtype;
    pp.raw_ndim = params->raw_ndim;
    pp.raw_shape = params->raw_ndim ? params->raw_shape : NULL;
    pp.sample_bytes = 4096;
    pp.sample_budget = 4096;
    ckpz_predict_total tot = {.struct_size = sizeof tot};
    if (!quick) {
        if ((err = ckpz_predict_file(mctx, &pp, src->pread, src->opaque, src->size, collect, &v, &tot))) {
            err = ctx_fail(ctx, err, "reading the input's layout: %s", ckpz_ctx_message(mctx));
            goto out;
        }
        ratio = base ? 0 : tot.ratio; /* the predictor does not know deltas */
        quick = tune_quick(S, link_mbs, ratio, budget, (double)chunk, &qc);
    }
    if (quick) {
        out->level = qc.level;
        out->threads = qc.threads;
        out->save_seconds = qc.save;
        say(ex, "--target-bw %.0f MB/s: %.3f s uncompressed, ", link_mbs, out->uncompressed_seconds);
        if (ratio > 0) say(ex, "predicted %.3fx", ratio);
        else say(ex, "ratio not predicted");
        say(ex, ": measuring (about %.2f s) cannot pay%s: -%d -T%d (save %.3f s on nominal speeds",
            tune_measure_cost(link_mbs),
            tune_outruns(link_mbs, budget) ? " (the link outruns -1 on its coding threads by over half)" : "",
            out->level, out->threads, out->save_seconds);
        if (qc.by_margin) say(ex, "; coding's %.3f s saves under %.0f%% of it", qc.coded_save, 100 * TUNE_CODE_MARGIN);
        say(ex, ")\n");
        out->measure_seconds = now() - t_start;
        err = CKPZ_OK;
        goto out;
    }
    err = CKPZ_ERR_NOMEM;
    /* With a base, the tensors it holds are measured as deltas against it. */
    size_t in_base = base && (bbuf = malloc(SAMPLE)) && (bst = malloc(SAMPLE + HEADER_ROOM))
                         ? match_base(mctx, &pp, base, base_size, &v)
                         : 0;

    /* Bytes per role and dtype; a role's measured dtype is its most common one. */
    tune_input in;
    memset(&in, 0, sizeof in);
    tune_role *rc = in.role;
    uint64_t by[TUNE_NROLES][CKPZ_DTYPE_COUNT_];
    memset(by, 0, sizeof by);
    double tensor_bytes = 0;
    for (size_t i = 0; i < v.n; i++) {
        by[v.s[i].role][v.s[i].dt] += v.s[i].len;
        tensor_bytes += (double)v.s[i].len;
    }
    int biggest = -1;
    for (int r = 0; r < TUNE_NROLES; r++) {
        uint64_t all = 0;
        for (int d = 1; d < CKPZ_DTYPE_COUNT_; d++) {
            all += by[r][d];
            if (by[r][d] > by[r][rc[r].dt]) rc[r].dt = (ckpz_dtype)d;
        }
        rc[r].bytes = (double)all;
        if (all && (biggest < 0 || rc[r].bytes > rc[biggest].bytes)) biggest = r;
    }
    if (biggest < 0) {
        err = ctx_fail(ctx, CKPZ_ERR_INPUT, "no tensors to measure in the input");
        goto out;
    }
    /* Small roles go to the rest (its rule "*" catches them), as do the bytes outside
     * tensors; if the rest is small itself it is costed as the biggest role. */
    rc[TUNE_W].bytes += S - tensor_bytes;
    for (int r = 0; r < TUNE_W; r++)
        if (rc[r].bytes < ROLE_MIN_SHARE * S) {
            rc[TUNE_W].bytes += rc[r].bytes;
            rc[r].bytes = 0;
        }
    int w_alias = by[TUNE_W][rc[TUNE_W].dt] < ROLE_MIN_SHARE * S && biggest != TUNE_W ? biggest : -1;
    size_t want = (size_t)(S / 128 < SAMPLE ? S / 128 : SAMPLE);
    if (want < SAMPLE_MIN) want = SAMPLE_MIN;
    int nroles = 0;
    for (int r = 0; r < TUNE_NROLES; r++) {
        if (!(rc[r].bytes > 0) || (r == TUNE_W && w_alias >= 0)) continue;
        size_t share = (size_t)((double)want * rc[r].bytes / S);
        if (share < SAMPLE_MIN) share = SAMPLE_MIN;
        if (share > SAMPLE) share = SAMPLE;
        rc[r].sample = in_base ? gather(src, &v, r, rc[r].dt, share, chunk, buf, base, bbuf, pc, &npc) : 0;
        rc[r].delta = rc[r].sample > 0;
        if (!rc[r].delta) /* no base, or none of the role's tensors in it: stand-alone */
            rc[r].sample = gather(src, &v, r, rc[r].dt, share, chunk, buf, NULL, NULL, pc, &npc);
        if (rc[r].sample == 0 || measure(mctx, params, link_mbs, buf, pc, npc, rc[r].dt, rc[r].delta ? bbuf : NULL,
                                         sfile, bst, back, zbuf, zcap, &rc[r])) {
            if (r != TUNE_W) { /* unmeasurable: counted with the rest */
                rc[TUNE_W].bytes += rc[r].bytes;
                rc[r].bytes = 0;
                continue;
            }
            err = ctx_fail(ctx, CKPZ_ERR_INPUT, "the input's tensors could not be measured");
            goto out;
        }
        nroles++;
    }
    if (w_alias >= 0) { /* the rest costed as the biggest role */
        double b = rc[TUNE_W].bytes;
        rc[TUNE_W] = rc[w_alias];
        rc[TUNE_W].bytes = b;
        rc[TUNE_W].sample = 0;
    }
    if (!nroles) {
        err = ctx_fail(ctx, CKPZ_ERR_INPUT, "the input's tensors could not be measured");
        goto out;
    }

    if (ex) {
        say(ex, "--target-bw %.0f MB/s, %d threads at most; measured per role (one thread%s):\n", link_mbs, budget,
            base ? "; delta: against the same windows of the base" : "");
        for (int r = 0; r < TUNE_NROLES; r++) {
            if (!(rc[r].bytes > 0)) continue;
            say(ex, "  %-21s %7.1f MB", tune_role_name[r], rc[r].bytes / 1e6);
            if (rc[r].sample)
                say(ex, " (%s, %.2f MB measured%s)", ckpz_dtype_name(rc[r].dt), (double)rc[r].sample / 1e6,
                    !base         ? ""
                    : rc[r].delta ? ", delta"
                                  : ", stand-alone: not in the base");
            else say(ex, " (costed as %s)", tune_role_name[w_alias]);
            for (int k = 0; k < TUNE_NLEVELS; k++)
                if (rc[r].measured[k])
                    say(ex, "  -%d %.3fx %.0f/%.0f MB/s", tune_levels[k], rc[r].ratio[k], rc[r].sc[k] / 1e6,
                        rc[r].sd[k] / 1e6);
            say(ex, "\n");
        }
    }
    in.file_bytes = S;
    in.link = link_mbs * 1e6;
    in.budget = budget;
    in.biggest = biggest;
    in.user_policy = params->policy != NULL;
    in.chunk = (double)chunk;
    in.io_bps = TUNE_IO_BPS;
    in.code_start = TUNE_CODE_START_S;
    in.margin = TUNE_CODE_MARGIN;
    in.speed_margin = TUNE_SPEED_MARGIN;
    tune_choice ch;
    tune_choose(&in, &ch);
    out->level = ch.level;
    out->threads = ch.threads;
    out->save_seconds = ch.save;
    snprintf(out->policy, sizeof out->policy, "%s", ch.policy);
    out->measure_seconds = now() - t_start;
    if (ex) tune_explain(ex, &in, &ch, out->measure_seconds);
    err = CKPZ_OK;
out:
    OUT_GIVE(user, &mine);
    if (ex) {
        fclose(ex);
        if (!err && text_len && explain(explain_opaque, text, text_len) != 0)
            err = ctx_fail(ctx, CKPZ_ERR_WRITE, "ckpz_tune: the explanation could not be written");
    }
    free(text);
    if (err == CKPZ_ERR_NOMEM) ctx_fail(ctx, err, "out of memory");
    segs_free(&v);
    ckpz_ctx_free(mctx);
    free(bbuf);
    free(bst);
    free(buf);
    free(back);
    free(sfile);
    free(pc);
    free(zbuf);
    return err;
}
