/* drive.c — the one loop of the need-more/resume protocol (see formats.h).
 *
 * Every consumer of the readers runs the same steps: offer a prefix, give a reader the
 * bytes it asks for (more than it had, at most FMT_PROBE_MAX, never past the end), and
 * at a resume segment offer the bytes from there on. The compressor (through its
 * chunker, over a stream), the predictor (pread) and delta matching (the base in
 * memory) differ only in how they fetch bytes, which is the fmt_source they pass; the
 * checks of the protocol live here once.
 */
#include <stdio.h>

#include "common/ctx.h"
#include "formats.h"

static fmt_status fetch(const fmt_source *src, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof,
                        char *why, size_t whylen)
{
    *p = NULL;
    *len = 0;
    *eof = 0;
    fmt_status st = src->fetch(src->opaque, at, want, p, len, eof);
    if (st == FMT_READ) fmt_why(why, whylen, "read error describing the input from byte %llu", (unsigned long long)at);
    if (st == FMT_DONE && !*p && *len) st = FMT_PROTOCOL;
    return st;
}

/* Checks a reader's request for more bytes: more than it had, within the probe limit,
 * and not at the end of the input. */
static fmt_status check_need(size_t need, size_t have, int eof, char *why, size_t whylen)
{
    if (need <= have || need > FMT_PROBE_MAX || eof) {
        fmt_why(why, whylen, "format reader asked for %zu bytes with %zu read", need, have);
        return FMT_PROTOCOL;
    }
    return FMT_DONE;
}

/* One step of the protocol on p[0..len), the input from the loop's offset on (eof: it
 * ends there; total: its size or CKPZ_SIZE_UNKNOWN): describe, or resume. */
typedef struct step {
    fmt_status (*run)(struct step *s, const uint8_t *p, size_t len, int eof, uint64_t total, size_t *need);
    const fmt_request *rq;
    fmt_list *l;
    char *why;
    size_t whylen;
} step;

static fmt_status describe_step(step *s, const uint8_t *p, size_t len, int eof, uint64_t total, size_t *need)
{
    (void)eof;
    return fmt_describe(p, len, total, s->rq, s->l, need, s->why, s->whylen);
}

static fmt_status resume_step(step *s, const uint8_t *p, size_t len, int eof, uint64_t total, size_t *need)
{
    (void)total;
    return fmt_resume(s->l, p, len, eof, need);
}

/* The loop: offer `first` bytes from `at`, then what the step asks for. */
static fmt_status drive(const fmt_source *src, uint64_t at, size_t first, step *s)
{
    for (size_t want = first;;) {
        const uint8_t *p;
        size_t have, need = 0;
        int eof;
        fmt_status st = fetch(src, at, want, &p, &have, &eof, s->why, s->whylen);
        if (st != FMT_DONE) return st;
        st = s->run(s, p, have, eof, eof ? at + have : src->size, &need);
        if (st != FMT_NEED_MORE) return st;
        if ((st = check_need(need, have, eof, s->why, s->whylen)) != FMT_DONE) return st;
        want = need;
    }
}

fmt_status fmt_drive_describe(const fmt_source *src, size_t first, const fmt_request *rq, fmt_list *out, char *why,
                              size_t whylen)
{
    step s = {describe_step, rq, out, why, whylen};
    return drive(src, 0, first, &s);
}

fmt_status fmt_drive_resume(const fmt_source *src, size_t first, fmt_list *l, char *why, size_t whylen)
{
    if (!l->n || !l->seg[l->n - 1].resume) return FMT_DONE;
    step s = {resume_step, NULL, l, why, whylen};
    return drive(src, l->seg[l->n - 1].offset, first, &s);
}

fmt_status fmt_drive_all(const fmt_source *src, size_t first, fmt_list *l, char *why, size_t whylen)
{
    while (l->n && l->seg[l->n - 1].resume) {
        fmt_status st = fmt_drive_resume(src, first, l, why, whylen);
        if (st != FMT_DONE) return st;
    }
    return FMT_DONE;
}

ckpz_error fmt_fail(ckpz_ctx *ctx, fmt_status st, const fmt_request *rq, const char *why)
{
    switch (st) {
    case FMT_DONE:
    case FMT_NEED_MORE: break;
    case FMT_ERROR:
        return ctx_fail(ctx, CKPZ_ERR_INPUT, "input is not valid %s: %s", ckpz_input_format_name(rq->format),
                        why && why[0] ? why : "unrecognised");
    case FMT_NOMEM: return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory describing the input");
    case FMT_READ: return ctx_fail(ctx, CKPZ_ERR_READ, "%s", why && why[0] ? why : "read error describing the input");
    case FMT_PROTOCOL: break;
    }
    return ctx_fail(ctx, CKPZ_ERR_INTERNAL, "%s", why && why[0] ? why : "format reader out of protocol");
}
