/* Many texts, or one long text cut into pieces, on threads: the work queue each thread takes texts from
 * (batch_worker; the list batch's blocks with their records: wb_job), starting and joining workers (the persistent pool of tpool.h, else threads of the call),
 * the parallel copy of the pieces' ids, and where a long text may be cut (wp_cut_ok, wp_find_cuts).
 * Python-free; the module releases the GIL around these.  Oracle: encode_batch / a split encode equals
 * encoding each text / the whole text alone (tests/test_wordpiece_split.py, tools/diff_parallel.py). */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime (Python.h defines it first in the module) */
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "batch_arena.h"
#include "pystr_utf8.h"
#include "tpool.h"
#include "wp_normalize.h"

#ifndef FSTOK_WP_BATCH_H
#define FSTOK_WP_BATCH_H

/* FSTOK_TRACE_THREADS=1: the long-text path prints where its time went to stderr (split_pinned; as
 * run_bounds does in the BPE module) */
static int trace_threads = -1;
static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static double thread_cpu_us(void) { /* (the calling thread's CPU time: a shared host preempts threads) */
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static _Atomic long long trace_busy_ns; /* summed encode time of the texts of the current call */
static int tracing(void) {
    if (trace_threads < 0) {
        const char *e = getenv("FSTOK_TRACE_THREADS");
        trace_threads = e && e[0] == '1';
    }
    return trace_threads > 0;
}

typedef struct {
    const wp_tables *t;
    const char **s;
    ssize_t *n; /* (Py_ssize_t) */
    outbuf *outs;
    size_t count;
    size_t next; /* work index, taken under the mutex */
    pthread_mutex_t mu;
    int word;
    const pystr_src *src; /* a batch of strs: text i comes from src[i] (pystr_utf8.h), not s[i] / n[i] */
    uint8_t *bad;         /* with src: set where text i has no UTF-8 (a lone surrogate) or no memory */
} batch_job;

/* encode the next chunk of texts; 0 when none is left */
static int batch_chunk(batch_job *j, pystr_buf *buf) {
    const int tr = trace_threads > 0;
    pthread_mutex_lock(&j->mu);
    size_t i = j->next;
    size_t chunk = j->count >= 64 * 16 ? 16 : 1; /* small batches: one text at a time */
    j->next += chunk;
    pthread_mutex_unlock(&j->mu);
    if (i >= j->count) return 0;
    size_t end = i + chunk < j->count ? i + chunk : j->count;
    double t0 = tr ? now_us() : 0;
    for (; i < end; i++) {
        /* encode into a copy on this thread's stack: the outs[] entries of neighbouring texts
         * share cache lines, and the encoder updates its outbuf once per token (false sharing
         * made 2 threads cost 2x the CPU of one) */
        const uint8_t *s = (const uint8_t *)(j->s ? j->s[i] : NULL);
        size_t n = j->s ? (size_t)j->n[i] : 0;
        if (j->src) {
            int u = pystr_utf8(&j->src[i], buf, &s, &n);
            if (u) {
                j->bad[i] = (uint8_t)(u > 0 ? 1 : 2);
                continue;
            }
        }
        outbuf local = j->outs[i];
        if (j->word) wp_encode_word(j->t, s, n, &local);
        else wp_encode_e2e(j->t, s, n, &local);
        j->outs[i] = local;
    }
    if (tr) atomic_fetch_add(&trace_busy_ns, (long long)((now_us() - t0) * 1e3));
    return 1;
}

static void *batch_worker(void *arg) {
    batch_job *j = (batch_job *)arg;
    pystr_buf buf = {0};
    while (batch_chunk(j, &buf)) {
    }
    pystr_buf_free(&buf);
    return NULL;
}

/* The list batch with pinned ints on threads (mod_wordpiece.c batch_lists_overlapped): texts are claimed in
 * blocks from an atomic counter, and the thread that encodes a block writes its texts' list items (translate:
 * id -> the cached int, or (id << 1) | 1 where there is none yet) and their records into memory of its own
 * (batch_arena.h), then publishes the block's records with one pointer.  The GIL-holding thread makes each
 * text's list as soon as its block is published.  Why: the texts' results were per-text entries of shared
 * arrays (an outbuf, a done flag, an item pointer, a flag) written by whichever thread encoded the text, a
 * malloc for every text's ids and for every chunk's items, and a mutex round per chunk. */
typedef struct {
    void **items;
    uint32_t n;
    uint8_t bad; /* 0, 1 no UTF-8 (a lone surrogate), 2 no memory */
    uint8_t odd; /* an item is (id << 1) | 1: its int is made by the GIL holder */
} wb_text;

static wb_text wb_oom_text = {NULL, 0, 2, 0};
#define WB_OOM_BLOCK (&wb_oom_text)

typedef struct {
    const wp_tables *t;
    int word;
    const pystr_src *src;
    const uint8_t *bad; /* set by the caller where a text has no UTF-8 (read only here) */
    size_t count;
    const size_t *bstart; /* block b is texts [bstart[b], bstart[b + 1]) */
    size_t nblocks;
    atomic_size_t next;
    wb_text **recs; /* per block, stored (release) when the block is done */
    bt_chunk *_Atomic chunks;
    size_t chunk_cap;
    void (*translate)(const void *model, const uint32_t *ids, size_t n, void **dst, uint8_t *odd);
    const void *model;
} wb_job;

static inline wb_text *wb_rec(wb_job *j, size_t b) { return __atomic_load_n(&j->recs[b], __ATOMIC_ACQUIRE); }

static void wb_block(wb_job *j, size_t b, bt_arena *a, pystr_buf *buf, outbuf *scratch) {
    const int tr = trace_threads > 0;
    double t0 = tr ? now_us() : 0;
    const size_t lo = j->bstart[b], hi = j->bstart[b + 1];
    wb_text *t = (wb_text *)bt_alloc(a, (hi - lo) * sizeof(wb_text));
    if (!t) {
        __atomic_store_n(&j->recs[b], WB_OOM_BLOCK, __ATOMIC_RELEASE);
        return;
    }
    for (size_t i = lo; i < hi; i++) {
        wb_text *r = &t[i - lo];
        r->items = NULL;
        r->n = 0;
        r->odd = 0;
        r->bad = j->bad[i];
        if (r->bad) continue;
        const uint8_t *s;
        size_t n;
        int u = pystr_utf8(&j->src[i], buf, &s, &n);
        if (u) {
            r->bad = (uint8_t)(u > 0 ? 1 : 2);
            continue;
        }
        scratch->n = 0;
        scratch->oom = 0;
        if (j->word) wp_encode_word(j->t, s, n, scratch);
        else wp_encode_e2e(j->t, s, n, scratch);
        size_t k = scratch->n;
        if (scratch->oom) {
            r->bad = 2;
            continue;
        }
        if (k) {
            void **d = (void **)bt_alloc(a, k * sizeof(void *));
            if (!d) {
                r->bad = 2;
                continue;
            }
            j->translate(j->model, scratch->ids, k, d, &r->odd);
            r->items = d;
            r->n = (uint32_t)k;
        }
    }
    __atomic_store_n(&j->recs[b], t, __ATOMIC_RELEASE);
    if (tr) atomic_fetch_add(&trace_busy_ns, (long long)((now_us() - t0) * 1e3));
}

static void *wb_worker(void *arg) {
    wb_job *j = (wb_job *)arg;
    pystr_buf buf = {0};
    outbuf scratch;
    memset(&scratch, 0, sizeof scratch);
    bt_arena a = {NULL, j->chunk_cap};
    for (;;) {
        size_t b = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (b >= j->nblocks) break;
        wb_block(j, b, &a, &buf, &scratch);
    }
    out_free(&scratch);
    pystr_buf_free(&buf);
    bt_hand_over(&j->chunks, &a);
    return NULL;
}

/* Start fn(arg) on nthreads - 1 workers besides the caller: the module's persistent pool (tpool.h), or
 * threads of this call while the pool runs another job (a second Python thread).  Returns the number of
 * workers; *pooled says which kind (tp_wait vs pthread_join in workers_join).  No GIL needed. */
static int workers_start(void *(*fn)(void *), void *arg, int nthreads, pthread_t *th, int *pooled) {
    *pooled = 0;
    if (nthreads <= 1) return 0;
    int got = tp_start(fn, arg, nthreads - 1);
    if (got >= 0) {
        *pooled = 1;
        return got;
    }
    int started = 0;
    for (int k = 1; k < nthreads; k++)
        if (pthread_create(&th[started], NULL, fn, arg) == 0) started++;
    return started;
}

static void workers_join(int started, pthread_t *th, int pooled) {
    if (pooled) tp_wait();
    else
        for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
}


/* the numpy output of a long text: the pieces' ids copied into dst, by the pool when there are many (the
 * copy of 1 MB of ids on one thread was ~0.1 ms of a 16-thread call) */
typedef struct {
    uint32_t *dst;
    const outbuf *outs;
    const size_t *off; /* piece k's ids go to dst + off[k] */
    size_t count;
    atomic_size_t next;
} wcopy_job;

static void *wcopy_worker(void *arg) {
    wcopy_job *c = (wcopy_job *)arg;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed);
        if (i >= c->count) break;
        if (c->outs[i].n) memcpy(c->dst + c->off[i], c->outs[i].ids, c->outs[i].n * sizeof(uint32_t));
    }
    return NULL;
}


/* May a long text be cut right before byte q?  Yes before a character that BERT's pipeline always
 * splits at: whitespace, punctuation and CJK characters (KIND_SPACE / KIND_ISO; they have combining
 * class 0, so canonical reordering never moves a mark across them).  Not before a deleted character
 * (control/format: "ab\u200bcd" is one word) or a mapped one. */
static inline int wp_cut_ok(const wp_tables *t, const uint8_t *s, size_t q) {
    uint8_t c = s[q];
    if ((c & 0xC0) == 0x80) return 0; /* inside a character */
    uint32_t cp = c;
    if (c >= 0x80) {
        int L;
        cp = utf8_next(s, q, &L);
    }
    uint32_t e = t->norm2[((size_t)t->norm1[cp >> 8] << 8) | (cp & 0xFF)] & 7;
    return e == KIND_SPACE || e == KIND_ISO;
}


#define SPLIT_SEARCH 16384 /* bytes searched around a target cut for a cut point */

/* Cuts of the N bytes at s near parts equal slices, each right before a character where wp_cut_ok holds
 * (searched forward, then backward, within SPLIT_SEARCH bytes; a target without one is skipped): cut[0] = 0,
 * then the cuts, cut[nc] = N.  Returns nc, the number of pieces. */
static size_t wp_find_cuts(const wp_tables *tab, const char *s, size_t N, int parts, size_t *cut) {
    size_t last = 0, nc = 0;
    cut[nc++] = 0;
    for (int k = 1; k < parts; k++) {
        size_t t = (size_t)((unsigned long long)N * (unsigned)k / (unsigned)parts), best = 0;
        if (t <= last) continue;
        size_t hi = t + SPLIT_SEARCH < N ? t + SPLIT_SEARCH : N;
        for (size_t q = t; q < hi; q++) {
            if (wp_cut_ok(tab, (const uint8_t *)s, q)) { best = q; break; }
        }
        if (!best) {
            size_t lo = t > SPLIT_SEARCH ? t - SPLIT_SEARCH : 0;
            if (lo <= last) lo = last + 1;
            for (size_t q = t; q-- > lo;) {
                if (wp_cut_ok(tab, (const uint8_t *)s, q)) { best = q; break; }
            }
        }
        if (best > last && best < N) cut[nc++] = last = best;
    }
    cut[nc] = N;
    return nc;
}

#endif /* FSTOK_WP_BATCH_H */
