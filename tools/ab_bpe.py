"""Same-process A/B of `_bpe` builds (docs/bpe.md, "Stop 15"): the builds' `_bpe*.so` files, each in its own folder,
are loaded into one process under one module name; rounds alternate the load order; the result is the min ns/byte of
`encode(text)` (a list, as `tools/bench bpe` times it) per workload, and a MISMATCH line if two builds disagree.

    python tools/ab_bpe.py ENCODINGS WORKLOADS ROUNDS DIR_A DIR_B ...
    e.g. python tools/ab_bpe.py r50k_base digits,eng1,piece 5 /tmp/base /tmp/new

Workloads: digits (the bench's 100k digits), eng1 (English, 1 MB), rand (1 MB random, no spaces), aaa (1 MB of 'a'),
piece (the encoder alone on the 100k digits: `encode_piece(..., 2)`, backtracking that hands the run to the window
encoder), english / code / multilingual (whole corpus files).  Build a folder with
`python setup.py build_ext --inplace --force && mkdir D && cp fstok/runtime/_bpe*.so D/` (--force: setuptools does
not track header dependencies).  Two builds only, never one build twice (two memos of one module thrash L3).
"""
import gc, glob, importlib.machinery, importlib.util, os, sys, time

ROOT = os.environ.get("FSTOK_ROOT", os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import fstok  # noqa: E402
import fstok.bpe as fb  # noqa: E402
import bench_bpe as bb  # noqa: E402


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


def main() -> None:
    encs, wls, rounds = sys.argv[1].split(","), sys.argv[2].split(","), int(sys.argv[3])
    dirs = sys.argv[4:]
    mods = load_builds(dirs)
    adv = bb._adversarial()
    texts = {"digits": adv["100k digits"], "eng1": bb._read("english", 1_000_000)[:1_000_000],
             "rand": adv["1 MB random, no spaces"], "aaa": adv["1 MB of 'a'"]}
    for c in ("english", "code", "multilingual"):
        if c in wls:
            texts[c] = bb._read(c, None)
    toks = {}
    for e in encs:
        base = fstok.get_encoding(e)
        for i, m in enumerate(mods):
            fb._native = lambda m=m: m
            toks[e, i] = type(base)(base._art)
    res, ref = {}, {}
    gc.disable()
    for r in range(rounds):
        order = list(range(len(mods))) if r % 2 == 0 else list(range(len(mods)))[::-1]
        for e in encs:
            for w in wls:
                x = texts["digits" if w == "piece" else w]
                nb = len(x.encode())
                for i in order:
                    t = toks[e, i]
                    if w == "piece":
                        f = lambda xb=x.encode(), t=t: t._model.encode_piece(xb, 2)
                    else:
                        f = lambda x=x, t=t: t.encode(x)
                    out = f()
                    if (e, w) not in ref:
                        ref[e, w] = out
                    elif out != ref[e, w]:
                        print("MISMATCH", e, w, dirs[i])
                    best = 1e9
                    for _ in range(20 if nb < 200_000 else 4):
                        t0 = time.process_time()
                        f()
                        best = min(best, time.process_time() - t0)
                    res.setdefault((e, w, i), []).append(best * 1e9 / nb)
    for e in encs:
        for w in wls:
            print(f"{e:12s} {w:12s} " + "  ".join(
                f"{os.path.basename(os.path.normpath(dirs[i]))}: {min(res[e, w, i]):6.2f} "
                f"({'/'.join(f'{v:.1f}' for v in res[e, w, i])})" for i in range(len(mods))))


if __name__ == "__main__":
    main()
