/* Building one Python list of token ids from pieces encoded on worker threads (shared by the
 * WordPiece and BPE long-text paths).
 *
 * Workers turn each piece's ids into *borrowed* pointers to the model's cached int objects (reading
 * that table needs no GIL); the GIL-holding thread then takes the reference of every item
 * (pyids_take_block, as pieces finish, so it overlaps the workers) and finally moves the pointer
 * blocks into one list (pyids_list).  A NULL pointer means "no cached int": an int is created. */
#ifndef FSTOK_PYIDS_H
#define FSTOK_PYIDS_H
#include <Python.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* "piece i is done" flags with a condition variable: the thread that builds the list sleeps until the
 * piece it needs next is done, instead of spinning (a spinning waiter took CPU from the workers when
 * there were no more cores than threads). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    atomic_int *done;
} pyids_sync;

static inline int pyids_sync_init(pyids_sync *y, size_t n) {
    y->done = (atomic_int *)calloc(n ? n : 1, sizeof(atomic_int));
    if (!y->done) return -1;
    for (size_t i = 0; i < n; i++) atomic_init(&y->done[i], 0);
    pthread_mutex_init(&y->mu, NULL);
    pthread_cond_init(&y->cv, NULL);
    return 0;
}

static inline void pyids_sync_free(pyids_sync *y) {
    if (!y->done) return;
    pthread_mutex_destroy(&y->mu);
    pthread_cond_destroy(&y->cv);
    free(y->done);
    y->done = NULL;
}

static inline void pyids_sync_mark(pyids_sync *y, size_t i) {
    atomic_store_explicit(&y->done[i], 1, memory_order_release);
    pthread_mutex_lock(&y->mu); /* (the waiter checks the flag under the mutex: no lost wake-up) */
    pthread_cond_broadcast(&y->cv);
    pthread_mutex_unlock(&y->mu);
}

static inline int pyids_sync_ready(pyids_sync *y, size_t i) {
    return atomic_load_explicit(&y->done[i], memory_order_acquire);
}

/* blocks: call without the GIL */
static inline void pyids_sync_wait(pyids_sync *y, size_t i) {
    pthread_mutex_lock(&y->mu);
    while (!atomic_load_explicit(&y->done[i], memory_order_acquire)) pthread_cond_wait(&y->cv, &y->mu);
    pthread_mutex_unlock(&y->mu);
}

/* with the GIL: a new list of the ints of ids[0..n) (cached ints where id < n_cache).  The cache lines
 * of the ints a few items ahead are prefetched: the refcount writes of a long result are mostly cache
 * misses (the ints of a 100k-token vocabulary span megabytes). */
static inline PyObject *pyids_list_from_ids(PyObject *const *cache, size_t n_cache, const uint32_t *ids, size_t n) {
    PyObject *l = PyList_New((Py_ssize_t)n);
    if (!l) return NULL;
    PyObject **dst = ((PyListObject *)l)->ob_item;
    for (size_t i = 0; i < n; i++) {
        if (i + 24 < n && ids[i + 24] < n_cache) __builtin_prefetch(&cache[ids[i + 24]], 0);
        if (i + 8 < n && ids[i + 8] < n_cache) __builtin_prefetch(cache[ids[i + 8]], 1);
        uint32_t id = ids[i];
        PyObject *v;
        if (id < n_cache) {
            v = cache[id];
            Py_INCREF(v);
        } else if (!(v = PyLong_FromUnsignedLong(id))) {
            Py_DECREF(l);
            return NULL;
        }
        dst[i] = v;
    }
    return l;
}

/* ids -> borrowed cached pointers (no GIL needed); returns the malloc'd block or NULL */
static inline PyObject **pyids_borrow(PyObject *const *cache, size_t n_cache, const uint32_t *ids, size_t m) {
    PyObject **pp = (PyObject **)malloc((m ? m : 1) * sizeof(PyObject *));
    if (pp)
        for (size_t k = 0; k < m; k++) pp[k] = ids[k] < n_cache ? cache[ids[k]] : NULL;
    return pp;
}

/* with the GIL: own every item of the block; on failure nothing of the block is owned, returns -1 */
static inline int pyids_take_block(PyObject **pp, const uint32_t *ids, size_t m) {
    for (size_t q = 0; q < m; q++) {
        if (q + 16 < m && pp[q + 16]) __builtin_prefetch(pp[q + 16], 1);
        PyObject *v = pp[q];
        if (v) {
            Py_INCREF(v);
        } else if (!(v = PyLong_FromUnsignedLong(ids[q]))) {
            for (size_t r = 0; r < q; r++) Py_DECREF(pp[r]);
            return -1;
        } else {
            pp[q] = v;
        }
    }
    return 0;
}

/* with the GIL: the list of blocks[0..np) (lens[k] items each, all owned when ok), or NULL with the
 * references of the first `owned` blocks released */
static inline PyObject *pyids_list(PyObject ***blocks, const size_t *lens, size_t np, size_t owned, int ok) {
    size_t total = 0;
    for (size_t k = 0; k < np; k++) total += lens[k];
    PyObject *result = ok ? PyList_New((Py_ssize_t)total) : NULL;
    if (result) {
        PyObject **dst = ((PyListObject *)result)->ob_item;
        for (size_t k = 0; k < np; k++) {
            if (lens[k]) memcpy(dst, blocks[k], lens[k] * sizeof(PyObject *));
            dst += lens[k];
        }
    } else {
        for (size_t k = 0; k < owned; k++)
            for (size_t q = 0; q < lens[k]; q++) Py_DECREF(blocks[k][q]);
        if (!PyErr_Occurred()) PyErr_NoMemory();
    }
    return result;
}
#endif
