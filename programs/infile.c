/* infile.c — the command line's inputs: a file, a pipe or stdin, read by the library's
 * fd adapter, or read at offsets for random access. A request of the library of at least
 * FIO_DIRECT bytes (a chunk) is read straight into its buffer; smaller ones (headers,
 * a zip's directory) are served from a buffer of ours, refilled FIO_DIRECT bytes at a
 * time, so that the chunk after a header finds few bytes there to copy. Nothing is read
 * ahead on a thread: on tmpfs the copy out of a read-ahead ring cost the calling thread
 * what the kernel's copy into the library's buffer does, and the whole process 10-12%
 * more CPU (step300_full.pt, -T1: -d 112 against 124 ms task-clock, compress 139
 * against 158, `-0 -c | cat` 50 against 70; 7 interleaved rounds, loaded 2-core
 * machine); the kernel reads a file on a disk ahead itself.
 *
 * .ckpz streams put end to end restore to their originals end to end, as zstd's frames
 * do: the library reads a stream's index up to the end of its input, so in split mode
 * the reader ends each stream where its self-checking trailer does, found by its tag,
 * checksum and the index length it records. An input that changes while it is read
 * (size, mtime, bytes read) is caught by fio_in_changed, so that no output holds
 * neither version and --rm never deletes the only whole copy. The first bytes can be
 * looked at before they are read (fio_in_peek): a pipe or FIFO cannot be opened and
 * read a second time, so whatever inspects the head (the base a delta file needs) reads
 * it from the same buffer the decoder then reads.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "display.h"
#include "fileio.h"

/* Bytes kept before new data in the buffer: a trailer that straddles two reads is still
 * seen whole (split mode looks for a stream's trailer in what it reads through the
 * buffer, FIO_DIRECT bytes at a time). */
#define FIO_HIST 40u
#define FIO_TRAILER 40u   /* doc/format.md, "Trailer" */

/* Reads until n bytes or the end of the input into dst; *got says how many. 0, or -1
 * on a read error (f->error). */
static int read_full(ckpz_fd *f, void *dst, size_t n, size_t *got)
{
    *got = 0;
    while (*got < n) {
        ptrdiff_t r = ckpz_fd_read(f, (char *)dst + *got, n - *got);
        if (r < 0) return -1;
        if (r == 0) break;
        *got += (size_t)r;
    }
    return 0;
}

static uint64_t ld64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t ld32le(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* CRC-32C, bit by bit: only ever run on 36 bytes of a candidate trailer. */
static uint32_t crc32c_small(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    while (n--) {
        c ^= *p++;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

/* Is t[0..40) the trailer of a stream of which it starts byte `at`? Its tag and
 * checksum hold, and its index ends where it starts: the odds that 40 bytes inside a
 * stream pass all three by chance are about 2^-96. */
static int is_trailer(const unsigned char *t, uint64_t at)
{
    uint64_t ioff = ld64le(t), ilen = ld64le(t + 8);
    return !memcmp(t + 32, "CKTR", 4) && ioff >= 32 && ioff <= at && ilen == at - ioff && ilen >= 24 &&
           crc32c_small(t, 36) == ld32le(t + 36);
}

/* Split mode, a regular file: is it one stream, its last 40 bytes the trailer of a
 * stream that starts at its first byte? Then no byte of it needs scanning for a trailer
 * (which cost 8% of -T1's decoding: coded bytes hold a 'C' every 256 bytes); a trailer
 * of the last of several streams counts its offsets from that stream's start and cannot
 * pass. A file that lies so (two streams, the last trailer forged) fails the index
 * check, as a corrupt file does. */
static void look_at_tail(fio_in *in)
{
    unsigned char t[FIO_TRAILER];
    in->tail_known = 1;
    if (!in->regular || in->size_hint == CKPZ_SIZE_UNKNOWN || in->size_hint < FIO_TRAILER + 32) return;
    ckpz_fd f = {in->io.fd, 0, 0}; /* a failed look is no error: the scan finds the end */
    if (ckpz_fd_pread(&f, t, FIO_TRAILER, in->start + in->size_hint - FIO_TRAILER) == 0)
        in->one_stream = is_trailer(t, in->size_hint - FIO_TRAILER);
}

/* Split mode: where the bytes that may go to the library end in buf (a stream's end
 * found in it, or all of it). */
static size_t split_end(fio_in *in)
{
    if (in->stream_end) return in->limit;
    if (!in->tail_known && in->consumed == 0) look_at_tail(in);
    if (in->one_stream) return in->len;
    if (in->len >= FIO_TRAILER) {
        /* ends e in (scanned, len]: the tag sits at e - 8 */
        size_t t = in->scanned + 1 >= 8 ? in->scanned + 1 - 8 : 0, thi = in->len - 8;
        if (t < FIO_TRAILER - 8) t = FIO_TRAILER - 8;
        while (t <= thi) {
            /* memchr and a compare: several times faster than memmem on coded bytes */
            const unsigned char *hit = memchr(in->buf + t, 'C', thi + 1 - t);
            if (!hit) break;
            t = (size_t)(hit - in->buf);
            if (memcmp(hit, "CKTR", 4) != 0) {
                t++;
                continue;
            }
            size_t e = t + 8;
            /* the trailer's first byte as an offset in the current stream */
            int64_t at = (int64_t)in->stream_pos + (int64_t)(e - FIO_TRAILER) - (int64_t)in->pos;
            if (e > in->pos && at >= 0 && is_trailer(in->buf + e - FIO_TRAILER, (uint64_t)at)) {
                in->stream_end = 1;
                in->limit = in->scanned = e;
                return e;
            }
            t++;
        }
    }
    in->scanned = in->len;
    return in->len;
}

/* Refills the buffer (all of it was handed over), keeping its last FIO_HIST bytes, with
 * up to want bytes (FIO_BUF_SIZE at most). */
static int refill(fio_in *in, size_t want)
{
    size_t keep = in->split ? (in->len < FIO_HIST ? in->len : FIO_HIST) : 0;
    memmove(in->buf, in->buf + in->len - keep, keep);
    in->pos = in->len = in->scanned = keep;
    size_t r;
    if (read_full(&in->io, in->buf + keep, want, &r) != 0) {
        in->err = in->io.error;
        return -1;
    }
    in->len += r;
    if (r < want) in->eof = 1;
    return 0;
}

ptrdiff_t fio_in_read(void *opaque, void *dst, size_t n)
{
    fio_in *in = opaque;
    size_t got = 0;
    while (got < n) {
        size_t end = in->split ? split_end(in) : in->len;
        if (in->pos < end) {
            size_t k = end - in->pos;
            if (k > n - got) k = n - got;
            memcpy((char *)dst + got, in->buf + in->pos, k);
            in->pos += k;
            got += k;
            /* counted at once: split_end places a trailer by stream_pos */
            in->stream_pos += k;
            in->consumed += k;
            continue;
        }
        if (in->stream_end || in->eof) break;
        /* a big request of the library lands in its own buffer: no copy of ours. In split
         * mode too: the library reads past a stream's end only in its index, in reads
         * under 64 KiB (ckpz.h: ckpz_decompress_io), so a big one is a frame's, inside the
         * stream, and holds no trailer to look for (a pipe of stored chunks had every
         * byte copied out of our buffer and scanned for one) */
        if (n - got >= FIO_DIRECT) {
            size_t r;
            if (read_full(&in->io, (char *)dst + got, n - got, &r) != 0) {
                in->err = in->io.error;
                return -1;
            }
            if (r < n - got) in->eof = 1;
            got += r;
            in->stream_pos += r;
            in->consumed += r;
            in->pos = in->len = in->scanned = 0; /* the bytes kept for a trailer's start came before these */
            break;
        }
        /* a small request reads only FIO_DIRECT ahead, so that the big one after it (a
         * chunk after its header) finds few bytes here to copy */
        if (refill(in, FIO_DIRECT) != 0) return -1;
    }
    return (ptrdiff_t)got;
}

int fio_in_peek(fio_in *in, const unsigned char **head, size_t *len)
{
    /* Only before the first read: the bytes stay in the buffer, where fio_in_read hands
     * them over first, so a pipe or FIFO (which cannot be read twice) loses nothing. */
    if (in->pos == in->len && !in->eof && in->consumed == 0 && refill(in, FIO_BUF_SIZE) != 0) return -1;
    *head = in->buf + in->pos;
    *len = in->len - in->pos;
    return 0;
}

int fio_in_next_stream(fio_in *in)
{
    in->stream_end = 0;
    in->stream_pos = 0;
    if (in->pos < in->len) return 1;
    if (in->eof) return 0;
    if (refill(in, FIO_BUF_SIZE) != 0) return -1;
    return in->pos < in->len;
}

int fio_in_pread(void *opaque, void *dst, size_t n, uint64_t off)
{
    fio_in *in = opaque;
    if (ckpz_fd_pread(&in->io, dst, n, off) == 0) return 0;
    in->err = in->io.error;
    return -1;
}

int fio_in_open(fio_in *in, const char *name, const fio_prefs *p, int need_regular)
{
    memset(in, 0, sizeof(*in));
    in->io = (ckpz_fd){-1, 0, 0};
    in->size_hint = CKPZ_SIZE_UNKNOWN;
    if (strcmp(name, "-") == 0) {
        in->name = "stdin";
        in->is_stdin = 1;
        in->io.fd = STDIN_FILENO;
        if (isatty(STDIN_FILENO) && !p->force) {
            fio_error("stdin is a terminal, aborting (use -f to force)");
            return -1;
        }
    } else {
        struct stat st;
        in->name = name;
        /* Random access on a FIFO cannot work: say so before an open that would wait
         * for a writer. */
        if (need_regular && stat(name, &st) == 0 && S_ISFIFO(st.st_mode)) {
            fio_error("%s: needs a regular file (random access), not a pipe", name);
            return -1;
        }
        in->io.fd = open(name, O_RDONLY);
        if (in->io.fd < 0) {
            fio_error("%s: %s", name, strerror(errno));
            return -1;
        }
    }
    if (fstat(in->io.fd, &in->st) != 0) {
        fio_error("%s: %s", in->name, strerror(errno));
        goto fail;
    }
    if (S_ISDIR(in->st.st_mode)) {
        fio_error("%s: is a directory -- ignored", in->name);
        goto fail;
    }
    in->regular = S_ISREG(in->st.st_mode);
    if (!in->regular && !in->is_stdin && !S_ISFIFO(in->st.st_mode)) {
        fio_error("%s: not a regular file -- ignored", in->name);
        goto fail;
    }
    if (need_regular && !in->regular) {
        fio_error("%s: needs a regular file (random access), not a pipe", in->name);
        goto fail;
    }
    if (!in->regular) fio_pipe_widen(in->io.fd);
    if (in->regular) {
        off_t cur = in->is_stdin ? lseek(in->io.fd, 0, SEEK_CUR) : 0;
        if (cur < 0) cur = 0;
        in->start = (uint64_t)cur;
        in->size_hint = in->st.st_size > cur ? (uint64_t)(in->st.st_size - cur) : 0;
    }
    if (!need_regular) {
        in->buf = malloc(FIO_HIST + FIO_BUF_SIZE);
        if (!in->buf) {
            fio_error("%s: out of memory", in->name);
            goto fail;
        }
    }
    return 0;
fail:
    if (!in->is_stdin && in->io.fd >= 0) close(in->io.fd);
    in->io.fd = -1;
    return -1;
}

/* ---- a regular input through a mapping ----------------------------------------------
 * Compressing, the library codes a source in memory where it lies (io_source_view): a
 * regular input mapped costs no read's copy into its buffers (the kernel's
 * _copy_to_iter and page-cache lookups were 20% of `ckpz -T1 F -o OUT`'s samples on
 * tmpfs). A mapped file that another process truncates raises SIGBUS where its bytes
 * are gone: the handler (outfile.c) finds the mapping among those noted
 * (fio_map_note), names the file, removes the temporary output and exits 1. */
#define FIO_MAP_MIN (4u << 20) /* smaller inputs: reading costs less than mapping */
int fio_in_map(fio_in *in)
{
    if (!in->regular || in->is_stdin || in->start || in->size_hint < FIO_MAP_MIN || in->size_hint > SIZE_MAX ||
        in->consumed || in->len || in->map)
        return 0;
    void *m = mmap(NULL, (size_t)in->size_hint, PROT_READ, MAP_PRIVATE, in->io.fd, 0);
    if (m == MAP_FAILED) return 0; /* read as before */
    madvise(m, (size_t)in->size_hint, MADV_SEQUENTIAL);
    if (fio_map_note(m, (size_t)in->size_hint, in->name, "compressed") != 0) {
        munmap(m, (size_t)in->size_hint); /* no SIGBUS could name it: read it */
        return 0;
    }
    in->map = m;
    return 1;
}

static void unmap(fio_in *in)
{
    if (!in->map) return;
    fio_unmap(in->map, (size_t)in->size_hint);
    in->map = NULL;
}

void fio_in_close(fio_in *in)
{
    unmap(in);
    if (!in->is_stdin && in->io.fd >= 0) close(in->io.fd);
    in->io.fd = -1;
    free(in->buf);
    in->buf = NULL;
}

void fio_in_source(fio_in *in, ckpz_source *src)
{
    if (in->map) {
        in->mem = (ckpz_mem){.data = in->map, .size = (size_t)in->size_hint};
        ckpz_source_mem(src, &in->mem);
        return;
    }
    ckpz_source_init(src);
    src->read = fio_in_read;
    src->pread = fio_in_pread;
    src->opaque = in;
    src->size = in->size_hint;
}

int fio_in_changed(fio_in *in, const char *doing, int check_count)
{
    struct stat now;
    if (!in->regular) return 0;
    if (in->map) in->consumed = in->mem.pos; /* what the library took of the mapping */
    if (fstat(in->io.fd, &now) != 0) {
        fio_error("%s: cannot check it after %s: %s", in->name, doing, strerror(errno));
        return 1;
    }
    if (now.st_size != in->st.st_size || now.st_mtim.tv_sec != in->st.st_mtim.tv_sec ||
        now.st_mtim.tv_nsec != in->st.st_mtim.tv_nsec) {
        fio_error("%s: changed while %s (%lld bytes at the start, %lld at the end); output discarded", in->name, doing,
                  (long long)in->st.st_size, (long long)now.st_size);
        return 1;
    }
    /* a size of 0 at the start is also what /proc and /sys files say: no count to hold */
    if (check_count && in->st.st_size > 0 && in->consumed != in->size_hint) {
        fio_error("%s: %llu bytes read of the %llu it had at the start: it changed (or could not be read whole) "
                  "while %s; output discarded",
                  in->name, (unsigned long long)in->consumed, (unsigned long long)in->size_hint, doing);
        return 1;
    }
    return 0;
}

int fio_load_file(const char *path, void **data, size_t *size)
{
    fio_prefs p;
    fio_in in;
    unsigned char *buf = NULL;
    size_t cap = 0, len = 0;
    fio_prefs_init(&p);
    p.verbosity = fio_verbosity();
    if (fio_in_open(&in, path, &p, 0) != 0) return -1;
    cap = in.size_hint != CKPZ_SIZE_UNKNOWN ? (size_t)in.size_hint + 1 : (64u << 20);
    for (;;) {
        ptrdiff_t r;
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) goto nomem;
            buf = nb;
            cap *= 2;
        }
        if (!buf && !(buf = malloc(cap))) goto nomem;
        r = fio_in_read(&in, buf + len, cap - len);
        if (r < 0) {
            fio_error("%s: read error: %s", in.name, strerror(in.err));
            free(buf);
            fio_in_close(&in);
            return -1;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    fio_in_close(&in);
    *data = buf;
    *size = len;
    return 0;
nomem:
    fio_error("%s: out of memory", in.name);
    free(buf);
    fio_in_close(&in);
    return -1;
}

int fio_read_head(const char *path, unsigned char *head, size_t cap, size_t *len)
{
    ckpz_fd f = {open(path, O_RDONLY), 0, 0};
    if (f.fd < 0) return -1;
    read_full(&f, head, cap, len); /* what it read before an error is what there is */
    close(f.fd);
    return 0;
}
