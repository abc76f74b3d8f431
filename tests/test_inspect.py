"""fstok.inspect: summaries of every kind, neighbourhood views, and explanations whose ids equal encode.

The full differential (every line of every corpus, every bundled encoding) is tools/diff_explain.py;
here a fixed sample of each corpus runs for every bundled encoding."""
import json
import os
import subprocess
import sys

import networkx as nx
import pytest

import fstok
from fstok import inspect as fi
from conftest import CORPORA, needs_shared, read_corpus

BPE_NAMES = ["r50k_base", "p50k_base", "cl100k_base", "o200k_base"]
WP_NAMES = ["bert-base-uncased", "bert-base-cased", "bert-base-multilingual-cased"]
TRICKY = ["", " ", "   \n\n\t 1234567890 a  b\r\n  x\u3000y\xa0z  ", "Unaffable naïve café 日本語テキスト",
          "don't I'LL we've", "a" * 300, "1" * 50, "\U0001F600\U0001F600 emoji", "x\u0301\u0302 combining",
          "[CLS] hello [SEP]", "<|endoftext|> after", "tab\tand\u2028sep", "##ing ##", "\x00\x01 control"]


def _sample(every: int = 500) -> list[str]:
    out = list(TRICKY)
    for c in CORPORA:
        lines = read_corpus(c).split("\n")
        out += lines[::every]
    return out


@needs_shared
@pytest.mark.parametrize("name", BPE_NAMES + WP_NAMES)
def test_explain_ids_equal_encode(name):
    tok = fstok.get_encoding(name)
    bad = []
    for ln in _sample():
        want = tok.encode(ln, allowed_special="all")
        got = tok.explain(ln, allowed_special="all").ids
        if got != want:
            bad.append((ln[:50], got[:10], want[:10]))
    assert not bad, bad[:3]


def test_explain_bpe_records_merges_and_boundaries():
    tok = fstok.get_encoding("o200k_base")
    e = tok.explain("Hello   world naïve")
    assert e.ids == tok.encode("Hello   world naïve")
    texts = [p.text for p in e.pieces]
    assert texts == ["Hello", "  ", " world", " naïve"]
    # the run of spaces ends one byte before the next word: the look-ahead gives a byte back
    assert "look-ahead of 1 byte" in e.pieces[1].boundary
    merges = [s for s in e.pieces[3].steps if s.what == "merge"]
    ranks = [int(s.detail.split()[1].rstrip(":")) for s in merges]
    assert ranks == sorted(ranks) and len(merges) >= 2  # merges apply lowest rank first
    assert "merge" in str(e) and json.loads(json.dumps(e.to_dict()))["ids"] == e.ids


def test_explain_bpe_special_tokens_like_encode():
    tok = fstok.get_encoding("cl100k_base")
    with pytest.raises(ValueError):
        tok.explain("a <|endoftext|> b")
    e = tok.explain("a <|endoftext|> b", allowed_special="all")
    assert e.ids == tok.encode("a <|endoftext|> b", allowed_special="all")
    assert [p.special for p in e.pieces].count(True) == 1


def test_explain_wordpiece_trie_path_failures_and_normalization():
    tok = fstok.get_encoding("bert-base-uncased")
    e = tok.explain("Unaffable HÉLLO")
    assert e.ids == tok.encode("Unaffable HÉLLO")
    word = e.pieces[0]
    assert word.text == "unaffable" and word.tokens == ["una", "##ffa", "##ble"]
    fails = [s for s in word.steps if s.what in ("fail", "end-fail")]
    # each emitted token comes from a failure pop, in order
    assert [t for s in fails for t in s.tokens] == word.ids
    assert any("r#" in s.detail for s in fails)
    notes = {c.index: c for c in e.normalization}
    assert notes[0].action == "map" and notes[0].output == "u"
    assert notes[11].output == "e"  # É lowercased and accent stripped
    assert (word.start, word.end) == (0, 9)


def test_explain_wordpiece_unknown_and_long_words():
    tok = fstok.get_encoding("bert-base-cased")
    long = "x" * 101
    e = tok.explain(long)
    assert e.ids == tok.encode(long) == [tok.unk_id]
    assert e.pieces[0].steps[0].what == "unk"


def test_explain_pattern_matches_spans():
    from fstok.pretokenize import get_pattern

    cp = get_pattern("cl100k_base")
    text = "Hello  world's 12345\n\n  x"
    e = fi.explain(cp, text)
    assert [(p.start, p.end) for p in e.pieces] == cp.spans(text)


def test_graph_wordpiece_around_suffix_token():
    tok = fstok.get_encoding("bert-base-uncased")
    g = tok.graph("##ing", depth=1)
    center = [v for v, d in g.nodes(data=True) if d["center"]]
    assert len(center) == 1 and g.nodes[center[0]]["token"] == tok.token_to_id("##ing")
    roots = {d["root"] for _, d in g.nodes(data=True) if d["root"]}
    assert roots == {"r", "r#"}
    kinds = {d["kind"] for _, _, d in g.edges(data=True)}
    assert kinds == {"trie", "fail"}
    # depth 1: every child of the centre is present, and nothing deeper below it
    kids = [v for _, v, d in g.out_edges(center[0], data=True) if d["kind"] == "trie"]
    assert kids and all(g.nodes[k]["string"].startswith("##ing") and len(g.nodes[k]["string"]) == 6 for k in kids)
    with pytest.raises(ValueError, match="not a path"):
        tok.graph("qqqqzzzz")


def test_graph_bpe_merge_neighbourhood():
    tok = fstok.get_encoding("o200k_base")
    g = tok.graph(" token", depth=1)
    c = [v for v, d in g.nodes(data=True) if d["center"]][0]
    parts = sorted((d["kind"], g.nodes[v]["label"]) for _, v, d in g.out_edges(c, data=True))
    assert len(parts) == 2
    assert parts[0][1] + parts[1][1] == " token" or parts[1][1] + parts[0][1] == " token"
    left = [g.nodes[v]["label"] for _, v, d in g.out_edges(c, data=True) if d["kind"] == "left"][0]
    right = [g.nodes[v]["label"] for _, v, d in g.out_edges(c, data=True) if d["kind"] == "right"][0]
    assert left + right == " token"
    for u, _, _ in g.in_edges(c, data=True):  # tokens merged from " token" contain it
        assert " token" in g.nodes[u]["label"]
    g0 = tok.graph(" token", depth=0)
    assert g0.number_of_nodes() == 1


def test_graph_dfa_state_neighbourhood():
    tok = fstok.get_encoding("cl100k_base")
    g = tok.graph(depth=1)  # the pre-tokenizer DFA around its start state
    start = [v for v, d in g.nodes(data=True) if d["center"]][0]
    assert all(u == start or v == start or True for u, v in g.edges())
    assert 1 < g.number_of_nodes() <= 400
    with pytest.raises(ValueError, match="out of range"):
        tok.graph(state=10**9)


def test_write_formats(tmp_path):
    tok = fstok.get_encoding("bert-base-uncased")
    g = tok.graph("##ing", depth=1)
    for ext in ("png", "svg", "dot", "graphml"):
        p = tmp_path / f"g.{ext}"
        fi.write(g, str(p))
        assert p.stat().st_size > 100
    dot = (tmp_path / "g.dot").read_text()
    assert "\\\\n" not in dot  # line breaks in labels are DOT's \n, never an escaped backslash
    assert isinstance(nx.read_graphml(str(tmp_path / "g.graphml")), nx.Graph)
    with pytest.raises(ValueError, match="unknown output format"):
        fi.write(g, str(tmp_path / "g.xyz"))


@pytest.mark.parametrize("name", ["bert-base-uncased", "o200k_base"])
def test_summary_frame(name):
    tok = fstok.get_encoding(name)
    s = fi.summary(tok)
    assert s["kind"] in ("wordpiece", "bpe") and s["vocab_size"] == (tok.vocab_size if s["kind"] == "wordpiece" else tok.n_vocab)
    stages = [st["stage"] for st in s["pipeline"]]
    order = ["normalizer", "pre_tokenizer", "model", "post_processor", "decoder"]
    assert stages == sorted(stages, key=order.index) and "model" in stages
    assert sum(s["sections"].values()) <= s["artifact_bytes"]
    assert len(s["source_sha256"]) == 64
    json.dumps(s)
    assert s["kind"] in fi.format_text(s)


def test_summary_pattern():
    from fstok.pretokenize import get_pattern

    s = fi.summary(get_pattern("o200k_base"))
    assert s["kind"] == "regex_dfa" and s["pipeline"][0]["dfa_levels"][0]["states"] > 100


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "fstok", *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ), **kw)


def test_cli_inspect_and_explain(tmp_path):
    r = _cli("inspect", "o200k_base", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["model"]["merges"] > 100_000 and s["special_tokens"] == 2
    png, dot = tmp_path / "ing.png", tmp_path / "ing.dot"
    r = _cli("inspect", "bert-base-uncased", "--around", "##ing", "--depth", "1", "--png", str(png), "--dot", str(dot))
    assert r.returncode == 0, r.stderr
    assert png.stat().st_size > 1000 and "r#" in dot.read_text()
    assert "wrote" in r.stderr and "nodes" in r.stderr
    r = _cli("explain", "-m", "bert-base-uncased", "Unaffable!", "--json")
    assert r.returncode == 0, r.stderr
    tok = fstok.get_encoding("bert-base-uncased")
    assert json.loads(r.stdout)["ids"] == tok.encode("Unaffable!")
    r = _cli("inspect", "no-such-thing")
    assert r.returncode == 2 and "no such file" in r.stderr


SPM_MODELS = ["models/spm-bpe/llama-2/tokenizer.model", "models/unigram/maxtext-default-c4/tokenizer.default",
              "models/spm-bpe/gemma/tokenizer.gemma"]


@needs_shared
@pytest.mark.parametrize("rel", SPM_MODELS)
def test_explain_sentencepiece_ids_equal_encode(rel):
    from conftest import VOCAB

    tok = fstok.compile(os.path.join(VOCAB, rel))
    bad = []
    for ln in _sample(1500):
        if fi.explain(tok, ln).ids != tok.encode(ln):
            bad.append(ln[:50])
    assert not bad, bad[:3]
    e = fi.explain(tok, "Hello  world")
    assert e.kind.startswith("sentencepiece-") and "normalized text" in e.notes[0]
    assert all(p.steps for p in e.pieces)


@needs_shared
def test_summary_sentencepiece_kinds():
    from conftest import VOCAB

    s = fi.summary(fstok.compile(os.path.join(VOCAB, "models/spm-bpe/llama-2/tokenizer.model")))
    assert s["kind"] == "sentencepiece-bpe" and s["vocab_size"] == 32000
    assert [st["stage"] for st in s["pipeline"]] == ["normalizer", "model"]
    assert s["pipeline"][1]["options"]["byte_fallback"] is True and s["model"]["byte_pieces"] == 256
    assert "SentencePiece identity" in fi.format_text(s)


PIPELINE_MODELS = ["models/bytelevel-bpe/roberta-base/tokenizer.json", "models/charbpe/clip-vit-base-patch32/tokenizer.json",
                   "models/tekken/mistral-nemo/tekken_240718.json"]


@needs_shared
@pytest.mark.parametrize("rel", PIPELINE_MODELS)
def test_explain_and_summary_other_tokenizer_json_kinds(rel):
    from conftest import VOCAB

    tok = fstok.compile(os.path.join(VOCAB, rel))
    for ln in _sample(3000):
        for add in (False, True):
            assert fi.explain(tok, ln, add_special_tokens=add).ids == tok.encode(ln, add_special_tokens=add), ln[:50]
    s = fi.summary(tok)
    assert "model" in [st["stage"] for st in s["pipeline"]] and s["vocab_size"] > 1000
    fi.format_text(s)
