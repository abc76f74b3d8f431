/* fstok.runtime._wordpiece: the Python binding of the WordPiece runtime (oracle: fstok/reference/wordpiece.py).
 *
 * This file converts arguments and results, manages the GIL and the token-id ints, and calls the cores:
 *   wp_tables.h     table layout, record decoders, output buffer
 *   wp_walk.h       LinMaxMatch walk over the blob
 *   wp_normalize.h  BERT normalization + pre-tokenization fused with the walk (one pass)
 *   wp_layout.h     the blob built from the artifact's arrays at load
 *   wp_batch.h      work queue, workers, parallel copy, long-text cut points
 *   wp_spans.h      the model over pre-cut pieces (the tokenizer.json pipeline's model stage)
 * The cores are headers of static functions compiled into this one translation unit, so the hot loop
 * inlines exactly as when it was one file.
 *
 * The tables are built by fstok/compile/wordpiece.py and fstok/compile/bert_normalize.py and validated
 * (every index in range) by fstok/wordpiece.py before this module sees them, so the hot loop does no
 * bounds checks on table reads.  Input text is UTF-8 from a Python str (always valid) or validated bytes.
 *
 * Performance notes:
 *  - one normalization-table read per code point; word chars that normalize to themselves
 *    (KIND_REG) feed their original bytes straight into the trie;
 *  - the walk reads one array, the blob derived at load (wp_layout.h), so a transition touches one place
 *    and walking down a word reads forward in memory;
 *  - sparse states compare their sorted labels with SIMD, then follow f(v) (usually to a hub);
 *  - offsets are computed only when asked for (a separate instantiation of the loop);
 *  - the GIL is released around every encode; encode_batch and long texts (encode_split) run on the
 *    module's persistent worker pool (tpool.h);
 *  - token-id ints are pinned (pyids.h: never freed), so result lists hold them without Py_INCREF and a
 *    long text's list is filled by the pool threads (split_pinned).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pyids.h"
#include "tpool.h"
#include "wp_batch.h"
#include "wp_layout.h"
#include "wp_normalize.h"
#include "wp_spans.h"
#include "wp_tables.h"
#include "wp_validate.h"
#include "wp_walk.h"

/* ---------------------------------------------------------------- Python type */
#define N_BUFS 11
typedef struct {
    PyObject_HEAD
    wp_tables t;
    Py_buffer bufs[N_BUFS];
    int nbufs;
    /* the int object of each token id, created on first use and kept (see id_int) */
    uint16_t *slot_of;  /* per id: 1 + its slot, 0 while it has none */
    PyObject **slots;   /* the ints, in the order they were first needed (WP_SLOTS at most) */
    size_t n_slots, slot_cap; /* slot_cap: WP_SLOTS, or less for the tests ($FSTOK_WP_SLOTS) */
    PyObject **idcache; /* per id, for ids beyond the first WP_SLOTS distinct ones (allocated then; not pinned) */
    size_t n_ids;
    int pinned; /* slots hold pinned ints of the module table (wpin_*): no reference owned, none handed out */
} ModelObject;
#define WP_SLOTS 65535

static int build_idcache(ModelObject *self);

static void Model_dealloc(ModelObject *self) {
    free(self->t.blob);
    if (self->idcache) {
        for (size_t i = 0; i < self->n_ids; i++) Py_XDECREF(self->idcache[i]);
        free(self->idcache);
    }
    if (!self->pinned)
        for (size_t i = 0; i < self->n_slots; i++) Py_DECREF(self->slots[i]);
    free(self->slots);
    free(self->slot_of);
    for (int i = 0; i < self->nbufs; i++) PyBuffer_Release(&self->bufs[i]);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int get_buf(ModelObject *self, PyObject *obj, Py_ssize_t itemsize, const void **ptr, const char *name) {
    Py_buffer *b = &self->bufs[self->nbufs];
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS) < 0) return -1;
    self->nbufs++;
    if (b->len % itemsize) {
        PyErr_Format(PyExc_ValueError, "table %s: length %zd is not a multiple of %zd", name, b->len, itemsize);
        return -1;
    }
    *ptr = b->buf;
    return 0;
}

static int Model_init(ModelObject *self, PyObject *args, PyObject *kw) {
    PyObject *o[N_BUFS];
    unsigned int n_nodes, n_dense, root, suffix_root, prefix_len, unk_id, max_chars;
    int strip_mode;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOOOIIIIIIIp", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &o[8],
                          &o[9], &o[10], &n_nodes, &n_dense, &root, &suffix_root, &prefix_len, &unk_id,
                          &max_chars, &strip_mode))
        return -1;
    if (self->nbufs) {
        PyErr_SetString(PyExc_RuntimeError, "Model already initialized");
        return -1;
    }
    wp_tables *t = &self->t;
    if (get_buf(self, o[0], 8, (const void **)&t->node, "node") < 0 ||
        get_buf(self, o[1], 1, (const void **)&t->edge_label, "edge_label") < 0 ||
        get_buf(self, o[2], 4, (const void **)&t->edge_target, "edge_target") < 0 ||
        get_buf(self, o[3], 8, (const void **)&t->failpops, "failpops") < 0 ||
        get_buf(self, o[4], 4, (const void **)&t->pool, "pool") < 0 ||
        get_buf(self, o[5], 8, (const void **)&t->dense, "dense") < 0 ||
        get_buf(self, o[6], 4, (const void **)&t->tok_len, "tok_len") < 0 ||
        get_buf(self, o[7], 2, (const void **)&t->norm1, "norm1") < 0 ||
        get_buf(self, o[8], 4, (const void **)&t->norm2, "norm2") < 0 ||
        get_buf(self, o[9], 4, (const void **)&t->npool, "npool") < 0 ||
        get_buf(self, o[10], 4, (const void **)&t->suffix_word, "suffix_word") < 0)
        return -1;
    /* cheap structural checks that protect the hot loop (the Python loader checks every entry) */
    if (self->bufs[0].len != (Py_ssize_t)n_nodes * 8 || self->bufs[3].len != (Py_ssize_t)n_nodes * 8 ||
        self->bufs[5].len != (Py_ssize_t)n_dense * 256 * 8 || self->bufs[7].len != (0x110000 >> 8) * 2 ||
        root >= n_nodes || suffix_root >= n_nodes || n_dense > n_nodes || unk_id * 4 >= (size_t)self->bufs[6].len) {
        PyErr_SetString(PyExc_ValueError, "WordPiece tables have inconsistent sizes");
        return -1;
    }
    t->n_suffix_word = (uint32_t)(self->bufs[10].len / 4);
    t->n_nodes = n_nodes;
    t->n_dense = n_dense;
    t->root = root;
    t->suffix_root = suffix_root;
    t->prefix_len = prefix_len;
    t->unk_id = unk_id;
    t->max_chars = max_chars;
    t->strip_mode = strip_mode;
    {
        const uint32_t *ascii = t->norm2 + ((size_t)t->norm1[0] << 8);
        for (int b = 0; b < 256; b++) t->wordbyte[b] = b < 0x80 && (ascii[b] & 7) == KIND_REG;
        for (int k = 0; k < 256; k++) t->lowmask[k] = (uint16_t)((1u << (k < 16 ? k : 16)) - 1);
        scan_inline_pops(t);
        const char *err = NULL;
        if (build_blob(t, (size_t)self->bufs[4].len / 4, &err) < 0) {
            if (err == WP_ENOMEM) PyErr_NoMemory();
            else PyErr_SetString(PyExc_ValueError, err);
            return -1;
        }
    }
    return build_idcache(self);
}

/* The int object of token id `id` (a new reference; for a pinned model see id_int_pinned and the pinned
 * ints below), with the GIL.  The model's int objects are
 * created on first use, not at load: they then lie in memory in the order the text first needed them
 * (the ids of one language's common tokens side by side) instead of spread over the whole vocabulary
 * (120k ints = 3.8 MB for mBERT; see docs/design/wordpiece.md).  The table that finds them is in that
 * order too: slot_of[id] (2 bytes per id) names the int's slot, and slots[] holds the pointers in
 * first-use order, so the ~15k distinct ids of a pass over multilingual.txt read ~2k lines of slots
 * and ~3k of slot_of instead of 8.3k lines of a per-id pointer table (0.96 MB for mBERT).  Past
 * WP_SLOTS distinct ids a per-id table takes the rest (pinned: the module's table).  Entries only go
 * from empty to an int, under the GIL (slot first, then its number, both with release stores); threads
 * without the GIL read them with acquire loads (peek_int). */
static PyObject *id_int_new(ModelObject *self, uint32_t id);

/* ---- pinned ints (pyids.h): one table per extension module, indexed by value in chunks of 1024
 * pointers (allocated on first need and never moved, so threads without the GIL can read it while a GIL
 * holder adds entries), filled lazily: an int is created, pinned and published the first time any model of
 * this module needs it, so the ints still lie in memory in first-use order.  Shared by all models (a model
 * loaded again reuses them: bounded by the largest vocabulary, like pyids_pinned_ints).  A model's slots
 * point into it (pinned models own no reference: Model_dealloc leaves them).  With pinned ints a result
 * list holds borrowed pointers and no Py_INCREF is taken, so the list of a long text can be filled by the
 * pool threads without the GIL (split_pinned).  FSTOK_PIN_INTS=0 (or a Python that cannot pin) keeps the
 * counted path. */
#define WPIN_BITS 10
#define WPIN_CHUNKS 4096 /* ids < 4M (larger ids: a fresh int each time, never seen in practice) */
#define WPIN_MAX ((uint32_t)WPIN_CHUNKS << WPIN_BITS)
static PyObject **wpin_chunk[WPIN_CHUNKS];

/* with the GIL: whether this module pins ints (decided once: FSTOK_PIN_INTS, and a trial pin) */
static int wpin_on(void) {
    if (pyids_pin_state < 0) {
        const char *env = getenv("FSTOK_PIN_INTS");
        pyids_pin_state = PYIDS_CAN_PIN && !(env && env[0] == '0');
        if (pyids_pin_state) { /* can this Python pin an int that is not one of its small ints? */
            PyObject *v = PyLong_FromUnsignedLong(WPIN_MAX + 12345u); /* (kept pinned: one int) */
            if (!v) {
                PyErr_Clear();
                pyids_pin_state = 0;
            } else if (!pyids_pin(v)) {
                Py_DECREF(v);
                pyids_pin_state = 0;
            }
        }
    }
    return pyids_pin_state;
}

/* without the GIL: the pinned int of id, or NULL if none has been made yet */
static inline PyObject *wpin_peek(uint32_t id) {
    if (id >= WPIN_MAX) return NULL;
    PyObject **c = __atomic_load_n(&wpin_chunk[id >> WPIN_BITS], __ATOMIC_ACQUIRE);
    return c ? __atomic_load_n(&c[id & ((1u << WPIN_BITS) - 1)], __ATOMIC_ACQUIRE) : NULL;
}

/* with the GIL, id < WPIN_MAX: the pinned int of id (borrowed; it is never freed), made on first need;
 * NULL with an exception */
static PyObject *wpin_get(uint32_t id) {
    PyObject *v = wpin_peek(id);
    if (v) return v;
    PyObject **c = wpin_chunk[id >> WPIN_BITS];
    if (!c) {
        c = (PyObject **)calloc((size_t)1 << WPIN_BITS, sizeof(PyObject *));
        if (!c) return PyErr_NoMemory();
        __atomic_store_n(&wpin_chunk[id >> WPIN_BITS], c, __ATOMIC_RELEASE);
    }
    v = PyLong_FromUnsignedLong(id);
    if (!v) return NULL;
    if (!pyids_pin(v)) { /* (wpin_on's trial pin worked: not expected) */
        Py_DECREF(v);
        PyErr_SetString(PyExc_RuntimeError, "fstok: could not pin a token-id int");
        return NULL;
    }
    __atomic_store_n(&c[id & ((1u << WPIN_BITS) - 1)], v, __ATOMIC_RELEASE);
    return v;
}

HOT PyObject *id_int(ModelObject *self, uint32_t id) {
    if (__builtin_expect(id < self->n_ids, 1)) {
        const uint32_t s = self->slot_of[id];
        if (__builtin_expect(s != 0, 1)) {
            PyObject *v = self->slots[s - 1];
            Py_INCREF(v);
            return v;
        }
    }
    return id_int_new(self, id);
}

/* id_int for a pinned model: the list item without a reference taken (a fresh int for ids past the tables) */
HOT PyObject *id_int_pinned(ModelObject *self, uint32_t id) {
    if (__builtin_expect(id < self->n_ids, 1)) {
        const uint32_t s = self->slot_of[id];
        if (__builtin_expect(s != 0, 1)) return self->slots[s - 1];
    }
    return id_int_new(self, id);
}

/* the slow path of id_int / id_int_pinned (same reference rules) */
static PyObject *id_int_new(ModelObject *self, uint32_t id) {
    if (id >= self->n_ids) return PyLong_FromUnsignedLong(id);
    if (self->pinned) {
        if (id >= WPIN_MAX) return PyLong_FromUnsignedLong(id);
        PyObject *v = wpin_get(id);
        if (v && self->n_slots < self->slot_cap) {
            __atomic_store_n(&self->slots[self->n_slots], v, __ATOMIC_RELEASE);
            self->n_slots++;
            __atomic_store_n(&self->slot_of[id], (uint16_t)self->n_slots, __ATOMIC_RELEASE);
        }
        return v; /* (past the slots: the module table is the per-id table) */
    }
    if (self->idcache && self->idcache[id]) {
        Py_INCREF(self->idcache[id]);
        return self->idcache[id];
    }
    PyObject *v = PyLong_FromLong((long)id);
    if (!v) return NULL;
    if (self->n_slots < self->slot_cap) {
        Py_INCREF(v); /* the model's reference */
        __atomic_store_n(&self->slots[self->n_slots], v, __ATOMIC_RELEASE);
        self->n_slots++;
        __atomic_store_n(&self->slot_of[id], (uint16_t)self->n_slots, __ATOMIC_RELEASE);
        return v;
    }
    if (!self->idcache) {
        PyObject **c = (PyObject **)calloc(self->n_ids, sizeof(PyObject *));
        if (!c) return v; /* not cached: a fresh int every time */
        __atomic_store_n(&self->idcache, c, __ATOMIC_RELEASE);
    }
    Py_INCREF(v);
    __atomic_store_n(&self->idcache[id], v, __ATOMIC_RELEASE);
    return v;
}

/* A borrowed pointer to id's int where one exists (NULL: none yet); needs no GIL. */
static inline PyObject *peek_int(const ModelObject *self, uint32_t id) {
    if (id >= self->n_ids) return NULL;
    const uint32_t s = __atomic_load_n(&self->slot_of[id], __ATOMIC_ACQUIRE);
    if (s) return __atomic_load_n(&self->slots[s - 1], __ATOMIC_ACQUIRE);
    if (self->pinned) return wpin_peek(id);
    PyObject **c = __atomic_load_n(&self->idcache, __ATOMIC_ACQUIRE);
    return c ? __atomic_load_n(&c[id], __ATOMIC_ACQUIRE) : NULL;
}

static PyObject *ids_to_list(ModelObject *self, const outbuf *o) {
    PyObject *l = PyList_New((Py_ssize_t)o->n);
    if (!l) return NULL;
    PyObject **dst = ((PyListObject *)l)->ob_item;
    if (self->pinned) {
        for (size_t i = 0; i < o->n; i++) {
            PyObject *v = id_int_pinned(self, o->ids[i]);
            if (!v) {
                Py_DECREF(l); /* (the items not yet set are NULL) */
                return NULL;
            }
            dst[i] = v;
        }
        return l;
    }
    for (size_t i = 0; i < o->n; i++) {
        PyObject *v = id_int(self, o->ids[i]);
        if (!v) {
            Py_DECREF(l); /* (the items not yet set are NULL) */
            return NULL;
        }
        dst[i] = v;
    }
    return l;
}

static int build_idcache(ModelObject *self) {
    size_t n = (size_t)(self->bufs[6].len / 4); /* tok_len has one entry per id */
    const char *ev = getenv("FSTOK_WP_SLOTS"); /* a test hook: fewer slots, so that the per-id table is used */
    long cap = ev ? strtol(ev, NULL, 10) : WP_SLOTS;
    self->slot_cap = cap < 0 ? 0 : cap < WP_SLOTS ? (size_t)cap : WP_SLOTS;
    if (self->slot_cap > n) self->slot_cap = n;
    self->slot_of = (uint16_t *)calloc(n ? n : 1, sizeof(uint16_t)); /* filled by id_int_new */
    self->slots = (PyObject **)calloc(self->slot_cap ? self->slot_cap : 1, sizeof(PyObject *));
    if (!self->slot_of || !self->slots) { PyErr_NoMemory(); return -1; }
    self->n_ids = n;
    self->pinned = wpin_on();
    return 0;
}

static PyObject *offs_to_list(const outbuf *o) {
    PyObject *l = PyList_New((Py_ssize_t)o->n);
    if (!l) return NULL;
    for (size_t i = 0; i < o->n; i++) {
        PyObject *v = Py_BuildValue("(II)", o->offs[2 * i], o->offs[2 * i + 1]);
        if (!v) { Py_DECREF(l); return NULL; }
        PyList_SET_ITEM(l, (Py_ssize_t)i, v);
    }
    return l;
}

/* mode: 0 = list of ids, 1 = (ids, offsets) lists, 2 = bytes of uint32 ids, 3 = (ids bytes, offsets bytes) */
static PyObject *finish(ModelObject *self, outbuf *o, int mode) {
    PyObject *r = NULL;
    if (o->oom) {
        PyErr_NoMemory();
    } else if (mode == 0) {
        r = ids_to_list(self, o);
    } else if (mode == 1) {
        PyObject *a = ids_to_list(self, o), *b = a ? offs_to_list(o) : NULL;
        if (a && b) r = PyTuple_Pack(2, a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    } else if (mode == 2) {
        r = PyBytes_FromStringAndSize((const char *)o->ids, (Py_ssize_t)(o->n * 4));
    } else {
        PyObject *a = PyBytes_FromStringAndSize((const char *)o->ids, (Py_ssize_t)(o->n * 4));
        PyObject *b = a ? PyBytes_FromStringAndSize((const char *)o->offs, (Py_ssize_t)(o->n * 8)) : NULL;
        if (a && b) r = PyTuple_Pack(2, a, b);
        Py_XDECREF(a);
        Py_XDECREF(b);
    }
    out_free(o);
    return r;
}

static int text_bytes(PyObject *text, const char **s, Py_ssize_t *n) {
    if (PyUnicode_Check(text)) {
        *s = PyUnicode_AsUTF8AndSize(text, n);
        return *s ? 0 : -1;
    }
    PyErr_Format(PyExc_TypeError, "text must be str, not %.100s", Py_TYPE(text)->tp_name);
    return -1;
}

#define STACK_IDS 512
static PyObject *encode_utf8(ModelObject *self, const char *s, Py_ssize_t n, int mode, int word) {
    outbuf o;
    uint32_t stack_ids[STACK_IDS]; /* a sentence's ids: no malloc / realloc / free per call */
    memset(&o, 0, sizeof(o));
    o.want_offs = (mode & 1);
    if (!o.want_offs) {
        o.ids = stack_ids;
        o.cap = STACK_IDS;
        o.borrowed = 1;
    }
    if (n < 4096) { /* releasing the GIL costs more than encoding a short text */
        if (word) wp_encode_word(&self->t, (const uint8_t *)s, (size_t)n, &o);
        else wp_encode_e2e(&self->t, (const uint8_t *)s, (size_t)n, &o);
    } else {
        Py_BEGIN_ALLOW_THREADS
        if (word) wp_encode_word(&self->t, (const uint8_t *)s, (size_t)n, &o);
        else wp_encode_e2e(&self->t, (const uint8_t *)s, (size_t)n, &o);
        Py_END_ALLOW_THREADS
    }
    return finish(self, &o, mode);
}

static PyObject *Model_encode(ModelObject *self, PyObject *args) {
    PyObject *text;
    int mode = 0, word = 0;
    if (!PyArg_ParseTuple(args, "O|ip", &text, &mode, &word)) return NULL;
    const char *s;
    Py_ssize_t n;
    if (text_bytes(text, &s, &n) < 0) return NULL;
    return encode_utf8(self, s, n, mode, word);
}

/* encode_spans(data, triples, mode=0): the WordPiece model on each (start, end, flag) uint32 triple of the
 * UTF-8 bytes `data` (pieces a tokenizer.json pipeline cut).  mode 0: the ids, a list; 1: (ids, offsets,
 * counts) as bytes of uint32: offsets two per token in characters of its piece, counts one per piece. */
static PyObject *Model_encode_spans(ModelObject *self, PyObject *args) {
    Py_buffer d, tr;
    int mode = 0;
    if (!PyArg_ParseTuple(args, "y*y*|i", &d, &tr, &mode)) return NULL;
    PyObject *r = NULL;
    uint32_t *counts = NULL;
    outbuf o;
    uint32_t stack_ids[STACK_IDS];
    memset(&o, 0, sizeof(o));
    if (tr.len % 12 || (mode != 0 && mode != 1)) {
        PyErr_SetString(PyExc_ValueError, "encode_spans: triples must be uint32 (start, end, flag) and mode 0 or 1");
        goto done;
    }
    const size_t nt = (size_t)tr.len / 12;
    const uint32_t *tri = (const uint32_t *)tr.buf;
    if (((uintptr_t)tr.buf & 3) || !wp_spans_ok((const uint8_t *)d.buf, (size_t)d.len, tri, nt)) {
        PyErr_SetString(PyExc_ValueError, "encode_spans: the data is not UTF-8 or a span is not a character range of it");
        goto done;
    }
    o.want_offs = mode == 1;
    if (!o.want_offs) {
        o.ids = stack_ids;
        o.cap = STACK_IDS;
        o.borrowed = 1;
    } else if (!(counts = (uint32_t *)malloc(nt * 4 + 4))) {
        PyErr_NoMemory();
        goto done;
    }
    if (d.len < 4096) {
        wp_encode_spans(&self->t, (const uint8_t *)d.buf, tri, nt, &o, counts);
    } else {
        Py_BEGIN_ALLOW_THREADS
        wp_encode_spans(&self->t, (const uint8_t *)d.buf, tri, nt, &o, counts);
        Py_END_ALLOW_THREADS
    }
    if (o.oom) {
        PyErr_NoMemory();
        out_free(&o);
    } else if (mode == 0) {
        r = finish(self, &o, 0);
    } else {
        PyObject *a = PyBytes_FromStringAndSize((const char *)o.ids, (Py_ssize_t)(o.n * 4));
        PyObject *b = a ? PyBytes_FromStringAndSize((const char *)o.offs, (Py_ssize_t)(o.n * 8)) : NULL;
        PyObject *c = b ? PyBytes_FromStringAndSize((const char *)counts, (Py_ssize_t)(nt * 4)) : NULL;
        if (a && b && c) r = PyTuple_Pack(3, a, b, c);
        Py_XDECREF(a);
        Py_XDECREF(b);
        Py_XDECREF(c);
        out_free(&o);
    }
done:
    free(counts);
    PyBuffer_Release(&d);
    PyBuffer_Release(&tr);
    return r;
}

/* tok.encode for the common call, encode(text) with an exact str: a C function bound to
 * (model, fallback) so that no Python frame runs; any other call (keywords, bytes, a str that is
 * not UTF-8 encodable) goes to the fallback, the Python method, which validates and explains. */
static PyObject *fast_encode(PyObject *st, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    if (nargs == 1 && (!kwnames || PyTuple_GET_SIZE(kwnames) == 0) && PyUnicode_CheckExact(args[0])) {
        Py_ssize_t n;
        const char *s = PyUnicode_AsUTF8AndSize(args[0], &n);
        if (s) return encode_utf8((ModelObject *)PyTuple_GET_ITEM(st, 0), s, n, 0, 0);
        PyErr_Clear();
    }
    return PyObject_Vectorcall(PyTuple_GET_ITEM(st, 1), args, (size_t)nargs, kwnames);
}

static PyMethodDef fast_encode_def = {
    "encode", (PyCFunction)(void (*)(void))fast_encode, METH_FASTCALL | METH_KEYWORDS,
    "encode(text, *, add_special_tokens=False, allowed_special=(), num_threads=None) -> list[int]\n\n"
    "Token ids of text (BERT normalization + pre-tokenization + WordPiece in one pass); see\n"
    "fstok.WordPieceTokenizer.encode. Plain encode(text) runs in C; other calls go to that method."};

static PyObject *Model_fast_encode(ModelObject *self, PyObject *fallback) {
    if (!PyCallable_Check(fallback)) {
        PyErr_SetString(PyExc_TypeError, "fallback must be callable");
        return NULL;
    }
    PyObject *st = PyTuple_Pack(2, (PyObject *)self, fallback);
    if (!st) return NULL;
    PyObject *f = PyCFunction_NewEx(&fast_encode_def, st, NULL);
    Py_DECREF(st);
    return f;
}

/* Encode count texts on nthreads threads (the caller's thread is one of them), GIL released.  Returns
 * the number of threads that ran (the caller included). */
static int run_jobs_src(const wp_tables *t, const char **s, Py_ssize_t *n, const pystr_src *src, uint8_t *bad,
                        outbuf *outs, size_t count, int word, int nthreads) {
    if (nthreads < 1) nthreads = 1;
    if ((size_t)nthreads > count) nthreads = (int)(count > 0 ? count : 1);
    if (nthreads > 256) nthreads = 256;
    batch_job job;
    memset(&job, 0, sizeof job);
    job.t = t;
    job.s = s;
    job.n = n;
    job.outs = outs;
    job.count = count;
    job.next = 0;
    job.word = word;
    job.src = src;
    job.bad = bad;
    pthread_mutex_init(&job.mu, NULL);
    int started = 0;
    Py_BEGIN_ALLOW_THREADS
    pthread_t th[256];
    int pooled;
    started = workers_start(batch_worker, &job, nthreads, th, &pooled);
    batch_worker(&job);
    workers_join(started, th, pooled);
    Py_END_ALLOW_THREADS
    pthread_mutex_destroy(&job.mu);
    return started + 1;
}

static int run_jobs(const wp_tables *t, const char **s, Py_ssize_t *n, outbuf *outs, size_t count, int word,
                    int nthreads) {
    return run_jobs_src(t, s, n, NULL, NULL, outs, count, word, nthreads);
}

/* with the GIL: a list of n items whose item array is allocated but not zeroed (PyList_New calloc's it: a
 * serial memset of 8 bytes per token, 30-60 us for 1 MB of English on 2 vCPUs); the caller must set every
 * item before the list is used or freed, and keep the list untracked by the garbage collector until then
 * (PyObject_GC_UnTrack: a collection in another thread would read the items). */
static PyObject *list_unset(size_t n) {
    if (n == 0 || n > (size_t)PY_SSIZE_T_MAX / sizeof(PyObject *)) return PyList_New((Py_ssize_t)n);
    PyObject **items = (PyObject **)PyMem_Malloc(n * sizeof(PyObject *));
    if (!items) return PyErr_NoMemory();
    PyObject *l = PyList_New(0);
    if (!l) {
        PyMem_Free(items);
        return NULL;
    }
    PyListObject *L = (PyListObject *)l;
    L->ob_item = items;
    L->allocated = (Py_ssize_t)n;
    Py_SET_SIZE(L, (Py_ssize_t)n);
    return l;
}

static void copy_ids(const outbuf *outs, size_t np, uint32_t *dst, size_t total, int nthreads) {
    int want = total >= 65536 ? (int)(total / 32768) : 1;
    if (want > nthreads) want = nthreads;
    size_t *off = want > 1 ? (size_t *)malloc((np + 1) * sizeof(size_t)) : NULL;
    if (!off) { /* (one thread, or no memory for the offsets: copied here) */
        for (size_t i = 0; i < np; i++) {
            if (outs[i].n) memcpy(dst, outs[i].ids, outs[i].n * sizeof(uint32_t));
            dst += outs[i].n;
        }
        return;
    }
    for (size_t i = 0, o = 0; i < np; i++) {
        off[i] = o;
        o += outs[i].n;
    }
    wcopy_job cj;
    cj.dst = dst;
    cj.outs = outs;
    cj.off = off;
    cj.count = np;
    atomic_init(&cj.next, 0);
    Py_BEGIN_ALLOW_THREADS /* (the bytes object is not visible to any other thread yet) */
    int pooled = tp_start(wcopy_worker, &cj, want - 1);
    wcopy_worker(&cj);
    if (pooled >= 0) tp_wait();
    Py_END_ALLOW_THREADS
    free(off);
}

/* With pinned ints, a long text's list is filled after the encoding, by the pool: piece k's ids become the
 * items dst[off[k], off[k+1]) (peek_int: slot table reads, no reference to take, no GIL).  An id whose int
 * does not exist yet (a token this model never returned before) is left NULL and its piece flagged; the
 * caller makes those ints afterwards, with the GIL. */
typedef struct {
    PyObject **dst;
    const ModelObject *model;
    const outbuf *outs;
    const size_t *off;
    int *missing;
    size_t count;
    atomic_size_t next;
} wfill_job;

static void *wfill_worker(void *arg) {
    wfill_job *f = (wfill_job *)arg;
    const ModelObject *self = f->model;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&f->next, 1, memory_order_relaxed);
        if (i >= f->count) break;
        const uint32_t *ids = f->outs[i].ids;
        PyObject **d = f->dst + f->off[i];
        PyObject *miss = (PyObject *)1;
        const size_t m = f->outs[i].n;
        const uint16_t *slot_of = self->slot_of;
        PyObject *const *slots = self->slots;
        const uint32_t n_ids = (uint32_t)self->n_ids;
        for (size_t q = 0; q < m; q++) {
            uint32_t id = ids[q];
            uint32_t sl = id < n_ids ? __atomic_load_n(&slot_of[id], __ATOMIC_ACQUIRE) : 0;
            PyObject *v = sl ? __atomic_load_n(&slots[sl - 1], __ATOMIC_ACQUIRE) : peek_int(self, id);
            d[q] = v;
            miss = v ? miss : NULL;
        }
        f->missing[i] = !miss;
    }
    return NULL;
}

/* The list of a long text with pinned ints: encode the pieces on the pool (the caller too), allocate the
 * list once, fill it on the pool without the GIL, make the ints not made yet.  split_pipelined (the
 * counted way) has to take a reference per item on the GIL-holding thread, one after another: at 16
 * threads that serial tail bounded the list output at 0.16-0.32 of one-shot. */
static PyObject *split_pinned(ModelObject *self, const char **ps, Py_ssize_t *pn, outbuf *outs, size_t np,
                              int nthreads) {
    const int tr = tracing();
    double tr0 = tr ? now_us() : 0, tr_enc = 0, tr_alloc = 0, tr_fill = 0, tr_fix = 0;
    if (tr) atomic_store(&trace_busy_ns, 0);
    size_t *off = (size_t *)calloc(np + 1, sizeof(size_t));
    int *missing = (int *)calloc(np + 1, sizeof(int));
    PyObject *result = NULL;
    int ran = 0, filled_by = 0;
    size_t total = 0, nfix = 0;
    if (!off || !missing) {
        PyErr_NoMemory();
        goto done;
    }
    ran = run_jobs(&self->t, ps, pn, outs, np, 0, nthreads);
    if (tr) tr_enc = now_us();
    for (size_t k = 0; k < np; k++) {
        if (outs[k].oom) {
            PyErr_NoMemory();
            goto done;
        }
        off[k] = total;
        total += outs[k].n;
    }
    result = list_unset(total);
    if (!result) goto done;
    /* untracked while its items are not all written: another Python thread takes the GIL while the pool
     * fills it, and a garbage collection there would traverse the list's items (they are not zeroed) */
    PyObject_GC_UnTrack(result);
    if (tr) tr_alloc = now_us();
    {
        wfill_job fj;
        fj.dst = ((PyListObject *)result)->ob_item;
        fj.model = self;
        fj.outs = outs;
        fj.off = off;
        fj.missing = missing;
        fj.count = np;
        atomic_init(&fj.next, 0);
        /* (small lists: filling on the caller alone is cheaper than waking the pool) */
        int want = total >= 32768 ? (int)(total / 16384) : 1;
        if (want > ran) want = ran;
        Py_BEGIN_ALLOW_THREADS /* (the list is not visible to any other thread: untracked, one reference) */
        /* (the pool, or the caller alone while another job holds the pool: threads of our own would cost
         * more than the fill) */
        int pooled = want > 1 ? tp_start(wfill_worker, &fj, want - 1) : -1;
        filled_by = pooled > 0 ? pooled + 1 : 1;
        wfill_worker(&fj);
        if (pooled >= 0) tp_wait();
        Py_END_ALLOW_THREADS
    }
    if (tr) tr_fill = now_us();
    for (size_t k = 0; k < np; k++) { /* ints made for the first time, with the GIL */
        if (!missing[k]) continue;
        PyObject **d = ((PyListObject *)result)->ob_item + off[k];
        for (size_t q = 0; q < outs[k].n; q++) {
            if (d[q]) continue;
            PyObject *v = id_int_pinned(self, outs[k].ids[q]);
            if (!v) {
                Py_CLEAR(result); /* (NULL items are skipped; the others are pinned or owned) */
                goto done;
            }
            d[q] = v;
            nfix++;
        }
    }
    PyObject_GC_Track(result); /* (every item is an int now, or NULL) */
    if (tr) tr_fix = now_us();
done:
    if (tr && tr_fix > 0) {
        double end = now_us();
        fprintf(stderr,
                "fstok wordpiece split_pinned: %zu pieces %d threads | encoded %.0f us | list alloc %.0f | "
                "filled %.0f (%d threads) | %zu ints made %.0f | total %.0f us | encode busy %.0f us (%.2f of "
                "threads x encode) | %zu ids\n",
                np, ran, tr_enc - tr0, tr_alloc - tr_enc, tr_fill - tr_alloc, filled_by, nfix, tr_fix - tr_fill,
                end - tr0, atomic_load(&trace_busy_ns) / 1e3,
                atomic_load(&trace_busy_ns) / 1e3 / (ran * (tr_enc - tr0)), total);
    }
    free(off);
    free(missing);
    return result;
}

/* Pipelined long-text encoding (ints not pinned: FSTOK_PIN_INTS=0): nthreads workers encode the pieces
 * (handed out in order) and turn each piece's ids into borrowed pointers to the cached int objects (a
 * read-only table: safe off the GIL); the calling thread takes finished pieces in order and only INCREFs
 * those pointers (that must stay on the GIL-holding thread), prefetching ahead.  Building the 10^5-10^6
 * items of the result was the serial tail that capped the speedup; now it overlaps the encoding and is
 * mostly memory writes. */
typedef struct {
    const wp_tables *t;
    const char **s;
    Py_ssize_t *n;
    outbuf *outs;
    const ModelObject *model; /* its ints read without the GIL: atomic loads only (split_borrow) */
    PyObject ***ptrs; /* per piece: borrowed pointers, NULL entries where no cached int exists */
    size_t count;
    atomic_size_t next;
    pyids_sync *sync;
} split_job;

/* pyids_borrow for the lazily filled cache: ids -> borrowed cached pointers (NULL: not created yet;
 * pyids_take_block then makes an int), read atomically since a GIL holder may be filling entries. */
static PyObject **split_borrow(const ModelObject *self, const uint32_t *ids, size_t m) {
    PyObject **pp = (PyObject **)malloc((m ? m : 1) * sizeof(PyObject *));
    if (pp)
        for (size_t k = 0; k < m; k++) pp[k] = peek_int(self, ids[k]);
    return pp;
}

static void *split_worker(void *arg) {
    split_job *j = (split_job *)arg;
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->count) break;
        outbuf local = j->outs[i]; /* on this stack: no false sharing with neighbouring pieces */
        wp_encode_e2e(j->t, (const uint8_t *)j->s[i], (size_t)j->n[i], &local);
        j->ptrs[i] = split_borrow(j->model, local.ids, local.n);
        j->outs[i] = local;
        pyids_sync_mark(j->sync, i);
    }
    return NULL;
}

static PyObject *split_pipelined(ModelObject *self, const char **ps, Py_ssize_t *pn, outbuf *outs, size_t npieces,
                                 int nthreads) {
    pyids_sync sync = {0};
    PyObject ***ptrs = (PyObject ***)calloc(npieces, sizeof(PyObject **));
    size_t *lens = (size_t *)calloc(npieces, sizeof(size_t));
    size_t nref = 0; /* pieces whose items hold references */
    pthread_t th[256];
    int started = 0, failed = 0, pooled = 0;
    if (pyids_sync_init(&sync, npieces) < 0 || !ptrs || !lens) {
        pyids_sync_free(&sync);
        free(ptrs);
        free(lens);
        return PyErr_NoMemory();
    }
    split_job job;
    job.t = &self->t;
    job.s = ps;
    job.n = pn;
    job.outs = outs;
    job.model = self;
    job.ptrs = ptrs;
    job.count = npieces;
    atomic_init(&job.next, 0);
    job.sync = &sync;
    if (nthreads > 255) nthreads = 255;
    /* nthreads workers (the pool, or threads of this call): the caller INCREFs meanwhile */
    started = workers_start(split_worker, &job, nthreads + 1, th, &pooled);
    if (!started) split_worker(&job); /* no thread could be started: encode here */
    for (size_t k = 0; k < npieces && !failed; k++) {
        if (!pyids_sync_ready(&sync, k)) {
            Py_BEGIN_ALLOW_THREADS
            pyids_sync_wait(&sync, k);
            Py_END_ALLOW_THREADS
        }
        outbuf *o = &outs[k];
        PyObject **pp = ptrs[k];
        if (o->oom || !pp) { failed = 1; break; }
        if (pyids_take_block(pp, o->ids, o->n) < 0) { failed = 1; break; }
        nref = k + 1;
    }
    Py_BEGIN_ALLOW_THREADS
    workers_join(started, th, pooled);
    Py_END_ALLOW_THREADS
    for (size_t k = 0; k < npieces; k++) lens[k] = outs[k].n;
    PyObject *result = pyids_list(ptrs, lens, npieces, nref, !failed);
    for (size_t k = 0; k < npieces; k++) free(ptrs[k]);
    free(lens);
    free(ptrs);
    pyids_sync_free(&sync);
    return result;
}

/* One long text on threads: cut the UTF-8 near parts equal slices right before a whitespace,
 * punctuation or CJK character (wp_cut_ok: a word boundary under every normalization flag; the
 * piece on the right starts with that character), encode the pieces in parallel, concatenate.
 * The text's UTF-8 is computed once (and cached in the str, as for encode), not per piece. */
static PyObject *Model_encode_split(ModelObject *self, PyObject *args) {
    PyObject *text;
    int nthreads = 1, parts = 0, mode = 0;
    if (!PyArg_ParseTuple(args, "Oi|ii", &text, &nthreads, &parts, &mode)) return NULL;
    if (mode != 0 && mode != 2) {
        PyErr_SetString(PyExc_ValueError, "encode_split: mode must be 0 (list) or 2 (bytes)");
        return NULL;
    }
    const int tr = tracing();
    double tr0 = tr ? now_us() : 0, tr_cut = 0, tr_enc = 0, tr_out = 0;
    const char *how = "?";
    int ran = 0;
    const char *s;
    Py_ssize_t n;
    if (text_bytes(text, &s, &n) < 0) return NULL;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > 256) nthreads = 256;
    if (parts < 1) { /* pieces per thread: 4, or $FSTOK_SPLIT_PARTS (as for BPE; read once) */
        static int per_thread = 0;
        if (!per_thread) {
            const char *e = getenv("FSTOK_SPLIT_PARTS");
            long v = e ? strtol(e, NULL, 10) : 4;
            per_thread = v < 1 ? 4 : v > 64 ? 64 : (int)v;
        }
        parts = per_thread * nthreads;
    }
    if (parts > 4096) parts = 4096;
    size_t *cut = (size_t *)malloc(((size_t)parts + 1) * sizeof(size_t));
    const char **ps = (const char **)calloc((size_t)parts + 1, sizeof(char *));
    Py_ssize_t *pn = (Py_ssize_t *)calloc((size_t)parts + 1, sizeof(Py_ssize_t));
    outbuf *outs = (outbuf *)calloc((size_t)parts + 1, sizeof(outbuf));
    PyObject *result = NULL;
    size_t npieces = 0;
    if (!cut || !ps || !pn || !outs) { PyErr_NoMemory(); goto done; }
    {
        npieces = wp_find_cuts(&self->t, s, (size_t)n, parts, cut);
        for (size_t i = 0; i < npieces; i++) {
            ps[i] = s + cut[i];
            pn[i] = (Py_ssize_t)(cut[i + 1] - cut[i]);
        }
    }
    if (tr) tr_cut = now_us();
    if (mode == 0 && nthreads > 1 && npieces > 1) {
        how = self->pinned ? "list, pinned (split_pinned)" : "list, counted (split_pipelined)";
        if (self->pinned) result = split_pinned(self, ps, pn, outs, npieces, nthreads);
        else result = split_pipelined(self, ps, pn, outs, npieces, nthreads);
        if (tr) tr_enc = tr_out = now_us();
        goto done;
    }
    how = mode == 2 ? "bytes" : "list, one thread";
    if (tr) atomic_store(&trace_busy_ns, 0);
    ran = run_jobs(&self->t, ps, pn, outs, npieces, 0, nthreads);
    if (tr) tr_enc = now_us();
    {
        size_t total = 0;
        for (size_t i = 0; i < npieces; i++) {
            if (outs[i].oom) { PyErr_NoMemory(); goto done; }
            total += outs[i].n;
        }
        if (mode == 2) {
            result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * 4));
            if (!result) goto done;
            copy_ids(outs, npieces, (uint32_t *)PyBytes_AS_STRING(result), total, ran);
        } else {
            result = PyList_New((Py_ssize_t)total);
            if (!result) goto done;
            Py_ssize_t k = 0;
            for (size_t i = 0; i < npieces; i++) {
                for (size_t j = 0; j < outs[i].n; j++) {
                    PyObject *v = self->pinned ? id_int_pinned(self, outs[i].ids[j]) : id_int(self, outs[i].ids[j]);
                    if (!v) {
                        Py_CLEAR(result);
                        goto done;
                    }
                    PyList_SET_ITEM(result, k++, v);
                }
            }
        }
    }
    if (tr) tr_out = now_us();
done:
    if (outs) for (size_t i = 0; i < npieces; i++) out_free(&outs[i]);
    if (tr && tr_out > 0) {
        double end = now_us();
        if (ran) /* (the list paths print their own phases first) */
            fprintf(stderr,
                    "fstok wordpiece encode_split (%s): %zu pieces %d threads | utf8+cuts %.0f us | encoded %.0f | "
                    "output %.0f | pieces freed %.0f | total %.0f us | encode busy %.0f us (%.2f of threads x encode)\n",
                    how, npieces, ran, tr_cut - tr0, tr_enc - tr_cut, tr_out - tr_enc, end - tr_out, end - tr0,
                    atomic_load(&trace_busy_ns) / 1e3, atomic_load(&trace_busy_ns) / 1e3 / (ran * (tr_enc - tr_cut)));
        else
            fprintf(stderr,
                    "fstok wordpiece encode_split (%s): %zu pieces %d threads | utf8+cuts %.0f us | encoded+list %.0f | "
                    "pieces freed %.0f | total %.0f us\n",
                    how, npieces, nthreads, tr_cut - tr0, tr_out - tr_cut, end - tr_out, end - tr0);
    }
    free(cut);
    free(ps);
    free(pn);
    free(outs);
    return result;
}

/* the list batch's translate (wb_job, no GIL): the cached int of each id, or (id << 1) | 1 where there is none yet */
static void wp_translate(const void *model, const uint32_t *ids, size_t n, void **dst, uint8_t *odd) {
    const ModelObject *self = (const ModelObject *)model;
    uint8_t o = 0;
    for (size_t q = 0; q < n; q++) {
        PyObject *v = peek_int(self, ids[q]);
        if (!v) {
            v = (PyObject *)(((uintptr_t)ids[q] << 1) | 1);
            o = 1;
        }
        dst[q] = v;
    }
    *odd = o;
}

/* with the GIL: a text's list from the items a worker wrote (one allocation and a copy); odd items are
 * ids whose int is made here.  Untracked by the cyclic GC (see the list loop of Model_encode_batch). */
static PyObject *items_list(ModelObject *self, void **items, size_t n, int odd) {
    PyObject *l = PyList_New(0);
    if (!l) return NULL;
    if (n) {
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
                PyObject *v = id_int_pinned(self, (uint32_t)((uintptr_t)dst[q] >> 1));
                if (!v) {
                    Py_SET_SIZE(l, (Py_ssize_t)q); /* (items before q are pinned) */
                    Py_DECREF(l);
                    return NULL;
                }
                dst[q] = v;
            }
        Py_SET_SIZE(l, (Py_ssize_t)n);
    }
    PyObject_GC_UnTrack(l);
    return l;
}

/* A list batch with pinned ints on several threads: the workers encode blocks and write their list items
 * and records (wb_job, wp_batch.h), and this thread makes each text's list as soon as its block is published,
 * while the others still encode; when the block it needs next is not done it encodes a block itself.  Why:
 * made after the workers, the lists were a serial part of every call (a tenth to a fifth of a call of short
 * lines on one thread).  Returns the list, or NULL with an exception. */
static PyObject *batch_lists_overlapped(ModelObject *self, const pystr_src *src, uint8_t *bad, outbuf *outs,
                                        size_t cnt, int word, int nthreads) {
    (void)outs;
    wb_job job;
    memset(&job, 0, sizeof job);
    job.t = &self->t;
    job.word = word;
    job.src = src;
    job.bad = bad;
    job.count = cnt;
    job.translate = wp_translate;
    job.model = self;
    atomic_init(&job.next, 0);
    atomic_init(&job.chunks, NULL);
    size_t *bstart = (size_t *)malloc((cnt + 2) * (sizeof(size_t) + sizeof(wb_text *)));
    PyObject *res = NULL;
    if (!bstart) {
        PyErr_NoMemory();
        return NULL;
    }
    wb_text **recs = (wb_text **)(bstart + cnt + 2);
    {
        /* blocks of <= 64 texts and ~1/16 of a thread's share of the bytes (as the BPE batch) */
        size_t total = 0;
        for (size_t i = 0; i < cnt; i++) total += pystr_weight(&src[i]);
        size_t nb = pystr_blocks(src, cnt, total / ((size_t)(nthreads > 0 ? nthreads : 1) * 16), bstart);
        for (size_t b = 0; b < nb; b++) recs[b] = NULL;
        job.bstart = bstart;
        job.nblocks = nb;
        job.recs = recs;
        /* a thread's first chunk: its share of the items (about a token per 4 bytes) and of the records */
        job.chunk_cap = total / (size_t)(nthreads > 0 ? nthreads : 1) / 4 * sizeof(void *) +
                        (cnt / (size_t)(nthreads > 0 ? nthreads : 1) + 8) * sizeof(wb_text) + 4096;
    }
    res = PyList_New((Py_ssize_t)cnt);
    if (!res) goto out;
    {
        pthread_t th[256];
        int started = 0, pooled = 0;
        pystr_buf buf = {0};
        outbuf scratch;
        memset(&scratch, 0, sizeof scratch);
        bt_arena a = {NULL, job.chunk_cap};
        Py_BEGIN_ALLOW_THREADS
        started = workers_start(wb_worker, &job, nthreads, th, &pooled);
        Py_END_ALLOW_THREADS
#if PY_VERSION_HEX >= 0x030A0000
        int gc_was = PyGC_Disable(); /* (as in the list loop of Model_encode_batch) */
#endif
        const int tr = tracing();
        double c0 = tr ? thread_cpu_us() : 0, released = 0;
        for (size_t b = 0; b < job.nblocks && res; b++) {
            wb_text *rec = wb_rec(&job, b);
            if (!rec) {
                double r0 = tr ? thread_cpu_us() : 0;
                Py_BEGIN_ALLOW_THREADS
                while (!(rec = wb_rec(&job, b))) {
                    size_t o = atomic_fetch_add_explicit(&job.next, 1, memory_order_relaxed);
                    if (o < job.nblocks) wb_block(&job, o, &a, &buf, &scratch);
                    else sched_yield();
                }
                Py_END_ALLOW_THREADS
                if (tr) released += thread_cpu_us() - r0;
            }
            const size_t lo = bstart[b], hi = bstart[b + 1];
            const int oom = rec == WB_OOM_BLOCK;
            wb_text *nrec = b + 1 < job.nblocks ? wb_rec(&job, b + 1) : NULL;
            if (nrec && nrec != WB_OOM_BLOCK) __builtin_prefetch(nrec, 0);
            for (size_t i = lo; i < hi; i++) {
                const wb_text *r = oom ? rec : &rec[i - lo];
                /* the items of a text two ahead, written by another core: fetched while this list is made */
                if (!oom && i + 2 < hi && rec[i + 2 - lo].items) {
                    const char *q = (const char *)rec[i + 2 - lo].items;
                    size_t nb = (size_t)rec[i + 2 - lo].n * sizeof(void *);
                    __builtin_prefetch(q, 0);
                    if (nb > 64) __builtin_prefetch(q + 64, 0);
                    if (nb > 128) __builtin_prefetch(q + 128, 0);
                }
                PyObject *o = NULL;
                if (r->bad == 1)
                    PyErr_Format(PyExc_ValueError, "texts[%zd] is not encodable as UTF-8 (lone surrogate?)", (Py_ssize_t)i);
                else if (r->bad)
                    PyErr_NoMemory();
                else
                    o = items_list(self, r->items, r->n, r->odd);
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
        if (!res) /* stop handing out blocks; the workers finish the ones they hold */
            atomic_store_explicit(&job.next, job.nblocks, memory_order_relaxed);
        double c1 = tr ? thread_cpu_us() : 0;
        Py_BEGIN_ALLOW_THREADS
        workers_join(started, th, pooled);
        Py_END_ALLOW_THREADS
        if (tr)
            fprintf(stderr,
                    "fstok wordpiece encode_batch: %zu texts %d threads (%s) | caller CPU: lists (GIL held) %.0f us, "
                    "encoding or waiting %.0f us\n",
                    cnt, started + 1, pooled ? "pool" : "own", c1 - c0 - released, released);
        out_free(&scratch);
        pystr_buf_free(&buf);
        bt_hand_over(&job.chunks, &a);
    }
out:
    bt_free_chunks(atomic_load(&job.chunks));
    free(bstart);
    return res;
}

#define BATCH_BYTES_PER_THREAD 4096
static PyObject *Model_encode_batch(ModelObject *self, PyObject *args) {
    PyObject *seq;
    int nthreads = 1, mode = 0, word = 0;
    if (!PyArg_ParseTuple(args, "O|iip", &seq, &nthreads, &mode, &word)) return NULL;
    if (nthreads > 1) tp_prewake(nthreads - 1); /* (sleeping pool threads wake while the texts are noted) */
    /* a list is copied: its strs are read by the workers without the GIL, and another thread could meanwhile
     * remove (and free) an item of the caller's list */
    PyObject *fast = PyList_Check(seq) ? PyList_GetSlice(seq, 0, PY_SSIZE_T_MAX)
                                       : PySequence_Fast(seq, "texts must be a sequence of str");
    if (!fast) return NULL;
    Py_ssize_t cnt = PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    pystr_src *src = (pystr_src *)calloc((size_t)cnt + 1, sizeof(pystr_src));
    uint8_t *bad = (uint8_t *)calloc((size_t)cnt + 1, 1);
    outbuf *outs = (outbuf *)calloc((size_t)cnt + 1, sizeof(outbuf));
    PyObject *result = NULL;
    if (!src || !bad || !outs) { PyErr_NoMemory(); goto done; }
    size_t bytes = 0;
    for (Py_ssize_t i = 0; i < cnt; i++) {
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "texts[%zd] must be str, not %.100s", i, Py_TYPE(items[i])->tp_name);
            goto done;
        }
        /* the UTF-8 of a non-ASCII str is made by the worker that encodes it (pystr_utf8.h) */
        int u = pystr_note(items[i], &src[i]);
        if (u < 0) goto done;
        if (u > 0) {
            src[i].ukind = -1;
            bad[i] = 1;
        }
        if (src[i].utf8 && src[i].len > (size_t)PY_SSIZE_T_MAX / 8) {
            PyErr_SetString(PyExc_ValueError, "text too long");
            goto done;
        }
        bytes += pystr_weight(&src[i]);
        outs[i].want_offs = mode & 1;
    }
    {
        /* a thread per BATCH_BYTES_PER_THREAD of text at most: waking a pool thread costs more than encoding
         * a few short texts (32 English lines, 854 bytes: 7.5 us on one thread, 30 us on two) */
        size_t cap = 1 + bytes / BATCH_BYTES_PER_THREAD;
        if (nthreads > 1 && (size_t)nthreads > cap) nthreads = (int)cap;
    }
    for (Py_ssize_t i = 0; i < cnt; i++)
        if (src[i].ukind < 0) src[i].utf8 = (const uint8_t *)"", src[i].len = 0; /* (reported below) */
    if (mode == 0 && self->pinned && nthreads > 1 && cnt > 1) {
        result = batch_lists_overlapped(self, src, bad, outs, (size_t)cnt, word, nthreads);
        goto done;
    }
    {
        const int tr = tracing();
        double r0 = tr ? thread_cpu_us() : 0;
        int ran = run_jobs_src(&self->t, NULL, NULL, src, bad, outs, (size_t)cnt, word, nthreads);
        if (tr)
            fprintf(stderr, "fstok wordpiece encode_batch: %zd texts %d threads (mode %d) | caller CPU: encoding or "
                    "waiting %.0f us\n", cnt, ran, mode, thread_cpu_us() - r0);
    }
    for (Py_ssize_t i = 0; i < cnt; i++) {
        if (!bad[i]) continue;
        if (bad[i] == 2) PyErr_NoMemory();
        else PyErr_Format(PyExc_ValueError, "texts[%zd] is not encodable as UTF-8 (lone surrogate?)", i);
        goto done;
    }
    if (mode == 4) {
        /* (all ids as one uint32 buffer, each text's count as int64): a batch for numpy without a
         * Python int or list per token (fstok.Tokenizer.encode_batch_numpy) */
        size_t total = 0;
        for (Py_ssize_t i = 0; i < cnt; i++) {
            if (outs[i].oom) { PyErr_NoMemory(); goto done; }
            total += outs[i].n;
        }
        PyObject *ids = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(total * 4));
        PyObject *lens = ids ? PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(cnt * 8)) : NULL;
        if (ids && lens) {
            char *dst = PyBytes_AS_STRING(ids);
            int64_t *ln = (int64_t *)PyBytes_AS_STRING(lens);
            for (Py_ssize_t i = 0; i < cnt; i++) {
                if (outs[i].n) memcpy(dst, outs[i].ids, outs[i].n * 4);
                dst += outs[i].n * 4;
                ln[i] = (int64_t)outs[i].n;
            }
            result = PyTuple_Pack(2, ids, lens);
        }
        Py_XDECREF(ids);
        Py_XDECREF(lens);
        goto done;
    }
    result = PyList_New(cnt);
    if (!result) goto done;
    {
        /* 10^5 result lists would trigger the cyclic GC over and over while they are built;
           they cannot form cycles, so pause it for the construction (one pass afterwards). */
#if PY_VERSION_HEX >= 0x030A0000
        int gc_was = PyGC_Disable();
#endif
        for (Py_ssize_t i = 0; i < cnt; i++) {
            PyObject *r = finish(self, &outs[i], mode);
            if (!r) { Py_CLEAR(result); break; }
            /* untracked by the cyclic GC: a collection visits every item of a tracked list, a cache miss per
             * id, on the calling thread alone (as batch_ids_list in mod_bpe.c); a list of ints or a tuple of
             * two such lists cannot be part of a reference cycle */
            if (mode == 1) {
                PyObject_GC_UnTrack(PyTuple_GET_ITEM(r, 0));
                PyObject_GC_UnTrack(PyTuple_GET_ITEM(r, 1));
                PyObject_GC_UnTrack(r);
            } else if (mode == 0) {
                PyObject_GC_UnTrack(r);
            }
            PyList_SET_ITEM(result, i, r);
        }
#if PY_VERSION_HEX >= 0x030A0000
        if (gc_was) PyGC_Enable();
#endif
        if (!result) goto done;
    }
done:
    if (outs) for (Py_ssize_t i = 0; i < cnt; i++) out_free(&outs[i]);
    free(src);
    free(bad);
    free(outs);
    Py_DECREF(fast);
    return result;
}

/* The walk's layout (tests and docs): states per record kind, blob bytes, state offset width. */
static PyObject *Model_layout_stats(ModelObject *self, PyObject *unused) {
    const wp_tables *t = &self->t;
    return Py_BuildValue("{sIsIsIsIsIsIsIsIsIsnsI}", "tok", t->nkind[RK_TOK], "id", t->nkind[RK_ID], "none",
                         t->nkind[RK_NONE], "slice", t->nkind[RK_SL], "general", t->nkind[RK_GEN], "mid",
                         t->nkind[RK_MID], "mid_dropped", t->nkind[6], "char", t->n_chr, "hub", t->nkind[RK_HUB],
                         "blob_bytes", (Py_ssize_t)t->blob_size, "pointer_bytes", t->pw);
}

static PyMethodDef Model_methods[] = {
    {"layout_stats", (PyCFunction)Model_layout_stats, METH_NOARGS, "layout_stats() -> dict: the walk's record kinds and size"},
    {"encode", (PyCFunction)Model_encode, METH_VARARGS,
     "encode(text, mode=0, word=False): mode 0 ids list, 1 (ids, offsets), 2 ids bytes, 3 (ids bytes, offsets bytes)"},
    {"encode_batch", (PyCFunction)Model_encode_batch, METH_VARARGS, "encode_batch(texts, nthreads=1, mode=0, word=False)"},
    {"encode_split", (PyCFunction)Model_encode_split, METH_VARARGS,
     "encode_split(text, nthreads, parts=4*nthreads, mode=0): one long text cut at whitespace, pieces on threads"},
    {"encode_spans", (PyCFunction)Model_encode_spans, METH_VARARGS,
     "encode_spans(data, triples, mode=0): the model on pre-cut pieces; mode 1: (ids, offsets, counts) bytes"},
    {"fast_encode", (PyCFunction)Model_fast_encode, METH_O, "fast_encode(fallback): a C callable for tok.encode"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ModelType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "fstok.runtime._wordpiece.Model",
    .tp_basicsize = sizeof(ModelObject),
    .tp_dealloc = (destructor)Model_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WordPiece runtime over validated compiled tables",
    .tp_methods = Model_methods,
    .tp_init = (initproc)Model_init,
    .tp_new = PyType_GenericNew,
};

/* tables_ok(node, edge_label, edge_target, failpops, depth, pool, dense, vocab_offs, n_vocab_bytes, norm_stage1,
 *           norm_stage2, norm_pool, suffix_word (the used prefix), n_nodes, n_dense) -> bool: wp_validate.h */
static PyObject *py_tables_ok(PyObject *self, PyObject *args) {
    enum { N = 12 };
    PyObject *o[N];
    Py_ssize_t nvb, n_nodes, n_dense;
    if (!PyArg_ParseTuple(args, "OOOOOOOOnOOOOnn", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &o[7], &nvb, &o[8],
                          &o[9], &o[10], &o[11], &n_nodes, &n_dense))
        return NULL;
    static const Py_ssize_t item[N] = {8, 1, 4, 8, 2, 4, 8, 4, 2, 4, 4, 4};
    Py_buffer v[N];
    int got = 0, rc = 1;
    for (; got < N; got++) {
        if (PyObject_GetBuffer(o[got], &v[got], PyBUF_C_CONTIGUOUS) < 0) {
            for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
            return NULL;
        }
        if (v[got].len % item[got]) {
            got++;
            goto verdict;
        }
    }
    if (nvb < 0 || n_nodes < 0 || n_dense < 0) goto verdict;
    wv_tables t = {
        (const uint64_t *)v[0].buf, (size_t)v[0].len / 8, (const uint8_t *)v[1].buf, (size_t)v[1].len,
        (const uint32_t *)v[2].buf, (size_t)v[2].len / 4, (const uint64_t *)v[3].buf, (size_t)v[3].len / 8,
        (const uint16_t *)v[4].buf, (size_t)v[4].len / 2, (const uint32_t *)v[5].buf, (size_t)v[5].len / 4,
        (const uint64_t *)v[6].buf, (size_t)v[6].len / 8, (const uint32_t *)v[7].buf, (size_t)v[7].len / 4,
        (size_t)nvb, (const uint16_t *)v[8].buf, (size_t)v[8].len / 2, (const uint32_t *)v[9].buf,
        (size_t)v[9].len / 4, (size_t)v[10].len / 4, (const uint32_t *)v[10].buf, (const uint32_t *)v[11].buf,
        (size_t)v[11].len / 4, (size_t)n_nodes, (size_t)n_dense};
    Py_BEGIN_ALLOW_THREADS
    rc = wp_tables_ok(&t);
    Py_END_ALLOW_THREADS
verdict:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    if (rc == 0) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyMethodDef module_methods[] = {
    {"tables_ok", py_tables_ok, METH_VARARGS, "every index of a WordPiece artifact's tables in range (wp_validate.h)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_wordpiece", "fstok WordPiece runtime", -1, module_methods};

PyMODINIT_FUNC PyInit__wordpiece(void) {
    wp_walk_init();
    if (PyType_Ready(&ModelType) < 0) return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    Py_INCREF(&ModelType);
    if (PyModule_AddObject(m, "Model", (PyObject *)&ModelType) < 0) {
        Py_DECREF(&ModelType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
