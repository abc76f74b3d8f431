/* fstok.runtime._untrack: the field lists of HF-face Encodings taken off the cyclic garbage collector.
 *
 * An Encoding's fields (ids, type ids, tokens, word ids, offsets, masks) hold atoms only: ints, strs, None
 * and pairs of ints.  They can be in no reference cycle, yet a tracked list is visited element by element
 * at every full collection: a program holding many Encodings (a list of encode() results) pays a pass over
 * every token it holds each time the collector runs.  Untracked, the lists are freed by reference counting
 * as before; the collector no longer visits them. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* untrack(lists): each exact list in the sequence `lists` is untracked; returns None */
static PyObject *untrack(PyObject *self, PyObject *arg) {
    PyObject *seq = PySequence_Fast(arg, "untrack expects a sequence of lists");
    if (!seq) return NULL;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = items[i];
        if (PyList_CheckExact(x) && PyObject_GC_IsTracked(x)) PyObject_GC_UnTrack(x);
    }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"untrack", untrack, METH_O, "untrack(lists): lists of atoms taken off the cyclic garbage collector"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_untrack",
                                       "Encoding field lists taken off the cyclic garbage collector", -1, methods};

PyMODINIT_FUNC PyInit__untrack(void) { return PyModule_Create(&moduledef); }
