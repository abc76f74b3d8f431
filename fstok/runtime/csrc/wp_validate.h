#ifndef FSTOK_WP_VALIDATE_H
#define FSTOK_WP_VALIDATE_H

/* The structural proof of a WordPiece artifact's tables (every index the walk and the layout builder follow without
 * a bounds check), one pass over each table in C.  It answers only "all hold" or "something does not": then the
 * loader runs the numpy checks of fstok/validate_wordpiece.py (the oracle), which name the first bad element.  The
 * rules are exactly validate_wordpiece.check's table rules (tests/test_wordpiece_validate_native.py mutates tables
 * and compares).  Python-free; the binding is wp_validate_py below. */
#include <stddef.h>
#include <stdint.h>

#define WV_NONE 0xFFFFFFFFu
#define WV_NORM1_LEN (0x110000 >> 8)

typedef struct {
    const uint64_t *node; size_t n_node;        /* n_nodes records */
    const uint8_t *el; size_t n_el;             /* edge labels */
    const uint32_t *et; size_t n_et;            /* edge targets */
    const uint64_t *failpops; size_t n_failpops; /* failure link | pops << 32 */
    const uint16_t *depth; size_t n_depth;
    const uint32_t *pool; size_t n_pool;
    const uint64_t *dense; size_t n_dense;      /* target | pops << 32, n_dense_rows * 256 */
    const uint32_t *voffs; size_t n_voffs;      /* vocabulary size + 1 */
    size_t n_vbytes;
    const uint16_t *s1; size_t n_s1;
    const uint32_t *s2; size_t n_s2;
    size_t n_npool;
    const uint32_t *npool;
    const uint32_t *suffix_word; size_t n_suffix_word; /* the used prefix (meta n_suffix_word) */
    size_t n_nodes, n_dense_rows;
} wv_tables;

/* 0: every rule holds; 1: one does not */
static int wp_tables_ok(const wv_tables *t) {
    size_t n = t->n_nodes, nd = t->n_dense_rows, ne = t->n_el, np = t->n_pool;
    if (n == 0 || t->n_node != n || t->n_failpops != n || t->n_depth != n || t->n_dense != nd * 256 || t->n_et != ne ||
        t->n_voffs < 2)
        return 1;
    uint64_t V = t->n_voffs - 1;
    uint32_t acc = 0;
    /* states: edges inside the edge arrays, dense row in range, the implicit first child; failure links and pops */
    for (size_t i = 0; i < n; i++) {
        uint64_t rec = t->node[i];
        uint64_t es = (uint32_t)rec;
        uint32_t hi = (uint32_t)(rec >> 32), nc = hi & 0xFF, first = (hi >> 8) & 0xFF, row = hi >> 16;
        acc |= es + nc > ne;
        acc |= (row != 0xFFFF) & (row >= nd);
        if (nc > 0 && row == 0xFFFF && es < ne) { /* (es + nc > ne already failed otherwise) */
            acc |= i + 1 >= n;
            acc |= (t->el[es] != first) | (t->et[es] != i + 1);
        }
        uint64_t fp = t->failpops[i];
        uint32_t f = (uint32_t)fp, p = (uint32_t)(fp >> 32);
        acc |= (uint64_t)(p >> 8) + (p & 0xFF) > np;
        if (f != WV_NONE) acc |= f >= n || t->depth[f] >= t->depth[i];
    }
    for (size_t e = 0; e < ne; e++) acc |= t->et[e] >= n;
    for (size_t k = 0; k < t->n_dense; k++) {
        uint64_t d = t->dense[k];
        uint32_t tg = (uint32_t)d, p = (uint32_t)(d >> 32);
        acc |= (uint32_t)(tg + 1u) > (uint32_t)n; /* (NONE + 1 = 0: no target) */
        acc |= (uint64_t)(p >> 8) + (p & 0xFF) > np;
    }
    for (size_t k = 0; k < np; k++) acc |= t->pool[k] >= V;
    if (acc) return 1;
    /* vocabulary offsets: from 0, never decreasing, inside vocab.bytes */
    if (t->voffs[0] != 0 || t->voffs[V] > t->n_vbytes) return 1;
    for (size_t k = 0; k < V; k++) acc |= t->voffs[k + 1] < t->voffs[k];
    /* normalization: stage-1 blocks inside stage 2, kinds 0..4, kind 4's pool entries inside the pool */
    if (t->n_s1 != WV_NORM1_LEN || t->n_s2 % 256) return 1;
    for (size_t k = 0; k < t->n_s1; k++) acc |= (uint64_t)t->s1[k] * 256 >= t->n_s2;
    for (size_t k = 0; k < t->n_s2; k++) {
        uint32_t v = t->s2[k], kind = v & 7;
        acc |= kind > 4;
        if (kind == 4) {
            uint64_t mp = v >> 3;
            if (mp >= t->n_npool) acc = 1;
            else acc |= mp + (t->npool[mp] & 0xFFFF) >= t->n_npool;
        }
    }
    for (size_t k = 0; k < t->n_suffix_word; k++) acc |= t->suffix_word[k] >= V;
    return acc != 0;
}

#endif /* FSTOK_WP_VALIDATE_H */
