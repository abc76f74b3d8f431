"""What is inside a compiled tokenizer: `summary(tok)` and `summarize_path(path_or_name)`.

Every kind reports the same frame -- kind, name, source hash, Unicode tables, the pipeline stages in
order with their options, vocabulary and special-token counts, table sizes per section -- plus the
numbers specific to its model (trie states and failure links for WordPiece, merges and the pre-tokenizer
DFA for BPE, the DFA levels for a pattern).  Kinds without a dedicated view get the frame from their
artifact's meta data, so a new kind is summarized from the day it exists.
"""
from __future__ import annotations

import os
import time
from typing import Any, Optional

import numpy as np


def _sections(art) -> dict[str, int]:
    return {k: int(art.sections[k].nbytes) for k in sorted(art.sections)}


def _frame(art, kind: str, name: Any) -> dict[str, Any]:
    return {
        "kind": kind,
        "name": name,
        "source_sha256": art.source_hash.hex() if art.source_hash else None,
        "artifact_path": art.path,
        "artifact_bytes": int(art.nbytes()),
        "unicode_tables": art.unicode_version,
    }


def _wordpiece(tok, sample: Optional[str]) -> dict[str, Any]:
    from .wordpiece import summary as wp_summary

    base = wp_summary(tok, sample)
    o = tok.options
    s = _frame(tok._art, "wordpiece", tok.name)
    s["pipeline"] = [
        {"stage": "normalizer", "type": "BertNormalizer",
         "options": {k: o.get(k) for k in ("clean_text", "handle_chinese_chars", "strip_accents", "lowercase") if k in o}},
        {"stage": "pre_tokenizer", "type": "BertPreTokenizer", "options": {},
         "note": "fused with the normalizer into one table entry per code point"},
        {"stage": "model", "type": "WordPiece",
         "options": {k: o.get(k) for k in ("unk_token", "continuing_subword_prefix", "max_input_chars_per_word")}},
    ]
    if tok.cls_id is not None and tok.sep_id is not None:
        s["pipeline"].append({"stage": "post_processor", "type": "BertProcessing",
                              "options": {"cls": [tok.id_to_token(tok.cls_id), tok.cls_id],
                                          "sep": [tok.id_to_token(tok.sep_id), tok.sep_id]}})
    s["pipeline"].append({"stage": "decoder", "type": "WordPiece",
                          "options": {"prefix": o.get("continuing_subword_prefix")}})
    s["vocab_size"] = tok.vocab_size
    s["special_tokens"] = len(tok.special_tokens)
    s["model"] = {k: base[k] for k in ("states", "trie_edges", "failure_links", "dense_rows", "dense_fanout_threshold",
                                       "pop_pool_entries")}
    for k in ("sample_bytes_fed", "lookups_per_byte", "failure_steps_per_byte"):
        if k in base:
            s.setdefault("sample", {})[k] = base[k]
    return s


def _dfa_levels(cp) -> list[dict[str, Any]]:
    from .dfa import level_summary

    out = []
    for t in cp.levels:
        d = level_summary(t)
        d.pop("byte_class_ranges", None)
        out.append(d)
    return out


def _bpe(tok, sample: Optional[str]) -> dict[str, Any]:
    m = tok._meta
    s = _frame(tok._art, "bpe", tok.name)
    pipe: list[dict[str, Any]] = []
    if m.get("normalizer"):
        pipe.append({"stage": "normalizer", "type": str(m["normalizer"]), "options": {}})
    stages = m.get("stages") or []
    pt: dict[str, Any] = {"stage": "pre_tokenizer", "type": "ByteLevel" if m.get("semantics") == "hf" else "regex split",
                          "options": {"patterns": [st.get("pattern") for st in stages],
                                      "add_prefix_space": bool(m.get("add_prefix_space")),
                                      "runs_as": {"find": "compiled DFA", "split": "compiled DFA (levels)",
                                                  "whole": "none (the text is one piece)",
                                                  "regex": "regex module"}.get(m.get("pretok_mode"), m.get("pretok_mode"))}}
    if m.get("pretok_mode") in ("find", "split"):
        from ..pretokenize import CompiledPattern

        pt["dfa_levels"] = _dfa_levels(CompiledPattern.from_sections(tok._art, "dfa."))
    pipe.append(pt)
    n_int = int(m["n_int"])
    ar = np.arange(n_int)
    merges = int(np.count_nonzero((tok._tables["split_l"] != ar) | (tok._tables["split_r"] != ar)))
    pipe.append({"stage": "model", "type": "BPE", "options": {
        "merge_order": "ranks (tiktoken)" if m.get("merge_mode") == "ranks" else "merge list (tokenizer.json)",
        "ignore_merges": bool(m.get("ignore_merges"))}})
    pipe.append({"stage": "decoder", "type": "ByteLevel", "options": {}})
    s["pipeline"] = pipe
    s["vocab_size"] = tok.n_vocab
    s["special_tokens"] = len(tok._special_tokens)
    s["added_tokens"] = len(m.get("added_tokens") or [])
    s["model"] = {"mergeable_tokens": int(m["n_mergeable"]), "reachable_tokens": n_int, "merges": merges,
                  "unreachable_tokens": int(m.get("n_unreachable", 0)), "max_token_bytes": int(m["max_span_len"]),
                  "pair_table_slots": 1 << int(m["pair_bits"])}
    if sample:
        n = tok.count(sample) if hasattr(tok, "count") else len(tok.encode_ordinary(sample))
        nb = len(sample.encode("utf-8"))
        s["sample"] = {"bytes": nb, "tokens": n, "bytes_per_token": round(nb / max(1, n), 3)}
    return s


def _pattern(cp, sample: Optional[str]) -> dict[str, Any]:
    art = getattr(cp, "_art", None)
    s = {"kind": "regex_dfa", "name": cp.name, "unicode_tables": cp.unicode_version(), "mode": cp.mode}
    if art is not None:
        s.update(_frame(art, "regex_dfa", cp.name))
        s["mode"] = cp.mode
    s["pipeline"] = [{"stage": "pre_tokenizer", "type": "regex DFA", "options": {"mode": cp.mode},
                      "dfa_levels": _dfa_levels(cp)}]
    if sample:
        n = cp.count(sample)
        s["sample"] = {"pieces": n, "bytes_per_piece": round(len(sample.encode("utf-8")) / max(1, n), 3)}
    return s


def _compact(cfg: Any) -> Any:
    """A tokenizer.json component with long blobs (a precompiled charsmap) shortened for display."""
    if isinstance(cfg, dict):
        return {k: _compact(v) for k, v in cfg.items()}
    if isinstance(cfg, list):
        return [_compact(v) for v in cfg[:50]] + ([f"<{len(cfg) - 50} more>"] if len(cfg) > 50 else [])
    if isinstance(cfg, str) and len(cfg) > 120:
        return f"<{len(cfg):,} characters>"
    return cfg


def _hf_stages(pipe: dict) -> list[dict[str, Any]]:
    out = []
    for stage in ("normalizer", "pre_tokenizer", "model", "post_processor", "decoder"):
        cfg = pipe.get(stage)
        if cfg is not None:
            out.append({"stage": stage, "type": cfg.get("type", "") if isinstance(cfg, dict) else "",
                        "config": _compact(cfg)})
    return out


def _spm(tok) -> dict[str, Any]:
    import json

    from ..spm import SPF_ADD_DUMMY, SPF_BYTE_FALLBACK, SPF_ESCAPE_WS, SPF_REMOVE_WS, SPF_WS_SUFFIX

    art = tok._art
    m = art.meta
    src = m.get("source")
    s = _frame(art, f"sentencepiece-{m.get('model_type')}", os.path.basename(art.path) if art.path else None)
    flags = int(m.get("flags", 0))
    if src == "hf":
        pipe = m.get("pipeline")
        pipe = json.loads(pipe) if isinstance(pipe, str) else (pipe or {})
        stages = _hf_stages(pipe)
        stages.insert(next((i for i, st in enumerate(stages) if st["stage"] in ("post_processor", "decoder")), len(stages)),
                      {"stage": "model", "type": {"bpe": "BPE", "unigram": "Unigram"}.get(str(m.get("model_type", "")).lower(), str(m.get("model_type", ""))), "options": {}})
        s["pipeline"] = stages
        s["added_tokens"] = len(pipe.get("added_tokens") or [])
    else:
        s["pipeline"] = [
            {"stage": "normalizer", "type": f"SentencePiece {m.get('normalizer')}", "options": {
                "add_dummy_prefix": bool(flags & SPF_ADD_DUMMY), "remove_extra_whitespaces": bool(flags & SPF_REMOVE_WS),
                "escape_whitespaces": bool(flags & SPF_ESCAPE_WS), "treat_whitespace_as_suffix": bool(flags & SPF_WS_SUFFIX)}},
            {"stage": "model", "type": {"bpe": "BPE", "unigram": "Unigram"}.get(str(m.get("model_type", "")).lower(), str(m.get("model_type", ""))), "options": {
                "byte_fallback": bool(flags & SPF_BYTE_FALLBACK), "unk_id": m.get("unk_id"), "bos_id": m.get("bos_id"),
                "eos_id": m.get("eos_id"), "pad_id": m.get("pad_id")}},
        ]
    s["vocab_size"] = int(m.get("n_pieces", 0)) or getattr(tok, "vocab_size", None)
    ptype = getattr(tok, "_ptype", None)
    if ptype is not None:
        names = {1: "normal", 2: "unknown", 3: "control", 4: "user_defined", 5: "unused", 6: "byte"}
        counts = np.bincount(np.asarray(ptype, dtype=np.int64), minlength=7)
        s["model"] = {f"{names[k]}_pieces": int(counts[k]) for k in names if counts[k]}
        s["special_tokens"] = int(counts[3])
    return s


def _describe(obj: Any) -> dict[str, Any]:
    """A pipeline stage object as {type, options}: its class name and its simple public attributes."""
    opts = {}
    for k, v in sorted(vars(obj).items()) if hasattr(obj, "__dict__") else []:
        if k.startswith("_"):
            continue
        if isinstance(v, (int, float, str, bool)) or v is None:
            opts[k] = v if not isinstance(v, str) or len(v) <= 120 else f"<{len(v):,} characters>"
        elif isinstance(v, (list, tuple)) and all(hasattr(x, "__dict__") for x in v):
            opts[k] = [_describe(x) for x in v]
    return {"type": type(obj).__name__, "options": opts}


def _pipeline(tok) -> dict[str, Any]:
    """An HF tokenizer.json run stage by stage (fstok.pipeline): the stages as loaded."""
    s = {"kind": "tokenizer.json pipeline", "name": tok.name, "source": tok.where}
    pipe = []
    for stage, obj in (("normalizer", tok.normalizer), ("pre_tokenizer", tok.pre_tokenizer), ("model", tok.model),
                       ("post_processor", tok.post_processor), ("decoder", tok.decoder)):
        if obj is not None:
            d = _describe(obj)
            pipe.append({"stage": stage, "type": d["type"], "options": d["options"]})
    s["pipeline"] = pipe
    s["vocab_size"] = tok.n_vocab
    s["special_tokens"] = len(tok.special_tokens)
    s["model"] = {"runs_as": "compiled byte-level BPE tables (C) between added tokens" if tok._inner is not None
                  else "Python stages (fstok.pipeline)"}
    if tok._inner is not None:
        inner = summary(tok._inner[0] if isinstance(tok._inner, tuple) else tok._inner)
        s["model"].update(inner.get("model", {}))
        s["sections"] = inner.get("sections", {})
        s["artifact_bytes"] = inner.get("artifact_bytes")
    return s


def _generic(tok) -> dict[str, Any]:
    import json

    art = tok._art
    meta = art.meta or {}
    s = _frame(art, art.kind_name, meta.get("name", getattr(tok, "name", None)))
    pipe = []
    if meta.get("pipeline") is not None:
        cfg = meta["pipeline"]
        cfg = json.loads(cfg) if isinstance(cfg, str) else cfg
        if isinstance(cfg, dict):
            pipe = _hf_stages(cfg)
    for stage in ("normalizer", "pre_tokenizer", "model", "post_processor", "decoder"):
        if not pipe and stage in meta and meta[stage] is not None:
            pipe.append({"stage": stage, "config": _compact(meta[stage])})
    if pipe:
        s["pipeline"] = pipe
    for k in ("vocab_size", "n_vocab"):
        v = getattr(tok, k, None)
        if isinstance(v, int):
            s["vocab_size"] = v
            break
    s["meta"] = {k: (v if isinstance(v, (int, float, str, bool)) or v is None else f"<{type(v).__name__} of {len(v)}>")
                 for k, v in meta.items() if not isinstance(v, (dict, list)) or len(str(v)) < 200}
    return s


def summary(tok: Any, sample: Optional[str] = None) -> dict[str, Any]:
    """A JSON-ready summary of a loaded tokenizer or compiled pattern (see the module docstring)."""
    from ..bpe import BPETokenizer
    from ..pretokenize import CompiledPattern
    from ..wordpiece import WordPieceTokenizer

    if isinstance(tok, WordPieceTokenizer):
        s = _wordpiece(tok, sample)
    elif isinstance(tok, BPETokenizer):
        s = _bpe(tok, sample)
    elif isinstance(tok, CompiledPattern):
        s = _pattern(tok, sample)
    elif type(tok).__name__ == "PipelineTokenizer":
        return _pipeline(tok)
    elif type(tok).__name__ == "TekkenTokenizer":
        s = _bpe(tok.inner, sample)
        s["kind"], s["name"] = "tekken", tok.name
        s["vocab_size"], s["special_tokens"] = tok.n_vocab, tok.n_special
        s["model"]["id_shift"] = tok.n_special  # ids = rank + the number of special-token slots
        tok = tok.inner
    elif hasattr(tok, "_art") and (tok._art.meta or {}).get("family") == "spm":
        s = _spm(tok)
    elif hasattr(tok, "_art"):
        s = _generic(tok)
    else:
        raise TypeError(f"summary() does not know objects of type {type(tok).__name__}")
    art = getattr(tok, "_art", None)
    if art is not None:
        s["sections"] = _sections(art)
    return s


def load_any(name_or_path: str) -> tuple[Any, dict[str, float]]:
    """(tokenizer, timings): an artifact is loaded, a source compiled, a bundled name fetched."""
    import fstok

    times: dict[str, float] = {}
    if os.path.exists(name_or_path):
        magic = b""
        if os.path.isfile(name_or_path):
            with open(name_or_path, "rb") as f:
                magic = f.read(8)
        t = time.perf_counter()
        if magic == b"FSTOKART":
            tok = fstok.load(name_or_path)
            times["load_ms"] = (time.perf_counter() - t) * 1e3
        else:
            tok = fstok.compile(name_or_path)
            times["compile_ms"] = (time.perf_counter() - t) * 1e3
            t = time.perf_counter()
            fstok.loads(tok.to_bytes())
            times["load_ms"] = (time.perf_counter() - t) * 1e3
        return tok, times
    if name_or_path in fstok.list_encodings():
        t = time.perf_counter()
        tok = fstok.get_encoding(name_or_path)
        times["load_ms"] = (time.perf_counter() - t) * 1e3
        return tok, times
    raise FileNotFoundError(f"{name_or_path}: no such file, and not a bundled encoding "
                            f"(bundled: {', '.join(fstok.list_encodings())})")


def summarize_path(name_or_path: str, sample: Optional[str] = None) -> dict[str, Any]:
    tok, times = load_any(name_or_path)
    s = summary(tok, sample)
    s["source"] = name_or_path
    s.update({k: round(v, 2) for k, v in times.items()})
    return s


def format_text(s: dict[str, Any]) -> str:
    """The terminal view of a summary."""
    lines = [f"{s.get('name') or s.get('source')} ({s['kind']})"]
    for k in ("source", "artifact_path", "source_sha256", "unicode_tables", "vocab_size", "special_tokens",
              "added_tokens", "artifact_bytes", "compile_ms", "load_ms"):
        if s.get(k) is not None:
            v = s[k]
            lines.append(f"  {k:<16} {v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"  {k:<16} {v}")
    if s.get("pipeline"):
        lines.append("  pipeline:")
        for st in s["pipeline"]:
            opts = st.get("options", st.get("config", {}))
            if "config" in st and isinstance(opts, dict):
                opts = {k: v for k, v in opts.items() if k != "type"}
            short = ", ".join(f"{k}={v!r}" for k, v in (opts.items() if isinstance(opts, dict) else [])
                              if k != "patterns") if isinstance(opts, dict) else str(opts)
            lines.append(f"    {st['stage']:<15} {st.get('type', '')} {short}".rstrip())
            if isinstance(opts, dict) and opts.get("patterns"):
                for p in opts["patterns"]:
                    lines.append(f"{'':20}pattern {p!r}")
            for i, lv in enumerate(st.get("dfa_levels") or []):
                lines.append(f"{'':20}DFA level {i}: {lv['states']:,} states, {lv['byte_classes']} byte classes, "
                             f"{lv['lookahead_states']} look-ahead states, {lv['table_bytes']:,} bytes")
    if s.get("model"):
        lines.append("  model: " + ", ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in s["model"].items()))
    if s.get("sample"):
        lines.append("  sample: " + ", ".join(f"{k}={v}" for k, v in s["sample"].items()))
    if s.get("sections"):
        lines.append("  sections (bytes):")
        for k, v in s["sections"].items():
            lines.append(f"    {k:<24} {v:>12,}")
    return "\n".join(lines)
