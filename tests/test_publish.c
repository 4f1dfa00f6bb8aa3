/* test_publish.c — lib/file/publish.c (ckpz_publish_*): a file and a directory published
 * under their names only by the commit, an existing name refused without REPLACE (and
 * kept), replaced with it (a directory exchanged, the old one removed), every failure
 * and abort removing the temporary output, the names ckpz_publish_is_temp recognises, and
 * the sweep removing only a dead writer's leftover of the same name; the replaced file's
 * release off the caller's thread (lib/file/release.c): what it holds, the old file kept
 * readable until released, and a fork's child not keeping it. Runs in a fresh directory
 * under $TMPDIR. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CKPZ_EXPERIMENTAL /* ckpz_publish_* */
#include "ckpz.h"
#include "file/release.h"
#include "testutil.h"

static char g_dir[200];

static const char *at(const char *name)
{
    static char buf[4][1024];
    static int k;
    char *b = buf[k++ & 3];
    snprintf(b, 1024, "%s/%s", g_dir, name);
    return b;
}

/* Entries of g_dir whose name starts with prefix. */
static int count(const char *prefix)
{
    DIR *d = opendir(g_dir);
    struct dirent *de;
    int n = 0;
    while (d && (de = readdir(d)))
        if (!strncmp(de->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) fputs(text, f), fclose(f);
}

static int has(const char *path, const char *text)
{
    char b[64] = "";
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    size_t n = fread(b, 1, sizeof b - 1, f);
    fclose(f);
    b[n] = '\0';
    return strcmp(b, text) == 0;
}

static ckpz_publish *open_file(ckpz_ctx *ctx, const char *name, unsigned flags, const char *text)
{
    ckpz_publish *p = NULL;
    CHECKF(ckpz_publish_open(ctx, name, flags, &p) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
    if (!p) return NULL;
    CHECK(write(ckpz_publish_fd(p), text, strlen(text)) == (ssize_t)strlen(text));
    return p;
}

static unsigned host_hash(void)
{
    char host[256] = "";
    unsigned h = 2166136261u;
    gethostname(host, sizeof host - 1);
    for (const unsigned char *c = (const unsigned char *)host; *c; c++) h = (h ^ *c) * 16777619u;
    return h;
}

static void test_files(ckpz_ctx *ctx)
{
    for (unsigned anon = 0; anon <= CKPZ_PUBLISH_ANONYMOUS; anon += CKPZ_PUBLISH_ANONYMOUS) {
        const char *out = at("out.bin");
        unlink(out);
        ckpz_publish *p = open_file(ctx, out, anon, "one");
        CHECK(access(out, F_OK) != 0); /* nothing under the name before the commit */
        if (!anon) {
            CHECK(count(".out.bin.ckpz-") == 1);
            CHECK(ckpz_publish_is_temp(ckpz_publish_temp(p)));
        }
        CHECK(ckpz_publish_commit(ctx, p, CKPZ_PUBLISH_DURABLE) == CKPZ_OK);
        CHECK(has(out, "one") && count(".out.bin.") == 0);
        /* an existing name: refused without REPLACE, the file kept, the temporary gone */
        p = open_file(ctx, out, anon, "two");
        CHECK(ckpz_publish_commit(ctx, p, 0) == CKPZ_ERR_WRITE && errno == EEXIST);
        CHECKF(strstr(ckpz_ctx_message(ctx), "out.bin: appeared while writing; not overwritten") != NULL, "%s",
               ckpz_ctx_message(ctx));
        CHECK(has(out, "one") && count(".out.bin.") == 0);
        /* replaced with it */
        p = open_file(ctx, out, anon, "three");
        CHECK(ckpz_publish_commit(ctx, p, CKPZ_PUBLISH_REPLACE) == CKPZ_OK);
        CHECK(has(out, "three") && count(".out.bin.") == 0);
        /* an abort leaves nothing */
        p = open_file(ctx, out, anon, "four");
        ckpz_publish_abort(p);
        CHECK(has(out, "three") && count(".out.bin.") == 0);
    }
    /* a directory that does not exist: the message names it, errno says why */
    ckpz_publish *p = NULL;
    CHECK(ckpz_publish_open(ctx, at("no/such/x.ckpz"), 0, &p) == CKPZ_ERR_WRITE && p == NULL && errno == ENOENT);
    CHECKF(strstr(ckpz_ctx_message(ctx), "x.ckpz: cannot create it: directory '") != NULL, "%s", ckpz_ctx_message(ctx));
    ckpz_publish_abort(NULL);
}

static void test_directories(ckpz_ctx *ctx)
{
    const char *ck = at("ck");
    char path[600];
    for (int round = 0; round < 3; round++) {
        ckpz_publish *p = NULL;
        CHECK(ckpz_publish_open(ctx, ck, CKPZ_PUBLISH_DIRECTORY, &p) == CKPZ_OK);
        if (!p) return;
        CHECK(ckpz_publish_fd(p) == -1 && count(".ck.ckpz-") == 1);
        snprintf(path, sizeof path, "%s/shard", ckpz_publish_temp(p));
        put(path, round == 0 ? "a" : "b");
        /* round 1: over the existing one without REPLACE (refused), round 2 with it */
        ckpz_error e = ckpz_publish_commit(ctx, p, round == 1 ? 0 : CKPZ_PUBLISH_REPLACE | CKPZ_PUBLISH_DURABLE);
        CHECK(round == 1 ? e == CKPZ_ERR_WRITE && errno == EEXIST : e == CKPZ_OK);
        snprintf(path, sizeof path, "%s/shard", ck);
        CHECK(has(path, round < 2 ? "a" : "b"));
        CHECK(count(".ck.") == 0);
    }
    /* an abort of a filled directory removes it all */
    ckpz_publish *p = NULL;
    CHECK(ckpz_publish_open(ctx, ck, CKPZ_PUBLISH_DIRECTORY, &p) == CKPZ_OK);
    if (!p) return;
    snprintf(path, sizeof path, "%s/sub", ckpz_publish_temp(p));
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/sub/x", ckpz_publish_temp(p));
    put(path, "x");
    ckpz_publish_abort(p);
    CHECK(count(".ck.") == 0);
}

static void test_names(void)
{
    CHECK(ckpz_publish_is_temp(".a.ckpz.ckpz-12-0123abcd-89abcdef.tmp"));
    CHECK(ckpz_publish_is_temp("dir/.a.ckpz-1-0123abcd-89abcdef.tmp"));
    CHECK(!ckpz_publish_is_temp("a.ckpz.ckpz-12-0123abcd-89abcdef.tmp")); /* not hidden */
    CHECK(!ckpz_publish_is_temp(".ckpz-12-0123abcd-89abcdef.tmp"));        /* no NAME */
    CHECK(!ckpz_publish_is_temp(".a.ckpz-012-0123abcd-89abcdef.tmp"));     /* leading zero */
    CHECK(!ckpz_publish_is_temp(".a.ckpz-12-0123ABCD-89abcdef.tmp"));      /* upper case */
    CHECK(!ckpz_publish_is_temp(".a.ckpz-12-0123abcd-89abcdef.tmp.ckpz"));
    CHECK(!ckpz_publish_is_temp(".a.tmpAbC123") && !ckpz_publish_is_temp(".a.1234.0123456789ab.tmp"));
    CHECK(!ckpz_publish_is_temp(NULL) && !ckpz_publish_is_temp(""));
}

static void test_sweep(void)
{
    char name[6][128];
    unsigned h = host_hash();
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    snprintf(name[0], 128, ".s.ckpz.ckpz-%d-%08x-00000001.tmp", (int)dead, h);        /* removed */
    snprintf(name[1], 128, ".s.ckpz.ckpz-%d-%08x-00000002.tmp", (int)dead, h);        /* a directory: removed */
    snprintf(name[2], 128, ".s.ckpz.ckpz-%d-%08x-00000003.tmp", (int)getpid(), h);    /* live: kept */
    snprintf(name[3], 128, ".s.ckpz.ckpz-%d-%08x-00000004.tmp", (int)dead, h ^ 1u);   /* another host: kept */
    snprintf(name[4], 128, ".t.ckpz.ckpz-%d-%08x-00000005.tmp", (int)dead, h);        /* another name: kept */
    snprintf(name[5], 128, ".s.ckpz.ckpz-%d-%08x-00000006.tmp", (int)dead, h);        /* locked: kept */
    for (int i = 0; i < 6; i++) {
        if (i == 1) {
            mkdir(at(name[i]), 0777);
            char in[600];
            snprintf(in, sizeof in, "%s/x", at(name[i]));
            put(in, "x");
        } else {
            put(at(name[i]), "x");
        }
    }
    int fd = open(at(name[5]), O_WRONLY);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0);
    CHECK(ckpz_publish_sweep(at("s.ckpz")) == 2);
    CHECK(access(at(name[0]), F_OK) != 0 && access(at(name[1]), F_OK) != 0);
    for (int i = 2; i < 6; i++) CHECKF(access(at(name[i]), F_OK) == 0, "%s", name[i]);
    close(fd);
    CHECK(ckpz_publish_sweep(at("s.ckpz")) == 1); /* its lock gone */
    CHECK(access(at(name[5]), F_OK) != 0);
    for (int i = 2; i < 5; i++) unlink(at(name[i]));
}

static int fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

/* Waits (bounded) until fd is closed by the release thread. */
static int released(int fd)
{
    for (int i = 0; i < 5000 && fd_open(fd); i++) usleep(1000);
    return !fd_open(fd);
}

static void test_release(ckpz_ctx *ctx)
{
    char text[32];
    int fd;
    /* only a regular file with one name is held */
    CHECK(release_hold(at("rel-none")) == -1);
    CHECK(release_hold(g_dir) == -1);
    put(at("rel-a"), "a");
    CHECK(symlink("rel-a", at("rel-link")) == 0);
    CHECK(release_hold(at("rel-link")) == -1);
    CHECK(link(at("rel-a"), at("rel-b")) == 0);
    CHECK(release_hold(at("rel-a")) == -1);
    unlink(at("rel-b"));
    unlink(at("rel-link"));
    release_later(-1); /* ignored */
    /* a replacing commit: the new content in place, the old file gone once released */
    for (int round = 0; round < 40; round++) {
        struct stat st, now;
        snprintf(text, sizeof text, "round %d", round);
        CHECK(stat(at("rel-a"), &st) == 0);
        ckpz_publish *p = open_file(ctx, at("rel-a"), CKPZ_PUBLISH_REPLACE, text);
        if (!p) return;
        CHECKF(ckpz_publish_commit(ctx, p, 0) == CKPZ_OK, "%s", ckpz_ctx_message(ctx));
        CHECK(has(at("rel-a"), text));
        CHECK(stat(at("rel-a"), &now) == 0 && now.st_ino != st.st_ino);
    }
    /* a fork just after the release starts: the child holds no reference to the old file
     * (with the fork handlers gone, some of these rounds find one) */
    int kept = 0;
    for (int round = 0; round < 40; round++) {
        put(at("rel-old"), "old");
        put(at("rel-new"), "new");
        fd = release_hold(at("rel-old"));
        CHECK(fd >= 0);
        CHECK(rename(at("rel-new"), at("rel-old")) == 0);
        release_later(fd);
        pid_t pid = fork();
        if (pid == 0) _exit(fd_open(fd) ? 3 : 0);
        int status = 0;
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        kept += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(released(fd));
    }
    CHECKF(kept == 0, "%d of 40 children kept the replaced file", kept);
    unlink(at("rel-old"));
    unlink(at("rel-a"));
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/ckpz-publish.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    ckpz_ctx *ctx = ckpz_ctx_create();
    test_names();
    test_files(ctx);
    test_directories(ctx);
    test_sweep();
    test_release(ctx);
    ckpz_ctx_free(ctx);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    if (test_failures) {
        fprintf(stderr, "test_publish: %d checks failed\n", test_failures);
        return 1;
    }
    printf("test_publish: ok\n");
    return 0;
}
