/* Growable buffers and UTF-8 decoding shared by the HF SentencePiece-family passes (lib_spm_hf.c: ids;
 * lib_spm_hf_offsets.c: ids with offsets).  Python-free; the text is valid UTF-8 (it comes from a Python str). */
#ifndef FSTOK_SPM_HF_BUFS_H
#define FSTOK_SPM_HF_BUFS_H
#include <stdint.h>
#include <stdlib.h>

#include "spm.h"

/* room for `need` bytes (capacity doubled from 256); 0 ok, -1 out of memory */
static inline int spm_bytes_reserve(spm_bytes *b, size_t need) {
    if (need <= b->cap) return 0;
    size_t c = b->cap ? b->cap : 256;
    while (c < need) c *= 2;
    uint8_t *q = (uint8_t *)realloc(b->p, c);
    if (!q) return -1;
    b->p = q;
    b->cap = c;
    return 0;
}

/* room for `need` ints (capacity doubled from 256); 0 ok, -1 out of memory */
static inline int spm_ints_reserve(spm_ints *v, size_t need) {
    if (need <= v->cap) return 0;
    size_t c = v->cap ? v->cap : 256;
    while (c < need) c *= 2;
    int32_t *q = (int32_t *)realloc(v->p, c * sizeof(int32_t));
    if (!q) return -1;
    v->p = q;
    v->cap = c;
    return 0;
}

/* bytes of the UTF-8 sequence that starts with lead byte b */
static inline size_t u8len(uint8_t b) { return (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[b >> 4]; }

/* the code point of the l-byte sequence at s */
static inline uint32_t u8cp(const uint8_t *s, size_t l) {
    switch (l) {
    case 1: return s[0];
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    default:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
               (s[3] & 0x3F);
    }
}
#endif
