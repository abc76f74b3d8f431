#ifndef FSTOK_BPE_VALIDATE_H
#define FSTOK_BPE_VALIDATE_H

/* The structural proof of a BPE artifact's tables (every index the encoders follow without a bounds check),
 * one pass over each table in C.  It answers only "all in range" or "something is not": on "not", the loader
 * runs the numpy checks of fstok/validate_bpe.py (the oracle), which name the first bad element.  The rules
 * are exactly validate_bpe.check_tables' (tests/test_bpe_validate_native.py mutates tables and compares). */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

#include "bpe.h"

#define BV_NONE32 0xFFFFFFFFu
#define BV_EMPTY64 0xFFFFFFFFFFFFFFFFull

static int bv_pow2(size_t n, size_t lo) { return n >= lo && !(n & (n - 1)); }

/* The loops accumulate a verdict without branching on each element (they run over every table of a large
 * vocabulary at each load, ~25 MB for o200k: most of a load's time), and the whole-span check reads token lengths
 * from a byte-per-token copy that stays in the second-level cache (dec_off is read in random order there). */

/* 1 when some non-empty slot of a pair table holds an id >= n_int, or no slot is empty */
static int bv_pair_bad(const uint64_t *pt, size_t n, uint64_t n_int) {
    const uint64_t m21 = (1ull << 21) - 1, m22 = (1ull << 22) - 1;
    uint64_t worst = 0, empty = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v = pt[i], full = (uint64_t)(v != BV_EMPTY64), a = v >> 43, b = (v >> 22) & m21, c = v & m22;
        uint64_t mx = a > b ? a : b;
        mx = mx > c ? mx : c;
        worst |= (uint64_t)(mx >= n_int) & full;
        empty |= full ^ 1;
    }
    return worst || !empty;
}

/* 0: every check passes; 1: one fails; -1: out of memory */
static int bpe_tables_ok(size_t n_int, size_t n_ext, size_t da_size, size_t max_span, int backtrack_ok,
                         size_t nbytes, const uint32_t *dec_off, size_t n_dec_off, const uint8_t *dec_kind,
                         size_t n_dec_kind, const uint32_t *int_ext, size_t n_int_ext, const uint32_t *info,
                         size_t n_info, const uint64_t *pair_tab, size_t n_pair_tab, const uint64_t *pair_hot,
                         size_t n_pair_hot, size_t n_pair_bloom, const uint32_t *byte_pair, size_t n_byte_pair,
                         const uint64_t *span_tab, size_t n_span_tab, const uint64_t *span_hot, size_t n_span_hot,
                         const uint32_t *trie, size_t n_trie, const uint32_t *byte_tok, size_t n_byte_tok,
                         size_t n_span_bloom, const uint8_t *seg_big, size_t n_seg_big, size_t n_seg_tri) {
    if (n_dec_off != n_ext + 1 || n_dec_kind != n_ext || n_int_ext != n_int || n_info != 4 * n_int ||
        n_trie != 3 * da_size || n_byte_tok != 256 || n_byte_pair != 65536 || n_int == 0)
        return 1;
    /* the stored filters (bpe_builders.h bpe_filters_build): their bits only choose between exact paths */
    if (!bv_pow2(n_span_bloom, 64) || n_seg_big != 65536 || n_seg_tri != ((size_t)1 << BPE_SEG_TRI_BITS) / 32) return 1;
    uint32_t fl = 0;
    for (size_t i = 0; i < 65536; i++) fl |= seg_big[i];
    if (fl & ~(BPE_SEG_IN | BPE_SEG_START | BPE_SEG_END)) return 1;
    /* decode offsets: from 0, never decreasing, ending at the byte count; the longest token; lengths of one byte
     * each (255: 255 or more) for the whole-span check */
    if (dec_off[0] != 0 || dec_off[n_ext] != nbytes) return 1;
    uint8_t *len8 = (uint8_t *)malloc(n_ext + 1);
    uint32_t *lens = (uint32_t *)malloc(n_int * sizeof(uint32_t));
    if (!len8 || !lens) {
        free(len8);
        free(lens);
        return -1;
    }
    uint32_t max_len = 0, down = 0, kinds = 0;
    for (size_t i = 0; i < n_ext; i++) {
        uint32_t d = dec_off[i + 1] - dec_off[i];
        down |= dec_off[i + 1] < dec_off[i];
        max_len = d > max_len ? d : max_len;
        len8[i] = (uint8_t)(d < 255 ? d : 255);
        kinds |= dec_kind[i];
    }
    len8[n_ext] = 0;
    int bad = down || (kinds & ~3u) || max_span > max_len;
    /* internal tokens: external id, length, split, next prefix */
    for (size_t i = 0; i < n_int && !bad; i++) {
        uint32_t e = int_ext[i];
        if (e >= n_ext || dec_kind[e] != 1) bad = 1;
        else {
            lens[i] = dec_off[e + 1] - dec_off[e];
            bad = lens[i] == 0 || lens[i] != info[4 * i];
        }
    }
    if (!bad) {
        uint32_t acc = 0;
        for (size_t i = 0; i < n_int; i++) {
            uint32_t sl = info[4 * i + 1], sr = info[4 * i + 2], np = info[4 * i + 3];
            if (sl >= n_int || sr >= n_int) {
                bad = 1;
                break;
            }
            uint32_t merged = sl != i || sr != i;
            acc |= merged & ((uint64_t)lens[i] != (uint64_t)lens[sl] + lens[sr]);
            acc |= merged & (uint32_t)(backtrack_ok != 0) & (sl >= i || sr >= i);
            acc |= (merged ^ 1) & (lens[i] != 1);
            if (np != BV_NONE32 && (np >= n_int || lens[np] >= lens[i])) acc = 1;
        }
        bad |= (int)acc;
    }
    for (size_t b = 0; b < 256 && !bad; b++)
        if (byte_tok[b] >= n_int || lens[byte_tok[b]] != 1) bad = 1;
    free(lens);
    /* pair tables: three ids of 21/21/22 bits, each an internal id; an empty slot somewhere */
    if (!bad && (!bv_pow2(n_pair_hot, 16) || !bv_pow2(n_pair_bloom, 1))) bad = 1;
    if (!bad) bad = bv_pair_bad(pair_tab, n_pair_tab, n_int) || bv_pair_bad(pair_hot, n_pair_hot, n_int);
    if (!bad) {
        uint32_t acc = 0;
        for (size_t i = 0; i < 65536; i++) acc |= (uint32_t)(byte_pair[i] + 1u) > (uint32_t)n_int; /* (NONE + 1 = 0) */
        bad = acc != 0;
    }
    /* span tables: (key, id | len << 32) pairs; an id names a token of that length, within max_span */
    for (int t = 0; t < 2 && !bad; t++) {
        const uint64_t *st = t ? span_hot : span_tab;
        size_t n = t ? n_span_hot : n_span_tab;
        if (n % 2 || !bv_pow2(n / 2, 2)) {
            bad = 1;
            break;
        }
        /* (no branch on whether a slot is empty: at load factor 1/2 it is a coin toss) */
        uint64_t empty = 0, acc = 0;
        for (size_t i = 0; i < n / 2; i++) {
            uint64_t w = st[2 * i + 1], slen = w >> 32;
            uint32_t sid = (uint32_t)(w & 0xFFFFFFFFull);
            uint64_t full = sid != BV_NONE32, out = sid >= n_ext;
            size_t k = out ? n_ext : sid; /* (len8[n_ext] = 0) */
            empty |= full ^ 1;
            acc |= full & (out | (slen > max_span) | (len8[k] != (slen < 255 ? slen : 255)));
            if (__builtin_expect(slen >= 255, 0) && full && !out) /* (rare: no branch on the coin toss above) */
                acc |= slen != (uint64_t)(dec_off[sid + 1] - dec_off[sid]);
        }
        bad = acc || !empty;
    }
    free(len8);
    if (bad) return 1;
    /* trie: parent < da_size, token < n_int (NONE + 1 wraps to 0: allowed) */
    uint32_t acc = 0;
    for (size_t i = 0; i < da_size; i++)
        acc |= ((uint32_t)(trie[3 * i + 1] + 1u) > (uint32_t)da_size) | ((uint32_t)(trie[3 * i + 2] + 1u) > (uint32_t)n_int);
    return acc != 0;
}

/* tables_ok(n_int, n_ext, da_size, max_span, backtrack_ok, n_dec_bytes, dec_off, dec_kind, int_ext, int_info,
 *           pair_tab, pair_hot, pair_bloom, byte_pair, span_tab, span_hot, trie, byte_tok, span_bloom, seg_big,
 *           seg_tri) -> bool */
static PyObject *py_tables_ok(PyObject *self, PyObject *args) {
    Py_ssize_t n_int, n_ext, da_size, max_span, nbytes;
    int backtrack_ok;
    enum { N = 15 };
    PyObject *objs[N];
    static const Py_ssize_t item[N] = {4, 1, 4, 4, 8, 8, 8, 4, 8, 8, 4, 4, 8, 1, 4};
    if (!PyArg_ParseTuple(args, "nnnnpnOOOOOOOOOOOOOOO", &n_int, &n_ext, &da_size, &max_span, &backtrack_ok, &nbytes,
                          &objs[0], &objs[1], &objs[2], &objs[3], &objs[4], &objs[5], &objs[6], &objs[7], &objs[8],
                          &objs[9], &objs[10], &objs[11], &objs[12], &objs[13], &objs[14]))
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
                       (size_t)v[11].len / 4, (size_t)v[12].len / 8, (const uint8_t *)v[13].buf, (size_t)v[13].len,
                       (size_t)v[14].len / 4);
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
