"""Per-worker pre-token memos and the list built without zeroing (fstok/runtime/csrc/mod_bpe.c run_bounds).

- Each pool thread keeps one memo per model (`memo_worker`).  A memo holds a model's ids for byte strings,
  so a memo reached from the wrong model would return that model's ids: two models that tokenize the same
  pieces differently encode one long text alternately on the same pool threads, and each must equal its
  own one-shot ids.
- The result list's item array is not zeroed; the list has size 0 until the pool has filled every item.
  A thread calling gc.collect() in a loop (the collector visits every tracked list) runs beside threaded
  calls in a child process, so that a crash fails the test instead of the test run.
"""
import subprocess
import sys
import textwrap

import fstok

TEXT = ("Tokenizers of 2024: naïve café, ΑΒΓ δέλτα, 東京タワー, emoji 🙂🙂, tabs\tand  spaces; x=[1,2,3]\n" * 3000)


def test_two_models_on_the_same_pool_threads_keep_their_own_memos():
    a, b = fstok.get_encoding("r50k_base"), fstok.get_encoding("cl100k_base")
    assert len(TEXT) >= a.PARALLEL_THRESHOLD
    want_a, want_b = a.encode_ordinary(TEXT), b.encode_ordinary(TEXT)
    assert want_a != want_b  # (else the test could not tell the memos apart)
    for nt in (2, 3, 4, 4, 3, 2):
        assert a.encode_ordinary(TEXT, num_threads=nt) == want_a, nt
        assert b.encode_ordinary(TEXT, num_threads=nt) == want_b, nt
    a._model.clear_cache()  # worker memos of `a` are emptied (epoch), `b`'s stay
    assert a.encode_ordinary(TEXT, num_threads=4) == want_a
    assert b.encode_ordinary(TEXT, num_threads=4) == want_b


_CHILD = textwrap.dedent(
    r"""
    import gc, threading
    import fstok
    tok = fstok.get_encoding("o200k_base")
    text = ("Tokenizers of 2024: naïve café, ΑΒΓ δέλτα, 東京タワー, emoji 🙂🙂; x=[1,2,3]\n" * 4000)
    want = tok.encode_ordinary(text)
    stop = False
    def collect():
        junk = []
        while not stop:
            junk.append([[] for _ in range(50)])  # (tracked objects, so that collections happen)
            if len(junk) > 100:
                junk.clear()
            gc.collect(0)
    th = threading.Thread(target=collect)
    th.start()
    try:
        for i in range(300):
            assert tok.encode_ordinary(text, num_threads=2 + i % 3) == want, i
    finally:
        stop = True
        th.join()
    print("OK")
    """
)


def test_gc_in_another_thread_during_the_list_fill():
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
