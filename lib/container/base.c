/* base.c — see base.h. */
#include "base.h"

#include <stdio.h>
#include <string.h>

#include "common/crc32c.h"

ckpz_error base_verify(ckpz_ctx *ctx, const ctr_base *b, const ckpz_params *p)
{
    char hint[300] = "";
    if (b->name_len) snprintf(hint, sizeof hint, ", written as '%.256s'", b->name);
    if (!p->base)
        return ctx_fail(ctx, CKPZ_ERR_BASE,
                        "this is a delta file: restoring it needs its base (%llu bytes, CRC-32C %08x%s)",
                        (unsigned long long)b->size, b->crc, hint);
    if (p->base_size != b->size)
        return ctx_fail(ctx, CKPZ_ERR_BASE, "wrong base: %zu bytes, expected %llu bytes with CRC-32C %08x%s",
                        p->base_size, (unsigned long long)b->size, b->crc, hint);
    uint32_t crc = crc32c(0, p->base, p->base_size);
    if (crc != b->crc)
        return ctx_fail(ctx, CKPZ_ERR_BASE, "wrong base: its CRC-32C is %08x, expected %08x (%llu bytes%s)", crc,
                        b->crc, (unsigned long long)b->size, hint);
    return CKPZ_OK;
}

void base_info_fill(const ctr_base *b, ckpz_base_info *info)
{
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    if (!b) return;
    info->needed = 1;
    info->size = b->size;
    info->checksum = b->crc;
    info->depth = b->depth;
    memcpy(info->name, b->name, b->name_len);
    info->name[b->name_len] = 0;
}

static ckpz_error base_info_read(ckpz_ctx *ctx, const uint8_t *p, size_t n, ckpz_base_info *info)
{
    ctr_header h;
    ckpz_error err;
    base_info_fill(NULL, info);
    if (n < 8 || memcmp(p, ctr_magic, 8) != 0) return ctx_fail(ctx, CKPZ_ERR_NOT_CKPZ, "not a ckpz file");
    if (n < CTR_HEADER_SIZE) return ctx_fail(ctx, CKPZ_ERR_TRUNCATED, "file is truncated inside its header");
    if ((err = ctr_header_read(ctx, p, &h))) return err;
    if (!h.based) return CKPZ_OK;
    ctr_base b;
    size_t used;
    if ((err = ctr_base_frame_read(ctx, p + CTR_HEADER_SIZE, n - CTR_HEADER_SIZE, &b, &used))) return err;
    base_info_fill(&b, info);
    return CKPZ_OK;
}

ckpz_error ckpz_base_info_read(ckpz_ctx *ctx, const void *head, size_t n, ckpz_base_info *info)
{
    ctx_clear(ctx);
    if (OUT_CHECK(ctx, info, "ckpz_base_info")) return CKPZ_ERR_PARAM;
    ckpz_base_info mine;
    ckpz_error err = base_info_read(ctx, head, n, &mine);
    OUT_GIVE(info, &mine); /* zeroed on failure */
    return err;
}

/* base.h */
int base_group_image(const ctr_entry *e, size_t n, const uint8_t *base, uint64_t base_size, uint64_t raw_len,
                     uint8_t *out, uint64_t *group)
{
    /* a packed entry's length is the distance to the next entry's offset: the stream
     * form of an entry record has no length */
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (at >= raw_len) return -1; /* the owner (and every packed entry) has a byte at least */
        uint64_t len = i + 1 < n ? e[i + 1].offset - e[i].offset : raw_len - at;
        if (len > raw_len - at || (i + 1 < n && e[i + 1].offset < e[i].offset)) return -1;
        if (i + 1 == n) *group = at;
        if (e[i].flags & CTR_ENTRY_BASED) {
            if (!base || e[i].base_offset > base_size || len > base_size - e[i].base_offset) return -1;
            memcpy(out + at, base + e[i].base_offset, (size_t)len);
        } else {
            memset(out + at, 0, (size_t)len);
        }
        at += len;
    }
    return n ? 0 : -1;
}
