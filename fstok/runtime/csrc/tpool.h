/* A persistent pool of worker threads for the long-text paths (one per extension module).
 *
 * Why: run_bounds used to pthread_create its workers on every call and join them at the end.  On the
 * 16-core lent machine that cost 0.2-0.9 ms a call (spawn 0.25-0.9 ms, join after the last piece up to
 * 0.5 ms; FSTOK_TRACE_THREADS=1), against 0.4 ms for the whole 16-thread budget of a 1 MB English text
 * (one-shot 3 ms).  Pool threads sleep on a condition variable between jobs (no CPU while idle), are
 * started on first need, at most one per online CPU (more cannot run at once), and the pool shrinks again:
 * the newest thread exits after TP_IDLE_SECONDS without a job, then the next newest, so an occasional
 * large num_threads leaves no threads (nor their stacks) behind; after fork() the child starts with an
 * empty pool (its parent's threads do not exist there).
 *
 * One job at a time: tp_start returns -1 while another job runs (a second Python thread encoding a long
 * text meanwhile); that caller starts threads of its own as before. */
#ifndef FSTOK_TPOOL_H
#define FSTOK_TPOOL_H
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* workers: a slot of the current job is free */
    pthread_cond_t done_cv; /* the caller: every worker of the job has returned */
    int nthreads;           /* pool threads alive */
    void *(*fn)(void *);
    void *arg;
    int want, taken, running; /* the current job: workers asked for, slots taken, workers not yet returned */
    int busy;
    int atfork_set;
} fstok_tpool;

static fstok_tpool tp_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
                              0, NULL, NULL, 0, 0, 0, 0, 0};

/* A pool thread's index (0, 1, ... in start order; -1 on any other thread).  A job's fn may use it to keep
 * per-worker state between jobs: a worker that finds its own pre-token memo again finds it in its core's
 * cache, where a memo borrowed from a shared pool was last written by another core (see mod_bpe.c). */
#define TP_MAX_THREADS 256
static __thread int tp_index = -1;
static inline __attribute__((unused)) int tp_worker_index(void) { return tp_index; }

static void tp_after_fork_child(void) {
    pthread_mutex_init(&tp_pool.mu, NULL);
    pthread_cond_init(&tp_pool.work_cv, NULL);
    pthread_cond_init(&tp_pool.done_cv, NULL);
    tp_pool.nthreads = tp_pool.want = tp_pool.taken = tp_pool.running = tp_pool.busy = 0;
}

#define TP_IDLE_SECONDS 10

/* the most pool threads: the online CPUs (at least 1, at most TP_MAX_THREADS) */
static inline int tp_cpu_limit(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > TP_MAX_THREADS) n = TP_MAX_THREADS;
    return (int)n;
}

static void *tp_main(void *index) {
    tp_index = (int)(intptr_t)index;
    pthread_mutex_lock(&tp_pool.mu);
    for (;;) {
        while (tp_pool.taken >= tp_pool.want) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += TP_IDLE_SECONDS;
            if (pthread_cond_timedwait(&tp_pool.work_cv, &tp_pool.mu, &until) != 0 && tp_pool.taken >= tp_pool.want &&
                !tp_pool.busy && tp_index == tp_pool.nthreads - 1) {
                /* idle: the newest thread leaves (indexes stay 0..nthreads-1 for the per-worker state) */
                tp_pool.nthreads--;
                pthread_mutex_unlock(&tp_pool.mu);
                return NULL;
            }
        }
        tp_pool.taken++;
        void *(*fn)(void *) = tp_pool.fn;
        void *arg = tp_pool.arg;
        pthread_mutex_unlock(&tp_pool.mu);
        fn(arg);
        pthread_mutex_lock(&tp_pool.mu);
        if (--tp_pool.running == 0) pthread_cond_signal(&tp_pool.done_cv);
    }
    return NULL;
}

/* Run fn(arg) on n pool threads (fewer if threads cannot be started).  Returns how many run it (the caller
 * must then tp_wait()), or -1 when the pool is busy with another job (nothing started; no tp_wait). */
static inline __attribute__((unused)) int tp_start(void *(*fn)(void *), void *arg, int n) {
    pthread_mutex_lock(&tp_pool.mu);
    if (tp_pool.busy) {
        pthread_mutex_unlock(&tp_pool.mu);
        return -1;
    }
    if (!tp_pool.atfork_set) {
        pthread_atfork(NULL, NULL, tp_after_fork_child);
        tp_pool.atfork_set = 1;
    }
    if (n > 0 && tp_pool.nthreads < n) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (n > tp_cpu_limit()) n = tp_cpu_limit();
        while (tp_pool.nthreads < n) {
            pthread_t t;
            if (pthread_create(&t, &at, tp_main, (void *)(intptr_t)tp_pool.nthreads) != 0) break;
            tp_pool.nthreads++;
        }
        pthread_attr_destroy(&at);
    }
    if (n > tp_pool.nthreads) n = tp_pool.nthreads;
    if (n < 0) n = 0;
    tp_pool.busy = 1;
    tp_pool.fn = fn;
    tp_pool.arg = arg;
    tp_pool.taken = 0;
    tp_pool.want = tp_pool.running = n;
    if (n > 0) pthread_cond_broadcast(&tp_pool.work_cv);
    pthread_mutex_unlock(&tp_pool.mu);
    return n;
}

/* after tp_start returned >= 0: wait until every worker of the job has returned (blocks: no GIL) */
static inline __attribute__((unused)) void tp_wait(void) {
    pthread_mutex_lock(&tp_pool.mu);
    while (tp_pool.running > 0) pthread_cond_wait(&tp_pool.done_cv, &tp_pool.mu);
    tp_pool.want = tp_pool.taken = 0;
    tp_pool.busy = 0;
    pthread_mutex_unlock(&tp_pool.mu);
}
#endif
