/* policy.h — which tensors are coded lossily, and how.
 *
 * A policy is a list of rules, one per line, first match wins:
 *
 *     PATTERN  MODE [OPTIONS]        # comment
 *
 * PATTERN is a shell glob on the tensor name (fnmatch: `*`, `?`, `[...]`); MODE is
 * `lossless`, `auto [K]` (each tensor's mode and bound from its role: auto.h), `abs E`, `rel R`, `pointwise-rel R`, `int8` (per-channel: one scale per
 * row) or `bits 8|16` (blockwise: one offset and scale per block of 64 elements);
 * OPTIONS are `sym`/`asym`, `block N`, `per-channel`, `pct P` (calibrate to the P-th
 * percentile instead of min-max), `prune RATE` (set the RATE smallest magnitudes to
 * zero; with a base, the smallest changes), `max-mae X`, and on any rule `level N`
 * (1..9: the entropy level of the tensor's chunks, lossless ones too). A tensor no rule
 * matches stays lossless at the file's level.
 *
 * Whatever the rules say, some tensors always stay lossless, because small errors in
 * them do outsized harm and they are a small share of a checkpoint: integer and bool
 * tensors, tensors with fewer than two dimensions (biases, norm gains, scalars such as
 * the optimizer's step count), and names containing "norm", "bias" or "ln_".
 */
#ifndef CKPZ_POLICY_H
#define CKPZ_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"
#include "transforms/quant.h"

typedef struct policy policy;

/* Parses rules; default_max_mae applies to rules without their own max-mae. Returns
 * NULL with the reason ("line 3: ...") in why on a syntax error or out of memory. */
policy *policy_parse(const char *text, double default_max_mae, char *why, size_t whylen);
void policy_free(policy *p);

/* The spec for one tensor; mode QM_NONE = lossless. The matching rule's level holds
 * for the tensors that stay lossless below too. beta2: Adam's beta2 the input file gives
 * for this tensor (its optimizer's param group, formats.h fmt_optim), or 0: an auto rule
 * without its own `beta2 B` takes it, one with it keeps its own. */
quant_spec policy_match(const policy *p, const char *name, ckpz_dtype dtype, uint32_t ndim, const uint64_t *shape,
                        double beta2);

/* 1 when some rule has a lossy mode (a file coded with the policy may be lossy). */
int policy_lossy(const policy *p);

#endif
