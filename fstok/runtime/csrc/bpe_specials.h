#ifndef FSTOK_BPE_SPECIALS_H
#define FSTOK_BPE_SPECIALS_H

/* Special and added tokens: a byte trie matched leftmost-longest over the UTF-8 text (the glue builds it from
 * the token strings).  Python-free.  Oracle: tiktoken's special-token regex / HF's added-vocabulary split
 * (fstok/reference/bpe.py). */
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "bpe.h"

/* --- special / added token matcher: a byte trie, leftmost-longest */
typedef struct {
    uint8_t first[256];
    int n_first;
    uint8_t only_first;
    uint8_t few[4];     /* the first bytes when there are at most 4 (repeated to fill): a vector compare finds them */
    uint32_t nn;
    uint32_t *fc, *sib; /* first child / next sibling */
    uint8_t *lab;
    uint32_t *id;       /* BPE_NONE: no token ends here */
} bpe_specials;


/* the first position >= i of a byte some token starts with, or n */
static inline size_t specials_next_first(const bpe_specials *sp, const uint8_t *s, size_t n, size_t i) {
    if (sp->n_first == 1) {
        const uint8_t *q = i < n ? (const uint8_t *)memchr(s + i, sp->only_first, n - i) : NULL;
        return q ? (size_t)(q - s) : n;
    }
#if defined(__SSE2__)
    if (sp->n_first <= 4) {
        const __m128i b0 = _mm_set1_epi8((char)sp->few[0]), b1 = _mm_set1_epi8((char)sp->few[1]),
                      b2 = _mm_set1_epi8((char)sp->few[2]), b3 = _mm_set1_epi8((char)sp->few[3]);
        for (; i + 16 <= n; i += 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(s + i));
            __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, b0), _mm_cmpeq_epi8(x, b1)),
                                     _mm_or_si128(_mm_cmpeq_epi8(x, b2), _mm_cmpeq_epi8(x, b3)));
            unsigned mask = (unsigned)_mm_movemask_epi8(m);
            if (mask) return i + (size_t)__builtin_ctz(mask);
        }
    }
#endif
    for (; i < n; i++)
        if (sp->first[s[i]]) return i;
    return n;
}

static size_t specials_find(const bpe_specials *sp, const uint8_t *s, size_t n, size_t pos, size_t *len,
                            uint32_t *id) {
    if (!sp || sp->n_first == 0) return n;
    for (size_t i = specials_next_first(sp, s, n, pos); i < n; i = specials_next_first(sp, s, n, i + 1)) {
        uint32_t node = 0, best = BPE_NONE;
        size_t blen = 0;
        for (size_t j = i; j < n; j++) {
            uint32_t ch = sp->fc[node];
            while (ch != BPE_NONE && sp->lab[ch] != s[j]) ch = sp->sib[ch];
            if (ch == BPE_NONE) break;
            node = ch;
            if (sp->id[node] != BPE_NONE) best = sp->id[node], blen = j + 1 - i;
        }
        if (best != BPE_NONE) {
            *len = blen;
            *id = best;
            return i;
        }
    }
    return n;
}

#endif /* FSTOK_BPE_SPECIALS_H */
