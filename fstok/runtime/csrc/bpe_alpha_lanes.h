/* The small-alphabet lanes' merge loop (bpe_window.h, "small alphabets"), instantiated once per instruction set by
 * bpe_window.h: included with
 *   WA_NAME(x)       the instance's name for x (x##_512, x##_256)
 *   WA_TARGET_STEP   the target of the merge steps and of wa_valid (what WA_PAIR needs, and AVX2)
 *   WA_TARGET_INIT   the target of the window loop (what WA_INIT needs too)
 *   WA_PAIR          the local pair lookup: (buckets, multiplier, shift, key a << 10 | b) -> local id or 0x3FF
 *   WA_INIT          the window start: (alphabet, lane, bytes, n) -> nonzero when a byte is outside the alphabet
 * and WA_TWO (1: up to two merges per scan).  Not a header of its own: it sees bpe_window.h's types. */

/* valid_pair on local ids (the same loop: every pair it looks up is made of tokens of the alphabet) */
__attribute__((target(WA_TARGET_STEP), noinline)) static int WA_NAME(wa_valid)(const win_alpha *al, uint32_t t1, uint32_t t2) {
    const uint16_t *sp = al->lsplit;
    uint32_t limit = 0xFFFFFFFFu;
    for (;;) {
        uint32_t c = WA_PAIR(al->vb, al->mul, al->shift, t1 << 10 | t2);
        if (c != 0x3FF && c < limit) return 0;
        if (t1 > t2) {
            limit = t1;
            t1 = sp[2 * t1 + 1];
            if (t1 == limit) {
                limit = t2 + 1;
                t2 = sp[2 * t2];
                if (t2 + 1 == limit) return 1;
            }
        } else {
            limit = t2 + 1;
            t2 = sp[2 * t2];
            if (t2 + 1 == limit) {
                limit = t1;
                t1 = sp[2 * t1 + 1];
                if (t1 == limit) return 1;
            }
        }
    }
}

__attribute__((target(WA_TARGET_STEP), always_inline)) static inline int WA_NAME(wa_step)(const uint32_t *avb, uint32_t amul,
                                                                                 int ashift, wa_lane *L) {
    const __m256i *p = (const __m256i *)L->key;
    __m256i a = _mm256_min_epu16(_mm256_min_epu16(_mm256_load_si256(p), _mm256_load_si256(p + 1)),
                                 _mm256_min_epu16(_mm256_load_si256(p + 2), _mm256_load_si256(p + 3)));
    uint32_t ka = (uint32_t)_mm_cvtsi128_si32(
        _mm_minpos_epu16(_mm_min_epu16(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1))));
    uint32_t kk = ((ka & 0xFFC0) << 1) | (ka & 63);
#if WA_WIN == 128
    __m256i b = _mm256_min_epu16(_mm256_min_epu16(_mm256_load_si256(p + 4), _mm256_load_si256(p + 5)),
                                 _mm256_min_epu16(_mm256_load_si256(p + 6), _mm256_load_si256(p + 7)));
    uint32_t kb = (uint32_t)_mm_cvtsi128_si32(
        _mm_minpos_epu16(_mm_min_epu16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1))));
    uint32_t kc = ((kb & 0xFFC0) << 1) | 64 | (kb & 63);
    kk = kc < kk ? kc : kk;
#endif
    if (kk >= 0x3FFu << 7) return 0;
    uint32_t r = kk >> 7;
    size_t i = kk & 127, j = L->nx[i], q = L->nx[j];
    L->tok[i] = (uint16_t)r;
    L->key[j] = 0xFFFF;
    L->nx[i] = (uint8_t)q;
    if (q != WPOS_NONE) {
        L->pv[q] = (uint8_t)i;
        L->key[i] = (uint16_t)(WA_PAIR(avb, amul, ashift, r << 10 | L->tok[q]) << 6 | (i & 63));
    } else {
        L->key[i] = 0xFFFF;
    }
    size_t pp = L->pv[i];
    if (pp != WPOS_NONE) L->key[pp] = (uint16_t)(WA_PAIR(avb, amul, ashift, (uint32_t)L->tok[pp] << 10 | r) << 6 | (pp & 63));
    return 1;
}

/* Up to two merges per scan.  With kk (position i, pair (i, j), neighbours p = pv[i], q = nx[j]) the smallest key and
 * k2 (position i2, neighbours p2, j2, q2) the second smallest, merging kk then k2 is exactly what two steps would do
 * when the live positions {p, i, j, q} and {p2, i2, j2, q2} share at most an end (q == p2 or q2 == p: that position's
 * token is only read, its key written by one merge) and k2 is below both keys that the first merge makes (i's and
 * p's): then no key of the second merge's neighbourhood changed, and k2 is the minimum after the first merge. */
__attribute__((target(WA_TARGET_STEP), always_inline)) static inline void WA_NAME(wa_merge)(const uint32_t *avb, uint32_t amul,
                                                                                   int ashift, wa_lane *L, uint32_t r,
                                                                                   size_t i, uint32_t *ki,
                                                                                   uint32_t *kp) {
    size_t j = L->nx[i], q = L->nx[j];
    L->tok[i] = (uint16_t)r;
    L->key[j] = 0xFFFF;
    L->nx[i] = (uint8_t)q;
    L->live[(j >> 6) & 1] &= ~(1ull << (j & 63));
    uint32_t a = 0xFFFF, b = 0xFFFF;
    if (q != WPOS_NONE) {
        L->pv[q] = (uint8_t)i;
        a = WA_PAIR(avb, amul, ashift, r << 10 | L->tok[q]) << 6 | (i & 63);
    }
    L->key[i] = (uint16_t)a;
    size_t pp = L->pv[i];
    if (pp != WPOS_NONE) {
        b = WA_PAIR(avb, amul, ashift, (uint32_t)L->tok[pp] << 10 | r) << 6 | (pp & 63);
        L->key[pp] = (uint16_t)b;
    }
    *ki = ((a & 0xFFC0) << 1) | (uint32_t)i;
    *kp = ((b & 0xFFC0) << 1) | (uint32_t)(pp & 127);
}

__attribute__((target(WA_TARGET_STEP), always_inline)) static inline int WA_NAME(wa_step2)(const uint32_t *avb, uint32_t amul,
                                                                                  int ashift, wa_lane *L) {
    const __m256i *p = (const __m256i *)L->key;
    __m256i x0 = _mm256_load_si256(p), x1 = _mm256_load_si256(p + 1), x2 = _mm256_load_si256(p + 2),
            x3 = _mm256_load_si256(p + 3), x4 = _mm256_load_si256(p + 4), x5 = _mm256_load_si256(p + 5),
            x6 = _mm256_load_si256(p + 6), x7 = _mm256_load_si256(p + 7);
    __m256i a = _mm256_min_epu16(_mm256_min_epu16(x0, x1), _mm256_min_epu16(x2, x3));
    __m256i b = _mm256_min_epu16(_mm256_min_epu16(x4, x5), _mm256_min_epu16(x6, x7));
    uint32_t ka = (uint32_t)_mm_cvtsi128_si32(
                      _mm_minpos_epu16(_mm_min_epu16(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1)))) & 0xFFFF;
    uint32_t kb = (uint32_t)_mm_cvtsi128_si32(
                      _mm_minpos_epu16(_mm_min_epu16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1)))) & 0xFFFF;
    uint32_t ca = ((ka & 0xFFC0) << 1) | (ka & 63), cb = ((kb & 0xFFC0) << 1) | 64 | (kb & 63);
    int inA = ca < cb;
    uint32_t kk = inA ? ca : cb, other = inA ? cb : ca;
    if (kk >= 0x3FFu << 7) return 0;
    /* the second smallest: kk's half again with kk's key set to all ones, against the other half's minimum */
    __m256i sel = _mm256_set1_epi16((short)-inA), bk = _mm256_set1_epi16((short)(inA ? ka : kb));
    __m256i y0 = _mm256_blendv_epi8(x4, x0, sel), y1 = _mm256_blendv_epi8(x5, x1, sel),
            y2 = _mm256_blendv_epi8(x6, x2, sel), y3 = _mm256_blendv_epi8(x7, x3, sel);
    y0 = _mm256_or_si256(y0, _mm256_cmpeq_epi16(y0, bk));
    y1 = _mm256_or_si256(y1, _mm256_cmpeq_epi16(y1, bk));
    y2 = _mm256_or_si256(y2, _mm256_cmpeq_epi16(y2, bk));
    y3 = _mm256_or_si256(y3, _mm256_cmpeq_epi16(y3, bk));
    __m256i c = _mm256_min_epu16(_mm256_min_epu16(y0, y1), _mm256_min_epu16(y2, y3));
    uint32_t ks = (uint32_t)_mm_cvtsi128_si32(
                      _mm_minpos_epu16(_mm_min_epu16(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1)))) & 0xFFFF;
    uint32_t cs = ((ks & 0xFFC0) << 1) | (inA ? 0 : 64) | (ks & 63);
    uint32_t k2 = cs < other ? cs : other;
    size_t i = kk & 127, j = L->nx[i], q = L->nx[j], pp = L->pv[i];
    size_t lo1 = pp == WPOS_NONE ? i : pp, hi1 = q == WPOS_NONE ? j : q;
    uint32_t ki, kp;
    WA_NAME(wa_merge)(avb, amul, ashift, L, kk >> 7, i, &ki, &kp);
    if (k2 >= 0x3FFu << 7 || k2 > ki || k2 > kp) return 1;
    size_t i2 = k2 & 127, j2 = L->nx[i2], q2 = L->nx[j2], p2 = L->pv[i2];
    size_t lo2 = p2 == WPOS_NONE ? i2 : p2, hi2 = q2 == WPOS_NONE ? j2 : q2;
    if (hi2 <= lo1 || hi1 <= lo2) WA_NAME(wa_merge)(avb, amul, ashift, L, k2 >> 7, i2, &ki, &kp);
    return 1;
}

/* two windows on local ids in lockstep (n1 == 0: only the first); nonzero: a byte outside the alphabet (nothing
 * encoded) */
__attribute__((target(WA_TARGET_INIT))) static uint32_t WA_NAME(win_encode_x2_loc)(const win_tabs *t, wa_lane *L,
                                                                         const uint8_t *s0, size_t n0,
                                                                         const uint8_t *s1, size_t n1) {
    uint32_t bad = WA_INIT(t->al, &L[0], s0, n0);
    int a = 1, b = n1 > 0;
    if (b) bad |= WA_INIT(t->al, &L[1], s1, n1);
    if (bad) return bad;
    const uint32_t *avb = t->avb, amul = (uint32_t)t->amul;
    int ash = t->ashift;
#if WA_TWO
#define WA_STEP WA_NAME(wa_step2)
#else
#define WA_STEP WA_NAME(wa_step)
#endif
    while (a & b) {
        a = WA_STEP(avb, amul, ash, &L[0]);
        b = WA_STEP(avb, amul, ash, &L[1]);
    }
    while (a) a = WA_STEP(avb, amul, ash, &L[0]);
    while (b) b = WA_STEP(avb, amul, ash, &L[1]);
    return 0;
#undef WA_STEP
}

