/* pump.c — a thread that reads a regular file ahead or writes one behind while the
 * calling thread codes (ckpz_pump_*, include/ckpz_experimental.h): the CLI's inputs and
 * outputs and the library's own fd source and sink (fdpump.c) use it. One mutex and
 * one condition guard a ring of 2 to CKPZ_PUMP_MAX buffers. Reading, the thread fills buffers in order while fewer than all are full or
 * held by the caller, who holds one (the last it took) at a time; writing, the caller's
 * bytes go into the buffer the pump keeps filling (ckpz_pump_write), queued once full
 * or at a drain, and the thread writes queued buffers in order.
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
    /* writing, the caller's alone: the buffer it fills (slot made % nbuf, not yet
     * queued; NULL: none taken) and how many bytes it holds */
    unsigned char *fill;
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
        size_t slot = p->used % (unsigned long)p->nbuf;
        if (!p->err && !p->stop) {
            pthread_mutex_unlock(&p->mu);
            int bad = ckpz_fd_write(&p->fd, p->mem[slot], p->len[slot]) != 0;
            int e = errno; /* 0 when the system took no bytes */
            pthread_mutex_lock(&p->mu);
            if (bad) fail(p, e ? (p->fd.error ? p->fd.error : e) : -1);
        }
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

/* Writing: takes a free buffer to fill (waits for one); 0, or -1 after a write error. */
static int take(ckpz_pump *p)
{
    pthread_mutex_lock(&p->mu);
    while (!p->err && p->made - p->used >= (unsigned long)p->nbuf) pthread_cond_wait(&p->cv, &p->mu);
    if (!p->err) p->fill = p->mem[p->made % (unsigned long)p->nbuf];
    pthread_mutex_unlock(&p->mu);
    return p->fill ? 0 : -1;
}

/* Writing: queues the buffer being filled with the bytes it holds. */
static void queue(ckpz_pump *p)
{
    pthread_mutex_lock(&p->mu);
    p->len[p->made % (unsigned long)p->nbuf] = p->filled;
    p->made++;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    p->fill = NULL;
    p->filled = 0;
}

int ckpz_pump_write(ckpz_pump *p, const void *src, size_t n)
{
    const unsigned char *s = src;
    while (n) {
        if (!p->fill && take(p) != 0) return -1;
        size_t k = p->size - p->filled < n ? p->size - p->filled : n;
        memcpy(p->fill + p->filled, s, k);
        p->filled += k;
        s += k;
        n -= k;
        if (p->filled == p->size) queue(p);
    }
    return 0;
}

int ckpz_pump_drain(ckpz_pump *p)
{
    if (p->fill && p->filled) queue(p);
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
