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
 * text meanwhile); that caller starts threads of its own as before.
 *
 * Waking: a job is posted with atomics (its slots, a generation counter) and a worker takes a slot with a
 * compare-and-swap, not under the mutex; the mutex and condition variables are only for sleeping.  A worker
 * that finished a job watches the generation for TP_SPIN_US before it sleeps, and the caller of a batch wakes
 * sleeping workers before its own preparation (tp_prewake), so they are awake when the job is posted.  Why:
 * on the 16-core lent machine a batch call of 1024 short lines is ~0.1 ms of work per thread, and waking 15
 * threads from the condition variable -- each then queueing for the mutex the broadcast woke them all onto --
 * was a large part of each call.  The spin costs at most TP_SPIN_US of CPU per thread and job, and none
 * once the pool idles (FSTOK_POOL_SPIN_US=0 turns it off). */
#ifndef FSTOK_TPOOL_H
#define FSTOK_TPOOL_H
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TP_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define TP_PAUSE() __asm__ __volatile__("yield")
#else
#define TP_PAUSE() ((void)0)
#endif

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* sleeping workers: a job was posted (or tp_prewake) */
    pthread_cond_t done_cv; /* the caller: every worker of the job has returned */
    int nthreads;           /* pool threads alive (mu) */
    int sleepers;           /* workers waiting on work_cv (mu) */
    int busy;               /* a job is posted and not yet waited for (mu) */
    int atfork_set;
    unsigned wake;          /* bumped by tp_prewake (mu): sleepers wake up and spin */
    void *(*_Atomic fn)(void *);
    void *_Atomic arg;
    atomic_int slots;       /* the current job's slots not taken yet */
    atomic_int running;     /* the current job's workers not yet returned */
    atomic_uint gen;        /* bumped when a job is posted (after fn, arg, slots, running) */
} fstok_tpool;

static fstok_tpool tp_pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, 0, 0,
                              NULL, NULL, 0, 0, 0};

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
    tp_pool.nthreads = tp_pool.sleepers = tp_pool.busy = 0;
    atomic_store(&tp_pool.slots, 0);
    atomic_store(&tp_pool.running, 0);
}

#define TP_IDLE_SECONDS 10
#define TP_SPIN_US_DEFAULT 100

/* how long a worker watches for the next job before it sleeps (FSTOK_POOL_SPIN_US, read once) */
static inline long tp_spin_ns(void) {
    static long ns = -1;
    if (ns < 0) {
        const char *e = getenv("FSTOK_POOL_SPIN_US");
        long us = e && *e ? atol(e) : TP_SPIN_US_DEFAULT;
        ns = us < 0 ? 0 : us > 100000 ? 100000000L : us * 1000L;
    }
    return ns;
}

static inline long long tp_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* spin until *v != old (1) or for tp_spin_ns (0) */
static int tp_spin_uint(atomic_uint *v, unsigned old) {
    long ns = tp_spin_ns();
    if (!ns) return 0;
    long long until = tp_now_ns() + ns;
    for (unsigned k = 1;; k++) {
        if (atomic_load_explicit(v, memory_order_acquire) != old) return 1;
        TP_PAUSE();
        if (!(k & 63) && tp_now_ns() > until) return 0;
    }
}

/* the most pool threads: the CPUs this process may run on (its affinity mask; at least 1, at most
 * TP_MAX_THREADS): more cannot run at once */
static inline int tp_cpu_limit(void) {
    long n = 0;
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
#endif
    if (n < 1) n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    if (n > TP_MAX_THREADS) n = TP_MAX_THREADS;
    return (int)n;
}

/* take a slot of the current job: 1 if taken */
static inline int tp_take(void) {
    int s = atomic_load_explicit(&tp_pool.slots, memory_order_acquire);
    while (s > 0)
        if (atomic_compare_exchange_weak_explicit(&tp_pool.slots, &s, s - 1, memory_order_acq_rel, memory_order_acquire))
            return 1;
    return 0;
}

static void *tp_main(void *index) {
    tp_index = (int)(intptr_t)index;
    /* the generation this thread has taken part in (or seen with no slot left): it waits for a newer one */
    unsigned seen = atomic_load_explicit(&tp_pool.gen, memory_order_acquire);
    int spin = 1;
    if (tp_take()) goto run; /* (started for the job being posted) */
    for (;;) {
        if (!(spin && tp_spin_uint(&tp_pool.gen, seen))) {
            pthread_mutex_lock(&tp_pool.mu);
            unsigned wake = tp_pool.wake;
            while (atomic_load_explicit(&tp_pool.gen, memory_order_acquire) == seen && tp_pool.wake == wake) {
                struct timespec until;
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += TP_IDLE_SECONDS;
                tp_pool.sleepers++;
                int r = pthread_cond_timedwait(&tp_pool.work_cv, &tp_pool.mu, &until);
                tp_pool.sleepers--;
                if (r != 0 && atomic_load_explicit(&tp_pool.gen, memory_order_acquire) == seen && !tp_pool.busy &&
                    tp_index == tp_pool.nthreads - 1) {
                    /* idle: the newest thread leaves (indexes stay 0..nthreads-1 for the per-worker state) */
                    tp_pool.nthreads--;
                    pthread_mutex_unlock(&tp_pool.mu);
                    return NULL;
                }
            }
            int woken = tp_pool.wake != wake && atomic_load_explicit(&tp_pool.gen, memory_order_acquire) == seen;
            pthread_mutex_unlock(&tp_pool.mu);
            if (woken) { /* tp_prewake: a job is coming; watch for it */
                spin = 1;
                continue;
            }
        }
        seen = atomic_load_explicit(&tp_pool.gen, memory_order_acquire);
        spin = 0;
        if (!tp_take()) continue;
    run : {
        void *(*fn)(void *) = atomic_load_explicit(&tp_pool.fn, memory_order_relaxed);
        void *arg = atomic_load_explicit(&tp_pool.arg, memory_order_relaxed);
        fn(arg);
        spin = 1;
        if (atomic_fetch_sub_explicit(&tp_pool.running, 1, memory_order_acq_rel) == 1) {
            pthread_mutex_lock(&tp_pool.mu);
            pthread_cond_signal(&tp_pool.done_cv);
            pthread_mutex_unlock(&tp_pool.mu);
        }
    }
    }
    return NULL;
}

/* Wake sleeping pool threads to watch for a job the caller is about to post (it prepares the job meanwhile):
 * a cheap no-op when none sleeps or the pool is busy.  No GIL needed. */
static inline __attribute__((unused)) void tp_prewake(int n) {
    if (n <= 0 || !tp_spin_ns()) return;
    pthread_mutex_lock(&tp_pool.mu);
    if (!tp_pool.busy && tp_pool.sleepers > 0) {
        tp_pool.wake++;
        pthread_cond_broadcast(&tp_pool.work_cv);
    }
    pthread_mutex_unlock(&tp_pool.mu);
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
    if (n < 0) n = 0;
    if (n > tp_pool.nthreads) {
        int lim = tp_cpu_limit();
        if (n > lim) n = lim > tp_pool.nthreads ? lim : tp_pool.nthreads;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        while (tp_pool.nthreads < n) { /* (a new thread takes a slot of the job posted below as it starts) */
            pthread_t t;
            if (pthread_create(&t, &at, tp_main, (void *)(intptr_t)tp_pool.nthreads) != 0) break;
            tp_pool.nthreads++;
        }
        pthread_attr_destroy(&at);
        if (n > tp_pool.nthreads) n = tp_pool.nthreads;
    }
    tp_pool.busy = 1;
    atomic_store_explicit(&tp_pool.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&tp_pool.arg, arg, memory_order_relaxed);
    atomic_store_explicit(&tp_pool.running, n, memory_order_relaxed);
    atomic_store_explicit(&tp_pool.slots, n, memory_order_release);
    atomic_fetch_add_explicit(&tp_pool.gen, 1, memory_order_release);
    if (n > 0 && tp_pool.sleepers > 0) pthread_cond_broadcast(&tp_pool.work_cv);
    pthread_mutex_unlock(&tp_pool.mu);
    return n;
}

/* after tp_start returned >= 0: wait until every worker of the job has returned (blocks: no GIL) */
static inline __attribute__((unused)) void tp_wait(void) {
    long ns = tp_spin_ns();
    if (ns && atomic_load_explicit(&tp_pool.running, memory_order_acquire) > 0) {
        long long until = tp_now_ns() + ns;
        for (unsigned k = 1; atomic_load_explicit(&tp_pool.running, memory_order_acquire) > 0; k++) {
            TP_PAUSE();
            if (!(k & 63) && tp_now_ns() > until) break;
        }
    }
    pthread_mutex_lock(&tp_pool.mu);
    while (atomic_load_explicit(&tp_pool.running, memory_order_acquire) > 0) pthread_cond_wait(&tp_pool.done_cv, &tp_pool.mu);
    atomic_store_explicit(&tp_pool.slots, 0, memory_order_relaxed);
    tp_pool.busy = 0;
    pthread_mutex_unlock(&tp_pool.mu);
}
#endif
