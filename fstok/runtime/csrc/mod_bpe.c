/* fstok.runtime._bpe: byte-level BPE runtime (Python binding) and the compiler's heavy loops.
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

#define MAX_LEVELS 16

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

/* ================================================================ Model */

enum { V_INT_EXT, V_INFO, V_PAIR_TAB, V_BYTE_PAIR, V_SPAN_TAB, V_DEC_BYTES, V_DEC_OFF, V_DEC_KIND, V_TRIE, V_BYTE_TOK,
       V_PAIR_BLOOM, V_SPAN_HOT, V_PAIR_HOT, V_COUNT };
static const char *VIEW_NAMES[V_COUNT] = {"int_ext",  "int_info", "pair_tab", "byte_pair", "span_tab",  "dec_bytes",
                                          "dec_off",  "dec_kind", "trie",     "byte_tok",  "pair_bloom", "span_hot",
                                          "pair_hot"};
static const Py_ssize_t VIEW_SIZES[V_COUNT] = {4, 16, 8, 4, 16, 1, 4, 1, 12, 4, 8, 16, 8};

typedef struct {
    PyObject_HEAD bpe_model m;
    Py_buffer views[V_COUNT];
    int nviews;
    PyObject **ints; /* cached PyLong per external id */
    int ints_pinned; /* ints[] are pinned (pyids.h): items need no Py_INCREF, the model owns no reference */
    uint64_t *span_bloom; /* owned; m.span_bloom */
    uint32_t *seg_bp;     /* owned; [65536] per byte bigram: m.byte_pair's id (0xFFFFFF: none) | m.seg_big's flags << 24,
                             and after it seg_dir: the trigram filter of direct runs (dir_tri_bit); NULL: none */
    const uint32_t *seg_dir;
    int bt_valid;    /* compile-time verdict: backtracking encoder valid */
    /* pre-tokenizer: the regex DFA levels (issue 3's C spanner) */
    fstok_dfa lv[MAX_LEVELS];
    int n_levels;   /* 0 with mode split: the whole segment is one piece */
    int pt_mode;    /* -1 none (Python spans only), 0 find (tiktoken), 1 split (HF Isolated levels) */
    Py_buffer dfa_views[3 * MAX_LEVELS];
    int n_dfa_views;
    uint64_t serial;          /* unique per Model object */
    uint64_t memo_epoch;      /* bumped by clear_cache(): memos filled earlier are dropped */
    int use_memo;
    pthread_mutex_t pool_mu;  /* guards the memo pool */
    bpe_memo *pool[16];
    int npool;
    /* wmemo[i]: the memo of pool thread i (tpool.h tp_worker_index), only ever used by that thread, so a
     * worker finds its memo again in its own core's cache (memo_worker) */
    bpe_memo *wmemo[TP_MAX_THREADS];
} ModelObject;

/* ---- pre-token memos (see bpe.h): a pool per model; each encoding thread borrows one for the
 * duration of its work, so a memo is never written by two threads at once and stays warm across calls. */
#define MEMO_POOL 16
static uint64_t model_serial_counter = 0;

static bpe_memo *memo_borrow(ModelObject *self) {
    if (!self->use_memo) return NULL;
    bpe_memo *mm = NULL;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool > 0) mm = self->pool[--self->npool];
    pthread_mutex_unlock(&self->pool_mu);
    uint64_t epoch = __atomic_load_n(&self->memo_epoch, __ATOMIC_RELAXED);
    if (!mm) {
        mm = bpe_memo_new();
        if (!mm) return NULL;
        mm->epoch = epoch;
    } else if (mm->epoch != epoch) {
        bpe_memo_clear(mm);
        mm->epoch = epoch;
    }
    return mm;
}

static void memo_return(ModelObject *self, bpe_memo *mm) {
    if (!mm) return;
    pthread_mutex_lock(&self->pool_mu);
    if (self->npool < MEMO_POOL) {
        self->pool[self->npool++] = mm;
        mm = NULL;
    }
    pthread_mutex_unlock(&self->pool_mu);
    bpe_memo_free(mm);
}

/* The memo of the calling pool thread for this model (made on first use), or a pool memo on any other
 * thread.  Why: with the shared pool (LIFO) a worker got, call after call, a memo that another core had
 * filled last, and the text's pieces were looked up in lines of another core's cache: a 16-thread call
 * of 1 MB English spent 1.9x one-shot's encode time in total (lent machine, FSTOK_TRACE_THREADS=1).  A
 * pool thread runs one job at a time, so wmemo[i] is never used by two threads at once; the model owns it
 * (freed in Model_dealloc) and cannot die during a call, which holds a reference to it. */
static bpe_memo *memo_worker(ModelObject *self) {
    int i = tp_worker_index();
    if (i < 0 || i >= TP_MAX_THREADS) return memo_borrow(self);
    if (!self->use_memo) return NULL;
    uint64_t epoch = __atomic_load_n(&self->memo_epoch, __ATOMIC_RELAXED);
    bpe_memo *mm = self->wmemo[i];
    if (!mm) {
        mm = bpe_memo_new();
        if (!mm) return NULL;
        mm->epoch = epoch;
        self->wmemo[i] = mm;
    } else if (mm->epoch != epoch) {
        bpe_memo_clear(mm);
        mm->epoch = epoch;
    }
    return mm;
}

static void memo_worker_done(ModelObject *self, bpe_memo *mm) {
    int i = tp_worker_index();
    if (i < 0 || i >= TP_MAX_THREADS) memo_return(self, mm);
}

static void Model_dealloc(ModelObject *self) {
    free(self->span_bloom);
    free(self->seg_bp);
    bpe_model_release(&self->m);
    for (int i = 0; i < self->npool; i++) bpe_memo_free(self->pool[i]);
    for (int i = 0; i < TP_MAX_THREADS; i++) bpe_memo_free(self->wmemo[i]);
    if (self->serial) pthread_mutex_destroy(&self->pool_mu);
    for (int i = 0; i < self->nviews; i++) PyBuffer_Release(&self->views[i]);
    for (int i = 0; i < self->n_dfa_views; i++) PyBuffer_Release(&self->dfa_views[i]);
    if (self->ints) {
        if (!self->ints_pinned)
            for (uint32_t i = 0; i < self->m.n_ext; i++) Py_XDECREF(self->ints[i]);
        free(self->ints);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* the bloom filter over the whole-span table (an optional speed-up: on allocation failure there is none) */
static void build_span_bloom(ModelObject *self) {
    bpe_model *m = &self->m;
    size_t slots = (size_t)self->views[V_SPAN_TAB].len / 16, used = 0;
    for (size_t i = 0; i < slots; i++) used += (uint32_t)m->span_tab[2 * i + 1] != BPE_NONE;
    size_t words = 64;
    while (words * 8 < used && words < ((size_t)1 << 24)) words *= 2;
    uint64_t *bl = (uint64_t *)calloc(words, 8);
    if (!bl) return;
    size_t nbytes = (size_t)self->views[V_DEC_BYTES].len;
    for (size_t i = 0; i < slots; i++) {
        uint64_t v = m->span_tab[2 * i + 1];
        uint32_t id = (uint32_t)v, len = (uint32_t)(v >> 32);
        if (id == BPE_NONE) continue;
        if (id >= m->n_ext || m->dec_off[id] > m->dec_off[id + 1] || m->dec_off[id + 1] > nbytes ||
            m->dec_off[id + 1] - m->dec_off[id] != len) { /* the loader rejects this; never filter then */
            free(bl);
            return;
        }
        uint64_t h = bpe_hash_bytes(m->dec_bytes + m->dec_off[id], len);
        bl[(h >> 40) & (words - 1)] |= bpe_span_bloom_bits(h);
    }
    self->span_bloom = bl;
    m->span_bloom = bl;
    m->span_bloom_mask = words - 1;
}

#define DIR_TRI_BITS 19
static inline uint32_t dir_tri_bit(uint32_t k3) { return (k3 * 0x9E3779B1u) >> (32 - DIR_TRI_BITS); }

/* the tables of direct runs (direct_run; an optional speed-up: on allocation failure, or without the segment tables,
 * there are none) */
static void build_direct_tables(ModelObject *self) {
    const bpe_model *m = &self->m;
    free(self->seg_bp);
    self->seg_bp = NULL;
    self->seg_dir = NULL;
    if (!m->seg_big) return;
    uint32_t *t = (uint32_t *)calloc(65536 + ((size_t)1 << DIR_TRI_BITS) / 32, sizeof(uint32_t));
    if (!t) return;
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t r = m->byte_pair[i];
        t[i] = (r == BPE_NONE ? 0xFFFFFFu : r) | (uint32_t)m->seg_big[i] << 24;
    }
    uint32_t *tri = t + 65536;
    for (uint32_t k = 0; k < m->n_int; k++) { /* every trigram inside an internal token (as bpe_model_prepare) */
        uint32_t e = m->int_ext[k];
        if (e >= m->n_ext) continue;
        const uint8_t *p = m->dec_bytes + m->dec_off[e];
        size_t len = m->dec_off[e + 1] - m->dec_off[e];
        for (size_t i = 0; i + 2 < len; i++) {
            uint32_t b = dir_tri_bit((uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2]);
            tri[b >> 5] |= 1u << (b & 31);
        }
    }
    self->seg_bp = t;
    self->seg_dir = tri;
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
    self->pt_mode = -1;
    self->serial = __atomic_add_fetch(&model_serial_counter, 1, __ATOMIC_RELAXED);
    self->use_memo = 1;
    pthread_mutex_init(&self->pool_mu, NULL);
    for (int i = 0; i < V_COUNT; i++) {
        if (get_view(tables, VIEW_NAMES[i], &self->views[i], VIEW_SIZES[i], 1) < 0) return -1;
        self->nviews = i + 1;
    }
    bpe_model *m = &self->m;
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
    memcpy(m->byte_tok, self->views[V_BYTE_TOK].buf, 256 * 4);
    m->int_is_ext = 1;
    for (uint32_t i = 0; i < n_int; i++)
        if (m->int_ext[i] != i) {
            m->int_is_ext = 0;
            break;
        }
    m->max_span_len = max_span_len;
    m->backtrack_ok = backtrack_ok;
    self->bt_valid = backtrack_ok;
    m->trie_has_spans = trie_has_spans;
    m->short_max = short_max;
    m->hash_max = short_max + 8;
    m->short_max_mb = short_max;
    /* sizes were validated by the Python loader; re-check the ones C indexes blindly */
    if ((size_t)self->views[V_BYTE_TOK].len != 1024 || (size_t)self->views[V_DEC_OFF].len / 4 != (size_t)n_ext + 1 ||
        (size_t)self->views[V_DEC_KIND].len != n_ext || (size_t)self->views[V_INT_EXT].len / 4 != n_int || (size_t)self->views[V_INFO].len / 16 != n_int ||
        n_int >= BPE_MAX_INTERNAL - 1 || (size_t)self->views[V_TRIE].len / 12 != da_size || pair_bits < 4 ||
        pair_bits > 40 || (uint64_t)self->views[V_PAIR_TAB].len / 8 != (1ull << pair_bits) ||
        (size_t)self->views[V_BYTE_PAIR].len != 65536 * 4 || (self->views[V_SPAN_TAB].len / 16) < 2 ||
        ((self->views[V_SPAN_TAB].len / 16) & (self->views[V_SPAN_TAB].len / 16 - 1)) ||
        (self->views[V_SPAN_HOT].len / 16) < 2 || ((self->views[V_SPAN_HOT].len / 16) & (self->views[V_SPAN_HOT].len / 16 - 1))) {
        PyErr_SetString(PyExc_ValueError, "BPE tables have inconsistent sizes");
        return -1;
    }
    build_span_bloom(self);
    bpe_model_prepare(m); /* optional (segment tables): none on allocation failure */
    build_direct_tables(self);
    return 0;
}

static int ensure_ints(ModelObject *self) {
    if (self->ints) return 0;
    PyObject **ints = (PyObject **)calloc(self->m.n_ext ? self->m.n_ext : 1, sizeof(PyObject *));
    if (!ints) {
        PyErr_NoMemory();
        return -1;
    }
    int pinned = pyids_pinned_ints(ints, self->m.n_ext);
    if (pinned < 0) {
        free(ints);
        return -1;
    }
    self->ints_pinned = pinned;
    for (uint32_t i = 0; i < self->m.n_ext && !pinned; i++) {
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
    if (self->ints_pinned) return pyids_list_pinned(self->ints, self->m.n_ext, ids, n);
    return pyids_list_from_ids(self->ints, self->m.n_ext, ids, n);
}

enum { OUT_LIST = 0, OUT_BYTES = 1, OUT_COUNT = 2 };

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

/* encode_spans(data, spans u32[3k], out_kind=0)
 * spans: (start, end, literal) triples of byte offsets into data; literal != 0xFFFFFFFF emits that id for
 * the range (a special token), otherwise data[start:end) is one pre-token.
 * out_kind: 0 list, 1 bytes (u32 ids), 2 count, 3 (list, bytes of u32 token start byte offsets). */
static PyObject *Model_encode_spans(ModelObject *self, PyObject *args) {
    Py_buffer data, spans;
    int kind = OUT_LIST;
    if (!PyArg_ParseTuple(args, "y*y*|i", &data, &spans, &kind)) return NULL;
    const uint8_t *s = (const uint8_t *)data.buf;
    const uint32_t *sp = (const uint32_t *)spans.buf;
    size_t k = (size_t)spans.len / 12, n = (size_t)data.len;
    bpe_vec v = {0}, st = {0};
    int rc = 0;
    for (size_t i = 0; i < k; i++)
        if (sp[3 * i] > sp[3 * i + 1] || sp[3 * i + 1] > n) {
            PyBuffer_Release(&data);
            PyBuffer_Release(&spans);
            PyErr_SetString(PyExc_ValueError, "span out of range");
            return NULL;
        }
    const bpe_model *m = &self->m;
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
    if ((mode == 2 || mode == 4 || mode == 5) && !self->m.backtrack_ok) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "backtracking encoder is not valid for this vocabulary");
        return NULL;
    }
    bpe_vec v = {0};
    int rc;
    const uint8_t *s = (const uint8_t *)data.buf;
    size_t n = (size_t)data.len;
    Py_BEGIN_ALLOW_THREADS
    if (mode == 0) rc = bpe_encode_span(&self->m, s, n, &v);
    else {
        rc = mode == 1 ? bpe_encode_short(&self->m, s, n, &v)
           : mode == 2 ? bpe_encode_backtrack(&self->m, s, n, &v)
           : mode == 4 ? bpe_encode_bucket(&self->m, s, n, &v)
           : mode == 5 ? bpe_encode_window(&self->m, s, n, &v)
                       : bpe_encode_heap(&self->m, s, n, &v);
        if (!rc)
            for (size_t i = 0; i < v.len; i++) v.ids[i] = self->m.int_ext[v.ids[i]];
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    return finish(self, &v, rc, OUT_LIST);
}

/* decode_bytes(ids: sequence of int or a u32 buffer) -> bytes; raises KeyError on unknown ids */
static PyObject *Model_decode_bytes(ModelObject *self, PyObject *arg) {
    const bpe_model *m = &self->m;
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
    uint32_t id = bpe_span_get(&self->m, (const uint8_t *)data.buf, (size_t)data.len);
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
    if (self->pt_mode != -1) {
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
        fstok_dfa_init(&self->lv[i], (const uint32_t *)v[0].buf, (const uint8_t *)v[1].buf, (const uint8_t *)v[2].buf,
                       n_states, shift, start, eoi, n_boundary);
        char err[200];
        if (fstok_dfa_check(&self->lv[i], err, sizeof err)) {
            PyErr_Format(PyExc_ValueError, "pre-tokenizer DFA level %zd is invalid: %s", i, err);
            return NULL;
        }
    }
    self->n_levels = (int)nl;
    self->pt_mode = mode;
    Py_RETURN_NONE;
}

/* --- special / added token matcher: a byte trie, leftmost-longest */
typedef struct {
    PyObject_HEAD uint8_t first[256];
    int n_first;
    uint8_t only_first;
    uint32_t nn;
    uint32_t *fc, *sib; /* first child / next sibling */
    uint8_t *lab;
    uint32_t *id;       /* BPE_NONE: no token ends here */
} SpecialsObject;

static void Specials_dealloc(SpecialsObject *self) {
    free(self->fc), free(self->sib), free(self->lab), free(self->id);
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
    free(self->fc), free(self->sib), free(self->lab), free(self->id);
    self->fc = (uint32_t *)malloc(total * 4);
    self->sib = (uint32_t *)malloc(total * 4);
    self->lab = (uint8_t *)malloc(total);
    self->id = (uint32_t *)malloc(total * 4);
    if (!self->fc || !self->sib || !self->lab || !self->id) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return -1;
    }
    memset(self->first, 0, 256);
    self->nn = 1;
    self->fc[0] = self->sib[0] = self->id[0] = BPE_NONE;
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
        self->first[b[0]] = 1;
        uint32_t node = 0;
        for (Py_ssize_t j = 0; j < len; j++) {
            uint32_t ch = self->fc[node];
            while (ch != BPE_NONE && self->lab[ch] != b[j]) ch = self->sib[ch];
            if (ch == BPE_NONE) {
                ch = self->nn++;
                self->lab[ch] = b[j];
                self->fc[ch] = BPE_NONE;
                self->id[ch] = BPE_NONE;
                self->sib[ch] = self->fc[node];
                self->fc[node] = ch;
            }
            node = ch;
        }
        self->id[node] = (uint32_t)tid;
    }
    Py_DECREF(fast);
    self->n_first = 0;
    for (int c = 0; c < 256; c++)
        if (self->first[c]) self->n_first++, self->only_first = (uint8_t)c;
    return 0;
}

/* leftmost-longest special token in s[pos:n): returns its start (or n) and sets *len, *id */
static size_t specials_find(const SpecialsObject *sp, const uint8_t *s, size_t n, size_t pos, size_t *len,
                            uint32_t *id) {
    if (!sp || sp->n_first == 0) return n;
    for (size_t i = pos; i < n; i++) {
        if (sp->n_first == 1) {
            const uint8_t *q = (const uint8_t *)memchr(s + i, sp->only_first, n - i);
            if (!q) return n;
            i = (size_t)(q - s);
        } else if (!sp->first[s[i]]) {
            continue;
        }
        uint32_t node = 0, best = BPE_NONE;
        size_t blen = 0;
        for (size_t j = i; j < n; j++) {
            uint32_t ch = sp->fc[node];
            while (ch != BPE_NONE && sp->lab[ch] != s[j]) ch = sp->sib[ch];
            if (ch == BPE_NONE) break;
            node = ch;
            if (sp->id[node] != BPE_NONE) best = sp->id[node], blen = j + 1 - i;
        }
        if (best != BPE_NONE) {
            *len = blen;
            *id = best;
            return i;
        }
    }
    return n;
}

static PyObject *Specials_find(SpecialsObject *self, PyObject *args) {
    Py_buffer data;
    Py_ssize_t pos = 0;
    if (!PyArg_ParseTuple(args, "y*|n", &data, &pos)) return NULL;
    size_t len = 0;
    uint32_t id = BPE_NONE;
    size_t n = (size_t)data.len;
    size_t at = specials_find(self, (const uint8_t *)data.buf, n, pos < 0 ? 0 : (size_t)pos, &len, &id);
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

/* --- encoding a text: specials, DFA spans, BPE */

#define SPAN_CHUNK 512
#define PREFETCH_AHEAD 6

typedef struct {
    bpe_memo *memo;      /* thread-private pre-token memo or NULL */
    size_t text_len;     /* bytes of the whole text (spans may read ahead up to its end) */
    bpe_vec ids, starts; /* starts only when want_starts */
    size_t count;        /* tokens already dropped from ids (count mode) */
    size_t *ends;        /* split mode scratch */
    size_t elen, ecap;
    int want_starts, count_only;
    bpe_vec *plan;       /* planning pass (parallel encode): record (start, end, literal) instead of encoding */
} enc_state;

static void enc_free(enc_state *st) {
    free(st->ids.ids);
    free(st->starts.ids);
    free(st->ends);
    memset(st, 0, sizeof *st);
}

static void enc_attach_memo(ModelObject *self, enc_state *st) { st->memo = memo_borrow(self); }

static inline int plan_push(bpe_vec *plan, size_t a, size_t b, uint32_t lit) {
    if (bpe_vec_reserve(plan, 3)) return -1;
    plan->ids[plan->len++] = (uint32_t)a;
    plan->ids[plan->len++] = (uint32_t)b;
    plan->ids[plan->len++] = lit;
    return 0;
}

static inline int emit_span(const bpe_model *m, const uint8_t *s, size_t a, size_t b, enc_state *st) {
    if (st->plan) return plan_push(st->plan, a, b, BPE_NONE);
    size_t before = st->ids.len;
    if (bpe_encode_span_avail(m, st->memo, s + a, b - a, st->text_len - a, &st->ids)) return -1;
    if (st->want_starts) {
        if (bpe_vec_reserve(&st->starts, st->ids.len - before)) return -1;
        size_t p = a;
        for (size_t j = before; j < st->ids.len; j++) {
            st->starts.ids[st->starts.len++] = (uint32_t)p;
            uint32_t t = st->ids.ids[j];
            p += m->dec_off[t + 1] - m->dec_off[t];
        }
    }
    return 0;
}

static inline void count_flush(enc_state *st) {
    if (st->count_only && st->ids.len > 4096) {
        st->count += st->ids.len;
        st->ids.len = 0;
    }
}


/* zero-padding masks of the piece cache's two key words, by piece length 0..16 */
static uint64_t PC_MASK0[BPE_PC_MAXLEN + 1], PC_MASK1[BPE_PC_MAXLEN + 1];

static void pc_init_masks(void) {
    for (int n = 0; n <= BPE_PC_MAXLEN; n++) {
        PC_MASK0[n] = n >= 8 ? ~0ull : (1ull << (8 * n)) - 1;
        PC_MASK1[n] = n >= 16 ? ~0ull : n <= 8 ? 0 : (1ull << (8 * (n - 8))) - 1;
    }
}


/* A piece of <= 16 bytes: its two head words (zero padded) and the span table's hash of it
 * (bpe_hash_w / bpe_hash_bytes), whose top bits also index the piece cache.  `avail` >= len bytes are
 * readable at p; near the end of the text (avail < 16) the words come from a zero-padded copy. */
typedef struct {
    uint64_t w0, w1, h;
} piece_key;

static inline void piece_key_of(const uint8_t *p, size_t len, size_t avail, piece_key *k) {
    if (FSTOK_LIKELY(avail >= 16)) {
        k->w0 = bpe_rd64(p) & PC_MASK0[len];
        k->w1 = bpe_rd64(p + 8) & PC_MASK1[len];
    } else {
        uint8_t t[16] = {0};
        memcpy(t, p, len);
        k->w0 = bpe_rd64(t);
        k->w1 = bpe_rd64(t + 8);
    }
    k->h = len <= 8 ? bpe_hash_w(k->w0, len) : bpe_hash_bytes(p, len);
}

/* Pieces of 17..PC_LONG_MAXLEN bytes (random text, words of scripts without spaces) are cached too, as *long
 * entries* over a line and its buddy: the head (first two words, tag with PC_DBL, ids 0..10) in the piece's own
 * line, the third word, the first word again and ids 11..21 in the buddy (PC_CONT; ntok field 255 so the buddy
 * is never read as two slots).  Up to PC_LONG_MAXTOK ids. */
#define PC_LONG_MAXLEN 24
#define PC_LONG_MAXTOK (2 * BPE_PC_MAXTOK)

static inline void piece_key_long(const uint8_t *p, size_t len, piece_key *k) { /* (len > 16 bytes readable) */
    k->w0 = bpe_rd64(p);
    k->w1 = bpe_rd64(p + 8);
    k->h = bpe_hash_bytes(p, len);
}

/* the third key word of a piece of 17..PC_LONG_MAXLEN bytes (zero padded) */
static inline uint64_t piece_w2(const uint8_t *p, size_t len, size_t avail) {
    if (FSTOK_LIKELY(avail >= PC_LONG_MAXLEN)) return bpe_rd64(p + 16) & PC_MASK0[len - 16];
    uint8_t t[8] = {0};
    memcpy(t, p + 16, len - 16);
    return bpe_rd64(t);
}

/* lines in use: BPE_PC_LINES, or fewer from $FSTOK_BPE_PC_LINES read at import (tests: 1-3 lines make every
 * piece collide, so slot 1, the swap and wide entries replacing slots and back all run) */
static uint64_t pc_nlines = BPE_PC_LINES;

static void pc_init_lines(void) {
    const char *e = getenv("FSTOK_BPE_PC_LINES");
    long v = e ? atol(e) : 0;
    if (v >= 1 && v <= (long)BPE_PC_LINES) pc_nlines = (uint64_t)v;
}

static inline bpe_pc_line *pc_line(bpe_memo *memo, uint64_t h) { return &memo->pc[((h >> 32) * pc_nlines) >> 32]; }

/* The buddy of a line: the other line of its 128-byte pair (itself when that is not in use: $FSTOK_BPE_PC_LINES
 * odd).  A piece lives in its own line or, when that one is taken by entries still in use, in the buddy
 * (two choices: o200k random text, ~71k distinct pieces of <= 16 bytes, most of them wide entries, missed
 * 29k times a pass with one choice, 11k with two; stop 14).  A piece of 12-16 tokens takes both lines. */
_Static_assert(BPE_PC_LINES % 2 == 0, "lines come in pairs");
static inline bpe_pc_line *pc_buddy(bpe_memo *memo, bpe_pc_line *l) {
    size_t i = (size_t)(l - memo->pc) ^ 1u;
    return i < pc_nlines ? memo->pc + i : l;
}

/* tag = gen << 16 | ntok << 8 | flags | len (len <= 24: bits 0-4).  PC_HIT: the entry was stored or hit since a
 * miss last found it in the way: a miss stores its piece in the line (own or buddy) that holds no such entry; when
 * both do, it clears their bits.  PC_DBL: a piece of 12-16 tokens, whose ids 11.. are in the buddy, in an entry
 * with the same key and PC_CONT, which never matches a lookup (the bit is in the compare mask), or a long entry. */
#define PC_NTOK(tag) (((tag) >> 8) & 0xFFu)
#define PC_DBL 0x20u
#define PC_HIT 0x40u
#define PC_CONT 0x80u
#define PC_MATCH 0xFFFF009Fu /* compared bits of a tag: gen, PC_CONT, len */
#define PC_GEN(tag) ((tag) & 0xFFFF0000u)

static inline int pc_slot_is(const bpe_pc_slot *e, const piece_key *k, uint32_t want) {
    return e->k0 == k->w0 && e->k1 == k->w1 && (e->tag & PC_MATCH) == want;
}

/* room in line l for a new entry of nt ids without evicting a current entry (gen: the memo's, << 16) */
static inline int pc_free(const bpe_pc_line *l, uint32_t gen, size_t nt) {
    uint32_t t0 = l->s[0].tag;
    if (PC_GEN(t0) != gen) return 1;
    return nt <= BPE_PC_SLOTTOK && PC_NTOK(t0) <= BPE_PC_SLOTTOK && PC_GEN(l->s[1].tag) != gen;
}

/* would storing nt ids in line l evict a current entry with PC_HIT? */
static inline int pc_protected(const bpe_pc_line *l, uint32_t gen, size_t nt) {
    uint32_t t0 = l->s[0].tag, t1 = l->s[1].tag;
    int slots = PC_NTOK(t0) <= BPE_PC_SLOTTOK;
    int p1 = slots && PC_GEN(t1) == gen && (t1 & PC_HIT);
    if (nt <= BPE_PC_SLOTTOK && slots) return p1; /* slot 0 moves to slot 1: only slot 1 is evicted */
    return (PC_GEN(t0) == gen && (t0 & PC_HIT)) || p1;
}

static inline void pc_age(bpe_pc_line *l) {
    l->s[0].tag &= ~PC_HIT;
    if (PC_NTOK(l->s[0].tag) <= BPE_PC_SLOTTOK) l->s[1].tag &= ~PC_HIT;
}

/* store piece (key k, nt ids) in its line: a wide entry takes the line; a slot entry goes to slot 0 and the
 * old slot 0 moves to slot 1 (dropped if it was wide: slot 1 was its ids) */
static inline void pc_store(bpe_pc_line *l, const piece_key *k, uint32_t tag, const uint32_t *ids, size_t nt) {
    if (nt <= BPE_PC_SLOTTOK) {
        if (PC_NTOK(l->s[0].tag) <= BPE_PC_SLOTTOK) l->s[1] = l->s[0];
        else l->s[1].tag = 0;
        l->s[0].k0 = k->w0;
        l->s[0].k1 = k->w1;
        l->s[0].tag = tag;
        memcpy(l->s[0].ids, ids, nt * sizeof(uint32_t));
    } else {
        l->wide.k0 = k->w0;
        l->wide.k1 = k->w1;
        l->wide.tag = tag;
        memcpy(l->wide.ids, ids, nt * sizeof(uint32_t));
    }
}

/* a piece missed the cache and encodes to nt ids: store it in its line l, or else the buddy b, where that evicts
 * no current PC_HIT entry (when both would: clear their bits, store it in l); 12-16 ids take both lines (head in l,
 * PC_CONT in b), and only where neither holds PC_HIT entries (else the bits are cleared and nothing is stored) */
static inline void pc_insert(bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint32_t want, uint32_t gen,
                             const uint32_t *ids, size_t nt) {
    uint32_t tag = want | (uint32_t)(nt << 8) | PC_HIT;
    if (nt > BPE_PC_MAXTOK) {
        if (b == l) return;
        if ((pc_free(l, gen, nt) || !pc_protected(l, gen, nt)) && (pc_free(b, gen, nt) || !pc_protected(b, gen, nt))) {
            pc_store(l, k, tag | PC_DBL, ids, BPE_PC_MAXTOK);
            b->wide.k0 = k->w0;
            b->wide.k1 = k->w1;
            b->wide.tag = tag | PC_CONT;
            memcpy(b->wide.ids, ids + BPE_PC_MAXTOK, (nt - BPE_PC_MAXTOK) * sizeof(uint32_t));
        } else {
            pc_age(l);
            pc_age(b);
        }
        return;
    }
    bpe_pc_line *d;
    if (pc_free(l, gen, nt) || !pc_protected(l, gen, nt)) d = l; /* its own line first: hits there take the fast path */
    else if (pc_free(b, gen, nt) || !pc_protected(b, gen, nt)) d = b;
    else {
        /* both lines hold entries hit since they were last aged: age them, and still store the piece in its own
         * line.  (Storing nothing kept o200k random text at 15.0k misses a pass instead of 16.3k, but a text seen
         * for the first time after others then needed two misses per piece: +25% misses on new English.) */
        pc_age(l);
        pc_age(b);
        d = l;
    }
    pc_store(d, k, tag, ids, nt);
}

/* can a long entry take the pair l, b without evicting a current PC_HIT entry? */
static inline int pc_long_room(const bpe_pc_line *l, const bpe_pc_line *b, uint32_t gen) {
    return b != l && (pc_free(l, gen, BPE_PC_MAXTOK) || !pc_protected(l, gen, BPE_PC_MAXTOK)) &&
           (pc_free(b, gen, BPE_PC_MAXTOK) || !pc_protected(b, gen, BPE_PC_MAXTOK));
}

/* store a long entry (a piece of 17..PC_LONG_MAXLEN bytes, nt <= PC_LONG_MAXTOK ids) over l and its buddy b */
static inline void pc_store_long(bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint64_t w2, uint32_t want,
                                 const uint32_t *ids, size_t nt) {
    size_t n0 = nt < BPE_PC_MAXTOK ? nt : BPE_PC_MAXTOK;
    l->wide.k0 = k->w0;
    l->wide.k1 = k->w1;
    l->wide.tag = want | (uint32_t)(nt << 8) | PC_HIT | PC_DBL;
    memcpy(l->wide.ids, ids, n0 * sizeof(uint32_t));
    if (nt <= BPE_PC_SLOTTOK) l->s[1].tag = 0; /* slot 1 must not stay valid beside a long head */
    b->wide.k0 = w2;
    b->wide.k1 = k->w0;
    b->wide.tag = want | (255u << 8) | PC_HIT | PC_CONT;
    memcpy(b->wide.ids, ids + n0, (nt - n0) * sizeof(uint32_t));
}

/* The second home of a long entry: the other pair of its 256-byte block (lines i ^ 2 and i ^ 3), or NULL where the
 * cache has too few lines.  Why (stop 18): a long entry takes two lines, and it may only evict entries that were not
 * hit since they were last aged.  On multilingual text, ~20% of the pieces of 17-24 bytes had a short piece hit on
 * every pass in their own pair, so they missed on every pass (o200k multilingual.txt: 335 of 1,903 a pass, each a
 * memo lookup and some a full encode). */
static inline bpe_pc_line *pc_alt(bpe_memo *memo, const bpe_pc_line *l) {
    size_t i = (size_t)(l - memo->pc) ^ 2u;
    return (i | 1u) < pc_nlines ? memo->pc + i : NULL;
}

/* a long entry's miss: store it in its own pair, else its second pair; where both hold current PC_HIT entries, age
 * them (entries no longer in use give their lines back on this piece's next miss) */
static inline void pc_insert_long(bpe_memo *memo, bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint64_t w2,
                                  uint32_t want, uint32_t gen, const uint32_t *ids, size_t nt) {
    if (nt > PC_LONG_MAXTOK) return;
    if (pc_long_room(l, b, gen)) {
        pc_store_long(l, b, k, w2, want, ids, nt);
        return;
    }
    bpe_pc_line *a = pc_alt(memo, l), *ab = a ? pc_buddy(memo, a) : NULL;
    if (a && pc_long_room(a, ab, gen)) {
        pc_store_long(a, ab, k, w2, want, ids, nt);
        return;
    }
    pc_age(l);
    pc_age(b);
    if (a) {
        pc_age(a);
        pc_age(ab);
    }
}

/* is the long entry of key k (third word w2) in the pair l, b?  Then its ids are copied out (PC_LONG_MAXTOK slots) */
static inline int pc_long_get(bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint64_t w2, uint32_t want,
                              enc_state *st) {
    uint32_t t0 = l->s[0].tag, tb = b->s[0].tag;
    if (!(l->s[0].k0 == k->w0 && l->s[0].k1 == k->w1 && (t0 & PC_MATCH) == want && b != l && b->s[0].k0 == w2 &&
          b->s[0].k1 == k->w0 && (tb & PC_MATCH) == (want | PC_CONT)))
        return 0;
    memcpy(st->ids.ids + st->ids.len, l->wide.ids, sizeof l->wide.ids);
    memcpy(st->ids.ids + st->ids.len + BPE_PC_MAXTOK, b->wide.ids, sizeof b->wide.ids);
    st->ids.len += PC_NTOK(t0);
    if (FSTOK_UNLIKELY(!(t0 & tb & PC_HIT))) {
        l->s[0].tag = t0 | PC_HIT;
        b->s[0].tag = tb | PC_HIT;
    }
    return 1;
}

/* piece_emit for a piece of 17..PC_LONG_MAXLEN bytes: a hit needs the head in a line and the PC_CONT entry in its
 * buddy, in the piece's own pair or its second one (pc_alt).  Returns 0 on a hit, 1 on a miss, -1 when out of
 * memory. */
static int piece_emit_long(const bpe_model *m, bpe_memo *memo, uint32_t gen, const uint8_t *p, size_t len,
                           const piece_key *k, uint64_t w2, size_t room, enc_state *st) {
    bpe_pc_line *l = pc_line(memo, k->h), *b = pc_buddy(memo, l);
    const uint32_t want = gen | (uint32_t)len;
    if (pc_long_get(l, b, k, w2, want, st)) return 0;
    bpe_pc_line *a = pc_alt(memo, l);
    if (a && pc_long_get(a, pc_buddy(memo, a), k, w2, want, st)) return 0;
    size_t before = st->ids.len;
    uint32_t id = len <= m->max_span_len && bpe_seg_may_be_token(m, p, len)
                      ? bpe_span_get_w(m, p, len, k->w0)
                      : BPE_NONE;
    if (id != BPE_NONE) {
        if (bpe_vec_reserve(&st->ids, 1)) return -1;
        st->ids.ids[st->ids.len++] = id;
    } else if (bpe_encode_span_multi(m, memo, p, len, &st->ids))
        return -1;
    size_t nt = st->ids.len - before;
    pc_insert_long(memo, l, b, k, w2, want, gen, st->ids.ids + before, nt);
    return st->ids.cap - st->ids.len >= room ? 1 : bpe_vec_reserve(&st->ids, room) ? -1 : 1;
}

/* a hit in slot 1 of line l: the most recently used to slot 0 */
static inline void pc_hit_slot1(bpe_pc_line *l) {
    bpe_pc_slot hit = l->s[1];
    hit.tag |= PC_HIT;
    l->s[1] = l->s[0];
    l->s[0] = hit;
}

/* One short piece s[pb, pb + len) of base (key computed): the piece cache, else the span table (one
 * token), else the memo and the encoders; a result of <= BPE_PC_MAXLEN tokens goes into the cache.  The
 * caller keeps room for BPE_PC_MAXLEN ids in st->ids (a hit writes up to that many, keeps ntok).
 * Returns 0 on a cache hit, 1 on a miss, -1 when out of memory. */
static inline int piece_emit(const bpe_model *m, bpe_memo *memo, uint32_t gen, const uint8_t *p, size_t len,
                             const piece_key *k, size_t room, enc_state *st) {
    bpe_pc_line *l = pc_line(memo, k->h), *b;
    const uint32_t want = gen | (uint32_t)len;
    uint32_t t0 = l->s[0].tag;
    if (FSTOK_LIKELY(l->s[0].k0 == k->w0 && l->s[0].k1 == k->w1 && (t0 & PC_MATCH) == want)) {
        memcpy(st->ids.ids + st->ids.len, l->wide.ids, sizeof l->wide.ids); /* all: no branch on ntok */
        if (FSTOK_UNLIKELY((t0 & (PC_HIT | PC_DBL)) != PC_HIT)) {
            if (t0 & PC_DBL) { /* 12-16 ids: the rest in the buddy, if it is still there */
                b = pc_buddy(memo, l);
                if (!(b != l && pc_slot_is(&b->s[0], k, want | PC_CONT))) {
                    l->s[0].tag = t0 & ~PC_HIT; /* its second line was taken: let the piece store itself again */
                    goto miss;
                }
                memcpy(st->ids.ids + st->ids.len + BPE_PC_MAXTOK, b->wide.ids,
                       (BPE_PC_MAXLEN - BPE_PC_MAXTOK) * sizeof(uint32_t));
                b->s[0].tag |= PC_HIT;
            }
            l->s[0].tag = t0 | PC_HIT;
        }
        st->ids.len += PC_NTOK(t0);
        return 0;
    }
    if (PC_NTOK(t0) <= BPE_PC_SLOTTOK && pc_slot_is(&l->s[1], k, want)) {
        memcpy(st->ids.ids + st->ids.len, l->s[1].ids, sizeof l->s[1].ids);
        st->ids.len += PC_NTOK(l->s[1].tag);
        pc_hit_slot1(l);
        return 0;
    }
    b = pc_buddy(memo, l);
    if (b != l) {
        uint32_t tb = b->s[0].tag;
        int w = pc_slot_is(&b->s[0], k, want) && PC_NTOK(tb) <= BPE_PC_MAXTOK ? 0
                : PC_NTOK(tb) <= BPE_PC_SLOTTOK && pc_slot_is(&b->s[1], k, want) ? 1 : -1;
        if (w >= 0) { /* a hit in the buddy */
            const uint32_t tag = b->s[w].tag, *ids = w ? b->s[1].ids : b->wide.ids;
            size_t nt = PC_NTOK(tag);
            memcpy(st->ids.ids + st->ids.len, ids, nt * sizeof(uint32_t));
            st->ids.len += nt;
            if (pc_free(l, gen, nt) || !pc_protected(l, gen, nt)) {
                /* its own line can take it now (it was full when the piece was stored): move it there, so that
                 * its next hits take the fast path */
                pc_store(l, k, tag | PC_HIT, ids, nt);
                if (w == 1) b->s[1].tag = 0;
                else if (nt <= BPE_PC_SLOTTOK) {
                    b->s[0] = b->s[1];
                    b->s[1].tag = 0;
                } else
                    b->s[0].tag = 0;
            } else {
                /* its own line holds entries hit since they were last aged: age them now, so that entries no
                 * longer in use (another text's) give the line back on this piece's next hit */
                pc_age(l);
                if (w == 1) pc_hit_slot1(b);
                else if (!(tb & PC_HIT)) b->s[0].tag = tb | PC_HIT;
            }
            return 0;
        }
    }
miss:;
    b = pc_buddy(memo, l);
    size_t before = st->ids.len;
    uint32_t id = len <= m->max_span_len && bpe_seg_may_be_token(m, p, len) ? bpe_span_probe(m, m->span_tab, m->span_mask, k->h, k->w0, p, len) : BPE_NONE;
    if (id != BPE_NONE)
        st->ids.ids[st->ids.len++] = id;
    else if (bpe_encode_span_multi(m, memo, p, len, &st->ids))
        return -1;
    size_t nt = st->ids.len - before;
    if (nt <= BPE_PC_MAXLEN) pc_insert(l, b, k, want, gen, st->ids.ids + before, nt);
    return st->ids.cap - st->ids.len >= room ? 1 : bpe_vec_reserve(&st->ids, room) ? -1 : 1;
}

/* ---- direct runs (random text; docs/bpe.md, stop 15)
 * On random text the piece cache costs more than it saves: most pieces are new (a line from L3 or memory, then the
 * miss path), and a cached piece costs a line that is rarely in L1/L2.  But random text is cut by dead boundaries
 * (bpe_seg_cross) into segments of one to three bytes, which encode without a merge search (lib_bpe.c seg_emit).  A
 * direct run takes a run of consecutive pieces (<= DIRECT_MAX bytes in all) at once: the boundary flags of all its
 * positions (AVX-512 or AVX2 gathers, else a branch-free loop), the dead boundaries as bit masks, then one loop over
 * the segments, across piece ends (BPE of a piece is BPE of its segments; a piece end ends a segment).  Segments of
 * >= 4 bytes are encoded as pre-tokens of their own (bpe_encode_span_avail: the same ids). */
#define DIRECT_MAX 2048  /* bytes of a run */
#define DIRECT_CHUNK 2048 /* pieces (and bytes) of a direct batch's find_ends window */
/* pieces of the first direct batch after a non-direct one, doubled while direct batches go on (up to DIRECT_CHUNK).
 * Why not DIRECT_CHUNK at once (stop 18): a direct batch does not fill the piece cache, so when a batch of natural
 * text that was new to the cache started one (multilingual text on its first passes), its ~2,000 pieces missed
 * again on the next call, which started a direct batch again: o200k multilingual.txt needed ~8 calls instead of 4
 * to reach its steady speed.  A probe of 256 pieces ends after an eighth of that (its exit tests need no more);
 * random text loses nothing
 * (`python tools/ab_bpe.py o200k_base,cl100k_base,r50k_base rand,rot,eng1,multilingual,coldml,coldeng 3 A B`). */
#define DIRECT_PROBE 256
#define DIRECT_KEEP 4    /* a direct batch with <= 1 dead boundary in DIRECT_KEEP pieces ends direct batches */
#define DIRECT_HOLD 16   /* batches without a direct one after that (doubled after each stop, up to 64x) */
#define DIRECT_LONG 32   /* so does more than 1 byte in DIRECT_LONG in segments of >= 4 bytes, over the last direct
                            batches (DIRECT_SLACK bytes of slack): random text 0-1.4%, multilingual 10-66% */
#define DIRECT_SLACK 1024
#define DIRECT_WORDS (DIRECT_MAX / 64 + 2)


/* flags of positions x in [x0, x1) of a run at base + r0 (position x: the boundary between base[r0 + x - 1] and
 * base[r0 + x]): bit x of IN/ST/EN (BPE_SEG_* of the bigram), TR (the trigram base[r0 + x - 2 .. r0 + x] is in the
 * filter; x >= 2), and pv[x] = the bigram's byte pair id (0xFFFFFF: none).  Scalar version. */
/* the bigram flags of position x into bit x & 63 of in/stt/en, and pv[x] (no branch: see dir_flags_scalar) */
static inline void dir_flag_bigram(const uint32_t *sbp, const uint8_t *p, size_t x, uint64_t *in, uint64_t *stt,
                                   uint64_t *en, uint32_t *pv) {
    uint32_t v = sbp[(uint32_t)p[x - 1] << 8 | p[x]];
    uint64_t f = v >> 24, sh = x & 63;
    pv[x] = v & 0xFFFFFFu;
    *in |= (f & BPE_SEG_IN ? 1ull : 0) << sh;
    *stt |= (f & BPE_SEG_START ? 1ull : 0) << sh;
    *en |= (f & BPE_SEG_END ? 1ull : 0) << sh;
}

static void dir_flags_scalar(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p, size_t x0, size_t x1,
                             uint64_t *IN, uint64_t *ST, uint64_t *EN, uint64_t *TR, uint32_t *pv) {
    /* branch-free: on random text every flag is a coin toss, and three branches per byte mispredicted about as often
     * as they were taken (AMD Zen 3: direct_run 49% of o200k random; the flags loop most of it) */
    for (size_t x = x0; x < x1;) {
        size_t w = x >> 6, xe = (w + 1) * 64 < x1 ? (w + 1) * 64 : x1;
        uint64_t in = 0, stt = 0, en = 0, tr = 0;
        if (x < 2) dir_flag_bigram(sbp, p, x++, &in, &stt, &en, pv); /* position 1: no trigram */
        for (; x < xe; x++) {
            dir_flag_bigram(sbp, p, x, &in, &stt, &en, pv);
            uint32_t t = dir_tri_bit((uint32_t)p[x - 2] << 16 | (uint32_t)p[x - 1] << 8 | p[x]);
            tr |= (uint64_t)((tri[t >> 5] >> (t & 31)) & 1) << (x & 63);
        }
        IN[w] |= in;
        ST[w] |= stt;
        EN[w] |= en;
        TR[w] |= tr;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DIR_HAVE_AVX512 1
/* the same, 16 positions at a time with two gathers (x0 >= 1; p[x0 - 2] is read only where x0 >= 2) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
dir_flags_avx512(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p, size_t x0, size_t x1, uint64_t *IN,
                 uint64_t *ST, uint64_t *EN, uint64_t *TR, uint32_t *pv) {
    const __m512i ff = _mm512_set1_epi32(0xFFFF), low24 = _mm512_set1_epi32(0xFFFFFF), one = _mm512_set1_epi32(1);
    const __m512i fin = _mm512_set1_epi32(BPE_SEG_IN << 24), fst = _mm512_set1_epi32(BPE_SEG_START << 24),
                  fen = _mm512_set1_epi32(BPE_SEG_END << 24), mul = _mm512_set1_epi32((int)0x9E3779B1u);
    for (size_t x = x0; x < x1; x += 16) {
        size_t cnt = x1 - x < 16 ? x1 - x : 16;
        __mmask16 lm = (__mmask16)((1u << cnt) - 1);
        __mmask16 tm = lm & (__mmask16)(x >= 2 ? 0xFFFFu : 0xFFFFu << (2 - x)); /* lanes with x >= 2 */
        __m512i b2 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lm, p + x));
        __m512i b1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lm, p + x - 1));
        /* p[x - 2 + l] for lanes l with x + l >= 2: a load from p + x - 2 would start before the run when x < 2 */
        __m512i b0 = x >= 2 ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lm, p + x - 2))
                            : _mm512_alignr_epi32(b1, _mm512_setzero_si512(), 15);
        __m512i big = _mm512_or_si512(_mm512_slli_epi32(b1, 8), b2);
        __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lm, _mm512_and_si512(big, ff), sbp, 4);
        _mm512_mask_storeu_epi32(pv + x, lm, _mm512_and_si512(v, low24));
        __m512i k3 = _mm512_or_si512(_mm512_slli_epi32(b0, 16), big);
        __m512i h = _mm512_srli_epi32(_mm512_mullo_epi32(k3, mul), 32 - DIR_TRI_BITS);
        __m512i tw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), tm, _mm512_srli_epi32(h, 5), tri, 4);
        __m512i tb = _mm512_srlv_epi32(tw, _mm512_and_si512(h, _mm512_set1_epi32(31)));
        uint64_t sh = x & 63; /* 16 | x ... not assumed: positions x..x+15 may straddle a word */
        uint64_t in = _mm512_mask_test_epi32_mask(lm, v, fin), stt = _mm512_mask_test_epi32_mask(lm, v, fst),
                 en = _mm512_mask_test_epi32_mask(lm, v, fen), tr = _mm512_mask_test_epi32_mask(tm, tb, one);
        size_t w = x >> 6;
        IN[w] |= in << sh;
        ST[w] |= stt << sh;
        EN[w] |= en << sh;
        TR[w] |= tr << sh;
        if (sh > 48) {
            IN[w + 1] |= in >> (64 - sh);
            ST[w + 1] |= stt >> (64 - sh);
            EN[w + 1] |= en >> (64 - sh);
            TR[w + 1] |= tr >> (64 - sh);
        }
    }
}
static int dir_avx512 = -1; /* $FSTOK_BPE_NO_AVX512=1: the AVX2 or scalar flags (tests: all three) */

/* the same on AVX2, 8 positions at a time (two gathers; x >= 2 here, and every byte read is inside the run) */
__attribute__((target("avx2"))) static void dir_flags_avx2(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p,
                                                           size_t x0, size_t x1, uint64_t *IN, uint64_t *ST,
                                                           uint64_t *EN, uint64_t *TR, uint32_t *pv) {
    size_t x = x0;
    if (x < 2) { /* position 1 has no trigram */
        size_t e = x1 < 2 ? x1 : 2;
        dir_flags_scalar(sbp, tri, p, x, e, IN, ST, EN, TR, pv);
        x = e;
    }
    const __m256i low24 = _mm256_set1_epi32(0xFFFFFF), mul = _mm256_set1_epi32((int)0x9E3779B1u),
                  m31 = _mm256_set1_epi32(31);
    for (; x + 8 <= x1; x += 8) {
        __m256i b2 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + x)));
        __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + x - 1)));
        __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + x - 2)));
        __m256i big = _mm256_or_si256(_mm256_slli_epi32(b1, 8), b2);
        __m256i v = _mm256_i32gather_epi32((const int *)sbp, big, 4);
        _mm256_storeu_si256((__m256i *)(pv + x), _mm256_and_si256(v, low24));
        __m256i h = _mm256_srli_epi32(_mm256_mullo_epi32(_mm256_or_si256(_mm256_slli_epi32(b0, 16), big), mul),
                                      32 - DIR_TRI_BITS);
        __m256i tw = _mm256_i32gather_epi32((const int *)tri, _mm256_srli_epi32(h, 5), 4);
        __m256i tb = _mm256_srlv_epi32(tw, _mm256_and_si256(h, m31));
        /* the flag bits (24: IN, 25: START, 26: END; the trigram's bit 0) moved to the sign bit of each lane */
        uint64_t in = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 31 - 24)));
        uint64_t stt = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 31 - 25)));
        uint64_t en = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 31 - 26)));
        uint64_t tr = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(tb, 31)));
        size_t w = x >> 6, sh = x & 63;
        IN[w] |= in << sh;
        ST[w] |= stt << sh;
        EN[w] |= en << sh;
        TR[w] |= tr << sh;
        if (sh > 56) { /* positions x..x+7 straddle a word */
            IN[w + 1] |= in >> (64 - sh);
            ST[w + 1] |= stt >> (64 - sh);
            EN[w + 1] |= en >> (64 - sh);
            TR[w + 1] |= tr >> (64 - sh);
        }
    }
    if (x < x1) dir_flags_scalar(sbp, tri, p, x, x1, IN, ST, EN, TR, pv);
}
static int dir_avx2 = -1; /* $FSTOK_BPE_NO_AVX2=1: the scalar flags (tests: all three) */
#endif

static inline void dir_flags(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p, size_t x0, size_t x1,
                             uint64_t *IN, uint64_t *ST, uint64_t *EN, uint64_t *TR, uint32_t *pv) {
#ifdef DIR_HAVE_AVX512
    int v = __atomic_load_n(&dir_avx512, __ATOMIC_ACQUIRE);
    if (v < 0) { /* (racing threads store the same values; dir_avx2 first) */
        const char *e = getenv("FSTOK_BPE_NO_AVX512"), *e2 = getenv("FSTOK_BPE_NO_AVX2");
        __builtin_cpu_init();
        v = !(e && e[0] == '1') && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl");
        __atomic_store_n(&dir_avx2, !(e2 && e2[0] == '1') && __builtin_cpu_supports("avx2"), __ATOMIC_RELAXED);
        __atomic_store_n(&dir_avx512, v, __ATOMIC_RELEASE);
    }
    if (v) {
        dir_flags_avx512(sbp, tri, p, x0, x1, IN, ST, EN, TR, pv);
        return;
    }
    if (__atomic_load_n(&dir_avx2, __ATOMIC_RELAXED) > 0) {
        dir_flags_avx2(sbp, tri, p, x0, x1, IN, ST, EN, TR, pv);
        return;
    }
#endif
    dir_flags_scalar(sbp, tri, p, x0, x1, IN, ST, EN, TR, pv);
}

/* One run: pieces back to back from base + r0, piece i ending at pe[i] (offsets from base; np >= 1,
 * pe[np - 1] - r0 <= DIRECT_MAX); `avail`: bytes readable from base + r0.
 * Adds to *cuts the dead boundaries inside pieces.  Needs m->int_is_ext.  0, or -1 when out of memory. */
__attribute__((noinline)) static int direct_run(const ModelObject *self, bpe_memo *memo, const uint8_t *base, size_t r0, const size_t *pe,
                      size_t np, size_t avail, enc_state *st, size_t *cuts, size_t *longb) {
    const bpe_model *m = &self->m;
    const uint8_t *p = base + r0;
    const size_t R = pe[np - 1] - r0;
    const size_t nw = R / 64 + 1; /* words holding positions 0..R */
    uint64_t IN[DIRECT_WORDS + 1], ST[DIRECT_WORDS + 1], EN[DIRECT_WORDS + 1], TR[DIRECT_WORDS + 1],
        PE[DIRECT_WORDS + 1];
    uint32_t pv[DIRECT_MAX + 16];
    memset(IN, 0, (nw + 1) * 8);
    memset(ST, 0, (nw + 1) * 8);
    memset(EN, 0, (nw + 1) * 8);
    memset(TR, 0, (nw + 1) * 8);
    memset(PE, 0, (nw + 1) * 8);
    PE[0] = 1; /* position 0: the run's start */
    for (size_t i = 0; i < np; i++) {
        size_t x = pe[i] - r0;
        PE[x >> 6] |= 1ull << (x & 63);
    }
    if (R > 1) dir_flags(self->seg_bp, self->seg_dir, p, 1, R, IN, ST, EN, TR, pv);
    /* dead or piece end: cut.  live(x) = !PE(x) & IN(x) & (ST(x) | TR(x) & !PE(x-1)) & (EN(x) | TR(x+1) & !PE(x+1)) */
    uint64_t CUT[DIRECT_WORDS + 1];
    size_t ncut = 0;
    for (size_t w = 0; w < nw; w++) {
        uint64_t pe_prev = PE[w] << 1 | (w ? PE[w - 1] >> 63 : 0);
        uint64_t pe_next = PE[w] >> 1 | PE[w + 1] << 63;
        uint64_t tr_next = TR[w] >> 1 | TR[w + 1] << 63;
        uint64_t live = ~PE[w] & IN[w] & (ST[w] | (TR[w] & ~pe_prev)) & (EN[w] | (tr_next & ~pe_next));
        uint64_t valid = w == nw - 1 ? (R & 63) == 63 ? ~0ull : (2ull << (R & 63)) - 1 : ~0ull;
        CUT[w] = ~live & valid;
        ncut += (size_t)__builtin_popcountll(CUT[w] & ~PE[w]);
    }
    CUT[0] &= ~1ull; /* position 0 starts the first segment */
    *cuts += ncut;
    /* the segments: ids <= bytes, and a one-byte segment writes one slot past its id */
    if (st->ids.cap - st->ids.len < R + 16 && bpe_vec_reserve(&st->ids, R + 16)) return -1;
    const uint32_t *bt = m->byte_tok;
    uint32_t *o = st->ids.ids + st->ids.len;
    size_t sa = 0;
    for (size_t w = 0; w < nw; w++) {
        uint64_t bits = CUT[w];
        while (bits) {
            size_t c = w * 64 + (size_t)__builtin_ctzll(bits), len = c - sa;
            bits &= bits - 1;
            if (FSTOK_LIKELY(len <= 2)) {
                uint32_t r = pv[sa + 1], tx = bt[p[sa]], ty = bt[p[c - 1]];
                int two = len == 2, merged = two & (r != 0xFFFFFFu);
                o[0] = merged ? r : tx;
                o[1] = ty;
                o += 1 + (two & !merged);
            } else if (len == 3) { /* lib_bpe.c seg_emit: the lower-ranked byte pair (a tie: the left), then a pair */
                uint32_t x = p[sa], z = p[sa + 2], r01 = pv[sa + 1], r12 = pv[sa + 2];
                if (r01 == 0xFFFFFFu && r12 == 0xFFFFFFu) {
                    o[0] = bt[x];
                    o[1] = bt[p[sa + 1]];
                    o[2] = bt[z];
                    o += 3;
                } else {
                    uint32_t l = r01 <= r12 ? r01 : bt[x], rr = r01 <= r12 ? bt[z] : r12, r = bpe_pair_get(m, l, rr);
                    if (r != BPE_NONE) *o++ = r;
                    else {
                        o[0] = l;
                        o[1] = rr;
                        o += 2;
                    }
                }
            } else { /* a segment of >= 4 bytes: a pre-token of its own */
                *longb += len;
                st->ids.len = (size_t)(o - st->ids.ids);
                if (bpe_encode_span_avail(m, memo, p + sa, len, avail - sa, &st->ids)) return -1;
                o = st->ids.ids + st->ids.len;
            }
            sa = c;
        }
    }
    st->ids.len = (size_t)(o - st->ids.ids);
    return 0;
}

/* pieces: keys are computed and their cache lines prefetched this far ahead.  With the 8 MiB cache a line
 * often comes from L3 or memory: 32 beat 8 by 8-15% (whole english.txt, o200k).  The span table's line is
 * no longer prefetched too: ~95% of pieces hit the cache, and the extra loads only took fill buffers
 * (+3-4% without them). */
#define PC_AHEAD 32

/* The hot loop of whole-text encoding (find-mode patterns such as tiktoken's, pieces back to back):
 * DFA piece ends in chunks (fstok_dfa_find_ends: one transition, one store, one add per byte), then
 * each piece: short ones (<= 16 bytes, ~90% of English or code) through piece_emit, with their keys
 * computed and their cache lines prefetched PC_AHEAD pieces ahead (the loads of consecutive pieces
 * overlap instead of queueing);
 * long ones through bpe_encode_span_avail.  Fusing the two loops (4 DFA bytes, then one piece, so the
 * core could overlap the DFA's chain of dependent loads with the piece work) measured 5-10% slower.
 * Needs a memo and plain id output (no offsets, no planning). */
static int encode_pieces_cached(const ModelObject *self, const uint8_t *s, size_t a, size_t b, enc_state *st) {
    const bpe_model *m = &self->m;
    const fstok_dfa *d = &self->lv[0];
    bpe_memo *memo = st->memo;
    const uint32_t gen = memo->gen << 16;
    const size_t n = b - a;
    const uint8_t *base = s + a;
    const size_t avail_end = st->text_len - a; /* bytes readable from base */
    /* free ids kept before each chunk of pieces and after each miss: a chunk writes at most one id per byte, and a
     * cache hit copies whole entries (up to 2 x BPE_PC_MAXTOK ids past the end).  Bounded by the text's own bytes:
     * a batch of 100k short lines reserved 64 KB each, and touching a new page per line (page faults, zeroing)
     * took most of the first calls' time */
    const size_t room_chunk = PC_LONG_MAXLEN * (SPAN_CHUNK + 2), room_text = n + 2 * BPE_PC_MAXTOK + 8;
    const size_t room = room_text < room_chunk ? room_text : room_chunk;
    size_t ends[DIRECT_CHUNK + 1]; /* (SPAN_CHUNK + 1 used outside direct batches) */
    piece_key keys[PC_AHEAD];
    size_t pos = 0;
    /* piece-cache misses in the last batch of pieces: while more than 1 in 32 miss (a cold cache: a new text or
     * a new language), the span table's line is prefetched with the cache line, because most pieces will
     * probe it (with a warm cache those prefetches only take fill buffers) */
    size_t misses = 0;
    int cold = 0;
    /* direct batches (direct_run): taken after a batch in which more than 1 in 4 pieces missed the cache (random
     * text, or a cold cache), kept while a batch has more than one dead boundary per DIRECT_KEEP pieces and the
     * segments of >= 4 bytes (encoded one by one, without the cache) stay rare (random text).  When that ends
     * (natural text in a cold cache; multilingual text: its words are cut into segments too, but cached pieces
     * cost less), none for DIRECT_HOLD batches */
    int direct = 0, hold = 0, hold_next = DIRECT_HOLD;
    size_t dchunk = DIRECT_PROBE; /* pieces of the next direct batch */
    size_t dbytes = 0, dlong = 0; /* bytes of direct batches, and of their segments of >= 4 bytes */
    const int can_direct = self->seg_dir != NULL && m->int_is_ext; /* (direct runs write internal ids) */
    while (pos < n) {
        size_t from = pos, k = fstok_dfa_find_ends(d, base, n, &pos, ends + 1, direct ? dchunk : SPAN_CHUNK);
        if (k == 0) { /* no match starts at pos: skip to the next one (text no match covers is dropped) */
            size_t mb, me = fstok_dfa_next_span(d, base, n, pos, &mb);
            if (me == FSTOK_DFA_NOMATCH) break;
            if (emit_span(m, s, a + mb, a + me, st)) return -1;
            pos = me;
            continue;
        }
        ends[0] = from; /* piece j is [ends[j], ends[j + 1]) */
        if (st->ids.cap - st->ids.len < room && bpe_vec_reserve(&st->ids, room)) return -1;
        if (direct) {
            size_t cuts = 0;
            for (size_t j = 0; j < k;) {
                size_t j1 = j;
                while (j1 < k && ends[j1 + 1] - ends[j] <= DIRECT_MAX) j1++;
                if (j1 > j) {
                    if (direct_run(self, memo, base, ends[j], ends + j + 1, j1 - j, avail_end - ends[j], st, &cuts, &dlong))
                        return -1;
                } else { /* a piece longer than a run */
                    if (bpe_encode_span_avail(m, memo, base + ends[j], ends[j + 1] - ends[j], avail_end - ends[j],
                                              &st->ids))
                        return -1;
                    j1 = j + 1;
                }
                j = j1;
            }
            if (st->ids.cap - st->ids.len < room && bpe_vec_reserve(&st->ids, room)) return -1;
            dbytes += ends[k] - ends[0];
            if (dbytes >= 65536) { /* (a moving window) */
                dbytes >>= 1;
                dlong >>= 1;
            }
            if (cuts * DIRECT_KEEP <= k || dlong * DIRECT_LONG > dbytes + DIRECT_SLACK) {
                direct = 0;
                hold = hold_next; /* twice as long after each stop, until direct batches last */
                hold_next = hold_next < 64 * DIRECT_HOLD ? 2 * hold_next : hold_next;
                dbytes = dlong = 0;
            } else {
                if (dbytes >= 16384) hold_next = DIRECT_HOLD;
                dchunk = 2 * dchunk < DIRECT_CHUNK ? 2 * dchunk : DIRECT_CHUNK;
            }
            cold = 1;
            count_flush(st);
            continue;
        }
        /* a piece's key is computed PC_AHEAD pieces early; len > 16 or too near the end: none */
#define PC_AHEAD_KEY(jj)                                                                    \
    do {                                                                                    \
        size_t pb_ = ends[jj], len_ = ends[(jj) + 1] - pb_;                                 \
        if (len_ <= BPE_PC_MAXLEN) {                                                        \
            piece_key *k_ = &keys[(jj) % PC_AHEAD];                                         \
            piece_key_of(base + pb_, len_, avail_end - pb_, k_);                            \
            size_t i_ = ((k_->h >> 32) * pc_nlines) >> 32;                                  \
            __builtin_prefetch(memo->pc + i_);                                              \
            if (cold) {                                                                     \
                __builtin_prefetch(memo->pc + (i_ ^ 1)); /* the buddy (even size: in range) */ \
                __builtin_prefetch(m->span_tab + 2 * (k_->h & m->span_mask));               \
            }                                                                               \
        } else if (len_ <= PC_LONG_MAXLEN) {                                                \
            piece_key *k_ = &keys[(jj) % PC_AHEAD];                                         \
            piece_key_long(base + pb_, len_, k_);                                           \
            size_t i_ = ((k_->h >> 32) * pc_nlines) >> 32;                                  \
            __builtin_prefetch(memo->pc + i_);                                              \
            __builtin_prefetch(memo->pc + (i_ ^ 1));                                        \
            __builtin_prefetch(memo->pc + (i_ ^ 2)); /* the second pair (pc_alt) */         \
            __builtin_prefetch(memo->pc + (i_ ^ 3));                                        \
        }                                                                                   \
    } while (0)
        for (size_t j = 0; j < k && j < PC_AHEAD; j++) PC_AHEAD_KEY(j);
        for (size_t j = 0; j < k; j++) {
            size_t pb = ends[j], len = ends[j + 1] - pb;
            int rc;
            if (FSTOK_LIKELY(len <= BPE_PC_MAXLEN)) {
                piece_key key = keys[j % PC_AHEAD];
                if (j + PC_AHEAD < k) PC_AHEAD_KEY(j + PC_AHEAD);
                rc = piece_emit(m, memo, gen, base + pb, len, &key, room, st);
                if (FSTOK_UNLIKELY(rc)) {
                    if (rc < 0) return -1;
                    misses++;
                    rc = 0;
                }
            } else if (len <= PC_LONG_MAXLEN) {
                piece_key key = keys[j % PC_AHEAD];
                if (j + PC_AHEAD < k) PC_AHEAD_KEY(j + PC_AHEAD);
                rc = piece_emit_long(m, memo, gen, base + pb, len, &key, piece_w2(base + pb, len, avail_end - pb), room, st);
                if (rc > 0) {
                    misses++;
                    rc = 0;
                }
            } else {
                if (j + PC_AHEAD < k) PC_AHEAD_KEY(j + PC_AHEAD);
                rc = bpe_encode_span_avail(m, memo, base + pb, len, avail_end - pb, &st->ids);
                if (!rc && st->ids.cap - st->ids.len < room) rc = bpe_vec_reserve(&st->ids, room);
            }
            if (rc) return -1;
        }
#undef PC_AHEAD_KEY
        cold = 32 * misses > k;
        if (hold) hold--;
        else if ((direct = can_direct && 4 * misses > k)) dchunk = DIRECT_PROBE;
        misses = 0;
        count_flush(st);
    }
    return 0;
}

/* pre-tokenize s[a:b) as a text of its own and BPE every piece (offsets absolute in s) */
static int encode_segment(const ModelObject *self, const uint8_t *s, size_t a, size_t b, enc_state *st) {
    const bpe_model *m = &self->m;
    if (a >= b) return 0;
    if (self->pt_mode == 0 && st->memo && !st->want_starts && !st->plan) return encode_pieces_cached(self, s, a, b, st);
    if (self->pt_mode == 0) {
        size_t buf[2 * SPAN_CHUNK];
        size_t pos = 0, n = b - a;
        const uint8_t *base = s + a;
        while (pos < n) {
            size_t k = fstok_dfa_find_all(&self->lv[0], base, n, &pos, buf, SPAN_CHUNK);
            for (size_t j = 0; j < k && j < PREFETCH_AHEAD; j++)
                bpe_span_prefetch(m, base + buf[2 * j], buf[2 * j + 1] - buf[2 * j]);
            for (size_t j = 0; j < k; j++) {
                if (j + PREFETCH_AHEAD < k)
                    bpe_span_prefetch(m, base + buf[2 * (j + PREFETCH_AHEAD)],
                                      buf[2 * (j + PREFETCH_AHEAD) + 1] - buf[2 * (j + PREFETCH_AHEAD)]);
                if (emit_span(m, s, a + buf[2 * j], a + buf[2 * j + 1], st)) return -1;
            }
            count_flush(st);
        }
        return 0;
    }
    st->elen = 0;
    if (fstok_dfa_split_isolated(self->lv, self->n_levels, s + a, b - a, &st->ends, &st->elen, &st->ecap)) return -1;
    size_t prev = 0;
    for (size_t j = 0; j < st->elen; j++) {
        if (j + PREFETCH_AHEAD < st->elen) {
            size_t b0 = st->ends[j + PREFETCH_AHEAD - 1], b1 = st->ends[j + PREFETCH_AHEAD];
            bpe_span_prefetch(m, s + a + b0, b1 - b0);
        }
        if (emit_span(m, s, a + prev, a + st->ends[j], st)) return -1;
        prev = st->ends[j];
        if ((j & 1023) == 1023) count_flush(st);
    }
    count_flush(st);
    return 0;
}

static int emit_literal(uint32_t id, size_t at, enc_state *st) {
    if (st->plan) return plan_push(st->plan, at, at, id);
    if (bpe_vec_reserve(&st->ids, 1)) return -1;
    st->ids.ids[st->ids.len++] = id;
    if (st->want_starts) {
        if (bpe_vec_reserve(&st->starts, 1)) return -1;
        st->starts.ids[st->starts.len++] = (uint32_t)at;
    }
    return 0;
}

/* split s[a:b) at the leftmost-longest matches of sp2 (second pass of HF's added vocabulary) */
static int encode_gap(const ModelObject *self, const SpecialsObject *sp2, const uint8_t *s, size_t a, size_t b,
                      enc_state *st) {
    size_t pos = a;
    while (pos < b) {
        size_t len = 0;
        uint32_t id = BPE_NONE;
        size_t at = sp2 ? specials_find(sp2, s, b, pos, &len, &id) : b;
        if (encode_segment(self, s, pos, at, st)) return -1;
        if (at >= b) break;
        if (emit_literal(id, at, st)) return -1;
        pos = at + len;
    }
    return 0;
}

/* tiktoken `encode`: segments between allowed special tokens are pre-tokenized separately.
 * sp2 (HF models): tokens searched in those segments afterwards, as HF's normalized added tokens. */
static int encode_text(const ModelObject *self, const SpecialsObject *sp, const SpecialsObject *sp2, const uint8_t *s,
                       size_t n, enc_state *st) {
    st->text_len = n;
    /* count mode keeps at most ~4.6k ids between flushes; a short text needs no more than its list would */
    size_t want = n / 4 + 16;
    if (st->count_only && want > 4096 + 512) want = 4096 + 512;
    if (!st->plan && bpe_vec_reserve(&st->ids, want)) return -1;
    size_t pos = 0;
    while (pos < n) {
        size_t len = 0;
        uint32_t id = BPE_NONE;
        size_t at = specials_find(sp, s, n, pos, &len, &id);
        if (encode_gap(self, sp2, s, pos, at, st)) return -1;
        if (at >= n) break;
        if (emit_literal(id, at, st)) return -1;
        pos = at + len;
    }
    return 0;
}

static int get_specials(PyObject *o, const SpecialsObject **out) {
    *out = NULL;
    if (o == Py_None) return 0;
    if (!PyObject_TypeCheck(o, &SpecialsType)) {
        PyErr_SetString(PyExc_TypeError, "specials must be a Specials object or None");
        return -1;
    }
    *out = (const SpecialsObject *)o;
    return 0;
}

/* --- one long text on several threads: pre-tokenize sequentially (the DFA is the cheap part), then
 * BPE contiguous runs of pieces on each thread and concatenate: exactly the one-thread result. */
typedef struct {
    const ModelObject *self;
    const uint8_t *s;
    const uint32_t *plan; /* triples */
    size_t lo, hi;        /* triple index range */
    enc_state st;
    int rc;
} par_part;

static void *par_worker(void *arg) {
    par_part *p = (par_part *)arg;
    const bpe_model *m = &p->self->m;
    /* the state lives on this thread's stack while it is written: the parts sit side by side in one
     * array, and per-token writes to a shared cache line (false sharing) cost more than the BPE */
    enc_state st = p->st;
    int rc = 0;
    st.memo = memo_borrow((ModelObject *)p->self);
    if (bpe_vec_reserve(&st.ids, (p->hi - p->lo) + 16)) rc = -1;
    for (size_t i = p->lo; i < p->hi && !rc; i++) {
        uint32_t a = p->plan[3 * i], b = p->plan[3 * i + 1], lit = p->plan[3 * i + 2];
        rc = lit != BPE_NONE ? emit_literal(lit, a, &st) : emit_span(m, p->s, a, b, &st);
        if ((i & 1023) == 1023) count_flush(&st);
    }
    memo_return((ModelObject *)p->self, st.memo);
    st.memo = NULL;
    p->st = st;
    p->rc = rc;
    return NULL;
}

static int encode_text_parallel(const ModelObject *self, const SpecialsObject *sp, const SpecialsObject *sp2,
                                const uint8_t *s, size_t n, enc_state *st, int nthreads) {
    bpe_vec plan = {0};
    enc_state ps = {0};
    ps.plan = &plan;
    ps.text_len = n;
    int rc = bpe_vec_reserve(&plan, 3 * (n / 4 + 16)) || encode_text(self, sp, sp2, s, n, &ps);
    free(ps.ends);
    if (rc) {
        free(plan.ids);
        return -1;
    }
    size_t k = plan.len / 3;
    if (nthreads > 64) nthreads = 64;
    par_part parts[64];
    memset(parts, 0, sizeof parts);
    /* balance by bytes */
    size_t per = n / (size_t)nthreads + 1, lo = 0;
    int np = 0;
    for (int t = 0; t < nthreads && lo < k; t++) {
        size_t hi = lo, target = (size_t)(t + 1) * per;
        if (t == nthreads - 1) hi = k;
        else
            while (hi < k && plan.ids[3 * hi + 1] < target) hi++;
        if (hi == lo) continue;
        parts[np].self = self;
        parts[np].s = s;
        parts[np].plan = plan.ids;
        parts[np].lo = lo;
        parts[np].hi = hi;
        parts[np].st.text_len = n;
        parts[np].st.want_starts = st->want_starts;
        parts[np].st.count_only = st->count_only;
        np++;
        lo = hi;
    }
    pthread_t th[64];
    int started[64] = {0};
    for (int t = 1; t < np; t++) started[t] = pthread_create(&th[t], NULL, par_worker, &parts[t]) == 0;
    if (np) par_worker(&parts[0]);
    for (int t = 1; t < np; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else par_worker(&parts[t]);
    }
    free(plan.ids);
    size_t total = 0, totst = 0;
    for (int t = 0; t < np; t++) {
        if (parts[t].rc) rc = -1;
        total += parts[t].st.ids.len;
        totst += parts[t].st.starts.len;
        st->count += parts[t].st.count;
    }
    if (!rc && !st->count_only) rc = bpe_vec_reserve(&st->ids, total);
    if (!rc && st->want_starts) rc = bpe_vec_reserve(&st->starts, totst);
    for (int t = 0; t < np; t++) {
        if (!rc) {
            if (st->count_only) st->count += parts[t].st.ids.len;
            else {
                memcpy(st->ids.ids + st->ids.len, parts[t].st.ids.ids, parts[t].st.ids.len * 4);
                st->ids.len += parts[t].st.ids.len;
            }
            if (st->want_starts) {
                memcpy(st->starts.ids + st->starts.len, parts[t].st.starts.ids, parts[t].st.starts.len * 4);
                st->starts.len += parts[t].st.starts.len;
            }
        }
        enc_free(&parts[t].st);
    }
    return rc;
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
static PyObject *Model_encode(ModelObject *self, PyObject *args) {
    PyObject *text, *spo, *sp2o = Py_None;
    int kind = OUT_LIST, nthreads = 1;
    if (!PyArg_ParseTuple(args, "OO|iOi", &text, &spo, &kind, &sp2o, &nthreads)) return NULL;
    if (self->pt_mode < 0) {
        PyErr_SetString(PyExc_RuntimeError, "this model has no compiled pre-tokenizer");
        return NULL;
    }
    const SpecialsObject *sp, *sp2;
    if (get_specials(spo, &sp) || get_specials(sp2o, &sp2)) return NULL;
    const uint8_t *s;
    Py_ssize_t n;
    Py_buffer view = {0};
    if (PyUnicode_Check(text)) {
        s = (const uint8_t *)PyUnicode_AsUTF8AndSize(text, &n);
        if (!s) return NULL;
    } else {
        if (PyObject_GetBuffer(text, &view, PyBUF_SIMPLE) < 0) return NULL;
        s = (const uint8_t *)view.buf;
        n = view.len;
    }
    if ((uint64_t)n >= 0xFFFFFFF0ull) {
        if (view.obj) PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "text longer than 4 GiB");
        return NULL;
    }
    enc_state st = {0};
    st.want_starts = kind == OUT_OFFSETS;
    st.count_only = kind == OUT_COUNT;
    int rc;
    Py_INCREF(spo);
    Py_INCREF(sp2o);
    enc_attach_memo(self, &st);
    if (nthreads > 1 && (size_t)n >= PARALLEL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        rc = encode_text_parallel(self, sp, sp2, s, (size_t)n, &st, nthreads);
        Py_END_ALLOW_THREADS
    } else if (n >= NOGIL_MIN) {
        Py_BEGIN_ALLOW_THREADS
        rc = encode_text(self, sp, sp2, s, (size_t)n, &st);
        Py_END_ALLOW_THREADS
    } else {
        rc = encode_text(self, sp, sp2, s, (size_t)n, &st);
    }
    Py_DECREF(spo);
    Py_DECREF(sp2o);
    if (view.obj) PyBuffer_Release(&view);
    memo_return(self, st.memo);
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
    int bad = self->pt_mode < 0 || n >= 0xFFFFFFF0ull;
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
    enc_attach_memo(self, &st);
    st.text_len = n;
    Py_BEGIN_ALLOW_THREADS
    rc = bpe_vec_reserve(&st.ids, n / 4 + 16);
    for (size_t i = 0; i < k && !rc; i++) {
        if (sg[3 * i + 2] != BPE_NONE) rc = emit_literal(sg[3 * i + 2], sg[3 * i], &st);
        else rc = encode_segment(self, s, sg[3 * i], sg[3 * i + 1], &st);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&data);
    PyBuffer_Release(&segs);
    memo_return(self, st.memo);
    st.memo = NULL;
    if (rc) {
        enc_free(&st);
        return PyErr_NoMemory();
    }
    return enc_result(self, &st, kind);
}

/* --- batches on pthreads */
typedef struct {
    const ModelObject *self;
    const SpecialsObject *sp, *sp2;
    const uint8_t **s;
    size_t *n;
    enc_state *st;
    int *rc;
    size_t count;
    /* texts are claimed in blocks [bstart[b], bstart[b+1]): a batch of short lines paid a mutex round per
     * line; a block holds <= 64 texts and about 1/32 of a thread's share of the bytes, a long text one of its own */
    const size_t *bstart;
    size_t nblocks;
    atomic_size_t next;
    int kind;
    uint8_t *done; /* per text, set when its state is final (the overlapped list path), or NULL */
} batch_job;

/* encode the texts of block b; with `done`, each text's flag is set (release) once its state is written */
static void batch_block(batch_job *j, size_t b, bpe_memo *memo) {
    for (size_t i = j->bstart[b]; i < j->bstart[b + 1]; i++) {
        if (j->s[i]) {
            /* encode into a state on this stack (neighbouring st[] entries share cache lines) */
            enc_state local = j->st[i];
            local.count_only = j->kind == OUT_COUNT;
            local.memo = memo;
            j->rc[i] = encode_text(j->self, j->sp, j->sp2, j->s[i], j->n[i], &local);
            local.memo = NULL;
            if (local.count_only) { /* only the number is kept: a batch of 100k lines held 3 GB of id buffers */
                local.count += local.ids.len;
                local.ids.len = 0;
                free(local.ids.ids);
                local.ids.ids = NULL;
                local.ids.cap = 0;
            }
            j->st[i] = local;
        }
        if (j->done) __atomic_store_n(&j->done[i], 1, __ATOMIC_RELEASE);
    }
}

static void *batch_worker(void *arg) {
    batch_job *j = (batch_job *)arg;
    bpe_memo *memo = memo_borrow((ModelObject *)j->self);
    for (;;) {
        size_t b = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (b >= j->nblocks) break;
        batch_block(j, b, memo);
    }
    memo_return((ModelObject *)j->self, memo);
    return NULL;
}

/* The result list of a threaded list batch, built by the calling thread while the workers run: text i's list
 * is made as soon as its flag is set, and its ids freed at once.  Why: for a batch of short lines, making the
 * Python lists (and the collections they trigger) costs more than encoding them, and after the workers it ran
 * alone, so 2 threads were no faster than 1.  While text i is not done the caller encodes a block itself
 * (GIL released) or yields.  Returns the list, or NULL with an exception (the workers are still joined by the
 * caller of this function, which waits for every block). */
static PyObject *batch_lists_overlapped(ModelObject *self, batch_job *j) {
    size_t count = j->count;
    PyObject *res = PyList_New((Py_ssize_t)count);
    if (!res) return NULL;
    bpe_memo *memo = NULL;
    /* 10^5 result lists would start the cyclic GC over and over (full passes as the result grows); they cannot
     * form cycles, so it is paused while they are made, as in mod_wordpiece.c (one pass afterwards) */
#if PY_VERSION_HEX >= 0x030A0000
    int gc_was = PyGC_Disable();
#endif
    for (size_t i = 0; i < count; i++) {
        while (!__atomic_load_n(&j->done[i], __ATOMIC_ACQUIRE)) {
            size_t b = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
            Py_BEGIN_ALLOW_THREADS
            if (b < j->nblocks) {
                if (!memo) memo = memo_borrow(self);
                batch_block(j, b, memo);
            } else {
                sched_yield();
            }
            Py_END_ALLOW_THREADS
        }
        PyObject *o;
        if (!j->s[i]) {
            o = Py_None;
            Py_INCREF(o);
        } else if (j->rc[i]) {
            o = PyErr_NoMemory();
        } else {
            o = ids_to_list(self, j->st[i].ids.ids, j->st[i].ids.len);
            enc_free(&j->st[i]);
        }
        if (!o) {
            Py_CLEAR(res);
            break;
        }
        PyList_SET_ITEM(res, (Py_ssize_t)i, o);
    }
#if PY_VERSION_HEX >= 0x030A0000
    if (gc_was) PyGC_Enable();
#endif
    if (memo) memo_return(self, memo);
    return res;
}

/* encode_batch(texts: list[str], specials, num_threads, kind) -> list (None where the text has lone
 * surrogates: the caller repairs those) */
static PyObject *Model_encode_batch(ModelObject *self, PyObject *args) {
    PyObject *seq, *spo, *sp2o = Py_None;
    int nthreads = 1, kind = OUT_LIST;
    if (!PyArg_ParseTuple(args, "OOi|iO", &seq, &spo, &nthreads, &kind, &sp2o)) return NULL;
    if (self->pt_mode < 0) {
        PyErr_SetString(PyExc_RuntimeError, "this model has no compiled pre-tokenizer");
        return NULL;
    }
    if (kind != OUT_LIST && kind != OUT_COUNT) {
        PyErr_SetString(PyExc_ValueError, "encode_batch kind must be list or count");
        return NULL;
    }
    const SpecialsObject *sp, *sp2;
    if (get_specials(spo, &sp) || get_specials(sp2o, &sp2)) return NULL;
    /* a list is copied: its texts' UTF-8 is read with the GIL released, and another thread could meanwhile
     * remove (and free) an item of the caller's list */
    PyObject *fast = PyList_Check(seq) ? PyList_GetSlice(seq, 0, PY_SSIZE_T_MAX)
                                       : PySequence_Fast(seq, "encode_batch expects a sequence of str");
    if (!fast) return NULL;
    size_t count = (size_t)PySequence_Fast_GET_SIZE(fast);
    PyObject **items = PySequence_Fast_ITEMS(fast);
    const uint8_t **s = (const uint8_t **)calloc(count + 1, sizeof(*s));
    size_t *n = (size_t *)calloc(count + 1, sizeof(*n));
    enc_state *st = (enc_state *)calloc(count + 1, sizeof(*st));
    int *rc = (int *)calloc(count + 1, sizeof(int));
    size_t *bstart = (size_t *)calloc(count + 1, sizeof(size_t));
    PyObject *res = NULL;
    size_t total = 0;
    if (!s || !n || !st || !rc || !bstart) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        if (!PyUnicode_Check(items[i])) {
            PyErr_Format(PyExc_TypeError, "texts must be str, got %.80s", Py_TYPE(items[i])->tp_name);
            goto done;
        }
        Py_ssize_t len;
        s[i] = (const uint8_t *)PyUnicode_AsUTF8AndSize(items[i], &len);
        if (!s[i]) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) goto done;
            PyErr_Clear();
            continue;
        }
        if ((uint64_t)len >= 0xFFFFFFF0ull) {
            PyErr_SetString(PyExc_ValueError, "text longer than 4 GiB");
            goto done;
        }
        n[i] = (size_t)len;
        total += n[i];
    }
    {
        batch_job job = {self, sp, sp2, s, n, st, rc, count, bstart, 0};
        job.kind = kind;
        if (nthreads < 1) nthreads = 1;
        if ((size_t)nthreads > count) nthreads = (int)(count ? count : 1);
        if (nthreads > 256) nthreads = 256;
        /* ~32 claims per thread keep the threads' last blocks ending close together */
        size_t cap = total / ((size_t)nthreads * 32), nb = 0, bytes = 0;
        for (size_t i = 0; i < count; i++) {
            if (i == 0 || i - bstart[nb - 1] >= 64 || bytes + n[i] > cap) {
                bstart[nb++] = i;
                bytes = 0;
            }
            bytes += n[i];
        }
        bstart[nb] = count;
        job.nblocks = nb;
        atomic_init(&job.next, 0);
        if (kind == OUT_LIST && nthreads > 1 && total >= NOGIL_MIN) {
            job.done = (uint8_t *)calloc(count, 1);
            if (!job.done) {
                PyErr_NoMemory();
                goto done;
            }
            pthread_t th[256];
            int started = 0;
            for (int k = 1; k < nthreads; k++)
                if (pthread_create(&th[started], NULL, batch_worker, &job) == 0) started++;
            res = batch_lists_overlapped(self, &job);
            if (!res) {
                /* stop handing out blocks; the workers finish the ones they hold */
                atomic_store_explicit(&job.next, job.nblocks, memory_order_relaxed);
            }
            Py_BEGIN_ALLOW_THREADS
            for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
            Py_END_ALLOW_THREADS
            free(job.done);
            goto done;
        }
        if (nthreads == 1 && total < NOGIL_MIN) {
            batch_worker(&job);
        } else {
            Py_BEGIN_ALLOW_THREADS
            pthread_t th[256];
            int started = 0;
            for (int k = 1; k < nthreads; k++)
                if (pthread_create(&th[started], NULL, batch_worker, &job) == 0) started++;
            batch_worker(&job);
            for (int k = 0; k < started; k++) pthread_join(th[k], NULL);
            Py_END_ALLOW_THREADS
        }
    }
    res = PyList_New((Py_ssize_t)count);
    if (!res) goto done;
    {
#if PY_VERSION_HEX >= 0x030A0000
        int gc_was = PyGC_Disable(); /* as in batch_lists_overlapped */
#endif
        for (size_t i = 0; i < count; i++) {
            PyObject *o;
            if (!s[i]) {
                o = Py_None;
                Py_INCREF(o);
            } else if (rc[i]) {
                o = PyErr_NoMemory();
            } else if (kind == OUT_COUNT) {
                o = PyLong_FromSize_t(st[i].count + st[i].ids.len);
            } else {
                o = ids_to_list(self, st[i].ids.ids, st[i].ids.len);
            }
            if (!o) {
                Py_CLEAR(res);
                break;
            }
            PyList_SET_ITEM(res, (Py_ssize_t)i, o);
        }
#if PY_VERSION_HEX >= 0x030A0000
        if (gc_was) PyGC_Enable();
#endif
    }
done:
    if (st)
        for (size_t i = 0; i < count; i++) enc_free(&st[i]);
    free(s), free(n), free(st), free(rc), free(bstart);
    Py_DECREF(fast);
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
    const SpecialsObject *sp, *sp2;
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
} cuts_job;

/* FSTOK_TRACE_THREADS=1: run_bounds prints where its time went to stderr (measuring thread scaling on a
 * machine without a profiler) */
static int trace_threads = -1;
static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}
static _Atomic long long trace_busy_ns; /* summed encode time of the pieces of the current call */

/* encode piece i of the job with this thread's memo and publish it (no GIL needed) */
static void cuts_encode_one(cuts_job *j, size_t i, bpe_memo *memo) {
    const ModelObject *self = j->self;
    double t0 = trace_threads > 0 ? now_us() : 0;
    enc_state local;
    memset(&local, 0, sizeof local);
    local.memo = memo;
    local.count_only = j->kind == OUT_COUNT;
    if (j->tr_s) j->tr_s[i] = t0, j->tr_w[i] = tp_worker_index();
    int rc = encode_text(self, j->sp, j->sp2, j->s + j->b[i], j->b[i + 1] - j->b[i], &local);
    local.memo = NULL;
    PyObject **pp = NULL;
    if (j->kind != OUT_LIST) {
        /* ids or a count: nothing to map */
    } else if (self->ints_pinned) { /* (the list is filled from the ids after the encoding: fill_worker) */
        for (size_t q = 0; q < local.ids.len && !rc; q++) j->missing[i] |= local.ids.ids[q] >= self->m.n_ext;
    } else if (!rc && !(pp = pyids_borrow(self->ints, self->m.n_ext, local.ids.ids, local.ids.len, &j->missing[i]))) {
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
    bpe_memo *memo = memo_worker(self);
    for (;;) {
        size_t i = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed);
        if (i >= j->count) break;
        cuts_encode_one(j, i, memo);
    }
    memo_worker_done(self, memo);
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

/* byte position of code point index c, counting from (pos, cnt) = (byte, code points before it) */
static size_t utf8_seek(const uint8_t *s, size_t n, size_t pos, size_t cnt, size_t c) {
#ifdef __SSE2__
    const __m128i lim = _mm_set1_epi8(-64); /* continuation bytes 0x80..0xBF are < -64 as int8 */
    while (pos + 16 <= n) {
        uint32_t cont = (uint32_t)_mm_movemask_epi8(_mm_cmplt_epi8(_mm_loadu_si128((const __m128i *)(s + pos)), lim));
        size_t leads = 16 - (size_t)__builtin_popcount(cont);
        if (cnt + leads > c) break;
        cnt += leads;
        pos += 16;
    }
#endif
    for (; pos < n; pos++) {
        if ((s[pos] & 0xC0) != 0x80) {
            if (cnt == c) return pos;
            cnt++;
        }
    }
    return n;
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
    const SpecialsObject *sp, *sp2;
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
                if (!own) own = memo_borrow(self);
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
    if (own) memo_return(self, own);
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
                ptrs[k] = pyids_borrow(self->ints, self->m.n_ext, st[k].ids.ids, st[k].ids.len, &miss);
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
    if (self->pt_mode < 0) {
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

/* Proven pre-tokenizer boundaries found in C (fstok/safe_split.py builds the tables):
 * cls[cp] is the character class of code point cp, ok[K * c + d] says a position between a class-c and
 * a class-d character is a piece boundary in every parse.  A cut never falls inside an occurrence of a
 * guard string (special and added tokens): the special-token split of each piece is the whole text's. */
static uint32_t utf8_decode_at(const uint8_t *s, size_t i, size_t n, size_t *len) {
    uint8_t c = s[i];
    if (c < 0x80 || i + 1 >= n) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F); }
    if (c < 0xF0 || i + 3 >= n) {
        *len = 3;
        return i + 2 < n ? ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F) : 0xFFFD;
    }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) |
           (s[i + 3] & 0x3F);
}

typedef struct {
    const uint16_t *cls;
    size_t ncls; /* entries of cls */
    const uint8_t *ok;
    size_t K;
    const char **g;
    Py_ssize_t *glen;
    size_t ng;
} proven_ctx;

static inline size_t cls_of(const proven_ctx *c, uint32_t cp) {
    size_t k = cp < c->ncls ? c->cls[cp] : c->K - 1;
    return k < c->K ? k : c->K - 1; /* a table from elsewhere can never index past ok */
}

static int guarded(const proven_ctx *c, const uint8_t *s, size_t n, size_t p) {
    for (size_t k = 0; k < c->ng; k++) {
        size_t L = (size_t)c->glen[k];
        if (L < 2) continue;
        size_t lo = p >= L - 1 ? p - (L - 1) : 0, hi = p + L - 1 < n ? p + L - 1 : n; /* window [lo, hi) */
        if (hi - lo < L) continue;
        const uint8_t *w = s + lo, *e = s + hi;
        while (w + L <= e) {
            const uint8_t *f = (const uint8_t *)memchr(w, (uint8_t)c->g[k][0], (size_t)(e - w) - L + 1);
            if (!f) break;
            if (!memcmp(f, c->g[k], L) && f < s + p && f + L > s + p) return 1;
            w = f + 1;
        }
    }
    return 0;
}

/* first proven boundary at a character start in [from, to), or (size_t)-1 */
static size_t proven_forward(const proven_ctx *c, const uint8_t *s, size_t n, size_t from, size_t to) {
    while (from < n && (s[from] & 0xC0) == 0x80) from++;
    if (from == 0 || from >= n) return (size_t)-1;
    size_t q = from - 1, len;
    while (q > 0 && (s[q] & 0xC0) == 0x80) q--;
    size_t prev = cls_of(c, utf8_decode_at(s, q, n, &len));
    for (size_t p = from; p < to && p < n;) {
        size_t cur = cls_of(c, utf8_decode_at(s, p, n, &len));
        if (c->ok[prev * c->K + cur] && !guarded(c, s, n, p)) return p;
        prev = cur;
        p += len;
    }
    return (size_t)-1;
}

/* last proven boundary at a character start in (lo, hi), or (size_t)-1 */
static size_t proven_backward(const proven_ctx *c, const uint8_t *s, size_t n, size_t lo, size_t hi) {
    size_t best = (size_t)-1;
    /* scan forward in blocks ending at hi, keep the last hit (the text is UTF-8: no backward decoding) */
    size_t step = 256;
    size_t end = hi;
    while (end > lo + 1) {
        size_t start = end > lo + step ? end - step : lo + 1;
        size_t p = start, last = (size_t)-1;
        while (p < end) {
            size_t f = proven_forward(c, s, n, p, end);
            if (f == (size_t)-1) break;
            last = f;
            p = f + 1;
        }
        if (last != (size_t)-1) return last;
        end = start;
        step *= 4;
    }
    return best;
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

/* self_check() -> (failures, first failing external id or -1): every reachable token must encode to
 * itself with each span encoder (short sweep, heap and, when valid, backtracking). */
static PyObject *Model_self_check(ModelObject *self, PyObject *noargs) {
    const bpe_model *m = &self->m;
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
            if (mode == 2 && !m->backtrack_ok) continue;
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
    if (self->pt_mode != 0) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "find mode only");
        return NULL;
    }
    const uint8_t *s = (const uint8_t *)data.buf;
    size_t n = (size_t)data.len, pos = 0, acc = 0;
    size_t buf[2 * SPAN_CHUNK];
    bpe_vec v = {0};
    bpe_vec_reserve(&v, 1 << 16);
    bpe_memo *memo = memo_borrow(self);
    Py_BEGIN_ALLOW_THREADS
    while (pos < n) {
        size_t k = fstok_dfa_find_all(&self->lv[0], s, n, &pos, buf, SPAN_CHUNK);
        for (size_t j = 0; j < k; j++) {
            const uint8_t *p = s + buf[2 * j];
            size_t len = buf[2 * j + 1] - buf[2 * j];
            if (mode == 0) acc += len;
            else if (mode == 1) acc += len <= 8 ? bpe_hash_w(bpe_head8_fast(p, len, n - buf[2 * j]), len) : bpe_hash_bytes(p, len);
            else if (mode == 2) acc += bpe_span_get_w(&self->m, p, len, bpe_head8_fast(p, len, n - buf[2 * j]));
            else {
                bpe_encode_span_avail(&self->m, memo, p, len, n - buf[2 * j], &v);
                if (v.len > 60000) acc += v.len, v.len = 0;
            }
        }
    }
    Py_END_ALLOW_THREADS
    acc += v.len;
    free(v.ids);
    PyBuffer_Release(&data);
    memo_return(self, memo);
    return PyLong_FromSize_t(acc);
}

/* clear_cache(): drop what the pooled pre-token memos learned for this model;
 * set_memo(flag): enable/disable them (benchmarks: cold vs warm) */
static PyObject *Model_clear_cache(ModelObject *self, PyObject *noargs) {
    __atomic_add_fetch(&self->memo_epoch, 1, __ATOMIC_RELAXED);
    Py_RETURN_NONE;
}

static PyObject *Model_set_memo(ModelObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    self->use_memo = on;
    Py_RETURN_NONE;
}

/* _tune(short_max, use_backtrack): change the encoder choice (benchmarks and tests only) */
static PyObject *Model_tune(ModelObject *self, PyObject *args) {
    unsigned int short_max, hash_max = 0xFFFFFFFFu, short_max_mb = 0xFFFFFFFFu;
    int bt;
    if (!PyArg_ParseTuple(args, "Ip|II", &short_max, &bt, &hash_max, &short_max_mb)) return NULL;
    self->m.short_max = short_max;
    self->m.hash_max = hash_max;
    self->m.short_max_mb = short_max_mb == 0xFFFFFFFFu ? short_max : short_max_mb;
    self->m.backtrack_ok = bt && self->bt_valid; /* never enable it where the compiler found it invalid */
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
    {"_tune", (PyCFunction)Model_tune, METH_VARARGS, "set short_max / backtracking (tests, benchmarks)"},
    {"self_check", (PyCFunction)Model_self_check, METH_NOARGS, "every reachable token encodes to itself"},
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

static PyMethodDef module_methods[] = {
    {"backtrack_fallbacks", py_fallbacks, METH_NOARGS, "spans the backtracking encoder handed to the heap"},
    {"build_splits", py_build_splits, METH_VARARGS, "canonical merge of every token"},
    {"build_pair_table", py_build_pair_table, METH_VARARGS, "pair -> merged id hash"},
    {"build_span_table", py_build_span_table, METH_VARARGS, "bytes -> id hash"},
    {"build_trie", py_build_trie, METH_VARARGS, "double-array trie + next_prefix"},
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
