#!/usr/bin/env python3
"""Differential run of fstok against HF `tokenizers` on variants of the shared tokenizer.json files: the
options the tokenizer.json format defines that the shared files do not use (Metaspace prepend_scheme and
split, ByteLevel add_prefix_space / trim_offsets / use_regex, Split behaviors and invert, normalizers,
WordLevel, BPE continuing_subword_prefix / byte_fallback / fuse_unk / ignore_merges, decoders, post-processors,
added-token flags, WordPiece and Unigram after other pre-tokenizers and normalizers, the older serializations
without "type" and with merges as pairs). Each variant is one of the shared files with its JSON edited. Where
HF raises on an input (a Unigram model without unk_id), both faces of fstok must raise too.

    python tools/diff_variants.py                     # every variant, a sample of the corpus and generated strings
    python tools/diff_variants.py --list              # the variants
    python tools/diff_variants.py --only metaspace    # variants whose name contains a word
    python tools/diff_variants.py --lines 400         # every 400th line of each corpus file (default 800)

For each variant: where HF loads it, fstok must either give HF's ids, offsets and decode (both faces,
`fstok.compile(path)` and `fstok.Tokenizer.from_file(path)`, with and without `add_special_tokens`: the
checks of tools/diff_models.py) or refuse it with a ValueError that names the file. Exit status 1 on any
mismatch or unclear refusal.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import diff_models as DM  # noqa: E402

BASES = {
    "roberta": "models/bytelevel-bpe/roberta-base/tokenizer.json",
    "llama3": "hf-derived/llama3.tokenizer.json",
    "clip": "models/charbpe/clip-vit-base-patch32/tokenizer.json",
    "phi3": "models/spm-bpe/phi-3-mini/tokenizer.json",
    "e5": "models/unigram/multilingual-e5-small/tokenizer.json",
    "minilm": "models/wordpiece/all-MiniLM-L6-v2/tokenizer.json",
    "whisper": "models/bytelevel-bpe/whisper-large-v3/tokenizer.json",
}

RE_GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


def V(name, base, *edits):
    """A variant: base file and edits, each a function of the parsed JSON (changing it in place)."""
    return (name, base, edits)


def at(path, **kv):
    def f(d):
        obj = d
        for k in path:
            obj = obj[k]
        obj.update(kv)
    return f


def put(key, value):
    def f(d):
        d[key] = copy.deepcopy(value)
    return f


def model(**kv):
    def f(d):
        d["model"].update(kv)
    return f


def added(**kv):
    def f(d):
        for a in d["added_tokens"]:
            a.update(kv)
    return f


def wordlevel_from_minilm(d):
    # the file's truncation and padding go too: fstok.compile's pipeline tokenizer refuses them
    d["model"] = {"type": "WordLevel", "vocab": d["model"]["vocab"], "unk_token": "[UNK]"}
    d["truncation"] = d["padding"] = None


def add_words(d):
    """Added tokens beside the file's: words of the vocabulary and not, with a space, non-special and special."""
    vocab = d["model"]["vocab"]
    n = (len(vocab) if isinstance(vocab, list) else max(vocab.values()) + 1)
    n = max([n] + [a["id"] + 1 for a in d["added_tokens"]])
    for k, (c, special, norm, sw) in enumerate([("the", False, True, False), ("hello world", False, True, False),
                                                ("ing", False, False, True), ("<X>", True, False, False),
                                                ("Qu", False, True, False)]):
        d["added_tokens"].append({"id": n + k, "content": c, "single_word": sw, "lstrip": False, "rstrip": False,
                                  "normalized": norm, "special": special})


def ml(seq):  # a Sequence of normalizers
    return {"type": "Sequence", "normalizers": seq}


def pl(seq):  # a Sequence of pre-tokenizers
    return {"type": "Sequence", "pretokenizers": seq}


def dl(seq):  # a Sequence of decoders
    return {"type": "Sequence", "decoders": seq}


BL = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
SPLIT_WORDS = {"type": "Split", "pattern": {"Regex": RE_GPT2}, "behavior": "Isolated", "invert": False}
META = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}


def variants():
    out = []
    # ---- byte-level BPE: ByteLevel options
    for aps in (False, True):
        for trim in (False, True):
            for regex in (False, True):
                out.append(V(f"roberta bytelevel aps={aps} trim={trim} regex={regex}", "roberta",
                             put("pre_tokenizer", dict(BL, add_prefix_space=aps, trim_offsets=trim, use_regex=regex)),
                             put("post_processor", {"type": "ByteLevel", "add_prefix_space": aps,
                                                    "trim_offsets": trim, "use_regex": regex})))
    out += [
        V("roberta roberta-processing trim=false aps=true", "roberta",
          at(["post_processor"], trim_offsets=False, add_prefix_space=True)),
        V("roberta roberta-processing trim=true aps=true", "roberta",
          at(["pre_tokenizer"], add_prefix_space=True), at(["post_processor"], trim_offsets=True, add_prefix_space=True)),
        V("roberta no post_processor", "roberta", put("post_processor", None)),
        V("roberta ignore_merges", "roberta", model(ignore_merges=True)),
        V("llama3 ignore_merges=false", "llama3", model(ignore_merges=False)),
        V("roberta unk+fuse_unk", "roberta", model(unk_token="<unk>", fuse_unk=True)),
        V("roberta dropout=0", "roberta", model(dropout=0.0)),
        V("roberta decoder none", "roberta", put("decoder", None)),
        V("roberta decoder bytelevel+strip", "roberta",
          put("decoder", dl([BL, {"type": "Strip", "content": " ", "start": 1, "stop": 1}]))),
        V("roberta normalizer lowercase", "roberta", put("normalizer", {"type": "Lowercase"})),
        V("roberta normalizer NFKC", "roberta", put("normalizer", {"type": "NFKC"})),
        V("roberta normalizer NFD+StripAccents", "roberta",
          put("normalizer", ml([{"type": "NFD"}, {"type": "StripAccents"}]))),
        V("roberta normalizer NFKD", "roberta", put("normalizer", {"type": "NFKD"})),
        V("roberta normalizer strip", "roberta", put("normalizer", {"type": "Strip", "strip_left": True, "strip_right": True})),
        V("roberta normalizer replace regex", "roberta",
          put("normalizer", {"type": "Replace", "pattern": {"Regex": r"\d+"}, "content": "0"})),
        V("roberta normalizer replace string", "roberta",
          put("normalizer", {"type": "Replace", "pattern": {"String": "the"}, "content": "THE"})),
        V("roberta normalizer prepend", "roberta", put("normalizer", {"type": "Prepend", "prepend": "_"})),
        V("roberta added lstrip/rstrip", "roberta", added(lstrip=True, rstrip=True)),
        V("roberta added single_word", "roberta", added(single_word=True)),
        V("roberta added normalized=false", "roberta", added(normalized=False)),
        V("roberta added non-special", "roberta", added(special=False)),
        V("roberta template processing", "roberta",
          put("post_processor", {"type": "TemplateProcessing",
                                 "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                            {"SpecialToken": {"id": "</s>", "type_id": 1}}],
                                 "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                                 "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                                                    "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}})),
        V("roberta bert processing", "roberta",
          put("post_processor", {"type": "BertProcessing", "sep": ["</s>", 2], "cls": ["<s>", 0]})),
    ]
    # ---- byte-level BPE with a Split in front: behaviors and invert
    for beh in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        for inv in (False, True):
            out.append(V(f"whisper split {beh} invert={inv}", "whisper",
                         put("pre_tokenizer", pl([{"type": "Split", "pattern": {"Regex": r"\s+|\d"}, "behavior": beh,
                                                   "invert": inv}, dict(BL, use_regex=False)]))))
    out += [
        V("whisper split string", "whisper",
          put("pre_tokenizer", pl([{"type": "Split", "pattern": {"String": "e"}, "behavior": "MergedWithNext",
                                    "invert": False}, dict(BL, use_regex=False)]))),
        V("whisper digits+punct+bytelevel", "whisper",
          put("pre_tokenizer", pl([{"type": "Digits", "individual_digits": True}, {"type": "Punctuation", "behavior": "Isolated"},
                                   dict(BL, use_regex=True)]))),
        V("whisper digits grouped", "whisper",
          put("pre_tokenizer", pl([{"type": "Digits", "individual_digits": False}, dict(BL, use_regex=True)]))),
        V("whisper unicode scripts", "whisper",
          put("pre_tokenizer", pl([{"type": "UnicodeScripts"}, dict(BL, use_regex=False)]))),
        V("whisper whitespace split", "whisper",
          put("pre_tokenizer", pl([{"type": "WhitespaceSplit"}, dict(BL, use_regex=False)]))),
        V("whisper chardelimiter", "whisper",
          put("pre_tokenizer", pl([{"type": "CharDelimiterSplit", "delimiter": " "}, dict(BL, use_regex=False)]))),
        V("whisper fixedlength", "whisper",
          put("pre_tokenizer", pl([{"type": "FixedLength", "length": 5}, dict(BL, use_regex=False)]))),
        V("whisper normalizer bytelevel", "whisper",
          put("normalizer", {"type": "ByteLevel"}), put("pre_tokenizer", SPLIT_WORDS)),
    ]
    # ---- SentencePiece-style BPE (phi-3): Metaspace instead of the normalizer, byte_fallback, fuse_unk
    for scheme in ("always", "first", "never"):
        for split in (True, False):
            out.append(V(f"phi3 metaspace {scheme} split={split}", "phi3", put("normalizer", None),
                         put("pre_tokenizer", dict(META, prepend_scheme=scheme, split=split)),
                         put("decoder", dl([{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                            {"type": "ByteFallback"}, {"type": "Fuse"},
                                            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme,
                                             "split": split}]))))
    out += [
        V("phi3 byte_fallback=false", "phi3", model(byte_fallback=False)),
        V("phi3 fuse_unk=false byte_fallback=false", "phi3", model(byte_fallback=False, fuse_unk=False)),
        V("phi3 ignore_merges", "phi3", model(ignore_merges=True)),
        V("phi3 decoder metaspace", "phi3", put("decoder", {"type": "Metaspace", "replacement": "\u2581",
                                                          "prepend_scheme": "always", "split": True})),
        V("phi3 decoder no strip", "phi3", put("decoder", dl([{"type": "Replace", "pattern": {"String": "\u2581"},
                                                                "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}]))),
        V("phi3 normalizer NFKC first", "phi3", put("normalizer", ml([{"type": "NFKC"}, {"type": "Prepend", "prepend": "\u2581"},
                                                                      {"type": "Replace", "pattern": {"String": " "},
                                                                       "content": "\u2581"}]))),
        V("phi3 normalizer lowercase", "phi3", put("normalizer", ml([{"type": "Lowercase"}, {"type": "Prepend", "prepend": "\u2581"},
                                                                      {"type": "Replace", "pattern": {"String": " "},
                                                                       "content": "\u2581"}]))),
        V("phi3 normalizer replace regex", "phi3",
          put("normalizer", ml([{"type": "Replace", "pattern": {"Regex": " +"}, "content": " "},
                                {"type": "Prepend", "prepend": "\u2581"},
                                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]))),
        V("phi3 added lstrip rstrip", "phi3", added(lstrip=True, rstrip=True)),
        V("phi3 added normalized", "phi3", added(normalized=True)),
        V("phi3 bos template", "phi3",
          put("post_processor", {"type": "TemplateProcessing",
                                 "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                                 "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                          {"Sequence": {"id": "B", "type_id": 1}}],
                                 "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}})),
    ]
    # ---- Unigram (e5): Metaspace options, normalizers
    for scheme in ("always", "first", "never"):
        for split in (True, False):
            out.append(V(f"e5 metaspace {scheme} split={split}", "e5",
                         put("pre_tokenizer", dict(META, prepend_scheme=scheme, split=split)),
                         put("decoder", dict(META, prepend_scheme=scheme, split=split))))
    out += [
        V("e5 no normalizer", "e5", put("normalizer", None)),
        V("e5 normalizer NFKC+lowercase", "e5", put("normalizer", ml([{"type": "NFKC"}, {"type": "Lowercase"}]))),
        V("e5 normalizer strip+replace", "e5", put("normalizer", ml([{"type": "Strip", "strip_left": True, "strip_right": True},
                                                                      {"type": "Replace", "pattern": {"Regex": r"\s+"},
                                                                       "content": " "}]))),
        V("e5 whitespace+metaspace", "e5", put("pre_tokenizer", pl([{"type": "WhitespaceSplit"}, META]))),
        V("e5 byte_fallback", "e5", model(byte_fallback=True)),
        V("e5 decoder fuse+strip", "e5", put("decoder", dl([{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1,
                                                                               "stop": 0}]))),
        V("e5 decoder CTC", "e5", put("decoder", {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "\u2581",
                                                   "cleanup": True})),
    ]
    # ---- char-level BPE with a suffix (CLIP)
    out += [
        V("clip continuing_subword_prefix", "clip", model(continuing_subword_prefix="##")),
        V("clip fuse_unk", "clip", model(fuse_unk=True)),
        V("clip no unk", "clip", model(unk_token=None)),
        V("clip byte_fallback", "clip", model(byte_fallback=True)),
        V("clip ignore_merges", "clip", model(ignore_merges=True)),
        V("clip decoder BPEDecoder", "clip", put("decoder", {"type": "BPEDecoder", "suffix": "</w>"})),
        V("clip whitespace pretok", "clip", put("pre_tokenizer", {"type": "Whitespace"})),
        V("clip bert pretok", "clip", put("pre_tokenizer", {"type": "BertPreTokenizer"})),
        V("clip NFD stripaccents", "clip", put("normalizer", ml([{"type": "NFD"}, {"type": "StripAccents"},
                                                                 {"type": "Lowercase"}]))),
    ]
    # ---- WordPiece (MiniLM) options, and WordLevel on its vocab
    for sa in (None, True, False):
        for lc in (True, False):
            out.append(V(f"minilm bert strip_accents={sa} lowercase={lc}", "minilm",
                         at(["normalizer"], strip_accents=sa, lowercase=lc)))
    out += [
        V("minilm bert clean_text=false chinese=false", "minilm", at(["normalizer"], clean_text=False, handle_chinese_chars=False)),
        V("minilm whitespace pretok", "minilm", put("pre_tokenizer", {"type": "Whitespace"})),
        V("minilm whitespacesplit pretok", "minilm", put("pre_tokenizer", {"type": "WhitespaceSplit"})),
        V("minilm max_input_chars 5", "minilm", model(max_input_chars_per_word=5)),
        V("minilm decoder cleanup=false", "minilm", put("decoder", {"type": "WordPiece", "prefix": "##", "cleanup": False})),
        V("minilm normalizer sequence", "minilm", put("normalizer", ml([{"type": "NFD"}, {"type": "Lowercase"},
                                                                        {"type": "StripAccents"}]))),
        V("minilm added lstrip single_word", "minilm", added(lstrip=True, rstrip=True, single_word=True)),
        V("minilm added lstrip", "minilm", added(lstrip=True)),
        V("minilm added normalized", "minilm", added(normalized=True)),
        V("minilm added non-special", "minilm", added(special=False)),
        V("minilm wordlevel whitespace", "minilm", wordlevel_from_minilm, put("pre_tokenizer", {"type": "Whitespace"}),
          put("normalizer", ml([{"type": "NFD"}, {"type": "StripAccents"}, {"type": "Lowercase"}])), put("decoder", None)),
        V("minilm wordlevel bert", "minilm", wordlevel_from_minilm),
    ]
    # ---- more combinations: a Sequence post-processor, pre-tokenizers before Metaspace, Punctuation behaviors
    out += [
        V("roberta post sequence bytelevel+template", "roberta",
          put("post_processor", {"type": "Sequence", "processors": [
              {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
              {"type": "TemplateProcessing",
               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
               "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
               "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}}]})),
        V("whisper added non-special normalized single_word", "whisper",
          added(special=False, normalized=True, single_word=True)),
        V("phi3 added single_word", "phi3", added(single_word=True)),
        V("e5 added lstrip rstrip single_word", "e5", added(lstrip=True, rstrip=True, single_word=True)),
        V("e5 added normalized", "e5", added(normalized=True)),
        V("e5 added non-special", "e5", added(special=False)),
        V("roberta lowercase added non-special", "roberta", put("normalizer", {"type": "Lowercase"}),
          added(special=False, normalized=True)),
        V("phi3 metaspace replacement _", "phi3", put("normalizer", None),
          put("pre_tokenizer", dict(META, replacement="_")), put("decoder", dict(META, replacement="_"))),
        V("phi3 digits+metaspace", "phi3", put("normalizer", None),
          put("pre_tokenizer", pl([{"type": "Digits", "individual_digits": True}, META])),
          put("decoder", dl([{"type": "ByteFallback"}, {"type": "Fuse"}, META]))),
        V("phi3 split+metaspace", "phi3", put("normalizer", None),
          put("pre_tokenizer", pl([{"type": "Split", "pattern": {"Regex": r"\p{N}"}, "behavior": "Isolated",
                                    "invert": False}, dict(META, prepend_scheme="first")])),
          put("decoder", dl([{"type": "ByteFallback"}, {"type": "Fuse"}, dict(META, prepend_scheme="first")]))),
        V("phi3 decoder strip 2 1", "phi3", put("decoder", dl([{"type": "Replace", "pattern": {"String": "\u2581"},
                                                                 "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"},
                                                                {"type": "Strip", "content": " ", "start": 2, "stop": 1}]))),
        V("e5 prepend+replace normalizer", "e5",
          put("normalizer", ml([{"type": "Prepend", "prepend": "\u2581"},
                                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}])),
          put("pre_tokenizer", None),
          put("decoder", dl([{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                             {"type": "Strip", "content": " ", "start": 1, "stop": 0}]))),
        V("e5 digits+metaspace", "e5", put("pre_tokenizer", pl([{"type": "Digits", "individual_digits": True}, META]))),
        V("e5 split+metaspace", "e5", put("pre_tokenizer", pl([{"type": "Split", "pattern": {"String": "."},
                                                                "behavior": "MergedWithPrevious", "invert": False},
                                                               dict(META, prepend_scheme="first")]))),
        V("minilm prefix @@", "minilm", model(continuing_subword_prefix="@@"),
          put("decoder", {"type": "WordPiece", "prefix": "@@", "cleanup": True})),
        V("minilm bert+digits pretok", "minilm",
          put("pre_tokenizer", pl([{"type": "BertPreTokenizer"}, {"type": "Digits", "individual_digits": True}]))),
        V("minilm unicode scripts", "minilm", put("pre_tokenizer", pl([{"type": "WhitespaceSplit"}, {"type": "UnicodeScripts"}]))),
    ]
    for b in ("roberta", "whisper", "phi3", "e5", "clip", "minilm"):
        out.append(V(f"{b} added words", b, add_words))
    out += [
        V("roberta empty sequences", "roberta", put("normalizer", ml([])),
          put("pre_tokenizer", pl([dict(BL, use_regex=True)])), put("decoder", dl([BL]))),
        V("phi3 replace deletes", "phi3", put("normalizer", ml([{"type": "Replace", "pattern": {"Regex": "[aeiou]+"},
                                                                  "content": ""}, {"type": "Prepend", "prepend": "\u2581"},
                                                                 {"type": "Replace", "pattern": {"String": " "},
                                                                  "content": "\u2581"}]))),
        V("e5 replace deletes", "e5", put("normalizer", ml([{"type": "Replace", "pattern": {"Regex": "[aeiou]+"}, "content": ""},
                                                          {"type": "Replace", "pattern": {"String": "x"}, "content": "yz"}]))),
        V("clip replace deletes", "clip", put("normalizer", ml([{"type": "Replace", "pattern": {"Regex": "[aeiou]+"},
                                                                  "content": ""}, {"type": "Lowercase"}]))),
    ]
    out += [
        V("e5 no unk", "e5", model(unk_id=None)),
        V("phi3 no unk no byte_fallback", "phi3", model(unk_token=None, byte_fallback=False)),
        V("e5 metaspace legacy add_prefix_space=false", "e5",
          put("pre_tokenizer", {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": False}),
          put("decoder", {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": False})),
        V("whisper bytelevel then split", "whisper",
          put("pre_tokenizer", pl([dict(BL, use_regex=False), {"type": "Split", "pattern": {"Regex": "\u0120"},
                                                                "behavior": "MergedWithNext", "invert": False}]))),
        V("roberta template multi-id special", "roberta",
          put("post_processor", {"type": "TemplateProcessing",
                                 "single": [{"SpecialToken": {"id": "<ss>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                                 "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                                 "special_tokens": {"<ss>": {"id": "<ss>", "ids": [0, 2], "tokens": ["<s>", "</s>"]}}})),
    ]
    for beh in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        out.append(V(f"minilm punctuation {beh}", "minilm",
                     put("pre_tokenizer", pl([{"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": beh}]))))
        out.append(V(f"whisper punctuation {beh}", "whisper",
                     put("pre_tokenizer", pl([{"type": "WhitespaceSplit"}, {"type": "Punctuation", "behavior": beh},
                                              dict(BL, use_regex=False)]))))
    # ---- combinations the compiled WordPiece / SentencePiece-style tables do not take (the stage-by-stage
    # pipeline runs them), and the older serializations
    WS = {"type": "Whitespace"}
    BERTN = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
             "lowercase": True}
    PAIR_TEMPLATE = {"type": "TemplateProcessing",
                     "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                     "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                              {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                              {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                     "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [101], "tokens": ["[CLS]"]},
                                        "[SEP]": {"id": "[SEP]", "ids": [102], "tokens": ["[SEP]"]}}}

    def no_type(d):
        d["model"].pop("type", None)

    def merges_as_pairs(d):
        d["model"]["merges"] = [m.split(" ") if isinstance(m, str) else m for m in d["model"]["merges"]]

    def merges_as_strings(d):
        d["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in d["model"]["merges"]]

    out += [
        V("minilm NFD+lowercase+stripaccents whitespace", "minilm",
          put("normalizer", ml([{"type": "NFD"}, {"type": "Lowercase"}, {"type": "StripAccents"}])),
          put("pre_tokenizer", WS)),
        V("minilm bertnorm metaspace", "minilm", put("pre_tokenizer", META), put("decoder", None)),
        V("minilm bertnorm whitespace added words", "minilm", put("pre_tokenizer", WS), add_words),
        V("minilm bertnorm whitespace added lstrip", "minilm", put("pre_tokenizer", WS), added(lstrip=True, rstrip=True)),
        V("minilm bert strip_accents=false whitespacesplit", "minilm", at(["normalizer"], strip_accents=False),
          put("pre_tokenizer", {"type": "WhitespaceSplit"})),
        V("minilm bert no chinese bytelevel-free split", "minilm", at(["normalizer"], handle_chinese_chars=False),
          put("pre_tokenizer", pl([{"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "Removed",
                                    "invert": False}, {"type": "Punctuation", "behavior": "Isolated"}]))),
        V("minilm wordpiece digits max_input_chars 8", "minilm", model(max_input_chars_per_word=8),
          put("pre_tokenizer", pl([WS, {"type": "Digits", "individual_digits": True}]))),
        V("minilm NFKC+lowercase bertpretok", "minilm", put("normalizer", ml([{"type": "NFKC"}, {"type": "Lowercase"}]))),
        V("minilm replace normalizer bert pretok", "minilm",
          put("normalizer", ml([BERTN, {"type": "Replace", "pattern": {"Regex": r"\d"}, "content": "#"}]))),
        V("minilm pair template whitespace", "minilm", put("post_processor", PAIR_TEMPLATE), put("pre_tokenizer", WS)),
        V("minilm bert processing", "minilm", put("post_processor", {"type": "BertProcessing", "sep": ["[SEP]", 102],
                                                                      "cls": ["[CLS]", 101]})),
        V("minilm no model type", "minilm", no_type),
        V("minilm no model type whitespace", "minilm", no_type, put("pre_tokenizer", WS)),
        V("minilm wordlevel bert lowercase false", "minilm", wordlevel_from_minilm,
          at(["normalizer"], lowercase=False, strip_accents=True)),
        V("minilm wordlevel metaspace", "minilm", wordlevel_from_minilm, put("normalizer", None),
          put("pre_tokenizer", META), put("decoder", dict(META))),
        V("e5 precompiled+digits", "e5", put("pre_tokenizer", pl([{"type": "Digits", "individual_digits": False}, META]))),
        V("e5 precompiled+punctuation", "e5",
          put("pre_tokenizer", pl([{"type": "Punctuation", "behavior": "Isolated"}, dict(META, prepend_scheme="first")]))),
        V("e5 nfkc+strip+metaspace never", "e5", put("normalizer", ml([{"type": "NFKC"}, {"type": "Strip", "strip_left": True,
                                                                                        "strip_right": True}])),
          put("pre_tokenizer", dict(META, prepend_scheme="never")), put("decoder", dict(META, prepend_scheme="never"))),
        V("e5 bertnorm metaspace", "e5", put("normalizer", dict(BERTN, lowercase=False))),
        V("e5 whitespace pretok", "e5", put("pre_tokenizer", WS), put("decoder", None)),
        V("e5 byte_fallback digits", "e5", model(byte_fallback=True),
          put("pre_tokenizer", pl([{"type": "Digits", "individual_digits": True}, META])),
          put("decoder", dl([{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
                             {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]))),
        V("e5 ctc decoder split", "e5", put("pre_tokenizer", pl([{"type": "Split", "pattern": {"String": " "},
                                                                  "behavior": "MergedWithNext", "invert": False}, META])),
          put("decoder", {"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "\u2581", "cleanup": False})),
        V("e5 no model type", "e5", no_type),
        V("e5 added words digits", "e5", add_words, put("pre_tokenizer", pl([{"type": "Digits", "individual_digits": True},
                                                                          META]))),
        V("phi3 NFKC strip split digits", "phi3",
          put("normalizer", ml([{"type": "NFKC"}, {"type": "Strip", "strip_left": False, "strip_right": True},
                                {"type": "Prepend", "prepend": "\u2581"},
                                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}])),
          put("pre_tokenizer", {"type": "Digits", "individual_digits": True})),
        V("phi3 metaspace split punctuation", "phi3", put("normalizer", None),
          put("pre_tokenizer", pl([{"type": "Split", "pattern": {"Regex": r"[.,!?]"}, "behavior": "Isolated",
                                    "invert": False}, dict(META, prepend_scheme="first", split=False)])),
          put("decoder", dl([{"type": "ByteFallback"}, {"type": "Fuse"}, dict(META, prepend_scheme="first")]))),
        V("phi3 CTC decoder", "phi3", put("decoder", {"type": "CTC", "pad_token": "<unk>", "word_delimiter_token": "\u2581",
                                                      "cleanup": True})),
        V("phi3 no model type merges as pairs", "phi3", no_type, merges_as_pairs),
        V("phi3 added words NFKC", "phi3", add_words,
          put("normalizer", ml([{"type": "NFKC"}, {"type": "Prepend", "prepend": "\u2581"},
                                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]))),
        V("roberta no model type merges as pairs", "roberta", no_type, merges_as_pairs),
        V("roberta merges as strings", "roberta", merges_as_strings),
        V("clip no model type merges as pairs", "clip", no_type, merges_as_pairs),
        V("whisper no model type", "whisper", no_type),
        V("roberta bytelevel all off pair template", "roberta",
          put("pre_tokenizer", dict(BL, add_prefix_space=False, trim_offsets=False, use_regex=False)),
          put("post_processor", {"type": "TemplateProcessing",
                                 "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                            {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                                 "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                          {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 1}},
                                          {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "</s>", "type_id": 1}}],
                                 "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]},
                                                    "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}})),
        V("clip byte_fallback no suffix", "clip", model(byte_fallback=True, end_of_word_suffix=None),
          put("decoder", dl([{"type": "ByteFallback"}, {"type": "Fuse"}]))),
        V("clip unk dropped multibyte", "clip", model(unk_token=None), put("pre_tokenizer", {"type": "WhitespaceSplit"})),
    ]
    for beh in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
        for inv in (False, True):
            out.append(V(f"e5 split {beh} invert={inv}", "e5",
                         put("pre_tokenizer", pl([{"type": "Split", "pattern": {"Regex": r"\s+|\p{P}"}, "behavior": beh,
                                                   "invert": inv}, META]))))
    return out


def _training_lines() -> list[str]:
    out = []
    for name, n in (("english", 300), ("multilingual", 120), ("code", 80), ("chinese_long", 20)):
        with open(os.path.join(DM.CORPUS, f"{name}.txt"), encoding="utf-8") as f:
            out += f.read().split("\n")[:n]
    return out


def tiny_base(base: str, vocab_size: int = 400) -> dict:
    """The shared file `base` with its model replaced by one HF's trainer learns on a few hundred corpus lines
    (the same model type and options, `vocab_size` pieces): the same pipeline, compiled in a fraction of
    the time. Added tokens get the ids of the trained vocabulary."""
    import tokenizers
    from tokenizers import pre_tokenizers, trainers

    tk = tokenizers.Tokenizer.from_file(os.path.join(DM.VOCAB, BASES[base]))
    obj = json.loads(tk.to_str())
    m = obj["model"]
    specials = [a["content"] for a in obj["added_tokens"]][:24]
    t = m.get("type")
    if t == "BPE":
        byte_level = "ByteLevel" in json.dumps([obj.get("pre_tokenizer"), obj.get("decoder")])
        kw = {k: m[k] for k in ("continuing_subword_prefix", "end_of_word_suffix") if m.get(k)}
        if byte_level:
            kw["initial_alphabet"] = pre_tokenizers.ByteLevel.alphabet()
        tr = trainers.BpeTrainer(vocab_size=vocab_size + (256 if byte_level else 0), special_tokens=specials,
                                 show_progress=False, **kw)
    elif t == "Unigram":  # every character of the lines must fit in the vocabulary
        n_chars = len(set("".join(_training_lines())))
        tr = trainers.UnigramTrainer(vocab_size=max(vocab_size, n_chars + len(specials) + 200), special_tokens=specials,
                                     show_progress=False,
                                     unk_token=m["vocab"][m["unk_id"]][0])
    else:
        tr = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False)
    tk.train_from_iterator(_training_lines(), trainer=tr)
    out = json.loads(tk.to_str())
    mm = out["model"]
    vocab = {p: i for i, (p, _) in enumerate(mm["vocab"])} if t == "Unigram" else mm["vocab"]
    nxt = len(vocab)
    for a in out["added_tokens"]:
        if a["content"] in vocab:
            a["id"] = vocab[a["content"]]
        else:
            a["id"], nxt = nxt, nxt + 1
    ids = {a["content"]: a["id"] for a in out["added_tokens"]}

    def fix(pp):  # the post-processor's special token ids
        if not isinstance(pp, dict):
            return
        for k in ("sep", "cls"):
            if isinstance(pp.get(k), list):
                pp[k][1] = ids.get(pp[k][0], pp[k][1])
        for v in (pp.get("special_tokens") or {}).values():
            v["ids"] = [ids.get(tok, i) for tok, i in zip(v["tokens"], v["ids"])]
        for sub in pp.get("processors") or []:
            fix(sub)

    fix(out.get("post_processor"))
    return out


_TINY: dict[str, dict] = {}


def sample_inputs(every: int, n_hyp: int) -> list[tuple[str, str]]:
    import glob

    out: dict[str, str] = {}
    for path in sorted(glob.glob(os.path.join(DM.CORPUS, "*.txt"))):
        with open(path, encoding="utf-8", newline="") as f:
            lines = f.read().split("\n")
        for i in range(0, len(lines), every):
            out.setdefault(lines[i][:4000], f"{os.path.basename(path)}:{i + 1}")
    for i, s in enumerate(DM.EDGE):
        out.setdefault(s, f"edge#{i}")
    for i, s in enumerate(DM.hypothesis_texts(n_hyp)):
        out.setdefault(s, f"hyp#{i}")
    return [(label, s) for s, label in out.items()]


def write_variant(name, base, edits, tmpdir, tiny: bool = False) -> str:
    """The variant's tokenizer.json (its base file, or the base cut small, with the edits applied) written into
    tmpdir; returns its path."""
    if tiny:
        if base not in _TINY:
            _TINY[base] = tiny_base(base)
        d = copy.deepcopy(_TINY[base])
    else:
        with open(os.path.join(DM.VOCAB, BASES[base]), encoding="utf-8") as f:
            d = json.load(f)
    for e in edits:
        e(d)
    path = os.path.join(tmpdir, "".join(c if c.isalnum() else "_" for c in name) + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(d, f, ensure_ascii=False)
    return path


def run_variant(name, base, edits, items, tmpdir, tiny: bool = False) -> tuple[str, DM.Report | None, str]:
    """('ok'|'mismatch'|'refused'|'unclear'|'hf-refuses', report, message)"""
    import tokenizers

    import fstok

    path = write_variant(name, base, edits, tmpdir, tiny)
    try:
        tokenizers.Tokenizer.from_file(path)
    except Exception as e:  # HF itself refuses the file: nothing to compare
        return "hf-refuses", None, f"{type(e).__name__}: {str(e)[:200]}"
    refusals = []
    for make in (fstok.compile, fstok.Tokenizer.from_file):
        try:
            make(path)
        except (ValueError, NotImplementedError) as e:
            refusals.append(str(e))
    if any(os.path.basename(path) not in m for m in refusals):
        return "unclear", None, " / ".join(refusals)[:300]
    r = DM.Report(path, "tokenizers")
    items = hf_raises_alike(path, items, r)
    try:
        if not refusals:
            DM.diff_tokenizers(path, items, r)
        elif len(refusals) == 1:  # one face refuses the file (with a clear message): the other one is checked
            try:
                fstok.Tokenizer.from_file(path)
            except (ValueError, NotImplementedError):
                pass  # the HF face refuses, fstok.compile's tokenizer is not checked here
            else:
                face_only(path, items, r)
    except Exception as e:
        if type(e).__name__ == "PanicException":  # tokenizers itself crashes on the variant: nothing to compare
            return "hf-panics", None, str(e)[:200]
        r.check(False, "crashed", "-", "", "a result", f"{type(e).__name__}: {e}")
    except BaseException as e:  # pyo3's PanicException is a BaseException
        if type(e).__name__ != "PanicException":
            raise
        return "hf-panics", None, str(e)[:200]
    if len(refusals) == 2:
        return "refused", None, refusals[0][:300]
    return ("ok" if r.n_bad == 0 else "mismatch"), r, ("compile refuses: " + refusals[0][:200]) if refusals else ""


def hf_raises_alike(path, items, r) -> list:
    """The inputs HF encodes; on each input HF raises on (a Unigram model without unk_id meeting an unknown
    character, ...) both faces of fstok must raise too (checked here, never a silently different result)."""
    import tokenizers

    import fstok

    hf = tokenizers.Tokenizer.from_file(path)
    try:
        hf.encode_batch([s for _, s in items], add_special_tokens=True)
        hf.encode_batch([s for _, s in items], add_special_tokens=False)
        return items
    except Exception:
        pass
    ok, bad = [], []
    for it in items:
        try:
            hf.encode(it[1], add_special_tokens=False)
            hf.encode(it[1], add_special_tokens=True)
            ok.append(it)
        except Exception:
            bad.append(it)
    makers = []
    for what, make in (("compile", fstok.compile), ("Tokenizer.from_file", fstok.Tokenizer.from_file)):
        try:
            makers.append((what, make(path)))
        except (ValueError, NotImplementedError):
            pass
    for label, s in bad:
        for what, tok in makers:
            try:
                got = tok.encode(s) if what == "compile" else tok.encode(s, add_special_tokens=False).ids
            except Exception:
                got = "raised"
            r.check(got == "raised", f"{what} raises where HF raises", label, s, "an exception", got)
    return ok


def face_only(path, items, r) -> None:
    """tools/diff_models.py's checks of `fstok.Tokenizer.from_file(path)` alone."""
    import tokenizers

    import fstok

    hf = tokenizers.Tokenizer.from_file(path)
    face = fstok.Tokenizer.from_file(path)
    for t in (hf, face):
        t.no_truncation()
        t.no_padding()
    texts = [s for _, s in items]
    for add in (False, True):
        for (label, s), e, m in zip(items, hf.encode_batch(texts, add_special_tokens=add),
                                    face.encode_batch(texts, add_special_tokens=add)):
            r.check(m.ids == e.ids and m.offsets == e.offsets, f"Tokenizer ids+offsets(add_special_tokens={add})",
                    label, s, (e.ids, e.offsets), (m.ids, m.offsets))
            if add:
                for skip in (True, False):
                    w, g = hf.decode(e.ids, skip_special_tokens=skip), face.decode(e.ids, skip_special_tokens=skip)
                    r.check(w == g, f"Tokenizer decode(skip_special_tokens={skip})", label, s, w, g)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=[], help="variants whose name contains one of these words")
    ap.add_argument("--lines", type=int, default=800, help="every N-th line of each corpus file (default 800)")
    ap.add_argument("--hypothesis", type=int, default=300, help="hypothesis strings (default 300)")
    ap.add_argument("--tiny", action="store_true",
                    help="each shared file's pipeline with a small model HF's trainer learns (fast; every option path "
                         "but the large-vocabulary tables)")
    ap.add_argument("--list", action="store_true")
    args = ap.parse_args(argv)
    vs = [v for v in variants() if not args.only or any(w in v[0] for w in args.only)]
    if args.list:
        for name, base, _ in vs:
            print(f"{base:8s} {name}")
        return 0
    items = sample_inputs(args.lines, args.hypothesis)
    print(f"{len(vs)} variants, {len(items)} distinct inputs", flush=True)
    bad = 0
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        # the variants' artifacts are of no use after the run: compiled into the temporary folder
        os.environ["FSTOK_CACHE_DIR"] = os.path.join(tmpdir, "cache")
        for name, base, edits in vs:
            t = time.time()
            status, r, msg = run_variant(name, base, edits, items, tmpdir, args.tiny)
            counts[status] = counts.get(status, 0) + 1
            n = f"{r.n} checks, {r.n_bad} mismatches" + (f" ({msg})" if msg else "") if r else msg
            print(f"{status:10s} {name}: {n} ({time.time() - t:.1f} s)", flush=True)
            if status in ("mismatch", "unclear"):
                bad += 1
                for line in (r.first[:4] if r else []):
                    print("    ", line, flush=True)
    print("TOTAL", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
