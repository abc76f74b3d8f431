"""The code examples of tiktoken 0.14.0's README (README.md next to this file, from the sdist), run against
fstok.tiktoken.  Each example is taken from the README's ```python blocks as written, with only the import
swapped; the plugin example is installed by putting its folder on PYTHONPATH instead of `pip install`."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))


def _python_blocks() -> list[str]:
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return re.findall(r"```python\n(.*?)```", readme, re.S)


def _swap_import(code: str) -> str:
    code = code.replace("from tiktoken._educational import *", "from fstok.tiktoken._educational import *")
    return re.sub(r"^import tiktoken$", "import fstok.tiktoken as tiktoken", code, flags=re.M)


def test_readme_has_the_examples():
    blocks = _python_blocks()
    assert len(blocks) == 4
    assert 'tiktoken.get_encoding("o200k_base")' in blocks[0]
    assert "_educational" in blocks[1] and "cl100k_im" in blocks[2] and "find_namespace_packages" in blocks[3]


def test_readme_quickstart():
    exec(_swap_import(_python_blocks()[0]), {})


def test_readme_educational():
    exec(_swap_import(_python_blocks()[1]), {})


def test_readme_extending_with_an_encoding_object():
    import fstok.tiktoken as tiktoken

    ns = {"tiktoken": tiktoken}
    exec(_swap_import(_python_blocks()[2]), ns)
    enc = ns["enc"]
    assert enc.name == "cl100k_im"
    assert enc.encode("<|im_start|>hi<|im_end|>", allowed_special="all") == [100264, 6151, 100265]


def test_readme_extending_with_a_plugin(tmp_path):
    # the README's layout: my_tiktoken_extension/tiktoken_ext/my_encodings.py, no tiktoken_ext/__init__.py
    ext = tmp_path / "my_tiktoken_extension" / "tiktoken_ext"
    ext.mkdir(parents=True)
    (ext / "my_encodings.py").write_text(textwrap.dedent("""
        import fstok.tiktoken as tiktoken

        def cl100k_im():
            base = tiktoken.get_encoding("cl100k_base")
            return {"name": "cl100k_im", "pat_str": base._pat_str, "mergeable_ranks": base._mergeable_ranks,
                    "special_tokens": {**base._special_tokens, "<|im_start|>": 100264, "<|im_end|>": 100265}}

        ENCODING_CONSTRUCTORS = {"cl100k_im": cl100k_im}
    """))
    prog = ("import fstok.tiktoken as tiktoken\n"
            "enc = tiktoken.get_encoding('cl100k_im')\n"
            "print(enc.encode('<|im_start|>hi<|im_end|>', allowed_special='all'))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ext.parent), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip() == "[100264, 6151, 100265]"
