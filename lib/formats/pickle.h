/* pickle.h — a small, strict reader of the pickles torch.save writes (data.pkl).
 *
 * It runs the pickle opcodes torch uses (protocol 2, and the common ones of protocols
 * 0-5) on a model of the object graph that knows dicts, lists, tuples, strings, numbers,
 * globals, persistent ids and torch's tensor rebuild calls, and nothing else. Its only
 * output is the storage table: for every persistent id ('storage', storage_type, key,
 * location, numel), the key, element type and count, and a name: the dict/list key path
 * of the first tensor that uses the storage (e.g. "model.h.0.attn.weight",
 * "optimizer.state.3.exp_avg"), or "data/KEY" when there is none.
 *
 * Memory and work are bounded by the pickle's size; an opcode or structure it does not
 * understand makes the whole pickle unusable (PKL_BAD), never a crash.
 */
#ifndef CKPZ_PICKLE_H
#define CKPZ_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"

typedef struct pkl_storage {
    char *key;          /* the storage's key: the archive member is data/KEY */
    ckpz_dtype dtype;   /* CKPZ_DTYPE_NONE for a storage type this library does not model */
    uint64_t numel;     /* elements of dtype */
    char *name;         /* see above */
    uint32_t ndim;      /* shape of the first tensor using it when it covers the storage */
    uint64_t *shape;    /* exactly and contiguously; else ndim 1, shape {numel} */
} pkl_storage;

typedef struct pkl_storages {
    pkl_storage *s;     /* sorted by key (strcmp), keys unique */
    size_t n;
} pkl_storages;

typedef enum { PKL_OK = 0, PKL_NEED = 1, PKL_BAD = 2, PKL_NOMEM = -1 } pkl_status;

/* Reads the pickle at p[0..len). PKL_OK: *out holds the storages and *end the length of
 * the pickle (through STOP). PKL_NEED: the pickle runs past len. PKL_BAD: not a pickle
 * this reader understands. PKL_NOMEM: allocation failure. *out is empty unless PKL_OK. */
pkl_status pkl_torch_storages(const uint8_t *p, size_t len, pkl_storages *out, size_t *end);

const pkl_storage *pkl_find(const pkl_storages *t, const uint8_t *key, size_t key_len);

void pkl_storages_free(pkl_storages *t);

#endif
