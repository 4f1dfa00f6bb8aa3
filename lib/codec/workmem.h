/* workmem.h — the working memory a context keeps between calls (ckpz.h: "a context
 * reused across calls keeps its working memory"): the coders' scratch for the most
 * threads a call has used, and the job buffers of the deepest pipeline, both for the
 * largest chunk size seen. Compression and streaming decompression borrow it: reused,
 * it spares every call the allocations and page faults of a few MB and the coders'
 * table set-up (zstd's above all). Nothing in it carries over into an output: each
 * chunk is coded or decoded from its own bytes, as within one call.
 *
 * A call takes the whole of it out of the context (workmem_take) and puts it back at the
 * end (workmem_keep), so a callback that re-enters the same context finds none and
 * builds its own. */
#ifndef CKPZ_WORKMEM_H
#define CKPZ_WORKMEM_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "plan.h"
#include "common/ctx.h"

struct workmem {
    chunk_scratch *scratch;
    size_t scratch_chunk;
    int scratch_kind;      /* 0, CHUNK_SCRATCH_DECODE_LOSSY or CHUNK_SCRATCH_ENCODE_LOSSY */
    uint8_t **raw, **out;  /* nbuf pairs of buffers (entries may be NULL) */
    size_t nbuf, buf_chunk; /* raw: buf_chunk bytes each, out: workmem_out_bound(buf_chunk) */
    ent_ctx *lists;         /* workmem_lists */
    ctr_keep entries;       /* a coded index's entries, kept for a whole-file restore's next (container.h) */
    plan_keep plan;         /* a compression's entry table and read-ahead, for the next (plan.h) */
};

/* Room a job's coded frame needs for a chunk of n bytes (compress.c says why it is
 * more than chunk_frame_bound); a decoder's payload buffer fits in it too. */
size_t workmem_out_bound(size_t chunk_size);

/* The context's working memory (a new, empty one if it has none); NULL out of memory. */
struct workmem *workmem_take(ckpz_ctx *ctx);
/* Back into the context (or freed, when the context got another meanwhile or is NULL). */
void workmem_keep(ckpz_ctx *ctx, struct workmem *wm);

/* Makes wm->scratch serve `threads` threads on chunks of chunk_size with the coders of
 * `kind` (the chunk_scratch_create flag; ENCODE_LOSSY covers DECODE_LOSSY covers 0),
 * keeping what earlier calls needed. 0, or -1 out of memory. */
int workmem_scratch(struct workmem *wm, int threads, size_t chunk_size, int kind);

/* Starts lending job buffers for chunks of chunk_size: drops those kept for smaller
 * chunks and returns the chunk size the buffers are for (allocate new ones that size:
 * raw buf_chunk bytes, out workmem_out_bound(buf_chunk)). */
size_t workmem_buffers(struct workmem *wm, size_t chunk_size);
/* Job i's kept buffers (each may come back NULL); the workmem no longer holds them. */
void workmem_lend(struct workmem *wm, size_t i, uint8_t **raw, uint8_t **out);
/* Takes job i's buffers back after a call (freeing them if it cannot hold them). */
void workmem_return(struct workmem *wm, size_t i, uint8_t *raw, uint8_t *out);

/* The entropy context that entry lists and the index are coded and read with
 * (container.h: ctr_list_read), made on first use and kept: a file of 4,800 small tensors
 * has 24 entry frames, and a zstd context made for each cost a sixth of its restore time.
 * NULL out of memory (the container then makes its own). */
ent_ctx *workmem_lists(struct workmem *wm);

void workmem_free(struct workmem *wm); /* accepts NULL */

/* Room for n bytes that are written once, start to end (an output, a share's coded
 * frames), released with free(). Fresh pages cost a fault each as the writing first
 * reaches them: 4 us per 4 KiB page on a 2-core VM (443 ms for 64 MB, several times the
 * compression), 62 ms in 2 MiB pages. From 1 MiB on the room is aligned to 2 MiB and
 * its first ckpz_huge_span(n) bytes ask for such pages (below 4 MiB the room is rounded
 * up to whole ones); only a hint: nothing fails without it. NULL out of memory. */
void *workmem_room(size_t n);

/* A room of size bytes (workmem_room) holding an output of n: given back down to n
 * bytes (realloc), or kept whole where it is one that workmem_room_free keeps and n fills
 * half of size. The room, possibly moved. */
void *workmem_room_fit(void *p, size_t size, size_t n);

/* Releases what workmem_room (or malloc) gave: a whole-page room is kept for the next
 * workmem_room (one at a time; its pages need no fault or clearing then), anything
 * else freed. Accepts NULL. */
void workmem_room_free(void *p);

/* ckpz_huge_span's rule (ckpz_experimental.h) on the given texts: defrag is
 * /sys/kernel/mm/transparent_hugepage/defrag's (NULL: unknown, taken as compacting),
 * buddyinfo /proc/buddyinfo's (NULL: unknown, no free block). Where a fault would
 * compact memory itself, the 2 MiB blocks asked for are those free beyond a reserve of
 * 32 (64 MiB), so that no fault has to make one; elsewhere all n holds. Bytes, a multiple
 * of 2 MiB; 0 below 1 MiB. */
size_t workmem_huge_policy(const char *defrag, const char *buddyinfo, size_t n);

#endif
