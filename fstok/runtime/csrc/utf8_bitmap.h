/* Whether valid UTF-8 holds a code point of a set given as a bitmap of 0x110000 bits (bit cp of byte cp >> 3),
 * ASCII skipped 16 bytes at a time.  Python-free.  Used by Model.encode to find a text that needs the normal-form
 * check (the set: fstok.pipeline.unicode.touched) in the same call that encodes it; oracle: fstok.runtime._norm
 * any_in over the str. */
#ifndef FSTOK_UTF8_BITMAP_H
#define FSTOK_UTF8_BITMAP_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* s[0..n) valid UTF-8 (from a str); ASCII code points are taken as outside the set (callers' sets hold none) */
static int utf8_any_in_bitmap(const uint8_t *s, size_t n, const uint8_t *bm) {
    size_t i = 0;
    while (i < n) {
#if defined(__SSE2__)
        if (i + 16 <= n) {
            unsigned mask = (unsigned)_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(s + i)));
            if (!mask) {
                i += 16;
                continue;
            }
            i += (size_t)__builtin_ctz(mask); /* the first byte >= 0x80 of the block */
        }
#endif
        const uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        size_t len;
        if (c < 0xE0) {
            len = 2;
            cp = (uint32_t)(c & 0x1F);
        } else if (c < 0xF0) {
            len = 3;
            cp = (uint32_t)(c & 0x0F);
        } else {
            len = 4;
            cp = (uint32_t)(c & 0x07);
        }
        if (i + len > n) return 0; /* (not valid UTF-8: cannot come from a str) */
        for (size_t k = 1; k < len; k++) cp = (cp << 6) | (uint32_t)(s[i + k] & 0x3F);
        if (cp < 0x110000u && ((bm[cp >> 3] >> (cp & 7)) & 1)) return 1;
        i += len;
    }
    return 0;
}

#endif /* FSTOK_UTF8_BITMAP_H */
