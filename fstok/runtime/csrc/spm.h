/* SentencePiece-family models over compiled tables: the SentencePiece normalizer (precompiled
 * charsmap, dummy prefix, whitespace handling), Unigram Viterbi and score-ordered BPE.  Python-free:
 * mod_spm.c is the glue.  Tables are validated by fstok/spm.py before they reach this code, so the
 * hot loops do no bounds checks on table reads. */
#ifndef FSTOK_SPM_H
#define FSTOK_SPM_H
#include <stddef.h>
#include <pthread.h>
#include <stdint.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define SPM_NONE 0xFFFFFFFFu

/* A byte trie: node i's edges are [first[i], first[i+1]), sorted by label; value[i] < 0: no key
 * ends at i.  Node 0 is the root; root[] (filled at load) is its dense child row. */
typedef struct {
    const uint32_t *first;
    const uint8_t *label;
    const uint32_t *target;
    const int32_t *value;
    const int32_t *value2;
    uint32_t n_nodes;
    uint32_t root[256];
    /* nodes with many children get a full row of 256 children (built at load): dense_of[node] is the
     * row, SPM_NONE for the others */
    uint32_t *dense_of;
    uint32_t *rows;
} spm_trie;

/* one edge of the trie from `node` on byte c, or SPM_NONE */
static inline __attribute__((always_inline)) uint32_t spm_trie_step(const spm_trie *t, uint32_t node, uint8_t c) {
    if (node == 0) return t->root[c];
    if (t->dense_of) {
        const uint32_t r = t->dense_of[node];
        if (r != SPM_NONE) return t->rows[(size_t)r * 256 + c];
    }
    uint32_t lo = t->first[node], hi = t->first[node + 1];
    const uint8_t *L = t->label;
    if (hi - lo <= 8) {
        for (; lo < hi; lo++)
            if (L[lo] == c) return t->target[lo];
        return SPM_NONE;
    }
    while (lo < hi) {
        uint32_t mid = (lo + hi) >> 1;
        if (L[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (lo < t->first[node + 1] && L[lo] == c) ? t->target[lo] : SPM_NONE;
}

/* The pieces trie as the hot loops walk it (the only form of it the artifact stores): nodes numbered
 * breadth-first, so that the children of a node are consecutive nodes in label order, and one 32-byte record
 * per node with its piece, that piece's type and score, and its children's labels: a step reads the record
 * of the node it leaves (already read for its piece) and finds the child by comparing the labels at once;
 * the record reached holds the piece.  Nodes with more children than fit get a full row of 256 children.
 * The compiler builds it from the byte trie of the piece strings (spm_ftrie_build); a load checks the
 * stored tables (spm_ftrie_check) and walks them in place. */
#define SPM_FT_DENSE 0x80000000u
#define SPM_FT_INLINE 14
typedef struct {
    int32_t id;      /* the piece of the node, -1: none */
    uint32_t kids;   /* the first child (nk of them); SPM_FT_DENSE | r: the children are row r of rows */
    double score;    /* the piece's score (.model floats are exact as doubles) */
    uint8_t nk;      /* number of children (inline nodes) */
    uint8_t type;    /* the piece's type (0: no piece) */
    uint8_t lab[SPM_FT_INLINE]; /* the children's labels, ascending */
} spm_fnode;

typedef struct {
    spm_fnode *nodes;
    uint32_t *rows; /* the full rows of SPM_FT_DENSE nodes */
    uint64_t *pairs; /* the pair table (SPM_PT_* below), NULL: none */
    uint64_t pmask;
    uint32_t *skey;
    /* the pieces of one character (a symbol before any merge): ASCII by byte (-1 none, -2 an unused piece:
     * walk), the others in an open-addressed table of u64 (SPM_CH_* below) */
    int32_t ascii_id[128];
    /* the pairs of the first symbols of ASCII text (an ASCII character or the escaped space, SPM_SMALL of
     * them) as a dense table that stays in cache: (c + 1) | score key << 21 | unused << 53, 0: no merge */
    uint64_t *small;
    uint64_t *chars;
    uint64_t cmask;
    /* the character table's 2- and 3-byte characters by code point (derived at load, NULL: none):
     * (piece + 1) | unused << 31, 0 none.  Text of one script reads a few lines of it where the hashed
     * table scatters its characters over as many lines */
    uint32_t *bmp;
    /* the pair table as the merges read it (made by spm_ftrie_warm; NULL: pairs and skey serve): two u64 per
     * slot, the pair table's entry and the score order of the piece it names, so that one line answers a
     * candidate with its priority */
    uint64_t *wide;
    size_t wide_bytes;
    /* the node each 2- and 3-byte character leads to from the root, by code point (made by spm_ftrie_warm for
     * Unigram models; SPM_NONE: no piece starts with it; NULL: none made): a lattice walk enters a character's
     * node in one read instead of one dependent record read per byte */
    uint32_t *cnode;
    /* the pieces trie as a double array for the .model Unigram lattices (made by spm_ftrie_warm; NULL: the node
     * records serve): unit t = (base, check); a node's child on byte c is the unit base ^ c whose check is
     * c | 0x100 | (its piece + 1) << 9.  Every node has its own base, so the check of the label alone tells a
     * child from another node's unit.  8 bytes per node where a record takes 32, so that the walks of a
     * 32k-piece model stay in the second-level cache.  cnode then holds units, not nodes. */
    uint32_t *da;
    size_t da_bytes;
    size_t bytes[6]; /* the mapped sizes of nodes, (unused), rows, pairs, skey, chars (spm_huge_alloc) */
    uint32_t n_nodes, n_rows; /* records in nodes (one more is allocated), full rows in rows */
    int borrowed;             /* the tables are the artifact's (spm_ftrie_adopt), but for those of `own` */
    int own;                  /* bits 1 nodes, 2 rows, 4 pairs: copied into 2 MiB pages (spm_ftrie_warm) */
} spm_ftrie;

/* one edge from `node` on byte c in the walking layout, or SPM_NONE */
static inline __attribute__((always_inline)) uint32_t spm_ft_step(const spm_ftrie *f, uint32_t node, uint8_t c) {
    const spm_fnode *x = &f->nodes[node];
    const uint32_t k = x->kids;
    if (k & SPM_FT_DENSE) return f->rows[(size_t)(k & ~SPM_FT_DENSE) * 256 + c];
#ifdef __SSE2__
    /* the 16 bytes from nk: nk, type, then the labels */
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)&x->nk);
    uint32_t hit = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8((char)c))) >> 2;
    hit &= (1u << x->nk) - 1;
    return hit ? k + (uint32_t)__builtin_ctz(hit) : SPM_NONE;
#else
    for (uint32_t i = 0; i < x->nk; i++)
        if (x->lab[i] == c) return k + i;
    return SPM_NONE;
#endif
}

/* The walking layout as the artifact stores it (sections ft_nodes, ft_rows, ft_pairs, ft_chars, ft_ascii,
 * ft_small; counts in records: 32-byte nodes, 256-entry rows, u64 pair entries, u64 character entries,
 * i32 ASCII ids, u64 small-table entries).  pairs and small may be absent (NULL, 0). */
typedef struct {
    const void *nodes;
    size_t n_nodes; /* records, the trailing one included */
    const uint32_t *rows;
    size_t n_rows;
    const void *pairs;
    size_t n_pairs;
    const uint64_t *chars;
    size_t n_chars;
    const int32_t *ascii;
    size_t n_ascii;
    const uint64_t *small;
    size_t n_small;
} spm_ft_tables;

/* the longest run of occupied slots an open-addressed table may hold: a lookup reads at most this many + 1 */
#define SPM_PROBE_MAX 512

/* a pair-table entry (u64): the key (a + 1) | (b + 1) << 21 of two pieces whose concatenation is the piece
 * c, | c << 42 | unused(c) << 63; 0: empty.  One probe answers a candidate; its score order is skey[c]. */
#define SPM_PT_ID_MAX ((1u << 21) - 2)
#define SPM_PT_KEY(a, b) ((uint64_t)((uint32_t)(a) + 1u) | (uint64_t)((uint32_t)(b) + 1u) << 21)
#define SPM_PT_KEYMASK ((1ull << 42) - 1)
#define SPM_PT_C(e) ((uint32_t)((e) >> 42) & ((1u << 21) - 1))
#define SPM_PT_UNUSED (1ull << 63)
/* a character-table entry: the character's bytes (little-endian) | length << 32 | (piece + 1) << 35 |
 * unused << 56; 0: empty */
#define SPM_CH_KEYMASK ((1ull << 35) - 1)
#define SPM_CH_UNUSED (1ull << 56)

/* the open-addressed tables' slot of a key */
static inline uint64_t spm_slot(uint64_t key, uint64_t mask) { return ((key * 0x9E3779B97F4A7C15ull) >> 29) & mask; }

/* a character's bytes as the character table keys them */
static inline uint64_t spm_ch_key(const uint8_t *s, size_t l) {
    uint64_t k = (uint64_t)l << 32;
    for (size_t i = 0; i < l; i++) k |= (uint64_t)s[i] << (8 * i);
    return k;
}

/* the piece of the one character s[0, l) (1 <= l <= 4) from f's character table: its id, -1 when the
 * character is no piece, -2 when the table cannot say (no table, or an unused ASCII piece) */
static inline int32_t spm_char_piece(const spm_ftrie *f, const uint8_t *s, size_t l, int8_t *unused) {
    *unused = 0;
    if (!f || !f->chars) return -2;
    if (l == 1 && s[0] < 128) return f->ascii_id[s[0]];
    if (f->bmp && (l == 2 || l == 3)) {
        uint32_t cp = 0;
        int ok;
        if (l == 2) {
            ok = s[0] >= 0xC2 && s[0] <= 0xDF && (s[1] & 0xC0) == 0x80;
            cp = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
        } else {
            ok = (s[0] & 0xF0) == 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80;
            cp = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
            ok = ok && cp >= 0x800;
        }
        if (ok) { /* a well-formed character: its bytes are its code point's only encoding */
            const uint32_t v = f->bmp[cp];
            *unused = (int8_t)(v >> 31);
            return (int32_t)(v & ((1u << 21) - 1)) - 1;
        }
    }
    const uint64_t key = spm_ch_key(s, l);
    const uint64_t *T = f->chars;
    for (uint64_t i = spm_slot(key, f->cmask);; i = (i + 1) & f->cmask) {
        const uint64_t e = T[i];
        if ((e & SPM_CH_KEYMASK) == key) {
            *unused = (e & SPM_CH_UNUSED) != 0;
            return (int32_t)((e >> 35) & ((1u << 21) - 1)) - 1;
        }
        if (!e) return -1;
    }
}

/* Cache lines shared by threads without a lock (a seqlock per 64-byte line): the line's first u32 is its
 * sequence number, odd while a writer fills it; a reader keeps its copy only when the number was even and
 * the same before and after.  The second u32 is written on its own, the other 56 bytes as words. */
static inline int spm_line_read(const void *line, void *copy) {
    const uint32_t *seq = (const uint32_t *)line;
    const uint32_t q = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
    if (q & 1) return 0;
    const uint64_t *src = (const uint64_t *)line;
    uint64_t *dst = (uint64_t *)copy;
    for (int i = 0; i < 8; i++) dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n(seq, __ATOMIC_RELAXED) == q;
}

/* the line := v, unless another writer holds it (the entry is then simply not stored) */
static inline void spm_line_write(void *line, const void *v) {
    uint32_t *seq = (uint32_t *)line;
    uint32_t q = __atomic_load_n(seq, __ATOMIC_RELAXED);
    if ((q & 1) || !__atomic_compare_exchange_n(seq, &q, q + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(seq + 1, ((const uint32_t *)v)[1], __ATOMIC_RELAXED);
    const uint64_t *src = (const uint64_t *)v;
    uint64_t *dst = (uint64_t *)line;
    for (int i = 1; i < 8; i++) __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    __atomic_store_n(seq, q + 2, __ATOMIC_RELEASE);
}

/* piece types (sentencepiece_model.proto) */
#define SPT_NORMAL 1
#define SPT_UNKNOWN 2
#define SPT_CONTROL 3
#define SPT_USER 4
#define SPT_UNUSED 5
#define SPT_BYTE 6

/* flags */
#define SPF_ADD_DUMMY 1
#define SPF_REMOVE_WS 2
#define SPF_ESCAPE_WS 4
#define SPF_WS_SUFFIX 8
#define SPF_BYTE_FALLBACK 16
#define SPF_BPE 32  /* else Unigram */
#define SPF_HF 64   /* tokenizers' semantics (f64 scores, fuse_unk by string, no user bonus) */
#define SPF_FUSE_UNK 128
/* BPE: no model piece contains a separator (the escaped space) right after another character, so merges
 * never cross the point before such a separator: words are merged apart, and cached */
#define SPF_WORDS 256
/* BPE: cut_pairs is set: a bit per byte pair (last byte of a character, first byte of the next) that some
 * piece holds across a character boundary; where it is clear, no merge crosses, and the text is cut there */
#define SPF_CUTS 512

typedef struct {
    const uint32_t *cm_units; /* the precompiled charsmap's Darts double array (n_cm 0: none) */
    const uint8_t *cm_norm;   /* its NUL-terminated replacements (the last byte is NUL) */
    uint32_t n_cm, n_cm_norm;
    spm_trie user;   /* value >= 0 at user-defined pieces (n_nodes 0: none) */
    const float *score;     /* .model scores (float) */
    const double *score64;  /* tokenizer.json scores (double) */
    const uint8_t *ptype;
    int32_t byte_id[256];
    int32_t unk_id;
    uint32_t n_pieces;
    float min_score, max_score;
    double min_score64;
    uint32_t flags;
    struct spm_cache *cache; /* word -> model triples (SPF_WORDS), shared by calls; NULL: none */
    /* BPE: (left node, right node) -> node of the concatenation, a direct-mapped memo of the trie walks
     * that find merge candidates; one u64 per entry so that threads share it without a lock.  NULL: none
     * (the trie has too many nodes to pack three node ids into 63 bits) */
    uint64_t *pair_memo;
    const uint8_t *cut_pairs; /* 8192 bytes, or NULL (SPF_CUTS) */
    /* 1: the ASCII byte normalizes to itself whatever follows; for a lead byte of a multi-byte character: a
     * well-formed character it starts normalizes to itself (spm_model_prepare) */
    uint8_t ascii_pass[256];
    /* for an ASCII byte c that starts a charsmap key but is no key itself: bit d of ascii_next[c] is 1 when c
     * followed by the byte d normalizes to itself (no key starts with c d); ascii_end[c]: c at the end of the text
     * does (spm_model_prepare) */
    uint8_t ascii_next[128][32];
    uint8_t ascii_end[128];
    int one_unk;              /* unk_id is the only piece of type SPT_UNKNOWN (spm_model_prepare) */
    spm_ftrie *ft;            /* the pieces trie (spm_ftrie_adopt; set before any walk) */
    int ft_hot;               /* 1: the large tables are in 2 MiB pages, or need not be (spm_ftrie_warm) */
    pthread_mutex_t ft_mu;
    /* the piece strings (piece i is blob[off[i], off[i + 1])) and the ids of the reserved pieces (unknown,
     * control, byte) among them, for PieceToId of a string that is no model piece (spm_model_prepare) */
    const uint8_t *blob;
    const uint32_t *off;
    int32_t *reserved;
    uint32_t n_reserved;
    /* Unigram (.model) by words through the word cache (spm_unigram_prepare): uw 1 when no piece holds the
     * escaped space after its first character; uw_smax bounds every score a piece adds to a path */
    int uw;
    double uw_smax;
    float *uw_eff; /* the score each piece adds to a path (its own, or a user-defined piece's length bonus) */
} spm_model;

typedef struct {
    uint8_t *p;
    size_t n, cap;
} spm_bytes;

typedef struct {
    int32_t *p;
    size_t n, cap;
} spm_ints;

/* root row filled; with `dense`, full rows for the nodes with many children too.  -1: out of memory */
int spm_trie_init(spm_trie *t, int dense);
/* zeroed memory of n bytes, page-aligned, its pages mapped on first touch (loading stays cheap); NULL */
void *spm_zalloc(size_t n);
void spm_zfree(void *p, size_t n);
/* zeroed memory of n bytes in 2 MiB pages where the kernel gives them (tables walked at random: one TLB
 * entry per 2 MiB); *mapped receives the size to pass to spm_zfree.  NULL: out of memory */
void *spm_huge_alloc(size_t n, size_t *mapped);
/* the layout spm_trie_init and the walks rely on (lengths in elements): NULL, or what is wrong */
const char *spm_trie_check(const uint32_t *first, size_t n_first, const uint8_t *label, size_t n_label,
                           const uint32_t *target, size_t n_target, const int32_t *value, size_t n,
                           const int32_t *value2, size_t n_value2, int64_t n_values);
void spm_trie_free(spm_trie *t);
/* m's pieces trie, its large tables copied into 2 MiB pages by the first call (under ft_mu: no walk runs while
 * they move).  A load only maps and checks them; the first encode pays the copy, which spares the walks of every
 * encode a TLB miss per random read of a 4 KiB page of the mapping. */
const spm_ftrie *spm_ftrie_warm(const spm_model *m);
static inline const spm_ftrie *spm_ftrie_get(const spm_model *m) {
    if (__builtin_expect(__atomic_load_n(&m->ft_hot, __ATOMIC_ACQUIRE), 1)) return m->ft;
    return spm_ftrie_warm(m);
}
void spm_ftrie_free(spm_model *m);
/* The compiler's side: the walking tables of the byte trie `t` of m's piece strings (value: the model's id
 * of the key, -1 none; checked with spm_trie_check), with its pair and character tables.  m needs its
 * scores, types, flags and n_pieces.  NULL: out of memory, or a trie of 2^31 nodes or more. */
spm_ftrie *spm_ftrie_build(const spm_model *m, const spm_trie *t);
void spm_ftrie_release(spm_ftrie *f);
/* NULL when the stored tables keep every invariant the walks and lookups rely on (m's types and scores
 * are loaded and checked), else "section: what is wrong" */
const char *spm_ftrie_check(const spm_model *m, const spm_ft_tables *t);
/* m's pieces trie over checked stored tables (kept alive by the caller).  0, or -1 out of memory */
int spm_ftrie_adopt(spm_model *m, const spm_ft_tables *t);
/* the tables of f, for the compiler to store.  -1: f has no character table */
int spm_ftrie_tables(const spm_ftrie *f, spm_ft_tables *t);
struct spm_cache *spm_cache_new(void);
/* the pair memo for m (BPE, tries of fewer than 2^21 - 1 nodes; after spm_ftrie_adopt); 0, or -1 out of memory */
int spm_pair_memo_init(spm_model *m);
#define SPM_PAIR_MEMO_BYTES (((size_t)1 << 16) * 16)
void spm_cache_free(struct spm_cache *c);
void spm_bytes_free(spm_bytes *b);
void spm_ints_free(spm_ints *v);

/* what the normalizer and PieceToId derive from the tables at load (after spm_trie_init of `user`).  0, or
 * -1 out of memory */
int spm_model_prepare(spm_model *m);

/* after the scores, flags and piece strings are set: the Unigram word path (spm_model.uw) and its cache.  0, or
 * -1 out of memory */
int spm_unigram_prepare(spm_model *m);

/* SentencePiece's Normalizer::Normalize: `out` the normalized bytes; `n2o` (may be NULL) one
 * original byte offset per output byte plus one.  0 or -1 (out of memory). */
int spm_normalize(const spm_model *m, const uint8_t *in, size_t n, spm_bytes *out, spm_ints *n2o);

/* The model over normalized bytes: triples (id, begin, end) in `out` (ids before unk handling). */
int spm_unigram(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out);
int spm_bpe(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out);
/* the model the flags name (BPE by words when SPF_WORDS) */
int spm_model_run(const spm_model *m, const uint8_t *s, size_t n, spm_ints *out);

/* The ids sentencepiece reports for the model's triples: runs of unknown pieces fused, or decomposed
 * into byte pieces under byte_fallback.  Appends (id, begin, end) triples to `ids`. */
int spm_finish(const spm_model *m, const uint8_t *s, const spm_ints *tri, spm_ints *ids);

/* Whole .model pipeline: normalize, model, finish.  With n2o, begin/end are original byte offsets. */
int spm_encode(const spm_model *m, const uint8_t *in, size_t n, spm_ints *ids, int want_offsets);

/* ------------------------------------------------------------------------------------------ */
/* HF tokenizer.json pipelines (lib_spm_hf.c): normalizer steps, pre-tokenizer and model in one pass */

#define HFN_PRECOMPILED 1 /* units/norm: a charsmap, applied per grapheme cluster as tokenizers does */
#define HFN_REPLACE 2     /* literal a -> b */
#define HFN_REPLACE_RUN 3 /* runs of the character a: c{k,} (k_max 0) or c{k} (k_max k) -> b */
#define HFN_PREPEND 4     /* a before a non-empty text */
#define HFP_NONE 0
#define HFP_METASPACE 1
#define HFP_WHITESPACE_SPLIT 2
#define HFM_ALWAYS 0
#define HFM_FIRST 1
#define HFM_NEVER 2
#define SPM_HF_MAX_OPS 16

typedef struct {
    int kind;
    const uint8_t *a, *b;
    size_t na, nb;
    uint32_t k, k_max;
    const uint32_t *units;
    const uint8_t *norm;
    uint32_t n_units, n_norm;
    /* HFN_PRECOMPILED: 1 at each BMP code point that is a grapheme cluster of its own wherever it stands beside
     * another such code point and that the charsmap leaves as it is (built at load); NULL: none */
    uint8_t *pass;
} spm_hf_op;

typedef struct {
    uint64_t key; /* (uint32 a) << 32 | (uint32 b) */
    uint32_t rank;
    int32_t new_id; /* -1: empty slot */
} spm_hf_merge;

typedef struct spm_hf {
    spm_hf_op ops[SPM_HF_MAX_OPS];
    int n_ops;
    int pre, scheme, split;
    uint8_t rep[4];
    size_t nrep;
    /* no pre-tokenizer: the BPE text is cut before each wsep that follows another character (the
     * compiler checked that no merge crosses such a cut); nwsep 0: one piece */
    uint8_t wsep[4];
    size_t nwsep;
    /* with nwsep: a bit per byte pair (last byte of a character, first byte of the next) that some merge's
     * token holds across a character boundary (8192 bytes); where it is clear the text is cut as well (no
     * merge crosses, and no unknown run is fused across: the compiler checked); NULL: none */
    const uint8_t *cut;
    const uint32_t *g_start, *g_end;
    const uint8_t *g_bits;
    uint32_t n_g;
    uint8_t *gbmp; /* class bits of the BMP (built at load) */
    int model_bpe, byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_tok[256]; /* the <0xXX> token of each byte, -1: none */
    spm_hf_merge *mtab;
    size_t mmask, mbytes, cbytes;
    struct spm_hf_cache_slot *cache;
    pthread_mutex_t mu;
    /* made by the first BPE encode (hot 1 once they are): the merges of the first symbols of ASCII text (an
     * ASCII character or U+2581, SPM_HF_SMALL of them, small_id their pieces) as a dense table that stays in
     * cache, (rank + 1) << 32 | new id, 0: none; NULL: none made */
    int hot;
    uint64_t *small;
    int32_t small_id[129];
} spm_hf;
#define SPM_HF_SMALL 129

int spm_hf_tables_init(spm_hf *h);
/* The merge table (the compiler's: stored in the artifact, section hf_merges): an open-addressed table of
 * (pair_key(a, b), rank, new id) entries, slot mix64(key) & (slots - 1), linear probing, new id -1: empty.
 * init builds it from the merge list (a pair listed twice keeps its last rank); 0, or -1 out of memory */
int spm_hf_merges_init(spm_hf *h, const int32_t *a, const int32_t *b, const int32_t *nw, size_t n);
/* NULL when a stored table of n entries keeps what the lookups rely on (a power-of-two size, new ids -1 or
 * below n_pieces, no run of more than SPM_PROBE_MAX occupied slots), else "hf_merges: what is wrong" */
const char *spm_hf_merges_check(const spm_hf_merge *T, size_t n, uint32_t n_pieces);
/* h's merges over a checked stored table (kept alive by the caller) */
void spm_hf_merges_adopt(spm_hf *h, const spm_hf_merge *T, size_t n);
int spm_hf_cache_init(spm_hf *h);
void spm_hf_free(spm_hf *h);
/* ids of one text segment (no added tokens in it); at_start: the segment starts the text.  0, -1 (out
 * of memory) or 1 (an unknown piece and no unk id: tokenizers raises) */
int spm_hf_encode(const spm_model *m, spm_hf *h, const uint8_t *in, size_t n, int at_start, spm_ints *ids);
/* the handle's normalizer steps alone (0 or -1) */
int spm_hf_normalize(const spm_hf *h, const uint8_t *in, size_t n, spm_bytes *out);
/* the handle's pre-tokenizer and model on each (start, end, flag) uint32 triple of normalized UTF-8 (a tokenizer.json
 * pipeline's pieces); counts[t] (or NULL): the ids of piece t */
int spm_hf_encode_spans(const spm_model *m, spm_hf *h, const uint8_t *in, size_t n, const uint32_t *tri, size_t ntri,
                        int first_ok, spm_ints *ids, uint32_t *counts);

/* The stages of spm_hf_encode one at a time, for the alignment-keeping path (lib_spm_hf_offsets.c) */
typedef struct spm_hf_scratch spm_hf_scratch; /* the model's work space (one per thread) */
spm_hf_scratch *spm_hf_scratch_new(void);
void spm_hf_scratch_free(spm_hf_scratch *x);
/* the end of the extended grapheme cluster that starts at byte i of s[0..n) */
size_t spm_hf_cluster_end(const spm_hf *h, const uint8_t *s, size_t i, size_t n);
/* the charsmap replacement of the shortest key that prefixes k[0..n) (NUL-terminated), or NULL */
const uint8_t *spm_hf_cm_transform(const spm_hf_op *op, const uint8_t *k, size_t n, size_t *olen);
/* ids of one pre-tokenized piece through the piece cache; 0, -1 or 1 as spm_hf_encode */
int spm_hf_piece_ids(const spm_model *m, spm_hf *h, spm_hf_scratch *x, const uint8_t *s, size_t n, spm_ints *ids);
/* the same ids with the byte span (begin, end) of each in `sp` (no cache) */
int spm_hf_piece_spans(const spm_model *m, spm_hf *h, spm_hf_scratch *x, const uint8_t *s, size_t n, spm_ints *ids,
                       spm_ints *sp);
/* One segment (no added tokens) with tokenizers' alignments.  Original character offsets start at
 * `base`; span[id] is the byte length every occurrence of id covers (-1: it depends on the text).
 * Appends per token: id to ids, original (start, end) characters to off, its word to word (counting
 * from *words, which grows by the words of the segment), its normalized byte span to nsp; `norm`
 * receives the normalized text.  0, -1 (out of memory), 1 (tokenizers raises) or 2 (an alignment this
 * path does not follow: the caller takes the reference path). */
typedef struct spm_hf_off_work spm_hf_off_work;
int spm_hf_ids_put(spm_ints *v, int32_t x); /* 0, or -1 out of memory */
/* the original start (in characters, from base) of the first character of in[0..n) after the normalizer steps
 * (-1: none left), as the alignments move it.  0, -1 (out of memory) or 2 (an alignment the native path does
 * not follow) */
int spm_hf_first_start(const spm_hf *h, const uint8_t *in, size_t n, int32_t base, int32_t *start);
spm_hf_off_work *spm_hf_off_work_new(void);
void spm_hf_off_work_free(spm_hf_off_work *w);
int spm_hf_encode_offsets(const spm_model *m, spm_hf *h, spm_hf_off_work *w, const int32_t *span, size_t n_span,
                          const uint8_t *in, size_t n, int32_t base, spm_ints *ids, spm_ints *off, spm_ints *word,
                          int32_t *words, spm_ints *nsp, const spm_bytes **norm);

#endif
