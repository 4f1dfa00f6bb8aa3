/* tune.c — --target-bw's choice: the levels (one per role of tensor) and the thread
 * count that move a file fastest through a link of B bytes/s, end to end (from the
 * sender's file to the receiver's restored one), from what autotune.c measured.
 *
 * A codec slower than the link makes saving slower than not compressing; a faster link
 * wants a faster codec, and a link faster than every level wants none: storing the
 * chunks as they are (level 0) is a candidate like the others. The cost of a
 * configuration (threads T, a level L_r per role r of S_r bytes) is
 *     compress   c = sum S_r / (speed_c(r, L_r) x scale(T)) + S / io
 *     transfer   x = sum S_r / ratio(r, L_r) / B
 *     restore    d = sum S_r / (speed_d(r, L_r) x scale(T))   (the receiver alike)
 *     scale(T) = 1 + 0.73 (T - 1)   (ckpz -b -T1/-T2 on 371 MB: 1.73x)
 * where io is what the sender spends per byte reading the input and handing it on
 * (TUNE_IO_BPS). The three overlap chunk by chunk (the CLI streams), but the link
 * starts only once the first chunk is coded and the file is whole only once the last
 * one is restored:
 *     save = C / speed_c + max(c, x, d) + C / speed_d + start
 * (C: one chunk, on one thread; start: what a coding level costs both ends before its
 * first byte, TUNE_CODE_START_S, 0 for storing). Before, save was max(c, x), with
 * neither the fixed costs nor the receiver, and storing was not a candidate: a 53 MB
 * torch.save file moved through a 1 Gbit/s link at 0.81x of raw bytes' speed. The
 * choice minimises save over every combination (at most 4^4 per thread count; storing
 * only for the whole file), the fewest threads within 2% of the best (the model is not
 * finer than that; storing takes two where it may), then the least c + x + d (of saves
 * that tie, the one that codes least and restores soonest), then the smallest output.
 * Where storing is a candidate, coding must be clearly worth it: a level is one only
 * where it codes and restores on half the threads it may use (tune_coding_threads; one
 * on 2 or 3) at TUNE_SPEED_MARGIN (2x) the link's speed, and coding is chosen only where
 * its best save is TUNE_CODE_MARGIN (5%) under storing's. Where the coder is not clearly
 * faster than the link, the overlap max() counts on is what the ends' own reading and
 * writing and other work on their cores take first (told 1250 MB/s, a 2-core VM whose
 * link carried 320 MB/s ran -1 -T2 at 0.45-0.55x of raw bytes' speed where the model
 * had it ahead), and what coding gains is within the model's error.
 * What measuring costs is decided before it (tune_quick): a short transfer (under
 * TUNE_QUICK_SAVE_S; not even predicted, at a nominal 1.1x), or one the predicted ratio
 * cannot shorten by twice what measuring costs, is not measured; the same model then
 * chooses between storing and -1 on nominal speeds. The levels reach
 * the library as a policy of lossless rules, one per role (`*exp_avg_sq* lossless level
 * 6`, ...). Lossy modes are never chosen on their own (they change the data); with
 * --policy the user's rules hold and one level serves the file. -v prints each thread
 * count's best and every uniform configuration with c, x, d, save and c + x + d, and the
 * choice; writing the file uncompressed takes S / B, printed too.
 */
#include <math.h>
#include <string.h>

#include "tune.h"

const int tune_levels[TUNE_NLEVELS] = {CKPZ_LEVEL_STORE, 1, 3, 6};
const char *const tune_role_name[TUNE_NROLES] = {"exp_avg_sq", "exp_avg", "gradients", "weights and the rest"};
static const char *const role_glob[TUNE_NROLES] = {"*exp_avg_sq*", "*exp_avg*", "*grad*", "*"};

/* Nominal speeds on one thread for the choice without measuring (bytes/s): storing is a
 * copy and a CRC pass; -1 codes float checkpoints at 1.5-2.5 GB/s and restores them at
 * 2-3 GB/s here (autotune's samples, -vvv), the lower ends taken. */
#define NOMINAL_STORE_BPS 4e9
#define NOMINAL_L1_C_BPS 1.5e9
#define NOMINAL_L1_D_BPS 2e9
/* The ratio a float checkpoint is taken to reach when the predictor gives none. */
#define NOMINAL_RATIO 1.1

int tune_role_of(const char *name)
{
    if (strstr(name, "exp_avg_sq")) return TUNE_V;
    if (strstr(name, "exp_avg")) return TUNE_M;
    if (strstr(name, "grad")) return TUNE_G;
    return TUNE_W;
}

double tune_measure_cost(double link_mbs)
{
    /* measured (-vvv) on 123 MB: 0.135 s with the slow level, which runs only on links
     * up to TUNE_SLOW_LEVEL_MAX_MBS; 0.03-0.05 s without it */
    return link_mbs > TUNE_SLOW_LEVEL_MAX_MBS ? 0.05 : 0.15;
}

int tune_coding_threads(int budget) { return budget >= 4 ? budget / 2 : 1; }

int tune_outruns(double link_mbs, int budget)
{
    return NOMINAL_L1_C_BPS * tune_coding_threads(budget) < TUNE_SPEED_MARGIN * link_mbs * 1e6;
}

int tune_quick(double file_bytes, double link_mbs, double predicted_ratio, int budget, double chunk, tune_choice *ch)
{
    double B = link_mbs * 1e6, R = predicted_ratio > 0 ? predicted_ratio : NOMINAL_RATIO;
    double gain = file_bytes / B * (1 - 1 / R); /* the most compressing can take off the link */
    if (!(file_bytes / B < TUNE_QUICK_SAVE_S) && !(gain < 2 * tune_measure_cost(link_mbs)) &&
        !tune_outruns(link_mbs, budget))
        return 0;
    /* Measuring would cost about what a close choice can win: the same model on nominal
     * speeds, storing against -1 at the predicted ratio. */
    tune_input in;
    memset(&in, 0, sizeof in);
    in.file_bytes = file_bytes;
    in.link = B;
    in.budget = budget;
    in.biggest = TUNE_W;
    in.chunk = chunk;
    in.io_bps = TUNE_IO_BPS;
    in.code_start = TUNE_CODE_START_S;
    in.margin = TUNE_CODE_MARGIN;
    in.speed_margin = TUNE_SPEED_MARGIN;
    tune_role *w = &in.role[TUNE_W];
    w->bytes = file_bytes;
    w->measured[TUNE_STORE] = w->measured[1] = 1;
    w->ratio[TUNE_STORE] = 1;
    w->sc[TUNE_STORE] = w->sd[TUNE_STORE] = NOMINAL_STORE_BPS;
    w->ratio[1] = R;
    w->sc[1] = NOMINAL_L1_C_BPS;
    w->sd[1] = NOMINAL_L1_D_BPS;
    tune_choose(&in, ch);
    return 1;
}

static double scale(int t) { return 1 + 0.73 * (t - 1); }

#define TIE 1.02 /* saves within 2% of each other tie */

/* Storing is for the whole file or not at all: a policy rule has no store level. */
static int mixed_store(const tune_role *rc, const int *lv)
{
    int store = 0, other = 0;
    for (int r = 0; r < TUNE_NROLES; r++)
        if (rc[r].bytes > 0) {
            store |= lv[r] == TUNE_STORE;
            other |= lv[r] != TUNE_STORE;
        }
    return store && other;
}

/* Every role that has bytes stored. */
static int all_store(const tune_role *rc, const int *lv)
{
    for (int r = 0; r < TUNE_NROLES; r++)
        if (rc[r].bytes > 0 && lv[r] != TUNE_STORE) return 0;
    return 1;
}

/* The model's times (seconds) for levels lv[r] (indexes into tune_levels) on t threads. */
typedef struct {
    double c, x, d, save;
} cost;

static cost model(const tune_input *in, const int *lv, int t)
{
    const tune_role *rc = in->role;
    cost k = {0, 0, 0, 0};
    double B = in->link;
    for (int r = 0; r < TUNE_NROLES; r++) {
        if (!(rc[r].bytes > 0)) continue;
        int l = lv[r];
        k.c += rc[r].bytes / (rc[r].sc[l] * scale(t));
        k.x += rc[r].bytes / rc[r].ratio[l] / B;
        k.d += rc[r].bytes / (rc[r].sd[l] * scale(t));
    }
    if (in->io_bps > 0) k.c += in->file_bytes / in->io_bps;
    k.save = k.c > k.x ? k.c : k.x;
    if (k.d > k.save) k.save = k.d;
    /* the first chunk coded before the link starts, the last restored after it ends, on
     * one thread each, at the level of the rest (the file's first and last bytes) */
    const tune_role *e = &rc[rc[TUNE_W].bytes > 0 ? TUNE_W : in->biggest];
    int le = lv[rc[TUNE_W].bytes > 0 ? TUNE_W : in->biggest];
    double C = in->chunk < in->file_bytes ? in->chunk : in->file_bytes;
    if (C > 0) k.save += C / e->sc[le] + C / e->sd[le];
    if (!all_store(rc, lv)) k.save += in->code_start; /* a coder's tables and buffers, at both ends */
    return k;
}

/* Coding (not storing) at levels lv whose speed over the file's roles, coding or
 * restoring, on the coding threads of the budget (tune_coding_threads: one thread's
 * measured speed times their count), is under speed_margin times the link's
 * (tune_input), where storing is a candidate. Over the file, not per role: one role's sample that lost its core while
 * it was timed (a loaded machine: 443 MB/s where its other runs gave 1.4 GB/s) moves the
 * mean, not the verdict. */
static int too_slow(const tune_input *in, const int *lv, int can_store)
{
    if (!can_store || !(in->speed_margin > 0)) return 0;
    double bytes = 0, tc = 0, td = 0;
    for (int r = 0; r < TUNE_NROLES; r++)
        if (in->role[r].bytes > 0 && lv[r] != TUNE_STORE) {
            bytes += in->role[r].bytes;
            tc += in->role[r].bytes / in->role[r].sc[lv[r]];
            td += in->role[r].bytes / in->role[r].sd[lv[r]];
        }
    double need = in->speed_margin * in->link / tune_coding_threads(in->budget);
    return bytes > 0 && (bytes < need * tc || bytes < need * td);
}

/* Storing was measured for every role that has bytes (it is a candidate). */
static int stored_everywhere(const tune_role *rc)
{
    for (int r = 0; r < TUNE_NROLES; r++)
        if (rc[r].bytes > 0 && !rc[r].measured[TUNE_STORE]) return 0;
    return 1;
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
    int can_store = stored_everywhere(in->role);
    do {
        if (mixed_store(in->role, lv) || too_slow(in, lv, can_store)) continue;
        cost k = model(in, lv, t);
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
    /* Coding must save the margin of storing's time: where it is not clearly faster than
     * the link (per thread, and the receiver's restoring) the overlap the model counts
     * on is the first thing lost (to the sender's own reading and writing, to other work
     * on its cores), and what it gains is within the model's error. */
    int store_only = 0, can_store = stored_everywhere(rc);
    double store_best = 1e300;
    if (can_store) {
        int st[TUNE_NROLES] = {0};
        for (int t = 1; t <= in->budget; t++) {
            double s = model(in, st, t).save;
            if (s < store_best) store_best = s;
        }
        store_only = in->margin > 0 && best > store_best * (1 - in->margin);
    }
    if (store_only) {
        ch->by_margin = best < store_best;
        ch->coded_save = best;
        best = store_best;
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
            if (mixed_store(rc, lv) || too_slow(in, lv, can_store) || (store_only && !all_store(rc, lv))) continue;
            cost k = model(in, lv, t);
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
    /* Storing's work (a copy and a CRC) is below what the model resolves between thread
     * counts, but on one thread reading, checking and writing take turns: through the
     * emulated 10 Gbit/s link a 662 MB file took 1.07-1.21 s with -0 -T1 and 0.78-0.96 s
     * with -0 -T2 (bench/migrate, three interleaved runs). Two threads let the checking
     * overlap the reading and writing; more add chunks in flight and nothing else. */
    if (all_store(rc, ch->lv) && in->budget >= 2) ch->threads = 2;
    ch->save = model(in, ch->lv, ch->threads).save;
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
            cost c = model(in, u, t);
            snprintf(cfg, sizeof cfg, "%s%s -T%d", k < 0 ? "best: " : "", name, t);
            fprintf(f, "  %-24s %6.3fx %9.3f %9.3f %9.3f %9.3f %9.3f%s\n", cfg, S / (c.x * B), c.c, c.x, c.d, c.save,
                    c.c + c.x + c.d, too_slow(in, u, stored_everywhere(rc)) ? "  (too slow for the link)" : "");
        }
    }
    if (ch->uniform) snprintf(name, sizeof name, "-%d", tune_levels[ch->lv[in->biggest]]);
    else levels_text(rc, ch->lv, name, sizeof name);
    fprintf(f, "  %-24s %7s %9s %9.3f %9s %9.3f %9.3f\n", "uncompressed", "1.000x", "", S / B, "", S / B, S / B);
    fprintf(f, "  chosen: %s -T%d (save %.3f s against %.3f s uncompressed; measuring took %.3f s)%s\n", name,
            ch->threads, ch->save, S / B, seconds,
            !ch->uniform && in->user_policy ? "; with --policy one level for the file" : "");
    if (ch->by_margin)
        fprintf(f, "  stored: coding's best, %.3f s, saves under %.0f%% of storing's %.3f s\n", ch->coded_save,
                100 * in->margin, ch->save);
}
