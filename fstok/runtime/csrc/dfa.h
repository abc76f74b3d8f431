/* fstok regex DFA spanner: the C API.
 *
 * A pre-tokenization regex (tiktoken's r50k/p50k/cl100k/o200k patterns, HF Split/ByteLevel
 * regexes, ...) is compiled ahead of time by fstok/compile/regex_*.py into a leftmost-first
 * byte DFA.  This file runs it.  No globals, thread-safe (the tables are read-only), no
 * allocation except fstok_dfa_split_isolated's output array, no Python: mod_dfa.c is the Python binding, and other modules (mod_bpe.c) include
 * this header and call these functions directly.  Compile lib_dfa.c into the extension with a
 * line  / * fstok-lib: dfa * /  (without the spaces) in the module source.
 *
 * Tables (straight from the artifact sections "<prefix><level>.trans" etc., see
 * fstok/pretokenize.py `dfa_sections`; validated by the Python loader and by fstok_dfa_check):
 *
 *   trans    uint32[n_states << shift]  premultiplied transitions: a state id is its row offset
 *                                       (index << shift); next = trans[state + classes[byte]].
 *                                       State 0 is the dead state (its row is all 0).
 *   classes  uint8[256]                 byte -> class (< eoi)
 *   accept   uint8[n_states]            by state index (state >> shift); low nibble: 0 = not
 *                                       accepting, 1 + g = a match ends g bytes before the current
 *                                       position (g > 0 only for a one-character lookahead such as
 *                                       `\s+(?!\S)`: the character read to test it is given back);
 *                                       high nibble: see the give-back boundary states below
 *   start    premultiplied start state (non-zero)
 *   eoi      the end-of-input class: taken once at the end of the text (for `$`, `(?!\S)` at EOF)
 *   live     premultiplied id of the first ordinary state = (n_boundary + 1) << shift.  States
 *            1..n_boundary are *boundary states*: an accepting state whose match is final (the
 *            next byte kills every thread) goes straight on to the state the next piece reaches
 *            with that byte, through a boundary state that says "a piece ended just before the
 *            byte just read".  The bulk functions use them to run without data-dependent
 *            branches; an anchored match stops at any state below `live` (dead or boundary).
 *            States 1..n_giveback (the first boundary states, accept >> 4 = g >= 1) say "the piece
 *            ended g bytes before the byte just read" (an Indic letter's piece ends before a
 *            combining mark, but the DFA knows it only at the mark's last byte); the bulk loops
 *            take them on the same rare branch as the dead state (`st < gbl`) and move the end
 *            back.  n_giveback is not stored: fstok_dfa_init counts the leading states whose
 *            accept byte has a high nibble.
 *
 * Semantics: leftmost-first (Perl / Rust regex / Oniguruma priority order), exactly the engine
 * the pattern was compiled for.  Input is UTF-8; invalid UTF-8 simply does not match.
 */
#ifndef FSTOK_DFA_H
#define FSTOK_DFA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FSTOK_DFA_NOMATCH ((size_t)-1)

/* branch hints for the hot loops of the runtimes that include this header */
#if defined(__GNUC__)
#define FSTOK_LIKELY(x) __builtin_expect(!!(x), 1)
#define FSTOK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define FSTOK_LIKELY(x) (x)
#define FSTOK_UNLIKELY(x) (x)
#endif

typedef struct fstok_dfa {
    const uint32_t *trans;   /* [n_states << shift] premultiplied next states */
    const uint8_t *classes;  /* [256] */
    const uint8_t *accept;   /* [n_states] 0 or 1 + give-back bytes */
    uint32_t n_states;       /* number of states (rows) */
    uint32_t shift;          /* row stride = 1 << shift (>= number of classes incl. EOI) */
    uint32_t start;          /* premultiplied start state */
    uint32_t eoi;            /* end-of-input class */
    uint32_t live;           /* (n_boundary + 1) << shift: states below it end an anchored match */
    uint32_t gbl;            /* (n_giveback + 1) << shift: states below it are dead or give-back boundary */
    /* the ASCII bytes a match can start with (the start state does not die on them), as skip_n <= 4 byte
     * ranges [skip_lo[r], skip_lo[r] + skip_w[r]]; skip_n = 0: no fast skip (many such bytes) */
    uint32_t skip_n;
    uint8_t skip_lo[4], skip_w[4];
} fstok_dfa;

#define FSTOK_DFA_GB_SHIFT 4 /* accept >> 4: a boundary state's give-back */

/* Fill a fstok_dfa from the artifact arrays and the `<prefix><i>.info` values
 * [layout=1, n_states, n_classes, shift, start, eoi, n_boundary]; then call fstok_dfa_check. */
static inline void fstok_dfa_init(fstok_dfa *d, const uint32_t *trans, const uint8_t *classes, const uint8_t *accept,
                                  uint32_t n_states, uint32_t shift, uint32_t start, uint32_t eoi,
                                  uint32_t n_boundary) {
    d->trans = trans;
    d->classes = classes;
    d->accept = accept;
    d->n_states = n_states;
    d->shift = shift;
    d->start = start;
    d->eoi = eoi;
    d->live = (n_boundary + 1u) << shift;
    uint32_t g = 0; /* give-back boundary states are 1..g; fstok_dfa_check validates the rest */
    while (g + 1 < n_states && g < n_boundary && (accept[g + 1] >> FSTOK_DFA_GB_SHIFT)) g++;
    d->gbl = (g + 1u) << shift;
    /* the fast skip of fstok_dfa_next_span / find_all (tables read only where in range: fstok_dfa_check
     * runs after this) */
    d->skip_n = 0;
    if (shift > 9 || (uint64_t)start >= ((uint64_t)n_states << shift)) return;
    uint32_t nr = 0, cnt = 0;
    int open = 0;
    for (int b = 0; b <= 128; b++) {
        int cand = b < 128 && (classes[b] >= (1u << shift) || trans[start + classes[b]] != 0);
        cnt += (uint32_t)cand;
        if (cand && !open) {
            if (nr == 4) return; /* more than four ranges: no fast skip */
            d->skip_lo[nr] = (uint8_t)b;
            open = 1;
        } else if (!cand && open) {
            d->skip_w[nr] = (uint8_t)(b - 1 - d->skip_lo[nr]);
            nr++;
            open = 0;
        }
    }
    if (cnt > 64) return; /* most ASCII bytes start a match: the byte loop stops at once anyway */
    if (nr == 0) { /* no ASCII byte starts a match: one range of a byte >= 0x80 (those are tested anyway) */
        d->skip_lo[0] = 0x80;
        d->skip_w[0] = 0;
        nr = 1;
    }
    d->skip_n = nr;
}

/* Structural check of the tables (O(table size)); 0 if valid, else -1 and a message in err. */
int fstok_dfa_check(const fstok_dfa *d, char *err, size_t errlen);

/* Anchored match: end offset of the leftmost-first match that starts exactly at `pos`
 * (end > pos), or FSTOK_DFA_NOMATCH.  s[0..n) is the whole text: `pos` may be > 0 and the
 * lookahead sees the bytes after the match and the end of the text at n. */
size_t fstok_dfa_match(const fstok_dfa *d, const uint8_t *s, size_t n, size_t pos);

/* Unanchored search, like regex `finditer`: the next match starting at or after `pos`.
 * Returns its end and stores its start in *start, or returns FSTOK_DFA_NOMATCH when there is
 * none.  Tries the positions in turn, skipping bytes the start state dies on at once (a failed
 * attempt usually dies on its first byte); patterns that match at every position (all tiktoken
 * patterns) never skip.
 * Loop:  for (p = 0; (e = fstok_dfa_next_span(d, s, n, p, &b)) != FSTOK_DFA_NOMATCH; p = e) ... */
size_t fstok_dfa_next_span(const fstok_dfa *d, const uint8_t *s, size_t n, size_t pos, size_t *start);

/* Bulk finditer (the fast path): writes up to `cap` matches as pairs out[2k] = start,
 * out[2k+1] = end, searching from *pos; returns the number of pairs written and advances *pos
 * (== n when finished; call again while *pos < n).  Same result as looping on
 * fstok_dfa_next_span, but one pass over the bytes with branch-free piece boundaries: a piece
 * that needs no backtracking costs no mispredicted branch.  `out` needs room for 2*cap values. */
size_t fstok_dfa_find_all(const fstok_dfa *d, const uint8_t *s, size_t n, size_t *pos, size_t *out, size_t cap);

/* Bulk finditer for consecutive pieces (the BPE hot path): the first piece starts at *pos, each next
 * one where the previous ended.  Writes up to `cap` piece ends to ends[], returns their number and
 * advances *pos to the end of the last one.  It may return before `cap` pieces (call again while
 * *pos < n); it returns 0 only when no match starts at *pos (cap >= 1): the caller then skips ahead
 * with fstok_dfa_next_span, as regex finditer drops text no match covers.  Same pieces as
 * fstok_dfa_find_all, cheaper per byte: one transition, one store and one add; the end of a piece
 * whose match needs backtracking (the DFA died) is found again by an anchored match from its start.
 * Windows of >= 64 bytes are walked as two halves at once, joined where the walks meet in one state
 * (lib_dfa.c dual_window; docs/design/pretokenize.md "Two walks per window"). */
size_t fstok_dfa_find_ends(const fstok_dfa *d, const uint8_t *s, size_t n, size_t *pos, size_t *ends, size_t cap);

/* HF `Split(behavior="Isolated")` pipelines: each level splits every piece of the previous one
 * into matches and the gaps between them (each piece is a text of its own: lookahead sees the
 * piece end as the end of input).  The final pieces cover s[0..n) without gaps, so only their
 * end offsets are appended to ends[0..*len) (grown with realloc; *cap is its capacity).
 * Recursion depth is n_levels (keep it small: HF pipelines have 1..4; the binding allows 16).
 * Returns 0, or -1 when out of memory. */
int fstok_dfa_split_isolated(const fstok_dfa *levels, int n_levels, const uint8_t *s, size_t n,
                             size_t **ends, size_t *len, size_t *cap);

#ifdef __cplusplus
}
#endif

#endif /* FSTOK_DFA_H */
