/* chunker.c — see chunker.h. */
#include "chunker.h"

#include <string.h>

void chunker_init(chunker *ch, const fmt_list *segs, size_t chunk_size, ckpz_read_fn rd, void *rd_opaque,
                  const uint8_t *prefix, size_t prefix_len)
{
    memset(ch, 0, sizeof *ch);
    ch->rd = rd;
    ch->rd_opaque = rd_opaque;
    ch->prefix = prefix;
    ch->prefix_len = prefix_len;
    ch->segs = segs;
    ch->chunk_size = chunk_size;
}

/* Reads up to n bytes, prefix first; short only at end of input. -1 on error. */
static ptrdiff_t read_some(chunker *ch, uint8_t *buf, size_t n)
{
    size_t got = 0;
    if (ch->prefix_pos < ch->prefix_len) {
        size_t k = ch->prefix_len - ch->prefix_pos;
        if (k > n) k = n;
        memcpy(buf, ch->prefix + ch->prefix_pos, k);
        ch->prefix_pos += k;
        got = k;
    }
    while (got < n && !ch->eof) {
        ptrdiff_t r = ch->rd(ch->rd_opaque, buf + got, n - got);
        if (r < 0) return -1;
        if (r == 0) ch->eof = 1;
        got += (size_t)r;
    }
    return (ptrdiff_t)got;
}

ch_event chunker_next(chunker *ch, uint8_t *buf, size_t *len, const fmt_segment **seg)
{
    *seg = NULL;
    for (;;) {
        if (ch->seg >= ch->segs->n) return CH_END;
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
            /* An empty tensor keeps its entry unless the input ended before it; an
             * opaque segment without bytes leaves no trace. */
            if (first && want == 0 && s->dtype != CKPZ_DTYPE_NONE && !ch->eof) {
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
