/* The BERT normalization pass fused with the walk: one pass over UTF-8 text does HF's BertNormalizer
 * (clean text, CJK isolation, lowercasing, accent stripping with canonical reordering of the surviving
 * marks) through the two-stage table of fstok/compile/bert_normalize.py, BertPreTokenizer (whitespace and
 * punctuation split) and WordPiece (wp_walk.h); also the single-word entry (no normalization).
 * Python-free.  Oracles: HF tokenizers' BertNormalizer + BertPreTokenizer + WordPiece (tests/test_wordpiece_hf.py),
 * fstok/reference/wordpiece.py (TableExecutor on the same tables). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wp_walk.h"

#ifndef FSTOK_WP_NORMALIZE_H
#define FSTOK_WP_NORMALIZE_H

static inline int utf8_encode(uint32_t cp, uint8_t *b) {
    if (cp < 0x80) { b[0] = (uint8_t)cp; return 1; }
    if (cp < 0x800) { b[0] = 0xC0 | (cp >> 6); b[1] = 0x80 | (cp & 0x3F); return 2; }
    if (cp < 0x10000) { b[0] = 0xE0 | (cp >> 12); b[1] = 0x80 | ((cp >> 6) & 0x3F); b[2] = 0x80 | (cp & 0x3F); return 3; }
    b[0] = 0xF0 | (cp >> 18); b[1] = 0x80 | ((cp >> 12) & 0x3F); b[2] = 0x80 | ((cp >> 6) & 0x3F); b[3] = 0x80 | (cp & 0x3F);
    return 4;
}

static void emit_norm(wstate *w, uint32_t cp, uint32_t cls, uint32_t orig) {
    const int offs = w->out->want_offs;
    uint8_t buf[4];
    int nb = utf8_encode(cp, buf);
    if (cls == CLS_SPACE) {
        word_end(w);
    } else if (cls == CLS_PUNCT) {
        word_end(w);
        if (offs) feed(w, buf, nb, orig, 1); else feed(w, buf, nb, orig, 0);
        word_end(w);
    } else {
        if (offs) feed(w, buf, nb, orig, 1); else feed(w, buf, nb, orig, 0);
    }
}

/* Emit a run of combining marks (ccc > 0) in canonical order.  HF computes alignments from the
 * NFD output positionally: the k-th character of the reordered run that starts a code point's
 * decomposition takes the k-th such original position, a continuation character takes its
 * predecessor's.  Dropped marks (strip_accents) take part in the ordering, then vanish. */
static void flush_pending(wstate *w) {
    size_t n = w->npend;
    if (!n) return;
    uint32_t *q = (uint32_t *)malloc(n * sizeof(uint32_t));
    if (!q) { w->out->oom = 1; w->npend = 0; return; }
    size_t nq = 0;
    for (size_t i = 0; i < n; i++)
        if (!w->pend[i].cont) q[nq++] = w->pend[i].orig;
    if (n > 64) {
        size_t cnt[257] = {0};
        for (size_t i = 0; i < n; i++) cnt[w->pend[i].ccc + 1]++;
        for (int c = 1; c < 257; c++) cnt[c] += cnt[c - 1];
        pend_item *tmp = (pend_item *)malloc(n * sizeof(pend_item));
        if (tmp) {
            for (size_t i = 0; i < n; i++) tmp[cnt[w->pend[i].ccc]++] = w->pend[i];
            memcpy(w->pend, tmp, n * sizeof(pend_item));
            free(tmp);
        } else {
            w->out->oom = 1;
        }
    } else {
        for (size_t i = 1; i < n; i++) {
            pend_item x = w->pend[i];
            size_t j = i;
            while (j > 0 && w->pend[j - 1].ccc > x.ccc) { w->pend[j] = w->pend[j - 1]; j--; }
            w->pend[j] = x;
        }
    }
    w->npend = 0;
    uint32_t prev = w->prev_orig;
    size_t qi = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t o = (!w->pend[i].cont && qi < nq) ? q[qi++] : prev;
        prev = o;
        if (!w->pend[i].dropped) emit_norm(w, w->pend[i].cp, w->pend[i].cls, o);
    }
    w->prev_orig = prev;
    free(q);
}

static void push_pending(wstate *w, uint32_t cp, uint32_t ccc, uint32_t cls, uint32_t orig, uint32_t dropped, uint32_t cont) {
    if (w->npend == w->pend_cap) {
        size_t nc = w->pend_cap ? w->pend_cap * 2 : 16;
        pend_item *np = (pend_item *)realloc(w->pend, nc * sizeof(pend_item));
        if (!np) { w->out->oom = 1; return; }
        w->pend = np;
        w->pend_cap = nc;
    }
    pend_item *it = &w->pend[w->npend++];
    it->cp = cp;
    it->ccc = ccc;
    it->cls = cls;
    it->orig = orig;
    it->dropped = dropped;
    it->cont = cont;
}

static void wstate_free(wstate *w) {
    free(w->b2o);
    free(w->pend);
    w->b2o = NULL;
    w->pend = NULL;
}

/* Decode one UTF-8 code point (input known valid). */
static inline uint32_t utf8_next(const uint8_t *s, size_t i, int *len) {
    uint8_t c = s[i];
    if (c < 0x80) { *len = 1; return c; }
    if (c < 0xE0) { *len = 2; return ((uint32_t)(c & 0x1F) << 6) | (s[i + 1] & 0x3F); }
    if (c < 0xF0) { *len = 3; return ((uint32_t)(c & 0x0F) << 12) | ((uint32_t)(s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F); }
    *len = 4;
    return ((uint32_t)(c & 0x07) << 18) | ((uint32_t)(s[i + 1] & 0x3F) << 12) | ((uint32_t)(s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F);
}

/* End-to-end: normalization + pre-tokenization + WordPiece in one pass over s. */
HOT void wp_e2e_impl(const wp_tables *t, const uint8_t *s, size_t n, outbuf *out, const int offs) {
    out_reserve(out, n / 4 + 4); /* ~1 token per 4 bytes of text; grows when needed */
    wstate w;
    memset(&w, 0, sizeof(w));
    w.t = t;
    w.out = out;
    const uint32_t *ascii = t->norm2 + ((size_t)t->norm1[0] << 8);
    const uint32_t maxc = t->max_chars;
    const uint8_t *const wordbyte = t->wordbyte;
    uint32_t ci = 0;
    size_t i = 0;
    while (i < n) {
        int L;
        uint32_t cp;
        uint8_t c0 = s[i];
        if (c0 < 0x80 && !w.npend) {
            /* ASCII fast path: one table read, bytes straight into the trie */
            uint32_t e = ascii[c0] & 7;
            w.prev_orig = ci;
            if (e == KIND_REG) {
                if (!offs) {
                    L = 1;
                    goto reg_run; /* a run of word characters: classified first, then walked */
                }
                feed(&w, s + i, 1, ci, offs);
            } else if (e == KIND_SPACE) {
                word_end(&w);
            } else if (e == KIND_ISO) {
                word_end(&w);
                feed(&w, s + i, 1, ci, offs);
                word_end(&w);
            } else if (e != KIND_DEL) {
                goto general; /* KIND_MAP (e.g. uppercase when lowercasing) */
            }
            ci++;
            i++;
            continue;
        }
    general:
        cp = utf8_next(s, i, &L);
        uint32_t e = t->norm2[((size_t)t->norm1[cp >> 8] << 8) | (cp & 0xFF)];
        switch (e & 7) {
        case KIND_REG:
            if (w.npend) flush_pending(&w);
            w.prev_orig = ci;
#ifndef WP_NO_REG_RUN
            if (!offs) {
                /* A run of word characters that normalize to themselves (one script, usually): find
                 * its end first, then walk the trie over its bytes in one tight loop. */
            reg_run:;
                size_t j = i + (size_t)L;
                uint32_t nch = 1;
#ifndef WP_NO_ASCII_WALK
                if (L == 1 && t->inline_pops && !w.failed) {
                    /* an ASCII word (from its first byte, an ASCII word byte): walked while it is classified */
                    if (!w.in_word) word_begin(&w, ci);
                    const uint8_t *q;
                    uint32_t u = t->pw == 3 ? walk_ascii3(&w, w.u, s + i, s + n, &q) : walk_ascii4(&w, w.u, s + i, s + n, &q);
                    if (__builtin_expect(u == NONE32, 0)) { /* cannot be tokenized: the rest of it unwalked */
                        w.failed = 1;
                        while (q < s + n && wordbyte[*q]) q++;
                    }
                    w.u = u;
                    const size_t k = (size_t)(q - s) - i;
                    w.nchars += (uint32_t)k;
                    if (!w.failed && w.nchars > maxc) w.failed = 1;
                    w.wbytes += k;
                    ci += (uint32_t)k;
                    i += k;
                    w.last_orig = ci - 1;
                    w.prev_orig = ci - 1;
                    if (w.out->n + 8 > w.out->cap) out_reserve(w.out, 8);
                    if (i >= n || s[i] < 0x80) continue; /* (the word ends here, at a separator) */
                    j = i; /* non-ASCII characters follow: the scan below decides whether the word goes on */
                    nch = 0;
                }
#endif
                while (j < n) {
                    uint8_t c = s[j];
                    if (c < 0x80) {
                        if (!wordbyte[c]) break;
                        j++;
                        nch++;
                        continue;
                    }
                    int L2;
                    uint32_t cp2 = utf8_next(s, j, &L2);
                    if ((t->norm2[((size_t)t->norm1[cp2 >> 8] << 8) | (cp2 & 0xFF)] & 7) != KIND_REG) break;
                    j += (size_t)L2;
                    nch++;
                }
                if (!w.in_word) word_begin(&w, ci);
                w.nchars += nch;
                if (!w.failed && w.nchars > maxc) w.failed = 1;
                if (!w.failed) {
                    uint32_t u = w.u;
                    if (t->inline_pops)
                        u = t->pw == 3 ? walk_fast3(&w, u, s + i, s + j, s + n) : walk_fast4(&w, u, s + i, s + j, s + n);
                    else
                        u = walk_gen(&w, u, s + i, s + j, s + n);
                    if (u == NONE32) w.failed = 1;
                    w.u = u;
                }
                w.wbytes += j - i;
                ci += nch;
                w.last_orig = ci - 1;
                w.prev_orig = ci - 1;
                i = j;
                if (w.out->n + 8 > w.out->cap) out_reserve(w.out, 8);
                continue;
            }
#endif
            feed(&w, s + i, L, ci, offs);
            break;
        case KIND_DEL:
            break;
        case KIND_SPACE:
            if (w.npend) flush_pending(&w);
            word_end(&w);
            break;
        case KIND_ISO:
            if (w.npend) flush_pending(&w);
            w.prev_orig = ci;
            word_end(&w);
            feed(&w, s + i, L, ci, offs);
            word_end(&w);
            break;
        default: {
            const uint32_t *p = t->npool + (e >> 3);
            uint32_t hdr = p[0], nit = hdr & 0xFFFF, iso = hdr >> 16;
            if (iso) {
                if (w.npend) flush_pending(&w);
                word_end(&w);
            }
            for (uint32_t k = 1; k <= nit; k++) {
                uint32_t it = p[k];
                uint32_t icp = it & 0x1FFFFF, cls = (it >> 21) & 3, dropped = (it >> 23) & 1, ccc = it >> 24;
                if (ccc) {
                    push_pending(&w, icp, ccc, cls, ci, dropped, k > 1);
                    continue;
                }
                if (w.npend) flush_pending(&w);
                w.prev_orig = ci;
                if (!dropped) emit_norm(&w, icp, cls, ci);
            }
            if (iso) {
                if (w.npend) flush_pending(&w);
                word_end(&w);
            }
        }
        }
        ci++;
        i += L;
    }
    if (w.npend) flush_pending(&w);
    word_end(&w);
    wstate_free(&w);
}

static void wp_encode_e2e(const wp_tables *t, const uint8_t *s, size_t n, outbuf *out) {
    if (out->want_offs) wp_e2e_impl(t, s, n, out, 1);
    else wp_e2e_impl(t, s, n, out, 0);
}

/* Single word: LinMaxMatch (Algorithm 1) on the raw bytes, no normalization. */
static void wp_encode_word(const wp_tables *t, const uint8_t *s, size_t n, outbuf *out) {
    wstate w;
    memset(&w, 0, sizeof(w));
    w.t = t;
    w.out = out;
    if (n == 0) return;
    uint32_t ci = 0;
    size_t i = 0;
    while (i < n) {
        int L;
        (void)utf8_next(s, i, &L);
        if (out->want_offs) feed(&w, s + i, L, ci, 1); else feed(&w, s + i, L, ci, 0);
        ci++;
        i += L;
    }
    word_end(&w);
    wstate_free(&w);
}

#endif /* FSTOK_WP_NORMALIZE_H */
