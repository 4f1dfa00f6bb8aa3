/* encode.h — coding one planned chunk, and writing coded chunks into a container in
 * plan order: the two halves of the encoder after planning (plan.h). The serial encoder
 * (compress.c) codes chunks on a pipeline as they are planned and writes each as it
 * retires; a split one (split.c) codes a share of the chunks per process, exchanges
 * their results (chunk_result, small and fixed-size) and has every process run the
 * same writer over all of them, writing only its own bytes. Whatever in the output
 * depends on more than one chunk (runs of chunks equal to the base's merged into one
 * copy frame, the index, the content checksum) is decided by the writer from the
 * results alone, so both write the same bytes. */
#ifndef CKPZ_ENCODE_H
#define CKPZ_ENCODE_H

#include "codec.h"
#include "plan.h"

/* What coding a chunk gave, besides its frame. */
typedef struct chunk_result {
    uint64_t out_len;   /* bytes of its frame (none for a copy) */
    uint32_t raw_crc;   /* of the bytes the chunk restores */
    uint32_t base_crc;  /* of the base's raw_len bytes it read (when asked for) */
    uint32_t copy;      /* equal to the base's bytes: no frame of its own */
    uint32_t reserved;
    double abs_bound, prune_thr; /* its lossy plan's values (the entry's, in its index record) */
    quant_stats st;     /* lossy: the chunk's errors */
} chunk_result;

typedef struct cjob {
    plan_chunk d;
    chunk_result r;
    uint8_t *raw;          /* d.raw_len bytes */
    const uint8_t *src;    /* the chunk's bytes where they are not copied into raw (an input
                              in memory: compress.c), else NULL */
    const uint8_t *base;   /* the base's bytes for this chunk (d.has_base), or NULL */
    uint8_t *image;        /* a group's base image (planner_base), malloc'd when first needed */
    uint8_t *out;          /* workmem_out_bound(chunk size) bytes */
    uint8_t *lent;         /* room the sink lent for the frame (writer_room), coded there; or
                              NULL: coded into out */
} cjob;

typedef struct workers_state {
    int level;
    chunk_scratch *scratch; /* one set per thread that codes */
    int defer_base_crc;     /* jobs take the CRC of the base bytes they read */
    ckpz_codec codec;       /* the planes' coder (ckpz_params.codec) */
} workers_state;

/* A pipeline_fn: codes job v (a cjob) with the workers_state arg. */
void encode_job(void *v, int worker, void *arg);

typedef struct base_span {
    uint64_t off, len;
    uint32_t crc;
} base_span;

/* What writing keeps: output position, seek table, the running content checksum. */
typedef struct writer {
    ckpz_ctx *ctx;
    const ckpz_params *p;
    planner *pl;       /* its entries */
    uint64_t size_hint;
    ckpz_write_fn wr;
    void *opaque;
    void *(*lend)(void *opaque, size_t n); /* the sink's (io_sink_lend), or NULL: nothing lent */
    void *lend_opaque;
    int mute;          /* positions advance, nothing is written (another process's bytes) */
    uint64_t pos, original;
    uint32_t content_crc;
    quant_stats *qs;   /* per entry: the errors of its lossy chunks */
    size_t cap_qs;
    ctr_chunkrec *c;
    size_t nc, cap_c;
    uint64_t copy_len; /* a run of chunks equal to the base's, not yet written */
    uint32_t copy_entry, copy_crc;
    int spans_on;      /* deferred base CRC: the base's bytes the chunks read, and their CRCs */
    base_span *spans;
    size_t nspans, cap_spans;
    ctr_base bhead;
    uint8_t bframe[12 + CTR_BASE_FIXED + CTR_MAX_BASE_NAME];
    ent_ctx *ec;  /* codes the entry lists of its frames and index: the caller's (workmem_lists), or
                   * made on first use */
    int own_ec;   /* ec was made here: writer_free frees it */
    int led;      /* the next chunk's entry frame is written (writer_lead) */
} writer;

void writer_init(writer *w, ckpz_ctx *ctx, const ckpz_params *p, planner *pl, uint64_t size_hint, ckpz_write_fn wr,
                 void *opaque, int defer_base_crc);
/* The header and base frame (the base's CRC left to writer_end when deferred). */
ckpz_error writer_start(writer *w, int lossy);
/* Room the sink lends (w->lend) for a frame of up to n bytes, so that a chunk is coded
 * straight into the output, else NULL (muted, a sink that lends nothing, or declines).
 * writer_emit writes the frame from there: the sink takes it without a copy. */
uint8_t *writer_room(writer *w, size_t n);
/* Writes the entry frame of d, a lossless chunk, before it is coded (for a sink that
 * lends its next bytes, CKPZ_LEND_NEXT: the frame coded there follows it); writer_emit
 * then does not. */
ckpz_error writer_lead(writer *w, const plan_chunk *d);
/* Writes a coded chunk (its frame `out`, unused for a copy). */
ckpz_error writer_emit(writer *w, const plan_chunk *d, const chunk_result *r, const uint8_t *out);
/* After the last chunk: the pending copy frame, the index and the trailer. */
ckpz_error writer_end(writer *w);
void writer_free(writer *w);
/* The deferred base CRC (writer_init's defer_base_crc): the base frame again, with it. */
ckpz_error writer_base_frame(writer *w, const uint8_t **frame, size_t *len);

#endif
