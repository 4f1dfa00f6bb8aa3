/* xform.c — the transform registry (xform.h): one row per transform id. A new transform
 * is a file with its encoder, decoder and scratch size, and a row here. */
#include "xform.h"

#define ROW(id_, name_, lossy_, scr, enc, dec) \
    [id_] = {.id = id_, .name = name_, .lossy = lossy_, .scratch = scr, .encode = enc, .decode = dec}
static const xf_desc transforms[XF_ID_LIMIT] = {
    ROW(XF_NONE, "none", 0, xf_lossless_scratch, xf_lossless_encode, xf_bytes_decode),
    ROW(XF_FLOAT, "float", 0, xf_lossless_scratch, xf_lossless_encode, xf_bytes_decode),
    ROW(XF_INT, "int", 0, xf_lossless_scratch, xf_lossless_encode, xf_bytes_decode),
    ROW(XF_QUANT, "quant", 1, xf_quant_scratch, xf_quant_encode, xf_quant_decode),
    ROW(XF_ESC, "escape", 0, xf_lossless_scratch, xf_lossless_encode, xf_esc_decode),
    ROW(XF_Q8, "q8", 0, xf_q8_scratch, xf_q8_encode, xf_q8_decode),
};
#undef ROW

const xf_desc *xf_get(unsigned id) { return id < XF_ID_LIMIT && transforms[id].decode ? &transforms[id] : NULL; }

size_t xf_scratch_bound(size_t n, int lossy)
{
    size_t most = 0;
    for (unsigned id = 0; id < XF_ID_LIMIT; id++) {
        const xf_desc *t = xf_get(id);
        if (t && (lossy || !t->lossy) && t->scratch(n) > most) most = t->scratch(n);
    }
    return most;
}

size_t xf_coded_bound(size_t n, size_t desc) { return XF_MAX_PLANES * desc + xf_bytes_coded(n); }
