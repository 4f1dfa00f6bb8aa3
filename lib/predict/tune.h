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
    double code_start; /* seconds a configuration that codes adds at both ends before
                          its first byte (threads' tables and buffers; 0: not costed) */
    double margin;     /* coding is chosen only where it saves at least this share of
                          storing's time (0: wherever it saves any) */
    double speed_margin; /* and only at levels whose one-thread speeds over the file,
                            coding and restoring, are this many times the link's (0: any) */
} tune_input;

typedef struct tune_choice {
    int level, threads;
    int by_margin;                    /* stored: coding's best (coded_save) saved less than
                                         the margin of storing's time */
    double coded_save;                /* the best save that codes (when by_margin) */
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
/* What tune_quick and autotune.c give tune_input's code_start, margin and speed_margin:
 * a coding level's start at both ends (the CLI on 64 KiB of BF16: 0.2 ms more CPU at -1
 * than at -0, task-clock, loaded machine; a few tenths of that to restore); the share of storing's time coding must save to be chosen, about
 * the model's error where the coder is clearly faster than the link (the 50 MB
 * torch.save file at 1 Gbit/s: the model has -1 8.5% ahead of storing; -1 ran 1% behind
 * raw bytes in one run of 3 rounds and 14% ahead in another, on a loaded machine); and
 * how much faster than the link a level must code
 * and restore on one thread to be a candidate where storing is one: below that its
 * pipeline keeps the link busy only with every thread at work on both ends, and the
 * overlap max() counts on is what the ends' own reading and writing and any other work
 * on their cores take first (told 1250 MB/s, a 2-core VM whose link carried 320 MB/s
 * ran -1 -T2, 1.5-2 GB/s a thread, at half raw bytes' speed where the model had it
 * ahead). */
#define TUNE_CODE_START_S 0.0005
#define TUNE_CODE_MARGIN 0.05
#define TUNE_SPEED_MARGIN 2.0
int tune_quick(double file_bytes, double link_mbs, double predicted_ratio, int budget, double chunk, tune_choice *ch);
/* Whether the link outruns -1 at its nominal speed (1.5 GB/s a thread) on the coding
 * threads (tune_coding_threads) by more than half (TUNE_SPEED_MARGIN): then no level is
 * likely to be a candidate, and measuring (0.13-0.25 s on a loaded 2-core machine,
 * against 0.53 s for 662 MB at 1250 MB/s) is not done: tune_quick stores. */
int tune_outruns(double link_mbs, int budget);
/* The threads the speed margin counts a level's speed on, of a budget of threads: half of
 * them (at least one), the other half left to what the ends do beside coding (reading,
 * writing, the network's copies, other work on their cores). On 2 cores one thread: told
 * 1250 MB/s, -1 -T2 on a 2-core VM ran at half raw bytes' speed where the model had it
 * ahead; on 16, eight: -1 then codes at several times a 10 Gbit/s link. */
int tune_coding_threads(int budget);
/* What measuring costs, seconds (autotune.c, 0.1-0.15 s on 123 MB here, most of it the
 * slow level's; a third of that without it). */
double tune_measure_cost(double link_mbs);
/* The choice that minimises the modelled save over every combination of measured levels
 * and every thread count up to the budget: the first chunk's coding, then the slowest of
 * coding (with the sender's reading), the link and the receiver's restoring, which
 * overlap chunk by chunk, then the last chunk's restoring, and a coding level's start
 * (code_start); storing, where coding's best does not save the margin of storing's
 * time. */
void tune_choose(const tune_input *in, tune_choice *out);
/* -v: each thread count's best and uniform configurations with their modelled seconds,
 * writing the file uncompressed, and the choice (measuring took `seconds`). */
void tune_explain(FILE *f, const tune_input *in, const tune_choice *ch, double seconds);

#endif /* CKPZ_TUNE_H */
