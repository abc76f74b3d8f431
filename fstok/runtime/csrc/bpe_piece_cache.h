#ifndef FSTOK_BPE_PIECE_CACHE_H
#define FSTOK_BPE_PIECE_CACHE_H

/* Encoding one text's pieces: the encoder state (ids, starts, count mode, the planning pass of a parallel
 * encode), one piece through the model (emit_span: whole-span lookup, then the merge loop of bpe.h), and the
 * per-thread piece cache (memo): a piece seen before costs a hash probe.  Python-free.  Oracle:
 * fstok/reference/bpe.py (merge_ranks / merge_rules on each piece). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define PC_X86 1
#endif

#include "bpe.h"
#include "bpe_runtime.h"
#include "bpe_shared_cache.h"

/* --- encoding a text: specials, DFA spans, BPE */

#define SPAN_CHUNK 512
#define PREFETCH_AHEAD 6

typedef struct {
    bpe_memo *memo;      /* thread-private pre-token memo or NULL */
    size_t text_len;     /* bytes of the whole text (spans may read ahead up to its end) */
    bpe_vec ids, starts; /* starts only when want_starts */
    size_t count;        /* tokens already dropped from ids (count mode) */
    size_t *ends;        /* split mode scratch */
    size_t elen, ecap;
    int want_starts, count_only;
    bpe_vec *plan;       /* planning pass (parallel encode): record (start, end, literal) instead of encoding */
} enc_state;

static void enc_free(enc_state *st) {
    free(st->ids.ids);
    free(st->starts.ids);
    free(st->ends);
    memset(st, 0, sizeof *st);
}

static void enc_attach_memo(bpe_rt *self, enc_state *st) { st->memo = memo_borrow(self); }

static inline int plan_push(bpe_vec *plan, size_t a, size_t b, uint32_t lit) {
    if (bpe_vec_reserve(plan, 3)) return -1;
    plan->ids[plan->len++] = (uint32_t)a;
    plan->ids[plan->len++] = (uint32_t)b;
    plan->ids[plan->len++] = lit;
    return 0;
}

static inline int emit_span(const bpe_model *m, const uint8_t *s, size_t a, size_t b, enc_state *st) {
    if (st->plan) return plan_push(st->plan, a, b, BPE_NONE);
    size_t before = st->ids.len;
    if (bpe_encode_span_avail(m, st->memo, s + a, b - a, st->text_len - a, &st->ids)) return -1;
    if (st->want_starts) {
        if (bpe_vec_reserve(&st->starts, st->ids.len - before)) return -1;
        size_t p = a;
        for (size_t j = before; j < st->ids.len; j++) {
            st->starts.ids[st->starts.len++] = (uint32_t)p;
            uint32_t t = st->ids.ids[j];
            p += m->dec_off[t + 1] - m->dec_off[t];
        }
    }
    return 0;
}

static inline void count_flush(enc_state *st) {
    if (st->count_only && st->ids.len > 4096) {
        st->count += st->ids.len;
        st->ids.len = 0;
    }
}


/* zero-padding masks of the piece cache's two key words, by piece length 0..16 */
static uint64_t PC_MASK0[BPE_PC_MAXLEN + 1], PC_MASK1[BPE_PC_MAXLEN + 1];

static void pc_init_masks(void) {
    for (int n = 0; n <= BPE_PC_MAXLEN; n++) {
        PC_MASK0[n] = n >= 8 ? ~0ull : (1ull << (8 * n)) - 1;
        PC_MASK1[n] = n >= 16 ? ~0ull : n <= 8 ? 0 : (1ull << (8 * (n - 8))) - 1;
    }
}


/* A piece of <= 16 bytes: its two head words (zero padded) and the span table's hash of it
 * (bpe_hash_w / bpe_hash_bytes), whose top bits also index the piece cache.  `avail` >= len bytes are
 * readable at p; near the end of the text (avail < 16) the words come from a zero-padded copy. */
typedef struct {
    uint64_t w0, w1, h;
} piece_key;

static inline void piece_key_of(const uint8_t *p, size_t len, size_t avail, piece_key *k) {
    if (FSTOK_LIKELY(avail >= 16)) {
        k->w0 = bpe_rd64(p) & PC_MASK0[len];
        k->w1 = bpe_rd64(p + 8) & PC_MASK1[len];
    } else {
        uint8_t t[16] = {0};
        memcpy(t, p, len);
        k->w0 = bpe_rd64(t);
        k->w1 = bpe_rd64(t + 8);
    }
    k->h = len <= 8 ? bpe_hash_w(k->w0, len) : bpe_hash_bytes(p, len);
}

/* Pieces of 17..PC_LONG_MAXLEN bytes (random text, words of scripts without spaces) are cached too, as *long
 * entries* over a line and its buddy: the head (first two words, tag with PC_DBL, ids 0..10) in the piece's own
 * line, the third word, the first word again and ids 11..21 in the buddy (PC_CONT; ntok field 255 so the buddy
 * is never read as two slots).  Up to PC_LONG_MAXTOK ids. */
#define PC_LONG_MAXLEN 24
#define PC_LONG_MAXTOK (2 * BPE_PC_MAXTOK)

static inline void piece_key_long(const uint8_t *p, size_t len, piece_key *k) { /* (len > 16 bytes readable) */
    k->w0 = bpe_rd64(p);
    k->w1 = bpe_rd64(p + 8);
    k->h = bpe_hash_bytes(p, len);
}

/* the third key word of a piece of 17..PC_LONG_MAXLEN bytes (zero padded) */
static inline uint64_t piece_w2(const uint8_t *p, size_t len, size_t avail) {
    if (FSTOK_LIKELY(avail >= PC_LONG_MAXLEN)) return bpe_rd64(p + 16) & PC_MASK0[len - 16];
    uint8_t t[8] = {0};
    memcpy(t, p + 16, len - 16);
    return bpe_rd64(t);
}

/* lines in use: BPE_PC_LINES, or fewer from $FSTOK_BPE_PC_LINES read at import (tests: 1-3 lines make every
 * piece collide, so slot 1, the swap and wide entries replacing slots and back all run) */
static uint64_t pc_nlines = BPE_PC_LINES;

/* the lockstep fill of cold pieces (pc_fill_cold): on, or off with $FSTOK_BPE_LANES=0 read at import (tests, A/B);
 * the pieces it encoded so far (tests) */
static int pc_lanes_on = 1;
static unsigned long pc_lanes_filled = 0, pc_lanes_filled_long = 0; /* (long: of 17..PC_LONG_MAXLEN bytes) */


/* the CPU has AVX2 and popcnt (read at import; $FSTOK_BPE_LANES=sse2: as if not): the lockstep fill runs a build
 * of its merge loop for them */
static int pc_hw_lanes = 0;

static void pc_init_lines(void) {
    const char *e = getenv("FSTOK_BPE_PC_LINES");
    long v = e ? atol(e) : 0;
    if (v >= 1 && v <= (long)BPE_PC_LINES) pc_nlines = (uint64_t)v;
    e = getenv("FSTOK_BPE_LANES");
    if (e && e[0] == '0') pc_lanes_on = 0;
#ifdef PC_X86
    __builtin_cpu_init();
    pc_hw_lanes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") && !(e && e[0] == 's');
#endif
}

static inline bpe_pc_line *pc_line(bpe_memo *memo, uint64_t h) { return &memo->pc[((h >> 32) * pc_nlines) >> 32]; }

/* The buddy of a line: the other line of its 128-byte pair (itself when that is not in use: $FSTOK_BPE_PC_LINES
 * odd).  A piece lives in its own line or, when that one is taken by entries still in use, in the buddy
 * (two choices: o200k random text, ~71k distinct pieces of <= 16 bytes, most of them wide entries, missed
 * 29k times a pass with one choice, 11k with two).  A piece of 12-16 tokens takes both lines. */
_Static_assert(BPE_PC_LINES % 2 == 0, "lines come in pairs");
static inline bpe_pc_line *pc_buddy(bpe_memo *memo, bpe_pc_line *l) {
    size_t i = (size_t)(l - memo->pc) ^ 1u;
    return i < pc_nlines ? memo->pc + i : l;
}

/* tag = gen << 16 | ntok << 8 | flags | len (len <= 24: bits 0-4).  PC_HIT: the entry was stored or hit since a
 * miss last found it in the way: a miss stores its piece in the line (own or buddy) that holds no such entry; when
 * both do, it clears their bits.  PC_DBL: a piece of 12-16 tokens, whose ids 11.. are in the buddy, in an entry
 * with the same key and PC_CONT, which never matches a lookup (the bit is in the compare mask), or a long entry. */
#define PC_NTOK(tag) (((tag) >> 8) & 0xFFu)
#define PC_DBL 0x20u
#define PC_HIT 0x40u
#define PC_CONT 0x80u
#define PC_MATCH 0xFFFF009Fu /* compared bits of a tag: gen, PC_CONT, len */
#define PC_GEN(tag) ((tag) & 0xFFFF0000u)

static inline int pc_slot_is(const bpe_pc_slot *e, const piece_key *k, uint32_t want) {
    return e->k0 == k->w0 && e->k1 == k->w1 && (e->tag & PC_MATCH) == want;
}

/* room in line l for a new entry of nt ids without evicting a current entry (gen: the memo's, << 16) */
static inline int pc_free(const bpe_pc_line *l, uint32_t gen, size_t nt) {
    uint32_t t0 = l->s[0].tag;
    if (PC_GEN(t0) != gen) return 1;
    return nt <= BPE_PC_SLOTTOK && PC_NTOK(t0) <= BPE_PC_SLOTTOK && PC_GEN(l->s[1].tag) != gen;
}

/* would storing nt ids in line l evict a current entry with PC_HIT? */
static inline int pc_protected(const bpe_pc_line *l, uint32_t gen, size_t nt) {
    uint32_t t0 = l->s[0].tag, t1 = l->s[1].tag;
    int slots = PC_NTOK(t0) <= BPE_PC_SLOTTOK;
    int p1 = slots && PC_GEN(t1) == gen && (t1 & PC_HIT);
    if (nt <= BPE_PC_SLOTTOK && slots) return p1; /* slot 0 moves to slot 1: only slot 1 is evicted */
    return (PC_GEN(t0) == gen && (t0 & PC_HIT)) || p1;
}

static inline void pc_age(bpe_pc_line *l) {
    l->s[0].tag &= ~PC_HIT;
    if (PC_NTOK(l->s[0].tag) <= BPE_PC_SLOTTOK) l->s[1].tag &= ~PC_HIT;
}

/* store piece (key k, nt ids) in its line: a wide entry takes the line; a slot entry goes to slot 0 and the
 * old slot 0 moves to slot 1 (dropped if it was wide: slot 1 was its ids) */
static inline void pc_store(bpe_pc_line *l, const piece_key *k, uint32_t tag, const uint32_t *ids, size_t nt) {
    if (nt <= BPE_PC_SLOTTOK) {
        if (PC_NTOK(l->s[0].tag) <= BPE_PC_SLOTTOK) l->s[1] = l->s[0];
        else l->s[1].tag = 0;
        l->s[0].k0 = k->w0;
        l->s[0].k1 = k->w1;
        l->s[0].tag = tag;
        memcpy(l->s[0].ids, ids, nt * sizeof(uint32_t));
    } else {
        l->wide.k0 = k->w0;
        l->wide.k1 = k->w1;
        l->wide.tag = tag;
        memcpy(l->wide.ids, ids, nt * sizeof(uint32_t));
    }
}

/* a piece missed the cache and encodes to nt ids: store it in its line l, or else the buddy b, where that evicts
 * no current PC_HIT entry (when both would: clear their bits, store it in l); 12-16 ids take both lines (head in l,
 * PC_CONT in b), and only where neither holds PC_HIT entries (else the bits are cleared and nothing is stored) */
static inline void pc_insert(bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint32_t want, uint32_t gen,
                             const uint32_t *ids, size_t nt) {
    uint32_t tag = want | (uint32_t)(nt << 8) | PC_HIT;
    if (nt > BPE_PC_MAXTOK) {
        if (b == l) return;
        if ((pc_free(l, gen, nt) || !pc_protected(l, gen, nt)) && (pc_free(b, gen, nt) || !pc_protected(b, gen, nt))) {
            pc_store(l, k, tag | PC_DBL, ids, BPE_PC_MAXTOK);
            b->wide.k0 = k->w0;
            b->wide.k1 = k->w1;
            b->wide.tag = tag | PC_CONT;
            memcpy(b->wide.ids, ids + BPE_PC_MAXTOK, (nt - BPE_PC_MAXTOK) * sizeof(uint32_t));
        } else {
            pc_age(l);
            pc_age(b);
        }
        return;
    }
    bpe_pc_line *d;
    if (pc_free(l, gen, nt) || !pc_protected(l, gen, nt)) d = l; /* its own line first: hits there take the fast path */
    else if (pc_free(b, gen, nt) || !pc_protected(b, gen, nt)) d = b;
    else {
        /* both lines hold entries hit since they were last aged: age them, and still store the piece in its own
         * line.  (Storing nothing kept o200k random text at 15.0k misses a pass instead of 16.3k, but a text seen
         * for the first time after others then needed two misses per piece: +25% misses on new English.) */
        pc_age(l);
        pc_age(b);
        d = l;
    }
    pc_store(d, k, tag, ids, nt);
}

/* can a long entry take the pair l, b without evicting a current PC_HIT entry? */
static inline int pc_long_room(const bpe_pc_line *l, const bpe_pc_line *b, uint32_t gen) {
    return b != l && (pc_free(l, gen, BPE_PC_MAXTOK) || !pc_protected(l, gen, BPE_PC_MAXTOK)) &&
           (pc_free(b, gen, BPE_PC_MAXTOK) || !pc_protected(b, gen, BPE_PC_MAXTOK));
}

/* store a long entry (a piece of 17..PC_LONG_MAXLEN bytes, nt <= PC_LONG_MAXTOK ids) over l and its buddy b */
static inline void pc_store_long(bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint64_t w2, uint32_t want,
                                 const uint32_t *ids, size_t nt) {
    size_t n0 = nt < BPE_PC_MAXTOK ? nt : BPE_PC_MAXTOK;
    l->wide.k0 = k->w0;
    l->wide.k1 = k->w1;
    l->wide.tag = want | (uint32_t)(nt << 8) | PC_HIT | PC_DBL;
    memcpy(l->wide.ids, ids, n0 * sizeof(uint32_t));
    if (nt <= BPE_PC_SLOTTOK) l->s[1].tag = 0; /* slot 1 must not stay valid beside a long head */
    b->wide.k0 = w2;
    b->wide.k1 = k->w0;
    b->wide.tag = want | (255u << 8) | PC_HIT | PC_CONT;
    memcpy(b->wide.ids, ids + n0, (nt - n0) * sizeof(uint32_t));
}

/* The second home of a long entry: the other pair of its 256-byte block (lines i ^ 2 and i ^ 3), or NULL where the
 * cache has too few lines.  Why: a long entry takes two lines, and it may only evict entries that were not
 * hit since they were last aged.  On multilingual text, ~20% of the pieces of 17-24 bytes had a short piece hit on
 * every pass in their own pair, so they missed on every pass (o200k multilingual.txt: 335 of 1,903 a pass, each a
 * memo lookup and some a full encode). */
static inline bpe_pc_line *pc_alt(bpe_memo *memo, const bpe_pc_line *l) {
    size_t i = (size_t)(l - memo->pc) ^ 2u;
    return (i | 1u) < pc_nlines ? memo->pc + i : NULL;
}

/* a long entry's miss: store it in its own pair, else its second pair; where both hold current PC_HIT entries, age
 * them (entries no longer in use give their lines back on this piece's next miss) */
static inline void pc_insert_long(bpe_memo *memo, bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint64_t w2,
                                  uint32_t want, uint32_t gen, const uint32_t *ids, size_t nt) {
    if (nt > PC_LONG_MAXTOK) return;
    if (pc_long_room(l, b, gen)) {
        pc_store_long(l, b, k, w2, want, ids, nt);
        return;
    }
    bpe_pc_line *a = pc_alt(memo, l), *ab = a ? pc_buddy(memo, a) : NULL;
    if (a && pc_long_room(a, ab, gen)) {
        pc_store_long(a, ab, k, w2, want, ids, nt);
        return;
    }
    pc_age(l);
    pc_age(b);
    if (a) {
        pc_age(a);
        pc_age(ab);
    }
}

/* is the long entry of key k (third word w2) in the pair l, b?  Then its ids are copied out (PC_LONG_MAXTOK slots) */
static inline int pc_long_get(bpe_pc_line *l, bpe_pc_line *b, const piece_key *k, uint64_t w2, uint32_t want,
                              enc_state *st) {
    uint32_t t0 = l->s[0].tag, tb = b->s[0].tag;
    if (!(l->s[0].k0 == k->w0 && l->s[0].k1 == k->w1 && (t0 & PC_MATCH) == want && b != l && b->s[0].k0 == w2 &&
          b->s[0].k1 == k->w0 && (tb & PC_MATCH) == (want | PC_CONT)))
        return 0;
    memcpy(st->ids.ids + st->ids.len, l->wide.ids, sizeof l->wide.ids);
    memcpy(st->ids.ids + st->ids.len + BPE_PC_MAXTOK, b->wide.ids, sizeof b->wide.ids);
    st->ids.len += PC_NTOK(t0);
    if (FSTOK_UNLIKELY(!(t0 & tb & PC_HIT))) {
        l->s[0].tag = t0 | PC_HIT;
        b->s[0].tag = tb | PC_HIT;
    }
    return 1;
}

/* piece_emit for a piece of 17..PC_LONG_MAXLEN bytes: a hit needs the head in a line and the PC_CONT entry in its
 * buddy, in the piece's own pair or its second one (pc_alt).  Returns 0 on a hit, 1 on a miss, -1 when out of
 * memory. */
static int piece_emit_long(const bpe_model *m, bpe_memo *memo, uint32_t gen, const uint8_t *p, size_t len,
                           const piece_key *k, uint64_t w2, size_t room, enc_state *st) {
    bpe_pc_line *l = pc_line(memo, k->h), *b = pc_buddy(memo, l);
    const uint32_t want = gen | (uint32_t)len;
    if (pc_long_get(l, b, k, w2, want, st)) return 0;
    bpe_pc_line *a = pc_alt(memo, l);
    if (a && pc_long_get(a, pc_buddy(memo, a), k, w2, want, st)) return 0;
    size_t before = st->ids.len;
    uint32_t id = len <= m->max_span_len && bpe_seg_may_be_token(m, p, len)
                      ? bpe_span_get_w(m, p, len, k->w0)
                      : BPE_NONE;
    if (id != BPE_NONE) {
        if (bpe_vec_reserve(&st->ids, 1)) return -1;
        st->ids.ids[st->ids.len++] = id;
    } else if (bpe_encode_span_multi(m, memo, p, len, &st->ids))
        return -1;
    size_t nt = st->ids.len - before;
    pc_insert_long(memo, l, b, k, w2, want, gen, st->ids.ids + before, nt);
    return st->ids.cap - st->ids.len >= room ? 1 : bpe_vec_reserve(&st->ids, room) ? -1 : 1;
}

/* a hit in slot 1 of line l: the most recently used to slot 0 */
static inline void pc_hit_slot1(bpe_pc_line *l) {
    bpe_pc_slot hit = l->s[1];
    hit.tag |= PC_HIT;
    l->s[1] = l->s[0];
    l->s[0] = hit;
}

/* One short piece s[pb, pb + len) of base (key computed): the piece cache, else the span table (one
 * token), else the memo and the encoders; a result of <= BPE_PC_MAXLEN tokens goes into the cache.  The
 * caller keeps room for BPE_PC_MAXLEN ids in st->ids (a hit writes up to that many, keeps ntok).
 * Returns 0 on a cache hit, 1 on a miss, -1 when out of memory. */
static inline int piece_emit(const bpe_model *m, bpe_memo *memo, uint32_t gen, const uint8_t *p, size_t len,
                             const piece_key *k, size_t room, enc_state *st) {
    bpe_pc_line *l = pc_line(memo, k->h), *b;
    const uint32_t want = gen | (uint32_t)len;
    uint32_t t0 = l->s[0].tag;
    if (FSTOK_LIKELY(l->s[0].k0 == k->w0 && l->s[0].k1 == k->w1 && (t0 & PC_MATCH) == want)) {
        memcpy(st->ids.ids + st->ids.len, l->wide.ids, sizeof l->wide.ids); /* all: no branch on ntok */
        if (FSTOK_UNLIKELY((t0 & (PC_HIT | PC_DBL)) != PC_HIT)) {
            if (t0 & PC_DBL) { /* 12-16 ids: the rest in the buddy, if it is still there */
                b = pc_buddy(memo, l);
                if (!(b != l && pc_slot_is(&b->s[0], k, want | PC_CONT))) {
                    l->s[0].tag = t0 & ~PC_HIT; /* its second line was taken: let the piece store itself again */
                    goto miss;
                }
                memcpy(st->ids.ids + st->ids.len + BPE_PC_MAXTOK, b->wide.ids,
                       (BPE_PC_MAXLEN - BPE_PC_MAXTOK) * sizeof(uint32_t));
                b->s[0].tag |= PC_HIT;
            }
            l->s[0].tag = t0 | PC_HIT;
        }
        st->ids.len += PC_NTOK(t0);
        return 0;
    }
    if (PC_NTOK(t0) <= BPE_PC_SLOTTOK && pc_slot_is(&l->s[1], k, want)) {
        memcpy(st->ids.ids + st->ids.len, l->s[1].ids, sizeof l->s[1].ids);
        st->ids.len += PC_NTOK(l->s[1].tag);
        pc_hit_slot1(l);
        return 0;
    }
    b = pc_buddy(memo, l);
    if (b != l) {
        uint32_t tb = b->s[0].tag;
        int w = pc_slot_is(&b->s[0], k, want) && PC_NTOK(tb) <= BPE_PC_MAXTOK ? 0
                : PC_NTOK(tb) <= BPE_PC_SLOTTOK && pc_slot_is(&b->s[1], k, want) ? 1 : -1;
        if (w >= 0) { /* a hit in the buddy */
            const uint32_t tag = b->s[w].tag, *ids = w ? b->s[1].ids : b->wide.ids;
            size_t nt = PC_NTOK(tag);
            memcpy(st->ids.ids + st->ids.len, ids, nt * sizeof(uint32_t));
            st->ids.len += nt;
            if (pc_free(l, gen, nt) || !pc_protected(l, gen, nt)) {
                /* its own line can take it now (it was full when the piece was stored): move it there, so that
                 * its next hits take the fast path */
                pc_store(l, k, tag | PC_HIT, ids, nt);
                if (w == 1) b->s[1].tag = 0;
                else if (nt <= BPE_PC_SLOTTOK) {
                    b->s[0] = b->s[1];
                    b->s[1].tag = 0;
                } else
                    b->s[0].tag = 0;
            } else {
                /* its own line holds entries hit since they were last aged: age them now, so that entries no
                 * longer in use (another text's) give the line back on this piece's next hit */
                pc_age(l);
                if (w == 1) pc_hit_slot1(b);
                else if (!(tb & PC_HIT)) b->s[0].tag = tb | PC_HIT;
            }
            return 0;
        }
    }
miss:;
    b = pc_buddy(memo, l);
    size_t before = st->ids.len;
    uint32_t id = len <= m->max_span_len && bpe_seg_may_be_token(m, p, len) ? bpe_span_probe(m, m->span_tab, m->span_mask, k->h, k->w0, p, len) : BPE_NONE;
    if (id != BPE_NONE)
        st->ids.ids[st->ids.len++] = id;
    else if (bpe_encode_span_multi(m, memo, p, len, &st->ids))
        return -1;
    size_t nt = st->ids.len - before;
    if (nt <= BPE_PC_MAXLEN) pc_insert(l, b, k, want, gen, st->ids.ids + before, nt);
    return st->ids.cap - st->ids.len >= room ? 1 : bpe_vec_reserve(&st->ids, room) ? -1 : 1;
}

/* piece_emit's most frequent case, inline: a hit in slot 0 of the piece's own line on an entry already marked hit and
 * held in one line (nothing in the line changes: exactly what piece_emit does there); everything else in piece_emit,
 * out of line.  On English text nine pieces in ten take it, and the call's setup and the function's prologue had
 * cost as many instructions as the hit itself. */
__attribute__((noinline)) static int piece_emit_slow(const bpe_model *m, bpe_memo *memo, uint32_t gen, const uint8_t *p,
                                                     size_t len, const piece_key *k, size_t room, enc_state *st) {
    return piece_emit(m, memo, gen, p, len, k, room, st);
}

static inline __attribute__((always_inline)) int piece_emit_fast(const bpe_model *m, bpe_memo *memo, uint32_t gen,
                                                                 const uint8_t *p, size_t len, const piece_key *k,
                                                                 size_t room, enc_state *st) {
    const bpe_pc_line *l = pc_line(memo, k->h);
    const uint32_t t0 = l->s[0].tag;
    if (FSTOK_LIKELY(l->s[0].k0 == k->w0 && l->s[0].k1 == k->w1 &&
                     (t0 & (PC_MATCH | PC_HIT | PC_DBL)) == (gen | (uint32_t)len | PC_HIT))) {
        memcpy(st->ids.ids + st->ids.len, l->wide.ids, sizeof l->wide.ids); /* all: no branch on ntok */
        st->ids.len += PC_NTOK(t0);
        return 0;
    }
    return piece_emit_slow(m, memo, gen, p, len, k, room, st);
}

/* ---- Cold pieces in lockstep.  On text never seen before most of the time goes to pieces that miss the cache and
 * are not one token: their merge loops wait on one pair lookup after another, each a line of a pair table that is
 * not in the core's caches (o200k, English and multilingual documents: ~0.8 us per such piece).  pc_fill_cold runs
 * up to PC_LANES of them side by side before the pieces are emitted: each round merges one pair in every lane, then
 * fetches the lines of all the new pairs' lookups at once and only then reads them, so their memory latencies
 * overlap.  The results go into the piece cache, where the emitting loop finds them (exact either way: a piece
 * evicted meanwhile is encoded again there).  Pieces of 17..PC_LONG_MAXLEN bytes (words of scripts without spaces,
 * long words) take the lanes too and go in as long entries: encoded one at a time their backtracking walks the
 * trie a byte at a time, each step a line not in the caches. */
#define PC_LANES 8

/* A lane: one piece's tokens at fixed positions (a merge keeps the left one and unlinks the right one: nx / pv link
 * the live positions in order, position 0 is always live), and the rank of the pair that starts at each position,
 * biased (rank ^ PC_RB) so that signed compares order ranks as unsigned ones: BPE_NONE (no pair, or a dead position,
 * or the last one) is INT32_MAX, the largest.  The lowest-ranked pair, leftmost on a tie, is then the lowest biased
 * rank at the lowest position: a few SSE2 compares over the whole array, with no branch per position and nothing
 * shifted after a merge. */
#define PC_RB 0x80000000u
#define PC_LANE_CAP 24 /* = PC_LONG_MAXLEN, a multiple of 8 */
_Static_assert(PC_LANE_CAP == PC_LONG_MAXLEN && PC_LANE_CAP % 8 == 0, "lane size");

typedef struct {
    uint32_t rk[PC_LANE_CAP] __attribute__((aligned(32)));
    uint32_t tok[PC_LANE_CAP];
    uint8_t nx[PC_LANE_CAP], pv[PC_LANE_CAP];
    uint32_t n, k; /* positions, live tokens */
} pc_lane;

/* start loading the lines that bpe_pair_get(m, a, b) reads first */
static inline void pair_get_prefetch(const bpe_model *m, uint32_t a, uint32_t b) {
    if ((a | b) < BPE_PAIR_SMALL && m->pair_small) {
        uint32_t k = a * BPE_PAIR_SMALL + b;
        __builtin_prefetch(m->pair_small + (k >> 6));
        __builtin_prefetch(m->pair_small_base + (k >> 6));
        return;
    }
    uint64_t key = ((uint64_t)a << BPE_PAIR_ID_BITS) | b, bit = bpe_bloom_bit(key, m->bloom_shift);
    __builtin_prefetch(m->pair_bloom + (bit >> 6));
    __builtin_prefetch(m->pair_hot + bpe_pair_slot(key, m->pair_hot_shift));
    __builtin_prefetch(m->pair_tab + bpe_pair_slot(key, m->pair_shift));
}

#ifdef __SSE2__
/* signed 32-bit minimum (SSE2 has none) */
static inline __m128i pc_min32(__m128i a, __m128i b) {
    __m128i gt = _mm_cmpgt_epi32(a, b);
    return _mm_or_si128(_mm_and_si128(gt, b), _mm_andnot_si128(gt, a));
}
#endif

/* the lowest biased rank of rk[0:nv*4) (nv = 2, 4 or 6) and its lowest position *at */
#ifdef PC_X86
__attribute__((target("avx2"), always_inline)) static inline uint32_t pc_lane_min_avx2(const uint32_t *rk, int nv,
                                                                                      uint32_t *at) {
    const __m256i *v = (const __m256i *)rk;
    __m256i y0 = _mm256_load_si256(v), y1 = y0, y2 = y0, mn = y0;
    if (nv > 2) {
        y1 = _mm256_load_si256(v + 1);
        mn = _mm256_min_epi32(mn, y1);
        if (nv > 4) {
            y2 = _mm256_load_si256(v + 2);
            mn = _mm256_min_epi32(mn, y2);
        }
    }
    __m128i h = _mm_min_epi32(_mm256_castsi256_si128(mn), _mm256_extracti128_si256(mn, 1));
    h = _mm_min_epi32(h, _mm_shuffle_epi32(h, 0x4E));
    h = _mm_min_epi32(h, _mm_shuffle_epi32(h, 0xB1));
    __m256i b = _mm256_broadcastd_epi32(h);
#define PC_EQ8(y) ((uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32((y), b))))
    *at = (uint32_t)__builtin_ctz(PC_EQ8(y0) | PC_EQ8(y1) << 8 | PC_EQ8(y2) << 16); /* (y1, y2 repeat y0 when not
                                                                                       loaded: never the lowest bit) */
#undef PC_EQ8
    return (uint32_t)_mm_cvtsi128_si32(h);
}
#endif

static inline __attribute__((always_inline)) uint32_t pc_lane_min(const uint32_t *rk, int nv, uint32_t *at) {
#ifdef __SSE2__
    const __m128i *v = (const __m128i *)rk;
    __m128i x0 = _mm_load_si128(v), x1 = _mm_load_si128(v + 1), x2 = x0, x3 = x1, x4 = x0, x5 = x1;
    __m128i mn = pc_min32(x0, x1);
    if (nv > 2) {
        x2 = _mm_load_si128(v + 2), x3 = _mm_load_si128(v + 3);
        mn = pc_min32(mn, pc_min32(x2, x3));
        if (nv > 4) {
            x4 = _mm_load_si128(v + 4), x5 = _mm_load_si128(v + 5);
            mn = pc_min32(mn, pc_min32(x4, x5));
        }
    }
    mn = pc_min32(mn, _mm_shuffle_epi32(mn, 0x4E));
    mn = pc_min32(mn, _mm_shuffle_epi32(mn, 0xB1));
#define PC_EQ(x) ((uint32_t)_mm_movemask_ps(_mm_castsi128_ps(_mm_cmpeq_epi32((x), mn))))
    uint32_t mask = PC_EQ(x0) | PC_EQ(x1) << 4 | PC_EQ(x2) << 8 | PC_EQ(x3) << 12 | PC_EQ(x4) << 16 | PC_EQ(x5) << 20;
#undef PC_EQ
    *at = (uint32_t)__builtin_ctz(mask); /* (x2..x5 repeat x0, x1 when not loaded: their bits are never the lowest) */
    return (uint32_t)_mm_cvtsi128_si32(mn);
#else
    uint32_t best = (uint32_t)INT32_MAX, bi = 0;
    for (int i = 0; i < 4 * nv; i++)
        if ((int32_t)rk[i] < (int32_t)best) best = rk[i], bi = (uint32_t)i;
    *at = bi;
    return best;
#endif
}

#ifdef PC_X86
/* bpe_pair_get with the hardware popcount (in a function built for it) */
__attribute__((target("popcnt"), always_inline)) static inline uint32_t pc_pair_get_hw(const bpe_model *m, uint32_t a,
                                                                                     uint32_t b) {
    if ((a | b) < BPE_PAIR_SMALL && m->pair_small) {
        uint32_t k = a * BPE_PAIR_SMALL + b;
        uint64_t w = m->pair_small[k >> 6], bit = 1ull << (k & 63);
        if (!(w & bit)) return BPE_NONE;
        return m->pair_small_val[m->pair_small_base[k >> 6] + (uint32_t)__builtin_popcountll(w & (bit - 1))];
    }
    return bpe_pair_lookup(m, a, b, 1);
}
#endif

/* bpe_encode_short on nl pieces at once (lanes set up by pc_lane_init): the same merges, lane by lane, in the same
 * order.  Each round merges one pair in every live lane, then fetches the lines of all the new pairs' lookups at once
 * and only then reads them.  Internal ids are left in the lanes (pc_lane_out reads them in order).  MIN and GET: the
 * lane minimum and the pair lookup of the build (AVX2 and popcnt, or the baseline) */
#define PC_LANES_MERGE_BODY(MIN, GET)                                                                                  \
    uint32_t act = 0;                                                                                                  \
    for (size_t i = 0; i < nl; i++) act |= (uint32_t)(L[i].k > 1) << i;                                                \
    while (act) {                                                                                                      \
        uint32_t pl[2 * PC_LANES], ps[2 * PC_LANES], pa[2 * PC_LANES], pb[2 * PC_LANES];                               \
        size_t np = 0;                                                                                                 \
        for (uint32_t w = act; w; w &= w - 1) {                                                                        \
            uint32_t li = (uint32_t)__builtin_ctz(w), bi;                                                              \
            pc_lane *x = &L[li];                                                                                       \
            uint32_t n = x->n;                                                                                         \
            uint32_t best = MIN(x->rk, n <= 8 ? 2 : n <= 16 ? 4 : 6, &bi);                                             \
            if (best == (uint32_t)INT32_MAX) {                                                                         \
                act &= ~(1u << li);                                                                                    \
                continue;                                                                                              \
            }                                                                                                          \
            uint32_t t = best ^ PC_RB, j = x->nx[bi], nj = x->nx[j];                                                   \
            x->tok[bi] = t;                                                                                            \
            x->rk[j] = (uint32_t)INT32_MAX;                                                                            \
            x->rk[bi] = (uint32_t)INT32_MAX;                                                                           \
            x->nx[bi] = (uint8_t)nj;                                                                                   \
            if (nj < n) {                                                                                              \
                x->pv[nj] = (uint8_t)bi;                                                                               \
                pl[np] = li, ps[np] = bi, pa[np] = t, pb[np] = x->tok[nj];                                             \
                np++;                                                                                                  \
            }                                                                                                          \
            if (bi > 0) {                                                                                              \
                uint32_t p = x->pv[bi];                                                                                \
                pl[np] = li, ps[np] = p, pa[np] = x->tok[p], pb[np] = t;                                               \
                np++;                                                                                                  \
            }                                                                                                          \
            if (--x->k <= 1) act &= ~(1u << li);                                                                       \
        }                                                                                                              \
        for (size_t i = 0; i < np; i++) pair_get_prefetch(m, pa[i], pb[i]);                                            \
        for (size_t i = 0; i < np; i++) L[pl[i]].rk[ps[i]] = GET(m, pa[i], pb[i]) ^ PC_RB;                             \
    }

#ifdef PC_X86
__attribute__((target("avx2,popcnt"))) static void pc_lanes_merge_hw(const bpe_model *m, pc_lane *L, size_t nl) {
    PC_LANES_MERGE_BODY(pc_lane_min_avx2, pc_pair_get_hw)
}
#endif

static void pc_lanes_merge_sw(const bpe_model *m, pc_lane *L, size_t nl) { PC_LANES_MERGE_BODY(pc_lane_min, bpe_pair_get) }
#undef PC_LANES_MERGE_BODY

static inline void pc_lanes_merge(const bpe_model *m, pc_lane *L, size_t nl) {
#ifdef PC_X86
    if (pc_hw_lanes) {
        pc_lanes_merge_hw(m, L, nl);
        return;
    }
#endif
    pc_lanes_merge_sw(m, L, nl);
}

/* set a lane up for the n bytes at s (2 <= n <= PC_LANE_CAP): byte tokens, the ranks of their pairs, the links */
static inline void pc_lane_init(const bpe_model *m, pc_lane *x, const uint8_t *s, size_t n) {
    static const uint8_t seq[PC_LANE_CAP + 1] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                                                 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24};
    for (size_t i = 0; i < PC_LANE_CAP; i++) x->rk[i] = (uint32_t)INT32_MAX;
    uint32_t c = s[0];
    for (size_t j = 0; j + 1 < n; j++) {
        uint32_t d = s[j + 1];
        x->tok[j] = m->byte_tok[c];
        x->rk[j] = m->byte_pair[c << 8 | d] ^ PC_RB;
        c = d;
    }
    x->tok[n - 1] = m->byte_tok[c];
    memcpy(x->nx, seq + 1, PC_LANE_CAP);
    memcpy(x->pv + 1, seq, PC_LANE_CAP - 1);
    x->n = x->k = (uint32_t)n;
}

/* a merged lane's internal ids, in order, into out (returns how many) */
static inline size_t pc_lane_out(const pc_lane *x, uint32_t *out) {
    size_t k = 0;
    for (uint32_t i = 0; i < x->n; i = x->nx[i]) out[k++] = x->tok[i];
    return k;
}

/* is the piece (key k, want = gen | len) in its line or the buddy?  (A look only: nothing moves.) */
static inline int pc_has(bpe_memo *memo, const piece_key *k, uint32_t want) {
    bpe_pc_line *l = pc_line(memo, k->h), *b = pc_buddy(memo, l);
    if (l->s[0].k0 == k->w0 && l->s[0].k1 == k->w1 && (l->s[0].tag & PC_MATCH) == want) return 1;
    if (PC_NTOK(l->s[0].tag) <= BPE_PC_SLOTTOK && pc_slot_is(&l->s[1], k, want)) return 1;
    if (b == l) return 0;
    if (pc_slot_is(&b->s[0], k, want)) return 1;
    return PC_NTOK(b->s[0].tag) <= BPE_PC_SLOTTOK && pc_slot_is(&b->s[1], k, want);
}

/* is the long entry of key k (third word w2) in the pair l, b?  (pc_long_get's test, nothing copied) */
static inline int pc_long_is(const bpe_pc_line *l, const bpe_pc_line *b, const piece_key *k, uint64_t w2,
                             uint32_t want) {
    return l->s[0].k0 == k->w0 && l->s[0].k1 == k->w1 && (l->s[0].tag & PC_MATCH) == want && b != l &&
           b->s[0].k0 == w2 && b->s[0].k1 == k->w0 && (b->s[0].tag & PC_MATCH) == (want | PC_CONT);
}

/* is the long entry in its own pair or its second one (where piece_emit_long looks)? */
static inline int pc_has_long(bpe_memo *memo, const piece_key *k, uint64_t w2, uint32_t want) {
    bpe_pc_line *l = pc_line(memo, k->h);
    if (pc_long_is(l, pc_buddy(memo, l), k, w2, want)) return 1;
    bpe_pc_line *a = pc_alt(memo, l);
    return a && pc_long_is(a, pc_buddy(memo, a), k, w2, want);
}

/* encode the nl lanes' pieces (set up from their bytes) and store them in the piece cache (w2[i]: the third key
 * word of a piece of more than BPE_PC_MAXLEN bytes, stored as a long entry) */
static void pc_lanes_run(const bpe_model *m, bpe_memo *memo, uint32_t gen, pc_lane *L, const piece_key *keys,
                         const uint64_t *w2, const uint8_t *const *p, const uint8_t *lens, size_t nl) {
    for (size_t i = 0; i < nl; i++) pc_lane_init(m, &L[i], p[i], lens[i]);
    pc_lanes_merge(m, L, nl);
    for (size_t i = 0; i < nl; i++) {
        uint32_t t[PC_LANE_CAP];
        size_t nt = pc_lane_out(&L[i], t);
        if (!m->int_is_ext)
            for (size_t j = 0; j < nt; j++) t[j] = m->int_ext[t[j]];
        bpe_pc_line *l = pc_line(memo, keys[i].h);
        if (lens[i] > BPE_PC_MAXLEN)
            pc_insert_long(memo, l, pc_buddy(memo, l), &keys[i], w2[i], gen | lens[i], gen, t, nt);
        else {
            pc_insert(l, pc_buddy(memo, l), &keys[i], gen | lens[i], gen, t, nt);
            if (memo->shared) sc_put(memo->shared, keys[i].h, keys[i].w0, keys[i].w1, lens[i], t, nt);
        }
    }
}

/* The pieces [ends[j], ends[j + 1]) of base, j < k (avail_end bytes readable at base), that miss the piece cache and
 * are not one token (as piece_emit / piece_emit_long would find), encoded PC_LANES at a time into the cache; those
 * that are one token go in too.  The keys of the pieces of <= PC_LONG_MAXLEN bytes are left in wk[0:k) (for the
 * emitting loop).  Returns how many pieces it stored. */
#define PC_FILL_WINDOW 32
static size_t pc_fill_cold(const bpe_model *m, bpe_memo *memo, uint32_t gen, const uint8_t *base, const size_t *ends,
                           size_t k, size_t avail_end, piece_key *wk) {
    pc_lane L[PC_LANES];
    piece_key lk[PC_LANES];
    uint64_t lw2[PC_LANES], ww2[PC_FILL_WINDOW];
    const uint8_t *lp[PC_LANES];
    uint8_t ll[PC_LANES];
    size_t nl = 0, filled = 0, filled_long = 0, single = 0;
    for (size_t w0 = 0; w0 < k; w0 += PC_FILL_WINDOW) {
        size_t w1 = w0 + PC_FILL_WINDOW < k ? w0 + PC_FILL_WINDOW : k;
        for (size_t j = w0; j < w1; j++) { /* keys first, and the lines they will read */
            size_t len = ends[j + 1] - ends[j];
            if (len > PC_LONG_MAXLEN) continue;
            piece_key *key = &wk[j];
            const uint8_t *p = base + ends[j];
            bpe_pc_line *l;
            if (len < 2) { /* (its key: the emitting loop's) */
                piece_key_of(p, len, avail_end - ends[j], key);
                continue;
            }
            if (len <= BPE_PC_MAXLEN) {
                piece_key_of(p, len, avail_end - ends[j], key);
                l = pc_line(memo, key->h);
                ww2[j - w0] = 0;
            } else {
                piece_key_long(p, len, key);
                ww2[j - w0] = piece_w2(p, len, avail_end - ends[j]);
                l = pc_line(memo, key->h);
                bpe_pc_line *a = pc_alt(memo, l);
                if (a) {
                    __builtin_prefetch(a);
                    __builtin_prefetch(pc_buddy(memo, a));
                }
            }
            __builtin_prefetch(l);
            __builtin_prefetch(pc_buddy(memo, l));
            __builtin_prefetch(m->span_tab + 2 * (key->h & m->span_mask));
            if (m->span_bloom) __builtin_prefetch(m->span_bloom + ((key->h >> 40) & m->span_bloom_mask));
            if (memo->shared && len <= BPE_PC_MAXLEN) sc_prefetch(memo->shared, key->h);
        }
        for (size_t j = w0; j < w1; j++) {
            size_t len = ends[j + 1] - ends[j];
            if (len < 2 || len > PC_LONG_MAXLEN) continue;
            const piece_key *key = &wk[j];
            const uint64_t w2 = ww2[j - w0];
            const uint8_t *p = base + ends[j];
            if (len <= BPE_PC_MAXLEN ? pc_has(memo, key, gen | (uint32_t)len)
                                     : pc_has_long(memo, key, w2, gen | (uint32_t)len))
                continue;
            if (len <= m->max_span_len && (!m->span_bloom || bpe_span_bloom_has(m, key->h))) {
                uint32_t id = bpe_span_probe(m, m->span_tab, m->span_mask, key->h, key->w0, p, len);
                if (id != BPE_NONE) { /* one token: stored now, so that the emitting loop hits */
                    bpe_pc_line *l = pc_line(memo, key->h);
                    if (len <= BPE_PC_MAXLEN) pc_insert(l, pc_buddy(memo, l), key, gen | (uint32_t)len, gen, &id, 1);
                    else pc_insert_long(memo, l, pc_buddy(memo, l), key, w2, gen | (uint32_t)len, gen, &id, 1);
                    single++;
                    continue;
                }
            }
            if (memo->shared && len <= BPE_PC_MAXLEN) { /* merged by another thread of the call? */
                uint32_t sids[SC_IDS];
                size_t got = sc_get(memo->shared, key->h, key->w0, key->w1, len, sids);
                if (got) {
                    bpe_pc_line *l = pc_line(memo, key->h);
                    pc_insert(l, pc_buddy(memo, l), key, gen | (uint32_t)len, gen, sids, got);
                    single++; /* (stored without merging, as a one-token piece: a miss all the same) */
                    continue;
                }
            }
            int dup = 0;
            for (size_t i = 0; i < nl && !dup; i++)
                dup = ll[i] == len && lk[i].w0 == key->w0 && lk[i].w1 == key->w1 && lw2[i] == w2;
            if (dup) continue;
            lk[nl] = *key;
            lw2[nl] = w2;
            lp[nl] = p;
            ll[nl] = (uint8_t)len;
            filled_long += len > BPE_PC_MAXLEN;
            if (++nl == PC_LANES) {
                pc_lanes_run(m, memo, gen, L, lk, lw2, lp, ll, nl);
                filled += nl;
                nl = 0;
            }
        }
    }
    if (nl) pc_lanes_run(m, memo, gen, L, lk, lw2, lp, ll, nl);
    filled += nl;
    if (filled) __atomic_fetch_add(&pc_lanes_filled, filled, __ATOMIC_RELAXED);
    if (filled_long) __atomic_fetch_add(&pc_lanes_filled_long, filled_long, __ATOMIC_RELAXED);
    return filled + single;
}

/* the thread's recent share of pieces that missed the piece cache: after every 1024 pieces, cold while more than 1 in
 * PC_LANES_RATE missed (only the speed depends on it: English text new to the cache misses ~1 piece in 25, too few
 * for the lanes to fill, and the extra look at every piece cost more than they saved) */
#ifndef PC_LANES_RATE
#define PC_LANES_RATE 4
#endif
static inline void pc_cold_update(bpe_memo *memo, size_t seen, size_t missed) {
    memo->pc_seen += (uint32_t)seen;
    memo->pc_missed += (uint32_t)missed;
    if (memo->pc_seen >= 1024) {
        memo->pc_cold = PC_LANES_RATE * (uint64_t)memo->pc_missed > memo->pc_seen;
        memo->pc_seen = memo->pc_missed = 0;
    }
}

#endif /* FSTOK_BPE_PIECE_CACHE_H */
