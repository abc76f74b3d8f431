/* Byte-level BPE span encoders over the compiled tables (see bpe.h). No Python here. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include "bpe.h"

#include <stddef.h>
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

int bpe_model_prepare(bpe_model *m) {
    bpe_model_release(m);
    size_t tri_words = ((size_t)1 << BPE_SEG_TRI_BITS) / 64;
    uint64_t *mem = (uint64_t *)calloc(65536 / 8 + tri_words, 8);
    if (!mem) return -1;
    uint8_t *big = (uint8_t *)mem;
    uint64_t *tri = mem + 65536 / 8;
    for (uint32_t t = 0; t < m->n_int; t++) {
        uint32_t e = m->int_ext[t];
        if (e >= m->n_ext) continue;
        const uint8_t *p = m->dec_bytes + m->dec_off[e];
        size_t len = m->dec_off[e + 1] - m->dec_off[e];
        if (len < 2) continue;
        big[(uint32_t)p[0] << 8 | p[1]] |= BPE_SEG_START;
        big[(uint32_t)p[len - 2] << 8 | p[len - 1]] |= BPE_SEG_END;
        for (size_t i = 0; i + 1 < len; i++) big[(uint32_t)p[i] << 8 | p[i + 1]] |= BPE_SEG_IN;
        for (size_t i = 0; i + 2 < len; i++) {
            uint64_t k = ((uint64_t)p[i] << 16 | (uint64_t)p[i + 1] << 8 | p[i + 2]) * 0x9E3779B97F4A7C15ull;
            uint64_t bit = k >> (64 - BPE_SEG_TRI_BITS);
            tri[bit >> 6] |= 1ull << (bit & 63);
        }
    }
    m->seg_mem = mem;
    m->seg_big = big;
    m->seg_tri = tri;
    return 0;
}

void bpe_model_release(bpe_model *m) {
    free(m->win_vb);
    m->win_vb = NULL;
    for (size_t i = 0; i < sizeof m->win_alpha / sizeof m->win_alpha[0]; i++) {
        free(m->win_alpha[i]);
        m->win_alpha[i] = NULL;
    }
    free(m->seg_mem);
    m->seg_mem = NULL;
    m->seg_big = NULL;
    m->seg_tri = NULL;
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

/* ---------------------------------------------------------------- window encoder: merges in rank order, <= BPE_WIN bytes */

#define BPE_WIN 128 /* window bytes: positions fit in the low 8 bits of a key, 0xFF is "none" */
#define WKEY_NONE 0xFFFFFFFFu
#define WPOS_NONE 0xFFu

/* bpe_pair_get without the hot table (a window's pairs are few and stay in cache) */
static inline uint32_t win_pair(const bpe_model *m, uint32_t a, uint32_t b) { return bpe_pair_lookup(m, a, b, 0); }

static inline uint32_t win_key(uint32_t rank, size_t i) { return rank == BPE_NONE ? WKEY_NONE : (rank << 8) | (uint32_t)i; }

/* the AVX2 clone of win_encode scans 8 keys per instruction (2-3x faster on spans with few merges) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define WIN_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define WIN_CLONES
#endif

/* BPE of s[0:n), 1 <= n <= BPE_WIN: repeatedly merge the lowest-ranked pair, leftmost first.  key[i] = rank << 8 | i
 * for the pair that starts at live position i (WKEY_NONE: none or dead), so the smallest key names the next merge
 * and ties go to the leftmost occurrence; it is found by a scan of the window (vectorized).  Cost: O(n) setup plus
 * O(n / 8) per merge, with no hashing of the span and no trie walk: cheaper than backtracking where tokens are
 * short (few merges per byte).  Internal ids to out, their start offsets to st; returns the count. */
WIN_CLONES
static size_t win_encode(const bpe_model *m, const uint8_t *s, size_t n, uint32_t *out, uint8_t *st) {
    uint32_t key[BPE_WIN] __attribute__((aligned(64))), tok[BPE_WIN];
    uint8_t nx[BPE_WIN], pv[BPE_WIN];
    size_t nw = (n + 15) & ~(size_t)15;
    for (size_t i = 0; i < n; i++) {
        tok[i] = m->byte_tok[s[i]];
        nx[i] = (uint8_t)(i + 1);
        pv[i] = (uint8_t)(i - 1);
    }
    nx[n - 1] = WPOS_NONE;
    pv[0] = WPOS_NONE;
    for (size_t i = 0; i + 1 < n; i++) key[i] = win_key(m->byte_pair[((uint32_t)s[i] << 8) | s[i + 1]], i);
    for (size_t i = n - 1; i < nw; i++) key[i] = WKEY_NONE;
    for (;;) {
        uint32_t kk = WKEY_NONE;
        for (size_t i = 0; i < nw; i++) kk = key[i] < kk ? key[i] : kk;
        if (kk == WKEY_NONE) break;
        uint32_t r = kk >> 8;
        size_t i = kk & 0xFF, j = nx[i], q = nx[j];
        tok[i] = r;
        key[j] = WKEY_NONE;
        nx[i] = (uint8_t)q;
        if (q != WPOS_NONE) {
            pv[q] = (uint8_t)i;
            key[i] = win_key(win_pair(m, r, tok[q]), i);
        } else {
            key[i] = WKEY_NONE;
        }
        size_t p = pv[i];
        if (p != WPOS_NONE) key[p] = win_key(win_pair(m, tok[p], r), p);
    }
    size_t c = 0;
    for (size_t i = 0; i != WPOS_NONE; i = nx[i]) {
        out[c] = tok[i];
        st[c++] = (uint8_t)i;
    }
    return c;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define WIN_X2 1
#include <immintrin.h>

/* ---- long spans on AVX2 machines: two stitched lanes whose windows are encoded in lockstep.
 * One window's merges form a chain of dependent steps (scan for the minimum, merge, two pair probes, key stores
 * that the next scan reads): ~100 cycles per merge at an IPC near 1.  Two independent windows interleaved let the
 * core overlap the two chains.  The span is cut in two lanes, s[0:mid+X2_OVERLAP) and s[mid:n); each lane is
 * stitched exactly like encode_stitched (same keep/advance rule, junction check and repairs); the lanes are joined
 * at a token boundary c both share within [mid+16, mid+X2_OVERLAP-16], checked with valid_pair (pair lemma,
 * docs/bpe.md); when there is none, or the pair is not valid, lane A drops its tokens after mid and goes on alone
 * to the end of the span (at most twice the work of one lane: still linear). */

#define X2_OVERLAP 64
#define X2_MIN 1024     /* spans shorter than this: one lane */
#define WNB_NONE 0xFFFFFFu /* rank field of "no pair" in a lane's keys (key >= 0xFF000000: no pair or dead) */

typedef struct {
    const uint64_t *tab, *bloom;
    const uint32_t *byte_tok, *byte_pair;
    uint64_t mask;
    int shift, bshift;
    const uint64_t *vb; /* win_pair_buckets, or NULL (then pair_nb) */
    const uint64_t *vsig; /* its pair signatures */
    uint64_t vnb;         /* buckets (the index of the empty one) */
    int vshift;
    const struct win_alpha_s *al; /* small-alphabet tables (win_alpha_get), or NULL */
    int amode;                    /* with al: the instance of the lanes (WA_AVX2 or WA_AVX512) */
    const uint32_t *avb;          /* al's buckets, multiplier and shift (copied: no reload after key stores) */
    uint64_t amul;
    int ashift;
} win_tabs;

/* rank of the canonical pair (a, b), or WNB_NONE, without a data-dependent branch in the common case: the bloom
 * bit and the first two slots of the probe sequence are combined with masks; the probe loop runs only when the
 * bloom bit is set and both slots hold other keys.  In long spans (digit runs) the pairs repeat and stay in cache,
 * where the bloom filter's branch (taken about half the time) cost more than the two loads. */
static inline uint32_t pair_nb(const win_tabs *t, uint32_t a, uint32_t b) {
    uint64_t key = ((uint64_t)a << BPE_PAIR_ID_BITS) | b;
    uint64_t bit = bpe_bloom_bit(key, t->bshift), i = bpe_pair_slot(key, t->shift);
    uint64_t k0 = t->tab[i], k1 = t->tab[(i + 1) & t->mask];
    uint64_t inb = (t->bloom[bit >> 6] >> (bit & 63)) & 1;
    uint64_t m0 = -(uint64_t)((k0 >> 22) == key), m1 = -(uint64_t)((k1 >> 22) == key);
    if (__builtin_expect(inb & ~(m0 | m1) & (k0 != BPE_EMPTY_KEY) & (k1 != BPE_EMPTY_KEY) & 1, 0)) {
        for (i = (i + 2) & t->mask;; i = (i + 1) & t->mask) {
            uint64_t k = t->tab[i];
            if ((k >> 22) == key) return (uint32_t)(k & 0x3FFFFF);
            if (k == BPE_EMPTY_KEY) return WNB_NONE;
        }
    }
    return (uint32_t)(((m0 & k0) | (m1 & k1)) & 0x3FFFFF) | (uint32_t)(~(m0 | m1) & WNB_NONE);
}

/* ---- the pair table in buckets of one 64-byte line (AVX-512): slots 0-6 hold pair slots as in pair_tab (key << 22 |
 * rank), slot 7 and empty slots hold an all-ones key (no pair has it: ids < 2^21 - 1) and rank VB_NONE, or VB_OVF in
 * slot 7 when more than 7 pairs hashed to the bucket (those are looked up in pair_tab).  A lookup is one vector
 * compare of the line against the key and one load of the matching slot (or slot 7): about half the instructions
 * of pair_nb, and no branch but the rare overflow. */
#define VB_NONE 0x3FFFFFu
#define VB_OVF 0x3FFFFEu
#define VB_EMPTY (~0ull << 22 | VB_NONE)
#define VB_MUL 0x9E3779B97F4A7C15ull

/* 6-bit hash of an internal id for the pair signatures: word 2t of the signatures has bit vb_sig_h(b) for every pair
 * (t, b), word 2t+1 bit vb_sig_h(a) for every pair (a, t) */
static inline uint32_t vb_sig_h(uint32_t t) { return (t * 0x9E3779B1u) >> 26; }

/* built once per model on first use (racing threads: one table wins); NULL on allocation failure */
static const uint64_t *win_pair_buckets(const bpe_model *m, uint64_t *mask_out) {
    uint64_t *vb = __atomic_load_n(&((bpe_model *)m)->win_vb, __ATOMIC_ACQUIRE);
    if (vb) {
        *mask_out = m->win_vb_mask;
        return vb;
    }
    if (m->n_int >= BPE_MAX_INTERNAL - 1) return NULL;
    size_t pairs = 0;
    for (uint64_t i = 0; i <= m->pair_mask; i++) pairs += m->pair_tab[i] != BPE_EMPTY_KEY;
    /* ~3 pairs per bucket: about 1% of the buckets overflow (Poisson); test hook $FSTOK_BPE_VB_PER_BUCKET (1-64):
     * more per bucket, so that many pairs take the overflow path */
    const char *e = getenv("FSTOK_BPE_VB_PER_BUCKET");
    int per = e ? atoi(e) : 0;
    uint64_t nb = 64;
    while (nb * (per >= 1 && per <= 64 ? (uint64_t)per : 3) < pairs) nb *= 2;
    size_t sig_words = ((size_t)m->n_int * 2 + 7) & ~(size_t)7;
    vb = (uint64_t *)aligned_alloc(64, (nb + 1) * 64 + sig_words * 8);
    if (!vb) return NULL;
    for (uint64_t i = 0; i < (nb + 1) * 8; i++) vb[i] = VB_EMPTY; /* bucket nb: always empty (filtered lookups) */
    uint64_t *sig = vb + (nb + 1) * 8;
    memset(sig, 0, sig_words * 8);
    int sh = 64;
    for (uint64_t x = nb; x > 1; x >>= 1) sh--;
    for (uint64_t i = 0; i <= m->pair_mask; i++) {
        uint64_t k = m->pair_tab[i];
        if (k == BPE_EMPTY_KEY) continue;
        uint64_t key = k >> 22;
        uint32_t a = (uint32_t)(key >> BPE_PAIR_ID_BITS), b = (uint32_t)(key & (BPE_MAX_INTERNAL - 1));
        if (a < m->n_int && b < m->n_int) {
            sig[2 * (size_t)a] |= 1ull << vb_sig_h(b);
            sig[2 * (size_t)b + 1] |= 1ull << vb_sig_h(a);
        }
        uint64_t *bk = vb + 8 * ((key * VB_MUL) >> sh);
        int j = 0;
        while (j < 7 && bk[j] != VB_EMPTY) j++;
        if (j < 7) bk[j] = k;
        else bk[7] = ~0ull << 22 | VB_OVF;
    }
    __atomic_store_n(&((bpe_model *)m)->win_vb_mask, nb - 1, __ATOMIC_RELAXED); /* the same in every thread */
    uint64_t *expect = NULL;
    if (!__atomic_compare_exchange_n(&((bpe_model *)m)->win_vb, &expect, vb, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(vb);
        vb = expect;
    }
    *mask_out = nb - 1;
    return vb;
}

/* one window of a lane: the same state as win_encode's */
typedef struct {
    uint32_t key[BPE_WIN] __attribute__((aligned(64)));
    uint32_t tok[BPE_WIN];
    uint8_t nx[BPE_WIN], pv[BPE_WIN];
    size_t nb; /* blocks of 32 keys scanned */
} win_lane;

static inline void wl_init(const win_tabs *t, win_lane *L, const uint8_t *s, size_t n) {
    L->nb = (n + 31) / 32;
    for (size_t i = 0; i < n; i++) {
        L->tok[i] = t->byte_tok[s[i]];
        L->nx[i] = (uint8_t)(i + 1);
        L->pv[i] = (uint8_t)(i - 1);
    }
    L->nx[(n - 1) & (BPE_WIN - 1)] = WPOS_NONE; /* 1 <= n <= BPE_WIN (the mask: for the compiler) */
    L->pv[0] = WPOS_NONE;
    for (size_t i = 0; i + 1 < n; i++) L->key[i] = win_key(t->byte_pair[((uint32_t)s[i] << 8) | s[i + 1]], i);
    for (size_t i = n - 1; i < 32 * L->nb; i++) L->key[i] = WKEY_NONE;
}

/* one merge (the smallest key); 0 when there is none left.  Defined once for each pair lookup (PAIR): wl_step
 * with pair_nb (AVX2), wl_step_vb with pair_vb (AVX-512, below). */
#define WL_STEP_DEF(NAME, TARGET, PAIR) \
__attribute__((target(TARGET), always_inline)) static inline int NAME(const win_tabs *t, win_lane *L) { \
    const __m256i *p = (const __m256i *)L->key;                                                         \
    __m256i a0 = _mm256_load_si256(p), a1 = _mm256_load_si256(p + 1), a2 = _mm256_load_si256(p + 2),    \
            a3 = _mm256_load_si256(p + 3);                                                              \
    for (size_t b = 1; b < L->nb; b++) {                                                                \
        p += 4;                                                                                         \
        a0 = _mm256_min_epu32(a0, _mm256_load_si256(p));                                                \
        a1 = _mm256_min_epu32(a1, _mm256_load_si256(p + 1));                                            \
        a2 = _mm256_min_epu32(a2, _mm256_load_si256(p + 2));                                            \
        a3 = _mm256_min_epu32(a3, _mm256_load_si256(p + 3));                                            \
    }                                                                                                   \
    a0 = _mm256_min_epu32(_mm256_min_epu32(a0, a1), _mm256_min_epu32(a2, a3));                          \
    __m128i x = _mm_min_epu32(_mm256_castsi256_si128(a0), _mm256_extracti128_si256(a0, 1));             \
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0x4E));                                                   \
    x = _mm_min_epu32(x, _mm_shuffle_epi32(x, 0xB1));                                                   \
    uint32_t kk = (uint32_t)_mm_cvtsi128_si32(x);                                                       \
    if (kk >= 0xFF000000u) return 0;                                                                    \
    uint32_t r = kk >> 8;                                                                               \
    size_t i = kk & 0xFF, j = L->nx[i], q = L->nx[j];                                                   \
    L->tok[i] = r;                                                                                      \
    L->key[j] = WKEY_NONE;                                                                              \
    L->nx[i] = (uint8_t)q;                                                                              \
    if (q != WPOS_NONE) {                                                                               \
        L->pv[q] = (uint8_t)i;                                                                          \
        L->key[i] = (PAIR(t, r, L->tok[q]) << 8) | (uint32_t)i;                                         \
    } else {                                                                                            \
        L->key[i] = WKEY_NONE;                                                                          \
    }                                                                                                   \
    size_t pp = L->pv[i];                                                                               \
    if (pp != WPOS_NONE) L->key[pp] = (PAIR(t, L->tok[pp], r) << 8) | (uint32_t)pp;                     \
    return 1;                                                                                           \
}

WL_STEP_DEF(wl_step, "avx2", pair_nb)

static inline size_t wl_out(const win_lane *L, uint32_t *out, uint8_t *st) {
    size_t c = 0;
    for (size_t i = 0; i != WPOS_NONE; i = L->nx[i]) {
        out[c] = L->tok[i];
        st[c++] = (uint8_t)i;
    }
    return c;
}

/* BPE of two windows at once (n0, n1 >= 1; n1 == 0: only the first) */
__attribute__((target("avx2"))) static void win_encode_x2(const win_tabs *t, win_lane *L, const uint8_t *s0, size_t n0,
                                                          const uint8_t *s1, size_t n1) {
    wl_init(t, &L[0], s0, n0);
    int a = 1, b = n1 > 0;
    if (b) wl_init(t, &L[1], s1, n1);
    while (a & b) {
        a = wl_step(t, &L[0]);
        b = wl_step(t, &L[1]);
    }
    while (a) a = wl_step(t, &L[0]);
    while (b) b = wl_step(t, &L[1]);
}

/* pair_nb from the bucketed table (t->vb) */
__attribute__((target("avx512f"), always_inline)) static inline uint32_t pair_vb(const win_tabs *t, uint32_t a, uint32_t b) {
    uint64_t key = ((uint64_t)a << BPE_PAIR_ID_BITS) | b;
    uint64_t bi = (key * VB_MUL) >> t->vshift;
    uint64_t pass = (t->vsig[2 * (size_t)a] >> vb_sig_h(b)) & (t->vsig[2 * (size_t)b + 1] >> vb_sig_h(a)) & 1;
    bi = (bi & -pass) | (t->vnb & (pass - 1)); /* a pair ruled out by the signatures: the empty bucket (in cache) */
    const uint64_t *bk = t->vb + 8 * bi;
    __m512i v = _mm512_load_si512((const void *)bk);
    __mmask8 hit = _mm512_cmpeq_epi64_mask(_mm512_srli_epi64(v, 22), _mm512_set1_epi64((long long)key));
    uint32_t r = (uint32_t)bk[__builtin_ctz((unsigned)hit | 0x80u)] & 0x3FFFFF;
    if (__builtin_expect(r == VB_OVF, 0)) return pair_nb(t, a, b);
    return r == VB_NONE ? WNB_NONE : r;
}

/* wl_step with pair_vb */
WL_STEP_DEF(wl_step_vb, "avx2,avx512f", pair_vb)

__attribute__((target("avx2,avx512f"))) static void win_encode_x2_vb(const win_tabs *t, win_lane *L, const uint8_t *s0,
                                                                     size_t n0, const uint8_t *s1, size_t n1) {
    wl_init(t, &L[0], s0, n0);
    int a = 1, b = n1 > 0;
    if (b) wl_init(t, &L[1], s1, n1);
    while (a & b) {
        a = wl_step_vb(t, &L[0]);
        b = wl_step_vb(t, &L[1]);
    }
    while (a) a = wl_step_vb(t, &L[0]);
    while (b) b = wl_step_vb(t, &L[1]);
}

static int have_avx512 = -1; /* $FSTOK_BPE_NO_AVX512=1: 0 (tests: both paths) */

/* ---- small alphabets (digit runs under r50k's \p{N}+): the tokens made only of the bytes of one set S, in rank
 * order, get local ids 0..WA_MAXTOK-1, and their canonical pairs go to a table of WA_B-slot buckets of 32-bit slots
 * (local key a << 10 | b, then the local merged id; slot 15 and empty slots: all ones = no pair) that fits in L1
 * (r50k digits: 994 tokens, 984 pairs, 16 KiB).  Exact on a span whose bytes are all in S: every merge result on
 * it is made of bytes of S, so a pair of two such tokens merges iff the local table has it, with the same order of
 * ranks (local ids keep the internal order).  The lanes then hold local ids; each window's bytes are checked as
 * they are read (a byte outside S: the span is redone with the full tables).  The lanes' merge loop has two instances
 * (bpe_alpha_lanes.h, included below): AVX-512 VBMI, and AVX2 for the machines without AVX-512 (AMD Zen 2/3: r50k's
 * 100k digits 37.5 -> 22.9 ns/byte). */
#define WA_MAXTOK 1023   /* local ids 0..1022; 0x3FF is "none" */
#define WA_MAXBYTES 32
#define WA_B 16          /* slots per bucket (one 64-byte line) */
#define WA_SLOTS (sizeof(((bpe_model *)0)->win_alpha) / sizeof(void *))
#define WA_MIN 1024      /* spans shorter than this keep the full tables */

typedef struct win_alpha_s {
    uint64_t set[4];      /* the alphabet S */
    uint32_t ntok;        /* 0: not usable (too many tokens, or a byte without a token) */
    uint32_t mul;         /* bucket = (uint32_t)(key * mul) >> shift */
    int shift;
    uint32_t *vb;         /* buckets */
    uint32_t *glob;       /* local -> internal id */
    uint16_t *lsplit;     /* 2 per local id: canonical left, right part (a byte: itself), for wa_valid */
    uint32_t kbytes;      /* |S| */
    uint8_t bidx[256] __attribute__((aligned(64)));  /* byte -> its index in S, 0xFF outside S */
    uint32_t btok[WA_MAXBYTES] __attribute__((aligned(64))); /* index -> local id of the byte's token */
    uint16_t btok16[WA_MAXBYTES] __attribute__((aligned(64))); /* the same (local ids < 2^10) */
    uint8_t cmul[64] __attribute__((aligned(64)));   /* |S| <= WA_KFAST: index c -> c * |S| */
    uint16_t bp16[128] __attribute__((aligned(64))); /* |S| <= WA_KFAST: [c * |S| + d] = bpair[c][d] << 6 */
    uint32_t bpair[WA_MAXBYTES * WA_MAXBYTES]; /* local merged id of two bytes' tokens, or 0x3FF */
} win_alpha;
#define WA_KFAST 11 /* alphabets of up to 11 bytes: the first keys of a window from 128-entry tables (vpermi2d) */

/* which lanes run small alphabets: WA_OFF ($FSTOK_BPE_NO_ALPHA=1: A/B, tests), WA_AVX2, or WA_AVX512 (AVX-512 VBMI,
 * unless $FSTOK_BPE_NO_AVX512=1: tests run both) */
#define WA_OFF 0
#define WA_AVX2 1
#define WA_AVX512 2
static int wa_mode = -1;

/* build the tables of alphabet `set` (ntok 0: not usable); NULL on allocation failure */
static win_alpha *wa_new(const win_alpha *h, size_t extra) {
    size_t hs = (sizeof(win_alpha) + 63) & ~(size_t)63;
    win_alpha *a = (win_alpha *)aligned_alloc(64, hs + ((extra + 63) & ~(size_t)63));
    if (a) memcpy(a, h, sizeof *a);
    return a;
}

/* build the tables of alphabet `set` (ntok 0: not usable), one block (freed by bpe_model_release); NULL on
 * allocation failure */
static win_alpha *wa_build(const bpe_model *m, const uint64_t set[4]) {
    static win_alpha h0;
    win_alpha h = h0;
    memcpy(h.set, set, sizeof h.set);
    memset(h.bidx, 0xFF, sizeof h.bidx);
    uint32_t nbytes = 0;
    for (int b = 0; b < 256; b++)
        if ((set[b >> 6] >> (b & 63)) & 1) {
            if (nbytes == WA_MAXBYTES || m->byte_tok[b] >= m->n_int) return wa_new(&h, 0); /* ntok 0 */
            h.bidx[b] = (uint8_t)nbytes++;
        }
    uint16_t *loc = (uint16_t *)malloc((size_t)m->n_int * sizeof(uint16_t));
    if (!loc) return NULL;
    memset(loc, 0xFF, (size_t)m->n_int * sizeof(uint16_t));
    for (int b = 0; b < 256; b++)
        if (h.bidx[b] != 0xFF) loc[m->byte_tok[b]] = 0xFFFE; /* a byte of S (numbered below) */
    /* internal ids are in rank order and a token's canonical parts rank before it: one pass marks every token that
     * merges can make from the bytes of S */
    uint32_t cnt = 0, pairs = 0;
    for (uint32_t t = 0; t < m->n_int; t++) {
        uint32_t l = BPE_SPLIT_L(m, t), r = BPE_SPLIT_R(m, t);
        int in = loc[t] == 0xFFFE || (l != t && l < t && r < t && loc[l] < 0xFFFE && loc[r] < 0xFFFE);
        if (!in) continue;
        if (cnt == WA_MAXTOK) {
            free(loc);
            return wa_new(&h, 0);
        }
        pairs += loc[t] != 0xFFFE;
        loc[t] = (uint16_t)cnt++;
    }
    /* buckets of <= WA_B - 1 pairs: ~4 per bucket, a multiplier that overflows none.  Test hook
     * $FSTOK_BPE_WA_PER_BUCKET (1-15): that many per bucket, so that lookups reach the bucket's upper slots (with ~4,
     * r50k's digit pairs all sit in slots 0-7) */
    const char *pe = getenv("FSTOK_BPE_WA_PER_BUCKET");
    uint32_t per = pe ? (uint32_t)atoi(pe) : 0, nb = 16, mul = 0;
    if (per < 1 || per > WA_B - 1) per = 4;
    while (nb * per < pairs) nb *= 2;
    uint8_t fill[4096];
    int sh = 32, ok = 0;
    for (; nb <= sizeof fill; nb *= 2) {
        sh = 32;
        for (uint32_t x = nb; x > 1; x >>= 1) sh--;
        for (uint32_t k = 0; k < 64 && !ok; k++) {
            mul = (0x9E3779B1u + 0x6A09E668u * k) | 1;
            memset(fill, 0, nb);
            ok = 1;
            for (uint32_t t = 0; t < m->n_int && ok; t++) {
                if (loc[t] >= 0xFFFE || BPE_SPLIT_L(m, t) == t) continue;
                uint32_t key = (uint32_t)loc[BPE_SPLIT_L(m, t)] << 10 | loc[BPE_SPLIT_R(m, t)];
                if (++fill[(uint32_t)(key * mul) >> sh] >= WA_B) ok = 0; /* slot WA_B-1 stays the sentinel */
            }
        }
        if (ok) break;
    }
    if (!ok) {
        free(loc);
        return wa_new(&h, 0);
    }
    win_alpha *a = wa_new(&h, (size_t)nb * WA_B * 4 + (size_t)cnt * 8);
    if (!a) {
        free(loc);
        return NULL;
    }
    uint32_t *vb = (uint32_t *)((uint8_t *)a + ((sizeof(win_alpha) + 63) & ~(size_t)63)), *glob = vb + (size_t)nb * WA_B;
    uint16_t *lsplit = (uint16_t *)(glob + cnt);
    memset(vb, 0xFF, (size_t)nb * WA_B * 4);
    for (uint32_t t = 0; t < m->n_int; t++) {
        if (loc[t] >= 0xFFFE) continue;
        glob[loc[t]] = t;
        uint32_t l = BPE_SPLIT_L(m, t), r = BPE_SPLIT_R(m, t);
        lsplit[2 * loc[t]] = lsplit[2 * loc[t] + 1] = loc[t];
        if (l == t) continue;
        lsplit[2 * loc[t]] = loc[l];
        lsplit[2 * loc[t] + 1] = loc[r];
        if (bpe_pair_lookup(m, l, r, 0) != t) { /* not the model's pair table: do not use it */
            free(loc);
            a->ntok = 0;
            return a;
        }
        uint32_t key = (uint32_t)loc[l] << 10 | loc[r];
        uint32_t *bk = vb + WA_B * ((uint32_t)(key * mul) >> sh);
        int j = 0;
        while (bk[j] != 0xFFFFFFFFu) j++;
        bk[j] = key << 10 | loc[t];
    }
    for (int b = 0; b < 256; b++) {
        if (a->bidx[b] == 0xFF) continue;
        a->btok[a->bidx[b]] = loc[m->byte_tok[b]];
        for (int c = 0; c < 256; c++) {
            if (a->bidx[c] == 0xFF) continue;
            uint32_t p = m->byte_pair[(uint32_t)b << 8 | c];
            a->bpair[a->bidx[b] * WA_MAXBYTES + a->bidx[c]] = p == BPE_NONE ? 0x3FF : loc[p];
        }
    }
    free(loc);
    a->kbytes = nbytes;
    for (uint32_t c = 0; c < 128; c++) a->bp16[c] = 0xFFC0;
    for (uint32_t c = 0; c < nbytes; c++) a->btok16[c] = (uint16_t)a->btok[c];
    if (nbytes <= WA_KFAST)
        for (uint32_t c = 0; c < nbytes; c++) {
            a->cmul[c] = (uint8_t)(c * nbytes);
            for (uint32_t d = 0; d < nbytes; d++) a->bp16[c * nbytes + d] = (uint16_t)(a->bpair[c * WA_MAXBYTES + d] << 6);
        }
    a->vb = vb;
    a->glob = glob;
    a->lsplit = lsplit;
    a->mul = mul;
    a->shift = sh;
    a->ntok = cnt;
    return a;
}

/* the tables for span s[0:n) when its bytes look like a small alphabet: S = the bytes of its first 256 bytes and of
 * every 64th byte (a byte outside S later makes the lanes start over with the full tables); NULL: none */
static const win_alpha *win_alpha_get(const bpe_model *m, const uint8_t *s, size_t n) {
    uint64_t set[4] = {0, 0, 0, 0};
    size_t h = n < 256 ? n : 256;
    for (size_t i = 0; i < h; i++) set[s[i] >> 6] |= 1ull << (s[i] & 63);
    for (size_t i = h; i < n; i += 64) set[s[i] >> 6] |= 1ull << (s[i] & 63);
    if (__builtin_popcountll(set[0]) + __builtin_popcountll(set[1]) + __builtin_popcountll(set[2]) +
            __builtin_popcountll(set[3]) > WA_MAXBYTES)
        return NULL;
    void **slots = ((bpe_model *)m)->win_alpha;
    for (size_t k = 0; k < WA_SLOTS; k++) {
        win_alpha *a = (win_alpha *)__atomic_load_n(&slots[k], __ATOMIC_ACQUIRE);
        if (!a) {
            /* a new alphabet (at most WA_SLOTS per model, usable or not: bounded memory and build time) */
            win_alpha *b = wa_build(m, set);
            if (!b) return NULL;
            void *expect = NULL;
            if (!__atomic_compare_exchange_n(&slots[k], &expect, b, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
                free(b);
                a = (win_alpha *)expect;
            } else {
                a = b;
            }
        }
        if (!memcmp(a->set, set, sizeof set)) return a->ntok ? a : NULL;
    }
    return NULL;
}

/* the local rank of pair key a << 10 | b (0x3FF: none) */
__attribute__((target("avx512f"), always_inline)) static inline uint32_t pair_loc_avx512(const uint32_t *avb, uint32_t amul,
                                                                                  int ashift, uint32_t key) {
    const uint32_t *bk = avb + WA_B * (size_t)((uint32_t)(key * amul) >> ashift);
    __m512i v = _mm512_load_si512((const void *)bk);
    __mmask16 hit = _mm512_cmpeq_epi32_mask(_mm512_srli_epi32(v, 10), _mm512_set1_epi32((int)key));
    return bk[__builtin_ctz((unsigned)hit | 0x8000u)] & 0x3FF;
}

/* A window of a lane on local ids: 16-bit keys rank << 6 | (i & 63) (local rank 0x3FF: no pair; 0xFFFF: dead), so
 * the scan reads half the bytes of win_lane's and each half of the window (positions 0-63, 64-127) ends in one
 * phminposuw; the lower rank wins, the left half on a tie.  Tokens are local ids (16 bits). */
#ifndef WA_WIN
#define WA_WIN BPE_WIN
#endif
typedef struct {
    uint16_t key[WA_WIN] __attribute__((aligned(64)));
    uint16_t tok[WA_WIN] __attribute__((aligned(64)));
    uint8_t nx[WA_WIN], pv[WA_WIN];
    uint64_t live[2]; /* bit i: position i starts a token (the output is read from these, not along nx) */
} wa_lane;

static const uint8_t wa_iota1[BPE_WIN] __attribute__((aligned(64))) = {
#define I8(k) k + 1, k + 2, k + 3, k + 4, k + 5, k + 6, k + 7, k + 8
    I8(0), I8(8), I8(16), I8(24), I8(32), I8(40), I8(48), I8(56), I8(64), I8(72), I8(80), I8(88), I8(96), I8(104),
    I8(112), I8(120)};
#undef I8
static const uint8_t wa_iotam1[BPE_WIN] __attribute__((aligned(64))) = {
#define I8(k) k - 1, k, k + 1, k + 2, k + 3, k + 4, k + 5, k + 6
    0xFF, 0, 1, 2, 3, 4, 5, 6, I8(8), I8(16), I8(24), I8(32), I8(40), I8(48), I8(56), I8(64), I8(72), I8(80), I8(88),
    I8(96), I8(104), I8(112), I8(120)};
#undef I8

/* a window's links and live mask at its start: every position a token of one byte (1 <= n <= WA_WIN) */
static inline void wa_links(wa_lane *L, size_t n) {
    memcpy(L->nx, wa_iota1, WA_WIN);
    memcpy(L->pv, wa_iotam1, WA_WIN);
    L->nx[(n - 1) & (WA_WIN - 1)] = WPOS_NONE;
    L->live[0] = n >= 64 ? ~0ull : (1ull << n) - 1;
    L->live[1] = n >= 128 ? ~0ull : n > 64 ? (1ull << (n - 64)) - 1 : 0;
}

/* a lane's window s[0:n) on local ids (AVX-512 VBMI: the bytes' indices in S by vpermi2b, 64 at a time, their tokens
 * by vpermw, the first pair keys by vpermi2w from bp128 when |S| <= WA_KFAST); nonzero when a byte is outside S */
__attribute__((target("avx2,avx512f,avx512bw,avx512vbmi"), always_inline)) static inline uint32_t
wa_init_avx512(const win_alpha *al, wa_lane *L, const uint8_t *s, size_t n) {
    uint8_t c[WA_WIN + 64] __attribute__((aligned(64)));
    const __m512i *bx = (const __m512i *)al->bidx;
    __m512i b0 = _mm512_load_si512(bx), b1 = _mm512_load_si512(bx + 1), b2 = _mm512_load_si512(bx + 2),
            b3 = _mm512_load_si512(bx + 3);
    uint64_t bad = 0;
    for (size_t i = 0; i < WA_WIN + 64; i += 64) _mm512_store_si512((__m512i *)(c + i), _mm512_setzero_si512());
    for (size_t i = 0; i < n; i += 64) {
        size_t r = n - i;
        __mmask64 lm = r >= 64 ? ~0ull : (1ull << r) - 1;
        __m512i x = _mm512_maskz_loadu_epi8(lm, s + i);
        __m512i lo = _mm512_permutex2var_epi8(b0, x, b1), hi = _mm512_permutex2var_epi8(b2, x, b3);
        __m512i v = _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi);
        bad |= _mm512_movepi8_mask(v) & lm;
        _mm512_store_si512((__m512i *)(c + i), v);
    }
    if (bad) return 1;
    __m512i bt = _mm512_load_si512((const void *)al->btok16);
    for (size_t i = 0; i < n; i += 32) {
        __m512i ix = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(c + i)));
        _mm512_store_si512((void *)(L->tok + i), _mm512_permutexvar_epi16(ix, bt));
    }
    wa_links(L, n);
    if (al->kbytes <= WA_KFAST) {
        uint8_t ix8[WA_WIN] __attribute__((aligned(64)));
        __m512i cm = _mm512_load_si512((const void *)al->cmul);
        for (size_t i = 0; i < n; i += 64) {
            __m512i a = _mm512_load_si512((const void *)(c + i)), b = _mm512_loadu_si512((const void *)(c + i + 1));
            _mm512_store_si512((void *)(ix8 + i), _mm512_add_epi8(_mm512_permutexvar_epi8(a, cm), b));
        }
        const __m512i *pt = (const __m512i *)al->bp16;
        __m512i p0 = _mm512_load_si512(pt), p1 = _mm512_load_si512(pt + 1), p2 = _mm512_load_si512(pt + 2),
                p3 = _mm512_load_si512(pt + 3);
        __m512i io = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                      11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                k32 = _mm512_set1_epi16(32), k64 = _mm512_set1_epi16(64);
        for (size_t i = 0; i < n; i += 32) {
            __m512i ix = _mm512_cvtepu8_epi16(_mm256_load_si256((const __m256i *)(ix8 + i)));
            __mmask32 h6 = _mm512_test_epi16_mask(ix, k64);
            __m512i v = _mm512_mask_blend_epi16(h6, _mm512_permutex2var_epi16(p0, ix, p1),
                                                _mm512_permutex2var_epi16(p2, ix, p3));
            _mm512_store_si512((void *)(L->key + i), _mm512_or_si512(v, io));
            io = _mm512_xor_si512(io, k32); /* positions i & 63: 0-31, 32-63, 0-31, ... */
        }
    } else {
        for (size_t i = 0; i + 1 < n; i++)
            L->key[i] = (uint16_t)(al->bpair[(c[i] & (WA_MAXBYTES - 1)) * WA_MAXBYTES + (c[i + 1] & (WA_MAXBYTES - 1))]
                                       << 6 |
                                   (i & 63));
    }
    for (size_t i = n - 1; i < WA_WIN; i++) L->key[i] = 0xFFFF; /* wa_step scans all WA_WIN keys */
    return 0;
}

/* pair_loc_avx512 on AVX2: the bucket's two halves compared separately */
__attribute__((target("avx2"), always_inline)) static inline uint32_t pair_loc_avx2(const uint32_t *avb, uint32_t amul,
                                                                                   int ashift, uint32_t key) {
    const uint32_t *bk = avb + WA_B * (size_t)((uint32_t)(key * amul) >> ashift);
    __m256i k = _mm256_set1_epi32((int)key);
    __m256i v0 = _mm256_load_si256((const __m256i *)bk), v1 = _mm256_load_si256((const __m256i *)bk + 1);
    unsigned h0 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_srli_epi32(v0, 10), k)));
    unsigned h1 = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_srli_epi32(v1, 10), k)));
    return bk[__builtin_ctz(h0 | h1 << 8 | 0x8000u)] & 0x3FF;
}

/* wa_init_avx512 on AVX2: the bytes' indices in S and the first keys from the byte tables, one byte at a time (a window's
 * start is a few percent of its merges) */
__attribute__((target("avx2"), always_inline)) static inline uint32_t wa_init_avx2(const win_alpha *al, wa_lane *L,
                                                                                   const uint8_t *s, size_t n) {
    uint8_t c[WA_WIN];
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) bad |= c[i] = al->bidx[s[i]];
    if (bad & 0x80) return 1; /* 0xFF: outside S (indices are < WA_MAXBYTES) */
    for (size_t i = 0; i < n; i++) L->tok[i] = al->btok16[c[i]];
    wa_links(L, n);
    for (size_t i = 0; i + 1 < n; i++)
        L->key[i] = (uint16_t)(al->bpair[c[i] * WA_MAXBYTES + c[i + 1]] << 6 | (i & 63));
    for (size_t i = n - 1; i < WA_WIN; i++) L->key[i] = 0xFFFF; /* wa_step scans all WA_WIN keys */
    return 0;
}

#ifndef WA_TWO /* 0: one merge per scan (wa_step), for A/B */
#define WA_TWO 1
#endif

/* AVX-512 VBMI: 16-slot buckets compared in one instruction, the window start by byte permutes */
#define WA_NAME(x) x##_512
#define WA_TARGET_STEP "avx2,avx512f"
#define WA_TARGET_INIT "avx2,avx512f,avx512bw,avx512vbmi"
#define WA_PAIR pair_loc_avx512
#define WA_INIT wa_init_avx512
#include "bpe_alpha_lanes.h"
#undef WA_NAME
#undef WA_TARGET_STEP
#undef WA_TARGET_INIT
#undef WA_PAIR
#undef WA_INIT

/* AVX2 (no AVX-512: AMD Zen 2/3, older Intel): the same merges with pair_loc_avx2 and wa_init_avx2 */
#define WA_NAME(x) x##_256
#define WA_TARGET_STEP "avx2"
#define WA_TARGET_INIT "avx2"
#define WA_PAIR pair_loc_avx2
#define WA_INIT wa_init_avx2
/* GCC 12 reports a write at nx[-1] in wa_init_avx2 inlined here (n >= 1 on every call: a false positive) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#include "bpe_alpha_lanes.h"
#pragma GCC diagnostic pop
#undef WA_NAME
#undef WA_TARGET_STEP
#undef WA_TARGET_INIT
#undef WA_PAIR
#undef WA_INIT

static inline size_t wl_out_loc(const win_tabs *t, const wa_lane *L, uint32_t *out, uint16_t *lout, uint8_t *st) {
    size_t c = 0;
    const uint32_t *glob = t->al->glob;
    for (int h = 0; h < WA_WIN / 64; h++)
        for (uint64_t b = L->live[h]; b; b &= b - 1) {
            size_t i = (size_t)h * 64 + (size_t)__builtin_ctzll(b);
            lout[c] = L->tok[i];
            out[c] = glob[L->tok[i]];
            st[c++] = (uint8_t)i;
        }
    return c;
}

/* one lane of a stitched span: encode_stitched's state */
typedef struct {
    const uint8_t *s;
    size_t n, pos, len, repairs, budget;
    uint32_t *o;
    unsigned streak;
    uint32_t lastl; /* local id (small alphabets) of o[len - 1], or WA_NOLOC */
} stitch_lane;
#define WA_NOLOC 0xFFFFFFFFu

/* apply the window [pos, pos + w) of a lane (c tokens in buf, their offsets in st): keep the tokens that end
 * `margin` bytes before the cut, or repair an invalid junction; 1: too many repairs */
static int lane_apply(const bpe_model *m, stitch_lane *t, const uint32_t *buf, const uint8_t *st, size_t c, size_t w,
                      size_t margin, const win_tabs *tb, const uint16_t *lbuf) {
    const win_alpha *al = tb->al;
    size_t take = c, adv = w;
    if (t->pos + w < t->n) {
        take = c - 1; /* the last token that starts <= w - margin (offsets increase; few start after it) */
        while (take > 0 && st[take] > w - margin) take--;
        if (take == 0) take = 1;
        adv = take < c ? st[take] : w;
    }
    if (t->len > 0 && !(al && t->lastl != WA_NOLOC ? (tb->amode == WA_AVX512 ? wa_valid_512 : wa_valid_256)(al, t->lastl, lbuf[0])
                                                    : valid_pair(m, t->o[t->len - 1], buf[0]))) {
        if (++t->repairs > t->budget || t->streak >= 3) return 1;
        size_t back = (size_t)16 << t->streak++, dropped = 0;
        while (t->len > 0 && dropped < back) dropped += BPE_LEN(m, t->o[--t->len]);
        t->pos -= dropped;
        t->lastl = WA_NOLOC;
        return 0;
    }
    t->streak = 0;
    memcpy(t->o + t->len, buf, take * sizeof(uint32_t));
    t->len += take;
    t->pos += adv;
    t->lastl = al ? lbuf[take - 1] : WA_NOLOC;
    return 0;
}

static inline size_t lane_wlen(const stitch_lane *t, size_t w) { return t->n - t->pos < w ? t->n - t->pos : w; }

/* run lanes to their ends, two windows at a time while both have work; 1: too many repairs, 2: a byte outside the
 * alphabet of tb->al */
static int lanes_run(const bpe_model *m, const win_tabs *tb, stitch_lane *A, stitch_lane *B, size_t margin) {
    win_lane L[2];
    wa_lane La[2];
    uint32_t buf[BPE_WIN];
    uint16_t lbuf[BPE_WIN];
    uint8_t st[BPE_WIN];
    for (;;) {
        int ha = A->pos < A->n, hb = B && B->pos < B->n;
        if (!ha && !hb) return 0;
        stitch_lane *P = ha ? A : B, *Q = ha && hb ? B : NULL;
        size_t wm = tb->al ? WA_WIN : BPE_WIN, wp = lane_wlen(P, wm), wq = Q ? lane_wlen(Q, wm) : 0;
        size_t c;
        if (tb->al) {
            if ((tb->amode == WA_AVX512 ? win_encode_x2_loc_512 : win_encode_x2_loc_256)(tb, La, P->s + P->pos, wp,
                                                                                         Q ? Q->s + Q->pos : NULL, wq))
                return 2;
            c = wl_out_loc(tb, &La[0], buf, lbuf, st);
        } else {
            if (tb->vb)
                win_encode_x2_vb(tb, L, P->s + P->pos, wp, Q ? Q->s + Q->pos : NULL, wq);
            else
                win_encode_x2(tb, L, P->s + P->pos, wp, Q ? Q->s + Q->pos : NULL, wq);
            c = wl_out(&L[0], buf, st);
        }
        if (lane_apply(m, P, buf, st, c, wp, margin, tb, lbuf)) return 1;
        if (Q) {
            c = tb->al ? wl_out_loc(tb, &La[1], buf, lbuf, st) : wl_out(&L[1], buf, st);
            if (lane_apply(m, Q, buf, st, c, wq, margin, tb, lbuf)) return 1;
        }
    }
}

/* test hook: $FSTOK_BPE_X2_JOIN = j (1-62) joins the lanes only at mid + j and ends lane A at mid + j + 2: both
 * lanes' outputs are cut close to the join, so the junction is often invalid or there is no common boundary (both
 * fallbacks run).  With the default overlap, a boundary both lanes share is nearly always a true one. */
static int x2_join = -1;

static int encode_stitched_x2(const bpe_model *m, const uint8_t *s, size_t n, size_t margin, bpe_vec *out,
                              const win_alpha *al, int amode) {
    size_t base = out->len;
    int rc;
    win_tabs tb = {m->pair_tab, m->pair_bloom, m->byte_tok, m->byte_pair, m->pair_mask, m->pair_shift, m->bloom_shift,
                   NULL, NULL, 0, 0, al, amode, al ? al->vb : NULL, al ? al->mul : 0, al ? al->shift : 0};
    if (!al && __atomic_load_n(&have_avx512, __ATOMIC_RELAXED) > 0) {
        uint64_t vm = 0;
        tb.vb = win_pair_buckets(m, &vm);
        tb.vnb = vm + 1;
        tb.vsig = tb.vb ? tb.vb + 8 * (vm + 2) : NULL;
        tb.vshift = 64;
        for (; vm; vm >>= 1) tb.vshift--;
    }
    if (bpe_vec_reserve(out, n)) return -1;
    stitch_lane A = {s, n, 0, 0, 0, 8 + n / 64, out->ids + base, 0, WA_NOLOC};
    if (n < X2_MIN) {
        if ((rc = lanes_run(m, &tb, &A, NULL, margin)) == 2) return 2;
        if (rc) goto bucket;
        out->len = base + A.len;
        return 0;
    }
    int jh = __atomic_load_n(&x2_join, __ATOMIC_RELAXED);
    if (jh < 0) {
        const char *e = getenv("FSTOK_BPE_X2_JOIN");
        int v = e ? atoi(e) : 0;
        jh = v >= 1 && v <= X2_OVERLAP - 2 ? v : 0;
        __atomic_store_n(&x2_join, jh, __ATOMIC_RELAXED);
    }
    size_t mid = n / 2, lo = mid + (jh ? (size_t)jh : 16), hi = jh ? lo : mid + X2_OVERLAP - 16;
    size_t ov = jh ? (size_t)jh + 2 : X2_OVERLAP; /* the hook also ends lane A 2 bytes after the join */
    uint32_t *ob = (uint32_t *)malloc((n - mid) * sizeof(uint32_t));
    if (!ob) return -1;
    A.n = mid + ov;
    A.budget = 8 + A.n / 64;
    stitch_lane B = {s + mid, n - mid, 0, 0, 0, 8 + (n - mid) / 64, ob, 0, WA_NOLOC};
    if ((rc = lanes_run(m, &tb, &A, &B, margin))) {
        free(ob);
        if (rc == 2) return 2;
        goto bucket;
    }
    /* B's token starts in [lo, hi] (offsets from mid), then A's token ends from the right: the largest common one */
    uint64_t bmask = 0;
    size_t jb = 0, pb = 0;
    while (jb < B.len && pb <= hi - mid) {
        if (pb >= lo - mid) bmask |= 1ull << (pb - (lo - mid));
        pb += BPE_LEN(m, ob[jb++]);
    }
    size_t ia = A.len, pa = A.n;
    int joined = 0;
    while (ia > 0 && pa >= lo) {
        if (pa <= hi && ((bmask >> (pa - lo)) & 1)) {
            /* B's token that starts at pa */
            size_t j = 0, q = mid;
            while (q < pa) q += BPE_LEN(m, ob[j++]);
            if (valid_pair(m, A.o[ia - 1], ob[j])) { /* ia < A.len: pa <= hi < A.n */
                memcpy(A.o + ia, ob + j, (B.len - j) * sizeof(uint32_t));
                A.len = ia + (B.len - j);
                joined = 1;
            }
            break;
        }
        pa -= BPE_LEN(m, A.o[--ia]);
    }
    free(ob);
    if (!joined) { /* lane A alone to the end: keep its tokens that end <= mid, where its own windows were not cut */
        ia = A.len, pa = A.n;
        while (ia > 0 && pa > mid) pa -= BPE_LEN(m, A.o[--ia]);
        A.len = ia, A.pos = pa, A.n = n, A.streak = 0, A.budget = 8 + n / 64, A.lastl = WA_NOLOC;
        if ((rc = lanes_run(m, &tb, &A, NULL, margin)) == 2) return 2;
        if (rc) goto bucket;
    }
    out->len = base + A.len;
    return 0;
bucket:
    out->len = base;
    return bpe_encode_bucket(m, s, n, out);
}

static int have_avx2 = -1;
#endif

/* Spans longer than a window (monotone ranks): the tokens of a window that end at least WIN_MARGIN bytes before
 * its cut are kept and the next window starts after them.  Exact by the pair lemma (docs/bpe.md, "Windows"): the
 * pairs inside one window's output are valid, the pair across each junction is checked with valid_pair, and an
 * invalid junction drops the last tokens kept and re-encodes from further left (after too many of those: the
 * bucket queue, O(n)). */
#define WIN_MARGIN 8
static int win_margin = -1; /* WIN_MARGIN, or $FSTOK_BPE_WIN_MARGIN (1-64; tests: more junctions to repair) */

static int encode_stitched(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    size_t base = out->len, len = base, pos = 0, repairs = 0, budget = 8 + n / 64;
    unsigned streak = 0;
    int mg = __atomic_load_n(&win_margin, __ATOMIC_RELAXED);
    if (mg < 0) {
        const char *e = getenv("FSTOK_BPE_WIN_MARGIN");
        int v = e ? atoi(e) : 0;
        mg = v >= 1 && v <= 64 ? v : WIN_MARGIN;
        __atomic_store_n(&win_margin, mg, __ATOMIC_RELAXED);
    }
    size_t margin = (size_t)mg;
#ifdef WIN_X2
    int av = __atomic_load_n(&have_avx2, __ATOMIC_RELAXED);
    if (av < 0) {
        /* $FSTOK_BPE_NO_AVX2=1: the one-window loop below, the path of machines without AVX2 (tests) */
        const char *e2 = getenv("FSTOK_BPE_NO_AVX2");
        __builtin_cpu_init();
        av = __builtin_cpu_supports("avx2") && !(e2 && e2[0] == '1') ? 1 : 0;
        __atomic_store_n(&have_avx2, av, __ATOMIC_RELAXED);
    }
    if (av && __atomic_load_n(&have_avx512, __ATOMIC_RELAXED) < 0) {
        const char *e = getenv("FSTOK_BPE_NO_AVX512");
        int z = __builtin_cpu_supports("avx512f") && !(e && e[0] == '1') ? 1 : 0;
        __atomic_store_n(&have_avx512, z, __ATOMIC_RELAXED);
    }
    if (av) {
        const win_alpha *al = NULL;
        int am = __atomic_load_n(&wa_mode, __ATOMIC_RELAXED);
        if (am < 0) {
            const char *e = getenv("FSTOK_BPE_NO_ALPHA");
            am = e && e[0] == '1' ? WA_OFF
                 : __atomic_load_n(&have_avx512, __ATOMIC_RELAXED) > 0 && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vbmi")
                     ? WA_AVX512
                     : WA_AVX2;
            __atomic_store_n(&wa_mode, am, __ATOMIC_RELAXED);
        }
        if (n >= WA_MIN && am != WA_OFF) al = win_alpha_get(m, s, n);
        int rc = encode_stitched_x2(m, s, n, margin, out, al, am);
        if (rc == 2) rc = encode_stitched_x2(m, s, n, margin, out, NULL, am); /* a byte outside the alphabet */
        return rc;
    }
#endif
    if (bpe_vec_reserve(out, n)) return -1;
    uint32_t *o = out->ids, buf[BPE_WIN];
    uint8_t st[BPE_WIN];
    while (pos < n) {
        size_t w = n - pos < BPE_WIN ? n - pos : BPE_WIN;
        size_t c = win_encode(m, s + pos, w, buf, st), take = c, adv = w;
        if (pos + w < n) { /* keep the tokens that end `margin` bytes before the cut (at least one) */
            take = 1;
            while (take < c && st[take] <= w - margin) take++;
            take--;
            if (take == 0) take = 1;
            adv = take < c ? st[take] : w;
        }
        if (len > base && !valid_pair(m, o[len - 1], buf[0])) {
            if (++repairs > budget || streak >= 3) {
                out->len = base;
                return bpe_encode_bucket(m, s, n, out);
            }
            size_t back = (size_t)16 << streak++, dropped = 0;
            while (len > base && dropped < back) dropped += BPE_LEN(m, o[--len]);
            pos -= dropped;
            continue;
        }
        streak = 0;
        memcpy(o + len, buf, take * sizeof(uint32_t)); /* len + take <= base + n: at most one token per byte */
        len += take;
        pos += adv;
    }
    out->len = len;
    return 0;
}

/* the window encoder (monotone ranks for spans longer than a window) */
static int encode_window(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    if (n == 0) return 0;
    if (n > BPE_WIN) return encode_stitched(m, s, n, out);
    uint8_t st[BPE_WIN];
    if (bpe_vec_reserve(out, n)) return -1;
    out->len += win_encode(m, s, n, out->ids + out->len, st);
    return 0;
}

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
    else return bpe_encode_heap(m, s, n, out);
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
    const uint64_t *tri = m->seg_tri;
    uint32_t w = (uint32_t)s[b0 - 2] << 8 | s[b0 - 1]; /* the bytes before boundary b: s[b-2] s[b-1] (then s[b]) */
    size_t last = e < n ? e : n - 1; /* boundaries below `last` have a byte after them (s[b + 1]) */
    uint64_t live = 0;
#define SEG_TRI_BIT(w3) ((uint32_t)(tri[((w3) * 0x9E3779B97F4A7C15ull) >> (64 - BPE_SEG_TRI_BITS) >> 6] >> \
                                    ((((w3) * 0x9E3779B97F4A7C15ull) >> (64 - BPE_SEG_TRI_BITS)) & 63)) & 1u)
    w = w << 8 | s[b0];
    uint32_t tl = SEG_TRI_BIT((uint64_t)w);
    for (size_t b = b0; b < last; b++) {
        w = (w << 8 | s[b + 1]) & 0xFFFFFFu; /* s[b-1] s[b] s[b+1] */
        uint32_t f = big[w >> 8], tr = SEG_TRI_BIT((uint64_t)w);
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
 * rather than 1/16 (stop 13): the sampled lookups of random text still miss the cache (a quarter of
 * bpe_encode_span_multi's time); random text 3-7% faster, natural text unchanged. */
#define MEMO_SAMPLE_BITS 6
#define MEMO_SAMPLE_MASK ((1u << MEMO_SAMPLE_BITS) - 1)
#define MEMO_SKIP_RATE 154 /* of 256 (60%): cl100k random text hits ~46% and is faster without the memo */
/* the same for spans of <= 16 bytes (those that missed the piece cache): o200k random text hits ~48% there, and the
 * moving average, which swings by about +-9% over its ~16 lookups, kept crossing 60%, so the memo was on for long
 * stretches; a miss reads a set line that is not in cache.  75%: o200k random 8.3 -> 8.0 ns/byte, natural text
 * unchanged (stop 13) */
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
