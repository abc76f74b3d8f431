#!/usr/bin/env python3
"""Same-process A/B of WordPiece runtime builds (on a shared, noisy VM one wall-clock run says little).

    python tools/wordpiece_ab.py A=path/to/_wordpiece.so B=other.so [--rounds 60] [--corpus mbert|uncased]
                                 [--mode list|bytes] [--pin CPU] [--hot]

Each NAME=SO is a build of fstok/runtime/_wordpiece (e.g. copied aside after `python setup.py build_ext
--inplace` in a private copy of the tree); every variant gets its own tokenizer over the same artifact.
Their outputs are checked equal (encode and encode_batch), then timed passes of `tok.encode(line)` over
the corpus alternate between variants (one untimed pass right before each timed one; order reversed every
other round), in process CPU time.  Prints min / p25 / median ns per line and the median and quartiles of
the per-round ratio to the first variant (the comparable number when the machine is busy).

--hot also times each line encoded 8 times in a row (its tables in cache): the difference to the pass
over the whole corpus is what cache misses cost.

--blocks K1,K2,... times, for each K, the corpus in consecutive blocks of K lines, each block encoded 4
times in a row (min and median CPU ns per line over the rounds): the cost per line as a function of the
working set (multilingual.txt has ~12 lines per language).
"""
import argparse
import gc
import importlib.util
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
SHARED = os.environ.get("FSTOK_SHARED_DATA", os.path.join(HERE, "..", "..", "shared", "data"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("variants", nargs="+", metavar="NAME=SO")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--corpus", choices=["mbert", "uncased"], default="mbert")
    ap.add_argument("--mode", choices=["list", "bytes"], default="list")
    ap.add_argument("--pin", type=int, default=None, metavar="CPU")
    ap.add_argument("--hot", action="store_true")
    ap.add_argument("--blocks", default="", metavar="K1,K2,...")
    a = ap.parse_args()
    if a.pin is not None:
        os.sched_setaffinity(0, {a.pin})
    import fstok
    import fstok.wordpiece as fw

    if a.corpus == "mbert":
        name, path, k = "bert-base-multilingual-cased", "multilingual.txt", None
    else:
        name, path, k = "bert-base-uncased", "english.txt", 4000
    with open(os.path.join(SHARED, "corpus", path), encoding="utf-8") as f:
        lines = [x.rstrip("\n") for x in f][:k]
    base = fstok.get_encoding(name)
    data = base.to_bytes()
    names, fns = [], []
    for v in a.variants:
        nm, so = v.split("=", 1)
        spec = importlib.util.spec_from_file_location("fstok.runtime._wordpiece", so)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        fw._native = lambda m=mod: m  # the tokenizer built next uses this build
        tok = fstok.loads(data)
        ref = [base.encode(x) for x in lines]
        assert [tok.encode(x) for x in lines] == ref, f"{nm}: ids differ"
        assert tok.encode_batch(lines, num_threads=2) == ref, f"{nm}: batch ids differ"
        names.append(nm)
        m = tok._model.encode
        fns.append(tok.encode if a.mode == "list" else (lambda x, m=m: m(x, 2)))
    cpu = time.process_time_ns
    blocks = [int(k) for k in a.blocks.split(",") if k.strip()]
    blk = [{k: [] for k in blocks} for _ in fns]

    def block_pass(f, K, R=4):
        tot = 0
        for i in range(0, len(lines), K):
            b = lines[i:i + K]
            for x in b:
                f(x)
            t0 = cpu()
            for _ in range(R):
                for x in b:
                    f(x)
            tot += cpu() - t0
        return tot / len(lines) / R

    res = [[] for _ in fns]
    hot = [[] for _ in fns]
    gc.collect()
    gc.disable()
    try:
        for f in fns:
            for _ in range(3):
                for x in lines:
                    f(x)
        for r in range(a.rounds):
            order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
            for i in order:
                f = fns[i]
                for x in lines:
                    f(x)
                t0 = cpu()
                for x in lines:
                    f(x)
                res[i].append((cpu() - t0) / len(lines))
                if a.hot and r % 4 == 0:
                    tot = 0
                    for x in lines:
                        f(x)
                        t0 = cpu()
                        for _ in range(8):
                            f(x)
                        tot += cpu() - t0
                    hot[i].append(tot / len(lines) / 8)
                if blocks and r % 4 == 0:
                    for K in blocks:
                        blk[i][K].append(block_pass(f, K))
    finally:
        gc.enable()
    print(f"{name} on {path}, {a.mode}, {a.rounds} rounds, load average {os.getloadavg()[0]:.2f}")
    for nm, rr, hh in zip(names, res, hot):
        q = sorted(x / y for x, y in zip(rr, res[0]))
        s = sorted(rr)
        line = (f"  {nm:12s} min {s[0]:7.0f}  p25 {s[len(s) // 4]:7.0f}  median {statistics.median(s):7.0f} ns/line"
                f"   ratio to {names[0]}: median {statistics.median(q):.3f} (p25 {q[len(q) // 4]:.3f}, p75 {q[3 * len(q) // 4]:.3f})")
        if hh:
            line += f"   hot: min {min(hh):.0f} median {statistics.median(hh):.0f}"
        print(line)
    for nm, bb in zip(names, blk):
        if bb:
            print(f"  {nm:12s} blocks of K lines x4 (min / median ns per line): "
                  + "  ".join(f"K={k}: {min(v):.0f} / {statistics.median(v):.0f}" for k, v in bb.items()))


if __name__ == "__main__":
    main()
