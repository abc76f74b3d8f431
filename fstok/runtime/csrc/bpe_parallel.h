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
 * runs another job */
typedef struct {
    const bpe_rt *self;
    const bpe_specials *sp, *sp2;
    const pystr_src *src; /* where each text's UTF-8 is, or the code units to encode it from (pystr_utf8.h) */
    enc_state *st;
    int *rc; /* per text: 0 done, -1 out of memory, 1 no UTF-8 (a lone surrogate: the caller repairs it) */
    size_t count;
    /* texts are claimed in blocks [bstart[b], bstart[b+1]): a batch of short lines paid a mutex round per
     * line; a block holds <= 64 texts and about 1/32 of a thread's share of the bytes, a long text one of its own */
    const size_t *bstart;
    size_t nblocks;
    atomic_size_t next;
    int kind;
    uint8_t *done; /* per text, set when its state is final (the overlapped list path), or NULL */
    _Atomic long long *busy_ns; /* FSTOK_TRACE_THREADS: the workers' summed CPU time, or NULL */
    /* Item mode (the overlapped list path with pinned ints): the thread that encodes a block also writes
     * its texts' list items, the pinned int of each id (a read-only table: no GIL needed), into one buffer
     * per block; the GIL-holding thread then only copies each text's items into its list.  An id with no
     * int in the table is written as (id << 1) | 1 (an odd value, never a pointer) and its text flagged. */
    void *const *ints;
    size_t n_ints;
    void ***items; /* per text: its first item in its block's buffer */
    size_t *nitems;
    uint8_t *odd;  /* per text: holds an odd (int not made yet) item */
    void **blockbuf; /* per block: the buffer (freed by the caller) */
    /* Block mode (OUT_BYTES, the ids of the whole batch as one array; OUT_LIST where the lists are made after
     * the encoding, as on one thread): the thread that encodes a block appends its texts' ids to one buffer per
     * block (blockbuf, uint32) and writes each text's count (nitems).  Why: a buffer of its own per text was 1024
     * allocations on the workers and 1024 frees on the calling thread per call of 1024 lines (another thread's
     * allocations: the slow path of free), after the workers had finished: a serial part of the call; the
     * calling thread now reads one buffer per block. */
    int block_ids;
} batch_job;

/* Item mode (item_mode 1) and block mode (0): encode the texts of block b into the thread's scratch state and
 * append what each text gives to the block's buffer -- item mode its list items (pinned ints, void *), block
 * mode its ids (uint32) -- with rc -1 for every text from the first that finds no memory; item mode then sets
 * the texts' flags.  Always inlined with a constant item_mode: each mode gets a loop of its own, as if written
 * twice. */
static inline __attribute__((always_inline)) void batch_block_buf(batch_job *j, size_t b, bpe_memo *memo,
                                                                  pystr_buf *buf, enc_state *scratch,
                                                                  const int item_mode) {
    const size_t esz = item_mode ? sizeof(void *) : sizeof(uint32_t);
    size_t lo = j->bstart[b], hi = j->bstart[b + 1], bytes = 0, used = 0;
    for (size_t i = lo; i < hi; i++) bytes += j->src[i].utf8 ? j->src[i].len : 2 * j->src[i].len;
    size_t cap = bytes / 3 + 64;
    char *out = (char *)malloc(cap * esz);
    void *const *ints = j->ints;
    const size_t n_ints = j->n_ints;
    for (size_t i = lo; i < hi; i++) {
        const uint8_t *s;
        size_t n;
        j->nitems[i] = 0;
        int u = j->src[i].ukind < 0 ? 1 : !out ? -1 : pystr_utf8(&j->src[i], buf, &s, &n);
        if (u) {
            j->rc[i] = u;
            continue;
        }
        scratch->ids.len = 0;
        scratch->count = 0;
        scratch->elen = 0;
        scratch->memo = memo;
        int rc = encode_text(j->self, j->sp, j->sp2, s, n, scratch);
        scratch->memo = NULL;
        size_t k = scratch->ids.len;
        if (!rc && used + k > cap) {
            size_t nc = (used + k) * 2;
            char *o2 = (char *)realloc(out, nc * esz);
            if (o2) out = o2, cap = nc;
            else rc = -1;
        }
        j->rc[i] = rc;
        if (rc) continue;
        if (item_mode) {
            const uint32_t *ids = scratch->ids.ids;
            void **d = (void **)out + used;
            uint8_t odd = 0;
            for (size_t q = 0; q < k; q++) {
                uint32_t id = ids[q];
                void *v = id < n_ints ? ints[id] : (void *)(((uintptr_t)id << 1) | 1);
                odd |= id >= n_ints;
                d[q] = v;
            }
            j->odd[i] = odd;
            j->items[i] = (void **)(uintptr_t)used; /* (an offset until the buffer stops moving) */
        } else {
            memcpy((uint32_t *)out + used, scratch->ids.ids, k * sizeof(uint32_t));
        }
        j->nitems[i] = k;
        used += k;
    }
    if (item_mode)
        for (size_t i = lo; i < hi; i++) j->items[i] = out ? (void **)out + (uintptr_t)j->items[i] : NULL;
    j->blockbuf[b] = out;
    if (item_mode)
        for (size_t i = lo; i < hi; i++) __atomic_store_n(&j->done[i], 1, __ATOMIC_RELEASE);
}

/* encode the texts of block b; with `done`, each text's flag is set (release) once its state is written */
static void batch_block(batch_job *j, size_t b, bpe_memo *memo, pystr_buf *buf, enc_state *scratch) {
    if (j->items) {
        batch_block_buf(j, b, memo, buf, scratch, 1);
        return;
    }
    if (j->block_ids) {
        batch_block_buf(j, b, memo, buf, scratch, 0);
        return;
    }
    for (size_t i = j->bstart[b]; i < j->bstart[b + 1]; i++) {
        const uint8_t *s;
        size_t n;
        int u = j->src[i].ukind < 0 ? 1 : pystr_utf8(&j->src[i], buf, &s, &n);
        if (u) {
            j->rc[i] = u;
        } else {
            /* encode into a state on this stack (neighbouring st[] entries share cache lines) */
            enc_state local = j->st[i];
            local.count_only = j->kind == OUT_COUNT;
            local.memo = memo;
            j->rc[i] = encode_text(j->self, j->sp, j->sp2, s, n, &local);
            local.memo = NULL;
            if (local.count_only) { /* only the number is kept: a batch of 100k lines held 3 GB of id buffers */
                local.count += local.ids.len;
                local.ids.len = 0;
                free(local.ids.ids);
                local.ids.ids = NULL;
                local.ids.cap = 0;
            }
            j->st[i] = local;
        }
        if (j->done) __atomic_store_n(&j->done[i], 1, __ATOMIC_RELEASE);
    }
}

static void *batch_worker(void *arg) {
    batch_job *j = (batch_job *)arg;
    /* a pool thread keeps its own memo between calls (memo_worker: found again in its core's cache) */
    long long t0 = 0;
    if (j->busy_ns) {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        t0 = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    }
    bpe_memo *memo = memo_worker((bpe_rt *)j->self);
    pystr_buf buf = {0};
    enc_state scratch;
    memset(&scratch, 0, sizeof scratch);
    for (;;) {
        size_t b = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (b >= j->nblocks) break;
        batch_block(j, b, memo, &buf, &scratch);
    }
    enc_free(&scratch);
    pystr_buf_free(&buf);
    memo_worker_done((bpe_rt *)j->self, memo);
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
