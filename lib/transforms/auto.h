/* auto.h — the policy mode `auto [K]`: each tensor's bound set from what it is.
 *
 * A checkpoint of a model trained with Adam holds, per parameter, a weight and two
 * moments; each tolerates a different error, for a different reason:
 *   - a weight's error never fades (training goes on from it), but a weight moves by
 *     about the learning rate per step, so an error measured against its change since
 *     the base (change-rel, rounded without bias so that every update survives on
 *     average) costs about as little as the steps in between can bear;
 *   - exp_avg (m) is rebuilt by the optimizer in ~1/(1 - beta1) steps (10 for 0.9) and is
 *     not predicted by a base tens of steps old, so it is coded stand-alone on the log
 *     grid, its smallest magnitudes (the steps that barely move their weight) pruned;
 *   - exp_avg_sq (v) divides each step: it is coded on the log grid against the base
 *     (v moves slowly in log terms), never pruned, so none becomes zero or negative;
 *     an error in it fades in ~1/(1 - beta2) steps.
 * Everything else stays exact: integer and bool tensors, tensors of fewer than two
 * dimensions (biases, norm gains, step counts) but Adam's moments of them, small
 * tensors (< AUTO_MIN_ELEMS elements; 1-D moments < AUTO_MIN_MOMENT_1D), names of norms and biases, and optimizer state
 * other than Adam's moments. The moments of a 1-D parameter are coded as any moment
 * (torch.save's `optimizer.state.N.exp_avg` does not say whether N is a bias or a
 * norm's gain, and their errors fade as every moment's do) from AUTO_MIN_MOMENT_1D
 * elements; the parameter itself stays exact. Kept exact, they cost ~31 bits per element
 * in a delta file, where a moment costs ~2-3. Tensors of >= 2 dimensions are lossy from
 * AUTO_MIN_ELEMS (256): a CNN's first conv and head (864 and 1,280 elements, with their
 * moments) kept exact took ~1.9 of a default-size CNN's ~10 bits per parameter; lossy,
 * bench/resume-matrix with three runs B per seed passes the cells it passed with them
 * exact, and the CNN's files are 17-21% smaller (doc/lossy.md "Small tensors").
 *
 * Roles come from names only as they appear in torch.save files
 * (`optimizer.state.16.exp_avg`), safetensors (`*.exp_avg_sq`) and distributed
 * checkpoints (`state.N.*`, `optim.*`). The knob K (tight 0.25, default 1, aggressive 4,
 * or a number in AUTO_K_MIN..AUTO_K_MAX) scales every bound together; the file format
 * does not change: auto only chooses among the existing lossy modes. */
#ifndef CKPZ_AUTO_H
#define CKPZ_AUTO_H

#include <stddef.h>
#include <stdint.h>

#include "ckpz.h"
#include "transforms/quant.h"

typedef enum auto_role { AUTO_EXACT = 0, AUTO_WEIGHT, AUTO_EXP_AVG, AUTO_EXP_AVG_SQ, AUTO_ROLE_COUNT_ } auto_role;

/* The fewest elements of a lossy tensor, and of a lossy moment of a 1-D parameter. */
#define AUTO_MIN_ELEMS 256
#define AUTO_MIN_MOMENT_1D 64
#define AUTO_K_MIN (1.0 / 64)
#define AUTO_K_MAX 16.0

/* The role of a tensor, and in *why (a static string) the reason for it. */
auto_role auto_role_of(const char *name, ckpz_dtype dtype, uint32_t ndim, const uint64_t *shape, const char **why);
const char *auto_role_name(auto_role r);

/* The knob from a word: tight, default, aggressive or a number in AUTO_K_MIN..AUTO_K_MAX
 * (NULL: default). Returns 0, or -1 with the reason in why. */
int auto_knob(const char *word, double *k, char *why, size_t whylen);

/* Adam's beta2 at or below which v is renewed fast enough (~1/(1 - beta2) <= 100 steps)
 * that rounding it to nearest does not hold it back between restores. */
#define AUTO_BETA2_FAST 0.99

/* The coding of a tensor of role r at knob k (mode QM_NONE for AUTO_EXACT); beta2: the
 * optimizer's, when known (a policy rule's `beta2 B`), else 0. */
quant_spec auto_spec(auto_role r, double k, double beta2);

#endif
