/* Byte-level BPE span encoders over the compiled tables (see bpe.h): the O(n^2) sweep for short spans, heap,
 * bucket-queue and backtracking encoders for long ones, the window encoder (bpe_window.h), the span memo and
 * segment tables, and the dispatch that picks one per span.  Python-free.  Oracle: fstok/reference/bpe.py
 * (merge_ranks, merge_rules). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "bpe.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

unsigned long bpe_backtrack_fallbacks = 0;

int bpe_vec_reserve(bpe_vec *v, size_t extra) {
    if (v->len + extra <= v->cap) return 0;
    size_t cap = v->cap ? v->cap : 64;
    while (cap < v->len + extra) cap *= 2;
    uint32_t *p = (uint32_t *)realloc(v->ids, cap * sizeof(uint32_t));
    if (!p) return -1;
    v->ids = p;
    v->cap = cap;
    return 0;
}

/* ---------------------------------------------------------------- segment tables (dead boundaries) */

unsigned long bpe_nm_spans[2];

static int cmp_nm(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* the non-monotone tokens (bpe.h nm_n), none for a monotone vocabulary */
static int nm_prepare(bpe_model *m) {
    if (m->backtrack_ok) return 0;
    size_t k = 0;
    for (uint32_t t = 0; t < m->n_int; t++)
        k += BPE_SPLIT_L(m, t) != t && (BPE_SPLIT_L(m, t) > t || BPE_SPLIT_R(m, t) > t);
    if (!k) return 0;
    uint64_t *tmp = (uint64_t *)malloc(k * 8);
    uint64_t *first = (uint64_t *)calloc(1024, 8);
    uint32_t *key = (uint32_t *)malloc(k * 4), *ext = (uint32_t *)malloc(k * 4);
    if (!tmp || !first || !key || !ext) {
        free(tmp), free(first), free(key), free(ext);
        return -1;
    }
    size_t j = 0;
    for (uint32_t t = 0; t < m->n_int; t++) {
        if (!(BPE_SPLIT_L(m, t) != t && (BPE_SPLIT_L(m, t) > t || BPE_SPLIT_R(m, t) > t))) continue;
        uint32_t e = m->int_ext[t];
        const uint8_t *p = m->dec_bytes + m->dec_off[e];
        uint32_t w = (uint32_t)p[0] << 8 | p[1]; /* (a merged token has >= 2 bytes) */
        tmp[j++] = (uint64_t)w << 32 | e;
    }
    qsort(tmp, k, 8, cmp_nm);
    for (size_t i = 0; i < k; i++) {
        key[i] = (uint32_t)(tmp[i] >> 32);
        ext[i] = (uint32_t)tmp[i];
        first[key[i] >> 6] |= 1ull << (key[i] & 63);
    }
    free(tmp);
    m->nm_first = first;
    m->nm_key = key;
    m->nm_ext = ext;
    m->nm_n = (uint32_t)k;
    return 0;
}

/* The tables a piece's first encoding probes at random (pair and whole-span hash tables, their Bloom filters' and
 * hot tables, per-token info, id map, decode offsets and bytes, the trie) are ~13 MiB (cl100k) to ~25 MiB (o200k) in the
 * artifact's mapping, whose 4 KiB pages are more than the second-level TLB maps: on text the memo has not seen,
 * nearly every probe also walked the page table.  They are copied into one anonymous range advised for 2 MiB pages
 * (where the kernel's THP mode is not "never"; FSTOK_TABLES_HUGE=0 turns it off).  Only the speed depends on it. */
#define TABLES_HUGE_ALIGN ((size_t)2 << 20)
static int tables_huge = -1;

static int thp_possible(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    char buf[128] = {0};
    size_t k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    return strstr(buf, "[never]") == NULL && k > 0;
}

static void tables_to_huge(bpe_model *m) {
#ifdef MADV_HUGEPAGE
    if (tables_huge < 0) {
        const char *e = getenv("FSTOK_TABLES_HUGE");
        tables_huge = !(e && e[0] == '0') && thp_possible();
    }
    if (!tables_huge || m->huge_mem) return;
    const void **orig = m->huge_orig;
    const void *src[11] = {m->pair_tab, m->pair_hot, m->pair_bloom, m->byte_pair, m->span_tab, m->span_hot,
                           m->info, m->int_ext, m->dec_off, m->dec_bytes, m->trie};
    size_t len[11] = {(m->pair_mask + 1) * 8, (m->pair_hot_mask + 1) * 8, ((size_t)1 << (64 - m->bloom_shift)) / 8,
                      65536 * 4, (m->span_mask + 1) * 16, (m->hot_mask + 1) * 16, (size_t)m->n_int * 16,
                      (size_t)m->n_int * 4, ((size_t)m->n_ext + 1) * 4, m->dec_off[m->n_ext],
                      (size_t)m->da_size * 12};
    size_t off[11], total = 0;
    for (int i = 0; i < 11; i++) {
        off[i] = total;
        total += (len[i] + 63) & ~(size_t)63;
    }
    size_t big = total + TABLES_HUGE_ALIGN;
    uint8_t *q = (uint8_t *)mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) return;
    uint8_t *a = (uint8_t *)(((uintptr_t)q + TABLES_HUGE_ALIGN - 1) & ~(uintptr_t)(TABLES_HUGE_ALIGN - 1));
    if (a > q) munmap(q, (size_t)(a - q));
    size_t tail = (size_t)(q + big - (a + total));
    if (tail) munmap(a + total, tail);
    madvise(a, total, MADV_HUGEPAGE); /* (advice only: where it fails the copy works in small pages) */
    for (int i = 0; i < 11; i++) {
        orig[i] = src[i];
        memcpy(a + off[i], src[i], len[i]);
    }
    m->pair_tab = (const uint64_t *)(a + off[0]);
    m->pair_hot = (const uint64_t *)(a + off[1]);
    m->pair_bloom = (const uint64_t *)(a + off[2]);
    m->byte_pair = (const uint32_t *)(a + off[3]);
    m->span_tab = (const uint64_t *)(a + off[4]);
    m->span_hot = (const uint64_t *)(a + off[5]);
    m->info = (const uint32_t *)(a + off[6]);
    m->int_ext = (const uint32_t *)(a + off[7]);
    m->dec_off = (const uint32_t *)(a + off[8]);
    m->dec_bytes = (const uint8_t *)(a + off[9]);
    m->trie = (const uint32_t *)(a + off[10]);
    m->huge_mem = a;
    m->huge_len = total;
#else
    (void)m;
#endif
}

static void tables_from_huge(bpe_model *m) {
    free(m->pair_small_mem);
    m->pair_small_mem = NULL;
    m->pair_small = NULL;
    m->pair_small_base = m->pair_small_val = NULL;
    if (!m->huge_mem) return;
    const void **orig = m->huge_orig;
    m->pair_tab = (const uint64_t *)orig[0];
    m->pair_hot = (const uint64_t *)orig[1];
    m->pair_bloom = (const uint64_t *)orig[2];
    m->byte_pair = (const uint32_t *)orig[3];
    m->span_tab = (const uint64_t *)orig[4];
    m->span_hot = (const uint64_t *)orig[5];
    m->info = (const uint32_t *)orig[6];
    m->int_ext = (const uint32_t *)orig[7];
    m->dec_off = (const uint32_t *)orig[8];
    m->dec_bytes = (const uint8_t *)orig[9];
    m->trie = (const uint32_t *)orig[10];
    munmap(m->huge_mem, m->huge_len);
    m->huge_mem = NULL;
    m->huge_len = 0;
}

/* The pairs of two of the BPE_PAIR_SMALL lowest-ranked internal ids as a rank/select bitmap (bpe_pair_get).
 * Internal ids are ranks, so these are the byte tokens and the earliest merges, the parts of most lookups a first
 * encoding of a piece makes (English under cl100k: 61% of them have both parts below 512).  A pair that does not
 * merge is answered by one bit, one that does by one more load; the hashed table reads its Bloom filter and then
 * one or two probe lines.  (A dense table of ids was 4 MiB: on text never seen before, its lines came from memory
 * and were half of bpe_encode_short's time.) */
#define PAIR_SMALL_WORDS ((size_t)BPE_PAIR_SMALL * BPE_PAIR_SMALL / 64)
#define PAIR_SMALL_AHEAD 16
static void pair_small_build(bpe_model *m) {
    /* the canonical pair of each internal token made of two small ones, as the hashed table answers it: the
     * candidates are listed first, so that each lookup's slot is fetched PAIR_SMALL_AHEAD lookups early */
    size_t count = 0;
    for (uint32_t x = 0; x < m->n_int; x++) {
        uint32_t l = BPE_SPLIT_L(m, x), r = BPE_SPLIT_R(m, x);
        count += l != x && l < BPE_PAIR_SMALL && r < BPE_PAIR_SMALL;
    }
    uint8_t *mem = (uint8_t *)calloc(PAIR_SMALL_WORDS * 12 + count * 4 + 4, 1);
    uint32_t *cand = (uint32_t *)malloc(count * 8 + 8); /* (pair bit, token) */
    if (!mem || !cand) {
        free(mem);
        free(cand);
        return;
    }
    uint64_t *bits = (uint64_t *)mem;
    uint32_t *base = (uint32_t *)(mem + PAIR_SMALL_WORDS * 8), *val = base + PAIR_SMALL_WORDS;
    size_t n = 0;
    for (uint32_t x = 0; x < m->n_int; x++) {
        uint32_t l = BPE_SPLIT_L(m, x), r = BPE_SPLIT_R(m, x);
        if (l == x || l >= BPE_PAIR_SMALL || r >= BPE_PAIR_SMALL) continue;
        cand[2 * n] = l * BPE_PAIR_SMALL + r;
        cand[2 * n + 1] = x;
        n++;
    }
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + PAIR_SMALL_AHEAD < n) {
            uint32_t k = cand[2 * (i + PAIR_SMALL_AHEAD)];
            uint64_t key = (uint64_t)(k / BPE_PAIR_SMALL) << BPE_PAIR_ID_BITS | (k % BPE_PAIR_SMALL);
            __builtin_prefetch(m->pair_tab + bpe_pair_slot(key, m->pair_shift));
        }
        uint32_t k = cand[2 * i], x = cand[2 * i + 1];
        if (bpe_pair_lookup(m, k / BPE_PAIR_SMALL, k % BPE_PAIR_SMALL, 0) != x) continue; /* (only pairs the hashed
                                                                                         table holds: one id a pair) */
        bits[k >> 6] |= 1ull << (k & 63);
        cand[2 * kept] = k;
        cand[2 * kept + 1] = x;
        kept++;
    }
    for (size_t w = 0, c = 0; w < PAIR_SMALL_WORDS; w++) {
        base[w] = (uint32_t)c;
        c += bpe_popcount64(bits[w]);
    }
    for (size_t i = 0; i < kept; i++) {
        uint32_t k = cand[2 * i];
        val[base[k >> 6] + bpe_popcount64(bits[k >> 6] & ((1ull << (k & 63)) - 1))] = cand[2 * i + 1];
    }
    free(cand);
    m->pair_small_mem = mem;
    m->pair_small = bits;
    m->pair_small_base = base;
    m->pair_small_val = val;
}

void bpe_model_place(bpe_model *m) {
    bpe_model_release(m);
    tables_to_huge(m);
}

int bpe_model_prepare(bpe_model *m) {
    pair_small_build(m);
    return nm_prepare(m);
}

void bpe_model_release(bpe_model *m) {
    tables_from_huge(m);
    free(m->win_vb);
    m->win_vb = NULL;
    for (size_t i = 0; i < sizeof m->win_alpha / sizeof m->win_alpha[0]; i++) {
        free(m->win_alpha[i]);
        m->win_alpha[i] = NULL;
    }
    m->seg_big = NULL; /* (views of the artifact, set by the binding) */
    m->seg_tri = NULL;
    free(m->nm_first), free(m->nm_key), free(m->nm_ext);
    m->nm_first = NULL;
    m->nm_key = m->nm_ext = NULL;
    m->nm_n = 0;
}

/* ---------------------------------------------------------------- short spans: O(n^2) sweep */

#define SHORT_STACK 128

int bpe_encode_short(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    uint32_t tok_s[SHORT_STACK], rk_s[SHORT_STACK];
    uint32_t *tok = tok_s, *rk = rk_s;
    if (n > SHORT_STACK) {
        tok = (uint32_t *)malloc(n * sizeof(uint32_t));
        rk = (uint32_t *)malloc(n * sizeof(uint32_t));
        if (!tok || !rk) {
            free(tok);
            free(rk);
            return -1;
        }
    }
    size_t k = n;
    for (size_t i = 0; i < n; i++) tok[i] = m->byte_tok[s[i]];
    for (size_t i = 0; i + 1 < n; i++) rk[i] = m->byte_pair[((uint32_t)s[i] << 8) | s[i + 1]];
    if (n) rk[n - 1] = BPE_NONE;
    while (k > 1) {
        uint32_t best = BPE_NONE;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < k; i++) {
            if (rk[i] < best) {
                best = rk[i];
                bi = i;
            }
        }
        if (best == BPE_NONE) break;
        tok[bi] = best;
        /* remove element bi+1 */
        for (size_t i = bi + 1; i + 1 < k; i++) {
            tok[i] = tok[i + 1];
            rk[i] = rk[i + 1];
        }
        k--;
        rk[k - 1] = BPE_NONE;
        if (bi + 1 < k) rk[bi] = bpe_pair_get(m, tok[bi], tok[bi + 1]);
        else rk[bi] = BPE_NONE;
        if (bi > 0) rk[bi - 1] = bpe_pair_get(m, tok[bi - 1], tok[bi]);
    }
    int rc = bpe_vec_reserve(out, k);
    if (rc == 0) {
        memcpy(out->ids + out->len, tok, k * sizeof(uint32_t));
        out->len += k;
    }
    if (tok != tok_s) {
        free(tok);
        free(rk);
    }
    return rc;
}

/* ---------------------------------------------------------------- long spans: heap, O(n log n) */

static void heap_push(uint64_t *h, size_t *hn, uint64_t v) {
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) >> 1;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *hn) {
    uint64_t top = h[0];
    uint64_t v = h[--(*hn)];
    size_t n = *hn, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && h[c + 1] < h[c]) c++;
        if (h[c] >= v) break;
        h[i] = h[c];
        i = c;
    }
    if (n) h[i] = v;
    return top;
}

/* The linked list of live nodes shared by the heap and bucket-queue encoders: node i (start byte) holds
 * tok[i]; nxt/prv link the live nodes. */

/* merge node i with its successor j into token r (j dies) */
static inline void list_merge(uint32_t *tok, uint32_t *nxt, uint32_t *prv, uint32_t i, uint32_t j, uint32_t r) {
    tok[i] = r;
    tok[j] = BPE_NONE;
    uint32_t k = nxt[j];
    nxt[i] = k;
    if (k != BPE_NONE) prv[k] = i;
}

/* append the tokens of the live nodes from node 0 on */
static int list_emit(const uint32_t *tok, const uint32_t *nxt, bpe_vec *out) {
    size_t cnt = 0;
    for (uint32_t i = 0; i != BPE_NONE; i = nxt[i]) cnt++;
    if (bpe_vec_reserve(out, cnt)) return -1;
    for (uint32_t i = 0; i != BPE_NONE; i = nxt[i]) out->ids[out->len++] = tok[i];
    return 0;
}

int bpe_encode_heap(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    if (n == 0) return 0;
    /* nodes are indexed by their start byte; prev/next link the live ones */
    uint32_t *tok = (uint32_t *)malloc(n * sizeof(uint32_t));
    uint32_t *nxt = (uint32_t *)malloc(n * sizeof(uint32_t));
    uint32_t *prv = (uint32_t *)malloc(n * sizeof(uint32_t));
    uint64_t *heap = (uint64_t *)malloc((2 * n + 1) * sizeof(uint64_t));
    if (!tok || !nxt || !prv || !heap) {
        free(tok), free(nxt), free(prv), free(heap);
        return -1;
    }
    size_t hn = 0;
    for (size_t i = 0; i < n; i++) {
        tok[i] = m->byte_tok[s[i]];
        nxt[i] = (i + 1 < n) ? (uint32_t)(i + 1) : BPE_NONE;
        prv[i] = i ? (uint32_t)(i - 1) : BPE_NONE;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = m->byte_pair[((uint32_t)s[i] << 8) | s[i + 1]];
        if (r != BPE_NONE) heap_push(heap, &hn, ((uint64_t)r << 32) | i);
    }
    while (hn) {
        uint64_t e = heap_pop(heap, &hn);
        uint32_t r = (uint32_t)(e >> 32), i = (uint32_t)e;
        if (tok[i] == BPE_NONE) continue; /* dead node */
        uint32_t j = nxt[i];
        if (j == BPE_NONE || bpe_pair_get(m, tok[i], tok[j]) != r) continue; /* stale */
        list_merge(tok, nxt, prv, i, j, r);
        uint32_t k = nxt[i];
        if (k != BPE_NONE) {
            uint32_t r2 = bpe_pair_get(m, r, tok[k]);
            if (r2 != BPE_NONE) heap_push(heap, &hn, ((uint64_t)r2 << 32) | i);
        }
        uint32_t p = prv[i];
        if (p != BPE_NONE) {
            uint32_t r3 = bpe_pair_get(m, tok[p], r);
            if (r3 != BPE_NONE) heap_push(heap, &hn, ((uint64_t)r3 << 32) | p);
        }
    }
    int rc = list_emit(tok, nxt, out);
    free(tok), free(nxt), free(prv), free(heap);
    return rc;
}

/* ---------------------------------------------------------------- long spans: bucket queue, O(n + V/64) */

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Merges taken in rank order from one bucket per rank (a two-level bitmap finds the next non-empty one).
 * Needs monotone ranks (backtrack_ok): a merge of rank r only creates pairs of rank > r, so a bucket is
 * complete when it is reached and the scan never goes back.  An entry (position i, rank r) is live iff the
 * tokens at i and after it are still r's canonical pair.  Occurrences of one pair overlap only when its
 * two halves are equal (x x x): those buckets are sorted so the leftmost merges first. */
int bpe_encode_bucket(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    if (n == 0) return 0;
    if (n >= 0x7FFFFFFFu / 4) return bpe_encode_heap(m, s, n, out);
    size_t R = m->n_int, W1 = (R + 63) / 64, W2 = (W1 + 63) / 64, cap = 3 * n + 1;
    uint32_t *tok = (uint32_t *)malloc(n * sizeof(uint32_t));
    uint32_t *nxt = (uint32_t *)malloc(n * sizeof(uint32_t));
    uint32_t *prv = (uint32_t *)malloc(n * sizeof(uint32_t));
    uint32_t *head = (uint32_t *)calloc(R, sizeof(uint32_t));        /* entry index + 1, 0 = empty */
    uint32_t *ent = (uint32_t *)malloc(2 * cap * sizeof(uint32_t));  /* (position, next entry + 1) */
    uint64_t *b1 = (uint64_t *)calloc(W1, 8), *b2 = (uint64_t *)calloc(W2, 8);
    uint32_t *tmp = NULL;
    size_t tmp_cap = 0, ne = 0;
    int rc = -1;
    if (!tok || !nxt || !prv || !head || !ent || !b1 || !b2) goto done;
#define BQ_PUSH(r, i)                                                                                              \
    do {                                                                                                           \
        uint32_t r_ = (r);                                                                                         \
        ent[2 * ne] = (uint32_t)(i);                                                                               \
        ent[2 * ne + 1] = head[r_];                                                                                \
        head[r_] = (uint32_t)(++ne);                                                                               \
        b1[r_ >> 6] |= 1ull << (r_ & 63);                                                                          \
        b2[r_ >> 12] |= 1ull << ((r_ >> 6) & 63);                                                                  \
    } while (0)
    for (size_t i = 0; i < n; i++) {
        tok[i] = m->byte_tok[s[i]];
        nxt[i] = (i + 1 < n) ? (uint32_t)(i + 1) : BPE_NONE;
        prv[i] = i ? (uint32_t)(i - 1) : BPE_NONE;
    }
    for (size_t i = n - 1; i-- > 0;) { /* pushed right to left: each list starts leftmost */
        uint32_t r = m->byte_pair[((uint32_t)s[i] << 8) | s[i + 1]];
        if (r != BPE_NONE) BQ_PUSH(r, i);
    }
    for (size_t w2 = 0; w2 < W2; w2++) {
        while (b2[w2]) {
            size_t w1 = (w2 << 6) | (size_t)__builtin_ctzll(b2[w2]);
            if (!b1[w1]) {
                b2[w2] &= b2[w2] - 1;
                continue;
            }
            uint32_t r = (uint32_t)((w1 << 6) | (size_t)__builtin_ctzll(b1[w1]));
            b1[w1] &= b1[w1] - 1;
            if (!b1[w1]) b2[w2] &= ~(1ull << (w1 & 63));
            uint32_t L = BPE_SPLIT_L(m, r), Rt = BPE_SPLIT_R(m, r);
            uint32_t e = head[r];
            head[r] = 0;
            size_t k = 0;
            if (L == Rt) { /* overlapping occurrences possible: leftmost first */
                for (uint32_t x = e; x; x = ent[2 * (x - 1) + 1]) k++;
                if (k > tmp_cap) {
                    free(tmp);
                    tmp_cap = 2 * k;
                    tmp = (uint32_t *)malloc(tmp_cap * sizeof(uint32_t));
                    if (!tmp) goto done;
                }
                k = 0;
                int sorted = 1;
                for (uint32_t x = e; x; x = ent[2 * (x - 1) + 1]) {
                    tmp[k] = ent[2 * (x - 1)];
                    sorted &= k == 0 || tmp[k - 1] < tmp[k];
                    k++;
                }
                if (!sorted) qsort(tmp, k, sizeof(uint32_t), cmp_u32);
            }
            for (size_t q = 0;; q++) {
                uint32_t i;
                if (L == Rt) {
                    if (q >= k) break;
                    i = tmp[q];
                } else {
                    if (!e) break;
                    i = ent[2 * (e - 1)];
                    e = ent[2 * (e - 1) + 1];
                }
                uint32_t j = nxt[i];
                if (tok[i] != L || j == BPE_NONE || tok[j] != Rt) continue; /* stale */
                list_merge(tok, nxt, prv, i, j, r);
                uint32_t k2 = nxt[i];
                if (k2 != BPE_NONE) {
                    uint32_t r2 = bpe_pair_get(m, r, tok[k2]);
                    if (r2 != BPE_NONE) BQ_PUSH(r2, i);
                }
                uint32_t p = prv[i];
                if (p != BPE_NONE) {
                    uint32_t r3 = bpe_pair_get(m, tok[p], r);
                    if (r3 != BPE_NONE) BQ_PUSH(r3, p);
                }
            }
        }
    }
#undef BQ_PUSH
    rc = list_emit(tok, nxt, out);
done:
    free(tok), free(nxt), free(prv), free(head), free(ent), free(b1), free(b2), free(tmp);
    return rc;
}

/* ---------------------------------------------------------------- long spans: backtracking, O(n) */

static inline uint32_t longest_match(const bpe_model *m, const uint8_t *s, size_t n) {
    uint32_t node = 0, best = BPE_NONE;
    const uint32_t *tr = m->trie;
    for (size_t i = 0; i < n; i++) {
        uint64_t t = (uint64_t)((int64_t)(int32_t)tr[3 * node] + s[i]);
        if (t >= m->da_size || tr[3 * t + 1] != node) break;
        node = (uint32_t)t;
        uint32_t tk = tr[3 * node + 2];
        if (tk != BPE_NONE) best = tk;
    }
    return best;
}

/* Would BPE keep t1|t2 as a boundary, i.e. never merge across it?  (rust-gems is_valid_token_pair) */
static inline int valid_pair(const bpe_model *m, uint32_t t1, uint32_t t2) {
    uint32_t limit = BPE_NONE;
    for (;;) {
        uint32_t c = bpe_pair_get(m, t1, t2);
        if (c != BPE_NONE && c < limit) return 0;
        if (t1 > t2) {
            limit = t1;
            t1 = BPE_SPLIT_R(m, t1);
            if (t1 == limit) {
                limit = t2 + 1;
                t2 = BPE_SPLIT_L(m, t2);
                if (t2 + 1 == limit) return 1;
            }
        } else {
            limit = t2 + 1;
            t2 = BPE_SPLIT_L(m, t2);
            if (t2 + 1 == limit) {
                limit = t1;
                t1 = BPE_SPLIT_R(m, t1);
                if (t1 == limit) return 1;
            }
        }
    }
}

/* spans of at least BT_SWITCH_MIN bytes that undid more than one token per 8 bytes over their first
 * BT_PROBE_LEN bytes go to the window encoder instead (same result, no backtracking; digit runs under r50k: a
 * 512-byte probe instead of 2 KiB took 100k digits 16.0 -> 15.25 ns/byte) */
#define BT_SWITCH_MIN 8192
static int encode_window(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out);
#define BT_PROBE_LEN 512
/* the hand-off, out of line: encode_window inlined here made the backtracking loop's code worse (1 MB of 'a' +4%) */
__attribute__((noinline, cold)) static int encode_window_cold(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    return encode_window(m, s, n, out);
}

int bpe_encode_backtrack(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    if (n == 0) return 0;
    size_t words = (n + 1 + 63) / 64;
    uint64_t bits_s[16];
    uint64_t *bits = words <= 16 ? bits_s : (uint64_t *)malloc(words * sizeof(uint64_t));
    if (!bits) return -1;
    memset(bits, 0xFF, words * sizeof(uint64_t));
    size_t base = out->len, pos = 0, pops = 0;
    int probe = n >= BT_SWITCH_MIN;
    uint32_t next = longest_match(m, s, n);
    while (next != BPE_NONE) {
        if (probe && pos >= BT_PROBE_LEN) {
            /* long span that keeps undoing tokens (digit runs): the bucket queue does not backtrack */
            probe = 0;
            if (8 * pops > pos) {
                if (bits != bits_s) free(bits);
                out->len = base;
                return encode_window_cold(m, s, n, out);
            }
        }
        uint32_t token = next;
        uint32_t last = out->len > base ? out->ids[out->len - 1] : BPE_NONE;
        for (;;) {
            size_t end = pos + BPE_LEN(m, token);
            if (end <= n && ((bits[end >> 6] >> (end & 63)) & 1) && (last == BPE_NONE || valid_pair(m, last, token))) {
                if (bpe_vec_reserve(out, 1)) {
                    if (bits != bits_s) free(bits);
                    return -1;
                }
                out->ids[out->len++] = token;
                pos = end;
                next = pos < n ? longest_match(m, s + pos, n - pos) : BPE_NONE;
                break;
            } else if (BPE_NEXT_PREFIX(m, token) != BPE_NONE) {
                token = BPE_NEXT_PREFIX(m, token);
            } else {
                bits[pos >> 6] &= ~(1ull << (pos & 63));
                if (last != BPE_NONE) {
                    /* retry `last` from its start: the cleared bit makes it move on to its prefixes */
                    pops++;
                    out->len--;
                    pos -= BPE_LEN(m, last);
                    next = last;
                } else {
                    next = BPE_NONE;
                }
                break;
            }
        }
    }
    if (bits != bits_s) free(bits);
    if (pos != n) {
        /* cannot happen for a vocabulary that passed the compile-time checks; stay exact anyway */
        __atomic_fetch_add(&bpe_backtrack_fallbacks, 1, __ATOMIC_RELAXED);
        out->len = base;
        return bpe_encode_heap(m, s, n, out);
    }
    return 0;
}

#include "bpe_window.h" /* window encoder, stitched and small-alphabet lanes */

int bpe_encode_window(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) { return encode_window(m, s, n, out); }

/* ---------------------------------------------------------------- dispatch */

/* The memo is ~13 MiB, mostly the piece cache.  Anonymous pages come zeroed and are only materialised
 * where written, so a new memo costs no 13 MiB memset (a first encode of a short text touches a few
 * pages); entries of generation 0 are empty. */
/* Transparent huge pages: the memo is probed at random lines all over its 13 MiB, which in 4 KiB pages is
 * ~3,300 pages, more than the core's second-level TLB maps, so a probe that hits the cache could still
 * walk the page table.  Where the kernel's THP mode is "madvise" (the usual default) only an madvise'd
 * range gets 2 MiB pages, and only where it is 2 MiB aligned: the mapping is made 2 MiB larger and
 * trimmed to an aligned start.  FSTOK_MEMO_HUGE=0 turns this off (a new memo then costs less: 2 MiB
 * pages are zeroed whole when first touched). */
#define MEMO_HUGE_ALIGN ((size_t)2 << 20)
static int memo_huge = -1;
bpe_memo *bpe_memo_new(void) {
    if (memo_huge < 0) {
        const char *e = getenv("FSTOK_MEMO_HUGE");
        memo_huge = !(e && e[0] == '0');
    }
    size_t sz = sizeof(bpe_memo);
    void *p;
#ifdef MADV_HUGEPAGE
    if (memo_huge) {
        size_t big = sz + MEMO_HUGE_ALIGN;
        uint8_t *q = (uint8_t *)mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED) return NULL;
        uint8_t *a = (uint8_t *)(((uintptr_t)q + MEMO_HUGE_ALIGN - 1) & ~(uintptr_t)(MEMO_HUGE_ALIGN - 1));
        if (a > q) munmap(q, (size_t)(a - q));
        size_t tail = (size_t)(q + big - (a + sz));
        if (tail) munmap(a + sz, tail);
        madvise(a, sz, MADV_HUGEPAGE); /* (advice only: where it fails the memo works in small pages) */
        p = a;
    } else
#endif
    {
        p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
    }
    bpe_memo *memo = (bpe_memo *)p;
    memo->gen = memo->lgen = 1;
    return memo;
}

void bpe_memo_free(bpe_memo *memo) {
    if (memo) munmap(memo, sizeof(bpe_memo));
}

/* empty the long part */
static void lmemo_reset(bpe_memo *memo) {
    if (++memo->lgen == 0) { /* wrapped: entries of generation 0 would look valid again */
        memset(memo->ls, 0, sizeof memo->ls);
        memo->lgen = 1;
    }
    memo->lused = memo->lcount = 0;
}

void bpe_memo_clear(bpe_memo *memo) {
    if (++memo->gen == 0x10000) {
        memset(memo->e, 0, sizeof memo->e);
        memset(memo->pc, 0, sizeof memo->pc);
        memo->gen = 1;
    }
    lmemo_reset(memo);
}

/* short memo: the set (2 entries) of a span of <= 24 bytes; k receives its key words, tag 8 hash bits */
static inline bpe_memo_entry *memo_set(bpe_memo *memo, const uint8_t *s, size_t n, uint64_t k[3], uint8_t *tag) {
    k[0] = bpe_head8(s, n < 8 ? n : 8);
    k[1] = n > 8 ? bpe_head8(s + 8, n < 16 ? n - 8 : 8) : 0;
    k[2] = n > 16 ? bpe_head8(s + 16, n - 16) : 0;
    uint64_t h = (k[0] * 0x9E3779B97F4A7C15ull) ^ (k[1] * 0xC2B2AE3D27D4EB4Full) ^ (k[2] * 0x165667B19E3779F9ull) ^ n;
    h ^= h >> 29;
    *tag = (uint8_t)(h >> 56);
    return &memo->e[2 * (h & (BPE_MEMO_N / 2 - 1))];
}

static inline int memo_match(const bpe_memo_entry *e, uint32_t gen, size_t n, const uint64_t k[3]) {
    return e->len == n && e->gen == (uint16_t)gen && e->k[0] == k[0] && e->k[1] == k[1] && e->k[2] == k[2];
}

/* ntok value of a short entry whose ids live in the long part (more than BPE_MEMO_MAXTOK tokens) */
#define MEMO_IN_LONG 0xFF

/* fill entry e (way 0 of its set, after moving the old way 0 to way 1 when shift; else in place) */
static inline void memo_put(bpe_memo_entry *e, int shift, uint32_t gen, size_t n, const uint64_t k[3], uint8_t tag,
                            const uint32_t *ids, size_t nt) {
    if (shift) {
        e[1] = e[0];
        e->len1 = e[1].len;
        e->tag1 = e[1].tag;
    }
    e->gen = (uint16_t)gen;
    e->len = (uint8_t)n;
    e->tag = tag;
    e->k[0] = k[0], e->k[1] = k[1], e->k[2] = k[2];
    if (nt <= BPE_MEMO_MAXTOK) {
        e->ntok = (uint8_t)nt;
        memcpy(e->ids, ids, nt * 4);
    } else {
        e->ntok = MEMO_IN_LONG;
    }
}

/* long memo lookup: 1 and the ids appended on a hit, 0 on a miss, -1 on allocation failure */
static inline int lmemo_get(const bpe_memo *memo, uint64_t h, const uint8_t *s, size_t n, bpe_vec *out) {
    uint32_t i = (uint32_t)(h >> (64 - BPE_LMEMO_BITS)), h32 = (uint32_t)(h >> 32);
    for (;;) {
        const bpe_lmemo_slot *sl = &memo->ls[i];
        if (sl->gen != memo->lgen) return 0;
        if (sl->h == h32 && sl->len == n && memcmp(memo->arena + sl->off, s, n) == 0) {
            if (bpe_vec_reserve(out, sl->ntok)) return -1;
            memcpy(out->ids + out->len, memo->arena + sl->off + ((n + 3) & ~(size_t)3), (size_t)sl->ntok * 4);
            out->len += sl->ntok;
            return 1;
        }
        i = (i + 1) & (BPE_LMEMO_SLOTS - 1);
    }
}

/* store a long entry; `weight` > 1 charges the part's capacity as if that many spans had been stored (only a
 * sample of the spans is stored while the memo is skipped: its entries should not outlive those of a full one) */
static void lmemo_put(bpe_memo *memo, uint64_t h, const uint8_t *s, size_t n, const uint32_t *ids, size_t nt,
                      uint32_t weight) {
    size_t kb = (n + 3) & ~(size_t)3, need = kb + 4 * nt;
    if (n == 0 || n > BPE_LMEMO_MAXLEN || need > BPE_LMEMO_ARENA / 4) return;
    if (memo->lused + need > BPE_LMEMO_ARENA || memo->lcount >= BPE_LMEMO_SLOTS / 2) lmemo_reset(memo);
    uint32_t i = (uint32_t)(h >> (64 - BPE_LMEMO_BITS)), h32 = (uint32_t)(h >> 32);
    while (memo->ls[i].gen == memo->lgen) {
        if (memo->ls[i].h == h32 && memo->ls[i].len == n && memcmp(memo->arena + memo->ls[i].off, s, n) == 0) return;
        i = (i + 1) & (BPE_LMEMO_SLOTS - 1);
    }
    uint8_t *p = memo->arena + memo->lused;
    memcpy(p, s, n);
    memcpy(p + kb, ids, nt * 4);
    memo->ls[i].h = h32;
    memo->ls[i].gen = memo->lgen;
    memo->ls[i].off = memo->lused;
    memo->ls[i].len = (uint16_t)n;
    memo->ls[i].ntok = (uint16_t)nt;
    memo->lused += (uint32_t)need;
    memo->lcount++;
    if (weight > 1) { /* charged, not used: the next put that does not fit empties the part */
        size_t extra = (weight - 1) * need;
        memo->lused = memo->lused + extra > BPE_LMEMO_ARENA ? BPE_LMEMO_ARENA : memo->lused + (uint32_t)extra;
        memo->lcount += weight - 1;
    }
}

/* run the encoder chosen for a span that is not one token, append external ids */
/* Token density (tokens per byte << 8, moving average) of the spans this thread sent to backtracking or the window
 * encoder.  Natural text stays well below WIN_DENSITY (0.2-0.6 tokens per byte: backtracking, whose cost follows
 * the tokens, is 1.5-3x faster there); random text is at 0.75-0.95 (one or two bytes per token), where the window
 * encoder, whose cost follows the merges, is 1.5-2x faster.  Only the speed depends on it. */
#define WIN_DENSITY 192
static _Thread_local uint32_t span_density = 0;

/* monotone ranks, a span longer than short_max(_mb): backtracking or the window encoder (out of line: keeps the
 * callers' per-piece path small) */
__attribute__((noinline)) static int encode_long(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    size_t base = out->len;
    uint32_t d = span_density;
    int rc = d >= WIN_DENSITY ? encode_window(m, s, n, out) : bpe_encode_backtrack(m, s, n, out);
    if (!rc) span_density = d + (uint32_t)((int32_t)(((out->len - base) << 8) / n - d) >> 3);
    return rc;
}

/* one segment (or a whole span without dead boundaries), internal ids */
static inline int encode_plain(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    uint32_t lim = (s[n - 1] & 0x80) ? m->short_max_mb : m->short_max;
    if (n <= lim || (!m->backtrack_ok && n <= m->short_max)) return bpe_encode_short(m, s, n, out);
    else if (m->backtrack_ok) return encode_long(m, s, n, out);
    else if (m->nm_n && m->nm_use) {
        int absent = bpe_nm_absent(m, s, n);
        __atomic_fetch_add(&bpe_nm_spans[absent], 1, __ATOMIC_RELAXED);
        return absent ? encode_long(m, s, n, out) : bpe_encode_heap(m, s, n, out);
    } else
        return bpe_encode_heap(m, s, n, out);
}

/* Segments of a span.  The search for the next dead boundary looks at most SEG_SCAN boundaries past the last one:
 * when there is none there, the rest of the span is encoded as one piece (exact either way; this only bounds the
 * scan on spans that have no dead boundary, e.g. digit runs) */
#define SEG_SCAN 64

static inline size_t seg_next(const bpe_model *m, const uint8_t *s, size_t n, size_t from) {
    size_t e = n - from > SEG_SCAN ? from + SEG_SCAN : n;
    for (size_t b = from; b < e; b++)
        if (!bpe_seg_cross(m, s, n, b)) return b;
    return n;
}

/* emit segment s[0:len) (internal ids); out has room for len ids.  One to three bytes: no merge search */
static inline int seg_emit(const bpe_model *m, const uint8_t *s, size_t len, bpe_vec *out) {
    uint32_t *o = out->ids + out->len;
    if (len == 1) {
        o[0] = m->byte_tok[s[0]];
        out->len += 1;
    } else if (len == 2) {
        uint32_t r = m->byte_pair[(uint32_t)s[0] << 8 | s[1]];
        if (r != BPE_NONE) {
            o[0] = r;
            out->len += 1;
        } else {
            o[0] = m->byte_tok[s[0]];
            o[1] = m->byte_tok[s[1]];
            out->len += 2;
        }
    } else if (len == 3) {
        uint32_t r01 = m->byte_pair[(uint32_t)s[0] << 8 | s[1]], r12 = m->byte_pair[(uint32_t)s[1] << 8 | s[2]];
        if (r01 == BPE_NONE && r12 == BPE_NONE) {
            o[0] = m->byte_tok[s[0]];
            o[1] = m->byte_tok[s[1]];
            o[2] = m->byte_tok[s[2]];
            out->len += 3;
        } else if (r01 <= r12) { /* the lower rank first; on a tie (x x x) the leftmost */
            uint32_t tz = m->byte_tok[s[2]], r = bpe_pair_get(m, r01, tz);
            if (r != BPE_NONE) {
                o[0] = r;
                out->len += 1;
            } else {
                o[0] = r01;
                o[1] = tz;
                out->len += 2;
            }
        } else {
            uint32_t tx = m->byte_tok[s[0]], r = bpe_pair_get(m, tx, r12);
            if (r != BPE_NONE) {
                o[0] = r;
                out->len += 1;
            } else {
                o[0] = tx;
                o[1] = r12;
                out->len += 2;
            }
        }
    } else {
        return encode_plain(m, s, len, out);
    }
    return 0;
}

/* Dead boundaries as bits, without a branch per boundary: bit k is set when boundary b0 + k of the pre-token s[0:n) is
 * dead (bpe_seg_cross), for the boundaries in [b0, e); 2 <= b0 < e <= n, e - b0 <= 63.  One bigram flag and one
 * trigram bit per boundary: the trigram s[b-1..b+1] of boundary b is the left trigram of boundary b + 1. */
static inline uint64_t seg_dead_bits(const bpe_model *m, const uint8_t *s, size_t n, size_t b0, size_t e) {
    const uint8_t *big = m->seg_big;
    const uint32_t *tri = m->seg_tri;
    uint32_t w = (uint32_t)s[b0 - 2] << 8 | s[b0 - 1]; /* the bytes before boundary b: s[b-2] s[b-1] (then s[b]) */
    size_t last = e < n ? e : n - 1; /* boundaries below `last` have a byte after them (s[b + 1]) */
    uint64_t live = 0;
#define SEG_TRI_BIT(w3) ((tri[bpe_tri_bit(w3) >> 5] >> (bpe_tri_bit(w3) & 31)) & 1u)
    w = w << 8 | s[b0];
    uint32_t tl = SEG_TRI_BIT(w);
    for (size_t b = b0; b < last; b++) {
        w = (w << 8 | s[b + 1]) & 0xFFFFFFu; /* s[b-1] s[b] s[b+1] */
        uint32_t f = big[w >> 8], tr = SEG_TRI_BIT(w);
        /* BPE_SEG_IN, START, END are bits 0, 1, 2 of f (f < 8), tl and tr are 0 or 1: the result is 0 or 1 */
        live |= (uint64_t)(f & (f >> 1 | tl) & (f >> 2 | tr)) << (b - b0);
        tl = tr;
    }
#undef SEG_TRI_BIT
    if (last < e) { /* the last boundary of the pre-token: no token ends after s[n - 1] */
        uint32_t f = big[(uint32_t)s[last - 1] << 8 | s[last]];
        live |= (uint64_t)(f & (f >> 1 | tl) & (f >> 2)) << (last - b0);
    }
    return ~live & ((2ull << (e - 1 - b0)) - 1);
}

/* Share of dead boundaries in the spans segmented with this thread's memo (bpe_seg_rate; none without a memo: then
 * always seg_dead_bits), counted over SEG_RATE_WINDOW boundaries at a time.
 * At >= SEG_BRANCHY_RATE (r50k on random text: 92%) the branchy scan of seg_next mispredicts rarely and is cheaper
 * than seg_dead_bits; below it (cl100k 84%, o200k 70%) its branches mispredict and seg_dead_bits wins.  Only
 * encode_segmented_bits counts (the scan's loop is left as it was), so while the scan is chosen, one span in 16
 * still takes seg_dead_bits and keeps the rate current.  Only the speed depends on it. */
#define SEG_RATE_WINDOW 4096
#define SEG_BRANCHY_RATE 225 /* of 256: 88% */
static int seg_branchy_rate = -1; /* SEG_BRANCHY_RATE, or $FSTOK_BPE_SEG_RATE (0-257; tests: 0 = the scan, 257 = bits) */

static inline void seg_rate_add(bpe_seg_rate *r, size_t dead, size_t all) {
    if (!r) return;
    r->dead += (uint32_t)dead;
    r->all += (uint32_t)all;
    if (r->all >= SEG_RATE_WINDOW) {
        int th = __atomic_load_n(&seg_branchy_rate, __ATOMIC_RELAXED);
        if (th < 0) {
            const char *e = getenv("FSTOK_BPE_SEG_RATE");
            int v = e && *e ? atoi(e) : -1;
            th = v >= 0 && v <= 257 ? v : SEG_BRANCHY_RATE;
            __atomic_store_n(&seg_branchy_rate, th, __ATOMIC_RELAXED);
        }
        r->branchy = (uint64_t)r->dead * 256 >= (uint64_t)th * r->all;
        r->dead = r->all = 0;
    }
}

/* a span whose first dead boundary is d < n: BPE of each segment (merges never cross a dead boundary), the next dead
 * boundary found by the branchy scan (seg_next) */
__attribute__((noinline)) static int encode_segmented(const bpe_model *m, const uint8_t *s, size_t n, size_t d,
                                                      bpe_vec *out) {
    if (bpe_vec_reserve(out, n)) return -1;
    size_t a = 0;
    for (;;) {
        if (seg_emit(m, s + a, d - a, out)) return -1;
        if (d >= n) return 0;
        a = d;
        d = seg_next(m, s, n, a + 1);
    }
}

/* the same with the boundaries examined 63 at a time (seg_dead_bits): segments of one or two bytes (most of random
 * text's) are emitted without a branch on their length.  A segment that runs on for SEG_SCAN boundaries without a dead
 * one takes the rest of the span (exact either way: this bounds the work on spans without dead boundaries). */
__attribute__((noinline)) static int encode_segmented_bits(const bpe_model *m, const uint8_t *s, size_t n, size_t d,
                                                           bpe_vec *out, bpe_seg_rate *rate) {
    if (bpe_vec_reserve(out, n + 1)) return -1; /* a one-byte segment also writes the slot after its id */
    if (seg_emit(m, s, d, out)) return -1;
    const uint32_t *bt = m->byte_tok, *bp = m->byte_pair;
    uint32_t *o = out->ids + out->len;
    size_t a = d, b0 = d + 1;
    for (;;) {
        size_t e = n - b0 > 63 ? b0 + 63 : n;
        uint64_t bits = b0 < e ? seg_dead_bits(m, s, n, b0, e) : 0;
        size_t segs = 0; /* dead bits of the block: segments closed, less the end marker */
        if (e == n) bits |= 1ull << (n - b0); /* the end of the span closes the last segment */
        while (bits) {
            segs++;
            size_t c = b0 + (size_t)__builtin_ctzll(bits), len = c - a;
            bits &= bits - 1;
            if (__builtin_expect(len <= 2, 1)) {
                uint32_t x = s[a], y = s[c - 1], r = bp[x << 8 | y], tx = bt[x], ty = bt[y];
                int two = len == 2, merged = two & (r != BPE_NONE);
                o[0] = merged ? r : tx;
                o[1] = ty;
                o += 1 + (two & !merged);
            } else {
                out->len = (size_t)(o - out->ids);
                if (seg_emit(m, s + a, len, out)) return -1;
                o = out->ids + out->len;
            }
            a = c;
        }
        seg_rate_add(rate, segs - (e == n), e - b0);
        if (e == n) break;
        if (e - a >= SEG_SCAN) {
            out->len = (size_t)(o - out->ids);
            return seg_emit(m, s + a, n - a, out);
        }
        b0 = e;
    }
    out->len = (size_t)(o - out->ids);
    return 0;
}

static inline int encode_multi(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out, bpe_seg_rate *rate) {
    size_t base = out->len;
    int rc;
    size_t d = m->seg_big ? seg_next(m, s, n, 1) : n;
    rc = d >= n                      ? encode_plain(m, s, n, out)
         : rate && rate->branchy && (++rate->calls & 15) ? encode_segmented(m, s, n, d, out)
                                 : encode_segmented_bits(m, s, n, d, out, rate);
    if (rc) return rc;
    if (!m->int_is_ext)
        for (size_t i = base; i < out->len; i++) out->ids[i] = m->int_ext[out->ids[i]];
    return 0;
}

int bpe_encode_span_avail(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, size_t avail, bpe_vec *out) {
    if ((n <= m->hash_max || !m->backtrack_ok || !m->trie_has_spans) && bpe_seg_may_be_token(m, s, n)) {
        uint32_t id = bpe_span_get_w(m, s, n, bpe_head8_fast(s, n, avail));
        if (id != BPE_NONE) {
            if (bpe_vec_reserve(out, 1)) return -1;
            out->ids[out->len++] = id;
            return 0;
        }
    }
    return bpe_encode_span_multi(m, memo, s, n, out);
}

/* Adaptive memo.  On text whose pre-tokens do not repeat (random bytes), nearly every lookup misses, and a miss reads
 * a set line that is not in cache (o200k random: 15-20% of the time).  So each thread keeps, per size class
 * (<= 16 bytes: the piece cache missed; <= 24; longer), the hit rate of the lookups in a fixed sample of the memo:
 * the sets (short part) or hashes (long part) whose low MEMO_SAMPLE_BITS index bits are zero, 1/64 of them (set
 * sampling: those sets receive all of their spans in both modes, so their hit rate is the full memo's).  While it is
 * below MEMO_SKIP_RATE, spans outside the sample neither look up nor store.  Only the speed depends on it.  1/64
 * rather than 1/16: the sampled lookups of random text still miss the cache (a quarter of
 * bpe_encode_span_multi's time); random text 3-7% faster, natural text unchanged. */
#define MEMO_SAMPLE_BITS 6
#define MEMO_SAMPLE_MASK ((1u << MEMO_SAMPLE_BITS) - 1)
#define MEMO_SKIP_RATE 154 /* of 256 (60%): cl100k random text hits ~46% and is faster without the memo */
/* the same for spans of <= 16 bytes (those that missed the piece cache): o200k random text hits ~48% there, and the
 * moving average, which swings by about +-9% over its ~16 lookups, kept crossing 60%, so the memo was on for long
 * stretches; a miss reads a set line that is not in cache.  75%: o200k random 8.3 -> 8.0 ns/byte, natural text
 * unchanged */
#define MEMO_SKIP_RATE0 192
static _Thread_local uint16_t memo_rate[3] = {256, 256, 256};

/* a lookup in the sample: update the class's hit rate (moving average over ~16 lookups) */
static inline void memo_seen(int c, int hit) {
    uint32_t r = memo_rate[c];
    memo_rate[c] = (uint16_t)(hit ? r + ((256 - r) >> 4) : r - (r >> 4));
}

int bpe_encode_span_multi(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, bpe_vec *out) {
    size_t base = out->len;
    int rc;
    if (!memo) return encode_multi(m, s, n, out, NULL);
    bpe_seg_rate *rate = &memo->seg;
    if (n <= BPE_MEMO_MAXLEN) {
        uint64_t k[3];
        uint8_t tag;
        int c = n > 16;
        bpe_memo_entry *set = memo_set(memo, s, n, k, &tag), *dst = NULL;
        int sampled = ((size_t)(set - memo->e) >> 1 & MEMO_SAMPLE_MASK) == 0;
        if (!sampled && memo_rate[c] < (c ? MEMO_SKIP_RATE : MEMO_SKIP_RATE0)) return encode_multi(m, s, n, out, rate);
        for (int w = 0; w < 2; w++) {
            const bpe_memo_entry *e = set + w;
            if (!memo_match(e, memo->gen, n, k)) {
                if (w == 0 && (set->len1 != n || set->tag1 != tag)) break; /* not in way 1 either */
                continue;
            }
            if (e->ntok != MEMO_IN_LONG) {
                if (bpe_vec_reserve(out, BPE_MEMO_MAXTOK)) return -1;
                memcpy(out->ids + out->len, e->ids, sizeof e->ids);
                out->len += e->ntok;
                if (sampled) memo_seen(c, 1);
                if (w) { /* keep the most recently used entry in way 0 */
                    bpe_memo_entry t = set[0];
                    set[0] = set[1];
                    set[1] = t;
                    set[0].len1 = t.len;
                    set[0].tag1 = t.tag;
                }
                return 0;
            }
            int r = lmemo_get(memo, bpe_hash_bytes(s, n), s, n, out);
            if (r) {
                if (sampled) memo_seen(c, 1);
                return r < 0 ? -1 : 0;
            }
            dst = set + w; /* the long part was emptied since: refill in place */
            break;
        }
        if (sampled) memo_seen(c, 0);
        if ((rc = encode_multi(m, s, n, out, rate))) return rc;
        size_t nt = out->len - base;
        memo_put(dst ? dst : set, dst == NULL, memo->gen, n, k, tag, out->ids + base, nt);
        if (nt > BPE_MEMO_MAXTOK) lmemo_put(memo, bpe_hash_bytes(s, n), s, n, out->ids + base, nt, 1);
        return 0;
    }
    if (n > BPE_LMEMO_MAXLEN) return encode_multi(m, s, n, out, rate);
    /* the sample of the long part: spans whose cheap hash (first and last 8 bytes, length) has zero low bits, so
     * that a skipped span is not hashed whole (bpe_hash_bytes: a loop over the span) */
    uint64_t c = (bpe_rd64(s) ^ (bpe_rd64(s + n - 8) * 0xC2B2AE3D27D4EB4Full) ^ n) * 0x9E3779B97F4A7C15ull;
    int sampled = ((c >> 40) & MEMO_SAMPLE_MASK) == 0, skip = memo_rate[2] < MEMO_SKIP_RATE;
    if (!sampled && skip) return encode_multi(m, s, n, out, rate);
    uint64_t h = bpe_hash_bytes(s, n);
    int r = lmemo_get(memo, h, s, n, out);
    if (sampled) memo_seen(2, r != 0);
    if (r) return r < 0 ? -1 : 0;
    if ((rc = encode_multi(m, s, n, out, rate))) return rc;
    lmemo_put(memo, h, s, n, out->ids + base, out->len - base, skip ? 1u << MEMO_SAMPLE_BITS : 1);
    return 0;
}

int bpe_encode_span_memo(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, bpe_vec *out) {
    return bpe_encode_span_avail(m, memo, s, n, n, out);
}

int bpe_encode_span(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    return bpe_encode_span_avail(m, NULL, s, n, n, out);
}

