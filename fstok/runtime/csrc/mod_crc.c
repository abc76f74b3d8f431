/* zlib's CRC-32 (fstok.runtime._crc.crc32): the artifact checksums (fstok/artifact.py), verified over the whole
 * file on every load.  With PCLMULQDQ (x86-64) the text is folded 64 bytes at a time by carry-less multiplies
 * (the constants of the reflected CRC-32 polynomial 0x04C11DB7: Intel's "Fast CRC Computation Using
 * PCLMULQDQ", as the Linux kernel's crc32-pclmul uses them), several times faster than zlib's table-driven
 * loop; elsewhere, and for the last bytes, a byte table.  Same value as zlib.crc32(data, value). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

static uint32_t crc_table[256];

static void table_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
        crc_table[i] = c;
    }
}

/* the running (inverted) CRC over s[0..n) */
static uint32_t crc_bytes(uint32_t c, const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ s[i]) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_CLMUL 1

__attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t c, const uint8_t *s, size_t n) {
    /* n >= 64 and a multiple of 16 */
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly = _mm_set_epi64x(0x1F7011641LL, 0x1DB710641LL);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)s), x2 = _mm_loadu_si128((const __m128i *)(s + 16)),
            x3 = _mm_loadu_si128((const __m128i *)(s + 32)), x4 = _mm_loadu_si128((const __m128i *)(s + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
    s += 64;
    n -= 64;
#define FOLD(x, k, next)                                                                          \
    do {                                                                                          \
        __m128i lo_ = _mm_clmulepi64_si128(x, k, 0x00), hi_ = _mm_clmulepi64_si128(x, k, 0x11); \
        x = _mm_xor_si128(_mm_xor_si128(lo_, hi_), next);                                         \
    } while (0)
    while (n >= 64) {
        FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)s));
        FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(s + 16)));
        FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(s + 32)));
        FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(s + 48)));
        s += 64;
        n -= 64;
    }
    FOLD(x1, k3k4, x2);
    FOLD(x1, k3k4, x3);
    FOLD(x1, k3k4, x4);
    while (n >= 16) {
        FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)s));
        s += 16;
        n -= 16;
    }
#undef FOLD
    /* 128 -> 64 bits (with 32 zero bits appended) */
    __m128i t = _mm_clmulepi64_si128(x1, k3k4, 0x10); /* x1.low * k4 */
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), t);
    /* 64 -> 32 */
    t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00);
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 4), t);
    /* Barrett reduction */
    t = _mm_and_si128(x1, mask32);
    t = _mm_clmulepi64_si128(t, poly, 0x10); /* * u */
    t = _mm_and_si128(t, mask32);
    t = _mm_clmulepi64_si128(t, poly, 0x00); /* * P */
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_extract_epi32(x1, 1);
}
#endif

static int use_clmul = 0;

static uint32_t crc_update(uint32_t c, const uint8_t *s, size_t n) {
#ifdef HAVE_CLMUL
    if (use_clmul && n >= 64) {
        size_t body = n & ~(size_t)15;
        c = crc_clmul(c, s, body);
        s += body;
        n -= body;
    }
#endif
    return crc_bytes(c, s, n);
}

static PyObject *crc32_py(PyObject *mod, PyObject *args) {
    (void)mod;
    Py_buffer b;
    unsigned long value = 0;
    if (!PyArg_ParseTuple(args, "y*|k", &b, &value)) return NULL;
    uint32_t c = ~(uint32_t)value;
    const uint8_t *s = (const uint8_t *)b.buf;
    size_t n = (size_t)b.len;
    if (n > 65536) {
        Py_BEGIN_ALLOW_THREADS
        c = crc_update(c, s, n);
        Py_END_ALLOW_THREADS
    } else {
        c = crc_update(c, s, n);
    }
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong((unsigned long)~c);
}

static PyObject *set_clmul(PyObject *mod, PyObject *arg) {
    (void)mod;
    int want = PyObject_IsTrue(arg);
    if (want < 0) return NULL;
    int prev = use_clmul;
#ifdef HAVE_CLMUL
    use_clmul = want && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#else
    use_clmul = 0;
#endif
    return PyBool_FromLong(prev);
}

static PyMethodDef methods[] = {
    {"crc32", crc32_py, METH_VARARGS, "crc32(data, value=0) -> zlib.crc32(data, value)"},
    {"_set_clmul", set_clmul, METH_O, "_set_clmul(on) -> previous setting (tests: the byte-table path alone)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {PyModuleDef_HEAD_INIT, "_crc", "zlib's CRC-32, folded with carry-less multiplies", -1,
                                       methods};

PyMODINIT_FUNC PyInit__crc(void) {
    table_init();
#ifdef HAVE_CLMUL
    __builtin_cpu_init();
    use_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
    return PyModule_Create(&moduledef);
}
