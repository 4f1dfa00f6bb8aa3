/* fuzz_pickle.c — libFuzzer harness for the pickle reader (lib/formats/pickle.c,
 * pkl_torch_storages), on the input as a data.pkl.
 *
 * Checks: the status is one of the four; on PKL_OK the pickle's end is inside the
 * input, the storage table is sorted by key with unique keys that pkl_find finds, every
 * storage has a key without NUL bytes, a name, a shape whose element count is its
 * numel (a scalar's: no dimensions, one element) and a valid dtype; the same pickle cut to exactly its end reads the same
 * table (bytes after STOP do not matter), and cut one byte short it is PKL_NEED (a
 * prefix of a pickle the reader understood is a pickle cut short). On other statuses
 * the table is empty.
 */
#include "formats/pickle.h"
#include "fuzz_util.h"

static void check_table(const pkl_storages *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const pkl_storage *s = &t->s[i];
        FZ_CHECK(s->key && s->name, "pickle: storage %zu without key or name", i);
        FZ_CHECK((unsigned)s->dtype < CKPZ_DTYPE_COUNT_, "pickle: storage '%s': dtype %d", s->key, (int)s->dtype);
        FZ_CHECK(i == 0 || strcmp(t->s[i - 1].key, s->key) < 0, "pickle: keys '%s', '%s' out of order or repeated",
                 i ? t->s[i - 1].key : "", s->key);
        FZ_CHECK(pkl_find(t, (const uint8_t *)s->key, strlen(s->key)) == s, "pickle: pkl_find misses '%s'", s->key);
        FZ_CHECK(s->ndim <= 64 && (s->shape || !s->ndim), "pickle: storage '%s': ndim %u", s->key, s->ndim);
        uint64_t n = 1;
        int zero = 0;
        for (uint32_t d = 0; d < s->ndim; d++) zero |= !s->shape[d];
        for (uint32_t d = 0; d < s->ndim && !zero; d++) {
            FZ_CHECK(n <= UINT64_MAX / s->shape[d], "pickle: shape of '%s' overflows", s->key);
            n *= s->shape[d];
        }
        if (zero) n = 0;
        FZ_CHECK(n == s->numel, "pickle: storage '%s': shape has %llu elements, numel %llu", s->key,
                 (unsigned long long)n, (unsigned long long)s->numel);
    }
    FZ_CHECK(!pkl_find(t, (const uint8_t *)"\0", 1), "pickle: pkl_find found a key with a NUL byte");
}

static int same_table(const pkl_storages *a, const pkl_storages *b)
{
    if (a->n != b->n) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const pkl_storage *x = &a->s[i], *y = &b->s[i];
        if (strcmp(x->key, y->key) || strcmp(x->name, y->name) || x->dtype != y->dtype || x->numel != y->numel ||
            x->ndim != y->ndim || (x->ndim && memcmp(x->shape, y->shape, 8 * (size_t)x->ndim)))
            return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pkl_storages t;
    size_t end = (size_t)-1;
    pkl_status s = pkl_torch_storages(data, size, &t, &end);
    FZ_CHECK(s == PKL_OK || s == PKL_NEED || s == PKL_BAD, "pickle: status %d", (int)s);
    if (s != PKL_OK) {
        FZ_CHECK(t.n == 0 && !t.s, "pickle: status %d with a table", (int)s);
        return 0;
    }
    FZ_CHECK(end >= 1 && end <= size, "pickle: end %zu of %zu bytes", end, size);
    check_table(&t);

    uint8_t *cut = fz_copy(data, end);
    pkl_storages u;
    size_t end2 = 0;
    pkl_status s2 = pkl_torch_storages(cut, end, &u, &end2);
    FZ_CHECK(s2 == PKL_OK && end2 == end && same_table(&t, &u),
             "pickle: cut to its end (%zu of %zu bytes) it reads differently (status %d)", end, size, (int)s2);
    pkl_storages_free(&u);
    s2 = pkl_torch_storages(cut, end - 1, &u, &end2);
    FZ_CHECK(s2 == PKL_NEED, "pickle: cut one byte short of its end (%zu) it is status %d, not PKL_NEED", end, (int)s2);
    free(cut);
    pkl_storages_free(&t);
    return 0;
}
