#ifndef FSTOK_BPE_BUILDERS_H
#define FSTOK_BPE_BUILDERS_H

/* The compiler's heavy loops (called by fstok/compile/bpe.py through fstok.runtime._bpe): canonical splits
 * of every token, the pair and whole-span hash tables, the token trie.  Not on the encode path; included by
 * mod_bpe.c for its method table.  Oracle: the Python definitions in fstok/compile/bpe.py they replace
 * (tests/test_bpe_artifact.py). */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"

/* ================================================================ compiler helpers */

typedef struct {
    uint64_t *keys;
    uint32_t *vals;
    uint64_t mask;
    int shift;
} chash;

static int chash_init(chash *h, size_t n) {
    size_t cap = 16;
    int bits = 4;
    while (cap < 2 * n + 2) cap <<= 1, bits++;
    h->keys = (uint64_t *)malloc(cap * sizeof(uint64_t));
    h->vals = (uint32_t *)malloc(cap * sizeof(uint32_t));
    if (!h->keys || !h->vals) return -1;
    memset(h->keys, 0xFF, cap * sizeof(uint64_t));
    h->mask = cap - 1;
    h->shift = 64 - bits;
    return 0;
}

static void chash_free(chash *h) {
    free(h->keys);
    free(h->vals);
}

static void chash_put(chash *h, uint64_t key, uint32_t val) {
    uint64_t i = bpe_pair_slot(key, h->shift);
    while (h->keys[i] != BPE_EMPTY_KEY && h->keys[i] != key) i = (i + 1) & h->mask;
    h->keys[i] = key;
    h->vals[i] = val;
}

static uint32_t chash_get(const chash *h, uint64_t key) {
    uint64_t i = bpe_pair_slot(key, h->shift);
    for (;;) {
        if (h->keys[i] == key) return h->vals[i];
        if (h->keys[i] == BPE_EMPTY_KEY) return BPE_NONE;
        i = (i + 1) & h->mask;
    }
}

/* build_splits(arena, offsets u32[n+1], ranks i64[n] or None, rules i64[3*m] (l, r, rank) or None)
 *   -> (left i32[n], right i32[n], mrank i64[n])
 * Canonical split of every token: run BPE on its bytes with the canonical pairs of the shorter tokens;
 * if it ends in exactly two parts (and, with rules, that pair is a rule) the token is reachable and
 * that pair is its merge.  mrank: -1 single byte, -2 unreachable, else the merge's rank. */
static PyObject *py_build_splits(PyObject *self, PyObject *args) {
    Py_buffer ar, of, rk, ru;
    PyObject *rko, *ruo;
    if (!PyArg_ParseTuple(args, "y*y*OO", &ar, &of, &rko, &ruo)) return NULL;
    PyObject *res = NULL;
    int have_rk = rko != Py_None, have_ru = ruo != Py_None;
    memset(&rk, 0, sizeof rk);
    memset(&ru, 0, sizeof ru);
    if (have_rk && PyObject_GetBuffer(rko, &rk, PyBUF_C_CONTIGUOUS) < 0) goto done0;
    if (have_ru && PyObject_GetBuffer(ruo, &ru, PyBUF_C_CONTIGUOUS) < 0) goto done0;
    {
        size_t n = (size_t)of.len / 4 - 1;
        const uint8_t *arena = (const uint8_t *)ar.buf;
        const uint32_t *off = (const uint32_t *)of.buf;
        const int64_t *ranks = (const int64_t *)rk.buf;
        const int64_t *rules = (const int64_t *)ru.buf;
        size_t nrules = have_ru ? (size_t)ru.len / 24 : 0;
        if (have_rk && (size_t)rk.len / 8 != n) {
            PyErr_SetString(PyExc_ValueError, "ranks length mismatch");
            goto done0;
        }
        if (!have_rk && !have_ru) {
            PyErr_SetString(PyExc_ValueError, "need ranks or rules");
            goto done0;
        }
        int32_t *left = (int32_t *)malloc(n * 4 + 4), *right = (int32_t *)malloc(n * 4 + 4);
        int64_t *mrank = (int64_t *)malloc(n * 8 + 8);
        uint32_t *order = (uint32_t *)malloc(n * 4 + 4);
        uint32_t maxlen = 0;
        chash pairs = {0}, rmap = {0};
        uint32_t *parts = NULL;
        int64_t *prk = NULL;
        if (!left || !right || !mrank || !order || chash_init(&pairs, n) || chash_init(&rmap, nrules)) {
            PyErr_NoMemory();
            goto done1;
        }
        uint32_t byte_idx[256];
        for (int b = 0; b < 256; b++) byte_idx[b] = BPE_NONE;
        for (size_t t = 0; t < n; t++) {
            uint32_t len = off[t + 1] - off[t];
            if (off[t + 1] < off[t] || off[t + 1] > (uint64_t)ar.len || len == 0) {
                PyErr_SetString(PyExc_ValueError, "bad token offsets");
                goto done1;
            }
            if (len > maxlen) maxlen = len;
            if (len == 1) byte_idx[arena[off[t]]] = (uint32_t)t;
            left[t] = right[t] = -1;
            mrank[t] = len == 1 ? -1 : -2;
        }
        for (int b = 0; b < 256; b++)
            if (byte_idx[b] == BPE_NONE) {
                PyErr_Format(PyExc_ValueError, "no token for the single byte 0x%02x", b);
                goto done1;
            }
        for (size_t k = 0; k < nrules; k++) {
            int64_t l = rules[3 * k], r = rules[3 * k + 1];
            if (l < 0 || r < 0 || (size_t)l >= n || (size_t)r >= n) {
                PyErr_SetString(PyExc_ValueError, "rule index out of range");
                goto done1;
            }
            chash_put(&rmap, bpe_pair_key((uint32_t)l, (uint32_t)r), (uint32_t)k); /* last wins */
        }
        /* counting sort by length */
        {
            size_t *cnt = (size_t *)calloc(maxlen + 2, sizeof(size_t));
            if (!cnt) {
                PyErr_NoMemory();
                goto done1;
            }
            for (size_t t = 0; t < n; t++) cnt[off[t + 1] - off[t] + 1]++;
            for (uint32_t l = 1; l <= maxlen + 1; l++) cnt[l] += cnt[l - 1];
            for (size_t t = 0; t < n; t++) order[cnt[off[t + 1] - off[t]]++] = (uint32_t)t;
            free(cnt);
        }
        parts = (uint32_t *)malloc((maxlen + 1) * 4);
        prk = (int64_t *)malloc((maxlen + 1) * 8);
        if (!parts || !prk) {
            PyErr_NoMemory();
            goto done1;
        }
        for (size_t oi = 0; oi < n; oi++) {
            uint32_t t = order[oi];
            uint32_t len = off[t + 1] - off[t];
            if (len < 2) continue;
            const uint8_t *s = arena + off[t];
            size_t k = len;
            for (size_t i = 0; i < len; i++) parts[i] = byte_idx[s[i]];
            for (size_t i = 0; i + 1 < k; i++) {
                uint32_t c = chash_get(&pairs, bpe_pair_key(parts[i], parts[i + 1]));
                prk[i] = c == BPE_NONE ? INT64_MAX : mrank[c];
            }
            while (k > 2) {
                int64_t best = INT64_MAX;
                size_t bi = 0;
                for (size_t i = 0; i + 1 < k; i++)
                    if (prk[i] < best) best = prk[i], bi = i;
                if (best == INT64_MAX) break;
                parts[bi] = chash_get(&pairs, bpe_pair_key(parts[bi], parts[bi + 1]));
                for (size_t i = bi + 1; i + 1 < k; i++) parts[i] = parts[i + 1], prk[i] = prk[i + 1];
                k--;
                if (bi + 1 < k) {
                    uint32_t c = chash_get(&pairs, bpe_pair_key(parts[bi], parts[bi + 1]));
                    prk[bi] = c == BPE_NONE ? INT64_MAX : mrank[c];
                }
                if (bi > 0) {
                    uint32_t c = chash_get(&pairs, bpe_pair_key(parts[bi - 1], parts[bi]));
                    prk[bi - 1] = c == BPE_NONE ? INT64_MAX : mrank[c];
                }
            }
            if (k != 2) continue; /* not reachable by merges */
            int64_t r;
            if (have_ru) {
                uint32_t ri = chash_get(&rmap, bpe_pair_key(parts[0], parts[1]));
                if (ri == BPE_NONE) continue;
                r = rules[3 * ri + 2];
            } else {
                r = ranks[t];
            }
            left[t] = (int32_t)parts[0];
            right[t] = (int32_t)parts[1];
            mrank[t] = r;
            chash_put(&pairs, bpe_pair_key(parts[0], parts[1]), t);
        }
        {
            PyObject *lo = PyBytes_FromStringAndSize((const char *)left, (Py_ssize_t)(n * 4));
            PyObject *ro = PyBytes_FromStringAndSize((const char *)right, (Py_ssize_t)(n * 4));
            PyObject *mo = PyBytes_FromStringAndSize((const char *)mrank, (Py_ssize_t)(n * 8));
            if (lo && ro && mo) res = PyTuple_Pack(3, lo, ro, mo);
            Py_XDECREF(lo);
            Py_XDECREF(ro);
            Py_XDECREF(mo);
        }
    done1:
        free(left), free(right), free(mrank), free(order), free(parts), free(prk);
        chash_free(&pairs);
        chash_free(&rmap);
    }
done0:
    PyBuffer_Release(&ar);
    PyBuffer_Release(&of);
    if (have_rk && rk.obj) PyBuffer_Release(&rk);
    if (have_ru && ru.obj) PyBuffer_Release(&ru);
    return res;
}

/* build_pair_table(left u32[], right u32[], merged u32[], bloom_bits) -> (packed u64 slots bytes, bits, bloom bytes) */
static PyObject *py_build_pair_table(PyObject *self, PyObject *args) {
    Py_buffer l, r, v;
    int bloom_bits;
    if (!PyArg_ParseTuple(args, "y*y*y*i", &l, &r, &v, &bloom_bits)) return NULL;
    PyObject *res = NULL;
    uint64_t *bloom = NULL;
    size_t n = (size_t)l.len / 4;
    if ((size_t)r.len / 4 != n || (size_t)v.len / 4 != n || bloom_bits < 6 || bloom_bits > 40) {
        PyErr_SetString(PyExc_ValueError, "length mismatch or bad bloom size");
        goto out;
    }
    bloom = (uint64_t *)calloc((size_t)1 << (bloom_bits - 6), 8);
    if (!bloom) {
        PyErr_NoMemory();
        goto out;
    }
    size_t cap = 16;
    int bits = 4;
    while (cap < 2 * n + 2) cap <<= 1, bits++;
    uint64_t *tab = (uint64_t *)malloc(cap * 8);
    if (!tab) {
        PyErr_NoMemory();
        goto out;
    }
    memset(tab, 0xFF, cap * 8);
    const uint32_t *L = (const uint32_t *)l.buf, *R = (const uint32_t *)r.buf, *V = (const uint32_t *)v.buf;
    for (size_t i = 0; i < n; i++) {
        if (L[i] >= BPE_MAX_INTERNAL - 1 || R[i] >= BPE_MAX_INTERNAL - 1 || V[i] >= BPE_MAX_INTERNAL - 1) {
            free(tab);
            PyErr_SetString(PyExc_ValueError, "more than 2^21 - 2 BPE tokens are not supported");
            goto out;
        }
        uint64_t key = ((uint64_t)L[i] << BPE_PAIR_ID_BITS) | R[i];
        uint64_t j = bpe_pair_slot(key, 64 - bits);
        while (tab[j] != BPE_EMPTY_KEY && (tab[j] >> 22) != key) j = (j + 1) & (cap - 1);
        tab[j] = (key << 22) | V[i];
        uint64_t bit = bpe_bloom_bit(key, 64 - bloom_bits);
        bloom[bit >> 6] |= 1ull << (bit & 63);
    }
    res = Py_BuildValue("y#iy#", (const char *)tab, (Py_ssize_t)(cap * 8), bits, (const char *)bloom,
                        (Py_ssize_t)(((size_t)1 << (bloom_bits - 6)) * 8));
    free(tab);
out:
    free(bloom);
    PyBuffer_Release(&l);
    PyBuffer_Release(&r);
    PyBuffer_Release(&v);
    return res;
}

/* build_span_table(arena, offsets u32[n+1], ids u32[]) -> u64 slots bytes (2 words per slot) */
static PyObject *py_build_span_table(PyObject *self, PyObject *args) {
    Py_buffer ar, of, ids;
    if (!PyArg_ParseTuple(args, "y*y*y*", &ar, &of, &ids)) return NULL;
    PyObject *res = NULL;
    size_t n = (size_t)ids.len / 4, noff = (size_t)of.len / 4;
    size_t cap = 16;
    while (cap < 2 * n + 2) cap <<= 1;
    uint64_t *tab = (uint64_t *)malloc(cap * 16);
    if (!tab) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t i = 0; i < cap; i++) tab[2 * i] = 0, tab[2 * i + 1] = BPE_NONE;
    const uint8_t *arena = (const uint8_t *)ar.buf;
    const uint32_t *off = (const uint32_t *)of.buf, *I = (const uint32_t *)ids.buf;
    for (size_t k = 0; k < n; k++) {
        uint32_t t = I[k];
        if ((size_t)t + 1 >= noff || off[t + 1] <= off[t] || off[t + 1] > (uint64_t)ar.len) {
            PyErr_SetString(PyExc_ValueError, "span table: bad id");
            goto out;
        }
        const uint8_t *s = arena + off[t];
        size_t len = off[t + 1] - off[t];
        uint64_t i = bpe_hash_bytes(s, len) & (cap - 1);
        while ((uint32_t)tab[2 * i + 1] != BPE_NONE) i = (i + 1) & (cap - 1);
        tab[2 * i] = bpe_head8(s, len);
        tab[2 * i + 1] = (uint64_t)t | ((uint64_t)len << 32);
    }
    res = PyBytes_FromStringAndSize((const char *)tab, (Py_ssize_t)(cap * 16));
out:
    free(tab);
    PyBuffer_Release(&ar);
    PyBuffer_Release(&of);
    PyBuffer_Release(&ids);
    return res;
}

/* The filters the encoders read beside the tables (bpe.h span_bloom, seg_big, seg_tri), built once here and stored
 * in the artifact, so that a load only checks their sizes (validate_bpe.py; their bits choose between exact paths
 * and never index anything).
 *   span_bloom: a blocked bloom filter over the bytes of every token up to max_span_len long (a superset of the span
 *     tables' keys, since a slot's key is the bytes of the token it names): a clear bit proves a span in neither.
 *     words: the least power of two >= 64 with words * 8 >= tokens hashed (at most 2^24).
 *   seg_big[a << 8 | b]: BPE_SEG_IN / START / END of byte bigram ab inside / at the start / at the end of some
 *     internal token of >= 2 bytes; seg_tri: 2^BPE_SEG_TRI_BITS bits, the byte trigrams inside one (bpe_tri_bit). */
static int bpe_filters_build(const uint8_t *dec_bytes, const uint32_t *dec_off, size_t n_ext, const uint32_t *int_ext,
                             size_t n_int, size_t max_span_len, uint64_t **bloom_out, size_t *bloom_words,
                             uint8_t *big, uint32_t *tri) {
    size_t used = 0;
    for (size_t id = 0; id < n_ext; id++) {
        uint32_t len = dec_off[id + 1] - dec_off[id];
        used += len && len <= max_span_len;
    }
    size_t words = 64;
    while (words * 8 < used && words < ((size_t)1 << 24)) words *= 2;
    uint64_t *bl = (uint64_t *)calloc(words, 8);
    uint64_t *is_int = (uint64_t *)calloc((n_ext + 63) / 64 + 1, 8);
    if (!bl || !is_int) {
        free(bl);
        free(is_int);
        return -1;
    }
    for (size_t id = 0; id < n_ext; id++) {
        uint32_t len = dec_off[id + 1] - dec_off[id];
        if (!len || len > max_span_len) continue;
        uint64_t h = bpe_hash_bytes(dec_bytes + dec_off[id], len);
        bl[(h >> 40) & (words - 1)] |= bpe_span_bloom_bits(h);
    }
    memset(big, 0, 65536);
    memset(tri, 0, ((size_t)1 << BPE_SEG_TRI_BITS) / 8);
    for (size_t t = 0; t < n_int; t++)
        if (int_ext[t] < n_ext) is_int[int_ext[t] >> 6] |= 1ull << (int_ext[t] & 63);
    for (size_t e = 0; e < n_ext; e++) { /* (one sequential pass over dec_bytes) */
        if (!((is_int[e >> 6] >> (e & 63)) & 1)) continue;
        const uint8_t *p = dec_bytes + dec_off[e];
        size_t len = dec_off[e + 1] - dec_off[e];
        if (len < 2) continue;
        big[(uint32_t)p[0] << 8 | p[1]] |= BPE_SEG_START;
        big[(uint32_t)p[len - 2] << 8 | p[len - 1]] |= BPE_SEG_END;
        for (size_t i = 0; i + 1 < len; i++) big[(uint32_t)p[i] << 8 | p[i + 1]] |= BPE_SEG_IN;
        for (size_t i = 0; i + 2 < len; i++) {
            uint32_t b = bpe_tri_bit((uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2]);
            tri[b >> 5] |= 1u << (b & 31);
        }
    }
    free(is_int);
    *bloom_out = bl;
    *bloom_words = words;
    return 0;
}

/* build_filters(dec_bytes, dec_off u32[n_ext+1], int_ext u32[n_int], max_span_len)
 *   -> (span_bloom u64 bytes, seg_big u8[65536] bytes, seg_tri u32[2^BPE_SEG_TRI_BITS / 32] bytes) */
static PyObject *py_build_filters(PyObject *self, PyObject *args) {
    Py_buffer db, of, ie;
    Py_ssize_t max_span;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &db, &of, &ie, &max_span)) return NULL;
    PyObject *res = NULL;
    uint64_t *bl = NULL;
    size_t words = 0, n_ext = of.len >= 4 ? (size_t)of.len / 4 - 1 : 0, n_int = (size_t)ie.len / 4;
    size_t tri_bytes = ((size_t)1 << BPE_SEG_TRI_BITS) / 8;
    uint8_t *big = (uint8_t *)malloc(65536 + tri_bytes);
    const uint32_t *off = (const uint32_t *)of.buf;
    int ok = big != NULL && of.len >= 4 && max_span >= 0 && off[0] == 0 && off[n_ext] <= (uint64_t)db.len;
    for (size_t i = 0; ok && i < n_ext; i++) ok = off[i] <= off[i + 1];
    if (!ok) {
        if (big) PyErr_SetString(PyExc_ValueError, "build_filters: bad decode offsets");
        else PyErr_NoMemory();
        goto out;
    }
    if (bpe_filters_build((const uint8_t *)db.buf, off, n_ext, (const uint32_t *)ie.buf, n_int, (size_t)max_span, &bl,
                          &words, big, (uint32_t *)(big + 65536)) < 0) {
        PyErr_NoMemory();
        goto out;
    }
    res = Py_BuildValue("(y#y#y#)", (const char *)bl, (Py_ssize_t)(words * 8), (const char *)big, (Py_ssize_t)65536,
                        (const char *)(big + 65536), (Py_ssize_t)tri_bytes);
out:
    free(bl);
    free(big);
    PyBuffer_Release(&db);
    PyBuffer_Release(&of);
    PyBuffer_Release(&ie);
    return res;
}

/* build_trie(arena, offsets u32[n+1]) -> (trie u32[3 * size] = (base, check, token) per node, next_prefix u32)
 * A double-array trie of the n tokens (token i ends at a node with tok == i). */
static PyObject *py_build_trie(PyObject *self, PyObject *args) {
    Py_buffer ar, of;
    if (!PyArg_ParseTuple(args, "y*y*", &ar, &of)) return NULL;
    PyObject *res = NULL;
    size_t n = (size_t)of.len / 4 - 1;
    const uint8_t *arena = (const uint8_t *)ar.buf;
    const uint32_t *off = (const uint32_t *)of.buf;
    /* 1. pointer trie: first child / next sibling lists */
    size_t total = 1;
    for (size_t t = 0; t < n; t++) total += off[t + 1] - off[t];
    uint32_t *fc = (uint32_t *)malloc(total * 4), *sib = (uint32_t *)malloc(total * 4), *ptok = (uint32_t *)malloc(total * 4);
    uint8_t *lab = (uint8_t *)malloc(total);
    uint32_t *queue = NULL, *dapos = NULL, *check = NULL, *tok = NULL, *np = NULL;
    int32_t *base = NULL;
    uint8_t *used = NULL;
    if (!fc || !sib || !ptok || !lab) {
        PyErr_NoMemory();
        goto out;
    }
    size_t nn = 1;
    fc[0] = sib[0] = ptok[0] = BPE_NONE;
    lab[0] = 0;
    for (size_t t = 0; t < n; t++) {
        uint32_t node = 0;
        for (uint32_t i = off[t]; i < off[t + 1]; i++) {
            uint8_t c = arena[i];
            uint32_t ch = fc[node];
            while (ch != BPE_NONE && lab[ch] != c) ch = sib[ch];
            if (ch == BPE_NONE) {
                ch = (uint32_t)nn++;
                lab[ch] = c;
                fc[ch] = BPE_NONE;
                ptok[ch] = BPE_NONE;
                sib[ch] = fc[node];
                fc[node] = ch;
            }
            node = ch;
        }
        if (ptok[node] != BPE_NONE) {
            PyErr_SetString(PyExc_ValueError, "duplicate token in trie");
            goto out;
        }
        ptok[node] = (uint32_t)t;
    }
    /* 2. BFS, place every node's children at base + label */
    size_t cap = nn + 512;
    queue = (uint32_t *)malloc(nn * 4);
    dapos = (uint32_t *)malloc(nn * 4);
    base = (int32_t *)malloc(cap * 4);
    check = (uint32_t *)malloc(cap * 4);
    tok = (uint32_t *)malloc(cap * 4);
    used = (uint8_t *)calloc(cap, 1);
    if (!queue || !dapos || !base || !check || !tok || !used) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t i = 0; i < cap; i++) base[i] = 0, check[i] = BPE_NONE, tok[i] = BPE_NONE;
    size_t qh = 0, qt = 0, first_free = 1, da_size = 1;
    used[0] = 1;
    dapos[0] = 0;
    queue[qt++] = 0;
    while (qh < qt) {
        uint32_t node = queue[qh++];
        uint32_t p = dapos[node];
        tok[p] = ptok[node];
        if (fc[node] == BPE_NONE) {
            base[p] = 0;
            continue;
        }
        uint8_t labels[256];
        int nl = 0, minl = 256;
        for (uint32_t ch = fc[node]; ch != BPE_NONE; ch = sib[ch]) {
            labels[nl++] = lab[ch];
            if (lab[ch] < minl) minl = lab[ch];
        }
        while (first_free < cap && used[first_free]) first_free++;
        size_t pos = first_free;
        int64_t b;
        for (;;) {
            b = (int64_t)pos - minl;
            if (b >= 1) {
                /* grow so that b + 255 fits */
                if ((size_t)b + 256 > cap) {
                    size_t ncap = cap * 2 > (size_t)b + 512 ? cap * 2 : (size_t)b + 512;
                    int32_t *nb = (int32_t *)realloc(base, ncap * 4);
                    if (nb) base = nb;
                    uint32_t *nc = (uint32_t *)realloc(check, ncap * 4);
                    if (nc) check = nc;
                    uint32_t *nt = (uint32_t *)realloc(tok, ncap * 4);
                    if (nt) tok = nt;
                    uint8_t *nu = (uint8_t *)realloc(used, ncap);
                    if (nu) used = nu;
                    if (!nb || !nc || !nt || !nu) {
                        PyErr_NoMemory();
                        goto out;
                    }
                    for (size_t i = cap; i < ncap; i++) base[i] = 0, check[i] = BPE_NONE, tok[i] = BPE_NONE, used[i] = 0;
                    cap = ncap;
                }
                int ok = 1;
                for (int k = 0; k < nl; k++)
                    if (used[b + labels[k]]) {
                        ok = 0;
                        break;
                    }
                if (ok) break;
            }
            pos++;
            while (pos < cap && used[pos]) pos++;
        }
        base[p] = (int32_t)b;
        for (uint32_t ch = fc[node]; ch != BPE_NONE; ch = sib[ch]) {
            size_t q = (size_t)b + lab[ch];
            used[q] = 1;
            check[q] = p;
            dapos[ch] = (uint32_t)q;
            if (q + 1 > da_size) da_size = q + 1;
            queue[qt++] = ch;
        }
    }
    /* 3. next_prefix: longest token that is a proper prefix */
    np = (uint32_t *)malloc(n * 4 + 4);
    if (!np) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t t = 0; t < n; t++) {
        uint32_t node = 0, best = BPE_NONE;
        for (uint32_t i = off[t]; i + 1 < off[t + 1]; i++) {
            node = (uint32_t)(base[node] + arena[i]);
            if (tok[node] != BPE_NONE) best = tok[node];
        }
        np[t] = best;
    }
    {
        uint32_t *tr = (uint32_t *)malloc(da_size * 12);
        if (!tr) {
            PyErr_NoMemory();
            goto out;
        }
        for (size_t i = 0; i < da_size; i++) tr[3 * i] = (uint32_t)base[i], tr[3 * i + 1] = check[i], tr[3 * i + 2] = tok[i];
        res = Py_BuildValue("y#y#", (const char *)tr, (Py_ssize_t)(da_size * 12), (const char *)np, (Py_ssize_t)(n * 4));
        free(tr);
    }
out:
    free(fc), free(sib), free(ptok), free(lab), free(queue), free(dapos), free(base), free(check), free(tok), free(used),
        free(np);
    PyBuffer_Release(&ar);
    PyBuffer_Release(&of);
    return res;
}

#endif /* FSTOK_BPE_BUILDERS_H */
