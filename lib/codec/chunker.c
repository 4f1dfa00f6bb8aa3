/* chunker.c — see chunker.h. */
#include "chunker.h"

#include <stdlib.h>
#include <string.h>

#define AHEAD_MIN (64u << 10) /* bytes offered to a format reader: first, and at a resume point */

void chunker_init(chunker *ch, fmt_list *segs, size_t chunk_size, ckpz_read_fn rd, void *rd_opaque)
{
    memset(ch, 0, sizeof *ch);
    ch->rd = rd;
    ch->rd_opaque = rd_opaque;
    ch->segs = segs;
    ch->chunk_size = chunk_size;
}

void chunker_free(chunker *ch)
{
    free(ch->ahead);
    ch->ahead = NULL;
}

/* Reads up to n bytes, read-ahead bytes first; short only at end of input. buf NULL:
 * passes over them (ch->skip). */
static ptrdiff_t read_some(chunker *ch, uint8_t *buf, size_t n)
{
    size_t got = 0;
    if (ch->ahead_pos < ch->ahead_len) {
        size_t k = ch->ahead_len - ch->ahead_pos;
        if (k > n) k = n;
        if (buf) memcpy(buf, ch->ahead + ch->ahead_pos, k);
        ch->ahead_pos += k;
        got = k;
    }
    while (got < n && !ch->eof) {
        ptrdiff_t r = buf ? ch->rd(ch->rd_opaque, buf + got, n - got) : ch->skip(ch->rd_opaque, n - got);
        if (r < 0) return -1;
        if (r == 0) ch->eof = 1;
        got += (size_t)r;
    }
    return (ptrdiff_t)got;
}

/* The format driver's source: the input from where the chunker stands (`at` always is),
 * the unread read-ahead bytes first, read ahead to what the reader wants. */
static fmt_status fetch(void *opaque, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof)
{
    chunker *ch = opaque;
    (void)at;
    /* keep only the unread bytes, at the front */
    size_t have = ch->ahead_len - ch->ahead_pos;
    if (ch->ahead_pos) memmove(ch->ahead, ch->ahead + ch->ahead_pos, have);
    ch->ahead_pos = 0;
    ch->ahead_len = have;
    if (want > ch->ahead_cap) {
        uint8_t *nb = realloc(ch->ahead, want);
        if (!nb) return FMT_NOMEM;
        ch->ahead = nb;
        ch->ahead_cap = want;
    }
    while (ch->ahead_len < want && !ch->eof) {
        ptrdiff_t r = ch->rd(ch->rd_opaque, ch->ahead + ch->ahead_len, want - ch->ahead_len);
        if (r < 0) return FMT_READ;
        if (r == 0) ch->eof = 1;
        ch->ahead_len += (size_t)r;
    }
    *p = ch->ahead;
    *len = ch->ahead_len;
    *eof = ch->eof;
    return FMT_DONE;
}

fmt_status chunker_describe(chunker *ch, const fmt_request *rq, uint64_t size_hint, char *why, size_t whylen)
{
    fmt_source src = {fetch, ch, size_hint};
    return fmt_drive_describe(&src, AHEAD_MIN, rq, ch->segs, why, whylen);
}

/* At a resume segment: gather read-ahead bytes until the format reader has described
 * what follows. 0, or a ch_event error. */
static int resume(chunker *ch)
{
    fmt_source src = {fetch, ch, CKPZ_SIZE_UNKNOWN};
    fmt_status s = fmt_drive_resume(&src, AHEAD_MIN, ch->segs, NULL, 0);
    return s == FMT_DONE ? 0 : s == FMT_READ ? CH_ERROR : CH_NOMEM;
}

ch_event chunker_next(chunker *ch, uint8_t *buf, size_t *len, const fmt_segment **seg)
{
    *seg = NULL;
    for (;;) {
        if (ch->seg >= ch->segs->n) {
            /* The list is used up: the input must be too. If it is not (a reader that
             * under-described), the rest is kept as opaque bytes, never dropped. */
            if (ch->ahead_pos == ch->ahead_len && !ch->eof) {
                uint8_t byte;
                ptrdiff_t r = ch->rd(ch->rd_opaque, &byte, 1);
                if (r < 0) return CH_ERROR;
                if (r == 0) ch->eof = 1;
                else if (ch->ahead_cap >= 1 || (ch->ahead = malloc(1)) != NULL) {
                    if (!ch->ahead_cap) ch->ahead_cap = 1;
                    ch->ahead[0] = byte;
                    ch->ahead_pos = 0;
                    ch->ahead_len = 1;
                } else {
                    return CH_NOMEM;
                }
            }
            if (ch->ahead_pos == ch->ahead_len) return CH_END;
            if (fmt_push(ch->segs, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, ch->consumed, FMT_LEN_OPEN)) return CH_NOMEM;
            continue;
        }
        if (!ch->in_seg && ch->segs->seg[ch->seg].resume) {
            int r = resume(ch); /* replaces this segment; the list may move */
            if (r) return (ch_event)r;
            continue;
        }
        const fmt_segment *s = &ch->segs->seg[ch->seg];
        int first = !ch->in_seg;
        if (first) {
            ch->in_seg = 1;
            ch->seg_left = s->length;
        }
        size_t want = ch->chunk_size;
        if (s->length != FMT_LEN_OPEN && ch->seg_left < want) want = (size_t)ch->seg_left;
        ptrdiff_t r = want ? read_some(ch, buf, want) : 0;
        if (r < 0) return CH_ERROR;
        if (r == 0) {
            ch->in_seg = 0;
            ch->seg++;
            /* An empty tensor keeps its entry unless the input ended before it (a
             * truncated input: bytes described before it are missing); one that starts
             * where the input ends is whole. An opaque segment without bytes leaves no
             * trace. */
            if (first && want == 0 && s->dtype != CKPZ_DTYPE_NONE && s->offset <= ch->consumed) {
                *seg = s;
                *len = 0;
                return CH_DATA;
            }
            continue;
        }
        if (s->length != FMT_LEN_OPEN) ch->seg_left -= (uint64_t)r;
        ch->consumed += (uint64_t)r;
        *len = (size_t)r;
        if (first) *seg = s;
        if (s->length != FMT_LEN_OPEN && ch->seg_left == 0) {
            ch->in_seg = 0;
            ch->seg++;
        }
        return CH_DATA;
    }
}

ch_event chunker_peek(chunker *ch, const fmt_segment **seg)
{
    *seg = NULL;
    while (!ch->in_seg && ch->seg < ch->segs->n) {
        if (!ch->segs->seg[ch->seg].resume) {
            *seg = &ch->segs->seg[ch->seg];
            break;
        }
        int r = resume(ch);
        if (r) return (ch_event)r;
    }
    return CH_DATA;
}

ch_event chunker_take(chunker *ch, uint8_t *buf, size_t max, size_t *len)
{
    const fmt_segment *s = &ch->segs->seg[ch->seg];
    size_t want = s->length < max ? (size_t)s->length : max;
    ptrdiff_t r = read_some(ch, buf, want);
    if (r < 0) return CH_ERROR;
    ch->consumed += (uint64_t)r;
    *len = (size_t)r;
    if ((size_t)r == want && want < s->length) { /* cut by max: the rest comes from chunker_next */
        ch->in_seg = 1;
        ch->seg_left = s->length - want;
    } else {
        ch->seg++;
    }
    return CH_DATA;
}

ch_event chunker_look(chunker *ch, size_t n, const uint8_t **p, size_t *len)
{
    size_t have = ch->ahead_len - ch->ahead_pos;
    if (have < n && !ch->eof) { /* fetch moves only the unread bytes (fewer than n) */
        const uint8_t *q;
        size_t l;
        int eof;
        fmt_status s = fetch(ch, ch->consumed, n, &q, &l, &eof);
        if (s != FMT_DONE) return s == FMT_READ ? CH_ERROR : CH_NOMEM;
        have = ch->ahead_len - ch->ahead_pos;
    }
    *p = ch->ahead ? ch->ahead + ch->ahead_pos : NULL;
    *len = have < n ? have : n;
    return CH_DATA;
}
