"""The HF `tokenizer.json` pipeline, stage by stage, with HF `tokenizers`' semantics.

Each module holds one kind of stage, built from its tokenizer.json config by `from_config`
(which raises `UnsupportedComponent` naming the component for anything it does not implement):

    normalized.py     Piece: a normalized text with the original-text span of each character
    unicode.py        the Unicode facts HF uses (punctuation, numeric, whitespace, lowercase, NFD/NFC)
    normalizers.py    NFC/NFD/NFKC/NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, ByteLevel, Sequence
    pretokenizers.py  Split (every behavior, invert), Punctuation, Digits, Whitespace, WhitespaceSplit,
                      CharDelimiterSplit, ByteLevel, BertPreTokenizer, UnicodeScripts, FixedLength, Metaspace,
                      Sequence
    added.py          added tokens (special / normalized / lstrip / rstrip / single_word), matched before the model
    models.py         BPE (HF merges, continuing_subword_prefix, end_of_word_suffix, unk, fuse_unk), WordLevel
    decoders.py       ByteLevel, WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, Replace, CTC, Metaspace, Sequence
    tokenizer.py      PipelineTokenizer: a whole tokenizer.json (encode, offsets, decode)
    native.py         the pre-tokenizer as the C split pipeline of regex DFAs (and the piece cutter)
    fastnorm.py       the normalizer as whole-string operations (the text the C tables encode)
    persist.py        the artifacts (kinds "pipeline" and "tekken")
    tekken.py         Mistral tekken.json
"""
from __future__ import annotations


class UnsupportedComponent(ValueError):
    """A tokenizer.json component (or option) fstok does not implement; the message names it."""
