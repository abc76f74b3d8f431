"""The layout's invariants (docs/architecture.md): imports run in one direction, and the runtime side
(loading an artifact and encoding) never imports the compiler, pynini, networkx or the `regex` module."""
import ast
import json
import os
import subprocess
import sys

import pytest

import fstok

PKG = os.path.dirname(os.path.abspath(fstok.__file__))
ROOT = os.path.dirname(PKG)
COMPILER_SIDE = ("fstok.compile", "fstok.reference", "fstok.train", "pynini", "networkx", "regex")


def _modules() -> dict[str, tuple[str, bool]]:
    out = {}
    for dirpath, _, files in os.walk(PKG):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                is_pkg = name.endswith(".__init__")
                out[name[: -len(".__init__")] if is_pkg else name] = (path, is_pkg)
    return out


def _targets(mod: str, is_pkg: bool, node: ast.AST, known) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = mod if is_pkg else mod.rpartition(".")[0]
    for _ in range(max(0, node.level - 1)):
        base = base.rpartition(".")[0]
    target = (base + "." + node.module if node.module else base) if node.level else node.module
    # `from pkg import sub` imports the submodule; `from mod import name` the module
    return [f"{target}.{a.name}" if f"{target}.{a.name}" in known else target for a in node.names]


def import_graph(module_level_only: bool = False) -> dict[str, dict[str, int]]:
    """fstok module -> {imported fstok module: line}, from every import statement (module level and inside
    functions; `if TYPE_CHECKING:` blocks are skipped: they never run)."""
    known = _modules()
    graph: dict[str, dict[str, int]] = {}

    for mod, (path, is_pkg) in known.items():
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read(), path)
        edges = graph.setdefault(mod, {})

        def walk(node: ast.AST, in_function: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.dump(child.test):
                    continue
                if isinstance(child, (ast.Import, ast.ImportFrom)) and not (module_level_only and in_function):
                    for t in _targets(mod, is_pkg, child, known):
                        if t in known and t != mod:
                            edges.setdefault(t, child.lineno)
                walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

        walk(tree, False)
    return graph


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _describe(graph, comp) -> str:
    return "; ".join(f"{a} -> {b} (line {graph[a][b]})" for a in comp for b in graph[a] if b in comp)


@pytest.mark.parametrize("module_level_only", [True, False], ids=["module-level", "all-imports"])
def test_no_import_cycles(module_level_only):
    graph = import_graph(module_level_only)
    cycles = _cycles(graph)
    assert not cycles, "import cycles: " + " | ".join(_describe(graph, c) for c in cycles)


def test_cycle_checker_finds_a_cycle():
    graph = {"a": {"b": 1}, "b": {"c": 2}, "c": {"a": 3}, "d": {"a": 4}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_reference_and_runtime_layers_do_not_import_the_compiler():
    """The oracles stand on their own (a compiler bug cannot hide in its own oracle), and the modules the
    runtime loads name no compiler module outside the functions that compile."""
    graph = import_graph(module_level_only=True)
    runtime = ["fstok", "fstok.api", "fstok.artifact", "fstok.bpe", "fstok.wordpiece", "fstok.pretokenize",
               "fstok.parallel", "fstok.splitters", "fstok.safe_split", "fstok.token_limits", "fstok.decode_stream",
               "fstok.registry", "fstok._text", "fstok._cache", "fstok._load", "fstok.wordpiece_layout"]
    for mod in runtime + [m for m in graph if m.startswith("fstok.reference")]:
        bad = [t for t in graph[mod] if t.startswith("fstok.compile")]
        assert not bad, f"{mod} imports {bad} at module level"


_PROBE = r"""
import json, sys
import fstok
tok = fstok.load(sys.argv[1])
text = "Hello, world! Ünïcödé 你好 " * 3
out = tok.spans(text) if not hasattr(tok, "encode") else tok.encode(text)
if hasattr(tok, "encode_batch"):
    tok.encode_batch([text, text[:7]], num_threads=2)
if hasattr(tok, "encode_with_offsets"):
    tok.encode_with_offsets(text)
if hasattr(tok, "decode"):
    tok.decode(out)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("fstok", "pynini", "networkx", "regex"))))
"""


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    d = tmp_path_factory.mktemp("arch")
    paths = {}
    for name in ("bert-base-uncased", "o200k_base"):
        paths[name] = str(d / f"{name}.fst")
        fstok.get_encoding(name).save(paths[name])
    from fstok.pretokenize import CompiledPattern

    paths["regex-dfa"] = str(d / "cl100k.dfa.fst")
    CompiledPattern.named("cl100k_base").save(paths["regex-dfa"])
    return paths


@pytest.mark.parametrize("kind", ["bert-base-uncased", "o200k_base", "regex-dfa"])
def test_runtime_loads_without_the_compiler(artifacts, kind):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", _PROBE, artifacts[kind]], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert any(m.startswith("fstok.runtime._") for m in loaded), loaded  # the probe did reach the C runtime
    bad = [m for m in loaded if m.startswith(COMPILER_SIDE)]
    assert not bad, f"loading and encoding a {kind} artifact imported {bad}"
