/* WordPiece over pre-cut pieces: the model stage of a tokenizer.json pipeline (fstok.pipeline.model_tables).
 * The pieces are (start, end, flag) uint32 triples over one UTF-8 buffer, cut by the pipeline's own
 * pre-tokenizer (fstok.runtime._dfa.cut_levels); each piece is one word of HF `models/wordpiece` (greedy
 * longest match, the continuing prefix after the first match, the unk token over a word with a part no token
 * matches or longer than max_input_chars_per_word characters): the single-word walk of wp_normalize.h.
 * Oracle: fstok.pipeline.models.WordPiece.  Python-free: mod_wordpiece.c is the binding. */
#ifndef FSTOK_WP_SPANS_H
#define FSTOK_WP_SPANS_H
#include <stddef.h>
#include <stdint.h>

#include "wp_normalize.h"
#include "wp_tables.h"

/* 1 where every triple lies inside [0, n) with start <= end and on UTF-8 character boundaries of a
 * buffer that is well-formed UTF-8 (checked here: the walk reads a lead byte's continuation bytes
 * without bounds checks) */
static int wp_spans_ok(const uint8_t *s, size_t n, const uint32_t *tri, size_t ntri) {
    size_t i = 0;
    while (i < n) {
        const uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t k;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) k = 1;
        else if (c >= 0xE0 && c <= 0xEF) { k = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
        else if (c >= 0xF0 && c <= 0xF4) { k = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
        else return 0;
        if (i + k >= n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += k + 1;
    }
    for (size_t t = 0; t < ntri; t++) {
        const uint32_t a = tri[3 * t], b = tri[3 * t + 1];
        if (a > b || b > n) return 0;
        if ((a < n && (s[a] & 0xC0) == 0x80) || (b < n && (s[b] & 0xC0) == 0x80)) return 0;
    }
    return 1;
}

/* the tokens of every piece in order into out (offsets, when asked, in characters of the piece); counts[t]
 * (when not NULL) the number of tokens of piece t */
static void wp_encode_spans(const wp_tables *t, const uint8_t *s, const uint32_t *tri, size_t ntri, outbuf *out,
                            uint32_t *counts) {
    for (size_t k = 0; k < ntri && !out->oom; k++) {
        const size_t before = out->n;
        wp_encode_word(t, s + tri[3 * k], (size_t)(tri[3 * k + 1] - tri[3 * k]), out);
        if (counts) counts[k] = (uint32_t)(out->n - before);
    }
}

#endif /* FSTOK_WP_SPANS_H */
