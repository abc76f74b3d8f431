#!/usr/bin/env python3
"""BPE training: fstok vs HF tokenizers' BpeTrainer vs the lecture's naive reference.

    tools/bench train                       # english + multilingual, vocab 8k and 32k, r50k_base
    tools/bench train --pattern o200k_base --repeat 3
    tools/bench train --quick               # one corpus, one size, small naive slice

Every run is a fresh subprocess (`python -c ...`); wall time is measured inside it around the
training call only (import excluded), peak memory is the child's peak RSS (os.wait4 ru_maxrss),
which includes the interpreter and imported modules -- the "idle" rows show that baseline.

Contenders (same pattern, same vocabulary size, same 256-byte alphabet, <|endoftext|> special):
  fstok          fstok.train_bpe(files, V, pattern)  (DFA pre-tokenizer + native merge loop, 1 thread)
  fstok-2t       the same with num_threads=2 (pre-tokenization only)
  hf-1t          tokenizers BpeTrainer, RAYON_NUM_THREADS=1
  hf             tokenizers BpeTrainer, default threads
  naive          fstok.train.naive (recount every pair every merge) on a slice, with fstok and
                 fstok.train.fast (pure-Python incremental) on the same slice for the speedup
HF's pre-tokenizer: Sequence[Split(pattern, Isolated), ByteLevel(use_regex=False)], initial_alphabet=
ByteLevel.alphabet().  HF trains on files line by line; fstok on whole files (see docs/design/training.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CORPUS = os.path.normpath(os.path.join(os.environ.get("FSTOK_SHARED_DATA") or os.path.join(ROOT, "..", "shared", "data"), "corpus"))

CORPORA = {
    "english": ["english.txt"],
    "multilingual": ["multilingual.txt", "chinese_long.txt"],
}

FSTOK = """
import json, sys, time
import fstok, fstok.train
from fstok.runtime import _train
a = json.loads(sys.argv[1])
t = time.perf_counter()
tok = fstok.train_bpe(a["files"], a["vocab"], pattern=a["pattern"], num_threads=a.get("threads", 1))
dt = time.perf_counter() - t
print(json.dumps({"time": dt, "vocab": tok.n_vocab}))
"""

HF = """
import json, sys, time
from tokenizers import Tokenizer, Regex, models, pre_tokenizers, trainers
a = json.loads(sys.argv[1])
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex(a["hf_pattern"]), behavior="isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
tr = trainers.BpeTrainer(vocab_size=a["vocab"], special_tokens=["<|endoftext|>"],
                         initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
t = time.perf_counter()
if "chars" in a:
    text = open(a["files"][0], encoding="utf-8").read()[: a["chars"]]
    t = time.perf_counter()
    tok.train_from_iterator([text], tr)
else:
    tok.train(a["files"], tr)
dt = time.perf_counter() - t
print(json.dumps({"time": dt, "vocab": tok.get_vocab_size()}))
"""

SLICE = """
import json, sys, time
a = json.loads(sys.argv[1])
text = open(a["file"], encoding="utf-8").read()[: a["chars"]]
from fstok.train import train_bpe, train_naive_texts
t = time.perf_counter()
if a["which"] == "naive":
    m = train_naive_texts([text], a["vocab"], pattern=a["pattern"])
    n = 256 + 1 + len(m)
elif a["which"] == "fast-python":
    n = train_bpe([text], a["vocab"], pattern=a["pattern"], backend="python", pretokenizer="regex").n_vocab
else:
    n = train_bpe([text], a["vocab"], pattern=a["pattern"]).n_vocab
dt = time.perf_counter() - t
print(json.dumps({"time": dt, "vocab": n}))
"""

IDLE = {
    "fstok": "import fstok, fstok.train, fstok.pretokenize\nfrom fstok.runtime import _train\nprint('{\"time\": 0, \"vocab\": 0}')",
    "hf": "import tokenizers\nprint('{\"time\": 0, \"vocab\": 0}')",
}


def run_child(code: str, arg: dict, env_extra: dict | None = None, timeout: float = 1800) -> dict:
    env = dict(os.environ)
    env.update(env_extra or {})
    with tempfile.TemporaryFile("w+") as out:
        p = subprocess.Popen([sys.executable, "-c", code, json.dumps(arg)], stdout=out, stderr=subprocess.PIPE,
                             env=env, cwd=ROOT, text=True)
        try:
            _, status, ru = os.wait4(p.pid, 0)
        except KeyboardInterrupt:
            p.kill()
            raise
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read()
        out.seek(0)
        txt = out.read()
    if p.returncode != 0:
        raise RuntimeError(f"child failed ({p.returncode}): {err[-2000:]}")
    res = json.loads(txt.strip().splitlines()[-1])
    res["rss_mb"] = ru.ru_maxrss / 1024.0
    return res


def best(code, arg, repeat, env_extra=None):
    runs = [run_child(code, arg, env_extra) for _ in range(repeat)]
    r = min(runs, key=lambda x: x["time"])
    r["rss_mb"] = max(x["rss_mb"] for x in runs)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(prog="tools/bench train", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpora", default="english,multilingual", help=f"comma list of {', '.join(CORPORA)}")
    ap.add_argument("--vocab", default="8000,32000", help="comma list of vocabulary sizes")
    ap.add_argument("--pattern", default="r50k_base")
    ap.add_argument("--repeat", type=int, default=1, help="runs per cell (best time, max RSS)")
    ap.add_argument("--naive-chars", type=int, default=200_000, help="slice of english.txt for the naive reference")
    ap.add_argument("--naive-vocab", type=int, default=1257, help="vocabulary size for the naive comparison")
    ap.add_argument("--no-naive", action="store_true")
    ap.add_argument("--no-threads", action="store_true", help="skip the multi-threaded rows")
    ap.add_argument("--quick", action="store_true", help="english, 8k, small naive slice")
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    args = ap.parse_args()
    if args.quick:
        args.corpora, args.vocab, args.naive_chars, args.naive_vocab = "english", "8000", 60_000, 557
    sys.path.insert(0, ROOT)
    from fstok.train.export import hf_pattern
    from fstok.train.pretok import resolve_pattern

    _, rx = resolve_pattern(args.pattern)
    hfp = hf_pattern(rx)
    try:
        import tokenizers

        have_hf = True
        hf_version = tokenizers.__version__
    except ImportError:
        have_hf, hf_version = False, None
    ncpu = os.cpu_count()
    print(f"# BPE training, pattern {args.pattern}, {ncpu} CPUs, tokenizers {hf_version}, python {sys.version.split()[0]}")
    rows = []
    idle = {"fstok": run_child(IDLE["fstok"], {})["rss_mb"]}
    if have_hf:
        idle["hf"] = run_child(IDLE["hf"], {})["rss_mb"]
    print(f"# idle peak RSS (interpreter + imports): fstok {idle['fstok']:.1f} MB" +
          (f", tokenizers {idle['hf']:.1f} MB" if have_hf else ""))
    hdr = f"{'corpus':<13} {'MB':>5} {'vocab':>6} {'trainer':<12} {'time s':>8} {'peak MB':>8} {'vs hf-1t':>9} {'tokens':>7}"
    print(hdr)
    print("-" * len(hdr))
    for cname in args.corpora.split(","):
        files = [os.path.join(CORPUS, f) for f in CORPORA[cname]]
        mb = sum(os.path.getsize(f) for f in files) / 1e6
        for v in (int(x) for x in args.vocab.split(",")):
            cells = [("fstok", FSTOK, {"files": files, "vocab": v, "pattern": args.pattern, "threads": 1}, None)]
            if not args.no_threads:
                cells.append(("fstok-2t", FSTOK, {"files": files, "vocab": v, "pattern": args.pattern, "threads": 2}, None))
            if have_hf:
                cells.append(("hf-1t", HF, {"files": files, "vocab": v, "hf_pattern": hfp}, {"RAYON_NUM_THREADS": "1"}))
                if not args.no_threads:
                    cells.append(("hf", HF, {"files": files, "vocab": v, "hf_pattern": hfp}, None))
            res = {}
            for name, code, arg, env in cells:
                res[name] = best(code, arg, args.repeat, env)
            ref = res.get("hf-1t")
            for name, r in res.items():
                rel = f"{ref['time'] / r['time']:8.2f}x" if ref else "       -"
                print(f"{cname:<13} {mb:5.1f} {v:>6} {name:<12} {r['time']:8.3f} {r['rss_mb']:8.1f} {rel:>9} {r['vocab']:>7}")
                rows.append({"corpus": cname, "mb": mb, "vocab": v, "trainer": name, **r})
    if not args.no_naive:
        f = os.path.join(CORPUS, "english.txt")
        kb = args.naive_chars / 1e3
        print()
        print(f"# naive reference on the first {args.naive_chars:,} chars of english.txt, vocab {args.naive_vocab}")
        hdr = f"{'trainer':<14} {'time s':>8} {'peak MB':>8} {'fstok speedup':>14} {'tokens':>7}"
        print(hdr)
        print("-" * len(hdr))
        res = {}
        for which in ("fstok", "fast-python", "naive"):
            res[which] = best(SLICE, {"file": f, "chars": args.naive_chars, "vocab": args.naive_vocab,
                                      "pattern": args.pattern, "which": which}, 1 if which == "naive" else args.repeat)
        if have_hf:
            res["hf-1t"] = best(HF, {"files": [f], "chars": args.naive_chars, "vocab": args.naive_vocab, "hf_pattern": hfp}, args.repeat,
                                {"RAYON_NUM_THREADS": "1"})
        for which, r in res.items():
            sp = r["time"] / res["fstok"]["time"]
            print(f"{which:<14} {r['time']:8.3f} {r['rss_mb']:8.1f} {res[which]['time'] / res['fstok']['time']:13.1f}x {r['vocab']:>7}")
            rows.append({"corpus": f"english[:{kb:.0f}k chars]", "vocab": args.naive_vocab, "trainer": which, **r,
                         "fstok_speedup": sp})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
