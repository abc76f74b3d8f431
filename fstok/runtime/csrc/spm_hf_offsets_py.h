/* hf_encode_offsets: the Encoding lists of a batch of texts in one call (spm_hf_encode_offsets per text
 * segment), included by mod_spm.c after its handle helpers.
 *
 * hf_encode_offsets(hf handle, span int32 buffer, vocab list, unk token id, texts, cuts) -> list with, per
 * text, (ids, offsets, word ids, token strings) or None (the reference path takes that text: tokenizers
 * raises on it, or an alignment this path does not follow).  cuts is None or a list parallel to texts of
 * None (the text is one segment) or a list of (added token id or -1, start, end) character spans covering
 * the text in order (fstok.hf_spm.find_added).  A token's string is the vocabulary's (vocab[id]), the
 * matched text for an added token, and the normalized text it covers for `unk_tok` (Unigram's unknown
 * piece; -2: none). */

/* the byte offset of character `ci` in the UTF-8 text s (walking from byte *bi at character *cc) */
static size_t hfo_char_byte(const uint8_t *s, size_t n, size_t ci, size_t *bi, size_t *cc) {
    size_t b = *bi, c = *cc;
    while (c < ci && b < n) {
        b++;
        while (b < n && (s[b] & 0xC0) == 0x80) b++;
        c++;
    }
    *bi = b;
    *cc = c;
    return b;
}

typedef struct {
    spm_ints ids, off, word, nsp; /* nsp: the normalized byte span of a model token, (-1, -1) for an added one */
    spm_bytes norm;               /* the normalized text of the text's segments, one after the other */
} hfo_lists;

/* offsets and word indices as shared int objects (most are below 2^16; made on first use) */
#define HFO_INTS 65536
static PyObject *hfo_ints[HFO_INTS];

static PyObject *hfo_int(int32_t v) {
    if (v < 0 || v >= HFO_INTS) return PyLong_FromLong(v);
    PyObject *x = hfo_ints[v];
    if (!x && !(x = hfo_ints[v] = PyLong_FromLong(v))) return NULL;
    Py_INCREF(x);
    return x;
}

/* the lists of one text from L: (ids, offsets, word ids, token strings), or NULL */
static PyObject *hfo_emit(handle *mh, const hfo_lists *L, PyObject *text, PyObject *vocab, int32_t unk_tok) {
    const Py_ssize_t nv = PyList_GET_SIZE(vocab), n = (Py_ssize_t)L->ids.n;
    PyObject *pids = PyList_New(n), *poffs = PyList_New(n), *pwords = PyList_New(n), *ptoks = PyList_New(n);
    if (!pids || !poffs || !pwords || !ptoks) goto fail;
    for (Py_ssize_t t = 0; t < n; t++) {
        const int32_t id = L->ids.p[t];
        const int32_t os = L->off.p[2 * t], oe = L->off.p[2 * t + 1], bs = L->nsp.p[2 * t];
        PyObject *x = bs < 0 ? PyLong_FromLong(id) : id_object(mh, id);
        if (!x) goto fail;
        PyList_SET_ITEM(pids, t, x);
        PyObject *tu = PyTuple_New(2);
        if (!tu) goto fail;
        PyList_SET_ITEM(poffs, t, tu);
        if (!(x = hfo_int(os))) goto fail;
        PyTuple_SET_ITEM(tu, 0, x);
        if (!(x = hfo_int(oe))) goto fail;
        PyTuple_SET_ITEM(tu, 1, x);
        /* a pair of ints is in no cycle: the collector need not visit it (it would untrack it at its first
         * visit; a batch makes hundreds of thousands) */
        PyObject_GC_UnTrack(tu);
        if (!(x = hfo_int(L->word.p[t]))) goto fail;
        PyList_SET_ITEM(pwords, t, x);
        if (bs < 0) {
            x = PyUnicode_Substring(text, os, oe);
        } else if (id == unk_tok) {
            x = PyUnicode_DecodeUTF8((const char *)L->norm.p + bs, L->nsp.p[2 * t + 1] - bs, "strict");
        } else if (id >= 0 && id < nv) {
            x = PyList_GET_ITEM(vocab, id);
            Py_INCREF(x);
        } else {
            PyErr_Format(PyExc_ValueError, "token id %d has no vocabulary string", (int)id);
            x = NULL;
        }
        if (!x) goto fail;
        PyList_SET_ITEM(ptoks, t, x);
    }
    PyObject *r = PyTuple_Pack(4, pids, poffs, pwords, ptoks);
    Py_DECREF(pids);
    Py_DECREF(poffs);
    Py_DECREF(pwords);
    Py_DECREF(ptoks);
    return r;
fail:
    Py_XDECREF(pids);
    Py_XDECREF(poffs);
    Py_XDECREF(pwords);
    Py_XDECREF(ptoks);
    return NULL;
}

static int hfo_norm_append(spm_bytes *b, const uint8_t *s, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n) c *= 2;
        uint8_t *q = (uint8_t *)realloc(b->p, c);
        if (!q) return -1;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

/* one text (its UTF-8 s[0..nb)): its tuple, Py_None (the reference path takes it) or NULL (an error is set) */
static PyObject *hfo_text_utf8(spm_model *m, hf_handle *x, spm_hf_off_work *w, const int32_t *span, size_t n_span,
                               PyObject *vocab, int32_t unk_tok, PyObject *text, const uint8_t *s, Py_ssize_t nb,
                               PyObject *cut, hfo_lists *L) {
    const int ascii = PyUnicode_IS_ASCII(text);
    L->ids.n = L->off.n = L->word.n = L->nsp.n = L->norm.n = 0;
    int32_t words = 0;
    const Py_ssize_t nseg = cut == Py_None ? 1 : PyList_GET_SIZE(cut), nchar = PyUnicode_GET_LENGTH(text);
    size_t bi = 0, cc = 0;
    for (Py_ssize_t k = 0; k < nseg; k++) {
        long tid = -1;
        Py_ssize_t ca = 0, ce = nchar;
        if (cut != Py_None) {
            PyObject *e = PyList_GET_ITEM(cut, k);
            if (!PyTuple_Check(e) || !PyArg_ParseTuple(e, "lnn", &tid, &ca, &ce)) return NULL;
            if (ca < 0 || ce < ca || ce > nchar || tid > INT32_MAX) {
                PyErr_SetString(PyExc_ValueError, "a cut outside the text");
                return NULL;
            }
        }
        if (tid >= 0) {
            if (spm_hf_ids_put(&L->ids, (int32_t)tid) || spm_hf_ids_put(&L->off, (int32_t)ca) ||
                spm_hf_ids_put(&L->off, (int32_t)ce) || spm_hf_ids_put(&L->word, words++) ||
                spm_hf_ids_put(&L->nsp, -1) || spm_hf_ids_put(&L->nsp, -1))
                return PyErr_NoMemory();
            continue;
        }
        size_t b0, b1;
        if (ascii) {
            b0 = (size_t)ca;
            b1 = (size_t)ce;
        } else {
            b0 = hfo_char_byte(s, (size_t)nb, (size_t)ca, &bi, &cc);
            b1 = hfo_char_byte(s, (size_t)nb, (size_t)ce, &bi, &cc);
        }
        const spm_bytes *norm = NULL;
        const size_t t0 = L->nsp.n;
        const int rc = spm_hf_encode_offsets(m, &x->h, w, span, n_span, s + b0, b1 - b0, (int32_t)ca, &L->ids, &L->off,
                                             &L->word, &words, &L->nsp, &norm);
        if (rc == -1) return PyErr_NoMemory();
        if (rc) Py_RETURN_NONE;
        for (size_t t = t0; t < L->nsp.n; t++) L->nsp.p[t] += (int32_t)L->norm.n;
        if (hfo_norm_append(&L->norm, norm->p, norm->n)) return PyErr_NoMemory();
    }
    return hfo_emit(get_handle(x->model), L, text, vocab, unk_tok);
}

/* one text: an ASCII str is read in place; another is encoded into a temporary bytes object (the str does
 * not keep a UTF-8 copy for its lifetime) */
static PyObject *hfo_text(spm_model *m, hf_handle *x, spm_hf_off_work *w, const int32_t *span, size_t n_span,
                          PyObject *vocab, int32_t unk_tok, PyObject *text, PyObject *cut, hfo_lists *L) {
    if (PyUnicode_IS_ASCII(text)) {
        Py_ssize_t nb;
        const uint8_t *s = (const uint8_t *)PyUnicode_AsUTF8AndSize(text, &nb);
        if (!s) return NULL;
        return hfo_text_utf8(m, x, w, span, n_span, vocab, unk_tok, text, s, nb, cut, L);
    }
    PyObject *b = PyUnicode_AsUTF8String(text);
    if (!b) { /* lone surrogates: the reference path raises as it does */
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *r = hfo_text_utf8(m, x, w, span, n_span, vocab, unk_tok, text, (const uint8_t *)PyBytes_AS_STRING(b),
                                PyBytes_GET_SIZE(b), cut, L);
    Py_DECREF(b);
    return r;
}

/* the work space of the last call, kept for the next (taken out while a call runs: a call made from inside
 * another, through a finalizer the collector runs, allocates its own) */
typedef struct {
    spm_hf_off_work *w;
    hfo_lists L;
} hfo_space;
static hfo_space *hfo_spare;
#define HFO_KEEP_CHARS 65536 /* a space that served a longer text is freed (its buffers fit that text) */

static void hfo_space_free(hfo_space *sp) {
    if (!sp) return;
    spm_hf_off_work_free(sp->w);
    spm_ints_free(&sp->L.ids);
    spm_ints_free(&sp->L.off);
    spm_ints_free(&sp->L.word);
    spm_ints_free(&sp->L.nsp);
    spm_bytes_free(&sp->L.norm);
    free(sp);
}

static PyObject *py_hf_encode_offsets(PyObject *self, PyObject *args) {
    PyObject *cap, *vocab, *texts, *cuts;
    Py_buffer sp;
    int unk_tok;
    if (!PyArg_ParseTuple(args, "Oy*O!iO!O", &cap, &sp, &PyList_Type, &vocab, &unk_tok, &PyList_Type, &texts, &cuts))
        return NULL;
    PyObject *out = NULL;
    int big = 0;
    hfo_space *ws = hfo_spare;
    hfo_spare = NULL;
    hf_handle *x = (hf_handle *)PyCapsule_GetPointer(cap, "fstok.spm_hf");
    spm_model *m = x ? get_model(x->model) : NULL;
    if (!m) goto done;
    const Py_ssize_t n = PyList_GET_SIZE(texts);
    if (cuts != Py_None && (!PyList_Check(cuts) || PyList_GET_SIZE(cuts) != n)) {
        PyErr_SetString(PyExc_TypeError, "cuts must be None or a list parallel to texts");
        goto done;
    }
    if (!ws && (!(ws = (hfo_space *)calloc(1, sizeof *ws)) || !(ws->w = spm_hf_off_work_new()))) {
        PyErr_NoMemory();
        goto done;
    }
    if (!(out = PyList_New(n))) goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(texts, i);
        PyObject *c = cuts == Py_None ? Py_None : PyList_GET_ITEM(cuts, i);
        if (!PyUnicode_Check(t) || (c != Py_None && !PyList_Check(c))) {
            PyErr_SetString(PyExc_TypeError, "texts must be str and each cut None or a list");
            Py_CLEAR(out);
            goto done;
        }
        if (PyUnicode_GET_LENGTH(t) > HFO_KEEP_CHARS) big = 1;
        PyObject *r = hfo_text(m, x, ws->w, (const int32_t *)sp.buf, (size_t)(sp.len / 4), vocab, unk_tok, t, c, &ws->L);
        if (!r) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, i, r);
    }
done:
    if (ws && !ws->w) {
        free(ws);
    } else if (ws && !hfo_spare && !big) {
        hfo_spare = ws;
    } else {
        hfo_space_free(ws);
    }
    PyBuffer_Release(&sp);
    return out;
}
