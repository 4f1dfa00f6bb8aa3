/* formats.h — first stage of the data path: find the tensors in an input file.
 *
 * A format reader looks at a prefix of the input and describes the whole file as an
 * ordered list of segments that tile it without gaps: tensor data (name, dtype, shape,
 * byte range) and opaque bytes (headers, JSON, padding, anything not understood). The
 * list always ends with an open-ended opaque segment, so bytes past what the header
 * declares (or a file shorter than declared) still round-trip exactly. Readers never
 * fail on odd input: what they cannot trust becomes opaque bytes.
 *
 * Some formats cannot be described from their start alone: a zip archive (torch.save,
 * .npz) puts each member's header in front of that member's data, all through the file.
 * Their readers describe what the prefix shows and end the list with a resume segment
 * at the next header; when the chunker gets there it calls fmt_resume with the bytes
 * from that point on, and the reader describes the next stretch the same way.
 */
#ifndef CKPZ_FORMATS_H
#define CKPZ_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include "ckpz.h"

#define FMT_LEN_OPEN UINT64_MAX   /* segment runs to the end of the input */
#define FMT_PROBE_MAX (256u << 20) /* largest prefix a reader may ask for */

typedef struct fmt_segment {
    ckpz_dtype dtype;   /* CKPZ_DTYPE_NONE = opaque bytes */
    char *name;         /* malloc'd, NUL-terminated; NULL for opaque bytes */
    uint32_t ndim;
    uint64_t *shape;    /* malloc'd, ndim values; NULL when ndim == 0 */
    uint64_t offset;    /* byte offset in the input */
    uint64_t length;    /* bytes, or FMT_LEN_OPEN (only the last segment) */
    int resume;         /* last segment only (opaque, open): describe from here on with
                           fmt_resume once the bytes are at hand */
} fmt_segment;

typedef enum { FMT_DONE = 0, FMT_NEED_MORE = 1, FMT_ERROR = -1 } fmt_status;

struct fmt_list;
/* State a piecewise reader keeps between calls (e.g. the storages a torch pickle named). */
typedef struct fmt_resumer {
    /* Pushes segments for the input from byte `at` on, given p[0..len) = the bytes
     * from there (eof: the input ends at at + len), ending with fmt_push_resume or
     * nothing (the rest is then opaque). FMT_NEED_MORE with *need > len asks for more
     * bytes (at most FMT_PROBE_MAX); FMT_ERROR makes the rest of the input opaque. */
    fmt_status (*resume)(struct fmt_resumer *r, struct fmt_list *l, uint64_t at, const uint8_t *p, size_t len,
                         int eof, size_t *need);
    void (*free)(struct fmt_resumer *r);
} fmt_resumer;

typedef struct fmt_list {
    ckpz_input_format format; /* what was recognised */
    fmt_segment *seg;
    size_t n, cap;
    fmt_resumer *resumer;     /* set by piecewise readers; freed by fmt_list_free */
} fmt_list;

/* Describes an input from its first `len` bytes (`total` = input size or
 * CKPZ_SIZE_UNKNOWN; len == total when the whole input is in the prefix).
 * - FMT_DONE: *out holds the segment list (caller frees with fmt_list_free).
 * - FMT_NEED_MORE: the reader needs a prefix of *need bytes (> len, <= FMT_PROBE_MAX);
 *   call again with more bytes (or with len == total at end of input).
 * - FMT_ERROR: only when the caller forced a format (requested != AUTO) that the input
 *   does not match, or on allocation failure; a message goes to why[].
 * raw_dtype applies to CKPZ_INPUT_RAW (and to AUTO when not NONE: a raw dump of that type). */
fmt_status fmt_describe(const uint8_t *prefix, size_t len, uint64_t total,
                        ckpz_input_format requested, ckpz_dtype raw_dtype,
                        fmt_list *out, size_t *need, char *why, size_t whylen);

void fmt_list_free(fmt_list *l);
/* Drops the segments after the first n (those a reader pushed before finding them wrong). */
void fmt_list_drop(fmt_list *l, size_t n);

/* Continues a list whose last segment is a resume segment (see fmt_resumer), with
 * p[0..len) = the input from that segment's offset on. FMT_DONE: the resume segment has
 * been replaced by segments that tile the input from there (ending with another resume
 * segment or the open tail). FMT_NEED_MORE: call again with *need bytes (or eof). */
fmt_status fmt_resume(fmt_list *l, const uint8_t *p, size_t len, int eof, size_t *need);

/* Per-format readers, called by fmt_describe; same contract, except that they
 * return FMT_ERROR when the input is not theirs (fmt_describe then tries the next). */
fmt_status fmt_safetensors(const uint8_t *p, size_t len, uint64_t total, fmt_list *out,
                           size_t *need, char *why, size_t whylen);
fmt_status fmt_npy(const uint8_t *p, size_t len, uint64_t total, fmt_list *out,
                   size_t *need, char *why, size_t whylen);
/* torch.save zip archives and NumPy .npz: piecewise (see zip.h); FMT_ERROR when the
 * first zip member is not data.pkl (torch) or a .npy file (npz). */
fmt_status fmt_torch(const uint8_t *p, size_t len, uint64_t total, fmt_list *out,
                     size_t *need, char *why, size_t whylen);
fmt_status fmt_npz(const uint8_t *p, size_t len, uint64_t total, fmt_list *out,
                   size_t *need, char *why, size_t whylen);

/* The .npy header at b[0..len) of a .npy file of `total` bytes (or CKPZ_SIZE_UNKNOWN),
 * shared by the .npy and .npz readers. FMT_DONE: *info describes it (dtype NONE when the
 * data is not a tensor this library models or runs past total); FMT_NEED_MORE: *need
 * bytes are needed; FMT_ERROR: not a .npy header (why[] says why). */
#define NPY_MAX_NDIM 64
typedef struct npy_info {
    ckpz_dtype dtype;
    uint32_t ndim;
    uint64_t shape[NPY_MAX_NDIM];
    uint64_t data_off;   /* the header's length: the data starts here */
    uint64_t nbytes;     /* the data's length (when dtype != NONE) */
} npy_info;
fmt_status npy_parse_header(const uint8_t *b, size_t len, uint64_t total, npy_info *info,
                            size_t *need, char *why, size_t whylen);

/* The common start of every reader: clears *need, why and *out, and clamps *len to
 * total. Returns -1 (the reader then returns FMT_ERROR) when out is NULL. */
int fmt_begin(fmt_list *out, size_t *len, uint64_t total, size_t *need, char *why, size_t whylen);

/* Writes a reason to why[0..whylen) (printf format); accepts NULL or 0. */
void fmt_why(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* List building helpers shared by the readers. Return 0, or -1 on allocation failure. */
int fmt_push(fmt_list *l, ckpz_dtype dtype, const char *name, size_t name_len,
             uint32_t ndim, const uint64_t *shape, uint64_t offset, uint64_t length);
/* Appends the resume segment: the reader wants to look again at `offset`. */
int fmt_push_resume(fmt_list *l, uint64_t offset);
/* Appends opaque segments so that the list tiles [0, end) and then an open tail. */
int fmt_finish(fmt_list *l);

#endif
