/* torch_legacy.c — the legacy torch.save reader (see torch_legacy.h, formats.h).
 *
 * Still met in pretrained weights shipped with packages (resemblyzer's pretrained.pt)
 * and written by tools that pass _use_new_zipfile_serialization=False. The five pickles
 * must all be in the prefix (at most FMT_PROBE_MAX): they run through pickle.c's machine
 * and stay opaque. The storages follow, each an 8-byte element count and the bytes; the
 * reader vouches for one only when its key is in the object's pickle (which gives its
 * element type, count and name, as for zip archives), not seen before, of a type whose
 * element size is known, with the count the pickle gives, and within the input. The
 * first storage that fails any of these ends the description: its count can no longer
 * be trusted to find the next one, so the rest is opaque. Counts are read as they come
 * (resume segments), so the storages need not be in the prefix.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pickle.h"
#include "torch_legacy.h"

struct legacy_state {
    pkl_storages st; /* the object's storages, sorted by key */
    pkl_strs keys;   /* the storage keys, in the order of the data */
    uint8_t *used;   /* per storage of st: described already */
    size_t next;     /* the key whose count comes next */
    uint64_t total;  /* the input's size, or CKPZ_SIZE_UNKNOWN */
};

/* 0x1950a86a20f9469cfc6c as LONG1 writes it: 10 bytes, little-endian. */
static const uint8_t MAGIC[12] = {0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};

/* Length of a binary pickle's opening (PROTO 2-5, then FRAME from protocol 4 on, which
 * Python writes for all but the tiniest pickles), or 0. */
static size_t opening(const uint8_t *p, size_t len)
{
    if (len < 2 || p[0] != 0x80 || p[1] < 2 || p[1] > 5) return 0;
    return p[1] >= 4 && len > 2 && p[2] == 0x95 ? 11 : 2;
}

int torch_legacy_sniff(const uint8_t *p, size_t len)
{
    if (len < 1) return -1;
    if (p[0] != 0x80) return 0;
    if (len < 2) return -1;
    if (p[1] < 2 || p[1] > 5) return 0;
    if (p[1] >= 4 && len < 3) return -1;
    size_t o = opening(p, len);
    for (size_t i = 0; i <= sizeof MAGIC; i++) { /* the magic, then STOP */
        if (o + i >= len) return -1;
        if (p[o + i] != (i < sizeof MAGIC ? MAGIC[i] : '.')) return 0;
    }
    return 1;
}

/* The protocol-version pickle says 1001 (BININT2 0x03e9), the only layout described here. */
static int version_ok(const uint8_t *p, size_t n)
{
    size_t o = opening(p, n);
    return o && n == o + 4 && p[o] == 'M' && p[o + 1] == 0xe9 && p[o + 2] == 0x03 && p[o + 3] == '.';
}

/* The sys_info pickle says little_endian: True (its key, a memo put, NEWTRUE). */
static int little_endian(const uint8_t *p, size_t n)
{
    static const char key[] = "little_endian";
    const size_t kl = sizeof key - 1;
    for (size_t i = 1; i + kl < n; i++) {
        if (p[i - 1] != kl && !(i >= 4 && p[i - 4] == kl && !p[i - 3] && !p[i - 2] && !p[i - 1])) continue;
        if (memcmp(p + i, key, kl)) continue;
        size_t j = i + kl;
        if (j < n && p[j] == 'q') j += 2;
        else if (j < n && p[j] == 'r') j += 5;
        else if (j < n && p[j] == 0x94) j += 1;
        return j < n && p[j] == 0x88;
    }
    return 0;
}

void torch_legacy_free(legacy_state *lg)
{
    if (!lg) return;
    pkl_storages_free(&lg->st);
    pkl_strs_free(&lg->keys);
    free(lg->used);
    free(lg);
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* The storage whose count is at p: its tensor's length, or UINT64_MAX when the reader
 * cannot vouch for it (`data`: its absolute offset; `end`: where the input ends, or
 * CKPZ_SIZE_UNKNOWN). */
static uint64_t storage_bytes(legacy_state *lg, const uint8_t *p, uint64_t data, uint64_t end, const pkl_storage **out)
{
    const char *key = lg->keys.s[lg->next];
    const pkl_storage *s = pkl_find(&lg->st, (const uint8_t *)key, strlen(key));
    if (!s || lg->used[s - lg->st.s] || s->dtype == CKPZ_DTYPE_NONE) return UINT64_MAX;
    uint64_t count = le64(p), esz = ckpz_dtype_size(s->dtype);
    if (!esz || count != s->numel || count > (UINT64_MAX - data) / esz) return UINT64_MAX;
    uint64_t bytes = count * esz;
    if (end != CKPZ_SIZE_UNKNOWN && (data > end || bytes > end - data)) return UINT64_MAX;
    *out = s;
    return bytes;
}

/* Describes storages from the count at `at` on (p[0..len): the bytes from there).
 * `progress`: bytes before `at` were described in this call, so it may end with a
 * resume segment at `at` instead of asking for more. */
static fmt_status walk(legacy_state *lg, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof, int progress,
                       size_t *need)
{
    uint64_t end = eof ? at + len : lg->total;
    size_t pos = 0;
    while (lg->next < lg->keys.n) {
        if (len - pos < 8) {
            if (eof) return FMT_DONE; /* cut inside a count: the rest is opaque */
            if (!pos && !progress) {
                *need = 8;
                return FMT_NEED_MORE;
            }
            return fmt_push_resume(l, at + pos) ? FMT_NOMEM : FMT_DONE;
        }
        const pkl_storage *s = NULL;
        uint64_t data = at + pos + 8, bytes = storage_bytes(lg, p + pos, data, end, &s);
        if (bytes == UINT64_MAX) return FMT_DONE;
        if (fmt_push(l, s->dtype, s->name, strlen(s->name), s->ndim, s->shape, data, bytes)) return FMT_NOMEM;
        l->seg[l->n - 1].optim = s->optim; /* the reader's state owns it */
        lg->used[s - lg->st.s] = 1;
        lg->next++;
        if (bytes > len - pos - 8) /* the next count lies beyond the bytes at hand */
            return lg->next < lg->keys.n && fmt_push_resume(l, data + bytes) ? FMT_NOMEM : FMT_DONE;
        pos += 8 + (size_t)bytes;
    }
    return FMT_DONE; /* after the last storage: opaque */
}

fmt_status torch_legacy_resume(legacy_state *lg, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof,
                               size_t *need)
{
    return walk(lg, l, at, p, len, eof, 0, need);
}

/* What to ask for when a pickle runs past the prefix: twice as much, 64 KiB more at least. */
static size_t more(size_t len)
{
    size_t want = len < FMT_PROBE_MAX / 2 ? 2 * len : FMT_PROBE_MAX;
    if (want < len + (64u << 10)) want = len + (64u << 10);
    return want < FMT_PROBE_MAX ? want : FMT_PROBE_MAX;
}

/* Reads the four pickles after the magic's from p[at..len): the storages and keys, and
 * *at past them. PKL_OK, PKL_NEED, PKL_BAD (with why), PKL_NOMEM. */
static pkl_status read_pickles(const uint8_t *p, size_t len, size_t *at, legacy_state *lg, const char **bad)
{
    for (int i = 0; i < 4; i++) {
        pkl_storages none;
        size_t end = 0;
        pkl_status ps = i == 3 ? pkl_str_list(p + *at, len - *at, &lg->keys, &end)
                               : pkl_torch_storages(p + *at, len - *at, i == 2 ? &lg->st : &none, &end);
        if (ps != PKL_OK) {
            *bad = i == 3 ? "storage keys not understood" : "pickle not understood";
            return ps;
        }
        if (i < 2) {
            size_t n = none.n;
            pkl_storages_free(&none);
            if (n || (i == 0 && !version_ok(p + *at, end)) || (i == 1 && !little_endian(p + *at, end))) {
                *bad = i == 0 ? "protocol version other than 1001" : "sys_info not little-endian";
                return PKL_BAD;
            }
        }
        *at += end;
    }
    return PKL_OK;
}

fmt_status torch_legacy_describe(const uint8_t *p, size_t len, uint64_t total, fmt_list *out, size_t *need, char *why,
                                 size_t whylen, legacy_state **state)
{
    *state = NULL;
    int eof = total != CKPZ_SIZE_UNKNOWN && len >= total;
    if (torch_legacy_sniff(p, len) != 1) {
        fmt_why(why, whylen, "not a legacy torch file");
        return FMT_ERROR;
    }
    legacy_state *lg = calloc(1, sizeof(*lg));
    if (!lg) return FMT_NOMEM;
    lg->total = total;
    size_t at = opening(p, len) + sizeof MAGIC + 1;
    const char *bad = "";
    pkl_status ps = read_pickles(p, len, &at, lg, &bad);
    if (ps == PKL_OK && !(lg->used = calloc(lg->st.n ? lg->st.n : 1, 1))) ps = PKL_NOMEM;
    if (ps != PKL_OK) torch_legacy_free(lg);
    if (ps == PKL_NOMEM) return FMT_NOMEM;
    if (ps == PKL_NEED && !eof && len < FMT_PROBE_MAX) {
        *need = more(len);
        return FMT_NEED_MORE;
    }
    if (ps == PKL_NEED)
        return fmt_all_opaque(out, CKPZ_INPUT_TORCH, why, whylen, "legacy torch file: pickles cut short");
    if (ps == PKL_BAD) {
        char r[96];
        snprintf(r, sizeof r, "legacy torch file: %s", bad);
        return fmt_all_opaque(out, CKPZ_INPUT_TORCH, why, whylen, r);
    }
    out->format = CKPZ_INPUT_TORCH;
    size_t nn = 0;
    fmt_status s = walk(lg, out, at, p + at, len - at, eof, 1, &nn);
    if (s == FMT_NOMEM || fmt_finish(out)) {
        fmt_list_free(out);
        torch_legacy_free(lg);
        return FMT_NOMEM;
    }
    *state = lg;
    return FMT_DONE;
}
