#ifndef FSTOK_BPE_ENCODE_H
#define FSTOK_BPE_ENCODE_H

/* Encoding a text: special/added tokens (bpe_specials.h) split it into gaps, the pre-tokenizer DFA (dfa.h)
 * cuts a gap into pieces (find mode: tiktoken; split mode: HF Split(Isolated) levels), and the pieces go
 * through the cache (bpe_piece_cache.h) or direct runs (bpe_direct.h).  Python-free.  Oracle:
 * fstok/reference/bpe.py (ReferenceBPE.encode); tiktoken and HF tokenizers in tools/diff_bpe.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_direct.h"
#include "bpe_specials.h"
#include "dfa.h"

/* The pieces of s[a:b) by the DFA d (one level: find mode, or one HF Split(Isolated) level, whose pieces are the
 * matches of the same finditer plus the non-empty gaps between them; s[a:b) is a text of its own: its end is the
 * end of input) through the piece cache. */
static int encode_pieces_cached(const bpe_rt *self, const fstok_dfa *d, const uint8_t *s, size_t a, size_t b,
                                enc_state *st) {
    const bpe_model *m = &self->m;
    const int keep_gaps = self->pt_mode == 1;
    bpe_memo *memo = st->memo;
    const uint32_t gen = memo->gen << 16;
    const size_t n = b - a;
    const uint8_t *base = s + a;
    const size_t avail_end = st->text_len - a; /* bytes readable from base */
    /* free ids kept before each chunk of pieces and after each miss: a chunk writes at most one id per byte, and a
     * cache hit copies whole entries (up to 2 x BPE_PC_MAXTOK ids past the end).  Bounded by the text's own bytes:
     * a batch of 100k short lines reserved 64 KB each, and touching a new page per line (page faults, zeroing)
     * took most of the first calls' time */
    const size_t room_chunk = PC_LONG_MAXLEN * (SPAN_CHUNK + 2), room_text = n + 2 * BPE_PC_MAXTOK + 8;
    const size_t room = room_text < room_chunk ? room_text : room_chunk;
    size_t ends[DIRECT_CHUNK + 1]; /* (SPAN_CHUNK + 1 used outside direct batches) */
    piece_key keys[PC_AHEAD];
    piece_key ckeys[SPAN_CHUNK]; /* the keys pc_fill_cold computed (a chunk of a cold cache) */
    size_t pos = 0;
    /* piece-cache misses in the last batch of pieces: while more than 1 in 32 miss (a cold cache: a new text or
     * a new language), the span table's line is prefetched with the cache line, because most pieces will
     * probe it (with a warm cache those prefetches only take fill buffers) */
    size_t misses = 0;
    int cold = 0;
    /* direct batches (direct_run): taken after a batch in which more than 1 in 4 pieces missed the cache (random
     * text, or a cold cache), kept while a batch has more than one dead boundary per DIRECT_KEEP pieces and the
     * segments of >= 4 bytes (encoded one by one, without the cache) stay rare (random text).  When that ends
     * (natural text in a cold cache; multilingual text: its words are cut into segments too, but cached pieces
     * cost less), none for DIRECT_HOLD batches */
    int direct = 0, hold = 0, hold_next = DIRECT_HOLD;
    size_t dchunk = DIRECT_PROBE; /* pieces of the next direct batch */
    size_t dbytes = 0, dlong = 0; /* bytes of direct batches, and of their segments of >= 4 bytes */
    const int can_direct = self->seg_dir != NULL;
    while (pos < n) {
        size_t from = pos, k = fstok_dfa_find_ends(d, base, n, &pos, ends + 1, direct ? dchunk : SPAN_CHUNK);
        if (k == 0) { /* no match starts at pos: skip to the next one.  find mode drops the text no match covers;
                         * one HF Split(Isolated) level keeps it as a piece of its own (keep_gaps) */
            size_t mb, me = fstok_dfa_next_span(d, base, n, pos, &mb);
            if (keep_gaps && (me == FSTOK_DFA_NOMATCH ? n : mb) > pos &&
                emit_span(m, s, a + pos, a + (me == FSTOK_DFA_NOMATCH ? n : mb), st))
                return -1;
            if (me == FSTOK_DFA_NOMATCH) break;
            if (emit_span(m, s, a + mb, a + me, st)) return -1;
            pos = me;
            continue;
        }
        ends[0] = from; /* piece j is [ends[j], ends[j + 1]) */
        if (st->ids.cap - st->ids.len < room && bpe_vec_reserve(&st->ids, room)) return -1;
        if (direct) {
            size_t cuts = 0;
            for (size_t j = 0; j < k;) {
                size_t j1 = j;
                while (j1 < k && ends[j1 + 1] - ends[j] <= DIRECT_MAX) j1++;
                if (j1 > j) {
                    if (direct_run(self, memo, base, ends[j], ends + j + 1, j1 - j, avail_end - ends[j], st, &cuts, &dlong))
                        return -1;
                } else { /* a piece longer than a run */
                    if (bpe_encode_span_avail(m, memo, base + ends[j], ends[j + 1] - ends[j], avail_end - ends[j],
                                              &st->ids))
                        return -1;
                    j1 = j + 1;
                }
                j = j1;
            }
            if (st->ids.cap - st->ids.len < room && bpe_vec_reserve(&st->ids, room)) return -1;
            dbytes += ends[k] - ends[0];
            if (dbytes >= 65536) { /* (a moving window) */
                dbytes >>= 1;
                dlong >>= 1;
            }
            if (cuts * DIRECT_KEEP <= k || dlong * DIRECT_LONG > dbytes + DIRECT_SLACK) {
                direct = 0;
                hold = hold_next; /* twice as long after each stop, until direct batches last */
                hold_next = hold_next < 64 * DIRECT_HOLD ? 2 * hold_next : hold_next;
                dbytes = dlong = 0;
            } else {
                if (dbytes >= 16384) hold_next = DIRECT_HOLD;
                dchunk = 2 * dchunk < DIRECT_CHUNK ? 2 * dchunk : DIRECT_CHUNK;
            }
            cold = 1;
            count_flush(st);
            continue;
        }
        /* a piece's key is computed PC_AHEAD pieces early; len > 16 or too near the end: none */
#define PC_AHEAD_KEY(jj)                                                                    \
    do {                                                                                    \
        size_t pb_ = ends[jj], len_ = ends[(jj) + 1] - pb_;                                 \
        if (len_ <= BPE_PC_MAXLEN) {                                                        \
            piece_key *k_ = &keys[(jj) % PC_AHEAD];                                         \
            piece_key_of(base + pb_, len_, avail_end - pb_, k_);                            \
            size_t i_ = ((k_->h >> 32) * pc_nlines) >> 32;                                  \
            __builtin_prefetch(memo->pc + i_);                                              \
            if (cold) {                                                                     \
                __builtin_prefetch(memo->pc + (i_ ^ 1)); /* the buddy (even size: in range) */ \
                __builtin_prefetch(m->span_tab + 2 * (k_->h & m->span_mask));               \
            }                                                                               \
        } else if (len_ <= PC_LONG_MAXLEN) {                                                \
            piece_key *k_ = &keys[(jj) % PC_AHEAD];                                         \
            piece_key_long(base + pb_, len_, k_);                                           \
            size_t i_ = ((k_->h >> 32) * pc_nlines) >> 32;                                  \
            __builtin_prefetch(memo->pc + i_);                                              \
            __builtin_prefetch(memo->pc + (i_ ^ 1));                                        \
            __builtin_prefetch(memo->pc + (i_ ^ 2)); /* the second pair (pc_alt) */         \
            __builtin_prefetch(memo->pc + (i_ ^ 3));                                        \
        }                                                                                   \
    } while (0)
        /* after pc_fill_cold, the keys it computed: only the lines are prefetched */
#define PC_AHEAD_LINE(jj)                                                                   \
    do {                                                                                    \
        size_t len_ = ends[(jj) + 1] - ends[jj];                                            \
        if (len_ <= PC_LONG_MAXLEN) {                                                       \
            size_t i_ = ((ckeys[jj].h >> 32) * pc_nlines) >> 32;                            \
            __builtin_prefetch(memo->pc + i_);                                              \
            if (len_ > BPE_PC_MAXLEN) __builtin_prefetch(memo->pc + (i_ ^ 1));              \
        }                                                                                   \
    } while (0)
        if (memo->pc_cold && pc_lanes_on) { /* a cold cache: the chunk's new pieces first, then every piece from it */
            misses += pc_fill_cold(m, memo, gen, base, ends, k, avail_end, ckeys); /* (they missed the cache too) */
            for (size_t j = 0; j < k && j < PC_AHEAD; j++) PC_AHEAD_LINE(j);
            for (size_t j = 0; j < k; j++) {
                size_t pb = ends[j], len = ends[j + 1] - pb;
                int rc;
                if (j + PC_AHEAD < k) PC_AHEAD_LINE(j + PC_AHEAD);
                if (FSTOK_LIKELY(len <= BPE_PC_MAXLEN))
                    rc = piece_emit_fast(m, memo, gen, base + pb, len, &ckeys[j], room, st);
                else if (len <= PC_LONG_MAXLEN)
                    rc = piece_emit_long(m, memo, gen, base + pb, len, &ckeys[j], piece_w2(base + pb, len, avail_end - pb),
                                         room, st);
                else {
                    rc = bpe_encode_span_avail(m, memo, base + pb, len, avail_end - pb, &st->ids);
                    if (!rc && st->ids.cap - st->ids.len < room) rc = bpe_vec_reserve(&st->ids, room);
                    if (rc) return -1;
                    continue;
                }
                if (rc < 0) return -1;
                misses += (size_t)rc;
            }
        } else {
            for (size_t j = 0; j < k && j < PC_AHEAD; j++) PC_AHEAD_KEY(j);
            for (size_t j = 0; j < k; j++) {
                size_t pb = ends[j], len = ends[j + 1] - pb;
                int rc;
                if (FSTOK_LIKELY(len <= BPE_PC_MAXLEN)) {
                    rc = piece_emit_fast(m, memo, gen, base + pb, len, &keys[j % PC_AHEAD], room, st);
                    if (j + PC_AHEAD < k) PC_AHEAD_KEY(j + PC_AHEAD); /* (into the slot of the key just used) */
                    if (FSTOK_UNLIKELY(rc)) {
                        if (rc < 0) return -1;
                        misses++;
                        rc = 0;
                    }
                } else if (len <= PC_LONG_MAXLEN) {
                    piece_key key = keys[j % PC_AHEAD];
                    if (j + PC_AHEAD < k) PC_AHEAD_KEY(j + PC_AHEAD);
                    rc = piece_emit_long(m, memo, gen, base + pb, len, &key, piece_w2(base + pb, len, avail_end - pb), room, st);
                    if (rc > 0) {
                        misses++;
                        rc = 0;
                    }
                } else {
                    if (j + PC_AHEAD < k) PC_AHEAD_KEY(j + PC_AHEAD);
                    rc = bpe_encode_span_avail(m, memo, base + pb, len, avail_end - pb, &st->ids);
                    if (!rc && st->ids.cap - st->ids.len < room) rc = bpe_vec_reserve(&st->ids, room);
                }
                if (rc) return -1;
            }
        }
#undef PC_AHEAD_KEY
#undef PC_AHEAD_LINE
        pc_cold_update(memo, k, misses);
        cold = 32 * misses > k;
        if (hold) hold--;
        else if ((direct = can_direct && 4 * misses > k)) dchunk = DIRECT_PROBE;
        misses = 0;
        count_flush(st);
    }
    return 0;
}

static int emit_literal(uint32_t id, size_t at, enc_state *st) {
    if (st->plan) return plan_push(st->plan, at, at, id);
    if (bpe_vec_reserve(&st->ids, 1)) return -1;
    st->ids.ids[st->ids.len++] = id;
    if (st->want_starts) {
        if (bpe_vec_reserve(&st->starts, 1)) return -1;
        st->starts.ids[st->starts.len++] = (uint32_t)at;
    }
    return 0;
}

/* Pieces handed over whole (the ends of HF Split levels after one another; the spans a caller cut) through the
 * piece cache, as encode_pieces_cached does for the pieces of one level: most pieces of natural text recur.
 * cached_key computes a piece's key PC_AHEAD pieces early and prefetches its cache line; cached_piece encodes
 * it (st->memo set, no starts, no plan). */
static inline void cached_key(const bpe_memo *memo, const uint8_t *p, size_t len, size_t avail, piece_key *k) {
    if (len <= BPE_PC_MAXLEN) piece_key_of(p, len, avail, k);
    else if (len <= PC_LONG_MAXLEN) piece_key_long(p, len, k);
    else return;
    __builtin_prefetch(memo->pc + (((k->h >> 32) * pc_nlines) >> 32));
}

/* a piece writes at most one id per byte; a cache hit copies whole entries (up to 2 x BPE_PC_MAXTOK ids) */
#define CACHED_ROOM (PC_LONG_MAXLEN + 2 * BPE_PC_MAXTOK + 8)

static inline int cached_piece(const bpe_model *m, bpe_memo *memo, uint32_t gen, const uint8_t *p, size_t len,
                               size_t avail, const piece_key *key, enc_state *st) {
    if (st->ids.cap - st->ids.len < CACHED_ROOM + len && bpe_vec_reserve(&st->ids, CACHED_ROOM + len)) return -1;
    if (FSTOK_LIKELY(len <= BPE_PC_MAXLEN)) return piece_emit(m, memo, gen, p, len, key, CACHED_ROOM, st) < 0 ? -1 : 0;
    if (len <= PC_LONG_MAXLEN)
        return piece_emit_long(m, memo, gen, p, len, key, piece_w2(p, len, avail), CACHED_ROOM, st) < 0 ? -1 : 0;
    return bpe_encode_span_avail(m, memo, p, len, avail, &st->ids) ? -1 : 0;
}

/* the pieces of s[a:b) that end at a + ends[0..k) */
static int encode_ends_cached(const bpe_rt *self, const uint8_t *s, size_t a, const size_t *ends, size_t k,
                              enc_state *st) {
    const bpe_model *m = &self->m;
    bpe_memo *memo = st->memo;
    const uint32_t gen = memo->gen << 16;
    const uint8_t *base = s + a;
    const size_t avail = st->text_len - a;
    piece_key keys[PC_AHEAD];
    for (size_t j = 0; j < k && j < PC_AHEAD; j++) {
        size_t pb = j ? ends[j - 1] : 0;
        cached_key(memo, base + pb, ends[j] - pb, avail - pb, &keys[j]);
    }
    for (size_t j = 0; j < k; j++) {
        size_t pb = j ? ends[j - 1] : 0;
        piece_key key = keys[j % PC_AHEAD];
        if (j + PC_AHEAD < k) {
            size_t qb = ends[j + PC_AHEAD - 1];
            cached_key(memo, base + qb, ends[j + PC_AHEAD] - qb, avail - qb, &keys[(j + PC_AHEAD) % PC_AHEAD]);
        }
        if (cached_piece(m, memo, gen, base + pb, ends[j] - pb, avail - pb, &key, st)) return -1;
        if ((j & 1023) == 1023) count_flush(st);
    }
    count_flush(st);
    return 0;
}

/* (start, end, literal) triples of byte offsets into s[0:n) (validated by the caller): literal != BPE_NONE emits
 * that id, else s[start:end) is one piece */
static int encode_triples_cached(const bpe_rt *self, const uint8_t *s, size_t n, const uint32_t *tri, size_t k,
                                 enc_state *st) {
    const bpe_model *m = &self->m;
    bpe_memo *memo = st->memo;
    const uint32_t gen = memo->gen << 16;
    piece_key keys[PC_AHEAD];
    for (size_t j = 0; j < k && j < PC_AHEAD; j++)
        if (tri[3 * j + 2] == BPE_NONE)
            cached_key(memo, s + tri[3 * j], tri[3 * j + 1] - tri[3 * j], n - tri[3 * j], &keys[j]);
    for (size_t j = 0; j < k; j++) {
        uint32_t a = tri[3 * j], b = tri[3 * j + 1], lit = tri[3 * j + 2];
        piece_key key = keys[j % PC_AHEAD];
        size_t q = j + PC_AHEAD;
        if (q < k && tri[3 * q + 2] == BPE_NONE)
            cached_key(memo, s + tri[3 * q], tri[3 * q + 1] - tri[3 * q], n - tri[3 * q], &keys[q % PC_AHEAD]);
        if (lit != BPE_NONE) {
            if (emit_literal(lit, a, st)) return -1;
        } else if (b > a && cached_piece(m, memo, gen, s + a, b - a, n - a, &key, st))
            return -1;
        if ((j & 1023) == 1023) count_flush(st);
    }
    count_flush(st);
    return 0;
}

/* encode_triples_cached where each piece s[start:end) is followed by the byte `suffix` (an end-of-word sentinel,
 * fstok.pipeline's `end_of_word_suffix`): the piece and its suffix are copied to a scratch buffer, zero padded,
 * and go through the piece cache (without a memo: encoded directly) */
static int encode_triples_suffixed(const bpe_rt *self, const uint8_t *s, const uint32_t *tri, size_t k, uint8_t suffix,
                                   enc_state *st) {
    const bpe_model *m = &self->m;
    bpe_memo *memo = st->memo;
    const uint32_t gen = memo ? memo->gen << 16 : 0;
    uint8_t small[128], *buf = small;
    size_t cap = sizeof small;
    int rc = 0;
    for (size_t j = 0; j < k && !rc; j++) {
        uint32_t a = tri[3 * j], b = tri[3 * j + 1], lit = tri[3 * j + 2];
        if (lit != BPE_NONE) {
            rc = emit_literal(lit, a, st);
            continue;
        }
        size_t len = (size_t)(b - a) + 1;
        if (len + 16 > cap) {
            size_t nc = 2 * (len + 16);
            uint8_t *nb = buf == small ? (uint8_t *)malloc(nc) : (uint8_t *)realloc(buf, nc);
            if (!nb) {
                rc = -1;
                break;
            }
            buf = nb;
            cap = nc;
        }
        memcpy(buf, s + a, len - 1);
        buf[len - 1] = suffix;
        memset(buf + len, 0, 16);
        if (memo) {
            piece_key key;
            cached_key(memo, buf, len, len + 16, &key);
            rc = cached_piece(m, memo, gen, buf, len, len + 16, &key, st);
        } else
            rc = bpe_encode_span_avail(m, NULL, buf, len, len + 16, &st->ids) ? -1 : 0;
        if ((j & 1023) == 1023) count_flush(st);
    }
    if (buf != small) free(buf);
    if (!rc) count_flush(st);
    return rc;
}

/* pre-tokenize s[a:b) as a text of its own and BPE every piece (offsets absolute in s) */
static int encode_segment(const bpe_rt *self, const uint8_t *s, size_t a, size_t b, enc_state *st) {
    const bpe_model *m = &self->m;
    if (a >= b) return 0;
    if ((self->pt_mode == 0 || (self->pt_mode == 1 && self->n_levels == 1)) && st->memo && !st->want_starts && !st->plan)
        return encode_pieces_cached(self, &self->lv[0], s, a, b, st);
    if (self->pt_mode == 1 && self->n_levels > 1 && st->memo && !st->want_starts && !st->plan) {
        /* HF Split(Isolated) levels: the pieces of every level but the last (few: a fused run of character-class
         * levels cuts digits and scripts apart, fstok/compile/regex_fuse.py), then each of them cut by the last
         * level as a text of its own in the piece loop (one DFA walk of the bytes, not one per level) */
        st->elen = 0;
        if (fstok_dfa_split_isolated(self->lv, self->n_levels - 1, s + a, b - a, &st->ends, &st->elen, &st->ecap))
            return -1;
        const fstok_dfa *last = &self->lv[self->n_levels - 1];
        size_t prev = a;
        for (size_t j = 0; j < st->elen; j++) {
            size_t e = a + st->ends[j];
            if (encode_pieces_cached(self, last, s, prev, e, st)) return -1;
            prev = e;
        }
        return 0;
    }
    if (self->pt_mode == 0) {
        size_t buf[2 * SPAN_CHUNK];
        size_t pos = 0, n = b - a;
        const uint8_t *base = s + a;
        while (pos < n) {
            size_t k = fstok_dfa_find_all(&self->lv[0], base, n, &pos, buf, SPAN_CHUNK);
            for (size_t j = 0; j < k && j < PREFETCH_AHEAD; j++)
                bpe_span_prefetch(m, base + buf[2 * j], buf[2 * j + 1] - buf[2 * j]);
            for (size_t j = 0; j < k; j++) {
                if (j + PREFETCH_AHEAD < k)
                    bpe_span_prefetch(m, base + buf[2 * (j + PREFETCH_AHEAD)],
                                      buf[2 * (j + PREFETCH_AHEAD) + 1] - buf[2 * (j + PREFETCH_AHEAD)]);
                if (emit_span(m, s, a + buf[2 * j], a + buf[2 * j + 1], st)) return -1;
            }
            count_flush(st);
        }
        return 0;
    }
    st->elen = 0;
    if (fstok_dfa_split_isolated(self->lv, self->n_levels, s + a, b - a, &st->ends, &st->elen, &st->ecap)) return -1;
    if (st->memo && !st->want_starts && !st->plan) return encode_ends_cached(self, s, a, st->ends, st->elen, st);
    size_t prev = 0;
    for (size_t j = 0; j < st->elen; j++) {
        if (j + PREFETCH_AHEAD < st->elen) {
            size_t b0 = st->ends[j + PREFETCH_AHEAD - 1], b1 = st->ends[j + PREFETCH_AHEAD];
            bpe_span_prefetch(m, s + a + b0, b1 - b0);
        }
        if (emit_span(m, s, a + prev, a + st->ends[j], st)) return -1;
        prev = st->ends[j];
        if ((j & 1023) == 1023) count_flush(st);
    }
    count_flush(st);
    return 0;
}


/* split s[a:b) at the leftmost-longest matches of sp2 (second pass of HF's added vocabulary) */
static int encode_gap(const bpe_rt *self, const bpe_specials *sp2, const uint8_t *s, size_t a, size_t b,
                      enc_state *st) {
    size_t pos = a;
    while (pos < b) {
        size_t len = 0;
        uint32_t id = BPE_NONE;
        size_t at = sp2 ? specials_find(sp2, s, b, pos, &len, &id) : b;
        if (encode_segment(self, s, pos, at, st)) return -1;
        if (at >= b) break;
        if (emit_literal(id, at, st)) return -1;
        pos = at + len;
    }
    return 0;
}

/* tiktoken `encode`: segments between allowed special tokens are pre-tokenized separately.
 * sp2 (HF models): tokens searched in those segments afterwards, as HF's normalized added tokens. */
static int encode_text(const bpe_rt *self, const bpe_specials *sp, const bpe_specials *sp2, const uint8_t *s,
                       size_t n, enc_state *st) {
    st->text_len = n;
    /* count mode keeps at most ~4.6k ids between flushes; a short text needs no more than its list would */
    size_t want = n / 4 + 16;
    /* a short text (a line of a batch): the room the piece loop keeps free (encode_pieces_cached) at once, so
     * that it is one allocation, not an allocation and a reallocation */
    if (n <= 4096) want = n + 2 * BPE_PC_MAXTOK + 8;
    if (st->count_only && want > 4096 + 512) want = 4096 + 512;
    if (!st->plan && bpe_vec_reserve(&st->ids, want)) return -1;
    size_t pos = 0;
    while (pos < n) {
        size_t len = 0;
        uint32_t id = BPE_NONE;
        size_t at = specials_find(sp, s, n, pos, &len, &id);
        if (encode_gap(self, sp2, s, pos, at, st)) return -1;
        if (at >= n) break;
        if (emit_literal(id, at, st)) return -1;
        pos = at + len;
    }
    return 0;
}

#endif /* FSTOK_BPE_ENCODE_H */
