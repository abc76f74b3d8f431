/* Alignment kernels of the HF face (fstok.runtime._hfalign, for fstok.hf_align): a normalized UTF-8 text
 * carries one original character index per byte (native int32, as bytes); the normalizer steps move them as
 * HF's NormalizedString does, and `rows` turns a tables pass (token ids and the pieces they were cut into)
 * into HF's character offsets and word ids.  The Python oracle is fstok.hf_align's numpy forms and, above
 * it, the stages in Python (fstok.hf_tokenizer._PipelineCore.python_encode). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* chars(data) -> bytes: the character index (int32) of each byte of UTF-8 data */
static PyObject *hfa_chars(PyObject *self, PyObject *arg) {
    Py_buffer d;
    if (PyObject_GetBuffer(arg, &d, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *s = (const uint8_t *)d.buf;
    size_t n = (size_t)d.len;
    PyObject *res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * n));
    if (res) {
        int32_t *o = (int32_t *)PyBytes_AS_STRING(res);
        int32_t c = -1;
        for (size_t i = 0; i < n; i++) {
            if ((s[i] & 0xC0) != 0x80) c++;
            o[i] = c;
        }
    }
    PyBuffer_Release(&d);
    return res;
}

/* same_lead(a, b) -> bool: equal lengths and the same character starts (a per-character map that gave one
 * character of the same UTF-8 length for each) */
static PyObject *hfa_same_lead(PyObject *self, PyObject *args) {
    Py_buffer a, b;
    if (!PyArg_ParseTuple(args, "y*y*", &a, &b)) return NULL;
    int ok = a.len == b.len;
    const uint8_t *p = (const uint8_t *)a.buf, *q = (const uint8_t *)b.buf;
    for (Py_ssize_t i = 0; ok && i < a.len; i++)
        if (((p[i] & 0xC0) != 0x80) != ((q[i] & 0xC0) != 0x80)) ok = 0;
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return PyBool_FromLong(ok);
}

/* replace(align, n, spans, n_content) -> bytes, or None where a span is empty or out of order.
 * align: int32 per byte of the n-byte text; spans: uint64 (start, end) byte pairs of the matches (as a find
 * Spanner's byte_spans gives them), in order.  Each match becomes n_content bytes aligned to the match's last
 * byte (HF's NormalizedString::replace); the rest keeps its alignment. */
static PyObject *hfa_replace(PyObject *self, PyObject *args) {
    Py_buffer al, sp;
    Py_ssize_t n, nc;
    if (!PyArg_ParseTuple(args, "y*ny*n", &al, &n, &sp, &nc)) return NULL;
    const int32_t *o = (const int32_t *)al.buf;
    const uint64_t *m = (const uint64_t *)sp.buf;
    size_t k = (size_t)sp.len / 16;
    PyObject *res = NULL;
    if (al.len != 4 * n || nc < 0) {
        PyErr_SetString(PyExc_ValueError, "replace: alignment of the wrong length");
        goto done;
    }
    size_t out_n = (size_t)n, prev = 0;
    for (size_t i = 0; i < k; i++) {
        if (m[2 * i] >= m[2 * i + 1] || m[2 * i] < prev || m[2 * i + 1] > (uint64_t)n) {
            res = Py_None;
            Py_INCREF(res);
            goto done;
        }
        prev = (size_t)m[2 * i + 1];
        out_n = out_n - (size_t)(m[2 * i + 1] - m[2 * i]) + (size_t)nc;
    }
    res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(4 * out_n));
    if (!res) goto done;
    int32_t *q = (int32_t *)PyBytes_AS_STRING(res);
    size_t pos = 0, w = 0;
    for (size_t i = 0; i < k; i++) {
        size_t a = (size_t)m[2 * i], b = (size_t)m[2 * i + 1];
        memcpy(q + w, o + pos, 4 * (a - pos));
        w += a - pos;
        for (Py_ssize_t j = 0; j < nc; j++) q[w++] = o[b - 1];
        pos = b;
    }
    memcpy(q + w, o + pos, 4 * ((size_t)n - pos));
done:
    PyBuffer_Release(&al);
    PyBuffer_Release(&sp);
    return res;
}

/* The tuple (a, z), built directly (no format string).  With `prev` (the int object of the previous
 * pair's end, borrowed, or NULL), a start equal to it shares that object, and *prev becomes this end: the
 * offsets of consecutive tokens meet, so most pairs allocate one int instead of two. */
static PyObject *offset_pair(long a, long z, PyObject **prev) {
    PyObject *t = PyTuple_New(2);
    if (!t) return NULL;
    PyObject *pa;
    if (prev && *prev && PyLong_AsLong(*prev) == a) {
        Py_INCREF(*prev);
        pa = *prev;
    } else if (!(pa = PyLong_FromLong(a))) {
        Py_DECREF(t);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 0, pa);
    PyObject *pz = PyLong_FromLong(z);
    if (!pz) {
        Py_DECREF(t);
        return NULL;
    }
    PyTuple_SET_ITEM(t, 1, pz);
    if (prev) *prev = pz;
    return t;
}

/* rows(align, ids, lens, ends, pieces, starts, standin_lo) -> (offsets, words), or None.
 * align: int32 per byte of the encoded text; ids: uint32 token ids; lens: int64 bytes of each id's token;
 * pieces: uint32 (start, end, literal) triples of the pre-tokenizer's pieces, in order.
 * With `ends` (uint8 by id: the token ends with the end-of-word sentinel byte, not text) and no `starts`,
 * the tokens of each piece spell it and its last token is the only one that ends with the sentinel: a token's
 * first byte and piece follow from the running sums.  With `starts` (uint32 first byte of each token), a
 * token's word is the last piece that starts at or before it.  None where the tokens do not fit the pieces
 * that way, or an id is standin_lo or above (-1: none is).  With `trim`, also the offsets trimmed as the
 * byte-level post-processors trim them. */
static PyObject *hfa_rows(PyObject *self, PyObject *args) {
    Py_buffer al, ib, lb, eb = {0}, pb, sb = {0}, tb = {0};
    PyObject *ends_o, *starts_o, *trim_o = Py_None;
    long long lo;
    int pk = 0, aps = 0;
    if (!PyArg_ParseTuple(args, "y*y*y*Oy*OL|iOp", &al, &ib, &lb, &ends_o, &pb, &starts_o, &lo, &pk, &trim_o, &aps))
        return NULL;
    int have_e = ends_o != Py_None, have_s = starts_o != Py_None, have_t = trim_o != Py_None;
    PyObject *res = NULL, *offs = NULL, *words = NULL, *toffs = NULL;
    if (have_e && PyObject_GetBuffer(ends_o, &eb, PyBUF_SIMPLE) < 0) goto fail_args;
    if (have_s && PyObject_GetBuffer(starts_o, &sb, PyBUF_SIMPLE) < 0) goto fail_args;
    if (have_t && PyObject_GetBuffer(trim_o, &tb, PyBUF_SIMPLE) < 0) goto fail_args;
    /* trim: uint8 (leading, trailing) space characters of each id's token string, the byte-level offset
     * trimming of HF's post-processors (fstok.postprocess._trim_offsets is the oracle); aps: its
     * add_prefix_space (the one leading space of the first token, or of a token at 0, is kept) */
    const uint8_t *trim = (const uint8_t *)tb.buf;
    const int32_t *o = (const int32_t *)al.buf;
    const uint32_t *ids = (const uint32_t *)ib.buf;
    const int64_t *lens = (const int64_t *)lb.buf;
    const uint8_t *ends = (const uint8_t *)eb.buf;
    const uint32_t *st = (const uint32_t *)sb.buf;
    size_t nb = (size_t)al.len / 4, nt = (size_t)ib.len / 4, np_ = (size_t)pb.len / 12;
    /* pieces as u32 (start, end, literal) triples (pk 0), or as a Spanner's byte_spans: uint64 (start, end)
     * pairs (pk 1, find mode) or uint64 piece ends, each piece starting where the one before ends (pk 2) */
    uint32_t *tmp = NULL;
    const uint32_t *pc = (const uint32_t *)pb.buf;
    if (pk == 1 || pk == 2) {
        const uint64_t *q = (const uint64_t *)pb.buf;
        np_ = (size_t)pb.len / (pk == 1 ? 16 : 8);
        tmp = (uint32_t *)malloc(12 * (np_ ? np_ : 1));
        if (!tmp) {
            PyErr_NoMemory();
            goto done;
        }
        for (size_t i = 0; i < np_; i++) {
            tmp[3 * i] = (uint32_t)(pk == 1 ? q[2 * i] : (i ? q[i - 1] : 0));
            tmp[3 * i + 1] = (uint32_t)(pk == 1 ? q[2 * i + 1] : q[i]);
            tmp[3 * i + 2] = 0xFFFFFFFFu;
        }
        pc = tmp;
    }
    size_t nid = (size_t)lb.len / 8;
    if ((!have_e && !have_s) || (have_s && (size_t)sb.len / 4 != nt) || (have_e && (size_t)eb.len < nid) ||
        (have_t && (size_t)tb.len < 2 * nid)) {
        PyErr_SetString(PyExc_ValueError, "rows: ends or starts of the wrong shape");
        goto done;
    }
    offs = PyList_New((Py_ssize_t)nt);
    words = PyList_New((Py_ssize_t)nt);
    if (!offs || !words) goto done;
    if (have_t && !(toffs = PyList_New((Py_ssize_t)nt))) goto done;
    PyObject *prev_end = NULL; /* the end offset of the token before (borrowed from its tuple) */
    size_t p = 0;     /* the piece of the current token */
    size_t wd = 0;    /* its word: the non-empty pieces before it (HF drops empty splits) */
    size_t pos = np_ ? pc[0] : 0; /* the current token's first byte (sentinel mode) */
    for (size_t i = 0; i < nt; i++) {
        uint32_t id = ids[i];
        if (id >= nid || (lo >= 0 && (long long)id >= lo)) goto none;
        size_t b, e;
        long long len = lens[id];
        if (have_s) {
            b = st[i];
            while (p + 1 < np_ && pc[3 * (p + 1)] <= b) {
                wd += pc[3 * p + 1] > pc[3 * p];
                p++;
            }
        } else {
            if (p >= np_) goto none;
            int last = ends[id] != 0;
            len -= last;
            b = pos;
            pos += (size_t)len;
            if ((last && pos != pc[3 * p + 1]) || (!last && pos >= pc[3 * p + 1])) goto none;
        }
        e = b + (size_t)len;
        if (len <= 0 || e > nb) goto none;
        PyObject *w = PyLong_FromSize_t(have_s ? wd : p);
        PyObject *t = w ? offset_pair(o[b], o[e - 1] + 1, &prev_end) : NULL;
        if (!t) {
            Py_XDECREF(w);
            goto done;
        }
        PyList_SET_ITEM(words, (Py_ssize_t)i, w);
        PyList_SET_ITEM(offs, (Py_ssize_t)i, t);
        if (have_t) {
            long cs = o[b], ce = o[e - 1] + 1, ld = trim[2 * id], tr = trim[2 * id + 1];
            if (aps && ld == 1 && (i == 0 || cs == 0)) ld = 0;
            long ta = ld ? (cs + ld < ce ? cs + ld : ce) : cs;
            long tz = (tr && ce >= tr) ? (ce - tr > ta ? ce - tr : ta) : ce;
            PyObject *u;
            if (ta == cs && tz == ce) {
                Py_INCREF(t);
                u = t;
            } else if (!(u = offset_pair(ta, tz, NULL))) {
                goto done;
            }
            PyList_SET_ITEM(toffs, (Py_ssize_t)i, u);
        }
        if (!have_s && ends[id]) {
            p++;
            if (p < np_) pos = pc[3 * p];
        }
    }
    if (!have_s && p != np_) goto none;
    res = have_t ? PyTuple_Pack(3, offs, words, toffs) : PyTuple_Pack(2, offs, words);
    goto done;
none:
    res = Py_None;
    Py_INCREF(res);
done:
    free(tmp);
    Py_XDECREF(offs);
    Py_XDECREF(words);
    Py_XDECREF(toffs);
fail_args:
    if (have_t && tb.obj) PyBuffer_Release(&tb);
    if (have_e && eb.obj) PyBuffer_Release(&eb);
    if (have_s && sb.obj) PyBuffer_Release(&sb);
    PyBuffer_Release(&al);
    PyBuffer_Release(&ib);
    PyBuffer_Release(&lb);
    PyBuffer_Release(&pb);
    return res;
}

static PyMethodDef methods[] = {
    {"chars", hfa_chars, METH_O, "chars(data) -> int32 character index of each byte of UTF-8 data, as bytes"},
    {"same_lead", hfa_same_lead, METH_VARARGS, "same_lead(a, b) -> bool: same length and character starts"},
    {"replace", hfa_replace, METH_VARARGS,
     "replace(align, n, spans, n_content) -> the alignment after replacing each span (or None)"},
    {"rows", hfa_rows, METH_VARARGS,
     "rows(align, ids, lens, ends, pieces, starts, standin_lo[, kind, trim, aps]) -> (offsets, word ids[, trimmed "
     "offsets]) of a tables pass, or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_hfalign", "alignment kernels of the HF face (fstok.hf_align)", -1, methods,
};

PyMODINIT_FUNC PyInit__hfalign(void) { return PyModule_Create(&moduledef); }
