/* SentencePiece-family models over compiled tables (see spm.h). */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#endif
#include "spm.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define HOT static inline __attribute__((always_inline))

#define DENSE_MIN 24 /* children from which a node gets a full row */

void *spm_zalloc(size_t n) {
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void spm_zfree(void *p, size_t n) {
    if (p) munmap(p, n);
}

#define HUGE_ALIGN ((size_t)2 << 20)

void *spm_huge_alloc(size_t n, size_t *mapped) {
    *mapped = 0;
    if (!n) n = 1;
    static int use = -1; /* FSTOK_TABLES_HUGE=0: small pages (the same switch as the byte-level tables) */
    if (use < 0) {
        const char *e = getenv("FSTOK_TABLES_HUGE");
        use = !(e && e[0] == '0');
    }
    if (!use || n < HUGE_ALIGN / 2) {
        void *p = spm_zalloc(n);
        if (p) *mapped = n;
        return p;
    }
    const size_t total = (n + HUGE_ALIGN - 1) & ~(HUGE_ALIGN - 1), big = total + HUGE_ALIGN;
    uint8_t *q = (uint8_t *)mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED) return NULL;
    uint8_t *a = (uint8_t *)(((uintptr_t)q + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1));
    if (a > q) munmap(q, (size_t)(a - q));
    const size_t tail = (size_t)(q + big - (a + total));
    if (tail) munmap(a + total, tail);
#ifdef MADV_HUGEPAGE
    madvise(a, total, MADV_HUGEPAGE); /* advice only: where it fails the table works in small pages */
#endif
    *mapped = total;
    return a;
}

int spm_trie_init(spm_trie *t, int dense) {
    for (int c = 0; c < 256; c++) t->root[c] = SPM_NONE;
    t->dense_of = NULL;
    t->rows = NULL;
    if (!t->n_nodes) return 0;
    for (uint32_t e = t->first[0]; e < t->first[1]; e++) t->root[t->label[e]] = t->target[e];
    if (!dense) return 0;
    uint32_t nd = 0;
    for (uint32_t v = 1; v < t->n_nodes; v++) nd += t->first[v + 1] - t->first[v] >= DENSE_MIN;
    if (!nd) return 0;
    t->dense_of = (uint32_t *)malloc((size_t)t->n_nodes * sizeof(uint32_t));
    t->rows = (uint32_t *)malloc((size_t)nd * 256 * sizeof(uint32_t));
    if (!t->dense_of || !t->rows) {
        spm_trie_free(t);
        return -1;
    }
    uint32_t r = 0;
    t->dense_of[0] = SPM_NONE;
    for (uint32_t v = 1; v < t->n_nodes; v++) {
        if (t->first[v + 1] - t->first[v] < DENSE_MIN) {
            t->dense_of[v] = SPM_NONE;
            continue;
        }
        uint32_t *row = t->rows + (size_t)r * 256;
        for (int c = 0; c < 256; c++) row[c] = SPM_NONE;
        for (uint32_t e = t->first[v]; e < t->first[v + 1]; e++) row[t->label[e]] = t->target[e];
        t->dense_of[v] = r++;
    }
    return 0;
}

const char *spm_trie_check(const uint32_t *first, size_t n_first, const uint8_t *label, size_t n_label,
                           const uint32_t *target, size_t n_target, const int32_t *value, size_t n,
                           const int32_t *value2, size_t n_value2, int64_t n_values) {
    (void)label;
    if (n == 0) return (n_first > 1 || n_label || n_target) ? "empty trie with edges" : NULL;
    if (n_first != n + 1 || first[0] != 0 || first[n] != n_label || n_label != n_target)
        return "edge ranges do not match the edge arrays";
    for (size_t v = 0; v < n; v++) {
        if (first[v + 1] < first[v]) return "edge ranges are not monotonic";
        for (uint32_t e = first[v]; e < first[v + 1]; e++) {
            if (target[e] <= v || target[e] >= n) return "an edge does not lead to a later node";
            if (e > first[v] && label[e] <= label[e - 1]) return "labels are not strictly sorted within a node";
        }
        if (value[v] < -1 || value[v] >= n_values) return "a value is out of range";
    }
    if (value2) {
        if (n_value2 != n) return "value2 is out of range";
        for (size_t v = 0; v < n; v++)
            if (value2[v] < -1 || value2[v] >= n_values) return "value2 is out of range";
    }
    return NULL;
}

void spm_trie_free(spm_trie *t) {
    free(t->dense_of);
    free(t->rows);
    t->dense_of = t->rows = NULL;
}

#define trie_step spm_trie_step

HOT uint32_t score_key(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* UTF-8 as sentencepiece reads it (string_util.h): the length a lead byte announces */
HOT size_t one_char_len(uint8_t b) { return (size_t)"\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[b >> 4]; }

#define pt_slot spm_slot

static void pt_put(uint64_t *T, uint64_t mask, uint64_t e) {
    uint64_t i = pt_slot(e & SPM_PT_KEYMASK, mask);
    while (T[i]) i = (i + 1) & mask;
    T[i] = e;
}

static void ch_put(uint64_t *T, uint64_t mask, uint64_t e) {
    uint64_t i = pt_slot(e & SPM_CH_KEYMASK, mask);
    while (T[i]) i = (i + 1) & mask;
    T[i] = e;
}

#define ch_key spm_ch_key

static uint32_t ft_step_c(const spm_ftrie *f, uint32_t node, uint8_t c);
static void bmp_build(spm_ftrie *f);

static const uint8_t SPACE_SYM[3] = {0xE2, 0x96, 0x81};

/* the pair table's entry for pieces (a, b), or 0 */
HOT uint64_t pt_get(const spm_ftrie *f, int32_t a, int32_t b) {
    const uint64_t key = SPM_PT_KEY(a, b);
    const uint64_t *T = f->pairs;
    for (uint64_t i = pt_slot(key, f->pmask);; i = (i + 1) & f->pmask) {
        const uint64_t e = T[i];
        if ((e & SPM_PT_KEYMASK) == key || !e) return e;
    }
}

#define SPM_SMALL 129


/* The pair and character tables of f (see spm_ftrie): a depth-first walk over the keys of the pieces
 * trie; at each key (a piece c) every proper prefix that is a piece a is an ancestor on the walk's stack,
 * and the rest of the key (b) is a walk from the root that the descent extends by one step per byte: the
 * walk keeps, per depth, the splits whose prefix is a piece and whose rest is still a key prefix, with the
 * node the rest reaches.  0, or -1 (out of memory: the walks stay in use). */
static int pairs_build(const spm_model *m, const spm_trie *t, spm_ftrie *f) {
    const uint32_t n = t->n_nodes;
    for (int c = 0; c < 128; c++) f->ascii_id[c] = -1;
    if (m->n_pieces > SPM_PT_ID_MAX) return 0; /* ids do not fit the entries: symbols walk the trie */
    /* the pair table serves the .model BPE merges; the character table every model's first symbols */
    const int want_pairs = (m->flags & SPF_BPE) && !(m->flags & SPF_HF) && m->score;
    if (want_pairs) f->skey = (uint32_t *)spm_huge_alloc((size_t)m->n_pieces * 4, &f->bytes[4]);
    uint32_t *stk = (uint32_t *)malloc((size_t)n * 4 * 2); /* node, next edge */
    uint8_t *path = (uint8_t *)malloc(n + 1);
    uint32_t *anc = (uint32_t *)malloc(((size_t)n + 1) * 4);
    uint64_t *chars = NULL;
    uint64_t cap = 1024, cnt = 0, ccap = 256, ccnt = 0;
    /* the live splits of each depth d: (k, node of path[k, d)) at [loff[d], loff[d + 1]) */
    size_t *loff = (size_t *)calloc((size_t)n + 2, sizeof(size_t));
    uint32_t *lk = NULL, *lr = NULL;
    size_t lcap = 0;
    while (cap * 3 < (uint64_t)m->n_pieces * 2 * 5) cap *= 2; /* room for ~2 pairs per piece at load 0.6 */
    /* built in place: zeroed 2 MiB pages (no copy, no fault per 4 KiB of a table written at random) */
    size_t tbytes = 0;
    uint64_t *T = want_pairs ? (uint64_t *)spm_huge_alloc(cap * sizeof *T, &tbytes) : NULL;
    chars = (uint64_t *)calloc(ccap, 8);
    if ((want_pairs && (!f->skey || !T)) || !stk || !path || !anc || !chars || !loff) goto oom;
    if (want_pairs)
        for (uint32_t i = 0; i < m->n_pieces; i++) f->skey[i] = score_key(m->score[i]);
    size_t sp = 0;
    stk[0] = 0;
    stk[1] = t->first[0];
    anc[0] = 0;
    while (1) {
        uint32_t v = stk[2 * sp], e = stk[2 * sp + 1];
        if (e >= t->first[v + 1]) {
            if (!sp) break;
            sp--;
            continue;
        }
        stk[2 * sp + 1] = e + 1;
        const uint32_t w = t->target[e];
        sp++;
        path[sp - 1] = t->label[e];
        anc[sp] = w;
        stk[2 * sp] = w;
        stk[2 * sp + 1] = t->first[w];
        if (want_pairs) {
            const size_t p0 = loff[sp - 1], p1 = loff[sp];
            if (p1 + (p1 - p0) + 1 > lcap) {
                size_t nc = lcap ? lcap : 1024;
                while (nc < p1 + (p1 - p0) + 1) nc *= 2;
                uint32_t *k2 = (uint32_t *)realloc(lk, nc * 4), *r2 = k2 ? (uint32_t *)realloc(lr, nc * 4) : NULL;
                if (k2) lk = k2;
                if (!k2 || !r2) goto oom;
                lr = r2;
                lcap = nc;
            }
            const uint8_t lab = path[sp - 1];
            size_t o = p1;
            for (size_t j = p0; j < p1; j++) {
                const uint32_t r = ft_step_c(f, lr[j], lab);
                if (r != SPM_NONE) {
                    lk[o] = lk[j];
                    lr[o++] = r;
                }
            }
            if (sp >= 2 && t->value[anc[sp - 1]] >= 0) { /* a new split: the prefix is the parent */
                const uint32_t r = ft_step_c(f, 0, lab);
                if (r != SPM_NONE) {
                    lk[o] = (uint32_t)(sp - 1);
                    lr[o++] = r;
                }
            }
            loff[sp + 1] = o;
        }
        const int32_t c = t->value[w];
        if (c < 0) continue;
        const int unused = m->ptype[c] == SPT_UNUSED;
        if (sp == one_char_len(path[0]) && sp <= 4) { /* a piece of one character (as spm_bpe cuts them) */
            if (sp == 1 && path[0] < 128) {
                f->ascii_id[path[0]] = unused ? -2 : c;
            } else {
                if ((ccnt + 1) * 5 > ccap * 3) {
                    uint64_t *U = (uint64_t *)calloc(ccap * 2, 8);
                    if (!U) goto oom;
                    for (uint64_t i = 0; i < ccap; i++)
                        if (chars[i]) ch_put(U, ccap * 2 - 1, chars[i]);
                    free(chars);
                    chars = U;
                    ccap *= 2;
                }
                ch_put(chars, ccap - 1, ch_key(path, sp) | (uint64_t)(c + 1) << 35 | (unused ? SPM_CH_UNUSED : 0));
                ccnt++;
            }
        }
        for (size_t j = want_pairs ? loff[sp] : 0; j < (want_pairs ? loff[sp + 1] : 0); j++) {
            const int32_t a = t->value[anc[lk[j]]];
            const uint32_t r = lr[j];
            if (f->nodes[r].id < 0) continue;
            if ((cnt + 1) * 5 > cap * 3) { /* keep the load under 0.6 */
                size_t ub;
                uint64_t *U = (uint64_t *)spm_huge_alloc(cap * 2 * sizeof *U, &ub);
                if (!U) goto oom;
                for (uint64_t i = 0; i < cap; i++)
                    if (T[i]) pt_put(U, cap * 2 - 1, T[i]);
                spm_zfree(T, tbytes);
                T = U;
                tbytes = ub;
                cap *= 2;
            }
            pt_put(T, cap - 1, SPM_PT_KEY(a, f->nodes[r].id) | (uint64_t)c << 42 | (unused ? SPM_PT_UNUSED : 0));
            cnt++;
        }
    }
    free(stk);
    free(path);
    free(anc);
    free(loff);
    free(lk);
    free(lr);
    stk = NULL;
    path = NULL;
    anc = NULL;
    loff = NULL;
    lk = lr = NULL;
    if (!(f->chars = (uint64_t *)spm_huge_alloc(ccap * 8, &f->bytes[5]))) goto oom;
    memcpy(f->chars, chars, ccap * 8);
    free(chars);
    f->pairs = T;
    f->bytes[3] = tbytes;
    f->pmask = cap - 1;
    f->cmask = ccap - 1;
    bmp_build(f);
    if (want_pairs && (f->small = (uint64_t *)calloc(SPM_SMALL * SPM_SMALL, 8))) {
        int32_t sid[SPM_SMALL];
        int8_t un;
        for (int i = 0; i < 128; i++) sid[i] = f->ascii_id[i];
        sid[128] = spm_char_piece(f, SPACE_SYM, 3, &un);
        if (un) sid[128] = -1;
        for (int i = 0; i < SPM_SMALL; i++)
            for (int j = 0; j < SPM_SMALL && sid[i] >= 0; j++) {
                if (sid[j] < 0) continue;
                const uint64_t e = pt_get(f, sid[i], sid[j]);
                if (e)
                    f->small[i * SPM_SMALL + j] = (uint64_t)(SPM_PT_C(e) + 1) | (uint64_t)f->skey[SPM_PT_C(e)] << 21 |
                                                  (uint64_t)((e & SPM_PT_UNUSED) != 0) << 53;
            }
    }
    return 0;
oom:
    free(stk);
    free(path);
    free(anc);
    free(loff);
    free(lk);
    free(lr);
    spm_zfree(T, tbytes);
    free(chars);
    spm_zfree(f->skey, f->bytes[4]);
    f->pairs = NULL;
    f->skey = NULL;
    f->chars = NULL;
    return -1;
}

/* f->bmp from f->chars (see spm_ftrie): the entries of well-formed 2- and 3-byte characters; where it cannot
 * be allocated, the hashed table serves */
static void bmp_build(spm_ftrie *f) {
    f->bmp = NULL;
    if (!f->chars) return;
    uint32_t *B = (uint32_t *)spm_zalloc((size_t)65536 * 4);
    if (!B) return;
    for (uint64_t i = 0; i <= f->cmask; i++) {
        const uint64_t e = f->chars[i];
        if (!e) continue;
        const uint32_t len = (uint32_t)(e >> 32) & 7;
        const uint8_t b0 = (uint8_t)e, b1 = (uint8_t)(e >> 8), b2 = (uint8_t)(e >> 16);
        uint32_t cp;
        if (len == 2 && b0 >= 0xC2 && b0 <= 0xDF && (b1 & 0xC0) == 0x80 && !(e >> 16 & 0xFFFF))
            cp = (uint32_t)(b0 & 0x1F) << 6 | (b1 & 0x3F);
        else if (len == 3 && (b0 & 0xF0) == 0xE0 && (b1 & 0xC0) == 0x80 && (b2 & 0xC0) == 0x80 && !(e >> 24 & 0xFF))
            cp = (uint32_t)(b0 & 0x0F) << 12 | (uint32_t)(b1 & 0x3F) << 6 | (b2 & 0x3F);
        else
            continue;
        if (len == 3 && cp < 0x800) continue;
        if (B[cp]) continue; /* keys are unique in a sound table (a damaged one may answer another of its pieces) */
        B[cp] = (uint32_t)((e >> 35) & ((1u << 21) - 1)) | ((e & SPM_CH_UNUSED) ? 0x80000000u : 0);
    }
    f->bmp = B;
}

static void ftrie_release(spm_ftrie *f) {
    spm_zfree(f->bmp, (size_t)65536 * 4);
    if (!f->borrowed) {
        spm_zfree(f->chars, f->bytes[5]);
        free(f->small);
    }
    const int own = f->borrowed ? f->own : 7;
    if (own & 1) spm_zfree(f->nodes, f->bytes[0]);
    if (own & 2) spm_zfree(f->rows, f->bytes[2]);
    if (own & 4) spm_zfree(f->pairs, f->bytes[3]);
    spm_zfree(f->skey, f->bytes[4]);
    spm_zfree(f->wide, f->wide_bytes);
    spm_zfree(f->cnode, (size_t)65536 * 4);
    spm_zfree(f->da, f->da_bytes);
    free(f);
}

spm_ftrie *spm_ftrie_build(const spm_model *m, const spm_trie *t) {
    const uint32_t n = t->n_nodes;
    if (!n || n >= SPM_FT_DENSE) return NULL;
    spm_ftrie *f = (spm_ftrie *)calloc(1, sizeof *f);
    uint32_t *ord = (uint32_t *)malloc((size_t)n * 4), *nid = (uint32_t *)malloc((size_t)n * 4);
    if (!f || !ord || !nid) goto fail;
    /* breadth-first numbering: the children of a node get consecutive numbers in label order.  A node
     * reached twice (spm_trie_check makes edges lead forward, not form a tree) is refused. */
    for (uint32_t v = 0; v < n; v++) nid[v] = SPM_NONE;
    uint32_t next = 1, nd = 0;
    nid[0] = 0;
    ord[0] = 0;
    for (uint32_t q = 0; q < next; q++) {
        const uint32_t v = ord[q];
        nd += t->first[v + 1] - t->first[v] > SPM_FT_INLINE;
        for (uint32_t e = t->first[v]; e < t->first[v + 1]; e++) {
            const uint32_t w = t->target[e];
            if (nid[w] != SPM_NONE) goto fail;
            nid[w] = next;
            ord[next++] = w;
        }
    }
    /* one record more than the nodes: the label compare reads 16 bytes from the last record's `nk` */
    f->nodes = (spm_fnode *)spm_huge_alloc(((size_t)next + 1) * sizeof(spm_fnode), &f->bytes[0]);
    if (!f->nodes) goto fail;
    if (nd && !(f->rows = (uint32_t *)spm_huge_alloc((size_t)nd * 256 * sizeof(uint32_t), &f->bytes[2]))) goto fail;
    f->n_nodes = next;
    f->n_rows = nd;
    uint32_t r = 0;
    for (uint32_t q = 0; q < next; q++) {
        const uint32_t v = ord[q];
        spm_fnode *x = &f->nodes[q];
        const uint32_t e0 = t->first[v], e1 = t->first[v + 1];
        if (e1 - e0 > SPM_FT_INLINE) {
            uint32_t *row = f->rows + (size_t)r * 256;
            for (int c = 0; c < 256; c++) row[c] = SPM_NONE;
            for (uint32_t e = e0; e < e1; e++) row[t->label[e]] = nid[t->target[e]];
            x->kids = SPM_FT_DENSE | r++;
        } else {
            x->kids = e1 > e0 ? nid[t->target[e0]] : 0;
            x->nk = (uint8_t)(e1 - e0);
            for (uint32_t e = e0; e < e1; e++) x->lab[e - e0] = t->label[e];
        }
        const int32_t id = t->value[v];
        x->id = id;
        if (id >= 0) {
            x->type = m->ptype[id];
            x->score = m->score ? (double)m->score[id] : m->score64 ? m->score64[id] : 0.0;
        }
    }
    free(ord);
    free(nid);
    ord = nid = NULL;
    if (pairs_build(m, t, f)) goto fail;
    return f;
fail:
    free(ord);
    free(nid);
    if (f) ftrie_release(f);
    return NULL;
}

void spm_ftrie_release(spm_ftrie *f) {
    if (f) ftrie_release(f);
}

void spm_ftrie_free(spm_model *m) {
    if (m->ft) ftrie_release(m->ft);
    m->ft = NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* The walking layout stored in the artifact: checked here before any walk reads it (the Python form of
 * this check is fstok.validate_spm_walk, its oracle), then used in place. */

_Static_assert(sizeof(spm_fnode) == 32, "a node record is 32 bytes");

/* the pair table serves the .model BPE merges (score order) */
static int wants_pairs(const spm_model *m) {
    return (m->flags & SPF_BPE) && !(m->flags & SPF_HF) && m->score && m->n_pieces <= SPM_PT_ID_MAX;
}

/* the longest run of occupied slots of an open-addressed table of n (a power of two) slots, counted
 * around the end; n + 1 when no slot is empty (a lookup of a missing key would never end) */
static size_t longest_run(const uint64_t *T, size_t n) {
    size_t head = 0; /* the occupied slots at the start: the run at the end continues there */
    while (head < n && T[head]) head++;
    if (head == n) return n + 1;
    size_t best = 0, run = 0;
    for (size_t i = head + 1; i < n; i++) {
        run = T[i] ? run + 1 : 0;
        best = run > best ? run : best;
    }
    return run + head > best ? run + head : best;
}

static int pow2(size_t n) { return n && !(n & (n - 1)); }

/* 1 when the pair table's entries name pieces below np and no run of occupied slots is longer than
 * SPM_PROBE_MAX, in one pass: occupancy is gathered per block of 64 slots, and only a table with a full block
 * (a run of 64 or more; at the compiler's load of at most 0.6, never seen) counts its runs exactly */
static int pairs_sound(const uint64_t *P, size_t n, uint32_t np) {
    if (n % 64) {
        for (size_t i = 0; i < n; i++)
            if (P[i] && SPM_PT_C(P[i]) >= np) return 0;
        return longest_run(P, n) <= SPM_PROBE_MAX;
    }
    uint64_t bad = 0, full = 0;
    for (size_t b = 0; b < n; b += 64) {
        uint64_t occ = 0;
        for (int j = 0; j < 64; j++) {
            const uint64_t e = P[b + j];
            occ |= (uint64_t)(e != 0) << j;
            bad |= (e != 0) & (SPM_PT_C(e) >= np);
        }
        full |= occ == ~0ull;
    }
    if (bad) return 0;
    return !full || longest_run(P, n) <= SPM_PROBE_MAX;
}

/* 1 when every node record (and the full rows they name) keeps the invariants check_slow checks, in one
 * pass without a branch per condition (a load reads every record); 0: check_slow finds which */
static int nodes_sound(const spm_fnode *N, size_t n, uint32_t np, const uint32_t *rows, size_t n_rows) {
    uint32_t bad = 0;
    for (size_t q = 0; q < n; q++) {
        const spm_fnode *x = &N[q];
        const uint32_t k = x->kids, nk = x->nk;
        bad |= ((uint32_t)x->id + 1u > np) | ((x->id < 0) & (x->type != 0));
        if (k & SPM_FT_DENSE) {
            const uint32_t r = k & ~SPM_FT_DENSE;
            if (nk || r >= n_rows) return 0;
            const uint32_t *row = rows + (size_t)r * 256;
            uint32_t rb = 0;
            for (int c = 0; c < 256; c++) {
                const uint32_t v = row[c];
                rb |= (v != SPM_NONE) & ((v <= q) | (v >= n));
            }
            bad |= rb;
            continue;
        }
        bad |= (nk > SPM_FT_INLINE) | ((nk == 0) & (k != 0)) | ((nk != 0) & ((k <= q) | ((size_t)k + nk > n)));
        if (nk > 1) {
            const uint32_t l = nk < SPM_FT_INLINE ? nk : SPM_FT_INLINE;
#ifdef __SSE2__
            /* lab[i + 1] <= lab[i] for i < l - 1 (16 bytes from lab: 2 of them in the next record, which exists) */
            const __m128i a = _mm_loadu_si128((const __m128i *)(const void *)x->lab), b = _mm_srli_si128(a, 1);
            const uint32_t le = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(a, b), a));
            bad |= (le & ((1u << (l - 1)) - 1)) != 0;
#else
            for (uint32_t i = 1; i < l; i++) bad |= x->lab[i] <= x->lab[i - 1];
#endif
        }
    }
    return !bad;
}

static const char *check_slow(const spm_model *m, const spm_ft_tables *t);

const char *spm_ftrie_check(const spm_model *m, const spm_ft_tables *t) {
    const uint32_t np = m->n_pieces;
    if (!t->nodes || t->n_nodes < 2 || t->n_nodes - 1 >= SPM_FT_DENSE ||
        ((uintptr_t)t->nodes | (uintptr_t)t->pairs | (uintptr_t)t->chars | (uintptr_t)t->small) & 7 ||
        ((uintptr_t)t->rows | (uintptr_t)t->ascii) & 3 || !t->ascii || t->n_ascii != 128)
        return check_slow(m, t);
    if (!nodes_sound((const spm_fnode *)t->nodes, t->n_nodes - 1, np, t->rows, t->n_rows)) return check_slow(m, t);
    uint32_t bad = 0;
    for (int c = 0; c < 128; c++) bad |= (uint32_t)t->ascii[c] + 2u > np + 1;
    if (t->chars) {
        bad |= !pow2(t->n_chars) || t->n_chars > ((size_t)1 << 40) || longest_run(t->chars, t->n_chars) > SPM_PROBE_MAX;
        for (size_t i = 0; i < t->n_chars; i++) bad |= ((t->chars[i] >> 35) & ((1u << 21) - 1)) > np;
    }
    if (t->pairs) {
        bad |= !wants_pairs(m) || !pow2(t->n_pairs) || t->n_pairs > ((size_t)1 << 40) ||
               !pairs_sound((const uint64_t *)t->pairs, t->n_pairs, np);
    }
    if (t->small) {
        bad |= !t->pairs || t->n_small != (size_t)SPM_SMALL * SPM_SMALL;
        for (size_t i = 0; i < t->n_small; i++) {
            const uint64_t e = t->small[i], c = e & ((1u << 21) - 1);
            bad |= (e != 0) & ((c == 0) | (c > np) | ((e >> 54) != 0));
        }
    }
    return bad ? check_slow(m, t) : NULL;
}

/* the first failing invariant in the order of fstok.validate_spm_walk (its messages) */
static const char *check_slow(const spm_model *m, const spm_ft_tables *t) {
    const uint32_t np = m->n_pieces;
    if (!t->nodes || t->n_nodes < 2 || t->n_nodes - 1 >= SPM_FT_DENSE)
        return "ft_nodes: not between 2 and 2^31 records (the nodes of the pieces trie and one more)";
    if (((uintptr_t)t->nodes | (uintptr_t)t->pairs | (uintptr_t)t->chars | (uintptr_t)t->small) & 7 ||
        ((uintptr_t)t->rows | (uintptr_t)t->ascii) & 3)
        return "ft_nodes: a table is not aligned";
    const size_t n = t->n_nodes - 1;
    const spm_fnode *N = (const spm_fnode *)t->nodes;
    for (size_t q = 0; q < n; q++) {
        const spm_fnode *x = &N[q];
        if (x->id < -1 || (x->id >= 0 && (uint32_t)x->id >= np)) return "ft_nodes: a piece id is out of range";
        /* a walk takes a node of a non-zero type for a piece (a type and score that are not the piece's
         * give other ids, never a read out of bounds: checking them would cost a random read per node) */
        if (x->id < 0 && x->type) return "ft_nodes: a node without a piece has a type";
        if (x->kids & SPM_FT_DENSE) {
            const uint32_t r = x->kids & ~SPM_FT_DENSE;
            if (x->nk || r >= t->n_rows) return "ft_nodes: a full row is out of range";
            const uint32_t *row = t->rows + (size_t)r * 256;
            for (int c = 0; c < 256; c++)
                if (row[c] != SPM_NONE && (row[c] <= q || row[c] >= n))
                    return "ft_rows: a child does not lead to a later node";
        } else {
            if (x->nk > SPM_FT_INLINE) return "ft_nodes: a node has more than 14 inline children";
            if (!x->nk) {
                if (x->kids) return "ft_nodes: a node without children names a first child";
            } else if (x->kids <= q || (size_t)x->kids + x->nk > n) {
                return "ft_nodes: a child does not lead to a later node";
            }
            for (uint32_t i = 1; i < x->nk; i++)
                if (x->lab[i] <= x->lab[i - 1]) return "ft_nodes: child labels are not strictly ascending";
        }
    }
    if (!t->ascii || t->n_ascii != 128) return "ft_ascii: not 128 entries";
    for (int c = 0; c < 128; c++)
        if (t->ascii[c] < -2 || (t->ascii[c] >= 0 && (uint32_t)t->ascii[c] >= np))
            return "ft_ascii: a piece id is out of range";
    if (t->chars && (!pow2(t->n_chars) || t->n_chars > ((size_t)1 << 40))) return "ft_chars: the slot count is not a power of two";
    if (t->chars && longest_run(t->chars, t->n_chars) > SPM_PROBE_MAX) return "ft_chars: a probe run is too long";
    for (size_t i = 0; i < t->n_chars; i++)
        if (((t->chars[i] >> 35) & ((1u << 21) - 1)) > np) return "ft_chars: a piece id is out of range";
    if (t->pairs) {
        if (!wants_pairs(m)) return "ft_pairs: a pair table on a model that merges no pairs by score";
        if (!pow2(t->n_pairs) || t->n_pairs > ((size_t)1 << 40)) return "ft_pairs: the slot count is not a power of two";
        if (longest_run((const uint64_t *)t->pairs, t->n_pairs) > SPM_PROBE_MAX) return "ft_pairs: a probe run is too long";
        const uint64_t *P = (const uint64_t *)t->pairs;
        for (size_t i = 0; i < t->n_pairs; i++)
            if (P[i] && SPM_PT_C(P[i]) >= np) return "ft_pairs: a piece id is out of range";
    }
    if (t->small) {
        if (!t->pairs) return "ft_small: a small pair table without the pair table";
        if (t->n_small != (size_t)SPM_SMALL * SPM_SMALL) return "ft_small: not 129 x 129 entries";
        for (size_t i = 0; i < t->n_small; i++) {
            const uint64_t e = t->small[i], c = e & ((1u << 21) - 1);
            if (e && (c == 0 || c > np || e >> 54)) return "ft_small: an entry is malformed";
        }
    }
    return NULL;
}

int spm_ftrie_adopt(spm_model *m, const spm_ft_tables *t) {
    spm_ftrie *f = (spm_ftrie *)calloc(1, sizeof *f);
    if (!f) return -1;
    f->borrowed = 1;
    f->nodes = (spm_fnode *)t->nodes;
    f->n_nodes = (uint32_t)(t->n_nodes - 1);
    f->rows = (uint32_t *)t->rows;
    f->n_rows = (uint32_t)t->n_rows;
    f->pairs = (uint64_t *)t->pairs;
    /* read in place from the artifact's mapping until the first encode (spm_ftrie_warm) */
    f->chars = (uint64_t *)t->chars;
    f->cmask = t->n_chars - 1;
    bmp_build(f);
    memcpy(f->ascii_id, t->ascii, sizeof f->ascii_id);
    if (t->pairs) {
        f->pmask = t->n_pairs - 1;
        f->small = (uint64_t *)t->small;
    }
    if (wants_pairs(m)) { /* the score order of each piece (maybe_add's walks): derived here, not stored */
        f->skey = (uint32_t *)spm_huge_alloc((size_t)m->n_pieces * 4, &f->bytes[4]);
        if (!f->skey) {
            ftrie_release(f);
            return -1;
        }
        for (uint32_t i = 0; i < m->n_pieces; i++) f->skey[i] = score_key(m->score[i]);
    }
    if (m->ft) ftrie_release(m->ft);
    m->ft = f;
    m->ft_hot = 0;
    return 0;
}

/* a step of the double array from unit t on byte c: the child unit, SPM_NONE none; *id its piece (-1 none) */
HOT uint32_t da_step(const uint32_t *D, uint32_t t, uint8_t c, int32_t *id) {
    const uint32_t u = D[2 * (size_t)t] ^ c, x = D[2 * (size_t)u + 1];
    if ((x & 0x1FF) != (0x100u | c)) return SPM_NONE;
    *id = (int32_t)(x >> 9) - 1;
    return u;
}

#define DA_MAX_NODES (1u << 20) /* larger tries keep the node records (the array's build would cost the first encode) */

/* f->da from the node records (see spm_ftrie), breadth first: each node's base is the first one, at or after the
 * lowest free unit, that no node took and whose units for the node's labels are free.  Left NULL when the trie is
 * too large or memory is short (the records serve). */
/* the lowest free unit at or after i (nf: a union-find forest over the units, each used unit pointing past itself) */
static size_t da_free(uint32_t *nf, size_t i) {
    size_t r = i;
    while (nf[r] != r) r = nf[r];
    while (nf[i] != r) {
        const size_t k = nf[i];
        nf[i] = (uint32_t)r;
        i = k;
    }
    return r;
}

static void da_build(spm_ftrie *f) {
    const uint32_t n = f->n_nodes;
    if (n > DA_MAX_NODES) return;
    size_t cap = 1024;
    while (cap < (size_t)n * 3 + 1024) cap *= 2;
    /* units 256 to 511 hold no child: every leaf's base is 256, where no label check passes */
    uint32_t *D = (uint32_t *)calloc(cap * 2, 4);
    uint32_t *nf = (uint32_t *)malloc((cap + 1) * 4);
    uint8_t *taken = (uint8_t *)calloc(cap, 1);
    uint32_t *slot = (uint32_t *)malloc((size_t)n * 4); /* each node's unit */
    uint32_t kids[256];
    uint8_t labs[256];
    size_t mapped, lo = 1, hi = 511;
    uint32_t *H = NULL;
    if (!D || !nf || !taken || !slot) goto done;
    for (size_t u = 0; u <= cap; u++) nf[u] = (uint32_t)u;
    nf[0] = 1;
    for (size_t u = 256; u < 512; u++) nf[u] = 512;
    taken[256] = 1;
    memset(slot, 0xFF, (size_t)n * 4); /* SPM_NONE: no parent has placed the node (none in a sound trie) */
    slot[0] = 0;
    for (uint32_t q = 0; q < n; q++) {
        const spm_fnode *x = &f->nodes[q];
        if (slot[q] == SPM_NONE) continue; /* no walk reaches it */
        int nl = 0;
        if (x->kids & SPM_FT_DENSE) {
            const uint32_t *row = f->rows + (size_t)(x->kids & ~SPM_FT_DENSE) * 256;
            for (int c = 0; c < 256; c++)
                if (row[c] != SPM_NONE) {
                    labs[nl] = (uint8_t)c;
                    kids[nl++] = row[c];
                }
        } else {
            for (int i = 0; i < x->nk; i++) {
                labs[nl] = x->lab[i];
                kids[nl++] = x->kids + (uint32_t)i;
            }
        }
        if (!nl) {
            D[2 * (size_t)slot[q]] = 256;
            continue;
        }
        /* the search starts at most 4 blocks of 256 units below the highest unit in use (the free units further
         * down stay free: a little room spent for a build in linear time) */
        if (lo + 1024 < hi) lo = hi - 1024;
        size_t b = 0;
        for (size_t t = da_free(nf, lo);; t = da_free(nf, t + 1)) {
            if (t + 256 >= cap) goto done; /* no room left (not seen: cap holds three units per node) */
            b = t ^ labs[0];
            int ok = !taken[b];
            for (int i = 1; ok && i < nl; i++) {
                const size_t u = b ^ labs[i];
                ok = u != 0 && nf[u] == u;
            }
            if (ok) break;
        }
        taken[b] = 1;
        D[2 * (size_t)slot[q]] = (uint32_t)b;
        for (int i = 0; i < nl; i++) {
            const size_t u = b ^ labs[i];
            const int32_t id = f->nodes[kids[i]].id;
            if (id >= (1 << 22)) goto done;
            nf[u] = (uint32_t)(u + 1);
            hi = u > hi ? u : hi;
            slot[kids[i]] = (uint32_t)u;
            D[2 * u + 1] = labs[i] | 0x100u | (uint32_t)(id + 1) << 9;
        }
    }
    /* every base below cap, cap a power of two of at least 256 entries: base ^ c stays below cap */
    if (!(H = (uint32_t *)spm_huge_alloc(cap * 8, &mapped))) goto done;
    memcpy(H, D, cap * 8);
    f->da = H;
    f->da_bytes = mapped;
done:
    free(D);
    free(nf);
    free(taken);
    free(slot);
}

/* f->cnode (see spm_ftrie): the walks of every well-formed 2- and 3-byte character from the root, over the
 * trie's edges (only the prefixes that are key prefixes are followed); left NULL when it cannot be allocated */
HOT uint32_t cn_step(const spm_ftrie *f, uint32_t t, uint8_t c) {
    int32_t id;
    return f->da ? da_step(f->da, t, c, &id) : spm_ft_step(f, t, c);
}

static void cnode_build(spm_ftrie *f) {
    uint32_t *T = (uint32_t *)spm_zalloc((size_t)65536 * 4);
    if (!T) return;
    memset(T, 0xFF, (size_t)65536 * 4); /* SPM_NONE */
    for (uint32_t b0 = 0xC2; b0 <= 0xEF; b0++) {
        const uint32_t n0 = cn_step(f, 0, (uint8_t)b0);
        if (n0 == SPM_NONE) continue;
        for (uint32_t b1 = 0x80; b1 <= 0xBF; b1++) {
            const uint32_t n1 = cn_step(f, n0, (uint8_t)b1);
            if (n1 == SPM_NONE) continue;
            if (b0 <= 0xDF) {
                T[(b0 & 0x1F) << 6 | (b1 & 0x3F)] = n1;
                continue;
            }
            for (uint32_t b2 = 0x80; b2 <= 0xBF; b2++) {
                const uint32_t cp = (b0 & 0x0F) << 12 | (b1 & 0x3F) << 6 | (b2 & 0x3F);
                if (cp < 0x800) continue; /* an overlong form: not a character (walked byte by byte) */
                T[cp] = cn_step(f, n1, (uint8_t)b2);
            }
        }
    }
    f->cnode = T;
}

/* The node the character s[0, l) leads to from the root (SPM_NONE: no key starts with it) into *node, when it is a
 * well-formed 2- or 3-byte character and cnode is made: 1; else 0 (the caller steps byte by byte).  A walk that
 * enters the character's node at once skips no piece: piece strings are valid UTF-8 (checked at load), so none
 * ends inside a well-formed character. */
HOT int char_node(const spm_ftrie *f, const uint8_t *s, size_t l, uint32_t *node) {
    if (!f->cnode) return 0;
    if (l == 2 && s[0] >= 0xC2 && s[0] <= 0xDF && (s[1] & 0xC0) == 0x80) {
        *node = f->cnode[(s[0] & 0x1F) << 6 | (s[1] & 0x3F)];
        return 1;
    }
    if (l == 3 && (s[0] & 0xF0) == 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
        const uint32_t cp = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
        if (cp < 0x800) return 0;
        *node = f->cnode[cp];
        return 1;
    }
    return 0;
}

const spm_ftrie *spm_ftrie_warm(const spm_model *cm) {
    spm_model *m = (spm_model *)cm;
    pthread_mutex_lock(&m->ft_mu);
    spm_ftrie *f = m->ft;
    if (!m->ft_hot && f && f->borrowed) {
        /* the tables walked at random, when large: copied into 2 MiB pages (spm_huge_alloc), one TLB entry per
         * 2 MiB where the mapping takes one per 4 KiB (cold encodes ~15% faster on 250k-piece models) */
        void **dst[3] = {(void **)&f->nodes, (void **)&f->rows, (void **)&f->pairs};
        const size_t nb[3] = {((size_t)f->n_nodes + 1) * 32, (size_t)f->n_rows * 1024, f->pairs ? (f->pmask + 1) * 8 : 0};
        size_t *mapped[3] = {&f->bytes[0], &f->bytes[2], &f->bytes[3]};
        if (f->pairs && f->skey) { /* the merges' table: each entry beside its piece's score order */
            const size_t n = (size_t)f->pmask + 1;
            uint64_t *W = (uint64_t *)spm_huge_alloc(n * 16, &f->wide_bytes);
            if (W) {
                const uint64_t *P = f->pairs;
                for (size_t i = 0; i < n; i++) {
                    const uint64_t e = P[i];
                    W[2 * i] = e;
                    W[2 * i + 1] = e ? f->skey[SPM_PT_C(e)] : 0;
                }
                f->wide = W;
            }
        }
        if (!(m->flags & (SPF_BPE | SPF_HF)) && m->score && m->ptype) da_build(f);
        if (!(m->flags & SPF_BPE)) cnode_build(f);
        for (int i = 0; i < 3; i++) {
            if (nb[i] < HUGE_ALIGN / 2 || (i == 2 && f->wide)) continue;
            void *d = spm_huge_alloc(nb[i], mapped[i]);
            if (!d) continue; /* out of memory: the mapping serves */
            if (*mapped[i] % HUGE_ALIGN) { /* small pages only (FSTOK_TABLES_HUGE=0): the mapping serves as well */
                spm_zfree(d, *mapped[i]);
                *mapped[i] = 0;
                continue;
            }
            memcpy(d, *dst[i], nb[i]);
            *dst[i] = d;
            f->own |= 1 << i;
        }
    }
    __atomic_store_n(&m->ft_hot, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&m->ft_mu);
    return m->ft;
}

int spm_ftrie_tables(const spm_ftrie *f, spm_ft_tables *t) {
    memset(t, 0, sizeof *t);
    if (!f) return -1;
    t->nodes = f->nodes;
    t->n_nodes = (size_t)f->n_nodes + 1;
    t->rows = f->rows;
    t->n_rows = f->n_rows;
    t->chars = f->chars;
    t->n_chars = f->cmask + 1;
    t->ascii = f->ascii_id;
    t->n_ascii = 128;
    if (f->pairs) {
        t->pairs = f->pairs;
        t->n_pairs = f->pmask + 1;
        if (f->small) {
            t->small = f->small;
            t->n_small = (size_t)SPM_SMALL * SPM_SMALL;
        }
    }
    return 0;
}

#define ft_step spm_ft_step

static uint32_t ft_step_c(const spm_ftrie *f, uint32_t node, uint8_t c) { return ft_step(f, node, c); }

/* the node of the pieces trie the key k[0, n) leads to from `node`, or SPM_NONE */
HOT uint32_t pieces_walk(const spm_ftrie *f, uint32_t node, const uint8_t *k, size_t n) {
    for (size_t i = 0; i < n && node != SPM_NONE; i++) node = ft_step(f, node, k[i]);
    return node;
}

/* the model's id of the piece s[0, n), -1 when it is none */
HOT int32_t piece_id(const spm_ftrie *f, const uint8_t *s, size_t n) {
    const uint32_t node = pieces_walk(f, 0, s, n);
    return node == SPM_NONE ? -1 : f->nodes[node].id;
}

/* sentencepiece's PieceToId: a reserved piece (unknown, control, byte) of that string first, then the model's
 * piece, else the unknown id */
static int32_t piece_to_id(const spm_model *m, const uint8_t *s, size_t n) {
    for (uint32_t k = 0; k < m->n_reserved; k++) {
        const int32_t r = m->reserved[k];
        if (m->off[r + 1] - m->off[r] == n && !memcmp(m->blob + m->off[r], s, n)) return r;
    }
    const int32_t id = piece_id(m->ft, s, n);
    return id < 0 ? m->unk_id : id;
}

static int grow(void **p, size_t *cap, size_t need, size_t item) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * item);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

HOT int bytes_put(spm_bytes *b, const uint8_t *s, size_t n) {
    if (b->n + n > b->cap && grow((void **)&b->p, &b->cap, b->n + n, 1)) return -1;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return 0;
}

HOT int ints_put(spm_ints *v, int32_t x) {
    if (v->n + 1 > v->cap && grow((void **)&v->p, &v->cap, v->n + 1, 4)) return -1;
    v->p[v->n++] = x;
    return 0;
}

HOT int ints_put3(spm_ints *v, int32_t a, int32_t b, int32_t c) {
    if (v->n + 3 > v->cap && grow((void **)&v->p, &v->cap, v->n + 3, 4)) return -1;
    v->p[v->n] = a;
    v->p[v->n + 1] = b;
    v->p[v->n + 2] = c;
    v->n += 3;
    return 0;
}

void spm_bytes_free(spm_bytes *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

void spm_ints_free(spm_ints *v) {
    free(v->p);
    v->p = NULL;
    v->n = v->cap = 0;
}

/* ------------------------------------------------------------------------------------------ */
/* UTF-8 as sentencepiece reads it (string_util.h) */

HOT int is_trail(uint8_t b) { return (b & 0xC0) == 0x80; }
HOT int valid_cp(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

/* IsValidDecodeUTF8: 1 when the character at s is valid (or is U+FFFD itself); *len its length */
static int valid_decode(const uint8_t *s, size_t n, size_t *len) {
    uint8_t b0 = s[0];
    uint32_t cp;
    if (b0 < 0x80) {
        *len = 1;
        return 1;
    }
    if (n >= 2 && (b0 & 0xE0) == 0xC0) {
        cp = ((uint32_t)(b0 & 0x1F) << 6) | (s[1] & 0x3F);
        if (is_trail(s[1]) && cp >= 0x80 && valid_cp(cp)) {
            *len = 2;
            return 1;
        }
    } else if (n >= 3 && (b0 & 0xF0) == 0xE0) {
        cp = ((uint32_t)(b0 & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        if (is_trail(s[1]) && is_trail(s[2]) && cp >= 0x800 && valid_cp(cp)) {
            *len = 3;
            return 1;
        }
    } else if (n >= 4 && (b0 & 0xF8) == 0xF0) {
        cp = ((uint32_t)(b0 & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
             (s[3] & 0x3F);
        if (is_trail(s[1]) && is_trail(s[2]) && is_trail(s[3]) && cp >= 0x10000 && valid_cp(cp)) {
            *len = 4;
            return 1;
        }
    }
    *len = 1;
    return 0;
}

/* PrefixMatcher::PrefixMatch over the user-defined pieces */
HOT size_t user_match(const spm_model *m, const uint8_t *s, size_t n, int *found) {
    size_t best = 0;
    if (m->user.n_nodes) {
        uint32_t node = 0;
        for (size_t i = 0; i < n; i++) {
            node = trie_step(&m->user, node, s[i]);
            if (node == SPM_NONE) break;
            if (m->user.value[node] >= 0) best = i + 1;
        }
    }
    *found = best > 0;
    if (best) return best;
    size_t l = one_char_len(s[0]);
    return l < n ? l : n;
}

#define DA_OFFSET(u) (((u) >> 10) << (((u) & (1u << 9)) >> 6))

static const uint8_t REPLACEMENT[3] = {0xEF, 0xBF, 0xBD};

/* An ASCII byte that starts no user-defined piece and no charsmap key normalizes to itself, whatever
 * follows it: NormalizePrefix's answer without its two prefix searches. */
int spm_model_prepare(spm_model *m) {
    /* one unknown piece (what sentencepiece allows): spm_finish compares ids instead of reading types */
    uint32_t n_unk = 0, n_res = 0;
    for (uint32_t i = 0; i < m->n_pieces; i++) {
        const uint8_t t = m->ptype[i];
        n_unk += t == SPT_UNKNOWN;
        n_res += t == SPT_UNKNOWN || t == SPT_CONTROL || t == SPT_BYTE;
    }
    m->n_reserved = 0;
    if (n_res && m->blob) {
        if (!(m->reserved = (int32_t *)malloc((size_t)n_res * 4))) return -1;
        for (uint32_t i = 0; i < m->n_pieces; i++) {
            const uint8_t t = m->ptype[i];
            if (t == SPT_UNKNOWN || t == SPT_CONTROL || t == SPT_BYTE) m->reserved[m->n_reserved++] = (int32_t)i;
        }
    }
    m->one_unk = n_unk == 1 && m->unk_id >= 0 && (uint32_t)m->unk_id < m->n_pieces && m->ptype[m->unk_id] == SPT_UNKNOWN;
    for (int c = 0; c < 256; c++) {
        /* a lead byte (0xC2..0xF4) that starts no user-defined piece and no charsmap key: NormalizePrefix
         * gives a well-formed character it starts back unchanged */
        if (c >= 0x80 && (c < 0xC2 || c > 0xF4)) {
            m->ascii_pass[c] = 0;
            continue;
        }
        int pass = !m->user.n_nodes || m->user.root[c] == SPM_NONE;
        if (pass && m->n_cm) {
            const uint32_t node = DA_OFFSET(m->cm_units[0]) ^ (uint32_t)c;
            pass = node >= m->n_cm || (m->cm_units[node] & 0x800000FFu) != (uint32_t)c;
        }
        m->ascii_pass[c] = (uint8_t)pass;
        if (c < 128) {
            memset(m->ascii_next[c], pass ? 0xFF : 0, 32);
            m->ascii_end[c] = (uint8_t)pass;
        }
        if (pass || c >= 128 || (m->user.n_nodes && m->user.root[c] != SPM_NONE) || !m->n_cm) continue;
        /* c starts a charsmap key: when c is no key itself, c followed by a byte no key continues with
         * normalizes to itself (NormalizePrefix finds no match and keeps the character) */
        const uint32_t *U = m->cm_units;
        const uint32_t nu = m->n_cm;
        const uint32_t node = DA_OFFSET(U[0]) ^ (uint32_t)c;
        const uint32_t u = U[node];
        if ((u >> 8) & 1) continue;
        const uint32_t next = node ^ DA_OFFSET(u);
        m->ascii_end[c] = 1;
        for (int d = 0; d < 256; d++) {
            const uint32_t q = next ^ (uint32_t)d;
            if (q >= nu || (U[q] & 0x800000FFu) != (uint32_t)d) m->ascii_next[c][d >> 3] |= (uint8_t)(1u << (d & 7));
        }
    }
    return 0;
}

/* Normalizer::NormalizePrefix: the replacement (*out, *olen) of the prefix of s; returns its length */
HOT size_t normalize_prefix(const spm_model *m, const uint8_t *s, size_t n, const uint8_t **out, size_t *olen) {
    if (s[0] < 0x80 && m->ascii_pass[s[0]]) {
        *out = s;
        *olen = 1;
        return 1;
    }
    int found;
    size_t ul = user_match(m, s, n, &found);
    if (found) {
        *out = s;
        *olen = ul;
        return ul;
    }
    if (m->n_cm) {
        /* Darts-clone commonPrefixSearch, keeping the longest match; indices are bounds-checked here
         * (the array is the file's own, its reachable part is not validated ahead) */
        const uint32_t *U = m->cm_units;
        const uint32_t nu = m->n_cm;
        uint32_t node = DA_OFFSET(U[0]);
        size_t best = 0;
        uint32_t val = 0;
        for (size_t i = 0; i < n; i++) {
            node ^= s[i];
            if (node >= nu) break;
            const uint32_t u = U[node];
            if ((u & 0x800000FFu) != s[i]) break;
            node ^= DA_OFFSET(u);
            if ((u >> 8) & 1) {
                if (node >= nu) break;
                best = i + 1;
                val = U[node] & 0x7FFFFFFFu;
            }
        }
        if (best && val < m->n_cm_norm) {
            *out = m->cm_norm + val;
            *olen = strlen((const char *)m->cm_norm + val);
            return best;
        }
    }
    size_t len;
    if (!valid_decode(s, n, &len)) {
        *out = REPLACEMENT;
        *olen = 3;
        return 1;
    }
    *out = s;
    *olen = len;
    return len;
}

int spm_normalize(const spm_model *m, const uint8_t *in, size_t n, spm_bytes *out, spm_ints *n2o) {
    out->n = 0;
    if (n2o) n2o->n = 0;
    if (!n) return 0;
    const uint32_t fl = m->flags;
    const int remove_ws = (fl & SPF_REMOVE_WS) != 0, escape = (fl & SPF_ESCAPE_WS) != 0;
    size_t i = 0, consumed = 0;
    const uint8_t *sp;
    size_t splen, l;
    if (remove_ws) {
        while (i < n) {
            l = normalize_prefix(m, in + i, n - i, &sp, &splen);
            if (!(splen == 1 && sp[0] == ' ')) break;
            i += l;
            consumed += l;
        }
    }
    if (i >= n) return 0;
    if (out->cap < n * 3 + 8 && grow((void **)&out->p, &out->cap, n * 3 + 8, 1)) return -1;
    if (n2o && n2o->cap < n * 3 + 9 && grow((void **)&n2o->p, &n2o->cap, n * 3 + 9, 4)) return -1;
    const uint8_t *ws = escape ? SPACE_SYM : (const uint8_t *)" ";
    const size_t wsl = escape ? 3 : 1;
#define EMIT(ptr, len)                                                                       \
    do {                                                                                     \
        if (bytes_put(out, (ptr), (len))) return -1;                                         \
        if (n2o)                                                                             \
            for (size_t q_ = 0; q_ < (len); q_++)                                            \
                if (ints_put(n2o, (int32_t)consumed)) return -1;                             \
    } while (0)
    if (!(fl & SPF_WS_SUFFIX) && (fl & SPF_ADD_DUMMY)) EMIT(ws, wsl);
    int prev_space = remove_ws;
    /* in[j] normalizes to itself whatever follows (a lead byte: the well-formed character it starts), or is an
     * ASCII byte that does followed by in[j + 1] */
#define PASSES(j)                                                                                              \
    (m->ascii_pass[in[j]] ||                                                                                   \
     (in[j] < 0x80 && ((j) + 1 < n ? (m->ascii_next[in[j]][in[(j) + 1] >> 3] >> (in[(j) + 1] & 7)) & 1       \
                                   : m->ascii_end[in[j]])))
    while (i < n) {
        if (!n2o && PASSES(i)) {
            /* a run of characters that normalize to themselves (ASCII bytes, and well-formed characters
             * whose lead byte starts no rule): the loop below for each of them, written into the buffer
             * reserved above (3 output bytes per input byte at most) */
            uint8_t *o = out->p + out->n;
            const size_t i0 = i;
            do {
                const uint8_t b = in[i];
                if (b >= 0x80) {
                    size_t cl;
                    if (!valid_decode(in + i, n - i, &cl)) break; /* U+FFFD: the general path */
                    for (size_t k = 0; k < cl; k++) o[k] = in[i + k];
                    o += cl;
                    i += cl;
                    prev_space = 0;
                    continue;
                }
                i++;
                if (b == ' ') {
                    if (!prev_space) {
                        if (escape) {
                            o[0] = SPACE_SYM[0];
                            o[1] = SPACE_SYM[1];
                            o[2] = SPACE_SYM[2];
                            o += 3;
                        } else {
                            *o++ = ' ';
                        }
                    }
                    prev_space = remove_ws;
                } else {
                    *o++ = b;
                    prev_space = 0;
                }
            } while (i < n && PASSES(i));
#undef PASSES
            out->n = (size_t)(o - out->p);
            consumed += i - i0;
            if (i > i0) continue;
            /* an ill-formed character first: the general path below */
        }
        l = normalize_prefix(m, in + i, n - i, &sp, &splen);
        if (prev_space)
            while (splen && sp[0] == ' ') {
                sp++;
                splen--;
            }
        if (splen) {
            if (escape) {
                size_t a = 0;
                for (size_t k = 0; k < splen; k++) {
                    if (sp[k] == ' ') {
                        if (k > a) EMIT(sp + a, k - a);
                        EMIT(SPACE_SYM, 3);
                        a = k + 1;
                    }
                }
                if (splen > a) EMIT(sp + a, splen - a);
            } else {
                EMIT(sp, splen);
            }
            prev_space = sp[splen - 1] == ' ';
        }
        consumed += l;
        i += l;
        if (!remove_ws) prev_space = 0;
    }
    if (remove_ws) {
        while (out->n >= wsl && memcmp(out->p + out->n - wsl, ws, wsl) == 0) {
            size_t len = out->n - wsl;
            if (n2o) consumed = (size_t)n2o->p[len]; /* without n2o no offset is reported */
            out->n = len;
            if (n2o) n2o->n = len;
        }
    }
    if ((fl & SPF_WS_SUFFIX) && (fl & SPF_ADD_DUMMY)) EMIT(ws, wsl);
#undef EMIT
    if (n2o && ints_put(n2o, (int32_t)consumed)) return -1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Unigram: Model::EncodeOptimized (sentencepiece, float arithmetic as the library's types give it) and
 * Unigram::encode_optimized (tokenizers, f64). */

/* The best path ending at each byte position: where its last piece starts and which it is (start -1: no
 * path yet); the path scores are kept beside, as float or double. */
typedef struct {
    int32_t start;
    int32_t id;
} path_node;

/* one block: size + 1 path nodes (no path), then size + 1 zero scores of `score_size` bytes */
static path_node *lattice_new(size_t size, size_t score_size, void **scores) {
    path_node *p = (path_node *)malloc((size + 1) * (sizeof(path_node) + score_size));
    if (!p) return NULL;
    for (size_t k = 0; k <= size; k++) p[k].start = p[k].id = -1;
    *scores = p + size + 1;
    memset(*scores, 0, (size + 1) * score_size);
    return p;
}

/* the best path to `size` as (id, begin + at, end + at) triples in order */
static int path_emit(const path_node *p, size_t size, int32_t at, spm_ints *out) {
    const size_t base = out->n;
    for (size_t e = size; e > 0; e = (size_t)p[e].start)
        if (ints_put3(out, p[e].id, p[e].start + at, (int32_t)e + at)) return -1;
    for (size_t a = base, b = out->n - 3; a < b; a += 3, b -= 3) {
        int32_t tmp[3];
        memcpy(tmp, out->p + a, 12);
        memcpy(out->p + a, out->p + b, 12);
        memcpy(out->p + b, tmp, 12);
    }
    return 0;
}

/* the best path to `size` as (id, begin, end) triples in order; frees the lattice */
static int lattice_emit(path_node *p, size_t size, spm_ints *out) {
    const size_t base = out->n;
    for (size_t e = size; e > 0; e = (size_t)p[e].start) {
        if (ints_put3(out, p[e].id, p[e].start, (int32_t)e)) {
            free(p);
            return -1;
        }
    }
    free(p);
    for (size_t a = base, b = out->n - 3; a < b; a += 3, b -= 3) {
        int32_t tmp[3];
        memcpy(tmp, out->p + a, 12);
        memcpy(out->p + a, out->p + b, 12);
        memcpy(out->p + b, tmp, 12);
    }
    return 0;
}

/* sentencepiece keeps path scores as floats and, so that they keep their precision on long inputs,
 * rebases them: when the score at the current start leaves [-SCORE_RESET, SCORE_RESET], it is
 * subtracted from that position and from every later position reached so far (floats, rounded as
 * the library stores them).  Ties then resolve exactly as the library's. */
#define SCORE_RESET 100000.0f

/* one step of a Viterbi walk from `node` on byte c and the piece it reaches */
typedef struct {
    uint32_t node; /* SPM_NONE: the walk ends */
    int32_t id;
    uint8_t type; /* 0: no piece at the node */
} walk_at;

HOT walk_at walk_step(const spm_ftrie *f, uint32_t node, uint8_t c) {
    walk_at w;
    w.node = ft_step(f, node, c);
    if (w.node == SPM_NONE) return w;
    const spm_fnode *x = &f->nodes[w.node];
    w.id = x->id;
    w.type = x->type;
    return w;
}

/* the walk at `node` (entered through char_node) */
HOT walk_at walk_node(const spm_ftrie *f, uint32_t node) {
    walk_at w;
    w.node = node;
    if (node == SPM_NONE) return w;
    const spm_fnode *x = &f->nodes[node];
    w.id = x->id;
    w.type = x->type;
    return w;
}

/* The .model lattices' steps: over f->da when it is made (the unit's piece; its type and score from the model's
 * arrays), else over the node records */
HOT walk_at lat_step(const spm_model *m, const spm_ftrie *f, uint32_t node, uint8_t c) {
    if (f->da) {
        walk_at w;
        int32_t id = -1;
        w.node = da_step(f->da, node, c, &id);
        if (w.node == SPM_NONE) return w;
        w.id = id;
        w.type = id >= 0 ? m->ptype[id] : 0;
        return w;
    }
    return walk_step(f, node, c);
}

/* the walk at `node` (a unit of f->da when it is made) entered through char_node */
HOT walk_at lat_node(const spm_model *m, const spm_ftrie *f, uint32_t node) {
    if (f->da) {
        walk_at w;
        w.node = node;
        if (node == SPM_NONE) return w;
        w.id = (int32_t)(f->da[2 * (size_t)node + 1] >> 9) - 1;
        w.type = w.id >= 0 ? m->ptype[w.id] : 0;
        return w;
    }
    return walk_node(f, node);
}

/* the score of the piece at w, as lat_step found it (.model files) */
HOT float lat_score(const spm_model *m, const spm_ftrie *f, walk_at w) {
    return f->da ? m->score[w.id] : (float)f->nodes[w.node].score;
}

/* the score of the piece at w (f32 for .model files, f64 for tokenizer.json) */
HOT float score_sp(const spm_ftrie *f, walk_at w) { return (float)f->nodes[w.node].score; }

HOT double score_hf(const spm_ftrie *f, walk_at w) { return f->nodes[w.node].score; }

/* Model::EncodeOptimized over s[0, size) from a path score `start` at position 0 (0 for a whole text; the
 * score the text before reaches for a word of it, see unigram_words): the best path in best[0, size] (score
 * beside it, both size + 1 entries, written here); returns the path score at `size` */
static float sp_lattice(const spm_model *m, const spm_ftrie *f, const uint8_t *s, size_t size, float start,
                        path_node *best, float *score) {
    for (size_t k = 0; k <= size; k++) best[k].start = best[k].id = -1;
    memset(score, 0, (size + 1) * sizeof *score);
    score[0] = start;
    const float unk_score = m->min_score - 10.0f;
    size_t st = 0, frontier = 0;
    while (st < size) {
        float here = score[st];
        if (here < -SCORE_RESET || here > SCORE_RESET) {
            const float off = here;
            for (size_t i = st; i <= frontier; i++)
                if (i == st || best[i].start != -1) score[i] -= off;
            here = 0.0f;
        }
        int single = 0;
        size_t mblen = one_char_len(s[st]);
        if (mblen > size - st) mblen = size - st;
        uint32_t node = 0, cn;
        size_t kp = st;
        walk_at w;
        if (mblen > 1 && char_node(f, s + st, mblen, &cn)) { /* the first character in one read */
            kp += mblen;
            w = lat_node(m, f, cn);
            goto at_node;
        }
        while (kp < size) {
            w = lat_step(m, f, node, s[kp]);
            kp++;
        at_node:
            if (w.node == SPM_NONE) break;
            node = w.node;
            if (!w.type || w.type == SPT_UNUSED) continue;
            if (kp > frontier) frontier = kp;
            const size_t length = kp - st;
            /* a user-defined piece scores 0.1 per byte after its first (a double rounded to float) */
            const float cand =
                (w.type == SPT_USER ? (float)(0.1 * (double)((int)length - 1)) : lat_score(m, f, w)) + here;
            if (best[kp].start == -1 || cand > score[kp]) {
                score[kp] = cand;
                best[kp].start = (int32_t)st;
                best[kp].id = w.id;
            }
            if (!single && length == mblen) single = 1;
        }
        if (!single) {
            const size_t e = st + mblen;
            if (e > frontier) frontier = e;
            const float cand = unk_score + here;
            if (best[e].start == -1 || cand > score[e]) {
                score[e] = cand;
                best[e].start = (int32_t)st;
                best[e].id = m->unk_id;
            }
        }
        st += mblen;
    }
    return score[size];
}

static int unigram_sp(const spm_model *m, const uint8_t *s, size_t size, spm_ints *out) {
    float *score;
    path_node *best = lattice_new(size, sizeof(float), (void **)&score);
    if (!best) return -1;
    sp_lattice(m, spm_ftrie_get(m), s, size, 0.0f, best, score);
    return lattice_emit(best, size, out);
}

static int unigram_hf(const spm_model *m, const uint8_t *s, size_t size, spm_ints *out) {
    const spm_ftrie *f = spm_ftrie_get(m);
    double *score;
    path_node *best = lattice_new(size, sizeof(double), (void **)&score);
    if (!best) return -1;
    const double unk_score = m->min_score64 - 10.0;
    size_t st = 0;
    while (st < size) {
        const double here = score[st];
        int single = 0;
        size_t mblen = one_char_len(s[st]);
        if (mblen > size - st) mblen = size - st;
        uint32_t node = 0, cn;
        size_t kp = st;
        walk_at w;
        if (mblen > 1 && char_node(f, s + st, mblen, &cn)) { /* the first character in one read */
            kp += mblen;
            w = walk_node(f, cn);
            goto at_node;
        }
        while (kp < size) {
            w = walk_step(f, node, s[kp]);
            kp++;
        at_node:
            if (w.node == SPM_NONE) break;
            node = w.node;
            if (w.id < 0) continue;
            const double cand = score_hf(f, w) + here;
            if (best[kp].start == -1 || cand > score[kp]) {
                score[kp] = cand;
                best[kp].start = (int32_t)st;
                best[kp].id = w.id;
            }
            if (!single && kp - st == mblen) single = 1;
        }
        if (!single) {
            const size_t e = st + mblen;
            const double cand = unk_score + here;
            if (best[e].start == -1 || cand > score[e]) {
                score[e] = cand;
                best[e].start = (int32_t)st;
                best[e].id = m->unk_id;
            }
        }
        st += mblen;
    }
    return lattice_emit(best, size, out);
}

int spm_unigram(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out) {
    if (!n) return 0;
    return (m->flags & SPF_HF) ? unigram_hf(m, s, n, out) : unigram_sp(m, s, n, out);
}

/* ------------------------------------------------------------------------------------------ */
/* BPE: bpe_model.cc Model::Encode (merge the pair of highest piece score, leftmost first, with a heap
 * and lazy invalidation: O(n log n) on any input). */

typedef struct {
    uint64_t prio; /* score_key(score) << 32 | ~left: the agenda's order as one integer */
    int32_t left, right;
    uint32_t size;
    uint32_t node; /* trie node of the merged bytes (SYM_LAZY: not looked up) */
    int32_t id;    /* the merged piece */
    int32_t unused; /* it is an unused piece */
} bpe_pair;

/* a symbol's node when it has not been looked up: symbols merged through the pair table carry their
 * piece id only; the node is found (trie_find) when a walk needs it */
#define SYM_LAZY 0xFFFFFFFEu

typedef struct {
    uint32_t start, len;
    int32_t prev, next;
    uint32_t node; /* trie node of the symbol's bytes (SPM_NONE: not a key prefix; SYM_LAZY) */
    int32_t id;    /* the piece of the symbol's bytes, -1: none */
    uint8_t freeze;
    int8_t unused; /* the piece is an unused one: 1, 0, or -1 (not known: ptype[id]) */
    uint8_t sm;    /* its index in spm_ftrie.small (an ASCII character or the escaped space), 255: none */
} bpe_sym;

/* the agenda: a max-heap on prio; words of a few symbols keep it on the stack (`own` 0) */
typedef struct {
    bpe_pair *h;
    size_t n, cap;
    int own;
} bpe_heap;

static int heap_grow(bpe_heap *q) {
    const size_t c = q->cap ? q->cap * 2 : 64;
    bpe_pair *h = q->own ? (bpe_pair *)realloc(q->h, c * sizeof *h) : (bpe_pair *)malloc(c * sizeof *h);
    if (!h) return -1;
    if (!q->own && q->n) memcpy(h, q->h, q->n * sizeof *h);
    q->h = h;
    q->cap = c;
    q->own = 1;
    return 0;
}

static int heap_push(bpe_heap *q, bpe_pair p) {
    if (q->n + 1 > q->cap && heap_grow(q)) return -1;
    size_t i = q->n++;
    while (i > 0) {
        size_t par = (i - 1) >> 1;
        if (p.prio <= q->h[par].prio) break;
        q->h[i] = q->h[par];
        i = par;
    }
    q->h[i] = p;
    return 0;
}

static bpe_pair heap_pop(bpe_heap *q) {
    bpe_pair top = q->h[0];
    bpe_pair last = q->h[--q->n];
    size_t i = 0, n = q->n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && q->h[c + 1].prio > q->h[c].prio) c++;
        if (q->h[c].prio <= last.prio) break;
        q->h[i] = q->h[c];
        i = c;
    }
    if (n) q->h[i] = last;
    return top;
}

typedef struct {
    const spm_model *m;
    const spm_ftrie *ft;
    const uint8_t *s;
    bpe_sym *sym;
    bpe_heap q;
    uint32_t *rev_left; /* per piece id: length of the left part of its latest candidate pair (unused pieces) */
} bpe_ctx;

#define PM_BITS 16
#define PM_NODE 21
#define PM_MASK ((1u << PM_NODE) - 1)
#define PM_NOT_PIECE (1u << 21) /* the concatenation is a key prefix, not a piece */
#define PM_UNUSED (1u << 22)    /* ... an unused piece */

/* one memo entry: `key` = 1 | left node << 1 | right node << 22 | answer node << 43 (PM_MASK: none);
 * `info` = the answer's node | flags, `score` its piece's score.  Writers store info and score, then key;
 * a reader takes info and score only when info names the node that key names, so a torn read (another
 * thread rewriting the entry) is a miss, never a wrong answer: score and flags are functions of the node. */
typedef struct {
    uint64_t key;
    uint32_t info;
    float score;
} pm_entry;

int spm_pair_memo_init(spm_model *m) {
    m->pair_memo = NULL;
    if (m->ft->n_nodes >= PM_MASK) return 0; /* node ids do not fit: walks only */
    m->pair_memo = (uint64_t *)spm_zalloc(SPM_PAIR_MEMO_BYTES);
    return m->pair_memo ? 0 : -1;
}

typedef struct {
    uint32_t node; /* SPM_NONE: not a piece */
    int32_t id;    /* the piece's id when it is unused (for rev_left), else -1 */
    float score;
} pm_answer;

/* The piece formed by the symbol of node `an` followed by the `bn` bytes q (whose own node is `bq`,
 * SPM_NONE when they are no key prefix): node SPM_NONE when the concatenation is no piece.  Two nodes
 * name two byte strings, so the answer is a function of (an, bq), memoized.  Pairs of two pieces go
 * through the pair table when there is one; this is the path of symbols that are no piece. */
HOT pm_answer concat_piece(const spm_model *m, const spm_ftrie *f, uint32_t an, uint32_t bq, const uint8_t *q,
                           uint32_t bn) {
    pm_entry *slot = NULL;
    uint64_t key = 0;
    pm_answer r = {SPM_NONE, -1, 0.0f};
    if (m->pair_memo && bq != SPM_NONE) {
        key = 1u | (uint64_t)an << 1 | (uint64_t)bq << 22;
        const uint64_t h = ((uint64_t)an * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)bq * 0xC2B2AE3D27D4EB4Full);
        slot = &((pm_entry *)m->pair_memo)[h >> (64 - PM_BITS)];
        const uint64_t e = __atomic_load_n(&slot->key, __ATOMIC_ACQUIRE);
        if ((e & ((1ull << 43) - 1)) == key) {
            const uint32_t node = (uint32_t)(e >> 43);
            if (node == PM_MASK) return r;
            const uint32_t info = __atomic_load_n(&slot->info, __ATOMIC_RELAXED);
            if ((info & PM_MASK) == node) {
                if (info & PM_NOT_PIECE) return r;
                if (!(info & PM_UNUSED)) {
                    uint32_t sb = __atomic_load_n((uint32_t *)&slot->score, __ATOMIC_RELAXED);
                    r.node = node;
                    memcpy(&r.score, &sb, 4);
                    return r;
                }
            }
        }
    }
    const uint32_t node = pieces_walk(f, an, q, bn);
    int32_t id = -1;
    if (node != SPM_NONE) {
        const spm_fnode *x = &f->nodes[node];
        id = x->id;
        if (id >= 0) {
            r.node = node;
            r.score = (float)x->score;
            if (x->type == SPT_UNUSED) r.id = id;
        }
    }
    if (slot) {
        uint32_t info = node == SPM_NONE ? 0 : node | (id < 0 ? PM_NOT_PIECE : 0) | (r.id >= 0 ? PM_UNUSED : 0);
        uint32_t sb;
        memcpy(&sb, &r.score, 4);
        __atomic_store_n(&slot->info, info, __ATOMIC_RELAXED);
        __atomic_store_n((uint32_t *)&slot->score, sb, __ATOMIC_RELAXED);
        __atomic_store_n(&slot->key, key | (uint64_t)(node == SPM_NONE ? PM_MASK : node) << 43, __ATOMIC_RELEASE);
    }
    return r;
}

HOT uint32_t sym_node(bpe_ctx *c, bpe_sym *y) {
    if (y->node == SYM_LAZY) y->node = pieces_walk(c->ft, 0, c->s + y->start, y->len);
    return y->node;
}

HOT void pt_prefetch(const spm_ftrie *f, int32_t a, int32_t b) {
    const uint64_t i = pt_slot(SPM_PT_KEY(a, b), f->pmask);
    __builtin_prefetch(f->wide ? &f->wide[2 * i] : &f->pairs[i]);
}

/* the wide table's entry for pieces (a, b), or 0; *sk its piece's score order */
HOT uint64_t pt_get_wide(const spm_ftrie *f, int32_t a, int32_t b, uint32_t *sk) {
    const uint64_t key = SPM_PT_KEY(a, b);
    const uint64_t *W = f->wide;
    for (uint64_t i = pt_slot(key, f->pmask);; i = (i + 1) & f->pmask) {
        const uint64_t e = W[2 * i];
        if ((e & SPM_PT_KEYMASK) == key) {
            *sk = (uint32_t)W[2 * i + 1];
            return e;
        }
        if (!e) return 0;
    }
}

/* the merge candidate of symbols left and right (adjacent, live) into *out: 1, 0 none, -1 out of memory */
HOT int pair_of(bpe_ctx *c, int32_t left, int32_t right, bpe_pair *out) {
    if (left < 0 || right < 0) return 0;
    bpe_sym *a = &c->sym[left], *b = &c->sym[right];
    if (a->freeze || b->freeze) return 0;
    const spm_model *m = c->m;
    const spm_ftrie *f = c->ft;
    bpe_pair p;
    int32_t unused = -1;
    if (a->sm != 255 && b->sm != 255) {
        const uint64_t e = f->small[a->sm * SPM_SMALL + b->sm];
        if (!e) return 0;
        p.id = (int32_t)(e & ((1u << 21) - 1)) - 1;
        p.prio = (e >> 21 & 0xFFFFFFFFull) << 32;
        p.node = SYM_LAZY;
        if (e >> 53 & 1) unused = p.id;
    } else if (f && f->pairs && a->id >= 0 && b->id >= 0) {
        uint32_t sk = 0;
        const uint64_t e = f->wide ? pt_get_wide(f, a->id, b->id, &sk) : pt_get(f, a->id, b->id);
        if (!e) return 0;
        p.id = (int32_t)SPM_PT_C(e);
        p.prio = (uint64_t)(f->wide ? sk : f->skey[p.id]) << 32;
        p.node = SYM_LAZY;
        if (e & SPM_PT_UNUSED) unused = p.id;
    } else {
        const uint32_t an = sym_node(c, a);
        if (an == SPM_NONE) return 0;
        const pm_answer got = concat_piece(m, f, an, sym_node(c, b), c->s + b->start, b->len);
        if (got.node == SPM_NONE) return 0;
        p.id = f->nodes[got.node].id;
        p.prio = (uint64_t)(f && f->skey ? f->skey[p.id] : score_key(got.score)) << 32;
        p.node = got.node;
        unused = got.id;
    }
    p.prio |= ~(uint32_t)left;
    p.unused = unused >= 0;
    p.left = left;
    p.right = right;
    p.size = a->len + b->len;
    *out = p;
    if (unused >= 0) { /* an unused piece: remember the split that formed it (resegmentation) */
        if (!c->rev_left) {
            c->rev_left = (uint32_t *)calloc(m->n_pieces, sizeof(uint32_t));
            if (!c->rev_left) return -1;
        }
        c->rev_left[unused] = a->len;
    }
    return 1;
}

/* A candidate's merge makes two new pairs, (the symbol before left, the merged piece) and (the merged piece, the
 * symbol after right): their table slots are fetched as soon as the candidate is known, so that when it is
 * merged (often a few merges later) its two lookups find their lines in cache instead of waiting on memory one
 * merge after another. */
HOT void cand_prefetch(const bpe_ctx *c, const bpe_pair *p) {
    const spm_ftrie *f = c->ft;
    if (!f || !f->pairs) return;
    const int32_t pl = c->sym[p->left].prev, nr = c->sym[p->right].next;
    if (pl >= 0 && c->sym[pl].id >= 0) pt_prefetch(f, c->sym[pl].id, p->id);
    if (nr >= 0 && c->sym[nr].id >= 0) pt_prefetch(f, p->id, c->sym[nr].id);
}

static int maybe_add(bpe_ctx *c, int32_t left, int32_t right) {
    bpe_pair p;
    const int r = pair_of(c, left, right, &p);
    if (r <= 0) return r;
    cand_prefetch(c, &p);
    return heap_push(&c->q, p);
}

/* the candidate of left and its next symbol into cand[left] (prio 0: none); 0, or -1 out of memory */
HOT int cand_set(bpe_ctx *c, bpe_pair *cand, uint64_t *pr, int32_t left, int32_t right) {
    if (left < 0) return 0;
    const int r = pair_of(c, left, right, &cand[left]);
    if (r <= 0) {
        pr[left] = 0;
        return r;
    }
    pr[left] = cand[left].prio;
    cand_prefetch(c, &cand[left]);
    return 0;
}

#define ID_UNKNOWN (-2)
#define BPE_ARRAY_MAX 32 /* words of at most this many symbols merge without the heap */

/* Resegmentation of a final symbol (bpe_model.cc): a normal or user-defined piece is itself; an unused
 * piece splits into the pair that last formed it; anything else is the unknown piece.  Past a depth of
 * 100 the symbol is emitted as it is (the library's guard against deep merge chains).  `known`: the
 * symbol's piece (-1 none), or ID_UNKNOWN. */
static int reseg(bpe_ctx *c, uint32_t start, uint32_t len, spm_ints *out, int depth, int32_t known, int unused) {
    const spm_model *m = c->m;
    if (depth > 100)
        return ints_put3(out, piece_to_id(m, c->s + start, len), (int32_t)start, (int32_t)(start + len));
    int32_t v = known;
    if (v == ID_UNKNOWN) {
        v = piece_id(c->ft, c->s + start, len);
        unused = -1;
    }
    int32_t id = v < 0 ? m->unk_id : v;
    if (v >= 0 && (unused < 0 ? m->ptype[v] == SPT_UNUSED : unused)) {
        const uint32_t l = c->rev_left ? c->rev_left[v] : 0;
        if (l && l < len) {
            if (reseg(c, start, l, out, depth + 1, ID_UNKNOWN, -1)) return -1;
            return reseg(c, start + l, len - l, out, depth + 1, ID_UNKNOWN, -1);
        }
        id = m->unk_id;
    }
    return ints_put3(out, id, (int32_t)start, (int32_t)(start + len));
}

/* Merges the right symbol of `top` into its left one (which becomes the pair's piece) and, with a pair
 * table, fetches the table slots of the two pairs the merged symbol now forms with its neighbours, which
 * the caller computes next. */
static inline const bpe_sym *sym_merge(bpe_ctx *c, const bpe_pair *top, int tab) {
    bpe_sym *a = &c->sym[top->left], *b = &c->sym[top->right];
    a->len += b->len;
    a->node = top->node;
    a->id = top->id;
    a->unused = (int8_t)top->unused;
    a->sm = 255;
    a->next = b->next;
    if (b->next >= 0) c->sym[b->next].prev = top->left;
    b->len = 0;
    if (tab && a->prev >= 0 && a->next >= 0) {
        const int32_t pl = c->sym[a->prev].id, nr = c->sym[a->next].id;
        if (pl >= 0) pt_prefetch(c->ft, pl, a->id);
        if (nr >= 0) pt_prefetch(c->ft, a->id, nr);
    }
    return a;
}

int spm_bpe(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out) {
    if (!n) return 0;
    bpe_ctx c;
    memset(&c, 0, sizeof c);
    c.m = m;
    c.s = s;
    bpe_sym small[64];
    c.sym = n <= 64 ? small : (bpe_sym *)malloc(n * sizeof(bpe_sym));
    if (!c.sym) return -1;
    bpe_pair small_h[64];
    c.q.h = small_h;
    c.q.cap = 64;
    const spm_ftrie *ft = c.ft = spm_ftrie_get(m);
    const int tab = ft->pairs != NULL;
    int rc = -1;
    size_t ns = 0;
    for (size_t i = 0; i < n;) {
        int found;
        size_t l = user_match(m, s + i, n - i, &found);
        bpe_sym *y = &c.sym[ns];
        y->start = (uint32_t)i;
        y->len = (uint32_t)l;
        y->prev = (int32_t)ns - 1;
        y->next = (int32_t)ns + 1;
        y->freeze = (uint8_t)found;
        y->unused = -1;
        int32_t id = -2;
        y->sm = 255;
        if (tab && !found) {
            id = spm_char_piece(ft, s + i, l, &y->unused);
            if (id >= 0 && ft->small && !y->unused) {
                if (l == 1)
                    y->sm = s[i];
                else if (l == 3 && s[i] == SPACE_SYM[0] && s[i + 1] == SPACE_SYM[1] && s[i + 2] == SPACE_SYM[2])
                    y->sm = 128;
            }
        }
        if (id >= -1) {
            y->id = id;
            y->node = SYM_LAZY;
        } else {
            y->node = pieces_walk(ft, 0, s + i, l);
            y->id = y->node == SPM_NONE ? -1 : ft->nodes[y->node].id;
            y->unused = -1;
        }
        /* the candidate of this symbol and the one before it: its table slot is fetched now, read below */
        if (tab && ns && y->id >= 0 && c.sym[ns - 1].id >= 0 && (y->sm == 255 || c.sym[ns - 1].sm == 255))
            pt_prefetch(ft, c.sym[ns - 1].id, y->id);
        ns++;
        i += l;
    }
    c.sym[ns - 1].next = -1;
    if (ns <= BPE_ARRAY_MAX) {
        /* a short word: one candidate per symbol in an array, the best found by a scan (the heap's order:
         * the largest prio among the current candidates, which are exactly the heap's entries that are
         * not stale) */
        bpe_pair cand[BPE_ARRAY_MAX];
        /* the candidates' prios on their own (0: none): the best is their maximum, and a prio names its left
         * symbol (its low half is ~left), so the scan is a branch-free reduction */
        uint64_t pr[BPE_ARRAY_MAX];
        pr[ns - 1] = 0;
        for (size_t k = 1; k < ns; k++)
            if (cand_set(&c, cand, pr, (int32_t)k - 1, (int32_t)k)) goto done;
        for (;;) {
            uint64_t bp = 0;
            for (size_t k = 0; k < ns; k++) bp = pr[k] > bp ? pr[k] : bp;
            if (!bp) break;
            const bpe_pair top = cand[~(uint32_t)bp];
            const bpe_sym *a = sym_merge(&c, &top, tab);
            pr[top.right] = 0;
            if (cand_set(&c, cand, pr, a->prev, top.left)) goto done;
            if (a->next < 0)
                pr[top.left] = 0;
            else if (cand_set(&c, cand, pr, top.left, a->next))
                goto done;
        }
        goto emit;
    }
    for (size_t k = 1; k < ns; k++)
        if (maybe_add(&c, (int32_t)k - 1, (int32_t)k)) goto done;
    while (c.q.n) {
        const bpe_pair top = heap_pop(&c.q);
        const bpe_sym *a = &c.sym[top.left], *b = &c.sym[top.right];
        if (!a->len || !b->len || a->len + b->len != top.size) continue;
        sym_merge(&c, &top, tab);
        if (maybe_add(&c, a->prev, top.left)) goto done;
        if (maybe_add(&c, top.left, a->next)) goto done;
    }
emit:
    for (int32_t k = 0; k != -1; k = c.sym[k].next)
        if (reseg(&c, c.sym[k].start, c.sym[k].len, out, 0, c.sym[k].id, c.sym[k].unused)) goto done;
    rc = 0;
done:
    if (c.sym != small) free(c.sym);
    if (c.q.own) free(c.q.h);
    free(c.rev_left);
    return rc;
}
/* ------------------------------------------------------------------------------------------ */

int spm_finish(const spm_model *m, const uint8_t *s, const spm_ints *tri, spm_ints *ids) {
    int prev_unk = 0;
    const int fallback = (m->flags & SPF_BYTE_FALLBACK) != 0;
    for (size_t k = 0; k < tri->n; k += 3) {
        const int32_t id = tri->p[k], b = tri->p[k + 1], e = tri->p[k + 2];
        const int is_unk = m->one_unk ? id == m->unk_id : m->ptype[id] == SPT_UNKNOWN;
        if (is_unk && fallback) {
            for (int32_t q = b; q < e; q++)
                if (ints_put3(ids, m->byte_id[s[q]], b, q + 1 == e ? e : b)) return -1;
        } else if (is_unk && prev_unk && ids->n >= 3) {
            ids->p[ids->n - 1] = e;
        } else if (ints_put3(ids, id, b, e)) {
            return -1;
        }
        prev_unk = is_unk;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Word cache: direct-mapped, words of at most CW_MAXB bytes whose result has at most CW_MAXT pieces. */

#define CW_SLOTS (1u << 16)
#define CW_MAXB 24
#define CW_MAXT 5

/* one 64-byte line per slot, shared by threads without a lock (spm_line_read / spm_line_write) */
typedef struct {
    uint32_t seq;
    uint32_t hash;
    int32_t id[CW_MAXT];
    uint8_t len, nt;
    uint8_t key[CW_MAXB];
    uint8_t b[CW_MAXT], e[CW_MAXT];
} __attribute__((aligned(64))) cw_slot;

_Static_assert(sizeof(cw_slot) == 64, "a word-cache slot is one cache line");

#define cw_read spm_line_read
#define cw_write spm_line_write

struct spm_cache {
    cw_slot *slot;
    size_t bytes;
};

struct spm_cache *spm_cache_new(void) {
    struct spm_cache *c = (struct spm_cache *)calloc(1, sizeof *c);
    if (!c) return NULL;
    c->slot = (cw_slot *)spm_huge_alloc(CW_SLOTS * sizeof(cw_slot), &c->bytes);
    if (!c->slot) {
        free(c);
        return NULL;
    }
    return c;
}

void spm_cache_free(struct spm_cache *c) {
    if (!c) return;
    spm_zfree(c->slot, c->bytes);
    free(c);
}

/* the cache key of a word of at most CW_MAXB bytes s[0, n): its bytes as three little-endian words, zero past n.
 * `room`: the bytes readable from s (the words are read whole when there are CW_MAXB of them) */
HOT void word_key(const uint8_t *s, size_t n, size_t room, uint64_t k[3]) {
    if (room >= CW_MAXB) {
        memcpy(k, s, CW_MAXB);
    } else {
        uint8_t b[CW_MAXB] = {0};
        memcpy(b, s, n);
        memcpy(k, b, CW_MAXB);
    }
    for (size_t i = 0; i < 3; i++) {
        const size_t keep = n > 8 * i ? n - 8 * i : 0;
        k[i] &= keep >= 8 ? ~0ull : (1ull << (8 * keep)) - 1;
    }
}

/* a few multiplies per word (not one per byte): the hash of the key and length, never 0 (0: a free slot) */
HOT uint32_t word_hash(const uint64_t k[3], size_t n) {
    uint64_t h = (k[0] * 0x9E3779B97F4A7C15ull) ^ (k[1] * 0xC2B2AE3D27D4EB4Full) ^ ((k[2] ^ n) * 0x165667B19E3779F9ull);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h >> 32) | 1u;
}

/* the slot's copy holds the word (its key was stored zero-padded) */
HOT int word_is(const cw_slot *v, uint32_t h, size_t n, const uint64_t k[3]) {
    uint64_t x[3];
    memcpy(x, v->key, CW_MAXB);
    return v->hash == h && v->len == n && !((x[0] ^ k[0]) | (x[1] ^ k[1]) | (x[2] ^ k[2]));
}

HOT uint32_t slot2(uint32_t h) { return (h >> 15 ^ h >> 3) & (CW_SLOTS - 1); }

/* BPE over the words of s (split before every separator that follows another character), each word's
 * triples from the cache when present; the triples are in s's coordinates.  The words are found first,
 * so that the cache slots of the words a few ahead are fetched while the current one is looked up. */
static int bpe_words(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out) {
    const int escape = (m->flags & SPF_ESCAPE_WS) != 0;
    struct spm_cache *c = m->cache;
    spm_ints tmp = {0}, words = {0};
    /* the words: cut before a separator that follows another character (SPF_WORDS), and between two
     * characters whose byte pair no piece holds (SPF_CUTS); characters as spm_bpe steps over them */
    const int sep_cuts = (m->flags & SPF_WORDS) != 0;
    const uint8_t *cut = (m->flags & SPF_CUTS) ? m->cut_pairs : NULL;
    int prev_sep = 1;
    for (size_t i = 0; i < n;) {
        size_t l = one_char_len(s[i]);
        if (l > n - i) l = n - i;
        const int is_sep = escape ? (l == 3 && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) : s[i] == ' ';
        if (i && ((sep_cuts && is_sep && !prev_sep) ||
                  (cut && !((cut[((size_t)s[i - 1] << 5) | (s[i] >> 3)] >> (s[i] & 7)) & 1))))
            if (ints_put(&words, (int32_t)i)) goto fail;
        prev_sep = is_sep;
        i += l;
    }
    if (ints_put(&words, (int32_t)n)) goto fail;
    /* each word's hash once, beside its end: the slots of the word 8 ahead are fetched from it */
    const size_t nw = words.n;
    if (grow((void **)&words.p, &words.cap, 2 * nw, 4)) goto fail;
    uint32_t *hs = (uint32_t *)words.p + nw;
    for (size_t w = 0, a0 = 0; w < nw; w++) {
        const size_t b0 = (size_t)words.p[w];
        uint64_t k[3];
        if (b0 - a0 <= CW_MAXB) word_key(s + a0, b0 - a0, n - a0, k);
        hs[w] = b0 - a0 <= CW_MAXB ? word_hash(k, b0 - a0) : 0;
        a0 = b0;
    }
    size_t a = 0;
    for (size_t w = 0; w < nw; w++) {
        const size_t b = (size_t)words.p[w];
        if (c && w + 8 < nw && hs[w + 8]) {
            __builtin_prefetch(&c->slot[hs[w + 8] & (CW_SLOTS - 1)]);
            __builtin_prefetch(&c->slot[slot2(hs[w + 8])]);
        }
        const size_t len = b - a;
        const uint32_t h = hs[w];
        cw_slot *sl = NULL;
        uint64_t key[3];
        if (c && len <= CW_MAXB) {
            /* two candidate slots; a word is stored in the first when it is free, else in the second */
            cw_slot *s1 = &c->slot[h & (CW_SLOTS - 1)], *s2 = &c->slot[slot2(h)];
            /* a slot is copied (and its copy checked) only when its hash, read first on its own, is the word's */
            cw_slot v;
            const cw_slot *hit = NULL;
            word_key(s + a, len, n - a, key);
            const uint32_t h1 = __atomic_load_n(&s1->hash, __ATOMIC_RELAXED);
            if (h1 == h && cw_read(s1, &v) && word_is(&v, h, len, key))
                hit = &v;
            else if (__atomic_load_n(&s2->hash, __ATOMIC_RELAXED) == h && cw_read(s2, &v) && word_is(&v, h, len, key))
                hit = &v;
            if (hit) {
                const int nt = hit->nt;
                for (int k = 0; k < nt; k++)
                    if (ints_put3(out, hit->id[k], (int32_t)(a + hit->b[k]), (int32_t)(a + hit->e[k]))) goto fail;
                a = b;
                continue;
            }
            sl = h1 == 0 ? s1 : s2;
        }
        tmp.n = 0;
        if (spm_bpe(m, s + a, len, &tmp)) goto fail;
        for (size_t k = 0; k < tmp.n; k += 3)
            if (ints_put3(out, tmp.p[k], (int32_t)a + tmp.p[k + 1], (int32_t)a + tmp.p[k + 2])) goto fail;
        if (sl && tmp.n / 3 <= CW_MAXT) {
            cw_slot v;
            memset(&v, 0, sizeof v);
            v.hash = h;
            v.len = (uint8_t)len;
            v.nt = (uint8_t)(tmp.n / 3);
            memcpy(v.key, key, CW_MAXB);
            for (size_t k = 0; k < tmp.n / 3; k++) {
                v.id[k] = tmp.p[3 * k];
                v.b[k] = (uint8_t)tmp.p[3 * k + 1];
                v.e[k] = (uint8_t)tmp.p[3 * k + 2];
            }
            cw_write(sl, &v);
        }
        a = b;
    }
    spm_ints_free(&tmp);
    spm_ints_free(&words);
    return 0;
fail:
    spm_ints_free(&tmp);
    spm_ints_free(&words);
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Unigram (.model) by words.  When no piece holds the separator after its first character, no piece
 * crosses the point before a separator: every path of the lattice passes there, and the best path is the
 * best path of each word from the score the text before it reaches (P).  The lattice of a word depends on
 * P only through float rounding (and the rebase at +-SCORE_RESET), so a word's path found once holds for
 * another P when each of its decisions wins by more than the rounding of paths from that P can move it:
 * a word's best path is found in double arithmetic from 0 with the least margin of its decisions
 * (uw_exact), and cached with it; it is taken when that margin exceeds the bound at the current P, else
 * the word's lattice is walked in float from P (sp_lattice), as the library walks it. */

#define UW_MAXB 24
#define UW_MAXT 5
#define UW_PROBE 64 /* words after which a text that takes fewer than half of them from the cache stops using it */

/* one 64-byte line per slot (spm_line_read / spm_line_write), in the model's word cache */
typedef struct {
    uint32_t seq;
    uint32_t hash;
    float margin;       /* the least margin of the path's decisions (> 0) */
    int32_t id[UW_MAXT];
    uint8_t len, nt;
    uint8_t unk;        /* bit k: piece k is the unknown piece of one character (scored unk_score) */
    uint8_t e[UW_MAXT]; /* each piece's end in the word */
    uint8_t key[UW_MAXB];
} __attribute__((aligned(64))) uw_slot;

_Static_assert(sizeof(uw_slot) == 64, "a Unigram word-cache slot is one cache line");

/* a word's best path: nt pieces (id, end, unk bit), the least margin of its decisions (0: a tie) */
typedef struct {
    int32_t id[UW_MAXB];
    uint8_t e[UW_MAXB];
    uint32_t unk;
    int nt;
    double margin;
} uw_path;

/* the score a piece adds to a path, as sp_lattice adds it */
HOT float uw_piece_score(const spm_model *m, int32_t id, int unk) {
    return unk ? m->min_score - 10.0f : m->uw_eff[id];
}

/* the best path of the word s[0, n) (n <= UW_MAXB) from 0 in double arithmetic, with the least margin by
 * which its decision at each of its ends beats every other candidate there */
static void uw_exact(const spm_model *m, const spm_ftrie *f, const uint8_t *s, size_t n, uw_path *p) {
    double sc[UW_MAXB + 1], second[UW_MAXB + 1];
    int32_t from[UW_MAXB + 1], id[UW_MAXB + 1];
    uint8_t unk[UW_MAXB + 1];
    for (size_t k = 0; k <= n; k++) {
        from[k] = -1;
        second[k] = -1e300;
        sc[k] = 0.0;
    }
    const double unk_score = (double)(m->min_score - 10.0f);
#define UW_CAND(K, V, ST, ID, U)                                                                                        \
    do {                                                                                                               \
        const double v_ = (V);                                                                                         \
        if (from[K] == -1 || v_ > sc[K]) {                                                                             \
            if (from[K] != -1) second[K] = sc[K];                                                                      \
            sc[K] = v_;                                                                                                \
            from[K] = (int32_t)(ST);                                                                                   \
            id[K] = (ID);                                                                                              \
            unk[K] = (U);                                                                                              \
        } else if (v_ > second[K]) {                                                                                   \
            second[K] = v_;                                                                                            \
        }                                                                                                              \
    } while (0)
    /* the walks from every character start first, side by side: each round takes one step of every walk still
     * going, so that the reads of the trie records of different walks overlap (a word's rare pieces are
     * records the caches do not hold).  cand[st] has bit len - 1 when a piece of len bytes starts at st. */
    uint32_t cand[UW_MAXB], node[UW_MAXB];
    uint8_t at[UW_MAXB], go[UW_MAXB], mbl[UW_MAXB];
    int32_t cid[UW_MAXB][UW_MAXB];
    float csc[UW_MAXB][UW_MAXB];
    size_t ng = 0;
    for (size_t st = 0; st < n;) {
        size_t mblen = one_char_len(s[st]);
        if (mblen > n - st) mblen = n - st;
        cand[st] = 0;
        node[st] = 0;
        at[st] = (uint8_t)st;
        mbl[st] = (uint8_t)mblen;
        uint32_t cn;
        if (mblen > 1 && char_node(f, s + st, mblen, &cn)) { /* the first character in one read */
            const walk_at w = lat_node(m, f, cn);
            if (w.node != SPM_NONE) {
                node[st] = w.node;
                at[st] = (uint8_t)(st + mblen);
                if (w.type && w.type != SPT_UNUSED) {
                    cand[st] |= 1u << (mblen - 1);
                    cid[st][mblen - 1] = w.id;
                    csc[st][mblen - 1] = w.type == SPT_USER ? (float)(0.1 * (double)((int)mblen - 1)) : lat_score(m, f, w);
                }
                if (st + mblen < n) go[ng++] = (uint8_t)st;
            }
            st += mblen;
            continue;
        }
        go[ng++] = (uint8_t)st;
        st += mblen;
    }
    while (ng) {
        size_t keep = 0;
        for (size_t g = 0; g < ng; g++) {
            const size_t st = go[g], kp = at[st];
            const walk_at w = lat_step(m, f, node[st], s[kp]);
            if (w.node == SPM_NONE) continue;
            node[st] = w.node;
            at[st] = (uint8_t)(kp + 1);
            if (w.type && w.type != SPT_UNUSED) {
                const size_t length = kp + 1 - st;
                cand[st] |= 1u << (length - 1);
                cid[st][length - 1] = w.id;
                csc[st][length - 1] = w.type == SPT_USER ? (float)(0.1 * (double)((int)length - 1)) : lat_score(m, f, w);
            }
            if (kp + 1 < n) go[keep++] = (uint8_t)st;
        }
        ng = keep;
    }
    for (size_t st = 0; st < n; st += mbl[st]) {
        const double here = sc[st];
        for (uint32_t c = cand[st]; c; c &= c - 1) {
            const size_t l = (size_t)__builtin_ctz(c);
            UW_CAND(st + l + 1, (double)csc[st][l] + here, st, cid[st][l], 0);
        }
        if (!((cand[st] >> (mbl[st] - 1)) & 1)) UW_CAND(st + mbl[st], unk_score + here, st, m->unk_id, 1);
    }
#undef UW_CAND
    int nt = 0;
    double margin = 1e300;
    for (size_t e = n; e > 0; e = (size_t)from[e]) {
        const double d = sc[e] - second[e];
        if (d < margin) margin = d;
        nt++;
    }
    p->nt = nt;
    p->margin = margin;
    p->unk = 0;
    int k = nt;
    for (size_t e = n; e > 0; e = (size_t)from[e]) {
        k--;
        p->id[k] = id[e];
        p->e[k] = (uint8_t)e;
        if (unk[e]) p->unk |= 1u << k;
    }
}

/* 1 when a path of a word of n bytes whose decisions win by `margin` (from 0, exactly) is the library's path from
 * P: no rebase within the word (every score stays inside +-SCORE_RESET), and each path's float sum from P is
 * within n * 2^-24 * (|P| + n * smax) of its exact value (n additions at most, each rounding by 2^-24 of a
 * partial sum), so a margin of more than twice that (four times: room for the double sums) decides alike */
HOT int uw_holds(const spm_model *m, float P, size_t n, double margin) {
    const double a = fabs((double)P) + (double)n * m->uw_smax;
    return a + 1.0 < (double)SCORE_RESET && margin > 4.0 * (double)n * a * 0x1p-24 + 1e-6;
}

/* P after the pieces of a path (float additions in the library's order) */
HOT float uw_fold(const spm_model *m, float P, const int32_t *id, uint32_t unk, int nt) {
    for (int k = 0; k < nt; k++) {
        P = uw_piece_score(m, id[k], (unk >> k) & 1) + P;
    }
    return P;
}

static int unigram_words(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out) {
    const spm_ftrie *f = spm_ftrie_get(m);
    uw_slot *cache = (uw_slot *)(void *)m->cache->slot;
    spm_ints words = {0};
    int rc = -1;
    float *score = NULL;
    path_node *best = NULL;
    /* the words: cut before each separator that follows another character (characters as the lattice steps) */
    for (size_t i = 0; i < n;) {
#ifdef __SSE2__
        /* 16 ASCII bytes at once: no separator among them, and each is a character */
        while (i + 16 <= n && !_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)))) i += 16;
        if (i >= n) break;
#endif
        size_t l = one_char_len(s[i]);
        if (l > n - i) l = n - i;
        if (i && l == 3 && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81 && ints_put(&words, (int32_t)i))
            goto done;
        i += l;
    }
    if (ints_put(&words, (int32_t)n)) goto done;
    /* each word's hash once, beside its end: the slots of the word 8 ahead are fetched from it */
    const size_t nw = words.n;
    if (grow((void **)&words.p, &words.cap, 2 * nw, 4)) goto done;
    uint32_t *hs = (uint32_t *)words.p + nw;
    for (size_t w = 0, a0 = 0; w < nw; w++) {
        const size_t b0 = (size_t)words.p[w];
        uint64_t k[3];
        if (b0 - a0 <= UW_MAXB) word_key(s + a0, b0 - a0, n - a0, k);
        hs[w] = b0 - a0 <= UW_MAXB ? word_hash(k, b0 - a0) : 0;
        a0 = b0;
    }
    float P = 0.0f;
    size_t hits = 0, a = 0;
    for (size_t w = 0; w < nw; w++) {
        const size_t b = (size_t)words.p[w], len = b - a;
        if (w == UW_PROBE && hits * 2 < w) {
            /* a text whose words are mostly new (or long): the rest in one lattice from P, as the library walks
             * it, without the cache's work per word */
            if (P < -SCORE_RESET || P > SCORE_RESET) P = 0.0f;
            break;
        }
        if (w + 8 < nw && hs[w + 8]) {
            __builtin_prefetch(&cache[hs[w + 8] & (CW_SLOTS - 1)]);
            __builtin_prefetch(&cache[slot2(hs[w + 8])]);
        }
        if (P < -SCORE_RESET || P > SCORE_RESET) P = 0.0f; /* the library's rebase at the word's start */
        uw_slot *sl = NULL;
        if (len <= UW_MAXB) {
            const uint32_t h = hs[w];
            uw_slot *s1 = &cache[h & (CW_SLOTS - 1)], *s2 = &cache[slot2(h)];
            uw_slot v = {0};
            const uw_slot *hit = NULL;
            const uint32_t h1 = __atomic_load_n(&s1->hash, __ATOMIC_RELAXED);
            if (h1 == h && spm_line_read(s1, &v) && v.hash == h && v.len == len && !memcmp(v.key, s + a, len))
                hit = &v;
            else if (__atomic_load_n(&s2->hash, __ATOMIC_RELAXED) == h && spm_line_read(s2, &v) && v.hash == h &&
                     v.len == len && !memcmp(v.key, s + a, len))
                hit = &v;
            if (hit && uw_holds(m, P, len, hit->margin)) {
                uint8_t pb = 0;
                for (int k = 0; k < hit->nt; k++) {
                    if (ints_put3(out, hit->id[k], (int32_t)(a + pb), (int32_t)(a + hit->e[k]))) goto done;
                    pb = hit->e[k];
                }
                P = uw_fold(m, P, hit->id, hit->unk, hit->nt);
                hits++;
                a = b;
                continue;
            }
            if (!hit) sl = h1 == 0 ? s1 : s2;
            uw_path p;
            uw_exact(m, f, s + a, len, &p);
            if (p.margin > 0 && uw_holds(m, P, len, p.margin)) {
                uint8_t pb = 0;
                for (int k = 0; k < p.nt; k++) {
                    if (ints_put3(out, p.id[k], (int32_t)(a + pb), (int32_t)(a + p.e[k]))) goto done;
                    pb = p.e[k];
                }
                P = uw_fold(m, P, p.id, p.unk, p.nt);
                if (sl && p.nt <= UW_MAXT) {
                    uw_slot v;
                    memset(&v, 0, sizeof v);
                    v.hash = h;
                    v.len = (uint8_t)len;
                    v.nt = (uint8_t)p.nt;
                    v.unk = (uint8_t)p.unk;
                    v.margin = (float)(p.margin * (1.0 - 0x1p-20)); /* rounded down */
                    memcpy(v.key, s + a, len);
                    for (int k = 0; k < p.nt; k++) {
                        v.id[k] = p.id[k];
                        v.e[k] = p.e[k];
                    }
                    spm_line_write(sl, &v);
                }
                a = b;
                continue;
            }
        }
        /* the word's lattice in float from P, as the library walks it */
        if (!best) {
            best = (path_node *)malloc((n + 1) * sizeof *best);
            score = (float *)malloc((n + 1) * sizeof *score);
            if (!best || !score) goto done;
        }
        P = sp_lattice(m, f, s + a, len, P, best, score);
        if (path_emit(best, len, (int32_t)a, out)) goto done;
        a = b;
    }
    if (a < n) {
        if (!best) {
            best = (path_node *)malloc((n + 1) * sizeof *best);
            score = (float *)malloc((n + 1) * sizeof *score);
            if (!best || !score) goto done;
        }
        sp_lattice(m, f, s + a, n - a, P, best, score);
        if (path_emit(best, n - a, (int32_t)a, out)) goto done;
    }
    rc = 0;
done:
    free(best);
    free(score);
    spm_ints_free(&words);
    return rc;
}

/* Unigram words (above) for a .model whose pieces never hold the escaped space after their first character:
 * smax bounds the size of every score a piece adds to a path.  0, or -1 out of memory */
int spm_unigram_prepare(spm_model *m) {
    m->uw_smax = 0.0;
    if ((m->flags & (SPF_BPE | SPF_HF | SPF_WS_SUFFIX)) || !(m->flags & SPF_ESCAPE_WS) || !m->blob || !m->off ||
        !m->score)
        return 0;
    for (uint32_t i = 0; i < m->n_pieces; i++) {
        if (m->off[i + 1] < m->off[i]) return 0; /* (the loader refuses such offsets first) */
        const uint8_t *p = m->blob + m->off[i];
        const size_t l = m->off[i + 1] - m->off[i];
        for (size_t k = 1; k + 3 <= l; k++)
            if (p[k] == 0xE2 && p[k + 1] == 0x96 && p[k + 2] == 0x81) return 0;
        const double a = fabs((double)m->score[i]);
        if (a > m->uw_smax || a != a) m->uw_smax = a;
    }
    const double u = fabs((double)(m->min_score - 10.0f));
    if (u > m->uw_smax || u != u) m->uw_smax = u;
    if (m->uw_smax != m->uw_smax || m->uw_smax > 1e30) return 0; /* NaN or huge scores: no bound holds */
    m->uw_smax += 0.1 * UW_MAXB; /* a user-defined piece's bonus */
    /* the score each piece adds to a path as sp_lattice adds it, in one array (uw_fold) */
    if (!(m->uw_eff = (float *)malloc((size_t)m->n_pieces * sizeof(float) + 1))) return -1;
    for (uint32_t i = 0; i < m->n_pieces; i++)
        m->uw_eff[i] = m->ptype[i] == SPT_USER ? (float)(0.1 * (double)((int)(m->off[i + 1] - m->off[i]) - 1))
                                               : m->score[i];
    if (!m->cache && !(m->cache = spm_cache_new())) return -1;
    m->uw = 1;
    return 0;
}

int spm_model_run(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out) {
    if (m->flags & SPF_BPE) return (m->flags & (SPF_WORDS | SPF_CUTS)) ? bpe_words(m, s, n, out) : spm_bpe(m, s, n, out);
    if (m->uw && n) return unigram_words(m, s, n, out);
    return spm_unigram(m, s, n, out);
}

int spm_encode(const spm_model *m, const uint8_t *in, size_t n, spm_ints *ids, int want_offsets) {
    spm_bytes norm = {0};
    spm_ints n2o = {0}, tri = {0};
    int rc = -1;
    if (spm_normalize(m, in, n, &norm, want_offsets ? &n2o : NULL)) goto done;
    if (spm_model_run(m, norm.p, norm.n, &tri)) goto done;
    if (spm_finish(m, norm.p, &tri, ids)) goto done;
    if (want_offsets && norm.n)
        for (size_t k = 0; k < ids->n; k += 3) {
            ids->p[k + 1] = n2o.p[ids->p[k + 1]];
            ids->p[k + 2] = n2o.p[ids->p[k + 2]];
        }
    rc = 0;
done:
    spm_bytes_free(&norm);
    spm_ints_free(&n2o);
    spm_ints_free(&tri);
    return rc;
}
