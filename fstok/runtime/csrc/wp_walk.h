/* The WordPiece walk (LinMaxMatch, Song et al. 2021) over the blob: per-word state, emitting the pops
 * (failure tokens), the transition functions of each record kind, and the word begin/feed/end steps the
 * normalization pass (wp_normalize.h) drives.  Python-free; every function is inlined into its caller.
 * Oracles: fstok/reference/wordpiece.py (`TableExecutor` on the same tables, `original_maxmatch` on the
 * vocabulary). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "wp_tables.h"

#ifndef FSTOK_WP_WALK_H
#define FSTOK_WP_WALK_H

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
static __m128i KEYS[256]; /* KEYS[b]: b in every byte; filled by wp_walk_init */
#endif

/* Once per process, before any walk. */
static void wp_walk_init(void) {
#ifdef __SSE2__
    for (int b = 0; b < 256; b++) KEYS[b] = _mm_set1_epi8((char)b);
#endif
}

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

#endif /* FSTOK_WP_WALK_H */
