/* The walk's layout, derived from the artifact's validated arrays at load (not on the encode path):
 * one-token pops inlined (scan_inline_pops), every state turned into a variable-length byte record
 * in DFS preorder (build_blob; the record format is in wp_tables.h).  Python-free: errors come back
 * as a message (WP_ENOMEM for an allocation failure).  Oracle: the encoder on the blob equals
 * fstok/reference/wordpiece.py's TableExecutor on the arrays (tests/test_wordpiece_layout.py). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wp_tables.h"

static const char WP_ENOMEM[] = "out of memory"; /* (compared by address) */

#ifndef FSTOK_WP_LAYOUT_H
#define FSTOK_WP_LAYOUT_H

/* Nearly every failure pop (F(u), sigma'(row, b)) is one token: the artifact stores it as a slice
 * of the pool (length | offset << 8), which costs a second dependent cache miss per emitted token.
 * The blob (build_blob) stores a one-token slice as the id itself, tagged 0x81, when no slice length
 * reaches 0x80 (otherwise nothing is inlined and every pop takes the pool path).  -14% L1 misses. */
static void scan_inline_pops(wp_tables *t) {
    size_t nn = t->n_nodes, nd = (size_t)t->n_dense * 256;
    t->inline_pops = 0;
    for (size_t i = 0; i < nn; i++)
        if (((t->failpops[i] >> 32) & 0xFF) >= 0x80) return;
    for (size_t i = 0; i < nd; i++)
        if (((t->dense[i] >> 32) & 0xFF) >= 0x80) return;
    t->inline_pops = 1;
}

static inline uint32_t inline_pop(const wp_tables *t, size_t npool, uint32_t p) {
    if (t->inline_pops && (p & 0xFF) == 1 && (p >> 8) < npool) {
        uint32_t id = t->pool[p >> 8];
        if (id < (1u << 24)) return 0x81u | (id << 8);
    }
    return p;
}

/* Record kind of sparse state u (see wp_tables.blob) and its f/F as stored in the blob: Fi = the pop
 * (one-token pops inlined), f0 = f(u) as a state number or NONE32. */
static uint32_t rec_kind(const wp_tables *t, uint32_t f0, uint32_t Fraw, uint32_t Fi) {
    const int one = t->inline_pops && (Fi & 0xFF) == 0x81 && Fi != Fraw;
    if (one && f0 == t->suffix_root) return RK_TOK;
    if (one && f0 != NONE32) return RK_ID;
    if (Fraw == 0 && f0 == NONE32) return RK_NONE;
    if (f0 != NONE32) return RK_SL;
    return RK_GEN;
}

/* Bytes of a byte record (kinds RK_TOK .. RK_GEN) with nc children. */
static inline size_t rec_size(const wp_tables *t, uint32_t kind, uint32_t nc) {
    return 1 + (nc >= 31) + nc + t->ffsz[kind] + t->pw * (nc ? nc - 1 : 0);
}

/* Bytes of an RK_CHR record (f/F kind `kind`) with nk child characters. */
static inline size_t chr_size(const wp_tables *t, uint32_t kind, uint32_t nk) {
    return (nk >= 255 ? 4u : 2u) + 4 * (size_t)nk + t->ffsz[kind] + t->pw * (nk ? nk - 1 : 0);
}

/* Bytes of an RK_MID record with nc children. */
static inline size_t mid_size(const wp_tables *t, uint32_t nc) {
    return 1 + (nc >= 31) + nc + t->pw * (1 + (size_t)nc);
}

/* Which states lie inside a UTF-8 character (mid[c] = the continuation bytes still due) and the state
 * each such character began in (anc[c], its trie ancestor at the character's first byte), for the
 * children c of u, from the edge labels (build_blob calls it in preorder: parents first).  A token is
 * whole characters, so no token ends inside one: a state v inside a character stores no f/F (RK_MID).  A
 * miss at v on byte b (string s + the character's first bytes, s = the string of anc[v]) means no token
 * continues s through this character, so the walk goes back to anc[v] and the character's first byte
 * and takes anc[v]'s failure transitions.  That is a LinMaxMatch step like any other: however v was
 * entered (edge, failure link, hub row), the ids emitted so far + the string of the state = the bytes
 * read, for v and for anc[v] with the character's bytes unread.  The same argument lets a boundary state
 * look a whole character up (RK_CHR): no key for it = a miss somewhere inside it. */
#define LAB_ASCII 1 /* (labs: u has an ASCII child, a child on a byte >= 0x80) */
#define LAB_MULTI 2
HOT void mid_children(const wp_tables *t, size_t u, uint8_t *mid, uint32_t *anc, uint8_t *labs) {
    const uint64_t r = t->node[u];
    const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r, due = mid[u];
    uint32_t lb = 0;
    for (uint32_t k = 0; k < nc; k++) {
        const uint32_t c = t->edge_target[es + k], b = t->edge_label[es + k];
        lb |= b < 0x80 ? LAB_ASCII : LAB_MULTI;
        if (c <= u) continue; /* (not preorder: not a table the compiler made; c stays outside) */
        anc[c] = due ? anc[u] : (uint32_t)u;
        mid[c] = (uint8_t)(b < 0x80 ? 0 : b < 0xC0 ? (due ? due - 1 : 0) : b < 0xE0 ? 1 : b < 0xF0 ? 2 : 3);
    }
    labs[u] = (uint8_t)lb;
}

/* The child characters of a boundary state: keys and the boundary states they lead to, in preorder. */
typedef struct {
    uint32_t *key, *tg;
    size_t n, cap;
} keylist;

static int kl_push(keylist *k, uint32_t key, uint32_t tg) {
    if (k->n == k->cap) {
        size_t nc = k->cap ? 2 * k->cap : 256;
        uint32_t *a = (uint32_t *)realloc(k->key, nc * sizeof(uint32_t));
        if (!a) return -2;
        k->key = a;
        uint32_t *b = (uint32_t *)realloc(k->tg, nc * sizeof(uint32_t));
        if (!b) return -2;
        k->tg = b;
        k->cap = nc;
    }
    k->key[k->n] = key;
    k->tg[k->n++] = tg;
    return 0;
}

/* x: the state d bytes into a character of L bytes (key: those bytes). 0, -1: not a character trie, -2: no memory. */
static int char_walk(const wp_tables *t, const uint8_t *mid, keylist *kl, uint32_t x, uint32_t key, uint32_t d,
                     uint32_t L) {
    if (d == L) return mid[x] ? -1 : kl_push(kl, key, x);
    if (mid[x] != L - d) return -1;
    const uint64_t r = t->node[x];
    const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
    for (uint32_t k = 0; k < nc; k++) {
        const uint32_t y = t->edge_target[es + k], b = t->edge_label[es + k];
        if ((b & 0xC0) != 0x80 || y <= x) return -1;
        int e = char_walk(t, mid, kl, y, key | b << (8 * d), d + 1, L);
        if (e < 0) return e;
    }
    return 0;
}

/* The child characters of boundary state u, appended to kl.  0, -1: not a character trie, -2: no memory. */
static int char_children(const wp_tables *t, const uint8_t *mid, keylist *kl, uint32_t u) {
    const uint64_t r = t->node[u];
    const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
    for (uint32_t k = 0; k < nc; k++) {
        const uint32_t c = t->edge_target[es + k], b = t->edge_label[es + k];
        int e;
        if (c <= u) return -1;
        if (b < 0x80) e = mid[c] ? -1 : kl_push(kl, b, c);
        else if (b >= 0xC2 && b <= 0xF4) e = char_walk(t, mid, kl, c, b, 1, b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4);
        else e = -1;
        if (e < 0) return e;
    }
    return 0;
}

/* The walk's layout (see the records in wp_tables.h), from the validated arrays (pops inlined).  The boundary
 * states come first, in preorder of the character trie: the first child of a state is the next record
 * and needs no pointer (57% of mBERT's states have one child), and walking down a word reads forward.  A
 * boundary state with a multi-byte child is an RK_CHR record: one step per character, and the states
 * inside its characters are not in the walk's way.  The states inside characters that a hub's byte row
 * leads into (the first character after r, r# and the other hubs) follow, as RK_MID records with
 * explicit children; the others are not stored.  Records are bytes: a token state with one child is 5
 * bytes (header, label, id), a leaf 4, other one-child states 8 (+ f), so the states a pass over a text
 * touches share fewer cache lines (docs/design/wordpiece.md). */
static int build_blob(wp_tables *t, size_t npool, const char **errp) {
    size_t n = t->n_nodes;
    /* one allocation: pos (blob offset), fi (F(u), one-token pops inlined), anc (mid_children), nk (child
     * characters of an RK_CHR state, 0 otherwise); kinds, mid, keep */
    uint32_t *pos = (uint32_t *)malloc((n ? n : 1) * (5 * sizeof(uint32_t) + 5));
    uint8_t *B = NULL;
    keylist kl = {NULL, NULL, 0, 0};
    const char *err = NULL;
    size_t nm = 0; /* kept states inside characters, in preorder: mlist[0..nm) */
    if (!pos) { *errp = WP_ENOMEM; return -1; }
    uint32_t *fi = pos + n, *anc = fi + n, *nkey = anc + n, *mlist = nkey + n;
    uint8_t *kinds = (uint8_t *)(mlist + n), *mid = kinds + n, *keep = mid + n, *nc8 = keep + n, *labs = nc8 + n;
    size_t W = 0;
    memset(mid, 0, n);
    memset(keep, 0, n);
    for (size_t u = 0; u < n; u++) {
        const uint64_t r = t->node[u], fp = t->failpops[u];
        const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, Fraw = (uint32_t)(fp >> 32);
        anc[u] = mid[u] ? anc[u] : NONE32;
        fi[u] = inline_pop(t, npool, Fraw);
        nkey[u] = 0;
        if ((uint32_t)(r >> 48) != 0xFFFF) {
            kinds[u] = RK_HUB;
        } else if (nc >= 255) { /* the compiler makes such states hubs */
            err = "WordPiece tables: a sparse state has 255 children";
            goto fail;
        } else {
            kinds[u] = (uint8_t)rec_kind(t, (uint32_t)fp, Fraw, fi[u]);
        }
        nc8[u] = (uint8_t)nc;
        mid_children(t, u, mid, anc, labs);
    }
    for (size_t u = 0; u < n; u++) { /* boundary states with a multi-byte child: RK_CHR */
        if (!(labs[u] & LAB_MULTI) || mid[u] || kinds[u] == RK_HUB) continue;
        const uint64_t r = t->node[u];
        const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
        if (labs[u] & LAB_ASCII) { /* ASCII children too (Latin letters and accented ones): a byte record whose multi-byte
                      * children are states inside characters, stored (RK_MID); child 0 stays ASCII */
            for (uint32_t k = 0; k < nc; k++) {
                const uint32_t c = t->edge_target[es + k];
                if (t->edge_label[es + k] >= 0x80 && c > u && mid[c]) keep[c] = 1;
            }
            continue;
        }
        const size_t k0 = kl.n; /* (the keys of all RK_CHR states, in state order: build_blob writes them from here) */
        int e = char_children(t, mid, &kl, (uint32_t)u);
        if (e == -2) { err = WP_ENOMEM; goto fail; }
        if (e < 0 || kl.n == k0 || kl.n - k0 > 0xFFFF) {
            err = "WordPiece tables: the trie is not one of UTF-8 characters";
            goto fail;
        }
        nkey[u] = (uint32_t)(kl.n - k0);
    }
    for (size_t u = 0; u < n; u++) { /* states inside characters that hub rows lead into */
        if (kinds[u] != RK_HUB) continue;
        const uint64_t *d = t->dense + (size_t)(t->node[u] >> 48) * 256;
        for (int b = 0x80; b < 256; b++) { /* (an ASCII byte ends a character) */
            const uint32_t x = (uint32_t)d[b];
            if (x != NONE32 && x < n && mid[x]) keep[x] = 1;
        }
    }
    for (size_t u = 0; u < n; u++) { /* and the states below those inside the same character (preorder) */
        if (!mid[u] || !keep[u]) continue;
        mlist[nm++] = (uint32_t)u;
        if (kinds[u] == RK_HUB) continue;
        const uint64_t r = t->node[u];
        const uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
        for (uint32_t k = 0; k < nc; k++) {
            const uint32_t c = t->edge_target[es + k];
            if (c > u && mid[c]) keep[c] = 1;
        }
    }
    /* 3-byte state offsets unless the blob reaches 16 MB; $FSTOK_WP_POINTER_BYTES=4 forces 4 (a test hook) */
    const char *pb = getenv("FSTOK_WP_POINTER_BYTES");
    const int first = pb && pb[0] == '4';
    for (int attempt = first; attempt < 2; attempt++) {
        t->pw = attempt ? 4 : 3;
        t->pmask = attempt ? 0xFFFFFFFFu : 0xFFFFFFu;
        const uint32_t fsz[8] = {3, 3 + t->pw, 0, 4 + t->pw, 8, t->pw, 0, 0};
        memcpy(t->ffsz, fsz, sizeof(fsz));
        W = BLOB_PAD;
        for (size_t u = 0; u < n; u++) pos[u] = NONE32;
        memset(t->nkind, 0, sizeof(t->nkind));
        t->n_chr = 0;
        for (int pass = 0; pass < 2; pass++) { /* boundary states, then the kept states inside characters */
            for (size_t x = 0; x < (pass ? nm : n); x++) {
                const size_t u = pass ? mlist[x] : x;
                if (!pass && mid[u]) continue;
                const uint32_t nc = nc8[u];
                pos[u] = (uint32_t)W;
                t->nkind[kinds[u] == RK_HUB ? RK_HUB : mid[u] ? RK_MID : kinds[u]]++; /* (layout_stats) */
                t->n_chr += nkey[u] != 0;
                if (kinds[u] == RK_HUB) W = HUB_PAIRS(W) + 256 * 8;
                else if (mid[u]) W += mid_size(t, nc);
                else if (nkey[u]) W += chr_size(t, kinds[u], nkey[u]);
                else W += rec_size(t, kinds[u], nc);
                if (W >= 0xFFFFFF00u) {
                    err = "WordPiece tables too large for the runtime layout";
                    goto fail;
                }
            }
        }
        if (W + BLOB_PAD < t->pmask) break; /* every offset fits the pointer width (and != the mask) */
    }
    for (int h = 0; h < 256; h++) { /* byte records, per header byte: label mask | child pointers' offset | size */
        uint32_t kind = h & 7, nc = (uint32_t)h >> 3;
        if (kind > RK_GEN || nc == 31) {
            t->rtab[h] = 0;
            continue;
        }
        uint32_t po = 1 + nc + t->ffsz[kind];
        t->rtab[h] = ((1u << (nc < 16 ? nc : 16)) - 1) | po << 16 | (uint32_t)rec_size(t, kind, nc) << 24;
    }
    B = (uint8_t *)calloc(W + BLOB_PAD, 1); /* zero padding at both ends for unaligned loads */
    if (!B) { err = WP_ENOMEM; goto fail; }
    int bad = 0;
/* a state's offset: NONE32 stays NONE32 (TGT); a state that is not stored is an error */
#define TGT(x) ((x) == NONE32 ? NONE32 : (x) < n && pos[(x)] != NONE32 ? pos[(x)] : (bad = 1, 0u))
#define REQ(x) ((x) < n && pos[(x)] != NONE32 ? pos[(x)] : (bad = 1, 0u))
/* Always 4 bytes (a constant-size copy): a 3-byte field's value is < 2^24, so its 4th byte is 0 and belongs
 * to the next field or record, which is written after it (fields and records in address order; padding
 * after the last one). */
#define PUT(dst, v)                                                                                                \
    do {                                                                                                           \
        uint32_t v_ = (v);                                                                                         \
        memcpy((dst), &v_, 4); /* little-endian */                                                                 \
    } while (0)
    size_t kc = 0; /* the next RK_CHR state's keys in kl */
    for (int pass = 0; pass < 2; pass++) /* in address order (see PUT) */
    for (size_t x = 0; x < (pass ? nm : n); x++) {
        const size_t u = pass ? mlist[x] : x;
        if (!pass && mid[u]) continue;
        uint64_t r = t->node[u];
        uint32_t nc = (uint32_t)(r >> 32) & 0xFF, es = (uint32_t)r;
        uint32_t P = pos[u], f0 = (uint32_t)t->failpops[u], Fi = fi[u], kind = kinds[u];
        uint8_t *q = B + P;
        if (kind == RK_HUB) {
            q[0] = RK_HUB;
            /* (a hub inside a character: its f/F are never read, see rec_fail) */
            PUT(q + 1, mid[u] ? NONE32 : TGT(f0));
            PUT(q + 5, mid[u] ? 0 : Fi);
            const uint64_t *d = t->dense + (size_t)(r >> 48) * 256;
            uint8_t *pr = B + HUB_PAIRS(P);
            for (int b = 0; b < 256; b++) {
                PUT(pr + 8 * b, TGT((uint32_t)d[b]));
                PUT(pr + 8 * b + 4, inline_pop(t, npool, (uint32_t)(d[b] >> 32)));
            }
            continue;
        }
        if (mid[u]) { /* RK_MID: labels, the character's first state, all children */
            uint32_t lo = 1;
            q[0] = (uint8_t)(RK_MID | (nc >= 31 ? 31u : nc) << 3);
            if (nc >= 31) q[lo++] = (uint8_t)nc;
            memcpy(q + lo, t->edge_label + es, nc);
            PUT(q + lo + nc, REQ(anc[u]));
            for (uint32_t k = 0; k < nc; k++) PUT(q + lo + nc + t->pw * (1 + k), REQ(t->edge_target[es + k]));
            continue;
        }
        uint8_t *ff;
        uint32_t nch, c0;
        const uint32_t *tgs = NULL; /* RK_CHR: the children, in key order */
        if (nkey[u]) { /* RK_CHR */
            const uint32_t *ks = kl.key + kc, *ts = kl.tg + kc;
            nch = nkey[u];
            kc += nch;
            uint32_t lo = 2;
            q[0] = (uint8_t)(RK_CHR | kind << 3);
            q[1] = (uint8_t)(nch >= 255 ? 255u : nch);
            if (nch >= 255) {
                q[2] = (uint8_t)nch;
                q[3] = (uint8_t)(nch >> 8);
                lo = 4;
            }
            for (uint32_t k = 0; k < nch; k++) PUT(q + lo + 4 * k, ks[k]);
            ff = q + lo + 4 * nch;
            c0 = ts[0];
            tgs = ts;
        } else { /* byte record */
            uint32_t lo = 1;
            nch = nc;
            q[0] = (uint8_t)(kind | (nc >= 31 ? 31u : nc) << 3);
            if (nc >= 31) q[lo++] = (uint8_t)nc;
            memcpy(q + lo, t->edge_label + es, nc);
            ff = q + lo + nc;
            c0 = nc ? t->edge_target[es] : NONE32;
        }
        switch (kind) {
        case RK_TOK: PUT(ff, Fi >> 8); break;
        case RK_ID: PUT(ff, Fi >> 8); PUT(ff + 3, REQ(f0)); break;
        case RK_NONE: break;
        case RK_SL: PUT(ff, Fi); PUT(ff + 4, REQ(f0)); break;
        default: PUT(ff, Fi); PUT(ff + 4, TGT(f0)); break;
        }
        uint8_t *pp = ff + t->ffsz[kind];
        for (uint32_t k = 1; k < nch; k++) PUT(pp + t->pw * (k - 1), REQ(tgs ? tgs[k] : t->edge_target[es + k]));
        if (nch && REQ(c0) != (uint32_t)(pp + t->pw * (nch - 1) - B)) { /* the validated preorder says the next record */
            err = "WordPiece tables: first child is not the next state";
            goto fail;
        }
    }
#undef PUT
#undef REQ
#undef TGT
    if (bad) {
        err = "WordPiece tables: the trie is not one of UTF-8 characters";
        goto fail;
    }
    { /* (slot 6: states inside characters not stored) */
        size_t stored = 0;
        for (int k = 0; k < 8; k++) stored += k == 6 ? 0 : t->nkind[k];
        t->nkind[6] = (uint32_t)(n - stored);
    }
    t->blob_size = W;
    t->blob = B;
    t->broot = pos[t->root];
    t->bsroot = pos[t->suffix_root];
    if (t->broot == NONE32 || t->bsroot == NONE32) {
        t->blob = NULL;
        err = "WordPiece tables: r or r# inside a character";
        goto fail;
    }
    free(pos);
    free(kl.key);
    free(kl.tg);
    return 0;
fail:
    *errp = err;
    free(pos);
    free(B);
    free(kl.key);
    free(kl.tg);
    return -1;
}

#endif /* FSTOK_WP_LAYOUT_H */
