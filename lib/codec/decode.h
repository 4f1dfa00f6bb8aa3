/* decode.h — reading a .ckpz stream front to back and decoding its chunks: the decoder's
 * two halves, mirroring the encoder's (encode.h). The reader takes the stream's frames in
 * order (the header and a delta file's base frame, entry frames, chunk frames), checks
 * each against what came before, and fills a job per chunk; a job verifies its chunk's
 * checksum and decodes it (decode_job over codec.h); the reader then writes the decoded
 * chunks in order and at the end checks the index and trailer against what the stream
 * held. The sequential decoder (ckpz_decompress_io, api/decompress.c) runs the jobs on a
 * pipeline as the reader fills them, so it works from a pipe. */
#ifndef CKPZ_DECODE_H
#define CKPZ_DECODE_H

#include "codec.h"

typedef struct djob {
    ctr_chunk h;
    uint64_t chunk_no;
    uint32_t entry;
    size_t group;       /* first entry of the owner's group (== entry when none is packed) */
    ckpz_dtype dtype;
    uint8_t *payload, *raw;
    uint8_t *lent;       /* room the sink lent for this chunk's bytes (decoded there, not
                            into raw), or NULL */
    const uint8_t *base; /* the base's bytes for this chunk, or NULL */
    uint8_t *image;      /* chunk_size bytes, malloc'd when first needed: a group's base image */
    const uint8_t *out;  /* the restored bytes: lent or raw, the payload's of a stored chunk
                            decoded without lent room, or the base's for a copy frame */
    ckpz_error err;
    char why[160];
} djob;

/* A pipeline_fn: decodes job v (a djob), or checks its copy frame against the base, with
 * the chunk_scratch arg; the outcome in its err and why. */
void decode_job(void *v, int worker, void *arg);

/* What reading keeps: input position, the entries and chunks seen, the running content
 * checksum. */
typedef struct reader {
    ckpz_ctx *ctx;
    const ckpz_params *p;
    ckpz_read_fn rd;
    void *rd_opaque;
    ckpz_write_fn wr;
    void *wr_opaque;
    uint64_t in_pos;      /* bytes of the .ckpz consumed */
    uint64_t original;    /* bytes restored */
    uint32_t content_crc;
    ctr_entry *e;         /* entries seen in the stream */
    size_t ne, cap_e;
    ctr_chunkrec *c;      /* chunks seen, to check the seek table */
    size_t nc, cap_c;
    unsigned flags;       /* CTR_FILE_* */
    size_t group;         /* first entry of the current group: packed entries and their owner */
    ctr_header h;         /* the file's header */
    ctr_base b;           /* its base frame (a delta file) */
    int base_missing;     /* a delta file restored without its base: fine until an entry needs it */
    const ctr_entry *cur; /* the entry whose chunks follow */
    uint64_t cur_pos;     /* bytes of it restored so far */
    uint64_t chunk_no;    /* chunks read */
    size_t max_payload;   /* the largest chunk payload the header's chunk size allows */
    ent_ctx *lists;       /* what entry lists and the index are decoded with (NULL: their own) */
} reader;

/* The reader of a stream of rd, writing the restored bytes to wr (NULL: checked only),
 * with p's limits, base and progress hook. */
void reader_init(reader *d, ckpz_ctx *ctx, const ckpz_params *p, ckpz_read_fn rd, void *rd_opaque, ckpz_write_fn wr,
                 void *wr_opaque);
void reader_free(reader *d);
/* The file header, and a delta file's base frame (checked against p's base); the caller
 * then sets max_payload from the header's chunk size. */
ckpz_error reader_start(reader *d, const ckpz_params *p);
/* Reads exactly n bytes; a short read is a truncated stream ("ends inside what"). */
ckpz_error reader_exact(reader *d, void *buf, size_t n, const char *what);
/* An entry frame, a chunk frame into j (its payload into j->payload): fb holds the frame's
 * tag, already read (a chunk frame's header is read into fb, CTR_FRAME_SIZE bytes). */
ckpz_error reader_entry(reader *d, const uint8_t *fb);
ckpz_error reader_chunk(reader *d, uint8_t *fb, djob *j);
/* A decoded job, in stream order: its error with the chunk named, or its bytes written. */
ckpz_error reader_emit(reader *d, djob *j);
/* After the index tag: the index and trailer read and checked against the stream. */
ckpz_error reader_end(reader *d);

#endif
