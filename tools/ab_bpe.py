"""Same-process A/B of `_bpe` builds (see docs/design/bpe.md).

The builds' `_bpe*.so` files, each in its own folder, are loaded into one process under one module name, one
tokenizer per build and encoding. Rounds alternate the load order (reversed every other round). Each cell is the
minimum over rounds of the best call's process CPU time of `encode(text)` (a list of ids, as `tools/bench bpe`
times it), in ns per byte; the rounds' values follow in parentheses. A MISMATCH line is printed if two builds
disagree on any text.

    python tools/ab_bpe.py ENCODINGS WORKLOADS ROUNDS DIR_A DIR_B ...
    python tools/ab_bpe.py r50k_base digits,eng1,piece 5 /tmp/base /tmp/new
    python tools/ab_bpe.py o200k_base,cl100k_base eng1,rand,rot,coldml 5 /tmp/base /tmp/new

Workloads:
  digits       the bench's 100k digits
  eng1         English, 1 MB (the bench's English reference)
  rand         the bench's "1 MB random, no spaces", the same text every call
  rot          8 other random texts of 1 MB in turn: every piece is new to the caches
  aaa          1 MB of 'a'
  piece        the span encoder alone on the 100k digits (`encode_piece(..., 2)`: backtracking that hands the
               run to the window encoder)
  english, code, multilingual, chinese_long   whole corpus files
  coldeng, coldml   English 1 MB / multilingual, each call after `clear_cache()`

Build a folder with `python setup.py build_ext --inplace --force && mkdir D && cp fstok/runtime/_bpe*.so D/`
(--force: setuptools does not track header dependencies). Compare two builds, never one build twice (two memos of
one module thrash L3, which makes the second copy look slower).
"""
from __future__ import annotations

import gc
import glob
import importlib.machinery
import importlib.util
import os
import random
import sys
import time
from typing import Callable

ROOT = os.environ.get("FSTOK_ROOT", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import fstok  # noqa: E402
import fstok.bpe as fb  # noqa: E402
import bench_bpe as bb  # noqa: E402

CORPORA = ("english", "code", "multilingual", "chinese_long")


def load_builds(dirs: list[str]) -> list:
    """The `_bpe` extension module of each build folder, loaded side by side into this process."""
    mods = []
    for d in dirs:
        so = glob.glob(os.path.join(d, "_bpe*.so"))[0]
        ld = importlib.machinery.ExtensionFileLoader("fstok.runtime._bpe", so)
        spec = importlib.util.spec_from_file_location("fstok.runtime._bpe", so, loader=ld)
        m = importlib.util.module_from_spec(spec)
        ld.exec_module(m)
        mods.append(m)
    return mods


def rand_text(seed: int) -> str:
    """1 MB of random non-space characters drawn like the bench's adversarial text, from another seed."""
    rnd = random.Random(seed)
    pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(rnd.randint(0xA1, 0x2FF)) for _ in range(200)] + \
        [chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(200)] + [chr(rnd.randint(0x400, 0x4FF)) for _ in range(100)]
    out, n = [], 0
    while n < 1_000_000:
        c = rnd.choice(pool)
        out.append(c)
        n += len(c.encode())
    return "".join(out)


def workload_texts(wls: list[str]) -> dict[str, list[str]]:
    """Each workload's texts; a workload with several texts times each of them once per round."""
    adv = bb._adversarial()
    eng1 = bb._read("english", 1_000_000)[:1_000_000]
    known = {
        "digits": lambda: [adv["100k digits"]], "piece": lambda: [adv["100k digits"]],
        "eng1": lambda: [eng1], "coldeng": lambda: [eng1],
        "rand": lambda: [adv["1 MB random, no spaces"]], "aaa": lambda: [adv["1 MB of 'a'"]],
        "rot": lambda: [rand_text(100 + i) for i in range(8)],
        "coldml": lambda: [bb._read("multilingual", None)],
    }
    for c in CORPORA:
        known[c] = lambda c=c: [bb._read(c, None)]
    unknown = [w for w in wls if w not in known]
    if unknown:
        sys.exit(f"unknown workload(s) {unknown}; known: {sorted(known)}")
    return {w: known[w]() for w in wls}


def call_for(tok, w: str) -> Callable[[str], object]:
    if w == "piece":
        return lambda x: tok._model.encode_piece(x.encode(), 2)
    return tok.encode


def main() -> None:
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    encs, wls, rounds = sys.argv[1].split(","), sys.argv[2].split(","), int(sys.argv[3])
    dirs = sys.argv[4:]
    mods = load_builds(dirs)
    texts = workload_texts(wls)
    toks = {}
    for e in encs:
        base = fstok.get_encoding(e)
        for i, m in enumerate(mods):
            fb._native = lambda m=m: m
            toks[e, i] = type(base)(base._art)
    res: dict[tuple, list[float]] = {}
    ref: dict[tuple, object] = {}
    gc.disable()
    for r in range(rounds):
        order = list(range(len(mods)))
        if r % 2:
            order.reverse()
        for e in encs:
            for w in wls:
                ts = texts[w]
                nb = sum(len(x.encode()) for x in ts) / len(ts)
                for i in order:
                    f = call_for(toks[e, i], w)
                    if r == 0:
                        for k, x in enumerate(ts):
                            if w.startswith("cold"):
                                toks[e, i].clear_cache()
                            out = f(x)
                            if (e, w, k) not in ref:
                                ref[e, w, k] = out
                            elif out != ref[e, w, k]:
                                print("MISMATCH", e, w, k, dirs[i], flush=True)
                    # one text: best of several calls on it; several texts: best over one call of each
                    calls = ts if len(ts) > 1 else ts * (20 if nb < 400_000 else 4)  # (multilingual.txt, 246 KB: 20)
                    best = 1e9
                    for x in calls:
                        if w.startswith("cold"):
                            toks[e, i].clear_cache()  # outside the timing: the cold call is what is measured
                        t0 = time.process_time()
                        f(x)
                        best = min(best, time.process_time() - t0)
                    res.setdefault((e, w, i), []).append(best * 1e9 / nb)
        gc.collect()
    for e in encs:
        for w in wls:
            print(f"{e:12s} {w:12s} " + "  ".join(
                f"{os.path.basename(os.path.normpath(dirs[i]))}: {min(res[e, w, i]):6.2f} "
                f"({'/'.join(f'{v:.1f}' for v in res[e, w, i])})" for i in range(len(mods))), flush=True)


if __name__ == "__main__":
    main()
