"""Build the C runtime.

Every `fstok/runtime/csrc/mod_<name>.c` becomes the extension module
`fstok.runtime._<name>`; the shared `lib_*.c` files are compiled into every
extension that lists them in a `/* fstok-lib: a b */` line (so separate
subsystems never edit this file).
"""
import glob
import os
import re

from setuptools import Extension, setup

CSRC = os.path.join("fstok", "runtime", "csrc")


def _extensions():
    import numpy  # noqa: F401  (build requirement; headers not needed, arrays cross as buffers)

    exts = []
    for path in sorted(glob.glob(os.path.join(CSRC, "mod_*.c"))):
        name = os.path.basename(path)[4:-2]
        with open(path, encoding="utf-8") as f:
            m = re.search(r"/\*\s*fstok-lib:([^*]*)\*/", f.read())
        libs = m.group(1).split() if m else []
        sources = [path] + [os.path.join(CSRC, f"lib_{lib}.c") for lib in libs]
        exts.append(
            Extension(
                f"fstok.runtime._{name}",
                sources=sources,
                # every header: build_ext rebuilds only when a listed file changed, and a change to a
                # shared header alone (a table size in bpe.h) used to leave a stale module behind
                depends=sorted(glob.glob(os.path.join(CSRC, "*.h"))),
                include_dirs=[CSRC],
                extra_compile_args=["-O3", "-std=c11", "-fvisibility=hidden", "-Wall", "-Wno-unused-function"],
                extra_link_args=["-pthread"],
            )
        )
    return exts


setup(ext_modules=_extensions())
