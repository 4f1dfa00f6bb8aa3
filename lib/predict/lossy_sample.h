/* lossy_sample.h — what a lossy setting does to a tensor, measured on its sample.
 *
 * The sample's windows go through the compressor's own quantiser (quant_forward), with
 * the plan the compressor would derive for the tensor (lib/codec/plan.c, plan_entry),
 * the sample standing in for the whole tensor where the plan needs it (rel's value
 * range, extrapolated to the tensor's size; prune's threshold). The code planes it
 * writes are what the entropy stage would code, so their order-0 entropy, the group
 * parameters and the exceptions give a close estimate of the coded size; the model
 * learns what is left (the entropy stage's adaptivity, fixed costs, the tails the
 * sample missed).
 */
#ifndef CKPZ_PREDICT_LOSSY_SAMPLE_H
#define CKPZ_PREDICT_LOSSY_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "predict/features.h"
#include "transforms/quant.h"

typedef struct lossy_sampler lossy_sampler; /* working memory, reused across tensors */

lossy_sampler *lossy_sampler_create(void);
void lossy_sampler_free(lossy_sampler *s);

/* Codes the sample of a tensor (dtype t, ndim dimensions of shape[], `length` bytes)
 * with spec: the nw windows (woff[k], wlen[k] bytes from the tensor's start) are back
 * to back in p; at most max_bytes of them are coded (the start of each window, in equal
 * shares: the quantiser is slower than the feature pass). Returns 1 with *l filled when the compressor would code the tensor
 * lossily; 0 when it would code it exactly (spec lossless, change-rel with no base, a
 * zero bound, max-mae exceeded, or codes no smaller than the elements on most of the
 * sample); -1 when out of memory. */
int lossy_sample(lossy_sampler *s, const quant_spec *spec, ckpz_dtype t, uint32_t ndim, const uint64_t *shape,
                 uint64_t length, const uint8_t *p, const uint64_t *woff, const size_t *wlen, unsigned nw,
                 size_t max_bytes, feat_lossy *l);

#endif
