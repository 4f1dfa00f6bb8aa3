/* ckpz_experimental.h — the calls of libckpz that may still change between minor versions.
 *
 * Not included by default: a program opts in by defining CKPZ_EXPERIMENTAL before it
 * includes <ckpz.h> (one rule, as zstd's ZSTD_STATIC_LINKING_ONLY), which then includes
 * this header; including this header itself is an error. What is here:
 *   - one compression shared by many processes (ckpz_split_*; libckpz_mpi uses it);
 *   - torch.save archives written from memory (ckpz_zip_source_*);
 *   - ratio prediction (ckpz_predict_*) and the link tuner (ckpz_tune);
 *   - the safetensors header writer (ckpz_safetensors_header);
 *   - publishing outputs under a temporary name (ckpz_publish_*: the CLI, the Python
 *     package and libckpz_mpi use it; a new front end should too);
 *   - gradient compression for data-parallel training (ckpz_grad_*);
 *   - a thread reading a regular file ahead or writing one behind (ckpz_pump_*: the
 *     library's fd sink uses it within a call, the CLI for its own buffers).
 * These calls are exported by the same libckpz and follow the conventions of ckpz.h
 * (contexts, ckpz_error, struct_size), but their signatures, structs and behaviour may
 * change in any release, SOVERSION or not: a caller rebuilds against each new ckpz.h.
 * A call that has proved itself moves to ckpz.h and is then kept stable. */
#ifndef CKPZ_EXPERIMENTAL_H
#define CKPZ_EXPERIMENTAL_H

#if !defined(CKPZ_EXPERIMENTAL) || !defined(CKPZ_H)
#error "ckpz_experimental.h: define CKPZ_EXPERIMENTAL, then #include <ckpz.h>, which includes this header"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- libraries built on libckpz ------------------------------------------------------ */
/* Replaces ctx's message with msg ("" or NULL: none) and returns code, so that a library
 * layered on libckpz (libckpz_mpi) reports its failures through the caller's context,
 * as the library's own calls do. ctx may be NULL. */
CKPZ_API ckpz_error ckpz_ctx_report(ckpz_ctx *ctx, ckpz_error code, const char *msg);

/* n elements of type t at src (little-endian, as files hold them) as doubles into dst,
 * through the library's type table: exact for every type but 64-bit integers beyond
 * 2^53 (rounded to nearest); NaN and infinities kept; opaque bytes and bool as their
 * byte's value. CKPZ_ERR_PARAM for an unknown type or a NULL pointer with n > 0. For
 * bindings whose language has no narrow floats (R). */
CKPZ_API ckpz_error ckpz_dtype_to_double(ckpz_dtype t, const void *src, size_t n, double *dst);

/* ---- one compression, many processes ------------------------------------------------ */
/* The serial encoder taken apart so that processes (MPI ranks: libckpz_mpi) can share
 * one compression and write one file together, byte for byte the file
 * ckpz_compress_io writes for the same input and params:
 *   1. every process plans the whole input (ckpz_split_plan: only the bytes the format
 *      readers need are read), so all hold the same list of chunks;
 *   2. each codes the chunks it is given (ckpz_split_code_into: its input bytes read
 *      through the source's pread, coded on params->threads threads), keeping the frames
 *      and a record of CKPZ_SPLIT_RECORD_SIZE bytes per chunk;
 *   3. the records of all chunks, in order, go to every process (an all-gather);
 *   4. each lays the file out from them (ckpz_split_lay) and writes the bytes of its
 *      chunks at their offset; one of them also writes the head and the tail.
 * Records are plain bytes, valid only between processes running the same build of the
 * library on machines of the same byte order. The plan holds a pointer to params->base
 * and params->policy's rules; the base must stay valid until ckpz_split_free. The
 * source's progress callback is called as each chunk is coded (ckpz_split_code_into; done and total: the call's input bytes; non-zero aborts the
 * call), on the calling thread, and not while planning or laying out. A plan is used by
 * one thread at a time: it keeps the coder's buffers and a layout in progress. */
typedef struct ckpz_split ckpz_split;
#define CKPZ_SPLIT_RECORD_SIZE 128

/* src needs pread and size. On failure *out is NULL and ctx says why (as compression
 * would: a malformed input, a policy that does not parse). */
CKPZ_API ckpz_error ckpz_split_plan(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, ckpz_split **out);
CKPZ_API void ckpz_split_free(ckpz_split *s); /* accepts NULL */
CKPZ_API uint64_t ckpz_split_chunks(const ckpz_split *s);
/* Chunk i's bytes are the input's [*offset, *offset + *length); i == chunks gives the
 * end of the input. Chunks are in input order and share no bytes. */
CKPZ_API void ckpz_split_chunk(const ckpz_split *s, uint64_t i, uint64_t *offset, uint64_t *length);
/* The name of the tensor chunk i belongs to (its last, for a chunk of packed entries),
 * "" for opaque bytes; valid until ckpz_split_free. */
CKPZ_API const char *ckpz_split_chunk_name(const ckpz_split *s, uint64_t i);
/* Codes chunks [first, first + n) into the caller's memory (reused from call to call,
 * its pages are faulted in once): dst holds cap bytes, at least ckpz_split_bound(s,
 * first, n); records gets n records, *coded_len the frames' bytes. Not guaranteed: any
 * particular size of a record's frame (chunks equal to the base's have none). */
CKPZ_API uint64_t ckpz_split_bound(const ckpz_split *s, uint64_t first, uint64_t n);
CKPZ_API ckpz_error ckpz_split_code_into(ckpz_ctx *ctx, ckpz_split *s, uint64_t first, uint64_t n, void *records,
                                         void *dst, size_t cap, size_t *coded_len);

/* A stretch of output bytes in memory (an array element: its layout is fixed). */
typedef struct ckpz_piece {
    const void *ptr;
    size_t len;
} ckpz_piece;

typedef struct ckpz_split_out {
    size_t struct_size;    /* set by the caller: sizeof(ckpz_split_out) */
    void *head;            /* the file's first head_len bytes (header, base frame) */
    size_t head_len;
    /* The bytes of the chunks given, in file order from region_offset, as pieces: the
     * frames inside the coded bytes given (which must outlive them: nothing is copied)
     * and the frames laid out around them (entries, runs of copies), kept in `frames`.
     * No piece is longer than 1 GiB. */
    ckpz_piece *pieces;
    size_t npieces;
    size_t region_len;
    uint64_t region_offset;
    void *tail;            /* the index and trailer (and a copy frame that ends the
                              chunks), at tail_offset, up to file_size */
    size_t tail_len;
    uint64_t tail_offset;
    uint64_t file_size;
    uint32_t content_checksum; /* CRC-32C of the original (restored, for a lossy file) */
    void *frames;              /* what pieces outside the coded bytes point into */
    ckpz_stats stats;          /* the whole compression's, as ckpz_compress_io gives them
                                  (last, so that it can grow) */
} ckpz_split_out;

/* The file's layout a stretch at a time, for processes that write while others still
 * code: lays out chunks [laid, upto), laid being where the previous call stopped (0 for
 * the first call, and after a call that reached the last chunk or failed). records
 * holds every chunk's record at its index (only chunks [laid, upto) are read); coded
 * the frames of chunks [first, first + n) among them (n may be 0), as
 * ckpz_split_code_into gave them. out (out->struct_size set by the caller, see ckpz.h)
 * gets those chunks' bytes as pieces from region_offset, the head when the call starts
 * at chunk 0, and the tail, content_checksum and stats when upto is
 * ckpz_split_chunks(s). A run of chunks equal to the base's is written with the chunk
 * after it (or the tail), as serial ckpz writes it. The calls' heads, regions and tail
 * are the whole file, byte for byte what ckpz_compress_io writes. */
CKPZ_API ckpz_error ckpz_split_lay(ckpz_ctx *ctx, ckpz_split *s, const void *records, uint64_t upto, uint64_t first,
                                   uint64_t n, const void *coded, size_t coded_len, ckpz_split_out *out);
/* Frees what o holds and zeroes it, struct_size kept; accepts NULL. */
CKPZ_API void ckpz_split_out_free(ckpz_split_out *o);

/* ---- torch.save archives written from memory ------------------------------------------ */
/* A read callback that produces, from members in the caller's memory, the stored zip
 * archive torch.save (torch >= 1.6) writes: each member's local header with its data
 * aligned (64 bytes by default) by an extra field of padding, a data descriptor after
 * each non-empty member, then the central directory and zip64 end records, with zip64
 * fields exactly where torch's writer puts them (sizes or offsets of 4 GiB and more).
 * Member bytes are copied straight into the library's chunk buffers and their CRC-32
 * taken on the way: given to ckpz_compress_stream as its reader (with
 * ckpz_zip_source_size as the size hint) the archive is compressed without ever existing
 * uncompressed. The members are laid out in the order given: which records a torch
 * release writes, and in what order, is the caller's business (torch 1.13: data.pkl,
 * the storages, version; torch 2.x adds records and a serialization id, see
 * ckpz_zip_options). Names are copied at creation; the data must stay valid and
 * unchanged until the last read. */
typedef struct ckpz_zip_member {
    const char *name;  /* full name in the archive ("ckpt/data/0"), not starting with '/' */
    const void *data;  /* may be NULL when size is 0 */
    uint64_t size;
} ckpz_zip_member;
typedef struct ckpz_zip_source ckpz_zip_source;

/* CKPZ_ERR_PARAM for a bad name (empty, over 65535 bytes, starting with '/') or more
 * than 2^32 - 1 members; CKPZ_ERR_NOMEM. */
CKPZ_API ckpz_error ckpz_zip_source_create(ckpz_ctx *ctx, const ckpz_zip_member *members, size_t n,
                                           ckpz_zip_source **out);
/* How torch's writer of a given release and configuration lays the archive out, for
 * ckpz_zip_source_create_opts; ckpz_zip_options_init sets what ckpz_zip_source_create
 * does (torch 1.13's writer and torch 2.x's defaults: 64-byte alignment, CRC-32 fields
 * computed, no serialization id). Added in 0.4.0. */
typedef struct ckpz_zip_options {
    size_t struct_size;   /* set by ckpz_zip_options_init */
    /* Each member's data starts at a multiple of this many bytes (1..65536): torch's
     * storage_alignment (torch.utils.serialization.config.save.storage_alignment). */
    uint32_t alignment;
    /* 0: every CRC-32 field (local descriptor, central directory) is written as 0 and
     * no CRC is computed, as torch.serialization.set_crc32_options(False) makes torch's
     * writer do. Default 1. */
    int crc32;
    /* Non-NULL: the archive gets one more member after the given ones, of this name
     * (e.g. "ckpt/.data/serialization_id"), holding the id torch 2.x's writer
     * appends: 40 ASCII digits, id_names_hash as %020llu, then as %020llu the fold
     * h = h ^ (c + 0x9e3779b9 + (h << 6) + (h >> 2)) (mod 2^64, from h = 0) of the CRC-32
     * field c of every non-empty member before it, in order. id_names_hash is torch's
     * hash of the record names, which depends on its C++ library's std::hash and
     * unordered_set: the caller gets it from torch itself. Copied at creation. */
    const char *id_name;
    uint64_t id_names_hash;
} ckpz_zip_options;
CKPZ_API void ckpz_zip_options_init(ckpz_zip_options *o);
/* As ckpz_zip_source_create, laid out as opt says (NULL: the defaults). CKPZ_ERR_PARAM
 * also for an alignment out of range, a bad id_name, or a struct_size this library does
 * not know. Added in 0.4.0. */
CKPZ_API ckpz_error ckpz_zip_source_create_opts(ckpz_ctx *ctx, const ckpz_zip_member *members, size_t n,
                                                const ckpz_zip_options *opt, ckpz_zip_source **out);
/* Bytes the archive has in all (known before the first read). */
CKPZ_API uint64_t ckpz_zip_source_size(const ckpz_zip_source *s);
/* A ckpz_read_fn: the opaque pointer is the ckpz_zip_source. */
CKPZ_API ptrdiff_t ckpz_zip_source_read(void *s, void *buf, size_t n);
/* Accepts NULL. */
CKPZ_API void ckpz_zip_source_free(ckpz_zip_source *s);

/* ---- ratio prediction (lib/predict, doc/predict.md) --------------------------------- */
/* Predicts, per tensor and for the whole file, the ratio that compression with a
 * candidate setting would reach, without compressing: features are computed from a
 * sample of each tensor (at most sample_bytes in a few windows spread over it, read
 * through pread; the whole tensor is never read) and fed to a small MLP whose weights
 * load from a text file (data/ratio_mlp.txt) or, by default, from the copy built into
 * the library. The setting is a level and, for lossy coding, a policy in the text
 * ckpz_params.policy takes (doc/lossy.md); tensors the policy leaves exact (norms,
 * biases, vectors, integers, exp_avg_sq outside pointwise-rel) are predicted for
 * lossless coding, as the compressor codes them. Not guaranteed: the prediction is an
 * estimate (a few percentage points of space savings on typical checkpoints, more on
 * unusual data or for settings the model was not trained on: doc/predict.md lists
 * them); the features and the built-in model may change between versions. A delta
 * against a base is not predicted (change-rel, which needs one, predicts exact). */
#define CKPZ_PREDICT_FEATURES 30

typedef struct ckpz_predict_params {
    size_t struct_size;        /* set by ckpz_predict_params_init */
    int level;                 /* candidate: level CKPZ_LEVEL_MIN..MAX */
    ckpz_input_format format;  /* as for compression */
    ckpz_dtype raw_dtype;
    size_t sample_bytes;       /* per tensor; 0 = default (64 KiB); 4 KiB..16 MiB */
    size_t sample_budget;      /* all tensors of one file together; 0 = default (16 MiB);
                                  each tensor gets at least 16 KiB (or its size) */
    const char *model_path;    /* model weights (text, doc/predict.md); NULL = built in */
    const char *policy;        /* candidate: lossy rules as in ckpz_params; NULL = lossless */
    double max_mae;            /* as in ckpz_params */
    int features_only;         /* 1: compute the features and load no model (tensors are then
                                  predicted as stored): how a new model is trained */
    uint32_t raw_ndim;         /* as in ckpz_params (added in 0.4.0) */
    const uint64_t *raw_shape;
} ckpz_predict_params;

CKPZ_API void ckpz_predict_params_init(ckpz_predict_params *p);

/* One predicted tensor (or run of opaque bytes, dtype NONE: predicted as stored). */
typedef struct ckpz_prediction {
    size_t struct_size;        /* set by the library: sizeof(ckpz_prediction) in its header
                                  (a callback built against a newer header checks it) */
    const char *name;          /* "" for opaque bytes; valid during the callback only */
    ckpz_dtype dtype;
    uint32_t ndim;
    const uint64_t *shape;     /* valid during the callback only */
    uint64_t offset, length;   /* byte range in the file */
    uint64_t sampled;          /* bytes the features were computed from */
    int lossy;                 /* predicted for lossy coding (else exact) */
    const char *lossy_mode;    /* "lossless", "rel", "pointwise-rel", "affine", ... */
    double savings;            /* predicted 1 - compressed / original */
    double ratio;              /* predicted original / compressed */
    double features[CKPZ_PREDICT_FEATURES]; /* the model's inputs (doc/predict.md) */
} ckpz_prediction;

typedef struct ckpz_predict_total {
    size_t struct_size;        /* set by the caller: sizeof(ckpz_predict_total) */
    uint64_t original_bytes;   /* the file */
    uint64_t tensor_bytes;
    uint64_t tensors;
    uint64_t lossy_tensors;    /* of which predicted for lossy coding */
    double predicted_bytes;    /* predicted compressed size of the whole file */
    double ratio;              /* original_bytes / predicted_bytes */
} ckpz_predict_total;

/* Called once per segment in file order; return non-zero to stop (CKPZ_ERR_ABORTED). */
typedef int (*ckpz_predict_fn)(void *opaque, const ckpz_prediction *t);

/* Predicts the compression of a checkpoint in its original format (file_size bytes
 * read through pr) with the setting in params. each and total may be NULL. A malformed
 * model file fails with CKPZ_ERR_PARAM and a message naming the file and the line; a
 * malformed policy with CKPZ_ERR_PARAM and its line. */
CKPZ_API ckpz_error ckpz_predict_file(ckpz_ctx *ctx, const ckpz_predict_params *params, ckpz_pread_fn pr,
                                      void *pr_opaque, uint64_t file_size, ckpz_predict_fn each, void *each_opaque,
                                      ckpz_predict_total *total);

/* Name of feature i ("zero_frac", ...; NULL when i is out of range). */
CKPZ_API const char *ckpz_predict_feature_name(unsigned i);

/* ---- choosing the levels for a link (lib/predict/autotune.c, tune.c) ------------------- */

/* A level below CKPZ_LEVEL_MIN for ckpz_params.level (and the CLI's -0): every chunk
 * stored as it is (one plane, no transform, no coding; each chunk still carries its
 * checksums), for links that move bytes faster than any coding level saves them; the
 * tuner's candidate for "do not compress". Files written so are ordinary .ckpz files
 * (every version decodes them). A base's bytes are not read, but a file written with a
 * base still names it and asks for it on restoring, as every such file does; lossy
 * rules of a policy still code their chunks (at level 1). */
#define CKPZ_LEVEL_STORE 0

/* What ckpz_tune chose: set level and threads in the compression's params, and policy
 * (when not empty) as params->policy. */
typedef struct ckpz_tune_result {
    size_t struct_size;           /* set by the caller: sizeof(ckpz_tune_result) */
    int level;
    int threads;
    char policy[320];             /* lossless rules, one level per kind of tensor
                                     (`*exp_avg_sq* lossless level 6`, ...); "" when one
                                     level serves the whole input */
    double save_seconds;          /* the model's time to compress and send it */
    double uncompressed_seconds;  /* to send it as it is */
    double measure_seconds;       /* what choosing took */
} ckpz_tune_result;

/* Chooses the level per kind of tensor (Adam's exp_avg_sq and exp_avg, gradients, the
 * rest) and the thread count that deliver src (random access: pread and size) fastest
 * through a link of link_mbs MB/s, end to end (coding, sending and the receiver's
 * restoring overlapped): it measures the candidate levels (CKPZ_LEVEL_STORE, 1, 3, 6)
 * on samples of each kind, cut and coded as the compression will (0.05-0.2 s; not at
 * all where the link moves the input in under half a second or the predicted ratio
 * cannot win back twice that), then minimises the cost model (lib/predict/tune.c: the
 * first chunk's coding + max(compress, transfer, restore) + the last chunk's restoring +
 * a coder's start; of choices within 2%, the least compress + transfer + restore), coding
 * only with levels that code and restore at twice the link's speed on half the threads it may use (one on 2 or 3 cores) and only
 * where that saves 5% of storing's time; result.level may be CKPZ_LEVEL_STORE (for the
 * whole input only). params gives the format, chunking, a base
 * (tensors found in it are measured as deltas) and a user policy (kept: one level then);
 * params->threads > 0 and cpu_budget > 0 cap the threads (otherwise every core).
 * explain, when not NULL, gets the measurements and the model's table as text (the
 * CLI's -v). Not guaranteed: any particular choice for given data; it is measured. */
CKPZ_API ckpz_error ckpz_tune(ckpz_ctx *ctx, const ckpz_params *params, const ckpz_source *src, double link_mbs,
                              int cpu_budget, ckpz_tune_result *out, ckpz_write_fn explain, void *explain_opaque);

/* ==== safetensors headers (lib/formats/safetensors.c) ==========================
 * The one safetensors header writer: what ckpz hands itself or a caller as a safetensors
 * file (the tuner's samples, libckpz_mpi's shards, the Python package's target_bw= and
 * ckpz.safetensors.save) is described here, so that every such header is what the reader
 * takes back. */

/* One tensor of a safetensors header. */
typedef struct ckpz_st_tensor {
    const char *name;       /* UTF-8, NUL-terminated; not "__metadata__" */
    ckpz_dtype dtype;       /* a type with a safetensors name (ckpz_dtype_format_name), or
                               CKPZ_DTYPE_NONE with dtype_name */
    uint32_t ndim;          /* at most 64 */
    const uint64_t *shape;  /* ndim values, outermost first (NULL when ndim is 0) */
    const char *dtype_name; /* NULL, or a safetensors dtype ckpz has no type for ("C64",
                               "F8_E8M0"): [A-Z0-9_]{1,32}, written as given */
    uint32_t elem_size;     /* with dtype_name: bytes an element (1 to 64) */
} ckpz_st_tensor;

/* One entry of a safetensors header's "__metadata__": UTF-8, NUL-terminated strings. */
typedef struct ckpz_st_meta {
    const char *key;
    const char *value;
} ckpz_st_meta;

/* The header of a safetensors file of the n tensors t in this order, their data back to
 * back from offset 0 (element size x shape bytes each): 8-byte little-endian length, then
 * compact JSON ("data_offsets" in that layout; names escaped as the safetensors package
 * and Python's json.dumps(ensure_ascii=False) escape them) padded with spaces to a
 * multiple of 8 bytes. meta NULL: no "__metadata__"; otherwise it comes first, with the
 * nmeta pairs in the order given (nmeta 0: {}). *len gets the header's length and
 * *data_bytes (may be NULL) the data's; with dst NULL nothing is written (ask the size,
 * then call again), else dst must hold cap >= *len bytes (CKPZ_ERR_LIMIT otherwise). A
 * tensor with no name, a name that is not UTF-8 or is "__metadata__", a dtype without a
 * safetensors name (or a dtype_name not of the form above, or given with a dtype), over
 * 64 dimensions, or sizes past 2^64, and a metadata key or value missing or not UTF-8,
 * are refused with CKPZ_ERR_PARAM and a message naming it; a header over what ckpz
 * reads (256 MiB) with CKPZ_ERR_LIMIT. Not checked: names or keys that repeat (the
 * safetensors package refuses them; ckpz's reader takes both). ctx may be NULL (no
 * message). */
CKPZ_API ckpz_error ckpz_safetensors_header(ckpz_ctx *ctx, const ckpz_st_tensor *t, size_t n, const ckpz_st_meta *meta,
                                            size_t nmeta, void *dst, size_t cap, size_t *len, uint64_t *data_bytes);
/* ==== end of safetensors headers ====================================================== */

/* ---- gradient compression (lib/grad, doc/gradients.md) ------------------------------- */
/* Gradients of data-parallel training packed for the wire: each block of `block`
 * elements gets one FP32 scale (its largest magnitude / qmax) and signed codes of `bits`
 * bits (8: [-127, 127], 4: [-7, 7], two a byte), rounded to nearest or stochastically
 * (unbiased: each code rounds up with the probability of its fraction, the draws a hash
 * of (seed, element index), so one seed gives the same packet on every CPU and
 * instruction set). A packet (doc/gradients.md) is a 24-byte header, the scales, the
 * codes and a CRC-32C of all; ckpz_grad_unpack refuses any packet that is not exactly
 * consistent. Buffers are FP32, BF16 or FP16 (CKPZ_DTYPE_F32, _BF16, _F16), little-endian,
 * aligned to their element size, at most 2^32 - 1 elements. Not guaranteed: the packet's
 * bytes for given values across releases (the version byte changes with them).
 * bits = 1 (added later; older libraries refuse such packets as CKPZ_ERR_VERSION): the
 * block's scale is the mean of its magnitudes and each element one bit, its sign (+scale
 * for a value >= 0, -scale below): 1 + 32 / block bits an element; stochastic and
 * entropy do not apply (the signs are written raw); ckpz_grad_sum gives the signs of the
 * sums with their mean magnitude. */
typedef struct ckpz_grad_params {
    size_t struct_size; /* set by ckpz_grad_params_init */
    unsigned bits;      /* 8 or 4 (default 8); or 1: scaled signs (below) */
    uint32_t block;     /* elements per scale, 1..65536 (default 256) */
    int stochastic;     /* 0: to nearest, ties to even (default); 1: stochastic */
    uint64_t seed;      /* the draws of stochastic rounding: a new seed each step */
    /* Sparsification (added after the fields above: a caller whose struct_size stops
     * before them packs dense). CKPZ_GRAD_TOPK keeps the k = ceil(density * n) largest
     * magnitudes (ties: the lowest indices; zeros never), CKPZ_GRAD_THRESHOLD those of
     * magnitude >= threshold; the packet holds their indices (delta-coded or a bitmap,
     * whichever is smaller) and their values, FP32 (bits 32) or 8-bit codes with one
     * scale per `block` values kept (bits 8); bits 4 is refused. */
    unsigned kind;      /* CKPZ_GRAD_DENSE (default), CKPZ_GRAD_TOPK, CKPZ_GRAD_THRESHOLD */
    double density;     /* top-k: (0, 1] (default 0.01) */
    float threshold;    /* threshold: finite, > 0 */
    /* Added later (a shorter struct_size: 0). Dense packets: 1 entropy-codes the codes
     * (libckpz's order-0 rANS, doc/entropy.md) when that makes the packet smaller, 0 (the
     * default) writes them as they are; the packet says which (doc/gradients.md). */
    unsigned entropy;
} ckpz_grad_params;
#define CKPZ_GRAD_DENSE 0u
#define CKPZ_GRAD_TOPK 1u
#define CKPZ_GRAD_THRESHOLD 2u
CKPZ_API void ckpz_grad_params_init(ckpz_grad_params *p);

/* The packet's size in bytes for n elements, written to *size: exact for a dense
 * packet with raw codes; for a sparse one, or a dense one with entropy set, the most it
 * can take (the packet written is often shorter: *written). CKPZ_ERR_PARAM for bad
 * params or n. */
CKPZ_API ckpz_error ckpz_grad_packet_size(ckpz_ctx *ctx, const ckpz_grad_params *p, uint64_t n, size_t *size);

/* Packs grad[0..n) of dtype into dst (cap bytes, at least ckpz_grad_packet_size),
 * *written the packet's size. With residual (FP32, n elements; zeros at the first step)
 * it is error feedback, in place: grad + residual is what gets quantised, and residual
 * becomes (grad + residual) - (what the packet decodes to, in FP32), so what a step
 * leaves out is sent by later steps. A NaN or an infinity in grad (+ residual) is
 * CKPZ_ERR_INPUT naming the element: nothing useful is in dst, and residual is left as
 * it was (the caller sends that bucket uncompressed, so that an AMP grad scaler sees
 * the overflow). A block whose largest magnitude is below 2^-118 has scale 0 and codes
 * 0 (with error feedback, its values stay in the residual). */
CKPZ_API ckpz_error ckpz_grad_pack(ckpz_ctx *ctx, const ckpz_grad_params *p, ckpz_dtype dtype, const void *grad,
                                   uint64_t n, float *residual, void *dst, size_t cap, size_t *written);

typedef struct ckpz_grad_info {
    size_t struct_size; /* set by the caller: sizeof(ckpz_grad_info) */
    uint64_t count;     /* elements */
    ckpz_dtype dtype;   /* of the buffer packed */
    unsigned bits;
    uint32_t block;
    int stochastic;     /* how it was rounded (information only) */
    /* added later (a caller's shorter struct_size does not get them): */
    unsigned kind;      /* CKPZ_GRAD_DENSE, or how a sparse packet chose (_TOPK, _THRESHOLD) */
    uint64_t nnz;       /* sparse: the values it holds (dense: count) */
} ckpz_grad_info;

/* Checks the whole packet src[0..len) (what ckpz_grad_unpack checks) and describes it:
 * CKPZ_ERR_NOT_CKPZ (no packet magic), CKPZ_ERR_VERSION (another version, a reserved
 * field set), CKPZ_ERR_TRUNCATED / CKPZ_ERR_CORRUPT (sizes that disagree with len),
 * CKPZ_ERR_CHECKSUM, CKPZ_ERR_CORRUPT (a scale negative or not finite, a code out of
 * range), each with a message in ctx. */
CKPZ_API ckpz_error ckpz_grad_info_read(ckpz_ctx *ctx, const void *src, size_t len, ckpz_grad_info *info);

/* Decodes the packet src[0..len) into out: n elements of dtype (FP32, BF16 or FP16,
 * whatever the packed buffer's was; BF16 and FP16 rounded to nearest, ties to even).
 * n must be the packet's count (CKPZ_ERR_PARAM otherwise). Errors as
 * ckpz_grad_info_read; on error out is unspecified. */
CKPZ_API ckpz_error ckpz_grad_unpack(ckpz_ctx *ctx, const void *src, size_t len, ckpz_dtype dtype, void *out,
                                     uint64_t n);
/* Adds what the packet src[0..len) decodes to (in FP32, as ckpz_grad_unpack gives it)
 * into acc[0..n), FP32 (a sparse packet touches only its indices). Same checks and
 * errors as ckpz_grad_unpack; on error acc is unchanged. */
CKPZ_API ckpz_error ckpz_grad_unpack_add(ckpz_ctx *ctx, const void *src, size_t len, float *acc, uint64_t n);

/* The sum of m dense packets srcs[p][0..lens[p]) of one layout (count, dtype, bits,
 * block) as one packet of that layout in dst, *written its size: a ring all-reduce's
 * step, at the packets' size. dst holds cap bytes (at least the inputs' size) and is
 * either srcs[0] itself (the sum in place) or overlaps no input. Block by block (never
 * the whole buffer in FP32) the inputs' decoded values are added in the order given and
 * the sums quantised to nearest with the block's new scale (their largest magnitude /
 * qmax): the packet ckpz_grad_pack writes for those FP32 sums. Error: each decoded
 * value is within half the block's new step of the sum of the inputs' decoded values
 * (n hops of a ring add n such errors, each at most half a step of the partial sum's
 * block); a block whose sums are all below 2^-118 in magnitude becomes 0, as in
 * ckpz_grad_pack. Errors: as ckpz_grad_unpack for any input (the message names it);
 * CKPZ_ERR_PARAM for a sparse packet, another layout or too little room;
 * CKPZ_ERR_INPUT for a block whose sum overflows to infinity. */
CKPZ_API ckpz_error ckpz_grad_sum(ckpz_ctx *ctx, const void *const *srcs, const size_t *lens, size_t m, void *dst,
                                  size_t cap, size_t *written);

/* ---- publishing outputs (lib/file/publish.c) ------------------------------------------ */
/* How the CLI, the Python package and libckpz_mpi put an output (a file, or a directory
 * of files) in place; a new front end uses the same calls. The output is written under a
 * temporary name beside its final name, .NAME.ckpz-PID-HOST-RANDOM.tmp (hidden; PID the
 * writer's process id, HOST 8 hex digits of its host name's hash, RANDOM 8 hex digits),
 * held locked by its writer, and renamed into place by ckpz_publish_commit only once
 * complete. Every failure removes the temporary output. What a writer killed outright
 * leaves, the next ckpz_publish_open of the same final name removes: only this pattern,
 * only when HOST is this host, PID no live process here and nobody holds its lock (so a
 * temporary output of a live writer, in this process or another, is never touched; a
 * reused PID or another host's leftover is kept); with it go the regular files other
 * libraries named after it (TEMP.MORE: the TEMP.locktest.N that Open MPI's MPI-IO leaves
 * when a rank is killed while it opens the file). Not guaranteed: the removal of a
 * leftover of another host, or of a PID reused since. On failure errno keeps the
 * system's error and ctx (may be NULL) the message, which names the final name. */
/* clang-format off */
/* flags of ckpz_publish_open: */
#define CKPZ_PUBLISH_DIRECTORY 2u /* the output is a directory (made empty, filled by the caller) */
#define CKPZ_PUBLISH_ANONYMOUS 8u /* a file without a name (O_TMPFILE) where the file system
                                     has them: a SIGKILL then leaves nothing at all */
/* flags of ckpz_publish_commit (or of open, for the commit): */
#define CKPZ_PUBLISH_REPLACE 1u   /* an existing final name is replaced (else the commit
                                     refuses it: "NAME: appeared while writing; not overwritten") */
#define CKPZ_PUBLISH_DURABLE 4u   /* the commit fsyncs the output and then its directory */
/* clang-format on */
typedef struct ckpz_publish ckpz_publish;
/* Removes the dead writers' leftovers of name (above), then creates the temporary
 * output. *out is NULL on failure. */
CKPZ_API ckpz_error ckpz_publish_open(ckpz_ctx *ctx, const char *name, unsigned flags, ckpz_publish **out);
/* The temporary file's descriptor (write it with ckpz_fd_write, ckpz_sink_fd...), open
 * until the commit or abort; -1 for a directory. */
CKPZ_API int ckpz_publish_fd(const ckpz_publish *p);
/* The temporary output's path ("" for an anonymous file): a directory's to fill, a
 * file's for processes that open it by name (MPI-IO) or a signal handler's unlink. */
CKPZ_API const char *ckpz_publish_temp(const ckpz_publish *p);
/* fsync (CKPZ_PUBLISH_DURABLE), close, rename into place (over an existing name only
 * with CKPZ_PUBLISH_REPLACE); frees p whatever happens (on failure the temporary output
 * is gone and the final name is as it was). A regular file replaced is freed (its blocks
 * given back) on a short-lived thread of the library, so the call does not wait for it;
 * a child forked meanwhile does not keep it, and unloading the library waits for it. */
CKPZ_API ckpz_error ckpz_publish_commit(ckpz_ctx *ctx, ckpz_publish *p, unsigned flags);
/* Removes the temporary output and frees p (NULL: nothing). Keeps errno. */
CKPZ_API void ckpz_publish_abort(ckpz_publish *p);
/* 1 when the last component of path is a temporary name of this pattern (ckpz -r skips
 * them), else 0. */
CKPZ_API int ckpz_publish_is_temp(const char *path);
/* Removes the dead writers' leftovers of the final name `name` (ckpz_publish_open does);
 * returns how many. Keeps errno. */
CKPZ_API int ckpz_publish_sweep(const char *name);

/* ---- reading ahead, writing behind --------------------------------------------------- */
/* One thread that moves a regular file's bytes while the calling thread codes, through
 * a ring of a few buffers. With one coding thread, reading and writing a file cost the
 * calling thread as much as a third of the coding time (page-cache copies, tmpfs page
 * allocation: work the kernel does on the caller's core); the pump moves it to a core of
 * its own, as the in-memory benchmark (ckpz -b) never pays it. For regular files only,
 * whose reads and writes never wait for ever, so that stopping it never hangs.
 * ckpz_compress_io and ckpz_decompress_io put one under a sink made by ckpz_sink_fd
 * themselves (a regular file, when ckpz_pump_wanted); a caller with buffers of its own
 * (the CLI) drives one with these calls. Neither reads ahead: a copy out of the ring
 * costs the caller what the kernel's copy into its own buffer does (on tmpfs). */
#define CKPZ_PUMP_MAX 8 /* buffers at most */
typedef struct ckpz_pump ckpz_pump;
/* Does coding on `threads` threads (0: all cores) leave a core free for a pump? Where
 * coding takes every core, a pump's thread only competes with it (its hand-overs cost
 * 5-10% more CPU than the caller's own reads and writes). */
CKPZ_API int ckpz_pump_wanted(int threads);
/* A pump over io (which it uses alone until ckpz_pump_stop), reading (writing 0) or
 * writing, through nbuf (2..CKPZ_PUMP_MAX) buffers of size bytes that start `lead` bytes
 * into their allocations (room a reader keeps for bytes that came before). NULL when
 * out of memory or no thread. */
CKPZ_API ckpz_pump *ckpz_pump_start(ckpz_fd *io, int writing, int nbuf, size_t size, size_t lead);
/* Reading: the next buffer read ahead (the previous one goes back to the thread), its
 * length (less than size only at the end of the input, 0 past it) in *len. NULL on a
 * read error (its errno from ckpz_pump_error). */
CKPZ_API unsigned char *ckpz_pump_next(ckpz_pump *p, size_t *len);
/* Writing: appends n bytes to the buffer the pump is filling, queueing each buffer once
 * full (waits for a free one); 0, or -1 after a write error (seen when a buffer is taken
 * or at the drain: a failed write may show only there). */
CKPZ_API int ckpz_pump_write(ckpz_pump *p, const void *src, size_t n);
/* Writing: lends a whole free buffer for up to n bytes of a write (a decoder decodes a
 * chunk straight into it, an encoder codes a frame of at most n bytes), or NULL: n is
 * under a quarter of size or over size (a small write is cheaper copied into the buffer
 * being filled than written alone), a write failed, or lending would leave copies no
 * buffer (at most nbuf - 1 are lent at once). Waits while every buffer is taken and some
 * are queued. The bytes go out when the buffer is passed back to ckpz_pump_write (src
 * the pointer lent, the m <= n bytes filled): queued where that write comes, no copy. A
 * lent buffer not written back stays the pump's (freed by ckpz_pump_stop). */
CKPZ_API void *ckpz_pump_lend(ckpz_pump *p, size_t n);
/* Writing: queues the buffer being filled, if it holds any bytes, and waits until every
 * queued buffer is written; 0, or -1 after a write error. */
CKPZ_API int ckpz_pump_drain(ckpz_pump *p);
/* The first error: an errno, or -1 for a write of 0 bytes (no errno says why); else 0. */
CKPZ_API int ckpz_pump_error(ckpz_pump *p);
/* Stops and joins the thread (a reader after its current read; a writer drops what it
 * has not written) and frees the pump; the descriptor's byte count and first error are
 * added to io. Accepts NULL. */
CKPZ_API void ckpz_pump_stop(ckpz_pump *p);

/* ---- sinks that lend their buffers --------------------------------------------------- */
/* A sink that keeps bytes in buffers of its own (a pump's ring, a sink in memory) costs
 * the coder a copy of every chunk into them; a sink that lends room has each chunk coded
 * or decoded straight into it. ckpz_sink has no room for a new call (ckpz.h's layout never
 * changes), so a lending sink is a ckpz_sink that writes through a ckpz_lender:
 * ckpz_sink_lender sets s->write to ckpz_lender_write, s->patch to ckpz_lender_patch
 * (NULL where l->patch is), s->opaque to l. A sink of ckpz_sink_mem (or ckpz_mem_write
 * as a callback) lends too, through ckpz_mem_lend, without a ckpz_lender.
 * The calls that compress or restore a stream (ckpz_compress_io, ckpz_decompress_io and
 * those over them) recognise such a sink and ask lend for the room of each chunk they
 * code (on the calling thread, before the chunk's coding starts). lend(opaque, n) returns
 * room for up to n bytes of a write, or NULL (the caller then writes from its own buffer,
 * as with any sink); the caller fills m <= n bytes of it (compression: the frame, at most
 * its bound n; restoring: the chunk, m = n) and passes it to write (src the pointer lent,
 * those m bytes) once, in its place among the sink's writes. Other writes, from the
 * caller's buffers, and other lends may come between a lend and its write, unless
 * flags has CKPZ_LEND_NEXT: the room is where the sink's next bytes go (a sink in
 * memory), so the caller lends it only when it lends one room at a time and writes it
 * back as its next write. A call that fails may leave lent room unwritten: the sink
 * reclaims it. Set struct_size to sizeof(ckpz_lender) before ckpz_sink_lender (a lender
 * of the size before flags came is read with flags 0); a sink whose lender is of an
 * unknown size is written to without lending. l must outlive the calls that use s. */
typedef void *(*ckpz_lend_fn)(void *opaque, size_t n);
#define CKPZ_LEND_NEXT 1u
typedef struct ckpz_lender {
    size_t struct_size;
    ckpz_write_fn write; /* the sink's own */
    ckpz_patch_fn patch; /* may be NULL */
    void *opaque;        /* for write, patch and lend */
    ckpz_lend_fn lend;
    unsigned flags; /* CKPZ_LEND_NEXT, or 0 */
} ckpz_lender;
CKPZ_API void ckpz_sink_lender(ckpz_sink *s, ckpz_lender *l);
CKPZ_API int ckpz_lender_write(void *lender, const void *buf, size_t n);              /* l->write */
CKPZ_API int ckpz_lender_patch(void *lender, const void *buf, size_t n, uint64_t off); /* l->patch */
/* A ckpz_lend_fn over a ckpz_mem sink (flags CKPZ_LEND_NEXT): the room past its size, a
 * growing sink grown to hold n more bytes first; NULL where n more bytes would not be
 * kept (a full or counting sink). ckpz_mem_write of that room's pointer takes its bytes
 * where they lie, without a copy. */
CKPZ_API void *ckpz_mem_lend(void *mem, size_t n);

/* How many bytes at the start of a fresh, 2 MiB-aligned mapping of n bytes to advise
 * MADV_HUGEPAGE, as the library does for its own large outputs: where the kernel's
 * transparent_hugepage/defrag makes such a fault compact memory synchronously (madvise,
 * always, defer+madvise: read once per process) only as many 2 MiB pages as
 * /proc/buddyinfo shows free beyond a reserve (read on each call, some microseconds), so
 * that a busy machine's fragmented memory never stalls a fault; all of n's 2 MiB pages
 * otherwise. A multiple of 2 MiB (from 1 MiB on, n rounded up below 4 MiB); 0 below 1 MiB
 * or where the platform has no such advice. The environment variable CKPZ_HUGEPAGES=off
 * or =on (for benchmarks) makes it 0 or all of them. */
CKPZ_API size_t ckpz_huge_span(size_t n);

/* Reads the param groups of the optimizer state a torch.save file's pickle holds
 * (restoring the bytes before its first tensor, at most 64 MiB): afterwards
 * ckpz_archive_entry gives each optimizer state tensor's beta2 and where it was read.
 * CKPZ_OK also when there is nothing to read (another format, a pickle not understood);
 * a delta file needs its base (params->base at open) when its pickle was coded against
 * the base's, else the restore's error (CKPZ_ERR_BASE). Not thread-safe against other
 * calls on `a`. */
CKPZ_API ckpz_error ckpz_archive_read_optim(ckpz_ctx *ctx, ckpz_archive *a);

#ifdef __cplusplus
}
#endif
#endif /* CKPZ_EXPERIMENTAL_H */
