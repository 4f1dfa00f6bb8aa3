/* test_io.c — sources and sinks (include/ckpz.h): the memory adapter's three kinds of
 * room, short reads and bounds; the file-descriptor adapters and what ckpz_sink_fd can
 * patch (a file written from its start, never a pipe, an appending file or one written
 * from the middle); failures that keep their errno; the calls that take a source and a
 * sink giving the bytes of the callback calls, with the hooks the ends carry winning
 * over the deprecated params fields, which still work alone; and the struct_size check
 * that catches a source or sink nobody initialised. The fd source and sink on regular
 * files, the sink written behind by the library's pump where the call leaves a core
 * free (-T1): the same bytes and counts, a read error and a write error in the
 * write-behind thread (a file size limit) reported with their errno, the thread
 * joined. The pump itself (ckpz_pump_*): writes of any size land in order, a drain
 * writes the buffer being filled, a full device's ENOSPC and a read-ahead's EBADF come
 * back, and stopping with buffers queued or unread returns; lent buffers
 * (ckpz_pump_lend) land in the order of the writes among copies, never more than all
 * but one lent. A sink that lends (ckpz_sink_lender): a restore decoding into its room
 * gives the plain sink's bytes, asks no room for copy frames, and fails cleanly on a
 * corrupt chunk with room lent. Compression into lent room: test_io_lend.c. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define CKPZ_DISABLE_DEPRECATE_WARNINGS /* checks that the deprecated params fields still work */
#define CKPZ_EXPERIMENTAL               /* ckpz_pump_* */
#include "ckpz.h"
#include "memfile.h"
#include "testutil.h"

static void test_mem_source(void)
{
    const char text[] = "0123456789abcdef";
    ckpz_mem m = mem_in(text, 16, 5);
    char buf[32];
    CHECK(ckpz_mem_read(&m, buf, 32) == 5 && !memcmp(buf, "01234", 5)); /* step caps a read */
    m.step = 0;
    CHECK(ckpz_mem_read(&m, buf, 32) == 11 && !memcmp(buf, "56789abcdef", 11) && m.pos == 16);
    CHECK(ckpz_mem_read(&m, buf, 32) == 0); /* the end */
    CHECK(ckpz_mem_pread(&m, buf, 4, 12) == 0 && !memcmp(buf, "cdef", 4));
    CHECK(ckpz_mem_pread(&m, buf, 0, 16) == 0);  /* empty, at the end */
    CHECK(ckpz_mem_pread(&m, buf, 5, 12) == -1); /* past the end */
    CHECK(ckpz_mem_pread(&m, buf, 1, UINT64_MAX) == -1);
    ckpz_source s;
    ckpz_source_mem(&s, &m);
    CHECK(s.struct_size == sizeof s && s.read == ckpz_mem_read && s.pread == ckpz_mem_pread && s.opaque == &m &&
          s.size == 16 && !s.progress);
}

static void test_mem_sinks(void)
{
    uint8_t room[8];
    /* fixed: a write past the caller's buffer fails whole and says so */
    ckpz_mem f = mem_out(room, sizeof room);
    CHECK(ckpz_mem_write(&f, "abcde", 5) == 0 && f.size == 5 && !f.full);
    CHECK(ckpz_mem_write(&f, "fghij", 5) == -1 && f.size == 5 && f.full);
    CHECK(ckpz_mem_patch(&f, "XY", 2, 3) == 0 && !memcmp(room, "abcXY", 5));
    CHECK(ckpz_mem_patch(&f, "XY", 2, 4) == -1); /* only bytes already written */
    CHECK(ckpz_mem_pread(&f, room, 0, 5) == 0 && ckpz_mem_pread(&f, room, 1, 5) == -1);
    ckpz_sink k;
    ckpz_sink_mem(&k, &f);
    CHECK(k.struct_size == sizeof k && k.write == ckpz_mem_write && k.patch == ckpz_mem_patch && k.opaque == &f);

    /* grown: everything kept, in order */
    ckpz_mem g = {.grow = 1};
    uint8_t chunk[1000];
    for (int i = 0; i < 100; i++) {
        memset(chunk, i, sizeof chunk);
        CHECK(ckpz_mem_write(&g, chunk, sizeof chunk) == 0);
    }
    CHECK(g.size == 100000 && g.capacity >= g.size && !g.full);
    int ok = 1;
    for (size_t i = 0; i < g.size; i++) ok &= ((uint8_t *)g.data)[i] == (uint8_t)(i / 1000);
    CHECK(ok);
    free(g.data);

    /* counted past the buffer up to a limit: the size an output needs, nothing written past room */
    uint8_t guard[16];
    memset(guard, 0xee, sizeof guard);
    ckpz_mem c = {.data = guard, .capacity = 8, .limit = 20};
    CHECK(ckpz_mem_write(&c, "abcdef", 6) == 0);
    CHECK(ckpz_mem_write(&c, "ghijkl", 6) == 0 && c.size == 12 && !c.full); /* straddles: counted only */
    CHECK(ckpz_mem_patch(&c, "Z", 1, 11) == 0 && ckpz_mem_patch(&c, "Y", 1, 0) == 0);
    CHECK(ckpz_mem_write(&c, "mnopqrstu", 9) == -1 && c.full && c.size == 12);
    CHECK(!memcmp(guard, "Ybcdef", 6) && guard[8] == 0xee && guard[11] == 0xee);
    CHECK(ckpz_mem_pread(&c, guard, 1, 8) == -1); /* not kept */

    /* no room at all and no limit: a counter */
    ckpz_mem n = {.limit = SIZE_MAX};
    CHECK(ckpz_mem_write(&n, guard, 16) == 0 && ckpz_mem_write(&n, guard, 16) == 0 && n.size == 32);
}

/* A temporary file's descriptor (unlinked at once). */
static int temp_fd(int flags)
{
    char path[] = "/tmp/ckpz_test_io_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0) {
        unlink(path);
        if (flags) fcntl(fd, F_SETFL, flags);
    }
    return fd;
}

static void test_fd(void)
{
    ckpz_fd f = {temp_fd(0), 0, 0};
    ckpz_sink k;
    ckpz_source s;
    char buf[16];
    CHECK(f.fd >= 0);
    ckpz_sink_fd(&k, &f);
    CHECK(k.write == ckpz_fd_write && k.patch == ckpz_fd_patch && k.opaque == &f);
    CHECK(ckpz_fd_write(&f, "hello world", 11) == 0 && f.bytes == 11);
    CHECK(ckpz_fd_patch(&f, "W", 1, 6) == 0 && f.bytes == 12);
    CHECK(ckpz_fd_write(&f, "!", 1) == 0); /* a patch leaves the write position alone */
    ckpz_source_fd(&s, &f, 12);
    CHECK(s.read == ckpz_fd_read && s.pread == ckpz_fd_pread && s.size == 12);
    CHECK(ckpz_fd_pread(&f, buf, 12, 0) == 0 && !memcmp(buf, "hello World!", 12));
    CHECK(ckpz_fd_pread(&f, buf, 2, 11) == -1 && f.error == 0); /* past the end: short, no errno */
    ckpz_sink_fd(&k, &f); /* now written from the middle: offsets would be off */
    CHECK(k.write && !k.patch);
    close(f.fd);

    f = (ckpz_fd){temp_fd(O_APPEND), 0, 0}; /* pwrite ignores offsets there */
    ckpz_sink_fd(&k, &f);
    CHECK(k.write && !k.patch);
    close(f.fd);

    int p[2];
    CHECK(pipe(p) == 0);
    f = (ckpz_fd){p[1], 0, 0};
    ckpz_sink_fd(&k, &f);
    CHECK(k.write && !k.patch);
    ckpz_fd r = {p[0], 0, 0};
    ckpz_source_fd(&s, &r, CKPZ_SIZE_UNKNOWN);
    CHECK(s.read && !s.pread);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    CHECK(ckpz_fd_write(&f, "x", 1) == -1 && f.error == EPIPE && errno == EPIPE); /* a real errno stays */
    close(p[1]);

    int full = open("/dev/full", O_WRONLY);
    if (full >= 0) {
        f = (ckpz_fd){full, 0, 0};
        CHECK(ckpz_fd_write(&f, "x", 1) == -1 && f.error == ENOSPC);
        CHECK(ckpz_fd_write(&f, "x", 1) == -1 && f.error == ENOSPC); /* the first failure is kept */
        close(full);
    }
}

/* A BF16 tensor as a raw dump and a slightly changed copy (a base and its successor). */
static uint8_t *bf16(size_t n, const uint8_t *like)
{
    uint8_t *p = malloc(n + 1); /* an odd n: the last value's second byte */
    for (size_t i = 0; i < n; i += 2) {
        float v = (float)(rng_normal() * 0.02);
        uint32_t b;
        memcpy(&b, &v, 4);
        p[i] = (uint8_t)(b >> 16);
        p[i + 1] = (uint8_t)(b >> 24);
        if (like && rng() % 8) memcpy(p + i, like + i, 2);
    }
    return p;
}

static int count_progress(void *opaque, uint64_t done, uint64_t total)
{
    (void)done;
    (void)total;
    ++*(int *)opaque;
    return 0;
}

static int stop_progress(void *opaque, uint64_t done, uint64_t total)
{
    (void)opaque;
    (void)total;
    return done > 0;
}

static int g_patches;
static int counting_patch(void *m, const void *buf, size_t n, uint64_t off)
{
    g_patches++;
    return ckpz_mem_patch(m, buf, n, off);
}

static void test_calls(void)
{
    size_t n = 300000;
    uint8_t *base = bf16(n, NULL), *src = bf16(n, base);
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_BF16;
    p.chunk_size = 65536;
    p.threads = 2;
    p.base = base;
    p.base_size = n;
    p.base_name = "base.bin";
    void *want = NULL;
    size_t wlen = 0;
    CHECK(ckpz_compress_buffer(ctx, &p, src, n, &want, &wlen) == CKPZ_OK);

    /* into a file through the fd sink (which patches the base frame): the same bytes */
    ckpz_fd out = {temp_fd(0), 0, 0};
    ckpz_mem in = mem_in(src, n, 4093);
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &in);
    ckpz_sink_fd(&k, &out);
    int calls = 0;
    s.progress = count_progress;
    s.progress_opaque = &calls;
    ckpz_stats st = {.struct_size = sizeof st};
    CHECKF(ckpz_compress_io(ctx, &p, &s, &k, &st) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    CHECK(k.patch && st.compressed_bytes == wlen && out.bytes > wlen && calls > 0); /* written, then patched */
    uint8_t *got = malloc(wlen + 1);
    CHECK(pread(out.fd, got, wlen + 1, 0) == (ssize_t)wlen && !memcmp(got, want, wlen));

    /* back through the fd source, from the file's start: sequential, then random access */
    ckpz_fd back = {out.fd, 0, 0};
    ckpz_mem res = {.grow = 1};
    CHECK(lseek(back.fd, 0, SEEK_SET) == 0);
    ckpz_source_fd(&s, &back, wlen);
    ckpz_sink_mem(&k, &res);
    CHECKF(ckpz_decompress_io(ctx, &p, &s, &k, &st) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    CHECK(res.size == n && !memcmp(res.data, src, n) && back.bytes == wlen);
    CHECK(lseek(back.fd, 0, SEEK_SET) == 0);
    CHECK(ckpz_decompress_io(ctx, &p, &s, NULL, &st) == CKPZ_OK && st.original_bytes == n); /* verify only */
    ckpz_archive *a = NULL;
    CHECKF(ckpz_archive_open_io(ctx, &p, &s, &a) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    memset(res.data, 0, n);
    ckpz_span span = {0, n, res.data};
    CHECK(a && ckpz_archive_read(ctx, a, &span, 1) == CKPZ_OK && !memcmp(res.data, src, n));
    ckpz_archive_close(a);
    /* the source's progress stops archive reads, and wins over the params' */
    p.progress = count_progress;
    p.progress_opaque = &calls;
    s.progress = stop_progress;
    calls = 0;
    CHECK(ckpz_archive_open_io(ctx, &p, &s, &a) == CKPZ_OK);
    CHECK(a && ckpz_archive_read(ctx, a, &span, 1) == CKPZ_ERR_ABORTED && calls == 0);
    ckpz_archive_close(a);
    s.pread = NULL;
    CHECK(ckpz_archive_open_io(ctx, &p, &s, &a) == CKPZ_ERR_PARAM && strstr(ckpz_ctx_message(ctx), "pread"));
    p.progress = NULL;
    close(out.fd);

    /* the sink's patch wins over the deprecated params field, which works alone */
    ckpz_mem m1 = {.grow = 1}, m2 = {.grow = 1};
    p.patch = counting_patch; /* into m2, which is still empty in the first run: it would fail there */
    p.patch_opaque = &m2;
    for (int how = 0; how < 2; how++) {
        in = mem_in(src, n, 0);
        ckpz_source_mem(&s, &in);
        ckpz_sink_mem(&k, how ? &m2 : &m1);
        if (how) k.patch = NULL; /* the params' then */
        g_patches = 0;
        CHECKF(ckpz_compress_io(ctx, &p, &s, &k, NULL) == CKPZ_OK, "%d: %s", how, ckpz_ctx_message(ctx));
        CHECK(g_patches == how);
    }
    CHECK(m1.size == wlen && m2.size == wlen && !memcmp(m1.data, want, wlen) && !memcmp(m2.data, want, wlen));
    free(m1.data);
    free(m2.data);
    p.patch = NULL;

    /* a source or sink that was never initialised is refused, not trusted */
    ckpz_source junk_s;
    memset(&junk_s, 0x5a, sizeof junk_s);
    ckpz_sink_init(&k);
    CHECK(ckpz_compress_io(ctx, &p, &junk_s, &k, NULL) == CKPZ_ERR_PARAM &&
          strstr(ckpz_ctx_message(ctx), "ckpz_source_init"));
    ckpz_source_init(&s);
    ckpz_sink junk_k = {sizeof(size_t), 0, 0, 0}; /* older than any version */
    CHECK(ckpz_decompress_io(ctx, &p, &s, &junk_k, NULL) == CKPZ_ERR_PARAM &&
          strstr(ckpz_ctx_message(ctx), "ckpz_sink_init"));
    CHECK(ckpz_compress_io(ctx, &p, &s, &k, NULL) == CKPZ_ERR_PARAM); /* no read callback */

    free(got);
    free(res.data);
    ckpz_free(want);
    ckpz_ctx_free(ctx);
    free(base);
    free(src);
}

/* Compresses (or restores) the regular file in into out by the fd adapters on one
 * coding thread; the call's error, *fin and *fout the adapters' counts and errnos. */
static ckpz_error fd_call(int restore, int in, int out, const void *base, size_t bn, ckpz_fd *fin, ckpz_fd *fout)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    p.format = CKPZ_INPUT_RAW;
    p.raw_dtype = CKPZ_DTYPE_BF16;
    p.threads = 1;
    p.base = base;
    p.base_size = bn;
    ckpz_source s;
    ckpz_sink k;
    *fin = (ckpz_fd){in, 0, 0};
    *fout = (ckpz_fd){out, 0, 0};
    lseek(in, 0, SEEK_SET);
    ckpz_source_fd(&s, fin, (uint64_t)lseek(in, 0, SEEK_END));
    lseek(in, 0, SEEK_SET);
    ckpz_sink_fd(&k, fout);
    ckpz_error e = restore ? ckpz_decompress_io(ctx, &p, &s, &k, NULL) : ckpz_compress_io(ctx, &p, &s, &k, NULL);
    if (e && getenv("CKPZ_TEST_VERBOSE")) fprintf(stderr, "test_io: %s\n", ckpz_ctx_message(ctx));
    ckpz_ctx_free(ctx);
    return e;
}

static void test_fd_pumped(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    size_t n = 13u << 20; /* more buffers than either pump has */
    uint8_t *base = bf16(n, NULL), *src = bf16(n, base), *back = malloc(n);
    int in = temp_fd(0), z = temp_fd(0), out = temp_fd(0);
    ckpz_fd a, b;
    CHECK(in >= 0 && z >= 0 && out >= 0 && back);
    ckpz_fd w = {in, 0, 0};
    CHECK(ckpz_fd_write(&w, src, n) == 0);
    if (cores < 2) printf("test_io: one core: the fd adapters are not pumped here\n");
    /* with a base: the sink's patch (of the base frame) comes after the pump drained */
    CHECK(fd_call(0, in, z, base, n, &a, &b) == CKPZ_OK);
    CHECK(a.bytes == n && a.error == 0 && b.error == 0);
    CHECK(lseek(z, 0, SEEK_END) > 0 && b.bytes >= (uint64_t)lseek(z, 0, SEEK_END)); /* and the patch */
    CHECK(fd_call(1, z, out, base, n, &a, &b) == CKPZ_OK);
    CHECK(b.bytes == n && lseek(out, 0, SEEK_END) == (off_t)n);
    ckpz_fd r = {out, 0, 0};
    CHECK(ckpz_fd_pread(&r, back, n, 0) == 0 && !memcmp(back, src, n));

    /* a read error while a write-behind runs: a descriptor open for writing only */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", z);
    int wo = open(proc, O_WRONLY);
    if (wo >= 0) {
        int junk = temp_fd(0);
        CHECK(fd_call(1, wo, junk, base, n, &a, &b) == CKPZ_ERR_READ && a.error == EBADF);
        close(junk);
        close(wo);
    }

    /* a write error in the write-behind thread: a file size limit (EFBIG) part way, and
     * in the last bytes, which only the drain at the end of the call sees */
    size_t limits[2] = {3u << 20, n - 1000};
    for (int i = 0; i < 2; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            struct rlimit lim = {limits[i], limits[i]};
            signal(SIGXFSZ, SIG_IGN);
            setrlimit(RLIMIT_FSIZE, &lim);
            int o = temp_fd(0);
            ckpz_error e = fd_call(1, z, o, base, n, &a, &b);
            _exit(e == CKPZ_ERR_WRITE && b.error == EFBIG && b.bytes == limits[i] ? 0 : 1);
        }
        int st = 0;
        CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(in);
    close(z);
    close(out);
    free(back);
    free(src);
    free(base);
}

/* ckpz_pump_* called directly: buffers of 64 KiB, writes that straddle them */
static void test_pump(void)
{
    size_t n = (5u << 20) + 777, sz = 64u << 10;
    unsigned char *src = bf16(n, NULL), *back = malloc(n);
    int f = temp_fd(0);
    CHECK(f >= 0 && back);
    ckpz_fd io = {f, 0, 0};
    ckpz_pump *p = ckpz_pump_start(&io, 1, 2, sz, 0);
    CHECK(p != NULL);
    size_t at = 0, step = 1;
    while (at < n) { /* 1, 3, 9, ... bytes: within a buffer, across one, across several */
        size_t k = step < n - at ? step : n - at;
        CHECK(ckpz_pump_write(p, src + at, k) == 0);
        at += k;
        step = step * 3 % (3 * sz) + 1;
    }
    CHECK(ckpz_pump_drain(p) == 0); /* the last, partial buffer too */
    CHECK(lseek(f, 0, SEEK_END) == (off_t)n);
    CHECK(ckpz_pump_write(p, src, 100) == 0 && ckpz_pump_drain(p) == 0 && lseek(f, 0, SEEK_END) == (off_t)n + 100);
    ckpz_pump_stop(p);
    CHECK(io.bytes == n + 100 && io.error == 0);
    ckpz_fd r = {f, 0, 0};
    CHECK(ckpz_fd_pread(&r, back, n, 0) == 0 && !memcmp(back, src, n));

    /* read ahead: the same bytes, then 0 past the end; stopped with buffers unread */
    CHECK(lseek(f, 0, SEEK_SET) == 0);
    ckpz_fd rd = {f, 0, 0};
    p = ckpz_pump_start(&rd, 0, 3, sz, 40);
    CHECK(p != NULL);
    size_t got = 0, len = 0;
    unsigned char *b, *all = malloc(n + 100);
    CHECK(all != NULL);
    while ((b = ckpz_pump_next(p, &len)) && len && got + len <= n + 100) {
        memcpy(all + got, b, len);
        got += len;
    }
    CHECK(got == n + 100 && !memcmp(all, src, n) && !memcmp(all + n, src, 100));
    free(all);
    CHECK(b != NULL && len == 0 && got == n + 100 && ckpz_pump_error(p) == 0);
    ckpz_pump_stop(p);
    CHECK(rd.bytes == n + 100);
    CHECK(lseek(f, 0, SEEK_SET) == 0);
    rd = (ckpz_fd){f, 0, 0};
    p = ckpz_pump_start(&rd, 0, 2, sz, 0);
    CHECK(p && ckpz_pump_next(p, &len) && len == sz);
    ckpz_pump_stop(p); /* the thread waits for a free buffer: it must still return */

    /* a read error in the read-ahead thread: a descriptor open for writing only */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", f);
    int wo = open(proc, O_WRONLY);
    if (wo >= 0) {
        ckpz_fd w = {wo, 0, 0};
        p = ckpz_pump_start(&w, 0, 2, sz, 0);
        CHECK(p && ckpz_pump_next(p, &len) == NULL && ckpz_pump_error(p) == EBADF);
        ckpz_pump_stop(p);
        CHECK(w.error == EBADF);
        close(wo);
    }

    /* a write error in the write-behind thread: a full device */
    int full = open("/dev/full", O_WRONLY);
    if (full >= 0) {
        ckpz_fd w = {full, 0, 0};
        p = ckpz_pump_start(&w, 1, 2, sz, 0);
        CHECK(p != NULL);
        int bad = 0;
        for (at = 0; at < n && !bad; at += 1000) bad = ckpz_pump_write(p, src + at, 1000) != 0;
        CHECK(bad && ckpz_pump_drain(p) == -1 && ckpz_pump_error(p) == ENOSPC);
        ckpz_pump_stop(p);
        CHECK(w.error == ENOSPC);
        /* stopped with buffers queued: what is not written is dropped, the call returns */
        w = (ckpz_fd){full, 0, 0};
        p = ckpz_pump_start(&w, 1, 4, sz, 0);
        CHECK(p != NULL);
        int early = ckpz_pump_write(p, src, 3 * sz); /* -1 once the thread met ENOSPC: timing */
        CHECK(early == 0 || ckpz_pump_error(p) == ENOSPC);
        ckpz_pump_stop(p);
        close(full);
    }
    close(f);
    free(back);
    free(src);
}

/* ckpz_pump_lend: lent buffers written back among copies, in the order of the writes;
 * at most nbuf - 1 lent at once (the next lend declines, never waits); small and large
 * requests declined; nothing lent after a write error. */
static void test_pump_lend(void)
{
    size_t sz = 64u << 10, n = 60 * sz, at = 0;
    unsigned char *src = bf16(n, NULL), *back = malloc(n);
    int f = temp_fd(0);
    CHECK(f >= 0 && back);
    ckpz_fd io = {f, 0, 0};
    ckpz_pump *p = ckpz_pump_start(&io, 1, 4, sz, 0);
    CHECK(p && !ckpz_pump_lend(p, sz / 4 - 1) && !ckpz_pump_lend(p, sz + 1));
    for (unsigned g = 0; at < n - 8 * sz; g++) {
        unsigned k = g % 4 == 3 ? 3 : g % 4 + 1; /* lent ahead: 1, 2, 3, 3, 1, ... */
        unsigned char *lent[3];
        size_t len[3];
        for (unsigned i = 0; i < k; i++) {
            len[i] = sz / 4 + (g * 7919 + i * 104729) % (sz - sz / 4 + 1);
            CHECK((lent[i] = ckpz_pump_lend(p, len[i])) != NULL);
        }
        if (k == 3) CHECK(ckpz_pump_lend(p, sz) == NULL); /* the last one not lent stays */
        for (unsigned i = 0; i < k; i++) {
            size_t c = (g * 31 + i * 977) % (2 * sz) * (g % 3 != 1); /* copies, across buffers too */
            CHECK(ckpz_pump_write(p, src + at, c) == 0);
            at += c;
            memcpy(lent[i], src + at, len[i]); /* decoded there */
            CHECK(ckpz_pump_write(p, lent[i], len[i]) == 0);
            at += len[i];
        }
    }
    CHECK(ckpz_pump_write(p, src + at, 100) == 0 && ckpz_pump_drain(p) == 0);
    at += 100;
    ckpz_pump_stop(p);
    ckpz_fd r = {f, 0, 0};
    CHECK(io.bytes == at && lseek(f, 0, SEEK_END) == (off_t)at);
    CHECK(ckpz_fd_pread(&r, back, at, 0) == 0 && !memcmp(back, src, at));
    close(f);

    int full = open("/dev/full", O_WRONLY);
    if (full >= 0) {
        ckpz_fd w = {full, 0, 0};
        p = ckpz_pump_start(&w, 1, 4, sz, 0);
        unsigned char *b = p ? ckpz_pump_lend(p, sz) : NULL;
        if (b) memset(b, 7, sz);
        CHECK(b && ckpz_pump_write(p, b, sz) == 0);
        CHECK(ckpz_pump_drain(p) == -1 && ckpz_pump_error(p) == ENOSPC);
        CHECK(ckpz_pump_lend(p, sz) == NULL && ckpz_pump_write(p, src, 10) == -1);
        ckpz_pump_stop(p);
        close(full);
    }
    free(back);
    free(src);
}

int main(void)
{
    test_mem_source();
    test_mem_sinks();
    test_fd();
    test_calls();
    test_fd_pumped();
    test_pump();
    test_pump_lend();
    return test_summary("test_io");
}
