/* archive.h — the archive reader's inside (archive.c: random access through the index),
 * shared with the whole-file restore of a .ckpz held in memory (archive_restore.c). */
#ifndef CKPZ_ARCHIVE_H
#define CKPZ_ARCHIVE_H

#include "ckpz.h"
#include "container/container.h"
#include "entropy/entropy.h"

/* An open archive (ckpz_archive_open_io in archive.c): the index read and checked, the
 * chunks' original offsets, the caller's base. */
struct ckpz_archive {
    ckpz_pread_fn pr;
    void *opaque;
    ckpz_archive_info info;
    size_t mem_limit;
    ctr_entry *e;
    size_t ne;
    ctr_chunkrec *c;
    size_t nc;
    uint64_t *compressed; /* per entry */
    uint64_t data_start;  /* offset of the first entry frame */
    uint64_t index_offset; /* where the frames end */
    int based;            /* a delta file */
    unsigned flags;       /* CTR_FILE_* */
    ctr_base base;
    const uint8_t *base_bytes; /* the caller's base, checked; NULL when not given */
    uint64_t *chunk_off;  /* per chunk, its offset in the original; [nc] = original size */
    int threads;          /* from the params given at open, resolved */
    ckpz_progress_fn progress;
    void *progress_opaque;
    int kept;             /* e lies in the caller's workmem (archive_open): not freed here */
    struct pkl_storages *optim_st;    /* ckpz_archive_read_optim: the pickle's storages */
    const struct fmt_optim **optim;   /* and per entry its param group's, or NULL */
};

struct workmem;
/* ckpz_archive_open_io with the caller's working memory wm, taken from the context (NULL:
 * its own): the index's lists decoded with its coder, and its entries in wm->entries where
 * they fit (a->kept), so that they stay wm's: wm must outlive the archive. */
ckpz_error archive_open(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, struct workmem *wm,
                        ckpz_archive **out);

/* The base's bytes for chunk k of entry `owner` (NULL when the entry has no base or the
 * base ends first); for the first chunk of a group's owner in a file with feature 4, its
 * group's base image, gathered into *image (malloc'd: the caller frees it once done with
 * the chunk; NULL when none), or NULL when a range runs past the base's end, so that a
 * chunk with a predictor is refused. CKPZ_ERR_BASE when the caller gave no base. */
ckpz_error chunk_base(ckpz_ctx *msg, const ckpz_archive *a, uint64_t k, uint32_t owner, const uint8_t **base,
                      uint8_t **image);

/* Checks chunk k's frame (read into `frame`) against the seek table and decodes it into
 * out (stream: with streaming stores, chunk_decode_to); *result is out, or the base's
 * bytes for a copy frame. Messages go to msg, naming the chunk and its tensor. */
ckpz_error decode_indexed(ckpz_ctx *msg, const ckpz_archive *a, uint64_t k, uint32_t entry_no, const uint8_t *frame,
                          const uint8_t *base, ent_ctx *ec, uint8_t *planes, uint8_t *out, int stream,
                          const uint8_t **result, uint32_t *raw_crc);

/* Checks every frame against the index (entry frames included), then decodes each chunk
 * straight from src into its place in dst (exactly the original size) on
 * params->threads threads, and checks the content checksum. No copy of the input or the
 * output is made. */
ckpz_error archive_restore_memory(ckpz_ctx *ctx, const ckpz_params *params, const uint8_t *src, size_t src_size,
                                  uint8_t *dst, size_t dst_size);

#endif
