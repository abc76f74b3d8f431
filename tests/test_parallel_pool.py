"""The persistent worker pool of the BPE long-text path (fstok/runtime/csrc/tpool.h): results equal
one-shot when two Python threads encode long texts at once (one gets the pool, the other starts threads
of its own), and a forked child (whose pool threads do not exist) still encodes instead of waiting
forever for workers."""
import os
import subprocess
import sys
import textwrap
import threading

import fstok

TEXT = ("The quick brown fox jumps over the lazy dog; 12345 — naïve café. " * 40 + "\n") * 120  # ~320k chars


def test_two_python_threads_share_the_pool():
    tok = fstok.get_encoding("cl100k_base")
    assert len(TEXT) >= tok.PARALLEL_THRESHOLD
    texts = [TEXT, TEXT.upper()]
    want = [tok.encode_ordinary(t) for t in texts]
    errors = []

    def run(i):
        try:
            for _ in range(15):
                if tok.encode_ordinary(texts[i], num_threads=3) != want[i]:
                    errors.append(i)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    ths = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert not errors


_CHILD = textwrap.dedent(
    r"""
    import os, sys
    import fstok
    tok = fstok.get_encoding("o200k_base")
    text = ("The quick brown fox jumps over the lazy dog; 12345 — naïve café. " * 40 + "\n") * 120
    want = tok.encode_ordinary(text)
    assert tok.encode_ordinary(text, num_threads=4) == want   # starts the pool in the parent
    pid = os.fork()
    if pid == 0:
        ok = tok.encode_ordinary(text, num_threads=4) == want
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0, status
    assert tok.encode_ordinary(text, num_threads=4) == want   # the parent's pool still works
    print("OK")
    """
)


def test_forked_child_encodes_with_an_empty_pool():
    if not hasattr(os, "fork"):
        return
    r = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]
