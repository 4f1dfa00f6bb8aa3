/* fuzz_ctr_base.c — libFuzzer harness for the base frame parser
 * (lib/container/format.c: ctr_base_frame_read), on the input as the bytes after a
 * delta file's header, as they are and resealed (the frame CRC recomputed where its
 * length field puts it). Checks (fuzz_container.h): a failure leaves a message, a
 * frame longer than the bytes at hand is CKPZ_ERR_TRUNCATED; an accepted frame used
 * no more than it had, has depth >= 1 and a NUL-terminated name of name_len bytes, and
 * ctr_base_frame_write writes it back byte for byte in ctr_base_frame_size bytes.
 */
#include "fuzz_container.h"

static ctr_base b; /* 4 KiB of name: not on the stack */

static void one(const uint8_t *in, size_t avail)
{
    ckpz_ctx *c = fz_ctx();
    size_t used = 0;
    ckpz_error e = ctr_base_frame_read(c, in, avail, &b, &used);
    fz_need_msg(c, e, "ctr_base_frame_read");
    if (avail < 8 || (ld32(in) == CTR_TAG_BASE && ld32(in + 4) >= CTR_BASE_FIXED &&
                      ld32(in + 4) <= CTR_BASE_FIXED + CTR_MAX_BASE_NAME && avail < 12 + (size_t)ld32(in + 4)))
        FZ_CHECK(e == CKPZ_ERR_TRUNCATED, "base frame: %zu bytes of a longer frame: %s", avail, ckpz_error_name(e));
    if (e) return;
    FZ_CHECK(used <= avail && used == ctr_base_frame_size(&b), "base frame: used %zu of %zu, size %zu", used, avail,
             ctr_base_frame_size(&b));
    FZ_CHECK(b.depth >= 1 && b.name_len <= CTR_MAX_BASE_NAME && b.name[b.name_len] == 0,
             "base frame: depth %u, name of %u bytes", b.depth, b.name_len);
    uint8_t *out = malloc(used);
    if (!out) fz_die("out of memory");
    ctr_base_frame_write(out, &b);
    size_t k = fz_diff(in, out, used);
    FZ_CHECK(k == used, "base frame: written back differently at byte %zu of %zu", k, used);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *in = fz_copy(data, size);
    one(in, size);
    if (size >= 12) {
        size_t body = ld32(in + 4);
        if (body <= size - 12) st32(in + 8 + body, crc32c(0, in, 8 + body));
        one(in, size);
    }
    free(in);
    return 0;
}
