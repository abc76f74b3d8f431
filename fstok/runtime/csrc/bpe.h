/* Byte-level BPE runtime: the compiled tables (views into an fstok artifact) and span encoders (lib_bpe.c).
 * Python-free.  Oracle: fstok/reference/bpe.py (merge_ranks, merge_rules).
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
 *   bpe_encode_bucket    O(n + V/64) one bucket per rank + two-level bitmap, monotone ranks only: taken by
 *                        the backtracking encoder for long spans that keep backtracking (digit runs)
 */
#ifndef FSTOK_BPE_H
#define FSTOK_BPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BPE_NONE 0xFFFFFFFFu
#define BPE_EMPTY_KEY 0xFFFFFFFFFFFFFFFFull

/* pair table slot: (left << 43) | (right << 22) | merged ; left, right < 2^21, merged < 2^22 */
#define BPE_PAIR_ID_BITS 21
#define BPE_PAIR_SMALL 1024u /* ids of the dense pair table (bpe_pair_get) */
#define BPE_MAX_INTERNAL (1u << BPE_PAIR_ID_BITS)

typedef struct {
    uint32_t n_int;             /* reachable (internal) tokens */
    uint32_t n_ext;             /* external id space (decode table size) */
    const uint32_t *int_ext;    /* internal -> external id */
    const uint32_t *info;       /* 4 words per internal token, one cache line holds all four:
                                   byte length, canonical split left, right (leaf: itself),
                                   longest reachable proper prefix (BPE_NONE if none) */
    const uint64_t *pair_tab;   /* packed pair slots, BPE_EMPTY_KEY = empty */
    uint64_t pair_mask;
    int pair_shift;
    const uint64_t *pair_bloom; /* one bit per hashed pair key: a clear bit proves the pair is absent */
    int bloom_shift;
    const uint64_t *pair_hot;   /* the pairs of the lowest-ranked merges again, in a small table probed first */
    uint64_t pair_hot_mask;
    int pair_hot_shift;
    const uint32_t *byte_pair;  /* [256*256]: merged internal id of two single-byte tokens, or BPE_NONE */
    const uint64_t *span_tab;   /* 2 words per slot: first 8 bytes (zero padded), id | len << 32 */
    uint64_t span_mask;
    const uint64_t *span_hot;   /* the same layout for the lowest-ranked (most frequent) tokens only:
                                   small enough to stay in cache, probed first */
    uint64_t hot_mask;
    const uint64_t *span_bloom; /* blocked bloom filter over span_tab's keys (2 bits of one word per key;
                                   stored by the compiler; NULL: none): most multi-token spans skip span_tab */
    uint64_t span_bloom_mask;
    const uint8_t *dec_bytes;   /* external id -> bytes (arena + offsets) */
    const uint32_t *dec_off;
    const uint8_t *dec_kind;    /* 0 unused id, 1 mergeable, 2 special/added, 3 decode-only */
    const uint32_t *trie;       /* double-array trie, 3 words per node: base (int32), check, token */
    uint32_t da_size;
    uint32_t byte_tok[256];     /* byte -> internal id */
    uint32_t max_span_len;      /* longest whole-span token */
    int backtrack_ok;
    uint32_t short_max;         /* spans up to this length (not single tokens) use bpe_encode_short */
    uint32_t short_max_mb;      /* the same for spans ending in a non-ASCII byte (multi-byte scripts) */
    uint32_t hash_max;          /* spans up to this length try the whole-span hash first */
    int int_is_ext;             /* internal id == external id for every internal token */
    int trie_has_spans;         /* every whole-span token is in the trie (no unreachable ones), so the
                                   backtracking encoder needs no whole-span lookup first */
    /* Segment tables (stored by the compiler, bpe_builders.h bpe_filters_build; NULL: none, the encoders work
     * without them).  A boundary between two
     * bytes of a pre-token that no internal token can span is *dead*: no merge ever crosses it (every merge
     * result is an internal token), so BPE of the pre-token is BPE of its segments, and a pre-token with a dead
     * boundary is not one token.  Random text has many (docs/design/bpe.md). */
    const uint8_t *seg_big;     /* [65536] per byte bigram a << 8 | b: BPE_SEG_IN (inside some internal token),
                                   BPE_SEG_START (starts one), BPE_SEG_END (ends one) */
    const uint32_t *seg_tri;    /* 2^BPE_SEG_TRI_BITS bits: byte trigrams inside some internal token (bpe_tri_bit) */
    /* The pair table again for the two-lane window encoder on AVX-512 machines (built on first use by
     * win_pair_buckets in lib_bpe.c, freed by bpe_model_release): buckets of one cache line, 7 slots + a sentinel. */
    uint64_t *win_vb;
    uint64_t win_vb_mask;       /* buckets - 1 */
    /* Small-alphabet pair tables for the same encoder (win_alpha_get in lib_bpe.c, built on first use, freed by
     * bpe_model_release): the tokens made of one byte set only (digit runs), renumbered 0..1022. */
    void *win_alpha[8];
    /* Non-monotone vocabularies (backtrack_ok false): the internal tokens whose canonical split has a part ranked
     * after them, sorted by their first two bytes (bpe_model_prepare; nm_n = 0: none).  A span that contains none of
     * their byte strings only ever forms tokens of the sub-vocabulary without them (a token is formed inside the
     * span, so its bytes and those of every part of its merge tree occur in the span), and that sub-vocabulary is
     * rank-monotone: there the backtracking and window encoders give BPE's result (bpe_nm_absent). */
    uint32_t nm_n;
    int nm_use;                 /* take the monotone encoders on spans without those tokens (0: tests force the heap) */
    uint64_t *nm_first;         /* [1024] one bit per byte bigram that starts one of them */
    uint32_t *nm_key;           /* [nm_n] their first two bytes (a << 8 | b), ascending */
    uint32_t *nm_ext;           /* [nm_n] their external ids (bytes: dec_bytes) */
    /* The randomly probed tables copied into 2 MiB pages (bpe_model_prepare, lib_bpe.c; NULL: they stay in the
     * artifact's mapping), and the artifact's own pointers, put back by bpe_model_release. */
    void *huge_mem;
    size_t huge_len;
    /* The pairs (a, b) of two internal ids below BPE_PAIR_SMALL as a rank/select bitmap (lib_bpe.c pair_small_build;
     * NULL: none): bit a * BPE_PAIR_SMALL + b of pair_small is set when the pair merges; pair_small_base[w] counts the
     * set bits of the words before word w, and pair_small_val holds the merged ids in bit order.  320 KiB for o200k
     * instead of a 4 MiB dense table: it stays in the core's second-level cache on text never seen before. */
    const uint64_t *pair_small;
    const uint32_t *pair_small_base;
    const uint32_t *pair_small_val;
    void *pair_small_mem;
    const void *huge_orig[11];
} bpe_model;

/* 1 when s[0:n) contains none of the non-monotone tokens' byte strings (see nm_n), 0 otherwise */
static inline int bpe_nm_absent(const bpe_model *m, const uint8_t *s, size_t n) {
    const uint64_t *f = m->nm_first;
    uint32_t w = s[0];
    for (size_t i = 1; i < n; i++) {
        w = (w << 8 | s[i]) & 0xFFFFu;
        if (__builtin_expect(!((f[w >> 6] >> (w & 63)) & 1), 1)) continue;
        size_t lo = 0, hi = m->nm_n; /* the first entry with this bigram */
        while (lo < hi) {
            size_t mid = (lo + hi) >> 1;
            if (m->nm_key[mid] < w) lo = mid + 1;
            else hi = mid;
        }
        for (; lo < m->nm_n && m->nm_key[lo] == w; lo++) {
            uint32_t e = m->nm_ext[lo];
            size_t len = m->dec_off[e + 1] - m->dec_off[e];
            if (len <= n - (i - 1) && memcmp(s + i - 1, m->dec_bytes + m->dec_off[e], len) == 0) return 0;
        }
    }
    return 1;
}

#define BPE_SEG_IN 1u
#define BPE_SEG_START 2u
#define BPE_SEG_END 4u
#define BPE_SEG_TRI_BITS 19
/* the bit of byte trigram k3 = a << 16 | b << 8 | c in seg_tri (a 32-bit multiply: the direct runs compute it 8 or 16
 * lanes at a time, bpe_direct.h) */
static inline uint32_t bpe_tri_bit(uint32_t k3) { return (k3 * 0x9E3779B1u) >> (32 - BPE_SEG_TRI_BITS); }

static inline int bpe_seg_tri(const bpe_model *m, const uint8_t *p) {
    uint32_t bit = bpe_tri_bit((uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]);
    return (int)((m->seg_tri[bit >> 5] >> (bit & 31)) & 1);
}

/* can an internal token span the boundary between s[b-1] and s[b] of the pre-token s[0:n) (1 <= b < n)?  It
 * contains the bigram s[b-1]s[b]; it starts at b-1 or also contains s[b-2..b]; it ends at b or also contains
 * s[b-1..b+1].  0: dead (no merge crosses it).  Needs m->seg_big. */
static inline int bpe_seg_cross(const bpe_model *m, const uint8_t *s, size_t n, size_t b) {
    uint32_t f = m->seg_big[(uint32_t)s[b - 1] << 8 | s[b]];
    if (!(f & BPE_SEG_IN)) return 0;
    if (!(f & BPE_SEG_START) && (b < 2 || !bpe_seg_tri(m, s + b - 2))) return 0;
    if (!(f & BPE_SEG_END) && (b + 1 >= n || !bpe_seg_tri(m, s + b - 1))) return 0;
    return 1;
}

/* the first dead boundary b in [from, n) of the pre-token s[0:n), or n (none, or no tables) */
static inline size_t bpe_seg_next_dead(const bpe_model *m, const uint8_t *s, size_t n, size_t from) {
    if (!m->seg_big) return n;
    for (size_t b = from; b < n; b++)
        if (!bpe_seg_cross(m, s, n, b)) return b;
    return n;
}

/* 0 when s[0:n) cannot be one token (it has a dead boundary); 1: it may be */
static inline int bpe_seg_may_be_token(const bpe_model *m, const uint8_t *s, size_t n) {
    return bpe_seg_next_dead(m, s, n, 1) >= n;
}

/* build / free the segment tables (an optional speed-up: -1 on allocation failure, and there are none) */
/* Where the tables live: the randomly probed ones are copied into 2 MiB pages (optional; bpe_model_release puts the
 * artifact's pointers back).  The binding then proves the tables it will read (bpe_validate.h) before anything
 * follows an index in them, bpe_model_prepare included. */
void bpe_model_place(bpe_model *m);
/* The tables derived from proven tables (pair_small, the non-monotone tokens): none on allocation failure. */
int bpe_model_prepare(bpe_model *m);
void bpe_model_release(bpe_model *m);

/* growable output of ids */
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

/* the first min(n, 8) bytes of s as a little-endian word, zero padded (reads only s[0:n)) */
static inline uint64_t bpe_head8(const uint8_t *s, size_t n) {
    if (n >= 8) return bpe_rd64(s);
    if (n >= 4) return bpe_rd32(s) | (bpe_rd32(s + n - 4) << (8 * (n - 4)));
    if (n == 0) return 0;
    return (uint64_t)s[0] | ((uint64_t)s[n >> 1] << (8 * (n >> 1))) | ((uint64_t)s[n - 1] << (8 * (n - 1)));
}

/* the head word, reading 8 bytes when `avail` (bytes readable at s) allows: no branch on n */
static inline uint64_t bpe_head8_fast(const uint8_t *s, size_t n, size_t avail) {
    if (avail < 8) return bpe_head8(s, n);
    uint64_t w = bpe_rd64(s);
    return n >= 8 ? w : w & ((1ull << (8 * n)) - 1);
}

/* hash of a span of n <= 8 bytes from its head word */
static inline uint64_t bpe_hash_w(uint64_t w, size_t n) {
    uint64_t h = (w ^ ((uint64_t)n * 0x9E3779B97F4A7C15ull)) * 0xD6E8FEB86659FD93ull;
    return h ^ (h >> 32);
}

/* hash of a byte string; the compiler and the runtime both use this one. */
static inline uint64_t bpe_hash_bytes(const uint8_t *p, size_t n) {
    const uint64_t s0 = 0xa0761d6478bd642full, s1 = 0xe7037ed1a0b428dbull, s2 = 0x8ebc6af09c88c6e3ull;
    if (n <= 8) return bpe_hash_w(bpe_head8(p, n), n);
    uint64_t a, b, seed = 0x243f6a8885a308d3ull ^ (uint64_t)n;
    if (n <= 16) {
        a = bpe_rd64(p);
        b = bpe_rd64(p + n - 8);
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

static inline uint64_t bpe_bloom_bit(uint64_t key, int shift) { return ((key ^ (key >> 29)) * 0xD6E8FEB86659FD93ull) >> shift; }

/* merged id of pair `key` in one open-addressing pair table, or BPE_NONE */
static inline uint32_t bpe_pair_probe(const uint64_t *tab, uint64_t mask, int shift, uint64_t key) {
    uint64_t i = bpe_pair_slot(key, shift);
    for (;;) {
        uint64_t k = tab[i];
        if ((k >> 22) == key) return (uint32_t)(k & 0x3FFFFF);
        if (k == BPE_EMPTY_KEY) return BPE_NONE;
        i = (i + 1) & mask;
    }
}

/* merged internal id of the canonical pair (a, b), or BPE_NONE; hot: probe the small table first */
static inline uint32_t bpe_pair_lookup(const bpe_model *m, uint32_t a, uint32_t b, int hot) {
    uint64_t key = ((uint64_t)a << BPE_PAIR_ID_BITS) | b;
    uint64_t bit = bpe_bloom_bit(key, m->bloom_shift);
    if (!((m->pair_bloom[bit >> 6] >> (bit & 63)) & 1)) return BPE_NONE;
    if (hot) {
        uint32_t r = bpe_pair_probe(m->pair_hot, m->pair_hot_mask, m->pair_hot_shift, key);
        if (r != BPE_NONE) return r;
    }
    return bpe_pair_probe(m->pair_tab, m->pair_mask, m->pair_shift, key);
}

/* set bits of x (portable: the extension is built without -mpopcnt, where the builtin is a library call) */
static inline uint32_t bpe_popcount64(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (uint32_t)((x * 0x0101010101010101ull) >> 56);
}

/* the same, through the small-id bitmap when both parts are among the lowest-ranked ids (it holds the same pairs) */
static inline uint32_t bpe_pair_get(const bpe_model *m, uint32_t a, uint32_t b) {
    if ((a | b) < BPE_PAIR_SMALL && m->pair_small) {
        uint32_t k = a * BPE_PAIR_SMALL + b;
        uint64_t w = m->pair_small[k >> 6], bit = 1ull << (k & 63);
        if (!(w & bit)) return BPE_NONE;
        return m->pair_small_val[m->pair_small_base[k >> 6] + bpe_popcount64(w & (bit - 1))];
    }
    return bpe_pair_lookup(m, a, b, 1);
}

static inline uint32_t bpe_span_probe(const bpe_model *m, const uint64_t *tab, uint64_t mask, uint64_t h, uint64_t w,
                                      const uint8_t *s, size_t n) {
    uint64_t i = h & mask;
    for (;;) {
        const uint64_t *e = tab + 2 * i;
        uint64_t v = e[1];
        if ((uint32_t)v == BPE_NONE) return BPE_NONE;
        if (e[0] == w && (v >> 32) == n) {
            uint32_t id = (uint32_t)v;
            if (n <= 8) return id;
            const uint8_t *t = m->dec_bytes + m->dec_off[id] + 8;
            if (n <= 16 ? bpe_head8(t, n - 8) == bpe_head8(s + 8, n - 8) : memcmp(t, s + 8, n - 8) == 0) return id;
        }
        i = (i + 1) & mask;
    }
}

static inline uint64_t bpe_span_bloom_bits(uint64_t h) { return (1ull << ((h >> 20) & 63)) | (1ull << ((h >> 26) & 63)); }

static inline int bpe_span_bloom_has(const bpe_model *m, uint64_t h) {
    uint64_t b = bpe_span_bloom_bits(h);
    return (m->span_bloom[(h >> 40) & m->span_bloom_mask] & b) == b;
}

/* external id of the token whose bytes are exactly s[0:n), or BPE_NONE; w = bpe_head8(s, n) */
static inline uint32_t bpe_span_get_w(const bpe_model *m, const uint8_t *s, size_t n, uint64_t w) {
    if (n > m->max_span_len || n == 0) return BPE_NONE;
    uint64_t h = n <= 8 ? bpe_hash_w(w, n) : bpe_hash_bytes(s, n);
    if (m->span_bloom && !bpe_span_bloom_has(m, h)) return BPE_NONE;
    uint32_t id = bpe_span_probe(m, m->span_hot, m->hot_mask, h, w, s, n);
    if (id != BPE_NONE) return id;
    return bpe_span_probe(m, m->span_tab, m->span_mask, h, w, s, n);
}

static inline uint32_t bpe_span_get(const bpe_model *m, const uint8_t *s, size_t n) {
    return bpe_span_get_w(m, s, n, bpe_head8(s, n));
}

/* long spans of a non-monotone vocabulary: [0] holding a non-monotone token (heap), [1] without (monotone encoders) */
extern unsigned long bpe_nm_spans[2];
/* times the backtracking encoder had to hand a span to the heap encoder (should stay 0) */
extern unsigned long bpe_backtrack_fallbacks;

#define BPE_LEN(m, t) ((m)->info[4 * (size_t)(t)])
#define BPE_SPLIT_L(m, t) ((m)->info[4 * (size_t)(t) + 1])
#define BPE_SPLIT_R(m, t) ((m)->info[4 * (size_t)(t) + 2])
#define BPE_NEXT_PREFIX(m, t) ((m)->info[4 * (size_t)(t) + 3])

/* Pre-token memo, used by one thread at a time; exact (full keys compared), bounded, it only saves
 * work the tables would redo.  A model keeps a small pool of them (mod_bpe.c).
 *  - short part: multi-token pre-tokens of <= 24 bytes with <= 8 tokens, 2-way set associative
 *    (BPE_MEMO_N entries, one cache line each; a new entry goes to way 0, the old way 0 to way 1, a hit
 *    in way 1 swaps the two);
 *  - long part: any other pre-token of <= BPE_LMEMO_MAXLEN bytes (long words of scripts without
 *    spaces, spans of many tokens): an open-addressing table of (hash, arena offset, length, token count)
 *    over an arena holding the key bytes then the ids; when the arena or the table is full, the long
 *    part is emptied and refilled. */
#define BPE_MEMO_BITS 16
#define BPE_MEMO_N (1u << BPE_MEMO_BITS)
#define BPE_MEMO_MAXLEN 24
#define BPE_MEMO_MAXTOK 8
#define BPE_LMEMO_BITS 13
#define BPE_LMEMO_SLOTS (1u << BPE_LMEMO_BITS)
#define BPE_LMEMO_ARENA (1u << 20)
#define BPE_LMEMO_MAXLEN 1024
typedef struct {
    uint64_t k[3];                  /* the span's bytes, zero padded */
    uint32_t ids[BPE_MEMO_MAXTOK];  /* external ids */
    uint16_t gen;                   /* valid only while equal to the memo's gen */
    uint8_t len, ntok, tag;         /* tag: 8 bits of the key's hash */
    uint8_t len1, tag1;             /* (way 0 only) len and tag of way 1: a miss in way 0 reads way 1 only
                                       when they match the key's */
    uint8_t pad;
} bpe_memo_entry;
typedef struct {
    uint32_t h;        /* high half of bpe_hash_bytes of the key */
    uint32_t gen;      /* valid only while equal to the memo's lgen */
    uint32_t off;      /* arena offset: key bytes, then (4-aligned) ntok external ids */
    uint16_t len;      /* key length */
    uint16_t ntok;
} bpe_lmemo_slot;
/* Piece cache: the first level, probed before anything else for pre-tokens of <= 16 bytes (~90% of the
 * pieces of English text or code, 93% of multilingual.txt under cl100k).  BPE_PC_LINES cache lines of
 * 64 bytes (8 MiB), each either two 32-byte slots (2-way set: a piece of <= 3 tokens, the most recently
 * used in slot 0) or one wide entry (a piece of 4..11 tokens: its ids run on over slot 1).  A hit reads
 * one line: the span table's hash of the two head words picks it, one compare (two for slot 1) checks it.
 * Sized on the whole corpora (tools/bench bpe encodes whole files of 5-6 MB with ~60k distinct pieces):
 * 8 MiB made whole-document encoding 1.3-1.5x faster than the first 576 KiB direct-mapped version (see
 * docs/design/bpe.md). */
#ifndef BPE_PC_LINES
#define BPE_PC_LINES 131072u
#endif
#define BPE_PC_MAXLEN 16
#define BPE_PC_SLOTTOK 3   /* ids of a slot */
#define BPE_PC_MAXTOK 11   /* ids of a wide entry: slot 0's 3 and slot 1's 32 bytes */
typedef struct {
    uint64_t k0, k1;  /* the piece's bytes, zero padded */
    uint32_t tag;     /* gen << 16 | ntok << 8 | len; gen 0 = empty.  Slot 1 is a slot only while slot 0's
                         ntok (whatever its gen) is <= BPE_PC_SLOTTOK; otherwise it holds slot 0's ids */
    uint32_t ids[BPE_PC_SLOTTOK];
} bpe_pc_slot;
typedef union {
    bpe_pc_slot s[2];
    struct {
        uint64_t k0, k1;
        uint32_t tag;
        uint32_t ids[BPE_PC_MAXTOK];
    } wide;
} bpe_pc_line;
_Static_assert(sizeof(bpe_pc_line) == 64, "a piece-cache line is one cache line");
/* share of dead boundaries in the spans a memo's thread segmented lately (lib_bpe.c encode_segmented) */
typedef struct {
    uint32_t dead, all, calls;
    int branchy;
} bpe_seg_rate;
typedef struct {
    bpe_memo_entry e[BPE_MEMO_N];   /* first: the memo is allocated 64-byte aligned (bpe_memo_new) */
    bpe_pc_line pc[BPE_PC_LINES];   /* piece cache (generation: gen), 64-byte aligned */
    bpe_lmemo_slot ls[BPE_LMEMO_SLOTS];
    uint64_t serial, epoch; /* the model it belongs to, and that model's cache epoch when filled */
    uint32_t gen, lgen;     /* generations: emptying a part bumps its counter instead of clearing it (gen < 2^16) */
    uint32_t lused, lcount; /* arena bytes used, long slots used */
    bpe_seg_rate seg;
    uint32_t pc_seen, pc_missed; /* pieces looked up in the piece cache lately, and those that missed (bpe_encode.h: the
                                    lockstep fill of cold pieces runs while many miss) */
    int pc_cold;
    struct bpe_shared *shared; /* while the memo's thread works on a multi-threaded call: the model's shared piece
                                  cache (bpe_shared_cache.h), else NULL */
    uint8_t arena[BPE_LMEMO_ARENA];
} bpe_memo;

/* a new empty memo (release it with bpe_memo_free), or NULL */
bpe_memo *bpe_memo_new(void);
void bpe_memo_free(bpe_memo *memo);
/* empty a memo (both parts; O(1) except once every 2^16 times) */
void bpe_memo_clear(bpe_memo *memo);

/* start loading the whole-span slot of s[0:n) (call a few spans ahead of bpe_encode_span) */
static inline void bpe_span_prefetch(const bpe_model *m, const uint8_t *s, size_t n) {
    if (n <= m->hash_max && n <= m->max_span_len) {
        uint64_t h = bpe_hash_bytes(s, n);
        if (m->span_bloom) __builtin_prefetch(m->span_bloom + ((h >> 40) & m->span_bloom_mask));
        __builtin_prefetch(m->span_hot + 2 * (h & m->hot_mask));
    }
}

int bpe_vec_reserve(bpe_vec *v, size_t extra);
/* Encode one pre-token s[0:n) and append external ids. Returns 0, or -1 on allocation failure. */
int bpe_encode_span(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
/* the same with a thread-private memo (may be NULL) */
int bpe_encode_span_memo(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, bpe_vec *out);
/* the same, told that `avail` >= n bytes are readable at s (lets the lookup read whole words) */
int bpe_encode_span_avail(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, size_t avail, bpe_vec *out);
/* the same for a pre-token known not to be one token (the whole-span lookup was done): memo, encoders */
int bpe_encode_span_multi(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, bpe_vec *out);
/* The individual encoders (append internal ids converted to external ids). */
int bpe_encode_short(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
int bpe_encode_backtrack(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
int bpe_encode_heap(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
/* needs backtrack_ok (monotone ranks) */
int bpe_encode_bucket(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
/* the window encoder (stitched windows, two lanes, small-alphabet tables); needs backtrack_ok */
int bpe_encode_window(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);

#endif
