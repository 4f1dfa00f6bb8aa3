/* zip.h — walking the local headers of a zip archive (torch.save .pt, NumPy .npz).
 *
 * A zip archive is a sequence of members, each a local file header (PK\3\4, 30 bytes +
 * name + extra field) followed by the member's data and, when general-purpose flag bit 3
 * is set, a data descriptor (PK\7\8, crc, sizes; 12/16 or 20/24 bytes) after the data;
 * then the central directory and the end records, which the walker leaves opaque.
 *
 * zip_walk describes members from a given offset on, calling the format's member
 * callback for each to push the segments of the member's data; the headers, descriptors
 * and everything it does not understand stay opaque (gaps in the list). It ends the list
 * with fmt_push_resume at the first header it cannot see whole, or with nothing at the
 * central directory or at anything unexpected (the rest is then opaque).
 *
 * The size of a member's data comes from its local header (zip64 extra field when the
 * 32-bit field is 0xFFFFFFFF) or, with flag bit 3 (torch writes every member this way),
 * from the callback (a torch storage's numel * element size, a .npy member's header)
 * checked against the data descriptor, or else from a scan for a data descriptor whose
 * size matches its distance from the data.
 */
#ifndef CKPZ_ZIP_H
#define CKPZ_ZIP_H

#include <stddef.h>
#include <stdint.h>

#include "formats.h"

#define ZIP_SIZE_UNKNOWN UINT64_MAX

/* A member as its local header shows it. */
typedef struct zip_member {
    const uint8_t *name;   /* not NUL-terminated */
    size_t name_len;
    unsigned flags, method;
    uint64_t hdr_off;      /* absolute offset of the local header */
    uint64_t data_off;     /* absolute offset of the data */
    uint64_t size;         /* stored size of the data, or ZIP_SIZE_UNKNOWN (flag bit 3) */
    const uint8_t *data;   /* the data bytes at hand, from data_off on */
    size_t avail;          /* how many (may be fewer than size) */
    int eof;               /* the input ends at data + avail */
} zip_member;

enum { ZIP_CB_OK = 0, ZIP_CB_NEED = 1, ZIP_CB_NOMEM = -1 };

/* Pushes segments (absolute offsets, within [data_off, data_off + size)) for the member's
 * data. When m->size is ZIP_SIZE_UNKNOWN the callback may set it to the size it expects
 * (the walker then checks the data descriptor there) and push segments, or leave it
 * unknown and push nothing. ZIP_CB_NEED: it needs *need bytes of data (from data_off)
 * before it can decide; ZIP_CB_NOMEM on allocation failure. */
typedef int (*zip_member_fn)(void *ctx, fmt_list *l, zip_member *m, size_t *need);

/* Walker state kept across resume calls: whether the resume point is a data descriptor. */
typedef struct zip_walk_state {
    int desc_pending;      /* the resume offset is a data descriptor ... */
    uint64_t desc_size;    /* ... for a member of this size */
    unsigned desc_method;  /* ... and this compression method */
} zip_walk_state;

/* Describes the input from absolute offset `at` on, p[0..len) being the bytes from there
 * (eof: nothing follows). `progress`: the caller has already described bytes before
 * `at` in this call, so the walker may end with a resume segment at `at` itself instead
 * of asking for more bytes. FMT_DONE, FMT_NEED_MORE (*need bytes from `at`) or
 * FMT_NOMEM. The state is updated only on FMT_DONE. */
fmt_status zip_walk(zip_walk_state *st, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof, int progress,
                    zip_member_fn cb, void *ctx, size_t *need);

/* Parses the local header at p[0..len). 1: parsed into *m (data/avail/eof not set);
 * 0: more bytes needed, *need = how many from p; -1: not a local header. */
int zip_local_header(const uint8_t *p, size_t len, uint64_t off, zip_member *m, size_t *need);

/* The first member of an input whose first len bytes are p (total: the input size or
 * CKPZ_SIZE_UNKNOWN), for a reader's detection step: FMT_DONE with *m parsed,
 * FMT_NEED_MORE with *need, or FMT_ERROR with the reason in why. */
fmt_status zip_first_member(const uint8_t *p, size_t len, uint64_t total, zip_member *m, size_t *need, char *why,
                            size_t whylen);

/* The reader table's sniff for the zip formats: a local header's signature. */
int fmt_sniff_zip(const uint8_t *p, size_t len);

/* Does the name end with suffix? */
int zip_name_ends(const zip_member *m, const char *suffix);

#endif
