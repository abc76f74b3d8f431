/* The window encoder and its lanes (part of lib_bpe.c's translation unit, included where it stood so that its
 * static functions inline as before): a span of <= BPE_WIN bytes merged in rank order by a vectorized scan
 * (win_encode), long spans as two stitched lanes of windows encoded in lockstep (AVX2 / AVX-512,
 * encode_stitched), and the small-alphabet lanes for digit runs (win_alpha, bpe_alpha_lanes.h).  Python-free.
 * Oracle: fstok/reference/bpe.py merge_ranks (tests/test_bpe_stitch_lanes.py, tests/test_bpe_small_alphabet.py,
 * tests/test_bpe_window_pairs.py). */
#ifndef FSTOK_BPE_WINDOW_H
#define FSTOK_BPE_WINDOW_H

/* ---------------------------------------------------------------- window encoder: merges in rank order, <= BPE_WIN bytes */

#define BPE_WIN 128 /* window bytes: positions fit in the low 8 bits of a key, 0xFF is "none" */
#define WKEY_NONE 0xFFFFFFFFu
#define WPOS_NONE 0xFFu

/* bpe_pair_get without the hot table (a window's pairs are few and stay in cache) */
static inline uint32_t win_pair(const bpe_model *m, uint32_t a, uint32_t b) { return bpe_pair_lookup(m, a, b, 0); }

static inline uint32_t win_key(uint32_t rank, size_t i) { return rank == BPE_NONE ? WKEY_NONE : (rank << 8) | (uint32_t)i; }

/* the AVX2 clone of win_encode scans 8 keys per instruction (2-3x faster on spans with few merges) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define WIN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WIN_CLONES
#endif

/* BPE of s[0:n), 1 <= n <= BPE_WIN: repeatedly merge the lowest-ranked pair, leftmost first.  key[i] = rank << 8 | i
 * for the pair that starts at live position i (WKEY_NONE: none or dead), so the smallest key names the next merge
 * and ties go to the leftmost occurrence; it is found by a scan of the window (vectorized).  Cost: O(n) setup plus
 * O(n / 8) per merge, with no hashing of the span and no trie walk: cheaper than backtracking where tokens are
 * short (few merges per byte).  Internal ids to out, their start offsets to st; returns the count. */
WIN_CLONES
static size_t win_encode(const bpe_model *m, const uint8_t *s, size_t n, uint32_t *out, uint8_t *st) {
    uint32_t key[BPE_WIN] __attribute__((aligned(64))), tok[BPE_WIN];
    uint8_t nx[BPE_WIN], pv[BPE_WIN];
    size_t nw = (n + 15) & ~(size_t)15;
    for (size_t i = 0; i < n; i++) {
        tok[i] = m->byte_tok[s[i]];
        nx[i] = (uint8_t)(i + 1);
        pv[i] = (uint8_t)(i - 1);
    }
    nx[n - 1] = WPOS_NONE;
    pv[0] = WPOS_NONE;
    for (size_t i = 0; i + 1 < n; i++) key[i] = win_key(m->byte_pair[((uint32_t)s[i] << 8) | s[i + 1]], i);
    for (size_t i = n - 1; i < nw; i++) key[i] = WKEY_NONE;
    for (;;) {
        uint32_t kk = WKEY_NONE;
        for (size_t i = 0; i < nw; i++) kk = key[i] < kk ? key[i] : kk;
        if (kk == WKEY_NONE) break;
        uint32_t r = kk >> 8;
        size_t i = kk & 0xFF, j = nx[i], q = nx[j];
        tok[i] = r;
        key[j] = WKEY_NONE;
        nx[i] = (uint8_t)q;
        if (q != WPOS_NONE) {
            pv[q] = (uint8_t)i;
            key[i] = win_key(win_pair(m, r, tok[q]), i);
        } else {
            key[i] = WKEY_NONE;
        }
        size_t p = pv[i];
        if (p != WPOS_NONE) key[p] = win_key(win_pair(m, tok[p], r), p);
    }
    size_t c = 0;
    for (size_t i = 0; i != WPOS_NONE; i = nx[i]) {
        out[c] = tok[i];
        st[c++] = (uint8_t)i;
    }
    return c;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define WIN_X2 1
#include <immintrin.h>

/* ---- long spans on AVX2 machines: two stitched lanes whose windows are encoded in lockstep.
 * One window's merges form a chain of dependent steps (scan for the minimum, merge, two pair probes, key stores
 * that the next scan reads): ~100 cycles per merge at an IPC near 1.  Two independent windows interleaved let the
 * core overlap the two chains.  The span is cut in two lanes, s[0:mid+X2_OVERLAP) and s[mid:n); each lane is
 * stitched exactly like encode_stitched (same keep/advance rule, junction check and repairs); the lanes are joined
 * at a token boundary c both share within [mid+16, mid+X2_OVERLAP-16], checked with valid_pair (pair lemma,
 * docs/design/bpe.md); when there is none, or the pair is not valid, lane A drops its tokens after mid and goes on alone
 * to the end of the span (at most twice the work of one lane: still linear). */

#define X2_OVERLAP 64
#define X2_MIN 1024     /* spans shorter than this: one lane */
#define WNB_NONE 0xFFFFFFu /* rank field of "no pair" in a lane's keys (key >= 0xFF000000: no pair or dead) */

typedef struct {
    const uint64_t *tab, *bloom;
    const uint32_t *byte_tok, *byte_pair;
    uint64_t mask;
    int shift, bshift;
    const uint64_t *vb; /* win_pair_buckets, or NULL (then pair_nb) */
    const uint64_t *vsig; /* its pair signatures */
    uint64_t vnb;         /* buckets (the index of the empty one) */
    int vshift;
    const struct win_alpha_s *al; /* small-alphabet tables (win_alpha_get), or NULL */
    int amode;                    /* with al: the instance of the lanes (WA_AVX2 or WA_AVX512) */
    const uint32_t *avb;          /* al's buckets, multiplier and shift (copied: no reload after key stores) */
    uint64_t amul;
    int ashift;
} win_tabs;

/* rank of the canonical pair (a, b), or WNB_NONE, without a data-dependent branch in the common case: the bloom
 * bit and the first two slots of the probe sequence are combined with masks; the probe loop runs only when the
 * bloom bit is set and both slots hold other keys.  In long spans (digit runs) the pairs repeat and stay in cache,
 * where the bloom filter's branch (taken about half the time) cost more than the two loads. */
static inline uint32_t pair_nb(const win_tabs *t, uint32_t a, uint32_t b) {
    uint64_t key = ((uint64_t)a << BPE_PAIR_ID_BITS) | b;
    uint64_t bit = bpe_bloom_bit(key, t->bshift), i = bpe_pair_slot(key, t->shift);
    uint64_t k0 = t->tab[i], k1 = t->tab[(i + 1) & t->mask];
    uint64_t inb = (t->bloom[bit >> 6] >> (bit & 63)) & 1;
    uint64_t m0 = -(uint64_t)((k0 >> 22) == key), m1 = -(uint64_t)((k1 >> 22) == key);
    if (__builtin_expect(inb & ~(m0 | m1) & (k0 != BPE_EMPTY_KEY) & (k1 != BPE_EMPTY_KEY) & 1, 0)) {
        for (i = (i + 2) & t->mask;; i = (i + 1) & t->mask) {
            uint64_t k = t->tab[i];
            if ((k >> 22) == key) return (uint32_t)(k & 0x3FFFFF);
            if (k == BPE_EMPTY_KEY) return WNB_NONE;
        }
    }
    return (uint32_t)(((m0 & k0) | (m1 & k1)) & 0x3FFFFF) | (uint32_t)(~(m0 | m1) & WNB_NONE);
}

/* ---- the pair table in buckets of one 64-byte line (AVX-512): slots 0-6 hold pair slots as in pair_tab (key << 22 |
 * rank), slot 7 and empty slots hold an all-ones key (no pair has it: ids < 2^21 - 1) and rank VB_NONE, or VB_OVF in
 * slot 7 when more than 7 pairs hashed to the bucket (those are looked up in pair_tab).  A lookup is one vector
 * compare of the line against the key and one load of the matching slot (or slot 7): about half the instructions
 * of pair_nb, and no branch but the rare overflow. */
#define VB_NONE 0x3FFFFFu
#define VB_OVF 0x3FFFFEu
#define VB_EMPTY (~0ull << 22 | VB_NONE)
#define VB_MUL 0x9E3779B97F4A7C15ull

/* 6-bit hash of an internal id for the pair signatures: word 2t of the signatures has bit vb_sig_h(b) for every pair
 * (t, b), word 2t+1 bit vb_sig_h(a) for every pair (a, t) */
static inline uint32_t vb_sig_h(uint32_t t) { return (t * 0x9E3779B1u) >> 26; }

/* built once per model on first use (racing threads: one table wins); NULL on allocation failure */
static const uint64_t *win_pair_buckets(const bpe_model *m, uint64_t *mask_out) {
    uint64_t *vb = __atomic_load_n(&((bpe_model *)m)->win_vb, __ATOMIC_ACQUIRE);
    if (vb) {
        *mask_out = m->win_vb_mask;
        return vb;
    }
    if (m->n_int >= BPE_MAX_INTERNAL - 1) return NULL;
    size_t pairs = 0;
    for (uint64_t i = 0; i <= m->pair_mask; i++) pairs += m->pair_tab[i] != BPE_EMPTY_KEY;
    /* ~3 pairs per bucket: about 1% of the buckets overflow (Poisson); test hook $FSTOK_BPE_VB_PER_BUCKET (1-64):
     * more per bucket, so that many pairs take the overflow path */
    const char *e = getenv("FSTOK_BPE_VB_PER_BUCKET");
    int per = e ? atoi(e) : 0;
    uint64_t nb = 64;
    while (nb * (per >= 1 && per <= 64 ? (uint64_t)per : 3) < pairs) nb *= 2;
    size_t sig_words = ((size_t)m->n_int * 2 + 7) & ~(size_t)7;
    vb = (uint64_t *)aligned_alloc(64, (nb + 1) * 64 + sig_words * 8);
    if (!vb) return NULL;
    for (uint64_t i = 0; i < (nb + 1) * 8; i++) vb[i] = VB_EMPTY; /* bucket nb: always empty (filtered lookups) */
    uint64_t *sig = vb + (nb + 1) * 8;
    memset(sig, 0, sig_words * 8);
    int sh = 64;
    for (uint64_t x = nb; x > 1; x >>= 1) sh--;
    for (uint64_t i = 0; i <= m->pair_mask; i++) {
        uint64_t k = m->pair_tab[i];
        if (k == BPE_EMPTY_KEY) continue;
        uint64_t key = k >> 22;
        uint32_t a = (uint32_t)(key >> BPE_PAIR_ID_BITS), b = (uint32_t)(key & (BPE_MAX_INTERNAL - 1));
        if (a < m->n_int && b < m->n_int) {
            sig[2 * (size_t)a] |= 1ull << vb_sig_h(b);
            sig[2 * (size_t)b + 1] |= 1ull << vb_sig_h(a);
        }
        uint64_t *bk = vb + 8 * ((key * VB_MUL) >> sh);
        int j = 0;
        while (j < 7 && bk[j] != VB_EMPTY) j++;
        if (j < 7) bk[j] = k;
        else bk[7] = ~0ull << 22 | VB_OVF;
    }
    __atomic_store_n(&((bpe_model *)m)->win_vb_mask, nb - 1, __ATOMIC_RELAXED); /* the same in every thread */
    uint64_t *expect = NULL;
    if (!__atomic_compare_exchange_n(&((bpe_model *)m)->win_vb, &expect, vb, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(vb);
        vb = expect;
    }
    *mask_out = nb - 1;
    return vb;
}

/* one window of a lane: the same state as win_encode's */
typedef struct {
    uint32_t key[BPE_WIN] __attribute__((aligned(64)));
    uint32_t tok[BPE_WIN];
    uint8_t nx[BPE_WIN], pv[BPE_WIN];
    size_t nb; /* blocks of 32 keys scanned */
} win_lane;

static inline void wl_init(const win_tabs *t, win_lane *L, const uint8_t *s, size_t n) {
    L->nb = (n + 31) / 32;
    for (size_t i = 0; i < n; i++) {
        L->tok[i] = t->byte_tok[s[i]];
        L->nx[i] = (uint8_t)(i + 1);
        L->pv[i] = (uint8_t)(i - 1);
    }
    L->nx[(n - 1) & (BPE_WIN - 1)] = WPOS_NONE; /* 1 <= n <= BPE_WIN (the mask: for the compiler) */
    L->pv[0] = WPOS_NONE;
    for (size_t i = 0; i + 1 < n; i++) L->key[i] = win_key(t->byte_pair[((uint32_t)s[i] << 8) | s[i + 1]], i);
    for (size_t i = n - 1; i < 32 * L->nb; i++) L->key[i] = WKEY_NONE;
}

/* one merge (the smallest key); 0 when there is none left.  Defined once for each pair lookup (PAIR): wl_step
 * with pair_nb (AVX2), wl_step_vb with pair_vb (AVX-512, below). */
#define WL_STEP_DEF(NAME, TARGET, PAIR) \
__attribute__((target(TARGET), always_inline)) static inline int NAME(const win_tabs *t, win_lane *L) { \
    const __m256i *p = (const __m256i *)L->key;                                                         \
    __m256i a0 = _mm256_load_si256(p), a1 = _mm256_load_si256(p + 1), a2 = _mm256_load_si256(p + 2),    \
            a3 = _mm256_load_si256(p + 3);                                                              \
    for (size_t b = 1; b < L->nb; b++) {                                                                \
        p += 4;                                                                                         \
        a0 = _mm256_min_epu32(a0, _mm256_load_si256(p));                                                \
        a1 = _mm256_min_epu32(a1, _mm256_load_si256(p + 1));                                            \
        a2 = _mm256_min_epu32(a2, _mm256_load_si256(p + 2));                                            \
        a3 = _mm256_min_epu32(a3, _mm256_load_si256(p + 3));                                            \
    }                                                                                                   \
    a0 = _mm256_min_epu32(_mm256_min_epu32(a0, a1), _mm256_min_epu32(a2, a3));                          \
    __m128i x = _mm_min_epu32(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1));             \
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0x4E));                                                   \
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0xB1));                                                   \
    uint32_t kk = (uint32_t)_mm_cvtsi128_si32(x);                                                       \
    if (kk >= 0xFF000000u) return 0;                                                                    \
    uint32_t r = kk >> 8;                                                                               \
    size_t i = kk & 0xFF, j = L->nx[i], q = L->nx[j];                                                   \
    L->tok[i] = r;                                                                                      \
    L->key[j] = WKEY_NONE;                                                                              \
    L->nx[i] = (uint8_t)q;                                                                              \
    if (q != WPOS_NONE) {                                                                               \
        L->pv[q] = (uint8_t)i;                                                                          \
        L->key[i] = (PAIR(t, r, L->tok[q]) << 8) | (uint32_t)i;                                         \
    } else {                                                                                            \
        L->key[i] = WKEY_NONE;                                                                          \
    }                                                                                                   \
    size_t pp = L->pv[i];                                                                               \
    if (pp != WPOS_NONE) L->key[pp] = (PAIR(t, L->tok[pp], r) << 8) | (uint32_t)pp;                     \
    return 1;                                                                                           \
}

WL_STEP_DEF(wl_step, "avx2", pair_nb)

static inline size_t wl_out(const win_lane *L, uint32_t *out, uint8_t *st) {
    size_t c = 0;
    for (size_t i = 0; i != WPOS_NONE; i = L->nx[i]) {
        out[c] = L->tok[i];
        st[c++] = (uint8_t)i;
    }
    return c;
}

/* BPE of two windows at once (n0, n1 >= 1; n1 == 0: only the first) */
__attribute__((target("avx2"))) static void win_encode_x2(const win_tabs *t, win_lane *L, const uint8_t *s0, size_t n0,
                                                          const uint8_t *s1, size_t n1) {
    wl_init(t, &L[0], s0, n0);
    int a = 1, b = n1 > 0;
    if (b) wl_init(t, &L[1], s1, n1);
    while (a & b) {
        a = wl_step(t, &L[0]);
        b = wl_step(t, &L[1]);
    }
    while (a) a = wl_step(t, &L[0]);
    while (b) b = wl_step(t, &L[1]);
}

/* pair_nb from the bucketed table (t->vb) */
__attribute__((target("avx512f"), always_inline)) static inline uint32_t pair_vb(const win_tabs *t, uint32_t a, uint32_t b) {
    uint64_t key = ((uint64_t)a << BPE_PAIR_ID_BITS) | b;
    uint64_t bi = (key * VB_MUL) >> t->vshift;
    uint64_t pass = (t->vsig[2 * (size_t)a] >> vb_sig_h(b)) & (t->vsig[2 * (size_t)b + 1] >> vb_sig_h(a)) & 1;
    bi = (bi & -pass) | (t->vnb & (pass - 1)); /* a pair ruled out by the signatures: the empty bucket (in cache) */
    const uint64_t *bk = t->vb + 8 * bi;
    __m512i v = _mm512_load_si512((const void *)bk);
    __mmask8 hit = _mm512_cmpeq_epi64_mask(_mm512_srli_epi64(v, 22), _mm512_set1_epi64((long long)key));
    uint32_t r = (uint32_t)bk[__builtin_ctz((unsigned)hit | 0x80u)] & 0x3FFFFF;
    if (__builtin_expect(r == VB_OVF, 0)) return pair_nb(t, a, b);
    return r == VB_NONE ? WNB_NONE : r;
}

/* wl_step with pair_vb */
WL_STEP_DEF(wl_step_vb, "avx2,avx512f", pair_vb)

__attribute__((target("avx2,avx512f"))) static void win_encode_x2_vb(const win_tabs *t, win_lane *L, const uint8_t *s0,
                                                                     size_t n0, const uint8_t *s1, size_t n1) {
    wl_init(t, &L[0], s0, n0);
    int a = 1, b = n1 > 0;
    if (b) wl_init(t, &L[1], s1, n1);
    while (a & b) {
        a = wl_step_vb(t, &L[0]);
        b = wl_step_vb(t, &L[1]);
    }
    while (a) a = wl_step_vb(t, &L[0]);
    while (b) b = wl_step_vb(t, &L[1]);
}

static int have_avx512 = -1; /* $FSTOK_BPE_NO_AVX512=1: 0 (tests: both paths) */

/* ---- small alphabets (digit runs under r50k's \p{N}+): the tokens made only of the bytes of one set S, in rank
 * order, get local ids 0..WA_MAXTOK-1, and their canonical pairs go to a table of WA_B-slot buckets of 32-bit slots
 * (local key a << 10 | b, then the local merged id; slot 15 and empty slots: all ones = no pair) that fits in L1
 * (r50k digits: 994 tokens, 984 pairs, 16 KiB).  Exact on a span whose bytes are all in S: every merge result on
 * it is made of bytes of S, so a pair of two such tokens merges iff the local table has it, with the same order of
 * ranks (local ids keep the internal order).  The lanes then hold local ids; each window's bytes are checked as
 * they are read (a byte outside S: the span is redone with the full tables).  The lanes' merge loop has two instances
 * (bpe_alpha_lanes.h, included below): AVX-512 VBMI, and AVX2 for the machines without AVX-512 (AMD Zen 2/3: r50k's
 * 100k digits 37.5 -> 22.9 ns/byte). */
#define WA_MAXTOK 1023   /* local ids 0..1022; 0x3FF is "none" */
#define WA_MAXBYTES 32
#define WA_B 16          /* slots per bucket (one 64-byte line) */
#define WA_SLOTS (sizeof(((bpe_model *)0)->win_alpha) / sizeof(void *))
#define WA_MIN 1024      /* spans shorter than this keep the full tables */

typedef struct win_alpha_s {
    uint64_t set[4];      /* the alphabet S */
    uint32_t ntok;        /* 0: not usable (too many tokens, or a byte without a token) */
    uint32_t mul;         /* bucket = (uint32_t)(key * mul) >> shift */
    int shift;
    uint32_t *vb;         /* buckets */
    uint32_t *glob;       /* local -> internal id */
    uint16_t *lsplit;     /* 2 per local id: canonical left, right part (a byte: itself), for wa_valid */
    uint32_t kbytes;      /* |S| */
    uint8_t bidx[256] __attribute__((aligned(64)));  /* byte -> its index in S, 0xFF outside S */
    uint32_t btok[WA_MAXBYTES] __attribute__((aligned(64))); /* index -> local id of the byte's token */
    uint16_t btok16[WA_MAXBYTES] __attribute__((aligned(64))); /* the same (local ids < 2^10) */
    uint8_t cmul[64] __attribute__((aligned(64)));   /* |S| <= WA_KFAST: index c -> c * |S| */
    uint16_t bp16[128] __attribute__((aligned(64))); /* |S| <= WA_KFAST: [c * |S| + d] = bpair[c][d] << 6 */
    uint32_t bpair[WA_MAXBYTES * WA_MAXBYTES]; /* local merged id of two bytes' tokens, or 0x3FF */
} win_alpha;
#define WA_KFAST 11 /* alphabets of up to 11 bytes: the first keys of a window from 128-entry tables (vpermi2d) */

/* which lanes run small alphabets: WA_OFF ($FSTOK_BPE_NO_ALPHA=1: A/B, tests), WA_AVX2, or WA_AVX512 (AVX-512 VBMI,
 * unless $FSTOK_BPE_NO_AVX512=1: tests run both) */
#define WA_OFF 0
#define WA_AVX2 1
#define WA_AVX512 2
static int wa_mode = -1;

/* build the tables of alphabet `set` (ntok 0: not usable); NULL on allocation failure */
static win_alpha *wa_new(const win_alpha *h, size_t extra) {
    size_t hs = (sizeof(win_alpha) + 63) & ~(size_t)63;
    win_alpha *a = (win_alpha *)aligned_alloc(64, hs + ((extra + 63) & ~(size_t)63));
    if (a) memcpy(a, h, sizeof *a);
    return a;
}

/* build the tables of alphabet `set` (ntok 0: not usable), one block (freed by bpe_model_release); NULL on
 * allocation failure */
static win_alpha *wa_build(const bpe_model *m, const uint64_t set[4]) {
    static win_alpha h0;
    win_alpha h = h0;
    memcpy(h.set, set, sizeof h.set);
    memset(h.bidx, 0xFF, sizeof h.bidx);
    uint32_t nbytes = 0;
    for (int b = 0; b < 256; b++)
        if ((set[b >> 6] >> (b & 63)) & 1) {
            if (nbytes == WA_MAXBYTES || m->byte_tok[b] >= m->n_int) return wa_new(&h, 0); /* ntok 0 */
            h.bidx[b] = (uint8_t)nbytes++;
        }
    uint16_t *loc = (uint16_t *)malloc((size_t)m->n_int * sizeof(uint16_t));
    if (!loc) return NULL;
    memset(loc, 0xFF, (size_t)m->n_int * sizeof(uint16_t));
    for (int b = 0; b < 256; b++)
        if (h.bidx[b] != 0xFF) loc[m->byte_tok[b]] = 0xFFFE; /* a byte of S (numbered below) */
    /* internal ids are in rank order and a token's canonical parts rank before it: one pass marks every token that
     * merges can make from the bytes of S */
    uint32_t cnt = 0, pairs = 0;
    for (uint32_t t = 0; t < m->n_int; t++) {
        uint32_t l = BPE_SPLIT_L(m, t), r = BPE_SPLIT_R(m, t);
        int in = loc[t] == 0xFFFE || (l != t && l < t && r < t && loc[l] < 0xFFFE && loc[r] < 0xFFFE);
        if (!in) continue;
        if (cnt == WA_MAXTOK) {
            free(loc);
            return wa_new(&h, 0);
        }
        pairs += loc[t] != 0xFFFE;
        loc[t] = (uint16_t)cnt++;
    }
    /* buckets of <= WA_B - 1 pairs: ~4 per bucket, a multiplier that overflows none.  Test hook
     * $FSTOK_BPE_WA_PER_BUCKET (1-15): that many per bucket, so that lookups reach the bucket's upper slots (with ~4,
     * r50k's digit pairs all sit in slots 0-7) */
    const char *pe = getenv("FSTOK_BPE_WA_PER_BUCKET");
    uint32_t per = pe ? (uint32_t)atoi(pe) : 0, nb = 16, mul = 0;
    if (per < 1 || per > WA_B - 1) per = 4;
    while (nb * per < pairs) nb *= 2;
    uint8_t fill[4096];
    int sh = 32, ok = 0;
    for (; nb <= sizeof fill; nb *= 2) {
        sh = 32;
        for (uint32_t x = nb; x > 1; x >>= 1) sh--;
        for (uint32_t k = 0; k < 64 && !ok; k++) {
            mul = (0x9E3779B1u + 0x6A09E668u * k) | 1;
            memset(fill, 0, nb);
            ok = 1;
            for (uint32_t t = 0; t < m->n_int && ok; t++) {
                if (loc[t] >= 0xFFFE || BPE_SPLIT_L(m, t) == t) continue;
                uint32_t key = (uint32_t)loc[BPE_SPLIT_L(m, t)] << 10 | loc[BPE_SPLIT_R(m, t)];
                if (++fill[(uint32_t)(key * mul) >> sh] >= WA_B) ok = 0; /* slot WA_B-1 stays the sentinel */
            }
        }
        if (ok) break;
    }
    if (!ok) {
        free(loc);
        return wa_new(&h, 0);
    }
    win_alpha *a = wa_new(&h, (size_t)nb * WA_B * 4 + (size_t)cnt * 8);
    if (!a) {
        free(loc);
        return NULL;
    }
    uint32_t *vb = (uint32_t *)((uint8_t *)a + ((sizeof(win_alpha) + 63) & ~(size_t)63)), *glob = vb + (size_t)nb * WA_B;
    uint16_t *lsplit = (uint16_t *)(glob + cnt);
    memset(vb, 0xFF, (size_t)nb * WA_B * 4);
    for (uint32_t t = 0; t < m->n_int; t++) {
        if (loc[t] >= 0xFFFE) continue;
        glob[loc[t]] = t;
        uint32_t l = BPE_SPLIT_L(m, t), r = BPE_SPLIT_R(m, t);
        lsplit[2 * loc[t]] = lsplit[2 * loc[t] + 1] = loc[t];
        if (l == t) continue;
        lsplit[2 * loc[t]] = loc[l];
        lsplit[2 * loc[t] + 1] = loc[r];
        if (bpe_pair_lookup(m, l, r, 0) != t) { /* not the model's pair table: do not use it */
            free(loc);
            a->ntok = 0;
            return a;
        }
        uint32_t key = (uint32_t)loc[l] << 10 | loc[r];
        uint32_t *bk = vb + WA_B * ((uint32_t)(key * mul) >> sh);
        int j = 0;
        while (bk[j] != 0xFFFFFFFFu) j++;
        bk[j] = key << 10 | loc[t];
    }
    for (int b = 0; b < 256; b++) {
        if (a->bidx[b] == 0xFF) continue;
        a->btok[a->bidx[b]] = loc[m->byte_tok[b]];
        for (int c = 0; c < 256; c++) {
            if (a->bidx[c] == 0xFF) continue;
            uint32_t p = m->byte_pair[(uint32_t)b << 8 | c];
            a->bpair[a->bidx[b] * WA_MAXBYTES + a->bidx[c]] = p == BPE_NONE ? 0x3FF : loc[p];
        }
    }
    free(loc);
    a->kbytes = nbytes;
    for (uint32_t c = 0; c < 128; c++) a->bp16[c] = 0xFFC0;
    for (uint32_t c = 0; c < nbytes; c++) a->btok16[c] = (uint16_t)a->btok[c];
    if (nbytes <= WA_KFAST)
        for (uint32_t c = 0; c < nbytes; c++) {
            a->cmul[c] = (uint8_t)(c * nbytes);
            for (uint32_t d = 0; d < nbytes; d++) a->bp16[c * nbytes + d] = (uint16_t)(a->bpair[c * WA_MAXBYTES + d] << 6);
        }
    a->vb = vb;
    a->glob = glob;
    a->lsplit = lsplit;
    a->mul = mul;
    a->shift = sh;
    a->ntok = cnt;
    return a;
}

/* the tables for span s[0:n) when its bytes look like a small alphabet: S = the bytes of its first 256 bytes and of
 * every 64th byte (a byte outside S later makes the lanes start over with the full tables); NULL: none */
static const win_alpha *win_alpha_get(const bpe_model *m, const uint8_t *s, size_t n) {
    uint64_t set[4] = {0, 0, 0, 0};
    size_t h = n < 256 ? n : 256;
    for (size_t i = 0; i < h; i++) set[s[i] >> 6] |= 1ull << (s[i] & 63);
    for (size_t i = h; i < n; i += 64) set[s[i] >> 6] |= 1ull << (s[i] & 63);
    if (__builtin_popcountll(set[0]) + __builtin_popcountll(set[1]) + __builtin_popcountll(set[2]) +
            __builtin_popcountll(set[3]) > WA_MAXBYTES)
        return NULL;
    void **slots = ((bpe_model *)m)->win_alpha;
    for (size_t k = 0; k < WA_SLOTS; k++) {
        win_alpha *a = (win_alpha *)__atomic_load_n(&slots[k], __ATOMIC_ACQUIRE);
        if (!a) {
            /* a new alphabet (at most WA_SLOTS per model, usable or not: bounded memory and build time) */
            win_alpha *b = wa_build(m, set);
            if (!b) return NULL;
            void *expect = NULL;
            if (!__atomic_compare_exchange_n(&slots[k], &expect, b, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                free(b);
                a = (win_alpha *)expect;
            } else {
                a = b;
            }
        }
        if (!memcmp(a->set, set, sizeof set)) return a->ntok ? a : NULL;
    }
    return NULL;
}

/* the local rank of pair key a << 10 | b (0x3FF: none) */
__attribute__((target("avx512f"), always_inline)) static inline uint32_t pair_loc_avx512(const uint32_t *avb, uint32_t amul,
                                                                                  int ashift, uint32_t key) {
    const uint32_t *bk = avb + WA_B * (size_t)((uint32_t)(key * amul) >> ashift);
    __m512i v = _mm512_load_si512((const void *)bk);
    __mmask16 hit = _mm512_cmpeq_epi32_mask(_mm512_srli_epi32(v, 10), _mm512_set1_epi32((int)key));
    return bk[__builtin_ctz((unsigned)hit | 0x8000u)] & 0x3FF;
}

/* A window of a lane on local ids: 16-bit keys rank << 6 | (i & 63) (local rank 0x3FF: no pair; 0xFFFF: dead), so
 * the scan reads half the bytes of win_lane's and each half of the window (positions 0-63, 64-127) ends in one
 * phminposuw; the lower rank wins, the left half on a tie.  Tokens are local ids (16 bits). */
#ifndef WA_WIN
#define WA_WIN BPE_WIN
#endif
typedef struct {
    uint16_t key[WA_WIN] __attribute__((aligned(64)));
    uint16_t tok[WA_WIN] __attribute__((aligned(64)));
    uint8_t nx[WA_WIN], pv[WA_WIN];
    uint64_t live[2]; /* bit i: position i starts a token (the output is read from these, not along nx) */
} wa_lane;

static const uint8_t wa_iota1[BPE_WIN] __attribute__((aligned(64))) = {
#define I8(k) k + 1, k + 2, k + 3, k + 4, k + 5, k + 6, k + 7, k + 8
    I8(0), I8(8), I8(16), I8(24), I8(32), I8(40), I8(48), I8(56), I8(64), I8(72), I8(80), I8(88), I8(96), I8(104),
    I8(112), I8(120)};
#undef I8
static const uint8_t wa_iotam1[BPE_WIN] __attribute__((aligned(64))) = {
#define I8(k) k - 1, k, k + 1, k + 2, k + 3, k + 4, k + 5, k + 6
    0xFF, 0, 1, 2, 3, 4, 5, 6, I8(8), I8(16), I8(24), I8(32), I8(40), I8(48), I8(56), I8(64), I8(72), I8(80), I8(88),
    I8(96), I8(104), I8(112), I8(120)};
#undef I8

/* a window's links and live mask at its start: every position a token of one byte (1 <= n <= WA_WIN) */
static inline void wa_links(wa_lane *L, size_t n) {
    memcpy(L->nx, wa_iota1, WA_WIN);
    memcpy(L->pv, wa_iotam1, WA_WIN);
    L->nx[(n - 1) & (WA_WIN - 1)] = WPOS_NONE;
    L->live[0] = n >= 64 ? ~0ull : (1ull << n) - 1;
    L->live[1] = n >= 128 ? ~0ull : n > 64 ? (1ull << (n - 64)) - 1 : 0;
}

/* a lane's window s[0:n) on local ids (AVX-512 VBMI: the bytes' indices in S by vpermi2b, 64 at a time, their tokens
 * by vpermw, the first pair keys by vpermi2w from bp128 when |S| <= WA_KFAST); nonzero when a byte is outside S */
__attribute__((target("avx2,avx512f,avx512bw,avx512vbmi"), always_inline)) static inline uint32_t
wa_init_avx512(const win_alpha *al, wa_lane *L, const uint8_t *s, size_t n) {
    uint8_t c[WA_WIN + 64] __attribute__((aligned(64)));
    const __m512i *bx = (const __m512i *)al->bidx;
    __m512i b0 = _mm512_load_si512(bx), b1 = _mm512_load_si512(bx + 1), b2 = _mm512_load_si512(bx + 2),
            b3 = _mm512_load_si512(bx + 3);
    uint64_t bad = 0;
    for (size_t i = 0; i < WA_WIN + 64; i += 64) _mm512_store_si512((__m512i *)(c + i), _mm512_setzero_si512());
    for (size_t i = 0; i < n; i += 64) {
        size_t r = n - i;
        __mmask64 lm = r >= 64 ? ~0ull : (1ull << r) - 1;
        __m512i x = _mm512_maskz_loadu_epi8(lm, s + i);
        __m512i lo = _mm512_permutex2var_epi8(b0, x, b1), hi = _mm512_permutex2var_epi8(b2, x, b3);
        __m512i v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi);
        bad |= _mm512_movepi8_mask(v) & lm;
        _mm512_store_si512((__m512i *)(c + i), v);
    }
    if (bad) return 1;
    __m512i bt = _mm512_load_si512((const void *)al->btok16);
    for (size_t i = 0; i < n; i += 32) {
        __m512i ix = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(c + i)));
        _mm512_store_si512((void *)(L->tok + i), _mm512_permutexvar_epi16(ix, bt));
    }
    wa_links(L, n);
    if (al->kbytes <= WA_KFAST) {
        uint8_t ix8[WA_WIN] __attribute__((aligned(64)));
        __m512i cm = _mm512_load_si512((const void *)al->cmul);
        for (size_t i = 0; i < n; i += 64) {
            __m512i a = _mm512_load_si512((const void *)(c + i)), b = _mm512_loadu_si512((const void *)(c + i + 1));
            _mm512_store_si512((void *)(ix8 + i), _mm512_add_epi8(_mm512_permutexvar_epi8(a, cm), b));
        }
        const __m512i *pt = (const __m512i *)al->bp16;
        __m512i p0 = _mm512_load_si512(pt), p1 = _mm512_load_si512(pt + 1), p2 = _mm512_load_si512(pt + 2),
                p3 = _mm512_load_si512(pt + 3);
        __m512i io = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                      11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                k32 = _mm512_set1_epi16(32), k64 = _mm512_set1_epi16(64);
        for (size_t i = 0; i < n; i += 32) {
            __m512i ix = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(ix8 + i)));
            __mmask32 h6 = _mm512_test_epi16_mask(ix, k64);
            __m512i v = _mm512_mask_blend_epi16(h6, _mm512_permutex2var_epi16(p0, ix, p1),
                                                _mm512_permutex2var_epi16(p2, ix, p3));
            _mm512_store_si512((void *)(L->key + i), _mm512_or_si512(v, io));
            io = _mm512_xor_si512(io, k32); /* positions i & 63: 0-31, 32-63, 0-31, ... */
        }
    } else {
        for (size_t i = 0; i + 1 < n; i++)
            L->key[i] = (uint16_t)(al->bpair[(c[i] & (WA_MAXBYTES - 1)) * WA_MAXBYTES + (c[i + 1] & (WA_MAXBYTES - 1))]
                                       << 6 |
                                   (i & 63));
    }
    for (size_t i = n - 1; i < WA_WIN; i++) L->key[i] = 0xFFFF; /* wa_step scans all WA_WIN keys */
    return 0;
}

/* pair_loc_avx512 on AVX2: the bucket's two halves compared separately */
__attribute__((target("avx2"), always_inline)) static inline uint32_t pair_loc_avx2(const uint32_t *avb, uint32_t amul,
                                                                                   int ashift, uint32_t key) {
    const uint32_t *bk = avb + WA_B * (size_t)((uint32_t)(key * amul) >> ashift);
    __m256i k = _mm256_set1_epi32((int)key);
    __m256i v0 = _mm256_load_si256((const __m256i *)bk), v1 = _mm256_load_si256((const __m256i *)bk + 1);
    unsigned h0 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_srli_epi32(v0, 10), k)));
    unsigned h1 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_srli_epi32(v1, 10), k)));
    return bk[__builtin_ctz(h0 | h1 << 8 | 0x8000u)] & 0x3FF;
}

/* wa_init_avx512 on AVX2: the bytes' indices in S and the first keys from the byte tables, one byte at a time (a window's
 * start is a few percent of its merges) */
__attribute__((target("avx2"), always_inline)) static inline uint32_t wa_init_avx2(const win_alpha *al, wa_lane *L,
                                                                                   const uint8_t *s, size_t n) {
    uint8_t c[WA_WIN];
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) bad |= c[i] = al->bidx[s[i]];
    if (bad & 0x80) return 1; /* 0xFF: outside S (indices are < WA_MAXBYTES) */
    for (size_t i = 0; i < n; i++) L->tok[i] = al->btok16[c[i]];
    wa_links(L, n);
    for (size_t i = 0; i + 1 < n; i++)
        L->key[i] = (uint16_t)(al->bpair[c[i] * WA_MAXBYTES + c[i + 1]] << 6 | (i & 63));
    for (size_t i = n - 1; i < WA_WIN; i++) L->key[i] = 0xFFFF; /* wa_step scans all WA_WIN keys */
    return 0;
}

#ifndef WA_TWO /* 0: one merge per scan (wa_step), for A/B */
#define WA_TWO 1
#endif

/* AVX-512 VBMI: 16-slot buckets compared in one instruction, the window start by byte permutes */
#define WA_NAME(x) x##_512
#define WA_TARGET_STEP "avx2,avx512f"
#define WA_TARGET_INIT "avx2,avx512f,avx512bw,avx512vbmi"
#define WA_PAIR pair_loc_avx512
#define WA_INIT wa_init_avx512
#include "bpe_alpha_lanes.h"
#undef WA_NAME
#undef WA_TARGET_STEP
#undef WA_TARGET_INIT
#undef WA_PAIR
#undef WA_INIT

/* AVX2 (no AVX-512: AMD Zen 2/3, older Intel): the same merges with pair_loc_avx2 and wa_init_avx2 */
#define WA_NAME(x) x##_256
#define WA_TARGET_STEP "avx2"
#define WA_TARGET_INIT "avx2"
#define WA_PAIR pair_loc_avx2
#define WA_INIT wa_init_avx2
/* GCC 12 reports a write at nx[-1] in wa_init_avx2 inlined here (n >= 1 on every call: a false positive) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#include "bpe_alpha_lanes.h"
#pragma GCC diagnostic pop
#undef WA_NAME
#undef WA_TARGET_STEP
#undef WA_TARGET_INIT
#undef WA_PAIR
#undef WA_INIT

static inline size_t wl_out_loc(const win_tabs *t, const wa_lane *L, uint32_t *out, uint16_t *lout, uint8_t *st) {
    size_t c = 0;
    const uint32_t *glob = t->al->glob;
    for (int h = 0; h < WA_WIN / 64; h++)
        for (uint64_t b = L->live[h]; b; b &= b - 1) {
            size_t i = (size_t)h * 64 + (size_t)__builtin_ctzll(b);
            lout[c] = L->tok[i];
            out[c] = glob[L->tok[i]];
            st[c++] = (uint8_t)i;
        }
    return c;
}

/* one lane of a stitched span: encode_stitched's state */
typedef struct {
    const uint8_t *s;
    size_t n, pos, len, repairs, budget;
    uint32_t *o;
    unsigned streak;
    uint32_t lastl; /* local id (small alphabets) of o[len - 1], or WA_NOLOC */
} stitch_lane;
#define WA_NOLOC 0xFFFFFFFFu

/* apply the window [pos, pos + w) of a lane (c tokens in buf, their offsets in st): keep the tokens that end
 * `margin` bytes before the cut, or repair an invalid junction; 1: too many repairs */
static int lane_apply(const bpe_model *m, stitch_lane *t, const uint32_t *buf, const uint8_t *st, size_t c, size_t w,
                      size_t margin, const win_tabs *tb, const uint16_t *lbuf) {
    const win_alpha *al = tb->al;
    size_t take = c, adv = w;
    if (t->pos + w < t->n) {
        take = c - 1; /* the last token that starts <= w - margin (offsets increase; few start after it) */
        while (take > 0 && st[take] > w - margin) take--;
        if (take == 0) take = 1;
        adv = take < c ? st[take] : w;
    }
    if (t->len > 0 && !(al && t->lastl != WA_NOLOC ? (tb->amode == WA_AVX512 ? wa_valid_512 : wa_valid_256)(al, t->lastl, lbuf[0])
                                                    : valid_pair(m, t->o[t->len - 1], buf[0]))) {
        if (++t->repairs > t->budget || t->streak >= 3) return 1;
        size_t back = (size_t)16 << t->streak++, dropped = 0;
        while (t->len > 0 && dropped < back) dropped += BPE_LEN(m, t->o[--t->len]);
        t->pos -= dropped;
        t->lastl = WA_NOLOC;
        return 0;
    }
    t->streak = 0;
    memcpy(t->o + t->len, buf, take * sizeof(uint32_t));
    t->len += take;
    t->pos += adv;
    t->lastl = al ? lbuf[take - 1] : WA_NOLOC;
    return 0;
}

static inline size_t lane_wlen(const stitch_lane *t, size_t w) { return t->n - t->pos < w ? t->n - t->pos : w; }

/* run lanes to their ends, two windows at a time while both have work; 1: too many repairs, 2: a byte outside the
 * alphabet of tb->al */
static int lanes_run(const bpe_model *m, const win_tabs *tb, stitch_lane *A, stitch_lane *B, size_t margin) {
    win_lane L[2];
    wa_lane La[2];
    uint32_t buf[BPE_WIN];
    uint16_t lbuf[BPE_WIN];
    uint8_t st[BPE_WIN];
    for (;;) {
        int ha = A->pos < A->n, hb = B && B->pos < B->n;
        if (!ha && !hb) return 0;
        stitch_lane *P = ha ? A : B, *Q = ha && hb ? B : NULL;
        size_t wm = tb->al ? WA_WIN : BPE_WIN, wp = lane_wlen(P, wm), wq = Q ? lane_wlen(Q, wm) : 0;
        size_t c;
        if (tb->al) {
            if ((tb->amode == WA_AVX512 ? win_encode_x2_loc_512 : win_encode_x2_loc_256)(tb, La, P->s + P->pos, wp,
                                                                                         Q ? Q->s + Q->pos : NULL, wq))
                return 2;
            c = wl_out_loc(tb, &La[0], buf, lbuf, st);
        } else {
            if (tb->vb)
                win_encode_x2_vb(tb, L, P->s + P->pos, wp, Q ? Q->s + Q->pos : NULL, wq);
            else
                win_encode_x2(tb, L, P->s + P->pos, wp, Q ? Q->s + Q->pos : NULL, wq);
            c = wl_out(&L[0], buf, st);
        }
        if (lane_apply(m, P, buf, st, c, wp, margin, tb, lbuf)) return 1;
        if (Q) {
            c = tb->al ? wl_out_loc(tb, &La[1], buf, lbuf, st) : wl_out(&L[1], buf, st);
            if (lane_apply(m, Q, buf, st, c, wq, margin, tb, lbuf)) return 1;
        }
    }
}

/* test hook: $FSTOK_BPE_X2_JOIN = j (1-62) joins the lanes only at mid + j and ends lane A at mid + j + 2: both
 * lanes' outputs are cut close to the join, so the junction is often invalid or there is no common boundary (both
 * fallbacks run).  With the default overlap, a boundary both lanes share is nearly always a true one. */
static int x2_join = -1;

static int encode_stitched_x2(const bpe_model *m, const uint8_t *s, size_t n, size_t margin, bpe_vec *out,
                              const win_alpha *al, int amode) {
    size_t base = out->len;
    int rc;
    win_tabs tb = {m->pair_tab, m->pair_bloom, m->byte_tok, m->byte_pair, m->pair_mask, m->pair_shift, m->bloom_shift,
                   NULL, NULL, 0, 0, al, amode, al ? al->vb : NULL, al ? al->mul : 0, al ? al->shift : 0};
    if (!al && __atomic_load_n(&have_avx512, __ATOMIC_RELAXED) > 0) {
        uint64_t vm = 0;
        tb.vb = win_pair_buckets(m, &vm);
        tb.vnb = vm + 1;
        tb.vsig = tb.vb ? tb.vb + 8 * (vm + 2) : NULL;
        tb.vshift = 64;
        for (; vm; vm >>= 1) tb.vshift--;
    }
    if (bpe_vec_reserve(out, n)) return -1;
    stitch_lane A = {s, n, 0, 0, 0, 8 + n / 64, out->ids + base, 0, WA_NOLOC};
    if (n < X2_MIN) {
        if ((rc = lanes_run(m, &tb, &A, NULL, margin)) == 2) return 2;
        if (rc) goto bucket;
        out->len = base + A.len;
        return 0;
    }
    int jh = __atomic_load_n(&x2_join, __ATOMIC_RELAXED);
    if (jh < 0) {
        const char *e = getenv("FSTOK_BPE_X2_JOIN");
        int v = e ? atoi(e) : 0;
        jh = v >= 1 && v <= X2_OVERLAP - 2 ? v : 0;
        __atomic_store_n(&x2_join, jh, __ATOMIC_RELAXED);
    }
    size_t mid = n / 2, lo = mid + (jh ? (size_t)jh : 16), hi = jh ? lo : mid + X2_OVERLAP - 16;
    size_t ov = jh ? (size_t)jh + 2 : X2_OVERLAP; /* the hook also ends lane A 2 bytes after the join */
    uint32_t *ob = (uint32_t *)malloc((n - mid) * sizeof(uint32_t));
    if (!ob) return -1;
    A.n = mid + ov;
    A.budget = 8 + A.n / 64;
    stitch_lane B = {s + mid, n - mid, 0, 0, 0, 8 + (n - mid) / 64, ob, 0, WA_NOLOC};
    if ((rc = lanes_run(m, &tb, &A, &B, margin))) {
        free(ob);
        if (rc == 2) return 2;
        goto bucket;
    }
    /* B's token starts in [lo, hi] (offsets from mid), then A's token ends from the right: the largest common one */
    uint64_t bmask = 0;
    size_t jb = 0, pb = 0;
    while (jb < B.len && pb <= hi - mid) {
        if (pb >= lo - mid) bmask |= 1ull << (pb - (lo - mid));
        pb += BPE_LEN(m, ob[jb++]);
    }
    size_t ia = A.len, pa = A.n;
    int joined = 0;
    while (ia > 0 && pa >= lo) {
        if (pa <= hi && ((bmask >> (pa - lo)) & 1)) {
            /* B's token that starts at pa */
            size_t j = 0, q = mid;
            while (q < pa) q += BPE_LEN(m, ob[j++]);
            if (valid_pair(m, A.o[ia - 1], ob[j])) { /* ia < A.len: pa <= hi < A.n */
                memcpy(A.o + ia, ob + j, (B.len - j) * sizeof(uint32_t));
                A.len = ia + (B.len - j);
                joined = 1;
            }
            break;
        }
        pa -= BPE_LEN(m, A.o[--ia]);
    }
    free(ob);
    if (!joined) { /* lane A alone to the end: keep its tokens that end <= mid, where its own windows were not cut */
        ia = A.len, pa = A.n;
        while (ia > 0 && pa > mid) pa -= BPE_LEN(m, A.o[--ia]);
        A.len = ia, A.pos = pa, A.n = n, A.streak = 0, A.budget = 8 + n / 64, A.lastl = WA_NOLOC;
        if ((rc = lanes_run(m, &tb, &A, NULL, margin)) == 2) return 2;
        if (rc) goto bucket;
    }
    out->len = base + A.len;
    return 0;
bucket:
    out->len = base;
    return bpe_encode_bucket(m, s, n, out);
}

static int have_avx2 = -1;
#endif

/* Spans longer than a window (monotone ranks): the tokens of a window that end at least WIN_MARGIN bytes before
 * its cut are kept and the next window starts after them.  Exact by the pair lemma (docs/design/bpe.md, "Windows"): the
 * pairs inside one window's output are valid, the pair across each junction is checked with valid_pair, and an
 * invalid junction drops the last tokens kept and re-encodes from further left (after too many of those: the
 * bucket queue, O(n)). */
#define WIN_MARGIN 8
static int win_margin = -1; /* WIN_MARGIN, or $FSTOK_BPE_WIN_MARGIN (1-64; tests: more junctions to repair) */

static int encode_stitched(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    size_t base = out->len, len = base, pos = 0, repairs = 0, budget = 8 + n / 64;
    unsigned streak = 0;
    int mg = __atomic_load_n(&win_margin, __ATOMIC_RELAXED);
    if (mg < 0) {
        const char *e = getenv("FSTOK_BPE_WIN_MARGIN");
        int v = e ? atoi(e) : 0;
        mg = v >= 1 && v <= 64 ? v : WIN_MARGIN;
        __atomic_store_n(&win_margin, mg, __ATOMIC_RELAXED);
    }
    size_t margin = (size_t)mg;
#ifdef WIN_X2
    int av = __atomic_load_n(&have_avx2, __ATOMIC_RELAXED);
    if (av < 0) {
        /* $FSTOK_BPE_NO_AVX2=1: the one-window loop below, the path of machines without AVX2 (tests) */
        const char *e2 = getenv("FSTOK_BPE_NO_AVX2");
        __builtin_cpu_init();
        av = __builtin_cpu_supports("avx2") && !(e2 && e2[0] == '1') ? 1 : 0;
        __atomic_store_n(&have_avx2, av, __ATOMIC_RELAXED);
    }
    if (av && __atomic_load_n(&have_avx512, __ATOMIC_RELAXED) < 0) {
        const char *e = getenv("FSTOK_BPE_NO_AVX512");
        int z = __builtin_cpu_supports("avx512f") && !(e && e[0] == '1') ? 1 : 0;
        __atomic_store_n(&have_avx512, z, __ATOMIC_RELAXED);
    }
    if (av) {
        const win_alpha *al = NULL;
        int am = __atomic_load_n(&wa_mode, __ATOMIC_RELAXED);
        if (am < 0) {
            const char *e = getenv("FSTOK_BPE_NO_ALPHA");
            am = e && e[0] == '1' ? WA_OFF
                 : __atomic_load_n(&have_avx512, __ATOMIC_RELAXED) > 0 && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vbmi")
                     ? WA_AVX512
                     : WA_AVX2;
            __atomic_store_n(&wa_mode, am, __ATOMIC_RELAXED);
        }
        if (n >= WA_MIN && am != WA_OFF) al = win_alpha_get(m, s, n);
        int rc = encode_stitched_x2(m, s, n, margin, out, al, am);
        if (rc == 2) rc = encode_stitched_x2(m, s, n, margin, out, NULL, am); /* a byte outside the alphabet */
        return rc;
    }
#endif
    if (bpe_vec_reserve(out, n)) return -1;
    uint32_t *o = out->ids, buf[BPE_WIN];
    uint8_t st[BPE_WIN];
    while (pos < n) {
        size_t w = n - pos < BPE_WIN ? n - pos : BPE_WIN;
        size_t c = win_encode(m, s + pos, w, buf, st), take = c, adv = w;
        if (pos + w < n) { /* keep the tokens that end `margin` bytes before the cut (at least one) */
            take = 1;
            while (take < c && st[take] <= w - margin) take++;
            take--;
            if (take == 0) take = 1;
            adv = take < c ? st[take] : w;
        }
        if (len > base && !valid_pair(m, o[len - 1], buf[0])) {
            if (++repairs > budget || streak >= 3) {
                out->len = base;
                return bpe_encode_bucket(m, s, n, out);
            }
            size_t back = (size_t)16 << streak++, dropped = 0;
            while (len > base && dropped < back) dropped += BPE_LEN(m, o[--len]);
            pos -= dropped;
            continue;
        }
        streak = 0;
        memcpy(o + len, buf, take * sizeof(uint32_t)); /* len + take <= base + n: at most one token per byte */
        len += take;
        pos += adv;
    }
    out->len = len;
    return 0;
}

/* the window encoder (monotone ranks for spans longer than a window) */
static int encode_window(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    if (n == 0) return 0;
    if (n > BPE_WIN) return encode_stitched(m, s, n, out);
    uint8_t st[BPE_WIN];
    if (bpe_vec_reserve(out, n)) return -1;
    out->len += win_encode(m, s, n, out->ids + out->len, st);
    return 0;
}

#endif /* FSTOK_BPE_WINDOW_H */
