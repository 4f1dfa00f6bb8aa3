/* test_chunker.c — the chunker over piecewise formats: a toy reader describes records
 * (8-byte length header, then that many bytes of f32 data) one at a time through resume
 * segments, sometimes asking for more read-ahead than the default. The chunker must
 * hand out every input byte once, in order, cut at entry boundaries and at the chunk
 * size, and announce each entry exactly once, whether or not bytes were looked at ahead
 * (chunker_look) first. */
#include <stdlib.h>
#include <string.h>

#include "codec/chunker.h"
#include "common/bytes.h"
#include "memfile.h"
#include "testutil.h"

typedef struct toy {
    int calls, need_more_calls;
} toy;

/* Describes records from `at`: header opaque, data as a tensor; stops at a record whose
 * header is not complete in p (resume there). A record with the high bit of its length
 * set asks to see its whole data before describing it (exercises FMT_NEED_MORE). */
static fmt_status toy_resume(void *state, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof, size_t *need)
{
    toy *t = state;
    t->calls++;
    size_t pos = 0;
    int described = 0;
    while (len - pos >= 8) {
        uint64_t h = ld64(p + pos), n = h & ~(1ull << 63);
        if (h == 0x504f5453ull) /* "STOP": the rest is not described at all */
            return described ? (fmt_push_resume(l, at + pos) ? FMT_NOMEM : FMT_DONE) : FMT_DONE;
        if (h == 0x424f4c42ull) { /* "BLOB": 8 header + 16 bytes, all opaque, then resume */
            if (fmt_push(l, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, at + pos, 24)) return FMT_NOMEM;
            return fmt_push_resume(l, at + pos + 24) ? FMT_NOMEM : FMT_DONE;
        }
        if ((h >> 63) && len - pos - 8 < n * 4 && !eof) {
            if (described) break; /* resume at this record */
            t->need_more_calls++;
            *need = pos + 8 + (size_t)n * 4;
            return FMT_NEED_MORE;
        }
        if (fmt_push(l, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, at + pos, 8) ||
            fmt_push(l, CKPZ_DTYPE_F32, "rec", 3, 1, &n, at + pos + 8, n * 4))
            return FMT_NOMEM;
        pos += 8 + (size_t)n * 4;
        described = 1;
        if (pos > len) break; /* its data runs past what we see: resume after it */
    }
    if (eof && pos >= len) return FMT_DONE; /* the rest (if any) is opaque */
    return fmt_push_resume(l, at + pos) ? FMT_NOMEM : FMT_DONE;
}

static void toy_free(void *state) { free(state); }

/* A reader row outside the table: only resume is ever called. */
static const fmt_reader toy_reader = {CKPZ_INPUT_RAW, "toy", NULL, NULL, toy_resume, toy_free};

static void run(size_t step, size_t chunk)
{
    /* records: small, large (> chunk, > 64 KiB read-ahead), need-more, empty */
    uint64_t counts[] = {10, 70000, 3, 0, (1ull << 63) | 40000, 5, 250000, 1};
    size_t nrec = sizeof counts / sizeof *counts, total = 0;
    for (size_t i = 0; i < nrec; i++) total += 8 + (size_t)(counts[i] & ~(1ull << 63)) * 4;
    total += 24 + 8 + 40; /* a BLOB record, then STOP and 40 undescribed bytes */
    uint8_t *in = malloc(total), *out = malloc(total + chunk), *buf = malloc(chunk);
    size_t at = 0;
    for (size_t i = 0; i < nrec; i++) {
        st64(in + at, counts[i]);
        at += 8;
        size_t n = (size_t)(counts[i] & ~(1ull << 63)) * 4;
        for (size_t k = 0; k < n; k++) in[at + k] = (uint8_t)rng();
        at += n;
    }
    st64(in + at, 0x424f4c42ull);
    memset(in + at + 8, 0xb1, 16);
    st64(in + at + 24, 0x504f5453ull);
    memset(in + at + 32, 0x5a, 40);

    fmt_list l = {0};
    toy *t = calloc(1, sizeof *t);
    l.reader = &toy_reader;
    l.state = t;
    CHECK(fmt_push_resume(&l, 0) == 0 && fmt_finish(&l) == 0);

    ckpz_mem r = mem_in(in, total, step);
    chunker ch;
    chunker_init(&ch, &l, chunk, ckpz_mem_read, &r);
    size_t got = 0, tensors = 0, empty = 0;
    uint64_t entry_end = 0;
    int ok = 1, looks = 0;
    for (;;) {
        size_t n;
        const fmt_segment *s, *nx;
        /* at every other entry, its first bytes and maybe the next ones are looked at
         * first: they are the input's there, and are handed out all the same */
        if (chunker_peek(&ch, &nx) == CH_DATA && nx && (tensors + got) % 2) {
            const uint8_t *p;
            size_t want = 1 + (got * 7) % 300, len;
            CHECK(chunker_look(&ch, want, &p, &len) == CH_DATA);
            ok &= len == (want < total - got ? want : total - got) && !memcmp(p, in + got, len);
            looks++;
        }
        ch_event ev = chunker_next(&ch, buf, &n, &s);
        if (ev != CH_DATA) {
            CHECK(ev == CH_END);
            break;
        }
        if (s) {
            entry_end = s->length == FMT_LEN_OPEN ? UINT64_MAX : s->offset + s->length;
            ok &= s->offset == got;
            if (s->dtype == CKPZ_DTYPE_F32) tensors++;
            if (n == 0) empty++;
        }
        /* a chunk never straddles an entry: its bytes lie within its segment */
        ok &= n <= chunk && got + n <= total && got + n <= entry_end;
        memcpy(out + got, buf, n);
        got += n;
    }
    CHECKF(ok, "chunk order/offsets (step %zu, chunk %zu)", step, chunk);
    CHECKF(got == total && !memcmp(in, out, total), "bytes handed out (step %zu, chunk %zu): %zu of %zu", step, chunk,
           got, total);
    CHECKF(tensors == nrec && empty == 1, "entries: %zu tensors, %zu empty", tensors, empty);
    CHECK(looks >= 3);
    CHECK(t->calls >= 3 && t->need_more_calls >= 1);
    /* the final list tiles the input */
    uint64_t cur = 0;
    for (size_t i = 0; i < l.n; i++) {
        CHECK(l.seg[i].offset == cur && !l.seg[i].resume);
        if (l.seg[i].length == FMT_LEN_OPEN) CHECK(i == l.n - 1);
        else cur += l.seg[i].length;
    }
    chunker_free(&ch);
    fmt_list_free(&l);
    free(in);
    free(out);
    free(buf);
}

/* A list that stops short of the input (a reader bug) must not lose the rest. */
static void under_described(void)
{
    uint8_t in[30], out[64], buf[65536];
    for (int i = 0; i < 30; i++) in[i] = (uint8_t)i;
    fmt_list l = {0};
    CHECK(fmt_push(&l, CKPZ_DTYPE_NONE, NULL, 0, 0, NULL, 0, 10) == 0);
    ckpz_mem r = mem_in(in, sizeof in, 4);
    chunker ch;
    chunker_init(&ch, &l, sizeof buf, ckpz_mem_read, &r);
    size_t got = 0, n;
    const fmt_segment *s;
    while (chunker_next(&ch, buf, &n, &s) == CH_DATA && got + n <= sizeof out) {
        memcpy(out + got, buf, n);
        got += n;
    }
    CHECKF(got == sizeof in && !memcmp(in, out, sizeof in), "under-described input: %zu of %zu bytes", got, sizeof in);
    chunker_free(&ch);
    fmt_list_free(&l);
}

int main(void)
{
    under_described();
    run(1 << 20, 65536);
    run(4093, 65536);
    run(7, 1 << 20);
    return test_summary("test_chunker");
}
