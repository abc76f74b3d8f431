/* WordPiece table layout as the encoder reads it: the constants shared with the compiler
 * (fstok/compile/wordpiece.py, fstok/compile/bert_normalize.py; Python side fstok/wordpiece_layout.py),
 * the tables (`wp_tables`), the walk's record format (`blob`, built by wp_layout.h) with its decoders,
 * and the output buffer of ids/offsets.  Python-free.  Oracle: fstok/reference/wordpiece.py (TableExecutor
 * runs the same tables one byte at a time). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef FSTOK_WP_TABLES_H
#define FSTOK_WP_TABLES_H

#define HOT static inline __attribute__((always_inline))
#define NONE32 0xFFFFFFFFu
#define KIND_REG 0
#define KIND_DEL 1
#define KIND_SPACE 2
#define KIND_ISO 3
#define KIND_MAP 4
#define CLS_WORD 0
#define CLS_SPACE 1
#define CLS_PUNCT 2

typedef struct {
    const uint64_t *node; /* first edge | #children << 32 | first label << 40 | dense row << 48 */
    const uint8_t *edge_label;
    const uint32_t *edge_target;
    const uint64_t *failpops; /* f(u) | F(u) << 32 */
    const uint32_t *pool;
    const uint64_t *dense; /* delta'(row, b) | sigma'(row, b) << 32 */
    const uint32_t *tok_len;
    const uint16_t *norm1;
    const uint32_t *norm2;
    const uint32_t *npool;
    const uint32_t *suffix_word;
    uint32_t n_suffix_word;
    uint32_t n_nodes, n_dense, root, suffix_root;
    uint32_t prefix_len, unk_id, max_chars;
    int strip_mode;
    uint8_t wordbyte[256]; /* 1 for ASCII bytes that are plain word characters (built at load) */
    uint16_t lowmask[256]; /* (1 << min(n, 16)) - 1 */
    int inline_pops; /* one-token pops are stored inline (tag 0x81: id << 8 | 0x81) */
    /* The walk's layout, derived at load (build_blob): a byte array in which every state is one
     * variable-length record and a state is the byte offset of its record (see build_blob).  One
     * transition reads one place, and a record is 4-8 bytes for most states. */
    uint8_t *blob;
    uint32_t broot, bsroot; /* r and r# as blob offsets */
    uint32_t pw, pmask;     /* width of a state offset in a record (3 or 4 bytes) and its mask */
    uint32_t ffsz[8];       /* bytes of the f/F part of a record, by kind */
    uint32_t rtab[256];     /* per header byte: label mask (16) | offset of child pointers << 16 | size << 24 */
    uint32_t nkind[8];      /* states per record kind, and the blob's size (layout_stats) */
    uint32_t n_chr;         /* RK_CHR records (layout_stats) */
    size_t blob_size;
} wp_tables;

/* Records (byte offsets from the state u).  A state is at a character boundary (its string is whole UTF-8
 * characters: every token state, r, r#) or inside a character.  States at a boundary take a whole
 * character per step when any of their children is a multi-byte character (RK_CHR), so the walk does not
 * step through the states inside that character; states inside a character are kept only where a hub's
 * byte row leads into them (see build_blob).
 *
 * Byte record of a boundary state whose children are all ASCII (kinds RK_TOK .. RK_GEN):
 *   [0]      header: kind (3 bits) | nc << 3 (nc = number of children; 31: nc in the next byte)
 *   labels   nc sorted bytes (from 1, or 2 when the next byte holds nc)
 *   f/F      by kind: RK_TOK  id (3 bytes); F = that one id, f = r#  (a token state: 40% of mBERT's)
 *                     RK_ID   id (3), f (pw)                          (F one id)
 *                     RK_NONE nothing; F empty, f none                  (r, r#, states no suffix follows)
 *                     RK_SL   F (4, a pool slice), f (pw)
 *                     RK_GEN  F (4), f (4)                              (anything else)
 *   children 1..nc-1: their offsets (pw bytes each); child 0 is the next record (preorder).
 * Character record (RK_CHR) of a boundary state whose children are all multi-byte characters:
 *   [0] RK_CHR | f/F kind << 3 (RK_TOK .. RK_GEN), [1] nk = number of child characters (255: nk in bytes
 *   2-3), nk keys of 4 bytes (a character's UTF-8 bytes, little-endian, zero above), f/F
 *   by that kind, the offsets of children 1..nk-1; child 0 is the next record (the boundary states are
 *   in preorder of the character trie).
 * Record of a state inside a character (RK_MID): [0] RK_MID | nc << 3 (31: nc in the next byte), nc
 *   labels, the offset of the boundary state its character began in (pw), the offsets of all nc
 *   children (pw each).  No f/F: a miss there goes back to the character's first byte and fails from
 *   that state (a LinMaxMatch step: no token ends inside a character).
 * A hub (RK_HUB): [header][f 4][F 4][pad to 8 bytes][256 x (delta' 4, sigma' 4)] (any state). */
#define RK_TOK 0
#define RK_ID 1
#define RK_NONE 2
#define RK_SL 3
#define RK_GEN 4
#define RK_MID 5 /* a state inside a UTF-8 character (all children explicit, no f/F) */
#define RK_CHR 6 /* a boundary state keyed by whole characters */
#define RK_HUB 7
#define HUB_PAIRS(u) (((u) + 16) & ~7u) /* a hub's pairs: 8-byte aligned, after its header, f and F */
#define BLOB_PAD 32  /* zero bytes before and after the records (unaligned 16-byte and 4-byte loads) */

HOT uint32_t ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* RK_CHR record of u: number of keys, and (*lo) where the keys start. */
HOT uint32_t chr_count(const uint8_t *B, uint32_t u, uint32_t *lo) {
    const uint32_t nk = B[u + 1];
    if (__builtin_expect(nk != 255, 1)) {
        *lo = 2;
        return nk;
    }
    *lo = 4;
    return B[u + 2] | (uint32_t)B[u + 3] << 8;
}

/* f(u) and F(u) of any state (decoded from its record). */
HOT void rec_fail(const wp_tables *t, const uint8_t *B, uint32_t u, uint32_t *f, uint32_t *F) {
    const uint32_t h = B[u];
    uint32_t kind = h & 7;
    const uint8_t *p;
    if (kind == RK_HUB) {
        *f = ld32(B + u + 1);
        *F = ld32(B + u + 5);
        return;
    }
    if (kind == RK_CHR) {
        uint32_t lo;
        const uint32_t nk = chr_count(B, u, &lo);
        p = B + u + lo + 4 * nk;
        kind = h >> 3;
    } else {
        p = B + u + ((h >> 3) == 31 ? 2u + B[u + 1] : 1u + (h >> 3));
    }
    switch (kind) {
    case RK_TOK:
        *F = 0x81u | (ld32(p) & 0xFFFFFFu) << 8;
        *f = t->bsroot;
        return;
    case RK_ID:
        *F = 0x81u | (ld32(p) & 0xFFFFFFu) << 8;
        *f = ld32(p + 3) & t->pmask;
        return;
    case RK_SL:
        *F = ld32(p);
        *f = ld32(p + 4) & t->pmask;
        return;
    case RK_GEN:
        *F = ld32(p);
        *f = ld32(p + 4);
        return;
    default: /* RK_NONE; RK_MID (never asked: the walk restarts the character instead) */
        *F = 0;
        *f = NONE32;
        return;
    }
}

/* ---------------------------------------------------------------- output */
typedef struct {
    uint32_t *ids;
    uint32_t *offs; /* 2 per id when want_offs */
    size_t n, cap;
    int want_offs;
    int oom;
    int borrowed; /* ids is the caller's buffer (encode_utf8's stack), not malloc'd: copied on the first growth */
} outbuf;

static int out_reserve(outbuf *o, size_t extra) {
    if (o->n + extra <= o->cap) return 1;
    size_t nc = o->cap ? o->cap * 2 : 16; /* small first: a batch of 10^5 words must not touch 10^5 KB */
    while (nc < o->n + extra) nc *= 2;
    uint32_t *ni;
    if (o->borrowed) {
        ni = (uint32_t *)malloc(nc * sizeof(uint32_t));
        if (!ni) { o->oom = 1; return 0; }
        if (o->n) memcpy(ni, o->ids, o->n * sizeof(uint32_t));
        o->borrowed = 0;
    } else {
        ni = (uint32_t *)realloc(o->ids, nc * sizeof(uint32_t));
        if (!ni) { o->oom = 1; return 0; }
    }
    o->ids = ni;
    if (o->want_offs) {
        uint32_t *no = (uint32_t *)realloc(o->offs, nc * 2 * sizeof(uint32_t));
        if (!no) { o->oom = 1; return 0; }
        o->offs = no;
    }
    o->cap = nc;
    return 1;
}

static void out_free(outbuf *o) {
    if (!o->borrowed) free(o->ids);
    o->borrowed = 0;
    free(o->offs);
    o->ids = o->offs = NULL;
    o->n = o->cap = 0;
}

#endif /* FSTOK_WP_TABLES_H */
