"""Reader for HF `tokenizer.json` byte-level BPE models (GPT-2, Llama-3 `ignore_merges`, Qwen2, DeepSeek-V3, ...).

Supported pipeline: normalizer none / empty Sequence / NFC / NFKC; pre-tokenizer `ByteLevel`
(optionally after `Split(Regex|String, behavior=Isolated, invert=false)` stages in a `Sequence`, or after
one `Split(behavior=Removed, invert=true)` with `ByteLevel(use_regex=false)`: the regex's matches);
model `BPE` over the byte-level alphabet (dropout, continuing_subword_prefix, end_of_word_suffix
refused); added tokens without lstrip/rstrip/single_word; decoder `ByteLevel`. Anything else raises a
ValueError naming it.
"""
from __future__ import annotations

import json
import os
from typing import Any

import regex

from ..pipeline.added import hf_added_ids
from .bpe_source import GPT2_HF_PATTERN, AddedToken, BPESource, PreTokStage, bytelevel_to_bytes


def _fail(path: str, msg: str) -> ValueError:
    return ValueError(f"{path}: {msg}")


def _normalizer(path: str, norm: Any) -> str | None:
    if norm is None:
        return None
    if not isinstance(norm, dict):
        raise _fail(path, f"normalizer must be an object with a \"type\", got {norm!r}"[:300])
    t = norm.get("type")
    if t == "Sequence":
        inner = [_normalizer(path, n) for n in norm.get("normalizers", [])]
        inner = [n for n in inner if n is not None]
        if not inner:
            return None
        if len(inner) == 1:
            return inner[0]
        raise _fail(path, f"normalizer Sequence of {inner} is not supported")
    if t in ("NFKC", "NFC"):
        return t
    raise _fail(path, f"normalizer {t!r} is not supported by fstok BPE (supported: none, NFC, NFKC)")


def _decoder(path: str, dec: Any) -> None:
    """The compiled byte-level BPE decodes as HF's ByteLevel decoder (alone or the only step of a Sequence)
    does; any other decoder (none included: HF then joins the tokens with spaces) is refused."""
    if isinstance(dec, dict) and dec.get("type") == "Sequence" and isinstance(dec.get("decoders"), list) \
            and len(dec["decoders"]) == 1:
        dec = dec["decoders"][0]
    if not (isinstance(dec, dict) and dec.get("type") == "ByteLevel"):
        t = dec.get("type") if isinstance(dec, dict) else dec
        raise _fail(path, f"decoder {t!r} is not supported by fstok byte-level BPE (supported: ByteLevel)")


def _split_pattern(path: str, pt: dict) -> str:
    from ..pretokenize import hf_split_regex  # the one reader of HF Split configs

    try:
        p = hf_split_regex(pt)
        regex.compile(p)
    except ValueError as e:
        raise _fail(path, str(e)) from None
    except regex.error as e:
        raise _fail(path, f"Split regex {pt.get('pattern')!r} does not compile: {e}") from None
    return p


def _is_kept_matches(item: dict) -> bool:
    return str(item.get("behavior", "")).lower() == "removed" and bool(item.get("invert"))


def _find_stage(path: str, item: dict) -> PreTokStage:
    pat = item.get("pattern") or {}
    if "Regex" in pat:
        rx = pat["Regex"]
    elif "String" in pat:
        rx = regex.escape(pat["String"])
    else:
        raise _fail(path, f"Split pre-tokenizer without a pattern: {item!r}")
    from ..pretokenize import CompiledPattern

    try:
        cp = CompiledPattern.compile(rx, "oniguruma", "find")
    except ValueError as e:
        raise _fail(path, f"Split regex {rx!r}: {e}") from None
    if cp.levels[0].match(b"", 0) >= 0:
        raise _fail(path, f"Split regex {rx!r} can match the empty string, which is not supported")
    return PreTokStage(rx, keep_gaps=False, dialect="oniguruma")


def _pretokenizer(path: str, pt: Any) -> tuple[list[PreTokStage], bool]:
    if pt is None:
        raise _fail(path, "no pre_tokenizer: fstok BPE needs a ByteLevel pre-tokenizer (byte-level BPE)")
    if not isinstance(pt, dict):
        raise _fail(path, f"pre_tokenizer must be an object with a \"type\", got {pt!r}"[:300])
    items = pt.get("pretokenizers", []) if pt.get("type") == "Sequence" else [pt]
    if not isinstance(items, list) or not all(isinstance(x, dict) for x in items):
        raise _fail(path, f"pre_tokenizer.pretokenizers must be a list of objects, got {items!r}"[:300])
    stages: list[PreTokStage] = []
    seen_bytelevel = False
    add_prefix_space = False
    for i, item in enumerate(items):
        t = item.get("type")
        if seen_bytelevel:
            raise _fail(path, f"pre-tokenizer {t!r} after ByteLevel is not supported")
        if t == "Split" and _is_kept_matches(item):
            # Split(behavior=Removed, invert=true) keeps the matches and drops the gaps: regex find (one
            # stage, first, with nothing else splitting after it)
            if i != 0 or len(items) != 2 or items[1].get("type") != "ByteLevel" or items[1].get("use_regex", True):
                raise _fail(path, "Split(behavior=Removed, invert=true) is supported as the only split, before "
                                  "ByteLevel(use_regex=false)")
            stages.append(_find_stage(path, item))
        elif t == "Split":
            stages.append(PreTokStage(_split_pattern(path, item), keep_gaps=True, dialect="oniguruma"))
        elif t == "ByteLevel":
            seen_bytelevel = True
            if item.get("add_prefix_space", True):
                if i != 0:
                    raise _fail(path, "ByteLevel(add_prefix_space=true) after other pre-tokenizers is not supported")
                add_prefix_space = True
            if item.get("use_regex", True):
                stages.append(PreTokStage(GPT2_HF_PATTERN, keep_gaps=True, dialect="oniguruma"))
        else:
            raise _fail(path, f"pre-tokenizer {t!r} is not supported (supported: ByteLevel, Split)")
    if not seen_bytelevel:
        raise _fail(path, "the pre-tokenizer has no ByteLevel step: not a byte-level BPE model")
    # no stage (ByteLevel(use_regex=false) alone): the whole text is one piece
    return stages, add_prefix_space


def load_tokenizer_json(path: str | os.PathLike, name: str | None = None) -> BPESource:
    p = os.fspath(path)
    with open(p, "rb") as f:
        raw = f.read()
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _fail(p, f"not valid JSON ({e})") from None
    src = source_from_obj(obj, p, name)
    if isinstance(obj, dict):
        _decoder(p, obj.get("decoder"))  # the compiled tokenizer decodes; the pipeline's own decoder does not
    return src


def source_from_obj(obj: Any, p: str, name: str | None = None, check: bool = True) -> BPESource:
    """The BPESource of a parsed tokenizer.json (p: its path, for messages and the source identity).
    check=False leaves `src.check()` to the caller (which may first complete the source)."""
    if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
        raise _fail(p, "not a tokenizer.json (no 'model' object)")
    model = obj["model"]
    if model.get("type", "BPE") != "BPE":
        raise _fail(p, f"model type {model.get('type')!r} is not BPE")
    if model.get("dropout") not in (None, 0, 0.0):
        raise _fail(p, "BPE dropout is not supported (it makes encoding non-deterministic)")
    for opt in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(opt):
            raise _fail(p, f"BPE option {opt}={model[opt]!r} is not supported for byte-level BPE")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        raise _fail(p, "model.vocab is not an object")
    merges_raw = model.get("merges", [])
    if not isinstance(merges_raw, list):
        raise _fail(p, f"model.merges must be a list, got {type(merges_raw).__name__}")
    normalizer = _normalizer(p, obj.get("normalizer"))
    stages, add_prefix_space = _pretokenizer(p, obj.get("pre_tokenizer"))
    post_processor = obj.get("post_processor")
    if post_processor is not None:
        from ..postprocess import PostProcessor

        try:
            PostProcessor.from_json(post_processor)
        except (ValueError, TypeError, KeyError) as e:
            raise _fail(p, f"post_processor: {e}") from None
    for a in obj.get("added_tokens") or []:  # refused before the vocabulary is read (the pipeline takes the file)
        for flag in ("lstrip", "rstrip", "single_word"):
            if isinstance(a, dict) and a.get(flag):
                raise _fail(p, f"added token {a.get('content')!r} uses {flag}=true, which is not supported")

    tokens: dict[bytes, int] = {}
    str_to_bytes: dict[str, bytes] = {}
    extra_decode: dict[int, bytes] = {}
    for s, i in vocab.items():
        if not isinstance(i, int) or i < 0:
            raise _fail(p, f"vocab entry {s!r} has invalid id {i!r}")
        b = bytelevel_to_bytes(s)
        if b is None or not b:
            extra_decode[i] = s.encode("utf-8")  # e.g. special tokens kept in the model vocab
            continue
        if b in tokens:
            raise _fail(p, f"vocab entries {s!r} and id {tokens[b]} map to the same bytes")
        tokens[b] = i
        str_to_bytes[s] = b
    merges: list[tuple[bytes, bytes]] = []
    for k, m in enumerate(merges_raw):
        if isinstance(m, str):
            parts = m.split(" ")
            if len(parts) != 2:
                raise _fail(p, f"merge #{k} {m!r} is not 'a b'")
        elif isinstance(m, list) and len(m) == 2:
            parts = m
        else:
            raise _fail(p, f"merge #{k} {m!r} is not a pair")
        a, b = parts
        if a not in str_to_bytes or b not in str_to_bytes:
            raise _fail(p, f"merge #{k} {m!r} uses a token missing from the vocab")
        ab = str_to_bytes[a] + str_to_bytes[b]
        if ab not in tokens:
            raise _fail(p, f"merge #{k} {m!r}: the merged token is missing from the vocab")
        merges.append((str_to_bytes[a], str_to_bytes[b]))

    specials: dict[str, int] = {}
    added: list[AddedToken] = []
    added_raw = obj.get("added_tokens") or []
    if not isinstance(added_raw, list) or not all(isinstance(a, dict) for a in added_raw):
        raise _fail(p, "added_tokens must be a list of objects")
    hf_ids = hf_added_ids([a.get("content") if isinstance(a.get("content"), str) else "" for a in added_raw], vocab)
    for a in added_raw:
        for flag in ("lstrip", "rstrip", "single_word"):
            if a.get(flag):
                raise _fail(p, f"added token {a.get('content')!r} uses {flag}=true, which is not supported")
        content, tid = a.get("content"), a.get("id")
        if not isinstance(content, str) or not content or not isinstance(tid, int):
            raise _fail(p, f"bad added token {a!r}")
        tid = hf_ids[content]  # HF's id, not the one written in the file (they differ only in crafted files)
        if a.get("special", False):
            specials[content] = tid
        else:
            added.append(AddedToken(content, tid, special=False, normalized=bool(a.get("normalized", True))))
        if tid not in extra_decode:
            extra_decode[tid] = content.encode("utf-8")
    # ids that are both a mergeable token and an added token decode as the mergeable token's bytes
    byid = {i: b for b, i in tokens.items()}
    for tid in list(extra_decode):
        if tid in byid:
            del extra_decode[tid]

    src = BPESource(
        name=name or os.path.basename(os.path.dirname(os.path.abspath(p))) or "tokenizer",
        tokens=tokens,
        stages=stages,
        special_tokens=specials,
        merges=merges,
        ignore_merges=bool(model.get("ignore_merges", False)),
        added_tokens=added,
        normalizer=normalizer,
        add_prefix_space=add_prefix_space,
        extra_decode=extra_decode,
        source_files=[p],
        semantics="hf",
        post_processor=post_processor,
    )
    if check:
        src.check()
    return src
