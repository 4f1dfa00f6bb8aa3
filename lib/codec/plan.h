/* plan.h — the encoder's decisions, apart from its coding: which input bytes make each
 * chunk, which entries (tensors, runs of opaque bytes) it starts, which small entries
 * share it (packed groups), what it is coded as and against, and each entry's lossy
 * plan. compress.c streams: it asks for the next chunk with its bytes and codes it at
 * once. A compression split over processes (split.c, libckpz_mpi) asks for every chunk
 * without the bytes (`skip`), hands chunks out by their input ranges and has each coded
 * where its bytes are read. Both take the decisions from planner_next alone, so a split
 * compression writes the bytes the serial one writes.
 *
 * Only a lossy entry's bound relative to its values (rel, pointwise-rel against a base)
 * and its pruning threshold depend on the input's values: planning without the bytes
 * leaves them to planner_values, called by whoever reads the entry. */
#ifndef CKPZ_PLAN_H
#define CKPZ_PLAN_H

#include "chunker.h"
#include "container/container.h"
#include "formats/match.h"
#include "transforms/policy.h"
#include "transforms/quant.h"

enum { GROUP_SMALL = 1, GROUP_LEADS = 2 }; /* small entries alone; leading a larger owner */

/* One chunk as decided. */
typedef struct plan_chunk {
    int new_entry;        /* entry frames precede this chunk: those of first_entry..entry */
    uint32_t first_entry;
    int group;            /* the chunk holds a group (GROUP_*): entries first_entry..entry-1 are packed */
    uint32_t entry;
    ckpz_dtype dtype;     /* what it is coded as */
    int uniform;          /* a GROUP_SMALL of PACK_MAX bytes or more, of whole tensors of `dtype` only */
    uint64_t in_off;      /* its bytes are the input's [in_off, in_off + raw_len) */
    size_t raw_len;       /* 0: an empty tensor's entry, no chunk */
    int has_base;         /* coded against the base's bytes at base_off, or (gathered) its group's */
    uint64_t base_off;
    int gathered;         /* a group coded against its base image (base_group_image; feature 4) */
    ckpz_dtype entry_dtype; /* the owner's: its float class is the diff predictor's (doc/format.md) */
    int lossy;            /* coded with `plan` */
    quant_plan plan;      /* without the values planner_values adds when planned with skip */
    int values_base;      /* planner_values: the entry's base, at values_base_off, or none */
    uint64_t values_base_off;
    uint64_t elem0;       /* first element of the chunk in its tensor */
    int text;             /* a text header's bytes alone (fmt_segment.text) */
} plan_chunk;

/* What one planner leaves to the next (a context keeps it: workmem.h): its entry table,
 * read-ahead buffer and segment list's memory, as allocated. Memory a call allocates afresh costs a page fault
 * each 4 KiB first written (handed back between calls by malloc_trim, as bench/peers
 * does): compressing 4,800 small tensors (an 800 KB table, a 448 KB header read ahead, ~500 KB of segments and names)
 * took ~490 faults a call. planner_init takes them (keep may be NULL: none). */
typedef struct plan_keep {
    ctr_entry *e;
    size_t cap_e;
    uint8_t *ahead;
    size_t ahead_cap;
    fmt_spare segs; /* the segment list's (formats.h) */
} plan_keep;

typedef struct planner {
    ckpz_ctx *ctx;
    const ckpz_params *p;
    chunker ch;
    fmt_list segs;
    fmt_request rq;
    policy *pol;
    base_index bidx;
    int base_named;       /* some tensor matches the base by name: 1, none: 0, not known yet: -1 */
    int gbase;            /* groups may be coded against the base (a file with a base: feature 4) */
    size_t named_scan;    /* segments looked at for it */
    int skip;             /* planning without the bytes */
    ctr_entry *e;         /* the entries so far (names and shapes belong to segs) */
    size_t ne, cap_e;
    uint64_t tensor_bytes, tensors;
    uint64_t table_bytes; /* see add_entry (plan.c) */
    uint64_t consumed;    /* input bytes handed out in chunks */
    const uint8_t *entry_base; /* the base's bytes for the current entry's next chunk */
    uint64_t entry_avail;      /* bytes of them the base has */
    int entry_text;            /* the current entry is a text header (fmt_segment.text) */
    quant_plan plan;           /* the current entry's lossy coding (mode 0: lossless) */
    const uint8_t *values_base; /* the base planner_values takes for it */
    uint8_t *whole;            /* a lossy entry read ahead to plan it (whole[0..whole_len)) */
    uint64_t whole_len, whole_pos;
} planner;

/* Describes the input read through rd (size_hint bytes, or CKPZ_SIZE_UNKNOWN) with the
 * resolved params p (which must outlive the planner). skip_fn, when not NULL, plans
 * without the chunks' bytes: it passes over n bytes of the input instead of reading
 * them (returning how many it passed: fewer only at the end of the input, -1 on error);
 * the formats' own reads still go through rd. On failure the planner is left to
 * planner_free. */
ckpz_error planner_init(planner *pl, ckpz_ctx *ctx, const ckpz_params *p, ckpz_read_fn rd, void *rd_opaque,
                        uint64_t size_hint, ptrdiff_t (*skip_fn)(void *, size_t), plan_keep *keep);
/* The next chunk into *c (its bytes into buf, chunk_size bytes, unless planning with
 * skip: then buf may be NULL). *end is set at the end of the input. */
ckpz_error planner_next(planner *pl, plan_chunk *c, uint8_t *buf, int *end);
/* After the last chunk: checks what could only be checked at the end. */
ckpz_error planner_end(planner *pl);
/* keep: where the entry table and read-ahead buffer go for the next planner (NULL: freed) */
void planner_free(planner *pl, plan_keep *keep);

/* Whether a lossy plan needs the whole entry's values (planner_values). */
int planner_needs_values(const quant_plan *plan);
/* Completes the plan of an entry of dtype dt from its len bytes `all`, base b (NULL:
 * none) holding len bytes as well. */
void planner_values(quant_plan *plan, ckpz_dtype dt, const uint8_t *all, uint64_t len, const uint8_t *b);

/* The base's bytes chunk c (as planned by pl) is coded against, or NULL: for a group's
 * chunk, its base image, gathered into *image (chunk_size bytes, malloc'd by the first
 * call that needs it; the caller frees it). */
ckpz_error planner_base(const planner *pl, const plan_chunk *c, uint8_t **image, const uint8_t **base);

#endif
