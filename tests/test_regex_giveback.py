"""Give-back boundary states (fstok.compile.regex_dfa.add_boundary_states): the bulk DFA walk moves
from one piece to the next without dying and re-matching when the piece ended up to 3 bytes before
the DFA could tell (an Indic letter followed by a combining mark under r50k / cl100k)."""
import random

import numpy as np
import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

import fstok
from fstok import artifact as A
from fstok.compile import regex_dfa as R
from fstok.pretokenize import (CL100K_PAT, O200K_PAT, R50K_PAT, CompiledPattern, DFATables, compile_tables,
                               dfa_sections)

PATS = {"r50k": R50K_PAT, "cl100k": CL100K_PAT, "o200k": O200K_PAT}
# letters and combining marks of scripts where a piece ends before a 3-byte mark, plus ASCII around them
INDIC = "कखगमरसािीुेों्ক্ষাতমিতামিழ்தமிழ்ไทยภาษา"
ALPHA = list(INDIC) + list("ab Z1'\n\t.,") + ["\u0301", "\u00e9", "\u3000", "\u4e2d", "\U0001F600"]


def _ref_ends(pat: str, text: str) -> list[int]:
    data = text.encode()
    cb = [0]
    for ch in text:
        cb.append(cb[-1] + len(ch.encode()))
    assert cb[-1] == len(data)
    return [cb[m.end()] for m in regex.finditer(pat, text)]


def _texts(seed: int, n: int, length: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHA) for _ in range(rng.randint(0, length))) for _ in range(n)]


@pytest.mark.parametrize("name", ["r50k", "cl100k"])
def test_indic_marks_need_no_rematch(name):
    t = compile_tables(PATS[name])
    assert t.n_giveback > 0
    text = "हिन्दी भाषा में लिखा गया पाठ। தமிழ் மொழி ভাষা ಕನ್ನಡ " * 20
    ends, deaths = t.bulk_ends(text.encode())
    assert ends == _ref_ends(PATS[name], text)
    assert deaths == 0
    # the same tables without give-back states die on the marks (what this construction removes)
    bd0, k0, g0 = R.add_boundary_states(R.compile_dfa(_nfa(PATS[name])), 0)
    t0 = DFATables.from_byte_dfa(bd0, k0, PATS[name], "rust-regex", t.unicode, g0)
    ends0, deaths0 = t0.bulk_ends(text.encode())
    assert ends0 == ends and g0 == 0 and deaths0 > 100


def _nfa(pat):
    from fstok.compile.regex_nfa import build_nfa
    from fstok.compile.regex_parse import parse

    return build_nfa(parse(pat, "rust-regex"))


@pytest.mark.parametrize("name", ["r50k", "cl100k", "o200k"])
def test_c_bulk_walks_equal_oracle_and_regex(name):
    cp = fstok.pretokenize.get_pattern(f"{name}_base")
    t = cp.levels[0]
    sp = cp.spanner
    for text in _texts(hash(name) & 0xFFFF, 150, 40):
        data = text.encode()
        ref = _ref_ends(PATS[name], text)
        assert t.bulk_ends(data)[0] == ref, text
        assert [int(e) for s_, e in cp.byte_spans(data).tolist()] == ref, text  # fstok_dfa_find_all
        for window in (1, 2, 3, 5, 64):  # fstok_dfa_find_ends, window edges everywhere
            got = np.frombuffer(sp._byte_spans_ends(data, window), dtype=np.uint64).reshape(-1, 2)[:, 1].tolist()
            assert got == ref, (window, text)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(ALPHA), max_size=30))
def test_hypothesis_cl100k_spans(text):
    cp = fstok.pretokenize.get_pattern("cl100k_base")
    assert cp.spans(text) == [m.span() for m in regex.finditer(CL100K_PAT, text)]
    data = text.encode()
    got = np.frombuffer(cp.spanner._byte_spans_ends(data, 4), dtype=np.uint64).reshape(-1, 2)[:, 1].tolist()
    assert got == _ref_ends(CL100K_PAT, text)


def test_random_patterns_with_marks():
    """Random small patterns over letters / marks / spaces: C find_all and find_ends vs regex."""
    rng = random.Random(11)
    atoms = [r"\p{L}", r"\p{M}", r"\p{L}+", r"[^\s\p{L}]", r" ?\p{L}+", r"\s", r"\s+(?!\S)", "'s", r"\p{Mn}\p{L}"]
    alpha = list("कमािं्ab ' \u0301é")
    checked = 0
    while checked < 25:
        pat = "|".join(rng.choice(atoms) for _ in range(rng.randint(1, 4)))
        try:
            t = compile_tables(pat)
        except Exception:  # noqa: BLE001 - nullable etc.: refused with an error
            continue
        cp = CompiledPattern([t], "find")
        for _ in range(30):
            text = "".join(rng.choice(alpha) for _ in range(rng.randint(0, 14)))
            data = text.encode()
            ref = [m.span() for m in regex.finditer(pat, text)]
            assert cp.spans(text) == ref, (pat, text)
            if ref and ref[0][0] == 0 and all(a[1] == b[0] for a, b in zip(ref, ref[1:])):  # tiling prefix
                got = np.frombuffer(cp.spanner._byte_spans_ends(data, 3), dtype=np.uint64).reshape(-1, 2)
                refb = cp.byte_spans(data).tolist()
                assert got.tolist()[:len(refb)] == refb[:len(got)], (pat, text)
        checked += 1


def test_crafted_giveback_codes_raise():
    cp = CompiledPattern([compile_tables(CL100K_PAT)], "find")
    art = A.parse_artifact(cp.to_bytes())
    t = cp.levels[0]

    def rewrite(**sec):
        secs = {n: art.array(n).copy() for n in art.sections if n != "meta"}
        secs.update(sec)
        return A.write_artifact(None, art.kind, art.meta, secs, art.unicode_version, art.source_hash)

    a = t.accept.copy()
    a[t.n_boundary + 5] |= 0x10  # a give-back on an ordinary state
    with pytest.raises(A.ArtifactError, match="accept"):
        fstok.loads(rewrite(**{"dfa.0.accept": a}))
    info = t.info().copy()
    info[7] = t.n_boundary + 1  # more give-back states than boundary states
    with pytest.raises(A.ArtifactError):
        fstok.loads(rewrite(**{"dfa.0.info": info}))
    info = t.info().copy()
    info[7] = t.n_giveback - 1  # the last give-back state is not counted
    with pytest.raises(A.ArtifactError, match="accept"):
        fstok.loads(rewrite(**{"dfa.0.info": info}))
    # the C check refuses the same tables on its own
    from fstok.runtime import _dfa

    a = t.accept.copy()
    a[t.start >> t.shift] |= 0x20
    with pytest.raises(ValueError, match="give-back"):
        _dfa.DFA(t.trans, t.classes, a, t.n_states, t.shift, t.start, t.eoi, t.n_boundary)


def test_layout_1_artifacts_still_load():
    """Artifacts written before give-back states (layout 1: 7 info words, no high nibbles) load and run."""
    bd, k, g = R.add_boundary_states(R.compile_dfa(_nfa(R50K_PAT)), 0)
    t = DFATables.from_byte_dfa(bd, k, R50K_PAT, "rust-regex", "16.0.0", g)
    secs = dfa_sections(CompiledPattern([t], "find"))
    import json

    src = json.loads(secs["dfa.source"])
    src["version"] = 1
    secs["dfa.source"] = json.dumps(src).encode()
    secs["dfa.0.info"] = secs["dfa.0.info"][:7].copy()
    secs["dfa.0.info"][0] = 1
    data = A.write_artifact(None, A.KIND_REGEX_DFA, {"prefix": "dfa."}, secs, "16.0.0", b"\0" * 32)
    cp = fstok.loads(data)
    text = "हिन्दी it's  x\n"
    assert cp.levels[0].n_giveback == 0
    assert cp.spans(text) == [m.span() for m in regex.finditer(R50K_PAT, text)]


@pytest.mark.parametrize("name", ["r50k", "cl100k", "o200k"])
def test_lookahead_whitespace_needs_few_rematches(name):
    """`\\s+(?!\\S)` gives back the last whitespace character when a word follows ("    return"): the
    state after it knows where the next piece starts (the start state's run over that character), so
    the walk goes on through a give-back boundary instead of dying."""
    pat = PATS[name]
    text = "def f(x):\n    return  x  +  1\n\tif a:\n\t\t  b\u3000\u3000c  # \u00a0 note\n" * 30
    t = compile_tables(pat)
    ends, deaths = t.bulk_ends(text.encode())
    assert ends == _ref_ends(pat, text)
    bd0, k0, g0 = R.add_boundary_states(R.compile_dfa(_nfa(pat)), 0)
    t0 = DFATables.from_byte_dfa(bd0, k0, pat, "rust-regex", t.unicode, g0)
    ends0, deaths0 = t0.bulk_ends(text.encode())
    assert ends0 == ends and deaths0 >= 8 * 30
    # left: r50k's "\u3000\u3000c" (the given-back space is a piece of its own: two pieces end on "c");
    # cl100k / o200k's "\n" + indentation (the newline piece ends an unbounded number of bytes back)
    assert deaths <= (2 * 30 if name == "r50k" else 3 * 30), deaths
