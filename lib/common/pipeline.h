/* pipeline.h — an ordered parallel map: jobs are submitted in order, run on a fixed set
 * of worker threads in any order, and retired in submission order. Compression and
 * decompression both use it the same way: the calling thread reads the next input,
 * submits it, and when `depth` jobs are in flight retires the oldest and writes its
 * output, so reading, coding and writing overlap while memory stays bounded by depth
 * job buffers; while it waits it codes queued jobs itself. With zero workers, jobs run
 * inline on the calling thread at submission (the one-thread path costs no locking or
 * thread switches). */
#ifndef CKPZ_PIPELINE_H
#define CKPZ_PIPELINE_H

#include <stddef.h>

typedef struct pipeline pipeline;
/* Runs one job as worker `worker`: 0..workers-1 for the worker threads, `workers` for the
 * calling thread, which runs queued jobs while it waits in pipeline_retire (and every
 * job, inline, when workers == 0). Callers keep workers + 1 sets of scratch. */
typedef void (*pipeline_fn)(void *job, int worker, void *arg);

/* NULL when out of memory. The workers start at the second submitted job (an input of
 * one job runs on the caller alone); one that cannot start leaves its share to the rest. */
pipeline *pipeline_create(int workers, size_t depth, pipeline_fn fn, void *arg);
/* The jobs a call keeps in flight for `threads` coding threads, the caller included: 1
 * for one (each job runs at submission), else three per thread and two more. The two
 * cover the calling thread's own stalls: while it writes a retired job or codes a queued
 * one it took while waiting, it submits nothing, and without them the workers ran out of
 * queued jobs (compressing 309 MB of BF16/FP16 tensors of many sizes from a mapped file
 * with two threads, 11 % faster with them; a file of 1 MiB chunks alike, and the
 * decoders, unchanged). */
size_t pipeline_depth(int threads);
/* Queues a job; the caller must first retire one if pipeline_pending() == depth. */
void pipeline_submit(pipeline *p, void *job);
/* The same for a job that costs less than handing it to another core (a stored chunk:
 * a checksum, at most a copy): runs it at once on the calling thread, as worker
 * `workers`, and queues it done, retired in its place. Starts no thread. With
 * pipeline_retire_done the caller then writes it out while its bytes are in cache, not
 * after depth - 1 more chunks (a stored .ckpz of 50 MB restored through pipes with two
 * threads on 2 cores: 35-36 ms against 42-45 handed to a worker and written late). */
void pipeline_submit_here(pipeline *p, void *job);
/* The oldest unretired job if it is done, else NULL (no wait). */
void *pipeline_retire_done(pipeline *p);
/* Waits for the oldest unretired job and returns it; NULL if none are pending. */
void *pipeline_retire(pipeline *p);
size_t pipeline_pending(const pipeline *p);
/* Waits for running jobs, stops the workers. Accepts NULL. */
void pipeline_destroy(pipeline *p);

#endif
