/* workmem.c — the working memory a context keeps between calls (workmem.h), and the
 * context itself: creating and freeing one is where that memory begins and ends. */
#include "workmem.h"

#include <fcntl.h>
#include <stdint.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

ckpz_ctx *ckpz_ctx_create(void) { return calloc(1, sizeof(ckpz_ctx)); }

void ckpz_ctx_free(ckpz_ctx *ctx)
{
    if (!ctx) return;
    workmem_free(ctx->wm);
    free(ctx);
}

/* Room a job's output needs. The escape transform (a diff residual's top bytes, chosen
 * from a sample of the chunk) can outgrow chunk_frame_bound where the rest of the chunk
 * escapes far more than the sample: its planes hold up to 2 + (E + 1) * (n / E) + tail
 * <= 2 + 1.5 n bytes (E = 2), in at most E + 3 = 7 planes, each coded in at most its own
 * size. Such a frame would be refused by every decoder (payload over the bound), so
 * encode_job (encode.c) codes the chunk again as opaque bytes (transform none, one
 * plane: at most CTR_FRAME_SIZE + CTR_PLANE_DESC + n), which is what the file gets; the
 * buffer only has to hold the first attempt. */
size_t workmem_out_bound(size_t chunk_size) { return chunk_frame_bound(chunk_size) + chunk_size / 2 + 128; }

struct workmem *workmem_take(ckpz_ctx *ctx)
{
    struct workmem *wm = ctx && ctx->wm ? ctx->wm : calloc(1, sizeof *wm);
    if (ctx) ctx->wm = NULL;
    return wm;
}

void workmem_keep(ckpz_ctx *ctx, struct workmem *wm)
{
    if (ctx && !ctx->wm) ctx->wm = wm;
    else workmem_free(wm);
}

int workmem_scratch(struct workmem *wm, int threads, size_t chunk_size, int kind)
{
    chunk_scratch *s = wm->scratch;
    if (s && s->n >= threads && wm->scratch_chunk >= chunk_size && wm->scratch_kind >= kind) return 0;
    if (s) {
        if (s->n > threads) threads = s->n;
        if (wm->scratch_chunk > chunk_size) chunk_size = wm->scratch_chunk;
        if (wm->scratch_kind > kind) kind = wm->scratch_kind;
    }
    chunk_scratch_free(s);
    wm->scratch = chunk_scratch_create(threads, chunk_size, kind);
    wm->scratch_chunk = chunk_size;
    wm->scratch_kind = kind;
    return wm->scratch ? 0 : -1;
}

size_t workmem_buffers(struct workmem *wm, size_t chunk_size)
{
    if (wm->buf_chunk < chunk_size) {
        for (size_t i = 0; i < wm->nbuf; i++) {
            free(wm->raw[i]);
            free(wm->out[i]);
            wm->raw[i] = wm->out[i] = NULL;
        }
        wm->buf_chunk = chunk_size;
    }
    return wm->buf_chunk;
}

void workmem_lend(struct workmem *wm, size_t i, uint8_t **raw, uint8_t **out)
{
    *raw = *out = NULL;
    if (i >= wm->nbuf) return;
    *raw = wm->raw[i];
    *out = wm->out[i];
    wm->raw[i] = wm->out[i] = NULL;
}

void workmem_return(struct workmem *wm, size_t i, uint8_t *raw, uint8_t *out)
{
    if (i >= wm->nbuf && (raw || out)) {
        size_t n = i + 1;
        uint8_t **r = realloc(wm->raw, n * sizeof *r);
        if (r) wm->raw = r;
        uint8_t **o = r ? realloc(wm->out, n * sizeof *o) : NULL;
        if (o) {
            wm->out = o;
            for (size_t k = wm->nbuf; k < n; k++) wm->raw[k] = wm->out[k] = NULL;
            wm->nbuf = n;
        }
    }
    if (i < wm->nbuf && !wm->raw[i] && !wm->out[i]) {
        wm->raw[i] = raw;
        wm->out[i] = out;
    } else {
        free(raw);
        free(out);
    }
}

ent_ctx *workmem_lists(struct workmem *wm)
{
    if (wm && !wm->lists) wm->lists = ent_ctx_create();
    return wm ? wm->lists : NULL;
}

void workmem_free(struct workmem *wm)
{
    if (!wm) return;
    ent_ctx_free(wm->lists);
    ctr_keep_free(&wm->entries);
    free(wm->plan.e);
    free(wm->plan.ahead);
    fmt_spare_free(&wm->plan.segs);
    chunk_scratch_free(wm->scratch);
    for (size_t i = 0; i < wm->nbuf; i++) {
        free(wm->raw[i]);
        free(wm->out[i]);
    }
    free(wm->raw);
    free(wm->out);
    free(wm);
}

#define HUGE_PAGE ((size_t)2 << 20)
#define HUGE_MIN ((size_t)1 << 20)
#define HUGE_WHOLE ((size_t)4 << 20)
#define HUGE_ORDER 9    /* a 2 MiB page in 4 KiB ones: 2^9 */
#define HUGE_RESERVE 32 /* 2 MiB blocks left to others and to the kernel's watermarks */

/* The word in brackets of transparent_hugepage/defrag: whether a fault in a region
 * advised MADV_HUGEPAGE compacts memory itself when no 2 MiB block is free ("always",
 * "madvise", "defer+madvise"), or does not ("defer" leaves it to kcompactd, "never"). */
static int defrag_stalls(const char *defrag)
{
    const char *w = defrag ? strchr(defrag, '[') : NULL;
    if (!w) return 1; /* unknown: the kernel's default, madvise */
    w++;
    return !(strncmp(w, "defer]", 6) == 0 || strncmp(w, "never]", 6) == 0);
}

/* Free 2 MiB blocks in /proc/buddyinfo's text: per zone, the free blocks of each order
 * from 0 up, order k >= 9 holding 2^(k-9) of them. The DMA zone (16 MiB, kept for
 * devices) is not counted. */
static size_t buddy_blocks(const char *buddyinfo)
{
    size_t blocks = 0;
    for (const char *line = buddyinfo; line && *line;) {
        const char *end = strchr(line, '\n');
        const char *z = strstr(line, "zone");
        if (z && (!end || z < end)) {
            z += 4;
            while (*z == ' ') z++;
            int dma = strncmp(z, "DMA ", 4) == 0;
            while (*z && *z != ' ' && *z != '\n') z++;
            char *next;
            for (int order = 0; !dma && order < 16; order++, z = next) {
                unsigned long long n = strtoull(z, &next, 10);
                if (next == z || (end && next > end)) break;
                if (order >= HUGE_ORDER) blocks += (size_t)(n << (order - HUGE_ORDER));
            }
        }
        line = end ? end + 1 : NULL;
    }
    return blocks;
}

size_t workmem_huge_policy(const char *defrag, const char *buddyinfo, size_t n)
{
    size_t want = n / HUGE_PAGE;
    if (n < HUGE_MIN) return 0;
    if (n < HUGE_WHOLE) want = (n + HUGE_PAGE - 1) / HUGE_PAGE;
    if (!defrag_stalls(defrag)) return want * HUGE_PAGE;
    size_t free = buddyinfo ? buddy_blocks(buddyinfo) : 0;
    size_t spare = free > HUGE_RESERVE ? free - HUGE_RESERVE : 0;
    return (want < spare ? want : spare) * HUGE_PAGE;
}

/* A small /proc or /sys file into buf (NUL-terminated); NULL where it cannot be read. */
static const char *read_text(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    ssize_t got = 0, r;
    while ((size_t)got < size - 1 && (r = read(fd, buf + got, size - 1 - (size_t)got)) > 0) got += r;
    close(fd);
    if (got <= 0) return NULL;
    buf[got] = 0;
    return buf;
}

/* CKPZ_HUGEPAGES (for benchmarks): "off" never asks, "on" always asks (as before the
 * policy), anything else or unset follows it. Read once, as defrag's mode is. */
enum { HUGE_UNREAD, HUGE_OFF, HUGE_ON, HUGE_STALLS, HUGE_FREE };
static int huge_mode(void)
{
    static int mode = HUGE_UNREAD;
    int m = __atomic_load_n(&mode, __ATOMIC_RELAXED);
    if (m != HUGE_UNREAD) return m;
    const char *env = getenv("CKPZ_HUGEPAGES");
    char buf[128];
    if (env && strcmp(env, "off") == 0) m = HUGE_OFF;
    else if (env && strcmp(env, "on") == 0) m = HUGE_ON;
    else
        m = defrag_stalls(read_text("/sys/kernel/mm/transparent_hugepage/defrag", buf, sizeof buf)) ? HUGE_STALLS
                                                                                                    : HUGE_FREE;
    __atomic_store_n(&mode, m, __ATOMIC_RELAXED);
    return m;
}

size_t ckpz_huge_span(size_t n)
{
#ifdef MADV_HUGEPAGE
    char buf[4096];
    switch (huge_mode()) {
    case HUGE_OFF: return 0;
    case HUGE_ON:
    case HUGE_FREE: return workmem_huge_policy("[never]", NULL, n);
    default: return workmem_huge_policy(NULL, read_text("/proc/buddyinfo", buf, sizeof buf), n);
    }
#else
    (void)n;
    return 0;
#endif
}

/* One room given back (ckpz_free), kept for the next output: its pages are faulted in
 * already (a fresh 2 MiB page costs its clearing, 8% of compressing 1.9 MB of small
 * tensors at level 1). Only rooms as workmem_room makes them below 4 MiB are kept
 * (2 MiB-aligned, 1-6 MiB of addresses, whole 2 MiB pages), one at a time; their size
 * is glibc's malloc_usable_size. */
static void *kept_room;

static size_t room_size(void *p)
{
#if defined(__GLIBC__) && defined(MADV_HUGEPAGE)
    size_t u = p ? malloc_usable_size(p) : 0;
    return (uintptr_t)p % HUGE_PAGE == 0 && u >= HUGE_MIN && u <= HUGE_WHOLE + HUGE_PAGE ? u : 0;
#else
    (void)p;
    return 0; /* none kept */
#endif
}

/* Into the empty slot: 0 where another room is there. */
static int room_keep(void *p)
{
    void *none = NULL;
    return __atomic_compare_exchange_n(&kept_room, &none, p, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static void *room_take(size_t n)
{
    void *p = __atomic_exchange_n(&kept_room, NULL, __ATOMIC_ACQ_REL);
    if (!p || room_size(p) >= n) return p;
    if (!room_keep(p)) free(p); /* too small for n: kept for a later one unless another was */
    return NULL;
}

void workmem_room_free(void *p)
{
    if (!room_size(p) || !room_keep(p)) free(p);
}

void *workmem_room_fit(void *p, size_t size, size_t n)
{
    /* a whole-page room the output fills half of stays whole (given back as it is, it
     * can be kept; cut, its 2 MiB page would be split), else given back down to n */
    if (size < HUGE_WHOLE && n >= size / 2 && room_size(p)) return p;
    void *q = realloc(p, n ? n : 1);
    return q ? q : p;
}

void *workmem_room(size_t n)
{
    void *p = n >= HUGE_MIN ? room_take(n) : NULL;
    if (p) return p;
#ifdef MADV_HUGEPAGE
    size_t span = ckpz_huge_span(n);
    /* below HUGE_WHOLE in whole 2 MiB pages (the room rounded up: one fault where a 2 MB
     * output took ~500), above it the 2 MiB pages n holds, as many as are free */
    size_t r = span && n < HUGE_WHOLE ? (n + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE : n;
    if (span && posix_memalign(&p, HUGE_PAGE, r) == 0) {
        madvise(p, span, MADV_HUGEPAGE);
        return p;
    }
#endif
    return malloc(n ? n : 1);
}
