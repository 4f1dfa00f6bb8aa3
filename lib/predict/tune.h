/* tune.h — --target-bw's choice (tune.c): from what the candidate levels measured on
 * each role of tensor to the levels and thread count that save fastest through the
 * link. A pure function of its input (no clock, no file, no library call), apart from
 * autotune.c's measuring, so that the choice is tested with made-up measurements
 * (tests/test_tune.c). */
#ifndef CKPZ_TUNE_H
#define CKPZ_TUNE_H

#include <stddef.h>
#include <stdio.h>

#include "ckpz.h"

/* The candidate levels: storing (CKPZ_LEVEL_STORE, 0: the chunks as they are, for a
 * link faster than any coding saves) and 1, 3, 6. Levels 6 and up run at 10-150 MB/s
 * per core here (BENCHMARKS.md): on a link faster than TUNE_SLOW_LEVEL_MAX_MBS they
 * cannot save time, so they are not even measured. Storing is chosen for the whole
 * file or not at all (a policy rule has no store level). */
#define TUNE_NLEVELS 4
extern const int tune_levels[TUNE_NLEVELS]; /* 0, 1, 3, 6 */
#define TUNE_STORE 0 /* the index of storing in tune_levels */
/* What the CLI spends per input byte besides coding, on one thread: reading the input
 * and handing chunks to the writer (-0 -T1 into /dev/null: 123 MB in 0.05 s, copy and
 * CRC included). */
#define TUNE_IO_BPS 4e9
#define TUNE_SLOW_LEVEL 6
#define TUNE_SLOW_LEVEL_MAX_MBS 150.0

/* Roles, in the order their policy rules are tried (exp_avg_sq before exp_avg); the
 * rest (TUNE_W) also takes the bytes outside tensors and the roles too small to
 * measure. */
enum { TUNE_V, TUNE_M, TUNE_G, TUNE_W, TUNE_NROLES };
extern const char *const tune_role_name[TUNE_NROLES];
/* The role of a tensor, by its name. */
int tune_role_of(const char *name);

/* What one role measured: per level whether it was, its ratio and its compress and
 * decompress speed on one thread (bytes/s). */
typedef struct tune_role {
    int measured[TUNE_NLEVELS];
    double ratio[TUNE_NLEVELS], sc[TUNE_NLEVELS], sd[TUNE_NLEVELS];
    double bytes;  /* of the file this role stands for; 0: not costed */
    /* how it was measured, for -v: */
    ckpz_dtype dt;
    size_t sample; /* bytes measured (0: costed as another role) */
    int delta;     /* against the base's chunks at the same places */
} tune_role;

typedef struct tune_input {
    tune_role role[TUNE_NROLES];
    double file_bytes; /* S */
    double link;       /* B, bytes/s */
    int budget;        /* most threads, >= 1 */
    int biggest;       /* the role of most tensor bytes before small ones joined the rest */
    int user_policy;   /* the user's lossy rules hold: one level for the file */
    double chunk;      /* bytes of a chunk: the first is coded before the link starts,
                          the last restored after it ends (0: not costed) */
    double io_bps;     /* the sender's reading and handing on, bytes/s on one thread
                          (0: not costed) */
} tune_input;

typedef struct tune_choice {
    int level, threads;
    int lv[TUNE_NROLES];              /* per role, an index into tune_levels */
    int uniform;                      /* one level for every role that has bytes */
    double save;                      /* modelled seconds to save the file */
    char policy[TUNE_NROLES * 64];    /* lossless rules, one per role; "" when none is needed */
} tune_choice;

/* Whether measuring would cost more than it can win: 1 when the save is short (under
 * half a second uncompressed) or compressing can gain little (the predicted ratio's gain
 * on the link under twice what measuring costs), with the level and threads of the
 * model's choice on nominal speeds (TUNE_NOMINAL_*) and the predicted ratio (<= 0:
 * unknown, taken as 1.1) in ch (its save: the model's on those figures); 0 when
 * measuring is worth it. */
/* Transfers shorter than this (file size / link speed, seconds) are never measured for. */
#define TUNE_QUICK_SAVE_S 0.5
int tune_quick(double file_bytes, double link_mbs, double predicted_ratio, int budget, double chunk, tune_choice *ch);
/* What measuring costs, seconds (autotune.c, 0.1-0.15 s on 123 MB here, most of it the
 * slow level's; a third of that without it). */
double tune_measure_cost(double link_mbs);
/* The choice that minimises the modelled save over every combination of measured levels
 * and every thread count up to the budget: the first chunk's coding, then the slowest of
 * coding (with the sender's reading), the link and the receiver's restoring, which
 * overlap chunk by chunk, then the last chunk's restoring. */
void tune_choose(const tune_input *in, tune_choice *out);
/* -v: each thread count's best and uniform configurations with their modelled seconds,
 * writing the file uncompressed, and the choice (measuring took `seconds`). */
void tune_explain(FILE *f, const tune_input *in, const tune_choice *ch, double seconds);

#endif /* CKPZ_TUNE_H */
