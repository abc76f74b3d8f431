/* fstok.runtime._train: the incremental BPE merge loop.  Oracle: fstok/train/naive.py (the naive trainer).
 *
 * The incremental training algorithm over the *distinct* pre-tokens of a corpus, each
 * weighted by its frequency (so memory is bounded by the distinct pre-tokens, not the corpus):
 *
 *   sym[i]      token id at symbol position i (-1 once merged away)
 *   prv/nxt[i]  doubly linked list of the live symbols of one pre-token (-1 at the ends)
 *   word[i]     which pre-token position i belongs to (its frequency is freq[word[i]])
 *   pairs       hash (a,b) -> {64-bit count, positions}; positions are "add only": an entry is
 *               checked (sym[p]==a && sym[nxt[p]]==b) when the pair is merged, never deleted
 *   heap        a lazy max-heap of (count, pair).  Counts of existing pairs only ever decrease
 *               (every pair that gains occurrences contains the brand-new token), so a popped
 *               entry whose stored count is stale is re-pushed with the current count and a
 *               popped entry whose count is current is the true maximum.
 *
 * Priority: larger count first; ties go to the lexicographically greatest pair of byte strings
 * (bytes(a), bytes(b)) -- mode 0, fstok's rule -- or, in mode 1, to the pair with the smallest
 * HF BpeTrainer ids (ord[a], ord[b]) -- used only to cross-check against HF's trainer.
 *
 * Pure-Python references: fstok/train/naive.py (recount every pair every merge) and
 * fstok/train/fast.py (this same algorithm in Python).  The merge loop runs with the GIL released.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t count;
    int32_t a, b;
    int32_t *pos;
    uint32_t npos, cap;
} Pair;

typedef struct {
    int64_t count;
    int32_t pair;
} HeapEnt;

typedef struct {
    PyObject_HEAD
    /* symbols over the distinct pre-tokens */
    int32_t *sym, *prv, *nxt, *word;
    int64_t nsym;
    int64_t *freq;
    int64_t nwords;
    /* token byte strings */
    uint8_t *tbuf;
    int64_t tbuf_len, tbuf_cap;
    int64_t *toff;
    int32_t *tlen;
    int32_t *ord;
    int32_t ntok, tok_cap;
    int mode;
    /* pairs */
    Pair *pairs;
    int32_t npairs, pairs_cap;
    uint64_t *hkey; /* the pair key of each slot (valid when hidx != 0) */
    int32_t *htab;  /* pair index + 1, 0 = empty */
    uint64_t hmask;
    /* heap */
    HeapEnt *heap;
    int64_t hn, hcap;
    /* state */
    int busy, broken, oom;
    int64_t merges_done;
    int64_t pos_bytes; /* bytes currently allocated to position lists */
} Trainer;

/* ------------------------------------------------------------------ helpers */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t pkey(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

static int grow_htab(Trainer *t) {
    uint64_t ncap = (t->hmask + 1) * 2;
    int32_t *nt = (int32_t *)calloc(ncap, sizeof(int32_t));
    uint64_t *nk = (uint64_t *)malloc(ncap * sizeof(uint64_t));
    if (!nt || !nk) {
        free(nt);
        free(nk);
        return -1;
    }
    uint64_t m = ncap - 1;
    for (int32_t i = 0; i < t->npairs; i++) {
        uint64_t k = pkey(t->pairs[i].a, t->pairs[i].b);
        uint64_t h = mix64(k) & m;
        while (nt[h]) h = (h + 1) & m;
        nt[h] = i + 1;
        nk[h] = k;
    }
    free(t->htab);
    free(t->hkey);
    t->htab = nt;
    t->hkey = nk;
    t->hmask = m;
    return 0;
}

/* index of pair (a,b), created with count 0 when absent; -1 on allocation failure */
static int32_t get_pair(Trainer *t, int32_t a, int32_t b) {
    uint64_t k = pkey(a, b);
    uint64_t h = mix64(k) & t->hmask;
    int32_t e;
    while ((e = t->htab[h]) != 0) {
        if (t->hkey[h] == k) return e - 1;
        h = (h + 1) & t->hmask;
    }
    if (t->npairs == INT32_MAX - 1) return -1;
    if (t->npairs == t->pairs_cap) {
        int64_t nc = (int64_t)t->pairs_cap + t->pairs_cap / 2 + 1024;
        if (nc > INT32_MAX) nc = INT32_MAX;
        Pair *np = (Pair *)realloc(t->pairs, (size_t)nc * sizeof(Pair));
        if (!np) return -1;
        t->pairs = np;
        t->pairs_cap = (int32_t)nc;
    }
    int32_t idx = t->npairs++;
    Pair *p = &t->pairs[idx];
    p->count = 0;
    p->a = a;
    p->b = b;
    p->pos = NULL;
    p->npos = p->cap = 0;
    t->htab[h] = idx + 1;
    t->hkey[h] = k;
    if ((uint64_t)t->npairs * 10 > (t->hmask + 1) * 7) {
        if (grow_htab(t) < 0) return -1;
    }
    return idx;
}

static int32_t find_pair(Trainer *t, int32_t a, int32_t b) {
    uint64_t k = pkey(a, b);
    uint64_t h = mix64(k) & t->hmask;
    int32_t e;
    while ((e = t->htab[h]) != 0) {
        if (t->hkey[h] == k) return e - 1;
        h = (h + 1) & t->hmask;
    }
    return -1;
}

static int add_pos(Trainer *t, Pair *p, int32_t pos) {
    if (p->npos == p->cap) {
        uint32_t nc = p->cap ? p->cap * 2 : 2;
        if (nc < p->cap) return -1;
        int32_t *np = (int32_t *)realloc(p->pos, (size_t)nc * sizeof(int32_t));
        if (!np) return -1;
        t->pos_bytes += (int64_t)(nc - p->cap) * (int64_t)sizeof(int32_t);
        p->pos = np;
        p->cap = nc;
    }
    p->pos[p->npos++] = pos;
    return 0;
}

static void free_pos(Trainer *t, Pair *p) {
    t->pos_bytes -= (int64_t)p->cap * (int64_t)sizeof(int32_t);
    free(p->pos);
    p->pos = NULL;
    p->npos = p->cap = 0;
}

static inline int tokcmp(const Trainer *t, int32_t x, int32_t y) {
    if (x == y) return 0;
    int32_t lx = t->tlen[x], ly = t->tlen[y];
    int c = memcmp(t->tbuf + t->toff[x], t->tbuf + t->toff[y], (size_t)(lx < ly ? lx : ly));
    if (c) return c;
    return (lx > ly) - (lx < ly);
}

/* > 0 when entry x has priority over entry y */
static inline int ent_cmp(const Trainer *t, const HeapEnt *x, const HeapEnt *y) {
    if (x->count != y->count) return x->count > y->count ? 1 : -1;
    const Pair *px = &t->pairs[x->pair], *py = &t->pairs[y->pair];
    if (t->mode == 0) {
        int c = tokcmp(t, px->a, py->a);
        if (c) return c;
        return tokcmp(t, px->b, py->b);
    }
    /* HF BpeTrainer: the smaller (id_a, id_b) wins */
    if (px->a != py->a) return t->ord[px->a] < t->ord[py->a] ? 1 : -1;
    if (px->b != py->b) return t->ord[px->b] < t->ord[py->b] ? 1 : -1;
    return 0;
}

static void sift_down(Trainer *t, int64_t i) {
    HeapEnt *h = t->heap;
    int64_t n = t->hn;
    HeapEnt x = h[i];
    for (;;) {
        int64_t l = 2 * i + 1;
        if (l >= n) break;
        int64_t c = l;
        if (l + 1 < n && ent_cmp(t, &h[l + 1], &h[l]) > 0) c = l + 1;
        if (ent_cmp(t, &h[c], &x) <= 0) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = x;
}

static void sift_up(Trainer *t, int64_t i) {
    HeapEnt *h = t->heap;
    HeapEnt x = h[i];
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (ent_cmp(t, &x, &h[p]) <= 0) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static int heap_push(Trainer *t, int64_t count, int32_t pair) {
    if (t->hn == t->hcap) {
        int64_t nc = t->hcap + t->hcap / 2 + 1024;
        HeapEnt *nh = (HeapEnt *)realloc(t->heap, (size_t)nc * sizeof(HeapEnt));
        if (!nh) return -1;
        t->heap = nh;
        t->hcap = nc;
    }
    t->heap[t->hn].count = count;
    t->heap[t->hn].pair = pair;
    t->hn++;
    sift_up(t, t->hn - 1);
    return 0;
}

static HeapEnt heap_pop(Trainer *t) {
    HeapEnt top = t->heap[0];
    t->hn--;
    if (t->hn > 0) {
        t->heap[0] = t->heap[t->hn];
        sift_down(t, 0);
    }
    return top;
}

static int new_token(Trainer *t, int32_t a, int32_t b) {
    if (t->ntok == t->tok_cap) {
        int32_t nc = t->tok_cap * 2;
        int64_t *no = (int64_t *)realloc(t->toff, (size_t)nc * sizeof(int64_t));
        if (!no) return -1;
        t->toff = no;
        int32_t *nl = (int32_t *)realloc(t->tlen, (size_t)nc * sizeof(int32_t));
        if (!nl) return -1;
        t->tlen = nl;
        int32_t *nr = (int32_t *)realloc(t->ord, (size_t)nc * sizeof(int32_t));
        if (!nr) return -1;
        t->ord = nr;
        t->tok_cap = nc;
    }
    int64_t la = t->tlen[a], lb = t->tlen[b];
    if (la + lb > INT32_MAX) return -1;
    while (t->tbuf_len + la + lb > t->tbuf_cap) {
        int64_t nc = t->tbuf_cap * 2;
        uint8_t *nb = (uint8_t *)realloc(t->tbuf, (size_t)nc);
        if (!nb) return -1;
        t->tbuf = nb;
        t->tbuf_cap = nc;
    }
    int32_t n = t->ntok++;
    t->toff[n] = t->tbuf_len;
    memcpy(t->tbuf + t->tbuf_len, t->tbuf + t->toff[a], (size_t)la);
    memcpy(t->tbuf + t->tbuf_len + la, t->tbuf + t->toff[b], (size_t)lb);
    t->tbuf_len += la + lb;
    t->tlen[n] = (int32_t)(la + lb);
    t->ord[n] = n + 1000; /* after every byte id in either ordering */
    return n;
}

static int cmp_i32(const void *x, const void *y) {
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* add w occurrences of (a,b) (recording position pos when pos >= 0) */
static int pair_add(Trainer *t, int32_t a, int32_t b, int64_t w, int32_t pos) {
    int32_t k = get_pair(t, a, b);
    if (k < 0) return -1;
    Pair *p = &t->pairs[k];
    p->count += w;
    if (pos >= 0 && add_pos(t, p, pos) < 0) return -1;
    return 0;
}

static void pair_sub(Trainer *t, int32_t a, int32_t b, int64_t w) {
    int32_t k = find_pair(t, a, b);
    if (k >= 0) t->pairs[k].count -= w;
}

/* Merge pair k (its count is current and maximal).  Returns the new token id, -1 on OOM. */
static int32_t do_merge(Trainer *t, int32_t k) {
    int32_t a = t->pairs[k].a, b = t->pairs[k].b;
    int32_t n = new_token(t, a, b);
    if (n < 0) return -1;
    int32_t *pos = t->pairs[k].pos;
    uint32_t npos = t->pairs[k].npos;
    if (a == b && npos > 1) qsort(pos, npos, sizeof(int32_t), cmp_i32); /* left to right inside a word */
    int32_t first_new = t->npairs;
    int32_t *sym = t->sym, *prv = t->prv, *nxt = t->nxt;
    for (uint32_t i = 0; i < npos; i++) {
        int32_t p = pos[i];
        if (sym[p] != a) continue;
        int32_t q = nxt[p];
        if (q < 0 || sym[q] != b) continue;
        int64_t w = t->freq[t->word[p]];
        int32_t pp = prv[p], nn = nxt[q];
        if (pp >= 0) {
            pair_sub(t, sym[pp], a, w);
            if (pair_add(t, sym[pp], n, w, pp) < 0) return -1;
        }
        if (nn >= 0) {
            pair_sub(t, b, sym[nn], w);
            if (pair_add(t, n, sym[nn], w, p) < 0) return -1;
        }
        sym[p] = n;
        sym[q] = -1;
        nxt[p] = nn;
        if (nn >= 0) prv[nn] = p;
        prv[q] = nxt[q] = -1;
    }
    Pair *m = &t->pairs[k];
    m->count = 0;
    free_pos(t, m);
    for (int32_t j = first_new; j < t->npairs; j++) {
        Pair *p = &t->pairs[j];
        if (p->count > 0) {
            if (heap_push(t, p->count, j) < 0) return -1;
        } else {
            free_pos(t, p);
        }
    }
    return n;
}

/* ------------------------------------------------------------------ Python type */

static void Trainer_free_all(Trainer *t) {
    free(t->sym); free(t->prv); free(t->nxt); free(t->word); free(t->freq);
    free(t->tbuf); free(t->toff); free(t->tlen); free(t->ord);
    if (t->pairs) {
        for (int32_t i = 0; i < t->npairs; i++) free(t->pairs[i].pos);
    }
    free(t->pairs); free(t->htab); free(t->hkey); free(t->heap);
    t->hkey = NULL;
    t->sym = t->prv = t->nxt = t->word = NULL;
    t->freq = NULL; t->tbuf = NULL; t->toff = NULL; t->tlen = NULL; t->ord = NULL;
    t->pairs = NULL; t->htab = NULL; t->heap = NULL;
    t->npairs = t->pairs_cap = 0;
    t->hn = t->hcap = 0;
    t->ntok = t->tok_cap = 0;
    t->tbuf_len = t->tbuf_cap = 0;
    t->nsym = t->nwords = 0;
    t->hmask = 0;
}

static void Trainer_dealloc(Trainer *t) {
    Trainer_free_all(t);
    Py_TYPE(t)->tp_free((PyObject *)t);
}

/* byte -> HF ByteLevel id order: printable bytes keep their code point, the others are mapped to
   256, 257, ... in byte order; HF sorts its alphabet by code point. */
static void hf_byte_order(int32_t *ord) {
    int32_t cp[256];
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        cp[b] = printable ? b : 256 + extra++;
    }
    for (int b = 0; b < 256; b++) {
        int r = 0;
        for (int c = 0; c < 256; c++) r += cp[c] < cp[b];
        ord[b] = r;
    }
}

static int Trainer_init(Trainer *t, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"data", "offsets", "freqs", "mode", NULL};
    Py_buffer data = {0}, offs = {0}, freqs = {0};
    int mode = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "y*y*y*|i", kwlist, &data, &offs, &freqs, &mode)) return -1;
    int rc = -1;
    Trainer_free_all(t);
    t->busy = t->broken = t->oom = 0;
    t->merges_done = 0;
    t->pos_bytes = 0;
    if (mode != 0 && mode != 1) {
        PyErr_SetString(PyExc_ValueError, "mode must be 0 (bytes) or 1 (hf)");
        goto done;
    }
    t->mode = mode;
    if (offs.len % 8 || freqs.len % 8 || offs.len < 8) {
        PyErr_SetString(PyExc_ValueError, "offsets/freqs must be int64 arrays (offsets has nwords+1 entries)");
        goto done;
    }
    int64_t nw = freqs.len / 8;
    if (offs.len / 8 != nw + 1) {
        PyErr_SetString(PyExc_ValueError, "offsets must have len(freqs)+1 entries");
        goto done;
    }
    const int64_t *off = (const int64_t *)offs.buf;
    const int64_t *fr = (const int64_t *)freqs.buf;
    if (off[0] != 0 || off[nw] != data.len) {
        PyErr_SetString(PyExc_ValueError, "offsets must start at 0 and end at len(data)");
        goto done;
    }
    for (int64_t i = 0; i < nw; i++) {
        if (off[i + 1] < off[i]) {
            PyErr_SetString(PyExc_ValueError, "offsets must be non-decreasing");
            goto done;
        }
        if (fr[i] <= 0) {
            PyErr_SetString(PyExc_ValueError, "frequencies must be positive");
            goto done;
        }
    }
    if (data.len >= INT32_MAX || nw >= INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many distinct pre-token bytes for one trainer (limit 2**31-1)");
        goto done;
    }
    int64_t n = data.len;
    t->nsym = n;
    t->nwords = nw;
    size_t n1 = (size_t)(n ? n : 1);
    t->sym = (int32_t *)malloc(n1 * sizeof(int32_t));
    t->prv = (int32_t *)malloc(n1 * sizeof(int32_t));
    t->nxt = (int32_t *)malloc(n1 * sizeof(int32_t));
    t->word = (int32_t *)malloc(n1 * sizeof(int32_t));
    t->freq = (int64_t *)malloc((size_t)(nw ? nw : 1) * sizeof(int64_t));
    t->tok_cap = 1024;
    t->tbuf_cap = 65536;
    t->tbuf = (uint8_t *)malloc((size_t)t->tbuf_cap);
    t->toff = (int64_t *)malloc((size_t)t->tok_cap * sizeof(int64_t));
    t->tlen = (int32_t *)malloc((size_t)t->tok_cap * sizeof(int32_t));
    t->ord = (int32_t *)malloc((size_t)t->tok_cap * sizeof(int32_t));
    t->hmask = 1023;
    t->htab = (int32_t *)calloc(t->hmask + 1, sizeof(int32_t));
    t->hkey = (uint64_t *)malloc((t->hmask + 1) * sizeof(uint64_t));
    if (!t->hkey || !t->sym || !t->prv || !t->nxt || !t->word || !t->freq || !t->tbuf || !t->toff || !t->tlen || !t->ord || !t->htab) {
        PyErr_NoMemory();
        goto done;
    }
    for (int i = 0; i < 256; i++) {
        t->tbuf[i] = (uint8_t)i;
        t->toff[i] = i;
        t->tlen[i] = 1;
    }
    if (mode == 1) hf_byte_order(t->ord);
    else for (int i = 0; i < 256; i++) t->ord[i] = i;
    t->tbuf_len = 256;
    t->ntok = 256;
    memcpy(t->freq, fr, (size_t)nw * sizeof(int64_t));
    const uint8_t *d = (const uint8_t *)data.buf;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t w = 0; w < nw && !oom; w++) {
        int64_t s = off[w], e = off[w + 1];
        for (int64_t i = s; i < e; i++) {
            t->sym[i] = d[i];
            t->word[i] = (int32_t)w;
            t->prv[i] = i > s ? (int32_t)(i - 1) : -1;
            t->nxt[i] = i + 1 < e ? (int32_t)(i + 1) : -1;
            if (i + 1 < e && pair_add(t, d[i], d[i + 1], fr[w], (int32_t)i) < 0) {
                oom = 1;
                break;
            }
        }
    }
    if (!oom) {
        t->hcap = (int64_t)t->npairs + 64;
        t->heap = (HeapEnt *)malloc((size_t)t->hcap * sizeof(HeapEnt));
        if (!t->heap) oom = 1;
    }
    if (!oom) {
        t->hn = 0;
        for (int32_t j = 0; j < t->npairs; j++) {
            t->heap[t->hn].count = t->pairs[j].count;
            t->heap[t->hn].pair = j;
            t->hn++;
        }
        for (int64_t i = t->hn / 2 - 1; i >= 0; i--) sift_down(t, i);
    }
    Py_END_ALLOW_THREADS
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    rc = 0;
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&offs);
    PyBuffer_Release(&freqs);
    if (rc < 0) {
        Trainer_free_all(t);
        t->broken = 1;
    }
    return rc;
}

static int check_usable(Trainer *t) {
    if (t->broken || !t->sym) {
        PyErr_SetString(PyExc_RuntimeError, "trainer is not initialized (or failed earlier)");
        return -1;
    }
    if (t->busy) {
        PyErr_SetString(PyExc_RuntimeError, "trainer is in use by another thread");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(step_doc,
"step(max_merges) -> (pairs: bytes, counts: bytes)\n\n"
"Perform up to max_merges merges.  `pairs` holds int32 (left, right) token ids per merge (the new\n"
"token of merge i gets id 256 + merges_done_before + i); `counts` the int64 count of each merged\n"
"pair.  Fewer merges are returned when no pair is left.");

static PyObject *Trainer_step(Trainer *t, PyObject *arg) {
    long long want = PyLong_AsLongLong(arg);
    if (want == -1 && PyErr_Occurred()) return NULL;
    if (want < 0) {
        PyErr_SetString(PyExc_ValueError, "max_merges must be >= 0");
        return NULL;
    }
    if (check_usable(t) < 0) return NULL;
    if (want > (long long)INT32_MAX - 1 - t->ntok) want = (long long)INT32_MAX - 1 - t->ntok;
    int32_t *outp = (int32_t *)malloc((size_t)(want ? want : 1) * 2 * sizeof(int32_t));
    int64_t *outc = (int64_t *)malloc((size_t)(want ? want : 1) * sizeof(int64_t));
    if (!outp || !outc) {
        free(outp); free(outc);
        return PyErr_NoMemory();
    }
    int64_t done = 0;
    int oom = 0;
    t->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    while (done < want && t->hn > 0) {
        HeapEnt top = heap_pop(t);
        Pair *p = &t->pairs[top.pair];
        if (p->count != top.count) {
            if (p->count > 0) {
                if (heap_push(t, p->count, top.pair) < 0) { oom = 1; break; }
            } else {
                free_pos(t, p);
            }
            continue;
        }
        if (p->count <= 0) { free_pos(t, p); continue; }
        int64_t c = p->count;
        int32_t a = p->a, b = p->b;
        if (do_merge(t, top.pair) < 0) { oom = 1; break; }
        outp[2 * done] = a;
        outp[2 * done + 1] = b;
        outc[done] = c;
        done++;
    }
    Py_END_ALLOW_THREADS
    t->busy = 0;
    t->merges_done += done;
    if (oom) {
        free(outp); free(outc);
        t->broken = 1;
        return PyErr_NoMemory();
    }
    PyObject *r = Py_BuildValue("(y#y#)", (const char *)outp, (Py_ssize_t)(done * 2 * sizeof(int32_t)),
                                (const char *)outc, (Py_ssize_t)(done * sizeof(int64_t)));
    free(outp); free(outc);
    return r;
}

static PyObject *Trainer_stats(Trainer *t, PyObject *Py_UNUSED(ignored)) {
    int64_t sym_b = t->nsym * 16 + t->nwords * 8;
    int64_t pair_b = (int64_t)t->pairs_cap * (int64_t)sizeof(Pair) + (int64_t)(t->hmask + 1) * 12;
    int64_t heap_b = t->hcap * (int64_t)sizeof(HeapEnt);
    int64_t tok_b = t->tbuf_cap + (int64_t)t->tok_cap * 16;
    int64_t mem = sym_b + pair_b + heap_b + tok_b + t->pos_bytes;
    return Py_BuildValue("{s:L,s:L,s:i,s:L,s:i,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "symbols", (long long)t->nsym,
                         "words", (long long)t->nwords, "pairs", (int)t->npairs, "heap", (long long)t->hn,
                         "tokens", (int)t->ntok, "merges", (long long)t->merges_done, "bytes", (long long)mem,
                         "symbol_bytes", (long long)sym_b, "pair_bytes", (long long)pair_b, "heap_bytes",
                         (long long)heap_b, "position_bytes", (long long)t->pos_bytes, "token_bytes", (long long)tok_b);
}

static PyObject *Trainer_token(Trainer *t, PyObject *arg) {
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (!t->tlen || i < 0 || i >= t->ntok) {
        PyErr_SetString(PyExc_IndexError, "token id out of range");
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)t->tbuf + t->toff[i], t->tlen[i]);
}

static PyMethodDef Trainer_methods[] = {
    {"step", (PyCFunction)Trainer_step, METH_O, step_doc},
    {"stats", (PyCFunction)Trainer_stats, METH_NOARGS, "sizes of the internal structures (dict)"},
    {"token", (PyCFunction)Trainer_token, METH_O, "token(id) -> bytes"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject TrainerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fstok.runtime._train.Trainer",
    .tp_basicsize = sizeof(Trainer),
    .tp_dealloc = (destructor)Trainer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Trainer(data, offsets, freqs, mode=0): incremental BPE merge loop over distinct pre-tokens.\n\n"
              "data: the pre-tokens' bytes concatenated; offsets: int64[nwords+1]; freqs: int64[nwords];\n"
              "mode 0 breaks count ties by the lexicographically greatest (bytes(a), bytes(b)), mode 1 like\n"
              "HF BpeTrainer (smallest ids).",
    .tp_methods = Trainer_methods,
    .tp_init = (initproc)Trainer_init,
    .tp_new = PyType_GenericNew,
};

/* ------------------------------------------------------------------ WordCounter
 * Distinct pre-tokens (byte strings) and their 64-bit frequencies, fed with (text bytes, spans)
 * straight from the DFA spanner so no Python object is made per pre-token.  Words are stored once,
 * contiguously in insertion order, in `arena`; `slots` is an open-addressing index (low 32 bits:
 * entry index + 1, high 32 bits: hash bits for a quick reject). */

typedef struct {
    int64_t off;
    int64_t count;
    int64_t len;
} WEnt;

typedef struct {
    PyObject_HEAD
    uint64_t *slots;
    uint64_t smask;
    WEnt *ents;
    int64_t n, cap;
    uint8_t *arena;
    int64_t alen, acap;
    int64_t total;
    int busy;
} WordCounter;

static inline uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ ((uint64_t)n * 0xff51afd7ed558ccdULL);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ (v * 0xc4ceb9fe1a85ec53ULL)) * 0x9E3779B97F4A7C15ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n) {
        uint64_t v = 0;
        memcpy(&v, p, n);
        h = (h ^ (v * 0xc4ceb9fe1a85ec53ULL)) * 0x9E3779B97F4A7C15ULL;
    }
    return mix64(h);
}

static int wc_grow_slots(WordCounter *w) {
    uint64_t ncap = w->smask ? (w->smask + 1) * 2 : 1024;
    uint64_t *ns = (uint64_t *)calloc(ncap, sizeof(uint64_t));
    if (!ns) return -1;
    uint64_t m = ncap - 1;
    for (int64_t i = 0; i < w->n; i++) {
        uint64_t h = hash_bytes(w->arena + w->ents[i].off, (size_t)w->ents[i].len);
        uint64_t j = h & m;
        while (ns[j]) j = (j + 1) & m;
        ns[j] = ((h >> 32) << 32) | (uint64_t)(i + 1);
    }
    free(w->slots);
    w->slots = ns;
    w->smask = m;
    return 0;
}

/* add `count` occurrences of p[0:n]; -1 on OOM */
static int wc_add(WordCounter *w, const uint8_t *p, int64_t n, int64_t count) {
    if (!w->slots || (uint64_t)(w->n + 1) * 10 > (w->smask + 1) * 7) {
        if (wc_grow_slots(w) < 0) return -1;
    }
    uint64_t h = hash_bytes(p, (size_t)n);
    uint64_t tag = (h >> 32) << 32;
    uint64_t j = h & w->smask;
    uint64_t s;
    while ((s = w->slots[j]) != 0) {
        if ((s & 0xffffffff00000000ULL) == tag) {
            WEnt *e = &w->ents[(s & 0xffffffffULL) - 1];
            if (e->len == n && memcmp(w->arena + e->off, p, (size_t)n) == 0) {
                e->count += count;
                return 0;
            }
        }
        j = (j + 1) & w->smask;
    }
    if (w->n >= 0xfffffffeLL) return -1;
    if (w->n == w->cap) {
        int64_t nc = w->cap * 2 + 1024;
        WEnt *ne = (WEnt *)realloc(w->ents, (size_t)nc * sizeof(WEnt));
        if (!ne) return -1;
        w->ents = ne;
        w->cap = nc;
    }
    while (w->alen + n > w->acap) {
        int64_t nc = w->acap * 2 + 65536;
        uint8_t *na = (uint8_t *)realloc(w->arena, (size_t)nc);
        if (!na) return -1;
        w->arena = na;
        w->acap = nc;
    }
    memcpy(w->arena + w->alen, p, (size_t)n);
    WEnt *e = &w->ents[w->n];
    e->off = w->alen;
    e->len = n;
    e->count = count;
    w->alen += n;
    w->n++;
    w->slots[j] = tag | (uint64_t)w->n;
    return 0;
}

static void WordCounter_dealloc(WordCounter *w) {
    free(w->slots);
    free(w->ents);
    free(w->arena);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

static int wc_check(WordCounter *w) {
    if (w->busy) {
        PyErr_SetString(PyExc_RuntimeError, "WordCounter is in use by another thread");
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(wc_add_doc,
"add(data, spans) -> int\n\n"
"Count the pre-tokens data[s:e] for each row (s, e) of `spans` (int64, C order, [k, 2]); empty spans\n"
"are skipped.  Returns the number counted.  Runs without the GIL.");

static PyObject *WordCounter_add(WordCounter *w, PyObject *args) {
    Py_buffer data = {0}, spans = {0};
    if (!PyArg_ParseTuple(args, "y*y*", &data, &spans)) return NULL;
    PyObject *res = NULL;
    if (wc_check(w) < 0) goto done;
    if (spans.len % 16) {
        PyErr_SetString(PyExc_ValueError, "spans must be int64 pairs");
        goto done;
    }
    const int64_t *sp = (const int64_t *)spans.buf;
    int64_t k = spans.len / 16, dlen = data.len, added = 0;
    for (int64_t i = 0; i < k; i++) {
        if (sp[2 * i] < 0 || sp[2 * i] > sp[2 * i + 1] || sp[2 * i + 1] > dlen) {
            PyErr_Format(PyExc_ValueError, "span %lld (%lld, %lld) is out of range for %lld bytes", (long long)i,
                         (long long)sp[2 * i], (long long)sp[2 * i + 1], (long long)dlen);
            goto done;
        }
    }
    int oom = 0;
    const uint8_t *d = (const uint8_t *)data.buf;
    w->busy = 1;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < k; i++) {
        int64_t s = sp[2 * i], e = sp[2 * i + 1];
        if (e == s) continue;
        if (wc_add(w, d + s, e - s, 1) < 0) { oom = 1; break; }
        added++;
    }
    Py_END_ALLOW_THREADS
    w->busy = 0;
    w->total += added;
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    res = PyLong_FromLongLong(added);
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&spans);
    return res;
}

static PyTypeObject WordCounterType;

static PyObject *WordCounter_update(WordCounter *w, PyObject *arg) {
    if (wc_check(w) < 0) return NULL;
    if (PyObject_TypeCheck(arg, &WordCounterType)) {
        WordCounter *o = (WordCounter *)arg;
        if (o == w) {
            PyErr_SetString(PyExc_ValueError, "cannot update a WordCounter with itself");
            return NULL;
        }
        if (wc_check(o) < 0) return NULL;
        int oom = 0;
        w->busy = o->busy = 1;
        Py_BEGIN_ALLOW_THREADS
        for (int64_t i = 0; i < o->n && !oom; i++)
            if (wc_add(w, o->arena + o->ents[i].off, o->ents[i].len, o->ents[i].count) < 0) oom = 1;
        Py_END_ALLOW_THREADS
        w->busy = o->busy = 0;
        if (oom) return PyErr_NoMemory();
        w->total += o->total;
        Py_RETURN_NONE;
    }
    if (!PyDict_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "update() takes a WordCounter or a dict {bytes: int}");
        return NULL;
    }
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(arg, &pos, &key, &val)) {
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keys must be bytes");
            return NULL;
        }
        long long c = PyLong_AsLongLong(val);
        if (c == -1 && PyErr_Occurred()) return NULL;
        if (c <= 0) {
            PyErr_SetString(PyExc_ValueError, "counts must be positive");
            return NULL;
        }
        if (PyBytes_GET_SIZE(key) == 0) continue;
        if (wc_add(w, (const uint8_t *)PyBytes_AS_STRING(key), PyBytes_GET_SIZE(key), c) < 0) return PyErr_NoMemory();
        w->total += c;
    }
    Py_RETURN_NONE;
}

PyDoc_STRVAR(wc_export_doc,
"export(min_len=1) -> (data: bytes, offsets: bytes, freqs: bytes)\n\n"
"The distinct pre-tokens of at least min_len bytes in first-seen order: their bytes concatenated,\n"
"int64 offsets (n+1) and int64 frequencies (n) -- the input of Trainer().");

static PyObject *WordCounter_export(WordCounter *w, PyObject *args) {
    long long min_len = 1;
    if (!PyArg_ParseTuple(args, "|L", &min_len)) return NULL;
    if (wc_check(w) < 0) return NULL;
    int64_t n = 0, bytes = 0;
    for (int64_t i = 0; i < w->n; i++)
        if (w->ents[i].len >= min_len) { n++; bytes += w->ents[i].len; }
    PyObject *data = PyBytes_FromStringAndSize(NULL, bytes);
    PyObject *offs = PyBytes_FromStringAndSize(NULL, (n + 1) * 8);
    PyObject *fr = PyBytes_FromStringAndSize(NULL, n * 8);
    if (!data || !offs || !fr) {
        Py_XDECREF(data); Py_XDECREF(offs); Py_XDECREF(fr);
        return NULL;
    }
    uint8_t *d = (uint8_t *)PyBytes_AS_STRING(data);
    int64_t *o = (int64_t *)PyBytes_AS_STRING(offs);
    int64_t *f = (int64_t *)PyBytes_AS_STRING(fr);
    int64_t j = 0, at = 0;
    o[0] = 0;
    for (int64_t i = 0; i < w->n; i++) {
        WEnt *e = &w->ents[i];
        if (e->len < min_len) continue;
        memcpy(d + at, w->arena + e->off, (size_t)e->len);
        at += e->len;
        f[j] = e->count;
        o[++j] = at;
    }
    return Py_BuildValue("(NNN)", data, offs, fr);
}

static PyObject *WordCounter_items(WordCounter *w, PyObject *Py_UNUSED(ignored)) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (int64_t i = 0; i < w->n; i++) {
        PyObject *k = PyBytes_FromStringAndSize((const char *)w->arena + w->ents[i].off, w->ents[i].len);
        PyObject *v = PyLong_FromLongLong(w->ents[i].count);
        if (!k || !v || PyDict_SetItem(d, k, v) < 0) {
            Py_XDECREF(k); Py_XDECREF(v); Py_DECREF(d);
            return NULL;
        }
        Py_DECREF(k); Py_DECREF(v);
    }
    return d;
}

static Py_ssize_t WordCounter_len(WordCounter *w) { return (Py_ssize_t)w->n; }

static PyObject *WordCounter_get_total(WordCounter *w, void *closure) { return PyLong_FromLongLong(w->total); }
static PyObject *WordCounter_get_nbytes(WordCounter *w, void *closure) {
    return PyLong_FromLongLong(w->acap + w->cap * (int64_t)sizeof(WEnt) + (int64_t)(w->smask + 1) * 8);
}

static PyGetSetDef WordCounter_getset[] = {
    {"total", (getter)WordCounter_get_total, NULL, "number of pre-tokens counted", NULL},
    {"nbytes", (getter)WordCounter_get_nbytes, NULL, "bytes allocated", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMethodDef WordCounter_methods[] = {
    {"add", (PyCFunction)WordCounter_add, METH_VARARGS, wc_add_doc},
    {"update", (PyCFunction)WordCounter_update, METH_O, "update(other WordCounter | dict {bytes: int})"},
    {"export", (PyCFunction)WordCounter_export, METH_VARARGS, wc_export_doc},
    {"items", (PyCFunction)WordCounter_items, METH_NOARGS, "dict {bytes: count}"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods WordCounter_as_seq = {
    .sq_length = (lenfunc)WordCounter_len,
};

static PyTypeObject WordCounterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "fstok.runtime._train.WordCounter",
    .tp_basicsize = sizeof(WordCounter),
    .tp_dealloc = (destructor)WordCounter_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "WordCounter(): distinct pre-tokens and their frequencies (see add / export).",
    .tp_methods = WordCounter_methods,
    .tp_getset = WordCounter_getset,
    .tp_as_sequence = &WordCounter_as_seq,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef train_module = {
    PyModuleDef_HEAD_INIT, "_train", "Native BPE training merge loop (see fstok.train).", -1, NULL,
};

PyMODINIT_FUNC PyInit__train(void) {
    if (PyType_Ready(&TrainerType) < 0) return NULL;
    if (PyType_Ready(&WordCounterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&train_module);
    if (!m) return NULL;
    Py_INCREF(&TrainerType);
    if (PyModule_AddObject(m, "Trainer", (PyObject *)&TrainerType) < 0) {
        Py_DECREF(&TrainerType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&WordCounterType);
    if (PyModule_AddObject(m, "WordCounter", (PyObject *)&WordCounterType) < 0) {
        Py_DECREF(&WordCounterType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
