/* ent_internal.h — shared pieces of the entropy stage that are not part of its API.
 *
 * The codecs live in separate files (rans0.c, rans1.c, zstd_backend.c), with their
 * vector loops in files of their own beside them (rans0_avx2.c, rans0_avx512.c,
 * hist_avx512.c), but share one per-thread context whose buffers scratch.c grows, so
 * that no coder allocates in its hot path; they share the rANS parameters and the
 * frequency-table format, which is why those are defined once here. Calls only go
 * down: select.c -> the coders -> hist.c, rans_common.c, scratch.c -> the kernels.
 * ent_encode_with() lets tests and benches force one codec; it is internal because the
 * container only ever needs the selector's choice.
 */
#ifndef CKPZ_ENT_INTERNAL_H
#define CKPZ_ENT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "entropy.h"

/* 12-bit probabilities keep the decode table at 16 KiB (fits L1 beside the data) and
 * let a 32-bit state with 16-bit renormalisation need at most one refill per symbol. */
#define RANS_BITS 12u
#define RANS_M (1u << RANS_BITS)
#define RANS_L (1u << 16)
/* Interleaved states. Order-1 uses 32 lanes. Order-0 uses 32 or, for planes of
 * 128 KiB and more, 64: the AVX2 decoder is latency-bound (table load -> multiply ->
 * refill per 8-lane vector), and eight vectors in flight decode ~30% faster than four,
 * worth 128 more bytes of final states only on larger planes. */
#define RANS_N 32u
#define RANS0_NMAX 64u
#define RANS0_BIG_PLANE (64u * 1024u)
/* Codec 9: codec 2's stream with 4 states and compact tables (rans_ctab.c), for planes
 * below RANS0S_MAX bytes, where the 32 states' 128 bytes and codec 2's tables weigh (small
 * tensors' planes: ~10% of a 1.5 KiB plane; from 4 KiB on it gained too little for its
 * coding time); coded and decoded by the scalar loops. */
#define RANS0S_LG 2u
#define RANS0S_MAX (4u * 1024u)
#define RANS0S_SHIFT 7 /* its base blocks: 128 bytes (codec 2's: 1 KiB and more) */

/* The fast level (ckpz -1): order 0 alone where the other levels count the context coders
 * (select.c), zstd at its level 1 (zstd_backend.c). */
#define ENT_FAST_LEVEL 1

/* Encoder view of one symbol: division replaced by a 64-bit reciprocal, exact because
 * the state is < 2^32 and frequencies are < 2^12 (see rans_common.c). */
typedef struct {
    uint64_t rcp;
    uint32_t xmax;
    uint16_t bias; /* cum, or cum + M - 1 for f == 1: < 2^13 */
    uint16_t cmpl; /* M - f */
} rans_esym;

struct ent_ctx {
    uint8_t *scratch; /* encoder output staging, grown to the largest plane seen */
    size_t scratch_cap;
    uint32_t *bhist; /* per-sub-block histograms of the plane being encoded */
    size_t bhist_cap;
    const uint8_t *bhist_src; /* plane whose block histograms bhist holds, if any */
    size_t bhist_n;
    int bhist_shift;
    uint32_t *o1cnt;    /* 256 x 256 order-1 counts */
    uint32_t *o1dtab;   /* up to 257 decode tables for order-1 */
    rans_esym *o1etab;  /* up to 257 encode tables for order-1 */
    void *state[ENT_CODEC_LIMIT]; /* a back end's own contexts, by codec id, created on first use */
    uint8_t only_rans;  /* choice: no zstd (CKPZ_CODEC_RANS) */
    uint8_t force;      /* choice: this back end's id for every plane it takes, or 0 (ent_ctx_set_codec) */
    uint8_t lz;         /* ENT_LZ_*: the chunk holds zero runs or repeats (ent_ctx_set_lz) */
    /* Counts the planes the selector and ent_encode_with take: a plan or estimate left
     * for the encoder holds only within the call that made it (the same pointer may
     * hold other bytes at the next). */
    unsigned plane;
    const uint8_t *o0_src; /* plane whose order-0 plan (rans0_size) bhist holds, if any */
    size_t o0_n, o0_nseg;
    unsigned o0_plane;
    int o0_sh;
    unsigned o0_lg; /* its states: 2^o0_lg */
    /* The size a sampled estimate is asked to beat (the selector's best so far): an
     * estimate may stop counting once its sample says it cannot. 0: none. */
    double est_bar;
    uint8_t *cand; /* second candidate's output while the first sits in dst */
    size_t cand_cap;
    uint8_t *keep[ENT_KEEP]; /* the caller's (ent_keep) */
    size_t keep_cap[ENT_KEEP];
    uint8_t o1own[256]; /* order-1 plan: 1 = context gets its own table */
    uint32_t dtab[RANS_M];
    rans_esym etab[256];
    uint32_t vtab[256][4]; /* AVX2 encoder rows (rans0_avx2.c) */
    uint32_t ztab[4][64];  /* AVX-512 encoder fields by table slot (rans0_avx512.c) */
    uint8_t wtab[3][256];  /* AVX-512 wide-alphabet encoder: bytes of f | cum << 12 */
    uint32_t st[RANS0_NMAX];
};

/* scratch.c. Grows *buf to at least need bytes: 0, or -1 out of memory (*buf kept). */
int ent_grow(void **buf, size_t *cap, size_t need);
/* Grows c->scratch (encoder output staging) or c->cand (a second candidate's output)
 * to at least n bytes; NULL on allocation failure. */
uint8_t *ent_scratch(ent_ctx *c, size_t n);
uint8_t *ent_cand(ent_ctx *c, size_t n);

/* log2 of the order-0 sub-block size for a level and plane size. */
int rans0_base_shift(int level, size_t n);

/* Frequency tables: freq[256] with a sum of RANS_M, each entry < RANS_M. */
void rans_normalize(const uint32_t *cnt, uint16_t *freq);
size_t rans_table_write(const uint16_t *freq, uint8_t *out); /* <= 2 + 2*255 bytes */
size_t rans_table_len(const uint16_t *freq);                  /* what rans_table_write writes */
/* Bits of the symbols counted in cnt coded with the normalised table freq (every counted
 * symbol must have a frequency): what a rANS stream spends on them, to a few bits. */
double rans_coded_bits(const uint32_t *cnt, const uint16_t *freq);
int rans_table_read(const uint8_t **p, const uint8_t *end, uint16_t *freq);
size_t rans_table_cost(const uint32_t *cnt, uint64_t total); /* bytes, estimate */
/* rans_ctab.c, codec 9's compact tables: writes the table of the counts cnt (at least one
 * counted) to out (at most RANS_CTAB_MAX bytes) and sets freq to the frequencies it says
 * at 4096; returns its length. Read: 0, or -1 for a malformed table. */
#define RANS_CTAB_MAX 256u /* k within 1 of log2(mean frequency): at most 3 + 224 bytes */
size_t rans_ctab_write(const uint32_t *cnt, uint16_t *freq, uint8_t *out);
int rans_ctab_read(const uint8_t **p, const uint8_t *end, uint16_t *freq);
/* The same, with a power of two all the table's frequencies are multiples of in *shift
 * (12 - its precision; for a uniform table, 12 - log2 of its range where that is a power
 * of two, else 0): the decoder's table has 4096 >> shift entries. */
int rans_ctab_read_sh(const uint8_t **p, const uint8_t *end, uint16_t *freq, unsigned *shift);
/* rans_common.c: c * log2(c) for c <= RANS_CLOG_MAX, and -log2(f / 4096) for 0 < f < 4096 (the
 * tables ent_bits and rans_coded_bits read; filled on first call). */
#define RANS_CLOG_MAX 16384u
const double *rans_clog(void);
const double *rans_lgf(void);
void rans_build_esym(const uint16_t *freq, rans_esym *e);
void rans_build_dtab(const uint16_t *freq, uint32_t *dtab);
/* The end of every rANS encoder: the nstates final states written below p (state 0
 * first, little-endian), then the words from p up to wend copied to dst after its hdr
 * header bytes. Returns hdr + their length, or 0 where that would not be smaller than
 * the plane's n bytes or not fit in cap (the plane is then stored). */
size_t rans_finish(const uint32_t *st, unsigned nstates, uint8_t *p, const uint8_t *wend, uint8_t *dst, size_t hdr,
                   size_t n, size_t cap);
/* rans_ctab.c, codec 11's tables (rans_dtab_*: at most RANS_DTAB_MAX bytes; read: 0, or
 * -1 for a malformed one) and final states in 4 + 16..31 bits each (rans_states_*:
 * their length, writing them, reading them: 0, or -1 for bytes that end early or
 * padding that is not zero); doc/entropy.md, codec 11. */
#define RANS_DTAB_RUN 25u /* the longest run of ones: b - b' - 1 + m = -13 */
#define RANS_DTAB_MAX (2u + (1u + 255u * (RANS_DTAB_RUN + 1 + RANS_BITS - 1) + 7) / 8)
size_t rans_dtab_write(const uint16_t *freq, uint8_t *out);
int rans_dtab_read(const uint8_t **p, const uint8_t *end, uint16_t *freq);
size_t rans_states_len(const uint32_t *st, unsigned nstates);
void rans_states_put(const uint32_t *st, unsigned nstates, uint8_t *out);
int rans_states_get(const uint8_t **p, const uint8_t *end, uint32_t *st, unsigned nstates);
#define RANS0T_TMAX 31u /* codec 11: the most tail rounds, in bits 3-7 of its lane count's byte */
/* Ideal coded bits of a histogram under its own distribution. */
double ent_bits(const uint32_t *cnt, uint64_t total);
void ent_histogram(const uint8_t *src, size_t n, uint32_t *cnt);
/* Estimated counts of src[0..n) from a quarter of it (four evenly spread pieces; all of
 * it below 4 KiB), scaled to add up to n, with every value between the least and the
 * largest byte of src (scanned in full) counted at least once, so a coder may rely on
 * them like exact counts. For planes of few values, where counting is the cost, and the
 * exponent bytes of 16-bit floats up to level 3 (ENT_HINT_SAMPLE). */
void ent_histogram_sampled(const uint8_t *src, size_t n, uint32_t *cnt);

/* Each returns the encoded size, or 0 when it cannot beat n bytes within cap. */
/* Order 0's plan of src[0..n) at level (its segments, left in c for rans0_size and
 * rans0_encode of the same plane just after): returns the plan's estimated size from
 * entropies and table costs, 1e300 when it cannot beat n. */
double rans0_plan(ent_ctx *c, const uint8_t *src, size_t n, int level);
/* The size that plan codes to, to some tens of bytes (its normalised tables' bits, the
 * tables and the states); 1e300 without a plan of this plane. */
double rans0_size(ent_ctx *c, const uint8_t *src, size_t n);
size_t rans0_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level);
int rans0_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);
/* Codec 11: codec 2 with its last rounds coded into the states the encoder starts from
 * (the 16 bits of L + y each state carries for nothing in codec 2). */
size_t rans0t_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level);
int rans0t_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);
size_t rans0s_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level);
int rans0s_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);
size_t rans1_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap);
int rans1_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);
/* Estimated order-1 size in bytes (counts its tables); fills c->o1cnt and the plan
 * in c->o1own. sampled: from a quarter of the plane, for deciding only. */
double rans1_estimate(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist0, int sampled);

/* One row of the codec registry (codecs.c). */
typedef struct ent_codec_desc {
    uint8_t id;       /* stored in plane descriptors */
    const char *name; /* ent_codec_name, ckpz -l -v */
    /* Codes src[0..n) (n >= 1) into dst; returns the coded size, or 0 when the codec
     * cannot beat n bytes within cap (the plane is then stored). May rely on the state an
     * exact estimate of the same plane, just before, left in c. */
    size_t (*encode)(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level);
    /* Decodes exactly n bytes from exactly srclen; 0, or -1 for anything else. Hostile
     * input: never reads or writes outside the buffers. */
    int (*decode)(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n);
    /* Coded size in bytes from the plane's histogram, without coding (sampled: from part of
     * the plane, for deciding only); 1e300 when the codec cannot take the plane. NULL: no
     * estimate cheaper than coding (LZ back ends are tried). */
    double (*estimate)(ent_ctx *c, const uint8_t *src, size_t n, const uint32_t *hist, int sampled);
    void (*free)(ent_ctx *c); /* what the codec keeps in c; NULL: nothing */
    /* NULL when the codec can run here, else why not (a library loaded on first use that
     * is not installed); NULL function: always. */
    const char *(*missing)(void);
} ent_codec_desc;

/* The row of a codec id, NULL when this build has none. */
const ent_codec_desc *ent_codec_get(unsigned id);

/* Back ends: one file each, whose registry row (codecs.c) is its descriptor. Level
 * mapping and coded bytes: doc/format.md, "Codecs". */
extern const ent_codec_desc ent_zstd_codec;    /* zstd_backend.c */
extern const ent_codec_desc ent_lz4_codec;     /* lz4_backend.c */
extern const ent_codec_desc ent_snappy_codec;  /* snappy_backend.c */
extern const ent_codec_desc ent_deflate_codec; /* deflate_backend.c */

/* Forces one codec (tests, benches). Falls back to STORED when the codec cannot beat
 * it, like the selector; *codec says what was written. */
size_t ent_encode_with(ent_ctx *c, uint8_t want, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level,
                       uint8_t *codec);

/* Vector kernels (x86-64 with GCC or clang; target attributes, chosen at run time
 * through common/cpu.h): every one writes exactly what the portable loop would. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ENT_HAVE_X86 1
/* rans0_avx2.c: order-0 encode of src[lo, hi) (whole rounds of N states) with one
 * segment's table, continuing c->st and writing words down from p; returns the new p. */
uint8_t *rans0_enc_avx2(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src, size_t lo, size_t hi,
                        uint8_t *p);
/* rans0_avx2.c: decodes whole rounds of N symbols (first on state 0) while a round's worst
 * case of input remains; returns the symbols done. */
size_t rans0_dec_avx2(unsigned N, uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end,
                      uint8_t *out, size_t len);
/* rans0_avx512.c: as rans0_enc_avx2. Register tables when the segment's values span at
 * most 64, byte tables otherwise. Needs CPU_AVX512. */
uint8_t *rans0_enc_avx512(ent_ctx *c, unsigned N, const uint16_t *freq, const uint8_t *src, size_t lo, size_t hi,
                          uint8_t *p);
/* rans0_avx512.c: as rans0_dec_avx2, sixteen states a vector. Needs CPU_AVX512. */
size_t rans0_dec_avx512(unsigned N, uint32_t *st, const uint32_t *dt, const uint8_t **pp, const uint8_t *end,
                        uint8_t *out, size_t len);
/* hist_avx512.c. Histogram of planes whose values span at most 64 or that are mostly one
 * value: counts the first k bytes of src into cnt (set, not added to) and returns k, a
 * multiple of 64 or n; 0 (cnt untouched) for other planes. The caller counts the rest.
 * Needs CPU_AVX512. */
size_t ent_hist_avx512(const uint8_t *src, size_t n, uint32_t *cnt);
/* Histogram (set) of np <= ENT_PIECES_MAX pieces of len bytes at at[k] whose values
 * lie in [lo, hi]: returns 1, or 0 (cnt untouched) when the range is wider than the
 * byte counters' passes take or the pieces are too long. */
#define ENT_PIECES_MAX 4
size_t ent_hist_pieces_avx512(const uint8_t *const *at, int np, size_t len, unsigned lo, unsigned hi, uint32_t *cnt);
/* Least and largest byte of the first k bytes of src (*lo, *hi lowered/raised to them);
 * returns k, a multiple of 64. Needs CPU_AVX512. */
size_t ent_minmax_avx512(const uint8_t *src, size_t n, unsigned *lo, unsigned *hi);
/* hist_avx2.c: as ent_hist_avx512, ent_hist_pieces_avx512 and ent_minmax_avx512 (the
 * last a multiple of 32) for CPUs with AVX2, for values spanning at most 32 (no path for
 * planes mostly of one value). Need CPU_AVX2. */
size_t ent_hist_avx2(const uint8_t *src, size_t n, uint32_t *cnt);
size_t ent_hist_pieces_avx2(const uint8_t *const *at, int np, size_t len, unsigned lo, unsigned hi, uint32_t *cnt);
size_t ent_minmax_avx2(const uint8_t *src, size_t n, unsigned *lo, unsigned *hi);
/* select_avx2.c: adds the runs of nonzero bytes and the nonzero bytes of src[0..n)
 * (whole vectors); returns the bytes done. Needs CPU_AVX2. */
size_t ent_runs_avx2(const uint8_t *src, size_t n, size_t *runs, size_t *nz);
#endif

static inline void ent_put16(uint8_t *p, uint16_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 2);
#else
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
#endif
}

static inline uint64_t ent_mulhi64_32(uint32_t x, uint64_t m)
{
#if defined(__SIZEOF_INT128__)
    __extension__ typedef unsigned __int128 u128;
    return (uint64_t)(((u128)x * m) >> 64);
#else
    uint64_t hi = (uint64_t)x * (m >> 32), lo = (uint64_t)x * (uint32_t)m;
    return (hi + (lo >> 32)) >> 32;
#endif
}

/* One scalar rANS encode step of state x for the symbol whose row is e: the state's low
 * 16 bits are stored below *pp unconditionally and *pp moves down only when x must be
 * renormalised (no mispredicted branch); returns the new state. Order 0, order 1 and
 * codec 8 share it. */
static inline uint32_t rans_enc_step(uint32_t x, const rans_esym *e, uint8_t **pp)
{
    uint32_t fl = x >= e->xmax;
    ent_put16(*pp - 2, (uint16_t)x);
    *pp -= 2 * fl;
    x >>= fl << 4;
    uint32_t q = (uint32_t)ent_mulhi64_32(x, e->rcp);
    return x + e->bias + q * e->cmpl;
}

#endif
