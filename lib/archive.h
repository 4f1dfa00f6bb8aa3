/* archive.h — whole-file restore through the index, for a .ckpz held in memory. */
#ifndef CKPZ_ARCHIVE_H
#define CKPZ_ARCHIVE_H

#include "ckpz.h"

/* Checks every frame against the index (entry frames included), then decodes each chunk
 * straight from src into its place in dst (exactly the original size) on
 * params->threads threads, and checks the content checksum. No copy of the input or the
 * output is made. */
ckpz_error archive_restore_memory(ckpz_ctx *ctx, const ckpz_params *params, const uint8_t *src, size_t src_size,
                                  uint8_t *dst, size_t dst_size);

#endif
