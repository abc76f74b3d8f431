#!/usr/bin/env python3
"""tokenizer.json pipelines and tekken, cold one pass: fstok vs HF tokenizers, tokie, kitoken, fastokens,
gigatoken (and mistral-common for tekken), each where it loads the file.

    tools/bench pipelines                                       # every file, docs of english + multilingual
    tools/bench pipelines --models falcon-7b,clip --corpora english --rounds 3
    tools/bench pipelines --models qwen3,roberta-base --workloads lines --peers fstok,fastokens,gigatoken

Files: the tokenizer.json files of ../shared/data/vocab/models/ (Falcon, RoBERTa, CLIP, OLMo-2, Whisper, tekken),
DeepSeek (vocab/hf/), Llama 3 (vocab/hf-derived/) and `qwen3`: a tokenizer.json laid out as Qwen3's (NFC,
Split(Qwen2 pattern, Isolated), ByteLevel without regex, merges, Qwen3's 26 added tokens) built from
vocab/qwen/qwen.tiktoken into the cache on first use (`qwen3_json`).

The method is tools/bench cold's (bench_cold.py): each (peer, cell) in a fresh process; load, warm up on the
second half of the corpus, time ONE pass over ~8 KB documents (workload `docs`, one encode call each) or short
lines (`lines`, 1024 per batch call, 1 thread) from the first half (cold), then a second pass over the same
text (warm); rounds interleaved, medians with the range.  Ids are digested: a peer whose
ids differ from the reference (HF tokenizers, add_special_tokens=False; mistral-common for tekken) is marked
`≠`.  MB/s counts UTF-8 bytes of input.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_cold as C  # noqa: E402  (texts, digests, versions: one method for every cold benchmark)

M = os.path.join(C.VOCAB, "models")
FILES = {
    "falcon-7b": os.path.join(M, "bytelevel-bpe/falcon-7b/tokenizer.json"),
    "roberta-base": os.path.join(M, "bytelevel-bpe/roberta-base/tokenizer.json"),
    "clip": os.path.join(M, "charbpe/clip-vit-base-patch32/tokenizer.json"),
    "olmo-2": os.path.join(M, "bytelevel-bpe/olmo-2/allenai_dolma2.json"),
    "whisper-large-v3": os.path.join(M, "bytelevel-bpe/whisper-large-v3/tokenizer.json"),
    "tekken": os.path.join(M, "tekken/mistral-nemo/tekken_240718.json"),
    "deepseek": os.path.join(C.VOCAB, "hf", "deepseek_tokenizer.json"),
    "llama3": os.path.join(C.VOCAB, "hf-derived", "llama3.tokenizer.json"),
    "qwen3": None,  # built from qwen.tiktoken (qwen3_json)
}
DEFAULT_MODELS = "falcon-7b,roberta-base,clip,olmo-2,whisper-large-v3,tekken"
# Qwen3's added tokens after its 151643 ranks, in id order: (content, special)
QWEN3_ADDED = [(c, True) for c in (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>")] + [("<tool_call>", False), ("</tool_call>", False)] + [(c, True) for c in (
    "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>")] + [
    ("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False)]


def qwen3_json() -> str:
    """A tokenizer.json with Qwen3's layout over the Qwen ranks (merges read off fstok's compiled merge table,
    as tools/bench_bpe.py derives the OpenAI encodings'), written once into the cache."""
    import numpy as np

    from fstok.registry import cache_dir
    from fstok.bytelevel_table import BYTE_TO_CHAR
    from fstok.pretokenize import QWEN2_PAT

    d = os.path.join(cache_dir(), "bench-pipelines")
    os.makedirs(d, exist_ok=True)
    out = os.path.join(d, "qwen3.tokenizer.json")
    if os.path.exists(out):
        return out
    import fstok

    tok = fstok.compile(os.path.join(C.VOCAB, "qwen", "qwen.tiktoken"), pattern=QWEN2_PAT)
    t = tok._tables
    info, ext = t["int_info"].reshape(-1, 4), t["int_ext"]
    off, arena = t["dec_off"], t["dec_bytes"]

    def s(i):
        return "".join(BYTE_TO_CHAR[x] for x in bytes(arena[off[i]: off[i + 1]]))

    vocab = {s(int(i)): int(i) for i in np.nonzero(t["dec_kind"] == 1)[0]}
    merges = [[s(int(ext[int(info[k, 1])])), s(int(ext[int(info[k, 2])]))] for k in range(len(ext))
              if int(info[k, 1]) != k]
    n = len(vocab)
    added = [{"id": n + k, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": sp} for k, (c, sp) in enumerate(QWEN3_ADDED)]
    obj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PAT}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False)
    os.replace(out + ".tmp", out)
    return out


def _path(model: str) -> str:
    return qwen3_json() if model == "qwen3" else FILES[model]
PEERS = ["fstok", "hf", "tokie", "kitoken", "fastokens", "gigatoken", "mistral-common"]


def _loader(peer: str, model: str):
    """(encode, encode_batch): text -> ids and a list of texts -> list of ids, for the peer, or raise
    NotImplementedError / ImportError."""
    path = _path(model)
    tekken = model == "tekken"

    def chunks(f):  # 1024 texts per batch call, as tools/bench cold
        return lambda xs: [ids for i in range(0, len(xs), 1024) for ids in f(xs[i:i + 1024])]

    if peer == "fstok":
        import fstok

        t = fstok.compile(path)
        if hasattr(t, "encode_ordinary"):  # a BPETokenizer: the file's added tokens are matched as HF matches them
            return (lambda d: t.encode(d, allowed_special="all"),
                    chunks(lambda xs: t.encode_batch(xs, allowed_special="all", num_threads=1)))
        if hasattr(t, "encode_batch"):
            try:
                t.encode_batch(["a"], num_threads=1)
                return t.encode, chunks(lambda xs: t.encode_batch(xs, num_threads=1))
            except TypeError:
                pass
        return t.encode, chunks(lambda xs: [t.encode(x) for x in xs])
    if peer == "mistral-common":
        if not tekken:
            raise NotImplementedError
        from mistral_common.tokens.tokenizers.tekken import Tekkenizer

        t = Tekkenizer.from_file(path)
        enc = lambda d: t.encode(d, bos=False, eos=False)  # noqa: E731
        return enc, lambda xs: [enc(x) for x in xs]
    if peer in ("hf", "tokie"):
        if tekken:
            raise NotImplementedError
        if peer == "hf":
            from tokenizers import Tokenizer

            t = Tokenizer.from_file(path)
        else:
            import tokie

            t = tokie.Tokenizer.from_json(path)
        for m in ("no_truncation", "no_padding"):
            if hasattr(t, m):
                getattr(t, m)()
        return (lambda d: t.encode(d, add_special_tokens=False).ids,
                chunks(lambda xs: [e.ids for e in t.encode_batch(xs, add_special_tokens=False)]))
    if peer == "kitoken":
        import kitoken

        t = kitoken.Kitoken.from_tekken_file(path) if tekken else kitoken.Kitoken.from_tokenizers_file(path)
        enc = lambda d: list(t.encode(d, True))  # noqa: E731
        return enc, lambda xs: [enc(x) for x in xs]
    if peer == "fastokens":
        import fastokens

        t = fastokens.Tokenizer.from_file(path)

        def ids(e):
            return e.ids if hasattr(e, "ids") else e
        return (lambda d: ids(t.encode(d, add_special_tokens=False)),
                chunks(lambda xs: [ids(e) for e in t.encode_batch(xs, add_special_tokens=False)]))
    if peer == "gigatoken":
        import gigatoken

        t = gigatoken.Tokenizer(path)
        return t.encode, chunks(lambda xs: t.encode_batch_list(xs, parallel=False))
    raise KeyError(peer)


def worker(peer: str, model: str, corpus: str, clock: str = "wall", workload: str = "docs") -> dict:
    try:
        t0 = time.perf_counter()
        enc, batch = _loader(peer, model)
        load_s = time.perf_counter() - t0
    except NotImplementedError:
        return {"skip": "not this format"}
    except ImportError as e:
        return {"skip": f"not installed ({e.name})"}
    except BaseException as e:  # a peer that refuses the file
        return {"skip": f"does not load it ({type(e).__name__}: {str(e)[:80]})"}
    warm, timed = C.texts(workload, corpus)
    run = batch if workload == "lines" else (lambda xs: [enc(x) for x in xs])
    try:
        run(warm)
    except BaseException as e:
        return {"skip": f"fails on the text ({type(e).__name__}: {str(e)[:80]})"}
    nbytes = sum(len(t.encode("utf-8")) for t in timed)
    now = time.process_time if clock == "cpu" else time.perf_counter
    t0 = now()
    ids = run(timed)
    cold = now() - t0
    t0 = now()
    ids2 = run(timed)
    warm_s = now() - t0
    d = C._digest(ids)
    return {"cold_mbps": nbytes / cold / 1e6, "warm_mbps": nbytes / warm_s / 1e6, "digest": d,
            "stable": d == C._digest(ids2), "bytes": nbytes, "load_s": load_s}


def _run(peer: str, model: str, corpus: str, timeout: int, clock: str = "wall", workload: str = "docs") -> dict:
    env = dict(os.environ, RAYON_NUM_THREADS="1", RAYON_RS_NUM_CPUS="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", peer, model, corpus, "--clock", clock, "--workload", workload]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=C.ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:160]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(prog="tools/bench pipelines", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--models", default=DEFAULT_MODELS, help=f"default {DEFAULT_MODELS}; also: deepseek, llama3, qwen3")
    ap.add_argument("--corpora", default="english,multilingual")
    ap.add_argument("--workloads", default="docs", help="docs (~8 KB documents) and/or lines (1024 per batch call)")
    ap.add_argument("--workload", default="docs", help=argparse.SUPPRESS)
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="time passes by the wall clock (default) or by the process's CPU time (a shared host)")
    ap.add_argument("--out", help="write the report (markdown) and raw results (JSON) to this folder")
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(*a.worker, a.clock, a.workload)))
        return 0
    cells = [(m, c, w) for w in a.workloads.split(",") for m in a.models.split(",") for c in a.corpora.split(",")]
    for m, _, _ in cells:
        if m not in FILES:
            raise SystemExit(f"unknown model {m!r}; known: {', '.join(FILES)}")
    peers = a.peers.split(",")
    t0 = time.time()
    results = C.run_rounds(cells, peers, a.rounds, lambda peer, cell: _run(peer, cell[0], cell[1], a.timeout, a.clock, cell[2]))
    lines = report(results, cells, peers, a, time.time() - t0)
    print("\n".join(lines))
    C.save_report(a.out, "pipelines", lines, results)
    return 0


def report(results, cells, peers, a, elapsed) -> list[str]:
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = float("nan")
    out = [
        "# tokenizer.json pipelines and tekken, cold one pass",
        "",
        f"Command: `tools/bench pipelines --models {a.models} --corpora {a.corpora} --workloads {a.workloads} "
        f"--rounds {a.rounds} "
        f"--peers {a.peers}" + (" --clock cpu" if a.clock == "cpu" else "") + "`",
        f"Machine: {C._cpu()}, {os.cpu_count()} CPUs (load {load:.1f} at the end), Python "
        f"{platform.python_version()}; versions: {', '.join(f'{k} {v}' for k, v in C._versions().items())}; "
        f"run took {elapsed / 60:.1f} min.",
        "",
        "MB/s of UTF-8, median of the rounds (range). Cold: one pass over text the process has not seen (docs:",
        "~8 KB documents, one call each; lines: short lines, 1024 per batch call), after a warm-up on other text,",
        "1 thread. ×N: fstok's cold median over the peer's (above 1: fstok",
        "is faster). `≠`: ids differ from the reference (HF tokenizers; mistral-common for tekken).",
        "",
        "| file | corpus | workload | " + " | ".join(peers) + " | fstok warm |",
        "|---|---|---|" + "---|" * len(peers) + "---|",
    ]
    for cell in cells:
        row = results.get(cell, {})
        ref = "mistral-common" if cell[0] == "tekken" else "hf"
        txt, _ = C.peer_cells(row, peers, ref, 2)
        fw = [x["warm_mbps"] for x in row.get("fstok", []) if "warm_mbps" in x]
        head = f"| {cell[0]} | {cell[1]} | {cell[2]} | "
        out.append(head + " | ".join(txt) + (f" | {statistics.median(fw):.2f} |" if fw else " | – |"))
    out.append("")
    out.append("– : the peer does not load the file (or is not installed); see the raw JSON for the reason.")
    return out


if __name__ == "__main__":
    sys.exit(main())
