/* basefile.h — the base checkpoint of a delta file, found and held in memory
 * (basefile.c). */
#ifndef CKPZ_BASEFILE_H
#define CKPZ_BASEFILE_H

#include <stddef.h>
#include <stdint.h>

#include "prefs.h"

typedef struct fio_base {
    char *path;       /* as named */
    void *data;       /* the base's original bytes */
    size_t size;
    int mapped;
    uint32_t depth;   /* delta files behind these bytes: 0 for a stand-alone file */
} fio_base;

/* Loads the base named path: an original file, or a .ckpz restored (through its own
 * chain, found beside it). Prints its errors; 0 or -1. */
int fio_base_load(const fio_prefs *p, const char *path, fio_base *b);
void fio_base_free(fio_base *b); /* accepts a zeroed base */
/* The name recorded in files coded against b: its file name without directories. */
const char *fio_base_record_name(const fio_base *b);
/* The base the .ckpz file src needs (*out NULL for a stand-alone file, for stdin
 * without --base, and for a base that is not beside src: the library names it where an
 * entry needs it): --base, or the name src recorded, found beside it. Loads it into
 * *cache unless it is there already. 0, or 1 after printing why. fio_base_for reads
 * src's head itself (a second open: regular files only); fio_base_for_head takes the
 * head of an input already open (fio_in_peek: a pipe or FIFO cannot be read twice),
 * head NULL for stdin. */
int fio_base_for(const fio_prefs *p, const char *src, fio_base *cache, const fio_base **out);
int fio_base_for_head(const fio_prefs *p, const char *src, const unsigned char *head, size_t hlen, fio_base *cache,
                      const fio_base **out);

#endif /* CKPZ_BASEFILE_H */
