"""Every code example in README.md runs from a fresh checkout, and every value it shows in a comment is true.

Examples run in document order. Python blocks run as scripts; a line `expr  # LITERAL ...` or `name = expr  # LITERAL ...` whose comment starts
with a Python literal is checked against that literal. Shell lines starting with `fstok ` run as
`python -m fstok ...`. Both run in a scratch folder holding README.md and links to `compiled/` and `fstok/`,
so the relative paths of the README resolve as they do in a clone and nothing is written into the checkout.
"""
from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")


def blocks(lang: str) -> list[tuple[int, str]]:
    """(first line number, code) of every ```lang fenced block."""
    out, cur, start = [], None, 0
    with open(README, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if cur is None and line.rstrip() == f"```{lang}":
                cur, start = [], i + 1
            elif cur is not None and line.rstrip() == "```":
                out.append((start, "".join(cur)))
                cur = None
            elif cur is not None:
                cur.append(line)
    return out


def _literal(comment: str):
    """The longest prefix of `comment` (cut at a space) that is a Python literal, or raise ValueError."""
    cuts = [i for i, ch in enumerate(comment) if ch == " "] + [len(comment)]
    for i in reversed(cuts):
        s = comment[:i].rstrip(",:;")
        try:
            return ast.literal_eval(s) if s else None
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
    raise ValueError(comment)


def instrument(code: str, first_line: int) -> str:
    """Append a check after each line whose comment begins with a literal."""
    out = ["def __check(got, want, where):\n",
           "    assert got == want, f'README.md line {where}: got {got!r}, the README says {want!r}'\n"]
    for k, line in enumerate(code.splitlines(keepends=True)):
        m = re.match(r"^(?P<stmt>[^#]*?\S)\s{2,}#\s?(?P<comment>.*)$", line.rstrip("\n"))
        if m is None or m["stmt"].count('"') % 2 or m["stmt"].count("'") % 2:
            out.append(line)
            continue
        try:
            want = _literal(m["comment"])
            tree = ast.parse(m["stmt"])
        except (ValueError, SyntaxError):
            out.append(line)
            continue
        node = tree.body[0] if len(tree.body) == 1 else None
        where = first_line + k
        if isinstance(node, ast.Expr):
            out.append(f"__check({m['stmt']}, {want!r}, {where})\n")
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out.append(f"{m['stmt']}; __check({node.targets[0].id}, {want!r}, {where})\n")
        else:
            out.append(line)
    return "".join(out)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    d = tmp_path_factory.mktemp("readme")
    with open(README, encoding="utf-8") as f, open(d / "README.md", "w", encoding="utf-8") as g:
        g.write(f.read())
    for name in ("compiled", "fstok"):
        os.symlink(os.path.join(ROOT, name), d / name)
    return d


def _run(args, cwd, what):
    env = dict(os.environ)
    r = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{what} failed (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    return r


def test_readme_has_examples():
    assert len(blocks("python")) >= 5 and len(blocks("bash")) >= 3
    assert "../shared" not in open(README, encoding="utf-8").read(), "README paths must work from a clone"


def _missing_imports(code: str) -> list[str]:
    """Top-level modules a block imports that are not installed (a block that makes its own example
    files with a third-party package is skipped without it)."""
    import importlib.util

    names = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names if importlib.util.find_spec(n) is None)


def _steps():
    """README.md's examples in document order: ("python", line, code) blocks and ("shell", line, command) lines
    (a later example may use what an earlier one wrote, as a reader running them in order would)."""
    steps = [("python", start, code) for start, code in blocks("python")]
    for start, code in blocks("bash"):
        for k, line in enumerate(code.splitlines()):
            if line.startswith("fstok "):
                steps.append(("shell", start + k, line.split("  #")[0].strip()))
    return sorted(steps, key=lambda s: s[1])


def _run_python(scratch, tmp_path, start, code):
    missing = _missing_imports(code)
    if missing:
        pytest.skip(f"README.md block at line {start} needs {', '.join(missing)}")
    script = tmp_path / f"readme_{start}.py"
    script.write_text(instrument(code, start), encoding="utf-8")
    _run([sys.executable, str(script)], scratch, f"README.md python block at line {start}")


def _run_shell(scratch, lineno, line):
    for part in line.split("&&"):
        words = shlex.split(part.split(">")[0])
        assert words[0] == "fstok"
        r = _run([sys.executable, "-m", "fstok", *words[1:]], scratch, f"README.md line {lineno}: {part.strip()}")
        if ">" in part:
            with open(scratch / part.split(">")[1].strip(), "w", encoding="utf-8") as f:
                f.write(r.stdout)


@pytest.mark.parametrize("kind,lineno,code", _steps(), ids=[f"{k}-line{n}" for k, n, _ in _steps()])
def test_example(scratch, tmp_path, kind, lineno, code):
    if kind == "python":
        _run_python(scratch, tmp_path, lineno, code)
    else:
        _run_shell(scratch, lineno, code)
