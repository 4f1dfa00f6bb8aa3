/* pickle.h — a small, strict reader of the pickles torch.save writes (data.pkl, and the
 * object and storage-key pickles of the legacy format).
 *
 * It runs the pickle opcodes torch uses (protocol 2, and the common ones of protocols
 * 0-5) on a model of the object graph that knows dicts, lists, tuples, strings, numbers,
 * globals, persistent ids and torch's tensor rebuild calls, and nothing else. Its main
 * output is the storage table: for every persistent id ('storage', storage_type, key,
 * location, numel[, None]), the key, element type and count, and a name: the dict/list key path
 * of the first tensor that uses the storage (e.g. "model.h.0.attn.weight",
 * "optimizer.state.3.exp_avg"), or "data/KEY" when there is none; and for the storages
 * of an optimizer's state (a dict with "state" and "param_groups", as torch's
 * Optimizer.state_dict() writes it), Adam's beta2 of the param group whose "params" list
 * the state's index (pkl_storage.optim). The same machine also
 * reads a pickled list of strings (the storage keys of a legacy file, pkl_str_list).
 *
 * Memory and work are bounded by the pickle's size; an opcode or structure it does not
 * understand makes the whole pickle unusable (PKL_BAD), never a crash.
 */
#ifndef CKPZ_PICKLE_H
#define CKPZ_PICKLE_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"
#include "formats.h"

typedef struct pkl_storage {
    char *key;          /* the storage's key: the archive member is data/KEY */
    ckpz_dtype dtype;   /* CKPZ_DTYPE_NONE for a storage type this library does not model */
    uint64_t numel;     /* elements of dtype */
    char *name;         /* see above */
    uint32_t ndim;      /* shape of the first tensor using it when it covers the storage */
    uint64_t *shape;    /* exactly and contiguously; else ndim 1, shape {numel} */
    const fmt_optim *optim; /* named PREFIX.state.N.* where the optimizer state dict at
                               PREFIX lists N in a param group's "params": that group's
                               settings (the first group listing N); any other storage,
                               where every such group states one lr: a group of that lr
                               alone (beta2 0: a model's weights); else NULL */
} pkl_storage;

typedef struct pkl_storages {
    pkl_storage *s;     /* sorted by key (strcmp), keys unique */
    size_t n;
    fmt_optim *groups;  /* the param groups the storages' optim point into */
    size_t ngroups;     /* a last group of beta2 0 is the lr alone every other group states (optim above) */
} pkl_storages;

typedef enum { PKL_OK = 0, PKL_NEED = 1, PKL_BAD = 2, PKL_NOMEM = -1 } pkl_status;

/* Reads the pickle at p[0..len). PKL_OK: *out holds the storages and *end the length of
 * the pickle (through STOP). PKL_NEED: the pickle runs past len. PKL_BAD: not a pickle
 * this reader understands. PKL_NOMEM: allocation failure. *out is empty unless PKL_OK. */
pkl_status pkl_torch_storages(const uint8_t *p, size_t len, pkl_storages *out, size_t *end);

/* Strings, in order (malloc'd, NUL-terminated). */
typedef struct pkl_strs {
    char **s;
    size_t n;
} pkl_strs;

/* Reads the pickle of a list of strings at p[0..len) (the storage keys that end the
 * header of a legacy torch file): PKL_OK with *out and *end as above, PKL_NEED, PKL_BAD
 * (not a list, or an item that is not a string without NUL of at most 4096 bytes),
 * PKL_NOMEM. *out is empty unless PKL_OK. Runs the same machine as pkl_torch_storages. */
pkl_status pkl_str_list(const uint8_t *p, size_t len, pkl_strs *out, size_t *end);
void pkl_strs_free(pkl_strs *t);

/* The storages of the torch.save zip archive whose first len bytes p holds (its data.pkl
 * whole, stored): PKL_OK, PKL_NEED (data.pkl runs past len), PKL_BAD (not such an
 * archive), PKL_NOMEM. What a .ckpz file's listing reads its optimizer state from
 * (torch.c). */
pkl_status pkl_torch_archive(const uint8_t *p, size_t len, pkl_storages *out);

const pkl_storage *pkl_find(const pkl_storages *t, const uint8_t *key, size_t key_len);

void pkl_storages_free(pkl_storages *t);

#endif
