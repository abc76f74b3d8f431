/* fstok-lib: spm */
/* fstok SentencePiece-family runtime glue: Python <-> spm.h (lib_spm.c).
 *
 * make(arrays, ints, floats) builds a model handle (a capsule) over arrays that fstok/spm.py has
 * validated; the handle keeps them alive.  encode/normalize/model release the GIL while the core runs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spm.h"

#define N_ARR 11

typedef struct {
    spm_model m;
    Py_buffer buf[N_ARR];
    int nbuf;
    PyObject *ints[1]; /* unused: token ids are created per call */
} handle;

static void handle_free(PyObject *cap) {
    handle *h = (handle *)PyCapsule_GetPointer(cap, "fstok.spm");
    if (!h) return;
    for (int i = 0; i < h->nbuf; i++) PyBuffer_Release(&h->buf[i]);
    spm_cache_free(h->m.cache);
    spm_trie_free(&h->m.pieces);
    spm_trie_free(&h->m.user);
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

/* arrays: (p_first, p_label, p_target, p_value, p_value2, cm_units, cm_norm,
 *          u_first, u_label, u_target, u_value) -- then scores (f32 or f64), ptype, byte_id */
static PyObject *py_make(PyObject *self, PyObject *args) {
    PyObject *arrays, *score, *ptype, *byte_id;
    int is64;
    unsigned int flags;
    int unk_id;
    double min_score, max_score;
    if (!PyArg_ParseTuple(args, "O!OiOOIidd", &PyTuple_Type, &arrays, &score, &is64, &ptype, &byte_id, &flags, &unk_id,
                          &min_score, &max_score))
        return NULL;
    if (PyTuple_GET_SIZE(arrays) != N_ARR) return PyErr_Format(PyExc_ValueError, "expected %d arrays", N_ARR);
    handle *h = (handle *)calloc(1, sizeof(handle));
    if (!h) return PyErr_NoMemory();
    Py_ssize_t len;
    const void *p[N_ARR];
    Py_ssize_t lens[N_ARR];
    for (int i = 0; i < N_ARR; i++) {
        p[i] = bufp(h, arrays, i, &len);
        lens[i] = len;
        if (p[i] == (const void *)-1) goto fail;
    }
    spm_model *m = &h->m;
    m->pieces.first = p[0];
    m->pieces.label = p[1];
    m->pieces.target = p[2];
    m->pieces.value = p[3];
    m->pieces.value2 = p[4];
    m->pieces.n_nodes = (uint32_t)(lens[3] / 4);
    m->cm_units = p[5];
    m->n_cm = (uint32_t)(lens[5] / 4);
    m->cm_norm = p[6];
    m->n_cm_norm = (uint32_t)lens[6];
    m->user.first = p[7];
    m->user.label = p[8];
    m->user.target = p[9];
    m->user.value = p[10];
    m->user.n_nodes = (uint32_t)(lens[10] / 4);
    if (spm_trie_init(&m->pieces) || spm_trie_init(&m->user)) {
        PyErr_NoMemory();
        goto fail;
    }
    if (PyObject_GetBuffer(score, &h->buf[h->nbuf], PyBUF_SIMPLE) < 0) goto fail;
    if (is64)
        m->score64 = h->buf[h->nbuf].buf;
    else
        m->score = h->buf[h->nbuf].buf;
    m->n_pieces = (uint32_t)(h->buf[h->nbuf].len / (is64 ? 8 : 4));
    h->nbuf++;
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
    m->flags = flags;
    m->unk_id = unk_id;
    m->min_score = (float)min_score;
    m->max_score = (float)max_score;
    m->min_score64 = min_score;
    if ((flags & SPF_WORDS) && !(m->cache = spm_cache_new())) {
        PyErr_NoMemory();
        goto fail;
    }
    return PyCapsule_New(h, "fstok.spm", handle_free);
fail:
    for (int i = 0; i < h->nbuf; i++) PyBuffer_Release(&h->buf[i]);
    spm_trie_free(&h->m.pieces);
    spm_trie_free(&h->m.user);
    spm_cache_free(h->m.cache);
    free(h);
    return NULL;
}

static spm_model *get_model(PyObject *cap) {
    handle *h = (handle *)PyCapsule_GetPointer(cap, "fstok.spm");
    return h ? &h->m : NULL;
}

static PyObject *ids_list(const spm_ints *v, int stride) {
    const Py_ssize_t n = (Py_ssize_t)(v->n / (size_t)stride);
    PyObject *L = PyList_New(n);
    if (!L) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLong(v->p[i * stride]);
        if (!x) {
            Py_DECREF(L);
            return NULL;
        }
        PyList_SET_ITEM(L, i, x);
    }
    return L;
}

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
    PyObject *r = mode == 1 ? triples_bytes(&ids) : ids_list(&ids, 3);
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
        PyObject *L = ids_list(&ids, 3);
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

/* model(handle, normalized bytes) -> triples (id, begin, end) as int32 bytes, before unk handling */
static PyObject *py_model(PyObject *self, PyObject *args) {
    PyObject *cap;
    Py_buffer in;
    if (!PyArg_ParseTuple(args, "Oy*", &cap, &in)) return NULL;
    spm_model *m = get_model(cap);
    if (!m) {
        PyBuffer_Release(&in);
        return NULL;
    }
    spm_ints tri = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_model_run(m, in.buf, (size_t)in.len, &tri);
    Py_END_ALLOW_THREADS PyBuffer_Release(&in);
    if (rc) {
        spm_ints_free(&tri);
        return PyErr_NoMemory();
    }
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
    if (!PyArg_ParseTuple(args, "Oy*i", &cap, &in, &unk)) return NULL;
    spm_model *m = get_model(cap);
    if (!m) {
        PyBuffer_Release(&in);
        return NULL;
    }
    spm_ints tri = {0};
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = spm_model_run(m, in.buf, (size_t)in.len, &tri);
    Py_END_ALLOW_THREADS PyBuffer_Release(&in);
    if (rc) {
        spm_ints_free(&tri);
        return PyErr_NoMemory();
    }
    for (size_t k = 0; k < tri.n; k += 3)
        if (tri.p[k] == unk || tri.p[k] < 0) {
            spm_ints_free(&tri);
            Py_RETURN_NONE;
        }
    PyObject *r = ids_list(&tri, 3);
    spm_ints_free(&tri);
    return r;
}

static PyMethodDef methods[] = {
    {"model_ids", py_model_ids, METH_VARARGS, "model_ids(handle, normalized utf8, unk_id) -> ids or None"},
    {"make", py_make, METH_VARARGS, "build a model handle over validated arrays"},
    {"encode", py_encode, METH_VARARGS, "encode(handle, utf8, mode=0)"},
    {"encode_batch", py_encode_batch, METH_VARARGS, "encode_batch(handle, [utf8, ...])"},
    {"normalize", py_normalize, METH_VARARGS, "normalize(handle, utf8) -> (bytes, n2o int32 bytes)"},
    {"model", py_model, METH_VARARGS, "model(handle, normalized utf8) -> int32 triples bytes"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_spm", "SentencePiece-family runtime", -1, methods};

PyMODINIT_FUNC PyInit__spm(void) { return PyModule_Create(&moddef); }
