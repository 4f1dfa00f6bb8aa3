/* base.h — what a delta file needs: its base frame checked against the caller's base,
 * shared by the streaming decoder and the random-access reader. */
#ifndef CKPZ_BASE_H
#define CKPZ_BASE_H

#include "container/container.h"

/* CKPZ_OK when params->base is the base b describes (same size and CRC-32C); else
 * CKPZ_ERR_BASE with a message that names the expected base. */
ckpz_error base_verify(ckpz_ctx *ctx, const ctr_base *b, const ckpz_params *params);

/* The public view of a base frame (NULL: a stand-alone file). */
void base_info_fill(const ctr_base *b, ckpz_base_info *info);

#endif
