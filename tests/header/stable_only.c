/* stable_only.c — a program of the stable API (include/ckpz.h without CKPZ_EXPERIMENTAL),
 * compiled by tests/header/check.sh in several ways: as is, it must build warning-free;
 * each -DUSE_* adds one use that must not build (an experimental name, unseen without the
 * opt-in) or must warn (a deprecated field), and builds again where the opt-in is given. */
#include <ckpz.h>

int main(void)
{
    ckpz_ctx *ctx = ckpz_ctx_create();
    ckpz_params p;
    ckpz_params_init(&p);
    ckpz_stats st = {.struct_size = sizeof st};
    ckpz_mem in = {.data = "abc", .size = 3}, out = {.grow = 1};
    ckpz_source s;
    ckpz_sink k;
    ckpz_source_mem(&s, &in);
    ckpz_sink_mem(&k, &out);
    int bad = ckpz_compress_io(ctx, &p, &s, &k, &st) != CKPZ_OK || st.original_bytes != 3;
#ifdef USE_SPLIT
    ckpz_split *sp = NULL;
    bad |= ckpz_split_plan(ctx, &p, &s, &sp) != CKPZ_OK;
    ckpz_split_free(sp);
#endif
#ifdef USE_ZIP
    ckpz_zip_options o;
    ckpz_zip_options_init(&o);
#endif
#ifdef USE_PREDICT
    bad |= ckpz_predict_feature_name(0) == NULL;
#endif
#ifdef USE_TUNE
    ckpz_tune_result r = {.struct_size = sizeof r};
    bad |= r.level != 0;
#endif
#ifdef USE_INTERNAL_SPLIT
    bad |= split_write != 0; /* internal: in no header a program sees */
#endif
#ifdef USE_DEPRECATED
    p.progress = 0;
#endif
    ckpz_free(out.data);
    ckpz_ctx_free(ctx);
    return bad;
}
