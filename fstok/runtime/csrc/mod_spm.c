/* fstok-lib: spm spm_hf spm_hf_offsets */
/* fstok SentencePiece-family runtime glue: Python <-> spm.h (lib_spm.c).
 *
 * make(arrays, ints, floats) builds a model handle (a capsule) over arrays that fstok/spm.py has
 * validated; the handle keeps them alive.  encode/normalize/model release the GIL while the core runs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pyids.h"
#include "spm.h"

#define N_ARR 9

#define N_FT 6 /* the stored walking tables: ft_nodes, ft_rows, ft_pairs, ft_chars, ft_ascii, ft_small */

typedef struct {
    spm_model m;
    Py_buffer buf[N_ARR + 2 + N_FT]; /* the arrays, the scores and types, the walking tables */
    int nbuf;
    void *copy[N_FT]; /* aligned copies of walking tables whose buffer was not aligned */
    PyObject **ints;  /* the int object of each piece id, made on first use (under the GIL); NULL: none yet */
    int pinned;       /* ints are the module's pinned ints (pyids.h): a list item takes no reference */
} handle;

static void handle_free(PyObject *cap) {
    handle *h = (handle *)PyCapsule_GetPointer(cap, "fstok.spm");
    if (!h) return;
    spm_ftrie_free(&h->m);
    for (int i = 0; i < h->nbuf; i++) PyBuffer_Release(&h->buf[i]);
    for (int i = 0; i < N_FT; i++) free(h->copy[i]);
    if (h->ints) {
        for (uint32_t i = 0; i < h->m.n_pieces && !h->pinned; i++) Py_XDECREF(h->ints[i]);
        free(h->ints);
    }
    spm_cache_free(h->m.cache);
    spm_zfree(h->m.pair_memo, SPM_PAIR_MEMO_BYTES);
    spm_trie_free(&h->m.user);
    free(h->m.reserved);
    free(h->m.uw_eff);
    pthread_mutex_destroy(&h->m.ft_mu);
    free(h);
}

static const void *bufp(handle *h, PyObject *arrays, int i, Py_ssize_t *len) {
    PyObject *o = PyTuple_GET_ITEM(arrays, i);
    if (o == Py_None) {
        *len = 0;
        return NULL;
    }
    if (PyObject_GetBuffer(o, &h->buf[h->nbuf], PyBUF_SIMPLE) < 0) return (const void *)-1;
    *len = h->buf[h->nbuf].len;
    return h->buf[h->nbuf++].buf;
}

/* The stored walking tables `ft` (a tuple of N_FT buffers or None), checked by spm_ftrie_check and adopted:
 * 0, or -1 with ValueError "ft: <section>: ..." (or MemoryError) set */
static int adopt_tables(handle *h, PyObject *ft) {
    static const size_t rec[N_FT] = {32, 1024, 8, 8, 4, 8};
    static const size_t align[N_FT] = {8, 4, 8, 8, 4, 8};
    static const char *const name[N_FT] = {"ft_nodes", "ft_rows", "ft_pairs", "ft_chars", "ft_ascii", "ft_small"};
    const void *p[N_FT];
    size_t cnt[N_FT];
    for (int i = 0; i < N_FT; i++) {
        PyObject *o = PyTuple_GET_ITEM(ft, i);
        p[i] = NULL;
        cnt[i] = 0;
        if (o == Py_None) continue;
        Py_buffer *b = &h->buf[h->nbuf];
        if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) < 0) return -1;
        h->nbuf++;
        if ((size_t)b->len % rec[i]) {
            PyErr_Format(PyExc_ValueError, "ft: %s: its size is not a whole number of records", name[i]);
            return -1;
        }
        cnt[i] = (size_t)b->len / rec[i];
        p[i] = b->buf;
        if (b->len && ((uintptr_t)b->buf & (align[i] - 1))) { /* a bytes object's buffer: read from a copy */
            if (!(h->copy[i] = malloc((size_t)b->len))) {
                PyErr_NoMemory();
                return -1;
            }
            memcpy(h->copy[i], b->buf, (size_t)b->len);
            p[i] = h->copy[i];
        }
        if (!cnt[i]) p[i] = NULL;
    }
    const spm_ft_tables t = {p[0], cnt[0], (const uint32_t *)p[1], cnt[1], p[2], cnt[2], (const uint64_t *)p[3], cnt[3],
                             (const int32_t *)p[4], cnt[4], (const uint64_t *)p[5], cnt[5]};
    const char *bad = spm_ftrie_check(&h->m, &t);
    if (bad) {
        PyErr_Format(PyExc_ValueError, "ft: %s", bad);
        return -1;
    }
    if (spm_ftrie_adopt(&h->m, &t)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* arrays: (cm_units, cm_norm, u_first, u_label, u_target, u_value, cut_pairs, pieces, piece_off) -- then scores
 * (f32 or f64), ptype, byte_id, ..., and the stored walking tables (a tuple of N_FT: the pieces trie) */
static PyObject *py_make(PyObject *self, PyObject *args) {
    PyObject *arrays, *score, *ptype, *byte_id, *ft;
    int is64;
    unsigned int flags;
    int unk_id;
    double min_score, max_score;
    if (!PyArg_ParseTuple(args, "O!OiOOIiddO", &PyTuple_Type, &arrays, &score, &is64, &ptype, &byte_id, &flags, &unk_id,
                          &min_score, &max_score, &ft))
        return NULL;
    if (!PyTuple_Check(ft) || PyTuple_GET_SIZE(ft) != N_FT)
        return PyErr_Format(PyExc_ValueError, "expected %d walking tables", N_FT);
    if (PyTuple_GET_SIZE(arrays) != N_ARR) return PyErr_Format(PyExc_ValueError, "expected %d arrays", N_ARR);
    handle *h = (handle *)calloc(1, sizeof(handle));
    if (!h) return PyErr_NoMemory();
    pthread_mutex_init(&h->m.ft_mu, NULL);
    Py_ssize_t len;
    const void *p[N_ARR];
    Py_ssize_t lens[N_ARR];
    for (int i = 0; i < N_ARR; i++) {
        p[i] = bufp(h, arrays, i, &len);
        lens[i] = len;
        if (p[i] == (const void *)-1) goto fail;
    }
    spm_model *m = &h->m;
    m->cm_units = p[0];
    m->n_cm = (uint32_t)(lens[0] / 4);
    m->cm_norm = p[1];
    m->n_cm_norm = (uint32_t)lens[1];
    m->user.first = p[2];
    m->user.label = p[3];
    m->user.target = p[4];
    m->user.value = p[5];
    m->user.n_nodes = (uint32_t)(lens[5] / 4);
    if (p[6] && lens[6] != 8192) {
        PyErr_SetString(PyExc_ValueError, "cut_pairs must hold 8192 bytes");
        goto fail;
    }
    m->cut_pairs = p[6];
    if (PyObject_GetBuffer(score, &h->buf[h->nbuf], PyBUF_SIMPLE) < 0) goto fail;
    if (is64)
        m->score64 = h->buf[h->nbuf].buf;
    else
        m->score = h->buf[h->nbuf].buf;
    m->n_pieces = (uint32_t)(h->buf[h->nbuf].len / (is64 ? 8 : 4));
    h->nbuf++;
    {
        /* the user-defined pieces' trie, checked here in one pass (ValueError "u: ...") */
        const char *bad = spm_trie_check(p[2], (size_t)lens[2] / 4, p[3], (size_t)lens[3], p[4], (size_t)lens[4] / 4,
                                         p[5], (size_t)lens[5] / 4, NULL, 0, 1);
        if (bad) {
            PyErr_Format(PyExc_ValueError, "u: %s", bad);
            goto fail;
        }
    }
    if (spm_trie_init(&m->user, 1)) {
        PyErr_NoMemory();
        goto fail;
    }
    if (PyObject_GetBuffer(ptype, &h->buf[h->nbuf], PyBUF_SIMPLE) < 0) goto fail;
    m->ptype = h->buf[h->nbuf++].buf;
    {
        Py_buffer b;
        if (PyObject_GetBuffer(byte_id, &b, PyBUF_SIMPLE) < 0) goto fail;
        if (b.len != 256 * 4) {
            PyBuffer_Release(&b);
            PyErr_SetString(PyExc_ValueError, "byte_id must hold 256 int32");
            goto fail;
        }
        memcpy(m->byte_id, b.buf, 256 * 4);
        PyBuffer_Release(&b);
    }
    if ((size_t)lens[8] != ((size_t)m->n_pieces + 1) * 4 || (p[8] && ((const uint32_t *)p[8])[m->n_pieces] != (size_t)lens[7])) {
        PyErr_SetString(PyExc_ValueError, "piece_off does not bound the piece strings");
        goto fail;
    }
    m->blob = p[7];
    m->off = p[8];
    m->flags = flags;
    m->unk_id = unk_id;
    if (spm_model_prepare(m)) {
        PyErr_NoMemory();
        goto fail;
    }
    for (uint32_t k = 0; k < m->n_reserved; k++) { /* PieceToId reads these strings */
        const int32_t r = m->reserved[k];
        if (m->off[r] > m->off[r + 1] || m->off[r + 1] > (size_t)lens[7]) {
            PyErr_SetString(PyExc_ValueError, "piece_off does not bound the piece strings");
            goto fail;
        }
    }
    m->min_score = (float)min_score;
    m->max_score = (float)max_score;
    m->min_score64 = min_score;
    if (adopt_tables(h, ft)) goto fail;
    if ((flags & SPF_BPE) && !(flags & SPF_HF) && spm_pair_memo_init(m)) {
        PyErr_NoMemory();
        goto fail;
    }
    if ((flags & (SPF_WORDS | SPF_CUTS)) && !(m->cache = spm_cache_new())) {
        PyErr_NoMemory();
        goto fail;
    }
    if (spm_unigram_prepare(m)) {
        PyErr_NoMemory();
        goto fail;
    }
    return PyCapsule_New(h, "fstok.spm", handle_free);
fail:
    spm_ftrie_free(&h->m);
    for (int i = 0; i < h->nbuf; i++) PyBuffer_Release(&h->buf[i]);
    for (int i = 0; i < N_FT; i++) free(h->copy[i]);
    spm_trie_free(&h->m.user);
    spm_cache_free(h->m.cache);
    spm_zfree(h->m.pair_memo, SPM_PAIR_MEMO_BYTES);
    free(h->m.reserved);
    free(h->m.uw_eff);
    pthread_mutex_destroy(&h->m.ft_mu);
    free(h);
    return NULL;
}

static spm_model *get_model(PyObject *cap) {
    handle *h = (handle *)PyCapsule_GetPointer(cap, "fstok.spm");
    return h ? &h->m : NULL;
}

/* the int object of id (a new reference): ids of the vocabulary share one object each, made on first use,
 * so that a list of ids costs no allocation per id (ids past 256 are not among Python's small ints) */
static PyObject *id_object(handle *h, int32_t id) {
    if (!h || id < 0 || (uint32_t)id >= h->m.n_pieces) return PyLong_FromLong(id);
    if (!h->ints && !(h->ints = (PyObject **)calloc(h->m.n_pieces, sizeof(PyObject *)))) return PyLong_FromLong(id);
    PyObject *x = h->ints[id];
    if (!x && !(x = h->ints[id] = PyLong_FromLong(id))) return NULL;
    Py_INCREF(x);
    return x;
}

/* the module's pinned ints 0..n_pieces-1 as h->ints on first use: 1 pinned, 0 not (this Python keeps
 * references: id_object), -1 with an exception */
static int pin_ints(handle *h) {
    if (h->pinned) return 1;
    if (h->ints || !h->m.n_pieces) return 0;
    PyObject **t = (PyObject **)calloc(h->m.n_pieces, sizeof(PyObject *));
    if (!t) return 0;
    const int r = pyids_pinned_ints(t, h->m.n_pieces);
    if (r < 0) {
        free(t);
        return r;
    }
    h->ints = t; /* (r 0: the table id_object fills) */
    if (!r) return 0;
    h->pinned = 1;
    return 1;
}

/* a list of the ids at v->p[0], v->p[stride], ...  With pinned ints an item is the int's address (computed
 * for ids in the module's run of side-by-side ints, pyids.h): no reference count is written, so the ints of
 * a large vocabulary are not read at all while the list is built */
static PyObject *ids_list_h(handle *h, const spm_ints *v, int stride) {
    const Py_ssize_t n = (Py_ssize_t)(v->n / (size_t)stride);
    const int pinned = h ? pin_ints(h) : 0;
    if (pinned < 0) return NULL;
    if (pinned) {
        const pyids_run run = pyids_main_run;
        PyObject *const *ints = h->ints;
        const uint32_t np = h->m.n_pieces;
        PyObject *L = PyList_New(0);
        if (!L || !n) return L;
        PyObject **dst = (PyObject **)PyMem_Malloc((size_t)n * sizeof(PyObject *));
        if (!dst) {
            Py_DECREF(L);
            return PyErr_NoMemory();
        }
        ((PyListObject *)L)->ob_item = dst;
        ((PyListObject *)L)->allocated = n;
        const int32_t *p = v->p;
        for (Py_ssize_t i = 0; i < n; i++) {
            const uint32_t id = (uint32_t)p[(size_t)i * (size_t)stride];
            PyObject *x = id < np ? pyids_pinned_int(ints, run, id) : PyLong_FromLong((int32_t)id);
            if (!x) {
                Py_SET_SIZE(L, i);
                Py_DECREF(L);
                return NULL;
            }
            dst[i] = x;
        }
        Py_SET_SIZE(L, n);
        return L;
    }
    PyObject *L = PyList_New(n);
    if (!L) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = id_object(h, v->p[i * stride]);
        if (!x) {
            Py_DECREF(L);
            return NULL;
        }
        PyList_SET_ITEM(L, i, x);
    }
    return L;
}

static PyObject *ids_list(const spm_ints *v, int stride) { return ids_list_h(NULL, v, stride); }

static handle *get_handle(PyObject *cap) { return (handle *)PyCapsule_GetPointer(cap, "fstok.spm"); }

static PyObject *triples_bytes(const spm_ints *v) {
    return PyBytes_FromStringAndSize((const char *)v->p, (Py_ssize_t)(v->n * 4));
}

/* encode(handle, utf8 bytes, mode): mode 0 ids list, 1 triples as bytes (id, begin, end int32) */
static PyObject *py_encode(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in;
    int mode = 0;
    if (!PyArg_ParseTuple(args, "Oy*|i", &cap, &in, &mode)) return NULL;
    spm_model *m = get_model(cap);
    if (!m) {
        PyBuffer_Release(&in);
        return NULL;
    }
    spm_ints ids = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_encode(m, in.buf, (size_t)in.len, &ids, mode == 1);
    Py_END_ALLOW_THREADS PyBuffer_Release(&in);
    if (rc) {
        spm_ints_free(&ids);
        return PyErr_NoMemory();
    }
    PyObject *r = mode == 1 ? triples_bytes(&ids) : ids_list_h(get_handle(cap), &ids, 3);
    spm_ints_free(&ids);
    return r;
}

/* encode_batch(handle, list of utf8 bytes) -> list of id lists */
static PyObject *py_encode_batch(PyObject *self, PyObject *args) {
    PyObject *cap, *seq;
    if (!PyArg_ParseTuple(args, "OO!", &cap, &PyList_Type, &seq)) return NULL;
    spm_model *m = get_model(cap);
    if (!m) return NULL;
    const Py_ssize_t n = PyList_GET_SIZE(seq);
    PyObject *out = PyList_New(n);
    if (!out) return NULL;
    spm_ints ids = {0};
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyList_GET_ITEM(seq, i);
        if (!PyBytes_Check(b)) {
            Py_DECREF(out);
            spm_ints_free(&ids);
            return PyErr_Format(PyExc_TypeError, "encode_batch expects bytes");
        }
        ids.n = 0;
        int rc;
        const char *p = PyBytes_AS_STRING(b);
        const size_t len = (size_t)PyBytes_GET_SIZE(b);
        Py_BEGIN_ALLOW_THREADS rc = spm_encode(m, (const uint8_t *)p, len, &ids, 0);
        Py_END_ALLOW_THREADS if (rc) {
            Py_DECREF(out);
            spm_ints_free(&ids);
            return PyErr_NoMemory();
        }
        PyObject *L = ids_list_h(get_handle(cap), &ids, 3);
        if (!L) {
            Py_DECREF(out);
            spm_ints_free(&ids);
            return NULL;
        }
        PyList_SET_ITEM(out, i, L);
    }
    spm_ints_free(&ids);
    return out;
}

/* normalize(handle, utf8 bytes) -> (normalized bytes, n2o bytes of int32) */
static PyObject *py_normalize(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in;
    if (!PyArg_ParseTuple(args, "Oy*", &cap, &in)) return NULL;
    spm_model *m = get_model(cap);
    if (!m) {
        PyBuffer_Release(&in);
        return NULL;
    }
    spm_bytes out = {0};
    spm_ints n2o = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_normalize(m, in.buf, (size_t)in.len, &out, &n2o);
    Py_END_ALLOW_THREADS PyBuffer_Release(&in);
    if (rc) {
        spm_bytes_free(&out);
        spm_ints_free(&n2o);
        return PyErr_NoMemory();
    }
    PyObject *r = Py_BuildValue("(y#y#)", out.p ? (const char *)out.p : "", (Py_ssize_t)out.n,
                                n2o.p ? (const char *)n2o.p : "", (Py_ssize_t)(n2o.n * 4));
    spm_bytes_free(&out);
    spm_ints_free(&n2o);
    return r;
}

/* the model over `in` (released here) into tri; -1 with the Python error set */
static int run_model(PyObject *cap, Py_buffer *in, spm_ints *tri) {
    spm_model *m = get_model(cap);
    if (!m) {
        PyBuffer_Release(in);
        return -1;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_model_run(m, in->buf, (size_t)in->len, tri);
    Py_END_ALLOW_THREADS PyBuffer_Release(in);
    if (rc) {
        spm_ints_free(tri);
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* model(handle, normalized bytes) -> triples (id, begin, end) as int32 bytes, before unk handling */
static PyObject *py_model(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in;
    spm_ints tri = {0};
    if (!PyArg_ParseTuple(args, "Oy*", &cap, &in) || run_model(cap, &in, &tri)) return NULL;
    PyObject *r = triples_bytes(&tri);
    spm_ints_free(&tri);
    return r;
}

/* model_ids(handle, normalized bytes, unk_id) -> list of ids, or None when the unknown id occurs (the
 * caller then fuses and looks up unknown runs) */
static PyObject *py_model_ids(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in;
    int unk;
    spm_ints tri = {0};
    if (!PyArg_ParseTuple(args, "Oy*i", &cap, &in, &unk) || run_model(cap, &in, &tri)) return NULL;
    for (size_t k = 0; k < tri.n; k += 3)
        if (tri.p[k] == unk || tri.p[k] < 0) {
            spm_ints_free(&tri);
            Py_RETURN_NONE;
        }
    PyObject *r = ids_list(&tri, 3);
    spm_ints_free(&tri);
    return r;
}

/* ------------------------------------------------------------------------------------------ */
/* HF pipelines: hf_make(model handle, ops, pre, graphemes, merge table, byte_tok, flags) -> handle;
 * hf_encode(handle, utf8, at_start) -> ids, or None when tokenizers would raise */

#define HF_MAX_BUF (2 * SPM_HF_MAX_OPS + 8)

typedef struct {
    spm_hf h;
    PyObject *model; /* the model capsule, kept alive */
    PyObject *keep;  /* the argument tuple (the bytes the ops point into) */
    Py_buffer buf[HF_MAX_BUF];
    int nbuf;
    void *mcopy; /* an aligned copy of the merge table when its buffer was not aligned */
} hf_handle;

static void hf_handle_free(PyObject *cap) {
    hf_handle *x = (hf_handle *)PyCapsule_GetPointer(cap, "fstok.spm_hf");
    if (!x) return;
    for (int i = 0; i < x->nbuf; i++) PyBuffer_Release(&x->buf[i]);
    spm_hf_free(&x->h);
    free(x->mcopy);
    Py_XDECREF(x->model);
    Py_XDECREF(x->keep);
    free(x);
}

static const void *hf_buf(hf_handle *x, PyObject *o, Py_ssize_t *len) {
    if (o == Py_None) {
        *len = 0;
        return NULL;
    }
    if (x->nbuf >= HF_MAX_BUF) {
        PyErr_SetString(PyExc_ValueError, "too many arrays");
        return (const void *)-1;
    }
    if (PyObject_GetBuffer(o, &x->buf[x->nbuf], PyBUF_SIMPLE) < 0) return (const void *)-1;
    *len = x->buf[x->nbuf].len;
    return x->buf[x->nbuf++].buf;
}

static PyObject *py_hf_make(PyObject *self, PyObject *args) {
    PyObject *model, *ops, *rep, *wsep, *gs, *ge, *gb, *mt, *byte_tok, *cut = Py_None;
    int pre, scheme, split, is_bpe, byte_fallback, fuse_unk, ignore_merges;
    if (!PyArg_ParseTuple(args, "OO!iiiSSOOOOOiiii|O", &model, &PyList_Type, &ops, &pre, &scheme, &split, &rep, &wsep,
                          &gs, &ge, &gb, &mt, &byte_tok, &is_bpe, &byte_fallback, &fuse_unk, &ignore_merges, &cut))
        return NULL;
    if (!get_model(model)) return NULL;
    if (PyList_GET_SIZE(ops) > SPM_HF_MAX_OPS) return PyErr_Format(PyExc_ValueError, "too many normalizer steps");
    if (PyBytes_GET_SIZE(rep) > 4 || PyBytes_GET_SIZE(wsep) > 4)
        return PyErr_Format(PyExc_ValueError, "replacement or separator longer than 4 bytes");
    hf_handle *x = (hf_handle *)calloc(1, sizeof(hf_handle));
    if (!x) return PyErr_NoMemory();
    Py_INCREF(model);
    x->model = model;
    Py_INCREF(args);
    x->keep = args;
    spm_hf *h = &x->h;
    Py_ssize_t len;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(ops); i++) {
        PyObject *t = PyList_GET_ITEM(ops, i), *a, *b, *units, *norm;
        spm_hf_op *op = &h->ops[h->n_ops];
        unsigned int k, k_max;
        if (!PyArg_ParseTuple(t, "iSSIIOO", &op->kind, &a, &b, &k, &k_max, &units, &norm)) goto fail;
        op->a = (const uint8_t *)PyBytes_AS_STRING(a);
        op->na = (size_t)PyBytes_GET_SIZE(a);
        op->b = (const uint8_t *)PyBytes_AS_STRING(b);
        op->nb = (size_t)PyBytes_GET_SIZE(b);
        op->k = k;
        op->k_max = k_max;
        if ((op->units = hf_buf(x, units, &len)) == (const void *)-1) goto fail;
        op->n_units = (uint32_t)(len / 4);
        if ((op->norm = hf_buf(x, norm, &len)) == (const void *)-1) goto fail;
        op->n_norm = (uint32_t)len;
        if (op->kind == HFN_PRECOMPILED && (!op->n_units || !op->n_norm || op->norm[op->n_norm - 1] != 0)) {
            PyErr_SetString(PyExc_ValueError, "a charsmap without units or a NUL-terminated replacement table");
            goto fail;
        }
        if ((op->kind == HFN_REPLACE_RUN && (!op->na || !op->k)) || op->kind < 1 || op->kind > 4) {
            PyErr_SetString(PyExc_ValueError, "a normalizer step is malformed");
            goto fail;
        }
        h->n_ops++;
    }
    h->pre = pre;
    h->scheme = scheme;
    h->split = split;
    memcpy(h->rep, PyBytes_AS_STRING(rep), (size_t)PyBytes_GET_SIZE(rep));
    h->nrep = (size_t)PyBytes_GET_SIZE(rep);
    memcpy(h->wsep, PyBytes_AS_STRING(wsep), (size_t)PyBytes_GET_SIZE(wsep));
    h->nwsep = (size_t)PyBytes_GET_SIZE(wsep);
    if (pre == HFP_METASPACE && !h->nrep) {
        PyErr_SetString(PyExc_ValueError, "Metaspace needs a replacement");
        goto fail;
    }
    Py_ssize_t l1, l2, l3;
    if ((h->g_start = hf_buf(x, gs, &l1)) == (const void *)-1) goto fail;
    if ((h->g_end = hf_buf(x, ge, &l2)) == (const void *)-1) goto fail;
    if ((h->g_bits = hf_buf(x, gb, &l3)) == (const void *)-1) goto fail;
    if (l1 != l2 || l1 / 4 != l3) {
        PyErr_SetString(PyExc_ValueError, "grapheme tables disagree in length");
        goto fail;
    }
    h->n_g = (uint32_t)l3;
    if ((h->cut = hf_buf(x, cut, &l1)) == (const void *)-1) goto fail;
    if (h->cut && (l1 != 8192 || !is_bpe || !h->nwsep)) {
        PyErr_SetString(PyExc_ValueError, "cut_pairs: not 8192 bytes, or not for a BPE model cut into words");
        goto fail;
    }
    if (spm_hf_tables_init(h)) goto nomem;
    h->model_bpe = is_bpe;
    h->byte_fallback = byte_fallback;
    h->fuse_unk = fuse_unk;
    h->ignore_merges = ignore_merges;
    {
        Py_buffer bt;
        if (PyObject_GetBuffer(byte_tok, &bt, PyBUF_SIMPLE) < 0) goto fail;
        if (bt.len != 256 * 4) {
            PyBuffer_Release(&bt);
            PyErr_SetString(PyExc_ValueError, "byte_tok must hold 256 int32");
            goto fail;
        }
        memcpy(h->byte_tok, bt.buf, 256 * 4);
        PyBuffer_Release(&bt);
    }
    if (is_bpe) { /* the stored merge table (ValueError "hf_merges: ..."), read in place */
        Py_ssize_t lm;
        const void *T = hf_buf(x, mt, &lm);
        if (T == (const void *)-1) goto fail;
        if (lm % (Py_ssize_t)sizeof(spm_hf_merge)) {
            PyErr_SetString(PyExc_ValueError, "hf_merges: its size is not a whole number of records");
            goto fail;
        }
        const size_t nm = (size_t)lm / sizeof(spm_hf_merge);
        if (T && ((uintptr_t)T & 7)) { /* a bytes object's buffer: read from a copy */
            if (!(x->mcopy = malloc((size_t)lm))) goto nomem;
            memcpy(x->mcopy, T, (size_t)lm);
            T = x->mcopy;
        }
        const char *bad = spm_hf_merges_check((const spm_hf_merge *)T, nm, get_model(model)->n_pieces);
        if (bad) {
            PyErr_SetString(PyExc_ValueError, bad);
            goto fail;
        }
        spm_hf_merges_adopt(h, (const spm_hf_merge *)T, nm);
    }
    if (spm_hf_cache_init(h)) goto nomem;
    return PyCapsule_New(x, "fstok.spm_hf", hf_handle_free);
nomem:
    PyErr_NoMemory();
fail:
    for (int i = 0; i < x->nbuf; i++) PyBuffer_Release(&x->buf[i]);
    spm_hf_free(&x->h);
    free(x->mcopy);
    Py_XDECREF(x->model);
    Py_XDECREF(x->keep);
    free(x);
    return NULL;
}

static PyObject *py_hf_encode(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in;
    int at_start;
    if (!PyArg_ParseTuple(args, "Oy*p", &cap, &in, &at_start)) return NULL;
    hf_handle *x = (hf_handle *)PyCapsule_GetPointer(cap, "fstok.spm_hf");
    spm_model *m = x ? get_model(x->model) : NULL;
    if (!m) {
        PyBuffer_Release(&in);
        return NULL;
    }
    spm_ints ids = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_hf_encode(m, &x->h, in.buf, (size_t)in.len, at_start, &ids);
    Py_END_ALLOW_THREADS PyBuffer_Release(&in);
    if (rc) {
        spm_ints_free(&ids);
        if (rc == 1) Py_RETURN_NONE;
        return PyErr_NoMemory();
    }
    /* pinned ints where this Python pins them (no allocation and no reference count per id), else fresh ones
     * (a 250k vocabulary's shared ints cost two cache misses per id) */
    handle *mh = get_handle(x->model);
    const int pinned = mh ? pin_ints(mh) : 0;
    PyObject *r = pinned < 0 ? NULL : pinned ? ids_list_h(mh, &ids, 1) : ids_list(&ids, 1);
    spm_ints_free(&ids);
    return r;
}

/* The first byte of the first ill-formed UTF-8 sequence in s (Python's strict decoder: no surrogates,
 * overlongs or code points past U+10FFFF), or n */
static size_t utf8_bad_at(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        const uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        size_t k;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF)
            k = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            k = 2;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            k = 3;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else
            return i;
        if (i + k >= n) return i; /* truncated at the end */
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return i;
        i += k + 1;
    }
    return n;
}

/* hf_normalize(handle, utf8) -> bytes: the handle's normalizer steps alone (a tokenizer.json pipeline cuts the
 * normalized text into pieces before its model runs) */
static PyObject *py_hf_normalize(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in;
    if (!PyArg_ParseTuple(args, "Oy*", &cap, &in)) return NULL;
    PyObject *r = NULL;
    hf_handle *x = (hf_handle *)PyCapsule_GetPointer(cap, "fstok.spm_hf");
    if (!x) goto out;
    if (utf8_bad_at((const uint8_t *)in.buf, (size_t)in.len) != (size_t)in.len) {
        PyErr_SetString(PyExc_ValueError, "hf_normalize: the data is not UTF-8");
        goto out;
    }
    spm_bytes o = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_hf_normalize(&x->h, (const uint8_t *)in.buf, (size_t)in.len, &o);
    Py_END_ALLOW_THREADS
    if (rc)
        PyErr_NoMemory();
    else
        r = PyBytes_FromStringAndSize((const char *)o.p, (Py_ssize_t)o.n);
    spm_bytes_free(&o);
out:
    PyBuffer_Release(&in);
    return r;
}

/* hf_encode_spans(handle, utf8, triples, first_ok) -> ids or None: the handle's pre-tokenizer and model on each
 * (start, end, flag) uint32 triple of the normalized UTF-8 (a tokenizer.json pipeline's pieces, the handle
 * without normalizer steps); None where a piece is unknown and the model has no unk_id */
static PyObject *py_hf_encode_spans(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in, tr;
    int first_ok;
    if (!PyArg_ParseTuple(args, "Oy*y*p", &cap, &in, &tr, &first_ok)) return NULL;
    PyObject *r = NULL;
    hf_handle *x = (hf_handle *)PyCapsule_GetPointer(cap, "fstok.spm_hf");
    spm_model *m = x ? get_model(x->model) : NULL;
    if (!m) goto out;
    const size_t nt = (size_t)tr.len / 12, n = (size_t)in.len;
    const uint32_t *tri = (const uint32_t *)tr.buf;
    const uint8_t *s = (const uint8_t *)in.buf;
    int bad = tr.len % 12 || ((uintptr_t)tr.buf & 3) || x->h.n_ops || utf8_bad_at(s, n) != n;
    for (size_t t = 0; t < nt && !bad; t++) {
        const uint32_t a = tri[3 * t], b = tri[3 * t + 1];
        bad = a > b || b > n || (a < n && (s[a] & 0xC0) == 0x80) || (b < n && (s[b] & 0xC0) == 0x80);
    }
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "hf_encode_spans: a handle with normalizer steps, data that is not UTF-8, or a "
                                          "span that is not a character range of it");
        goto out;
    }
    spm_ints ids = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_hf_encode_spans(m, &x->h, s, n, tri, nt, first_ok, &ids, NULL);
    Py_END_ALLOW_THREADS
    if (rc) {
        spm_ints_free(&ids);
        if (rc == 1) {
            Py_INCREF(Py_None);
            r = Py_None;
        } else {
            PyErr_NoMemory();
        }
        goto out;
    }
    handle *mh = get_handle(x->model);
    const int pinned = mh ? pin_ints(mh) : 0;
    r = pinned < 0 ? NULL : pinned ? ids_list_h(mh, &ids, 1) : ids_list(&ids, 1);
    spm_ints_free(&ids);
out:
    PyBuffer_Release(&in);
    PyBuffer_Release(&tr);
    return r;
}

/* UTF-8 validation as a shift-based DFA: a state is a bit offset (a multiple of 6), and bits [state, state + 6)
 * of dfa_row(b) are the state after byte b.  One shift per byte, no branch: a piece arena of a large multilingual
 * vocabulary is mostly multi-byte characters, which the byte-wise checker took a mispredicted branch on */
enum { U8_OK = 0, U8_ERR = 6, U8_N1 = 12, U8_N2 = 18, U8_N3 = 24, U8_E0 = 30, U8_ED = 36, U8_F0 = 42, U8_F4 = 48 };

static uint64_t u8_rows[256];

static void u8_rows_init(void) {
    for (int b = 0; b < 256; b++) {
        uint64_t r = (uint64_t)U8_ERR << U8_ERR; /* (every state not named below goes to the error state) */
#define U8_T(from, to) (r |= (uint64_t)(to) << (from))
        const int cont = b >= 0x80 && b <= 0xBF;
        if (b < 0x80) U8_T(U8_OK, U8_OK);
        else if (b >= 0xC2 && b <= 0xDF) U8_T(U8_OK, U8_N1);
        else if (b == 0xE0) U8_T(U8_OK, U8_E0);
        else if (b == 0xED) U8_T(U8_OK, U8_ED);
        else if (b >= 0xE1 && b <= 0xEF) U8_T(U8_OK, U8_N2);
        else if (b == 0xF0) U8_T(U8_OK, U8_F0);
        else if (b >= 0xF1 && b <= 0xF3) U8_T(U8_OK, U8_N3);
        else if (b == 0xF4) U8_T(U8_OK, U8_F4);
        else if (!cont) U8_T(U8_OK, U8_ERR);
        if (cont) {
            U8_T(U8_OK, U8_ERR);
            U8_T(U8_N1, U8_OK);
            U8_T(U8_N2, U8_N1);
            U8_T(U8_N3, U8_N2);
            U8_T(U8_E0, b >= 0xA0 ? U8_N1 : U8_ERR);
            U8_T(U8_ED, b <= 0x9F ? U8_N1 : U8_ERR);
            U8_T(U8_F0, b >= 0x90 ? U8_N2 : U8_ERR);
            U8_T(U8_F4, b <= 0x8F ? U8_N2 : U8_ERR);
        } else {
            U8_T(U8_N1, U8_ERR), U8_T(U8_N2, U8_ERR), U8_T(U8_N3, U8_ERR);
            U8_T(U8_E0, U8_ERR), U8_T(U8_ED, U8_ERR), U8_T(U8_F0, U8_ERR), U8_T(U8_F4, U8_ERR);
        }
#undef U8_T
        u8_rows[b] = r;
    }
}

/* utf8_bad_at's answer: the DFA over the whole text (8 ASCII bytes at a time between characters), and only
 * an ill-formed text located by the byte-wise checker */
static size_t utf8_bad(const uint8_t *s, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, u8_rows_init);
    if (n >= 256) {
        /* four DFAs in step over four parts (a step of one waits on the table read of its last; four hide that
         * latency), each part starting at a byte that is no continuation byte: in a well-formed text that is a
         * character's start, and a part that ends expecting a continuation has a part after it that does not
         * give one.  The text is well-formed iff every part ends between characters. */
        size_t cut[5];
        cut[0] = 0;
        cut[4] = n;
        for (int k = 1; k < 4; k++) {
            size_t c = n / 4 * (size_t)k;
            while (c < n && (s[c] & 0xC0) == 0x80) c++;
            cut[k] = c < cut[k - 1] ? cut[k - 1] : c;
        }
        size_t len = n;
        for (int k = 0; k < 4; k++) len = cut[k + 1] - cut[k] < len ? cut[k + 1] - cut[k] : len;
        const uint8_t *p0 = s + cut[0], *p1 = s + cut[1], *p2 = s + cut[2], *p3 = s + cut[3];
        uint64_t a = U8_OK, b = U8_OK, c = U8_OK, d = U8_OK;
        for (size_t j = 0; j < len; j++) {
            a = u8_rows[p0[j]] >> (a & 63);
            b = u8_rows[p1[j]] >> (b & 63);
            c = u8_rows[p2[j]] >> (c & 63);
            d = u8_rows[p3[j]] >> (d & 63);
        }
        uint64_t st4[4] = {a, b, c, d};
        int ok = 1;
        for (int k = 0; k < 4; k++) {
            uint64_t t = st4[k];
            for (size_t j = cut[k] + len; j < cut[k + 1]; j++) t = u8_rows[s[j]] >> (t & 63);
            ok &= (t & 63) == U8_OK;
        }
        return ok ? n : utf8_bad_at(s, n);
    }
    uint64_t st = U8_OK;
    size_t i = 0;
    while (i < n) {
        if (st == U8_OK && i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        const size_t e = i + 64 < n ? i + 64 : n;
        for (; i < e; i++) st = u8_rows[s[i]] >> (st & 63);
        st &= 63;
        if (st == U8_ERR) break;
    }
    return (st & 63) == U8_OK ? n : utf8_bad_at(s, n);
}

/* check_pieces(pieces u8, piece_off u32, utf8=True) -> None, or (what, index): "utf8" and the first byte of an
 * ill-formed sequence, "order" and the first offset out of order (or past the blob, or not starting at
 * 0 / ending at its length: index -1), "cut" and an offset inside a character */
static PyObject *py_check_pieces(PyObject *self, PyObject *args) {
    Py_buffer blob, off;
    int utf8 = 1;
    if (!PyArg_ParseTuple(args, "y*y*|p", &blob, &off, &utf8)) return NULL;
    const uint8_t *b = blob.buf;
    const uint32_t *o = off.buf;
    const size_t n = (size_t)blob.len, no = (size_t)off.len / 4;
    PyObject *r = NULL;
    size_t bad;
    if (!no || o[0] != 0 || o[no - 1] != n) {
        r = Py_BuildValue("(sn)", "order", (Py_ssize_t)-1);
        goto done;
    }
    for (size_t i = 1; i < no; i++)
        if (o[i] < o[i - 1]) {
            r = Py_BuildValue("(sn)", "order", (Py_ssize_t)i);
            goto done;
        }
    if (!utf8) {
        r = Py_None;
        Py_INCREF(r);
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS bad = utf8_bad(b, n);
    Py_END_ALLOW_THREADS if (bad < n) {
        r = Py_BuildValue("(sn)", "utf8", (Py_ssize_t)bad);
        goto done;
    }
    for (size_t i = 0; i < no; i++)
        if (o[i] > 0 && o[i] < n && (b[o[i]] & 0xC0) == 0x80) {
            r = Py_BuildValue("(sn)", "cut", (Py_ssize_t)o[i]);
            goto done;
        }
    r = Py_None;
    Py_INCREF(r);
done:
    PyBuffer_Release(&blob);
    PyBuffer_Release(&off);
    return r;
}

/* ft_build((p_first, p_label, p_target, p_value), score, is64, ptype, flags) -> the walking tables of the pieces
 * trie given as a byte trie (the compiler's), as N_FT bytes objects or None, checked as a load checks them */
static PyObject *py_ft_build(PyObject *self, PyObject *args) {
    PyObject *trie, *score, *ptype;
    int is64;
    unsigned int flags;
    if (!PyArg_ParseTuple(args, "O!OiOI", &PyTuple_Type, &trie, &score, &is64, &ptype, &flags)) return NULL;
    if (PyTuple_GET_SIZE(trie) != 4) return PyErr_Format(PyExc_ValueError, "expected 4 trie arrays");
    Py_buffer b[6];
    int nb = 0;
    PyObject *r = NULL;
    spm_ftrie *f = NULL;
    for (int i = 0; i < 4; i++, nb++)
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(trie, i), &b[i], PyBUF_SIMPLE) < 0) goto done;
    if (PyObject_GetBuffer(score, &b[4], PyBUF_SIMPLE) < 0) goto done;
    nb++;
    if (PyObject_GetBuffer(ptype, &b[5], PyBUF_SIMPLE) < 0) goto done;
    nb++;
    spm_model m;
    memset(&m, 0, sizeof m);
    m.n_pieces = (uint32_t)(b[4].len / (is64 ? 8 : 4));
    if (b[5].len != (Py_ssize_t)m.n_pieces) {
        PyErr_SetString(PyExc_ValueError, "ptype and the scores differ in length");
        goto done;
    }
    if (is64)
        m.score64 = b[4].buf;
    else
        m.score = b[4].buf;
    m.ptype = b[5].buf;
    m.flags = flags;
    const char *bad = spm_trie_check(b[0].buf, (size_t)b[0].len / 4, b[1].buf, (size_t)b[1].len, b[2].buf,
                                     (size_t)b[2].len / 4, b[3].buf, (size_t)b[3].len / 4, NULL, 0, m.n_pieces);
    if (bad) {
        PyErr_Format(PyExc_ValueError, "the pieces trie: %s", bad);
        goto done;
    }
    spm_trie t = {b[0].buf, b[1].buf, b[2].buf, b[3].buf, NULL, (uint32_t)(b[3].len / 4)};
    f = spm_ftrie_build(&m, &t);
    spm_ft_tables tab;
    if (!f || spm_ftrie_tables(f, &tab)) {
        PyErr_SetString(PyExc_MemoryError, "the walking tables of the pieces trie could not be built");
        goto done;
    }
    if ((bad = spm_ftrie_check(&m, &tab))) {
        PyErr_Format(PyExc_RuntimeError, "the walking tables built fail their own check: %s", bad);
        goto done;
    }
    const void *q[N_FT] = {tab.nodes, tab.rows, tab.pairs, tab.chars, tab.ascii, tab.small};
    const size_t nbytes[N_FT] = {tab.n_nodes * 32, tab.n_rows * 1024, tab.n_pairs * 8, tab.n_chars * 8,
                                 tab.n_ascii * 4, tab.n_small * 8};
    if (!(r = PyTuple_New(N_FT))) goto done;
    for (int i = 0; i < N_FT; i++) {
        PyObject *o = q[i] ? PyBytes_FromStringAndSize((const char *)q[i], (Py_ssize_t)nbytes[i])
                           : (Py_INCREF(Py_None), Py_None);
        if (!o) {
            Py_CLEAR(r);
            goto done;
        }
        PyTuple_SET_ITEM(r, i, o);
    }
done:
    spm_ftrie_release(f);
    for (int i = 0; i < nb; i++) PyBuffer_Release(&b[i]);
    return r;
}

#include "spm_hf_offsets_py.h"

/* hf_merge_table(a, b, new: int32 arrays of the merge list) -> the merge table to store (bytes) */
static PyObject *py_hf_merge_table(PyObject *self, PyObject *args) {
    Py_buffer A, B, N;
    if (!PyArg_ParseTuple(args, "y*y*y*", &A, &B, &N)) return NULL;
    PyObject *r = NULL;
    spm_hf h;
    memset(&h, 0, sizeof h);
    if (A.len != B.len || A.len != N.len || A.len % 4) {
        PyErr_SetString(PyExc_ValueError, "merge arrays disagree in length");
    } else if (spm_hf_merges_init(&h, A.buf, B.buf, N.buf, (size_t)(A.len / 4))) {
        PyErr_NoMemory();
    } else {
        r = PyBytes_FromStringAndSize((const char *)h.mtab, (Py_ssize_t)((h.mmask + 1) * sizeof(spm_hf_merge)));
    }
    spm_hf_free(&h);
    PyBuffer_Release(&A);
    PyBuffer_Release(&B);
    PyBuffer_Release(&N);
    return r;
}

static PyMethodDef methods[] = {
    {"ft_build", py_ft_build, METH_VARARGS, "ft_build(trie arrays, score, is64, ptype, flags) -> the walking tables to store"},
    {"check_pieces", py_check_pieces, METH_VARARGS, "check_pieces(pieces, piece_off, utf8=True) -> None or (what, index)"},
    {"model_ids", py_model_ids, METH_VARARGS, "model_ids(handle, normalized utf8, unk_id) -> ids or None"},
    {"make", py_make, METH_VARARGS, "build a model handle over validated arrays"},
    {"hf_make", py_hf_make, METH_VARARGS, "build a tokenizer.json pipeline handle over a model handle"},
    {"hf_merge_table", py_hf_merge_table, METH_VARARGS, "hf_merge_table(a, b, new) -> the merge table to store"},
    {"hf_encode", py_hf_encode, METH_VARARGS, "hf_encode(handle, utf8, at_start) -> ids or None"},
    {"hf_normalize", py_hf_normalize, METH_VARARGS, "hf_normalize(handle, utf8) -> bytes: the normalizer steps alone"},
    {"hf_encode_spans", py_hf_encode_spans, METH_VARARGS,
     "hf_encode_spans(handle, utf8, triples, first_ok) -> ids or None: the model on a pipeline's pieces"},
    {"hf_encode_offsets", py_hf_encode_offsets, METH_VARARGS,
     "hf_encode_offsets(handle, span, vocab, unk_tok, texts, cuts) -> [(ids, offsets, words, tokens) or None]"},
    {"encode", py_encode, METH_VARARGS, "encode(handle, utf8, mode=0)"},
    {"encode_batch", py_encode_batch, METH_VARARGS, "encode_batch(handle, [utf8, ...])"},
    {"normalize", py_normalize, METH_VARARGS, "normalize(handle, utf8) -> (bytes, n2o int32 bytes)"},
    {"model", py_model, METH_VARARGS, "model(handle, normalized utf8) -> int32 triples bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_spm", "SentencePiece-family runtime", -1, methods};

PyMODINIT_FUNC PyInit__spm(void) { return PyModule_Create(&moddef); }
