/* base.h — what a delta file needs: its base frame checked against the caller's base,
 * shared by the streaming decoder and the random-access reader. */
#ifndef CKPZ_BASE_H
#define CKPZ_BASE_H

#include "container/container.h"

/* CKPZ_OK when params->base is the base b describes (same size and CRC-32C); else
 * CKPZ_ERR_BASE with a message that names the expected base. */
ckpz_error base_verify(ckpz_ctx *ctx, const ctr_base *b, const ckpz_params *params);

/* A group's base image (doc/format.md "Groups coded against the base", feature 4): the
 * raw_len bytes that the first chunk of a group's owner is predicted from, gathered into
 * out. e[0..n-2] are the group's packed entries and e[n-1] its owner; each entry gives its
 * counterpart's bytes (as many as to the next entry's offset; the owner's, the rest of
 * the chunk) when it is coded against the base, else zeros. -1 (out partly written) when one of
 * those ranges runs past the base's end, or the packed entries leave the owner no byte of
 * the chunk; *group gets the packed entries' bytes. */
int base_group_image(const ctr_entry *e, size_t n, const uint8_t *base, uint64_t base_size, uint64_t raw_len,
                     uint8_t *out, uint64_t *group);

/* The public view of a base frame (NULL: a stand-alone file). */
void base_info_fill(const ctr_base *b, ckpz_base_info *info);

#endif
