/* torch_legacy.h — torch.save's legacy format, read for the torch row (torch.c).
 *
 * A legacy file (torch < 1.6, or torch.save(..., _use_new_zipfile_serialization=False))
 * is five pickles and then the storages: the magic number 0x1950a86a20f9469cfc6c, the
 * protocol version (1001), the writer's sys_info (little_endian, type sizes), the object
 * (each storage a persistent id ('storage', type, key, location, numel, None)), the list
 * of storage keys; then, for each key of that list in its order, an 8-byte
 * little-endian element count and the storage's bytes.
 */
#ifndef CKPZ_TORCH_LEGACY_H
#define CKPZ_TORCH_LEGACY_H

#include <stddef.h>
#include <stdint.h>

#include "formats.h"

typedef struct legacy_state legacy_state;

/* Does p[0..len) start with the magic number's pickle? 1: yes; -1: the bytes at hand are
 * too few to tell, but they start like one; 0: no. */
int torch_legacy_sniff(const uint8_t *p, size_t len);

/* fmt_reader.describe for a prefix torch_legacy_sniff accepts: the pickles are opaque,
 * each storage whose count and bytes the pickles vouch for is a tensor, and the list
 * ends with a resume segment at the next count not in the prefix. On FMT_DONE, *state
 * (NULL when none is needed) is what torch_legacy_resume continues with. */
fmt_status torch_legacy_describe(const uint8_t *p, size_t len, uint64_t total, fmt_list *out, size_t *need, char *why,
                                 size_t whylen, legacy_state **state);
/* fmt_reader.resume: the storages from the count at `at` on. */
fmt_status torch_legacy_resume(legacy_state *lg, fmt_list *l, uint64_t at, const uint8_t *p, size_t len, int eof,
                               size_t *need);
void torch_legacy_free(legacy_state *lg);

#endif
