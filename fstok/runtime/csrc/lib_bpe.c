/* Byte-level BPE span encoders over the compiled tables (see bpe.h). No Python here. */
#include "bpe.h"

#include <stdlib.h>

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
        tok[i] = r;
        tok[j] = BPE_NONE;
        uint32_t k = nxt[j];
        nxt[i] = k;
        if (k != BPE_NONE) {
            prv[k] = i;
            uint32_t r2 = bpe_pair_get(m, r, tok[k]);
            if (r2 != BPE_NONE) heap_push(heap, &hn, ((uint64_t)r2 << 32) | i);
        }
        uint32_t p = prv[i];
        if (p != BPE_NONE) {
            uint32_t r3 = bpe_pair_get(m, tok[p], r);
            if (r3 != BPE_NONE) heap_push(heap, &hn, ((uint64_t)r3 << 32) | p);
        }
    }
    size_t cnt = 0;
    for (uint32_t i = 0; i != BPE_NONE; i = nxt[i]) cnt++;
    int rc = bpe_vec_reserve(out, cnt);
    if (rc == 0)
        for (uint32_t i = 0; i != BPE_NONE; i = nxt[i]) out->ids[out->len++] = tok[i];
    free(tok), free(nxt), free(prv), free(heap);
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

int bpe_encode_backtrack(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    if (n == 0) return 0;
    size_t words = (n + 1 + 63) / 64;
    uint64_t bits_s[16];
    uint64_t *bits = words <= 16 ? bits_s : (uint64_t *)malloc(words * sizeof(uint64_t));
    if (!bits) return -1;
    memset(bits, 0xFF, words * sizeof(uint64_t));
    size_t base = out->len, pos = 0;
    uint32_t next = longest_match(m, s, n);
    while (next != BPE_NONE) {
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

/* ---------------------------------------------------------------- dispatch */

/* memo probe for a multi-token span: returns the entry (hit: e->len == n and same key) to fill after a miss */
static inline bpe_memo_entry *memo_slot(bpe_memo *memo, const uint8_t *s, size_t n, uint64_t k[3]) {
    k[0] = bpe_head8(s, n < 8 ? n : 8);
    k[1] = n > 8 ? bpe_head8(s + 8, n < 16 ? n - 8 : 8) : 0;
    k[2] = n > 16 ? bpe_head8(s + 16, n - 16) : 0;
    uint64_t h = (k[0] * 0x9E3779B97F4A7C15ull) ^ (k[1] * 0xC2B2AE3D27D4EB4Full) ^ (k[2] * 0x165667B19E3779F9ull) ^ n;
    return &memo->e[(h ^ (h >> 29)) & (BPE_MEMO_N - 1)];
}

int bpe_encode_span_avail(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, size_t avail, bpe_vec *out) {
    size_t base = out->len;
    int rc;
    if (n <= m->hash_max || !m->backtrack_ok || !m->trie_has_spans) {
        uint32_t id = bpe_span_get_w(m, s, n, bpe_head8_fast(s, n, avail));
        if (id != BPE_NONE) {
            if (bpe_vec_reserve(out, 1)) return -1;
            out->ids[out->len++] = id;
            return 0;
        }
        bpe_memo_entry *e = NULL;
        uint64_t k[3] = {0, 0, 0};
        if (memo && n <= BPE_MEMO_MAXLEN) {
            e = memo_slot(memo, s, n, k);
            if (e->len == n && e->k[0] == k[0] && e->k[1] == k[1] && e->k[2] == k[2]) {
                if (bpe_vec_reserve(out, BPE_MEMO_MAXTOK)) return -1;
                memcpy(out->ids + out->len, e->ids, sizeof e->ids);
                out->len += e->ntok;
                return 0;
            }
        }
        uint32_t lim = (s[n - 1] & 0x80) ? m->short_max_mb : m->short_max;
        if (n <= lim || (!m->backtrack_ok && n <= m->short_max)) rc = bpe_encode_short(m, s, n, out);
        else if (m->backtrack_ok) rc = bpe_encode_backtrack(m, s, n, out);
        else rc = bpe_encode_heap(m, s, n, out);
        if (rc) return rc;
        if (!m->int_is_ext)
            for (size_t i = base; i < out->len; i++) out->ids[i] = m->int_ext[out->ids[i]];
        size_t nt = out->len - base;
        if (e && nt <= BPE_MEMO_MAXTOK) {
            e->len = (uint8_t)n;
            e->ntok = (uint8_t)nt;
            e->k[0] = k[0], e->k[1] = k[1], e->k[2] = k[2];
            memcpy(e->ids, out->ids + base, nt * 4);
        }
        return 0;
    }
    rc = bpe_encode_backtrack(m, s, n, out);
    if (rc) return rc;
    if (!m->int_is_ext)
        for (size_t i = base; i < out->len; i++) out->ids[i] = m->int_ext[out->ids[i]];
    return 0;
}

int bpe_encode_span_memo(const bpe_model *m, bpe_memo *memo, const uint8_t *s, size_t n, bpe_vec *out) {
    return bpe_encode_span_avail(m, memo, s, n, n, out);
}

int bpe_encode_span(const bpe_model *m, const uint8_t *s, size_t n, bpe_vec *out) {
    return bpe_encode_span_avail(m, NULL, s, n, n, out);
}
