/* HF tokenizer.json pipelines of the SentencePiece family with tokenizers' alignments (see spm.h,
 * spm_hf_encode_offsets): the stages of lib_spm_hf.c, each carrying one (original start, original end)
 * character pair per normalized byte (the bytes of one character share it) and moving it as tokenizers'
 * NormalizedString does: Precompiled through its transformations list (transform_range), Replace giving
 * the content the alignment of the last replaced character, Prepend and Metaspace's prefix that of the
 * first character.  A token's offsets are the alignments of its first and last bytes.  The oracle is
 * fstok.hf_norm.NString and fstok.hf_spm.HFSentencePieceTokenizer.hf_lists (the Python string path). */
#include <stdlib.h>
#include <string.h>

#include "spm.h"
#include "spm_hf_bufs.h"

#define HOT static inline __attribute__((always_inline))

struct spm_hf_off_work {
    spm_bytes a, b;   /* normalized text, two buffers a stage writes in turn */
    spm_ints la, lb;  /* their alignments: (start, end) per byte */
    spm_ints chg;     /* Precompiled's transformations: (byte length, change) per output character */
    spm_ints segs;    /* (start, length, word) of each model piece */
    spm_ints sp;      /* the byte spans of a piece's tokens */
    spm_hf_scratch *sc;
};

spm_hf_off_work *spm_hf_off_work_new(void) {
    spm_hf_off_work *w = (spm_hf_off_work *)calloc(1, sizeof *w);
    if (w && !(w->sc = spm_hf_scratch_new())) {
        free(w);
        return NULL;
    }
    return w;
}

void spm_hf_off_work_free(spm_hf_off_work *w) {
    if (!w) return;
    spm_bytes_free(&w->a);
    spm_bytes_free(&w->b);
    spm_ints_free(&w->la);
    spm_ints_free(&w->lb);
    spm_ints_free(&w->chg);
    spm_ints_free(&w->segs);
    spm_ints_free(&w->sp);
    spm_hf_scratch_free(w->sc);
    free(w);
}

HOT int iput2(spm_ints *v, int32_t x, int32_t y) {
    if (v->n + 2 > v->cap && spm_ints_reserve(v, v->n + 2)) return -1;
    v->p[v->n++] = x;
    v->p[v->n++] = y;
    return 0;
}

HOT int iput(spm_ints *v, int32_t x) {
    if (v->n + 1 > v->cap && spm_ints_reserve(v, v->n + 1)) return -1;
    v->p[v->n++] = x;
    return 0;
}

int spm_hf_ids_put(spm_ints *v, int32_t x) { return iput(v, x); }

/* the text of one stage: bytes and their alignments (2 per byte) */
typedef struct {
    spm_bytes *t;
    spm_ints *al;
} stage;

/* appends bytes s[0..n) each aligned to (as, ae) */
HOT int put_one(stage *d, const uint8_t *s, size_t n, int32_t as, int32_t ae) {
    if (d->t->n + n > d->t->cap && spm_bytes_reserve(d->t, d->t->n + n)) return -1;
    if (d->al->n + 2 * n > d->al->cap && spm_ints_reserve(d->al, d->al->n + 2 * n)) return -1;
    memcpy(d->t->p + d->t->n, s, n);
    d->t->n += n;
    int32_t *q = d->al->p + d->al->n;
    for (size_t i = 0; i < n; i++) {
        q[2 * i] = as;
        q[2 * i + 1] = ae;
    }
    d->al->n += 2 * n;
    return 0;
}

/* appends bytes s[0..n) with their own alignments al (2 per byte) */
HOT int put_copy(stage *d, const uint8_t *s, const int32_t *al, size_t n) {
    if (d->t->n + n > d->t->cap && spm_bytes_reserve(d->t, d->t->n + n)) return -1;
    if (d->al->n + 2 * n > d->al->cap && spm_ints_reserve(d->al, d->al->n + 2 * n)) return -1;
    memcpy(d->t->p + d->t->n, s, n);
    memcpy(d->al->p + d->al->n, al, n * 8);
    d->t->n += n;
    d->al->n += 2 * n;
    return 0;
}

static size_t nchars(const uint8_t *s, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += (s[i] & 0xC0) != 0x80;
    return c;
}

/* tokenizers' spm_precompiled `replace`: the new characters take change 0, then the last `diff` of them 1
 * (inserted), or the last transformation so far takes the (negative) difference */
static int chg_replace(spm_ints *chg, const uint8_t *r, size_t rl, size_t k_old) {
    size_t k_new = 0;
    for (size_t i = 0; i < rl; i += u8len(r[i]), k_new++)
        if (iput2(chg, (int32_t)u8len(r[i]), 0)) return -1;
    const long diff = (long)k_new - (long)k_old;
    if (diff > 0) {
        for (long k = 0; k < diff; k++) chg->p[chg->n - 2 * (size_t)k - 1] = 1;
    } else if (diff < 0 && chg->n) {
        chg->p[chg->n - 1] += (int32_t)diff;
    }
    return 0;
}

/* Precompiled with alignments: 0, -1, 2 (the transformations step past the text: the reference path), or
 * 3 (nothing changes: the stage keeps its input) */
static int precompiled_al(const spm_hf *h, const spm_hf_op *op, spm_ints *chg, const uint8_t *s, const int32_t *al,
                          size_t n, stage *d) {
    chg->n = 0;
    int modified = 0;
    d->t->n = 0;
    if (spm_bytes_reserve(d->t, n + 16)) return -1;
    for (size_t i = 0; i < n;) {
        const size_t j = spm_hf_cluster_end(h, s, i, n);
        const uint8_t *r;
        size_t rl;
        if (j - i < 6 && (r = spm_hf_cm_transform(op, s + i, j - i, &rl))) {
            modified = 1;
            if (chg_replace(chg, r, rl, nchars(s + i, j - i))) return -1;
            if (d->t->n + rl > d->t->cap && spm_bytes_reserve(d->t, d->t->n + rl)) return -1;
            memcpy(d->t->p + d->t->n, r, rl);
            d->t->n += rl;
        } else {
            for (size_t k = i; k < j;) {
                const size_t lk = u8len(s[k]);
                r = spm_hf_cm_transform(op, s + k, lk, &rl);
                if (r) {
                    modified = 1;
                    if (chg_replace(chg, r, rl, 1)) return -1;
                } else {
                    r = s + k;
                    rl = lk;
                    if (iput2(chg, (int32_t)lk, 0)) return -1;
                }
                if (d->t->n + rl > d->t->cap && spm_bytes_reserve(d->t, d->t->n + rl)) return -1;
                memcpy(d->t->p + d->t->n, r, rl);
                d->t->n += rl;
                k += lk;
            }
        }
        i = j;
    }
    if (!modified) return 3;
    /* NormalizedString::transform_range over the whole text: a kept or replacing character takes the
     * alignment of the next original one, an inserted one that of the last original one passed ((0, 0)
     * before any); a negative change passes that many more */
    d->al->n = 0;
    if (spm_ints_reserve(d->al, 2 * d->t->n)) return -1;
    int32_t *q = d->al->p;
    size_t pb = 0;        /* the next original character's byte */
    size_t passed = 0;    /* original characters passed */
    int32_t ps = 0, pe = 0; /* the alignment of the last one passed */
    for (size_t k = 0; k < chg->n; k += 2) {
        const int32_t bl = chg->p[k], c = chg->p[k + 1];
        int32_t as, ae;
        if (c > 0) {
            if (passed && pb > n) return 2;
            as = passed ? ps : 0;
            ae = passed ? pe : 0;
        } else {
            if (pb >= n) return 2;
            as = ps = al[2 * pb];
            ae = pe = al[2 * pb + 1];
            pb += u8len(s[pb]);
            passed++;
            for (int32_t t = 0; t < -c; t++) { /* passed over: the alignment of the last one is kept */
                if (pb >= n) {
                    pb = n + 1;
                    break;
                }
                ps = al[2 * pb];
                pe = al[2 * pb + 1];
                pb += u8len(s[pb]);
                passed++;
            }
        }
        for (int32_t b = 0; b < bl; b++) {
            *q++ = as;
            *q++ = ae;
        }
    }
    d->al->n = (size_t)(q - d->al->p);
    return d->al->n == 2 * d->t->n ? 0 : 2;
}

/* Replace with a literal pattern (a) or a run of one character (c{k,} / c{k}): each match's content takes
 * the alignment of the match's last byte */
static int replace_al(const spm_hf_op *op, const uint8_t *s, const int32_t *al, size_t n, stage *d) {
    const size_t na = op->na;
    size_t i = 0, last = 0;
    d->t->n = 0;
    d->al->n = 0;
    if (!na) return put_copy(d, s, al, n);
    while (i + na <= n) {
        const uint8_t *q = (const uint8_t *)memchr(s + i, op->a[0], n - i - na + 1);
        if (!q) break;
        i = (size_t)(q - s);
        if (memcmp(s + i, op->a, na) != 0) {
            i++;
            continue;
        }
        if (op->kind == HFN_REPLACE) {
            const size_t e = i + na;
            if (put_copy(d, s + last, al + 2 * last, i - last) ||
                put_one(d, op->b, op->nb, al[2 * (e - 1)], al[2 * (e - 1) + 1]))
                return -1;
            i = e;
            last = e;
            continue;
        }
        size_t j = i, cnt = 0;
        while (j + na <= n && memcmp(s + j, op->a, na) == 0) {
            j += na;
            cnt++;
        }
        if (cnt >= op->k) {
            if (put_copy(d, s + last, al + 2 * last, i - last)) return -1;
            if (op->k_max) {
                const size_t reps = cnt / op->k, w = op->k * na;
                for (size_t r = 0; r < reps; r++) {
                    const size_t e = i + (r + 1) * w;
                    if (put_one(d, op->b, op->nb, al[2 * (e - 1)], al[2 * (e - 1) + 1])) return -1;
                }
                last = i + reps * w;
            } else {
                if (put_one(d, op->b, op->nb, al[2 * (j - 1)], al[2 * (j - 1) + 1])) return -1;
                last = j;
            }
        }
        i = j;
    }
    return put_copy(d, s + last, al + 2 * last, n - last);
}

/* White_Space (what Rust's char::is_whitespace reads) */
HOT int is_white(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 9 && c <= 13);
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
           c == 0x202F || c == 0x205F || c == 0x3000;
}

HOT int seg3(spm_ints *v, size_t st, size_t len, int32_t word) {
    return iput2(v, (int32_t)st, (int32_t)len) || iput(v, word);
}

/* the normalizer steps over in[0..n) with alignments (original characters counted from base): *out the
 * normalized text and its alignments (in w's buffers), *spare the other buffers.  0, -1 or 2 */
static int run_ops(const spm_hf *h, spm_hf_off_work *w, const uint8_t *in, size_t n, int32_t base, stage *out,
                   stage *spare) {
    /* the input: one alignment per character */
    w->la.n = 0;
    if (spm_ints_reserve(&w->la, 2 * n + 2)) return -1;
    {
        int32_t c = base - 1;
        for (size_t i = 0; i < n; i++) {
            c += (in[i] & 0xC0) != 0x80;
            w->la.p[2 * i] = c;
            w->la.p[2 * i + 1] = c + 1;
        }
        w->la.n = 2 * n;
    }
    w->a.n = 0;
    if (spm_bytes_reserve(&w->a, n + 1)) return -1;
    memcpy(w->a.p, in, n);
    w->a.n = n;
    stage cur = {&w->a, &w->la}, nxt = {&w->b, &w->lb};
    for (int k = 0; k < h->n_ops; k++) {
        const spm_hf_op *op = &h->ops[k];
        const uint8_t *s = cur.t->p;
        const int32_t *al = cur.al->p;
        const size_t cn = cur.t->n;
        int r = 0;
        nxt.t->n = 0;
        nxt.al->n = 0;
        switch (op->kind) {
        case HFN_PRECOMPILED: r = precompiled_al(h, op, &w->chg, s, al, cn, &nxt); break;
        case HFN_REPLACE:
        case HFN_REPLACE_RUN: r = replace_al(op, s, al, cn, &nxt); break;
        case HFN_PREPEND:
            if (!cn) {
                r = 3;
                break;
            }
            r = put_one(&nxt, op->a, op->na, al[0], al[1]) || put_copy(&nxt, s, al, cn);
            break;
        default: r = -1;
        }
        if (r == 3) continue;
        if (r) return r;
        const stage t = cur;
        cur = nxt;
        nxt = t;
    }
    *out = cur;
    *spare = nxt;
    return 0;
}

int spm_hf_first_start(const spm_hf *h, const uint8_t *in, size_t n, int32_t base, int32_t *start) {
    spm_hf_off_work *w = spm_hf_off_work_new();
    if (!w) return -1;
    stage cur, nxt;
    const int r = run_ops(h, w, in, n, base, &cur, &nxt);
    if (!r) *start = cur.t->n ? cur.al->p[0] : -1;
    spm_hf_off_work_free(w);
    return r;
}

int spm_hf_encode_offsets(const spm_model *m, spm_hf *h, spm_hf_off_work *w, const int32_t *span, size_t n_span,
                          const uint8_t *in, size_t n, int32_t base, spm_ints *ids, spm_ints *off, spm_ints *word,
                          int32_t *words, spm_ints *nsp, const spm_bytes **norm) {
    stage cur, nxt;
    const int ro = run_ops(h, w, in, n, base, &cur, &nxt);
    if (ro) return ro;
    w->segs.n = 0;
    int32_t wd = *words;
    if (h->pre == HFP_METASPACE) {
        const uint8_t *s = cur.t->p;
        const int32_t *al = cur.al->p;
        const size_t cn = cur.t->n;
        nxt.t->n = 0;
        nxt.al->n = 0;
        if (cn) {
            /* Metaspace's "first" scheme reads the original start of the text it gets */
            const int at_start = al[0] == 0;
            const int pre = h->scheme == HFM_ALWAYS || (h->scheme == HFM_FIRST && at_start);
            const int starts_rep = s[0] == ' ' || (cn >= h->nrep && memcmp(s, h->rep, h->nrep) == 0);
            if (pre && !starts_rep && put_one(&nxt, h->rep, h->nrep, al[0], al[1])) return -1;
            size_t last = 0;
            for (size_t i = 0; i < cn; i++) {
                if (s[i] != ' ') continue;
                if (put_copy(&nxt, s + last, al + 2 * last, i - last) ||
                    put_one(&nxt, h->rep, h->nrep, al[2 * i], al[2 * i + 1]))
                    return -1;
                last = i + 1;
            }
            if (put_copy(&nxt, s + last, al + 2 * last, cn - last)) return -1;
        }
        const stage t = cur;
        cur = nxt;
        nxt = t;
        const uint8_t *q = cur.t->p;
        const size_t qn = cur.t->n;
        if (qn) {
            if (!h->split) {
                if (seg3(&w->segs, 0, qn, wd++)) return -1;
            } else {
                size_t st = 0;
                const uint8_t r0 = h->rep[0];
                for (size_t i = 0; i + h->nrep <= qn;) {
                    if (q[i] == r0 && memcmp(q + i, h->rep, h->nrep) == 0) {
                        if (i > st && seg3(&w->segs, st, i - st, wd++)) return -1;
                        st = i;
                        i += h->nrep;
                    } else {
                        i += u8len(q[i]);
                    }
                }
                if (qn > st && seg3(&w->segs, st, qn - st, wd++)) return -1;
            }
        }
    } else if (h->pre == HFP_WHITESPACE_SPLIT) {
        const uint8_t *q = cur.t->p;
        const size_t qn = cur.t->n;
        size_t st = 0;
        int in_word = 0;
        for (size_t i = 0; i < qn;) {
            const size_t l = u8len(q[i]);
            const int white = is_white(u8cp(q + i, l));
            if (white && in_word) {
                if (seg3(&w->segs, st, i - st, wd++)) return -1;
                in_word = 0;
            } else if (!white && !in_word) {
                st = i;
                in_word = 1;
            }
            i += l;
        }
        if (in_word && seg3(&w->segs, st, qn - st, wd++)) return -1;
    } else if (cur.t->n) {
        /* one word; the BPE text is cut before each word separator (no merge crosses one) */
        const uint8_t *q = cur.t->p;
        const size_t qn = cur.t->n;
        if (h->nwsep) {
            const size_t ns = h->nwsep;
            const uint8_t w0 = h->wsep[0];
            size_t st = 0;
            int prev_sep = 1;
            for (size_t i = 0; i < qn;) {
                const int sep = q[i] == w0 && i + ns <= qn && memcmp(q + i, h->wsep, ns) == 0;
                if (sep && !prev_sep) {
                    if (seg3(&w->segs, st, i - st, wd)) return -1;
                    st = i;
                }
                prev_sep = sep;
                i += sep ? ns : u8len(q[i]);
            }
            if (seg3(&w->segs, st, qn - st, wd)) return -1;
        } else if (seg3(&w->segs, 0, qn, wd)) {
            return -1;
        }
        wd++;
    }
    *words = wd;
    *norm = cur.t;
    const uint8_t *q = cur.t->p;
    const int32_t *al = cur.al->p;
    for (size_t k = 0; k < w->segs.n; k += 3) {
        const size_t ps = (size_t)w->segs.p[k], pn = (size_t)w->segs.p[k + 1];
        const int32_t pw = w->segs.p[k + 2];
        const size_t b0 = ids->n;
        int rc = spm_hf_piece_ids(m, h, w->sc, q + ps, pn, ids);
        if (rc) return rc;
        /* the spans from the ids where each id covers a fixed length, else from the model itself */
        size_t at = 0;
        int fixed = 1;
        for (size_t t = b0; t < ids->n && fixed; t++) {
            const int32_t id = ids->p[t];
            const int32_t l = id >= 0 && (size_t)id < n_span ? span[id] : -1;
            if (l <= 0) fixed = 0;
            at += (size_t)l;
        }
        w->sp.n = 0;
        if (fixed && at == pn) {
            at = 0;
            for (size_t t = b0; t < ids->n; t++) {
                const size_t l = (size_t)span[ids->p[t]];
                if (iput2(&w->sp, (int32_t)at, (int32_t)(at + l))) return -1;
                at += l;
            }
        } else {
            ids->n = b0;
            rc = spm_hf_piece_spans(m, h, w->sc, q + ps, pn, ids, &w->sp);
            if (rc) return rc;
            if (w->sp.n != 2 * (ids->n - b0)) return 2;
        }
        const size_t nt = ids->n - b0;
        if (spm_ints_reserve(off, off->n + 2 * nt) || spm_ints_reserve(nsp, nsp->n + 2 * nt) || spm_ints_reserve(word, word->n + nt))
            return -1;
        for (size_t t = 0; t < nt; t++) {
            const size_t bs = ps + (size_t)w->sp.p[2 * t], be = ps + (size_t)w->sp.p[2 * t + 1];
            if (be > bs && be <= ps + pn) {
                off->p[off->n++] = al[2 * bs];
                off->p[off->n++] = al[2 * (be - 1) + 1];
            } else if (be == bs && bs <= ps + pn) {
                off->p[off->n++] = al[2 * ps];
                off->p[off->n++] = al[2 * ps];
            } else {
                return 2;
            }
            nsp->p[nsp->n++] = (int32_t)bs;
            nsp->p[nsp->n++] = (int32_t)be;
            word->p[word->n++] = pw;
        }
    }
    return 0;
}
