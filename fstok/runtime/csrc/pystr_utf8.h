/* The UTF-8 of a batch's str items, taken without the GIL where it is not stored in the str yet.
 *
 * PyUnicode_AsUTF8AndSize encodes a non-ASCII str (and stores the copy in it) with the GIL held: for a
 * batch of multilingual lines that conversion ran on the calling thread before any worker started, a
 * serial part of every call.  A compact str is immutable and its code units (Latin-1, UCS-2 or UCS-4) can
 * be read by any thread while the batch holds a reference to it, so the GIL-holding thread only records
 * where they are (pystr_note) and each worker encodes them into a buffer of its own (pystr_utf8) right
 * before tokenizing.  A str that is ASCII, or already holds its UTF-8, is read in place.  A lone surrogate
 * (no UTF-8 exists) is reported to the caller, which handles it as PyUnicode_AsUTF8AndSize's error. */
#ifndef FSTOK_PYSTR_UTF8_H
#define FSTOK_PYSTR_UTF8_H
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* one text of a batch: utf8 != NULL (len bytes, read in place), or code units to encode (units, ulen, ukind) */
typedef struct {
    const uint8_t *utf8;
    const void *units;
    size_t len;   /* UTF-8 bytes where utf8 is set; else the number of code points */
    int ukind;    /* 1, 2 or 4: bytes per code unit of `units` */
} pystr_src;

/* the weight of a text when a batch is cut into blocks: its UTF-8 bytes, or 2 per code unit not converted yet */
static inline size_t pystr_weight(const pystr_src *d) { return d->utf8 ? d->len : 2 * d->len; }

/* A batch cut into blocks for the worker threads (claimed one at a time from a shared counter): at most 64 texts
 * and about `cap` of weight each.  bstart (count + 1 entries) gets each block's first text and bstart[nb] =
 * count; returns nb.  Used by the BPE and WordPiece batches. */
static inline size_t pystr_blocks(const pystr_src *src, size_t count, size_t cap, size_t *bstart) {
    size_t nb = 0, w = 0;
    for (size_t i = 0; i < count; i++) {
        size_t wi = pystr_weight(&src[i]);
        if (i == 0 || i - bstart[nb - 1] >= 64 || w + wi > cap) {
            bstart[nb++] = i;
            w = 0;
        }
        w += wi;
    }
    bstart[nb] = count;
    return nb;
}

/* with the GIL: where the UTF-8 of str o is, or will come from.  0 ok; -1 with an exception (only from
 * the fallback conversion of a non-compact str); 1: o has no UTF-8 (a lone surrogate; no exception set) */
static inline int pystr_note(PyObject *o, pystr_src *d) {
    d->utf8 = NULL;
    d->units = NULL;
    d->ukind = 0;
    d->len = 0;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(o) < 0) return -1;
#endif
    if (PyUnicode_IS_COMPACT_ASCII(o)) {
        d->utf8 = (const uint8_t *)PyUnicode_DATA(o);
        d->len = (size_t)PyUnicode_GET_LENGTH(o);
        return 0;
    }
#if PY_VERSION_HEX < 0x030F0000 && !defined(Py_LIMITED_API)
    if (PyUnicode_IS_COMPACT(o)) {
        const PyCompactUnicodeObject *c = (const PyCompactUnicodeObject *)o;
        if (c->utf8) { /* (converted before: read the stored copy) */
            d->utf8 = (const uint8_t *)c->utf8;
            d->len = (size_t)c->utf8_length;
            return 0;
        }
        d->units = PyUnicode_DATA(o);
        d->len = (size_t)PyUnicode_GET_LENGTH(o);
        d->ukind = (int)PyUnicode_KIND(o);
        return 0;
    }
#endif
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
        PyErr_Clear();
        return 1;
    }
    d->utf8 = (const uint8_t *)s;
    d->len = (size_t)n;
    return 0;
}

/* Code units -> UTF-8.  Runs of 16 ASCII code units are narrowed with SSE2 (most of the text of Latin-script
 * documents, which are 2-byte strs as soon as they hold one curly quote or dash), the rest a code point at a
 * time (CPython's encoder goes a code point at a time, into a new allocation the size of the worst case).  The
 * bytes are CPython's (tests/test_bpe_utf8.py: every code point in every str kind). */
/* code points [0, n) of a 1-byte str -> dst; returns bytes written */
static inline size_t pystr_from_ucs1(const uint8_t *src, size_t n, uint8_t *dst) {
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
static inline uint8_t *pystr_put(uint8_t *o, uint32_t c) {
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

#define PYSTR_IS_SURROGATE(c) (((c) & 0xFFFFF800u) == 0xD800u)

/* a 2-byte str; returns bytes written, or (size_t)-1 at a lone surrogate */
static inline size_t pystr_from_ucs2(const uint16_t *src, size_t n, uint8_t *dst) {
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
            if (PYSTR_IS_SURROGATE(c)) return (size_t)-1;
            o = pystr_put(o, c);
        }
    }
#endif
    for (; i < n; i++) {
        uint32_t c = src[i];
        if (PYSTR_IS_SURROGATE(c)) return (size_t)-1;
        o = pystr_put(o, c);
    }
    return (size_t)(o - dst);
}

/* a 4-byte str; returns bytes written, or (size_t)-1 at a lone surrogate */
static inline size_t pystr_from_ucs4(const uint32_t *src, size_t n, uint8_t *dst) {
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
            if (PYSTR_IS_SURROGATE(ch)) return (size_t)-1;
            o = pystr_put(o, ch);
        }
    }
#endif
    for (; i < n; i++) {
        uint32_t c = src[i];
        if (PYSTR_IS_SURROGATE(c)) return (size_t)-1;
        o = pystr_put(o, c);
    }
    return (size_t)(o - dst);
}

/* a worker's conversion buffer (grown as needed, freed by pystr_buf_free) */
typedef struct {
    uint8_t *p;
    size_t cap;
} pystr_buf;

static inline void pystr_buf_free(pystr_buf *b) {
    free(b->p);
    b->p = NULL;
    b->cap = 0;
}

/* no GIL: the UTF-8 of d in *s, *n (in place, or encoded into b; NUL-terminated, with zeroed padding as
 * PyUnicode_AsUTF8 leaves none but readers may load a word past the end).  0 ok, -1 out of memory,
 * 1 a lone surrogate (no UTF-8). */
static inline int pystr_utf8(const pystr_src *d, pystr_buf *b, const uint8_t **s, size_t *n) {
    if (d->utf8) {
        *s = d->utf8;
        *n = d->len;
        return 0;
    }
    size_t need = d->len * (size_t)(d->ukind == 1 ? 2 : d->ukind == 2 ? 3 : 4) + 16;
    if (need > b->cap) {
        size_t cap = need < 4096 ? 4096 : need + need / 2;
        uint8_t *p = (uint8_t *)realloc(b->p, cap);
        if (!p) return -1;
        b->p = p;
        b->cap = cap;
    }
    size_t w = d->ukind == 1   ? pystr_from_ucs1((const uint8_t *)d->units, d->len, b->p)
               : d->ukind == 2 ? pystr_from_ucs2((const uint16_t *)d->units, d->len, b->p)
                               : pystr_from_ucs4((const uint32_t *)d->units, d->len, b->p);
    if (w == (size_t)-1) return 1;
    uint8_t *o = b->p + w;
    *n = (size_t)(o - b->p);
    memset(o, 0, 16);
    *s = b->p;
    return 0;
}
#endif
