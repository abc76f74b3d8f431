/* HF tokenizer.json pipelines of the SentencePiece family in one native pass (see spm.h, spm_hf):
 * the normalizer steps (Precompiled over grapheme clusters, Replace, Prepend), the Metaspace or
 * WhitespaceSplit pre-tokenizer and the model (Unigram with f64 scores, or BPE with a merge list),
 * with tokenizers' unknown-token handling.  Each step is a pure function of its input bytes; the
 * oracle is fstok.hf_norm / fstok.reference.unigram (the Python string path of fstok.hf_spm). */
#include <stdlib.h>
#include <string.h>

#include "spm.h"
#include "spm_hf_bufs.h"

#define HOT static inline __attribute__((always_inline))

HOT int buf_put(spm_bytes *b, const uint8_t *s, size_t n) {
    if (b->n + n > b->cap && spm_bytes_reserve(b, b->n + n)) return -1;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

HOT int ids_put(spm_ints *v, int32_t x) {
    if (v->n + 1 > v->cap) {
        size_t c = v->cap ? v->cap * 2 : 256;
        int32_t *q = (int32_t *)realloc(v->p, c * 4);
        if (!q) return -1;
        v->p = q;
        v->cap = c;
    }
    v->p[v->n++] = x;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Grapheme clusters (UAX #29 as fstok.hf_norm.GraphemeTable.clusters) */

enum { G_OTHER, G_CR, G_LF, G_CONTROL, G_EXTEND, G_ZWJ, G_RI, G_PREPEND, G_SPACINGMARK, G_L, G_V, G_T, G_LV, G_LVT };
#define G_EXTPICT 16
#define G_INCB_CONSONANT 32
#define G_INCB_EXTEND 64
#define G_INCB_LINKER 128

HOT uint8_t gbits(const spm_hf *h, uint32_t cp) {
    if (cp < 0x10000) return h->gbmp[cp];
    uint32_t lo = 0, hi = h->n_g;
    while (lo < hi) { /* last range starting at or below cp */
        const uint32_t mid = (lo + hi) >> 1;
        if (h->g_start[mid] <= cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo && cp <= h->g_end[lo - 1] ? h->g_bits[lo - 1] : 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Precompiled: the replacement of the shortest charsmap key that prefixes the chunk */

#define DA_OFFSET(u) (((u) >> 10) << (((u) & (1u << 9)) >> 6))

static const uint8_t *cm_transform(const spm_hf_op *op, const uint8_t *k, size_t n, size_t *olen) {
    const uint32_t *U = op->units;
    const uint32_t nu = op->n_units;
    uint32_t node = DA_OFFSET(U[0]);
    for (size_t i = 0; i < n; i++) {
        const uint8_t c = k[i];
        if (c == 0) break;
        node ^= c;
        if (node >= nu) break;
        const uint32_t u = U[node];
        if ((u & 0x800000FFu) != c) break;
        node ^= DA_OFFSET(u);
        if ((u >> 8) & 1) {
            if (node >= nu) break;
            const uint32_t v = U[node] & 0x7FFFFFFFu;
            if (v >= op->n_norm) return NULL;
            const uint8_t *r = op->norm + v;
            *olen = strlen((const char *)r); /* the replacements end with NUL (checked at load) */
            return r;
        }
    }
    return NULL;
}

/* the end of the extended grapheme cluster that starts at byte i of s[0..n) */
HOT size_t cluster_end(const spm_hf *h, const uint8_t *s, size_t i, size_t n) {
    size_t l = u8len(s[i]);
    uint8_t cur = gbits(h, u8cp(s + i, l));
    uint8_t pc = cur & 15;
    int ri = pc == G_RI, emo = (cur & G_EXTPICT) != 0, zwj_emo = 0;
    int incb = (cur & G_INCB_CONSONANT) ? 1 : 0;
    size_t j = i + l;
    while (j < n) {
        const size_t lj = u8len(s[j]);
        cur = gbits(h, u8cp(s + j, lj));
        const uint8_t cc = cur & 15;
        int brk;
        if (pc == G_CR && cc == G_LF)
            brk = 0;
        else if (pc == G_CONTROL || pc == G_CR || pc == G_LF || cc == G_CONTROL || cc == G_CR || cc == G_LF)
            brk = 1;
        else if (pc == G_L && (cc == G_L || cc == G_V || cc == G_LV || cc == G_LVT))
            brk = 0;
        else if ((pc == G_LV || pc == G_V) && (cc == G_V || cc == G_T))
            brk = 0;
        else if ((pc == G_LVT || pc == G_T) && cc == G_T)
            brk = 0;
        else if (cc == G_EXTEND || cc == G_ZWJ || cc == G_SPACINGMARK || pc == G_PREPEND)
            brk = 0;
        else if (incb == 2 && (cur & G_INCB_CONSONANT))
            brk = 0;
        else if (zwj_emo && (cur & G_EXTPICT))
            brk = 0;
        else if (pc == G_RI && cc == G_RI && (ri & 1))
            brk = 0;
        else
            brk = 1;
        if (brk) break;
        ri = cc == G_RI ? ri + 1 : 0;
        zwj_emo = cc == G_ZWJ && emo;
        emo = (cur & G_EXTPICT) || (cc == G_EXTEND && emo);
        if (cur & G_INCB_CONSONANT)
            incb = 1;
        else if (incb && (cur & G_INCB_LINKER))
            incb = 2;
        else if (!(incb && (cur & G_INCB_EXTEND)))
            incb = 0;
        pc = cc;
        j += lj;
    }
    return j;
}

size_t spm_hf_cluster_end(const spm_hf *h, const uint8_t *s, size_t i, size_t n) { return cluster_end(h, s, i, n); }

const uint8_t *spm_hf_cm_transform(const spm_hf_op *op, const uint8_t *k, size_t n, size_t *olen) {
    return cm_transform(op, k, n, olen);
}

static int precompiled(const spm_hf *h, const spm_hf_op *op, const uint8_t *s, size_t n, spm_bytes *out) {
    size_t i = 0;
    const uint8_t *pass = op->pass;
    while (i < n) {
        if (pass) {
            /* a run of code points of `pass` is a run of one-character clusters the charsmap leaves as they are,
             * but for its last one, which a following character may extend: copied up to that one */
            size_t j = i, last = i;
            while (j < n) {
                const uint8_t b = s[j];
                uint32_t cp;
                size_t l;
                if (b < 0x80) {
                    cp = b;
                    l = 1;
                } else if (b < 0xE0) {
                    if (j + 2 > n) break;
                    cp = (uint32_t)(b & 0x1F) << 6 | (s[j + 1] & 0x3F);
                    l = 2;
                } else if (b < 0xF0) {
                    if (j + 3 > n) break;
                    cp = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[j + 1] & 0x3F) << 6 | (s[j + 2] & 0x3F);
                    l = 3;
                } else {
                    break;
                }
                if (!pass[cp]) break;
                last = j;
                j += l;
            }
            const size_t stop = j == n ? n : last;
            if (stop > i) {
                if (buf_put(out, s + i, stop - i)) return -1;
                i = stop;
                if (i >= n) break;
            }
        }
        const size_t j = cluster_end(h, s, i, n);
        const uint8_t *r;
        size_t rl;
        if (j - i < 6 && (r = cm_transform(op, s + i, j - i, &rl))) {
            if (buf_put(out, r, rl)) return -1;
        } else {
            for (size_t k = i; k < j;) {
                const size_t lk = u8len(s[k]);
                r = cm_transform(op, s + k, lk, &rl);
                if (r ? buf_put(out, r, rl) : buf_put(out, s + k, lk)) return -1;
                k += lk;
            }
        }
        i = j;
    }
    return 0;
}

/* Replace: non-overlapping leftmost matches of the literal pattern (a) by b */
static int replace_lit(const spm_hf_op *op, const uint8_t *s, size_t n, spm_bytes *out) {
    const size_t na = op->na;
    size_t i = 0, last = 0;
    if (!na) return buf_put(out, s, n);
    while (i + na <= n) {
        const uint8_t *q = (const uint8_t *)memchr(s + i, op->a[0], n - i - na + 1);
        if (!q) break;
        i = (size_t)(q - s);
        if (memcmp(s + i, op->a, na) == 0) {
            if (buf_put(out, s + last, i - last) || buf_put(out, op->b, op->nb)) return -1;
            i += na;
            last = i;
        } else {
            i++;
        }
    }
    return buf_put(out, s + last, n - last);
}

/* Replace with the regex `c{k,}` (k_max 0) or `c{k}` (k_max k): runs of the character (a) */
static int replace_run(const spm_hf_op *op, const uint8_t *s, size_t n, spm_bytes *out) {
    const size_t na = op->na;
    size_t i = 0, last = 0;
    while (i + na <= n) {
        const uint8_t *q = (const uint8_t *)memchr(s + i, op->a[0], n - i - na + 1);
        if (!q) break;
        i = (size_t)(q - s);
        if (memcmp(s + i, op->a, na) != 0) {
            i++;
            continue;
        }
        size_t j = i, cnt = 0;
        while (j + na <= n && memcmp(s + j, op->a, na) == 0) {
            j += na;
            cnt++;
        }
        if (cnt >= op->k) {
            if (buf_put(out, s + last, i - last)) return -1;
            size_t reps = op->k_max ? cnt / op->k : 1;
            for (size_t r = 0; r < reps; r++)
                if (buf_put(out, op->b, op->nb)) return -1;
            last = op->k_max ? i + reps * op->k * na : j;
        }
        i = j;
    }
    return buf_put(out, s + last, n - last);
}

/* ------------------------------------------------------------------------------------------ */
/* Models on one pre-tokenized piece */

HOT int32_t vocab_get(const spm_model *m, const uint8_t *k, size_t n) {
    const spm_ftrie *f = spm_ftrie_get(m);
    uint32_t node = 0;
    for (size_t i = 0; i < n; i++) {
        node = spm_ft_step(f, node, k[i]);
        if (node == SPM_NONE) return -1;
    }
    return f->nodes[node].id;
}

/* Unigram::encode_optimized then tokenizers' unknown handling: runs of unknown pieces fused, the fused
 * string looked up, else its bytes (byte_fallback, when every byte has a piece), else the unknown id.
 * 1: an unknown piece without an unk id (the caller raises as tokenizers does).  With `sp`, the byte span
 * (begin, end) of each id too: the byte pieces of a fused run each span the whole run. */
static int hf_unigram(const spm_model *m, const spm_hf *h, const uint8_t *s, size_t n, spm_ints *tri, spm_ints *ids,
                      spm_ints *sp) {
    tri->n = 0;
    if (spm_unigram(m, s, n, tri)) return -1;
    const int32_t unk = m->unk_id;
    for (size_t k = 0; k < tri->n;) {
        const int32_t id = tri->p[k];
        if (id < 0) return 1;
        if (id != unk) {
            if (ids_put(ids, id) || (sp && (ids_put(sp, tri->p[k + 1]) || ids_put(sp, tri->p[k + 2])))) return -1;
            k += 3;
            continue;
        }
        const int32_t b = tri->p[k + 1];
        int32_t e = tri->p[k + 2];
        k += 3;
        while (k < tri->n && tri->p[k] == unk) {
            e = tri->p[k + 2];
            k += 3;
        }
        const int32_t got = vocab_get(m, s + b, (size_t)(e - b));
        if (got >= 0) {
            if (ids_put(ids, got) || (sp && (ids_put(sp, b) || ids_put(sp, e)))) return -1;
            continue;
        }
        int all = (m->flags & SPF_BYTE_FALLBACK) != 0;
        for (int32_t q = b; all && q < e; q++) all = h->byte_tok[s[q]] >= 0;
        if (all) {
            for (int32_t q = b; q < e; q++)
                if (ids_put(ids, h->byte_tok[s[q]]) || (sp && (ids_put(sp, b) || ids_put(sp, e)))) return -1;
        } else if (ids_put(ids, unk) || (sp && (ids_put(sp, b) || ids_put(sp, e)))) {
            return -1;
        }
    }
    return 0;
}

HOT uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t)(uint32_t)a << 32) | (uint32_t)b; }

HOT uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

HOT void merge_prefetch(const spm_hf *h, int32_t a, int32_t b) {
    __builtin_prefetch(&h->mtab[mix64(pair_key(a, b)) & h->mmask]);
}

/* (rank, new id) of the merge of ids a b; 0 when there is none */
HOT int merge_get(const spm_hf *h, int32_t a, int32_t b, uint32_t *rank, int32_t *nid) {
    const uint64_t key = pair_key(a, b);
    for (size_t i = mix64(key) & h->mmask;; i = (i + 1) & h->mmask) {
        const spm_hf_merge *e = &h->mtab[i];
        if (e->new_id < 0) return 0;
        if (e->key == key) {
            *rank = e->rank;
            *nid = e->new_id;
            return 1;
        }
    }
}

const char *spm_hf_merges_check(const spm_hf_merge *T, size_t n, uint32_t n_pieces) {
    if (!n || (n & (n - 1)) || n > ((size_t)1 << 40)) return "hf_merges: the slot count is not a power of two";
    if ((uintptr_t)T & 7) return "hf_merges: the table is not aligned";
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) bad |= (uint32_t)T[i].new_id + 1u > n_pieces;
    if (bad) return "hf_merges: a piece id is out of range";
    size_t head = 0; /* occupied slots (new_id >= 0) at the start: the run at the end continues there */
    while (head < n && T[head].new_id >= 0) head++;
    if (head == n) return "hf_merges: a probe run is too long";
    size_t best = 0, run = 0;
    for (size_t i = head + 1; i < n; i++) {
        run = T[i].new_id >= 0 ? run + 1 : 0;
        best = run > best ? run : best;
    }
    if (run + head > best) best = run + head;
    return best > SPM_PROBE_MAX ? "hf_merges: a probe run is too long" : NULL;
}

void spm_hf_merges_adopt(spm_hf *h, const spm_hf_merge *T, size_t n) {
    h->mtab = (spm_hf_merge *)T;
    h->mmask = n - 1;
    h->mbytes = 0;
}

int spm_hf_merges_init(spm_hf *h, const int32_t *a, const int32_t *b, const int32_t *nw, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 16) cap *= 2;
    /* probed at random, once per candidate pair: 2 MiB pages where the kernel gives them */
    h->mtab = (spm_hf_merge *)spm_huge_alloc(cap * sizeof(spm_hf_merge), &h->mbytes);
    if (!h->mtab) return -1;
    for (size_t i = 0; i < cap; i++) h->mtab[i].new_id = -1;
    h->mmask = cap - 1;
    for (size_t r = 0; r < n; r++) { /* a pair listed twice keeps its last rank (tokenizers' map) */
        const uint64_t key = pair_key(a[r], b[r]);
        for (size_t i = mix64(key) & h->mmask;; i = (i + 1) & h->mmask) {
            spm_hf_merge *e = &h->mtab[i];
            if (e->new_id < 0 || e->key == key) {
                e->key = key;
                e->rank = (uint32_t)r;
                e->new_id = nw[r];
                break;
            }
        }
    }
    return 0;
}

typedef struct {
    uint32_t rank;
    uint32_t pos;
    int32_t new_id;
    int32_t a, b; /* the pair's ids when queued: unchanged, the merge is still the queued one */
} hf_merge_item;

HOT int item_before(const hf_merge_item *x, const hf_merge_item *y) {
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}

typedef struct {
    int32_t id, prev, next;
    uint32_t len;
    uint8_t sm; /* its index in spm_hf.small (an ASCII character or U+2581 before any merge), 255: none */
} hf_sym;

typedef struct {
    hf_sym *sym;
    size_t ns, cap_s;
    hf_merge_item *q;
    size_t nq, cap_q;
} hf_bpe_work;

static int q_push(hf_bpe_work *w, hf_merge_item it) {
    if (w->nq + 1 > w->cap_q) {
        size_t c = w->cap_q ? w->cap_q * 2 : 64;
        hf_merge_item *q = (hf_merge_item *)realloc(w->q, c * sizeof *q);
        if (!q) return -1;
        w->q = q;
        w->cap_q = c;
    }
    size_t i = w->nq++;
    while (i > 0) {
        const size_t p = (i - 1) >> 1;
        if (!item_before(&it, &w->q[p])) break;
        w->q[i] = w->q[p];
        i = p;
    }
    w->q[i] = it;
    return 0;
}

static hf_merge_item q_pop(hf_bpe_work *w) {
    const hf_merge_item top = w->q[0], last = w->q[--w->nq];
    size_t i = 0;
    const size_t n = w->nq;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && item_before(&w->q[c + 1], &w->q[c])) c++;
        if (!item_before(&w->q[c], &last)) break;
        w->q[i] = w->q[c];
        i = c;
    }
    if (n) w->q[i] = last;
    return top;
}

static int sym_add(hf_bpe_work *w, int32_t id, uint32_t len, uint8_t sm) {
    if (w->ns + 1 > w->cap_s) {
        size_t c = w->cap_s ? w->cap_s * 2 : 64;
        hf_sym *q = (hf_sym *)realloc(w->sym, c * sizeof *q);
        if (!q) return -1;
        w->sym = q;
        w->cap_s = c;
    }
    hf_sym *y = &w->sym[w->ns];
    y->id = id;
    y->len = len;
    y->prev = (int32_t)w->ns - 1;
    y->next = (int32_t)w->ns + 1;
    y->sm = sm;
    w->ns++;
    return 0;
}

static const uint8_t HF_SPACE_SYM[3] = {0xE2, 0x96, 0x81};

/* the piece of one character as hf_bpe's first symbols take it: the character table, else the trie */
HOT int32_t char_piece(const spm_model *m, const spm_ftrie *f, const uint8_t *s, size_t l) {
    int8_t unused;
    int32_t id = spm_char_piece(f, s, l, &unused);
    if (id == -2) id = vocab_get(m, s, l);
    return id;
}

static pthread_mutex_t hf_hot_mu = PTHREAD_MUTEX_INITIALIZER;

/* The first BPE encode makes h's small table (the merges of every two first symbols of ASCII text, looked
 * up in the merge table) and, when the merge table is the artifact's mapping and large, copies it into
 * 2 MiB pages (it is probed at random: one TLB entry per 2 MiB where the mapping takes one per 4 KiB).
 * Without memory either stays as it was: the lookups read the merge table. */
static void hf_make_hot(const spm_model *m, spm_hf *h) {
    pthread_mutex_lock(&hf_hot_mu);
    if (!h->hot) {
        const spm_ftrie *f = spm_ftrie_get(m);
        uint64_t *T = (uint64_t *)calloc(SPM_HF_SMALL * SPM_HF_SMALL, sizeof *T);
        if (T) {
            for (int c = 0; c < 128; c++) {
                const uint8_t b = (uint8_t)c;
                h->small_id[c] = char_piece(m, f, &b, 1);
            }
            h->small_id[128] = char_piece(m, f, HF_SPACE_SYM, 3);
            for (int x = 0; x < SPM_HF_SMALL; x++)
                for (int y = 0; y < SPM_HF_SMALL; y++) {
                    uint32_t r;
                    int32_t nid;
                    if (h->small_id[x] >= 0 && h->small_id[y] >= 0 &&
                        merge_get(h, h->small_id[x], h->small_id[y], &r, &nid) && r < 0xFFFFFFFFu && nid >= 0)
                        T[x * SPM_HF_SMALL + y] = (uint64_t)(r + 1) << 32 | (uint32_t)nid;
                }
            h->small = T;
        }
        const size_t nb = (h->mmask + 1) * sizeof(spm_hf_merge), page = (size_t)2 << 20;
        if (h->mtab && !h->mbytes && nb >= page / 2) {
            size_t mapped = 0;
            spm_hf_merge *d = (spm_hf_merge *)spm_huge_alloc(nb, &mapped);
            if (d && mapped % page == 0) {
                memcpy(d, h->mtab, nb);
                /* (a reader that took the old pointer reads the mapping, which the handle keeps) */
                __atomic_store_n(&h->mtab, d, __ATOMIC_RELEASE);
                h->mbytes = mapped;
            } else if (d) {
                spm_zfree(d, mapped);
            }
        }
        __atomic_store_n(&h->hot, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&hf_hot_mu);
}

/* the merge of symbols a b: its rank and new id; 0 when there is none */
HOT int sym_pair(const spm_hf *h, const hf_sym *a, const hf_sym *b, uint32_t *rank, int32_t *nid) {
    if (a->sm != 255 && b->sm != 255) {
        const uint64_t e = h->small[a->sm * SPM_HF_SMALL + b->sm];
        if (!e) return 0;
        *rank = (uint32_t)(e >> 32) - 1;
        *nid = (int32_t)(uint32_t)e;
        return 1;
    }
    return merge_get(h, a->id, b->id, rank, nid);
}

HOT void sym_prefetch(const spm_hf *h, const hf_sym *a, const hf_sym *b) {
    if (a->sm == 255 || b->sm == 255) merge_prefetch(h, a->id, b->id);
}

#define HF_ARRAY_MAX 32 /* words of at most this many symbols merge without the heap */
#define HF_NONE UINT64_MAX

/* the candidate of symbol k and its next one: rank << 32 | k (the queue's order: rank, then position), HF_NONE */
HOT uint64_t cand_of(const spm_hf *h, const hf_bpe_work *w, int32_t k, int32_t *nid) {
    if (k < 0) return HF_NONE;
    const hf_sym *a = &w->sym[k];
    if (a->next < 0) return HF_NONE;
    uint32_t r;
    if (!sym_pair(h, a, &w->sym[a->next], &r, nid)) return HF_NONE;
    return (uint64_t)r << 32 | (uint32_t)k;
}

/* tokenizers' BPE::merge_word and Word::merge_all (no continuing_subword_prefix / end_of_word_suffix); with
 * `sp`, the byte span (begin, end) of each id too (a symbol's span grows as it merges).  Words of at most
 * HF_ARRAY_MAX symbols keep one candidate per symbol (its merge with the next one) in an array and take the
 * least (rank, position) by a scan: the queue's order over exactly the entries of the queue that are not
 * stale (a pair's merge is a function of its two ids) */
static int hf_bpe(const spm_model *m, const spm_hf *h, hf_bpe_work *w, const uint8_t *s, size_t n, spm_ints *ids,
                  spm_ints *sp) {
    if (h->ignore_merges) {
        const int32_t id = vocab_get(m, s, n);
        if (id >= 0) return ids_put(ids, id) || (sp && (ids_put(sp, 0) || ids_put(sp, (int32_t)n)));
    }
    if (!__atomic_load_n(&h->hot, __ATOMIC_ACQUIRE)) hf_make_hot(m, (spm_hf *)h);
    const int small = h->small != NULL;
    w->ns = 0;
    w->nq = 0;
    int32_t unk_id = -1;
    uint32_t unk_len = 0;
    const spm_ftrie *f = spm_ftrie_get(m);
    for (size_t i = 0; i < n;) {
        const size_t l = u8len(s[i]);
        const int32_t id = char_piece(m, f, s + i, l);
        if (id >= 0) {
            if (unk_id >= 0 && sym_add(w, unk_id, unk_len, 255)) return -1;
            unk_id = -1;
            uint8_t sm = 255;
            if (small) {
                if (l == 1 && s[i] < 128)
                    sm = s[i];
                else if (l == 3 && s[i] == HF_SPACE_SYM[0] && s[i + 1] == HF_SPACE_SYM[1] && s[i + 2] == HF_SPACE_SYM[2])
                    sm = 128;
            }
            if (sym_add(w, id, (uint32_t)l, sm)) return -1;
            /* the candidate of this symbol and the one before it: its table slot is fetched now */
            if (w->ns > 1) sym_prefetch(h, &w->sym[w->ns - 2], &w->sym[w->ns - 1]);
        } else {
            int all = h->byte_fallback;
            for (size_t q = i; all && q < i + l; q++) all = h->byte_tok[s[q]] >= 0;
            if (all) {
                for (size_t q = i; q < i + l; q++)
                    if (sym_add(w, h->byte_tok[s[q]], 1, 255)) return -1;
            } else if (m->unk_id >= 0) {
                if (unk_id >= 0 && h->fuse_unk) {
                    unk_len += (uint32_t)l;
                } else {
                    if (unk_id >= 0 && sym_add(w, unk_id, unk_len, 255)) return -1;
                    unk_id = m->unk_id;
                    unk_len = (uint32_t)l;
                }
            }
        }
        i += l;
    }
    if (unk_id >= 0 && sym_add(w, unk_id, unk_len, 255)) return -1;
    if (!w->ns) return 0;
    w->sym[w->ns - 1].next = -1;
    if (w->ns <= HF_ARRAY_MAX) {
        uint64_t cand[HF_ARRAY_MAX];
        int32_t cnid[HF_ARRAY_MAX];
        const int32_t ns = (int32_t)w->ns;
        for (int32_t k = 0; k < ns; k++) cand[k] = cand_of(h, w, k, &cnid[k]);
        for (;;) {
            uint64_t best = HF_NONE;
            for (int32_t k = 0; k < ns; k++) best = cand[k] < best ? cand[k] : best;
            if (best == HF_NONE) break;
            const uint32_t pos = (uint32_t)best; /* (< ns) */
            hf_sym *a = &w->sym[pos];
            hf_sym *b = &w->sym[a->next];
            cand[a->next] = HF_NONE;
            a->id = cnid[pos];
            a->sm = 255;
            a->len += b->len;
            b->len = 0;
            a->next = b->next;
            if (a->next >= 0) w->sym[a->next].prev = (int32_t)pos;
            if (a->prev >= 0) sym_prefetch(h, &w->sym[a->prev], a);
            if (a->next >= 0) sym_prefetch(h, a, &w->sym[a->next]);
            cand[pos] = cand_of(h, w, (int32_t)pos, &cnid[pos]);
            if (a->prev >= 0) cand[a->prev] = cand_of(h, w, a->prev, &cnid[a->prev]);
        }
        goto emit;
    }
    for (size_t k = 0; k + 1 < w->ns; k++) {
        hf_merge_item it;
        if (sym_pair(h, &w->sym[k], &w->sym[k + 1], &it.rank, &it.new_id)) {
            it.pos = (uint32_t)k;
            it.a = w->sym[k].id;
            it.b = w->sym[k + 1].id;
            if (q_push(w, it)) return -1;
        }
    }
    while (w->nq) {
        const hf_merge_item top = q_pop(w);
        hf_sym *a = &w->sym[top.pos];
        if (!a->len || a->next < 0) continue;
        hf_sym *b = &w->sym[a->next];
        uint32_t r;
        int32_t nid;
        /* tokenizers re-reads the merge of the current pair and skips the entry unless it makes the
         * queued id; a pair with the ids it was queued with makes it without a lookup */
        if ((a->id != top.a || b->id != top.b) && (!merge_get(h, a->id, b->id, &r, &nid) || nid != top.new_id))
            continue;
        a->id = top.new_id;
        a->sm = 255;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (a->next >= 0) w->sym[a->next].prev = (int32_t)top.pos;
        if (a->prev >= 0) sym_prefetch(h, &w->sym[a->prev], a);
        if (a->next >= 0) sym_prefetch(h, a, &w->sym[a->next]);
        hf_merge_item it;
        if (a->prev >= 0 && sym_pair(h, &w->sym[a->prev], a, &it.rank, &it.new_id)) {
            it.pos = (uint32_t)a->prev;
            it.a = w->sym[a->prev].id;
            it.b = a->id;
            if (q_push(w, it)) return -1;
        }
        if (a->next >= 0 && sym_pair(h, a, &w->sym[a->next], &it.rank, &it.new_id)) {
            it.pos = top.pos;
            it.a = a->id;
            it.b = w->sym[a->next].id;
            if (q_push(w, it)) return -1;
        }
    }
emit:;
    int32_t at = 0;
    for (int32_t k = 0; k >= 0; k = w->sym[k].next) {
        if (ids_put(ids, w->sym[k].id)) return -1;
        if (sp && (ids_put(sp, at) || ids_put(sp, at + (int32_t)w->sym[k].len))) return -1;
        at += (int32_t)w->sym[k].len;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Piece cache: piece bytes -> ids, shared by calls (direct-mapped, two candidate slots) */

/* one 64-byte line per slot: pieces of up to 26 bytes with up to 7 tokens, shared by threads without a lock
 * (spm_line_read / spm_line_write) */
#define PC_SLOTS (1u << 16)
#define PC_MAXB 26
#define PC_MAXT 7

struct spm_hf_cache_slot {
    uint32_t seq;
    uint32_t hash;
    int32_t id[PC_MAXT];
    uint8_t len, nt;
    uint8_t key[PC_MAXB];
} __attribute__((aligned(64)));

_Static_assert(sizeof(struct spm_hf_cache_slot) == 64, "a piece-cache slot is one cache line");

/* the cache key of a piece of at most PC_MAXB bytes s[0, n): its bytes as four little-endian words, zero past n.
 * `room`: the bytes readable from s (the words are read whole when there are 32 of them) */
HOT void piece_key(const uint8_t *s, size_t n, size_t room, uint64_t k[4]) {
    if (room >= 32) {
        memcpy(k, s, 32);
    } else {
        uint8_t b[32] = {0};
        memcpy(b, s, n);
        memcpy(k, b, 32);
    }
    for (size_t i = 0; i < 4; i++) {
        const size_t keep = n > 8 * i ? n - 8 * i : 0;
        k[i] &= keep >= 8 ? ~0ull : (1ull << (8 * keep)) - 1;
    }
}

/* a few multiplies per piece (not one per byte): the hash of the key and length, never 0 (0: a free slot) */
HOT uint32_t piece_hash(const uint64_t k[4], size_t n) {
    uint64_t h = (k[0] * 0x9E3779B97F4A7C15ull) ^ (k[1] * 0xC2B2AE3D27D4EB4Full) ^ (k[2] * 0x165667B19E3779F9ull) ^
                 ((k[3] ^ n) * 0x94D049BB133111EBull);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h >> 32) | 1u;
}

/* the slot's copy holds the piece (its key was stored zero-padded) */
HOT int piece_is(const struct spm_hf_cache_slot *v, uint32_t h, size_t n, const uint64_t k[4]) {
    uint64_t x[4] = {0};
    memcpy(x, v->key, PC_MAXB);
    return v->hash == h && v->len == n && !((x[0] ^ k[0]) | (x[1] ^ k[1]) | (x[2] ^ k[2]) | (x[3] ^ k[3]));
}

typedef struct {
    spm_ints tri;
    hf_bpe_work w;
} hf_scratch;

/* (inlined into two callers, gcc no longer sees that spm_line_read fills the slot copy it reads) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
static int run_piece(const spm_model *m, spm_hf *h, hf_scratch *sc, const uint8_t *s, size_t n, size_t room,
                     spm_ints *ids) {
    if (!n) return 0;
    struct spm_hf_cache_slot *sl = NULL;
    uint32_t hs = 0;
    uint64_t key[4];
    if (n <= PC_MAXB && h->cache) {
        piece_key(s, n, room, key);
        hs = piece_hash(key, n);
        struct spm_hf_cache_slot *s1 = &h->cache[hs & (PC_SLOTS - 1)];
        struct spm_hf_cache_slot *s2 = &h->cache[(hs >> 16 ^ hs >> 5) & (PC_SLOTS - 1)];
        /* a slot is copied (and its copy checked) only when its hash, read first on its own, is the piece's */
        struct spm_hf_cache_slot v;
        const struct spm_hf_cache_slot *hit = NULL;
        const uint32_t h1 = __atomic_load_n(&s1->hash, __ATOMIC_RELAXED);
        if (h1 == hs && spm_line_read(s1, &v) && piece_is(&v, hs, n, key))
            hit = &v;
        else if (__atomic_load_n(&s2->hash, __ATOMIC_RELAXED) == hs && spm_line_read(s2, &v) && piece_is(&v, hs, n, key))
            hit = &v;
        if (hit) {
            for (int k = 0; k < hit->nt; k++)
                if (ids_put(ids, hit->id[k])) return -1;
            return 0;
        }
        sl = h1 == 0 ? s1 : s2;
    }
    const size_t base = ids->n;
    const int rc = h->model_bpe ? hf_bpe(m, h, &sc->w, s, n, ids, NULL) : hf_unigram(m, h, s, n, &sc->tri, ids, NULL);
    if (rc) return rc;
    const size_t nt = ids->n - base;
    if (sl && nt <= PC_MAXT) {
        struct spm_hf_cache_slot v;
        memset(&v, 0, sizeof v);
        v.hash = hs;
        v.len = (uint8_t)n;
        v.nt = (uint8_t)nt;
        memcpy(v.key, key, PC_MAXB);
        memcpy(v.id, ids->p + base, nt * 4);
        spm_line_write(sl, &v);
    }
    return 0;
}
#pragma GCC diagnostic pop

spm_hf_scratch *spm_hf_scratch_new(void) { return (spm_hf_scratch *)calloc(1, sizeof(hf_scratch)); }

/* what a scratch holds (not the scratch itself) */
static void hf_scratch_release(hf_scratch *sc) {
    spm_ints_free(&sc->tri);
    free(sc->w.sym);
    free(sc->w.q);
}

void spm_hf_scratch_free(spm_hf_scratch *x) {
    hf_scratch *sc = (hf_scratch *)x;
    if (!sc) return;
    hf_scratch_release(sc);
    free(sc);
}

int spm_hf_piece_ids(const spm_model *m, spm_hf *h, spm_hf_scratch *x, const uint8_t *s, size_t n, spm_ints *ids) {
    return run_piece(m, h, (hf_scratch *)x, s, n, n, ids);
}

int spm_hf_piece_spans(const spm_model *m, spm_hf *h, spm_hf_scratch *x, const uint8_t *s, size_t n, spm_ints *ids,
                       spm_ints *sp) {
    hf_scratch *sc = (hf_scratch *)x;
    if (!n) return 0;
    return h->model_bpe ? hf_bpe(m, h, &sc->w, s, n, ids, sp) : hf_unigram(m, h, s, n, &sc->tri, ids, sp);
}

int spm_hf_cache_init(spm_hf *h) {
    h->cache = (struct spm_hf_cache_slot *)spm_huge_alloc(PC_SLOTS * sizeof(struct spm_hf_cache_slot), &h->cbytes);
    if (!h->cache) return -1;
    pthread_mutex_init(&h->mu, NULL);
    return 0;
}

void spm_hf_free(spm_hf *h) {
    if (h->cache) pthread_mutex_destroy(&h->mu);
    spm_zfree(h->cache, h->cbytes);
    if (h->mbytes) spm_zfree(h->mtab, h->mbytes); /* else the artifact's (spm_hf_merges_adopt) */
    free(h->gbmp);
    for (int k = 0; k < h->n_ops; k++) {
        free(h->ops[k].pass);
        h->ops[k].pass = NULL;
    }
    free(h->small);
    h->small = NULL;
    h->cache = NULL;
    h->mtab = NULL;
    h->gbmp = NULL;
}

/* op->pass (see spm_hf_op): the code points of grapheme class Other, LF or Control and no other grapheme
 * property (each such one ends its cluster before another, and is a cluster of its own after one), whose
 * bytes the charsmap does not replace (cm_transform: no key, or the character itself) */
static int pass_init(const spm_hf *h, spm_hf_op *op) {
    op->pass = (uint8_t *)calloc(0x10000, 1);
    if (!op->pass) return -1;
    for (uint32_t cp = 0; cp < 0x10000; cp++) {
        const uint8_t g = h->gbmp[cp];
        if ((g != G_OTHER && g != G_LF && g != G_CONTROL) || (cp >= 0xD800 && cp < 0xE000)) continue;
        uint8_t k[3];
        size_t l;
        if (cp < 0x80) {
            k[0] = (uint8_t)cp;
            l = 1;
        } else if (cp < 0x800) {
            k[0] = (uint8_t)(0xC0 | cp >> 6);
            k[1] = (uint8_t)(0x80 | (cp & 0x3F));
            l = 2;
        } else {
            k[0] = (uint8_t)(0xE0 | cp >> 12);
            k[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
            k[2] = (uint8_t)(0x80 | (cp & 0x3F));
            l = 3;
        }
        size_t rl = 0;
        const uint8_t *r = cm_transform(op, k, l, &rl);
        op->pass[cp] = !r || (rl == l && memcmp(r, k, l) == 0);
    }
    return 0;
}

int spm_hf_tables_init(spm_hf *h) {
    h->gbmp = (uint8_t *)calloc(0x10000, 1);
    if (!h->gbmp) return -1;
    for (uint32_t r = 0; r < h->n_g; r++)
        for (uint32_t c = h->g_start[r]; c <= h->g_end[r] && c < 0x10000; c++) h->gbmp[c] = h->g_bits[r];
    for (int k = 0; k < h->n_ops; k++)
        if (h->ops[k].kind == HFN_PRECOMPILED && pass_init(h, &h->ops[k])) return -1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */

HOT int seg_add(spm_ints *v, size_t st, size_t len) {
    return ids_put(v, (int32_t)st) || ids_put(v, (int32_t)len);
}

/* White_Space (what Rust's char::is_whitespace reads) */
HOT int is_white(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 9 && c <= 13);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The pre-tokenizer (Metaspace, WhitespaceSplit, the word separator, or none) and the model over normalized
 * UTF-8 (cur, cn), the ids appended to ids: spm_hf_encode after its normalizer, and spm_hf_encode_spans per
 * piece.  buf: scratch bytes that are not cur; segs: scratch.  0, -1 (no memory) or 1 (an unknown piece
 * without unk_id) */
static int hf_after_norm(const spm_model *m, spm_hf *h, const uint8_t *cur, size_t cn, int at_start, spm_bytes *buf,
                         spm_ints *segs, hf_scratch *sc, spm_ints *ids) {
    segs->n = 0;
    if (h->pre == HFP_METASPACE) {
        /* spaces become the replacement; it is prepended (scheme always, or first at the text's start)
         * unless the text starts with it; pieces split before each replacement */
        spm_bytes *dst = buf;
        dst->n = 0;
        if (cn) {
            if (spm_bytes_reserve(dst, cn * 3 + 8)) return -1;
            const int pre = h->scheme == HFM_ALWAYS || (h->scheme == HFM_FIRST && at_start);
            const int starts_rep = cur[0] == ' ' || (cn >= h->nrep && memcmp(cur, h->rep, h->nrep) == 0);
            if (pre && !starts_rep && buf_put(dst, h->rep, h->nrep)) return -1;
            size_t last = 0;
            for (size_t i = 0; i < cn; i++) {
                if (cur[i] != ' ') continue;
                if (buf_put(dst, cur + last, i - last) || buf_put(dst, h->rep, h->nrep)) return -1;
                last = i + 1;
            }
            if (buf_put(dst, cur + last, cn - last)) return -1;
        }
        cur = dst->p;
        cn = dst->n;
        if (!h->split) {
            if (seg_add(segs, 0, cn)) return -1;
            goto run;
        }
        size_t st = 0;
        const uint8_t r0 = h->rep[0];
        for (size_t i = 0; i + h->nrep <= cn;) {
            if (cur[i] == r0 && memcmp(cur + i, h->rep, h->nrep) == 0) {
                if (i > st && seg_add(segs, st, i - st)) return -1;
                st = i;
                i += h->nrep;
            } else {
                i += u8len(cur[i]);
            }
        }
        if (seg_add(segs, st, cn - st)) return -1;
        goto run;
    }
    if (h->pre == HFP_WHITESPACE_SPLIT) {
        size_t st = 0;
        int in_word = 0;
        for (size_t i = 0; i < cn;) {
            const size_t l = u8len(cur[i]);
            const int w = is_white(u8cp(cur + i, l));
            if (w && in_word) {
                if (seg_add(segs, st, i - st)) return -1;
                in_word = 0;
            } else if (!w && !in_word) {
                st = i;
                in_word = 1;
            }
            i += l;
        }
        if (in_word && seg_add(segs, st, cn - st)) return -1;
        goto run;
    }
    if (h->nwsep) {
        const size_t ns = h->nwsep;
        const uint8_t w0 = h->wsep[0];
        const uint8_t *cut = h->cut;
        size_t st = 0;
        int prev_sep = 1;
        for (size_t i = 0; i < cn;) {
            const int sep = cur[i] == w0 && i + ns <= cn && memcmp(cur + i, h->wsep, ns) == 0;
            if ((sep && !prev_sep) ||
                (cut && i > st && !((cut[((size_t)cur[i - 1] << 5) | (cur[i] >> 3)] >> (cur[i] & 7)) & 1))) {
                if (seg_add(segs, st, i - st)) return -1;
                st = i;
            }
            prev_sep = sep;
            i += sep ? ns : u8len(cur[i]);
        }
        if (seg_add(segs, st, cn - st)) return -1;
        goto run;
    }
    if (seg_add(segs, 0, cn)) return -1;
run:;
    /* the pieces in order; the cache slots of the pieces a few ahead are fetched meanwhile */
    int rc = 0;
    for (size_t k = 0; k < segs->n && !rc; k += 2) {
        if (h->cache && k + 16 < segs->n) {
            const size_t ln = (size_t)segs->p[k + 17];
            if (ln <= PC_MAXB) {
                uint64_t key[4];
                piece_key(cur + segs->p[k + 16], ln, cn - (size_t)segs->p[k + 16], key);
                const uint32_t hs = piece_hash(key, ln);
                __builtin_prefetch(&h->cache[hs & (PC_SLOTS - 1)]);
                __builtin_prefetch(&h->cache[(hs >> 16 ^ hs >> 5) & (PC_SLOTS - 1)]);
            }
        }
        rc = run_piece(m, h, sc, cur + segs->p[k], (size_t)segs->p[k + 1], cn - (size_t)segs->p[k], ids);
    }
    return rc;
}

/* The pre-tokenizer and model of the handle on each (start, end, flag) uint32 triple of the normalized UTF-8
 * `in` (pieces a tokenizer.json pipeline cut before them; the handle has no normalizer steps): the Metaspace
 * "first" scheme prepends only to a piece at byte 0 when first_ok.  counts[t] (when not NULL): the ids of
 * piece t.  0, -1 or 1 as spm_hf_encode. */
int spm_hf_encode_spans(const spm_model *m, spm_hf *h, const uint8_t *in, size_t n, const uint32_t *tri, size_t ntri,
                        int first_ok, spm_ints *ids, uint32_t *counts) {
    spm_bytes buf = {0};
    spm_ints segs = {0};
    hf_scratch sc;
    memset(&sc, 0, sizeof sc);
    int rc = 0;
    (void)n;
    for (size_t t = 0; t < ntri && !rc; t++) {
        const size_t before = ids->n;
        const uint32_t st = tri[3 * t], en = tri[3 * t + 1];
        rc = hf_after_norm(m, h, in + st, (size_t)(en - st), first_ok && st == 0, &buf, &segs, &sc, ids);
        if (counts) counts[t] = (uint32_t)(ids->n - before);
    }
    spm_bytes_free(&buf);
    spm_ints_free(&segs);
    hf_scratch_release(&sc);
    return rc;
}

/* The handle's normalizer steps over in[0:n), alternating between the buffers a and b: *cur, *cn receive the
 * result (in itself when there are no steps).  0 or -1 (no memory, or a step that failed) */
static int hf_run_ops(const spm_hf *h, const uint8_t *in, size_t n, spm_bytes *a, spm_bytes *b, const uint8_t **cur_out,
                      size_t *cn_out) {
    const uint8_t *cur = in;
    size_t cn = n;
    for (int k = 0; k < h->n_ops; k++) {
        const spm_hf_op *op = &h->ops[k];
        spm_bytes *dst = (cur == a->p) ? b : a;
        dst->n = 0;
        if (spm_bytes_reserve(dst, cn + 16)) return -1;
        int r = 0;
        switch (op->kind) {
        case HFN_PRECOMPILED: r = precompiled(h, op, cur, cn, dst); break;
        case HFN_REPLACE: r = replace_lit(op, cur, cn, dst); break;
        case HFN_REPLACE_RUN: r = replace_run(op, cur, cn, dst); break;
        case HFN_PREPEND:
            if (cn) r = buf_put(dst, op->a, op->na) || buf_put(dst, cur, cn);
            break;
        default: r = -1;
        }
        if (r) return -1;
        cur = dst->p;
        cn = dst->n;
    }
    *cur_out = cur;
    *cn_out = cn;
    return 0;
}

/* The handle's normalizer steps alone over UTF-8 `in` into *out (a tokenizer.json pipeline cuts the normalized
 * text before its model runs).  0 or -1 (no memory) */
int spm_hf_normalize(const spm_hf *h, const uint8_t *in, size_t n, spm_bytes *out) {
    spm_bytes a = {0}, b = {0};
    const uint8_t *cur = in;
    size_t cn = n;
    int rc = -1;
    if (hf_run_ops(h, in, n, &a, &b, &cur, &cn)) goto done;
    out->n = 0;
    if (spm_bytes_reserve(out, cn + 1)) goto done;
    if (cn) memcpy(out->p, cur, cn);
    out->n = cn;
    rc = 0;
done:
    spm_bytes_free(&a);
    spm_bytes_free(&b);
    return rc;
}

int spm_hf_encode(const spm_model *m, spm_hf *h, const uint8_t *in, size_t n, int at_start, spm_ints *ids) {
    spm_bytes a = {0}, b = {0};
    spm_ints segs = {0}; /* (start, length) of each piece */
    hf_scratch sc;
    memset(&sc, 0, sizeof sc);
    int rc = -1;
    const uint8_t *cur = in;
    size_t cn = n;
    if (hf_run_ops(h, in, n, &a, &b, &cur, &cn)) goto done;
    if (h->pre == HFP_METASPACE && h->scheme == HFM_FIRST && h->n_ops) {
        /* the "first" scheme reads the original start of the normalized text, as the alignments move it: a
         * Replace at the start gives its content the span of the last character it replaces; a character
         * Precompiled inserts before any other gets (0, 0).  (Any positive start stands for a segment that
         * does not start the text.)  rc 2: the caller's other path */
        int32_t st;
        if ((rc = spm_hf_first_start(h, in, n, at_start ? 0 : 1, &st))) {
            if (rc == 2) rc = 1;
            goto done;
        }
        rc = -1;
        at_start = st == 0;
    }
    rc = hf_after_norm(m, h, cur, cn, at_start, (cur == a.p) ? &b : &a, &segs, &sc, ids);
done:
    spm_bytes_free(&a);
    spm_bytes_free(&b);
    spm_ints_free(&segs);
    hf_scratch_release(&sc);
    return rc;
}
