/* ckpz.h — the one public header of libckpz.
 *
 * libckpz compresses deep-learning checkpoints (safetensors, torch.save archives, NumPy
 * .npy/.npz, GGUF, raw tensor dumps) losslessly into a chunked, checksummed, seekable
 * container (doc/format.md) and restores the original file byte for byte. This header
 * is the stable part: errors, parameters, streaming, one-shot, delta files and their
 * chains, random access. The calls that may still change (one compression split over
 * processes, torch.save archives from memory, ratio prediction, the link tuner) are in
 * ckpz_experimental.h, which a program sees only when it defines CKPZ_EXPERIMENTAL
 * before including this header.
 *
 * Conventions: every symbol is prefixed ckpz_/CKPZ_; contexts are opaque, created and
 * freed by the caller (free accepts NULL); functions return a ckpz_error (0 = success)
 * and leave a human-readable message, naming the chunk and tensor where known, in the
 * context (ckpz_ctx_message). Parameters live in a struct that starts with its own size
 * so that it can grow without breaking callers built against an older header.
 *
 * Structs the library fills (ckpz_stats, ckpz_base_info, ckpz_entry, ckpz_archive_info,
 * and the experimental ones) start with their size too, which the caller sets:
 *     ckpz_stats st = {.struct_size = sizeof st};
 * The library fills the fields that lie within struct_size bytes and leaves the rest
 * alone, so a struct grows at its end and a caller built against an older, smaller
 * header gets the fields it knows. A struct_size below sizeof(size_t) (0: never set) or
 * above this library's sizeof (a header newer than the library) is CKPZ_ERR_PARAM, with
 * a message naming the struct where the call takes a context. Structs the library reads
 * from arrays (ckpz_span, ckpz_zip_member) and the adapters' state (ckpz_fd, ckpz_mem)
 * have fixed layouts: a new field would come as a new struct.
 *
 * Not guaranteed: the compressed bytes for a given input may change between versions
 * (the format version guarantees that older files stay readable, not that new ones
 * are identical); a context is not safe to use from two threads at once.
 */
#ifndef CKPZ_H
#define CKPZ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define CKPZ_API
#else
#define CKPZ_API __attribute__((visibility("default")))
#endif

/* Marks what is on its way out: using it warns with msg under GCC and Clang
 * (-Wdeprecated-declarations, on by default); elsewhere it is nothing. What it marks stays
 * until the next SOVERSION. CKPZ_DISABLE_DEPRECATE_WARNINGS, defined before including,
 * turns the warnings off (as zstd's ZSTD_DISABLE_DEPRECATE_WARNINGS): the library, which
 * still honours what it marks, builds so. */
#ifdef CKPZ_DISABLE_DEPRECATE_WARNINGS
#define CKPZ_DEPRECATED(msg)
#elif defined(__GNUC__) || defined(__clang__)
#define CKPZ_DEPRECATED(msg) __attribute__((deprecated(msg)))
#else
#define CKPZ_DEPRECATED(msg)
#endif

#define CKPZ_VERSION_MAJOR 0
#define CKPZ_VERSION_MINOR 4
#define CKPZ_VERSION_PATCH 0
#define CKPZ_VERSION_NUMBER (CKPZ_VERSION_MAJOR * 10000 + CKPZ_VERSION_MINOR * 100 + CKPZ_VERSION_PATCH)
#define CKPZ_VERSION_STRING "0.4.0"

/* Runtime version of the linked library (may differ from the header's). */
CKPZ_API unsigned ckpz_version_number(void);
CKPZ_API const char *ckpz_version_string(void);

/* ---- errors ---------------------------------------------------------------------- */
/* The numbers are fixed: new codes are only ever appended. */
#define CKPZ_ERROR_LIST(X)                                                 \
    X(CKPZ_OK, 0, "no error")                                              \
    X(CKPZ_ERR_PARAM, 1, "invalid parameter")                              \
    X(CKPZ_ERR_NOMEM, 2, "out of memory")                                  \
    X(CKPZ_ERR_READ, 3, "read error")                                      \
    X(CKPZ_ERR_WRITE, 4, "write error")                                    \
    X(CKPZ_ERR_NOT_CKPZ, 5, "not a ckpz file")                             \
    X(CKPZ_ERR_VERSION, 6, "unsupported format version or reserved field") \
    X(CKPZ_ERR_TRUNCATED, 7, "truncated ckpz file")                        \
    X(CKPZ_ERR_CHECKSUM, 8, "checksum mismatch")                           \
    X(CKPZ_ERR_CORRUPT, 9, "corrupt data")                                 \
    X(CKPZ_ERR_LIMIT, 10, "size exceeds the memory limit")                 \
    X(CKPZ_ERR_NOT_FOUND, 11, "no such tensor")                            \
    X(CKPZ_ERR_INPUT, 12, "input does not match the requested format")     \
    X(CKPZ_ERR_ABORTED, 13, "aborted by the caller")                       \
    X(CKPZ_ERR_INTERNAL, 14, "internal error")                             \
    X(CKPZ_ERR_BASE, 15, "missing or wrong base checkpoint")

typedef enum {
#define CKPZ_X_ENUM(name, num, text) name = num,
    CKPZ_ERROR_LIST(CKPZ_X_ENUM)
#undef CKPZ_X_ENUM
} ckpz_error;

/* Static text for a code; never NULL. */
CKPZ_API const char *ckpz_error_name(ckpz_error code);

/* ---- element types --------------------------------------------------------------- */
/* Stored in the container: the numbers are fixed. */
typedef enum {
    CKPZ_DTYPE_NONE = 0, /* opaque bytes (headers, padding, unknown data) */
    CKPZ_DTYPE_BF16 = 1,
    CKPZ_DTYPE_F16 = 2,
    CKPZ_DTYPE_F32 = 3,
    CKPZ_DTYPE_F64 = 4,
    CKPZ_DTYPE_F8E4M3 = 5,
    CKPZ_DTYPE_F8E5M2 = 6,
    CKPZ_DTYPE_I8 = 7,
    CKPZ_DTYPE_I16 = 8,
    CKPZ_DTYPE_I32 = 9,
    CKPZ_DTYPE_I64 = 10,
    CKPZ_DTYPE_U8 = 11,
    CKPZ_DTYPE_U16 = 12,
    CKPZ_DTYPE_U32 = 13,
    CKPZ_DTYPE_U64 = 14,
    CKPZ_DTYPE_BOOL = 15,
    CKPZ_DTYPE_COUNT_ /* not a type */
} ckpz_dtype;

/* "bf16", "f32", ... ("bytes" for NONE, NULL for out-of-range values). */
CKPZ_API const char *ckpz_dtype_name(ckpz_dtype t);
/* Parses the element type names above (also "bfloat16", "float32", "fp16", ...);
 * CKPZ_DTYPE_NONE if the name is not an element type (including "bytes"). */
CKPZ_API ckpz_dtype ckpz_dtype_from_name(const char *name);
/* Bytes per element; 1 for NONE. */
CKPZ_API unsigned ckpz_dtype_size(ckpz_dtype t);

/* ---- input formats ----------------------------------------------------------------- */
typedef enum {
    CKPZ_INPUT_AUTO = 0,        /* detect from the first bytes; unknown = raw opaque */
    CKPZ_INPUT_RAW = 1,         /* one tensor of params.raw_dtype, or opaque bytes */
    CKPZ_INPUT_SAFETENSORS = 2,
    CKPZ_INPUT_NPY = 3,
    CKPZ_INPUT_TORCH = 4,       /* torch.save zip archive (.pt) */
    CKPZ_INPUT_NPZ = 5,         /* NumPy .npz (zip of .npy) */
    CKPZ_INPUT_GGUF = 6,        /* llama.cpp's GGUF (version 2 and 3) */
    CKPZ_INPUT_COUNT_           /* not a format */
} ckpz_input_format;

/* "auto", "raw", "safetensors", ... as --format spells them; "unknown" for values
 * outside the enum. */
CKPZ_API const char *ckpz_input_format_name(ckpz_input_format f);
/* The element type's name in the headers of format f: "BF16" in safetensors, the descr
 * "<f4" of .npy and .npz, the storage class "FloatStorage" of torch.save pickles; for
 * raw and auto ckpz's own name. NULL for NONE, values out of range, and types the
 * format has no name for. */
CKPZ_API const char *ckpz_dtype_format_name(ckpz_dtype t, ckpz_input_format f);

/* ---- entropy back ends -------------------------------------------------------------- */
/* Which coder codes the byte planes of chunks (ckpz_params.codec). AUTO, per plane, the
 * smallest of rANS (order 0 or 1), zstd, constant and stored, decided from the plane's
 * statistics; RANS the same without zstd; the others code every plane that is not stored
 * (near-random, judged from a sample) or constant with that back end, stored where it does
 * not make the plane smaller. The file records the codec of each plane, so any choice
 * decodes with any ckpz that has the back end. */
typedef enum {
    CKPZ_CODEC_AUTO = 0,
    CKPZ_CODEC_RANS = 1,
    CKPZ_CODEC_ZSTD = 2,
    CKPZ_CODEC_LZ4 = 3,
    CKPZ_CODEC_SNAPPY = 4,
    CKPZ_CODEC_DEFLATE = 5,
    CKPZ_CODEC_COUNT_ /* not a choice */
} ckpz_codec;

/* "auto", "rans", "zstd", "lz4", "snappy", "deflate"; NULL for values out of range. */
CKPZ_API const char *ckpz_codec_name(ckpz_codec c);
/* The choice named name (as ckpz_codec_name gives it), or CKPZ_CODEC_COUNT_. */
CKPZ_API ckpz_codec ckpz_codec_from_name(const char *name);

/* ---- parameters -------------------------------------------------------------------- */
#define CKPZ_LEVEL_MIN 1
#define CKPZ_LEVEL_MAX 9
#define CKPZ_LEVEL_DEFAULT 3
#define CKPZ_CHUNK_MIN (64u << 10)
#define CKPZ_CHUNK_MAX (16u << 20)
#define CKPZ_SIZE_UNKNOWN UINT64_MAX

/* Progress callback: bytes of original data done so far and the total
 * (CKPZ_SIZE_UNKNOWN when not known). Return non-zero to abort (CKPZ_ERR_ABORTED). */
typedef int (*ckpz_progress_fn)(void *opaque, uint64_t done, uint64_t total);

typedef struct ckpz_params {
    size_t struct_size;        /* set by ckpz_params_init: sizeof(ckpz_params) */
    int level;                 /* CKPZ_LEVEL_MIN..MAX */
    int threads;               /* threads in all, the calling one included; 0 = all cores */
    size_t chunk_size;         /* bytes; 0 = default; CKPZ_CHUNK_MIN..CKPZ_CHUNK_MAX */
    ckpz_input_format format;  /* input format for compression */
    ckpz_dtype raw_dtype;      /* element type for CKPZ_INPUT_RAW (NONE = opaque) */
    size_t mem_limit;          /* cap on any single allocation driven by file contents
                                  (index, chunk buffers); 0 = default (1 GiB) */
    /* Deprecated: set ckpz_source.progress instead (the calls taking a source). Still
     * honoured where the source sets none, and the one way to watch the one-shot
     * in-memory calls, which take no source. May be NULL. */
    ckpz_progress_fn progress CKPZ_DEPRECATED("set ckpz_source.progress instead");
    void *progress_opaque CKPZ_DEPRECATED("set ckpz_source.progress_opaque instead");
    /* Delta coding. Compression: the previous checkpoint's original bytes (NULL = a
     * stand-alone file). Tensors that match one of the base's by name, dtype and shape,
     * and opaque runs at the same offset with the same length, are coded against it
     * (per chunk: a copy when unchanged, else the cheapest of XOR, integer difference
     * and stand-alone coding); the file records the base's size and checksum, and
     * restoring it needs the same bytes. Decompression and random access: the base the
     * file was coded against (ckpz_base_info tells which); it is checked before use. */
    const void *base;
    size_t base_size;
    const char *base_name; /* compression: recorded as a hint to find the base again
                              (e.g. its file name); may be NULL */
    uint32_t base_depth;   /* compression: delta files behind the base (0 when the base
                              is stand-alone); the file records base_depth + 1 */
    /* Lossy coding (compression). NULL: everything lossless. Otherwise rules, one per
     * line, first match wins: "PATTERN MODE [OPTIONS]" with PATTERN a glob on tensor
     * names and MODE one of
     *   lossless | auto [K] | abs E | rel R | change-rel R | pointwise-rel R | int8 | bits 8|16
     * (auto: each tensor's mode and bound from its role, K = tight, default, aggressive
     * or a number moving them together; abs: |x'-x| <= E; rel: <= R x the tensor's max - min; change-rel: <= R x the RMS
     * of the tensor's change since the base; pointwise-rel: <= R|x|, sign kept, never
     * zero; int8: per-channel 8-bit; bits: blockwise, block 64) and OPTIONS sym, asym,
     * block N, per-channel, pct P, prune RATE, stochastic, no-base, max-mae X; auto also
     * beta2 B and lr L, the optimizer's, over what the file states (see doc/lossy.md).
     * Integer tensors, tensors of fewer than two dimensions and names containing "norm",
     * "bias" or "ln_" always stay lossless; names containing "exp_avg_sq" only take
     * pointwise-rel (never pruned) and are otherwise exact. A lossy file restores
     * the coded values, not the original bytes; its checksums are of what it restores.
     * With a base, lossy tensors are coded around the base's values (closed loop:
     * give the previous lossy file's restored content as the base). */
    const char *policy;
    double max_mae;        /* default max-mae for rules without one; 0 = none */
    /* Deprecated: set ckpz_sink.patch instead (what it does is told there). Still
     * honoured, with its own opaque pointer, where the sink sets none. */
    int (*patch)(void *opaque, const void *buf, size_t n, uint64_t off) CKPZ_DEPRECATED("set ckpz_sink.patch instead");
    void *patch_opaque CKPZ_DEPRECATED("set ckpz_sink.opaque instead");
    /* Raw input (CKPZ_INPUT_RAW, or AUTO falling back to raw, with a raw_dtype): the
     * tensor's shape, outermost dimension first, raw_ndim values (1..64, each >= 1);
     * raw_ndim 0: one dimension of as many elements as the input holds. The input must
     * hold exactly the shape's bytes (CKPZ_ERR_INPUT otherwise: at once when the size is
     * known, at its end when it is not). It matters for lossy coding, which codes
     * tensors of two or more dimensions only, and for listings. Added in 0.4.0. */
    uint32_t raw_ndim;
    const uint64_t *raw_shape;
    ckpz_codec codec;      /* compression: the planes' coder (default AUTO) */
} ckpz_params;

/* Fills defaults. Always call it before setting fields. */
CKPZ_API void ckpz_params_init(ckpz_params *p);

/* ---- context --------------------------------------------------------------------- */
typedef struct ckpz_ctx ckpz_ctx;

/* A context keeps working memory between calls; ckpz_ctx_free releases it. What the
 * compressions on a context have used (their most threads, deepest pipeline, largest chunk
 * size) is kept for the next one: the coders' state and buffers, about 2.5 chunk sizes per
 * thread, and 2.5 chunk sizes for each chunk in flight (one with one thread, three per
 * thread with more): ~6 MB for one thread at the default chunk size, ~10 MB a thread with
 * more. So a call on a small input costs its coding, not the set-up of a few MB.
 * Compression also keeps its last input's description (entry table, segment list, the
 * header read ahead: ~2 MB for 4,800 tensors; up to 16 MiB each), which the next one
 * reuses instead of faulting in fresh pages. Create one context per thread and reuse it;
 * free it to give the memory back. Decompression keeps the coders' state too, and
 * ckpz_decompress_buffer the entries of the last file's index (up to 16 MiB: ~1 MB for
 * 4,800 tensors), which the next restore of a file of as many tensors reuses. Not
 * guaranteed: what is kept, and how much. */
CKPZ_API ckpz_ctx *ckpz_ctx_create(void);
CKPZ_API void ckpz_ctx_free(ckpz_ctx *ctx);
/* The message of the last failed call on ctx ("" if none). Valid until the next call. */
CKPZ_API const char *ckpz_ctx_message(const ckpz_ctx *ctx);

/* ---- I/O callbacks ------------------------------------------------------------------- */
/* Every callback (read, write, pread, patch, progress) is called from the thread that
 * called the library function, one call at a time; worker threads never call them. */
/* Reads up to n bytes; returns the count (0 at end of input) or -1 on error. */
typedef ptrdiff_t (*ckpz_read_fn)(void *opaque, void *buf, size_t n);
/* Writes all n bytes; returns 0 on success, -1 on error. */
typedef int (*ckpz_write_fn)(void *opaque, const void *buf, size_t n);
/* Reads exactly n bytes at offset off; returns 0 on success, -1 on error or short read. */
typedef int (*ckpz_pread_fn)(void *opaque, void *buf, size_t n, uint64_t off);

/* Ready-made callbacks over a POSIX file descriptor, for callers (bindings above all)
 * that want every byte of I/O to stay in C. The opaque pointer is a ckpz_fd. Calls
 * interrupted by a signal (EINTR) are retried and short transfers continued; a write
 * that makes no progress fails. On failure `error` keeps the errno of the first failure
 * (EIO when the call returned without one, with errno set to 0 on return so that a
 * caller can tell a write that took no bytes from a real EIO; a pread past the end of
 * the file fails with error left 0: the file is shorter than it claims), for the
 * caller's message. `bytes` lets a caller check, after the library returns, that every
 * byte went through. */
typedef struct ckpz_fd {
    int fd;
    int error;          /* 0, or the errno of the first failure */
    uint64_t bytes;     /* bytes read or written through these callbacks so far */
} ckpz_fd;
CKPZ_API ptrdiff_t ckpz_fd_read(void *fd, void *buf, size_t n);            /* a ckpz_read_fn */
CKPZ_API int ckpz_fd_write(void *fd, const void *buf, size_t n);           /* a ckpz_write_fn */
CKPZ_API int ckpz_fd_pread(void *fd, void *buf, size_t n, uint64_t off);   /* a ckpz_pread_fn */

/* Rewrites n bytes already written at offset off of the output (off counts from the
 * output's first byte); returns 0 on success, -1 on error. */
typedef int (*ckpz_patch_fn)(void *opaque, const void *buf, size_t n, uint64_t off);
/* A ckpz_patch_fn over a ckpz_fd: pwrite at offset off of the file, so for a file the
 * output was written to from its first byte (ckpz_sink_fd checks that); failures as
 * ckpz_fd_write's. */
CKPZ_API int ckpz_fd_patch(void *fd, const void *buf, size_t n, uint64_t off);

/* A file held in memory, read or written through the ckpz_mem_* callbacks (the opaque
 * pointer is the ckpz_mem). Zero it, then set what applies:
 *   to read:  data, size (the bytes); step to test short reads.
 *   to write: data and capacity (a buffer of the caller's: writing past it fails and
 *             sets full), or grow = 1 (data NULL or malloc'd: grown with realloc as
 *             needed; the caller frees it with ckpz_free), or a limit above capacity (the
 *             bytes past capacity are counted in size but not kept, so that a caller
 *             learns the size an output needs: size > capacity afterwards).
 * Writes append at size (a compression may code a frame in place in the room between
 * size and capacity before it appends it there: those bytes are not kept either way);
 * ckpz_mem_patch rewrites bytes already written (those past capacity are only counted); ckpz_mem_pread reads what [0, size) holds, which is what
 * was written once a sink is done. The layout is fixed (it never grows), as ckpz_fd's. */
typedef struct ckpz_mem {
    void *data;       /* the bytes (only read through a source: cast a const pointer) */
    size_t size;      /* a source's length; a sink's bytes written so far */
    size_t capacity;  /* sink: bytes data holds (grown by grow) */
    size_t pos;       /* source: where the next ckpz_mem_read starts */
    size_t step;      /* source: 0, or the most bytes one ckpz_mem_read gives */
    size_t limit;     /* sink: 0 (capacity is the limit), or the most size may reach */
    int grow;         /* sink: data is malloc'd and grows to fit */
    int full;         /* sink: set when a write failed for lack of room */
} ckpz_mem;
CKPZ_API ptrdiff_t ckpz_mem_read(void *mem, void *buf, size_t n);          /* a ckpz_read_fn */
CKPZ_API int ckpz_mem_pread(void *mem, void *buf, size_t n, uint64_t off);  /* a ckpz_pread_fn */
CKPZ_API int ckpz_mem_write(void *mem, const void *buf, size_t n);          /* a ckpz_write_fn */
CKPZ_API int ckpz_mem_patch(void *mem, const void *buf, size_t n, uint64_t off); /* a ckpz_patch_fn */

/* ---- sources and sinks ------------------------------------------------------------ */
/* Where bytes come from and go to, with what each end can do. A front end for a new
 * transport (a socket, MPI-IO writing each rank's stream at its own offset, an object
 * store) is one new adapter that fills these; the library never asks for more. Both
 * start with their own size, as ckpz_params does: initialise them with ckpz_source_init
 * / ckpz_sink_init (or an adapter below), then set fields. Callbacks run on the thread
 * that called the library, one at a time. */
typedef struct ckpz_source {
    size_t struct_size;        /* set by ckpz_source_init */
    ckpz_read_fn read;         /* sequential reads; streaming calls need it */
    ckpz_pread_fn pread;       /* reads at an offset; random access (archives) needs it */
    void *opaque;              /* for read and pread */
    uint64_t size;             /* bytes in all, or CKPZ_SIZE_UNKNOWN; random access needs it
                                  (streaming calls use it as ckpz_compress_stream's size_hint) */
    /* Progress of the work on this source: bytes of original data done so far and their
     * total (CKPZ_SIZE_UNKNOWN when not known); for compression, bytes read and coded;
     * for decompression, bytes restored; for ckpz_archive_read, bytes of the spans.
     * Return non-zero to abort (CKPZ_ERR_ABORTED). May be NULL. */
    ckpz_progress_fn progress;
    void *progress_opaque;
} ckpz_source;

typedef struct ckpz_sink {
    size_t struct_size;        /* set by ckpz_sink_init */
    ckpz_write_fn write;       /* appends all n bytes */
    /* NULL when the output cannot seek (a pipe). Given, compression against a base
     * spends no pass of its own over the base for its checksum before the first chunk:
     * the base frame is written with it blank and rewritten at the end with the CRC-32C
     * put together from the chunks that read the base (while its bytes are in cache) and
     * the bytes none read. The output's bytes are the same either way. */
    ckpz_patch_fn patch;
    void *opaque;              /* for write and patch */
} ckpz_sink;

/* Zeroes s, sets struct_size, and size to CKPZ_SIZE_UNKNOWN. */
CKPZ_API void ckpz_source_init(ckpz_source *s);
CKPZ_API void ckpz_sink_init(ckpz_sink *s);
/* Adapters: m's bytes as a source (read, pread, size = m->size); m as a sink (write,
 * patch). m must outlive the calls that use s. */
CKPZ_API void ckpz_source_mem(ckpz_source *s, ckpz_mem *m);
CKPZ_API void ckpz_sink_mem(ckpz_sink *s, ckpz_mem *m);
/* f->fd as a source of size bytes (read; pread too where the descriptor can seek, at
 * the file's own offsets) and as a sink (write; patch where it is a regular file written
 * from its first byte, opened without O_APPEND). f must outlive the calls that use s.
 * Where ckpz_compress_io or ckpz_decompress_io is given such a sink over a regular
 * file and its params->threads leave a core free, a thread of the call writes the file
 * behind once more than 1 MiB was written; it is joined before the call returns, f's
 * error and bytes then set as the callbacks' own. */
CKPZ_API void ckpz_source_fd(ckpz_source *s, ckpz_fd *f, uint64_t size);
CKPZ_API void ckpz_sink_fd(ckpz_sink *s, ckpz_fd *f);

/* Statistics of one compression or decompression. */
typedef struct ckpz_stats {
    size_t struct_size;        /* set by the caller: sizeof(ckpz_stats) */
    uint64_t original_bytes;   /* bytes of the original file */
    uint64_t compressed_bytes; /* bytes of the .ckpz file */
    uint64_t tensor_bytes;     /* original bytes that belong to tensors */
    uint64_t tensors;          /* tensor segments */
    uint64_t chunks;
    ckpz_input_format format;  /* detected input format */
} ckpz_stats;

/* ---- streaming compression / decompression ----------------------------------------- */
/* Compresses everything `rd` yields into a ckpz stream given to `wr`. size_hint is the
 * input size if known (CKPZ_SIZE_UNKNOWN otherwise; it is only used for progress, to
 * bound the format probe and to size the work: params->threads is capped at one thread
 * per two chunks of it, and per 2 MiB, so an input of one or two chunks starts no
 * thread). Work runs on params->threads threads; writing overlaps compression and
 * memory stays bounded by a few chunks per thread. stats may be NULL. */
CKPZ_API ckpz_error ckpz_compress_stream(ckpz_ctx *ctx, const ckpz_params *params, ckpz_read_fn rd, void *rd_opaque,
                                         uint64_t size_hint, ckpz_write_fn wr, void *wr_opaque, ckpz_stats *stats);

/* The same over a source (read, size and progress used) and a sink (write, and patch
 * when given: see ckpz_sink). ckpz_compress_stream is this call with a source and a sink
 * made of its callbacks, size_hint and the deprecated params->progress and patch. */
CKPZ_API ckpz_error ckpz_compress_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src,
                                     const ckpz_sink *dst, ckpz_stats *stats);

/* Decodes a ckpz stream read sequentially from `rd` and writes the original to `wr`.
 * Every chunk's checksum is verified before it is decoded, and the whole content's
 * checksum at the end. wr may be NULL: everything is verified and nothing is written
 * (ckpz -t). On error, some output may already have been written: callers writing to a
 * file must write to a temporary name. Uses params->threads, mem_limit and progress. */
CKPZ_API ckpz_error ckpz_decompress_stream(ckpz_ctx *ctx, const ckpz_params *params, ckpz_read_fn rd, void *rd_opaque,
                                           ckpz_write_fn wr, void *wr_opaque, ckpz_stats *stats);
/* The same over a source (read and progress used) and a sink (write; dst NULL, or its
 * write NULL: verify only). It reads the stream in order and no further than its end,
 * except the index, which it reads to the end of the input, in reads of under 64 KiB:
 * a read of 64 KiB or more asks for bytes inside the stream, so a source of streams
 * put end to end may serve it without looking for a stream's end in it. */
CKPZ_API ckpz_error ckpz_decompress_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src,
                                       const ckpz_sink *dst, ckpz_stats *stats);

/* ---- one-shot, in memory ----------------------------------------------------------- */
/* The largest .ckpz file ckpz_compress_into and ckpz_compress_buffer write for an input
 * of src_size bytes, with any params: src_size + src_size / 256 + 64 KiB (0 when that
 * does not fit a size_t). Guaranteed: a dst_capacity of at least this never fails for
 * lack of room. To keep it, an input whose described form would not fit (thousands of
 * tiny or empty tensors, whose names and shapes the file holds twice, in a file that
 * does not compress) is coded as opaque bytes, as params->format = CKPZ_INPUT_RAW with
 * no raw_dtype codes it: it still restores byte for byte (exactly, even with a lossy
 * policy) and is still a delta against params->base when the base is as long, but it
 * lists no tensors. ckpz_compress_stream never does this (its output has no bound in
 * the input's size). Not guaranteed: the same value in later versions. */
CKPZ_API size_t ckpz_compress_bound(size_t src_size);

/* Compresses src into the caller's dst[0..dst_capacity) and sets *written to the
 * output's length. The output does not depend on the capacity (it is the same for
 * every capacity it fits in, and the same as ckpz_compress_buffer's), and nothing is
 * written at or past dst_capacity. An output that does not fit (possible only below
 * ckpz_compress_bound(src_size)) fails with CKPZ_ERR_LIMIT once the compression has
 * run to its end, with a message that gives the size needed. On any failure dst holds
 * partial output and *written is 0. Uses the context's kept memory (see
 * ckpz_ctx_create): a loop over buffers with one context and one dst allocates no
 * chunk-sized memory after its first call (only the input's small tables). */
CKPZ_API ckpz_error ckpz_compress_into(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size,
                                       void *dst, size_t dst_capacity, size_t *written);

/* Compresses src into a buffer allocated by the library (*dst, *dst_size); release it
 * with ckpz_free (or free). The same output as ckpz_compress_into; the buffer is
 * allocated once, at ckpz_compress_bound(src_size) bytes (its pages only touched as the
 * output reaches them, or a chunk's frame coded in place at most past it), and shrunk to
 * the output's size, except a buffer of whole 2 MiB pages (a bound of 1 to 4 MiB) that
 * the output fills half of: that one is kept whole, and ckpz_free keeps one such buffer
 * for the next call, whose output then needs no fresh pages (at most 6 MiB of addresses
 * held). */
CKPZ_API ckpz_error ckpz_compress_buffer(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size,
                                         void **dst, size_t *dst_size);
/* Decompresses a whole ckpz file in memory into dst, which must hold exactly the
 * original size (ckpz_original_size tells it). From 4 MiB on, dst's tensor bytes are
 * written with streaming stores (whole cache lines, not read in first: memory just
 * allocated costs a read of every line otherwise), so they are in memory, not in the
 * cache, when the call returns. */
CKPZ_API ckpz_error ckpz_decompress_buffer(ckpz_ctx *ctx, const ckpz_params *params, const void *src, size_t src_size,
                                           void *dst, size_t dst_size);
/* Original size recorded in a complete ckpz file held in memory. Only the header and
 * trailer checksums are verified: bound the value before allocating by it. */
CKPZ_API ckpz_error ckpz_original_size(ckpz_ctx *ctx, const void *src, size_t src_size, uint64_t *size);
/* Releases memory the library allocated for the caller (accepts NULL); see
 * ckpz_compress_buffer for the one output buffer it may keep for the next call. */
CKPZ_API void ckpz_free(void *p);

/* ---- delta files: what a file needs -------------------------------------------------- */
#define CKPZ_BASE_NAME_MAX 4096
typedef struct ckpz_base_info {
    size_t struct_size; /* set by the caller: sizeof(ckpz_base_info) */
    int needed;        /* 0: a stand-alone file (the other fields are zero) */
    uint64_t size;     /* bytes of the base's original */
    uint32_t checksum; /* CRC-32C of the base's original */
    uint32_t depth;    /* files to restore, this one included, down to a stand-alone one
                          (1: the base itself is stand-alone) */
    char name[CKPZ_BASE_NAME_MAX + 1]; /* the hint recorded at compression ("" if none) */
} ckpz_base_info;

/* Reads what a ckpz file needs from its first n bytes (header and base frame: at most
 * CKPZ_BASE_PROBE bytes; CKPZ_ERR_TRUNCATED when n is too short for them). */
#define CKPZ_BASE_PROBE (32 + 12 + 20 + CKPZ_BASE_NAME_MAX)
CKPZ_API ckpz_error ckpz_base_info_read(ckpz_ctx *ctx, const void *head, size_t n, ckpz_base_info *info);

/* ---- delta files: the chain of bases ------------------------------------------------ */
/* A delta file is restored through its base, which may be a delta file itself, and so
 * on down to a stand-alone .ckpz or an original checkpoint: a chain. Every front end
 * that finds bases by their file names follows this one policy:
 *   - a base is found by the name the file recorded (ckpz_base_info.name), as a plain
 *     file name beside the file: that name, else the name plus ".ckpz", a regular file;
 *     a recorded name holding '/', or "." or "..", is never followed (it is data from
 *     the file);
 *   - two names are the same file when they have the same device and inode;
 *   - a chain that comes back to a file is a cycle (CKPZ_ERR_BASE);
 *   - a chain has at most CKPZ_CHAIN_MAX delta files (more: CKPZ_ERR_BASE).
 * A base found by name is still checked by content (size and CRC-32C) when it is used.
 * Paths are POSIX file names, used as given (relative ones from the current directory). */
#define CKPZ_CHAIN_MAX 1000

/* The base a delta file at `referrer` recorded as `recorded` refers to, by the rule
 * above: a malloc'd path (ckpz_free it), or NULL when there is none (or no memory). */
CKPZ_API char *ckpz_base_locate(const char *referrer, const char *recorded);
/* 1 when a and b both exist and are the same file (same device and inode), else 0. */
CKPZ_API int ckpz_same_file(const char *a, const char *b);

typedef struct ckpz_chain ckpz_chain;
/* Walks the chain from the file at path: opens each file, reads its first
 * CKPZ_BASE_PROBE bytes (nothing is restored) and follows its recorded base, until a
 * stand-alone .ckpz or an original checkpoint (a file that is not a .ckpz). CKPZ_OK:
 * *out holds the whole chain. On CKPZ_ERR_BASE (a base not beside the file that needs
 * it, a cycle, a chain too long), CKPZ_ERR_READ (a file that cannot be opened) or an
 * error in a .ckpz header, *out still holds the links walked before the failure (the
 * file whose base is missing, or that comes back to an earlier one, is the last), and
 * the message names the file: in the context as far as it holds it, whole from
 * ckpz_chain_message. CKPZ_ERR_NOMEM, CKPZ_ERR_PARAM: *out is NULL. Free *out with
 * ckpz_chain_free (accepts NULL). */
CKPZ_API ckpz_error ckpz_chain_open(ckpz_ctx *ctx, const char *path, ckpz_chain **out);
CKPZ_API void ckpz_chain_free(ckpz_chain *c);
/* Links in the chain: 0 is the file named, the last the bottom (restore from there up:
 * each link's base is the link after it). */
CKPZ_API size_t ckpz_chain_length(const ckpz_chain *c);
/* Link i's path (as given for link 0, else as found beside the link before); NULL when
 * i is out of range. Valid until ckpz_chain_free. */
CKPZ_API const char *ckpz_chain_path(const ckpz_chain *c, size_t i);
/* Link i: 1 for a .ckpz file (*info, when not NULL, is what ckpz_base_info_read gives
 * for it: needed = 0 for a stand-alone bottom), 0 for an original checkpoint (the
 * bottom; *info zeroed but for struct_size), -1 when i is out of range or info has a bad
 * struct_size. */
CKPZ_API int ckpz_chain_link(const ckpz_chain *c, size_t i, ckpz_base_info *info);
/* Why the walk stopped short ("" after CKPZ_OK), whole, into buf[0..cap) (cut to fit,
 * always terminated when cap > 0); returns its length, as snprintf does. */
CKPZ_API size_t ckpz_chain_message(const ckpz_chain *c, char *buf, size_t cap);

/* ---- random access: list and extract ------------------------------------------------- */
typedef struct ckpz_archive ckpz_archive;

/* One entry of the tensor index: a tensor or a run of opaque bytes. */
typedef struct ckpz_entry {
    size_t struct_size;     /* set by the caller: sizeof(ckpz_entry) */
    const char *name;       /* tensor name; "" for opaque bytes */
    ckpz_dtype dtype;       /* CKPZ_DTYPE_NONE for opaque bytes */
    uint32_t ndim;
    const uint64_t *shape;  /* ndim values */
    uint64_t offset;        /* byte offset in the original file */
    uint64_t length;        /* bytes in the original file */
    uint64_t compressed;    /* bytes its chunks take in the ckpz file */
    uint64_t chunks;
    int based;              /* coded against the base's bytes at base_offset */
    uint64_t base_offset;
    /* Lossy entries (lossy = 0: restored byte for byte). */
    int lossy;
    const char *lossy_mode; /* "abs", "rel", "pointwise-rel", "affine" */
    double lossy_bound;     /* the bound asked for: E, or R for the relative modes */
    double abs_bound;       /* abs and rel: the absolute bound applied */
    double mae, max_error, rmse; /* of restored - original over the finite elements */
    double psnr;            /* dB, relative to the tensor's value range; INFINITY without error */
    uint64_t exceptions;    /* elements stored exactly (NaN, Inf, outliers) */
    uint64_t changed, frozen; /* with a base: elements that differ from the base's, and
                                 of those, the ones the grid restored as the base's
                                 value (pruned ones not counted) */
    /* The tensor's role as the lossy mode `auto` sees it, from its name, dtype and
     * shape (doc/lossy.md "auto"): "weight", "exp_avg", "exp_avg_sq" or "exact", and
     * why (a sentence). Given for every tensor, whatever coding the file used; NULL for
     * opaque bytes. */
    const char *role;
    const char *role_why;
    /* Adam's beta2 the file's optimizer state gives this tensor (a torch.save file's
     * param group listing it: the beta2 auto's rounding of exp_avg_sq follows), and
     * where it was read ("optimizer.param_groups[0]"); 0 and NULL when none, or until
     * ckpz_archive_read_optim (ckpz_experimental.h) has read it. */
    double beta2;
    const char *beta2_from;
    /* The learning rate the file's optimizer states for this tensor, the one every
     * param group states for a model's tensors outside the optimizer state (auto codes
     * a first file's weights within one step of it), and where it was read
     * ("optimizer.param_groups"); 0 and NULL as beta2. */
    double lr;
    const char *lr_from;
} ckpz_entry;

typedef struct ckpz_archive_info {
    size_t struct_size;        /* set by the caller: sizeof(ckpz_archive_info) */
    unsigned format_version;
    ckpz_input_format format; /* the original file's format */
    uint64_t original_size;
    uint64_t compressed_size;
    uint32_t chunk_size;
    uint32_t content_checksum; /* CRC-32C of the original file */
    uint64_t entries;
    uint64_t chunks;
    int lossy;                 /* some entries are lossy: content_checksum is of the restored content */
} ckpz_archive_info;

/* Opens a complete ckpz file for random access through `pr` (file_size bytes): checks
 * the header, trailer and index (and their checksums); chunks are read on demand. A
 * delta file opens without its base (listing needs none); params->base, when given, is
 * checked here and used by extraction, which fails with CKPZ_ERR_BASE without it. */
CKPZ_API ckpz_error ckpz_archive_open(ckpz_ctx *ctx, const ckpz_params *params, ckpz_pread_fn pr, void *pr_opaque,
                                      uint64_t file_size, ckpz_archive **out);
/* The same over a source: its pread and size (both needed), and its progress for
 * ckpz_archive_read (the deprecated params->progress where it sets none). */
CKPZ_API ckpz_error ckpz_archive_open_io(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src,
                                         ckpz_archive **out);
CKPZ_API void ckpz_archive_close(ckpz_archive *a);
/* The file's figures; CKPZ_ERR_PARAM only for a bad info->struct_size. */
CKPZ_API ckpz_error ckpz_archive_get_info(const ckpz_archive *a, ckpz_archive_info *info);
/* What the file needs to be restored (needed = 0 for a stand-alone file); CKPZ_ERR_PARAM
 * only for a bad info->struct_size. */
CKPZ_API ckpz_error ckpz_archive_get_base(const ckpz_archive *a, ckpz_base_info *info);
/* Entry i (0-based, < info.entries); the strings and arrays live as long as `a`. */
CKPZ_API ckpz_error ckpz_archive_entry(const ckpz_archive *a, uint64_t i, ckpz_entry *e);
/* Index of the first tensor named `name` (opaque entries are skipped, so "" finds a
 * tensor whose name is empty), or CKPZ_ERR_NOT_FOUND. */
CKPZ_API ckpz_error ckpz_archive_find(ckpz_ctx *ctx, const ckpz_archive *a, const char *name, uint64_t *index);
/* Chunk i (< info.chunks) holds the original file's [*offset, *offset + *length); i ==
 * chunks gives the end of the file. Chunks are in file order and share no bytes: spans
 * that start and end on chunk boundaries are decoded with no chunk decoded twice, which
 * a caller reading a file piece by piece wants. */
CKPZ_API void ckpz_archive_chunk(const ckpz_archive *a, uint64_t i, uint64_t *offset, uint64_t *length);
/* Decodes entry i alone (its original bytes) to `wr`, verifying its chunks. */
CKPZ_API ckpz_error ckpz_archive_extract(ckpz_ctx *ctx, ckpz_archive *a, uint64_t i, ckpz_write_fn wr, void *wr_opaque);

/* One range of the original file to decode into the caller's memory. */
typedef struct ckpz_span {
    uint64_t offset; /* in the original file */
    uint64_t length;
    void *dst;       /* length bytes; the spans' destinations must not overlap */
} ckpz_span;

/* Decodes the original bytes of every span straight into its destination: the chunks
 * that hold them are read through the archive's pread callback on the calling thread
 * (in file order) and decoded on params->threads threads (the params given to
 * ckpz_archive_open), each chunk checked (frame and payload checksums before decoding,
 * the restored bytes' checksum after) and written where it belongs without an
 * intermediate copy when it lies inside one span. Spans may come in any order and share
 * chunks; an empty span reads nothing and needs no destination, but its offset must be
 * within the file. A lossy file gives its restored content, as a full restore does.
 * progress (the source's given at open, else the params') is called on the calling
 * thread after each chunk of each span, with the span bytes done and the spans' total;
 * non-zero aborts with CKPZ_ERR_ABORTED. A span outside the original file fails with
 * CKPZ_ERR_PARAM before anything is read. A delta file needs its base (given at open) for the entries
 * coded against it: without it the first chunk that needs it fails with CKPZ_ERR_BASE.
 * Not guaranteed: on failure the destinations hold partial data; the whole file's
 * checksum is not checked, even when the spans cover the file (every chunk's are). Pass
 * many spans to one call rather than one span a call: each call sets up its threads and
 * buffers. */
CKPZ_API ckpz_error ckpz_archive_read(ckpz_ctx *ctx, ckpz_archive *a, const ckpz_span *spans, size_t n);

/* Checks what the random-access calls above never read: every entry frame (its
 * checksum and record, and that it equals the entry's index record) and that the frames
 * lie back to back from the header (and base frame) to the index, where the seek table
 * puts them. Reads the entry frames only, a few dozen bytes per entry through the
 * archive's pread; no chunk is read. The messages are the sequential decoder's ("entry
 * frame 0 at byte 32: checksum mismatch"). A file that passes this, ckpz_archive_read of
 * every chunk and the content checksum (ckpz_archive_info.content_checksum, of the
 * chunks' bytes in order) has had every check ckpz_decompress_io makes: how a front end
 * that restores through the archive (ckpz-mpi) tests a file as ckpz -t does. Added in
 * 0.4.0. */
CKPZ_API ckpz_error ckpz_archive_check_frames(ckpz_ctx *ctx, const ckpz_archive *a);

/* CRC-32C (Castagnoli), as the container uses it: crc of buf[0..n) continuing from crc
 * (0 to start), and the CRC of A then B from crc_a, crc_b and B's length. */
CKPZ_API uint32_t ckpz_crc32c(uint32_t crc, const void *buf, size_t n);
CKPZ_API uint32_t ckpz_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

#ifdef __cplusplus
}
#endif
#endif /* CKPZ_H */

/* The experimental part (ckpz_experimental.h), outside the guard so that a later
 * include with CKPZ_EXPERIMENTAL defined still brings it in. */
#if defined(CKPZ_EXPERIMENTAL) && !defined(CKPZ_EXPERIMENTAL_H)
#include "ckpz_experimental.h"
#endif
