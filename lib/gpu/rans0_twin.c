/* rans0_twin.c — the device's order-0 rANS warp (decode.cu, rans0_warp) run on the CPU,
 * lane by lane, so that what the kernel does can be tested where there is no GPU. It
 * keeps the kernel's steps, not the CPU decoder's: the 32 lanes of a round decode their
 * symbols, the lanes that need a renormalisation word learn its place from a ballot mask
 * (the words lanes below them take), and the words come from a window of six 32-word
 * registers whose first three cover every word a round can take (a round of 64 states
 * takes at most 64, and starts less than 32 words into the window); the window moves in
 * steps of 32 words. The decode table (a symbol per slot) is filled slot by slot from the
 * cumulative counts (rans0_dev.h); a step reads the symbol's frequency and start. Codec
 * 11's tail (the last rounds, coded into the states) follows the words, steps without a
 * refill. Same result as rans0_decode or rans0t_decode on every input: the bytes, or -1.
 */
#include "plan.h"
#include "rans0_dev.h"

#define LANES 32
#define WIN 6

typedef struct window {
    uint32_t w[WIN][LANES]; /* w[k][lane]: word wb + 32k + lane, 0 past the stream */
    uint32_t wb;
    const uint8_t *words;
    uint32_t nw;
} window;

static void win_load(window *v, int k, uint32_t first)
{
    for (uint32_t l = 0; l < LANES; l++)
        v->w[k][l] = first + l < v->nw ? gr_ld16(v->words + 2 * (size_t)(first + l)) : 0;
}

/* Moves the window on by 32 words: the kernel's register shift and one new load. */
static void win_shift(window *v)
{
    for (int k = 0; k + 1 < WIN; k++)
        for (uint32_t l = 0; l < LANES; l++) v->w[k][l] = v->w[k + 1][l];
    v->wb += LANES;
    win_load(v, WIN - 1, v->wb + LANES * (WIN - 1));
}

/* The cumulative counts as the warp computes them: lane l sums symbols 8l..8l+7, an
 * inclusive scan over lanes, then each lane writes its eight starts. */
static void cum_build(const uint16_t *freq, uint16_t *cum)
{
    uint32_t part[LANES], run = 0;
    for (int l = 0; l < LANES; l++) {
        part[l] = 0;
        for (int q = 0; q < 8; q++) part[l] += freq[8 * l + q];
    }
    for (int l = 0; l < LANES; l++) {
        uint32_t at = run;
        for (int q = 0; q < 8; q++) {
            cum[8 * l + q] = (uint16_t)at;
            at += freq[8 * l + q];
        }
        run += part[l];
    }
    cum[256] = (uint16_t)GR_M;
}

int gpu_rans0_twin(unsigned codec, const uint8_t *src, size_t len, uint8_t *dst, size_t n)
{
    const uint8_t *end = src + len;
    int sh, fold = codec == GPU_RANS0T;
    unsigned N;
    size_t nb, nm;
    if ((codec != GPU_RANS0 && !fold) || gr_head(src, len, n, fold, &sh, &N, &nb, &nm)) return -1;
    const uint8_t *tp = src + 2, *s = gr_segments(tp, end, nb, fold), *ws = NULL;
    if (!s) return -1;
    uint32_t st[64];
    for (unsigned l = 0; l < LANES; l++) { /* each lane its states: 32 + l unused when N = 32 */
        st[l + LANES] = GR_L;
        ws = gr_states(s, end, N, fold, l, l + LANES, &st[l], &st[l + LANES]);
        if (!ws) return -1;
    }
    window v;
    v.words = ws;
    size_t rem = (size_t)(end - v.words);
    if (rem & 1) return -1;
    v.nw = (uint32_t)(rem / 2);
    v.wb = 0;
    for (int k = 0; k < WIN; k++) win_load(&v, k, LANES * (uint32_t)k);
    uint32_t wpos = 0, bad = 0;
    uint16_t freq[256], cum[257];
    uint8_t sym[GR_M];
    size_t b = 0;
    while (b < nb) {
        size_t k = 0;
        gr_leb(&tp, end, &k); /* checked by gr_segments */
        gr_tab(&tp, end, freq, fold);
        cum_build(freq, cum);
        for (uint32_t slot = 0; slot < GR_M; slot++) sym[slot] = gr_sym(cum, slot);
        size_t s0 = b << sh, s1 = (b + k) << sh, s1w;
        if (s1 > n || b + k == nb) s1 = n;
        s1w = s1 < nm ? s1 : nm; /* the symbols from words end at nm */
        b += k;
        for (size_t i = s0; i < s1w; i += N) {
            uint32_t y[64], need[64], taken = 0;
            for (unsigned j = 0; j < N; j++) {
                need[j] = 0;
                y[j] = st[j];
                if (i + j >= s1w) continue; /* an idle lane in the last round */
                uint8_t c = sym[st[j] & (GR_M - 1)];
                dst[i + j] = c;
                y[j] = gr_step(st[j], freq[c], cum[c]);
                need[j] = y[j] < GR_L;
            }
            for (unsigned j = 0; j < N; j++) {
                if (!need[j]) continue;
                uint32_t off = wpos - v.wb + taken++; /* popcount of the lanes before j */
                if (off >= 3 * LANES) return -2;      /* the window's bound broken: a bug, not bad data */
                bad |= v.wb + off >= v.nw;
                y[j] = (y[j] << 16) | v.w[off / LANES][off % LANES];
            }
            for (unsigned j = 0; j < N; j++) st[j] = y[j];
            wpos += taken;
            while (wpos - v.wb >= LANES) win_shift(&v);
        }
        if (s1 <= nm) continue;
        /* codec 11's tail: every word read, the states become y = x - L (the first segment
         * that reaches past nm), and its symbols are steps without a refill, by rounds
         * from the one that holds the first, each lane in order */
        if (s0 <= nm)
            for (unsigned j = 0; j < 2 * LANES; j++) st[j] -= GR_L;
        size_t t0 = s0 > nm ? s0 : nm;
        for (size_t i = t0 & ~(size_t)(N - 1); i < s1; i += N)
            for (unsigned j = 0; j < N; j++)
                if (i + j >= t0 && i + j < s1) {
                    uint8_t c = sym[st[j] & (GR_M - 1)];
                    dst[i + j] = c;
                    st[j] = gr_step(st[j], freq[c], cum[c]);
                }
    }
    if (bad || wpos != v.nw) return -1;
    for (unsigned j = 0; j < 2 * LANES; j++) /* lanes 32..63 of N = 32 stay L until the fold */
        if (st[j] != (nm < n ? 0 : GR_L)) return -1;
    return 0;
}
