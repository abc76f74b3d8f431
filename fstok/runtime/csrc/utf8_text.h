#ifndef FSTOK_UTF8_TEXT_H
#define FSTOK_UTF8_TEXT_H

/* The UTF-8 bytes of a Python str for the encoders, without CPython's encoder.
 *
 * An ASCII str is its own UTF-8 (no copy).  A str whose UTF-8 CPython already holds (an earlier
 * PyUnicode_AsUTF8AndSize) gives that.  Any other str is transcoded here from its 1-, 2- or 4-byte code
 * units: runs of 16 ASCII code units are narrowed with SSE2 (most of the text of Latin-script documents,
 * which are 2-byte strs as soon as they hold one curly quote or dash), the rest a code point at a time.
 * CPython's encoder goes a code point at a time and allocates a result the size of the worst case; it took
 * about 6% of a first encode of English documents.  A lone surrogate, which has no UTF-8, falls back to
 * PyUnicode_AsUTF8AndSize, so the error raised is CPython's own (the Python layer repairs it as tiktoken
 * does).  The bytes are the same as CPython's ("surrogatepass" is never used): tests/test_bpe_utf8.py
 * checks every code point and every str kind.
 *
 * The buffer is per thread and kept between calls up to UTF8_KEEP bytes, so repeated calls do not fault
 * in new pages; a text needing more gets its own allocation, freed on release. */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define UTF8_KEEP (4u << 20)

typedef struct {
    const uint8_t *s;
    Py_ssize_t n;
    uint8_t *own; /* an allocation of this call only (freed by utf8_text_release), or NULL */
} utf8_text;

static _Thread_local uint8_t *utf8_tl_buf = NULL;
static _Thread_local size_t utf8_tl_cap = 0;

/* code points [0, n) of a 1-byte str -> dst; returns bytes written */
static size_t utf8_from_ucs1(const uint8_t *src, size_t n, uint8_t *dst) {
    uint8_t *o = dst;
    size_t i = 0;
#if defined(__SSE2__)
    for (; i + 16 <= n; i += 16) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
        if (!_mm_movemask_epi8(a)) {
            _mm_storeu_si128((__m128i *)o, a);
            o += 16;
            continue;
        }
        for (size_t k = i; k < i + 16; k++) {
            uint8_t c = src[k];
            if (c < 0x80) *o++ = c;
            else {
                o[0] = (uint8_t)(0xC0 | (c >> 6));
                o[1] = (uint8_t)(0x80 | (c & 0x3F));
                o += 2;
            }
        }
    }
#endif
    for (; i < n; i++) {
        uint8_t c = src[i];
        if (c < 0x80) *o++ = c;
        else {
            o[0] = (uint8_t)(0xC0 | (c >> 6));
            o[1] = (uint8_t)(0x80 | (c & 0x3F));
            o += 2;
        }
    }
    return (size_t)(o - dst);
}

/* one code point c (not a surrogate) -> o; returns the new end */
static inline uint8_t *utf8_put(uint8_t *o, uint32_t c) {
    if (c < 0x80) {
        *o = (uint8_t)c;
        return o + 1;
    }
    if (c < 0x800) {
        o[0] = (uint8_t)(0xC0 | (c >> 6));
        o[1] = (uint8_t)(0x80 | (c & 0x3F));
        return o + 2;
    }
    if (c < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (c >> 12));
        o[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (c & 0x3F));
        return o + 3;
    }
    o[0] = (uint8_t)(0xF0 | (c >> 18));
    o[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (c & 0x3F));
    return o + 4;
}

#define UTF8_IS_SURROGATE(c) (((c) & 0xFFFFF800u) == 0xD800u)

/* a 2-byte str; returns bytes written, or (size_t)-1 at a lone surrogate */
static size_t utf8_from_ucs2(const uint16_t *src, size_t n, uint8_t *dst) {
    uint8_t *o = dst;
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i hi = _mm_set1_epi16((short)0xFF80), zero = _mm_setzero_si128();
    while (i + 16 <= n) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i)), b = _mm_loadu_si128((const __m128i *)(src + i + 8));
        __m128i t = _mm_and_si128(_mm_or_si128(a, b), hi);
        if (_mm_movemask_epi8(_mm_cmpeq_epi16(t, zero)) == 0xFFFF) {
            _mm_storeu_si128((__m128i *)o, _mm_packus_epi16(a, b));
            o += 16;
            i += 16;
            continue;
        }
        for (size_t e = i + 16; i < e; i++) {
            uint32_t c = src[i];
            if (UTF8_IS_SURROGATE(c)) return (size_t)-1;
            o = utf8_put(o, c);
        }
    }
#endif
    for (; i < n; i++) {
        uint32_t c = src[i];
        if (UTF8_IS_SURROGATE(c)) return (size_t)-1;
        o = utf8_put(o, c);
    }
    return (size_t)(o - dst);
}

/* a 4-byte str; returns bytes written, or (size_t)-1 at a lone surrogate */
static size_t utf8_from_ucs4(const uint32_t *src, size_t n, uint8_t *dst) {
    uint8_t *o = dst;
    size_t i = 0;
#if defined(__SSE2__)
    const __m128i hi = _mm_set1_epi32((int)0xFFFFFF80u), zero = _mm_setzero_si128();
    while (i + 16 <= n) {
        const __m128i *p = (const __m128i *)(src + i);
        __m128i a = _mm_loadu_si128(p), b = _mm_loadu_si128(p + 1), c = _mm_loadu_si128(p + 2),
                d = _mm_loadu_si128(p + 3);
        __m128i t = _mm_and_si128(_mm_or_si128(_mm_or_si128(a, b), _mm_or_si128(c, d)), hi);
        if (_mm_movemask_epi8(_mm_cmpeq_epi32(t, zero)) == 0xFFFF) {
            __m128i ab = _mm_packs_epi32(a, b), cd = _mm_packs_epi32(c, d); /* all < 0x80: no saturation */
            _mm_storeu_si128((__m128i *)o, _mm_packus_epi16(ab, cd));
            o += 16;
            i += 16;
            continue;
        }
        for (size_t e = i + 16; i < e; i++) {
            uint32_t ch = src[i];
            if (UTF8_IS_SURROGATE(ch)) return (size_t)-1;
            o = utf8_put(o, ch);
        }
    }
#endif
    for (; i < n; i++) {
        uint32_t c = src[i];
        if (UTF8_IS_SURROGATE(c)) return (size_t)-1;
        o = utf8_put(o, c);
    }
    return (size_t)(o - dst);
}

/* Fill t with the UTF-8 of str u.  Returns 0, or -1 with CPython's exception set (a lone surrogate, or no
 * memory).  Release with utf8_text_release (also after an error).  Needs the GIL. */
static int utf8_text_get(PyObject *u, utf8_text *t) {
    t->own = NULL;
    if (PyUnicode_IS_ASCII(u)) {
        t->s = (const uint8_t *)PyUnicode_DATA(u);
        t->n = PyUnicode_GET_LENGTH(u);
        return 0;
    }
#if PY_VERSION_HEX < 0x030E0000 && !defined(Py_GIL_DISABLED) && !defined(Py_LIMITED_API)
    if (PyUnicode_IS_COMPACT(u) && ((PyCompactUnicodeObject *)u)->utf8) { /* CPython's own, from an earlier call */
        t->s = (const uint8_t *)((PyCompactUnicodeObject *)u)->utf8;
        t->n = ((PyCompactUnicodeObject *)u)->utf8_length;
        return 0;
    }
#endif
    const int kind = PyUnicode_KIND(u);
    const size_t n = (size_t)PyUnicode_GET_LENGTH(u);
    const size_t need = n * (kind == PyUnicode_1BYTE_KIND ? 2 : kind == PyUnicode_2BYTE_KIND ? 3 : 4) + 1;
    uint8_t *buf;
    if (need <= UTF8_KEEP) {
        if (utf8_tl_cap < need) {
            size_t cap = need < 65536 ? 65536 : need;
            uint8_t *nb = (uint8_t *)realloc(utf8_tl_buf, cap);
            if (!nb) {
                PyErr_NoMemory();
                return -1;
            }
            utf8_tl_buf = nb;
            utf8_tl_cap = cap;
        }
        buf = utf8_tl_buf;
    } else {
        buf = t->own = (uint8_t *)malloc(need);
        if (!buf) {
            PyErr_NoMemory();
            return -1;
        }
    }
    const void *d = PyUnicode_DATA(u);
    size_t len = kind == PyUnicode_1BYTE_KIND   ? utf8_from_ucs1((const uint8_t *)d, n, buf)
                 : kind == PyUnicode_2BYTE_KIND ? utf8_from_ucs2((const uint16_t *)d, n, buf)
                                                : utf8_from_ucs4((const uint32_t *)d, n, buf);
    if (len == (size_t)-1) { /* a lone surrogate: CPython raises its UnicodeEncodeError */
        free(t->own);
        t->own = NULL;
        Py_ssize_t m;
        const char *s = PyUnicode_AsUTF8AndSize(u, &m);
        if (!s) return -1;
        t->s = (const uint8_t *)s; /* (not reached for a str holding a lone surrogate) */
        t->n = m;
        return 0;
    }
    buf[len] = 0;
    t->s = buf;
    t->n = (Py_ssize_t)len;
    return 0;
}

static void utf8_text_release(utf8_text *t) {
    free(t->own);
    t->own = NULL;
}

#endif /* FSTOK_UTF8_TEXT_H */
