/* fileio.h — the command line's files: inputs (infile.c) and outputs with their
 * temporary-file commit and the signals that clean up after them (outfile.c). Both move
 * their bytes through the library's fd adapter (ckpz_fd) and hand the library a source
 * and a sink of their own buffering. Functions that fail print why ("ckpz: FILE:
 * reason") unless said otherwise.
 */
#ifndef CKPZ_FILEIO_H
#define CKPZ_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define CKPZ_EXPERIMENTAL /* ckpz_publish_*: how outputs are put in place */
#include "ckpz.h"
#include "prefs.h"

#define FIO_BUF_SIZE (4u << 20)
/* A read or write of at least this many bytes moves them between the descriptor and the
 * library's buffer in one system call, not through FIO_BUF_SIZE's (see infile.c) */
#define FIO_DIRECT (64u << 10)

/* ---- input (infile.c) ---- */
typedef struct fio_in {
    const char *name;   /* for messages */
    ckpz_fd io;         /* the library's fd adapter moves the bytes */
    int is_stdin;
    int regular;
    struct stat st;
    uint64_t size_hint; /* CKPZ_SIZE_UNKNOWN for pipes */
    unsigned char *buf; /* FIO_HIST bytes of what came before, then FIO_BUF_SIZE */
    size_t pos, len;
    int eof;
    int err;            /* errno of a failed read */
    uint64_t consumed;  /* bytes handed to the library, all streams together */
    /* Concatenated .ckpz streams (-d, -t): the library reads a stream's index up to the
     * end of its input, so each stream is made to end where its trailer does. */
    int split;
    uint64_t stream_pos; /* bytes of the current stream handed over */
    size_t scanned;      /* buffer offsets up to this were tried as the end of a trailer */
    size_t limit;        /* where the current stream ends in buf, once stream_end */
    int stream_end;
    int tail_known;      /* the file's last 40 bytes were looked at (regular files) */
    int one_stream;      /* ... and they are the trailer of a stream as long as the file */
    uint64_t start;      /* offset of the first byte read (stdin may start further on) */
    /* A regular file compressed through a mapping (fio_in_map) of its size_hint bytes:
     * the source is memory over it, which the library codes where it lies, with no copy
     * into its buffers. */
    void *map;
    ckpz_mem mem;
} fio_in;

/* (outfile.c) A pipe or FIFO at fd holds FIO_PIPE_SIZE bytes where the system lets it (Linux
 * F_SETPIPE_SZ; 64 KiB by default): each end then wakes the other for every 1 MiB, not
 * every 64 KiB. Anything else, or a refusal, is left as it is. */
#define FIO_PIPE_SIZE (1 << 20)
void fio_pipe_widen(int fd);
/* Opens name ("-" = stdin). need_regular: random access (list, extract). 0 or -1. */
int fio_in_open(fio_in *in, const char *name, const fio_prefs *p, int need_regular);
void fio_in_close(fio_in *in);
/* Maps a regular file of at least FIO_MAP_MIN bytes not yet read from (compression), so
 * that fio_in_source is memory over it; 1 when mapped, 0 when read as before. A file
 * that shrinks while mapped ends the process with an error naming it (SIGBUS: see
 * fio_install_signal_handlers), its temporary output removed. */
int fio_in_map(fio_in *in);
/* in as a source: memory over its mapping, or its buffered reads (split at stream ends
 * in split mode); its size. */
void fio_in_source(fio_in *in, ckpz_source *src);
/* ckpz_read_fn: fills as much of n as the input has; 0 only at the end (of the current
 * stream, in split mode). */
ptrdiff_t fio_in_read(void *in, void *dst, size_t n);
/* ckpz_pread_fn: a short read fails with err left 0 (the library reports truncation). */
int fio_in_pread(void *in, void *dst, size_t n, uint64_t off);
/* Before the first read: the input's first bytes, up to FIO_BUF_SIZE (fewer only at its
 * end), read into the buffer without being consumed: the next reads hand them over first.
 * How the head of a pipe or FIFO is looked at (the base a delta file needs) without
 * losing it. 0, or -1 on a read error (err set). */
int fio_in_peek(fio_in *in, const unsigned char **head, size_t *len);
/* Split mode, after a stream was decoded: 1 when another one follows (bytes remain),
 * 0 at the end of the input, -1 on a read error. */
int fio_in_next_stream(fio_in *in);
/* Did the regular file in change while it was read (`doing` says how, for the
 * message)? Its size and mtime against those at open and (check_count) the bytes
 * handed over against its size. Prints why; 1 when it changed. */
int fio_in_changed(fio_in *in, const char *doing, int check_count);
/* Reads a whole regular file (or "-") into malloc'd memory. 0 or -1. */
int fio_load_file(const char *path, void **data, size_t *size);
/* Reads up to cap bytes from the start of path; 0, or -1 with errno (prints nothing). */
int fio_read_head(const char *path, unsigned char *head, size_t cap, size_t *len);

/* ---- output (outfile.c) ---- */
typedef struct fio_out {
    const char *name;   /* final name, or "stdout" */
    ckpz_fd io;         /* the library's fd adapter moves the bytes */
    int is_stdout;
    int direct;         /* an existing device or fifo (-o /dev/null): no temp, no rename */
    int temp;           /* writing a temporary file (pub): anonymous, or a named one */
    ckpz_publish *pub;  /* the library's publish of it (lib/file/publish.c) */
    unsigned char *buf;    /* being filled (malloc'd; NULL once a pump writes) */
    size_t len;
    int can_pump;          /* a regular file: written behind past its first FIO_BUF_SIZE bytes */
    ckpz_pump *pump;    /* the thread writing behind (ckpz_pump_*), or NULL */
    size_t pump_size;   /* its buffers' size: room for a frame where the output is compressed */
    ckpz_lender lender; /* the sink: our writes, the pump's buffers lent (fio_out_sink) */
    uint64_t bytes;
    int err;            /* errno of a failed write, or FIO_ENOPROGRESS */
} fio_out;

/* o->err when write() returned 0: no errno says why (ckpz_fd_write then leaves errno 0),
 * and trying again would spin */
#define FIO_ENOPROGRESS (-1)
const char *fio_io_strerror(int e);

/* Removes the current temporary output on SIGINT/SIGTERM/SIGHUP, then dies of the
 * signal as usual. Call once, early. */
void fio_install_signal_handlers(void);
/* A file's mapping the SIGBUS handler names (outfile.c): noted before it is used; -1
 * when every slot is taken (the input is then read instead; a base stays mapped, a
 * SIGBUS on it fatal). fio_unmap unmaps a mapping, noted or not, its slot freed first. */
int fio_map_note(const void *at, size_t len, const char *name, const char *doing);
void fio_unmap(void *at, size_t len);

/* Opens the output: stdout (name NULL), an existing device or fifo, or a temporary file
 * beside `name`. in_st (may be NULL) guards against writing over the input. binary:
 * refuse a terminal as stdout. 0, or -1 (then call fio_out_abort). */
int fio_out_open(fio_out *o, const char *name, const struct stat *in_st, const fio_prefs *p, int binary);
/* o as a sink: its buffered writes, patch for a temporary file (written from its
 * start), and, once a pump writes behind, its buffers lent (ckpz_sink_lender). o must
 * stay where it is while the sink is used. */
void fio_out_sink(fio_out *o, ckpz_sink *dst);
int fio_out_write(void *o, const void *src, size_t n); /* a ckpz_write_fn */
/* Drops a failed output: the temporary file goes, an existing final file is untouched. */
void fio_out_abort(fio_out *o);
/* Finishes the output: flush; for a file: mode and mtime of in_st (when given), fsync if
 * durable, close, put in place under its name (and fsync the directory if durable). On
 * failure no file is left under the final name that was not there before. 0 or -1. */
int fio_out_commit(fio_out *o, const struct stat *in_st, const fio_prefs *p, int durable);

/* Why a library call on in and out failed: our errno when their I/O failed, else the
 * library's message (which names chunk and tensor). in and out may be NULL. */
void fio_report(ckpz_ctx *ctx, ckpz_error e, const fio_in *in, const fio_out *out);

#endif /* CKPZ_FILEIO_H */
