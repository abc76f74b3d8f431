/* Byte-level BPE runtime: the compiled tables (views into an fstok artifact) and span encoders.
 *
 * Internal token ids are *rank ordered*: internal id i < j  <=>  token i is merged before token j.
 * So the merge table maps a pair (left, right) of internal ids to the merged internal id, which is
 * also the merge's rank.  Only tokens reachable by BPE merges ("every token encodes to itself",
 * checked by the compiler) have internal ids; whole-span lookups return external ids directly.
 *
 * Span encoders (all give the result of "repeatedly merge the lowest-ranked adjacent pair, leftmost
 * first" on one pre-token):
 *   bpe_encode_short     O(n^2) sweep over a small array (short spans, the common case)
 *   bpe_encode_backtrack O(n) amortized: longest-prefix trie walk + pair-validity backtracking with a
 *                        monotone bitfield (van Antwerpen & Neubeck, rust-gems `bpe`); needs ranks
 *                        that increase along merges (`backtrack_ok`, checked at compile time)
 *   bpe_encode_heap      O(n log n) binary heap + linked list (long spans when backtracking is not valid)
 */
#ifndef FSTOK_BPE_H
#define FSTOK_BPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BPE_NONE 0xFFFFFFFFu
#define BPE_EMPTY_KEY 0xFFFFFFFFFFFFFFFFull

typedef struct {
    uint32_t n_int;             /* reachable (internal) tokens */
    uint32_t n_ext;             /* external id space (decode table size) */
    const uint32_t *int_ext;    /* internal -> external id */
    const uint32_t *int_len;    /* internal -> byte length */
    const uint32_t *split_l;    /* canonical split (leaf: itself) */
    const uint32_t *split_r;
    const uint32_t *next_prefix;/* longest reachable proper prefix, BPE_NONE if none */
    const uint64_t *pair_keys;  /* (left << 32 | right), BPE_EMPTY_KEY = empty */
    const uint32_t *pair_vals;  /* merged internal id (= rank) */
    uint64_t pair_mask;
    int pair_shift;
    const uint32_t *span_tag;   /* high 32 bits of the span hash */
    const uint32_t *span_id;    /* external id, BPE_NONE = empty */
    uint64_t span_mask;
    const uint8_t *dec_bytes;   /* external id -> bytes (arena + offsets) */
    const uint32_t *dec_off;
    const uint8_t *dec_kind;    /* 0 unused id, 1 mergeable, 2 special/added, 3 decode-only */
    const int32_t *da_base;     /* double-array trie over internal tokens */
    const uint32_t *da_check;
    const uint32_t *da_tok;
    uint32_t da_size;
    uint32_t byte_tok[256];     /* byte -> internal id */
    uint32_t max_span_len;      /* longest whole-span token */
    int backtrack_ok;
    uint32_t short_max;         /* spans up to this length use bpe_encode_short */
} bpe_model;

/* growable output of external ids (+ optional token start offsets) */
typedef struct {
    uint32_t *ids;
    size_t len, cap;
} bpe_vec;

static inline uint64_t bpe_rd64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline uint64_t bpe_rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }

static inline uint64_t bpe_mum(uint64_t a, uint64_t b) {
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/* wyhash-style hash of a byte string; the compiler and the runtime both use this one. */
static inline uint64_t bpe_hash_bytes(const uint8_t *p, size_t n) {
    const uint64_t s0 = 0xa0761d6478bd642full, s1 = 0xe7037ed1a0b428dbull, s2 = 0x8ebc6af09c88c6e3ull;
    uint64_t a, b, seed = 0x243f6a8885a308d3ull ^ (uint64_t)n;
    if (n <= 16) {
        if (n >= 4) {
            a = (bpe_rd32(p) << 32) | bpe_rd32(p + ((n >> 3) << 2));
            b = (bpe_rd32(p + n - 4) << 32) | bpe_rd32(p + n - 4 - ((n >> 3) << 2));
        } else if (n > 0) {
            a = ((uint64_t)p[0] << 16) | ((uint64_t)p[n >> 1] << 8) | p[n - 1];
            b = 0;
        } else {
            a = b = 0;
        }
    } else {
        size_t i = n;
        while (i > 16) {
            seed = bpe_mum(bpe_rd64(p) ^ s1, bpe_rd64(p + 8) ^ seed);
            p += 16;
            i -= 16;
        }
        a = bpe_rd64(p + i - 16);
        b = bpe_rd64(p + i - 8);
    }
    return bpe_mum(s1 ^ (uint64_t)n, bpe_mum(a ^ s1, b ^ seed) ^ s2) ^ s0;
}

static inline uint64_t bpe_pair_key(uint32_t a, uint32_t b) { return ((uint64_t)a << 32) | b; }
static inline uint64_t bpe_pair_slot(uint64_t key, int shift) { return (key * 0x9E3779B97F4A7C15ull) >> shift; }

/* merged internal id of the canonical pair (a, b), or BPE_NONE */
static inline uint32_t bpe_pair_get(const bpe_model *m, uint32_t a, uint32_t b) {
    uint64_t key = bpe_pair_key(a, b);
    uint64_t i = bpe_pair_slot(key, m->pair_shift);
    for (;;) {
        uint64_t k = m->pair_keys[i];
        if (k == key) return m->pair_vals[i];
        if (k == BPE_EMPTY_KEY) return BPE_NONE;
        i = (i + 1) & m->pair_mask;
    }
}

/* external id of the token whose bytes are exactly s[0:n), or BPE_NONE */
static inline uint32_t bpe_span_get(const bpe_model *m, const uint8_t *s, size_t n) {
    if (n > m->max_span_len) return BPE_NONE;
    uint64_t h = bpe_hash_bytes(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    uint64_t i = h & m->span_mask;
    for (;;) {
        uint32_t id = m->span_id[i];
        if (id == BPE_NONE) return BPE_NONE;
        if (m->span_tag[i] == tag) {
            uint32_t o = m->dec_off[id], e = m->dec_off[id + 1];
            if (e - o == n && memcmp(m->dec_bytes + o, s, n) == 0) return id;
        }
        i = (i + 1) & m->span_mask;
    }
}

int bpe_vec_reserve(bpe_vec *v, size_t extra);
/* Encode one pre-token s[0:n) and append external ids. Returns 0, or -1 on allocation failure. */
int bpe_encode_span(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
/* The individual encoders (append internal ids converted to external ids). */
int bpe_encode_short(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
int bpe_encode_backtrack(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
int bpe_encode_heap(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);

#endif
