/* fstok.runtime._bpe: the Python binding of the byte-level BPE runtime (oracle: fstok/reference/bpe.py).
 *
 * This file converts arguments and results, manages the GIL and the token-id ints, and calls the cores:
 *   bpe.h / lib_bpe.c   the model tables and the merge encoders of one piece
 *   bpe_runtime.h       model state, memo pool, tables derived at load
 *   bpe_specials.h      special/added token matcher
 *   bpe_piece_cache.h   encoder state, one piece, the per-thread piece cache
 *   bpe_direct.h        direct runs (pieces that cannot merge across their boundaries)
 *   bpe_encode.h        a text: specials, DFA pieces, BPE
 *   bpe_parallel.h      long texts and batches on threads, proven cut points
 *   bpe_builders.h      the compiler's table builders (not on the encode path)
 * The cores are headers of static functions compiled into this one translation unit, so the hot loop
 * inlines exactly as when it was one file.
 *
 * Performance notes
 *  - Tables are views into the artifact (mmap); nothing is parsed or rebuilt at load.
 *  - Each pre-token: whole-span hash lookup first (most words are one token), then the O(n^2) sweep
 *    for short spans, the linear backtracking encoder for long ones (see bpe.h).
 *  - Output lists reuse one cached PyLong per token id, so building a list costs an INCREF per token.
 *  - The GIL is released for all encoding work; batches run on pthreads.
 */
/* fstok-lib: bpe dfa */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#include "bpe.h"
#include "pyids.h"
#include "tpool.h"
#include "dfa.h"
#include "bpe_builders.h"
#include "bpe_encode.h"
#include "bpe_parallel.h"
#include "bpe_piece_cache.h"
#include "bpe_runtime.h"
#include "bpe_specials.h"
#include "utf8_bitmap.h"
#include "bpe_validate.h"


/* ================================================================ helpers */

static int get_view(PyObject *dict, const char *name, Py_buffer *view, Py_ssize_t itemsize, int required) {
    PyObject *o = PyDict_GetItemString(dict, name);
    if (!o) {
        if (!required) {
            memset(view, 0, sizeof(*view));
            return 0;
        }
        PyErr_Format(PyExc_KeyError, "missing BPE table %s", name);
        return -1;
    }
    if (PyObject_GetBuffer(o, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (itemsize && view->len % itemsize) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "BPE table %s has a bad size", name);
        return -1;
    }
    return 0;
}

static PyObject *vec_to_bytes(const uint32_t *ids, size_t n) {
    return PyBytes_FromStringAndSize((const char *)ids, (Py_ssize_t)(n * sizeof(uint32_t)));
}

/* ================================================================ Model */

enum { V_INT_EXT, V_INFO, V_PAIR_TAB, V_BYTE_PAIR, V_SPAN_TAB, V_DEC_BYTES, V_DEC_OFF, V_DEC_KIND, V_TRIE, V_BYTE_TOK,
       V_PAIR_BLOOM, V_SPAN_HOT, V_PAIR_HOT, V_SPAN_BLOOM, V_SEG_BIG, V_SEG_TRI, V_COUNT };
static const char *VIEW_NAMES[V_COUNT] = {"int_ext",  "int_info", "pair_tab", "byte_pair", "span_tab",  "dec_bytes",
                                          "dec_off",  "dec_kind", "trie",     "byte_tok",  "pair_bloom", "span_hot",
                                          "pair_hot", "span_bloom", "seg_big", "seg_tri"};
static const Py_ssize_t VIEW_SIZES[V_COUNT] = {4, 16, 8, 4, 16, 1, 4, 1, 12, 4, 8, 16, 8, 8, 1, 4};

typedef struct {
    PyObject_HEAD bpe_rt r; /* everything the cores read (bpe_runtime.h) */
    Py_buffer views[V_COUNT];
    int nviews;
    PyObject **ints; /* cached PyLong per external id */
    int ints_pinned; /* ints[] are pinned (pyids.h): items need no Py_INCREF, the model owns no reference */
    Py_buffer dfa_views[3 * MAX_LEVELS];
    int n_dfa_views;
} ModelObject;

static void Model_dealloc(ModelObject *self) {
    bpe_rt_free(&self->r);
    for (int i = 0; i < self->nviews; i++) PyBuffer_Release(&self->views[i]);
    for (int i = 0; i < self->n_dfa_views; i++) PyBuffer_Release(&self->dfa_views[i]);
    if (self->ints) {
        if (!self->ints_pinned)
            for (uint32_t i = 0; i < self->r.m.n_ext; i++) Py_XDECREF(self->ints[i]);
        free(self->ints);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Model_init(ModelObject *self, PyObject *args, PyObject *kw) {
    PyObject *tables;
    unsigned int n_int, n_ext, da_size, max_span_len, short_max;
    int pair_bits, backtrack_ok;
    int trie_has_spans;
    if (!PyArg_ParseTuple(args, "O!IIIiIpIp", &PyDict_Type, &tables, &n_int, &n_ext, &da_size, &pair_bits,
                          &max_span_len, &backtrack_ok, &short_max, &trie_has_spans))
        return -1;
    if (self->nviews) {
        PyErr_SetString(PyExc_RuntimeError, "Model already initialized");
        return -1;
    }
    self->r.pt_mode = -1;
    self->r.serial = __atomic_add_fetch(&model_serial_counter, 1, __ATOMIC_RELAXED);
    self->r.use_memo = 1;
    pthread_mutex_init(&self->r.pool_mu, NULL);
    for (int i = 0; i < V_COUNT; i++) {
        if (get_view(tables, VIEW_NAMES[i], &self->views[i], VIEW_SIZES[i], 1) < 0) return -1;
        self->nviews = i + 1;
    }
    bpe_model *m = &self->r.m;
    m->n_int = n_int;
    m->n_ext = n_ext;
    m->int_ext = (const uint32_t *)self->views[V_INT_EXT].buf;
    m->info = (const uint32_t *)self->views[V_INFO].buf;
    m->pair_tab = (const uint64_t *)self->views[V_PAIR_TAB].buf;
    m->pair_mask = (uint64_t)(self->views[V_PAIR_TAB].len / 8) - 1;
    m->pair_shift = 64 - pair_bits;
    {
        size_t slots = (size_t)self->views[V_PAIR_HOT].len / 8;
        int hb = 0;
        while (((size_t)1 << hb) < slots) hb++;
        if (slots < 16 || ((size_t)1 << hb) != slots) {
            PyErr_SetString(PyExc_ValueError, "hot pair table size is not a power of two");
            return -1;
        }
        m->pair_hot = (const uint64_t *)self->views[V_PAIR_HOT].buf;
        m->pair_hot_mask = slots - 1;
        m->pair_hot_shift = 64 - hb;
    }
    m->byte_pair = (const uint32_t *)self->views[V_BYTE_PAIR].buf;
    m->pair_bloom = (const uint64_t *)self->views[V_PAIR_BLOOM].buf;
    {
        size_t words = (size_t)self->views[V_PAIR_BLOOM].len / 8;
        int bb = 6;
        while (((size_t)1 << (bb - 6)) < words) bb++;
        if (((size_t)1 << (bb - 6)) != words) {
            PyErr_SetString(PyExc_ValueError, "pair bloom size is not a power of two");
            return -1;
        }
        m->bloom_shift = 64 - bb;
    }
    m->span_tab = (const uint64_t *)self->views[V_SPAN_TAB].buf;
    m->span_mask = (uint64_t)(self->views[V_SPAN_TAB].len / 16) - 1;
    m->span_hot = (const uint64_t *)self->views[V_SPAN_HOT].buf;
    m->hot_mask = (uint64_t)(self->views[V_SPAN_HOT].len / 16) - 1;
    m->dec_bytes = (const uint8_t *)self->views[V_DEC_BYTES].buf;
    m->dec_off = (const uint32_t *)self->views[V_DEC_OFF].buf;
    m->dec_kind = (const uint8_t *)self->views[V_DEC_KIND].buf;
    m->trie = (const uint32_t *)self->views[V_TRIE].buf;
    m->da_size = da_size;
    m->max_span_len = max_span_len;
    m->backtrack_ok = backtrack_ok;
    m->nm_use = !backtrack_ok;
    self->r.bt_valid = backtrack_ok;
    m->trie_has_spans = trie_has_spans;
    m->short_max = short_max;
    m->hash_max = short_max + 8;
    m->short_max_mb = short_max;
    /* the sizes every index below relies on */
    if ((size_t)self->views[V_BYTE_TOK].len != 1024 || (size_t)self->views[V_DEC_OFF].len / 4 != (size_t)n_ext + 1 ||
        (size_t)self->views[V_DEC_KIND].len != n_ext || (size_t)self->views[V_INT_EXT].len / 4 != n_int || (size_t)self->views[V_INFO].len / 16 != n_int ||
        n_int >= BPE_MAX_INTERNAL - 1 || (size_t)self->views[V_TRIE].len / 12 != da_size || pair_bits < 4 ||
        pair_bits > 40 || (uint64_t)self->views[V_PAIR_TAB].len / 8 != (1ull << pair_bits) ||
        (size_t)self->views[V_BYTE_PAIR].len != 65536 * 4 || (self->views[V_SPAN_TAB].len / 16) < 2 ||
        ((self->views[V_SPAN_TAB].len / 16) & (self->views[V_SPAN_TAB].len / 16 - 1)) ||
        (self->views[V_SPAN_HOT].len / 16) < 2 || ((self->views[V_SPAN_HOT].len / 16) & (self->views[V_SPAN_HOT].len / 16 - 1)) ||
        (self->views[V_SPAN_BLOOM].len / 8) < 64 ||
        ((self->views[V_SPAN_BLOOM].len / 8) & (self->views[V_SPAN_BLOOM].len / 8 - 1)) ||
        (size_t)self->views[V_SEG_BIG].len != 65536 ||
        (size_t)self->views[V_SEG_TRI].len != ((size_t)1 << BPE_SEG_TRI_BITS) / 8 ||
        m->dec_off[n_ext] != (uint64_t)self->views[V_DEC_BYTES].len) { /* (the length bpe_model_place copies) */
        PyErr_SetString(PyExc_ValueError, "BPE tables have inconsistent sizes");
        return -1;
    }
    memcpy(m->byte_tok, self->views[V_BYTE_TOK].buf, 256 * 4);
    m->int_is_ext = 1;
    for (uint32_t i = 0; i < n_int; i++)
        if (m->int_ext[i] != i) {
            m->int_is_ext = 0;
            break;
        }
    /* The tables are proven where the encoders will read them: after bpe_model_place has copied the randomly probed
     * ones into private memory (so a mapped file rewritten later cannot change what was proven), in one pass over
     * each table while it is still in the cache from the copy (bpe_validate.h; the Python loader names the first bad
     * element when this fails).  Then the tables derived from them. */
    int rc;
    size_t n_bloom = (size_t)self->views[V_PAIR_BLOOM].len / 8, nbytes = (size_t)self->views[V_DEC_BYTES].len;
    bpe_model_place(m); /* (with the GIL: its first call reads the machine's settings into a static) */
    Py_BEGIN_ALLOW_THREADS /* (the model is not visible to any other thread yet) */
    rc = bpe_tables_ok(n_int, n_ext, da_size, max_span_len, backtrack_ok, nbytes, m->dec_off, (size_t)n_ext + 1,
                       m->dec_kind, n_ext, m->int_ext, n_int, m->info, 4 * (size_t)n_int, m->pair_tab,
                       (size_t)m->pair_mask + 1, m->pair_hot, (size_t)m->pair_hot_mask + 1, n_bloom, m->byte_pair, 65536,
                       m->span_tab, 2 * ((size_t)m->span_mask + 1), m->span_hot, 2 * ((size_t)m->hot_mask + 1), m->trie,
                       3 * (size_t)da_size, m->byte_tok, 256, (size_t)self->views[V_SPAN_BLOOM].len / 8,
                       (const uint8_t *)self->views[V_SEG_BIG].buf, 65536, (size_t)self->views[V_SEG_TRI].len / 4);
    if (rc == 0) {
        bpe_model_prepare(m); /* optional tables derived at load: none on allocation failure */
        /* the filters stored by the compiler (bpe_builders.h bpe_filters_build): views, like the tables */
        m->span_bloom = (const uint64_t *)self->views[V_SPAN_BLOOM].buf;
        m->span_bloom_mask = (uint64_t)(self->views[V_SPAN_BLOOM].len / 8) - 1;
        m->seg_big = (const uint8_t *)self->views[V_SEG_BIG].buf;
        m->seg_tri = (const uint32_t *)self->views[V_SEG_TRI].buf;
        build_direct_tables(&self->r);
    }
    Py_END_ALLOW_THREADS
    if (rc) {
        if (rc < 0) PyErr_NoMemory();
        else PyErr_SetString(PyExc_ValueError, "the tables fail the runtime's structural check (bpe_validate.h)");
        return -1;
    }
    return 0;
}

static int ensure_ints(ModelObject *self) {
    if (self->ints) return 0;
    PyObject **ints = (PyObject **)calloc(self->r.m.n_ext ? self->r.m.n_ext : 1, sizeof(PyObject *));
    if (!ints) {
        PyErr_NoMemory();
        return -1;
    }
    int pinned = pyids_pinned_ints(ints, self->r.m.n_ext);
    if (pinned < 0) {
        free(ints);
        return -1;
    }
    self->ints_pinned = pinned;
    for (uint32_t i = 0; i < self->r.m.n_ext && !pinned; i++) {
        ints[i] = PyLong_FromUnsignedLong(i);
        if (!ints[i]) {
            for (uint32_t j = 0; j < i; j++) Py_DECREF(ints[j]);
            free(ints);
            return -1;
        }
    }
    self->ints = ints;
    return 0;
}

static PyObject *ids_to_list(ModelObject *self, const uint32_t *ids, size_t n) {
    if (ensure_ints(self) < 0) return NULL;
    if (self->ints_pinned) return pyids_list_pinned(self->ints, self->r.m.n_ext, ids, n);
    return pyids_list_from_ids(self->ints, self->r.m.n_ext, ids, n);
}


static PyObject *finish(ModelObject *self, bpe_vec *v, int rc, int kind) {
    PyObject *res = NULL;
    if (rc) PyErr_NoMemory();
    else if (kind == OUT_LIST) res = ids_to_list(self, v->ids, v->len);
    else if (kind == OUT_BYTES) res = vec_to_bytes(v->ids, v->len);
    else res = PyLong_FromSize_t(v->len);
    free(v->ids);
    return res;
}

enum { OUT_OFFSETS = 3 };

static PyObject *enc_result(ModelObject *self, enc_state *st, int kind);

/* encode_spans(data, spans u32[3k], out_kind=0, suffix=-1)
 * spans: (start, end, literal) triples of byte offsets into data; literal != 0xFFFFFFFF emits that id for
 * the range (a special token), otherwise data[start:end) is one pre-token.
 * out_kind: 0 list, 1 bytes (u32 ids), 2 count, 3 (list, bytes of u32 token start byte offsets). */
static PyObject *Model_encode_spans(ModelObject *self, PyObject *args) {
    Py_buffer data, spans;
    int kind = OUT_LIST, suffix = -1;
    if (!PyArg_ParseTuple(args, "y*y*|ii", &data, &spans, &kind, &suffix)) return NULL;
    const uint8_t *s = (const uint8_t *)data.buf;
    const uint32_t *sp = (const uint32_t *)spans.buf;
    size_t k = (size_t)spans.len / 12, n = (size_t)data.len;
    if (suffix < -1 || suffix > 255 || (suffix >= 0 && kind == OUT_OFFSETS)) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&spans);
        PyErr_SetString(PyExc_ValueError, "suffix must be a byte (ids or a count only), or -1");
        return NULL;
    }
    bpe_vec v = {0}, st = {0};
    int rc = 0;
    for (size_t i = 0; i < k; i++)
        if (sp[3 * i] > sp[3 * i + 1] || sp[3 * i + 1] > n) {
            PyBuffer_Release(&data);
            PyBuffer_Release(&spans);
            PyErr_SetString(PyExc_ValueError, "span out of range");
            return NULL;
        }
    const bpe_model *m = &self->r.m;
    if (kind != OUT_OFFSETS) { /* ids only: the pieces through the piece cache (encode_triples_cached) */
        enc_state es = {0};
        es.count_only = kind == OUT_COUNT;
        es.text_len = n;
        enc_attach_memo(&self->r, &es);
        if (es.memo || suffix >= 0) {
            Py_BEGIN_ALLOW_THREADS
            rc = bpe_vec_reserve(&es.ids, n / 3 + 16) ||
                 (suffix >= 0 ? encode_triples_suffixed(&self->r, s, sp, k, (uint8_t)suffix, &es)
                              : encode_triples_cached(&self->r, s, n, sp, k, &es));
            Py_END_ALLOW_THREADS
            PyBuffer_Release(&data);
            PyBuffer_Release(&spans);
            memo_return(&self->r, es.memo);
            es.memo = NULL;
            if (rc) {
                enc_free(&es);
                return PyErr_NoMemory();
            }
            return enc_result(self, &es, kind);
        }
    }
    Py_BEGIN_ALLOW_THREADS
    rc = bpe_vec_reserve(&v, n / 3 + 16);
    for (size_t i = 0; i < k && !rc; i++) {
        size_t base = v.len;
        uint32_t a = sp[3 * i], b = sp[3 * i + 1], lit = sp[3 * i + 2];
        if (lit != BPE_NONE) {
            rc = bpe_vec_reserve(&v, 1);
            if (!rc) v.ids[v.len++] = lit;
        } else {
            rc = bpe_encode_span(m, s + a, b - a, &v);
        }
        if (kind == OUT_OFFSETS && !rc) {
            rc = bpe_vec_reserve(&st, v.len - base);
            uint32_t pos = a;
            for (size_t j = base; j < v.len && !rc; j++) {
                st.ids[st.len++] = pos;
                uint32_t t = v.ids[j];
                if (lit == BPE_NONE && t < m->n_ext) pos += m->dec_off[t + 1] - m->dec_off[t];
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&spans);
    if (kind != OUT_OFFSETS) {
        free(st.ids);
        return finish(self, &v, rc, kind);
    }
    PyObject *starts = rc ? NULL : vec_to_bytes(st.ids, st.len);
    free(st.ids);
    if (rc || !starts) {
        free(v.ids);
        Py_XDECREF(starts);
        return rc ? PyErr_NoMemory() : NULL;
    }
    PyObject *ids = finish(self, &v, 0, OUT_LIST);
    if (!ids) {
        Py_DECREF(starts);
        return NULL;
    }
    PyObject *res = PyTuple_Pack(2, ids, starts);
    Py_DECREF(ids);
    Py_DECREF(starts);
    return res;
}

/* encode_piece(data, mode=0): 0 runtime choice (whole-span lookup first), 1 short, 2 backtrack, 3 heap,
 * 4 bucket queue (1-4 skip the whole-span lookup). Returns external ids. */
static PyObject *Model_encode_piece(ModelObject *self, PyObject *args) {
    Py_buffer data;
    int mode = 0;
    if (!PyArg_ParseTuple(args, "y*|i", &data, &mode)) return NULL;
    if ((mode == 2 || mode == 4 || mode == 5) && !self->r.m.backtrack_ok) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "backtracking encoder is not valid for this vocabulary");
        return NULL;
    }
    bpe_vec v = {0};
    int rc;
    const uint8_t *s = (const uint8_t *)data.buf;
    size_t n = (size_t)data.len;
    Py_BEGIN_ALLOW_THREADS
    if (mode == 0) rc = bpe_encode_span(&self->r.m, s, n, &v);
    else {
        rc = mode == 1 ? bpe_encode_short(&self->r.m, s, n, &v)
           : mode == 2 ? bpe_encode_backtrack(&self->r.m, s, n, &v)
           : mode == 4 ? bpe_encode_bucket(&self->r.m, s, n, &v)
           : mode == 5 ? bpe_encode_window(&self->r.m, s, n, &v)
                       : bpe_encode_heap(&self->r.m, s, n, &v);
        if (!rc)
            for (size_t i = 0; i < v.len; i++) v.ids[i] = self->r.m.int_ext[v.ids[i]];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return finish(self, &v, rc, OUT_LIST);
}

/* decode_bytes(ids: sequence of int or a u32 buffer) -> bytes; raises KeyError on unknown ids */
static PyObject *Model_decode_bytes(ModelObject *self, PyObject *arg) {
    const bpe_model *m = &self->r.m;
    PyObject *seq = PySequence_Fast(arg, "decode expects a sequence of token ids");
    if (!seq) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    size_t total = 0;
    uint32_t *ids = (uint32_t *)malloc((n ? n : 1) * sizeof(uint32_t));
    if (!ids) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = items[i];
        if (!PyLong_Check(o)) {
            PyErr_Format(PyExc_TypeError, "token ids must be int, got %.80s", Py_TYPE(o)->tp_name);
            goto fail;
        }
        long long t = PyLong_AsLongLong(o);
        if (t == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            t = -1;
        }
        if (t < 0 || t >= m->n_ext || m->dec_kind[t] == 0) {
            PyObject *k = PyLong_FromLongLong(t);
            if (t == -1) {
                Py_XDECREF(k);
                k = o;
                Py_INCREF(k);
            }
            PyErr_SetObject(PyExc_KeyError, k);
            Py_XDECREF(k);
            goto fail;
        }
        ids[i] = (uint32_t)t;
        total += m->dec_off[t + 1] - m->dec_off[t];
    }
    {
        PyObject *out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
        if (!out) goto fail;
        char *p = PyBytes_AS_STRING(out);
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t o = m->dec_off[ids[i]], e = m->dec_off[ids[i] + 1];
            memcpy(p, m->dec_bytes + o, e - o);
            p += e - o;
        }
        free(ids);
        Py_DECREF(seq);
        return out;
    }
fail:
    free(ids);
    Py_DECREF(seq);
    return NULL;
}

static PyObject *Model_span_lookup(ModelObject *self, PyObject *args) {
    Py_buffer data;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    uint32_t id = bpe_span_get(&self->r.m, (const uint8_t *)data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    if (id == BPE_NONE) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(id);
}

/* ================================================================ pre-tokenizer + special tokens */

/* set_pretokenizer(mode, levels): mode 0 find (one level) / 1 split (0..16 levels);
 * levels: tuple of (trans u32, classes u8[256], accept u8, n_states, shift, start, eoi, n_boundary) */
static PyObject *Model_set_pretokenizer(ModelObject *self, PyObject *args) {
    int mode;
    PyObject *levels;
    if (!PyArg_ParseTuple(args, "iO!", &mode, &PyTuple_Type, &levels)) return NULL;
    Py_ssize_t nl = PyTuple_GET_SIZE(levels);
    if (self->r.pt_mode != -1) {
        PyErr_SetString(PyExc_RuntimeError, "pre-tokenizer already set");
        return NULL;
    }
    if ((mode != 0 && mode != 1) || nl > MAX_LEVELS || (mode == 0 && nl != 1)) {
        PyErr_SetString(PyExc_ValueError, "bad pre-tokenizer mode / level count");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < nl; i++) {
        PyObject *tr, *cl, *ac;
        unsigned int n_states, shift, start, eoi, n_boundary;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(levels, i), "OOOIIIII", &tr, &cl, &ac, &n_states, &shift, &start, &eoi,
                              &n_boundary))
            return NULL;
        Py_buffer *v = &self->dfa_views[self->n_dfa_views];
        if (PyObject_GetBuffer(tr, &v[0], PyBUF_C_CONTIGUOUS) < 0) return NULL;
        self->n_dfa_views++;
        if (PyObject_GetBuffer(cl, &v[1], PyBUF_C_CONTIGUOUS) < 0) return NULL;
        self->n_dfa_views++;
        if (PyObject_GetBuffer(ac, &v[2], PyBUF_C_CONTIGUOUS) < 0) return NULL;
        self->n_dfa_views++;
        if (shift > 9 || n_states < 2 || (uint64_t)v[0].len != ((uint64_t)n_states << shift) * 4 || v[1].len != 256 ||
            (uint64_t)v[2].len != n_states) {
            PyErr_SetString(PyExc_ValueError, "DFA table sizes do not match");
            return NULL;
        }
        fstok_dfa_init(&self->r.lv[i], (const uint32_t *)v[0].buf, (const uint8_t *)v[1].buf, (const uint8_t *)v[2].buf,
                       n_states, shift, start, eoi, n_boundary);
        char err[200];
        if (fstok_dfa_check(&self->r.lv[i], err, sizeof err)) {
            PyErr_Format(PyExc_ValueError, "pre-tokenizer DFA level %zd is invalid: %s", i, err);
            return NULL;
        }
    }
    self->r.n_levels = (int)nl;
    self->r.pt_mode = mode;
    Py_RETURN_NONE;
}

/* --- special / added token matcher (bpe_specials.h) */
typedef struct {
    PyObject_HEAD bpe_specials s;
} SpecialsObject;

static void Specials_dealloc(SpecialsObject *self) {
    free(self->s.fc), free(self->s.sib), free(self->s.lab), free(self->s.id);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Specials([(bytes, id), ...]) */
static int Specials_init(SpecialsObject *self, PyObject *args, PyObject *kw) {
    PyObject *seq;
    if (!PyArg_ParseTuple(args, "O", &seq)) return -1;
    PyObject *fast = PySequence_Fast(seq, "Specials expects a sequence of (bytes, id)");
    if (!fast) return -1;
    Py_ssize_t k = PySequence_Fast_GET_SIZE(fast);
    size_t total = 1;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 2 || !PyBytes_Check(PyTuple_GET_ITEM(it, 0))) {
            Py_DECREF(fast);
            PyErr_SetString(PyExc_TypeError, "Specials expects (bytes, id) pairs");
            return -1;
        }
        total += (size_t)PyBytes_GET_SIZE(PyTuple_GET_ITEM(it, 0));
    }
    free(self->s.fc), free(self->s.sib), free(self->s.lab), free(self->s.id);
    self->s.fc = (uint32_t *)malloc(total * 4);
    self->s.sib = (uint32_t *)malloc(total * 4);
    self->s.lab = (uint8_t *)malloc(total);
    self->s.id = (uint32_t *)malloc(total * 4);
    if (!self->s.fc || !self->s.sib || !self->s.lab || !self->s.id) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    memset(self->s.first, 0, 256);
    self->s.nn = 1;
    self->s.fc[0] = self->s.sib[0] = self->s.id[0] = BPE_NONE;
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(fast, i);
        const uint8_t *b = (const uint8_t *)PyBytes_AS_STRING(PyTuple_GET_ITEM(it, 0));
        Py_ssize_t len = PyBytes_GET_SIZE(PyTuple_GET_ITEM(it, 0));
        unsigned long tid = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(it, 1));
        if (PyErr_Occurred() || tid >= BPE_NONE || len == 0) {
            Py_DECREF(fast);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bad special token");
            return -1;
        }
        self->s.first[b[0]] = 1;
        uint32_t node = 0;
        for (Py_ssize_t j = 0; j < len; j++) {
            uint32_t ch = self->s.fc[node];
            while (ch != BPE_NONE && self->s.lab[ch] != b[j]) ch = self->s.sib[ch];
            if (ch == BPE_NONE) {
                ch = self->s.nn++;
                self->s.lab[ch] = b[j];
                self->s.fc[ch] = BPE_NONE;
                self->s.id[ch] = BPE_NONE;
                self->s.sib[ch] = self->s.fc[node];
                self->s.fc[node] = ch;
            }
            node = ch;
        }
        self->s.id[node] = (uint32_t)tid;
    }
    Py_DECREF(fast);
    self->s.n_first = 0;
    for (int c = 0; c < 256; c++)
        if (self->s.first[c]) {
            if (self->s.n_first < 4) self->s.few[self->s.n_first] = (uint8_t)c;
            self->s.n_first++, self->s.only_first = (uint8_t)c;
        }
    for (int k = self->s.n_first; k < 4; k++) self->s.few[k] = self->s.few[0];
    return 0;
}

/* leftmost-longest special token in s[pos:n): returns its start (or n) and sets *len, *id */
static PyObject *Specials_find(SpecialsObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t pos = 0;
    if (!PyArg_ParseTuple(args, "y*|n", &data, &pos)) return NULL;
    size_t len = 0;
    uint32_t id = BPE_NONE;
    size_t n = (size_t)data.len;
    size_t at = specials_find(&self->s, (const uint8_t *)data.buf, n, pos < 0 ? 0 : (size_t)pos, &len, &id);
    PyBuffer_Release(&data);
    if (at >= n) Py_RETURN_NONE;
    return Py_BuildValue("nnI", (Py_ssize_t)at, (Py_ssize_t)len, id);
}

static PyMethodDef Specials_methods[] = {
    {"find", (PyCFunction)Specials_find, METH_VARARGS, "(start, length, id) of the leftmost-longest match, or None"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SpecialsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fstok.runtime._bpe.Specials",
    .tp_basicsize = sizeof(SpecialsObject),
    .tp_dealloc = (destructor)Specials_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a set of special-token strings, matched leftmost-longest",
    .tp_methods = Specials_methods,
    .tp_init = (initproc)Specials_init,
    .tp_new = PyType_GenericNew,
};

static int get_specials(PyObject *o, const bpe_specials **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    if (!PyObject_TypeCheck(o, &SpecialsType)) {
        PyErr_SetString(PyExc_TypeError, "specials must be a Specials object or None");
        return -1;
    }
    *out = &((const SpecialsObject *)o)->s;
    return 0;
}

static PyObject *enc_result(ModelObject *self, enc_state *st, int kind) {
    PyObject *res = NULL;
    if (kind == OUT_COUNT) {
        res = PyLong_FromSize_t(st->count + st->ids.len);
    } else if (kind == OUT_BYTES) {
        res = vec_to_bytes(st->ids.ids, st->ids.len);
    } else if (kind == OUT_LIST) {
        res = ids_to_list(self, st->ids.ids, st->ids.len);
    } else {
        PyObject *ids = ids_to_list(self, st->ids.ids, st->ids.len);
        PyObject *starts = ids ? vec_to_bytes(st->starts.ids, st->starts.len) : NULL;
        if (ids && starts) res = PyTuple_Pack(2, ids, starts);
        Py_XDECREF(ids);
        Py_XDECREF(starts);
    }
    enc_free(st);
    return res;
}

#define NOGIL_MIN 4096 /* below this many bytes the GIL round trip costs more than it frees */
#define PARALLEL_MIN (128u << 10) /* texts shorter than this are not worth splitting over threads */

/* encode(text: str | bytes, specials: Specials | None, kind) ; str with lone surrogates raises
 * UnicodeEncodeError (the caller repairs the text as tiktoken does and calls again) */
/* The UTF-8 of one str for Model_encode (pystr_utf8.h): in place, or encoded into this thread's buffer, which is
 * kept up to STR_UTF8_KEEP bytes between calls (repeated calls fault in no new pages).  A lone surrogate takes
 * PyUnicode_AsUTF8AndSize, whose UnicodeEncodeError the Python layer repairs as tiktoken does.  0, or -1 with an
 * exception. */
#define STR_UTF8_KEEP ((size_t)4 << 20)
static _Thread_local pystr_buf str_utf8_buf = {0};

static int str_utf8(PyObject *text, const uint8_t **s, Py_ssize_t *n) {
    pystr_src src;
    int r = pystr_note(text, &src);
    if (r < 0) return -1;
    size_t len = 0;
    if (r == 0) r = pystr_utf8(&src, &str_utf8_buf, s, &len);
    if (r < 0) {
        PyErr_NoMemory();
        return -1;
    }
    if (r == 1) { /* no UTF-8: CPython raises */
        *s = (const uint8_t *)PyUnicode_AsUTF8AndSize(text, n);
        return *s ? 0 : -1;
    }
    *n = (Py_ssize_t)len;
    return 0;
}

static void str_utf8_done(void) {
    if (str_utf8_buf.cap > STR_UTF8_KEEP) pystr_buf_free(&str_utf8_buf);
}

/* encode(text, specials, kind=0, specials2=None, num_threads=1, nf=None): nf, a bitmap of 0x110000 bits (bytes):
 * a str holding a code point of the set is not encoded and None is returned (the caller checks its normal form
 * first), so that a text in NFC / NFKC is checked and encoded in one call */
static PyObject *Model_encode(ModelObject *self, PyObject *args) {
    PyObject *text, *spo, *sp2o = Py_None, *nfo = Py_None;
    int kind = OUT_LIST, nthreads = 1;
    if (!PyArg_ParseTuple(args, "OO|iOiO", &text, &spo, &kind, &sp2o, &nthreads, &nfo)) return NULL;
    if (self->r.pt_mode < 0) {
        PyErr_SetString(PyExc_RuntimeError, "this model has no compiled pre-tokenizer");
        return NULL;
    }
    const bpe_specials *sp, *sp2;
    if (get_specials(spo, &sp) || get_specials(sp2o, &sp2)) return NULL;
    const uint8_t *s;
    Py_ssize_t n;
    Py_buffer view = {0};
    if (PyUnicode_Check(text)) {
        if (str_utf8(text, &s, &n)) return NULL;
        if (nfo != Py_None && !PyUnicode_IS_ASCII(text)) {
            Py_buffer bm;
            if (PyObject_GetBuffer(nfo, &bm, PyBUF_SIMPLE) < 0) {
                str_utf8_done();
                return NULL;
            }
            int bad = bm.len != 0x110000 / 8, hit = !bad && utf8_any_in_bitmap(s, (size_t)n, (const uint8_t *)bm.buf);
            PyBuffer_Release(&bm);
            if (bad || hit) {
                str_utf8_done();
                if (bad) {
                    PyErr_SetString(PyExc_ValueError, "nf must be a bitmap of 0x110000 bits");
                    return NULL;
                }
                Py_RETURN_NONE;
            }
        }
    } else {
        if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) return NULL;
        s = (const uint8_t *)view.buf;
        n = view.len;
    }
    if ((uint64_t)n >= 0xFFFFFFF0ull) {
        if (view.obj) PyBuffer_Release(&view);
        str_utf8_done();
        PyErr_SetString(PyExc_ValueError, "text longer than 4 GiB");
        return NULL;
    }
    enc_state st = {0};
    st.want_starts = kind == OUT_OFFSETS;
    st.count_only = kind == OUT_COUNT;
    int rc;
    Py_INCREF(spo);
    Py_INCREF(sp2o);
    enc_attach_memo(&self->r, &st);
    if (nthreads > 1 && (size_t)n >= PARALLEL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        rc = encode_text_parallel(&self->r, sp, sp2, s, (size_t)n, &st, nthreads);
        Py_END_ALLOW_THREADS
    } else if (n >= NOGIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        rc = encode_text(&self->r, sp, sp2, s, (size_t)n, &st);
        Py_END_ALLOW_THREADS
    } else {
        rc = encode_text(&self->r, sp, sp2, s, (size_t)n, &st);
    }
    Py_DECREF(spo);
    Py_DECREF(sp2o);
    if (view.obj) PyBuffer_Release(&view);
    str_utf8_done();
    memo_return(&self->r, st.memo);
    st.memo = NULL;
    if (rc) {
        enc_free(&st);
        return PyErr_NoMemory();
    }
    return enc_result(self, &st, kind);
}

/* encode_segments(data, segs u32[3k], kind): (start, end, literal) triples; literal == 0xFFFFFFFF means
 * "pre-tokenize data[start:end) as a text of its own and BPE it", else emit the literal id. */
static PyObject *Model_encode_segments(ModelObject *self, PyObject *args) {
    Py_buffer data, segs;
    int kind = OUT_LIST;
    if (!PyArg_ParseTuple(args, "y*y*|i", &data, &segs, &kind)) return NULL;
    const uint8_t *s = (const uint8_t *)data.buf;
    const uint32_t *sg = (const uint32_t *)segs.buf;
    size_t k = (size_t)segs.len / 12, n = (size_t)data.len;
    int bad = self->r.pt_mode < 0 || n >= 0xFFFFFFF0ull;
    for (size_t i = 0; i < k && !bad; i++) bad = sg[3 * i] > sg[3 * i + 1] || sg[3 * i + 1] > n;
    if (bad) {
        PyBuffer_Release(&data);
        PyBuffer_Release(&segs);
        PyErr_SetString(PyExc_ValueError, "segment out of range (or no compiled pre-tokenizer)");
        return NULL;
    }
    enc_state st = {0};
    st.want_starts = kind == OUT_OFFSETS;
    st.count_only = kind == OUT_COUNT;
    int rc = 0;
    enc_attach_memo(&self->r, &st);
    st.text_len = n;
    Py_BEGIN_ALLOW_THREADS
    rc = bpe_vec_reserve(&st.ids, n / 4 + 16);
    for (size_t i = 0; i < k && !rc; i++) {
        if (sg[3 * i + 2] != BPE_NONE) rc = emit_literal(sg[3 * i + 2], sg[3 * i], &st);
        else rc = encode_segment(&self->r, s, sg[3 * i], sg[3 * i + 1], &st);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&segs);
    memo_return(&self->r, st.memo);
    st.memo = NULL;
    if (rc) {
        enc_free(&st);
        return PyErr_NoMemory();
    }
    return enc_result(self, &st, kind);
}

/* FSTOK_TRACE_THREADS=1: run_bounds and encode_batch print where its time went to stderr (measuring thread scaling on a
 * machine without a profiler) */
static int trace_threads = -1;
static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static _Atomic long long trace_busy_ns; /* summed encode time of the pieces of the current call */
static int tracing(void) {
    if (trace_threads < 0) {
        const char *e = getenv("FSTOK_TRACE_THREADS");
        trace_threads = e && e[0] == '1';
    }
    return trace_threads > 0;
}

/* the calling thread's CPU time (us): a shared host preempts threads, and the wall clock then measures the
 * other work on it */
static double cpu_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* One text's id list in a batch result, untracked by the cyclic garbage collector.  Why: a collection
 * visits every item of every tracked list, and the items are ints spread over megabytes (a cache miss
 * each): after each call of 1024 short lines the collection over its ~17k ids cost about as much CPU as
 * encoding them, on the calling thread alone, so it bounded how far more threads could speed a call up.
 * A list of ints cannot be part of a reference cycle; one the caller later makes part of a cycle (by
 * appending an object that refers back to it) is not collected until the cycle is broken. */
static PyObject *batch_ids_list(ModelObject *self, const uint32_t *ids, size_t n) {
    PyObject *o = ids_to_list(self, ids, n);
    if (o) PyObject_GC_UnTrack(o);
    return o;
}

/* with the GIL: a text's list from the items a worker wrote (item mode of batch_job): one allocation and a
 * copy; odd items are ids whose int is made here */
static PyObject *items_list(void **items, size_t n, int odd) {
    PyObject *l = PyList_New(0);
    if (!l || !n) {
        if (l) PyObject_GC_UnTrack(l);
        return l;
    }
    PyObject **dst = (PyObject **)PyMem_Malloc(n * sizeof(PyObject *));
    if (!dst) {
        Py_DECREF(l);
        return PyErr_NoMemory();
    }
    memcpy(dst, items, n * sizeof(PyObject *));
    ((PyListObject *)l)->ob_item = dst;
    ((PyListObject *)l)->allocated = (Py_ssize_t)n;
    if (odd)
        for (size_t q = 0; q < n; q++) {
            if (!((uintptr_t)dst[q] & 1)) continue;
            PyObject *v = PyLong_FromSize_t((size_t)((uintptr_t)dst[q] >> 1));
            if (!v) {
                Py_SET_SIZE(l, (Py_ssize_t)q); /* (items before q: pinned, or owned) */
                Py_DECREF(l);
                return NULL;
            }
            dst[q] = v;
        }
    Py_SET_SIZE(l, (Py_ssize_t)n);
    PyObject_GC_UnTrack(l); /* as batch_ids_list */
    return l;
}

/* where the calling thread's CPU time of a threaded list batch went (FSTOK_TRACE_THREADS=1) */
typedef struct {
    double lists, encode, wait; /* us: making result lists (GIL held), encoding blocks, waiting for a text */
} batch_trace;

/* with the GIL: the result of one text from its record (None for a text with no UTF-8, appended to *miss
 * when miss is not NULL), or NULL with an exception */
static int miss_add(PyObject **miss, size_t i) {
    if (!*miss && !(*miss = PyList_New(0))) return -1;
    PyObject *k = PyLong_FromSize_t(i);
    int r = k ? PyList_Append(*miss, k) : -1;
    Py_XDECREF(k);
    return r;
}

static PyObject *batch_text_result(ModelObject *self, const bt_text *r, int mode, size_t i, PyObject **miss) {
    if (r->rc > 0) {
        if (miss && miss_add(miss, i) < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (r->rc) return PyErr_NoMemory();
    if (mode == BT_COUNT) return PyLong_FromSize_t(r->n);
    if (mode == BT_ITEMS) return items_list((void **)r->p, r->n, r->odd);
    return batch_ids_list(self, (const uint32_t *)r->p, r->n);
}

/* The result list of a threaded list batch, built by the calling thread while the workers run: block b's lists
 * are made as soon as its records are published.  Why: for a batch of short lines, making the Python lists
 * costs a good part of encoding them, and after the workers it would run alone, a serial part of every call.
 * While block b is not done the caller encodes a block itself (GIL released) or yields.  Returns the list, or
 * NULL with an exception (the workers are still joined by the caller of this function, which waits for every
 * block); *miss: the indexes of the texts with no UTF-8 (None in the list), or NULL if none. */
static PyObject *batch_lists_overlapped(ModelObject *self, batch_job *j, batch_trace *tr, PyObject **miss) {
    size_t count = j->count;
    PyObject *res = PyList_New((Py_ssize_t)count);
    if (!res) return NULL;
    if (ensure_ints(self) < 0) {
        Py_DECREF(res);
        return NULL;
    }
    bpe_memo *memo = NULL;
    pystr_buf buf = {0};
    enc_state scratch;
    memset(&scratch, 0, sizeof scratch);
    bt_arena a = {NULL, j->chunk_cap};
    /* 10^5 result lists would start the cyclic GC over and over (full passes as the result grows); they cannot
     * form cycles, so it is paused while they are made, as in mod_wordpiece.c (one pass afterwards) */
#if PY_VERSION_HEX >= 0x030A0000
    int gc_was = PyGC_Disable();
#endif
    double t = tr ? cpu_us() : 0;
    size_t b = 0;
    for (; b < j->nblocks; b++) {
        bt_text *rec = batch_rec(j, b);
        if (!rec) {
            if (tr) {
                double t1 = cpu_us();
                tr->lists += t1 - t;
                t = t1;
            }
            Py_BEGIN_ALLOW_THREADS
            while (!(rec = batch_rec(j, b))) {
                size_t o = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
                if (o < j->nblocks) {
                    if (!memo) memo = memo_borrow(&self->r);
                    batch_block(j, o, &a, memo, &buf, &scratch);
                    if (tr) {
                        double t1 = cpu_us();
                        tr->encode += t1 - t;
                        t = t1;
                    }
                } else {
                    sched_yield();
                }
            }
            Py_END_ALLOW_THREADS
            if (tr) {
                double t1 = cpu_us();
                tr->wait += t1 - t;
                t = t1;
            }
        }
        const size_t lo = j->bstart[b], hi = j->bstart[b + 1];
        const int oom = rec == BT_OOM_BLOCK;
        /* the next block's records, written by another core: fetched while this block's lists are made */
        bt_text *nrec = b + 1 < j->nblocks ? batch_rec(j, b + 1) : NULL;
        if (nrec && nrec != BT_OOM_BLOCK) __builtin_prefetch(nrec, 0);
        PyObject *o = NULL;
        for (size_t i = lo; i < hi; i++) {
            const bt_text *r = oom ? BT_OOM_BLOCK : &rec[i - lo];
            if (!oom && i + 2 < hi && rec[i + 2 - lo].p) { /* the items of a text two ahead */
                const char *q = (const char *)rec[i + 2 - lo].p;
                size_t nb = (size_t)rec[i + 2 - lo].n * sizeof(void *);
                __builtin_prefetch(q, 0);
                if (nb > 64) __builtin_prefetch(q + 64, 0);
                if (nb > 128) __builtin_prefetch(q + 128, 0);
            }
            o = batch_text_result(self, r, j->mode, i, miss);
            if (!o) break;
            PyList_SET_ITEM(res, (Py_ssize_t)i, o);
        }
        if (!o && lo < hi) {
            Py_CLEAR(res); /* (the items not set yet are NULL: list_dealloc skips them) */
            break;
        }
    }
    enc_free(&scratch);
    if (tr) tr->lists += cpu_us() - t;
#if PY_VERSION_HEX >= 0x030A0000
    if (gc_was) PyGC_Enable();
#endif
    pystr_buf_free(&buf);
    if (memo) memo_return(&self->r, memo);
    batch_hand_over(j, &a);
    return res;
}

/* a thread's first chunk: its share of the output (about a token per 3 bytes) and of the records */
static void batch_chunk_cap(batch_job *j, size_t total, int nthreads) {
    size_t per = total / (size_t)nthreads + 1;
    size_t esz = j->mode == BT_COUNT ? 0 : j->mode == BT_ITEMS ? sizeof(void *) : sizeof(uint32_t);
    j->chunk_cap = per / 3 * esz + (j->count / (size_t)nthreads + 8) * sizeof(bt_text) + 4096;
}

/* encode_batch(texts: list[str], specials, num_threads, kind, specials2, want_missing=0) -> list, with None
 * where a text has lone surrogates (the caller repairs those); with want_missing, (list, [indexes of the
 * Nones]) so that the caller need not scan the result in Python. */
static PyObject *Model_encode_batch(ModelObject *self, PyObject *args) {
    PyObject *seq, *spo, *sp2o = Py_None;
    int nthreads = 1, kind = OUT_LIST, want_missing = 0;
    if (!PyArg_ParseTuple(args, "OOi|iOp", &seq, &spo, &nthreads, &kind, &sp2o, &want_missing)) return NULL;
    if (self->r.pt_mode < 0) {
        PyErr_SetString(PyExc_RuntimeError, "this model has no compiled pre-tokenizer");
        return NULL;
    }
    if (kind != OUT_LIST && kind != OUT_COUNT && kind != OUT_BYTES) {
        PyErr_SetString(PyExc_ValueError, "encode_batch kind must be list, bytes or count");
        return NULL;
    }
    const bpe_specials *sp, *sp2;
    if (get_specials(spo, &sp) || get_specials(sp2o, &sp2)) return NULL;
    const int tr = tracing();
    double tr0 = tr ? cpu_us() : 0, tr_prep = 0, tr_run = 0, tr_join = 0, tr_joined = 0;
    if (nthreads > 1) tp_prewake(nthreads - 1); /* (sleeping pool threads wake while the texts are noted) */
    batch_trace btr = {0, 0, 0};
    int tr_threads = 1, tr_pooled = 0, tr_overlap = 0;
    /* the texts are read with the GIL released, and another thread could meanwhile remove (and free) an item
     * of the caller's list: a list's items are held by a reference each in a private array, not a copy of
     * the list (a list object of 1024 strs that the cyclic GC, started by the result lists' allocations,
     * walked during the call: a serial part of every batch call) */
    PyObject *fast = NULL, **items = NULL;
    size_t count;
    if (PyList_Check(seq)) {
        count = (size_t)PyList_GET_SIZE(seq);
        items = (PyObject **)PyMem_Malloc((count + 1) * sizeof(PyObject *));
        if (!items) return PyErr_NoMemory();
        for (size_t i = 0; i < count; i++) {
            items[i] = PyList_GET_ITEM(seq, (Py_ssize_t)i);
            Py_INCREF(items[i]);
        }
    } else {
        fast = PySequence_Fast(seq, "encode_batch expects a sequence of str");
        if (!fast) return NULL;
        count = (size_t)PySequence_Fast_GET_SIZE(fast);
        items = PySequence_Fast_ITEMS(fast);
    }
    /* (one allocation: the texts' sources, block starts, and each block's records pointer) */
    pystr_src *src = (pystr_src *)malloc((count + 1) * sizeof(pystr_src) + 2 * (count + 2) * sizeof(size_t));
    size_t *bstart = src ? (size_t *)(src + count + 1) : NULL;
    bt_text **recs = src ? (bt_text **)(bstart + count + 2) : NULL;
    PyObject *res = NULL, *miss = NULL;
    size_t total = 0;
    batch_job job;
    memset(&job, 0, sizeof job);
    if (!src) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "texts must be str, got %.80s", Py_TYPE(items[i])->tp_name);
            goto done;
        }
        int u = pystr_note(items[i], &src[i]);
        if (u < 0) goto done;
        if (u > 0) {
            src[i].ukind = -1; /* no UTF-8: None in the result */
            continue;
        }
        /* (bytes of UTF-8, at most 4 a code point where not known yet) */
        size_t nb = src[i].utf8 ? src[i].len : src[i].len * (size_t)(src[i].ukind == 1 ? 2 : src[i].ukind == 2 ? 3 : 4);
        if ((uint64_t)nb >= 0xFFFFFFF0ull) {
            PyErr_SetString(PyExc_ValueError, "text longer than 4 GiB");
            goto done;
        }
        /* block sizes are planned from these byte counts: a code point of a non-ASCII text counts ~2 */
        total += pystr_weight(&src[i]);
    }
    if (tr) tr_prep = cpu_us();
    {
        job.self = &self->r;
        job.sp = sp;
        job.sp2 = sp2;
        job.src = src;
        job.count = count;
        job.bstart = bstart;
        job.recs = recs;
        job.busy_ns = tr ? &trace_busy_ns : NULL;
        if (tr) atomic_store(&trace_busy_ns, 0);
        if (nthreads < 1) nthreads = 1;
        if ((size_t)nthreads > count) nthreads = (int)(count ? count : 1);
        if (nthreads > 256) nthreads = 256;
        /* ~16 claims per thread keep the threads' last blocks ending close together; more, smaller blocks cost a
         * claim of the shared counter each and split the output into more pieces */
        size_t nb = pystr_blocks(src, count, total / ((size_t)nthreads * 16), bstart);
        for (size_t b = 0; b < nb; b++) recs[b] = NULL;
        job.nblocks = nb;
        atomic_init(&job.next, 0);
        atomic_init(&job.chunks, NULL);
        job.mode = kind == OUT_COUNT ? BT_COUNT : BT_IDS;
        job.shared = nthreads > 1 ? rt_shared(&self->r) : NULL;
        pthread_t th[256];
        int started = 0, pooled = 0;
        if (kind == OUT_LIST && nthreads > 1 && total >= NOGIL_MIN) {
            if (ensure_ints(self) < 0) goto done;
            if (self->ints_pinned) { /* (else the lists from each text's ids: pyids_list_from_ids) */
                job.mode = BT_ITEMS;
                job.ints = (void *const *)self->ints;
                job.n_ints = self->r.m.n_ext;
                _Static_assert(PYIDS_STRIDE == 32, "bpe_parallel.h computes pinned ints 32 bytes apart");
                job.run_base = pyids_main_run.base;
                job.run_lo = pyids_main_run.lo;
                job.run_n = pyids_main_run.n;
            }
            batch_chunk_cap(&job, total, nthreads);
            Py_BEGIN_ALLOW_THREADS /* (waking the pool takes its mutex) */
            started = batch_start(&job, nthreads, th, &pooled);
            Py_END_ALLOW_THREADS
            if (tr) tr_run = cpu_us();
            res = batch_lists_overlapped(self, &job, tr ? &btr : NULL, want_missing ? &miss : NULL);
            if (!res) {
                /* stop handing out blocks; the workers finish the ones they hold */
                atomic_store_explicit(&job.next, job.nblocks, memory_order_relaxed);
            }
            if (tr) tr_join = cpu_us();
            Py_BEGIN_ALLOW_THREADS
            batch_join(started, th, pooled);
            Py_END_ALLOW_THREADS
            if (tr) tr_joined = cpu_us();
            tr_overlap = 1;
            tr_threads = started + 1;
            tr_pooled = pooled;
            if (res && want_missing) goto missing;
            goto done;
        }
        batch_chunk_cap(&job, total, nthreads);
        if (nthreads == 1 && total < NOGIL_MIN) {
            batch_worker(&job);
        } else {
            Py_BEGIN_ALLOW_THREADS
            started = batch_start(&job, nthreads, th, &pooled);
            batch_worker(&job);
            batch_join(started, th, pooled);
            Py_END_ALLOW_THREADS
            tr_threads = started + 1;
            tr_pooled = pooled;
        }
    }
    if (tr) tr_run = tr_join = tr_joined = cpu_us();
    if (kind == OUT_BYTES) {
        /* (all ids as one uint32 buffer and where each text's ids start, int64, count + 1 entries: a batch for
         * numpy without a Python object per text or token; a text with no UTF-8 has none, listed as missing) */
        size_t nids = 0;
        for (size_t b = 0; b < job.nblocks; b++) {
            const bt_text *rec = recs[b];
            if (rec == BT_OOM_BLOCK) {
                PyErr_NoMemory();
                goto done;
            }
            for (size_t i = bstart[b]; i < bstart[b + 1]; i++) {
                if (rec[i - bstart[b]].rc < 0) {
                    PyErr_NoMemory();
                    goto done;
                }
                nids += rec[i - bstart[b]].n;
            }
        }
        PyObject *ids = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nids * 4));
        PyObject *offs = ids ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((count + 1) * 8)) : NULL;
        if (ids && offs) {
            char *dst = PyBytes_AS_STRING(ids);
            int64_t *of = (int64_t *)PyBytes_AS_STRING(offs);
            size_t at = 0;
            Py_BEGIN_ALLOW_THREADS /* (neither object is visible to another thread yet) */
            for (size_t b = 0; b < job.nblocks; b++) {
                const bt_text *rec = recs[b];
                for (size_t i = bstart[b]; i < bstart[b + 1]; i++) {
                    const bt_text *r = &rec[i - bstart[b]];
                    of[i] = (int64_t)at;
                    if (r->n) memcpy(dst + at * 4, r->p, (size_t)r->n * 4);
                    at += r->n;
                }
            }
            of[count] = (int64_t)at;
            Py_END_ALLOW_THREADS
            res = PyTuple_Pack(2, ids, offs);
        }
        Py_XDECREF(ids);
        Py_XDECREF(offs);
        if (res && want_missing)
            for (size_t b = 0; b < job.nblocks; b++)
                for (size_t i = bstart[b]; i < bstart[b + 1]; i++) {
                    const bt_text *r = &recs[b][i - bstart[b]];
                    if (r->rc > 0 && miss_add(&miss, i) < 0) {
                        Py_CLEAR(res);
                        goto done;
                    }
                }
        if (!res || !want_missing) goto done;
        goto missing;
    }
    if (kind == OUT_LIST && ensure_ints(self) < 0) goto done;
    res = PyList_New((Py_ssize_t)count);
    if (!res) goto done;
    {
#if PY_VERSION_HEX >= 0x030A0000
        int gc_was = PyGC_Disable(); /* as in batch_lists_overlapped */
#endif
        for (size_t b = 0; b < job.nblocks && res; b++) {
            const bt_text *rec = recs[b];
            for (size_t i = bstart[b]; i < bstart[b + 1]; i++) {
                const bt_text *r = rec == BT_OOM_BLOCK ? rec : &rec[i - bstart[b]];
                PyObject *o = batch_text_result(self, r, job.mode, i, want_missing ? &miss : NULL);
                if (!o) {
                    Py_CLEAR(res);
                    break;
                }
                PyList_SET_ITEM(res, (Py_ssize_t)i, o);
            }
        }
#if PY_VERSION_HEX >= 0x030A0000
        if (gc_was) PyGC_Enable();
#endif
    }
    if (!res || !want_missing) goto done;
missing : {
    if (!miss && !(miss = PyList_New(0))) {
        Py_CLEAR(res);
        goto done;
    }
    PyObject *pair = PyTuple_Pack(2, res, miss);
    Py_DECREF(res);
    res = pair;
}
done:;
    /* (FSTOK_TRACE_THREADS: the cleanup below also runs with the GIL held, after the join) */
    double tr_end = tr ? cpu_us() : 0;
    Py_XDECREF(miss);
    bt_free_chunks(atomic_load(&job.chunks));
    free(src);
    if (fast)
        Py_DECREF(fast);
    else {
        for (size_t i = 0; i < count; i++) Py_DECREF(items[i]);
        PyMem_Free(items);
    }
    if (tr && res) {
        /* GIL held: prep, the lists (made while the workers run where overlapped) and what follows the join
         * (the lists themselves where not overlapped), and the cleanup */
        double end = cpu_us(), tail = tr_end - tr_joined, cleanup = end - tr_end;
        fprintf(stderr,
                "fstok bpe encode_batch: %zu texts %zu bytes %d threads (%s) | prep %.0f us | start %.0f | caller: "
                "lists %.0f, encode %.0f, wait %.0f | join %.0f | tail %.0f | cleanup %.0f | total %.0f us (thread CPU) | "
                "workers' CPU %.0f | GIL held %.0f us\n",
                count, total, tr_threads, tr_pooled ? "pool" : "own", tr_prep - tr0, tr_run - tr_prep, btr.lists,
                btr.encode, btr.wait, tr_joined - tr_join, tail, cleanup, end - tr0, atomic_load(&trace_busy_ns) / 1e3,
                (tr_prep - tr0) + (tr_overlap ? btr.lists : 0) + tail + cleanup);
    }
    return res;
}

/* --- one long text cut at given positions (proven pre-tokenizer boundaries, found by fstok.parallel):
 * the text's UTF-8 is taken once, the pieces are encoded on pthreads as texts of their own (each one
 * encode_text, specials included), and the calling thread builds the result list while they run:
 * workers map ids to borrowed pointers to the cached ints (a read-only table), the caller only
 * INCREFs them (refcounts stay on the GIL-holding thread).  Every enc_state lives on its worker's
 * stack while it is written (neighbouring states in one array share cache lines). */
typedef struct {
    const ModelObject *self;
    const bpe_specials *sp, *sp2;
    const uint8_t *s;
    const size_t *b; /* piece k is s[b[k], b[k+1]) */
    size_t count;
    enc_state *st;
    PyObject ***ptrs;
    int *rc;
    int *missing; /* piece k has ids with no cached int */
    atomic_size_t next;
    pyids_sync *sync;
    double *tr_s, *tr_e; /* FSTOK_TRACE_THREADS: piece i's start and end (us) and its thread (-1: caller) */
    int *tr_w;
    int kind; /* OUT_LIST, OUT_BYTES (uint32 ids) or OUT_COUNT: only a list needs the ints */
    bpe_shared *shared; /* the model's shared piece cache when several threads run, else NULL */
} cuts_job;


/* encode piece i of the job with this thread's memo and publish it (no GIL needed) */
static void cuts_encode_one(cuts_job *j, size_t i, bpe_memo *memo) {
    const ModelObject *self = j->self;
    double t0 = trace_threads > 0 ? now_us() : 0;
    enc_state local;
    memset(&local, 0, sizeof local);
    local.memo = memo;
    local.count_only = j->kind == OUT_COUNT;
    if (j->tr_s) j->tr_s[i] = t0, j->tr_w[i] = tp_worker_index();
    if (memo) memo->shared = j->shared;
    int rc = encode_text(&self->r, j->sp, j->sp2, j->s + j->b[i], j->b[i + 1] - j->b[i], &local);
    if (memo) memo->shared = NULL;
    local.memo = NULL;
    PyObject **pp = NULL;
    if (j->kind != OUT_LIST) {
        /* ids or a count: nothing to map */
    } else if (self->ints_pinned) { /* (the list is filled from the ids after the encoding: fill_worker) */
        for (size_t q = 0; q < local.ids.len && !rc; q++) j->missing[i] |= local.ids.ids[q] >= self->r.m.n_ext;
    } else if (!rc && !(pp = pyids_borrow(self->ints, self->r.m.n_ext, local.ids.ids, local.ids.len, &j->missing[i]))) {
        rc = -1;
    }
    j->ptrs[i] = pp;
    j->rc[i] = rc;
    j->st[i] = local;
    if (trace_threads > 0) {
        double t1 = now_us();
        atomic_fetch_add(&trace_busy_ns, (long long)((t1 - t0) * 1e3));
        if (j->tr_e) j->tr_e[i] = t1;
    }
    pyids_sync_mark(j->sync, i);
}

static void *cuts_worker(void *arg) {
    cuts_job *j = (cuts_job *)arg;
    ModelObject *self = (ModelObject *)j->self;
    bpe_memo *memo = memo_worker(&self->r);
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->count) break;
        cuts_encode_one(j, i, memo);
    }
    memo_worker_done(&self->r, memo);
    return NULL;
}

/* With pinned ints the result list is filled after the encoding, in parallel: piece k's ids become the
 * items dst[off[k], off[k+1]) (ints[id]: a gather from the table, no reference to take).  Filling it on the
 * GIL-holding thread alone took 0.2-0.5 ms of a 1-2 ms 16-thread call (1 MB, lent machine). */
typedef struct {
    PyObject **dst;
    uint32_t *dst_ids; /* OUT_BYTES: the ids themselves are copied here instead */
    PyObject *const *ints;
    const enc_state *st;
    const size_t *off;
    size_t count;
    atomic_size_t next;
} fill_job;

static void *fill_worker(void *arg) {
    fill_job *f = (fill_job *)arg;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&f->next, 1, memory_order_relaxed);
        if (i >= f->count) break;
        const uint32_t *ids = f->st[i].ids.ids;
        if (f->dst_ids) {
            if (f->st[i].ids.len) memcpy(f->dst_ids + f->off[i], ids, f->st[i].ids.len * sizeof(uint32_t));
            continue;
        }
        PyObject **d = f->dst + f->off[i];
        for (size_t q = 0, m = f->st[i].ids.len; q < m; q++) d[q] = f->ints[ids[q]];
    }
    return NULL;
}

/* The result of run_bounds for OUT_BYTES (the ids of every piece in order, as the bytes of a uint32 array, copied
 * by the pool when large) or OUT_COUNT (their number).  Every piece is encoded and none failed. */
static PyObject *run_ids_or_count(enc_state *st, size_t np, size_t nthreads, int kind) {
    size_t total = 0;
    for (size_t k = 0; k < np; k++) total += st[k].count + st[k].ids.len;
    if (kind == OUT_COUNT) return PyLong_FromSize_t(total);
    if (total > (size_t)PY_SSIZE_T_MAX / sizeof(uint32_t)) return PyErr_NoMemory();
    PyObject *res = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * sizeof(uint32_t)));
    if (!res) return NULL;
    size_t *off = (size_t *)malloc((np + 1) * sizeof(size_t));
    if (!off) {
        Py_DECREF(res);
        return PyErr_NoMemory();
    }
    for (size_t k = 0, o = 0; k < np; k++) off[k] = o, o += st[k].ids.len;
    fill_job fj;
    memset(&fj, 0, sizeof fj);
    fj.dst_ids = (uint32_t *)PyBytes_AS_STRING(res);
    fj.st = st;
    fj.off = off;
    fj.count = np;
    atomic_init(&fj.next, 0);
    Py_BEGIN_ALLOW_THREADS /* (the bytes object is not visible to any other thread yet) */
    int pooled = nthreads > 0 && total > 65536 ? tp_start(fill_worker, &fj, (int)nthreads) : -1;
    fill_worker(&fj);
    if (pooled >= 0) tp_wait();
    Py_END_ALLOW_THREADS
    free(off);
    return res;
}

/* Encode the pieces s[b[k], b[k+1]) (k < np) on nthreads threads and return one list: nthreads - 1
 * pthreads and the calling thread, which (holding the GIL) INCREFs finished pieces in order and, whenever
 * the next one is not finished, encodes a piece itself (without the GIL).  Before, it started nthreads
 * pthreads and only waited and INCREFed: one thread more than cores when nthreads = cores, and the
 * references of the last pieces were all taken after the encoding (2 threads, 1 MB english: 0.64-0.78 of
 * one-shot). */
static PyObject *run_bounds(ModelObject *self, const uint8_t *s, const size_t *b, size_t np, PyObject *spo,
                            PyObject *sp2o, int nthreads, int kind) {
    const bpe_specials *sp, *sp2;
    if (get_specials(spo, &sp) || get_specials(sp2o, &sp2)) return NULL;
    if (kind != OUT_LIST && kind != OUT_BYTES && kind != OUT_COUNT) {
        PyErr_Format(PyExc_ValueError, "unknown output kind %d", kind);
        return NULL;
    }
    if (kind == OUT_LIST && ensure_ints(self) < 0) return NULL;
    if (trace_threads < 0) {
        const char *e = getenv("FSTOK_TRACE_THREADS");
        trace_threads = e && e[0] == '1';
    }
    double tr0 = trace_threads > 0 ? now_us() : 0, tr_spawned = 0, tr_encoded = 0, tr_joined = 0;
    atomic_store(&trace_busy_ns, 0);
    enc_state *st = (enc_state *)calloc(np, sizeof(enc_state));
    PyObject ***ptrs = (PyObject ***)calloc(np, sizeof(PyObject **));
    int *rc = (int *)calloc(np, sizeof(int));
    int *missing = (int *)calloc(np, sizeof(int));
    pyids_sync sync = {0};
    size_t *lens = (size_t *)calloc(np, sizeof(size_t));
    PyObject *result = NULL;
    size_t nref = 0;
    int started = 0, failed = 0, anymiss = 0;
    pthread_t th[256];
    cuts_job job;
    memset(&job, 0, sizeof job);
    if (!st || !ptrs || !rc || !missing || pyids_sync_init(&sync, np) < 0 || !lens) {
        PyErr_NoMemory();
        goto cleanup;
    }
    job.self = self;
    job.sp = sp;
    job.sp2 = sp2;
    job.s = s;
    job.b = b;
    job.count = np;
    job.st = st;
    job.ptrs = ptrs;
    job.rc = rc;
    job.missing = missing;
    job.kind = kind;
    atomic_init(&job.next, 0);
    job.sync = &sync;
    job.tr_s = job.tr_e = NULL;
    job.tr_w = NULL;
    if (trace_threads > 0) {
        job.tr_s = (double *)calloc(np, sizeof(double));
        job.tr_e = (double *)calloc(np, sizeof(double));
        job.tr_w = (int *)calloc(np, sizeof(int));
    }
    Py_INCREF(spo);
    Py_INCREF(sp2o);
    if (nthreads > 256) nthreads = 256;
    if ((size_t)nthreads > np) nthreads = (int)np;
    job.shared = nthreads > 1 ? rt_shared(&((ModelObject *)self)->r) : NULL;
    /* the workers: the module's persistent pool, or threads of this call while the pool runs another job */
    int pooled = nthreads > 1 && np > 1 ? tp_start(cuts_worker, &job, nthreads - 1) : -1;
    if (pooled >= 0) {
        started = pooled;
    } else {
        for (int k = 0; k + 1 < nthreads && np > 1; k++)
            if (pthread_create(&th[started], NULL, cuts_worker, &job) == 0) started++;
    }
    if (trace_threads > 0) tr_spawned = now_us();
    bpe_memo *own = NULL; /* the calling thread's memo, borrowed when it first encodes a piece */
    for (size_t k = 0; k < np && !failed; k++) {
        while (!pyids_sync_ready(&sync, k)) {
            size_t i = atomic_fetch_add_explicit(&job.next, 1, memory_order_relaxed);
            Py_BEGIN_ALLOW_THREADS
            if (i < np) { /* piece k is still being encoded: encode one more meanwhile */
                if (!own) own = memo_borrow(&self->r);
                cuts_encode_one(&job, i, own);
            } else {
                pyids_sync_wait(&sync, k);
            }
            Py_END_ALLOW_THREADS
        }
        if (kind != OUT_LIST || self->ints_pinned) { /* (pinned: ids past the int table, never seen in practice) */
            if (rc[k]) {
                failed = 1;
                break;
            }
            anymiss |= missing[k];
        } else if (rc[k] || !ptrs[k] || pyids_take_block(ptrs[k], st[k].ids.ids, st[k].ids.len) < 0) {
            failed = 1;
            break;
        }
        nref = k + 1;
    }
    if (trace_threads > 0) tr_encoded = now_us();
    Py_BEGIN_ALLOW_THREADS
    if (pooled >= 0)
        tp_wait();
    else
        for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
    Py_END_ALLOW_THREADS
    if (trace_threads > 0) tr_joined = now_us();
    if (own) memo_return(&self->r, own);
    Py_DECREF(spo);
    Py_DECREF(sp2o);
    for (size_t k = 0; k < np; k++) lens[k] = st[k].ids.len;
    if (kind != OUT_LIST) {
        if (failed) PyErr_NoMemory();
        else result = run_ids_or_count(st, np, (size_t)started, kind);
    } else if (self->ints_pinned && failed) {
        PyErr_NoMemory();
    } else if (self->ints_pinned) {
        if (!anymiss) {
            size_t *off = lens; /* (lens becomes the offsets: off[k] = items before piece k) */
            size_t total = 0;
            for (size_t k = 0; k < np; k++) {
                size_t l = lens[k];
                off[k] = total;
                total += l;
            }
            /* The item array is not zeroed (PyList_New(total) callocs: a 1.9 MB memset for 1 MB of English,
             * before the fill writes every item again); the list has size 0 until the fill is done, so a
             * GC pass that another thread runs meanwhile visits no item. */
            result = PyList_New(0);
            PyObject **items = result && total ? (PyObject **)PyMem_Malloc(total * sizeof(PyObject *)) : NULL;
            if (result && total && !items) {
                Py_CLEAR(result);
                PyErr_NoMemory();
            }
            if (result && items) {
                ((PyListObject *)result)->ob_item = items;
                ((PyListObject *)result)->allocated = (Py_ssize_t)total;
                fill_job fj;
                fj.dst = items;
                fj.dst_ids = NULL;
                fj.ints = self->ints;
                fj.st = st;
                fj.off = off;
                fj.count = np;
                atomic_init(&fj.next, 0);
                Py_BEGIN_ALLOW_THREADS /* (the list is not visible to any other thread yet) */
                int fill_pooled = started > 0 && total > 65536 ? tp_start(fill_worker, &fj, started) : -1;
                fill_worker(&fj);
                if (fill_pooled >= 0) tp_wait();
                Py_END_ALLOW_THREADS
                Py_SET_SIZE(result, (Py_ssize_t)total);
            }
        } else { /* every piece is encoded: the counted way (ints made for the ids past the table) */
            nref = 0;
            for (size_t k = 0; k < np && !failed; k++) {
                int miss;
                ptrs[k] = pyids_borrow(self->ints, self->r.m.n_ext, st[k].ids.ids, st[k].ids.len, &miss);
                if (!ptrs[k] || pyids_take_block(ptrs[k], st[k].ids.ids, st[k].ids.len) < 0) failed = 1;
                else nref = k + 1;
            }
            result = pyids_list(ptrs, lens, np, nref, !failed);
        }
    } else {
        result = pyids_list(ptrs, lens, np, nref, !failed);
    }
cleanup:
    if (st)
        for (size_t i = 0; i < np; i++) enc_free(&st[i]);
    if (ptrs)
        for (size_t i = 0; i < np; i++) free(ptrs[i]);
    free(st), free(ptrs), free(rc), free(missing), free(lens);
    pyids_sync_free(&sync);
    if (trace_threads > 0 && tr_joined > 0) {
        double end = now_us();
        fprintf(stderr, "fstok run_bounds: %zu pieces %d threads | spawn %.0f us | encoded %.0f | joined %.0f | "
                        "list+free %.0f | total %.0f us | encode busy %.0f us (%.2f of threads x total)\n",
                np, started + 1, tr_spawned - tr0, tr_encoded - tr0, tr_joined - tr0, end - tr_joined, end - tr0,
                atomic_load(&trace_busy_ns) / 1e3, atomic_load(&trace_busy_ns) / 1e3 / ((started + 1) * (end - tr0)));
        if (job.tr_s && job.tr_e && job.tr_w) { /* per thread: first start, last end, busy (us from tr0) */
            double fs[257], le[257], bz[257];
            int np_[257];
            for (int w = 0; w < 257; w++) fs[w] = 1e18, le[w] = bz[w] = 0, np_[w] = 0;
            for (size_t i = 0; i < np; i++) {
                int w = job.tr_w[i] + 1;
                if (w < 0 || w > 256) continue;
                if (job.tr_s[i] - tr0 < fs[w]) fs[w] = job.tr_s[i] - tr0;
                if (job.tr_e[i] - tr0 > le[w]) le[w] = job.tr_e[i] - tr0;
                bz[w] += job.tr_e[i] - job.tr_s[i];
                np_[w]++;
            }
            fprintf(stderr, "  per thread (first start/last end/busy us, pieces):");
            for (int w = 0; w < 257; w++)
                if (np_[w]) fprintf(stderr, " [%d] %.0f/%.0f/%.0f %d", w - 1, fs[w], le[w], bz[w], np_[w]);
            fprintf(stderr, "\n");
        }
    }
    free(job.tr_s), free(job.tr_e), free(job.tr_w);
    return result;
}

/* The UTF-8 of a str to encode with this model's compiled pre-tokenizer (NULL + exception otherwise). */
static const uint8_t *model_text(const ModelObject *self, PyObject *text, Py_ssize_t *n) {
    if (self->r.pt_mode < 0) {
        PyErr_SetString(PyExc_RuntimeError, "this model has no compiled pre-tokenizer");
        return NULL;
    }
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "text must be str");
        return NULL;
    }
    const uint8_t *s = (const uint8_t *)PyUnicode_AsUTF8AndSize(text, n);
    if (s && (uint64_t)*n >= 0xFFFFFFF0ull) {
        PyErr_SetString(PyExc_ValueError, "text longer than 4 GiB");
        return NULL;
    }
    return s;
}

/* encode_cuts(text: str, cuts: list[int] (code point offsets, increasing, inside the text), specials,
 * num_threads, sp2=None) -> list[int]; lone surrogates raise UnicodeEncodeError (the caller repairs) */
static PyObject *Model_encode_cuts(ModelObject *self, PyObject *args) {
    PyObject *text, *cutso, *spo, *sp2o = Py_None;
    int nthreads = 1;
    if (!PyArg_ParseTuple(args, "OOOi|O", &text, &cutso, &spo, &nthreads, &sp2o)) return NULL;
    Py_ssize_t n;
    const uint8_t *s = model_text(self, text, &n);
    if (!s) return NULL;
    PyObject *fast = PySequence_Fast(cutso, "cuts must be a sequence of int");
    if (!fast) return NULL;
    size_t ncut = (size_t)PySequence_Fast_GET_SIZE(fast), np = ncut + 1;
    size_t *b = (size_t *)malloc((np + 1) * sizeof(size_t));
    PyObject *result = NULL;
    if (!b) {
        PyErr_NoMemory();
        goto out;
    }
    {
        const Py_ssize_t nch = PyUnicode_GET_LENGTH(text);
        const int ascii = PyUnicode_IS_ASCII(text);
        size_t pos = 0, cnt = 0;
        long long prev = 0;
        b[0] = 0;
        for (size_t k = 0; k < ncut; k++) {
            long long c = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)k));
            if (c == -1 && PyErr_Occurred()) goto out;
            if (c <= prev || c >= nch) {
                PyErr_Format(PyExc_ValueError, "encode_cuts: cut %lld is not increasing inside the text", c);
                goto out;
            }
            pos = ascii ? (size_t)c : utf8_seek(s, (size_t)n, pos, cnt, (size_t)c);
            cnt = (size_t)c;
            b[k + 1] = pos;
            prev = c;
        }
        b[np] = (size_t)n;
    }
    result = run_bounds(self, s, b, np, spo, sp2o, nthreads, OUT_LIST);
out:
    free(b);
    Py_DECREF(fast);
    return result;
}

/* encode_proven(text, cls uint16[], ok uint8[K*K], K, guards list[bytes], parts, specials, num_threads,
 * sp2=None, search=16384, kind=OUT_LIST) -> list[int] (OUT_BYTES: the uint32 ids as bytes; OUT_COUNT: their number):
 * cut near every k*len/parts byte at the nearest proven boundary (forward first, then backward, within `search`
 * bytes), encode the pieces as encode_cuts does. */
static PyObject *Model_encode_proven(ModelObject *self, PyObject *args) {
    PyObject *text, *clso, *oko, *guardso, *spo, *sp2o = Py_None;
    Py_ssize_t K, search = 16384;
    int parts, nthreads, kind = OUT_LIST;
    if (!PyArg_ParseTuple(args, "OOOnOiOi|Oni", &text, &clso, &oko, &K, &guardso, &parts, &spo, &nthreads, &sp2o,
                          &search, &kind))
        return NULL;
    Py_ssize_t n;
    const uint8_t *s = model_text(self, text, &n);
    if (!s) return NULL;
    Py_buffer cb = {0}, ob = {0};
    PyObject *gfast = NULL, *result = NULL;
    size_t *b = NULL;
    proven_ctx ctx = {0};
    if (PyObject_GetBuffer(clso, &cb, PyBUF_C_CONTIGUOUS) < 0) goto out;
    if (PyObject_GetBuffer(oko, &ob, PyBUF_C_CONTIGUOUS) < 0) goto out;
    if (K < 1 || cb.len % 2 || ob.len != K * K) {
        PyErr_SetString(PyExc_ValueError, "encode_proven: class table / ok matrix sizes disagree");
        goto out;
    }
    ctx.cls = (const uint16_t *)cb.buf;
    ctx.ncls = (size_t)cb.len / 2;
    ctx.ok = (const uint8_t *)ob.buf;
    ctx.K = (size_t)K;
    gfast = PySequence_Fast(guardso, "guards must be a sequence of bytes");
    if (!gfast) goto out;
    ctx.ng = (size_t)PySequence_Fast_GET_SIZE(gfast);
    ctx.g = (const char **)calloc(ctx.ng + 1, sizeof(char *));
    ctx.glen = (Py_ssize_t *)calloc(ctx.ng + 1, sizeof(Py_ssize_t));
    if (!ctx.g || !ctx.glen) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t k = 0; k < ctx.ng; k++) {
        PyObject *o = PySequence_Fast_GET_ITEM(gfast, (Py_ssize_t)k);
        char *gp;
        if (PyBytes_AsStringAndSize(o, &gp, &ctx.glen[k]) < 0) goto out;
        ctx.g[k] = gp;
    }
    if (parts < 1) parts = 1;
    if (parts > 65536) parts = 65536;
    b = (size_t *)malloc(((size_t)parts + 2) * sizeof(size_t));
    if (!b) {
        PyErr_NoMemory();
        goto out;
    }
    size_t np;
    {
        const size_t N = (size_t)n, S = search > 0 ? (size_t)search : 1;
        size_t last = 0, nb = 0;
        b[nb++] = 0;
        Py_BEGIN_ALLOW_THREADS
        for (int k = 1; k < parts; k++) {
            size_t t = (size_t)((unsigned long long)N * (unsigned)k / (unsigned)parts);
            if (t <= last) continue;
            size_t p = proven_forward(&ctx, s, N, t, t + S < N ? t + S : N);
            if (p == (size_t)-1) p = proven_backward(&ctx, s, N, t > S && t - S > last ? t - S : last, t);
            if (p != (size_t)-1 && p > last && p < N) b[nb++] = last = p;
        }
        Py_END_ALLOW_THREADS
        b[nb] = N;
        np = nb;
    }
    result = run_bounds(self, s, b, np, spo, sp2o, nthreads, kind);
out:
    if (cb.obj) PyBuffer_Release(&cb);
    if (ob.obj) PyBuffer_Release(&ob);
    Py_XDECREF(gfast);
    free(ctx.g);
    free(ctx.glen);
    free(b);
    return result;
}

/* _pair_small_check() -> (pairs in the small-id bitmap, pairs where it and the hashed table disagree): every pair of
 * two ids below BPE_PAIR_SMALL through bpe_pair_get and bpe_pair_lookup (tests) */
static PyObject *Model_pair_small_check(ModelObject *self, PyObject *noargs) {
    const bpe_model *m = &self->r.m;
    size_t held = 0, bad = 0;
    uint32_t lim = m->n_int < BPE_PAIR_SMALL ? m->n_int : BPE_PAIR_SMALL;
    Py_BEGIN_ALLOW_THREADS
    for (uint32_t a = 0; a < lim; a++)
        for (uint32_t b = 0; b < lim; b++) {
            uint32_t x = bpe_pair_get(m, a, b);
            held += x != BPE_NONE;
            bad += x != bpe_pair_lookup(m, a, b, 0);
        }
    Py_END_ALLOW_THREADS
    if (!m->pair_small) held = 0;
    return Py_BuildValue("nn", (Py_ssize_t)held, (Py_ssize_t)bad);
}

/* self_check() -> (failures, first failing external id or -1): every reachable token must encode to
 * itself with each span encoder (short sweep, heap and, when valid, backtracking). */
static PyObject *Model_self_check(ModelObject *self, PyObject *noargs) {
    const bpe_model *m = &self->r.m;
    size_t fails = 0;
    long long first = -1;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    bpe_vec v = {0};
    for (uint32_t t = 0; t < m->n_int && !oom; t++) {
        uint32_t e = m->int_ext[t];
        const uint8_t *s = m->dec_bytes + m->dec_off[e];
        size_t n = m->dec_off[e + 1] - m->dec_off[e];
        for (int mode = 0; mode < 3; mode++) {
            if (mode == 2 && !m->backtrack_ok && !(m->nm_n && m->nm_use && bpe_nm_absent(m, s, n))) continue;
            v.len = 0;
            int rc = mode == 0 ? bpe_encode_short(m, s, n, &v) : mode == 1 ? bpe_encode_heap(m, s, n, &v)
                                                                        : bpe_encode_backtrack(m, s, n, &v);
            if (rc) {
                oom = 1;
                break;
            }
            if (v.len != 1 || v.ids[0] != t) {
                if (first < 0) first = e;
                fails++;
                break;
            }
        }
    }
    free(v.ids);
    Py_END_ALLOW_THREADS
    if (oom) return PyErr_NoMemory();
    return Py_BuildValue("nL", (Py_ssize_t)fails, first);
}

/* _profile(data, mode) -> checksum: cost breakdown for benchmarks (find mode only).
 * 0: DFA spans only, 1: + hash of every span, 2: + whole-span lookup, 3: + encoders (full count) */
static PyObject *Model_profile(ModelObject *self, PyObject *args) {
    Py_buffer data;
    int mode;
    if (!PyArg_ParseTuple(args, "y*i", &data, &mode)) return NULL;
    if (self->r.pt_mode != 0) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "find mode only");
        return NULL;
    }
    const uint8_t *s = (const uint8_t *)data.buf;
    size_t n = (size_t)data.len, pos = 0, acc = 0;
    size_t buf[2 * SPAN_CHUNK];
    bpe_vec v = {0};
    bpe_vec_reserve(&v, 1 << 16);
    bpe_memo *memo = memo_borrow(&self->r);
    Py_BEGIN_ALLOW_THREADS
    while (pos < n) {
        size_t k = fstok_dfa_find_all(&self->r.lv[0], s, n, &pos, buf, SPAN_CHUNK);
        for (size_t j = 0; j < k; j++) {
            const uint8_t *p = s + buf[2 * j];
            size_t len = buf[2 * j + 1] - buf[2 * j];
            if (mode == 0) acc += len;
            else if (mode == 1) acc += len <= 8 ? bpe_hash_w(bpe_head8_fast(p, len, n - buf[2 * j]), len) : bpe_hash_bytes(p, len);
            else if (mode == 2) acc += bpe_span_get_w(&self->r.m, p, len, bpe_head8_fast(p, len, n - buf[2 * j]));
            else {
                bpe_encode_span_avail(&self->r.m, memo, p, len, n - buf[2 * j], &v);
                if (v.len > 60000) acc += v.len, v.len = 0;
            }
        }
    }
    Py_END_ALLOW_THREADS
    acc += v.len;
    free(v.ids);
    PyBuffer_Release(&data);
    memo_return(&self->r, memo);
    return PyLong_FromSize_t(acc);
}

/* clear_cache(): drop what the pooled pre-token memos learned for this model;
 * set_memo(flag): enable/disable them (benchmarks: cold vs warm) */
static PyObject *Model_clear_cache(ModelObject *self, PyObject *noargs) {
    __atomic_add_fetch(&self->r.memo_epoch, 1, __ATOMIC_RELAXED);
    sc_clear(self->r.shared);
    Py_RETURN_NONE;
}


/* shared_cache_entries(): pieces in the shared piece cache of multi-threaded calls now, -1 if it was never made */
static PyObject *Model_shared_cache_entries(ModelObject *self, PyObject *noargs) {
    return PyLong_FromLongLong(self->r.shared ? (long long)sc_count(self->r.shared) : -1);
}

static PyObject *Model_set_memo(ModelObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    self->r.use_memo = on;
    Py_RETURN_NONE;
}

/* _tune(short_max, use_backtrack): change the encoder choice (benchmarks and tests only) */
static PyObject *Model_tune(ModelObject *self, PyObject *args) {
    unsigned int short_max, hash_max = 0xFFFFFFFFu, short_max_mb = 0xFFFFFFFFu;
    int bt;
    if (!PyArg_ParseTuple(args, "Ip|II", &short_max, &bt, &hash_max, &short_max_mb)) return NULL;
    self->r.m.short_max = short_max;
    self->r.m.hash_max = hash_max;
    self->r.m.short_max_mb = short_max_mb == 0xFFFFFFFFu ? short_max : short_max_mb;
    self->r.m.backtrack_ok = bt && self->r.bt_valid; /* never enable it where the compiler found it invalid */
    self->r.m.nm_use = bt && !self->r.bt_valid;      /* (non-monotone vocabularies: False forces the heap) */
    Py_RETURN_NONE;
}

static PyMethodDef Model_methods[] = {
    {"encode_spans", (PyCFunction)Model_encode_spans, METH_VARARGS, "encode byte spans of UTF-8 data"},
    {"encode_piece", (PyCFunction)Model_encode_piece, METH_VARARGS, "encode one pre-token with a chosen encoder"},
    {"decode_bytes", (PyCFunction)Model_decode_bytes, METH_O, "token ids -> bytes"},
    {"span_lookup", (PyCFunction)Model_span_lookup, METH_VARARGS, "whole-span lookup: bytes -> id or None"},
    {"set_pretokenizer", (PyCFunction)Model_set_pretokenizer, METH_VARARGS, "attach the regex DFA levels"},
    {"encode", (PyCFunction)Model_encode, METH_VARARGS, "encode a text (str or UTF-8 bytes)"},
    {"encode_segments", (PyCFunction)Model_encode_segments, METH_VARARGS, "encode (start, end, literal) segments"},
    {"encode_batch", (PyCFunction)Model_encode_batch, METH_VARARGS, "encode a list of str on threads"},
    {"encode_proven", (PyCFunction)Model_encode_proven, METH_VARARGS,
     "encode_proven(text, cls, ok, K, guards, parts, specials, num_threads, sp2=None, search=16384)"},
    {"encode_cuts", (PyCFunction)Model_encode_cuts, METH_VARARGS,
     "encode_cuts(text, cuts, specials, num_threads, sp2=None): pieces between code point cuts on threads, one list"},
    {"_profile", (PyCFunction)Model_profile, METH_VARARGS, "cost breakdown (benchmarks)"},
    {"clear_cache", (PyCFunction)Model_clear_cache, METH_NOARGS, "forget the pre-token memos of this model"},
    {"set_memo", (PyCFunction)Model_set_memo, METH_O, "enable/disable the thread-private pre-token memo"},
    {"shared_cache_entries", (PyCFunction)Model_shared_cache_entries, METH_NOARGS,
     "pieces in the shared piece cache of multi-threaded calls (-1: none made yet)"},
    {"_tune", (PyCFunction)Model_tune, METH_VARARGS, "set short_max / backtracking (tests, benchmarks)"},
    {"self_check", (PyCFunction)Model_self_check, METH_NOARGS, "every reachable token encodes to itself"},
    {"_pair_small_check", (PyCFunction)Model_pair_small_check, METH_NOARGS, "small-id pair bitmap vs hashed table (tests)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fstok.runtime._bpe.Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "compiled byte-level BPE tables",
    .tp_methods = Model_methods,
    .tp_init = (initproc)Model_init,
    .tp_new = PyType_GenericNew,
};

static PyObject *py_fallbacks(PyObject *self, PyObject *noargs) {
    return PyLong_FromUnsignedLong(__atomic_load_n(&bpe_backtrack_fallbacks, __ATOMIC_RELAXED));
}

static PyObject *py_nm_spans(PyObject *self, PyObject *noargs) {
    return Py_BuildValue("(kk)", __atomic_load_n(&bpe_nm_spans[0], __ATOMIC_RELAXED),
                         __atomic_load_n(&bpe_nm_spans[1], __ATOMIC_RELAXED));
}


static PyObject *py_lanes_filled(PyObject *self, PyObject *noargs) {
    return PyLong_FromUnsignedLong(__atomic_load_n(&pc_lanes_filled, __ATOMIC_RELAXED));
}

static PyObject *py_lanes_filled_long(PyObject *self, PyObject *noargs) {
    return PyLong_FromUnsignedLong(__atomic_load_n(&pc_lanes_filled_long, __ATOMIC_RELAXED));
}

static PyMethodDef module_methods[] = {
    {"backtrack_fallbacks", py_fallbacks, METH_NOARGS, "spans the backtracking encoder handed to the heap"},
    {"lanes_filled", py_lanes_filled, METH_NOARGS, "pieces the lockstep fill of cold pieces encoded (pc_fill_cold)"},
    {"lanes_filled_long", py_lanes_filled_long, METH_NOARGS,
     "pieces of 17-24 bytes among them (stored as long entries of the piece cache)"},
    {"nm_spans", py_nm_spans, METH_NOARGS,
     "long spans of non-monotone vocabularies: (holding a non-monotone token: heap, without: monotone encoders)"},
    {"build_splits", py_build_splits, METH_VARARGS, "canonical merge of every token"},
    {"build_pair_table", py_build_pair_table, METH_VARARGS, "pair -> merged id hash"},
    {"build_span_table", py_build_span_table, METH_VARARGS, "bytes -> id hash"},
    {"build_trie", py_build_trie, METH_VARARGS, "double-array trie + next_prefix"},
    {"build_filters", py_build_filters, METH_VARARGS, "span bloom filter and segment tables"},
    {"tables_ok", py_tables_ok, METH_VARARGS, "every index of a BPE artifact's tables in range (bpe_validate.h)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_bpe", "fstok byte-level BPE runtime", -1,
                                       module_methods};

PyMODINIT_FUNC PyInit__bpe(void) {
    pc_init_masks();
    pc_init_lines();
    if (PyType_Ready(&ModelType) < 0) return NULL;
    if (PyType_Ready(&SpecialsType) < 0) return NULL;
    PyObject *mod = PyModule_Create(&moduledef);
    if (!mod) return NULL;
    Py_INCREF(&ModelType);
    if (PyModule_AddObject(mod, "Model", (PyObject *)&ModelType) < 0) {
        Py_DECREF(&ModelType);
        Py_DECREF(mod);
        return NULL;
    }
    Py_INCREF(&SpecialsType);
    if (PyModule_AddObject(mod, "Specials", (PyObject *)&SpecialsType) < 0) {
        Py_DECREF(&SpecialsType);
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}

