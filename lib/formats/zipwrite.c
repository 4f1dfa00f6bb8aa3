/* zipwrite.c — the torch.save archive produced from members in memory, as a read
 * callback (ckpz_zip_source, include/ckpz.h).
 *
 * The Python package saves a state dict without torch.save: it pickles the object
 * itself and hands the pickle and every storage's memory to this source, which lays
 * them out exactly as torch's zip writer does, so the compressor reads the tensors
 * where they lie and `ckpz -d` gives back the archive torch.save would have written.
 * torch's writer (a stored zip in zip64 mode) puts, per member: a local header with
 * zero CRC and sizes and flag bit 3, the name, a zip64 extra field only when the size
 * or the header's offset reaches 4 GiB (in the local header its compressed size is 0,
 * as in torch 1.13's and 2.13's files of a 4 GiB tensor), then torch's own "FB" extra
 * field of 'Z' padding that aligns the data to 64 bytes; the data; a data descriptor (16 bytes, or
 * 24 with 64-bit sizes when the member has a zip64 field) unless the member is empty.
 * Then the central directory (zip64 fields likewise), the zip64 end record and locator,
 * and the end record. Every size is known from the members, so the layout and the total
 * are fixed at creation; only the CRC-32 of each member is found while its bytes are
 * copied out, in time for its descriptor and the central directory, which follow it.
 *
 * Options (ckpz_zip_options) cover what torch 2.x's writer does differently: another
 * alignment (its storage_alignment setting), CRC-32 fields left 0 (its crc32 option), and
 * the serialization id it appends as a last record. That id is made of the record
 * names' hash (given: it depends on torch's C++ hash table) and of a fold of the
 * members' CRC-32s, which is known only once the last member before it has been read:
 * its 40 bytes are written when its header is, and its size was fixed from the start.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpz.h"
#include "common/bytes.h"
#include "common/crc32c.h"
#include "common/ctx.h"

#define LFH_SIZE 30
#define CDH_SIZE 46
#define Z64_EOCD_SIZE 56
#define Z64_LOC_SIZE 20
#define EOCD_SIZE 22
#define ALIGN_DEFAULT 64
#define ALIGN_MAX 65536 /* the padding's length is a 16-bit field */
#define ID_LEN 40       /* the serialization id: two 20-digit numbers */
#define U32_LIMIT 0xFFFFFFFFu /* a size or offset this large needs a zip64 field */

typedef struct zmember {
    char *name;
    uint16_t name_len;
    const uint8_t *data;
    uint64_t size;
    uint64_t hdr_off;   /* the local header's offset in the archive */
    uint16_t pad;       /* 'Z' bytes in the FB extra field */
    int z64;            /* has a zip64 extra field (local and central) */
    uint32_t crc;       /* of the data, once it has been read */
} zmember;

enum { PART_HEAD, PART_DATA, PART_DESC, PART_TAIL, PART_END };

struct ckpz_zip_source {
    zmember *m;
    size_t n;
    uint64_t total;
    uint64_t cdir_off, cdir_size;
    /* where reading stands */
    size_t cur;       /* member being produced */
    int part;
    uint8_t *buf;     /* the current header, descriptor or tail bytes */
    size_t buf_len, buf_pos, buf_cap;
    uint64_t data_pos; /* bytes of the current member's data produced */
    uint32_t crc;
    /* options */
    uint32_t align;
    int crc32;         /* compute CRC-32s (else 0 in every CRC field) */
    int has_id;        /* the last member is the serialization id */
    uint64_t id_names_hash;
    uint64_t id_fold;  /* fold of the CRC-32 fields of the non-empty members read so far */
    char id_text[ID_LEN + 1];
};

static int z64_size(uint64_t size) { return size >= U32_LIMIT; }
static int z64_off(uint64_t off) { return off >= U32_LIMIT; }

/* Bytes of a zip64 extra field for a member of this size whose header is at off. */
static size_t z64_extra_len(uint64_t size, uint64_t off)
{
    if (!z64_size(size) && !z64_off(off)) return 0;
    return 4 + (z64_size(size) ? 16 : 0) + (z64_off(off) ? 8 : 0);
}

/* local: in a local header, where torch's writer (miniz) does not know the compressed
 * size yet and writes 0 (the data descriptor and the central directory carry it). */
static size_t z64_extra_write(uint8_t *p, uint64_t size, uint64_t off, int local)
{
    size_t k = 4;
    st16(p, 0x0001);
    if (z64_size(size)) {
        st64(p + k, size); /* uncompressed */
        st64(p + k + 8, local ? 0 : size); /* compressed: stored */
        k += 16;
    }
    if (z64_off(off)) {
        st64(p + k, off);
        k += 8;
    }
    st16(p + 2, (uint16_t)(k - 4));
    return k;
}

static unsigned member_flags(const zmember *m)
{
    return 0x0800u | (m->size ? 0x0008u : 0); /* UTF-8 names; sizes in a descriptor */
}

static size_t head_len(const zmember *m)
{
    return LFH_SIZE + m->name_len + z64_extra_len(m->size, m->hdr_off) + 4 + m->pad;
}

static size_t desc_len(const zmember *m) { return m->size ? (m->z64 ? 24 : 16) : 0; }

static size_t central_len(const zmember *m) { return CDH_SIZE + m->name_len + z64_extra_len(m->size, m->hdr_off); }

static void build_head(ckpz_zip_source *s, const zmember *m);
static int build_tail(ckpz_zip_source *s);

void ckpz_zip_source_free(ckpz_zip_source *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) free(s->m[i].name);
    free(s->m);
    free(s->buf);
    free(s);
}

void ckpz_zip_options_init(ckpz_zip_options *o)
{
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->alignment = ALIGN_DEFAULT;
    o->crc32 = 1;
}

static int bad_name(const char *nm)
{
    size_t nl = nm ? strlen(nm) : 0;
    return !nl || nl > 65535 || nm[0] == '/';
}

ckpz_error ckpz_zip_source_create(ckpz_ctx *ctx, const ckpz_zip_member *members, size_t n, ckpz_zip_source **out)
{
    return ckpz_zip_source_create_opts(ctx, members, n, NULL, out);
}

ckpz_error ckpz_zip_source_create_opts(ckpz_ctx *ctx, const ckpz_zip_member *members, size_t n,
                                       const ckpz_zip_options *opt, ckpz_zip_source **out)
{
    ctx_clear(ctx);
    *out = NULL;
    ckpz_zip_options o;
    ckpz_zip_options_init(&o);
    if (opt) {
        if (opt->struct_size < offsetof(ckpz_zip_options, id_names_hash) + sizeof(uint64_t) ||
            opt->struct_size > sizeof o)
            return ctx_fail(ctx, CKPZ_ERR_PARAM,
                            "ckpz_zip_options: unknown struct_size %zu (call ckpz_zip_options_init)", opt->struct_size);
        memcpy(&o, opt, opt->struct_size);
    }
    if (o.alignment < 1 || o.alignment > ALIGN_MAX)
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "alignment %u not in 1..%u", o.alignment, ALIGN_MAX);
    if (o.id_name && bad_name(o.id_name))
        return ctx_fail(ctx, CKPZ_ERR_PARAM,
                        "invalid serialization id name '%.100s' (1 to 65535 bytes, not starting with '/')", o.id_name);
    if (n && !members) return ctx_fail(ctx, CKPZ_ERR_PARAM, "no members given");
    if (n >= U32_LIMIT - (o.id_name != NULL))
        return ctx_fail(ctx, CKPZ_ERR_PARAM, "%zu members: a zip archive holds fewer than 2^32",
                        n + (o.id_name != NULL));
    size_t total_n = n + (o.id_name != NULL);
    for (size_t i = 0; i < n; i++) {
        const char *nm = members[i].name;
        if (bad_name(nm))
            return ctx_fail(ctx, CKPZ_ERR_PARAM,
                            "member %zu: invalid name '%.100s' (1 to 65535 bytes, not starting with '/')", i,
                            nm ? nm : "");
        if (members[i].size && !members[i].data)
            return ctx_fail(ctx, CKPZ_ERR_PARAM, "member %zu ('%.100s'): no data for %llu bytes", i, nm,
                            (unsigned long long)members[i].size);
    }
    ckpz_zip_source *s = calloc(1, sizeof *s);
    if (!s || !(s->m = calloc(total_n ? total_n : 1, sizeof *s->m))) {
        free(s);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    s->align = o.alignment;
    s->crc32 = o.crc32 != 0;
    s->has_id = o.id_name != NULL;
    s->id_names_hash = o.id_names_hash;
    uint64_t pos = 0, cdir = 0;
    size_t longest = 0;
    for (size_t i = 0; i < total_n; i++, s->n++) {
        zmember *m = &s->m[i];
        const char *nm = i < n ? members[i].name : o.id_name;
        size_t nl = strlen(nm);
        if (!(m->name = malloc(nl + 1))) {
            ckpz_zip_source_free(s);
            return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
        }
        memcpy(m->name, nm, nl + 1);
        m->name_len = (uint16_t)nl;
        m->data = i < n ? members[i].data : (const uint8_t *)s->id_text; /* the id: filled when reached */
        m->size = i < n ? members[i].size : ID_LEN;
        m->hdr_off = pos;
        m->z64 = z64_extra_len(m->size, pos) != 0;
        /* the data starts after the header, the name, the zip64 field and FB's 4 bytes */
        uint64_t start = pos + LFH_SIZE + nl + z64_extra_len(m->size, pos) + 4;
        m->pad = (uint16_t)((s->align - start % s->align) % s->align);
        size_t h = head_len(m);
        if (h > longest) longest = h;
        pos += h + m->size + desc_len(m);
        cdir += central_len(m);
    }
    s->cdir_off = pos;
    s->cdir_size = cdir;
    s->total = pos + cdir + Z64_EOCD_SIZE + Z64_LOC_SIZE + EOCD_SIZE;
    s->buf_cap = longest > 64 ? longest : 64;
    if (!(s->buf = malloc(s->buf_cap))) {
        ckpz_zip_source_free(s);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    }
    if (s->n) {
        build_head(s, &s->m[0]);
        s->part = PART_HEAD;
    } else if (build_tail(s)) {
        ckpz_zip_source_free(s);
        return ctx_fail(ctx, CKPZ_ERR_NOMEM, "out of memory");
    } else {
        s->part = PART_TAIL;
    }
    *out = s;
    return CKPZ_OK;
}

uint64_t ckpz_zip_source_size(const ckpz_zip_source *s) { return s->total; }

/* c10::hash_combine, with which torch folds the records' CRC-32s into its id. */
static uint64_t hash_combine(uint64_t seed, uint64_t value)
{
    return seed ^ (value + 0x9e3779b9u + (seed << 6) + (seed >> 2));
}

static void build_head(ckpz_zip_source *s, const zmember *m)
{
    uint8_t *p = s->buf;
    if (s->has_id && m == &s->m[s->n - 1]) { /* every member before it has been read */
        char text[2 * 21];
        snprintf(text, sizeof text, "%020llu%020llu", (unsigned long long)s->id_names_hash,
                 (unsigned long long)s->id_fold);
        memcpy(s->id_text, text, ID_LEN);
    }
    memset(p, 0, LFH_SIZE); /* version needed 0 (stored), time, date, CRC and sizes 0 */
    st32(p, 0x04034b50);
    st16(p + 6, (uint16_t)member_flags(m));
    st16(p + 26, m->name_len);
    size_t z = z64_extra_len(m->size, m->hdr_off);
    st16(p + 28, (uint16_t)(z + 4 + m->pad));
    memcpy(p + LFH_SIZE, m->name, m->name_len);
    size_t k = LFH_SIZE + m->name_len;
    if (z) k += z64_extra_write(p + k, m->size, m->hdr_off, 1);
    p[k] = 'F';
    p[k + 1] = 'B';
    st16(p + k + 2, m->pad);
    memset(p + k + 4, 'Z', m->pad);
    s->buf_len = k + 4 + m->pad;
    s->buf_pos = 0;
}

static void build_desc(ckpz_zip_source *s, const zmember *m)
{
    uint8_t *p = s->buf;
    st32(p, 0x08074b50);
    st32(p + 4, m->crc);
    if (m->z64) {
        st64(p + 8, m->size);
        st64(p + 16, m->size);
    } else {
        st32(p + 8, (uint32_t)m->size);
        st32(p + 12, (uint32_t)m->size);
    }
    s->buf_len = desc_len(m);
    s->buf_pos = 0;
}

/* The central directory and the end records, now that every CRC is known. */
static int build_tail(ckpz_zip_source *s)
{
    uint64_t len = s->total - s->cdir_off;
    if (len > SIZE_MAX) return -1;
    if (len > s->buf_cap) {
        uint8_t *nb = realloc(s->buf, (size_t)len);
        if (!nb) return -1;
        s->buf = nb;
        s->buf_cap = (size_t)len;
    }
    uint8_t *p = s->buf;
    for (size_t i = 0; i < s->n; i++) {
        const zmember *m = &s->m[i];
        memset(p, 0, CDH_SIZE); /* versions 0, time, date, comment, disk, attributes 0 */
        st32(p, 0x02014b50);
        st16(p + 8, (uint16_t)member_flags(m));
        st32(p + 16, m->crc);
        st32(p + 20, (uint32_t)(z64_size(m->size) ? U32_LIMIT : m->size));
        st32(p + 24, (uint32_t)(z64_size(m->size) ? U32_LIMIT : m->size));
        st16(p + 28, m->name_len);
        st16(p + 30, (uint16_t)z64_extra_len(m->size, m->hdr_off));
        st32(p + 42, (uint32_t)(z64_off(m->hdr_off) ? U32_LIMIT : m->hdr_off));
        memcpy(p + CDH_SIZE, m->name, m->name_len);
        p += CDH_SIZE + m->name_len;
        if (m->z64) p += z64_extra_write(p, m->size, m->hdr_off, 0);
    }
    uint64_t z64_at = s->cdir_off + s->cdir_size;
    memset(p, 0, Z64_EOCD_SIZE + Z64_LOC_SIZE + EOCD_SIZE);
    st32(p, 0x06064b50);
    st64(p + 4, Z64_EOCD_SIZE - 12);
    st16(p + 12, 0x031e); /* made by: Unix, 3.0 */
    st16(p + 14, 0x002d); /* needed: 4.5, zip64 */
    st64(p + 24, s->n);
    st64(p + 32, s->n);
    st64(p + 40, s->cdir_size);
    st64(p + 48, s->cdir_off);
    p += Z64_EOCD_SIZE;
    st32(p, 0x07064b50);
    st64(p + 8, z64_at);
    st32(p + 16, 1);
    p += Z64_LOC_SIZE;
    st32(p, 0x06054b50);
    st16(p + 8, (uint16_t)(s->n < 0xFFFF ? s->n : 0xFFFF));
    st16(p + 10, (uint16_t)(s->n < 0xFFFF ? s->n : 0xFFFF));
    st32(p + 12, (uint32_t)(s->cdir_size < U32_LIMIT ? s->cdir_size : U32_LIMIT));
    st32(p + 16, (uint32_t)(s->cdir_off < U32_LIMIT ? s->cdir_off : U32_LIMIT));
    s->buf_len = (size_t)len;
    s->buf_pos = 0;
    return 0;
}

/* Copies member data and takes its CRC-32 in the same pass (crc32_zip_copy). */
static void copy_crc(ckpz_zip_source *s, uint8_t *dst, const uint8_t *src, size_t n)
{
    if (s->crc32) s->crc = crc32_zip_copy(s->crc, dst, src, n);
    else /* the CRC fields stay 0 */ memcpy(dst, src, n);
}

ptrdiff_t ckpz_zip_source_read(void *opaque, void *out, size_t n)
{
    ckpz_zip_source *s = opaque;
    uint8_t *dst = out;
    size_t got = 0;
    if (n > PTRDIFF_MAX) n = PTRDIFF_MAX;
    while (got < n && s->part != PART_END) {
        zmember *m = s->cur < s->n ? &s->m[s->cur] : NULL;
        if (s->part == PART_DATA) {
            uint64_t left = m->size - s->data_pos;
            size_t k = left < n - got ? (size_t)left : n - got;
            copy_crc(s, dst + got, m->data + s->data_pos, k);
            s->data_pos += k;
            got += k;
            if (s->data_pos == m->size) {
                m->crc = s->crc;
                s->id_fold = hash_combine(s->id_fold, m->crc); /* members with data only */
                build_desc(s, m);
                s->part = PART_DESC;
            }
            continue;
        }
        if (s->buf_pos == s->buf_len) { /* the current piece is done: the next one */
            if (s->part == PART_HEAD) {
                s->part = PART_DATA;
                s->data_pos = 0;
                s->crc = 0;
                if (!m->size) {
                    m->crc = 0;
                    s->buf_len = s->buf_pos = 0;
                    s->part = PART_DESC; /* empty: no descriptor, an empty piece */
                }
                continue;
            }
            if (s->part == PART_DESC) {
                if (++s->cur < s->n) {
                    build_head(s, &s->m[s->cur]);
                    s->part = PART_HEAD;
                } else {
                    if (build_tail(s)) return -1;
                    s->part = PART_TAIL;
                }
                continue;
            }
            if (s->part == PART_TAIL) {
                s->part = PART_END;
                continue;
            }
        }
        size_t k = s->buf_len - s->buf_pos;
        if (k > n - got) k = n - got;
        memcpy(dst + got, s->buf + s->buf_pos, k);
        s->buf_pos += k;
        got += k;
    }
    return (ptrdiff_t)got;
}
