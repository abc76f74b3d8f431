"""DFA construction, the artifact round trip and its validation, the C spanner vs the Python executor,
and inspection exports."""
import json
import os
import random

import networkx as nx
import numpy as np
import pytest
import regex

import fstok
from fstok import artifact as A
from fstok.compile.regex_dfa import DFASizeError, minimize
from fstok.inspect.dfa import find_dfa_prefixes, summary, to_dot, to_networkx
from fstok.pretokenize import (CL100K_PAT, O200K_PAT, R50K_PAT, CompiledPattern, DFATables, compile_tables,
                               dfa_sections, get_pattern)


def compiled(pattern, dialect="rust-regex"):
    return CompiledPattern([compile_tables(pattern, dialect)], "find")


def ref(pattern, text):
    return [m.span() for m in regex.finditer(pattern, text)]


# ------------------------------------------------------------------------------ semantics
@pytest.mark.parametrize("pattern,text", [
    ("a|ab", "abab"),                      # leftmost-first, not longest
    ("ab|a", "abab"),
    ("a+?b|a", "aaab aa"),                 # lazy
    (r"\s+(?!\S)|\s+", "a \u3000\u3000x  \t\ny  "),   # lookahead gives back a 3-byte character
    (r"\s+(?!\S)|\s", " \u2028\u2028\U0001F600 \u00a0"),
    (r"\w+(?=\s)", "ab cd ef"),             # positive lookahead, not at EOF
    (r"[^\s]+(?!\S)", "ab cd"),
    (r"x*y|x", "xxxz xxy"),                # needs backtracking to an earlier match
    (r"'(?:s|t|ll)| ?\p{L}+|\s+", "it's 'll 'x"),
])
def test_leftmost_first_semantics(pattern, text):
    assert compiled(pattern).spans(text) == ref(pattern, text)


def test_lookahead_accept_codes_give_back_whole_characters():
    t = compile_tables(r"\s+(?!\S)|\s+")
    # give-back of 1, 2 and 3 bytes: ASCII, NEL/NBSP and U+2000.. / U+3000 spaces (no 4-byte spaces exist)
    assert {1, 2, 3, 4} <= set(np.unique(t.accept).tolist())
    # the pattern does not match "a": find mode skips it
    assert compiled(r"\s+(?!\S)|\s+").pieces("\u3000\u3000\u3000a") == ["\u3000\u3000", "\u3000"]


def test_minimized_and_byte_classes():
    t = compile_tables(O200K_PAT)
    assert t.n_classes - 1 < 256 and t.eoi == t.n_classes - 1
    assert t.classes[ord("a")] == t.classes[ord("z")] != t.classes[ord("A")]  # a-z vs A-Z (o200k's case classes)
    # minimizing again changes nothing
    from fstok.compile.regex_dfa import ByteDFA

    M = t.matrix()
    bd = ByteDFA(M.astype(np.uint32), t.classes, t.accept, t.start >> t.shift)
    again = minimize(np.concatenate([M[:, : t.n_classes - 1][:, t.classes], M[:, -1:]], axis=1), t.accept.astype(np.int64),
                     t.start >> t.shift)
    # (the g = 0 boundary states are copies of their targets; give-back ones differ in their accept byte)
    assert again.n_states == bd.n_states - (t.n_boundary - t.n_giveback)
    # dead state 0 is absorbing, the start state is just after the boundary states
    assert not M[0].any() and t.start >> t.shift == t.n_boundary + 1


def test_size_limits_raise_clear_errors():
    with pytest.raises(DFASizeError, match="exceeds 50 states"):
        compile_tables(O200K_PAT, max_byte_states=50)
    with pytest.raises(DFASizeError, match="determinization"):
        compile_tables(r"(?:a|b)*a(?:a|b){12}c", max_cell_states=100)
    with pytest.raises(DFASizeError, match="bytes"):
        compile_tables(CL100K_PAT, max_table_bytes=10_000)


# ---------------------------------------------------------------- C vs the Python executor
def _random_texts(alphabet, n, maxlen, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, maxlen))) for _ in range(n)]


ALPHA = list("aAzZ09 '\t\n\r/.-_sStTlLvVeEdDmM") + ["\u00e9", "\u00c9", "\u01c5", "\u02b0", "\u0301", "\u0663", "\u00a0",
                                                   "\u2028", "\u3000", "\u4e00", "\u3042", "\U0001F600", "\U00010400",
                                                   "\ufb01", "\u2160", "\u00bd", "\x85", "\x00", "\u200b"]


@pytest.mark.parametrize("name", ["r50k_base", "cl100k_base", "o200k_base", "hf-llama3", "qwen2"])
def test_c_spanner_equals_python_executor_and_regex(name):
    cp = get_pattern(name)
    pat = cp.levels[0].pattern
    for t in _random_texts(ALPHA, 300, 25, hash(name) & 0xFFFF):
        c = cp.spans(t)
        assert c == cp.reference_spans(t), t
        if cp.mode == "find":
            assert c == ref(pat, t), t
        b = t.encode("utf-8")
        bs = cp.byte_spans(b)
        assert [tuple(x) for x in bs.tolist()] == cp._reference_byte_spans(b)
        assert cp.count(t) == len(c)
        for pos in range(len(b) + 1):
            assert cp.spanner.match(b, pos) == cp.levels[0].match(b, pos)


def test_gaps_find_vs_split_modes():
    # find mode skips text no match covers (tiktoken); split mode keeps the gaps (HF Isolated)
    f = CompiledPattern.compile(r"\d+")
    s = CompiledPattern.compile(r"\d+", mode="split")
    text = "ab12c345\u00e9"
    assert f.spans(text) == [(2, 4), (5, 8)]
    assert s.spans(text) == [(0, 2), (2, 4), (4, 5), (5, 8), (8, 9)]
    assert s.reference_spans(text) == s.spans(text)
    assert f.spans("") == [] and s.spans("") == []


def test_pipeline_levels_see_each_piece_as_a_text():
    # level 2's lookahead sees the end of each level-1 piece as the end of the text
    cp = CompiledPattern.pipeline([(r"\p{N}{1,3}", "oniguruma"), (r"\s+(?!\S)|\s+|\S+", "oniguruma")])
    text = "ab  12345  cd"
    assert cp.spans(text) == cp.reference_spans(text)
    from tokenizers import Regex, pre_tokenizers

    hf = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), "isolated"),
                                  pre_tokenizers.Split(Regex(r"\s+(?!\S)|\s+|\S+"), "isolated")])
    assert cp.spans(text) == [o for _, o in hf.pre_tokenize_str(text)]


# ------------------------------------------------------------------------------ artifact
def test_artifact_round_trip(tmp_path):
    cp = get_pattern("cl100k_base")
    p = tmp_path / "cl100k.fst"
    cp.save(p)
    loaded = fstok.load(p)
    assert isinstance(loaded, CompiledPattern) and loaded.name == "cl100k_base" and loaded.mode == "find"
    art = A.read_artifact(p)
    assert art.kind == A.KIND_REGEX_DFA and art.unicode_version == "16.0.0"
    assert json.loads(art.raw("dfa.source"))["levels"][0]["pattern"] == CL100K_PAT
    text = "Hello world, it's   1234567 tests!\n\n  \u3000x"
    assert loaded.spans(text) == cp.spans(text) == ref(CL100K_PAT, text)
    again = fstok.loads(cp.to_bytes())
    assert again.spans(text) == cp.spans(text)
    # the loaded arrays are zero-copy views of the mmap
    assert not loaded.levels[0].trans.flags.owndata


def test_embedded_sections_with_prefix():
    cp = get_pattern("hf-llama3")
    secs = dfa_sections(cp, prefix="pretok.")
    assert all(k.startswith("pretok.") for k in secs) and "pretok.0.trans" in secs
    data = A.write_artifact(None, A.KIND_BPE, {"x": 1}, {**secs, "ranks": np.arange(5, dtype=np.uint32)}, "16.0.0",
                            b"\0" * 32)
    art = A.parse_artifact(data)
    back = CompiledPattern.from_sections(art, prefix="pretok.")
    assert back.mode == "split" and back.spans("it's 12345  ok") == cp.spans("it's 12345  ok")
    assert find_dfa_prefixes(art) == ["pretok."]


def _rewrite(art, sections, meta=None):
    secs = {n: art.array(n).copy() for n in art.sections if n != "meta"}
    secs.update(sections)
    return A.write_artifact(None, art.kind, meta or art.meta, secs, art.unicode_version, art.source_hash)


@pytest.mark.parametrize("damage", ["target", "misaligned", "dead", "classes", "accept", "start", "info", "source",
                                    "truncated_trans", "boundary"])
def test_crafted_artifacts_raise_not_crash(damage):
    cp = compiled(r"\p{L}+|\s+(?!\S)|\s+")
    art = A.parse_artifact(cp.to_bytes())
    t = cp.levels[0]
    info = t.info().copy()
    trans = t.trans.copy()
    sec = {}
    if damage == "target":
        trans[t.start + 3] = np.uint32(t.n_states << t.shift)
        sec["dfa.0.trans"] = trans
    elif damage == "misaligned":
        trans[t.start + 3] = np.uint32(t.start + 1)
        sec["dfa.0.trans"] = trans
    elif damage == "dead":
        trans[1] = np.uint32(t.start)
        sec["dfa.0.trans"] = trans
    elif damage == "classes":
        c = t.classes.copy()
        c[65] = t.n_classes + 3
        sec["dfa.0.classes"] = c
    elif damage == "accept":
        a = t.accept.copy()
        a[3] = 9
        sec["dfa.0.accept"] = a
    elif damage == "start":
        info[4] = 1
        sec["dfa.0.info"] = info
    elif damage == "info":
        info[3] = 30
        sec["dfa.0.info"] = info
    elif damage == "source":
        sec["dfa.source"] = b'{"version": 1, "mode": "find", "levels": []}'
    elif damage == "truncated_trans":
        sec["dfa.0.trans"] = trans[:-5]
    elif damage == "boundary":
        info[6] = t.n_states
        sec["dfa.0.info"] = info
    with pytest.raises(A.ArtifactError):
        fstok.loads(_rewrite(art, sec))


def test_corrupted_bytes_raise():
    data = bytearray(compiled(r"\w+").to_bytes())
    data[-10] ^= 0xFF
    with pytest.raises(A.ArtifactError, match="checksum"):
        fstok.loads(bytes(data))


def test_c_constructor_validates_too():
    from fstok.runtime import _dfa

    t = compile_tables(r"\w+")
    bad = t.trans.copy()
    bad[t.start] = np.uint32(0xFFFFFF00)
    with pytest.raises(ValueError, match="invalid DFA tables"):
        _dfa.DFA(bad, t.classes, t.accept, t.n_states, t.shift, t.start, t.eoi, t.n_boundary)
    with pytest.raises(ValueError):
        _dfa.DFA(t.trans[:-1], t.classes, t.accept, t.n_states, t.shift, t.start, t.eoi, t.n_boundary)
    with pytest.raises(TypeError):
        _dfa.Spanner([object()], 0)
    with pytest.raises(TypeError):
        _dfa.Spanner([_dfa.DFA.__new__(_dfa.DFA)], 0)  # never initialized
    with pytest.raises(RuntimeError, match="not initialized"):
        _dfa.Spanner.__new__(_dfa.Spanner).spans("x")


def test_disk_cache_is_used(tmp_path, monkeypatch):
    import fstok.pretokenize as P

    monkeypatch.setenv("FSTOK_CACHE_DIR", str(tmp_path))
    pat = r"\p{Lu}\p{Ll}+|\s+(?!\S)|x"
    P.clear_memory_cache()
    cp = P.get_pattern(pat)
    files = list((tmp_path / "regex").glob("*.fst"))
    assert len(files) == 1
    P.clear_memory_cache()
    calls = []
    monkeypatch.setattr(P, "compile_tables", lambda *a, **k: calls.append(a) or pytest.fail("recompiled"))
    again = P.get_pattern(pat)
    assert not calls and again.spans("Hello  x") == cp.spans("Hello  x")
    assert P.get_pattern(pat) is again  # memory cache
    # a damaged cache entry is rebuilt, not trusted
    files[0].write_bytes(b"garbage")
    P.clear_memory_cache()
    monkeypatch.undo()
    monkeypatch.setenv("FSTOK_CACHE_DIR", str(tmp_path))
    assert P.get_pattern(pat).spans("Hello  x") == cp.spans("Hello  x")
    P.clear_memory_cache()


# ------------------------------------------------------------------------------ inspect
def test_inspect_summary_and_graph_exports(tmp_path):
    cp = compiled(r"ab|a(?!c)|\s+")
    s = summary(cp)
    lv = s["levels"][0]
    assert lv["states"] == cp.levels[0].n_states and lv["accepting_states"] >= 2 and lv["lookahead_states"] >= 1
    assert lv["byte_classes"] == len(lv["byte_class_ranges"]) == cp.levels[0].n_classes - 1
    g = to_networkx(cp)
    assert g.number_of_nodes() == cp.levels[0].n_states
    kinds = nx.get_node_attributes(g, "kind")
    assert kinds[0] == "dead" and list(kinds.values()).count("start") == 1
    # a path a -> b from the start state, and an EOI edge somewhere (the (?!c) at the end of text)
    start = cp.levels[0].start >> cp.levels[0].shift
    labels = [d["bytes"] for _, _, d in g.out_edges(start, data=True)]
    assert any("61" in lab for lab in labels)
    assert any("EOI" in d["bytes"] for _, _, d in g.edges(data=True))
    p = tmp_path / "g.graphml"
    nx.write_graphml(g, p)
    assert nx.read_graphml(p).number_of_nodes() == g.number_of_nodes()
    dot = to_dot(g)
    assert dot.startswith("digraph") and "doublecircle" in dot


def test_cli_inspect(tmp_path, capsys):
    from fstok.cli import main

    p = tmp_path / "o.fst"
    get_pattern("r50k_base").save(p)
    rc = main(["inspect", str(p), "--json", "--graphml", str(tmp_path / "o.graphml"), "--dot", str(tmp_path / "o.dot")])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "regex_dfa" and out["pipeline"][0]["dfa_levels"][0]["pattern"] == R50K_PAT
    assert (tmp_path / "o.graphml").stat().st_size > 1000 and (tmp_path / "o.dot").read_text().startswith("digraph")


def test_dfatables_executor_directly():
    t = compile_tables(r"ab|a")
    assert isinstance(t, DFATables)
    assert t.match(b"abc", 0) == 2 and t.match(b"ac", 0) == 1 and t.match(b"c", 0) == -1
    assert t.next_span(b"xxab", 0) == (2, 4) and t.next_span(b"xx", 0) is None
    assert os.path.basename(__file__).startswith("test_regex")


# ------------------------------------------------------------------ random patterns (fuzz)
_ATOMS = ["a", "b", "c", " ", "[ab]", "[^a]", r"\s", r"\S", r"\d", r"\p{L}", r"\p{Lu}", "[a-c ]", ".", "\u00e9", "\u3000",
          r"\w"]


def _gen(rng, depth=0):
    r = rng.random()
    if depth > 3 or r < 0.35:
        return rng.choice(_ATOMS)
    if r < 0.55:
        return "".join(_gen(rng, depth + 1) for _ in range(rng.randint(2, 3)))
    if r < 0.7:
        return "(?:" + "|".join(_gen(rng, depth + 1) for _ in range(rng.randint(2, 3))) + ")"
    q = rng.choice(["*", "+", "?", "*?", "+?", "??", "{1,2}", "{2}", "{0,3}", "{1,}", "{1,2}?"])
    return "(?:" + _gen(rng, depth + 1) + ")" + q


def _random_pattern(rng):
    alts = [_gen(rng) for _ in range(rng.randint(1, 4))]
    if rng.random() < 0.4:
        i = rng.randrange(len(alts))
        alts[i] += rng.choice([r"(?!\S)", r"(?=\s)", "(?!a)", "$"])
    return "|".join(alts)


@pytest.mark.parametrize("dialect", ["rust-regex", "oniguruma"])
def test_random_patterns_vs_engines(dialect):
    """Random patterns (lazy/greedy/counted repeats, nesting, lookahead, $) on random strings: the
    regex module (with Rust's end-of-text $) for rust-regex, HF tokenizers' Oniguruma itself for oniguruma."""
    from tokenizers import Regex, pre_tokenizers

    from fstok.compile.regex_parse import RegexSyntaxError, RegexUnsupported

    rng = random.Random(7 if dialect == "rust-regex" else 8)
    alphabet = list("aabbc  \tA\u00e9\u3000Z1\n")
    checked = 0
    while checked < 20:
        pat = _random_pattern(rng)
        try:
            t = compile_tables(pat, dialect, max_byte_states=5000)
        except (RegexUnsupported, RegexSyntaxError):
            continue  # nullable patterns and the like: rejected with an error, never mis-compiled
        cp = CompiledPattern([t], "find" if dialect == "rust-regex" else "split")
        if dialect == "rust-regex":
            rx = regex.compile(pat.replace("$", r"\Z"))  # Python's $ also matches before a final \n
            ref_fn = lambda s: [m.span() for m in rx.finditer(s)]  # noqa: E731
        else:
            pt = pre_tokenizers.Split(Regex(pat), behavior="isolated")
            ref_fn = lambda s: [o for _, o in pt.pre_tokenize_str(s)]  # noqa: E731
        for _ in range(25):
            s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
            assert cp.spans(s) == ref_fn(s), (pat, s)
        checked += 1
