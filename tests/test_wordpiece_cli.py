"""The fstok command line for WordPiece: compile, encode, inspect (summary, graph exports, PNG)."""
import json
import os
import subprocess
import sys

import networkx as nx
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIG1 = os.path.join(ROOT, "compiled", "fig1-vocab.txt")


def run(*args, stdin=None):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fstok", *args], input=stdin, capture_output=True, text=True, env=env)


@pytest.mark.parametrize("cmd", [[], ["compile"], ["encode"], ["inspect"]])
def test_help(cmd):
    r = run(*cmd, "--help")
    assert r.returncode == 0 and "usage: fstok" in r.stdout


def test_compile_encode_inspect(tmp_path):
    art = tmp_path / "fig1.fst"
    r = run("compile", FIG1, "--no-lowercase", "-o", str(art))
    assert r.returncode == 0, r.stderr
    r = run("encode", "--model", str(art), "--tokens", stdin="abcdz abcdx zz\n")
    assert r.returncode == 0 and r.stdout.split() == ["a", "##b", "##c", "##dz", "abcdx", "[UNK]"]
    assert "tokens from" in r.stderr and "MB/s" in r.stderr
    png, dot, gml = tmp_path / "f.png", tmp_path / "f.dot", tmp_path / "f.graphml"
    r = run("inspect", str(art), "--json", "--png", str(png), "--dot", str(dot), "--graphml", str(gml))
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["kind"] == "wordpiece" and s["vocab_size"] == 7 and s["model"]["failure_links"] > 0
    assert png.stat().st_size > 1000 and dot.read_text().startswith("digraph")
    fst = tmp_path / "f.ofst"
    r = run("inspect", str(art), "--fst", str(fst))
    assert r.returncode == 0 and fst.stat().st_size > 100, r.stderr
    g = nx.read_graphml(gml)
    kinds = {d["kind"] for _, _, d in g.edges(data=True)}
    assert kinds == {"trie", "fail"}


def test_encode_bundled_and_errors(tmp_path):
    r = run("encode", "--model", "bert-base-uncased", "-q", stdin="Hello World!")
    assert r.returncode == 0 and r.stdout.split() == ["7592", "2088", "999"]
    r = run("encode", "--model", "no-such-model", stdin="x")
    assert r.returncode == 2 and "unknown encoding" in r.stderr
    bad = tmp_path / "bad.fst"
    bad.write_bytes(b"FSTOKART" + b"\0" * 50)
    r = run("inspect", str(bad))
    assert r.returncode == 2 and "truncated" in r.stderr
