#ifndef FSTOK_BPE_PARALLEL_H
#define FSTOK_BPE_PARALLEL_H

/* Work on threads without the GIL: one long text pre-tokenized once and its pieces' BPE split over threads
 * (encode_text_parallel), a batch's texts claimed in blocks from a shared counter (batch_worker), and where
 * a long text may be cut: the code point -> byte seek and the search for proven pre-tokenizer boundaries in
 * the tables fstok/safe_split.py builds (proven_forward / proven_backward).  Python-free.  Oracle: each
 * result equals encoding every text whole on one thread (tests/test_parallel_native.py, tools/diff_parallel.py). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "bpe_encode.h"
#include "batch_arena.h"
#include "tpool.h"
#include "pystr_utf8.h"

/* --- one long text on several threads: pre-tokenize sequentially (the DFA is the cheap part), then
 * BPE contiguous runs of pieces on each thread and concatenate: exactly the one-thread result. */
typedef struct {
    const bpe_rt *self;
    const uint8_t *s;
    const uint32_t *plan; /* triples */
    size_t lo, hi;        /* triple index range */
    enc_state st;
    int rc;
} par_part;

static void *par_worker(void *arg) {
    par_part *p = (par_part *)arg;
    const bpe_model *m = &p->self->m;
    /* the state lives on this thread's stack while it is written: the parts sit side by side in one
     * array, and per-token writes to a shared cache line (false sharing) cost more than the BPE */
    enc_state st = p->st;
    int rc = 0;
    st.memo = memo_borrow((bpe_rt *)p->self);
    if (bpe_vec_reserve(&st.ids, (p->hi - p->lo) + 16)) rc = -1;
    for (size_t i = p->lo; i < p->hi && !rc; i++) {
        uint32_t a = p->plan[3 * i], b = p->plan[3 * i + 1], lit = p->plan[3 * i + 2];
        rc = lit != BPE_NONE ? emit_literal(lit, a, &st) : emit_span(m, p->s, a, b, &st);
        if ((i & 1023) == 1023) count_flush(&st);
    }
    memo_return((bpe_rt *)p->self, st.memo);
    st.memo = NULL;
    p->st = st;
    p->rc = rc;
    return NULL;
}

static int encode_text_parallel(const bpe_rt *self, const bpe_specials *sp, const bpe_specials *sp2,
                                const uint8_t *s, size_t n, enc_state *st, int nthreads) {
    bpe_vec plan = {0};
    enc_state ps = {0};
    ps.plan = &plan;
    ps.text_len = n;
    int rc = bpe_vec_reserve(&plan, 3 * (n / 4 + 16)) || encode_text(self, sp, sp2, s, n, &ps);
    free(ps.ends);
    if (rc) {
        free(plan.ids);
        return -1;
    }
    size_t k = plan.len / 3;
    if (nthreads > 64) nthreads = 64;
    par_part parts[64];
    memset(parts, 0, sizeof parts);
    /* balance by bytes */
    size_t per = n / (size_t)nthreads + 1, lo = 0;
    int np = 0;
    for (int t = 0; t < nthreads && lo < k; t++) {
        size_t hi = lo, target = (size_t)(t + 1) * per;
        if (t == nthreads - 1) hi = k;
        else
            while (hi < k && plan.ids[3 * hi + 1] < target) hi++;
        if (hi == lo) continue;
        parts[np].self = self;
        parts[np].s = s;
        parts[np].plan = plan.ids;
        parts[np].lo = lo;
        parts[np].hi = hi;
        parts[np].st.text_len = n;
        parts[np].st.want_starts = st->want_starts;
        parts[np].st.count_only = st->count_only;
        np++;
        lo = hi;
    }
    pthread_t th[64];
    int started[64] = {0};
    for (int t = 1; t < np; t++) started[t] = pthread_create(&th[t], NULL, par_worker, &parts[t]) == 0;
    if (np) par_worker(&parts[0]);
    for (int t = 1; t < np; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else par_worker(&parts[t]);
    }
    free(plan.ids);
    size_t total = 0, totst = 0;
    for (int t = 0; t < np; t++) {
        if (parts[t].rc) rc = -1;
        total += parts[t].st.ids.len;
        totst += parts[t].st.starts.len;
        st->count += parts[t].st.count;
    }
    if (!rc && !st->count_only) rc = bpe_vec_reserve(&st->ids, total);
    if (!rc && st->want_starts) rc = bpe_vec_reserve(&st->starts, totst);
    for (int t = 0; t < np; t++) {
        if (!rc) {
            if (st->count_only) st->count += parts[t].st.ids.len;
            else {
                memcpy(st->ids.ids + st->ids.len, parts[t].st.ids.ids, parts[t].st.ids.len * 4);
                st->ids.len += parts[t].st.ids.len;
            }
            if (st->want_starts) {
                memcpy(st->starts.ids + st->starts.len, parts[t].st.starts.ids, parts[t].st.starts.len * 4);
                st->starts.len += parts[t].st.starts.len;
            }
        }
        enc_free(&parts[t].st);
    }
    return rc;
}


/* --- batches on threads: the module's persistent pool (tpool.h), or threads of the call while the pool
 * runs another job.
 *
 * Each thread that encodes blocks of a batch writes what it makes into memory of its own (bt_arena: chunks it
 * alone appends to), and a block is published as one pointer to its texts' records (bt_text: where the text's
 * output is, how long, its status), stored with release order once the block is done.  Why: the texts' results
 * were per-text entries of arrays shared by all threads (status, count, item pointer, flag, done flag) next to
 * each other, so threads encoding neighbouring blocks wrote into the same cache lines for every text, and each
 * block's buffer was a malloc on a worker and a free on the calling thread (another thread's arena); on 16
 * threads a call of 1024 short lines cost twice the CPU of the same call on 2.  Now the only shared writes are
 * one pointer per block and one hand-over of a thread's chunks per call. */

/* one text's result: p its output (uint32 ids, or list items in item mode), n their number (the token count in
 * count mode, p NULL), rc 0 done, -1 out of memory, 1 no UTF-8 (a lone surrogate: the caller repairs it),
 * odd: item mode, an item is an id with no int in the table (written (id << 1) | 1) */
typedef struct {
    void *p;
    uint32_t n;
    int8_t rc;
    uint8_t odd;
} bt_text;

enum { BT_IDS = 0, BT_ITEMS = 1, BT_COUNT = 2 };

/* the records of a block whose records found no memory: every text's rc is -1 */
static bt_text bt_oom_text = {NULL, 0, -1, 0};
#define BT_OOM_BLOCK (&bt_oom_text)

typedef struct {
    const bpe_rt *self;
    const bpe_specials *sp, *sp2;
    const pystr_src *src; /* where each text's UTF-8 is, or the code units to encode it from (pystr_utf8.h) */
    size_t count;
    /* texts are claimed in blocks [bstart[b], bstart[b+1]) from the shared counter next: a block holds <= 64 texts
     * and about 1/16 of a thread's share of the bytes, a long text one of its own */
    const size_t *bstart;
    size_t nblocks;
    atomic_size_t next;
    int mode;               /* BT_IDS, BT_ITEMS or BT_COUNT */
    bt_text **recs;         /* per block: its texts' records, stored (release) when the block is done, else NULL */
    bt_chunk *_Atomic chunks; /* every thread's chunks, handed over as it leaves */
    size_t chunk_cap;       /* a thread's first chunk */
    _Atomic long long *busy_ns; /* FSTOK_TRACE_THREADS: the workers' summed CPU time, or NULL */
    bpe_shared *shared;     /* the model's shared piece cache when the call runs on several threads, else NULL */
    /* item mode: the pinned int of each id (a read-only table: no GIL needed), so that the GIL-holding thread
     * only copies each text's items into its list */
    void *const *ints;
    size_t n_ints;
    /* ... and where the ints are side by side (pyids.h, pyids_run): the int of id is run_base + (id - run_lo) * 32
     * for id - run_lo < run_n, no table load */
    const char *run_base;
    size_t run_lo, run_n;
} batch_job;

/* the records of block b, or NULL while it is not done (acquire: its texts' output is visible after) */
static inline bt_text *batch_rec(batch_job *j, size_t b) { return __atomic_load_n(&j->recs[b], __ATOMIC_ACQUIRE); }

/* Encode the texts of block b into the thread's scratch state and copy what each gives into the thread's arena:
 * item mode its list items, ids mode its ids, count mode only the number; then publish the block.  Always inlined
 * with a constant mode: each mode gets a loop of its own, as if written three times. */
static inline __attribute__((always_inline)) void batch_block_mode(batch_job *j, size_t b, bt_arena *a, bpe_memo *memo,
                                                                   pystr_buf *buf, enc_state *scratch, const int mode) {
    const size_t lo = j->bstart[b], hi = j->bstart[b + 1];
    bt_text *t = (bt_text *)bt_alloc(a, (hi - lo) * sizeof(bt_text));
    if (!t) {
        __atomic_store_n(&j->recs[b], BT_OOM_BLOCK, __ATOMIC_RELEASE);
        return;
    }
    void *const *ints = j->ints;
    const size_t n_ints = j->n_ints, run_lo = j->run_lo, run_n = j->run_n;
    const char *run_base = j->run_base;
    for (size_t i = lo; i < hi; i++) {
        bt_text *r = &t[i - lo];
        const uint8_t *s;
        size_t n;
        r->p = NULL;
        r->n = 0;
        r->odd = 0;
        int u = j->src[i].ukind < 0 ? 1 : pystr_utf8(&j->src[i], buf, &s, &n);
        if (u) {
            r->rc = (int8_t)u;
            continue;
        }
        scratch->ids.len = 0;
        scratch->count = 0;
        scratch->elen = 0;
        scratch->count_only = mode == BT_COUNT;
        scratch->memo = memo;
        if (memo) memo->shared = j->shared;
        int rc = encode_text(j->self, j->sp, j->sp2, s, n, scratch);
        if (memo) memo->shared = NULL;
        scratch->memo = NULL;
        size_t k = scratch->ids.len;
        if (!rc && mode == BT_COUNT) {
            r->n = (uint32_t)(scratch->count + k);
        } else if (!rc && k) {
            void *d = bt_alloc(a, k * (mode == BT_ITEMS ? sizeof(void *) : sizeof(uint32_t)));
            if (!d) {
                rc = -1;
            } else if (mode == BT_ITEMS) {
                const uint32_t *ids = scratch->ids.ids;
                void **dst = (void **)d;
                uint8_t odd = 0;
                for (size_t q = 0; q < k; q++) {
                    uint32_t id = ids[q];
                    size_t k = (size_t)id - run_lo;
                    odd |= id >= n_ints;
                    dst[q] = id >= n_ints ? (void *)(((uintptr_t)id << 1) | 1)
                             : k < run_n  ? (void *)(run_base + k * 32)
                                          : ints[id];
                }
                r->odd = odd;
            } else {
                memcpy(d, scratch->ids.ids, k * sizeof(uint32_t));
            }
            r->p = d;
            r->n = (uint32_t)k;
        }
        r->rc = (int8_t)rc;
        if (rc) r->n = 0;
    }
    __atomic_store_n(&j->recs[b], t, __ATOMIC_RELEASE);
}

static void batch_block(batch_job *j, size_t b, bt_arena *a, bpe_memo *memo, pystr_buf *buf, enc_state *scratch) {
    if (j->mode == BT_ITEMS) batch_block_mode(j, b, a, memo, buf, scratch, BT_ITEMS);
    else if (j->mode == BT_COUNT) batch_block_mode(j, b, a, memo, buf, scratch, BT_COUNT);
    else batch_block_mode(j, b, a, memo, buf, scratch, BT_IDS);
}

/* a thread's chunks to the job (the caller frees them after reading the records) */
static void batch_hand_over(batch_job *j, bt_arena *a) { bt_hand_over(&j->chunks, a); }

static void *batch_worker(void *arg) {
    batch_job *j = (batch_job *)arg;
    /* a pool thread keeps its own memo between calls (memo_worker: found again in its core's cache) */
    long long t0 = 0;
    if (j->busy_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        t0 = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }
    bpe_memo *memo = NULL;
    int have_memo = 0;
    pystr_buf buf = {0};
    enc_state scratch;
    memset(&scratch, 0, sizeof scratch);
    bt_arena a = {NULL, j->chunk_cap};
    for (;;) {
        size_t b = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (b >= j->nblocks) break;
        if (!have_memo) { /* (a thread woken after every block was taken needs none) */
            memo = memo_worker((bpe_rt *)j->self);
            have_memo = 1;
        }
        batch_block(j, b, &a, memo, &buf, &scratch);
    }
    enc_free(&scratch);
    pystr_buf_free(&buf);
    if (have_memo) memo_worker_done((bpe_rt *)j->self, memo);
    batch_hand_over(j, &a);
    if (j->busy_ns) { /* FSTOK_TRACE_THREADS: this thread's CPU time for the call */
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        atomic_fetch_add(j->busy_ns, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec - t0);
    }
    return NULL;
}

/* Start batch_worker on nthreads - 1 threads besides the caller; returns how many run and sets *pooled.
 * No GIL needed. */
static int batch_start(batch_job *j, int nthreads, pthread_t *th, int *pooled) {
    *pooled = 0;
    if (nthreads <= 1) return 0;
    int got = tp_start(batch_worker, j, nthreads - 1);
    if (got >= 0) {
        *pooled = 1;
        return got;
    }
    int started = 0;
    for (int k = 1; k < nthreads; k++)
        if (pthread_create(&th[started], NULL, batch_worker, j) == 0) started++;
    return started;
}

static void batch_join(int started, pthread_t *th, int pooled) {
    if (pooled) tp_wait();
    else
        for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
}


/* byte position of code point index c, counting from (pos, cnt) = (byte, code points before it) */
static size_t utf8_seek(const uint8_t *s, size_t n, size_t pos, size_t cnt, size_t c) {
#ifdef __SSE2__
    const __m128i lim = _mm_set1_epi8(-64); /* continuation bytes 0x80..0xBF are < -64 as int8 */
    while (pos + 16 <= n) {
        uint32_t cont = (uint32_t)_mm_movemask_epi8(_mm_cmplt_epi8(_mm_loadu_si128((const __m128i *)(s + pos)), lim));
        size_t leads = 16 - (size_t)__builtin_popcount(cont);
        if (cnt + leads > c) break;
        cnt += leads;
        pos += 16;
    }
#endif
    for (; pos < n; pos++) {
        if ((s[pos] & 0xC0) != 0x80) {
            if (cnt == c) return pos;
            cnt++;
        }
    }
    return n;
}


/* Proven pre-tokenizer boundaries found in C (fstok/safe_split.py builds the tables):
 * cls[cp] is the character class of code point cp, ok[K * c + d] says a position between a class-c and
 * a class-d character is a piece boundary in every parse.  A cut never falls inside an occurrence of a
 * guard string (special and added tokens): the special-token split of each piece is the whole text's. */
static uint32_t utf8_decode_at(const uint8_t *s, size_t i, size_t n, size_t *len) {
    uint8_t c = s[i];
    if (c < 0x80 || i + 1 >= n) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F); }
    if (c < 0xF0 || i + 3 >= n) {
        *len = 3;
        return i + 2 < n ? ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F) : 0xFFFD;
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) |
           (s[i + 3] & 0x3F);
}

typedef struct {
    const uint16_t *cls;
    size_t ncls; /* entries of cls */
    const uint8_t *ok;
    size_t K;
    const char **g;
    ssize_t *glen; /* (Py_ssize_t) */
    size_t ng;
} proven_ctx;

static inline size_t cls_of(const proven_ctx *c, uint32_t cp) {
    size_t k = cp < c->ncls ? c->cls[cp] : c->K - 1;
    return k < c->K ? k : c->K - 1; /* a table from elsewhere can never index past ok */
}

static int guarded(const proven_ctx *c, const uint8_t *s, size_t n, size_t p) {
    for (size_t k = 0; k < c->ng; k++) {
        size_t L = (size_t)c->glen[k];
        if (L < 2) continue;
        size_t lo = p >= L - 1 ? p - (L - 1) : 0, hi = p + L - 1 < n ? p + L - 1 : n; /* window [lo, hi) */
        if (hi - lo < L) continue;
        const uint8_t *w = s + lo, *e = s + hi;
        while (w + L <= e) {
            const uint8_t *f = (const uint8_t *)memchr(w, (uint8_t)c->g[k][0], (size_t)(e - w) - L + 1);
            if (!f) break;
            if (!memcmp(f, c->g[k], L) && f < s + p && f + L > s + p) return 1;
            w = f + 1;
        }
    }
    return 0;
}

/* first proven boundary at a character start in [from, to), or (size_t)-1 */
static size_t proven_forward(const proven_ctx *c, const uint8_t *s, size_t n, size_t from, size_t to) {
    while (from < n && (s[from] & 0xC0) == 0x80) from++;
    if (from == 0 || from >= n) return (size_t)-1;
    size_t q = from - 1, len;
    while (q > 0 && (s[q] & 0xC0) == 0x80) q--;
    size_t prev = cls_of(c, utf8_decode_at(s, q, n, &len));
    for (size_t p = from; p < to && p < n;) {
        size_t cur = cls_of(c, utf8_decode_at(s, p, n, &len));
        if (c->ok[prev * c->K + cur] && !guarded(c, s, n, p)) return p;
        prev = cur;
        p += len;
    }
    return (size_t)-1;
}

/* last proven boundary at a character start in (lo, hi), or (size_t)-1 */
static size_t proven_backward(const proven_ctx *c, const uint8_t *s, size_t n, size_t lo, size_t hi) {
    size_t best = (size_t)-1;
    /* scan forward in blocks ending at hi, keep the last hit (the text is UTF-8: no backward decoding) */
    size_t step = 256;
    size_t end = hi;
    while (end > lo + 1) {
        size_t start = end > lo + step ? end - step : lo + 1;
        size_t p = start, last = (size_t)-1;
        while (p < end) {
            size_t f = proven_forward(c, s, n, p, end);
            if (f == (size_t)-1) break;
            last = f;
            p = f + 1;
        }
        if (last != (size_t)-1) return last;
        end = start;
        step *= 4;
    }
    return best;
}

#endif /* FSTOK_BPE_PARALLEL_H */
