/* fuzz_container.h — shared by the container record harnesses (fuzz_ctr_*.c over
 * lib/container/format.c). Each parser runs on the input as it is and on a copy whose
 * checksum fields are recomputed ("resealed"), so that mutated fields get past the
 * CRC to the checks behind it. Common checks: a failure leaves a message in the
 * context (ctx_fail), and what a parser accepts its writer writes back byte for byte
 * (every field of a record is read, none dropped or changed).
 */
#ifndef CKPZ_FUZZ_CONTAINER_H
#define CKPZ_FUZZ_CONTAINER_H

#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/ctx.h"
#include "container/container.h"
#include "fuzz_util.h"

/* The context every call gets, its message cleared. */
static inline ckpz_ctx *fz_ctx(void)
{
    static ckpz_ctx *c;
    if (!c && !(c = ckpz_ctx_create())) fz_die("ckpz_ctx_create failed");
    ctx_clear(c);
    return c;
}

static inline void fz_need_msg(const ckpz_ctx *c, ckpz_error e, const char *who)
{
    FZ_CHECK(e == CKPZ_OK || ckpz_ctx_message(c)[0], "%s failed with %s but left no message", who, ckpz_error_name(e));
    FZ_CHECK((int)e >= 0 && (int)e <= (int)CKPZ_ERR_BASE, "%s returned %d", who, (int)e);
}

/* Index of the first differing byte of a[0..n) and b, or n. */
static inline size_t fz_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    size_t i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

#endif
