/* tune.c — --target-bw's choice: the levels (one per role of tensor) and the thread
 * count that save a file fastest through a link of B bytes/s, from what autotune.c
 * measured.
 *
 * A codec slower than the link makes saving slower than not compressing; a faster link
 * wants a faster codec. The cost of a configuration (threads T, a level L_r per role r
 * of S_r bytes) is
 *     compress   c = sum S_r / (speed_c(r, L_r) x scale(T))  scale(T) = 1 + 0.73 (T - 1),
 *     transfer   x = sum S_r / ratio(r, L_r) / B             measured (ckpz -b -T1/-T2 on
 *     decompress d = sum S_r / speed_d(r, L_r)               371 MB: 1.73x)
 * and, compression being overlapped with writing, saving takes max(c, x): the choice
 * minimises it over every combination (at most 3^4 per thread count), the fewest threads
 * within 2% of the best (the model is not finer than that), then the least c + x + d
 * (seed 001's total: of saves that tie, the one that codes least and restores soonest),
 * then the smallest output. The levels reach the library as a policy of lossless rules,
 * one per role (`*exp_avg_sq* lossless level 6`, ...). Lossy modes are never chosen on
 * their own (they change the data); with --policy the user's rules hold and one level
 * serves the file. -v prints each thread count's best and every uniform configuration
 * with c, x, d and seed 001's total c + x + d, and the choice; writing the file
 * uncompressed takes S / B, printed too, so that a choice slower than that would show.
 */
#include <math.h>
#include <string.h>

#include "tune.h"

const int tune_levels[TUNE_NLEVELS] = {1, 3, 6};
const char *const tune_role_name[TUNE_NROLES] = {"exp_avg_sq", "exp_avg", "gradients", "weights and the rest"};
static const char *const role_glob[TUNE_NROLES] = {"*exp_avg_sq*", "*exp_avg*", "*grad*", "*"};

/* Saves shorter than this (file size / link speed) are not worth measuring for. */
#define QUICK_SAVE_S 0.5
/* What one thread compresses at the default level, at least (2-3.5 GB/s on float
 * checkpoints here, BENCHMARKS.md): the quick choice's threads per MB/s of link. */
#define QUICK_MBS_PER_THREAD 1000.0

int tune_role_of(const char *name)
{
    if (strstr(name, "exp_avg_sq")) return TUNE_V;
    if (strstr(name, "exp_avg")) return TUNE_M;
    if (strstr(name, "grad")) return TUNE_G;
    return TUNE_W;
}

int tune_quick(double file_bytes, double link_mbs, int budget, int *level, int *threads)
{
    if (!(file_bytes / (link_mbs * 1e6) < QUICK_SAVE_S)) return 0;
    /* Measuring (5-20 ms) would cost more than a close choice can win on a save this
     * short: the default level, on as few threads as keep up with the link (the writer
     * of the output needs a core too: on 2 cores, -T2 into a 1 GB/s pipe was 20% slower
     * than -T1). */
    *level = CKPZ_LEVEL_DEFAULT;
    *threads = (int)ceil(link_mbs / QUICK_MBS_PER_THREAD);
    if (*threads > budget) *threads = budget;
    if (*threads < 1) *threads = 1;
    return 1;
}

static double scale(int t) { return 1 + 0.73 * (t - 1); }

#define TIE 1.02 /* saves within 2% of each other tie */

/* The model's times (seconds) for levels lv[r] (indexes into tune_levels) on t threads. */
typedef struct {
    double c, x, d, save;
} cost;

static cost model(const tune_role *rc, const int *lv, int t, double B)
{
    cost k = {0, 0, 0, 0};
    for (int r = 0; r < TUNE_NROLES; r++) {
        if (!(rc[r].bytes > 0)) continue;
        int l = lv[r];
        k.c += rc[r].bytes / (rc[r].sc[l] * scale(t));
        k.x += rc[r].bytes / rc[r].ratio[l] / B;
        k.d += rc[r].bytes / rc[r].sd[l];
    }
    k.save = k.c > k.x ? k.c : k.x;
    return k;
}

/* The first combination: each role at its first measured level. */
static void first_combo(const tune_role *rc, int *lv)
{
    for (int r = 0; r < TUNE_NROLES; r++) {
        lv[r] = 0;
        while (lv[r] < TUNE_NLEVELS - 1 && !rc[r].measured[lv[r]]) lv[r]++;
    }
}

/* Next combination of levels for the roles that have bytes (odometer over measured
 * levels); 0 after the last. */
static int next_combo(const tune_role *rc, int *lv)
{
    for (int r = 0; r < TUNE_NROLES; r++) {
        if (!(rc[r].bytes > 0)) continue;
        do lv[r]++;
        while (lv[r] < TUNE_NLEVELS && !rc[r].measured[lv[r]]);
        if (lv[r] < TUNE_NLEVELS) return 1;
        lv[r] = 0;
        while (!rc[r].measured[lv[r]]) lv[r]++;
    }
    return 0;
}

/* The best combination on t threads (the first of equals) into best; its save. */
static double best_on(const tune_input *in, int t, int *best)
{
    int lv[TUNE_NROLES];
    double s = 1e300;
    first_combo(in->role, lv);
    memcpy(best, lv, sizeof lv);
    do {
        cost k = model(in->role, lv, t, in->link);
        if (k.save < s) {
            s = k.save;
            memcpy(best, lv, sizeof lv);
        }
    } while (next_combo(in->role, lv));
    return s;
}

void tune_choose(const tune_input *in, tune_choice *ch)
{
    const tune_role *rc = in->role;
    int lv[TUNE_NROLES], u[TUNE_NROLES];
    double best = 1e300, best_x = 1e300;
    memset(ch, 0, sizeof *ch);
    for (int t = 1; t <= in->budget; t++) {
        double s = best_on(in, t, u);
        if (s < best) best = s;
    }
    /* within 2% of the best, the fewest threads, then the least c + x + d: among saves
     * that tie, the one that spends the least coding and restores soonest at the other
     * end (a slow level that makes the output 1-2% smaller while the link is the limit
     * costs seconds of CPU on both sides for a gain the model cannot promise: at 1 Gbit/s
     * a 328 MB checkpoint migrated in 3.3 s with exp_avg_sq at -6, in 2.2 s at -1), then
     * the smallest output */
    double best_total = 1e300;
    ch->threads = in->budget + 1;
    first_combo(rc, ch->lv);
    for (int t = 1; t <= in->budget; t++) {
        first_combo(rc, lv);
        do {
            cost k = model(rc, lv, t, in->link);
            double total = k.c + k.x + k.d;
            if (k.save <= best * TIE &&
                (t < ch->threads ||
                 (t == ch->threads && (total < best_total || (total == best_total && k.x < best_x))))) {
                ch->threads = t;
                best_x = k.x;
                best_total = total;
                memcpy(ch->lv, lv, sizeof lv);
            }
        } while (next_combo(rc, lv));
    }
    ch->save = model(rc, ch->lv, ch->threads, in->link).save;
    /* One level for all roles: no policy. Otherwise a rule per role that has bytes, the
     * rest's level for the file (and so for the bytes outside tensors). */
    ch->uniform = 1;
    for (int r = 0; r < TUNE_NROLES; r++)
        if (rc[r].bytes > 0 && ch->lv[r] != ch->lv[in->biggest]) ch->uniform = 0;
    ch->level = tune_levels[ch->lv[rc[TUNE_W].bytes > 0 ? TUNE_W : in->biggest]];
    if (!ch->uniform && !in->user_policy) {
        size_t at = 0;
        for (int r = 0; r < TUNE_NROLES; r++)
            if (rc[r].bytes > 0 || r == TUNE_W)
                at += (size_t)snprintf(ch->policy + at, sizeof ch->policy - at, "%s lossless level %d\n", role_glob[r],
                                       tune_levels[ch->lv[r]]);
    } else if (!ch->uniform) { /* the user's policy holds: the level of most of the bytes */
        int r0 = TUNE_W;
        for (int r = 0; r < TUNE_NROLES; r++)
            if (rc[r].bytes > rc[r0].bytes) r0 = r;
        ch->level = tune_levels[ch->lv[r0]];
    }
}

static void levels_text(const tune_role *rc, const int *lv, char *b, size_t len)
{
    size_t at = 0;
    b[0] = 0;
    for (int r = 0; r < TUNE_NROLES && at < len; r++)
        if (rc[r].bytes > 0)
            at += (size_t)snprintf(b + at, len - at, "%s%s -%d", at ? ", " : "",
                                   r == TUNE_W ? "rest" : tune_role_name[r], tune_levels[lv[r]]);
}

void tune_explain(FILE *f, const tune_input *in, const tune_choice *ch, double seconds)
{
    const tune_role *rc = in->role;
    double S = in->file_bytes, B = in->link;
    char name[96], cfg[128];
    fprintf(f, "  %-24s %7s %9s %9s %9s %9s %9s %s\n", "config", "ratio", "compress", "transfer", "restore", "save",
            "c+x+d", "(seconds)");
    for (int t = 1; t <= in->budget; t++) { /* the thread count's best and the uniform configurations */
        int u[TUNE_NROLES];
        for (int k = -1; k < TUNE_NLEVELS; k++) {
            if (k < 0) {
                best_on(in, t, u);
                levels_text(rc, u, name, sizeof name);
            } else {
                int ok = 1;
                for (int r = 0; r < TUNE_NROLES; r++) {
                    u[r] = k;
                    ok &= !(rc[r].bytes > 0) || rc[r].measured[k];
                }
                if (!ok) continue;
                snprintf(name, sizeof name, "-%d", tune_levels[k]);
            }
            cost c = model(rc, u, t, B);
            snprintf(cfg, sizeof cfg, "%s%s -T%d", k < 0 ? "best: " : "", name, t);
            fprintf(f, "  %-24s %6.3fx %9.3f %9.3f %9.3f %9.3f %9.3f\n", cfg, S / (c.x * B), c.c, c.x, c.d, c.save,
                    c.c + c.x + c.d);
        }
    }
    if (ch->uniform) snprintf(name, sizeof name, "-%d", tune_levels[ch->lv[in->biggest]]);
    else levels_text(rc, ch->lv, name, sizeof name);
    fprintf(f, "  %-24s %7s %9s %9.3f %9s %9.3f %9.3f\n", "uncompressed", "1.000x", "", S / B, "", S / B, S / B);
    fprintf(f, "  chosen: %s -T%d (save %.3f s against %.3f s uncompressed; measuring took %.3f s)%s\n", name,
            ch->threads, ch->save, S / B, seconds,
            !ch->uniform && in->user_policy ? "; with --policy one level for the file" : "");
}
