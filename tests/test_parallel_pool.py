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


_BACK_TO_BACK = textwrap.dedent(
    r"""
    import os, threading, time
    import fstok
    o = fstok.get_encoding("o200k_base")
    bert = fstok.get_encoding("bert-base-uncased")
    lines = [("%d naïve café 東京 the quick brown fox " % i) * (1 + i % 5) for i in range(1500)]
    want_o = [o.encode_ordinary(t) for t in lines]
    want_b = [bert.encode(t) for t in lines]
    base = len(os.listdir("/proc/self/task"))
    ncpu = len(os.sched_getaffinity(0))
    errors = []

    def run(k):
        for it in range(12):
            lo = (37 * it + 101 * k) % 900
            b = lines[lo:lo + 1 + (it * 53 + k) % 600]
            nt = (1, 2, 3, 64)[(it + k) % 4]
            if o.encode_ordinary_batch(b, num_threads=nt) != want_o[lo:lo + len(b)]:
                errors.append(("o200k lists", k, it))
            ids, st = o.encode_batch_to_numpy(b, num_threads=nt, disallowed_special=())
            if [ids[st[j]:st[j + 1]].tolist() for j in range(len(b))] != want_o[lo:lo + len(b)]:
                errors.append(("o200k numpy", k, it))
            if bert.encode_batch(b, num_threads=nt) != want_b[lo:lo + len(b)]:
                errors.append(("bert", k, it))

    ths = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    assert not errors, errors[:5]
    # each module's pool holds at most one thread per CPU this process may run on, whatever num_threads asked, and
    # the threads a call starts of its own are gone (a joined Python thread may still be leaving the OS: + 3)
    time.sleep(0.2)
    grown = len(os.listdir("/proc/self/task")) - base
    assert grown <= 2 * ncpu + 3, (grown, ncpu)
    print("OK")
    """
)


def test_back_to_back_batches_from_three_python_threads():
    # Jobs are posted with atomics and taken by compare-and-swap; workers watch for the next job before they sleep,
    # and batch calls wake sleeping workers early.  Three Python threads (one gets the pool, the others threads of
    # their own) run list, numpy and WordPiece batches back to back with 1 to 64 threads, with the watch on and
    # off: every result equals one-by-one encoding, no call waits forever, and the pools stay within the CPUs.
    if not os.path.isdir("/proc/self/task") or not hasattr(os, "sched_getaffinity"):
        return
    for spin in ("100", "0"):
        env = dict(os.environ, FSTOK_POOL_SPIN_US=spin)
        r = subprocess.run([sys.executable, "-c", _BACK_TO_BACK], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0 and "OK" in r.stdout, (spin, r.stderr[-2000:])
