/* ckpz_mpi.h — libckpz_mpi: many MPI ranks compress one checkpoint into one .ckpz file,
 * and restore it, with MPI-IO. The file is byte for byte the one serial ckpz (or
 * ckpz_compress_io) writes for the same input and params, so every reader opens it.
 *
 * Compression: every rank plans the whole input (only the format's own bytes are read);
 * in rounds of 32 chunks a rank, each rank reads and codes the chunks that start in its
 * share of the round's bytes on params->threads threads, the ranks exchange each chunk's
 * small record (MPI_Iallgatherv, completed a round later), and each rank writes its bytes
 * of the rounds laid out so far at their offset (MPI_File_write_at), rank 0 the header,
 * index and trailer: writing overlaps coding, and a rank holds two rounds of frames at
 * most. Restoring: each rank verifies and decodes its share of the original bytes and
 * writes them at their offset; rank 0 checks the entry frames and the frames' layout
 * (ckpz_archive_check_frames), and the whole file's checksum from the ranks' parts: a
 * file is refused for whatever the serial decoder (ckpz -d, -t) refuses it for.
 *
 * Every call is collective over comm and reports as libckpz's calls do: a ckpz_error, and
 * the message in the caller's context (ckpz_ctx_message; ctx may be NULL, and each rank
 * passes its own). All ranks return the same code and message (the first failing rank's,
 * naming chunk and tensor where one is at fault, and the rank when comm has more than
 * one; "" on success); no rank is left waiting. The library calls a rank makes use its
 * ctx, whose working memory then serves the next call. A stats struct (may be NULL)
 * starts with its struct_size, as ckpz.h's do; it is filled on every rank. Inputs are
 * sources (ckpz.h) each rank reads at offsets: pread and size are needed; the *_file
 * calls open a path as one. Outputs are published by rank 0 (ckpz_publish_*: written as
 * the hidden .NAME.ckpz-PID-HOST-RANDOM.tmp beside NAME, renamed once all ranks agree
 * that every byte was written); on failure no file is left under either name, and what a
 * job killed outright leaves (the hidden name only) the next write of the same name
 * removes. An existing out_path is replaced. params->base (a delta's base, whole in
 * memory on every rank) must be the same on every rank. params->progress is not called;
 * a source's progress, where set, is called on its rank as the rank codes or restores
 * its pieces (done and total of each piece, not of the file). */
#ifndef CKPZ_MPI_H
#define CKPZ_MPI_H

#include <mpi.h>

#include "ckpz.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Compresses the input (every rank's src: the same bytes) into out_path. stats: the
 * whole file's. Output is a path, not a sink: the ranks write one file at their offsets
 * through MPI-IO, under a temporary name that rank 0 renames. */
ckpz_error ckpz_mpi_compress(ckpz_ctx *ctx, MPI_Comm comm, const ckpz_params *params, const ckpz_source *src,
                             const char *out_path, ckpz_stats *stats);
/* The same with in_path opened on every rank as the source. */
ckpz_error ckpz_mpi_compress_file(ckpz_ctx *ctx, MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                  const char *out_path, ckpz_stats *stats);

/* Restores a .ckpz file (every rank's src: the same bytes) into out_path; out_path NULL:
 * verifies every frame (entry frames, the layout, every chunk) and the content checksum,
 * as ckpz -t does, and writes nothing. */
ckpz_error ckpz_mpi_decompress(ckpz_ctx *ctx, MPI_Comm comm, const ckpz_params *params, const ckpz_source *src,
                               const char *out_path, ckpz_stats *stats);
/* The same with in_path opened on every rank as the source. */
ckpz_error ckpz_mpi_decompress_file(ckpz_ctx *ctx, MPI_Comm comm, const ckpz_params *params, const char *in_path,
                                    const char *out_path, ckpz_stats *stats);

/* One tensor of a rank's shard. */
typedef struct ckpz_mpi_tensor {
    const char *name;
    ckpz_dtype dtype;      /* one safetensors has a name for */
    uint32_t ndim;
    const uint64_t *shape;
    const void *data;      /* the elements, C order */
} ckpz_mpi_tensor;

/* Every rank passes its own tensors (t[0..n), n may be 0) and the ranks write one
 * container of all of them into out_path: the safetensors file holding every rank's
 * tensors in rank order, and in each rank's order, compressed (ckpz -d restores that
 * file; the container is byte for byte what ckpz writes for it). params->format is
 * ignored. Names must differ across all ranks. Rank 0 writes as it codes; a later rank's
 * bytes follow all earlier ranks', so it holds its coded tensors until those are coded. */
ckpz_error ckpz_mpi_compress_tensors(ckpz_ctx *ctx, MPI_Comm comm, const ckpz_params *params, const ckpz_mpi_tensor *t,
                                     size_t n, const char *out_path, ckpz_stats *stats);

/* ---- one state to many ranks (seed 001's sync strategies) ---- */
/* Root compresses its data (size bytes) with params, against params->base when set (a
 * delta against the last state all ranks share: every rank must hold the same base),
 * and broadcasts the compressed bytes; every other rank verifies them (every checksum)
 * and decodes them into its data (room for size bytes, which must be the root's size).
 * *moved (may be NULL): the bytes broadcast. */
ckpz_error ckpz_mpi_bcast(ckpz_ctx *ctx, MPI_Comm comm, const ckpz_params *params, int root, void *data, size_t size,
                          uint64_t *moved);

/* Every rank holds its own copy of a state that should be the same everywhere (data-
 * parallel replicas): the ranks check that it is, by the CRC-32C of every chunk (only
 * digests move unless they differ), and compress it together into out_path as
 * ckpz_mpi_compress_file does. Copies that differ: CKPZ_ERR_CORRUPT naming the lowest
 * rank whose copy differs from rank 0's and the first tensor where it does; nothing is
 * written. */
ckpz_error ckpz_mpi_compress_same(ckpz_ctx *ctx, MPI_Comm comm, const ckpz_params *params, const void *data,
                                  size_t size, const char *out_path, ckpz_stats *stats);

#ifdef __cplusplus
}
#endif

#endif
