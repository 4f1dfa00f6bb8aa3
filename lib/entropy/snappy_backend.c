/* snappy_backend.c — the ENT_SNAPPY codec (id 6): each plane in snappy's raw format (a
 * varint of the plane's size, then literals and copies), without snappy's framing.
 *
 * Snappy has no levels; it trades ratio for speed much as LZ4's fast coder does and is
 * what many storage stacks already speak. It is a C++ library (through its C API, which
 * snappy-c.h declares): linked in, it and the C++ runtime cost every ckpz process about
 * 1.8 M instructions at start-up (measured with callgrind: 1% of decoding a 20 MB file),
 * so it is loaded on first use instead, and a process that never meets a snappy plane
 * never loads it. Its C API compresses into a buffer of its worst-case size, so the
 * encoder stages the output in the ent_ctx's scratch and keeps it only when it is
 * smaller than the plane. The decoder takes a plane only if its varint declares exactly
 * n bytes and the rest decodes to exactly them (snappy refuses a stream that ends early,
 * overruns or runs past its input).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <snappy-c.h>
#include <string.h>

#include "ent_internal.h"

#define SNAPPY_LIB "libsnappy.so.1"

static struct {
    snappy_status (*compress)(const char *in, size_t n, char *out, size_t *outlen);
    snappy_status (*uncompress)(const char *in, size_t n, char *out, size_t *outlen);
    size_t (*max_compressed_length)(size_t n);
    snappy_status (*uncompressed_length)(const char *in, size_t n, size_t *len);
} api;
static int loaded; /* 1 when every api pointer is set */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    void *h = dlopen(SNAPPY_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    /* POSIX: a function's address read through a void * (the only way dlsym gives it) */
    *(void **)&api.compress = dlsym(h, "snappy_compress");
    *(void **)&api.uncompress = dlsym(h, "snappy_uncompress");
    *(void **)&api.max_compressed_length = dlsym(h, "snappy_max_compressed_length");
    *(void **)&api.uncompressed_length = dlsym(h, "snappy_uncompressed_length");
    loaded = api.compress && api.uncompress && api.max_compressed_length && api.uncompressed_length;
}

static const char *snappy_missing(void)
{
    pthread_once(&once, load);
    return loaded ? NULL : SNAPPY_LIB " could not be loaded";
}

static size_t snappy_encode(ent_ctx *c, const uint8_t *src, size_t n, uint8_t *dst, size_t cap, int level)
{
    (void)level;
    if (snappy_missing()) return 0;
    size_t len = api.max_compressed_length(n);
    uint8_t *buf = ent_scratch(c, len);
    if (!buf || api.compress((const char *)src, n, (char *)buf, &len) != SNAPPY_OK || len >= n || len > cap) return 0;
    memcpy(dst, buf, len);
    return len;
}

static int snappy_decode(ent_ctx *c, const uint8_t *src, size_t srclen, uint8_t *dst, size_t n)
{
    (void)c;
    size_t len;
    if (snappy_missing() || api.uncompressed_length((const char *)src, srclen, &len) != SNAPPY_OK || len != n)
        return -1;
    return api.uncompress((const char *)src, srclen, (char *)dst, &len) == SNAPPY_OK && len == n ? 0 : -1;
}

const ent_codec_desc ent_snappy_codec = {
    .id = ENT_SNAPPY,
    .name = "snappy",
    .encode = snappy_encode,
    .decode = snappy_decode,
    .missing = snappy_missing,
};
