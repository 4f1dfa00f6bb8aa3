/* memfile.h — the tests' and fuzz harnesses' memory I/O: a file held in memory, read
 * through a pread callback (ckpz_archive_open, ckpz_predict_file), and a reader and a
 * writer (with a patch callback) for the streaming calls. */
#ifndef CKPZ_TEST_MEMFILE_H
#define CKPZ_TEST_MEMFILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    const uint8_t *p;
    size_t n;
} mfile;

/* A ckpz_pread_fn over an mfile: refuses reads past its end. */
static inline int m_pread(void *v, void *buf, size_t n, uint64_t off)
{
    mfile *f = v;
    if (off > f->n || n > f->n - off) return -1;
    memcpy(buf, f->p + off, n);
    return 0;
}

/* A reader over memory for ckpz_read_fn; piece > 0 caps each read (odd-sized short reads). */
typedef struct {
    const uint8_t *p;
    size_t n, pos, piece;
} mreader;

static inline ptrdiff_t m_read(void *v, void *buf, size_t n)
{
    mreader *m = v;
    if (m->piece && n > m->piece) n = m->piece;
    if (n > m->n - m->pos) n = m->n - m->pos;
    memcpy(buf, m->p + m->pos, n);
    m->pos += n;
    return (ptrdiff_t)n;
}

/* A fixed-capacity writer for ckpz_write_fn: writing past cap fails and sets overflow. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int overflow;
    int patches; /* m_patch calls */
} mwriter;

static inline int m_write(void *v, const void *buf, size_t n)
{
    mwriter *w = v;
    if (n > w->cap - w->n) {
        w->overflow = 1;
        return -1;
    }
    memcpy(w->p + w->n, buf, n);
    w->n += n;
    return 0;
}

/* ckpz_params.patch over an mwriter: rewrites bytes already written. */
static inline int m_patch(void *v, const void *buf, size_t n, uint64_t off)
{
    mwriter *w = v;
    if (off > w->n || n > w->n - off) return -1;
    memcpy(w->p + off, buf, n);
    w->patches++;
    return 0;
}

#endif
