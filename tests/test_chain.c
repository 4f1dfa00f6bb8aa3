/* test_chain.c — the chain of bases (ckpz_chain_open, ckpz_base_locate, ckpz_same_file)
 * on real files in a temporary directory: a chain through a delta file found by its
 * recorded name plus ".ckpz" down to an original, restored from the bottom up; a
 * stand-alone bottom; a missing link, a cycle by name and a cycle through a symbolic
 * link (same device and inode, another name); the limit of CKPZ_CHAIN_MAX delta files,
 * reached and passed; names that must not be followed; a file that cannot be opened and
 * one whose header is cut. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpz.h"
#include "testutil.h"

static char dir[64];

static char *at(const char *name)
{
    static char buf[4][256];
    static int k;
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", dir, name);
    return b;
}

static void put(const char *name, const void *p, size_t n)
{
    FILE *f = fopen(at(name), "wb");
    CHECK(f && fwrite(p, 1, n, f) == n);
    if (f) fclose(f);
}

static uint8_t *get(const char *name, size_t *n)
{
    FILE *f = fopen(at(name), "rb");
    uint8_t *p = NULL;
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc(*n ? *n : 1);
    if (fread(p, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return p;
}

/* name: src coded against base (NULL: stand-alone), recording base_name and, as the
 * CLI does, the delta files behind the base (depth). */
static void ckpz_file(ckpz_ctx *ctx, const char *name, const uint8_t *src, size_t n, const uint8_t *base, size_t bn,
                      const char *base_name, uint32_t depth)
{
    ckpz_params p;
    ckpz_params_init(&p);
    p.threads = 1;
    p.base = base;
    p.base_size = base ? bn : 0;
    p.base_name = base_name;
    p.base_depth = depth;
    void *z = NULL;
    size_t zl = 0;
    CHECKF(ckpz_compress_buffer(ctx, &p, src, n, &z, &zl) == CKPZ_OK, "%s: %s", name, ckpz_ctx_message(ctx));
    put(name, z, zl);
    ckpz_free(z);
}

static char *message(const ckpz_chain *c)
{
    static char m[8192];
    size_t n = ckpz_chain_message(c, m, sizeof m);
    CHECK(n == strlen(m));
    return m;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/ckpz_test_chain_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    ckpz_ctx *ctx = ckpz_ctx_create();
    enum { N = 50000 };
    uint8_t *a = malloc(N), *b = malloc(N), *c = malloc(N);
    for (size_t i = 0; i < N; i++) {
        a[i] = (uint8_t)(rng() % 7);
        b[i] = rng() % 5 ? a[i] : (uint8_t)rng();
        c[i] = rng() % 5 ? b[i] : (uint8_t)rng();
    }
    put("a.bin", a, N);
    ckpz_file(ctx, "b.bin.ckpz", b, N, a, N, "a.bin", 0);
    ckpz_file(ctx, "c.ckpz", c, N, b, N, "b.bin", 1); /* found as b.bin.ckpz */

    /* the chain, and a restore through it from the bottom up */
    ckpz_chain *ch = NULL;
    ckpz_base_info info = {.struct_size = sizeof info};
    CHECKF(ckpz_chain_open(ctx, at("c.ckpz"), &ch) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    CHECK(ckpz_chain_length(ch) == 3 && !strcmp(ckpz_chain_path(ch, 0), at("c.ckpz")) &&
          !strcmp(ckpz_chain_path(ch, 1), at("b.bin.ckpz")) && !strcmp(ckpz_chain_path(ch, 2), at("a.bin")));
    CHECK(ckpz_chain_link(ch, 0, &info) == 1 && info.needed && info.depth == 2 && !strcmp(info.name, "b.bin"));
    CHECK(ckpz_chain_link(ch, 1, &info) == 1 && info.needed && info.depth == 1 && !strcmp(info.name, "a.bin"));
    CHECK(ckpz_chain_link(ch, 2, &info) == 0 && !info.needed && ckpz_chain_link(ch, 3, &info) == -1);
    CHECK(ckpz_chain_path(ch, 3) == NULL && !message(ch)[0]);
    size_t n = 0;
    uint8_t *cur = get("a.bin", &n);
    for (size_t i = ckpz_chain_length(ch) - 1; i-- > 0;) {
        size_t zl;
        const char *path = ckpz_chain_path(ch, i);
        uint8_t *z = get(path + strlen(dir) + 1, &zl), *out = malloc(N);
        ckpz_params p;
        ckpz_params_init(&p);
        p.base = cur;
        p.base_size = n;
        CHECKF(ckpz_decompress_buffer(ctx, &p, z, zl, out, N) == CKPZ_OK, "%s: %s", path, ckpz_ctx_message(ctx));
        free(z);
        free(cur);
        cur = out;
        n = N;
    }
    CHECK(n == N && !memcmp(cur, c, N));
    free(cur);
    ckpz_chain_free(ch);

    /* a stand-alone .ckpz is a chain of one */
    ckpz_file(ctx, "s.ckpz", a, N, NULL, 0, NULL, 0);
    CHECK(ckpz_chain_open(ctx, at("s.ckpz"), &ch) == CKPZ_OK && ckpz_chain_length(ch) == 1 &&
          ckpz_chain_link(ch, 0, &info) == 1 && !info.needed);
    ckpz_chain_free(ch);

    /* a missing link: the walk ends at the file that needs it, which the message names */
    rename(at("a.bin"), at("a.moved"));
    CHECK(ckpz_chain_open(ctx, at("c.ckpz"), &ch) == CKPZ_ERR_BASE && ckpz_chain_length(ch) == 2);
    char want[512];
    snprintf(want, sizeof want, "%s: is a delta file whose base (%d bytes, CRC-32C ", at("b.bin.ckpz"), N);
    CHECKF(!strncmp(message(ch), want, strlen(want)) && strstr(message(ch), ", 'a.bin') is not beside it") &&
               !strcmp(ckpz_ctx_message(ctx), message(ch)),
           "%s", message(ch));
    ckpz_chain_free(ch);
    rename(at("a.moved"), at("a.bin"));

    /* cycles: by name, and through a symbolic link (another name, the same file) */
    ckpz_file(ctx, "x.ckpz", a, N, b, N, "y.ckpz", 0);
    ckpz_file(ctx, "y.ckpz", b, N, a, N, "x.ckpz", 0);
    CHECK(ckpz_chain_open(ctx, at("x.ckpz"), &ch) == CKPZ_ERR_BASE && ckpz_chain_length(ch) == 2);
    snprintf(want, sizeof want, "%s: the chain of delta files comes back to this file (a cycle)", at("x.ckpz"));
    CHECKF(!strcmp(message(ch), want), "%s", message(ch));
    ckpz_chain_free(ch);
    ckpz_file(ctx, "l.ckpz", a, N, b, N, "m.ckpz", 0);
    CHECK(symlink("l.ckpz", at("m.ckpz")) == 0);
    CHECK(ckpz_chain_open(ctx, at("l.ckpz"), &ch) == CKPZ_ERR_BASE && ckpz_chain_length(ch) == 1 &&
          strstr(message(ch), "m.ckpz: the chain of delta files comes back"));
    ckpz_chain_free(ch);
    CHECK(ckpz_same_file(at("l.ckpz"), at("m.ckpz")) == 1 && ckpz_same_file(at("l.ckpz"), at("x.ckpz")) == 0 &&
          ckpz_same_file(at("l.ckpz"), at("none")) == 0);

    /* the limit: CKPZ_CHAIN_MAX delta files and a bottom walk; one more does not */
    char name[32], next[32];
    ckpz_file(ctx, "k0.ckpz", a, 100, NULL, 0, NULL, 0);
    for (int i = 1; i <= CKPZ_CHAIN_MAX + 1; i++) {
        snprintf(name, sizeof name, "k%d.ckpz", i);
        snprintf(next, sizeof next, "k%d.ckpz", i - 1);
        ckpz_file(ctx, name, a, 100, a, 100, next, (uint32_t)i - 1);
    }
    snprintf(name, sizeof name, "k%d.ckpz", CKPZ_CHAIN_MAX);
    CHECKF(ckpz_chain_open(ctx, at(name), &ch) == CKPZ_OK && ckpz_chain_length(ch) == CKPZ_CHAIN_MAX + 1, "%s",
           ckpz_ctx_message(ctx));
    ckpz_chain_free(ch);
    snprintf(name, sizeof name, "k%d.ckpz", CKPZ_CHAIN_MAX + 1);
    CHECK(ckpz_chain_open(ctx, at(name), &ch) == CKPZ_ERR_BASE && ckpz_chain_length(ch) == CKPZ_CHAIN_MAX + 1);
    snprintf(want, sizeof want, "%s: chain of delta files longer than %d", at("k1.ckpz"), CKPZ_CHAIN_MAX);
    CHECKF(!strcmp(message(ch), want), "%s", message(ch));
    ckpz_chain_free(ch);

    /* names that are data from the file: only a plain name beside it is followed */
    char *p = ckpz_base_locate(at("c.ckpz"), "a.bin");
    CHECK(p && !strcmp(p, at("a.bin")));
    ckpz_free(p);
    p = ckpz_base_locate(at("c.ckpz"), "b.bin"); /* the name, else its compressed form */
    CHECK(p && !strcmp(p, at("b.bin.ckpz")));
    ckpz_free(p);
    const char *refused[] = {"", ".", "..", "../a.bin", "./a.bin", "sub/a.bin", "nothing"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        CHECKF(!ckpz_base_locate(at("c.ckpz"), refused[i]), "'%s' followed", refused[i]);
    CHECK(mkdir(at("dir.bin"), 0700) == 0 && !ckpz_base_locate(at("c.ckpz"), "dir.bin"));

    /* a file that cannot be opened; a header cut short */
    CHECK(ckpz_chain_open(ctx, at("none.ckpz"), &ch) == CKPZ_ERR_READ && ckpz_chain_length(ch) == 0 &&
          strstr(message(ch), "none.ckpz: No such file or directory"));
    ckpz_chain_free(ch);
    size_t zl;
    uint8_t *z = get("c.ckpz", &zl);
    put("cut.ckpz", z, 20);
    free(z);
    CHECK(ckpz_chain_open(ctx, at("cut.ckpz"), &ch) == CKPZ_ERR_TRUNCATED && strstr(message(ch), "cut.ckpz: "));
    ckpz_chain_free(ch);
    CHECK(ckpz_chain_open(ctx, NULL, &ch) == CKPZ_ERR_PARAM && !ch);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    free(a);
    free(b);
    free(c);
    ckpz_ctx_free(ctx);
    return test_summary("test_chain");
}
