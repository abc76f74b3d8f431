#ifndef FSTOK_BPE_RUNTIME_H
#define FSTOK_BPE_RUNTIME_H

/* The byte-level BPE runtime's state without Python: the model tables (bpe.h), the compiled pre-tokenizer
 * DFA levels (dfa.h), the pool of pre-token memos (piece cache, bpe.h) each encoding thread borrows, and the
 * optional tables derived at load (the direct-run tables).  The output kinds
 * of an encode are here too.  Oracle: fstok/reference/bpe.py (ReferenceBPE). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "bpe_shared_cache.h"
#include "dfa.h"
#include "tpool.h"

#define MAX_LEVELS 16

enum { OUT_LIST = 0, OUT_BYTES = 1, OUT_COUNT = 2 };

typedef struct {
    bpe_model m;
    uint32_t *seg_bp;     /* owned; [65536] per byte bigram: m.byte_pair's id (0xFFFFFF: none) | m.seg_big's flags << 24;
                             NULL: none */
    const uint32_t *seg_dir; /* m.seg_tri: the trigram filter of direct runs (bpe_tri_bit), or NULL */
    int bt_valid;    /* compile-time verdict: backtracking encoder valid */
    /* pre-tokenizer: the regex DFA levels (the C spanner of dfa.h) */
    fstok_dfa lv[MAX_LEVELS];
    int n_levels;   /* 0 with mode split: the whole segment is one piece */
    int pt_mode;    /* -1 none (Python spans only), 0 find (tiktoken), 1 split (HF Isolated levels) */
    uint64_t serial;          /* unique per model */
    uint64_t memo_epoch;      /* bumped by clear_cache(): memos filled earlier are dropped */
    int use_memo;
    pthread_mutex_t pool_mu;  /* guards the memo pool */
    bpe_memo *pool[16];
    int npool;
    /* wmemo[i]: the memo of pool thread i (tpool.h tp_worker_index), only ever used by that thread, so a
     * worker finds its memo again in its own core's cache (memo_worker) */
    bpe_memo *wmemo[TP_MAX_THREADS];
    bpe_shared *shared; /* the piece cache of multi-threaded calls (made on the first one), or NULL */
} bpe_rt;

/* Everything a model owns (not the tables: they are views of the artifact). */
static void bpe_rt_free(bpe_rt *self) {
    free(self->seg_bp);
    bpe_model_release(&self->m);
    for (int i = 0; i < self->npool; i++) bpe_memo_free(self->pool[i]);
    for (int i = 0; i < TP_MAX_THREADS; i++) bpe_memo_free(self->wmemo[i]);
    sc_free(self->shared);
    self->shared = NULL;
    if (self->serial) pthread_mutex_destroy(&self->pool_mu);
}

/* with the GIL: the model's shared piece cache for a multi-threaded call (bpe_shared_cache.h), made on first need;
 * NULL when memos are off, FSTOK_SHARED_CACHE=0 (read once: A/B), or out of memory */
static int rt_shared_on = -1, rt_shared_bits = 0;
static bpe_shared *rt_shared(bpe_rt *self) {
    if (rt_shared_on < 0) {
        const char *e = getenv("FSTOK_SHARED_CACHE"), *b = getenv("FSTOK_SHARED_CACHE_BITS");
        rt_shared_on = !(e && e[0] == '0');
        rt_shared_bits = b ? atoi(b) : 0;
    }
    if (!self->use_memo || !rt_shared_on) return NULL;
    if (!self->shared) self->shared = sc_new(rt_shared_bits);
    return self->shared;
}

/* ---- pre-token memos (see bpe.h): a pool per model; each encoding thread borrows one for the
 * duration of its work, so a memo is never written by two threads at once and stays warm across calls. */
#define MEMO_POOL 16
static uint64_t model_serial_counter = 0;

static bpe_memo *memo_borrow(bpe_rt *self) {
    if (!self->use_memo) return NULL;
    bpe_memo *mm = NULL;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool > 0) mm = self->pool[--self->npool];
    pthread_mutex_unlock(&self->pool_mu);
    uint64_t epoch = __atomic_load_n(&self->memo_epoch, __ATOMIC_RELAXED);
    if (!mm) {
        mm = bpe_memo_new();
        if (!mm) return NULL;
        mm->epoch = epoch;
    } else if (mm->epoch != epoch) {
        bpe_memo_clear(mm);
        mm->epoch = epoch;
    }
    return mm;
}

static void memo_return(bpe_rt *self, bpe_memo *mm) {
    if (!mm) return;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool < MEMO_POOL) {
        self->pool[self->npool++] = mm;
        mm = NULL;
    }
    pthread_mutex_unlock(&self->pool_mu);
    bpe_memo_free(mm);
}

/* The memo of the calling pool thread for this model (made on first use), or a pool memo on any other
 * thread.  Why: with the shared pool (LIFO) a worker got, call after call, a memo that another core had
 * filled last, and the text's pieces were looked up in lines of another core's cache: a 16-thread call
 * of 1 MB English spent 1.9x one-shot's encode time in total (lent machine, FSTOK_TRACE_THREADS=1).  A
 * pool thread runs one job at a time, so wmemo[i] is never used by two threads at once; the model owns it
 * (freed in Model_dealloc) and cannot die during a call, which holds a reference to it. */
static bpe_memo *memo_worker(bpe_rt *self) {
    int i = tp_worker_index();
    if (i < 0 || i >= TP_MAX_THREADS) return memo_borrow(self);
    if (!self->use_memo) return NULL;
    uint64_t epoch = __atomic_load_n(&self->memo_epoch, __ATOMIC_RELAXED);
    bpe_memo *mm = self->wmemo[i];
    if (!mm) {
        mm = bpe_memo_new();
        if (!mm) return NULL;
        mm->epoch = epoch;
        self->wmemo[i] = mm;
    } else if (mm->epoch != epoch) {
        bpe_memo_clear(mm);
        mm->epoch = epoch;
    }
    return mm;
}

static void memo_worker_done(bpe_rt *self, bpe_memo *mm) {
    int i = tp_worker_index();
    if (i < 0 || i >= TP_MAX_THREADS) memo_return(self, mm);
}


/* the tables of direct runs (direct_run; an optional speed-up: on allocation failure, or without the segment tables,
 * there are none): byte_pair and seg_big side by side, and the segment tables' trigram filter (m->seg_tri) */
static void build_direct_tables(bpe_rt *self) {
    const bpe_model *m = &self->m;
    free(self->seg_bp);
    self->seg_bp = NULL;
    self->seg_dir = NULL;
    if (!m->seg_big || !m->seg_tri) return;
    uint32_t *t = (uint32_t *)malloc(65536 * sizeof(uint32_t));
    if (!t) return;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t r = m->byte_pair[i];
        t[i] = (r == BPE_NONE ? 0xFFFFFFu : r) | (uint32_t)m->seg_big[i] << 24;
    }
    self->seg_bp = t;
    self->seg_dir = m->seg_tri;
}

#endif /* FSTOK_BPE_RUNTIME_H */
