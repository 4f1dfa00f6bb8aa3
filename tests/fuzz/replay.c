/* replay.c — runs LLVMFuzzerTestOneInput over files, without libFuzzer: the regression
 * driver for the fuzz corpora (ctest runs it as fuzz_replay_decompress and
 * fuzz_replay_roundtrip). Arguments are files or directories (not recursive).
 * Exits non-zero if an argument cannot be read; a harness failure aborts. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *nb = realloc(buf, cap * 2);
        if (!nb) free(buf);
        buf = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        fprintf(stderr, "%s: read error\n", path);
        free(buf);
        return -1;
    }
    /* an exact-size copy, so that ASan sees reads past the end of the input */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv)
{
    int bad = 0;
    unsigned long files = 0;
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= run_file(argv[i]) != 0;
            files++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        if (!d) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        char **names = NULL;
        size_t nn = 0, cap = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
            if (de->d_name[0] == '.') continue;
            if (nn == cap) {
                cap = cap ? cap * 2 : 64;
                char **q = realloc(names, cap * sizeof *q);
                if (!q) break;
                names = q;
            }
            names[nn++] = strdup(de->d_name);
        }
        closedir(d);
        if (nn) qsort(names, nn, sizeof *names, cmp_str);
        for (size_t k = 0; k < nn; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], names[k]);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                bad |= run_file(path) != 0;
                files++;
            }
            free(names[k]);
        }
        free(names);
    }
    printf("replayed %lu files\n", files);
    return bad;
}
