#ifndef FSTOK_BATCH_ARENA_H
#define FSTOK_BATCH_ARENA_H

/* What one thread of a batch call makes (ids, list items, the records of its blocks), in memory it alone
 * appends to: a list of chunks, handed over to the call when the thread is done and freed by the caller after
 * it has read the records.  Why: per-text results in arrays shared by all threads put the writes of threads
 * encoding neighbouring blocks into the same cache lines, and a buffer per block was a malloc on a worker and
 * a free on the calling thread (another thread's malloc arena).  Used by mod_bpe.c (bpe_parallel.h) and
 * mod_wordpiece.c (wp_batch.h).  Python-free. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>

/* one chunk of a thread's output; the chunks of a call form a list freed by the caller at its end */
typedef struct bt_chunk {
    struct bt_chunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
} bt_chunk;

typedef struct {
    bt_chunk *cur; /* newest chunk (older ones through next) */
    size_t next_cap;
} bt_arena;

/* bytes (16-aligned) from the thread's arena, or NULL */
static void *bt_alloc(bt_arena *a, size_t bytes) {
    bytes = (bytes + 15) & ~(size_t)15;
    bt_chunk *c = a->cur;
    if (!c || c->cap - c->used < bytes) {
        size_t cap = a->next_cap > bytes ? a->next_cap : bytes;
        bt_chunk *n = (bt_chunk *)malloc(sizeof(bt_chunk) + cap);
        if (!n) return NULL;
        n->next = c;
        n->cap = cap;
        n->used = 0;
        a->cur = c = n;
        if (a->next_cap < ((size_t)4 << 20)) a->next_cap *= 2; /* (a chunk's unused tail wastes at most half) */
    }
    void *p = c->data + c->used;
    c->used += bytes;
    return p;
}

static void bt_free_chunks(bt_chunk *c) {
    while (c) {
        bt_chunk *n = c->next;
        free(c);
        c = n;
    }
}

/* hand the thread's chunks over to *chunks (a list shared by the call's threads) */
static void bt_hand_over(bt_chunk *_Atomic *chunks, bt_arena *a) {
    bt_chunk *head = a->cur, *tail = head;
    if (!head) return;
    while (tail->next) tail = tail->next;
    bt_chunk *old = atomic_load_explicit(chunks, memory_order_relaxed);
    do tail->next = old;
    while (!atomic_compare_exchange_weak_explicit(chunks, &old, head, memory_order_release, memory_order_relaxed));
    a->cur = NULL;
}

#endif /* FSTOK_BATCH_ARENA_H */
