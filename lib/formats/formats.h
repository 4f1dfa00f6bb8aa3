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
 * at the next header; when the consumer gets there it calls fmt_resume with the bytes
 * from that point on, and the reader describes the next stretch the same way.
 *
 * Each format is one row of a table (fmt_reader: id, name, sniff, describe, resume),
 * and one driver (drive.c) runs the protocol for every consumer — the compressor's
 * chunker, the predictor and delta matching — over a fmt_source that says how to read
 * the input (a stream, pread, memory): offer a prefix, give what a reader asks for,
 * resume at resume segments. Errors are codes (fmt_status), never compared strings.
 */
#ifndef CKPZ_FORMATS_H
#define CKPZ_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include "ckpz.h"

#define FMT_LEN_OPEN UINT64_MAX   /* segment runs to the end of the input */
#define FMT_PROBE_MAX (256u << 20) /* largest prefix a reader may ask for */

/* What a file says of the optimizer whose state a tensor is: the param group's settings
 * (torch.save'd optimizer state dicts: pickle.c), for the lossy mode auto (auto.h). */
typedef struct fmt_optim {
    double beta2;     /* Adam's beta2, in (0, 1); 0 in the group that only states the lr */
    double lr;        /* the group's learning rate, > 0; 0 = not stated */
    const char *from; /* where it was read: "optimizer.param_groups[0]" */
} fmt_optim;

typedef struct fmt_segment {
    ckpz_dtype dtype;   /* CKPZ_DTYPE_NONE = opaque bytes */
    char *name;         /* NUL-terminated; NULL for opaque bytes */
    uint32_t ndim;
    uint64_t *shape;    /* ndim values; NULL when ndim == 0. The name and shape live in
                           the list's blocks (fmt_push) until fmt_list_free */
    uint64_t offset;    /* byte offset in the input */
    uint64_t length;    /* bytes, or FMT_LEN_OPEN (only the last segment) */
    int resume;         /* last segment only (opaque, open): describe from here on with
                           fmt_resume once the bytes are at hand */
    int text;           /* opaque bytes the reader knows are a text header (a JSON
                           header): LZ at its fastest level codes them about as small */
    const fmt_optim *optim; /* a tensor of optimizer state: its param group's settings
                               (owned by the reader's state), or NULL */
} fmt_segment;

/* What a reader call ends with. Errors are codes: callers never look at why[] to tell
 * them apart (why[] is for people). */
typedef enum {
    FMT_DONE = 0,
    FMT_NEED_MORE = 1,  /* *need bytes are needed (more than given, at most FMT_PROBE_MAX) */
    FMT_ERROR = -1,     /* the input is not of this format, or the request is invalid (why[]) */
    FMT_NOMEM = -2,     /* an allocation failed */
    FMT_READ = -3,      /* driver only: the source could not be read (why[]) */
    FMT_PROTOCOL = -4   /* driver only: a reader asked for bytes against the protocol (why[]) */
} fmt_status;

/* What the caller asks for: a format (or AUTO), and for raw input its element type and,
 * optionally, its shape. */
typedef struct fmt_request {
    ckpz_input_format format;
    ckpz_dtype raw_dtype;      /* RAW, and AUTO when not NONE: a raw dump of that type */
    uint32_t raw_ndim;         /* 0: one dimension, as many elements as the input holds */
    const uint64_t *raw_shape; /* raw_ndim dimensions: the input must hold exactly them */
    struct fmt_spare *spare;   /* memory the list described into takes first (fmt_spare), or NULL */
} fmt_request;

/* The bytes of a raw tensor of rq's shape, or UINT64_MAX when it has none or they
 * overflow. */
uint64_t fmt_raw_bytes(const fmt_request *rq);
/* Why an input of `size` bytes is not rq's shaped raw tensor, in why[]. */
void fmt_raw_mismatch(const fmt_request *rq, uint64_t size, char *why, size_t whylen);

struct fmt_list;

/* One input format: a row of the reader table (readers.c). Adding a format is a new
 * file defining its row, the row in the table, and the enum value in ckpz.h. */
typedef struct fmt_reader {
    ckpz_input_format id;
    const char *name;    /* as --format and ckpz_input_format_name spell it */
    /* Detection (AUTO): may p[0..len), the start of the input, be this format? Cheap and
     * conservative: 1 sends the input to describe, which decides. NULL: never detected
     * (AUTO itself, RAW: what detection falls back to). */
    int (*sniff)(const uint8_t *p, size_t len);
    /* Describes an input from its first `len` bytes (total = its size or
     * CKPZ_SIZE_UNKNOWN; len == total when the whole input is in the prefix):
     * FMT_DONE with *out (fmt_list_free frees it), FMT_NEED_MORE with *need > len
     * (<= FMT_PROBE_MAX), FMT_ERROR when the input is not this format (a reason in
     * why[]), FMT_NOMEM. On anything but FMT_DONE, *out holds nothing. Never fails on
     * odd input of its own format: what it cannot trust becomes opaque bytes. */
    fmt_status (*describe)(const uint8_t *p, size_t len, uint64_t total, const fmt_request *rq, struct fmt_list *out,
                           size_t *need, char *why, size_t whylen);
    /* Piecewise formats (NULL otherwise): pushes segments for the input from byte `at`
     * on, given p[0..len) = the bytes from there (eof: the input ends at at + len),
     * ending with fmt_push_resume or nothing (the rest is then opaque). FMT_NEED_MORE
     * with *need > len asks for more bytes (at most FMT_PROBE_MAX); FMT_NOMEM. `state`
     * is what describe left in the list (fmt_list.state). */
    fmt_status (*resume)(void *state, struct fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof,
                         size_t *need);
    void (*free_state)(void *state);
} fmt_reader;

/* A list's memory kept for the next list (fmt_list_recycle): its segment array and name
 * blocks, as allocated, which a list given it takes as it grows instead of new memory
 * (a fresh page faults on its first write: describing 4,800 small tensors wrote ~500 KB). */
typedef struct fmt_spare { /* see fmt_list_recycle */
    fmt_segment *seg;
    size_t cap;
    struct fmt_block *blocks;
} fmt_spare;

typedef struct fmt_list {
    ckpz_input_format format; /* what was recognised */
    fmt_segment *seg;
    size_t n, cap;
    const fmt_reader *reader; /* the reader that described it (resumes it, frees state) */
    void *state;              /* kept by piecewise readers between calls; freed by fmt_list_free */
    struct fmt_block *blocks; /* the tensors' names and shapes (fmt_push), freed with the list */
    struct fmt_spare *spare;  /* memory to take first (fmt_begin sets the request's), or NULL */
} fmt_list;

/* The table: every format, AUTO and RAW included, in detection order. */
extern const fmt_reader *const fmt_readers[];
extern const size_t fmt_reader_count;
/* The row of a format, or NULL for a value outside the enum. */
const fmt_reader *fmt_reader_get(ckpz_input_format f);

/* Describes an input from its first `len` bytes, for the request: a forced format is
 * that row's describe; AUTO tries every row whose sniff accepts the prefix, in table
 * order, and falls back to raw: one tensor of rq->raw_dtype named "data" (when not
 * NONE) or one open opaque segment. Contract as fmt_reader.describe, except that
 * FMT_ERROR comes only from a forced format the input does not match, a raw shape the
 * input's size contradicts, or an invalid request. After a fallback to raw, why[] holds a note naming the readers that declined
 * and why (for verbose output); it is "" otherwise. */
fmt_status fmt_describe(const uint8_t *prefix, size_t len, uint64_t total, const fmt_request *rq, fmt_list *out,
                        size_t *need, char *why, size_t whylen);

void fmt_list_free(fmt_list *l);
/* fmt_list_free, but the segment array and blocks go to l->spare (when set) for the next
 * list; fmt_spare_free frees what a spare holds. */
void fmt_list_recycle(fmt_list *l);
void fmt_spare_free(fmt_spare *k);
/* Drops the segments after the first n (those a reader pushed before finding them wrong). */
void fmt_list_drop(fmt_list *l, size_t n);

/* Continues a list whose last segment is a resume segment (its reader's resume), with
 * p[0..len) = the input from that segment's offset on. FMT_DONE: the resume segment has
 * been replaced by segments that tile the input from there (ending with another resume
 * segment or the open tail; a reader that gives up leaves the rest opaque).
 * FMT_NEED_MORE: call again with *need bytes (or eof). FMT_NOMEM. */
fmt_status fmt_resume(fmt_list *l, const uint8_t *p, size_t len, int eof, size_t *need);

/* ---- the driver: the one loop that runs the need-more/resume protocol ---------------- */
/* Where the driver reads the input. */
typedef struct fmt_source {
    /* The input's bytes from `at` on: *p (valid until the next call) holds *len of them:
     * at least `want` unless the input ends first, when *eof is set (it may be set, and
     * more be given, in any case). FMT_DONE, FMT_READ or FMT_NOMEM. */
    fmt_status (*fetch)(void *opaque, uint64_t at, size_t want, const uint8_t **p, size_t *len, int *eof);
    void *opaque;
    uint64_t size;   /* the input's size, or CKPZ_SIZE_UNKNOWN (then where it ends) */
} fmt_source;

/* Describes the input from its start: offers `first` bytes, then what the readers ask
 * for. FMT_DONE (*out set), FMT_ERROR (forced format not matched: why[]), FMT_NOMEM,
 * FMT_READ, FMT_PROTOCOL (why[]). */
fmt_status fmt_drive_describe(const fmt_source *src, size_t first, const fmt_request *rq, fmt_list *out, char *why,
                              size_t whylen);
/* Replaces the resume segment that ends l: offers the bytes from its offset on, `first`
 * of them first. FMT_DONE, FMT_NOMEM, FMT_READ, FMT_PROTOCOL (why[]). */
fmt_status fmt_drive_resume(const fmt_source *src, size_t first, fmt_list *l, char *why, size_t whylen);
/* fmt_drive_resume until the list ends without a resume segment. */
fmt_status fmt_drive_all(const fmt_source *src, size_t first, fmt_list *l, char *why, size_t whylen);
/* The library error for a driver's status (not FMT_DONE), its message naming what
 * failed: records it in ctx and returns the code. */
ckpz_error fmt_fail(ckpz_ctx *ctx, fmt_status st, const fmt_request *rq, const char *why);

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
fmt_status npy_parse_header(const uint8_t *b, size_t len, uint64_t total, npy_info *info, size_t *need, char *why,
                            size_t whylen);

/* The common start of every reader: clears *need, why and *out, and clamps *len to
 * total. Returns -1 (the reader then returns FMT_ERROR) when out is NULL. */
int fmt_begin(fmt_list *out, const fmt_request *rq, size_t *len, uint64_t total, size_t *need, char *why,
              size_t whylen);

/* Writes a reason to why[0..whylen) (printf format); accepts NULL or 0. */
void fmt_why(char *why, size_t whylen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* List building helpers shared by the readers. Return 0, or -1 on allocation failure. */
int fmt_push(fmt_list *l, ckpz_dtype dtype, const char *name, size_t name_len, uint32_t ndim, const uint64_t *shape,
             uint64_t offset, uint64_t length);
/* Room for `more` segments pushed next, in one allocation (a reader that knows its count). */
int fmt_reserve(fmt_list *l, size_t more);
/* Appends the resume segment: the reader wants to look again at `offset`. */
int fmt_push_resume(fmt_list *l, uint64_t offset);
/* Appends opaque segments so that the list tiles [0, end) and then an open tail. */
int fmt_finish(fmt_list *l);
/* Describes the whole input as opaque bytes of format f (a file of that format the
 * reader cannot follow), with the reason in why[]: FMT_DONE or FMT_NOMEM. */
fmt_status fmt_all_opaque(fmt_list *out, ckpz_input_format f, char *why, size_t whylen, const char *reason);

#endif
