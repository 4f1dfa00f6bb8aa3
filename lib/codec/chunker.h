/* chunker.h — second stage: cut the input into independent chunks.
 *
 * Walks the segment list from formats/ over the input stream and yields, in file
 * order, chunks of at most chunk_size bytes that never straddle two entries (one per
 * tensor, and one per non-empty run of opaque bytes), so each chunk has one dtype and
 * can be coded alone. The bytes read to recognise the format (chunker_describe) are
 * replayed first; nothing is read twice. When the list ends in a resume segment (zip
 * members), the chunker reads ahead and lets the format reader describe the next
 * stretch. A segment the input ends inside is cut short (its entry records the length
 * actually present); segments past the end are dropped.
 */
#ifndef CKPZ_CHUNKER_H
#define CKPZ_CHUNKER_H

#include "formats/formats.h"

typedef struct chunker {
    ckpz_read_fn rd;
    void *rd_opaque;
    uint8_t *ahead;       /* bytes read but not handed out yet: [ahead_pos, ahead_len) */
    size_t ahead_len, ahead_pos, ahead_cap;
    fmt_list *segs;
    size_t seg;           /* current segment */
    uint64_t seg_left;    /* bytes left in it (FMT_LEN_OPEN: until EOF) */
    int in_seg, eof;
    size_t chunk_size;
    uint64_t consumed;    /* input bytes handed out so far */
    /* Optional (plan.h): passes over n bytes of the input instead of reading them, for
     * chunks asked for without a buffer; returns the bytes passed, -1 on error. */
    ptrdiff_t (*skip)(void *rd_opaque, size_t n);
} chunker;

typedef enum { CH_END = 0, CH_DATA = 1, CH_ERROR = -1, CH_NOMEM = -2 } ch_event;

void chunker_init(chunker *ch, fmt_list *segs, size_t chunk_size, ckpz_read_fn rd, void *rd_opaque);
/* Describes the input into *segs (the format driver over the chunker's read-ahead:
 * those bytes are replayed as chunks, never read twice). FMT_DONE, or the driver's
 * error (formats.h), why[] saying what it was. */
fmt_status chunker_describe(chunker *ch, const fmt_request *rq, uint64_t size_hint, char *why, size_t whylen);
void chunker_free(chunker *ch);
/* CH_DATA: buf (chunk_size bytes) holds the next *len bytes (buf NULL: they are passed
 * over through ch->skip, which must be set). If they begin a new entry,
 * *seg is its segment (else NULL); *len is 0 only for an empty tensor's entry.
 * CH_ERROR: the read callback failed. CH_NOMEM: out of memory. */
ch_event chunker_next(chunker *ch, uint8_t *buf, size_t *len, const fmt_segment **seg);

/* Between two segments, what follows, so that a caller can take a whole small segment
 * into the buffer it is filling (packed entries): *seg is the next segment (a resume
 * point is described first), or NULL in the middle of a segment or at the end of the
 * list. The pointer is valid until the next call. CH_DATA, or an error as above. */
ch_event chunker_peek(chunker *ch, const fmt_segment **seg);
/* Reads the segment chunker_peek returned (its length known), at most max bytes of it,
 * into buf. *len is what was read: less than its length when the input ends inside it
 * (0: it ended before; the segment is then dropped, as chunker_next drops segments past
 * the end) or when max cut it, and then chunker_next goes on with the rest of it. */
ch_event chunker_take(chunker *ch, uint8_t *buf, size_t max, size_t *len);
/* The next n bytes of the input without handing them out: *p points at *len of them,
 * fewer than n only at the end of the input, valid until the next call. They are read
 * even when the chunks are passed over (ch->skip), so that a decision taken on them is
 * the same either way. CH_DATA, or an error as above. */
ch_event chunker_look(chunker *ch, size_t n, const uint8_t **p, size_t *len);

#endif
