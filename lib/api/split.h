/* split.h — the split calls the public header does not export (ckpz_experimental.h has
 * the rest): the whole share coded into memory the library takes, and the whole layout
 * in one call. tests/test_split.c drives a split compression with them; libckpz_mpi
 * codes into its own memory and lays the file out a stretch at a time. */
#ifndef CKPZ_SPLIT_H
#define CKPZ_SPLIT_H

#ifndef CKPZ_EXPERIMENTAL
#define CKPZ_EXPERIMENTAL
#endif
#include "ckpz.h"

/* Codes chunks [first, first + n): records gets n records; *coded (malloc'd, free() it)
 * their frames, *coded_len bytes. */
ckpz_error split_code(ckpz_ctx *ctx, ckpz_split *s, uint64_t first, uint64_t n, void *records, void **coded,
                      size_t *coded_len);
/* From the records of all chunks (in order) and the frames coded for chunks [first,
 * first + n) (as split_code gave them): the file's layout and the bytes of those chunks,
 * as ckpz_split_lay gives them for the whole file. Abandons a layout in progress. */
ckpz_error split_write(ckpz_ctx *ctx, ckpz_split *s, const void *records, uint64_t first, uint64_t n, const void *coded,
                       size_t coded_len, ckpz_split_out *out);

#endif
