/* test_twin.c — the device decoder's host half and CPU twin, on the CPU: for each .ckpz
 * file named, the plan (lib/gpu/plan.c) plus the twin of the rANS warp
 * (lib/gpu/rans0_twin.c) plus xf_merge must restore exactly what ckpz_decompress_buffer
 * restores. Then hostile bytes: 400 copies of planned rANS planes with one byte changed
 * (or cut short by one word) must be refused or decoded by the twin exactly as the CPU's
 * rans0 decoder refuses or decodes them. No GPU needed (tests/gpu/run.sh builds it).
 * Exit 1 on any difference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "entropy/entropy.h"
#include "gpu/plan.h"
#include "transforms/ids.h"
#include "transforms/planes.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

static uint8_t *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(n > 0 ? (size_t)n : 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *size = (size_t)n;
    return b;
}

/* The plan carried out on the CPU: the twin for the rANS planes, xf_merge for chunks. */
static int restore(const gpu_plan *pl, const uint8_t *file, uint8_t *out)
{
    uint8_t *scratch = malloc(pl->scratch_size ? pl->scratch_size : 1);
    if (!scratch) return -1;
    for (size_t i = 0; i < pl->nrp; i++) {
        const gpu_rplane *r = &pl->rp[i];
        if (gpu_rans0_twin(file + r->src, r->len, scratch + r->dst, r->size)) {
            fprintf(stderr, "chunk %u plane %u: the twin refuses it\n", r->chunk, r->plane);
            free(scratch);
            return -1;
        }
    }
    for (size_t c = 0; c < pl->nmc; c++) {
        const gpu_mchunk *m = &pl->mc[c];
        const uint8_t *p[GPU_PLANES_MAX];
        for (int b = 0; b < GPU_PLANES_MAX; b++)
            p[b] = m->plane[b] & GPU_FROM_FILE ? file + (m->plane[b] & ~GPU_FROM_FILE) : scratch + m->plane[b];
        xf_merge(m->xf, m->esize, p, m->n, out + m->out);
    }
    for (size_t c = 0; c < pl->nhc; c++) memcpy(out + pl->hc[c].out, pl->host + pl->hc[c].src, pl->hc[c].n);
    free(scratch);
    return 0;
}

/* One plane, one change: the twin and the CPU decoder must agree. */
static int mutate(ent_ctx *ec, const gpu_plan *pl, const uint8_t *file, int *refused)
{
    const gpu_rplane *r = &pl->rp[rnd() % pl->nrp];
    size_t len = r->len;
    uint8_t *src = malloc(len), *a = malloc(r->size), *b = malloc(r->size);
    memcpy(src, file + r->src, len);
    int how = (int)(rnd() % 4);
    if (how == 0 && len > 2) len -= 2; /* one word short */
    else if (how == 1) src[rnd() % (len < 64 ? len : 64)] ^= (uint8_t)(1u << (rnd() % 8)); /* head and tables */
    else src[rnd() % len] = (uint8_t)rnd();
    memset(a, 0xa5, r->size);
    memset(b, 0x5a, r->size);
    int rt = gpu_rans0_twin(src, len, a, r->size);
    int rc = ent_decode(ec, ENT_RANS0, src, len, b, r->size);
    int bad = (rt != 0) != (rc != 0) || (rt == 0 && memcmp(a, b, r->size) != 0) || rt == -2;
    if (bad) fprintf(stderr, "chunk %u plane %u, change %d: twin %d, CPU %d\n", r->chunk, r->plane, how, rt, rc);
    *refused += rt != 0;
    free(src);
    free(a);
    free(b);
    return bad;
}

int main(int argc, char **argv)
{
    int fails = 0;
    ckpz_ctx *ctx = ckpz_ctx_create();
    ent_ctx *ec = ent_ctx_create();
    for (int f = 1; f < argc; f++) {
        size_t size;
        uint8_t *file = slurp(argv[f], &size);
        if (!file) {
            fprintf(stderr, "%s: cannot read\n", argv[f]);
            return 2;
        }
        gpu_plan pl;
        uint64_t orig;
        if (ckpz_original_size(ctx, file, size, &orig) || gpu_plan_build(ctx, file, size, &pl)) {
            fprintf(stderr, "%s: %s\n", argv[f], ckpz_ctx_message(ctx));
            return 2;
        }
        uint8_t *ref = malloc(orig), *out = malloc(orig);
        if (ckpz_decompress_buffer(ctx, NULL, file, size, ref, orig)) {
            fprintf(stderr, "%s: %s\n", argv[f], ckpz_ctx_message(ctx));
            return 2;
        }
        memset(out, 0xee, orig);
        int bad = restore(&pl, file, out) || memcmp(out, ref, orig) != 0;
        int mbad = 0, refused = 0;
        for (int k = 0; k < 400 && pl.nrp; k++) mbad += mutate(ec, &pl, file, &refused);
        printf("%s: %llu bytes, %llu chunks: %zu merged (%llu rANS planes, %llu stored), %zu on the host "
               "(%llu bytes): %s; changed planes: %d/400 refused, %d disagreements\n",
               argv[f], (unsigned long long)orig, (unsigned long long)pl.chunks, pl.nmc,
               (unsigned long long)pl.rans0_planes, (unsigned long long)pl.stored_planes, pl.nhc,
               (unsigned long long)pl.host_size, bad ? "DIFFERENT" : "same bytes", refused, mbad);
        fails += bad + mbad;
        gpu_plan_free(&pl);
        free(ref);
        free(out);
        free(file);
    }
    ent_ctx_free(ec);
    ckpz_ctx_free(ctx);
    return fails ? 1 : 0;
}
