#ifndef FSTOK_BPE_DIRECT_H
#define FSTOK_BPE_DIRECT_H

/* Direct runs: a stretch of pieces whose bytes (by the bigram/trigram filters built at load, bpe_runtime.h)
 * cannot merge across the piece boundaries is encoded in one pass without the per-piece cache, with SIMD
 * flag scans (AVX-512 / AVX2 / scalar).  Python-free.  Oracle: the per-piece path (tests/test_bpe_direct_runs.py)
 * and fstok/reference/bpe.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bpe_piece_cache.h"

/* ---- direct runs (random text; docs/design/bpe.md)
 * On random text the piece cache costs more than it saves: most pieces are new (a line from L3 or memory, then the
 * miss path), and a cached piece costs a line that is rarely in L1/L2.  But random text is cut by dead boundaries
 * (bpe_seg_cross) into segments of one to three bytes, which encode without a merge search (lib_bpe.c seg_emit).  A
 * direct run takes a run of consecutive pieces (<= DIRECT_MAX bytes in all) at once: the boundary flags of all its
 * positions (AVX-512 or AVX2 gathers, else a branch-free loop), the dead boundaries as bit masks, then one loop over
 * the segments, across piece ends (BPE of a piece is BPE of its segments; a piece end ends a segment).  Segments of
 * >= 4 bytes are encoded as pre-tokens of their own (bpe_encode_span_avail: the same ids). */
#define DIRECT_MAX 2048  /* bytes of a run */
#define DIRECT_CHUNK 2048 /* pieces (and bytes) of a direct batch's find_ends window */
/* pieces of the first direct batch after a non-direct one, doubled while direct batches go on (up to DIRECT_CHUNK).
 * Why not DIRECT_CHUNK at once: a direct batch does not fill the piece cache, so when a batch of natural
 * text that was new to the cache started one (multilingual text on its first passes), its ~2,000 pieces missed
 * again on the next call, which started a direct batch again: o200k multilingual.txt needed ~8 calls instead of 4
 * to reach its steady speed.  A probe of 256 pieces ends after an eighth of that (its exit tests need no more);
 * random text loses nothing
 * (`python tools/ab_bpe.py o200k_base,cl100k_base,r50k_base rand,rot,eng1,multilingual,coldml,coldeng 3 A B`). */
#define DIRECT_PROBE 256
#define DIRECT_KEEP 4    /* a direct batch with <= 1 dead boundary in DIRECT_KEEP pieces ends direct batches */
#define DIRECT_HOLD 16   /* batches without a direct one after that (doubled after each stop, up to 64x) */
#define DIRECT_LONG 32   /* so does more than 1 byte in DIRECT_LONG in segments of >= 4 bytes, over the last direct
                            batches (DIRECT_SLACK bytes of slack): random text 0-1.4%, multilingual 10-66% */
#define DIRECT_SLACK 1024
#define DIRECT_WORDS (DIRECT_MAX / 64 + 2)


/* flags of positions x in [x0, x1) of a run at base + r0 (position x: the boundary between base[r0 + x - 1] and
 * base[r0 + x]): bit x of IN/ST/EN (BPE_SEG_* of the bigram), TR (the trigram base[r0 + x - 2 .. r0 + x] is in the
 * filter; x >= 2), and pv[x] = the bigram's byte pair id (0xFFFFFF: none).  Scalar version. */
/* the bigram flags of position x into bit x & 63 of in/stt/en, and pv[x] (no branch: see dir_flags_scalar) */
static inline void dir_flag_bigram(const uint32_t *sbp, const uint8_t *p, size_t x, uint64_t *in, uint64_t *stt,
                                   uint64_t *en, uint32_t *pv) {
    uint32_t v = sbp[(uint32_t)p[x - 1] << 8 | p[x]];
    uint64_t f = v >> 24, sh = x & 63;
    pv[x] = v & 0xFFFFFFu;
    *in |= (f & BPE_SEG_IN ? 1ull : 0) << sh;
    *stt |= (f & BPE_SEG_START ? 1ull : 0) << sh;
    *en |= (f & BPE_SEG_END ? 1ull : 0) << sh;
}

static void dir_flags_scalar(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p, size_t x0, size_t x1,
                             uint64_t *IN, uint64_t *ST, uint64_t *EN, uint64_t *TR, uint32_t *pv) {
    /* branch-free: on random text every flag is a coin toss, and three branches per byte mispredicted about as often
     * as they were taken (AMD Zen 3: direct_run 49% of o200k random; the flags loop most of it) */
    for (size_t x = x0; x < x1;) {
        size_t w = x >> 6, xe = (w + 1) * 64 < x1 ? (w + 1) * 64 : x1;
        uint64_t in = 0, stt = 0, en = 0, tr = 0;
        if (x < 2) dir_flag_bigram(sbp, p, x++, &in, &stt, &en, pv); /* position 1: no trigram */
        for (; x < xe; x++) {
            dir_flag_bigram(sbp, p, x, &in, &stt, &en, pv);
            uint32_t t = bpe_tri_bit((uint32_t)p[x - 2] << 16 | (uint32_t)p[x - 1] << 8 | p[x]);
            tr |= (uint64_t)((tri[t >> 5] >> (t & 31)) & 1) << (x & 63);
        }
        IN[w] |= in;
        ST[w] |= stt;
        EN[w] |= en;
        TR[w] |= tr;
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define DIR_HAVE_AVX512 1
/* the same, 16 positions at a time with two gathers (x0 >= 1; p[x0 - 2] is read only where x0 >= 2) */
__attribute__((target("avx512f,avx512bw,avx512vl"))) static void
dir_flags_avx512(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p, size_t x0, size_t x1, uint64_t *IN,
                 uint64_t *ST, uint64_t *EN, uint64_t *TR, uint32_t *pv) {
    const __m512i ff = _mm512_set1_epi32(0xFFFF), low24 = _mm512_set1_epi32(0xFFFFFF), one = _mm512_set1_epi32(1);
    const __m512i fin = _mm512_set1_epi32(BPE_SEG_IN << 24), fst = _mm512_set1_epi32(BPE_SEG_START << 24),
                  fen = _mm512_set1_epi32(BPE_SEG_END << 24), mul = _mm512_set1_epi32((int)0x9E3779B1u);
    for (size_t x = x0; x < x1; x += 16) {
        size_t cnt = x1 - x < 16 ? x1 - x : 16;
        __mmask16 lm = (__mmask16)((1u << cnt) - 1);
        __mmask16 tm = lm & (__mmask16)(x >= 2 ? 0xFFFFu : 0xFFFFu << (2 - x)); /* lanes with x >= 2 */
        __m512i b2 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lm, p + x));
        __m512i b1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lm, p + x - 1));
        /* p[x - 2 + l] for lanes l with x + l >= 2: a load from p + x - 2 would start before the run when x < 2 */
        __m512i b0 = x >= 2 ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(lm, p + x - 2))
                            : _mm512_alignr_epi32(b1, _mm512_setzero_si512(), 15);
        __m512i big = _mm512_or_si512(_mm512_slli_epi32(b1, 8), b2);
        __m512i v = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), lm, _mm512_and_si512(big, ff), sbp, 4);
        _mm512_mask_storeu_epi32(pv + x, lm, _mm512_and_si512(v, low24));
        __m512i k3 = _mm512_or_si512(_mm512_slli_epi32(b0, 16), big);
        __m512i h = _mm512_srli_epi32(_mm512_mullo_epi32(k3, mul), 32 - BPE_SEG_TRI_BITS);
        __m512i tw = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), tm, _mm512_srli_epi32(h, 5), tri, 4);
        __m512i tb = _mm512_srlv_epi32(tw, _mm512_and_si512(h, _mm512_set1_epi32(31)));
        uint64_t sh = x & 63; /* 16 | x ... not assumed: positions x..x+15 may straddle a word */
        uint64_t in = _mm512_mask_test_epi32_mask(lm, v, fin), stt = _mm512_mask_test_epi32_mask(lm, v, fst),
                 en = _mm512_mask_test_epi32_mask(lm, v, fen), tr = _mm512_mask_test_epi32_mask(tm, tb, one);
        size_t w = x >> 6;
        IN[w] |= in << sh;
        ST[w] |= stt << sh;
        EN[w] |= en << sh;
        TR[w] |= tr << sh;
        if (sh > 48) {
            IN[w + 1] |= in >> (64 - sh);
            ST[w + 1] |= stt >> (64 - sh);
            EN[w + 1] |= en >> (64 - sh);
            TR[w + 1] |= tr >> (64 - sh);
        }
    }
}
static int dir_avx512 = -1; /* $FSTOK_BPE_NO_AVX512=1: the AVX2 or scalar flags (tests: all three) */

/* the same on AVX2, 8 positions at a time (two gathers; x >= 2 here, and every byte read is inside the run) */
__attribute__((target("avx2"))) static void dir_flags_avx2(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p,
                                                           size_t x0, size_t x1, uint64_t *IN, uint64_t *ST,
                                                           uint64_t *EN, uint64_t *TR, uint32_t *pv) {
    size_t x = x0;
    if (x < 2) { /* position 1 has no trigram */
        size_t e = x1 < 2 ? x1 : 2;
        dir_flags_scalar(sbp, tri, p, x, e, IN, ST, EN, TR, pv);
        x = e;
    }
    const __m256i low24 = _mm256_set1_epi32(0xFFFFFF), mul = _mm256_set1_epi32((int)0x9E3779B1u),
                  m31 = _mm256_set1_epi32(31);
    for (; x + 8 <= x1; x += 8) {
        __m256i b2 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + x)));
        __m256i b1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + x - 1)));
        __m256i b0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + x - 2)));
        __m256i big = _mm256_or_si256(_mm256_slli_epi32(b1, 8), b2);
        __m256i v = _mm256_i32gather_epi32((const int *)sbp, big, 4);
        _mm256_storeu_si256((__m256i *)(pv + x), _mm256_and_si256(v, low24));
        __m256i h = _mm256_srli_epi32(_mm256_mullo_epi32(_mm256_or_si256(_mm256_slli_epi32(b0, 16), big), mul),
                                      32 - BPE_SEG_TRI_BITS);
        __m256i tw = _mm256_i32gather_epi32((const int *)tri, _mm256_srli_epi32(h, 5), 4);
        __m256i tb = _mm256_srlv_epi32(tw, _mm256_and_si256(h, m31));
        /* the flag bits (24: IN, 25: START, 26: END; the trigram's bit 0) moved to the sign bit of each lane */
        uint64_t in = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 31 - 24)));
        uint64_t stt = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 31 - 25)));
        uint64_t en = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 31 - 26)));
        uint64_t tr = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_slli_epi32(tb, 31)));
        size_t w = x >> 6, sh = x & 63;
        IN[w] |= in << sh;
        ST[w] |= stt << sh;
        EN[w] |= en << sh;
        TR[w] |= tr << sh;
        if (sh > 56) { /* positions x..x+7 straddle a word */
            IN[w + 1] |= in >> (64 - sh);
            ST[w + 1] |= stt >> (64 - sh);
            EN[w + 1] |= en >> (64 - sh);
            TR[w + 1] |= tr >> (64 - sh);
        }
    }
    if (x < x1) dir_flags_scalar(sbp, tri, p, x, x1, IN, ST, EN, TR, pv);
}
static int dir_avx2 = -1; /* $FSTOK_BPE_NO_AVX2=1: the scalar flags (tests: all three) */
#endif

static inline void dir_flags(const uint32_t *sbp, const uint32_t *tri, const uint8_t *p, size_t x0, size_t x1,
                             uint64_t *IN, uint64_t *ST, uint64_t *EN, uint64_t *TR, uint32_t *pv) {
#ifdef DIR_HAVE_AVX512
    int v = __atomic_load_n(&dir_avx512, __ATOMIC_ACQUIRE);
    if (v < 0) { /* (racing threads store the same values; dir_avx2 first) */
        const char *e = getenv("FSTOK_BPE_NO_AVX512"), *e2 = getenv("FSTOK_BPE_NO_AVX2");
        __builtin_cpu_init();
        v = !(e && e[0] == '1') && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl");
        __atomic_store_n(&dir_avx2, !(e2 && e2[0] == '1') && __builtin_cpu_supports("avx2"), __ATOMIC_RELAXED);
        __atomic_store_n(&dir_avx512, v, __ATOMIC_RELEASE);
    }
    if (v) {
        dir_flags_avx512(sbp, tri, p, x0, x1, IN, ST, EN, TR, pv);
        return;
    }
    if (__atomic_load_n(&dir_avx2, __ATOMIC_RELAXED) > 0) {
        dir_flags_avx2(sbp, tri, p, x0, x1, IN, ST, EN, TR, pv);
        return;
    }
#endif
    dir_flags_scalar(sbp, tri, p, x0, x1, IN, ST, EN, TR, pv);
}

static inline void dir_to_ext(const bpe_model *m, uint32_t *ids, size_t a, size_t b) {
    for (size_t i = a; i < b; i++) ids[i] = m->int_ext[ids[i]];
}

/* One run: pieces back to back from base + r0, piece i ending at pe[i] (offsets from base; np >= 1,
 * pe[np - 1] - r0 <= DIRECT_MAX); `avail`: bytes readable from base + r0.
 * Adds to *cuts the dead boundaries inside pieces.  0, or -1 when out of memory. */
__attribute__((noinline)) static int direct_run(const bpe_rt *self, bpe_memo *memo, const uint8_t *base, size_t r0, const size_t *pe,
                      size_t np, size_t avail, enc_state *st, size_t *cuts, size_t *longb) {
    const bpe_model *m = &self->m;
    const uint8_t *p = base + r0;
    const size_t R = pe[np - 1] - r0;
    const size_t nw = R / 64 + 1; /* words holding positions 0..R */
    uint64_t IN[DIRECT_WORDS + 1], ST[DIRECT_WORDS + 1], EN[DIRECT_WORDS + 1], TR[DIRECT_WORDS + 1],
        PE[DIRECT_WORDS + 1];
    uint32_t pv[DIRECT_MAX + 16];
    memset(IN, 0, (nw + 1) * 8);
    memset(ST, 0, (nw + 1) * 8);
    memset(EN, 0, (nw + 1) * 8);
    memset(TR, 0, (nw + 1) * 8);
    memset(PE, 0, (nw + 1) * 8);
    PE[0] = 1; /* position 0: the run's start */
    for (size_t i = 0; i < np; i++) {
        size_t x = pe[i] - r0;
        PE[x >> 6] |= 1ull << (x & 63);
    }
    if (R > 1) dir_flags(self->seg_bp, self->seg_dir, p, 1, R, IN, ST, EN, TR, pv);
    /* dead or piece end: cut.  live(x) = !PE(x) & IN(x) & (ST(x) | TR(x) & !PE(x-1)) & (EN(x) | TR(x+1) & !PE(x+1)) */
    uint64_t CUT[DIRECT_WORDS + 1];
    size_t ncut = 0;
    for (size_t w = 0; w < nw; w++) {
        uint64_t pe_prev = PE[w] << 1 | (w ? PE[w - 1] >> 63 : 0);
        uint64_t pe_next = PE[w] >> 1 | PE[w + 1] << 63;
        uint64_t tr_next = TR[w] >> 1 | TR[w + 1] << 63;
        uint64_t live = ~PE[w] & IN[w] & (ST[w] | (TR[w] & ~pe_prev)) & (EN[w] | (tr_next & ~pe_next));
        uint64_t valid = w == nw - 1 ? (R & 63) == 63 ? ~0ull : (2ull << (R & 63)) - 1 : ~0ull;
        CUT[w] = ~live & valid;
        ncut += (size_t)__builtin_popcountll(CUT[w] & ~PE[w]);
    }
    CUT[0] &= ~1ull; /* position 0 starts the first segment */
    *cuts += ncut;
    /* the segments: ids <= bytes, and a one-byte segment writes one slot past its id */
    if (st->ids.cap - st->ids.len < R + 16 && bpe_vec_reserve(&st->ids, R + 16)) return -1;
    const uint32_t *bt = m->byte_tok;
    uint32_t *o = st->ids.ids + st->ids.len;
    /* segments of <= 3 bytes write internal ids; ids.ids[conv, o) still need int_ext where it is not the identity */
    size_t conv = st->ids.len;
    size_t sa = 0;
    for (size_t w = 0; w < nw; w++) {
        uint64_t bits = CUT[w];
        while (bits) {
            size_t c = w * 64 + (size_t)__builtin_ctzll(bits), len = c - sa;
            bits &= bits - 1;
            if (FSTOK_LIKELY(len <= 2)) {
                uint32_t r = pv[sa + 1], tx = bt[p[sa]], ty = bt[p[c - 1]];
                int two = len == 2, merged = two & (r != 0xFFFFFFu);
                o[0] = merged ? r : tx;
                o[1] = ty;
                o += 1 + (two & !merged);
            } else if (len == 3) { /* lib_bpe.c seg_emit: the lower-ranked byte pair (a tie: the left), then a pair */
                uint32_t x = p[sa], z = p[sa + 2], r01 = pv[sa + 1], r12 = pv[sa + 2];
                if (r01 == 0xFFFFFFu && r12 == 0xFFFFFFu) {
                    o[0] = bt[x];
                    o[1] = bt[p[sa + 1]];
                    o[2] = bt[z];
                    o += 3;
                } else {
                    uint32_t l = r01 <= r12 ? r01 : bt[x], rr = r01 <= r12 ? bt[z] : r12, r = bpe_pair_get(m, l, rr);
                    if (r != BPE_NONE) *o++ = r;
                    else {
                        o[0] = l;
                        o[1] = rr;
                        o += 2;
                    }
                }
            } else { /* a segment of >= 4 bytes: a pre-token of its own (external ids) */
                *longb += len;
                st->ids.len = (size_t)(o - st->ids.ids);
                if (!m->int_is_ext) dir_to_ext(m, st->ids.ids, conv, st->ids.len);
                if (bpe_encode_span_avail(m, memo, p + sa, len, avail - sa, &st->ids)) return -1;
                o = st->ids.ids + st->ids.len;
                conv = st->ids.len;
            }
            sa = c;
        }
    }
    st->ids.len = (size_t)(o - st->ids.ids);
    if (!m->int_is_ext) dir_to_ext(m, st->ids.ids, conv, st->ids.len);
    return 0;
}

/* pieces: keys are computed and their cache lines prefetched this far ahead.  With the 8 MiB cache a line
 * often comes from L3 or memory: 32 beat 8 by 8-15% (whole english.txt, o200k).  The span table's line is
 * no longer prefetched too: ~95% of pieces hit the cache, and the extra loads only took fill buffers
 * (+3-4% without them). */
#define PC_AHEAD 32

/* The hot loop of whole-text encoding (find-mode patterns such as tiktoken's, pieces back to back):
 * DFA piece ends in chunks (fstok_dfa_find_ends: one transition, one store, one add per byte), then
 * each piece: short ones (<= 16 bytes, ~90% of English or code) through piece_emit, with their keys
 * computed and their cache lines prefetched PC_AHEAD pieces ahead (the loads of consecutive pieces
 * overlap instead of queueing);
 * long ones through bpe_encode_span_avail.  Fusing the two loops (4 DFA bytes, then one piece, so the
 * core could overlap the DFA's chain of dependent loads with the piece work) measured 5-10% slower.
 * Needs a memo and plain id output (no offsets, no planning). */

#endif /* FSTOK_BPE_DIRECT_H */
