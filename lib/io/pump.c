/* pump.c — a thread that reads a regular file ahead or writes one behind while the
 * calling thread codes (ckpz_pump_*, include/ckpz_experimental.h): the CLI's inputs and
 * outputs and the library's own fd source and sink (fdpump.c) use it. One mutex and
 * one condition guard a ring of 2 to CKPZ_PUMP_MAX buffers. Reading, the thread fills
 * buffers in order while fewer than all are full or held by the caller, who holds one
 * (the last it took) at a time. Writing, each buffer is free, filled by the caller's
 * copies (one at a time: ckpz_pump_write copies into it, queued once full or at a
 * drain), lent whole to the caller (ckpz_pump_lend: a decoder decodes a chunk, an
 * encoder codes a frame, straight into it, and writing it back queues it, no copy), or
 * queued; the thread writes queued
 * buffers in the order they were queued, which is the order of the caller's writes (a
 * partly filled buffer is queued before a lent one written after it). A lend never
 * takes the last buffer not lent, so that copies always find one to fill once the
 * thread has written what is queued: lending never makes a write wait for ever.
 * The thread moves bytes through a ckpz_fd of its own (the caller's descriptor, its own
 * count and error), so that the caller may use its own (pread, a patch after a drain)
 * without sharing a struct with the thread; ckpz_pump_stop adds both back.
 */
#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL
#endif
#include "ckpz.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ckpz_pump {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any change: a buffer filled, taken, queued or written; stop */
    pthread_t th;
    ckpz_fd fd, *owner;
    int writing, stop, end, err; /* end: the thread read the input's last byte */
    size_t size, lead;
    int nbuf;
    unsigned char *mem[CKPZ_PUMP_MAX];
    size_t len[CKPZ_PUMP_MAX];
    /* reading: buffers filled by the thread, taken by the caller; writing: buffers
     * queued by the caller, written (or dropped after an error) by the thread */
    unsigned long made, used;
    /* writing: queue position i % nbuf holds buffer q[i % nbuf] (its bytes: len[],
     * also by position); what each buffer is doing */
    int q[CKPZ_PUMP_MAX];
    enum { B_FREE, B_FILL, B_LENT, B_QUEUED } state[CKPZ_PUMP_MAX];
    /* writing, the caller's alone: the buffer it fills (-1: none taken) and how many
     * bytes it holds */
    int fill;
    size_t filled;
};

static void fail(ckpz_pump *p, int err)
{
    if (!p->err) p->err = err;
}

/* Reading: one buffer, whole unless the input ends. */
static void read_one(ckpz_pump *p, unsigned char *dst, size_t *got)
{
    *got = 0;
    while (*got < p->size) {
        ptrdiff_t r = ckpz_fd_read(&p->fd, dst + *got, p->size - *got);
        pthread_mutex_lock(&p->mu);
        if (r < 0) fail(p, p->fd.error ? p->fd.error : EIO);
        int stop = p->stop || r <= 0;
        pthread_mutex_unlock(&p->mu);
        if (r > 0) *got += (size_t)r;
        if (stop) break;
    }
}

static void *reader_main(ckpz_pump *p)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* the caller holds the buffer it took last: the one before `used` */
        while (!p->stop && p->made >= p->used + (unsigned long)p->nbuf - (p->used > 0))
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->stop) break;
        size_t slot = p->made % (unsigned long)p->nbuf, got;
        pthread_mutex_unlock(&p->mu);
        read_one(p, p->mem[slot] + p->lead, &got);
        pthread_mutex_lock(&p->mu);
        if (p->err || p->stop) break;
        p->len[slot] = got;
        p->made++;
        if (got < p->size) p->end = 1;
        pthread_cond_broadcast(&p->cv);
        if (p->end) break;
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void *writer_main(ckpz_pump *p)
{
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->used == p->made) pthread_cond_wait(&p->cv, &p->mu);
        if (p->used == p->made) break; /* stopped with nothing queued */
        size_t at = p->used % (unsigned long)p->nbuf;
        int slot = p->q[at];
        if (!p->err && !p->stop) {
            pthread_mutex_unlock(&p->mu);
            int bad = ckpz_fd_write(&p->fd, p->mem[slot] + p->lead, p->len[at]) != 0;
            int e = errno; /* 0 when the system took no bytes */
            pthread_mutex_lock(&p->mu);
            if (bad) fail(p, e ? (p->fd.error ? p->fd.error : e) : -1);
        }
        p->state[slot] = B_FREE;
        p->used++; /* written, or dropped after an error or a stop */
        pthread_cond_broadcast(&p->cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void *pump_main(void *v)
{
    ckpz_pump *p = v;
    return p->writing ? writer_main(p) : reader_main(p);
}

int ckpz_pump_wanted(int threads)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return threads > 0 && cores > 0 && threads < cores;
}

static void pump_free(ckpz_pump *p)
{
    for (int i = 0; i < CKPZ_PUMP_MAX; i++) free(p->mem[i]);
    free(p);
}

ckpz_pump *ckpz_pump_start(ckpz_fd *io, int writing, int nbuf, size_t size, size_t lead)
{
    ckpz_pump *p = nbuf >= 2 && nbuf <= CKPZ_PUMP_MAX ? calloc(1, sizeof *p) : NULL;
    if (!p) return NULL;
    p->nbuf = nbuf;
    for (int i = 0; i < nbuf; i++)
        if (!(p->mem[i] = malloc(lead + size))) {
            pump_free(p);
            return NULL;
        }
    p->fd = (ckpz_fd){io->fd, 0, 0};
    p->owner = io;
    p->writing = writing;
    p->size = size;
    p->lead = lead;
    p->fill = -1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->th, NULL, pump_main, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        pump_free(p);
        return NULL;
    }
    return p;
}

unsigned char *ckpz_pump_next(ckpz_pump *p, size_t *len)
{
    unsigned char *b = NULL;
    pthread_mutex_lock(&p->mu);
    while (p->made == p->used && !p->end && !p->err) pthread_cond_wait(&p->cv, &p->mu);
    if (p->made > p->used) { /* bytes read before an error are handed over first */
        size_t slot = p->used++ % (unsigned long)p->nbuf;
        *len = p->len[slot];
        b = p->mem[slot] + p->lead;
        pthread_cond_broadcast(&p->cv); /* the buffer taken before is free again */
    } else if (!p->err) {
        *len = 0;
        b = p->mem[(p->used + (unsigned long)p->nbuf - 1) % (unsigned long)p->nbuf] +
            p->lead; /* the held one, unchanged */
    }
    pthread_mutex_unlock(&p->mu);
    return b;
}

/* Writing, under the lock: a free buffer, or -1. */
static int free_buffer(const ckpz_pump *p)
{
    for (int i = 0; i < p->nbuf; i++)
        if (p->state[i] == B_FREE) return i;
    return -1;
}

/* Writing: takes a free buffer to fill (waits for one: at least one buffer is never
 * lent, so one is free or queued); 0, or -1 after a write error. */
static int take(ckpz_pump *p)
{
    pthread_mutex_lock(&p->mu);
    while (!p->err && free_buffer(p) < 0) pthread_cond_wait(&p->cv, &p->mu);
    if (!p->err) p->state[p->fill = free_buffer(p)] = B_FILL;
    pthread_mutex_unlock(&p->mu);
    return p->fill >= 0 ? 0 : -1;
}

/* Writing: queues buffer b with n bytes for the thread. */
static void queue(ckpz_pump *p, int b, size_t n)
{
    pthread_mutex_lock(&p->mu);
    p->q[p->made % (unsigned long)p->nbuf] = b;
    p->len[p->made % (unsigned long)p->nbuf] = n;
    p->state[b] = B_QUEUED;
    p->made++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Writing: queues the buffer being filled, if it holds any bytes. */
static void queue_fill(ckpz_pump *p)
{
    if (p->fill >= 0 && p->filled) {
        queue(p, p->fill, p->filled);
        p->fill = -1;
        p->filled = 0;
    }
}

void *ckpz_pump_lend(ckpz_pump *p, size_t n)
{
    if (!p->writing || n < p->size / 4 || n > p->size) return NULL;
    int b = -1, lent = 0;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < p->nbuf; i++) lent += p->state[i] == B_LENT;
    /* a queued buffer comes back free once written: wait for it, unless the lend
     * would leave copies no buffer */
    while (!p->err && lent + 1 < p->nbuf && (b = free_buffer(p)) < 0 && p->made > p->used)
        pthread_cond_wait(&p->cv, &p->mu);
    if (p->err || lent + 1 >= p->nbuf) b = -1;
    if (b >= 0) p->state[b] = B_LENT;
    pthread_mutex_unlock(&p->mu);
    return b >= 0 ? p->mem[b] + p->lead : NULL;
}

/* The lent buffer that starts at src, or -1. */
static int lent_buffer(ckpz_pump *p, const void *src)
{
    for (int i = 0; i < p->nbuf; i++)
        if (src == p->mem[i] + p->lead) {
            pthread_mutex_lock(&p->mu);
            int lent = p->state[i] == B_LENT;
            pthread_mutex_unlock(&p->mu);
            return lent ? i : -1;
        }
    return -1;
}

int ckpz_pump_write(ckpz_pump *p, const void *src, size_t n)
{
    const unsigned char *s = src;
    int b = n && n <= p->size ? lent_buffer(p, src) : -1;
    if (b >= 0) { /* a lent buffer back, in order: after what was copied before it */
        if (ckpz_pump_error(p)) return -1;
        queue_fill(p);
        queue(p, b, n);
        return 0;
    }
    while (n) {
        if (p->fill < 0 && take(p) != 0) return -1;
        size_t k = p->size - p->filled < n ? p->size - p->filled : n;
        memcpy(p->mem[p->fill] + p->lead + p->filled, s, k);
        p->filled += k;
        s += k;
        n -= k;
        if (p->filled == p->size) queue_fill(p);
    }
    return 0;
}

int ckpz_pump_drain(ckpz_pump *p)
{
    queue_fill(p);
    pthread_mutex_lock(&p->mu);
    while (p->used < p->made) pthread_cond_wait(&p->cv, &p->mu);
    int bad = p->err != 0;
    pthread_mutex_unlock(&p->mu);
    return bad ? -1 : 0;
}

int ckpz_pump_error(ckpz_pump *p)
{
    pthread_mutex_lock(&p->mu);
    int e = p->err;
    pthread_mutex_unlock(&p->mu);
    return e;
}

void ckpz_pump_stop(ckpz_pump *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    p->owner->bytes += p->fd.bytes;
    if (!p->owner->error && p->err > 0) p->owner->error = p->err;
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    pump_free(p);
}
