/* prefault.h — a destination's pages made writable before a decoder fills it.
 *
 * A destination just allocated (the tensors of a restore, ckpz_decompress_buffer's
 * output in a new buffer) has no pages yet, and the decoder's first store to each 4 KiB
 * page takes a fault. On Linux x86-64 the faults cost more than the stores themselves:
 * writing 14 MiB of fresh anonymous memory took 4.4 ms page by page and 1.8 ms with each
 * MiB populated in one call first (MADV_POPULATE_WRITE, Linux 5.14). mem_prefault asks
 * for the whole pages inside [p, p + n) of 64 KiB or more that way, when the first of
 * them is not there yet (mincore): memory in use, such as a buffer reused chunk after
 * chunk, is left alone, since asking for pages already there cost a decoder 13-20 % (a restore
 * of 14 MB into a reused buffer). The contents are never touched. On another system, or a
 * kernel without the advice (asked once), it does nothing; a range the kernel cannot
 * populate is left to fault in as before; errno is kept.
 */
#ifndef CKPZ_PREFAULT_H
#define CKPZ_PREFAULT_H

#include <stddef.h>

void mem_prefault(void *p, size_t n);

#endif
