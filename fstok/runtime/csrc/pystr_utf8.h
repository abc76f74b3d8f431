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

/* one text of a batch: utf8 != NULL (len bytes, read in place), or code units to encode (units, ulen, ukind) */
typedef struct {
    const uint8_t *utf8;
    const void *units;
    size_t len;   /* UTF-8 bytes where utf8 is set; else the number of code points */
    int ukind;    /* 1, 2 or 4: bytes per code unit of `units` */
} pystr_src;

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
    uint8_t *o = b->p;
    size_t k = d->len;
    if (d->ukind == 1) {
        const uint8_t *u = (const uint8_t *)d->units;
        for (size_t i = 0; i < k; i++) {
            uint8_t c = u[i];
            if (c < 0x80) *o++ = c;
            else {
                *o++ = (uint8_t)(0xC0 | (c >> 6));
                *o++ = (uint8_t)(0x80 | (c & 0x3F));
            }
        }
    } else if (d->ukind == 2) {
        const uint16_t *u = (const uint16_t *)d->units;
        for (size_t i = 0; i < k; i++) {
            uint32_t c = u[i];
            if (c < 0x80) *o++ = (uint8_t)c;
            else if (c < 0x800) {
                *o++ = (uint8_t)(0xC0 | (c >> 6));
                *o++ = (uint8_t)(0x80 | (c & 0x3F));
            } else {
                if (c >= 0xD800 && c <= 0xDFFF) return 1;
                *o++ = (uint8_t)(0xE0 | (c >> 12));
                *o++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
                *o++ = (uint8_t)(0x80 | (c & 0x3F));
            }
        }
    } else {
        const uint32_t *u = (const uint32_t *)d->units;
        for (size_t i = 0; i < k; i++) {
            uint32_t c = u[i];
            if (c < 0x80) *o++ = (uint8_t)c;
            else if (c < 0x800) {
                *o++ = (uint8_t)(0xC0 | (c >> 6));
                *o++ = (uint8_t)(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                if (c >= 0xD800 && c <= 0xDFFF) return 1;
                *o++ = (uint8_t)(0xE0 | (c >> 12));
                *o++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
                *o++ = (uint8_t)(0x80 | (c & 0x3F));
            } else {
                *o++ = (uint8_t)(0xF0 | (c >> 18));
                *o++ = (uint8_t)(0x80 | ((c >> 12) & 0x3F));
                *o++ = (uint8_t)(0x80 | ((c >> 6) & 0x3F));
                *o++ = (uint8_t)(0x80 | (c & 0x3F));
            }
        }
    }
    *n = (size_t)(o - b->p);
    memset(o, 0, 16);
    *s = b->p;
    return 0;
}
#endif
