/* container.h — last stage: the on-disk layout of a .ckpz file (doc/format.md).
 *
 * Everything that turns container structures into bytes or back lives here, so the
 * format has one implementation of each field. Readers validate as they parse: magic,
 * checksums, reserved fields (must be zero), and every length against the bytes that
 * remain and the caller's memory limit, before anything is allocated or decoded.
 */
#ifndef CKPZ_CONTAINER_H
#define CKPZ_CONTAINER_H

#include <stddef.h>
#include <stdint.h>

#include "common/ctx.h"
#include "entropy/entropy.h"

#define CTR_VERSION 1       /* stand-alone files */
#define CTR_VERSION_DELTA 2 /* files coded against a base (a base frame follows the header) */
#define CTR_VERSION_LOSSY 3 /* files with lossy entries (header flag 2; flag 1 as in version 2) */
#define CTR_VERSION_ESC 4   /* files with a base (flag 1; flag 2 as in version 3): chunk transform 4 */
#define CTR_VERSION_FEAT 5  /* the flags are feature bits (CTR_FEAT_*): what ckpz writes */
/* Version 5 feature bits (header flags). A reader refuses bits it does not know. */
#define CTR_FEAT_BASE 1u   /* a base frame, based entries, predictors, escape chunks */
#define CTR_FEAT_LOSSY 2u  /* lossy entries, quant chunks, checksums of restored content */
#define CTR_FEAT_PACKED 4u /* packed entries: small entries sharing their owner's one chunk */
#define CTR_FEAT_CODED 8u  /* coded entry lists: the index's records and the entry frames (entlist.c) */
#define CTR_FEAT_GBASE 16u /* groups coded against the base: packed entries and owners with base offsets */
#define CTR_FEAT_KNOWN (CTR_FEAT_BASE | CTR_FEAT_LOSSY | CTR_FEAT_PACKED | CTR_FEAT_CODED | CTR_FEAT_GBASE)
#define CTR_HEADER_SIZE 32
#define CTR_FRAME_SIZE 32   /* chunk frame header */
#define CTR_PLANE_DESC 8    /* per-plane descriptor at the start of a chunk payload */
#define CTR_TRAILER_SIZE 40
#define CTR_CHUNK_REC 16    /* seek-table record */
#define CTR_MAX_NDIM 64
#define CTR_MAX_NAME 65535
/* Largest entry record (index form with a base offset and lossy fields). */
#define CTR_ENTRY_MAX (48 + CTR_LOSSY_STREAM + CTR_LOSSY_INDEX + CTR_MAX_NAME + 8 * CTR_MAX_NDIM)
#define CTR_LOSSY_STREAM 32 /* lossy fields of an entry record, both forms */
#define CTR_LOSSY_INDEX 72  /* error statistics, index form only */

extern const uint8_t ctr_magic[8];
/* Four-byte tags that start each section, read as little-endian u32. */
#define CTR_TAG_BASE 0x53424b43u  /* "CKBS" */
#define CTR_TAG_ENTRY 0x4e454b43u /* "CKEN" */
#define CTR_TAG_LIST 0x4c454b43u  /* "CKEL": entry list frame (feature CTR_FEAT_CODED) */
#define CTR_TAG_CHUNK 0x48434b43u /* "CKCH" */
#define CTR_TAG_INDEX 0x58494b43u /* "CKIX" */
#define CTR_TAG_TRAILER 0x52544b43u /* "CKTR" */

typedef struct ctr_header {
    uint32_t chunk_size;
    uint8_t format; /* ckpz_input_format of the original */
    uint8_t based;  /* a base frame follows (versions 2 and 3) */
    uint8_t lossy;  /* entries may be lossy: the content checksum is the restored content's (versions 3-5) */
    uint8_t packed; /* entries may be packed (version 5) */
    uint16_t version; /* set by ctr_header_read; the writer writes version 5 */
    uint8_t coded;    /* entry lists are coded (version 5, CTR_FEAT_CODED) */
    uint8_t gbase;    /* groups may be coded against the base (version 5, CTR_FEAT_GBASE) */
} ctr_header;

/* Base frame: what a delta file needs to be restored. */
#define CTR_BASE_FIXED 20
#define CTR_MAX_BASE_NAME 4096
typedef struct ctr_base {
    uint64_t size;     /* bytes of the base's original */
    uint32_t crc;      /* CRC-32C of the base's original */
    uint32_t depth;    /* delta files from this one down to a stand-alone file: 1 + the base's */
    uint16_t name_len;
    char name[CTR_MAX_BASE_NAME + 1]; /* the base's file name when this file was written: a hint */
} ctr_base;

typedef struct ctr_chunk {
    uint32_t entry;       /* index of the entry the chunk belongs to */
    uint32_t raw_len;     /* original bytes, 1..chunk_size */
    uint32_t payload_len; /* bytes after the frame header */
    uint8_t xf, esize, nplanes;
    uint8_t pred;         /* predictor against the base (transforms/predict.h); 0 = none */
    uint32_t raw_crc;     /* CRC-32C of the original bytes */
    uint32_t payload_crc; /* CRC-32C of the payload */
} ctr_chunk;

#define CTR_ENTRY_BASED 1 /* entry flag: coded against the base's bytes at base_offset */
#define CTR_ENTRY_LOSSY 2 /* entry flag: restored within a stated error (lossy fields follow) */
#define CTR_ENTRY_PACKED 4 /* entry flag: its bytes lead the next entry's one chunk (a group) */
/* File properties that decide which entry flags are allowed. */
#define CTR_FILE_BASED 1
#define CTR_FILE_LOSSY 2
#define CTR_FILE_PACKED 4
#define CTR_FILE_CODED 8 /* entry frames are lists (CKEL), the index's records a coded list */
#define CTR_FILE_GBASE 16 /* packed entries and owners may be coded against the base (a group image) */
/* The file properties a header allows. */

/* What a lossy entry was coded with, and the errors it got (doc/format.md). */
typedef struct ctr_lossy {
    uint8_t mode, bits, sym, per_row; /* transforms/quant.h: quant_mode and quant_spec fields */
    uint32_t group;
    double bound;     /* as asked: E, or R for rel modes */
    double abs_bound; /* the absolute bound applied (abs, rel); 0 otherwise */
    double prune_thr; /* magnitudes below it were pruned; 0 = none */
    /* index form only */
    uint64_t n, exceptions, changed, frozen;
    double sum_abs, sum_sq, max_abs, vmin, vmax;
} ctr_lossy;
typedef struct ctr_entry {
    uint8_t dtype;
    uint8_t flags;
    uint16_t name_len;
    uint32_t ndim;
    char *name;       /* NUL-terminated; a read entry's lies in its shape's block */
    uint64_t *shape;  /* owned: a read entry's holds its name after the dimensions */
    uint64_t offset;  /* in the original */
    uint64_t base_offset; /* of the matching bytes in the base's original (CTR_ENTRY_BASED) */
    uint64_t length;  /* index form only */
    uint64_t first_chunk, nchunks; /* index form only */
    ctr_lossy lossy;  /* CTR_ENTRY_LOSSY */
} ctr_entry;

typedef struct ctr_chunkrec {
    uint64_t frame_offset; /* of the frame header in the .ckpz file */
    uint32_t raw_len;
    uint32_t frame_len;    /* header + payload */
} ctr_chunkrec;

typedef struct ctr_trailer {
    uint64_t index_offset, index_len, original_size;
    uint32_t content_crc, index_crc;
} ctr_trailer;

void ctr_header_write(uint8_t *out, const ctr_header *h);
/* The file properties (CTR_FILE_*) a header allows: which entry flags may be set. */
unsigned ctr_file_flags(const ctr_header *h);
ckpz_error ctr_header_read(ckpz_ctx *ctx, const uint8_t *in, ctr_header *h);

/* Base frame: tag, body length, body, CRC. */
size_t ctr_base_frame_size(const ctr_base *b);
void ctr_base_frame_write(uint8_t *out, const ctr_base *b);
/* Parses a whole base frame from in[0..avail); *used = its length. CKPZ_ERR_TRUNCATED
 * when avail is too short to hold it. */
ckpz_error ctr_base_frame_read(ckpz_ctx *ctx, const uint8_t *in, size_t avail, ctr_base *b, size_t *used);

void ctr_chunk_write(uint8_t *out, const ctr_chunk *c);
/* `where` names the chunk in messages ("chunk 7 (tensor 'w')"). Checks tag, header CRC,
 * 0 < raw_len <= chunk_size, plane count and payload_len <= max_payload (the caller's
 * bound for the coders in use); a copy frame (PRED_COPY) has no planes and no payload
 * and may cover more than chunk_size bytes. Whether the chunk's entry has a base (a
 * predictor needs one) is the caller's to check. */
ckpz_error ctr_chunk_read(ckpz_ctx *ctx, const uint8_t *in, uint32_t chunk_size, size_t max_payload, const char *where,
                          ctr_chunk *c);

/* Entry record: the stream form (in an entry frame) or the index form (with length
 * and chunk range). */
size_t ctr_entry_size(const ctr_entry *e, int index_form);
void ctr_entry_write(uint8_t *out, const ctr_entry *e, int index_form);
/* Parses one record from p[0..avail); allocates name and shape; *used = bytes read.
 * file_flags: CTR_FILE_BASED / CTR_FILE_LOSSY, the entry flags the file allows. */
ckpz_error ctr_entry_read(ckpz_ctx *ctx, const uint8_t *p, size_t avail, int index_form, unsigned file_flags,
                          ctr_entry *e, size_t *used);
/* Room for a read entry's ndim dimensions and name_len + 1 bytes of name, one block (one
 * allocation an entry: 4,800 entries read twice, as the index and as entry frames, spent a
 * fifth of a restore in malloc and free); 0, or -1 out of memory. */
int ctr_entry_alloc(ctr_entry *e);
void ctr_entry_clear(ctr_entry *e);
/* Pieces of a record shared by both codings of entries (this file and entlist.c): the
 * lossy fields (returns bytes written; reading refuses an unknown mode), and the checks
 * of dtype and flags against the file's flags. */
size_t ctr_lossy_write(uint8_t *p, const ctr_lossy *l, int index_form);
ckpz_error ctr_lossy_read(ckpz_ctx *ctx, const uint8_t *q, int index_form, ctr_lossy *l);
ckpz_error ctr_entry_check_kind(ckpz_ctx *ctx, const ctr_entry *e, unsigned file_flags);

/* Entry frame: tag, body length, body (stream form), CRC. Returns bytes written. */
size_t ctr_entry_frame_size(const ctr_entry *e);
void ctr_entry_frame_write(uint8_t *out, const ctr_entry *e);
/* Reading one, in two steps, for the sequential decoder and the random-access layout
 * check alike (one set of checks, one wording: "entry frame NO at byte AT: ..."). From
 * the frame's first 8 bytes: its tag and body length (16..CTR_ENTRY_MAX, and the whole
 * frame, 12 + *blen bytes, within `room`). Then the whole frame in[0..12 + blen): its
 * checksum, and the record, which must fill the body (on failure e holds nothing). */
ckpz_error ctr_entry_frame_len(ckpz_ctx *ctx, const uint8_t *in, uint64_t room, size_t no, uint64_t at, uint32_t *blen);
/* The check under both kinds of entry frame: tag at in, a body length *blen in [lo, hi]
 * whose frame (12 + *blen bytes) fits in room; errors name frame no at byte at. */
ckpz_error ctr_frame_len(ckpz_ctx *ctx, const uint8_t *in, uint64_t room, uint32_t tag, uint32_t lo, uint64_t hi,
                         size_t no, uint64_t at, uint32_t *blen);
ckpz_error ctr_entry_frame_read(ckpz_ctx *ctx, const uint8_t *in, uint32_t blen, unsigned file_flags, size_t no,
                                uint64_t at, ctr_entry *e);
/* 1 when the stream-form fields of a and b agree (an entry frame and its index record). */
int ctr_entry_same(const ctr_entry *a, const ctr_entry *b);

/* Index section: tag, counts, entries (index form), seek table. */
size_t ctr_index_size(const ctr_entry *e, size_t ne, size_t nc);
void ctr_index_write(uint8_t *out, const ctr_entry *e, size_t ne, const ctr_chunkrec *c, size_t nc);
/* Parses and cross-checks an index (its CRC already verified by the caller), in the
 * form the file's flags say (entlist.c: plain records, or with CTR_FILE_CODED a list,
 * decoded with ec as ctr_list_read's). */
ckpz_error ctr_index_read(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *p, size_t len, uint64_t index_offset,
                          uint64_t original_size, size_t mem_limit, unsigned file_flags, ctr_entry **entries,
                          size_t *ne, ctr_chunkrec **chunks, size_t *nc);
/* Memory kept from one read of a coded index to the next (a context's: workmem.h): the
 * entries, and one block for all their names and shapes. A whole-file restore of 4,800
 * small tensors spent a quarter of its time allocating 4,800 entries and faulting in
 * their fresh pages, every call. Entries read into it belong to it (never
 * ctr_entries_free'd); the next read reuses it. Their lossy fields are set only where
 * their flags have CTR_ENTRY_LOSSY. Up to CTR_KEEP_MAX bytes; a larger index
 * is read as ctr_index_read does. */
typedef struct ctr_keep {
    ctr_entry *e;
    size_t e_cap;
    uint8_t *blk;
    size_t blk_cap;
} ctr_keep;
#define CTR_KEEP_MAX ((size_t)16 << 20)
void ctr_keep_free(ctr_keep *k); /* accepts NULL */
/* ctr_index_read, the entries of a coded index in keep where they fit (*kept = 1: not to
 * be freed), else allocated (*kept = 0). keep NULL: as ctr_index_read. */
ckpz_error ctr_index_read_kept(ckpz_ctx *ctx, ent_ctx *ec, ctr_keep *keep, const uint8_t *p, size_t len,
                               uint64_t index_offset, uint64_t original_size, size_t mem_limit, unsigned file_flags,
                               ctr_entry **entries, size_t *ne, int *kept, ctr_chunkrec **chunks, size_t *nc);

/* ---- coded entry lists (entlist.c; doc/format.md "Coded entry lists") ---- */
/* A list of entries coded in columns: index form (lengths and chunk counts; offsets and
 * first chunks implied, counted from 0) or stream form (its count and first offset lead).
 * Writes a malloc'd buffer to *out. */
ckpz_error ctr_list_write(ckpz_ctx *ctx, const ctr_entry *e, size_t n, int index_form, uint8_t **out, size_t *len);
/* Parses a list from p[0..len): index form: n_index entries; stream form: its own count
 * (at least 1). *used = the bytes it took. Allocates *e (n entries, each with name and
 * shape); every count and length is checked against the bytes and mem_limit first. ec:
 * the entropy context to decode the columns with (a caller reading many lists keeps one:
 * making a zstd context cost 38 us on a 2-core VM, more than decoding a small list), or NULL
 * for one of its own. */
ckpz_error ctr_list_read(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *p, size_t len, int index_form, unsigned file_flags,
                         size_t mem_limit, uint64_t n_index, ctr_entry **e, size_t *n, size_t *used);
void ctr_entries_free(ctr_entry *e, size_t n);
/* The whole index of a file with CTR_FILE_CODED: as ctr_index_write, coded list. ec: the
 * entropy context to code with (a writer keeps one for all its frames), or NULL. */
ckpz_error ctr_index_encode(ckpz_ctx *ctx, ent_ctx *ec, const ctr_entry *e, size_t ne, const ctr_chunkrec *c, size_t nc,
                            uint8_t **out, size_t *len);
/* Entry frame that names entries e[0..n) (all but the last own no chunk): a CKEL frame. */
ckpz_error ctr_list_frame_write(ckpz_ctx *ctx, ent_ctx *ec, const ctr_entry *e, size_t n, uint8_t **out, size_t *len);
/* Entry frames of either kind, as the file's flags say: CKEN (one entry) without
 * CTR_FILE_CODED, CKEL with it; the same two steps as ctr_entry_frame_len/_read. A CKEL
 * body is at most mem_limit bytes. *e gets *n entries (malloc'd; ctr_entries_free); ec
 * as ctr_list_read's. */
ckpz_error ctr_eframe_len(ckpz_ctx *ctx, const uint8_t *in, uint64_t room, unsigned file_flags, size_t mem_limit,
                          size_t no, uint64_t at, uint32_t *blen);
ckpz_error ctr_eframe_read(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *in, uint32_t blen, unsigned file_flags,
                           size_t mem_limit, size_t no, uint64_t at, ctr_entry **e, size_t *n);
/* ctr_eframe_read's checks, the frame's entries compared with idx[0..room) as they are
 * read instead of allocated (a reader that has the index: 4,800 small tensors' entries
 * allocated, compared and freed took a quarter of a restore): *n gets their count, *same
 * whether each equals its idx entry (ctr_entry_same) and *n <= room. */
ckpz_error ctr_eframe_same(ckpz_ctx *ctx, ent_ctx *ec, const uint8_t *in, uint32_t blen, unsigned file_flags,
                           size_t mem_limit, size_t no, uint64_t at, const ctr_entry *idx, size_t room, size_t *n,
                           int *same);

/* The two halves of ctr_index_read (format.c): a plain index's records, and the checks
 * both forms share, from the seek table at p + pos on: it takes e[0..e_n) (freed on
 * failure unless kept). */
ckpz_error ctr_index_read_plain(ckpz_ctx *ctx, const uint8_t *p, size_t len, uint64_t index_offset,
                                uint64_t original_size, size_t mem_limit, unsigned file_flags, ctr_entry **entries,
                                size_t *ne, ctr_chunkrec **chunks, size_t *nc);
ckpz_error ctr_index_check(ckpz_ctx *ctx, const uint8_t *p, size_t len, size_t pos, uint64_t index_offset,
                           uint64_t original_size, unsigned file_flags, ctr_entry *e, size_t e_n, int kept,
                           uint64_t c_n, ctr_entry **entries, size_t *ne, ctr_chunkrec **chunks, size_t *nc);

void ctr_trailer_write(uint8_t *out, const ctr_trailer *t);
ckpz_error ctr_trailer_read(ckpz_ctx *ctx, const uint8_t *in, uint64_t file_size, ctr_trailer *t);

#endif
