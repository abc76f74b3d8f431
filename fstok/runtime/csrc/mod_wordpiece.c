/* fstok WordPiece runtime: LinMaxMatch over compiled tables, end-to-end with BERT
 * normalization fused into the same pass.
 *
 * The tables are built by fstok/compile/wordpiece.py and fstok/compile/bert_normalize.py and
 * validated (every index in range) by fstok/wordpiece.py before this module sees them, so
 * the hot loop does no bounds checks on table reads.  Input text is UTF-8 from a Python str
 * (always valid) or validated bytes.
 *
 * Performance notes:
 *  - one normalization-table read per code point; word chars that normalize to themselves
 *    (KIND_REG) feed their original bytes straight into the trie;
 *  - the walk reads one array, the blob derived at load: each state's header, f, F and either its
 *    labels + targets (sparse) or its full delta'/sigma' row (hub) are adjacent, in DFS preorder,
 *    so a transition touches one place and walking down a word reads forward in memory;
 *  - sparse states compare their sorted labels with SIMD, then follow f(v) (usually to a hub);
 *  - offsets are computed only when asked for (a separate instantiation of the loop);
 *  - the GIL is released around every encode; encode_batch and long texts (encode_split) run on the
 *    module's persistent worker pool (tpool.h);
 *  - token-id ints are pinned (pyids.h: never freed), so result lists hold them without Py_INCREF and a
 *    long text's list is filled by the pool threads (split_pinned).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyids.h"
#include "tpool.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define HOT static inline __attribute__((always_inline))
#define NONE32 0xFFFFFFFFu
#define KIND_REG 0
#define KIND_DEL 1
#define KIND_SPACE 2
#define KIND_ISO 3
#define KIND_MAP 4
#define CLS_WORD 0
#define CLS_SPACE 1
#define CLS_PUNCT 2

typedef struct {
    const uint64_t *node; /* first edge | #children << 32 | first label << 40 | dense row << 48 */
    const uint8_t *edge_label;
    const uint32_t *edge_target;
    const uint64_t *failpops; /* f(u) | F(u) << 32 */
    const uint32_t *pool;
    const uint64_t *dense; /* delta'(row, b) | sigma'(row, b) << 32 */
    const uint32_t *tok_len;
    const uint16_t *norm1;
    const uint32_t *norm2;
    const uint32_t *npool;
    const uint32_t *suffix_word;
    uint32_t n_suffix_word;
    uint32_t n_nodes, n_dense, root, suffix_root;
    uint32_t prefix_len, unk_id, max_chars;
    int strip_mode;
    uint8_t wordbyte[256]; /* 1 for ASCII bytes that are plain word characters (built at load) */
    uint16_t lowmask[256]; /* (1 << min(n, 16)) - 1 */
    int inline_pops; /* one-token pops are stored inline (tag 0x81: id << 8 | 0x81) */
    /* The walk's layout, derived at load (build_blob): a byte array in which every state is one
     * variable-length record and a state is the byte offset of its record (see build_blob).  One
     * transition reads one place, and a record is 4-8 bytes for most states. */
    uint8_t *blob;
    uint32_t broot, bsroot; /* r and r# as blob offsets */
    uint32_t pw, pmask;     /* width of a state offset in a record (3 or 4 bytes) and its mask */
    uint32_t ffsz[8];       /* bytes of the f/F part of a record, by kind */
    uint32_t rtab[256];     /* per header byte: label mask (16) | offset of child pointers << 16 | size << 24 */
    uint32_t nkind[8];      /* states per record kind, and the blob's size (layout_stats) */
    uint32_t n_chr;         /* RK_CHR records (layout_stats) */
    size_t blob_size;
} wp_tables;

/* Records (byte offsets from the state u).  A state is at a character boundary (its string is whole UTF-8
 * characters: every token state, r, r#) or inside a character.  States at a boundary take a whole
 * character per step when any of their children is a multi-byte character (RK_CHR), so the walk does not
 * step through the states inside that character; states inside a character are kept only where a hub's
 * byte row leads into them (see build_blob).
 *
 * Byte record of a boundary state whose children are all ASCII (kinds RK_TOK .. RK_GEN):
 *   [0]      header: kind (3 bits) | nc << 3 (nc = number of children; 31: nc in the next byte)
 *   labels   nc sorted bytes (from 1, or 2 when the next byte holds nc)
 *   f/F      by kind: RK_TOK  id (3 bytes); F = that one id, f = r#  (a token state: 40% of mBERT's)
 *                     RK_ID   id (3), f (pw)                          (F one id)
 *                     RK_NONE nothing; F empty, f none                  (r, r#, states no suffix follows)
 *                     RK_SL   F (4, a pool slice), f (pw)
 *                     RK_GEN  F (4), f (4)                              (anything else)
 *   children 1..nc-1: their offsets (pw bytes each); child 0 is the next record (preorder).
 * Character record (RK_CHR) of a boundary state whose children are all multi-byte characters:
 *   [0] RK_CHR | f/F kind << 3 (RK_TOK .. RK_GEN), [1] nk = number of child characters (255: nk in bytes
 *   2-3), nk keys of 4 bytes (a character's UTF-8 bytes, little-endian, zero above), f/F
 *   by that kind, the offsets of children 1..nk-1; child 0 is the next record (the boundary states are
 *   in preorder of the character trie).
 * Record of a state inside a character (RK_MID): [0] RK_MID | nc << 3 (31: nc in the next byte), nc
 *   labels, the offset of the boundary state its character began in (pw), the offsets of all nc
 *   children (pw each).  No f/F: a miss there goes back to the character's first byte and fails from
 *   that state (a LinMaxMatch step: no token ends inside a character).
 * A hub (RK_HUB): [header][f 4][F 4][pad to 8 bytes][256 x (delta' 4, sigma' 4)] (any state). */
#define RK_TOK 0
#define RK_ID 1
#define RK_NONE 2
#define RK_SL 3
#define RK_GEN 4
#define RK_MID 5 /* a state inside a UTF-8 character (all children explicit, no f/F) */
#define RK_CHR 6 /* a boundary state keyed by whole characters */
#define RK_HUB 7
#define HUB_PAIRS(u) (((u) + 16) & ~7u) /* a hub's pairs: 8-byte aligned, after its header, f and F */
#define BLOB_PAD 32  /* zero bytes before and after the records (unaligned 16-byte and 4-byte loads) */

HOT uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* RK_CHR record of u: number of keys, and (*lo) where the keys start. */
HOT uint32_t chr_count(const uint8_t *B, uint32_t u, uint32_t *lo) {
    const uint32_t nk = B[u + 1];
    if (__builtin_expect(nk != 255, 1)) {
        *lo = 2;
        return nk;
    }
    *lo = 4;
    return B[u + 2] | (uint32_t)B[u + 3] << 8;
}

/* f(u) and F(u) of any state (decoded from its record). */
HOT void rec_fail(const wp_tables *t, const uint8_t *B, uint32_t u, uint32_t *f, uint32_t *F) {
    const uint32_t h = B[u];
    uint32_t kind = h & 7;
    const uint8_t *p;
    if (kind == RK_HUB) {
        *f = ld32(B + u + 1);
        *F = ld32(B + u + 5);
        return;
    }
    if (kind == RK_CHR) {
        uint32_t lo;
        const uint32_t nk = chr_count(B, u, &lo);
        p = B + u + lo + 4 * nk;
        kind = h >> 3;
    } else {
        p = B + u + ((h >> 3) == 31 ? 2u + B[u + 1] : 1u + (h >> 3));
    }
    switch (kind) {
    case RK_TOK:
        *F = 0x81u | (ld32(p) & 0xFFFFFFu) << 8;
        *f = t->bsroot;
        return;
    case RK_ID:
        *F = 0x81u | (ld32(p) & 0xFFFFFFu) << 8;
        *f = ld32(p + 3) & t->pmask;
        return;
    case RK_SL:
        *F = ld32(p);
        *f = ld32(p + 4) & t->pmask;
        return;
    case RK_GEN:
        *F = ld32(p);
        *f = ld32(p + 4);
        return;
    default: /* RK_NONE; RK_MID (never asked: the walk restarts the character instead) */
        *F = 0;
        *f = NONE32;
        return;
    }
}

/* ---------------------------------------------------------------- output */
typedef struct {
    uint32_t *ids;
    uint32_t *offs; /* 2 per id when want_offs */
    size_t n, cap;
    int want_offs;
    int oom;
    int borrowed; /* ids is the caller's buffer (encode_utf8's stack), not malloc'd: copied on the first growth */
} outbuf;

static int out_reserve(outbuf *o, size_t extra) {
    if (o->n + extra <= o->cap) return 1;
    size_t nc = o->cap ? o->cap * 2 : 16; /* small first: a batch of 10^5 words must not touch 10^5 KB */
    while (nc < o->n + extra) nc *= 2;
    uint32_t *ni;
    if (o->borrowed) {
        ni = (uint32_t *)malloc(nc * sizeof(uint32_t));
        if (!ni) { o->oom = 1; return 0; }
        if (o->n) memcpy(ni, o->ids, o->n * sizeof(uint32_t));
        o->borrowed = 0;
    } else {
        ni = (uint32_t *)realloc(o->ids, nc * sizeof(uint32_t));
        if (!ni) { o->oom = 1; return 0; }
    }
    o->ids = ni;
    if (o->want_offs) {
        uint32_t *no = (uint32_t *)realloc(o->offs, nc * 2 * sizeof(uint32_t));
        if (!no) { o->oom = 1; return 0; }
        o->offs = no;
    }
    o->cap = nc;
    return 1;
}

static void out_free(outbuf *o) {
    if (!o->borrowed) free(o->ids);
    o->borrowed = 0;
    free(o->offs);
    o->ids = o->offs = NULL;
    o->n = o->cap = 0;
}

/* ---------------------------------------------------------------- word state */
typedef struct {
    uint32_t cp, ccc, orig, cls, dropped, cont; /* cont: not the first char of its code point's NFD */
} pend_item;

typedef struct {
    const wp_tables *t;
    outbuf *out;
    /* current word */
    int in_word, failed, first_tok;
    uint32_t u;
    size_t word_out_start;
    uint32_t nchars;
    size_t wbytes, tokpos;
    uint32_t first_orig, last_orig;
    uint32_t *b2o; /* byte -> original char index (offsets only) */
    size_t b2o_cap;
    /* canonical reordering of surviving combining marks (strip_accents mode only) */
    pend_item *pend;
    size_t npend, pend_cap;
    uint32_t prev_orig; /* origin of the last NFD character outside a reordering run */
} wstate;

static void emit_slice_slow(wstate *w, uint32_t packed) {
    const wp_tables *t = w->t;
    uint32_t len = packed & 0xFF, off = packed >> 8;
    const uint32_t inl = t->inline_pops && (len & 0x80); /* one id stored inline (see scan_inline_pops) */
    if (inl) len = 1;
    outbuf *o = w->out;
    if (!out_reserve(o, len)) return;
    for (uint32_t k = 0; k < len; k++) {
        uint32_t id = inl ? off : t->pool[off + k];
        o->ids[o->n] = id;
        if (o->want_offs) {
            uint32_t L = t->tok_len[id];
            if (!w->first_tok) L = L >= t->prefix_len ? L - t->prefix_len : 0;
            size_t s = w->tokpos, e = w->tokpos + L;
            if (e > w->wbytes) e = w->wbytes;
            if (s >= e) { s = e ? e - 1 : 0; }
            o->offs[2 * o->n] = w->b2o[s];
            o->offs[2 * o->n + 1] = w->b2o[e ? e - 1 : 0] + 1;
            w->tokpos = e;
        }
        w->first_tok = 0;
        o->n++;
    }
}

/* Pops are almost always one id: append it inline; everything else goes the slow way. */
HOT void emit_slice(wstate *w, uint32_t packed) {
    outbuf *o = w->out;
    /* 0x81 means "one inlined id" only when inline_pops: a 129-token slice has the same low byte */
    if ((packed & 0xFF) == 0x81 && w->t->inline_pops && !o->want_offs && o->n < o->cap) {
        o->ids[o->n++] = packed >> 8;
        w->first_tok = 0;
        return;
    }
    emit_slice_slow(w, packed);
}

#ifdef __SSE2__
static __m128i KEYS[256]; /* KEYS[b]: b in every byte; filled at module init */
#endif

/* Index of byte b among the nc labels at lab, or -1. */
HOT int label_find(const uint8_t *lab, uint32_t nc, uint32_t b) {
#ifdef __SSE2__
    const __m128i key = _mm_load_si128(&KEYS[b]); /* b in all 16 lanes (SSE2 has no byte broadcast) */
    for (uint32_t k = 0; k < nc; k += 16) {
        uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(lab + k)), key));
        uint32_t left = nc - k;
        if (left < 16) m &= (1u << left) - 1;
        if (m) return (int)(k + (uint32_t)__builtin_ctz(m));
    }
    return -1;
#else
    for (uint32_t i = 0; i < nc && lab[i] <= b; i++)
        if (lab[i] == b) return (int)i;
    return -1;
#endif
}

/* first if k == 0, else other: a cmov, never a branch (which child is taken is data-dependent: as a
 * branch it mispredicted, uncased English +10%, and the compiler turns the plain select into one) */
HOT uint32_t sel_child(uint32_t k, uint32_t other, uint32_t first) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("test %2, %2\n\tcmovnz %1, %0" : "+r"(first) : "r"(other), "r"(k) : "cc");
    return first;
#else
    return k ? other : first;
#endif
}

/* Child of byte-record state u (header byte h, kinds RK_TOK .. RK_GEN) on byte b, or NONE32. */
HOT uint32_t blob_child(const wp_tables *t, const uint8_t *B, uint32_t u, uint32_t h, uint32_t b) {
    const uint32_t big = (h >> 3) == 31;
    const uint32_t nc = big ? B[u + 1] : h >> 3;
    const uint32_t lo = 1 + big, po = lo + nc + t->ffsz[h & 7], pw = t->pw;
    const int i = label_find(B + u + lo, nc, b);
    if (i < 0) return NONE32;
    return i ? ld32(B + u + po + pw * ((uint32_t)i - 1)) & t->pmask : u + po + pw * (nc - 1);
}

/* Child of RK_CHR state u (header h) on the character with key `key`, or NONE32. */
HOT uint32_t chr_child(const wp_tables *t, const uint8_t *B, uint32_t u, uint32_t h, uint32_t key, const uint32_t PW) {
    const uint32_t PMASK = PW == 3 ? 0xFFFFFFu : 0xFFFFFFFFu;
    uint32_t lo;
    const uint32_t nk = chr_count(B, u, &lo);
    const uint8_t *keys = B + u + lo;
    uint32_t i;
#ifdef __SSE2__
    const __m128i kv = _mm_set1_epi32((int)key);
    /* the first 8 keys without a branch on nk (it varies from state to state: a branch mispredicted; the
     * loads may read past the record, into the next ones or the blob's padding) */
    const uint32_t lim = nk < 8 ? nk : 8;
    uint32_t m = (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)keys), kv))) |
                 (uint32_t)_mm_movemask_ps(
                     _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(keys + 16)), kv))) << 4;
    m &= (1u << lim) - 1;
    if (__builtin_expect(m != 0, 1)) {
        i = (uint32_t)__builtin_ctz(m);
    } else {
        /* keys 8..15, again without a branch on nk: when there are none, the first 8 are read again (no other
         * line touched) and masked away */
        const uint8_t *k2 = nk > 8 ? keys + 32 : keys;
        const uint32_t lim2 = nk > 16 ? 8 : nk > 8 ? nk - 8 : 0;
        m = (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)k2), kv))) |
            (uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(k2 + 16)), kv)))
                << 4;
        m &= (1u << lim2) - 1;
        if (m) {
            i = 8 + (uint32_t)__builtin_ctz(m);
        } else {
            for (i = 16;; i += 4) { /* more than 16 children (rare) */
                if (__builtin_expect(i >= nk, 1)) return NONE32;
                m = (uint32_t)_mm_movemask_ps(
                    _mm_castsi128_ps(_mm_cmpeq_epi32(_mm_loadu_si128((const __m128i *)(keys + 4 * i)), kv)));
                if (nk - i < 4) m &= (1u << (nk - i)) - 1;
                if (m) {
                    i += (uint32_t)__builtin_ctz(m);
                    break;
                }
            }
        }
    }
#else
    for (i = 0;; i++) {
        if (i >= nk) return NONE32;
        if (ld32(keys + 4 * i) == key) break;
    }
#endif
    const uint32_t po = lo + 4 * nk + t->ffsz[h >> 3];
    /* (i = 0: bytes of this record or the one before, not used) */
    const uint32_t other = ld32(B + u + po + PW * i - PW) & PMASK;
    return sel_child(i, other, u + po + PW * (nk - 1));
}

/* Child of RK_MID state u (header h) on byte b, or NONE32 with *anc = the state its character began in. */
HOT uint32_t mid_child(const uint8_t *B, uint32_t u, uint32_t h, uint32_t b, const uint32_t PW, uint32_t *anc) {
    const uint32_t PMASK = PW == 3 ? 0xFFFFFFu : 0xFFFFFFFFu;
    const uint32_t big = (h >> 3) == 31;
    const uint32_t nc = big ? B[u + 1] : h >> 3, lo = 1 + big;
    const int i = label_find(B + u + lo, nc, b);
    if (i >= 0) return ld32(B + u + lo + nc + PW + PW * (uint32_t)i) & PMASK;
    *anc = ld32(B + u + lo + nc) & PMASK;
    return NONE32;
}

/* Bytes from the first byte of the character that p is inside of (1-3) back to p, within [p0, p); 0: none. */
HOT size_t char_back(const uint8_t *p0, const uint8_t *p) {
    for (size_t k = 1; k <= 3 && k <= (size_t)(p - p0); k++)
        if (*(p - k) >= 0xC0) return k;
    return 0;
}

/* The key of the character at p (its UTF-8 bytes, little-endian, zero above: the keys of RK_CHR records)
 * and (*len) its length, within [p, e); the 4 bytes from p may be read if p + 4 <= lim (the end of the
 * text, not of the run: a test per run end mispredicted). */
static const uint8_t U8LEN[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
HOT uint32_t char_key(const uint8_t *p, const uint8_t *e, const uint8_t *lim, uint32_t *len) {
    /* (through an empty asm: GCC hoisted this table read out of the RK_CHR branch into every step) */
    const uint8_t *q = p;
    __asm__ volatile("" : "+r"(q));
    uint32_t L = U8LEN[*q >> 4];
    if (__builtin_expect(lim - p >= 4 && L <= (size_t)(e - p), 1)) {
        *len = L;
        return ld32(p) & (0xFFFFFFFFu >> (32 - 8 * L));
    }
    if (L > (size_t)(e - p)) L = (uint32_t)(e - p); /* (not with valid UTF-8) */
    *len = L;
    uint32_t k = 0;
    for (uint32_t i = 0; i < L; i++) k |= (uint32_t)p[i] << (8 * i);
    return k;
}

/* The walk over whole characters [p, e) from state u (LinMaxMatch, one transition per step): a hub reads
 * one byte (its delta'/sigma' row), a byte record one ASCII byte, an RK_CHR record a whole character, an
 * RK_MID record one byte inside a character (a miss there restarts the character from the state it
 * began in); a miss elsewhere follows failure links.  Returns the state, NONE32 when the word cannot be
 * tokenized.  PW: the width of a state offset in a record (3 or 4: two instantiations).  FAST: no offsets
 * and one-token pops inlined (t->inline_pops): the output position and capacity stay in registers
 * (through a step function the compiler reloaded w->t, t->blob, t->inline_pops and o->want_offs per
 * byte); otherwise pops go through emit_slice (offsets, pool slices).  wb (a constant NULL or t->wordbyte): also
 * stop before the first byte that is not an ASCII word byte (*stop: where the walk stopped), so that an
 * ASCII word is classified while it is walked (scanning it first cost a second mispredicted loop exit). */
HOT uint32_t walk_core(wstate *w, uint32_t u, const uint8_t *p, const uint8_t *e, const uint8_t *lim, const uint32_t PW,
                       const int FAST, const uint8_t *wb, const uint8_t **stop) {
    const wp_tables *t = w->t;
    const uint8_t *B = t->blob;
    const uint32_t PMASK = PW == 3 ? 0xFFFFFFu : 0xFFFFFFFFu;
    outbuf *o = w->out;
    uint32_t *ids = o->ids;
    size_t on = o->n, cap = o->cap;
    const uint8_t *const p0 = p;
#define WR_EMIT(pop)                                                                                               \
    do {                                                                                                           \
        if (!FAST) {                                                                                               \
            emit_slice(w, (pop));                                                                                  \
        } else if (((pop) & 0xFF) == 0x81 && on < cap) {                                                           \
            ids[on++] = (pop) >> 8;                                                                                \
        } else {                                                                                                   \
            o->n = on;                                                                                             \
            emit_slice_slow(w, (pop));                                                                             \
            ids = o->ids;                                                                                          \
            on = o->n;                                                                                             \
            cap = o->cap;                                                                                          \
        }                                                                                                          \
    } while (0)
    while (p < e && (!wb || wb[*p])) {
        uint32_t b = *p, h = B[u], c, L, anc = 0;
        if ((h & 7) >= RK_MID) {
            if ((h & 7) == RK_HUB) {
                uint64_t d;
                memcpy(&d, B + HUB_PAIRS(u) + 8 * b, 8);
                uint32_t pop = (uint32_t)(d >> 32);
                if (pop) WR_EMIT(pop);
                u = (uint32_t)d;
                p++;
                if (__builtin_expect(u == NONE32, 0)) break;
                continue;
            }
            if ((h & 7) == RK_CHR) {
                const uint32_t key = char_key(p, e, lim, &L);
                c = chr_child(t, B, u, h, key, PW);
                if (__builtin_expect(c != NONE32, 1)) {
                    u = c;
                    p += L;
                    continue;
                }
                goto fail;
            }
            c = mid_child(B, u, h, b, PW, &anc); /* RK_MID */
            if (c != NONE32) {
                u = c;
                p++;
                continue;
            }
            { /* inside a character: fail from where it began, on its first byte */
                const size_t back = char_back(p0, p);
                if (__builtin_expect(!back, 0)) { /* (not with tables the compiler made) */
                    u = NONE32;
                    break;
                }
                u = anc;
                p -= back;
            }
            goto fail;
        }
#ifdef __SSE2__
        {
            const uint32_t sn = t->rtab[h];
            const __m128i key = _mm_load_si128(&KEYS[b]);
            uint32_t m = (uint32_t)_mm_movemask_epi8(
                _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(B + u + 1)), key));
            m &= sn & 0xFFFF;
            if (__builtin_expect(m != 0, 1)) {
                const uint32_t k = (uint32_t)__builtin_ctz(m);
                /* (k = 0: bytes of this record or the one before, not used) */
                const uint32_t other = ld32(B + u + ((sn >> 16) & 0xFF) + PW * k - PW) & PMASK;
                u = sel_child(k, other, u + (sn >> 24)); /* child 0: the next record */
                p++;
                continue;
            }
            c = (h >> 3) > 16 ? blob_child(t, B, u, h, b) : NONE32;
        }
#else
        c = blob_child(t, B, u, h, b);
#endif
        if (c != NONE32) {
            u = c;
            p++;
            continue;
        }
    fail:
        for (;;) { /* failure transitions from u on the character at p: their targets are nearly always hubs
                    * (r#), and this separate branch site predicts that well */
            uint32_t f, pop;
            rec_fail(t, B, u, &f, &pop);
            if (f == NONE32) {
                u = NONE32;
                break;
            }
            if (pop) WR_EMIT(pop);
            u = f;
            h = B[u];
            if (__builtin_expect((h & 7) == RK_HUB, 1)) {
                uint64_t d;
                memcpy(&d, B + HUB_PAIRS(u) + 8 * (uint32_t)*p, 8);
                pop = (uint32_t)(d >> 32);
                if (pop) WR_EMIT(pop);
                u = (uint32_t)d;
                p++;
                break;
            }
            if ((h & 7) == RK_CHR) {
                const uint32_t key = char_key(p, e, lim, &L);
                c = chr_child(t, B, u, h, key, PW);
                if (c != NONE32) {
                    u = c;
                    p += L;
                    break;
                }
                continue;
            }
            if ((h & 7) == RK_MID) { /* (not with tables the compiler made: failure links end at boundaries) */
                u = NONE32;
                break;
            }
            c = blob_child(t, B, u, h, *p);
            if (c != NONE32) {
                u = c;
                p++;
                break;
            }
        }
        if (__builtin_expect(u == NONE32, 0)) break;
    }
#undef WR_EMIT
    if (FAST) o->n = on;
    if (stop) *stop = p;
    return u;
}

HOT uint32_t walk_fast3(wstate *w, uint32_t u, const uint8_t *p, const uint8_t *e, const uint8_t *lim) {
    return walk_core(w, u, p, e, lim, 3, 1, NULL, NULL);
}

HOT uint32_t walk_fast4(wstate *w, uint32_t u, const uint8_t *p, const uint8_t *e, const uint8_t *lim) {
    return walk_core(w, u, p, e, lim, 4, 1, NULL, NULL);
}

/* The ASCII word bytes from p on (the first one is one), walked (FAST); *stop: the first other byte. */
HOT uint32_t walk_ascii3(wstate *w, uint32_t u, const uint8_t *p, const uint8_t *end, const uint8_t **stop) {
    return walk_core(w, u, p, end, end, 3, 1, w->t->wordbyte, stop);
}

HOT uint32_t walk_ascii4(wstate *w, uint32_t u, const uint8_t *p, const uint8_t *end, const uint8_t **stop) {
    return walk_core(w, u, p, end, end, 4, 1, w->t->wordbyte, stop);
}

/* The walk with pops through emit_slice (offsets, pops not inlined). */
static uint32_t walk_gen(wstate *w, uint32_t u, const uint8_t *p, const uint8_t *e, const uint8_t *lim) {
    return w->t->pw == 3 ? walk_core(w, u, p, e, lim, 3, 0, NULL, NULL) : walk_core(w, u, p, e, lim, 4, 0, NULL, NULL);
}

static int b2o_reserve(wstate *w, size_t need) {
    if (need <= w->b2o_cap) return 1;
    size_t nc = w->b2o_cap ? w->b2o_cap * 2 : 1024;
    while (nc < need) nc *= 2;
    uint32_t *nb = (uint32_t *)realloc(w->b2o, nc * sizeof(uint32_t));
    if (!nb) { w->out->oom = 1; return 0; }
    w->b2o = nb;
    w->b2o_cap = nc;
    return 1;
}

static inline void word_begin(wstate *w, uint32_t orig) {
    w->in_word = 1;
    w->failed = 0;
    w->first_tok = 1;
    w->u = w->t->broot;
    w->word_out_start = w->out->n;
    w->nchars = 0;
    w->wbytes = 0;
    w->tokpos = 0;
    w->first_orig = orig;
}

/* Feed one normalized character (its UTF-8 bytes) into the current word. */
HOT void feed(wstate *w, const uint8_t *bytes, int nb, uint32_t orig, const int offs) {
    if (!w->in_word) word_begin(w, orig);
    w->last_orig = orig;
    w->nchars++;
    if (w->failed) return;
    if (w->nchars > w->t->max_chars) { w->failed = 1; return; }
    if (offs) {
        if (!b2o_reserve(w, w->wbytes + nb)) { w->failed = 1; return; }
        for (int k = 0; k < nb; k++) w->b2o[w->wbytes + k] = orig;
    }
    w->wbytes += nb; /* (tokens popped while the character is read end before it) */
    if (nb == 1) { /* an ASCII character (an upper-case letter when lower-casing, punctuation) at a hub or a byte
                    * record: the step here (walk_gen is a call) */
        const uint8_t *B = w->t->blob;
        const uint32_t u = w->u, h = B[u];
        if ((h & 7) == RK_HUB) {
            uint64_t d;
            memcpy(&d, B + HUB_PAIRS(u) + 8 * (uint32_t)bytes[0], 8);
            if (d >> 32) emit_slice(w, (uint32_t)(d >> 32));
            if ((uint32_t)d == NONE32) w->failed = 1;
            else w->u = (uint32_t)d;
            return;
        }
        if ((h & 7) <= RK_GEN) {
            const uint32_t c = blob_child(w->t, B, u, h, bytes[0]);
            if (c != NONE32) {
                w->u = c;
                return;
            }
        }
    }
    uint8_t cb[4] = {0, 0, 0, 0}; /* (a copy: its 4 bytes may be read at once) */
    memcpy(cb, bytes, nb < 4 ? (size_t)nb : 4);
    const uint32_t u = walk_gen(w, w->u, cb, cb + (nb < 4 ? nb : 4), cb + 4);
    if (u == NONE32) { w->failed = 1; return; }
    w->u = u;
}

static void word_end_slow(wstate *w) {
    w->in_word = 0;
    const wp_tables *t = w->t;
    outbuf *o = w->out;
    if (!w->failed) {
        uint32_t u = w->u;
        const uint8_t *B = t->blob;
        for (;;) {
            uint32_t f, p;
            rec_fail(t, B, u, &f, &p);
            if (f == NONE32) break;
            if (p) emit_slice(w, p);
            u = f;
        }
        if (u != t->broot && u != t->bsroot) {
            w->failed = 1;
        } else if (u == t->bsroot && o->n == w->word_out_start && w->wbytes > 0) {
            /* the word is the suffix indicator itself: precomputed original WordPiece result */
            if (t->n_suffix_word == 0) {
                w->failed = 1;
            } else if (out_reserve(o, t->n_suffix_word)) {
                for (uint32_t k = 0; k < t->n_suffix_word; k++) {
                    o->ids[o->n] = t->suffix_word[k];
                    if (o->want_offs) {
                        o->offs[2 * o->n] = w->first_orig;
                        o->offs[2 * o->n + 1] = w->last_orig + 1;
                    }
                    o->n++;
                }
            }
        }
    }
    if (w->failed) {
        o->n = w->word_out_start;
        if (!out_reserve(o, 1)) return;
        o->ids[o->n] = t->unk_id;
        if (o->want_offs) {
            o->offs[2 * o->n] = w->first_orig;
            o->offs[2 * o->n + 1] = w->last_orig + 1;
        }
        o->n++;
    }
}

/* End of word, common case inline: the state is a token node whose failure link is r# and
 * whose pops are that token (one id), or r# itself. */
HOT void word_end(wstate *w) {
    if (!w->in_word) return;
    const wp_tables *t = w->t;
    uint32_t u = w->u;
    outbuf *o = w->out;
    if (!w->failed && !o->want_offs) { /* u is a valid state only if not failed */
        const uint8_t *B = t->blob;
        const uint32_t h = B[u];
        if ((h & 7) == RK_TOK && o->n < o->cap) { /* f(u) = r#, F(u) = one id (its record's) */
            o->ids[o->n++] = ld32(B + u + ((h >> 3) == 31 ? 2u + B[u + 1] : 1u + (h >> 3))) & 0xFFFFFFu;
            w->in_word = 0;
            return;
        }
        if (h == (RK_CHR | RK_TOK << 3) && B[u + 1] != 255 && o->n < o->cap) { /* the same, keyed by characters */
            o->ids[o->n++] = ld32(B + u + 2 + 4 * (uint32_t)B[u + 1]) & 0xFFFFFFu;
            w->in_word = 0;
            return;
        }
    }
    word_end_slow(w);
}

static inline int utf8_encode(uint32_t cp, uint8_t *b) {
    if (cp < 0x80) { b[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { b[0] = 0xC0 | (cp >> 6); b[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) { b[0] = 0xE0 | (cp >> 12); b[1] = 0x80 | ((cp >> 6) & 0x3F); b[2] = 0x80 | (cp & 0x3F); return 3; }
    b[0] = 0xF0 | (cp >> 18); b[1] = 0x80 | ((cp >> 12) & 0x3F); b[2] = 0x80 | ((cp >> 6) & 0x3F); b[3] = 0x80 | (cp & 0x3F);
    return 4;
}

static void emit_norm(wstate *w, uint32_t cp, uint32_t cls, uint32_t orig) {
    const int offs = w->out->want_offs;
    uint8_t buf[4];
    int nb = utf8_encode(cp, buf);
    if (cls == CLS_SPACE) {
        word_end(w);
    } else if (cls == CLS_PUNCT) {
        word_end(w);
        if (offs) feed(w, buf, nb, orig, 1); else feed(w, buf, nb, orig, 0);
        word_end(w);
    } else {
        if (offs) feed(w, buf, nb, orig, 1); else feed(w, buf, nb, orig, 0);
    }
}

/* Emit a run of combining marks (ccc > 0) in canonical order.  HF computes alignments from the
 * NFD output positionally: the k-th character of the reordered run that starts a code point's
 * decomposition takes the k-th such original position, a continuation character takes its
 * predecessor's.  Dropped marks (strip_accents) take part in the ordering, then vanish. */
static void flush_pending(wstate *w) {
    size_t n = w->npend;
    if (!n) return;
    uint32_t *q = (uint32_t *)malloc(n * sizeof(uint32_t));
    if (!q) { w->out->oom = 1; w->npend = 0; return; }
    size_t nq = 0;
    for (size_t i = 0; i < n; i++)
        if (!w->pend[i].cont) q[nq++] = w->pend[i].orig;
    if (n > 64) {
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++) cnt[w->pend[i].ccc + 1]++;
        for (int c = 1; c < 257; c++) cnt[c] += cnt[c - 1];
        pend_item *tmp = (pend_item *)malloc(n * sizeof(pend_item));
        if (tmp) {
            for (size_t i = 0; i < n; i++) tmp[cnt[w->pend[i].ccc]++] = w->pend[i];
            memcpy(w->pend, tmp, n * sizeof(pend_item));
            free(tmp);
        } else {
            w->out->oom = 1;
        }
    } else {
        for (size_t i = 1; i < n; i++) {
            pend_item x = w->pend[i];
            size_t j = i;
            while (j > 0 && w->pend[j - 1].ccc > x.ccc) { w->pend[j] = w->pend[j - 1]; j--; }
            w->pend[j] = x;
        }
    }
    w->npend = 0;
    uint32_t prev = w->prev_orig;
    size_t qi = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t o = (!w->pend[i].cont && qi < nq) ? q[qi++] : prev;
        prev = o;
        if (!w->pend[i].dropped) emit_norm(w, w->pend[i].cp, w->pend[i].cls, o);
    }
    w->prev_orig = prev;
    free(q);
}

static void push_pending(wstate *w, uint32_t cp, uint32_t ccc, uint32_t cls, uint32_t orig, uint32_t dropped, uint32_t cont) {
    if (w->npend == w->pend_cap) {
        size_t nc = w->pend_cap ? w->pend_cap * 2 : 16;
        pend_item *np = (pend_item *)realloc(w->pend, nc * sizeof(pend_item));
        if (!np) { w->out->oom = 1; return; }
        w->pend = np;
        w->pend_cap = nc;
    }
    pend_item *it = &w->pend[w->npend++];
    it->cp = cp;
    it->ccc = ccc;
    it->cls = cls;
    it->orig = orig;
    it->dropped = dropped;
    it->cont = cont;
}

static void wstate_free(wstate *w) {
    free(w->b2o);
    free(w->pend);
    w->b2o = NULL;
    w->pend = NULL;
}

/* Decode one UTF-8 code point (input known valid). */
static inline uint32_t utf8_next(const uint8_t *s, size_t i, int *len) {
    uint8_t c = s[i];
    if (c < 0x80) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F); }
    if (c < 0xF0) { *len = 3; return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F); }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
}

/* End-to-end: normalization + pre-tokenization + WordPiece in one pass over s. */
HOT void wp_e2e_impl(const wp_tables *t, const uint8_t *s, size_t n, outbuf *out, const int offs) {
    out_reserve(out, n / 4 + 4); /* ~1 token per 4 bytes of text; grows when needed */
    wstate w;
    memset(&w, 0, sizeof(w));
    w.t = t;
    w.out = out;
    const uint32_t *ascii = t->norm2 + ((size_t)t->norm1[0] << 8);
    const uint32_t maxc = t->max_chars;
    const uint8_t *const wordbyte = t->wordbyte;
    uint32_t ci = 0;
    size_t i = 0;
    while (i < n) {
        int L;
        uint32_t cp;
        uint8_t c0 = s[i];
        if (c0 < 0x80 && !w.npend) {
            /* ASCII fast path: one table read, bytes straight into the trie */
            uint32_t e = ascii[c0] & 7;
            w.prev_orig = ci;
            if (e == KIND_REG) {
                if (!offs) {
                    L = 1;
                    goto reg_run; /* a run of word characters: classified first, then walked */
                }
                feed(&w, s + i, 1, ci, offs);
            } else if (e == KIND_SPACE) {
                word_end(&w);
            } else if (e == KIND_ISO) {
                word_end(&w);
                feed(&w, s + i, 1, ci, offs);
                word_end(&w);
            } else if (e != KIND_DEL) {
                goto general; /* KIND_MAP (e.g. uppercase when lowercasing) */
            }
            ci++;
            i++;
            continue;
        }
    general:
        cp = utf8_next(s, i, &L);
        uint32_t e = t->norm2[((size_t)t->norm1[cp >> 8] << 8) | (cp & 0xFF)];
        switch (e & 7) {
        case KIND_REG:
            if (w.npend) flush_pending(&w);
            w.prev_orig = ci;
#ifndef WP_NO_REG_RUN
            if (!offs) {
                /* A run of word characters that normalize to themselves (one script, usually): find
                 * its end first, then walk the trie over its bytes in one tight loop. */
            reg_run:;
                size_t j = i + (size_t)L;
                uint32_t nch = 1;
#ifndef WP_NO_ASCII_WALK
                if (L == 1 && t->inline_pops && !w.failed) {
                    /* an ASCII word (from its first byte, an ASCII word byte): walked while it is classified */
                    if (!w.in_word) word_begin(&w, ci);
                    const uint8_t *q;
                    uint32_t u = t->pw == 3 ? walk_ascii3(&w, w.u, s + i, s + n, &q) : walk_ascii4(&w, w.u, s + i, s + n, &q);
                    if (__builtin_expect(u == NONE32, 0)) { /* cannot be tokenized: the rest of it unwalked */
                        w.failed = 1;
                        while (q < s + n && wordbyte[*q]) q++;
                    }
                    w.u = u;
                    const size_t k = (size_t)(q - s) - i;
                    w.nchars += (uint32_t)k;
                    if (!w.failed && w.nchars > maxc) w.failed = 1;
                    w.wbytes += k;
                    ci += (uint32_t)k;
                    i += k;
                    w.last_orig = ci - 1;
                    w.prev_orig = ci - 1;
                    if (w.out->n + 8 > w.out->cap) out_reserve(w.out, 8);
                    if (i >= n || s[i] < 0x80) continue; /* (the word ends here, at a separator) */
                    j = i; /* non-ASCII characters follow: the scan below decides whether the word goes on */
                    nch = 0;
                }
#endif
                while (j < n) {
                    uint8_t c = s[j];
                    if (c < 0x80) {
                        if (!wordbyte[c]) break;
                        j++;
                        nch++;
                        continue;
                    }
                    int L2;
                    uint32_t cp2 = utf8_next(s, j, &L2);
                    if ((t->norm2[((size_t)t->norm1[cp2 >> 8] << 8) | (cp2 & 0xFF)] & 7) != KIND_REG) break;
                    j += (size_t)L2;
                    nch++;
                }
                if (!w.in_word) word_begin(&w, ci);
                w.nchars += nch;
                if (!w.failed && w.nchars > maxc) w.failed = 1;
                if (!w.failed) {
                    uint32_t u = w.u;
                    if (t->inline_pops)
                        u = t->pw == 3 ? walk_fast3(&w, u, s + i, s + j, s + n) : walk_fast4(&w, u, s + i, s + j, s + n);
                    else
                        u = walk_gen(&w, u, s + i, s + j, s + n);
                    if (u == NONE32) w.failed = 1;
                    w.u = u;
                }
                w.wbytes += j - i;
                ci += nch;
                w.last_orig = ci - 1;
                w.prev_orig = ci - 1;
                i = j;
                if (w.out->n + 8 > w.out->cap) out_reserve(w.out, 8);
                continue;
            }
#endif
            feed(&w, s + i, L, ci, offs);
            break;
        case KIND_DEL:
            break;
        case KIND_SPACE:
            if (w.npend) flush_pending(&w);
            word_end(&w);
            break;
        case KIND_ISO:
            if (w.npend) flush_pending(&w);
            w.prev_orig = ci;
            word_end(&w);
            feed(&w, s + i, L, ci, offs);
            word_end(&w);
            break;
        default: {
            const uint32_t *p = t->npool + (e >> 3);
            uint32_t hdr = p[0], nit = hdr & 0xFFFF, iso = hdr >> 16;
            if (iso) {
                if (w.npend) flush_pending(&w);
                word_end(&w);
            }
            for (uint32_t k = 1; k <= nit; k++) {
                uint32_t it = p[k];
                uint32_t icp = it & 0x1FFFFF, cls = (it >> 21) & 3, dropped = (it >> 23) & 1, ccc = it >> 24;
                if (ccc) {
                    push_pending(&w, icp, ccc, cls, ci, dropped, k > 1);
                    continue;
                }
                if (w.npend) flush_pending(&w);
                w.prev_orig = ci;
                if (!dropped) emit_norm(&w, icp, cls, ci);
            }
            if (iso) {
                if (w.npend) flush_pending(&w);
                word_end(&w);
            }
        }
        }
        ci++;
        i += L;
    }
    if (w.npend) flush_pending(&w);
    word_end(&w);
    wstate_free(&w);
}

static void wp_encode_e2e(const wp_tables *t, const uint8_t *s, size_t n, outbuf *out) {
    if (out->want_offs) wp_e2e_impl(t, s, n, out, 1);
    else wp_e2e_impl(t, s, n, out, 0);
}

/* Single word: LinMaxMatch (Algorithm 1) on the raw bytes, no normalization. */
static void wp_encode_word(const wp_tables *t, const uint8_t *s, size_t n, outbuf *out) {
    wstate w;
    memset(&w, 0, sizeof(w));
    w.t = t;
    w.out = out;
    if (n == 0) return;
    uint32_t ci = 0;
    size_t i = 0;
    while (i < n) {
        int L;
        (void)utf8_next(s, i, &L);
        if (out->want_offs) feed(&w, s + i, L, ci, 1); else feed(&w, s + i, L, ci, 0);
        ci++;
        i += L;
    }
    word_end(&w);
    wstate_free(&w);
}

/* ---------------------------------------------------------------- Python type */
#define N_BUFS 11
typedef struct {
    PyObject_HEAD
    wp_tables t;
    Py_buffer bufs[N_BUFS];
    int nbufs;
    /* the int object of each token id, created on first use and kept (see id_int) */
    uint16_t *slot_of;  /* per id: 1 + its slot, 0 while it has none */
    PyObject **slots;   /* the ints, in the order they were first needed (WP_SLOTS at most) */
    size_t n_slots, slot_cap; /* slot_cap: WP_SLOTS, or less for the tests ($FSTOK_WP_SLOTS) */
    PyObject **idcache; /* per id, for ids beyond the first WP_SLOTS distinct ones (allocated then; not pinned) */
    size_t n_ids;
    int pinned; /* slots hold pinned ints of the module table (wpin_*): no reference owned, none handed out */
} ModelObject;
#define WP_SLOTS 65535

static int build_idcache(ModelObject *self);

static void Model_dealloc(ModelObject *self) {
    free(self->t.blob);
    if (self->idcache) {
        for (size_t i = 0; i < self->n_ids; i++) Py_XDECREF(self->idcache[i]);
        free(self->idcache);
    }
    if (!self->pinned)
        for (size_t i = 0; i < self->n_slots; i++) Py_DECREF(self->slots[i]);
    free(self->slots);
    free(self->slot_of);
    for (int i = 0; i < self->nbufs; i++) PyBuffer_Release(&self->bufs[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int get_buf(ModelObject *self, PyObject *obj, Py_ssize_t itemsize, const void **ptr, const char *name) {
    Py_buffer *b = &self->bufs[self->nbufs];
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS) < 0) return -1;
    self->nbufs++;
    if (b->len % itemsize) {
        PyErr_Format(PyExc_ValueError, "table %s: length %zd is not a multiple of %zd", name, b->len, itemsize);
        return -1;
    }
    *ptr = b->buf;
    return 0;
}

/* Nearly every failure pop (F(u), sigma'(row, b)) is one token: the artifact stores it as a slice
 * of the pool (length | offset << 8), which costs a second dependent cache miss per emitted token.
 * The blob (build_blob) stores a one-token slice as the id itself, tagged 0x81, when no slice length
 * reaches 0x80 (otherwise nothing is inlined and every pop takes the pool path).  -14% L1 misses. */
static void scan_inline_pops(ModelObject *self) {
    wp_tables *t = &self->t;
    size_t nn = t->n_nodes, nd = (size_t)t->n_dense * 256;
    t->inline_pops = 0;
    for (size_t i = 0; i < nn; i++)
        if (((t->failpops[i] >> 32) & 0xFF) >= 0x80) return;
    for (size_t i = 0; i < nd; i++)
        if (((t->dense[i] >> 32) & 0xFF) >= 0x80) return;
    t->inline_pops = 1;
}

static inline uint32_t inline_pop(const wp_tables *t, size_t npool, uint32_t p) {
    if (t->inline_pops && (p & 0xFF) == 1 && (p >> 8) < npool) {
        uint32_t id = t->pool[p >> 8];
        if (id < (1u << 24)) return 0x81u | (id << 8);
    }
    return p;
}

/* Record kind of sparse state u (see wp_tables.blob) and its f/F as stored in the blob: Fi = the pop
 * (one-token pops inlined), f0 = f(u) as a state number or NONE32. */
static uint32_t rec_kind(const wp_tables *t, uint32_t f0, uint32_t Fraw, uint32_t Fi) {
    const int one = t->inline_pops && (Fi & 0xFF) == 0x81 && Fi != Fraw;
    if (one && f0 == t->suffix_root) return RK_TOK;
    if (one && f0 != NONE32) return RK_ID;
    if (Fraw == 0 && f0 == NONE32) return RK_NONE;
    if (f0 != NONE32) return RK_SL;
    return RK_GEN;
}

/* Bytes of a byte record (kinds RK_TOK .. RK_GEN) with nc children. */
static inline size_t rec_size(const wp_tables *t, uint32_t kind, uint32_t nc) {
    return 1 + (nc >= 31) + nc + t->ffsz[kind] + t->pw * (nc ? nc - 1 : 0);
}

/* Bytes of an RK_CHR record (f/F kind `kind`) with nk child characters. */
static inline size_t chr_size(const wp_tables *t, uint32_t kind, uint32_t nk) {
    return (nk >= 255 ? 4u : 2u) + 4 * (size_t)nk + t->ffsz[kind] + t->pw * (nk ? nk - 1 : 0);
}

/* Bytes of an RK_MID record with nc children. */
static inline size_t mid_size(const wp_tables *t, uint32_t nc) {
    return 1 + (nc >= 31) + nc + t->pw * (1 + (size_t)nc);
}

/* Which states lie inside a UTF-8 character (mid[c] = the continuation bytes still due) and the state
 * each such character began in (anc[c], its trie ancestor at the character's first byte), for the
 * children c of u, from the edge labels (build_blob calls it in preorder: parents first).  A token is
 * whole characters, so no token ends inside one: a state v inside a character stores no f/F (RK_MID).  A
 * miss at v on byte b (string s + the character's first bytes, s = the string of anc[v]) means no token
 * continues s through this character, so the walk goes back to anc[v] and the character's first byte
 * and takes anc[v]'s failure transitions.  That is a LinMaxMatch step like any other: however v was
 * entered (edge, failure link, hub row), the ids emitted so far + the string of the state = the bytes
 * read, for v and for anc[v] with the character's bytes unread.  The same argument lets a boundary state
 * look a whole character up (RK_CHR): no key for it = a miss somewhere inside it. */
#define LAB_ASCII 1 /* (labs: u has an ASCII child, a child on a byte >= 0x80) */
#define LAB_MULTI 2
HOT void mid_children(const wp_tables *t, size_t u, uint8_t *mid, uint32_t *anc, uint8_t *labs) {
    const uint64_t r = t->node[u];
    const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r, due = mid[u];
    uint32_t lb = 0;
    for (uint32_t k = 0; k < nc; k++) {
        const uint32_t c = t->edge_target[es + k], b = t->edge_label[es + k];
        lb |= b < 0x80 ? LAB_ASCII : LAB_MULTI;
        if (c <= u) continue; /* (not preorder: not a table the compiler made; c stays outside) */
        anc[c] = due ? anc[u] : (uint32_t)u;
        mid[c] = (uint8_t)(b < 0x80 ? 0 : b < 0xC0 ? (due ? due - 1 : 0) : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3);
    }
    labs[u] = (uint8_t)lb;
}

/* The child characters of a boundary state: keys and the boundary states they lead to, in preorder. */
typedef struct {
    uint32_t *key, *tg;
    size_t n, cap;
} keylist;

static int kl_push(keylist *k, uint32_t key, uint32_t tg) {
    if (k->n == k->cap) {
        size_t nc = k->cap ? 2 * k->cap : 256;
        uint32_t *a = (uint32_t *)realloc(k->key, nc * sizeof(uint32_t));
        if (!a) return -2;
        k->key = a;
        uint32_t *b = (uint32_t *)realloc(k->tg, nc * sizeof(uint32_t));
        if (!b) return -2;
        k->tg = b;
        k->cap = nc;
    }
    k->key[k->n] = key;
    k->tg[k->n++] = tg;
    return 0;
}

/* x: the state d bytes into a character of L bytes (key: those bytes). 0, -1: not a character trie, -2: no memory. */
static int char_walk(const wp_tables *t, const uint8_t *mid, keylist *kl, uint32_t x, uint32_t key, uint32_t d,
                     uint32_t L) {
    if (d == L) return mid[x] ? -1 : kl_push(kl, key, x);
    if (mid[x] != L - d) return -1;
    const uint64_t r = t->node[x];
    const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
    for (uint32_t k = 0; k < nc; k++) {
        const uint32_t y = t->edge_target[es + k], b = t->edge_label[es + k];
        if ((b & 0xC0) != 0x80 || y <= x) return -1;
        int e = char_walk(t, mid, kl, y, key | b << (8 * d), d + 1, L);
        if (e < 0) return e;
    }
    return 0;
}

/* The child characters of boundary state u, appended to kl.  0, -1: not a character trie, -2: no memory. */
static int char_children(const wp_tables *t, const uint8_t *mid, keylist *kl, uint32_t u) {
    const uint64_t r = t->node[u];
    const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
    for (uint32_t k = 0; k < nc; k++) {
        const uint32_t c = t->edge_target[es + k], b = t->edge_label[es + k];
        int e;
        if (c <= u) return -1;
        if (b < 0x80) e = mid[c] ? -1 : kl_push(kl, b, c);
        else if (b >= 0xC2 && b <= 0xF4) e = char_walk(t, mid, kl, c, b, 1, b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4);
        else e = -1;
        if (e < 0) return e;
    }
    return 0;
}

/* The walk's layout (see the records above), from the validated arrays (pops inlined).  The boundary
 * states come first, in preorder of the character trie: the first child of a state is the next record
 * and needs no pointer (57% of mBERT's states have one child), and walking down a word reads forward.  A
 * boundary state with a multi-byte child is an RK_CHR record: one step per character, and the states
 * inside its characters are not in the walk's way.  The states inside characters that a hub's byte row
 * leads into (the first character after r, r# and the other hubs) follow, as RK_MID records with
 * explicit children; the others are not stored.  Records are bytes: a token state with one child is 5
 * bytes (header, label, id), a leaf 4, other one-child states 8 (+ f), so the states a pass over a text
 * touches share fewer cache lines (docs/wordpiece-tables.md). */
static int build_blob(wp_tables *t, size_t npool) {
    size_t n = t->n_nodes;
    /* one allocation: pos (blob offset), fi (F(u), one-token pops inlined), anc (mid_children), nk (child
     * characters of an RK_CHR state, 0 otherwise); kinds, mid, keep */
    uint32_t *pos = (uint32_t *)malloc((n ? n : 1) * (5 * sizeof(uint32_t) + 5));
    uint8_t *B = NULL;
    keylist kl = {NULL, NULL, 0, 0};
    const char *err = NULL;
    size_t nm = 0; /* kept states inside characters, in preorder: mlist[0..nm) */
    if (!pos) { PyErr_NoMemory(); return -1; }
    uint32_t *fi = pos + n, *anc = fi + n, *nkey = anc + n, *mlist = nkey + n;
    uint8_t *kinds = (uint8_t *)(mlist + n), *mid = kinds + n, *keep = mid + n, *nc8 = keep + n, *labs = nc8 + n;
    size_t W = 0;
    memset(mid, 0, n);
    memset(keep, 0, n);
    for (size_t u = 0; u < n; u++) {
        const uint64_t r = t->node[u], fp = t->failpops[u];
        const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, Fraw = (uint32_t)(fp >> 32);
        anc[u] = mid[u] ? anc[u] : NONE32;
        fi[u] = inline_pop(t, npool, Fraw);
        nkey[u] = 0;
        if ((uint32_t)(r >> 48) != 0xFFFF) {
            kinds[u] = RK_HUB;
        } else if (nc >= 255) { /* the compiler makes such states hubs */
            err = "WordPiece tables: a sparse state has 255 children";
            goto fail;
        } else {
            kinds[u] = (uint8_t)rec_kind(t, (uint32_t)fp, Fraw, fi[u]);
        }
        nc8[u] = (uint8_t)nc;
        mid_children(t, u, mid, anc, labs);
    }
    for (size_t u = 0; u < n; u++) { /* boundary states with a multi-byte child: RK_CHR */
        if (!(labs[u] & LAB_MULTI) || mid[u] || kinds[u] == RK_HUB) continue;
        const uint64_t r = t->node[u];
        const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
        if (labs[u] & LAB_ASCII) { /* ASCII children too (Latin letters and accented ones): a byte record whose multi-byte
                      * children are states inside characters, stored (RK_MID); child 0 stays ASCII */
            for (uint32_t k = 0; k < nc; k++) {
                const uint32_t c = t->edge_target[es + k];
                if (t->edge_label[es + k] >= 0x80 && c > u && mid[c]) keep[c] = 1;
            }
            continue;
        }
        const size_t k0 = kl.n; /* (the keys of all RK_CHR states, in state order: build_blob writes them from here) */
        int e = char_children(t, mid, &kl, (uint32_t)u);
        if (e == -2) { PyErr_NoMemory(); goto fail_set; }
        if (e < 0 || kl.n == k0 || kl.n - k0 > 0xFFFF) {
            err = "WordPiece tables: the trie is not one of UTF-8 characters";
            goto fail;
        }
        nkey[u] = (uint32_t)(kl.n - k0);
    }
    for (size_t u = 0; u < n; u++) { /* states inside characters that hub rows lead into */
        if (kinds[u] != RK_HUB) continue;
        const uint64_t *d = t->dense + (size_t)(t->node[u] >> 48) * 256;
        for (int b = 0x80; b < 256; b++) { /* (an ASCII byte ends a character) */
            const uint32_t x = (uint32_t)d[b];
            if (x != NONE32 && x < n && mid[x]) keep[x] = 1;
        }
    }
    for (size_t u = 0; u < n; u++) { /* and the states below those inside the same character (preorder) */
        if (!mid[u] || !keep[u]) continue;
        mlist[nm++] = (uint32_t)u;
        if (kinds[u] == RK_HUB) continue;
        const uint64_t r = t->node[u];
        const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
        for (uint32_t k = 0; k < nc; k++) {
            const uint32_t c = t->edge_target[es + k];
            if (c > u && mid[c]) keep[c] = 1;
        }
    }
    /* 3-byte state offsets unless the blob reaches 16 MB; $FSTOK_WP_POINTER_BYTES=4 forces 4 (a test hook) */
    const char *pb = getenv("FSTOK_WP_POINTER_BYTES");
    const int first = pb && pb[0] == '4';
    for (int attempt = first; attempt < 2; attempt++) {
        t->pw = attempt ? 4 : 3;
        t->pmask = attempt ? 0xFFFFFFFFu : 0xFFFFFFu;
        const uint32_t fsz[8] = {3, 3 + t->pw, 0, 4 + t->pw, 8, t->pw, 0, 0};
        memcpy(t->ffsz, fsz, sizeof(fsz));
        W = BLOB_PAD;
        for (size_t u = 0; u < n; u++) pos[u] = NONE32;
        memset(t->nkind, 0, sizeof(t->nkind));
        t->n_chr = 0;
        for (int pass = 0; pass < 2; pass++) { /* boundary states, then the kept states inside characters */
            for (size_t x = 0; x < (pass ? nm : n); x++) {
                const size_t u = pass ? mlist[x] : x;
                if (!pass && mid[u]) continue;
                const uint32_t nc = nc8[u];
                pos[u] = (uint32_t)W;
                t->nkind[kinds[u] == RK_HUB ? RK_HUB : mid[u] ? RK_MID : kinds[u]]++; /* (layout_stats) */
                t->n_chr += nkey[u] != 0;
                if (kinds[u] == RK_HUB) W = HUB_PAIRS(W) + 256 * 8;
                else if (mid[u]) W += mid_size(t, nc);
                else if (nkey[u]) W += chr_size(t, kinds[u], nkey[u]);
                else W += rec_size(t, kinds[u], nc);
                if (W >= 0xFFFFFF00u) {
                    err = "WordPiece tables too large for the runtime layout";
                    goto fail;
                }
            }
        }
        if (W + BLOB_PAD < t->pmask) break; /* every offset fits the pointer width (and != the mask) */
    }
    for (int h = 0; h < 256; h++) { /* byte records, per header byte: label mask | child pointers' offset | size */
        uint32_t kind = h & 7, nc = (uint32_t)h >> 3;
        if (kind > RK_GEN || nc == 31) {
            t->rtab[h] = 0;
            continue;
        }
        uint32_t po = 1 + nc + t->ffsz[kind];
        t->rtab[h] = ((1u << (nc < 16 ? nc : 16)) - 1) | po << 16 | (uint32_t)rec_size(t, kind, nc) << 24;
    }
    B = (uint8_t *)calloc(W + BLOB_PAD, 1); /* zero padding at both ends for unaligned loads */
    if (!B) { PyErr_NoMemory(); goto fail_set; }
    int bad = 0;
/* a state's offset: NONE32 stays NONE32 (TGT); a state that is not stored is an error */
#define TGT(x) ((x) == NONE32 ? NONE32 : (x) < n && pos[(x)] != NONE32 ? pos[(x)] : (bad = 1, 0u))
#define REQ(x) ((x) < n && pos[(x)] != NONE32 ? pos[(x)] : (bad = 1, 0u))
/* Always 4 bytes (a constant-size copy): a 3-byte field's value is < 2^24, so its 4th byte is 0 and belongs
 * to the next field or record, which is written after it (fields and records in address order; padding
 * after the last one). */
#define PUT(dst, v)                                                                                                \
    do {                                                                                                           \
        uint32_t v_ = (v);                                                                                         \
        memcpy((dst), &v_, 4); /* little-endian */                                                                 \
    } while (0)
    size_t kc = 0; /* the next RK_CHR state's keys in kl */
    for (int pass = 0; pass < 2; pass++) /* in address order (see PUT) */
    for (size_t x = 0; x < (pass ? nm : n); x++) {
        const size_t u = pass ? mlist[x] : x;
        if (!pass && mid[u]) continue;
        uint64_t r = t->node[u];
        uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
        uint32_t P = pos[u], f0 = (uint32_t)t->failpops[u], Fi = fi[u], kind = kinds[u];
        uint8_t *q = B + P;
        if (kind == RK_HUB) {
            q[0] = RK_HUB;
            /* (a hub inside a character: its f/F are never read, see rec_fail) */
            PUT(q + 1, mid[u] ? NONE32 : TGT(f0));
            PUT(q + 5, mid[u] ? 0 : Fi);
            const uint64_t *d = t->dense + (size_t)(r >> 48) * 256;
            uint8_t *pr = B + HUB_PAIRS(P);
            for (int b = 0; b < 256; b++) {
                PUT(pr + 8 * b, TGT((uint32_t)d[b]));
                PUT(pr + 8 * b + 4, inline_pop(t, npool, (uint32_t)(d[b] >> 32)));
            }
            continue;
        }
        if (mid[u]) { /* RK_MID: labels, the character's first state, all children */
            uint32_t lo = 1;
            q[0] = (uint8_t)(RK_MID | (nc >= 31 ? 31u : nc) << 3);
            if (nc >= 31) q[lo++] = (uint8_t)nc;
            memcpy(q + lo, t->edge_label + es, nc);
            PUT(q + lo + nc, REQ(anc[u]));
            for (uint32_t k = 0; k < nc; k++) PUT(q + lo + nc + t->pw * (1 + k), REQ(t->edge_target[es + k]));
            continue;
        }
        uint8_t *ff;
        uint32_t nch, c0;
        const uint32_t *tgs = NULL; /* RK_CHR: the children, in key order */
        if (nkey[u]) { /* RK_CHR */
            const uint32_t *ks = kl.key + kc, *ts = kl.tg + kc;
            nch = nkey[u];
            kc += nch;
            uint32_t lo = 2;
            q[0] = (uint8_t)(RK_CHR | kind << 3);
            q[1] = (uint8_t)(nch >= 255 ? 255u : nch);
            if (nch >= 255) {
                q[2] = (uint8_t)nch;
                q[3] = (uint8_t)(nch >> 8);
                lo = 4;
            }
            for (uint32_t k = 0; k < nch; k++) PUT(q + lo + 4 * k, ks[k]);
            ff = q + lo + 4 * nch;
            c0 = ts[0];
            tgs = ts;
        } else { /* byte record */
            uint32_t lo = 1;
            nch = nc;
            q[0] = (uint8_t)(kind | (nc >= 31 ? 31u : nc) << 3);
            if (nc >= 31) q[lo++] = (uint8_t)nc;
            memcpy(q + lo, t->edge_label + es, nc);
            ff = q + lo + nc;
            c0 = nc ? t->edge_target[es] : NONE32;
        }
        switch (kind) {
        case RK_TOK: PUT(ff, Fi >> 8); break;
        case RK_ID: PUT(ff, Fi >> 8); PUT(ff + 3, REQ(f0)); break;
        case RK_NONE: break;
        case RK_SL: PUT(ff, Fi); PUT(ff + 4, REQ(f0)); break;
        default: PUT(ff, Fi); PUT(ff + 4, TGT(f0)); break;
        }
        uint8_t *pp = ff + t->ffsz[kind];
        for (uint32_t k = 1; k < nch; k++) PUT(pp + t->pw * (k - 1), REQ(tgs ? tgs[k] : t->edge_target[es + k]));
        if (nch && REQ(c0) != (uint32_t)(pp + t->pw * (nch - 1) - B)) { /* the validated preorder says the next record */
            err = "WordPiece tables: first child is not the next state";
            goto fail;
        }
    }
#undef PUT
#undef REQ
#undef TGT
    if (bad) {
        err = "WordPiece tables: the trie is not one of UTF-8 characters";
        goto fail;
    }
    { /* (slot 6: states inside characters not stored) */
        size_t stored = 0;
        for (int k = 0; k < 8; k++) stored += k == 6 ? 0 : t->nkind[k];
        t->nkind[6] = (uint32_t)(n - stored);
    }
    t->blob_size = W;
    t->blob = B;
    t->broot = pos[t->root];
    t->bsroot = pos[t->suffix_root];
    if (t->broot == NONE32 || t->bsroot == NONE32) {
        t->blob = NULL;
        err = "WordPiece tables: r or r# inside a character";
        goto fail;
    }
    free(pos);
    free(kl.key);
    free(kl.tg);
    return 0;
fail:
    PyErr_SetString(PyExc_ValueError, err);
fail_set:
    free(pos);
    free(B);
    free(kl.key);
    free(kl.tg);
    return -1;
}

static int Model_init(ModelObject *self, PyObject *args, PyObject *kw) {
    PyObject *o[N_BUFS];
    unsigned int n_nodes, n_dense, root, suffix_root, prefix_len, unk_id, max_chars;
    int strip_mode;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOIIIIIIIp", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &n_nodes, &n_dense, &root, &suffix_root, &prefix_len, &unk_id,
                          &max_chars, &strip_mode))
        return -1;
    if (self->nbufs) {
        PyErr_SetString(PyExc_RuntimeError, "Model already initialized");
        return -1;
    }
    wp_tables *t = &self->t;
    if (get_buf(self, o[0], 8, (const void **)&t->node, "node") < 0 ||
        get_buf(self, o[1], 1, (const void **)&t->edge_label, "edge_label") < 0 ||
        get_buf(self, o[2], 4, (const void **)&t->edge_target, "edge_target") < 0 ||
        get_buf(self, o[3], 8, (const void **)&t->failpops, "failpops") < 0 ||
        get_buf(self, o[4], 4, (const void **)&t->pool, "pool") < 0 ||
        get_buf(self, o[5], 8, (const void **)&t->dense, "dense") < 0 ||
        get_buf(self, o[6], 4, (const void **)&t->tok_len, "tok_len") < 0 ||
        get_buf(self, o[7], 2, (const void **)&t->norm1, "norm1") < 0 ||
        get_buf(self, o[8], 4, (const void **)&t->norm2, "norm2") < 0 ||
        get_buf(self, o[9], 4, (const void **)&t->npool, "npool") < 0 ||
        get_buf(self, o[10], 4, (const void **)&t->suffix_word, "suffix_word") < 0)
        return -1;
    /* cheap structural checks that protect the hot loop (the Python loader checks every entry) */
    if (self->bufs[0].len != (Py_ssize_t)n_nodes * 8 || self->bufs[3].len != (Py_ssize_t)n_nodes * 8 ||
        self->bufs[5].len != (Py_ssize_t)n_dense * 256 * 8 || self->bufs[7].len != (0x110000 >> 8) * 2 ||
        root >= n_nodes || suffix_root >= n_nodes || n_dense > n_nodes || unk_id * 4 >= (size_t)self->bufs[6].len) {
        PyErr_SetString(PyExc_ValueError, "WordPiece tables have inconsistent sizes");
        return -1;
    }
    t->n_suffix_word = (uint32_t)(self->bufs[10].len / 4);
    t->n_nodes = n_nodes;
    t->n_dense = n_dense;
    t->root = root;
    t->suffix_root = suffix_root;
    t->prefix_len = prefix_len;
    t->unk_id = unk_id;
    t->max_chars = max_chars;
    t->strip_mode = strip_mode;
    {
        const uint32_t *ascii = t->norm2 + ((size_t)t->norm1[0] << 8);
        for (int b = 0; b < 256; b++) t->wordbyte[b] = b < 0x80 && (ascii[b] & 7) == KIND_REG;
        for (int k = 0; k < 256; k++) t->lowmask[k] = (uint16_t)((1u << (k < 16 ? k : 16)) - 1);
        scan_inline_pops(self);
        if (build_blob(t, (size_t)self->bufs[4].len / 4) < 0) return -1;
    }
    return build_idcache(self);
}

/* The int object of token id `id` (a new reference; for a pinned model see id_int_pinned and the pinned
 * ints below), with the GIL.  The model's int objects are
 * created on first use, not at load: they then lie in memory in the order the text first needed them
 * (the ids of one language's common tokens side by side) instead of spread over the whole vocabulary
 * (120k ints = 3.8 MB for mBERT; see docs/wordpiece-tables.md).  The table that finds them is in that
 * order too: slot_of[id] (2 bytes per id) names the int's slot, and slots[] holds the pointers in
 * first-use order, so the ~15k distinct ids of a pass over multilingual.txt read ~2k lines of slots
 * and ~3k of slot_of instead of 8.3k lines of a per-id pointer table (0.96 MB for mBERT).  Past
 * WP_SLOTS distinct ids a per-id table takes the rest (pinned: the module's table).  Entries only go
 * from empty to an int, under the GIL (slot first, then its number, both with release stores); threads
 * without the GIL read them with acquire loads (peek_int). */
static PyObject *id_int_new(ModelObject *self, uint32_t id);

/* ---- pinned ints (pyids.h): one table per extension module, indexed by value in chunks of 1024
 * pointers (allocated on first need and never moved, so threads without the GIL can read it while a GIL
 * holder adds entries), filled lazily: an int is created, pinned and published the first time any model of
 * this module needs it, so the ints still lie in memory in first-use order.  Shared by all models (a model
 * loaded again reuses them: bounded by the largest vocabulary, like pyids_pinned_ints).  A model's slots
 * point into it (pinned models own no reference: Model_dealloc leaves them).  With pinned ints a result
 * list holds borrowed pointers and no Py_INCREF is taken, so the list of a long text can be filled by the
 * pool threads without the GIL (split_pinned).  FSTOK_PIN_INTS=0 (or a Python that cannot pin) keeps the
 * counted path. */
#define WPIN_BITS 10
#define WPIN_CHUNKS 4096 /* ids < 4M (larger ids: a fresh int each time, never seen in practice) */
#define WPIN_MAX ((uint32_t)WPIN_CHUNKS << WPIN_BITS)
static PyObject **wpin_chunk[WPIN_CHUNKS];

/* with the GIL: whether this module pins ints (decided once: FSTOK_PIN_INTS, and a trial pin) */
static int wpin_on(void) {
    if (pyids_pin_state < 0) {
        const char *env = getenv("FSTOK_PIN_INTS");
        pyids_pin_state = PYIDS_CAN_PIN && !(env && env[0] == '0');
        if (pyids_pin_state) { /* can this Python pin an int that is not one of its small ints? */
            PyObject *v = PyLong_FromUnsignedLong(WPIN_MAX + 12345u); /* (kept pinned: one int) */
            if (!v) {
                PyErr_Clear();
                pyids_pin_state = 0;
            } else if (!pyids_pin(v)) {
                Py_DECREF(v);
                pyids_pin_state = 0;
            }
        }
    }
    return pyids_pin_state;
}

/* without the GIL: the pinned int of id, or NULL if none has been made yet */
static inline PyObject *wpin_peek(uint32_t id) {
    if (id >= WPIN_MAX) return NULL;
    PyObject **c = __atomic_load_n(&wpin_chunk[id >> WPIN_BITS], __ATOMIC_ACQUIRE);
    return c ? __atomic_load_n(&c[id & ((1u << WPIN_BITS) - 1)], __ATOMIC_ACQUIRE) : NULL;
}

/* with the GIL, id < WPIN_MAX: the pinned int of id (borrowed; it is never freed), made on first need;
 * NULL with an exception */
static PyObject *wpin_get(uint32_t id) {
    PyObject *v = wpin_peek(id);
    if (v) return v;
    PyObject **c = wpin_chunk[id >> WPIN_BITS];
    if (!c) {
        c = (PyObject **)calloc((size_t)1 << WPIN_BITS, sizeof(PyObject *));
        if (!c) return PyErr_NoMemory();
        __atomic_store_n(&wpin_chunk[id >> WPIN_BITS], c, __ATOMIC_RELEASE);
    }
    v = PyLong_FromUnsignedLong(id);
    if (!v) return NULL;
    if (!pyids_pin(v)) { /* (wpin_on's trial pin worked: not expected) */
        Py_DECREF(v);
        PyErr_SetString(PyExc_RuntimeError, "fstok: could not pin a token-id int");
        return NULL;
    }
    __atomic_store_n(&c[id & ((1u << WPIN_BITS) - 1)], v, __ATOMIC_RELEASE);
    return v;
}

HOT PyObject *id_int(ModelObject *self, uint32_t id) {
    if (__builtin_expect(id < self->n_ids, 1)) {
        const uint32_t s = self->slot_of[id];
        if (__builtin_expect(s != 0, 1)) {
            PyObject *v = self->slots[s - 1];
            Py_INCREF(v);
            return v;
        }
    }
    return id_int_new(self, id);
}

/* id_int for a pinned model: the list item without a reference taken (a fresh int for ids past the tables) */
HOT PyObject *id_int_pinned(ModelObject *self, uint32_t id) {
    if (__builtin_expect(id < self->n_ids, 1)) {
        const uint32_t s = self->slot_of[id];
        if (__builtin_expect(s != 0, 1)) return self->slots[s - 1];
    }
    return id_int_new(self, id);
}

/* the slow path of id_int / id_int_pinned (same reference rules) */
static PyObject *id_int_new(ModelObject *self, uint32_t id) {
    if (id >= self->n_ids) return PyLong_FromUnsignedLong(id);
    if (self->pinned) {
        if (id >= WPIN_MAX) return PyLong_FromUnsignedLong(id);
        PyObject *v = wpin_get(id);
        if (v && self->n_slots < self->slot_cap) {
            __atomic_store_n(&self->slots[self->n_slots], v, __ATOMIC_RELEASE);
            self->n_slots++;
            __atomic_store_n(&self->slot_of[id], (uint16_t)self->n_slots, __ATOMIC_RELEASE);
        }
        return v; /* (past the slots: the module table is the per-id table) */
    }
    if (self->idcache && self->idcache[id]) {
        Py_INCREF(self->idcache[id]);
        return self->idcache[id];
    }
    PyObject *v = PyLong_FromLong((long)id);
    if (!v) return NULL;
    if (self->n_slots < self->slot_cap) {
        Py_INCREF(v); /* the model's reference */
        __atomic_store_n(&self->slots[self->n_slots], v, __ATOMIC_RELEASE);
        self->n_slots++;
        __atomic_store_n(&self->slot_of[id], (uint16_t)self->n_slots, __ATOMIC_RELEASE);
        return v;
    }
    if (!self->idcache) {
        PyObject **c = (PyObject **)calloc(self->n_ids, sizeof(PyObject *));
        if (!c) return v; /* not cached: a fresh int every time */
        __atomic_store_n(&self->idcache, c, __ATOMIC_RELEASE);
    }
    Py_INCREF(v);
    __atomic_store_n(&self->idcache[id], v, __ATOMIC_RELEASE);
    return v;
}

/* A borrowed pointer to id's int where one exists (NULL: none yet); needs no GIL. */
static inline PyObject *peek_int(const ModelObject *self, uint32_t id) {
    if (id >= self->n_ids) return NULL;
    const uint32_t s = __atomic_load_n(&self->slot_of[id], __ATOMIC_ACQUIRE);
    if (s) return __atomic_load_n(&self->slots[s - 1], __ATOMIC_ACQUIRE);
    if (self->pinned) return wpin_peek(id);
    PyObject **c = __atomic_load_n(&self->idcache, __ATOMIC_ACQUIRE);
    return c ? __atomic_load_n(&c[id], __ATOMIC_ACQUIRE) : NULL;
}

static PyObject *ids_to_list(ModelObject *self, const outbuf *o) {
    PyObject *l = PyList_New((Py_ssize_t)o->n);
    if (!l) return NULL;
    PyObject **dst = ((PyListObject *)l)->ob_item;
    if (self->pinned) {
        for (size_t i = 0; i < o->n; i++) {
            PyObject *v = id_int_pinned(self, o->ids[i]);
            if (!v) {
                Py_DECREF(l); /* (the items not yet set are NULL) */
                return NULL;
            }
            dst[i] = v;
        }
        return l;
    }
    for (size_t i = 0; i < o->n; i++) {
        PyObject *v = id_int(self, o->ids[i]);
        if (!v) {
            Py_DECREF(l); /* (the items not yet set are NULL) */
            return NULL;
        }
        dst[i] = v;
    }
    return l;
}

static int build_idcache(ModelObject *self) {
    size_t n = (size_t)(self->bufs[6].len / 4); /* tok_len has one entry per id */
    const char *ev = getenv("FSTOK_WP_SLOTS"); /* a test hook: fewer slots, so that the per-id table is used */
    long cap = ev ? strtol(ev, NULL, 10) : WP_SLOTS;
    self->slot_cap = cap < 0 ? 0 : cap < WP_SLOTS ? (size_t)cap : WP_SLOTS;
    if (self->slot_cap > n) self->slot_cap = n;
    self->slot_of = (uint16_t *)calloc(n ? n : 1, sizeof(uint16_t)); /* filled by id_int_new */
    self->slots = (PyObject **)calloc(self->slot_cap ? self->slot_cap : 1, sizeof(PyObject *));
    if (!self->slot_of || !self->slots) { PyErr_NoMemory(); return -1; }
    self->n_ids = n;
    self->pinned = wpin_on();
    return 0;
}

static PyObject *offs_to_list(const outbuf *o) {
    PyObject *l = PyList_New((Py_ssize_t)o->n);
    if (!l) return NULL;
    for (size_t i = 0; i < o->n; i++) {
        PyObject *v = Py_BuildValue("(II)", o->offs[2 * i], o->offs[2 * i + 1]);
        if (!v) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, (Py_ssize_t)i, v);
    }
    return l;
}

/* mode: 0 = list of ids, 1 = (ids, offsets) lists, 2 = bytes of uint32 ids, 3 = (ids bytes, offsets bytes) */
static PyObject *finish(ModelObject *self, outbuf *o, int mode) {
    PyObject *r = NULL;
    if (o->oom) {
        PyErr_NoMemory();
    } else if (mode == 0) {
        r = ids_to_list(self, o);
    } else if (mode == 1) {
        PyObject *a = ids_to_list(self, o), *b = a ? offs_to_list(o) : NULL;
        if (a && b) r = PyTuple_Pack(2, a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    } else if (mode == 2) {
        r = PyBytes_FromStringAndSize((const char *)o->ids, (Py_ssize_t)(o->n * 4));
    } else {
        PyObject *a = PyBytes_FromStringAndSize((const char *)o->ids, (Py_ssize_t)(o->n * 4));
        PyObject *b = a ? PyBytes_FromStringAndSize((const char *)o->offs, (Py_ssize_t)(o->n * 8)) : NULL;
        if (a && b) r = PyTuple_Pack(2, a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    out_free(o);
    return r;
}

static int text_bytes(PyObject *text, const char **s, Py_ssize_t *n) {
    if (PyUnicode_Check(text)) {
        *s = PyUnicode_AsUTF8AndSize(text, n);
        return *s ? 0 : -1;
    }
    PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
    return -1;
}

#define STACK_IDS 512
static PyObject *encode_utf8(ModelObject *self, const char *s, Py_ssize_t n, int mode, int word) {
    outbuf o;
    uint32_t stack_ids[STACK_IDS]; /* a sentence's ids: no malloc / realloc / free per call */
    memset(&o, 0, sizeof(o));
    o.want_offs = (mode & 1);
    if (!o.want_offs) {
        o.ids = stack_ids;
        o.cap = STACK_IDS;
        o.borrowed = 1;
    }
    if (n < 4096) { /* releasing the GIL costs more than encoding a short text */
        if (word) wp_encode_word(&self->t, (const uint8_t *)s, (size_t)n, &o);
        else wp_encode_e2e(&self->t, (const uint8_t *)s, (size_t)n, &o);
    } else {
        Py_BEGIN_ALLOW_THREADS
        if (word) wp_encode_word(&self->t, (const uint8_t *)s, (size_t)n, &o);
        else wp_encode_e2e(&self->t, (const uint8_t *)s, (size_t)n, &o);
        Py_END_ALLOW_THREADS
    }
    return finish(self, &o, mode);
}

static PyObject *Model_encode(ModelObject *self, PyObject *args) {
    PyObject *text;
    int mode = 0, word = 0;
    if (!PyArg_ParseTuple(args, "O|ip", &text, &mode, &word)) return NULL;
    const char *s;
    Py_ssize_t n;
    if (text_bytes(text, &s, &n) < 0) return NULL;
    return encode_utf8(self, s, n, mode, word);
}

/* tok.encode for the common call, encode(text) with an exact str: a C function bound to
 * (model, fallback) so that no Python frame runs; any other call (keywords, bytes, a str that is
 * not UTF-8 encodable) goes to the fallback, the Python method, which validates and explains. */
static PyObject *fast_encode(PyObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs == 1 && (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) && PyUnicode_CheckExact(args[0])) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(args[0], &n);
        if (s) return encode_utf8((ModelObject *)PyTuple_GET_ITEM(st, 0), s, n, 0, 0);
        PyErr_Clear();
    }
    return PyObject_Vectorcall(PyTuple_GET_ITEM(st, 1), args, (size_t)nargs, kwnames);
}

static PyMethodDef fast_encode_def = {
    "encode", (PyCFunction)(void (*)(void))fast_encode, METH_FASTCALL | METH_KEYWORDS,
    "encode(text, *, add_special_tokens=False, allowed_special=(), num_threads=None) -> list[int]\n\n"
    "Token ids of text (BERT normalization + pre-tokenization + WordPiece in one pass); see\n"
    "fstok.WordPieceTokenizer.encode. Plain encode(text) runs in C; other calls go to that method."};

static PyObject *Model_fast_encode(ModelObject *self, PyObject *fallback) {
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return NULL;
    }
    PyObject *st = PyTuple_Pack(2, (PyObject *)self, fallback);
    if (!st) return NULL;
    PyObject *f = PyCFunction_NewEx(&fast_encode_def, st, NULL);
    Py_DECREF(st);
    return f;
}

/* FSTOK_TRACE_THREADS=1: the long-text path prints where its time went to stderr (split_pinned; as
 * run_bounds does in the BPE module) */
static int trace_threads = -1;
static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
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
    Py_ssize_t *n;
    outbuf *outs;
    size_t count;
    size_t next; /* work index, taken under the mutex */
    pthread_mutex_t mu;
    int word;
} batch_job;

static void *batch_worker(void *arg) {
    batch_job *j = (batch_job *)arg;
    const int tr = trace_threads > 0;
    for (;;) {
        pthread_mutex_lock(&j->mu);
        size_t i = j->next;
        size_t chunk = j->count >= 64 * 16 ? 16 : 1; /* small batches: one text at a time */
        j->next += chunk;
        pthread_mutex_unlock(&j->mu);
        if (i >= j->count) break;
        size_t end = i + chunk < j->count ? i + chunk : j->count;
        double t0 = tr ? now_us() : 0;
        for (; i < end; i++) {
            /* encode into a copy on this thread's stack: the outs[] entries of neighbouring texts
             * share cache lines, and the encoder updates its outbuf once per token (false sharing
             * made 2 threads cost 2x the CPU of one) */
            outbuf local = j->outs[i];
            if (j->word) wp_encode_word(j->t, (const uint8_t *)j->s[i], (size_t)j->n[i], &local);
            else wp_encode_e2e(j->t, (const uint8_t *)j->s[i], (size_t)j->n[i], &local);
            j->outs[i] = local;
        }
        if (tr) atomic_fetch_add(&trace_busy_ns, (long long)((now_us() - t0) * 1e3));
    }
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

/* Encode count texts on nthreads threads (the caller's thread is one of them), GIL released.  Returns
 * the number of threads that ran (the caller included). */
static int run_jobs(const wp_tables *t, const char **s, Py_ssize_t *n, outbuf *outs, size_t count, int word,
                    int nthreads) {
    if (nthreads < 1) nthreads = 1;
    if ((size_t)nthreads > count) nthreads = (int)(count > 0 ? count : 1);
    if (nthreads > 256) nthreads = 256;
    batch_job job;
    job.t = t;
    job.s = s;
    job.n = n;
    job.outs = outs;
    job.count = count;
    job.next = 0;
    job.word = word;
    pthread_mutex_init(&job.mu, NULL);
    int started = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_t th[256];
    int pooled;
    started = workers_start(batch_worker, &job, nthreads, th, &pooled);
    batch_worker(&job);
    workers_join(started, th, pooled);
    Py_END_ALLOW_THREADS
    pthread_mutex_destroy(&job.mu);
    return started + 1;
}

/* with the GIL: a list of n items whose item array is allocated but not zeroed (PyList_New calloc's it: a
 * serial memset of 8 bytes per token, 30-60 us for 1 MB of English on 2 vCPUs); the caller must set every
 * item before the list is used or freed, and keep the list untracked by the garbage collector until then
 * (PyObject_GC_UnTrack: a collection in another thread would read the items). */
static PyObject *list_unset(size_t n) {
    if (n == 0 || n > (size_t)PY_SSIZE_T_MAX / sizeof(PyObject *)) return PyList_New((Py_ssize_t)n);
    PyObject **items = (PyObject **)PyMem_Malloc(n * sizeof(PyObject *));
    if (!items) return PyErr_NoMemory();
    PyObject *l = PyList_New(0);
    if (!l) {
        PyMem_Free(items);
        return NULL;
    }
    PyListObject *L = (PyListObject *)l;
    L->ob_item = items;
    L->allocated = (Py_ssize_t)n;
    Py_SET_SIZE(L, (Py_ssize_t)n);
    return l;
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

static void copy_ids(const outbuf *outs, size_t np, uint32_t *dst, size_t total, int nthreads) {
    int want = total >= 65536 ? (int)(total / 32768) : 1;
    if (want > nthreads) want = nthreads;
    size_t *off = want > 1 ? (size_t *)malloc((np + 1) * sizeof(size_t)) : NULL;
    if (!off) { /* (one thread, or no memory for the offsets: copied here) */
        for (size_t i = 0; i < np; i++) {
            if (outs[i].n) memcpy(dst, outs[i].ids, outs[i].n * sizeof(uint32_t));
            dst += outs[i].n;
        }
        return;
    }
    for (size_t i = 0, o = 0; i < np; i++) {
        off[i] = o;
        o += outs[i].n;
    }
    wcopy_job cj;
    cj.dst = dst;
    cj.outs = outs;
    cj.off = off;
    cj.count = np;
    atomic_init(&cj.next, 0);
    Py_BEGIN_ALLOW_THREADS /* (the bytes object is not visible to any other thread yet) */
    int pooled = tp_start(wcopy_worker, &cj, want - 1);
    wcopy_worker(&cj);
    if (pooled >= 0) tp_wait();
    Py_END_ALLOW_THREADS
    free(off);
}

/* With pinned ints, a long text's list is filled after the encoding, by the pool: piece k's ids become the
 * items dst[off[k], off[k+1]) (peek_int: slot table reads, no reference to take, no GIL).  An id whose int
 * does not exist yet (a token this model never returned before) is left NULL and its piece flagged; the
 * caller makes those ints afterwards, with the GIL. */
typedef struct {
    PyObject **dst;
    const ModelObject *model;
    const outbuf *outs;
    const size_t *off;
    int *missing;
    size_t count;
    atomic_size_t next;
} wfill_job;

static void *wfill_worker(void *arg) {
    wfill_job *f = (wfill_job *)arg;
    const ModelObject *self = f->model;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&f->next, 1, memory_order_relaxed);
        if (i >= f->count) break;
        const uint32_t *ids = f->outs[i].ids;
        PyObject **d = f->dst + f->off[i];
        PyObject *miss = (PyObject *)1;
        const size_t m = f->outs[i].n;
        const uint16_t *slot_of = self->slot_of;
        PyObject *const *slots = self->slots;
        const uint32_t n_ids = (uint32_t)self->n_ids;
        for (size_t q = 0; q < m; q++) {
            uint32_t id = ids[q];
            uint32_t sl = id < n_ids ? __atomic_load_n(&slot_of[id], __ATOMIC_ACQUIRE) : 0;
            PyObject *v = sl ? __atomic_load_n(&slots[sl - 1], __ATOMIC_ACQUIRE) : peek_int(self, id);
            d[q] = v;
            miss = v ? miss : NULL;
        }
        f->missing[i] = !miss;
    }
    return NULL;
}

/* The list of a long text with pinned ints: encode the pieces on the pool (the caller too), allocate the
 * list once, fill it on the pool without the GIL, make the ints not made yet.  split_pipelined (the
 * counted way) has to take a reference per item on the GIL-holding thread, one after another: at 16
 * threads that serial tail bounded the list output at 0.16-0.32 of one-shot. */
static PyObject *split_pinned(ModelObject *self, const char **ps, Py_ssize_t *pn, outbuf *outs, size_t np,
                              int nthreads) {
    const int tr = tracing();
    double tr0 = tr ? now_us() : 0, tr_enc = 0, tr_alloc = 0, tr_fill = 0, tr_fix = 0;
    if (tr) atomic_store(&trace_busy_ns, 0);
    size_t *off = (size_t *)calloc(np + 1, sizeof(size_t));
    int *missing = (int *)calloc(np + 1, sizeof(int));
    PyObject *result = NULL;
    int ran = 0, filled_by = 0;
    size_t total = 0, nfix = 0;
    if (!off || !missing) {
        PyErr_NoMemory();
        goto done;
    }
    ran = run_jobs(&self->t, ps, pn, outs, np, 0, nthreads);
    if (tr) tr_enc = now_us();
    for (size_t k = 0; k < np; k++) {
        if (outs[k].oom) {
            PyErr_NoMemory();
            goto done;
        }
        off[k] = total;
        total += outs[k].n;
    }
    result = list_unset(total);
    if (!result) goto done;
    /* untracked while its items are not all written: another Python thread takes the GIL while the pool
     * fills it, and a garbage collection there would traverse the list's items (they are not zeroed) */
    PyObject_GC_UnTrack(result);
    if (tr) tr_alloc = now_us();
    {
        wfill_job fj;
        fj.dst = ((PyListObject *)result)->ob_item;
        fj.model = self;
        fj.outs = outs;
        fj.off = off;
        fj.missing = missing;
        fj.count = np;
        atomic_init(&fj.next, 0);
        /* (small lists: filling on the caller alone is cheaper than waking the pool) */
        int want = total >= 32768 ? (int)(total / 16384) : 1;
        if (want > ran) want = ran;
        Py_BEGIN_ALLOW_THREADS /* (the list is not visible to any other thread: untracked, one reference) */
        /* (the pool, or the caller alone while another job holds the pool: threads of our own would cost
         * more than the fill) */
        int pooled = want > 1 ? tp_start(wfill_worker, &fj, want - 1) : -1;
        filled_by = pooled > 0 ? pooled + 1 : 1;
        wfill_worker(&fj);
        if (pooled >= 0) tp_wait();
        Py_END_ALLOW_THREADS
    }
    if (tr) tr_fill = now_us();
    for (size_t k = 0; k < np; k++) { /* ints made for the first time, with the GIL */
        if (!missing[k]) continue;
        PyObject **d = ((PyListObject *)result)->ob_item + off[k];
        for (size_t q = 0; q < outs[k].n; q++) {
            if (d[q]) continue;
            PyObject *v = id_int_pinned(self, outs[k].ids[q]);
            if (!v) {
                Py_CLEAR(result); /* (NULL items are skipped; the others are pinned or owned) */
                goto done;
            }
            d[q] = v;
            nfix++;
        }
    }
    PyObject_GC_Track(result); /* (every item is an int now, or NULL) */
    if (tr) tr_fix = now_us();
done:
    if (tr && tr_fix > 0) {
        double end = now_us();
        fprintf(stderr,
                "fstok wordpiece split_pinned: %zu pieces %d threads | encoded %.0f us | list alloc %.0f | "
                "filled %.0f (%d threads) | %zu ints made %.0f | total %.0f us | encode busy %.0f us (%.2f of "
                "threads x encode) | %zu ids\n",
                np, ran, tr_enc - tr0, tr_alloc - tr_enc, tr_fill - tr_alloc, filled_by, nfix, tr_fix - tr_fill,
                end - tr0, atomic_load(&trace_busy_ns) / 1e3,
                atomic_load(&trace_busy_ns) / 1e3 / (ran * (tr_enc - tr0)), total);
    }
    free(off);
    free(missing);
    return result;
}

/* Pipelined long-text encoding (ints not pinned: FSTOK_PIN_INTS=0): nthreads workers encode the pieces
 * (handed out in order) and turn each piece's ids into borrowed pointers to the cached int objects (a
 * read-only table: safe off the GIL); the calling thread takes finished pieces in order and only INCREFs
 * those pointers (that must stay on the GIL-holding thread), prefetching ahead.  Building the 10^5-10^6
 * items of the result was the serial tail that capped the speedup; now it overlaps the encoding and is
 * mostly memory writes. */
typedef struct {
    const wp_tables *t;
    const char **s;
    Py_ssize_t *n;
    outbuf *outs;
    const ModelObject *model; /* its ints read without the GIL: atomic loads only (split_borrow) */
    PyObject ***ptrs; /* per piece: borrowed pointers, NULL entries where no cached int exists */
    size_t count;
    atomic_size_t next;
    pyids_sync *sync;
} split_job;

/* pyids_borrow for the lazily filled cache: ids -> borrowed cached pointers (NULL: not created yet;
 * pyids_take_block then makes an int), read atomically since a GIL holder may be filling entries. */
static PyObject **split_borrow(const ModelObject *self, const uint32_t *ids, size_t m) {
    PyObject **pp = (PyObject **)malloc((m ? m : 1) * sizeof(PyObject *));
    if (pp)
        for (size_t k = 0; k < m; k++) pp[k] = peek_int(self, ids[k]);
    return pp;
}

static void *split_worker(void *arg) {
    split_job *j = (split_job *)arg;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->count) break;
        outbuf local = j->outs[i]; /* on this stack: no false sharing with neighbouring pieces */
        wp_encode_e2e(j->t, (const uint8_t *)j->s[i], (size_t)j->n[i], &local);
        j->ptrs[i] = split_borrow(j->model, local.ids, local.n);
        j->outs[i] = local;
        pyids_sync_mark(j->sync, i);
    }
    return NULL;
}

static PyObject *split_pipelined(ModelObject *self, const char **ps, Py_ssize_t *pn, outbuf *outs, size_t npieces,
                                 int nthreads) {
    pyids_sync sync = {0};
    PyObject ***ptrs = (PyObject ***)calloc(npieces, sizeof(PyObject **));
    size_t *lens = (size_t *)calloc(npieces, sizeof(size_t));
    size_t nref = 0; /* pieces whose items hold references */
    pthread_t th[256];
    int started = 0, failed = 0, pooled = 0;
    if (pyids_sync_init(&sync, npieces) < 0 || !ptrs || !lens) {
        pyids_sync_free(&sync);
        free(ptrs);
        free(lens);
        return PyErr_NoMemory();
    }
    split_job job;
    job.t = &self->t;
    job.s = ps;
    job.n = pn;
    job.outs = outs;
    job.model = self;
    job.ptrs = ptrs;
    job.count = npieces;
    atomic_init(&job.next, 0);
    job.sync = &sync;
    if (nthreads > 255) nthreads = 255;
    /* nthreads workers (the pool, or threads of this call): the caller INCREFs meanwhile */
    started = workers_start(split_worker, &job, nthreads + 1, th, &pooled);
    if (!started) split_worker(&job); /* no thread could be started: encode here */
    for (size_t k = 0; k < npieces && !failed; k++) {
        if (!pyids_sync_ready(&sync, k)) {
            Py_BEGIN_ALLOW_THREADS
            pyids_sync_wait(&sync, k);
            Py_END_ALLOW_THREADS
        }
        outbuf *o = &outs[k];
        PyObject **pp = ptrs[k];
        if (o->oom || !pp) { failed = 1; break; }
        if (pyids_take_block(pp, o->ids, o->n) < 0) { failed = 1; break; }
        nref = k + 1;
    }
    Py_BEGIN_ALLOW_THREADS
    workers_join(started, th, pooled);
    Py_END_ALLOW_THREADS
    for (size_t k = 0; k < npieces; k++) lens[k] = outs[k].n;
    PyObject *result = pyids_list(ptrs, lens, npieces, nref, !failed);
    for (size_t k = 0; k < npieces; k++) free(ptrs[k]);
    free(lens);
    free(ptrs);
    pyids_sync_free(&sync);
    return result;
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

/* One long text on threads: cut the UTF-8 near parts equal slices right before a whitespace,
 * punctuation or CJK character (wp_cut_ok: a word boundary under every normalization flag; the
 * piece on the right starts with that character), encode the pieces in parallel, concatenate.
 * The text's UTF-8 is computed once (and cached in the str, as for encode), not per piece. */
#define SPLIT_SEARCH 16384 /* bytes searched around a target cut for a cut point */
static PyObject *Model_encode_split(ModelObject *self, PyObject *args) {
    PyObject *text;
    int nthreads = 1, parts = 0, mode = 0;
    if (!PyArg_ParseTuple(args, "Oi|ii", &text, &nthreads, &parts, &mode)) return NULL;
    if (mode != 0 && mode != 2) {
        PyErr_SetString(PyExc_ValueError, "encode_split: mode must be 0 (list) or 2 (bytes)");
        return NULL;
    }
    const int tr = tracing();
    double tr0 = tr ? now_us() : 0, tr_cut = 0, tr_enc = 0, tr_out = 0;
    const char *how = "?";
    int ran = 0;
    const char *s;
    Py_ssize_t n;
    if (text_bytes(text, &s, &n) < 0) return NULL;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 256) nthreads = 256;
    if (parts < 1) { /* pieces per thread: 4, or $FSTOK_SPLIT_PARTS (as for BPE; read once) */
        static int per_thread = 0;
        if (!per_thread) {
            const char *e = getenv("FSTOK_SPLIT_PARTS");
            long v = e ? strtol(e, NULL, 10) : 4;
            per_thread = v < 1 ? 4 : v > 64 ? 64 : (int)v;
        }
        parts = per_thread * nthreads;
    }
    if (parts > 4096) parts = 4096;
    size_t *cut = (size_t *)malloc(((size_t)parts + 1) * sizeof(size_t));
    const char **ps = (const char **)calloc((size_t)parts + 1, sizeof(char *));
    Py_ssize_t *pn = (Py_ssize_t *)calloc((size_t)parts + 1, sizeof(Py_ssize_t));
    outbuf *outs = (outbuf *)calloc((size_t)parts + 1, sizeof(outbuf));
    PyObject *result = NULL;
    size_t npieces = 0;
    if (!cut || !ps || !pn || !outs) { PyErr_NoMemory(); goto done; }
    {
        const size_t N = (size_t)n;
        size_t last = 0, nc = 0;
        cut[nc++] = 0;
        for (int k = 1; k < parts; k++) {
            size_t t = (size_t)((unsigned long long)N * (unsigned)k / (unsigned)parts), best = 0;
            if (t <= last) continue;
            size_t hi = t + SPLIT_SEARCH < N ? t + SPLIT_SEARCH : N;
            for (size_t q = t; q < hi; q++) {
                if (wp_cut_ok(&self->t, (const uint8_t *)s, q)) { best = q; break; }
            }
            if (!best) {
                size_t lo = t > SPLIT_SEARCH ? t - SPLIT_SEARCH : 0;
                if (lo <= last) lo = last + 1;
                for (size_t q = t; q-- > lo;) {
                    if (wp_cut_ok(&self->t, (const uint8_t *)s, q)) { best = q; break; }
                }
            }
            if (best > last && best < N) cut[nc++] = last = best;
        }
        cut[nc] = N;
        npieces = nc;
        for (size_t i = 0; i < npieces; i++) {
            ps[i] = s + cut[i];
            pn[i] = (Py_ssize_t)(cut[i + 1] - cut[i]);
        }
    }
    if (tr) tr_cut = now_us();
    if (mode == 0 && nthreads > 1 && npieces > 1) {
        how = self->pinned ? "list, pinned (split_pinned)" : "list, counted (split_pipelined)";
        if (self->pinned) result = split_pinned(self, ps, pn, outs, npieces, nthreads);
        else result = split_pipelined(self, ps, pn, outs, npieces, nthreads);
        if (tr) tr_enc = tr_out = now_us();
        goto done;
    }
    how = mode == 2 ? "bytes" : "list, one thread";
    if (tr) atomic_store(&trace_busy_ns, 0);
    ran = run_jobs(&self->t, ps, pn, outs, npieces, 0, nthreads);
    if (tr) tr_enc = now_us();
    {
        size_t total = 0;
        for (size_t i = 0; i < npieces; i++) {
            if (outs[i].oom) { PyErr_NoMemory(); goto done; }
            total += outs[i].n;
        }
        if (mode == 2) {
            result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * 4));
            if (!result) goto done;
            copy_ids(outs, npieces, (uint32_t *)PyBytes_AS_STRING(result), total, ran);
        } else {
            result = PyList_New((Py_ssize_t)total);
            if (!result) goto done;
            Py_ssize_t k = 0;
            for (size_t i = 0; i < npieces; i++) {
                for (size_t j = 0; j < outs[i].n; j++) {
                    PyObject *v = self->pinned ? id_int_pinned(self, outs[i].ids[j]) : id_int(self, outs[i].ids[j]);
                    if (!v) {
                        Py_CLEAR(result);
                        goto done;
                    }
                    PyList_SET_ITEM(result, k++, v);
                }
            }
        }
    }
    if (tr) tr_out = now_us();
done:
    if (outs) for (size_t i = 0; i < npieces; i++) out_free(&outs[i]);
    if (tr && tr_out > 0) {
        double end = now_us();
        if (ran) /* (the list paths print their own phases first) */
            fprintf(stderr,
                    "fstok wordpiece encode_split (%s): %zu pieces %d threads | utf8+cuts %.0f us | encoded %.0f | "
                    "output %.0f | pieces freed %.0f | total %.0f us | encode busy %.0f us (%.2f of threads x encode)\n",
                    how, npieces, ran, tr_cut - tr0, tr_enc - tr_cut, tr_out - tr_enc, end - tr_out, end - tr0,
                    atomic_load(&trace_busy_ns) / 1e3, atomic_load(&trace_busy_ns) / 1e3 / (ran * (tr_enc - tr_cut)));
        else
            fprintf(stderr,
                    "fstok wordpiece encode_split (%s): %zu pieces %d threads | utf8+cuts %.0f us | encoded+list %.0f | "
                    "pieces freed %.0f | total %.0f us\n",
                    how, npieces, nthreads, tr_cut - tr0, tr_out - tr_cut, end - tr_out, end - tr0);
    }
    free(cut);
    free(ps);
    free(pn);
    free(outs);
    return result;
}

#define BATCH_BYTES_PER_THREAD 8192
static PyObject *Model_encode_batch(ModelObject *self, PyObject *args) {
    PyObject *seq;
    int nthreads = 1, mode = 0, word = 0;
    if (!PyArg_ParseTuple(args, "O|iip", &seq, &nthreads, &mode, &word)) return NULL;
    PyObject *fast = PySequence_Fast(seq, "texts must be a sequence of str");
    if (!fast) return NULL;
    Py_ssize_t cnt = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    const char **s = (const char **)calloc((size_t)cnt + 1, sizeof(char *));
    Py_ssize_t *n = (Py_ssize_t *)calloc((size_t)cnt + 1, sizeof(Py_ssize_t));
    outbuf *outs = (outbuf *)calloc((size_t)cnt + 1, sizeof(outbuf));
    PyObject *result = NULL;
    if (!s || !n || !outs) { PyErr_NoMemory(); goto done; }
    for (Py_ssize_t i = 0; i < cnt; i++) {
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] must be str, not %.100s", i, Py_TYPE(items[i])->tp_name);
            goto done;
        }
        s[i] = PyUnicode_AsUTF8AndSize(items[i], &n[i]);
        if (!s[i]) {
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            PyErr_Format(PyExc_ValueError, "texts[%zd] is not encodable as UTF-8 (lone surrogate?)", i);
            Py_XDECREF(et); Py_XDECREF(ev); Py_XDECREF(tb);
            goto done;
        }
        outs[i].want_offs = mode & 1;
    }
    {
        /* a thread per BATCH_BYTES_PER_THREAD of text at most: waking a pool thread costs more than encoding
         * a few short texts (32 English lines, 854 bytes: 7.5 us on one thread, 30 us on two) */
        size_t bytes = 0;
        for (Py_ssize_t i = 0; i < cnt; i++) bytes += (size_t)n[i];
        size_t cap = 1 + bytes / BATCH_BYTES_PER_THREAD;
        if (nthreads > 1 && (size_t)nthreads > cap) nthreads = (int)cap;
    }
    run_jobs(&self->t, s, n, outs, (size_t)cnt, word, nthreads);
    if (mode == 4) {
        /* (all ids as one uint32 buffer, each text's count as int64): a batch for numpy without a
         * Python int or list per token (fstok.Tokenizer.encode_batch_numpy) */
        size_t total = 0;
        for (Py_ssize_t i = 0; i < cnt; i++) {
            if (outs[i].oom) { PyErr_NoMemory(); goto done; }
            total += outs[i].n;
        }
        PyObject *ids = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * 4));
        PyObject *lens = ids ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(cnt * 8)) : NULL;
        if (ids && lens) {
            char *dst = PyBytes_AS_STRING(ids);
            int64_t *ln = (int64_t *)PyBytes_AS_STRING(lens);
            for (Py_ssize_t i = 0; i < cnt; i++) {
                if (outs[i].n) memcpy(dst, outs[i].ids, outs[i].n * 4);
                dst += outs[i].n * 4;
                ln[i] = (int64_t)outs[i].n;
            }
            result = PyTuple_Pack(2, ids, lens);
        }
        Py_XDECREF(ids);
        Py_XDECREF(lens);
        goto done;
    }
    result = PyList_New(cnt);
    if (!result) goto done;
    {
        /* 10^5 result lists would trigger the cyclic GC over and over while they are built;
           they cannot form cycles, so pause it for the construction (one pass afterwards). */
#if PY_VERSION_HEX >= 0x030A0000
        int gc_was = PyGC_Disable();
#endif
        for (Py_ssize_t i = 0; i < cnt; i++) {
            PyObject *r = finish(self, &outs[i], mode);
            if (!r) { Py_CLEAR(result); break; }
            PyList_SET_ITEM(result, i, r);
        }
#if PY_VERSION_HEX >= 0x030A0000
        if (gc_was) PyGC_Enable();
#endif
        if (!result) goto done;
    }
done:
    if (outs) for (Py_ssize_t i = 0; i < cnt; i++) out_free(&outs[i]);
    free(s);
    free(n);
    free(outs);
    Py_DECREF(fast);
    return result;
}

/* The walk's layout (tests and docs): states per record kind, blob bytes, state offset width. */
static PyObject *Model_layout_stats(ModelObject *self, PyObject *unused) {
    const wp_tables *t = &self->t;
    return Py_BuildValue("{sIsIsIsIsIsIsIsIsIsnsI}", "tok", t->nkind[RK_TOK], "id", t->nkind[RK_ID], "none",
                         t->nkind[RK_NONE], "slice", t->nkind[RK_SL], "general", t->nkind[RK_GEN], "mid",
                         t->nkind[RK_MID], "mid_dropped", t->nkind[6], "char", t->n_chr, "hub", t->nkind[RK_HUB],
                         "blob_bytes", (Py_ssize_t)t->blob_size, "pointer_bytes", t->pw);
}

static PyMethodDef Model_methods[] = {
    {"layout_stats", (PyCFunction)Model_layout_stats, METH_NOARGS, "layout_stats() -> dict: the walk's record kinds and size"},
    {"encode", (PyCFunction)Model_encode, METH_VARARGS,
     "encode(text, mode=0, word=False): mode 0 ids list, 1 (ids, offsets), 2 ids bytes, 3 (ids bytes, offsets bytes)"},
    {"encode_batch", (PyCFunction)Model_encode_batch, METH_VARARGS, "encode_batch(texts, nthreads=1, mode=0, word=False)"},
    {"encode_split", (PyCFunction)Model_encode_split, METH_VARARGS,
     "encode_split(text, nthreads, parts=4*nthreads, mode=0): one long text cut at whitespace, pieces on threads"},
    {"fast_encode", (PyCFunction)Model_fast_encode, METH_O, "fast_encode(fallback): a C callable for tok.encode"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fstok.runtime._wordpiece.Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WordPiece runtime over validated compiled tables",
    .tp_methods = Model_methods,
    .tp_init = (initproc)Model_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_wordpiece", "fstok WordPiece runtime", -1, NULL};

PyMODINIT_FUNC PyInit__wordpiece(void) {
#ifdef __SSE2__
    for (int b = 0; b < 256; b++) KEYS[b] = _mm_set1_epi8((char)b);
#endif
    if (PyType_Ready(&ModelType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    Py_INCREF(&ModelType);
    if (PyModule_AddObject(m, "Model", (PyObject *)&ModelType) < 0) {
        Py_DECREF(&ModelType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
