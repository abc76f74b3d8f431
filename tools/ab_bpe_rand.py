"""Same-process A/B of BPE runtime builds (docs/bpe.md, stop 15): the _bpe*.so of each directory given is loaded
into one process (as fstok.runtime._bpe), one tokenizer per build and encoding; rounds alternate the builds (and
reverse their order every other round); each cell is the minimum over rounds of the best of a few
`encode_ordinary` calls (a list of ids), in ns per byte of process CPU time.

    python tools/ab_bpe_rand.py ENCODINGS WORKLOADS ROUNDS DIR_A DIR_B ...
    python tools/ab_bpe_rand.py o200k_base,cl100k_base eng1,rand,rot 7 /tmp/base /tmp/new

Workloads: eng1 (the bench's English reference: 1 MB of english.txt), rand (the bench's "1 MB random, no spaces",
the same text every call), rot (8 other random texts of 1 MB in turn: every piece new), english, code,
multilingual, chinese_long (whole corpus files), coldeng / coldml (english 1 MB / multilingual after
clear_cache()).  Build a copy with `python setup.py build_ext --inplace` and copy fstok/runtime/_bpe*.so to a
directory of its own (a `#define` change needs `build_ext --force`: headers are not tracked)."""
import gc, os, random, sys, time
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
import fstok, fstok.bpe as fb
import bench_bpe as bb
from ab_bpe import load_builds

encs, wls, rounds = sys.argv[1].split(","), sys.argv[2].split(","), int(sys.argv[3])
dirs = sys.argv[4:]
mods = load_builds(dirs)


def rand_text(seed):
    rnd = random.Random(seed)
    pool = [chr(c) for c in range(0x21, 0x7F)] + [chr(rnd.randint(0xA1, 0x2FF)) for _ in range(200)] + \
        [chr(rnd.randint(0x4E00, 0x9FFF)) for _ in range(200)] + [chr(rnd.randint(0x400, 0x4FF)) for _ in range(100)]
    out, n = [], 0
    while n < 1_000_000:
        c = rnd.choice(pool)
        out.append(c)
        n += len(c.encode())
    return "".join(out)


texts = {}
adv = bb._adversarial()
if "rand" in wls:
    texts["rand"] = [adv["1 MB random, no spaces"]]
if "rot" in wls:
    texts["rot"] = [rand_text(100 + i) for i in range(8)]
if "coldeng" in wls:
    texts["coldeng"] = [bb._read("english", 1_000_000)[:1_000_000]]
if "coldml" in wls:
    texts["coldml"] = [bb._read("multilingual", None)]
if "eng1" in wls:
    texts["eng1"] = [bb._read("english", 1_000_000)[:1_000_000]]
for c in ("english", "code", "multilingual", "chinese_long"):
    if c in wls:
        texts[c] = [bb._read(c, None)]

toks = {}
for e in encs:
    base = fstok.get_encoding(e)
    for i, m in enumerate(mods):
        fb._native = lambda m=m: m
        toks[e, i] = type(base)(base._art)
ref = {}
res = {}
gc.disable()
for r in range(rounds):
    order = list(range(len(mods))) if r % 2 == 0 else list(range(len(mods)))[::-1]
    for e in encs:
        for w in wls:
            ts = texts[w]
            nb = sum(len(t.encode()) for t in ts) / len(ts)
            for i in order:
                t = toks[e, i]
                f = t.encode_ordinary
                if r == 0:
                    for x in ts:
                        out = f(x)
                        if (e, w) not in ref:
                            ref[e, w] = out
                        elif x is ts[0] and out != ref[e, w]:
                            print("MISMATCH", e, w, i)
                # best of: warm a few passes, then time each text of the set
                best = 1e9
                for x in (ts * (3 if len(ts) == 1 else 1)):
                    if w.startswith("cold"): t.clear_cache()
                    t0 = time.process_time(); f(x); dt = time.process_time() - t0
                    best = min(best, dt)
                key = (e, w, i)
                res[key] = min(res.get(key, 1e9), best)
    gc.collect()
for e in encs:
    for w in wls:
        nb = sum(len(t.encode()) for t in texts[w]) / len(texts[w])
        print(f"{e:12s} {w:13s} " + "  ".join(f"{dirs[i].split('/')[-1]}={res[e, w, i] / nb * 1e9:6.2f}" for i in range(len(mods))), flush=True)
