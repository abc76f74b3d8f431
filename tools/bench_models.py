"""SentencePiece-family benchmark: fstok vs sentencepiece, HF tokenizers, tokie, kitoken and gigatoken on
the shared Unigram and SentencePiece-BPE model files.

    tools/bench models                                   # every model, every peer that loads it
    tools/bench models --models llama-2,e5 --rounds 3 --mb 1

Each (model, peer) cell runs in a fresh process: load the model (its load time is reported), warm up on
other text (the first half of english.txt and code.txt), then time one pass over documents of ~8 KB the
process has not seen (multilingual.txt, the second half of english.txt, chinese_long.txt; `--timed` picks), one
document per call, 1 thread.  Cells are interleaved over the rounds and the median MB/s (of UTF-8
input) is reported.  "exact" compares each peer's ids with the model's own library (sentencepiece for
.model files, tokenizers with add_special_tokens=False for tokenizer.json).  BlingFire is not a peer here:
it loads its own precompiled models, not these files.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SHARED = os.environ.get("FSTOK_SHARED_DATA") or os.path.normpath(os.path.join(ROOT, "..", "shared", "data"))
if not os.path.isdir(os.path.join(SHARED, "corpus")):
    SHARED = "/work/shared/data"
CORPUS = os.path.join(SHARED, "corpus")
M = os.path.join(SHARED, "vocab", "models")
MODELS = {
    "llama-2": os.path.join(M, "spm-bpe/llama-2/tokenizer.model"),
    "mistral": os.path.join(M, "spm-bpe/mistral-7b-v0.1/tokenizer.model.v1"),
    "gemma": os.path.join(M, "spm-bpe/gemma/tokenizer.gemma"),
    "maxtext-unigram": os.path.join(M, "unigram/maxtext-default-c4/tokenizer.default"),
    "e5-unigram": os.path.join(M, "unigram/multilingual-e5-small/tokenizer.json"),
    "phi-3": os.path.join(M, "spm-bpe/phi-3-mini/tokenizer.json"),
}
PEERS = ["fstok", "sentencepiece", "hf", "tokie", "kitoken", "gigatoken"]
DOC_CHARS = 8000


def _docs(text: str, limit_bytes: int) -> list[str]:
    out, cur, n, total = [], [], 0, 0
    for line in text.split("\n"):
        cur.append(line)
        n += len(line) + 1
        if n >= DOC_CHARS:
            d = "\n".join(cur)
            out.append(d)
            total += len(d.encode())
            cur, n = [], 0
            if total >= limit_bytes:
                break
    return out


TIMED = ("multilingual", "english", "chinese_long")


def corpora(mb: float, timed_names=TIMED) -> tuple[list[str], list[str]]:
    def read(name):
        return open(os.path.join(CORPUS, name), encoding="utf-8").read()

    eng, code = read("english.txt"), read("code.txt")
    warm = _docs(eng[: len(eng) // 2], 400_000) + _docs(code[: len(code) // 2], 200_000)
    per = int(mb * 1e6 / len(timed_names))
    timed = []
    for name in timed_names:  # english: its second half (the first is the warm-up)
        timed += _docs(eng[len(eng) // 2 :] if name == "english" else read(f"{name}.txt"), per)
    return warm, timed


def load_peer(peer: str, path: str):
    """An encode(text) -> list of ids callable, or None when the peer does not load this file."""
    is_json = path.endswith(".json")
    if peer == "fstok":
        import tempfile

        import fstok

        # compiled once per source file and fstok version (the artifact is keyed by the file's size and
        # mtime and by fstok's own files), then loaded
        st = os.stat(path)
        pkg = os.path.dirname(fstok.__file__)
        stamp = sorted((f, os.stat(os.path.join(d, f)).st_mtime_ns) for d, _, fs in os.walk(pkg) for f in fs
                       if f.endswith((".py", ".so")))
        key = hashlib.sha256(f"{path}:{st.st_size}:{st.st_mtime_ns}:{stamp}".encode()).hexdigest()[:16]
        p = os.path.join(tempfile.gettempdir(), f"fstok-bench-models-{key}.fst")
        if not os.path.exists(p):
            fstok.compile(path).save(p)
        t = time.perf_counter()
        tok = fstok.load(p)
        load_ms = (time.perf_counter() - t) * 1e3
        return tok.encode, load_ms
    t = time.perf_counter()
    if peer == "sentencepiece":
        if is_json:
            return None
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=path)
        f = sp.encode
    elif peer == "hf":
        if not is_json:
            return None
        import tokenizers

        hf = tokenizers.Tokenizer.from_file(path)

        def f(x):
            return hf.encode(x, add_special_tokens=False).ids
    elif peer == "tokie":
        if not is_json:
            return None
        import tokie

        tk = tokie.Tokenizer.from_json(path)

        def f(x):
            return list(tk.encode(x, add_special_tokens=False).ids)
    elif peer == "kitoken":
        import kitoken

        kt = kitoken.Kitoken.from_tokenizers_file(path) if is_json else kitoken.Kitoken.from_sentencepiece_file(path)

        def f(x):
            return list(kt.encode(x))
    elif peer == "gigatoken":
        import gigatoken

        gt = gigatoken.Tokenizer(path) if is_json else gigatoken.Tokenizer.from_sentencepiece(path)

        def f(x):
            return gt.encode(x).tolist()
    else:
        raise ValueError(peer)
    return f, (time.perf_counter() - t) * 1e3


def child(model: str, peer: str, mb: float, clock: str = "wall", timed_names=TIMED) -> dict:
    warm, timed = corpora(mb, timed_names)
    try:
        got = load_peer(peer, MODELS[model])
    except Exception as e:  # a peer that cannot read the file
        return {"error": f"{type(e).__name__}: {str(e)[:100]}"}
    if got is None:
        return {"error": "does not load this file"}
    f, load_ms = got
    for d in warm:
        f(d)
    nbytes = sum(len(d.encode()) for d in timed)
    now = time.process_time if clock == "cpu" else time.perf_counter
    t = now()
    out = [f(d) for d in timed]
    dt = now() - t
    h = hashlib.sha256(json.dumps([list(map(int, x)) for x in out]).encode()).hexdigest()
    return {"mbps": nbytes / dt / 1e6, "load_ms": load_ms, "hash": h, "bytes": nbytes}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mb", type=float, default=1.0, help="MB of timed text per cell")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="time the pass by the wall clock (default) or by the process's CPU time (a shared host; "
                         "every peer runs 1 thread)")
    ap.add_argument("--timed", default=",".join(TIMED),
                    help="the corpus files (names without .txt) of the timed text, MB split evenly among them; "
                         f"default {','.join(TIMED)} (english: its second half); e.g. --timed multilingual")
    ap.add_argument("--child", nargs=2, metavar=("MODEL", "PEER"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.mb, args.clock, tuple(args.timed.split(",")))))
        return 0
    models = [m for m in args.models.split(",") if m]
    peers = [p for p in args.peers.split(",") if p]
    res: dict = {}
    for r in range(args.rounds):
        for m in models:
            for p in peers:
                if res.get((m, p)) == "skip":
                    continue
                env = dict(os.environ, RAYON_NUM_THREADS="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", m, p, "--mb", str(args.mb),
                                      "--clock", args.clock, "--timed", args.timed],
                                     capture_output=True, text=True, env=env)
                try:
                    d = json.loads(out.stdout.strip().splitlines()[-1])
                except (ValueError, IndexError):
                    d = {"error": (out.stderr.strip().splitlines() or ["crashed"])[-1][:100]}
                if "error" in d:
                    res[(m, p)] = "skip"
                    res[(m, p, "err")] = d["error"]
                    continue
                res.setdefault((m, p, "runs"), []).append(d)
            print(f"round {r + 1} {m} done", file=sys.stderr, flush=True)
    print(f"| model | peer | MB/s (median of {args.rounds}) | load ms | exact | vs fstok |")
    print("|---|---|---:|---:|---|---:|")
    for m in models:
        ref = "hf" if MODELS[m].endswith(".json") else "sentencepiece"
        ref_runs = res.get((m, ref, "runs"))
        ref_hash = ref_runs[0]["hash"] if ref_runs else None
        fst = res.get((m, "fstok", "runs"))
        fst_mbps = statistics.median(x["mbps"] for x in fst) if fst else None
        for p in peers:
            runs = res.get((m, p, "runs"))
            if not runs:
                print(f"| {m} | {p} | — | — | {res.get((m, p, 'err'), 'not run')} | |")
                continue
            mbps = statistics.median(x["mbps"] for x in runs)
            load = statistics.median(x["load_ms"] for x in runs)
            exact = "reference" if p == ref else ("yes" if runs[0]["hash"] == ref_hash else "NO")
            ratio = f"{fst_mbps / mbps:.2f}x" if fst_mbps and p != "fstok" else ""
            print(f"| {m} | {p} | {mbps:.2f} | {load:.1f} | {exact} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
