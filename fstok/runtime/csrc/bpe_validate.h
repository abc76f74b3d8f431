#ifndef FSTOK_BPE_VALIDATE_H
#define FSTOK_BPE_VALIDATE_H

/* The structural proof of a BPE artifact's tables (every index the encoders follow without a bounds check),
 * one pass over each table in C.  It answers only "all in range" or "something is not": on "not", the loader
 * runs the numpy checks of fstok/validate_bpe.py (the oracle), which name the first bad element.  The rules
 * are exactly validate_bpe.check_tables' (tests/test_bpe_validate_native.py mutates tables and compares). */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#define BV_NONE32 0xFFFFFFFFu
#define BV_EMPTY64 0xFFFFFFFFFFFFFFFFull

static int bv_pow2(size_t n, size_t lo) { return n >= lo && !(n & (n - 1)); }

/* 0: every check passes; 1: one fails; -1: out of memory */
static int bpe_tables_ok(size_t n_int, size_t n_ext, size_t da_size, size_t max_span, int backtrack_ok,
                         size_t nbytes, const uint32_t *dec_off, size_t n_dec_off, const uint8_t *dec_kind,
                         size_t n_dec_kind, const uint32_t *int_ext, size_t n_int_ext, const uint32_t *info,
                         size_t n_info, const uint64_t *pair_tab, size_t n_pair_tab, const uint64_t *pair_hot,
                         size_t n_pair_hot, size_t n_pair_bloom, const uint32_t *byte_pair, size_t n_byte_pair,
                         const uint64_t *span_tab, size_t n_span_tab, const uint64_t *span_hot, size_t n_span_hot,
                         const uint32_t *trie, size_t n_trie, const uint32_t *byte_tok, size_t n_byte_tok) {
    if (n_dec_off != n_ext + 1 || n_dec_kind != n_ext || n_int_ext != n_int || n_info != 4 * n_int ||
        n_trie != 3 * da_size || n_byte_tok != 256 || n_byte_pair != 65536 || n_int == 0)
        return 1;
    /* decode offsets: from 0, never decreasing, ending at the byte count; the longest token */
    if (dec_off[0] != 0 || dec_off[n_ext] != nbytes) return 1;
    uint32_t max_len = 0;
    for (size_t i = 0; i < n_ext; i++) {
        if (dec_off[i + 1] < dec_off[i]) return 1;
        uint32_t d = dec_off[i + 1] - dec_off[i];
        if (d > max_len) max_len = d;
        if (dec_kind[i] > 3) return 1;
    }
    if (max_span > max_len) return 1;
    /* internal tokens: external id, length, split, next prefix */
    uint32_t *lens = (uint32_t *)malloc(n_int * sizeof(uint32_t));
    if (!lens) return -1;
    int bad = 0;
    for (size_t i = 0; i < n_int && !bad; i++) {
        uint32_t e = int_ext[i];
        if (e >= n_ext || dec_kind[e] != 1) bad = 1;
        else {
            lens[i] = dec_off[e + 1] - dec_off[e];
            if (lens[i] == 0 || lens[i] != info[4 * i]) bad = 1;
        }
    }
    for (size_t i = 0; i < n_int && !bad; i++) {
        uint32_t sl = info[4 * i + 1], sr = info[4 * i + 2], np = info[4 * i + 3];
        if (sl >= n_int || sr >= n_int) bad = 1;
        else if (sl != i || sr != i) {
            if ((uint64_t)lens[i] != (uint64_t)lens[sl] + lens[sr]) bad = 1;
            if (backtrack_ok && (sl >= i || sr >= i)) bad = 1;
        } else if (lens[i] != 1) bad = 1;
        if (np != BV_NONE32 && (np >= n_int || lens[np] >= lens[i])) bad = 1;
    }
    for (size_t b = 0; b < 256 && !bad; b++)
        if (byte_tok[b] >= n_int || lens[byte_tok[b]] != 1) bad = 1;
    free(lens);
    if (bad) return 1;
    /* pair tables: three ids of 21/21/22 bits, each an internal id; an empty slot somewhere */
    const uint64_t m21 = (1ull << 21) - 1, m22 = (1ull << 22) - 1;
    if (!bv_pow2(n_pair_hot, 16) || !bv_pow2(n_pair_bloom, 1)) return 1;
    for (int t = 0; t < 2; t++) {
        const uint64_t *pt = t ? pair_hot : pair_tab;
        size_t n = t ? n_pair_hot : n_pair_tab;
        int empty = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = pt[i];
            if (v == BV_EMPTY64) {
                empty = 1;
                continue;
            }
            if ((v >> 43) >= n_int || ((v >> 22) & m21) >= n_int || (v & m22) >= n_int) return 1;
        }
        if (!empty) return 1;
    }
    for (size_t i = 0; i < 65536; i++)
        if (byte_pair[i] != BV_NONE32 && byte_pair[i] >= n_int) return 1;
    /* span tables: (key, id | len << 32) pairs; an id names a token of that length, within max_span */
    for (int t = 0; t < 2; t++) {
        const uint64_t *st = t ? span_hot : span_tab;
        size_t n = t ? n_span_hot : n_span_tab;
        if (n % 2 || !bv_pow2(n / 2, 2)) return 1;
        int empty = 0;
        for (size_t i = 0; i < n / 2; i++) {
            uint64_t w = st[2 * i + 1];
            uint32_t sid = (uint32_t)(w & 0xFFFFFFFFull);
            if (sid == BV_NONE32) {
                empty = 1;
                continue;
            }
            uint64_t slen = w >> 32;
            if (sid >= n_ext || slen != (uint64_t)(dec_off[sid + 1] - dec_off[sid]) || slen > max_span) return 1;
        }
        if (!empty) return 1;
    }
    /* trie: parent < da_size, token < n_int */
    for (size_t i = 0; i < da_size; i++) {
        uint32_t chk = trie[3 * i + 1], tok = trie[3 * i + 2];
        if ((chk != BV_NONE32 && chk >= da_size) || (tok != BV_NONE32 && tok >= n_int)) return 1;
    }
    return 0;
}

/* tables_ok(n_int, n_ext, da_size, max_span, backtrack_ok, n_dec_bytes, dec_off, dec_kind, int_ext, int_info,
 *           pair_tab, pair_hot, pair_bloom, byte_pair, span_tab, span_hot, trie, byte_tok) -> bool */
static PyObject *py_tables_ok(PyObject *self, PyObject *args) {
    Py_ssize_t n_int, n_ext, da_size, max_span, nbytes;
    int backtrack_ok;
    enum { N = 12 };
    PyObject *objs[N];
    static const Py_ssize_t item[N] = {4, 1, 4, 4, 8, 8, 8, 4, 8, 8, 4, 4};
    if (!PyArg_ParseTuple(args, "nnnnpnOOOOOOOOOOOO", &n_int, &n_ext, &da_size, &max_span, &backtrack_ok, &nbytes,
                          &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6], &objs[7], &objs[8],
                          &objs[9], &objs[10], &objs[11]))
        return NULL;
    if (n_int < 0 || n_ext < 0 || da_size < 0 || max_span < 0 || nbytes < 0) Py_RETURN_FALSE;
    Py_buffer v[N];
    int got = 0, rc = 1;
    for (; got < N; got++) {
        if (PyObject_GetBuffer(objs[got], &v[got], PyBUF_C_CONTIGUOUS) < 0) goto done;
        if (v[got].len % item[got]) {
            got++;
            goto verdict;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    rc = bpe_tables_ok((size_t)n_int, (size_t)n_ext, (size_t)da_size, (size_t)max_span, backtrack_ok, (size_t)nbytes,
                       (const uint32_t *)v[0].buf, (size_t)v[0].len / 4, (const uint8_t *)v[1].buf, (size_t)v[1].len,
                       (const uint32_t *)v[2].buf, (size_t)v[2].len / 4, (const uint32_t *)v[3].buf,
                       (size_t)v[3].len / 4, (const uint64_t *)v[4].buf, (size_t)v[4].len / 8,
                       (const uint64_t *)v[5].buf, (size_t)v[5].len / 8, (size_t)v[6].len / 8,
                       (const uint32_t *)v[7].buf, (size_t)v[7].len / 4, (const uint64_t *)v[8].buf,
                       (size_t)v[8].len / 8, (const uint64_t *)v[9].buf, (size_t)v[9].len / 8,
                       (const uint32_t *)v[10].buf, (size_t)v[10].len / 4, (const uint32_t *)v[11].buf,
                       (size_t)v[11].len / 4);
    Py_END_ALLOW_THREADS
verdict:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    if (rc < 0) return PyErr_NoMemory();
    if (rc == 0) Py_RETURN_TRUE;
    Py_RETURN_FALSE;
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return NULL;
}

#endif /* FSTOK_BPE_VALIDATE_H */
