"""The differential tool tools/diff_hf.py: its comparison sees a difference in any one Encoding field, in
decode and in a transformers call (a tokenizer.json changed in one place is compiled on fstok's side and
must be reported, naming what differs), it runs clean on a sample, and `--out` / `--summary` shard and
resume a long run.  The sample over every file is tests/test_hf_families.py; the long run is
`python tools/diff_hf.py --files WORD --out DIR`."""
from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import VOCAB, needs_shared

pytestmark = needs_shared
tokenizers = pytest.importorskip("tokenizers")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))
import diff_hf  # noqa: E402

MINILM = os.path.join(VOCAB, "models", "wordpiece", "all-MiniLM-L6-v2", "tokenizer.json")
LINES = ["Hello world, how are you?", "The quick brown fox jumps over the lazy dog " * 8, "naïve café ﬁ",
         "x", "", "日本語のテキスト", "def f(x):  return x ** 2", "It's 1234567 and [SEP] too"] * 3


def _changed(tmp_path, change) -> str:
    with open(MINILM, encoding="utf-8") as f:
        obj = json.load(f)
    change(obj)
    p = tmp_path / "tokenizer.json"
    p.write_text(json.dumps(obj), encoding="utf-8")
    return str(p)


def _pair_type_id_zero(obj):
    for item in obj["post_processor"]["pair"]:
        next(iter(item.values()))["type_id"] = 0


def _no_cleanup(obj):
    obj["decoder"]["cleanup"] = False


def _lowercase_off(obj):
    obj["normalizer"]["lowercase"] = False


def test_sample_runs_clean():
    report: list[str] = []
    checks, bad = diff_hf.diff_file(MINILM, LINES, report.append, chunk=8, single_every=3)
    assert bad == 0, report
    # 6 settings x (single + pair) x 24 lines, the encode sample, decode and numpy rows
    assert checks > 6 * 2 * len(LINES)


@pytest.mark.parametrize("change, word", [(_pair_type_id_zero, "type_ids"), (_no_cleanup, "decode"),
                                          (_lowercase_off, "ids")])
def test_a_planted_difference_is_reported(tmp_path, change, word):
    report: list[str] = []
    checks, bad = diff_hf.diff_file(MINILM, LINES, report.append, chunk=8, ours_path=_changed(tmp_path, change))
    assert bad > 0
    assert any(word in r for r in report), report


def test_transformers_planted_difference_is_reported(tmp_path):
    pytest.importorskip("transformers")
    report: list[str] = []
    lines = LINES[:8]
    checks, bad = diff_hf.diff_transformers(MINILM, lines, report.append, chunk=8)
    assert checks > 8 and bad == 0, report
    checks, bad = diff_hf.diff_transformers(MINILM, lines, report.append, chunk=8,
                                            ours_path=_changed(tmp_path, _pair_type_id_zero))
    assert bad > 0 and any("call 0 pair=True" in r for r in report), report  # token_type_ids of pairs


def test_out_and_summary_resume(tmp_path, capsys):
    argv = ["--files", MINILM, "--max-lines", "2", "--parts", "tokenizers", "--out", str(tmp_path)]
    assert diff_hf.main(argv) == 0
    [res] = list(tmp_path.glob("*.tokenizers.json"))
    got = json.loads(res.read_text())
    assert got["differing"] == 0 and got["checks"] > 0 and got["lines"] == 10
    capsys.readouterr()
    assert diff_hf.main(argv) == 0  # resumes: the file's result is read, not recomputed
    assert "(from " in capsys.readouterr().out
    assert diff_hf.main(["--summary", "--out", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "all-MiniLM-L6-v2" in table and "| tokenizers |" in table


def test_corpora_split_a_run(tmp_path, capsys):
    """--corpora takes the lines of the named corpus files only, and its result is kept apart."""
    argv = ["--files", MINILM, "--max-lines", "3", "--corpora", "multilingual", "--settings", "none",
            "--parts", "tokenizers", "--out", str(tmp_path)]
    assert diff_hf.main(argv) == 0
    [res] = list(tmp_path.glob("*.tokenizers.none.multilingual.json"))
    got = json.loads(res.read_text())
    assert got["lines"] == 3 and got["corpora"] == ["multilingual"] and got["differing"] == 0
    assert diff_hf.main(["--summary", "--out", str(tmp_path)]) == 0
    assert "multilingual" in capsys.readouterr().out


def test_chunks_cover_every_line_and_bound_the_windows():
    lines = ["a b"] * 700 + ["x" * 20000] * 3 + ["c"] * 50
    got = diff_hf.spans(lines, 512)
    assert [k for k, _ in got] == [0] + [e for _, e in got[:-1]] and got[-1][1] == len(lines)
    for k, e in got:
        assert e - k <= 512
        cost = sum((1 + len(lines[i]) // diff_hf.WINDOW_CHARS) *
                   (1 + len(diff_hf.partner(lines, i)) // diff_hf.WINDOW_CHARS) for i in range(k, e))
        assert e - k == 1 or cost <= diff_hf.WINDOW_BUDGET


def test_a_pair_over_the_window_budget_is_checked_alone_under_truncation():
    lines = ["a b"] * 10 + ["x" * 2000] * 10
    big = [i for i in range(len(lines)) if diff_hf.pair_cost(lines, i) > diff_hf.WINDOW_BUDGET]
    assert big and len(big) < len(lines)  # some long lines meet a long partner
    idx, left = diff_hf.paired(lines, 0, len(lines), truncates=True)
    assert left == len(big) and not set(idx) & set(big) and len(idx) + left == len(lines)
    assert diff_hf.paired(lines, 0, len(lines), truncates=False) == (list(range(len(lines))), 0)
