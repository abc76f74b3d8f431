"""Compile an HF tokenizer.json whose model is Unigram or SentencePiece-style BPE (no byte-level stage)
into the `spm` artifact: the model's tables (piece trie, f64 scores or the merge table), the
precompiled charsmaps of its normalizer, the grapheme-cluster classes, and the pipeline's JSON
(normalizer, pre-tokenizer, decoder, added tokens, post-processor) in the meta section.
"""
from __future__ import annotations

import base64
import functools
import json

import numpy as np

from .spm_tables import SPF_BYTE_FALLBACK, SPF_BPE, SPF_FUSE_UNK, SPF_HF, build_trie, charsmap_sections, piece_bytes

_SUPPORTED_NORM = {"Sequence", "Precompiled", "Replace", "Prepend", "Lowercase"}
_SUPPORTED_PRE = {"Sequence", "Metaspace", "WhitespaceSplit"}
_SUPPORTED_DEC = {"Sequence", "Metaspace", "Replace", "ByteFallback", "Fuse", "Strip"}


def _walk(spec, key: str):
    if spec is None:
        return
    yield spec
    for s in spec.get(key, []) or []:
        yield from _walk(s, key)


def is_spm_style(obj: dict) -> bool:
    """A tokenizer.json this module compiles: a Unigram model, or a BPE model with no ByteLevel stage."""
    m = obj.get("model") or {}
    t = m.get("type") or ("Unigram" if isinstance(m.get("vocab"), list) else "BPE" if "merges" in m else None)
    if t == "Unigram":
        return True
    if t != "BPE":
        return False
    stages = [s.get("type") for s in _walk(obj.get("pre_tokenizer"), "pretokenizers")]
    stages += [s.get("type") for s in _walk(obj.get("normalizer"), "normalizers")]
    stages += [s.get("type") for s in _walk(obj.get("decoder"), "decoders")]
    return "ByteLevel" not in stages and (bool(m.get("byte_fallback")) or "Metaspace" in stages
                                          or "Prepend" in stages or "ByteFallback" in stages)


@functools.lru_cache(maxsize=1)
def grapheme_ranges() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start, end inclusive, class bits) of the code points with a Grapheme_Cluster_Break class or the
    Extended_Pictographic / Indic_Conjunct_Break properties, from the `regex` module's Unicode tables."""
    import regex

    from ..hf_norm import (G_CONTROL, G_CR, G_EXTEND, G_EXTPICT, G_INCB_CONSONANT, G_INCB_EXTEND, G_INCB_LINKER,
                           G_L, G_LF, G_LV, G_LVT, G_PREPEND, G_RI, G_SPACINGMARK, G_T, G_V, G_ZWJ)

    bits = np.zeros(0x110000, dtype=np.uint8)
    allc = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    cps = np.array([c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF], dtype=np.int64)

    def mark(prop: str, value: int, flag: bool = False):
        for m in regex.finditer(r"\p{" + prop + r"}+", allc):
            sl = cps[m.start() : m.end()]
            if flag:
                bits[sl] |= value
            else:
                bits[sl] = (bits[sl] & 0xF0) | value

    for prop, v in (("GCB=CR", G_CR), ("GCB=LF", G_LF), ("GCB=Control", G_CONTROL), ("GCB=Extend", G_EXTEND),
                    ("GCB=ZWJ", G_ZWJ), ("GCB=Regional_Indicator", G_RI), ("GCB=Prepend", G_PREPEND),
                    ("GCB=SpacingMark", G_SPACINGMARK), ("GCB=L", G_L), ("GCB=V", G_V), ("GCB=T", G_T),
                    ("GCB=LV", G_LV), ("GCB=LVT", G_LVT)):
        mark(prop, v)
    mark("Extended_Pictographic", G_EXTPICT, True)
    mark("InCB=Consonant", G_INCB_CONSONANT, True)
    mark("InCB=Extend", G_INCB_EXTEND, True)
    mark("InCB=Linker", G_INCB_LINKER, True)
    change = np.nonzero(np.diff(bits.astype(np.int16)))[0] + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change - 1, [0x10FFFF]])
    vals = bits[starts]
    keep = vals != 0
    return starts[keep].astype(np.uint32), ends[keep].astype(np.uint32), vals[keep].astype(np.uint8)


def _spans_sep(tok: str, sep: str) -> bool:
    """The separator right after another character somewhere in tok."""
    i = tok.find(sep, 1)
    while i > 0:
        if tok[i - 1] != sep:
            return True
        i = tok.find(sep, i + 1)
    return False


def _check_stages(obj: dict, where: str, model: str) -> None:
    for key, sub, ok, what in (("normalizer", "normalizers", _SUPPORTED_NORM, "normalizer"),
                               ("pre_tokenizer", "pretokenizers", _SUPPORTED_PRE, "pre-tokenizer"),
                               ("decoder", "decoders", _SUPPORTED_DEC, "decoder")):
        for s in _walk(obj.get(key), sub):
            if s.get("type") not in ok:
                raise ValueError(f"{where}: {what} {s.get('type')!r} is not supported with a {model} model in "
                                 f"SentencePiece-style pipelines (supported: {', '.join(sorted(ok))})")
    if obj.get("post_processor") is not None:
        from ..postprocess import PostProcessor

        PostProcessor.from_json(obj["post_processor"])  # refuses what it does not implement, by name
    for a in obj.get("added_tokens") or []:
        if not isinstance(a.get("content"), str) or not a["content"]:
            raise ValueError(f"{where}: an added token has no content")


def _hf_added(obj: dict, tok_id: dict, n: int) -> list:
    """The file's added tokens with the ids tokenizers gives them when it reads the file (it ignores the
    written ids: a token in the model's vocabulary takes that id, any other the next one from the model's
    vocabulary size on)."""
    added = obj.get("added_tokens") or []
    from ..pipeline.added import hf_added_ids

    ids = hf_added_ids([a["content"] for a in added], tok_id, n)
    return [dict(a, id=ids.get(a["content"], a.get("id"))) for a in added]


def hf_tables(obj: dict, where: str) -> tuple[dict, dict]:
    m = obj["model"]
    t = m.get("type") or ("Unigram" if isinstance(m.get("vocab"), list) else "BPE")
    _check_stages(obj, where, t)
    sections: dict = {}
    flags = SPF_HF
    if t == "Unigram":
        vocab = m["vocab"]
        toks = [v[0] for v in vocab]
        scores = np.array([float(v[1]) for v in vocab], dtype=np.float64)
        unk = m.get("unk_id")
        if m.get("byte_fallback"):
            flags |= SPF_BYTE_FALLBACK
        n = len(toks)
        last = {}
        for i, tok in enumerate(toks):
            last[tok] = i  # the tokenizer's token -> id map keeps the last of duplicates
        keys = [k.encode("utf-8") for k in last]
        ids = list(last.values())
        min_score = float(scores.min()) if n else 0.0
        unk_id = -1 if unk is None else int(unk)
        if unk is not None and not 0 <= unk_id < n:
            raise ValueError(f"{where}: Unigram unk_id {unk_id} is out of range")
        merges = None
    elif t == "BPE":
        if m.get("dropout") not in (None, 0, 0.0):
            raise ValueError(f"{where}: BPE dropout={m['dropout']} is random by definition; fstok compiles "
                             "deterministic tokenizers only (set dropout to null)")
        vocab = m["vocab"]
        n = max(vocab.values()) + 1 if vocab else 0
        toks = [""] * n
        for tok, i in vocab.items():
            toks[i] = tok
        flags |= SPF_BPE
        if m.get("byte_fallback"):
            flags |= SPF_BYTE_FALLBACK
        if m.get("fuse_unk"):
            flags |= SPF_FUSE_UNK
        unk_tok = m.get("unk_token")
        unk_id = vocab.get(unk_tok, -1) if unk_tok is not None else -1
        if unk_tok is not None and unk_id < 0:
            # tokenizers loads such a file but fails on the first character outside the vocabulary; a
            # result without that character would be silently different, so the file is refused here
            raise ValueError(f"{where}: the model's unk_token {unk_tok!r} is not in its vocabulary")
        keys = [k.encode("utf-8") for k in vocab]
        ids = list(vocab.values())
        scores = np.zeros(n, dtype=np.float64)
        min_score = 0.0
        merges = []
        for mg in m.get("merges") or []:
            if isinstance(mg, str):
                parts = mg.split(" ")
                if len(parts) != 2:
                    raise ValueError(f"{where}: merge {mg!r} is not two tokens")
                merges.append(parts)
            else:
                merges.append(list(mg))
    else:
        raise ValueError(f"{where}: model type {t!r} is not a SentencePiece-style model")
    ptrie = build_trie(keys, ids)
    for name, arr in zip(("p_first", "p_label", "p_target", "p_value"), ptrie):
        sections[name] = arr
    sections["score64"] = scores.view(np.uint64)
    sections["ptype"] = np.ones(n, dtype=np.uint8)
    byte_id = np.full(256, max(unk_id, 0), dtype=np.int32)
    tok_id = {tok: i for i, tok in enumerate(toks)} if t == "Unigram" else dict(vocab)
    have_bytes = all(f"<0x{c:02X}>" in tok_id for c in range(256))
    for c in range(256):
        byte_id[c] = tok_id.get(f"<0x{c:02X}>", max(unk_id, 0))
    sections["byte_id"] = byte_id
    # the <0xXX> token of each byte, -1 where the vocabulary has none (byte fallback needs every byte)
    sections["byte_tok"] = np.array([tok_id.get(f"<0x{c:02X}>", -1) for c in range(256)], dtype=np.int32)
    sections["pieces"], sections["piece_off"] = piece_bytes(toks)
    # normalizer charsmaps, in the order the normalizer lists them
    cms = [s for s in _walk(obj.get("normalizer"), "normalizers") if s.get("type") == "Precompiled"]
    for k, s in enumerate(cms):
        raw = base64.b64decode(s.get("precompiled_charsmap") or "")
        cm = charsmap_sections(raw, where)
        sections[f"cm{k}_units"] = cm["cm_units"]
        sections[f"cm{k}_norm"] = cm["cm_norm"]
    sections["cm_units"] = np.zeros(0, np.uint32)
    sections["cm_norm"] = np.zeros(0, np.uint8)
    sections["u_first"], sections["u_label"], sections["u_target"], sections["u_value"] = build_trie([], [])
    gs, ge, gb = grapheme_ranges()
    sections["g_start"], sections["g_end"], sections["g_bits"] = gs, ge, gb
    if merges is not None:
        a_ids, b_ids, new_ids = [], [], []
        for rank, (a, b) in enumerate(merges):
            if a not in vocab or b not in vocab:
                raise ValueError(f"{where}: merge {a!r} {b!r} uses a token that is not in the vocabulary")
            if a + b not in vocab:
                raise ValueError(f"{where}: merge {a!r} {b!r} makes {a + b!r}, which is not in the vocabulary")
            a_ids.append(vocab[a])
            b_ids.append(vocab[b])
            new_ids.append(vocab[a + b])
        # a text may be cut before each "▁" that follows another character and the parts merged
        # apart when no merge makes a token with such a "▁" inside (so none crosses the cut) and
        # "▁" is a token of its own (so each part starts with it, never with its bytes)
        sep = "\u2581"
        word_split = sep in vocab and not m.get("ignore_merges") and not any(
            _spans_sep(a + b, sep) for a, b in merges)
        if word_split and (not m.get("fuse_unk") or (m.get("byte_fallback") and have_bytes)):
            # the words are cut between two characters as well where no merge's token holds their byte pair
            # (the first symbols are characters or their bytes, and no unknown run is fused across the cut)
            from .spm_tables import boundary_pairs

            sections["hf_cut_pairs"] = boundary_pairs(a + b for a, b in merges)
        sections["merge_a"] = np.array(a_ids, dtype=np.int32)
        sections["merge_b"] = np.array(b_ids, dtype=np.int32)
        sections["merge_new"] = np.array(new_ids, dtype=np.int32)
        # the runtime's merge table, read in place at load (fstok.runtime._spm checks it first)
        from ..runtime import _spm

        sections["hf_merges"] = np.frombuffer(_spm.hf_merge_table(sections["merge_a"], sections["merge_b"],
                                                                  sections["merge_new"]), dtype=np.uint8)
    meta = {
        "family": "spm",
        "source": "hf",
        "model_type": t.lower(),
        "flags": flags,
        "unk_id": unk_id,
        "n_pieces": n,
        "n_charsmaps": len(cms),
        "min_score": float(min_score).hex(),
        "max_score": float(0.0).hex(),
        "byte_fallback_complete": have_bytes,
        "bpe_word_split": "\u2581" if merges is not None and word_split else "",
        "bpe": {k: m.get(k) for k in ("continuing_subword_prefix", "end_of_word_suffix", "ignore_merges")} if merges is not None else None,
        "pipeline": json.dumps(dict({k: obj.get(k) for k in ("normalizer", "pre_tokenizer", "decoder",
                                                           "post_processor")}, added_tokens=_hf_added(obj, tok_id, n if t == "Unigram" else len(tok_id)))),
    }
    return meta, sections
