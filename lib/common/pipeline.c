/* pipeline.c — see pipeline.h. One mutex guards a ring of job slots; workers take the
 * oldest queued slot, the caller waits on the oldest slot's completion. Jobs are coarse
 * (a chunk of 64 KiB or more), so one lock is not a bottleneck. The worker threads start
 * when a second job is submitted: an input of one chunk never pays for starting them
 * (about 50 us each, more than coding a small chunk), and a thread that cannot be started
 * leaves its work to the others and the caller. */
#include "pipeline.h"

#include <pthread.h>
#include <stdlib.h>

enum { SLOT_QUEUED, SLOT_RUNNING, SLOT_DONE };

struct pipeline {
    pthread_mutex_t mu;
    pthread_cond_t work;  /* a job was queued, or stop */
    pthread_cond_t done;  /* a job finished */
    pthread_t *threads;
    int workers, started, tried, stop; /* threads wanted, threads running, start tried */
    size_t depth, head, count, next_queued; /* ring: [head, head+count) submitted, unretired */
    void **job;
    int *state;
    pipeline_fn fn;
    void *arg;
};

struct worker_arg {
    pipeline *p;
    int id;
};

/* The next queued slot (workers and a waiting caller take them in order), passing over
 * jobs submitted done (pipeline_submit_here); 0 with none. Under the mutex. */
static int take_queued(pipeline *p, size_t *slot)
{
    while (p->next_queued < p->head + p->count && p->state[p->next_queued % p->depth] == SLOT_DONE) p->next_queued++;
    if (p->next_queued == p->head + p->count) return 0;
    *slot = p->next_queued++ % p->depth;
    p->state[*slot] = SLOT_RUNNING;
    return 1;
}

static void *worker_main(void *v)
{
    struct worker_arg *wa = v;
    pipeline *p = wa->p;
    int id = wa->id;
    free(wa);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        size_t slot;
        while (!take_queued(p, &slot)) {
            if (p->stop) goto out; /* stop, nothing queued */
            pthread_cond_wait(&p->work, &p->mu);
        }
        void *job = p->job[slot];
        pthread_mutex_unlock(&p->mu);
        p->fn(job, id, p->arg);
        pthread_mutex_lock(&p->mu);
        p->state[slot] = SLOT_DONE;
        pthread_cond_broadcast(&p->done);
    }
out:
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

pipeline *pipeline_create(int workers, size_t depth, pipeline_fn fn, void *arg)
{
    if (depth == 0) depth = 1;
    pipeline *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->job = calloc(depth, sizeof *p->job);
    p->state = calloc(depth, sizeof *p->state);
    p->threads = workers > 0 ? calloc((size_t)workers, sizeof *p->threads) : NULL;
    if (!p->job || !p->state || (workers > 0 && !p->threads)) goto fail;
    p->depth = depth;
    p->fn = fn;
    p->arg = arg;
    p->workers = workers > 0 ? workers : 0;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    return p;
fail:
    free(p->job);
    free(p->state);
    free(p->threads);
    free(p);
    return NULL;
}

/* Appends job to the ring in the given state (under the mutex where threads run). */
static void put(pipeline *p, void *job, int state)
{
    size_t slot = (p->head + p->count) % p->depth;
    p->job[slot] = job;
    p->state[slot] = state;
    p->count++;
}

void pipeline_submit(pipeline *p, void *job)
{
    if (p->workers == 0) {
        p->fn(job, 0, p->arg);
        put(p, job, SLOT_DONE);
        p->next_queued++;
        return;
    }
    if (p->count > 0 && !p->tried++) /* a second job: now the threads pay off */
        for (int i = 0; i < p->workers; i++) {
            struct worker_arg *wa = malloc(sizeof *wa);
            if (!wa || (wa->p = p, wa->id = i, pthread_create(&p->threads[p->started], NULL, worker_main, wa) != 0)) {
                free(wa);
                break; /* fewer threads: the caller and the others do the work */
            }
            p->started++;
        }
    pthread_mutex_lock(&p->mu);
    put(p, job, SLOT_QUEUED);
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

void pipeline_submit_here(pipeline *p, void *job)
{
    if (p->workers == 0) {
        pipeline_submit(p, job);
        return;
    }
    p->fn(job, p->workers, p->arg); /* the caller's own scratch: it runs nothing else now */
    pthread_mutex_lock(&p->mu);
    put(p, job, SLOT_DONE);
    pthread_mutex_unlock(&p->mu);
}

void *pipeline_retire_done(pipeline *p)
{
    if (p->count == 0) return NULL;
    if (p->workers > 0) pthread_mutex_lock(&p->mu);
    void *job = NULL;
    if (p->state[p->head % p->depth] == SLOT_DONE) {
        job = p->job[p->head % p->depth];
        p->head++;
        p->count--;
        /* a job submitted here is done without being taken: the cursor never points at
         * a retired position, whose slot a later job reuses */
        if (p->next_queued < p->head) p->next_queued = p->head;
    }
    if (p->workers > 0) pthread_mutex_unlock(&p->mu);
    return job;
}

void *pipeline_retire(pipeline *p)
{
    if (p->count == 0) return NULL;
    if (p->workers == 0) {
        void *job = p->job[p->head % p->depth];
        p->head++;
        p->count--;
        return job;
    }
    pthread_mutex_lock(&p->mu);
    size_t slot = p->head % p->depth;
    while (p->state[slot] != SLOT_DONE) {
        /* Rather than sleep, the caller runs a queued job itself, as worker number
         * `workers`: with N workers, N + 1 threads share the coding work. */
        size_t s;
        if (take_queued(p, &s)) {
            void *job = p->job[s];
            pthread_mutex_unlock(&p->mu);
            p->fn(job, p->workers, p->arg);
            pthread_mutex_lock(&p->mu);
            p->state[s] = SLOT_DONE;
            continue;
        }
        pthread_cond_wait(&p->done, &p->mu);
    }
    void *job = p->job[slot];
    p->head++;
    p->count--;
    if (p->next_queued < p->head) p->next_queued = p->head; /* as in pipeline_retire_done */
    pthread_mutex_unlock(&p->mu);
    return job;
}

size_t pipeline_depth(int threads) { return threads > 1 ? (size_t)threads * 3 + 2 : 1; }

size_t pipeline_pending(const pipeline *p) { return p->count; }

void pipeline_destroy(pipeline *p)
{
    if (!p) return;
    if (p->workers > 0) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->work);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->work);
        pthread_cond_destroy(&p->done);
    }
    free(p->job);
    free(p->state);
    free(p->threads);
    free(p);
}
