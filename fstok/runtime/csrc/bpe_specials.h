#ifndef FSTOK_BPE_SPECIALS_H
#define FSTOK_BPE_SPECIALS_H

/* Special and added tokens: a byte trie matched leftmost-longest over the UTF-8 text (the glue builds it from
 * the token strings).  Python-free.  Oracle: tiktoken's special-token regex / HF's added-vocabulary split
 * (fstok/reference/bpe.py). */
#include <stdint.h>
#include <string.h>

#include "bpe.h"

/* --- special / added token matcher: a byte trie, leftmost-longest */
typedef struct {
    uint8_t first[256];
    int n_first;
    uint8_t only_first;
    uint32_t nn;
    uint32_t *fc, *sib; /* first child / next sibling */
    uint8_t *lab;
    uint32_t *id;       /* BPE_NONE: no token ends here */
} bpe_specials;


static size_t specials_find(const bpe_specials *sp, const uint8_t *s, size_t n, size_t pos, size_t *len,
                            uint32_t *id) {
    if (!sp || sp->n_first == 0) return n;
    for (size_t i = pos; i < n; i++) {
        if (sp->n_first == 1) {
            const uint8_t *q = (const uint8_t *)memchr(s + i, sp->only_first, n - i);
            if (!q) return n;
            i = (size_t)(q - s);
        } else if (!sp->first[s[i]]) {
            continue;
        }
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
