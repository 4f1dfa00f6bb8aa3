/* zip.c — the local-header walk shared by the torch.save and .npz readers (see zip.h). */
#include <string.h>

#include "zip.h"

#define ZIP_SCAN_MAX (16u << 20) /* how far to look for the descriptor of a member of unknown size */
#define ZIP_LOCAL_SIG 0x04034b50u
#define ZIP_DESC_SIG 0x08074b50u

static uint32_t rd16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | rd16(p + 2) << 16; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

int fmt_sniff_zip(const uint8_t *p, size_t len)
{
    return len >= 4 && p[0] == 'P' && p[1] == 'K' && p[2] == 3 && p[3] == 4;
}

int zip_name_ends(const zip_member *m, const char *suffix)
{
    size_t k = strlen(suffix);
    return m->name_len >= k && memcmp(m->name + m->name_len - k, suffix, k) == 0;
}

int zip_local_header(const uint8_t *p, size_t len, uint64_t off, zip_member *m, size_t *need)
{
    static const uint8_t sig[4] = {'P', 'K', 3, 4};
    size_t k = len < 4 ? len : 4;
    if (memcmp(p, sig, k) != 0) return -1;
    if (len < 30) {
        *need = 30;
        return 0;
    }
    size_t n = rd16(p + 26), x = rd16(p + 28);
    if (len < 30 + n + x) {
        *need = 30 + n + x;
        return 0;
    }
    memset(m, 0, sizeof(*m));
    m->flags = rd16(p + 6);
    m->method = rd16(p + 8);
    m->name = p + 30;
    m->name_len = n;
    m->hdr_off = off;
    m->data_off = off + 30 + n + x;
    uint64_t csize = rd32(p + 18), usize = rd32(p + 22);
    if (m->flags & 8) {
        m->size = ZIP_SIZE_UNKNOWN; /* sizes follow the data */
    } else if (csize == 0xFFFFFFFFu || usize == 0xFFFFFFFFu) {
        /* zip64: the sizes are in the extra field with id 1 (uncompressed, compressed). */
        m->size = ZIP_SIZE_UNKNOWN;
        const uint8_t *e = p + 30 + n;
        size_t i = 0;
        while (i + 4 <= x) {
            size_t id = rd16(e + i), sz = rd16(e + i + 2);
            if (i + 4 + sz > x) break;
            if (id == 1) {
                size_t q = 0;
                uint64_t u = usize, c = csize;
                if (sz >= 16) {
                    u = rd64(e + i + 4);
                    c = rd64(e + i + 12);
                } else {
                    if (usize == 0xFFFFFFFFu && q + 8 <= sz) {
                        u = rd64(e + i + 4 + q);
                        q += 8;
                    }
                    if (csize == 0xFFFFFFFFu && q + 8 <= sz) {
                        c = rd64(e + i + 4 + q);
                        q += 8;
                    }
                }
                if (c != 0xFFFFFFFFu || csize != 0xFFFFFFFFu) m->size = c;
                (void)u;
                break;
            }
            i += 4 + sz;
        }
    } else {
        m->size = csize;
    }
    /* A size no file can hold (a hostile zip64 field): not a member, the rest is opaque. */
    if (m->size != ZIP_SIZE_UNKNOWN && m->size > UINT64_MAX - m->data_off - 24) return -1;
    return 1;
}

static int is_sig(const uint8_t *p)
{
    if (p[0] != 'P' || p[1] != 'K') return 0;
    return (p[2] == 3 && p[3] == 4) || (p[2] == 1 && p[3] == 2) || (p[2] == 5 && p[3] == 6) ||
           (p[2] == 6 && p[3] == 6) || (p[2] == 6 && p[3] == 7) || (p[2] == 7 && p[3] == 8);
}

/* The data descriptor at p for a member of `size` stored bytes: its length (12, 16, 20
 * or 24), 0 when there is none that matches, -1 when more bytes are needed. */
static int desc_len(const uint8_t *p, size_t len, int eof, uint64_t size, unsigned method)
{
    if (len < 28 && !eof) return -1;
    int has_sig = len >= 4 && rd32(p) == ZIP_DESC_SIG;
    /* candidates: {length, offset of the sizes, 64-bit} */
    static const struct {
        int len, at, wide;
    } c[4] = {{16, 8, 0}, {24, 8, 1}, {12, 4, 0}, {20, 4, 1}};
    int best = 0;
    for (int i = has_sig ? 0 : 2; i < 4; i++) {
        if (len < (size_t)c[i].len) continue;
        uint64_t cs = c[i].wide ? rd64(p + c[i].at) : rd32(p + c[i].at);
        uint64_t us = c[i].wide ? rd64(p + c[i].at + 8) : rd32(p + c[i].at + 4);
        if (cs != size || (method == 0 && us != size)) continue;
        size_t after = (size_t)c[i].len;
        if (len - after >= 4 ? is_sig(p + after) : (eof && len == after)) return c[i].len;
        if (!best) best = c[i].len;
    }
    return best;
}

/* Looks for the descriptor of a member of unknown size in d[0..n): its data length, or
 * ZIP_SIZE_UNKNOWN. */
static uint64_t desc_scan(const uint8_t *d, size_t n, int eof, unsigned method)
{
    for (size_t q = 0; q + 4 <= n; q++) {
        const uint8_t *s = memchr(d + q, 'P', n - q - 3);
        if (!s) break;
        q = (size_t)(s - d);
        if (rd32(s) == ZIP_DESC_SIG && desc_len(s, n - q, eof, q, method) > 0) return q;
    }
    return ZIP_SIZE_UNKNOWN;
}

fmt_status zip_walk(zip_walk_state *st, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof, int progress,
                    zip_member_fn cb, void *ctx, size_t *need)
{
    zip_walk_state s = *st;
    size_t pos = 0;
    int moved = progress;
    uint64_t want; /* bytes wanted from `at` when stopping before a header */

    for (;;) {
        if (s.desc_pending) {
            int d = desc_len(p + pos, len - pos, eof, s.desc_size, s.desc_method);
            if (d < 0) {
                want = (uint64_t)pos + 28;
                goto stop;
            }
            if (d == 0) goto done; /* no descriptor where expected: the rest is opaque */
            pos += (size_t)d;
            s.desc_pending = 0;
        }
        if (pos >= len && eof) goto done;
        zip_member m;
        size_t hn = 0;
        int h = zip_local_header(p + pos, len - pos, at + pos, &m, &hn);
        if (h < 0) goto done; /* central directory, or something else: opaque */
        if (h == 0) {
            if (eof) goto done;
            want = (uint64_t)pos + hn;
            goto stop;
        }
        size_t hl = (size_t)(m.data_off - m.hdr_off);
        m.data = p + pos + hl;
        m.avail = len - pos - hl;
        m.eof = eof;
        size_t cn = 0, pushed = l->n;
        int r = cb(ctx, l, &m, &cn);
        if (r == ZIP_CB_NOMEM) return FMT_NOMEM;
        if (r == ZIP_CB_NEED) {
            if (eof || cn <= m.avail) goto done; /* a callback bug; be safe */
            want = (uint64_t)pos + hl + cn;
            goto stop;
        }
        if (m.size == ZIP_SIZE_UNKNOWN) {
            if (!(m.flags & 8)) goto done; /* no size anywhere */
            m.size = desc_scan(m.data, m.avail, eof, m.method);
            if (m.size == ZIP_SIZE_UNKNOWN) {
                if (eof || m.avail >= ZIP_SCAN_MAX) goto done;
                size_t more = m.avail < (64u << 10) ? (64u << 10) : m.avail;
                want = (uint64_t)pos + hl + m.avail + more;
                goto stop;
            }
        }
        if (m.size > UINT64_MAX - m.data_off - 24) {
            fmt_list_drop(l, pushed); /* the callback sized the member past any file */
            goto done;
        }
        uint64_t next = m.data_off + m.size;
        if (m.flags & 8) {
            s.desc_pending = 1;
            s.desc_size = m.size;
            s.desc_method = m.method;
        }
        moved = 1;
        if (next - at >= (uint64_t)len) {
            if (next - at == (uint64_t)len && eof && !s.desc_pending) goto done;
            if (fmt_push_resume(l, next)) return FMT_NOMEM;
            *st = s;
            return FMT_DONE;
        }
        pos = (size_t)(next - at);
    }

stop:
    /* The bytes from `at` + pos on are not enough to go on. */
    if (moved) {
        if (fmt_push_resume(l, at + pos)) return FMT_NOMEM;
        *st = s;
        return FMT_DONE;
    }
    if (want <= len || want > FMT_PROBE_MAX) goto done;
    *need = (size_t)want;
    return FMT_NEED_MORE;

done:
    s.desc_pending = 0;
    *st = s;
    return FMT_DONE;
}

fmt_status zip_first_member(const uint8_t *p, size_t len, uint64_t total, zip_member *m, size_t *need, char *why,
                            size_t whylen)
{
    size_t hn = 0;
    int h = zip_local_header(p, len, 0, m, &hn);
    if (h < 0) {
        fmt_why(why, whylen, "not a zip archive");
        return FMT_ERROR;
    }
    if (h == 0) {
        if ((total != CKPZ_SIZE_UNKNOWN && len >= total) || hn > FMT_PROBE_MAX) {
            fmt_why(why, whylen, "zip header cut short");
            return FMT_ERROR;
        }
        *need = hn;
        return FMT_NEED_MORE;
    }
    return FMT_DONE;
}
