/* fstok regex DFA spanner (see dfa.h).  The pure-Python reference of every function here is in
 * fstok/compile/regex_dfa.py (`reference_match`) and fstok/pretokenize.py (`reference_spans`). */
#include "dfa.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif


/* st = T[st + C[byte]] with the class's column computed first, off the chain of dependent loads: the chain is
 * one load per byte with base + scaled index addressing and no add (the empty asm keeps the compiler from
 * folding the two additions back into st + class).  DFA alone, o200k english: 0.88 -> 0.76 ns/byte. */
#if defined(__GNUC__)
#define DFA_STEP(T, C, st, byte)                        \
    do {                                                \
        const uint32_t *col_ = (T) + (C)[byte];         \
        __asm__("" : "+r"(col_));                       \
        (st) = col_[st];                                \
    } while (0)
#else
#define DFA_STEP(T, C, st, byte) ((st) = (T)[(st) + (C)[byte]])
#endif

/* Every piece end strictly after the previous one (the proof of fstok/validate_dfa.py, again at attach time).
 * dist[s]: the fewest bytes of a piece read on arriving in s (exact below 16, else 16); min_in[s]: the least
 * dist of a state with a byte edge into s.  A boundary state ends its piece g bytes back: g < min_in; an accept
 * code a gives back a - 1 bytes: a <= the bytes read; the end-of-input step reads the whole accept byte. */
static int progress_check(const fstok_dfa *d, char *err, size_t errlen) {
    const uint32_t n = d->n_states, sh = d->shift, stride = 1u << sh, nb = (d->live >> sh) - 1;
    uint8_t used[512] = {0};
    for (int b = 0; b < 256; b++) used[d->classes[b]] = 1;
    uint8_t *dist = (uint8_t *)malloc(n), *min_in = (uint8_t *)malloc(n);
    int rc = 0;
    if (!dist || !min_in) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        rc = -1;
        goto done;
    }
    memset(dist, 16, n);
    memset(min_in, 16, n);
    for (uint32_t k = 1; k <= nb; k++) dist[k] = (uint8_t)((d->accept[k] >> FSTOK_DFA_GB_SHIFT) + 1);
    dist[d->start >> sh] = 0;
    for (uint32_t lv = 0; lv < 16; lv++)
        for (uint32_t s = 0; s < n; s++) {
            if (dist[s] != lv) continue;
            const uint32_t *row = d->trans + (size_t)s * stride;
            for (uint32_t c = 0; c < stride; c++) {
                if (!used[c]) continue;
                uint32_t t = row[c] >> sh;
                if (min_in[t] > lv) min_in[t] = (uint8_t)lv;
                if (t > nb && dist[t] > lv + 1) dist[t] = (uint8_t)(lv + 1);
            }
        }
    for (uint32_t t = 1; t < n && !rc; t++) {
        uint32_t a = d->accept[t], lo = a & 15, g = a >> FSTOK_DFA_GB_SHIFT;
        if (t <= nb ? (g + 1 > min_in[t] || lo > g + 1) : (min_in[t] < 16 && lo > (uint32_t)min_in[t] + 1)) {
            if (err && errlen) snprintf(err, errlen, "accept code %#x of state %u ends a piece at or before its start", a, t);
            rc = -1;
        }
    }
    for (uint32_t s = 0; s < n && !rc; s++) {
        uint32_t e = d->trans[(size_t)s * stride + d->eoi] >> sh;
        if (e && d->accept[e] > (dist[s] > 1 ? dist[s] : 1u)) {
            if (err && errlen) snprintf(err, errlen, "end-of-input target %u of state %u ends a piece at or before its start", e, s);
            rc = -1;
        }
    }
done:
    free(dist);
    free(min_in);
    return rc;
}

int fstok_dfa_check(const fstok_dfa *d, char *err, size_t errlen) {
#define FAIL(...)                                  \
    do {                                           \
        if (err && errlen) snprintf(err, errlen, __VA_ARGS__); \
        return -1;                                 \
    } while (0)
    if (!d || !d->trans || !d->classes || !d->accept) FAIL("null table");
    if (d->shift > 9) FAIL("row stride 2^%u is too large", d->shift);
    if (d->n_states < 2 || d->n_states > (UINT32_MAX >> d->shift)) FAIL("bad state count %u", d->n_states);
    uint32_t stride = 1u << d->shift;
    if (d->eoi >= stride) FAIL("EOI class %u outside the row stride %u", d->eoi, stride);
    uint64_t total = (uint64_t)d->n_states << d->shift;
    uint32_t mask = stride - 1;
    for (uint64_t k = 0; k < total; k++) {
        uint32_t t = d->trans[k];
        if ((t & mask) || (t >> d->shift) >= d->n_states) FAIL("transition %llu -> %u out of range", (unsigned long long)k, t);
    }
    for (uint32_t k = 0; k < stride; k++)
        if (d->trans[k] != 0) FAIL("the dead state (0) is not absorbing");
    for (int b = 0; b < 256; b++)
        if (d->classes[b] >= d->eoi) FAIL("byte %d has class %u >= EOI class %u", b, d->classes[b], d->eoi);
    uint32_t n_gb = (d->gbl >> d->shift) - 1;
    for (uint32_t k = 0; k < d->n_states; k++) {
        uint32_t a = d->accept[k], g = a >> FSTOK_DFA_GB_SHIFT;
        if ((a & 15) > 5) FAIL("accept code %u of state %u out of range", a, k);
        if ((g != 0) != (k >= 1 && k <= n_gb)) FAIL("give-back %u of state %u outside the give-back boundary states", g, k);
    }
    if (d->accept[0]) FAIL("the dead state accepts");
    if (d->live == 0 || (d->live & mask) || (d->live >> d->shift) >= d->n_states) FAIL("bad live boundary %u", d->live);
    if (d->gbl == 0 || (d->gbl & mask) || d->gbl > d->live) FAIL("bad give-back boundary %u", d->gbl);
    if (d->start < d->live || (d->start & mask) || (d->start >> d->shift) >= d->n_states) FAIL("bad start state %u", d->start);
    if (progress_check(d, err, errlen)) return -1;
    return 0;
#undef FAIL
}

size_t fstok_dfa_match(const fstok_dfa *d, const uint8_t *s, size_t n, size_t pos) {
    const uint32_t *T = d->trans;
    const uint8_t *C = d->classes;
    const uint8_t *A = d->accept;
    const uint32_t sh = d->shift, live = d->live;
    uint32_t st = d->start;
    size_t last = FSTOK_DFA_NOMATCH;
    size_t i = pos;
    /* One load per byte on the critical path; the accept lookup is off it.  A state that a byte's class leads
     * back to itself stays there for the rest of a run of that class (digit runs under r50k's \p{N}+, one
     * 100k-byte piece: the anchored match walked it at one dependent load per byte): the run is skipped by
     * comparing classes, which do not depend on each other, and `last` moves to its end (same state, same
     * accept, so the same formula as byte by byte). */
    while (FSTOK_LIKELY(i < n)) {
        const uint32_t c = C[s[i]], prev = st;
        st = T[st + c];
        i++;
        if (FSTOK_UNLIKELY(st < live)) return last; /* dead, or boundary: the match is final */
        if (FSTOK_UNLIKELY(st == prev))
            while (i < n && C[s[i]] == c) i++;
        uint32_t a = A[st >> sh];
        if (a) last = i - (a - 1);
    }
    st = T[st + d->eoi];
    if (st) {
        uint32_t a = A[st >> sh];
        if (a) last = n - (a - 1);
    }
    return last;
}

/* First position >= pos where a match could start: the start state does not die on its byte.
 * (Continuation bytes always kill the start state, so this only stops at character starts.)  Where few ASCII
 * bytes start a match (d->skip_n: a level that cuts out digits or a script), 16 bytes at a time: a block whose
 * bytes are all ASCII outside the start ranges is skipped, and only its other bytes are looked up. */
static inline size_t skip_to_candidate(const fstok_dfa *d, const uint8_t *s, size_t n, size_t pos) {
    const uint32_t *T0 = d->trans + d->start;
    const uint8_t *C = d->classes;
#if defined(__SSE2__)
    if (d->skip_n) {
        __m128i lo[4], w[4];
        const uint32_t nr = d->skip_n;
        for (uint32_t r = 0; r < nr; r++) {
            lo[r] = _mm_set1_epi8((char)d->skip_lo[r]);
            w[r] = _mm_set1_epi8((char)d->skip_w[r]);
        }
        const __m128i zero = _mm_setzero_si128();
        while (pos + 16 <= n) {
            const __m128i x = _mm_loadu_si128((const __m128i *)(s + pos));
            __m128i hit = _mm_cmplt_epi8(x, zero); /* bytes >= 0x80 */
            for (uint32_t r = 0; r < nr; r++) {    /* x - lo <= w (unsigned): x in the range */
                const __m128i t = _mm_sub_epi8(x, lo[r]);
                hit = _mm_or_si128(hit, _mm_cmpeq_epi8(_mm_min_epu8(t, w[r]), t));
            }
            unsigned mask = (unsigned)_mm_movemask_epi8(hit);
            while (mask) {
                const size_t q = pos + (size_t)__builtin_ctz(mask);
                if (T0[C[s[q]]] != 0) return q;
                mask &= mask - 1;
            }
            pos += 16;
        }
    }
#endif
    while (pos < n && T0[C[s[pos]]] == 0) pos++;
    return pos;
}

size_t fstok_dfa_next_span(const fstok_dfa *d, const uint8_t *s, size_t n, size_t pos, size_t *start) {
    while ((pos = skip_to_candidate(d, s, n, pos)) < n) {
        size_t e = fstok_dfa_match(d, s, n, pos);
        if (e != FSTOK_DFA_NOMATCH) {
            *start = pos;
            return e;
        }
        pos++;
    }
    return FSTOK_DFA_NOMATCH;
}

size_t fstok_dfa_find_all(const fstok_dfa *d, const uint8_t *s, size_t n, size_t *pos, size_t *out, size_t cap) {
    const uint32_t *T = d->trans;
    const uint8_t *C = d->classes;
    const uint8_t *A = d->accept;
    const uint32_t sh = d->shift;
    const uint32_t nb = d->live - (1u << sh); /* boundary states are the ids in (0, nb] */
    const uint32_t gbl = d->gbl;              /* dead or give-back boundary: below it */
    size_t k = 0, p = *pos;
    while (k < cap && (p = skip_to_candidate(d, s, n, p)) < n) {
        /* one run: from a piece start p, as long as pieces end without backtracking */
        uint32_t st = d->start;
        size_t tok = p, last = FSTOK_DFA_NOMATCH, i = p;
        for (; i < n; i++) {
            if (FSTOK_UNLIKELY(k >= cap)) break;
            DFA_STEP(T, C, st, s[i]);
            size_t isb = (uint32_t)(st - 1u) < nb; /* a piece [tok, i) ended before byte i */
            out[2 * k] = tok;                      /* written always, kept only if isb */
            out[2 * k + 1] = i;
            k += isb;
            tok = isb ? i : tok;
            last = isb ? FSTOK_DFA_NOMATCH : last;
            uint32_t a = A[st >> sh];
            last = a ? i + 2 - a : last; /* match ends at i + 1 - (a - 1) */
            if (FSTOK_UNLIKELY(st < gbl)) {
                if (st == 0) break;
                size_t e = i - (a >> FSTOK_DFA_GB_SHIFT); /* the piece ended g bytes back */
                out[2 * k - 1] = e;
                tok = e;
                /* the new piece's last accept among its first g + 1 bytes (the state alone does not say) */
                uint32_t s2 = d->start;
                last = FSTOK_DFA_NOMATCH;
                for (size_t j = e; j <= i; j++) {
                    DFA_STEP(T, C, s2, s[j]);
                    uint32_t a2 = A[s2 >> sh] & 15;
                    last = a2 ? j + 2 - a2 : last;
                }
            }
        }
        if (k >= cap) {
            p = tok; /* resume at the unfinished piece */
            break;
        }
        if (i >= n) { /* end of text: the EOI transition (`$`, lookahead at the end) */
            uint32_t e = T[st + d->eoi];
            if (e) {
                uint32_t a = A[e >> sh];
                if (a) last = n - (a - 1);
            }
        }
        /* dead (or end of text): the piece is [tok, last), then continue after it */
        if (last != FSTOK_DFA_NOMATCH) {
            out[2 * k] = tok;
            out[2 * k + 1] = last;
            k++;
            p = last;
        } else { /* no match starts at tok: go on at the next byte a match could start with */
            p = skip_to_candidate(d, s, n, tok + 1);
        }
    }
    if (p > n) p = n;
    *pos = p;
    return k;
}

/* Two walks at once (fstok_dfa_find_ends' windows of >= DUAL_MIN bytes).  One walk is a chain of dependent
 * loads (state -> next state), ~5 cycles a byte; two walks over the two halves of a window interleave their
 * chains.  Walk A runs from the window start p exactly as the serial loop would.  Walk B runs the same
 * algorithm from q0 (a character start near the middle) as if a piece began there, and stores its piece ends
 * in bufB.  Then A goes on past q0 beside a replay R of B from q0: as soon as A and R are at the same byte in
 * the same state, every later decision of A would be B's (the DFA is deterministic), so A's ends before that
 * byte plus B's ends from there on are exactly the serial loop's.  They meet at the first piece boundary after
 * q0 in practice (a few bytes); if they never meet, A has simply walked the whole window itself.  A death (the
 * DFA died: the piece needs backtracking) is resolved in either walk as the serial code does, by the anchored
 * match of the unfinished piece; the walk goes on from its end in the start state. */
#define DUAL_MIN 64    /* windows shorter than this are walked serially */
#define DUAL_MAXB 1024 /* walk B covers at most this many bytes (bufB) */

enum { DUAL_DONE, DUAL_DEAD, DUAL_SERIAL };

/* A walk read byte i and reached st < gbl (dead or a give-back boundary state).  Give-back: move the end it
 * just wrote back.  Death: the anchored match of the unfinished piece (from the walk's last end E[*k - 1], or
 * `from` if it has none since index lo) is a piece; the walk restarts after it.  Returns the walk's next byte,
 * or FSTOK_DFA_NOMATCH when no match starts at the unfinished piece. */
static size_t walk_rare(const fstok_dfa *d, const uint8_t *s, size_t n, size_t i, uint32_t *st, size_t *E, size_t *k,
                        size_t lo, size_t from) {
    if (*st) {
        E[*k - 1] = i - (d->accept[*st >> d->shift] >> FSTOK_DFA_GB_SHIFT); /* ended g bytes back */
        return i + 1;
    }
    size_t e = fstok_dfa_match(d, s, n, *k > lo ? E[*k - 1] : from);
    if (e == FSTOK_DFA_NOMATCH) return e;
    E[(*k)++] = e;
    *st = d->start;
    return e;
}

/* One window [p, lim) with two walks; ends[*kio..] as in the serial loop.  DUAL_DONE: the window is walked
 * (*ip = lim; a last piece may end past it); DUAL_DEAD: walk A died reading byte *ip and no match starts at its
 * unfinished piece (the caller's serial tail finds that again); DUAL_SERIAL: no match starts at B's unfinished
 * piece, so go on with the serial loop at byte *ip in state *stp.  Needs 2 <= lim - p <= 2 * DUAL_MAXB. */
static int dual_window(const fstok_dfa *d, const uint8_t *s, size_t n, size_t p, size_t lim, size_t *ends, size_t *kio,
                       size_t *ip, uint32_t *stp) {
    const uint32_t *T = d->trans;
    const uint8_t *C = d->classes;
    const uint32_t nb = d->live - (1u << d->shift);
    const uint32_t gbl = d->gbl;
    size_t bufB[DUAL_MAXB + 1]; /* B's ends: distinct positions in (q0, lim], and one past lim after a death */
    size_t q0 = p + (lim - p + 1) / 2;
    while (q0 < lim && (s[q0] & 0xC0) == 0x80) q0++; /* B starts on a character */
    const size_t k0 = *kio;
    uint32_t sa = d->start, sb = d->start;
    size_t ka = k0, kb = 0, ia = p, ib = q0;
    /* phase 1: A in [p, q0) and B in [q0, lim), interleaved */
    while (ia < q0 && ib < lim) {
        size_t m = q0 - ia < lim - ib ? q0 - ia : lim - ib, t = 0;
        const uint8_t *pa = s + ia, *pb = s + ib;
        for (; t < m; t++) {
            DFA_STEP(T, C, sa, pa[t]);
            DFA_STEP(T, C, sb, pb[t]);
            ends[ka] = ia + t;
            ka += (uint32_t)(sa - 1u) < nb;
            bufB[kb] = ib + t;
            kb += (uint32_t)(sb - 1u) < nb;
            if (FSTOK_UNLIKELY((sa < gbl) | (sb < gbl))) break;
        }
        if (FSTOK_LIKELY(t == m)) {
            ia += m;
            ib += m;
            continue;
        }
        if (sa < gbl) {
            size_t nx = walk_rare(d, s, n, ia + t, &sa, ends, &ka, k0, p);
            if (nx == FSTOK_DFA_NOMATCH) {
                *kio = ka;
                *ip = ia + t;
                return DUAL_DEAD;
            }
            ia = nx;
        } else {
            ia += t + 1;
        }
        if (sb < gbl) {
            size_t nx = walk_rare(d, s, n, ib + t, &sb, bufB, &kb, 0, q0);
            if (nx == FSTOK_DFA_NOMATCH) { /* B is no use: A goes on serially */
                *kio = ka;
                *ip = ia;
                *stp = sa;
                return DUAL_SERIAL;
            }
            ib = nx;
        } else {
            ib += t + 1;
        }
    }
    /* A's deaths can take it past q0 before B is done: B walks the rest of its half alone */
    while (ib < lim && ia < lim) {
        DFA_STEP(T, C, sb, s[ib]);
        bufB[kb] = ib;
        kb += (uint32_t)(sb - 1u) < nb;
        if (FSTOK_UNLIKELY(sb < gbl)) {
            size_t nx = walk_rare(d, s, n, ib, &sb, bufB, &kb, 0, q0);
            if (nx == FSTOK_DFA_NOMATCH) {
                *kio = ka;
                *ip = ia;
                *stp = sa;
                return DUAL_SERIAL;
            }
            ib = nx;
        } else {
            ib++;
        }
    }
    /* phase 2: A alone up to q0 (B finished first), then beside the replay R of B until they meet */
    uint32_t sr = d->start;
    size_t ir = q0, c = 0; /* R's next byte, and the number of B's ends R has passed */
    while (ia < lim) {
        const int a_steps = ia <= ir, r_steps = ir <= ia; /* the one behind steps; both when beside */
        if (a_steps) {
            DFA_STEP(T, C, sa, s[ia]);
            ends[ka] = ia;
            ka += (uint32_t)(sa - 1u) < nb;
            size_t nx = ia + 1;
            if (FSTOK_UNLIKELY(sa < gbl)) {
                nx = walk_rare(d, s, n, ia, &sa, ends, &ka, k0, p);
                if (nx == FSTOK_DFA_NOMATCH) {
                    *kio = ka;
                    *ip = ia;
                    return DUAL_DEAD;
                }
            }
            ia = nx;
        }
        if (r_steps) {
            DFA_STEP(T, C, sr, s[ir]);
            size_t rx = ir + 1;
            if ((uint32_t)(sr - 1u) < nb) c++;
            if (FSTOK_UNLIKELY(sr == 0)) { /* B resolved this death: its next end is the match */
                rx = bufB[c];
                c++;
                sr = d->start;
            }
            ir = rx;
        }
        if (ia == ir && sa == sr) { /* met: from byte ia on, A's decisions are B's: bufB[c..kb) */
            memcpy(ends + ka, bufB + c, (kb - c) * sizeof(size_t));
            ka += kb - c;
            break;
        }
    }
    *kio = ka;
    *ip = lim;
    return DUAL_DONE;
}

size_t fstok_dfa_find_ends(const fstok_dfa *d, const uint8_t *s, size_t n, size_t *pos, size_t *ends, size_t cap) {
    const uint32_t *T = d->trans;
    const uint8_t *C = d->classes;
    const uint32_t nb = d->live - (1u << d->shift); /* boundary states are the ids in (0, nb] */
    const uint32_t gbl = d->gbl;                    /* dead or give-back boundary: below it */
    size_t k = 0, p = *pos;
    while (k < cap && p < n) {
        /* A byte ends at most one piece, so a window of cap - k bytes cannot overflow ends[]; a death
         * at byte i leaves k <= k0 + (i - p) < cap, room for the piece found by the anchored match. */
        size_t k0 = k, i = p;
        size_t lim = (n - p <= cap - k) ? n : p + (cap - k);
        int clamped = 0;
        uint32_t st = d->start;
        if (lim - p >= DUAL_MIN) {
            if (lim - p > 2 * DUAL_MAXB) { /* a window walk B can hold; then go on from its last piece end */
                lim = p + 2 * DUAL_MAXB;
                clamped = 1;
            }
            int r = dual_window(d, s, n, p, lim, ends, &k, &i, &st);
            if (r != DUAL_SERIAL) goto window_end;
        }
        for (; i < lim; i++) {
            DFA_STEP(T, C, st, s[i]);
            ends[k] = i;                            /* kept only if a piece ended before byte i */
            k += (uint32_t)(st - 1u) < nb;
            if (FSTOK_UNLIKELY(st < gbl)) {
                if (st == 0) break;
                ends[k - 1] = i - (d->accept[st >> d->shift] >> FSTOK_DFA_GB_SHIFT); /* ended g bytes back */
            }
        }
    window_end:;
        size_t tok = k > k0 ? ends[k - 1] : p;      /* start of the unfinished piece */
        if (i < lim || lim == n) {                  /* dead, or end of text: its match, anchored */
            size_t e = fstok_dfa_match(d, s, n, tok);
            if (e == FSTOK_DFA_NOMATCH) {
                p = tok;                            /* no match starts here: the caller skips */
                break;
            }
            ends[k++] = e;
            p = e;
            continue;
        }
        /* window full: resume at the unfinished piece (a piece longer than the window: match it) */
        if (k == k0) {
            size_t e = fstok_dfa_match(d, s, n, tok);
            if (e == FSTOK_DFA_NOMATCH) {
                p = tok;
                break;
            }
            ends[k++] = e;
            p = e;
            continue;
        }
        p = tok;
        if (clamped) continue; /* room is left: the next window starts at the unfinished piece */
        break;
    }
    *pos = p;
    return k;
}

static int grow(size_t **ends, size_t *cap, size_t need) {
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    size_t *nd = (size_t *)realloc(*ends, nc * sizeof(size_t));
    if (!nd) return -1;
    *ends = nd;
    *cap = nc;
    return 0;
}

static int push_end(size_t **ends, size_t *len, size_t *cap, size_t v) {
    if (*len == *cap && grow(ends, cap, *len + 1)) return -1;
    (*ends)[(*len)++] = v;
    return 0;
}

/* split s[lo..hi) with levels[0..] ; offsets are absolute */
static int split_rec(const fstok_dfa *levels, int n_levels, const uint8_t *s, size_t lo, size_t hi,
                     size_t **ends, size_t *len, size_t *cap) {
    if (lo >= hi) return 0;
    if (n_levels == 0) return push_end(ends, len, cap, hi);
    const fstok_dfa *d = &levels[0];
    const uint8_t *base = s + lo;
    size_t n = hi - lo, p = 0, q = 0;
    size_t buf[2 * 64];
    while (q < n) {
        size_t got = fstok_dfa_find_all(d, base, n, &q, buf, 64);
        if (n_levels == 1) { /* last level: the pieces are final */
            if (*cap - *len < 2 * got && grow(ends, cap, *len + 2 * got)) return -1;
            size_t *out = *ends + *len;
            for (size_t j = 0; j < got; j++) {
                size_t b = buf[2 * j], e = buf[2 * j + 1];
                *out = lo + b; /* a gap before the match, kept only if non-empty */
                out += b > p;
                *out++ = lo + e;
                p = e;
            }
            *len = (size_t)(out - *ends);
            continue;
        }
        for (size_t j = 0; j < got; j++) {
            size_t b = buf[2 * j], e = buf[2 * j + 1];
            if (b > p && split_rec(levels + 1, n_levels - 1, s, lo + p, lo + b, ends, len, cap)) return -1;
            if (split_rec(levels + 1, n_levels - 1, s, lo + b, lo + e, ends, len, cap)) return -1;
            p = e;
        }
    }
    if (p < n && split_rec(levels + 1, n_levels - 1, s, lo + p, hi, ends, len, cap)) return -1;
    return 0;
}

int fstok_dfa_split_isolated(const fstok_dfa *levels, int n_levels, const uint8_t *s, size_t n,
                             size_t **ends, size_t *len, size_t *cap) {
    return split_rec(levels, n_levels, s, 0, n, ends, len, cap);
}
