"""The documentation's links and file references resolve in the repository.

Every relative Markdown link in README.md, CHANGELOG.md and docs/ must name an existing file (and an existing
heading when it has a #anchor); every repository path quoted in backticks in the user pages (`fstok/...`,
`tools/...`, `tests/...`, `compiled/...`, `docs/...`) must exist. Pages speak to users in the present tense, so
they carry no development history (the words the check looks for are listed in HISTORY).
"""
from __future__ import annotations

import glob
import itertools
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted({os.path.relpath(p, ROOT) for p in
                [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "CHANGELOG.md")]
                + glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
                if os.path.exists(p)})
HISTORY = re.compile(r"\bstop \d+|\(lead\)|\(helper\)|\bcommit [0-9a-f]{7,}", re.I)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:fstok|tools|tests|compiled|docs)/[^`\s<>*]*)`")


def _anchors(path: str) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    out = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                in_code = not in_code
            elif not in_code and line.startswith("#"):
                title = line.lstrip("#").strip().lower()
                out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


def _expand(path: str) -> list[str]:
    """`a/{b,c}.py` -> [a/b.py, a/c.py]."""
    parts = re.split(r"\{([^}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _text(page: str) -> str:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        return f.read()


@pytest.mark.parametrize("page", PAGES)
def test_links_resolve(page):
    bad = []
    for target in LINK.findall(_text(page)):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(ROOT, os.path.dirname(page), file)) if file else os.path.join(ROOT, page)
        if not os.path.exists(dest):
            bad.append(f"{target}: no such file")
        elif anchor and dest.endswith(".md") and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading #{anchor}")
    assert not bad, f"{page}: broken links: {bad}"


@pytest.mark.parametrize("page", PAGES)
def test_repository_paths_exist(page):
    missing = [p for quoted in PATH.findall(_text(page)) for p in _expand(quoted.rstrip(".,:;"))
               if not os.path.exists(os.path.join(ROOT, p.split("::")[0]))]
    assert not missing, f"{page} names paths that do not exist: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_no_development_history(page):
    hits = [m.group(0) for m in HISTORY.finditer(_text(page))]
    assert not hits, f"{page} narrates development history: {hits}"


def test_cli_section_of_the_guide_is_current():
    """docs/guide.md shows the `--help` of every subcommand; after a CLI change run tools/gen_cli_docs.py."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_cli_docs", os.path.join(ROOT, "tools", "gen_cli_docs.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = _text(os.path.join("docs", "guide.md"))
    assert gen.render(text) == text, "docs/guide.md: the CLI section is out of date; run python tools/gen_cli_docs.py"
