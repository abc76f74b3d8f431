"""Every HF decoder fstok implements (fstok.pipeline.decoders, the one implementation behind fstok.Tokenizer,
the SentencePiece-style and the byte-level pipelines) against `tokenizers.decoders` itself, on random token lists
drawn from strings that sit on each decoder's edges: byte tokens HF reads (`<0x41>`, `<0x+A>`: Rust's
`from_str_radix` takes a sign) and ones it does not (`<0x A>`, `<0x-1>`, `<0xé>`), prefixes, suffixes, pads,
replacement characters, GPT-2 byte characters, empty tokens."""
import json
import random

import pytest

D = pytest.importorskip("tokenizers.decoders")
from tokenizers import Regex  # noqa: E402

from fstok import hf_decode  # noqa: E402
from fstok.pipeline import decoders as P  # noqa: E402

ALPHABET = ["<0x41>", "<0xe2>", "<0x82>", "<0xac>", "<0x+A>", "<0x A>", "<0x-1>", "<0xé>", "<0xZZ>", "<0x4>",
            "<0x0A>", "<0xFF>", "Ġ", "Ċ", "▁", "▁a", "a", "ab", "aa", "##b", "@@c", "</w>", "x</w>", " ", "  ", "<pad>",
            "<p>", "|", "_", "'", " n't", " .", "do not", " 's", "é", "中", "\U0001f600", "", "Ã©", "ðŁ", "Ģ", "ĠĠ",
            "a_", "<", "0x", ">"]


def _decoders():
    yield D.ByteLevel()
    yield D.WordPiece()
    yield D.WordPiece(prefix="@@", cleanup=False)
    yield D.BPEDecoder()
    yield D.BPEDecoder(suffix="_")
    yield D.ByteFallback()
    yield D.Fuse()
    yield D.Strip(content=" ", left=1, right=0)
    yield D.Strip(content="▁", left=2, right=3)
    yield D.Replace("▁", " ")
    yield D.Replace(Regex("a+"), "X")
    yield D.Replace("ab", "")
    yield D.CTC()
    yield D.CTC(pad_token="<p>", word_delimiter_token="_", cleanup=False)
    for scheme in ("always", "never", "first"):
        yield D.Metaspace(replacement="▁", prepend_scheme=scheme)
    yield D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(content=" ", left=1, right=0)])
    yield D.Sequence([])


@pytest.mark.parametrize("dec", list(_decoders()), ids=lambda d: json.loads(d.__getstate__())["type"])
def test_decoder_matches_hf(dec):
    spec = json.loads(dec.__getstate__())
    ours = P.from_config(spec)
    hf_decode.check_decoder(spec)  # the HF face accepts it too
    rnd = random.Random(repr(spec))
    checked = 0
    for _ in range(2000):
        toks = [rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 6))]
        try:
            want = dec.decode(toks)
        except BaseException:  # noqa: BLE001  (HF's Strip panics on an empty token it strips from the right)
            continue
        assert P.decode_tokens(ours, toks) == want, (spec, toks)
        assert hf_decode.decode_tokens(spec, toks) == want, (spec, toks)
        checked += 1
    assert checked > 1000


def test_unsupported_decoder_is_refused_with_its_name():
    with pytest.raises(NotImplementedError, match="Nonexistent"):
        hf_decode.check_decoder({"type": "Nonexistent"}, "x/tokenizer.json")
