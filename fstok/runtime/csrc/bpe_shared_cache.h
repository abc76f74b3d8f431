#ifndef FSTOK_BPE_SHARED_CACHE_H
#define FSTOK_BPE_SHARED_CACHE_H

/* The piece cache shared by the threads of one multi-threaded call (batch or long text), per model.
 *
 * Why: every encoding thread keeps a private piece cache (bpe_memo), which is the fastest place to look and
 * needs no synchronisation.  But with N threads each private cache sees only 1/N of the text, so a piece that
 * thread A merged is merged again by B..N; on the lent 16-core machine a warm second pass over multilingual
 * documents at 16 threads ran at 0.44x the speed of 1 thread, and English documents reached 4.7x.  A private miss
 * now looks here before merging, and what a thread merges goes here too, so the merge work of a multi-threaded
 * call is about that of one thread.  Only the lockstep fill of cold pieces (pc_fill_cold, while many pieces miss
 * the private cache) uses it: there the lookups of a window of pieces are prefetched together.  A piece that
 * misses on its own (English text, ~1 piece in 25) would wait for a line another core wrote, and on the lent
 * machine probing there made batches of short English lines at 16 threads a third slower.  Single-threaded
 * calls never touch it.
 *
 * Layout: 2^SC_BITS entries of one cache line, in sets of two.  An entry holds a piece of <= 16 bytes (its two key
 * words, zero padded, and its length) and its <= SC_IDS external ids.  Concurrency, without locks: an entry is
 * written once per generation (the table's tag).  A writer claims it by moving its state from "empty or an older
 * tag" to SC_BUSY (compare-and-swap), writes the fields, and publishes it by storing the current tag (release).  A
 * reader loads the state (acquire), the fields (relaxed atomics), and the state again after an acquire fence: only
 * an entry whose state was the current tag both times is used (a seqlock whose writers never rewrite an entry of
 * the current tag, so a reader of a published entry never retries).  When 3/4 of the entries have been written
 * under a tag, the tag moves on and every entry becomes free again (a cache of the recent text, not an ever
 * growing one); clear_cache() moves it too.  Python-free. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SC_BITS 18 /* 256k entries, 16 MiB (FSTOK_SHARED_CACHE_BITS: 1..24, for tests) */
#define SC_IDS 10
#define SC_BUSY 1u
#define SC_FIRST_TAG 2u

typedef struct {
    uint32_t state; /* (atomic) 0: empty; SC_BUSY: being written; else the tag it was written under */
    uint32_t meta;  /* (atomic) len | ntok << 8 */
    uint64_t k0, k1;
    uint32_t ids[SC_IDS];
} sc_entry;
_Static_assert(sizeof(sc_entry) == 64, "a shared cache entry is one cache line");

struct bpe_shared {
    sc_entry *e;     /* 64-byte aligned */
    size_t mask;     /* entries - 1 */
    uint32_t tag;    /* (atomic) the current generation, >= SC_FIRST_TAG: read by every lookup */
    _Alignas(64) uint64_t stored; /* (atomic) a sixteenth of the entries written under tag (a line of its own:
                                     written by the threads' inserts, and only a sample of them) */
};
typedef struct bpe_shared bpe_shared;

/* a new empty table, or NULL (then the threads keep to their private caches) */
static inline bpe_shared *sc_new(int bits) {
    bpe_shared *sc = (bpe_shared *)aligned_alloc(64, sizeof *sc);
    if (!sc) return NULL;
    memset(sc, 0, sizeof *sc);
    size_t n = (size_t)1 << (bits >= 1 && bits <= 24 ? bits : SC_BITS);
    sc->e = (sc_entry *)aligned_alloc(64, n * sizeof(sc_entry));
    if (!sc->e) {
        free(sc);
        return NULL;
    }
    memset(sc->e, 0, n * sizeof(sc_entry));
    sc->mask = n - 1;
    sc->tag = SC_FIRST_TAG;
    return sc;
}

static inline void sc_free(bpe_shared *sc) {
    if (!sc) return;
    free(sc->e);
    free(sc);
}

/* every entry free again (clear_cache, or the table filled up under this tag) */
static inline void sc_next_tag(bpe_shared *sc, uint32_t from) {
    uint32_t to = from + 1 < SC_FIRST_TAG ? SC_FIRST_TAG : from + 1;
    if (__atomic_compare_exchange_n(&sc->tag, &from, to, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        __atomic_store_n(&sc->stored, 0, __ATOMIC_RELAXED);
}

static inline void sc_clear(bpe_shared *sc) {
    if (sc) sc_next_tag(sc, __atomic_load_n(&sc->tag, __ATOMIC_ACQUIRE));
}

/* the set of a piece whose span-table hash is h (bits the private cache and the span table do not index by) */
static inline sc_entry *sc_set(const bpe_shared *sc, uint64_t h) { return &sc->e[(h >> 21) & sc->mask & ~(size_t)1]; }

static inline void sc_prefetch(const bpe_shared *sc, uint64_t h) { __builtin_prefetch(sc_set(sc, h)); }

/* the external ids of the piece (key words k0, k1, len bytes) into out[0:SC_IDS); returns how many, 0 if absent */
static inline size_t sc_get(const bpe_shared *sc, uint64_t h, uint64_t k0, uint64_t k1, size_t len, uint32_t *out) {
    const uint32_t tag = __atomic_load_n(&sc->tag, __ATOMIC_ACQUIRE);
    sc_entry *set = sc_set(sc, h);
    for (int w = 0; w < 2; w++) {
        sc_entry *e = set + w;
        if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != tag) continue;
        const uint32_t meta = __atomic_load_n(&e->meta, __ATOMIC_RELAXED);
        if ((meta & 0xFF) != len || __atomic_load_n(&e->k0, __ATOMIC_RELAXED) != k0 ||
            __atomic_load_n(&e->k1, __ATOMIC_RELAXED) != k1)
            continue;
        const size_t nt = meta >> 8;
        if (nt == 0 || nt > SC_IDS) return 0; /* (never stored so) */
        for (size_t i = 0; i < nt; i++) out[i] = __atomic_load_n(&e->ids[i], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        return __atomic_load_n(&e->state, __ATOMIC_RELAXED) == tag ? nt : 0;
    }
    return 0;
}

/* store the piece's nt external ids (nothing when nt > SC_IDS, or when its set is taken under the current tag) */
static inline void sc_put(bpe_shared *sc, uint64_t h, uint64_t k0, uint64_t k1, size_t len, const uint32_t *ids,
                          size_t nt) {
    if (nt == 0 || nt > SC_IDS || len > 16) return;
    const uint32_t tag = __atomic_load_n(&sc->tag, __ATOMIC_ACQUIRE);
    sc_entry *set = sc_set(sc, h);
    for (int w = 0; w < 2; w++) {
        sc_entry *e = set + w;
        uint32_t s = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
        if (s == tag) {
            if (__atomic_load_n(&e->k0, __ATOMIC_RELAXED) == k0 && __atomic_load_n(&e->k1, __ATOMIC_RELAXED) == k1 &&
                (__atomic_load_n(&e->meta, __ATOMIC_RELAXED) & 0xFF) == len)
                return; /* another thread stored it already */
            continue;
        }
        if (s == SC_BUSY) continue;
        if (!__atomic_compare_exchange_n(&e->state, &s, SC_BUSY, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) continue;
        __atomic_store_n(&e->meta, (uint32_t)len | (uint32_t)nt << 8, __ATOMIC_RELAXED);
        __atomic_store_n(&e->k0, k0, __ATOMIC_RELAXED);
        __atomic_store_n(&e->k1, k1, __ATOMIC_RELAXED);
        for (size_t i = 0; i < nt; i++) __atomic_store_n(&e->ids[i], ids[i], __ATOMIC_RELAXED);
        __atomic_store_n(&e->state, tag, __ATOMIC_RELEASE);
        if ((h >> 60) == 0 && __atomic_add_fetch(&sc->stored, 1, __ATOMIC_RELAXED) > (sc->mask + 1) * 3 / 64)
            sc_next_tag(sc, tag); /* (1 insert in 16 counts: 3/4 of the entries) */
        return;
    }
}

/* entries valid under the current tag (tests, inspection; not while threads write) */
static inline size_t sc_count(const bpe_shared *sc) {
    const uint32_t tag = __atomic_load_n(&sc->tag, __ATOMIC_ACQUIRE);
    size_t c = 0;
    for (size_t i = 0; i <= sc->mask; i++) c += __atomic_load_n(&sc->e[i].state, __ATOMIC_RELAXED) == tag;
    return c;
}

#endif /* FSTOK_BPE_SHARED_CACHE_H */
