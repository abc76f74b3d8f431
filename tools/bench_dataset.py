#!/usr/bin/env python3
"""Corpus -> token shards: `fstok tokenize` vs HF `datasets.map` + HF tokenizers vs tiktoken in a Pool.

    tools/bench dataset                       # 200 MB of JSON Lines, o200k_base and bert-base-uncased
    tools/bench dataset --mb 40 --models o200k_base --methods fstok1,fstok2,tiktoken

The corpus is the shared corpora (english, code, multilingual, chinese_long) cut into documents of
1-8 KB, repeated with variation until it holds --mb megabytes: every copy shuffles the documents and
perturbs each one (words swapped with a neighbour, capitalised, a copy tag), so no method's cache sees
the same text twice.  It is written as JSON Lines files of ~25 MB (in --dir, kept for reruns).

Each method runs in a fresh process pinned to the same --cores (default: the first two), after a warm-up
on other text, over the corpus once (cold, one pass), reading the files and producing every document's
ids in input order:

  fstok1 / fstok2   fstok.dataset.tokenize(files, model, out, workers=1|2): JSON Lines -> .bin + .idx shards
  hf                datasets.load_dataset("json") + .map(batched=True, num_proc=2) with HF tokenizers
                    (tokenizer.json equivalent to the tiktoken encoding; BertWordPieceTokenizer for BERT),
                    RAYON_NUM_THREADS=1 so each process uses one core
  tiktoken          the parent reads and parses the files, multiprocessing.Pool(2) runs
                    encode_ordinary_batch(batch, num_threads=1), the parent writes the ids to a flat file

MB/s is JSON Lines bytes on disk per second of wall time; "MB per CPU-second" divides by the CPU time
(user + system) of the method's processes over the same pass, which stays comparable when other work
shares the machine.  Peak RSS is sampled every 50 ms over the
method's process tree during the timed pass: the sum over its processes (shared pages such as the mmap-ed
artifact counted in each) and the largest one.  "same ids" compares a hash of every document's ids (and lengths) with fstok's.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)


def _shared() -> str:
    for c in (os.environ.get("FSTOK_SHARED_DATA", ""), os.path.join(ROOT, "..", "shared", "data"), "/work/shared/data"):
        if c and os.path.isdir(os.path.join(c, "corpus")):
            return os.path.normpath(c)
    sys.exit("shared corpora not found (set FSTOK_SHARED_DATA)")


SHARED = _shared()
SOURCES = ["english", "code", "multilingual", "chinese_long"]


# ---------------------------------------------------------------------------------------------- corpus
def _documents(name: str, rng: random.Random) -> list:
    with open(os.path.join(SHARED, "corpus", f"{name}.txt"), encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")
    docs, cur, size = [], [], 0
    target = rng.randint(1000, 8000)
    for ln in lines:
        cur.append(ln)
        size += len(ln) + 1
        if size >= target:
            docs.append("\n".join(cur))
            cur, size, target = [], 0, rng.randint(1000, 8000)
    if cur:
        docs.append("\n".join(cur))
    return docs


def _perturb(doc: str, rng: random.Random, tag: int) -> str:
    w = doc.split(" ")
    n = len(w)
    for _ in range(max(1, n // 20)):
        i = rng.randrange(n)
        if rng.random() < 0.5 and i + 1 < n:
            w[i], w[i + 1] = w[i + 1], w[i]
        else:
            w[i] = w[i].capitalize() if w[i].islower() else w[i].lower()
    return f"[{tag}] " + " ".join(w)


def make_corpus(d: str, mb: int, seed: int = 1, file_mb: int = 25, prefix: str = "part") -> list:
    os.makedirs(d, exist_ok=True)
    stamp = os.path.join(d, f"{prefix}.done-{mb}-{seed}")
    if os.path.exists(stamp):
        return sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith(prefix) and f.endswith(".jsonl"))
    for f in os.listdir(d):
        if f.startswith(prefix):
            os.unlink(os.path.join(d, f))
    rng = random.Random(seed)
    base = [doc for s in SOURCES for doc in _documents(s, rng)]
    total, k, copy = 0, 0, 0
    files = []
    f = None
    written = 0
    while total < mb * 1_000_000:
        order = list(range(len(base)))
        rng.shuffle(order)
        for i in order:
            if f is None or written >= file_mb * 1_000_000:
                if f:
                    f.close()
                files.append(os.path.join(d, f"{prefix}-{k:04d}.jsonl"))
                f = open(files[-1], "w", encoding="utf-8")
                k += 1
                written = 0
            line = json.dumps({"text": _perturb(base[i], rng, copy)}, ensure_ascii=False) + "\n"
            b = len(line.encode("utf-8"))
            f.write(line)
            written += b
            total += b
            if total >= mb * 1_000_000:
                break
        copy += 1
    f.close()
    open(stamp, "w").close()
    return files


# ---------------------------------------------------------------------------------------------- methods
def _digest_lists(chunks) -> tuple:
    """(sha256 over the ids as uint32 LE, sha256 over the document lengths, tokens, documents)."""
    import numpy as np

    h, hl = hashlib.sha256(), hashlib.sha256()
    nt = nd = 0
    for ids, lens in chunks:
        h.update(np.ascontiguousarray(ids, dtype="<u4").tobytes())
        hl.update(np.ascontiguousarray(lens, dtype="<i8").tobytes())
        nt += len(ids)
        nd += len(lens)
    return h.hexdigest()[:16], hl.hexdigest()[:16], nt, nd


def _hf_tokenizer(model: str):
    from tokenizers import BertWordPieceTokenizer, Tokenizer

    if model.startswith("bert"):
        return BertWordPieceTokenizer(os.path.join(SHARED, "vocab", model, "vocab.txt"), lowercase="uncased" in model)
    sys.path.insert(0, HERE)
    from bench_bpe import _hf_json_from_ranks

    return Tokenizer.from_file(_hf_json_from_ranks(model))


def _tiktoken(model: str):
    import tiktoken
    import tiktoken_ext.openai_public as op
    from tiktoken.load import load_tiktoken_bpe

    path = os.path.join(SHARED, "vocab", "tiktoken", f"{model}.tiktoken")
    orig = op.load_tiktoken_bpe
    op.load_tiktoken_bpe = lambda *a, **k: load_tiktoken_bpe(path, expected_hash=k.get("expected_hash"))
    try:
        spec = getattr(op, model)()
    finally:
        op.load_tiktoken_bpe = orig
    return tiktoken.Encoding(spec["name"], pat_str=spec["pat_str"], mergeable_ranks=spec["mergeable_ranks"],
                             special_tokens=spec["special_tokens"])


_HF = None


def _hf_map(batch, model):
    global _HF
    if _HF is None:
        _HF = _hf_tokenizer(model)
    return {"ids": [e.ids for e in _HF.encode_batch(batch["text"], add_special_tokens=False)]}


_TT = None


def _tt_init(model):
    global _TT
    _TT = _tiktoken(model)


def _tt_batch(texts):
    import numpy as np

    res = _TT.encode_ordinary_batch(texts, num_threads=1)
    return np.concatenate([np.asarray(r, dtype=np.uint32) for r in res]), [len(r) for r in res]


def _read_texts(files, batch_docs=1000):
    batch = []
    for p in files:
        with open(p, "rb") as f:
            for line in f:
                if line.strip():
                    batch.append(json.loads(line)["text"])
                    if len(batch) >= batch_docs:
                        yield batch
                        batch = []
    if batch:
        yield batch


def _cpu() -> float:
    """CPU seconds of this process and of its finished (reaped) worker processes."""
    import resource

    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def child(method: str, model: str, files: list, warm: list, work: str) -> dict:
    import numpy as np

    if method.startswith("fstok"):
        from fstok.dataset import open_shards, tokenize

        w = int(method[5:])
        # shards small enough that both workers stay busy to the end (~16 per corpus, 1-64 MB)
        size = sum(os.path.getsize(f) for f in files)
        kw = dict(workers=w, shard_size=min(64 << 20, max(1 << 20, size // 16)), quiet=True, disallowed_special=())
        tokenize(warm, model, os.path.join(work, "warm"), **kw)
        t, c, w0 = time.perf_counter(), _cpu(), time.time()
        tokenize(files, model, os.path.join(work, "out"), **kw)
        dt, cpu, w1 = time.perf_counter() - t, _cpu() - c, time.time()
        ds = open_shards(os.path.join(work, "out"))
        chunks = [(a, b) for a, b in zip(ds.tokens.shards, _lengths(ds))]
        return {"seconds": dt, "cpu": cpu, "window": [w0, w1], "digest": _digest_lists(chunks)}
    if method == "hf":
        import datasets

        datasets.disable_progress_bars()
        _hf_tokenizer(model)  # writes the tokenizer.json once, before the map processes read it
        fn_kwargs = {"model": model}

        def run(fs, tag):
            ds = datasets.load_dataset("json", data_files=fs, split="train", cache_dir=os.path.join(work, tag))
            return ds.map(_hf_map, batched=True, batch_size=1000, num_proc=2, fn_kwargs=fn_kwargs,
                          remove_columns=["text"])

        run(warm, "warm")
        t, c, w0 = time.perf_counter(), _cpu(), time.time()
        res = run(files, "hfcache")
        dt, cpu, w1 = time.perf_counter() - t, _cpu() - c, time.time()
        col = res.data.column("ids")
        chunks = []
        for ch in col.chunks:
            offs = ch.offsets.to_numpy()
            chunks.append((ch.values.to_numpy()[offs[0]:offs[-1]], np.diff(offs)))
        return {"seconds": dt, "cpu": cpu, "window": [w0, w1], "digest": _digest_lists(chunks)}
    if method == "tiktoken":
        import multiprocessing as mp

        def run(fs, path):
            lens = []
            with mp.Pool(2, initializer=_tt_init, initargs=(model,)) as pool, open(path, "wb") as out:
                for ids, ln in pool.imap(_tt_batch, _read_texts(fs), chunksize=1):
                    out.write(ids.tobytes())
                    lens += ln
            return np.array(lens, dtype=np.int64)

        run(warm, os.path.join(work, "warm.bin"))
        t, c, w0 = time.perf_counter(), _cpu(), time.time()
        lens = run(files, os.path.join(work, "tt.bin"))
        dt, cpu, w1 = time.perf_counter() - t, _cpu() - c, time.time()
        ids = np.fromfile(os.path.join(work, "tt.bin"), dtype=np.uint32)
        return {"seconds": dt, "cpu": cpu, "window": [w0, w1], "digest": _digest_lists([(ids, lens)])}
    raise SystemExit(f"unknown method {method}")


def _lengths(ds):
    import numpy as np

    out, pos = [], 0
    for sh in ds.manifest["shards"]:
        n = sh["documents"]
        out.append(np.diff(ds.doc_offsets[pos:pos + n + 1]))
        pos += n
    return out


def run_method(method, model, files, warm, cores) -> dict:
    import psutil

    work = tempfile.mkdtemp(prefix=f"bench-ds-{method}-")
    env = dict(os.environ, RAYON_NUM_THREADS="1", TOKENIZERS_PARALLELISM="true", PYTHONPATH=ROOT)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", method, "--model", model, "--work", work,
           "--files", json.dumps(files), "--warm", json.dumps(warm)]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=(lambda: os.sched_setaffinity(0, cores)) if cores else None)
    proc = psutil.Process(p.pid)
    samples = []  # (time, sum of RSS, largest RSS) over the process tree
    while p.poll() is None:
        try:
            ps = [proc] + proc.children(recursive=True)
            rss = []
            for q in ps:
                try:
                    rss.append(q.memory_info().rss)
                except psutil.Error:
                    pass
            samples.append((time.time(), sum(rss), max(rss, default=0)))
        except psutil.Error:
            pass
        time.sleep(0.05)
    out, err = p.communicate()
    subprocess.run(["rm", "-rf", work])
    if p.returncode != 0:
        return {"error": err.strip().splitlines()[-1] if err.strip() else f"rc {p.returncode}"}
    r = json.loads(out.strip().splitlines()[-1])
    w0, w1 = r["window"]  # the timed pass only (not the warm-up, nor reading the output back to check it)
    inside = [x for x in samples if w0 <= x[0] <= w1] or samples
    r["peak_sum"], r["peak_one"] = max(x[1] for x in inside), max(x[2] for x in inside)
    return r


def main() -> None:
    ap = argparse.ArgumentParser(prog="tools/bench dataset", description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=int, default=200, help="corpus size in MB (default 200)")
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "fstok-bench-dataset"))
    ap.add_argument("--models", default="o200k_base,bert-base-uncased")
    ap.add_argument("--methods", default="fstok1,fstok2,hf,tiktoken")
    ap.add_argument("--cores", default="0,1", help="CPU cores every method is pinned to ('' = no pinning)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--work", help=argparse.SUPPRESS)
    ap.add_argument("--files", help=argparse.SUPPRESS)
    ap.add_argument("--warm", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        r = child(a.child, a.model, json.loads(a.files), json.loads(a.warm), a.work)
        print(json.dumps(r))
        return
    cores = [int(c) for c in a.cores.split(",") if c.strip()] if a.cores else None
    t = time.perf_counter()
    files = make_corpus(a.dir, a.mb)
    warm = make_corpus(os.path.join(a.dir, "warm"), 4, seed=99, file_mb=2, prefix="warm")
    nbytes = sum(os.path.getsize(f) for f in files)
    print(f"corpus: {len(files)} JSON Lines files, {nbytes / 1e6:.1f} MB ({time.perf_counter() - t:.0f}s to make or "
          f"find); cores {cores or 'all'}; {os.cpu_count()} CPUs on this machine")
    rows = []
    for model in a.models.split(","):
        res = {}
        for m in a.methods.split(","):
            if m == "tiktoken" and model.startswith("bert"):
                continue
            res[m] = run_method(m, model, files, warm, cores)
            r = res[m]
            if "error" in r:
                print(f"  {model} {m}: error {r['error']}", flush=True)
            else:
                print(f"  {model} {m}: {nbytes / r['seconds'] / 1e6:.1f} MB/s, {nbytes / r['cpu'] / 1e6:.1f} MB per CPU-s, "
                      f"{r['digest'][2]:,} tokens, peak RSS "
                      f"{r['peak_sum'] / 2**20:.0f} MiB (largest process {r['peak_one'] / 2**20:.0f} MiB)", flush=True)
        ref = next((res[m]["digest"] for m in res if m.startswith("fstok") and "error" not in res[m]), None)
        peers = [res[m] for m in ("hf", "tiktoken") if m in res and "error" not in res[m]]
        best_peer = min(p["seconds"] for p in peers) if peers else None
        best_cpu = min(p["cpu"] for p in peers) if peers else None
        for m, r in res.items():
            if "error" in r:
                rows.append(f"| {model} | {m} | error: {r['error']} | | | | | | |")
                continue
            same = "ref" if r["digest"] == ref and m.startswith("fstok") else ("yes" if r["digest"] == ref else "NO")
            ratio = f"{best_peer / r['seconds']:.2f}x" if best_peer else ""
            cratio = f"{best_cpu / r['cpu']:.2f}x" if best_cpu else ""
            rows.append(f"| {model} | {m} | {nbytes / r['seconds'] / 1e6:.1f} | {ratio} | {nbytes / r['cpu'] / 1e6:.1f} | "
                        f"{cratio} | {r['peak_sum'] / 2**20:.0f} "
                        f"({r['peak_one'] / 2**20:.0f}) | {r['digest'][2]:,} | {same} |")
    print()
    print("| model | method | MB/s (wall) | vs faster peer | MB per CPU-second | vs peer (CPU) | "
          "peak RSS MiB, sum (largest) | tokens | same ids |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
