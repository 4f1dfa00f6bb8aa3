/* pickle.c — the data.pkl reader (see pickle.h).
 *
 * The model: every value is an object in one table (kind + a few fields); the stack,
 * the marks and the memo hold object ids. Each opcode makes at most one object and
 * pushes at most one id, so every table is bounded by the pickle's length. Containers
 * do not keep their items; instead an object remembers where it was first put
 * (parent container and key), which is all naming needs: a storage is named after the
 * path from the root object down to the first tensor (in pickle order) that uses it.
 * Only the items put in dicts and lists are kept aside as (container, key, value) ids,
 * which is what reading an optimizer's param groups needs (optim_groups): a group's
 * betas tuple is shared by every group made from the optimizer's defaults, so where an
 * object was first put does not say which groups hold it. They are kept only for a
 * pickle whose bytes hold "param_groups": measured (CPU time, loaded machine) 0.10 ->
 * 0.12 ms for the corpus GPT's pickle, 9.6 -> 10.9 ms for 4,000 parameters' AdamW state,
 * and no change (5.9 ms) for 12,000 tensors without an optimizer.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/dtype.h"
#include "pickle.h"

#define NIL UINT32_MAX
#define PKL_MAX_DEPTH 64     /* key path length when naming */
#define PKL_MAX_NAME 1024
#define PKL_MAX_NDIM 64
#define PKL_MAX_OPTIMS 64    /* optimizer state dicts read in one pickle */
#define PKL_MAX_GROUPS 4096  /* param groups read in all */

enum {
    O_NONE,
    O_BOOL,
    O_INT,
    O_FLOAT,
    O_STR,
    O_BYTES,
    O_TUPLE,
    O_LIST,
    O_DICT,
    O_GLOBAL,
    O_STORAGE,
    O_TENSOR,
    O_OTHER
};
enum { K_NONE, K_OBJ, K_INDEX, K_SKIP }; /* how an object is keyed in its parent */

typedef struct {
    uint8_t kind, key_kind;
    uint32_t a, b, c, d; /* STR/BYTES: offset, length; TUPLE: first item, count; LIST: count;
                            GLOBAL: module offset, length, name offset, length;
                            STORAGE: record; TENSOR: record, size tuple, stride tuple */
    int64_t i;           /* INT value, BOOL; FLOAT: the double's bits; TENSOR: storage offset
                            (-1: not an int) */
    uint32_t parent;     /* first container it was put in, or NIL */
    uint32_t key;        /* K_OBJ: the key object; K_INDEX: the index */
} pobj;

typedef struct {
    uint32_t key_off, key_len;
    ckpz_dtype dtype;
    uint64_t numel;
    uint32_t tensor; /* first tensor made from it (ids grow in pickle order) */
} prec;

typedef struct {
    uint32_t cont, key, val; /* a dict's item (key: the key object) or a list's (key: index) */
} pkv;

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    pobj *o;
    size_t no, co;
    uint32_t *items;
    size_t ni, ci;
    uint32_t *stack;
    size_t ns, cs;
    size_t *marks;
    size_t nm, cm;
    uint32_t *memo;
    size_t nmemo, mcount; /* array size; entries set (MEMOIZE's next key) */
    prec *rec;
    size_t nrec, crec;
    size_t limit; /* objects, items and records stay below this (memo keys: see memo_put) */
    int collect;      /* pkl_str_list: keep what is appended to the first list made */
    uint32_t list_id; /* that list, or NIL */
    uint32_t *list;   /* its items, in order */
    size_t nlist, clist;
    pkv *kv; /* every item put in a dict or a list, in pickle order, where keep_items */
    size_t nkv, ckv;
    int keep_items; /* the pickle's bytes hold "param_groups" (else no dict can have that key) */
} pk;

static int grow(void **a, size_t *cap, size_t want, size_t esz)
{
    if (want <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < want) c *= 2;
    void *n = realloc(*a, c * esz);
    if (!n) return -1;
    *a = n;
    *cap = c;
    return 0;
}

/* Status codes inside the parser. */
#define R_OK 0
#define R_NEED 1
#define R_BAD 2
#define R_NOMEM -1

static int new_obj(pk *k, int kind, uint32_t *id)
{
    if (k->no >= k->limit) return R_BAD;
    if (grow((void **)&k->o, &k->co, k->no + 1, sizeof(pobj))) return R_NOMEM;
    pobj *o = &k->o[k->no];
    memset(o, 0, sizeof(*o));
    o->kind = (uint8_t)kind;
    o->parent = NIL;
    *id = (uint32_t)k->no++;
    return R_OK;
}

static int push(pk *k, uint32_t id)
{
    if (k->ns >= k->limit) return R_BAD;
    if (grow((void **)&k->stack, &k->cs, k->ns + 1, sizeof(uint32_t))) return R_NOMEM;
    k->stack[k->ns++] = id;
    return R_OK;
}

static int push_new(pk *k, int kind, uint32_t *id)
{
    int r = new_obj(k, kind, id);
    return r ? r : push(k, *id);
}

static size_t base(const pk *k) { return k->nm ? k->marks[k->nm - 1] : 0; }

static int pop(pk *k, uint32_t *id)
{
    if (k->ns <= base(k)) return R_BAD;
    *id = k->stack[--k->ns];
    return R_OK;
}

static int top(pk *k, uint32_t *id)
{
    if (k->ns <= base(k)) return R_BAD;
    *id = k->stack[k->ns - 1];
    return R_OK;
}

static int pop_mark(pk *k, size_t *start)
{
    if (!k->nm) return R_BAD;
    *start = k->marks[--k->nm];
    return R_OK;
}

/* Records where `child` was first put. */
static void place(pk *k, uint32_t child, uint32_t parent, int key_kind, uint32_t key)
{
    pobj *c = &k->o[child];
    if (child == parent || c->parent != NIL) return;
    if (c->kind != O_TENSOR && c->kind != O_DICT && c->kind != O_LIST && c->kind != O_TUPLE && c->kind != O_OTHER)
        return;
    c->parent = parent;
    c->key_kind = (uint8_t)key_kind;
    c->key = key;
}

static int need(const pk *k, size_t n) { return k->len - k->pos < n ? R_NEED : R_OK; }

static uint64_t le(const uint8_t *p, unsigned n)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static int eq(const pk *k, uint32_t off, uint32_t len, const char *s)
{
    size_t n = strlen(s);
    return n == len && memcmp(k->p + off, s, n) == 0;
}

static int is_global(const pk *k, uint32_t id, const char *mod, const char *name)
{
    const pobj *o = &k->o[id];
    return o->kind == O_GLOBAL && eq(k, o->a, o->b, mod) && eq(k, o->c, o->d, name);
}

static uint32_t tuple_item(const pk *k, uint32_t tup, uint32_t i)
{
    const pobj *t = &k->o[tup];
    return t->kind == O_TUPLE && i < t->b ? k->items[t->a + i] : NIL;
}

static int make_tuple(pk *k, size_t from)
{
    size_t n = k->ns - from;
    if (k->ni + n > k->limit) return R_BAD;
    if (grow((void **)&k->items, &k->ci, k->ni + n, sizeof(uint32_t))) return R_NOMEM;
    uint32_t id;
    int r = new_obj(k, O_TUPLE, &id);
    if (r) return r;
    k->o[id].a = (uint32_t)k->ni;
    k->o[id].b = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        uint32_t it = k->stack[from + i];
        k->items[k->ni++] = it;
        place(k, it, id, K_INDEX, (uint32_t)i);
    }
    k->ns = from;
    return push(k, id);
}

/* Element type of a storage type named by a global (torch.FloatStorage, ...), or of a
 * torch dtype in its place (torch.float32): the dtype table's torch names. */
static ckpz_dtype storage_dtype(const pk *k, uint32_t g, int *known)
{
    const pobj *o = &k->o[g];
    *known = 0;
    if (o->kind != O_GLOBAL) return CKPZ_DTYPE_NONE;
    if (!eq(k, o->a, o->b, "torch") && !eq(k, o->a, o->b, "torch.cuda") && !eq(k, o->a, o->b, "torch.storage"))
        return CKPZ_DTYPE_NONE;
    ckpz_dtype t = dtype_find(DT_NAMES_TORCH, (const char *)k->p + o->c, o->d);
    if (t == CKPZ_DTYPE_COUNT_) return CKPZ_DTYPE_NONE;
    *known = 1;
    return t;
}

/* BINPERSID: ('storage', storage_type, key, location, numel) -> a STORAGE object; the
 * legacy format (torch < 1.6) adds a sixth item, view metadata, always None as torch
 * writes it (a view would be part of another storage: left as some other object). */
static int persid(pk *k)
{
    uint32_t pid, id;
    int r = pop(k, &pid);
    if (r) return r;
    uint32_t tag = tuple_item(k, pid, 0), ty = tuple_item(k, pid, 1), key = tuple_item(k, pid, 2),
             num = tuple_item(k, pid, 4);
    uint32_t view = tuple_item(k, pid, 5);
    if (k->o[pid].kind != O_TUPLE || (k->o[pid].b != 5 && (k->o[pid].b != 6 || k->o[view].kind != O_NONE)) ||
        k->o[tag].kind != O_STR || !eq(k, k->o[tag].a, k->o[tag].b, "storage") || k->o[key].kind != O_STR ||
        k->o[num].kind != O_INT || k->o[num].i < 0)
        return push_new(k, O_OTHER, &id); /* some other persistent object */
    if (k->nrec >= k->limit) return R_BAD;
    if (grow((void **)&k->rec, &k->crec, k->nrec + 1, sizeof(prec))) return R_NOMEM;
    int known;
    prec *s = &k->rec[k->nrec];
    s->key_off = k->o[key].a;
    s->key_len = k->o[key].b;
    s->dtype = storage_dtype(k, ty, &known);
    s->numel = (uint64_t)k->o[num].i;
    s->tensor = NIL;
    if ((r = push_new(k, O_STORAGE, &id))) return r;
    k->o[id].a = (uint32_t)k->nrec++;
    return R_OK;
}

/* _rebuild_tensor_v2(storage, storage_offset, size, stride, ...), and the same
 * arguments of _rebuild_tensor (legacy files of torch < 0.4) */
static int rebuild_tensor(pk *k, uint32_t args, uint32_t *res)
{
    uint32_t st = tuple_item(k, args, 0), off = tuple_item(k, args, 1), size = tuple_item(k, args, 2),
             stride = tuple_item(k, args, 3);
    if (st == NIL || stride == NIL || k->o[st].kind != O_STORAGE) return new_obj(k, O_OTHER, res);
    int r = new_obj(k, O_TENSOR, res);
    if (r) return r;
    pobj *t = &k->o[*res];
    t->a = k->o[st].a;
    t->b = size;
    t->c = stride;
    t->i = k->o[off].kind == O_INT ? k->o[off].i : -1;
    prec *s = &k->rec[t->a];
    if (s->tensor == NIL) s->tensor = *res;
    return R_OK;
}

static int reduce(pk *k)
{
    uint32_t args, fn, res;
    int r = pop(k, &args);
    if (!r) r = pop(k, &fn);
    if (r) return r;
    if (is_global(k, fn, "torch._utils", "_rebuild_tensor_v2") || is_global(k, fn, "torch._utils", "_rebuild_tensor")) {
        r = rebuild_tensor(k, args, &res);
    } else if (is_global(k, fn, "torch._tensor", "_rebuild_from_type_v2") &&
               is_global(k, tuple_item(k, args, 0) == NIL ? fn : tuple_item(k, args, 0), "torch._utils",
                         "_rebuild_tensor_v2") &&
               tuple_item(k, args, 2) != NIL && k->o[tuple_item(k, args, 2)].kind == O_TUPLE) {
        r = rebuild_tensor(k, tuple_item(k, args, 2), &res);
    } else if ((is_global(k, fn, "torch._utils", "_rebuild_parameter") ||
                is_global(k, fn, "torch._utils", "_rebuild_parameter_with_state")) &&
               tuple_item(k, args, 0) != NIL && k->o[tuple_item(k, args, 0)].kind == O_TENSOR) {
        res = tuple_item(k, args, 0); /* the parameter is its tensor */
        if (k->o[res].parent == args) k->o[res].parent = NIL;
        r = R_OK;
    } else if (is_global(k, fn, "collections", "OrderedDict") || is_global(k, fn, "builtins", "dict") ||
               is_global(k, fn, "__builtin__", "dict")) {
        r = new_obj(k, O_DICT, &res);
    } else {
        r = new_obj(k, O_OTHER, &res);
        if (!r) place(k, args, res, K_SKIP, 0);
    }
    return r ? r : push(k, res);
}

static int keep_item(pk *k, uint32_t cont, uint32_t key, uint32_t val)
{
    if (!k->keep_items || k->nkv >= k->limit) return R_OK; /* never changes what the pickle reads as */
    if (grow((void **)&k->kv, &k->ckv, k->nkv + 1, sizeof(pkv))) return R_NOMEM;
    k->kv[k->nkv++] = (pkv){cont, key, val};
    return R_OK;
}

static int set_items(pk *k, uint32_t target, size_t from, size_t to)
{
    if ((to - from) % 2) return R_BAD;
    for (size_t i = from; i < to; i += 2) {
        place(k, k->stack[i + 1], target, K_OBJ, k->stack[i]);
        int r = k->o[target].kind == O_DICT ? keep_item(k, target, k->stack[i], k->stack[i + 1]) : R_OK;
        if (r) return r;
    }
    return R_OK;
}

static int append_items(pk *k, uint32_t target, size_t from, size_t to)
{
    pobj *t = &k->o[target];
    int counts = t->kind == O_LIST || t->kind == O_OTHER; /* 'a' is the item count only there */
    if (k->collect && t->kind == O_LIST && (k->list_id == NIL || k->list_id == target)) {
        k->list_id = target;
        if (k->nlist + (to - from) > k->limit) return R_BAD;
        if (grow((void **)&k->list, &k->clist, k->nlist + (to - from), sizeof(uint32_t))) return R_NOMEM;
        for (size_t i = from; i < to; i++) k->list[k->nlist++] = k->stack[i];
    }
    for (size_t i = from; i < to; i++) {
        place(k, k->stack[i], target, counts ? K_INDEX : K_SKIP, counts ? t->a : 0);
        int r = t->kind == O_LIST ? keep_item(k, target, t->a, k->stack[i]) : R_OK;
        if (r) return r;
        if (counts) t->a++;
    }
    return R_OK;
}

static int memo_put(pk *k, uint64_t key)
{
    uint32_t id;
    int r = top(k, &id);
    if (r) return r;
    /* Keys are bounded by the bytes read so far (writers number them from 0, one per
     * PUT), not by the length given: the same pickle reads the same whatever follows
     * its STOP. */
    if (key >= k->pos + 16) return R_BAD;
    if (key >= k->nmemo) {
        size_t cap = k->nmemo;
        if (grow((void **)&k->memo, &cap, (size_t)key + 1, sizeof(uint32_t))) return R_NOMEM;
        for (size_t i = k->nmemo; i < cap; i++) k->memo[i] = NIL;
        k->nmemo = cap;
    }
    if (k->memo[key] == NIL) k->mcount++;
    k->memo[key] = id;
    return R_OK;
}

static int memo_get(pk *k, uint64_t key)
{
    if (key >= k->nmemo || k->memo[key] == NIL) return R_BAD;
    return push(k, k->memo[key]);
}

/* A '\n'-terminated text argument: [*off, *off + *n). */
static int line(pk *k, size_t *off, size_t *n)
{
    const uint8_t *e = memchr(k->p + k->pos, '\n', k->len - k->pos);
    if (!e) return R_NEED;
    *off = k->pos;
    *n = (size_t)(e - (k->p + k->pos));
    k->pos += *n + 1;
    return R_OK;
}

static int dec(const pk *k, size_t off, size_t n, uint64_t *v)
{
    uint64_t x = 0;
    if (!n || n > 18) return R_BAD;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = k->p[off + i];
        if (c < '0' || c > '9') return R_BAD;
        x = x * 10 + (c - '0');
    }
    *v = x;
    return R_OK;
}

static int push_str(pk *k, int kind, size_t n)
{
    uint32_t id;
    int r = need(k, n);
    if (r) return r;
    if ((r = push_new(k, kind, &id))) return r;
    k->o[id].a = (uint32_t)k->pos;
    k->o[id].b = (uint32_t)n;
    k->pos += n;
    return R_OK;
}

static int push_int(pk *k, int kind, int64_t v)
{
    uint32_t id;
    int r = push_new(k, kind, &id);
    if (!r) k->o[id].i = v;
    return r;
}

static int push_float(pk *k, double v)
{
    int64_t bits;
    memcpy(&bits, &v, sizeof bits);
    return push_int(k, O_FLOAT, bits);
}

static double float_of(const pobj *o)
{
    double v;
    memcpy(&v, &o->i, sizeof v);
    return v;
}

/* FLOAT's text argument (repr of a double); NaN when it is not one. */
static double text_float(const pk *k, size_t off, size_t n)
{
    char buf[64], *end;
    if (!n || n >= sizeof buf) return NAN;
    memcpy(buf, k->p + off, n);
    buf[n] = '\0';
    double v = strtod(buf, &end);
    return *end ? NAN : v;
}

/* Runs the pickle to STOP; *root = the object left on the stack. */
static int run(pk *k, uint32_t *root)
{
    for (;;) {
        int r = need(k, 1);
        if (r) return r;
        uint8_t op = k->p[k->pos++];
        uint32_t id, v, t;
        size_t from, off, n;
        uint64_t x;
        switch (op) {
        case 0x80: /* PROTO */
            if ((r = need(k, 1))) return r;
            if (k->p[k->pos++] > 5) return R_BAD;
            break;
        case 0x95: /* FRAME */
            if ((r = need(k, 8))) return r;
            k->pos += 8;
            break;
        case '.': /* STOP */
            if ((r = pop(k, root))) return r;
            return R_OK;
        case '}': r = push_new(k, O_DICT, &id); break;
        case ']': r = push_new(k, O_LIST, &id); break;
        case ')': r = make_tuple(k, k->ns); break;
        case 'N': r = push_new(k, O_NONE, &id); break;
        case 0x88: r = push_int(k, O_BOOL, 1); break;
        case 0x89: r = push_int(k, O_BOOL, 0); break;
        case 0x8f: /* EMPTY_SET */ r = push_new(k, O_OTHER, &id); break;
        case '(': /* MARK */
            if (k->nm >= k->limit) return R_BAD;
            if (grow((void **)&k->marks, &k->cm, k->nm + 1, sizeof(size_t))) return R_NOMEM;
            k->marks[k->nm++] = k->ns;
            break;
        case 'X': /* BINUNICODE */
        case 'T': /* BINSTRING */
        case 'B': /* BINBYTES */
            if ((r = need(k, 4))) return r;
            x = le(k->p + k->pos, 4);
            k->pos += 4;
            if (op == 'T' && (x & 0x80000000u)) return R_BAD;
            if (x > k->len) return R_NEED;
            r = push_str(k, op == 'B' ? O_BYTES : O_STR, (size_t)x);
            break;
        case 0x8c: /* SHORT_BINUNICODE */
        case 'U':  /* SHORT_BINSTRING */
        case 'C':  /* SHORT_BINBYTES */
            if ((r = need(k, 1))) return r;
            x = k->p[k->pos++];
            r = push_str(k, op == 'C' ? O_BYTES : O_STR, (size_t)x);
            break;
        case 0x8d: /* BINUNICODE8 */
        case 0x8e: /* BINBYTES8 */
            if ((r = need(k, 8))) return r;
            x = le(k->p + k->pos, 8);
            k->pos += 8;
            if (x > k->len) return R_NEED;
            r = push_str(k, op == 0x8e ? O_BYTES : O_STR, (size_t)x);
            break;
        case 'q': /* BINPUT */
            if ((r = need(k, 1))) return r;
            r = memo_put(k, k->p[k->pos++]);
            break;
        case 'r': /* LONG_BINPUT */
            if ((r = need(k, 4))) return r;
            x = le(k->p + k->pos, 4);
            k->pos += 4;
            r = memo_put(k, x);
            break;
        case 0x94: /* MEMOIZE */
            r = memo_put(k, k->mcount); /* the key is the memo's length */
            break;
        case 'h': /* BINGET */
            if ((r = need(k, 1))) return r;
            r = memo_get(k, k->p[k->pos++]);
            break;
        case 'j': /* LONG_BINGET */
            if ((r = need(k, 4))) return r;
            x = le(k->p + k->pos, 4);
            k->pos += 4;
            r = memo_get(k, x);
            break;
        case 'p': /* PUT */
        case 'g': /* GET */
            if ((r = line(k, &off, &n)) || (r = dec(k, off, n, &x))) return r;
            r = op == 'p' ? memo_put(k, x) : memo_get(k, x);
            break;
        case 'J': /* BININT */
            if ((r = need(k, 4))) return r;
            x = le(k->p + k->pos, 4);
            k->pos += 4;
            r = push_int(k, O_INT, (int64_t)(int32_t)(uint32_t)x);
            break;
        case 'K': /* BININT1 */
            if ((r = need(k, 1))) return r;
            r = push_int(k, O_INT, k->p[k->pos++]);
            break;
        case 'M': /* BININT2 */
            if ((r = need(k, 2))) return r;
            x = le(k->p + k->pos, 2);
            k->pos += 2;
            r = push_int(k, O_INT, (int64_t)x);
            break;
        case 0x8a: /* LONG1 */
        case 0x8b: /* LONG4 */
            if ((r = need(k, op == 0x8a ? 1 : 4))) return r;
            n = (size_t)le(k->p + k->pos, op == 0x8a ? 1 : 4);
            k->pos += op == 0x8a ? 1 : 4;
            if (n > k->len) return R_NEED;
            if ((r = need(k, n))) return r;
            if (n <= 8) {
                x = le(k->p + k->pos, (unsigned)n);
                if (n && n < 8 && (k->p[k->pos + n - 1] & 0x80)) x |= ~(uint64_t)0 << (8 * n); /* sign extension */
                k->pos += n;
                r = push_int(k, O_INT, (int64_t)x);
            } else {
                k->pos += n;
                r = push_new(k, O_OTHER, &id);
            }
            break;
        case 'G': /* BINFLOAT: big-endian */
            if ((r = need(k, 8))) return r;
            {
                double d;
                x = 0;
                for (int b = 0; b < 8; b++) x = x << 8 | k->p[k->pos + b];
                k->pos += 8;
                memcpy(&d, &x, sizeof d);
                r = push_float(k, d);
                break;
            }
        case 'I': /* INT (text) */
        case 'L': /* LONG (text) */
        case 'F': /* FLOAT (text) */
        case 'S': /* STRING (text) */
        case 'V': /* UNICODE (text) */
            if ((r = line(k, &off, &n))) return r;
            if (op == 'I' && n == 2 && k->p[off] == '0' && (k->p[off + 1] == '0' || k->p[off + 1] == '1'))
                r = push_int(k, O_BOOL, k->p[off + 1] == '1');
            else if ((op == 'I' || op == 'L') && !dec(k, off, n - (op == 'L' && n && k->p[off + n - 1] == 'L'), &x))
                r = push_int(k, O_INT, (int64_t)x);
            else if (op == 'F') r = push_float(k, text_float(k, off, n));
            else r = push_new(k, O_OTHER, &id);
            break;
        case 't': /* TUPLE */
            if ((r = pop_mark(k, &from))) return r;
            r = make_tuple(k, from);
            break;
        case 0x85: /* TUPLE1 */
        case 0x86: /* TUPLE2 */
        case 0x87: /* TUPLE3 */
            n = (size_t)(op - 0x84);
            if (k->ns < base(k) + n) return R_BAD;
            r = make_tuple(k, k->ns - n);
            break;
        case 's': /* SETITEM */
            if (k->ns < base(k) + 3) return R_BAD;
            r = set_items(k, k->stack[k->ns - 3], k->ns - 2, k->ns);
            k->ns -= 2;
            break;
        case 'u': /* SETITEMS */
            if ((r = pop_mark(k, &from))) return r;
            if (from <= base(k)) return R_BAD;
            r = set_items(k, k->stack[from - 1], from, k->ns);
            k->ns = from;
            break;
        case 'a': /* APPEND */
            if (k->ns < base(k) + 2) return R_BAD;
            r = append_items(k, k->stack[k->ns - 2], k->ns - 1, k->ns);
            k->ns -= 1;
            break;
        case 'e': /* APPENDS */
        case 0x90: /* ADDITEMS */
            if ((r = pop_mark(k, &from))) return r;
            if (from <= base(k)) return R_BAD;
            r = append_items(k, k->stack[from - 1], from, k->ns);
            k->ns = from;
            break;
        case 0x91: /* FROZENSET */
            if ((r = pop_mark(k, &from))) return r;
            k->ns = from;
            r = push_new(k, O_OTHER, &id);
            break;
        case 'c': /* GLOBAL */
        {
            size_t mo, mn;
            if ((r = line(k, &mo, &mn)) || (r = line(k, &off, &n))) return r;
            if ((r = push_new(k, O_GLOBAL, &id))) return r;
            k->o[id].a = (uint32_t)mo;
            k->o[id].b = (uint32_t)mn;
            k->o[id].c = (uint32_t)off;
            k->o[id].d = (uint32_t)n;
            break;
        }
        case 0x93: /* STACK_GLOBAL */
            if ((r = pop(k, &v)) || (r = pop(k, &t))) return r;
            if (k->o[v].kind != O_STR || k->o[t].kind != O_STR) return R_BAD;
            if ((r = push_new(k, O_GLOBAL, &id))) return r;
            k->o[id].a = k->o[t].a;
            k->o[id].b = k->o[t].b;
            k->o[id].c = k->o[v].a;
            k->o[id].d = k->o[v].b;
            break;
        case 'R': r = reduce(k); break;
        case 0x81: /* NEWOBJ */
            if ((r = pop(k, &v)) || (r = pop(k, &t)) || (r = push_new(k, O_OTHER, &id))) return r;
            place(k, v, id, K_SKIP, 0);
            break;
        case 0x92: /* NEWOBJ_EX */
            if ((r = pop(k, &v)) || (r = pop(k, &v)) || (r = pop(k, &t)) || (r = push_new(k, O_OTHER, &id))) return r;
            break;
        case 'b': /* BUILD */
            if ((r = pop(k, &v)) || (r = top(k, &t))) return r;
            place(k, v, t, K_SKIP, 0);
            break;
        case 'Q': r = persid(k); break;
        case '0': /* POP */
            if (k->ns > base(k)) k->ns--;
            else if ((r = pop_mark(k, &from))) return r;
            break;
        case '1': /* POP_MARK */
            if ((r = pop_mark(k, &from))) return r;
            k->ns = from;
            break;
        case '2': /* DUP */
            if ((r = top(k, &v))) return r;
            r = push(k, v);
            break;
        default: return R_BAD; /* PERSID (text), EXT*, INST, OBJ, buffers, anything unknown */
        }
        if (r) return r;
    }
}

static int key_text(const pk *k, const pobj *o, char *buf, size_t cap, size_t *n)
{
    char tmp[32];
    const char *s = tmp;
    size_t len;
    if (o->key_kind == K_INDEX) {
        len = (size_t)snprintf(tmp, sizeof tmp, "%u", (unsigned)o->key);
    } else {
        const pobj *kk = &k->o[o->key];
        switch (kk->kind) {
        case O_STR:
            s = (const char *)k->p + kk->a;
            len = kk->b;
            break;
        case O_INT: len = (size_t)snprintf(tmp, sizeof tmp, "%lld", (long long)kk->i); break;
        case O_BOOL:
            s = kk->i ? "True" : "False";
            len = strlen(s);
            break;
        case O_NONE:
            s = "None";
            len = 4;
            break;
        default:
            s = "?";
            len = 1;
            break;
        }
    }
    if (len > cap) return -1;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = (uint8_t)s[i];
        buf[i] = c < 0x20 || c == 0x7f ? '_' : (char)c;
    }
    *n = len;
    return 0;
}

/* The key path from root to object t, or NULL (malloc'd). */
static char *path_name(const pk *k, uint32_t t, uint32_t root)
{
    uint32_t chain[PKL_MAX_DEPTH];
    size_t depth = 0;
    uint32_t o = t;
    while (o != root) {
        const pobj *x = &k->o[o];
        if (x->parent == NIL || depth >= PKL_MAX_DEPTH) return NULL;
        if (x->key_kind != K_SKIP) chain[depth++] = o;
        o = x->parent;
    }
    if (!depth) return NULL;
    char buf[PKL_MAX_NAME + 1];
    size_t n = 0;
    for (size_t i = depth; i-- > 0;) {
        size_t kn;
        if (n && n < PKL_MAX_NAME) buf[n++] = '.';
        if (n >= PKL_MAX_NAME || key_text(k, &k->o[chain[i]], buf + n, PKL_MAX_NAME - n, &kn)) return NULL;
        n += kn;
    }
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, buf, n);
        s[n] = '\0';
    }
    return s;
}

/* Shape of tensor t when it covers its storage exactly and contiguously. */
static int tensor_shape(const pk *k, uint32_t t, uint64_t numel, uint64_t *shape, uint32_t *ndim)
{
    const pobj *x = &k->o[t];
    const pobj *sz = &k->o[x->b], *st = &k->o[x->c];
    if (x->i != 0 || sz->kind != O_TUPLE || st->kind != O_TUPLE || sz->b != st->b || sz->b > PKL_MAX_NDIM) return -1;
    uint64_t prod = 1;
    int zero = 0;
    for (uint32_t i = 0; i < sz->b; i++) {
        const pobj *d = &k->o[k->items[sz->a + i]];
        if (d->kind != O_INT || d->i < 0) return -1;
        shape[i] = (uint64_t)d->i;
        if (!shape[i]) zero = 1;
        else if (prod > UINT64_MAX / shape[i]) return -1;
        else prod *= shape[i];
    }
    if (zero) prod = 0;
    if (prod != numel) return -1;
    if (prod) {
        uint64_t acc = 1;
        for (uint32_t i = sz->b; i-- > 0;) {
            const pobj *d = &k->o[k->items[st->a + i]];
            if (shape[i] != 1 && (d->kind != O_INT || (uint64_t)d->i != acc)) return -1;
            acc *= shape[i];
        }
    }
    *ndim = sz->b;
    return 0;
}

typedef struct {
    const uint8_t *key;
    uint32_t key_len;
    size_t rec; /* index in pickle order */
} rkey;

static int rkey_cmp(const void *a, const void *b)
{
    const rkey *x = a, *y = b;
    size_t n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    if (c) return c;
    if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
    return x->rec < y->rec ? -1 : x->rec > y->rec;
}

static int same_key(const rkey *x, const rkey *y)
{
    return x->key_len == y->key_len && memcmp(x->key, y->key, x->key_len) == 0;
}

void pkl_storages_free(pkl_storages *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) {
        free(t->s[i].key);
        free(t->s[i].name);
        free(t->s[i].shape);
    }
    free(t->s);
    t->s = NULL;
    t->n = 0;
    for (size_t i = 0; i < t->ngroups; i++) free((char *)t->groups[i].from);
    free(t->groups);
    t->groups = NULL;
    t->ngroups = 0;
}

/* The storage table: records sorted by key; for a key used several times (shared
 * storages), the first record gives dtype and numel and the earliest tensor of any of
 * them the name. */
static pkl_status build(pk *k, uint32_t root, pkl_storages *out)
{
    size_t n = k->nrec;
    for (size_t i = 0; i < n; i++)
        if (k->rec[i].key_len > 4096 || memchr(k->p + k->rec[i].key_off, '\0', k->rec[i].key_len)) return PKL_BAD;
    rkey *ks = malloc((n ? n : 1) * sizeof(rkey));
    out->s = calloc(n ? n : 1, sizeof(pkl_storage));
    if (!ks || !out->s) {
        free(ks);
        free(out->s);
        out->s = NULL;
        return PKL_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        ks[i].key = k->p + k->rec[i].key_off;
        ks[i].key_len = k->rec[i].key_len;
        ks[i].rec = i;
    }
    qsort(ks, n, sizeof(rkey), rkey_cmp);
    out->n = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        const prec *r = &k->rec[ks[i].rec];
        uint32_t first = r->tensor;
        while (j < n && same_key(&ks[i], &ks[j])) {
            if (k->rec[ks[j].rec].tensor < first) first = k->rec[ks[j].rec].tensor;
            j++;
        }
        pkl_storage *s = &out->s[out->n++];
        s->dtype = r->dtype;
        s->numel = r->numel;
        s->key = malloc((size_t)r->key_len + 1);
        if (!s->key) goto oom;
        memcpy(s->key, k->p + r->key_off, r->key_len);
        s->key[r->key_len] = '\0';
        uint64_t shape[PKL_MAX_NDIM];
        uint32_t ndim = 0;
        int have_shape = 0;
        if (first != NIL) {
            s->name = path_name(k, first, root);
            have_shape = !tensor_shape(k, first, s->numel, shape, &ndim);
        }
        if (!have_shape) {
            ndim = 1;
            shape[0] = s->numel;
        }
        if (!s->name) {
            size_t nl = 5 + strlen(s->key) + 1;
            s->name = malloc(nl);
            if (!s->name) goto oom;
            snprintf(s->name, nl, "data/%s", s->key);
        }
        s->ndim = ndim;
        if (ndim) {
            s->shape = malloc(ndim * sizeof(uint64_t));
            if (!s->shape) goto oom;
            memcpy(s->shape, shape, ndim * sizeof(uint64_t));
        }
        i = j;
    }
    free(ks);
    return PKL_OK;
oom:
    free(ks);
    pkl_storages_free(out);
    return PKL_NOMEM;
}

/* ---- optimizer state dicts: each param group's beta2 and lr --------------------------- */

#define PKL_MAX_GROUP_KEYS 256 /* a param group has ~15; larger dicts are not read */

typedef struct {
    uint32_t cont, at; /* at: the item's place in kv */
} kref;

typedef struct {
    const pk *k;
    kref *by; /* kv's items sorted by container, then pickle order */
    size_t n;
} items;

static int kref_cmp(const void *a, const void *b)
{
    const kref *x = a, *y = b;
    if (x->cont != y->cont) return x->cont < y->cont ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

/* [*first, *end) of it->by: the items of container c, in pickle order. */
static void items_of(const items *it, uint32_t c, size_t *first, size_t *end)
{
    size_t lo = 0, hi = it->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (it->by[mid].cont < c) lo = mid + 1;
        else hi = mid;
    }
    *first = lo;
    for (hi = it->n; lo < hi;) { /* the first past them: found in log time, as a list of
                                    a million items is looked into once an item */
        size_t mid = lo + (hi - lo) / 2;
        if (it->by[mid].cont <= c) lo = mid + 1;
        else hi = mid;
    }
    *end = lo;
}

/* d[key] for a dict d and a string key (the last item set, as unpickling leaves it), or
 * NIL, also for a dict of more than PKL_MAX_GROUP_KEYS items (bounding the work a hostile
 * pickle can ask for). */
static uint32_t dict_get(const items *it, uint32_t d, const char *key)
{
    size_t i, end;
    uint32_t v = NIL;
    items_of(it, d, &i, &end);
    if (end - i > PKL_MAX_GROUP_KEYS) return NIL;
    for (; i < end; i++) {
        const pkv *e = &it->k->kv[it->by[i].at];
        const pobj *ko = &it->k->o[e->key];
        if (ko->kind == O_STR && eq(it->k, ko->a, ko->b, key)) v = e->val;
    }
    return v;
}

/* Item i of a tuple or list (NIL if none); *n its length. */
static uint32_t seq_item(const items *it, uint32_t s, uint32_t i, uint32_t *n)
{
    const pobj *o = &it->k->o[s];
    size_t f, e;
    if (o->kind == O_TUPLE) {
        *n = o->b;
        return tuple_item(it->k, s, i);
    }
    if (o->kind != O_LIST) {
        *n = 0;
        return NIL;
    }
    items_of(it, s, &f, &e);
    *n = (uint32_t)(e - f);
    return i < e - f ? it->k->kv[it->by[f + i].at].val : NIL;
}

/* betas[1] of a param group when it is a float in (0, 1), else 0. */
static double group_beta2(const items *it, uint32_t g)
{
    uint32_t n, b = dict_get(it, g, "betas");
    if (b == NIL) return 0;
    uint32_t v = seq_item(it, b, 1, &n);
    if (n != 2 || v == NIL || it->k->o[v].kind != O_FLOAT) return 0;
    double x = float_of(&it->k->o[v]);
    return x > 0 && x < 1 ? x : 0;
}

/* A param group's "lr" when it is a finite number > 0 (a float, or an int as a user may
 * write it), else 0. */
static double group_lr(const items *it, uint32_t g)
{
    uint32_t v = dict_get(it, g, "lr");
    if (v == NIL) return 0;
    const pobj *o = &it->k->o[v];
    double x = o->kind == O_FLOAT ? float_of(o) : o->kind == O_INT ? (double)o->i : 0;
    return x > 0 && x < 1e30 ? x : 0;
}

typedef struct {
    int64_t param;
    uint32_t group; /* into the groups made, in pickle order: the first listing param wins */
} pgrp;

static int pgrp_cmp(const void *a, const void *b)
{
    const pgrp *x = a, *y = b;
    if (x->param != y->param) return x->param < y->param ? -1 : 1;
    return x->group < y->group ? -1 : x->group > y->group;
}

typedef struct {
    char *prefix; /* "optimizer.state." ("state." at the root) */
    pgrp *pg;
    size_t npg;
} optim;

/* N of a name PREFIX + N + '.' + ..., N decimal without a sign or leading zero. */
static int state_index(const char *name, const char *prefix, int64_t *n)
{
    size_t pl = strlen(prefix), i = pl;
    if (strncmp(name, prefix, pl) != 0) return -1;
    int64_t v = 0;
    for (; name[i] >= '0' && name[i] <= '9'; i++) {
        if (i - pl >= 18 || (i > pl && name[pl] == '0')) return -1;
        v = v * 10 + (name[i] - '0');
    }
    if (i == pl || name[i] != '.') return -1;
    *n = v;
    return 0;
}

static const pgrp *pgrp_find(const optim *o, int64_t param)
{
    size_t lo = 0, hi = o->npg;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->pg[mid].param < param) lo = mid + 1;
        else hi = mid;
    }
    return lo < o->npg && o->pg[lo].param == param ? &o->pg[lo] : NULL;
}

/* One optimizer state dict's param_groups (the list pg): its groups with a beta2 join
 * out->groups, the (param, group) pairs o; *pairs counts them over all optimizers, at most
 * the pickle's items (each listed once in a real state dict: a params list shared by many
 * groups stops there). R_OK, R_NOMEM. */
static int read_optim(const items *it, uint32_t pg, const char *path, pkl_storages *out, optim *o, size_t *pairs)
{
    uint32_t ng;
    seq_item(it, pg, 0, &ng);
    for (uint32_t gi = 0; gi < ng && out->ngroups < PKL_MAX_GROUPS; gi++) {
        uint32_t g = seq_item(it, pg, gi, &ng), np, params;
        double b2;
        if (g == NIL || it->k->o[g].kind != O_DICT || !(b2 = group_beta2(it, g))) continue;
        if ((params = dict_get(it, g, "params")) == NIL) continue;
        seq_item(it, params, 0, &np);
        if (np > it->n - *pairs) break;
        *pairs += np;
        char from[PKL_MAX_NAME + 32];
        snprintf(from, sizeof from, "%s%sparam_groups[%u]", path, *path ? "." : "", (unsigned)gi);
        fmt_optim *ng_ = realloc(out->groups, (out->ngroups + 1) * sizeof *ng_);
        if (!ng_) return R_NOMEM;
        out->groups = ng_;
        if (!(ng_[out->ngroups].from = strdup(from))) return R_NOMEM;
        ng_[out->ngroups].beta2 = b2;
        ng_[out->ngroups].lr = group_lr(it, g);
        pgrp *more = realloc(o->pg, (o->npg + np + 1) * sizeof *more);
        if (!more) {
            free((char *)ng_[out->ngroups].from);
            return R_NOMEM;
        }
        o->pg = more;
        for (uint32_t i = 0, n; i < np; i++) {
            uint32_t v = seq_item(it, params, i, &n);
            const pobj *p = v != NIL ? &it->k->o[v] : NULL;
            if (p && p->kind == O_INT && p->i >= 0) o->pg[o->npg++] = (pgrp){p->i, (uint32_t)out->ngroups};
        }
        out->ngroups++;
    }
    if (o->npg) qsort(o->pg, o->npg, sizeof *o->pg, pgrp_cmp);
    return R_OK;
}

/* Where every group read states one lr, a last group of that lr alone (beta2 0, named
 * as the first group's list: "optimizer.param_groups"), for the tensors outside the
 * optimizers' state (a model's weights): *lr_only, else NULL. R_OK, R_NOMEM. */
static int lr_group(pkl_storages *out, const fmt_optim **lr_only)
{
    *lr_only = NULL;
    if (!out->ngroups || !(out->groups[0].lr > 0)) return R_OK;
    for (size_t g = 1; g < out->ngroups; g++)
        if (out->groups[g].lr != out->groups[0].lr) return R_OK;
    fmt_optim *more = realloc(out->groups, (out->ngroups + 1) * sizeof *more);
    if (!more) return R_NOMEM;
    out->groups = more;
    const char *f = more[0].from, *br = strrchr(f, '[');
    size_t len = br ? (size_t)(br - f) : strlen(f);
    char *from = malloc(len + 1);
    if (!from) return R_NOMEM;
    memcpy(from, f, len);
    from[len] = 0;
    more[out->ngroups] = (fmt_optim){.beta2 = 0, .lr = more[0].lr, .from = from};
    *lr_only = &more[out->ngroups++];
    return R_OK;
}

/* Every dict with "state" and a list "param_groups" (torch's Optimizer.state_dict()), at
 * most PKL_MAX_OPTIMS of them: out->groups, and each storage named PREFIX.state.N.* with
 * N in a group's params points to that group. Values of other types are passed over. */
static pkl_status optim_groups(const pk *k, uint32_t root, pkl_storages *out)
{
    size_t cand = 0;
    for (size_t i = 0; i < k->nkv && !cand; i++) {
        const pobj *ko = &k->o[k->kv[i].key];
        cand = k->o[k->kv[i].cont].kind == O_DICT && ko->kind == O_STR && eq(k, ko->a, ko->b, "param_groups");
    }
    if (!cand) return PKL_OK;
    items it = {k, malloc(k->nkv * sizeof(kref)), k->nkv};
    optim os[PKL_MAX_OPTIMS];
    uint32_t seen[PKL_MAX_OPTIMS];
    size_t no = 0, pairs = 0;
    int r = R_OK;
    if (!it.by) return PKL_NOMEM;
    for (size_t i = 0; i < k->nkv; i++) it.by[i] = (kref){k->kv[i].cont, (uint32_t)i};
    qsort(it.by, it.n, sizeof *it.by, kref_cmp);
    for (size_t i = 0; i < k->nkv && no < PKL_MAX_OPTIMS && r == R_OK; i++) {
        uint32_t d = k->kv[i].cont, pg = k->kv[i].val;
        const pobj *ko = &k->o[k->kv[i].key];
        if (k->o[d].kind != O_DICT || ko->kind != O_STR || !eq(k, ko->a, ko->b, "param_groups") ||
            k->o[pg].kind != O_LIST || dict_get(&it, d, "param_groups") != pg || dict_get(&it, d, "state") == NIL)
            continue;
        size_t j = 0;
        while (j < no && seen[j] != d) j++;
        if (j < no) continue;
        char *path = d == root ? strdup("") : path_name(k, d, root);
        if (!path) {
            if (d == root) r = R_NOMEM;
            continue; /* not a name the tensors can have */
        }
        optim *o = &os[no];
        memset(o, 0, sizeof *o);
        seen[no++] = d;
        size_t pl = strlen(path);
        if (!(o->prefix = malloc(pl + 8))) r = R_NOMEM;
        else snprintf(o->prefix, pl + 8, "%s%sstate.", path, pl ? "." : "");
        if (r == R_OK) r = read_optim(&it, pg, path, out, o, &pairs);
        free(path);
    }
    const fmt_optim *lr_only = NULL;
    if (r == R_OK) r = lr_group(out, &lr_only);
    for (size_t i = 0; i < out->n && r == R_OK; i++) {
        int state = 0;
        for (size_t j = 0; j < no && !out->s[i].optim; j++) {
            int64_t n;
            const pgrp *g = state_index(out->s[i].name, os[j].prefix, &n) ? NULL : pgrp_find(&os[j], n);
            if (g) out->s[i].optim = &out->groups[g->group];
            state |= !strncmp(out->s[i].name, os[j].prefix, strlen(os[j].prefix));
        }
        if (!out->s[i].optim && !state) out->s[i].optim = lr_only;
    }
    for (size_t j = 0; j < no; j++) {
        free(os[j].prefix);
        free(os[j].pg);
    }
    free(it.by);
    return r == R_OK ? PKL_OK : PKL_NOMEM;
}

static void vm_init(pk *k, const uint8_t *p, size_t len)
{
    memset(k, 0, sizeof(*k));
    k->p = p;
    k->len = len;
    k->limit = len + 16;
    k->list_id = NIL;
}

static void vm_free(pk *k)
{
    free(k->o);
    free(k->items);
    free(k->stack);
    free(k->marks);
    free(k->memo);
    free(k->rec);
    free(k->list);
    free(k->kv);
}

static pkl_status vm_status(int r) { return r == R_NEED ? PKL_NEED : r == R_BAD ? PKL_BAD : PKL_NOMEM; }

/* Whether p[0..len) holds the bytes of w. */
static int holds(const uint8_t *p, size_t len, const char *w)
{
    size_t n = strlen(w);
    for (const uint8_t *q = p; len >= n && (q = memchr(q, w[0], len - n + 1 - (size_t)(q - p))) != NULL; q++)
        if (!memcmp(q, w, n)) return 1;
    return 0;
}

pkl_status pkl_torch_storages(const uint8_t *p, size_t len, pkl_storages *out, size_t *end)
{
    memset(out, 0, sizeof(*out));
    if (len > (size_t)UINT32_MAX - 64) return PKL_BAD;
    pk k;
    vm_init(&k, p, len);
    k.keep_items = holds(p, len, "param_groups");
    uint32_t root = NIL;
    int r = run(&k, &root);
    pkl_status s;
    if (r == R_OK) {
        *end = k.pos;
        s = build(&k, root, out);
        if (s == PKL_OK && (s = optim_groups(&k, root, out)) != PKL_OK) pkl_storages_free(out);
    } else {
        s = vm_status(r);
    }
    vm_free(&k);
    return s;
}

void pkl_strs_free(pkl_strs *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->s[i]);
    free(t->s);
    t->s = NULL;
    t->n = 0;
}

/* The items of the root list: every one a string without NUL, at most 4096 bytes. */
static pkl_status str_items(const pk *k, uint32_t root, pkl_strs *out)
{
    if (root != k->list_id || k->o[root].kind != O_LIST || k->o[root].a != k->nlist) return PKL_BAD;
    for (size_t i = 0; i < k->nlist; i++) {
        const pobj *o = &k->o[k->list[i]];
        if (o->kind != O_STR || o->b > 4096 || memchr(k->p + o->a, '\0', o->b)) return PKL_BAD;
    }
    out->s = calloc(k->nlist ? k->nlist : 1, sizeof(char *));
    if (!out->s) return PKL_NOMEM;
    for (size_t i = 0; i < k->nlist; i++, out->n++) {
        const pobj *o = &k->o[k->list[i]];
        if (!(out->s[i] = malloc((size_t)o->b + 1))) {
            pkl_strs_free(out);
            return PKL_NOMEM;
        }
        memcpy(out->s[i], k->p + o->a, o->b);
        out->s[i][o->b] = '\0';
    }
    return PKL_OK;
}

pkl_status pkl_str_list(const uint8_t *p, size_t len, pkl_strs *out, size_t *end)
{
    memset(out, 0, sizeof(*out));
    if (len > (size_t)UINT32_MAX - 64) return PKL_BAD;
    pk k;
    vm_init(&k, p, len);
    k.collect = 1;
    uint32_t root = NIL;
    int r = run(&k, &root);
    pkl_status s = vm_status(r);
    if (r == R_OK) {
        *end = k.pos;
        s = str_items(&k, root, out);
    }
    vm_free(&k);
    return s;
}

const pkl_storage *pkl_find(const pkl_storages *t, const uint8_t *key, size_t key_len)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *s = t->s[mid].key;
        size_t sl = strlen(s), n = sl < key_len ? sl : key_len;
        int c = memcmp(s, key, n);
        if (!c) c = sl < key_len ? -1 : sl > key_len;
        if (!c) return &t->s[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}
