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

/* ---- pinned ints: the cached int of a token id is never freed, so a list item needs no Py_INCREF ----
 *
 * Building a list of n ids used to cost n refcount writes into n int objects spread over megabytes (the
 * ints of a 200k vocabulary): ~20% of a warm whole-document encode, and on N threads a serial tail, since
 * refcounts may only be written by the GIL-holding thread.  A pinned int gets a reference count no list
 * can bring to zero: immortal on CPython 3.12+ (as CPython's own small ints are; Py_INCREF/Py_DECREF do
 * not write it), 2^60 before 3.12 (every Py_DECREF of an item fstok handed out without an increment
 * takes one from 2^60, which 10^9 decrements a second take 36 years to exhaust).  So fstok can hand out
 * borrowed pointers as owned list items.  The price is that pinned ints are never freed: one table per
 * extension module holds the ints 0..n-1 for the largest vocabulary loaded (n x ~32 bytes: 6.4 MB for
 * o200k), shared by every model of that module, like CPython's small-int cache.  Not on free-threaded
 * builds (refcounts there are split per thread): those keep the Py_INCREF path, as does
 * FSTOK_PIN_INTS=0 in the environment. */
#if !defined(Py_GIL_DISABLED) && PY_VERSION_HEX < 0x030F0000
#define PYIDS_CAN_PIN 1
#else
#define PYIDS_CAN_PIN 0
#endif
#define PYIDS_PIN_LEGACY ((Py_ssize_t)1 << 60) /* the pre-3.12 count */

static PyObject **pyids_pin_tab = NULL; /* the module's pinned ints 0..pyids_pin_n-1 */
static size_t pyids_pin_n = 0;
static int pyids_pin_state = -1;        /* -1 not decided yet, 0 off, 1 on */

/* ---- pinned ints side by side: the int of an id computed, not loaded ----
 *
 * Mapping ids to their ints through pyids_pin_tab is a load from a table of 8 bytes per id (1.6 MB for o200k)
 * for every token, a cache miss for most of them on a core that has not read the table lately: on the threads
 * of a batch of short lines it was ~8% of the call's CPU (perf: the stall on that load).  So the ints from 257
 * up (CPython's shared small ints stay where they are) are made side by side, one array of PYIDS_STRIDE-byte
 * slots per growth of the table, and the int of an id in the largest such run is run.base + (id - run.lo) *
 * PYIDS_STRIDE.  A slot holds a byte copy of the int PyLong_FromSize_t made (a vocabulary's ids are below 2^30:
 * one digit, so the object is sizeof(PyLongObject) bytes), pinned like every pinned int; the arrays are never
 * freed (the table's ints never were).  Not with Py_TRACE_REFS (objects there are linked into a list). */
#if PYIDS_CAN_PIN && !defined(Py_TRACE_REFS)
#define PYIDS_RUNS 1
#else
#define PYIDS_RUNS 0
#endif
#define PYIDS_STRIDE 32
#define PYIDS_RUN_LO 257
typedef struct {
    const char *base; /* the int of id lo + k is at base + k * PYIDS_STRIDE, for k < n */
    size_t lo, n;
} pyids_run;
static pyids_run pyids_main_run = {NULL, 0, 0}; /* the module's largest run */

/* the pinned int of id < n_ints: computed in the run, else from the table */
static inline PyObject *pyids_pinned_int(PyObject *const *ints, pyids_run run, uint32_t id) {
    size_t k = (size_t)id - run.lo;
    return k < run.n ? (PyObject *)(run.base + k * PYIDS_STRIDE) : ints[id];
}

/* with the GIL: the ints lo..hi-1 (lo >= PYIDS_RUN_LO) made side by side into t[lo..hi), pinned; 1 done, 0 not
 * made here (no memory, or this Python has no room for them: the caller makes them one by one), -1 with an
 * exception */
static int pyids_pin(PyObject *o);
static inline int pyids_make_run(PyObject **t, size_t lo, size_t hi) {
#if PYIDS_RUNS
    if (sizeof(PyLongObject) > PYIDS_STRIDE || hi <= lo || hi > ((size_t)1 << 30)) return 0;
    char *base = (char *)aligned_alloc(64, ((hi - lo) * PYIDS_STRIDE + 63) & ~(size_t)63);
    if (!base) return 0;
    memset(base, 0, (hi - lo) * PYIDS_STRIDE);
    for (size_t i = lo; i < hi; i++) {
        PyObject *v = PyLong_FromSize_t(i);
        if (!v) return -1; /* (the slots made so far are never handed out: base is not published) */
        PyObject *o = (PyObject *)(base + (i - lo) * PYIDS_STRIDE);
        memcpy(o, v, sizeof(PyLongObject));
        Py_DECREF(v);
        Py_SET_REFCNT(o, 1);
        if (!pyids_pin(o)) return 0; /* (never here: pyids_pinned_ints pinned 0..256 first) */
    }
    for (size_t i = lo; i < hi; i++) t[i] = (PyObject *)(base + (i - lo) * PYIDS_STRIDE);
    if (hi - lo > pyids_main_run.n) {
        pyids_main_run.base = base;
        pyids_main_run.lo = lo;
        pyids_main_run.n = hi - lo;
    }
    return 1;
#else
    (void)t, (void)lo, (void)hi;
    return 0;
#endif
}

/* with the GIL: pin o (its existing references stay counted); 1 if it is now pinned */
static inline int pyids_pin(PyObject *o) {
#if PYIDS_CAN_PIN
#if PY_VERSION_HEX >= 0x030C0000
    if (_Py_IsImmortal(o)) return 1; /* (CPython's small ints 0..256) */
#if defined(_Py_IMMORTAL_REFCNT)
    Py_SET_REFCNT(o, _Py_IMMORTAL_REFCNT);
#elif defined(_Py_IMMORTAL_INITIAL_REFCNT)
    Py_SET_REFCNT(o, _Py_IMMORTAL_INITIAL_REFCNT);
#else
    return 0;
#endif
    return _Py_IsImmortal(o) ? 1 : 0;
#else
    if (Py_REFCNT(o) < PYIDS_PIN_LEGACY) Py_SET_REFCNT(o, Py_REFCNT(o) + PYIDS_PIN_LEGACY);
    return Py_REFCNT(o) >= PYIDS_PIN_LEGACY;
#endif
#else
    (void)o;
    return 0;
#endif
}

/* with the GIL: fill dst[0..n) with the module's pinned ints 0..n-1 (created and pinned on first need)
 * and return 1; 0 when ints are not pinned here (dst untouched: the caller owns references as before);
 * -1 with an exception */
static inline __attribute__((unused)) int pyids_pinned_ints(PyObject **dst, size_t n) {
    if (pyids_pin_state < 0) {
        const char *env = getenv("FSTOK_PIN_INTS");
        pyids_pin_state = PYIDS_CAN_PIN && !(env && env[0] == '0');
    }
    if (!pyids_pin_state) return 0;
    if (n > pyids_pin_n) {
        PyObject **t = (PyObject **)realloc(pyids_pin_tab, n * sizeof(PyObject *));
        if (!t) {
            PyErr_NoMemory();
            return -1;
        }
        pyids_pin_tab = t;
        size_t run_lo = pyids_pin_n > PYIDS_RUN_LO ? pyids_pin_n : PYIDS_RUN_LO;
        for (size_t i = pyids_pin_n; i < n; i++) {
            if (i == run_lo) { /* (0..256 first: a Python that refuses to pin refuses there) */
                int r = pyids_make_run(t, i, n);
                if (r < 0) return -1;
                if (r) {
                    pyids_pin_n = n;
                    break;
                }
            }
            PyObject *v = PyLong_FromSize_t(i);
            if (!v) return -1; /* (the ints pinned so far stay in the table) */
            if (!pyids_pin(v)) { /* (0..256 are CPython's shared small ints: pinned all the same) */
                Py_DECREF(v);
                pyids_pin_state = 0; /* this Python refused: never pin */
                return 0;
            }
            t[i] = v;
            pyids_pin_n = i + 1;
        }
    }
    memcpy(dst, pyids_pin_tab, n * sizeof(PyObject *));
    return 1;
}

/* with the GIL: a new list of pinned ints[ids[i]] (pinned: no reference to take; the table of 8-byte
 * pointers is the only memory read besides ids), ints made for ids >= n_ints.  The item array comes from
 * PyMem_Malloc, not PyList_New(n), which callocs it: zeroing 8 bytes a token that the fill writes again was 2.4%
 * of a warm r50k encode of multilingual.txt (1.5 bytes a token).  The list has size 0 until the fill is
 * done, so list_dealloc never reads an unwritten item (on failure it has size i: the items written). */
static inline __attribute__((unused)) PyObject *pyids_list_pinned(PyObject *const *ints, size_t n_ints,
                                                                  const uint32_t *ids, size_t n) {
    const pyids_run run = pyids_main_run;
    PyObject *l = PyList_New(0);
    if (!l || !n) return l;
    PyObject **dst = (PyObject **)PyMem_Malloc(n * sizeof(PyObject *));
    if (!dst) {
        Py_DECREF(l);
        return PyErr_NoMemory();
    }
    ((PyListObject *)l)->ob_item = dst;
    ((PyListObject *)l)->allocated = (Py_ssize_t)n;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) { /* (4 independent loads per round: the table misses overlap) */
        uint32_t a = ids[i], b = ids[i + 1], c = ids[i + 2], d = ids[i + 3];
        if (a >= n_ints || b >= n_ints || c >= n_ints || d >= n_ints) break;
        dst[i] = pyids_pinned_int(ints, run, a), dst[i + 1] = pyids_pinned_int(ints, run, b);
        dst[i + 2] = pyids_pinned_int(ints, run, c), dst[i + 3] = pyids_pinned_int(ints, run, d);
    }
    for (; i < n; i++) {
        uint32_t id = ids[i];
        PyObject *v = id < n_ints ? pyids_pinned_int(ints, run, id) : PyLong_FromUnsignedLong(id);
        if (!v) {
            Py_SET_SIZE(l, (Py_ssize_t)i);
            Py_DECREF(l);
            return NULL;
        }
        dst[i] = v;
    }
    Py_SET_SIZE(l, (Py_ssize_t)n);
    return l;
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

/* ids -> borrowed cached pointers (no GIL needed); returns the malloc'd block or NULL.  *missing: whether
 * some id had no cached int (its pointer is NULL) */
static inline PyObject **pyids_borrow(PyObject *const *cache, size_t n_cache, const uint32_t *ids, size_t m,
                                      int *missing) {
    PyObject **pp = (PyObject **)malloc((m ? m : 1) * sizeof(PyObject *));
    int miss = 0;
    if (pp)
        for (size_t k = 0; k < m; k++) {
            miss |= ids[k] >= n_cache;
            pp[k] = ids[k] < n_cache ? cache[ids[k]] : NULL;
        }
    *missing = miss;
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
