/* Normalizer kernels over UTF-8 (fstok.runtime._norm): HF's per-code-point maps applied in one C pass, for
 * fstok.pipeline.fastnorm.  The facts themselves (which code points map, and to what) come from Python as
 * buffers: a bitmap of 0x110000 bits (bit cp set: cp is in the set) and, for a map, its sorted keys
 * (uint32), the offsets (uint32, one more than the keys) of each value in a UTF-8 blob. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define NCP 0x110000u

static int bit(const uint8_t *bm, uint32_t cp) { return cp < NCP && ((bm[cp >> 3] >> (cp & 7)) & 1); }

/* decode one UTF-8 sequence at s[i] (valid UTF-8: it came from str.encode); returns its length */
static size_t utf8_at(const uint8_t *s, size_t i, size_t n, uint32_t *cp) {
    uint8_t c = s[i];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0 && i + 1 < n) {
        *cp = ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F);
        return 2;
    }
    if (c < 0xF0 && i + 2 < n) {
        *cp = ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F);
        return 3;
    }
    if (i + 3 < n) {
        *cp = ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) |
              (s[i + 3] & 0x3F);
        return 4;
    }
    *cp = 0xFFFFFFFFu; /* truncated: maps to nothing */
    return n - i;
}

static int get_bitmap(PyObject *o, Py_buffer *b) {
    if (PyObject_GetBuffer(o, b, PyBUF_SIMPLE) < 0) return -1;
    if ((size_t)b->len != NCP / 8) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_ValueError, "bitmap must hold 0x110000 bits");
        return -1;
    }
    return 0;
}

/* any_in(text, bitmap) -> bool: does the str or UTF-8 bytes hold a code point of the set (ASCII is never in it:
 * callers check ASCII text themselves, and an 8-byte word without a high bit is skipped at once) */
static PyObject *norm_any_in(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *text, *bmo;
    if (!PyArg_ParseTuple(args, "OO", &text, &bmo)) return NULL;
    Py_buffer bmb;
    if (get_bitmap(bmo, &bmb)) return NULL;
    const uint8_t *bm = (const uint8_t *)bmb.buf;
    int hit = 0;
    if (PyUnicode_Check(text)) {
        Py_ssize_t len = PyUnicode_GET_LENGTH(text);
        int kind = PyUnicode_KIND(text);
        const void *d = PyUnicode_DATA(text);
        /* one loop per string kind; 8 bytes of code units below 0x80 (ASCII) are skipped at once */
        if (kind == PyUnicode_1BYTE_KIND) {
            if (!PyUnicode_IS_ASCII(text)) {
                const Py_UCS1 *u = (const Py_UCS1 *)d;
                for (Py_ssize_t i = 0; i < len && !hit; i++) {
                    uint64_t w;
                    if (i + 8 <= len && (memcpy(&w, u + i, 8), !(w & 0x8080808080808080ull))) {
                        i += 7;
                        continue;
                    }
                    hit = u[i] >= 0x80 && bit(bm, u[i]);
                }
            }
        } else if (kind == PyUnicode_2BYTE_KIND) {
            const Py_UCS2 *u = (const Py_UCS2 *)d;
            Py_ssize_t i = 0;
            while (i < len && !hit) {
#if defined(__SSE2__)
                const __m128i hi = _mm_set1_epi16((short)0xFF80), zero = _mm_setzero_si128();
                while (i + 16 <= len) { /* 16 code units below 0x80: skipped with two compares */
                    __m128i a = _mm_loadu_si128((const __m128i *)(u + i)), b = _mm_loadu_si128((const __m128i *)(u + i + 8));
                    __m128i z = _mm_cmpeq_epi16(_mm_and_si128(_mm_or_si128(a, b), hi), zero);
                    if (_mm_movemask_epi8(z) != 0xFFFF) break;
                    i += 16;
                }
#endif
                uint64_t w;
                if (i + 4 <= len && (memcpy(&w, u + i, 8), !(w & 0xFF80FF80FF80FF80ull))) {
                    i += 4;
                    continue;
                }
                if (i < len) hit = u[i] >= 0x80 && bit(bm, u[i]);
                i++;
            }
        } else {
            const Py_UCS4 *u = (const Py_UCS4 *)d;
            for (Py_ssize_t i = 0; i < len && !hit; i++) hit = u[i] >= 0x80 && bit(bm, u[i]);
        }
    } else {
        Py_buffer v;
        if (PyObject_GetBuffer(text, &v, PyBUF_SIMPLE) < 0) {
            PyBuffer_Release(&bmb);
            return NULL;
        }
        const uint8_t *s = (const uint8_t *)v.buf;
        size_t n = (size_t)v.len, i = 0;
        while (i < n && !hit) {
            if (i + 8 <= n) {
                uint64_t w;
                memcpy(&w, s + i, 8);
                if (!(w & 0x8080808080808080ull)) {
                    i += 8;
                    continue;
                }
            }
            if (s[i] < 0x80) {
                i++;
                continue;
            }
            uint32_t cp;
            i += utf8_at(s, i, n, &cp);
            hit = bit(bm, cp);
        }
        PyBuffer_Release(&v);
    }
    PyBuffer_Release(&bmb);
    return PyBool_FromLong(hit);
}

/* runs(text, bitmap, limit) -> list [a0, b0, a1, b1, ...] or None: for each maximal run [i, j) of code points of the
 * set in the str, the code point span [i - 1, j) (the character before the run too; [0, j) at the start), in
 * order; None when there are more than `limit` runs (the caller looks at the whole text instead) */
static PyObject *norm_runs(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *text, *bmo;
    Py_ssize_t limit;
    if (!PyArg_ParseTuple(args, "UOn", &text, &bmo, &limit)) return NULL;
    Py_buffer bmb;
    if (get_bitmap(bmo, &bmb)) return NULL;
    const uint8_t *bm = (const uint8_t *)bmb.buf;
    const Py_ssize_t len = PyUnicode_GET_LENGTH(text);
    const int kind = PyUnicode_KIND(text);
    const void *d = PyUnicode_DATA(text);
    PyObject *out = PyList_New(0);
    Py_ssize_t runs = 0, i = 0;
    while (out && i < len) {
        Py_UCS4 c = PyUnicode_READ(kind, d, i);
        if (c < 0x80 || !bit(bm, c)) {
            i++;
            continue;
        }
        Py_ssize_t j = i + 1;
        while (j < len && (c = PyUnicode_READ(kind, d, j)) >= 0x80 && bit(bm, c)) j++;
        if (++runs > limit) {
            Py_CLEAR(out);
            PyBuffer_Release(&bmb);
            Py_RETURN_NONE;
        }
        PyObject *a = PyLong_FromSsize_t(i ? i - 1 : 0), *b = PyLong_FromSsize_t(j);
        if (!a || !b || PyList_Append(out, a) < 0 || PyList_Append(out, b) < 0) Py_CLEAR(out);
        Py_XDECREF(a);
        Py_XDECREF(b);
        i = j;
    }
    PyBuffer_Release(&bmb);
    return out;
}

/* map(data, bitmap, keys, offs, blob, ascii) -> bytes: each code point of the UTF-8 `data` whose bit is set
 * replaced by its value (keys[i] -> blob[offs[i]:offs[i+1]], keys sorted), the others copied; ASCII bytes
 * through the 128-byte table `ascii` (an ASCII byte whose bit is set maps by the table too). */
static PyObject *norm_map(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *bmo;
    Py_buffer data, bmb, keys, offs, blob, asc;
    if (!PyArg_ParseTuple(args, "y*Oy*y*y*y*", &data, &bmo, &keys, &offs, &blob, &asc)) return NULL;
    PyObject *res = NULL;
    int have_bm = 0;
    size_t nk = (size_t)keys.len / 4;
    const uint32_t *K = (const uint32_t *)keys.buf, *O = (const uint32_t *)offs.buf;
    if (get_bitmap(bmo, &bmb)) goto done;
    have_bm = 1;
    if ((size_t)offs.len != 4 * (nk + 1) || asc.len != 128 || (size_t)keys.len % 4 || (nk && O[nk] > (size_t)blob.len)) {
        PyErr_SetString(PyExc_ValueError, "map: keys, offs, blob or ascii table malformed");
        goto done;
    }
    for (size_t i = 0; i < nk; i++)
        if (O[i] > O[i + 1] || (i && K[i - 1] >= K[i])) {
            PyErr_SetString(PyExc_ValueError, "map: keys not increasing or offsets out of order");
            goto done;
        }
    {
        const uint8_t *s = (const uint8_t *)data.buf, *bm = (const uint8_t *)bmb.buf, *A = (const uint8_t *)asc.buf,
                      *B = (const uint8_t *)blob.buf;
        size_t n = (size_t)data.len, cap = n + (n >> 3) + 64, len = 0, i = 0;
        uint8_t *out = (uint8_t *)malloc(cap);
        if (!out) {
            PyErr_NoMemory();
            goto done;
        }
        int oom = 0;
        Py_BEGIN_ALLOW_THREADS
        while (i < n) {
            if (cap - len < 64) { /* room for the longest value; grown by half */
                size_t nc = cap + (cap >> 1) + 64;
                uint8_t *no = (uint8_t *)realloc(out, nc);
                if (!no) {
                    oom = 1;
                    break;
                }
                out = no;
                cap = nc;
            }
            uint8_t c = s[i];
            if (c < 0x80) {
                out[len++] = A[c];
                i++;
                continue;
            }
            uint32_t cp;
            size_t k = utf8_at(s, i, n, &cp);
            if (bit(bm, cp)) {
                size_t lo = 0, hi = nk;
                while (lo < hi) {
                    size_t mid = (lo + hi) >> 1;
                    if (K[mid] < cp) lo = mid + 1;
                    else hi = mid;
                }
                if (lo < nk && K[lo] == cp) {
                    size_t vl = O[lo + 1] - O[lo];
                    if (cap - len < vl + 8) {
                        size_t nc = cap + vl + (cap >> 1) + 64;
                        uint8_t *no = (uint8_t *)realloc(out, nc);
                        if (!no) {
                            oom = 1;
                            break;
                        }
                        out = no;
                        cap = nc;
                    }
                    memcpy(out + len, B + O[lo], vl);
                    len += vl;
                    i += k;
                    continue;
                }
            }
            memcpy(out + len, s + i, k);
            len += k;
            i += k;
        }
        Py_END_ALLOW_THREADS
        if (oom)
            PyErr_NoMemory();
        else
            res = PyBytes_FromStringAndSize((const char *)out, (Py_ssize_t)len);
        free(out);
    }
done:
    if (have_bm) PyBuffer_Release(&bmb);
    PyBuffer_Release(&data);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&blob);
    PyBuffer_Release(&asc);
    return res;
}

static PyMethodDef methods[] = {
    {"any_in", norm_any_in, METH_VARARGS, "any_in(text, bitmap) -> bool: a non-ASCII code point of the set occurs"},
    {"runs", norm_runs, METH_VARARGS,
     "runs(text, bitmap, limit) -> [a0, b0, ...]: the runs of code points of the set, each with the one before; "
     "None past limit runs"},
    {"map", norm_map, METH_VARARGS,
     "map(data, bitmap, keys, offs, blob, ascii) -> UTF-8 bytes with each code point of the set replaced by its value"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "_norm", "fstok normalizer kernels over UTF-8 (fstok.pipeline.fastnorm)", -1, methods,
};

PyMODINIT_FUNC PyInit__norm(void) { return PyModule_Create(&moduledef); }
