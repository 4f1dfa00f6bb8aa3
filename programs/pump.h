/* pump.h — one thread that moves the command line's file bytes while the calling thread
 * codes (pump.c): reads ahead from a regular input file, or writes behind to an output
 * file, through a ring of a few buffers.
 *
 * With one coding thread, reading and writing a file cost the calling thread as much as
 * a third of the coding time (page-cache copies and tmpfs page allocation are work the
 * kernel does on the caller's core); the pump moves that work to a core of its own, as
 * the in-memory benchmark (ckpz -b) never pays it. It is only used where a read or a
 * write cannot wait forever (regular files), so that stopping it never hangs.
 */
#ifndef CKPZ_PUMP_H
#define CKPZ_PUMP_H

#include <stddef.h>

#include "ckpz.h"

#define FIO_PUMP_MAX 8 /* buffers at most */

typedef struct fio_pump fio_pump;

/* Does coding on `threads` threads (0: all cores) leave a core free for a pump? Where
 * coding takes every core, a pump's thread only competes with it: its hand-overs cost
 * 5-10% more CPU than the caller's own reads and writes, and on a 2-core machine loaded
 * by other work -T1's file to file ran 1.2-1.3x slower with one than without. */
int fio_pump_wanted(int threads);

/* A pump over io (which it uses alone until fio_pump_stop), reading (writing 0) or
 * writing, through nbuf (2..FIO_PUMP_MAX) buffers of size bytes that start `lead` bytes
 * into their allocations (room a reader keeps for bytes that came before). A reader
 * needs 2 (one handed over, one being read); every buffer is fresh memory the process
 * faults in, a cost paid per file. NULL when out of memory or no thread. */
fio_pump *fio_pump_start(ckpz_fd *io, int writing, int nbuf, size_t size, size_t lead);

/* Reading: the next buffer read ahead (the previous one goes back to the thread), its
 * length (less than size only at the end of the input, 0 past it) in *len. NULL on a
 * read error (errno of it from fio_pump_error). */
unsigned char *fio_pump_next(fio_pump *p, size_t *len);

/* Writing: a free buffer of size bytes to fill (waits for one), NULL after a write
 * error; fio_pump_push queues it with its first len bytes to write. */
unsigned char *fio_pump_buffer(fio_pump *p);
void fio_pump_push(fio_pump *p, size_t len);
/* Writing: waits until every queued buffer is written; 0, or -1 after a write error. */
int fio_pump_drain(fio_pump *p);

/* The first error: an errno, or FIO_ENOPROGRESS-like -1 for a write of 0 bytes; 0. */
int fio_pump_error(fio_pump *p);

/* Stops the thread (a reader stops after its current read) and frees the pump; the
 * descriptor's byte count and first error are left in io. Accepts NULL. */
void fio_pump_stop(fio_pump *p);

#endif
