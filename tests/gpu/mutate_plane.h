/* mutate_plane.h — one change to a copy of a planned rANS plane (codec 2 or 11), shared
 * by test_twin.c (against the twin) and test_decode_gpu.cu (against the device), each of
 * which then asks the CPU decoder whether it refuses the same bytes. The changes: one
 * word cut off the end; one bit flipped in the first 64 bytes (head and tables); one
 * byte anywhere set at random; the bytes cut inside the segment list (a truncated
 * table); one bit of the starting states flipped (codec 11: a length nibble, a state's
 * bits or the padding). Returns the new length, *how the change.
 */
#ifndef CKPZ_TESTS_GPU_MUTATE_PLANE_H
#define CKPZ_TESTS_GPU_MUTATE_PLANE_H

#include "gpu/plan.h"
#include "gpu/rans0_dev.h"

static size_t mutate_plane(uint8_t *c, size_t len, size_t n, unsigned codec, uint64_t (*rnd)(void), int *how)
{
    int fold = codec == GPU_RANS0T, sh;
    unsigned N;
    size_t nb, nm;
    uint32_t x0, x1;
    const uint8_t *s = NULL, *w = NULL;
    if (!gr_head(c, len, n, fold, &sh, &N, &nb, &nm) && (s = gr_segments(c + 2, c + len, nb, fold)) != NULL)
        w = gr_states(s, c + len, N, fold, 0, N, &x0, &x1);
    *how = (int)(rnd() % 5);
    if (*how == 3 && s && s > c + 2) return 2 + (size_t)(rnd() % (size_t)(s - c - 2)); /* a table cut short */
    if (*how == 4 && w && w > s) {
        c[(s - c) + rnd() % (size_t)(w - s)] ^= (uint8_t)(1u << (rnd() % 8)); /* a state's bit */
        return len;
    }
    if (*how >= 3) *how = 2;
    if (*how == 0 && len > 2) return len - 2; /* one word short */
    if (*how == 1) c[rnd() % (len < 64 ? len : 64)] ^= (uint8_t)(1u << (rnd() % 8)); /* head and tables */
    else c[rnd() % len] = (uint8_t)rnd();
    return len;
}

#endif
