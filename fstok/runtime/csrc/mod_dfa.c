/* Python binding of the regex DFA spanner (fstok.runtime._dfa).  The core is lib_dfa.c / dfa.h. */
/* fstok-lib: dfa */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dfa.h"

/* ------------------------------------------------------------------------------ DFA object */
typedef struct {
    PyObject_HEAD
    fstok_dfa d;
    Py_buffer trans, classes, accept;
    int have_trans, have_classes, have_accept;
    int valid; /* set only once the tables passed fstok_dfa_check */
} DFAObject;

static void DFA_dealloc(DFAObject *self) {
    if (self->have_trans) PyBuffer_Release(&self->trans);
    if (self->have_classes) PyBuffer_Release(&self->classes);
    if (self->have_accept) PyBuffer_Release(&self->accept);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int DFA_init(DFAObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"trans", "classes", "accept", "n_states", "shift", "start", "eoi", "n_boundary", NULL};
    PyObject *t, *c, *a;
    unsigned int n_states, shift, start, eoi, n_boundary;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOIIIII", kwlist, &t, &c, &a, &n_states, &shift, &start, &eoi,
                                     &n_boundary))
        return -1;
    if (self->have_trans || self->have_classes || self->have_accept) {
        PyErr_SetString(PyExc_RuntimeError, "DFA already initialized");
        return -1;
    }
    if (PyObject_GetBuffer(t, &self->trans, PyBUF_C_CONTIGUOUS) < 0) return -1;
    self->have_trans = 1;
    if (PyObject_GetBuffer(c, &self->classes, PyBUF_C_CONTIGUOUS) < 0) return -1;
    self->have_classes = 1;
    if (PyObject_GetBuffer(a, &self->accept, PyBUF_C_CONTIGUOUS) < 0) return -1;
    self->have_accept = 1;
    if (shift > 9 || n_states < 2) {
        PyErr_Format(PyExc_ValueError, "bad DFA shape: %u states, shift %u", n_states, shift);
        return -1;
    }
    if ((uint64_t)self->trans.len != ((uint64_t)n_states << shift) * 4 || ((uintptr_t)self->trans.buf & 3)) {
        PyErr_Format(PyExc_ValueError, "DFA transition table has %zd bytes, expected %llu (aligned uint32)",
                     self->trans.len, (unsigned long long)(((uint64_t)n_states << shift) * 4));
        return -1;
    }
    if (self->classes.len != 256) {
        PyErr_Format(PyExc_ValueError, "DFA byte class table has %zd bytes, expected 256", self->classes.len);
        return -1;
    }
    if ((uint64_t)self->accept.len != n_states) {
        PyErr_Format(PyExc_ValueError, "DFA accept table has %zd bytes, expected %u", self->accept.len, n_states);
        return -1;
    }
    if (n_boundary >= n_states - 1) {
        PyErr_Format(PyExc_ValueError, "bad boundary state count %u", n_boundary);
        return -1;
    }
    fstok_dfa_init(&self->d, (const uint32_t *)self->trans.buf, (const uint8_t *)self->classes.buf,
                   (const uint8_t *)self->accept.buf, n_states, shift, start, eoi, n_boundary);
    char err[200];
    if (fstok_dfa_check(&self->d, err, sizeof err) != 0) {
        PyErr_Format(PyExc_ValueError, "invalid DFA tables: %s", err);
        return -1;
    }
    self->valid = 1;
    return 0;
}

/* ------------------------------------------------------------------------------- text input */
typedef struct {
    const uint8_t *s;
    Py_ssize_t n;
    int is_str, ascii;
    Py_buffer view;
    int have_view;
} TextIn;

static Py_ssize_t first_surrogate(PyObject *u) {
    Py_ssize_t len = PyUnicode_GET_LENGTH(u);
    int kind = PyUnicode_KIND(u);
    const void *data = PyUnicode_DATA(u);
    for (Py_ssize_t i = 0; i < len; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, data, i);
        if (ch >= 0xD800 && ch <= 0xDFFF) return i;
    }
    return -1;
}

static int text_in(PyObject *obj, TextIn *ti, int allow_bytes) {
    memset(ti, 0, sizeof *ti);
    if (PyUnicode_Check(obj)) {
        ti->is_str = 1;
        ti->ascii = PyUnicode_IS_ASCII(obj);
        ti->s = (const uint8_t *)PyUnicode_AsUTF8AndSize(obj, &ti->n);
        if (!ti->s) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                PyErr_Clear();
                Py_ssize_t at = first_surrogate(obj);
                char msg[160];
                snprintf(msg, sizeof msg,
                         "text contains a lone surrogate (U+%04X at index %lld); it cannot be encoded as UTF-8",
                         at >= 0 ? (unsigned)PyUnicode_READ_CHAR(obj, at) : 0u, (long long)at);
                PyErr_SetString(PyExc_ValueError, msg);
            }
            return -1;
        }
        return 0;
    }
    if (allow_bytes && PyObject_CheckBuffer(obj)) {
        if (PyObject_GetBuffer(obj, &ti->view, PyBUF_C_CONTIGUOUS) < 0) return -1;
        ti->have_view = 1;
        ti->s = (const uint8_t *)ti->view.buf;
        ti->n = ti->view.len;
        return 0;
    }
    PyErr_Format(PyExc_TypeError, "text must be a str%s, got %s", allow_bytes ? " or bytes-like UTF-8" : "",
                 Py_TYPE(obj)->tp_name);
    return -1;
}

static void text_release(TextIn *ti) {
    if (ti->have_view) PyBuffer_Release(&ti->view);
}

/* ---------------------------------------------------------------------------- Spanner object */
#define MODE_FIND 0
#define MODE_SPLIT 1

typedef struct {
    PyObject_HEAD
    fstok_dfa *levels;
    int n_levels;
    int mode;
    PyObject *refs; /* tuple of DFA objects kept alive */
} SpannerObject;

static PyTypeObject DFAType;
static PyTypeObject SpannerType;

static void Spanner_dealloc(SpannerObject *self) {
    free(self->levels);
    Py_XDECREF(self->refs);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Spanner_init(SpannerObject *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"levels", "mode", NULL};
    PyObject *levels;
    int mode;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "Oi", kwlist, &levels, &mode)) return -1;
    if (self->refs || self->levels) {
        PyErr_SetString(PyExc_RuntimeError, "Spanner already initialized");
        return -1;
    }
    PyObject *tup = PySequence_Tuple(levels);
    if (!tup) return -1;
    Py_ssize_t k = PyTuple_GET_SIZE(tup);
    if (k < 1 || k > 16 || (mode == MODE_FIND && k != 1) || (mode != MODE_FIND && mode != MODE_SPLIT)) {
        Py_DECREF(tup);
        PyErr_SetString(PyExc_ValueError, "Spanner needs mode 0 (find) with one DFA or mode 1 (split) with 1..16");
        return -1;
    }
    self->levels = (fstok_dfa *)calloc((size_t)k, sizeof(fstok_dfa));
    if (!self->levels) {
        Py_DECREF(tup);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *o = PyTuple_GET_ITEM(tup, i);
        if (!PyObject_TypeCheck(o, &DFAType) || !((DFAObject *)o)->valid) {
            PyErr_SetString(PyExc_TypeError, "Spanner levels must be initialized _dfa.DFA objects");
            goto bad;
        }
        self->levels[i] = ((DFAObject *)o)->d;
    }
    self->n_levels = (int)k;
    self->mode = mode;
    self->refs = tup;
    return 0;
bad:
    Py_DECREF(tup);
    free(self->levels);
    self->levels = NULL;
    return -1;
}

static int spanner_ready(SpannerObject *self) {
    if (!self->levels || !self->refs) {
        PyErr_SetString(PyExc_RuntimeError, "Spanner is not initialized");
        return 0;
    }
    return 1;
}

/* Compute byte offsets into a malloc'd array.  find mode: pairs (start, end); split mode: ends.
 * Returns count of size_t values written, or -1 (no memory).  Runs without the GIL. */
static Py_ssize_t run_spans(SpannerObject *self, const uint8_t *s, size_t n, size_t **out) {
    if (self->mode == MODE_SPLIT) {
        size_t *ends = NULL, len = 0, cap = 0;
        if (fstok_dfa_split_isolated(self->levels, self->n_levels, s, n, &ends, &len, &cap) != 0) {
            free(ends);
            return -1;
        }
        *out = ends;
        return (Py_ssize_t)len;
    }
    size_t cap = n / 4 + 16, len = 0, pos = 0;
    size_t *buf = (size_t *)malloc(cap * 2 * sizeof(size_t));
    if (!buf) return -1;
    while (1) {
        size_t got = fstok_dfa_find_all(&self->levels[0], s, n, &pos, buf + 2 * len, cap - len);
        len += got;
        if (pos >= n) break;
        if (len == cap) {
            size_t nc = cap * 2;
            size_t *nb = (size_t *)realloc(buf, nc * 2 * sizeof(size_t));
            if (!nb) {
                free(buf);
                return -1;
            }
            buf = nb;
            cap = nc;
        }
    }
    *out = buf;
    return (Py_ssize_t)(2 * len);
}

/* The same pairs from fstok_dfa_find_ends with a window of `wcap` ends (tests compare the two bulk
 * functions; small windows exercise the resume logic). */
static Py_ssize_t run_spans_ends(const fstok_dfa *d, const uint8_t *s, size_t n, size_t wcap, size_t **out) {
    size_t cap = n + 16, len = 0, pos = 0; /* pieces: at most one per byte */
    size_t *buf = (size_t *)malloc(cap * 2 * sizeof(size_t));
    size_t *ends = (size_t *)malloc(wcap * sizeof(size_t));
    if (!buf || !ends) goto oom;
    while (pos < n) {
        size_t from = pos, got = fstok_dfa_find_ends(d, s, n, &pos, ends, wcap);
        if (len + got + 1 > cap) { /* cannot happen: a piece has at least one byte */
            goto oom;
        }
        for (size_t j = 0; j < got; j++) {
            buf[2 * len] = j ? ends[j - 1] : from;
            buf[2 * len + 1] = ends[j];
            len++;
        }
        if (got == 0) {
            size_t b, e = fstok_dfa_next_span(d, s, n, pos, &b);
            if (e == FSTOK_DFA_NOMATCH) break;
            buf[2 * len] = b;
            buf[2 * len + 1] = e;
            len++;
            pos = e;
        }
    }
    free(ends);
    *out = buf;
    return (Py_ssize_t)(2 * len);
oom:
    free(buf);
    free(ends);
    return -1;
}

static Py_ssize_t spans_nogil(SpannerObject *self, const uint8_t *s, size_t n, size_t **out) {
    Py_ssize_t r;
    if (n > 4096) {
        Py_BEGIN_ALLOW_THREADS
        r = run_spans(self, s, n, out);
        Py_END_ALLOW_THREADS
    } else {
        r = run_spans(self, s, n, out);
    }
    if (r < 0) PyErr_NoMemory();
    return r;
}

/* convert increasing byte offsets to char offsets in place */
static void to_char_offsets(const uint8_t *s, size_t *v, Py_ssize_t k) {
    size_t bpos = 0, cpos = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        size_t target = v[i];
        if (target < bpos) { /* not monotonic (cannot happen); recount from 0 */
            bpos = 0;
            cpos = 0;
        }
        while (bpos < target) {
            cpos += (s[bpos] & 0xC0) != 0x80;
            bpos++;
        }
        v[i] = cpos;
    }
}

/* list of (start, end) tuples; consecutive pieces share the int object at their common offset */
static PyObject *build_span_list(const size_t *v, Py_ssize_t k, int pairs) {
    Py_ssize_t n = pairs ? k / 2 : k;
    PyObject *list = PyList_New(n);
    if (!list) return NULL;
    PyObject *prev_end = NULL; /* borrowed from the previous tuple */
    size_t prev_val = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        size_t a = pairs ? v[2 * i] : (i ? v[i - 1] : 0);
        size_t b = pairs ? v[2 * i + 1] : v[i];
        PyObject *t = PyTuple_New(2);
        if (!t) goto fail;
        PyObject *pa;
        if (prev_end && prev_val == a) {
            Py_INCREF(prev_end);
            pa = prev_end;
        } else {
            pa = PyLong_FromSize_t(a);
        }
        PyObject *pb = PyLong_FromSize_t(b);
        if (!pa || !pb) {
            Py_XDECREF(pa);
            Py_XDECREF(pb);
            Py_DECREF(t);
            goto fail;
        }
        PyTuple_SET_ITEM(t, 0, pa);
        PyTuple_SET_ITEM(t, 1, pb);
        PyList_SET_ITEM(list, i, t);
        prev_end = pb;
        prev_val = b;
    }
    return list;
fail:
    Py_DECREF(list);
    return NULL;
}

static PyObject *Spanner_spans(SpannerObject *self, PyObject *text) {
    if (!spanner_ready(self)) return NULL;
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) return NULL;
    size_t *v = NULL;
    Py_ssize_t k = spans_nogil(self, ti.s, (size_t)ti.n, &v);
    if (k < 0) {
        text_release(&ti);
        return NULL;
    }
    if (ti.is_str && !ti.ascii) to_char_offsets(ti.s, v, k);
    text_release(&ti);
    PyObject *list = build_span_list(v, k, self->mode == MODE_FIND);
    free(v);
    return list;
}

/* bytes of native uint64 values from k offsets; frees v */
static PyObject *offsets_to_bytes(size_t *v, Py_ssize_t k) {
    PyObject *res = PyBytes_FromStringAndSize(NULL, k * (Py_ssize_t)sizeof(uint64_t));
    if (res) {
        uint64_t *dst = (uint64_t *)PyBytes_AS_STRING(res);
        for (Py_ssize_t i = 0; i < k; i++) dst[i] = (uint64_t)v[i];
    }
    free(v);
    return res;
}

/* byte_spans(text) -> bytes of native uint64 values: find mode (start, end) pairs, split mode ends */
static PyObject *Spanner_byte_spans(SpannerObject *self, PyObject *text) {
    if (!spanner_ready(self)) return NULL;
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) return NULL;
    size_t *v = NULL;
    Py_ssize_t k = spans_nogil(self, ti.s, (size_t)ti.n, &v);
    text_release(&ti);
    if (k < 0) return NULL;
    return offsets_to_bytes(v, k);
}

/* count(text) -> number of pieces; spanning cost only (benchmarks) */
static PyObject *Spanner_count(SpannerObject *self, PyObject *text) {
    if (!spanner_ready(self)) return NULL;
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) return NULL;
    Py_ssize_t count = 0;
    const uint8_t *s = ti.s;
    size_t n = (size_t)ti.n;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    if (self->mode == MODE_FIND) {
        size_t p = 0, buf[512];
        while (p < n) {
            size_t got = fstok_dfa_find_ends(&self->levels[0], s, n, &p, buf, 512);
            count += (Py_ssize_t)got;
            if (got == 0) {
                size_t b, e = fstok_dfa_next_span(&self->levels[0], s, n, p, &b);
                if (e == FSTOK_DFA_NOMATCH) break;
                count++;
                p = e;
            }
        }
    } else {
        size_t *ends = NULL, len = 0, cap = 0;
        if (fstok_dfa_split_isolated(self->levels, self->n_levels, s, n, &ends, &len, &cap) != 0) failed = 1;
        count = (Py_ssize_t)len;
        free(ends);
    }
    Py_END_ALLOW_THREADS
    text_release(&ti);
    if (failed) return PyErr_NoMemory();
    return PyLong_FromSsize_t(count);
}

/* match(text, pos) -> end byte offset of the anchored match at byte `pos` (level 0), or -1 */
static PyObject *Spanner_match(SpannerObject *self, PyObject *args) {
    if (!spanner_ready(self)) return NULL;
    PyObject *text;
    Py_ssize_t pos;
    if (!PyArg_ParseTuple(args, "On", &text, &pos)) return NULL;
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) return NULL;
    if (pos < 0 || pos > ti.n) {
        text_release(&ti);
        PyErr_Format(PyExc_ValueError, "byte position %zd out of range [0, %zd]", pos, ti.n);
        return NULL;
    }
    size_t e = fstok_dfa_match(&self->levels[0], ti.s, (size_t)ti.n, (size_t)pos);
    text_release(&ti);
    return PyLong_FromSsize_t(e == FSTOK_DFA_NOMATCH ? -1 : (Py_ssize_t)e);
}

/* _byte_spans_ends(text, window) -> like byte_spans (find mode), computed with fstok_dfa_find_ends */
static PyObject *Spanner_byte_spans_ends(SpannerObject *self, PyObject *args) {
    if (!spanner_ready(self)) return NULL;
    PyObject *text;
    Py_ssize_t wcap;
    if (!PyArg_ParseTuple(args, "On", &text, &wcap)) return NULL;
    if (self->mode != MODE_FIND) {
        PyErr_SetString(PyExc_ValueError, "_byte_spans_ends needs a find-mode spanner");
        return NULL;
    }
    if (wcap < 1 || wcap > (1 << 20)) {
        PyErr_Format(PyExc_ValueError, "window %zd out of range [1, 2^20]", wcap);
        return NULL;
    }
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) return NULL;
    size_t *v = NULL;
    Py_ssize_t k = run_spans_ends(&self->levels[0], ti.s, (size_t)ti.n, (size_t)wcap, &v);
    text_release(&ti);
    if (k < 0) return PyErr_NoMemory();
    return offsets_to_bytes(v, k);
}


/* ------------------------------------------------------------- normalizer Replace, piece cutter */
/* A growable byte buffer (the Replace output). */
typedef struct {
    uint8_t *p;
    size_t len, cap;
} bytebuf;

static int bb_put(bytebuf *b, const uint8_t *src, size_t k) {
    if (b->cap - b->len < k) {
        size_t nc = b->cap * 2 > b->len + k ? b->cap * 2 : b->len + k + 64;
        uint8_t *np_ = (uint8_t *)realloc(b->p, nc);
        if (!np_) return -1;
        b->p = np_;
        b->cap = nc;
    }
    memcpy(b->p + b->len, src, k);
    b->len += k;
    return 0;
}

/* replace(data, content) -> bytes: every match of the find-mode DFA in the UTF-8 `data` replaced by
 * `content` (HF `Replace` with a Regex: leftmost-first, non-overlapping, as regex finditer). */
static PyObject *Spanner_replace(SpannerObject *self, PyObject *args) {
    if (!spanner_ready(self)) return NULL;
    PyObject *text;
    Py_buffer content;
    if (!PyArg_ParseTuple(args, "Oy*", &text, &content)) return NULL;
    if (self->mode != MODE_FIND) {
        PyBuffer_Release(&content);
        PyErr_SetString(PyExc_ValueError, "replace needs a find-mode spanner");
        return NULL;
    }
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) {
        PyBuffer_Release(&content);
        return NULL;
    }
    const uint8_t *s = ti.s, *c = (const uint8_t *)content.buf;
    size_t n = (size_t)ti.n, clen = (size_t)content.len, pos = 0, last = 0;
    bytebuf out = {NULL, 0, 0};
    int oom = 0, any = 0;
    size_t buf[2 * 256];
    Py_BEGIN_ALLOW_THREADS
    while (pos < n && !oom) {
        size_t got = fstok_dfa_find_all(&self->levels[0], s, n, &pos, buf, 256);
        if (got && !any) {
            any = 1;
            out.cap = n + 64;
            out.p = (uint8_t *)malloc(out.cap);
            if (!out.p) oom = 1;
        }
        for (size_t j = 0; j < got && !oom; j++) {
            oom = bb_put(&out, s + last, buf[2 * j] - last) || bb_put(&out, c, clen);
            last = buf[2 * j + 1];
        }
    }
    if (any && !oom) oom = bb_put(&out, s + last, n - last);
    Py_END_ALLOW_THREADS
    PyObject *res = NULL;
    if (oom)
        PyErr_NoMemory();
    else if (!any) /* no match: the input itself (bytes), or its UTF-8 (str) */
        res = PyBytes_FromStringAndSize((const char *)s, (Py_ssize_t)n);
    else
        res = PyBytes_FromStringAndSize((const char *)out.p, (Py_ssize_t)out.len);
    free(out.p);
    text_release(&ti);
    PyBuffer_Release(&content);
    return res;
}

/* uint32 (start, end, 0xFFFFFFFF) triples, grown as needed */
typedef struct {
    uint32_t *p;
    size_t len, cap; /* in triples */
} tribuf;

static int tri_push(tribuf *t, size_t a, size_t b) {
    if (t->len == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 256;
        uint32_t *np_ = (uint32_t *)realloc(t->p, nc * 3 * sizeof(uint32_t));
        if (!np_) return -1;
        t->p = np_;
        t->cap = nc;
    }
    uint32_t *q = t->p + 3 * t->len++;
    q[0] = (uint32_t)a;
    q[1] = (uint32_t)b;
    q[2] = 0xFFFFFFFFu;
    return 0;
}

/* the pieces of s[a:b) split by `levels` (each piece a text of its own), appended as triples */
static int cut_split(const fstok_dfa *levels, int n_levels, const uint8_t *s, size_t a, size_t b, size_t **ends,
                     size_t *elen, size_t *ecap, tribuf *out) {
    if (a >= b) return 0;
    if (n_levels == 0) return tri_push(out, a, b);
    *elen = 0;
    if (fstok_dfa_split_isolated(levels, n_levels, s + a, b - a, ends, elen, ecap)) return -1;
    size_t prev = 0;
    for (size_t j = 0; j < *elen; j++) {
        if (tri_push(out, a + prev, a + (*ends)[j])) return -1;
        prev = (*ends)[j];
    }
    return 0;
}

/* cut(data, find, split, skip) -> bytes of uint32 (start, end, 0xFFFFFFFF) triples: the pieces of the UTF-8
 * `data` (fstok.pipeline.native.Cutter).  `find` (a find-mode Spanner or None): only its matches are kept
 * (HF Split(Removed, invert=true)); `split` (a split-mode Spanner or None): its levels from `skip` on cut each
 * kept piece (or the whole text without `find`) as HF Split(Isolated) levels do. */
static PyObject *dfa_cut(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *text, *fo, *so;
    int skip;
    if (!PyArg_ParseTuple(args, "OOOi", &text, &fo, &so, &skip)) return NULL;
    SpannerObject *f = NULL, *sp = NULL;
    if (fo != Py_None) {
        if (!PyObject_TypeCheck(fo, &SpannerType) || !spanner_ready((SpannerObject *)fo) ||
            ((SpannerObject *)fo)->mode != MODE_FIND) {
            PyErr_SetString(PyExc_TypeError, "cut: find must be a find-mode Spanner or None");
            return NULL;
        }
        f = (SpannerObject *)fo;
    }
    if (so != Py_None) {
        if (!PyObject_TypeCheck(so, &SpannerType) || !spanner_ready((SpannerObject *)so) ||
            ((SpannerObject *)so)->mode != MODE_SPLIT) {
            PyErr_SetString(PyExc_TypeError, "cut: split must be a split-mode Spanner or None");
            return NULL;
        }
        sp = (SpannerObject *)so;
    }
    if (skip < 0 || (sp && skip > sp->n_levels) || (!sp && skip)) {
        PyErr_SetString(PyExc_ValueError, "cut: skip out of range");
        return NULL;
    }
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) return NULL;
    if ((uint64_t)ti.n >= 0xFFFFFFFFull) {
        text_release(&ti);
        PyErr_SetString(PyExc_ValueError, "cut: text longer than 4 GiB");
        return NULL;
    }
    const uint8_t *s = ti.s;
    size_t n = (size_t)ti.n;
    const fstok_dfa *lv = sp ? sp->levels + skip : NULL;
    int nl = sp ? sp->n_levels - skip : 0;
    tribuf out = {NULL, 0, 0};
    size_t *ends = NULL, elen = 0, ecap = 0;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    if (!f) {
        oom = cut_split(lv, nl, s, 0, n, &ends, &elen, &ecap, &out);
    } else {
        size_t pos = 0, buf[2 * 256];
        while (pos < n && !oom) {
            size_t got = fstok_dfa_find_all(&f->levels[0], s, n, &pos, buf, 256);
            for (size_t j = 0; j < got && !oom; j++)
                oom = cut_split(lv, nl, s, buf[2 * j], buf[2 * j + 1], &ends, &elen, &ecap, &out);
        }
    }
    Py_END_ALLOW_THREADS
    free(ends);
    text_release(&ti);
    PyObject *res = oom ? PyErr_NoMemory()
                        : PyBytes_FromStringAndSize((const char *)out.p, (Py_ssize_t)(out.len * 3 * sizeof(uint32_t)));
    free(out.p);
    return res;
}


/* HF pre-tokenizer split behaviors (SplitDelimiterBehavior), applied level after level: each level's finditer
 * gives the elements of its piece in order (the gaps between matches and the matches, `invert` swapping the
 * two roles), and the behavior turns them into the pieces the next level splits: Isolated keeps every
 * element, Removed drops the matches, MergedWithPrevious joins a match to the gap before it, MergedWithNext a
 * match to the gap after it, Contiguous joins consecutive matches.  Exactly tokenizers' normalizer.rs
 * `split` folds, streamed (one pending piece per level). */
enum { BEH_ISOLATED = 0, BEH_REMOVED = 1, BEH_MERGED_PREV = 2, BEH_MERGED_NEXT = 3, BEH_CONTIGUOUS = 4, BEH_INVERT = 8 };

typedef struct {
    const fstok_dfa *lv;
    const uint8_t *beh;
    int nl;
    const uint8_t *s;
    tribuf *out;
} cutctx;

typedef struct {
    size_t a, b;
    int valid, prev; /* a pending piece; the previous element was a match */
} pending;

static int cut_level(const cutctx *cx, int i, size_t a, size_t b);

static int cut_elem(const cutctx *cx, int i, pending *p, size_t a, size_t b, int m) {
    switch (cx->beh[i] & 7) {
    case BEH_ISOLATED:
        return cut_level(cx, i + 1, a, b);
    case BEH_REMOVED:
        return m ? 0 : cut_level(cx, i + 1, a, b);
    case BEH_MERGED_PREV: /* a match after a gap joins it; else a piece of its own */
        if (m && !p->prev && p->valid) {
            p->b = b;
        } else {
            if (p->valid && cut_level(cx, i + 1, p->a, p->b)) return -1;
            p->a = a, p->b = b, p->valid = 1;
        }
        p->prev = m;
        return 0;
    case BEH_MERGED_NEXT: /* a match waits for the element after it: a gap joins it, a match does not */
        if (m) {
            if (p->valid && cut_level(cx, i + 1, p->a, p->b)) return -1;
            p->a = a, p->b = b, p->valid = 1;
            return 0;
        }
        if (p->valid) {
            p->valid = 0;
            return cut_level(cx, i + 1, p->a, b);
        }
        return cut_level(cx, i + 1, a, b);
    default: /* BEH_CONTIGUOUS */
        if (p->valid && m == p->prev) {
            p->b = b;
        } else {
            if (p->valid && cut_level(cx, i + 1, p->a, p->b)) return -1;
            p->a = a, p->b = b, p->valid = 1;
        }
        p->prev = m;
        return 0;
    }
}

static int cut_level(const cutctx *cx, int i, size_t a, size_t b) {
    if (a >= b) return 0; /* HF drops empty pieces */
    if (i == cx->nl) return tri_push(cx->out, a, b);
    const uint8_t *base = cx->s + a;
    const int inv = (cx->beh[i] & BEH_INVERT) != 0;
    size_t n = b - a, pos = 0, last = 0, buf[2 * 128];
    pending p = {0, 0, 0, 0};
    while (pos < n) {
        size_t got = fstok_dfa_find_all(&cx->lv[i], base, n, &pos, buf, 128);
        for (size_t j = 0; j < got; j++) {
            size_t mb = buf[2 * j], me = buf[2 * j + 1];
            if (mb > last && cut_elem(cx, i, &p, a + last, a + mb, inv)) return -1;
            if (cut_elem(cx, i, &p, a + mb, a + me, !inv)) return -1;
            last = me;
        }
    }
    if (last < n && cut_elem(cx, i, &p, a + last, b, inv)) return -1;
    return p.valid ? cut_level(cx, i + 1, p.a, p.b) : 0;
}

/* cut_levels(text, split, behaviors) -> bytes of uint32 (start, end, 0xFFFFFFFF) triples: the pieces of the
 * UTF-8 text after every level of the split-mode Spanner, level i applying behaviors[i] (BEH_*, | BEH_INVERT) */
static PyObject *dfa_cut_levels(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *text, *so;
    Py_buffer beh;
    if (!PyArg_ParseTuple(args, "OOy*", &text, &so, &beh)) return NULL;
    if (!PyObject_TypeCheck(so, &SpannerType) || !spanner_ready((SpannerObject *)so) ||
        ((SpannerObject *)so)->mode != MODE_SPLIT) {
        PyBuffer_Release(&beh);
        PyErr_SetString(PyExc_TypeError, "cut_levels: split must be a split-mode Spanner");
        return NULL;
    }
    SpannerObject *sp = (SpannerObject *)so;
    const uint8_t *bv = (const uint8_t *)beh.buf;
    int bad = beh.len != sp->n_levels;
    for (Py_ssize_t k = 0; k < beh.len && !bad; k++) bad = (bv[k] & 7) > BEH_CONTIGUOUS || (bv[k] & ~(uint8_t)15);
    if (bad) {
        PyBuffer_Release(&beh);
        PyErr_SetString(PyExc_ValueError, "cut_levels: one behavior code (0..4, | 8 to invert) per level");
        return NULL;
    }
    TextIn ti;
    if (text_in(text, &ti, 1) < 0) {
        PyBuffer_Release(&beh);
        return NULL;
    }
    if ((uint64_t)ti.n >= 0xFFFFFFFFull) {
        text_release(&ti);
        PyBuffer_Release(&beh);
        PyErr_SetString(PyExc_ValueError, "cut_levels: text longer than 4 GiB");
        return NULL;
    }
    tribuf out = {NULL, 0, 0};
    cutctx cx = {sp->levels, bv, sp->n_levels, ti.s, &out};
    int oom;
    Py_BEGIN_ALLOW_THREADS
    oom = cut_level(&cx, 0, 0, (size_t)ti.n);
    Py_END_ALLOW_THREADS
    text_release(&ti);
    PyBuffer_Release(&beh);
    PyObject *res = oom ? PyErr_NoMemory()
                        : PyBytes_FromStringAndSize((const char *)out.p, (Py_ssize_t)(out.len * 3 * sizeof(uint32_t)));
    free(out.p);
    return res;
}

static PyMethodDef Spanner_methods[] = {
    {"_byte_spans_ends", (PyCFunction)Spanner_byte_spans_ends, METH_VARARGS,
     "_byte_spans_ends(text, window) -> byte_spans computed with the consecutive-ends bulk function (tests)"},
    {"spans", (PyCFunction)Spanner_spans, METH_O,
     "spans(text) -> list of (start, end): character offsets for str, byte offsets for bytes.\n"
     "Find mode: the matches (regex finditer); split mode: all pieces (HF Split 'Isolated')."},
    {"byte_spans", (PyCFunction)Spanner_byte_spans, METH_O,
     "byte_spans(text) -> bytes of native uint64: (start, end) pairs (find mode) or piece ends (split mode)"},
    {"count", (PyCFunction)Spanner_count, METH_O, "count(text) -> number of pieces"},
    {"replace", (PyCFunction)Spanner_replace, METH_VARARGS,
     "replace(text, content) -> UTF-8 bytes with every match (find mode) replaced by the bytes `content`"},
    {"match", (PyCFunction)Spanner_match, METH_VARARGS, "match(text, byte_pos) -> end of the anchored match or -1"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DFAType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fstok.runtime._dfa.DFA",
    .tp_basicsize = sizeof(DFAObject),
    .tp_dealloc = (destructor)DFA_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "DFA(trans, classes, accept, n_states, shift, start, eoi, n_boundary): validated view of DFA tables",
    .tp_init = (initproc)DFA_init,
    .tp_new = PyType_GenericNew,
};

static PyTypeObject SpannerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fstok.runtime._dfa.Spanner",
    .tp_basicsize = sizeof(SpannerObject),
    .tp_dealloc = (destructor)Spanner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Spanner(levels, mode): mode 0 = finditer with one DFA, 1 = HF Isolated split pipeline",
    .tp_methods = Spanner_methods,
    .tp_init = (initproc)Spanner_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ concat_lists (fstok.parallel) */
/* concat_lists(lists: list[list]) -> list: the concatenation of the sub-lists.  A sub-list referenced
 * only by `lists` (refcount 1: the result of encode_batch) gives its items away (pointers moved, no
 * reference count traffic on the items) and is left empty; any other is copied.  Joining the per-piece
 * id lists of a long text this way costs a memcpy instead of one incref per token (measured 2-5 ms per
 * MB of text with list.extend: the int objects are scattered over the heap). */
static PyObject *dfa_concat_lists(PyObject *mod, PyObject *arg) {
    (void)mod;
    if (!PyList_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "concat_lists expects a list of lists, got %.80s", Py_TYPE(arg)->tp_name);
        return NULL;
    }
    Py_ssize_t k = PyList_GET_SIZE(arg), total = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *sub = PyList_GET_ITEM(arg, i);
        if (!PyList_CheckExact(sub)) {
            PyErr_Format(PyExc_TypeError, "concat_lists: item %zd is %.80s, not a list", i, Py_TYPE(sub)->tp_name);
            return NULL;
        }
        total += PyList_GET_SIZE(sub);
    }
    PyObject *out = PyList_New(total);
    if (!out) return NULL;
    PyObject **dst = ((PyListObject *)out)->ob_item;
    Py_ssize_t off = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyListObject *sub = (PyListObject *)PyList_GET_ITEM(arg, i);
        Py_ssize_t n = Py_SIZE(sub);
        if (n == 0) continue;
        if (Py_REFCNT(sub) == 1) {
            memcpy(dst + off, sub->ob_item, (size_t)n * sizeof(PyObject *));
            Py_SET_SIZE(sub, 0); /* the items now belong to `out`; the buffer is freed with the list */
        } else {
            for (Py_ssize_t j = 0; j < n; j++) {
                Py_INCREF(sub->ob_item[j]);
                dst[off + j] = sub->ob_item[j];
            }
        }
        off += n;
    }
    return out;
}

static PyMethodDef module_methods[] = {
    {"cut_levels", (PyCFunction)dfa_cut_levels, METH_VARARGS,
     "cut_levels(text, split, behaviors) -> bytes of uint32 (start, end, 0xFFFFFFFF) piece triples: each level of "
     "the split-mode Spanner applies its HF split behavior (0 Isolated, 1 Removed, 2 MergedWithPrevious, "
     "3 MergedWithNext, 4 Contiguous; | 8 inverts the pattern)"},
    {"cut", (PyCFunction)dfa_cut, METH_VARARGS,
     "cut(text, find, split, skip) -> bytes of uint32 (start, end, 0xFFFFFFFF) piece triples: find's matches "
     "(or the whole text), each split by split's levels from `skip` on"},
    {"concat_lists", (PyCFunction)dfa_concat_lists, METH_O,
     "concat_lists(lists) -> one list (sub-lists referenced only by `lists` are emptied, their items moved)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_dfa", "fstok regex DFA spanner (C core in lib_dfa.c, API in dfa.h)", -1, module_methods,
};

PyMODINIT_FUNC PyInit__dfa(void) {
    if (PyType_Ready(&DFAType) < 0 || PyType_Ready(&SpannerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moduledef);
    if (!m) return NULL;
    Py_INCREF(&DFAType);
    Py_INCREF(&SpannerType);
    if (PyModule_AddObject(m, "DFA", (PyObject *)&DFAType) < 0 || PyModule_AddObject(m, "Spanner", (PyObject *)&SpannerType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "MODE_FIND", MODE_FIND);
    PyModule_AddIntConstant(m, "MODE_SPLIT", MODE_SPLIT);
    return m;
}
